//! Pulling a catalog entry from the hub, against a fake hub on localhost: the URL the store asks
//! for, sha256 verification, and refusal of a file that does not match (nothing of it is left
//! in the store or the hub cache). Also `boyd models pull` and `boyd models list` end to end.

use std::io::{BufRead as _, BufReader, Write as _};
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use boyd::catalog::{Catalog, ModelEntry, ResolvedFrom, Source, DEFAULT_MODEL};
use boyd::store::{self, FetchOptions, HubAccess, Store, StoreError, WheelDir};
use sha2::{Digest, Sha256};

const REPO: &str = "test-org/tiny-GGUF";
const COMMIT: &str = "0123456789abcdef0123456789abcdef01234567";

fn sha_hex(data: &[u8]) -> String {
    Sha256::digest(data)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Deterministic bytes that start like a GGUF file (magic, version 3).
fn gguf_like(len: usize, seed: u8) -> Vec<u8> {
    let mut v: Vec<u8> = b"GGUF\x03\x00\x00\x00".to_vec();
    let mut x = u32::from(seed).wrapping_mul(2_654_435_761) | 1;
    while v.len() < len {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        v.push((x >> 8) as u8);
    }
    v.truncate(len);
    v
}

/// One request the fake hub saw: the path and its `Range` header.
#[derive(Debug, Clone, PartialEq)]
struct Seen {
    path: String,
    range: Option<String>,
}

/// A hub on localhost that serves `body` for every path, the way the real one answers a
/// `resolve` URL: 206 to a range request, with the ETag, commit and Content-Range headers
/// hf-hub reads. It records each request.
fn fake_hub(body: Vec<u8>) -> (SocketAddr, Arc<Mutex<Vec<Seen>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&seen);
    let etag = sha_hex(&body);
    std::thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            let _ = serve_one(conn, &body, &etag, &log);
        }
    });
    (addr, seen)
}

fn serve_one(
    conn: std::net::TcpStream,
    body: &[u8],
    etag: &str,
    log: &Mutex<Vec<Seen>>,
) -> std::io::Result<()> {
    conn.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut reader = BufReader::new(conn.try_clone()?);
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let path = line
        .split_whitespace()
        .nth(1)
        .unwrap_or_default()
        .to_owned();
    let mut range = None;
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h)? == 0 || h.trim().is_empty() {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            if k.trim().eq_ignore_ascii_case("range") {
                range = Some(v.trim().to_owned());
            }
        }
    }
    log.lock().expect("log").push(Seen {
        path,
        range: range.clone(),
    });
    let len = body.len();
    let (start, end) = range
        .as_deref()
        .and_then(|r| r.strip_prefix("bytes="))
        .and_then(|r| r.split_once('-'))
        .map(|(s, e)| {
            let s: usize = s.parse().unwrap_or(0);
            let e: usize = e.parse().unwrap_or(len.saturating_sub(1));
            (s.min(len), (e + 1).min(len))
        })
        .unwrap_or((0, len));
    let slice = &body[start..end.max(start)];
    let mut out = conn;
    write!(
        out,
        "HTTP/1.1 206 Partial Content\r\nContent-Length: {}\r\nContent-Range: bytes {}-{}/{}\r\n\
         ETag: \"{etag}\"\r\nX-Repo-Commit: {COMMIT}\r\nConnection: close\r\n\r\n",
        slice.len(),
        start,
        end.saturating_sub(1),
        len
    )?;
    out.write_all(slice)?;
    out.flush()
}

/// A catalog entry whose file is `expected`, pinned at `revision` in [`REPO`].
fn entry(name: &str, expected: &[u8], revision: &str) -> ModelEntry {
    let shipped = Catalog::shipped().expect("shipped catalog");
    let mut e = shipped.get(DEFAULT_MODEL).expect("default entry").clone();
    e.name = name.into();
    e.source = Some(Source {
        hub_repo: REPO.into(),
        revision: revision.into(),
        file: "tiny.gguf".into(),
        sha256: sha_hex(expected),
        size: expected.len() as u64,
        alt: None,
    });
    e
}

fn online(addr: SocketAddr, hub_cache: &Path) -> FetchOptions {
    FetchOptions {
        force: false,
        progress: false,
        hub: HubAccess::Online {
            timeout: Duration::from_secs(10),
        },
        hub_cache: Some(hub_cache.to_owned()),
        hub_endpoint: Some(format!("http://{addr}")),
        wheels: Arc::new(WheelDir(hub_cache.join("no-wheels"))),
    }
}

/// Every regular file under `dir` (recursively), with its size.
fn files_under(dir: &Path) -> Vec<(PathBuf, u64)> {
    let mut out = Vec::new();
    let Ok(read) = std::fs::read_dir(dir) else {
        return out;
    };
    for item in read.flatten() {
        let path = item.path();
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        if meta.is_dir() {
            out.extend(files_under(&path));
        } else {
            out.push((path, meta.len()));
        }
    }
    out
}

#[test]
fn hub_pull_requests_the_resolve_url_and_verifies_the_sha256() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let body = gguf_like(70_001, 1);
    let (addr, seen) = fake_hub(body.clone());
    let store = Store::at(tmp.path().join("home"));
    let opts = online(addr, &tmp.path().join("hub"));
    let e = entry("tiny", &body, COMMIT);

    let got = store.ensure(&e, &opts).expect("pulled from the fake hub");
    assert_eq!(got.from, ResolvedFrom::HubDownload);
    assert_eq!(got.path, store.file_path("tiny", "tiny.gguf"));
    assert_eq!(std::fs::read(&got.path).expect("read"), body);
    assert!(
        store::marker_path(&got.path).is_file(),
        "verified marker written"
    );

    let requests = seen.lock().expect("log").clone();
    assert!(requests.len() >= 2, "metadata then data: {requests:?}");
    for r in &requests {
        assert_eq!(
            r.path,
            format!("/{REPO}/resolve/{COMMIT}/tiny.gguf"),
            "{r:?}"
        );
    }
    assert_eq!(requests[0].range.as_deref(), Some("bytes=0-0"));

    // The second time the store answers from disk, without asking the hub.
    let again = store.ensure(&e, &opts).expect("from the store");
    assert_eq!(again.from, ResolvedFrom::Store);
    assert_eq!(seen.lock().expect("log").len(), requests.len());

    // A branch name is asked for as given.
    let (addr, seen) = fake_hub(body.clone());
    let other = Store::at(tmp.path().join("home2"));
    other
        .ensure(
            &entry("tiny", &body, "main"),
            &online(addr, &tmp.path().join("hub2")),
        )
        .expect("pulled at main");
    assert!(seen
        .lock()
        .expect("log")
        .iter()
        .all(|r| r.path == format!("/{REPO}/resolve/main/tiny.gguf")));
}

#[test]
fn hub_file_with_another_sha256_is_refused_and_nothing_of_it_is_kept() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let expected = gguf_like(60_000, 2);
    let mut served = expected.clone();
    served[40_000] ^= 0x01; // same size, one bit different
    let (addr, _) = fake_hub(served.clone());
    let store = Store::at(tmp.path().join("home"));
    let hub = tmp.path().join("hub");
    let e = entry("tiny", &expected, COMMIT);

    let err = store
        .ensure(&e, &online(addr, &hub))
        .expect_err("a file with another sha256 is refused");
    let msg = err.to_string();
    assert!(matches!(err, StoreError::FetchFailed { .. }), "{err:?}");
    assert!(msg.contains("hub"), "{msg}");
    assert!(
        msg.contains(&sha_hex(&expected)),
        "names the pinned sha256: {msg}"
    );
    assert!(
        msg.contains(&sha_hex(&served)),
        "names the served sha256: {msg}"
    );
    assert!(msg.contains("does not match the catalog"), "{msg}");

    // Nothing under the model's store directory, and no copy of the bad file in the hub cache.
    let dir = store.models_dir().join("tiny");
    assert_eq!(files_under(&dir), Vec::new());
    let kept: Vec<_> = files_under(&hub)
        .into_iter()
        .filter(|(_, len)| *len == served.len() as u64)
        .collect();
    assert!(
        kept.is_empty(),
        "bad download left in the hub cache: {kept:?}"
    );
}

#[test]
fn hub_file_of_another_size_is_refused_naming_both_sizes() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let expected = gguf_like(30_000, 3);
    let served = expected[..29_000].to_vec();
    let (addr, _) = fake_hub(served);
    let store = Store::at(tmp.path().join("home"));
    let err = store
        .ensure(
            &entry("tiny", &expected, COMMIT),
            &online(addr, &tmp.path().join("hub")),
        )
        .expect_err("short file refused");
    let msg = err.to_string();
    assert!(msg.contains("30000") && msg.contains("29000"), "{msg}");
    assert_eq!(files_under(&store.models_dir().join("tiny")), Vec::new());
}

fn boyd(args: &[&str], home: &Path, endpoint: &str) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_boyd"))
        .args(args)
        .env("BOYD_HOME", home)
        .env("HF_HOME", home.join("hf"))
        .env("HF_ENDPOINT", endpoint)
        .env("BOYD_HUB_TIMEOUT_SECS", "10")
        .env("BOYD_PYTHON", home.join("no-python"))
        .env_remove("HF_HUB_OFFLINE")
        .output()
        .expect("run boyd")
}

#[test]
fn models_pull_cli_fetches_a_user_entry_from_the_hub_and_refuses_a_mismatch() {
    let home = tempfile::tempdir().expect("tempdir");
    let body = gguf_like(20_000, 4);
    let (addr, seen) = fake_hub(body.clone());
    let models = home.path().join("models");
    std::fs::create_dir_all(&models).expect("mkdir");
    let good = entry("tiny-hub", &body, COMMIT);
    std::fs::write(
        models.join("tiny-hub.toml"),
        toml::to_string(&good).expect("toml"),
    )
    .expect("write entry");
    let mut wrong = entry("tiny-bad", &gguf_like(20_000, 5), COMMIT);
    wrong.description = "pinned to other bytes than the hub serves".into();
    std::fs::write(
        models.join("tiny-bad.toml"),
        toml::to_string(&wrong).expect("toml"),
    )
    .expect("write entry");
    let endpoint = format!("http://{addr}");

    let out = boyd(
        &["models", "pull", "tiny-hub", "--json"],
        home.path(),
        &endpoint,
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(report["from"], "hub-download");
    let path = PathBuf::from(report["path"].as_str().expect("path"));
    assert_eq!(std::fs::read(&path).expect("read"), body);
    assert!(seen
        .lock()
        .expect("log")
        .iter()
        .all(|r| r.path == format!("/{REPO}/resolve/{COMMIT}/tiny.gguf")));

    let out = boyd(&["models", "pull", "tiny-bad"], home.path(), &endpoint);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "a mismatch must fail");
    assert!(
        stderr.contains("tiny-bad") && stderr.contains("does not match the catalog"),
        "{stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(files_under(&models.join("tiny-bad")), Vec::new());
}

#[test]
fn models_list_json_gives_every_pinned_entry_a_size_and_a_fit_check() {
    let home = tempfile::tempdir().expect("tempdir");
    let out = boyd(
        &["models", "list", "--json"],
        home.path(),
        "http://127.0.0.1:9",
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let rows: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).expect("json");
    let catalog = Catalog::shipped().expect("shipped");
    assert_eq!(rows.len(), catalog.len());
    for row in &rows {
        let name = row["name"].as_str().expect("name");
        let e = catalog.get(name).expect("a catalog entry");
        match &e.source {
            Some(src) => assert_eq!(row["size"].as_u64(), Some(src.size), "{name}"),
            None => assert!(row["size"].is_null(), "{name}"),
        }
        let fit = &row["fit"];
        let needs = fit["needs"].as_u64().expect("needs");
        let free = fit["free"].as_u64().expect("free");
        assert!(needs > 0, "{name}");
        assert_eq!(fit["fits"].as_bool(), Some(needs <= free), "{name}: {fit}");
        assert_eq!(
            fit["runnable"].as_bool(),
            Some(e.arch.architecture.runnable()),
            "{name}"
        );
    }
    // Larger models need more memory at the same context.
    let needs = |n: &str| {
        rows.iter()
            .find(|r| r["name"] == n)
            .and_then(|r| r["fit"]["needs"].as_u64())
            .expect("row")
    };
    assert!(needs("qwen2.5-72b") > needs("qwen2.5-32b"));
    assert!(needs("qwen2.5-32b") > needs("qwen2.5-7b"));

    let out = boyd(&["models", "list"], home.path(), "http://127.0.0.1:9");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success());
    assert!(text.contains("RUNS HERE"), "{text}");
}
