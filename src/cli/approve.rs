//! `boyd approve RUN FINGERPRINT [--ttl 15m]`: print an approval token for the one exact action
//! the run is waiting for (any other fingerprint is refused).

use std::process::ExitCode;

use super::term::safe;
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
    // Sign only the action the run is waiting for. The snapshot must verify under the key, and
    // the fingerprint is recomputed from its pending tool and arguments, so what is shown is
    // what the token allows; any other fingerprint (a mistyped one, or one a hostile transcript
    // suggested) is refused.
    let pending = match load_verified_snapshot(&run.path, Some(&key)) {
        Ok(s) => s.pending,
        Err(e @ OodaError::BadSnapshot { .. }) => {
            anyhow::bail!("refusing to approve: {}", safe(&e.to_string()))
        }
        Err(e) => anyhow::bail!(
            "refusing to approve: cannot read what run {} is waiting for ({}); only an OODA run paused on an action can be approved",
            run.id,
            safe(&e.to_string())
        ),
    };
    let what = match &pending {
        Some(p) if fingerprint(&p.tool, &p.args) == fp => format!(
            "{} {}",
            p.tool,
            crate::agent::guard::canonical_json(&p.args)
        ),
        Some(p) => anyhow::bail!(
            "refusing to approve: run {} is not waiting for action {fp}; it is waiting for {} ({}). Copy the fingerprint from the run's `pending:` line",
            run.id,
            fingerprint(&p.tool, &p.args),
            safe(&format!(
                "{} {}",
                p.tool,
                crate::agent::guard::canonical_json(&p.args)
            ))
        ),
        None => anyhow::bail!(
            "refusing to approve: run {} is not waiting for any action to be approved",
            run.id
        ),
    };
    let token = key.issue(&run.id, &fp, ttl);
    if g.json {
        println!(
            "{}",
            serde_json::json!({"run": run.id, "fingerprint": fp, "ttl_s": ttl.as_secs(), "action": what, "token": token})
        );
    } else {
        eprintln!(
            "approving in run {}: {} (valid {} s, single use)",
            run.id,
            safe(&what),
            ttl.as_secs()
        );
        println!("{token}");
    }
    Ok(ExitCode::SUCCESS)
}
