//! `boyd size MODEL`: will it fit, with how much context, and how fast — before loading
//! anything.
//!
//! MODEL is a catalog name (no network), a Hugging Face `config.json` (needs `--quant`), or a
//! `.gguf` file, of which only the header and tensor table are read. The answer is one
//! [`Estimate`] per context length, printed as a card, a sweep table, or JSON.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context as _};

use super::GlobalOpts;
use crate::catalog::Catalog;
use crate::runtime::decoder::EngineKind;
use crate::runtime::gguf::GgufHeader;
use crate::sizing::{
    self, hf_config, weights, ArchParams, Backend, Estimate, GgmlType, Hardware, Input, KvDtype,
    Profile, Quant, Weights, DEFAULT_UBATCH,
};
use crate::store::Store;
use crate::units::{Bytes, BytesPerSec};

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
    /// KV cache type: f32, f16, bf16, q8_0 or q4_0. Default: what boyd's runtime allocates on
    /// the hardware's backend (f32 on a CPU, f16 on a GPU).
    #[arg(long)]
    pub kv_dtype: Option<String>,
    /// Hardware: a preset from models/hardware.toml (h200, rtx-4090, m3-max, …) or `this`
    /// (this machine's RAM, with its calibration profile when `boyd validate` has written one).
    #[arg(long, default_value = "this")]
    pub hw: String,
    /// Override the preset's memory, in GiB (e.g. an M2 Max with 32 GB: --mem-gib 32).
    #[arg(long)]
    pub mem_gib: Option<f64>,
    /// Prefill micro-batch in tokens (sizes the prefill compute buffer and prefill speed).
    #[arg(long, short = 'b', default_value_t = DEFAULT_UBATCH)]
    pub batch: u32,
    /// One row per value instead of a card, e.g. `ctx=512,2048,8192,32768`.
    #[arg(long)]
    pub sweep: Option<String>,
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

/// Assumed peak DRAM bandwidth of an uncalibrated host: dual-channel DDR4-3200
/// (2 × 25.6 GB/s), the common desktop and laptop configuration. Replaced by the measured
/// value once `boyd validate` has written a profile.
pub const ASSUMED_HOST_BANDWIDTH: BytesPerSec = BytesPerSec(51.2e9);

/// Assumed matrix throughput per CPU core of an uncalibrated host, in multiply-add pairs
/// counted as two operations: boyd's CPU matmuls multiply 8-bit codes (AVX2 `vpmaddubsw` or
/// AVX-512 VNNI `vpdpbusd`: 32 multiply-adds per 256-bit instruction, two per cycle, so
/// 128 operations/cycle) at 2.5 GHz. Calibration fits an efficiency on top.
pub const ASSUMED_FLOPS_PER_CORE: f64 = 128.0 * 2.5e9;

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
    let mut hw = hardware(&args, g)?;
    let (arch, weights, default_ctx) = resolve_model(&model, args.quant.as_deref())?;
    if hw.backend == Backend::Cpu {
        // The engine the runtime would pick for this file on the CPU (BOYD_ENGINE, and
        // whether the native kernels cover every tensor type; unknown types count as covered).
        let types = match &weights {
            Weights::Exact { bytes, .. } => bytes.tensor_types.clone().unwrap_or_default(),
            Weights::Params { .. } => Vec::new(),
        };
        hw.compute_layout = EngineKind::from_env().compute_layout(true, types);
    }
    let kv_dtype = match &args.kv_dtype {
        Some(k) => KvDtype::parse(k)?,
        None => hw.backend.runtime_kv_dtype(),
    };
    let ctxs = match &args.sweep {
        Some(spec) => parse_sweep(spec)?,
        None => vec![args
            .ctx
            .unwrap_or(default_ctx.min(arch.context_length).max(1))],
    };
    let mut estimates = Vec::with_capacity(ctxs.len());
    for ctx in ctxs {
        let input = Input {
            arch: arch.clone(),
            weights: weights.clone(),
            ctx,
            kv_dtype,
            ubatch: args.batch,
        };
        estimates.push(sizing::estimate(&input, &hw).with_context(|| format!("sizing {model}"))?);
    }
    let text = if g.json {
        if args.sweep.is_some() {
            serde_json::to_string_pretty(&estimates)? + "\n"
        } else {
            serde_json::to_string_pretty(&estimates.first())? + "\n"
        }
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
        render_check(&check)
    };
    emit(&text)
}

/// The check as a table: every row, then the summaries.
pub fn render_check(c: &crate::sizing::published::Check) -> String {
    use crate::sizing::published::Test;
    let mut s = String::new();
    let sm = &c.summary;
    let _ = writeln!(
        s,
        "published rows: {} speed ({} kept out as outliers) from {} sources, {} memory",
        sm.speed_rows, sm.outliers, sm.sources, sm.memory_rows
    );
    for (class, tests) in &sm.per_class {
        let parts: Vec<String> = tests.iter().map(|(t, n)| format!("{n} {t}")).collect();
        let _ = writeln!(s, "  {class:<18} {}", parts.join(", "));
    }
    let _ = writeln!(
        s,
        "  devices: {}; models: {}; quants: {}",
        sm.devices.join(", "),
        sm.models.join(", "),
        sm.quants.join(", ")
    );
    let _ = writeln!(s);
    let _ = writeln!(
        s,
        "{:<10} {:<12} {:<7} {:<7} {:>8} {:>10} {:>10} {:>10} {:>8}",
        "device", "model", "quant", "test", "tokens", "published", "fit", "held-out", "error"
    );
    for r in &c.rows {
        let test = match r.row.test {
            Test::Tg => "tg",
            Test::Pp => "pp",
        };
        let _ = writeln!(
            s,
            "{:<10} {:<12} {:<7} {:<7} {:>8} {:>10.2} {:>10.2} {:>10.2} {:>+7.1}%{}",
            r.row.device,
            r.row.model,
            r.row.quant,
            test,
            r.row.n_tokens,
            r.row.tok_s,
            r.fitted,
            r.held_out,
            r.held_out_error * 100.0,
            if r.row.outlier.is_some() {
                "  (outlier: not fitted or scored)"
            } else {
                ""
            }
        );
    }
    let _ = writeln!(s);
    let _ = writeln!(
        s,
        "error, leave-one-device-out (each device predicted by a fit that never saw it):"
    );
    let line = |s: &mut String, name: &str, e: &crate::sizing::published::ErrorSummary| {
        let _ = writeln!(
            s,
            "  {name:<22} {:>4} rows  median |error| {:>5.1}%  worst {:>5.1}%  mean {:>+6.1}%",
            e.rows,
            e.median_abs * 100.0,
            e.worst_abs * 100.0,
            e.mean * 100.0
        );
    };
    for (name, e) in &c.errors {
        line(&mut s, name, e);
    }
    for (class, e) in &c.decode_by_class {
        line(&mut s, &format!("tg {class}"), e);
    }
    let _ = writeln!(s);
    let _ = writeln!(
        s,
        "depth: decode slowdown from the shortest to the longest tg run"
    );
    for d in &c.depth {
        let _ = writeln!(
            s,
            "  {:<10} {:<12} {:<7} tg{}->tg{}  published {:>5.1}%  predicted {:>5.1}%  ({:+.1} points)",
            d.device,
            d.model,
            d.quant,
            d.from_tokens,
            d.to_tokens,
            d.published * 100.0,
            d.predicted * 100.0,
            (d.predicted - d.published) * 100.0
        );
    }
    let _ = writeln!(s);
    let _ = writeln!(s, "memory: boyd's terms against llama.cpp's load reports");
    for m in &c.memory {
        let _ = writeln!(
            s,
            "  {:<10} {:<26} {:<21} published {:>9.2}  boyd {:>9.2} {:<9} {:>+6.1}%",
            m.device,
            m.what,
            m.term,
            m.published,
            m.predicted,
            m.unit,
            m.error * 100.0
        );
    }
    let _ = writeln!(s);
    let _ = writeln!(
        s,
        "fitted terms (the presets' defaults; seconds per token = sum of coefficient x term):"
    );
    const DECODE: [&str; 8] = [
        "bytes/BW",
        "bytes/matrix",
        "quantized weights/matrix",
        "bytes x 1e-12",
        "1 (fixed s)",
        "layers (s)",
        "attention FLOPs/matrix",
        "attention FLOPs x 1e-15",
    ];
    const PREFILL: [&str; 4] = [
        "matmul FLOPs/matrix",
        "attention FLOPs/matrix",
        "matmul FLOPs x 1e-15",
        "attention FLOPs x 1e-15",
    ];
    for f in &c.fits {
        let terms = |names: &[&str], coef: &[f64]| {
            names
                .iter()
                .zip(coef)
                .map(|(n, c)| format!("{c:.4e} {n}"))
                .collect::<Vec<_>>()
                .join(" + ")
        };
        let _ = writeln!(
            s,
            "  {} decode  ({} rows): {}",
            f.backend.name(),
            f.decode_rows,
            terms(&DECODE, &f.decode)
        );
        let _ = writeln!(
            s,
            "  {} prefill ({} rows): {}",
            f.backend.name(),
            f.prefill_rows,
            terms(&PREFILL, &f.prefill)
        );
    }
    s
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

/// Parse `ctx=512,2048,…` (the `ctx=` prefix is optional).
pub fn parse_sweep(spec: &str) -> anyhow::Result<Vec<u32>> {
    let list = match spec.split_once('=') {
        Some((key, list)) if key.trim() == "ctx" => list,
        Some((key, _)) => {
            bail!("--sweep {key}=…: only ctx can be swept (e.g. --sweep ctx=512,8192)")
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

/// Architecture, weights and the default context for MODEL.
pub(super) fn resolve_model(
    model: &str,
    quant: Option<&str>,
) -> anyhow::Result<(ArchParams, Weights, u32)> {
    const DEFAULT_CTX: u32 = 8192;
    let path = Path::new(model);
    let is_gguf = path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("gguf"));
    let is_json = path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("json"));
    if is_gguf {
        if quant.is_some() {
            tracing::warn!("--quant is ignored for a .gguf: its tensor sizes are exact");
        }
        let (arch, bytes, label) = from_gguf(path)?;
        return Ok((arch, Weights::Exact { bytes, label }, DEFAULT_CTX));
    }
    if is_json {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        let m = hf_config::parse(&text).with_context(|| format!("{}", path.display()))?;
        let quant = quant.with_context(|| {
            format!(
                "{} gives the shape but not the quantization; add --quant (e.g. --quant Q4_K_M)",
                path.display()
            )
        })?;
        let quant = Quant::parse(quant)?;
        return Ok((
            m.arch,
            Weights::Params {
                params: m.params,
                quant,
            },
            DEFAULT_CTX,
        ));
    }
    let store = Store::from_env().ok();
    let catalog = match &store {
        Some(store) => Catalog::load_from(Some(&store.models_dir()))?,
        None => Catalog::shipped()?,
    };
    if catalog.get(model).is_none() && path.exists() {
        bail!("{model} is neither a catalog name nor a .gguf or config.json file");
    }
    // An unknown name is an error listing the known ones.
    let entry = catalog.require(model)?;
    let same_quant = quant.is_none_or(|q| q.eq_ignore_ascii_case(&entry.quant));
    if same_quant {
        // The shipped file is already in the store: its header gives exact sizes.
        let local = store
            .as_ref()
            .and_then(|s| s.entry_path(entry))
            .filter(|p| p.is_file());
        if let Some(file) = local {
            match from_gguf(&file) {
                Ok((arch, bytes, label)) => {
                    return Ok((arch, Weights::Exact { bytes, label }, DEFAULT_CTX))
                }
                Err(e) => {
                    tracing::warn!("{}: {e:#}; sizing from the catalog entry", file.display())
                }
            }
        }
        // Not downloaded: the catalog's file size gives the file's real bits per weight.
        if let Some(src) = entry
            .source
            .as_ref()
            .filter(|s| s.size > 0 && entry.params > 0)
        {
            let bpw = src.size as f64 * 8.0 / entry.params as f64;
            let quant = Quant {
                name: entry.quant.clone(),
                bits_per_weight: bpw,
                source: format!(
                    "catalog file size {} bytes over {} params (includes the GGUF header)",
                    src.size, entry.params
                ),
            };
            return Ok((
                entry.arch.clone(),
                Weights::Params {
                    params: entry.params,
                    quant,
                },
                DEFAULT_CTX,
            ));
        }
    }
    let quant = Quant::parse(quant.unwrap_or(&entry.quant))?;
    Ok((
        entry.arch.clone(),
        Weights::Params {
            params: entry.params,
            quant,
        },
        DEFAULT_CTX,
    ))
}

/// Architecture and exact weight bytes from a GGUF header (no tensor data is read).
pub fn from_gguf(path: &Path) -> anyhow::Result<(ArchParams, sizing::WeightBytes, String)> {
    let header = GgufHeader::read_path(path)
        .with_context(|| format!("cannot read the GGUF header of {}", path.display()))?;
    let arch = header.arch_params()?;
    let bytes = weights::from_tensors(
        header
            .tensors
            .iter()
            .map(|t| (t.name.as_str(), t.ggml_type, t.dims.as_slice())),
    )?;
    Ok((arch, bytes, gguf_quant_label(&header)))
}

/// The file's quantization: the `general.file_type` name when known, else the type holding
/// the most bytes.
fn gguf_quant_label(header: &GgufHeader) -> String {
    if let Some(ft) = header.get("general.file_type").and_then(|v| v.as_u64()) {
        if let Some(name) = file_type_name(ft) {
            return name.to_owned();
        }
    }
    let mut by_type: Vec<(GgmlType, u64)> = Vec::new();
    for t in &header.tensors {
        match by_type.iter_mut().find(|(ty, _)| *ty == t.ggml_type) {
            Some((_, b)) => *b += t.bytes,
            None => by_type.push((t.ggml_type, t.bytes)),
        }
    }
    by_type
        .into_iter()
        .max_by_key(|&(_, b)| b)
        .map_or_else(|| "unknown".to_owned(), |(t, _)| t.name().to_owned())
}

/// llama.cpp's `llama_ftype` values (`general.file_type`) for the common mixes.
fn file_type_name(ft: u64) -> Option<&'static str> {
    Some(match ft {
        0 => "F32",
        1 => "F16",
        2 => "Q4_0",
        3 => "Q4_1",
        7 => "Q8_0",
        8 => "Q5_0",
        9 => "Q5_1",
        10 => "Q2_K",
        11 => "Q3_K_S",
        12 => "Q3_K_M",
        13 => "Q3_K_L",
        14 => "Q4_K_S",
        15 => "Q4_K_M",
        16 => "Q5_K_S",
        17 => "Q5_K_M",
        18 => "Q6_K",
        19 => "IQ2_XXS",
        20 => "IQ2_XS",
        21 => "Q2_K_S",
        22 => "IQ3_XS",
        23 => "IQ3_XXS",
        24 => "IQ1_S",
        25 => "IQ4_NL",
        26 => "IQ3_S",
        27 => "IQ3_M",
        28 => "IQ2_S",
        29 => "IQ2_M",
        30 => "IQ4_XS",
        31 => "IQ1_M",
        32 => "BF16",
        36 => "TQ1_0",
        37 => "TQ2_0",
        _ => return None,
    })
}

/// The hardware to size for: a preset, or `this` machine.
fn hardware(args: &Args, g: &GlobalOpts) -> anyhow::Result<Hardware> {
    let mut hw = if args.hw.eq_ignore_ascii_case("this") {
        this_machine(&g.device)?
    } else {
        Hardware::preset(&args.hw)?
    };
    if let Some(gib) = args.mem_gib {
        if !(gib.is_finite() && gib > 0.0 && gib < 1e9) {
            bail!("--mem-gib {gib}: must be a positive number of GiB");
        }
        let memory = Bytes((gib * Bytes::GIB as f64) as u64);
        hw.memory = memory;
        hw.free = Bytes((memory.0 as f64 * hw.usable_fraction) as u64);
    }
    Ok(hw)
}

/// This machine: total and available RAM from /proc/meminfo, cores for the FLOP estimate,
/// bandwidth assumed — or measured, when a calibration profile exists for `device`.
fn this_machine(device: &str) -> anyhow::Result<Hardware> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").context(
        "cannot read /proc/meminfo to size for this machine; pick a preset with --hw (see --list-hw)",
    )?;
    let (total, available) = parse_meminfo(&meminfo)
        .context("/proc/meminfo has no MemTotal; pick a preset with --hw")?;
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let hw = Hardware::new(
        "this",
        &format!("this machine ({cores} CPU threads)"),
        Backend::Cpu,
        total,
        1.0,
        ASSUMED_HOST_BANDWIDTH,
        cores as f64 * ASSUMED_FLOPS_PER_CORE,
        "RAM from /proc/meminfo (MemAvailable as free); bandwidth assumed 51.2 GB/s \
         (dual-channel DDR4-3200) and 320 G int8 op/s per thread until `boyd validate` calibrates",
    )?
    .with_free(available.unwrap_or(total))
    .with_threads(cores);
    match load_profile(device)? {
        Some((path, p)) if p.backend == Backend::Cpu => {
            tracing::info!(profile = %path.display(), "using calibration profile");
            Ok(p.apply(hw))
        }
        Some((path, p)) => {
            tracing::warn!(
                profile = %path.display(),
                backend = %p.backend,
                "calibration profile is for another backend; --hw this sizes the CPU host"
            );
            Ok(hw)
        }
        None => Ok(hw),
    }
}

/// `(MemTotal, MemAvailable)` from the text of /proc/meminfo.
pub fn parse_meminfo(text: &str) -> Option<(Bytes, Option<Bytes>)> {
    let field = |key: &str| -> Option<Bytes> {
        let line = text.lines().find(|l| l.starts_with(key))?;
        let rest = line[key.len()..].trim_start_matches(':').trim();
        let kib: u64 = rest.split_whitespace().next()?.parse().ok()?;
        kib.checked_mul(1024).map(Bytes)
    };
    Some((field("MemTotal")?, field("MemAvailable")))
}

/// Where the calibration profile for `device` lives: `$BOYD_HOME/profiles/<device>.toml`.
pub fn profile_path(device: &str) -> anyhow::Result<PathBuf> {
    Ok(Store::from_env()?
        .root()
        .join(Profile::relative_path(device)))
}

/// The calibration profile for `device`, if `boyd validate` has written one.
pub fn load_profile(device: &str) -> anyhow::Result<Option<(PathBuf, Profile)>> {
    let Ok(path) = profile_path(device) else {
        return Ok(None);
    };
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
    };
    let p = Profile::from_toml(&text).with_context(|| {
        format!(
            "{} (delete it or run `boyd validate` again)",
            path.display()
        )
    })?;
    Ok(Some((path, p)))
}

/// Write `profile` where [`load_profile`] finds it (for `boyd validate`).
pub fn save_profile(profile: &Profile) -> anyhow::Result<PathBuf> {
    let path = profile_path(&profile.device)?;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    let tmp = path.with_extension("toml.tmp");
    std::fs::write(&tmp, profile.to_toml()?)
        .with_context(|| format!("cannot write {}", tmp.display()))?;
    std::fs::rename(&tmp, &path).with_context(|| format!("cannot write {}", path.display()))?;
    Ok(path)
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
    let window = match e.kv.window {
        Some(w) => format!(
            ", {} of {} layers capped at {w}",
            e.kv.sliding_layers, a.n_layers
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
        assert!(parse_sweep("ctx=0").is_err());
        assert!(parse_sweep("ctx=abc").is_err());
        assert!(parse_sweep("ctx=99999999999").is_err());
    }

    #[test]
    fn meminfo_parses_total_and_available() {
        let text =
            "MemTotal:       16318480 kB\nMemFree:         1000 kB\nMemAvailable:   8000000 kB\n";
        assert_eq!(
            parse_meminfo(text),
            Some((Bytes(16_318_480 * 1024), Some(Bytes(8_000_000 * 1024))))
        );
        assert_eq!(parse_meminfo("MemFree: 1 kB"), None);
    }
}
