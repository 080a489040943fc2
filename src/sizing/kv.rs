//! KV cache size: 2 × layers × KV heads × head dim × context × bytes per value.
//!
//! Computed per layer so that K and V head dims may differ and sliding-window layers store at
//! most `sliding_window` positions. Quantized KV types (q8_0, q4_0) are sized by their GGML
//! block layout over one token's row (KV heads × head dim), as llama.cpp stores them; a row
//! that is not a whole number of blocks is an error, not a rounding.

use serde::{Deserialize, Serialize};

use super::arch::ArchParams;
use super::error::{add, mul, SizingError};
use super::quant::GgmlType;
use crate::units::Bytes;

/// Storage type of the KV cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum KvDtype {
    /// 32-bit float (4 bytes per value).
    F32,
    /// 16-bit float (2 bytes per value): the usual default.
    F16,
    /// bfloat16 (2 bytes per value).
    Bf16,
    /// Q8_0 blocks: 34 bytes per 32 values.
    Q8_0,
    /// Q4_0 blocks: 18 bytes per 32 values.
    Q4_0,
}

impl KvDtype {
    /// Every supported KV type.
    pub const ALL: [KvDtype; 5] = [Self::F32, Self::F16, Self::Bf16, Self::Q8_0, Self::Q4_0];

    /// The GGML type that lays out the cache.
    pub fn ggml(self) -> GgmlType {
        match self {
            Self::F32 => GgmlType::F32,
            Self::F16 => GgmlType::F16,
            Self::Bf16 => GgmlType::BF16,
            Self::Q8_0 => GgmlType::Q8_0,
            Self::Q4_0 => GgmlType::Q4_0,
        }
    }

    /// Lower-case name (`f16`, `q8_0`, …), as on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Self::F32 => "f32",
            Self::F16 => "f16",
            Self::Bf16 => "bf16",
            Self::Q8_0 => "q8_0",
            Self::Q4_0 => "q4_0",
        }
    }

    /// Parse a name case-insensitively.
    pub fn parse(name: &str) -> Result<Self, SizingError> {
        Self::ALL
            .into_iter()
            .find(|d| d.name().eq_ignore_ascii_case(name.trim()))
            .ok_or_else(|| SizingError::UnknownKvDtype {
                name: name.to_owned(),
            })
    }

    /// Bytes of one row of `elems` values, or an error if the row is not whole blocks.
    pub fn row_bytes(self, elems: u64) -> Result<u64, SizingError> {
        let t = self.ggml();
        if !elems.is_multiple_of(t.block_elems()) {
            return Err(SizingError::KvRow {
                dtype: self.name(),
                block: t.block_elems(),
                row: elems,
            });
        }
        t.tensor_bytes(elems)
            .ok_or(SizingError::Overflow { what: "KV row" })
    }
}

impl std::fmt::Display for KvDtype {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for KvDtype {
    type Err = SizingError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

/// The KV cache of one sequence at one context length, term by term.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct KvCache {
    /// Storage type.
    pub dtype: KvDtype,
    /// Context length (positions) asked for.
    pub ctx: u32,
    /// Bytes one more position adds when no layer is window-capped: K + V over all layers.
    pub per_token: Bytes,
    /// Key bytes at `ctx`.
    pub k: Bytes,
    /// Value bytes at `ctx`.
    pub v: Bytes,
    /// `k + v`.
    pub total: Bytes,
    /// Layers with full attention.
    pub full_layers: u32,
    /// Layers capped at `window + WINDOW_SLACK` positions.
    pub sliding_layers: u32,
    /// The window, when some layers use one.
    pub window: Option<u32>,
}

/// Positions a runtime keeps for a sliding-window layer beyond its window: what one forward
/// pass may add before the oldest positions can go. llama.cpp sizes such a layer
/// `n_swa + n_ubatch` (its default batch is 512); boyd's native cache holds window + 2 × 256
/// (`runtime::kv_cache::DEFAULT_RING_SLACK`). A windowed layer stores `min(ctx, window + 512)`.
pub const WINDOW_SLACK: u32 = 512;

/// Positions a sliding-window layer stores at context `ctx`.
fn windowed(w: u32, ctx: u32) -> u32 {
    ctx.min(w.saturating_add(WINDOW_SLACK))
}

/// Positions a layer stores at context `ctx`.
fn positions(arch: &ArchParams, layer: u32, ctx: u32) -> u64 {
    match arch.sliding_window {
        Some(w) if arch.is_sliding_layer(layer) => u64::from(windowed(w, ctx)),
        _ => u64::from(ctx),
    }
}

/// KV cache bytes of one sequence of `ctx` positions.
pub fn kv_cache(arch: &ArchParams, dtype: KvDtype, ctx: u32) -> Result<KvCache, SizingError> {
    arch.validate()?;
    let k_row = dtype.row_bytes(arch.k_row_elems())?;
    let v_row = dtype.row_bytes(arch.v_row_elems())?;
    let layers = u64::from(arch.n_layers);
    let per_token = mul(add(k_row, v_row, "KV per token")?, layers, "KV per token")?;
    let sliding_layers = arch.n_sliding_layers();
    let full_layers = arch.n_layers - sliding_layers;
    // Two groups of layers: full attention stores ctx positions, windowed ones
    // min(ctx, w + WINDOW_SLACK).
    let full_pos = mul(u64::from(full_layers), u64::from(ctx), "KV positions")?;
    let swa_pos = match arch.sliding_window {
        Some(w) => mul(
            u64::from(sliding_layers),
            u64::from(windowed(w, ctx)),
            "KV positions",
        )?,
        None => 0,
    };
    let layer_positions = add(full_pos, swa_pos, "KV positions")?;
    debug_assert_eq!(
        layer_positions,
        (0..arch.n_layers)
            .map(|l| positions(arch, l, ctx))
            .sum::<u64>()
    );
    let k = mul(k_row, layer_positions, "KV cache (K)")?;
    let v = mul(v_row, layer_positions, "KV cache (V)")?;
    Ok(KvCache {
        dtype,
        ctx,
        per_token: Bytes(per_token),
        k: Bytes(k),
        v: Bytes(v),
        total: Bytes(add(k, v, "KV cache")?),
        full_layers,
        sliding_layers,
        window: arch.sliding_window.filter(|_| sliding_layers > 0),
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::sizing::arch::Architecture;

    /// Llama-3-8B (`meta-llama/Meta-Llama-3-8B` config.json).
    pub(crate) fn llama3_8b() -> ArchParams {
        ArchParams {
            architecture: Architecture::Llama,
            n_layers: 32,
            n_heads: 32,
            n_kv_heads: 8,
            head_dim: 128,
            head_dim_v: 128,
            hidden: 4096,
            ffn: 14336,
            vocab: 128_256,
            rope_base: 500_000.0,
            rope_scaling: None,
            norm_eps: 1e-5,
            context_length: 8192,
            sliding_window: None,
            tied_embeddings: false,
        }
    }

    #[test]
    fn llama3_8b_f16_is_131072_bytes_per_token() {
        // 2 (K and V) x 32 layers x 8 KV heads x 128 dims x 2 bytes = 131,072.
        let kv = kv_cache(&llama3_8b(), KvDtype::F16, 8192).expect("kv");
        assert_eq!(kv.per_token, Bytes(131_072));
        assert_eq!(kv.total, Bytes(131_072 * 8192));
        assert_eq!(
            kv.total,
            Bytes(Bytes::GIB),
            "8k context of Llama-3-8B is exactly 1 GiB"
        );
        assert_eq!(kv.k, kv.v);
    }

    #[test]
    fn sixty_four_layers_q8_0_at_32k_matches_hand_computation() {
        // 64 layers, 8 KV heads x 128 = 1024 values per row = 32 Q8_0 blocks of 34 bytes
        // = 1088 bytes per row; K + V = 2176 bytes per layer per token; x 64 = 139,264 per
        // token; x 32,768 = 4,563,402,752 bytes (4.25 GiB).
        let arch = ArchParams {
            n_layers: 64,
            n_heads: 64,
            ..llama3_8b()
        };
        let kv = kv_cache(&arch, KvDtype::Q8_0, 32_768).expect("kv");
        assert_eq!(kv.per_token, Bytes(139_264));
        assert_eq!(kv.total, Bytes(4_563_402_752));
        assert_eq!(kv.total.gib(), 4.25);
        let q4 = kv_cache(&arch, KvDtype::Q4_0, 32_768).expect("kv");
        assert_eq!(q4.per_token, Bytes(64 * 2 * 32 * 18));
    }

    #[test]
    fn k_and_v_head_dims_may_differ() {
        let arch = ArchParams {
            head_dim: 192,
            head_dim_v: 128,
            ..llama3_8b()
        };
        let kv = kv_cache(&arch, KvDtype::F32, 10).expect("kv");
        assert_eq!(kv.k, Bytes(32 * 8 * 192 * 4 * 10));
        assert_eq!(kv.v, Bytes(32 * 8 * 128 * 4 * 10));
    }

    #[test]
    fn sliding_window_layers_are_capped() {
        let mistral = ArchParams {
            architecture: Architecture::Mistral,
            sliding_window: Some(4096),
            ..llama3_8b()
        };
        let at_8k = kv_cache(&mistral, KvDtype::F16, 8192).expect("kv");
        let at_32k = kv_cache(&mistral, KvDtype::F16, 32_768).expect("kv");
        assert_eq!(at_8k.total, at_32k.total, "every Mistral layer is windowed");
        let at_4k = kv_cache(&mistral, KvDtype::F16, 4096).expect("kv");
        assert_eq!(at_32k.total.0, at_4k.total.0 / 4096 * (4096 + 512));
        assert_eq!(at_32k.sliding_layers, 32);

        // Gemma 3: 5 of every 6 layers windowed. 12 layers -> 10 windowed, 2 global.
        let gemma = ArchParams {
            architecture: Architecture::Gemma3,
            n_layers: 12,
            sliding_window: Some(1024),
            ..llama3_8b()
        };
        let kv = kv_cache(&gemma, KvDtype::F16, 8192).expect("kv");
        assert_eq!((kv.full_layers, kv.sliding_layers), (2, 10));
        let row = 8 * 128 * 2;
        assert_eq!(kv.total, Bytes(2 * row * (2 * 8192 + 10 * (1024 + 512))));
        let short = kv_cache(&gemma, KvDtype::F16, 1200).expect("kv");
        assert_eq!(
            short.total,
            Bytes(2 * row * 12 * 1200),
            "under window + slack"
        );
    }

    #[test]
    fn quantized_kv_rejects_rows_that_are_not_whole_blocks() {
        let arch = ArchParams {
            n_heads: 1,
            n_kv_heads: 1,
            head_dim: 48,
            head_dim_v: 48,
            ..llama3_8b()
        };
        assert!(matches!(
            kv_cache(&arch, KvDtype::Q8_0, 16),
            Err(SizingError::KvRow {
                row: 48,
                block: 32,
                ..
            })
        ));
        assert!(kv_cache(&arch, KvDtype::F16, 16).is_ok());
    }

    #[test]
    fn kv_dtype_parses_case_insensitively() {
        assert_eq!(KvDtype::parse("Q8_0"), Ok(KvDtype::Q8_0));
        assert_eq!(KvDtype::parse("bf16"), Ok(KvDtype::Bf16));
        assert!(KvDtype::parse("q5_1").is_err());
    }
}
