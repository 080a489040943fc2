//! `boyd eval SUITE.jsonl [--loop react]`: run an agent task suite and report pass/fail.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use super::cancel_on_ctrl_c;
use super::run::{print_event, AgentOpts};
use super::GlobalOpts;
use crate::agent::eval::{load_suite, run_task, EvalOptions, EvalReport};
use crate::agent::planner::LmPlanner;
use crate::agent::react::AgentEvent;
use crate::agent::rundir::boyd_home;
use crate::lm::CancelToken;

/// Arguments of `boyd eval`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The suite: JSONL, one task per line (see evals/basic.jsonl).
    pub suite: PathBuf,
    /// Run only tasks whose id contains this text.
    #[arg(long)]
    pub filter: Option<String>,
    /// Stream every step of every task.
    #[arg(long)]
    pub trace: bool,
    /// Tasks run at once (needs --backend openai; the in-process model takes one at a time).
    #[arg(long, default_value_t = 1)]
    pub concurrency: usize,
    /// Loop options.
    #[command(flatten)]
    pub agent: AgentOpts,
    /// OODA options (with `--loop ooda`).
    #[command(flatten)]
    pub ooda: super::ooda::OodaOpts,
}

/// Run `boyd eval`.
pub fn run(args: Args, g: &GlobalOpts) -> anyhow::Result<ExitCode> {
    let limits = args.agent.limits()?;
    let mut tasks = load_suite(&args.suite)?;
    if let Some(f) = &args.filter {
        tasks.retain(|t| t.id.contains(f.as_str()));
        if tasks.is_empty() {
            anyhow::bail!("no task id in {} contains {f:?}", args.suite.display());
        }
    }
    if args.agent.loop_kind == super::run::LoopKind::Ooda {
        return run_ooda(&args, g, tasks);
    }
    args.agent.require_react()?;
    if args.concurrency != 1 {
        return super::eval_concurrent::run(&args, g, tasks, limits);
    }
    let home = boyd_home()?;
    let mut model = args.agent.backend.load_agent_model(g)?;
    let planner_name = model.name();
    let cancel = CancelToken::new();
    cancel_on_ctrl_c(&cancel);
    let opts = EvalOptions { limits, home };
    let start = Instant::now();
    let mut results = Vec::new();
    if !g.json {
        println!(
            "{:<22} {:<6} {:<17} {:>5} {:>8} {:>8} {:>6} {:>6} {:>6} {:>7}  ANSWER",
            "TASK",
            "RESULT",
            "STOP",
            "STEPS",
            "PREFILL",
            "REUSED",
            "GEN",
            "FORCED",
            "PASSES",
            "TIME"
        );
    }
    for task in &tasks {
        if cancel.is_cancelled() {
            break;
        }
        let mut planner = LmPlanner::new(model.as_mut(), args.agent.planner_config());
        let trace = args.trace && !g.json;
        let mut on_event = |ev: &AgentEvent<'_>| {
            if trace {
                print_event(ev);
            }
        };
        let r = run_task(task, &mut planner, &opts, &cancel, &mut on_event)?;
        if !g.json {
            let answer = super::answer_cell(r.answer.as_deref());
            println!(
                "{:<22} {:<6} {:<17} {:>5} {:>8} {:>8} {:>6} {:>6} {:>6} {:>6.1}s  {}",
                r.id,
                if r.passed { "pass" } else { "FAIL" },
                r.stop.as_str(),
                r.steps,
                r.prefilled_tokens,
                r.reused_tokens,
                r.generated_tokens,
                r.forced_tokens,
                r.decode_passes,
                r.elapsed_s,
                answer
            );
        }
        results.push(r);
    }
    let report = EvalReport::new(
        args.suite.clone(),
        planner_name,
        results,
        start.elapsed().as_secs_f64(),
    );
    if g.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_summary(&report, "react");
    }
    Ok(if report.passed == report.total {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(2)
    })
}

/// `boyd eval --loop ooda`: the same table, from the OODA loop, plus irreversible actions that
/// ran without a token (always 0 unless something is badly wrong; such a task fails).
fn run_ooda(
    args: &Args,
    g: &GlobalOpts,
    tasks: Vec<crate::agent::eval::EvalTask>,
) -> anyhow::Result<ExitCode> {
    use super::ooda as o;
    use crate::agent::ooda::eval::{run_task as run_ooda_task, OodaEvalOptions};
    use crate::agent::ooda::{OodaBuilder, OodaEvent};

    if !args.ooda.sensors.is_empty() {
        anyhow::bail!(
            "--sensor is for `boyd run --loop ooda` and `boyd resume`: each eval task has its own workspace"
        );
    }
    let mut config = args.ooda.config(args.agent.timeout, None)?;
    config.narrow = !args.agent.no_narrow;
    config.overview = !args.agent.no_overview;
    config.answer = args.agent.answer.into();
    let home = boyd_home()?;
    let mut model = args.agent.backend.load_agent_model(g)?;
    let planner_name = model.name();
    let cancel = CancelToken::new();
    cancel_on_ctrl_c(&cancel);
    let constrained = args.agent.constraint != super::run::ConstraintArg::None;
    let builder = OodaBuilder::new(config.clone()).phase_options(args.ooda.phase_options(
        args.agent.step_tokens,
        constrained,
        args.agent.answer.into(),
    ));
    let mut phases = builder.model_phases(model.as_mut());
    let opts = OodaEvalOptions {
        config,
        home,
        approval_key: o::approval_key(),
    };
    let rt = o::runtime()?;
    let start = Instant::now();
    let mut results = Vec::new();
    if !g.json {
        println!(
            "{:<22} {:<6} {:<18} {:>6} {:>6} {:>5} {:>8} {:>6} {:>7}  ANSWER",
            "TASK", "RESULT", "STATE", "CYCLES", "DECIDE", "IRREV", "PREFILL", "GEN", "TIME"
        );
    }
    let mut details = Vec::new();
    for task in &tasks {
        if cancel.is_cancelled() {
            break;
        }
        let trace = args.trace && !g.json;
        let mut on_event = |ev: &OodaEvent<'_>| {
            if trace {
                o::print_event(ev);
            }
        };
        let r = rt.block_on(run_ooda_task(
            task,
            &mut phases,
            &opts,
            &cancel,
            &mut on_event,
        ))?;
        if !g.json {
            let answer = super::answer_cell(r.result.answer.as_deref());
            println!(
                "{:<22} {:<6} {:<18} {:>6} {:>6} {:>5} {:>8} {:>6} {:>6.1}s  {}",
                r.result.id,
                if r.result.passed { "pass" } else { "FAIL" },
                r.outcome.state.as_str(),
                r.outcome.counters.cycles,
                r.outcome.counters.decide_calls,
                r.unapproved_irreversible,
                r.result.prefilled_tokens,
                r.result.generated_tokens,
                r.result.elapsed_s,
                answer
            );
        }
        details.push(serde_json::json!({
            "id": r.result.id,
            "state": r.outcome.state,
            "counters": r.outcome.counters,
            "detail": r.outcome.detail,
            "unapproved_irreversible": r.unapproved_irreversible,
        }));
        results.push(r.result);
    }
    let report = EvalReport::new(
        args.suite.clone(),
        planner_name,
        results,
        start.elapsed().as_secs_f64(),
    );
    if g.json {
        let mut v = serde_json::to_value(&report)?;
        v["loop"] = serde_json::json!("ooda");
        v["ooda"] = serde_json::Value::Array(details);
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        print_summary(&report, "ooda");
    }
    Ok(if report.passed == report.total {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(2)
    })
}

/// The totals, then one row per category (pass rate and tasks with a forbidden or unapproved
/// irreversible call).
fn print_summary(report: &EvalReport, loop_name: &str) {
    println!(
        "\n{}/{} passed ({:.0} %) · {} parse failures · {} unsafe · planner {} · loop {loop_name} · {:.1} s",
        report.passed,
        report.total,
        report.success_rate * 100.0,
        report.parse_failures,
        report.unsafe_tasks,
        report.planner,
        report.elapsed_s
    );
    let generated: usize = report.results.iter().map(|r| r.generated_tokens).sum();
    let forced: usize = report.results.iter().map(|r| r.forced_tokens).sum();
    let passes: usize = report.results.iter().map(|r| r.decode_passes).sum();
    if generated > 0 {
        println!(
            "{generated} tokens generated, {forced} forced by the constraint, {passes} decode passes ({:.0} % of generated)",
            100.0 * passes as f64 / generated as f64
        );
    }
    let (a, p) = (&report.answers_by, &report.passed_by);
    println!(
        "answers by the model {} (passed {}) · by a program the model wrote {} (passed {}) · by code {} (passed {})",
        a.model, p.model, a.program, p.program, a.code, p.code
    );
    if report.categories.len() > 1 {
        println!(
            "\n{:<16} {:>6} {:>6} {:>6} {:>7}",
            "CATEGORY", "PASSED", "RATE", "UNSAFE", "BY CODE"
        );
        for c in &report.categories {
            println!(
                "{:<16} {:>3}/{:<2} {:>5.0}% {:>6} {:>7}",
                c.category,
                c.passed,
                c.total,
                100.0 * c.passed as f64 / c.total.max(1) as f64,
                c.unsafe_tasks,
                c.passed_by_code
            );
        }
    }
}
