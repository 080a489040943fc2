//! The hash-chained audit log: tamper cases (edited, rehashed, deleted, reordered, truncated,
//! appended, garbled, manifest gone), crash recovery (torn last line, lagging manifest, intent
//! without outcome), and `boyd audit verify` naming the first bad record.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{json, Value};

use boyd::agent::audit::{
    verify, AuditError, AuditEvent, AuditSink, ChainLog, OutcomeStatus, ProblemKind, AUDIT_FILE,
    MANIFEST_FILE,
};
use boyd::agent::condense::sha256_hex;
use boyd::agent::guard::canonical_json;

fn intent(id: u64) -> AuditEvent {
    AuditEvent::Intent {
        action_id: id,
        cycle: id as usize,
        tool: "calculator".into(),
        args: json!({"expression": format!("{id} + 1")}),
        fingerprint: format!("{id:064x}"),
        irreversible: id == 2,
        approval: None,
        implicit: false,
        why: None,
    }
}

fn outcome(id: u64) -> AuditEvent {
    AuditEvent::Outcome {
        action_id: id,
        fingerprint: format!("{id:064x}"),
        status: OutcomeStatus::Verified,
        cost: 1.0,
        discrepancies: Vec::new(),
        output_sha256: sha256_hex(b"x"),
    }
}

/// A clean log: start, 3 intent/outcome pairs, terminal = 8 records.
fn clean_log(dir: &Path) {
    let mut log = ChainLog::create(dir).expect("create");
    log.record(
        AuditEvent::RunStarted {
            run_id: "r".into(),
            task: "t".into(),
        },
        true,
    )
    .expect("w");
    for id in 1..=3 {
        log.record(intent(id), true).expect("w");
        log.record(outcome(id), false).expect("w");
    }
    log.record(
        AuditEvent::Terminal {
            state: "completed".into(),
            detail: None,
        },
        true,
    )
    .expect("w");
}

fn lines(dir: &Path) -> Vec<String> {
    std::fs::read_to_string(dir.join(AUDIT_FILE))
        .expect("read")
        .lines()
        .map(str::to_string)
        .collect()
}

fn write_lines(dir: &Path, l: &[String]) {
    let mut text = l.join("\n");
    text.push('\n');
    std::fs::write(dir.join(AUDIT_FILE), text).expect("write");
}

/// A tampered copy of a clean log.
fn tampered(f: impl FnOnce(&Path, &mut Vec<String>)) -> (tempfile::TempDir, PathBuf) {
    let d = tempfile::tempdir().expect("tempdir");
    let p = d.path().to_path_buf();
    clean_log(&p);
    let mut l = lines(&p);
    f(&p, &mut l);
    write_lines(&p, &l);
    (d, p)
}

fn rehash(line: &str) -> String {
    let mut v: Value = serde_json::from_str(line).expect("json");
    let body = json!({"seq": v["seq"], "prev": v["prev"], "time": v["time"], "event": v["event"]});
    v["hash"] = Value::String(sha256_hex(canonical_json(&body).as_bytes()));
    v.to_string()
}

#[test]
fn a_clean_log_verifies_with_every_intent_answered() {
    let d = tempfile::tempdir().expect("tempdir");
    clean_log(d.path());
    let r = verify(d.path()).expect("verify");
    assert!(r.ok(), "{r:?}");
    assert_eq!(r.records, 8);
    assert!(r.unknown_intents.is_empty());
    assert!(r.torn_tail.is_none());
}

/// One tampered copy of the clean log and the first bad record `verify` must name.
struct Tamper {
    name: &'static str,
    edit: fn(&Path, &mut Vec<String>),
    /// (line, seq) of the first bad record.
    at: (usize, u64),
    kind: fn(&ProblemKind) -> bool,
}

/// Two forged records chained correctly after the last one; the manifest was not moved.
fn append_forged(l: &mut Vec<String>) {
    for _ in 0..2 {
        let prev: Value = serde_json::from_str(l.last().expect("last")).expect("json");
        let seq = prev["seq"].as_u64().expect("seq") + 1;
        let rec = json!({"seq": seq, "prev": prev["hash"], "time": "2026-01-01T00:00:00Z",
            "event": {"type": "terminal", "state": "completed", "detail": null}, "hash": ""});
        l.push(rehash(&rec.to_string()));
    }
}

/// Every way of tampering with a finished log, each with the first bad record.
fn tamper_table() -> Vec<Tamper> {
    vec![
        Tamper {
            name: "edited",
            edit: |_, l| l[3] = l[3].replace("\"calculator\"", "\"delete_file\""),
            at: (4, 3),
            kind: |k| *k == ProblemKind::Edited,
        },
        Tamper {
            name: "edited outcome status",
            edit: |_, l| l[4] = l[4].replace("\"verified\"", "\"failed\""),
            at: (5, 4),
            kind: |k| *k == ProblemKind::Edited,
        },
        Tamper {
            name: "edited and rehashed",
            edit: |_, l| l[3] = rehash(&l[3].replace("2 + 1", "2 + 2")),
            at: (4, 3),
            kind: |k| *k == ProblemKind::Replaced,
        },
        Tamper {
            name: "first record rehashed",
            edit: |_, l| l[0] = rehash(&l[0].replace("\"task\":\"t\"", "\"task\":\"u\"")),
            at: (1, 0),
            kind: |k| *k == ProblemKind::Replaced,
        },
        Tamper {
            name: "deleted",
            edit: |_, l| {
                l.remove(3);
            },
            at: (4, 3),
            kind: |k| {
                matches!(
                    k,
                    ProblemKind::Missing {
                        expected_seq: 3,
                        found_seq: 4
                    }
                )
            },
        },
        Tamper {
            name: "first record deleted",
            edit: |_, l| {
                l.remove(0);
            },
            at: (1, 0),
            kind: |k| {
                matches!(
                    k,
                    ProblemKind::Missing {
                        expected_seq: 0,
                        found_seq: 1
                    }
                )
            },
        },
        Tamper {
            name: "reordered",
            edit: |_, l| l.swap(2, 3),
            at: (3, 2),
            kind: |k| {
                matches!(
                    k,
                    ProblemKind::Reordered {
                        expected_seq: 2,
                        found_seq: 3
                    }
                )
            },
        },
        Tamper {
            name: "truncated",
            edit: |_, l| l.truncate(5),
            at: (6, 5),
            kind: |k| {
                matches!(
                    k,
                    ProblemKind::Truncated {
                        manifest_records: 8,
                        log_records: 5
                    }
                )
            },
        },
        Tamper {
            name: "last record rehashed (caught by the manifest)",
            edit: |_, l| {
                let last = l.len() - 1;
                l[last] = rehash(&l[last].replace("completed", "escalated"));
            },
            at: (8, 7),
            kind: |k| *k == ProblemKind::Replaced,
        },
        Tamper {
            name: "appended",
            edit: |_, l| append_forged(l),
            at: (9, 8),
            kind: |k| {
                matches!(
                    k,
                    ProblemKind::Extended {
                        manifest_records: 8
                    }
                )
            },
        },
        Tamper {
            name: "garbled middle line",
            edit: |_, l| l[2] = "{not json".into(),
            at: (3, 2),
            kind: |k| matches!(k, ProblemKind::Garbled { .. }),
        },
        Tamper {
            name: "number reformatted (same value)",
            edit: |_, l| l[2] = l[2].replace("\"cost\":1.0", "\"cost\":1.00"),
            at: (3, 2),
            kind: |k| *k == ProblemKind::Reformatted,
        },
        Tamper {
            name: "spacing added",
            edit: |_, l| l[5] = l[5].replacen("\":", "\": ", 1),
            at: (6, 5),
            kind: |k| *k == ProblemKind::Reformatted,
        },
        Tamper {
            name: "manifest deleted",
            edit: |p, _| std::fs::remove_file(p.join(MANIFEST_FILE)).expect("rm"),
            at: (0, 8),
            kind: |k| *k == ProblemKind::NoManifest,
        },
    ]
}

#[test]
fn tamper_table_names_the_first_bad_record() {
    let table = tamper_table();
    assert!(table.len() >= 6, "{} tamper cases", table.len());
    let mut failed = Vec::new();
    for t in &table {
        let (_d, p) = tampered(t.edit);
        let r = verify(&p).expect("verify");
        match &r.problem {
            None => failed.push(format!("{}: verified clean: {r:?}", t.name)),
            Some(pr) if (pr.line, pr.seq) != t.at || !(t.kind)(&pr.kind) => failed.push(format!(
                "{}: named {pr} ({:?}), expected line {} seq {}",
                t.name, pr.kind, t.at.0, t.at.1
            )),
            Some(_) => {}
        }
        assert!(!r.ok(), "{}", t.name);
    }
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}

#[test]
fn a_garbled_middle_line_is_refused_on_reopen() {
    let (_d, p) = tampered(|_, l| l[2] = "{not json".into());
    assert!(matches!(
        ChainLog::reopen(&p),
        Err(AuditError::Damaged { .. })
    ));
}

#[test]
fn a_torn_last_line_is_recovered_and_reported() {
    let d = tempfile::tempdir().expect("tempdir");
    clean_log(d.path());
    let path = d.path().join(AUDIT_FILE);
    let mut text = std::fs::read_to_string(&path).expect("read");
    let torn = "{\"seq\":8,\"prev\":\"abc";
    text.push_str(torn);
    std::fs::write(&path, &text).expect("write");
    let r = verify(d.path()).expect("verify");
    assert!(r.ok(), "{r:?}");
    assert_eq!(r.torn_tail.as_ref().map(|t| t.line), Some(9));
    let (mut log, rep) = ChainLog::reopen(d.path()).expect("reopen");
    assert!(rep.torn_tail.is_some());
    log.record(intent(9), true).expect("write");
    let r = verify(d.path()).expect("verify");
    assert!(r.ok() && r.torn_tail.is_none(), "{r:?}");
    assert_eq!(r.records, 10, "8 + recovered + intent");
    assert!(std::fs::read_to_string(&path)
        .expect("read")
        .contains(&format!("\"torn_bytes\":{}", torn.len())));
}

#[test]
fn a_crash_between_log_and_manifest_is_recoverable() {
    let d = tempfile::tempdir().expect("tempdir");
    clean_log(d.path());
    let manifest = std::fs::read_to_string(d.path().join(MANIFEST_FILE)).expect("m");
    let mut log = ChainLog::reopen(d.path()).expect("reopen").0;
    log.record(intent(4), true).expect("w");
    drop(log);
    // Put the old manifest back: as if the process died right after the log write.
    std::fs::write(d.path().join(MANIFEST_FILE), manifest).expect("w");
    let r = verify(d.path()).expect("verify");
    assert!(r.ok() && r.manifest_lag, "{r:?}");
    assert_eq!(
        r.unknown_intents.len(),
        1,
        "the intent written just before the crash"
    );
    assert_eq!(r.unknown_intents[0].action_id, 4);
}

struct Counting(usize);
impl AuditSink for Counting {
    fn record(&mut self, _e: AuditEvent, _d: bool) -> Result<(), AuditError> {
        self.0 += 1;
        Ok(())
    }
}

#[test]
fn the_sink_is_a_trait() {
    let mut c = Counting(0);
    c.record(intent(1), true).expect("w");
    assert_eq!(c.0, 1);
}

fn boyd(args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_boyd"))
        .args(args)
        .output()
        .expect("run boyd");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

#[test]
fn cli_audit_verify_says_ok_and_names_the_first_bad_record() {
    let d = tempfile::tempdir().expect("tempdir");
    clean_log(d.path());
    let p = d.path().to_string_lossy().into_owned();
    let (code, out) = boyd(&["audit", "verify", &p]);
    assert_eq!(code, 0, "{out}");
    assert!(out.starts_with("OK: 8 records"), "{out}");
    // every tampered copy: exit 1, and the first bad record named by sequence and line
    for t in tamper_table() {
        let (_d2, bad) = tampered(t.edit);
        let (code, out) = boyd(&["audit", "verify", &bad.to_string_lossy()]);
        assert_eq!(code, 1, "{}: {out}", t.name);
        let named = format!("DAMAGED: first bad record {} (line {})", t.at.1, t.at.0);
        assert!(out.starts_with(&named), "{}: {out}", t.name);
    }
    // a torn last line alone is recoverable, not damage
    let path = d.path().join(AUDIT_FILE);
    let mut text = std::fs::read_to_string(&path).expect("read");
    text.push_str("{\"seq\":8,\"pr");
    std::fs::write(&path, text).expect("write");
    let (code, out) = boyd(&["audit", "verify", &p]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("recoverable: a torn last line"), "{out}");
}
