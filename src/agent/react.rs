//! The ReAct loop: Thought → Action → Observation until a final answer or a stop condition.
//!
//! Each step: check the budgets (cancel, steps, wall clock, generated tokens, context — collapsing
//! older observations first when the next prompt would come near the model's context), ask the
//! planner, then either finish, refuse (repeat of a failed action, stuck, irreversible without
//! approval) or run the tool, condense its output, and append the step to the transcript.
//! Model mistakes become observations; only our own failures (run directory, audit log, planner
//! backend) end the run with an error. A call of a tool with side effects (the shell, the
//! writers) is recorded in the run's audit log, as the OODA loop records its actions: an intent
//! before it runs and an outcome after (`audit::ActionTrail`).

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::lm::{CancelToken, Usage};

use super::answer::AnswerMode;
use super::audit::{ActionTrail, AuditError};
use super::condense::{self, Condenser};
use super::grounding::Conclusion;
use super::guard::{fingerprint, repeat_message, repeat_success_message, ActionCache, Verdict};
use super::parse::ActionParseError;
use super::planner::{render_action, schema_signature, Planner, PlannerError, PlannerInput};
use super::query;
use super::rundir::{utc_timestamp, Record, RunDir, RunDirError};
use super::tools::{
    FinalAnswer, Sandbox, Tool, ToolContext, ToolError, ToolErrorKind, Toolset, FINAL_ANSWER,
};
use super::types::AnswerBy;
use super::types::{
    Action, Observation, ObservationKind, RunOutcome, Step, StepTimings, StopReason, UsageTotals,
};

mod steps;
use steps::{allowed_tools, answer_step, answered_step, offered_tools};

/// Observations shorter than this are never collapsed (the preview would be as long).
const COLLAPSE_MIN_CHARS: usize = 200;

/// Budgets and thresholds of a run.
#[derive(Debug, Clone, PartialEq)]
pub struct Limits {
    /// Most steps (planner calls).
    pub max_steps: usize,
    /// Wall-clock budget.
    pub wall_clock: Option<Duration>,
    /// Generated-token budget over the run.
    pub max_generated_tokens: Option<usize>,
    /// Collapse older observations when the next request would use more than this share of
    /// the context.
    pub collapse_at: f64,
    /// The most recent observations that are never collapsed.
    pub keep_recent: usize,
    /// Identical actions before the run is `Stuck`.
    pub stuck_after: usize,
    /// Condenser limit in characters.
    pub observation_limit: usize,
    /// Whether irreversible tools may run without approval (otherwise the run escalates).
    pub allow_irreversible: bool,
    /// Who writes the final answer (see `agent::answer`).
    pub answer: AnswerMode,
    /// Show the workspace's top-level listing under the task (as coding agents give their
    /// environment), so the first step can name a file that exists.
    pub show_workspace: bool,
    /// Type the file tools' path arguments by the workspace (see `tools::choices`).
    pub typed_paths: bool,
    /// Narrow the constraint's enum arguments step by step (see `agent::narrow`).
    pub narrow: bool,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_steps: 12,
            wall_clock: Some(Duration::from_secs(600)),
            max_generated_tokens: None,
            collapse_at: 0.75,
            keep_recent: 2,
            stuck_after: 3,
            observation_limit: condense::DEFAULT_LIMIT,
            allow_irreversible: false,
            answer: AnswerMode::default(),
            show_workspace: true,
            typed_paths: true,
            narrow: true,
        }
    }
}

/// Something that happened during a run, for live display.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub enum AgentEvent<'a> {
    /// The run started.
    Started {
        /// Run id.
        run_id: &'a str,
        /// Run directory.
        run_dir: &'a Path,
        /// The task.
        task: &'a str,
    },
    /// The planner decided (before the tool runs).
    Decided {
        /// Step number.
        index: usize,
        /// Thought.
        thought: &'a str,
        /// The action, or why it did not parse.
        action: Result<&'a Action, &'a ActionParseError>,
    },
    /// A step finished with its observation.
    Observed {
        /// The step.
        step: &'a Step,
    },
    /// Older observations were collapsed to save context.
    Collapsed {
        /// Step numbers collapsed.
        steps: &'a [usize],
    },
    /// The run ended.
    Finished {
        /// The outcome.
        outcome: &'a RunOutcome,
    },
}

/// Failures of our machinery that end a run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AgentError {
    /// The run directory could not be written.
    #[error(transparent)]
    RunDir(#[from] RunDirError),
    /// A blob could not be written.
    #[error("cannot write blob in {dir}")]
    Blob {
        /// Blob directory.
        dir: std::path::PathBuf,
        /// OS error.
        #[source]
        source: std::io::Error,
    },
    /// The planner failed (model backend error, script exhausted).
    #[error("planner failed")]
    Planner(#[source] PlannerError),
    /// The audit log could not be written.
    #[error(transparent)]
    Audit(#[from] AuditError),
}

fn call_tool(tool: &dyn Tool, args: Value, ctx: &ToolContext) -> Result<String, ToolError> {
    super::tools::check_args(tool, &args)?;
    match catch_unwind(AssertUnwindSafe(|| tool.call(args, ctx))) {
        Ok(r) => r,
        Err(_) => Err(ToolError::failed(format!(
            "the {} tool crashed (a bug in boyd, not your fault); try another approach.",
            tool.name()
        ))),
    }
}

struct Loop<'a> {
    run_dir: RunDir,
    /// Intent and outcome records of the calls of tools with side effects.
    audit: ActionTrail,
    condenser: Condenser,
    on_event: &'a mut dyn FnMut(&AgentEvent<'_>),
}

impl Loop<'_> {
    fn observe(&self, kind: ObservationKind, text: String) -> Result<Observation, AgentError> {
        self.observe_with(kind, text, None)
    }

    /// [`Loop::observe`] with the preview a condensed output shows instead of its head.
    fn observe_with(
        &self,
        kind: ObservationKind,
        text: String,
        preview: Option<String>,
    ) -> Result<Observation, AgentError> {
        let dir = self.run_dir.blob_dir();
        self.condenser
            .condense_with(kind, text, &dir, preview)
            .map_err(|source| AgentError::Blob { dir, source })
    }
}

/// Run the ReAct loop on `task` and write the run directory.
#[allow(clippy::too_many_arguments)]
pub fn run(
    task: &str,
    planner: &mut dyn Planner,
    tools: &Toolset,
    limits: &Limits,
    run_dir: RunDir,
    workspace: Option<Sandbox>,
    cancel: &CancelToken,
    on_event: &mut dyn FnMut(&AgentEvent<'_>),
) -> Result<RunOutcome, AgentError> {
    let start = Instant::now();
    let audit = ActionTrail::in_run_dir(run_dir.path(), run_dir.id(), task);
    let mut lp = Loop {
        run_dir,
        audit,
        condenser: Condenser {
            limit: limits.observation_limit,
        },
        on_event,
    };
    let run_id = lp.run_dir.id().to_string();
    let run_path = lp.run_dir.path().to_path_buf();
    lp.run_dir.append(&Record::Start {
        run_id: run_id.clone(),
        task: task.to_string(),
        planner: planner.name(),
        tools: tools.names().iter().map(|s| s.to_string()).collect(),
        workspace: workspace.as_ref().map(|w| w.root().to_path_buf()),
        started_at: utc_timestamp(),
    })?;
    (lp.on_event)(&AgentEvent::Started {
        run_id: &run_id,
        run_dir: &run_path,
        task,
    });
    let ctx = ToolContext {
        workspace,
        blob_dir: lp.run_dir.blob_dir(),
        cancel: cancel.clone(),
        task: Some(task.to_string()),
    };
    // What the planner reads as the task: the task, and the workspace's top level when asked.
    let overview = if limits.show_workspace {
        workspace_overview(tools, &ctx)
    } else {
        None
    };
    let planner_task = match &overview {
        Some(o) => format!("{task}\n\nFiles in the workspace:\n{o}"),
        None => task.to_string(),
    };
    let shaped = super::narrow::shape(
        tools,
        ctx.workspace.as_ref().map(|w| w.root()),
        task,
        limits.typed_paths,
    );
    let tools = &shaped;
    let original_task = task;
    let named_paths =
        super::tools::choices::named_paths_in(task, ctx.workspace.as_ref().map(|w| w.root()));
    let task = planner_task.as_str();
    let mut steps: Vec<Step> = Vec::new();
    let mut cache = ActionCache::new(limits.stuck_after);
    let mut totals = UsageTotals::default();
    let mut parse_failures = 0usize;
    let mut answer: Option<String> = None;
    let mut answer_by: Option<AnswerBy> = None;
    let mut detail: Option<String> = None;
    // Set when the model repeated an action that had succeeded: the next step may only answer.
    let mut banned: Option<String> = None;
    // Set when a final answer became a calculation (`query::calculation_before_answer`): the
    // next step is the answer.
    let mut answer_next = false;

    // Set once the model was sent back for an answer with a number from nowhere.
    let mut sent_back = false;

    let stop = loop {
        if answer.is_some() {
            break StopReason::Completed;
        }
        if cancel.is_cancelled() {
            break StopReason::Cancelled;
        }
        if steps.len() >= limits.max_steps {
            detail = Some(format!("{} steps taken, the limit", steps.len()));
            break StopReason::MaxSteps;
        }
        if let Some(wall) = limits.wall_clock {
            if start.elapsed() >= wall {
                detail = Some(format!(
                    "wall-clock budget of {:.1} s spent",
                    wall.as_secs_f64()
                ));
                break StopReason::WallClock;
            }
        }
        if let Some(max) = limits.max_generated_tokens {
            if totals.generated_tokens >= max {
                detail = Some(format!(
                    "{} tokens generated, budget {max}",
                    totals.generated_tokens
                ));
                break StopReason::TokenBudget;
            }
        }
        // The tools shown this step: `read_blob` only once an observation was condensed into
        // a blob (offered earlier, a small model pages blobs that do not exist).
        let offered = offered_tools(tools, &steps);
        let tools = &offered;
        // Context budget: collapse older observations when the next request comes near the
        // context; stop when even that is not enough.
        if let Some(window) = planner.context_window() {
            let input = PlannerInput {
                task,
                steps: &steps,
                tools,
                allowed: None,
                cancel,
            };
            if let Some(est) = planner.estimate_tokens(&input) {
                let mut est = est;
                if est as f64 > limits.collapse_at * window as f64 {
                    let keep_from = steps.len().saturating_sub(limits.keep_recent);
                    let mut collapsed = Vec::new();
                    let dir = lp.run_dir.blob_dir();
                    for s in steps[..keep_from].iter_mut() {
                        if !s.observation.collapsed
                            && s.observation.text.chars().count() > COLLAPSE_MIN_CHARS
                        {
                            condense::collapse(&mut s.observation, &dir).map_err(|source| {
                                AgentError::Blob {
                                    dir: dir.clone(),
                                    source,
                                }
                            })?;
                            collapsed.push(s.index);
                        }
                    }
                    if !collapsed.is_empty() {
                        let input = PlannerInput {
                            task,
                            steps: &steps,
                            tools,
                            allowed: None,
                            cancel,
                        };
                        let after = planner.estimate_tokens(&input).unwrap_or(est);
                        lp.run_dir.append(&Record::Collapse {
                            steps: collapsed.clone(),
                            tokens_before: est,
                            tokens_after: after,
                            context: window,
                        })?;
                        (lp.on_event)(&AgentEvent::Collapsed { steps: &collapsed });
                        est = after;
                    }
                }
                if est > window {
                    detail = Some(format!(
                        "next request needs about {est} tokens, context is {window}"
                    ));
                    break StopReason::ContextExhausted;
                }
            }
        }

        let index = steps.len() + 1;
        let step_start = Instant::now();
        let allowed = allowed_tools(tools, &steps, banned.as_deref());
        let allowed = if std::mem::take(&mut answer_next) {
            Some(tools.only(FINAL_ANSWER))
        } else if limits.narrow {
            let base = allowed.as_ref().unwrap_or(tools);
            super::narrow::narrow_step(base, original_task, &named_paths, &steps).or(allowed)
        } else {
            allowed
        };
        let mut out = {
            let input = PlannerInput {
                task,
                steps: &steps,
                tools,
                allowed: allowed.as_ref(),
                cancel,
            };
            match planner.next(&input) {
                Ok(o) => o,
                Err(PlannerError::Cancelled) => break StopReason::Cancelled,
                Err(PlannerError::ContextExhausted { detail: d }) => {
                    detail = Some(d);
                    break StopReason::ContextExhausted;
                }
                Err(e) => return Err(AgentError::Planner(e)),
            }
        };
        let plan_s = step_start.elapsed().as_secs_f64();
        banned = None;
        totals.add(&out.usage);
        let mut usage = out.usage.clone();
        (lp.on_event)(&AgentEvent::Decided {
            index,
            thought: &out.thought,
            action: out.action.as_ref(),
        });

        let mut tool_s = 0.0;
        let mut fp: Option<String> = None;
        // How the answer step made the final answer that replaced the planner's.
        let mut how: Option<String> = None;
        let mut finished: Option<StopReason> = None;
        // The reply as the transcript shows it, when the call that ran is not the one the
        // planner wrote (a table query written by `agent::query`).
        let mut raw: Option<String> = None;
        // The note of a call whose arguments a focused request wrote.
        let mut call_note: Option<String> = None;
        // A final answer after files were read and no calculation: the calculation request
        // may turn it into a calculator call first (`query::calculation_before_answer`).
        let ends = out.action.as_ref().is_ok_and(query::is_answer);
        let room = steps.len() + 2 < limits.max_steps;
        if let (true, Some(rewrite), Some(ws)) = (
            ends && room && limits.answer.from_observations(),
            query::calculation_before_answer(&steps),
            ctx.workspace.as_ref(),
        ) {
            match planner.query(original_task, ws, &rewrite, cancel) {
                Ok(Some((written, used))) => {
                    totals.add(&used);
                    usage.add(&used);
                    let call = Action::ToolCall {
                        name: query::CALCULATOR.to_string(),
                        args: written,
                    };
                    raw = Some(render_action(&out.thought, &call));
                    call_note = Some(rewrite.tag());
                    out.action = Ok(call);
                    answer_next = true;
                }
                Ok(None) => {}
                Err(PlannerError::Cancelled) => break StopReason::Cancelled,
                Err(e) => tracing::warn!("calculation request failed ({e})"),
            }
        }
        // A final answer (with valid arguments) is rewritten by the answer step, if any.
        let proposed = match &out.action {
            Ok(Action::Final { answer }) => Some(answer.clone()),
            Ok(Action::ToolCall { name, args }) if name == FINAL_ANSWER => {
                FinalAnswer::answer_from_args(args).ok()
            }
            _ => None,
        };
        let answers = proposed
            .as_deref()
            .is_some_and(|p| super::grounding::answer_step_has_work(p, original_task, &steps));
        let mut rewritten = if answers {
            answer_step(
                planner,
                limits,
                original_task,
                &steps,
                overview.as_deref(),
                cancel,
            )?
        } else {
            None
        };
        if let Some(o) = &rewritten {
            totals.add(&o.usage);
            usage.add(&o.usage);
        }
        // The final answer the planner gave this step, once checked (`grounding`).
        let mut concluded: Option<Conclusion> = None;
        let may_send_back = !sent_back && steps.len() + 2 < limits.max_steps;
        let (action, observation) = match out.action {
            Err(parse_err) => {
                parse_failures += 1;
                let f = fingerprint("<unparsed>", &Value::String(out.raw.clone()));
                let obs = match cache.check(&f, false) {
                    Verdict::Stuck { count } => {
                        finished = Some(StopReason::Stuck);
                        detail = Some(format!("the same unparseable reply {count} times"));
                        Observation::new(ObservationKind::Guard, stuck_message(count))
                    }
                    _ => lp.observe(ObservationKind::ParseError, parse_err.for_model())?,
                };
                fp = Some(f);
                (None, obs)
            }
            Ok(Action::Final { answer: a }) => {
                let c = Conclusion::new(a, rewritten.take(), original_task, &steps, may_send_back);
                let step = c.step();
                concluded = Some(c);
                step
            }
            Ok(Action::ToolCall { name, args }) if name == FINAL_ANSWER => {
                match FinalAnswer::answer_from_args(&args) {
                    Ok(a) => {
                        let c = Conclusion::new(
                            a,
                            rewritten.take(),
                            original_task,
                            &steps,
                            may_send_back,
                        );
                        let step = c.step();
                        concluded = Some(c);
                        step
                    }
                    Err(e) => {
                        let text = format!(
                            "{} Expected args: {}",
                            e.for_model(),
                            schema_signature(&FinalAnswer.args_schema())
                        );
                        let obs = lp.observe(ObservationKind::ToolError { kind: e.kind }, text)?;
                        (Some(Action::ToolCall { name, args }), obs)
                    }
                }
            }
            Ok(Action::ToolCall { name, mut args }) => {
                // A first `table` call on a file, first `calculator` call or first `list_dir`
                // call: its arguments are written by a focused request (`agent::query`), and
                // the transcript shows the call that ran.
                let ws = ctx.workspace.as_ref();
                if let (Some(rewrite), Some(ws)) = (query::rewrites(&name, &args, &steps), ws) {
                    match planner.query(original_task, ws, &rewrite, cancel) {
                        Ok(Some((written, used))) => {
                            totals.add(&used);
                            usage.add(&used);
                            args = written;
                            let call = Action::ToolCall {
                                name: name.clone(),
                                args: args.clone(),
                            };
                            raw = Some(render_action(&out.thought, &call));
                            call_note = Some(rewrite.tag());
                            // A calculation or a filtered listing answers the question:
                            // what is left is the answer.
                            answer_next = rewrite.answers(&args);
                        }
                        Ok(None) => {}
                        Err(PlannerError::Cancelled) => break StopReason::Cancelled,
                        // The planner's own query runs instead.
                        Err(e) => tracing::warn!("focused request for a call failed ({e})"),
                    }
                }
                let f = fingerprint(&name, &args);
                let tool = tools.get(&name).cloned();
                let exempt = tool.as_ref().is_some_and(|t| t.polls());
                let obs = match cache.check(&f, exempt) {
                    Verdict::Stuck { count } => {
                        finished = Some(StopReason::Stuck);
                        detail = Some(format!(
                            "{name} chosen {count} times with the same arguments"
                        ));
                        Observation::new(ObservationKind::Guard, stuck_message(count))
                    }
                    Verdict::RepeatOfFailure { error } => {
                        Observation::new(ObservationKind::Guard, repeat_message(&error))
                    }
                    Verdict::RepeatOfSuccess { observation } => {
                        // The result is on screen; the next step may answer or use another
                        // tool, but not this one again (greedy decoding would repeat it).
                        banned = Some(name.clone());
                        Observation::new(
                            ObservationKind::Guard,
                            repeat_success_message(&observation),
                        )
                    }
                    Verdict::Run => match tool {
                        None => {
                            let e = ToolError::not_found(format!(
                                "there is no tool named {name:?}; the tools are: {}.",
                                tools.names().join(", ")
                            ));
                            cache.record_failure(&f, &e.for_model());
                            lp.observe(ObservationKind::ToolError { kind: e.kind }, e.for_model())?
                        }
                        Some(t) if !t.risk().reversible && !limits.allow_irreversible => {
                            finished = Some(StopReason::Escalated);
                            detail = Some(format!(
                                "{name} is irreversible and needs a human's approval"
                            ));
                            Observation::new(
                                ObservationKind::Guard,
                                format!("System guard: {name} cannot be undone and needs approval; the run is handed to a human."),
                            )
                        }
                        Some(t) => {
                            let args = super::tools::normalize_args(t.as_ref(), args.clone());
                            let audited = lp.audit.intent(index, t.as_ref(), &args, &f)?;
                            let t0 = Instant::now();
                            let result = call_tool(t.as_ref(), args, &ctx);
                            tool_s = t0.elapsed().as_secs_f64();
                            lp.audit.outcome(audited, &result)?;
                            match result {
                                Ok(text) => {
                                    let preview =
                                        super::tools::files::read_preview(t.name(), task, &text);
                                    let obs =
                                        lp.observe_with(ObservationKind::Output, text, preview)?;
                                    cache.record_success(&f, &obs.text);
                                    obs
                                }
                                Err(e) => {
                                    let mut text = e.for_model();
                                    if e.kind == ToolErrorKind::InvalidArgs {
                                        text.push_str(&format!(
                                            " Expected args: {}",
                                            schema_signature(&t.args_schema())
                                        ));
                                    }
                                    cache.record_failure(&f, &text);
                                    lp.observe(ObservationKind::ToolError { kind: e.kind }, text)?
                                }
                            }
                        }
                    },
                };
                fp = Some(f);
                (Some(Action::ToolCall { name, args }), obs)
            }
        };
        if let Some(c) = concluded {
            how = c.how;
            if c.back.is_some() {
                sent_back = true;
            } else {
                answer_by = Some(c.by);
                finished = Some(StopReason::Completed);
                answer = Some(c.answer);
            }
        }
        let step = Step {
            index,
            thought: match how {
                Some(h) => format!("{} [the answer: {h}]", out.thought),
                None => match call_note {
                    Some(tag) => format!("{} {tag}", out.thought),
                    None => out.thought,
                },
            },
            action,
            raw: raw.unwrap_or(out.raw),
            observation,
            fingerprint: fp,
            timings: StepTimings {
                plan_s,
                tool_s,
                total_s: step_start.elapsed().as_secs_f64(),
            },
            usage,
        };
        lp.run_dir.append(&Record::Step(step.clone()))?;
        (lp.on_event)(&AgentEvent::Observed { step: &step });
        steps.push(step);
        if let Some(reason) = finished {
            break reason;
        }
    };

    // A run the step limit or the stuck guard ended may still hold the answer in what it
    // observed: ask for it (one more model call, recorded as a step).
    let mut stop = stop;
    // Outputs, and errors that are facts about the world (a missing file), are worth
    // answering from.
    let observed = steps.iter().any(crate::agent::outputs::usable);
    if matches!(stop, StopReason::MaxSteps | StopReason::Stuck) && answer.is_none() && observed {
        let step_start = Instant::now();
        if let Some(o) = answer_step(
            planner,
            limits,
            original_task,
            &steps,
            overview.as_deref(),
            cancel,
        )? {
            totals.add(&o.usage);
            let step = answered_step(
                steps.len() + 1,
                format!("{}: answer from the observations", stop.as_str()),
                o.clone(),
                step_start,
            );
            lp.run_dir.append(&Record::Step(step.clone()))?;
            (lp.on_event)(&AgentEvent::Observed { step: &step });
            steps.push(step);
            detail = Some(format!(
                "{}; answered from the observations",
                detail.unwrap_or_else(|| stop.as_str().to_string())
            ));
            answer_by = Some(o.by);
            answer = Some(o.answer);
            stop = StopReason::Completed;
        }
    }
    if stop == StopReason::Cancelled && detail.is_none() {
        detail = Some("cancelled by the user".into());
    }
    let answer_by = answer.as_ref().and(answer_by);
    let outcome = RunOutcome {
        run_id,
        run_dir: run_path,
        task: original_task.to_string(),
        stop,
        answer,
        detail,
        steps: steps.len(),
        usage: totals,
        elapsed_s: start.elapsed().as_secs_f64(),
        planner: planner.name(),
        parse_failures,
        answer_by,
    };
    lp.audit
        .finish(outcome.stop.as_str(), outcome.detail.as_deref())?;
    lp.run_dir.append(&Record::End(outcome.clone()))?;
    lp.run_dir.write_outcome(&outcome)?;
    (lp.on_event)(&AgentEvent::Finished { outcome: &outcome });
    Ok(outcome)
}

/// Most lines of the workspace overview shown under the task.
const OVERVIEW_MAX_LINES: usize = 25;

/// The workspace's top level as `list_dir` shows it, when the tool set lists directories.
pub(crate) fn workspace_overview(tools: &Toolset, ctx: &ToolContext) -> Option<String> {
    let list = tools.get(super::tools::files::LIST_DIR)?;
    let root = ctx.workspace.as_ref()?.root();
    // An empty workspace adds nothing worth the tokens.
    std::fs::read_dir(root).ok()?.next()?.ok()?;
    let text = call_tool(list.as_ref(), serde_json::json!({"path": "."}), ctx).ok()?;
    let lines: Vec<&str> = text.lines().collect();
    if lines.len() <= OVERVIEW_MAX_LINES {
        return Some(text);
    }
    let mut shown = lines[..OVERVIEW_MAX_LINES].join("\n");
    shown.push_str(&format!(
        "\n... ({} more lines: call list_dir)",
        lines.len() - OVERVIEW_MAX_LINES
    ));
    Some(shown)
}

fn stuck_message(count: usize) -> String {
    format!("System guard: you chose the same action {count} times; the run stops as stuck.")
}

/// Sum of usage over steps (for reports).
pub fn total_usage(steps: &[Step]) -> Usage {
    let mut u = Usage::default();
    for s in steps {
        u.add(&s.usage);
    }
    u
}
