//! Fuzz audit-log verification and recovery (`boyd::agent::audit::verify_bytes_with_key`: the
//! log is written under a key, and every check verifies the records' MACs under it).
//!
//! The first input byte picks a mode:
//! - raw: the rest of the input is the log, checked with no manifest and with a real one;
//! - truncate: a valid log cut anywhere (a crash mid-write) must verify without a problem
//!   against the manifest a crash there leaves (a torn last line is recoverable, a manifest one
//!   record behind is a lag, neither is "damage");
//! - tamper: byte substitutions, or line deletions, swaps and duplications, applied to a valid
//!   log must never verify as clean against the log's manifest.
//!
//! Any panic, or a tampered log that verifies clean, is a finding.
#![no_main]

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use boyd::agent::approval::ApprovalKey;
use boyd::agent::audit::{
    verify_bytes_with_key, AuditEvent, AuditSink, ChainLog, Manifest, OutcomeStatus,
    VerifyReport, AUDIT_FILE, MANIFEST_FILE,
};
use libfuzzer_sys::fuzz_target;

struct Fixture {
    log: Vec<u8>,
    manifest: Manifest,
    /// The manifest after 0, 1, 2, … records.
    manifests: Vec<Manifest>,
    records: usize,
    path: PathBuf,
}

/// The key the fixture is written with.
fn key() -> ApprovalKey {
    ApprovalKey::from_bytes([9; 32])
}

fn verify_bytes(path: &Path, data: &[u8], manifest: Option<&Manifest>) -> VerifyReport {
    verify_bytes_with_key(path, data, manifest, Some(&key()))
}

fn fixture() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut log = ChainLog::create_with_key(dir.path(), Some(key())).expect("create");
        let read_manifest = || -> Manifest {
            serde_json::from_str(
                &std::fs::read_to_string(dir.path().join(MANIFEST_FILE)).expect("read manifest"),
            )
            .expect("manifest")
        };
        let mut manifests = vec![read_manifest()];
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
            manifests.push(read_manifest());
        }
        let bytes = std::fs::read(dir.path().join(AUDIT_FILE)).expect("read log");
        let manifest = read_manifest();
        Fixture {
            log: bytes,
            manifest,
            manifests,
            records,
            path: dir.path().join(AUDIT_FILE),
        }
    })
}

fn lines(data: &[u8]) -> Vec<Vec<u8>> {
    data.split_inclusive(|&b| b == b'\n')
        .map(<[u8]>::to_vec)
        .collect()
}

fn check_report_shape(path: &Path, data: &[u8], manifest: Option<&Manifest>) {
    let r = verify_bytes(path, data, manifest);
    let n_lines = data.split(|&b| b == b'\n').count();
    assert!(r.records <= n_lines);
    if let Some(t) = &r.torn_tail {
        assert!(t.offset as usize + t.bytes <= data.len());
    }
}

fuzz_target!(|input: &[u8]| {
    let Some((&mode, rest)) = input.split_first() else {
        return;
    };
    let f = fixture();
    let clean = verify_bytes(&f.path, &f.log, Some(&f.manifest));
    assert!(clean.ok() && clean.torn_tail.is_none() && clean.records == f.records);
    match mode % 4 {
        0 => {
            check_report_shape(&f.path, rest, None);
            check_report_shape(&f.path, rest, Some(&f.manifest));
        }
        1 => {
            let Some(cut) = rest
                .get(..2)
                .map(|b| u16::from_le_bytes([b[0], b[1]]) as usize)
            else {
                return;
            };
            let cut = cut % (f.log.len() + 1);
            let data = &f.log[..cut];
            let complete = data.iter().filter(|&&b| b == b'\n').count();
            // the manifest after the last complete record, or, when the cut falls on a line end
            // (a crash between the log write and the manifest write), the one before it
            let mut manifests = vec![&f.manifests[complete]];
            if complete > 0 && data.last() == Some(&b'\n') {
                manifests.push(&f.manifests[complete - 1]);
            }
            for m in manifests {
                let r = verify_bytes(&f.path, data, Some(m));
                assert!(
                    r.problem.is_none(),
                    "cut at {cut}, manifest {m:?}: {:?}",
                    r.problem
                );
                assert!(r.records <= f.records);
            }
        }
        2 => {
            // (position, byte) pairs
            let mut data = f.log.clone();
            for pair in rest.chunks_exact(3) {
                let at = u16::from_le_bytes([pair[0], pair[1]]) as usize % data.len();
                data[at] = pair[2];
            }
            if data == f.log {
                return;
            }
            let r = verify_bytes(&f.path, &data, Some(&f.manifest));
            let looks_clean =
                r.ok() && r.torn_tail.is_none() && r.records == f.records && r.head == clean.head;
            assert!(
                !looks_clean,
                "tampered log verified clean: {:?}",
                String::from_utf8_lossy(&data)
            );
        }
        _ => {
            // line operations: delete, swap, duplicate
            let mut ls = lines(&f.log);
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
            let data: Vec<u8> = ls.concat();
            if data == f.log {
                return;
            }
            let r = verify_bytes(&f.path, &data, Some(&f.manifest));
            let looks_clean =
                r.ok() && r.torn_tail.is_none() && r.records == f.records && r.head == clean.head;
            assert!(
                !looks_clean,
                "reordered log verified clean: {:?}",
                String::from_utf8_lossy(&data)
            );
        }
    }
});
