//! The HTTP side of `boyd serve`: the accept loop (the connection table of [`super::conns`],
//! hyper's header timeout and buffer cap, a write-stall deadline), the tower layers (in-flight
//! cap with load shedding, the header guard, the body limit) and the axum handlers.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::error_handling::HandleErrorLayer;
use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, Method, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, MethodRouter};
use axum::{BoxError, Router};
use hyper_util::rt::{TokioIo, TokioTimer};
use serde_json::{json, Value};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch};
use tokio::time::{sleep, timeout_at, Instant, Sleep};
use tower::{ServiceBuilder, ServiceExt as _};

use super::api::{finish_name, logprobs_json, parse_chat_request, usage_json, ApiError};
use super::conns::{Admission, ConnId, ConnTable};
use super::guard::{self, KeyCheck};
use super::worker::{Event, Job, Reply};
use super::{now_s, ServeLimits, ServeOptions, Stats};
use crate::lm::{CancelToken, GenOutput, TokenLogprob};

/// Largest request head hyper buffers (request line + headers); larger heads get 431.
const MAX_HEAD: usize = 64 * 1024;

/// What the handlers share.
pub(crate) struct Shared {
    opts: ServeOptions,
    key: Option<KeyCheck>,
    local: SocketAddr,
    context_length: usize,
    created: u64,
    next_id: AtomicU64,
    jobs: mpsc::Sender<Job>,
    pub(crate) stats: Arc<Stats>,
}

impl Shared {
    pub(crate) fn new(
        opts: ServeOptions,
        local: SocketAddr,
        context_length: usize,
        jobs: mpsc::Sender<Job>,
        stats: Arc<Stats>,
    ) -> Self {
        Self {
            key: opts.api_key.as_deref().map(KeyCheck::new),
            opts,
            local,
            context_length,
            created: now_s(),
            next_id: AtomicU64::new(1),
            jobs,
            stats,
        }
    }

    fn limits(&self) -> &ServeLimits {
        &self.opts.limits
    }
}

fn error(status: u16, code: &'static str, message: impl Into<String>) -> ApiError {
    ApiError {
        status,
        message: message.into(),
        kind: "invalid_request_error",
        code: Some(code),
    }
}

fn error_response(e: &ApiError) -> Response {
    let status = StatusCode::from_u16(e.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut r = (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        e.body().to_string(),
    )
        .into_response();
    if e.status == 503 {
        r.headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    }
    r
}

fn json_response(v: &Value) -> Response {
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json")],
        v.to_string(),
    )
        .into_response()
}

/// The routes with their layers, outermost first: load shedding over the in-flight cap (503),
/// the header guard, the body limit.
pub(crate) fn router(shared: Arc<Shared>) -> Router {
    let max_body = shared.limits().max_body_bytes;
    let in_flight = shared.limits().max_in_flight.max(1);
    let busy_stats = Arc::clone(&shared.stats);
    let routes = |m: MethodRouter<Arc<Shared>>| m.fallback(method_not_allowed);
    Router::new()
        .route("/health", routes(get(health)))
        .route("/health/", routes(get(health)))
        .route("/v1/models", routes(get(models)))
        .route("/v1/models/", routes(get(models)))
        .route("/v1/chat/completions", routes(post(chat)))
        .route("/v1/chat/completions/", routes(post(chat)))
        .fallback(not_found)
        .layer(
            ServiceBuilder::new()
                .layer(HandleErrorLayer::new(move |e: BoxError| {
                    let stats = Arc::clone(&busy_stats);
                    async move {
                        Stats::add(&stats.busy, 1);
                        error_response(&error(
                            503,
                            "server_busy",
                            format!(
                                "the server is handling {in_flight} requests; retry shortly ({e})"
                            ),
                        ))
                    }
                }))
                .load_shed()
                .layer(tower::limit::GlobalConcurrencyLimitLayer::new(in_flight))
                .layer(middleware::from_fn_with_state(Arc::clone(&shared), guard))
                .layer(tower_http::limit::RequestBodyLimitLayer::new(max_body)),
        )
        .with_state(shared)
}

/// Refuse on headers alone, before anything reads the body. A request that passes makes its
/// connection trusted (it keeps its slot; see [`super::conns`]).
async fn guard(State(sh): State<Arc<Shared>>, req: Request, next: Next) -> Response {
    Stats::add(&sh.stats.requests, 1);
    match check_headers(&sh, &req) {
        Ok(()) => {
            if let Some(conn) = req.extensions().get::<ConnId>() {
                conn.trust();
            }
            next.run(req).await
        }
        Err(e) => {
            Stats::add(&sh.stats.refused, 1);
            tracing::info!(method = %req.method(), path = %req.uri().path(), status = e.status, "refused: {}", e.message);
            error_response(&e)
        }
    }
}

fn check_headers(sh: &Shared, req: &Request) -> Result<(), ApiError> {
    let h = req.headers();
    let text = |name: header::HeaderName| h.get(name).map(|v| v.to_str().unwrap_or("\u{fffd}"));
    let host = text(header::HOST).unwrap_or("");
    if !guard::host_allowed(host, sh.local, &sh.opts.allowed_hosts) {
        return Err(error(
            403,
            "host_not_allowed",
            format!(
                "the Host header {host:?} is not this server's address ({}); requests for other names are refused against DNS rebinding (serve a name with --allow-host NAME)",
                sh.local
            ),
        ));
    }
    if let Some(origin) = text(header::ORIGIN) {
        if !guard::origin_allowed(origin, &sh.opts.allowed_origins) {
            return Err(error(
                403,
                "origin_not_allowed",
                format!(
                    "requests from web pages at {origin:?} are refused; only loopback origins may call this server (allow one with --allow-origin URL)"
                ),
            ));
        }
    }
    if let Some(key) = &sh.key {
        if !key.authorizes(h.get(header::AUTHORIZATION).map(HeaderValue::as_bytes)) {
            return Err(error(
                401,
                "invalid_api_key",
                "Incorrect API key provided (send Authorization: Bearer <key>)",
            ));
        }
    }
    if req.method() == Method::POST {
        let ct = text(header::CONTENT_TYPE).unwrap_or("");
        if !guard::is_json(ct) {
            return Err(error(
                415,
                "unsupported_media_type",
                format!(
                    "POST bodies must be JSON: send Content-Type: application/json (got {ct:?})"
                ),
            ));
        }
    }
    let max = sh.limits().max_body_bytes;
    if let Some(len) = text(header::CONTENT_LENGTH) {
        match len.trim().parse::<u64>() {
            Ok(n) if n > max as u64 => {
                return Err(error(
                    413,
                    "request_too_large",
                    format!(
                    "the body of {n} bytes is over this server's limit of {max} bytes (--max-body)"
                ),
                ))
            }
            Ok(_) => {}
            Err(_) => {
                return Err(error(
                    400,
                    "bad_content_length",
                    format!("Content-Length {len:?} is not a number"),
                ))
            }
        }
    }
    Ok(())
}

async fn method_not_allowed(req: Request) -> Response {
    error_response(&error(
        405,
        "method_not_allowed",
        format!("{} is not allowed on {}", req.method(), req.uri().path()),
    ))
}

async fn not_found(req: Request) -> Response {
    error_response(&error(
        404,
        "not_found",
        format!(
            "no route {} {}; this server has GET /v1/models and POST /v1/chat/completions",
            req.method(),
            req.uri().path()
        ),
    ))
}

async fn health() -> Response {
    json_response(&json!({"status": "ok"}))
}

async fn models(State(sh): State<Arc<Shared>>) -> Response {
    json_response(&json!({"object": "list", "data": [{
        "id": sh.opts.model_id,
        "object": "model",
        "created": sh.created,
        "owned_by": "boyd",
        "max_model_len": sh.context_length,
    }]}))
}

/// Whether a body error is the size limit (ours or tower-http's), anywhere in its sources.
fn is_length_limit(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut cur = Some(e);
    while let Some(err) = cur {
        if err.is::<http_body_util::LengthLimitError>() {
            return true;
        }
        cur = err.source();
    }
    false
}

/// Cancels the generation when dropped: the handler future or the response stream goes away
/// when the client does, and so the model stops at its next token.
struct CancelOnDrop(CancelToken);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.cancel();
    }
}

async fn read_body(sh: &Shared, body: Body) -> Result<Bytes, ApiError> {
    let l = sh.limits();
    let deadline = Instant::now() + l.body_timeout;
    match timeout_at(deadline, axum::body::to_bytes(body, l.max_body_bytes)).await {
        Err(_) => Err(error(
            408,
            "request_timeout",
            format!(
                "the body did not arrive within {} s",
                l.body_timeout.as_secs_f64()
            ),
        )),
        Ok(Err(e)) if is_length_limit(&e) => Err(error(
            413,
            "request_too_large",
            format!(
                "the body is over this server's limit of {} bytes (--max-body)",
                l.max_body_bytes
            ),
        )),
        Ok(Err(e)) => Err(error(400, "bad_body", format!("reading the body: {e}"))),
        Ok(Ok(b)) => Ok(b),
    }
}

/// What the stream of a streamed reply needs to write its chunks.
struct ChunkMeta {
    id: String,
    created: u64,
    model: String,
    include_usage: bool,
    /// Whether the request asked for log-probabilities.
    logprobs: bool,
}

impl ChunkMeta {
    fn chunk(&self, delta: Value, finish: Option<&str>) -> Bytes {
        self.chunk_with(delta, Value::Null, finish)
    }

    fn chunk_with(&self, delta: Value, logprobs: Value, finish: Option<&str>) -> Bytes {
        event(&json!({
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": [{"index": 0, "delta": delta, "logprobs": logprobs, "finish_reason": finish}],
        }))
    }

    /// A chunk of text with the log-probabilities of its tokens, when the request asked.
    fn piece(&self, text: &str, logprobs: &[TokenLogprob]) -> Bytes {
        let l = if self.logprobs {
            logprobs_json(logprobs)
        } else {
            Value::Null
        };
        self.chunk_with(json!({ "content": text }), l, None)
    }

    fn tail(&self, out: &GenOutput, q: &mut VecDeque<Bytes>) {
        q.push_back(self.chunk(json!({}), Some(finish_name(out.finish))));
        if self.include_usage {
            q.push_back(event(&json!({
                "id": self.id,
                "object": "chat.completion.chunk",
                "created": self.created,
                "model": self.model,
                "choices": [],
                "usage": usage_json(out),
            })));
        }
        q.push_back(Bytes::from_static(b"data: [DONE]\n\n"));
    }
}

fn event(v: &Value) -> Bytes {
    Bytes::from(format!("data: {v}\n\n"))
}

fn generation_timeout(l: &ServeLimits) -> ApiError {
    ApiError {
        status: 504,
        message: format!(
            "the generation did not finish within {} s (--generation-timeout)",
            l.generation_timeout.as_secs_f64()
        ),
        kind: "server_error",
        code: Some("generation_timeout"),
    }
}

fn worker_gone() -> ApiError {
    ApiError {
        status: 500,
        message: "the model worker stopped".into(),
        kind: "server_error",
        code: None,
    }
}

async fn chat(State(sh): State<Arc<Shared>>, req: Request) -> Response {
    let body = match read_body(&sh, req.into_body()).await {
        Ok(b) => b,
        Err(e) => return error_response(&e),
    };
    let creq = match parse_chat_request(&body, sh.opts.default_max_tokens) {
        Ok(r) => r,
        Err(e) => return error_response(&e),
    };
    drop(body);
    let meta = ChunkMeta {
        id: format!(
            "chatcmpl-boyd-{}-{}",
            sh.created,
            sh.next_id.fetch_add(1, Ordering::Relaxed)
        ),
        created: now_s(),
        model: sh.opts.model_id.clone(),
        include_usage: creq.include_usage,
        logprobs: creq.logprobs.is_some(),
    };
    let stream = creq.stream;
    let cancel = CancelToken::new();
    let on_drop = CancelOnDrop(cancel.clone());
    let (tx, mut rx) = mpsc::unbounded_channel();
    let job = Job {
        req: creq,
        stream,
        cancel: cancel.clone(),
        events: tx,
    };
    if let Err(e) = sh.jobs.try_send(job) {
        return match e {
            mpsc::error::TrySendError::Full(_) => {
                Stats::add(&sh.stats.busy, 1);
                error_response(&error(
                    503,
                    "server_busy",
                    format!(
                        "{} generations are already waiting for the model; retry shortly",
                        sh.limits().max_queued
                    ),
                ))
            }
            mpsc::error::TrySendError::Closed(_) => error_response(&worker_gone()),
        };
    }
    let deadline = Instant::now() + sh.limits().generation_timeout;
    // The first event decides between a plain HTTP reply (an error before any text, or a whole
    // completion) and an event stream.
    let first = loop {
        match timeout_at(deadline, rx.recv()).await {
            Err(_) => {
                cancel.cancel();
                return error_response(&generation_timeout(sh.limits()));
            }
            Ok(None) => return error_response(&worker_gone()),
            Ok(Some(piece @ Event::Piece(..))) if stream => break piece,
            Ok(Some(Event::Piece(..))) => continue,
            Ok(Some(done @ Event::Done(_))) => break done,
        }
    };
    if !stream {
        return match first {
            Event::Done(Ok(Reply { out, logprobs })) => json_response(&json!({
                "id": meta.id,
                "object": "chat.completion",
                "created": meta.created,
                "model": meta.model,
                "choices": [{
                    "index": 0,
                    "message": {"role": "assistant", "content": out.text},
                    "logprobs": logprobs.as_deref().map(logprobs_json),
                    "finish_reason": finish_name(out.finish),
                }],
                "usage": usage_json(&out),
            })),
            Event::Done(Err(e)) => error_response(&e),
            Event::Piece(..) => error_response(&worker_gone()),
        };
    }
    let mut pending = VecDeque::new();
    pending.push_back(meta.chunk(json!({"role": "assistant", "content": ""}), None));
    let done = match first {
        Event::Done(Err(e)) => return error_response(&e),
        Event::Done(Ok(reply)) => {
            meta.tail(&reply.out, &mut pending);
            true
        }
        Event::Piece(p, l) => {
            pending.push_back(meta.piece(&p, &l));
            false
        }
    };
    let state = SseState {
        rx,
        _on_drop: on_drop,
        deadline,
        pending,
        done,
        meta,
        timeout: generation_timeout(sh.limits()),
    };
    let body = futures_util::stream::unfold(state, next_event);
    Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, "text/event-stream")
        .header(header::CACHE_CONTROL, "no-cache")
        .body(Body::from_stream(body))
        .unwrap_or_else(|_| error_response(&worker_gone()))
}

/// The state of a streamed reply; dropping it (the client left) cancels the generation.
struct SseState {
    rx: mpsc::UnboundedReceiver<Event>,
    _on_drop: CancelOnDrop,
    deadline: Instant,
    pending: VecDeque<Bytes>,
    done: bool,
    meta: ChunkMeta,
    timeout: ApiError,
}

async fn next_event(mut st: SseState) -> Option<(Result<Bytes, Infallible>, SseState)> {
    loop {
        if let Some(b) = st.pending.pop_front() {
            return Some((Ok(b), st));
        }
        if st.done {
            return None;
        }
        st.done = true;
        match timeout_at(st.deadline, st.rx.recv()).await {
            Err(_) => {
                st._on_drop.0.cancel();
                st.pending.push_back(event(&st.timeout.body()));
            }
            Ok(None) => st.pending.push_back(event(&worker_gone().body())),
            Ok(Some(Event::Piece(p, l))) => {
                st.done = false;
                st.pending.push_back(st.meta.piece(&p, &l));
            }
            Ok(Some(Event::Done(Ok(reply)))) => st.meta.tail(&reply.out, &mut st.pending),
            Ok(Some(Event::Done(Err(e)))) => st.pending.push_back(event(&e.body())),
        }
    }
}

/// A socket whose writes fail once the client has not taken any bytes for `limit`, so a
/// client that stops reading cannot hold its connection forever.
struct WriteDeadline<T> {
    io: T,
    limit: Duration,
    stalled: Option<Pin<Box<Sleep>>>,
}

impl<T> WriteDeadline<T> {
    fn new(io: T, limit: Duration) -> Self {
        Self {
            io,
            limit,
            stalled: None,
        }
    }

    fn on_write<R>(&mut self, cx: &mut Context<'_>, r: Poll<io::Result<R>>) -> Poll<io::Result<R>> {
        match r {
            Poll::Ready(r) => {
                self.stalled = None;
                Poll::Ready(r)
            }
            Poll::Pending => {
                let limit = self.limit;
                let s = self.stalled.get_or_insert_with(|| Box::pin(sleep(limit)));
                match s.as_mut().poll(cx) {
                    Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        "the client stopped reading the response",
                    ))),
                    Poll::Pending => Poll::Pending,
                }
            }
        }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for WriteDeadline<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for WriteDeadline<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.io).poll_write(cx, buf);
        self.on_write(cx, r)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.io).poll_write_vectored(cx, bufs);
        self.on_write(cx, r)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let r = Pin::new(&mut self.io).poll_flush(cx);
        self.on_write(cx, r)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

/// Counts an open connection for as long as it lives.
struct OpenConnection(Arc<Stats>);

impl Drop for OpenConnection {
    fn drop(&mut self) {
        self.0.connections_open.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Accept connections until `stop` says so; each runs on its own task under the caps.
pub(crate) async fn accept_loop(
    listener: TcpListener,
    shared: Arc<Shared>,
    mut stop: watch::Receiver<bool>,
) {
    let limits = shared.limits().clone();
    let stats = Arc::clone(&shared.stats);
    let app = router(shared);
    let table = ConnTable::new(&limits, Arc::clone(&stats));
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .max_buf_size(MAX_HEAD)
        .keep_alive(true);
    loop {
        let accepted = tokio::select! {
            r = stop.changed() => {
                if r.is_err() || *stop.borrow() {
                    return;
                }
                continue;
            }
            a = listener.accept() => a,
        };
        let (tcp, peer) = match accepted {
            Ok(c) => c,
            Err(e) => {
                // Out of file descriptors and the like: back off instead of spinning.
                tracing::warn!("accept failed: {e}");
                sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let (slot, evicted) = match table.admit(peer.ip()) {
            Admission::Open(slot, evicted) => (slot, evicted),
            Admission::Refused => {
                tracing::debug!(%peer, "connection refused: no untrusted connection to make room");
                drop(tcp);
                continue;
            }
        };
        let _ = tcp.set_nodelay(true);
        Stats::add(&stats.connections_open, 1);
        let open = OpenConnection(Arc::clone(&stats));
        let io = TokioIo::new(WriteDeadline::new(tcp, limits.write_stall_timeout));
        let conn_id = slot.id();
        let service = hyper_util::service::TowerToHyperService::new(app.clone().map_request(
            move |mut req: Request<hyper::body::Incoming>| {
                req.extensions_mut().insert(conn_id.clone());
                req
            },
        ));
        let conn = http.serve_connection(io, service);
        tokio::spawn(async move {
            let _slot = slot;
            let _open = open;
            tokio::select! {
                r = conn => {
                    if let Err(e) = r {
                        tracing::debug!(%peer, "connection ended: {e}");
                    }
                }
                Ok(()) = evicted => {
                    tracing::debug!(%peer, "untrusted connection evicted for a newer one");
                }
            }
        });
    }
}
