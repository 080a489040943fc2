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
//!
//! Each record is signed too: `mac` is an HMAC-SHA256 under the same key (its own domain label)
//! of the record's sequence number and `hash`, the chain head after it, so one MAC covers the
//! whole chain up to its record. Without the key, a record appended after the manifest's head
//! (which the manifest alone would take for a crash between the two writes) or a middle record
//! edited with every later hash recomputed fails at that record ([`ProblemKind::BadMac`],
//! [`ProblemKind::Unsigned`]), and a run whose chain does not verify is not continued.
//!
//! Logs written before records carried a MAC still verify, as [`RecordMacs::Unsigned`]: their
//! signed manifest covers every record up to its head, but a record beyond it is refused (no
//! crash can be told from an append there), and a chain continued from such a log signs its new
//! records (each MAC covers the unsigned records before it through the chain).
//!
//! Files: this one holds the record format, the manifest and its signature, the errors and the
//! [`AuditSink`] seam; `chain` the writer ([`ChainLog`]: create, append, reopen after a crash);
//! `check` the reader that names the first bad record ([`verify`], [`verify_bytes`]); `trail`
//! the ReAct loop's intent and outcome records ([`ActionTrail`]).

mod chain;
mod check;
mod trail;
pub mod why;

pub use chain::ChainLog;
pub use check::{
    read_events, verify, verify_bytes, verify_bytes_with_key, verify_with_key, AuditProblem,
    ProblemKind, RecordMacs, TornTail, UnknownIntent, VerifyReport,
};
pub use trail::{ActionTrail, AuditedCall};

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::approval::ApprovalKey;
use super::condense::sha256_hex;
use super::guard::canonical_json;
use why::IntentWhy;

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
    /// HMAC-SHA256 of `seq` and `hash` under the approval key (absent when the log was written
    /// without a key, or before records carried one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mac: Option<String>,
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

/// Domain label of each record's HMAC (apart from the manifest's, so neither can stand for the
/// other).
const RECORD_MAC_DOMAIN: &str = "boyd-audit-record-v1";

fn record_mac_body(seq: u64, hash: &str) -> String {
    format!("{seq}\n{hash}")
}

/// The MAC of record `seq` whose hash (the chain head after it) is `hash`.
fn sign_record(key: &ApprovalKey, seq: u64, hash: &str) -> String {
    key.sign_bytes(RECORD_MAC_DOMAIN, record_mac_body(seq, hash).as_bytes())
}

/// Whether `mac` is record `seq`'s MAC under `key`.
fn check_record_mac(key: &ApprovalKey, seq: u64, hash: &str, mac: &str) -> bool {
    key.verify_bytes(
        RECORD_MAC_DOMAIN,
        record_mac_body(seq, hash).as_bytes(),
        mac,
    )
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
    /// The log is damaged beyond a torn last line (edited, cut, or extended without the key).
    #[error(
        "audit log {path} does not verify: first bad {problem}; it cannot be continued (`boyd audit verify` shows the report)"
    )]
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
