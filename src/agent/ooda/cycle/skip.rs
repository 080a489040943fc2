//! The learned skip: a pattern that succeeded in earlier runs of this workspace
//! (`super::super::learned`) picks the action, so Orient makes no model call and Decide none;
//! the gate still assesses the action, and the decision record names the pattern and its
//! evidence.

use super::super::decide::{assess, Candidate, DecisionRecord};
use super::super::learned::{
    instantiate, lookup, pattern_key, state_kind, task_shape, LEARN_AFTER,
};
use super::Driver;

impl Driver<'_, '_> {
    /// The learned action for this state and why, when a pattern has succeeded often enough.
    pub(super) fn learned_pattern(&self) -> Option<(Candidate, String)> {
        let mem = self.ooda.memory.as_ref()?;
        // Only in a clean state: nothing an action claimed waits to be checked.
        if !self.action_claims.is_empty() || self.s.world.open_high().next().is_some() {
            return None;
        }
        let shape = task_shape(&self.s.task);
        let last = self.s.world.completed.last();
        let state = state_kind(last);
        let p = lookup(mem, &pattern_key(&shape, &state))?;
        if p.successes < LEARN_AFTER {
            return None;
        }
        let args = instantiate(&p.args, &shape, last.map(|l| l.output.as_str()))?;
        let mut c = if p.tool == crate::agent::tools::FINAL_ANSWER {
            Candidate::answer(args.get("answer")?.as_str()?)
        } else {
            Candidate::tool(&p.tool, args)
        };
        c.thought = format!("learned: {} at {state}", p.tool);
        let why = format!(
            "learned in this workspace: {:?} at {state} -> {}, succeeded in {} earlier run(s) ({})",
            shape.template,
            p.tool,
            p.successes,
            p.runs.join(", ")
        );
        Some((c, why))
    }

    /// A decision from a learned pattern or an implicit-guidance rule (no Decide call), when
    /// the gate lets its action through.
    pub(super) fn guided_decision(
        &mut self,
        cycle: usize,
        (cand, why): (Candidate, String),
    ) -> Option<DecisionRecord> {
        let tools = self.ooda.tools;
        let polls = |name: &str| tools.get(name).is_some_and(|t| t.polls());
        let (assessed, chosen) = assess(
            &[cand],
            &self.s.world,
            tools,
            &self.ooda.config.policy,
            &self.s.approvals,
            &polls,
            self.ooda.config.confidence_threshold,
        );
        chosen?;
        self.s.counters.implicit += 1;
        Some(DecisionRecord {
            cycle,
            implicit: true,
            guidance: Some(why),
            candidates: assessed,
            chosen,
            parse_error: None,
        })
    }
}
