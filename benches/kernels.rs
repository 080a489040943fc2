//! Criterion benches of each CPU kernel: a 1536 × 768 product (FFN-sized, a multiple of 256 so every
//! format applies), for one token (decode) and for 16 tokens (prefill, four-token kernels where the
//! format has them), with the detected kernels and with the scalar reference.
// `criterion_group!` defines an undocumented public function.
#![allow(missing_docs)]

use std::hint::black_box;

use boyd::kernels::cpu::{hadamard_rotate, Acts, Kernels, Panel, QMatrix, QType};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use half::f16;
use rand::{Rng, SeedableRng};

const FORMATS: [QType; 8] = [
    QType::F16,
    QType::Q4_0,
    QType::Q4_1,
    QType::Q5_0,
    QType::Q8_0,
    QType::Q4_K,
    QType::Q5_K,
    QType::Q6_K,
];

/// Random codes with finite scales, as in the kernel tests.
fn matrix(ty: QType, rows: usize, cols: usize) -> QMatrix {
    let mut rng = rand::rngs::StdRng::seed_from_u64(1);
    let bb = ty.block_bytes();
    let mut data = vec![0u8; rows * cols / ty.block_elems() * bb];
    rng.fill(&mut data[..]);
    let scale = f16::from_f32(0.01).to_le_bytes();
    for b in data.chunks_exact_mut(bb) {
        match ty {
            QType::F16 => b.copy_from_slice(&scale),
            QType::Q6_K => b[208..210].copy_from_slice(&scale),
            QType::Q4_K | QType::Q5_K | QType::Q4_1 => {
                b[0..2].copy_from_slice(&scale);
                b[2..4].copy_from_slice(&scale);
            }
            _ => b[0..2].copy_from_slice(&scale),
        }
    }
    QMatrix::new(ty, rows, cols, data).expect("sizes match")
}

fn kernels(c: &mut Criterion) {
    let (rows, cols) = (1536, 768);
    let mut rng = rand::rngs::StdRng::seed_from_u64(2);
    let mut sets = vec![Kernels::scalar()];
    // With and without the AVX-512 VNNI kernels (the same on a CPU without them).
    sets.extend(Kernels::avx2());
    sets.extend(Kernels::avx2_no_vnni());
    for t in [1usize, 16] {
        let mut g = c.benchmark_group(format!("matmul_{rows}x{cols}_t{t}"));
        g.throughput(Throughput::Elements((rows * cols * t) as u64));
        let x: Vec<f32> = (0..t * cols).map(|_| rng.random_range(-1.0..1.0)).collect();
        for ty in FORMATS {
            let w = matrix(ty, rows, cols);
            for k in &sets {
                let mut a = Acts::new();
                let mut out = vec![0f32; rows * t];
                g.bench_function(BenchmarkId::new(format!("{ty:?}"), k.name), |b| {
                    b.iter(|| {
                        a.set(&x, cols);
                        k.matmul(black_box(&w), &mut a, &mut out);
                        black_box(&out);
                    })
                });
            }
        }
        g.finish();
    }
}

/// A prefill-sized product (Qwen2.5-0.5B's fused gate/up: 9728 × 896, 8 and 128 tokens) through the
/// packed panels and through the one-row kernels, and the packing of one panel alone.
fn prefill(c: &mut Criterion) {
    let Some(simd) = Kernels::avx2() else {
        return;
    };
    let (rows, cols) = (9728, 896);
    let mut rng = rand::rngs::StdRng::seed_from_u64(3);
    for t in [8usize, 128] {
        let x: Vec<f32> = (0..t * 1024).map(|_| rng.random_range(-1.0..1.0)).collect();
        let mut g = c.benchmark_group(format!("prefill_{rows}x{cols}_t{t}"));
        g.throughput(Throughput::Elements((rows * cols * t) as u64));
        for ty in [QType::Q5_0, QType::Q8_0, QType::Q4_K, QType::Q6_K] {
            // The K formats need rows a multiple of 256: 9728 × 1024 for them.
            let cols = if ty.block_elems() == 256 { 1024 } else { cols };
            let w = matrix(ty, rows, cols);
            let x = &x[..t * cols];
            for k in [simd, simd.without_panel()] {
                let mut a = Acts::new();
                let mut out = vec![0f32; rows * t];
                g.bench_function(BenchmarkId::new(format!("{ty:?}"), k.name), |b| {
                    b.iter(|| {
                        a.set(x, cols);
                        k.matmul(black_box(&w), &mut a, &mut out);
                        black_box(&out);
                    })
                });
            }
        }
        g.finish();
    }
    let mut g = c.benchmark_group("pack_8x4864");
    g.throughput(Throughput::Elements(8 * 4864));
    for ty in [QType::Q5_0, QType::Q4_K, QType::Q6_K] {
        // 4864 = 19 × 256: a whole number of blocks of every format (Qwen2.5-0.5B's FFN width).
        let cols = 4864;
        let w = matrix(ty, 8, cols);
        let mut p = Panel::default();
        for (name, simd) in [("scalar", None), ("simd", simd.panel_packer())] {
            g.bench_function(BenchmarkId::new(format!("{ty:?}"), name), |b| {
                b.iter(|| black_box(p.pack(ty, cols, |r| w.row(r), 0, simd)))
            });
        }
    }
    g.finish();
}

/// Decode as the model does it: one token through matrices that together far exceed the caches
/// (about 256 MB of weights per format, 9728 × 1024 each, every one read once per iteration),
/// so the rate is the bytes per second a decode step streams from memory. Compare it with the
/// bandwidth `boyd probe` measures.
fn decode_stream(c: &mut Criterion) {
    let simd = Kernels::avx2();
    let (rows, cols) = (9728, 1024);
    let mut rng = rand::rngs::StdRng::seed_from_u64(4);
    let x: Vec<f32> = (0..cols).map(|_| rng.random_range(-1.0..1.0)).collect();
    let mut g = c.benchmark_group(format!("decode_stream_{rows}x{cols}"));
    for ty in [
        QType::Q4_0,
        QType::Q4_1,
        QType::Q5_0,
        QType::Q8_0,
        QType::Q4_K,
        QType::Q6_K,
    ] {
        let one = matrix(ty, rows, cols);
        let n = (256usize << 20).div_ceil(one.bytes());
        let ws: Vec<QMatrix> = (0..n).map(|_| one.clone()).collect();
        g.throughput(Throughput::Bytes((one.bytes() * n) as u64));
        for k in simd.iter().chain(Kernels::avx2_no_vnni().iter()) {
            let mut a = Acts::new();
            let mut out = vec![0f32; rows];
            g.bench_function(BenchmarkId::new(format!("{ty:?}"), k.name), |b| {
                b.iter(|| {
                    for w in &ws {
                        a.set(&x, cols);
                        k.matmul(black_box(w), &mut a, &mut out);
                    }
                    black_box(&out);
                })
            });
        }
    }
    g.finish();
}

/// The Walsh–Hadamard rotation a `q8_0` KV cache applies to queries, keys, values and outputs:
/// one prefill batch's attention outputs (512 tokens × 14 heads × 64, Qwen2.5-0.5B's shape).
fn kv_rotate(c: &mut Criterion) {
    let mut rng = rand::rngs::StdRng::seed_from_u64(5);
    let mut x: Vec<f32> = (0..512 * 14 * 64)
        .map(|_| rng.random_range(-4.0..4.0))
        .collect();
    let mut g = c.benchmark_group("kv_rotate_512x14x64");
    g.throughput(Throughput::Elements(x.len() as u64));
    for n in [64, 128] {
        g.bench_function(BenchmarkId::from_parameter(n), |b| {
            b.iter(|| hadamard_rotate(black_box(&mut x), n))
        });
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(10).warm_up_time(std::time::Duration::from_millis(300)).measurement_time(std::time::Duration::from_secs(1));
    targets = kernels, prefill, decode_stream, kv_rotate
}
criterion_main!(benches);
