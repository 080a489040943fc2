//! The sizing model as tools: `size_model` (will this model fit on that hardware, and how fast)
//! and `hardware` (what a hardware preset, or this machine, has).
//!
//! Both answer through [`crate::sizer`], the same path `boyd size` takes, so the agent quotes
//! the numbers the CLI prints. Arguments are typed in the schema: model, quantization, KV type
//! and hardware are enums of the names boyd knows, so a constrained small model cannot misspell
//! them; the observation is a few short lines, one fact per line, that a 0.5B model can copy.

use serde::Deserialize;

use super::files::{MAX_READ_BYTES, PATH_MAX_CHARS};
use super::{check_args, parse_args, Tool, ToolContext, ToolError};
use crate::sizer::{self, SizeQuery};
use crate::sizing::{Estimate, Hardware};
use crate::units::Bytes;

/// Quantization names the schema offers (llama.cpp file mixes and plain types), the most
/// common first.
const QUANTS: &[&str] = &[
    "Q4_K_M", "Q4_0", "Q4_K_S", "Q5_K_M", "Q6_K", "Q8_0", "Q3_K_M", "Q2_K", "IQ4_XS", "F16",
    "BF16", "F32",
];
/// KV cache types the schema offers.
const KV_TYPES: &[&str] = &["f32", "f16", "bf16", "q8_0", "q4_0"];
/// Largest context the schema accepts.
const MAX_CTX: u64 = 1 << 20;

fn catalog_names() -> Vec<String> {
    sizer::catalog_model_names()
}

fn preset_names() -> Vec<String> {
    let mut v: Vec<String> = Hardware::presets()
        .map(|p| p.into_iter().map(|h| h.name).collect())
        .unwrap_or_default();
    v.push("this".into());
    v
}

/// `41.06 GB (38.24 GiB)`: decimal first, as people say it, binary in brackets as `boyd size`.
fn gb(b: Bytes) -> String {
    format!("{:.1} GB ({b})", b.gb())
}

/// The observation for one estimate: short lines, one fact each.
pub fn render_estimate(model: &str, e: &Estimate) -> String {
    let hw = &e.hardware;
    let m = &e.memory;
    let verdict_short = if e.fits { "fits" } else { "does not fit" };
    let short = match e.shortfall {
        Some(s) if !e.fits => format!(", short by {:.1} GB", s.gb()),
        _ => String::new(),
    };
    let mut lines = vec![
        format!(
            "summary: {model} {} at {} tokens {verdict_short} on {} (needs {:.1} GB, {:.1} GB usable{short}); decode about {:.1} tokens/s.",
            e.quant,
            e.ctx,
            hw.name,
            m.total.gb(),
            hw.free.gb(),
            e.speed.decode_at_ctx.0
        ),
        format!(
            "model: {model} {}, context {} tokens, KV {}, on {} ({})",
            e.quant, e.ctx, e.kv_dtype, hw.name, hw.backend
        ),
        format!(
            "total memory: {} = weights {} + KV cache {} + compute and overhead {}",
            gb(m.total),
            gb(m.weights),
            gb(m.kv_cache),
            gb(Bytes(m.total.0.saturating_sub(m.weights.0 + m.kv_cache.0)))
        ),
    ];
    lines.push(match (e.fits, e.headroom, e.shortfall) {
        (true, Some(h), _) => format!(
            "fits: yes, {} usable on {}, {} to spare",
            gb(hw.free),
            hw.name,
            gb(h)
        ),
        (true, _, _) => format!("fits: yes, {} usable on {}", gb(hw.free), hw.name),
        (false, _, Some(s)) => format!(
            "fits: no, {} usable on {}, short by {}",
            gb(hw.free),
            hw.name,
            gb(s)
        ),
        (false, _, _) => format!("fits: no, {} usable on {}", gb(hw.free), hw.name),
    });
    lines.push(match &e.max_ctx {
        Some(c) if c.limited_by == "model" => {
            format!(
                "largest context that fits: {} tokens (the model's maximum)",
                c.ctx
            )
        }
        Some(c) => format!("largest context that fits: {} tokens", c.ctx),
        None => "largest context that fits: none (the weights alone do not fit)".into(),
    });
    // The speed at the context asked about first: a small model copies the first figure.
    lines.push(format!(
        "decode speed: {:.1} tokens/s at {} tokens ({:.1} tokens/s at empty context)",
        e.speed.decode_at_ctx.0, e.ctx, e.speed.decode_empty.0
    ));
    lines.push(format!("prefill speed: {:.0} tokens/s", e.speed.prefill.0));
    lines.join("\n")
}

/// `size_model`: the sizing model for one model, quantization, context and hardware.
#[derive(Debug, Clone)]
pub struct SizeModel {
    models: Vec<String>,
    presets: Vec<String>,
    extended: bool,
}

impl Default for SizeModel {
    /// model, hw, ctx, quant and kv_type; without `quant` the catalog entry's (Q4_K_M for
    /// most) is used and named in the observation. A greedy small model fills every optional
    /// argument it is offered (measured: it set `kv_type` to `q4_0`, `config` to a file that
    /// did not exist, and `quant` to F16, BF16 or "1.25" for a Q4_K_M question), so the agent
    /// loops offer `quant` and `kv_type` only when the task names a value (`agent::narrow`,
    /// rule 4), and `config` not at all.
    fn default() -> Self {
        Self {
            models: catalog_names(),
            presets: preset_names(),
            extended: false,
        }
    }
}

impl SizeModel {
    /// Also offer `config` (a Hugging Face config.json in the workspace), for planners that
    /// leave optional arguments alone.
    pub fn extended() -> Self {
        Self {
            extended: true,
            ..Self::default()
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SizeArgs {
    model: String,
    #[serde(default)]
    quant: Option<String>,
    #[serde(default)]
    ctx: Option<u64>,
    #[serde(default)]
    kv_type: Option<String>,
    #[serde(default)]
    hw: Option<String>,
    #[serde(default)]
    config: Option<String>,
}

impl Tool for SizeModel {
    fn name(&self) -> &str {
        "size_model"
    }
    fn description(&self) -> &str {
        "Memory and speed of a model on a GPU, Apple chip or this machine, before loading it: total memory, whether it fits (and by how much it is short), the largest context that fits, decode tokens/s. Use it for every question about the memory, fit or speed of a model, then answer with its lines. Args: model and hw from the lists boyd knows (hw \"this\" = this computer); ctx in tokens (8k = 8192)."
    }
    fn args_schema(&self) -> serde_json::Value {
        let mut schema = serde_json::json!({
            "type": "object",
            "properties": {
                "model": {"enum": self.models},
                "hw": {"enum": self.presets},
                "quant": {"enum": QUANTS},
                "ctx": {"type": "integer", "minimum": 1, "maximum": MAX_CTX},
                "kv_type": {"enum": KV_TYPES},
                "config": {"type": "string", "maxLength": PATH_MAX_CHARS, "pattern": "\\.json$"}
            },
            "required": ["model", "hw"],
            "additionalProperties": false
        });
        if !self.extended {
            if let Some(p) = schema["properties"].as_object_mut() {
                p.remove("config");
            }
        }
        schema
    }
    fn call(&self, args: serde_json::Value, ctx: &ToolContext) -> Result<String, ToolError> {
        // An argument the schema does not offer (`config` unless extended) is refused here too,
        // not only by the loops: the schema is what this tool may be asked.
        check_args(self, &args)?;
        let a: SizeArgs = parse_args(args)?;
        let hw = a.hw.unwrap_or_else(|| "this".into());
        let model = a.model.trim().to_string();
        let mut label = model.clone();
        let mut config_text = None;
        if let Some(config) = &a.config {
            // A Hugging Face config in the workspace, read as every file tool reads: resolved
            // inside the workspace, a regular file, not boyd's own, at most MAX_READ_BYTES.
            if a.quant.is_none() {
                return Err(ToolError::invalid(
                    "a config.json gives the shape but not the quantization; add quant (e.g. \"Q4_K_M\").",
                ));
            }
            let limit = MAX_READ_BYTES.min(sizer::CONFIG_MAX_BYTES);
            let (_, bytes) = ctx.workspace()?.read_bytes(config, limit)?;
            let text = String::from_utf8(bytes).map_err(|_| {
                ToolError::invalid(format!("{config} is not UTF-8 text, so not a config.json."))
            })?;
            label = config.clone();
            config_text = Some(text);
        } else if !self.models.iter().any(|m| m == &model) {
            return Err(ToolError::not_found(format!(
                "{model:?} is not a model boyd knows; known: {}.",
                self.models.join(", ")
            )));
        }
        let ctx_tokens = match a.ctx {
            Some(c) if c == 0 || c > MAX_CTX => {
                return Err(ToolError::invalid(format!(
                    "ctx {c} must be between 1 and {MAX_CTX} tokens."
                )))
            }
            Some(c) => Some(c as u32),
            None => Some(8192),
        };
        let q = SizeQuery {
            quant: a.quant,
            ctx: ctx_tokens,
            kv_dtype: a.kv_type,
            ..SizeQuery::new(
                if config_text.is_some() {
                    &label
                } else {
                    &model
                },
                &hw,
            )
        };
        let e = match &config_text {
            Some(text) => sizer::estimate_config(&q, text),
            None => sizer::estimate(&q),
        }
        .map_err(|e| ToolError::failed(format!("{e:#}.")))?;
        Ok(render_estimate(&label, &e))
    }
}

/// `hardware`: a hardware preset's memory and bandwidth, or this machine's.
#[derive(Debug, Clone)]
pub struct HardwareInfo {
    presets: Vec<String>,
}

impl Default for HardwareInfo {
    fn default() -> Self {
        Self {
            presets: preset_names(),
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct HwArgs {
    #[serde(default)]
    preset: Option<String>,
}

/// The observation for one piece of hardware.
pub fn render_hardware(h: &Hardware) -> String {
    [
        format!("hardware: {} ({}), {}", h.name, h.backend, h.description),
        format!("memory: {}", gb(h.memory)),
        format!(
            "usable for a model: {} ({:.0}% of memory)",
            gb(h.free),
            h.usable_fraction * 100.0
        ),
        format!("memory bandwidth: {:.0} GB/s", h.bandwidth.0 / 1e9),
        format!("matrix throughput: {:.1} TFLOP/s", h.matrix_flops / 1e12),
    ]
    .join("\n")
}

impl Tool for HardwareInfo {
    fn name(&self) -> &str {
        "hardware"
    }
    fn description(&self) -> &str {
        "Memory size, usable memory and memory bandwidth of one hardware preset (a GPU or Apple chip, named as in the task) or of this machine (preset \"this\"). Use it for questions about hardware; to compare two presets, call it once for each."
    }
    fn args_schema(&self) -> serde_json::Value {
        serde_json::json!({
            "type": "object",
            "properties": {"preset": {"enum": self.presets}},
            "required": ["preset"],
            "additionalProperties": false
        })
    }
    fn call(&self, args: serde_json::Value, _ctx: &ToolContext) -> Result<String, ToolError> {
        let a: HwArgs = parse_args(args)?;
        let name = a.preset.unwrap_or_else(|| "this".into());
        let h = sizer::hardware(&name, "cpu", None).map_err(|e| {
            ToolError::not_found(format!(
                "{e:#}; the presets are: {}.",
                self.presets.join(", ")
            ))
        })?;
        Ok(render_hardware(&h))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lm::CancelToken;

    fn ctx() -> ToolContext {
        ToolContext {
            workspace: None,
            blob_dir: std::env::temp_dir(),
            cancel: CancelToken::new(),
            task: None,
        }
    }

    #[test]
    fn size_model_says_a_70b_model_does_not_fit_a_4090_and_names_the_shortfall() {
        let out = SizeModel::default()
            .call(
                serde_json::json!({"model": "llama-3.1-70b", "quant": "Q4_K_M", "ctx": 8192, "hw": "rtx-4090"}),
                &ctx(),
            )
            .expect("sized");
        assert!(out.contains("fits: no"), "{out}");
        assert!(out.contains("short by"), "{out}");
        assert!(out.contains("decode speed:"), "{out}");
        // The same numbers as the library estimate `boyd size` prints.
        let mut q = SizeQuery::new("llama-3.1-70b", "rtx-4090");
        q.quant = Some("Q4_K_M".into());
        q.ctx = Some(8192);
        let e = sizer::estimate(&q).expect("estimate");
        assert!(
            out.contains(&format!("{:.1} GB", e.memory.total.gb())),
            "{out}"
        );
    }

    #[test]
    fn size_model_refuses_unknown_models_and_lists_known_ones() {
        let err = SizeModel::default()
            .call(serde_json::json!({"model": "gpt-9"}), &ctx())
            .expect_err("unknown");
        assert!(err.message.contains("llama-3.1-70b"), "{}", err.message);
    }

    #[test]
    fn hardware_reports_a_preset() {
        let out = HardwareInfo::default()
            .call(serde_json::json!({"preset": "h200"}), &ctx())
            .expect("preset");
        assert!(out.contains("memory bandwidth:"), "{out}");
        assert!(out.starts_with("hardware: h200"), "{out}");
    }

    #[test]
    fn the_schema_offers_only_known_names() {
        let s = SizeModel::default().args_schema();
        let models = &s["properties"]["model"]["enum"];
        assert!(models
            .as_array()
            .is_some_and(|a| a.iter().any(|m| m == "qwen2.5-7b")));
        let hw = &s["properties"]["hw"]["enum"];
        assert!(hw.as_array().is_some_and(|a| a.iter().any(|m| m == "this")));
    }
}
