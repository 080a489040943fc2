//! Server-sent events as OpenAI-compatible servers send them, and usage parsing.
//!
//! An event is one or more `data:` lines ended by a blank line; `:` lines are comments
//! (keep-alives) and `event:`/`id:` lines are ignored. Servers differ in whether they put a
//! space after `data:` and in whether they end events with `\n\n` or `\r\n\r\n`; both work.

use serde_json::Value;

use crate::lm::Usage;

/// Joins `data:` lines into events.
#[derive(Debug, Default)]
pub struct Events {
    data: Vec<String>,
}

impl Events {
    /// Feed one line (with or without its newline); returns an event's data when a blank line
    /// ends one.
    pub fn push_line(&mut self, line: &str) -> Option<String> {
        let line = line.trim_end_matches(['\n', '\r']);
        if line.is_empty() {
            if self.data.is_empty() {
                return None;
            }
            let d = self.data.join("\n");
            self.data.clear();
            return Some(d);
        }
        if let Some(rest) = line.strip_prefix("data:") {
            let rest = rest.strip_prefix(' ').unwrap_or(rest);
            // `data: [DONE]` often comes without a blank line after it.
            if rest.trim() == "[DONE]" && self.data.is_empty() {
                return Some(rest.to_string());
            }
            self.data.push(rest.to_string());
        }
        None
    }
}

/// Fill `usage` from a chunk or completion: OpenAI `usage` (with
/// `prompt_tokens_details.cached_tokens`) and llama-server `timings` (`cache_n`, `prompt_ms`,
/// `predicted_ms`).
pub fn read_usage(v: &Value, usage: &mut Usage) {
    let n = |p: &str| v.pointer(p).and_then(Value::as_u64).map(|x| x as usize);
    let ms = |p: &str| v.pointer(p).and_then(Value::as_f64);
    if let Some(p) = n("/usage/prompt_tokens") {
        usage.prompt_tokens = p;
        usage.generated_tokens = n("/usage/completion_tokens").unwrap_or(0);
        // llama-server reports its slot cache in `timings.cache_n`; take the larger figure.
        let cached = n("/usage/prompt_tokens_details/cached_tokens")
            .unwrap_or(0)
            .max(n("/timings/cache_n").unwrap_or(0))
            .min(p);
        usage.reused_tokens = cached;
        usage.prefilled_tokens = p - cached;
        usage.context_used = p + usage.generated_tokens;
    }
    if let (Some(pm), Some(dm)) = (ms("/timings/prompt_ms"), ms("/timings/predicted_ms")) {
        usage.prefill_s = pm / 1e3;
        usage.decode_s = dm / 1e3;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_join_data_lines_and_skip_comments() {
        let mut e = Events::default();
        let mut out = Vec::new();
        for l in [
            ": ping\n",
            "data: {\"a\":1}\n",
            "\n",
            "data:{\"b\":\n",
            "data:2}\r\n",
            "\r\n",
            "data: [DONE]\n",
        ] {
            if let Some(d) = e.push_line(l) {
                out.push(d);
            }
        }
        assert_eq!(out, ["{\"a\":1}", "{\"b\":\n2}", "[DONE]"]);
    }

    #[test]
    fn usage_from_llama_server_and_openai_chunks() {
        let llama: Value = serde_json::from_str(r#"{"usage":{"completion_tokens":8,"prompt_tokens":31,"prompt_tokens_details":{"cached_tokens":0}},"timings":{"cache_n":20,"prompt_ms":3297.8,"predicted_ms":2708.5}}"#).unwrap_or_default();
        let mut u = Usage::default();
        read_usage(&llama, &mut u);
        assert_eq!(
            (
                u.prompt_tokens,
                u.generated_tokens,
                u.reused_tokens,
                u.prefilled_tokens
            ),
            (31, 8, 20, 11)
        );
        assert!((u.prefill_s - 3.2978).abs() < 1e-9);
        let openai: Value = serde_json::from_str(r#"{"usage":{"completion_tokens":3,"prompt_tokens":100,"prompt_tokens_details":{"cached_tokens":64}}}"#).unwrap_or_default();
        let mut u = Usage::default();
        read_usage(&openai, &mut u);
        assert_eq!((u.reused_tokens, u.prefilled_tokens), (64, 36));
        let llama_cache: Value = serde_json::from_str(r#"{"usage":{"completion_tokens":3,"prompt_tokens":100},"timings":{"cache_n":90,"prompt_ms":1,"predicted_ms":2}}"#).unwrap_or_default();
        let mut u = Usage::default();
        read_usage(&llama_cache, &mut u);
        assert_eq!(u.reused_tokens, 90);
    }
}
