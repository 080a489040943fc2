//! `boyd serve` (the in-process runtime behind an OpenAI-compatible API) and the remote backend
//! talking to it: same text over HTTP as in-process, streaming, usage, prefix reuse across
//! requests, structured output, typed errors, and the official `openai` Python client.

use std::path::{Path, PathBuf};
use std::process::Command;

use boyd::lm::{
    CancelToken, ChatMessage, Constraint, GenRequest, LanguageModel, LmError, Role, SamplingParams,
};
use boyd::remote::{OpenAiModel, RemoteConfig, RemoteError, Structured};
use boyd::runtime::local::LocalModel;
use boyd::runtime::synth::{self, SynthSpec};
use boyd::serve::{ServeOptions, Server, ServerHandle};
use boyd::sizing::Architecture;
use candle_core::Device;
use serde_json::{json, Value};

fn synth_path(dir: &Path) -> PathBuf {
    let path = dir.join("tiny.gguf");
    synth::write(&SynthSpec::tiny(Architecture::Llama), &path).expect("write synthetic model");
    path
}

fn serve(path: &Path, api_key: Option<&str>) -> ServerHandle {
    let model = LocalModel::load(path, &Device::Cpu, 512).expect("load synthetic model");
    let opts = ServeOptions {
        api_key: api_key.map(str::to_string),
        default_max_tokens: 16,
        ..ServeOptions::new("tiny")
    };
    Server::bind(("127.0.0.1", 0), Box::new(model), opts)
        .expect("bind")
        .spawn()
        .expect("spawn")
}

fn request(messages: Vec<ChatMessage>, max_tokens: usize) -> GenRequest {
    GenRequest {
        messages,
        sampling: SamplingParams::default(),
        max_tokens,
        stop: Vec::new(),
        constraint: None,
    }
}

fn client(url: &str) -> OpenAiModel {
    let mut c = RemoteConfig::new(url);
    c.retries = 0;
    OpenAiModel::connect(c).expect("connect to boyd serve")
}

/// The Python interpreter with the `openai` (and for llama-server tests `xllamacpp`) packages:
/// `BOYD_TEST_PYTHON`, set by `.ci/run`. Unset: the test prints why and skips.
pub fn test_python() -> Option<PathBuf> {
    match std::env::var_os("BOYD_TEST_PYTHON") {
        Some(p) if !p.is_empty() => Some(PathBuf::from(p)),
        _ => {
            eprintln!(
                "skipping: BOYD_TEST_PYTHON is not set (a python with `pip install openai xllamacpp`; .ci/run sets it)"
            );
            None
        }
    }
}

#[test]
fn remote_backend_through_boyd_serve_gives_the_in_process_text_and_reuses_the_prefix() {
    let dir = tempfile::tempdir().expect("tmp");
    let path = synth_path(dir.path());
    let server = serve(&path, None);
    let mut remote = client(&server.base_url());
    assert_eq!(remote.model_id(), "tiny");
    assert_eq!(
        remote.context_length(),
        512,
        "from /v1/models max_model_len"
    );

    let mut m = vec![
        ChatMessage::new(Role::System, "You are terse."),
        ChatMessage::new(Role::User, "Say something."),
    ];
    let cancel = CancelToken::new();
    let mut streamed = String::new();
    let mut pieces = 0;
    let out = remote
        .generate(
            &request(m.clone(), 12),
            &mut |p| {
                pieces += 1;
                streamed.push_str(p)
            },
            &cancel,
        )
        .expect("remote generate");
    assert_eq!(streamed, out.text, "streamed pieces add up to the text");
    assert!(pieces >= 2, "streamed in pieces, got {pieces}");
    assert_eq!(out.usage.generated_tokens, 12);
    assert!(out.usage.prompt_tokens > 5);

    // Greedy: the same request in-process gives the same text.
    let mut local = LocalModel::load(&path, &Device::Cpu, 512).expect("load");
    let direct = local
        .generate(&request(m.clone(), 12), &mut |_| {}, &cancel)
        .expect("local generate");
    assert_eq!(direct.text, out.text, "HTTP and in-process outputs differ");

    // The next turn of the conversation reuses the cached prefix on the server.
    m.push(ChatMessage::new(Role::Assistant, out.text.clone()));
    m.push(ChatMessage::new(Role::User, "And again."));
    let out2 = remote
        .generate(&request(m, 4), &mut |_| {}, &cancel)
        .expect("second turn");
    assert!(
        out2.usage.reused_tokens >= out.usage.prompt_tokens,
        "reused {} of {} prompt tokens; the first prompt had {}",
        out2.usage.reused_tokens,
        out2.usage.prompt_tokens,
        out.usage.prompt_tokens
    );
    assert_eq!(
        out2.usage.prefilled_tokens + out2.usage.reused_tokens,
        out2.usage.prompt_tokens
    );
}

#[test]
fn structured_output_through_response_format_is_valid_json() {
    let dir = tempfile::tempdir().expect("tmp");
    let server = serve(&synth_path(dir.path()), None);
    let schema = json!({
        "type": "object",
        "properties": {"tool": {"enum": ["calculator", "final_answer"]}, "n": {"type": "integer", "minimum": 0, "maximum": 99}},
        "required": ["tool", "n"],
        "additionalProperties": false
    });
    for structured in [
        Structured::Auto,
        Structured::ResponseFormat,
        Structured::LlamaServer,
        Structured::Vllm,
    ] {
        let mut c = RemoteConfig::new(server.base_url());
        c.structured = structured;
        let mut remote = OpenAiModel::connect(c).expect("connect");
        let mut req = request(vec![ChatMessage::new(Role::User, "Reply.")], 60);
        req.constraint = Some(Constraint::JsonSchema(schema.clone()));
        req.sampling.temperature = 0.9;
        let out = remote
            .generate(&req, &mut |_| {}, &CancelToken::new())
            .expect("generate");
        let v: Value = serde_json::from_str(&out.text)
            .unwrap_or_else(|e| panic!("{structured:?}: {:?} is not JSON: {e}", out.text));
        assert!(
            matches!(v["tool"].as_str(), Some("calculator" | "final_answer")),
            "{v}"
        );
        assert!(v["n"].as_u64().is_some_and(|n| n <= 99), "{v}");
    }
}

#[test]
fn without_structured_output_a_reply_without_json_is_asked_again() {
    let dir = tempfile::tempdir().expect("tmp");
    let server = serve(&synth_path(dir.path()), None);
    let mut c = RemoteConfig::new(server.base_url());
    c.structured = Structured::None;
    c.parse_retries = 2;
    let mut remote = OpenAiModel::connect(c).expect("connect");
    let before = remote.requests;
    let mut req = request(vec![ChatMessage::new(Role::User, "Reply.")], 6);
    req.constraint = Some(Constraint::JsonSchema(json!({"type": "object"})));
    // A random synthetic model does not write JSON in 6 tokens: 1 try + 2 retries.
    let out = remote
        .generate(&req, &mut |_| {}, &CancelToken::new())
        .expect("generate");
    assert!(!boyd::remote::contains_json_object(&out.text));
    assert_eq!(remote.requests - before, 3, "one request and two retries");
    assert_eq!(
        out.usage.generated_tokens, 18,
        "usage summed over the attempts"
    );
}

#[test]
fn bad_key_and_context_overflow_are_typed_errors() {
    let dir = tempfile::tempdir().expect("tmp");
    let path = synth_path(dir.path());
    let server = serve(&path, Some("sekrit"));
    let mut c = RemoteConfig::new(server.base_url());
    c.api_key = Some("wrong".into());
    let e = OpenAiModel::connect(c).expect_err("wrong key");
    assert!(
        matches!(e, RemoteError::Unauthorized { status: 401, .. }),
        "{e:?}"
    );
    assert!(e.to_string().contains("--api-key-env"), "{e}");

    let mut c = RemoteConfig::new(server.base_url());
    c.api_key = Some("sekrit".into());
    let mut remote = OpenAiModel::connect(c).expect("right key");
    let long = "hello ".repeat(700);
    let e = remote
        .generate(
            &request(vec![ChatMessage::new(Role::User, long)], 4),
            &mut |_| {},
            &CancelToken::new(),
        )
        .expect_err("a 700-word prompt does not fit 512 tokens");
    match e {
        LmError::ContextExceeded {
            context,
            prompt,
            max_new,
        } => {
            assert_eq!(context, 512);
            assert!(prompt > 512, "prompt tokens: {prompt}");
            assert_eq!(max_new, 4);
        }
        other => panic!("expected ContextExceeded, got {other:?}"),
    }
    drop(server);
    // Nothing listens any more: unreachable, after the configured retries.
    let mut c = RemoteConfig::new("http://127.0.0.1:9");
    c.retries = 0;
    assert!(matches!(
        OpenAiModel::connect(c),
        Err(RemoteError::Unreachable { .. })
    ));
}

#[test]
fn official_openai_python_client_talks_to_boyd_serve() {
    let Some(python) = test_python() else { return };
    let dir = tempfile::tempdir().expect("tmp");
    let server = serve(&synth_path(dir.path()), Some("k-123"));
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/openai_client_check.py");
    let out = Command::new(&python)
        .arg(&script)
        .arg(server.base_url())
        .args(["--api-key", "k-123", "--max-tokens", "12"])
        .output()
        .expect("run python");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "openai client failed: {}\n{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!("openai client: {stdout}");
    let v: Value = serde_json::from_str(stdout.trim()).expect("one JSON line");
    assert_eq!(v["models"], json!(["tiny"]));
    let whole = &v["whole"];
    assert_eq!(whole["object"], "chat.completion");
    assert_eq!(whole["role"], "assistant");
    assert_eq!(whole["finish_reason"], "length");
    assert_eq!(whole["usage"]["completion_tokens"], 12);
    let content = whole["content"].as_str().expect("content");
    assert!(!content.is_empty());
    let s = &v["streamed"];
    assert!(s["pieces"].as_array().is_some_and(|p| p.len() >= 2), "{s}");
    assert_eq!(
        s["content"].as_str(),
        Some(content),
        "greedy: streamed == whole"
    );
    assert_eq!(s["roles"], json!(["assistant"]));
    assert_eq!(s["finish_reason"], "length");
    assert_eq!(s["usage"]["completion_tokens"], 12);
    // Same prompt twice: the second request reused the cached prompt prefix.
    assert!(
        s["usage"]["prompt_tokens_details"]["cached_tokens"].as_u64() > Some(0),
        "{s}"
    );
    assert_eq!(v["bad_request"]["status"], 400);
}

/// POST `body` to the server's chat route; the status and the body (errors included).
fn post_chat(server: &ServerHandle, body: &Value) -> (u16, String) {
    let url = format!("{}/v1/chat/completions", server.base_url());
    match ureq::post(&url)
        .set("Content-Type", "application/json")
        .send_string(&body.to_string())
    {
        Ok(r) => (r.status(), r.into_string().expect("body")),
        Err(ureq::Error::Status(code, r)) => (code, r.into_string().expect("error body")),
        Err(e) => panic!("request failed: {e}"),
    }
}

/// Check one `logprobs.content` list: log-probabilities ≤ 0, `top` alternatives best first,
/// and under greedy the chosen token is the first alternative.
fn check_logprobs(content: &[Value], top: usize, greedy: bool) {
    assert!(!content.is_empty());
    for t in content {
        let lp = t["logprob"].as_f64().expect("logprob");
        assert!(lp <= 0.0 && lp.is_finite(), "{t}");
        let bytes: Vec<u8> = serde_json::from_value(t["bytes"].clone()).expect("bytes");
        assert_eq!(
            String::from_utf8_lossy(&bytes),
            t["token"].as_str().expect("token")
        );
        let alts = t["top_logprobs"].as_array().expect("top_logprobs");
        assert_eq!(alts.len(), top, "{t}");
        let lps: Vec<f64> = alts
            .iter()
            .map(|a| a["logprob"].as_f64().expect("alternative logprob"))
            .collect();
        assert!(
            lps.windows(2).all(|w| w[0] >= w[1]),
            "not best first: {lps:?}"
        );
        assert!(lps.iter().all(|&l| l <= 0.0));
        if greedy {
            assert_eq!(lps[0], lp, "greedy picks the most likely token: {t}");
            assert_eq!(alts[0]["token"], t["token"]);
        } else if let Some(&best) = lps.first() {
            assert!(lp <= best, "{t}");
        }
    }
}

#[test]
fn chat_completions_report_logprobs_whole_and_streamed() {
    let dir = tempfile::tempdir().expect("tmp");
    let server = serve(&synth_path(dir.path()), None);
    let body = |extra: Value| {
        let mut b = json!({"messages": [{"role": "user", "content": "Say something."}],
            "max_tokens": 10, "temperature": 0});
        for (k, v) in extra.as_object().expect("object") {
            b[k] = v.clone();
        }
        b
    };

    let (status, text) = post_chat(&server, &body(json!({"logprobs": true, "top_logprobs": 5})));
    assert_eq!(status, 200, "{text}");
    let v: Value = serde_json::from_str(&text).expect("JSON");
    let whole = v["choices"][0]["logprobs"]["content"]
        .as_array()
        .expect("logprobs.content")
        .clone();
    assert_eq!(
        whole.len() as u64,
        v["usage"]["completion_tokens"].as_u64().expect("usage"),
        "one entry per generated token"
    );
    check_logprobs(&whole, 5, true);
    let joined: Vec<u8> = whole
        .iter()
        .flat_map(|t| serde_json::from_value::<Vec<u8>>(t["bytes"].clone()).expect("bytes"))
        .collect();
    assert_eq!(
        String::from_utf8_lossy(&joined).trim_start(),
        v["choices"][0]["message"]["content"]
            .as_str()
            .expect("content")
            .trim_start(),
        "the tokens' bytes spell the reply"
    );

    // Streamed: the chunks' logprobs add up to the same tokens.
    let (status, text) = post_chat(
        &server,
        &body(json!({"logprobs": true, "top_logprobs": 5, "stream": true})),
    );
    assert_eq!(status, 200, "{text}");
    let mut streamed = Vec::new();
    for line in text.lines().filter_map(|l| l.strip_prefix("data: ")) {
        if line == "[DONE]" {
            break;
        }
        let c: Value = serde_json::from_str(line).expect("chunk JSON");
        if let Some(list) = c["choices"][0]["logprobs"]["content"].as_array() {
            streamed.extend(list.iter().cloned());
        }
    }
    assert_eq!(streamed.len(), whole.len(), "{text}");
    for (s, w) in streamed.iter().zip(&whole) {
        assert_eq!(s["token"], w["token"]);
        let d = s["logprob"].as_f64().expect("lp") - w["logprob"].as_f64().expect("lp");
        assert!(d.abs() < 1e-3, "streamed {s} vs whole {w}");
    }

    // Sampled, with no alternatives asked for, and under a grammar that forces tokens: every
    // generated token still gets its own entry.
    let schema = json!({"type": "object", "properties": {"answer": {"enum": ["yes", "no"]}},
        "required": ["answer"], "additionalProperties": false});
    let (status, text) = post_chat(
        &server,
        &body(
            json!({"logprobs": true, "temperature": 0.8, "max_tokens": 30,
            "response_format": {"type": "json_schema", "json_schema": {"name": "a", "schema": schema}}}),
        ),
    );
    assert_eq!(status, 200, "{text}");
    let v: Value = serde_json::from_str(&text).expect("JSON");
    let content = v["choices"][0]["logprobs"]["content"]
        .as_array()
        .expect("logprobs.content");
    assert_eq!(
        content.len() as u64,
        v["usage"]["completion_tokens"].as_u64().expect("usage")
    );
    check_logprobs(content, 0, false);

    // Not asked for: null.
    let (_, text) = post_chat(&server, &body(json!({})));
    let v: Value = serde_json::from_str(&text).expect("JSON");
    assert!(v["choices"][0]["logprobs"].is_null(), "{v}");

    for (extra, needle) in [
        (
            json!({"logprobs": true, "top_logprobs": 21}),
            "from 0 to 20",
        ),
        (json!({"top_logprobs": 2}), "needs `logprobs: true`"),
    ] {
        let (status, text) = post_chat(&server, &body(extra.clone()));
        assert_eq!(status, 400, "{extra}: {text}");
        assert!(text.contains(needle), "{extra}: {text}");
    }
}
