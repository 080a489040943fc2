//! The typed vocabulary of an agent run: actions, observations, steps, stop reasons, outcomes.
//!
//! The prompt is always derived from a `Vec<Step>` (see `planner::render_messages`), never kept as
//! a growing string, so what the model saw at any step can be rebuilt from the transcript.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::lm::{LmError, Usage};

/// What the planner decided to do next.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Action {
    /// Call a tool with JSON arguments (checked by the tool, not here).
    ToolCall {
        /// Tool name as the model wrote it.
        name: String,
        /// Arguments as a JSON value (normally an object).
        args: serde_json::Value,
    },
    /// Stop with an answer.
    Final {
        /// The answer text.
        answer: String,
    },
}

impl Action {
    /// A tool call.
    pub fn tool(name: impl Into<String>, args: serde_json::Value) -> Self {
        Action::ToolCall {
            name: name.into(),
            args,
        }
    }
    /// A final answer.
    pub fn answer(answer: impl Into<String>) -> Self {
        Action::Final {
            answer: answer.into(),
        }
    }
}

/// Where an observation came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ObservationKind {
    /// The tool's normal output.
    Output,
    /// The tool reported an error (the model's mistake or the world's, never ours).
    ToolError {
        /// What kind of error.
        kind: ToolErrorKind,
    },
    /// The loop refused to run the action (repeat of a failed action, approval needed).
    Guard,
    /// The planner's output could not be parsed into an action.
    ParseError,
    /// The run ended with a final answer; the observation echoes it.
    Final,
}

/// What the model sees after an action.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Observation {
    /// Where it came from.
    pub kind: ObservationKind,
    /// The text shown to the model (a preview when condensed or collapsed).
    pub text: String,
    /// Size in bytes of the full output.
    pub bytes: usize,
    /// SHA-256 of the full output when it is stored in `blobs/`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blob: Option<String>,
    /// Whether the text was collapsed to a short preview to save context.
    #[serde(default)]
    pub collapsed: bool,
    /// Whether `text` is the part of a long output that bears on the task (a long file's
    /// lines for it, `tools::files::long_read_preview`), not a head to page through with
    /// `read_blob`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub focused: bool,
    /// The whole output when `text` is a preview, kept in memory for the answer step (which
    /// looks for the lines that answer the question in all of it); the run's record has the
    /// blob instead.
    #[serde(skip)]
    pub full: Option<std::sync::Arc<str>>,
}

impl Observation {
    /// An observation shown in full.
    pub fn new(kind: ObservationKind, text: impl Into<String>) -> Self {
        let text = text.into();
        Self {
            kind,
            bytes: text.len(),
            text,
            blob: None,
            collapsed: false,
            focused: false,
            full: None,
        }
    }

    /// Whether this observation reports a failure of the action.
    pub fn is_failure(&self) -> bool {
        matches!(
            self.kind,
            ObservationKind::ToolError { .. }
                | ObservationKind::Guard
                | ObservationKind::ParseError
        )
    }
}

/// Wall time of one step, in seconds.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StepTimings {
    /// Time in the planner (rendering, prefill, decode, parse).
    pub plan_s: f64,
    /// Time in the tool.
    pub tool_s: f64,
    /// Whole step.
    pub total_s: f64,
}

/// One Thought → Action → Observation turn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Step {
    /// 1-based step number.
    pub index: usize,
    /// The planner's reasoning for this step.
    pub thought: String,
    /// The parsed action; `None` when the output did not parse.
    pub action: Option<Action>,
    /// The raw planner output (the assistant message in later prompts); empty for scripted plans.
    #[serde(default)]
    pub raw: String,
    /// What came back.
    pub observation: Observation,
    /// Fingerprint of the action (tool calls only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fingerprint: Option<String>,
    /// Timings.
    pub timings: StepTimings,
    /// Model token usage for this step.
    pub usage: Usage,
}

/// Why a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// The planner gave a final answer.
    Completed,
    /// The step budget ran out.
    MaxSteps,
    /// The same action was chosen too many times.
    Stuck,
    /// The transcript no longer fits the model's context, even collapsed.
    ContextExhausted,
    /// The cancel token fired.
    Cancelled,
    /// An action needs a human decision (irreversible without approval).
    Escalated,
    /// The wall-clock budget ran out.
    WallClock,
    /// The generated-token budget ran out.
    TokenBudget,
    /// A contradiction against a high-confidence fact needs a human's review (OODA).
    PausedForReview,
    /// The risk budget (or the deadline) ran out before the next action (OODA).
    BudgetExhausted,
}

impl StopReason {
    /// Short name (as in JSON).
    pub fn as_str(self) -> &'static str {
        match self {
            StopReason::Completed => "completed",
            StopReason::MaxSteps => "max_steps",
            StopReason::Stuck => "stuck",
            StopReason::ContextExhausted => "context_exhausted",
            StopReason::Cancelled => "cancelled",
            StopReason::Escalated => "escalated",
            StopReason::WallClock => "wall_clock",
            StopReason::TokenBudget => "token_budget",
            StopReason::PausedForReview => "paused_for_review",
            StopReason::BudgetExhausted => "budget_exhausted",
        }
    }
}

impl std::fmt::Display for StopReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Token totals over a run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct UsageTotals {
    /// Prompt tokens over all steps.
    pub prompt_tokens: usize,
    /// Prompt tokens whose KV came from the cache.
    pub reused_tokens: usize,
    /// Prompt tokens run through the model.
    pub prefilled_tokens: usize,
    /// Generated tokens.
    pub generated_tokens: usize,
    /// Forward passes after the prefills (see `Usage::decode_passes`).
    #[serde(default)]
    pub decode_passes: usize,
    /// Generated tokens an output constraint forced.
    #[serde(default)]
    pub forced_tokens: usize,
}

impl UsageTotals {
    /// Add one step's usage.
    pub fn add(&mut self, u: &Usage) {
        self.prompt_tokens += u.prompt_tokens;
        self.reused_tokens += u.reused_tokens;
        self.prefilled_tokens += u.prefilled_tokens;
        self.generated_tokens += u.generated_tokens;
        self.decode_passes += u.decode_passes;
        self.forced_tokens += u.forced_tokens;
    }
}

/// Who produced a run's final answer. Kept in every run's outcome and eval result, so a
/// suite's score says how much of it is the model's and how much code computed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AnswerBy {
    /// The model wrote it: the planner's `final_answer`, or the answer step's text as the
    /// model wrote it.
    Model,
    /// A program the model wrote, evaluated (and its value formatted) by code.
    Program,
    /// Code: a reader over the tool outputs, code rewriting the model's text (a unit
    /// conversion, a summary line put in its place), or a tool output a rule took as the
    /// answer.
    Code,
}

impl AnswerBy {
    /// As shown in reports: "model", "program", "code".
    pub fn as_str(self) -> &'static str {
        match self {
            AnswerBy::Model => "model",
            AnswerBy::Program => "program",
            AnswerBy::Code => "code",
        }
    }
}

/// The answer step's result.
#[derive(Debug, Clone, PartialEq)]
pub struct AnswerOutput {
    /// The answer.
    pub answer: String,
    /// Token usage of the request.
    pub usage: Usage,
    /// How the answer was made (written by the model, worked out by a program, sent back),
    /// for the run's record.
    pub how: String,
    /// Who made it, as counted in eval reports.
    pub by: AnswerBy,
}

/// The result of a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunOutcome {
    /// Run id (the run directory's name).
    pub run_id: String,
    /// The run directory.
    pub run_dir: PathBuf,
    /// The task.
    pub task: String,
    /// Why it ended.
    pub stop: StopReason,
    /// The final answer when `stop == Completed`.
    pub answer: Option<String>,
    /// Human-readable detail about the stop (which budget, which action).
    pub detail: Option<String>,
    /// Steps taken.
    pub steps: usize,
    /// Token totals.
    pub usage: UsageTotals,
    /// Wall time in seconds.
    pub elapsed_s: f64,
    /// Planner name (model name for `LmPlanner`).
    pub planner: String,
    /// Number of planner outputs that did not parse.
    pub parse_failures: usize,
    /// Who produced the answer (none without one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer_by: Option<AnswerBy>,
}

/// What kind of failure a tool reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ToolErrorKind {
    /// The arguments do not match the tool's schema or make no sense.
    InvalidArgs,
    /// The tool, file or blob does not exist.
    NotFound,
    /// The action is outside what this run may do (sandbox, allow-list).
    PermissionDenied,
    /// The tool ran past its time limit and was stopped.
    Timeout,
    /// The tool ran and failed.
    Failed,
}

impl ToolErrorKind {
    /// Short name.
    pub fn as_str(self) -> &'static str {
        match self {
            ToolErrorKind::InvalidArgs => "invalid_args",
            ToolErrorKind::NotFound => "not_found",
            ToolErrorKind::PermissionDenied => "permission_denied",
            ToolErrorKind::Timeout => "timeout",
            ToolErrorKind::Failed => "failed",
        }
    }

    /// Advice for the model that goes with this kind of error.
    pub fn advice(self) -> &'static str {
        match self {
            ToolErrorKind::InvalidArgs => "Fix the arguments to match the tool's schema.",
            ToolErrorKind::NotFound => "Check the name; list what exists before guessing.",
            ToolErrorKind::PermissionDenied => {
                "This is not allowed in this run; do not retry it, use another tool or approach."
            }
            ToolErrorKind::Timeout => "The tool was stopped; try a smaller or different request.",
            ToolErrorKind::Failed => "Read the error and try a different approach.",
        }
    }
}

/// Failures of the planner machinery (not the model's mistakes).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PlannerError {
    /// The prompt no longer fits the model's context.
    #[error("the transcript no longer fits the model's context ({detail})")]
    ContextExhausted {
        /// Details from the model.
        detail: String,
    },
    /// Cancelled while generating.
    #[error("cancelled")]
    Cancelled,
    /// A scripted planner ran out of turns.
    #[error("the scripted planner has no more turns")]
    ScriptExhausted,
    /// The model failed.
    #[error("language model error")]
    Lm(#[source] LmError),
}

/// A full context is `ContextExhausted` (the loops stop or escalate on it); every other model
/// error keeps its source.
impl From<LmError> for PlannerError {
    fn from(e: LmError) -> Self {
        match e {
            LmError::ContextExceeded { .. } => Self::ContextExhausted {
                detail: e.to_string(),
            },
            other => Self::Lm(other),
        }
    }
}
