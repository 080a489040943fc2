//! The Metal probe (feature `metal`, macOS): the GPU's architecture name, its recommended
//! working-set size and what is allocated now, and bandwidth measured with boyd's own kernels
//! (`kernels/metal/bandwidth.metal`, embedded with `include_str!` and compiled by the Metal
//! driver when the probe first measures).
//!
//! The kernels read, write and copy a buffer of at least [`GPU_MIN_BYTES`] with 16-byte
//! accesses over a grid-stride loop. Each run is encoded on candle's own command queue for the
//! device and timed with the wall clock between two full synchronizations
//! (`MetalDevice::wait_until_completed`): Metal's GPU timestamps need counter sample buffers,
//! which candle's wrapper does not expose, and at ≥ 1 GiB per run the few tens of microseconds
//! a commit-and-wait costs are below 1 %.
//!
//! Not yet run on a Mac: written against candle 0.11.1's Metal wrapper
//! (`candle_metal_kernels::metal`) and checked by reading it, never compiled (no macOS machine).

use std::time::Instant;

use candle_core::{DType, Device, MetalDevice};
use candle_metal_kernels::metal::{ComputeCommandEncoder, ComputePipeline};
use objc2_metal::MTLSize;

use super::bandwidth::{gpu_buffer_bytes, BandwidthMethod, GPU_MIN_BYTES};
use super::{BandwidthConfig, BandwidthResult, DeviceMemory, DeviceProbe, ProbeError};
use crate::sizing::Backend;
use crate::units::Bytes;

/// The kernels' source, compiled at run time.
const BANDWIDTH_METAL: &str = include_str!("../../kernels/metal/bandwidth.metal");

/// Threads per threadgroup.
const GROUP: usize = 256;
/// Threadgroups: 256 K threads in flight, more than any Apple GPU keeps resident (an M2 Ultra's
/// 76 cores × 1024–2048 threads), so the grid fills the device.
const GROUPS: usize = 1024;
/// Largest buffer: keeps `i + 3 × grid` inside the kernels' 32-bit word indices.
const MAX_BYTES: u64 = 16 * Bytes::GIB;
/// Never equal to the XOR of copies of [`FILL`]: the read kernel never writes.
const MAGIC: u32 = 0x5eed_b0d0;
/// What the write kernel stores.
const FILL: u32 = 0x0101_0101;

/// An Apple GPU opened through candle.
#[derive(Debug)]
pub struct MetalProbe {
    device: Device,
}

fn metal_err(during: &'static str) -> impl Fn(String) -> ProbeError {
    move |reason| ProbeError::Device {
        backend: "metal",
        during,
        reason,
    }
}

struct Pipelines {
    read: ComputePipeline,
    write: ComputePipeline,
    copy: ComputePipeline,
}

impl MetalProbe {
    /// Open Metal device `index`.
    pub fn new(index: usize) -> Result<Self, ProbeError> {
        let device = Device::new_metal(index).map_err(|e| ProbeError::NoDevice {
            backend: "metal",
            index,
            // candle appends a backtrace; the report needs the first line.
            reason: e.to_string().lines().next().unwrap_or_default().to_string(),
        })?;
        Ok(Self { device })
    }

    /// The candle device.
    pub fn device(&self) -> &Device {
        &self.device
    }

    fn metal(&self) -> Result<&MetalDevice, ProbeError> {
        match &self.device {
            Device::Metal(m) => Ok(m),
            _ => Err(metal_err("opening the device")("not a Metal device".into())),
        }
    }

    fn pipelines(&self, m: &MetalDevice) -> Result<Pipelines, ProbeError> {
        let dev = m.device();
        let lib = dev
            .new_library_with_source(BANDWIDTH_METAL, None)
            .map_err(|e| metal_err("compiling kernels/metal/bandwidth.metal")(e.to_string()))?;
        let pipeline = |name: &str| -> Result<ComputePipeline, ProbeError> {
            let f = lib
                .get_function(name, None)
                .map_err(|e| metal_err("finding a bandwidth kernel")(e.to_string()))?;
            dev.new_compute_pipeline_state_with_function(&f)
                .map_err(|e| metal_err("creating a compute pipeline")(e.to_string()))
        };
        Ok(Pipelines {
            read: pipeline("boyd_bw_read")?,
            write: pipeline("boyd_bw_write")?,
            copy: pipeline("boyd_bw_copy")?,
        })
    }
}

/// One untimed warm-up run, then `runs` runs, each encoded and waited for on its own.
fn timed_runs(
    m: &MetalDevice,
    runs: usize,
    encode: &mut dyn FnMut() -> Result<(), ProbeError>,
) -> Result<Vec<f64>, ProbeError> {
    let wait = |m: &MetalDevice| {
        m.wait_until_completed()
            .map_err(|e| metal_err("waiting for the GPU")(e.to_string()))
    };
    wait(m)?;
    encode()?;
    wait(m)?;
    let mut secs = Vec::with_capacity(runs);
    for _ in 0..runs {
        let t0 = Instant::now();
        encode()?;
        wait(m)?;
        secs.push(t0.elapsed().as_secs_f64());
    }
    Ok(secs)
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

    /// `total` is the recommended working-set size (what Metal advises one process to keep
    /// resident), `free` that minus what the device has allocated now.
    fn memory(&self) -> Result<DeviceMemory, ProbeError> {
        let m = self.metal()?;
        let total = m.device().recommended_max_working_set_size() as u64;
        let used = m.device().current_allocated_size() as u64;
        Ok(DeviceMemory {
            total: Bytes(total),
            free: Bytes(total.saturating_sub(used)),
        })
    }

    fn bandwidth(&self, cfg: &BandwidthConfig) -> Result<BandwidthResult, ProbeError> {
        let mut all = self.bandwidth_suite(cfg)?;
        Ok(all.remove(0))
    }

    fn bandwidth_suite(&self, cfg: &BandwidthConfig) -> Result<Vec<BandwidthResult>, ProbeError> {
        if cfg.runs == 0 {
            return Err(ProbeError::BadConfig("runs must be at least 1".into()));
        }
        let m = self.metal()?;
        let free = self.memory()?.free;
        let bytes = gpu_buffer_bytes(cfg, free)
            .ok_or_else(|| {
                metal_err("sizing the bandwidth buffers")(format!(
                    "only {free} of the working set free; the probe wants 3 × {}",
                    Bytes(GPU_MIN_BYTES)
                ))
            })?
            .min(MAX_BYTES);
        let words = (bytes / 16) as u32;
        let p = self.pipelines(m)?;
        let alloc = |name: &str, len: usize| {
            m.new_private_buffer(len / 4, DType::U32, name)
                .map_err(|e| metal_err("allocating the bandwidth buffers")(e.to_string()))
        };
        let a = alloc("boyd-bw-a", bytes as usize)?;
        let b = alloc("boyd-bw-b", bytes as usize)?;
        let sink = alloc("boyd-bw-sink", 16 * GROUPS)?;
        let groups = MTLSize {
            width: GROUPS,
            height: 1,
            depth: 1,
        };
        let per_group = MTLSize {
            width: GROUP,
            height: 1,
            depth: 1,
        };
        let encoder = || {
            m.command_encoder()
                .map_err(|e| metal_err("encoding a kernel")(e.to_string()))
        };

        let write = timed_runs(m, cfg.runs, &mut || {
            let guard = encoder()?;
            guard.set_compute_pipeline_state(&p.write);
            let enc: &ComputeCommandEncoder = guard.as_ref();
            enc.set_output_buffer(0, Some(&*a), 0);
            enc.set_bytes(1, &words);
            enc.set_bytes(2, &FILL);
            enc.dispatch_thread_groups(groups, per_group);
            Ok(())
        })?;
        let read = timed_runs(m, cfg.runs, &mut || {
            let guard = encoder()?;
            guard.set_compute_pipeline_state(&p.read);
            let enc: &ComputeCommandEncoder = guard.as_ref();
            enc.set_input_buffer(0, Some(&*a), 0);
            enc.set_bytes(1, &words);
            enc.set_bytes(2, &MAGIC);
            enc.set_output_buffer(3, Some(&*sink), 0);
            enc.dispatch_thread_groups(groups, per_group);
            Ok(())
        })?;
        let copy = timed_runs(m, cfg.runs, &mut || {
            let guard = encoder()?;
            guard.set_compute_pipeline_state(&p.copy);
            let enc: &ComputeCommandEncoder = guard.as_ref();
            enc.set_input_buffer(0, Some(&*a), 0);
            enc.set_output_buffer(1, Some(&*b), 0);
            enc.set_bytes(2, &words);
            enc.dispatch_thread_groups(groups, per_group);
            Ok(())
        })?;
        let threads = GROUP * GROUPS;
        let bytes = u64::from(words) * 16;
        Ok(vec![
            BandwidthResult::from_times(BandwidthMethod::KernelRead, bytes, threads, &read)?,
            BandwidthResult::from_times(BandwidthMethod::KernelWrite, bytes, threads, &write)?,
            BandwidthResult::from_times(BandwidthMethod::KernelCopy, 2 * bytes, threads, &copy)?,
        ])
    }
}
