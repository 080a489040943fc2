//! Quantization: every GGML tensor type by its exact block layout, and the common file mixes.
//!
//! [`GgmlType`] is the tensor type stored in a GGUF tensor-info record. Each type packs
//! `block_elems` weights into `block_bytes` bytes, so a tensor's size is exact integer
//! arithmetic: `n_elems / block_elems * block_bytes`. The layouts follow the `block_*` structs
//! and their `static_assert(sizeof(..))` checks in ggml's `ggml-common.h`; the comment on each
//! variant spells out the struct so the number can be checked by eye.
//!
//! A *file mix* ([`QuantPreset`], e.g. `Q4_K_M`) is not one type: llama.cpp's quantizer keeps
//! some tensors (output, attention V, parts of the FFN) at a higher type. Its size is therefore
//! a measured average bits per weight, not a block layout.

use serde::{Deserialize, Serialize};

/// Elements in a k-quant super-block (`QK_K` in ggml).
const QK_K: u64 = 256;
/// Elements in a legacy quant block (`QK4_0`, `QK8_0`, … in ggml).
const QK32: u64 = 32;

/// A GGML tensor type, with the numeric id used in GGUF files.
///
/// Ids 4 and 5 (Q4_2, Q4_3) and 31–33, 36–38 (the interleaved `*_4_4`/`*_4_8` repacks) were
/// removed from ggml and are rejected by [`GgmlType::from_id`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[allow(non_camel_case_types)]
#[non_exhaustive]
pub enum GgmlType {
    /// 32-bit float: 1 element, 4 bytes.
    F32,
    /// 16-bit float: 1 element, 2 bytes.
    F16,
    /// `{ f16 d; u8 qs[16] }`: 32 elements, 18 bytes (4.5 bpw).
    Q4_0,
    /// `{ f16 d, m; u8 qs[16] }`: 32 elements, 20 bytes (5.0 bpw).
    Q4_1,
    /// `{ f16 d; u8 qh[4]; u8 qs[16] }`: 32 elements, 22 bytes (5.5 bpw).
    Q5_0,
    /// `{ f16 d, m; u8 qh[4]; u8 qs[16] }`: 32 elements, 24 bytes (6.0 bpw).
    Q5_1,
    /// `{ f16 d; i8 qs[32] }`: 32 elements, 34 bytes (8.5 bpw).
    Q8_0,
    /// `{ f16 d, s; i8 qs[32] }`: 32 elements, 36 bytes (9.0 bpw).
    Q8_1,
    /// `{ u8 scales[16]; u8 qs[64]; f16 d, dmin }`: 256 elements, 84 bytes (2.625 bpw).
    Q2_K,
    /// `{ u8 hmask[32]; u8 qs[64]; u8 scales[12]; f16 d }`: 256 elements, 110 bytes (3.4375 bpw).
    Q3_K,
    /// `{ f16 d, dmin; u8 scales[12]; u8 qs[128] }`: 256 elements, 144 bytes (4.5 bpw).
    Q4_K,
    /// `{ f16 d, dmin; u8 scales[12]; u8 qh[32]; u8 qs[128] }`: 256 elements, 176 bytes (5.5 bpw).
    Q5_K,
    /// `{ u8 ql[128]; u8 qh[64]; i8 scales[16]; f16 d }`: 256 elements, 210 bytes (6.5625 bpw).
    Q6_K,
    /// `{ f32 d; i8 qs[256]; i16 bsums[16] }`: 256 elements, 292 bytes (9.125 bpw).
    Q8_K,
    /// `{ f16 d; u16 qs[32] }`: 256 elements, 66 bytes (2.0625 bpw).
    IQ2_XXS,
    /// `{ f16 d; u16 qs[32]; u8 scales[8] }`: 256 elements, 74 bytes (2.3125 bpw).
    IQ2_XS,
    /// `{ f16 d; u8 qs[96] }`: 256 elements, 98 bytes (3.0625 bpw).
    IQ3_XXS,
    /// `{ f16 d; u8 qs[32]; u16 qh[8] }`: 256 elements, 50 bytes (1.5625 bpw).
    IQ1_S,
    /// `{ f16 d; u8 qs[16] }`: 32 elements, 18 bytes (4.5 bpw).
    IQ4_NL,
    /// `{ f16 d; u8 qs[64]; u8 qh[8]; u8 signs[32]; u8 scales[4] }`: 256 elements, 110 bytes.
    IQ3_S,
    /// `{ f16 d; u8 qs[64]; u8 qh[8]; u8 scales[8] }`: 256 elements, 82 bytes (2.5625 bpw).
    IQ2_S,
    /// `{ f16 d; u16 scales_h; u8 scales_l[4]; u8 qs[128] }`: 256 elements, 136 bytes (4.25 bpw).
    IQ4_XS,
    /// 8-bit integer: 1 element, 1 byte.
    I8,
    /// 16-bit integer: 1 element, 2 bytes.
    I16,
    /// 32-bit integer: 1 element, 4 bytes.
    I32,
    /// 64-bit integer: 1 element, 8 bytes.
    I64,
    /// 64-bit float: 1 element, 8 bytes.
    F64,
    /// `{ u8 qs[32]; u8 qh[16]; u8 scales[8] }`: 256 elements, 56 bytes (1.75 bpw).
    IQ1_M,
    /// bfloat16: 1 element, 2 bytes.
    BF16,
    /// `{ u8 qs[48]; u8 qh[4]; f16 d }`: 256 elements, 54 bytes (1.6875 bpw).
    TQ1_0,
    /// `{ u8 qs[64]; f16 d }`: 256 elements, 66 bytes (2.0625 bpw).
    TQ2_0,
    /// `{ u8 e; u8 qs[16] }` (OCP microscaling FP4): 32 elements, 17 bytes (4.25 bpw).
    MXFP4,
}

impl GgmlType {
    /// Every type boyd knows, in id order.
    pub const ALL: [GgmlType; 32] = [
        Self::F32,
        Self::F16,
        Self::Q4_0,
        Self::Q4_1,
        Self::Q5_0,
        Self::Q5_1,
        Self::Q8_0,
        Self::Q8_1,
        Self::Q2_K,
        Self::Q3_K,
        Self::Q4_K,
        Self::Q5_K,
        Self::Q6_K,
        Self::Q8_K,
        Self::IQ2_XXS,
        Self::IQ2_XS,
        Self::IQ3_XXS,
        Self::IQ1_S,
        Self::IQ4_NL,
        Self::IQ3_S,
        Self::IQ2_S,
        Self::IQ4_XS,
        Self::I8,
        Self::I16,
        Self::I32,
        Self::I64,
        Self::F64,
        Self::IQ1_M,
        Self::BF16,
        Self::TQ1_0,
        Self::TQ2_0,
        Self::MXFP4,
    ];

    /// The type with GGUF/ggml id `id`, or `None` for an unknown or removed id.
    pub fn from_id(id: u32) -> Option<Self> {
        Some(match id {
            0 => Self::F32,
            1 => Self::F16,
            2 => Self::Q4_0,
            3 => Self::Q4_1,
            6 => Self::Q5_0,
            7 => Self::Q5_1,
            8 => Self::Q8_0,
            9 => Self::Q8_1,
            10 => Self::Q2_K,
            11 => Self::Q3_K,
            12 => Self::Q4_K,
            13 => Self::Q5_K,
            14 => Self::Q6_K,
            15 => Self::Q8_K,
            16 => Self::IQ2_XXS,
            17 => Self::IQ2_XS,
            18 => Self::IQ3_XXS,
            19 => Self::IQ1_S,
            20 => Self::IQ4_NL,
            21 => Self::IQ3_S,
            22 => Self::IQ2_S,
            23 => Self::IQ4_XS,
            24 => Self::I8,
            25 => Self::I16,
            26 => Self::I32,
            27 => Self::I64,
            28 => Self::F64,
            29 => Self::IQ1_M,
            30 => Self::BF16,
            34 => Self::TQ1_0,
            35 => Self::TQ2_0,
            39 => Self::MXFP4,
            _ => return None,
        })
    }

    /// The GGUF/ggml numeric id.
    pub fn id(self) -> u32 {
        match self {
            Self::F32 => 0,
            Self::F16 => 1,
            Self::Q4_0 => 2,
            Self::Q4_1 => 3,
            Self::Q5_0 => 6,
            Self::Q5_1 => 7,
            Self::Q8_0 => 8,
            Self::Q8_1 => 9,
            Self::Q2_K => 10,
            Self::Q3_K => 11,
            Self::Q4_K => 12,
            Self::Q5_K => 13,
            Self::Q6_K => 14,
            Self::Q8_K => 15,
            Self::IQ2_XXS => 16,
            Self::IQ2_XS => 17,
            Self::IQ3_XXS => 18,
            Self::IQ1_S => 19,
            Self::IQ4_NL => 20,
            Self::IQ3_S => 21,
            Self::IQ2_S => 22,
            Self::IQ4_XS => 23,
            Self::I8 => 24,
            Self::I16 => 25,
            Self::I32 => 26,
            Self::I64 => 27,
            Self::F64 => 28,
            Self::IQ1_M => 29,
            Self::BF16 => 30,
            Self::TQ1_0 => 34,
            Self::TQ2_0 => 35,
            Self::MXFP4 => 39,
        }
    }

    /// The name ggml prints, e.g. `"Q4_K"`, `"F16"`, `"BF16"`.
    pub fn name(self) -> &'static str {
        match self {
            Self::F32 => "F32",
            Self::F16 => "F16",
            Self::Q4_0 => "Q4_0",
            Self::Q4_1 => "Q4_1",
            Self::Q5_0 => "Q5_0",
            Self::Q5_1 => "Q5_1",
            Self::Q8_0 => "Q8_0",
            Self::Q8_1 => "Q8_1",
            Self::Q2_K => "Q2_K",
            Self::Q3_K => "Q3_K",
            Self::Q4_K => "Q4_K",
            Self::Q5_K => "Q5_K",
            Self::Q6_K => "Q6_K",
            Self::Q8_K => "Q8_K",
            Self::IQ2_XXS => "IQ2_XXS",
            Self::IQ2_XS => "IQ2_XS",
            Self::IQ3_XXS => "IQ3_XXS",
            Self::IQ1_S => "IQ1_S",
            Self::IQ4_NL => "IQ4_NL",
            Self::IQ3_S => "IQ3_S",
            Self::IQ2_S => "IQ2_S",
            Self::IQ4_XS => "IQ4_XS",
            Self::I8 => "I8",
            Self::I16 => "I16",
            Self::I32 => "I32",
            Self::I64 => "I64",
            Self::F64 => "F64",
            Self::IQ1_M => "IQ1_M",
            Self::BF16 => "BF16",
            Self::TQ1_0 => "TQ1_0",
            Self::TQ2_0 => "TQ2_0",
            Self::MXFP4 => "MXFP4",
        }
    }

    /// The type named `name` (case-insensitive), e.g. `"q8_0"` or `"F16"`.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|t| t.name().eq_ignore_ascii_case(name.trim()))
    }

    /// One of the K-quants (`Q2_K` … `Q8_K`): 256-element super-blocks whose dot products
    /// boyd's native engine computes against activations in their own 256-block form.
    pub const fn is_k_quant(self) -> bool {
        matches!(
            self,
            Self::Q2_K | Self::Q3_K | Self::Q4_K | Self::Q5_K | Self::Q6_K | Self::Q8_K
        )
    }

    /// Elements packed in one block.
    pub const fn block_elems(self) -> u64 {
        match self {
            Self::F32
            | Self::F16
            | Self::BF16
            | Self::F64
            | Self::I8
            | Self::I16
            | Self::I32
            | Self::I64 => 1,
            Self::Q4_0
            | Self::Q4_1
            | Self::Q5_0
            | Self::Q5_1
            | Self::Q8_0
            | Self::Q8_1
            | Self::IQ4_NL
            | Self::MXFP4 => QK32,
            Self::Q2_K
            | Self::Q3_K
            | Self::Q4_K
            | Self::Q5_K
            | Self::Q6_K
            | Self::Q8_K
            | Self::IQ2_XXS
            | Self::IQ2_XS
            | Self::IQ3_XXS
            | Self::IQ1_S
            | Self::IQ3_S
            | Self::IQ2_S
            | Self::IQ4_XS
            | Self::IQ1_M
            | Self::TQ1_0
            | Self::TQ2_0 => QK_K,
        }
    }

    /// Bytes of one block (see each variant's layout).
    pub const fn block_bytes(self) -> u64 {
        match self {
            Self::I8 => 1,
            Self::F16 | Self::BF16 | Self::I16 => 2,
            Self::F32 | Self::I32 => 4,
            Self::F64 | Self::I64 => 8,
            Self::Q4_0 => 2 + 16,
            Self::Q4_1 => 2 + 2 + 16,
            Self::Q5_0 => 2 + 4 + 16,
            Self::Q5_1 => 2 + 2 + 4 + 16,
            Self::Q8_0 => 2 + 32,
            Self::Q8_1 => 2 + 2 + 32,
            Self::IQ4_NL => 2 + 16,
            Self::MXFP4 => 1 + 16,
            Self::Q2_K => QK_K / 16 + QK_K / 4 + 2 + 2,
            Self::Q3_K => QK_K / 8 + QK_K / 4 + 12 + 2,
            Self::Q4_K => 2 + 2 + 12 + QK_K / 2,
            Self::Q5_K => 2 + 2 + 12 + QK_K / 8 + QK_K / 2,
            Self::Q6_K => QK_K / 2 + QK_K / 4 + QK_K / 16 + 2,
            Self::Q8_K => 4 + QK_K + (QK_K / 16) * 2,
            Self::IQ2_XXS => 2 + (QK_K / 8) * 2,
            Self::IQ2_XS => 2 + (QK_K / 8) * 2 + QK_K / 32,
            Self::IQ3_XXS => 2 + 3 * (QK_K / 8),
            Self::IQ1_S => 2 + QK_K / 8 + (QK_K / 32) * 2,
            Self::IQ3_S => 2 + QK_K / 4 + QK_K / 32 + QK_K / 8 + QK_K / 64,
            Self::IQ2_S => 2 + QK_K / 4 + QK_K / 32 + QK_K / 32,
            Self::IQ4_XS => 2 + 2 + QK_K / 64 + QK_K / 2,
            Self::IQ1_M => QK_K / 8 + QK_K / 16 + QK_K / 32,
            Self::TQ1_0 => (QK_K - 4 * QK_K / 64) / 5 + QK_K / 64 + 2,
            Self::TQ2_0 => QK_K / 4 + 2,
        }
    }

    /// Exact bytes of a tensor of `n_elems` elements, or `None` if `n_elems` is not a whole
    /// number of blocks or the size overflows `u64`.
    pub fn tensor_bytes(self, n_elems: u64) -> Option<u64> {
        let be = self.block_elems();
        if !n_elems.is_multiple_of(be) {
            return None;
        }
        (n_elems / be).checked_mul(self.block_bytes())
    }

    /// Bits per weight of the block layout (e.g. 4.5 for Q4_K, 8.5 for Q8_0).
    pub fn bits_per_weight(self) -> f64 {
        (self.block_bytes() * 8) as f64 / self.block_elems() as f64
    }

    /// Whether this is a quantized (block) type rather than a plain float or integer.
    pub fn is_quantized(self) -> bool {
        self.block_elems() > 1
    }
}

impl std::fmt::Display for GgmlType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Exact parameter count of Llama-3-8B (`meta-llama/Meta-Llama-3-8B`), the model on which
/// llama.cpp's quantize table quotes its file sizes.
const LLAMA3_8B_PARAMS: f64 = 8_030_261_248.0;

/// Bits per weight of a file of `gib` GiB holding Llama-3-8B.
const fn gib_on_llama3_8b(gib: f64) -> f64 {
    gib * 1024.0 * 1024.0 * 1024.0 * 8.0 / LLAMA3_8B_PARAMS
}

/// Where a preset's bits-per-weight figure comes from.
const SRC_QUANT_TABLE: &str = "llama.cpp tools/quantize/quantize.cpp QUANT_OPTIONS: file size \
                               in GiB for Llama-3-8B (8,030,261,248 params) -> bits/weight";
/// Where a preset's bits-per-weight figure comes from (nominal bpw quoted in the same table).
const SRC_QUANT_TABLE_BPW: &str = "llama.cpp tools/quantize/quantize.cpp QUANT_OPTIONS: quoted bpw";
/// Where a plain type's figure comes from.
const SRC_BLOCK: &str = "block layout (ggml-common.h); every tensor stored in this type";

/// A named file mix (`llama-quantize` ftype), sized by its measured average bits per weight.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct QuantPreset {
    /// Canonical name, e.g. `Q4_K_M`.
    pub name: &'static str,
    /// Average bits per weight over the whole file, embeddings and output included.
    pub bits_per_weight: f64,
    /// The type most tensors are stored in.
    pub base: GgmlType,
    /// Where `bits_per_weight` comes from.
    pub source: &'static str,
}

macro_rules! mix {
    ($name:literal, gib $g:expr, $base:ident) => {
        QuantPreset {
            name: $name,
            bits_per_weight: gib_on_llama3_8b($g),
            base: GgmlType::$base,
            source: SRC_QUANT_TABLE,
        }
    };
    ($name:literal, bpw $b:expr, $base:ident) => {
        QuantPreset {
            name: $name,
            bits_per_weight: $b,
            base: GgmlType::$base,
            source: SRC_QUANT_TABLE_BPW,
        }
    };
    ($name:literal, pure $base:ident) => {
        QuantPreset {
            name: $name,
            bits_per_weight: (GgmlType::$base.block_bytes() * 8) as f64
                / GgmlType::$base.block_elems() as f64,
            base: GgmlType::$base,
            source: SRC_BLOCK,
        }
    };
}

/// The file mixes boyd can size by name, ordered from largest to smallest bits per weight.
///
/// Figures with a GiB size are the Llama-3-8B file sizes in llama.cpp's quantize table; the
/// mix ratio shifts a little with vocabulary size, so treat them as ±3%. The IQ figures are the
/// table's quoted bpw; 16/32-bit files are exact.
pub const PRESETS: &[QuantPreset] = &[
    mix!("F32", pure F32),
    mix!("F16", pure F16),
    mix!("BF16", pure BF16),
    mix!("Q8_0", gib 7.96, Q8_0),
    mix!("Q6_K", gib 6.14, Q6_K),
    mix!("Q5_1", gib 5.65, Q5_1),
    mix!("Q5_K_M", gib 5.33, Q5_K),
    mix!("Q5_K_S", gib 5.21, Q5_K),
    mix!("Q5_0", gib 5.21, Q5_0),
    mix!("Q4_1", gib 4.78, Q4_1),
    mix!("Q4_K_M", gib 4.58, Q4_K),
    mix!("IQ4_NL", bpw 4.50, IQ4_NL),
    mix!("Q4_K_S", gib 4.37, Q4_K),
    mix!("Q4_0", gib 4.34, Q4_0),
    mix!("IQ4_XS", bpw 4.25, IQ4_XS),
    mix!("Q3_K_L", gib 4.03, Q3_K),
    mix!("Q3_K_M", gib 3.74, Q3_K),
    mix!("IQ3_M", bpw 3.66, IQ3_S),
    mix!("Q3_K_S", gib 3.41, Q3_K),
    mix!("IQ3_S", bpw 3.44, IQ3_S),
    mix!("IQ3_XS", bpw 3.3, IQ3_S),
    mix!("Q2_K", gib 2.96, Q2_K),
    mix!("IQ3_XXS", bpw 3.06, IQ3_XXS),
    mix!("IQ2_M", bpw 2.7, IQ2_S),
    mix!("IQ2_S", bpw 2.5, IQ2_S),
    mix!("IQ2_XS", bpw 2.31, IQ2_XS),
    mix!("IQ2_XXS", bpw 2.06, IQ2_XXS),
    mix!("TQ2_0", bpw 2.06, TQ2_0),
    mix!("IQ1_M", bpw 1.75, IQ1_M),
    mix!("TQ1_0", bpw 1.69, TQ1_0),
    mix!("IQ1_S", bpw 1.56, IQ1_S),
];

/// Aliases llama-quantize accepts for a mix.
const ALIASES: &[(&str, &str)] = &[("Q4_K", "Q4_K_M"), ("Q5_K", "Q5_K_M"), ("Q3_K", "Q3_K_M")];

impl QuantPreset {
    /// The preset named `name`, case-insensitively (`q4_k_m`, `Q4_K_M`; `Q4_K` = `Q4_K_M`).
    pub fn by_name(name: &str) -> Option<&'static QuantPreset> {
        let name = name.trim();
        let canonical = ALIASES
            .iter()
            .find(|(alias, _)| alias.eq_ignore_ascii_case(name))
            .map_or(name, |(_, to)| to);
        PRESETS
            .iter()
            .find(|p| p.name.eq_ignore_ascii_case(canonical))
    }

    /// Every preset name, largest first (for error messages and `--help`).
    pub fn names() -> impl Iterator<Item = &'static str> {
        PRESETS.iter().map(|p| p.name)
    }

    /// Presets sorted from most to fewest bits per weight.
    pub fn by_size_desc() -> Vec<&'static QuantPreset> {
        let mut v: Vec<_> = PRESETS.iter().collect();
        v.sort_by(|a, b| b.bits_per_weight.total_cmp(&a.bits_per_weight));
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip_and_removed_ids_are_rejected() {
        for t in GgmlType::ALL {
            assert_eq!(GgmlType::from_id(t.id()), Some(t), "{t}");
            assert_eq!(GgmlType::from_name(&t.name().to_lowercase()), Some(t));
        }
        for removed in [4, 5, 31, 32, 33, 36, 37, 38, 40, u32::MAX] {
            assert_eq!(GgmlType::from_id(removed), None, "id {removed}");
        }
    }

    #[test]
    fn block_layouts_match_ggml_static_asserts() {
        let expect: &[(GgmlType, u64, u64)] = &[
            (GgmlType::F32, 1, 4),
            (GgmlType::F16, 1, 2),
            (GgmlType::BF16, 1, 2),
            (GgmlType::Q4_0, 32, 18),
            (GgmlType::Q4_1, 32, 20),
            (GgmlType::Q5_0, 32, 22),
            (GgmlType::Q5_1, 32, 24),
            (GgmlType::Q8_0, 32, 34),
            (GgmlType::Q8_1, 32, 36),
            (GgmlType::Q2_K, 256, 84),
            (GgmlType::Q3_K, 256, 110),
            (GgmlType::Q4_K, 256, 144),
            (GgmlType::Q5_K, 256, 176),
            (GgmlType::Q6_K, 256, 210),
            (GgmlType::Q8_K, 256, 292),
            (GgmlType::IQ2_XXS, 256, 66),
            (GgmlType::IQ2_XS, 256, 74),
            (GgmlType::IQ3_XXS, 256, 98),
            (GgmlType::IQ1_S, 256, 50),
            (GgmlType::IQ4_NL, 32, 18),
            (GgmlType::IQ3_S, 256, 110),
            (GgmlType::IQ2_S, 256, 82),
            (GgmlType::IQ4_XS, 256, 136),
            (GgmlType::IQ1_M, 256, 56),
            (GgmlType::TQ1_0, 256, 54),
            (GgmlType::TQ2_0, 256, 66),
            (GgmlType::MXFP4, 32, 17),
            (GgmlType::I8, 1, 1),
            (GgmlType::I64, 1, 8),
            (GgmlType::F64, 1, 8),
        ];
        for &(t, elems, bytes) in expect {
            assert_eq!((t.block_elems(), t.block_bytes()), (elems, bytes), "{t}");
        }
        assert_eq!(GgmlType::Q4_K.bits_per_weight(), 4.5);
        assert_eq!(GgmlType::Q6_K.bits_per_weight(), 6.5625);
        assert_eq!(GgmlType::TQ1_0.bits_per_weight(), 1.6875);
    }

    #[test]
    fn tensor_bytes_is_exact_and_rejects_partial_blocks() {
        // 4096 x 4096 in Q4_K: 65,536 blocks of 144 bytes.
        assert_eq!(GgmlType::Q4_K.tensor_bytes(4096 * 4096), Some(65_536 * 144));
        assert_eq!(GgmlType::Q8_0.tensor_bytes(64), Some(68));
        assert_eq!(GgmlType::Q4_K.tensor_bytes(100), None);
        assert_eq!(GgmlType::F32.tensor_bytes(u64::MAX), None, "overflow");
        assert_eq!(GgmlType::F16.tensor_bytes(0), Some(0));
    }

    #[test]
    fn presets_look_up_case_insensitively_with_aliases() {
        let p = QuantPreset::by_name("q4_k_m").expect("preset");
        assert_eq!(p.name, "Q4_K_M");
        assert_eq!(QuantPreset::by_name("Q4_K").map(|p| p.name), Some("Q4_K_M"));
        assert!(QuantPreset::by_name("Q9_9").is_none());
        // Llama-3-8B Q4_K_M: llama.cpp prints "4.58 GiB (4.89 BPW)".
        assert!(
            (p.bits_per_weight - 4.899).abs() < 0.01,
            "{}",
            p.bits_per_weight
        );
        let q8 = QuantPreset::by_name("Q8_0").expect("preset");
        assert!(
            (q8.bits_per_weight - 8.515).abs() < 0.01,
            "{}",
            q8.bits_per_weight
        );
        assert_eq!(
            QuantPreset::by_name("f16").map(|p| p.bits_per_weight),
            Some(16.0)
        );
        // A mix is never smaller than its base type's layout (the extra is the output tensor).
        for p in PRESETS {
            assert!(
                p.bits_per_weight + 0.3 >= p.base.bits_per_weight(),
                "{}",
                p.name
            );
        }
    }
}
