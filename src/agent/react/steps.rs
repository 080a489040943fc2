//! The ReAct loop's step helpers: which tools a step offers and allows, and the answer step's
//! request and record.

use std::time::Instant;

use crate::lm::CancelToken;

use super::super::answer::AnswerOutput;
use super::super::planner::{Planner, PlannerError};
use super::super::tools::{Toolset, FINAL_ANSWER};
use super::super::types::{Action, Observation, ObservationKind, Step, StepTimings};
use super::{AgentError, Limits};

/// The tools shown to the planner for the next step: `read_blob` only once there is a blob to
/// page (shown earlier, a small model pages blobs that do not exist).
pub(super) fn offered_tools(tools: &Toolset, steps: &[Step]) -> Toolset {
    let has_blob = steps.iter().any(|s| {
        let o = &s.observation;
        o.blob.is_some() && (o.collapsed || !o.focused)
    });
    if has_blob {
        tools.clone()
    } else {
        tools.without(super::super::tools::blob::READ_BLOB)
    }
}

/// The tools the constraint allows this step, when fewer than those shown: the first step
/// must call a tool (facts come from observations; a small model otherwise answers from its
/// own guesses), and right after a repeated successful call that tool is left out (answering
/// straight away cut runs short: the model repeated `list_dir` before searching the log it
/// listed; measured on the dev split).
pub(super) fn allowed_tools(
    tools: &Toolset,
    steps: &[Step],
    banned: Option<&str>,
) -> Option<Toolset> {
    if let Some(name) = banned {
        if name != FINAL_ANSWER && tools.get(name).is_some() {
            return Some(tools.without(name));
        }
    }
    let others = tools.iter().any(|t| t.name() != FINAL_ANSWER);
    if steps.is_empty() && others && tools.get(FINAL_ANSWER).is_some() {
        return Some(tools.without(FINAL_ANSWER));
    }
    None
}

/// The step that records an answer the answer step wrote outside the planner's turns.
pub(super) fn answered_step(
    index: usize,
    thought: String,
    o: AnswerOutput,
    start: Instant,
) -> Step {
    Step {
        index,
        thought: format!("{thought} [the answer: {}]", o.how),
        action: Some(Action::Final {
            answer: o.answer.clone(),
        }),
        raw: String::new(),
        observation: Observation::new(ObservationKind::Final, o.answer),
        fingerprint: None,
        timings: StepTimings {
            plan_s: start.elapsed().as_secs_f64(),
            tool_s: 0.0,
            total_s: start.elapsed().as_secs_f64(),
        },
        usage: o.usage,
    }
}

/// Ask the planner for the answer from the observations, when the run's answer mode says so.
pub(super) fn answer_step(
    planner: &mut dyn Planner,
    limits: &Limits,
    task: &str,
    steps: &[Step],
    overview: Option<&str>,
    cancel: &CancelToken,
) -> Result<Option<AnswerOutput>, AgentError> {
    if !limits.answer.from_observations() {
        return Ok(None);
    }
    match planner.answer(task, steps, overview, cancel) {
        Ok(o) => Ok(o),
        Err(PlannerError::Cancelled) => Ok(None),
        Err(e) => Err(AgentError::Planner(e)),
    }
}
