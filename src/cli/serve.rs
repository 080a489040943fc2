//! `boyd serve`: the in-process runtime behind an OpenAI-compatible HTTP API.

use std::process::ExitCode;

use anyhow::Context as _;

use super::GlobalOpts;
use crate::serve::{ServeOptions, Server};

/// Arguments of `boyd serve`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Address to listen on. Loopback by default; any other address exposes the model to the
    /// network (set --api-key-env then).
    #[arg(long, default_value = "127.0.0.1")]
    pub host: String,
    /// Port (0 picks a free one; the address is printed).
    #[arg(long, default_value_t = 8080)]
    pub port: u16,
    /// Context length in tokens (capped at the model's own).
    #[arg(long, default_value_t = 8192)]
    pub ctx: usize,
    /// Require `Authorization: Bearer <key>` with the key from this environment variable.
    #[arg(long, value_name = "VAR")]
    pub api_key_env: Option<String>,
    /// `max_tokens` for requests that give none (lowered to what the context leaves).
    #[arg(long, default_value_t = 1024)]
    pub default_max_tokens: usize,
    /// The model id `/v1/models` lists (default: the model's name).
    #[arg(long)]
    pub served_model_name: Option<String>,
}

/// Run `boyd serve`.
pub fn run(args: Args, g: &GlobalOpts) -> anyhow::Result<ExitCode> {
    if args.ctx == 0 || args.default_max_tokens == 0 {
        anyhow::bail!("--ctx and --default-max-tokens must be at least 1");
    }
    let api_key = match &args.api_key_env {
        Some(var) => Some(std::env::var(var).with_context(|| {
            format!("--api-key-env {var}: the environment variable {var} is not set")
        })?),
        None => None,
    };
    let loopback = matches!(args.host.as_str(), "127.0.0.1" | "::1" | "localhost");
    if !loopback && api_key.is_none() {
        eprintln!(
            "warning: serving on {} without an API key: anyone who can reach it can use the model (set --api-key-env)",
            args.host
        );
    }
    let (model, resolved) =
        super::generate::load_model(g, crate::catalog::AGENT_DEFAULT_MODEL, Some(args.ctx))?;
    let model_id = args.served_model_name.clone().unwrap_or_else(|| {
        resolved
            .path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| "boyd".into())
    });
    let opts = ServeOptions {
        model_id: model_id.clone(),
        api_key,
        default_max_tokens: args.default_max_tokens,
    };
    let server = Server::bind((args.host.as_str(), args.port), Box::new(model), opts)
        .with_context(|| format!("listening on {}:{}", args.host, args.port))?;
    let addr = server.local_addr()?;
    if g.json {
        println!(
            "{}",
            serde_json::json!({"listening": format!("http://{addr}"), "model": model_id})
        );
    } else {
        println!("boyd serve: model {model_id} on http://{addr}/v1 (Ctrl-C stops)");
    }
    use std::io::Write as _;
    let _ = std::io::stdout().flush();
    server.run()?;
    Ok(ExitCode::SUCCESS)
}
