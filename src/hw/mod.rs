//! "What hardware is here": the CPU, the host's memory, GPUs, and measured memory bandwidth.
//!
//! Every device — the CPU and each GPU backend — is reached through one interface,
//! [`DeviceProbe`]: its name, its memory (total and free) and a measured bandwidth. The CPU
//! probe is always compiled; the CUDA and Metal probes follow candle's pattern: without the
//! `cuda` / `metal` feature their module is a stand-in whose constructor returns
//! [`ProbeError::NotCompiled`], so every build compiles the same calling code and only the
//! implementation behind the interface changes.
//!
//! Reading `/proc` and `/sys` is I/O, so it lives here rather than in `sizing`; nothing here
//! prints. `/proc/meminfo` is parsed in one place ([`HostMemory`]) and "this machine" as sizing
//! hardware is built in one place ([`this_machine`]). `boyd probe` renders a [`ProbeReport`]; `boyd validate` uses the measured bandwidth
//! to calibrate the sizing model.

pub mod bandwidth;
pub mod cpu;
pub mod host;
pub mod memory;

#[cfg(feature = "cuda")]
#[path = "cuda.rs"]
pub mod cuda;
#[cfg(not(feature = "cuda"))]
#[path = "cuda_stub.rs"]
pub mod cuda;

#[cfg(all(feature = "metal", target_os = "macos"))]
#[path = "metal.rs"]
pub mod metal;
#[cfg(not(all(feature = "metal", target_os = "macos")))]
#[path = "metal_stub.rs"]
pub mod metal;

use serde::Serialize;

pub use bandwidth::{BandwidthConfig, BandwidthResult};
pub use cpu::CpuInfo;
pub use host::this_machine;
pub use memory::HostMemory;

use crate::sizing::Backend;
use crate::units::Bytes;

/// Why a probe could not answer.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProbeError {
    /// The backend is not compiled into this binary.
    #[error("not compiled with {backend} support: rebuild with `--features {feature}`")]
    NotCompiled {
        /// Backend name (`cuda`, `metal`).
        backend: &'static str,
        /// The cargo feature that enables it.
        feature: &'static str,
    },
    /// The backend is compiled in but the device cannot be opened.
    #[error("{backend} device {index} is not available: {reason}")]
    NoDevice {
        /// Backend name.
        backend: &'static str,
        /// Device ordinal.
        index: usize,
        /// What the driver said.
        reason: String,
    },
    /// A device operation failed while measuring.
    #[error("{backend} probe failed while {during}: {reason}")]
    Device {
        /// Backend name.
        backend: &'static str,
        /// What the probe was doing.
        during: &'static str,
        /// What went wrong.
        reason: String,
    },
    /// A system file could not be read or parsed.
    #[error("cannot read {what}: {reason}")]
    System {
        /// The file or facility (`/proc/meminfo`).
        what: &'static str,
        /// Why.
        reason: String,
    },
    /// The measurement settings make no sense.
    #[error("bad bandwidth settings: {0}")]
    BadConfig(String),
}

/// Total and free memory of one device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct DeviceMemory {
    /// Total memory.
    pub total: Bytes,
    /// Memory available to a new allocation now (the OS's MemAvailable on the host; the
    /// driver's free memory on CUDA; the recommended working set minus what is allocated on
    /// Metal).
    pub free: Bytes,
}

/// The one interface every device probe implements.
pub trait DeviceProbe {
    /// Which backend this device runs.
    fn backend(&self) -> Backend;
    /// Human name (CPU model, GPU name).
    fn name(&self) -> String;
    /// Total and free memory.
    fn memory(&self) -> Result<DeviceMemory, ProbeError>;
    /// Measure memory bandwidth with `cfg`: the figure decode is bound by (a streaming read
    /// where the backend has a read kernel).
    fn bandwidth(&self, cfg: &BandwidthConfig) -> Result<BandwidthResult, ProbeError>;
    /// Every bandwidth measurement the backend has (GPUs: read, write and copy kernels), the
    /// one [`DeviceProbe::bandwidth`] returns first.
    fn bandwidth_suite(&self, cfg: &BandwidthConfig) -> Result<Vec<BandwidthResult>, ProbeError> {
        self.bandwidth(cfg).map(|b| vec![b])
    }
    /// Device memory one more compute context costs, measured (CUDA: free memory before and
    /// after creating a second context on the device). `None` where the backend has no such
    /// cost (CPU) or cannot measure it.
    fn context_overhead(&self) -> Option<Result<Bytes, ProbeError>> {
        None
    }
}

/// The host CPU as a probe: system RAM and a multi-threaded streaming read.
#[derive(Debug, Clone)]
pub struct CpuProbe {
    info: CpuInfo,
}

impl CpuProbe {
    /// Describe this host's CPU.
    pub fn new() -> Self {
        Self {
            info: CpuInfo::detect(),
        }
    }

    /// The CPU description.
    pub fn info(&self) -> &CpuInfo {
        &self.info
    }
}

impl Default for CpuProbe {
    fn default() -> Self {
        Self::new()
    }
}

impl DeviceProbe for CpuProbe {
    fn backend(&self) -> Backend {
        Backend::Cpu
    }
    fn name(&self) -> String {
        self.info.model.clone()
    }
    fn memory(&self) -> Result<DeviceMemory, ProbeError> {
        let m = HostMemory::read()?;
        Ok(DeviceMemory {
            total: m.total,
            free: m.available.unwrap_or(m.total),
        })
    }
    fn bandwidth(&self, cfg: &BandwidthConfig) -> Result<BandwidthResult, ProbeError> {
        bandwidth::cpu_read_bandwidth(cfg)
    }
}

/// A device probe of any backend: a closed enum, so callers match on it only to learn which.
#[derive(Debug)]
pub enum Probe {
    /// The host CPU.
    Cpu(CpuProbe),
    /// An NVIDIA GPU.
    Cuda(cuda::CudaProbe),
    /// An Apple GPU.
    Metal(metal::MetalProbe),
}

impl Probe {
    /// The probe for a `--device` spec: `cpu`, `cuda`, `cuda:N`, `metal`, or `auto` (the
    /// first CUDA device, else the Metal device, else the CPU: the order
    /// `runtime::parse_device` uses, so the probe measures the device the model runs on).
    pub fn for_device(spec: &str) -> Result<Self, ProbeError> {
        match spec {
            "cpu" => Ok(Self::Cpu(CpuProbe::new())),
            "auto" => Ok(cuda::CudaProbe::new(0)
                .map(Self::Cuda)
                .or_else(|_| metal::MetalProbe::new(0).map(Self::Metal))
                .unwrap_or_else(|_| Self::Cpu(CpuProbe::new()))),
            "metal" => metal::MetalProbe::new(0).map(Self::Metal),
            "cuda" => cuda::CudaProbe::new(0).map(Self::Cuda),
            s => match s.strip_prefix("cuda:").map(str::parse::<usize>) {
                Some(Ok(n)) => cuda::CudaProbe::new(n).map(Self::Cuda),
                _ => Err(ProbeError::BadConfig(format!(
                    "unknown device {s:?}; use cpu, cuda, cuda:N, metal or auto"
                ))),
            },
        }
    }

    fn inner(&self) -> &dyn DeviceProbe {
        match self {
            Self::Cpu(p) => p,
            Self::Cuda(p) => p,
            Self::Metal(p) => p,
        }
    }
}

impl DeviceProbe for Probe {
    fn backend(&self) -> Backend {
        self.inner().backend()
    }
    fn name(&self) -> String {
        self.inner().name()
    }
    fn memory(&self) -> Result<DeviceMemory, ProbeError> {
        self.inner().memory()
    }
    fn bandwidth(&self, cfg: &BandwidthConfig) -> Result<BandwidthResult, ProbeError> {
        self.inner().bandwidth(cfg)
    }
    fn bandwidth_suite(&self, cfg: &BandwidthConfig) -> Result<Vec<BandwidthResult>, ProbeError> {
        self.inner().bandwidth_suite(cfg)
    }
    fn context_overhead(&self) -> Option<Result<Bytes, ProbeError>> {
        self.inner().context_overhead()
    }
}

/// What a probe of one GPU found: either the device, or why it could not be probed.
#[derive(Debug, Clone, Serialize)]
pub struct GpuReport {
    /// Backend.
    pub backend: Backend,
    /// Device ordinal.
    pub index: usize,
    /// Device name, when it could be opened.
    pub name: Option<String>,
    /// Memory, when it could be read.
    pub memory: Option<DeviceMemory>,
    /// Measured bandwidth (the read kernel where there is one), when measured.
    pub bandwidth: Option<BandwidthResult>,
    /// Every kernel's measurement (read, write, copy), when measured.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub bandwidth_kernels: Vec<BandwidthResult>,
    /// Device memory one compute context costs, measured.
    pub context_overhead: Option<Bytes>,
    /// Why the device (or part of it) could not be probed.
    pub error: Option<String>,
}

/// Everything `boyd probe` reports about this machine.
#[derive(Debug, Clone, Serialize)]
pub struct ProbeReport {
    /// The CPU.
    pub cpu: CpuInfo,
    /// System memory.
    pub memory: HostMemory,
    /// Measured CPU memory bandwidth (streaming read, all threads), when measured.
    pub cpu_bandwidth: Option<BandwidthResult>,
    /// GPUs: one entry per device found, or one entry per backend saying why none was.
    pub gpus: Vec<GpuReport>,
}

/// Open every GPU of each backend (ordinals from 0 until one fails) and describe it,
/// measuring bandwidth when `cfg` is given. A backend that is not compiled in or has no
/// device yields one entry with the typed error's message.
pub fn probe_gpus(cfg: Option<&BandwidthConfig>) -> Vec<GpuReport> {
    let mut out = Vec::new();
    let mut add = |backend: Backend, open: &dyn Fn(usize) -> Result<Probe, ProbeError>| {
        for index in 0..16 {
            match open(index) {
                Ok(p) => out.push(describe(&p, index, cfg)),
                Err(e) => {
                    if index == 0 {
                        out.push(GpuReport {
                            backend,
                            index,
                            name: None,
                            memory: None,
                            bandwidth: None,
                            bandwidth_kernels: Vec::new(),
                            context_overhead: None,
                            error: Some(e.to_string()),
                        });
                    }
                    break;
                }
            }
        }
    };
    add(Backend::Cuda, &|i| cuda::CudaProbe::new(i).map(Probe::Cuda));
    add(Backend::Metal, &|i| {
        metal::MetalProbe::new(i).map(Probe::Metal)
    });
    out
}

fn describe(p: &Probe, index: usize, cfg: Option<&BandwidthConfig>) -> GpuReport {
    let mut errors = Vec::new();
    let memory = p.memory().map_err(|e| errors.push(e.to_string())).ok();
    let context_overhead = p
        .context_overhead()
        .and_then(|r| r.map_err(|e| errors.push(e.to_string())).ok());
    let bandwidth_kernels = cfg
        .and_then(|c| {
            p.bandwidth_suite(c)
                .map_err(|e| errors.push(e.to_string()))
                .ok()
        })
        .unwrap_or_default();
    GpuReport {
        backend: p.backend(),
        index,
        name: Some(p.name()),
        memory,
        bandwidth: bandwidth_kernels.first().cloned(),
        bandwidth_kernels,
        context_overhead,
        error: (!errors.is_empty()).then(|| errors.join("; ")),
    }
}

/// Probe the host: CPU, memory, CPU bandwidth (when `cfg` is given) and GPUs.
pub fn probe(cfg: Option<&BandwidthConfig>) -> Result<ProbeReport, ProbeError> {
    let cpu = CpuProbe::new();
    let memory = HostMemory::read()?;
    let cpu_bandwidth = match cfg {
        Some(c) => Some(cpu.bandwidth(c)?),
        None => None,
    };
    Ok(ProbeReport {
        cpu: cpu.info().clone(),
        memory,
        cpu_bandwidth,
        gpus: probe_gpus(cfg),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(not(any(feature = "cuda", all(feature = "metal", target_os = "macos"))))]
    #[test]
    fn auto_falls_back_to_the_cpu_without_gpu_backends() {
        let p = Probe::for_device("auto").expect("auto always opens something");
        assert_eq!(p.backend(), Backend::Cpu);
        assert!(p.context_overhead().is_none());
        assert!(matches!(
            Probe::for_device("tpu"),
            Err(ProbeError::BadConfig(_))
        ));
    }
}
