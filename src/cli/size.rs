//! `boyd size MODEL`: will it fit, with how much context, and how fast — before loading
//! anything.
//!
//! MODEL is a catalog name (no network), a Hugging Face `config.json` (needs `--quant`), or a
//! `.gguf` file, of which only the header and tensor table are read. The answer is one
//! [`Estimate`] per context length, printed as a card, a sweep table, or JSON.

use std::fmt::Write as _;

use std::process::ExitCode;

use anyhow::{bail, Context as _};

use super::GlobalOpts;
use crate::sizer::{self, SizeQuery};
pub use crate::sizer::{
    from_gguf, load_profile, profile_path, resolve_model, save_profile, ASSUMED_FLOPS_PER_CORE,
    ASSUMED_HOST_BANDWIDTH,
};
use crate::sizing::{self, Estimate, Hardware, DEFAULT_UBATCH};
use crate::units::Bytes;

/// Arguments of `boyd size`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// A catalog name, a path to a Hugging Face config.json (with --quant), or a .gguf file
    /// (only its header is read). Defaults to --model.
    pub model: Option<String>,
    /// Quantization: a file mix (Q4_K_M, Q8_0, IQ4_XS, …), a GGML type, or bits per weight
    /// (e.g. 4.5). Default: the catalog entry's; ignored for a .gguf (its tensors are exact).
    #[arg(long, short = 'q')]
    pub quant: Option<String>,
    /// Context length in tokens (`8192`, `8k`, `1m`). Default: 8192, capped at the model's
    /// training context.
    #[arg(long, short = 'c', value_parser = ctx_arg)]
    pub ctx: Option<u32>,
    /// Hardware: a preset from models/hardware.toml (h200, rtx-4090, m3-max, …), `this`
    /// (this machine's RAM, with its calibration profile when `boyd validate` has written one),
    /// or hardware as people write it: "24 GB GPU", "RTX 3060 12 GB", "MacBook Pro M3 Max
    /// 64 GB", "32 GB RAM" (an unnamed device takes the bandwidth of the nearest preset of its
    /// class, and the card says so).
    #[arg(long, default_value = "this")]
    pub hw: String,
    /// Override the preset's memory, in GiB (e.g. an M2 Max with 32 GB: --mem-gib 32).
    #[arg(long)]
    pub mem_gib: Option<f64>,
    /// Prefill micro-batch in tokens (sizes the prefill compute buffer and prefill speed).
    #[arg(long, short = 'b', default_value_t = DEFAULT_UBATCH)]
    pub batch: u32,
    /// One row per value instead of a card, e.g. `ctx=512,2048,8192,32768`, or
    /// `ngl=0,20,40,81` (partial offload on a CUDA device).
    #[arg(long)]
    pub sweep: Option<String>,
    /// Partial offload on a CUDA device: size llama.cpp's `-ngl N` split (N layers on the GPU,
    /// the rest in host RAM; layers + 1 also puts the output layer on the GPU). Without it a
    /// model that does not fit gets the split with the most layers on the GPU.
    #[arg(long)]
    pub ngl: Option<u32>,
    /// Host memory bandwidth in GB/s for the layers a partial offload leaves on the CPU
    /// (default: 51.2, dual-channel DDR4-3200).
    #[arg(long)]
    pub host_bw: Option<f64>,
    /// Host RAM in GiB free for the layers a partial offload leaves on the CPU (default:
    /// unknown; the card then says how much it needs).
    #[arg(long)]
    pub host_mem_gib: Option<f64>,
    /// List the hardware presets and exit.
    #[arg(long)]
    pub list_hw: bool,
    /// Tensor-parallel GPUs (with a multi-GPU --hw such as h200x8; see src/sizing/clusters.toml).
    #[arg(long)]
    pub tp: Option<u32>,
    /// Pipeline-parallel stages (with a multi-GPU --hw).
    #[arg(long)]
    pub pp: Option<u32>,
    /// Check the speed model against the published measurements in models/published/: every
    /// row predicted (by a fit that never saw its device) against the published value, the
    /// median and worst error, the depth sweeps and the memory terms. No model needed.
    #[arg(long)]
    pub check_published: bool,
}

/// Run `boyd size`.
pub fn run(args: Args, g: &GlobalOpts) -> anyhow::Result<ExitCode> {
    if args.list_hw {
        return list_hw(g.json);
    }
    if args.check_published {
        return check_published(g.json);
    }
    if args.tp.is_some()
        || args.pp.is_some()
        || crate::sizing::parallel::Cluster::is_preset(&args.hw)
    {
        return super::size_parallel::run(&args, g);
    }
    let model = args.model.clone().or_else(|| g.model.clone()).context(
        "no model given: pass a catalog name, a config.json or a .gguf (see `boyd models list`)",
    )?;
    let sweep = match &args.sweep {
        Some(spec) => Some(parse_sweep_spec(spec)?),
        None => None,
    };
    let query = SizeQuery {
        model: model.clone(),
        quant: args.quant.clone(),
        ctx: args.ctx,
        kv_dtype: g.kv_dtype.map(|k| k.name().to_owned()),
        hw: args.hw.clone(),
        mem_gib: args.mem_gib,
        ubatch: args.batch,
        device: g.device.clone(),
        engine: crate::runtime::decoder::EngineKind::from_env(),
        ngl: args.ngl,
        host_bw_gbs: args.host_bw,
        host_mem_gib: args.host_mem_gib,
    };
    let estimates = match &sweep {
        Some(Sweep::Ngl(n)) => sizer::estimate_ngl_sweep(&query, n)?,
        Some(Sweep::Ctx(c)) => sizer::estimate_all(&query, c)?,
        None => sizer::estimate_all(&query, &[])?,
    };
    let text = if g.json {
        if args.sweep.is_some() {
            serde_json::to_string_pretty(&estimates)? + "\n"
        } else {
            serde_json::to_string_pretty(&estimates.first())? + "\n"
        }
    } else if let Some(Sweep::Ngl(_)) = &sweep {
        render_ngl_sweep(&model, &estimates)
    } else if args.sweep.is_some() {
        render_sweep(&model, &estimates)
    } else {
        estimates
            .first()
            .map(|e| render_card(&model, e))
            .unwrap_or_default()
    };
    emit(&text)
}

/// `boyd size --check-published`.
fn check_published(json: bool) -> anyhow::Result<ExitCode> {
    let ds = crate::sizing::published::Dataset::shipped()?;
    let check = crate::sizing::published::check(&ds)?;
    let text = if json {
        serde_json::to_string_pretty(&check)? + "\n"
    } else {
        super::size_published::render_check(&check)
    };
    emit(&text)
}

/// Write `text` to stdout; a closed pipe (`boyd size … | head`) ends quietly.
pub(super) fn emit(text: &str) -> anyhow::Result<ExitCode> {
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Ok(()) => Ok(ExitCode::SUCCESS),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(ExitCode::SUCCESS),
        Err(e) => Err(e).context("cannot write to stdout"),
    }
}

/// What `--sweep` varies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Sweep {
    /// Context lengths.
    Ctx(Vec<u32>),
    /// `-ngl` values of a partial offload.
    Ngl(Vec<u32>),
}

/// Parse `ctx=512,2048,…` (the `ctx=` prefix is optional) or `ngl=0,20,40`.
pub fn parse_sweep_spec(spec: &str) -> anyhow::Result<Sweep> {
    if let Some(("ngl", list)) = spec.split_once('=').map(|(k, l)| (k.trim(), l)) {
        let n = list
            .split(',')
            .map(|s| {
                s.trim().parse::<u32>().with_context(|| {
                    format!("--sweep ngl=…: {s:?} is not a layer count (e.g. ngl=0,20,40,81)")
                })
            })
            .collect::<anyhow::Result<Vec<u32>>>()?;
        return Ok(Sweep::Ngl(n));
    }
    parse_sweep(spec).map(Sweep::Ctx)
}

/// Parse `ctx=512,2048,…` (the `ctx=` prefix is optional).
pub fn parse_sweep(spec: &str) -> anyhow::Result<Vec<u32>> {
    let list = match spec.split_once('=') {
        Some((key, list)) if key.trim() == "ctx" => list,
        Some((key, _)) => {
            bail!("--sweep {key}=…: only ctx or ngl can be swept (e.g. --sweep ctx=512,8192)")
        }
        None => spec,
    };
    let ctxs = list
        .split(',')
        .map(|s| parse_tokens(s.trim()))
        .collect::<anyhow::Result<Vec<u32>>>()?;
    if ctxs.is_empty() {
        bail!("--sweep needs at least one context length");
    }
    Ok(ctxs)
}

/// clap parser for `--ctx`.
fn ctx_arg(s: &str) -> Result<u32, String> {
    parse_tokens(s).map_err(|e| format!("{e:#}"))
}

/// `8192`, `8k`, `32K`, `1m` → tokens.
fn parse_tokens(s: &str) -> anyhow::Result<u32> {
    let lower = s.to_ascii_lowercase();
    let (num, mult) = match lower.strip_suffix('k') {
        Some(n) => (n, 1024u64),
        None => match lower.strip_suffix('m') {
            Some(n) => (n, 1024 * 1024),
            None => (lower.as_str(), 1),
        },
    };
    let n: u64 = num
        .parse()
        .with_context(|| format!("{s:?} is not a context length (e.g. 8192 or 8k)"))?;
    let tokens = n
        .checked_mul(mult)
        .filter(|&t| t >= 1 && t <= u64::from(u32::MAX));
    tokens
        .map(|t| t as u32)
        .with_context(|| format!("context length {s:?} must be between 1 and {}", u32::MAX))
}

fn list_hw(json: bool) -> anyhow::Result<ExitCode> {
    let all = Hardware::presets()?;
    if json {
        return emit(&(serde_json::to_string_pretty(&all)? + "\n"));
    }
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:<10} {:<7} {:>10} {:>10} {:>11} {:>9}  description",
        "name", "backend", "memory", "usable", "bandwidth", "TFLOP/s"
    );
    for h in all {
        let _ = writeln!(
            s,
            "{:<10} {:<7} {:>10} {:>10} {:>11} {:>9.1}  {}",
            h.name,
            h.backend.name(),
            h.memory.to_string(),
            h.free.to_string(),
            h.bandwidth.to_string(),
            h.matrix_flops / 1e12,
            h.description
        );
    }
    let _ = writeln!(
        s,
        "this       cpu     (this machine: /proc/meminfo; calibrated by `boyd validate`)"
    );
    emit(&s)
}

/// Bytes as GiB with the decimal GB in brackets, as spec sheets quote both.
fn both(b: Bytes) -> String {
    format!("{b} ({:.2} GB)", b.gb())
}

/// The calculator card for one estimate.
pub fn render_card(model: &str, e: &Estimate) -> String {
    let mut s = String::new();
    let a = &e.arch;
    let hw = &e.hardware;
    let m = &e.memory;
    let _ = writeln!(
        s,
        "{model} — {} {}, {} on {}",
        a.architecture,
        human_params(e.weights.params),
        e.quant,
        hw.name
    );
    let _ = writeln!(
        s,
        "  {} layers, {} heads / {} KV heads × {}, hidden {}, vocab {}{}",
        a.n_layers,
        a.n_heads,
        a.n_kv_heads,
        a.head_dim,
        a.hidden,
        a.vocab,
        if a.tied_embeddings {
            ", tied embeddings"
        } else {
            ""
        }
    );
    let _ = writeln!(
        s,
        "  context {} tokens, KV {}, prefill batch {}",
        e.ctx, e.kv_dtype, e.compute.ubatch
    );
    let _ = writeln!(s);
    let _ = writeln!(s, "memory");
    let wnote = match e.weights.method {
        sizing::WeightsMethod::TensorList => "exact, from the tensor table".to_owned(),
        sizing::WeightsMethod::ParamsTimesBpw => {
            format!(
                "{} params × {:.2} bits/weight",
                e.weights.params, e.weights.bits_per_weight
            )
        }
    };
    let _ = writeln!(s, "  weights         {:>24}  {wnote}", both(m.weights));
    if m.embedding_copy.0 > 0 {
        let _ = writeln!(
            s,
            "  embedding copy  {:>24}  token embedding dequantized to f32 by the runtime",
            both(m.embedding_copy)
        );
    }
    let _ = writeln!(
        s,
        "  RoPE tables     {:>24}  cos/sin for {} positions, built at load",
        both(m.rope_tables),
        e.ctx.min(a.context_length)
    );
    let window = match e.kv.window {
        Some(w) => format!(
            ", {} of {} layers capped at their {w}-token window + {} (one batch)",
            e.kv.sliding_layers,
            a.n_layers,
            crate::sizing::kv::WINDOW_SLACK
        ),
        None => String::new(),
    };
    let _ = writeln!(
        s,
        "  KV cache        {:>24}  {} per token{window}",
        both(m.kv_cache),
        e.kv.per_token
    );
    let _ = writeln!(
        s,
        "  compute         {:>24}  {} engine: prefill {} / decode {}, logits {}{}",
        both(m.compute),
        e.compute.layout,
        e.compute.prefill,
        e.compute.decode,
        e.compute.logits,
        if e.compute.dequant_scratch.0 > 0 {
            format!(", dequant scratch {}", e.compute.dequant_scratch)
        } else {
            String::new()
        }
    );
    let names: Vec<String> = e
        .overhead
        .iter()
        .map(|o| {
            if o.measured {
                format!("{} (measured)", o.name)
            } else {
                o.name.to_owned()
            }
        })
        .collect();
    let _ = writeln!(
        s,
        "  overhead        {:>24}  {}",
        both(m.overhead),
        names.join(" + ")
    );
    let _ = writeln!(s, "  total           {:>24}", both(m.total));
    let _ = writeln!(s);
    let verdict = if e.fits { "FITS" } else { "DOES NOT FIT" };
    let _ = writeln!(
        s,
        "{verdict} on {} ({}): free {} of {} ({:.0}% usable){}",
        hw.name,
        hw.backend,
        hw.free,
        hw.memory,
        hw.usable_fraction * 100.0,
        match (e.headroom, e.shortfall) {
            (Some(h), _) => format!(", {h} to spare"),
            (_, Some(sh)) => format!(", short by {sh}"),
            _ => String::new(),
        }
    );
    let _ = writeln!(s);
    let sp = &e.speed;
    let _ = writeln!(s, "speed (estimate)");
    let _ = writeln!(
        s,
        "  decode   {} at empty context, {} at {} tokens",
        sp.decode_empty, sp.decode_at_ctx, e.ctx
    );
    let _ = writeln!(
        s,
        "           {} weights + {} KV per token, {:.0}% of {} bandwidth, fixed {:.2} ms/step",
        sp.weight_bytes_per_token,
        sp.kv_bytes_at_ctx,
        sp.decode_efficiency * 100.0,
        hw.bandwidth,
        sp.fixed_cost_s * 1e3
    );
    let _ = writeln!(
        s,
        "  prefill  {} ({}-bound), {:.1} GFLOP/token at {:.0}% of {:.1} TFLOP/s",
        sp.prefill,
        sp.prefill_bound,
        sp.prefill_flops_per_token / 1e9,
        sp.prefill_efficiency * 100.0,
        hw.matrix_flops / 1e12
    );
    let _ = writeln!(s, "  efficiency: {}", sp.efficiency_source);
    let _ = writeln!(s);
    if let Some(o) = &e.offload {
        render_offload(&mut s, o, e.ctx);
        let _ = writeln!(s);
    }
    match &e.max_ctx {
        Some(c) if c.limited_by == "model" => {
            let _ = writeln!(
                s,
                "largest context that fits: {} (the model's maximum)",
                c.ctx
            );
        }
        Some(c) => {
            let _ = writeln!(s, "largest context that fits: {} tokens", c.ctx);
        }
        None => {
            let _ = writeln!(
                s,
                "largest context that fits: none (the model does not fit at all)"
            );
        }
    }
    match &e.max_quant {
        Some(q) => {
            let _ = writeln!(
                s,
                "largest quantization that fits at {} tokens: {} ({:.2} bits/weight, total {})",
                e.ctx, q.name, q.bits_per_weight, q.total
            );
        }
        None => {
            let _ = writeln!(
                s,
                "largest quantization that fits at {} tokens: none",
                e.ctx
            );
        }
    }
    s
}

/// The partial-offload section of the card.
fn render_offload(s: &mut String, o: &sizing::offload::Offload, ctx: u32) {
    let _ =
        writeln!(
        s,
        "partial offload (llama.cpp -ngl {}: {} of {} layers{} on the GPU, the rest on the CPU)",
        o.ngl,
        o.gpu_layers,
        o.layers,
        if o.output_on_gpu { " and the output" } else { "" }
    );
    let side = |m: &sizing::offload::SideMemory| {
        format!(
            "{} = weights {} + KV {} + compute {} + overhead {}",
            m.total, m.weights, m.kv_cache, m.compute, m.overhead
        )
    };
    let _ = writeln!(
        s,
        "  GPU   {}  ({} in {} free)",
        side(&o.gpu),
        if o.fits_gpu { "fits" } else { "DOES NOT FIT" },
        o.gpu_free
    );
    let host_fit = match (o.fits_host, o.host_free) {
        (Some(true), Some(f)) => format!("fits in {f} free"),
        (Some(false), Some(f)) => format!("DOES NOT FIT in {f} free"),
        _ => "host RAM needed; --host-mem-gib to check it".to_owned(),
    };
    let _ = writeln!(s, "  host  {}  ({host_fit})", side(&o.host));
    let _ = writeln!(
        s,
        "  decode {} at empty context, {} at {ctx} tokens: GPU {:.1} ms + host {:.1} ms + {} {:.2} ms per token",
        o.decode_empty,
        o.decode_at_ctx,
        o.gpu_s * 1e3,
        o.host_s * 1e3,
        o.link.name,
        o.link_s * 1e3
    );
    let _ = writeln!(s, "  host: {}; sweep with --sweep ngl=…", o.host_source);
}

/// One row per `-ngl` value.
pub fn render_ngl_sweep(model: &str, estimates: &[Estimate]) -> String {
    let mut s = String::new();
    let Some(first) = estimates.first() else {
        return s;
    };
    let _ = writeln!(
        s,
        "{model} — {} on {} ({}) with the rest on the host, ctx {}, KV {}; GPU free {}",
        first.quant,
        first.hardware.name,
        first.hardware.backend,
        first.ctx,
        first.kv_dtype,
        first.hardware.free
    );
    let _ = writeln!(
        s,
        "{:>5}  {:>10}  {:>11}  {:<4}  {:>11}  {:>11}  {:>11}  {:>9}  {:>9}",
        "ngl",
        "GPU layers",
        "GPU total",
        "fits",
        "host total",
        "decode",
        "decode@ctx",
        "GPU ms",
        "host ms"
    );
    for e in estimates {
        let Some(o) = &e.offload else { continue };
        let _ = writeln!(
            s,
            "{:>5}  {:>10}  {:>11}  {:<4}  {:>11}  {:>11}  {:>11}  {:>9.1}  {:>9.1}",
            o.ngl,
            format!(
                "{}/{}{}",
                o.gpu_layers,
                o.layers,
                if o.output_on_gpu { "+out" } else { "" }
            ),
            o.gpu.total.to_string(),
            if o.fits_gpu { "yes" } else { "no" },
            o.host.total.to_string(),
            o.decode_empty.to_string(),
            o.decode_at_ctx.to_string(),
            o.gpu_s * 1e3,
            o.host_s * 1e3,
        );
    }
    if let Some(o) = first.offload.as_ref() {
        let _ = writeln!(s, "host: {}; link {}", o.host_source, o.link.name);
    }
    s
}

/// One row per context length.
pub fn render_sweep(model: &str, estimates: &[Estimate]) -> String {
    let mut s = String::new();
    let Some(first) = estimates.first() else {
        return s;
    };
    let _ = writeln!(
        s,
        "{model} — {} on {} ({}), KV {}; free {}",
        first.quant,
        first.hardware.name,
        first.hardware.backend,
        first.kv_dtype,
        first.hardware.free
    );
    let _ = writeln!(
        s,
        "{:>8}  {:>11}  {:>11}  {:>11}  {:>11}  {:>11}  {:<4}  {:>11}  {:>11}",
        "ctx", "weights", "KV", "compute", "total", "free after", "fits", "decode@ctx", "prefill"
    );
    for e in estimates {
        let after = match (e.headroom, e.shortfall) {
            (Some(h), _) => h.to_string(),
            (_, Some(sh)) => format!("-{sh}"),
            _ => String::new(),
        };
        let _ = writeln!(
            s,
            "{:>8}  {:>11}  {:>11}  {:>11}  {:>11}  {:>11}  {:<4}  {:>11}  {:>11}",
            e.ctx,
            e.memory.weights.to_string(),
            e.memory.kv_cache.to_string(),
            e.memory.compute.to_string(),
            e.memory.total.to_string(),
            after,
            if e.fits { "yes" } else { "no" },
            e.speed.decode_at_ctx.to_string(),
            e.speed.prefill.to_string(),
        );
    }
    let _ = writeln!(
        s,
        "speed at {:.0}% of bandwidth ({})",
        first.speed.decode_efficiency * 100.0,
        first.speed.efficiency_source
    );
    s
}

/// `8.03B`, `494M`.
fn human_params(p: u64) -> String {
    if p >= 1_000_000_000 {
        format!("{:.2}B", p as f64 / 1e9)
    } else {
        format!("{:.0}M", p as f64 / 1e6)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sweep_and_token_counts_parse() {
        assert_eq!(
            parse_sweep("ctx=512,2048,8k").expect("sweep"),
            [512, 2048, 8192]
        );
        assert_eq!(parse_sweep("1m").expect("sweep"), [1 << 20]);
        assert!(parse_sweep("batch=1,2").is_err());
        assert_eq!(
            parse_sweep_spec("ngl=0,20, 81").expect("ngl"),
            Sweep::Ngl(vec![0, 20, 81])
        );
        assert_eq!(
            parse_sweep_spec("ctx=8k").expect("ctx"),
            Sweep::Ctx(vec![8192])
        );
        assert!(parse_sweep_spec("ngl=-1").is_err());
        assert!(parse_sweep("ctx=0").is_err());
        assert!(parse_sweep("ctx=abc").is_err());
        assert!(parse_sweep("ctx=99999999999").is_err());
    }
}
