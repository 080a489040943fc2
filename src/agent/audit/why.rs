//! Why an action ran, as an intent record carries it: the world-model snapshot's hash, the
//! chosen candidate with its numbers, the others with why they lost, and the reasoning in words.
//! The OODA loop fills it (`ooda::intent::explain`); the audit log only stores and checks it.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The chosen candidate, as the gate saw it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChosenNote {
    /// Rank in the proposal (0 = the decider's first choice).
    pub rank: usize,
    /// The decider's thought.
    pub thought: String,
    /// Value estimate.
    pub value: f64,
    /// Risk it takes.
    pub risk: f64,
    /// Expected value.
    pub expected_value: f64,
    /// Decision confidence.
    pub decision_confidence: f64,
}

/// A candidate that was not chosen.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Alternative {
    /// Tool (`final_answer` for answers).
    pub tool: String,
    /// Arguments.
    pub args: Value,
    /// Why it lost: the gate's reason, or its lower expected value.
    pub why_not: String,
}

/// Why an action ran.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IntentWhy {
    /// SHA-256 of the world-model snapshot (`<run>/worlds/<sha256>.json`).
    pub world_sha256: String,
    /// The chosen candidate.
    pub chosen: ChosenNote,
    /// The candidates not chosen.
    pub alternatives: Vec<Alternative>,
    /// The reasoning, in words.
    pub reasoning: String,
}
