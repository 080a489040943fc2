//! Typed failures of the remote backend, how they map to `LmError`, and reading a server's
//! error body (context-length and structured-output refusals).

use super::*;

/// Failures talking to an OpenAI-compatible server.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RemoteError {
    /// The base URL is not an http(s) URL.
    #[error(
        "--base-url {url:?} is not an http:// or https:// URL (example: http://127.0.0.1:8080)"
    )]
    BadUrl {
        /// The URL given.
        url: String,
    },
    /// Nothing answered (connection refused, DNS, reset).
    #[error("cannot reach the OpenAI-compatible server at {url} ({detail}); is it running, and is --base-url right?")]
    Unreachable {
        /// The URL tried.
        url: String,
        /// The transport error.
        detail: String,
    },
    /// No response within the read timeout.
    #[error("the server at {url} did not answer within {secs:.0} s; raise --request-timeout or check the server's load")]
    Timeout {
        /// The URL tried.
        url: String,
        /// The timeout.
        secs: f64,
    },
    /// HTTP 401/403: missing or wrong API key.
    #[error("the server at {url} refused the API key (HTTP {status}: {message}); put the right key in the environment variable named by --api-key-env ({key_hint})")]
    Unauthorized {
        /// The URL tried.
        url: String,
        /// 401 or 403.
        status: u16,
        /// The server's message.
        message: String,
        /// Whether a key was sent.
        key_hint: &'static str,
    },
    /// The prompt plus `max_tokens` exceeds the server's context.
    #[error("the server rejected the request as too long for its context: {message}")]
    ContextLength {
        /// The server's message.
        message: String,
        /// Prompt tokens, when the server says.
        prompt: Option<usize>,
        /// Context length, when the server says.
        context: Option<usize>,
        /// Requested completion tokens, when the server says.
        max_new: Option<usize>,
    },
    /// The model id is unknown to the server.
    #[error("the server at {url} does not serve model {model:?} (HTTP 404: {message}); list its models with GET /v1/models and pass one with --model")]
    UnknownModel {
        /// The URL tried.
        url: String,
        /// The model sent.
        model: String,
        /// The server's message.
        message: String,
    },
    /// Any other HTTP error status.
    #[error("the server at {url} answered HTTP {status}: {message}")]
    Http {
        /// The URL tried.
        url: String,
        /// Status code.
        status: u16,
        /// The server's message (or body).
        message: String,
    },
    /// The reply is larger than the client reads.
    #[error("the reply from {url} is over the client's limit of {limit} bytes for {what}; the server is misbehaving or is not an OpenAI-compatible server")]
    TooLarge {
        /// The URL tried.
        url: String,
        /// What went over (`a reply`, `one event-stream line`).
        what: &'static str,
        /// The limit in bytes.
        limit: usize,
    },
    /// The response is not what the protocol says.
    #[error("unexpected response from {url}: {detail}")]
    Protocol {
        /// The URL tried.
        url: String,
        /// What was wrong.
        detail: String,
    },
}

impl RemoteError {
    /// Whether trying again may help.
    pub fn is_transient(&self) -> bool {
        match self {
            RemoteError::Unreachable { .. } | RemoteError::Timeout { .. } => true,
            RemoteError::Http { status, .. } => *status == 429 || *status >= 500,
            _ => false,
        }
    }
}

impl From<RemoteError> for LmError {
    fn from(e: RemoteError) -> Self {
        match e {
            RemoteError::ContextLength {
                prompt,
                context,
                max_new,
                ..
            } if prompt.is_some() || context.is_some() => LmError::ContextExceeded {
                prompt: prompt.unwrap_or(0),
                max_new: max_new.unwrap_or(0),
                context: context.unwrap_or(0),
            },
            other if other.is_transient() => LmError::Backend(BackendError::transient(other)),
            other => LmError::Backend(BackendError::new(other)),
        }
    }
}

/// The part of an error body worth showing: `error.message`, or the body itself (cut).
pub(super) fn error_message(body: &str) -> (String, Option<Value>) {
    let v: Option<Value> = serde_json::from_str(body).ok();
    let msg = v
        .as_ref()
        .and_then(|v| {
            v.pointer("/error/message")
                .or_else(|| v.get("message"))
                .or_else(|| v.get("detail"))
                .or_else(|| v.get("error"))
        })
        .map(|m| match m {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        })
        .unwrap_or_else(|| body.chars().take(300).collect());
    (msg, v)
}

/// Whether an error message is a context-length rejection (llama-server, vLLM, OpenAI, TGI).
pub fn is_context_error(message: &str, body: Option<&Value>) -> bool {
    let code = body
        .and_then(|v| {
            v.pointer("/error/code")
                .or_else(|| v.pointer("/error/type"))
        })
        .map(|c| c.to_string())
        .unwrap_or_default();
    let m = message.to_ascii_lowercase();
    code.contains("context_length_exceeded")
        || code.contains("exceed_context_size")
        || m.contains("maximum context length")
        || m.contains("context size")
        || m.contains("context length")
        || m.contains("context window")
}

/// Numbers from a context-length message: (prompt tokens, context length).
pub(super) fn context_numbers(
    message: &str,
    body: Option<&Value>,
) -> (Option<usize>, Option<usize>) {
    let get = |k: &str| {
        body.and_then(|v| v.pointer(&format!("/error/{k}")))
            .and_then(Value::as_u64)
            .map(|n| n as usize)
    };
    let num_after = |pat: &str| -> Option<usize> {
        let i = message.find(pat)? + pat.len();
        let digits: String = message[i..]
            .trim_start()
            .chars()
            .take_while(|c| c.is_ascii_digit())
            .collect();
        digits.parse().ok()
    };
    let num_before = |pat: &str| -> Option<usize> {
        let i = message.find(pat)?;
        let digits: String = message[..i]
            .chars()
            .rev()
            .take_while(|c| c.is_ascii_digit())
            .collect();
        digits.chars().rev().collect::<String>().parse().ok()
    };
    let prompt = get("n_prompt_tokens")
        .or_else(|| num_before(" in the messages"))
        .or_else(|| num_after("request ("))
        .or_else(|| num_after("resulted in"))
        .or_else(|| num_after("you requested"));
    let context = get("n_ctx")
        .or_else(|| num_after("context size ("))
        .or_else(|| num_after("maximum context length is"));
    (prompt, context)
}

/// Whether a 400/422 message says the server does not do structured output.
pub(super) fn is_structured_rejection(message: &str) -> bool {
    let m = message.to_ascii_lowercase();
    [
        "response_format",
        "json_schema",
        "guided",
        "grammar",
        "structured",
    ]
    .iter()
    .any(|k| m.contains(k))
}
