//! The `boyd validate` record: one serde type, written as `report.json`, rendered as the table
//! and plotted as `report.svg`.
//!
//! Schema (version [`REPORT_SCHEMA`]); every byte count is a plain integer, every speed plain
//! tokens/s, every time seconds:
//!
//! - `schema`, `model`, `device`, `build`, `host`: what ran where (the bench's records).
//! - `bandwidth`: the probe's measurement (method, bytes per run, samples, best, mean, spread);
//!   on a GPU the read kernel's, with `bandwidth_kernels` holding read, write and copy.
//! - `memory`: the measured memory terms — `baseline` reading before load, `weights`,
//!   `kv` per depth, `compute` peak during a prefill, `overhead`, `total` and `unaccounted`
//!   — each with the predicted figure next to the measured ones (allocator and RSS); on a GPU
//!   also `device`: the driver's free/total memory at each stage and the measured context cost.
//! - `memory_curve`: the predicted memory terms at a range of context lengths (the plot's lines).
//! - `speed`: the raw llama-bench records; `prefill` and `decode`: per test, measured mean ± sd
//!   and the prediction before and after calibration (decode also: `bandwidth_fraction`, achieved
//!   bytes/s ÷ measured bandwidth); `decode_curve`: both predictions over
//!   depths (the plot's lines).
//! - `calibration`: the decode fit, the prefill efficiency, and the profile that was saved.
//! - `rows`: the comparison table (component | predicted | measured | error %).
//! - `wall_s`, `load_average`: how long it took and how busy the machine was.

use serde::Serialize;

use super::bench::{BenchRecord, BuildInfo, HostInfo, ModelInfo};
use super::calibrate::{DecodeFit, DecodePoint};
use super::compare::Row;
use super::memory::MemSnapshot;
use crate::hw::BandwidthResult;
use crate::sizing::{ComputeLayout, Profile};
use crate::units::Bytes;

/// Version of the report layout; bump on any incompatible change (additions are compatible).
pub const REPORT_SCHEMA: u32 = 1;

/// The device's memory as the driver reports it at one stage of a GPU validation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DeviceReading {
    /// When: `before load`, `after load`, `empty cache`, `kv @ d512`, `end`.
    pub stage: String,
    /// Total device memory.
    pub total: Bytes,
    /// Free device memory (CUDA `cuMemGetInfo`; Metal: working set − allocated).
    pub free: Bytes,
    /// `total − free`: used by every process on the device (Metal: by this process).
    pub used: Bytes,
}

/// GPU memory: the driver's readings and the measured cost of a context.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DeviceMemoryReport {
    /// Readings in the order taken.
    pub readings: Vec<DeviceReading>,
    /// Device memory one compute context costs, measured (CUDA: free memory before and after
    /// creating a second context).
    pub context_overhead: Option<Bytes>,
    /// Why the context overhead could not be measured.
    pub context_overhead_error: Option<String>,
}

/// How memory was measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum MemorySource {
    /// The counting global allocator (host heap; exact for CPU tensors).
    Heap,
    /// The process's resident set (allocator not installed).
    Rss,
    /// The device's free memory (GPU).
    Device,
}

/// Weights after load.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WeightsMemory {
    /// Tensor bytes in the file.
    pub file_tensors: Bytes,
    /// The embedding copy the sizing model adds for this backend (zero for boyd).
    pub embedding_copy: Bytes,
    /// RoPE cos/sin tables the decoder builds at load (context × head dim × 4 bytes).
    pub rope_tables: Bytes,
    /// `file_tensors + embedding_copy + rope_tables`.
    pub predicted: Bytes,
    /// What loading added, by the chosen source.
    pub measured: Option<Bytes>,
    /// Heap growth across the load.
    pub heap_delta: Option<i64>,
    /// RSS growth across the load.
    pub rss_delta: Option<i64>,
}

/// The KV cache at one depth.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct KvPoint {
    /// Positions in the cache.
    pub depth: usize,
    /// Sizing model's KV bytes at this depth.
    pub predicted: Bytes,
    /// The cache's own count of bytes holding positions.
    pub cache_used: Bytes,
    /// The cache's allocated buffers (whole chunks).
    pub cache_allocated: Bytes,
    /// What the cache added, by the chosen source (heap or device delta from an empty cache).
    pub measured: Option<Bytes>,
    /// RSS growth from an empty cache.
    pub rss_delta: Option<i64>,
}

/// Transient memory during a prefill.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ComputeMemory {
    /// Prompt tokens (one micro-batch, from an empty cache).
    pub tokens: usize,
    /// The loaded decoder's engine (`native/avx2`, `candle`), whose layout was predicted.
    pub engine: String,
    /// The activation layout the prediction follows.
    pub layout: ComputeLayout,
    /// Sizing model's compute buffers at this context.
    pub predicted: Bytes,
    /// Peak during the prefill minus what was live before and the KV allocated by it.
    pub measured: Option<Bytes>,
}

/// The memory terms.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MemoryReport {
    /// Where the measured figures come from.
    pub source: MemorySource,
    /// Reading before the model was loaded.
    pub baseline: MemSnapshot,
    /// Weights.
    pub weights: WeightsMemory,
    /// KV cache per depth.
    pub kv: Vec<KvPoint>,
    /// Compute peak.
    pub compute: ComputeMemory,
    /// Predicted fixed overhead (process baseline, contexts).
    pub overhead_predicted: Bytes,
    /// Measured: RSS before loading (host), or device memory in use before loading (GPU).
    pub overhead_measured: Option<Bytes>,
    /// Context the totals are for (deepest depth + generated tokens).
    pub total_ctx: usize,
    /// Sizing model's total at `total_ctx`.
    pub total_predicted: Bytes,
    /// Peak RSS over the run (host), or peak device use (GPU).
    pub total_measured: Option<Bytes>,
    /// `total_measured − (overhead + weights + KV at the deepest depth + compute)`.
    pub unaccounted: Option<i64>,
    /// GPU only: the driver's readings and the context cost.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device: Option<DeviceMemoryReport>,
}

/// Predicted memory terms at one context length (a point on the plot's lines).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MemoryCurvePoint {
    /// Context length.
    pub ctx: usize,
    /// Weights as loaded.
    pub weights: Bytes,
    /// KV cache.
    pub kv: Bytes,
    /// Compute buffers.
    pub compute: Bytes,
    /// Overhead.
    pub overhead: Bytes,
    /// Sum.
    pub total: Bytes,
}

/// A speed test, measured and predicted.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SpeedPoint {
    /// Test name (`pp512`, `tg128 @ d2048`).
    pub test: String,
    /// Cache depth at the start.
    pub depth: usize,
    /// Bytes one step reads on average (decode only).
    pub bytes_per_token: Option<f64>,
    /// Measured mean tokens/s.
    pub measured: f64,
    /// Measured standard deviation.
    pub sd: f64,
    /// Sizing model before calibration (default constants, measured bandwidth).
    pub predicted_before: f64,
    /// Sizing model with the calibrated profile.
    pub predicted_after: f64,
    /// Decode only: achieved bytes/s (`bytes_per_token × measured`) ÷ the measured bandwidth —
    /// how close decode runs to the memory-bandwidth limit.
    pub bandwidth_fraction: Option<f64>,
}

/// Predicted decode speed at one depth (a point on the plot's lines).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DecodeCurvePoint {
    /// Cache depth at the start of a `tg` test.
    pub depth: usize,
    /// Before calibration.
    pub predicted_before: f64,
    /// After calibration.
    pub predicted_after: f64,
}

/// What calibration found and saved.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CalibrationReport {
    /// The decode points fitted.
    pub points: Vec<DecodePoint>,
    /// The decode fit.
    pub decode: DecodeFit,
    /// Prefill efficiency solved from pp, when prefill was compute-bound.
    pub prefill_efficiency: Option<f64>,
    /// The profile (what `boyd size --hw this` uses from now on).
    pub profile: Profile,
    /// Where it was saved (filled in by the CLI).
    pub saved_to: Option<String>,
}

/// The whole `boyd validate` record.
#[derive(Debug, Clone, Serialize)]
pub struct ValidateReport {
    /// [`REPORT_SCHEMA`].
    pub schema: u32,
    /// The model.
    pub model: ModelInfo,
    /// Device spec (`cpu`, `cuda:0`).
    pub device: String,
    /// The build.
    pub build: BuildInfo,
    /// The host.
    pub host: HostInfo,
    /// Measured bandwidth (GPU: the read kernel's).
    pub bandwidth: BandwidthResult,
    /// GPU: every bandwidth kernel's measurement (read, write, copy).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub bandwidth_kernels: Vec<BandwidthResult>,
    /// Memory, predicted and measured.
    pub memory: MemoryReport,
    /// Predicted memory terms over context lengths.
    pub memory_curve: Vec<MemoryCurvePoint>,
    /// Raw speed records.
    pub speed: Vec<BenchRecord>,
    /// Prefill test.
    pub prefill: SpeedPoint,
    /// Decode tests by depth.
    pub decode: Vec<SpeedPoint>,
    /// Predicted decode speed over depths (before and after calibration).
    pub decode_curve: Vec<DecodeCurvePoint>,
    /// Calibration.
    pub calibration: CalibrationReport,
    /// The comparison table.
    pub rows: Vec<Row>,
    /// Seconds the whole validation took.
    pub wall_s: f64,
    /// 1/5/15-minute load average at the end (Linux).
    pub load_average: Option<[f64; 3]>,
}

/// `/proc/loadavg`'s three averages.
pub fn load_average() -> Option<[f64; 3]> {
    let text = std::fs::read_to_string("/proc/loadavg").ok()?;
    let mut it = text.split_whitespace().map(|s| s.parse::<f64>().ok());
    Some([it.next()??, it.next()??, it.next()??])
}
