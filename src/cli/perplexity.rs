//! `boyd perplexity FILE`: the sliding-window perplexity of the model over a text file.

use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use serde::Serialize;

use super::GlobalOpts;
use crate::catalog;
use crate::measure::perplexity::{self, Perplexity, PerplexityConfig};

/// Arguments of `boyd perplexity`.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Windows: the text is encoded without special tokens and cut into windows of --ctx positions \
whose starts are --stride tokens apart. Each window runs from an empty KV cache, with the \
model's BOS token in front when its tokenizer adds one (the BOS takes one of the --ctx \
positions). A window scores only the tokens no earlier window scored (the first window: all \
but its first token), so every token after the first is scored exactly once; with the default \
stride of ctx/2 each scored token sees at least ctx/2 tokens of context. Perplexity is \
exp(mean negative log-likelihood) of the scored tokens. Progress goes to stderr.")]
pub struct Args {
    /// The text file (UTF-8).
    pub file: PathBuf,
    /// Positions per window (the BOS included).
    #[arg(long, default_value_t = 512)]
    pub ctx: usize,
    /// Text tokens between window starts, less than the window's text tokens (default:
    /// ctx / 2).
    #[arg(long)]
    pub stride: Option<usize>,
    /// Tokens per forward call.
    #[arg(long, default_value_t = 64)]
    pub batch: usize,
    /// Use only the first N tokens of the text.
    #[arg(long)]
    pub limit: Option<usize>,
    /// Also write the text's token ids (a JSON array) here, for
    /// `benches/compare/perplexity.py`.
    #[arg(long)]
    pub tokens_out: Option<PathBuf>,
}

/// The `--json` record.
#[derive(Debug, Serialize)]
struct Record<'a> {
    model: String,
    path: String,
    text: String,
    engine: String,
    kv_dtype: String,
    #[serde(flatten)]
    result: &'a Perplexity,
}

/// Run `boyd perplexity`.
pub fn run(args: Args, g: &GlobalOpts) -> anyhow::Result<ExitCode> {
    let text = std::fs::read_to_string(&args.file)
        .with_context(|| format!("reading {} (a UTF-8 text file)", args.file.display()))?;
    anyhow::ensure!(
        args.ctx >= 3,
        "--ctx {} is too small: use at least 3 positions",
        args.ctx
    );
    let (model, resolved) = super::generate::load_model(g, catalog::DEFAULT_MODEL, Some(args.ctx))?;
    let tok = model.tokenizer();
    let mut tokens = tok
        .encode_with(&text, false, false)
        .context("tokenizing the text")?;
    if let Some(n) = args.limit {
        tokens.truncate(n);
    }
    if let Some(out) = &args.tokens_out {
        std::fs::write(out, serde_json::to_string(&tokens)?)
            .with_context(|| format!("writing {}", out.display()))?;
    }
    let bos = tok.add_bos().then(|| tok.bos_id()).flatten();
    let cfg = PerplexityConfig {
        ctx: args.ctx,
        stride: args.stride.unwrap_or(args.ctx / 2),
        batch: args.batch,
    };
    let decoder = model.session().decoder();
    eprintln!(
        "{} tokens, windows of {} positions, stride {} · engine {} · KV {}",
        tokens.len(),
        cfg.ctx,
        cfg.stride,
        decoder.engine_name(),
        decoder.kv_dtype(),
    );
    let mut progress = |done: usize, total: usize| {
        eprint!("\rwindow {done}/{total}");
        if done == total {
            eprintln!();
        }
    };
    let result = perplexity::perplexity(decoder, &tokens, bos, &cfg, &mut progress)?;
    let mut stdout = std::io::stdout().lock();
    if g.json {
        let rec = Record {
            model: model_name(&resolved),
            path: resolved.path.display().to_string(),
            text: args.file.display().to_string(),
            engine: decoder.engine_name(),
            kv_dtype: decoder.kv_dtype().to_string(),
            result: &result,
        };
        serde_json::to_writer_pretty(&mut stdout, &rec)?;
        writeln!(stdout)?;
    } else {
        writeln!(
            stdout,
            "perplexity {:.4} ± {:.4} (nll {:.5} ± {:.5}) over {} scored of {} tokens, {} windows · {:.1} tok/s",
            result.perplexity,
            result.perplexity * result.nll_stderr,
            result.nll,
            result.nll_stderr,
            result.scored,
            result.tokens,
            result.windows,
            result.tokens_per_s,
        )?;
    }
    Ok(ExitCode::SUCCESS)
}

fn model_name(r: &catalog::ResolvedModel) -> String {
    r.entry.as_ref().map(|e| e.name.clone()).unwrap_or_else(|| {
        r.path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default()
    })
}
