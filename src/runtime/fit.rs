//! The fit check: refuse to load a model that will not fit, before any tensor is allocated.
//!
//! Loading a model too big for the machine ends badly and late: the OS swaps, the OOM killer
//! ends the process, or a GPU allocation fails half-way through the weights. The sizing model
//! already predicts the total (`sizing::estimate`: weights + embedding copy + KV cache + compute
//! buffers + overhead) from the GGUF header alone, so the runtime asks it first and refuses with
//! the shortfall and what would fit instead — a smaller context or a smaller quantization.
//! `--force` turns the refusal into a warning.
//!
//! The decision ([`decide`]) is a pure function of an [`Estimate`], so it is tested without a
//! machine of any particular size. Free memory comes from the OS: on the CPU it is `MemAvailable`
//! from `/proc/meminfo`. For CUDA and Metal boyd has no in-process free-memory query yet; the check
//! is skipped there with a warning unless the caller supplies the hardware.

use candle_core::Device;

use crate::runtime::gguf::{GgufError, GgufHeader};
use crate::sizing::{
    self, weights, Backend, ComputeLayout, Estimate, Hardware, Input, KvDtype, SizingError,
    DEFAULT_UBATCH,
};
use crate::units::{Bytes, BytesPerSec};

/// Why the fit check refused a load.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FitError {
    /// The header cannot be read as a model (the same error loading would give).
    #[error(transparent)]
    Header(#[from] GgufError),
    /// The sizing model says the model will not fit.
    #[error("{0}")]
    WontFit(Box<WontFit>),
    /// The sizing model could not size this model (an overflow or an unsupported value).
    #[error("cannot predict the memory this model needs ({0}); pass --force to load it anyway")]
    Unsizable(#[from] SizingError),
}

/// The numbers behind a refusal: how much is needed, how much is free, and what would fit.
#[derive(Debug, Clone, PartialEq)]
pub struct WontFit {
    /// Predicted total at the asked context.
    pub need: Bytes,
    /// Free memory on the device.
    pub free: Bytes,
    /// `need - free`.
    pub shortfall: Bytes,
    /// The asked context, tokens.
    pub ctx: u32,
    /// Weights part of `need`.
    pub weights: Bytes,
    /// KV-cache part of `need`.
    pub kv_cache: Bytes,
    /// Device name as sized (`cpu`, a preset name, …).
    pub device: String,
    /// The largest context that fits with this file, if any.
    pub max_ctx: Option<u32>,
    /// The largest quantization (file mix) that fits at `ctx`, with its predicted total,
    /// when it is smaller than this file.
    pub smaller_quant: Option<(String, Bytes)>,
}

impl std::fmt::Display for WontFit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the model will not fit: it needs {} at a context of {} tokens ({} weights, {} KV cache, \
             the rest compute buffers and overhead) but {} has {} free — {} short",
            self.need,
            self.ctx,
            self.weights,
            self.kv_cache,
            self.device,
            self.free,
            self.shortfall
        )?;
        let mut options = Vec::new();
        if let Some(c) = self.max_ctx {
            options.push(format!("a smaller context (--ctx {c} or less)"));
        }
        if let Some((q, total)) = &self.smaller_quant {
            options.push(format!("a smaller quantization ({q}: about {total})"));
        }
        if options.is_empty() {
            write!(
                f,
                "; no smaller context or quantization of this model fits: free memory or pick a smaller model"
            )?;
        } else {
            write!(f, "; what would fit: {}", options.join(", or "))?;
        }
        write!(f, ". Pass --force to load anyway")
    }
}

/// What the fit check decided when it let the load go on.
#[derive(Debug, Clone, PartialEq)]
pub enum Fit {
    /// The model fits with this much to spare.
    Fits {
        /// `free - need`.
        headroom: Bytes,
    },
    /// The model does not fit but `--force` was given.
    Forced(Box<WontFit>),
}

/// Decide from an estimate: `Ok` when the model fits or `force` is set, the refusal otherwise.
pub fn decide(e: &Estimate, force: bool) -> Result<Fit, FitError> {
    let need = e.memory.total;
    let free = e.hardware.free;
    if need <= free {
        return Ok(Fit::Fits {
            headroom: Bytes(free.0 - need.0),
        });
    }
    let smaller_quant = e
        .max_quant
        .as_ref()
        .filter(|q| q.total < need)
        .map(|q| (q.name.to_string(), q.total));
    let wont = Box::new(WontFit {
        need,
        free,
        shortfall: Bytes(need.0 - free.0),
        ctx: e.ctx,
        weights: e.memory.weights,
        kv_cache: e.memory.kv_cache,
        device: e.hardware.name.clone(),
        max_ctx: e.max_ctx.as_ref().map(|m| m.ctx).filter(|&c| c < e.ctx),
        smaller_quant,
    });
    if force {
        Ok(Fit::Forced(wont))
    } else {
        Err(FitError::WontFit(wont))
    }
}

/// The KV-cache type the runtime uses on `device` with the engine of `layout`: `chosen` on
/// the native CPU engine; f32 for candle on the CPU, f16 on GPUs (see `Decoder::kv_dtype`).
pub fn runtime_kv_dtype(layout: ComputeLayout, device: &Device, chosen: KvDtype) -> KvDtype {
    match layout {
        ComputeLayout::Native => chosen,
        _ if device.is_cpu() => KvDtype::F32,
        _ => KvDtype::F16,
    }
}

/// Size the model described by `header` at `ctx` tokens (capped at its training context) on
/// `hw`. Reads only the header: no tensor data.
pub fn estimate(
    header: &GgufHeader,
    ctx: usize,
    kv_dtype: KvDtype,
    hw: &Hardware,
) -> Result<Estimate, FitError> {
    let arch = header.arch_params()?;
    let ctx = u32::try_from(ctx)
        .unwrap_or(u32::MAX)
        .min(arch.context_length)
        .max(1);
    let bytes = weights::from_tensors(
        header
            .tensors
            .iter()
            .map(|t| (t.name.as_str(), t.ggml_type, t.dims.as_slice())),
    )?;
    let input = Input {
        arch,
        weights: sizing::Weights::Exact {
            bytes,
            label: "this file".into(),
        },
        ctx,
        kv_dtype,
        ubatch: DEFAULT_UBATCH,
    };
    Ok(sizing::estimate(&input, hw)?)
}

/// `MemTotal` and `MemAvailable` from the text of `/proc/meminfo`.
pub fn parse_meminfo(text: &str) -> Option<(Bytes, Option<Bytes>)> {
    let field = |key: &str| -> Option<Bytes> {
        let line = text.lines().find(|l| l.split(':').next() == Some(key))?;
        let kib: u64 = line
            .split(':')
            .nth(1)?
            .split_whitespace()
            .next()?
            .parse()
            .ok()?;
        kib.checked_mul(1024).map(Bytes)
    };
    Some((field("MemTotal")?, field("MemAvailable")))
}

/// The hardware to check against when loading onto `device`: for the CPU, this machine's RAM
/// with `MemAvailable` as free memory. `None` when boyd cannot tell the free memory (GPUs, or
/// no `/proc/meminfo`).
pub fn device_hardware(device: &Device) -> Option<Hardware> {
    if !device.is_cpu() {
        return None;
    }
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let (total, available) = parse_meminfo(&text)?;
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    Hardware::new(
        "cpu",
        "this machine",
        Backend::Cpu,
        total,
        1.0,
        // Bandwidth and FLOP/s only matter for speed, not for the fit.
        BytesPerSec(51.2e9),
        cores as f64 * 320e9,
        "/proc/meminfo (MemAvailable as free)",
    )
    .ok()
    .map(|hw| hw.with_free(available.unwrap_or(total)).with_threads(cores))
}
