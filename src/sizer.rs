//! The sizing model applied to a named model on named hardware: the I/O in front of the pure
//! [`crate::sizing`] functions. It resolves a model spec (catalog name, Hugging Face
//! `config.json`, or a `.gguf` whose header alone is read), a hardware name (a preset or `this`
//! machine, with its calibration profile), and answers with an [`Estimate`]. `boyd size` and
//! the agent's `size_model` tool both come through here, so they print the same numbers.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context as _};

use crate::catalog::Catalog;
pub use crate::hw::host::{ASSUMED_FLOPS_PER_CORE, ASSUMED_HOST_BANDWIDTH};
use crate::hw::ProbeError;
use crate::runtime::decoder::EngineKind;
use crate::runtime::gguf::GgufHeader;
use crate::sizing::{
    self, hf_config, weights, ArchParams, Backend, ComputeLayout, Estimate, GgmlType, Hardware,
    Input, KvDtype, Profile, Quant, Weights, DEFAULT_UBATCH,
};
use crate::store::Store;
use crate::units::{Bytes, BytesPerSec};

/// One sizing question: a model, how it is stored, how much context, on which hardware.
#[derive(Debug, Clone, PartialEq)]
pub struct SizeQuery {
    /// Catalog name, `config.json` path or `.gguf` path.
    pub model: String,
    /// Quantization (file mix, GGML type or bits per weight); `None` = the catalog entry's.
    pub quant: Option<String>,
    /// Context length; `None` = 8192 capped at the model's training context.
    pub ctx: Option<u32>,
    /// KV cache type name; `None` = what the runtime allocates on the hardware's backend.
    pub kv_dtype: Option<String>,
    /// A hardware preset name or `this`.
    pub hw: String,
    /// Memory override in GiB.
    pub mem_gib: Option<f64>,
    /// Prefill micro-batch.
    pub ubatch: u32,
    /// The device whose calibration profile `this` uses (`cpu`, `cuda:0`, …).
    pub device: String,
    /// The CPU engine the runtime would pick (the CLI reads `BOYD_ENGINE` into it).
    pub engine: EngineKind,
    /// Size llama.cpp's `-ngl N` split on a CUDA device (`None`: only when the model does not
    /// fit, the split with the most layers on the GPU).
    pub ngl: Option<u32>,
    /// Host memory bandwidth for the layers left on the CPU, GB/s (default: assumed).
    pub host_bw_gbs: Option<f64>,
    /// Host RAM free for the layers left on the CPU, GiB (default: unknown for a preset).
    pub host_mem_gib: Option<f64>,
}

impl SizeQuery {
    /// A query with the defaults `boyd size` uses.
    pub fn new(model: &str, hw: &str) -> Self {
        Self {
            model: model.to_string(),
            quant: None,
            ctx: None,
            kv_dtype: None,
            hw: hw.to_string(),
            mem_gib: None,
            ubatch: DEFAULT_UBATCH,
            device: "cpu".into(),
            engine: EngineKind::default(),
            ngl: None,
            host_bw_gbs: None,
            host_mem_gib: None,
        }
    }
}

/// Answer `q` at each of `ctxs` (one estimate per context; empty = the query's own context).
pub fn estimate_all(q: &SizeQuery, ctxs: &[u32]) -> anyhow::Result<Vec<Estimate>> {
    let hw = hardware(&q.hw, &q.device, q.mem_gib)?;
    let model = resolve_model(&q.model, q.quant.as_deref())?;
    estimate_model(q, ctxs, hw, model)
}

/// Answer `q` at its own context for the model whose Hugging Face `config.json` text is
/// `config` (already read by the caller: the agent's `size_model` reads it through the
/// workspace sandbox); `q.model` only names it in errors, `q.quant` is required.
pub fn estimate_config(q: &SizeQuery, config: &str) -> anyhow::Result<Estimate> {
    let hw = hardware(&q.hw, &q.device, q.mem_gib)?;
    let model = model_from_config(&q.model, config, q.quant.as_deref())?;
    estimate_model(q, &[], hw, model)?
        .into_iter()
        .next()
        .context("no estimate")
}

/// Most bytes of a `config.json` read (real ones are a few KiB; the agent's file tools read
/// at most as much of any file).
pub const CONFIG_MAX_BYTES: u64 = 4 * 1024 * 1024;

fn estimate_model(
    q: &SizeQuery,
    ctxs: &[u32],
    mut hw: Hardware,
    (arch, weights, default_ctx): (ArchParams, Weights, u32),
) -> anyhow::Result<Vec<Estimate>> {
    if hw.backend == Backend::Cpu {
        // The engine the runtime would pick for this file on the CPU (BOYD_ENGINE, and
        // whether the native kernels cover every tensor type; unknown types count as covered).
        let types = match &weights {
            Weights::Exact { bytes, .. } => bytes.tensor_types.clone().unwrap_or_default(),
            Weights::Params { .. } => Vec::new(),
        };
        hw.compute_layout = q.engine.compute_layout(true, types);
    }
    let kv_dtype = match &q.kv_dtype {
        Some(k) => KvDtype::parse(k)?,
        // candle's CPU engine keeps f32 (see `runtime::fit::runtime_kv_dtype`).
        None if hw.backend == Backend::Cpu && hw.compute_layout != ComputeLayout::Native => {
            KvDtype::F32
        }
        None => hw.backend.runtime_kv_dtype(),
    };
    let ctxs = if ctxs.is_empty() {
        vec![q.ctx.unwrap_or(default_ctx.min(arch.context_length).max(1))]
    } else {
        ctxs.to_vec()
    };
    let mut out = Vec::with_capacity(ctxs.len());
    for ctx in ctxs {
        let input = Input {
            arch: arch.clone(),
            weights: weights.clone(),
            ctx,
            kv_dtype,
            ubatch: q.ubatch,
        };
        let mut e = sizing::estimate(&input, &hw).with_context(|| format!("sizing {}", q.model))?;
        e.offload = offload_for(q, &input, &hw, e.fits)?;
        out.push(e);
    }
    Ok(out)
}

/// Answer `q` at its own context once per `-ngl` value in `ngls`.
pub fn estimate_ngl_sweep(q: &SizeQuery, ngls: &[u32]) -> anyhow::Result<Vec<Estimate>> {
    ngls.iter()
        .map(|&n| {
            let q = SizeQuery {
                ngl: Some(n),
                ..q.clone()
            };
            estimate(&q)
        })
        .collect()
}

/// The partial-offload split for `input` on `hw`: the asked `-ngl`, or, when the model does
/// not fit on a CUDA device, the split with the most layers on it. Metal shares one memory
/// with the CPU and the CPU has nothing to offload to, so neither gets one.
fn offload_for(
    q: &SizeQuery,
    input: &Input,
    hw: &Hardware,
    fits: bool,
) -> anyhow::Result<Option<sizing::offload::Offload>> {
    if hw.backend != Backend::Cuda {
        if q.ngl.is_some() {
            bail!(
                "--ngl sizes a split between a CUDA GPU and the host; {} is a {} device",
                hw.name,
                hw.backend
            );
        }
        return Ok(None);
    }
    if fits && q.ngl.is_none() {
        return Ok(None);
    }
    let host = offload_host(q)?;
    let link = sizing::offload::Link::pcie4_x16();
    let (w, _) = sizing::weight_bytes(input)?;
    let (a, kv, ctx, ub) = (&input.arch, input.kv_dtype, input.ctx, input.ubatch);
    Ok(match q.ngl {
        Some(n) => Some(sizing::offload::split(
            a, &w, kv, ctx, ub, hw, &host, &link, n,
        )?),
        None => sizing::offload::best_split(a, &w, kv, ctx, ub, hw, &host, &link)?,
    })
}

/// The host of a partial offload: `--host-bw` or the assumed desktop bandwidth, the CPU's
/// hand-set speed terms, and `--host-mem-gib` as its free RAM (unknown otherwise: a preset GPU
/// says nothing about the machine it sits in).
pub fn offload_host(q: &SizeQuery) -> anyhow::Result<sizing::offload::Host> {
    let bw = match q.host_bw_gbs {
        Some(g) if g.is_finite() && g > 0.0 && g < 1e6 => g * 1e9,
        Some(g) => bail!("--host-bw {g}: must be a positive number of GB/s"),
        None => ASSUMED_HOST_BANDWIDTH.0,
    };
    let free = match q.host_mem_gib {
        Some(g) if g.is_finite() && g > 0.0 && g < 1e9 => {
            Some(Bytes((g * Bytes::GIB as f64) as u64))
        }
        Some(g) => bail!("--host-mem-gib {g}: must be a positive number of GiB"),
        None => None,
    };
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let source = match q.host_bw_gbs {
        Some(g) => format!("host bandwidth {g} GB/s (--host-bw), CPU speed terms hand-set"),
        None => "host bandwidth assumed 51.2 GB/s (dual-channel DDR4-3200; --host-bw to set), \
                 CPU speed terms hand-set"
            .to_owned(),
    };
    let hw = Hardware::new(
        "host",
        "the GPU's host CPU",
        Backend::Cpu,
        free.unwrap_or(Bytes(1 << 50)),
        1.0,
        BytesPerSec(bw),
        cores as f64 * ASSUMED_FLOPS_PER_CORE,
        &source,
    )?;
    Ok(sizing::offload::Host { hw, free })
}

/// The catalog's model names (shipped entries).
pub fn catalog_model_names() -> Vec<String> {
    Catalog::shipped()
        .map(|c| c.names().map(str::to_owned).collect())
        .unwrap_or_default()
}

/// Answer `q` at its own context.
pub fn estimate(q: &SizeQuery) -> anyhow::Result<Estimate> {
    estimate_all(q, &[])?
        .into_iter()
        .next()
        .context("no estimate")
}

/// Architecture, weights and the default context for MODEL.
pub fn resolve_model(
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
        let text = read_config(path)?;
        return model_from_config(&path.display().to_string(), &text, quant);
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

/// The shape of the model whose `config.json` text (named `label` in errors) is `text`, at
/// `quant`.
fn model_from_config(
    label: &str,
    text: &str,
    quant: Option<&str>,
) -> anyhow::Result<(ArchParams, Weights, u32)> {
    const DEFAULT_CTX: u32 = 8192;
    let m = hf_config::parse(text).with_context(|| label.to_owned())?;
    let quant = quant.with_context(|| {
        format!(
            "{label} gives the shape but not the quantization; add --quant (e.g. --quant Q4_K_M)"
        )
    })?;
    let quant = Quant::parse(quant)?;
    Ok((
        m.arch,
        Weights::Params {
            params: m.params,
            quant,
        },
        DEFAULT_CTX,
    ))
}

/// The text of the `config.json` at `path`, read with a bound: only a regular file (a FIFO or
/// device is refused from its metadata, and the open does not block in case one is swapped
/// in), at most [`CONFIG_MAX_BYTES`] (a larger file is refused before it is read, and the read
/// stops there whatever the size said).
fn read_config(path: &Path) -> anyhow::Result<String> {
    use std::io::Read as _;
    let shown = path.display();
    let not_regular = || {
        anyhow::anyhow!(
            "{shown} is not a regular file (a directory, FIFO, socket or device); give a config.json file"
        )
    };
    let too_large = |size: u64| {
        anyhow::anyhow!(
            "{shown} is {size} bytes, more than the {CONFIG_MAX_BYTES} bytes a config.json may have; give the model's config.json"
        )
    };
    let before = std::fs::metadata(path).with_context(|| format!("cannot read {shown}"))?;
    if !before.is_file() {
        return Err(not_regular());
    }
    if before.len() > CONFIG_MAX_BYTES {
        return Err(too_large(before.len()));
    }
    let mut opts = std::fs::OpenOptions::new();
    opts.read(true);
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY);
    }
    let file = opts
        .open(path)
        .with_context(|| format!("cannot read {shown}"))?;
    let meta = file
        .metadata()
        .with_context(|| format!("cannot read {shown}"))?;
    if !meta.is_file() {
        return Err(not_regular());
    }
    let mut bytes = Vec::with_capacity(meta.len().min(CONFIG_MAX_BYTES) as usize);
    file.take(CONFIG_MAX_BYTES + 1)
        .read_to_end(&mut bytes)
        .with_context(|| format!("cannot read {shown}"))?;
    if bytes.len() as u64 > CONFIG_MAX_BYTES {
        return Err(too_large(bytes.len() as u64));
    }
    String::from_utf8(bytes)
        .map_err(|_| anyhow::anyhow!("{shown} is not UTF-8 text; give a config.json file"))
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

/// The hardware to size for: a preset name, `this` machine (with the calibration profile of
/// `device` when `boyd validate` wrote one), or hardware as people write it ("24 GB GPU",
/// "RTX 3060 12 GB", "MacBook Pro M3 Max 64 GB": [`sizing::described`]); `mem_gib` overrides
/// the memory size.
pub fn hardware(name: &str, device: &str, mem_gib: Option<f64>) -> anyhow::Result<Hardware> {
    let mut hw = if name.trim().eq_ignore_ascii_case("this") {
        this_machine(device)?
    } else {
        match Hardware::preset(name) {
            Ok(h) => h,
            // Not a preset's name: hardware as people write it ("24 GB GPU", "M2 Ultra").
            Err(_) => sizing::described::described(name, &Hardware::presets()?)?,
        }
    };
    if let Some(gib) = mem_gib {
        if !(gib.is_finite() && gib > 0.0 && gib < 1e9) {
            bail!("--mem-gib {gib}: must be a positive number of GiB");
        }
        hw = hw.with_memory(Bytes((gib * Bytes::GIB as f64) as u64));
    }
    Ok(hw)
}

/// What `--hw this` learns about the machine: the GPU at `--device` (when it is one and can
/// be opened) and the host as [`crate::hw::this_machine`] reads it (its RAM from
/// /proc/meminfo and its CPU threads). Gathered by [`MachineFacts::probe`]; tests build it by
/// hand.
#[derive(Debug)]
pub struct MachineFacts {
    /// The GPU the model would run on.
    pub gpu: Option<GpuFacts>,
    /// This host as sizing hardware, or why it could not be read.
    pub host: Result<Hardware, ProbeError>,
}

/// A GPU as its driver reports it.
#[derive(Debug, Clone, PartialEq)]
pub struct GpuFacts {
    /// Backend.
    pub backend: Backend,
    /// Driver's device name (`NVIDIA GeForce RTX 4090`).
    pub name: String,
    /// Total device memory.
    pub total: Bytes,
    /// Free device memory now.
    pub free: Bytes,
}

impl MachineFacts {
    /// Probe this machine for `device` (`cpu`, `cuda`, `cuda:N`, `metal`, `auto`): only a
    /// non-CPU spec opens a GPU; the host is always read (an unreadable /proc/meminfo is kept
    /// as its error).
    pub fn probe(device: &str) -> Self {
        use crate::hw::DeviceProbe as _;
        let gpu = if device == "cpu" {
            None
        } else {
            crate::hw::Probe::for_device(device)
                .ok()
                .filter(|p| p.backend() != Backend::Cpu)
                .and_then(|p| {
                    let m = p.memory().ok()?;
                    Some(GpuFacts {
                        backend: p.backend(),
                        name: p.name(),
                        total: m.total,
                        free: m.free,
                    })
                })
        };
        Self {
            gpu,
            host: crate::hw::this_machine(),
        }
    }
}

/// This machine for `device`: its GPU when `device` names one that opened (the matching
/// preset, or the driver's figures, with the driver's free memory), else the host's RAM from
/// /proc/meminfo; with the calibration profile `boyd validate` saved for `device` when its
/// backend matches.
pub fn this_machine(device: &str) -> anyhow::Result<Hardware> {
    this_machine_from(&MachineFacts::probe(device), load_profile(device)?)
}

/// [`this_machine`] from gathered facts and the saved profile (no I/O).
pub fn this_machine_from(
    facts: &MachineFacts,
    profile: Option<(PathBuf, Profile)>,
) -> anyhow::Result<Hardware> {
    let hw = match &facts.gpu {
        Some(g) => Hardware::for_gpu(&g.name, g.backend, g.total, g.free)?,
        None => facts.host.as_ref().map(Hardware::clone).map_err(|e| {
            anyhow::anyhow!(
                "{e}: cannot size this machine; pick a preset with --hw (see --list-hw)"
            )
        })?,
    };
    match profile {
        Some((path, p)) if p.backend == hw.backend => {
            tracing::info!(profile = %path.display(), "using calibration profile");
            Ok(p.apply(hw))
        }
        Some((path, p)) => {
            tracing::warn!(
                profile = %path.display(),
                backend = %p.backend,
                "calibration profile is for another backend; not applied to {}",
                hw.backend
            );
            Ok(hw)
        }
        None => Ok(hw),
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn profile(backend: Backend, device: &str) -> (PathBuf, Profile) {
        let p = Profile {
            version: crate::sizing::profile::PROFILE_VERSION,
            device: device.into(),
            backend,
            description: "test".into(),
            measured_at: "2026-12-01T00:00:00Z".into(),
            boyd_version: "test".into(),
            memory_total: None,
            bandwidth: BytesPerSec(900e9),
            matrix_flops: None,
            decode_efficiency: 0.7,
            prefill_efficiency: 0.4,
            fixed_cost_s: 1e-3,
            per_layer_cost_s: 0.0,
            model: None,
            overhead: None,
        };
        (PathBuf::from(format!("profiles/{device}.toml")), p)
    }

    const MEMINFO: &str = "MemTotal: 16318480 kB\nMemAvailable: 8000000 kB\n";

    /// A host whose /proc/meminfo could not be read.
    fn unreadable_host() -> Result<Hardware, ProbeError> {
        Err(ProbeError::System {
            what: "/proc/meminfo",
            reason: "test".into(),
        })
    }

    #[test]
    fn this_on_a_cuda_host_sizes_the_gpu_with_its_free_memory_and_profile() {
        let facts = MachineFacts {
            gpu: Some(GpuFacts {
                backend: Backend::Cuda,
                name: "NVIDIA GeForce RTX 4090".into(),
                total: Bytes(24_564 * Bytes::MIB),
                free: Bytes(20 * Bytes::GIB),
            }),
            host: unreadable_host(),
        };
        // No /proc/meminfo needed: the GPU is what is sized.
        let hw = this_machine_from(&facts, None).expect("gpu");
        assert_eq!((hw.name.as_str(), hw.backend), ("rtx-4090", Backend::Cuda));
        assert_eq!(hw.free, Bytes(20 * Bytes::GIB));
        assert!(hw.speed.source.contains("published"), "{}", hw.speed.source);
        // The GPU's saved calibration profile replaces the speed terms and bandwidth.
        let hw = this_machine_from(&facts, Some(profile(Backend::Cuda, "cuda"))).expect("gpu");
        assert_eq!(hw.bandwidth, BytesPerSec(900e9));
        assert_eq!(hw.speed.decode_efficiency, 0.7);
        // A CPU profile is not applied to the GPU.
        let hw = this_machine_from(&facts, Some(profile(Backend::Cpu, "cuda"))).expect("gpu");
        assert_eq!(hw.bandwidth.0, 1008e9);
        // A GPU no preset describes: the driver's memory, assumed speed figures.
        let odd = MachineFacts {
            gpu: Some(GpuFacts {
                name: "Tesla T4".into(),
                total: Bytes(15 * Bytes::GIB),
                free: Bytes(14 * Bytes::GIB),
                ..facts.gpu.clone().expect("gpu")
            }),
            host: unreadable_host(),
        };
        let hw = this_machine_from(&odd, None).expect("t4");
        assert_eq!(
            (hw.name.as_str(), hw.description.as_str()),
            ("this", "Tesla T4")
        );
        assert_eq!(
            (hw.memory, hw.free),
            (Bytes(15 * Bytes::GIB), Bytes(14 * Bytes::GIB))
        );
    }

    #[test]
    fn this_on_the_cpu_needs_meminfo_and_presets_never_do() {
        let cpu = MachineFacts {
            gpu: None,
            host: Ok(crate::hw::host::host_hardware(
                crate::hw::HostMemory::parse(MEMINFO).expect("meminfo"),
                4,
            )
            .expect("host")),
        };
        let hw = this_machine_from(&cpu, Some(profile(Backend::Cpu, "cpu"))).expect("cpu");
        assert_eq!(hw.backend, Backend::Cpu);
        assert_eq!(hw.free, Bytes(8_000_000 * 1024));
        assert_eq!(hw.bandwidth, BytesPerSec(900e9), "the CPU profile applies");
        let unreadable = MachineFacts {
            host: unreadable_host(),
            ..cpu
        };
        let err = this_machine_from(&unreadable, None).expect_err("no meminfo");
        assert!(format!("{err:#}").contains("--hw"), "{err:#}");
        // A preset is sized from the embedded table alone.
        let hw = hardware("rtx-4090", "cpu", None).expect("preset");
        assert_eq!(hw.free, hw.memory);
    }

    #[test]
    fn a_model_that_does_not_fit_a_cuda_preset_gets_a_partial_offload() {
        let mut q = SizeQuery::new("llama-3.1-70b", "rtx-4090");
        q.quant = Some("Q4_K_M".into());
        q.ctx = Some(8192);
        q.host_mem_gib = Some(64.0);
        let e = estimate(&q).expect("estimate");
        let o = e.offload.expect("offload");
        assert!(o.fits_gpu && o.ngl > 0 && o.gpu_layers < 80, "{o:?}");
        assert_eq!(o.fits_host, Some(true));
        assert!(o.decode_empty.0 > 0.5 && o.decode_empty.0 < e.speed.decode_empty.0);
        // An asked split is sized whether or not it fits.
        q.ngl = Some(81);
        let all = estimate(&q).expect("estimate").offload.expect("offload");
        assert!(!all.fits_gpu);
        let sweep = estimate_ngl_sweep(&q, &[0, 40, 81]).expect("sweep");
        let speeds: Vec<f64> = sweep
            .iter()
            .map(|e| e.offload.as_ref().expect("o").decode_empty.0)
            .collect();
        assert!(speeds[0] < speeds[1] && speeds[1] < speeds[2], "{speeds:?}");
        // A model that fits gets none, and Metal refuses --ngl.
        let small = SizeQuery {
            quant: Some("Q4_K_M".into()),
            ..SizeQuery::new("llama-3.1-8b", "rtx-4090")
        };
        assert!(estimate(&small).expect("e").offload.is_none());
        let metal = SizeQuery {
            ngl: Some(10),
            ..SizeQuery::new("llama-3.1-8b", "m3-max")
        };
        assert!(estimate(&metal).is_err());
    }

    #[test]
    fn a_catalog_model_on_a_preset_is_sized_without_this_machine() {
        let mut q = SizeQuery::new("llama-3.1-70b", "rtx-4090");
        q.quant = Some("Q4_K_M".into());
        q.ctx = Some(8192);
        let e = estimate(&q).expect("estimate");
        assert!(!e.fits, "70B at Q4_K_M cannot fit in 24 GB");
        assert!(e.shortfall.is_some());
        assert_eq!(e.ctx, 8192);
    }
}
