//! Agent loops over the `Planner` seam: typed steps, tools, a condenser, guards and budgets.
//!
//! `react::run` drives Thought → Action → Observation with any `Planner`: `LmPlanner` over a
//! `crate::lm::LanguageModel` (the in-process runtime) or `ScriptedPlanner` in tests. The prompt
//! is always derived from typed `Step`s, so each step's prompt extends the previous one and the
//! runtime reuses the KV prefix. This module never imports candle.

pub mod answer;
pub mod approval;
pub mod audit;
pub mod condense;
pub mod eval;
pub mod eval_concurrent;
pub mod guard;
pub mod narrow;
pub mod ooda;
pub mod parse;
pub mod planner;
pub mod react;
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
pub use types::{Action, Observation, ObservationKind, RunOutcome, Step, StopReason};
