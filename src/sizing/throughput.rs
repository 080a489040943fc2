//! Speed: decode is bound by bytes read per token, prefill by FLOPs (or by reading the weights
//! once per micro-batch, whichever is slower).
//!
//! decode s/token  = max(bytes / (eff_d × bandwidth) [+ fitted memory terms],
//!                       unpacking quantized weights [fitted], flops / (eff_p × matrix))
//!                   + fixed [+ fitted attention terms]   (see [`DECODE_ROOFLINE`])
//! prefill s/token = max(flops / (eff_p × matrix), weights / (eff_d × bandwidth × ubatch))
//!                   + fixed / ubatch
//! where `fixed = fixed_cost_s + per_layer_cost_s × layers` (launches, synchronisation), and
//! bytes = the weights a token touches (all matrices, one embedding row) + the KV cache at the
//! current depth. The efficiencies and fixed costs come from [`Hardware::speed`]: documented
//! defaults per backend, or a calibration profile.

use serde::Serialize;

use super::arch::ArchParams;
use super::error::{add, SizingError};
use super::hardware::Hardware;
use super::kv::{kv_cache, KvDtype};
use super::linfit::Roofline;
use super::weights::WeightBytes;
use crate::units::{Bytes, TokensPerSec};

/// The speed estimate and every input that produced it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Speed {
    /// Weight bytes one decode step reads (all matrices, one f32 embedding row).
    pub weight_bytes_per_token: Bytes,
    /// KV bytes read by the last token at full context.
    pub kv_bytes_at_ctx: Bytes,
    /// Decode speed at an empty context.
    pub decode_empty: TokensPerSec,
    /// Decode speed with the whole context filled.
    pub decode_at_ctx: TokensPerSec,
    /// Prefill speed over a prompt of the whole context.
    pub prefill: TokensPerSec,
    /// Whether prefill is limited by `compute` or `memory`.
    pub prefill_bound: &'static str,
    /// Matrix FLOPs per prompt token, attention averaged over the prompt.
    pub prefill_flops_per_token: f64,
    /// Share of peak bandwidth the decode estimate achieves at an empty context (weight bytes
    /// per token × tokens/s over the peak), whatever terms produced it.
    pub decode_efficiency: f64,
    /// Share of peak matrix throughput the prefill estimate achieves (FLOPs per token ×
    /// prefill tokens/s over the peak), whatever terms produced it.
    pub prefill_efficiency: f64,
    /// Fixed seconds per forward pass (base + per layer × layers).
    pub fixed_cost_s: f64,
    /// Where the efficiencies and fixed cost come from.
    pub efficiency_source: String,
}

/// Weight bytes a decode step reads: every matrix but the embedding, which is a row lookup.
pub fn weight_bytes_per_token(arch: &ArchParams, w: &WeightBytes) -> Result<u64, SizingError> {
    let row = u64::from(arch.hidden) * 4;
    add(
        add(w.layers.0, w.lm_head().0, "bytes per token")?,
        row,
        "bytes per token",
    )
}

/// Decode tokens/s reading `bytes` per token at `efficiency × bandwidth`, plus `fixed_s`.
pub fn decode_tokens_per_sec(bytes: u64, hw: &Hardware, fixed_s: f64) -> TokensPerSec {
    let bw = hw.speed.decode_efficiency * hw.bandwidth.0;
    TokensPerSec(1.0 / (bytes as f64 / bw + fixed_s))
}

/// Matrix FLOPs per token of every weight matrix but the embedding lookup; the LM head runs
/// once per prompt (only the last position's logits are computed), so it is left out.
pub fn matmul_flops(arch: &ArchParams, w: &WeightBytes) -> f64 {
    let embd = arch.embedding_params() as f64;
    let head = if w.tied { 0.0 } else { embd };
    2.0 * (w.params as f64 - embd - head).max(0.0)
}

/// Attention FLOPs (scores and weighted values) of one token attending to `span` positions,
/// summed over layers; windowed layers attend to at most their window.
pub fn attention_flops(arch: &ArchParams, span: f64) -> f64 {
    let per_pos =
        2.0 * f64::from(arch.n_heads) * (f64::from(arch.head_dim) + f64::from(arch.head_dim_v));
    (0..arch.n_layers)
        .map(|l| match arch.sliding_window {
            Some(win) if arch.is_sliding_layer(l) => per_pos * span.min(f64::from(win)),
            _ => per_pos * span,
        })
        .sum()
}

/// Matrix FLOPs for one prompt token over a prompt of `prompt` tokens (attention averaged).
fn flops_per_token(arch: &ArchParams, w: &WeightBytes, prompt: u32) -> f64 {
    matmul_flops(arch, w) + attention_flops(arch, (f64::from(prompt) + 1.0) / 2.0)
}

/// Bytes of K and V that llama.cpp's unfused attention (`-fa 0`, the default of the published
/// 2024 builds) reads for one token attending to `span` positions, summed over layers: its
/// `K·q` and `V·softmax` products run once per *query* head, so a grouped-query cache is read
/// `n_heads / n_kv_heads` times over. For an f16 cache this equals [`attention_flops`] (two
/// FLOPs per two-byte value).
pub fn attention_reads(arch: &ArchParams, kv: KvDtype, span: f64) -> f64 {
    let block = kv.ggml().block_elems();
    let per_value = kv.row_bytes(block).map_or(2.0, |b| b as f64 / block as f64);
    attention_flops(arch, span) / 2.0 * per_value
}

/// The decode model's terms, seconds per token per unit coefficient, for a step that reads
/// `bytes` (weights and KV), multiplies `quantized` quantized weights (0 for a 16/32-bit file)
/// and attends to `depth` positions of a `kv` cache:
///
/// `[bytes/BW, bytes/matrix, quantized/matrix, bytes·1e-12, 1, layers,
///   attention_flops/matrix, attention_flops·1e-15, attention_reads/BW]`
///
/// The time is [`decode_time`] of them and [`SpeedParams::decode_coefficients`].
pub fn decode_terms(
    arch: &ArchParams,
    kv: KvDtype,
    bytes: f64,
    quantized: f64,
    depth: f64,
    bandwidth: f64,
    matrix_flops: f64,
) -> [f64; DECODE_TERMS] {
    step_terms(
        bytes,
        quantized,
        attention_flops(arch, depth),
        attention_reads(arch, kv, depth),
        arch.n_layers,
        bandwidth,
        matrix_flops,
    )
}

/// Number of decode terms ([`decode_terms`]).
pub const DECODE_TERMS: usize = 9;

/// [`decode_terms`] for part of a model: `bytes` read, `quantized` weights unpacked,
/// `attention` FLOPs over `attention_bytes` of K and V reads, and `layers` layers run on a
/// device of `bandwidth` and `matrix_flops` (one side of a partial offload,
/// [`crate::sizing::offload`]).
pub fn step_terms(
    bytes: f64,
    quantized: f64,
    attention: f64,
    attention_bytes: f64,
    layers: u32,
    bandwidth: f64,
    matrix_flops: f64,
) -> [f64; DECODE_TERMS] {
    [
        bytes / bandwidth,
        bytes / matrix_flops,
        quantized / matrix_flops,
        bytes * 1e-12,
        1.0,
        f64::from(layers),
        attention / matrix_flops,
        attention * 1e-15,
        attention_bytes / bandwidth,
    ]
}

/// The decode roofline over [`decode_terms`]: a step waits on its memory side (bytes over
/// bandwidth, over matrix throughput, and at a fixed rate) or on unpacking its quantized
/// weights, whichever is slower; the fixed, per-layer and attention terms are added to it.
pub const DECODE_ROOFLINE: Roofline<'static> = Roofline {
    memory: &[0, 1, 3],
    compute: &[2],
};

/// Seconds per decode step for [`decode_terms`] `x` and coefficients `coef`
/// ([`SpeedParams::decode_coefficients`]): [`DECODE_ROOFLINE`].
pub fn decode_time(x: &[f64; DECODE_TERMS], coef: &[f64; DECODE_TERMS]) -> f64 {
    DECODE_ROOFLINE.time(x, coef)
}

/// Weights a decode step multiplies that are stored quantized (need unpacking): the matmul
/// weights of a file averaging under 16 bits per weight, none for a 16/32-bit file.
pub fn quantized_weights(arch: &ArchParams, w: &WeightBytes) -> f64 {
    if w.bits_per_weight < 15.5 {
        matmul_flops(arch, w) / 2.0
    } else {
        0.0
    }
}

/// The prefill model's terms per prompt token:
/// `[matmul/matrix, attention/matrix, matmul·1e-15, attention·1e-15]`, dotted with
/// [`SpeedParams::prefill_coefficients`].
pub fn prefill_terms(matmul: f64, attention: f64, matrix_flops: f64) -> [f64; 4] {
    [
        matmul / matrix_flops,
        attention / matrix_flops,
        matmul * 1e-15,
        attention * 1e-15,
    ]
}

fn dot<const N: usize>(a: [f64; N], b: [f64; N]) -> f64 {
    a.iter().zip(b).map(|(x, c)| x * c).sum()
}

/// Decode and prefill speed of `arch` with weights `w`, KV type `kv`, context `ctx`,
/// prefill micro-batch `ubatch`, on `hw`.
pub fn speed(
    arch: &ArchParams,
    w: &WeightBytes,
    kv: KvDtype,
    ctx: u32,
    ubatch: u32,
    hw: &Hardware,
) -> Result<Speed, SizingError> {
    if ctx == 0 {
        return Err(SizingError::Zero { what: "context" });
    }
    if ubatch == 0 {
        return Err(SizingError::Zero { what: "batch" });
    }
    let s = &hw.speed;
    let fixed = s.fixed_cost_s + s.per_layer_cost_s * f64::from(arch.n_layers);
    let wbytes = weight_bytes_per_token(arch, w)?;
    let kv_full = kv_cache(arch, kv, ctx)?.total.0;
    let matrix = s.prefill_efficiency * hw.matrix_flops;
    let bw = s.effective_decode_efficiency(hw.bandwidth.0, hw.matrix_flops) * hw.bandwidth.0;
    let dc = s.decode_coefficients();
    let decode_at = |kv_bytes: u64, depth: f64| -> TokensPerSec {
        let t = decode_time(
            &decode_terms(
                arch,
                kv,
                wbytes as f64 + kv_bytes as f64,
                quantized_weights(arch, w),
                depth,
                hw.bandwidth.0,
                hw.matrix_flops,
            ),
            &dc,
        );
        let compute = 2.0 * w.params as f64 / matrix + fixed;
        TokensPerSec(1.0 / t.max(compute))
    };
    let flops = flops_per_token(arch, w, ctx);
    let ub = f64::from(ubatch.min(ctx));
    let span = (f64::from(ctx) + 1.0) / 2.0;
    let t_compute = dot(
        prefill_terms(
            matmul_flops(arch, w),
            attention_flops(arch, span),
            hw.matrix_flops,
        ),
        s.prefill_coefficients(),
    );
    let t_memory = wbytes as f64 / (bw * ub);
    let (t, bound) = if t_compute >= t_memory {
        (t_compute, "compute")
    } else {
        (t_memory, "memory")
    };
    let prefill = 1.0 / (t + fixed / ub);
    let decode_empty = decode_at(0, 0.0);
    Ok(Speed {
        weight_bytes_per_token: Bytes(wbytes),
        kv_bytes_at_ctx: Bytes(kv_full),
        decode_empty,
        decode_at_ctx: decode_at(kv_full, f64::from(ctx)),
        prefill: TokensPerSec(prefill),
        prefill_bound: bound,
        prefill_flops_per_token: flops,
        decode_efficiency: wbytes as f64 * decode_empty.0 / hw.bandwidth.0,
        prefill_efficiency: flops * prefill / hw.matrix_flops,
        fixed_cost_s: fixed,
        efficiency_source: s.source.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sizing::hardware::{Backend, SpeedParams};
    use crate::sizing::kv::tests::llama3_8b;
    use crate::sizing::weights::from_params;
    use crate::units::BytesPerSec;

    fn hw(bw: f64) -> Hardware {
        let mut h = Hardware::new(
            "t",
            "t",
            Backend::Cuda,
            Bytes(1 << 40),
            1.0,
            BytesPerSec(bw),
            100e12,
            "test",
        )
        .expect("hw");
        h.speed = SpeedParams::simple(0.5, 0.35, 0.0, 0.0, "test".into());
        h
    }

    #[test]
    fn decode_is_efficiency_times_bandwidth_over_bytes() {
        let arch = llama3_8b();
        let w = from_params(&arch, 8_030_261_248, 8.0).expect("w");
        let h = hw(1e12);
        let s = speed(&arch, &w, KvDtype::F16, 8192, 512, &h).expect("speed");
        // Bytes read: all weights but the embedding, plus one f32 row.
        let wb = 8_030_261_248 - 128_256 * 4096 + 4096 * 4;
        assert_eq!(s.weight_bytes_per_token, Bytes(wb));
        let expect = 0.5e12 / wb as f64;
        assert!(
            (s.decode_empty.0 - expect).abs() < 1e-9,
            "{}",
            s.decode_empty.0
        );
        let at_ctx = 0.5e12 / (wb + Bytes::GIB) as f64;
        assert!((s.decode_at_ctx.0 - at_ctx).abs() < 1e-9);
        assert!(s.decode_at_ctx < s.decode_empty);
    }

    #[test]
    fn attention_reads_count_k_and_v_once_per_query_head() {
        let arch = llama3_8b();
        // 32 layers × 32 query heads × (128 + 128) values × 2 bytes × 1000 positions.
        let f16 = attention_reads(&arch, KvDtype::F16, 1000.0);
        assert_eq!(f16, 32.0 * 32.0 * 256.0 * 2.0 * 1000.0);
        assert_eq!(f16, attention_flops(&arch, 1000.0));
        // q8_0: 34 bytes per 32 values.
        let q8 = attention_reads(&arch, KvDtype::Q8_0, 1000.0);
        assert!((q8 - 32.0 * 32.0 * 256.0 * 34.0 / 32.0 * 1000.0).abs() < 1e-6);
        // The term is the reads over bandwidth, and only it moves with the read coefficient.
        let x = decode_terms(&arch, KvDtype::F16, 1e9, 0.0, 1000.0, 1e12, 1e14);
        assert_eq!(x[8], f16 / 1e12);
        let mut h = hw(1e12);
        let s0 = speed(
            &arch,
            &from_params(&arch, 8_030_261_248, 16.0).expect("w"),
            KvDtype::F16,
            8192,
            512,
            &h,
        )
        .expect("s0");
        h.speed.attention_read_cost = 1.0;
        let s1 = speed(
            &arch,
            &from_params(&arch, 8_030_261_248, 16.0).expect("w"),
            KvDtype::F16,
            8192,
            512,
            &h,
        )
        .expect("s1");
        assert_eq!(
            s0.decode_empty, s1.decode_empty,
            "no reads at an empty cache"
        );
        let extra = 1.0 / s1.decode_at_ctx.0 - 1.0 / s0.decode_at_ctx.0;
        let want = attention_reads(&arch, KvDtype::F16, 8192.0) / 1e12;
        assert!((extra / want - 1.0).abs() < 1e-9, "{extra} vs {want}");
    }

    #[test]
    fn fixed_cost_caps_tiny_models_and_prefill_is_faster_than_decode() {
        let arch = llama3_8b();
        let w = from_params(&arch, 8_030_261_248, 4.5).expect("w");
        let mut h = hw(1e12);
        h.speed.fixed_cost_s = 0.01;
        let s = speed(&arch, &w, KvDtype::F16, 4096, 512, &h).expect("speed");
        assert!(s.decode_empty.0 < 100.0, "{}", s.decode_empty.0);
        assert!(s.prefill > s.decode_empty);
        assert_eq!(s.prefill_bound, "compute");
        // 2 x (8,030,261,248 - 2 x 128,256 x 4096) matmul params
        // + 32 layers x 2 x 32 heads x (128 + 128) x (4096 + 1) / 2 average span.
        let expect = 2.0 * 6_979_588_096.0 + 32.0 * 16_384.0 * 2048.5;
        assert_eq!(s.prefill_flops_per_token, expect);
    }
}
