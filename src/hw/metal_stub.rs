//! Stand-in for the Metal probe in builds without the `metal` feature or not for macOS
//! (candle's pattern): the type cannot be constructed — [`MetalProbe::new`] returns [`ProbeError::NotCompiled`] — so
//! the same calling code compiles in every build and its methods are statically unreachable.

use std::convert::Infallible;

use super::{BandwidthConfig, BandwidthResult, DeviceMemory, DeviceProbe, ProbeError};
use crate::sizing::Backend;

/// An Apple GPU (not compiled in: this build has no `metal` feature, or is not for macOS).
#[derive(Debug)]
pub struct MetalProbe(Infallible);

impl MetalProbe {
    /// Always fails: this build has no Metal support.
    pub fn new(index: usize) -> Result<Self, ProbeError> {
        let _ = index;
        Err(ProbeError::NotCompiled {
            backend: "metal",
            feature: "metal",
        })
    }
}

impl DeviceProbe for MetalProbe {
    fn backend(&self) -> Backend {
        Backend::Metal
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
