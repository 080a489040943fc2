//! `--check-published`: every row predicted by a fit that never saw its device, the depth
//! sweeps, and boyd's memory terms against the load reports.

use std::collections::BTreeMap;

use serde::Serialize;

use super::dataset::{
    model_arch, parse_link, Dataset, OffloadRow, PublishedError, SpeedRow, Summary, Test,
    MEMORY_FILE, OFFLOAD_FILE,
};
use super::fit::{fit_backend, row_features, BackendFit};
use crate::sizing::hardware::{Backend, PresetSpecs};
use crate::sizing::kv::{kv_cache, KvDtype};
use crate::sizing::linfit::Features;
use crate::sizing::throughput::DECODE_ROOFLINE;
use crate::sizing::weights::from_params;
use crate::units::Bytes;

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
    /// Partial-offload runs.
    pub offload: Vec<OffloadCheck>,
    /// Error of the partial-offload decode predictions.
    pub offload_error: Option<ErrorSummary>,
}

/// One published `-ngl` run predicted by [`crate::sizing::offload::split`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OffloadCheck {
    /// The row.
    pub row: OffloadRow,
    /// Repeating layers of the model.
    pub layers: u32,
    /// Layers the split puts on the GPU.
    pub gpu_layers: u32,
    /// Whether the output layer is on the GPU.
    pub output_on_gpu: bool,
    /// Predicted decode tokens per second (empty cache).
    pub predicted: f64,
    /// `predicted / published - 1`.
    pub error: f64,
    /// boyd's GPU memory for the split at [`OFFLOAD_CTX`], decimal MB (its compute buffers are
    /// the candle engine's, larger than llama.cpp's).
    pub gpu_mb: f64,
}

/// Context the offload rows are sized at: the sources do not state it, and it moves only the
/// memory columns (decode is compared at an empty cache).
pub const OFFLOAD_CTX: u32 = 4096;

/// Matrix throughput per host thread for the offload rows' CPU: the same assumption as an
/// uncalibrated host (`hw::host::ASSUMED_FLOPS_PER_CORE`, 128 int8 operations per cycle at
/// 2.5 GHz). The CPU's hand-set decode terms do not read it.
pub const HOST_FLOPS_PER_THREAD: f64 = 128.0 * 2.5e9;

/// Predict one published `-ngl` run: the GPU preset with its fitted CUDA terms, the host as a
/// CPU of the row's bandwidth with the CPU's hand-set terms, over the row's PCIe link.
pub fn offload_check(r: &OffloadRow) -> Result<OffloadCheck, PublishedError> {
    use crate::sizing::offload::{split, Host, Link};
    use crate::sizing::Hardware;
    use crate::units::BytesPerSec;
    let unknown = |what: &'static str, name: &str| PublishedError::Unknown {
        file: OFFLOAD_FILE.0.into(),
        line: 0,
        what,
        name: name.to_owned(),
    };
    let arch = model_arch(&r.model).ok_or_else(|| unknown("model", &r.model))?;
    let gpu = Hardware::preset(&r.device)?;
    let (gen, lanes) = parse_link(&r.link).ok_or_else(|| unknown("link", &r.link))?;
    let host_hw = Hardware::new(
        "host",
        &r.host,
        Backend::Cpu,
        Bytes(1 << 50),
        1.0,
        BytesPerSec(r.host_bw_gbs * 1e9),
        f64::from(r.host_threads) * HOST_FLOPS_PER_THREAD,
        "published host",
    )?;
    let host = Host {
        hw: host_hw,
        free: None,
    };
    let q = crate::sizing::Quant::parse(&r.quant)?;
    let params = (r.params_b * 1e9).round() as u64;
    let w = from_params(&arch, params, q.bits_per_weight)?;
    let o = split(
        &arch,
        &w,
        KvDtype::F16,
        OFFLOAD_CTX,
        512,
        &gpu,
        &host,
        &Link::pcie(gen, lanes),
        r.ngl,
    )?;
    Ok(OffloadCheck {
        layers: o.layers,
        gpu_layers: o.gpu_layers,
        output_on_gpu: o.output_on_gpu,
        predicted: o.decode_empty.0,
        error: o.decode_empty.0 / r.tok_s - 1.0,
        gpu_mb: o.gpu.total.0 as f64 / 1e6,
        row: r.clone(),
    })
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
    let offload = ds
        .offload
        .iter()
        .map(offload_check)
        .collect::<Result<Vec<_>, _>>()?;
    let offload_error = ErrorSummary::of(&offload.iter().map(|o| o.error).collect::<Vec<_>>());
    Ok(Check {
        summary: ds.summary(),
        depth: depth_checks(&rows),
        memory: memory_checks(ds)?,
        offload,
        offload_error,
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
    let presets = crate::sizing::Hardware::presets()?;
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
            let q = crate::sizing::Quant::parse(&m.quant)?;
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

    /// `-ngl 0` runs everything on the host: the prediction is the CPU's hand-set decode terms
    /// on the whole model at the row's bandwidth, worked out here by hand.
    #[test]
    fn an_ngl_0_offload_row_is_the_host_roofline_at_its_bandwidth() {
        let ds = Dataset::shipped().expect("ds");
        let mut r = ds.offload[0].clone();
        r.ngl = 0;
        r.host_bw_gbs = 50.0;
        let o = offload_check(&r).expect("check");
        assert_eq!((o.gpu_layers, o.output_on_gpu), (0, false));
        let arch = model_arch(&r.model).expect("arch");
        let q = crate::sizing::Quant::parse(&r.quant).expect("q");
        let w =
            from_params(&arch, (r.params_b * 1e9).round() as u64, q.bits_per_weight).expect("w");
        let bytes = crate::sizing::throughput::weight_bytes_per_token(&arch, &w).expect("b");
        let cpu = Backend::Cpu.default_speed();
        let t = bytes as f64 / (cpu.decode_efficiency * 50e9)
            + cpu.fixed_cost_s
            + cpu.per_layer_cost_s * f64::from(arch.n_layers);
        assert!(
            (o.predicted * t - 1.0).abs() < 1e-9,
            "{} vs {}",
            o.predicted,
            1.0 / t
        );
        assert!((o.error - (o.predicted / r.tok_s - 1.0)).abs() < 1e-12);
        assert_eq!(o.gpu_mb, 0.0, "no GPU context without layers on it");
        // Above the layer count every layer and the output run on the GPU, and faster.
        r.ngl = 99;
        let all = offload_check(&r).expect("all");
        assert_eq!((all.gpu_layers, all.output_on_gpu), (48, true));
        assert!(all.predicted > 5.0 * o.predicted);
    }
}
