//! `boyd serve`: one `LanguageModel` (normally the in-process runtime) behind an
//! OpenAI-compatible HTTP API, so other agent frameworks can use boyd's runtime.
//!
//! Routes: `GET /v1/models`, `POST /v1/chat/completions` (whole or streamed as server-sent
//! events, with `stream_options.include_usage`), `GET /health`. Structured output is accepted as
//! `response_format` (`json_schema`, `json_object`), llama-server's `json_schema` and vLLM's
//! `guided_json`, and becomes the runtime's grammar mask.
//!
//! Design decision: one model, one request at a time (a mutex), each connection on its own
//! thread. The runtime session keeps its KV cache between requests and reuses the longest cached
//! token prefix, so the next turn of a conversation only prefills its new tokens; the reuse is
//! reported as `usage.prompt_tokens_details.cached_tokens`.

pub mod http;

use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};

use crate::lm::{
    CancelToken, ChatMessage, Constraint, FinishReason, GenOutput, GenRequest, LanguageModel,
    LmError, Role, SamplingParams,
};

/// How the server behaves.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// The id `/v1/models` lists (requests may name any model; there is only one).
    pub model_id: String,
    /// Require `Authorization: Bearer <key>` when set.
    pub api_key: Option<String>,
    /// `max_tokens` when a request gives none (capped to what the context leaves).
    pub default_max_tokens: usize,
}

/// A request the server refuses, with the OpenAI error shape.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    /// HTTP status.
    pub status: u16,
    /// Message for the client.
    pub message: String,
    /// OpenAI `error.type`.
    pub kind: &'static str,
    /// OpenAI `error.code`.
    pub code: Option<&'static str>,
}

impl ApiError {
    fn bad(message: impl Into<String>) -> Self {
        Self {
            status: 400,
            message: message.into(),
            kind: "invalid_request_error",
            code: None,
        }
    }

    /// The JSON body.
    pub fn body(&self) -> Value {
        json!({"error": {"message": self.message, "type": self.kind, "param": null, "code": self.code}})
    }
}

impl From<LmError> for ApiError {
    fn from(e: LmError) -> Self {
        match e {
            LmError::ContextExceeded {
                prompt,
                max_new,
                context,
            } => ApiError {
                status: 400,
                message: format!(
                    "This model's maximum context length is {context} tokens. However, you requested {} tokens ({prompt} in the messages, {max_new} in the completion). Please reduce the length of the messages or completion.",
                    prompt + max_new
                ),
                kind: "invalid_request_error",
                code: Some("context_length_exceeded"),
            },
            LmError::Constraint(m) => ApiError::bad(format!("response_format: {m}")),
            other => ApiError {
                status: 500,
                message: other.to_string(),
                kind: "server_error",
                code: None,
            },
        }
    }
}

/// A parsed chat completion request.
#[derive(Debug, Clone, PartialEq)]
pub struct ChatRequest {
    /// What the runtime gets.
    pub gen: GenRequest,
    /// Whether `max_tokens` was given (otherwise it may be lowered to fit the context).
    pub max_tokens_given: bool,
    /// Stream as server-sent events.
    pub stream: bool,
    /// Send a final usage chunk when streaming.
    pub include_usage: bool,
    /// The model the client named.
    pub model: String,
}

fn content_text(v: &Value) -> Result<String, ApiError> {
    match v {
        Value::Null => Ok(String::new()),
        Value::String(s) => Ok(s.clone()),
        Value::Array(parts) => {
            let mut s = String::new();
            for p in parts {
                match (p.get("type").and_then(Value::as_str), p.get("text")) {
                    (Some("text"), Some(Value::String(t))) => s.push_str(t),
                    (t, _) => {
                        return Err(ApiError::bad(format!(
                        "content part of type {t:?} is not supported; this server takes text only"
                    )))
                    }
                }
            }
            Ok(s)
        }
        _ => Err(ApiError::bad(
            "message content must be a string or a list of text parts",
        )),
    }
}

fn role(s: &str) -> Result<Role, ApiError> {
    Ok(match s {
        "system" | "developer" => Role::System,
        "user" => Role::User,
        "assistant" => Role::Assistant,
        "tool" | "function" => Role::Tool,
        other => return Err(ApiError::bad(format!("unknown message role {other:?}"))),
    })
}

/// Parse a `/v1/chat/completions` body.
pub fn parse_chat_request(body: &[u8], default_max_tokens: usize) -> Result<ChatRequest, ApiError> {
    let v: Value = serde_json::from_slice(body)
        .map_err(|e| ApiError::bad(format!("the body is not JSON: {e}")))?;
    let Some(obj) = v.as_object() else {
        return Err(ApiError::bad("the body must be a JSON object"));
    };
    let msgs = obj
        .get("messages")
        .and_then(Value::as_array)
        .ok_or_else(|| ApiError::bad("`messages` (a non-empty list) is required"))?;
    if msgs.is_empty() {
        return Err(ApiError::bad("`messages` must not be empty"));
    }
    let mut messages = Vec::with_capacity(msgs.len());
    for m in msgs {
        let r = m
            .get("role")
            .and_then(Value::as_str)
            .ok_or_else(|| ApiError::bad("every message needs a string `role`"))?;
        let content = content_text(m.get("content").unwrap_or(&Value::Null))?;
        messages.push(ChatMessage::new(role(r)?, content));
    }
    let num = |k: &str| obj.get(k).filter(|x| !x.is_null());
    let f = |k: &str, d: f64, lo: f64, hi: f64| -> Result<f64, ApiError> {
        match num(k) {
            None => Ok(d),
            Some(x) => x
                .as_f64()
                .filter(|x| x.is_finite() && *x >= lo && *x <= hi)
                .ok_or_else(|| ApiError::bad(format!("`{k}` must be a number in [{lo}, {hi}]"))),
        }
    };
    if num("n").and_then(Value::as_u64).is_some_and(|n| n != 1) {
        return Err(ApiError::bad("only n = 1 is supported"));
    }
    let max_tokens = match num("max_completion_tokens").or_else(|| num("max_tokens")) {
        None => None,
        Some(x) => Some(
            x.as_u64()
                .filter(|n| *n >= 1 && *n <= 1 << 20)
                .ok_or_else(|| ApiError::bad("`max_tokens` must be a positive integer"))?
                as usize,
        ),
    };
    let mut sampling = SamplingParams {
        temperature: f("temperature", 1.0, 0.0, 2.0)? as f32,
        top_p: f("top_p", 1.0, 0.0, 1.0)? as f32,
        ..SamplingParams::default()
    };
    if sampling.top_p == 0.0 {
        sampling.top_p = 1.0;
        sampling.temperature = 0.0;
    }
    if let Some(k) = num("top_k") {
        sampling.top_k = k
            .as_u64()
            .ok_or_else(|| ApiError::bad("`top_k` must be a non-negative integer"))?
            as usize;
    }
    if let Some(s) = num("seed") {
        sampling.seed = s
            .as_u64()
            .or_else(|| s.as_i64().map(|x| x as u64))
            .ok_or_else(|| ApiError::bad("`seed` must be an integer"))?;
    }
    let rp = num("repeat_penalty").or_else(|| num("repetition_penalty"));
    if let Some(p) = rp {
        sampling.repeat_penalty = p
            .as_f64()
            .filter(|x| x.is_finite() && *x > 0.0)
            .ok_or_else(|| ApiError::bad("`repetition_penalty` must be a positive number"))?
            as f32;
    }
    let stop = match num("stop") {
        None => Vec::new(),
        Some(Value::String(s)) => vec![s.clone()],
        Some(Value::Array(a)) => a
            .iter()
            .map(|s| {
                s.as_str()
                    .map(str::to_string)
                    .ok_or_else(|| ApiError::bad("`stop` must be a string or a list of strings"))
            })
            .collect::<Result<_, _>>()?,
        Some(_) => {
            return Err(ApiError::bad(
                "`stop` must be a string or a list of strings",
            ))
        }
    };
    let constraint = if let Some(rf) = num("response_format") {
        match rf.get("type").and_then(Value::as_str) {
            Some("text") | None => None,
            Some("json_object") => Some(Constraint::JsonSchema(json!({"type": "object"}))),
            Some("json_schema") => {
                let s = rf
                    .pointer("/json_schema/schema")
                    .or_else(|| rf.get("schema"))
                    .ok_or_else(|| {
                        ApiError::bad("response_format json_schema needs `json_schema.schema`")
                    })?;
                Some(Constraint::JsonSchema(s.clone()))
            }
            Some(t) => {
                return Err(ApiError::bad(format!(
                    "response_format type {t:?} is not supported"
                )))
            }
        }
    } else if let Some(s) = num("json_schema").or_else(|| num("guided_json")) {
        Some(Constraint::JsonSchema(s.clone()))
    } else {
        None
    };
    Ok(ChatRequest {
        gen: GenRequest {
            messages,
            sampling,
            max_tokens: max_tokens.unwrap_or(default_max_tokens),
            stop,
            constraint,
        },
        max_tokens_given: max_tokens.is_some(),
        stream: num("stream").and_then(Value::as_bool).unwrap_or(false),
        include_usage: obj
            .get("stream_options")
            .and_then(|o| o.get("include_usage"))
            .and_then(Value::as_bool)
            .unwrap_or(false),
        model: num("model")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
    })
}

/// The OpenAI name of a finish reason.
pub fn finish_name(f: FinishReason) -> &'static str {
    match f {
        FinishReason::Length => "length",
        _ => "stop",
    }
}

fn usage_json(out: &GenOutput) -> Value {
    let u = &out.usage;
    json!({
        "prompt_tokens": u.prompt_tokens,
        "completion_tokens": u.generated_tokens,
        "total_tokens": u.prompt_tokens + u.generated_tokens,
        "prompt_tokens_details": {"cached_tokens": u.reused_tokens},
    })
}

struct State {
    model: Mutex<Box<dyn LanguageModel + Send>>,
    opts: ServeOptions,
    context_length: usize,
    created: u64,
    next_id: AtomicU64,
    stop: AtomicBool,
}

/// A bound server.
pub struct Server {
    listener: TcpListener,
    state: Arc<State>,
}

/// A server running on its own thread.
pub struct ServerHandle {
    addr: SocketAddr,
    state: Arc<State>,
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

    /// Stop accepting and wait for the accept loop to end.
    pub fn shutdown(mut self) {
        self.stop_now();
    }

    fn stop_now(&mut self) {
        self.state.stop.store(true, Ordering::SeqCst);
        // Wake the blocking accept.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
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
    /// Bind `addr` (`127.0.0.1:8080`; port 0 picks a free one) serving `model`.
    pub fn bind(
        addr: impl ToSocketAddrs,
        model: Box<dyn LanguageModel + Send>,
        opts: ServeOptions,
    ) -> std::io::Result<Self> {
        let listener = TcpListener::bind(addr)?;
        let context_length = model.context_length();
        Ok(Self {
            listener,
            state: Arc::new(State {
                model: Mutex::new(model),
                opts,
                context_length,
                created: now_s(),
                next_id: AtomicU64::new(1),
                stop: AtomicBool::new(false),
            }),
        })
    }

    /// The address it listens on.
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serve until the process ends (or `ServerHandle::shutdown` for a spawned one).
    pub fn run(self) -> std::io::Result<()> {
        for conn in self.listener.incoming() {
            if self.state.stop.load(Ordering::SeqCst) {
                break;
            }
            let stream = match conn {
                Ok(s) => s,
                Err(e) => {
                    tracing::warn!("accept failed: {e}");
                    continue;
                }
            };
            let state = Arc::clone(&self.state);
            let spawned = std::thread::Builder::new()
                .name("serve-conn".into())
                .spawn(move || handle_connection(stream, &state));
            if let Err(e) = spawned {
                tracing::warn!("cannot start a connection thread: {e}");
            }
        }
        Ok(())
    }

    /// Serve on a background thread.
    pub fn spawn(self) -> std::io::Result<ServerHandle> {
        let addr = self.local_addr()?;
        let state = Arc::clone(&self.state);
        let thread = std::thread::Builder::new()
            .name("serve-accept".into())
            .spawn(move || {
                if let Err(e) = self.run() {
                    tracing::warn!("server stopped: {e}");
                }
            })?;
        Ok(ServerHandle {
            addr,
            state,
            thread: Some(thread),
        })
    }
}

fn send_error(stream: &mut TcpStream, e: &ApiError) {
    let _ = http::respond(
        stream,
        e.status,
        "application/json",
        e.body().to_string().as_bytes(),
    );
}

fn handle_connection(mut stream: TcpStream, state: &State) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(60)));
    let _ = stream.set_nodelay(true);
    let req = match stream
        .try_clone()
        .map_err(http::HttpError::Io)
        .and_then(http::read_request)
    {
        Ok(r) => r,
        Err(http::HttpError::Closed) => return,
        Err(e) => {
            let status = if matches!(e, http::HttpError::TooLarge(_)) {
                413
            } else {
                400
            };
            send_error(
                &mut stream,
                &ApiError {
                    status,
                    message: e.to_string(),
                    kind: "invalid_request_error",
                    code: None,
                },
            );
            return;
        }
    };
    tracing::info!(method = %req.method, path = %req.path, "request");
    if let Some(key) = &state.opts.api_key {
        let ok = req
            .header("authorization")
            .and_then(|h| h.strip_prefix("Bearer "))
            .is_some_and(|k| k.trim() == key);
        if !ok {
            send_error(
                &mut stream,
                &ApiError {
                    status: 401,
                    message: "Incorrect API key provided (send Authorization: Bearer <key>)".into(),
                    kind: "invalid_request_error",
                    code: Some("invalid_api_key"),
                },
            );
            return;
        }
    }
    let path = req.path.trim_end_matches('/');
    match (req.method.as_str(), path) {
        ("GET", "/health") => {
            let _ = http::respond(&mut stream, 200, "application/json", br#"{"status":"ok"}"#);
        }
        ("GET", "/v1/models") => {
            let body = json!({"object": "list", "data": [{
                "id": state.opts.model_id,
                "object": "model",
                "created": state.created,
                "owned_by": "boyd",
                "max_model_len": state.context_length,
            }]});
            let _ = http::respond(
                &mut stream,
                200,
                "application/json",
                body.to_string().as_bytes(),
            );
        }
        ("POST", "/v1/chat/completions") => chat(&mut stream, state, &req.body),
        (_, "/v1/models" | "/v1/chat/completions" | "/health") => send_error(
            &mut stream,
            &ApiError {
                status: 405,
                message: format!("{} is not allowed on {}", req.method, req.path),
                kind: "invalid_request_error",
                code: None,
            },
        ),
        _ => send_error(
            &mut stream,
            &ApiError {
                status: 404,
                message: format!(
                    "no route {} {}; this server has GET /v1/models and POST /v1/chat/completions",
                    req.method, req.path
                ),
                kind: "invalid_request_error",
                code: None,
            },
        ),
    }
}

/// Generate for `req`; when `max_tokens` was not given and the context is too small for the
/// default, retry with what the context leaves.
fn generate(
    model: &mut dyn LanguageModel,
    req: &mut ChatRequest,
    on_text: &mut dyn FnMut(&str),
    cancel: &CancelToken,
) -> Result<GenOutput, LmError> {
    match model.generate(&req.gen, on_text, cancel) {
        Err(LmError::ContextExceeded {
            prompt, context, ..
        }) if !req.max_tokens_given && prompt < context => {
            req.gen.max_tokens = context - prompt;
            model.generate(&req.gen, on_text, cancel)
        }
        other => other,
    }
}

fn chat(stream: &mut TcpStream, state: &State, body: &[u8]) {
    let mut req = match parse_chat_request(body, state.opts.default_max_tokens) {
        Ok(r) => r,
        Err(e) => return send_error(stream, &e),
    };
    let id = format!(
        "chatcmpl-boyd-{}-{}",
        state.created,
        state.next_id.fetch_add(1, Ordering::Relaxed)
    );
    let created = now_s();
    let model_id = state.opts.model_id.clone();
    let mut guard = match state.model.lock() {
        Ok(g) => g,
        Err(poisoned) => poisoned.into_inner(),
    };
    let cancel = CancelToken::new();
    if !req.stream {
        let out = match generate(guard.as_mut(), &mut req, &mut |_| {}, &cancel) {
            Ok(o) => o,
            Err(e) => return send_error(stream, &ApiError::from(e)),
        };
        drop(guard);
        let body = json!({
            "id": id,
            "object": "chat.completion",
            "created": created,
            "model": model_id,
            "choices": [{
                "index": 0,
                "message": {"role": "assistant", "content": out.text},
                "finish_reason": finish_name(out.finish),
            }],
            "usage": usage_json(&out),
        });
        let _ = http::respond(stream, 200, "application/json", body.to_string().as_bytes());
        return;
    }
    let chunk = |delta: Value, finish: Option<&str>| {
        json!({
            "id": id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model_id,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        })
        .to_string()
    };
    // Headers go out with the first piece, so an error before any text is a plain HTTP error.
    let mut started = false;
    let mut broken = false;
    let mut on_text = |piece: &str| {
        if broken {
            return;
        }
        let mut write = || -> std::io::Result<()> {
            if !started {
                http::start_events(stream)?;
                http::event(
                    stream,
                    &chunk(json!({"role": "assistant", "content": ""}), None),
                )?;
                started = true;
            }
            http::event(stream, &chunk(json!({"content": piece}), None))
        };
        if write().is_err() {
            // The client went away: stop generating.
            broken = true;
            cancel.cancel();
        }
    };
    let result = generate(guard.as_mut(), &mut req, &mut on_text, &cancel);
    drop(guard);
    if broken {
        return;
    }
    let out = match result {
        Ok(o) => o,
        Err(e) if !started => return send_error(stream, &ApiError::from(e)),
        Err(e) => {
            let _ = http::event(stream, &ApiError::from(e).body().to_string());
            return;
        }
    };
    let mut tail = || -> std::io::Result<()> {
        if !started {
            http::start_events(stream)?;
            http::event(
                stream,
                &chunk(json!({"role": "assistant", "content": ""}), None),
            )?;
        }
        http::event(stream, &chunk(json!({}), Some(finish_name(out.finish))))?;
        if req.include_usage {
            let u = json!({
                "id": id,
                "object": "chat.completion.chunk",
                "created": created,
                "model": model_id,
                "choices": [],
                "usage": usage_json(&out),
            });
            http::event(stream, &u.to_string())?;
        }
        http::event(stream, "[DONE]")
    };
    let _ = tail();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_openai_and_engine_specific_fields() {
        let b = br#"{"model":"x","messages":[{"role":"developer","content":"s"},{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}],
            "max_tokens":7,"temperature":0,"stop":"END","stream":true,"stream_options":{"include_usage":true},
            "response_format":{"type":"json_schema","json_schema":{"name":"a","schema":{"type":"object"}}}}"#;
        let r = parse_chat_request(b, 100).expect("parse");
        assert_eq!(r.gen.messages[0].role, Role::System);
        assert_eq!(r.gen.messages[1].content, "ab");
        assert_eq!(r.gen.max_tokens, 7);
        assert!(r.max_tokens_given && r.stream && r.include_usage);
        assert_eq!(r.gen.stop, ["END"]);
        assert_eq!(r.gen.sampling.temperature, 0.0);
        assert_eq!(
            r.gen.constraint,
            Some(Constraint::JsonSchema(json!({"type": "object"})))
        );
        let b = br#"{"messages":[{"role":"user","content":"q"}],"guided_json":{"type":"string"}}"#;
        let r = parse_chat_request(b, 100).expect("parse");
        assert_eq!(r.gen.max_tokens, 100);
        assert!(!r.max_tokens_given && !r.stream);
        assert_eq!(r.gen.sampling.temperature, 1.0, "OpenAI's default");
        assert_eq!(
            r.gen.constraint,
            Some(Constraint::JsonSchema(json!({"type": "string"})))
        );
    }

    #[test]
    fn bad_requests_are_400s_with_a_reason() {
        for (body, needle) in [
            (&b"nope"[..], "not JSON"),
            (br#"{"messages":[]}"#, "empty"),
            (br#"{"messages":[{"role":"wizard","content":"x"}]}"#, "role"),
            (
                br#"{"messages":[{"role":"user","content":"x"}],"temperature":9}"#,
                "temperature",
            ),
            (
                br#"{"messages":[{"role":"user","content":"x"}],"n":3}"#,
                "n = 1",
            ),
            (
                br#"{"messages":[{"role":"user","content":[{"type":"image_url"}]}]}"#,
                "text only",
            ),
            (
                br#"{"messages":[{"role":"user","content":"x"}],"max_tokens":0}"#,
                "max_tokens",
            ),
        ] {
            let e = parse_chat_request(body, 10).expect_err("bad");
            assert_eq!(e.status, 400);
            assert!(e.message.contains(needle), "{} lacks {needle}", e.message);
        }
    }

    #[test]
    fn context_errors_use_the_openai_code_and_wording() {
        let e = ApiError::from(LmError::ContextExceeded {
            prompt: 900,
            max_new: 200,
            context: 1024,
        });
        assert_eq!(e.code, Some("context_length_exceeded"));
        assert!(e.message.contains("maximum context length is 1024"));
        let v = e.body();
        assert!(crate::remote::is_context_error(&e.message, Some(&v)));
    }
}
