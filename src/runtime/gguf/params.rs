//! Architecture hyper-parameters from a header's metadata, checked against the tensors.

use super::*;

impl GgufHeader {
    /// Read the architecture hyper-parameters once from metadata and check them.
    pub fn arch_params(&self) -> Result<ArchParams, GgufError> {
        let architecture = self.architecture()?;
        let a = architecture.gguf_name();
        let k = |s: &str| format!("{a}.{s}");
        let n_layers = self.u32(&k("block_count"))?;
        let n_heads = self.u32(&k("attention.head_count"))?;
        let n_kv_heads = self
            .opt_u32(&k("attention.head_count_kv"))?
            .unwrap_or(n_heads);
        let hidden = self.u32(&k("embedding_length"))?;
        let ffn = self.u32(&k("feed_forward_length"))?;
        if n_heads == 0 {
            return Err(ArchError::Zero { field: "n_heads" }.into());
        }
        let head_dim = match self.opt_u32(&k("attention.key_length"))? {
            Some(d) => d,
            None => {
                if hidden % n_heads != 0 {
                    return Err(GgufError::Inconsistent(format!(
                        "embedding length {hidden} is not a multiple of {n_heads} heads and no key_length is given"
                    )));
                }
                hidden / n_heads
            }
        };
        let head_dim_v = self
            .opt_u32(&k("attention.value_length"))?
            .unwrap_or(head_dim);
        let token_embd = self.tensor("token_embd.weight");
        let vocab = match self.opt_u32(&k("vocab_size"))? {
            Some(v) => v,
            None => match self.opt_array("tokenizer.ggml.tokens")? {
                Some(a) => u32::try_from(a.len()).unwrap_or(u32::MAX),
                None => token_embd
                    .and_then(|t| t.dims.get(1).copied())
                    .and_then(|d| u32::try_from(d).ok())
                    .ok_or_else(|| GgufError::MissingKey(k("vocab_size")))?,
            },
        };
        let rope_base = self.opt_f32(&k("rope.freq_base"))?.unwrap_or(10_000.0);
        let rope_scaling = match self.opt_str(&k("rope.scaling.type"))? {
            None | Some("none") => None,
            Some(kind) => {
                let factor = self.opt_f32(&k("rope.scaling.factor"))?.unwrap_or(1.0);
                match kind {
                    "linear" => Some(RopeScaling::Linear { factor }),
                    "yarn" => Some(RopeScaling::Yarn {
                        factor,
                        original_context: self
                            .opt_u32(&k("rope.scaling.original_context_length"))?
                            .unwrap_or(0),
                    }),
                    _ => {
                        return Err(GgufError::wrong(
                            &k("rope.scaling.type"),
                            "none, linear or yarn",
                        ))
                    }
                }
            }
        };
        let norm_eps = self
            .opt_f32(&k("attention.layer_norm_rms_epsilon"))?
            .unwrap_or(1e-5);
        let context_length = self.opt_u32(&k("context_length"))?.unwrap_or(2048);
        let sliding_window = self.opt_u32(&k("attention.sliding_window"))?;
        let tied_embeddings = self.tensor("output.weight").is_none();
        let p = ArchParams {
            architecture,
            n_layers,
            n_heads,
            n_kv_heads,
            head_dim,
            head_dim_v,
            hidden,
            ffn,
            vocab,
            rope_base,
            rope_scaling,
            norm_eps,
            context_length,
            sliding_window,
            tied_embeddings,
        };
        p.validate()?;
        if let Some(t) = token_embd {
            if t.dims.first().copied() != Some(hidden as u64) {
                return Err(GgufError::Inconsistent(format!(
                    "token_embd.weight has dims {:?} but embedding_length is {hidden}",
                    t.dims
                )));
            }
        }
        Ok(p)
    }
}
