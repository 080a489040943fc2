//! `boyd bench`: llama-bench style speed tests of boyd's decoder, side by side with
//! candle-transformers' reference implementation on the same file and machine.

use std::io::Write;

use anyhow::Context;

use super::GlobalOpts;
use crate::catalog;
use crate::measure::bench::{
    self, BenchConfig, BenchRecord, BenchTest, BoydTarget, BuildInfo, HostInfo, Impl, ModelInfo,
    ReferenceTarget,
};
use crate::runtime::reference::Reference;

/// Which implementations to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Which {
    /// boyd's decoder only.
    Boyd,
    /// candle-transformers' reference only.
    Reference,
    /// Both, interleaved test by test, with their ratio.
    Both,
}

/// Arguments of `boyd bench`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Tests, comma-separated: ppN, tgN, tgN@dDEPTH.
    #[arg(
        long,
        short = 't',
        value_delimiter = ',',
        default_value = "pp512,tg128,tg128@d512,tg128@d2048"
    )]
    pub tests: Vec<String>,
    /// Timed repetitions per test.
    #[arg(long, short = 'r', default_value_t = 3)]
    pub reps: usize,
    /// Skip the untimed warm-up repetition.
    #[arg(long)]
    pub no_warmup: bool,
    /// Implementations to run.
    #[arg(long = "impl", value_enum, default_value_t = Which::Both)]
    pub which: Which,
    /// Seed of the random prompt tokens.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

/// Run `boyd bench`.
pub fn run(args: Args, g: &GlobalOpts) -> anyhow::Result<std::process::ExitCode> {
    let tests: Vec<BenchTest> = args
        .tests
        .iter()
        .map(|t| {
            BenchTest::parse(t).with_context(|| {
                format!("unknown test {t:?}: use ppN, tgN or tgN@dDEPTH, e.g. pp512,tg128@d2048")
            })
        })
        .collect::<anyhow::Result<_>>()?;
    anyhow::ensure!(args.reps > 0, "--reps must be at least 1");
    let runtime = super::runtime_options(g);
    let build = BuildInfo::current(&runtime);
    for w in build.warnings() {
        eprintln!("warning: {w}");
    }
    let positions = tests.iter().map(BenchTest::positions).max().unwrap_or(0);
    let (mut model, resolved) =
        super::generate::load_model(g, catalog::DEFAULT_MODEL, Some(positions.max(1) + 1))?;
    let params = model.session().decoder().params().clone();
    anyhow::ensure!(
        positions < model.session().context_length(),
        "the tests need {positions} positions but the context is {}",
        model.session().context_length()
    );
    let device = model.session().decoder().device().clone();
    let info = ModelInfo {
        name: resolved
            .entry
            .as_ref()
            .map(|e| e.name.clone())
            .unwrap_or_else(|| model_stem(&resolved.path)),
        arch: params.architecture.to_string(),
        file_bytes: std::fs::metadata(&resolved.path).map(|m| m.len())?,
        tensor_bytes: model.session().decoder().loaded_bytes().file_tensors,
    };
    let host = HostInfo::current(&device);
    let mut reference = if args.which == Which::Boyd {
        None
    } else {
        let r = Reference::load(&resolved.path, params.architecture, &device)
            .context("loading candle-transformers' reference implementation")?;
        Some(ReferenceTarget::new(r, &device))
    };
    let cfg = |test: BenchTest| BenchConfig {
        tests: vec![test],
        reps: args.reps,
        warmup: !args.no_warmup,
        vocab: params.vocab,
        seed: args.seed,
        runtime: runtime.clone(),
    };
    let bar = indicatif::ProgressBar::new_spinner();
    bar.set_draw_target(indicatif::ProgressDrawTarget::stderr());
    let progress = |who: Impl| {
        let bar = bar.clone();
        move |name: &str, rep: usize| {
            bar.set_message(format!("{who} {name} rep {rep}"));
            bar.tick();
        }
    };
    let mut records: Vec<BenchRecord> = Vec::new();
    // Interleave implementations test by test so drift on a shared machine hits both.
    for &test in &tests {
        if args.which != Which::Reference {
            let mut target = BoydTarget::new(model.session_mut());
            records.extend(bench::run(
                &mut target,
                &cfg(test),
                &info,
                &host,
                &mut progress(Impl::Boyd),
            )?);
        }
        if let Some(r) = reference.as_mut() {
            records.extend(bench::run(
                r,
                &cfg(test),
                &info,
                &host,
                &mut progress(Impl::Reference),
            )?);
        }
    }
    bar.finish_and_clear();
    let mut out = std::io::stdout().lock();
    if g.json {
        serde_json::to_writer_pretty(&mut out, &records)?;
        writeln!(out)?;
    } else {
        print_table(&mut out, &records, &host, &build)?;
    }
    Ok(std::process::ExitCode::SUCCESS)
}

fn model_stem(p: &std::path::Path) -> String {
    p.file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default()
}

fn print_table(
    out: &mut impl Write,
    records: &[BenchRecord],
    host: &HostInfo,
    build: &BuildInfo,
) -> std::io::Result<()> {
    writeln!(
        out,
        "cpu: {} · {} threads · device {} · build {} {} [{}] · engine {} (kernels {})",
        host.cpu,
        host.threads,
        host.device,
        build.profile,
        build.arch,
        build.simd.join(","),
        build.engine,
        build.kernels
    )?;
    writeln!(out)?;
    writeln!(
        out,
        "| model | size | impl | test | t/s |\n|---|---:|---|---|---:|"
    )?;
    for r in records {
        writeln!(
            out,
            "| {} | {} | {} | {} | {:.2} ± {:.2} |",
            r.model.name,
            crate::units::Bytes(r.model.file_bytes),
            r.implementation,
            r.test,
            r.mean_tps,
            r.sd_tps
        )?;
    }
    let ours: Vec<&BenchRecord> = records
        .iter()
        .filter(|r| r.implementation == Impl::Boyd)
        .collect();
    let theirs: Vec<&BenchRecord> = records
        .iter()
        .filter(|r| r.implementation == Impl::Reference)
        .collect();
    if !ours.is_empty() && !theirs.is_empty() {
        writeln!(out)?;
        writeln!(
            out,
            "| test | boyd t/s | candle-transformers t/s | boyd / reference |\n|---|---:|---:|---:|"
        )?;
        for o in &ours {
            if let Some(t) = theirs.iter().find(|t| t.test == o.test) {
                writeln!(
                    out,
                    "| {} | {:.2} | {:.2} | {:.2}x |",
                    o.test,
                    o.mean_tps,
                    t.mean_tps,
                    o.mean_tps / t.mean_tps
                )?;
            }
        }
    }
    Ok(())
}
