//! Weight bytes: exact from a GGUF tensor list, or parameters × bits per weight from metadata.
//!
//! The token-embedding (`token_embd.weight`) and output (`output.weight`) tensors are kept
//! apart from the repeating layers because runtimes treat them differently: boyd's decoder keeps
//! the embedding quantized and looks rows up from it, candle-transformers' quantized llama
//! dequantizes it to f32 on the device, llama.cpp keeps it on the host, and a tied model has no
//! separate output tensor at all. [`EmbeddingPolicy`] models that choice;
//! `Backend::embedding_policy` says which one boyd's runtime makes.

use serde::{Deserialize, Serialize};

use super::arch::ArchParams;
use super::error::{add, mul, SizingError};
use super::quant::GgmlType;
use crate::units::Bytes;

/// GGUF name of the token-embedding tensor.
pub const TOKEN_EMBD: &str = "token_embd.weight";
/// GGUF name of the output (LM head) tensor; absent when tied to the embedding.
pub const OUTPUT: &str = "output.weight";

/// How the weights were sized.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum WeightsMethod {
    /// Summed from a GGUF tensor-info table: exact.
    TensorList,
    /// Parameter count × average bits per weight of a file mix: an estimate.
    ParamsTimesBpw,
}

/// Weight bytes as stored in the file, split by role.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WeightBytes {
    /// How these numbers were obtained.
    pub method: WeightsMethod,
    /// Total parameters (elements).
    pub params: u64,
    /// Average bits per weight over the whole file.
    pub bits_per_weight: f64,
    /// Token-embedding matrix.
    pub token_embd: Bytes,
    /// Output matrix (zero when tied to the embedding).
    pub output: Bytes,
    /// Everything else: the repeating blocks and the norms.
    pub layers: Bytes,
    /// `token_embd + output + layers`.
    pub total: Bytes,
    /// The output reuses the embedding matrix.
    pub tied: bool,
    /// Type of the token-embedding tensor, when known.
    pub token_embd_type: Option<GgmlType>,
    /// The distinct tensor types, in order of first appearance, when known (a tensor list);
    /// `None` when sized from a parameter count.
    pub tensor_types: Option<Vec<GgmlType>>,
}

impl WeightBytes {
    /// Bytes of the matrix the LM head multiplies by: the output tensor, or the embedding when
    /// tied.
    pub fn lm_head(&self) -> Bytes {
        if self.tied {
            self.token_embd
        } else {
            self.output
        }
    }

    /// Whether any tensor is a K-quant ([`GgmlType::is_k_quant`]); `None` when the types are
    /// unknown.
    pub fn has_k_quant(&self) -> Option<bool> {
        self.tensor_types
            .as_ref()
            .map(|t| t.iter().any(|t| t.is_k_quant()))
    }
}

/// Exact weight bytes from `(name, type, dims)` of every tensor (a GGUF tensor-info table).
///
/// Only sizes are needed, so a GGUF truncated after its tensor table sizes exactly like the
/// whole file.
pub fn from_tensors<'a, I>(tensors: I) -> Result<WeightBytes, SizingError>
where
    I: IntoIterator<Item = (&'a str, GgmlType, &'a [u64])>,
{
    let (mut embd, mut output, mut layers, mut params) = (0u64, 0u64, 0u64, 0u64);
    let mut embd_type = None;
    let mut has_output = false;
    let mut types = Vec::new();
    for (name, ty, dims) in tensors {
        if !types.contains(&ty) {
            types.push(ty);
        }
        let elems = dims
            .iter()
            .try_fold(1u64, |acc, &d| acc.checked_mul(d))
            .ok_or(SizingError::Overflow {
                what: "tensor elements",
            })?;
        let bytes = ty.tensor_bytes(elems).ok_or_else(|| {
            if !elems.is_multiple_of(ty.block_elems()) {
                SizingError::PartialBlock {
                    name: name.to_owned(),
                    elems,
                    ty: ty.name(),
                    block: ty.block_elems(),
                }
            } else {
                SizingError::Overflow {
                    what: "tensor bytes",
                }
            }
        })?;
        params = add(params, elems, "parameter count")?;
        match name {
            TOKEN_EMBD => {
                embd = add(embd, bytes, "weights")?;
                embd_type = Some(ty);
            }
            OUTPUT => {
                output = add(output, bytes, "weights")?;
                has_output = true;
            }
            _ => layers = add(layers, bytes, "weights")?,
        }
    }
    let total = add(add(embd, output, "weights")?, layers, "weights")?;
    Ok(WeightBytes {
        method: WeightsMethod::TensorList,
        params,
        bits_per_weight: if params == 0 {
            0.0
        } else {
            total as f64 * 8.0 / params as f64
        },
        token_embd: Bytes(embd),
        output: Bytes(output),
        layers: Bytes(layers),
        total: Bytes(total),
        tied: !has_output,
        token_embd_type: embd_type,
        tensor_types: Some(types),
    })
}

/// Estimated weight bytes of `params` parameters at `bits_per_weight` on average, split by the
/// embedding and output shapes in `arch` (each at the same average rate).
pub fn from_params(
    arch: &ArchParams,
    params: u64,
    bits_per_weight: f64,
) -> Result<WeightBytes, SizingError> {
    if !(bits_per_weight > 0.0 && bits_per_weight <= 64.0) {
        return Err(SizingError::BadBitsPerWeight {
            bpw: bits_per_weight,
        });
    }
    let bytes_of = |n: u64| -> Result<u64, SizingError> {
        let b = (n as f64 * bits_per_weight / 8.0).ceil();
        // f64 holds any u64 byte count to within rounding; reject what would not fit.
        if b >= u64::MAX as f64 {
            Err(SizingError::Overflow { what: "weights" })
        } else {
            Ok(b as u64)
        }
    };
    let embd_params = arch.embedding_params().min(params);
    let out_params = if arch.tied_embeddings {
        0
    } else {
        arch.embedding_params().min(params - embd_params)
    };
    let total = bytes_of(params)?;
    let embd = bytes_of(embd_params)?.min(total);
    let output = bytes_of(out_params)?.min(total - embd);
    Ok(WeightBytes {
        method: WeightsMethod::ParamsTimesBpw,
        params,
        bits_per_weight,
        token_embd: Bytes(embd),
        output: Bytes(output),
        layers: Bytes(total - embd - output),
        total: Bytes(total),
        tied: arch.tied_embeddings,
        token_embd_type: None,
        tensor_types: None,
    })
}

/// What a runtime does with the token-embedding matrix on load.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EmbeddingPolicy {
    /// Kept as stored (quantized), resident with the other weights. boyd's runtime does this
    /// on every backend, and ties the output projection to the same tensor.
    AsStored,
    /// Dequantized to an f32 copy on the compute device; the quantized tensor is kept only
    /// when the output is tied to it. candle-transformers' `quantized_llama` does this
    /// (`tok_embeddings.dequantize(device)` in `ModelWeights::from_gguf`).
    DequantizedF32,
}

/// The RoPE tables boyd's decoder builds at load for a run of `ctx` positions (capped at the
/// model's context): cos and sin, `positions × head_dim / 2` f32 each — `positions × head_dim
/// × 4` bytes per pair — and for Gemma 3 a second pair for its local layers, which rotate with
/// their own base. Both engines hold them (the native one on the host, candle on its device).
pub fn rope_tables(arch: &ArchParams, ctx: u32) -> Result<Bytes, SizingError> {
    const W: &str = "RoPE tables";
    let positions = u64::from(ctx.min(arch.context_length).max(1));
    let pairs = if arch.architecture == crate::sizing::Architecture::Gemma3 {
        2
    } else {
        1
    };
    let b = [u64::from(arch.head_dim), 4, pairs]
        .into_iter()
        .try_fold(positions, |a, f| mul(a, f, W))?;
    Ok(Bytes(b))
}

/// Resident bytes beyond the file's weights that `policy` adds (the f32 embedding copy,
/// minus the quantized tensor it replaces when that one is dropped).
pub fn embedding_copy(
    arch: &ArchParams,
    weights: &WeightBytes,
    policy: EmbeddingPolicy,
) -> Result<Bytes, SizingError> {
    match policy {
        EmbeddingPolicy::AsStored => Ok(Bytes(0)),
        EmbeddingPolicy::DequantizedF32 => {
            let f32_copy = mul(arch.embedding_params(), 4, "f32 embedding copy")?;
            if weights.tied {
                Ok(Bytes(f32_copy))
            } else {
                Ok(Bytes(f32_copy.saturating_sub(weights.token_embd.0)))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sizing::kv::tests::llama3_8b;

    fn t(name: &str, ty: GgmlType, dims: &[u64]) -> (String, GgmlType, Vec<u64>) {
        (name.to_owned(), ty, dims.to_vec())
    }

    #[test]
    fn tensor_list_is_summed_exactly_and_split_by_role() {
        let list = [
            t(TOKEN_EMBD, GgmlType::Q4_K, &[4096, 1024]),
            t("blk.0.attn_q.weight", GgmlType::Q4_K, &[4096, 4096]),
            t("blk.0.ffn_down.weight", GgmlType::Q6_K, &[14336, 4096]),
            t("blk.0.attn_norm.weight", GgmlType::F32, &[4096]),
            t(OUTPUT, GgmlType::Q6_K, &[4096, 1024]),
        ];
        let w = from_tensors(
            list.iter()
                .map(|(n, ty, d)| (n.as_str(), *ty, d.as_slice())),
        )
        .expect("weights");
        let embd = 4096 * 1024 / 256 * 144;
        let out = 4096 * 1024 / 256 * 210;
        let layers = 4096 * 4096 / 256 * 144 + 14336 * 4096 / 256 * 210 + 4096 * 4;
        assert_eq!(w.token_embd, Bytes(embd));
        assert_eq!(w.output, Bytes(out));
        assert_eq!(w.layers, Bytes(layers));
        assert_eq!(w.total, Bytes(embd + out + layers));
        assert!(!w.tied);
        assert_eq!(w.lm_head(), Bytes(out));
        assert_eq!(
            w.params,
            4096 * 1024 * 2 + 4096 * 4096 + 14336 * 4096 + 4096
        );
        assert_eq!(
            w.tensor_types,
            Some(vec![GgmlType::Q4_K, GgmlType::Q6_K, GgmlType::F32])
        );
        assert_eq!(w.has_k_quant(), Some(true));
        let q8 = [t("blk.0.attn_q.weight", GgmlType::Q8_0, &[64, 64])];
        let w = from_tensors(q8.iter().map(|(n, ty, d)| (n.as_str(), *ty, d.as_slice())))
            .expect("weights");
        assert_eq!(w.has_k_quant(), Some(false));
    }

    #[test]
    fn missing_output_means_tied() {
        let dims = [64u64, 10];
        let w = from_tensors([(TOKEN_EMBD, GgmlType::F16, &dims[..])]).expect("weights");
        assert!(w.tied);
        assert_eq!(w.lm_head(), Bytes(64 * 10 * 2));
    }

    #[test]
    fn partial_block_tensor_is_an_error_naming_it() {
        let dims = [100u64];
        let err =
            from_tensors([("blk.0.x", GgmlType::Q4_0, &dims[..])]).expect_err("partial block");
        assert!(
            matches!(err, SizingError::PartialBlock { ref name, elems: 100, .. } if name == "blk.0.x")
        );
        let huge = [u64::MAX, 2];
        assert!(matches!(
            from_tensors([("x", GgmlType::F32, &huge[..])]),
            Err(SizingError::Overflow { .. })
        ));
    }

    #[test]
    fn params_times_bpw_splits_embedding_and_output() {
        let arch = llama3_8b();
        let w = from_params(&arch, 8_030_261_248, 8.0).expect("weights");
        assert_eq!(w.total, Bytes(8_030_261_248));
        assert_eq!(w.token_embd, Bytes(128_256 * 4096));
        assert_eq!(w.output, Bytes(128_256 * 4096));
        assert_eq!(w.layers.0 + w.token_embd.0 + w.output.0, w.total.0);
        assert_eq!(w.has_k_quant(), None, "types unknown");
        assert!(from_params(&arch, 1, 0.0).is_err());
        assert!(from_params(&arch, 1, f64::NAN).is_err());
        assert!(matches!(
            from_params(&arch, u64::MAX, 64.0),
            Err(SizingError::Overflow { .. })
        ));
    }

    #[test]
    fn candle_embedding_copy_replaces_untied_and_adds_to_tied() {
        let arch = llama3_8b();
        let w = from_params(&arch, 8_030_261_248, 4.0).expect("weights");
        let f32_copy = 128_256 * 4096 * 4;
        let extra = embedding_copy(&arch, &w, EmbeddingPolicy::DequantizedF32).expect("copy");
        assert_eq!(extra, Bytes(f32_copy - w.token_embd.0));
        let tied = ArchParams {
            tied_embeddings: true,
            ..arch.clone()
        };
        let wt = from_params(&tied, 7_000_000_000, 4.0).expect("weights");
        assert_eq!(
            embedding_copy(&tied, &wt, EmbeddingPolicy::DequantizedF32).expect("copy"),
            Bytes(f32_copy)
        );
        assert_eq!(
            embedding_copy(&arch, &w, EmbeddingPolicy::AsStored).expect("copy"),
            Bytes(0)
        );
    }
}
