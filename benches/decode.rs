//! Criterion benches of the runtime's hot paths on a synthetic model (no download):
//! one decode step at several depths, a 64-token prefill chunk, and the sampler over a
//! 152k-entry vocabulary. Bench names carry the device.
// `criterion_group!` defines an undocumented public function.
#![allow(missing_docs)]

use std::hint::black_box;

use boyd::lm::SamplingParams;
use boyd::runtime::decoder::Decoder;
use boyd::runtime::gguf::GgufFile;
use boyd::runtime::options::RuntimeOptions;
use boyd::runtime::sampling::Sampler;
use boyd::runtime::session::Session;
use boyd::runtime::synth::{self, SynthSpec};
use boyd::sizing::{Architecture, GgmlType};
use candle_core::Device;
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};

/// A llama-shaped model the size of SmolLM2's blocks (576 wide, 9 heads, 3 KV heads) with
/// fewer layers, so the bench builds in a second.
fn model(weight_type: GgmlType) -> (tempfile::TempDir, Session) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("bench.gguf");
    let spec = SynthSpec {
        n_layers: 4,
        hidden: 576,
        n_heads: 9,
        n_kv_heads: 3,
        head_dim: 64,
        ffn: 1536,
        vocab: 4096,
        context_length: 4096,
        weight_type,
        ..SynthSpec::tiny(Architecture::Llama)
    };
    synth::write(&spec, &path).expect("write synthetic model");
    let mut f = GgufFile::open(&path).expect("open");
    // Like the CLI, the bench honours BOYD_ENGINE, BOYD_KERNELS and BOYD_PREFILL_CHUNK.
    let opts = RuntimeOptions::from_env();
    let decoder =
        Decoder::load_with_options(&mut f, &Device::Cpu, usize::MAX, &opts).expect("load");
    (
        dir,
        Session::new(decoder, 4096).with_prefill_chunk(opts.prefill_chunk),
    )
}

fn decode_step(c: &mut Criterion) {
    let mut g = c.benchmark_group("cpu/decode_step");
    for ty in [
        GgmlType::Q4_0,
        GgmlType::Q4_1,
        GgmlType::Q8_0,
        GgmlType::Q4_K,
    ] {
        let (_dir, mut s) = model(ty);
        for depth in [0usize, 512, 2048] {
            s.reset();
            let prompt: Vec<u32> = (0..depth as u32).map(|i| i % 4096).collect();
            if depth > 0 {
                s.extend(&prompt).expect("prefill");
            }
            g.bench_with_input(BenchmarkId::new(ty.name(), depth), &depth, |b, &depth| {
                b.iter(|| {
                    s.extend(&[7]).expect("step");
                    s.truncate(depth);
                })
            });
        }
    }
    g.finish();
}

fn prefill(c: &mut Criterion) {
    let (_dir, mut s) = model(GgmlType::Q4_1);
    let prompt: Vec<u32> = (0..64u32).collect();
    c.bench_function("cpu/prefill_64/Q4_1", |b| {
        b.iter(|| {
            s.reset();
            s.extend(black_box(&prompt)).expect("prefill");
        })
    });
}

fn sampler(c: &mut Criterion) {
    let logits: Vec<f32> = (0..151_936)
        .map(|i| ((i * 7919) % 1000) as f32 / 100.0)
        .collect();
    let mut greedy = Sampler::new(SamplingParams::default());
    c.bench_function("cpu/sample_greedy_152k", |b| {
        b.iter(|| greedy.sample(black_box(&mut logits.clone()), &[], None))
    });
    let mut topk = Sampler::new(SamplingParams {
        temperature: 0.7,
        top_k: 40,
        top_p: 0.95,
        ..SamplingParams::default()
    });
    c.bench_function("cpu/sample_topk_topp_152k", |b| {
        b.iter(|| topk.sample(black_box(&mut logits.clone()), &[], None))
    });
}

criterion_group!(benches, decode_step, prefill, sampler);
criterion_main!(benches);
