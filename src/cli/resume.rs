//! `boyd resume RUN [--approve TOKEN]`: continue an OODA run that paused, escalated, ran out of
//! budget or cycles, or was cancelled, from its saved world model.

use std::process::ExitCode;

use super::ooda::{self as o, OodaOpts};
use super::run::load_agent_model;
use super::GlobalOpts;
use crate::agent::ooda::memory::MemoryStore;
use crate::agent::ooda::{load_verified_snapshot, OodaBuilder, OodaEvent};
use crate::agent::rundir::{boyd_home, find_run};
use crate::agent::tools::Sandbox;
use crate::lm::CancelToken;

/// Arguments of `boyd resume`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The run (id, unique prefix, or `latest`).
    pub run: String,
    /// Approval token for the pending irreversible action (from `boyd approve`).
    #[arg(long)]
    pub approve: Option<String>,
    /// Add this much to the risk budget (to continue a budget-exhausted run).
    #[arg(long, default_value_t = 0.0)]
    pub add_budget: f64,
    /// Wall-clock budget of this session, in seconds.
    #[arg(long, default_value_t = 600.0)]
    pub timeout: f64,
    /// Most tokens the model may generate per Decide.
    #[arg(long, default_value_t = 256)]
    pub step_tokens: usize,
    /// Enable the shell tool again (as the original run had it), in the kernel sandbox.
    #[arg(long)]
    pub enable_shell: bool,
    /// Programs for the shell tool, as `boyd run --shell-allow` (repeat per program).
    #[arg(long, value_name = "PROGRAM[:OPTIONS]")]
    pub shell_allow: Vec<String>,
    /// Run the shell tool without the kernel sandbox (see `boyd run --help`).
    #[arg(long)]
    pub unsandboxed_shell: bool,
    /// OODA options.
    #[command(flatten)]
    pub ooda: OodaOpts,
}

/// Run `boyd resume`.
pub fn run(args: Args, g: &GlobalOpts) -> anyhow::Result<ExitCode> {
    if !(args.add_budget.is_finite() && args.add_budget >= 0.0) {
        anyhow::bail!("--add-budget must be a number >= 0");
    }
    if !(args.timeout.is_finite() && args.timeout > 0.0) {
        anyhow::bail!("--timeout must be a positive number of seconds");
    }
    let home = boyd_home()?;
    let run = find_run(&home, &args.run)?;
    // The snapshot decides the workspace and the pending action: it must carry a valid HMAC
    // under the approval key, belong to this run, name the workspace the run started in, and
    // its pending action must match its fingerprint.
    let key = o::approval_key().ok_or_else(|| {
        anyhow::anyhow!(
            "resume needs the approval key in the config directory to verify the run snapshot; set BOYD_CONFIG_DIR"
        )
    })?;
    let snap = load_verified_snapshot(&run.path, Some(&key))?;
    let workspace = match &snap.workspace {
        Some(dir) => Some(Sandbox::new(dir).map_err(|e| {
            anyhow::anyhow!("the run's workspace {} is not usable: {e}", dir.display())
        })?),
        None => None,
    };
    let mut config = args
        .ooda
        .config(args.timeout, workspace.as_ref().map(|w| w.root()))?;
    config.extra_budget = args.add_budget;
    let answer_mode = config.answer;
    let shell = super::run::shell_policy(
        args.enable_shell,
        &args.shell_allow,
        args.unsandboxed_shell,
        workspace.as_ref(),
    )?;
    let tools = o::ooda_tools(shell, workspace.as_ref());
    let sensors = args
        .ooda
        .external_sensors(workspace.as_ref(), config.sensor_timeout)?;
    let memory = if args.ooda.no_memory {
        None
    } else {
        Some(MemoryStore::open(
            &home,
            workspace.as_ref().map(|w| w.root()),
        )?)
    };
    let policy = o::announce_policy(&config, &tools);
    let mut model = load_agent_model(g)?;
    let cancel = CancelToken::new();
    super::cancel_on_ctrl_c(&cancel);
    let ooda = sensors
        .into_iter()
        .fold(OodaBuilder::new(config), OodaBuilder::sensor)
        .workspace(workspace)
        .approval_key(Some(key))
        .memory(memory)
        .phase_options(args.ooda.phase_options(args.step_tokens, true, answer_mode))
        .build(model.as_mut(), &tools, cancel.clone());
    let json = g.json;
    let mut on_event = |ev: &OodaEvent<'_>| {
        if !json {
            o::print_event(ev);
        }
    };
    let outcome =
        o::runtime()?.block_on(ooda.resume(&run.path, args.approve.as_deref(), &mut on_event))?;
    if json {
        println!("{}", o::outcome_json(&outcome, &policy)?);
    } else {
        o::print_outcome(&outcome);
    }
    Ok(o::exit_code(outcome.state))
}
