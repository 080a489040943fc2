//! `boyd approve RUN FINGERPRINT [--ttl 15m]`: print an approval token for one exact action.

use std::process::ExitCode;

use super::GlobalOpts;
use crate::agent::approval::{parse_ttl, ApprovalKey};
use crate::agent::guard::fingerprint;
use crate::agent::ooda::{load_verified_snapshot, OodaError};
use crate::agent::rundir::{boyd_home, find_run};

/// Arguments of `boyd approve`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The run (id, unique prefix, or `latest`).
    pub run: String,
    /// The action's fingerprint, as `boyd run` printed it (64 hex digits).
    pub fingerprint: String,
    /// How long the token stays valid (s, m, h, d).
    #[arg(long, default_value = "15m")]
    pub ttl: String,
}

/// Run `boyd approve`.
pub fn run(args: Args, g: &GlobalOpts) -> anyhow::Result<ExitCode> {
    let fp = args.fingerprint.trim().to_ascii_lowercase();
    if fp.len() != 64 || !fp.bytes().all(|b| b.is_ascii_hexdigit()) {
        anyhow::bail!(
            "the fingerprint must be 64 hex digits, as printed after `pending:` by `boyd run`"
        );
    }
    let ttl = parse_ttl(&args.ttl)?;
    let home = boyd_home()?;
    let run = find_run(&home, &args.run)?;
    let key = ApprovalKey::load_default()?;
    // Say what is being approved, when the run is waiting for it. The snapshot must verify
    // under the key, and the fingerprint is recomputed from its pending tool and arguments, so
    // what is shown is what the token allows.
    let pending = match load_verified_snapshot(&run.path, Some(&key)) {
        Ok(s) => s.pending,
        Err(e @ OodaError::BadSnapshot { .. }) => {
            anyhow::bail!("refusing to approve: {e}")
        }
        Err(_) => None,
    };
    let what = match &pending {
        Some(p) if fingerprint(&p.tool, &p.args) == fp => Some(format!(
            "{} {}",
            p.tool,
            crate::agent::guard::canonical_json(&p.args)
        )),
        _ => None,
    };
    let token = key.issue(&run.id, &fp, ttl);
    if g.json {
        println!(
            "{}",
            serde_json::json!({"run": run.id, "fingerprint": fp, "ttl_s": ttl.as_secs(), "action": what, "token": token})
        );
    } else {
        match &what {
            Some(a) => eprintln!("approving in run {}: {a} (valid {} s, single use)", run.id, ttl.as_secs()),
            None => eprintln!(
                "warning: run {} is not waiting for action {fp}; the token only works for that exact action",
                run.id
            ),
        }
        println!("{token}");
    }
    Ok(ExitCode::SUCCESS)
}
