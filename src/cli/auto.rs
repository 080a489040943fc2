//! `--model auto`: the catalog model the sizing model says this machine runs best, chosen by
//! [`catalog::pick_auto`] from this machine's hardware and the models in the store (or, with
//! `--pull`, every model with a pinned file). The choice and its reason go to stderr.

use anyhow::Context as _;

use super::GlobalOpts;
use crate::catalog::{self, Catalog, Store, AUTO_MIN_DECODE_TPS};
use crate::sizer;

/// The `--model` value that asks for the automatic choice.
pub const AUTO: &str = "auto";

/// The catalog name `--model auto` stands for on this machine at `ctx` tokens, printed with
/// the sizing reason on stderr.
pub fn choose(g: &GlobalOpts, ctx: usize) -> anyhow::Result<String> {
    let store = Store::from_env()?;
    let catalog = Catalog::load_from(Some(&store.models_dir()))?;
    let hw = sizer::hardware("this", &g.device, None)
        .context("--model auto sizes the catalog for this machine")?;
    let ctx = u32::try_from(ctx).unwrap_or(u32::MAX);
    let available = |e: &catalog::ModelEntry| {
        let downloaded = store.entry_path(e).is_some_and(|p| p.is_file());
        downloaded || (g.pull && e.source.is_some())
    };
    let choice = catalog::pick_auto(&catalog, &hw, ctx, AUTO_MIN_DECODE_TPS, &available);
    for c in &choice.considered {
        tracing::debug!(model = %c.name, verdict = %c.verdict, "--model auto");
    }
    let scope = if g.pull {
        "downloaded or pullable"
    } else {
        "downloaded (add --pull to consider models not downloaded yet)"
    };
    eprintln!(
        "--model auto: {} ({}; models considered: {scope})",
        choice.name, choice.reason
    );
    Ok(choice.name)
}
