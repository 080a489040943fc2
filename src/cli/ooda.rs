//! Shared pieces of the OODA commands (`run --loop ooda`, `eval --loop ooda`, `resume`):
//! options, the tool set, the model-backed phases, and the readable phase stream.

use super::clip;
use super::term::safe;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use clap::ValueEnum;

use crate::agent::answer::AnswerMode;
use crate::agent::approval::ApprovalKey;
use crate::agent::audit::OutcomeStatus;
use crate::agent::guard::canonical_json;
use crate::agent::ooda::external::{CommandSensor, SensorSpec, SensorSpecError};
use crate::agent::ooda::observe::Sensor;
use crate::agent::ooda::policy::{Baseline, Policy, PolicyReport};
use crate::agent::ooda::writers::{DeleteFile, WriteFile};
use crate::agent::ooda::{OodaConfig, OodaEvent, OodaOutcome, OodaState, OrientMode, PhaseOptions};
use crate::agent::tools::{Sandbox, ShellPolicy, Toolset};

/// How Orient extracts facts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OrientArg {
    /// The model extracts facts from each new tool output (constrained JSON), plus the rules.
    Model,
    /// Only the deterministic rules (a verified tool output is a fact); no extra model call.
    Rules,
}

/// Options of the OODA loop.
#[derive(Debug, Clone, clap::Args)]
pub struct OodaOpts {
    /// OODA: candidate actions asked of the model per Decide.
    #[arg(long, default_value_t = 3)]
    pub candidates: usize,
    /// OODA: risk budget. Each action's risk is its declared cost (low 1, medium 3, high 8) × 3
    /// if irreversible × (1 + uncertainty); a candidate whose risk is over what is left is refused.
    #[arg(long, default_value_t = crate::agent::ooda::risk::DEFAULT_RISK_BUDGET)]
    pub risk_budget: f64,
    /// OODA: how Orient extracts facts.
    #[arg(long, value_enum, default_value = "model")]
    pub orient: OrientArg,
    /// OODA: approval tiers and rules (TOML); default `<config dir>/policy.toml`. A workspace's
    /// `.boyd/policy.toml` can only tighten it.
    #[arg(long)]
    pub policy: Option<PathBuf>,
    /// OODA: escalate instead of deciding when the orientation confidence is under this, and
    /// refuse candidates whose decision confidence is (a policy file may set it; a workspace's
    /// may only raise it).
    #[arg(long, default_value_t = crate::agent::ooda::risk::DEFAULT_CONFIDENCE_THRESHOLD)]
    pub confidence_threshold: f64,
    /// OODA: a contradicted fact of confidence above this pauses the run for review (a policy
    /// file may set it; a workspace's may only lower it).
    #[arg(long, default_value_t = crate::agent::ooda::risk::DEFAULT_CONTRADICTION_THRESHOLD)]
    pub contradiction_threshold: f64,
    /// OODA: most Observe–Orient–Decide–Act cycles per session (a resume gets as many again).
    /// `--max-steps` is the ReAct loop's limit; an eval task's own `max_steps` overrides both.
    #[arg(long, default_value_t = crate::agent::ooda::DEFAULT_MAX_LOOPS)]
    pub max_loops: usize,
    /// OODA: do not read or write memory of earlier runs.
    #[arg(long)]
    pub no_memory: bool,
    /// OODA: an external sensor, repeatable: a command whose stdout (first 4 KiB) is the
    /// reading `external.NAME`, read each cycle in the workspace, inside the shell tool's
    /// sandbox (workspace read-only). One program and its arguments, no shell. E.g.
    /// `--sensor 'status=cat status.txt'`.
    #[arg(long = "sensor", value_name = "NAME=COMMAND")]
    pub sensors: Vec<String>,
    /// OODA: the `--sensor` of this name is critical: its failure or timeout costs 0.3 of the
    /// observation confidence. Repeatable.
    #[arg(long = "sensor-critical", value_name = "NAME")]
    pub sensor_critical: Vec<String>,
    /// OODA: seconds a sensor may take per reading (an external sensor's command is killed
    /// then).
    #[arg(long, default_value_t = 2.0)]
    pub sensor_timeout: f64,
    /// OODA: run `--sensor` commands without the kernel sandbox (only a clean environment and
    /// the fixed PATH remain): only for workspaces you trust.
    #[arg(long)]
    pub unsandboxed_sensors: bool,
}

impl OodaOpts {
    /// The loop settings.
    pub fn config(&self, deadline_s: f64, workspace: Option<&Path>) -> anyhow::Result<OodaConfig> {
        if self.max_loops == 0 {
            anyhow::bail!("--max-loops must be at least 1");
        }
        if self.candidates == 0 {
            anyhow::bail!("--candidates must be at least 1");
        }
        if !(self.risk_budget.is_finite() && self.risk_budget >= 0.0) {
            anyhow::bail!("--risk-budget must be a number >= 0");
        }
        for (flag, v) in [
            ("--confidence-threshold", self.confidence_threshold),
            ("--contradiction-threshold", self.contradiction_threshold),
        ] {
            if !(0.0..=1.0).contains(&v) {
                anyhow::bail!("{flag} must be a number between 0 and 1");
            }
        }
        if !(self.sensor_timeout.is_finite() && self.sensor_timeout > 0.0) {
            anyhow::bail!("--sensor-timeout must be a positive number of seconds");
        }
        let policy = Policy::effective(self.policy.as_deref(), workspace)?;
        Ok(OodaConfig {
            max_loops: self.max_loops,
            candidates: self.candidates,
            risk_budget: self.risk_budget,
            confidence_threshold: self.confidence_threshold,
            contradiction_threshold: self.contradiction_threshold,
            deadline: Some(Duration::from_secs_f64(deadline_s)),
            sensor_timeout: Duration::from_secs_f64(self.sensor_timeout),
            policy,
            ..OodaConfig::default()
        })
    }

    /// The external sensors of `--sensor` (checked now: the name, the command, the program and
    /// the sandbox), each under `timeout`.
    pub fn external_sensors(
        &self,
        workspace: Option<&Sandbox>,
        timeout: Duration,
    ) -> Result<Vec<Arc<dyn Sensor>>, SensorSpecError> {
        let specs = SensorSpec::parse_all(&self.sensors, &self.sensor_critical)?;
        if specs.is_empty() {
            return Ok(Vec::new());
        }
        let ws = workspace.ok_or(SensorSpecError::NoWorkspace)?;
        specs
            .iter()
            .map(|s| {
                CommandSensor::new(s, ws, timeout, !self.unsandboxed_sensors)
                    .map(|c| Arc::new(c) as Arc<dyn Sensor>)
            })
            .collect()
    }

    /// How the model orients and decides: 1.5 × `step_tokens` per proposal (at least 64; a
    /// proposal holds up to three candidates, and one whose first candidate the limit cuts is
    /// unusable), with or without the output constraint; `answer` says whether code may answer
    /// in the model's place.
    pub fn phase_options(
        &self,
        step_tokens: usize,
        constrained: bool,
        answer: AnswerMode,
    ) -> PhaseOptions {
        PhaseOptions {
            orient: match self.orient {
                OrientArg::Model => OrientMode::Model,
                OrientArg::Rules => OrientMode::Rules,
            },
            decide_tokens: (step_tokens + step_tokens / 2).max(64),
            constrained,
            answer_checks: answer.checks(),
            ..PhaseOptions::default()
        }
    }
}

/// Print the effective policy at run start (stderr, so `--json` output stays one document):
/// where it came from, what the workspace tightened and what of it was refused. Returns the
/// report for the `--json` output.
pub fn announce_policy(config: &OodaConfig, tools: &Toolset) -> PolicyReport {
    let r = config.policy.report(
        tools,
        &Baseline {
            risk_budget: config.risk_budget,
            confidence_threshold: config.confidence_threshold,
            contradiction_threshold: config.contradiction_threshold,
        },
    );
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "policy: {}", r.source);
    if let Some(f) = &r.workspace_file {
        let _ = writeln!(
            err,
            "policy: workspace file {} (may only tighten)",
            f.display()
        );
    }
    for t in &r.tightened {
        let _ = writeln!(err, "policy: tightened by the workspace: {t}");
    }
    for t in &r.refused {
        let _ = writeln!(err, "policy: REFUSED from the workspace: {t}");
    }
    let tiers: Vec<String> = r
        .tiers
        .iter()
        .map(|(n, t)| format!("{n}={}", t.as_str()))
        .collect();
    let _ = writeln!(err, "policy: effective tiers: {}", tiers.join(", "));
    r
}

/// `outcome` as JSON with the run-start policy report added under `policy`.
pub fn outcome_json(outcome: &OodaOutcome, policy: &PolicyReport) -> anyhow::Result<String> {
    let mut v = serde_json::to_value(outcome)?;
    if let Some(o) = v.as_object_mut() {
        o.insert("policy".into(), serde_json::to_value(policy)?);
    }
    Ok(serde_json::to_string_pretty(&v)?)
}

/// The OODA tool set: the built-ins, plus the irreversible writers when there is a workspace.
pub fn ooda_tools(shell: Option<ShellPolicy>, workspace: Option<&Sandbox>) -> Toolset {
    let mut t = Toolset::builtin(shell).for_workspace(workspace.is_some());
    if workspace.is_some() {
        t.add(std::sync::Arc::new(WriteFile));
        t.add(std::sync::Arc::new(DeleteFile));
    }
    t
}

/// The approval key, if the config directory is usable (a warning otherwise).
pub fn approval_key() -> Option<ApprovalKey> {
    match ApprovalKey::load_default() {
        Ok(k) => Some(k),
        Err(e) => {
            tracing::warn!("approval key unavailable: {e:#}");
            None
        }
    }
}

/// A current-thread tokio runtime for the loop.
pub fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")
}

/// Print one phase event readably.
pub fn print_event(ev: &OodaEvent<'_>) {
    let text = match ev {
        OodaEvent::Started {
            run_id,
            task,
            tiers,
            budget,
            resumed,
            ..
        } => {
            let t: Vec<String> = tiers.iter().map(|(n, t)| format!("{n}={}", t.as_str())).collect();
            Some(format!(
                "{}task: {task}\nrun:  {run_id}\ntiers: {}\nrisk budget: {budget:.1}",
                if *resumed { "(resumed)\n" } else { "" },
                t.join(", ")
            ))
        }
        OodaEvent::Observed { observation: o } => {
            let sig: Vec<String> = o
                .signals
                .iter()
                .filter(|s| s.key != "last_action.output")
                .map(|s| format!("{}={}", s.key, clip(&s.value, 40)))
                .collect();
            let mut line = format!(
                "\n── cycle {}\nobserve  confidence {:.2} · {}",
                o.cycle,
                o.confidence,
                sig.join(" · ")
            );
            for f in &o.failed {
                line.push_str(&format!(
                    "\n         ✗ sensor {}{} {}",
                    f.sensor,
                    if f.critical { " (critical)" } else { "" },
                    f.reason
                ));
            }
            Some(line)
        }
        OodaEvent::Oriented { report, world, .. } => {
            let mut line = format!(
                "orient   {} new, {} updated, {} from memory, {} contradiction(s) · confidence {:.2}",
                report.added.len(),
                report.updated.len(),
                report.retrieved.len(),
                report.contradictions.len(),
                world.confidence
            );
            for f in report.added.iter().chain(&report.retrieved) {
                line.push_str(&format!(
                    "\n         + {} = {} ({:.2}, {})",
                    clip(&f.key, 60),
                    clip(&f.value, 60),
                    f.confidence,
                    f.source
                ));
            }
            for c in &report.contradictions {
                line.push_str(&format!(
                    "\n         ! {} {} contradiction on {}: {:?} → {:?}",
                    c.severity.as_str(),
                    c.kind.as_str(),
                    clip(&c.key, 60),
                    clip(&c.old.value, 40),
                    clip(&c.new.value, 40)
                ));
            }
            for r in &report.recalled {
                line.push_str(&format!(
                    "\n         ~ earlier outcome: {} -> {} (run {})",
                    clip(&r.action, 60),
                    clip(&r.result, 60),
                    r.run
                ));
            }
            for e in &report.extraction_errors {
                line.push_str(&format!("\n         (fact extraction unusable: {})", clip(e, 80)));
            }
            Some(line)
        }
        OodaEvent::Compressed {
            steps,
            tokens_before,
            tokens_after,
        } => Some(format!(
            "orient   compressed: {steps} older steps summarized ({tokens_before} → {tokens_after} tokens)"
        )),
        OodaEvent::Decided { record } => {
            let how = match (&record.guidance, record.implicit) {
                (Some(g), true) => format!("implicit ({g}), no model call"),
                (Some(g), false) => g.clone(),
                (None, _) => format!("{} candidate(s) from the model", record.candidates.len()),
            };
            let mut line = format!("decide   {how}");
            if let Some(e) = &record.parse_error {
                line.push_str(&format!("\n         (model output unusable: {})", clip(e, 100)));
            }
            for (i, a) in record.candidates.iter().enumerate() {
                let mark = if record.chosen == Some(i) { "→" } else { " " };
                let verdict = match &a.dropped {
                    Some(r) => format!("dropped: {}", r.describe()),
                    None if record.chosen == Some(i) => "chosen".into(),
                    None => "viable".into(),
                };
                line.push_str(&format!(
                    "\n       {mark} {} {} · tier {} · cost {:.1} · risk {:.2} · confidence {:.2} · ev {:.2} · {verdict}",
                    a.tool,
                    clip(&canonical_json(&a.args), 70),
                    a.tier.as_str(),
                    a.cost,
                    a.risk,
                    a.decision_confidence,
                    a.expected_value
                ));
            }
            Some(line)
        }
        OodaEvent::Acted { report: r } => {
            let status = match r.status {
                OutcomeStatus::Verified => "verified",
                OutcomeStatus::Unverified => "unverified",
                OutcomeStatus::Failed => "failed",
                OutcomeStatus::TimedOut => "timed out",
            };
            let mut line = format!(
                "act      {} {} → {status} (cost {:.2}, {:.2} s): {}",
                r.tool,
                clip(&canonical_json(&r.args), 60),
                r.cost,
                r.elapsed_s,
                clip(&r.output, 120)
            );
            for d in &r.discrepancies {
                line.push_str(&format!("\n         discrepancy: {d}"));
            }
            Some(line)
        }
        OodaEvent::Hypothesis { hypothesis: h } => Some(format!(
            "hypothesis {}: {}{}",
            h.status.as_str(),
            clip(&h.statement, 160),
            h.evidence
                .as_deref()
                .map(|e| format!(" — {}", clip(e, 120)))
                .unwrap_or_default()
        )),
        OodaEvent::Finished { .. } => None,
    };
    if let Some(text) = text {
        // What tools, files and the model wrote is in it: shown with its controls escaped.
        let _ = writeln!(std::io::stdout().lock(), "{}", safe(&text));
    }
}

/// Print the end of a run: state, answer, how to continue, counters.
pub fn print_outcome(o: &OodaOutcome) {
    println!();
    println!("state: {}", o.state);
    if let Some(a) = &o.answer {
        println!("Answer: {}", safe(a));
    }
    if let Some(by) = o.answer_by {
        println!("answer by: {}", by.as_str());
    }
    if let Some(d) = &o.detail {
        println!("detail: {}", safe(d));
    }
    if let (Some(fp), Some(act)) = (&o.pending_fingerprint, &o.pending_action) {
        println!("pending: {}", safe(act));
        println!(
            "to approve it: boyd approve {} {fp} --ttl 15m   then: boyd resume {} --approve <TOKEN>",
            o.run_id, o.run_id
        );
    } else if !matches!(o.state, OodaState::Completed) {
        println!("to continue: boyd resume {}", o.run_id);
    }
    let c = &o.counters;
    println!(
        "{} cycle(s) · {} decide call(s) · {} implicit · {} orient call(s) · {} action(s) · {} refused · {} contradiction(s) · budget left {:.1} · prompt {} tokens ({} prefilled, {} reused) · {} generated · {:.1} s · run {}",
        c.cycles,
        c.decide_calls,
        c.implicit,
        c.orient_calls,
        c.actions,
        c.refused,
        c.contradictions,
        o.budget_left,
        c.usage.prompt_tokens,
        c.usage.prefilled_tokens,
        c.usage.reused_tokens,
        c.usage.generated_tokens,
        o.elapsed_s,
        o.run_id
    );
}

/// Exit code of an OODA run.
pub fn exit_code(state: OodaState) -> std::process::ExitCode {
    match state {
        OodaState::Completed => std::process::ExitCode::SUCCESS,
        OodaState::Cancelled => std::process::ExitCode::from(130),
        _ => std::process::ExitCode::from(2),
    }
}
