//! One streamed chat completion: the request, then server-sent events read line by line under
//! the line and reply limits, text handed to the caller as it arrives, the finish reason and
//! usage read from the events (or from one JSON reply when the server does not stream).

use std::io::{BufRead, BufReader, Read};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::error::error_message;
use super::http::read_capped;
use super::{sse, OpenAiModel, RemoteError};
use crate::lm::{CancelToken, FinishReason, GenOutput, Usage};

impl OpenAiModel {
    /// One streamed request. Returns the text, finish reason and usage.
    pub(super) fn stream_once(
        &mut self,
        body: &Value,
        on_text: &mut dyn FnMut(&str),
        cancel: &CancelToken,
        emitted: &mut bool,
    ) -> Result<GenOutput, (RemoteError, Option<Duration>)> {
        let url = self.url("/chat/completions");
        self.requests += 1;
        let t0 = Instant::now();
        let resp = self.check(
            &url,
            self.request("POST", &url)
                .set("Content-Type", "application/json")
                .set("Accept", "text/event-stream")
                .send_string(&body.to_string()),
        )?;
        let is_sse = resp
            .header("Content-Type")
            .is_some_and(|c| c.contains("event-stream"));
        let proto = |detail: String| {
            (
                RemoteError::Protocol {
                    url: url.clone(),
                    detail,
                },
                None,
            )
        };
        let mut reader = BufReader::new(resp.into_reader());
        if !is_sse {
            // A server that ignores `stream: true` answers with one JSON completion.
            let text = read_capped(reader, self.config.max_reply_bytes)
                .map_err(|e| (self.read_error(&url, e, "a reply"), None))?;
            let v: Value =
                serde_json::from_str(&text).map_err(|e| proto(format!("not JSON: {e}")))?;
            let content = v
                .pointer("/choices/0/message/content")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string();
            if !content.is_empty() {
                *emitted = true;
                on_text(&content);
            }
            let finish = v
                .pointer("/choices/0/finish_reason")
                .and_then(Value::as_str)
                .map(finish_reason)
                .unwrap_or(FinishReason::Eos);
            let mut usage = Usage::default();
            sse::read_usage(&v, &mut usage);
            usage.decode_s = t0.elapsed().as_secs_f64();
            return Ok(GenOutput {
                text: content,
                finish,
                usage,
            });
        }
        let mut text = String::new();
        let mut finish = None;
        let mut usage = Usage::default();
        let mut first_token: Option<Instant> = None;
        let mut events = sse::Events::default();
        let mut line = String::new();
        let max_line = self.config.max_line_bytes;
        let max_reply = self.config.max_reply_bytes;
        let mut total = 0usize;
        loop {
            if cancel.is_cancelled() {
                finish = Some(FinishReason::Cancelled);
                break;
            }
            line.clear();
            let n = (&mut reader)
                .take(max_line as u64 + 1)
                .read_line(&mut line)
                .map_err(|e| (self.io_error(&url, &e), None))?;
            if n == 0 {
                break;
            }
            total += n;
            let over = if n > max_line {
                Some(("one event-stream line", max_line))
            } else if total > max_reply {
                Some(("a reply", max_reply))
            } else {
                None
            };
            if let Some((what, limit)) = over {
                return Err((
                    RemoteError::TooLarge {
                        url: url.clone(),
                        what,
                        limit,
                    },
                    None,
                ));
            }
            let Some(data) = events.push_line(&line) else {
                continue;
            };
            if data.trim() == "[DONE]" {
                break;
            }
            let v: Value = serde_json::from_str(&data)
                .map_err(|e| proto(format!("bad event {data:?}: {e}")))?;
            if v.get("error").is_some() {
                let (message, _) = error_message(&data);
                return Err((self.status_error(&url, 500, &message), None));
            }
            if let Some(piece) = v
                .pointer("/choices/0/delta/content")
                .and_then(Value::as_str)
            {
                if !piece.is_empty() {
                    first_token.get_or_insert_with(Instant::now);
                    *emitted = true;
                    text.push_str(piece);
                    on_text(piece);
                }
            }
            if let Some(f) = v
                .pointer("/choices/0/finish_reason")
                .and_then(Value::as_str)
            {
                finish = Some(finish_reason(f));
            }
            sse::read_usage(&v, &mut usage);
        }
        let end = Instant::now();
        if usage.prefill_s == 0.0 && usage.decode_s == 0.0 {
            let ft = first_token.unwrap_or(end);
            usage.prefill_s = (ft - t0).as_secs_f64();
            usage.decode_s = (end - ft).as_secs_f64();
        }
        let finish =
            match finish {
                Some(f) => f,
                None if cancel.is_cancelled() => FinishReason::Cancelled,
                None => return Err(proto(
                    "the stream ended without a finish_reason (server crashed or connection cut)"
                        .into(),
                )),
            };
        Ok(GenOutput {
            text,
            finish,
            usage,
        })
    }
}

/// An OpenAI finish reason as ours.
fn finish_reason(s: &str) -> FinishReason {
    match s {
        "length" => FinishReason::Length,
        "stop" => FinishReason::Stop,
        _ => FinishReason::Eos,
    }
}
