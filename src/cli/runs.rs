//! `boyd runs list | show RUN`: past agent runs under `$BOYD_HOME/runs`.

use super::clip;
use super::term::safe;
use std::process::ExitCode;

use clap::Subcommand;

use super::GlobalOpts;
use crate::agent::approval::{config_dir, ApprovalKey, KEY_FILE};
use crate::agent::audit::{
    read_events, verify_with_key, AuditEvent, RecordMacs, SignatureCheck, AUDIT_FILE,
};
use crate::agent::guard::canonical_json;
use crate::agent::ooda::hypothesis::Hypothesis;
use crate::agent::ooda::intent::{IntentWhy, WORLDS_DIR};
use crate::agent::rundir::{boyd_home, find_run, list_runs, read_transcript, Record};
use crate::agent::types::Action;
use std::collections::BTreeMap;
use std::path::Path;

/// Arguments of `boyd runs`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// What to do.
    #[command(subcommand)]
    pub command: RunsCommand,
}

/// `boyd runs` subcommands.
#[derive(Debug, Subcommand)]
pub enum RunsCommand {
    /// List runs, newest first: id, stop reason, steps, answer, task.
    List {
        /// Show at most this many.
        #[arg(long, default_value_t = 20)]
        limit: usize,
    },
    /// Show one run's transcript (id, unique id prefix, or `latest`).
    Show {
        /// The run.
        run: String,
    },
}

/// Run `boyd runs ...`.
pub fn run(args: Args, g: &GlobalOpts) -> anyhow::Result<ExitCode> {
    let home = boyd_home()?;
    match args.command {
        RunsCommand::List { limit } => {
            let runs: Vec<_> = list_runs(&home)?.into_iter().take(limit).collect();
            if g.json {
                println!("{}", serde_json::to_string_pretty(&runs)?);
                return Ok(ExitCode::SUCCESS);
            }
            if runs.is_empty() {
                println!("no runs in {}", home.join("runs").display());
                return Ok(ExitCode::SUCCESS);
            }
            println!(
                "{:<24} {:<17} {:>5}  {:<20} TASK",
                "RUN", "STOP", "STEPS", "ANSWER"
            );
            for r in runs {
                let (stop, steps, answer) = match &r.outcome {
                    Some(o) => (
                        o.stop.to_string(),
                        o.steps.to_string(),
                        o.answer.clone().unwrap_or_else(|| "-".into()),
                    ),
                    None => ("incomplete".into(), "?".into(), "-".into()),
                };
                println!(
                    "{:<24} {:<17} {:>5}  {:<20} {}",
                    r.id,
                    stop,
                    steps,
                    safe(&clip(&answer, 20)),
                    safe(&clip(r.task.as_deref().unwrap_or("?"), 60))
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        RunsCommand::Show { run } => {
            let r = find_run(&home, &run)?;
            let records = read_transcript(&r.path.join("transcript.jsonl"))?;
            if g.json {
                println!("{}", serde_json::to_string_pretty(&records)?);
                return Ok(ExitCode::SUCCESS);
            }
            println!(
                "run:  {}\ndir:  {}",
                r.id,
                safe(&r.path.display().to_string())
            );
            let whys = intent_whys(&r.path);
            for rec in records {
                match rec {
                    Record::Start {
                        task,
                        planner,
                        tools,
                        workspace,
                        started_at,
                        ..
                    } => {
                        println!(
                            "task: {}\nplanner: {}  started: {}",
                            safe(&task),
                            safe(&planner),
                            safe(&started_at)
                        );
                        println!("tools: {}", safe(&tools.join(", ")));
                        if let Some(w) = workspace {
                            println!("workspace: {}", safe(&w.display().to_string()));
                        }
                    }
                    Record::Step(s) => {
                        let action = match &s.action {
                            Some(Action::ToolCall { name, args }) => format!("{name} {args}"),
                            Some(Action::Final { answer }) => format!("final_answer {answer:?}"),
                            None => format!("(unparseable) {}", clip(&s.raw, 200)),
                        };
                        println!(
                            "\n[{}] Thought: {}\n    Action: {}\n    Observation: {}",
                            s.index,
                            safe(&clip(&s.thought, 300)),
                            safe(&clip(&action, 300)),
                            safe(
                                &s.observation
                                    .text
                                    .lines()
                                    .take(12)
                                    .collect::<Vec<_>>()
                                    .join("\n      ")
                            )
                        );
                        println!(
                            "    ({:.2} s; prompt {} tokens: {} prefilled, {} reused; {} generated, {} forced, {} decode passes)",
                            s.timings.total_s,
                            s.usage.prompt_tokens,
                            s.usage.prefilled_tokens,
                            s.usage.reused_tokens,
                            s.usage.generated_tokens,
                            s.usage.forced_tokens,
                            s.usage.decode_passes
                        );
                    }
                    Record::Collapse {
                        steps,
                        tokens_before,
                        tokens_after,
                        context,
                    } => println!(
                        "\n(collapsed observations of steps {steps:?}: ~{tokens_before} -> ~{tokens_after} tokens of {context})"
                    ),
                    Record::End(o) => {
                        println!();
                        if let Some(a) = &o.answer {
                            println!("Answer: {}", safe(a));
                        }
                        println!("{}", safe(&super::run::summary_line(&o)));
                    }
                }
            }
            let hypotheses = crate::agent::ooda::load_snapshot(&r.path)
                .map(|snap| snap.world.hypotheses)
                .unwrap_or_default();
            print_whys(&whys, &hypotheses);
            print_audit(&r.path);
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// Why each action of an OODA run ran, by action id, from its audit log's intent records
/// (empty for a ReAct run, whose intent records carry no why).
fn intent_whys(run_dir: &Path) -> BTreeMap<u64, (String, IntentWhy)> {
    read_events(run_dir)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|r| match r.event {
            AuditEvent::Intent {
                action_id,
                tool,
                why: Some(why),
                ..
            } => Some((action_id, (tool, *why))),
            _ => None,
        })
        .collect()
}

/// Why each action ran, after the transcript (an OODA run's intent records).
fn print_whys(whys: &BTreeMap<u64, (String, IntentWhy)>, hypotheses: &[Hypothesis]) {
    if whys.is_empty() {
        return;
    }
    println!("\nWhy each action ran:");
    for (id, (tool, why)) in whys {
        println!(
            "  [{id}] {}: {}",
            safe(tool),
            safe(&clip(&why.reasoning, 600))
        );
        println!(
            "      world model: {WORLDS_DIR}/{}.json",
            safe(&why.world_sha256)
        );
        if let Some(h) = hypotheses.iter().find(|h| h.action_id == Some(*id)) {
            println!(
                "      hypothesis: {} — {}{}",
                safe(&clip(&h.statement, 200)),
                h.status.as_str(),
                safe(
                    &h.evidence
                        .as_deref()
                        .map(|e| format!(" ({})", clip(e, 160)))
                        .unwrap_or_default()
                )
            );
        }
        for a in &why.alternatives {
            println!(
                "      not chosen: {} {} ({})",
                safe(&a.tool),
                safe(&clip(&canonical_json(&a.args), 120)),
                safe(&a.why_not)
            );
        }
    }
}

/// The actions in the run's audit log, when it has one (every OODA run; a ReAct run that called
/// a tool with side effects, such as the shell): each intent with how it ended, and whether the
/// chain verifies, under this machine's approval key when there is one (never created here).
fn print_audit(run_dir: &Path) {
    if !run_dir.join(AUDIT_FILE).exists() {
        return;
    }
    let events = read_events(run_dir).unwrap_or_default();
    let key = config_dir()
        .ok()
        .filter(|d| d.join(KEY_FILE).is_file())
        .and_then(|d| ApprovalKey::load_or_create(&d).ok());
    let verdict = match verify_with_key(run_dir, key.as_ref()) {
        Ok(r) => {
            let signed = match (key.is_some(), r.signature, r.record_macs) {
                (false, _, _) => "not checked for a signature: no approval key here",
                (true, SignatureCheck::Valid, RecordMacs::Signed) => "signed by this key",
                (true, SignatureCheck::Valid, _) => {
                    "legacy: the records are unsigned, the manifest is signed by this key"
                }
                (true, _, _) => "NOT WRITTEN BY THIS KEY",
            };
            match (&r.problem, r.unknown_intents.len()) {
                (Some(p), _) => format!("DAMAGED at {p}"),
                (None, 0) => format!("chain intact, {signed}"),
                (None, n) => format!("chain intact, {signed}; {n} action(s) with no outcome"),
            }
        }
        Err(e) => format!("cannot verify: {e}"),
    };
    println!("\nAudit log ({AUDIT_FILE}, {}):", safe(&verdict));
    for r in &events {
        if let AuditEvent::Intent {
            action_id,
            tool,
            args,
            ..
        } = &r.event
        {
            let status = events.iter().find_map(|o| match &o.event {
                AuditEvent::Outcome {
                    action_id: id,
                    status,
                    ..
                } if id == action_id => serde_json::to_value(status)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_owned)),
                _ => None,
            });
            println!(
                "  [{action_id}] {} {} -> {}",
                safe(tool),
                safe(&clip(&canonical_json(args), 120)),
                safe(status.as_deref().unwrap_or("no outcome"))
            );
        }
    }
}
