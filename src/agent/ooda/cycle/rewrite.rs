//! Calls whose arguments a focused request writes (`agent::query`): a first `table` call on a
//! file, a first `calculator` call, and the calculation that may come before the answer.

use crate::agent::planner::PlannerError;
use crate::lm::Usage;

use super::super::decide::{Candidate, Proposal};
use super::Driver;

impl Driver<'_, '_> {
    /// The calculator call that comes before the answer, when files were read, no calculation
    /// was made and the calculation request writes one (`query::calculation_before_answer`),
    /// with the tokens it used. `None` leaves the answer.
    pub(super) fn calculation_before_answer(
        &mut self,
    ) -> Result<Option<(Candidate, Usage)>, PlannerError> {
        let (Some(ws), Some(rewrite)) = (
            self.ctx.workspace.as_ref(),
            crate::agent::query::calculation_before_answer(&self.steps),
        ) else {
            return Ok(None);
        };
        let decider = self.ooda.phases.decider();
        match decider.query(&self.s.task, ws, &rewrite, &self.ooda.cancel) {
            Ok(Some((args, used))) => {
                self.answer_next = true;
                Ok(Some((
                    Candidate {
                        thought: format!("a calculation before the answer {}", rewrite.tag()),
                        ..Candidate::tool(crate::agent::query::CALCULATOR, args)
                    },
                    used,
                )))
            }
            Ok(None) => Ok(None),
            Err(PlannerError::Cancelled) => Err(PlannerError::Cancelled),
            Err(e) => {
                tracing::warn!("calculation request failed ({e})");
                Ok(None)
            }
        }
    }

    /// A first `table` call on a file, a first `calculator` call and a first `list_dir` call
    /// get their arguments from a focused request (`agent::query`); the candidate's thought says so. A failed request
    /// leaves the decider's arguments.
    pub(super) fn write_queries(&mut self, proposal: &mut Proposal) -> Result<(), PlannerError> {
        let Some(ws) = self.ctx.workspace.as_ref() else {
            return Ok(());
        };
        for (i, c) in proposal.candidates.iter_mut().enumerate() {
            let crate::agent::types::Action::ToolCall { name, args } = &mut c.action else {
                continue;
            };
            let Some(rewrite) = crate::agent::query::rewrites(name, args, &self.steps) else {
                continue;
            };
            let decider = self.ooda.phases.decider();
            match decider.query(&self.s.task, ws, &rewrite, &self.ooda.cancel) {
                Ok(Some((written, used))) => {
                    *args = written;
                    proposal.usage.add(&used);
                    c.thought = format!("{} {}", c.thought, rewrite.tag());
                    // A call that answers the question: the answer is next (ReAct's rule).
                    if i == 0 && rewrite.answers(args) {
                        self.answer_next = true;
                    }
                }
                Ok(None) => {}
                Err(PlannerError::Cancelled) => return Err(PlannerError::Cancelled),
                Err(e) => tracing::warn!("focused request for a call failed ({e})"),
            }
        }
        // A best candidate that answers: a calculation may come first, as in ReAct (after
        // the rewrites above: the calculation is already the request's).
        let answers = proposal
            .candidates
            .first()
            .is_some_and(|c| crate::agent::query::is_answer(&c.action));
        if answers && self.ooda.config.answer.from_observations() {
            if let Some((c, used)) = self.calculation_before_answer()? {
                proposal.candidates.insert(0, c);
                proposal.usage.add(&used);
            }
        }
        Ok(())
    }
}
