//! The writer of the audit log: [`ChainLog`] appends hash-chained records to `audit.jsonl`
//! (each with its MAC when it has a key), keeps the signed manifest `audit.head.json` in step, and reopens a run's log after a crash
//! (cutting a torn last line, recording what was recovered).

use std::fs::File;
use std::io::{Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use super::check::{verify_with_key, VerifyReport};
use super::{
    io_err, manifest_body, record_hash, sign_record, AuditError, AuditEvent, AuditRecord,
    AuditSink, Manifest, SignatureCheck, AUDIT_FILE, GENESIS, MANIFEST_FILE, MANIFEST_MAC_DOMAIN,
};
use crate::agent::approval::ApprovalKey;
use crate::agent::rundir::utc_timestamp;

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
pub(super) fn default_key() -> Option<ApprovalKey> {
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

    /// Start a new log in `run_dir`, its records and manifest signed with `key` (unsigned with
    /// `None`).
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
    /// `Recovered` record when anything was recovered. Damage elsewhere, a record whose MAC does
    /// not verify and a record beyond the manifest without one are refused
    /// ([`AuditError::Damaged`]) before anything is written.
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
            mac: self.key.as_ref().map(|k| sign_record(k, self.seq, &hash)),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::audit::verify;

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
