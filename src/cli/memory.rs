//! `boyd memory list | forget KEY`: what OODA runs remember about a workspace.

use super::clip;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Subcommand;

use super::GlobalOpts;
use crate::agent::ooda::memory::MemoryStore;
use crate::agent::rundir::boyd_home;

/// Arguments of `boyd memory`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The workspace whose memory to use (default: runs without a workspace).
    #[arg(long, global = true)]
    pub workspace: Option<PathBuf>,
    /// What to do.
    #[command(subcommand)]
    pub command: MemoryCommand,
}

/// `boyd memory` subcommands.
#[derive(Debug, Subcommand)]
pub enum MemoryCommand {
    /// List remembered facts and outcomes, oldest first.
    List,
    /// Forget the entries with this key.
    Forget {
        /// The key, as `list` shows it.
        key: String,
    },
}

/// Run `boyd memory`.
pub fn run(args: Args, g: &GlobalOpts) -> anyhow::Result<ExitCode> {
    let home = boyd_home()?;
    let mut store = MemoryStore::open(&home, args.workspace.as_deref())?;
    match args.command {
        MemoryCommand::List => {
            if g.json {
                println!("{}", serde_json::to_string_pretty(store.entries())?);
            } else {
                println!(
                    "workspace: {} ({})",
                    store.workspace(),
                    store.path().display()
                );
                if store.entries().is_empty() {
                    println!("(nothing remembered)");
                }
                for e in store.entries() {
                    println!(
                        "{:<8} {:.2}  {}  =  {}   [{}]",
                        format!("{:?}", e.kind).to_lowercase(),
                        e.confidence,
                        clip(&e.key, 70),
                        clip(&e.value, 60),
                        e.source
                    );
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        MemoryCommand::Forget { key } => {
            let n = store.forget(&key);
            store.save()?;
            if g.json {
                println!("{}", serde_json::json!({"forgotten": n}));
            } else {
                println!("forgot {n} entr{}", if n == 1 { "y" } else { "ies" });
            }
            Ok(if n > 0 {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            })
        }
    }
}
