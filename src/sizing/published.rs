//! The public record: published llama.cpp measurements on hardware nobody here owns, the fit of
//! the speed model's terms to them, and the check that states the model's error.
//!
//! The rows live in `models/published/*.jsonl` (embedded at build time). Each names its public
//! source, date, model file, quantization and runtime build. Per backend, the speed terms of
//! [`crate::sizing::throughput`] are fitted to the rows on the relative error of the time per
//! token ([`crate::sizing::linfit`]):
//!
//! ```text
//! decode  s/token = max(c0·bytes/BW + c3·bytes·1e-12,          memory side
//!                       c2·quantized_weights/matrix)            unpacking side
//!                   + c4 + c5·layers
//!                   + c6·attention_flops(depth)/matrix + c7·attention_flops(depth)·1e-15
//!                   (bytes = weights + KV at the depth; c1·bytes/matrix is not fitted)
//! prefill s/token = p0·matmul_flops/matrix + p1·attention_flops/matrix
//!                   + p2·matmul_flops·1e-15 + p3·attention_flops·1e-15
//! ```
//!
//! Prefill is a sum of terms, each linear in its coefficient: a weighted least-squares solve
//! over each subset of terms, keeping the best subset whose coefficients are all non-negative.
//! Decode is a roofline: a step waits on memory or on unpacking quantized blocks, whichever is
//! slower (the published M1 Max reads its Llama-3 Q4_K_M files at 45 % of its bandwidth, the
//! M3 Max at 80 %: its GPU is compute-bound on them, in proportion to its FLOP/s), fitted by
//! alternating which side binds per row. A `tg N` row of llama-bench generates
//! N tokens from an empty cache, so its mean KV depth is (N − 1)/2; a `pp N` row processes an
//! N-token prompt whose mean attention span is (N + 1)/2.
//!
//! Nothing here does I/O: the dataset is a compile-time string, and the hardware specifications
//! come from the embedded presets.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

use super::arch::{ArchParams, Architecture};
use super::error::SizingError;
use super::hardware::{Backend, PresetSpecs, SpeedParams};
use super::kv::{kv_cache, KvDtype};
pub use super::linfit::Features;
use super::linfit::{fit_nonneg, fit_roofline};
use super::throughput::{
    attention_flops, decode_terms, matmul_flops, prefill_terms, DECODE_ROOFLINE,
};
use super::weights::from_params;
use crate::units::Bytes;

/// The embedded speed rows, one file per source.
const SPEED_FILES: &[(&str, &str)] = &[
    (
        "xiongjiedai-llama3.jsonl",
        include_str!("../../models/published/xiongjiedai-llama3.jsonl"),
    ),
    (
        "llama-cpp-prs.jsonl",
        include_str!("../../models/published/llama-cpp-prs.jsonl"),
    ),
];

/// The embedded memory rows (llama.cpp load reports, Metal working-set limits).
const MEMORY_FILE: (&str, &str) = (
    "memory.jsonl",
    include_str!("../../models/published/memory.jsonl"),
);

/// Which speed test a row reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Test {
    /// Token generation (decode), one token per forward pass.
    Tg,
    /// Prompt processing (prefill).
    Pp,
}

/// One published speed measurement.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SpeedRow {
    /// Preset name of the device (`rtx-4090`, `m2-ultra`).
    pub device: String,
    /// `nvidia-consumer`, `nvidia-datacenter` or `apple`.
    pub device_class: String,
    /// `cuda` or `metal`.
    pub backend: Backend,
    /// Model id (`llama-3-8b`, `llama-3-70b`, `llama-2-7b`).
    pub model: String,
    /// Parameters, billions, as the runtime printed them.
    pub params_b: f64,
    /// File size in GiB as the runtime printed it, when given.
    #[serde(default)]
    pub size_gib: Option<f64>,
    /// File mix (`Q4_K_M`, `F16`, …).
    pub quant: String,
    /// `tg` or `pp`.
    pub test: Test,
    /// Tokens generated (tg) or in the prompt (pp).
    pub n_tokens: u32,
    /// KV positions already in the cache when the test starts.
    pub depth: u32,
    /// Published tokens per second.
    pub tok_s: f64,
    /// Runtime and build.
    pub runtime: String,
    /// Public address of the measurement.
    pub source: String,
    /// Date of the source.
    pub date: String,
    /// Free-form detail (GPU name, file name, spread).
    #[serde(default)]
    pub notes: Option<String>,
    /// Why the row is kept out of the fit and the error summary, when it is.
    #[serde(default)]
    pub outlier: Option<String>,
}

/// One published memory reading: llama.cpp's per-buffer load report and, on Metal, the
/// device's `recommendedMaxWorkingSetSize`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MemoryRow {
    /// Preset name of the device.
    pub device: String,
    /// Device class.
    pub device_class: String,
    /// `cuda` or `metal`.
    pub backend: Backend,
    /// Model id.
    pub model: String,
    /// File mix.
    pub quant: String,
    /// Parameters, billions.
    pub params_b: f64,
    /// File size, GiB, as printed.
    pub size_gib: f64,
    /// Context the runtime allocated.
    pub n_ctx: u32,
    /// Prefill micro-batch.
    pub n_ubatch: u32,
    /// KV cache type.
    pub kv_type: String,
    /// Weights in device memory, MiB.
    #[serde(default)]
    pub gpu_weights_mib: Option<f64>,
    /// Weights left in host memory (the token embedding), MiB.
    #[serde(default)]
    pub host_weights_mib: Option<f64>,
    /// KV cache, MiB.
    #[serde(default)]
    pub kv_mib: Option<f64>,
    /// Device compute buffer, MiB.
    #[serde(default)]
    pub compute_mib: Option<f64>,
    /// Metal's working-set limit, decimal MB as printed.
    #[serde(default)]
    pub recommended_max_working_set_mb: Option<f64>,
    /// Unified memory of the machine, GiB (Metal rows).
    #[serde(default)]
    pub device_memory_gib: Option<f64>,
    /// Runtime and build.
    pub runtime: String,
    /// Public address.
    pub source: String,
    /// Date.
    pub date: String,
    /// Free-form detail.
    #[serde(default)]
    pub notes: Option<String>,
}

/// Why the embedded dataset could not be used.
#[derive(Debug, thiserror::Error)]
pub enum PublishedError {
    /// A line is not a valid row.
    #[error("models/published/{file} line {line}: {reason}; fix the row (see the schema in src/sizing/published.rs)")]
    BadRow {
        /// File name.
        file: String,
        /// 1-based line.
        line: usize,
        /// What is wrong.
        reason: String,
    },
    /// A row names a device without a preset or a model without a shape.
    #[error("models/published/{file} line {line}: unknown {what} {name:?}; add it to models/hardware.toml or the model table in src/sizing/published.rs")]
    Unknown {
        /// File name.
        file: String,
        /// 1-based line.
        line: usize,
        /// `device` or `model`.
        what: &'static str,
        /// The name.
        name: String,
    },
    /// Too few rows to fit a backend.
    #[error("no usable {test:?} rows for {backend}; the fit needs at least one device")]
    Empty {
        /// Backend.
        backend: Backend,
        /// Test.
        test: Test,
    },
    /// Sizing arithmetic failed.
    #[error(transparent)]
    Sizing(#[from] SizingError),
}

/// The shapes of the models the dataset uses (published configurations).
pub fn model_arch(id: &str) -> Option<ArchParams> {
    let llama3 = |n_layers, n_heads, hidden, ffn| ArchParams {
        architecture: Architecture::Llama,
        n_layers,
        n_heads,
        n_kv_heads: 8,
        head_dim: 128,
        head_dim_v: 128,
        hidden,
        ffn,
        vocab: 128_256,
        rope_base: 500_000.0,
        rope_scaling: None,
        norm_eps: 1e-5,
        context_length: 8192,
        sliding_window: None,
        tied_embeddings: false,
    };
    match id {
        // meta-llama/Meta-Llama-3-8B and -70B config.json.
        "llama-3-8b" => Some(llama3(32, 32, 4096, 14_336)),
        "llama-3-70b" => Some(llama3(80, 64, 8192, 28_672)),
        // Llama 2 7B (the "LLaMA 7B" of llama.cpp's benchmark tables): 32 layers, MHA.
        "llama-2-7b" => Some(ArchParams {
            n_kv_heads: 32,
            ffn: 11_008,
            vocab: 32_000,
            rope_base: 10_000.0,
            context_length: 4096,
            ..llama3(32, 32, 4096, 11_008)
        }),
        _ => None,
    }
}

/// The parsed dataset.
#[derive(Debug, Clone)]
pub struct Dataset {
    /// Speed rows, in file order.
    pub speed: Vec<SpeedRow>,
    /// Memory rows.
    pub memory: Vec<MemoryRow>,
}

fn parse_lines<T: for<'de> Deserialize<'de>>(
    file: &str,
    text: &str,
) -> Result<Vec<(usize, T)>, PublishedError> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            serde_json::from_str::<T>(l)
                .map(|r| (i + 1, r))
                .map_err(|e| PublishedError::BadRow {
                    file: file.to_owned(),
                    line: i + 1,
                    reason: e.to_string(),
                })
        })
        .collect()
}

impl Dataset {
    /// Parse dataset files given as `(name, text)` pairs, checking that every device has a
    /// preset and every model a shape, and that the numbers are positive.
    pub fn parse(
        speed_files: &[(&str, &str)],
        memory_file: (&str, &str),
    ) -> Result<Self, PublishedError> {
        let specs = PresetSpecs::shipped()?;
        let mut speed = Vec::new();
        for (file, text) in speed_files {
            for (line, r) in parse_lines::<SpeedRow>(file, text)? {
                let bad = |reason: &str| PublishedError::BadRow {
                    file: (*file).to_owned(),
                    line,
                    reason: reason.to_owned(),
                };
                if specs.get(&r.device).is_none() {
                    return Err(PublishedError::Unknown {
                        file: (*file).to_owned(),
                        line,
                        what: "device",
                        name: r.device,
                    });
                }
                if model_arch(&r.model).is_none() {
                    return Err(PublishedError::Unknown {
                        file: (*file).to_owned(),
                        line,
                        what: "model",
                        name: r.model,
                    });
                }
                if !(r.tok_s.is_finite() && r.tok_s > 0.0) || r.n_tokens == 0 {
                    return Err(bad("tok_s and n_tokens must be positive"));
                }
                if !(r.params_b.is_finite() && r.params_b > 0.0)
                    || r.size_gib.is_some_and(|s| !(s.is_finite() && s > 0.0))
                {
                    return Err(bad("params_b and size_gib must be positive"));
                }
                if r.size_gib.is_none() && super::Quant::parse(&r.quant).is_err() {
                    return Err(bad("without size_gib the quant must be a known file mix"));
                }
                speed.push(r);
            }
        }
        let memory = parse_lines::<MemoryRow>(memory_file.0, memory_file.1)?
            .into_iter()
            .map(|(line, r)| {
                if specs.get(&r.device).is_none() || model_arch(&r.model).is_none() {
                    return Err(PublishedError::Unknown {
                        file: memory_file.0.to_owned(),
                        line,
                        what: "device or model",
                        name: format!("{} / {}", r.device, r.model),
                    });
                }
                Ok(r)
            })
            .collect::<Result<_, _>>()?;
        Ok(Self { speed, memory })
    }

    /// The dataset shipped in `models/published/`.
    pub fn shipped() -> Result<Self, PublishedError> {
        Self::parse(SPEED_FILES, MEMORY_FILE)
    }

    /// Row counts per device class and test, and distinct devices, models and quants.
    pub fn summary(&self) -> Summary {
        let mut per_class: BTreeMap<String, BTreeMap<String, usize>> = BTreeMap::new();
        for r in &self.speed {
            let test = match r.test {
                Test::Tg => "tg",
                Test::Pp => "pp",
            };
            *per_class
                .entry(r.device_class.clone())
                .or_default()
                .entry(test.to_owned())
                .or_default() += 1;
        }
        let distinct = |f: &dyn Fn(&SpeedRow) -> String| {
            let mut v: Vec<String> = self.speed.iter().map(f).collect();
            v.sort();
            v.dedup();
            v
        };
        Summary {
            speed_rows: self.speed.len(),
            outliers: self.speed.iter().filter(|r| r.outlier.is_some()).count(),
            memory_rows: self.memory.len(),
            per_class,
            devices: distinct(&|r| r.device.clone()),
            models: distinct(&|r| r.model.clone()),
            quants: distinct(&|r| r.quant.clone()),
            sources: distinct(&|r| r.source.clone()).len(),
        }
    }
}

/// What the dataset holds.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Summary {
    /// Speed rows.
    pub speed_rows: usize,
    /// Speed rows kept out of the fit.
    pub outliers: usize,
    /// Memory rows.
    pub memory_rows: usize,
    /// Rows per device class and test.
    pub per_class: BTreeMap<String, BTreeMap<String, usize>>,
    /// Distinct devices.
    pub devices: Vec<String>,
    /// Distinct models.
    pub models: Vec<String>,
    /// Distinct quantizations.
    pub quants: Vec<String>,
    /// Distinct source addresses.
    pub sources: usize,
}

/// Number of decode terms.
pub const DECODE_TERMS: usize = 8;
/// Number of prefill terms.
pub const PREFILL_TERMS: usize = 4;

/// The decode terms the fit may use: all but bytes over matrix throughput. That term divides
/// the bytes read by the tensor-core rate, which llama.cpp's one-token kernels do not use
/// (they run on the vector units), and on CUDA it let the RTX 3090's low FP32-accumulate
/// tensor figure stand for the slowness of small quantized models, over-predicting the L40S's
/// 70B decode by 44 % when that device was held out.
pub const DECODE_FITTED_TERMS: [usize; 7] = [0, 2, 3, 4, 5, 6, 7];

/// The model's terms for one speed row on its preset device.
pub fn row_features(r: &SpeedRow, specs: &PresetSpecs) -> Result<Features, PublishedError> {
    let unknown = |what: &'static str, name: &str| PublishedError::Unknown {
        file: "?".into(),
        line: 0,
        what,
        name: name.to_owned(),
    };
    let spec = specs
        .get(&r.device)
        .ok_or_else(|| unknown("device", &r.device))?;
    let arch = model_arch(&r.model).ok_or_else(|| unknown("model", &r.model))?;
    let params = (r.params_b * 1e9).round() as u64;
    let bpw = match r.size_gib {
        Some(g) => g * Bytes::GIB as f64 * 8.0 / params as f64,
        None => super::Quant::parse(&r.quant)?.bits_per_weight,
    };
    let w = from_params(&arch, params, bpw)?;
    let wbytes = super::throughput::weight_bytes_per_token(&arch, &w)? as f64;
    let x = match r.test {
        Test::Tg => {
            // Mean KV depth over the generated tokens.
            let depth = f64::from(r.depth) + (f64::from(r.n_tokens) - 1.0) / 2.0;
            let kv_per_pos = kv_cache(&arch, KvDtype::F16, 1)?.per_token.0 as f64;
            decode_terms(
                &arch,
                wbytes + depth * kv_per_pos,
                super::throughput::quantized_weights(&arch, &w),
                depth,
                spec.bandwidth,
                spec.matrix_flops,
            )
            .to_vec()
        }
        Test::Pp => {
            let span = f64::from(r.depth) + (f64::from(r.n_tokens) + 1.0) / 2.0;
            prefill_terms(
                matmul_flops(&arch, &w),
                attention_flops(&arch, span),
                spec.matrix_flops,
            )
            .to_vec()
        }
    };
    Ok(Features {
        x,
        t: 1.0 / r.tok_s,
    })
}

/// The fitted terms of one backend.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BackendFit {
    /// Backend.
    pub backend: Backend,
    /// Decode coefficients, in the order of [`decode_terms`].
    pub decode: Vec<f64>,
    /// Prefill coefficients, in the order of [`prefill_terms`].
    pub prefill: Vec<f64>,
    /// Decode rows the fit rests on.
    pub decode_rows: usize,
    /// Prefill rows the fit rests on.
    pub prefill_rows: usize,
    /// Devices the rows come from.
    pub devices: Vec<String>,
}

impl BackendFit {
    /// The fit as speed-model constants.
    pub fn speed_params(&self) -> SpeedParams {
        let d = &self.decode;
        let p = &self.prefill;
        SpeedParams {
            decode_efficiency: 1.0 / d[0],
            prefill_efficiency: 1.0 / p[0],
            decode_alu_cost: d[1],
            decode_dequant_cost: d[2],
            decode_s_per_tb: d[3],
            fixed_cost_s: d[4],
            per_layer_cost_s: d[5],
            attention_cost: d[6],
            attention_s_per_pflop: d[7],
            prefill_attention_cost: p[1],
            prefill_s_per_pflop: p[2],
            prefill_attention_s_per_pflop: p[3],
            source: format!(
                "fit to {} decode and {} prefill llama.cpp rows published for {} ({}); \
                 `boyd size --check-published` shows each row and the error; boyd's own GPU \
                 path (candle) is slower until `boyd validate` calibrates it",
                self.decode_rows,
                self.prefill_rows,
                self.backend,
                self.devices.join(", ")
            ),
        }
    }
}

fn usable(rows: &[SpeedRow], backend: Backend, test: Test) -> impl Iterator<Item = &SpeedRow> {
    rows.iter()
        .filter(move |r| r.backend == backend && r.test == test && r.outlier.is_none())
}

/// Fit `backend`'s terms to `rows` (outliers and other backends skipped).
pub fn fit_backend(
    rows: &[SpeedRow],
    backend: Backend,
    specs: &PresetSpecs,
) -> Result<BackendFit, PublishedError> {
    let feats = |test| -> Result<Vec<Features>, PublishedError> {
        usable(rows, backend, test)
            .map(|r| row_features(r, specs))
            .collect()
    };
    let dec = feats(Test::Tg)?;
    let pre = feats(Test::Pp)?;
    let decode = fit_roofline(
        &dec,
        DECODE_TERMS,
        DECODE_ROOFLINE,
        &[0],
        &DECODE_FITTED_TERMS,
    )
    .ok_or(PublishedError::Empty {
        backend,
        test: Test::Tg,
    })?;
    let prefill =
        fit_nonneg(&pre, PREFILL_TERMS, &[0], &[0, 1, 2, 3]).ok_or(PublishedError::Empty {
            backend,
            test: Test::Pp,
        })?;
    let mut devices: Vec<String> = rows
        .iter()
        .filter(|r| r.backend == backend && r.outlier.is_none())
        .map(|r| r.device.clone())
        .collect();
    devices.sort();
    devices.dedup();
    Ok(BackendFit {
        backend,
        decode,
        prefill,
        decode_rows: dec.len(),
        prefill_rows: pre.len(),
        devices,
    })
}

/// The shipped fit per GPU backend, computed once from the embedded dataset.
pub fn shipped_fit(backend: Backend) -> Option<&'static BackendFit> {
    static FITS: OnceLock<Vec<BackendFit>> = OnceLock::new();
    FITS.get_or_init(|| {
        let Ok(ds) = Dataset::shipped() else {
            return Vec::new();
        };
        let Ok(specs) = PresetSpecs::shipped() else {
            return Vec::new();
        };
        [Backend::Cuda, Backend::Metal]
            .into_iter()
            .filter_map(|b| fit_backend(&ds.speed, b, &specs).ok())
            .collect()
    })
    .iter()
    .find(|f| f.backend == backend)
}

/// One row predicted against its published value.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RowCheck {
    /// The row.
    pub row: SpeedRow,
    /// Predicted by the fit on every device of the backend.
    pub fitted: f64,
    /// Predicted by a fit that never saw this device (leave-one-device-out).
    pub held_out: f64,
    /// `held_out / published - 1`.
    pub held_out_error: f64,
}

/// Median and worst absolute relative error.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ErrorSummary {
    /// Rows.
    pub rows: usize,
    /// Median |error|.
    pub median_abs: f64,
    /// Worst |error|.
    pub worst_abs: f64,
    /// Mean signed error.
    pub mean: f64,
}

impl ErrorSummary {
    /// Summarize relative errors.
    pub fn of(errors: &[f64]) -> Option<Self> {
        if errors.is_empty() {
            return None;
        }
        let mut abs: Vec<f64> = errors.iter().map(|e| e.abs()).collect();
        abs.sort_by(f64::total_cmp);
        let n = abs.len();
        let median = if n % 2 == 1 {
            abs[n / 2]
        } else {
            (abs[n / 2 - 1] + abs[n / 2]) / 2.0
        };
        Some(Self {
            rows: n,
            median_abs: median,
            worst_abs: abs[n - 1],
            mean: errors.iter().sum::<f64>() / n as f64,
        })
    }
}

/// A published depth sweep (tg at a short and a long run on one device, model and file).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DepthCheck {
    /// Device.
    pub device: String,
    /// Model.
    pub model: String,
    /// Quantization.
    pub quant: String,
    /// Short and long run lengths.
    pub from_tokens: u32,
    /// Long run.
    pub to_tokens: u32,
    /// Published slowdown `1 - long/short`.
    pub published: f64,
    /// Slowdown the held-out fit predicts.
    pub predicted: f64,
}

/// One memory term compared.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MemoryCheck {
    /// Device.
    pub device: String,
    /// Model and quant.
    pub what: String,
    /// Term (`weights`, `kv`, `working-set fraction`, …).
    pub term: String,
    /// Published.
    pub published: f64,
    /// boyd's.
    pub predicted: f64,
    /// `predicted / published - 1`.
    pub error: f64,
    /// Unit of the two numbers.
    pub unit: String,
    /// The row's source.
    pub source: String,
}

/// The whole check.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Check {
    /// What the dataset holds.
    pub summary: Summary,
    /// The shipped fits.
    pub fits: Vec<BackendFit>,
    /// Every usable speed row.
    pub rows: Vec<RowCheck>,
    /// Held-out error per backend and test, e.g. `cuda tg`.
    pub errors: BTreeMap<String, ErrorSummary>,
    /// Held-out decode error per device class.
    pub decode_by_class: BTreeMap<String, ErrorSummary>,
    /// Depth sweeps.
    pub depth: Vec<DepthCheck>,
    /// Memory terms.
    pub memory: Vec<MemoryCheck>,
}

/// Tokens per second the model predicts for a row: the decode roofline, or the prefill sum.
fn predict(f: &Features, test: Test, coef: &[f64]) -> f64 {
    match test {
        Test::Tg => 1.0 / DECODE_ROOFLINE.time(&f.x, coef),
        Test::Pp => 1.0 / f.x.iter().zip(coef).map(|(x, c)| x * c).sum::<f64>(),
    }
}

/// Fit, predict every row held out by device, and compare memory terms.
pub fn check(ds: &Dataset) -> Result<Check, PublishedError> {
    let specs = PresetSpecs::shipped()?;
    let backends = [Backend::Cuda, Backend::Metal];
    let mut fits = Vec::new();
    let mut rows = Vec::new();
    for b in backends {
        let full = fit_backend(&ds.speed, b, &specs)?;
        let devices = full.devices.clone();
        let mut held: BTreeMap<String, BackendFit> = BTreeMap::new();
        for d in &devices {
            let others: Vec<SpeedRow> = ds
                .speed
                .iter()
                .filter(|r| &r.device != d)
                .cloned()
                .collect();
            held.insert(d.clone(), fit_backend(&others, b, &specs)?);
        }
        for test in [Test::Tg, Test::Pp] {
            // Outliers are predicted and shown too, but neither fitted nor scored.
            let all = ds.speed.iter().filter(|r| r.backend == b && r.test == test);
            for r in all {
                let f = row_features(r, &specs)?;
                let coef = |fit: &BackendFit| match test {
                    Test::Tg => fit.decode.clone(),
                    Test::Pp => fit.prefill.clone(),
                };
                let fitted = predict(&f, test, &coef(&full));
                let held_out = held
                    .get(&r.device)
                    .map_or(fitted, |h| predict(&f, test, &coef(h)));
                rows.push(RowCheck {
                    row: r.clone(),
                    fitted,
                    held_out,
                    held_out_error: held_out / r.tok_s - 1.0,
                });
            }
        }
        fits.push(full);
    }
    let mut errors = BTreeMap::new();
    for b in backends {
        for (test, name) in [(Test::Tg, "tg"), (Test::Pp, "pp")] {
            let e: Vec<f64> = rows
                .iter()
                .filter(|c| c.row.backend == b && c.row.test == test && c.row.outlier.is_none())
                .map(|c| c.held_out_error)
                .collect();
            if let Some(s) = ErrorSummary::of(&e) {
                errors.insert(format!("{b} {name}"), s);
            }
        }
    }
    let all_tg: Vec<f64> = rows
        .iter()
        .filter(|c| c.row.test == Test::Tg && c.row.outlier.is_none())
        .map(|c| c.held_out_error)
        .collect();
    if let Some(s) = ErrorSummary::of(&all_tg) {
        errors.insert("all tg".into(), s);
    }
    let mut decode_by_class = BTreeMap::new();
    let mut classes: Vec<String> = rows.iter().map(|c| c.row.device_class.clone()).collect();
    classes.sort();
    classes.dedup();
    for class in classes {
        let e: Vec<f64> = rows
            .iter()
            .filter(|c| {
                c.row.test == Test::Tg && c.row.device_class == class && c.row.outlier.is_none()
            })
            .map(|c| c.held_out_error)
            .collect();
        if let Some(s) = ErrorSummary::of(&e) {
            decode_by_class.insert(class, s);
        }
    }
    Ok(Check {
        summary: ds.summary(),
        depth: depth_checks(&rows),
        memory: memory_checks(ds)?,
        fits,
        rows,
        errors,
        decode_by_class,
    })
}

/// Published tg sweeps: for each device/model/quant with runs of 512 and 8192 tokens (or the
/// shortest and longest present), the slowdown published against the held-out prediction.
fn depth_checks(rows: &[RowCheck]) -> Vec<DepthCheck> {
    let mut groups: BTreeMap<(String, String, String), Vec<&RowCheck>> = BTreeMap::new();
    for c in rows
        .iter()
        .filter(|c| c.row.test == Test::Tg && c.row.depth == 0 && c.row.outlier.is_none())
    {
        groups
            .entry((
                c.row.device.clone(),
                c.row.model.clone(),
                c.row.quant.clone(),
            ))
            .or_default()
            .push(c);
    }
    groups
        .into_iter()
        .filter_map(|((device, model, quant), v)| {
            let short = v.iter().min_by_key(|c| c.row.n_tokens)?;
            let long = v.iter().max_by_key(|c| c.row.n_tokens)?;
            (long.row.n_tokens >= 4 * short.row.n_tokens).then(|| DepthCheck {
                device,
                model,
                quant,
                from_tokens: short.row.n_tokens,
                to_tokens: long.row.n_tokens,
                published: 1.0 - long.row.tok_s / short.row.tok_s,
                predicted: 1.0 - long.held_out / short.held_out,
            })
        })
        .collect()
}

/// boyd's weights, KV and Metal working-set fraction against the published load reports.
fn memory_checks(ds: &Dataset) -> Result<Vec<MemoryCheck>, PublishedError> {
    let presets = super::Hardware::presets()?;
    let mut out = Vec::new();
    for m in &ds.memory {
        let arch = model_arch(&m.model).ok_or_else(|| PublishedError::Unknown {
            file: MEMORY_FILE.0.into(),
            line: 0,
            what: "model",
            name: m.model.clone(),
        })?;
        let what = format!("{} {} ctx {}", m.model, m.quant, m.n_ctx);
        let mut push = |term: &str, published: f64, predicted: f64, unit: &str| {
            out.push(MemoryCheck {
                device: m.device.clone(),
                what: what.clone(),
                term: term.to_owned(),
                published,
                predicted,
                error: predicted / published - 1.0,
                unit: unit.to_owned(),
                source: m.source.clone(),
            });
        };
        let mib = Bytes::MIB as f64;
        let params = (m.params_b * 1e9).round() as u64;
        if let (Some(g), Some(h)) = (m.gpu_weights_mib, m.host_weights_mib) {
            // boyd sizes a file mix from its catalog bits per weight (not the file size).
            let q = super::Quant::parse(&m.quant)?;
            let w = from_params(&arch, params, q.bits_per_weight)?;
            push("weights", g + h, w.total.0 as f64 / mib, "MiB");
        }
        if let Some(kv) = m.kv_mib {
            let dtype = KvDtype::parse(&m.kv_type)?;
            let k = kv_cache(&arch, dtype, m.n_ctx)?;
            push("kv", kv, k.total.0 as f64 / mib, "MiB");
        }
        if let (Some(ws), Some(mem)) = (m.recommended_max_working_set_mb, m.device_memory_gib) {
            let frac = presets
                .iter()
                .find(|h| h.name == m.device)
                .map(|h| h.usable_fraction);
            if let Some(f) = frac {
                push(
                    "working-set fraction",
                    ws * 1e6 / (mem * Bytes::GIB as f64),
                    f,
                    "of memory",
                );
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_summary_takes_median_and_worst_of_absolute_errors() {
        let s = ErrorSummary::of(&[0.1, -0.3, 0.05, -0.02]).expect("s");
        assert_eq!(s.rows, 4);
        assert!((s.median_abs - 0.075).abs() < 1e-12);
        assert!((s.worst_abs - 0.3).abs() < 1e-12);
        assert!((s.mean - (-0.0425)).abs() < 1e-12);
        assert_eq!(ErrorSummary::of(&[]), None);
    }

    #[test]
    fn a_tg_row_is_predicted_at_its_mean_depth() {
        let specs = PresetSpecs::shipped().expect("specs");
        let mut r = Dataset::shipped().expect("ds").speed[0].clone();
        r.test = Test::Tg;
        r.n_tokens = 1;
        r.depth = 0;
        let f0 = row_features(&r, &specs).expect("f");
        r.n_tokens = 4097;
        let f1 = row_features(&r, &specs).expect("f");
        // Mean depth 2048: the bytes terms grow by 2048 KV positions of 128 KiB (Llama-3-8B,
        // f16), the layer and fixed terms do not.
        let spec = specs.get(&r.device).expect("spec");
        let grew = (f1.x[0] - f0.x[0]) * spec.bandwidth;
        assert!((grew - 2048.0 * 131_072.0).abs() < 1.0, "{grew}");
        assert_eq!(
            f0.x[2], f1.x[2],
            "the quantized weights do not depend on depth"
        );
        assert_eq!(f0.x[4], f1.x[4]);
        assert_eq!(f0.x[5], f1.x[5]);
        assert!(f1.x[6] > 0.0 && f0.x[6] == 0.0);
    }

    #[test]
    fn bad_rows_are_refused_with_the_file_and_line() {
        let good = include_str!("../../models/published/xiongjiedai-llama3.jsonl")
            .lines()
            .next()
            .expect("line");
        let err =
            Dataset::parse(&[("x.jsonl", "{\"device\": 1}")], ("m.jsonl", "")).expect_err("bad");
        assert!(err.to_string().contains("x.jsonl line 1"), "{err}");
        let unknown = good.replace("rtx-3090", "rtx-9999");
        let err = Dataset::parse(&[("y.jsonl", &unknown)], ("m.jsonl", "")).expect_err("bad");
        assert!(err.to_string().contains("rtx-9999"), "{err}");
        let zero = good.replace("\"tok_s\": ", "\"tok_s\": -");
        assert!(Dataset::parse(&[("z.jsonl", &zero)], ("m.jsonl", "")).is_err());
    }
}
