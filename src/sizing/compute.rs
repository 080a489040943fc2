//! Compute buffers: the activations alive while one layer runs, for a prefill micro-batch and
//! for a decode step, plus the logits.
//!
//! Layers run one after another, so the peak is one layer's working set, not the sum over
//! layers. The model follows boyd's runtime (candle): activations in f32, attention
//! materialized in full (scores and softmax, no flash attention), K and V repeated to all query
//! heads for GQA (`repeat_kv`), logits only for the last position. On CUDA a prefill matmul may
//! dequantize a whole weight matrix to f32 first; that scratch is counted separately.

use serde::Serialize;

use super::arch::ArchParams;
use super::error::{add, mul, SizingError};
use super::hardware::Backend;
use crate::units::Bytes;

/// Bytes of one activation value (candle computes in f32).
const ACT_BYTES: u64 = 4;

/// Default prefill micro-batch, tokens (llama.cpp's `-ub 512` default).
pub const DEFAULT_UBATCH: u32 = 512;

/// Activation memory, term by term.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ComputeBuffers {
    /// Prefill micro-batch the prefill term assumes (capped at the context).
    pub ubatch: u32,
    /// One layer's activations while prefilling `ubatch` tokens against the full context.
    pub prefill: Bytes,
    /// One layer's activations for one decode step at the full context.
    pub decode: Bytes,
    /// Temporary f32 copy of the largest weight matrix during prefill (CUDA only).
    pub dequant_scratch: Bytes,
    /// Logits of the last position (vocab × f32).
    pub logits: Bytes,
    /// `max(prefill + dequant_scratch, decode) + logits`.
    pub total: Bytes,
}

/// One layer's f32 activations for `n` new tokens attending to `kv_len` positions.
fn layer_activations(arch: &ArchParams, n: u64, kv_len: u64) -> Result<u64, SizingError> {
    const W: &str = "compute buffer";
    let heads = u64::from(arch.n_heads);
    let (hd, hd_v) = (u64::from(arch.head_dim), u64::from(arch.head_dim_v));
    // residual, normed input, attention output projection, FFN output
    let hidden = mul(mul(4, n, W)?, u64::from(arch.hidden), W)?;
    let q = mul(mul(n, heads, W)?, hd, W)?;
    let kv_new = mul(n, add(arch.k_row_elems(), arch.v_row_elems(), W)?, W)?;
    // K and V expanded to every query head over the whole context (GQA repeat).
    let kv_rep = if arch.n_kv_heads < arch.n_heads {
        mul(mul(heads, kv_len, W)?, add(hd, hd_v, W)?, W)?
    } else {
        0
    };
    // scores and their softmax
    let scores = mul(mul(mul(2, heads, W)?, n, W)?, kv_len, W)?;
    let attn_out = mul(mul(n, heads, W)?, hd_v, W)?;
    // gate, up, and activated product
    let ffn = mul(mul(3, n, W)?, u64::from(arch.ffn), W)?;
    let elems = [hidden, q, kv_new, kv_rep, scores, attn_out, ffn]
        .into_iter()
        .try_fold(0u64, |a, b| add(a, b, W))?;
    mul(elems, ACT_BYTES, W)
}

/// Compute buffers at context `ctx` with prefill micro-batch `ubatch` on `backend`.
pub fn compute_buffers(
    arch: &ArchParams,
    ctx: u32,
    ubatch: u32,
    backend: Backend,
) -> Result<ComputeBuffers, SizingError> {
    arch.validate()?;
    if ctx == 0 {
        return Err(SizingError::Zero { what: "context" });
    }
    if ubatch == 0 {
        return Err(SizingError::Zero { what: "batch" });
    }
    let ub = ubatch.min(ctx);
    // The widest attention span of any layer.
    let all_windowed = arch.n_sliding_layers() == arch.n_layers;
    let span = match arch.sliding_window {
        Some(w) if all_windowed => ctx.min(w),
        _ => ctx,
    };
    let prefill = layer_activations(arch, u64::from(ub), u64::from(span))?;
    let decode = layer_activations(arch, 1, u64::from(span))?;
    let dequant_scratch = if backend.prefill_dequant_scratch() && ub > 1 {
        let h = u64::from(arch.hidden);
        let widest = u64::from(arch.ffn).max(u64::from(arch.n_heads) * u64::from(arch.head_dim));
        mul(
            mul(h, widest, "dequant scratch")?,
            ACT_BYTES,
            "dequant scratch",
        )?
    } else {
        0
    };
    let logits = mul(u64::from(arch.vocab), ACT_BYTES, "logits")?;
    let total = add(
        add(prefill, dequant_scratch, "compute buffer")?.max(decode),
        logits,
        "compute buffer",
    )?;
    Ok(ComputeBuffers {
        ubatch: ub,
        prefill: Bytes(prefill),
        decode: Bytes(decode),
        dequant_scratch: Bytes(dequant_scratch),
        logits: Bytes(logits),
        total: Bytes(total),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sizing::kv::tests::llama3_8b;

    #[test]
    fn decode_step_of_llama3_8b_is_hand_computed() {
        let arch = llama3_8b();
        let c = compute_buffers(&arch, 1024, 512, Backend::Cpu).expect("compute");
        // n = 1, kv_len = 1024:
        // hidden 4*4096 + q 4096 + kv_new 2048 + kv_rep 32*1024*256 + scores 2*32*1024
        // + attn_out 4096 + ffn 3*14336, all x 4 bytes.
        let elems = 4 * 4096 + 4096 + 2048 + 32 * 1024 * 256 + 2 * 32 * 1024 + 4096 + 3 * 14336;
        assert_eq!(c.decode, Bytes(elems * 4));
        assert_eq!(c.logits, Bytes(128_256 * 4));
        assert_eq!(c.dequant_scratch, Bytes(0));
        assert!(c.prefill > c.decode);
        assert_eq!(c.total, Bytes(c.prefill.0 + c.logits.0));
    }

    #[test]
    fn ubatch_is_capped_at_context_and_cuda_adds_scratch() {
        let arch = llama3_8b();
        let c = compute_buffers(&arch, 100, 512, Backend::Cuda).expect("compute");
        assert_eq!(c.ubatch, 100);
        assert_eq!(c.dequant_scratch, Bytes(4096 * 14336 * 4));
        assert!(matches!(
            compute_buffers(&arch, 0, 512, Backend::Cpu),
            Err(SizingError::Zero { what: "context" })
        ));
        assert!(compute_buffers(&arch, 10, 0, Backend::Cpu).is_err());
    }
}
