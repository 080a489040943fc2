//! The audit log: append-only, hash-chained JSONL, one record per intent, outcome and decision.
//!
//! Each record is `{seq, prev, time, event, hash}`: `hash` is the SHA-256 of the canonical JSON
//! (keys sorted, compact) of the other four fields, and `prev` is the previous record's `hash`
//! (64 zeros for the first). The manifest `audit.head.json` keeps the record count and the head
//! hash, so a truncated or edited last record is caught too. Intent records are fsync'd before
//! the action runs; the rest are flushed. `verify` names the first bad record of an edited,
//! deleted, reordered, truncated or extended log; a torn last line (a crash mid-write) is
//! reported and, when a run is resumed, cut off. An intent without an outcome (a crash while the
//! action ran) is reported as unknown: the loop never retries it on its own.
//!
//! The manifest is signed: an HMAC-SHA256 of the record count and head hash under the approval
//! key, which lives in the user's config directory (never in the workspace or the run directory).
//! The hashes alone show accidental damage and naive edits; the signature shows who wrote the
//! chain, so a chain forged from scratch, or cut short or edited with its manifest rewritten, is
//! reported as "not written by this key" ([`verify_with_key`]). What a holder of the key can still
//! do is in the README's threat model. The sink is a trait so a remote, write-once sink can
//! replace it.

use std::fs::File;
use std::io::{Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::approval::ApprovalKey;
use super::condense::sha256_hex;
use super::guard::canonical_json;
use super::ooda::intent::IntentWhy;
use super::rundir::utc_timestamp;

/// The log file in a run directory.
pub const AUDIT_FILE: &str = "audit.jsonl";
/// The manifest with the head hash.
pub const MANIFEST_FILE: &str = "audit.head.json";
/// `prev` of the first record.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// How an action ended, as the audit log records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OutcomeStatus {
    /// Ran, and its post-condition held.
    Verified,
    /// Ran; no post-condition is declared, or it did not hold (see discrepancies).
    Unverified,
    /// The tool reported an error.
    Failed,
    /// Stopped at the time limit.
    TimedOut,
}

/// One thing the audit log records.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum AuditEvent {
    /// The run began.
    RunStarted {
        /// Run id.
        run_id: String,
        /// Task.
        task: String,
    },
    /// A paused or escalated run continued.
    Resumed {
        /// The state it was in.
        from_state: String,
        /// SHA-256 of the approval token given, if any.
        approval: Option<String>,
    },
    /// About to run an action (written, and fsync'd, before it runs).
    Intent {
        /// Action number in the run (1-based).
        action_id: u64,
        /// OODA cycle.
        cycle: usize,
        /// Tool.
        tool: String,
        /// Arguments.
        args: Value,
        /// Action fingerprint.
        fingerprint: String,
        /// Whether the tool is irreversible.
        irreversible: bool,
        /// SHA-256 of the approval token spent on it, if any.
        approval: Option<String>,
        /// Chosen by implicit guidance (no Decide call).
        implicit: bool,
        /// Why it ran (OODA): the world-model snapshot's hash, the chosen candidate, the
        /// alternatives and the reasoning.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        why: Option<Box<IntentWhy>>,
    },
    /// What an action did.
    Outcome {
        /// The intent's action id.
        action_id: u64,
        /// Action fingerprint.
        fingerprint: String,
        /// How it ended.
        status: OutcomeStatus,
        /// Risk budget debited.
        cost: f64,
        /// Post-condition discrepancies.
        discrepancies: Vec<String>,
        /// SHA-256 of the full output.
        output_sha256: String,
    },
    /// A candidate was refused by the gate (policy, budget, approval).
    Refused {
        /// OODA cycle.
        cycle: usize,
        /// Tool.
        tool: String,
        /// Action fingerprint.
        fingerprint: String,
        /// Why.
        reason: String,
    },
    /// A contradiction against the world model.
    Contradiction {
        /// Fact key.
        key: String,
        /// Known value.
        old: String,
        /// New value.
        new: String,
        /// `high` or `low`.
        severity: String,
    },
    /// The world model was compressed.
    Compressed {
        /// Steps summarized.
        steps: usize,
        /// Estimated tokens before.
        tokens_before: usize,
        /// Estimated tokens after.
        tokens_after: usize,
    },
    /// Damage recovered when the log was reopened.
    Recovered {
        /// Bytes of a torn last line that were cut off.
        torn_bytes: usize,
        /// Action ids whose outcome is unknown (intent, no outcome).
        unknown_actions: Vec<u64>,
    },
    /// The run reached a terminal state.
    Terminal {
        /// The state.
        state: String,
        /// Detail.
        detail: Option<String>,
    },
}

/// A record as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AuditRecord {
    /// 0-based sequence number.
    pub seq: u64,
    /// The previous record's hash.
    pub prev: String,
    /// UTC time.
    pub time: String,
    /// The event.
    pub event: AuditEvent,
    /// SHA-256 of the canonical JSON of the other fields.
    pub hash: String,
}

/// The manifest.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    /// Records written.
    pub records: u64,
    /// Hash of the last record.
    pub head: String,
    /// HMAC-SHA256 of `records` and `head` under the approval key (absent when the log was
    /// written without a key).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mac: Option<String>,
}

/// Domain label of the manifest's HMAC.
const MANIFEST_MAC_DOMAIN: &str = "boyd-audit-manifest-v1";

fn manifest_body(records: u64, head: &str) -> String {
    format!("{records}\n{head}")
}

/// Whether the manifest was written under `key`.
pub fn check_manifest_signature(m: &Manifest, key: &ApprovalKey) -> SignatureCheck {
    match &m.mac {
        None => SignatureCheck::Missing,
        Some(mac) => {
            if key.verify_bytes(
                MANIFEST_MAC_DOMAIN,
                manifest_body(m.records, &m.head).as_bytes(),
                mac,
            ) {
                SignatureCheck::Valid
            } else {
                SignatureCheck::Invalid
            }
        }
    }
}

/// The verdict on the manifest's signature.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SignatureCheck {
    /// No key was given to check it.
    #[default]
    NotChecked,
    /// Signed by this key.
    Valid,
    /// No signature: not written by this key (written without one, or it was removed).
    Missing,
    /// A signature that does not verify: not written by this key.
    Invalid,
}

/// Failures of the audit machinery (they end the run).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AuditError {
    /// An I/O error.
    #[error("audit log: cannot {action} {path}")]
    Io {
        /// What we were doing.
        action: &'static str,
        /// The path.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The log is damaged beyond a torn last line.
    #[error("audit log {path} is damaged: {problem}")]
    Damaged {
        /// The log.
        path: PathBuf,
        /// The first problem.
        problem: AuditProblem,
    },
    /// A record could not be serialized.
    #[error("audit log: cannot serialize a record")]
    Json(#[source] serde_json::Error),
    /// The manifest is not signed by the key given.
    #[error(
        "audit log {path} was not written by this approval key ({check:?}); it cannot be continued"
    )]
    NotThisKey {
        /// The log.
        path: PathBuf,
        /// What the check found.
        check: SignatureCheck,
    },
}

fn io_err(action: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> AuditError {
    let path = path.to_path_buf();
    move |source| AuditError::Io {
        action,
        path,
        source,
    }
}

/// Where audit events go. A failed write stops the agent.
pub trait AuditSink: Send {
    /// Append one event; `durable` asks for an fsync before returning.
    fn record(&mut self, event: AuditEvent, durable: bool) -> Result<(), AuditError>;
}

fn record_hash(seq: u64, prev: &str, time: &str, event: &Value) -> String {
    let body = serde_json::json!({"seq": seq, "prev": prev, "time": time, "event": event});
    sha256_hex(canonical_json(&body).as_bytes())
}

/// The hash-chained JSONL log of one run directory.
#[derive(Debug)]
pub struct ChainLog {
    path: PathBuf,
    manifest: PathBuf,
    file: File,
    seq: u64,
    head: String,
    key: Option<ApprovalKey>,
}

/// The key in the default config directory, when it is usable (a warning otherwise).
fn default_key() -> Option<ApprovalKey> {
    match ApprovalKey::load_default() {
        Ok(k) => Some(k),
        Err(e) => {
            tracing::warn!("audit log will not be signed: {e:#}");
            None
        }
    }
}

impl ChainLog {
    /// Start a new log in `run_dir` (fails if one exists), signed with the approval key of the
    /// default config directory when there is one.
    pub fn create(run_dir: &Path) -> Result<Self, AuditError> {
        Self::create_with_key(run_dir, default_key())
    }

    /// Start a new log in `run_dir`, its manifest signed with `key` (unsigned with `None`).
    pub fn create_with_key(run_dir: &Path, key: Option<ApprovalKey>) -> Result<Self, AuditError> {
        let path = run_dir.join(AUDIT_FILE);
        let file = std::fs::OpenOptions::new()
            .create_new(true)
            .append(true)
            .open(&path)
            .map_err(io_err("create", &path))?;
        let log = Self {
            manifest: run_dir.join(MANIFEST_FILE),
            path,
            file,
            seq: 0,
            head: GENESIS.into(),
            key,
        };
        log.write_manifest(true)?;
        Ok(log)
    }

    /// Reopen the log of a run to continue it: verify it, cut a torn last line, and append a
    /// `Recovered` record when anything was recovered. Damage elsewhere is refused.
    ///
    /// The log continues as it was written: a signed manifest must verify under the key of the
    /// default config directory, an unsigned log stays unsigned.
    pub fn reopen(run_dir: &Path) -> Result<(Self, VerifyReport), AuditError> {
        let signed = std::fs::read_to_string(run_dir.join(MANIFEST_FILE))
            .ok()
            .and_then(|t| serde_json::from_str::<Manifest>(&t).ok())
            .is_some_and(|m| m.mac.is_some());
        let key = if signed { default_key() } else { None };
        if signed && key.is_none() {
            return Err(AuditError::NotThisKey {
                path: run_dir.join(AUDIT_FILE),
                check: SignatureCheck::NotChecked,
            });
        }
        Self::reopen_with_key(run_dir, key)
    }

    /// [`ChainLog::reopen`] with a key: the manifest must be signed by it (a log written
    /// without a key is continued unsigned only when `key` is `None`).
    pub fn reopen_with_key(
        run_dir: &Path,
        key: Option<ApprovalKey>,
    ) -> Result<(Self, VerifyReport), AuditError> {
        let report = verify_with_key(run_dir, key.as_ref())?;
        let path = run_dir.join(AUDIT_FILE);
        if let Some(problem) = report.problem.clone() {
            return Err(AuditError::Damaged { path, problem });
        }
        if matches!(report.signature, SignatureCheck::Invalid)
            || (matches!(report.signature, SignatureCheck::Missing) && report.records > 0)
        {
            return Err(AuditError::NotThisKey {
                path,
                check: report.signature,
            });
        }
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .map_err(io_err("open", &path))?;
        if let Some(t) = &report.torn_tail {
            file.set_len(t.offset).map_err(io_err("truncate", &path))?;
        }
        let mut file = file;
        file.seek(SeekFrom::End(0)).map_err(io_err("seek", &path))?;
        let mut log = Self {
            manifest: run_dir.join(MANIFEST_FILE),
            path,
            file,
            seq: report.records as u64,
            head: report.head.clone(),
            key,
        };
        let torn_bytes = report.torn_tail.as_ref().map_or(0, |t| t.bytes);
        if torn_bytes > 0 || !report.unknown_intents.is_empty() || report.manifest_lag {
            log.record(
                AuditEvent::Recovered {
                    torn_bytes,
                    unknown_actions: report.unknown_intents.iter().map(|u| u.action_id).collect(),
                },
                true,
            )?;
        } else {
            log.write_manifest(false)?;
        }
        Ok((log, report))
    }

    /// The log file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Records written.
    pub fn len(&self) -> u64 {
        self.seq
    }

    /// Whether no record was written.
    pub fn is_empty(&self) -> bool {
        self.seq == 0
    }

    /// Hash of the last record.
    pub fn head(&self) -> &str {
        &self.head
    }

    fn write_manifest(&self, durable: bool) -> Result<(), AuditError> {
        let m = Manifest {
            records: self.seq,
            head: self.head.clone(),
            mac: self.key.as_ref().map(|k| {
                k.sign_bytes(
                    MANIFEST_MAC_DOMAIN,
                    manifest_body(self.seq, &self.head).as_bytes(),
                )
            }),
        };
        let text = serde_json::to_string_pretty(&m).map_err(AuditError::Json)?;
        let tmp = self.manifest.with_extension("json.tmp");
        {
            let mut f = File::create(&tmp).map_err(io_err("write", &tmp))?;
            f.write_all(text.as_bytes())
                .map_err(io_err("write", &tmp))?;
            if durable {
                f.sync_all().map_err(io_err("sync", &tmp))?;
            }
        }
        std::fs::rename(&tmp, &self.manifest).map_err(io_err("rename", &self.manifest))
    }
}

impl AuditSink for ChainLog {
    fn record(&mut self, event: AuditEvent, durable: bool) -> Result<(), AuditError> {
        let time = utc_timestamp();
        let ev = serde_json::to_value(&event).map_err(AuditError::Json)?;
        let hash = record_hash(self.seq, &self.head, &time, &ev);
        let rec = AuditRecord {
            seq: self.seq,
            prev: self.head.clone(),
            time,
            event,
            hash: hash.clone(),
        };
        let mut line = serde_json::to_string(&rec).map_err(AuditError::Json)?;
        line.push('\n');
        self.file
            .write_all(line.as_bytes())
            .and_then(|_| self.file.flush())
            .map_err(io_err("write", &self.path))?;
        if durable {
            self.file.sync_data().map_err(io_err("sync", &self.path))?;
        }
        self.seq += 1;
        self.head = hash;
        self.write_manifest(durable)
    }
}

/// An audit sink that keeps events in memory (tests, dry runs).
#[derive(Debug, Default)]
pub struct MemorySink {
    /// Events in order, with whether they were durable.
    pub events: Vec<(AuditEvent, bool)>,
}

impl AuditSink for MemorySink {
    fn record(&mut self, event: AuditEvent, durable: bool) -> Result<(), AuditError> {
        self.events.push((event, durable));
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------
// Verification

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
/// that key (`signature`). A log can be intact and still not written by this key.
pub fn verify_with_key(
    run_dir: &Path,
    key: Option<&ApprovalKey>,
) -> Result<VerifyReport, AuditError> {
    let path = run_dir.join(AUDIT_FILE);
    let data = std::fs::read(&path).map_err(io_err("read", &path))?;
    let manifest: Option<Manifest> = std::fs::read_to_string(run_dir.join(MANIFEST_FILE))
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok());
    let mut report = verify_bytes(&path, &data, manifest.as_ref());
    if let Some(key) = key {
        report.signature = match &manifest {
            Some(m) => check_manifest_signature(m, key),
            None => SignatureCheck::Missing,
        };
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
    };
    // Parse every line first: (seq, prev, hash, computed hash, event).
    struct Parsed {
        seq: u64,
        prev: String,
        hash: String,
        computed: String,
        event: Value,
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

#[cfg(test)]
mod tests {
    use super::*;

    fn intent(id: u64) -> AuditEvent {
        AuditEvent::Intent {
            action_id: id,
            cycle: 1,
            tool: "calculator".into(),
            args: serde_json::json!({"expression": "1+1", "x": 1.5}),
            fingerprint: "f".repeat(64),
            irreversible: false,
            approval: None,
            implicit: false,
            why: None,
        }
    }

    #[test]
    fn clean_log_verifies_and_reopen_continues_the_chain() {
        let d = tempfile::tempdir().expect("tempdir");
        let mut log = ChainLog::create(d.path()).expect("create");
        log.record(intent(1), true).expect("write");
        let r = verify(d.path()).expect("verify");
        assert!(r.ok(), "{r:?}");
        assert_eq!(r.unknown_intents.len(), 1);
        drop(log);
        let (mut log, rep) = ChainLog::reopen(d.path()).expect("reopen");
        assert_eq!(rep.unknown_intents.len(), 1);
        log.record(intent(2), false).expect("write");
        let r = verify(d.path()).expect("verify");
        assert!(r.ok(), "{r:?}");
        assert_eq!(r.records, 3);
        // The recovered intent is not reported again; the new one is.
        assert_eq!(
            r.unknown_intents
                .iter()
                .map(|u| u.action_id)
                .collect::<Vec<_>>(),
            vec![2]
        );
    }
}
