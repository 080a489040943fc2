//! Measurement and validation: the comparison arithmetic, the calibration fit on synthetic
//! points with a known answer, the report's JSON schema (snapshot), the SVG, and the GPU probe
//! stand-ins' typed errors.

use boyd::hw::{self, DeviceProbe, Probe, ProbeError};
use boyd::measure::bench::{BenchTest, BuildInfo, HostInfo, ModelInfo};
use boyd::measure::calibrate::{
    fit_decode, fit_prefill_efficiency, CalibrationError, DecodeFit, DecodePoint,
};
use boyd::measure::compare::{error_pct, Row, Unit};
use boyd::measure::memory::MemSnapshot;
use boyd::measure::report::*;
use boyd::measure::validate::comparison_rows;
use boyd::sizing::{ArchParams, Backend, ComputeLayout, Profile};
use boyd::units::{Bytes, BytesPerSec};

#[test]
fn error_is_signed_relative_to_the_measurement() {
    assert_eq!(error_pct(110.0, 100.0), Some(10.0));
    assert_eq!(error_pct(90.0, 100.0), Some(-10.0));
    assert_eq!(error_pct(0.0, 0.0), Some(0.0));
    assert_eq!(error_pct(1.0, 0.0), None);
    assert_eq!(error_pct(f64::NAN, 1.0), None);
    let r = Row::new("kv @ d512", Unit::Bytes, 102.0, 100.0).target(2.0);
    assert_eq!(r.pass, Some(true));
    let r = Row::new("kv @ d512", Unit::Bytes, 102.5, 100.0).target(2.0);
    assert_eq!(r.pass, Some(false));
    let r = Row::new("decode", Unit::TokPerSec, 1.0, 0.0).target(15.0);
    assert_eq!(r.pass, Some(false), "no relative error cannot pass");
}

fn synthetic(fixed: f64, eff: f64, bw: f64, bytes: &[f64]) -> Vec<DecodePoint> {
    bytes
        .iter()
        .enumerate()
        .map(|(i, &b)| DecodePoint {
            depth: i * 512,
            bytes_per_token: b,
            secs_per_token: fixed + b / (eff * bw),
        })
        .collect()
}

#[test]
fn calibration_recovers_known_efficiency_and_fixed_cost() {
    let bw = 20e9;
    let pts = synthetic(2e-3, 0.6, bw, &[100e6, 124e6, 195e6, 400e6]);
    let fit = fit_decode(&pts, bw).expect("fit");
    assert!((fit.efficiency - 0.6).abs() < 1e-9, "{fit:?}");
    assert!((fit.fixed_s - 2e-3).abs() < 1e-12, "{fit:?}");
    assert!(fit.rms_rel_residual < 1e-9);
    assert!(!fit.intercept_clamped);
}

#[test]
fn calibration_with_noise_stays_close_and_clamps_negative_intercepts() {
    let bw = 10e9;
    let mut pts = synthetic(1e-3, 0.5, bw, &[50e6, 80e6, 120e6]);
    // ±1 % noise.
    pts[0].secs_per_token *= 1.01;
    pts[2].secs_per_token *= 0.99;
    let fit = fit_decode(&pts, bw).expect("fit");
    assert!((fit.efficiency - 0.5).abs() / 0.5 < 0.05, "{fit:?}");
    assert!(fit.rms_rel_residual < 0.02);
    // Time that grows faster than bytes would need a negative fixed cost: clamped to zero.
    let steep = vec![
        DecodePoint {
            depth: 0,
            bytes_per_token: 100.0,
            secs_per_token: 1.0,
        },
        DecodePoint {
            depth: 1,
            bytes_per_token: 200.0,
            secs_per_token: 3.0,
        },
    ];
    let fit = fit_decode(&steep, 1000.0).expect("fit");
    assert!(fit.intercept_clamped && fit.fixed_s == 0.0 && !fit.efficiency_clamped);
    // One point: the fit goes through the origin.
    let one = synthetic(0.0, 0.25, bw, &[1e8]);
    let fit: DecodeFit = fit_decode(&one, bw).expect("fit");
    assert!((fit.efficiency - 0.25).abs() < 1e-12);
}

/// A line steeper than the bandwidth allows (a step reading faster than the probe measured)
/// is clamped to efficiency 1, and the fixed cost refitted under that slope.
#[test]
fn calibration_clamps_efficiency_above_one() {
    let bw = 30e9;
    let pts = synthetic(8e-3, 2.0, bw, &[100e6, 120e6, 190e6]);
    let fit = fit_decode(&pts, bw).expect("fit");
    assert!(fit.efficiency_clamped && !fit.intercept_clamped, "{fit:?}");
    assert_eq!(fit.efficiency, 1.0);
    // Weighted mean of t − bytes/bw, between the extremes of the three residuals.
    let r: Vec<f64> = pts
        .iter()
        .map(|p| p.secs_per_token - p.bytes_per_token / bw)
        .collect();
    let (lo, hi) = (r[2], r[0]);
    assert!(
        lo < fit.fixed_s && fit.fixed_s < hi,
        "{lo} {} {hi}",
        fit.fixed_s
    );
    assert!(fit.rms_rel_residual > 0.0);
}

#[test]
fn calibration_rejects_what_cannot_be_fitted() {
    assert_eq!(fit_decode(&[], 1e9), Err(CalibrationError::NoPoints));
    let pts = synthetic(0.0, 0.5, 1e9, &[1e6]);
    assert!(matches!(
        fit_decode(&pts, 0.0),
        Err(CalibrationError::BadBandwidth(_))
    ));
    let bad = [DecodePoint {
        depth: 7,
        bytes_per_token: 1.0,
        secs_per_token: -1.0,
    }];
    assert_eq!(
        fit_decode(&bad, 1e9),
        Err(CalibrationError::BadPoint { depth: 7 })
    );
    let flat = [
        DecodePoint {
            depth: 0,
            bytes_per_token: 100.0,
            secs_per_token: 2.0,
        },
        DecodePoint {
            depth: 1,
            bytes_per_token: 200.0,
            secs_per_token: 1.0,
        },
    ];
    assert!(matches!(
        fit_decode(&flat, 1.0),
        Err(CalibrationError::NoSlope { .. })
    ));
}

#[test]
fn prefill_efficiency_is_solved_from_the_sizing_formula() {
    // 1e9 FLOP per token on a 1e12 FLOP/s device at 0.25 efficiency: 4 ms per token, plus
    // 1 ms of fixed cost per token -> 200 tok/s measured.
    let eff = fit_prefill_efficiency(200.0, 1e9, 1e12, 1e-4, 1e-3).expect("eff");
    assert!((eff - 0.25).abs() < 1e-12, "{eff}");
    assert_eq!(
        fit_prefill_efficiency(200.0, 1e9, 1e12, 1.0, 0.0),
        None,
        "memory-bound"
    );
    assert_eq!(fit_prefill_efficiency(0.0, 1e9, 1e12, 0.0, 0.0), None);
}

#[test]
fn rope_tables_are_context_times_head_dim_f32() {
    let arch = ArchParams {
        context_length: 8192,
        head_dim: 64,
        ..boyd_smollm_arch()
    };
    let rope = |ctx| {
        boyd::sizing::weights::rope_tables(&arch, ctx)
            .expect("sized")
            .0
    };
    assert_eq!(rope(8192), 8192 * 64 * 4);
    assert_eq!(rope(1024), 1024 * 64 * 4);
    // Capped at the model's context, as the decoder caps its tables.
    assert_eq!(rope(100_000), 8192 * 64 * 4);
}

fn boyd_smollm_arch() -> ArchParams {
    let e = boyd::catalog::Catalog::shipped()
        .expect("catalog")
        .get("smollm2-135m-instruct")
        .expect("entry")
        .clone();
    e.arch
}

/// A fixed report: every field set by hand, so the JSON schema is pinned by the snapshot.
fn sample_report() -> ValidateReport {
    let build = BuildInfo {
        version: "0.0.0-test",
        profile: "release",
        arch: "x86_64",
        simd: vec!["avx2", "fma"],
        features: vec![],
        kernels: "avx2",
        engine: "auto",
        kv_dtype: "f16",
    };
    let host = HostInfo {
        cpu: "Test CPU".into(),
        cpus: 2,
        threads: 2,
        device: "cpu".into(),
    };
    let model = ModelInfo {
        name: "smollm2-135m-instruct".into(),
        arch: "llama".into(),
        file_bytes: 98_362_432,
        tensor_bytes: 96_576_768,
    };
    let bandwidth = hw::BandwidthResult::from_times(
        hw::bandwidth::BandwidthMethod::CpuStreamingRead,
        512 << 20,
        2,
        &[0.05, 0.055],
    )
    .expect("bw");
    let memory = MemoryReport {
        source: MemorySource::Heap,
        baseline: MemSnapshot {
            heap: Some(Bytes(1 << 20)),
            heap_peak: Some(Bytes(2 << 20)),
            rss: Some(Bytes(12 << 20)),
            rss_peak: Some(Bytes(12 << 20)),
        },
        weights: WeightsMemory {
            file_tensors: Bytes(96_576_768),
            embedding_copy: Bytes(0),
            rope_tables: Bytes(2_097_152),
            predicted: Bytes(98_673_920),
            measured: Some(Bytes(98_732_087)),
            heap_delta: Some(98_732_087),
            rss_delta: Some(103_723_008),
        },
        kv: vec![
            KvPoint {
                depth: 0,
                predicted: Bytes(0),
                cache_used: Bytes(0),
                cache_allocated: Bytes(0),
                measured: Some(Bytes(0)),
                rss_delta: Some(0),
            },
            KvPoint {
                depth: 512,
                predicted: Bytes(23_592_960),
                cache_used: Bytes(23_592_960),
                cache_allocated: Bytes(23_592_960),
                measured: Some(Bytes(23_600_000)),
                rss_delta: Some(23_998_464),
            },
        ],
        compute: ComputeMemory {
            tokens: 512,
            engine: "native/avx2".into(),
            layout: ComputeLayout::Native,
            predicted: Bytes(23_597_056),
            measured: Some(Bytes(23_613_824)),
        },
        overhead_predicted: Bytes(16 << 20),
        overhead_measured: Some(Bytes(12 << 20)),
        total_ctx: 640,
        total_predicted: Bytes(300 << 20),
        total_measured: Some(Bytes(200 << 20)),
        unaccounted: Some(10 << 20),
        device: None,
    };
    let prefill = SpeedPoint {
        test: "pp512".into(),
        depth: 0,
        bytes_per_token: None,
        bandwidth_fraction: None,
        measured: 400.0,
        sd: 5.0,
        predicted_before: 600.0,
        predicted_after: 400.0,
    };
    let decode = vec![
        SpeedPoint {
            test: "tg128".into(),
            depth: 0,
            bytes_per_token: Some(99_500_000.0),
            bandwidth_fraction: Some(0.56),
            measured: 60.0,
            sd: 1.5,
            predicted_before: 80.0,
            predicted_after: 61.0,
        },
        SpeedPoint {
            test: "tg128 @ d512".into(),
            depth: 512,
            bytes_per_token: Some(123_000_000.0),
            bandwidth_fraction: Some(0.58),
            measured: 50.0,
            sd: 1.0,
            predicted_before: 70.0,
            predicted_after: 49.0,
        },
    ];
    let rows = comparison_rows(&memory, &prefill, &decode);
    let profile = Profile {
        version: boyd::sizing::profile::PROFILE_VERSION,
        device: "cpu".into(),
        backend: Backend::Cpu,
        description: "Test CPU".into(),
        measured_at: "2025-01-01T00:00:00Z".into(),
        boyd_version: "0.0.0-test".into(),
        memory_total: Some(Bytes(16 << 30)),
        bandwidth: BytesPerSec(10e9),
        matrix_flops: Some(160e9),
        decode_efficiency: 0.6,
        prefill_efficiency: 0.3,
        fixed_cost_s: 0.0,
        per_layer_cost_s: 1e-5,
        model: Some("smollm2-135m-instruct".into()),
        overhead: Some(Bytes(12 << 20)),
    };
    ValidateReport {
        schema: REPORT_SCHEMA,
        model,
        device: "cpu".into(),
        build,
        host,
        bandwidth,
        bandwidth_kernels: vec![],
        memory,
        memory_curve: vec![
            MemoryCurvePoint {
                ctx: 1,
                weights: Bytes(98_673_920),
                kv: Bytes(46_080),
                compute: Bytes(1 << 20),
                overhead: Bytes(16 << 20),
                total: Bytes(200 << 20),
            },
            MemoryCurvePoint {
                ctx: 1024,
                weights: Bytes(98_673_920),
                kv: Bytes(47_185_920),
                compute: Bytes(40 << 20),
                overhead: Bytes(16 << 20),
                total: Bytes(290 << 20),
            },
        ],
        speed: vec![],
        prefill,
        decode,
        decode_curve: vec![
            DecodeCurvePoint {
                depth: 0,
                predicted_before: 80.0,
                predicted_after: 61.0,
            },
            DecodeCurvePoint {
                depth: 512,
                predicted_before: 70.0,
                predicted_after: 49.0,
            },
        ],
        calibration: CalibrationReport {
            points: vec![DecodePoint {
                depth: 0,
                bytes_per_token: 99_500_000.0,
                secs_per_token: 1.0 / 60.0,
            }],
            decode: DecodeFit {
                fixed_s: 3e-4,
                efficiency: 0.6,
                rms_rel_residual: 0.01,
                intercept_clamped: false,
                efficiency_clamped: false,
            },
            prefill_efficiency: Some(0.3),
            profile,
            saved_to: None,
        },
        rows,
        wall_s: 90.0,
        load_average: Some([1.0, 1.0, 1.0]),
    }
}

#[test]
fn report_json_schema_snapshot() {
    let r = sample_report();
    insta::assert_json_snapshot!(r);
}

#[test]
fn comparison_rows_carry_targets_for_weights_kv_and_decode() {
    let r = sample_report();
    let names: Vec<&str> = r.rows.iter().map(|r| r.component.as_str()).collect();
    assert_eq!(
        names,
        [
            "weights",
            "kv @ d512",
            "compute peak (pp512)",
            "overhead",
            "total @ ctx 640",
            "unaccounted",
            "prefill pp512",
            "decode tg128",
            "decode tg128 @ d512"
        ]
    );
    let w = &r.rows[0];
    assert_eq!(w.target_pct, Some(2.0));
    assert!(w.pass == Some(true), "{w:?}");
    assert_eq!(r.rows[5].error_pct, None, "unaccounted has no prediction");
    let d = &r.rows[7];
    assert_eq!(d.target_pct, Some(15.0));
    assert_eq!(d.sd, Some(1.5));
    assert!((d.error_pct.expect("err") - (61.0 - 60.0) / 60.0 * 100.0).abs() < 1e-9);
}

#[test]
fn svg_has_both_plots_and_every_measured_point() {
    let svg = boyd::measure::svg::render(&sample_report());
    assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
    assert!(svg.contains("Memory vs context") && svg.contains("Decode speed vs depth"));
    // 4 memory lines + 2 speed lines.
    assert_eq!(svg.matches("<polyline").count(), 6);
    // weights, 2 KV, compute, total, 2 decode points, + 1 legend dot.
    assert_eq!(svg.matches("<circle").count(), 8);
    assert!(!svg.contains("NaN"));
}

#[test]
fn gpu_probe_stand_ins_return_typed_not_compiled_errors() {
    #[cfg(not(feature = "cuda"))]
    {
        let e = Probe::for_device("cuda:1").expect_err("stand-in");
        assert!(
            matches!(
                e,
                ProbeError::NotCompiled {
                    backend: "cuda",
                    feature: "cuda"
                }
            ),
            "{e}"
        );
        assert!(e.to_string().contains("--features cuda"));
        assert!(hw::cuda::CudaProbe::new(0).is_err());
    }
    #[cfg(not(all(feature = "metal", target_os = "macos")))]
    {
        let e = Probe::for_device("metal").expect_err("stand-in");
        assert!(
            matches!(
                e,
                ProbeError::NotCompiled {
                    backend: "metal",
                    feature: "metal"
                }
            ),
            "{e}"
        );
    }
    let gpus = hw::probe_gpus(None);
    #[cfg(not(feature = "cuda"))]
    assert!(gpus.iter().any(|g| g.backend == Backend::Cuda
        && g.error
            .as_deref()
            .is_some_and(|e| e.contains("not compiled"))));
    assert!(matches!(
        Probe::for_device("tpu"),
        Err(ProbeError::BadConfig(_))
    ));
    let cpu = Probe::for_device("cpu").expect("cpu");
    assert_eq!(cpu.backend(), Backend::Cpu);
    assert!(cpu.memory().expect("meminfo").total.0 > 0);
}

#[test]
fn bench_test_names_match_the_report() {
    assert_eq!(BenchTest::Tg { n: 128, depth: 512 }.name(), "tg128 @ d512");
}
