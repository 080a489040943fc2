//! Observe: what a sensor is, what it reads, and the built-in sensors. The readings themselves
//! run on the sensors' own threads, each under a timeout (`super::sensing`).
//!
//! A sensor returns signals (`key = value` readings) or fails; a failed or timed-out sensor is
//! recorded in the `SensorReadings`, never fatal. Their confidence is 1 − 0.3 × the
//! critical sensors that failed (`super::risk::observation_confidence`), so a run that loses its
//! eyes escalates (Decide refuses to act below a threshold); a non-critical sensor's failure is
//! recorded as a signal and does not lower it. Sensor futures are `'static` and `Send` so each
//! runs on its sensor's thread.

use std::collections::BTreeMap;
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

use crate::hw::HostMemory;
use crate::lm::Usage;

use super::act::ActionReport;
use crate::agent::audit::OutcomeStatus;
use crate::agent::tools::truncate_str;

/// One reading.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Signal {
    /// The sensor that produced it.
    pub sensor: String,
    /// What it measures (`last_action.output`, `workspace.changed`, ...).
    pub key: String,
    /// The reading, as text.
    pub value: String,
}

impl Signal {
    /// A signal.
    pub fn new(sensor: &str, key: &str, value: impl Into<String>) -> Self {
        Self {
            sensor: sensor.into(),
            key: key.into(),
            value: value.into(),
        }
    }
}

/// A sensor's failure.
#[derive(Debug, Clone, PartialEq, thiserror::Error, Serialize, Deserialize)]
#[error("{0}")]
pub struct SensorError(pub String);

/// A sensor that failed this cycle.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SensorFailure {
    /// Sensor name.
    pub sensor: String,
    /// Whether it is critical.
    pub critical: bool,
    /// It ran past its timeout.
    pub timed_out: bool,
    /// What happened.
    pub reason: String,
}

/// What one Observe phase saw.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SensorReadings {
    /// Cycle number.
    pub cycle: usize,
    /// UTC time.
    pub time: String,
    /// Readings of the sensors that answered, in sensor order.
    pub signals: Vec<Signal>,
    /// Sensors that failed or timed out.
    pub failed: Vec<SensorFailure>,
    /// 1.0, halved per critical failure, times 0.9 per non-critical failure.
    pub confidence: f64,
}

impl SensorReadings {
    /// The value of the first signal with this key.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.signals
            .iter()
            .find(|s| s.key == key)
            .map(|s| s.value.as_str())
    }
}

/// What a sensor read returns.
pub type SensorFuture = Pin<Box<dyn Future<Output = Result<Vec<Signal>, SensorError>> + Send>>;

/// Something the agent can look at each cycle.
pub trait Sensor: Send + Sync {
    /// Name.
    fn name(&self) -> &str;
    /// Whether the loop is blind without it (its failure costs 0.3 of the observation
    /// confidence).
    fn critical(&self) -> bool;
    /// Its own timeout, when it needs a different one from the loop's.
    fn timeout(&self) -> Option<Duration> {
        None
    }
    /// Start a reading.
    fn read(&self) -> SensorFuture;
}

/// Confidence after these failures: only the critical sensors count.
pub fn confidence_after(failed: &[SensorFailure]) -> f64 {
    super::risk::observation_confidence(failed.iter().filter(|f| f.critical).count())
}

// ---------------------------------------------------------------------------------------------
// Built-in sensors

/// Where the loop leaves the last action's report for the `last_action` sensor.
pub type LastActionSlot = Arc<Mutex<Option<ActionReport>>>;
/// Where the planner calls leave their usage for the `model` sensor.
pub type UsageSlot = Arc<Mutex<Option<Usage>>>;

/// Longest output preview in a signal.
pub const OUTPUT_PREVIEW: usize = 1200;

/// The last action's result (critical: without it the loop does not know what it did).
#[derive(Debug, Clone)]
pub struct LastActionSensor {
    /// The slot the loop writes.
    pub slot: LastActionSlot,
}

impl Sensor for LastActionSensor {
    fn name(&self) -> &str {
        "last_action"
    }
    fn critical(&self) -> bool {
        true
    }
    fn read(&self) -> SensorFuture {
        let slot = self.slot.clone();
        Box::pin(async move {
            let guard = slot
                .lock()
                .map_err(|_| SensorError("last-action slot poisoned".into()))?;
            let Some(r) = guard.as_ref() else {
                return Ok(vec![Signal::new(
                    "last_action",
                    "last_action.status",
                    "none yet",
                )]);
            };
            let mut out = vec![
                Signal::new("last_action", "last_action.tool", r.tool.clone()),
                Signal::new(
                    "last_action",
                    "last_action.status",
                    match r.status {
                        OutcomeStatus::Verified => "verified",
                        OutcomeStatus::Unverified => "unverified",
                        OutcomeStatus::Failed => "failed",
                        OutcomeStatus::TimedOut => "timed_out",
                    },
                ),
                Signal::new(
                    "last_action",
                    "last_action.output",
                    truncate_str(&r.output, OUTPUT_PREVIEW),
                ),
            ];
            for d in &r.discrepancies {
                out.push(Signal::new(
                    "last_action",
                    "last_action.discrepancy",
                    d.clone(),
                ));
            }
            Ok(out)
        })
    }
}

/// Files in the workspace that changed since the last cycle (size or modification time).
#[derive(Debug, Clone)]
pub struct WorkspaceSensor {
    root: PathBuf,
    /// boyd's own files, never reported (their names, sizes and times included).
    private: crate::agent::tools::Private,
    prev: Arc<Mutex<Option<FileSnapshot>>>,
}

/// Path → (size, modification time in ns).
type FileSnapshot = BTreeMap<String, (u64, u128)>;

impl WorkspaceSensor {
    /// Watch `root`, leaving out boyd's own files as this process finds them
    /// ([`crate::agent::tools::Private::from_env`]).
    pub fn new(root: impl Into<PathBuf>) -> Self {
        let root = root.into();
        Self {
            root: root.canonicalize().unwrap_or(root),
            private: crate::agent::tools::Private::from_env(),
            prev: Arc::new(Mutex::new(None)),
        }
    }

    /// The same sensor leaving out `private` instead (a sandbox's, [`Sandbox::private`]).
    ///
    /// [`Sandbox::private`]: crate::agent::tools::Sandbox::private
    pub fn hiding(mut self, private: crate::agent::tools::Private) -> Self {
        self.private = private;
        self
    }
}

const WALK_LIMIT: usize = 5000;

fn snapshot(root: &std::path::Path, private: &crate::agent::tools::Private) -> FileSnapshot {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&dir) else {
            continue;
        };
        for ent in rd.flatten() {
            if out.len() >= WALK_LIMIT {
                return out;
            }
            let name = ent.file_name();
            if name == ".git" || name == "target" || name == ".boyd" {
                continue;
            }
            let Ok(ft) = ent.file_type() else { continue };
            let path = ent.path();
            if private.hides(root, &path) {
                continue;
            }
            if ft.is_dir() {
                stack.push(path);
            } else if ft.is_file() {
                let Ok(meta) = ent.metadata() else { continue };
                let mtime = meta
                    .modified()
                    .ok()
                    .and_then(|t| t.duration_since(SystemTime::UNIX_EPOCH).ok())
                    .map_or(0, |d| d.as_nanos());
                let rel = crate::agent::tools::rel_display(root, &path);
                out.insert(rel, (meta.len(), mtime));
            }
        }
    }
    out
}

/// The workspace files the run has read, whose contents the [`FileHashSensor`] re-reads.
pub type WatchSlot = Arc<Mutex<std::collections::BTreeSet<String>>>;

/// Signal key prefix of a watched file's content hash (`file.sha256 <path>`).
pub const FILE_HASH_SIGNAL: &str = "file.sha256 ";

/// Largest file hashed (bigger ones are reported by size and time only, by the workspace
/// sensor).
const HASH_MAX_BYTES: u64 = 16 << 20;

/// The SHA-256 of a workspace file's content, read through the sandbox.
pub fn file_hash(ws: &crate::agent::tools::Sandbox, path: &str) -> Option<String> {
    use std::io::Read as _;
    let (_, f) = ws.open_file(path).ok()?;
    let mut bytes = Vec::new();
    f.take(HASH_MAX_BYTES).read_to_end(&mut bytes).ok()?;
    Some(crate::agent::condense::sha256_hex(&bytes))
}

/// The content hash of every file the run has read: a reading that differs from the one taken
/// when the file was read is a contradiction of the world against the world model.
#[derive(Debug, Clone)]
pub struct FileHashSensor {
    /// The workspace.
    pub workspace: crate::agent::tools::Sandbox,
    /// The files to hash.
    pub watch: WatchSlot,
}

impl Sensor for FileHashSensor {
    fn name(&self) -> &str {
        "files"
    }
    fn critical(&self) -> bool {
        false
    }
    fn read(&self) -> SensorFuture {
        let ws = self.workspace.clone();
        let paths: Vec<String> = self
            .watch
            .lock()
            .map(|g| g.iter().cloned().collect())
            .unwrap_or_default();
        Box::pin(async move {
            tokio::task::spawn_blocking(move || {
                paths
                    .iter()
                    .filter_map(|p| {
                        file_hash(&ws, p)
                            .map(|h| Signal::new("files", &format!("{FILE_HASH_SIGNAL}{p}"), h))
                    })
                    .collect()
            })
            .await
            .map_err(|e| SensorError(format!("file hashing failed: {e}")))
        })
    }
}

impl Sensor for WorkspaceSensor {
    fn name(&self) -> &str {
        "workspace"
    }
    fn critical(&self) -> bool {
        false
    }
    fn read(&self) -> SensorFuture {
        let root = self.root.clone();
        let private = self.private.clone();
        let prev = self.prev.clone();
        Box::pin(async move {
            let now = tokio::task::spawn_blocking(move || snapshot(&root, &private))
                .await
                .map_err(|e| SensorError(format!("workspace walk failed: {e}")))?;
            let mut guard = prev
                .lock()
                .map_err(|_| SensorError("workspace state poisoned".into()))?;
            let mut out = vec![Signal::new(
                "workspace",
                "workspace.files",
                now.len().to_string(),
            )];
            if let Some(before) = guard.as_ref() {
                let mut changed: Vec<String> = now
                    .iter()
                    .filter(|(k, v)| before.get(*k) != Some(v))
                    .map(|(k, _)| k.clone())
                    .collect();
                changed.extend(
                    before
                        .keys()
                        .filter(|k| !now.contains_key(*k))
                        .map(|k| format!("{k} (deleted)")),
                );
                if !changed.is_empty() {
                    changed.truncate(20);
                    out.push(Signal::new(
                        "workspace",
                        "workspace.changed",
                        changed.join(", "),
                    ));
                }
            }
            *guard = Some(now);
            Ok(out)
        })
    }
}

/// The `hardware.mem_available_mib` signal for a reading of the host's memory
/// ([`HostMemory`], the one /proc/meminfo parser).
pub fn mem_available_signal(mem: HostMemory) -> Result<Signal, SensorError> {
    let b = mem
        .available
        .ok_or_else(|| SensorError("/proc/meminfo has no MemAvailable".into()))?;
    Ok(Signal::new(
        "hardware",
        "hardware.mem_available_mib",
        (b.0 / (1 << 20)).to_string(),
    ))
}

/// Free memory on this machine (Linux: /proc/meminfo).
#[derive(Debug, Clone, Default)]
pub struct HardwareSensor;

impl Sensor for HardwareSensor {
    fn name(&self) -> &str {
        "hardware"
    }
    fn critical(&self) -> bool {
        false
    }
    fn read(&self) -> SensorFuture {
        Box::pin(async move {
            let mem = HostMemory::read().map_err(|e| SensorError(e.to_string()))?;
            Ok(vec![mem_available_signal(mem)?])
        })
    }
}

/// The model's own state: context used and KV-cache bytes after its last request.
#[derive(Debug, Clone)]
pub struct ModelSensor {
    /// The slot the loop writes after each model call.
    pub slot: UsageSlot,
    /// The model's context length, when known.
    pub context_length: Option<usize>,
}

impl Sensor for ModelSensor {
    fn name(&self) -> &str {
        "model"
    }
    fn critical(&self) -> bool {
        false
    }
    fn read(&self) -> SensorFuture {
        let slot = self.slot.clone();
        let ctx = self.context_length;
        Box::pin(async move {
            let guard = slot
                .lock()
                .map_err(|_| SensorError("usage slot poisoned".into()))?;
            let Some(u) = guard.as_ref() else {
                return Ok(Vec::new());
            };
            let mut used = u.context_used.to_string();
            if let Some(c) = ctx {
                used.push_str(&format!(" of {c}"));
            }
            Ok(vec![
                Signal::new("model", "model.context_used", used),
                Signal::new("model", "model.kv_bytes", u.kv_bytes.to_string()),
            ])
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meminfo() {
        let mem = HostMemory::parse("MemTotal: 10 kB\nMemAvailable:   2048 kB\n").expect("parse");
        assert_eq!(mem.available, Some(crate::units::Bytes(2048 * 1024)));
        let signal = mem_available_signal(mem).expect("signal");
        assert_eq!(signal.key, "hardware.mem_available_mib");
        assert_eq!(signal.value, "2");
        assert!(HostMemory::parse("nothing").is_none());
        let no_available = HostMemory::parse("MemTotal: 10 kB\n").expect("parse");
        assert!(mem_available_signal(no_available).is_err());
    }
}
