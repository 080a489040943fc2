//! Architecture parameters: the handful of numbers that decide a transformer's memory and speed.
//!
//! `ArchParams` is read once — from a GGUF header (`runtime::gguf`), a Hugging Face
//! `config.json`, or a catalog entry — and then passed by reference everywhere. It is plain
//! data with no dependency on candle, so the sizing model can use it without loading anything.

use serde::{Deserialize, Serialize};

/// Model families boyd knows by name. `general.architecture` in a GGUF becomes one of these at
/// the file boundary; an unknown string is an error, not a silent default.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Architecture {
    /// Llama 1/2/3, SmolLM, TinyLlama and other plain llama-family decoders.
    Llama,
    /// Mistral 7B style (llama layout, usually with a sliding window).
    Mistral,
    /// Qwen2 / Qwen2.5: llama layout plus biases on the Q, K and V projections.
    Qwen2,
    /// Qwen3: llama layout plus RMS norms on Q and K per head.
    Qwen3,
    /// Gemma 3: post-attention and post-FFN norms, a GELU gate, a scaled embedding, and
    /// sliding-window layers interleaved with global ones.
    Gemma3,
    /// Phi-3: llama layout with fused Q/K/V and gate/up matrices.
    Phi3,
}

impl Architecture {
    /// Parse the value of `general.architecture`.
    pub fn from_gguf_name(name: &str) -> Option<Self> {
        Some(match name {
            "llama" => Self::Llama,
            "mistral" => Self::Mistral,
            "qwen2" => Self::Qwen2,
            "qwen3" => Self::Qwen3,
            "gemma3" => Self::Gemma3,
            "phi3" => Self::Phi3,
            _ => return None,
        })
    }

    /// The key prefix used for this architecture's hyper-parameters in GGUF metadata.
    pub fn gguf_name(self) -> &'static str {
        match self {
            Self::Llama => "llama",
            Self::Mistral => "mistral",
            Self::Qwen2 => "qwen2",
            Self::Qwen3 => "qwen3",
            Self::Gemma3 => "gemma3",
            Self::Phi3 => "phi3",
        }
    }

    /// Whether boyd's decoder can run this architecture (the others are sizing-only).
    pub fn runnable(self) -> bool {
        matches!(
            self,
            Self::Llama | Self::Mistral | Self::Qwen2 | Self::Qwen3 | Self::Gemma3 | Self::Phi3
        )
    }

    /// Q, K and V projections carry a bias (Qwen2).
    pub fn qkv_bias(self) -> bool {
        matches!(self, Self::Qwen2)
    }

    /// Per-head RMS norm on Q and K before RoPE (Qwen3, Gemma 3).
    pub fn qk_norm(self) -> bool {
        matches!(self, Self::Qwen3 | Self::Gemma3)
    }
}

impl std::fmt::Display for Architecture {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.gguf_name())
    }
}

/// RoPE frequency scaling, as declared by the model.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum RopeScaling {
    /// Positions divided by `factor`.
    Linear {
        /// Scale factor.
        factor: f32,
    },
    /// YaRN scaling with the original training context.
    Yarn {
        /// Scale factor.
        factor: f32,
        /// Context the model was trained with before scaling.
        original_context: u32,
    },
}

/// The architecture hyper-parameters of one model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ArchParams {
    /// Model family.
    pub architecture: Architecture,
    /// Number of transformer blocks.
    pub n_layers: u32,
    /// Attention (query) heads.
    pub n_heads: u32,
    /// Key/value heads (GQA: fewer than `n_heads`, dividing it).
    pub n_kv_heads: u32,
    /// Dimension of one key head.
    pub head_dim: u32,
    /// Dimension of one value head (equal to `head_dim` for every llama-family model).
    pub head_dim_v: u32,
    /// Residual stream width (embedding length).
    pub hidden: u32,
    /// Feed-forward inner width.
    pub ffn: u32,
    /// Vocabulary size.
    pub vocab: u32,
    /// RoPE base frequency (theta).
    pub rope_base: f32,
    /// RoPE scaling, when the model declares one.
    pub rope_scaling: Option<RopeScaling>,
    /// RMS-norm epsilon.
    pub norm_eps: f32,
    /// Training context length.
    pub context_length: u32,
    /// Sliding-window size for windowed layers, if any.
    pub sliding_window: Option<u32>,
    /// The output projection shares the token-embedding matrix.
    pub tied_embeddings: bool,
}

/// Why a set of architecture parameters makes no sense.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ArchError {
    /// A count that must be positive is zero.
    #[error("{field} is zero; a model needs at least one")]
    Zero {
        /// The offending field.
        field: &'static str,
    },
    /// GQA requires the KV head count to divide the head count.
    #[error("{n_kv_heads} KV heads do not divide {n_heads} attention heads")]
    KvHeadsDoNotDivide {
        /// Query heads.
        n_heads: u32,
        /// KV heads.
        n_kv_heads: u32,
    },
}

impl ArchParams {
    /// Check the invariants every consumer relies on.
    pub fn validate(&self) -> Result<(), ArchError> {
        for (field, v) in [
            ("n_layers", self.n_layers),
            ("n_heads", self.n_heads),
            ("n_kv_heads", self.n_kv_heads),
            ("head_dim", self.head_dim),
            ("head_dim_v", self.head_dim_v),
            ("hidden", self.hidden),
            ("ffn", self.ffn),
            ("vocab", self.vocab),
        ] {
            if v == 0 {
                return Err(ArchError::Zero { field });
            }
        }
        if !self.n_heads.is_multiple_of(self.n_kv_heads) {
            return Err(ArchError::KvHeadsDoNotDivide {
                n_heads: self.n_heads,
                n_kv_heads: self.n_kv_heads,
            });
        }
        Ok(())
    }

    /// Query heads per KV head.
    pub fn gqa_group(&self) -> u32 {
        self.n_heads / self.n_kv_heads.max(1)
    }
}

/// Gemma 3 interleaves five sliding-window layers with one global layer
/// (`sliding_window_pattern = 6` in its `config.json`; llama.cpp `set_swa_pattern(6)`).
const GEMMA3_SWA_PATTERN: u32 = 6;

impl ArchParams {
    /// Whether layer `layer` (0-based) attends only to the last `sliding_window` positions.
    ///
    /// `ArchParams` carries one window size; which layers use it follows the architecture:
    /// Gemma 3 makes every sixth layer global, every other family with a window (Mistral v0.1,
    /// Phi-3) applies it to all layers. Without a window no layer is windowed.
    pub fn is_sliding_layer(&self, layer: u32) -> bool {
        match (self.sliding_window, self.architecture) {
            (None, _) => false,
            (Some(_), Architecture::Gemma3) => layer % GEMMA3_SWA_PATTERN != GEMMA3_SWA_PATTERN - 1,
            (Some(_), _) => true,
        }
    }

    /// Number of windowed layers (see [`ArchParams::is_sliding_layer`]).
    pub fn n_sliding_layers(&self) -> u32 {
        (0..self.n_layers)
            .filter(|&l| self.is_sliding_layer(l))
            .count() as u32
    }

    /// Elements of one token's key row in one layer: KV heads × key head dim.
    pub fn k_row_elems(&self) -> u64 {
        u64::from(self.n_kv_heads) * u64::from(self.head_dim)
    }

    /// Elements of one token's value row in one layer: KV heads × value head dim.
    pub fn v_row_elems(&self) -> u64 {
        u64::from(self.n_kv_heads) * u64::from(self.head_dim_v)
    }

    /// Parameters of the token-embedding matrix (vocab × hidden).
    pub fn embedding_params(&self) -> u64 {
        u64::from(self.vocab) * u64::from(self.hidden)
    }

    /// Parameter count implied by the shape: embeddings, per-layer attention (with Qwen2's
    /// QKV biases and Qwen3/Gemma 3's Q/K norms), a gated FFN (three matrices), RMS norms
    /// (four per layer for Gemma 3, two otherwise), the final norm and an untied output.
    ///
    /// Exact for the llama family; used to check catalog entries and to size a
    /// `config.json`. `None` on overflow.
    pub fn param_count(&self) -> Option<u64> {
        let h = u64::from(self.hidden);
        let q = u64::from(self.n_heads).checked_mul(u64::from(self.head_dim))?;
        let k = self.k_row_elems();
        let v = self.v_row_elems();
        let o_in = u64::from(self.n_heads).checked_mul(u64::from(self.head_dim_v))?;
        let mut attn = h.checked_mul(q.checked_add(k)?.checked_add(v)?)?;
        attn = attn.checked_add(o_in.checked_mul(h)?)?;
        if self.architecture.qkv_bias() {
            attn = attn.checked_add(q + k + v)?;
        }
        if self.architecture.qk_norm() {
            attn = attn.checked_add(2 * u64::from(self.head_dim))?;
        }
        let ffn = h.checked_mul(u64::from(self.ffn))?.checked_mul(3)?;
        let norms_per_layer = if self.architecture == Architecture::Gemma3 {
            4
        } else {
            2
        };
        let layer = attn.checked_add(ffn)?.checked_add(norms_per_layer * h)?;
        let layers = layer.checked_mul(u64::from(self.n_layers))?;
        let embd = self.embedding_params();
        let output = if self.tied_embeddings { 0 } else { embd };
        layers
            .checked_add(embd)?
            .checked_add(output)?
            .checked_add(h)
    }
}
