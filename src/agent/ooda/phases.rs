//! How Orient and Decide are held: one object that is both ([`Phases`]), a decider and an
//! orienter side by side ([`SplitPhases`]), owned by the loop or borrowed ([`PhaseSlot`]).

use super::decide::{self, Decider};
use super::orient::{self, Orienter};
use crate::agent::types::PlannerError;

/// Orient and Decide together: one object that is both (the model-backed
/// [`ModelPhases`]), or a decider and an orienter side by side ([`SplitPhases`]).
pub trait Phases: Decider + Orienter {}

impl<T: Decider + Orienter> Phases for T {}

/// A decider and an orienter used as one [`Phases`] (scripted tests, rules-only orientation).
pub struct SplitPhases<'a> {
    /// Proposes candidates.
    pub decider: &'a mut dyn Decider,
    /// Extracts facts.
    pub orienter: &'a mut dyn Orienter,
}

impl Decider for SplitPhases<'_> {
    fn propose(
        &mut self,
        input: &decide::DecideInput<'_>,
    ) -> Result<decide::Proposal, PlannerError> {
        self.decider.propose(input)
    }
    fn name(&self) -> String {
        self.decider.name()
    }
    fn context_window(&self) -> Option<usize> {
        self.decider.context_window()
    }
    fn answer(
        &mut self,
        task: &str,
        steps: &[crate::agent::types::Step],
        overview: Option<&str>,
        cancel: &crate::lm::CancelToken,
    ) -> Result<Option<crate::agent::answer::AnswerOutput>, PlannerError> {
        self.decider.answer(task, steps, overview, cancel)
    }
    fn query(
        &mut self,
        task: &str,
        ws: &crate::agent::tools::Sandbox,
        rewrite: &crate::agent::query::Rewrite,
        cancel: &crate::lm::CancelToken,
    ) -> Result<Option<(serde_json::Value, crate::lm::Usage)>, PlannerError> {
        self.decider.query(task, ws, rewrite, cancel)
    }
}

impl Orienter for SplitPhases<'_> {
    fn extract(
        &mut self,
        input: &orient::OrientInput<'_>,
    ) -> Result<orient::Extraction, PlannerError> {
        self.orienter.extract(input)
    }
    fn name(&self) -> String {
        self.orienter.name()
    }
}

/// The phases a loop runs: owned (built for it) or borrowed (reused across eval tasks).
pub(super) enum PhaseSlot<'a> {
    Owned(Box<dyn Phases + 'a>),
    Borrowed(&'a mut dyn Phases),
}

impl<'a> PhaseSlot<'a> {
    pub(super) fn get(&mut self) -> &mut (dyn Phases + 'a) {
        match self {
            PhaseSlot::Owned(b) => b.as_mut(),
            PhaseSlot::Borrowed(r) => &mut **r,
        }
    }
    pub(super) fn decider(&mut self) -> &mut (dyn Decider + 'a) {
        self.get()
    }
    pub(super) fn orienter(&mut self) -> &mut (dyn Orienter + 'a) {
        self.get()
    }
    pub(super) fn decider_ref(&self) -> &(dyn Decider + 'a) {
        match self {
            PhaseSlot::Owned(b) => b.as_ref(),
            PhaseSlot::Borrowed(r) => &**r,
        }
    }
}
