//! The published rows: their schema, the embedded files and their parsing.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::sizing::arch::{ArchParams, Architecture};
use crate::sizing::error::SizingError;
use crate::sizing::hardware::{Backend, PresetSpecs};

/// The embedded speed rows, one file per source.
const SPEED_FILES: &[(&str, &str)] = &[
    (
        "xiongjiedai-llama3.jsonl",
        include_str!("../../../models/published/xiongjiedai-llama3.jsonl"),
    ),
    (
        "llama-cpp-prs.jsonl",
        include_str!("../../../models/published/llama-cpp-prs.jsonl"),
    ),
];

/// The embedded memory rows (llama.cpp load reports, Metal working-set limits).
pub(super) const MEMORY_FILE: (&str, &str) = (
    "memory.jsonl",
    include_str!("../../../models/published/memory.jsonl"),
);

/// The embedded partial-offload rows (`-ngl` splits between a GPU and its host).
pub(super) const OFFLOAD_FILE: (&str, &str) = (
    "offload.jsonl",
    include_str!("../../../models/published/offload.jsonl"),
);

/// Which speed test a row reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Test {
    /// Token generation (decode), one token per forward pass.
    Tg,
    /// Prompt processing (prefill).
    Pp,
}

/// One published speed measurement.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SpeedRow {
    /// Preset name of the device (`rtx-4090`, `m2-ultra`).
    pub device: String,
    /// `nvidia-consumer`, `nvidia-datacenter` or `apple`.
    pub device_class: String,
    /// `cuda` or `metal`.
    pub backend: Backend,
    /// Model id (`llama-3-8b`, `llama-3-70b`, `llama-2-7b`).
    pub model: String,
    /// Parameters, billions, as the runtime printed them.
    pub params_b: f64,
    /// File size in GiB as the runtime printed it, when given.
    #[serde(default)]
    pub size_gib: Option<f64>,
    /// File mix (`Q4_K_M`, `F16`, …).
    pub quant: String,
    /// `tg` or `pp`.
    pub test: Test,
    /// Tokens generated (tg) or in the prompt (pp).
    pub n_tokens: u32,
    /// KV positions already in the cache when the test starts.
    pub depth: u32,
    /// Published tokens per second.
    pub tok_s: f64,
    /// Runtime and build.
    pub runtime: String,
    /// Public address of the measurement.
    pub source: String,
    /// Date of the source.
    pub date: String,
    /// Free-form detail (GPU name, file name, spread).
    #[serde(default)]
    pub notes: Option<String>,
    /// Why the row is kept out of the fit and the error summary, when it is.
    #[serde(default)]
    pub outlier: Option<String>,
}

/// One published memory reading: llama.cpp's per-buffer load report and, on Metal, the
/// device's `recommendedMaxWorkingSetSize`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MemoryRow {
    /// Preset name of the device.
    pub device: String,
    /// Device class.
    pub device_class: String,
    /// `cuda` or `metal`.
    pub backend: Backend,
    /// Model id.
    pub model: String,
    /// File mix.
    pub quant: String,
    /// Parameters, billions.
    pub params_b: f64,
    /// File size, GiB, as printed.
    pub size_gib: f64,
    /// Context the runtime allocated.
    pub n_ctx: u32,
    /// Prefill micro-batch.
    pub n_ubatch: u32,
    /// KV cache type.
    pub kv_type: String,
    /// Weights in device memory, MiB.
    #[serde(default)]
    pub gpu_weights_mib: Option<f64>,
    /// Weights left in host memory (the token embedding), MiB.
    #[serde(default)]
    pub host_weights_mib: Option<f64>,
    /// KV cache, MiB.
    #[serde(default)]
    pub kv_mib: Option<f64>,
    /// Device compute buffer, MiB.
    #[serde(default)]
    pub compute_mib: Option<f64>,
    /// Metal's working-set limit, decimal MB as printed.
    #[serde(default)]
    pub recommended_max_working_set_mb: Option<f64>,
    /// Unified memory of the machine, GiB (Metal rows).
    #[serde(default)]
    pub device_memory_gib: Option<f64>,
    /// Runtime and build.
    pub runtime: String,
    /// Public address.
    pub source: String,
    /// Date.
    pub date: String,
    /// Free-form detail.
    #[serde(default)]
    pub notes: Option<String>,
}

/// One published partial-offload run: decode speed of a model split by llama.cpp's `-ngl`
/// between a GPU (the preset `device`) and its host's CPU and RAM.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OffloadRow {
    /// Preset name of the GPU.
    pub device: String,
    /// Device class of the GPU.
    pub device_class: String,
    /// `cuda`.
    pub backend: Backend,
    /// Model id (a shape in [`model_arch`]).
    pub model: String,
    /// Parameters, billions.
    pub params_b: f64,
    /// File mix; the weights are sized from its catalog bits per weight.
    pub quant: String,
    /// llama.cpp's `-ngl` (values above the layer count put every layer and the output on
    /// the GPU).
    pub ngl: u32,
    /// Published decode tokens per second.
    pub tok_s: f64,
    /// GPU memory in use as published, decimal MB, when given.
    #[serde(default)]
    pub gpu_used_mb: Option<f64>,
    /// The host as described by the source.
    pub host: String,
    /// Host peak memory bandwidth, decimal GB/s (from the stated memory configuration).
    pub host_bw_gbs: f64,
    /// CPU threads of the host.
    pub host_threads: u32,
    /// Link between host and GPU: `pcie<gen>-x<lanes>` (`pcie3-x8`, `pcie4-x16`).
    pub link: String,
    /// Runtime and build.
    pub runtime: String,
    /// Public address of the measurement.
    pub source: String,
    /// Public address of the host's description, when elsewhere.
    #[serde(default)]
    pub rig_source: Option<String>,
    /// Date of the source.
    pub date: String,
    /// Free-form detail.
    #[serde(default)]
    pub notes: Option<String>,
}

/// PCIe generation and lane count of a link name `pcie<gen>-x<lanes>`.
pub fn parse_link(name: &str) -> Option<(u32, u32)> {
    let rest = name.trim().to_ascii_lowercase();
    let (gen, lanes) = rest.strip_prefix("pcie")?.split_once("-x")?;
    let (gen, lanes) = (gen.parse().ok()?, lanes.parse().ok()?);
    ((3..=5).contains(&gen) && [1, 2, 4, 8, 16].contains(&lanes)).then_some((gen, lanes))
}

/// Why the embedded dataset could not be used.
#[derive(Debug, thiserror::Error)]
pub enum PublishedError {
    /// A line is not a valid row.
    #[error("models/published/{file} line {line}: {reason}; fix the row (see the schema in src/sizing/published/dataset.rs)")]
    BadRow {
        /// File name.
        file: String,
        /// 1-based line.
        line: usize,
        /// What is wrong.
        reason: String,
    },
    /// A row names a device without a preset or a model without a shape.
    #[error("models/published/{file} line {line}: unknown {what} {name:?}; add it to models/hardware.toml or the model table in src/sizing/published/dataset.rs")]
    Unknown {
        /// File name.
        file: String,
        /// 1-based line.
        line: usize,
        /// `device` or `model`.
        what: &'static str,
        /// The name.
        name: String,
    },
    /// Too few rows to fit a backend.
    #[error("no usable {test:?} rows for {backend}; the fit needs at least one device")]
    Empty {
        /// Backend.
        backend: Backend,
        /// Test.
        test: Test,
    },
    /// Sizing arithmetic failed.
    #[error(transparent)]
    Sizing(#[from] SizingError),
}

/// The shapes of the models the dataset uses (published configurations).
pub fn model_arch(id: &str) -> Option<ArchParams> {
    let llama3 = |n_layers, n_heads, hidden, ffn| ArchParams {
        architecture: Architecture::Llama,
        n_layers,
        n_heads,
        n_kv_heads: 8,
        head_dim: 128,
        head_dim_v: 128,
        hidden,
        ffn,
        vocab: 128_256,
        rope_base: 500_000.0,
        rope_scaling: None,
        norm_eps: 1e-5,
        context_length: 8192,
        sliding_window: None,
        tied_embeddings: false,
    };
    match id {
        // meta-llama/Meta-Llama-3-8B and -70B config.json.
        "llama-3-8b" => Some(llama3(32, 32, 4096, 14_336)),
        "llama-3-70b" => Some(llama3(80, 64, 8192, 28_672)),
        // Llama 2 7B (the "LLaMA 7B" of llama.cpp's benchmark tables): 32 layers, MHA.
        "llama-2-7b" => Some(ArchParams {
            n_kv_heads: 32,
            ffn: 11_008,
            vocab: 32_000,
            rope_base: 10_000.0,
            context_length: 4096,
            ..llama3(32, 32, 4096, 11_008)
        }),
        // Qwen/Qwen2.5-14B (and -Coder-14B) config.json: 48 layers, 40 query and 8 KV heads,
        // untied output.
        "qwen2.5-14b" => Some(ArchParams {
            architecture: Architecture::Qwen2,
            vocab: 152_064,
            rope_base: 1_000_000.0,
            norm_eps: 1e-6,
            context_length: 32_768,
            ..llama3(48, 40, 5120, 13_824)
        }),
        _ => None,
    }
}

/// The parsed dataset.
#[derive(Debug, Clone)]
pub struct Dataset {
    /// Speed rows, in file order.
    pub speed: Vec<SpeedRow>,
    /// Memory rows.
    pub memory: Vec<MemoryRow>,
    /// Partial-offload rows.
    pub offload: Vec<OffloadRow>,
}

fn parse_lines<T: for<'de> Deserialize<'de>>(
    file: &str,
    text: &str,
) -> Result<Vec<(usize, T)>, PublishedError> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            serde_json::from_str::<T>(l)
                .map(|r| (i + 1, r))
                .map_err(|e| PublishedError::BadRow {
                    file: file.to_owned(),
                    line: i + 1,
                    reason: e.to_string(),
                })
        })
        .collect()
}

fn check_offload_row(
    file: &str,
    line: usize,
    r: OffloadRow,
    specs: &PresetSpecs,
) -> Result<OffloadRow, PublishedError> {
    let bad = |reason: &str| PublishedError::BadRow {
        file: file.to_owned(),
        line,
        reason: reason.to_owned(),
    };
    let unknown = |what, name: &str| PublishedError::Unknown {
        file: file.to_owned(),
        line,
        what,
        name: name.to_owned(),
    };
    if specs.get(&r.device).is_none() {
        return Err(unknown("device", &r.device));
    }
    if model_arch(&r.model).is_none() {
        return Err(unknown("model", &r.model));
    }
    if r.backend != Backend::Cuda {
        return Err(bad("partial offload rows are CUDA GPUs with a host"));
    }
    let positive = |v: f64| v.is_finite() && v > 0.0;
    if !(positive(r.tok_s) && positive(r.params_b) && positive(r.host_bw_gbs))
        || r.host_threads == 0
        || r.gpu_used_mb.is_some_and(|m| !positive(m))
    {
        return Err(bad(
            "tok_s, params_b, host_bw_gbs, host_threads and gpu_used_mb must be positive",
        ));
    }
    if crate::sizing::Quant::parse(&r.quant).is_err() {
        return Err(bad("the quant must be a known file mix"));
    }
    if parse_link(&r.link).is_none() {
        return Err(bad(
            "link must be pcie<3|4|5>-x<1|2|4|8|16>, e.g. pcie4-x16",
        ));
    }
    Ok(r)
}

impl Dataset {
    /// Parse dataset files given as `(name, text)` pairs, checking that every device has a
    /// preset and every model a shape, and that the numbers are positive.
    pub fn parse(
        speed_files: &[(&str, &str)],
        memory_file: (&str, &str),
        offload_file: (&str, &str),
    ) -> Result<Self, PublishedError> {
        let specs = PresetSpecs::shipped()?;
        let mut speed = Vec::new();
        for (file, text) in speed_files {
            for (line, r) in parse_lines::<SpeedRow>(file, text)? {
                let bad = |reason: &str| PublishedError::BadRow {
                    file: (*file).to_owned(),
                    line,
                    reason: reason.to_owned(),
                };
                if specs.get(&r.device).is_none() {
                    return Err(PublishedError::Unknown {
                        file: (*file).to_owned(),
                        line,
                        what: "device",
                        name: r.device,
                    });
                }
                if model_arch(&r.model).is_none() {
                    return Err(PublishedError::Unknown {
                        file: (*file).to_owned(),
                        line,
                        what: "model",
                        name: r.model,
                    });
                }
                if !(r.tok_s.is_finite() && r.tok_s > 0.0) || r.n_tokens == 0 {
                    return Err(bad("tok_s and n_tokens must be positive"));
                }
                if !(r.params_b.is_finite() && r.params_b > 0.0)
                    || r.size_gib.is_some_and(|s| !(s.is_finite() && s > 0.0))
                {
                    return Err(bad("params_b and size_gib must be positive"));
                }
                if r.size_gib.is_none() && crate::sizing::Quant::parse(&r.quant).is_err() {
                    return Err(bad("without size_gib the quant must be a known file mix"));
                }
                speed.push(r);
            }
        }
        let memory = parse_lines::<MemoryRow>(memory_file.0, memory_file.1)?
            .into_iter()
            .map(|(line, r)| {
                if specs.get(&r.device).is_none() || model_arch(&r.model).is_none() {
                    return Err(PublishedError::Unknown {
                        file: memory_file.0.to_owned(),
                        line,
                        what: "device or model",
                        name: format!("{} / {}", r.device, r.model),
                    });
                }
                Ok(r)
            })
            .collect::<Result<_, _>>()?;
        let offload = parse_lines::<OffloadRow>(offload_file.0, offload_file.1)?
            .into_iter()
            .map(|(line, r)| check_offload_row(offload_file.0, line, r, &specs))
            .collect::<Result<_, _>>()?;
        Ok(Self {
            speed,
            memory,
            offload,
        })
    }

    /// The dataset shipped in `models/published/`.
    pub fn shipped() -> Result<Self, PublishedError> {
        Self::parse(SPEED_FILES, MEMORY_FILE, OFFLOAD_FILE)
    }

    /// Row counts per device class and test, and distinct devices, models and quants.
    pub fn summary(&self) -> Summary {
        let mut per_class: BTreeMap<String, BTreeMap<String, usize>> = BTreeMap::new();
        for r in &self.speed {
            let test = match r.test {
                Test::Tg => "tg",
                Test::Pp => "pp",
            };
            *per_class
                .entry(r.device_class.clone())
                .or_default()
                .entry(test.to_owned())
                .or_default() += 1;
        }
        let distinct = |f: &dyn Fn(&SpeedRow) -> String| {
            let mut v: Vec<String> = self.speed.iter().map(f).collect();
            v.sort();
            v.dedup();
            v
        };
        Summary {
            speed_rows: self.speed.len(),
            outliers: self.speed.iter().filter(|r| r.outlier.is_some()).count(),
            memory_rows: self.memory.len(),
            offload_rows: self.offload.len(),
            per_class,
            devices: distinct(&|r| r.device.clone()),
            models: distinct(&|r| r.model.clone()),
            quants: distinct(&|r| r.quant.clone()),
            sources: distinct(&|r| r.source.clone()).len(),
        }
    }
}

/// What the dataset holds.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Summary {
    /// Speed rows.
    pub speed_rows: usize,
    /// Speed rows kept out of the fit.
    pub outliers: usize,
    /// Memory rows.
    pub memory_rows: usize,
    /// Partial-offload rows.
    pub offload_rows: usize,
    /// Rows per device class and test.
    pub per_class: BTreeMap<String, BTreeMap<String, usize>>,
    /// Distinct devices.
    pub devices: Vec<String>,
    /// Distinct models.
    pub models: Vec<String>,
    /// Distinct quantizations.
    pub quants: Vec<String>,
    /// Distinct source addresses.
    pub sources: usize,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_rows_are_refused_with_the_file_and_line() {
        let good = include_str!("../../../models/published/xiongjiedai-llama3.jsonl")
            .lines()
            .next()
            .expect("line");
        let err = Dataset::parse(
            &[("x.jsonl", "{\"device\": 1}")],
            ("m.jsonl", ""),
            ("o.jsonl", ""),
        )
        .expect_err("bad");
        assert!(err.to_string().contains("x.jsonl line 1"), "{err}");
        let unknown = good.replace("rtx-3090", "rtx-9999");
        let err = Dataset::parse(&[("y.jsonl", &unknown)], ("m.jsonl", ""), ("o.jsonl", ""))
            .expect_err("bad");
        assert!(err.to_string().contains("rtx-9999"), "{err}");
        let zero = good.replace("\"tok_s\": ", "\"tok_s\": -");
        assert!(Dataset::parse(&[("z.jsonl", &zero)], ("m.jsonl", ""), ("o.jsonl", "")).is_err());
    }

    #[test]
    fn offload_rows_parse_and_a_bad_link_is_refused() {
        let good = OFFLOAD_FILE.1.lines().next().expect("line");
        let ds = Dataset::parse(&[], ("m.jsonl", ""), ("o.jsonl", good)).expect("good");
        assert_eq!(ds.offload.len(), 1);
        let bad = good.replace("pcie3-x8", "pcie3-x3");
        let err = Dataset::parse(&[], ("m.jsonl", ""), ("o.jsonl", &bad)).expect_err("bad");
        let msg = err.to_string();
        assert!(
            msg.contains("o.jsonl line 1") && msg.contains("pcie"),
            "{msg}"
        );
        let slow = good.replace("\"host_bw_gbs\": 38.4", "\"host_bw_gbs\": 0");
        assert!(Dataset::parse(&[], ("m.jsonl", ""), ("o.jsonl", &slow)).is_err());
        assert_eq!(parse_link("PCIe4-x16"), Some((4, 16)));
        assert_eq!(parse_link("pcie6-x16"), None);
        assert_eq!(parse_link("pcie4x16"), None);
    }
}
