//! The world model: the loop's persistent state.
//!
//! The `WorldModel` survives across cycles, is rendered into every model prompt, and is saved
//! with the run so `boyd resume` continues from it. New facts (from the last action, from the
//! model's extraction, from memory) are checked against the known ones **before** the update: a
//! different value for a known key is a `Contradiction`, surfaced and logged; one against a fact
//! of confidence above 0.8 is high severity, is not applied, and pauses the run for review. When
//! the rendered model grows past its share of the context, older steps are summarized (facts are
//! kept) and the compression is logged.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::act::ActionReport;
pub use super::hypothesis::Hypothesis;
use super::memory::RecalledOutcome;
use crate::agent::audit::OutcomeStatus;
use crate::agent::guard::canonical_json;
use crate::agent::rundir::utc_timestamp;
use crate::agent::tools::truncate_str;

/// Default confidence above which a contradicted fact pauses the run (the policy may set
/// another: `WorldModel::contradiction_threshold`).
pub const HIGH_CONFIDENCE: f64 = super::risk::DEFAULT_CONTRADICTION_THRESHOLD;

fn default_contradiction_threshold() -> f64 {
    HIGH_CONFIDENCE
}
/// Longest fact value kept.
pub const VALUE_MAX: usize = 400;

/// The start of a workspace file content hash's fact key (`orient::file_hash_key`).
pub const FILE_HASH_PREFIX: &str = "sha256 of ";

/// A known fact.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Fact {
    /// Key as first written (whitespace collapsed); the world model looks keys up lowercased.
    pub key: String,
    /// Value.
    pub value: String,
    /// 0..1.
    pub confidence: f64,
    /// Where it came from (`action 3`, `model`, `memory:<run>`, `reviewer`).
    pub source: String,
    /// UTC time it was learned.
    pub time: String,
    /// Retrieved from memory of earlier runs.
    #[serde(default)]
    pub prior: bool,
    /// Earlier values a low-severity contradiction kept beside this one (both with lowered
    /// confidence).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub disputed: Vec<Fact>,
}

/// A claimed fact, before it is checked against the world model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FactClaim {
    /// Key.
    pub key: String,
    /// Value.
    pub value: String,
    /// 0..1.
    pub confidence: f64,
}

impl FactClaim {
    /// A claim.
    pub fn new(key: impl Into<String>, value: impl Into<String>, confidence: f64) -> Self {
        Self {
            key: key.into(),
            value: value.into(),
            confidence,
        }
    }
}

/// How bad a contradiction is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    /// Against a fact of confidence <= 0.8: surfaced, the newer value applied.
    Low,
    /// Against a fact of confidence > 0.8: not applied; the run pauses for review.
    High,
}

impl Severity {
    /// Name.
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Low => "low",
            Severity::High => "high",
        }
    }
}

/// Where the disagreeing new value came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ContradictionKind {
    /// A fact the model extracted.
    #[default]
    ModelFact,
    /// A tool's output (`action N`).
    ToolOutput,
    /// A sensor reading (`sensor ...`: a workspace file's content hash).
    Sensor,
    /// Memory of an earlier run.
    Memory,
    /// The host's free memory against what the model still needs (its KV cache grown to the
    /// full context).
    HostMemory,
    /// The model's context filling up.
    ModelContext,
}

impl ContradictionKind {
    /// The kind of a fact source.
    pub fn of_source(source: &str) -> Self {
        if source.starts_with("action") {
            Self::ToolOutput
        } else if source.starts_with(HOST_MEMORY_SOURCE) {
            Self::HostMemory
        } else if source.starts_with(MODEL_CONTEXT_SOURCE) {
            Self::ModelContext
        } else if source.starts_with("sensor") {
            Self::Sensor
        } else if source.starts_with("memory") {
            Self::Memory
        } else {
            Self::ModelFact
        }
    }
    /// Name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ModelFact => "model_fact",
            Self::ToolOutput => "tool_output",
            Self::Sensor => "sensor",
            Self::Memory => "memory",
            Self::HostMemory => "host_memory",
            Self::ModelContext => "model_context",
        }
    }
}

/// Fact source of the host-memory reading (`super::orient::resource_claims`).
pub const HOST_MEMORY_SOURCE: &str = "sensor memory";
/// Fact source of the model-context reading.
pub const MODEL_CONTEXT_SOURCE: &str = "sensor context";

/// A resource reading (host memory, model context) that calls for nothing: healthy and
/// undisputed. Left out of the prompts (the record keeps it): a 0.5B decider answered
/// questions about files with "The model context has room."
fn healthy_resource(f: &Fact) -> bool {
    let resource = matches!(
        ContradictionKind::of_source(&f.source),
        ContradictionKind::HostMemory | ContradictionKind::ModelContext
    );
    resource && f.disputed.is_empty() && f.confidence >= super::orient::HEALTHY_CONFIDENCE
}

/// Confidence factor of both values a low-severity contradiction keeps.
pub const DISPUTED_FACTOR: f64 = 0.5;

/// A new fact that disagrees with a known one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Contradiction {
    /// Cycle it was found in.
    pub cycle: usize,
    /// The fact key.
    pub key: String,
    /// The known fact.
    pub old: Fact,
    /// The new one.
    pub new: Fact,
    /// Severity.
    pub severity: Severity,
    /// Where the new value came from.
    #[serde(default)]
    pub kind: ContradictionKind,
    /// Resolved (by the update for low ones, by a reviewer for high ones).
    pub resolved: bool,
}

/// A finished action as the world model remembers it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompletedStep {
    /// Cycle.
    pub cycle: usize,
    /// Action id.
    pub action_id: u64,
    /// Tool.
    pub tool: String,
    /// Arguments.
    pub args: Value,
    /// Fingerprint.
    pub fingerprint: String,
    /// How it ended.
    pub status: OutcomeStatus,
    /// Output preview.
    pub output: String,
    /// Chosen by implicit guidance.
    pub implicit: bool,
}

/// A candidate the gate refused, kept so the model stops proposing it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RefusedAction {
    /// Tool.
    pub tool: String,
    /// Arguments.
    pub args: Value,
    /// Why.
    pub reason: String,
}

/// The loop's persistent picture of the world.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorldModel {
    /// The task.
    pub objective: String,
    /// The workspace's top level as `list_dir` showed it when the run started (the reading
    /// ReAct puts under its task); empty when there is no workspace or no `list_dir`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub overview: String,
    /// Summary of older steps (after compression).
    pub summary: Vec<String>,
    /// Recent completed steps.
    pub completed: Vec<CompletedStep>,
    /// Hypotheses: what each action was expected to produce, confirmed or refuted by its
    /// outcome's verification.
    pub hypotheses: Vec<Hypothesis>,
    /// Outcomes of earlier runs in this workspace relevant to the objective and the last
    /// output, recalled by this cycle's Orient.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub recalled: Vec<RecalledOutcome>,
    /// Known facts by normalized (lowercase) key.
    pub facts: BTreeMap<String, Fact>,
    /// Contradictions found.
    pub contradictions: Vec<Contradiction>,
    /// Fingerprints of irreversible actions taken.
    pub irreversible_taken: Vec<String>,
    /// Constraints (policy, budget, refusals).
    pub constraints: Vec<String>,
    /// Candidates the gate refused.
    pub refused: Vec<RefusedAction>,
    /// Fingerprints of actions whose outcome is unknown (crash between intent and outcome).
    pub unknown_outcomes: Vec<String>,
    /// Fingerprints of actions that failed, with the error.
    pub failed: BTreeMap<String, String>,
    /// Latest sensor readings (`key = value`).
    pub signals: BTreeMap<String, String>,
    /// Risk budget at the start.
    pub risk_budget_total: f64,
    /// Risk budget left.
    pub risk_budget_remaining: f64,
    /// Cycles so far (over all sessions of the run).
    pub loop_count: usize,
    /// Seconds spent so far (over all sessions).
    pub elapsed_s: f64,
    /// Deadline in seconds of elapsed time, if any.
    pub deadline_s: Option<f64>,
    /// Orientation confidence of the last cycle.
    pub confidence: f64,
    /// A contradicted fact of confidence above this is high severity (pauses for review).
    #[serde(default = "default_contradiction_threshold")]
    pub contradiction_threshold: f64,
}

/// Normalize a key or a value for comparison.
pub fn normalize(s: &str) -> String {
    s.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase()
}

/// Collapse whitespace (keeps case: keys are shown to the model, and paths are case-sensitive).
pub fn collapse(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The fact key for a tool call's result.
pub fn action_key(tool: &str, args: &Value) -> String {
    let args = canonical_json(args);
    collapse(&format!("{tool} {}", truncate_str(&args, 160)))
}

/// What one Orient phase changed.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct OrientReport {
    /// New facts.
    pub added: Vec<Fact>,
    /// Updated facts (same value confirmed, or a low contradiction applied).
    pub updated: Vec<Fact>,
    /// Contradictions found this cycle.
    pub contradictions: Vec<Contradiction>,
    /// Facts retrieved from memory this cycle.
    pub retrieved: Vec<Fact>,
    /// Outcomes of earlier runs recalled this cycle.
    #[serde(default)]
    pub recalled: Vec<RecalledOutcome>,
    /// Model calls made.
    pub model_calls: usize,
    /// Extraction failures (the model's output did not parse).
    pub extraction_errors: Vec<String>,
}

/// Most characters of an output the record keeps: a long file's preview (its lines for the
/// objective; see `tools::files::long_read_preview`) or the output's head. ReAct's condenser
/// shows 1,500; a record that kept 600 cut a search's hits after the third line.
const SHOWN_MAX: usize = 1400;

impl WorldModel {
    /// A fresh world model.
    pub fn new(objective: &str, risk_budget: f64, deadline_s: Option<f64>) -> Self {
        Self {
            objective: objective.into(),
            overview: String::new(),
            summary: Vec::new(),
            completed: Vec::new(),
            hypotheses: Vec::new(),
            recalled: Vec::new(),
            facts: BTreeMap::new(),
            contradictions: Vec::new(),
            irreversible_taken: Vec::new(),
            constraints: Vec::new(),
            refused: Vec::new(),
            unknown_outcomes: Vec::new(),
            failed: BTreeMap::new(),
            signals: BTreeMap::new(),
            risk_budget_total: risk_budget,
            risk_budget_remaining: risk_budget,
            loop_count: 0,
            elapsed_s: 0.0,
            deadline_s,
            confidence: 1.0,
            contradiction_threshold: HIGH_CONFIDENCE,
        }
    }

    /// Unresolved high-severity contradictions.
    pub fn open_high(&self) -> impl Iterator<Item = &Contradiction> {
        self.contradictions
            .iter()
            .filter(|c| c.severity == Severity::High && !c.resolved)
    }

    /// Split the orienter's claims into those it may write and those whose key names an
    /// observation: a fact a sensor or a tool output wrote (`sensor …`, `action N`) is the
    /// world's own reading and is only rewritten by the world. A 0.5B orienter, shown the known
    /// keys, reuses them for unrelated values ("host memory for the model" = "160 bytes");
    /// taken as claims, those paused runs for review on a contradiction nobody observed.
    pub fn interpretable(
        &self,
        claims: Vec<FactClaim>,
    ) -> (Vec<FactClaim>, Vec<(FactClaim, String)>) {
        let mut kept = Vec::new();
        let mut refused = Vec::new();
        for c in claims {
            match self.facts.get(&normalize(&c.key)) {
                Some(f) if Self::observed(&f.source) => {
                    let source = f.source.clone();
                    refused.push((c, source));
                }
                _ => kept.push(c),
            }
        }
        (kept, refused)
    }

    /// Whether a fact source is an observation of the world (a sensor or a tool output).
    pub fn observed(source: &str) -> bool {
        matches!(
            ContradictionKind::of_source(source),
            ContradictionKind::ToolOutput
                | ContradictionKind::Sensor
                | ContradictionKind::HostMemory
                | ContradictionKind::ModelContext
        )
    }

    /// Check claims against the known facts, then apply those that do not contradict a
    /// high-confidence fact.
    pub fn apply_claims(
        &mut self,
        claims: &[FactClaim],
        source: &str,
        cycle: usize,
        prior: bool,
        report: &mut OrientReport,
    ) {
        let time = utc_timestamp();
        for c in claims {
            // Looked up case-insensitively; shown as written.
            let key = normalize(&c.key);
            if key.is_empty() {
                continue;
            }
            let new = Fact {
                key: collapse(&c.key),
                value: truncate_str(c.value.trim(), VALUE_MAX).to_string(),
                confidence: c.confidence.clamp(0.0, 1.0),
                source: source.into(),
                time: time.clone(),
                prior,
                disputed: Vec::new(),
            };
            match self.facts.get(&key) {
                None => {
                    self.facts.insert(key, new.clone());
                    if prior {
                        report.retrieved.push(new);
                    } else {
                        report.added.push(new);
                    }
                }
                Some(old) if normalize(&old.value) == normalize(&new.value) => {
                    // Confirmed: keep the higher confidence, drop the prior mark.
                    if prior {
                        continue;
                    }
                    let mut f = new;
                    f.confidence = f.confidence.max(old.confidence);
                    self.facts.insert(key, f.clone());
                    report.updated.push(f);
                }
                Some(_) if prior => {
                    // Memory never overrides what this run has seen.
                }
                Some(old) => {
                    let severity = if old.confidence > self.contradiction_threshold {
                        Severity::High
                    } else {
                        Severity::Low
                    };
                    let con = Contradiction {
                        cycle,
                        key: old.key.clone(),
                        old: old.clone(),
                        new: new.clone(),
                        severity,
                        kind: ContradictionKind::of_source(source),
                        resolved: severity == Severity::Low,
                    };
                    if severity == Severity::Low {
                        // Keep both, each less sure; the disputed value is shown to Decide.
                        let mut earlier = old.clone();
                        earlier.confidence *= DISPUTED_FACTOR;
                        let mut kept = new.clone();
                        kept.confidence *= DISPUTED_FACTOR;
                        kept.disputed = old.disputed.clone();
                        earlier.disputed.clear();
                        kept.disputed.push(earlier);
                        self.facts.insert(key, kept.clone());
                        report.updated.push(kept);
                    }
                    self.contradictions.push(con.clone());
                    report.contradictions.push(con);
                }
            }
        }
    }

    /// A reviewer resolved the open high contradictions: the new values are accepted.
    pub fn accept_reviewed(&mut self) -> usize {
        let mut n = 0;
        for c in self.contradictions.iter_mut() {
            if c.severity == Severity::High && !c.resolved {
                let mut f = c.new.clone();
                f.source = format!("{} (accepted by reviewer)", f.source);
                f.prior = false;
                self.facts.insert(normalize(&c.key), f);
                c.resolved = true;
                n += 1;
            }
        }
        n
    }

    /// Remember a finished action.
    pub fn record_action(&mut self, r: &ActionReport, irreversible: bool) {
        self.record_action_shown(r, irreversible, None);
    }

    /// [`WorldModel::record_action`], the record showing `shown` (what the output holds for the
    /// objective: a long file's preview) instead of the output's head.
    pub fn record_action_shown(
        &mut self,
        r: &ActionReport,
        irreversible: bool,
        shown: Option<&str>,
    ) {
        let output = match shown {
            Some(p) => truncate_str(p, SHOWN_MAX).to_string(),
            None => truncate_str(&r.output, SHOWN_MAX).to_string(),
        };
        self.completed.push(CompletedStep {
            cycle: r.cycle,
            action_id: r.action_id,
            tool: r.tool.clone(),
            args: r.args.clone(),
            fingerprint: r.fingerprint.clone(),
            status: r.status,
            output,
            implicit: r.implicit,
        });
        if matches!(r.status, OutcomeStatus::Failed | OutcomeStatus::TimedOut) {
            self.failed.insert(
                r.fingerprint.clone(),
                truncate_str(&r.output, 300).to_string(),
            );
        }
        if irreversible && r.status != OutcomeStatus::Failed {
            self.irreversible_taken.push(r.fingerprint.clone());
            // We changed the world: what we read before may no longer hold.
            for f in self.facts.values_mut() {
                if f.source.starts_with("action") {
                    f.confidence = f.confidence.min(0.5);
                }
            }
        }
        self.risk_budget_remaining = (self.risk_budget_remaining - r.cost).max(0.0);
    }

    /// Render for a model prompt. Budgets are left out on purpose: the gate enforces them, and a
    /// small model tends to answer with whatever number it sees last.
    pub fn render(&self) -> String {
        let mut s = self.render_record();
        s.push_str(&self.render_state());
        s
    }

    /// The part of the rendering that only grows between compressions: the objective, the
    /// workspace, and each action with its output (lines kept). Orient and Decide both open
    /// their prompt with it, so the runtime reuses its KV prefix from one call to the next.
    pub fn render_record(&self) -> String {
        let mut s = String::new();
        s.push_str(&format!("Objective: {}\n", self.objective));
        if !self.overview.is_empty() {
            s.push_str(&format!(
                "Files in the workspace:\n{}\n",
                self.overview.trim_end()
            ));
        }
        if !self.summary.is_empty() || !self.completed.is_empty() {
            s.push_str("Actions so far:\n");
            for line in &self.summary {
                s.push_str(&format!("- {line}\n"));
            }
            for c in &self.completed {
                s.push_str(&format!(
                    "- {} {} -> {}:\n",
                    c.tool,
                    canonical_json(&c.args),
                    status_word(c.status),
                ));
                for line in c.output.lines().filter(|l| !l.trim().is_empty()) {
                    s.push_str(&format!("  {}\n", line.trim_end()));
                }
            }
        } else {
            s.push_str("Actions so far: none\n");
        }
        s
    }

    /// The part of the rendering that each cycle may rewrite: facts, memory, contradictions,
    /// refusals, constraints and notes.
    pub fn render_state(&self) -> String {
        let mut s = String::new();
        // An action's output is in the record above (more of it than its fact keeps), and a
        // file's content hash only matters as a contradiction, which is listed below: neither
        // is rendered again here. On a run of ten reads these were a thousand tokens that each
        // Decide prefilled afresh.
        let in_record: std::collections::HashSet<String> = self
            .completed
            .iter()
            .map(|c| action_key(&c.tool, &c.args))
            .collect();
        let shown: Vec<&Fact> = self
            .facts
            .values()
            .filter(|f| !in_record.contains(&f.key) && !f.key.starts_with(FILE_HASH_PREFIX))
            .filter(|f| !healthy_resource(f))
            .collect();
        if !shown.is_empty() {
            s.push_str("Known facts:\n");
            for f in shown {
                let mark = if f.prior {
                    "[from an earlier run] "
                } else {
                    ""
                };
                s.push_str(&format!(
                    "- {mark}{} = {} (confidence {:.2})\n",
                    f.key,
                    one_line(&f.value, 200),
                    f.confidence
                ));
                for d in &f.disputed {
                    s.push_str(&format!(
                        "  (disputed: {} said {} (confidence {:.2}))\n",
                        d.source,
                        one_line(&d.value, 120),
                        d.confidence
                    ));
                }
            }
        }
        if !self.recalled.is_empty() {
            s.push_str("Earlier outcomes in this workspace (from memory):\n");
            for r in &self.recalled {
                s.push_str(&format!(
                    "- {} -> {}\n",
                    one_line(&r.action, 160),
                    one_line(&r.result, 160)
                ));
            }
        }
        let open: Vec<&Contradiction> =
            self.contradictions.iter().filter(|c| !c.resolved).collect();
        if !open.is_empty() {
            s.push_str("Unresolved contradictions:\n");
            for c in open {
                s.push_str(&format!(
                    "- {}: was {:?}, now {:?}\n",
                    c.key, c.old.value, c.new.value
                ));
            }
        }
        if !self.refused.is_empty() {
            s.push_str("Refused (do not propose these again):\n");
            for r in &self.refused {
                s.push_str(&format!(
                    "- {} {}: {}\n",
                    r.tool,
                    canonical_json(&r.args),
                    r.reason
                ));
            }
        }
        for c in &self.constraints {
            s.push_str(&format!("Constraint: {c}\n"));
        }
        let notes: Vec<String> = self
            .signals
            .iter()
            .filter(|(k, _)| {
                k.starts_with("decide.")
                    || k.starts_with("sensor.")
                    || k.starts_with(super::external::SIGNAL_PREFIX)
                    || k.as_str() == "last_action.discrepancy"
                    || k.as_str() == "workspace.changed"
            })
            .map(|(k, v)| format!("- {k}: {}", one_line(v, 200)))
            .collect();
        if !notes.is_empty() {
            s.push_str("Notes:\n");
            for n in notes {
                s.push_str(&n);
                s.push('\n');
            }
        }
        s
    }

    /// Rough token count of the rendering (4 characters per token).
    pub fn estimate_tokens(&self) -> usize {
        self.render().len().div_ceil(4)
    }

    /// Summarize all but the last `keep` steps when the rendering is over `max_tokens`.
    /// Returns `(steps summarized, tokens before, tokens after)`.
    pub fn compress_if_needed(
        &mut self,
        max_tokens: usize,
        keep: usize,
    ) -> Option<(usize, usize, usize)> {
        let before = self.estimate_tokens();
        if before <= max_tokens || self.completed.len() <= keep {
            return None;
        }
        let cut = self.completed.len() - keep;
        let old: Vec<CompletedStep> = self.completed.drain(..cut).collect();
        let mut by_tool: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
        for c in &old {
            let e = by_tool.entry(c.tool.as_str()).or_default();
            e.0 += 1;
            if c.status == OutcomeStatus::Verified {
                e.1 += 1;
            }
        }
        let parts: Vec<String> = by_tool
            .iter()
            .map(|(t, (n, v))| format!("{t} x{n} ({v} verified)"))
            .collect();
        let first = old.first().map_or(0, |c| c.cycle);
        let last = old.last().map_or(0, |c| c.cycle);
        self.summary.push(format!(
            "cycles {first}-{last}: {} (outputs summarized; facts kept)",
            parts.join(", ")
        ));
        let after = self.estimate_tokens();
        Some((old.len(), before, after))
    }
}

fn status_word(s: OutcomeStatus) -> &'static str {
    match s {
        OutcomeStatus::Verified => "verified",
        OutcomeStatus::Unverified => "done (unverified)",
        OutcomeStatus::Failed => "failed",
        OutcomeStatus::TimedOut => "timed out",
    }
}

pub(crate) fn one_line(s: &str, max: usize) -> String {
    let flat = s.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() > max {
        let cut: String = flat.chars().take(max).collect();
        format!("{cut}…")
    } else {
        flat
    }
}

#[cfg(test)]
mod tests;
