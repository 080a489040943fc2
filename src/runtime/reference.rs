//! candle-transformers' quantized models, wrapped as the reference our decoder is checked and
//! benchmarked against (logit agreement tests, `boyd bench --impl reference`).

use std::path::Path;

use candle_core::quantized::gguf_file;
use candle_core::{Device, Tensor};
use candle_transformers::models::{quantized_llama, quantized_qwen2, quantized_qwen3};

use crate::sizing::Architecture;

/// One of candle-transformers' per-family model files, with its own internal KV cache.
pub enum Reference {
    /// `quantized_llama` (llama, mistral).
    Llama(quantized_llama::ModelWeights),
    /// `quantized_qwen2`.
    Qwen2(quantized_qwen2::ModelWeights),
    /// `quantized_qwen3`.
    Qwen3(Box<quantized_qwen3::ModelWeights>),
}

impl std::fmt::Debug for Reference {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Reference::Llama(_) => "Reference::Llama",
            Reference::Qwen2(_) => "Reference::Qwen2",
            Reference::Qwen3(_) => "Reference::Qwen3",
        })
    }
}

impl Reference {
    /// Load the reference implementation for `arch` from `path`.
    pub fn load(path: &Path, arch: Architecture, device: &Device) -> candle_core::Result<Self> {
        let mut f = std::fs::File::open(path)?;
        let ct = gguf_file::Content::read(&mut f)?;
        Ok(match arch {
            Architecture::Llama | Architecture::Mistral => Reference::Llama(
                quantized_llama::ModelWeights::from_gguf(ct, &mut f, device)?,
            ),
            Architecture::Qwen2 => Reference::Qwen2(quantized_qwen2::ModelWeights::from_gguf(
                ct, &mut f, device,
            )?),
            Architecture::Qwen3 => Reference::Qwen3(Box::new(
                quantized_qwen3::ModelWeights::from_gguf(ct, &mut f, device)?,
            )),
            other => candle_core::bail!("no reference implementation for {other}"),
        })
    }

    /// Logits `(vocab,)` after `tokens` placed at position `pos`.
    pub fn forward(
        &mut self,
        tokens: &[u32],
        pos: usize,
        device: &Device,
    ) -> candle_core::Result<Tensor> {
        let x = Tensor::new(tokens, device)?.unsqueeze(0)?;
        let out = match self {
            Reference::Llama(m) => m.forward(&x, pos)?,
            Reference::Qwen2(m) => m.forward(&x, pos)?,
            Reference::Qwen3(m) => m.forward(&x, pos)?,
        };
        out.flatten_all()
    }

    /// A snapshot (model and cache) where the reference type supports it: cloning shares
    /// tensors, and its cache appends create new tensors, so the clone stays intact.
    /// `quantized_qwen2` is not `Clone`.
    pub fn try_clone(&self) -> Option<Self> {
        match self {
            Reference::Llama(m) => Some(Reference::Llama(m.clone())),
            Reference::Qwen3(m) => Some(Reference::Qwen3(m.clone())),
            Reference::Qwen2(_) => None,
        }
    }

    /// Drop the internal KV cache.
    pub fn clear(&mut self) {
        match self {
            Reference::Llama(m) => m.clear_kv_cache(),
            Reference::Qwen2(m) => m.clear_kv_cache(),
            Reference::Qwen3(m) => m.clear_kv_cache(),
        }
    }
}
