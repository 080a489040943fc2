//! The OpenAI wire format of `boyd serve`: request parsing, error bodies, usage.

use serde_json::{json, Value};

use crate::lm::{
    ChatMessage, Constraint, FinishReason, GenOutput, GenRequest, LmError, Role, SamplingParams,
    TokenLogprob,
};

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
    pub(crate) fn bad(message: impl Into<String>) -> Self {
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
    /// `logprobs: true`: report each generated token's log-probability with this many
    /// alternatives (`top_logprobs`, 0 when not given). `None`: no log-probabilities.
    pub logprobs: Option<usize>,
}

/// Most alternatives per token a request may ask for (`top_logprobs`), as OpenAI allows.
pub const MAX_TOP_LOGPROBS: u64 = 20;

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
    } else {
        num("json_schema")
            .or_else(|| num("guided_json"))
            .map(|s| Constraint::JsonSchema(s.clone()))
    };
    let logprobs = match num("logprobs") {
        None => false,
        Some(x) => x
            .as_bool()
            .ok_or_else(|| ApiError::bad("`logprobs` must be true or false"))?,
    };
    let top_logprobs = match num("top_logprobs") {
        None => None,
        Some(x) => Some(
            x.as_u64()
                .filter(|n| *n <= MAX_TOP_LOGPROBS)
                .ok_or_else(|| {
                    ApiError::bad(format!(
                        "`top_logprobs` must be an integer from 0 to {MAX_TOP_LOGPROBS}"
                    ))
                })? as usize,
        ),
    };
    if top_logprobs.is_some() && !logprobs {
        return Err(ApiError::bad(
            "`top_logprobs` needs `logprobs: true`; set it or leave `top_logprobs` out",
        ));
    }
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
        logprobs: logprobs.then_some(top_logprobs.unwrap_or(0)),
    })
}

/// The OpenAI `logprobs` object of a choice: `{"content": [...]}`, each token with its text,
/// log-probability, bytes and alternatives.
pub(crate) fn logprobs_json(tokens: &[TokenLogprob]) -> Value {
    let entry = |token: &str, logprob: f32, bytes: &[u8]| json!({"token": token, "logprob": logprob, "bytes": bytes});
    let content: Vec<Value> = tokens
        .iter()
        .map(|t| {
            let mut v = entry(&t.token, t.logprob, &t.bytes);
            v["top_logprobs"] = t
                .top_logprobs
                .iter()
                .map(|a| entry(&a.token, a.logprob, &a.bytes))
                .collect();
            v
        })
        .collect();
    json!({"content": content})
}

/// The OpenAI name of a finish reason.
pub fn finish_name(f: FinishReason) -> &'static str {
    match f {
        FinishReason::Length => "length",
        _ => "stop",
    }
}

pub(crate) fn usage_json(out: &GenOutput) -> Value {
    let u = &out.usage;
    json!({
        "prompt_tokens": u.prompt_tokens,
        "completion_tokens": u.generated_tokens,
        "total_tokens": u.prompt_tokens + u.generated_tokens,
        "prompt_tokens_details": {"cached_tokens": u.reused_tokens},
    })
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
        assert_eq!(r.logprobs, None);
        assert_eq!(
            r.gen.constraint,
            Some(Constraint::JsonSchema(json!({"type": "string"})))
        );
    }

    #[test]
    fn logprobs_fields_parse_to_the_number_of_alternatives() {
        let m = r#""messages":[{"role":"user","content":"q"}]"#;
        for (extra, want) in [
            (r#""logprobs":true"#, Some(0)),
            (r#""logprobs":true,"top_logprobs":20"#, Some(20)),
            (r#""logprobs":true,"top_logprobs":0"#, Some(0)),
            (r#""logprobs":false"#, None),
            (r#""logprobs":null,"top_logprobs":null"#, None),
        ] {
            let b = format!("{{{m},{extra}}}");
            let r = parse_chat_request(b.as_bytes(), 10).expect("parse");
            assert_eq!(r.logprobs, want, "{extra}");
        }
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
            (
                br#"{"messages":[{"role":"user","content":"x"}],"logprobs":true,"top_logprobs":21}"#,
                "from 0 to 20",
            ),
            (
                br#"{"messages":[{"role":"user","content":"x"}],"logprobs":true,"top_logprobs":-1}"#,
                "from 0 to 20",
            ),
            (
                br#"{"messages":[{"role":"user","content":"x"}],"top_logprobs":3}"#,
                "needs `logprobs: true`",
            ),
            (
                br#"{"messages":[{"role":"user","content":"x"}],"logprobs":false,"top_logprobs":3}"#,
                "needs `logprobs: true`",
            ),
            (
                br#"{"messages":[{"role":"user","content":"x"}],"logprobs":1}"#,
                "true or false",
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
