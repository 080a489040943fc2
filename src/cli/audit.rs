//! `boyd audit verify RUN`: check a run's hash-chained audit log.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Subcommand;

use super::GlobalOpts;
use crate::agent::audit::verify;
use crate::agent::rundir::{boyd_home, find_run};

/// Arguments of `boyd audit`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// What to do.
    #[command(subcommand)]
    pub command: AuditCommand,
}

/// `boyd audit` subcommands.
#[derive(Debug, Subcommand)]
pub enum AuditCommand {
    /// Verify the chain; name the first bad record. Exit 0 when intact, 1 when damaged.
    Verify {
        /// The run: id, unique prefix, `latest`, or a run directory's path.
        run: String,
    },
}

fn run_path(run: &str) -> anyhow::Result<PathBuf> {
    let p = PathBuf::from(run);
    if p.is_dir() {
        return Ok(p);
    }
    Ok(find_run(&boyd_home()?, run)?.path)
}

/// Run `boyd audit`.
pub fn run(args: Args, g: &GlobalOpts) -> anyhow::Result<ExitCode> {
    match args.command {
        AuditCommand::Verify { run } => {
            let path = run_path(&run)?;
            let r = verify(&path)?;
            if g.json {
                println!("{}", serde_json::to_string_pretty(&r)?);
            } else {
                match &r.problem {
                    None => println!("OK: {} records, head {}", r.records, r.head),
                    Some(p) => println!("DAMAGED: first bad {p}"),
                }
                if let Some(t) = &r.torn_tail {
                    println!(
                        "recoverable: a torn last line ({} bytes at line {}) from a crash mid-write; `boyd resume` cuts it off",
                        t.bytes, t.line
                    );
                }
                if r.manifest_lag {
                    println!("recoverable: the manifest was one record behind (crash between the two writes)");
                }
                for u in &r.unknown_intents {
                    println!(
                        "unknown outcome: action {} ({} {}) has an intent (record {}) and no outcome; it is never retried automatically",
                        u.action_id, u.tool, u.fingerprint, u.seq
                    );
                }
            }
            Ok(if r.ok() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            })
        }
    }
}
