//! The two agent loops and what they share: typed steps, tools, a condenser, guards, budgets,
//! the run directory and the audit log.
//!
//! - ReAct (`react::run`) drives Thought → Action → Observation with any `Planner`:
//!   `LmPlanner` over a `crate::lm::LanguageModel` (the in-process runtime) or
//!   `ScriptedPlanner` in tests. The prompt is always derived from typed `Step`s, so each step's
//!   prompt extends the previous one and the runtime reuses the KV prefix. The names exported
//!   here (`Limits`, `AgentError`, `AgentEvent`) are the ReAct loop's.
//! - OODA (`ooda::OodaBuilder` → `ooda::Ooda::run`) observes sensors (`ooda::observe`'s
//!   `SensorReadings`), orients a world model, decides through a risk gate and acts.
//!
//! Both write each call of a tool with side effects to the run's audit log
//! (`audit::AuditSink`): an intent before it runs and an outcome after. This module never
//! imports candle.

pub mod answer;
pub mod approval;
pub mod audit;
pub mod bound;
pub mod condense;
pub mod eval;
pub mod eval_concurrent;
pub mod grounding;
pub mod guard;
pub mod narrow;
pub mod ooda;
pub mod outputs;
pub mod parse;
pub mod planner;
pub mod program;
pub mod query;
pub mod react;
pub mod records;
pub mod rundir;
pub mod tools;
pub mod types;
pub mod words;

pub use planner::{
    LmPlanner, LmPlannerConfig, Planner, PlannerError, PlannerInput, PlannerOutput,
    ScriptedPlanner, ScriptedTurn,
};
pub use react::{AgentError, AgentEvent, Limits};
pub use tools::{Tool, ToolError, ToolErrorKind, Toolset};
pub use types::{Action, AnswerBy, Observation, ObservationKind, RunOutcome, Step, StopReason};
