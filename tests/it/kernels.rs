//! CPU kernels: each SIMD dot product against the scalar reference on random blocks, the
//! scalar dequantization against candle's, and the quantized product against an `f64`
//! product of the dequantized weights.

use boyd::kernels::cpu::{panel, quantize_row, Acts, Kernels, QMatrix, QType};
use candle_core::quantized::{ggml_file::qtensor_from_ggml, GgmlDType};
use candle_core::Device;
use half::f16;
use rand::{Rng, SeedableRng};

/// Every weight format the CPU kernels handle.
pub(crate) const ALL: [QType; 9] = [
    QType::F32,
    QType::F16,
    QType::Q4_0,
    QType::Q4_1,
    QType::Q5_0,
    QType::Q8_0,
    QType::Q4_K,
    QType::Q5_K,
    QType::Q6_K,
];

/// Random but valid bytes for `rows × cols` weights: random codes, finite scales.
pub(crate) fn random_matrix(ty: QType, rows: usize, cols: usize, seed: u64) -> QMatrix {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let blocks = rows * cols / ty.block_elems();
    let bb = ty.block_bytes();
    let mut data = vec![0u8; blocks * bb];
    rng.fill(&mut data[..]);
    let put_f16 = |b: &mut [u8], at: usize, v: f32| {
        b[at..at + 2].copy_from_slice(&f16::from_f32(v).to_le_bytes());
    };
    for b in data.chunks_exact_mut(bb) {
        let s: f32 = rng.random_range(0.001..0.05);
        let m: f32 = rng.random_range(-0.05..0.05);
        match ty {
            QType::F32 => b.copy_from_slice(&rng.random_range(-1.0f32..1.0).to_le_bytes()),
            QType::F16 => put_f16(b, 0, rng.random_range(-1.0..1.0)),
            QType::Q4_0 | QType::Q5_0 | QType::Q8_0 => put_f16(b, 0, s),
            QType::Q4_1 => {
                put_f16(b, 0, s);
                put_f16(b, 2, m);
            }
            QType::Q4_K | QType::Q5_K => {
                put_f16(b, 0, s);
                put_f16(b, 2, s / 2.0);
            }
            QType::Q6_K => put_f16(b, 208, s),
        }
    }
    QMatrix::new(ty, rows, cols, data).expect("sizes match")
}

fn random_acts(t: usize, n: usize, seed: u64) -> Vec<f32> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    (0..t * n).map(|_| rng.random_range(-2.0..2.0)).collect()
}

/// The SIMD kernel sets of this CPU, with and without VNNI; `None` (and a note) without AVX2.
fn simd_sets() -> Option<Vec<Kernels>> {
    let sets: Vec<Kernels> = [Kernels::avx2(), Kernels::avx2_no_vnni()]
        .into_iter()
        .flatten()
        .collect();
    if sets.is_empty() {
        eprintln!("skipped: this CPU has no AVX2 + FMA + F16C");
        return None;
    }
    Some(sets)
}

fn max_rel(a: &[f32], b: &[f32]) -> f32 {
    let scale = b.iter().fold(0f32, |m, v| m.max(v.abs())).max(1e-6);
    a.iter().zip(b).fold(0f32, |m, (x, y)| m.max((x - y).abs())) / scale
}

fn candle_type(ty: QType) -> GgmlDType {
    match ty {
        QType::F32 => GgmlDType::F32,
        QType::F16 => GgmlDType::F16,
        QType::Q4_0 => GgmlDType::Q4_0,
        QType::Q4_1 => GgmlDType::Q4_1,
        QType::Q5_0 => GgmlDType::Q5_0,
        QType::Q8_0 => GgmlDType::Q8_0,
        QType::Q4_K => GgmlDType::Q4K,
        QType::Q5_K => GgmlDType::Q5K,
        QType::Q6_K => GgmlDType::Q6K,
    }
}

#[test]
fn dequantization_matches_candle_bit_for_bit() {
    for (i, ty) in ALL.into_iter().enumerate() {
        let (rows, cols) = (3, 512);
        let w = random_matrix(ty, rows, cols, 10 + i as u64);
        let mut data = Vec::new();
        for r in 0..rows {
            data.extend_from_slice(w.row(r));
        }
        let theirs = qtensor_from_ggml(candle_type(ty), &data, vec![rows, cols], &Device::Cpu)
            .expect("candle reads the blocks")
            .dequantize(&Device::Cpu)
            .expect("dequantize")
            .flatten_all()
            .expect("flatten")
            .to_vec1::<f32>()
            .expect("to vec");
        let mut ours = vec![0f32; cols];
        for r in 0..rows {
            w.dequantize_row(r, &mut ours);
            for (c, (a, b)) in ours.iter().zip(&theirs[r * cols..]).enumerate() {
                assert_eq!(
                    a.to_bits(),
                    b.to_bits(),
                    "{ty:?} row {r} col {c}: {a} vs {b}"
                );
            }
        }
    }
}

#[test]
fn simd_kernels_match_the_scalar_reference() {
    let Some(sets) = simd_sets() else {
        return;
    };
    let scalar = Kernels::scalar();
    for simd in sets {
        eprintln!("checking {}", simd.name);
        for (i, ty) in ALL.into_iter().enumerate() {
            // Odd row counts and several tokens exercise the chunk split and the token offsets.
            for (rows, cols, t) in [(37, 256, 1), (19, 768, 6), (5, 1536, 2), (7, 512, 9)] {
                let w = random_matrix(ty, rows, cols, 100 + i as u64);
                let x = random_acts(t, cols, 7);
                let mut a = Acts::new();
                a.set(&x, cols);
                let (mut o1, mut o2) = (vec![0f32; rows * t], vec![0f32; rows * t]);
                scalar.matmul(&w, &mut a, &mut o1);
                simd.matmul(&w, &mut a, &mut o2);
                let err = max_rel(&o2, &o1);
                // Same integer sums; only the float summation order differs.
                assert!(
                    err < 1e-5,
                    "{} {ty:?} {rows}x{cols} t={t}: relative error {err}",
                    simd.name
                );
            }
        }
    }
}

/// The panel decoding (`scale · code + off` per block or half block) reproduces the stored
/// weights of every format it takes.
#[test]
fn panel_codes_reproduce_the_dequantized_weights() {
    for (i, ty) in ALL.into_iter().enumerate() {
        let cols = 512;
        let w = random_matrix(ty, 2, cols, 300 + i as u64);
        let Some(h) = panel::halves(ty) else {
            assert!(!panel::decode_row(
                ty,
                w.row(0),
                &mut [0; 512],
                &mut [],
                &mut []
            ));
            continue;
        };
        let per = 32 / h;
        let (mut codes, mut scale, mut off) = (
            vec![0u8; cols],
            vec![0f32; cols / per],
            vec![0f32; cols / per],
        );
        let mut want = vec![0f32; cols];
        for r in 0..2 {
            assert!(panel::decode_row(
                ty,
                w.row(r),
                &mut codes,
                &mut scale,
                &mut off
            ));
            w.dequantize_row(r, &mut want);
            let limit = if ty == QType::Q8_0 {
                255
            } else if ty == QType::Q6_K {
                63
            } else {
                31
            };
            for (c, &v) in want.iter().enumerate() {
                assert!(codes[c] <= limit, "{ty:?} code {} at {c}", codes[c]);
                let got = scale[c / per] * codes[c] as f32 + off[c / per];
                let tol = 1e-6 * (scale[c / per].abs() * 256.0 + off[c / per].abs());
                assert!(
                    (got - v).abs() <= tol,
                    "{ty:?} row {r} col {c}: {got} vs {v}"
                );
            }
        }
    }
}

/// The packed-panel prefill path against the one-row kernels and the scalar reference: the
/// same integer sums, so only the float summation order differs. The shapes cover the tiles
/// of eight, four and one token, rows left over after the last panel, more tokens than one
/// activation slab, and products split into several chunks.
#[test]
fn panel_products_match_the_one_row_kernels() {
    let Some(sets) = simd_sets() else {
        return;
    };
    let scalar = Kernels::scalar();
    for simd in sets {
        for (i, ty) in ALL.into_iter().enumerate() {
            for (rows, cols, t) in [(64, 256, 4), (45, 512, 17), (256, 768, 70), (8, 256, 5)] {
                let w = random_matrix(ty, rows, cols, 400 + i as u64);
                let x = random_acts(t, cols, 11);
                let mut a = Acts::new();
                a.set(&x, cols);
                let mut outs = [0, 1, 2].map(|_| vec![0f32; rows * t]);
                simd.matmul(&w, &mut a, &mut outs[0]);
                simd.without_panel().matmul(&w, &mut a, &mut outs[1]);
                scalar.matmul(&w, &mut a, &mut outs[2]);
                for (what, other) in [("one-row SIMD", &outs[1]), ("scalar", &outs[2])] {
                    let err = max_rel(&outs[0], other);
                    assert!(
                        err < 1e-5,
                        "{} {ty:?} {rows}x{cols} t={t}: panel vs {what}: {err}",
                        simd.name
                    );
                }
            }
        }
    }
}

/// The SIMD panel packing writes the same codes, scales and offsets as the scalar packing, for
/// every panel format (the `Q5_K` and `Q6_K` bit layouts included).
#[test]
fn simd_panel_packing_matches_the_scalar_packing() {
    let Some(pack) = Kernels::avx2().and_then(|k| k.panel_packer()) else {
        eprintln!("skipped: this CPU has no AVX2 + FMA + F16C");
        return;
    };
    for (i, ty) in ALL.into_iter().enumerate() {
        let (rows, cols) = (16, 768);
        let w = random_matrix(ty, rows, cols, 500 + i as u64);
        let (mut a, mut b) = (panel::Panel::default(), panel::Panel::default());
        for r0 in [0, 8] {
            let sa = a.pack(ty, cols, |r| w.row(r), r0, None);
            let sb = b.pack(ty, cols, |r| w.row(r), r0, Some(pack));
            assert_eq!(sa, sb, "{ty:?}");
            if !sa {
                continue;
            }
            assert_eq!(a.codes, b.codes, "{ty:?} rows {r0}..");
            assert_eq!(a.scale, b.scale, "{ty:?}");
            assert_eq!(a.off, b.off, "{ty:?}");
        }
    }
}

#[test]
fn quantized_product_matches_a_float_product_of_the_dequantized_weights() {
    for (i, ty) in ALL.into_iter().enumerate() {
        let (rows, cols, t) = (24, 512, 2);
        let w = random_matrix(ty, rows, cols, 200 + i as u64);
        let x = random_acts(t, cols, 9);
        let mut a = Acts::new();
        a.set(&x, cols);
        let mut got = vec![0f32; rows * t];
        Kernels::get().matmul(&w, &mut a, &mut got);
        let mut want = vec![0f32; rows * t];
        let mut row = vec![0f32; cols];
        for r in 0..rows {
            w.dequantize_row(r, &mut row);
            for tok in 0..t {
                let s: f64 = row
                    .iter()
                    .zip(&x[tok * cols..])
                    .map(|(a, b)| *a as f64 * *b as f64)
                    .sum();
                want[tok * rows + r] = s as f32;
            }
        }
        let err = max_rel(&got, &want);
        // 8-bit activations: about 1/254 per element, averaging down over the row.
        let tol = if matches!(ty, QType::F32 | QType::F16) {
            1e-5
        } else {
            2e-2
        };
        assert!(err < tol, "{ty:?}: relative error {err}");
    }
}

#[test]
fn quantize_row_round_trips_within_one_step() {
    let x = random_acts(1, 256, 3);
    for ty in [
        QType::Q4_0,
        QType::Q4_1,
        QType::Q5_0,
        QType::Q8_0,
        QType::F16,
    ] {
        let bytes = quantize_row(ty, &x).expect("a quantizer exists");
        let w = QMatrix::new(ty, 1, 256, bytes).expect("size");
        let mut back = vec![0f32; 256];
        w.dequantize_row(0, &mut back);
        for (b, c) in x.chunks(32).zip(back.chunks(32)) {
            let amax = b.iter().fold(0f32, |m, v| m.max(v.abs()));
            let (lo, hi) = b
                .iter()
                .fold((f32::MAX, f32::MIN), |(l, h), &v| (l.min(v), h.max(v)));
            // One quantization step of each format (the symmetric 4/5-bit formats clamp the
            // side opposite the largest value one level short, so a whole step is allowed).
            let step = match ty {
                QType::Q4_0 => amax / 8.0,
                QType::Q5_0 => amax / 16.0,
                QType::Q4_1 => (hi - lo) / 15.0,
                QType::Q8_0 => amax / 127.0,
                _ => amax / 1000.0,
            };
            for (u, v) in b.iter().zip(c) {
                assert!(
                    (u - v).abs() <= step * 1.01,
                    "{ty:?}: {u} → {v}, step {step}"
                );
            }
        }
    }
    assert!(quantize_row(QType::Q4_K, &x).is_none());
}

#[test]
fn matrix_sizes_are_checked() {
    assert!(QMatrix::new(QType::Q4_K, 1, 100, vec![0; 144]).is_err());
    assert!(QMatrix::new(QType::Q8_0, 2, 64, vec![0; 4 * 34 - 1]).is_err());
    assert!(QMatrix::new(QType::Q8_0, 2, 64, vec![0; 4 * 34]).is_ok());
}

#[test]
fn simd_attention_matches_the_per_position_reference() {
    let Some(simd) = Kernels::avx2() else {
        eprintln!("skipped: this CPU has no AVX2 + FMA + F16C");
        return;
    };
    let reference = simd.without_simd_attention();
    for hd in [64usize, 128, 32] {
        for n in [1usize, 7, 8, 9, 300] {
            let q = random_acts(1, hd, 11);
            let k = random_acts(n, hd, 12);
            let v = random_acts(n, hd, 13);
            // A large scale makes the softmax peaked: exercises the exponential's range.
            for scale in [0.125f32, 3.0] {
                let (mut a, mut b) = (vec![0f32; hd], vec![0f32; hd]);
                let mut sc = Vec::new();
                simd.attend(&q, &k, &v, n, scale, &mut sc, &mut a);
                reference.attend(&q, &k, &v, n, scale, &mut sc, &mut b);
                let err = max_rel(&a, &b);
                assert!(err < 1e-5, "hd {hd} n {n} scale {scale}: {err}");
            }
        }
    }
}

/// The vectorized SwiGLU gate against the scalar formula, over the range where `e^x`
/// overflows or underflows in one direction, with a tail shorter than a vector.
#[test]
fn simd_silu_matches_the_scalar_formula() {
    let Some(simd) = Kernels::avx2() else {
        eprintln!("skipped: this CPU has no AVX2 + FMA + F16C");
        return;
    };
    let mut rng = rand::rngs::StdRng::seed_from_u64(5);
    let n = 40_000 + 5;
    let mut g: Vec<f32> = (0..n).map(|_| rng.random_range(-30.0..30.0)).collect();
    g[..6].copy_from_slice(&[0.0, -0.0, 200.0, -200.0, 1e-30, -1e-30]);
    let u: Vec<f32> = (0..n).map(|_| rng.random_range(-2.0..2.0)).collect();
    let (mut a, mut b) = (g.clone(), g);
    Kernels::scalar().silu_mul(&mut a, &u);
    simd.silu_mul(&mut b, &u);
    for (i, (x, y)) in a.iter().zip(&b).enumerate() {
        assert!(y.is_finite(), "{i}: {y}");
        assert!((x - y).abs() <= 1e-6 * x.abs().max(1.0), "{i}: {x} vs {y}");
    }
}
