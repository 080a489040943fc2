//! Compute buffers: the activations alive while the model runs a prefill micro-batch or a
//! decode step, plus the logits.
//!
//! Layers run one after another, so the peak is one layer's working set, not the sum over
//! layers. How big that set is depends on the engine that runs the model, so there are two
//! layouts ([`ComputeLayout`]):
//!
//! - **native** — boyd's CPU engine (`runtime::native`, the default on the CPU). It keeps one
//!   set of `f32` scratch vectors for the whole model, shared by every layer; they only grow,
//!   so the peak is each vector at its largest, for `n = min(ubatch, ctx)` tokens. Attention
//!   reads the KV cache in place and keeps one score row per worker thread, so nothing here
//!   grows with `ctx × n`: only the score rows grow with the context. A batched product also
//!   packs weight panels per worker thread for its duration (`kernels::cpu`), a bounded term.
//! - **candle** — candle's tensors (GPUs, and the CPU with `BOYD_ENGINE=candle`): activations
//!   in f32, attention materialized in full (scores and softmax over the whole context, no
//!   flash attention), K and V repeated to all query heads for GQA (`repeat_kv`). On CUDA a
//!   prefill matmul may dequantize a whole weight matrix to f32 first; that scratch is counted
//!   separately.
//!
//! Both compute logits for the last position only.

use serde::{Deserialize, Serialize};

use super::arch::ArchParams;
use super::error::{add, mul, SizingError};
use super::hardware::{Backend, Hardware};
use crate::kernels::cpu;
use crate::units::Bytes;

/// Bytes of one activation value (both engines compute in f32).
const ACT_BYTES: u64 = 4;

/// Default prefill micro-batch, tokens (llama.cpp's `-ub 512` default).
pub const DEFAULT_UBATCH: u32 = 512;

/// Worker threads the native layout assumes when the hardware does not say how many it has
/// (a preset): each holds one attention score row and one packed-panel chunk.
pub const ASSUMED_THREADS: u32 = 16;

/// Weight codes one worker packs per chunk of a batched product, or one 8-row panel
/// (`8 × cols` codes) when that is larger.
const PANEL_CHUNK_BYTES: u64 = cpu::PANEL_CHUNK_BYTES as u64;

/// The f32 output slab of a worker's panel chunk: a token slab × 8 rows.
const PANEL_SLAB_BYTES: u64 = (cpu::PANEL_TOKEN_SLAB * cpu::PANEL_ROWS) as u64 * ACT_BYTES;

/// Fewest tokens for which a product packs panels.
const PANEL_MIN_TOKENS: u32 = cpu::PANEL_MIN_TOKENS as u32;

/// How the engine that runs the model lays out its activations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ComputeLayout {
    /// boyd's native CPU engine: growing scratch vectors shared by all layers, 8-bit
    /// activation blocks, one attention score row per thread.
    Native,
    /// candle's tensors: f32 activations, `repeat_kv`, scores over the whole context.
    Candle,
}

impl ComputeLayout {
    /// The engine boyd's runtime picks by default on `backend`: native on the CPU, candle on
    /// GPUs (`runtime::decoder::EngineKind::Auto`).
    pub fn for_backend(backend: Backend) -> Self {
        match backend {
            Backend::Cpu => Self::Native,
            Backend::Cuda | Backend::Metal => Self::Candle,
        }
    }

    /// The layout of an engine as `Decoder::engine_name` names it (`native/avx2`, `candle`).
    pub fn from_engine_name(name: &str) -> Option<Self> {
        if name == "native" || name.starts_with("native/") {
            Some(Self::Native)
        } else if name == "candle" {
            Some(Self::Candle)
        } else {
            None
        }
    }

    /// Lower-case name.
    pub fn name(self) -> &'static str {
        match self {
            Self::Native => "native",
            Self::Candle => "candle",
        }
    }
}

impl std::fmt::Display for ComputeLayout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Activation memory, term by term.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ComputeBuffers {
    /// The engine's layout these terms follow.
    pub layout: ComputeLayout,
    /// Prefill micro-batch the prefill term assumes (capped at the context).
    pub ubatch: u32,
    /// Activations while prefilling `ubatch` tokens against the full context.
    pub prefill: Bytes,
    /// Activations for one decode step at the full context.
    pub decode: Bytes,
    /// Temporary f32 copy of the largest weight matrix during prefill (CUDA only).
    pub dequant_scratch: Bytes,
    /// Logits of the last position (vocab × f32).
    pub logits: Bytes,
    /// Native layout: whether the 256-block (K-quant) activation form is counted — a K-quant
    /// weight is present, or the tensor types are unknown. Always false for candle.
    pub k_quant_acts: bool,
    /// `max(prefill + dequant_scratch, decode) + logits`.
    pub total: Bytes,
}

/// candle: one layer's f32 activations for `n` new tokens attending to `kv_len` positions.
fn candle_layer(arch: &ArchParams, n: u64, kv_len: u64) -> Result<u64, SizingError> {
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

/// Native: the engine's scratch (`runtime::native::Scratch`) sized for `n` tokens, without the
/// attention score rows. Every vector is shared by all layers.
fn native_scratch(arch: &ArchParams, n: u64, k_quant_acts: bool) -> Result<u64, SizingError> {
    const W: &str = "compute buffer";
    let h = u64::from(arch.hidden);
    let q_rows = mul(u64::from(arch.n_heads), u64::from(arch.head_dim), W)?;
    let att_rows = mul(u64::from(arch.n_heads), u64::from(arch.head_dim_v), W)?;
    let (k_rows, v_rows) = (arch.k_row_elems(), arch.v_row_elems());
    let ffn = u64::from(arch.ffn);
    // Output of a fused product: Q|K|V rows, or gate|up rows.
    let qkv_rows = add(add(q_rows, k_rows, W)?, v_rows, W)?;
    let proj_rows = qkv_rows.max(mul(2, ffn, W)?);
    // Widest input a product quantizes: the normed hidden state, the attention output, or
    // the activated FFN product.
    let act_w = h.max(att_rows).max(ffn);
    // x, xn, tmp | q | att | k | v | gate, up | proj | the activations' f32 copy
    let rows = [
        mul(3, h, W)?,
        q_rows,
        att_rows,
        k_rows,
        v_rows,
        mul(2, ffn, W)?,
        proj_rows,
        act_w,
    ]
    .into_iter()
    .try_fold(0u64, |a, b| add(a, b, W))?;
    let f32_bytes = mul(mul(n, rows, W)?, ACT_BYTES, W)?;
    let acts = mul(n, act_w, W)?;
    // 32-block form: one i8 per value, a scale and a scaled sum (f32) per 32.
    let b32 = add(acts, mul(acts / 32, 2 * ACT_BYTES, W)?, W)?;
    // 256-block form: one i8 per value, an f32 scale per 256, an i16 sum and its scaled f32
    // per 16, a scaled f32 sum per 32.
    let bk = if k_quant_acts {
        [
            acts,
            mul(acts / 256, 4, W)?,
            mul(acts / 16, 2 + 4, W)?,
            mul(acts / 32, 4, W)?,
        ]
        .into_iter()
        .try_fold(0u64, |a, b| add(a, b, W))?
    } else {
        0
    };
    add(add(f32_bytes, b32, W)?, bk, W)
}

/// Native: one worker thread's packed-panel chunk during a batched product, at most. Each
/// 8-row panel of `c` columns holds `8c` codes, `2hc` bytes of f32 scales and offsets and
/// `c + hc/4` bytes of row buffers, where `h` is 2 for `Q6_K` (a scale per 16) and 1 otherwise:
/// `(36 + 9h) / 32` of its codes. The widest input sets the largest chunk.
fn native_panel_per_thread(arch: &ArchParams, k_quant_acts: bool) -> Result<u64, SizingError> {
    const W: &str = "compute buffer";
    let widest = u64::from(arch.hidden)
        .max(u64::from(arch.n_heads) * u64::from(arch.head_dim_v))
        .max(u64::from(arch.ffn));
    let codes = PANEL_CHUNK_BYTES.max(mul(8, widest, W)?);
    let h = if k_quant_acts { 2 } else { 1 };
    add(mul(codes, 36 + 9 * h, W)? / 32, PANEL_SLAB_BYTES, W)
}

/// The prefill batch the native engine really runs at context `ctx`: when its sliding-window
/// layers keep rings (the window plus [`WINDOW_SLACK`](super::kv::WINDOW_SLACK) is shorter than
/// the context), the decoder splits a forward call into pieces of half that slack + 1 positions,
/// what a ring takes between compactions (`runtime::kv_cache::KvCache::max_batch`).
pub fn native_ubatch(arch: &ArchParams, ctx: u32, ub: u32) -> u32 {
    let slack = super::kv::WINDOW_SLACK;
    match arch.sliding_window {
        Some(w) if arch.n_sliding_layers() > 0 && w.saturating_add(slack) < ctx => {
            ub.min(slack / 2 + 1)
        }
        _ => ub,
    }
}

/// Compute buffers at context `ctx` with prefill micro-batch `ubatch` on `hw`, in the layout
/// of `hw.compute_layout`.
///
/// `k_quants` says whether any weight is a K-quant (from the file's tensor types); `None`
/// when unknown, and then the native layout counts the K-quant activation form (an upper
/// bound). The native vectors grow with `Vec`'s amortized doubling, so a run whose first batch
/// was shorter than a later one may hold up to twice the sizes counted here.
pub fn compute_buffers(
    arch: &ArchParams,
    ctx: u32,
    ubatch: u32,
    hw: &Hardware,
    k_quants: Option<bool>,
) -> Result<ComputeBuffers, SizingError> {
    arch.validate()?;
    if ctx == 0 {
        return Err(SizingError::Zero { what: "context" });
    }
    if ubatch == 0 {
        return Err(SizingError::Zero { what: "batch" });
    }
    let layout = hw.compute_layout;
    let ub = match layout {
        ComputeLayout::Native => native_ubatch(arch, ctx, ubatch.min(ctx)),
        ComputeLayout::Candle => ubatch.min(ctx),
    };
    // The widest attention span of any layer.
    let all_windowed = arch.n_sliding_layers() == arch.n_layers;
    let span = match arch.sliding_window {
        Some(w) if all_windowed => ctx.min(w),
        _ => ctx,
    };
    let logits = mul(u64::from(arch.vocab), ACT_BYTES, "logits")?;
    let (prefill, decode, dequant_scratch, k_quant_acts) = match layout {
        ComputeLayout::Native => {
            let k_acts = k_quants.unwrap_or(true);
            let threads = u64::from(hw.threads.unwrap_or(ASSUMED_THREADS).max(1));
            let scores = mul(
                mul(threads, u64::from(span), "scores")?,
                ACT_BYTES,
                "scores",
            )?;
            let panels = mul(
                threads,
                native_panel_per_thread(arch, k_acts)?,
                "compute buffer",
            )?;
            let at = |n: u32| -> Result<u64, SizingError> {
                let p = if n >= PANEL_MIN_TOKENS { panels } else { 0 };
                [native_scratch(arch, u64::from(n), k_acts)?, scores, p]
                    .into_iter()
                    .try_fold(0u64, |a, b| add(a, b, "compute buffer"))
            };
            (at(ub)?, at(1)?, 0, k_acts)
        }
        ComputeLayout::Candle => {
            let prefill = candle_layer(arch, u64::from(ub), u64::from(span))?;
            let decode = candle_layer(arch, 1, u64::from(span))?;
            let dequant_scratch = if hw.backend.prefill_dequant_scratch() && ub > 1 {
                let h = u64::from(arch.hidden);
                let widest =
                    u64::from(arch.ffn).max(u64::from(arch.n_heads) * u64::from(arch.head_dim));
                mul(
                    mul(h, widest, "dequant scratch")?,
                    ACT_BYTES,
                    "dequant scratch",
                )?
            } else {
                0
            };
            (prefill, decode, dequant_scratch, false)
        }
    };
    let total = add(
        add(prefill, dequant_scratch, "compute buffer")?.max(decode),
        logits,
        "compute buffer",
    )?;
    Ok(ComputeBuffers {
        layout,
        ubatch: ub,
        prefill: Bytes(prefill),
        decode: Bytes(decode),
        dequant_scratch: Bytes(dequant_scratch),
        logits: Bytes(logits),
        k_quant_acts,
        total: Bytes(total),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sizing::arch::Architecture;
    use crate::sizing::kv::tests::llama3_8b;
    use crate::units::BytesPerSec;

    /// A device on `backend` whose engine uses `layout`, with `threads` worker threads.
    fn hw(backend: Backend, layout: ComputeLayout, threads: Option<u32>) -> Hardware {
        let mut hw = Hardware::new(
            "test",
            "test",
            backend,
            Bytes(64 * Bytes::GIB),
            1.0,
            BytesPerSec(100e9),
            1e12,
            "test",
        )
        .expect("hw");
        hw.compute_layout = layout;
        hw.threads = threads;
        hw
    }

    /// SmolLM2-135M: 30 layers, 9 heads / 3 KV heads of 64, hidden 576, FFN 1536.
    fn smollm2_135m() -> ArchParams {
        ArchParams {
            architecture: Architecture::Llama,
            n_layers: 30,
            n_heads: 9,
            n_kv_heads: 3,
            head_dim: 64,
            head_dim_v: 64,
            hidden: 576,
            ffn: 1536,
            vocab: 49_152,
            rope_base: 100_000.0,
            rope_scaling: None,
            norm_eps: 1e-5,
            context_length: 8192,
            sliding_window: None,
            tied_embeddings: true,
        }
    }

    #[test]
    fn decode_step_of_llama3_8b_is_hand_computed() {
        let arch = llama3_8b();
        let cpu = hw(Backend::Cpu, ComputeLayout::Candle, None);
        let c = compute_buffers(&arch, 1024, 512, &cpu, None).expect("compute");
        // n = 1, kv_len = 1024:
        // hidden 4*4096 + q 4096 + kv_new 2048 + kv_rep 32*1024*256 + scores 2*32*1024
        // + attn_out 4096 + ffn 3*14336, all x 4 bytes.
        let elems = 4 * 4096 + 4096 + 2048 + 32 * 1024 * 256 + 2 * 32 * 1024 + 4096 + 3 * 14336;
        assert_eq!(c.layout, ComputeLayout::Candle);
        assert_eq!(c.decode, Bytes(elems * 4));
        assert_eq!(c.logits, Bytes(128_256 * 4));
        assert_eq!(c.dequant_scratch, Bytes(0));
        assert!(!c.k_quant_acts);
        assert!(c.prefill > c.decode);
        assert_eq!(c.total, Bytes(c.prefill.0 + c.logits.0));
    }

    #[test]
    fn ubatch_is_capped_at_context_and_cuda_adds_scratch() {
        let arch = llama3_8b();
        let cuda = Hardware::preset("h200").expect("h200");
        assert_eq!(cuda.compute_layout, ComputeLayout::Candle);
        let c = compute_buffers(&arch, 100, 512, &cuda, None).expect("compute");
        assert_eq!(c.ubatch, 100);
        assert_eq!(c.dequant_scratch, Bytes(4096 * 14336 * 4));
        let cpu = hw(Backend::Cpu, ComputeLayout::Native, Some(4));
        assert!(matches!(
            compute_buffers(&arch, 0, 512, &cpu, None),
            Err(SizingError::Zero { what: "context" })
        ));
        assert!(compute_buffers(&arch, 10, 0, &cpu, None).is_err());
    }

    /// The native engine splits prefill into ring-sized pieces once a sliding-window model's
    /// rings are on (the context is past the window + 512), and the prefill term follows;
    /// counting the whole 512-token batch put gemma3-270m's compute peak at 2.4x what
    /// `boyd validate` measured.
    #[test]
    fn native_prefill_follows_the_ring_sized_batch() {
        let gemma = ArchParams {
            architecture: Architecture::Gemma3,
            n_layers: 12,
            sliding_window: Some(1024),
            ..llama3_8b()
        };
        let cpu = hw(Backend::Cpu, ComputeLayout::Native, Some(2));
        let short = compute_buffers(&gemma, 1536, 512, &cpu, Some(true)).expect("compute");
        assert_eq!(
            short.ubatch, 512,
            "no rings: window + 512 is the whole context"
        );
        let long = compute_buffers(&gemma, 1537, 512, &cpu, Some(true)).expect("compute");
        assert_eq!(long.ubatch, 257);
        assert!(long.prefill < short.prefill);
        let at_257 = compute_buffers(&gemma, 1536, 257, &cpu, Some(true)).expect("compute");
        // Same batch, one more position of scores per thread.
        assert_eq!(long.prefill.0, at_257.prefill.0 + 2 * ACT_BYTES);
        // candle keeps the whole context and runs the whole batch.
        let candle = hw(Backend::Cpu, ComputeLayout::Candle, None);
        let c = compute_buffers(&gemma, 8192, 512, &candle, Some(true)).expect("compute");
        assert_eq!(c.ubatch, 512);
        // Without a window nothing changes.
        let plain = compute_buffers(&llama3_8b(), 8192, 512, &cpu, Some(true)).expect("compute");
        assert_eq!(plain.ubatch, 512);
    }

    #[test]
    fn layout_defaults_follow_the_runtime_engine() {
        assert_eq!(
            ComputeLayout::for_backend(Backend::Cpu),
            ComputeLayout::Native
        );
        assert_eq!(
            ComputeLayout::for_backend(Backend::Cuda),
            ComputeLayout::Candle
        );
        assert_eq!(
            ComputeLayout::for_backend(Backend::Metal),
            ComputeLayout::Candle
        );
        assert_eq!(
            ComputeLayout::from_engine_name("native/avx2"),
            Some(ComputeLayout::Native)
        );
        assert_eq!(
            ComputeLayout::from_engine_name("candle"),
            Some(ComputeLayout::Candle)
        );
        assert_eq!(ComputeLayout::from_engine_name("llama.cpp"), None);
    }

    #[test]
    fn native_smollm2_135m_pp512_is_hand_computed() {
        // `boyd validate` measured a 23,681,024-byte (22.58 MiB) heap peak for pp512 with the
        // Q4_1 file on 2 threads.
        let arch = smollm2_135m();
        let cpu = hw(Backend::Cpu, ComputeLayout::Native, Some(2));
        let c = compute_buffers(&arch, 512, 512, &cpu, Some(false)).expect("compute");
        // n = 512 tokens; f32 values per token:
        //   x, xn, tmp 3 x 576 = 1728; q 576; att 576; k 192; v 192; gate, up 2 x 1536 = 3072;
        //   proj max(576 + 192 + 192, 2 x 1536) = 3072; acts copy max(576, 576, 1536) = 1536
        //   = 10,944 f32 = 43,776 bytes per token -> 22,413,312 bytes.
        // 32-block acts: 512 x 1536 = 786,432 i8 + 24,576 blocks x 8 bytes = 983,040.
        // Score rows: 2 threads x 512 positions x 4 bytes = 4,096.
        // Panels: max(96 KiB, 8 x 1536) = 98,304 codes x 45/32 = 138,240 + 2,048 slab,
        // x 2 threads = 280,576.
        assert_eq!(c.prefill, Bytes(22_413_312 + 983_040 + 4_096 + 280_576));
        // Logits: 49,152 x 4 = 196,608. Total 23,877,632 bytes = 22.77 MiB.
        assert_eq!(c.logits, Bytes(196_608));
        assert_eq!(c.total, Bytes(23_877_632));
        assert!(!c.k_quant_acts);
        let measured = 23_681_024.0;
        assert!((c.total.0 as f64 / measured - 1.0).abs() < 0.01);
        // With a K-quant weight: + 786,432 i8 + 3,072 x f32 + 49,152 x (i16 + f32)
        // + 24,576 x f32 = 1,191,936; panels carry two scales per block for Q6_K:
        // 98,304 x 54/32 = 165,888 + 2,048 per thread, 55,296 more for the two threads.
        let k = compute_buffers(&arch, 512, 512, &cpu, Some(true)).expect("compute");
        assert_eq!(k.total, Bytes(23_877_632 + 1_191_936 + 55_296));
        assert!(k.k_quant_acts);
        // Unknown types count it (upper bound).
        let u = compute_buffers(&arch, 512, 512, &cpu, None).expect("compute");
        assert_eq!(u.total, k.total);
        // Decode: the same vectors for one token (43,776 f32 bytes; 1536 i8 + 48 blocks x 8),
        // plus the score rows; one token packs no panels.
        assert_eq!(c.decode, Bytes(43_776 + 1536 + 48 * 8 + 4_096));
    }

    #[test]
    fn native_gqa_llama3_8b_is_hand_computed() {
        // Llama-3-8B: hidden 4096, 32 heads / 8 KV heads of 128, FFN 14336, vocab 128256.
        let arch = llama3_8b();
        let cpu = hw(Backend::Cpu, ComputeLayout::Native, Some(8));
        let c = compute_buffers(&arch, 8192, 512, &cpu, Some(true)).expect("compute");
        // f32 values per token: x, xn, tmp 3 x 4096 = 12,288; q 4096; att 4096; k 1024;
        // v 1024; gate, up 28,672; proj max(4096 + 2048, 28,672) = 28,672; acts 14,336
        // = 94,208 f32 = 376,832 bytes; x 512 = 192,937,984.
        let f32_bytes = 192_937_984u64;
        // acts 512 x 14,336 = 7,340,032 values: 32-block 7,340,032 + 229,376 x 8;
        // 256-block 7,340,032 + 28,672 x 4 + 458,752 x (2 + 4) + 229,376 x 4.
        let b32 = 7_340_032 + 229_376 * 8;
        let bk = 7_340_032 + 28_672 * 4 + 458_752 * 6 + 229_376 * 4;
        // Score rows: 8 threads x 8192 positions x 4 bytes.
        let scores = 8 * 8192 * 4;
        // Panels: one 8-row panel of the down projection, 8 x 14,336 = 114,688 codes > 96 KiB,
        // x 54/32 = 193,536 + 2,048 slab, x 8 threads.
        let panels = 8 * (193_536 + 2_048);
        assert_eq!(c.prefill, Bytes(f32_bytes + b32 + bk + scores + panels));
        assert_eq!(c.total, Bytes(c.prefill.0 + 128_256 * 4));
        // Far below candle's, which repeats K/V to 32 heads and holds 512 x 8192 scores.
        let candle = compute_buffers(
            &arch,
            8192,
            512,
            &hw(Backend::Cpu, ComputeLayout::Candle, None),
            None,
        )
        .expect("compute");
        assert!(candle.total.0 > 5 * c.total.0, "{candle:?} vs {c:?}");
    }

    #[test]
    fn native_compute_does_not_grow_with_ctx_times_batch() {
        let arch = llama3_8b();
        let cpu = hw(Backend::Cpu, ComputeLayout::Native, Some(4));
        let at = |ctx| {
            compute_buffers(&arch, ctx, 512, &cpu, Some(false))
                .expect("compute")
                .total
                .0
        };
        // Only the per-thread score rows grow with the context: 4 threads x 4 bytes per token.
        assert_eq!(at(8192) - at(1024), 4 * 4 * (8192 - 1024));
        assert_eq!(at(131_072) - at(8192), 4 * 4 * (131_072 - 8192));
        // The candle layout grows with ctx x ubatch (scores) and ctx x heads (repeat_kv).
        let candle = hw(Backend::Cpu, ComputeLayout::Candle, None);
        let c = |ctx| {
            compute_buffers(&arch, ctx, 512, &candle, None)
                .expect("compute")
                .total
                .0
        };
        assert!(c(8192) - c(1024) > 2 * 32 * 512 * (8192 - 1024) * 4);
        // Unknown thread count: the assumed one, each with a score row and a panel chunk
        // (114,688 codes x 45/32 = 161,280 + 2,048).
        let mut unknown = cpu.clone();
        unknown.threads = None;
        let u = compute_buffers(&arch, 1024, 512, &unknown, Some(false)).expect("compute");
        assert_eq!(
            u.total.0 - at(1024),
            u64::from(ASSUMED_THREADS - 4) * (1024 * 4 + 161_280 + 2_048)
        );
    }
}
