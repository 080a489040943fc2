//! The cycle driver: one method per phase (`observe`, `orient`, `decide`, `act`) on the state of
//! one session, each returning a typed control value instead of breaking out of one long loop.
//!
//! A phase returns `ControlFlow::Continue(value)` to hand its result to the next phase, or
//! `ControlFlow::Break(flow)`: `Flow::Continue` starts the next cycle (a Decide whose proposals
//! were all refused), `Flow::Stop(terminal)` ends the session in a terminal state. Failures of
//! our own machinery (audit, run directory, planner) are `Err` and end the run at once.

mod acting;
mod observing;
mod orienting;
mod rewrite;
mod skip;

use std::io::Write;
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use serde::Serialize;

use crate::lm::Usage;

use super::act::ActionReport;
use super::decide::{
    assess, state_signature, Approvals, Assessment, Candidate, DecideInput, DecisionRecord,
    DropReason, ImplicitGuidance, Proposal,
};
use super::memory::{MemoryKind, RecalledOutcome, PRIOR_DISCOUNT};
use super::observe::{LastActionSlot, SensorReadings, UsageSlot, WatchSlot};
use super::orient::{resource_claims, rule_claims, sensor_claims, OrientInput};
use super::placeholder::drop_placeholders;
use super::risk;
use super::sensing::SensorThreads;
use super::world::{FactClaim, OrientReport, RefusedAction, WorldModel};
use super::{Counters, Ooda, OodaError, OodaEvent, OodaOutcome, OodaState, PHASE_LOG};
use crate::agent::audit::{AuditEvent, AuditSink};
use crate::agent::guard::canonical_json;
use crate::agent::narrow;
use crate::agent::planner::PlannerError;
use crate::agent::rundir::{utc_timestamp, RunDir};
use crate::agent::tools::{truncate_str, ToolContext, Toolset, FINAL_ANSWER};
use crate::agent::types::{AnswerBy, Step};

/// The assessed candidates, the chosen one, and why the choice was changed (if it was).
type Rechoice = (Vec<Assessment>, Option<usize>, Option<String>);

/// How a session ended, before it is saved.
#[derive(Debug, Clone, PartialEq)]
pub struct Terminal {
    /// The terminal state.
    pub state: OodaState,
    /// Why, for people.
    pub detail: Option<String>,
}

impl Terminal {
    fn new(state: OodaState, detail: impl Into<String>) -> Self {
        Self {
            state,
            detail: Some(detail.into()),
        }
    }
    fn cancelled() -> Self {
        Self::new(OodaState::Cancelled, "cancelled by the user")
    }
}

/// What the loop does after a phase.
#[derive(Debug, Clone, PartialEq)]
pub enum Flow {
    /// Start the next cycle.
    Continue,
    /// End the session.
    Stop(Terminal),
}

/// A phase's result: its value for the next phase, or what the loop does now.
type Phase<T> = Result<ControlFlow<Flow, T>, OodaError>;

/// The value of a phase, or return its control value from the calling cycle.
macro_rules! proceed {
    ($phase:expr) => {
        match $phase? {
            ControlFlow::Continue(v) => v,
            ControlFlow::Break(flow) => return Ok(flow),
        }
    };
}

fn stop<T>(state: OodaState, detail: impl Into<String>) -> Phase<T> {
    Ok(ControlFlow::Break(Flow::Stop(Terminal::new(state, detail))))
}

/// A planner failure: cancellation and a full context end the session; the rest are errors.
fn planner_stop<T>(phase: &str, e: PlannerError) -> Phase<T> {
    match e {
        PlannerError::Cancelled => Ok(ControlFlow::Break(Flow::Stop(Terminal::cancelled()))),
        PlannerError::ContextExhausted { detail } => {
            stop(OodaState::Escalated, format!("{phase}: {detail}"))
        }
        e => Err(OodaError::Planner(e)),
    }
}

/// The state of one session of a run (a fresh run or a resume).
pub(super) struct RunState<'e> {
    pub(super) run_dir: RunDir,
    pub(super) run_id: String,
    pub(super) run_path: PathBuf,
    pub(super) task: String,
    pub(super) world: WorldModel,
    pub(super) counters: Counters,
    pub(super) guidance: ImplicitGuidance,
    pub(super) next_action_id: u64,
    pub(super) approved_pending: Option<(Assessment, String)>,
    pub(super) approvals: Approvals,
    pub(super) audit: Box<dyn AuditSink>,
    pub(super) phase_log: std::fs::File,
    pub(super) start: Instant,
    pub(super) elapsed_before: f64,
    pub(super) last_action: LastActionSlot,
    pub(super) usage_slot: UsageSlot,
    /// Model usage and start of the current cycle (the transcript step's usage and plan time).
    pub(super) cycle_usage: Usage,
    pub(super) cycle_start: Instant,
    pub(super) new_action: Option<ActionReport>,
    pub(super) resumed: bool,
    pub(super) on_event: &'e mut dyn FnMut(&OodaEvent<'_>),
}

pub(super) fn open_phase_log(run_path: &Path) -> Result<std::fs::File, OodaError> {
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

impl RunState<'_> {
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
        self.cycle_usage.add(u);
        if let Ok(mut g) = self.usage_slot.lock() {
            *g = Some(u.clone());
        }
    }

    fn elapsed(&self) -> f64 {
        self.elapsed_before + self.start.elapsed().as_secs_f64()
    }
}

/// The action Decide chose.
struct Choice {
    assessment: Assessment,
    /// The decision it came from (the alternatives and the reasoning of its intent record).
    record: DecisionRecord,
    implicit: bool,
    /// The oriented state it was chosen in (for learned guidance).
    signature: String,
}

/// One session's loop: the run's collaborators, its state, and what carries between cycles.
pub(super) struct Driver<'a, 'e> {
    ooda: Ooda<'a>,
    s: RunState<'e>,
    /// The sensors, each on its own thread.
    sensing: SensorThreads,
    /// Contradictions the last Orient found (the orientation confidence is recomputed when a
    /// sensor fails during generation).
    cycle_contradictions: usize,
    ctx: ToolContext,
    session_cycles: usize,
    /// Consecutive unusable or refused proposals.
    decide_failures: usize,
    /// The final answer the answer step already wrote for the chosen final answer (when only
    /// the final answer was left and no Decide call was made).
    prewritten: Option<(String, AnswerBy)>,
    /// Set when a calculation was proposed before the answer: the next Decide is the answer.
    answer_next: bool,
    /// Tools left out of the next Decide's constraint after refused proposals.
    exclude: Vec<String>,
    /// The action waiting for approval, when the session stops for one.
    pending: Option<Assessment>,
    answer: Option<String>,
    /// Who produced `answer`.
    answer_by: Option<AnswerBy>,
    /// Workspace files read in this run, re-hashed by the file sensor each cycle.
    watch: WatchSlot,
    /// Claims an action made about the world (a read file's content hash), applied in the next
    /// Orient before the sensors' readings.
    action_claims: Vec<(FactClaim, String)>,
    /// The tools as the prompts list them: shaped for the workspace (`agent::narrow::shape`).
    tools: Toolset,
    /// The files and folders the task names (narrowing's rule 2).
    named_paths: Vec<String>,
    /// This session's tool steps, for narrowing and the answer step.
    steps: Vec<Step>,
}

impl<'a, 'e> Driver<'a, 'e> {
    /// Start a session (announces it).
    pub(super) fn new(ooda: Ooda<'a>, mut s: RunState<'e>) -> Self {
        let tiers = ooda.config.policy.tiers_for(ooda.tools);
        (s.on_event)(&OodaEvent::Started {
            run_id: &s.run_id,
            run_dir: &s.run_path,
            task: &s.task,
            tiers: &tiers,
            budget: s.world.risk_budget_remaining,
            resumed: s.resumed,
        });
        // Files whose content hash the world model holds (from this session or, on resume, an
        // earlier one) are watched.
        let watch: WatchSlot = Arc::new(std::sync::Mutex::new(
            s.world
                .facts
                .values()
                .filter_map(|f| f.key.strip_prefix("sha256 of ").map(str::to_string))
                .collect(),
        ));
        let sensing = SensorThreads::start(
            ooda.sensors_for(&s.last_action, &s.usage_slot, &watch),
            ooda.config.sensor_timeout,
        );
        let ctx = ToolContext {
            workspace: ooda.workspace.clone(),
            blob_dir: s.run_dir.blob_dir(),
            cancel: ooda.cancel.clone(),
            task: Some(s.task.clone()),
        };
        // The workspace's top level, read once when the run starts (a resumed run keeps its
        // own): the Decide and Orient prompts show it as ReAct shows it under the task.
        if ooda.config.overview && s.world.overview.is_empty() && s.world.completed.is_empty() {
            if let Some(o) = crate::agent::react::workspace_overview(ooda.tools, &ctx) {
                s.world.overview = o;
            }
        }
        let (tools, named_paths) = if ooda.config.narrow {
            (
                narrow::shape(
                    ooda.tools,
                    ooda.workspace.as_ref().map(|w| w.root()),
                    &s.task,
                    true,
                ),
                crate::agent::tools::choices::named_paths_in(
                    &s.task,
                    ooda.workspace.as_ref().map(|w| w.root()),
                ),
            )
        } else {
            (ooda.tools.clone(), Vec::new())
        };
        Self {
            tools,
            named_paths,
            steps: Vec::new(),
            ooda,
            s,
            sensing,
            cycle_contradictions: 0,
            ctx,
            session_cycles: 0,
            decide_failures: 0,
            prewritten: None,
            answer_next: false,
            exclude: Vec::new(),
            pending: None,
            answer: None,
            answer_by: None,
            watch,
            action_claims: Vec::new(),
        }
    }

    /// Cycle until a terminal state, then save it.
    pub(super) async fn run(mut self) -> Result<OodaOutcome, OodaError> {
        let terminal = loop {
            match self.cycle().await? {
                Flow::Continue => {}
                Flow::Stop(t) => break t,
            }
        };
        let terminal = self.answer_at_limit(terminal)?;
        self.finish(terminal)
    }

    async fn cycle(&mut self) -> Result<Flow, OodaError> {
        let cycle = proceed!(self.begin_cycle());
        // An action approved on resume runs first, without a new decision.
        if let Some((a, token)) = self.s.approved_pending.take() {
            return self.act_approved(cycle, a, token).await;
        }
        let obs = self.observe(cycle)?;
        // The critical sensors keep being read, on their threads, while the model generates.
        self.sensing.start_watch();
        // A pattern learned in this workspace skips the Orient and Decide model calls.
        let learned = self.learned_pattern();
        proceed!(self.orient(cycle, &obs, learned.is_none()));
        let choice = proceed!(self.decide(cycle, &obs, learned));
        proceed!(self.recheck(cycle, &obs));
        self.act(cycle, choice).await
    }

    /// Limits checked before each cycle: cancellation, the session's cycles, the deadline.
    fn begin_cycle(&mut self) -> Phase<usize> {
        if self.ooda.cancel.is_cancelled() {
            return Ok(ControlFlow::Break(Flow::Stop(Terminal::cancelled())));
        }
        if self.session_cycles >= self.ooda.config.max_loops {
            return stop(
                OodaState::MaxLoopsExceeded,
                format!("{} cycles, the limit", self.session_cycles),
            );
        }
        let elapsed = self.s.elapsed();
        if let Some(dl) = self.s.world.deadline_s {
            if elapsed >= dl {
                return stop(
                    OodaState::BudgetExhausted,
                    format!("the deadline of {dl:.1} s passed"),
                );
            }
        }
        self.session_cycles += 1;
        self.s.world.loop_count += 1;
        self.s.cycle_usage = Usage::default();
        self.s.cycle_start = Instant::now();
        self.s.counters.cycles += 1;
        Ok(ControlFlow::Continue(self.s.world.loop_count))
    }

    async fn act_approved(
        &mut self,
        cycle: usize,
        a: Assessment,
        token: String,
    ) -> Result<Flow, OodaError> {
        let record = DecisionRecord {
            cycle,
            implicit: false,
            guidance: Some("approved by a human's token".into()),
            candidates: vec![a.clone()],
            chosen: Some(0),
            parse_error: None,
        };
        self.s.log("decide", cycle, &record)?;
        (self.s.on_event)(&OodaEvent::Decided { record: &record });
        let mut a = a;
        a.token = Some(token);
        a.approved = true;
        Ok(
            match self.run_tool(&a, &record, cycle, false, None).await? {
                Ok(()) => Flow::Continue,
                Err(refusal) => Flow::Stop(Terminal::new(OodaState::Escalated, refusal)),
            },
        )
    }

    /// Escalate on low confidence; else implicit guidance or the decider's candidates, assessed
    /// by the gate; the refused ones recorded. Without a viable candidate: the next cycle (the
    /// model's own mistakes, fed back) or a terminal state.
    fn decide(
        &mut self,
        cycle: usize,
        obs: &SensorReadings,
        learned: Option<(Candidate, String)>,
    ) -> Phase<Choice> {
        let threshold = self.ooda.config.confidence_threshold;
        if self.s.world.confidence < threshold {
            let failed: Vec<&str> = obs.failed.iter().map(|f| f.sensor.as_str()).collect();
            return stop(
                OodaState::Escalated,
                format!(
                    "orientation confidence {:.2} is below {:.2} (failed sensors: {})",
                    self.s.world.confidence,
                    threshold,
                    if failed.is_empty() {
                        "none".into()
                    } else {
                        failed.join(", ")
                    }
                ),
            );
        }
        let signature = state_signature(&self.s.world);
        let learned = learned.and_then(|l| self.guided_decision(cycle, l));
        let record = match learned.or_else(|| self.implicit_decision(cycle)) {
            Some(r) => r,
            None => match self.model_decision(cycle) {
                Ok(r) => r,
                Err(e) => return planner_stop("decide", e),
            },
        };
        self.record_refusals(cycle, &record)?;
        self.s.log("decide", cycle, &record)?;
        (self.s.on_event)(&OodaEvent::Decided { record: &record });
        let Some(choice) = record.choice().cloned() else {
            return Ok(ControlFlow::Break(self.no_choice(&record)));
        };
        self.decide_failures = 0;
        self.exclude.clear();
        self.s.world.signals.remove("decide.error");
        Ok(ControlFlow::Continue(Choice {
            assessment: choice,
            implicit: record.implicit,
            record,
            signature,
        }))
    }

    /// The tools the constraint offers, less the irreversible ones (approval tier `token`)
    /// whose effect the task does not ask for, when the run holds no approval token: the gate
    /// refuses such a candidate (`DropReason::NotRequested`) whatever the model writes, so
    /// offering it only spends a candidate (an injected "delete the file" cost a cycle). The
    /// prompt still lists them, so its KV prefix stays the same.
    fn without_unrequested(&self, allowed: Option<Toolset>) -> Option<Toolset> {
        if !self.s.approvals.is_empty() {
            return allowed;
        }
        let base = allowed.as_ref().unwrap_or(&self.tools);
        let policy = &self.ooda.config.policy;
        let out: Vec<String> = base
            .iter()
            .filter(|t| {
                t.name() != FINAL_ANSWER
                    && policy.tier(t.as_ref()) == super::policy::Tier::Token
                    && !super::decide::requested_by(&self.s.world.objective, t.as_ref())
            })
            .map(|t| t.name().to_string())
            .collect();
        if out.is_empty() {
            return allowed;
        }
        Some(super::decide::narrowed(base, &out))
    }

    /// A decision by implicit guidance, when it has a viable suggestion.
    fn implicit_decision(&mut self, cycle: usize) -> Option<DecisionRecord> {
        let suggestion = self.s.guidance.suggest(&self.s.world)?;
        self.guided_decision(cycle, suggestion)
    }

    /// A decision from the decider's proposal.
    fn model_decision(&mut self, cycle: usize) -> Result<DecisionRecord, PlannerError> {
        let tools = self.ooda.tools;
        let allowed = if std::mem::take(&mut self.answer_next) {
            Some(self.tools.only(FINAL_ANSWER))
        } else if self.ooda.config.narrow {
            narrow::narrow_step(&self.tools, &self.s.task, &self.named_paths, &self.steps)
        } else {
            None
        };
        let allowed = self.without_unrequested(allowed);
        // Narrowed to the final answer alone, with the answer step to write it from what was
        // observed: there is nothing to decide, and the proposal's answer text would be
        // replaced anyway. (A 0.5B decider wrote a 300-character number there, which the token
        // limit cut.)
        let answer_only = allowed
            .as_ref()
            .is_some_and(|a| a.iter().all(|t| t.name() == FINAL_ANSWER))
            && self.ooda.config.answer.from_observations()
            && self.steps.iter().any(crate::agent::outputs::usable);
        // Before the answer, a calculation the outputs call for (`query::calculation_before_answer`).
        let calculation = if answer_only {
            self.calculation_before_answer()?
        } else {
            None
        };
        let written = if answer_only && calculation.is_none() {
            match self.ooda.phases.decider().answer(
                &self.s.task,
                &self.steps,
                Some(self.s.world.overview.as_str()).filter(|o| !o.is_empty()),
                &self.ooda.cancel,
            ) {
                Ok(Some(o)) => Some(o),
                Ok(None) => None,
                Err(PlannerError::Cancelled) => return Err(PlannerError::Cancelled),
                Err(e) => {
                    tracing::warn!("answer step failed ({e}); asking the decider");
                    None
                }
            }
        } else {
            None
        };
        let proposal = if let Some(c) = calculation {
            Proposal {
                candidates: vec![c.0],
                raw: String::new(),
                usage: c.1,
                parse_error: None,
                parse_failures: 0,
            }
        } else if let Some(o) = written {
            self.prewritten = Some((o.answer.clone(), o.by));
            Proposal {
                candidates: vec![Candidate {
                    thought: format!(
                        "only the final answer is left: answered from the observations [the answer: {}]",
                        o.how
                    ),
                    ..Candidate::answer(&o.answer)
                }],
                raw: String::new(),
                usage: o.usage,
                parse_error: None,
                parse_failures: 0,
            }
        } else {
            self.s.counters.decide_calls += 1;
            let input = DecideInput {
                world: &self.s.world,
                tools: &self.tools,
                allowed: allowed.as_ref(),
                n: self.ooda.config.candidates,
                exclude: &self.exclude,
                cancel: &self.ooda.cancel,
            };
            self.ooda.phases.decider().propose(&input)?
        };
        let mut proposal = proposal;
        self.write_queries(&mut proposal)?;
        self.s.add_usage(&proposal.usage);
        self.s.counters.parse_failures += proposal.parse_failures;
        let polls = |name: &str| tools.get(name).is_some_and(|t| t.polls());
        let (mut assessed, _) = assess(
            &proposal.candidates,
            &self.s.world,
            tools,
            &self.ooda.config.policy,
            &self.s.approvals,
            &polls,
            self.ooda.config.confidence_threshold,
        );
        // An answer that copies the examples' `<…>` placeholder is refused like a repeat: the
        // decider is told why and proposes again (a 0.5B decider answered "<result, copied
        // exactly>" before calling any tool).
        let sources: Vec<&str> = std::iter::once(self.s.task.as_str())
            .chain(self.steps.iter().map(|s| s.observation.text.as_str()))
            .collect();
        let chosen = drop_placeholders(&mut assessed, &sources);
        let (assessed, chosen, guidance) = self.answer_instead_of_repeat(assessed, chosen)?;
        Ok(DecisionRecord {
            cycle,
            implicit: false,
            guidance,
            candidates: assessed,
            chosen,
            parse_error: proposal.parse_error,
        })
    }

    /// When the choice repeats an action that already succeeded, its output is in the world
    /// model: the answer is written from the observations now instead of running it again (as
    /// ReAct answers after a repeat). A 0.5B decider re-proposed a `size_model` call with the
    /// answer on screen, which cost a whole cycle. The repeat stays in the record, refused.
    fn answer_instead_of_repeat(
        &mut self,
        mut assessed: Vec<Assessment>,
        chosen: Option<usize>,
    ) -> Result<Rechoice, PlannerError> {
        let tools = self.ooda.tools;
        let polls = |name: &str| tools.get(name).is_some_and(|t| t.polls());
        let repeat = chosen.map(|i| &assessed[i]).filter(|a| {
            !a.is_final
                && !polls(&a.tool)
                && self.s.world.completed.iter().any(|c| {
                    c.fingerprint == a.fingerprint
                        && c.status != crate::agent::audit::OutcomeStatus::Failed
                })
        });
        let Some(i) = chosen.filter(|_| repeat.is_some()) else {
            return Ok((assessed, chosen, None));
        };
        if !self.ooda.config.answer.from_observations()
            || !self.steps.iter().any(crate::agent::outputs::usable)
        {
            return Ok((assessed, chosen, None));
        }
        let written = match self.ooda.phases.decider().answer(
            &self.s.task,
            &self.steps,
            Some(self.s.world.overview.as_str()).filter(|o| !o.is_empty()),
            &self.ooda.cancel,
        ) {
            Ok(Some(o)) => o,
            Ok(None) => return Ok((assessed, chosen, None)),
            Err(PlannerError::Cancelled) => return Err(PlannerError::Cancelled),
            Err(e) => {
                tracing::warn!("answer step failed ({e}); running the repeat");
                return Ok((assessed, chosen, None));
            }
        };
        self.s.add_usage(&written.usage);
        let why = format!(
            "{} {} already succeeded: answered from the observations",
            assessed[i].tool,
            canonical_json(&assessed[i].args)
        );
        let candidate = Candidate {
            thought: format!("{why} [the answer: {}]", written.how),
            ..Candidate::answer(&written.answer)
        };
        let polls = |name: &str| tools.get(name).is_some_and(|t| t.polls());
        let (answer, answer_chosen) = assess(
            &[candidate],
            &self.s.world,
            tools,
            &self.ooda.config.policy,
            &self.s.approvals,
            &polls,
            0.0,
        );
        let Some(_) = answer_chosen else {
            return Ok((assessed, chosen, None));
        };
        self.prewritten = Some((written.answer, written.by));
        assessed[i].dropped = Some(DropReason::Repeat);
        let at = assessed.len();
        assessed.extend(answer);
        Ok((assessed, Some(at), Some(why)))
    }

    /// Audit each refused candidate and keep it in the world model so it is not proposed again.
    fn record_refusals(&mut self, cycle: usize, record: &DecisionRecord) -> Result<(), OodaError> {
        for a in &record.candidates {
            let Some(reason) = &a.dropped else { continue };
            self.s.counters.refused += 1;
            self.s.audit.record(
                AuditEvent::Refused {
                    cycle,
                    tool: a.tool.clone(),
                    fingerprint: a.fingerprint.clone(),
                    reason: reason.describe(),
                },
                false,
            )?;
            let world = &mut self.s.world;
            if !world
                .refused
                .iter()
                .any(|r| r.tool == a.tool && r.args == a.args)
            {
                world.refused.push(RefusedAction {
                    tool: a.tool.clone(),
                    args: a.args.clone(),
                    reason: reason.describe(),
                });
            }
        }
        Ok(())
    }

    /// No viable candidate. The model's own mistakes (unparseable output, unknown tools,
    /// repeats, irreversible actions the task did not ask for) are fed back as a signal, and the
    /// tools it kept repeating or was refused leave the next constraint; only several in a row
    /// escalate. Otherwise: over budget, an action that needs approval, or nothing viable.
    fn no_choice(&mut self, record: &DecisionRecord) -> Flow {
        let mistakes_only = record.candidates.iter().all(|a| {
            matches!(
                a.dropped,
                Some(
                    DropReason::UnknownTool
                        | DropReason::Repeat
                        | DropReason::RepeatOfFailure { .. }
                        | DropReason::NotRequested
                        | DropReason::Placeholder
                )
            )
        });
        if record.candidates.is_empty() || mistakes_only {
            self.decide_failures += 1;
            for a in &record.candidates {
                if matches!(
                    a.dropped,
                    Some(
                        DropReason::Repeat
                            | DropReason::RepeatOfFailure { .. }
                            | DropReason::NotRequested
                    )
                ) && !self.exclude.contains(&a.tool)
                {
                    self.exclude.push(a.tool.clone());
                }
            }
            let why = match &record.parse_error {
                Some(e) if record.candidates.is_empty() => format!("the last proposal was unusable: {e}"),
                _ => "every candidate of the last proposal was refused (see Refused); propose something else or give the final answer".to_string(),
            };
            self.s.world.signals.insert("decide.error".into(), why);
            if self.decide_failures >= self.ooda.config.max_decide_failures {
                return Flow::Stop(Terminal::new(
                    OodaState::Escalated,
                    format!(
                        "no viable candidate: {} proposals in a row were unusable or refused",
                        self.decide_failures
                    ),
                ));
            }
            return Flow::Continue;
        }
        let describe = |a: &Assessment| {
            a.dropped
                .as_ref()
                .map(DropReason::describe)
                .unwrap_or_default()
        };
        if let Some(a) = record
            .candidates
            .iter()
            .find(|a| matches!(a.dropped, Some(DropReason::OverBudget { .. })))
        {
            return Flow::Stop(Terminal::new(
                OodaState::BudgetExhausted,
                format!("{} {} {}", a.tool, canonical_json(&a.args), describe(a)),
            ));
        }
        if let Some(a) = record
            .candidates
            .iter()
            .find(|a| a.dropped == Some(DropReason::NeedsApproval))
        {
            self.pending = Some(a.clone());
            return Flow::Stop(Terminal::new(
                OodaState::Escalated,
                format!(
                    "{} {} is irreversible and needs approval: boyd approve {} {}",
                    a.tool,
                    canonical_json(&a.args),
                    self.s.run_id,
                    a.fingerprint
                ),
            ));
        }
        let reasons: Vec<String> = record
            .candidates
            .iter()
            .map(|a| format!("{}: {}", a.tool, describe(a)))
            .collect();
        Flow::Stop(Terminal::new(
            OodaState::Escalated,
            format!("no viable candidate ({})", reasons.join("; ")),
        ))
    }
}
