//! Small seeded synthetic models, written as real GGUF files.
//!
//! Tests and benchmarks need llama-, qwen2-, qwen3-, gemma3- and phi3-shaped models without a download.
//! A `SynthSpec` describes the shape; `write` fills every tensor from a seeded RNG, quantizes
//! the matrices with candle to the requested GGML type, and adds a vocabulary so the file also
//! loads through the tokenizer and the CLI: byte-level BPE, or for phi3 a SentencePiece
//! vocabulary laid out like Phi-3's (its specials 64 ids below the end) with its chat template.
//! Phi3 files store Q/K/V as one `attn_qkv` matrix and gate/up as one `ffn_up` matrix.

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
            // Phi-3's vocabulary ends with its 11 specials and 53 padding tokens.
            vocab: if arch == Architecture::Phi3 { 448 } else { 320 },
            context_length: 512,
            weight_type: GgmlType::Q8_0,
            tied: !matches!(arch, Architecture::Qwen2 | Architecture::Phi3),
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
    build_with(spec, &[])
}

/// Build the GGUF bytes of a synthetic model with `extra` metadata keys added (a chat
/// template, say) after its own.
pub fn build_with(spec: &SynthSpec, extra: &[(&str, Value)]) -> candle_core::Result<Vec<u8>> {
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
    if let Some(win) = spec.sliding_window {
        w.kv(&format!("{a}.attention.sliding_window"), u32v(win));
    }
    if spec.arch == Architecture::Phi3 {
        phi3_vocab(&mut w, spec.vocab)?;
    } else {
        bpe_vocab(&mut w, spec.vocab);
    }
    for (key, value) in extra {
        w.kv(key, value.clone());
    }
    let mut g = Gen {
        rng: rand::rngs::StdRng::seed_from_u64(spec.seed),
        device: Device::Cpu,
    };
    let f32t = GgmlType::F32;
    let (h, hd, nh, nkv) = (spec.hidden, spec.head_dim, spec.n_heads, spec.n_kv_heads);
    let wt = spec.weight_type;
    let fused = spec.arch == Architecture::Phi3;
    let (dims, data) = g.matrix(spec.vocab, h, wt)?;
    w.tensor("token_embd.weight", wt, &dims, &data);
    for l in 0..spec.n_layers {
        let n = |s: &str| format!("blk.{l}.{s}");
        let v = g.vector(h, 0.1, 1.0);
        w.tensor(&n("attn_norm.weight"), f32t, &[h as u64], &v);
        let qkv: &[(&str, u32)] = if fused {
            &[("attn_qkv", (nh + 2 * nkv) * hd)]
        } else {
            &[
                ("attn_q", nh * hd),
                ("attn_k", nkv * hd),
                ("attn_v", nkv * hd),
            ]
        };
        for &(name, rows) in qkv {
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
        // Phi-3's `ffn_up` holds the gate's rows, then the up rows.
        let ffn: &[(&str, u32, u32)] = if fused {
            &[("ffn_up", 2 * spec.ffn, h), ("ffn_down", h, spec.ffn)]
        } else {
            &[
                ("ffn_gate", spec.ffn, h),
                ("ffn_up", spec.ffn, h),
                ("ffn_down", h, spec.ffn),
            ]
        };
        for &(name, rows, cols) in ffn {
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

/// Byte-level BPE: the 256 byte symbols, three specials, then filler tokens.
fn bpe_vocab(w: &mut GgufWriter, vocab: u32) {
    let u32v = |x: u32| Value::U32(x);
    let b2u = byte_to_unicode();
    let mut tokens: Vec<String> = b2u.iter().map(|c| c.to_string()).collect();
    let mut types = vec![1i32; 256];
    for s in ["<|endoftext|>", "<|im_start|>", "<|im_end|>"] {
        tokens.push(s.to_string());
        types.push(3);
    }
    let mut i = 0;
    while tokens.len() < vocab as usize {
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
}

/// Phi-3's added tokens, in id order from `<|endoftext|>` (32000 in the real vocabulary).
pub const PHI3_SPECIALS: [&str; 11] = [
    "<|endoftext|>",
    "<|assistant|>",
    "<|placeholder1|>",
    "<|placeholder2|>",
    "<|placeholder3|>",
    "<|placeholder4|>",
    "<|system|>",
    "<|end|>",
    "<|placeholder5|>",
    "<|placeholder6|>",
    "<|user|>",
];

/// Phi-3-mini-4k-instruct's chat template (`tokenizer.chat_template` of its GGUF).
pub const PHI3_CHAT_TEMPLATE: &str = "{% for message in messages %}\
{% if message['role'] == 'system' %}{{'<|system|>\\n' + message['content'] + '<|end|>\\n'}}\
{% elif message['role'] == 'user' %}{{'<|user|>\\n' + message['content'] + '<|end|>\\n'}}\
{% elif message['role'] == 'assistant' %}{{'<|assistant|>\\n' + message['content'] + '<|end|>\\n'}}\
{% endif %}{% endfor %}\
{% if add_generation_prompt %}{{ '<|assistant|>\\n' }}{% else %}{{ eos_token }}{% endif %}";

/// The id of Phi-3's first added token (`<|endoftext|>`) in a vocabulary of `vocab` tokens:
/// 64 below the end, as 32000 is in Phi-3's 32064.
pub fn phi3_first_special(vocab: u32) -> u32 {
    vocab.saturating_sub(64)
}

/// A SentencePiece (`llama`) vocabulary laid out like Phi-3's: `<unk>`, `<s>`, `</s>`, the 256
/// byte tokens, word pieces (scored so that earlier pieces merge first), Phi-3's 11 added
/// tokens as control tokens 64 ids below the end, then padding; `<|endoftext|>` is EOS and
/// the chat template is Phi-3's.
fn phi3_vocab(w: &mut GgufWriter, vocab: u32) -> candle_core::Result<()> {
    let first_special = phi3_first_special(vocab) as usize;
    let mut pieces: Vec<String> = vec!["▁".into()];
    pieces.extend(
        ('a'..='z')
            .chain('A'..='Z')
            .chain('0'..='9')
            .map(String::from),
    );
    pieces.extend(".,!?'-:".chars().map(String::from));
    for p in [
        "▁t", "he", "▁a", "in", "th", "er", "▁the", "on", "an", "re", "▁s", "▁w", "▁o", "at", "en",
        "nd", "ou", "is", "▁h", "▁c", "▁b", "▁i", "▁f", "it", "es", "or", "ing", "▁m", "▁p", "ed",
        "▁d", "▁to", "▁and", "▁of", "▁in", "▁is", "▁I", "▁H", "ll", "lo", "ello", "▁Hello", "▁y",
        "▁you", "▁wh", "▁what", "ow", "▁how", "ar", "▁are",
    ] {
        pieces.push(p.into());
    }
    if 259 + pieces.len() > first_special {
        candle_core::bail!(
            "a phi3 synthetic vocabulary needs at least {} tokens",
            259 + pieces.len() + 64
        );
    }
    let mut tokens: Vec<String> = vec!["<unk>".into(), "<s>".into(), "</s>".into()];
    let mut types = vec![2i32, 3, 3];
    tokens.extend((0..=255u8).map(|b| format!("<0x{b:02X}>")));
    types.extend([6; 256]);
    let n_pieces = first_special - tokens.len();
    let mut i = 0;
    while pieces.len() < n_pieces {
        // Unreachable fillers: no piece merges into `▁x…`.
        pieces.push(format!("▁x{i}"));
        i += 1;
    }
    tokens.extend(pieces);
    types.resize(tokens.len(), 1);
    tokens.extend(PHI3_SPECIALS.iter().map(|s| s.to_string()));
    types.resize(tokens.len(), 3);
    let mut i = 0;
    while tokens.len() < vocab as usize {
        tokens.push(format!("[PAD{i}]"));
        types.push(5);
        i += 1;
    }
    // Byte and special tokens score 0; pieces descend so that earlier ones merge first.
    let scores: Vec<f32> = (0..tokens.len())
        .map(|i| match types[i] {
            1 => -(i as f32),
            _ => 0.0,
        })
        .collect();
    let u32v = |x: u32| Value::U32(x);
    let eos = first_special as u32;
    w.kv("tokenizer.ggml.model", Value::String("llama".into()))
        .kv("tokenizer.ggml.pre", Value::String("default".into()))
        .kv("tokenizer.ggml.tokens", Value::Array(Array::String(tokens)))
        .kv("tokenizer.ggml.scores", Value::Array(Array::F32(scores)))
        .kv("tokenizer.ggml.token_type", Value::Array(Array::I32(types)))
        .kv("tokenizer.ggml.bos_token_id", u32v(1))
        .kv("tokenizer.ggml.eos_token_id", u32v(eos))
        .kv("tokenizer.ggml.unknown_token_id", u32v(0))
        .kv("tokenizer.ggml.padding_token_id", u32v(eos))
        .kv("tokenizer.ggml.add_bos_token", Value::Bool(false))
        .kv("tokenizer.ggml.add_eos_token", Value::Bool(false))
        .kv(
            "tokenizer.chat_template",
            Value::String(PHI3_CHAT_TEMPLATE.into()),
        );
    Ok(())
}

/// Write a synthetic model to `path`.
pub fn write(spec: &SynthSpec, path: &Path) -> std::io::Result<()> {
    let bytes = build(spec).map_err(std::io::Error::other)?;
    std::fs::write(path, bytes)
}
