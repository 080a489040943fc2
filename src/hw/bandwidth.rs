//! Memory bandwidth, measured.
//!
//! CPU: every thread streams through its own buffer (allocated and first touched by that
//! thread, filled with non-zero data so no page is the shared zero page), summing 64-bit words
//! in a loop the compiler vectorizes, so the memory system, not the adder chain, is the
//! limit. The buffers together are far larger than the last-level cache.
//! Threads start and stop at a barrier and the clock is read by the coordinating thread
//! between the two barriers, so one run's time covers the slowest thread. One untimed run
//! warms up; the result keeps every run and reports the best (STREAM's convention), the mean
//! and the spread.
//!
//! GPUs: boyd's own kernels (`kernels/cuda/bandwidth.cu`, `kernels/metal/bandwidth.metal`)
//! read, write and copy a buffer of at least [`GPU_MIN_BYTES`] with 16-byte accesses over a
//! grid that fills the device; see `cuda.rs` and `metal.rs`. [`device_copy_bandwidth`] — a
//! device-to-device copy through candle, counted as read + write bytes, timed between device
//! synchronizations — runs on any candle device (CPU included, where tests exercise it) and is
//! the fallback when a kernel cannot be loaded.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Barrier};
use std::time::Instant;

use serde::Serialize;

use super::{CpuInfo, HostMemory, ProbeError};
use crate::units::{Bytes, BytesPerSec};

/// How to measure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BandwidthConfig {
    /// Bytes streamed per run, over all threads.
    pub bytes: u64,
    /// Threads (CPU only).
    pub threads: usize,
    /// Timed runs (one more, untimed, warms up).
    pub runs: usize,
}

/// Smallest buffer the probe accepts.
pub const MIN_BYTES: u64 = 4 * Bytes::MIB;

/// Smallest buffer a GPU probe uses, whatever the host-sized configuration asks: far above
/// any GPU's last-level cache (50 MiB on an H100/H200), and long enough per run (≈ 0.2 ms at
/// 4.8 TB/s) for event timing to be exact.
pub const GPU_MIN_BYTES: u64 = Bytes::GIB;

/// The buffer a GPU probe uses: `cfg.bytes`, at least [`GPU_MIN_BYTES`], at most `free / 3`
/// (a copy needs two buffers and the rest stays free), rounded down to whole 16-byte words ×
/// 1024. `None` when the device has less than [`MIN_BYTES`] × 3 free.
pub fn gpu_buffer_bytes(cfg: &BandwidthConfig, free: Bytes) -> Option<u64> {
    let cap = free.0 / 3;
    let want = cfg.bytes.max(GPU_MIN_BYTES).min(cap);
    (want >= MIN_BYTES).then_some(want & !(16 * 1024 - 1))
}

impl BandwidthConfig {
    /// Defaults for this host: all logical CPUs, 8 runs, a buffer of 16 × the last-level
    /// cache and at least 256 MiB, but at most a quarter of the available memory.
    pub fn for_host(cpu: &CpuInfo, mem: &HostMemory) -> Self {
        let llc = cpu.last_level_cache.map_or(32 * Bytes::MIB, |b| b.0);
        let want = (16 * llc).max(256 * Bytes::MIB);
        let cap = mem.available.unwrap_or(mem.total).0 / 4;
        Self {
            bytes: want.min(cap).max(MIN_BYTES),
            threads: cpu.logical.max(1),
            runs: 8,
        }
    }

    fn check(&self) -> Result<(), ProbeError> {
        if self.bytes < MIN_BYTES {
            return Err(ProbeError::BadConfig(format!(
                "buffer of {} is smaller than {}",
                Bytes(self.bytes),
                Bytes(MIN_BYTES)
            )));
        }
        if self.threads == 0 || self.runs == 0 {
            return Err(ProbeError::BadConfig(
                "threads and runs must be at least 1".into(),
            ));
        }
        Ok(())
    }
}

/// What was measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum BandwidthMethod {
    /// CPU: every thread sums its own buffer (bytes read).
    CpuStreamingRead,
    /// Device: copy one buffer into another through candle (bytes read + bytes written).
    DeviceCopy,
    /// GPU: boyd's read kernel (16-byte loads, grid-stride; bytes read). What decode does.
    KernelRead,
    /// GPU: boyd's write kernel (16-byte stores; bytes written).
    KernelWrite,
    /// GPU: boyd's copy kernel (bytes read + bytes written).
    KernelCopy,
}

/// One bandwidth measurement.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BandwidthResult {
    /// How.
    pub method: BandwidthMethod,
    /// Bytes moved per run.
    pub bytes_per_run: Bytes,
    /// Threads that ran: CPU threads, GPU threads in the grid, or 1 (candle copy).
    pub threads: usize,
    /// Bandwidth of each timed run.
    pub samples: Vec<BytesPerSec>,
    /// The best run: the figure to use.
    pub best: BytesPerSec,
    /// Mean over the runs.
    pub mean: BytesPerSec,
    /// `(best - worst) / best`: how repeatable the runs were.
    pub spread: f64,
}

impl BandwidthResult {
    /// Summarize runs that each moved `bytes` in the given seconds.
    pub fn from_times(
        method: BandwidthMethod,
        bytes: u64,
        threads: usize,
        secs: &[f64],
    ) -> Result<Self, ProbeError> {
        let samples: Vec<f64> = secs
            .iter()
            .filter(|s| s.is_finite() && **s > 0.0)
            .map(|s| bytes as f64 / s)
            .collect();
        if samples.is_empty() {
            return Err(ProbeError::BadConfig("no run took measurable time".into()));
        }
        let best = samples.iter().copied().fold(0.0, f64::max);
        let worst = samples.iter().copied().fold(f64::INFINITY, f64::min);
        let mean = samples.iter().sum::<f64>() / samples.len() as f64;
        Ok(Self {
            method,
            bytes_per_run: Bytes(bytes),
            threads,
            samples: samples.into_iter().map(BytesPerSec).collect(),
            best: BytesPerSec(best),
            mean: BytesPerSec(mean),
            spread: (best - worst) / best,
        })
    }
}

/// Sum 64-bit words. Integer addition is associative, so LLVM turns this fold into wide vector
/// adds with several accumulators (measured: ~7x faster than a hand-unrolled `[u64; 8]`
/// accumulator array, which it keeps in memory).
fn stream_sum(words: &[u64]) -> u64 {
    words.iter().fold(0u64, |a, &w| a.wrapping_add(w))
}

/// A buffer of `words` non-zero words, allocated and first touched by the calling thread.
fn touched_buffer(words: usize) -> Option<Vec<u64>> {
    let mut v: Vec<u64> = Vec::new();
    v.try_reserve_exact(words).ok()?;
    v.extend((0..words as u64).map(|i| i | 1));
    Some(v)
}

/// Multi-threaded streaming-read bandwidth of the host's memory.
pub fn cpu_read_bandwidth(cfg: &BandwidthConfig) -> Result<BandwidthResult, ProbeError> {
    cfg.check()?;
    // Whole 64-byte lines per thread.
    let words = ((cfg.bytes / cfg.threads as u64 / 8) & !7) as usize;
    let failed = AtomicBool::new(false);
    let abort = AtomicBool::new(false);
    let runs = cfg.runs + 1;
    std::thread::scope(|s| {
        let mut senders = Vec::new();
        let mut spawn_error = None;
        for t in 0..cfg.threads {
            let (tx, rx) = mpsc::channel::<Arc<Barrier>>();
            let (failed, abort) = (&failed, &abort);
            let spawned = std::thread::Builder::new()
                .name(format!("bw-probe-{t}"))
                .spawn_scoped(s, move || {
                    let Ok(barrier) = rx.recv() else { return };
                    let buf = touched_buffer(words);
                    if buf.is_none() {
                        failed.store(true, Ordering::Relaxed);
                    }
                    barrier.wait(); // allocated
                    barrier.wait(); // decision taken
                    if abort.load(Ordering::Relaxed) {
                        return;
                    }
                    let buf = buf.unwrap_or_default();
                    for _ in 0..runs {
                        barrier.wait();
                        std::hint::black_box(stream_sum(std::hint::black_box(&buf)));
                        barrier.wait();
                    }
                });
            match spawned {
                Ok(_) => senders.push(tx),
                Err(e) => {
                    spawn_error = Some(e.to_string());
                    break;
                }
            }
        }
        if senders.is_empty() {
            return Err(ProbeError::Device {
                backend: "cpu",
                during: "starting threads",
                reason: spawn_error.unwrap_or_default(),
            });
        }
        let threads = senders.len();
        let barrier = Arc::new(Barrier::new(threads + 1));
        for tx in &senders {
            // A worker that is gone cannot join the barrier; treat it like a failed spawn.
            if tx.send(barrier.clone()).is_err() {
                failed.store(true, Ordering::Relaxed);
            }
        }
        drop(senders);
        barrier.wait();
        if failed.load(Ordering::Relaxed) {
            abort.store(true, Ordering::Relaxed);
        }
        barrier.wait();
        if abort.load(Ordering::Relaxed) {
            return Err(ProbeError::Device {
                backend: "cpu",
                during: "allocating the buffers",
                reason: format!("{} not available", Bytes(cfg.bytes)),
            });
        }
        let mut secs = Vec::with_capacity(cfg.runs);
        for run in 0..runs {
            barrier.wait();
            let t0 = Instant::now();
            barrier.wait();
            if run > 0 {
                secs.push(t0.elapsed().as_secs_f64());
            }
        }
        let bytes = (words * 8 * threads) as u64;
        BandwidthResult::from_times(BandwidthMethod::CpuStreamingRead, bytes, threads, &secs)
    })
}

/// Copy bandwidth of a candle device: `bytes` copied device-to-device per run, counted as
/// `2 × bytes` moved (read + write), timed between synchronizations.
pub fn device_copy_bandwidth(
    device: &candle_core::Device,
    backend: &'static str,
    cfg: &BandwidthConfig,
) -> Result<BandwidthResult, ProbeError> {
    cfg.check()?;
    let err = |during: &'static str| {
        move |e: candle_core::Error| ProbeError::Device {
            backend,
            during,
            reason: e.to_string(),
        }
    };
    let elems = (cfg.bytes / 4) as usize;
    let x = candle_core::Tensor::ones(elems, candle_core::DType::F32, device)
        .map_err(err("allocating the buffer"))?;
    device.synchronize().map_err(err("synchronizing"))?;
    let mut secs = Vec::with_capacity(cfg.runs);
    for run in 0..=cfg.runs {
        let t0 = Instant::now();
        let y = x.copy().map_err(err("copying"))?;
        device.synchronize().map_err(err("synchronizing"))?;
        let dt = t0.elapsed().as_secs_f64();
        drop(y);
        if run > 0 {
            secs.push(dt);
        }
    }
    BandwidthResult::from_times(BandwidthMethod::DeviceCopy, 2 * elems as u64 * 4, 1, &secs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sum_covers_every_word() {
        let v: Vec<u64> = (1..=21).collect();
        assert_eq!(stream_sum(&v), 21 * 22 / 2);
        assert_eq!(stream_sum(&[]), 0);
    }

    #[test]
    fn small_cpu_probe_runs_and_summarizes() {
        let cfg = BandwidthConfig {
            bytes: MIN_BYTES,
            threads: 2,
            runs: 3,
        };
        let r = cpu_read_bandwidth(&cfg).expect("probe");
        assert_eq!(r.samples.len(), 3);
        assert_eq!(r.threads, 2);
        assert!(r.best.0 > 0.0 && r.best >= r.mean);
        assert!((0.0..1.0).contains(&r.spread));
        let bad = BandwidthConfig { threads: 0, ..cfg };
        assert!(matches!(
            cpu_read_bandwidth(&bad),
            Err(ProbeError::BadConfig(_))
        ));
    }

    #[test]
    fn device_copy_runs_on_the_cpu_device() {
        let cfg = BandwidthConfig {
            bytes: MIN_BYTES,
            threads: 1,
            runs: 2,
        };
        let r = device_copy_bandwidth(&candle_core::Device::Cpu, "cpu", &cfg).expect("copy");
        assert_eq!(r.method, BandwidthMethod::DeviceCopy);
        assert_eq!(r.bytes_per_run, Bytes(2 * MIN_BYTES));
    }

    #[test]
    fn gpu_buffer_is_large_but_leaves_memory_free() {
        let cfg = BandwidthConfig {
            bytes: 256 * Bytes::MIB,
            threads: 1,
            runs: 1,
        };
        assert_eq!(
            gpu_buffer_bytes(&cfg, Bytes(80 * Bytes::GIB)),
            Some(GPU_MIN_BYTES)
        );
        let big = BandwidthConfig {
            bytes: 4 * Bytes::GIB + 5,
            ..cfg.clone()
        };
        assert_eq!(
            gpu_buffer_bytes(&big, Bytes(80 * Bytes::GIB)),
            Some(4 * Bytes::GIB)
        );
        let b = gpu_buffer_bytes(&cfg, Bytes(Bytes::GIB)).expect("fits");
        assert!(b <= Bytes::GIB / 3 && b.is_multiple_of(16));
        assert_eq!(gpu_buffer_bytes(&cfg, Bytes(MIN_BYTES)), None);
    }

    #[test]
    fn summary_is_best_mean_and_spread() {
        let r = BandwidthResult::from_times(
            BandwidthMethod::CpuStreamingRead,
            100,
            1,
            &[1.0, 2.0, 0.0],
        )
        .expect("r");
        assert_eq!(r.best, BytesPerSec(100.0));
        assert_eq!(r.mean, BytesPerSec(75.0));
        assert!((r.spread - 0.5).abs() < 1e-12);
        assert!(BandwidthResult::from_times(BandwidthMethod::DeviceCopy, 1, 1, &[]).is_err());
    }
}
