//! The Metal probe (feature `metal`, macOS): the GPU's architecture name, its recommended
//! working-set size and what is allocated now, and bandwidth measured with buffer copies
//! through candle, timed between device synchronizations
//! (see [`super::bandwidth::device_copy_bandwidth`]).

use candle_core::Device;

use super::{BandwidthConfig, BandwidthResult, DeviceMemory, DeviceProbe, ProbeError};
use crate::sizing::Backend;
use crate::units::Bytes;

/// An Apple GPU opened through candle.
#[derive(Debug)]
pub struct MetalProbe {
    device: Device,
}

impl MetalProbe {
    /// Open Metal device `index`.
    pub fn new(index: usize) -> Result<Self, ProbeError> {
        let device = Device::new_metal(index).map_err(|e| ProbeError::NoDevice {
            backend: "metal",
            index,
            reason: e.to_string(),
        })?;
        Ok(Self { device })
    }

    /// The candle device.
    pub fn device(&self) -> &Device {
        &self.device
    }
}

impl DeviceProbe for MetalProbe {
    fn backend(&self) -> Backend {
        Backend::Metal
    }
    fn name(&self) -> String {
        match &self.device {
            Device::Metal(m) => format!("Apple GPU ({})", m.device().architecture_name()),
            _ => "metal".into(),
        }
    }
    fn memory(&self) -> Result<DeviceMemory, ProbeError> {
        match &self.device {
            Device::Metal(m) => {
                let total = m.device().recommended_max_working_set_size() as u64;
                let used = m.device().current_allocated_size() as u64;
                Ok(DeviceMemory {
                    total: Bytes(total),
                    free: Bytes(total.saturating_sub(used)),
                })
            }
            _ => Err(ProbeError::Device {
                backend: "metal",
                during: "reading memory",
                reason: "not a Metal device".into(),
            }),
        }
    }
    fn bandwidth(&self, cfg: &BandwidthConfig) -> Result<BandwidthResult, ProbeError> {
        super::bandwidth::device_copy_bandwidth(&self.device, "metal", cfg)
    }
}
