//! `boyd validate`'s engine: predict, load, measure, compare, calibrate — one model, one
//! device, one [`ValidateReport`].
//!
//! Order matters for the measurements:
//! 1. Load the weights between two memory readings (the tokenizer is not loaded: the tests use
//!    random token ids, so only the decoder's memory is in the delta).
//! 2. From an empty cache, prefill one micro-batch with the allocator's high-water mark reset:
//!    the peak above what was live before, less the KV the prefill allocated, is the compute
//!    (transient) peak. Then, from an empty cache again (so scratch the first pass left
//!    behind is not counted as KV), prefill to each depth and read the growth there.
//! 3. Speed: the llama-bench tests of [`super::bench`] (pp, and tg at each depth).
//! 4. Bandwidth last, so its large buffers never count in the process's peak RSS.
//! 5. Predict with the sizing model (default constants, measured bandwidth, the compute layout
//!    of the engine the decoder really runs), fit the decode efficiency and fixed cost to the
//!    measured points, predict again with the fitted profile. The profile also carries the
//!    measured overhead (CPU: RSS before the load; GPU: one context, when measured).
//!
//! Nothing here prints; progress goes through a callback.

use std::path::PathBuf;
use std::time::Instant;

use candle_core::Device;
use rand::{Rng, SeedableRng};

use super::bench::{self, BenchConfig, BenchTest, BoydTarget, BuildInfo, HostInfo, ModelInfo};
use super::calibrate::{self, CalibrationError, DecodePoint};
use super::compare::{Row, Unit};
use super::memory::{delta, reset_peaks, MemSnapshot};
use super::report::*;
use crate::hw::{BandwidthConfig, DeviceProbe, Probe, ProbeError};
use crate::runtime::decoder::{Decoder, DecoderError};
use crate::runtime::gguf::{GgufError, GgufFile};
use crate::runtime::options::RuntimeOptions;
use crate::runtime::session::{Session, PREFILL_CHUNK};
use crate::sizing::profile::PROFILE_VERSION;
use crate::sizing::Backend;
use crate::sizing::{
    self, compute_buffers, kv_cache, throughput, weights, ArchParams, ComputeLayout, Hardware,
    Input, KvDtype, Profile, SizingError, WeightBytes, Weights,
};
use crate::units::{Bytes, BytesPerSec};

/// Acceptance bounds (|error %|) from the validation issue.
pub mod targets {
    /// Weights.
    pub const WEIGHTS_PCT: f64 = 2.0;
    /// KV cache at every depth.
    pub const KV_PCT: f64 = 2.0;
    /// Decode tokens/s at every depth, after calibration.
    pub const DECODE_PCT: f64 = 15.0;
}

/// What to validate.
#[derive(Debug, Clone)]
pub struct ValidateConfig {
    /// The GGUF file.
    pub model_path: PathBuf,
    /// Name to report (catalog name or file stem).
    pub model_name: String,
    /// Device spec (`cpu`, `cuda:0`, `metal`).
    pub device_spec: String,
    /// Depths for `tg` and the KV readings.
    pub depths: Vec<usize>,
    /// Tokens generated per `tg` test.
    pub n_gen: usize,
    /// Tokens of the `pp` test (and the compute-peak prefill).
    pub n_prompt: usize,
    /// Timed repetitions per test.
    pub reps: usize,
    /// The device as the sizing model knows it, uncalibrated (default speed constants); its
    /// bandwidth is replaced by the measured one, its compute layout by the loaded engine's.
    pub hardware: Hardware,
    /// Bandwidth probe settings.
    pub bandwidth: BandwidthConfig,
    /// Seed for the random tokens.
    pub seed: u64,
    /// When the run is (RFC 3339), for the profile.
    pub measured_at: String,
    /// Engine, kernel set and prefill chunk of the runtime under test.
    pub runtime: RuntimeOptions,
}

/// Progress of a validation.
#[derive(Debug, Clone, PartialEq)]
pub enum Progress {
    /// A stage starts, with its number of steps.
    Stage {
        /// Name.
        name: &'static str,
        /// Steps in it.
        steps: u64,
    },
    /// One step of the current stage is done or starting.
    Step(String),
}

/// Why validation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ValidateError {
    /// The GGUF file is unusable.
    #[error("reading {path}: {source}")]
    Gguf {
        /// The file.
        path: String,
        /// Why.
        #[source]
        source: GgufError,
    },
    /// The decoder failed to load or run.
    #[error("running the model: {0}")]
    Decoder(#[from] DecoderError),
    /// A benchmark forward pass failed.
    #[error("speed test failed: {0}")]
    Bench(#[from] candle_core::Error),
    /// The sizing model rejected the input.
    #[error("sizing: {0}")]
    Sizing(#[from] SizingError),
    /// The device could not be probed.
    #[error("probing the device: {0}")]
    Probe(#[from] ProbeError),
    /// The measurements cannot be fitted.
    #[error("calibration: {0}")]
    Calibration(#[from] CalibrationError),
    /// The settings make no sense.
    #[error("{0}")]
    Config(String),
}

/// How memory is read on this device.
enum Meter<'a> {
    Heap,
    Rss,
    Device(&'a Probe),
}

impl Meter<'_> {
    fn source(&self) -> MemorySource {
        match self {
            Meter::Heap => MemorySource::Heap,
            Meter::Rss => MemorySource::Rss,
            Meter::Device(_) => MemorySource::Device,
        }
    }

    /// Bytes in use now by the chosen source.
    fn used(&self, s: &MemSnapshot) -> Option<u64> {
        match self {
            Meter::Heap => s.heap.map(|b| b.0),
            Meter::Rss => s.rss.map(|b| b.0),
            Meter::Device(p) => p.memory().ok().map(|m| m.total.0.saturating_sub(m.free.0)),
        }
    }

    /// Peak since the last reset, where the source has one.
    fn peak(&self, s: &MemSnapshot) -> Option<u64> {
        match self {
            Meter::Heap => s.heap_peak.map(|b| b.0),
            Meter::Rss => s.rss_peak.map(|b| b.0),
            Meter::Device(_) => None,
        }
    }
}

/// The driver's reading now, when memory is read from the device.
fn device_reading(meter: &Meter<'_>, stage: impl Into<String>) -> Option<DeviceReading> {
    let Meter::Device(p) = meter else { return None };
    let m = p.memory().ok()?;
    Some(DeviceReading {
        stage: stage.into(),
        total: m.total,
        free: m.free,
        used: Bytes(m.total.0.saturating_sub(m.free.0)),
    })
}

fn sub(a: Option<u64>, b: Option<u64>) -> Option<Bytes> {
    Some(Bytes(a?.saturating_sub(b?)))
}

/// Average KV positions a `tg` test of `n` tokens from `depth` reads per step.
fn mid_depth(depth: usize, n: usize) -> usize {
    depth + n / 2
}

fn kv_bytes(arch: &ArchParams, kv: KvDtype, depth: usize) -> Result<u64, SizingError> {
    if depth == 0 {
        return Ok(0);
    }
    Ok(kv_cache(arch, kv, depth as u32)?.total.0)
}

fn input(arch: &ArchParams, w: &WeightBytes, kv: KvDtype, ctx: usize) -> Input {
    Input {
        arch: arch.clone(),
        weights: Weights::Exact {
            bytes: w.clone(),
            label: String::new(),
        },
        ctx: ctx.max(1) as u32,
        kv_dtype: kv,
        ubatch: PREFILL_CHUNK as u32,
    }
}

/// Decode tok/s the sizing model predicts for `tg n @ depth` on `hw`.
fn predict_decode(
    arch: &ArchParams,
    w: &WeightBytes,
    hw: &Hardware,
    kv: KvDtype,
    depth: usize,
    n: usize,
) -> Result<f64, SizingError> {
    let ctx = mid_depth(depth, n).max(1) as u32;
    let s = throughput::speed(arch, w, kv, ctx, PREFILL_CHUNK as u32, hw)?;
    Ok(s.decode_at_ctx.0)
}

/// Prefill tok/s the sizing model predicts for `pp n` on `hw`.
fn predict_prefill(
    arch: &ArchParams,
    w: &WeightBytes,
    hw: &Hardware,
    kv: KvDtype,
    n: usize,
) -> Result<f64, SizingError> {
    let s = throughput::speed(arch, w, kv, n.max(1) as u32, PREFILL_CHUNK as u32, hw)?;
    Ok(s.prefill.0)
}

/// Run the whole validation.
pub fn validate(
    cfg: &ValidateConfig,
    device: &Device,
    progress: &mut dyn FnMut(Progress),
) -> Result<ValidateReport, ValidateError> {
    let started = Instant::now();
    let mut depths = cfg.depths.clone();
    depths.sort_unstable();
    depths.dedup();
    if depths.is_empty() || cfg.reps == 0 || cfg.n_gen == 0 || cfg.n_prompt == 0 {
        return Err(ValidateError::Config(
            "need at least one depth, one repetition, and positive token counts".into(),
        ));
    }
    let probe = Probe::for_device(&cfg.device_spec)?;
    let meter = if !device.is_cpu() {
        Meter::Device(&probe)
    } else if super::alloc::installed() {
        Meter::Heap
    } else {
        Meter::Rss
    };
    let mut hw0 = cfg.hardware.clone();

    // 1. Load.
    progress(Progress::Stage {
        name: "load",
        steps: 1,
    });
    let gguf_err = |source| ValidateError::Gguf {
        path: cfg.model_path.display().to_string(),
        source,
    };
    let rss_mark_reset = reset_peaks();
    let baseline = MemSnapshot::now();
    let mut file = GgufFile::open(&cfg.model_path).map_err(gguf_err)?;
    let arch = file.header.arch_params().map_err(gguf_err)?;
    let wbytes = weights::from_tensors(
        file.header
            .tensors
            .iter()
            .map(|t| (t.name.as_str(), t.ggml_type, t.dims.as_slice())),
    )?;
    let max_depth = depths.last().copied().unwrap_or(0);
    let positions = (max_depth + cfg.n_gen).max(cfg.n_prompt);
    if positions > arch.context_length as usize {
        return Err(ValidateError::Config(format!(
            "depth {max_depth} + {} generated tokens exceeds the model's context of {}",
            cfg.n_gen, arch.context_length
        )));
    }
    let model = ModelInfo {
        name: cfg.model_name.clone(),
        arch: arch.architecture.to_string(),
        file_bytes: file.file_len,
        tensor_bytes: file.header.tensor_bytes(),
    };
    // GPU: what one context costs, measured before anything else is on the device.
    let context_overhead = match meter {
        Meter::Device(p) => p.context_overhead(),
        _ => None,
    };
    let mut readings = Vec::new();
    progress(Progress::Step("loading weights".into()));
    let before_load = MemSnapshot::now();
    let used_before_load = meter.used(&before_load);
    readings.extend(device_reading(&meter, "before load"));
    let decoder = Decoder::load_with_options(&mut file, device, positions, &cfg.runtime)?;
    device.synchronize()?;
    // Predict the activations of the engine that really runs (the options may pick candle on
    // the CPU), with the worker threads it really has.
    let engine = decoder.engine_name();
    let kv_dtype = decoder.kv_dtype();
    hw0.compute_layout = ComputeLayout::from_engine_name(&engine).unwrap_or(hw0.compute_layout);
    if hw0.compute_layout == ComputeLayout::Native {
        hw0.threads = Some(u32::try_from(rayon::current_num_threads()).unwrap_or(u32::MAX));
    }
    let hw0 = &hw0;
    let after_load = MemSnapshot::now();
    let used_after_load = meter.used(&after_load);
    readings.extend(device_reading(&meter, "after load"));
    drop(file);
    let embedding_copy = weights::embedding_copy(&arch, &wbytes, hw0.backend.embedding_policy())?;
    let cache_len = u32::try_from(positions).unwrap_or(u32::MAX);
    let rope = weights::rope_tables(&arch, cache_len)?.0;
    let weights_mem = WeightsMemory {
        file_tensors: wbytes.total,
        embedding_copy,
        rope_tables: Bytes(rope),
        predicted: Bytes(wbytes.total.0 + embedding_copy.0 + rope),
        measured: sub(used_after_load, used_before_load),
        heap_delta: delta(before_load.heap, after_load.heap),
        rss_delta: delta(before_load.rss, after_load.rss),
    };
    let mut session =
        Session::new(decoder, positions).with_prefill_chunk(cfg.runtime.prefill_chunk);

    // 2. Compute peak and KV at each depth.
    let mut rng = rand::rngs::StdRng::seed_from_u64(cfg.seed ^ 0x6b76);
    let vocab = arch.vocab.max(1);
    let mut tokens =
        |n: usize| -> Vec<u32> { (0..n).map(|_| rng.random_range(0..vocab)).collect() };
    let kv_steps = depths.iter().filter(|&&d| d > 0).count() as u64;
    progress(Progress::Stage {
        name: "memory",
        steps: 1 + kv_steps,
    });
    progress(Progress::Step(format!("compute peak (pp{})", cfg.n_prompt)));
    session.reset();
    let empty = MemSnapshot::now();
    let used_empty = meter.used(&empty);
    reset_peaks();
    for chunk in tokens(cfg.n_prompt).chunks(PREFILL_CHUNK) {
        session.extend(chunk)?;
    }
    device.synchronize()?;
    let after_pp = MemSnapshot::now();
    let compute_measured = match (meter.peak(&after_pp), used_empty) {
        (Some(peak), Some(base)) => Some(Bytes(
            peak.saturating_sub(base)
                .saturating_sub(session.cache().allocated_bytes()),
        )),
        _ => None,
    };
    // The session's cache holds `positions`: the native engine's rings (and so its batch
    // split) follow that, while the scores grow only to the prompt.
    let batch = match hw0.compute_layout {
        ComputeLayout::Native => {
            sizing::compute::native_ubatch(&arch, cache_len, PREFILL_CHUNK as u32)
        }
        ComputeLayout::Candle => PREFILL_CHUNK as u32,
    };
    let compute_pred =
        compute_buffers(&arch, cfg.n_prompt as u32, batch, hw0, wbytes.has_k_quant())?;
    let compute = ComputeMemory {
        tokens: cfg.n_prompt,
        engine,
        layout: compute_pred.layout,
        predicted: compute_pred.total,
        measured: compute_measured,
    };
    // The first forward pass leaves per-thread matmul scratch allocated (about 3 MiB here);
    // that is compute memory, so the KV readings start from an empty cache *after* it.
    session.reset();
    let warm_empty = MemSnapshot::now();
    let used_empty = meter.used(&warm_empty);
    readings.extend(device_reading(&meter, "empty cache"));
    let mut kv = Vec::new();
    for &d in &depths {
        if d == 0 {
            kv.push(KvPoint {
                depth: 0,
                predicted: Bytes(0),
                cache_used: Bytes(0),
                cache_allocated: Bytes(0),
                measured: Some(Bytes(0)),
                rss_delta: Some(0),
            });
            continue;
        }
        progress(Progress::Step(format!("KV cache at depth {d}")));
        if session.cache().len() > d {
            session.reset();
        }
        let have = session.cache().len();
        for chunk in tokens(d - have).chunks(PREFILL_CHUNK) {
            session.extend(chunk)?;
        }
        device.synchronize()?;
        let s = MemSnapshot::now();
        readings.extend(device_reading(&meter, format!("kv @ d{d}")));
        kv.push(KvPoint {
            depth: d,
            predicted: Bytes(kv_bytes(&arch, kv_dtype, d)?),
            cache_used: Bytes(session.cache().used_bytes()),
            cache_allocated: Bytes(session.cache().allocated_bytes()),
            measured: sub(meter.used(&s), used_empty),
            rss_delta: delta(warm_empty.rss, s.rss),
        });
    }
    session.reset();

    // 3. Speed.
    let mut tests = vec![BenchTest::Pp { n: cfg.n_prompt }];
    tests.extend(depths.iter().map(|&depth| BenchTest::Tg {
        n: cfg.n_gen,
        depth,
    }));
    let reps_total = tests.len() as u64 * (cfg.reps as u64 + 1);
    progress(Progress::Stage {
        name: "speed",
        steps: reps_total,
    });
    let host = HostInfo::current(device);
    let bench_cfg = BenchConfig {
        tests,
        reps: cfg.reps,
        warmup: true,
        vocab,
        seed: cfg.seed,
        runtime: cfg.runtime.clone(),
    };
    let speed = {
        let mut target = BoydTarget::new(&mut session);
        bench::run(&mut target, &bench_cfg, &model, &host, &mut |name, rep| {
            progress(Progress::Step(format!("{name} rep {rep}")));
        })?
    };
    let end = MemSnapshot::now();
    readings.extend(device_reading(&meter, "end"));
    drop(session);

    // 4. Bandwidth.
    progress(Progress::Stage {
        name: "bandwidth",
        steps: 1,
    });
    progress(Progress::Step(format!(
        "{} streaming read",
        Bytes(cfg.bandwidth.bytes)
    )));
    let mut bandwidth_kernels = probe.bandwidth_suite(&cfg.bandwidth)?;
    if bandwidth_kernels.is_empty() {
        return Err(ValidateError::Config(
            "the bandwidth probe returned nothing".into(),
        ));
    }
    let bandwidth = bandwidth_kernels[0].clone();
    if bandwidth_kernels.len() == 1 {
        bandwidth_kernels.clear();
    }

    // 5. Predict, calibrate, compare.
    let mut hw_before = hw0.clone();
    hw_before.bandwidth = bandwidth.best;
    let total_ctx = positions;
    let est = sizing::estimate(&input(&arch, &wbytes, kv_dtype, total_ctx), &hw_before)?;
    let overhead_predicted = est.memory.overhead;
    let ctx_bytes = context_overhead
        .as_ref()
        .and_then(|r| r.as_ref().ok())
        .map(|b| b.0);
    let overhead_measured = match meter {
        Meter::Heap | Meter::Rss => baseline.rss,
        // The context is this process's fixed cost on a GPU; without its measurement, all
        // the device memory in use before the load (other processes included).
        Meter::Device(_) => ctx_bytes.map(Bytes).or(sub(used_before_load, Some(0))),
    };
    // GPU: the largest reading less what other processes held (in use before the load, less
    // our own context). Metal counts only this process's allocations, so nothing to subtract.
    let others = match (probe.backend(), used_before_load, ctx_bytes) {
        (Backend::Metal, _, _) => Some(0),
        (_, Some(u), Some(c)) => Some(u.saturating_sub(c)),
        _ => None,
    };
    let device_peak = readings.iter().map(|r| r.used.0).max();
    let total_measured = match meter {
        Meter::Heap | Meter::Rss if rss_mark_reset || baseline.rss_peak.is_some() => end.rss_peak,
        Meter::Device(_) => sub(device_peak, others),
        _ => None,
    };
    let kv_deepest = kv.last().and_then(|k| k.measured).map_or(0, |b| b.0);
    let unaccounted = total_measured.map(|t| {
        t.0 as i64
            - (overhead_measured.map_or(0, |b| b.0)
                + weights_mem.measured.map_or(0, |b| b.0)
                + kv_deepest
                + compute.measured.map_or(0, |b| b.0)) as i64
    });
    let memory = MemoryReport {
        source: meter.source(),
        baseline,
        weights: weights_mem,
        kv,
        compute,
        overhead_predicted,
        overhead_measured,
        total_ctx,
        total_predicted: Bytes(est.memory.total.0 + rope),
        total_measured,
        unaccounted,
        device: matches!(meter, Meter::Device(_)).then(|| DeviceMemoryReport {
            readings,
            context_overhead: ctx_bytes.map(Bytes),
            context_overhead_error: context_overhead
                .and_then(|r| r.err())
                .map(|e| e.to_string()),
        }),
    };

    let wbpt = throughput::weight_bytes_per_token(&arch, &wbytes)? as f64;
    let kv_per_token = kv_bytes(&arch, kv_dtype, 1)? as f64;
    let mut points = Vec::new();
    let mut pp_record = None;
    for r in &speed {
        match r.spec {
            BenchTest::Tg { n, depth } => points.push(DecodePoint {
                depth,
                bytes_per_token: wbpt + kv_per_token * mid_depth(depth, n) as f64,
                secs_per_token: 1.0 / r.mean_tps,
            }),
            BenchTest::Pp { .. } => pp_record = Some(r),
        }
    }
    let fit = calibrate::fit_decode(&points, bandwidth.best.0)?;
    let n_layers = f64::from(arch.n_layers.max(1));
    let pp_tps = pp_record.map_or(0.0, |r| r.mean_tps);
    let pp_speed = throughput::speed(
        &arch,
        &wbytes,
        kv_dtype,
        cfg.n_prompt as u32,
        PREFILL_CHUNK as u32,
        &hw_before,
    )?;
    let ub = cfg.n_prompt.min(PREFILL_CHUNK) as f64;
    let prefill_eff = calibrate::fit_prefill_efficiency(
        pp_tps,
        pp_speed.prefill_flops_per_token,
        hw_before.matrix_flops,
        wbpt / (fit.efficiency * bandwidth.best.0 * ub),
        fit.fixed_s / ub,
    );
    let profile = Profile {
        version: PROFILE_VERSION,
        device: cfg.device_spec.clone(),
        backend: hw0.backend,
        description: host.cpu.clone(),
        measured_at: cfg.measured_at.clone(),
        boyd_version: env!("CARGO_PKG_VERSION").into(),
        memory_total: Some(hw0.memory),
        bandwidth: BytesPerSec(bandwidth.best.0),
        matrix_flops: Some(hw_before.matrix_flops),
        decode_efficiency: fit.efficiency.clamp(1e-3, 1.5),
        prefill_efficiency: prefill_eff
            .unwrap_or(hw_before.speed.prefill_efficiency)
            .clamp(1e-3, 1.5),
        // The fixed cost is per forward pass; on every backend it is dominated by per-layer
        // op dispatch, so it is stored per layer and scales to other models.
        fixed_cost_s: 0.0,
        per_layer_cost_s: fit.fixed_s / n_layers,
        model: Some(cfg.model_name.clone()),
        // Only what is this process's own: on a GPU without the context measurement the
        // reading before the load includes other processes.
        overhead: match meter {
            Meter::Heap | Meter::Rss => overhead_measured,
            Meter::Device(_) => ctx_bytes.map(Bytes),
        },
    };
    profile.check()?;
    let hw_after = profile.apply(hw_before.clone());

    let mut decode = Vec::new();
    for r in &speed {
        if let BenchTest::Tg { n, depth } = r.spec {
            let bpt = wbpt + kv_per_token * mid_depth(depth, n) as f64;
            decode.push(SpeedPoint {
                test: r.test.clone(),
                depth,
                bytes_per_token: Some(bpt),
                bandwidth_fraction: Some(bpt * r.mean_tps / bandwidth.best.0),
                measured: r.mean_tps,
                sd: r.sd_tps,
                predicted_before: predict_decode(&arch, &wbytes, &hw_before, kv_dtype, depth, n)?,
                predicted_after: predict_decode(&arch, &wbytes, &hw_after, kv_dtype, depth, n)?,
            });
        }
    }
    let prefill = SpeedPoint {
        test: format!("pp{}", cfg.n_prompt),
        depth: 0,
        bytes_per_token: None,
        bandwidth_fraction: None,
        measured: pp_tps,
        sd: pp_record.map_or(0.0, |r| r.sd_tps),
        predicted_before: predict_prefill(&arch, &wbytes, &hw_before, kv_dtype, cfg.n_prompt)?,
        predicted_after: predict_prefill(&arch, &wbytes, &hw_after, kv_dtype, cfg.n_prompt)?,
    };

    let mut memory_curve = Vec::new();
    let top = positions.max(1024);
    for i in 0..=16usize {
        let ctx = (top * i / 16).max(1);
        let e = sizing::estimate(&input(&arch, &wbytes, kv_dtype, ctx), &hw_before)?;
        let w = e.memory.weights.0 + e.memory.embedding_copy.0 + e.memory.rope_tables.0;
        memory_curve.push(MemoryCurvePoint {
            ctx,
            weights: Bytes(w),
            kv: e.memory.kv_cache,
            compute: e.memory.compute,
            overhead: e.memory.overhead,
            total: e.memory.total,
        });
    }

    let mut decode_curve = Vec::new();
    for i in 0..=16usize {
        let depth = max_depth * i / 16;
        decode_curve.push(DecodeCurvePoint {
            depth,
            predicted_before: predict_decode(
                &arch, &wbytes, &hw_before, kv_dtype, depth, cfg.n_gen,
            )?,
            predicted_after: predict_decode(&arch, &wbytes, &hw_after, kv_dtype, depth, cfg.n_gen)?,
        });
    }

    let rows = comparison_rows(&memory, &prefill, &decode);
    Ok(ValidateReport {
        schema: REPORT_SCHEMA,
        model,
        device: cfg.device_spec.clone(),
        build: BuildInfo::current(&cfg.runtime),
        host,
        bandwidth,
        bandwidth_kernels,
        memory,
        memory_curve,
        speed,
        prefill,
        decode,
        decode_curve,
        calibration: CalibrationReport {
            points,
            decode: fit,
            prefill_efficiency: prefill_eff,
            profile,
            saved_to: None,
        },
        rows,
        wall_s: started.elapsed().as_secs_f64(),
        load_average: load_average(),
    })
}

/// The comparison table from the measured and predicted terms.
pub fn comparison_rows(m: &MemoryReport, prefill: &SpeedPoint, decode: &[SpeedPoint]) -> Vec<Row> {
    let b = |x: Bytes| x.0 as f64;
    let mut rows = Vec::new();
    if let Some(w) = m.weights.measured {
        rows.push(
            Row::new("weights", Unit::Bytes, b(m.weights.predicted), b(w))
                .target(targets::WEIGHTS_PCT)
                .note("file tensors + RoPE tables"),
        );
    }
    for k in m.kv.iter().filter(|k| k.depth > 0) {
        if let Some(meas) = k.measured {
            rows.push(
                Row::new(
                    format!("kv @ d{}", k.depth),
                    Unit::Bytes,
                    b(k.predicted),
                    b(meas),
                )
                .target(targets::KV_PCT)
                .note(format!("cache reports {} used", k.cache_used)),
            );
        }
    }
    if let Some(c) = m.compute.measured {
        rows.push(
            Row::new(
                format!("compute peak (pp{})", m.compute.tokens),
                Unit::Bytes,
                b(m.compute.predicted),
                b(c),
            )
            .note(format!(
                "transient peak above weights + KV; {} layout ({})",
                m.compute.layout, m.compute.engine
            )),
        );
    }
    let on_device = m.source == MemorySource::Device;
    if let Some(o) = m.overhead_measured {
        let note = match m.device.as_ref().and_then(|d| d.context_overhead) {
            Some(_) => {
                "one GPU context, measured (free memory with and without a 2nd context); \
                 the profile stores it"
            }
            None if on_device => "device memory in use before loading the model",
            None => "process RSS before loading the model; the profile stores it",
        };
        rows.push(Row::new("overhead", Unit::Bytes, b(m.overhead_predicted), b(o)).note(note));
    }
    if let Some(t) = m.total_measured {
        rows.push(
            Row::new(
                format!("total @ ctx {}", m.total_ctx),
                Unit::Bytes,
                b(m.total_predicted),
                b(t),
            )
            .note(if on_device {
                "largest device reading − other processes' memory"
            } else {
                "peak RSS of the run"
            }),
        );
    }
    if let Some(u) = m.unaccounted {
        let mut r = Row::new("unaccounted", Unit::Bytes, 0.0, u as f64).note(if on_device {
            "device total − measured terms (driver pools, transients)"
        } else {
            "peak RSS − measured terms (allocator slack, transients)"
        });
        r.error_pct = None;
        rows.push(r);
    }
    rows.push(
        Row::new(
            format!("prefill {}", prefill.test),
            Unit::TokPerSec,
            prefill.predicted_after,
            prefill.measured,
        )
        .sd(prefill.sd)
        .note(format!(
            "before calibration: {:.1}",
            prefill.predicted_before
        )),
    );
    for d in decode {
        rows.push(
            Row::new(
                format!("decode {}", d.test),
                Unit::TokPerSec,
                d.predicted_after,
                d.measured,
            )
            .sd(d.sd)
            .target(targets::DECODE_PCT)
            .note(match d.bandwidth_fraction {
                Some(f) => format!(
                    "before calibration: {:.1}; {:.0} % of measured bandwidth",
                    d.predicted_before,
                    f * 100.0
                ),
                None => format!("before calibration: {:.1}", d.predicted_before),
            }),
        );
    }
    rows
}
