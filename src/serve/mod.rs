//! `boyd serve`: one `LanguageModel` (normally the in-process runtime) behind an
//! OpenAI-compatible HTTP API, so other agent frameworks can use boyd's runtime.
//!
//! Routes: `GET /v1/models`, `POST /v1/chat/completions` (whole or streamed as server-sent
//! events, with `stream_options.include_usage`), `GET /health`. Structured output is accepted as
//! `response_format` (`json_schema`, `json_object`), llama-server's `json_schema` and vLLM's
//! `guided_json`, and becomes the runtime's grammar mask. `logprobs` / `top_logprobs` (0 to 20)
//! add `choices[].logprobs.content` (each token's text, bytes, log-probability and the most
//! likely alternatives, from the log-softmax of the raw logits before any sampling setting),
//! whole or per streamed chunk.
//!
//! Design decision: HTTP is axum on hyper (HTTP/1) on a small tokio runtime; the model lives on
//! one worker thread that takes generation jobs from a bounded queue (see [`worker`]), so a slow
//! or hostile client costs a task and a few kilobytes, never the model. What a client can hold
//! is capped ([`ServeLimits`]): connections, requests in flight, queued generations, head and
//! body size, and time for the head, the body, the generation and each stalled write.
//! Connections that have not yet sent a request past the guard (idle sockets, slowloris heads)
//! are capped per address and overall, and give their slots up to newer connections, oldest
//! first, while slots reserved for connections whose requests passed the guard (the API key
//! when one is set) stay free for them (see [`conns`]); so hundreds of idle or trickling
//! sockets cannot keep a legitimate client out. Every
//! request passes [`guard`] on its headers alone before its body is read: the `Host` must be
//! this server's address (DNS rebinding), a browser `Origin` must be loopback, the API key is
//! compared in constant time, and POST bodies must be declared JSON. A generation stops when its
//! client goes away. The runtime session keeps its KV cache between requests and reuses the
//! longest cached token prefix, reported as `usage.prompt_tokens_details.cached_tokens`.

mod api;
mod app;
mod conns;
pub mod guard;
mod worker;

pub use api::{finish_name, parse_chat_request, ApiError, ChatRequest};

use std::net::{SocketAddr, TcpListener, ToSocketAddrs};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::lm::LanguageModel;

/// Default [`ServeLimits::max_connections`].
pub const DEFAULT_MAX_CONNECTIONS: usize = 512;
/// Default [`ServeLimits::reserved_connections`].
pub const DEFAULT_RESERVED_CONNECTIONS: usize = 64;
/// Default [`ServeLimits::max_connections_per_ip`].
pub const DEFAULT_MAX_CONNECTIONS_PER_IP: usize = 256;
/// Default [`ServeLimits::header_timeout`] (seconds).
pub const DEFAULT_HEADER_TIMEOUT_SECS: u64 = 10;

/// What one client may hold, and for how long.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServeLimits {
    /// Largest request body (bytes); a bigger `Content-Length` is refused before reading.
    pub max_body_bytes: usize,
    /// Open connections at once. A new connection over a cap evicts the oldest *untrusted*
    /// connection (one none of whose requests has passed the header guard yet); it is closed at
    /// accept only when every open connection is trusted.
    pub max_connections: usize,
    /// Of `max_connections`, slots only trusted connections may hold: untrusted connections
    /// are capped at `max_connections - reserved_connections` (at least 1).
    pub reserved_connections: usize,
    /// Untrusted connections from one client address (an IPv6 client counts by its /64); a
    /// new one over it evicts that address's oldest. Trusted connections do not count.
    pub max_connections_per_ip: usize,
    /// Requests being handled at once (reading bodies, waiting, generating); more get 503.
    pub max_in_flight: usize,
    /// Generations waiting for the model; more get 503 with `Retry-After`.
    pub max_queued: usize,
    /// Time to send the request line and headers, counted from the connection's start or the
    /// end of the previous response; so it is also the idle time of an open or kept-alive
    /// connection. A slowloris head or an idle socket is closed when it runs out.
    pub header_timeout: Duration,
    /// Time to send the whole body once the headers are in.
    pub body_timeout: Duration,
    /// Time from queueing a generation to its last token.
    pub generation_timeout: Duration,
    /// Longest time a response write may wait for a client that does not read.
    pub write_stall_timeout: Duration,
}

impl Default for ServeLimits {
    fn default() -> Self {
        Self {
            max_body_bytes: 4 << 20,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            reserved_connections: DEFAULT_RESERVED_CONNECTIONS,
            max_connections_per_ip: DEFAULT_MAX_CONNECTIONS_PER_IP,
            max_in_flight: 128,
            max_queued: 16,
            header_timeout: Duration::from_secs(DEFAULT_HEADER_TIMEOUT_SECS),
            body_timeout: Duration::from_secs(30),
            generation_timeout: Duration::from_secs(600),
            write_stall_timeout: Duration::from_secs(30),
        }
    }
}

/// How the server behaves.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// The id `/v1/models` lists (requests may name any model; there is only one).
    pub model_id: String,
    /// Require `Authorization: Bearer <key>` when set.
    pub api_key: Option<String>,
    /// `max_tokens` when a request gives none (capped to what the context leaves).
    pub default_max_tokens: usize,
    /// Caps and timeouts.
    pub limits: ServeLimits,
    /// Host names (without port) accepted in the `Host` header besides the bound address
    /// (and `localhost` on loopback).
    pub allowed_hosts: Vec<String>,
    /// Browser origins (`https://app.example`) accepted besides loopback ones.
    pub allowed_origins: Vec<String>,
}

impl ServeOptions {
    /// Defaults for a model called `model_id`: no key, 1024 default tokens, default limits.
    pub fn new(model_id: impl Into<String>) -> Self {
        Self {
            model_id: model_id.into(),
            api_key: None,
            default_max_tokens: 1024,
            limits: ServeLimits::default(),
            allowed_hosts: Vec::new(),
            allowed_origins: Vec::new(),
        }
    }
}

/// Counters of what the server did (for tests, logs and the attack suite).
#[derive(Debug, Default)]
pub(crate) struct Stats {
    requests: AtomicU64,
    refused: AtomicU64,
    busy: AtomicU64,
    connections_open: AtomicU64,
    connections_refused: AtomicU64,
    connections_evicted: AtomicU64,
    generations: AtomicU64,
    generations_cancelled: AtomicU64,
    generated_tokens: AtomicU64,
    skipped_jobs: AtomicU64,
}

impl Stats {
    fn add(c: &AtomicU64, n: u64) {
        c.fetch_add(n, Ordering::Relaxed);
    }

    fn snapshot(&self) -> ServeStats {
        let g = |c: &AtomicU64| c.load(Ordering::Relaxed);
        ServeStats {
            requests: g(&self.requests),
            refused: g(&self.refused),
            busy: g(&self.busy),
            connections_open: g(&self.connections_open),
            connections_refused: g(&self.connections_refused),
            connections_evicted: g(&self.connections_evicted),
            generations: g(&self.generations),
            generations_cancelled: g(&self.generations_cancelled),
            generated_tokens: g(&self.generated_tokens),
            skipped_jobs: g(&self.skipped_jobs),
        }
    }
}

/// A snapshot of the server's counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ServeStats {
    /// Requests whose head was read.
    pub requests: u64,
    /// Requests refused by the header checks (host, origin, key, content type, size).
    pub refused: u64,
    /// Requests refused because the in-flight or queue cap was reached (503).
    pub busy: u64,
    /// Connections open now.
    pub connections_open: u64,
    /// Connections closed at accept because `max_connections` trusted connections were open.
    pub connections_refused: u64,
    /// Untrusted connections closed to make room for newer ones (see
    /// [`ServeLimits::max_connections`]).
    pub connections_evicted: u64,
    /// Generations the model ran.
    pub generations: u64,
    /// Generations stopped early (client gone or generation timeout).
    pub generations_cancelled: u64,
    /// Tokens generated, over all generations (cancelled ones included).
    pub generated_tokens: u64,
    /// Queued jobs dropped unrun because their client had gone.
    pub skipped_jobs: u64,
}

/// A bound server.
pub struct Server {
    listener: TcpListener,
    runtime: tokio::runtime::Runtime,
    shared: Arc<app::Shared>,
}

/// A server running on its own thread; dropping it stops the server.
pub struct ServerHandle {
    addr: SocketAddr,
    shared: Arc<app::Shared>,
    stop: Option<tokio::sync::watch::Sender<bool>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl ServerHandle {
    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://addr`.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The counters now.
    pub fn stats(&self) -> ServeStats {
        self.shared.stats.snapshot()
    }

    /// Stop accepting, drop open connections and wait for the server thread to end.
    pub fn shutdown(mut self) {
        self.stop_now();
    }

    fn stop_now(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(true);
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for ServerHandle {
    fn drop(&mut self) {
        self.stop_now();
    }
}

fn now_s() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

impl Server {
    /// Bind `addr` (`127.0.0.1:8080`; port 0 picks a free one) serving `model`; starts the
    /// model's worker thread.
    pub fn bind(
        addr: impl ToSocketAddrs,
        model: Box<dyn LanguageModel + Send>,
        opts: ServeOptions,
    ) -> std::io::Result<Self> {
        let listener = TcpListener::bind(addr)?;
        listener.set_nonblocking(true)?;
        let local = listener.local_addr()?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("serve")
            .enable_all()
            .build()?;
        let stats = Arc::new(Stats::default());
        let context_length = model.context_length();
        let jobs = worker::spawn(model, opts.limits.max_queued.max(1), Arc::clone(&stats))?;
        let shared = Arc::new(app::Shared::new(opts, local, context_length, jobs, stats));
        Ok(Self {
            listener,
            runtime,
            shared,
        })
    }

    /// The address it listens on.
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serve until the process ends.
    pub fn run(self) -> std::io::Result<()> {
        let (_keep, stop) = tokio::sync::watch::channel(false);
        self.run_until(stop)
    }

    fn run_until(self, stop: tokio::sync::watch::Receiver<bool>) -> std::io::Result<()> {
        let Server {
            listener,
            runtime,
            shared,
        } = self;
        let result = runtime.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener)?;
            app::accept_loop(listener, shared, stop).await;
            Ok(())
        });
        // Open connections end with the runtime.
        runtime.shutdown_timeout(Duration::from_secs(1));
        result
    }

    /// Serve on a background thread.
    pub fn spawn(self) -> std::io::Result<ServerHandle> {
        let addr = self.local_addr()?;
        let shared = Arc::clone(&self.shared);
        let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
        let thread = std::thread::Builder::new()
            .name("serve-accept".into())
            .spawn(move || {
                if let Err(e) = self.run_until(stop_rx) {
                    tracing::warn!("server stopped: {e}");
                }
            })?;
        Ok(ServerHandle {
            addr,
            shared,
            stop: Some(stop_tx),
            thread: Some(thread),
        })
    }
}
