//! The CUDA probe (feature `cuda`): device name and free/total memory from the driver, the
//! device memory one CUDA context costs (measured), and bandwidth measured with boyd's own
//! kernels (`kernels/cuda/bandwidth.cu`, compiled to PTX by `build.rs`).
//!
//! The kernels read, write and copy a buffer of at least [`GPU_MIN_BYTES`] with 16-byte
//! accesses over a grid of every SM × its maximum resident threads, each run timed with a pair
//! of CUDA events on a stream of its own; the best run is the figure (STREAM's convention).
//! Everything goes through cudarc, the binding candle's CUDA backend uses, on the device's
//! primary context, which candle shares: the probe sees the same device memory the model does.
//!
//! # Why `unsafe` is allowed here
//!
//! Kernel launches are FFI and `unsafe`: the driver cannot check that the arguments match the
//! kernel's signature. This is one of the three places that opt out of the crate's
//! `deny(unsafe_code)` (with `kernels` and `measure::alloc`; see ARCHITECTURE.md), and every
//! launch states why its arguments match.
#![allow(unsafe_code)]

use std::sync::Arc;

use candle_core::cuda_backend::cudarc::driver::{
    sys, CudaContext, CudaFunction, CudaStream, DriverError, LaunchConfig, PushKernelArg,
};
use candle_core::cuda_backend::cudarc::nvrtc::Ptx;
use candle_core::Device;

use super::bandwidth::{gpu_buffer_bytes, BandwidthMethod, GPU_MIN_BYTES};
use super::{BandwidthConfig, BandwidthResult, DeviceMemory, DeviceProbe, ProbeError};
use crate::sizing::Backend;
use crate::units::Bytes;

/// The bandwidth kernels as PTX (virtual architecture `compute_75`, JIT-compiled by the
/// driver for the GPU at hand).
const BANDWIDTH_PTX: &str = include_str!(concat!(env!("OUT_DIR"), "/bandwidth.ptx"));

/// Threads per block: 8 warps, so an SM with 2048 resident threads holds 8 blocks.
const BLOCK: u32 = 256;

/// What the read kernel compares its folded value with before it writes anything: never equal
/// to the XOR of any number of copies of [`FILL`], so the kernel never writes.
const MAGIC: i32 = 0x5eed_b0d0;
/// The value the write kernel stores (and the read kernel later reads).
const FILL: i32 = 0x0101_0101;

/// An NVIDIA GPU opened through candle.
pub struct CudaProbe {
    device: Device,
    ctx: Arc<CudaContext>,
    index: usize,
}

impl std::fmt::Debug for CudaProbe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CudaProbe")
            .field("index", &self.index)
            .finish_non_exhaustive()
    }
}

fn driver_err(during: &'static str) -> impl Fn(DriverError) -> ProbeError {
    move |e| ProbeError::Device {
        backend: "cuda",
        during,
        reason: e.to_string(),
    }
}

/// The first line of a candle error: candle appends a backtrace, which a probe report does
/// not need.
fn first_line(e: &candle_core::Error) -> String {
    e.to_string().lines().next().unwrap_or_default().to_string()
}

impl CudaProbe {
    /// Open CUDA device `index` (its primary context, shared with candle).
    pub fn new(index: usize) -> Result<Self, ProbeError> {
        let no_device = |reason: String| ProbeError::NoDevice {
            backend: "cuda",
            index,
            reason,
        };
        let device = Device::new_cuda(index).map_err(|e| no_device(first_line(&e)))?;
        let ctx = match &device {
            Device::Cuda(d) => d.cuda_stream().context().clone(),
            _ => return Err(no_device("candle returned a non-CUDA device".into())),
        };
        Ok(Self { device, ctx, index })
    }

    /// The candle device.
    pub fn device(&self) -> &Device {
        &self.device
    }

    fn attribute(&self, a: sys::CUdevice_attribute) -> Result<u32, ProbeError> {
        let v = self
            .ctx
            .attribute(a)
            .map_err(driver_err("reading a device attribute"))?;
        Ok(v.max(1) as u32)
    }

    /// A grid that fills the device: every SM at its maximum resident threads.
    fn fill_grid(&self) -> Result<LaunchConfig, ProbeError> {
        use sys::CUdevice_attribute as A;
        let sms = self.attribute(A::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?;
        let per_sm = self.attribute(A::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR)?;
        Ok(LaunchConfig {
            grid_dim: (sms * (per_sm / BLOCK).max(1), 1, 1),
            block_dim: (BLOCK, 1, 1),
            shared_mem_bytes: 0,
        })
    }

    fn kernels(&self) -> Result<Kernels, ProbeError> {
        let module = self
            .ctx
            .load_module(Ptx::from_src(BANDWIDTH_PTX))
            .map_err(driver_err(
                "loading the bandwidth kernels (PTX; the driver may be older than the CUDA \
                 toolkit boyd was built with: update the driver or rebuild with an older CUDA)",
            ))?;
        let f = |name: &str| {
            module
                .load_function(name)
                .map_err(driver_err("finding a bandwidth kernel in the PTX"))
        };
        Ok(Kernels {
            read: f("boyd_bw_read")?,
            write: f("boyd_bw_write")?,
            copy: f("boyd_bw_copy")?,
        })
    }
}

struct Kernels {
    read: CudaFunction,
    write: CudaFunction,
    copy: CudaFunction,
}

/// Time `launch` on `stream` between two timing events: milliseconds → seconds.
fn timed(
    stream: &Arc<CudaStream>,
    launch: &mut dyn FnMut() -> Result<(), DriverError>,
) -> Result<f64, DriverError> {
    let flags = Some(sys::CUevent_flags::CU_EVENT_DEFAULT);
    let start = stream.record_event(flags)?;
    launch()?;
    let end = stream.record_event(flags)?;
    Ok(f64::from(start.elapsed_ms(&end)?) / 1e3)
}

/// One untimed warm-up run, then `runs` timed ones.
fn runs(
    stream: &Arc<CudaStream>,
    runs: usize,
    launch: &mut dyn FnMut() -> Result<(), DriverError>,
) -> Result<Vec<f64>, DriverError> {
    launch()?;
    stream.synchronize()?;
    (0..runs).map(|_| timed(stream, launch)).collect()
}

impl DeviceProbe for CudaProbe {
    fn backend(&self) -> Backend {
        Backend::Cuda
    }

    fn name(&self) -> String {
        self.ctx
            .name()
            .unwrap_or_else(|_| format!("cuda:{}", self.index))
    }

    fn memory(&self) -> Result<DeviceMemory, ProbeError> {
        let (free, total) = self
            .ctx
            .mem_get_info()
            .map_err(driver_err("reading free memory"))?;
        Ok(DeviceMemory {
            total: Bytes(total as u64),
            free: Bytes(free as u64),
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
        let free = self.memory()?.free;
        let bytes = gpu_buffer_bytes(cfg, free).ok_or_else(|| ProbeError::Device {
            backend: "cuda",
            during: "sizing the bandwidth buffers",
            reason: format!(
                "only {free} free; the probe wants 3 × {} (free memory or lower --bw-mib)",
                Bytes(GPU_MIN_BYTES)
            ),
        })?;
        let words = bytes / 16;
        let k = self.kernels()?;
        let grid = self.fill_grid()?;
        let threads = (grid.grid_dim.0 * grid.block_dim.0) as usize;
        let stream = self
            .ctx
            .new_stream()
            .map_err(driver_err("creating a stream"))?;
        let alloc_err = driver_err("allocating the bandwidth buffers");
        let mut a = stream
            .alloc_zeros::<u8>(bytes as usize)
            .map_err(&alloc_err)?;
        let mut b = stream
            .alloc_zeros::<u8>(bytes as usize)
            .map_err(&alloc_err)?;
        let mut sink = stream
            .alloc_zeros::<u8>(16 * grid.grid_dim.0 as usize)
            .map_err(&alloc_err)?;

        // SAFETY (all three launches): the arguments match the kernels' C signatures in
        // kernels/cuda/bandwidth.cu — device pointers to buffers of `bytes` bytes (and `sink`
        // of 16 bytes per block), `words = bytes / 16` as uint64_t, an int — and every index a
        // kernel touches is below `words` (grid-stride loops bounded by `n`), or below the
        // grid's block count for `sink`. `a` and `b` are distinct allocations, so the copy's
        // `__restrict__` holds.
        let write = runs(&stream, cfg.runs, &mut || {
            let mut l = stream.launch_builder(&k.write);
            l.arg(&mut a).arg(&words).arg(&FILL);
            // SAFETY: see "all three launches" above.
            unsafe { l.launch(grid) }.map(drop)
        })
        .map_err(driver_err("running the write kernel"))?;
        let read = runs(&stream, cfg.runs, &mut || {
            let mut l = stream.launch_builder(&k.read);
            l.arg(&a).arg(&words).arg(&MAGIC).arg(&mut sink);
            // SAFETY: see "all three launches" above.
            unsafe { l.launch(grid) }.map(drop)
        })
        .map_err(driver_err("running the read kernel"))?;
        let copy = runs(&stream, cfg.runs, &mut || {
            let mut l = stream.launch_builder(&k.copy);
            l.arg(&a).arg(&mut b).arg(&words);
            // SAFETY: see "all three launches" above.
            unsafe { l.launch(grid) }.map(drop)
        })
        .map_err(driver_err("running the copy kernel"))?;
        stream
            .synchronize()
            .map_err(driver_err("synchronizing after the bandwidth kernels"))?;
        Ok(vec![
            BandwidthResult::from_times(BandwidthMethod::KernelRead, bytes, threads, &read)?,
            BandwidthResult::from_times(BandwidthMethod::KernelWrite, bytes, threads, &write)?,
            BandwidthResult::from_times(BandwidthMethod::KernelCopy, 2 * bytes, threads, &copy)?,
        ])
    }

    #[cfg(boyd_cuda_ctx_create)]
    fn context_overhead(&self) -> Option<Result<Bytes, ProbeError>> {
        // Free memory with our (primary) context alive, then with a second context created on
        // the same device: the difference is what one context costs on this GPU and driver
        // (its local memory, printf and malloc heaps, the driver's own reservations). Another
        // process allocating at the same moment would skew it; the smaller of two tries wins.
        let once = || -> Result<u64, ProbeError> {
            let before = self.memory()?.free.0;
            let extra = CudaContext::new_non_primary(self.index, 0)
                .map_err(driver_err("creating a second context to measure its cost"))?;
            let after = extra
                .mem_get_info()
                .map_err(driver_err("reading free memory in the second context"))?
                .0 as u64;
            drop(extra);
            self.ctx
                .bind_to_thread()
                .map_err(driver_err("binding the primary context again"))?;
            Ok(before.saturating_sub(after))
        };
        Some((|| Ok(Bytes(once()?.min(once()?))))())
    }

    #[cfg(not(boyd_cuda_ctx_create))]
    fn context_overhead(&self) -> Option<Result<Bytes, ProbeError>> {
        Some(Err(ProbeError::Device {
            backend: "cuda",
            during: "measuring the context overhead",
            reason: "this build's CUDA version has no cuCtxCreate binding in cudarc (CUDA \
                     11.4–13.1 have it): rebuild with scripts/check-cuda.sh (CUDA 13.0)"
                .into(),
        }))
    }
}
