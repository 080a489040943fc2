//! `boyd serve`: the in-process runtime behind an OpenAI-compatible HTTP API.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;

use super::GlobalOpts;
use crate::serve::{self, ServeLimits, ServeOptions, Server};

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
    /// Largest request body in bytes (a larger one is refused before it is read).
    #[arg(long, default_value_t = ServeLimits::default().max_body_bytes)]
    pub max_body: usize,
    /// Open connections at once. Over a cap, a new connection evicts the oldest connection that
    /// has not yet sent a request past the checks (Host, Origin, API key); it is closed at accept
    /// only when every open connection has.
    #[arg(long, default_value_t = serve::DEFAULT_MAX_CONNECTIONS)]
    pub max_connections: usize,
    /// Of --max-connections, slots kept for connections whose request passed the checks (with
    /// --api-key-env: carried the key); idle or half-sent connections never hold them.
    #[arg(long, value_name = "N", default_value_t = serve::DEFAULT_RESERVED_CONNECTIONS)]
    pub reserved_connections: usize,
    /// Connections from one address (an IPv6 client: one /64) that have not yet sent a request
    /// past the checks; a new one over it evicts that address's oldest.
    #[arg(long, value_name = "N", default_value_t = serve::DEFAULT_MAX_CONNECTIONS_PER_IP)]
    pub max_connections_per_ip: usize,
    /// Requests handled at once (more get HTTP 503).
    #[arg(long, default_value_t = ServeLimits::default().max_in_flight)]
    pub max_in_flight: usize,
    /// Generations waiting for the model (more get HTTP 503 with Retry-After).
    #[arg(long, default_value_t = ServeLimits::default().max_queued)]
    pub max_queued: usize,
    /// Seconds a client has to send the request headers, from connecting or from the end of the
    /// previous response: also the time an idle or kept-alive connection stays open. Idle and
    /// slowloris sockets are closed when it runs out.
    #[arg(long, value_name = "SECS", default_value_t = serve::DEFAULT_HEADER_TIMEOUT_SECS as f64)]
    pub header_timeout: f64,
    /// Seconds a client has to send the whole body.
    #[arg(long, value_name = "SECS", default_value_t = ServeLimits::default().body_timeout.as_secs_f64())]
    pub body_timeout: f64,
    /// Seconds from queueing a generation to its last token (then it stops; HTTP 504).
    #[arg(long, value_name = "SECS", default_value_t = ServeLimits::default().generation_timeout.as_secs_f64())]
    pub generation_timeout: f64,
    /// Seconds a response may wait for a client that stopped reading.
    #[arg(long, value_name = "SECS", default_value_t = ServeLimits::default().write_stall_timeout.as_secs_f64())]
    pub write_timeout: f64,
    /// Also accept this name in the Host header (the bound address and, on loopback,
    /// `localhost` always pass; others are refused against DNS rebinding). Repeatable.
    #[arg(long, value_name = "NAME")]
    pub allow_host: Vec<String>,
    /// Also accept requests from web pages at this origin (`https://app.example`); only
    /// loopback origins pass otherwise. Repeatable.
    #[arg(long, value_name = "URL")]
    pub allow_origin: Vec<String>,
}

fn secs(flag: &str, v: f64) -> anyhow::Result<Duration> {
    if !(v.is_finite() && v > 0.0 && v <= 1e6) {
        anyhow::bail!("--{flag} {v}: give a number of seconds above 0 (at most 1000000)");
    }
    Ok(Duration::from_secs_f64(v))
}

/// Run `boyd serve`.
pub fn run(args: Args, g: &GlobalOpts) -> anyhow::Result<ExitCode> {
    if args.ctx == 0 || args.default_max_tokens == 0 {
        anyhow::bail!("--ctx and --default-max-tokens must be at least 1");
    }
    if args.max_body == 0
        || args.max_connections == 0
        || args.max_connections_per_ip == 0
        || args.max_in_flight == 0
        || args.max_queued == 0
    {
        anyhow::bail!(
            "--max-body, --max-connections, --max-connections-per-ip, --max-in-flight and --max-queued must be at least 1"
        );
    }
    if args.reserved_connections >= args.max_connections {
        anyhow::bail!(
            "--reserved-connections {} must be below --max-connections {}: the rest is where new connections wait for their first request (lower the reserve or raise the cap)",
            args.reserved_connections,
            args.max_connections
        );
    }
    let limits = ServeLimits {
        max_body_bytes: args.max_body,
        max_connections: args.max_connections,
        reserved_connections: args.reserved_connections,
        max_connections_per_ip: args.max_connections_per_ip,
        max_in_flight: args.max_in_flight,
        max_queued: args.max_queued,
        header_timeout: secs("header-timeout", args.header_timeout)?,
        body_timeout: secs("body-timeout", args.body_timeout)?,
        generation_timeout: secs("generation-timeout", args.generation_timeout)?,
        write_stall_timeout: secs("write-timeout", args.write_timeout)?,
    };
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
        limits,
        allowed_hosts: args.allow_host.clone(),
        allowed_origins: args.allow_origin.clone(),
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
