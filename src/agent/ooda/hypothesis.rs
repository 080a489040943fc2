//! Hypotheses: what the loop expects an action to produce, tested by the action's outcome.
//!
//! When Decide's choice is about to run, the world model gets a [`Hypothesis`]: "this action
//! will produce a verified result" (for the reason the decider gave). It is open in the
//! world-model snapshot the intent names, and the outcome's verification settles it: a result
//! that passed its post-condition confirms it; a failure, a timeout or a failed post-condition
//! refutes it; a result with no post-condition to check leaves it inconclusive. Each is logged
//! to `ooda.jsonl` (phase `hypothesis`), saved with the world model, and printed by
//! `boyd runs show`.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::act::ActionReport;
use super::decide::Assessment;
use crate::agent::audit::OutcomeStatus;
use crate::agent::guard::canonical_json;
use crate::agent::tools::truncate_str;

/// Where a hypothesis stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HypothesisStatus {
    /// The action has not finished.
    Open,
    /// The outcome verified.
    Confirmed,
    /// The action failed, timed out, or its post-condition failed.
    Refuted,
    /// The action finished with nothing to verify its result against.
    Inconclusive,
}

impl HypothesisStatus {
    /// Name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Open => "open",
            Self::Confirmed => "confirmed",
            Self::Refuted => "refuted",
            Self::Inconclusive => "inconclusive",
        }
    }
}

/// One expectation about an action.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Hypothesis {
    /// Cycle it was made in.
    pub cycle: usize,
    /// The action it is about.
    pub tool: String,
    /// Its arguments.
    pub args: Value,
    /// Its fingerprint.
    pub fingerprint: String,
    /// The expectation, in words.
    pub statement: String,
    /// Where it stands.
    pub status: HypothesisStatus,
    /// What settled it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evidence: Option<String>,
    /// The action that tested it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action_id: Option<u64>,
}

impl Hypothesis {
    /// The expectation that the chosen action will produce a verified result.
    pub fn expect(cycle: usize, a: &Assessment) -> Self {
        let thought = a.thought.trim();
        let reason = if thought.is_empty() {
            String::new()
        } else {
            format!(" ({})", truncate_str(thought, 160))
        };
        Self {
            cycle,
            tool: a.tool.clone(),
            args: a.args.clone(),
            fingerprint: a.fingerprint.clone(),
            statement: format!(
                "{} {} will produce a verified result{reason}",
                a.tool,
                truncate_str(&canonical_json(&a.args), 160)
            ),
            status: HypothesisStatus::Open,
            evidence: None,
            action_id: None,
        }
    }

    /// Settle it by the outcome of the action that tested it.
    pub fn settle(&mut self, r: &ActionReport) {
        let output = truncate_str(r.output.trim(), 160);
        let (status, evidence) = match r.status {
            OutcomeStatus::Verified => (HypothesisStatus::Confirmed, format!("verified: {output}")),
            OutcomeStatus::Unverified if !r.discrepancies.is_empty() => (
                HypothesisStatus::Refuted,
                format!("post-condition failed: {}", r.discrepancies.join("; ")),
            ),
            OutcomeStatus::Unverified => (
                HypothesisStatus::Inconclusive,
                format!("done, nothing to verify it against: {output}"),
            ),
            OutcomeStatus::Failed => (HypothesisStatus::Refuted, format!("failed: {output}")),
            OutcomeStatus::TimedOut => (HypothesisStatus::Refuted, format!("timed out: {output}")),
        };
        self.status = status;
        self.evidence = Some(evidence);
        self.action_id = Some(r.action_id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(status: OutcomeStatus, discrepancies: Vec<String>) -> ActionReport {
        ActionReport {
            action_id: 4,
            cycle: 2,
            tool: "read_file".into(),
            args: serde_json::json!({"path": "a.txt"}),
            fingerprint: "fp".into(),
            status,
            output: "hello".into(),
            discrepancies,
            cost: 1.0,
            elapsed_s: 0.1,
            implicit: false,
            approval: None,
            error: None,
        }
    }

    #[test]
    fn the_outcome_confirms_or_refutes_the_expectation() {
        let mut h = Hypothesis {
            cycle: 2,
            tool: "read_file".into(),
            args: serde_json::json!({"path": "a.txt"}),
            fingerprint: "fp".into(),
            statement: "read_file {\"path\":\"a.txt\"} will produce a verified result".into(),
            status: HypothesisStatus::Open,
            evidence: None,
            action_id: None,
        };
        for (status, d, want) in [
            (OutcomeStatus::Verified, vec![], HypothesisStatus::Confirmed),
            (OutcomeStatus::Failed, vec![], HypothesisStatus::Refuted),
            (OutcomeStatus::TimedOut, vec![], HypothesisStatus::Refuted),
            (
                OutcomeStatus::Unverified,
                vec!["the file is empty".to_string()],
                HypothesisStatus::Refuted,
            ),
            (
                OutcomeStatus::Unverified,
                vec![],
                HypothesisStatus::Inconclusive,
            ),
        ] {
            h.settle(&report(status, d));
            assert_eq!(h.status, want, "{status:?}");
            assert_eq!(h.action_id, Some(4));
        }
        assert!(h.evidence.as_deref().is_some_and(|e| e.contains("hello")));
    }
}
