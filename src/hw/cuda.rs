//! The CUDA probe (feature `cuda`): device name and free/total memory from the driver, and
//! bandwidth measured with device-to-device copies through candle, timed between device
//! synchronizations (see [`super::bandwidth::device_copy_bandwidth`]).

use candle_core::Device;

use super::{BandwidthConfig, BandwidthResult, DeviceMemory, DeviceProbe, ProbeError};
use crate::sizing::Backend;
use crate::units::Bytes;

/// An NVIDIA GPU opened through candle.
#[derive(Debug)]
pub struct CudaProbe {
    device: Device,
    index: usize,
}

fn driver_err(during: &'static str, e: impl std::fmt::Display) -> ProbeError {
    ProbeError::Device {
        backend: "cuda",
        during,
        reason: e.to_string(),
    }
}

impl CudaProbe {
    /// Open CUDA device `index`.
    pub fn new(index: usize) -> Result<Self, ProbeError> {
        let device = Device::new_cuda(index).map_err(|e| ProbeError::NoDevice {
            backend: "cuda",
            index,
            reason: e.to_string(),
        })?;
        Ok(Self { device, index })
    }

    /// The candle device.
    pub fn device(&self) -> &Device {
        &self.device
    }
}

impl DeviceProbe for CudaProbe {
    fn backend(&self) -> Backend {
        Backend::Cuda
    }
    fn name(&self) -> String {
        match &self.device {
            Device::Cuda(d) => d
                .cuda_stream()
                .context()
                .name()
                .unwrap_or_else(|_| format!("cuda:{}", self.index)),
            _ => format!("cuda:{}", self.index),
        }
    }
    fn memory(&self) -> Result<DeviceMemory, ProbeError> {
        match &self.device {
            Device::Cuda(d) => {
                let (free, total) = d
                    .cuda_stream()
                    .context()
                    .mem_get_info()
                    .map_err(|e| driver_err("reading free memory", e))?;
                Ok(DeviceMemory {
                    total: Bytes(total as u64),
                    free: Bytes(free as u64),
                })
            }
            _ => Err(driver_err("reading free memory", "not a CUDA device")),
        }
    }
    fn bandwidth(&self, cfg: &BandwidthConfig) -> Result<BandwidthResult, ProbeError> {
        super::bandwidth::device_copy_bandwidth(&self.device, "cuda", cfg)
    }
}
