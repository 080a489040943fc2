//! `boyd serve` as an attacker meets it: bodies that are never read before the key is checked,
//! foreign `Host` and `Origin` headers, non-JSON bodies, wrong keys, clients that leave while
//! the model generates, generations past their deadline, a 10-second loopback siege of 200
//! slow or oversized clients during which a well-formed request is still answered in time and
//! the server's memory stays bounded, and 300 idle plus 260 slowloris sockets that do not keep
//! authenticated clients out.
//!
//! Every case speaks raw HTTP/1.1 over a socket, so what the server does with a half-sent
//! request is what is tested, and every refusal asserts that the model ran nothing.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use boyd::lm::{CancelToken, GenOutput, GenRequest, LanguageModel, LmError};
use boyd::runtime::local::LocalModel;
use boyd::runtime::synth::{self, SynthSpec};
use boyd::serve::{ServeLimits, ServeOptions, Server, ServerHandle};
use boyd::sizing::Architecture;
use candle_core::Device;
use serde_json::{json, Value};

const KEY: &str = "k-attack-123";

fn tiny(dir: &Path) -> PathBuf {
    let path = dir.join("tiny.gguf");
    synth::write(&SynthSpec::tiny(Architecture::Llama), &path).expect("write synthetic model");
    path
}

/// The runtime with a delay per piece of text and a count of pieces, so a test can watch a
/// generation run and stop.
struct Slow {
    inner: LocalModel,
    pieces: Arc<AtomicUsize>,
    delay: Duration,
}

impl LanguageModel for Slow {
    fn generate(
        &mut self,
        req: &GenRequest,
        on_text: &mut dyn FnMut(&str),
        cancel: &CancelToken,
    ) -> Result<GenOutput, LmError> {
        let (pieces, delay) = (Arc::clone(&self.pieces), self.delay);
        self.inner.generate(
            req,
            &mut |p| {
                pieces.fetch_add(1, Ordering::SeqCst);
                std::thread::sleep(delay);
                on_text(p)
            },
            cancel,
        )
    }
    fn context_length(&self) -> usize {
        self.inner.context_length()
    }
    fn name(&self) -> String {
        "slow".into()
    }
}

fn slow_server(
    dir: &Path,
    delay: Duration,
    limits: ServeLimits,
) -> (ServerHandle, Arc<AtomicUsize>) {
    let pieces = Arc::new(AtomicUsize::new(0));
    let model = Slow {
        inner: LocalModel::load(&tiny(dir), &Device::Cpu, 512).expect("load"),
        pieces: Arc::clone(&pieces),
        delay,
    };
    let opts = ServeOptions {
        api_key: Some(KEY.into()),
        default_max_tokens: 16,
        limits,
        ..ServeOptions::new("tiny")
    };
    let server = Server::bind(("127.0.0.1", 0), Box::new(model), opts)
        .expect("bind")
        .spawn()
        .expect("spawn");
    (server, pieces)
}

fn server(dir: &Path, limits: ServeLimits) -> ServerHandle {
    slow_server(dir, Duration::ZERO, limits).0
}

/// A reply: status, headers (lower-cased names) and body.
#[derive(Debug)]
struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl Reply {
    fn code(&self) -> String {
        serde_json::from_str::<Value>(&self.body)
            .ok()
            .and_then(|v| {
                v.pointer("/error/code")
                    .and_then(Value::as_str)
                    .map(String::from)
            })
            .unwrap_or_default()
    }
}

/// Read one response (Content-Length or read-to-end bodies) from `s`.
fn read_reply(s: &TcpStream) -> std::io::Result<Reply> {
    let mut r = BufReader::new(s);
    let mut line = String::new();
    r.read_line(&mut line)?;
    let status = line
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| std::io::Error::other(format!("no status line: {line:?}")))?;
    let mut headers = Vec::new();
    loop {
        line.clear();
        if r.read_line(&mut line)? == 0 {
            break;
        }
        let l = line.trim_end();
        if l.is_empty() {
            break;
        }
        if let Some((k, v)) = l.split_once(':') {
            headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
        }
    }
    let len = headers
        .iter()
        .find(|(k, _)| k == "content-length")
        .and_then(|(_, v)| v.parse::<usize>().ok());
    let mut body = Vec::new();
    match len {
        Some(n) => {
            body.resize(n, 0);
            r.read_exact(&mut body)?;
        }
        None => {
            r.read_to_end(&mut body)?;
        }
    }
    Ok(Reply {
        status,
        headers,
        body: String::from_utf8_lossy(&body).into_owned(),
    })
}

fn connect(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    s
}

/// Send `head` (ending in a blank line) and `body`, read the reply.
fn exchange(addr: SocketAddr, head: &str, body: &[u8]) -> Reply {
    let mut s = connect(addr);
    s.write_all(head.as_bytes()).expect("write head");
    let _ = s.write_all(body);
    read_reply(&s).expect("reply")
}

fn chat_body(max_tokens: usize, stream: bool) -> String {
    json!({"messages": [{"role": "user", "content": "Say something."}], "max_tokens": max_tokens, "stream": stream, "temperature": 0})
        .to_string()
}

/// A complete, well-formed chat request with `extra` header lines.
fn post(addr: SocketAddr, extra: &str, body: &str) -> String {
    format!(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nAuthorization: Bearer {KEY}\r\n{extra}Content-Length: {}\r\n\r\n{body}",
        body.len()
    )
}

#[test]
fn an_unauthenticated_oversized_body_is_refused_before_it_is_read() {
    let dir = tempfile::tempdir().expect("tmp");
    let limits = ServeLimits {
        max_body_bytes: 1 << 20,
        ..ServeLimits::default()
    };
    let srv = server(dir.path(), limits);
    let addr = srv.addr();
    let mut refused = 0;
    // Declared 1 GiB, 16 bytes sent: the reply comes at once, and the connection closes without
    // waiting for the rest. Without a key, with a wrong key, and with the right key (over the
    // size limit).
    for (auth, status) in [
        ("", 401),
        ("Authorization: Bearer nope\r\n", 401),
        (&*format!("Authorization: Bearer {KEY}\r\n"), 413),
    ] {
        let head = format!(
            "POST /v1/chat/completions HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n{auth}Content-Length: 1073741824\r\n\r\n"
        );
        let t0 = Instant::now();
        let mut s = connect(addr);
        s.write_all(head.as_bytes()).expect("head");
        s.write_all(&[b'{'; 16]).expect("a little body");
        let r = read_reply(&s).expect("reply");
        let took = t0.elapsed();
        assert_eq!(r.status, status, "{auth:?}: {}", r.body);
        assert!(took < Duration::from_secs(2), "{auth:?}: took {took:?}");
        // The server closes instead of reading a gigabyte it has refused.
        let t1 = Instant::now();
        let mut rest = Vec::new();
        let _ = s.read_to_end(&mut rest);
        assert!(rest.is_empty(), "{auth:?}: more after the reply");
        assert!(
            t1.elapsed() < Duration::from_secs(2),
            "{auth:?}: the connection stayed open {:?}",
            t1.elapsed()
        );
        refused += 1;
    }
    // Unauthenticated chunked upload (no length to check): refused on the headers alone.
    let head = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
    );
    let t0 = Instant::now();
    let mut s = connect(addr);
    s.write_all(head.as_bytes()).expect("head");
    s.write_all(b"10\r\n{{{{{{{{{{{{{{{{\r\n")
        .expect("one chunk");
    let r = read_reply(&s).expect("reply");
    assert_eq!(r.status, 401);
    assert!(t0.elapsed() < Duration::from_secs(2));
    refused += 1;
    // Authenticated chunked upload past the limit: stopped at the limit with a 413 while the
    // client is still sending (a second thread writes, this one reads).
    let mut s = connect(addr);
    s.write_all(
        post(addr, "Transfer-Encoding: chunked\r\n", "")
            .replace("Content-Length: 0\r\n", "")
            .as_bytes(),
    )
    .expect("head");
    let mut w = s.try_clone().expect("clone");
    let writer = std::thread::spawn(move || {
        let chunk = format!("{:x}\r\n{}\r\n", 64 * 1024, "a".repeat(64 * 1024));
        let mut sent = 0usize;
        for _ in 0..64 {
            if w.write_all(chunk.as_bytes()).is_err() {
                break;
            }
            sent += 64 * 1024;
        }
        sent
    });
    let r = read_reply(&s).expect("reply");
    assert_eq!(r.status, 413, "{}", r.body);
    assert!(r.body.contains("1048576 bytes"), "{}", r.body);
    drop(s);
    // The client's 4 MiB went into socket buffers; the server read at most the 1 MiB limit.
    let sent = writer.join().expect("writer");
    assert!(sent <= 4 << 20);
    refused += 1;
    let st = srv.stats();
    assert_eq!(st.generations, 0, "the model ran nothing: {st:?}");
    assert_eq!(refused, 5);
}

#[test]
fn foreign_host_and_origin_headers_are_refused() {
    let dir = tempfile::tempdir().expect("tmp");
    let srv = server(dir.path(), ServeLimits::default());
    let addr = srv.addr();
    let port = addr.port();
    let body = chat_body(2, false);
    let hosts = [
        format!("attacker.example:{port}"),
        format!("localhost.attacker.example:{port}"),
        format!("127.0.0.1:{}", port.wrapping_add(1)),
        "127.0.0.1".to_string(),
        format!("[::1]:{port}"),
        format!("127.0.0.1:{port}@attacker.example"),
    ];
    let mut cases = 0;
    for host in &hosts {
        for (method, path) in [("GET", "/v1/models"), ("POST", "/v1/chat/completions")] {
            let head = format!(
                "{method} {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\nAuthorization: Bearer {KEY}\r\nContent-Length: {}\r\n\r\n",
                body.len()
            );
            let r = exchange(addr, &head, body.as_bytes());
            assert_eq!(r.status, 403, "Host {host}: {}", r.body);
            assert_eq!(r.code(), "host_not_allowed", "{}", r.body);
            cases += 1;
        }
    }
    // No Host at all (HTTP/1.0).
    let r = exchange(addr, "GET /v1/models HTTP/1.0\r\n\r\n", b"");
    assert_eq!(r.status, 403, "{}", r.body);
    cases += 1;
    let origins = [
        "https://attacker.example",
        "null",
        "http://127.0.0.1.attacker.example",
        "http://localhost.attacker.example:3000",
        "http://192.168.1.10",
        "file://",
    ];
    for origin in origins {
        for method in ["GET", "POST", "OPTIONS"] {
            let head = format!(
                "{method} /v1/chat/completions HTTP/1.1\r\nHost: {addr}\r\nOrigin: {origin}\r\nContent-Type: application/json\r\nAuthorization: Bearer {KEY}\r\nContent-Length: {}\r\n\r\n",
                body.len()
            );
            let r = exchange(addr, &head, body.as_bytes());
            assert_eq!(r.status, 403, "Origin {origin}: {}", r.body);
            assert_eq!(r.code(), "origin_not_allowed");
            assert!(
                !r.headers
                    .iter()
                    .any(|(k, _)| k.starts_with("access-control-")),
                "no CORS grant"
            );
            cases += 1;
        }
    }
    assert_eq!(srv.stats().generations, 0, "the model ran nothing");
    assert_eq!(cases, 12 + 1 + 18);
    // The same request from loopback origins and names is served.
    for (host, origin) in [
        (addr.to_string(), "http://localhost:3000".to_string()),
        (
            format!("localhost:{port}"),
            format!("http://127.0.0.1:{port}"),
        ),
    ] {
        let head = format!(
            "POST /v1/chat/completions HTTP/1.1\r\nHost: {host}\r\nOrigin: {origin}\r\nContent-Type: application/json\r\nAuthorization: Bearer {KEY}\r\nContent-Length: {}\r\n\r\n",
            body.len()
        );
        let r = exchange(addr, &head, body.as_bytes());
        assert_eq!(r.status, 200, "{host} {origin}: {}", r.body);
    }
    assert_eq!(srv.stats().generations, 2);
}

#[test]
fn non_json_content_types_are_refused() {
    let dir = tempfile::tempdir().expect("tmp");
    let srv = server(dir.path(), ServeLimits::default());
    let addr = srv.addr();
    let body = chat_body(2, false);
    let types = [
        Some("text/plain"),
        Some("text/plain; charset=utf-8"),
        Some("application/x-www-form-urlencoded"),
        Some("multipart/form-data; boundary=x"),
        Some("application/jsonp"),
        Some("application/json-seq"),
        None,
    ];
    for ct in types {
        let line = ct
            .map(|c| format!("Content-Type: {c}\r\n"))
            .unwrap_or_default();
        let head = format!(
            "POST /v1/chat/completions HTTP/1.1\r\nHost: {addr}\r\n{line}Authorization: Bearer {KEY}\r\nContent-Length: {}\r\n\r\n",
            body.len()
        );
        let r = exchange(addr, &head, body.as_bytes());
        assert_eq!(r.status, 415, "{ct:?}: {}", r.body);
        assert_eq!(r.code(), "unsupported_media_type");
    }
    assert_eq!(srv.stats().generations, 0, "the model ran nothing");
    let r = exchange(addr, &post(addr, "", &body), b"");
    assert_eq!(r.status, 200, "{}", r.body);
}

#[test]
fn only_the_exact_key_is_accepted() {
    let dir = tempfile::tempdir().expect("tmp");
    let srv = server(dir.path(), ServeLimits::default());
    let addr = srv.addr();
    let body = chat_body(2, false);
    let wrong = [
        String::new(),
        format!("Authorization: Bearer {}\r\n", &KEY[..KEY.len() - 1]),
        format!("Authorization: Bearer {KEY}x\r\n"),
        format!("Authorization: Bearer {}\r\n", KEY.to_uppercase()),
        format!("Authorization: Basic {KEY}\r\n"),
        format!("Authorization: {KEY}\r\n"),
        "Authorization: Bearer \r\n".into(),
        format!("X-Api-Key: {KEY}\r\n"),
        "Authorization: Bearer k-attack-124\r\n".to_string(),
    ];
    for auth in &wrong {
        let head = format!(
            "POST /v1/chat/completions HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n{auth}Content-Length: {}\r\n\r\n",
            body.len()
        );
        let r = exchange(addr, &head, body.as_bytes());
        assert_eq!(r.status, 401, "{auth:?}: {}", r.body);
        assert_eq!(r.code(), "invalid_api_key");
        // The key in the query string is not a key.
        let r = exchange(
            addr,
            &format!("GET /v1/models?api_key={KEY} HTTP/1.1\r\nHost: {addr}\r\n{auth}\r\n"),
            b"",
        );
        assert_eq!(r.status, 401);
    }
    assert_eq!(srv.stats().generations, 0, "the model ran nothing");
    assert_eq!(srv.stats().refused, 2 * wrong.len() as u64);
    let r = exchange(addr, &post(addr, "", &body), b"");
    assert_eq!(r.status, 200, "{}", r.body);
}

/// Wait until `f` holds (or `limit` passes); returns whether it held.
fn wait_for(limit: Duration, f: impl Fn() -> bool) -> bool {
    let t0 = Instant::now();
    while t0.elapsed() < limit {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    f()
}

#[test]
fn a_client_that_leaves_stops_its_generation_streamed_or_not() {
    let dir = tempfile::tempdir().expect("tmp");
    let (srv, pieces) = slow_server(
        dir.path(),
        Duration::from_millis(20),
        ServeLimits::default(),
    );
    let addr = srv.addr();
    for (round, stream) in [false, true].into_iter().enumerate() {
        let before = pieces.load(Ordering::SeqCst);
        let mut s = connect(addr);
        s.write_all(post(addr, "", &chat_body(400, stream)).as_bytes())
            .expect("send");
        assert!(
            wait_for(Duration::from_secs(10), || pieces.load(Ordering::SeqCst)
                >= before + 5),
            "the generation started"
        );
        if stream {
            let mut first = [0u8; 64];
            let n = s.read(&mut first).expect("the stream began");
            assert!(String::from_utf8_lossy(&first[..n]).starts_with("HTTP/1.1 200"));
        }
        drop(s);
        let stats = &srv;
        assert!(
            wait_for(Duration::from_secs(5), || stats
                .stats()
                .generations_cancelled
                == round as u64 + 1),
            "stream={stream}: the generation was not cancelled: {:?}",
            srv.stats()
        );
        let stopped = pieces.load(Ordering::SeqCst);
        std::thread::sleep(Duration::from_millis(300));
        assert_eq!(
            pieces.load(Ordering::SeqCst),
            stopped,
            "stream={stream}: still generating after the client left"
        );
        let ran = stopped - before;
        assert!(ran < 100, "stream={stream}: {ran} of 400 pieces generated");
        eprintln!("stream={stream}: stopped after {ran} of up to 400 pieces");
    }
    let st = srv.stats();
    assert!(st.generated_tokens < 2 * 100, "{st:?}");
    // A good request afterwards is served.
    let r = exchange(addr, &post(addr, "", &chat_body(3, false)), b"");
    assert_eq!(r.status, 200, "{}", r.body);
}

#[test]
fn a_generation_past_its_deadline_stops_with_504() {
    let dir = tempfile::tempdir().expect("tmp");
    let limits = ServeLimits {
        generation_timeout: Duration::from_millis(800),
        ..ServeLimits::default()
    };
    let (srv, pieces) = slow_server(dir.path(), Duration::from_millis(20), limits);
    let addr = srv.addr();
    let t0 = Instant::now();
    let r = exchange(addr, &post(addr, "", &chat_body(400, false)), b"");
    assert_eq!(r.status, 504, "{}", r.body);
    assert_eq!(r.code(), "generation_timeout");
    assert!(t0.elapsed() < Duration::from_secs(3), "{:?}", t0.elapsed());
    assert!(wait_for(Duration::from_secs(3), || srv
        .stats()
        .generations_cancelled
        == 1));
    let n = pieces.load(Ordering::SeqCst);
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(pieces.load(Ordering::SeqCst), n, "stopped");
}

/// A model that writes big pieces fast, for clients that do not read.
struct Firehose {
    pieces: Arc<AtomicUsize>,
}

impl LanguageModel for Firehose {
    fn generate(
        &mut self,
        _req: &GenRequest,
        on_text: &mut dyn FnMut(&str),
        cancel: &CancelToken,
    ) -> Result<GenOutput, LmError> {
        let piece = "x".repeat(4096);
        let mut n = 0;
        while n < 20_000 && !cancel.is_cancelled() {
            on_text(&piece);
            n += 1;
            self.pieces.fetch_add(1, Ordering::SeqCst);
            std::thread::sleep(Duration::from_millis(1));
        }
        Ok(GenOutput {
            text: String::new(),
            finish: if cancel.is_cancelled() {
                boyd::lm::FinishReason::Cancelled
            } else {
                boyd::lm::FinishReason::Length
            },
            usage: Default::default(),
        })
    }
    fn context_length(&self) -> usize {
        512
    }
    fn name(&self) -> String {
        "firehose".into()
    }
}

#[test]
fn a_client_that_stops_reading_a_stream_is_cut_off_and_its_generation_stopped() {
    let pieces = Arc::new(AtomicUsize::new(0));
    let opts = ServeOptions {
        api_key: Some(KEY.into()),
        limits: ServeLimits {
            write_stall_timeout: Duration::from_secs(1),
            ..ServeLimits::default()
        },
        ..ServeOptions::new("firehose")
    };
    let model = Firehose {
        pieces: Arc::clone(&pieces),
    };
    let srv = Server::bind(("127.0.0.1", 0), Box::new(model), opts)
        .expect("bind")
        .spawn()
        .expect("spawn");
    let addr = srv.addr();
    let s = connect(addr);
    (&s).write_all(post(addr, "", &chat_body(8, true)).as_bytes())
        .expect("send");
    // Never read: the socket buffers fill, the server's write stalls, and after a second of
    // stall it drops the connection, which cancels the generation.
    assert!(
        wait_for(Duration::from_secs(20), || srv
            .stats()
            .generations_cancelled
            == 1),
        "not cancelled: {:?}, {} pieces",
        srv.stats(),
        pieces.load(Ordering::SeqCst)
    );
    let n = pieces.load(Ordering::SeqCst);
    assert!(n < 20_000, "{n} pieces");
    assert!(wait_for(Duration::from_secs(2), || srv
        .stats()
        .connections_open
        == 0));
    eprintln!("stalled reader: cut off after {n} pieces of 4 KiB");
    drop(s);
}

/// An authenticated `GET /health` on `s`, kept alive; the status.
fn health_on(s: &TcpStream, addr: SocketAddr) -> u16 {
    let mut w = s;
    w.write_all(
        format!("GET /health HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {KEY}\r\n\r\n")
            .as_bytes(),
    )
    .expect("send");
    read_reply(s).map(|r| r.status).unwrap_or(0)
}

#[test]
fn connection_and_in_flight_caps_refuse_the_excess() {
    let dir = tempfile::tempdir().expect("tmp");
    let limits = ServeLimits {
        max_connections: 4,
        reserved_connections: 2,
        max_connections_per_ip: 4,
        max_in_flight: 2,
        // Far longer than any wait below, so "closed at once" cannot be a timeout firing,
        // and the holders keep their slots however loaded the machine is.
        header_timeout: Duration::from_secs(120),
        body_timeout: Duration::from_secs(120),
        ..ServeLimits::default()
    };
    let srv = server(dir.path(), limits);
    let addr = srv.addr();
    // Two requests whose bodies never finish hold both in-flight slots (and, having passed the
    // key check, two trusted connection slots).
    let holders: Vec<TcpStream> = (0..2)
        .map(|_| {
            let s = connect(addr);
            (&s).write_all(
                format!("POST /v1/chat/completions HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nAuthorization: Bearer {KEY}\r\nContent-Length: 100\r\n\r\n{{").as_bytes(),
            )
            .expect("send");
            s
        })
        .collect();
    assert!(wait_for(Duration::from_secs(30), || srv.stats().requests == 2));
    let r = exchange(addr, &post(addr, "", &chat_body(2, false)), b"");
    assert_eq!(r.status, 503, "{}", r.body);
    assert_eq!(r.code(), "server_busy");
    assert!(r
        .headers
        .iter()
        .any(|(k, v)| k == "retry-after" && v == "1"));
    // Once the holders leave, the same request is served.
    drop(holders);
    assert!(wait_for(Duration::from_secs(30), || srv
        .stats()
        .connections_open
        == 0));
    let r = exchange(addr, &post(addr, "", &chat_body(2, false)), b"");
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(srv.stats().busy, 1);
    // Two kept-alive connections whose requests carried the key hold the reserved slots; two
    // idle ones fill the rest. A fifth connection does not wait behind them: it takes the oldest
    // idle one's slot, and its request is answered.
    let trusted: Vec<TcpStream> = (0..2).map(|_| connect(addr)).collect();
    for s in &trusted {
        assert_eq!(health_on(s, addr), 200);
    }
    let mut idle: Vec<TcpStream> = (0..2).map(|_| connect(addr)).collect();
    assert!(wait_for(Duration::from_secs(30), || srv
        .stats()
        .connections_open
        == 4));
    let fifth = connect(addr);
    assert_eq!(health_on(&fifth, addr), 200);
    let mut buf = Vec::new();
    let _ = idle[0].read_to_end(&mut buf);
    assert!(buf.is_empty(), "the oldest idle connection was closed");
    let st = srv.stats();
    assert_eq!(
        (st.connections_evicted, st.connections_refused),
        (1, 0),
        "{st:?}"
    );
    // Once every slot is held by a connection whose request passed the checks, a new
    // connection is closed at once.
    assert_eq!(health_on(&idle[1], addr), 200);
    let mut sixth = connect(addr);
    let t0 = Instant::now();
    let _ = sixth.read_to_end(&mut buf);
    assert!(buf.is_empty() && t0.elapsed() < Duration::from_secs(60));
    assert_eq!(srv.stats().connections_refused, 1);
    drop((trusted, idle, fifth));
    assert!(wait_for(Duration::from_secs(30), || srv
        .stats()
        .connections_open
        == 0));
}

/// Raise this process's soft limit on open files to the hard limit; `None` (saying why) when
/// even the hard limit is below `need`.
fn raise_open_files(need: u64) -> Option<u64> {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).ok()?;
    if hard < need {
        eprintln!(
            "skipping: the hard limit on open files is {hard}, below the {need} this siege needs (raise it with ulimit -Hn)"
        );
        return None;
    }
    if soft < hard {
        setrlimit(Resource::RLIMIT_NOFILE, hard, hard).ok()?;
    }
    Some(hard)
}

/// Whether the server has closed the non-blocking socket `s` (EOF or reset).
fn closed_nb(s: &TcpStream) -> bool {
    let mut b = [0u8; 1024];
    loop {
        match (&*s).read(&mut b) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return false,
            Err(_) => return true,
        }
    }
}

/// Keep `n` attacking sockets open until `stop`: idle ones, or (`slow`) slowloris ones that
/// sent a partial request head and add one byte a second. Every second each socket the server
/// has closed is counted in `cut` and opened again.
fn hold_sockets(
    addr: SocketAddr,
    n: usize,
    slow: bool,
    stop: &AtomicBool,
    ready: &AtomicUsize,
    cut: &AtomicU64,
) {
    let open = || -> Option<TcpStream> {
        let s = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).ok()?;
        if slow {
            (&s).write_all(
                format!("POST /v1/chat/completions HTTP/1.1\r\nHost: {addr}\r\nX-Pad: ").as_bytes(),
            )
            .ok()?;
        }
        s.set_nonblocking(true).ok()?;
        Some(s)
    };
    let mut socks: Vec<Option<TcpStream>> = (0..n).map(|_| open()).collect();
    ready.fetch_add(1, Ordering::SeqCst);
    while !stop.load(Ordering::Relaxed) {
        for _ in 0..10 {
            if stop.load(Ordering::Relaxed) {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        for slot in socks.iter_mut() {
            let alive = slot.as_ref().is_some_and(|s| {
                !closed_nb(s)
                    && (!slow
                        || match (&*s).write(b"a") {
                            Ok(_) => true,
                            Err(e) => e.kind() == std::io::ErrorKind::WouldBlock,
                        })
            });
            if !alive {
                if slot.is_some() {
                    cut.fetch_add(1, Ordering::Relaxed);
                }
                *slot = open();
            }
        }
    }
}

#[test]
fn idle_and_slowloris_sockets_do_not_starve_authenticated_clients() {
    const IDLE: usize = 300;
    const SLOW: usize = 260;
    const GOOD: usize = 30;
    // The attackers' sockets, the server's side of as many, and the rest of the test process.
    if raise_open_files(2 * (IDLE + SLOW) as u64 + 512).is_none() {
        return;
    }
    let dir = tempfile::tempdir().expect("tmp");
    let srv = server(dir.path(), ServeLimits::default());
    let addr = srv.addr();
    let stop = Arc::new(AtomicBool::new(false));
    let ready = Arc::new(AtomicUsize::new(0));
    let cuts: Arc<[AtomicU64; 2]> = Arc::new([AtomicU64::new(0), AtomicU64::new(0)]);
    let attackers: Vec<_> = [(IDLE, false), (SLOW, true)]
        .into_iter()
        .enumerate()
        .map(|(i, (n, slow))| {
            let (stop, ready, cuts) = (Arc::clone(&stop), Arc::clone(&ready), Arc::clone(&cuts));
            std::thread::spawn(move || hold_sockets(addr, n, slow, &stop, &ready, &cuts[i]))
        })
        .collect();
    assert!(
        wait_for(Duration::from_secs(120), || ready.load(Ordering::SeqCst)
            == 2),
        "the attackers opened their sockets"
    );
    // Let the server read them all (and the slowloris ones trickle) before the clients come.
    std::thread::sleep(Duration::from_secs(2));
    let mut answered = 0;
    let mut failures = Vec::new();
    for i in 0..GOOD {
        let reply = TcpStream::connect_timeout(&addr, Duration::from_secs(10)).and_then(|s| {
            s.set_read_timeout(Some(Duration::from_secs(30)))?;
            (&s).write_all(post(addr, "", &chat_body(2, false)).as_bytes())?;
            read_reply(&s)
        });
        match reply {
            Ok(r) if r.status == 200 => answered += 1,
            Ok(r) => failures.push(format!("request {i}: HTTP {} {}", r.status, r.body)),
            Err(e) => failures.push(format!("request {i}: {e}")),
        }
    }
    stop.store(true, Ordering::Relaxed);
    for t in attackers {
        let _ = t.join();
    }
    let (idle_cut, slow_cut) = (
        cuts[0].load(Ordering::Relaxed),
        cuts[1].load(Ordering::Relaxed),
    );
    eprintln!(
        "{IDLE} idle + {SLOW} slowloris sockets (reopened when cut): {answered} of {GOOD} authenticated requests answered; attacker sockets cut by the server: {idle_cut} idle, {slow_cut} slowloris; server {:?}",
        srv.stats()
    );
    assert_eq!(answered, GOOD, "{failures:#?}");
    assert!(
        idle_cut + slow_cut > 0,
        "the attack held its sockets: the server never cut one"
    );
}

/// `VmRSS` and `VmHWM` of a process, in KiB.
fn rss_kib(pid: u32) -> (u64, u64) {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        s.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

struct Child_(Child);

impl Drop for Child_ {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The attackers' kinds.
const KINDS: [&str; 4] = [
    "header trickle",
    "body trickle",
    "oversized (Content-Length)",
    "oversized chunked, no key",
];

/// One attacker: repeats its attack until `stop`; counts connections and server cut-offs.
fn attacker(
    kind: usize,
    addr: SocketAddr,
    stop: &AtomicBool,
    conns: &AtomicU64,
    cut_after_ms: &AtomicU64,
) {
    let tick = Duration::from_millis(100);
    while !stop.load(Ordering::Relaxed) {
        let Ok(mut s) = TcpStream::connect(addr) else {
            std::thread::sleep(tick);
            continue;
        };
        conns.fetch_add(1, Ordering::Relaxed);
        let _ = s.set_write_timeout(Some(Duration::from_secs(1)));
        let t0 = Instant::now();
        let cut = match kind {
            0 => {
                // One byte of headers every 100 ms, never finishing.
                let head = format!("POST /v1/chat/completions HTTP/1.1\r\nHost: {addr}\r\nX-Pad: ");
                let mut ok = s.write_all(head.as_bytes()).is_ok();
                while ok && !stop.load(Ordering::Relaxed) {
                    std::thread::sleep(tick);
                    ok = s.write_all(b"a").is_ok() && !peer_closed(&s);
                }
                !ok
            }
            1 => {
                // Valid headers, then one byte of body every 100 ms.
                let head = format!(
                    "POST /v1/chat/completions HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nAuthorization: Bearer {KEY}\r\nContent-Length: 100000\r\n\r\n"
                );
                let mut ok = s.write_all(head.as_bytes()).is_ok();
                while ok && !stop.load(Ordering::Relaxed) {
                    std::thread::sleep(tick);
                    ok = s.write_all(b" ").is_ok() && !peer_closed(&s);
                }
                !ok
            }
            _ => {
                // A huge body as fast as the socket takes it.
                let head = if kind == 2 {
                    format!("POST /v1/chat/completions HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nAuthorization: Bearer {KEY}\r\nContent-Length: 536870912\r\n\r\n")
                } else {
                    format!("POST /v1/chat/completions HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")
                };
                let block = vec![b'a'; 64 * 1024];
                let chunk = [format!("{:x}\r\n", block.len()).as_bytes(), &block, b"\r\n"].concat();
                let mut ok = s.write_all(head.as_bytes()).is_ok();
                while ok && !stop.load(Ordering::Relaxed) {
                    ok = s.write_all(if kind == 2 { &block } else { &chunk }).is_ok();
                }
                !ok
            }
        };
        if cut && !stop.load(Ordering::Relaxed) {
            cut_after_ms.fetch_max(t0.elapsed().as_millis() as u64, Ordering::Relaxed);
        }
    }
}

/// Whether the server has closed `s` (EOF or reset), without blocking.
fn peer_closed(s: &TcpStream) -> bool {
    let _ = s.set_nonblocking(true);
    let mut b = [0u8; 4096];
    let r = loop {
        match (&*s).read(&mut b) {
            Ok(0) => break true,
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break false,
            Err(_) => break true,
        }
    };
    let _ = s.set_nonblocking(false);
    r
}

#[test]
fn two_hundred_slow_or_oversized_clients_do_not_stop_a_good_request() {
    let dir = tempfile::tempdir().expect("tmp");
    let model = tiny(dir.path());
    let mut child = Command::new(env!("CARGO_BIN_EXE_boyd"))
        .args(["serve", "--json", "--port", "0", "--ctx", "512"])
        .arg("--model")
        .arg(&model)
        .args(["--api-key-env", "BOYD_ATTACK_KEY", "--max-body", "1048576"])
        .args([
            "--header-timeout",
            "2",
            "--body-timeout",
            "3",
            "--write-timeout",
            "2",
        ])
        .env("BOYD_ATTACK_KEY", KEY)
        .env("BOYD_HOME", dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start boyd serve");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("the listening line");
    let pid = child.id();
    let _child = Child_(child);
    let v: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{line:?}: {e}"));
    let url = v["listening"].as_str().expect("listening url").to_string();
    let addr: SocketAddr = url.trim_start_matches("http://").parse().expect("address");

    let good = |deadline: Duration| -> Duration {
        let t0 = Instant::now();
        let mut s = TcpStream::connect_timeout(&addr, deadline).expect("connect within deadline");
        s.set_read_timeout(Some(deadline)).expect("timeout");
        s.write_all(post(addr, "", &chat_body(8, false)).as_bytes())
            .expect("send");
        let r = read_reply(&s).expect("an answer within the deadline");
        assert_eq!(r.status, 200, "{}", r.body);
        let v: Value = serde_json::from_str(&r.body).expect("json");
        assert_eq!(v["usage"]["completion_tokens"], 8);
        t0.elapsed()
    };
    // Warm up, then the baseline memory.
    good(Duration::from_secs(30));
    let (rss0, _) = rss_kib(pid);

    let stop = Arc::new(AtomicBool::new(false));
    let per_kind: Arc<Vec<(AtomicU64, AtomicU64)>> = Arc::new(
        (0..KINDS.len())
            .map(|_| (AtomicU64::new(0), AtomicU64::new(0)))
            .collect(),
    );
    let threads: Vec<_> = (0..200)
        .map(|i| {
            let (stop, per_kind) = (Arc::clone(&stop), Arc::clone(&per_kind));
            let kind = i % KINDS.len();
            std::thread::Builder::new()
                .stack_size(128 * 1024)
                .spawn(move || {
                    let (conns, cut) = &per_kind[kind];
                    attacker(kind, addr, &stop, conns, cut)
                })
                .expect("attacker thread")
        })
        .collect();

    let deadline = Duration::from_secs(5);
    let t0 = Instant::now();
    let mut latencies = Vec::new();
    let mut peak = rss0;
    while t0.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(250));
        latencies.push(good(deadline));
        peak = peak.max(rss_kib(pid).0);
    }
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        let _ = t.join();
    }
    let (rss1, hwm) = rss_kib(pid);
    latencies.sort();
    let worst = latencies.last().copied().unwrap_or_default();
    let median = latencies[latencies.len() / 2];
    eprintln!(
        "200 attackers, 10 s: {} good requests, median {:?}, worst {:?} (deadline {deadline:?}); server RSS {} MiB before, peak sampled {} MiB, after {} MiB, VmHWM {} MiB",
        latencies.len(),
        median,
        worst,
        rss0 / 1024,
        peak / 1024,
        rss1 / 1024,
        hwm / 1024
    );
    for (k, (conns, cut)) in KINDS.iter().zip(per_kind.iter()) {
        eprintln!(
            "  {k}: {} connections, longest held before the server cut it {} ms",
            conns.load(Ordering::Relaxed),
            cut.load(Ordering::Relaxed)
        );
    }
    assert!(latencies.len() >= 10, "{} good requests", latencies.len());
    assert!(worst < deadline, "worst {worst:?}");
    assert!(
        peak < rss0 + 128 * 1024,
        "memory grew from {rss0} KiB to {peak} KiB"
    );
    // The slow clients were cut off by the server's timeouts (2 s head, 3 s body), and the
    // oversized ones were refused and reconnected many times.
    for kind in [0, 1] {
        let cut = per_kind[kind].1.load(Ordering::Relaxed);
        assert!(
            (1500..6000).contains(&cut),
            "{}: cut after {cut} ms",
            KINDS[kind]
        );
    }
    for kind in [2, 3] {
        assert!(
            per_kind[kind].0.load(Ordering::Relaxed) > 40,
            "{}: the server did not refuse and close",
            KINDS[kind]
        );
    }
}
