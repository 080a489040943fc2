//! `OpenAiModel`: a `LanguageModel` behind an OpenAI-compatible HTTP server (vLLM, llama.cpp's
//! llama-server, TGI, Ollama, `boyd serve`).
//!
//! It speaks `POST {base}/v1/chat/completions` with `stream: true` (server-sent events), reads
//! usage from the final chunk (`usage`, llama-server's `timings`, OpenAI's
//! `prompt_tokens_details.cached_tokens`) and maps HTTP failures to typed [`RemoteError`]s.
//!
//! Design decision: output constraints go to the server, not to a local mask. A
//! `Constraint::JsonSchema` is sent as the dialect the server understands (`response_format`
//! JSON schema, llama-server's `json_schema`, vLLM's `guided_json`). In `auto` mode a server that
//! rejects structured output (HTTP 400/422 naming it) is remembered as having none; from then on
//! the request goes out unconstrained and the reply is checked for one JSON object, asking again
//! (with a corrective message) up to `parse_retries` times before handing the text to the agent's
//! tolerant parser. Transient failures (connection refused, timeouts, 429, 5xx) are retried with
//! exponential backoff, but never once text has been streamed to the caller.
//!
//! Every read from the server is bounded: a whole reply (or a whole stream) by
//! `max_reply_bytes`, one line of an event stream by `max_line_bytes`, and an error body by
//! [`ERROR_BODY_LIMIT`] (read that far, the rest ignored). A reply over a limit is the typed
//! [`RemoteError::TooLarge`], never an unbounded allocation.
//!
//! Files: this one holds the configuration, connecting, the request body and the retry policy
//! of a generation; `http` requests, bounded reads and the mapping of HTTP failures to
//! [`RemoteError`]; `stream` one streamed completion (server-sent events, `sse`); `error` the
//! error type and the parsing of servers' error messages.

mod error;
mod http;
pub mod sse;
mod stream;

use std::time::Duration;

use serde_json::{json, Value};

use crate::lm::{
    BackendError, CancelToken, ChatMessage, Constraint, FinishReason, GenOutput, GenRequest,
    LanguageModel, LmError, Role, Usage,
};

use error::is_structured_rejection;
pub use error::{is_context_error, RemoteError};

/// Which structured-output dialect requests carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Structured {
    /// `response_format` JSON schema plus the llama-server and vLLM fields; if the server
    /// rejects them, fall back to unconstrained requests with JSON checks and retries.
    #[default]
    Auto,
    /// Only the OpenAI `response_format: {type: json_schema}`.
    ResponseFormat,
    /// Only llama-server's top-level `json_schema` field.
    LlamaServer,
    /// Only vLLM's `guided_json` field.
    Vllm,
    /// Never send a constraint (the tolerant parser and retries do the work).
    None,
}

/// How to reach and talk to the server.
#[derive(Debug, Clone)]
pub struct RemoteConfig {
    /// Base URL, with or without a trailing `/v1` (`http://127.0.0.1:8080`).
    pub base_url: String,
    /// Bearer token (from the environment variable named by `--api-key-env`).
    pub api_key: Option<String>,
    /// Model id sent in requests; `None`: the first id `/v1/models` lists.
    pub model: Option<String>,
    /// Connection timeout.
    pub connect_timeout: Duration,
    /// Longest silence while reading a response (between streamed chunks).
    pub read_timeout: Duration,
    /// Retries of transient failures (connection, timeout, 429, 5xx).
    pub retries: u32,
    /// First backoff; doubles per retry, capped at 8 s (a `Retry-After` header wins).
    pub backoff: Duration,
    /// Structured-output dialect.
    pub structured: Structured,
    /// Extra attempts when an unconstrained reply holds no JSON object.
    pub parse_retries: u32,
    /// Context length to assume when the server does not say.
    pub context_length: Option<usize>,
    /// Largest reply read from the server: one JSON body, or all the events of one stream.
    pub max_reply_bytes: usize,
    /// Longest line of an event stream (one `data:` line).
    pub max_line_bytes: usize,
}

/// How much of an error reply's body is read for its message.
pub const ERROR_BODY_LIMIT: usize = 64 * 1024;

impl RemoteConfig {
    /// Defaults for `base_url`.
    pub fn new(base_url: impl Into<String>) -> Self {
        Self {
            base_url: base_url.into(),
            api_key: None,
            model: None,
            connect_timeout: Duration::from_secs(10),
            read_timeout: Duration::from_secs(300),
            retries: 3,
            backoff: Duration::from_millis(500),
            structured: Structured::Auto,
            parse_retries: 2,
            context_length: None,
            max_reply_bytes: 64 << 20,
            max_line_bytes: 4 << 20,
        }
    }
}

/// The text of the first JSON object in `text`, if any parses.
pub fn contains_json_object(text: &str) -> bool {
    let Some(start) = text.find('{') else {
        return false;
    };
    let mut de = serde_json::Deserializer::from_str(&text[start..]).into_iter::<Value>();
    matches!(de.next(), Some(Ok(Value::Object(_))))
}

/// A model behind an OpenAI-compatible server.
#[derive(Debug, Clone)]
pub struct OpenAiModel {
    config: RemoteConfig,
    agent: ureq::Agent,
    /// `{base}/v1`.
    api: String,
    model: String,
    context_length: usize,
    /// Cleared when the server rejected structured output (auto mode).
    structured_ok: bool,
    /// Requests sent (attempts included).
    pub requests: u64,
}

/// The `/v1` root of a base URL.
fn api_root(base: &str) -> Result<String, RemoteError> {
    let b = base.trim().trim_end_matches('/');
    if !(b.starts_with("http://") || b.starts_with("https://")) || b.len() < 9 {
        return Err(RemoteError::BadUrl { url: base.into() });
    }
    Ok(if b.ends_with("/v1") {
        b.to_string()
    } else {
        format!("{b}/v1")
    })
}

/// The OpenAI wire form of a role.
fn wire_role(r: Role) -> &'static str {
    r.as_str()
}

impl OpenAiModel {
    /// Connect: check the URL, list the server's models (which also checks reachability and the
    /// key), pick the model and learn the context length where the server reports it.
    pub fn connect(config: RemoteConfig) -> Result<Self, RemoteError> {
        let api = api_root(&config.base_url)?;
        let agent = ureq::AgentBuilder::new()
            .timeout_connect(config.connect_timeout)
            .timeout_read(config.read_timeout)
            .build();
        let mut m = Self {
            model: config.model.clone().unwrap_or_default(),
            context_length: config.context_length.unwrap_or(8192),
            structured_ok: config.structured != Structured::None,
            config,
            agent,
            api,
            requests: 0,
        };
        let models = m.with_retries(|m| m.get_json("/models"))?;
        let list = models
            .get("data")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        if m.model.is_empty() {
            m.model = list
                .first()
                .and_then(|e| e.get("id"))
                .and_then(Value::as_str)
                .ok_or_else(|| RemoteError::Protocol {
                    url: format!("{}/models", m.api),
                    detail: "GET /v1/models lists no model; pass --model".into(),
                })?
                .to_string();
        }
        let entry = list
            .iter()
            .find(|e| e.get("id").and_then(Value::as_str) == Some(m.model.as_str()))
            .or_else(|| list.first());
        if m.config.context_length.is_none() {
            // vLLM: max_model_len; llama-server: meta.n_ctx (the slot's context).
            if let Some(n) = entry.and_then(|e| {
                e.get("max_model_len")
                    .or_else(|| e.pointer("/meta/n_ctx"))
                    .or_else(|| e.get("context_length"))
                    .and_then(Value::as_u64)
            }) {
                m.context_length = n as usize;
            }
        }
        tracing::info!(api = %m.api, model = %m.model, ctx = m.context_length, "remote model");
        Ok(m)
    }

    /// The model id requests carry.
    pub fn model_id(&self) -> &str {
        &self.model
    }

    /// Whether structured output is still being sent (false after a rejection in auto mode).
    pub fn structured_output(&self) -> bool {
        self.structured_ok
    }

    /// The JSON body of a chat completion request.
    pub fn body(&self, req: &GenRequest, messages: &[ChatMessage], constrained: bool) -> Value {
        let msgs: Vec<Value> = messages
            .iter()
            .map(|m| json!({"role": wire_role(m.role), "content": m.content}))
            .collect();
        let s = &req.sampling;
        let mut b = json!({
            "model": self.model,
            "messages": msgs,
            "max_tokens": req.max_tokens,
            "temperature": s.temperature,
            "top_p": s.top_p,
            "seed": s.seed,
            "stream": true,
            "stream_options": {"include_usage": true},
        });
        if s.top_k > 0 {
            b["top_k"] = json!(s.top_k);
        }
        if s.repeat_penalty != 1.0 {
            b["repeat_penalty"] = json!(s.repeat_penalty);
            b["repetition_penalty"] = json!(s.repeat_penalty);
        }
        if !req.stop.is_empty() {
            b["stop"] = json!(req.stop);
        }
        if let (true, Some(Constraint::JsonSchema(schema))) = (constrained, &req.constraint) {
            let rf =
                json!({"type": "json_schema", "json_schema": {"name": "action", "schema": schema}});
            match self.config.structured {
                Structured::Auto => {
                    b["response_format"] = rf;
                    b["json_schema"] = schema.clone();
                    b["guided_json"] = schema.clone();
                }
                Structured::ResponseFormat => b["response_format"] = rf,
                Structured::LlamaServer => b["json_schema"] = schema.clone(),
                Structured::Vllm => b["guided_json"] = schema.clone(),
                Structured::None => {}
            }
        }
        b
    }

    /// One request with retries (transient errors, before any text was streamed).
    fn generate_once(
        &mut self,
        req: &GenRequest,
        messages: &[ChatMessage],
        on_text: &mut dyn FnMut(&str),
        cancel: &CancelToken,
    ) -> Result<GenOutput, RemoteError> {
        let mut backoff = http::Backoff::new(self.config.backoff, self.config.retries);
        loop {
            let constrained = self.structured_ok && req.constraint.is_some();
            let body = self.body(req, messages, constrained);
            let mut emitted = false;
            match self.stream_once(&body, on_text, cancel, &mut emitted) {
                Ok(out) => return Ok(out),
                Err((
                    RemoteError::Http {
                        status, message, ..
                    },
                    _,
                )) if constrained
                    && self.config.structured == Structured::Auto
                    && matches!(status, 400 | 422)
                    && is_structured_rejection(&message) =>
                {
                    tracing::warn!(
                        "the server rejected structured output ({message}); continuing without it (tolerant parsing with retries)"
                    );
                    self.structured_ok = false;
                }
                // Never once text has reached the caller.
                Err((e, retry_after)) => {
                    if emitted || !backoff.retry(&e, retry_after) {
                        return Err(e);
                    }
                }
            }
        }
    }
}

/// The corrective message sent when an unconstrained reply held no JSON object.
pub const JSON_RETRY_MESSAGE: &str =
    "Your reply was not one JSON object. Reply with exactly ONE JSON object in the format above and nothing else.";

impl LanguageModel for OpenAiModel {
    fn generate(
        &mut self,
        req: &GenRequest,
        on_text: &mut dyn FnMut(&str),
        cancel: &CancelToken,
    ) -> Result<GenOutput, LmError> {
        let mut messages = req.messages.clone();
        let mut total = Usage::default();
        let mut tries = 0;
        loop {
            let out = self.generate_once(req, &messages, on_text, cancel)?;
            total.prompt_tokens += out.usage.prompt_tokens;
            total.reused_tokens += out.usage.reused_tokens;
            total.prefilled_tokens += out.usage.prefilled_tokens;
            total.generated_tokens += out.usage.generated_tokens;
            total.prefill_s += out.usage.prefill_s;
            total.decode_s += out.usage.decode_s;
            total.context_used = out.usage.context_used;
            let needs_json = matches!(req.constraint, Some(Constraint::JsonSchema(_)))
                && !self.structured_ok
                && out.finish != FinishReason::Cancelled;
            if !needs_json || contains_json_object(&out.text) || tries >= self.config.parse_retries
            {
                return Ok(GenOutput {
                    text: out.text,
                    finish: out.finish,
                    usage: total,
                });
            }
            tries += 1;
            tracing::info!(
                "reply held no JSON object; asking again ({tries}/{})",
                self.config.parse_retries
            );
            messages.push(ChatMessage::new(Role::Assistant, out.text));
            messages.push(ChatMessage::new(Role::User, JSON_RETRY_MESSAGE));
        }
    }

    fn context_length(&self) -> usize {
        self.context_length
    }

    fn name(&self) -> String {
        format!("{} @ {}", self.model, self.api)
    }
}

#[cfg(test)]
mod tests {
    use std::io::{BufRead, BufReader, Read};

    use super::error::{context_numbers, error_message};
    use super::*;

    #[test]
    fn api_root_adds_v1_once_and_refuses_non_http() {
        assert_eq!(
            api_root("http://127.0.0.1:8080").ok(),
            Some("http://127.0.0.1:8080/v1".into())
        );
        assert_eq!(
            api_root("http://h:1/v1/").ok(),
            Some("http://h:1/v1".into())
        );
        assert!(matches!(
            api_root("127.0.0.1:8080"),
            Err(RemoteError::BadUrl { .. })
        ));
    }

    #[test]
    fn context_errors_of_three_servers_are_recognised_with_numbers() {
        let llama = r#"{"error":{"code":400,"message":"request (9030 tokens) exceeds the available context size (8192 tokens), try increasing it","type":"exceed_context_size_error","n_prompt_tokens":9030,"n_ctx":8192}}"#;
        let (m, v) = error_message(llama);
        assert!(is_context_error(&m, v.as_ref()));
        assert_eq!(context_numbers(&m, v.as_ref()), (Some(9030), Some(8192)));
        let vllm = r#"{"object":"error","message":"This model's maximum context length is 2048 tokens. However, you requested 3000 tokens (2900 in the messages, 100 in the completion). Please reduce the length of the messages or completion.","type":"BadRequestError","code":400}"#;
        let (m, v) = error_message(vllm);
        assert!(is_context_error(&m, v.as_ref()));
        assert_eq!(context_numbers(&m, v.as_ref()), (Some(2900), Some(2048)));
        let other = r#"{"error":{"message":"invalid temperature","type":"invalid_request_error"}}"#;
        let (m, v) = error_message(other);
        assert!(!is_context_error(&m, v.as_ref()));
    }

    #[test]
    fn status_errors_are_typed() {
        let mut cfg = RemoteConfig::new("http://127.0.0.1:9");
        cfg.model = Some("m".into());
        let m = OpenAiModel {
            agent: ureq::AgentBuilder::new().build(),
            api: "http://127.0.0.1:9/v1".into(),
            model: "m".into(),
            context_length: 8192,
            structured_ok: true,
            config: cfg,
            requests: 0,
        };
        let e = m.status_error("u", 401, r#"{"error":{"message":"Invalid API Key"}}"#);
        assert!(matches!(e, RemoteError::Unauthorized { status: 401, .. }));
        assert!(e.to_string().contains("--api-key-env"), "{e}");
        assert!(!e.is_transient());
        let e = m.status_error("u", 503, "busy");
        assert!(e.is_transient(), "{e}");
        let e = m.status_error(
            "u",
            400,
            r#"{"error":{"message":"response_format is not supported"}}"#,
        );
        assert!(matches!(e, RemoteError::Http { status: 400, .. }));
        let lm: LmError = m
            .status_error(
                "u",
                400,
                r#"{"error":{"message":"request (9030 tokens) exceeds the available context size (8192 tokens)","n_prompt_tokens":9030,"n_ctx":8192}}"#,
            )
            .into();
        assert!(
            matches!(
                lm,
                LmError::ContextExceeded {
                    prompt: 9030,
                    context: 8192,
                    ..
                }
            ),
            "{lm:?}"
        );
    }

    #[test]
    fn json_object_detection() {
        assert!(contains_json_object(
            "Sure: {\"thought\": \"x\", \"tool\": \"t\", \"args\": {}} done"
        ));
        assert!(!contains_json_object("The answer is 42."));
        assert!(!contains_json_object("{not json"));
    }

    /// A one-shot server: answers each connection, in order, with one of `replies` (whole
    /// HTTP responses), ignoring what the client sends after the request head and body.
    fn canned_server(replies: Vec<Vec<u8>>) -> String {
        use std::io::Write;
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = l.local_addr().expect("addr");
        std::thread::spawn(move || {
            for reply in replies {
                let Ok((mut s, _)) = l.accept() else { return };
                let mut r = BufReader::new(s.try_clone().expect("clone"));
                let mut len = 0usize;
                let mut line = String::new();
                while r.read_line(&mut line).is_ok_and(|n| n > 0) {
                    let l = line.to_ascii_lowercase();
                    if let Some(v) = l.strip_prefix("content-length:") {
                        len = v.trim().parse().unwrap_or(0);
                    }
                    if line == "\r\n" {
                        break;
                    }
                    line.clear();
                }
                let _ = (&mut r).take(len as u64).read_to_end(&mut Vec::new());
                let _ = s.write_all(&reply);
            }
        });
        format!("http://{addr}")
    }

    fn reply(status: &str, content_type: &str, body: &[u8]) -> Vec<u8> {
        let mut r = format!(
            "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            body.len()
        )
        .into_bytes();
        r.extend_from_slice(body);
        r
    }

    const MODELS: &[u8] = br#"{"data":[{"id":"m","max_model_len":64}]}"#;

    fn small_config(url: String) -> RemoteConfig {
        let mut c = RemoteConfig::new(url);
        c.retries = 0;
        c.max_reply_bytes = 4096;
        c.max_line_bytes = 1024;
        c
    }

    fn ask(m: &mut OpenAiModel) -> Result<GenOutput, LmError> {
        let req = GenRequest {
            messages: vec![ChatMessage::new(Role::User, "hi")],
            sampling: Default::default(),
            max_tokens: 4,
            stop: Vec::new(),
            constraint: None,
        };
        m.generate(&req, &mut |_| {}, &CancelToken::new())
    }

    #[test]
    fn an_oversized_model_list_is_refused_naming_the_limit() {
        let big = format!(r#"{{"data":[{{"id":"{}"}}]}}"#, "x".repeat(5000));
        let url = canned_server(vec![reply("200 OK", "application/json", big.as_bytes())]);
        let e = OpenAiModel::connect(small_config(url)).expect_err("over 4096 bytes");
        assert!(
            matches!(
                e,
                RemoteError::TooLarge {
                    limit: 4096,
                    what: "a reply",
                    ..
                }
            ),
            "{e:?}"
        );
        assert!(e.to_string().contains("4096 bytes"), "{e}");
    }

    #[test]
    fn oversized_stream_lines_whole_replies_and_streams_are_refused() {
        let line = format!("data: {}\n\n", "y".repeat(2000));
        let many: String = (0..200)
            .map(|_| "data: {\"choices\":[{\"delta\":{\"content\":\"ab\"}}]}\n\n")
            .collect();
        let whole = format!(
            r#"{{"choices":[{{"message":{{"content":"{}"}}}}]}}"#,
            "z".repeat(5000)
        );
        for (body, ct, what, limit) in [
            (line, "text/event-stream", "one event-stream line", 1024),
            (many, "text/event-stream", "a reply", 4096),
            (whole, "application/json", "a reply", 4096),
        ] {
            let url = canned_server(vec![
                reply("200 OK", "application/json", MODELS),
                reply("200 OK", ct, body.as_bytes()),
            ]);
            let mut m = OpenAiModel::connect(small_config(url)).expect("connect");
            let e = ask(&mut m).expect_err("over the limit");
            let text = e.to_string();
            assert!(
                text.contains(&format!("limit of {limit} bytes for {what}")),
                "{what}: {text}"
            );
        }
    }

    #[test]
    fn an_error_body_is_read_only_up_to_its_cap() {
        let huge = vec![b'e'; 10 * ERROR_BODY_LIMIT];
        let url = canned_server(vec![
            reply("200 OK", "application/json", MODELS),
            reply("500 Internal Server Error", "text/plain", &huge),
        ]);
        let mut m = OpenAiModel::connect(small_config(url)).expect("connect");
        match ask(&mut m).expect_err("500") {
            LmError::Backend(err) => {
                let msg = err.to_string();
                assert!(msg.contains("HTTP 500"), "{}", &msg[..200]);
                assert!(msg.len() < ERROR_BODY_LIMIT + 500, "{} bytes", msg.len());
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn unreachable_server_is_a_typed_error_after_retries() {
        // Port 9 (discard) on loopback: nothing listens in test environments.
        let mut cfg = RemoteConfig::new("http://127.0.0.1:9");
        cfg.retries = 1;
        cfg.backoff = Duration::from_millis(10);
        let e = OpenAiModel::connect(cfg).expect_err("nothing listens");
        assert!(matches!(e, RemoteError::Unreachable { .. }), "{e:?}");
        assert!(e.to_string().contains("--base-url"), "{e}");
    }

    #[test]
    fn a_backend_error_keeps_the_remote_error_and_whether_it_is_transient() {
        let down = LmError::from(RemoteError::Unreachable {
            url: "http://127.0.0.1:9".into(),
            detail: "connection refused".into(),
        });
        assert!(down.is_transient(), "{down:?}");
        let LmError::Backend(b) = &down else {
            panic!("expected a backend error, got {down:?}");
        };
        assert!(
            matches!(
                b.downcast_ref::<RemoteError>(),
                Some(RemoteError::Unreachable { .. })
            ),
            "{b:?}"
        );
        assert!(down.to_string().contains("--base-url"), "{down}");

        let refused = LmError::from(RemoteError::BadUrl {
            url: "ftp://x".into(),
        });
        assert!(!refused.is_transient(), "{refused:?}");
        let busy = LmError::from(RemoteError::Http {
            url: "u".into(),
            status: 503,
            message: "overloaded".into(),
        });
        assert!(busy.is_transient(), "{busy:?}");
    }
}
