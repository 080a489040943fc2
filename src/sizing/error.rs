//! Why a sizing question has no answer: bad architecture numbers, an impossible layout, or a
//! byte count that does not fit in `u64`.

use super::arch::ArchError;

/// A sizing input that cannot be sized. Every variant names the offending value.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum SizingError {
    /// The architecture parameters are inconsistent (zero heads, KV heads not dividing heads, …).
    #[error("invalid architecture: {0}")]
    Arch(#[from] ArchError),
    /// A byte or FLOP count overflowed `u64`; the inputs are far beyond any real model.
    #[error("{what} overflows a 64-bit byte count; check the model and context numbers")]
    Overflow {
        /// The quantity being computed.
        what: &'static str,
    },
    /// The KV cache type's block does not divide a KV row (llama.cpp has the same rule).
    #[error("KV cache type {dtype} packs {block} values per block, which does not divide a KV row of {row} values; use f16 or f32")]
    KvRow {
        /// The KV cache type.
        dtype: &'static str,
        /// Values per block.
        block: u64,
        /// Values in one token's K or V row of one layer.
        row: u64,
    },
    /// A tensor's element count is not a whole number of its type's blocks.
    #[error("tensor {name}: {elems} elements is not a whole number of {ty} blocks of {block}")]
    PartialBlock {
        /// Tensor name.
        name: String,
        /// Its element count.
        elems: u64,
        /// Its type.
        ty: &'static str,
        /// Elements per block.
        block: u64,
    },
    /// The quantization name is not a known file mix or GGML type.
    #[error("unknown quantization {name:?}; known: {known}")]
    UnknownQuant {
        /// What was asked for.
        name: String,
        /// Known names, comma separated.
        known: String,
    },
    /// The KV cache type name is not supported.
    #[error("unknown KV cache type {name:?}; known: f32, f16, bf16, q8_0, q4_0")]
    UnknownKvDtype {
        /// What was asked for.
        name: String,
    },
    /// Bits per weight outside (0, 64].
    #[error("bits per weight {bpw} is not in (0, 64]")]
    BadBitsPerWeight {
        /// The value.
        bpw: f64,
    },
    /// A context of zero tokens, or a zero prefill batch.
    #[error("{what} must be at least 1")]
    Zero {
        /// `context` or `batch`.
        what: &'static str,
    },
    /// A hardware description is unusable (no memory, no bandwidth, …).
    #[error("hardware {name}: {reason}")]
    Hardware {
        /// Preset name.
        name: String,
        /// What is wrong.
        reason: String,
    },
}

/// Checked `a * b`, naming the quantity on overflow.
pub(crate) fn mul(a: u64, b: u64, what: &'static str) -> Result<u64, SizingError> {
    a.checked_mul(b).ok_or(SizingError::Overflow { what })
}

/// Checked `a + b`, naming the quantity on overflow.
pub(crate) fn add(a: u64, b: u64, what: &'static str) -> Result<u64, SizingError> {
    a.checked_add(b).ok_or(SizingError::Overflow { what })
}
