//! The native CPU engine: the same llama-family block as `decoder`, computed on plain `f32`
//! buffers with boyd's own quantized kernels (`kernels::cpu`) instead of candle tensors.
//!
//! Why: a decode step of a small model is a few hundred small operations; through candle each
//! one allocates a tensor and pays dispatch costs that dwarf the arithmetic, and candle has no
//! SIMD kernel for several common formats (`Q4_1`, `Q5_0`). Here a step allocates nothing
//! (scratch buffers live with the model), the Q/K/V and gate/up projections run as one fused
//! product each when their formats agree, activations are quantized once per product, and
//! attention reads the contiguous host KV cache once per KV head.
//!
//! The arithmetic is that of the candle path (the same `block::BlockSpec`, so the same tensors,
//! switches and RoPE tables; the same RMS norm and 8-bit activation blocks), so the two agree
//! to float rounding; the tests hold them together.

use std::sync::Mutex;

use crate::kernels::cpu::{hadamard_rotate, pool, Acts, Kernels, KvType, QMatrix, QType};
use crate::runtime::block::{
    gelu_tanh, shaped_tensor, AngleForm, BlockSpec, GateActivation, MatrixTensor, Projections,
    RopeTables, VectorTensor, WeightSource,
};
use crate::runtime::decoder::DecoderError;
use crate::runtime::gguf::{GgufError, GgufFile, TensorInfo};
use crate::runtime::kv_cache::KvCache;
use crate::runtime::options::{EngineProfile, ProfileSink, RuntimeOptions};
use crate::sizing::{GgmlType, KvDtype};

type Result<T> = std::result::Result<T, DecoderError>;

/// Whether every tensor of the file is in a format the native kernels compute with.
pub fn supports(file: &GgufFile) -> bool {
    file.header
        .tensors
        .iter()
        .all(|t| kernel_type(t.ggml_type).is_some())
}

/// The kernels' format for a GGML tensor type, when the native kernels compute with it.
///
/// This mapping lives in the runtime, not in `kernels`: the kernels know their own formats
/// only, and the sizing model's `GgmlType` is the file's vocabulary (see ARCHITECTURE.md).
pub fn kernel_type(t: GgmlType) -> Option<QType> {
    use GgmlType as G;
    Some(match t {
        G::F32 => QType::F32,
        G::F16 => QType::F16,
        G::Q4_0 => QType::Q4_0,
        G::Q4_1 => QType::Q4_1,
        G::Q5_0 => QType::Q5_0,
        G::Q8_0 => QType::Q8_0,
        G::Q4_K => QType::Q4_K,
        G::Q5_K => QType::Q5_K,
        G::Q6_K => QType::Q6_K,
        _ => return None,
    })
}

/// The kernels' KV row type for a KV cache type, when the native engine stores it.
pub fn kv_type(t: KvDtype) -> Option<KvType> {
    match t {
        KvDtype::F32 => Some(KvType::F32),
        KvDtype::F16 => Some(KvType::F16),
        KvDtype::Q8_0 => Some(KvType::Q8_0),
        KvDtype::Bf16 | KvDtype::Q4_0 => None,
    }
}

/// Q/K/V (or gate/up) as one fused matrix when the formats agree, else separately.
#[derive(Debug)]
enum Proj {
    /// One matrix holding the parts' rows in order, and each part's row count.
    Fused(QMatrix, Vec<usize>),
    Split(Vec<QMatrix>),
}

impl Proj {
    /// The block's projections as the engine runs them: a fused matrix as is (its parts are
    /// `rows`), separate matrices concatenated when their formats agree.
    fn from_block(p: Projections<QMatrix>, rows: &[usize]) -> Self {
        match p {
            Projections::Fused(m) => Proj::Fused(m, rows.to_vec()),
            Projections::Separate(parts) => Proj::new(parts),
        }
    }

    fn new(parts: Vec<QMatrix>) -> Self {
        let same = parts
            .windows(2)
            .all(|w| w[0].qtype() == w[1].qtype() && w[0].cols() == w[1].cols());
        if !same || parts.len() < 2 {
            return Proj::Split(parts);
        }
        let (ty, cols) = (parts[0].qtype(), parts[0].cols());
        let rows: Vec<usize> = parts.iter().map(QMatrix::rows).collect();
        let mut data = Vec::with_capacity(parts.iter().map(QMatrix::bytes).sum());
        for p in &parts {
            for r in 0..p.rows() {
                data.extend_from_slice(p.row(r));
            }
        }
        match QMatrix::new(ty, rows.iter().sum(), cols, data) {
            Ok(m) => Proj::Fused(m, rows),
            Err(_) => Proj::Split(parts),
        }
    }

    /// Run the projection; `outs[i]` receives part `i` as `tokens × rows_i`.
    fn apply(&self, k: &Kernels, a: &mut Acts, tmp: &mut Vec<f32>, outs: &mut [&mut Vec<f32>]) {
        let t = a.tokens();
        match self {
            Proj::Split(parts) => {
                for (m, o) in parts.iter().zip(outs.iter_mut()) {
                    o.resize(t * m.rows(), 0.0);
                    k.matmul(m, a, o);
                }
            }
            Proj::Fused(m, part_rows) => {
                let total = m.rows();
                tmp.resize(t * total, 0.0);
                k.matmul(m, a, tmp);
                let mut start = 0;
                for (o, &rows) in outs.iter_mut().zip(part_rows) {
                    o.resize(t * rows, 0.0);
                    for tok in 0..t {
                        let src = tok * total + start;
                        o[tok * rows..(tok + 1) * rows].copy_from_slice(&tmp[src..src + rows]);
                    }
                    start += rows;
                }
            }
        }
    }
}

#[derive(Debug)]
struct Layer {
    attn_norm: Vec<f32>,
    qkv: Proj,
    bias: [Option<Vec<f32>>; 3],
    q_norm: Option<Vec<f32>>,
    k_norm: Option<Vec<f32>>,
    /// Norms of the attention output and the feed-forward output (Gemma 3).
    post_norms: Option<(Vec<f32>, Vec<f32>)>,
    wo: QMatrix,
    ffn_norm: Vec<f32>,
    gate_up: Proj,
    down: QMatrix,
}

/// Per-call buffers, kept between calls so a decode step allocates nothing.
#[derive(Debug, Default)]
struct Scratch {
    x: Vec<f32>,
    q: Vec<f32>,
    k: Vec<f32>,
    v: Vec<f32>,
    att: Vec<f32>,
    gate: Vec<f32>,
    up: Vec<f32>,
    tmp: Vec<f32>,
    proj: Vec<f32>,
    acts: Acts,
    prof: Prof,
}

/// Names of the profiled operations, in `Prof::acc` order.
pub const PROFILE_OPS: [&str; 10] = [
    "embedding",
    "rms norms",
    "qkv matmul (+bias, qk-norm)",
    "rope + kv write",
    "attention",
    "wo matmul",
    "gate/up matmul",
    "silu * up",
    "down matmul + residual",
    "output norm + logits",
];

thread_local! {
    /// Each thread's attention scores for the heads it runs in parallel.
    static SCORES: std::cell::RefCell<Vec<f32>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Per-operation wall time of the forward passes (when profiling is on): each `lap` charges the
/// time since the previous one to an operation.
#[derive(Debug, Default)]
struct Prof {
    on: bool,
    last: Option<std::time::Instant>,
    acc: [f64; 10],
    calls: u64,
}

impl Prof {
    #[inline]
    fn start(&mut self) {
        if self.on {
            self.calls += 1;
            self.last = Some(std::time::Instant::now());
        }
    }

    #[inline]
    fn lap(&mut self, op: usize) {
        if let Some(last) = self.last {
            let now = std::time::Instant::now();
            self.acc[op] += (now - last).as_secs_f64();
            self.last = Some(now);
        }
    }
}

/// A llama-family model on the native CPU engine.
#[derive(Debug)]
pub struct NativeModel {
    spec: BlockSpec,
    embed: QMatrix,
    output: Option<QMatrix>,
    layers: Vec<Layer>,
    norm: Vec<f32>,
    rope: RopeTables,
    /// The local layers' RoPE tables, when they differ (Gemma 3).
    rope_local: Option<RopeTables>,
    kernels: &'static Kernels,
    scratch: Mutex<Scratch>,
    /// Where the per-operation profile goes on drop (profiling is on when set).
    profile_sink: Option<ProfileSink>,
}

/// Reads tensors of a validated file into the kernels' formats, counting the bytes read.
struct Loader<'a> {
    file: &'a mut GgufFile,
    loaded: &'a mut u64,
}

impl Loader<'_> {
    fn read(&mut self, info: &TensorInfo, rows: usize, cols: usize) -> Result<QMatrix> {
        let ty = kernel_type(info.ggml_type).ok_or_else(|| DecoderError::UnsupportedType {
            name: info.name.clone(),
            ty: info.ggml_type.name(),
        })?;
        let data = self.file.tensor_data(info)?;
        *self.loaded += info.bytes;
        QMatrix::new(ty, rows, cols, data)
            .map_err(|e| GgufError::Inconsistent(format!("tensor {:?}: {e}", info.name)).into())
    }
}

impl WeightSource for Loader<'_> {
    type Matrix = QMatrix;
    type Vector = Vec<f32>;

    fn matrix(&mut self, t: &MatrixTensor) -> Result<QMatrix> {
        let info = shaped_tensor(&self.file.header, &t.name, &[t.rows, t.cols])?;
        self.read(&info, t.rows, t.cols)
    }

    fn vector(&mut self, t: &VectorTensor) -> Result<Vec<f32>> {
        let info = shaped_tensor(&self.file.header, &t.name, &[t.len])?;
        let m = self.read(&info, 1, t.len)?;
        let mut out = vec![0f32; t.len];
        m.dequantize_row(0, &mut out);
        Ok(out)
    }

    fn has(&self, name: &str) -> bool {
        self.file.header.tensor(name).is_some()
    }
}

/// RMS norm of each `w.len()`-wide row of `x`, in place.
fn rms_norm_in_place(x: &mut [f32], w: &[f32], eps: f32) {
    let n = w.len();
    for o in x.chunks_exact_mut(n) {
        let r = rms_scale(o, eps);
        o.iter_mut().zip(w).for_each(|(o, w)| *o = *o * r * w);
    }
}

/// `1 / sqrt(mean(x²) + eps)`, the squares summed in f64 as llama.cpp sums them.
fn rms_scale(x: &[f32], eps: f32) -> f32 {
    let sum: f64 = x.iter().map(|v| f64::from(v * v)).sum();
    let ms = (sum / x.len() as f64) as f32;
    1.0 / (ms + eps).sqrt()
}

/// `g = gelu(g) · u`, element by element (Gemma's GeGLU).
fn gelu_mul(g: &mut [f32], u: &[f32]) {
    g.iter_mut()
        .zip(u)
        .for_each(|(g, u)| *g = gelu_tanh(*g) * u);
}

fn rms_norm(x: &mut [f32], src: &[f32], w: &[f32], eps: f32) {
    let n = w.len();
    for (o, s) in x.chunks_exact_mut(n).zip(src.chunks_exact(n)) {
        let r = rms_scale(s, eps);
        for ((o, s), w) in o.iter_mut().zip(s).zip(w) {
            *o = s * r * w;
        }
    }
}

impl NativeModel {
    /// Load every tensor of a validated file as `spec` names them; RoPE tables cover
    /// `positions` positions. The kernel set and profiling come from `opts`.
    pub fn load(
        file: &mut GgufFile,
        spec: &BlockSpec,
        positions: usize,
        loaded: &mut u64,
        opts: &RuntimeOptions,
    ) -> Result<Self> {
        let layer_bound = spec.n_layers.min(file.header.tensors.len());
        let mut l = Loader { file, loaded };
        let embed = l.matrix(&spec.embedding())?;
        let mut layers = Vec::with_capacity(layer_bound);
        for i in 0..spec.n_layers {
            let w = spec.load_layer(i, &mut l)?;
            let (q_norm, k_norm) = w.qk_norm.unzip();
            layers.push(Layer {
                attn_norm: w.attn_norm,
                qkv: Proj::from_block(w.qkv, &spec.qkv_rows()),
                bias: w.bias,
                q_norm,
                k_norm,
                post_norms: w.post_norms,
                wo: w.wo,
                ffn_norm: w.ffn_norm,
                gate_up: Proj::from_block(w.gate_up, &spec.gate_up_rows()),
                down: w.down,
            });
        }
        let norm = l.vector(&spec.output_norm())?;
        let output = spec.output().map(|t| l.matrix(&t)).transpose()?;
        Ok(Self {
            spec: spec.clone(),
            embed,
            output,
            layers,
            norm,
            rope: spec.rope_tables(positions, AngleForm::Iterated),
            rope_local: spec.local_rope_tables(positions, AngleForm::Iterated),
            kernels: Kernels::get_for(opts.kernels),
            scratch: Mutex::new(Scratch {
                prof: Prof {
                    on: opts.profile.is_some(),
                    ..Prof::default()
                },
                ..Scratch::default()
            }),
            profile_sink: opts.profile.clone(),
        })
    }

    /// Name of the kernel set in use (`avx2`, `scalar`).
    pub fn kernels_name(&self) -> &'static str {
        self.kernels.name
    }

    /// Run `tokens` at the cache's position, append their K/V, and return the logits of the
    /// last token (`vocab`) or of every token (`tokens × vocab`).
    pub fn forward(&self, tokens: &[u32], cache: &mut KvCache, all: bool) -> Result<Vec<f32>> {
        let t = tokens.len();
        if t == 0 {
            return Err(candle_core::Error::Msg("forward called with no tokens".into()).into());
        }
        let p = &self.spec;
        let (h, hd) = (p.hidden, p.head_dim);
        let (nh, nkv) = (p.n_heads, p.n_kv_heads);
        let vocab = p.vocab;
        let pos = cache.len();
        if pos + t > self.rope.positions() {
            return Err(candle_core::Error::Msg(format!(
                "positions {pos}..{} exceed the RoPE table of {} positions",
                pos + t,
                self.rope.positions()
            ))
            .into());
        }
        for &tok in tokens {
            if tok as usize >= vocab {
                return Err(candle_core::Error::Msg(format!(
                    "token id {tok} is outside the vocabulary of {vocab}"
                ))
                .into());
            }
        }
        cache.reserve(t)?;
        let k = self.kernels;
        let mut guard = self.scratch.lock().unwrap_or_else(|e| e.into_inner());
        let s = &mut *guard;
        s.prof.start();
        s.x.resize(t * h, 0.0);
        let embed_scale = p.embed_scale();
        for (i, &tok) in tokens.iter().enumerate() {
            let row = &mut s.x[i * h..(i + 1) * h];
            self.embed.dequantize_row(tok as usize, row);
            if embed_scale != 1.0 {
                row.iter_mut().for_each(|v| *v *= embed_scale);
            }
        }
        s.prof.lap(0);
        let group = p.group();
        let scale = p.attn_scale();
        let gelu = p.gate_activation() == GateActivation::GeluTanh;
        for (li, l) in self.layers.iter().enumerate() {
            let window = p.window(li);
            // Position `q` of KV head `g` is row `g × rows + q − first` (`first` > 0 once a
            // sliding-window layer's ring has dropped positions its window no longer sees).
            let (rows, first) = cache.layer_rows(li);
            if window.map_or(0, |w| (pos + 1).saturating_sub(w)) < first {
                return Err(candle_core::Error::Msg(format!(
                    "layer {li} holds positions from {first}, but position {pos} attends further back"
                ))
                .into());
            }
            let rope = match &self.rope_local {
                Some(local) if p.local_rope(li) => local,
                _ => &self.rope,
            };
            // The norm writes straight into the product's input (no buffer of its own, no copy).
            s.acts
                .fill(h, t, |xn| rms_norm(xn, &s.x, &l.attn_norm, p.norm_eps));
            s.prof.lap(1);
            l.qkv.apply(
                k,
                &mut s.acts,
                &mut s.proj,
                &mut [&mut s.q, &mut s.k, &mut s.v],
            );
            for (buf, b) in [&mut s.q, &mut s.k, &mut s.v].into_iter().zip(&l.bias) {
                if let Some(b) = b {
                    for row in buf.chunks_exact_mut(b.len()) {
                        row.iter_mut().zip(b).for_each(|(x, b)| *x += b);
                    }
                }
            }
            if let (Some(qn), Some(kn)) = (&l.q_norm, &l.k_norm) {
                s.tmp.resize(hd, 0.0);
                for head in s.q.chunks_exact_mut(hd) {
                    s.tmp.copy_from_slice(head);
                    rms_norm(head, &s.tmp, qn, p.norm_eps);
                }
                for head in s.k.chunks_exact_mut(hd) {
                    s.tmp.copy_from_slice(head);
                    rms_norm(head, &s.tmp, kn, p.norm_eps);
                }
            }
            s.prof.lap(2);
            for i in 0..t {
                rope.rotate(&mut s.q[i * nh * hd..(i + 1) * nh * hd], pos + i);
                rope.rotate(&mut s.k[i * nkv * hd..(i + 1) * nkv * hd], pos + i);
            }
            // Append K/V: the cache is [kv_head][capacity] rows of head_dim per layer, stored
            // in the cache's type (converted or quantized here).
            cache.shift_keys(li, &mut s.k[..t * nkv * hd]);
            // A q8_0 cache holds rotated rows: rotate the keys and values it stores and the
            // queries that attend over them; each head's output is rotated back as it is made.
            let rotation = cache.rotation();
            if let Some(n) = rotation {
                hadamard_rotate(&mut s.k[..t * nkv * hd], n);
                hadamard_rotate(&mut s.v[..t * nkv * hd], n);
                let q = &mut s.q[..t * nh * hd];
                if t > 1 {
                    pool::for_each_chunk_mut(q, nh * hd, &|_, row| hadamard_rotate(row, n));
                } else {
                    hadamard_rotate(q, n);
                }
            }
            {
                let (kc, vc) = cache.host_layer_mut(li)?;
                for i in 0..t {
                    for g in 0..nkv {
                        let row = g * rows + pos + i - first;
                        let at = (i * nkv + g) * hd;
                        kc.store_row(row, &s.k[at..at + hd], k);
                        vc.store_row(row, &s.v[at..at + hd], k);
                    }
                }
            }
            s.prof.lap(3);
            let (kc, vc) = cache.host_layer(li)?;
            s.att.resize(t * nh * hd, 0.0);
            let q = &s.q;
            let work = |(idx, out): (usize, &mut [f32]), scores: &mut Vec<f32>| {
                let (i, head) = (idx / nh, idx % nh);
                let g = head / group;
                let qpos = pos + i;
                let start = window.map_or(0, |w| (qpos + 1).saturating_sub(w));
                let qv = &q[(i * nh + head) * hd..(i * nh + head + 1) * hd];
                let (at, n) = (g * rows + start - first, qpos + 1 - start);
                k.attend_kv(
                    qv,
                    kc.rows(at, n, hd),
                    vc.rows(at, n, hd),
                    n,
                    scale,
                    scores,
                    out,
                );
                if let Some(r) = rotation {
                    hadamard_rotate(out, r);
                }
            };
            let work_items = t * nh * (pos + t);
            if work_items * hd >= 1 << 16 {
                pool::for_each_chunk_mut(&mut s.att, hd, &|idx, out| {
                    SCORES.with_borrow_mut(|sc| work((idx, out), sc))
                });
            } else {
                let mut sc = std::mem::take(&mut s.tmp);
                s.att
                    .chunks_mut(hd)
                    .enumerate()
                    .for_each(|item| work(item, &mut sc));
                s.tmp = sc;
            }
            s.prof.lap(4);
            s.acts.set(&s.att, nh * hd);
            s.tmp.resize(t * h, 0.0);
            k.matmul(&l.wo, &mut s.acts, &mut s.tmp);
            if let Some((post_attn, _)) = &l.post_norms {
                rms_norm_in_place(&mut s.tmp, post_attn, p.norm_eps);
            }
            s.x.iter_mut().zip(&s.tmp).for_each(|(x, a)| *x += a);
            s.prof.lap(5);
            s.acts
                .fill(h, t, |xn| rms_norm(xn, &s.x, &l.ffn_norm, p.norm_eps));
            s.prof.lap(1);
            let ffn = p.ffn;
            match &l.gate_up {
                // Gate and up as one product: SwiGLU runs on its output rows in place and
                // the result goes straight into the down product's input, without splitting
                // the output into gate and up buffers first.
                Proj::Fused(m, parts) if parts[..] == [ffn, ffn] => {
                    s.proj.resize(t * 2 * ffn, 0.0);
                    k.matmul(m, &mut s.acts, &mut s.proj);
                    s.prof.lap(6);
                    if gelu {
                        for row in s.proj.chunks_exact_mut(2 * ffn) {
                            let (g, u) = row.split_at_mut(ffn);
                            gelu_mul(g, u);
                        }
                    } else {
                        k.silu_mul_rows(&mut s.proj, ffn);
                    }
                    let out = &s.proj;
                    s.acts.fill(ffn, t, |x| {
                        for (dst, row) in x.chunks_exact_mut(ffn).zip(out.chunks_exact(2 * ffn)) {
                            dst.copy_from_slice(&row[..ffn]);
                        }
                    });
                }
                _ => {
                    l.gate_up
                        .apply(k, &mut s.acts, &mut s.proj, &mut [&mut s.gate, &mut s.up]);
                    s.prof.lap(6);
                    if gelu {
                        gelu_mul(&mut s.gate, &s.up);
                    } else {
                        k.silu_mul(&mut s.gate, &s.up);
                    }
                    s.acts.set(&s.gate, ffn);
                }
            }
            s.prof.lap(7);
            k.matmul(&l.down, &mut s.acts, &mut s.tmp);
            if let Some((_, post_ffw)) = &l.post_norms {
                rms_norm_in_place(&mut s.tmp, post_ffw, p.norm_eps);
            }
            s.x.iter_mut().zip(&s.tmp).for_each(|(x, a)| *x += a);
            s.prof.lap(8);
        }
        cache.advance(t);
        let rows = if all { t } else { 1 };
        let last = &s.x[(t - rows) * h..];
        s.acts
            .fill(h, rows, |xn| rms_norm(xn, last, &self.norm, p.norm_eps));
        let mut logits = vec![0f32; rows * vocab];
        k.matmul(
            self.output.as_ref().unwrap_or(&self.embed),
            &mut s.acts,
            &mut logits,
        );
        s.prof.lap(9);
        s.prof.last = None;
        Ok(logits)
    }

    /// Per-operation seconds and the number of forward calls since load, when profiling is
    /// on (`RuntimeOptions::profile`).
    pub fn profile(&self) -> Option<EngineProfile> {
        let g = self.scratch.lock().unwrap_or_else(|e| e.into_inner());
        g.prof.on.then(|| EngineProfile {
            calls: g.prof.calls,
            ops: PROFILE_OPS.iter().copied().zip(g.prof.acc).collect(),
        })
    }
}

impl Drop for NativeModel {
    fn drop(&mut self) {
        if let (Some(sink), Some(profile)) = (&self.profile_sink, self.profile()) {
            (sink.0)(&profile);
        }
    }
}
