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

/// The name of the `size_model` tool.
pub const SIZE_MODEL: &str = "size_model";

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
/// Longest hardware description the schema accepts.
const HW_MAX_CHARS: usize = 80;

fn catalog_names() -> Vec<String> {
    sizer::catalog_model_names()
}

/// The model families of the catalog: a name less its last `-<size>` part (`qwen2.5-7b` ->
/// `qwen2.5`), where two or more entries share it.
fn family_names(models: &[String]) -> Vec<String> {
    let mut fams: Vec<String> = Vec::new();
    for m in models {
        let Some(f) = family_of(m) else { continue };
        let members = models.iter().filter(|n| family_of(n) == Some(f)).count();
        if members >= 2 && !fams.iter().any(|x| x == f) {
            fams.push(f.to_string());
        }
    }
    fams
}

/// `qwen2.5-7b` -> `qwen2.5`, `smollm2-135m-instruct` -> `smollm2`: the name up to the part
/// that gives the size (digits ending in `b` or `m`).
fn family_of(name: &str) -> Option<&str> {
    let parts: Vec<&str> = name.split('-').collect();
    let at = parts.iter().position(|p| {
        let (num, unit) = p.split_at(p.len().saturating_sub(1));
        matches!(unit, "b" | "m")
            && !num.is_empty()
            && num.chars().all(|c| c.is_ascii_digit() || c == '.')
    })?;
    (at > 0).then(|| &name[..parts[..at].iter().map(|p| p.len() + 1).sum::<usize>() - 1])
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
///
/// `ctx_named`: whether the question named a context; when not, the decode figure quoted first
/// is the one at empty context (the figure people mean by "how fast does it generate").
pub fn render_estimate(model: &str, e: &Estimate, ctx_named: bool) -> String {
    let hw = &e.hardware;
    let m = &e.memory;
    let verdict_short = if e.fits { "fits" } else { "does not fit" };
    let short = match e.shortfall {
        Some(s) if !e.fits => format!(", short by {:.1} GB", s.gb()),
        _ => String::new(),
    };
    let decode = if ctx_named {
        e.speed.decode_at_ctx.0
    } else {
        e.speed.decode_empty.0
    };
    let mut lines = vec![
        format!(
            "summary: {model} {} at {} tokens {verdict_short} on {} (needs {:.1} GB, {:.1} GB usable{short}); decode about {decode:.1} tokens/s{}.",
            e.quant,
            e.ctx,
            hw.name,
            m.total.gb(),
            hw.free.gb(),
            if ctx_named { "" } else { " at empty context" }
        ),
        format!(
            "model: {model} {}, context {} tokens, KV {}, on {} ({})",
            e.quant, e.ctx, e.kv_dtype, hw.name, hw.backend
        ),
        format!("weights alone: {}", gb(m.weights)),
        format!(
            "KV cache alone: {} for {} tokens ({})",
            gb(m.kv_cache),
            e.ctx,
            e.kv_dtype
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
    lines.push(if ctx_named {
        format!(
            "decode speed: {:.1} tokens/s at {} tokens ({:.1} tokens/s at empty context)",
            e.speed.decode_at_ctx.0, e.ctx, e.speed.decode_empty.0
        )
    } else {
        format!(
            "decode speed: {:.1} tokens/s at empty context ({:.1} tokens/s at {} tokens)",
            e.speed.decode_empty.0, e.speed.decode_at_ctx.0, e.ctx
        )
    });
    if !hw.source.is_empty() && hw.name.starts_with("custom-") {
        lines.push(format!("hardware assumed: {}", hw.source));
    }
    lines.push(format!("prefill speed: {:.0} tokens/s", e.speed.prefill.0));
    lines.join("\n")
}

/// `size_model`: the sizing model for one model, quantization, context and hardware.
#[derive(Debug, Clone)]
pub struct SizeModel {
    models: Vec<String>,
    families: Vec<String>,
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
        let models = catalog_names();
        Self {
            families: family_names(&models),
            models,
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
        SIZE_MODEL
    }
    fn description(&self) -> &str {
        "Memory and speed of a model on a GPU, Apple chip or computer, before loading it: weights, KV cache, total memory, whether it fits (and by how much it is short), the largest context that fits, decode tokens/s. Use it for every question about the memory, fit or speed of a model, then answer with its lines. Args: model from the list (a family such as \"qwen2.5\" sizes every size of it and names the largest that fits); hw = the hardware as the task writes it (a GPU or Apple chip name, or its memory as \"N GB GPU\", \"N GB RAM\"), or \"this\" only when the task asks about this computer; ctx in tokens (8k = 8192) only when the task names a context."
    }
    fn args_schema(&self) -> serde_json::Value {
        let mut schema = serde_json::json!({
            "type": "object",
            "properties": {
                "model": {"enum": self.models.iter().chain(&self.families).collect::<Vec<_>>()},
                "hw": {"type": "string", "minLength": 1, "maxLength": HW_MAX_CHARS},
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
        let model = a.model.trim().to_string();
        let known = self
            .models
            .iter()
            .chain(&self.families)
            .any(|m| m == &model);
        if a.config.is_none() && !known {
            return Err(ToolError::not_found(format!(
                "{model:?} is not a model boyd knows; known: {}.",
                self.models.join(", ")
            )));
        }
        let hw = self.hardware_for(a.hw.as_deref(), ctx.task.as_deref())?;
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
        } else if self.families.iter().any(|f| f == &model) {
            return self.sweep(&model, &hw, a.quant, a.ctx, a.kv_type);
        }
        let ctx_tokens = match a.ctx {
            Some(c) if c == 0 || c > MAX_CTX => {
                return Err(ToolError::invalid(format!(
                    "ctx {c} must be between 1 and {MAX_CTX} tokens."
                )))
            }
            Some(c) => Some(c as u32),
            None => None,
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
        Ok(render_estimate(&label, &e, ctx_tokens.is_some()))
    }
}

impl SizeModel {
    /// The hardware argument, checked: required, and `this` (this computer) refused when the
    /// task names other hardware, so that a question about a 24 GB GPU is never answered with
    /// this machine's memory. The check reads the task's tokens for a preset or a memory size
    /// ([`crate::sizing::described::read`]); it rejects and says what to pass, it never picks
    /// the hardware itself.
    fn hardware_for(&self, hw: Option<&str>, task: Option<&str>) -> Result<String, ToolError> {
        let Some(hw) = hw.map(str::trim).filter(|h| !h.is_empty()) else {
            return Err(ToolError::invalid(
                "hw is required: the hardware as the task writes it (\"RTX 4090\", \"24 GB GPU\", \"M2 Ultra\"), or \"this\" when the task asks about this computer.",
            ));
        };
        if hw.eq_ignore_ascii_case("this") {
            if let (Some(task), Ok(presets)) = (task, Hardware::presets()) {
                let r = crate::sizing::described::read(task, &presets);
                if r.names_hardware() && !asks_about_this_machine(task) {
                    let named = r
                        .preset
                        .clone()
                        .or(r.memory_gib.map(|g| format!("{g} GB")))
                        .unwrap_or_default();
                    return Err(ToolError::invalid(format!(
                        "the task names hardware ({named}), not this computer: pass it as hw, written as the task writes it."
                    )));
                }
            }
        }
        Ok(hw.to_string())
    }

    /// Every catalog entry of `family` on `hw`, smallest first, and the largest that fits.
    fn sweep(
        &self,
        family: &str,
        hw: &str,
        quant: Option<String>,
        ctx: Option<u64>,
        kv_type: Option<String>,
    ) -> Result<String, ToolError> {
        let mut rows = Vec::new();
        for m in self.models.iter().filter(|m| family_of(m) == Some(family)) {
            let q = SizeQuery {
                quant: quant.clone(),
                ctx: ctx.map(|c| c.min(MAX_CTX) as u32),
                kv_dtype: kv_type.clone(),
                ..SizeQuery::new(m, hw)
            };
            let e = sizer::estimate(&q).map_err(|e| ToolError::failed(format!("{e:#}.")))?;
            rows.push((m.clone(), e));
        }
        rows.sort_by_key(|(_, e)| e.memory.weights.0);
        let Some((_, first)) = rows.first() else {
            return Err(ToolError::not_found(format!(
                "no catalog entry of the family {family:?}."
            )));
        };
        let hw_name = first.hardware.name.clone();
        let usable = first.hardware.free;
        let mut lines: Vec<String> = rows
            .iter()
            .map(|(m, e)| {
                format!(
                    "{m} {} at {} tokens: {} ({:.1} GB of {:.1} GB usable)",
                    e.quant,
                    e.ctx,
                    if e.fits { "fits" } else { "does not fit" },
                    e.memory.total.gb(),
                    usable.gb()
                )
            })
            .collect();
        let largest = rows.iter().rev().find(|(_, e)| e.fits);
        lines.insert(
            0,
            match largest {
                Some((m, e)) => format!(
                    "largest {family} model that fits on {hw_name}: {m} ({} at {} tokens, needs {:.1} GB of {:.1} GB usable)",
                    e.quant,
                    e.ctx,
                    e.memory.total.gb(),
                    usable.gb()
                ),
                None => format!("no {family} model fits on {hw_name} ({:.1} GB usable)", usable.gb()),
            },
        );
        if hw_name.starts_with("custom-") {
            lines.push(format!("hardware assumed: {}", first.hardware.source));
        }
        Ok(lines.join("\n"))
    }
}

/// Whether the task points at this computer: `this` before a machine noun (`this machine`,
/// `this box`). "My laptop" is the user's laptop, not necessarily the one boyd runs on.
pub(crate) fn asks_about_this_machine(task: &str) -> bool {
    const MACHINE_NOUNS: &[&str] = &[
        "machine",
        "computer",
        "box",
        "host",
        "laptop",
        "workstation",
        "server",
        "pc",
        "system",
        "desktop",
        "hardware",
    ];
    let words: Vec<String> = task
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect();
    words
        .windows(2)
        .any(|w| w[0] == "this" && MACHINE_NOUNS.contains(&w[1].as_str()))
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
        "Memory size, usable memory and memory bandwidth of one GPU, Apple chip or computer, written as the task writes it (a GPU or Apple chip name, or its memory as \"N GB GPU\"), or of this machine (\"this\"). Use it for questions about hardware; to compare two, call it once for each."
    }
    fn args_schema(&self) -> serde_json::Value {
        serde_json::json!({
            "type": "object",
            "properties": {"preset": {"type": "string", "minLength": 1, "maxLength": HW_MAX_CHARS}},
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
        assert!(models
            .as_array()
            .is_some_and(|a| a.iter().any(|m| m == "qwen2.5")));
        // Hardware is written as the task writes it.
        assert_eq!(s["properties"]["hw"]["type"], "string");
    }

    fn with_task(task: &str) -> ToolContext {
        ToolContext {
            task: Some(task.into()),
            ..ctx()
        }
    }

    fn size(args: serde_json::Value, task: &str) -> Result<String, ToolError> {
        SizeModel::default().call(args, &with_task(task))
    }

    #[test]
    fn hardware_written_as_people_write_it_is_sized_as_boyd_size_sizes_it() {
        for hw in [
            "24 GB of GPU memory",
            "RTX 3060 12 GB",
            "MacBook Pro M3 Max 64 GB",
            "M2 Ultra",
        ] {
            let out = size(
                serde_json::json!({"model": "llama-3.1-8b", "hw": hw}),
                "a question",
            )
            .expect(hw);
            let e = sizer::estimate(&SizeQuery::new("llama-3.1-8b", hw)).expect("estimate");
            assert!(
                out.contains(&format!("{:.1} GB usable", e.hardware.free.gb())),
                "{hw}: {out}"
            );
            assert!(!out.contains(" on this "), "{hw}: {out}");
        }
    }

    #[test]
    fn this_machine_is_refused_when_the_task_names_other_hardware() {
        for task in [
            "Is a card with 20 GB of VRAM enough for Llama-3-70B at Q4_K_M?",
            "Can an RTX 4090 hold llama 3.1 8b?",
            "Qwen2.5-0.5B on a box with 6 GB RAM: does it fit?",
            "My laptop has an M3 Max with 36 GB; can it run llama 3.1 8b?",
        ] {
            let err = size(
                serde_json::json!({"model": "llama-3.1-8b", "hw": "this"}),
                task,
            )
            .expect_err(task);
            assert!(err.message.contains("pass it as hw"), "{}", err.message);
        }
        // Missing hw is an error, never this machine.
        let err = size(serde_json::json!({"model": "llama-3.1-8b"}), "x").expect_err("no hw");
        assert!(err.message.contains("hw is required"), "{}", err.message);
        // A task about this machine may use it, even when it names a memory size.
        size(
            serde_json::json!({"model": "qwen2.5-0.5b", "hw": "this"}),
            "Would a 2 GB model fit on this machine?",
        )
        .expect("this machine");
    }

    #[test]
    fn without_a_named_context_the_decode_figure_is_at_empty_context() {
        let out = size(
            serde_json::json!({"model": "llama-3.1-8b", "hw": "rtx-4090"}),
            "x",
        )
        .expect("sized");
        let e = sizer::estimate(&SizeQuery::new("llama-3.1-8b", "rtx-4090")).expect("estimate");
        assert!(
            out.contains(&format!(
                "decode speed: {:.1} tokens/s at empty context",
                e.speed.decode_empty.0
            )),
            "{out}"
        );
        assert!(out.contains("KV cache alone:"), "{out}");
        assert!(out.contains("weights alone:"), "{out}");
    }

    #[test]
    fn a_family_is_swept_and_the_largest_that_fits_named() {
        let out = size(
            serde_json::json!({"model": "qwen2.5", "hw": "rtx-4090", "ctx": 8192}),
            "x",
        )
        .expect("sweep");
        let first = out.lines().next().unwrap_or_default();
        // 32B at Q4_K_M (about 20 GB) fits a 24 GB card at 8k; 72B does not.
        assert!(first.contains("qwen2.5-32b"), "{out}");
        assert!(
            out.contains("qwen2.5-72b Q4_K_M at 8192 tokens: does not fit"),
            "{out}"
        );
        assert_eq!(
            family_of("qwen2.5-coder-0.5b-instruct"),
            Some("qwen2.5-coder")
        );
        assert_eq!(family_of("smollm2-135m-instruct"), Some("smollm2"));
        assert_eq!(family_of("mistral-7b"), Some("mistral"));
    }
}
