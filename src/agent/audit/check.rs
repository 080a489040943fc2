//! Reading the audit log back: [`verify`] checks the chain record by record against the
//! manifest and names the first bad record (edited, deleted, reordered, replaced, truncated,
//! extended or reformatted), a torn last line, and intents that never got an outcome;
//! [`verify_with_key`] also checks who signed the manifest and, when this key did, each record's
//! MAC.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{
    check_manifest_signature, check_record_mac, io_err, record_hash, AuditError, AuditRecord,
    Manifest, SignatureCheck, AUDIT_FILE, GENESIS, MANIFEST_FILE,
};
use crate::agent::approval::ApprovalKey;

/// What is wrong with a record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ProblemKind {
    /// The line is not a valid record (and is not a torn last line).
    Garbled {
        /// Parser message.
        error: String,
    },
    /// The record's content does not match its own hash: it was edited.
    Edited,
    /// The record was replaced (its hash is self-consistent but the next record, or the
    /// manifest, committed to a different one).
    Replaced,
    /// A record is missing here (deleted).
    Missing {
        /// The sequence number expected here.
        expected_seq: u64,
        /// The one found.
        found_seq: u64,
    },
    /// Records are out of order.
    Reordered {
        /// The sequence number expected here.
        expected_seq: u64,
        /// The one found.
        found_seq: u64,
    },
    /// The log ends before the manifest's head: records were cut off.
    Truncated {
        /// Records the manifest promises.
        manifest_records: u64,
        /// Records in the log.
        log_records: u64,
    },
    /// Records beyond the manifest's head.
    Extended {
        /// Records the manifest promises.
        manifest_records: u64,
    },
    /// The manifest is missing or unreadable.
    NoManifest,
    /// The record's values and hash agree, but the line is not byte for byte what the log
    /// writer wrote (spacing, number format, key order or line end changed).
    Reformatted,
    /// The record's MAC does not verify under the key: it was forged, or edited and rehashed,
    /// without the key.
    BadMac,
    /// The record carries no MAC where the writer signs every record (after a signed record, or
    /// beyond the signed manifest): appended, or edited and rehashed, without the key.
    Unsigned,
}

/// The first bad record of a log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("record {seq} (line {line}): {}", describe(kind))]
pub struct AuditProblem {
    /// 1-based line in the log (0 for the manifest).
    pub line: usize,
    /// Sequence number of the bad record (the position it should have).
    pub seq: u64,
    /// What is wrong.
    pub kind: ProblemKind,
}

fn describe(k: &ProblemKind) -> String {
    match k {
        ProblemKind::Garbled { error } => format!("not a valid record ({error})"),
        ProblemKind::Edited => "content does not match its hash (edited)".into(),
        ProblemKind::Replaced => {
            "does not match the hash the next record (or the manifest) committed to (replaced)".into()
        }
        ProblemKind::Missing {
            expected_seq,
            found_seq,
        } => format!("record {expected_seq} is missing (found {found_seq}; deleted)"),
        ProblemKind::Reordered {
            expected_seq,
            found_seq,
        } => format!("expected record {expected_seq}, found {found_seq} (reordered)"),
        ProblemKind::Truncated {
            manifest_records,
            log_records,
        } => format!(
            "missing: the manifest promises {manifest_records} records, the log has {log_records} (truncated)"
        ),
        ProblemKind::Extended { manifest_records } => {
            format!("not covered by the manifest, which ends at {manifest_records} records (appended)")
        }
        ProblemKind::NoManifest => "the manifest is missing or unreadable".into(),
        ProblemKind::Reformatted => {
            "not byte for byte the line the log writer wrote (reformatted: edited)".into()
        }
        ProblemKind::BadMac => {
            "its MAC does not verify under this key (forged, or edited and rehashed, without the key)"
                .into()
        }
        ProblemKind::Unsigned => {
            "carries no MAC where every record is signed (appended, or edited and rehashed, without the key)"
                .into()
        }
    }
}

/// A torn last line that was (or will be) cut off.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TornTail {
    /// 1-based line.
    pub line: usize,
    /// Byte offset where it starts.
    pub offset: u64,
    /// Its length in bytes.
    pub bytes: usize,
}

/// An intent with no outcome.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnknownIntent {
    /// Its record's sequence number.
    pub seq: u64,
    /// Action id.
    pub action_id: u64,
    /// Tool.
    pub tool: String,
    /// Fingerprint.
    pub fingerprint: String,
}

/// The verdict on the records' own MACs ([`verify_with_key`], checked only when the manifest
/// is signed by the key).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RecordMacs {
    /// Not checked: no key, or the manifest is not signed by it.
    #[default]
    NotChecked,
    /// The last record carries a valid MAC, which covers every record before it through the
    /// chain (records written before MACs existed, when the log was continued, included); so
    /// does every other MAC in the log.
    Signed,
    /// No record carries a MAC: a legacy log, written before records were signed. Only the
    /// signed manifest vouches for it, up to its head.
    Unsigned,
}

/// The result of `verify`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VerifyReport {
    /// The log.
    pub path: PathBuf,
    /// Good records.
    pub records: usize,
    /// Hash of the last good record.
    pub head: String,
    /// A torn last line (recoverable).
    pub torn_tail: Option<TornTail>,
    /// The manifest was one record behind the log (a crash between the two writes).
    pub manifest_lag: bool,
    /// Intents without an outcome.
    pub unknown_intents: Vec<UnknownIntent>,
    /// The first bad record, if any.
    pub problem: Option<AuditProblem>,
    /// The manifest's signature ([`verify_with_key`]; `not_checked` from [`verify`]).
    #[serde(default)]
    pub signature: SignatureCheck,
    /// The records' MACs ([`verify_with_key`] when the manifest is signed by the key).
    #[serde(default)]
    pub record_macs: RecordMacs,
}

impl VerifyReport {
    /// Whether the log is intact (a torn tail and a lagging manifest are recoverable).
    pub fn ok(&self) -> bool {
        self.problem.is_none()
    }
}

/// Verify the audit log of a run directory (the chain and the manifest's counts, not who
/// signed it: see [`verify_with_key`]).
pub fn verify(run_dir: &Path) -> Result<VerifyReport, AuditError> {
    verify_with_key(run_dir, None)
}

/// Verify the audit log of a run directory and, with a key, whether its manifest was signed by
/// that key (`signature`) and, when it was, each record's MAC (`record_macs`; a bad one is the
/// report's `problem`). A log can be intact and still not written by this key.
pub fn verify_with_key(
    run_dir: &Path,
    key: Option<&ApprovalKey>,
) -> Result<VerifyReport, AuditError> {
    let path = run_dir.join(AUDIT_FILE);
    let data = std::fs::read(&path).map_err(io_err("read", &path))?;
    let manifest: Option<Manifest> = std::fs::read_to_string(run_dir.join(MANIFEST_FILE))
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok());
    let signature = key.map(|key| match &manifest {
        Some(m) => check_manifest_signature(m, key),
        None => SignatureCheck::Missing,
    });
    // A chain whose manifest this key did not sign is reported as not written by it; the records'
    // MACs are checked for a chain that claims to be this key's.
    let record_key = key.filter(|_| signature == Some(SignatureCheck::Valid));
    let mut report = verify_bytes_with_key(&path, &data, manifest.as_ref(), record_key);
    if let Some(s) = signature {
        report.signature = s;
    }
    Ok(report)
}

struct Line<'a> {
    offset: usize,
    text: &'a [u8],
    terminated: bool,
}

/// Whether a line is exactly what `ChainLog::record` writes for the record it holds.
fn is_written_form(text: &[u8]) -> bool {
    serde_json::from_slice::<AuditRecord>(text)
        .ok()
        .and_then(|r| serde_json::to_string(&r).ok())
        .is_some_and(|canonical| canonical.as_bytes() == text)
}

fn split_lines(data: &[u8]) -> Vec<Line<'_>> {
    let mut out = Vec::new();
    let mut start = 0;
    while start < data.len() {
        match data[start..].iter().position(|&b| b == b'\n') {
            Some(i) => {
                out.push(Line {
                    offset: start,
                    text: &data[start..start + i],
                    terminated: true,
                });
                start += i + 1;
            }
            None => {
                out.push(Line {
                    offset: start,
                    text: &data[start..],
                    terminated: false,
                });
                start = data.len();
            }
        }
    }
    out
}

/// Verify log bytes against a manifest (the core of `verify`, public for fuzzing and tests).
pub fn verify_bytes(path: &Path, data: &[u8], manifest: Option<&Manifest>) -> VerifyReport {
    verify_bytes_with_key(path, data, manifest, None)
}

/// [`verify_bytes`] that, with a key, also checks each record's MAC: the first record whose MAC
/// does not verify, or that carries none after a signed record or beyond the manifest, is the
/// problem (the manifest's own signature is [`verify_with_key`]'s to check).
pub fn verify_bytes_with_key(
    path: &Path,
    data: &[u8],
    manifest: Option<&Manifest>,
    key: Option<&ApprovalKey>,
) -> VerifyReport {
    let lines = split_lines(data);
    let mut report = VerifyReport {
        path: path.to_path_buf(),
        records: 0,
        head: GENESIS.into(),
        torn_tail: None,
        manifest_lag: false,
        unknown_intents: Vec::new(),
        problem: None,
        signature: SignatureCheck::NotChecked,
        record_macs: RecordMacs::NotChecked,
    };
    // Parse every line first: (seq, prev, hash, computed hash, event).
    struct Parsed {
        seq: u64,
        prev: String,
        hash: String,
        computed: String,
        event: Value,
        /// The record's MAC, when it carries one.
        mac: Option<String>,
        /// The line is exactly what `ChainLog::record` writes for this record.
        exact: bool,
    }
    let mut parsed: Vec<Parsed> = Vec::new();
    let n = lines.len();
    for (i, l) in lines.iter().enumerate() {
        let res = std::str::from_utf8(l.text)
            .map_err(|e| e.to_string())
            .and_then(|s| serde_json::from_str::<Value>(s).map_err(|e| e.to_string()))
            .and_then(|v| {
                let seq = v.get("seq").and_then(Value::as_u64);
                let prev = v.get("prev").and_then(Value::as_str);
                let time = v.get("time").and_then(Value::as_str);
                let hash = v.get("hash").and_then(Value::as_str);
                let event = v.get("event");
                match (seq, prev, time, hash, event) {
                    (Some(seq), Some(prev), Some(time), Some(hash), Some(event)) => Ok(Parsed {
                        seq,
                        prev: prev.into(),
                        hash: hash.into(),
                        computed: record_hash(seq, prev, time, event),
                        event: event.clone(),
                        mac: v.get("mac").and_then(Value::as_str).map(str::to_string),
                        exact: is_written_form(l.text),
                    }),
                    _ => Err("missing seq, prev, time, event or hash".to_string()),
                }
            });
        match res {
            Ok(p) => parsed.push(p),
            Err(_) if i + 1 == n && !l.terminated => {
                report.torn_tail = Some(TornTail {
                    line: i + 1,
                    offset: l.offset as u64,
                    bytes: l.text.len(),
                });
            }
            Err(error) => {
                report.problem = Some(AuditProblem {
                    line: i + 1,
                    seq: i as u64,
                    kind: ProblemKind::Garbled { error },
                });
                return report;
            }
        }
    }
    let bad = |line: usize, seq: u64, kind: ProblemKind| Some(AuditProblem { line, seq, kind });
    // Whether a record so far carried a valid MAC: from then on every record must.
    let mut signed = false;
    for (i, p) in parsed.iter().enumerate() {
        let expected = i as u64;
        if p.seq != expected {
            let later = parsed[i + 1..].iter().any(|q| q.seq == expected);
            let kind = if later || p.seq < expected {
                ProblemKind::Reordered {
                    expected_seq: expected,
                    found_seq: p.seq,
                }
            } else {
                ProblemKind::Missing {
                    expected_seq: expected,
                    found_seq: p.seq,
                }
            };
            report.problem = bad(i + 1, expected, kind);
            return report;
        }
        if p.computed != p.hash {
            report.problem = bad(i + 1, expected, ProblemKind::Edited);
            return report;
        }
        let prev_hash = if i == 0 {
            GENESIS
        } else {
            parsed[i - 1].hash.as_str()
        };
        if p.prev != prev_hash {
            // The previous record is self-consistent but not the one this record chained to.
            report.problem = if i == 0 {
                bad(1, 0, ProblemKind::Replaced)
            } else {
                bad(i, expected - 1, ProblemKind::Replaced)
            };
            return report;
        }
        if let Some(key) = key {
            match &p.mac {
                Some(mac) if check_record_mac(key, p.seq, &p.hash, mac) => signed = true,
                Some(_) => {
                    report.problem = bad(i + 1, expected, ProblemKind::BadMac);
                    return report;
                }
                None if signed => {
                    report.problem = bad(i + 1, expected, ProblemKind::Unsigned);
                    return report;
                }
                None => {}
            }
        }
        report.records = i + 1;
        report.head = p.hash.clone();
    }
    let count = parsed.len() as u64;
    match manifest {
        None => {
            report.problem = bad(0, count, ProblemKind::NoManifest);
            return report;
        }
        Some(m) if m.records > count => {
            report.problem = bad(
                parsed.len() + 1,
                count,
                ProblemKind::Truncated {
                    manifest_records: m.records,
                    log_records: count,
                },
            );
            return report;
        }
        Some(m) if m.records == count => {
            if m.head != report.head {
                let last = parsed.len();
                report.problem = if last == 0 {
                    bad(0, 0, ProblemKind::NoManifest)
                } else {
                    bad(last, count - 1, ProblemKind::Replaced)
                };
                return report;
            }
        }
        Some(m) => {
            // The log is ahead of the manifest. One record ahead, chained to the manifest's
            // head, is a crash between the log write and the manifest write.
            let covered = m.records as usize;
            let head_ok = if covered == 0 {
                m.head == GENESIS
            } else {
                parsed[covered - 1].hash == m.head
            };
            if count == m.records + 1 && head_ok {
                // A crash between the two writes leaves a signed record; without its MAC (a
                // legacy log) an append cannot be told from a crash, so it is refused.
                if key.is_some() && parsed[covered].mac.is_none() {
                    report.problem = bad(covered + 1, m.records, ProblemKind::Unsigned);
                    return report;
                }
                report.manifest_lag = true;
            } else if head_ok {
                report.problem = bad(
                    covered + 1,
                    m.records,
                    ProblemKind::Extended {
                        manifest_records: m.records,
                    },
                );
                return report;
            } else {
                report.problem = bad(
                    covered.max(1),
                    m.records.saturating_sub(1),
                    ProblemKind::Replaced,
                );
                return report;
            }
        }
    }
    // The hashes cover the values; the bytes must also be the writer's (found by fuzzing: a
    // final newline turned into a space, or `1.0` written `1.00`, verified clean).
    if let Some(i) = parsed.iter().position(|p| !p.exact) {
        report.problem = bad(i + 1, i as u64, ProblemKind::Reformatted);
        return report;
    }
    if key.is_some() {
        report.record_macs = if signed || parsed.is_empty() {
            RecordMacs::Signed
        } else {
            RecordMacs::Unsigned
        };
    }
    // Intents without outcomes.
    let mut open: Vec<UnknownIntent> = Vec::new();
    for p in &parsed {
        match p.event.get("type").and_then(Value::as_str) {
            Some("intent") => {
                let s = |k: &str| {
                    p.event
                        .get(k)
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string()
                };
                open.push(UnknownIntent {
                    seq: p.seq,
                    action_id: p
                        .event
                        .get("action_id")
                        .and_then(Value::as_u64)
                        .unwrap_or(0),
                    tool: s("tool"),
                    fingerprint: s("fingerprint"),
                });
            }
            Some("outcome") => {
                let id = p.event.get("action_id").and_then(Value::as_u64);
                open.retain(|u| Some(u.action_id) != id);
            }
            Some("recovered") => {
                // Already reported by an earlier reopen: those stay unknown, but are not news.
                if let Some(ids) = p.event.get("unknown_actions").and_then(Value::as_array) {
                    let ids: Vec<u64> = ids.iter().filter_map(Value::as_u64).collect();
                    open.retain(|u| !ids.contains(&u.action_id));
                }
            }
            _ => {}
        }
    }
    report.unknown_intents = open;
    report
}

/// Read the events of a log (for display); stops at the first unreadable line.
pub fn read_events(run_dir: &Path) -> Result<Vec<AuditRecord>, AuditError> {
    let path = run_dir.join(AUDIT_FILE);
    let text = std::fs::read_to_string(&path).map_err(io_err("read", &path))?;
    Ok(text
        .lines()
        .map_while(|l| serde_json::from_str::<AuditRecord>(l).ok())
        .collect())
}
