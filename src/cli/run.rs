//! `boyd run --loop react "task"`: run an agent loop with the in-process model and stream it.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;
use clap::ValueEnum;

use super::term::safe;
use super::GlobalOpts;
use crate::agent::answer::AnswerMode;
use crate::agent::planner::{ConstraintMode, LmPlanner, LmPlannerConfig};
use crate::agent::react::{self, AgentEvent, Limits};
use crate::agent::rundir::{boyd_home, RunDir};
use crate::agent::tools::shell::SandboxMode;
use crate::agent::tools::{Jail, Sandbox, ShellPolicy, Toolset};
use crate::agent::types::{Action, ObservationKind, RunOutcome, StopReason};
use crate::lm::{CancelToken, LanguageModel};

/// The catalog name of the agent's default model (used when `--model` is not given).
pub const DEFAULT_AGENT_MODEL: &str = crate::catalog::AGENT_DEFAULT_MODEL;

/// Which agent loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LoopKind {
    /// Thought → Action → Observation.
    React,
    /// Observe → Orient → Decide → Act with a persistent world model, risk gate and audit log.
    Ooda,
}

/// Which output constraint the planner uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ConstraintArg {
    /// A JSON schema with one branch per tool.
    JsonSchema,
    /// A Lark grammar with the exact key order.
    Lark,
    /// No constraint (tolerant parsing only).
    None,
}

/// `--answer` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum AnswerArg {
    /// A focused request over the tool outputs writes the answer; checks may send it back once.
    Observations,
    /// The planner's final_answer argument is the answer.
    Planner,
    /// The focused request over the tool outputs, its first answer kept: no check sends it
    /// back.
    Model,
}

impl From<AnswerArg> for AnswerMode {
    fn from(a: AnswerArg) -> Self {
        match a {
            AnswerArg::Observations => AnswerMode::Observations,
            AnswerArg::Planner => AnswerMode::Planner,
            AnswerArg::Model => AnswerMode::Model,
        }
    }
}

impl From<ConstraintArg> for ConstraintMode {
    fn from(c: ConstraintArg) -> Self {
        match c {
            ConstraintArg::JsonSchema => ConstraintMode::JsonSchema,
            ConstraintArg::Lark => ConstraintMode::Lark,
            ConstraintArg::None => ConstraintMode::None,
        }
    }
}

/// Options shared by `boyd run` and `boyd eval`.
#[derive(Debug, Clone, clap::Args)]
pub struct AgentOpts {
    /// The agent loop.
    #[arg(long = "loop", value_enum, default_value = "react")]
    pub loop_kind: LoopKind,
    /// Most steps per task.
    #[arg(long, default_value_t = 12)]
    pub max_steps: usize,
    /// Wall-clock budget per task, in seconds.
    #[arg(long, default_value_t = 600.0)]
    pub timeout: f64,
    /// Most generated tokens per task (no limit by default).
    #[arg(long)]
    pub max_tokens: Option<usize>,
    /// Most tokens the model may generate per step (an OODA proposal, up to three candidates,
    /// gets 1.5 times this).
    #[arg(long, default_value_t = 256)]
    pub step_tokens: usize,
    /// Output constraint for the model's actions.
    #[arg(long, value_enum, default_value = "json-schema")]
    pub constraint: ConstraintArg,
    /// Who writes the final answer: `observations` (a short request over the tool outputs, run
    /// when the planner answers, repeats a call, or hits the step limit; an answer with a
    /// number no output holds is worked out by a program the model writes, and a partial copy
    /// of a tool's summary or a figure in an unasked unit is sent back once), `model` (the
    /// same request, its first answer kept) or `planner` (the planner's own final_answer
    /// argument, the plain ReAct loop).
    #[arg(long, value_enum, default_value = "observations")]
    pub answer: AnswerArg,
    /// Do not show the workspace's top-level listing under the task.
    #[arg(long)]
    pub no_overview: bool,
    /// Keep free-text path and query arguments (by default, in a workspace of at most 300
    /// paths, the file tools' paths are constrained to the paths there and the files the task
    /// names, and search_text's query to the task's words).
    #[arg(long)]
    pub free_paths: bool,
    /// Do not narrow the constraint step by step (by default an enum argument is narrowed to
    /// the values the task names, the paths the task names are touched first, and a file read,
    /// folder listed or preset described successfully is not offered again).
    #[arg(long)]
    pub no_narrow: bool,
    /// Where the model runs (in-process or an OpenAI-compatible server).
    #[command(flatten)]
    pub backend: super::backend::BackendOpts,
}

impl AgentOpts {
    /// The loop's limits.
    pub fn limits(&self) -> anyhow::Result<Limits> {
        if !(self.timeout.is_finite() && self.timeout > 0.0) {
            anyhow::bail!("--timeout must be a positive number of seconds");
        }
        if self.max_steps == 0 {
            anyhow::bail!("--max-steps must be at least 1");
        }
        Ok(Limits {
            max_steps: self.max_steps,
            wall_clock: Some(Duration::from_secs_f64(self.timeout)),
            max_generated_tokens: self.max_tokens,
            answer: self.answer.into(),
            show_workspace: !self.no_overview,
            typed_paths: !self.free_paths,
            narrow: !self.no_narrow,
            ..Limits::default()
        })
    }

    /// The planner's settings.
    pub fn planner_config(&self) -> LmPlannerConfig {
        LmPlannerConfig {
            max_tokens: self.step_tokens,
            constraint: self.constraint.into(),
            answer_checks: AnswerMode::from(self.answer).checks(),
            ..LmPlannerConfig::default()
        }
    }

    /// Refuse loops that are not available.
    pub fn require_react(&self) -> anyhow::Result<()> {
        match self.loop_kind {
            LoopKind::React => Ok(()),
            LoopKind::Ooda => anyhow::bail!("the OODA loop is not available yet; use --loop react"),
        }
    }
}

/// Arguments of `boyd run`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The task, in words.
    pub task: String,
    /// Workspace directory the file tools may read (default: none, so file tools refuse).
    #[arg(long)]
    pub workspace: Option<PathBuf>,
    /// Enable the shell tool (allow-listed programs only, run in the workspace inside a kernel
    /// sandbox: Landlock, no network, `.boyd/` hidden; needs Linux 5.13+ with Landlock and
    /// unprivileged user namespaces).
    #[arg(long)]
    pub enable_shell: bool,
    /// A program the shell tool may run, with the options it may take; repeat per program.
    /// Replaces the default allow-list. `PROGRAM` alone takes the built-in options of a
    /// built-in program and none for any other; `PROGRAM:OPT,OPT,...` lists them: `-x` or
    /// `--long` is a flag, `-x=` or `--long=` takes a value, `--long=?` an optional one.
    /// E.g. `--shell-allow 'wc:-l,-w,-c' --shell-allow 'head:-n='`; `cat,wc` (no `:`) lists
    /// programs. Unlisted options are refused; a program not built in is assumed to write, so
    /// the workspace becomes writable in the sandbox and the tool irreversible.
    #[arg(long, value_name = "PROGRAM[:OPTIONS]")]
    pub shell_allow: Vec<String>,
    /// Run the shell tool without the kernel sandbox (where the kernel lacks Landlock or user
    /// namespaces). Only the allow-list, a clean environment and a fixed PATH remain: use it
    /// only for workspaces you trust.
    #[arg(long)]
    pub unsandboxed_shell: bool,
    /// Loop options.
    #[command(flatten)]
    pub agent: AgentOpts,
    /// OODA options (with `--loop ooda`).
    #[command(flatten)]
    pub ooda: super::ooda::OodaOpts,
}

impl Args {
    /// The workspace (`--workspace`) and the shell tool's policy (`shell_policy`), both checked
    /// before the model loads.
    fn workspace_and_shell(&self) -> anyhow::Result<(Option<Sandbox>, Option<ShellPolicy>)> {
        let workspace = match &self.workspace {
            Some(dir) => {
                Some(Sandbox::new(dir).with_context(|| format!("--workspace {}", dir.display()))?)
            }
            None => None,
        };
        let shell = shell_policy(
            self.enable_shell,
            &self.shell_allow,
            self.unsandboxed_shell,
            workspace.as_ref(),
        )?;
        Ok((workspace, shell))
    }
}

/// The shell tool's policy from `--enable-shell`, `--shell-allow` and `--unsandboxed-shell`.
/// With the sandbox, the launcher is started once now in check mode, so that a kernel without
/// Landlock or user namespaces is reported before the model runs (a typed error that names the
/// requirement and `--unsandboxed-shell`).
pub fn shell_policy(
    enable: bool,
    allow: &[String],
    unsandboxed: bool,
    workspace: Option<&Sandbox>,
) -> anyhow::Result<Option<ShellPolicy>> {
    if !enable {
        if !allow.is_empty() || unsandboxed {
            anyhow::bail!("--shell-allow and --unsandboxed-shell need --enable-shell");
        }
        return Ok(None);
    }
    let mut policy = ShellPolicy::from_specs(allow)?;
    if unsandboxed {
        policy.sandbox = SandboxMode::Off;
        tracing::warn!(
            "--unsandboxed-shell: the shell tool runs without the kernel sandbox; only the \
             allow-list guards this workspace"
        );
    } else {
        match workspace {
            Some(ws) => Jail::new(ws.root(), policy.can_write())?.self_test()?,
            None => crate::agent::tools::jail::probe()?,
        }
    }
    Ok(Some(policy))
}

/// Load the model the agent plans with: `--model` or the agent default.
///
/// This is the seam to the in-process runtime: it must return the runtime's session (which
/// implements `LanguageModel`) for `g.model.unwrap_or(DEFAULT_AGENT_MODEL)` on `g.device`.
pub fn load_agent_model(g: &GlobalOpts) -> anyhow::Result<Box<dyn LanguageModel>> {
    let (model, resolved) =
        super::generate::load_model(g, crate::catalog::AGENT_DEFAULT_MODEL, Some(8192))?;
    tracing::info!(path = %resolved.path.display(), "agent model loaded");
    Ok(Box::new(model))
}

/// Print one event readably (for `run` and `eval --verbose`-style output).
pub fn print_event(ev: &AgentEvent<'_>) {
    let text = match ev {
        AgentEvent::Started { run_id, task, .. } => Some(format!("task: {task}\nrun:  {run_id}")),
        AgentEvent::Decided {
            index,
            thought,
            action,
        } => {
            let action = match action {
                Ok(Action::ToolCall { name, args }) => format!("{name} {args}"),
                Ok(Action::Final { answer }) => format!("final_answer {answer:?}"),
                Err(e) => format!("(unparseable: {e})"),
            };
            Some(format!(
                "\n[{index}] Thought: {}\n    Action: {}",
                super::clip(thought, 300),
                super::clip(&action, 300)
            ))
        }
        AgentEvent::Observed { step } => {
            if step.observation.kind == ObservationKind::Final {
                None
            } else {
                let label = match step.observation.kind {
                    ObservationKind::Output => "Observation",
                    ObservationKind::ToolError { .. } => "Error",
                    ObservationKind::Guard => "Guard",
                    ObservationKind::ParseError => "Parse error",
                    ObservationKind::Final => "Final",
                };
                let mut text: String = step
                    .observation
                    .text
                    .lines()
                    .take(8)
                    .collect::<Vec<_>>()
                    .join("\n      ");
                if step.observation.text.lines().count() > 8 {
                    text.push_str("\n      …");
                }
                Some(format!("    {label}: {text}"))
            }
        }
        AgentEvent::Collapsed { steps } => Some(format!(
            "    (context: collapsed the observations of steps {steps:?})"
        )),
        AgentEvent::Finished { .. } => None,
    };
    if let Some(text) = text {
        // What tools, files and the model wrote is in it: shown with its controls escaped.
        let _ = writeln!(std::io::stdout().lock(), "{}", safe(&text));
    }
}

/// The one-line summary of a run.
pub fn summary_line(o: &RunOutcome) -> String {
    let by = o
        .answer_by
        .map(|b| format!(" · answer by {}", b.as_str()))
        .unwrap_or_default();
    format!(
        "{}{by} · {} step{} · prompt {} tokens ({} prefilled, {} reused) · {} generated · {:.1} s · run {}",
        o.stop,
        o.steps,
        if o.steps == 1 { "" } else { "s" },
        o.usage.prompt_tokens,
        o.usage.prefilled_tokens,
        o.usage.reused_tokens,
        o.usage.generated_tokens,
        o.elapsed_s,
        o.run_id
    )
}

/// Run `boyd run`.
pub fn run(args: Args, g: &GlobalOpts) -> anyhow::Result<ExitCode> {
    if args.agent.loop_kind == LoopKind::Ooda {
        return run_ooda(args, g);
    }
    args.agent.require_react()?;
    let limits = args.agent.limits()?;
    let (workspace, shell) = args.workspace_and_shell()?;
    let tools = Toolset::builtin(shell).for_workspace(workspace.is_some());
    let home = boyd_home()?;
    let mut model = args.agent.backend.load_agent_model(g)?;
    let cancel = CancelToken::new();
    super::cancel_on_ctrl_c(&cancel);
    let run_dir = RunDir::create(&home)?;
    let mut planner = LmPlanner::new(model.as_mut(), args.agent.planner_config());
    let json = g.json;
    let mut on_event = |ev: &AgentEvent<'_>| {
        if !json {
            print_event(ev);
        }
    };
    let outcome = react::run(
        &args.task,
        &mut planner,
        &tools,
        &limits,
        run_dir,
        workspace,
        &cancel,
        &mut on_event,
    )?;
    if json {
        println!("{}", serde_json::to_string_pretty(&outcome)?);
    } else {
        println!();
        match &outcome.answer {
            Some(a) => println!("Answer: {}", safe(a)),
            None => println!(
                "No answer: {}",
                safe(outcome.detail.as_deref().unwrap_or(outcome.stop.as_str()))
            ),
        }
        println!("{}", safe(&summary_line(&outcome)));
    }
    Ok(match outcome.stop {
        StopReason::Completed => ExitCode::SUCCESS,
        StopReason::Cancelled => ExitCode::from(130),
        _ => ExitCode::from(2),
    })
}

/// `boyd run --loop ooda`: the OODA loop with the in-process model, streaming each phase.
fn run_ooda(args: Args, g: &GlobalOpts) -> anyhow::Result<ExitCode> {
    use super::ooda as o;
    use crate::agent::ooda::memory::MemoryStore;
    use crate::agent::ooda::{OodaBuilder, OodaEvent};

    let _ = args.agent.limits()?;
    let (workspace, shell) = args.workspace_and_shell()?;
    let mut config = args
        .ooda
        .config(args.agent.timeout, workspace.as_ref().map(|w| w.root()))?;
    config.narrow = !args.agent.no_narrow;
    config.overview = !args.agent.no_overview;
    config.answer = args.agent.answer.into();
    let tools = o::ooda_tools(shell, workspace.as_ref());
    let sensors = args
        .ooda
        .external_sensors(workspace.as_ref(), config.sensor_timeout)?;
    let policy = o::announce_policy(&config, &tools);
    let home = boyd_home()?;
    let memory = if args.ooda.no_memory {
        None
    } else {
        Some(MemoryStore::open(
            &home,
            workspace.as_ref().map(|w| w.root()),
        )?)
    };
    let key = o::approval_key();
    let mut model = args.agent.backend.load_agent_model(g)?;
    let cancel = CancelToken::new();
    super::cancel_on_ctrl_c(&cancel);
    let run_dir = RunDir::create(&home)?;
    let constrained = args.agent.constraint != ConstraintArg::None;
    let ooda = sensors
        .into_iter()
        .fold(OodaBuilder::new(config), OodaBuilder::sensor)
        .workspace(workspace)
        .approval_key(key)
        .memory(memory)
        .phase_options(args.ooda.phase_options(
            args.agent.step_tokens,
            constrained,
            args.agent.answer.into(),
        ))
        .build(model.as_mut(), &tools, cancel.clone());
    let json = g.json;
    let mut on_event = |ev: &OodaEvent<'_>| {
        if !json {
            o::print_event(ev);
        }
    };
    let outcome = o::runtime()?.block_on(ooda.run(&args.task, run_dir, &mut on_event))?;
    if json {
        println!("{}", o::outcome_json(&outcome, &policy)?);
    } else {
        o::print_outcome(&outcome);
    }
    Ok(o::exit_code(outcome.state))
}
