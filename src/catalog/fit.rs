//! Whether a catalog model fits a machine, and which model `--model auto` picks.
//!
//! Both are the sizing model ([`crate::sizing::estimate`]) applied to a catalog entry without
//! its file: the architecture from the entry, the weights from the pinned file's size (its real
//! bits per weight) or, for a sizing-only entry, from the quantization's nominal figure. The
//! hardware is given, so the same functions answer for this machine (the CLI probes it) and for
//! hardware a test makes up.

use serde::Serialize;

use super::{Catalog, ModelEntry, AGENT_DEFAULT_MODEL};
use crate::sizing::{
    self, Backend, ComputeLayout, Hardware, Input, KvDtype, Quant, SizingError, Weights,
    DEFAULT_UBATCH,
};
use crate::units::{Bytes, TokensPerSec};

/// Slowest predicted decode (tokens/s with the run's whole context filled) at which
/// `--model auto` still takes a model: below it a larger model answers too slowly to be the
/// better choice for an interactive agent.
pub const AUTO_MIN_DECODE_TPS: f64 = 10.0;

/// Context the `boyd models list` fit check sizes for (capped at each model's training context).
pub const LIST_CTX: u32 = 8192;

/// One entry sized on one machine.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Fit {
    /// Catalog name.
    pub name: String,
    /// Context sized for (the asked one, capped at the model's training context).
    pub ctx: u32,
    /// Memory the model needs at `ctx`: weights, KV cache, compute buffers, overhead.
    pub needs: Bytes,
    /// Memory the machine has free for it.
    pub free: Bytes,
    /// Whether `needs <= free`.
    pub fits: bool,
    /// Predicted decode speed with the whole context filled.
    pub decode_at_ctx: TokensPerSec,
    /// Whether boyd's decoder runs this architecture (some are supported for sizing only).
    pub runnable: bool,
}

/// The weights of `entry` for sizing: the pinned file's size over the parameter count gives
/// the file's real bits per weight (header, mixed tensor types and an untied output matrix
/// included); a sizing-only entry uses its quantization's nominal figure.
pub fn entry_weights(entry: &ModelEntry) -> Result<Weights, SizingError> {
    let quant = match entry
        .source
        .as_ref()
        .filter(|s| s.size > 0 && entry.params > 0)
    {
        Some(src) => Quant {
            name: entry.quant.clone(),
            bits_per_weight: src.size as f64 * 8.0 / entry.params as f64,
            source: format!(
                "catalog file size {} bytes over {} params",
                src.size, entry.params
            ),
        },
        None => Quant::parse(&entry.quant)?,
    };
    Ok(Weights::Params {
        params: entry.params,
        quant,
    })
}

/// Size `entry` on `hw` at `ctx` tokens (capped at its training context), with the KV cache
/// type the runtime allocates on that hardware.
pub fn fit(entry: &ModelEntry, hw: &Hardware, ctx: u32) -> Result<Fit, SizingError> {
    let ctx = ctx.min(entry.arch.context_length).max(1);
    let kv_dtype = if hw.backend == Backend::Cpu && hw.compute_layout != ComputeLayout::Native {
        KvDtype::F32
    } else {
        hw.backend.runtime_kv_dtype()
    };
    let input = Input {
        arch: entry.arch.clone(),
        weights: entry_weights(entry)?,
        ctx,
        kv_dtype,
        ubatch: DEFAULT_UBATCH,
    };
    let e = sizing::estimate(&input, hw)?;
    Ok(Fit {
        name: entry.name.clone(),
        ctx,
        needs: e.memory.total,
        free: hw.free,
        fits: e.fits,
        decode_at_ctx: e.speed.decode_at_ctx,
        runnable: entry.arch.architecture.runnable(),
    })
}

/// One larger model `--model auto` looked at, and why it did or did not take it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Considered {
    /// Catalog name.
    pub name: String,
    /// Parameter count.
    pub params: u64,
    /// The sizing answer (`None` when the entry was not available or could not be sized).
    pub fit: Option<Fit>,
    /// `chosen`, or why not.
    pub verdict: String,
}

/// What `--model auto` chose and why.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AutoChoice {
    /// The catalog name chosen.
    pub name: String,
    /// One sentence: the sizing reason.
    pub reason: String,
    /// The chosen model's sizing (`None` for the default when it could not be sized).
    pub fit: Option<Fit>,
    /// Every model larger than the default, largest first, with its verdict.
    pub considered: Vec<Considered>,
}

/// Pick the model for `--model auto`: the largest catalog entry (by parameter count) larger
/// than the agent default ([`AGENT_DEFAULT_MODEL`]) that `available` accepts (downloaded, or
/// downloadable with `--pull`: the caller decides), that boyd's decoder runs, and that fits
/// `hw` at `ctx` with a predicted decode of at least `min_decode_tps` tokens/s at that context.
/// When none does, the agent default. Pure: no I/O, the hardware and availability are given.
pub fn pick_auto(
    catalog: &Catalog,
    hw: &Hardware,
    ctx: u32,
    min_decode_tps: f64,
    available: &dyn Fn(&ModelEntry) -> bool,
) -> AutoChoice {
    let default_params = catalog.get(AGENT_DEFAULT_MODEL).map_or(0, |e| e.params);
    let mut larger: Vec<&ModelEntry> = catalog
        .entries()
        .filter(|e| e.params > default_params)
        .collect();
    larger.sort_by(|a, b| b.params.cmp(&a.params).then_with(|| a.name.cmp(&b.name)));
    let mut considered = Vec::with_capacity(larger.len());
    let mut chosen: Option<(String, Fit)> = None;
    for e in larger {
        let mut row = Considered {
            name: e.name.clone(),
            params: e.params,
            fit: None,
            verdict: String::new(),
        };
        if chosen.is_some() {
            row.verdict = "smaller than the chosen model".into();
        } else if !e.arch.architecture.runnable() {
            row.verdict = format!(
                "the decoder does not run {} yet (sizing only)",
                e.arch.architecture
            );
        } else if !available(e) {
            row.verdict = "not available (not downloaded, or no pinned file to pull)".into();
        } else {
            match fit(e, hw, ctx) {
                Err(err) => row.verdict = format!("cannot be sized: {err}"),
                Ok(f) if !f.fits => {
                    row.verdict = format!("needs {} at ctx {}, {} free", f.needs, f.ctx, f.free);
                    row.fit = Some(f);
                }
                Ok(f) if f.decode_at_ctx.0 < min_decode_tps => {
                    row.verdict = format!(
                        "fits, but decodes at a predicted {} at ctx {} (< {min_decode_tps} tok/s)",
                        f.decode_at_ctx, f.ctx
                    );
                    row.fit = Some(f);
                }
                Ok(f) => {
                    row.verdict = "chosen".into();
                    chosen = Some((e.name.clone(), f.clone()));
                    row.fit = Some(f);
                }
            }
        }
        considered.push(row);
    }
    let on = format!("{} ({})", hw.description, hw.backend);
    match chosen {
        Some((name, f)) => AutoChoice {
            reason: format!(
                "{name} is the largest available catalog model that fits {on}: it needs {} of {} \
                 free at ctx {} and decodes at a predicted {} (minimum {min_decode_tps} tok/s)",
                f.needs, f.free, f.ctx, f.decode_at_ctx
            ),
            name,
            fit: Some(f),
            considered,
        },
        None => {
            let default_fit = catalog
                .get(AGENT_DEFAULT_MODEL)
                .and_then(|e| fit(e, hw, ctx).ok());
            AutoChoice {
                name: AGENT_DEFAULT_MODEL.to_owned(),
                reason: format!(
                    "no catalog model larger than {AGENT_DEFAULT_MODEL} is available, runnable \
                     and fits {on} at ctx {ctx} with a predicted decode of at least \
                     {min_decode_tps} tok/s; using the default"
                ),
                fit: default_fit,
                considered,
            }
        }
    }
}
