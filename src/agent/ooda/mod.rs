//! The OODA loop: Observe → Orient → Decide → Act, with the world model as first-class state.
//!
//! Each cycle reads all sensors concurrently (`observe`), folds the readings and the model's
//! fact extraction into the persistent `WorldModel` (`world`), checking contradictions before
//! each update (`orient`), asks for candidate actions and gates them by risk, budget and approval
//! tier (`decide`, `policy`), and runs the chosen one with an audited intent, a timeout and a
//! post-condition check (`act`). Implicit guidance (`guidance`) skips the Decide call when a
//! declared rule or a pattern seen earlier in the run already says what to do. `cycle` drives
//! the phases, one method each; `lm_phases` is the model-backed Orient and Decide over one
//! model; `builder` assembles a run the way the CLI does.
//!
//! Every run ends in an explicit terminal state, saved with the world-model snapshot in
//! `<run>/ooda.json` (`snapshot`); `resume` continues a paused, escalated, budget-exhausted,
//! over-long or cancelled run (with an approval token for the pending irreversible action, when
//! there is one). Phase records go to `<run>/ooda.jsonl`, actions to the hash-chained
//! `audit.jsonl`, and the usual transcript (`Start`, one `Step` per action, `End`) to
//! `transcript.jsonl` so `boyd runs` lists OODA runs too. This module never imports candle and
//! never prints.

pub mod act;
pub mod builder;
mod cycle;
pub mod decide;
pub mod eval;
pub mod external;
pub mod guidance;
pub mod hypothesis;
pub mod intent;
pub mod learned;
pub mod lm_phases;
pub mod memory;
pub mod observe;
pub mod orient;
mod phases;
pub mod placeholder;
pub mod policy;
pub mod risk;
pub mod sensing;
pub mod snapshot;
pub mod world;
pub mod writers;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::lm::{CancelToken, Usage};

use super::approval::{self, ApprovalError, ApprovalKey};
use super::audit::{AuditError, AuditEvent, AuditSink, ChainLog};
use super::condense::sha256_hex;
use super::planner::PlannerError;
use super::rundir::{utc_timestamp, Record, RunDir, RunDirError};
use super::tools::{Sandbox, Toolset};
use super::types::{RunOutcome, StopReason, UsageTotals};

use act::{ActionReport, PostConditions};
use cycle::{open_phase_log, Driver, RunState};
use decide::{Approvals, Candidate, Decider, DecisionRecord, ImplicitGuidance, Policy, Tier};
use memory::{MemoryError, MemoryStore};
use observe::{Sensor, SensorReadings};
use orient::Orienter;
use snapshot::bad_snapshot;
use world::{OrientReport, WorldModel};

pub use builder::OodaBuilder;
pub use cycle::{Flow, Terminal};
pub use lm_phases::{ModelPhases, OrientMode, PhaseOptions};
use phases::PhaseSlot;
pub use phases::{Phases, SplitPhases};
pub use snapshot::{load_snapshot, load_verified_snapshot, Snapshot, SNAPSHOT_FILE};

/// Held (exclusive lock) while a session resumes the run.
pub const RESUME_LOCK: &str = ".resume.lock";
/// Most cycles per session by default (the architecture's limit).
pub const DEFAULT_MAX_LOOPS: usize = 20;
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
    /// Below this orientation confidence, escalate instead of deciding (and refuse candidates
    /// whose decision confidence is below it). The policy may raise it.
    pub confidence_threshold: f64,
    /// A contradicted fact of confidence above this pauses the run for review. The policy may
    /// lower it.
    pub contradiction_threshold: f64,
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
    /// Shape the tools for the workspace and narrow the Decide constraint each cycle, as the
    /// ReAct loop does (`agent::narrow`).
    pub narrow: bool,
    /// Who writes the final answer: the answer step over the tool outputs (the default, as in
    /// ReAct) or the chosen `final_answer` candidate.
    pub answer: crate::agent::answer::AnswerMode,
    /// Put the workspace's top-level listing in the world model when the run starts (as ReAct
    /// shows it under its task).
    pub overview: bool,
}

impl Default for OodaConfig {
    fn default() -> Self {
        Self {
            max_loops: DEFAULT_MAX_LOOPS,
            candidates: 3,
            risk_budget: risk::DEFAULT_RISK_BUDGET,
            extra_budget: 0.0,
            confidence_threshold: risk::DEFAULT_CONFIDENCE_THRESHOLD,
            contradiction_threshold: risk::DEFAULT_CONTRADICTION_THRESHOLD,
            sensor_timeout: Duration::from_secs(2),
            action_timeout: Duration::from_secs(60),
            deadline: None,
            world_tokens: 1500,
            policy: Policy::default(),
            max_decide_failures: 3,
            builtin_sensors: true,
            observation_limit: super::condense::DEFAULT_LIMIT,
            memory_k: 3,
            narrow: true,
            answer: crate::agent::answer::AnswerMode::default(),
            overview: true,
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
    /// Who produced the answer (none without one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer_by: Option<crate::agent::types::AnswerBy>,
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
            answer_by: self.answer_by,
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
        observation: &'a SensorReadings,
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
    /// A hypothesis was made (open) or settled by its action's outcome.
    Hypothesis {
        /// The hypothesis.
        hypothesis: &'a hypothesis::Hypothesis,
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

/// One OODA run (or resumed session): the phases' collaborators and settings.
pub struct Ooda<'a> {
    /// Orient and Decide.
    phases: PhaseSlot<'a>,
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
    /// Post-conditions added by tool name, in place of the tools' own (none by default).
    pub postconditions: PostConditions,
    /// Cancellation.
    pub cancel: CancelToken,
}

impl<'a> Ooda<'a> {
    /// A loop with default settings, no workspace, no memory, no approval key.
    pub fn new(
        decider: &'a mut dyn Decider,
        orienter: &'a mut dyn Orienter,
        tools: &'a Toolset,
        cancel: CancelToken,
    ) -> Self {
        Self::with_slot(
            PhaseSlot::Owned(Box::new(SplitPhases { decider, orienter })),
            tools,
            cancel,
        )
    }

    /// A loop over one object that orients and decides (default settings).
    pub fn with_phases(
        phases: &'a mut dyn Phases,
        tools: &'a Toolset,
        cancel: CancelToken,
    ) -> Self {
        Self::with_slot(PhaseSlot::Borrowed(phases), tools, cancel)
    }

    /// A loop that owns its phases (default settings).
    pub fn with_owned_phases(
        phases: Box<dyn Phases + 'a>,
        tools: &'a Toolset,
        cancel: CancelToken,
    ) -> Self {
        Self::with_slot(PhaseSlot::Owned(phases), tools, cancel)
    }

    fn with_slot(phases: PhaseSlot<'a>, tools: &'a Toolset, cancel: CancelToken) -> Self {
        Self {
            phases,
            tools,
            config: OodaConfig::default(),
            workspace: None,
            sensors: Vec::new(),
            approval_key: None,
            memory: None,
            audit: None,
            postconditions: PostConditions::new(),
            cancel,
        }
    }

    /// The thresholds of this session: the settings', as the policy sets or tightens them.
    fn apply_policy_thresholds(&mut self) {
        let c = &mut self.config;
        c.confidence_threshold = c
            .policy
            .effective_confidence_threshold(c.confidence_threshold);
        c.contradiction_threshold = c
            .policy
            .effective_contradiction_threshold(c.contradiction_threshold);
    }

    /// The decider's name (the planner of the run's transcript).
    fn decider_name(&self) -> String {
        self.phases.decider_ref().name()
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
            planner: self.decider_name(),
            tools: self.tools.names().iter().map(|s| s.to_string()).collect(),
            workspace: self.workspace.as_ref().map(|w| w.root().to_path_buf()),
            started_at: utc_timestamp(),
        })?;
        let budget = self.config.policy.effective_budget(self.config.risk_budget);
        self.apply_policy_thresholds();
        let mut world =
            WorldModel::new(task, budget, self.config.deadline.map(|d| d.as_secs_f64()));
        world.contradiction_threshold = self.config.contradiction_threshold;
        let session = RunState {
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
            cycle_usage: Usage::default(),
            cycle_start: Instant::now(),
            new_action: None,
            resumed: false,
            on_event,
        };
        Driver::new(self, session).run().await
    }

    /// Continue a run that did not complete. `approve` is a token for the pending action (from
    /// `boyd approve`); it is checked now and spent when the action runs.
    pub async fn resume(
        mut self,
        run_path: &Path,
        approve: Option<&str>,
        on_event: &mut dyn FnMut(&OodaEvent<'_>),
    ) -> Result<OodaOutcome, OodaError> {
        // One session per run at a time: a second process resuming the same run is refused
        // (its audit log and ledger belong to the first).
        let lock = lock_run(run_path).await?;
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
        self.apply_policy_thresholds();
        world.contradiction_threshold = self.config.contradiction_threshold;
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
        let session = RunState {
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
            cycle_usage: Usage::default(),
            cycle_start: Instant::now(),
            new_action: None,
            resumed: true,
            on_event,
        };
        let out = Driver::new(self, session).run().await;
        drop(lock);
        out
    }
}

/// How long `resume` keeps trying a run's lock before it says the run is busy. A lock is an
/// `flock` on the open file: a process that forks while holding one (any thread spawning a
/// child) shares it with the child until the child calls `exec`, so a lock just released can
/// look held for a few milliseconds. A second real session holds it far longer than this.
const RESUME_LOCK_GRACE: Duration = Duration::from_secs(2);

/// Take the run's resume lock, or say it is busy after [`RESUME_LOCK_GRACE`].
async fn lock_run(run_path: &Path) -> Result<std::fs::File, OodaError> {
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
    let deadline = Instant::now() + RESUME_LOCK_GRACE;
    loop {
        match lock.try_lock() {
            Ok(()) => return Ok(lock),
            Err(std::fs::TryLockError::WouldBlock) if Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
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
    }
}

/// Candidates the loop treats as the same proposal (for tests and displays).
pub fn describe_candidate(c: &Candidate) -> String {
    let (tool, args) = c.call();
    format!("{tool} {}", super::guard::canonical_json(&args))
}
