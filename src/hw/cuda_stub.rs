//! Stand-in for the CUDA probe in builds without the `cuda` feature (candle's pattern): the
//! type cannot be constructed — [`CudaProbe::new`] returns [`ProbeError::NotCompiled`] — so
//! the same calling code compiles in every build and its methods are statically unreachable.

use std::convert::Infallible;

use super::{BandwidthConfig, BandwidthResult, DeviceMemory, DeviceProbe, ProbeError};
use crate::sizing::Backend;

/// An NVIDIA GPU (not compiled in: this build has no `cuda` feature).
#[derive(Debug)]
pub struct CudaProbe(Infallible);

impl CudaProbe {
    /// Always fails: this build has no CUDA support.
    pub fn new(index: usize) -> Result<Self, ProbeError> {
        let _ = index;
        Err(ProbeError::NotCompiled {
            backend: "cuda",
            feature: "cuda",
        })
    }
}

impl DeviceProbe for CudaProbe {
    fn backend(&self) -> Backend {
        Backend::Cuda
    }
    fn name(&self) -> String {
        match self.0 {}
    }
    fn memory(&self) -> Result<DeviceMemory, ProbeError> {
        match self.0 {}
    }
    fn bandwidth(&self, _cfg: &BandwidthConfig) -> Result<BandwidthResult, ProbeError> {
        match self.0 {}
    }
}
