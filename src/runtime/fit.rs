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
//! from `/proc/meminfo`, read through `hw::this_machine`; on CUDA and Metal it is the driver's free device memory, read through
//! the device's probe (`hw::cuda`, `hw::metal`), against the matching hardware preset
//! ([`Hardware::for_gpu`]). When neither can be read the check is skipped with a warning.

use candle_core::Device;

use crate::hw;
use crate::runtime::gguf::{GgufError, GgufHeader};
use crate::sizing::{
    self, weights, Backend, ComputeLayout, Estimate, Hardware, Input, KvDtype, SizingError,
    DEFAULT_UBATCH,
};
use crate::units::Bytes;

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

/// The hardware to check against when loading onto `device`: for the CPU, this machine
/// ([`hw::this_machine`]: its RAM with `MemAvailable` as free), named `cpu`; for a GPU, the driver's free device memory on the
/// matching preset. `None` when boyd cannot tell the free memory (no `/proc/meminfo`, or a
/// GPU whose probe cannot open).
pub fn device_hardware(device: &Device) -> Option<Hardware> {
    use crate::hw::DeviceProbe as _;
    match device.location() {
        candle_core::DeviceLocation::Cpu => {}
        candle_core::DeviceLocation::Cuda { gpu_id } => {
            let p = crate::hw::cuda::CudaProbe::new(gpu_id).ok()?;
            let m = p.memory().ok()?;
            return Hardware::for_gpu(&p.name(), Backend::Cuda, m.total, m.free).ok();
        }
        candle_core::DeviceLocation::Metal { gpu_id } => {
            let p = crate::hw::metal::MetalProbe::new(gpu_id).ok()?;
            let m = p.memory().ok()?;
            return Hardware::for_gpu(&p.name(), Backend::Metal, m.total, m.free).ok();
        }
    }
    // Bandwidth and FLOP/s only matter for speed, not for the fit.
    let mut hw = hw::this_machine().ok()?;
    hw.name = "cpu".into();
    Some(hw)
}
