//! Hardware: the device a model is sized for, its backend, and the backend's fixed costs.
//!
//! Presets live in `models/hardware.toml` (embedded at build time); `this`, the probed machine,
//! is built by the CLI from what it reads about the host and passed in as a plain
//! [`Hardware`] value, so this module stays free of I/O. Every constant that is an assumption
//! rather than a specification says so, and names where it comes from; `boyd validate`
//! replaces the speed assumptions and the process (or GPU context) overhead with a measured
//! [`crate::sizing::Profile`].

use std::borrow::Cow;

use serde::{Deserialize, Serialize};

use super::compute::ComputeLayout;
use super::error::SizingError;
use super::kv::KvDtype;
use super::weights::EmbeddingPolicy;
use crate::units::{Bytes, BytesPerSec};

/// The shipped presets file.
const PRESETS_TOML: &str = include_str!("../../models/hardware.toml");

/// Which compute backend runs the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    /// Host CPU, weights in system RAM.
    Cpu,
    /// NVIDIA GPU through CUDA.
    Cuda,
    /// Apple GPU through Metal (unified memory).
    Metal,
}

/// Host process baseline: the boyd binary's resident pages, allocator arenas and the thread
/// pools. Measured: `boyd validate` (release build, x86-64 Linux, SmolLM2-135M) read an RSS of
/// 8.9 MiB before loading the model; rounded up to 16 MiB for what a run adds besides the
/// decoder (tokenizer tables, which validate does not load; the async runtime; agent state).
/// A calibration profile replaces it with the value measured on the machine.
pub const PROCESS_BASELINE: Bytes = Bytes(16 * Bytes::MIB);

/// Device memory a CUDA context takes before any allocation: 300–600 MiB depending on GPU,
/// driver and `CUDA_MODULE_LOADING` (what `nvidia-smi` shows for an idle process; NVIDIA's
/// CUDA C++ Programming Guide, "Lazy Loading", describes the eager/lazy difference). Upper
/// end taken, plus candle's compiled kernels.
pub const CUDA_CONTEXT: Bytes = Bytes(512 * Bytes::MIB);

/// cuBLAS workspace: 32 MiB on Hopper, 4 MiB on earlier GPUs (cuBLAS documentation,
/// `cublasSetWorkspace`: default workspace sizes). The larger value is used for every CUDA
/// device.
pub const CUBLAS_WORKSPACE: Bytes = Bytes(32 * Bytes::MIB);

/// Metal device, command queue and compiled compute pipelines of candle's kernel library.
/// Assumption (tens of MiB of shader binaries and driver state), to be measured.
pub const METAL_CONTEXT: Bytes = Bytes(64 * Bytes::MIB);

/// One named overhead term.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OverheadItem {
    /// Short name (`cuda-context`, …).
    pub name: &'static str,
    /// Bytes.
    pub bytes: Bytes,
    /// Where the number comes from.
    pub source: Cow<'static, str>,
    /// Measured on this machine (a calibration profile), not assumed.
    pub measured: bool,
}

impl OverheadItem {
    /// An assumed or specified term.
    pub fn assumed(name: &'static str, bytes: Bytes, source: &'static str) -> Self {
        Self {
            name,
            bytes,
            source: Cow::Borrowed(source),
            measured: false,
        }
    }
}

/// Speed-model constants of a device class, before calibration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SpeedParams {
    /// Share of peak bandwidth a decode step achieves.
    pub decode_efficiency: f64,
    /// Share of peak matrix throughput a prefill achieves.
    pub prefill_efficiency: f64,
    /// Fixed time per forward pass, seconds (launches, synchronisation, sampling).
    pub fixed_cost_s: f64,
    /// Extra fixed time per layer per forward pass, seconds (kernel launches).
    pub per_layer_cost_s: f64,
    /// Decode: seconds per byte read per FLOP/s of peak matrix throughput — the share of a
    /// step spent unpacking and multiplying rather than waiting on memory (0 when unfitted).
    #[serde(default)]
    pub decode_alu_cost: f64,
    /// Decode: seconds per terabyte read regardless of the device's bandwidth (a ceiling the
    /// runtime's kernels hit on fast memory; 0 when unfitted).
    #[serde(default)]
    pub decode_s_per_tb: f64,
    /// Decode: multiplier on quantized weights over peak matrix throughput (unpacking the
    /// blocks; 0 when unfitted).
    #[serde(default)]
    pub decode_dequant_cost: f64,
    /// Decode: seconds per PFLOP of attention regardless of the device (0 when unfitted; the
    /// published fit leaves it out, see `published::DECODE_FITTED_TERMS`).
    #[serde(default)]
    pub attention_s_per_pflop: f64,
    /// Decode: multiplier on attention FLOPs over peak matrix throughput (the cost of reading
    /// the KV cache and computing scores beyond its bytes; 0 when unfitted).
    #[serde(default)]
    pub attention_cost: f64,
    /// Decode: multiplier on the K and V bytes the unfused attention reads, once per query
    /// head, over bandwidth ([`crate::sizing::throughput::attention_reads`]; 0 when unfitted).
    #[serde(default)]
    pub attention_read_cost: f64,
    /// Prefill: multiplier on attention FLOPs over peak matrix throughput (0: attention is
    /// counted at `prefill_efficiency` with the matmuls).
    #[serde(default)]
    pub prefill_attention_cost: f64,
    /// Prefill: seconds per PFLOP of matmul regardless of the device (0 when unfitted).
    #[serde(default)]
    pub prefill_s_per_pflop: f64,
    /// Prefill: seconds per PFLOP of attention regardless of the device (0 when unfitted).
    #[serde(default)]
    pub prefill_attention_s_per_pflop: f64,
    /// Where these numbers come from (a default's rationale, or the calibration profile).
    pub source: String,
}

impl SpeedParams {
    /// Hand-set constants with no fitted terms.
    pub fn simple(
        decode_efficiency: f64,
        prefill_efficiency: f64,
        fixed_cost_s: f64,
        per_layer_cost_s: f64,
        source: String,
    ) -> Self {
        Self {
            decode_efficiency,
            prefill_efficiency,
            fixed_cost_s,
            per_layer_cost_s,
            decode_alu_cost: 0.0,
            decode_s_per_tb: 0.0,
            decode_dequant_cost: 0.0,
            attention_s_per_pflop: 0.0,
            attention_cost: 0.0,
            attention_read_cost: 0.0,
            prefill_attention_cost: 0.0,
            prefill_s_per_pflop: 0.0,
            prefill_attention_s_per_pflop: 0.0,
            source,
        }
    }

    /// The share of `bandwidth` a decode step gets once every term proportional to the bytes
    /// read is folded in (bandwidth, ALU over `matrix_flops`, the runtime's ceiling): what a
    /// model that only divides bytes by bandwidth (the multi-GPU estimate) should use.
    pub fn effective_decode_efficiency(&self, bandwidth: f64, matrix_flops: f64) -> f64 {
        1.0 / (1.0 / self.decode_efficiency
            + self.decode_alu_cost * bandwidth / matrix_flops
            + self.decode_s_per_tb * 1e-12 * bandwidth)
    }

    /// Coefficients of [`crate::sizing::throughput::decode_terms`].
    pub fn decode_coefficients(&self) -> [f64; crate::sizing::throughput::DECODE_TERMS] {
        [
            1.0 / self.decode_efficiency,
            self.decode_alu_cost,
            self.decode_dequant_cost,
            self.decode_s_per_tb,
            self.fixed_cost_s,
            self.per_layer_cost_s,
            self.attention_cost,
            self.attention_s_per_pflop,
            self.attention_read_cost,
        ]
    }

    /// Coefficients of [`crate::sizing::throughput::prefill_terms`]. Without a fitted
    /// attention term, attention runs at `prefill_efficiency` like the matmuls.
    pub fn prefill_coefficients(&self) -> [f64; 4] {
        let attn = if self.prefill_attention_cost > 0.0 || self.prefill_attention_s_per_pflop > 0.0
        {
            self.prefill_attention_cost
        } else {
            1.0 / self.prefill_efficiency
        };
        [
            1.0 / self.prefill_efficiency,
            attn,
            self.prefill_s_per_pflop,
            self.prefill_attention_s_per_pflop,
        ]
    }
}

/// Bandwidth and matrix throughput of each shipped preset, without building a [`Hardware`]
/// (the published fit needs them before any preset has speed constants).
#[derive(Debug, Clone)]
pub struct PresetSpecs(Vec<PresetSpec>);

/// The numbers of one preset the speed model uses.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SpecNumbers {
    /// Backend.
    pub backend: Backend,
    /// Peak bandwidth, bytes/s.
    pub bandwidth: f64,
    /// Peak matrix throughput, FLOP/s.
    pub matrix_flops: f64,
}

impl PresetSpecs {
    /// The shipped presets' specifications.
    pub fn shipped() -> Result<Self, SizingError> {
        let file: PresetsFile =
            toml::from_str(PRESETS_TOML).map_err(|e| SizingError::Hardware {
                name: "hardware.toml".into(),
                reason: e.message().to_owned(),
            })?;
        Ok(Self(file.device))
    }

    /// The preset called `name`.
    pub fn get(&self, name: &str) -> Option<SpecNumbers> {
        self.0.iter().find(|d| d.name == name).map(|d| SpecNumbers {
            backend: d.backend,
            bandwidth: d.bandwidth_gbs * 1e9,
            matrix_flops: d.matrix_tflops * 1e12,
        })
    }
}

impl Backend {
    /// Lower-case name.
    pub fn name(self) -> &'static str {
        match self {
            Self::Cpu => "cpu",
            Self::Cuda => "cuda",
            Self::Metal => "metal",
        }
    }

    /// Fixed memory the backend costs, term by term. On unified-memory devices (Metal, CPU)
    /// the host process shares the same pool, so its baseline counts too.
    pub fn overhead(self) -> Vec<OverheadItem> {
        const PROC: &str = "RSS of a boyd process before loading a model: 8.9 MiB measured \
                            by boyd validate (release, x86-64 Linux), rounded up to 16 MiB";
        match self {
            Self::Cpu => vec![OverheadItem::assumed("process", PROCESS_BASELINE, PROC)],
            Self::Cuda => vec![
                OverheadItem::assumed(
                    "cuda-context",
                    CUDA_CONTEXT,
                    "idle CUDA context per nvidia-smi, 300-600 MiB; upper end",
                ),
                OverheadItem::assumed(
                    "cublas-workspace",
                    CUBLAS_WORKSPACE,
                    "cuBLAS docs: default workspace 32 MiB on Hopper",
                ),
            ],
            Self::Metal => vec![
                OverheadItem::assumed(
                    "metal-context",
                    METAL_CONTEXT,
                    "assumption: Metal device, queue and candle pipelines",
                ),
                OverheadItem::assumed("process", PROCESS_BASELINE, PROC),
            ],
        }
    }

    /// The overhead term `boyd validate` measures on this backend, which a calibration
    /// profile's measured overhead replaces: the process RSS before loading a model on the
    /// CPU, one GPU context on CUDA and Metal.
    pub fn measured_overhead_term(self) -> &'static str {
        match self {
            Self::Cpu => "process",
            Self::Cuda => "cuda-context",
            Self::Metal => "metal-context",
        }
    }

    /// What boyd's runtime does with the token embedding on this backend: it keeps the
    /// quantized tensor as stored, looks rows up from it, and ties the output projection to
    /// the same tensor (`runtime::decoder`), on every backend. So no copy is added.
    ///
    /// Other runtimes differ: candle-transformers' `quantized_llama` dequantizes the
    /// embedding to f32 ([`EmbeddingPolicy::DequantizedF32`]); size for it by passing that
    /// policy to [`crate::sizing::weights::embedding_copy`] directly.
    pub fn embedding_policy(self) -> EmbeddingPolicy {
        EmbeddingPolicy::AsStored
    }

    /// The KV cache type boyd's runtime allocates on this backend by default
    /// (`Decoder::new_cache`): f16 everywhere (the native CPU engine's default; `--kv-dtype`
    /// picks f32 or q8_0 there). Only candle's CPU engine keeps f32, which
    /// `runtime::fit::runtime_kv_dtype` accounts for.
    pub fn runtime_kv_dtype(self) -> KvDtype {
        match self {
            Self::Cpu | Self::Cuda | Self::Metal => KvDtype::F16,
        }
    }

    /// Whether prefill matmuls on this backend may dequantize a whole weight matrix to a
    /// temporary f32 buffer (candle's CUDA `dequantize_matmul` path for batches its fused
    /// kernels do not cover).
    pub fn prefill_dequant_scratch(self) -> bool {
        matches!(self, Self::Cuda)
    }

    /// Default speed constants until `boyd validate` calibrates the machine: on CUDA and
    /// Metal the fit to the published llama.cpp rows in `models/published/`
    /// ([`crate::sizing::published`]); on the CPU, and should the embedded dataset not fit,
    /// the hand-set [`Backend::handset_speed`].
    pub fn default_speed(self) -> SpeedParams {
        match self {
            Self::Cuda | Self::Metal => super::published::shipped_fit(self)
                .map(|f| f.speed_params())
                .unwrap_or_else(|| self.handset_speed()),
            Self::Cpu => self.handset_speed(),
        }
    }

    /// Hand-set speed constants, with the rationale for each.
    pub fn handset_speed(self) -> SpeedParams {
        match self {
            // llama.cpp's tg128 on an RTX 4090 with a 7B Q4_0 (3.56 GiB) reaches ~0.65-0.7 of
            // spec bandwidth; candle's unfused kernels do less, so 0.5. One decode step
            // launches ~20 kernels per layer at a few us each: 60 us per layer.
            Self::Cuda => SpeedParams::simple(
                0.5,
                0.35,
                300e-6,
                60e-6,
                "default for cuda (uncalibrated): llama.cpp reaches ~0.65 of peak \
                         bandwidth on RTX 4090 tg128, candle less; run `boyd validate`"
                    .into(),
            ),
            // llama.cpp's Apple Silicon table (M1 Max, 7B Q4_0: ~61 tok/s -> ~0.58 of
            // 400 GB/s); candle's Metal kernels somewhat lower.
            Self::Metal => SpeedParams::simple(
                0.45,
                0.3,
                500e-6,
                80e-6,
                "default for metal (uncalibrated): llama.cpp reaches ~0.58 of peak \
                         bandwidth on M1 Max tg128, candle less; run `boyd validate`"
                    .into(),
            ),
            // Decode on CPU streams weights at 50-70% of STREAM-measured bandwidth.
            Self::Cpu => SpeedParams::simple(
                0.6,
                0.25,
                200e-6,
                20e-6,
                "default for cpu (uncalibrated): decode streams weights at ~0.6 of \
                         peak DRAM bandwidth; run `boyd validate`"
                    .into(),
            ),
        }
    }
}

impl std::fmt::Display for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// One device the sizing model can target.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Hardware {
    /// Preset name (`h200`, `m3-max`, `this`).
    pub name: String,
    /// Human description.
    pub description: String,
    /// Backend that runs the model.
    pub backend: Backend,
    /// Total device (or unified) memory.
    pub memory: Bytes,
    /// Memory a model may use: `memory × usable_fraction`, or what the OS reports as
    /// available for the probed machine.
    pub free: Bytes,
    /// Share of `memory` a model may use (Apple's GPU working-set limit).
    pub usable_fraction: f64,
    /// Peak memory bandwidth.
    pub bandwidth: BytesPerSec,
    /// Peak dense FP16/BF16 matrix throughput, FLOP/s.
    pub matrix_flops: f64,
    /// Where the numbers come from.
    pub source: String,
    /// Speed-model constants in force (defaults, or a calibration profile).
    pub speed: SpeedParams,
    /// How the engine that runs models here lays out activations (native on the CPU, candle
    /// on GPUs, unless the runtime is told otherwise).
    pub compute_layout: ComputeLayout,
    /// Worker threads of the CPU engine, when known (the probed machine); `None` for presets.
    pub threads: Option<u32>,
    /// The overhead term a calibration profile measured on this machine; it replaces the
    /// backend's term of the same name in [`Hardware::overhead`].
    pub measured_overhead: Option<OverheadItem>,
}

/// One `[[device]]` table of `hardware.toml`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct PresetSpec {
    name: String,
    description: String,
    backend: Backend,
    memory_gib: f64,
    #[serde(default = "one")]
    usable_fraction: f64,
    bandwidth_gbs: f64,
    matrix_tflops: f64,
    source: String,
}

fn one() -> f64 {
    1.0
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PresetsFile {
    device: Vec<PresetSpec>,
}

impl Hardware {
    /// Build a device from plain numbers, checking them.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        name: &str,
        description: &str,
        backend: Backend,
        memory: Bytes,
        usable_fraction: f64,
        bandwidth: BytesPerSec,
        matrix_flops: f64,
        source: &str,
    ) -> Result<Self, SizingError> {
        let bad = |reason: &str| SizingError::Hardware {
            name: name.to_owned(),
            reason: reason.to_owned(),
        };
        if memory.0 == 0 {
            return Err(bad("memory is zero"));
        }
        if !(usable_fraction > 0.0 && usable_fraction <= 1.0) {
            return Err(bad("usable_fraction must be in (0, 1]"));
        }
        if !(bandwidth.0.is_finite() && bandwidth.0 > 0.0) {
            return Err(bad("bandwidth must be positive"));
        }
        if !(matrix_flops.is_finite() && matrix_flops > 0.0) {
            return Err(bad("matrix throughput must be positive"));
        }
        Ok(Self {
            name: name.to_owned(),
            description: description.to_owned(),
            backend,
            memory,
            free: Bytes((memory.0 as f64 * usable_fraction) as u64),
            usable_fraction,
            bandwidth,
            matrix_flops,
            source: source.to_owned(),
            speed: backend.default_speed(),
            compute_layout: ComputeLayout::for_backend(backend),
            threads: None,
            measured_overhead: None,
        })
    }

    /// Parse a presets file (the `hardware.toml` format).
    pub fn parse_presets(text: &str) -> Result<Vec<Hardware>, SizingError> {
        let file: PresetsFile = toml::from_str(text).map_err(|e| SizingError::Hardware {
            name: "hardware.toml".into(),
            reason: e.message().to_owned(),
        })?;
        file.device
            .into_iter()
            .map(|d| {
                if !(d.memory_gib.is_finite() && d.memory_gib > 0.0 && d.memory_gib < 1e9) {
                    return Err(SizingError::Hardware {
                        name: d.name.clone(),
                        reason: "memory_gib must be positive".into(),
                    });
                }
                Self::new(
                    &d.name,
                    &d.description,
                    d.backend,
                    Bytes((d.memory_gib * Bytes::GIB as f64) as u64),
                    d.usable_fraction,
                    BytesPerSec(d.bandwidth_gbs * 1e9),
                    d.matrix_tflops * 1e12,
                    &d.source,
                )
            })
            .collect()
    }

    /// The presets shipped in `models/hardware.toml`.
    pub fn presets() -> Result<Vec<Hardware>, SizingError> {
        Self::parse_presets(PRESETS_TOML)
    }

    /// The shipped preset called `name` (case-insensitive).
    pub fn preset(name: &str) -> Result<Hardware, SizingError> {
        let all = Self::presets()?;
        let known = all
            .iter()
            .map(|h| h.name.as_str())
            .collect::<Vec<_>>()
            .join(", ");
        all.iter()
            .find(|h| h.name.eq_ignore_ascii_case(name.trim()))
            .cloned()
            .ok_or_else(|| SizingError::Hardware {
                name: name.to_owned(),
                reason: format!("no such preset; known: this, {known}"),
            })
    }

    /// The shipped preset that best matches a driver's device name (`NVIDIA H200`,
    /// `NVIDIA H100 PCIe`, `NVIDIA A100-SXM4-40GB`): the preset's model number (`H200`,
    /// `4090`) must appear in the name, and the one with most description tokens in the name
    /// wins (first on a tie).
    pub fn preset_for_gpu(name: &str, backend: Backend) -> Option<Hardware> {
        let upper = name.to_ascii_uppercase();
        let mut best: Option<(usize, Hardware)> = None;
        for h in Self::presets().ok()? {
            if h.backend != backend {
                continue;
            }
            let desc = h.description.to_ascii_uppercase();
            let tokens: Vec<&str> = desc
                .split_whitespace()
                .filter(|t| !matches!(*t, "NVIDIA" | "GEFORCE" | "APPLE"))
                .collect();
            // The model number: the first token with a digit (`H200`, `A100`, `4090`).
            let Some(model) = tokens
                .iter()
                .find(|t| t.chars().any(|c| c.is_ascii_digit()))
            else {
                continue;
            };
            if !upper.contains(model) {
                continue;
            }
            let score = tokens.iter().filter(|t| upper.contains(*t)).count();
            if best.as_ref().is_none_or(|(s, _)| score > *s) {
                best = Some((score, h));
            }
        }
        best.map(|(_, h)| h)
    }

    /// A GPU as its driver reports it (`name`, `total` and `free` memory): the matching preset
    /// with the driver's free memory, or, when no preset matches, the driver's figures with an
    /// assumed bandwidth (1 TB/s) and matrix throughput (100 TFLOP/s) that calibration
    /// replaces. Pure: the probe's answers come in as values.
    pub fn for_gpu(
        name: &str,
        backend: Backend,
        total: Bytes,
        free: Bytes,
    ) -> Result<Hardware, SizingError> {
        if let Some(h) = Self::preset_for_gpu(name, backend) {
            return Ok(h.with_free(free));
        }
        Ok(Self::new(
            "this",
            name,
            backend,
            total,
            1.0,
            BytesPerSec(1e12),
            100e12,
            "memory from the driver; bandwidth (1 TB/s) and matrix throughput (100 TFLOP/s) \
             assumed until `boyd validate` calibrates",
        )?
        .with_free(free))
    }

    /// The same device with `memory` in place of its own, of which the same share is usable
    /// (a preset bought with another memory size: an M2 Max with 32 GB).
    pub fn with_memory(mut self, memory: Bytes) -> Self {
        self.memory = memory;
        self.free = Bytes((memory.0 as f64 * self.usable_fraction) as u64);
        self
    }

    /// The same device with `free` memory set explicitly (the probed machine's available RAM).
    pub fn with_free(mut self, free: Bytes) -> Self {
        self.free = Bytes(free.0.min(self.memory.0));
        self
    }

    /// The same device with `threads` worker threads for the CPU engine.
    pub fn with_threads(mut self, threads: usize) -> Self {
        self.threads = Some(u32::try_from(threads.max(1)).unwrap_or(u32::MAX));
        self
    }

    /// Fixed overhead for this device's backend, term by term: the backend's assumptions, with
    /// the term a calibration profile measured in place of its assumed value.
    pub fn overhead(&self) -> Vec<OverheadItem> {
        let mut items = self.backend.overhead();
        if let Some(m) = &self.measured_overhead {
            if let Some(item) = items.iter_mut().find(|o| o.name == m.name) {
                *item = m.clone();
            }
        }
        items
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shipped_presets_parse_and_cover_the_issue_list() {
        let all = Hardware::presets().expect("presets");
        for name in [
            "h100-sxm",
            "h100-pcie",
            "h200",
            "a100-40",
            "a100-80",
            "l40s",
            "rtx-3090",
            "rtx-4090",
            "rtx-5090",
            "m1-pro",
            "m1-max",
            "m1-ultra",
            "m2-pro",
            "m2-max",
            "m2-ultra",
            "m3-pro",
            "m3-max",
            "m3-ultra",
            "m4-pro",
            "m4-max",
        ] {
            assert!(all.iter().any(|h| h.name == name), "missing {name}");
        }
        let m3 = Hardware::preset("M3-Max").expect("m3");
        assert_eq!(m3.backend, Backend::Metal);
        assert_eq!(m3.memory, Bytes(128 * Bytes::GIB));
        assert_eq!(m3.free, Bytes(96 * Bytes::GIB), "3/4 working-set limit");
        let h200 = Hardware::preset("h200").expect("h200");
        assert_eq!(h200.free, h200.memory);
        assert_eq!(h200.bandwidth, BytesPerSec(4.8e12));
    }

    #[test]
    fn unknown_preset_lists_the_known_ones() {
        let err = Hardware::preset("tpu-v9").expect_err("unknown").to_string();
        assert!(err.contains("h200") && err.contains("this"), "{err}");
    }

    #[test]
    fn bad_presets_are_rejected() {
        let text = r#"
            [[device]]
            name = "x"
            description = "x"
            backend = "cuda"
            memory_gib = 0
            bandwidth_gbs = 1
            matrix_tflops = 1
            source = "x"
        "#;
        assert!(Hardware::parse_presets(text).is_err());
        assert!(Hardware::parse_presets("[[device]]\nname = 1").is_err());
        assert!(Hardware::new(
            "x",
            "",
            Backend::Cpu,
            Bytes(1),
            1.5,
            BytesPerSec(1.0),
            1.0,
            ""
        )
        .is_err());
    }

    #[test]
    fn boyd_runtime_keeps_the_embedding_quantized_and_kv_f32_on_cpu() {
        for b in [Backend::Cpu, Backend::Cuda, Backend::Metal] {
            assert_eq!(b.embedding_policy(), EmbeddingPolicy::AsStored);
        }
        assert_eq!(Backend::Cpu.runtime_kv_dtype(), KvDtype::F16);
        assert_eq!(Backend::Cuda.runtime_kv_dtype(), KvDtype::F16);
        assert_eq!(Backend::Metal.runtime_kv_dtype(), KvDtype::F16);
    }

    #[test]
    fn overhead_terms_are_named_per_backend() {
        let cuda: Vec<_> = Backend::Cuda.overhead().iter().map(|o| o.name).collect();
        assert_eq!(cuda, ["cuda-context", "cublas-workspace"]);
        assert!(Backend::Metal
            .overhead()
            .iter()
            .any(|o| o.name == "process"));
        for b in [Backend::Cpu, Backend::Cuda, Backend::Metal] {
            let term = b.measured_overhead_term();
            assert!(b.overhead().iter().any(|o| o.name == term), "{b}");
            assert!(b.overhead().iter().all(|o| !o.measured));
        }
        assert_eq!(Backend::Cpu.overhead()[0].bytes, Bytes(16 * Bytes::MIB));
    }

    #[test]
    fn a_measured_overhead_replaces_the_assumed_term_of_the_same_name() {
        let mut hw = Hardware::preset("h200").expect("h200");
        assert_eq!(hw.compute_layout, ComputeLayout::Candle);
        hw.measured_overhead = Some(OverheadItem {
            name: "cuda-context",
            bytes: Bytes(300 * Bytes::MIB),
            source: "measured".into(),
            measured: true,
        });
        let items = hw.overhead();
        assert_eq!(items.len(), 2);
        assert_eq!(items[0].bytes, Bytes(300 * Bytes::MIB));
        assert!(items[0].measured);
        assert_eq!(
            items[1].bytes, CUBLAS_WORKSPACE,
            "the workspace stays assumed"
        );
        // A term this backend does not have changes nothing.
        hw.measured_overhead = Some(OverheadItem {
            name: "process",
            ..items[0].clone()
        });
        assert_eq!(hw.overhead(), Backend::Cuda.overhead());
    }
}
