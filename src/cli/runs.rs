//! `boyd runs list | show RUN`: past agent runs under `$BOYD_HOME/runs`.

use super::clip;
use std::process::ExitCode;

use clap::Subcommand;

use super::GlobalOpts;
use crate::agent::rundir::{boyd_home, find_run, list_runs, read_transcript, Record};
use crate::agent::types::Action;

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
                    clip(&answer, 20),
                    clip(r.task.as_deref().unwrap_or("?"), 60)
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
            println!("run:  {}\ndir:  {}", r.id, r.path.display());
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
                        println!("task: {task}\nplanner: {planner}  started: {started_at}");
                        println!("tools: {}", tools.join(", "));
                        if let Some(w) = workspace {
                            println!("workspace: {}", w.display());
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
                            clip(&s.thought, 300),
                            clip(&action, 300),
                            s.observation.text.lines().take(12).collect::<Vec<_>>().join("\n      ")
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
                            println!("Answer: {a}");
                        }
                        println!("{}", super::run::summary_line(&o));
                    }
                }
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}
