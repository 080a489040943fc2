//! The one llama-family decoder, on one of two engines.
//!
//! Llama, Mistral, Qwen2 and Qwen3 share one block: RMS norm → attention with RoPE and grouped
//! KV heads → residual → RMS norm → SwiGLU feed-forward → residual. Their differences are
//! switches read from `ArchParams` once, into `block::BlockSpec`: biases on Q/K/V (Qwen2),
//! per-head RMS norms on Q and K (Qwen3), the RoPE pairing (llama.cpp stores llama/mistral
//! weights for interleaved pairs and qwen for split halves), tied output embeddings, and a
//! sliding window. Both engines load their weights and RoPE tables through that one spec, and
//! share one KV cache (`kv_cache::KvCache`); there is no copied file per model.
//!
//! The engine is chosen at load ([`EngineKind`], from `RuntimeOptions`): the native CPU engine
//! (`runtime::native`, boyd's own kernels in `kernels::cpu`) on the CPU when it handles every
//! tensor format, else candle (CUDA, Metal, or the CPU on request). This file holds the candle
//! engine and the dispatch. On the candle path weights stay quantized and go through candle's
//! quantized matmul; the token embedding is looked up row by row from its quantized form, so
//! no dequantized copy is kept.
//!
//! Grouped-query attention never repeats K/V: the query heads of one KV head are folded into
//! the row dimension, `(1, kv_heads, group × t, d) × (1, kv_heads, d, T)`, so attention at depth
//! reads the cache once per KV head.

use std::sync::Arc;

use candle_core::quantized::{ggml_file::qtensor_from_ggml, GgmlDType, QMatMul, QTensor};
use candle_core::{DType, Device, Module, Tensor, D};

use crate::kernels::cpu::KvType;
use crate::runtime::block::{
    shaped_tensor, AngleForm, BlockSpec, GateActivation, LayerWeights, MatrixTensor, Projections,
    RopeTables, VectorTensor, WeightSource,
};
use crate::runtime::gguf::{GgufError, GgufFile};
use crate::runtime::kv_cache::{KvCache, KvConfig};
use crate::runtime::native::{self, NativeModel};
use crate::runtime::options::RuntimeOptions;
use crate::sizing::{ArchParams, Architecture, ComputeLayout, GgmlType, KvDtype};

/// Errors building or running the decoder.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DecoderError {
    /// The file is malformed or lacks something.
    #[error(transparent)]
    Gguf(#[from] GgufError),
    /// The architecture is known but the decoder cannot run it.
    #[error("architecture {0} is supported for sizing only, not for running")]
    NotRunnable(Architecture),
    /// The file asks for something the decoder does not compute.
    #[error("{arch} model: {what} is not supported; {fix}")]
    Unsupported {
        /// The file's architecture.
        arch: Architecture,
        /// What the file asks for.
        what: String,
        /// What to do instead.
        fix: &'static str,
    },
    /// A tensor has the wrong shape.
    #[error("tensor {name:?} has shape {found:?}, expected {expected:?}")]
    Shape {
        /// Tensor name.
        name: String,
        /// Expected shape (outermost first).
        expected: Vec<usize>,
        /// Shape in the file.
        found: Vec<usize>,
    },
    /// A GGML type candle cannot compute with.
    #[error("tensor {name:?} uses GGML type {ty}, which the runtime cannot compute with")]
    UnsupportedType {
        /// Tensor name.
        name: String,
        /// Type name.
        ty: &'static str,
    },
    /// A candle error while loading or computing.
    #[error("tensor computation failed: {0}")]
    Candle(#[from] candle_core::Error),
    /// The engine cannot keep its KV cache in the type asked for.
    #[error(
        "KV cache type {dtype} is not available here: {why}; use --kv-dtype f16 (the default)"
    )]
    KvDtype {
        /// The type asked for.
        dtype: KvDtype,
        /// Why not.
        why: &'static str,
    },
}

type Result<T> = std::result::Result<T, DecoderError>;

/// The candle type for a GGML type, when candle can compute with it.
pub fn candle_dtype(t: GgmlType) -> Option<GgmlDType> {
    Some(match t {
        GgmlType::F32 => GgmlDType::F32,
        GgmlType::F16 => GgmlDType::F16,
        GgmlType::BF16 => GgmlDType::BF16,
        GgmlType::Q4_0 => GgmlDType::Q4_0,
        GgmlType::Q4_1 => GgmlDType::Q4_1,
        GgmlType::Q5_0 => GgmlDType::Q5_0,
        GgmlType::Q5_1 => GgmlDType::Q5_1,
        GgmlType::Q8_0 => GgmlDType::Q8_0,
        GgmlType::Q8_1 => GgmlDType::Q8_1,
        GgmlType::Q2_K => GgmlDType::Q2K,
        GgmlType::Q3_K => GgmlDType::Q3K,
        GgmlType::Q4_K => GgmlDType::Q4K,
        GgmlType::Q5_K => GgmlDType::Q5K,
        GgmlType::Q6_K => GgmlDType::Q6K,
        GgmlType::Q8_K => GgmlDType::Q8K,
        _ => return None,
    })
}

/// Reads tensors from a GGUF file onto a device, checking names and shapes.
struct Loader<'a> {
    file: &'a mut GgufFile,
    device: &'a Device,
    loaded_bytes: u64,
}

impl Loader<'_> {
    fn qtensor(&mut self, name: &str, shape: &[usize]) -> Result<QTensor> {
        let info = shaped_tensor(&self.file.header, name, shape)?;
        let dtype = candle_dtype(info.ggml_type).ok_or_else(|| DecoderError::UnsupportedType {
            name: name.to_string(),
            ty: info.ggml_type.name(),
        })?;
        let data = self.file.tensor_data(&info)?;
        self.loaded_bytes += info.bytes;
        Ok(qtensor_from_ggml(dtype, &data, info.shape(), self.device)?)
    }
}

impl WeightSource for Loader<'_> {
    type Matrix = QMatMul;
    type Vector = Tensor;

    fn matrix(&mut self, t: &MatrixTensor) -> Result<QMatMul> {
        Ok(QMatMul::from_qtensor(
            self.qtensor(&t.name, &[t.rows, t.cols])?,
        )?)
    }

    fn vector(&mut self, t: &VectorTensor) -> Result<Tensor> {
        Ok(self
            .qtensor(&t.name, &[t.len])?
            .dequantize(self.device)?
            .to_dtype(DType::F32)?)
    }

    fn has(&self, name: &str) -> bool {
        self.file.header.tensor(name).is_some()
    }
}

/// One block's weights on the candle engine.
type Block = LayerWeights<QMatMul, Tensor>;

/// The RoPE tables ([`BlockSpec::rope_tables`]) as tensors, `(positions, head_dim / 2)`.
struct Rope {
    cos: Tensor,
    sin: Tensor,
    interleaved: bool,
}

impl Rope {
    fn new(spec: &BlockSpec, tables: RopeTables, device: &Device) -> Result<Self> {
        let shape = (tables.positions(), tables.half());
        Ok(Self {
            cos: Tensor::from_vec(tables.cos, shape, device)?,
            sin: Tensor::from_vec(tables.sin, shape, device)?,
            interleaved: spec.rope.interleaved,
        })
    }

    fn apply(&self, x: &Tensor, pos: usize) -> Result<Tensor> {
        let t = x.dim(2)?;
        let cos = self.cos.narrow(0, pos, t)?;
        let sin = self.sin.narrow(0, pos, t)?;
        Ok(if self.interleaved {
            candle_nn::rotary_emb::rope_i(x, &cos, &sin)?
        } else {
            candle_nn::rotary_emb::rope(x, &cos, &sin)?
        })
    }
}

/// Weight memory as loaded, by role.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LoadedBytes {
    /// Bytes of tensor data read from the file.
    pub file_tensors: u64,
}

/// Which implementation runs the decoder.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum EngineKind {
    /// The native CPU engine on the CPU when it supports every tensor format, else candle.
    #[default]
    Auto,
    /// candle's tensors and quantized matmul (CPU, CUDA or Metal).
    Candle,
    /// boyd's own CPU kernels (`kernels::cpu`); CPU only.
    Native,
}

impl EngineKind {
    /// `candle`, `native` or `auto`.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "candle" => EngineKind::Candle,
            "native" => EngineKind::Native,
            "auto" => EngineKind::Auto,
            _ => return None,
        })
    }

    /// The name [`EngineKind::parse`] reads.
    pub fn as_str(self) -> &'static str {
        match self {
            EngineKind::Auto => "auto",
            EngineKind::Native => "native",
            EngineKind::Candle => "candle",
        }
    }

    /// The activation layout of the engine this choice runs for a file with tensors of
    /// `types` on the CPU (`on_cpu`) or a GPU — what [`Decoder::load_with`] picks — for the
    /// sizing model's compute buffers. Types that are not known count as supported.
    pub fn compute_layout(
        self,
        on_cpu: bool,
        types: impl IntoIterator<Item = GgmlType>,
    ) -> ComputeLayout {
        let native = match self {
            EngineKind::Candle => false,
            EngineKind::Native => on_cpu,
            EngineKind::Auto => {
                on_cpu && types.into_iter().all(|t| native::kernel_type(t).is_some())
            }
        };
        if native {
            ComputeLayout::Native
        } else {
            ComputeLayout::Candle
        }
    }
}

/// The candle path's weights.
struct CandleModel {
    embed: Arc<QTensor>,
    blocks: Vec<Block>,
    norm: Tensor,
    output: QMatMul,
    rope: Rope,
    /// The local layers' RoPE, when it differs (Gemma 3).
    rope_local: Option<Rope>,
}

enum Engine {
    Candle(CandleModel),
    Native(Box<NativeModel>),
}

/// A llama-family decoder with its weights on one device.
pub struct Decoder {
    params: ArchParams,
    spec: BlockSpec,
    device: Device,
    engine: Engine,
    /// Positions the RoPE table covers (caps the KV cache length).
    positions: usize,
    loaded: LoadedBytes,
    /// The native engine's KV row type (`None`: the candle engine's tensors).
    host_kv: Option<KvType>,
}

impl std::fmt::Debug for Decoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Decoder")
            .field("params", &self.params)
            .field("device", &self.device)
            .finish_non_exhaustive()
    }
}

impl Decoder {
    /// Load every tensor from an open, validated GGUF file, with RoPE tables for the model's
    /// whole training context and the default [`RuntimeOptions`].
    pub fn load(file: &mut GgufFile, device: &Device) -> Result<Self> {
        Self::load_with_positions(file, device, usize::MAX)
    }

    /// Like [`Decoder::load`], but with RoPE tables for at most `max_positions` positions
    /// (the session's context): a header claiming a huge training context then costs nothing.
    pub fn load_with_positions(
        file: &mut GgufFile,
        device: &Device,
        max_positions: usize,
    ) -> Result<Self> {
        Self::load_with(file, device, max_positions, EngineKind::Auto)
    }

    /// Like [`Decoder::load_with_positions`] with an explicit engine choice.
    pub fn load_with(
        file: &mut GgufFile,
        device: &Device,
        max_positions: usize,
        engine: EngineKind,
    ) -> Result<Self> {
        Self::load_with_options(
            file,
            device,
            max_positions,
            &RuntimeOptions::with_engine(engine),
        )
    }

    /// Like [`Decoder::load_with_positions`] with explicit options (engine, kernel set,
    /// profiling).
    pub fn load_with_options(
        file: &mut GgufFile,
        device: &Device,
        max_positions: usize,
        opts: &RuntimeOptions,
    ) -> Result<Self> {
        let engine = opts.engine;
        let params = file.header.arch_params()?;
        let spec = BlockSpec::new(&params)?;
        spec.check_file(&file.header)?;
        let positions = (params.context_length as usize).min(max_positions).max(1);
        let native = match engine {
            EngineKind::Candle => false,
            EngineKind::Native => {
                if !device.is_cpu() {
                    return Err(candle_core::Error::Msg(
                        "the native engine runs on the CPU only; use BOYD_ENGINE=candle".into(),
                    )
                    .into());
                }
                true
            }
            EngineKind::Auto => device.is_cpu() && native::supports(file),
        };
        if native {
            let host_kv = native::kv_type(opts.kv_dtype).ok_or(DecoderError::KvDtype {
                dtype: opts.kv_dtype,
                why: "the native CPU engine stores f32, f16 or q8_0",
            })?;
            if !host_kv.supports_dim(params.head_dim as usize) {
                return Err(DecoderError::KvDtype {
                    dtype: opts.kv_dtype,
                    why: "q8_0 needs a head dim that is a multiple of 32",
                });
            }
            let mut loaded = 0u64;
            let model = NativeModel::load(file, &spec, positions, &mut loaded, opts)?;
            return Ok(Self {
                params,
                spec,
                device: device.clone(),
                engine: Engine::Native(Box::new(model)),
                positions,
                loaded: LoadedBytes {
                    file_tensors: loaded,
                },
                host_kv: Some(host_kv),
            });
        }
        let mut l = Loader {
            file,
            device,
            loaded_bytes: 0,
        };
        let embed = spec.embedding();
        let embed = Arc::new(l.qtensor(&embed.name, &[embed.rows, embed.cols])?);
        // Every layer has tensors, so the file's tensor count bounds the reservation even when
        // `block_count` is absurd (the missing `blk.N` tensor is then the error).
        let mut blocks = Vec::with_capacity(spec.n_layers.min(l.file.header.tensors.len()));
        for i in 0..spec.n_layers {
            blocks.push(spec.load_layer(i, &mut l)?);
        }
        let norm = l.vector(&spec.output_norm())?;
        let output = match spec.output() {
            None => QMatMul::from_arc(embed.clone())?,
            Some(t) => l.matrix(&t)?,
        };
        let loaded = LoadedBytes {
            file_tensors: l.loaded_bytes,
        };
        // candle-transformers, this engine's reference, rounds the angles as products.
        let rope = Rope::new(
            &spec,
            spec.rope_tables(positions, AngleForm::Product),
            device,
        )?;
        let rope_local = spec
            .local_rope_tables(positions, AngleForm::Product)
            .map(|t| Rope::new(&spec, t, device))
            .transpose()?;
        Ok(Self {
            params,
            spec,
            device: device.clone(),
            engine: Engine::Candle(CandleModel {
                embed,
                blocks,
                norm,
                output,
                rope,
                rope_local,
            }),
            positions,
            loaded,
            host_kv: None,
        })
    }

    /// The architecture parameters.
    pub fn params(&self) -> &ArchParams {
        &self.params
    }

    /// The device the weights live on.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// Bytes of weights loaded.
    pub fn loaded_bytes(&self) -> LoadedBytes {
        self.loaded
    }

    /// The engine running this decoder: `native/avx2`, `native/scalar` or `candle`.
    pub fn engine_name(&self) -> String {
        match &self.engine {
            Engine::Candle(_) => "candle".into(),
            Engine::Native(m) => format!("native/{}", m.kernels_name()),
        }
    }

    /// The element type of the KV caches [`Decoder::new_cache`] makes: the one the options
    /// chose on the native engine; f32 on the CPU and f16 on GPUs for candle's.
    pub fn kv_dtype(&self) -> KvDtype {
        match self.host_kv {
            Some(KvType::F32) => KvDtype::F32,
            Some(KvType::F16) => KvDtype::F16,
            Some(KvType::Q8_0) => KvDtype::Q8_0,
            None if self.device.is_cpu() => KvDtype::F32,
            None => KvDtype::F16,
        }
    }

    /// A KV cache shaped for this model. `max_len` is capped at the context length.
    pub fn new_cache(&self, max_len: usize) -> KvCache {
        self.new_cache_with_slack(max_len, crate::runtime::kv_cache::DEFAULT_RING_SLACK)
    }

    /// [`Decoder::new_cache`] with another slack for the sliding-window layers' rings (see
    /// [`KvCache`]; tests use a small one to make rings of a tiny model compact often).
    pub fn new_cache_with_slack(&self, max_len: usize, ring_slack: usize) -> KvCache {
        let dtype = if self.device.is_cpu() {
            DType::F32
        } else {
            DType::F16
        };
        let cfg = KvConfig {
            n_layers: self.params.n_layers as usize,
            n_kv_heads: self.params.n_kv_heads as usize,
            head_dim_k: self.params.head_dim as usize,
            head_dim_v: self.params.head_dim_v as usize,
            dtype,
            chunk: 256,
            max_len: max_len
                .min(self.params.context_length as usize)
                .min(self.positions),
            windows: (0..self.params.n_layers as usize)
                .map(|l| self.spec.window(l))
                .collect(),
            ring_slack,
        };
        if let Some(ty) = self.host_kv {
            return KvCache::new_host(cfg, ty);
        }
        KvCache::new(cfg, &self.device)
    }

    /// Run `tokens` at the cache's current position, append their K/V, and return logits of
    /// shape `(vocab,)` for the last token, or `(t, vocab)` for every token when `all` is set.
    pub fn forward(&self, tokens: &[u32], cache: &mut KvCache, all: bool) -> Result<Tensor> {
        match &self.engine {
            Engine::Candle(m) => self.forward_candle(m, tokens, cache, all),
            Engine::Native(m) => {
                let logits = Self::forward_native(m, tokens, cache, all)?;
                let vocab = self.params.vocab as usize;
                Ok(if all {
                    Tensor::from_vec(logits, (tokens.len(), vocab), &self.device)?
                } else {
                    Tensor::from_vec(logits, vocab, &self.device)?
                })
            }
        }
    }

    /// Logits as a host vector: the native engine's directly, the candle engine's copied.
    pub fn forward_vec(&self, tokens: &[u32], cache: &mut KvCache) -> Result<Vec<f32>> {
        match &self.engine {
            Engine::Native(m) => Self::forward_native(m, tokens, cache, false),
            Engine::Candle(m) => Ok(self.forward_candle(m, tokens, cache, false)?.to_vec1()?),
        }
    }

    /// Logits of the last token (`vocab`) or of every token (`tokens × vocab`, row after row)
    /// as a host vector.
    pub fn forward_logits(
        &self,
        tokens: &[u32],
        cache: &mut KvCache,
        all: bool,
    ) -> Result<Vec<f32>> {
        match &self.engine {
            Engine::Native(m) => Self::forward_native(m, tokens, cache, all),
            Engine::Candle(m) => Ok(self
                .forward_candle(m, tokens, cache, all)?
                .flatten_all()?
                .to_vec1()?),
        }
    }

    /// The native engine's forward pass, in calls of at most [`KvCache::max_batch`] tokens
    /// (a cache whose sliding-window layers keep only their window takes no more at once).
    fn forward_native(
        m: &NativeModel,
        tokens: &[u32],
        cache: &mut KvCache,
        all: bool,
    ) -> Result<Vec<f32>> {
        let step = cache.max_batch();
        if tokens.len() <= step {
            return m.forward(tokens, cache, all);
        }
        let mut out = Vec::new();
        for chunk in tokens.chunks(step) {
            let logits = m.forward(chunk, cache, all)?;
            if all {
                out.extend_from_slice(&logits);
            } else {
                out = logits;
            }
        }
        Ok(out)
    }

    fn forward_candle(
        &self,
        m: &CandleModel,
        tokens: &[u32],
        cache: &mut KvCache,
        all: bool,
    ) -> Result<Tensor> {
        let t = tokens.len();
        if t == 0 {
            return Err(candle_core::Error::Msg("forward called with no tokens".into()).into());
        }
        let pos = cache.len();
        cache.reserve(t)?;
        let ids = Tensor::new(tokens, &self.device)?;
        let mut x = m.embed.embedding(&ids)?.unsqueeze(0)?; // (1, t, hidden)
        let embed_scale = self.spec.embed_scale();
        if embed_scale != 1.0 {
            x = (x * f64::from(embed_scale))?;
        }
        let mask = self.mask(t, pos, self.spec.sliding_window)?;
        // Gemma 3's global layers see every position.
        let global_mask = match self.spec.sliding_window {
            Some(_) => self.mask(t, pos, None)?,
            None => mask.clone(),
        };
        let eps = self.spec.norm_eps;
        for (i, b) in m.blocks.iter().enumerate() {
            let rope = match &m.rope_local {
                Some(local) if self.spec.local_rope(i) => local,
                _ => &m.rope,
            };
            let mask = if self.spec.window(i).is_some() {
                mask.as_ref()
            } else {
                global_mask.as_ref()
            };
            let h = candle_nn::ops::rms_norm(&x, &b.attn_norm, eps)?;
            let mut a = self.attention(rope, i, b, &h, pos, mask, cache)?;
            if let Some((post_attn, _)) = &b.post_norms {
                a = candle_nn::ops::rms_norm(&a, post_attn, eps)?;
            }
            x = (x + a)?;
            let h = candle_nn::ops::rms_norm(&x, &b.ffn_norm, eps)?;
            let [g, u] = project(&b.gate_up, &h, self.spec.gate_up_rows())?;
            let g = match self.spec.gate_activation() {
                GateActivation::Silu => g.silu()?,
                GateActivation::GeluTanh => g.gelu()?,
            };
            let mut f = b.down.forward(&(g * u)?)?;
            if let Some((_, post_ffw)) = &b.post_norms {
                f = candle_nn::ops::rms_norm(&f, post_ffw, eps)?;
            }
            x = (x + f)?;
        }
        cache.advance(t);
        let x = if all { x } else { x.narrow(1, t - 1, 1)? };
        let x = candle_nn::ops::rms_norm(&x, &m.norm, self.spec.norm_eps)?;
        let logits = m.output.forward(&x)?.squeeze(0)?;
        Ok(if all { logits } else { logits.squeeze(0)? })
    }

    /// Additive causal (and sliding-window) mask of shape `(t, pos + t)`, or `None` when every
    /// cached position is visible (a single decode step inside the window).
    fn mask(&self, t: usize, pos: usize, window: Option<usize>) -> Result<Option<Tensor>> {
        let total = pos + t;
        if t == 1 && window.is_none_or(|w| total <= w) {
            return Ok(None);
        }
        let mut m = vec![0f32; t * total];
        for i in 0..t {
            let q = pos + i;
            for j in 0..total {
                let outside = j > q || window.is_some_and(|w| q >= w && j <= q - w);
                if outside {
                    m[i * total + j] = f32::NEG_INFINITY;
                }
            }
        }
        Ok(Some(Tensor::from_vec(m, (t, total), &self.device)?))
    }

    #[allow(clippy::too_many_arguments)]
    fn attention(
        &self,
        rope: &Rope,
        layer: usize,
        a: &Block,
        x: &Tensor,
        pos: usize,
        mask: Option<&Tensor>,
        cache: &mut KvCache,
    ) -> Result<Tensor> {
        let (_, t, _) = x.dims3()?;
        let p = &self.spec;
        let (nh, nkv, hd) = (p.n_heads, p.n_kv_heads, p.head_dim);
        let heads = |mut y: Tensor, b: &Option<Tensor>, heads: usize| -> Result<Tensor> {
            if let Some(b) = b {
                y = y.broadcast_add(b)?;
            }
            Ok(y.reshape((1, t, heads, hd))?
                .transpose(1, 2)?
                .contiguous()?)
        };
        let [bq, bk, bv] = &a.bias;
        let [q, k, v] = project(&a.qkv, x, p.qkv_rows())?;
        let mut q = heads(q, bq, nh)?;
        let mut k = heads(k, bk, nkv)?;
        let v = heads(v, bv, nkv)?;
        if let Some((qn, kn)) = &a.qk_norm {
            q = candle_nn::ops::rms_norm(&q, qn, p.norm_eps)?;
            k = candle_nn::ops::rms_norm(&k, kn, p.norm_eps)?;
        }
        let q = rope.apply(&q, pos)?;
        let k = rope.apply(&k, pos)?;
        let (k, v) = cache.write(layer, &k, &v)?;
        let (k, v) = if k.dtype() == q.dtype() {
            (k, v)
        } else {
            (k.to_dtype(q.dtype())?, v.to_dtype(q.dtype())?)
        };
        let total = k.dim(2)?;
        let group = p.group();
        // Fold the query heads of each KV head into rows: (1, nkv, group * t, hd).
        let q = q.reshape((1, nkv, group * t, hd))?;
        let scale = f64::from(p.attn_scale());
        let mut scores = (q.matmul(&k.t()?)? * scale)?;
        if let Some(m) = mask {
            scores = scores
                .reshape((1, nkv, group, t, total))?
                .broadcast_add(m)?
                .reshape((1, nkv, group * t, total))?;
        }
        let probs = candle_nn::ops::softmax_last_dim(&scores)?;
        let out = probs.matmul(&v)?; // (1, nkv, group * t, hd)
        let out = out
            .reshape((1, nh, t, hd))?
            .transpose(1, 2)?
            .reshape((1, t, nh * hd))?;
        Ok(a.wo.forward(&out)?)
    }

    /// Dimension of the logits.
    pub fn vocab(&self) -> usize {
        self.params.vocab as usize
    }
}

/// The outputs of `w` on `x`, one per part: separate matrices each run once; a fused matrix
/// runs once and its output is split by columns into parts of `rows` each.
fn project<const N: usize>(
    w: &Projections<QMatMul>,
    x: &Tensor,
    rows: [usize; N],
) -> Result<[Tensor; N]> {
    let parts: Vec<Tensor> = match w {
        Projections::Separate(ms) => ms
            .iter()
            .map(|m| m.forward(x))
            .collect::<candle_core::Result<_>>()?,
        Projections::Fused(m) => {
            let y = m.forward(x)?;
            let mut start = 0;
            let mut parts = Vec::with_capacity(N);
            for r in rows {
                parts.push(y.narrow(D::Minus1, start, r)?);
                start += r;
            }
            parts
        }
    };
    let n = parts.len();
    parts.try_into().map_err(|_| {
        candle_core::Error::Msg(format!("{n} projections where the block has {N}")).into()
    })
}

/// Run `D::Minus1` argmax on a logits vector.
pub fn argmax(logits: &Tensor) -> Result<u32> {
    Ok(logits.argmax(D::Minus1)?.to_scalar::<u32>()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compute_layout_follows_the_engine_load_picks() {
        let ok = [GgmlType::Q8_0, GgmlType::Q4_K, GgmlType::F32];
        let unsupported = [GgmlType::Q8_0, GgmlType::IQ2_XS];
        assert_eq!(
            EngineKind::Auto.compute_layout(true, ok),
            ComputeLayout::Native
        );
        assert_eq!(
            EngineKind::Auto.compute_layout(true, unsupported),
            ComputeLayout::Candle,
            "a type the native kernels lack falls back to candle"
        );
        assert_eq!(
            EngineKind::Auto.compute_layout(true, []),
            ComputeLayout::Native,
            "unknown types count as supported"
        );
        assert_eq!(
            EngineKind::Auto.compute_layout(false, ok),
            ComputeLayout::Candle
        );
        assert_eq!(
            EngineKind::Candle.compute_layout(true, ok),
            ComputeLayout::Candle
        );
        assert_eq!(
            EngineKind::Native.compute_layout(true, unsupported),
            ComputeLayout::Native
        );
    }
}
