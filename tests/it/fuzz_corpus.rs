//! Replays of what the fuzzers (`fuzz/`) found, saved under `tests/corpus/<target>/`, through
//! the same checks the fuzz targets make, plus regression tests named after each bug.

use std::io::Cursor;
use std::path::{Path, PathBuf};

use boyd::agent::approval::ApprovalKey;
use boyd::agent::audit::{
    verify_bytes_with_key, AuditEvent, AuditSink, ChainLog, Manifest, OutcomeStatus, VerifyReport,
    AUDIT_FILE, MANIFEST_FILE,
};
use boyd::agent::parse::parse_action;
use boyd::agent::tools::{Sandbox, SandboxError};
use boyd::runtime::gguf::{GgufHeader, HeaderLimits};
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
            GgufHeader::read(
                Cursor::new(&bytes),
                bytes.len() as u64,
                HeaderLimits::default(),
            )
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

// ---------------------------------------------------------------------------------------------
// audit_recovery: the same fixture and the same four modes as `fuzz/fuzz_targets/audit_recovery.rs`

/// A finished log written by `ChainLog` under a key, with the manifest after every record.
struct AuditFixture {
    _dir: tempfile::TempDir,
    /// The key it was written with (every check verifies the records' MACs under it).
    key: ApprovalKey,
    log: Vec<u8>,
    manifest: Manifest,
    /// The manifest after 0, 1, 2, … records.
    manifests: Vec<Manifest>,
    records: usize,
    path: PathBuf,
}

fn read_manifest(dir: &Path) -> Manifest {
    serde_json::from_str(&std::fs::read_to_string(dir.join(MANIFEST_FILE)).expect("manifest"))
        .expect("manifest json")
}

fn audit_fixture() -> AuditFixture {
    let dir = tempfile::tempdir().expect("tempdir");
    let key = ApprovalKey::from_bytes([9; 32]);
    let mut log = ChainLog::create_with_key(dir.path(), Some(key.clone())).expect("create");
    let mut manifests = vec![read_manifest(dir.path())];
    let events = vec![
        AuditEvent::RunStarted {
            run_id: "run-1".into(),
            task: "count the lines".into(),
        },
        AuditEvent::Intent {
            action_id: 1,
            cycle: 1,
            tool: "shell".into(),
            args: serde_json::json!({"command": "wc -l notes.txt"}),
            fingerprint: "f1".into(),
            irreversible: false,
            approval: None,
            implicit: false,
            why: None,
        },
        AuditEvent::Outcome {
            action_id: 1,
            fingerprint: "f1".into(),
            status: OutcomeStatus::Verified,
            cost: 1.0,
            discrepancies: vec![],
            output_sha256: "00".repeat(32),
        },
        AuditEvent::Intent {
            action_id: 2,
            cycle: 2,
            tool: "write_file".into(),
            args: serde_json::json!({"path": "out.txt"}),
            fingerprint: "f2".into(),
            irreversible: true,
            approval: Some("ab".repeat(32)),
            implicit: false,
            why: None,
        },
        AuditEvent::Terminal {
            state: "completed".into(),
            detail: None,
        },
    ];
    let records = events.len();
    for e in events {
        log.record(e, false).expect("record");
        manifests.push(read_manifest(dir.path()));
    }
    let path = dir.path().join(AUDIT_FILE);
    let bytes = std::fs::read(&path).expect("read log");
    AuditFixture {
        key,
        log: bytes,
        manifest: read_manifest(dir.path()),
        manifests,
        records,
        path,
        _dir: dir,
    }
}

impl AuditFixture {
    /// `verify_bytes` with the fixture's key.
    fn verify(&self, data: &[u8], manifest: Option<&Manifest>) -> VerifyReport {
        verify_bytes_with_key(&self.path, data, manifest, Some(&self.key))
    }
}

/// Whether a report is indistinguishable from the untouched log's.
fn looks_clean(r: &VerifyReport, f: &AuditFixture, clean: &VerifyReport) -> bool {
    r.ok() && r.torn_tail.is_none() && r.records == f.records && r.head == clean.head
}

/// The fuzz target's invariants for one input; `Err` names the violated one.
fn check_audit_input(f: &AuditFixture, input: &[u8]) -> Result<(), String> {
    let Some((&mode, rest)) = input.split_first() else {
        return Ok(());
    };
    let clean = f.verify(&f.log, Some(&f.manifest));
    if !looks_clean(&clean, f, &clean) {
        return Err(format!("the untouched log does not verify: {clean:?}"));
    }
    match mode % 4 {
        0 => {
            for m in [None, Some(&f.manifest)] {
                let r = f.verify(rest, m);
                if r.records > rest.split(|&b| b == b'\n').count() {
                    return Err(format!("more records than lines: {r:?}"));
                }
                if let Some(t) = &r.torn_tail {
                    if t.offset as usize + t.bytes > rest.len() {
                        return Err(format!("torn tail past the end: {t:?}"));
                    }
                }
            }
        }
        1 => {
            let Some(b) = rest.get(..2) else {
                return Ok(());
            };
            let cut = u16::from_le_bytes([b[0], b[1]]) as usize % (f.log.len() + 1);
            let data = &f.log[..cut];
            let complete = data.iter().filter(|&&b| b == b'\n').count();
            let mut manifests = vec![&f.manifests[complete]];
            if complete > 0 && data.last() == Some(&b'\n') {
                manifests.push(&f.manifests[complete - 1]);
            }
            for m in manifests {
                let r = f.verify(data, Some(m));
                if r.problem.is_some() || r.records > f.records {
                    return Err(format!("a crash cut at {cut} is reported as damage: {r:?}"));
                }
            }
        }
        2 => {
            let mut data = f.log.clone();
            for pair in rest.chunks_exact(3) {
                let at = u16::from_le_bytes([pair[0], pair[1]]) as usize % data.len();
                data[at] = pair[2];
            }
            if data != f.log && looks_clean(&f.verify(&data, Some(&f.manifest)), f, &clean) {
                return Err(format!(
                    "byte-edited log verified clean: {:?}",
                    String::from_utf8_lossy(&data)
                ));
            }
        }
        _ => {
            let mut ls: Vec<Vec<u8>> = f
                .log
                .split_inclusive(|&b| b == b'\n')
                .map(<[u8]>::to_vec)
                .collect();
            for op in rest.chunks_exact(3) {
                if ls.is_empty() {
                    break;
                }
                let i = op[1] as usize % ls.len();
                let j = op[2] as usize % ls.len();
                match op[0] % 3 {
                    0 => {
                        ls.remove(i);
                    }
                    1 => ls.swap(i, j),
                    _ => {
                        let l = ls[i].clone();
                        ls.insert(j, l);
                    }
                }
            }
            let data = ls.concat();
            if data != f.log && looks_clean(&f.verify(&data, Some(&f.manifest)), f, &clean) {
                return Err(format!(
                    "reordered log verified clean: {:?}",
                    String::from_utf8_lossy(&data)
                ));
            }
        }
    }
    Ok(())
}

/// Every saved audit input keeps the fuzz target's invariants: no panic, a crash cut is never
/// damage, and no byte edit or line deletion, swap or duplication verifies as clean.
#[test]
fn corpus_audit_recovery_replays() {
    let f = audit_fixture();
    let files = corpus("audit_recovery");
    assert!(!files.is_empty(), "tests/corpus/audit_recovery is empty");
    let failed: Vec<String> = files
        .iter()
        .filter_map(|path| {
            let bytes = std::fs::read(path).expect("read corpus file");
            check_audit_input(&f, &bytes)
                .err()
                .map(|e| format!("{}: {e}", path.display()))
        })
        .collect();
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}

/// What the replay relies on: a swap of two records or a flipped hash byte is caught, and a
/// cut is only clean against the manifest a crash there leaves, not the final one.
#[test]
fn audit_replay_checks_catch_tampering() {
    let f = audit_fixture();
    let cut = &f.log[..f.log.len() / 2];
    assert!(f.verify(cut, Some(&f.manifest)).problem.is_some());
    // mode 3, op "swap lines 1 and 2"
    assert!(check_audit_input(&f, &[3, 1, 1, 2]).is_ok());
    let r = f.verify(&f.log, Some(&f.manifest));
    assert!(looks_clean(&r, &f, &r));
    // swapping two lines by hand gives a report that is not clean
    let mut ls: Vec<&[u8]> = f.log.split_inclusive(|&b| b == b'\n').collect();
    ls.swap(1, 2);
    let swapped = ls.concat();
    let r2 = f.verify(&swapped, Some(&f.manifest));
    assert!(!looks_clean(&r2, &f, &r), "{r2:?}");
    // a flipped byte in the middle of the first hash
    let at = f
        .log
        .windows(8)
        .position(|w| w == b"\"hash\":\"")
        .expect("hash")
        + 10;
    let mut flipped = f.log.clone();
    flipped[at] = if flipped[at] == b'0' { b'1' } else { b'0' };
    assert!(!f.verify(&flipped, Some(&f.manifest)).ok());
    let input = [2, (at & 0xff) as u8, (at >> 8) as u8, flipped[at]];
    assert!(check_audit_input(&f, &input).is_ok());
    // a flipped byte in the first record's MAC (which the hashes do not cover)
    let at = f
        .log
        .windows(7)
        .position(|w| w == b"\"mac\":\"")
        .expect("mac")
        + 9;
    let mut flipped = f.log.clone();
    flipped[at] = if flipped[at] == b'0' { b'1' } else { b'0' };
    assert!(!f.verify(&flipped, Some(&f.manifest)).ok());
    let input = [2, (at & 0xff) as u8, (at >> 8) as u8, flipped[at]];
    assert!(check_audit_input(&f, &input).is_ok());
}

/// Regression (found by `fuzz/audit_recovery`, saved as
/// `tests/corpus/audit_recovery/crash-final-newline-to-space`): the hashes cover a record's
/// values, not its bytes, so a log whose last newline became a space, or whose `1.0` became
/// `1.00`, verified clean. Verification now also requires each line to be exactly what the
/// writer wrote.
#[test]
fn audit_verify_refuses_a_final_newline_turned_into_a_space() {
    use boyd::agent::audit::ProblemKind;
    let f = audit_fixture();
    let mut data = f.log.clone();
    let last = data.len() - 1;
    assert_eq!(data[last], b'\n');
    data[last] = b' ';
    let r = f.verify(&data, Some(&f.manifest));
    let p = r.problem.expect("a reformatted last line is damage");
    assert_eq!(
        (p.line, p.seq, p.kind),
        (f.records, f.records as u64 - 1, ProblemKind::Reformatted)
    );
    // the same value written differently
    let text = String::from_utf8(f.log.clone()).expect("utf8");
    let edited = text.replacen("\"cost\":1.0", "\"cost\":1.00", 1);
    assert_ne!(edited, text);
    let r = f.verify(edited.as_bytes(), Some(&f.manifest));
    assert_eq!(r.problem.map(|p| p.kind), Some(ProblemKind::Reformatted));
    // a crash right before the last newline is still only a cut, not damage
    let r = f.verify(&f.log[..last], Some(&f.manifest));
    assert!(r.ok(), "{r:?}");
}
