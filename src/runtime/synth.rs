//! Small seeded synthetic models, written as real GGUF files.
//!
//! Tests and benchmarks need llama-, qwen2-, qwen3- and gemma3-shaped models without a download. A
//! `SynthSpec` describes the shape; `write` fills every tensor from a seeded RNG, quantizes the
//! matrices with candle to the requested GGML type, and adds a byte-level BPE vocabulary so the
//! file also loads through the tokenizer and the CLI.

use std::path::Path;

use candle_core::quantized::QTensor;
use candle_core::{Device, Tensor};
use rand::{Rng, SeedableRng};

use crate::runtime::gguf::{Array, GgufWriter, Value};
use crate::sizing::{Architecture, GgmlType};

/// The shape of a synthetic model.
#[derive(Debug, Clone)]
pub struct SynthSpec {
    /// Family (switches biases, QK-norm, RoPE layout).
    pub arch: Architecture,
    /// Blocks.
    pub n_layers: u32,
    /// Residual width.
    pub hidden: u32,
    /// Query heads.
    pub n_heads: u32,
    /// KV heads.
    pub n_kv_heads: u32,
    /// Head dimension (may differ from hidden / heads, as in Qwen3).
    pub head_dim: u32,
    /// Feed-forward width.
    pub ffn: u32,
    /// Vocabulary size (at least 259: 256 bytes + 3 specials).
    pub vocab: u32,
    /// Context length.
    pub context_length: u32,
    /// Type of the big matrices.
    pub weight_type: GgmlType,
    /// Share the output projection with the token embedding.
    pub tied: bool,
    /// `attention.sliding_window`, when set (Gemma 3: its local layers' window).
    pub sliding_window: Option<u32>,
    /// RNG seed.
    pub seed: u64,
}

impl SynthSpec {
    /// A tiny model of the given family: 2 layers, 64 wide, GQA 4:2.
    pub fn tiny(arch: Architecture) -> Self {
        Self {
            arch,
            n_layers: 2,
            hidden: 64,
            n_heads: 4,
            n_kv_heads: 2,
            head_dim: if arch == Architecture::Qwen3 { 32 } else { 16 },
            ffn: 128,
            vocab: 320,
            context_length: 512,
            weight_type: GgmlType::Q8_0,
            tied: arch != Architecture::Qwen2,
            sliding_window: (arch == Architecture::Gemma3).then_some(8),
            seed: 42,
        }
    }
}

/// GPT-2's reversible map from bytes to printable characters (byte-level BPE alphabet).
pub fn byte_to_unicode() -> Vec<char> {
    let mut map = vec!['\0'; 256];
    let mut extra = 0u32;
    for b in 0..256u32 {
        let printable =
            (33..=126).contains(&b) || (161..=172).contains(&b) || (174..=255).contains(&b);
        let c = if printable {
            b
        } else {
            extra += 1;
            255 + extra
        };
        map[b as usize] = char::from_u32(c).unwrap_or('?');
    }
    map
}

struct Gen {
    rng: rand::rngs::StdRng,
    device: Device,
}

impl Gen {
    fn values(&mut self, n: usize, scale: f32, center: f32) -> Vec<f32> {
        (0..n)
            .map(|_| center + scale * (self.rng.random::<f32>() * 2.0 - 1.0))
            .collect()
    }

    /// A matrix `(rows, cols)` quantized to `ty`; returns GGUF dims and bytes.
    fn matrix(
        &mut self,
        rows: u32,
        cols: u32,
        ty: GgmlType,
    ) -> candle_core::Result<(Vec<u64>, Vec<u8>)> {
        let scale = 1.0 / (cols as f32).sqrt();
        let v = self.values((rows * cols) as usize, scale, 0.0);
        let t = Tensor::from_vec(v, (rows as usize, cols as usize), &self.device)?;
        let dtype = crate::runtime::decoder::candle_dtype(ty)
            .ok_or_else(|| candle_core::Error::Msg(format!("cannot quantize to {}", ty.name())))?;
        let q = QTensor::quantize(&t, dtype)?;
        Ok((vec![cols as u64, rows as u64], q.data()?.into_owned()))
    }

    fn vector(&mut self, n: u32, scale: f32, center: f32) -> Vec<u8> {
        self.values(n as usize, scale, center)
            .into_iter()
            .flat_map(f32::to_le_bytes)
            .collect()
    }
}

/// Build the GGUF bytes of a synthetic model.
pub fn build(spec: &SynthSpec) -> candle_core::Result<Vec<u8>> {
    let a = spec.arch.gguf_name();
    let mut w = GgufWriter::new();
    let u32v = |x: u32| Value::U32(x);
    w.kv("general.architecture", Value::String(a.into()))
        .kv("general.name", Value::String(format!("synthetic-{a}")))
        .kv(&format!("{a}.block_count"), u32v(spec.n_layers))
        .kv(&format!("{a}.context_length"), u32v(spec.context_length))
        .kv(&format!("{a}.embedding_length"), u32v(spec.hidden))
        .kv(&format!("{a}.feed_forward_length"), u32v(spec.ffn))
        .kv(&format!("{a}.attention.head_count"), u32v(spec.n_heads))
        .kv(
            &format!("{a}.attention.head_count_kv"),
            u32v(spec.n_kv_heads),
        )
        .kv(&format!("{a}.attention.key_length"), u32v(spec.head_dim))
        .kv(&format!("{a}.attention.value_length"), u32v(spec.head_dim))
        // Gemma 3's file base is its global layers'; its local layers use 10000 regardless, so
        // a distinct base here shows which table a layer rotates with.
        .kv(
            &format!("{a}.rope.freq_base"),
            Value::F32(if spec.arch == Architecture::Gemma3 {
                1_000_000.0
            } else {
                10_000.0
            }),
        )
        .kv(&format!("{a}.rope.dimension_count"), u32v(spec.head_dim))
        // Read by candle-transformers' qwen3 reference: 0 = compute in f32 (its default is f16).
        .kv("general.dtype", u32v(0))
        .kv(
            &format!("{a}.attention.layer_norm_rms_epsilon"),
            Value::F32(1e-6),
        );
    if let Some(window) = spec.sliding_window {
        w.kv(&format!("{a}.attention.sliding_window"), u32v(window));
    }
    // Vocabulary: the 256 byte symbols, three specials, then filler tokens.
    let b2u = byte_to_unicode();
    let mut tokens: Vec<String> = b2u.iter().map(|c| c.to_string()).collect();
    let mut types = vec![1i32; 256];
    for s in ["<|endoftext|>", "<|im_start|>", "<|im_end|>"] {
        tokens.push(s.to_string());
        types.push(3);
    }
    let mut i = 0;
    while tokens.len() < spec.vocab as usize {
        tokens.push(format!("<|extra_{i}|>"));
        types.push(4);
        i += 1;
    }
    w.kv("tokenizer.ggml.model", Value::String("gpt2".into()))
        .kv("tokenizer.ggml.pre", Value::String("default".into()))
        .kv("tokenizer.ggml.tokens", Value::Array(Array::String(tokens)))
        .kv("tokenizer.ggml.token_type", Value::Array(Array::I32(types)))
        .kv("tokenizer.ggml.merges", Value::Array(Array::String(vec![])))
        .kv("tokenizer.ggml.bos_token_id", u32v(256))
        .kv("tokenizer.ggml.eos_token_id", u32v(258))
        .kv("tokenizer.ggml.add_bos_token", Value::Bool(false));

    let mut g = Gen {
        rng: rand::rngs::StdRng::seed_from_u64(spec.seed),
        device: Device::Cpu,
    };
    let f32t = GgmlType::F32;
    let (h, hd, nh, nkv) = (spec.hidden, spec.head_dim, spec.n_heads, spec.n_kv_heads);
    let wt = spec.weight_type;
    let (dims, data) = g.matrix(spec.vocab, h, wt)?;
    w.tensor("token_embd.weight", wt, &dims, &data);
    for l in 0..spec.n_layers {
        let n = |s: &str| format!("blk.{l}.{s}");
        let v = g.vector(h, 0.1, 1.0);
        w.tensor(&n("attn_norm.weight"), f32t, &[h as u64], &v);
        for (name, rows) in [
            ("attn_q", nh * hd),
            ("attn_k", nkv * hd),
            ("attn_v", nkv * hd),
        ] {
            let (dims, data) = g.matrix(rows, h, wt)?;
            w.tensor(&n(&format!("{name}.weight")), wt, &dims, &data);
            if spec.arch.qkv_bias() {
                let b = g.vector(rows, 0.1, 0.0);
                w.tensor(&n(&format!("{name}.bias")), f32t, &[rows as u64], &b);
            }
        }
        if spec.arch.qk_norm() {
            let v = g.vector(hd, 0.1, 1.0);
            w.tensor(&n("attn_q_norm.weight"), f32t, &[hd as u64], &v);
            let v = g.vector(hd, 0.1, 1.0);
            w.tensor(&n("attn_k_norm.weight"), f32t, &[hd as u64], &v);
        }
        let (dims, data) = g.matrix(h, nh * hd, wt)?;
        w.tensor(&n("attn_output.weight"), wt, &dims, &data);
        let v = g.vector(h, 0.1, 1.0);
        w.tensor(&n("ffn_norm.weight"), f32t, &[h as u64], &v);
        if spec.arch == Architecture::Gemma3 {
            for name in ["post_attention_norm.weight", "post_ffw_norm.weight"] {
                let v = g.vector(h, 0.3, 1.0);
                w.tensor(&n(name), f32t, &[h as u64], &v);
            }
        }
        for (name, rows, cols) in [
            ("ffn_gate", spec.ffn, h),
            ("ffn_up", spec.ffn, h),
            ("ffn_down", h, spec.ffn),
        ] {
            let (dims, data) = g.matrix(rows, cols, wt)?;
            w.tensor(&n(&format!("{name}.weight")), wt, &dims, &data);
        }
    }
    let v = g.vector(h, 0.1, 1.0);
    w.tensor("output_norm.weight", f32t, &[h as u64], &v);
    if !spec.tied {
        let (dims, data) = g.matrix(spec.vocab, h, wt)?;
        w.tensor("output.weight", wt, &dims, &data);
    }
    Ok(w.to_bytes())
}

/// Write a synthetic model to `path`.
pub fn write(spec: &SynthSpec, path: &Path) -> std::io::Result<()> {
    let bytes = build(spec).map_err(std::io::Error::other)?;
    std::fs::write(path, bytes)
}
