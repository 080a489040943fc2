//! The saved state of a run (`<run>/ooda.json`): written atomically at every terminal state,
//! signed with the approval key when there is one, and verified before `resume` acts on it.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::decide::{Assessment, ImplicitGuidance};
use super::world::WorldModel;
use super::{Counters, OodaError, OodaState};
use crate::agent::approval::ApprovalKey;
use crate::agent::rundir::Record;

/// The snapshot file.
pub const SNAPSHOT_FILE: &str = "ooda.json";

/// The saved state of a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    /// Run id.
    pub run_id: String,
    /// Task.
    pub task: String,
    /// Terminal state.
    pub state: OodaState,
    /// Detail.
    pub detail: Option<String>,
    /// Answer, when completed.
    pub answer: Option<String>,
    /// The world model.
    pub world: WorldModel,
    /// The action waiting for approval, when escalated for one.
    pub pending: Option<Assessment>,
    /// Counters.
    pub counters: Counters,
    /// Workspace root.
    pub workspace: Option<PathBuf>,
    /// Next action id.
    pub next_action_id: u64,
    /// Implicit guidance learned so far.
    pub guidance: ImplicitGuidance,
    /// UTC time saved.
    pub saved_at: String,
}

/// Domain label of the snapshot's HMAC.
const SNAPSHOT_MAC_DOMAIN: &str = "boyd-ooda-snapshot-v1";
/// The field of `ooda.json` that holds its HMAC.
const SNAPSHOT_MAC_FIELD: &str = "mac";

pub(crate) fn bad_snapshot(path: &Path, reason: impl Into<String>) -> OodaError {
    OodaError::BadSnapshot {
        path: path.to_path_buf(),
        reason: reason.into(),
    }
}

fn read_snapshot_value(run_dir: &Path) -> Result<(PathBuf, serde_json::Value), OodaError> {
    let path = run_dir.join(SNAPSHOT_FILE);
    let text = std::fs::read_to_string(&path).map_err(|source| OodaError::Io {
        action: "read",
        path: path.clone(),
        source,
    })?;
    let v: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| bad_snapshot(&path, e.to_string()))?;
    Ok((path, v))
}

/// Read a run's snapshot (no authenticity check: for display; [`load_verified_snapshot`]
/// before acting on it).
pub fn load_snapshot(run_dir: &Path) -> Result<Snapshot, OodaError> {
    let (path, mut v) = read_snapshot_value(run_dir)?;
    if let Some(o) = v.as_object_mut() {
        o.remove(SNAPSHOT_MAC_FIELD);
    }
    serde_json::from_value(v).map_err(|e| bad_snapshot(&path, e.to_string()))
}

/// The signed form of a snapshot: the writer's pretty JSON with a last field `"mac"` added
/// textually, so the signature covers the exact bytes written (no re-serialization, whose float
/// formatting need not round-trip).
fn join_signed(body: &str, mac: &str) -> Option<String> {
    let open = body.strip_suffix("\n}")?;
    Some(format!(
        "{open},\n  \"{SNAPSHOT_MAC_FIELD}\": \"{mac}\"\n}}"
    ))
}

/// Split a signed snapshot into the body that was signed and the signature.
fn split_signed(text: &str) -> Option<(String, &str)> {
    let rest = text.strip_suffix("\"\n}")?;
    let cut = rest.len().checked_sub(64)?;
    let mac = rest.get(cut..)?;
    let open = rest
        .get(..cut)?
        .strip_suffix(&format!(",\n  \"{SNAPSHOT_MAC_FIELD}\": \""))?;
    Some((format!("{open}\n}}"), mac))
}

/// The workspace root the run's transcript recorded when it started.
fn recorded_workspace(run_dir: &Path) -> Result<Option<PathBuf>, OodaError> {
    let recs = crate::agent::rundir::read_transcript(&run_dir.join("transcript.jsonl"))?;
    Ok(recs
        .into_iter()
        .find_map(|r| match r {
            Record::Start { workspace, .. } => Some(workspace),
            _ => None,
        })
        .flatten())
}

/// Read a run's snapshot and check it before anything acts on it: with a key, its HMAC must
/// verify (a snapshot without one, or written under another key, is refused); it must belong to
/// this run directory; its workspace must be the root the run recorded when it started; and the
/// pending action's fingerprint must be the one recomputed from its tool and arguments.
pub fn load_verified_snapshot(
    run_dir: &Path,
    key: Option<&ApprovalKey>,
) -> Result<Snapshot, OodaError> {
    let path = run_dir.join(SNAPSHOT_FILE);
    let text = std::fs::read_to_string(&path).map_err(|source| OodaError::Io {
        action: "read",
        path: path.clone(),
        source,
    })?;
    let v: serde_json::Value = match key {
        Some(key) => {
            let Some((body, mac)) = split_signed(&text) else {
                return Err(bad_snapshot(
                    &path,
                    "it carries no signature (written without the approval key, or the signature was removed); start a new run",
                ));
            };
            if !key.verify_bytes(SNAPSHOT_MAC_DOMAIN, body.as_bytes(), mac) {
                return Err(bad_snapshot(
                    &path,
                    "its signature does not verify under this approval key (edited, or written with another key); start a new run",
                ));
            }
            serde_json::from_str(&body).map_err(|e| bad_snapshot(&path, e.to_string()))?
        }
        None => {
            let mut v: serde_json::Value =
                serde_json::from_str(&text).map_err(|e| bad_snapshot(&path, e.to_string()))?;
            if let Some(o) = v.as_object_mut() {
                o.remove(SNAPSHOT_MAC_FIELD);
            }
            v
        }
    };
    let snap: Snapshot =
        serde_json::from_value(v).map_err(|e| bad_snapshot(&path, e.to_string()))?;
    if let Some(name) = run_dir.file_name().and_then(|n| n.to_str()) {
        if key.is_some() && name != snap.run_id {
            return Err(bad_snapshot(
                &path,
                format!("it belongs to run {}, not {name}", snap.run_id),
            ));
        }
    }
    let recorded = recorded_workspace(run_dir)?;
    if recorded != snap.workspace {
        return Err(bad_snapshot(
            &path,
            format!(
                "its workspace {} differs from the one the run started in ({})",
                snap.workspace
                    .as_deref()
                    .map_or("(none)".into(), |p| p.display().to_string()),
                recorded
                    .as_deref()
                    .map_or("(none)".into(), |p| p.display().to_string())
            ),
        ));
    }
    if let Some(p) = &snap.pending {
        let fp = crate::agent::guard::fingerprint(&p.tool, &p.args);
        if fp != p.fingerprint {
            return Err(bad_snapshot(
                &path,
                format!(
                    "its pending action {} does not match its fingerprint (recomputed {fp}, recorded {})",
                    p.tool, p.fingerprint
                ),
            ));
        }
    }
    Ok(snap)
}

/// Write a snapshot atomically, with its HMAC when there is a key.
pub(crate) fn write_snapshot(
    run_dir: &Path,
    snap: &Snapshot,
    key: Option<&ApprovalKey>,
) -> Result<(), OodaError> {
    let path = run_dir.join(SNAPSHOT_FILE);
    let tmp = run_dir.join(".ooda.json.tmp");
    let body =
        serde_json::to_string_pretty(snap).map_err(|e| bad_snapshot(&path, e.to_string()))?;
    let text = match key {
        Some(key) => {
            let mac = key.sign_bytes(SNAPSHOT_MAC_DOMAIN, body.as_bytes());
            join_signed(&body, &mac).ok_or_else(|| bad_snapshot(&path, "not a JSON object"))?
        }
        None => body,
    };
    std::fs::write(&tmp, text)
        .and_then(|_| std::fs::rename(&tmp, &path))
        .map_err(|source| OodaError::Io {
            action: "write",
            path,
            source,
        })
}
