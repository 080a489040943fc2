//! The ReAct loop: Thought → Action → Observation until a final answer or a stop condition.
//!
//! Each step: check the budgets (cancel, steps, wall clock, generated tokens, context — collapsing
//! older observations first when the next prompt would come near the model's context), ask the
//! planner, then either finish, refuse (repeat of a failed action, stuck, irreversible without
//! approval) or run the tool, condense its output, and append the step to the transcript.
//! Model mistakes become observations; only our own failures (run directory, planner backend)
//! end the run with an error.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::lm::{CancelToken, Usage};

use super::condense::{self, Condenser};
use super::guard::{fingerprint, repeat_message, repeat_success_message, ActionCache, Verdict};
use super::parse::ActionParseError;
use super::planner::{schema_signature, Planner, PlannerError, PlannerInput};
use super::rundir::{utc_timestamp, Record, RunDir, RunDirError};
use super::tools::{
    FinalAnswer, Sandbox, Tool, ToolContext, ToolError, ToolErrorKind, Toolset, FINAL_ANSWER,
};
use super::types::{
    Action, Observation, ObservationKind, RunOutcome, Step, StepTimings, StopReason, UsageTotals,
};

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
}

/// Wrap a scalar argument into the tool's single required property, so
/// `{"tool": "calculator", "args": "2+2"}` works; `null` becomes `{}`.
fn normalize_args(tool: &dyn Tool, args: Value) -> Value {
    match args {
        Value::Object(_) => args,
        Value::Null => Value::Object(serde_json::Map::new()),
        scalar => {
            let schema = tool.args_schema();
            let required: Vec<&str> = schema
                .get("required")
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            if let [only] = required.as_slice() {
                let mut m = serde_json::Map::new();
                m.insert((*only).to_string(), scalar);
                Value::Object(m)
            } else {
                scalar
            }
        }
    }
}

fn call_tool(tool: &dyn Tool, args: Value, ctx: &ToolContext) -> Result<String, ToolError> {
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
    condenser: Condenser,
    on_event: &'a mut dyn FnMut(&AgentEvent<'_>),
}

impl Loop<'_> {
    fn observe(&self, kind: ObservationKind, text: String) -> Result<Observation, AgentError> {
        let dir = self.run_dir.blob_dir();
        self.condenser
            .condense(kind, text, &dir)
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
    let mut lp = Loop {
        run_dir,
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
    };
    let mut steps: Vec<Step> = Vec::new();
    let mut cache = ActionCache::new(limits.stuck_after);
    let mut totals = UsageTotals::default();
    let mut parse_failures = 0usize;
    let mut answer: Option<String> = None;
    let mut detail: Option<String> = None;
    // Set when the model repeated an action that had succeeded: the next step may only answer.
    let mut answer_now = false;

    let stop = loop {
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
        let offered = offered_tools(tools, &steps, answer_now);
        let tools = &offered;
        // Context budget: collapse older observations when the next request comes near the
        // context; stop when even that is not enough.
        if let Some(window) = planner.context_window() {
            let input = PlannerInput {
                task,
                steps: &steps,
                tools,
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
        let out = {
            let input = PlannerInput {
                task,
                steps: &steps,
                tools,
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
        answer_now = false;
        totals.add(&out.usage);
        (lp.on_event)(&AgentEvent::Decided {
            index,
            thought: &out.thought,
            action: out.action.as_ref(),
        });

        let mut tool_s = 0.0;
        let mut fp: Option<String> = None;
        let mut finished: Option<StopReason> = None;
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
                finished = Some(StopReason::Completed);
                answer = Some(a.clone());
                let obs = Observation::new(ObservationKind::Final, a.clone());
                (Some(Action::Final { answer: a }), obs)
            }
            Ok(Action::ToolCall { name, args }) if name == FINAL_ANSWER => {
                match FinalAnswer::answer_from_args(&args) {
                    Ok(a) => {
                        finished = Some(StopReason::Completed);
                        answer = Some(a.clone());
                        (
                            Some(Action::Final { answer: a.clone() }),
                            Observation::new(ObservationKind::Final, a),
                        )
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
            Ok(Action::ToolCall { name, args }) => {
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
                        answer_now = true;
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
                            let t0 = Instant::now();
                            let result = call_tool(
                                t.as_ref(),
                                normalize_args(t.as_ref(), args.clone()),
                                &ctx,
                            );
                            tool_s = t0.elapsed().as_secs_f64();
                            match result {
                                Ok(text) => {
                                    let obs = lp.observe(ObservationKind::Output, text)?;
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
        let step = Step {
            index,
            thought: out.thought,
            action,
            raw: out.raw,
            observation,
            fingerprint: fp,
            timings: StepTimings {
                plan_s,
                tool_s,
                total_s: step_start.elapsed().as_secs_f64(),
            },
            usage: out.usage,
        };
        lp.run_dir.append(&Record::Step(step.clone()))?;
        (lp.on_event)(&AgentEvent::Observed { step: &step });
        steps.push(step);
        if let Some(reason) = finished {
            break reason;
        }
    };

    if stop == StopReason::Cancelled && detail.is_none() {
        detail = Some("cancelled by the user".into());
    }
    let outcome = RunOutcome {
        run_id,
        run_dir: run_path,
        task: task.to_string(),
        stop,
        answer,
        detail,
        steps: steps.len(),
        usage: totals,
        elapsed_s: start.elapsed().as_secs_f64(),
        planner: planner.name(),
        parse_failures,
    };
    lp.run_dir.append(&Record::End(outcome.clone()))?;
    lp.run_dir.write_outcome(&outcome)?;
    (lp.on_event)(&AgentEvent::Finished { outcome: &outcome });
    Ok(outcome)
}

/// The tools offered to the planner for the next step: only `final_answer` right after the
/// model repeated an action that had succeeded (its result is on screen; greedy decoding would
/// repeat it again), and `read_blob` only once there is a blob to page.
fn offered_tools(tools: &Toolset, steps: &[Step], answer_now: bool) -> Toolset {
    if answer_now && tools.get(FINAL_ANSWER).is_some() {
        return tools.only(FINAL_ANSWER);
    }
    let has_blob = steps.iter().any(|s| s.observation.blob.is_some());
    if has_blob {
        tools.clone()
    } else {
        tools.without(super::tools::blob::READ_BLOB)
    }
}

fn stuck_message(count: usize) -> String {
    format!("System guard: you chose the same action {count} times; the run stops as stuck.")
}

/// Sum of usage over steps (for reports).
pub fn total_usage(steps: &[Step]) -> Usage {
    let mut u = Usage::default();
    for s in steps {
        u.prompt_tokens += s.usage.prompt_tokens;
        u.reused_tokens += s.usage.reused_tokens;
        u.prefilled_tokens += s.usage.prefilled_tokens;
        u.generated_tokens += s.usage.generated_tokens;
        u.prefill_s += s.usage.prefill_s;
        u.decode_s += s.usage.decode_s;
    }
    u
}
