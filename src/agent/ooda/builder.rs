//! `OodaBuilder`: the one way a run is assembled from its settings, its workspace, approval key,
//! memory and model — used by `boyd run --loop ooda`, `boyd resume` and `boyd eval --loop ooda`
//! (through [`super::eval::run_task`]).

use std::sync::Arc;

use crate::agent::approval::ApprovalKey;
use crate::agent::tools::{Sandbox, Toolset};
use crate::lm::{CancelToken, LanguageModel};

use super::lm_phases::{ModelPhases, PhaseOptions};
use super::memory::MemoryStore;
use super::observe::Sensor;
use super::{Ooda, OodaConfig, Phases};

/// Settings and collaborators of an OODA run, before its phases and tools are known.
pub struct OodaBuilder {
    config: OodaConfig,
    workspace: Option<Sandbox>,
    approval_key: Option<ApprovalKey>,
    memory: Option<MemoryStore>,
    sensors: Vec<Arc<dyn Sensor>>,
    phase_options: PhaseOptions,
}

impl OodaBuilder {
    /// A run with these loop settings, no workspace, no approval key, no memory, the default
    /// model-phase options.
    pub fn new(config: OodaConfig) -> Self {
        Self {
            config,
            workspace: None,
            approval_key: None,
            memory: None,
            sensors: Vec::new(),
            phase_options: PhaseOptions::default(),
        }
    }

    /// The workspace for the file tools and the workspace sensor.
    pub fn workspace(mut self, workspace: Option<Sandbox>) -> Self {
        self.workspace = workspace;
        self
    }

    /// The key that checks approval tokens and signs the snapshot.
    pub fn approval_key(mut self, key: Option<ApprovalKey>) -> Self {
        self.approval_key = key;
        self
    }

    /// Memory of earlier runs.
    pub fn memory(mut self, memory: Option<MemoryStore>) -> Self {
        self.memory = memory;
        self
    }

    /// A sensor in addition to the built-in ones.
    pub fn sensor(mut self, sensor: Arc<dyn Sensor>) -> Self {
        self.sensors.push(sensor);
        self
    }

    /// How the model-backed phases orient and decide.
    pub fn phase_options(mut self, options: PhaseOptions) -> Self {
        self.phase_options = options;
        self
    }

    /// The loop settings.
    pub fn config(&self) -> &OodaConfig {
        &self.config
    }

    /// Orient and Decide over `model` (one object for both phases), with this builder's
    /// options; for callers that run several loops over one model (evals).
    pub fn model_phases<'m>(&self, model: &'m mut dyn LanguageModel) -> ModelPhases<'m> {
        ModelPhases::new(model, self.phase_options.clone())
    }

    /// The loop over `model`.
    pub fn build<'a>(
        self,
        model: &'a mut dyn LanguageModel,
        tools: &'a Toolset,
        cancel: CancelToken,
    ) -> Ooda<'a> {
        let phases = Box::new(self.model_phases(model));
        self.assemble(Ooda::with_owned_phases(phases, tools, cancel))
    }

    /// The loop over phases the caller keeps (a model's, or a scripted decider's and orienter's).
    pub fn build_with<'a>(
        self,
        phases: &'a mut dyn Phases,
        tools: &'a Toolset,
        cancel: CancelToken,
    ) -> Ooda<'a> {
        self.assemble(Ooda::with_phases(phases, tools, cancel))
    }

    fn assemble<'a>(self, mut ooda: Ooda<'a>) -> Ooda<'a> {
        ooda.config = self.config;
        ooda.workspace = self.workspace;
        ooda.approval_key = self.approval_key;
        ooda.memory = self.memory;
        ooda.sensors = self.sensors;
        ooda
    }
}
