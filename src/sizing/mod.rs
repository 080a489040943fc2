//! "What should happen": pure functions that predict memory and speed. No candle, no I/O.
//!
//! [`estimate`] answers the calculator question — will this model fit on that device, with how
//! much context, and how fast will it run — as one [`Estimate`] record in which every term is
//! named, so that `boyd validate` can put a measurement next to each one:
//!
//! ```text
//! total = weights + embedding copy + RoPE tables + KV cache + compute buffers + overhead
//! fits  = total <= free (device memory × usable fraction, or the OS's available memory)
//! ```
//!
//! Inputs come from a GGUF header (exact tensor sizes), a Hugging Face `config.json` or a
//! catalog entry (parameter count × a file mix's bits per weight). Nothing here reads files.

pub mod arch;
pub mod compute;
pub mod described;
pub mod error;
pub mod hardware;
pub mod hf_config;
pub mod kv;
pub mod linfit;
pub mod offload;
pub mod parallel;
pub mod profile;
pub mod published;
pub mod quant;
pub mod throughput;
pub mod weights;

use serde::Serialize;

pub use arch::{ArchError, ArchParams, Architecture, RopeScaling};
pub use compute::{compute_buffers, ComputeBuffers, ComputeLayout, DEFAULT_UBATCH};
pub use error::SizingError;
pub use hardware::{Backend, Hardware, OverheadItem, SpeedParams};
pub use kv::{kv_cache, KvCache, KvDtype};
pub use profile::Profile;
pub use quant::{GgmlType, QuantPreset};
pub use throughput::Speed;
pub use weights::{EmbeddingPolicy, WeightBytes, WeightsMethod};

use crate::units::Bytes;
use error::add;

/// A quantization to size with when only the parameter count is known.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Quant {
    /// Name as shown (`Q4_K_M`, `Q8_0`, `4.5bpw`).
    pub name: String,
    /// Average bits per weight.
    pub bits_per_weight: f64,
    /// Where the figure comes from.
    pub source: String,
}

impl Quant {
    /// A file mix (`Q4_K_M`, …) or a plain GGML type (`Q4_K`, `F16`, …) by name,
    /// case-insensitively; or a bare bits-per-weight figure such as `4.5` or `4.5bpw`.
    pub fn parse(name: &str) -> Result<Self, SizingError> {
        let name = name.trim();
        if let Some(p) = QuantPreset::by_name(name) {
            return Ok(Self {
                name: p.name.to_owned(),
                bits_per_weight: p.bits_per_weight,
                source: p.source.to_owned(),
            });
        }
        if let Some(t) = GgmlType::from_name(name) {
            return Ok(Self {
                name: t.name().to_owned(),
                bits_per_weight: t.bits_per_weight(),
                source: "block layout; every tensor stored in this type".into(),
            });
        }
        let lower = name.to_ascii_lowercase();
        let number = lower.strip_suffix("bpw").unwrap_or(&lower);
        if let Ok(bpw) = number.trim().parse::<f64>() {
            if bpw > 0.0 && bpw <= 64.0 {
                return Ok(Self {
                    name: format!("{bpw}bpw"),
                    bits_per_weight: bpw,
                    source: "given on the command line".into(),
                });
            }
            return Err(SizingError::BadBitsPerWeight { bpw });
        }
        Err(SizingError::UnknownQuant {
            name: name.to_owned(),
            known: QuantPreset::names().collect::<Vec<_>>().join(", "),
        })
    }
}

/// How the model's weights are known.
#[derive(Debug, Clone, PartialEq)]
pub enum Weights {
    /// Exact sizes from a tensor list; `label` names the file's quantization.
    Exact {
        /// Sizes by role.
        bytes: WeightBytes,
        /// E.g. the GGUF's `general.file_type` name, or the dominant tensor type.
        label: String,
    },
    /// A parameter count at a quantization's average bits per weight.
    Params {
        /// Total parameters.
        params: u64,
        /// The quantization.
        quant: Quant,
    },
}

/// What to size.
#[derive(Debug, Clone, PartialEq)]
pub struct Input {
    /// Architecture.
    pub arch: ArchParams,
    /// Weights.
    pub weights: Weights,
    /// Context length, tokens.
    pub ctx: u32,
    /// KV cache type.
    pub kv_dtype: KvDtype,
    /// Prefill micro-batch, tokens.
    pub ubatch: u32,
}

/// Memory, term by term.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Memory {
    /// Weights as stored in the file.
    pub weights: Bytes,
    /// Extra resident copy of the token embedding the runtime makes (none for boyd's
    /// runtime, which keeps it quantized; an f32 copy for candle-transformers').
    pub embedding_copy: Bytes,
    /// RoPE cos/sin tables boyd's decoder builds for the context
    /// ([`weights::rope_tables`]).
    pub rope_tables: Bytes,
    /// KV cache at the context length.
    pub kv_cache: Bytes,
    /// Compute buffers (activations, logits, dequantization scratch).
    pub compute: Bytes,
    /// Fixed backend overhead.
    pub overhead: Bytes,
    /// Sum of the above.
    pub total: Bytes,
}

/// The largest context that fits.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MaxCtx {
    /// Tokens.
    pub ctx: u32,
    /// `model` when the model's training context is reached before memory runs out,
    /// `memory` otherwise.
    pub limited_by: &'static str,
}

/// The largest file mix that fits at the asked context.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MaxQuant {
    /// Preset name.
    pub name: &'static str,
    /// Its bits per weight.
    pub bits_per_weight: f64,
    /// Total memory with it.
    pub total: Bytes,
}

/// Everything `boyd size` reports, as one serializable record.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Estimate {
    /// Architecture parameters used.
    pub arch: ArchParams,
    /// Quantization label.
    pub quant: String,
    /// Context length.
    pub ctx: u32,
    /// KV cache type.
    pub kv_dtype: KvDtype,
    /// The device.
    pub hardware: Hardware,
    /// Memory terms and total.
    pub memory: Memory,
    /// Whether `memory.total <= hardware.free`.
    pub fits: bool,
    /// `free - total` when it fits.
    pub headroom: Option<Bytes>,
    /// `total - free` when it does not.
    pub shortfall: Option<Bytes>,
    /// Weight detail.
    pub weights: WeightBytes,
    /// What the runtime does with the embedding.
    pub embedding_policy: EmbeddingPolicy,
    /// KV detail.
    pub kv: KvCache,
    /// Compute-buffer detail.
    pub compute: ComputeBuffers,
    /// Overhead detail.
    pub overhead: Vec<OverheadItem>,
    /// Speed estimate.
    pub speed: Speed,
    /// Largest context that fits (`None`: not even one token).
    pub max_ctx: Option<MaxCtx>,
    /// Largest file mix that fits at `ctx` (`None`: none does).
    pub max_quant: Option<MaxQuant>,
    /// A partial-offload split (llama.cpp's `-ngl`), when one was asked for or the model
    /// does not fit on a GPU ([`offload`]); set by the caller that knows the host.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub offload: Option<offload::Offload>,
}

/// The weights of `input`, sized, and the quantization label.
pub fn weight_bytes(input: &Input) -> Result<(WeightBytes, String), SizingError> {
    match &input.weights {
        Weights::Exact { bytes, label } => Ok((bytes.clone(), label.clone())),
        Weights::Params { params, quant } => Ok((
            weights::from_params(&input.arch, *params, quant.bits_per_weight)?,
            quant.name.clone(),
        )),
    }
}

/// Memory of `arch` with weights `w` at `ctx` on `hw`.
fn memory(
    arch: &ArchParams,
    w: &WeightBytes,
    ctx: u32,
    kv: KvDtype,
    ubatch: u32,
    hw: &Hardware,
) -> Result<(Memory, KvCache, ComputeBuffers, Vec<OverheadItem>), SizingError> {
    const T: &str = "total memory";
    let embedding_copy = weights::embedding_copy(arch, w, hw.backend.embedding_policy())?;
    let rope_tables = weights::rope_tables(arch, ctx)?;
    let kv_c = kv_cache(arch, kv, ctx)?;
    let comp = compute_buffers(arch, ctx, ubatch, hw, w.has_k_quant())?;
    let items = hw.overhead();
    let overhead = items.iter().try_fold(0u64, |a, o| add(a, o.bytes.0, T))?;
    let total = [
        w.total.0,
        embedding_copy.0,
        rope_tables.0,
        kv_c.total.0,
        comp.total.0,
        overhead,
    ]
    .into_iter()
    .try_fold(0u64, |a, b| add(a, b, T))?;
    Ok((
        Memory {
            weights: w.total,
            embedding_copy,
            rope_tables,
            kv_cache: kv_c.total,
            compute: comp.total,
            overhead: Bytes(overhead),
            total: Bytes(total),
        },
        kv_c,
        comp,
        items,
    ))
}

/// Total memory at `ctx`, or `None` when it cannot be computed (treated as not fitting).
fn total_at(
    arch: &ArchParams,
    w: &WeightBytes,
    ctx: u32,
    kv: KvDtype,
    ub: u32,
    hw: &Hardware,
) -> Option<u64> {
    memory(arch, w, ctx, kv, ub, hw).ok().map(|m| m.0.total.0)
}

/// The largest context in `1..=arch.context_length` whose total fits in `hw.free`.
/// Total memory grows monotonically with context, so a binary search finds it.
pub fn max_ctx(
    arch: &ArchParams,
    w: &WeightBytes,
    kv: KvDtype,
    ubatch: u32,
    hw: &Hardware,
) -> Option<MaxCtx> {
    let fits = |c: u32| total_at(arch, w, c, kv, ubatch, hw).is_some_and(|t| t <= hw.free.0);
    let top = arch.context_length.max(1);
    if fits(top) {
        return Some(MaxCtx {
            ctx: top,
            limited_by: "model",
        });
    }
    if !fits(1) {
        return None;
    }
    let (mut lo, mut hi) = (1u32, top); // fits(lo), !fits(hi)
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if fits(mid) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    Some(MaxCtx {
        ctx: lo,
        limited_by: "memory",
    })
}

/// The file mix with the most bits per weight (F32 excluded) that fits at `ctx`.
pub fn max_quant(
    arch: &ArchParams,
    params: u64,
    ctx: u32,
    kv: KvDtype,
    ubatch: u32,
    hw: &Hardware,
) -> Option<MaxQuant> {
    QuantPreset::by_size_desc()
        .into_iter()
        .filter(|p| p.base != GgmlType::F32)
        .find_map(|p| {
            let w = weights::from_params(arch, params, p.bits_per_weight).ok()?;
            let total = total_at(arch, &w, ctx, kv, ubatch, hw)?;
            (total <= hw.free.0).then_some(MaxQuant {
                name: p.name,
                bits_per_weight: p.bits_per_weight,
                total: Bytes(total),
            })
        })
}

/// Size `input` on `hw`: memory terms, fit, speed, largest context and quantization.
pub fn estimate(input: &Input, hw: &Hardware) -> Result<Estimate, SizingError> {
    let arch = &input.arch;
    arch.validate()?;
    if input.ctx == 0 {
        return Err(SizingError::Zero { what: "context" });
    }
    let (w, quant) = weight_bytes(input)?;
    let (mem, kv, compute, overhead) =
        memory(arch, &w, input.ctx, input.kv_dtype, input.ubatch, hw)?;
    let speed = throughput::speed(arch, &w, input.kv_dtype, input.ctx, input.ubatch, hw)?;
    let fits = mem.total <= hw.free;
    Ok(Estimate {
        arch: arch.clone(),
        quant,
        ctx: input.ctx,
        kv_dtype: input.kv_dtype,
        hardware: hw.clone(),
        fits,
        headroom: fits.then(|| Bytes(hw.free.0 - mem.total.0)),
        shortfall: (!fits).then(|| Bytes(mem.total.0 - hw.free.0)),
        memory: mem,
        embedding_policy: hw.backend.embedding_policy(),
        max_ctx: max_ctx(arch, &w, input.kv_dtype, input.ubatch, hw),
        max_quant: max_quant(arch, w.params, input.ctx, input.kv_dtype, input.ubatch, hw),
        offload: None,
        weights: w,
        kv,
        compute,
        overhead,
        speed,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sizing::kv::tests::llama3_8b;

    /// A dense 70B: 80 layers, 64 heads, 8 KV heads of 128 (Llama-3-70B shape).
    fn dense_70b() -> ArchParams {
        ArchParams {
            n_layers: 80,
            n_heads: 64,
            hidden: 8192,
            ffn: 28_672,
            context_length: 131_072,
            ..llama3_8b()
        }
    }

    fn input(arch: ArchParams, params: u64, quant: &str, ctx: u32) -> Input {
        Input {
            arch,
            weights: Weights::Params {
                params,
                quant: Quant::parse(quant).expect("quant"),
            },
            ctx,
            kv_dtype: KvDtype::F16,
            ubatch: DEFAULT_UBATCH,
        }
    }

    #[test]
    fn worked_example_dense_70b_on_128gb_apple_at_400gbs() {
        let hw = Hardware::preset("m3-max").expect("m3-max");
        assert_eq!(hw.memory, Bytes(128 * Bytes::GIB));
        assert_eq!(hw.bandwidth.0, 400e9);
        let e = estimate(&input(dense_70b(), 70_000_000_000, "4.5", 8192), &hw).expect("estimate");
        // 70e9 x 4.5 / 8 = 39.375e9 bytes: "about 39.5 GB".
        assert_eq!(e.memory.weights, Bytes(39_375_000_000));
        assert!((e.memory.weights.gb() - 39.5).abs() < 0.2);
        // 2 x 80 x 8 x 128 x 8192 x 2 bytes = 2.5 GiB exactly.
        assert_eq!(e.memory.kv_cache, Bytes(5 * Bytes::GIB / 2));
        assert!(e.fits, "{:?}", e.memory);
        assert_eq!(e.hardware.free, Bytes(96 * Bytes::GIB));
        assert_eq!(
            e.headroom,
            Some(Bytes(e.hardware.free.0 - e.memory.total.0))
        );
        // Speed terms come from the fit to the published Metal rows, and the card says so.
        assert!(e.speed.efficiency_source.contains("published for metal"));
        // The published M3 Max runs of Llama-3-70B Q4_K_M (39.6 GiB) decode at 7.65 tok/s
        // (tg512) and 5.60 tok/s (tg8192); 4.5 bits per weight is a little smaller, so the
        // empty-context estimate lands in that neighbourhood and slows with the full 8k cache.
        let d = e.speed.decode_empty.0;
        assert!(d > 6.0 && d < 10.0, "{d}");
        let full = e.speed.decode_at_ctx.0;
        assert!(full < d && full > 0.6 * d, "{full} vs {d}");
        let total = e.memory.weights.0
            + e.memory.embedding_copy.0
            + e.memory.rope_tables.0
            + e.memory.kv_cache.0
            + e.memory.compute.0
            + e.memory.overhead.0;
        assert_eq!(e.memory.total, Bytes(total));
    }

    #[test]
    fn largest_context_and_quant_that_fit_a_24gb_gpu() {
        let hw = Hardware::preset("rtx-4090").expect("4090");
        let e = estimate(&input(dense_70b(), 70_000_000_000, "Q4_K_M", 8192), &hw).expect("e");
        assert!(!e.fits);
        assert!(e.shortfall.is_some_and(|s| s.0 > 0));
        assert!(e.max_ctx.is_none(), "70B Q4_K_M weights alone exceed 24 GB");
        let q = e.max_quant.expect("some mix fits");
        assert!(q.bits_per_weight < 2.5, "{q:?}");
        assert!(q.total <= hw.free);

        let small = estimate(&input(llama3_8b(), 8_030_261_248, "Q4_K_M", 8192), &hw).expect("e");
        assert!(small.fits);
        let m = small.max_ctx.clone().expect("fits");
        assert_eq!((m.ctx, m.limited_by), (8192, "model"));
        let big_ctx = ArchParams {
            context_length: 1 << 20,
            ..llama3_8b()
        };
        let e = estimate(&input(big_ctx.clone(), 8_030_261_248, "Q4_K_M", 8192), &hw).expect("e");
        let m = e.max_ctx.expect("fits");
        assert_eq!(m.limited_by, "memory");
        // The answer is the boundary: it fits, one more token does not.
        let w = e.weights.clone();
        let t = |c| total_at(&big_ctx, &w, c, KvDtype::F16, DEFAULT_UBATCH, &hw).expect("t");
        assert!(t(m.ctx) <= hw.free.0 && t(m.ctx + 1) > hw.free.0);
        assert_eq!(
            small.max_quant.map(|q| q.name),
            Some("F16"),
            "16-bit fits; F16 precedes BF16"
        );
    }

    #[test]
    fn quant_parse_accepts_presets_types_and_bpw() {
        assert_eq!(Quant::parse("q4_k_m").expect("q").name, "Q4_K_M");
        assert_eq!(
            Quant::parse("Q4_K").expect("q").name,
            "Q4_K_M",
            "alias beats the type"
        );
        assert_eq!(Quant::parse("q8_1").expect("q").bits_per_weight, 9.0);
        assert_eq!(Quant::parse("4.5bpw").expect("q").bits_per_weight, 4.5);
        assert!(matches!(
            Quant::parse("0"),
            Err(SizingError::BadBitsPerWeight { .. })
        ));
        assert!(matches!(
            Quant::parse("Q7_X"),
            Err(SizingError::UnknownQuant { .. })
        ));
    }

    #[test]
    fn zero_context_and_bad_arch_are_errors() {
        let hw = Hardware::preset("h200").expect("h200");
        assert!(matches!(
            estimate(&input(llama3_8b(), 1, "Q8_0", 0), &hw),
            Err(SizingError::Zero { what: "context" })
        ));
        let bad = ArchParams {
            n_kv_heads: 7,
            ..llama3_8b()
        };
        assert!(matches!(
            estimate(&input(bad, 1, "Q8_0", 16), &hw),
            Err(SizingError::Arch(ArchError::KvHeadsDoNotDivide { .. }))
        ));
    }
}
