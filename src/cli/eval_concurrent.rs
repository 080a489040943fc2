//! `boyd eval --concurrency N`: the suite against a remote backend, N tasks in flight, with a
//! progress bar on stderr and one result line per task as it finishes.

use std::process::ExitCode;
use std::time::Instant;

use super::backend::BackendKind;
use super::eval::Args;
use super::GlobalOpts;
use crate::agent::eval::{EvalOptions, EvalReport, EvalTask};
use crate::agent::eval_concurrent::run_concurrent;
use crate::agent::react::Limits;
use crate::agent::rundir::boyd_home;
use crate::lm::{CancelToken, LanguageModel};

/// Run the suite with `args.concurrency` tasks in flight.
pub fn run(
    args: &Args,
    g: &GlobalOpts,
    tasks: Vec<EvalTask>,
    limits: Limits,
) -> anyhow::Result<ExitCode> {
    if args.concurrency == 0 {
        anyhow::bail!("--concurrency must be at least 1");
    }
    if args.agent.backend.backend != BackendKind::Openai {
        anyhow::bail!(
            "--concurrency {} needs --backend openai: the in-process model serves one request at a time (drop --concurrency, or serve the model with `boyd serve` / vLLM / llama-server and point --base-url at it)",
            args.concurrency
        );
    }
    if args.trace {
        anyhow::bail!("--trace streams one task at a time; drop it with --concurrency");
    }
    let model = args.agent.backend.connect_remote(g)?;
    let planner_name = model.name();
    let home = boyd_home()?;
    let cancel = CancelToken::new();
    super::cancel_on_ctrl_c(&cancel);
    let opts = EvalOptions { limits, home };
    let bar = indicatif::ProgressBar::new(tasks.len() as u64);
    bar.set_style(
        indicatif::ProgressStyle::with_template("{bar:30} {pos}/{len} tasks · {elapsed} · {msg}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    if g.json {
        bar.set_draw_target(indicatif::ProgressDrawTarget::hidden());
    }
    let passed = std::sync::atomic::AtomicUsize::new(0);
    let start = Instant::now();
    let json = g.json;
    let on_done = |task: &EvalTask, r: &Result<crate::agent::eval::TaskResult, _>| {
        let line = match r {
            Ok(r) => {
                if r.passed {
                    passed.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                }
                let answer = super::answer_cell(r.answer.as_deref());
                format!(
                    "{:<22} {:<6} {:<17} {:>5} {:>6} {:>6.1}s  {}",
                    r.id,
                    if r.passed { "pass" } else { "FAIL" },
                    r.stop.as_str(),
                    r.steps,
                    r.generated_tokens,
                    r.elapsed_s,
                    answer
                )
            }
            Err(e) => format!("{:<22} ERROR  {e}", task.id),
        };
        if !json {
            bar.println(line);
        }
        bar.inc(1);
        bar.set_message(format!(
            "{} passed",
            passed.load(std::sync::atomic::Ordering::SeqCst)
        ));
    };
    if !json {
        println!(
            "{:<22} {:<6} {:<17} {:>5} {:>6} {:>7}  ANSWER   ({} in flight against {planner_name})",
            "TASK", "RESULT", "STOP", "STEPS", "GEN", "TIME", args.concurrency
        );
    }
    let results = run_concurrent(
        &tasks,
        args.concurrency,
        |_| model.clone(),
        &args.agent.planner_config(),
        &opts,
        &cancel,
        &on_done,
    );
    bar.finish_and_clear();
    let mut done = Vec::new();
    for r in results.into_iter().flatten() {
        done.push(r?);
    }
    let report = EvalReport::new(
        args.suite.clone(),
        planner_name,
        done,
        start.elapsed().as_secs_f64(),
    );
    if g.json {
        let mut v = serde_json::to_value(&report)?;
        v["concurrency"] = serde_json::json!(args.concurrency);
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        println!(
            "\n{}/{} passed ({:.0} %) · {} parse failures · planner {} · {} in flight · {:.1} s",
            report.passed,
            report.total,
            report.success_rate * 100.0,
            report.parse_failures,
            report.planner,
            args.concurrency,
            report.elapsed_s
        );
    }
    Ok(
        if report.passed == report.total && report.total == tasks.len() {
            ExitCode::SUCCESS
        } else {
            ExitCode::from(2)
        },
    )
}
