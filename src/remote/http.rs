//! HTTP to the server: the request with its key, bounded reads of replies and error bodies,
//! the mapping of transport failures and status codes to typed [`RemoteError`]s (with the
//! server's `Retry-After`), and retries of transient failures with exponential backoff.

use std::io::Read;
use std::time::Duration;

use serde_json::Value;

use super::error::{context_numbers, error_message};
use super::{is_context_error, OpenAiModel, RemoteError, ERROR_BODY_LIMIT};

impl OpenAiModel {
    pub(super) fn url(&self, path: &str) -> String {
        format!("{}{path}", self.api)
    }

    pub(super) fn transport_error(&self, url: &str, t: &ureq::Transport) -> RemoteError {
        let detail = t.to_string();
        let timed_out = t.kind() == ureq::ErrorKind::Io
            && (detail.contains("timed out") || detail.contains("WouldBlock"));
        if timed_out {
            RemoteError::Timeout {
                url: url.into(),
                secs: self.config.read_timeout.as_secs_f64(),
            }
        } else {
            RemoteError::Unreachable {
                url: url.into(),
                detail,
            }
        }
    }

    pub(super) fn io_error(&self, url: &str, e: &std::io::Error) -> RemoteError {
        match e.kind() {
            std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock => RemoteError::Timeout {
                url: url.into(),
                secs: self.config.read_timeout.as_secs_f64(),
            },
            _ => RemoteError::Unreachable {
                url: url.into(),
                detail: e.to_string(),
            },
        }
    }

    pub(super) fn read_error(
        &self,
        url: &str,
        e: CappedReadError,
        what: &'static str,
    ) -> RemoteError {
        match e {
            CappedReadError::TooLarge(limit) => RemoteError::TooLarge {
                url: url.into(),
                what,
                limit,
            },
            CappedReadError::Io(e) if e.kind() == std::io::ErrorKind::InvalidData => {
                RemoteError::Protocol {
                    url: url.into(),
                    detail: format!("the reply is not UTF-8 text: {e}"),
                }
            }
            CappedReadError::Io(e) => self.io_error(url, &e),
        }
    }

    pub(super) fn status_error(&self, url: &str, status: u16, body: &str) -> RemoteError {
        let (message, v) = error_message(body);
        match status {
            401 | 403 => RemoteError::Unauthorized {
                url: url.into(),
                status,
                message,
                key_hint: if self.config.api_key.is_some() {
                    "a key was sent"
                } else {
                    "no key was sent"
                },
            },
            400 | 413 | 422 if is_context_error(&message, v.as_ref()) => {
                let (prompt, context) = context_numbers(&message, v.as_ref());
                let max_new = message.find(" in the completion").and_then(|i| {
                    let d: String = message[..i]
                        .chars()
                        .rev()
                        .take_while(|c| c.is_ascii_digit())
                        .collect();
                    d.chars().rev().collect::<String>().parse().ok()
                });
                RemoteError::ContextLength {
                    message,
                    prompt,
                    context,
                    max_new,
                }
            }
            404 if message.to_ascii_lowercase().contains("model") => RemoteError::UnknownModel {
                url: url.into(),
                model: self.model.clone(),
                message,
            },
            _ => RemoteError::Http {
                url: url.into(),
                status,
                message,
            },
        }
    }

    pub(super) fn request(&self, method: &str, url: &str) -> ureq::Request {
        let mut r = self.agent.request(method, url);
        if let Some(k) = &self.config.api_key {
            r = r.set("Authorization", &format!("Bearer {k}"));
        }
        r
    }

    /// Map a ureq result to a response or a typed error (reading the error body).
    pub(super) fn check(
        &self,
        url: &str,
        r: Result<ureq::Response, ureq::Error>,
    ) -> Result<ureq::Response, (RemoteError, Option<Duration>)> {
        match r {
            Ok(resp) => Ok(resp),
            Err(ureq::Error::Status(status, resp)) => {
                let retry_after = resp
                    .header("Retry-After")
                    .and_then(|s| s.trim().parse::<f64>().ok())
                    .filter(|s| s.is_finite() && *s >= 0.0)
                    .map(|s| Duration::from_secs_f64(s.min(60.0)));
                let body = read_error_body(resp.into_reader());
                Err((self.status_error(url, status, &body), retry_after))
            }
            Err(ureq::Error::Transport(t)) => Err((self.transport_error(url, &t), None)),
        }
    }

    pub(super) fn get_json(
        &mut self,
        path: &str,
    ) -> Result<Value, (RemoteError, Option<Duration>)> {
        let url = self.url(path);
        self.requests += 1;
        let resp = self.check(&url, self.request("GET", &url).call())?;
        let text = read_capped(resp.into_reader(), self.config.max_reply_bytes)
            .map_err(|e| (self.read_error(&url, e, "a reply"), None))?;
        serde_json::from_str(&text).map_err(|e| {
            (
                RemoteError::Protocol {
                    url,
                    detail: format!("not JSON: {e}"),
                },
                None,
            )
        })
    }

    /// Run `f` with retries of transient errors and exponential backoff.
    pub(super) fn with_retries<T>(
        &mut self,
        mut f: impl FnMut(&mut Self) -> Result<T, (RemoteError, Option<Duration>)>,
    ) -> Result<T, RemoteError> {
        let mut backoff = Backoff::new(self.config.backoff, self.config.retries);
        loop {
            match f(self) {
                Ok(v) => return Ok(v),
                Err((e, retry_after)) => {
                    if !backoff.retry(&e, retry_after) {
                        return Err(e);
                    }
                }
            }
        }
    }
}

/// Retries of transient failures ([`RemoteError::is_transient`]) with exponential backoff: the
/// first wait is the configured one, doubling per retry up to 8 s; a server's `Retry-After`
/// wins over it.
pub(super) struct Backoff {
    delay: Duration,
    attempt: u32,
    retries: u32,
}

impl Backoff {
    /// At most `retries` retries, the first after `first`.
    pub(super) fn new(first: Duration, retries: u32) -> Self {
        Self {
            delay: first,
            attempt: 0,
            retries,
        }
    }

    /// Whether to try again after `e`: when it is transient and retries are left, after
    /// waiting (`retry_after` when the server gave one).
    pub(super) fn retry(&mut self, e: &RemoteError, retry_after: Option<Duration>) -> bool {
        if !e.is_transient() || self.attempt >= self.retries {
            return false;
        }
        self.attempt += 1;
        let wait = retry_after.unwrap_or(self.delay);
        tracing::warn!("{e}; retry {}/{} in {wait:?}", self.attempt, self.retries);
        std::thread::sleep(wait);
        self.delay = (self.delay * 2).min(Duration::from_secs(8));
        true
    }
}

/// Why [`read_capped`] failed.
#[derive(Debug)]
pub(super) enum CappedReadError {
    /// More than this many bytes came.
    TooLarge(usize),
    /// The read failed (or the text is not UTF-8).
    Io(std::io::Error),
}

/// Read all of `r` as UTF-8 text, refusing more than `limit` bytes (reads at most `limit + 1`).
pub(super) fn read_capped(r: impl Read, limit: usize) -> Result<String, CappedReadError> {
    let mut buf = Vec::new();
    r.take(limit as u64 + 1)
        .read_to_end(&mut buf)
        .map_err(CappedReadError::Io)?;
    if buf.len() > limit {
        return Err(CappedReadError::TooLarge(limit));
    }
    String::from_utf8(buf)
        .map_err(|e| CappedReadError::Io(std::io::Error::new(std::io::ErrorKind::InvalidData, e)))
}

/// The first [`ERROR_BODY_LIMIT`] bytes of an error reply as text (lossy); the rest is not read.
fn read_error_body(r: impl Read) -> String {
    let mut buf = Vec::new();
    let _ = r.take(ERROR_BODY_LIMIT as u64).read_to_end(&mut buf);
    String::from_utf8_lossy(&buf).into_owned()
}
