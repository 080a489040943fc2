//! In-process inference: GGUF reading, the tokenizer and chat template, the one llama-family
//! decoder with its two engines (the native CPU engine on `kernels::cpu`, and candle for GPUs
//! and on request), the KV cache, the sampler chain with grammar masks, the session that
//! reuses cached prefixes, and `LocalModel`, the `LanguageModel` over all of it. Tuning knobs
//! arrive in `options::RuntimeOptions`; nothing here reads the environment for them.

pub mod block;
pub mod chat_template;
pub mod constrain;
pub mod decoder;
pub mod fit;
pub mod gguf;
pub mod kv_cache;
pub mod local;
pub mod native;
pub mod options;
pub mod reference;
pub mod sampling;
pub mod session;
pub mod synth;
pub mod template_process;
pub mod tokenizer;

use candle_core::Device;

/// Errors choosing a device.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DeviceError {
    /// The spec is not cpu, cuda[:N], metal or auto.
    #[error("unknown device {0:?}; use cpu, cuda, cuda:N, metal or auto")]
    Unknown(String),
    /// The backend is not compiled in or no such device exists.
    #[error("device {spec} is not available: {reason}")]
    Unavailable {
        /// The spec asked for.
        spec: String,
        /// Why.
        reason: String,
    },
}

/// Parse `cpu`, `cuda`, `cuda:N`, `metal` or `auto` into a candle device.
pub fn parse_device(spec: &str) -> Result<Device, DeviceError> {
    let unavailable = |e: candle_core::Error| DeviceError::Unavailable {
        spec: spec.to_string(),
        reason: e.to_string(),
    };
    match spec {
        "cpu" => Ok(Device::Cpu),
        "auto" => {
            if candle_core::utils::cuda_is_available() {
                Device::new_cuda(0).map_err(unavailable)
            } else if candle_core::utils::metal_is_available() {
                Device::new_metal(0).map_err(unavailable)
            } else {
                Ok(Device::Cpu)
            }
        }
        "metal" => Device::new_metal(0).map_err(unavailable),
        "cuda" => Device::new_cuda(0).map_err(unavailable),
        s => match s.strip_prefix("cuda:").map(str::parse::<usize>) {
            Some(Ok(n)) => Device::new_cuda(n).map_err(unavailable),
            _ => Err(DeviceError::Unknown(s.to_string())),
        },
    }
}
