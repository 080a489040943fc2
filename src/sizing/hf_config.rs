//! Architecture parameters from a Hugging Face `config.json`.
//!
//! Only the fields that decide memory and speed are read; defaults follow the transformers
//! config classes of each family (e.g. `tie_word_embeddings` is true for Gemma 3, false for
//! Llama). Gemma 3's multimodal configs nest the language model under `text_config`. The
//! parameter count is derived from the shape ([`ArchParams::param_count`]).

use serde_json::{Map, Value};

use super::arch::{ArchError, ArchParams, Architecture, RopeScaling};

/// Why a `config.json` could not be turned into architecture parameters.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum HfConfigError {
    /// Not valid JSON, or not a JSON object.
    #[error("config.json is not a JSON object: {0}")]
    Json(String),
    /// `model_type` names a family boyd does not size.
    #[error("model_type {0:?} is not supported; supported: llama, mistral, qwen2, qwen3, gemma3, gemma3_text, phi3")]
    UnknownModelType(String),
    /// A required field is missing.
    #[error("config.json has no {0:?}")]
    Missing(&'static str),
    /// A field has the wrong type or an out-of-range value.
    #[error("config.json field {field:?}: expected {expected}")]
    Invalid {
        /// Field name.
        field: &'static str,
        /// What was expected.
        expected: &'static str,
    },
    /// The values are inconsistent.
    #[error("config.json: {0}")]
    Arch(#[from] ArchError),
    /// The implied parameter count overflows.
    #[error("config.json: parameter count overflows u64")]
    Overflow,
}

/// A parsed `config.json`.
#[derive(Debug, Clone, PartialEq)]
pub struct HfModel {
    /// Architecture parameters.
    pub arch: ArchParams,
    /// Parameter count implied by the shape.
    pub params: u64,
    /// `torch_dtype`, when given.
    pub torch_dtype: Option<String>,
}

struct Fields<'a> {
    m: &'a Map<String, Value>,
}

impl Fields<'_> {
    fn u32_opt(&self, field: &'static str) -> Result<Option<u32>, HfConfigError> {
        match self.m.get(field) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => v
                .as_u64()
                .and_then(|n| u32::try_from(n).ok())
                .map(Some)
                .ok_or(HfConfigError::Invalid {
                    field,
                    expected: "a non-negative integer below 2^32",
                }),
        }
    }
    fn u32(&self, field: &'static str, default: Option<u32>) -> Result<u32, HfConfigError> {
        self.u32_opt(field)?
            .or(default)
            .ok_or(HfConfigError::Missing(field))
    }
    fn f32(&self, field: &'static str, default: f32) -> Result<f32, HfConfigError> {
        match self.m.get(field) {
            None | Some(Value::Null) => Ok(default),
            Some(v) => v.as_f64().map(|x| x as f32).ok_or(HfConfigError::Invalid {
                field,
                expected: "a number",
            }),
        }
    }
    fn bool(&self, field: &'static str, default: bool) -> Result<bool, HfConfigError> {
        match self.m.get(field) {
            None | Some(Value::Null) => Ok(default),
            Some(v) => v.as_bool().ok_or(HfConfigError::Invalid {
                field,
                expected: "true or false",
            }),
        }
    }
}

fn rope_scaling(v: Option<&Value>) -> Result<Option<RopeScaling>, HfConfigError> {
    let Some(Value::Object(o)) = v else {
        return Ok(None);
    };
    let kind = o
        .get("rope_type")
        .or_else(|| o.get("type"))
        .and_then(Value::as_str)
        .unwrap_or("");
    let factor = o.get("factor").and_then(Value::as_f64).unwrap_or(1.0) as f32;
    Ok(match kind {
        "linear" => Some(RopeScaling::Linear { factor }),
        "yarn" => Some(RopeScaling::Yarn {
            factor,
            original_context: o
                .get("original_max_position_embeddings")
                .and_then(Value::as_u64)
                .and_then(|n| u32::try_from(n).ok())
                .unwrap_or(0),
        }),
        // llama3, dynamic, longrope, …: frequency tweaks that do not change any size.
        _ => None,
    })
}

/// Parse the text of a `config.json`.
pub fn parse(text: &str) -> Result<HfModel, HfConfigError> {
    let root: Value = serde_json::from_str(text).map_err(|e| HfConfigError::Json(e.to_string()))?;
    let Value::Object(top) = &root else {
        return Err(HfConfigError::Json("top level is not an object".into()));
    };
    let model_type = top
        .get("model_type")
        .and_then(Value::as_str)
        .ok_or(HfConfigError::Missing("model_type"))?;
    let (architecture, m) = match model_type {
        "llama" => (Architecture::Llama, top),
        "mistral" => (Architecture::Mistral, top),
        "qwen2" => (Architecture::Qwen2, top),
        "qwen3" => (Architecture::Qwen3, top),
        "phi3" => (Architecture::Phi3, top),
        "gemma3_text" => (Architecture::Gemma3, top),
        "gemma3" => match top.get("text_config") {
            Some(Value::Object(t)) => (Architecture::Gemma3, t),
            _ => return Err(HfConfigError::Missing("text_config")),
        },
        other => return Err(HfConfigError::UnknownModelType(other.to_owned())),
    };
    let f = Fields { m };
    let gemma = architecture == Architecture::Gemma3;
    // Gemma3TextConfig defaults (transformers) fill fields the multimodal configs omit.
    let g = |v: u32| gemma.then_some(v);
    let hidden = f.u32("hidden_size", g(2304))?;
    let n_heads = f.u32("num_attention_heads", g(8))?;
    let n_kv_heads = f.u32("num_key_value_heads", Some(n_heads))?;
    if n_heads == 0 {
        return Err(ArchError::Zero { field: "n_heads" }.into());
    }
    let head_dim = match f.u32_opt("head_dim")? {
        Some(d) => d,
        None if gemma => 256,
        None => hidden / n_heads,
    };
    let sliding_window = match architecture {
        Architecture::Qwen2 | Architecture::Qwen3 => {
            if f.bool("use_sliding_window", false)? {
                f.u32_opt("sliding_window")?
            } else {
                None
            }
        }
        Architecture::Gemma3 => Some(f.u32("sliding_window", Some(4096))?),
        _ => f.u32_opt("sliding_window")?,
    };
    let arch = ArchParams {
        architecture,
        n_layers: f.u32("num_hidden_layers", g(26))?,
        n_heads,
        n_kv_heads,
        head_dim,
        head_dim_v: head_dim,
        hidden,
        ffn: f.u32("intermediate_size", g(9216))?,
        vocab: f.u32("vocab_size", g(262_208))?,
        rope_base: f.f32("rope_theta", if gemma { 1_000_000.0 } else { 10_000.0 })?,
        rope_scaling: rope_scaling(m.get("rope_scaling"))?,
        norm_eps: f.f32("rms_norm_eps", if gemma { 1e-6 } else { 1e-5 })?,
        context_length: f.u32("max_position_embeddings", g(131_072))?,
        sliding_window,
        tied_embeddings: f.bool("tie_word_embeddings", gemma)?,
    };
    arch.validate()?;
    let params = arch.param_count().ok_or(HfConfigError::Overflow)?;
    let torch_dtype = m
        .get("torch_dtype")
        .or_else(|| top.get("torch_dtype"))
        .and_then(Value::as_str)
        .map(str::to_owned);
    Ok(HfModel {
        arch,
        params,
        torch_dtype,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `meta-llama/Llama-3.1-8B-Instruct` config.json (abridged to the fields read).
    const LLAMA31_8B: &str = r#"{
      "architectures": ["LlamaForCausalLM"], "hidden_size": 4096, "intermediate_size": 14336,
      "max_position_embeddings": 131072, "model_type": "llama", "num_attention_heads": 32,
      "num_hidden_layers": 32, "num_key_value_heads": 8, "rms_norm_eps": 1e-05,
      "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                       "original_max_position_embeddings": 8192, "rope_type": "llama3"},
      "rope_theta": 500000.0, "tie_word_embeddings": false, "torch_dtype": "bfloat16",
      "vocab_size": 128256
    }"#;

    #[test]
    fn llama31_8b_config_parses_to_the_published_shape() {
        let m = parse(LLAMA31_8B).expect("parse");
        let a = &m.arch;
        assert_eq!(a.architecture, Architecture::Llama);
        assert_eq!(
            (a.n_layers, a.n_heads, a.n_kv_heads, a.head_dim),
            (32, 32, 8, 128)
        );
        assert_eq!((a.hidden, a.ffn, a.vocab), (4096, 14336, 128_256));
        assert_eq!(a.rope_scaling, None, "llama3 scaling changes no size");
        assert!(!a.tied_embeddings);
        assert_eq!(m.params, 8_030_261_248, "Llama-3.1-8B parameter count");
        assert_eq!(m.torch_dtype.as_deref(), Some("bfloat16"));
    }

    #[test]
    fn qwen2_sliding_window_only_when_enabled_and_biases_count() {
        // Qwen/Qwen2.5-0.5B-Instruct
        let text = r#"{"model_type": "qwen2", "hidden_size": 896, "intermediate_size": 4864,
            "num_attention_heads": 14, "num_hidden_layers": 24, "num_key_value_heads": 2,
            "max_position_embeddings": 32768, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0,
            "sliding_window": 32768, "use_sliding_window": false, "tie_word_embeddings": true,
            "vocab_size": 151936}"#;
        let m = parse(text).expect("parse");
        assert_eq!(m.arch.sliding_window, None);
        assert_eq!(m.arch.head_dim, 64);
        assert_eq!(m.params, 494_032_768, "Qwen2.5-0.5B parameter count");
    }

    #[test]
    fn gemma3_reads_text_config_with_defaults() {
        let text = r#"{"model_type": "gemma3", "text_config": {"model_type": "gemma3_text",
            "hidden_size": 2560, "intermediate_size": 10240, "num_hidden_layers": 34,
            "num_attention_heads": 8, "num_key_value_heads": 4, "sliding_window": 1024,
            "rope_scaling": {"factor": 8.0, "rope_type": "linear"}}}"#;
        let m = parse(text).expect("parse");
        let a = &m.arch;
        assert_eq!(a.architecture, Architecture::Gemma3);
        assert_eq!(
            (a.head_dim, a.vocab, a.sliding_window),
            (256, 262_208, Some(1024))
        );
        assert!(a.tied_embeddings);
        assert_eq!(a.rope_scaling, Some(RopeScaling::Linear { factor: 8.0 }));
        assert_eq!(a.n_sliding_layers(), 29, "34 layers, every sixth global");
    }

    #[test]
    fn bad_configs_are_typed_errors() {
        assert!(matches!(parse("[1]"), Err(HfConfigError::Json(_))));
        assert!(matches!(parse("{"), Err(HfConfigError::Json(_))));
        assert!(matches!(
            parse(r#"{"model_type": "bert"}"#),
            Err(HfConfigError::UnknownModelType(_))
        ));
        assert!(matches!(
            parse(r#"{"model_type": "llama", "hidden_size": 64}"#),
            Err(HfConfigError::Missing(_))
        ));
        let zero = LLAMA31_8B.replace("\"num_attention_heads\": 32", "\"num_attention_heads\": 0");
        assert!(matches!(
            parse(&zero),
            Err(HfConfigError::Arch(ArchError::Zero { .. }))
        ));
        let nodiv = LLAMA31_8B.replace("\"num_key_value_heads\": 8", "\"num_key_value_heads\": 5");
        assert!(matches!(
            parse(&nodiv),
            Err(HfConfigError::Arch(ArchError::KvHeadsDoNotDivide { .. }))
        ));
        let neg = LLAMA31_8B.replace("\"vocab_size\": 128256", "\"vocab_size\": -1");
        assert!(matches!(
            parse(&neg),
            Err(HfConfigError::Invalid {
                field: "vocab_size",
                ..
            })
        ));
    }
}
