//! llama-bench style speed tests: `pp512`, `tg128`, `tg128 @ d512`, `tg128 @ d2048`.
//!
//! One `BenchRecord` per (implementation, test): the environment (build, CPU, threads), the
//! knobs, the raw samples and their mean ± sd. Every renderer (table, JSON) prints the same
//! records. Prompt processing times one forward pass over N tokens from an empty cache;
//! generation times N single-token forward passes after `depth` cached tokens. The depth
//! prefill is not timed and is done once per implementation; each repetition rolls the cache
//! back to it (our cache truncates; the reference model is restored from a clone).
//!
//! Tokens are drawn from a seeded RNG (no sampling is timed), and the device is synchronized
//! before every clock read.

use std::time::Instant;

use candle_core::Device;
use rand::{Rng, SeedableRng};
use serde::Serialize;

use crate::runtime::options::RuntimeOptions;
use crate::runtime::reference::Reference;
use crate::runtime::session::Session;

/// One test.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum BenchTest {
    /// Prompt processing of `n` tokens from an empty cache.
    Pp {
        /// Tokens.
        n: usize,
    },
    /// Generation of `n` tokens after `depth` cached tokens.
    Tg {
        /// Tokens generated.
        n: usize,
        /// Tokens already in the cache.
        depth: usize,
    },
}

impl BenchTest {
    /// llama-bench's name: `pp512`, `tg128`, `tg128 @ d2048`.
    pub fn name(&self) -> String {
        match *self {
            BenchTest::Pp { n } => format!("pp{n}"),
            BenchTest::Tg { n, depth: 0 } => format!("tg{n}"),
            BenchTest::Tg { n, depth } => format!("tg{n} @ d{depth}"),
        }
    }

    /// Tokens processed by one repetition.
    pub fn tokens(&self) -> usize {
        match *self {
            BenchTest::Pp { n } | BenchTest::Tg { n, .. } => n,
        }
    }

    /// Cache positions needed.
    pub fn positions(&self) -> usize {
        match *self {
            BenchTest::Pp { n } => n,
            BenchTest::Tg { n, depth } => n + depth,
        }
    }

    /// Parse `pp512`, `tg128`, `tg128@d2048` (spaces allowed around `@`).
    pub fn parse(s: &str) -> Option<Self> {
        let s: String = s.chars().filter(|c| !c.is_whitespace()).collect();
        if let Some(n) = s.strip_prefix("pp") {
            return n
                .parse()
                .ok()
                .filter(|&n| n > 0)
                .map(|n| BenchTest::Pp { n });
        }
        let rest = s.strip_prefix("tg")?;
        let (n, depth) = match rest.split_once("@d") {
            Some((n, d)) => (n.parse().ok()?, d.parse().ok()?),
            None => (rest.parse().ok()?, 0),
        };
        (n > 0).then_some(BenchTest::Tg { n, depth })
    }
}

/// The default test set.
pub fn default_tests() -> Vec<BenchTest> {
    vec![
        BenchTest::Pp { n: 512 },
        BenchTest::Tg { n: 128, depth: 0 },
        BenchTest::Tg { n: 128, depth: 512 },
        BenchTest::Tg {
            n: 128,
            depth: 2048,
        },
    ]
}

/// Which implementation ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Impl {
    /// boyd's decoder and KV cache.
    Boyd,
    /// candle-transformers' per-family model file.
    Reference,
}

impl std::fmt::Display for Impl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Impl::Boyd => "boyd",
            Impl::Reference => "candle-transformers",
        })
    }
}

/// How the binary was built: what decides whether candle's fast CPU paths are in.
#[derive(Debug, Clone, Serialize)]
pub struct BuildInfo {
    /// boyd's version.
    pub version: &'static str,
    /// `release` or `debug`.
    pub profile: &'static str,
    /// Target architecture.
    pub arch: &'static str,
    /// SIMD features compiled in.
    pub simd: Vec<&'static str>,
    /// Cargo features (cuda, metal).
    pub features: Vec<&'static str>,
    /// The native engine's kernel set, detected at run time (`avx2`, `scalar`).
    pub kernels: &'static str,
    /// The decoder engine (`BOYD_ENGINE`: `auto`, `native`, `candle`).
    pub engine: &'static str,
    /// The native engine's KV cache type (`--kv-dtype`).
    pub kv_dtype: &'static str,
}

impl BuildInfo {
    /// This binary's build, running with `rt` (engine and kernel set).
    pub fn current(rt: &RuntimeOptions) -> Self {
        let mut simd = Vec::new();
        macro_rules! feat {
            ($($f:literal),*) => {$(
                if cfg!(target_feature = $f) {
                    simd.push($f);
                }
            )*};
        }
        feat!(
            "sse4.2",
            "avx",
            "avx2",
            "fma",
            "f16c",
            "avx512f",
            "avx512bw",
            "avx512vnni",
            "avx512bf16",
            "neon",
            "dotprod",
            "i8mm"
        );
        let mut features = Vec::new();
        if cfg!(feature = "cuda") {
            features.push("cuda");
        }
        if cfg!(feature = "metal") {
            features.push("metal");
        }
        Self {
            version: env!("CARGO_PKG_VERSION"),
            profile: if cfg!(debug_assertions) {
                "debug"
            } else {
                "release"
            },
            arch: std::env::consts::ARCH,
            simd,
            features,
            kernels: crate::kernels::cpu::Kernels::get_for(rt.kernels).name,
            engine: rt.engine.as_str(),
            kv_dtype: rt.kv_dtype.name(),
        }
    }

    /// Warnings a user should see before trusting the numbers (llama-bench does the same).
    pub fn warnings(&self) -> Vec<String> {
        let mut w = Vec::new();
        if self.profile == "debug" {
            w.push(
                "this is a debug build: numbers are not representative; build with --release"
                    .into(),
            );
        }
        let fast = match self.arch {
            "x86_64" => self.simd.contains(&"avx2") && self.simd.contains(&"fma"),
            "aarch64" => self.simd.contains(&"neon"),
            _ => true,
        };
        if !fast && self.engine == "candle" {
            w.push(format!(
                "built without the CPU's SIMD features ({}) and running the candle engine: expect ~2.7x slower CPU inference; build with RUSTFLAGS=\"-C target-cpu=native\" (the repo's .cargo/config.toml does this) or use the native engine",
                if self.simd.is_empty() { "none".to_string() } else { self.simd.join(",") }
            ));
        }
        if self.kernels == "scalar" && self.engine != "candle" {
            w.push(
                "the native engine runs its scalar reference kernels (no AVX2+FMA detected, or BOYD_KERNELS=scalar): expect several times slower CPU inference"
                    .into(),
            );
        }
        w
    }
}

/// The machine, as far as the benchmark needs it.
#[derive(Debug, Clone, Serialize)]
pub struct HostInfo {
    /// CPU model name.
    pub cpu: String,
    /// Logical CPUs available to this process.
    pub cpus: usize,
    /// Threads candle's CPU kernels use.
    pub threads: usize,
    /// Device name (`cpu`, `cuda:0`, `metal`).
    pub device: String,
}

impl HostInfo {
    /// Describe this host and `device`.
    pub fn current(device: &Device) -> Self {
        let cpu = std::fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|s| {
                s.lines()
                    .find(|l| l.starts_with("model name"))
                    .and_then(|l| l.split_once(':'))
                    .map(|(_, v)| v.trim().to_string())
            })
            .unwrap_or_else(|| std::env::consts::ARCH.to_string());
        Self {
            cpu,
            cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
            threads: candle_core::utils::get_num_threads(),
            device: device_name(device),
        }
    }
}

/// `cpu`, `cuda` or `metal`.
pub fn device_name(device: &Device) -> String {
    match device {
        Device::Cpu => "cpu".into(),
        Device::Cuda(_) => "cuda".into(),
        Device::Metal(_) => "metal".into(),
    }
}

/// The model under test.
#[derive(Debug, Clone, Serialize)]
pub struct ModelInfo {
    /// Name (catalog name or file stem).
    pub name: String,
    /// Architecture.
    pub arch: String,
    /// File size in bytes.
    pub file_bytes: u64,
    /// Bytes of tensor data.
    pub tensor_bytes: u64,
}

/// Mean and sample standard deviation.
pub fn mean_sd(xs: &[f64]) -> (f64, f64) {
    if xs.is_empty() {
        return (0.0, 0.0);
    }
    let n = xs.len() as f64;
    let mean = xs.iter().sum::<f64>() / n;
    if xs.len() < 2 {
        return (mean, 0.0);
    }
    let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0);
    (mean, var.sqrt())
}

/// One test's result for one implementation.
#[derive(Debug, Clone, Serialize)]
pub struct BenchRecord {
    /// The model.
    pub model: ModelInfo,
    /// Implementation.
    pub implementation: Impl,
    /// Test name (`pp512`, `tg128 @ d2048`).
    pub test: String,
    /// The test.
    pub spec: BenchTest,
    /// Seconds per repetition.
    pub samples_s: Vec<f64>,
    /// Tokens per second of each repetition.
    pub samples_tps: Vec<f64>,
    /// Mean tokens per second.
    pub mean_tps: f64,
    /// Standard deviation of tokens per second.
    pub sd_tps: f64,
    /// Build.
    pub build: BuildInfo,
    /// Host.
    pub host: HostInfo,
}

/// Something the benchmark can drive.
pub trait BenchTarget {
    /// Which implementation this is.
    fn implementation(&self) -> Impl;
    /// Empty the KV cache.
    fn reset(&mut self) -> candle_core::Result<()>;
    /// Run `tokens` at the current position (logits computed, device synchronized).
    fn forward(&mut self, tokens: &[u32]) -> candle_core::Result<()>;
    /// Remember the current cache state.
    fn mark(&mut self);
    /// Return to the remembered cache state.
    fn rewind(&mut self) -> candle_core::Result<()>;
}

/// boyd's session as a bench target.
pub struct BoydTarget<'a> {
    /// The session.
    pub session: &'a mut Session,
    mark: usize,
}

impl<'a> BoydTarget<'a> {
    /// Wrap a session.
    pub fn new(session: &'a mut Session) -> Self {
        Self { session, mark: 0 }
    }
}

fn dec(e: crate::runtime::decoder::DecoderError) -> candle_core::Error {
    candle_core::Error::Msg(e.to_string())
}

impl BenchTarget for BoydTarget<'_> {
    fn implementation(&self) -> Impl {
        Impl::Boyd
    }
    fn reset(&mut self) -> candle_core::Result<()> {
        self.session.reset();
        Ok(())
    }
    fn forward(&mut self, tokens: &[u32]) -> candle_core::Result<()> {
        for chunk in tokens.chunks(crate::runtime::session::PREFILL_CHUNK) {
            self.session.extend(chunk).map_err(dec)?;
        }
        self.session.decoder().device().synchronize()
    }
    fn mark(&mut self) {
        self.mark = self.session.cache().len();
    }
    fn rewind(&mut self) -> candle_core::Result<()> {
        let kept = self.session.truncate(self.mark);
        if kept != self.mark {
            candle_core::bail!(
                "rewinding to depth {} kept {kept} positions (a sliding-window ring went past it)",
                self.mark
            );
        }
        Ok(())
    }
}

/// candle-transformers' model as a bench target. Rewinding restores a clone of the marked
/// state where the model type allows it, and otherwise clears the cache and runs the marked
/// tokens again (untimed).
pub struct ReferenceTarget {
    model: Reference,
    marked: Option<Reference>,
    history: Vec<u32>,
    mark: usize,
    device: Device,
}

impl ReferenceTarget {
    /// Wrap a freshly loaded reference model.
    pub fn new(model: Reference, device: &Device) -> Self {
        Self {
            model,
            marked: None,
            history: Vec::new(),
            mark: 0,
            device: device.clone(),
        }
    }
}

impl BenchTarget for ReferenceTarget {
    fn implementation(&self) -> Impl {
        Impl::Reference
    }
    fn reset(&mut self) -> candle_core::Result<()> {
        self.model.clear();
        self.history.clear();
        Ok(())
    }
    fn forward(&mut self, tokens: &[u32]) -> candle_core::Result<()> {
        self.model
            .forward(tokens, self.history.len(), &self.device)?;
        self.history.extend_from_slice(tokens);
        self.device.synchronize()
    }
    fn mark(&mut self) {
        self.mark = self.history.len();
        self.marked = self.model.try_clone();
    }
    fn rewind(&mut self) -> candle_core::Result<()> {
        if let Some(m) = self.marked.as_ref().and_then(Reference::try_clone) {
            self.model = m;
            self.history.truncate(self.mark);
            return Ok(());
        }
        let replay: Vec<u32> = self.history[..self.mark].to_vec();
        self.reset()?;
        for chunk in replay.chunks(crate::runtime::session::PREFILL_CHUNK) {
            self.forward(chunk)?;
        }
        Ok(())
    }
}

/// Benchmark settings.
#[derive(Debug, Clone)]
pub struct BenchConfig {
    /// Tests to run.
    pub tests: Vec<BenchTest>,
    /// Timed repetitions per test.
    pub reps: usize,
    /// Run one untimed repetition first.
    pub warmup: bool,
    /// Vocabulary size for the random tokens.
    pub vocab: u32,
    /// RNG seed for the tokens.
    pub seed: u64,
    /// The runtime's options (for the build record).
    pub runtime: RuntimeOptions,
}

/// Run every test on `target`; `progress` is told the test name and repetition.
pub fn run(
    target: &mut dyn BenchTarget,
    cfg: &BenchConfig,
    model: &ModelInfo,
    host: &HostInfo,
    progress: &mut dyn FnMut(&str, usize),
) -> candle_core::Result<Vec<BenchRecord>> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(cfg.seed);
    let mut tokens =
        |n: usize| -> Vec<u32> { (0..n).map(|_| rng.random_range(0..cfg.vocab)).collect() };
    let mut out = Vec::new();
    for test in &cfg.tests {
        let name = test.name();
        let mut samples = Vec::new();
        match *test {
            BenchTest::Pp { n } => {
                let prompt = tokens(n);
                for rep in 0..cfg.reps + cfg.warmup as usize {
                    progress(&name, rep);
                    target.reset()?;
                    let t0 = Instant::now();
                    target.forward(&prompt)?;
                    let dt = t0.elapsed().as_secs_f64();
                    if rep >= cfg.warmup as usize {
                        samples.push(dt);
                    }
                }
            }
            BenchTest::Tg { n, depth } => {
                target.reset()?;
                if depth > 0 {
                    progress(&format!("{name} (prefill)"), 0);
                    target.forward(&tokens(depth))?;
                }
                target.mark();
                let gen = tokens(n);
                for rep in 0..cfg.reps + cfg.warmup as usize {
                    progress(&name, rep);
                    target.rewind()?;
                    let t0 = Instant::now();
                    for &tok in &gen {
                        target.forward(&[tok])?;
                    }
                    let dt = t0.elapsed().as_secs_f64();
                    if rep >= cfg.warmup as usize {
                        samples.push(dt);
                    }
                }
            }
        }
        let tps: Vec<f64> = samples.iter().map(|s| test.tokens() as f64 / s).collect();
        let (mean, sd) = mean_sd(&tps);
        out.push(BenchRecord {
            model: model.clone(),
            implementation: target.implementation(),
            test: name,
            spec: *test,
            samples_s: samples,
            samples_tps: tps,
            mean_tps: mean,
            sd_tps: sd,
            build: BuildInfo::current(&cfg.runtime),
            host: host.clone(),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_llama_bench_names() {
        assert_eq!(BenchTest::parse("pp512"), Some(BenchTest::Pp { n: 512 }));
        assert_eq!(
            BenchTest::parse("tg128"),
            Some(BenchTest::Tg { n: 128, depth: 0 })
        );
        assert_eq!(
            BenchTest::parse("tg128 @ d2048"),
            Some(BenchTest::Tg {
                n: 128,
                depth: 2048
            })
        );
        assert_eq!(BenchTest::parse("tg0"), None);
        assert_eq!(BenchTest::parse("xx"), None);
        for t in default_tests() {
            assert_eq!(BenchTest::parse(&t.name()), Some(t));
        }
    }

    #[test]
    fn mean_and_sample_sd() {
        let (m, sd) = mean_sd(&[2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]);
        assert!((m - 5.0).abs() < 1e-12);
        assert!((sd - 2.138089935).abs() < 1e-6);
        assert_eq!(mean_sd(&[3.0]), (3.0, 0.0));
    }

    #[test]
    fn debug_or_no_simd_builds_warn() {
        let mut b = BuildInfo::current(&RuntimeOptions::default());
        b.profile = "debug";
        b.arch = "x86_64";
        b.simd = vec!["sse4.2"];
        b.engine = "candle";
        b.kernels = "avx2";
        let w = b.warnings();
        assert_eq!(w.len(), 2, "{w:?}");
        // The native engine detects SIMD at run time: no compile-time warning for it...
        b.engine = "auto";
        assert_eq!(b.warnings().len(), 1, "only the debug warning");
        // ...but a warning when it fell back to the scalar kernels.
        b.kernels = "scalar";
        assert_eq!(b.warnings().len(), 2);
        b.profile = "release";
        b.simd = vec!["avx2", "fma"];
        b.kernels = "avx2+vnni";
        assert!(b.warnings().is_empty());
    }
}
