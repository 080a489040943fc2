//! The OODA loop: Observe → Orient → Decide → Act, with the world model as first-class state.
//!
//! Each cycle reads all sensors concurrently (`observe`), folds the readings and the model's
//! fact extraction into the persistent `WorldModel`, checking contradictions before each update
//! (`orient`), asks for candidate actions and gates them by risk, budget and approval tier
//! (`decide`), and runs the chosen one with an audited intent, a timeout and a post-condition
//! check (`act`). Implicit guidance skips the Decide call when a declared rule or a pattern seen
//! earlier in the run already says what to do.
//!
//! Every run ends in an explicit terminal state, saved with the world-model snapshot in
//! `<run>/ooda.json`; `resume` continues a paused, escalated, budget-exhausted, over-long or
//! cancelled run (with an approval token for the pending irreversible action, when there is one).
//! Phase records go to `<run>/ooda.jsonl`, actions to the hash-chained `audit.jsonl`, and the
//! usual transcript (`Start`, one `Step` per action, `End`) to `transcript.jsonl` so `boyd runs`
//! lists OODA runs too. This module never imports candle and never prints.

pub mod act;
pub mod decide;
pub mod eval;
pub mod memory;
pub mod observe;
pub mod orient;
pub mod writers;

use std::cell::RefCell;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::lm::{CancelToken, GenOutput, GenRequest, LanguageModel, LmError, Usage};

use super::approval::{self, ApprovalError, ApprovalKey};
use super::audit::{AuditError, AuditEvent, AuditSink, ChainLog, OutcomeStatus};
use super::condense::{sha256_hex, Condenser};
use super::planner::PlannerError;
use super::rundir::{utc_timestamp, Record, RunDir, RunDirError};
use super::tools::{Sandbox, ToolContext, ToolErrorKind, Toolset};
use super::types::{
    Action, Observation as StepObservation, ObservationKind, RunOutcome, Step, StepTimings,
    StopReason, UsageTotals,
};

use act::{ActRequest, ActionReport, PostConditions};
use decide::{
    assess, state_signature, Approvals, Assessment, Candidate, DecideInput, Decider,
    DecisionRecord, DropReason, ImplicitGuidance, Policy, Tier,
};
use memory::{MemoryError, MemoryKind, MemoryStore, PRIOR_DISCOUNT, STORE_MIN_CONFIDENCE};
use observe::{
    observe, HardwareSensor, LastActionSensor, LastActionSlot, ModelSensor, Observation, Sensor,
    UsageSlot, WorkspaceSensor,
};
use orient::{rule_claims, FactClaim, OrientInput, OrientReport, Orienter, WorldModel};

/// The snapshot file.
pub const SNAPSHOT_FILE: &str = "ooda.json";
/// Held (exclusive lock) while a session resumes the run.
pub const RESUME_LOCK: &str = ".resume.lock";
/// The phase log.
pub const PHASE_LOG: &str = "ooda.jsonl";

/// How an OODA run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OodaState {
    /// A final answer.
    Completed,
    /// Needs a human: low confidence, an action that needs approval, or no viable candidate.
    Escalated,
    /// A contradiction against a high-confidence fact needs review.
    PausedForReview,
    /// The next action costs more than the risk budget left (or the deadline passed).
    BudgetExhausted,
    /// The cycle limit was reached.
    MaxLoopsExceeded,
    /// Cancelled.
    Cancelled,
}

impl OodaState {
    /// Name.
    pub fn as_str(self) -> &'static str {
        match self {
            OodaState::Completed => "completed",
            OodaState::Escalated => "escalated",
            OodaState::PausedForReview => "paused_for_review",
            OodaState::BudgetExhausted => "budget_exhausted",
            OodaState::MaxLoopsExceeded => "max_loops_exceeded",
            OodaState::Cancelled => "cancelled",
        }
    }
    /// The run-level stop reason (for `boyd runs` and evals).
    pub fn stop_reason(self) -> StopReason {
        match self {
            OodaState::Completed => StopReason::Completed,
            OodaState::Escalated => StopReason::Escalated,
            OodaState::PausedForReview => StopReason::PausedForReview,
            OodaState::BudgetExhausted => StopReason::BudgetExhausted,
            OodaState::MaxLoopsExceeded => StopReason::MaxSteps,
            OodaState::Cancelled => StopReason::Cancelled,
        }
    }
}

impl std::fmt::Display for OodaState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Settings of the loop.
#[derive(Debug, Clone)]
pub struct OodaConfig {
    /// Most cycles per session (a resume gets as many again).
    pub max_loops: usize,
    /// Candidates asked of the model.
    pub candidates: usize,
    /// Risk budget in cost units (low 1, medium 3, high 8; plus running time).
    pub risk_budget: f64,
    /// Budget added when resuming.
    pub extra_budget: f64,
    /// Below this orientation confidence, escalate instead of deciding.
    pub confidence_threshold: f64,
    /// Default sensor timeout.
    pub sensor_timeout: Duration,
    /// Tool timeout.
    pub action_timeout: Duration,
    /// Wall-clock deadline of the run (over all sessions).
    pub deadline: Option<Duration>,
    /// The world model's share of the context, in tokens; above it, older steps are summarized.
    pub world_tokens: usize,
    /// Approval tiers and rules.
    pub policy: Policy,
    /// Consecutive unusable model proposals before escalating.
    pub max_decide_failures: usize,
    /// Include the built-in sensors (last action, workspace, hardware, model).
    pub builtin_sensors: bool,
    /// Condenser limit for transcript observations.
    pub observation_limit: usize,
    /// Memory entries retrieved per cycle.
    pub memory_k: usize,
}

impl Default for OodaConfig {
    fn default() -> Self {
        Self {
            max_loops: 12,
            candidates: 3,
            risk_budget: 20.0,
            extra_budget: 0.0,
            confidence_threshold: 0.5,
            sensor_timeout: Duration::from_secs(2),
            action_timeout: Duration::from_secs(60),
            deadline: None,
            world_tokens: 1500,
            policy: Policy::default(),
            max_decide_failures: 3,
            builtin_sensors: true,
            observation_limit: super::condense::DEFAULT_LIMIT,
            memory_k: 3,
        }
    }
}

/// Counters of a run (over all sessions).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Counters {
    /// Cycles.
    pub cycles: usize,
    /// Decide model calls.
    pub decide_calls: usize,
    /// Decisions by implicit guidance (no Decide call).
    pub implicit: usize,
    /// Orient model calls.
    pub orient_calls: usize,
    /// Actions executed (tool calls, not counting the final answer).
    pub actions: usize,
    /// Candidates refused by the gate.
    pub refused: usize,
    /// Unparseable model outputs.
    pub parse_failures: usize,
    /// Contradictions found.
    pub contradictions: usize,
    /// World-model compressions.
    pub compressions: usize,
    /// Irreversible actions executed.
    pub irreversible: usize,
    /// Token usage.
    pub usage: UsageTotals,
}

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

/// The result of an OODA run (or session).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OodaOutcome {
    /// Run id.
    pub run_id: String,
    /// Run directory.
    pub run_dir: PathBuf,
    /// Task.
    pub task: String,
    /// Terminal state.
    pub state: OodaState,
    /// Answer.
    pub answer: Option<String>,
    /// Detail.
    pub detail: Option<String>,
    /// The pending action's fingerprint (for `boyd approve`).
    pub pending_fingerprint: Option<String>,
    /// The pending action, readable.
    pub pending_action: Option<String>,
    /// Counters.
    pub counters: Counters,
    /// Wall time of this session.
    pub elapsed_s: f64,
    /// Decider name.
    pub planner: String,
    /// Risk budget left.
    pub budget_left: f64,
}

impl OodaOutcome {
    /// The run-level outcome.
    pub fn to_run_outcome(&self) -> RunOutcome {
        RunOutcome {
            run_id: self.run_id.clone(),
            run_dir: self.run_dir.clone(),
            task: self.task.clone(),
            stop: self.state.stop_reason(),
            answer: self.answer.clone(),
            detail: self.detail.clone(),
            steps: self.counters.cycles,
            usage: self.counters.usage.clone(),
            elapsed_s: self.elapsed_s,
            planner: self.planner.clone(),
            parse_failures: self.counters.parse_failures,
        }
    }
}

/// Something that happened, for live display.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub enum OodaEvent<'a> {
    /// The run (or a resumed session) started.
    Started {
        /// Run id.
        run_id: &'a str,
        /// Run directory.
        run_dir: &'a Path,
        /// Task.
        task: &'a str,
        /// Approval tier of each tool.
        tiers: &'a [(String, Tier)],
        /// Risk budget left.
        budget: f64,
        /// Whether this is a resumed session.
        resumed: bool,
    },
    /// Observe finished.
    Observed {
        /// What was seen.
        observation: &'a Observation,
    },
    /// Orient finished.
    Oriented {
        /// Cycle.
        cycle: usize,
        /// What changed.
        report: &'a OrientReport,
        /// The world model after the update.
        world: &'a WorldModel,
    },
    /// The world model was compressed.
    Compressed {
        /// Steps summarized.
        steps: usize,
        /// Tokens before.
        tokens_before: usize,
        /// Tokens after.
        tokens_after: usize,
    },
    /// Decide finished.
    Decided {
        /// The decision.
        record: &'a DecisionRecord,
    },
    /// Act finished.
    Acted {
        /// The action's report.
        report: &'a ActionReport,
    },
    /// The run reached a terminal state.
    Finished {
        /// The outcome.
        outcome: &'a OodaOutcome,
    },
}

/// Failures of our machinery that end an OODA run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OodaError {
    /// Run directory.
    #[error(transparent)]
    RunDir(#[from] RunDirError),
    /// The audit log could not be written (the agent stops).
    #[error(transparent)]
    Audit(#[from] AuditError),
    /// The planner machinery failed.
    #[error("planner failed")]
    Planner(#[source] PlannerError),
    /// An approval token was refused.
    #[error("approval refused: {0}")]
    Approval(#[from] ApprovalError),
    /// The memory store failed.
    #[error(transparent)]
    Memory(#[from] MemoryError),
    /// Snapshot or phase log I/O.
    #[error("cannot {action} {path}")]
    Io {
        /// What.
        action: &'static str,
        /// Path.
        path: PathBuf,
        /// Reason.
        #[source]
        source: std::io::Error,
    },
    /// The snapshot is unreadable.
    #[error("{path} is not a valid OODA snapshot: {reason}")]
    BadSnapshot {
        /// Path.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// The run cannot be resumed.
    #[error("run {run_id} is {state}; only runs that did not complete can be resumed")]
    NotResumable {
        /// Run.
        run_id: String,
        /// Its state.
        state: OodaState,
    },
    /// `--approve` given but nothing waits for approval.
    #[error("run {run_id} has no action waiting for approval")]
    NothingPending {
        /// Run.
        run_id: String,
    },
    /// An approval token was given but no key is configured.
    #[error("no approval key is available to check the token")]
    NoKey,
    /// Another process is resuming the same run.
    #[error("run {path} is being resumed by another process; wait for it to finish")]
    Busy {
        /// The run directory.
        path: PathBuf,
    },
}

/// A language model shared by the Orient and Decide phases (they never run at the same time).
#[derive(Clone)]
pub struct SharedModel<'m>(Rc<RefCell<&'m mut dyn LanguageModel>>);

impl<'m> SharedModel<'m> {
    /// Share `model`.
    pub fn new(model: &'m mut dyn LanguageModel) -> Self {
        Self(Rc::new(RefCell::new(model)))
    }
}

impl LanguageModel for SharedModel<'_> {
    fn generate(
        &mut self,
        req: &GenRequest,
        on_text: &mut dyn FnMut(&str),
        cancel: &CancelToken,
    ) -> Result<GenOutput, LmError> {
        self.0.borrow_mut().generate(req, on_text, cancel)
    }
    fn context_length(&self) -> usize {
        self.0.borrow().context_length()
    }
    fn name(&self) -> String {
        self.0.borrow().name()
    }
}

/// Domain label of the snapshot's HMAC.
const SNAPSHOT_MAC_DOMAIN: &str = "boyd-ooda-snapshot-v1";
/// The field of `ooda.json` that holds its HMAC.
const SNAPSHOT_MAC_FIELD: &str = "mac";

fn bad_snapshot(path: &Path, reason: impl Into<String>) -> OodaError {
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
    let recs = super::rundir::read_transcript(&run_dir.join("transcript.jsonl"))?;
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
        let fp = super::guard::fingerprint(&p.tool, &p.args);
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
fn write_snapshot(
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

/// One OODA run (or resumed session): the phases' collaborators and settings.
pub struct Ooda<'a> {
    /// Proposes candidates.
    pub decider: &'a mut dyn Decider,
    /// Extracts facts.
    pub orienter: &'a mut dyn Orienter,
    /// Tools.
    pub tools: &'a Toolset,
    /// Settings.
    pub config: OodaConfig,
    /// Workspace for file tools (and the workspace sensor).
    pub workspace: Option<Sandbox>,
    /// Sensors in addition to the built-in ones.
    pub sensors: Vec<Arc<dyn Sensor>>,
    /// Key to check approval tokens.
    pub approval_key: Option<ApprovalKey>,
    /// Memory across runs.
    pub memory: Option<MemoryStore>,
    /// Audit sink (default: the run directory's hash-chained log).
    pub audit: Option<Box<dyn AuditSink>>,
    /// Post-conditions by tool.
    pub postconditions: PostConditions,
    /// Cancellation.
    pub cancel: CancelToken,
}

struct Session<'e> {
    run_dir: RunDir,
    run_id: String,
    run_path: PathBuf,
    task: String,
    world: WorldModel,
    counters: Counters,
    guidance: ImplicitGuidance,
    next_action_id: u64,
    approved_pending: Option<(Assessment, String)>,
    approvals: Approvals,
    audit: Box<dyn AuditSink>,
    phase_log: std::fs::File,
    start: Instant,
    elapsed_before: f64,
    last_action: LastActionSlot,
    usage_slot: UsageSlot,
    new_action: Option<ActionReport>,
    resumed: bool,
    on_event: &'e mut dyn FnMut(&OodaEvent<'_>),
}

fn open_phase_log(run_path: &Path) -> Result<std::fs::File, OodaError> {
    let path = run_path.join(PHASE_LOG);
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .map_err(|source| OodaError::Io {
            action: "open",
            path,
            source,
        })
}

impl Session<'_> {
    fn log<T: Serialize>(&mut self, phase: &str, cycle: usize, data: &T) -> Result<(), OodaError> {
        let line = serde_json::json!({"phase": phase, "cycle": cycle, "time": utc_timestamp(), "data": data});
        let path = self.run_path.join(PHASE_LOG);
        writeln!(self.phase_log, "{line}").map_err(|source| OodaError::Io {
            action: "write",
            path,
            source,
        })
    }

    fn add_usage(&mut self, u: &Usage) {
        self.counters.usage.add(u);
        if let Ok(mut g) = self.usage_slot.lock() {
            *g = Some(u.clone());
        }
    }
}

impl<'a> Ooda<'a> {
    /// A loop with default settings, no workspace, no memory, no approval key.
    pub fn new(
        decider: &'a mut dyn Decider,
        orienter: &'a mut dyn Orienter,
        tools: &'a Toolset,
        cancel: CancelToken,
    ) -> Self {
        Self {
            decider,
            orienter,
            tools,
            config: OodaConfig::default(),
            workspace: None,
            sensors: Vec::new(),
            approval_key: None,
            memory: None,
            audit: None,
            postconditions: PostConditions::builtin(),
            cancel,
        }
    }

    /// Start a run on `task` in `run_dir`.
    pub async fn run(
        mut self,
        task: &str,
        run_dir: RunDir,
        on_event: &mut dyn FnMut(&OodaEvent<'_>),
    ) -> Result<OodaOutcome, OodaError> {
        let run_id = run_dir.id().to_string();
        let run_path = run_dir.path().to_path_buf();
        let mut audit: Box<dyn AuditSink> = match self.audit.take() {
            Some(a) => a,
            None => Box::new(ChainLog::create_with_key(
                &run_path,
                self.approval_key.clone(),
            )?),
        };
        audit.record(
            AuditEvent::RunStarted {
                run_id: run_id.clone(),
                task: task.into(),
            },
            true,
        )?;
        let mut run_dir = run_dir;
        run_dir.append(&Record::Start {
            run_id: run_id.clone(),
            task: task.to_string(),
            planner: self.decider.name(),
            tools: self.tools.names().iter().map(|s| s.to_string()).collect(),
            workspace: self.workspace.as_ref().map(|w| w.root().to_path_buf()),
            started_at: utc_timestamp(),
        })?;
        let budget = self.config.policy.effective_budget(self.config.risk_budget);
        let world = WorldModel::new(task, budget, self.config.deadline.map(|d| d.as_secs_f64()));
        let session = Session {
            phase_log: open_phase_log(&run_path)?,
            approvals: Approvals::new(self.approval_key.clone(), &run_id, &run_path, Vec::new()),
            run_dir,
            run_id,
            run_path,
            task: task.into(),
            world,
            counters: Counters::default(),
            guidance: ImplicitGuidance::new(self.config.policy.rules.clone()),
            next_action_id: 1,
            approved_pending: None,
            audit,
            start: Instant::now(),
            elapsed_before: 0.0,
            last_action: Arc::new(Mutex::new(None)),
            usage_slot: Arc::new(Mutex::new(None)),
            new_action: None,
            resumed: false,
            on_event,
        };
        self.drive(session).await
    }

    /// Continue a run that did not complete. `approve` is a token for the pending action (from
    /// `boyd approve`); it is checked now and spent when the action runs.
    pub async fn resume(
        mut self,
        run_path: &Path,
        approve: Option<&str>,
        on_event: &mut dyn FnMut(&OodaEvent<'_>),
    ) -> Result<OodaOutcome, OodaError> {
        // One session per run at a time: a second process resuming the same run waits for
        // nothing and is refused (its audit log and ledger belong to the first).
        let lock_path = run_path.join(RESUME_LOCK);
        let lock = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(|source| OodaError::Io {
                action: "open",
                path: lock_path.clone(),
                source,
            })?;
        match lock.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                return Err(OodaError::Busy {
                    path: run_path.to_path_buf(),
                })
            }
            Err(std::fs::TryLockError::Error(source)) => {
                return Err(OodaError::Io {
                    action: "lock",
                    path: lock_path,
                    source,
                })
            }
        }
        let snap = load_verified_snapshot(run_path, self.approval_key.as_ref())?;
        if let (Some(recorded), Some(ws)) = (&snap.workspace, &self.workspace) {
            if recorded != ws.root() {
                return Err(bad_snapshot(
                    &run_path.join(SNAPSHOT_FILE),
                    format!(
                        "the run's workspace is {}, this session's is {}",
                        recorded.display(),
                        ws.root().display()
                    ),
                ));
            }
        }
        if snap.state == OodaState::Completed {
            return Err(OodaError::NotResumable {
                run_id: snap.run_id,
                state: snap.state,
            });
        }
        // Check the token before touching anything.
        let mut approved_pending = None;
        if let Some(token) = approve {
            let pending = snap
                .pending
                .clone()
                .ok_or_else(|| OodaError::NothingPending {
                    run_id: snap.run_id.clone(),
                })?;
            let key = self.approval_key.as_ref().ok_or(OodaError::NoKey)?;
            key.check(token, &snap.run_id, &pending.fingerprint)?;
            if approval::Ledger::new(run_path).is_spent(token)? {
                return Err(ApprovalError::Replayed.into());
            }
            approved_pending = Some((pending, token.to_string()));
        }
        let run_dir = RunDir::at(run_path)?;
        let (mut audit, unknown): (Box<dyn AuditSink>, _) = match self.audit.take() {
            Some(a) => (
                a,
                super::audit::verify(run_path)
                    .map(|r| r.unknown_intents)
                    .unwrap_or_default(),
            ),
            None => {
                let (log, report) = ChainLog::reopen_with_key(run_path, self.approval_key.clone())?;
                (Box::new(log), report.unknown_intents)
            }
        };
        let mut world = snap.world;
        // Intents without outcomes (a crash mid-action): unknown, never retried automatically.
        for u in unknown {
            if !world.unknown_outcomes.contains(&u.fingerprint) {
                world.constraints.push(format!(
                    "the outcome of action {} ({}) is unknown after a crash; a human must check it",
                    u.action_id, u.tool
                ));
                world.unknown_outcomes.push(u.fingerprint);
            }
        }
        if snap.state == OodaState::PausedForReview {
            world.accept_reviewed();
        }
        world.risk_budget_remaining += self.config.extra_budget;
        world.risk_budget_total += self.config.extra_budget;
        if let Some(d) = self.config.deadline {
            world.deadline_s = Some(world.elapsed_s + d.as_secs_f64());
        }
        audit.record(
            AuditEvent::Resumed {
                from_state: snap.state.as_str().into(),
                approval: approve.map(|t| sha256_hex(t.as_bytes())),
            },
            true,
        )?;
        let tokens: Vec<String> = approve.map(|t| vec![t.to_string()]).unwrap_or_default();
        let mut guidance = snap.guidance;
        guidance.rules = self.config.policy.rules.clone();
        let session = Session {
            phase_log: open_phase_log(run_path)?,
            approvals: Approvals::new(self.approval_key.clone(), &snap.run_id, run_path, tokens),
            run_id: snap.run_id,
            run_path: run_path.to_path_buf(),
            run_dir,
            task: snap.task,
            elapsed_before: world.elapsed_s,
            world,
            counters: snap.counters,
            guidance,
            next_action_id: snap.next_action_id,
            approved_pending,
            audit,
            start: Instant::now(),
            last_action: Arc::new(Mutex::new(None)),
            usage_slot: Arc::new(Mutex::new(None)),
            new_action: None,
            resumed: true,
            on_event,
        };
        let out = self.drive(session).await;
        drop(lock);
        out
    }

    fn sensors(&self, s: &Session<'_>) -> Vec<Arc<dyn Sensor>> {
        let mut v: Vec<Arc<dyn Sensor>> = Vec::new();
        if self.config.builtin_sensors {
            v.push(Arc::new(LastActionSensor {
                slot: s.last_action.clone(),
            }));
            if let Some(ws) = &self.workspace {
                v.push(Arc::new(WorkspaceSensor::new(ws.root())));
            }
            v.push(Arc::new(HardwareSensor));
            v.push(Arc::new(ModelSensor {
                slot: s.usage_slot.clone(),
                context_length: self.decider.context_window(),
            }));
        }
        v.extend(self.sensors.iter().cloned());
        v
    }

    async fn drive(mut self, mut s: Session<'_>) -> Result<OodaOutcome, OodaError> {
        let tiers = self.config.policy.tiers_for(self.tools);
        (s.on_event)(&OodaEvent::Started {
            run_id: &s.run_id,
            run_dir: &s.run_path,
            task: &s.task,
            tiers: &tiers,
            budget: s.world.risk_budget_remaining,
            resumed: s.resumed,
        });
        let sensors = self.sensors(&s);
        let ctx = ToolContext {
            workspace: self.workspace.clone(),
            blob_dir: s.run_dir.blob_dir(),
            cancel: self.cancel.clone(),
        };
        let mut session_cycles = 0usize;
        let mut decide_failures = 0usize;
        // Tools left out of the next Decide's constraint after refused proposals.
        let mut exclude: Vec<String> = Vec::new();
        let mut pending: Option<Assessment> = None;
        let mut answer: Option<String> = None;

        let (state, detail) = loop {
            if self.cancel.is_cancelled() {
                break (
                    OodaState::Cancelled,
                    Some("cancelled by the user".to_string()),
                );
            }
            if session_cycles >= self.config.max_loops {
                break (
                    OodaState::MaxLoopsExceeded,
                    Some(format!("{session_cycles} cycles, the limit")),
                );
            }
            let elapsed = s.elapsed_before + s.start.elapsed().as_secs_f64();
            if let Some(dl) = s.world.deadline_s {
                if elapsed >= dl {
                    break (
                        OodaState::BudgetExhausted,
                        Some(format!("the deadline of {dl:.1} s passed")),
                    );
                }
            }
            session_cycles += 1;
            s.world.loop_count += 1;
            s.counters.cycles += 1;
            let cycle = s.world.loop_count;

            // An action approved on resume runs first, without a new decision.
            if let Some((a, token)) = s.approved_pending.take() {
                let record = DecisionRecord {
                    cycle,
                    implicit: false,
                    guidance: Some("approved by a human's token".into()),
                    candidates: vec![a.clone()],
                    chosen: Some(0),
                    parse_error: None,
                };
                s.log("decide", cycle, &record)?;
                (s.on_event)(&OodaEvent::Decided { record: &record });
                let mut a = a;
                a.token = Some(token);
                a.approved = true;
                match self.act(&mut s, &ctx, &a, cycle, false, None).await? {
                    Ok(()) => continue,
                    Err(refusal) => break (OodaState::Escalated, Some(refusal)),
                }
            }

            // ---- Observe
            let obs = observe(&sensors, cycle, self.config.sensor_timeout).await;
            // Signals are the latest readings; only the loop's own notes carry over.
            s.world.signals.retain(|k, _| k.starts_with("decide."));
            for sig in &obs.signals {
                s.world.signals.insert(sig.key.clone(), sig.value.clone());
            }
            for f in &obs.failed {
                s.world.signals.insert(
                    format!("sensor.{}", f.sensor),
                    format!("failed: {}", f.reason),
                );
            }
            s.log("observe", cycle, &obs)?;
            (s.on_event)(&OodaEvent::Observed { observation: &obs });

            // ---- Orient
            let mut report = OrientReport::default();
            if let Some(mem) = &self.memory {
                let mut query = s.world.objective.clone();
                if let Some(a) = &s.new_action {
                    query.push(' ');
                    query.push_str(super::tools::truncate_str(&a.output, 400));
                }
                let claims: Vec<(FactClaim, String)> = mem
                    .retrieve(&query, self.config.memory_k)
                    .into_iter()
                    .filter(|(_, e)| e.kind == MemoryKind::Fact)
                    .map(|(_, e)| {
                        (
                            FactClaim::new(&e.key, &e.value, e.confidence * PRIOR_DISCOUNT),
                            format!("memory:{}", e.source),
                        )
                    })
                    .collect();
                for (c, src) in claims {
                    s.world.apply_claims(&[c], &src, cycle, true, &mut report);
                }
            }
            let extraction = {
                let input = OrientInput {
                    world: &s.world,
                    observation: &obs,
                    last_action: s.new_action.as_ref(),
                    cancel: &self.cancel,
                };
                self.orienter.extract(&input)
            };
            let extraction = match extraction {
                Ok(e) => e,
                Err(PlannerError::Cancelled) => {
                    break (OodaState::Cancelled, Some("cancelled by the user".into()))
                }
                Err(PlannerError::ContextExhausted { detail }) => {
                    break (OodaState::Escalated, Some(format!("orient: {detail}")))
                }
                Err(e) => return Err(OodaError::Planner(e)),
            };
            s.counters.orient_calls += extraction.model_calls;
            if extraction.model_calls > 0 {
                s.add_usage(&extraction.usage);
            }
            report.model_calls = extraction.model_calls;
            if let Some(e) = &extraction.error {
                report.extraction_errors.push(e.clone());
                s.counters.parse_failures += 1;
            }
            for c in &extraction.unsupported {
                report.extraction_errors.push(format!(
                    "left out {} = {:?}: not in the observation",
                    c.key, c.value
                ));
            }
            if let Some(a) = s.new_action.take() {
                let src = format!("action {}", a.action_id);
                s.world
                    .apply_claims(&rule_claims(Some(&a)), &src, cycle, false, &mut report);
            }
            let name = self.orienter.name();
            s.world
                .apply_claims(&extraction.claims, &name, cycle, false, &mut report);
            for c in &report.contradictions {
                s.counters.contradictions += 1;
                s.audit.record(
                    AuditEvent::Contradiction {
                        key: c.key.clone(),
                        old: c.old.value.clone(),
                        new: c.new.value.clone(),
                        severity: c.severity.as_str().into(),
                    },
                    false,
                )?;
            }
            let low = report
                .contradictions
                .iter()
                .filter(|c| c.severity == orient::Severity::Low)
                .count();
            s.world.confidence = obs.confidence * 0.9f64.powi(low as i32);
            s.world.elapsed_s = s.elapsed_before + s.start.elapsed().as_secs_f64();
            if let Some((steps, before, after)) =
                s.world.compress_if_needed(self.config.world_tokens, 3)
            {
                s.counters.compressions += 1;
                s.audit.record(
                    AuditEvent::Compressed {
                        steps,
                        tokens_before: before,
                        tokens_after: after,
                    },
                    false,
                )?;
                s.log(
                    "compress",
                    cycle,
                    &serde_json::json!({"steps": steps, "tokens_before": before, "tokens_after": after}),
                )?;
                (s.on_event)(&OodaEvent::Compressed {
                    steps,
                    tokens_before: before,
                    tokens_after: after,
                });
            }
            s.log("orient", cycle, &report)?;
            (s.on_event)(&OodaEvent::Oriented {
                cycle,
                report: &report,
                world: &s.world,
            });
            let high: Vec<String> = s
                .world
                .open_high()
                .map(|c| {
                    format!(
                        "{}: known {:?} (confidence {:.2}, {}), now {:?} ({})",
                        c.key,
                        c.old.value,
                        c.old.confidence,
                        c.old.source,
                        c.new.value,
                        c.new.source
                    )
                })
                .collect();
            if !high.is_empty() {
                break (
                    OodaState::PausedForReview,
                    Some(format!(
                        "contradiction against a high-confidence fact: {}",
                        high.join("; ")
                    )),
                );
            }

            // ---- Decide
            if s.world.confidence < self.config.confidence_threshold {
                let failed: Vec<&str> = obs.failed.iter().map(|f| f.sensor.as_str()).collect();
                break (
                    OodaState::Escalated,
                    Some(format!(
                        "orientation confidence {:.2} is below {:.2} (failed sensors: {})",
                        s.world.confidence,
                        self.config.confidence_threshold,
                        if failed.is_empty() {
                            "none".into()
                        } else {
                            failed.join(", ")
                        }
                    )),
                );
            }
            let sig = state_signature(&s.world);
            let tools = self.tools;
            let polls = |name: &str| tools.get(name).is_some_and(|t| t.polls());
            let mut record: Option<DecisionRecord> = None;
            if let Some((cand, why)) = s.guidance.suggest(&s.world) {
                let (assessed, chosen) = assess(
                    &[cand],
                    &s.world,
                    self.tools,
                    &self.config.policy,
                    &s.approvals,
                    &polls,
                );
                if chosen.is_some() {
                    s.counters.implicit += 1;
                    record = Some(DecisionRecord {
                        cycle,
                        implicit: true,
                        guidance: Some(why),
                        candidates: assessed,
                        chosen,
                        parse_error: None,
                    });
                }
            }
            let record = match record {
                Some(r) => r,
                None => {
                    s.counters.decide_calls += 1;
                    let proposal = {
                        let input = DecideInput {
                            world: &s.world,
                            tools: self.tools,
                            n: self.config.candidates,
                            exclude: &exclude,
                            cancel: &self.cancel,
                        };
                        self.decider.propose(&input)
                    };
                    let proposal = match proposal {
                        Ok(p) => p,
                        Err(PlannerError::Cancelled) => {
                            break (OodaState::Cancelled, Some("cancelled by the user".into()))
                        }
                        Err(PlannerError::ContextExhausted { detail }) => {
                            break (OodaState::Escalated, Some(format!("decide: {detail}")))
                        }
                        Err(e) => return Err(OodaError::Planner(e)),
                    };
                    s.add_usage(&proposal.usage);
                    s.counters.parse_failures += proposal.parse_failures;
                    let (assessed, chosen) = assess(
                        &proposal.candidates,
                        &s.world,
                        self.tools,
                        &self.config.policy,
                        &s.approvals,
                        &polls,
                    );
                    DecisionRecord {
                        cycle,
                        implicit: false,
                        guidance: None,
                        candidates: assessed,
                        chosen,
                        parse_error: proposal.parse_error,
                    }
                }
            };
            for a in &record.candidates {
                let Some(reason) = &a.dropped else { continue };
                s.counters.refused += 1;
                s.audit.record(
                    AuditEvent::Refused {
                        cycle,
                        tool: a.tool.clone(),
                        fingerprint: a.fingerprint.clone(),
                        reason: reason.describe(),
                    },
                    false,
                )?;
                if !s
                    .world
                    .refused
                    .iter()
                    .any(|r| r.tool == a.tool && r.args == a.args)
                {
                    s.world.refused.push(orient::RefusedAction {
                        tool: a.tool.clone(),
                        args: a.args.clone(),
                        reason: reason.describe(),
                    });
                }
            }
            s.log("decide", cycle, &record)?;
            (s.on_event)(&OodaEvent::Decided { record: &record });

            let Some(choice) = record.choice().cloned() else {
                // The model's own mistakes (unparseable output, unknown tools, repeats,
                // irreversible actions the task did not ask for) are fed back as a signal, and
                // the tools it kept repeating or was refused leave the next constraint; only
                // several in a row escalate.
                let mistakes_only = record.candidates.iter().all(|a| {
                    matches!(
                        a.dropped,
                        Some(
                            DropReason::UnknownTool
                                | DropReason::Repeat
                                | DropReason::RepeatOfFailure { .. }
                                | DropReason::NotRequested
                        )
                    )
                });
                if record.candidates.is_empty() || mistakes_only {
                    decide_failures += 1;
                    for a in &record.candidates {
                        if matches!(
                            a.dropped,
                            Some(
                                DropReason::Repeat
                                    | DropReason::RepeatOfFailure { .. }
                                    | DropReason::NotRequested
                            )
                        ) && !exclude.contains(&a.tool)
                        {
                            exclude.push(a.tool.clone());
                        }
                    }
                    let why = match &record.parse_error {
                        Some(e) if record.candidates.is_empty() => format!("the last proposal was unusable: {e}"),
                        _ => "every candidate of the last proposal was refused (see Refused); propose something else or give the final answer".to_string(),
                    };
                    s.world.signals.insert("decide.error".into(), why);
                    if decide_failures >= self.config.max_decide_failures {
                        break (
                            OodaState::Escalated,
                            Some(format!(
                                "no viable candidate: {decide_failures} proposals in a row were unusable or refused"
                            )),
                        );
                    }
                    continue;
                }
                if let Some(a) = record
                    .candidates
                    .iter()
                    .find(|a| matches!(a.dropped, Some(DropReason::OverBudget { .. })))
                {
                    break (
                        OodaState::BudgetExhausted,
                        Some(format!(
                            "{} {} {}",
                            a.tool,
                            super::guard::canonical_json(&a.args),
                            a.dropped
                                .as_ref()
                                .map(DropReason::describe)
                                .unwrap_or_default()
                        )),
                    );
                }
                if let Some(a) = record
                    .candidates
                    .iter()
                    .find(|a| a.dropped == Some(DropReason::NeedsApproval))
                {
                    pending = Some(a.clone());
                    break (
                        OodaState::Escalated,
                        Some(format!(
                            "{} {} is irreversible and needs approval: boyd approve {} {}",
                            a.tool,
                            super::guard::canonical_json(&a.args),
                            s.run_id,
                            a.fingerprint
                        )),
                    );
                }
                let reasons: Vec<String> = record
                    .candidates
                    .iter()
                    .map(|a| {
                        format!(
                            "{}: {}",
                            a.tool,
                            a.dropped
                                .as_ref()
                                .map(DropReason::describe)
                                .unwrap_or_default()
                        )
                    })
                    .collect();
                break (
                    OodaState::Escalated,
                    Some(format!("no viable candidate ({})", reasons.join("; "))),
                );
            };
            decide_failures = 0;
            exclude.clear();
            s.world.signals.remove("decide.error");

            // ---- Act
            if choice.is_final {
                let text = match choice.args.get("answer") {
                    Some(serde_json::Value::String(t)) => t.clone(),
                    Some(other) => other.to_string(),
                    None => String::new(),
                };
                self.act_final(&mut s, &choice, &text, cycle, record.implicit)?;
                answer = Some(text);
                break (OodaState::Completed, None);
            }
            match self
                .act(&mut s, &ctx, &choice, cycle, record.implicit, Some(sig))
                .await?
            {
                Ok(()) => {}
                Err(refusal) => {
                    pending = Some(choice.clone());
                    break (OodaState::Escalated, Some(refusal));
                }
            }
        };
        self.finish(s, state, detail, answer, pending)
    }

    /// Run a chosen tool action. `Ok(Err(reason))` when its approval token was refused at the
    /// last moment (the action did not run).
    async fn act(
        &mut self,
        s: &mut Session<'_>,
        ctx: &ToolContext,
        a: &Assessment,
        cycle: usize,
        implicit: bool,
        sig: Option<String>,
    ) -> Result<Result<(), String>, OodaError> {
        let Some(tool) = self.tools.get(&a.tool).cloned() else {
            return Ok(Err(format!("no tool named {}", a.tool)));
        };
        let mut approval_sha = None;
        let tier = self.config.policy.tier(tool.as_ref());
        if tier == Tier::Deny {
            return Ok(Err(format!("{} is denied by the workspace policy", a.tool)));
        }
        if tier == Tier::Token {
            if super::guard::fingerprint(&a.tool, &a.args) != a.fingerprint {
                return Ok(Err(format!(
                    "{} {}: the action does not match the fingerprint it was approved for",
                    a.tool,
                    super::guard::canonical_json(&a.args)
                )));
            }
            let Some(token) = a.token.as_deref() else {
                return Ok(Err(format!("{} needs an approval token", a.tool)));
            };
            let Some(key) = s.approvals.key().cloned() else {
                return Ok(Err("no approval key to check the token".into()));
            };
            match approval::verify_and_spend(
                &key,
                s.approvals.ledger(),
                token,
                &s.run_id,
                &a.fingerprint,
            ) {
                Ok(h) => approval_sha = Some(h),
                Err(e) => return Ok(Err(format!("approval refused: {e}"))),
            }
        }
        let t0 = Instant::now();
        let args = act::normalize_args(tool.as_ref(), a.args.clone());
        let id = s.next_action_id;
        s.next_action_id += 1;
        let report = act::execute(
            ActRequest {
                action_id: id,
                cycle,
                tool: tool.clone(),
                args,
                fingerprint: a.fingerprint.clone(),
                implicit,
                approval: approval_sha,
                timeout: self.config.action_timeout,
            },
            ctx,
            &self.postconditions,
            s.audit.as_mut(),
        )
        .await?;
        s.counters.actions += 1;
        if a.irreversible {
            s.counters.irreversible += 1;
        }
        s.world.record_action(&report, a.irreversible);
        if report.status == OutcomeStatus::Verified && tool.polls() {
            if let Some(sig) = sig {
                s.guidance.learn(sig, &report.tool, &report.args);
            }
        }
        if let Ok(mut g) = s.last_action.lock() {
            *g = Some(report.clone());
        }
        // The usual transcript step, so `boyd runs show` lists OODA actions too.
        let kind = match report.status {
            OutcomeStatus::Verified | OutcomeStatus::Unverified => ObservationKind::Output,
            OutcomeStatus::Failed => ObservationKind::ToolError {
                kind: ToolErrorKind::Failed,
            },
            OutcomeStatus::TimedOut => ObservationKind::ToolError {
                kind: ToolErrorKind::Timeout,
            },
        };
        let dir = s.run_dir.blob_dir();
        let observation = Condenser {
            limit: self.config.observation_limit,
        }
        .condense(kind, report.output.clone(), &dir)
        .unwrap_or_else(|_| {
            StepObservation::new(kind, super::tools::truncate_str(&report.output, 1500))
        });
        s.run_dir.append(&Record::Step(Step {
            index: id as usize,
            thought: a.thought.clone(),
            action: Some(Action::tool(&report.tool, report.args.clone())),
            raw: String::new(),
            observation,
            fingerprint: Some(report.fingerprint.clone()),
            timings: StepTimings {
                plan_s: 0.0,
                tool_s: report.elapsed_s,
                total_s: t0.elapsed().as_secs_f64(),
            },
            usage: Usage::default(),
        }))?;
        s.log("act", cycle, &report)?;
        (s.on_event)(&OodaEvent::Acted { report: &report });
        s.new_action = Some(report);
        Ok(Ok(()))
    }

    fn act_final(
        &mut self,
        s: &mut Session<'_>,
        a: &Assessment,
        text: &str,
        cycle: usize,
        implicit: bool,
    ) -> Result<(), OodaError> {
        let id = s.next_action_id;
        s.next_action_id += 1;
        s.audit.record(
            AuditEvent::Intent {
                action_id: id,
                cycle,
                tool: a.tool.clone(),
                args: a.args.clone(),
                fingerprint: a.fingerprint.clone(),
                irreversible: false,
                approval: None,
                implicit,
            },
            true,
        )?;
        let (status, discrepancies) = if text.trim().is_empty() {
            (
                OutcomeStatus::Unverified,
                vec!["the answer is empty".to_string()],
            )
        } else {
            (OutcomeStatus::Verified, Vec::new())
        };
        s.audit.record(
            AuditEvent::Outcome {
                action_id: id,
                fingerprint: a.fingerprint.clone(),
                status,
                cost: 0.0,
                discrepancies,
                output_sha256: sha256_hex(text.as_bytes()),
            },
            false,
        )?;
        s.run_dir.append(&Record::Step(Step {
            index: id as usize,
            thought: a.thought.clone(),
            action: Some(Action::answer(text)),
            raw: String::new(),
            observation: StepObservation::new(ObservationKind::Final, text),
            fingerprint: Some(a.fingerprint.clone()),
            timings: StepTimings::default(),
            usage: Usage::default(),
        }))?;
        Ok(())
    }

    fn finish(
        mut self,
        mut s: Session<'_>,
        state: OodaState,
        detail: Option<String>,
        answer: Option<String>,
        pending: Option<Assessment>,
    ) -> Result<OodaOutcome, OodaError> {
        s.audit.record(
            AuditEvent::Terminal {
                state: state.as_str().into(),
                detail: detail.clone(),
            },
            true,
        )?;
        s.world.elapsed_s = s.elapsed_before + s.start.elapsed().as_secs_f64();
        // Memory: verified facts and action outcomes of this run.
        if let Some(mem) = self.memory.as_mut() {
            for f in s.world.facts.values() {
                if !f.prior && f.confidence >= STORE_MIN_CONFIDENCE {
                    mem.upsert(&f.key, &f.value, f.confidence, &s.run_id, MemoryKind::Fact);
                }
            }
            for c in &s.world.completed {
                let status = match c.status {
                    OutcomeStatus::Verified => "verified",
                    OutcomeStatus::Unverified => "unverified",
                    OutcomeStatus::Failed => "failed",
                    OutcomeStatus::TimedOut => "timed out",
                };
                mem.upsert(
                    &format!("outcome {}", orient::action_key(&c.tool, &c.args)),
                    &format!("{status}: {}", orient::one_line(&c.output, 200)),
                    1.0,
                    &s.run_id,
                    MemoryKind::Outcome,
                );
            }
            mem.save()?;
        }
        let snap = Snapshot {
            run_id: s.run_id.clone(),
            task: s.task.clone(),
            state,
            detail: detail.clone(),
            answer: answer.clone(),
            world: s.world.clone(),
            pending: pending.clone(),
            counters: s.counters.clone(),
            workspace: self.workspace.as_ref().map(|w| w.root().to_path_buf()),
            next_action_id: s.next_action_id,
            guidance: s.guidance.clone(),
            saved_at: utc_timestamp(),
        };
        write_snapshot(&s.run_path, &snap, self.approval_key.as_ref())?;
        let outcome = OodaOutcome {
            run_id: s.run_id.clone(),
            run_dir: s.run_path.clone(),
            task: s.task.clone(),
            state,
            answer,
            detail,
            pending_fingerprint: pending.as_ref().map(|p| p.fingerprint.clone()),
            pending_action: pending
                .as_ref()
                .map(|p| format!("{} {}", p.tool, super::guard::canonical_json(&p.args))),
            counters: s.counters.clone(),
            elapsed_s: s.start.elapsed().as_secs_f64(),
            planner: self.decider.name(),
            budget_left: s.world.risk_budget_remaining,
        };
        let ro = outcome.to_run_outcome();
        s.run_dir.append(&Record::End(ro.clone()))?;
        s.run_dir.write_outcome(&ro)?;
        s.log("terminal", s.world.loop_count, &outcome)?;
        (s.on_event)(&OodaEvent::Finished { outcome: &outcome });
        Ok(outcome)
    }
}

/// Candidates the loop treats as the same proposal (for tests and displays).
pub fn describe_candidate(c: &Candidate) -> String {
    let (tool, args) = c.call();
    format!("{tool} {}", super::guard::canonical_json(&args))
}
