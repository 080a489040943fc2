//! Issue 40, attacks 6b and 7, tried as an attacker would: someone who can write the run
//! directory and compute SHA-256, but does not hold the approval key.
//!
//! - A record appended byte for byte as the log writer writes it (hash chained to the head) once
//!   verified "intact, signed by this key", and `boyd resume` re-signed over it; each record now
//!   carries an HMAC over the chain head, so the forged record is named and the run cannot be
//!   continued (nothing is written).
//! - A middle record edited with every later hash recomputed is named at the edited record.
//! - A log written before records carried a MAC still verifies, as LEGACY (not "signed"), and a
//!   record appended to it is refused.
//! - `boyd approve` refuses a fingerprint the run is not waiting for.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use serde_json::json;

use boyd::agent::approval::ApprovalKey;
use boyd::agent::audit::{
    verify_with_key, AuditError, AuditEvent, AuditRecord, AuditSink, ChainLog, ProblemKind,
    RecordMacs, SignatureCheck, AUDIT_FILE, MANIFEST_FILE,
};
use boyd::agent::condense::sha256_hex;
use boyd::agent::guard::canonical_json;
use boyd::agent::ooda::decide::{Candidate, ScriptedDecider, ScriptedDecision};
use boyd::agent::ooda::orient::ScriptedOrienter;
use boyd::agent::ooda::{Ooda, OodaError, OodaState};
use boyd::agent::rundir::RunDir;
use boyd::agent::tools::{Sandbox, Toolset};
use boyd::lm::CancelToken;

use super::attacks_trust::{quiet, Launch};

/// A config directory holding the approval key, a home for runs, a workspace.
struct Lab {
    _tmp: tempfile::TempDir,
    cfg: PathBuf,
    home: PathBuf,
    ws: PathBuf,
}

impl Lab {
    fn new() -> Self {
        let tmp = tempfile::tempdir().expect("tempdir");
        let cfg = tmp.path().join("cfg");
        let home = tmp.path().join("home");
        let ws = tmp.path().join("ws");
        for d in [&cfg, &home, &ws] {
            std::fs::create_dir_all(d).expect("mkdir");
        }
        ApprovalKey::load_or_create(&cfg).expect("key");
        let ws = ws.canonicalize().expect("canon");
        Self {
            _tmp: tmp,
            cfg,
            home,
            ws,
        }
    }

    fn key(&self) -> ApprovalKey {
        ApprovalKey::load_or_create(&self.cfg).expect("key")
    }

    fn boyd(&self) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_boyd"));
        c.env("BOYD_HOME", &self.home)
            .env("BOYD_CONFIG_DIR", &self.cfg)
            .env("HF_HUB_OFFLINE", "1")
            .env("BOYD_PYTHON", "/nonexistent/python3")
            .env_remove("BOYD_MODEL");
        c
    }

    /// `boyd audit verify DIR`: exit code and stdout.
    fn audit_verify(&self, dir: &Path) -> (Option<i32>, String) {
        let out = self
            .boyd()
            .args(["audit", "verify", &dir.to_string_lossy()])
            .output()
            .expect("boyd audit verify");
        (out.status.code(), text(&out))
    }
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn intent(id: u64) -> AuditEvent {
    AuditEvent::Intent {
        action_id: id,
        cycle: id as usize,
        tool: "calculator".into(),
        args: json!({"expression": format!("{id} + 1")}),
        fingerprint: format!("{id:064x}"),
        irreversible: false,
        approval: None,
        implicit: false,
        why: None,
    }
}

/// A run's chain of 6 records, written under `key`.
fn signed_chain(dir: &Path, key: &ApprovalKey) {
    let mut log = ChainLog::create_with_key(dir, Some(key.clone())).expect("create");
    log.record(
        AuditEvent::RunStarted {
            run_id: "r".into(),
            task: "t".into(),
        },
        true,
    )
    .expect("w");
    for id in 1..=4 {
        log.record(intent(id), true).expect("w");
    }
    log.record(
        AuditEvent::Terminal {
            state: "escalated".into(),
            detail: None,
        },
        true,
    )
    .expect("w");
}

fn read_lines(dir: &Path) -> Vec<String> {
    std::fs::read_to_string(dir.join(AUDIT_FILE))
        .expect("read")
        .lines()
        .map(str::to_string)
        .collect()
}

fn write_lines(dir: &Path, lines: &[String]) {
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(dir.join(AUDIT_FILE), text).expect("write");
}

/// What an attacker without the key computes: the record's hash, the SHA-256 of the canonical
/// JSON of its other fields.
fn attacker_hash(r: &AuditRecord) -> String {
    let event = serde_json::to_value(&r.event).expect("event");
    let body = json!({"seq": r.seq, "prev": r.prev, "time": r.time, "event": event});
    sha256_hex(canonical_json(&body).as_bytes())
}

/// `event` appended after the last record, chained to it and written byte for byte as the log
/// writer writes a record, with `mac` (none, or one the attacker made up or copied).
fn append_forged(dir: &Path, event: AuditEvent, mac: Option<String>) -> u64 {
    let mut lines = read_lines(dir);
    let last: AuditRecord = serde_json::from_str(lines.last().expect("last")).expect("record");
    let mut rec = AuditRecord {
        seq: last.seq + 1,
        prev: last.hash.clone(),
        time: last.time.clone(),
        event,
        hash: String::new(),
        mac,
    };
    rec.hash = attacker_hash(&rec);
    lines.push(serde_json::to_string(&rec).expect("ser"));
    write_lines(dir, &lines);
    rec.seq
}

fn the_log_says_run_go() -> AuditEvent {
    AuditEvent::Terminal {
        state: "completed".into(),
        detail: Some("approved by the operator".into()),
    }
}

fn files(dir: &Path) -> (Vec<u8>, Vec<u8>) {
    (
        std::fs::read(dir.join(AUDIT_FILE)).expect("log"),
        std::fs::read(dir.join(MANIFEST_FILE)).expect("manifest"),
    )
}

#[test]
fn a_byte_exact_record_appended_without_the_key_fails_verification_and_is_named() {
    let lab = Lab::new();
    let key = lab.key();
    // (name, the MAC the forged record carries, the problem expected)
    let previous_mac = |d: &Path| -> Option<String> {
        let l = read_lines(d);
        let last: AuditRecord = serde_json::from_str(l.last().expect("last")).expect("record");
        last.mac
    };
    type Mac = Box<dyn Fn(&Path) -> Option<String>>;
    let cases: Vec<(&str, Mac, ProblemKind)> = vec![
        ("no MAC", Box::new(|_| None), ProblemKind::Unsigned),
        (
            "a made-up MAC",
            Box::new(|_| Some("ab".repeat(32))),
            ProblemKind::BadMac,
        ),
        (
            "the previous record's MAC copied",
            Box::new(previous_mac),
            ProblemKind::BadMac,
        ),
        (
            "a MAC of the right record under another key",
            Box::new(|_| None),
            ProblemKind::BadMac,
        ),
    ];
    for (i, (name, mac, kind)) in cases.iter().enumerate() {
        let d = tempfile::tempdir().expect("dir");
        signed_chain(d.path(), &key);
        let seq = if i == 3 {
            // The attacker signs with a key of their own: the MAC is well formed, not ours.
            let other = ApprovalKey::from_bytes([7; 32]);
            let mut lines = read_lines(d.path());
            let last: AuditRecord =
                serde_json::from_str(lines.last().expect("last")).expect("record");
            let mut rec = AuditRecord {
                seq: last.seq + 1,
                prev: last.hash.clone(),
                time: last.time.clone(),
                event: the_log_says_run_go(),
                hash: String::new(),
                mac: None,
            };
            rec.hash = attacker_hash(&rec);
            rec.mac = Some(other.sign_bytes(
                "boyd-audit-record-v1",
                format!("{}\n{}", rec.seq, rec.hash).as_bytes(),
            ));
            lines.push(serde_json::to_string(&rec).expect("ser"));
            write_lines(d.path(), &lines);
            rec.seq
        } else {
            append_forged(d.path(), the_log_says_run_go(), mac(d.path()))
        };
        assert_eq!(seq, 6, "{name}");
        // The forged line passes every check that needs no key: hashes, chain, byte form (the
        // manifest, one record behind, reads as a crash between two writes).
        let unkeyed = verify_with_key(d.path(), None).expect("verify");
        assert!(unkeyed.ok() && unkeyed.manifest_lag, "{name}: {unkeyed:?}");
        // With the key the forged record is the first bad one.
        let r = verify_with_key(d.path(), Some(&key)).expect("verify");
        let p = r
            .problem
            .as_ref()
            .unwrap_or_else(|| panic!("{name}: verified: {r:?}"));
        assert_eq!((p.line, p.seq, &p.kind), (7, 6, kind), "{name}: {p}");
        assert_eq!(r.signature, SignatureCheck::Valid, "{name}");
        let (code, out) = lab.audit_verify(d.path());
        assert_eq!(code, Some(1), "{name}: {out}");
        assert!(
            out.starts_with("DAMAGED: first bad record 6 (line 7)"),
            "{name}: {out}"
        );
        assert!(!out.contains("signed by this key"), "{name}: {out}");
    }
}

#[test]
fn a_middle_record_edited_and_every_later_hash_recomputed_fails_at_that_record() {
    let lab = Lab::new();
    let key = lab.key();
    for strip_macs in [false, true] {
        let d = tempfile::tempdir().expect("dir");
        signed_chain(d.path(), &key);
        let mut lines = read_lines(d.path());
        let mut prev: Option<String> = None;
        for (i, line) in lines.iter_mut().enumerate().skip(2) {
            let mut r: AuditRecord = serde_json::from_str(line).expect("record");
            if i == 2 {
                if let AuditEvent::Intent { tool, args, .. } = &mut r.event {
                    *tool = "shell".into();
                    *args = json!({"command": "rm -rf ~"});
                }
            }
            if let Some(p) = &prev {
                r.prev = p.clone();
            }
            r.hash = attacker_hash(&r);
            if strip_macs {
                r.mac = None;
            }
            prev = Some(r.hash.clone());
            *line = serde_json::to_string(&r).expect("ser");
        }
        write_lines(d.path(), &lines);
        let r = verify_with_key(d.path(), Some(&key)).expect("verify");
        let p = r.problem.as_ref().expect("a problem");
        let kind = if strip_macs {
            ProblemKind::Unsigned
        } else {
            ProblemKind::BadMac
        };
        assert_eq!(
            (p.line, p.seq, &p.kind),
            (3, 2, &kind),
            "strip {strip_macs}: {p}"
        );
        let (code, out) = lab.audit_verify(d.path());
        assert_eq!(code, Some(1), "{out}");
        assert!(
            out.starts_with("DAMAGED: first bad record 2 (line 3)"),
            "{out}"
        );
    }
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

/// An OODA run in the lab's home that escalated on `launch {"n": 1}`, signed with the lab's
/// key: (run dir, run id, pending fingerprint).
fn escalated_run(lab: &Lab, tools: &Toolset) -> (PathBuf, String, String) {
    rt().block_on(async {
        let mut d = ScriptedDecider::new([ScriptedDecision::Propose(vec![Candidate::tool(
            "launch",
            json!({"n": 1}),
        )])]);
        let mut o = ScriptedOrienter::new([]);
        let mut ooda = Ooda::new(&mut d, &mut o, tools, CancelToken::new());
        ooda.config = quiet();
        ooda.approval_key = Some(lab.key());
        ooda.workspace = Some(Sandbox::new(&lab.ws).expect("sandbox"));
        let out = ooda
            .run(
                "launch it",
                RunDir::create(&lab.home).expect("run"),
                &mut |_| {},
            )
            .await
            .expect("run");
        assert_eq!(out.state, OodaState::Escalated, "{out:?}");
        let fp = out.pending_fingerprint.clone().expect("pending");
        (out.run_dir, out.run_id, fp)
    })
}

#[test]
fn resume_refuses_to_extend_a_forged_chain_and_writes_nothing() {
    let lab = Lab::new();
    let calls = Arc::new(AtomicUsize::new(0));
    let tools = Toolset::builtin(None).with(Launch {
        calls: calls.clone(),
    });
    let (run, run_id, fp) = escalated_run(&lab, &tools);
    let forged_seq = append_forged(&run, the_log_says_run_go(), None);
    let before = files(&run);
    let token = lab
        .key()
        .issue(&run_id, &fp, std::time::Duration::from_secs(900));
    // The library: a typed error naming the forged record, before any record is written.
    let err = rt().block_on(async {
        let mut d = ScriptedDecider::new([]);
        let mut o = ScriptedOrienter::new([]);
        let mut ooda = Ooda::new(&mut d, &mut o, &tools, CancelToken::new());
        ooda.config = quiet();
        ooda.approval_key = Some(lab.key());
        ooda.workspace = Some(Sandbox::new(&lab.ws).expect("sandbox"));
        ooda.resume(&run, Some(&token), &mut |_| {}).await
    });
    match &err {
        Err(OodaError::Audit(AuditError::Damaged { problem, .. })) => {
            assert_eq!(
                (problem.seq, &problem.kind),
                (forged_seq, &ProblemKind::Unsigned)
            );
        }
        other => panic!("resumed over a forged chain: {other:?}"),
    }
    let named = format!("record {forged_seq} (line {})", forged_seq + 1);
    let msg = err.err().map(|e| e.to_string()).unwrap_or_default();
    assert!(
        msg.contains("does not verify") && msg.contains(&named),
        "{msg}"
    );
    assert_eq!(files(&run), before, "the library wrote to the forged chain");
    assert_eq!(calls.load(Ordering::SeqCst), 0, "the action ran");

    // The binary: the same refusal, with a real (synthetic) model loaded.
    let model = lab.home.join("tiny.gguf");
    let mut spec = boyd::runtime::synth::SynthSpec::tiny(boyd::sizing::Architecture::Llama);
    spec.context_length = 8192;
    boyd::runtime::synth::write(&spec, &model).expect("synthetic model");
    let out = lab
        .boyd()
        .args(["--model", &model.to_string_lossy(), "resume", &run_id])
        .args(["--approve", &token, "--max-loops", "1"])
        .args(["--orient", "rules", "--no-memory"])
        .output()
        .expect("boyd resume");
    let t = text(&out);
    assert!(!out.status.success(), "{t}");
    assert!(t.contains("does not verify") && t.contains(&named), "{t}");
    assert_eq!(files(&run), before, "boyd resume wrote to the forged chain");
}

#[test]
fn a_legacy_log_verifies_as_unsigned_records_and_refuses_an_appended_one() {
    let lab = Lab::new();
    let key = lab.key();
    let d = tempfile::tempdir().expect("dir");
    signed_chain(d.path(), &key);
    // A log as written before records carried a MAC: the same lines without `mac`.
    let legacy: Vec<String> = read_lines(d.path())
        .iter()
        .map(|l| {
            let mut r: AuditRecord = serde_json::from_str(l).expect("record");
            r.mac = None;
            serde_json::to_string(&r).expect("ser")
        })
        .collect();
    write_lines(d.path(), &legacy);
    let r = verify_with_key(d.path(), Some(&key)).expect("verify");
    assert!(r.ok(), "{r:?}");
    assert_eq!(
        (r.signature, r.record_macs),
        (SignatureCheck::Valid, RecordMacs::Unsigned)
    );
    let (code, out) = lab.audit_verify(d.path());
    assert_eq!(code, Some(0), "{out}");
    assert!(out.starts_with("LEGACY: 6 records"), "{out}");
    assert!(out.contains("records are unsigned"), "{out}");
    assert!(!out.contains("signed by this key\n"), "{out}");

    // Appended to a legacy log: nothing tells it from a crash but the key, so it is refused.
    let forged = tempfile::tempdir().expect("dir");
    for f in [AUDIT_FILE, MANIFEST_FILE] {
        std::fs::copy(d.path().join(f), forged.path().join(f)).expect("copy");
    }
    append_forged(forged.path(), the_log_says_run_go(), None);
    let r = verify_with_key(forged.path(), Some(&key)).expect("verify");
    let p = r.problem.as_ref().expect("refused");
    assert_eq!((p.line, p.seq, &p.kind), (7, 6, &ProblemKind::Unsigned));
    let (code, out) = lab.audit_verify(forged.path());
    assert_eq!(code, Some(1), "{out}");
    let before = files(forged.path());
    assert!(matches!(
        ChainLog::reopen_with_key(forged.path(), Some(key.clone())),
        Err(AuditError::Damaged { .. })
    ));
    assert_eq!(files(forged.path()), before);

    // A legacy log continued under the key: its new records (a `recovered` one for the intents
    // without outcome, then an intent) are signed, and their MACs cover the old ones through the
    // chain.
    let (mut log, _) = ChainLog::reopen_with_key(d.path(), Some(key.clone())).expect("reopen");
    log.record(intent(5), true).expect("w");
    drop(log);
    let r = verify_with_key(d.path(), Some(&key)).expect("verify");
    assert!(r.ok(), "{r:?}");
    assert_eq!(r.record_macs, RecordMacs::Signed);
    let (code, out) = lab.audit_verify(d.path());
    assert_eq!(code, Some(0), "{out}");
    assert!(out.starts_with("OK: 8 records"), "{out}");
}

#[test]
fn a_signed_record_written_just_before_a_crash_is_still_recovered() {
    let lab = Lab::new();
    let key = lab.key();
    let d = tempfile::tempdir().expect("dir");
    signed_chain(d.path(), &key);
    let (mut log, _) = ChainLog::reopen_with_key(d.path(), Some(key.clone())).expect("reopen");
    let manifest = std::fs::read(d.path().join(MANIFEST_FILE)).expect("m");
    log.record(intent(9), true).expect("w");
    drop(log);
    // The process died between the log write and the manifest write.
    std::fs::write(d.path().join(MANIFEST_FILE), manifest).expect("w");
    let r = verify_with_key(d.path(), Some(&key)).expect("verify");
    assert!(r.ok() && r.manifest_lag, "{r:?}");
    assert_eq!(r.record_macs, RecordMacs::Signed);
    let (mut log, rep) = ChainLog::reopen_with_key(d.path(), Some(key.clone())).expect("reopen");
    assert_eq!(rep.unknown_intents.len(), 1, "{rep:?}");
    log.record(intent(10), true).expect("w");
    drop(log);
    let r = verify_with_key(d.path(), Some(&key)).expect("verify");
    assert!(r.ok() && !r.manifest_lag, "{r:?}");
}

#[test]
fn approve_refuses_a_fingerprint_the_run_is_not_waiting_for() {
    let lab = Lab::new();
    let tools = Toolset::builtin(None).with(Launch {
        calls: Arc::new(AtomicUsize::new(0)),
    });
    let (_run, run_id, fp) = escalated_run(&lab, &tools);
    let other = boyd::agent::guard::fingerprint("launch", &json!({"n": 2}));
    assert_ne!(other, fp);
    let out = lab
        .boyd()
        .args(["approve", &run_id, &other])
        .output()
        .expect("boyd approve");
    let t = text(&out);
    assert!(!out.status.success(), "{t}");
    assert!(
        t.contains(&format!("not waiting for action {other}")) && t.contains(&fp),
        "names the fingerprint the run waits for: {t}"
    );
    assert!(
        String::from_utf8_lossy(&out.stdout).trim().is_empty(),
        "a token was printed: {t}"
    );
    // The one it waits for is signed.
    let out = lab
        .boyd()
        .args(["approve", &run_id, &fp])
        .output()
        .expect("boyd approve");
    let t = text(&out);
    assert!(out.status.success(), "{t}");
    let token = String::from_utf8_lossy(&out.stdout).trim().to_string();
    lab.key()
        .check(&token, &run_id, &fp)
        .expect("a token for the pending action");
}

/// The sink is what `ChainLog` implements: a forged line cannot come from it.
#[test]
fn every_record_the_writer_signs_carries_a_mac() {
    let lab = Lab::new();
    let d = tempfile::tempdir().expect("dir");
    let mut log = ChainLog::create_with_key(d.path(), Some(lab.key())).expect("create");
    log.record(intent(1), false).expect("w");
    drop(log);
    for l in read_lines(d.path()) {
        let r: AuditRecord = serde_json::from_str(&l).expect("record");
        assert!(r.mac.as_deref().is_some_and(|m| m.len() == 64), "{l}");
    }
}
