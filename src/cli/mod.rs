//! The command line. One file per subcommand; this is the only module that prints.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::process::ExitCode;

use clap::{Parser, Subcommand};

pub mod approve;
pub mod audit;
pub mod auto;
pub mod backend;
pub mod bench;
pub mod chat;
pub mod eval;
pub mod eval_concurrent;
pub mod generate;
pub mod memory;
pub mod models;
pub mod ooda;
pub mod perplexity;
pub mod probe;
pub mod resume;
pub mod run;
pub mod runs;
pub mod serve;
pub mod size;
pub mod size_parallel;
pub mod size_published;
mod term;
pub mod validate;

/// Global options shared by every subcommand.
#[derive(Debug, Clone, clap::Args)]
pub struct GlobalOpts {
    /// Model: a catalog name (see `boyd models list`), a path to a .gguf file, or `auto`: the
    /// largest downloaded catalog model that fits this machine at the run's context and decodes
    /// fast enough, by the sizing model (the choice and the reason are printed).
    #[arg(long, short = 'm', global = true, env = "BOYD_MODEL")]
    pub model: Option<String>,
    /// With `--model auto`: also consider catalog models not downloaded yet, and pull the one
    /// chosen (hub, then the alternative source; sha256-verified).
    #[arg(long, global = true)]
    pub pull: bool,
    /// Device to run on: cpu, cuda[:N], metal or auto.
    #[arg(long, global = true, default_value = "cpu")]
    pub device: String,
    /// Print machine-readable JSON instead of text.
    #[arg(long, global = true)]
    pub json: bool,
    /// Load the model even when the sizing model says it will not fit in free memory.
    #[arg(long, global = true)]
    pub force: bool,
    /// KV cache type of the native CPU engine: f16 (default), f32 or q8_0. `boyd size` also
    /// sizes bf16 and q4_0 (its default: what the runtime allocates).
    #[arg(long, global = true, value_parser = crate::sizing::KvDtype::parse)]
    pub kv_dtype: Option<crate::sizing::KvDtype>,
    /// CPU kernel set of the native engine: auto (the fastest this CPU runs), scalar (the
    /// reference), avx2 (AVX2+FMA+F16C), vnni (avx2 with the AVX-512 VNNI kernels),
    /// no-panel, or exact (slow ground truth: dequantized weights times unquantized
    /// activations in f64); overrides BOYD_KERNELS. A set this CPU cannot run is refused.
    #[arg(long, global = true, value_parser = parse_kernels)]
    pub kernels: Option<crate::kernels::cpu::KernelChoice>,
}

/// `--kernels`: the names of [`KernelChoice::parse`](crate::kernels::cpu::KernelChoice::parse),
/// checked against this CPU's features.
pub fn parse_kernels(s: &str) -> Result<crate::kernels::cpu::KernelChoice, String> {
    use crate::kernels::cpu::{KernelChoice, Kernels};
    let has = |name: &str| Kernels::select(KernelChoice::Auto).name == name;
    let choice = KernelChoice::parse(s).ok_or_else(|| {
        format!("unknown kernel set {s:?}: use auto, scalar, avx2, vnni, no-panel or exact")
    })?;
    if matches!(s, "avx2" | "no-vnni" | "no-panel") && has("scalar") {
        return Err(format!(
            "this CPU lacks AVX2, FMA or F16C, so it runs only the scalar kernels; use \
             --kernels scalar (or auto), not {s}"
        ));
    }
    if s == "vnni" && !has("avx2+vnni") {
        return Err(
            "this CPU lacks AVX-512 VNNI (avx512vnni + avx512vl); use --kernels avx2 or scalar"
                .into(),
        );
    }
    Ok(choice)
}

/// boyd: a local-inference agent — run GGUF models, size and measure them, run agent loops.
#[derive(Debug, Parser)]
#[command(name = "boyd", version, about, long_about = None)]
pub struct Cli {
    /// Options shared by every subcommand.
    #[command(flatten)]
    pub global: GlobalOpts,
    /// More log output (-v info, -vv debug); RUST_LOG overrides.
    #[arg(long, short = 'v', global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Generate a reply to one prompt with the chat template applied, streaming tokens.
    Generate(generate::Args),
    /// Chat interactively; the KV cache is kept between turns.
    Chat(chat::Args),
    /// Speed tests (pp512, tg128, tg128 @ d2048) of boyd's decoder against the reference.
    Bench(bench::Args),
    /// The model catalog and store: list, pull, verify.
    Models(models::Args),
    /// Run an agent loop on a task with the in-process model, streaming each step.
    Run(run::Args),
    /// Run an agent task suite (JSONL) and report pass/fail per task and the success rate.
    Eval(eval::Args),
    /// List past agent runs or show one run's transcript.
    Runs(runs::Args),
    /// Continue an OODA run that paused, escalated or ran out of budget (optionally with an
    /// approval token for its pending action).
    Resume(resume::Args),
    /// Print an approval token (HMAC-SHA256, single use, with expiry) for one exact action of a run.
    Approve(approve::Args),
    /// What OODA runs remember per workspace: list, forget.
    Memory(memory::Args),
    /// Check a run's hash-chained audit log.
    Audit(audit::Args),
    /// Predict memory and speed of a model on a device: will it fit, with how much context,
    /// how fast.
    Size(size::Args),
    /// What hardware is here: CPU, SIMD, RAM, GPUs, measured memory bandwidth, build.
    Probe(probe::Args),
    /// Measure a model on this device, compare with the sizing prediction term by term, and
    /// calibrate the speed model for `boyd size --hw this`.
    Validate(validate::Args),
    /// Serve the in-process model over an OpenAI-compatible HTTP API (loopback by default).
    Serve(serve::Args),
    /// Sliding-window perplexity of the model over a text file (a numerics check).
    Perplexity(perplexity::Args),
}

impl Command {
    /// Whether the command only prints reports (no server socket, no tool processes, no
    /// files it could leave half written): such a command may end quietly when its reader
    /// goes away (`boyd runs show ID | head`), as Unix tools do.
    pub fn only_prints(&self) -> bool {
        matches!(
            self,
            Command::Runs(_)
                | Command::Models(_)
                | Command::Size(_)
                | Command::Probe(_)
                | Command::Audit(_)
                | Command::Approve(_)
        )
    }
}

/// Cancel `token` on the first Ctrl-C; a second Ctrl-C exits at once (status 130).
pub fn cancel_on_ctrl_c(token: &crate::lm::CancelToken) {
    let token = token.clone();
    let spawned = std::thread::Builder::new()
        .name("ctrl-c".into())
        .spawn(move || {
            let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return;
            };
            rt.block_on(async {
                if tokio::signal::ctrl_c().await.is_ok() {
                    token.cancel();
                    eprintln!("\n(cancelling; press Ctrl-C again to quit now)");
                    if tokio::signal::ctrl_c().await.is_ok() {
                        std::process::exit(130);
                    }
                }
            });
        });
    if let Err(e) = spawned {
        tracing::warn!("cannot watch for Ctrl-C: {e}");
    }
}

/// The runtime's tuning knobs from the environment (`BOYD_ENGINE`, `BOYD_KERNELS`,
/// `BOYD_PREFILL_CHUNK`), read here and passed down, with `--kv-dtype` and `--kernels`; with `BOYD_PROFILE=1`
/// the native engine's per-operation profile is printed on stderr when the model is dropped.
pub fn runtime_options(g: &GlobalOpts) -> crate::runtime::options::RuntimeOptions {
    use crate::runtime::options::{ProfileSink, RuntimeOptions};
    let mut opts = RuntimeOptions::from_env();
    if let Some(kv) = g.kv_dtype {
        opts.kv_dtype = kv;
    }
    if let Some(k) = g.kernels {
        opts.kernels = k;
    }
    if RuntimeOptions::profile_requested() {
        opts.profile = Some(ProfileSink(std::sync::Arc::new(|p| eprint!("{p}"))));
    }
    opts
}

/// Set up tracing to stderr; `RUST_LOG` wins over `-v`.
pub fn init_tracing(verbose: u8) {
    let default = match verbose {
        0 => "warn",
        1 => "info",
        _ => "debug",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}

/// Run one parsed command line.
pub fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    let g = cli.global;
    match cli.command {
        Command::Generate(args) => generate::run(args, &g),
        Command::Chat(args) => chat::run(args, &g),
        Command::Bench(args) => bench::run(args, &g),
        Command::Models(args) => models::run(args, &g),
        Command::Run(args) => run::run(args, &g),
        Command::Eval(args) => eval::run(args, &g),
        Command::Runs(args) => runs::run(args, &g),
        Command::Resume(args) => resume::run(args, &g),
        Command::Approve(args) => approve::run(args, &g),
        Command::Memory(args) => memory::run(args, &g),
        Command::Audit(args) => audit::run(args, &g),
        Command::Size(args) => size::run(args, &g),
        Command::Probe(args) => probe::run(args, &g),
        Command::Validate(args) => validate::run(args, &g),
        Command::Serve(args) => serve::run(args, &g),
        Command::Perplexity(args) => perplexity::run(args, &g),
    }
}

/// `s` on one line (whitespace runs collapsed to one space), cut to `max` characters with
/// an ellipsis: the cell the run, runs, memory and OODA printers show.
pub(crate) fn clip(s: &str, max: usize) -> String {
    let flat: String = s.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() > max {
        format!("{}…", flat.chars().take(max).collect::<String>())
    } else {
        flat
    }
}

/// An eval table's answer cell: the answer on one line, its first 40 characters, `-` when
/// there is none.
pub(crate) fn answer_cell(answer: Option<&str>) -> String {
    answer
        .unwrap_or("-")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .chars()
        .take(40)
        .collect()
}
