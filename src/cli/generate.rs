//! `boyd generate "prompt"`: one chat turn, streamed to stdout; speed on stderr.

use std::io::Write;
use std::time::Instant;

use anyhow::Context;
use serde::Serialize;

use super::GlobalOpts;
use crate::catalog::{self, ResolvedModel};
use crate::lm::{CancelToken, ChatMessage, GenRequest, LanguageModel, Role, SamplingParams, Usage};
use crate::runtime::local::{LoadOptions, LocalModel};

/// Sampling flags shared by `generate` and `chat`.
#[derive(Debug, Clone, clap::Args)]
pub struct SamplingArgs {
    /// Softmax temperature; 0 is greedy decoding.
    #[arg(long, default_value_t = 0.7)]
    pub temperature: f32,
    /// Keep only the K most likely tokens (0 = off).
    #[arg(long, default_value_t = 40)]
    pub top_k: usize,
    /// Nucleus sampling: keep the smallest set of tokens with this much probability.
    #[arg(long, default_value_t = 0.95)]
    pub top_p: f32,
    /// Penalize tokens seen in the last --repeat-last-n tokens (1.0 = off).
    #[arg(long, default_value_t = 1.1)]
    pub repeat_penalty: f32,
    /// Window of the repetition penalty.
    #[arg(long, default_value_t = 64)]
    pub repeat_last_n: usize,
    /// Seed of the sampler; the same seed, prompt and model give the same output.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Most tokens to generate.
    #[arg(long, short = 'n', default_value_t = 256)]
    pub max_tokens: usize,
    /// Context size in tokens (default: the model's, capped at 4096).
    #[arg(long)]
    pub ctx: Option<usize>,
}

impl SamplingArgs {
    /// The sampler settings.
    pub fn params(&self) -> SamplingParams {
        SamplingParams {
            temperature: self.temperature,
            top_k: self.top_k,
            top_p: self.top_p,
            repeat_penalty: self.repeat_penalty,
            repeat_last_n: self.repeat_last_n,
            seed: self.seed,
        }
    }
}

/// Arguments of `boyd generate`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The user message.
    pub prompt: String,
    /// System message.
    #[arg(long)]
    pub system: Option<String>,
    /// Stop when the output contains this string (repeatable).
    #[arg(long)]
    pub stop: Vec<String>,
    /// Sampling.
    #[command(flatten)]
    pub sampling: SamplingArgs,
}

/// Resolve `--model` (or `default`), load it onto `--device`, and report where it came from
/// on stderr.
pub fn load_model(
    g: &GlobalOpts,
    default: &str,
    ctx: Option<usize>,
) -> anyhow::Result<(LocalModel, ResolvedModel)> {
    let auto = match g.model.as_deref() {
        Some(super::auto::AUTO) => Some(super::auto::choose(g, ctx.unwrap_or(4096))?),
        _ => None,
    };
    let spec = auto.as_deref().or(g.model.as_deref());
    let resolved = catalog::resolve_model(spec, default)
        .context("resolving the model (see `boyd models list`)")?;
    let device = crate::runtime::parse_device(&g.device)?;
    let t0 = Instant::now();
    let opts = LoadOptions {
        force: g.force,
        hardware: None,
        runtime: super::runtime_options(g),
    };
    let model = LocalModel::load_with(&resolved.path, &device, ctx.unwrap_or(4096), &opts)?;
    tracing::info!(
        path = %resolved.path.display(),
        from = %resolved.from,
        secs = t0.elapsed().as_secs_f64(),
        "model loaded"
    );
    Ok((model, resolved))
}

/// The `--json` record of one generation.
#[derive(Debug, Serialize)]
struct Record<'a> {
    model: String,
    path: String,
    text: &'a str,
    finish: crate::lm::FinishReason,
    usage: &'a Usage,
    prefill_tokens_per_s: f64,
    decode_tokens_per_s: f64,
}

/// Tokens per second, 0 when nothing was timed.
pub fn rate(tokens: usize, secs: f64) -> f64 {
    if secs > 0.0 {
        tokens as f64 / secs
    } else {
        0.0
    }
}

/// One-line speed summary for stderr.
pub fn summary(u: &Usage) -> String {
    format!(
        "prompt {} tok ({} reused, {} prefilled in {:.2}s, {:.1} tok/s) · generated {} tok in {:.2}s, {:.1} tok/s · KV {}",
        u.prompt_tokens,
        u.reused_tokens,
        u.prefilled_tokens,
        u.prefill_s,
        rate(u.prefilled_tokens, u.prefill_s),
        u.generated_tokens,
        u.decode_s,
        rate(u.generated_tokens, u.decode_s),
        crate::units::Bytes(u.kv_bytes),
    )
}

/// Run `boyd generate`.
pub fn run(args: Args, g: &GlobalOpts) -> anyhow::Result<std::process::ExitCode> {
    let (mut model, resolved) = load_model(g, catalog::AGENT_DEFAULT_MODEL, args.sampling.ctx)?;
    let mut messages = Vec::new();
    if let Some(s) = &args.system {
        messages.push(ChatMessage::new(Role::System, s.clone()));
    }
    messages.push(ChatMessage::new(Role::User, args.prompt.clone()));
    let req = GenRequest {
        messages,
        sampling: args.sampling.params(),
        max_tokens: args.sampling.max_tokens,
        stop: args.stop.clone(),
        constraint: None,
    };
    let cancel = CancelToken::new();
    super::cancel_on_ctrl_c(&cancel);
    let mut stdout = std::io::stdout().lock();
    let json = g.json;
    let mut write_err = None;
    let out = model.generate(
        &req,
        &mut |piece| {
            if !json && write_err.is_none() {
                if let Err(e) = stdout
                    .write_all(piece.as_bytes())
                    .and_then(|_| stdout.flush())
                {
                    write_err = Some(e);
                }
            }
        },
        &cancel,
    )?;
    if let Some(e) = write_err {
        return Err(e.into());
    }
    if json {
        let rec = Record {
            model: model.name(),
            path: resolved.path.display().to_string(),
            text: &out.text,
            finish: out.finish,
            usage: &out.usage,
            prefill_tokens_per_s: rate(out.usage.prefilled_tokens, out.usage.prefill_s),
            decode_tokens_per_s: rate(out.usage.generated_tokens, out.usage.decode_s),
        };
        serde_json::to_writer_pretty(&mut stdout, &rec)?;
        writeln!(stdout)?;
    } else {
        writeln!(stdout)?;
        eprintln!("{}", summary(&out.usage));
    }
    Ok(std::process::ExitCode::SUCCESS)
}
