//! The llama-family transformer block as both engines run it: one description, read once from
//! `ArchParams`, that the candle engine (`decoder`) and the native CPU engine (`native`) share.
//!
//! [`BlockSpec`] holds what the architecture decides — dimensions, the switches (Q/K/V biases,
//! per-head Q/K norms, the RoPE pairing, tied output embeddings, the sliding window, fused
//! projections) — and the
//! names and shapes of every tensor a block reads. [`BlockSpec::load_layer`] loads one block's
//! weights through an engine's [`WeightSource`], so which tensors are required, optional or
//! absent is decided here once. [`RopeTables`] are the cos/sin tables both engines rotate with:
//! the native engine uses them directly, the candle engine uploads the same numbers.

use crate::runtime::decoder::DecoderError;
use crate::runtime::gguf::{GgufError, GgufHeader, TensorInfo};
use crate::sizing::{ArchParams, Architecture, RopeScaling};

type Result<T> = std::result::Result<T, DecoderError>;

/// RoPE parameters: base frequency, the position scale of linear scaling, and the pairing.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RopeSpec {
    /// Base frequency (theta).
    pub base: f32,
    /// Positions are multiplied by this (`1 / factor` under linear scaling, else 1).
    pub position_scale: f32,
    /// Adjacent pairs `(2i, 2i + 1)` rotate together (llama.cpp permutes llama/mistral Q/K
    /// rows for this); otherwise the split halves `(i, i + head_dim / 2)` do ("neox", qwen).
    pub interleaved: bool,
}

/// The activation of the feed-forward's gate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GateActivation {
    /// SiLU (SwiGLU: llama, mistral, qwen).
    Silu,
    /// GELU, tanh approximation (GeGLU: Gemma 3).
    GeluTanh,
}

/// GELU with the tanh approximation, `x/2 · (1 + tanh(√(2/π) · (x + 0.044715 x³)))`.
pub fn gelu_tanh(x: f32) -> f32 {
    const SQRT_2_OVER_PI: f32 = 0.797_884_6;
    0.5 * x * (1.0 + (SQRT_2_OVER_PI * x * (1.0 + 0.044_715 * x * x)).tanh())
}

/// A tensor of one dimension: its name in the file and its length.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VectorTensor {
    /// Tensor name.
    pub name: String,
    /// Number of elements.
    pub len: usize,
}

/// A tensor of two dimensions: its name in the file, rows (outputs) and columns (inputs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MatrixTensor {
    /// Tensor name.
    pub name: String,
    /// Rows: the output width.
    pub rows: usize,
    /// Columns: the input width.
    pub cols: usize,
}

/// The table entry of tensor `name`, which must exist and have `shape` (outermost first):
/// the check both engines' loaders make before reading a tensor's bytes.
pub fn shaped_tensor(header: &GgufHeader, name: &str, shape: &[usize]) -> Result<TensorInfo> {
    let info = header
        .tensor(name)
        .ok_or_else(|| GgufError::MissingTensor(name.to_string()))?;
    let found = info.shape();
    if found != shape {
        return Err(DecoderError::Shape {
            name: name.to_string(),
            expected: shape.to_vec(),
            found,
        });
    }
    Ok(info.clone())
}

/// Reads named, shaped tensors in one engine's representation.
pub trait WeightSource {
    /// The engine's weight matrix.
    type Matrix;
    /// The engine's vector (norm weights, biases).
    type Vector;
    /// Load a matrix, checking its shape.
    fn matrix(&mut self, t: &MatrixTensor) -> Result<Self::Matrix>;
    /// Load a vector, checking its length.
    fn vector(&mut self, t: &VectorTensor) -> Result<Self::Vector>;
    /// Whether the file has a tensor of this name.
    fn has(&self, name: &str) -> bool;
}

/// Projections that read the same input: one matrix per part, or one fused matrix holding the
/// parts' rows in order (Phi-3's `attn_qkv`: Q, K, V; its `ffn_up`: gate, up). An engine runs
/// a fused matrix as one product and splits its output by rows
/// ([`BlockSpec::qkv_rows`], [`BlockSpec::gate_up_rows`]).
#[derive(Debug)]
pub enum Projections<M> {
    /// One matrix per part, in order.
    Separate(Vec<M>),
    /// One matrix holding every part's rows, part after part.
    Fused(M),
}

/// One block's weights in an engine's representation.
#[derive(Debug)]
pub struct LayerWeights<M, V> {
    /// RMS-norm weight before attention.
    pub attn_norm: V,
    /// Query, key and value projections (rows [`BlockSpec::qkv_rows`]).
    pub qkv: Projections<M>,
    /// Biases of Q, K and V, when present.
    pub bias: [Option<V>; 3],
    /// Per-head RMS-norm weights of Q and K, when the architecture has them.
    pub qk_norm: Option<(V, V)>,
    /// RMS-norm weights applied to the attention output and to the feed-forward output before
    /// each residual add (`post_attention_norm`, `post_ffw_norm`), when the architecture has them.
    pub post_norms: Option<(V, V)>,
    /// Attention output projection.
    pub wo: M,
    /// RMS-norm weight before the feed-forward.
    pub ffn_norm: V,
    /// SwiGLU gate and up projections (rows [`BlockSpec::gate_up_rows`]).
    pub gate_up: Projections<M>,
    /// Feed-forward down projection.
    pub down: M,
}

/// The llama-family block of one model, as both engines run it.
#[derive(Debug, Clone, PartialEq)]
pub struct BlockSpec {
    /// Number of blocks.
    pub n_layers: usize,
    /// Residual stream width.
    pub hidden: usize,
    /// Dimension of one attention head (keys and values alike).
    pub head_dim: usize,
    /// Query heads.
    pub n_heads: usize,
    /// Key/value heads (dividing `n_heads`).
    pub n_kv_heads: usize,
    /// Feed-forward inner width.
    pub ffn: usize,
    /// Vocabulary size.
    pub vocab: usize,
    /// RMS-norm epsilon.
    pub norm_eps: f32,
    /// Each query sees at most this many positions (itself included), when set.
    pub sliding_window: Option<usize>,
    /// Q, K and V biases are required (Qwen2); other architectures use them when present.
    pub qkv_bias: bool,
    /// Per-head RMS norms on Q and K before RoPE (Qwen3).
    pub qk_norm: bool,
    /// The output projection is the token-embedding matrix.
    pub tied_embeddings: bool,
    /// Rotary position embedding.
    pub rope: RopeSpec,
    /// Q, K and V are one matrix, `attn_qkv` (Phi-3).
    pub fused_qkv: bool,
    /// Gate and up are one matrix, `ffn_up` with the gate's rows first (Phi-3).
    pub fused_gate_up: bool,
    /// Gemma 3 switches: norms after attention and after the feed-forward, a GELU gate, the
    /// embedding scale, the attention scale, and local/global layers.
    pub gemma: Option<GemmaSwitches>,
}

/// What Gemma 3's block does differently from the llama block (see llama.cpp's gemma3 graph).
#[derive(Debug, Clone, PartialEq)]
pub struct GemmaSwitches {
    /// The token embedding is multiplied by this (`√hidden`).
    pub embed_scale: f32,
    /// Query scale: `1 / √head_dim` (`query_pre_attn_scalar`), `1 / √(hidden / heads)` for
    /// the 27B model (62 layers), as llama.cpp sets it.
    pub attn_scale: f32,
    /// Per layer: whether it is a sliding-window ("local") layer. Local layers attend to the
    /// last `sliding_window` positions and rotate with `rope_local`; global layers see every
    /// position and rotate with the file's `rope`.
    pub local: Vec<bool>,
    /// RoPE of the local layers: base 10000, no scaling.
    pub rope_local: RopeSpec,
}

/// RoPE base of Gemma 3's sliding-window layers (the file's `rope.freq_base` is the global one).
const GEMMA_LOCAL_ROPE_BASE: f32 = 10_000.0;

impl BlockSpec {
    /// The block of a model the runtime can run, or why it cannot: an architecture supported
    /// for sizing only, or unequal or odd head dimensions.
    pub fn new(p: &ArchParams) -> Result<Self> {
        if !p.architecture.runnable() {
            return Err(DecoderError::NotRunnable(p.architecture));
        }
        if p.head_dim != p.head_dim_v || !p.head_dim.is_multiple_of(2) {
            return Err(GgufError::Inconsistent(format!(
                "head dims k={} v={} are not equal and even",
                p.head_dim, p.head_dim_v
            ))
            .into());
        }
        let position_scale = match p.rope_scaling {
            Some(RopeScaling::Linear { factor }) if factor > 0.0 => 1.0 / factor,
            _ => 1.0,
        };
        let interleaved = matches!(p.architecture, Architecture::Llama | Architecture::Mistral);
        let gemma = (p.architecture == Architecture::Gemma3).then(|| GemmaSwitches {
            embed_scale: (p.hidden as f32).sqrt(),
            attn_scale: if p.n_layers == 62 {
                1.0 / ((p.hidden / p.n_heads) as f32).sqrt()
            } else {
                1.0 / (p.head_dim as f32).sqrt()
            },
            local: (0..p.n_layers).map(|i| p.is_sliding_layer(i)).collect(),
            rope_local: RopeSpec {
                base: GEMMA_LOCAL_ROPE_BASE,
                position_scale: 1.0,
                interleaved,
            },
        });
        Ok(Self {
            n_layers: p.n_layers as usize,
            hidden: p.hidden as usize,
            head_dim: p.head_dim as usize,
            n_heads: p.n_heads as usize,
            n_kv_heads: p.n_kv_heads as usize,
            ffn: p.ffn as usize,
            vocab: p.vocab as usize,
            norm_eps: p.norm_eps,
            sliding_window: p.sliding_window.map(|w| w as usize),
            qkv_bias: p.architecture.qkv_bias(),
            qk_norm: p.architecture.qk_norm(),
            tied_embeddings: p.tied_embeddings,
            rope: RopeSpec {
                base: p.rope_base,
                position_scale,
                interleaved,
            },
            fused_qkv: p.architecture == Architecture::Phi3,
            fused_gate_up: p.architecture == Architecture::Phi3,
            gemma,
        })
    }

    /// Refuse what the file asks for that the block does not compute: RoPE over part of a
    /// head (`rope.dimension_count` below the head dim, as in Phi-4-mini) and LongRoPE
    /// frequency factors (`rope_factors_long`/`rope_factors_short`, Phi-3 128k models).
    pub fn check_file(&self, header: &GgufHeader) -> Result<()> {
        let arch = header.architecture()?;
        let key = format!("{}.rope.dimension_count", arch.gguf_name());
        if let Some(dims) = header.opt_u32(&key)? {
            // A count above the head dim is a header that disagrees with itself: the tensor
            // shapes name that problem when the weights load.
            if (dims as usize) < self.head_dim {
                return Err(DecoderError::Unsupported {
                    arch,
                    what: format!("RoPE over {dims} of {} head dims ({key})", self.head_dim),
                    fix: "the decoder rotates whole heads only; use a model with full rotary \
                          embeddings",
                });
            }
        }
        for name in ["rope_factors_long.weight", "rope_factors_short.weight"] {
            if header.tensor(name).is_some() {
                return Err(DecoderError::Unsupported {
                    arch,
                    what: format!("LongRoPE frequency factors (tensor {name:?})"),
                    fix: "the decoder has no LongRoPE; use the model's 4k-context variant \
                          (e.g. Phi-3-mini-4k-instruct)",
                });
            }
        }
        Ok(())
    }

    /// Row counts of Q, K and V: the parts of [`LayerWeights::qkv`].
    pub fn qkv_rows(&self) -> [usize; 3] {
        let kv = self.n_kv_heads * self.head_dim;
        [self.n_heads * self.head_dim, kv, kv]
    }

    /// Row counts of gate and up: the parts of [`LayerWeights::gate_up`].
    pub fn gate_up_rows(&self) -> [usize; 2] {
        [self.ffn, self.ffn]
    }

    /// The sliding window of layer `layer`: the model's window on every layer, except
    /// Gemma 3's global layers, which see every position.
    pub fn window(&self, layer: usize) -> Option<usize> {
        match &self.gemma {
            Some(g) if !g.local.get(layer).copied().unwrap_or(false) => None,
            _ => self.sliding_window,
        }
    }

    /// Whether layer `layer` rotates with [`BlockSpec::local_rope_tables`] (Gemma 3's local
    /// layers) rather than [`BlockSpec::rope_tables`].
    pub fn local_rope(&self, layer: usize) -> bool {
        self.gemma
            .as_ref()
            .is_some_and(|g| g.local.get(layer).copied().unwrap_or(false))
    }

    /// The scale of the attention scores: `1 / √head_dim` unless the architecture says else.
    pub fn attn_scale(&self) -> f32 {
        match &self.gemma {
            Some(g) => g.attn_scale,
            None => 1.0 / (self.head_dim as f32).sqrt(),
        }
    }

    /// The factor the token embedding is multiplied by (1 unless the architecture scales it).
    pub fn embed_scale(&self) -> f32 {
        self.gemma.as_ref().map_or(1.0, |g| g.embed_scale)
    }

    /// The feed-forward gate's activation.
    pub fn gate_activation(&self) -> GateActivation {
        if self.gemma.is_some() {
            GateActivation::GeluTanh
        } else {
            GateActivation::Silu
        }
    }

    /// Query heads per key/value head.
    pub fn group(&self) -> usize {
        self.n_heads / self.n_kv_heads
    }

    /// The token embedding, `vocab × hidden`.
    pub fn embedding(&self) -> MatrixTensor {
        matrix("token_embd.weight", self.vocab, self.hidden)
    }

    /// The final RMS-norm weight.
    pub fn output_norm(&self) -> VectorTensor {
        vector("output_norm.weight", self.hidden)
    }

    /// The output projection, `vocab × hidden`, unless the embedding is tied.
    pub fn output(&self) -> Option<MatrixTensor> {
        (!self.tied_embeddings).then(|| matrix("output.weight", self.vocab, self.hidden))
    }

    /// Load block `layer` through `src`: biases are required when the architecture has them
    /// and loaded when present otherwise; Q/K norms only when the architecture has them; Q/K/V
    /// and gate/up as one fused matrix each when the architecture stores them so.
    pub fn load_layer<S: WeightSource>(
        &self,
        layer: usize,
        src: &mut S,
    ) -> Result<LayerWeights<S::Matrix, S::Vector>> {
        let n = |s: &str| format!("blk.{layer}.{s}");
        let (h, hd, ffn) = (self.hidden, self.head_dim, self.ffn);
        let (q, kv) = (self.n_heads * hd, self.n_kv_heads * hd);
        let bias = |src: &mut S, s: &str, len| -> Result<Option<S::Vector>> {
            let t = vector(&n(s), len);
            if self.qkv_bias || src.has(&t.name) {
                src.vector(&t).map(Some)
            } else {
                Ok(None)
            }
        };
        let bias = [
            bias(src, "attn_q.bias", q)?,
            bias(src, "attn_k.bias", kv)?,
            bias(src, "attn_v.bias", kv)?,
        ];
        let qk_norm = if self.qk_norm {
            Some((
                src.vector(&vector(&n("attn_q_norm.weight"), hd))?,
                src.vector(&vector(&n("attn_k_norm.weight"), hd))?,
            ))
        } else {
            None
        };
        let post_norms = if self.gemma.is_some() {
            Some((
                src.vector(&vector(&n("post_attention_norm.weight"), h))?,
                src.vector(&vector(&n("post_ffw_norm.weight"), h))?,
            ))
        } else {
            None
        };
        let qkv = if self.fused_qkv {
            Projections::Fused(src.matrix(&matrix(&n("attn_qkv.weight"), q + 2 * kv, h))?)
        } else {
            Projections::Separate(vec![
                src.matrix(&matrix(&n("attn_q.weight"), q, h))?,
                src.matrix(&matrix(&n("attn_k.weight"), kv, h))?,
                src.matrix(&matrix(&n("attn_v.weight"), kv, h))?,
            ])
        };
        let gate_up = if self.fused_gate_up {
            Projections::Fused(src.matrix(&matrix(&n("ffn_up.weight"), 2 * ffn, h))?)
        } else {
            Projections::Separate(vec![
                src.matrix(&matrix(&n("ffn_gate.weight"), ffn, h))?,
                src.matrix(&matrix(&n("ffn_up.weight"), ffn, h))?,
            ])
        };
        Ok(LayerWeights {
            post_norms,
            qkv,
            bias,
            qk_norm,
            wo: src.matrix(&matrix(&n("attn_output.weight"), h, q))?,
            attn_norm: src.vector(&vector(&n("attn_norm.weight"), h))?,
            ffn_norm: src.vector(&vector(&n("ffn_norm.weight"), h))?,
            gate_up,
            down: src.matrix(&matrix(&n("ffn_down.weight"), h, ffn))?,
        })
    }

    /// The RoPE cos/sin tables for positions `0..positions`, angles rounded as `form` says.
    pub fn rope_tables(&self, positions: usize, form: AngleForm) -> RopeTables {
        self.tables(&self.rope, positions, form)
    }

    /// The RoPE tables of the local layers, when they differ from [`BlockSpec::rope_tables`]
    /// (Gemma 3).
    pub fn local_rope_tables(&self, positions: usize, form: AngleForm) -> Option<RopeTables> {
        let g = self.gemma.as_ref()?;
        g.local
            .iter()
            .any(|&l| l)
            .then(|| self.tables(&g.rope_local, positions, form))
    }

    fn tables(&self, rope: &RopeSpec, positions: usize, form: AngleForm) -> RopeTables {
        let hd = self.head_dim;
        let half = hd / 2;
        let inv_freq: Vec<f32> = (0..half)
            .map(|i| 1.0 / rope.base.powf(2.0 * i as f32 / hd as f32))
            .collect();
        let ratio = rope.base.powf(-2.0 / hd as f32);
        let (mut cos, mut sin) = (
            Vec::with_capacity(positions * half),
            Vec::with_capacity(positions * half),
        );
        let mut push = |a: f32| {
            cos.push(a.cos());
            sin.push(a.sin());
        };
        for pos in 0..positions {
            match form {
                AngleForm::Product => {
                    let pos = pos as f32 * rope.position_scale;
                    inv_freq.iter().for_each(|f| push(pos * f));
                }
                AngleForm::Iterated => {
                    let mut theta = pos as f32;
                    for _ in 0..half {
                        push(rope.position_scale * theta);
                        theta *= ratio;
                    }
                }
            }
        }
        RopeTables {
            cos,
            sin,
            half,
            interleaved: rope.interleaved,
        }
    }
}

fn vector(name: &str, len: usize) -> VectorTensor {
    VectorTensor {
        name: name.to_string(),
        len,
    }
}

fn matrix(name: &str, rows: usize, cols: usize) -> MatrixTensor {
    MatrixTensor {
        name: name.to_string(),
        rows,
        cols,
    }
}

/// How the RoPE angle `pos · base^(-2i/d)` of pair `i` is rounded to f32. The forms differ in
/// the last bits only, but a quantized model's near-tied logits follow them, so each engine
/// uses the form of the implementation it is checked against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AngleForm {
    /// The position times the pair's inverse frequency `1 / base^(2i/d)`, as candle-transformers
    /// forms it (the candle engine's reference).
    Product,
    /// The position multiplied by `base^(-2/d)` once per pair, as llama.cpp's ggml forms it
    /// (the native engine's reference).
    Iterated,
}

/// Precomputed RoPE cos/sin values, `positions × head_dim / 2` each, row-major by position.
#[derive(Debug, Clone, PartialEq)]
pub struct RopeTables {
    /// Cosines of the angles.
    pub cos: Vec<f32>,
    /// Sines of the angles.
    pub sin: Vec<f32>,
    half: usize,
    interleaved: bool,
}

impl RopeTables {
    /// Number of positions covered.
    pub fn positions(&self) -> usize {
        self.cos.len().checked_div(self.half).unwrap_or(0)
    }

    /// Half the head dimension: the width of one position's row.
    pub fn half(&self) -> usize {
        self.half
    }

    /// Rotate `x` (whole heads of `2 × half` values each) for position `pos`.
    ///
    /// # Panics
    /// When `pos` is not below [`RopeTables::positions`] (callers check the range first).
    pub fn rotate(&self, x: &mut [f32], pos: usize) {
        let half = self.half;
        let (c, s) = (
            &self.cos[pos * half..(pos + 1) * half],
            &self.sin[pos * half..(pos + 1) * half],
        );
        for head in x.chunks_exact_mut(2 * half) {
            if self.interleaved {
                for i in 0..half {
                    let (a, b) = (head[2 * i], head[2 * i + 1]);
                    head[2 * i] = a * c[i] - b * s[i];
                    head[2 * i + 1] = a * s[i] + b * c[i];
                }
            } else {
                for i in 0..half {
                    let (a, b) = (head[i], head[i + half]);
                    head[i] = a * c[i] - b * s[i];
                    head[i + half] = a * s[i] + b * c[i];
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(architecture: Architecture) -> ArchParams {
        ArchParams {
            architecture,
            n_layers: 2,
            n_heads: 4,
            n_kv_heads: 2,
            head_dim: 8,
            head_dim_v: 8,
            hidden: 32,
            ffn: 64,
            vocab: 100,
            rope_base: 10_000.0,
            rope_scaling: None,
            norm_eps: 1e-6,
            context_length: 64,
            sliding_window: None,
            tied_embeddings: true,
        }
    }

    #[test]
    fn the_architecture_sets_the_switches() {
        let llama = BlockSpec::new(&params(Architecture::Llama)).expect("runnable");
        assert!(llama.rope.interleaved && !llama.qkv_bias && !llama.qk_norm);
        let qwen2 = BlockSpec::new(&params(Architecture::Qwen2)).expect("runnable");
        assert!(!qwen2.rope.interleaved && qwen2.qkv_bias && !qwen2.qk_norm);
        let qwen3 = BlockSpec::new(&params(Architecture::Qwen3)).expect("runnable");
        assert!(!qwen3.rope.interleaved && !qwen3.qkv_bias && qwen3.qk_norm);
        assert_eq!(
            llama.output(),
            None,
            "tied embeddings have no output tensor"
        );
    }

    #[test]
    fn phi3_fuses_qkv_and_gate_up_and_rotates_split_halves() {
        let phi3 = BlockSpec::new(&params(Architecture::Phi3)).expect("runnable");
        assert!(phi3.fused_qkv && phi3.fused_gate_up && !phi3.rope.interleaved);
        assert!(!phi3.qkv_bias && !phi3.qk_norm);
        // 4 query heads and 2 KV heads of 8: Q rows, then K, then V.
        assert_eq!(phi3.qkv_rows(), [32, 16, 16]);
        assert_eq!(phi3.gate_up_rows(), [64, 64]);
        let llama = BlockSpec::new(&params(Architecture::Llama)).expect("runnable");
        assert!(!llama.fused_qkv && !llama.fused_gate_up);
    }

    #[test]
    fn odd_heads_are_refused() {
        let mut p = params(Architecture::Llama);
        p.head_dim = 7;
        p.head_dim_v = 7;
        assert!(BlockSpec::new(&p)
            .expect_err("refused")
            .to_string()
            .contains("even"));
    }

    #[test]
    fn linear_scaling_divides_positions() {
        let mut p = params(Architecture::Qwen2);
        p.rope_scaling = Some(RopeScaling::Linear { factor: 4.0 });
        let scaled = BlockSpec::new(&p)
            .expect("runnable")
            .rope_tables(8, AngleForm::Product);
        let plain = BlockSpec::new(&params(Architecture::Qwen2))
            .expect("runnable")
            .rope_tables(8, AngleForm::Product);
        assert_eq!(scaled.positions(), 8);
        // Position 4 scaled by 1/4 is position 1 unscaled.
        assert_eq!(scaled.cos[4 * 4..5 * 4], plain.cos[4..8]);
    }

    #[test]
    fn angle_forms_round_one_angle_two_ways() {
        let mut p = params(Architecture::Qwen2);
        p.rope_base = 1_000_000.0;
        let spec = BlockSpec::new(&p).expect("runnable");
        let product = spec.rope_tables(600, AngleForm::Product);
        let iterated = spec.rope_tables(600, AngleForm::Iterated);
        // ggml's form: position 599, pair 3, is 599 multiplied by base^(-2/8) three times.
        let ratio = 1_000_000f32.powf(-2.0 / 8.0);
        let theta = 599.0 * ratio * ratio * ratio;
        assert_eq!(iterated.cos[599 * 4 + 3], theta.cos());
        assert_eq!(iterated.sin[599 * 4 + 3], theta.sin());
        for (pos, i) in [(0, 0), (1, 1), (599, 0), (599, 3), (317, 2)] {
            let exact = pos as f64 * 1e6f64.powf(-2.0 * i as f64 / 8.0);
            for t in [&product, &iterated] {
                assert!((f64::from(t.cos[pos * 4 + i]) - exact.cos()).abs() < 1e-3);
                assert!((f64::from(t.sin[pos * 4 + i]) - exact.sin()).abs() < 1e-3);
            }
        }
        assert_ne!(
            product.cos, iterated.cos,
            "the two roundings differ somewhere"
        );
    }

    #[test]
    fn rotation_pairs_follow_the_layout() {
        let spec = BlockSpec::new(&params(Architecture::Llama)).expect("runnable");
        let t = spec.rope_tables(4, AngleForm::Product);
        // Only element 0 set: interleaved rotates it with element 1, split halves with 4.
        let mut x = [1.0f32, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0];
        t.rotate(&mut x, 1);
        assert!((x[0] - 1f32.cos()).abs() < 1e-6 && (x[1] - 1f32.sin()).abs() < 1e-6);
        assert_eq!(x[4], 0.0);
        let spec = BlockSpec::new(&params(Architecture::Qwen3)).expect("runnable");
        let t = spec.rope_tables(4, AngleForm::Product);
        let mut x = [1.0f32, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0];
        t.rotate(&mut x, 1);
        assert!((x[0] - 1f32.cos()).abs() < 1e-6 && (x[4] - 1f32.sin()).abs() < 1e-6);
        assert_eq!(x[1], 0.0);
    }
}
