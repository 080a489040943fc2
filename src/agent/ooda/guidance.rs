//! Implicit guidance: declared rules and patterns learned in a run pick an action without the
//! Decide model call.
//!
//! A rule (`final_after calculator`) answers with a verified tool's output; a polling action
//! verified in an oriented state is taken again when the same state comes back. Either way the
//! decision is recorded as implicit, with the rule or pattern that chose it.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::agent::audit::OutcomeStatus;
use crate::agent::condense::sha256_hex;
use crate::agent::guard::canonical_json;

use super::decide::Candidate;
use super::policy::Rule;
use super::world::WorldModel;

/// Declared rules plus patterns learned in this run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ImplicitGuidance {
    /// Declared rules.
    pub rules: Vec<Rule>,
    /// Oriented-state signature → the polling action that was verified in that state.
    pub learned: BTreeMap<String, (String, Value)>,
}

/// A signature of the oriented state: this run's facts and the last action with its status.
pub fn state_signature(world: &WorldModel) -> String {
    let facts: BTreeMap<&str, &str> = world
        .facts
        .values()
        .filter(|f| !f.prior)
        .map(|f| (f.key.as_str(), f.value.as_str()))
        .collect();
    let last = world
        .completed
        .last()
        .map(|c| (c.fingerprint.as_str(), c.status));
    let v = json!({"facts": facts, "last": last});
    sha256_hex(canonical_json(&v).as_bytes())
}

impl ImplicitGuidance {
    /// With these declared rules.
    pub fn new(rules: Vec<Rule>) -> Self {
        Self {
            rules,
            learned: BTreeMap::new(),
        }
    }

    /// An action to take without the Decide call, and why.
    pub fn suggest(&self, world: &WorldModel) -> Option<(Candidate, String)> {
        if let Some(last) = world.completed.last() {
            for r in &self.rules {
                match r {
                    Rule::FinalAfter { tool } => {
                        if &last.tool == tool && last.status == OutcomeStatus::Verified {
                            let mut c = Candidate::answer(last.output.trim());
                            c.thought = format!(
                                "rule final_after {tool}: its verified output answers the task"
                            );
                            return Some((c, format!("rule final_after {tool}")));
                        }
                    }
                }
            }
        }
        let sig = state_signature(world);
        self.learned.get(&sig).map(|(tool, args)| {
            let mut c = Candidate::tool(tool, args.clone());
            c.thought = "same oriented state as an earlier verified poll".into();
            (c, format!("pattern {}", &sig[..12]))
        })
    }

    /// Learn from a verified polling action taken in state `sig`.
    pub fn learn(&mut self, sig: String, tool: &str, args: &Value) {
        self.learned.insert(sig, (tool.to_string(), args.clone()));
    }
}
