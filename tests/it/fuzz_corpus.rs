//! Replays of what the fuzzers (`fuzz/`) found, saved under `tests/corpus/<target>/`, through
//! the same checks the fuzz targets make, plus regression tests named after each bug.

use std::io::Cursor;
use std::path::{Path, PathBuf};

use boyd::agent::parse::parse_action;
use boyd::agent::tools::{Sandbox, SandboxError};
use boyd::runtime::gguf::{GgufHeader, Limits};
use boyd::runtime::tokenizer::GgufTokenizer;

use crate::alloc::measure;

/// The files of `tests/corpus/<target>/`, sorted.
fn corpus(target: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/corpus")
        .join(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.path())
                .filter(|p| p.is_file())
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    files
}

/// Every saved GGUF input is read without a panic and with memory bounded by its size;
/// files named `*.ok` must be accepted, all others refused.
#[test]
fn corpus_gguf_header_replays() {
    for path in corpus("gguf_header") {
        let bytes = std::fs::read(&path).expect("read corpus file");
        let (res, s) = measure(|| {
            GgufHeader::read(Cursor::new(&bytes), bytes.len() as u64, Limits::default())
                .and_then(|h| h.check_data(bytes.len() as u64).map(|()| h))
                .map(|h| {
                    // what a loader does next with a valid header
                    let _ = h.arch_params();
                    let _ = GgufTokenizer::from_header(&h);
                })
        });
        let ok_expected = path.extension().is_some_and(|e| e == "ok");
        assert_eq!(res.is_ok(), ok_expected, "{}: {res:?}", path.display());
        assert!(
            s.peak < 64 * (bytes.len() as u64) + (4 << 20),
            "{}: {s:?}",
            path.display()
        );
    }
}

/// Every saved planner text parses or fails with a typed error, never a panic.
#[test]
fn corpus_action_parser_replays() {
    for path in corpus("action_parser") {
        let bytes = std::fs::read(&path).expect("read corpus file");
        let text = String::from_utf8_lossy(&bytes);
        if let Err(e) = parse_action(&text) {
            assert!(!e.for_model().is_empty());
        }
    }
}

/// A workspace like the fuzz target's: files, and symlinks that point inside and outside.
struct Workspace {
    _dir: tempfile::TempDir,
    outside: PathBuf,
    sandbox: Sandbox,
}

fn workspace() -> Workspace {
    let dir = tempfile::tempdir().expect("tempdir");
    let outside = dir.path().canonicalize().expect("canon");
    let root = outside.join("ws");
    std::fs::create_dir_all(root.join("sub/deeper")).expect("mkdir");
    std::fs::write(root.join("notes.txt"), "hi").expect("write");
    std::fs::write(outside.join("secret.txt"), "secret").expect("write");
    #[cfg(unix)]
    {
        use std::os::unix::fs::symlink;
        symlink(&outside, root.join("out")).expect("ln");
        symlink(outside.join("secret.txt"), root.join("s")).expect("ln");
        symlink("../../..", root.join("sub/deeper/up")).expect("ln");
        symlink("../notes.txt", root.join("sub/n")).expect("ln");
        symlink("sub", root.join("d")).expect("ln");
        symlink(outside.join("missing"), root.join("dangling")).expect("ln");
    }
    let sandbox = Sandbox::new(&root).expect("sandbox");
    Workspace {
        _dir: dir,
        outside,
        sandbox,
    }
}

fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// The fuzz target's invariants for one path.
fn check_path(ws: &Workspace, path: &str) {
    let root = ws.sandbox.root();
    let before = names(&ws.outside);
    if let Ok(p) = ws.sandbox.resolve(path) {
        assert!(p.starts_with(root), "{path:?} escaped to {p:?}");
    }
    if let Ok((p, _)) = ws.sandbox.open_file(path) {
        assert!(p.starts_with(root), "{path:?} opened {p:?}");
    }
    if let Ok(p) = ws.sandbox.prepare_write(path) {
        assert!(p.starts_with(root), "{path:?} prepared {p:?}");
    }
    assert_eq!(
        names(&ws.outside),
        before,
        "{path:?} created something outside the workspace"
    );
}

#[cfg(unix)]
#[test]
fn corpus_sandbox_path_replays() {
    let ws = workspace();
    for path in corpus("sandbox_path") {
        let bytes = std::fs::read(&path).expect("read corpus file");
        if let Ok(p) = std::str::from_utf8(&bytes) {
            check_path(&ws, p);
        }
    }
}

/// Regression (found while writing `fuzz/sandbox_path`, whose invariant catches it):
/// `prepare_write("out/x/f.txt")`, where `out` is a symlink to a directory outside the
/// workspace, created `x` outside before refusing the path.
#[cfg(unix)]
#[test]
fn prepare_write_through_an_escaping_symlink_creates_nothing_outside() {
    let ws = workspace();
    for path in [
        "out/x/f.txt",
        "out/x/y/z/f.txt",
        "sub/deeper/up/x/f.txt",
        "d/deeper/up/x/f.txt",
        "dangling/x/f.txt",
        "s/x/f.txt",
    ] {
        match ws.sandbox.prepare_write(path) {
            Err(SandboxError::Escape { .. }) => {}
            other => panic!("{path:?}: expected Escape, got {other:?}"),
        }
        check_path(&ws, path);
    }
    // inside the workspace, through an inner symlink, still works
    let p = ws.sandbox.prepare_write("d/new/f.txt").expect("inside");
    assert!(p.starts_with(ws.sandbox.root().join("sub/new")), "{p:?}");
    assert!(ws.sandbox.root().join("sub/new").is_dir());
    // a file in the way is an error, not a panic
    assert!(ws.sandbox.prepare_write("notes.txt/f.txt").is_err());
}
