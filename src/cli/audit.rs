//! `boyd audit verify RUN`: check a run's hash-chained audit log.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Subcommand;

use super::term::safe;
use super::GlobalOpts;
use crate::agent::approval::ApprovalKey;
use crate::agent::audit::{verify_with_key, RecordMacs, SignatureCheck};
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
    /// Verify the chain, the manifest's signature and each record's MAC; name the first bad
    /// record. Exit 0 when intact and signed by this machine's approval key (a legacy log, whose
    /// records predate per-record MACs, says LEGACY: only its signed manifest vouches for it), 1
    /// when damaged (edited, cut, or a record forged or appended without the key), 3 when intact
    /// but not written by this key (forged, re-signed, or written without a key).
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
            let key = ApprovalKey::load_default()?;
            let r = verify_with_key(&path, Some(&key))?;
            let verdict = match (&r.problem, r.signature, r.record_macs) {
                (Some(_), _, _) => "damaged",
                (None, SignatureCheck::Valid, RecordMacs::Signed) => "intact",
                (None, SignatureCheck::Valid, _) => "intact_legacy_unsigned_records",
                (None, _, _) => "not_written_by_this_key",
            };
            if g.json {
                let mut v = serde_json::to_value(&r)?;
                if let Some(o) = v.as_object_mut() {
                    o.insert("verdict".into(), verdict.into());
                }
                println!("{}", serde_json::to_string_pretty(&v)?);
            } else {
                match (&r.problem, r.signature) {
                    (Some(p), _) => println!("DAMAGED: first bad {}", safe(&p.to_string())),
                    (None, SignatureCheck::Valid) if verdict == "intact" => println!(
                        "OK: {} records, head {}; intact, signed by this key",
                        r.records,
                        safe(&r.head)
                    ),
                    (None, SignatureCheck::Valid) => println!(
                        "LEGACY: {} records, head {}; intact, but the records are unsigned (written before records carried a MAC): only the manifest, signed by this key, vouches for them",
                        r.records,
                        safe(&r.head)
                    ),
                    (None, s) => println!(
                        "NOT WRITTEN BY THIS KEY: {} records chain together, but the manifest's signature {}; the log was forged, re-signed or written without this key",
                        r.records,
                        if s == SignatureCheck::Missing { "is missing" } else { "does not verify" }
                    ),
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
                        u.action_id,
                        safe(&u.tool),
                        safe(&u.fingerprint),
                        u.seq
                    );
                }
            }
            Ok(match verdict {
                "intact" | "intact_legacy_unsigned_records" => ExitCode::SUCCESS,
                "damaged" => ExitCode::from(1),
                _ => ExitCode::from(3),
            })
        }
    }
}
