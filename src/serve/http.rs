//! Just enough HTTP/1.1 for an OpenAI-compatible endpoint: one request per connection
//! (`Connection: close`), `Content-Length` bodies, and responses that are either a whole body or
//! a server-sent-event stream written and flushed piece by piece.
//!
//! Design decision: a small hand-written parser over `std::net` rather than a framework, because
//! the server needs exactly three routes, true token-by-token streaming, and no async runtime;
//! every size is capped before allocation so a bad client cannot exhaust memory.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::TcpStream;

/// Largest request head (request line + headers).
pub const MAX_HEAD: usize = 64 * 1024;
/// Largest request body.
pub const MAX_BODY: usize = 32 * 1024 * 1024;

/// A parsed request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// `GET`, `POST`, ...
    pub method: String,
    /// Path without the query string.
    pub path: String,
    /// Headers with lower-cased names.
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: Vec<u8>,
}

impl Request {
    /// The first header called `name` (lower case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Why a request could not be read.
#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    /// The connection failed or timed out.
    #[error("reading the request: {0}")]
    Io(#[from] io::Error),
    /// Malformed request line or header.
    #[error("malformed request: {0}")]
    Malformed(String),
    /// Head or body over the caps.
    #[error("request too large: {0}")]
    TooLarge(String),
    /// The client closed the connection before sending anything.
    #[error("connection closed")]
    Closed,
}

/// Read one request from `stream`.
pub fn read_request<R: Read>(stream: R) -> Result<Request, HttpError> {
    let mut r = BufReader::new(stream);
    let mut head = 0usize;
    let mut line = String::new();
    let mut read_line = |r: &mut BufReader<R>, line: &mut String| -> Result<usize, HttpError> {
        line.clear();
        let n = r
            .by_ref()
            .take((MAX_HEAD - head + 1) as u64)
            .read_line(line)?;
        head += n;
        if head > MAX_HEAD {
            return Err(HttpError::TooLarge(format!(
                "headers over {MAX_HEAD} bytes"
            )));
        }
        Ok(n)
    };
    if read_line(&mut r, &mut line)? == 0 {
        return Err(HttpError::Closed);
    }
    let mut parts = line.split_whitespace();
    let (Some(method), Some(target), Some(version)) = (parts.next(), parts.next(), parts.next())
    else {
        return Err(HttpError::Malformed(format!(
            "request line {:?}",
            line.trim_end()
        )));
    };
    if !version.starts_with("HTTP/1.") {
        return Err(HttpError::Malformed(format!("version {version:?}")));
    }
    let method = method.to_ascii_uppercase();
    let path = target.split('?').next().unwrap_or("/").to_string();
    let mut headers = Vec::new();
    loop {
        if read_line(&mut r, &mut line)? == 0 {
            return Err(HttpError::Malformed("headers not terminated".into()));
        }
        let l = line.trim_end_matches(['\r', '\n']);
        if l.is_empty() {
            break;
        }
        let Some((k, v)) = l.split_once(':') else {
            return Err(HttpError::Malformed(format!("header {l:?}")));
        };
        headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
    }
    let mut req = Request {
        method,
        path,
        headers,
        body: Vec::new(),
    };
    if req
        .header("transfer-encoding")
        .is_some_and(|t| t.to_ascii_lowercase().contains("chunked"))
    {
        return Err(HttpError::Malformed(
            "chunked request bodies are not supported; send Content-Length".into(),
        ));
    }
    let len = match req.header("content-length") {
        Some(v) => v
            .parse::<usize>()
            .map_err(|_| HttpError::Malformed(format!("Content-Length {v:?}")))?,
        None => 0,
    };
    if len > MAX_BODY {
        return Err(HttpError::TooLarge(format!(
            "body of {len} bytes (limit {MAX_BODY})"
        )));
    }
    req.body = vec![0; len];
    r.read_exact(&mut req.body)?;
    Ok(req)
}

/// The reason phrase of a status code.
fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        404 => "Not Found",
        405 => "Method Not Allowed",
        413 => "Payload Too Large",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        _ => "Status",
    }
}

/// Write a whole response and close.
pub fn respond(
    stream: &mut TcpStream,
    status: u16,
    content_type: &str,
    body: &[u8],
) -> io::Result<()> {
    let head = format!(
        "HTTP/1.1 {status} {}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        reason(status),
        body.len()
    );
    stream.write_all(head.as_bytes())?;
    stream.write_all(body)?;
    stream.flush()
}

/// Start a server-sent-event stream (the body runs until the connection closes).
pub fn start_events(stream: &mut TcpStream) -> io::Result<()> {
    stream.write_all(
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\nConnection: close\r\n\r\n",
    )?;
    stream.flush()
}

/// Write one event (`data: ...` and a blank line) and flush it.
pub fn event(stream: &mut TcpStream, data: &str) -> io::Result<()> {
    stream.write_all(format!("data: {data}\n\n").as_bytes())?;
    stream.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_post_with_body_and_query() {
        let raw = b"POST /v1/chat/completions?x=1 HTTP/1.1\r\nHost: a\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}";
        let r = read_request(&raw[..]).expect("parse");
        assert_eq!(r.method, "POST");
        assert_eq!(r.path, "/v1/chat/completions");
        assert_eq!(r.header("content-type"), Some("application/json"));
        assert_eq!(r.body, b"{}");
    }

    #[test]
    fn refuses_oversized_and_malformed_requests() {
        let raw = format!(
            "POST / HTTP/1.1\r\nContent-Length: {}\r\n\r\n",
            MAX_BODY + 1
        );
        assert!(matches!(
            read_request(raw.as_bytes()),
            Err(HttpError::TooLarge(_))
        ));
        let big = format!("GET / HTTP/1.1\r\nX: {}\r\n\r\n", "a".repeat(MAX_HEAD));
        assert!(matches!(
            read_request(big.as_bytes()),
            Err(HttpError::TooLarge(_))
        ));
        assert!(matches!(
            read_request(&b"GARBAGE\r\n\r\n"[..]),
            Err(HttpError::Malformed(_))
        ));
        assert!(matches!(
            read_request(&b"GET / HTTP/1.1\r\nContent-Length: x\r\n\r\n"[..]),
            Err(HttpError::Malformed(_))
        ));
        assert!(matches!(read_request(&b""[..]), Err(HttpError::Closed)));
        // Body shorter than Content-Length: an I/O error, not a hang or panic.
        assert!(matches!(
            read_request(&b"POST / HTTP/1.1\r\nContent-Length: 10\r\n\r\n{}"[..]),
            Err(HttpError::Io(_))
        ));
    }
}
