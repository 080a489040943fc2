//! Phi-3 on both engines: fused Q/K/V (`attn_qkv`) and gate/up (`ffn_up`) matrices, split-half
//! RoPE, an optional sliding window, an untied output, and its SentencePiece vocabulary and
//! chat template, on synthetic phi3-shaped files written here.
//!
//! The engines are held to an independent forward written below in plain `f64` loops from the
//! file's tensors, with the fused matrices cut into separate Q, K, V, gate and up matrices
//! first: a wrong split order or RoPE pairing in an engine fails it.

use std::path::Path;

use boyd::lm::{ChatMessage, Role};
use boyd::runtime::decoder::{Decoder, EngineKind};
use boyd::runtime::gguf::GgufFile;
use boyd::runtime::options::RuntimeOptions;
use boyd::runtime::session::Session;
use boyd::runtime::synth::{self, SynthSpec, PHI3_SPECIALS};
use boyd::runtime::tokenizer::GgufTokenizer;
use boyd::sizing::{Architecture, GgmlType, KvDtype};
use candle_core::Device;
use rand::{Rng, SeedableRng};

fn prompt(vocab: u32, n: usize, seed: u64) -> Vec<u32> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    (0..n).map(|_| rng.random_range(0..vocab)).collect()
}

fn max_abs(v: &[f32]) -> f32 {
    v.iter().fold(0f32, |m, x| m.max(x.abs()))
}

fn worst_relative(a: &[Vec<f32>], b: &[Vec<f32>]) -> f32 {
    a.iter().zip(b).fold(0f32, |w, (x, y)| {
        let d = x.iter().zip(y).fold(0f32, |m, (p, q)| m.max((p - q).abs()));
        w.max(d / max_abs(y))
    })
}

/// A phi3-shaped model with f32 weights (nothing quantized): 6 query heads over 2 KV heads.
fn f32_spec(window: Option<u32>) -> SynthSpec {
    SynthSpec {
        hidden: 96,
        n_heads: 6,
        n_kv_heads: 2,
        head_dim: 16,
        weight_type: GgmlType::F32,
        sliding_window: window,
        ..SynthSpec::tiny(Architecture::Phi3)
    }
}

/// Logits at every position from one engine: token by token, then batched.
fn engine_logits(
    path: &Path,
    engine: EngineKind,
    tokens: &[u32],
) -> (Vec<Vec<f32>>, Vec<Vec<f32>>) {
    let mut f = GgufFile::open(path).expect("open");
    let opts = RuntimeOptions {
        kv_dtype: KvDtype::F32,
        ..RuntimeOptions::with_engine(engine)
    };
    let d = Decoder::load_with_options(&mut f, &Device::Cpu, usize::MAX, &opts).expect("load");
    let name = d.engine_name();
    match engine {
        EngineKind::Candle => assert_eq!(name, "candle"),
        _ => assert!(name.starts_with("native/"), "{name}"),
    }
    let mut s = Session::new(d, 1024);
    let stepwise = tokens.iter().map(|&t| s.step(t).expect("step")).collect();
    s.reset();
    let batched = s
        .logits_all(tokens)
        .and_then(|t| Ok(t.to_vec2::<f32>()?))
        .expect("batched");
    (stepwise, batched)
}

/// A `rows × cols` matrix of the file as `f64`, row-major (the file stores it so).
fn matrix(f: &mut GgufFile, name: &str) -> (Vec<f64>, usize, usize) {
    let info = f.header.tensor(name).expect("tensor").clone();
    assert_eq!(info.ggml_type, GgmlType::F32, "{name}");
    let bytes = f.tensor_data(&info).expect("data");
    let data: Vec<f64> = bytes
        .chunks_exact(4)
        .map(|b| f64::from(f32::from_le_bytes([b[0], b[1], b[2], b[3]])))
        .collect();
    let cols = info.dims[0] as usize;
    let rows = data.len() / cols;
    (data, rows, cols)
}

/// Rows `start..start + n` of a row-major matrix of `cols` columns, as their own matrix.
fn rows(m: &[f64], cols: usize, start: usize, n: usize) -> Vec<f64> {
    m[start * cols..(start + n) * cols].to_vec()
}

fn matvec(w: &[f64], x: &[f64]) -> Vec<f64> {
    w.chunks_exact(x.len())
        .map(|r| r.iter().zip(x).map(|(a, b)| a * b).sum())
        .collect()
}

fn rms_norm(x: &[f64], w: &[f64], eps: f64) -> Vec<f64> {
    let ms = x.iter().map(|v| v * v).sum::<f64>() / x.len() as f64;
    let r = 1.0 / (ms + eps).sqrt();
    x.iter().zip(w).map(|(v, w)| v * r * w).collect()
}

/// Rotate each head's halves `(i, i + d/2)` by `pos · base^(−2i/d)` (Phi-3's "neox" RoPE).
fn rope(x: &mut [f64], head_dim: usize, pos: usize, base: f64) {
    let half = head_dim / 2;
    for head in x.chunks_exact_mut(head_dim) {
        for i in 0..half {
            let a = pos as f64 * base.powf(-2.0 * i as f64 / head_dim as f64);
            let (c, s) = (a.cos(), a.sin());
            let (x0, x1) = (head[i], head[i + half]);
            head[i] = x0 * c - x1 * s;
            head[i + half] = x0 * s + x1 * c;
        }
    }
}

/// Logits at every position of `tokens`, computed from the file's tensors with unfused math.
fn reference_logits(path: &Path, spec: &SynthSpec, tokens: &[u32]) -> Vec<Vec<f32>> {
    let mut f = GgufFile::open(path).expect("open");
    let (h, hd, ffn) = (
        spec.hidden as usize,
        spec.head_dim as usize,
        spec.ffn as usize,
    );
    let (nh, nkv) = (spec.n_heads as usize, spec.n_kv_heads as usize);
    let (q_rows, kv_rows) = (nh * hd, nkv * hd);
    let eps = 1e-6;
    let base = 10_000.0;
    let (embd, _, _) = matrix(&mut f, "token_embd.weight");
    let mut x: Vec<Vec<f64>> = tokens
        .iter()
        .map(|&t| rows(&embd, h, t as usize, 1))
        .collect();
    for l in 0..spec.n_layers {
        let n = |s: &str| format!("blk.{l}.{s}");
        let (attn_norm, _, _) = matrix(&mut f, &n("attn_norm.weight"));
        let (qkv, r, c) = matrix(&mut f, &n("attn_qkv.weight"));
        assert_eq!((r, c), (q_rows + 2 * kv_rows, h));
        let wq = rows(&qkv, h, 0, q_rows);
        let wk = rows(&qkv, h, q_rows, kv_rows);
        let wv = rows(&qkv, h, q_rows + kv_rows, kv_rows);
        let (wo, _, _) = matrix(&mut f, &n("attn_output.weight"));
        let (ffn_norm, _, _) = matrix(&mut f, &n("ffn_norm.weight"));
        let (up_gate, r, _) = matrix(&mut f, &n("ffn_up.weight"));
        assert_eq!(r, 2 * ffn);
        let gate = rows(&up_gate, h, 0, ffn);
        let up = rows(&up_gate, h, ffn, ffn);
        let (down, _, _) = matrix(&mut f, &n("ffn_down.weight"));

        let mut keys = Vec::new();
        let mut values = Vec::new();
        let mut queries = Vec::new();
        for (pos, xt) in x.iter().enumerate() {
            let hn = rms_norm(xt, &attn_norm, eps);
            let (mut q, mut k) = (matvec(&wq, &hn), matvec(&wk, &hn));
            rope(&mut q, hd, pos, base);
            rope(&mut k, hd, pos, base);
            queries.push(q);
            keys.push(k);
            values.push(matvec(&wv, &hn));
        }
        for (pos, xt) in x.iter_mut().enumerate() {
            let first = spec
                .sliding_window
                .map_or(0, |w| (pos + 1).saturating_sub(w as usize));
            let mut att = vec![0f64; q_rows];
            for head in 0..nh {
                let g = head / (nh / nkv);
                let q = &queries[pos][head * hd..(head + 1) * hd];
                let scores: Vec<f64> = (first..=pos)
                    .map(|j| {
                        let k = &keys[j][g * hd..(g + 1) * hd];
                        q.iter().zip(k).map(|(a, b)| a * b).sum::<f64>() / (hd as f64).sqrt()
                    })
                    .collect();
                let top = scores.iter().cloned().fold(f64::MIN, f64::max);
                let e: Vec<f64> = scores.iter().map(|s| (s - top).exp()).collect();
                let sum: f64 = e.iter().sum();
                for (j, p) in (first..=pos).zip(&e) {
                    let v = &values[j][g * hd..(g + 1) * hd];
                    for (o, v) in att[head * hd..(head + 1) * hd].iter_mut().zip(v) {
                        *o += p / sum * v;
                    }
                }
            }
            for (a, o) in xt.iter_mut().zip(matvec(&wo, &att)) {
                *a += o;
            }
            let hn = rms_norm(xt, &ffn_norm, eps);
            let act: Vec<f64> = matvec(&gate, &hn)
                .into_iter()
                .zip(matvec(&up, &hn))
                .map(|(g, u)| g / (1.0 + (-g).exp()) * u)
                .collect();
            for (a, o) in xt.iter_mut().zip(matvec(&down, &act)) {
                *a += o;
            }
        }
    }
    let (norm, _, _) = matrix(&mut f, "output_norm.weight");
    let (out, _, _) = matrix(&mut f, "output.weight");
    x.iter()
        .map(|xt| {
            matvec(&out, &rms_norm(xt, &norm, eps))
                .into_iter()
                .map(|v| v as f32)
                .collect()
        })
        .collect()
}

/// Both engines, token by token and batched, reproduce the unfused reference forward on f32
/// weights — with every position visible, and with a sliding window shorter than the prompt.
#[test]
fn phi3_engines_match_an_unfused_reference_forward() {
    for window in [None, Some(9)] {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("phi3.gguf");
        let spec = f32_spec(window);
        synth::write(&spec, &path).expect("write");
        let toks = prompt(spec.vocab, 24, 3);
        let want = reference_logits(&path, &spec, &toks);
        for engine in [EngineKind::Candle, EngineKind::Native] {
            let (step, batch) = engine_logits(&path, engine, &toks);
            let (e1, e2) = (worst_relative(&step, &want), worst_relative(&batch, &want));
            eprintln!(
                "phi3 window {window:?} {}: stepwise {e1:.2e}, batched {e2:.2e} vs reference",
                engine.as_str()
            );
            assert!(
                e1 < 1e-4 && e2 < 1e-4,
                "{window:?} {}: {e1} / {e2}",
                engine.as_str()
            );
        }
    }
}

/// On quantized weights the native engine runs the fused matrices as one product each; it
/// tracks the candle engine as closely as it does for llama-shaped files.
#[test]
fn phi3_native_engine_tracks_candle_engine_on_q8_0() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("phi3.gguf");
    let spec = SynthSpec::tiny(Architecture::Phi3);
    synth::write(&spec, &path).expect("write");
    let toks = prompt(spec.vocab, 40, 5);
    let (c_step, _) = engine_logits(&path, EngineKind::Candle, &toks);
    let (n_step, n_batch) = engine_logits(&path, EngineKind::Native, &toks);
    let e = worst_relative(&n_step, &c_step);
    eprintln!("phi3 Q8_0: native vs candle worst relative {e:.2e}");
    assert!(e < 3e-2, "{e}");
    assert!(worst_relative(&n_batch, &n_step) < 1e-5);
}

/// Phi-3's vocabulary and template: the chat renders with `<|user|>`, `<|end|>` and
/// `<|assistant|>`, which encode as single special ids; `<|end|>` and `<|endoftext|>` end
/// generation; text round-trips through the SentencePiece pieces and byte fallback.
#[test]
fn phi3_chat_template_encodes_specials_and_end_stops() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("phi3.gguf");
    let spec = SynthSpec::tiny(Architecture::Phi3);
    synth::write(&spec, &path).expect("write");
    let tok = GgufTokenizer::from_path(&path).expect("tokenizer");
    let id = |s: &str| tok.token_to_id(s).expect("special token");
    let first = synth::phi3_first_special(spec.vocab);
    for (i, s) in PHI3_SPECIALS.iter().enumerate() {
        assert_eq!(id(s), first + i as u32, "{s}");
    }
    let (user, end, assistant) = (id("<|user|>"), id("<|end|>"), id("<|assistant|>"));
    assert!(tok.is_eog(end), "<|end|> stops generation");
    assert!(tok.is_eog(id("<|endoftext|>")));
    assert!(!tok.is_eog(user) && !tok.is_eog(assistant));

    let messages = [ChatMessage::new(Role::User, "Hello, how are you?")];
    let text = tok.render_chat(&messages, true).expect("render");
    assert_eq!(
        text,
        "<|user|>\nHello, how are you?<|end|>\n<|assistant|>\n"
    );
    let ids = tok.encode_chat(&messages, true).expect("encode");
    assert_eq!(ids[0], user, "{ids:?}");
    let at = |t: u32| {
        ids.iter()
            .position(|&i| i == t)
            .expect("special id in the prompt")
    };
    assert!(at(user) < at(end) && at(end) < at(assistant), "{ids:?}");
    assert!(
        ids.iter()
            .all(|&i| i < first || [user, end, assistant].contains(&i)),
        "no other special ids: {ids:?}"
    );
    assert_eq!(ids.iter().filter(|&&i| i == end).count(), 1, "{ids:?}");
    // Decoding gives the text back (a SentencePiece vocabulary may add a space after a
    // special token, as llama.cpp does).
    let decoded = tok.decode(&ids, false).expect("decode");
    assert_eq!(decoded.replace(" \n", "\n"), text, "{ids:?}");
}

/// Dev check against llama.cpp (`benches/compare/phi3-llama-cpp.sh`): with `BOYD_PHI3_OUT` set
/// to a folder, writes a phi3 file of real-ish shapes (Phi-3's vocabulary size and head dim,
/// 4 layers) and both engines' greedy continuation and the chat prompt's token ids as JSON.
#[test]
#[ignore = "writes files for benches/compare/phi3-llama-cpp.sh"]
fn phi3_write_llama_cpp_comparison() {
    use boyd::lm::CancelToken;
    use boyd::runtime::session::{Flow, GenOptions};
    let Ok(out) = std::env::var("BOYD_PHI3_OUT") else {
        return;
    };
    let dir = Path::new(&out);
    let path = dir.join("phi3-synth.gguf");
    let spec = SynthSpec {
        n_layers: 4,
        hidden: 384,
        n_heads: 4,
        n_kv_heads: 4,
        head_dim: 96,
        ffn: 1024,
        vocab: 32064,
        context_length: 4096,
        sliding_window: Some(2047),
        ..SynthSpec::tiny(Architecture::Phi3)
    };
    synth::write(&spec, &path).expect("write");
    let prompt_ids = prompt(32000, 24, 11);
    let mut greedy = Vec::new();
    for engine in [EngineKind::Candle, EngineKind::Native] {
        let mut f = GgufFile::open(&path).expect("open");
        let d = Decoder::load_with_options(
            &mut f,
            &Device::Cpu,
            usize::MAX,
            &RuntimeOptions::with_engine(engine),
        )
        .expect("load");
        let mut s = Session::new(d, 1024);
        let opts = GenOptions {
            sampling: Default::default(),
            max_tokens: 64,
            eos: vec![],
        };
        let o = s
            .generate(&prompt_ids, &opts, &CancelToken::new(), &mut |_| {
                Flow::Continue
            })
            .expect("generate");
        greedy.push(format!("\"{}\": {:?}", engine.as_str(), o.tokens));
    }
    let tok = GgufTokenizer::from_path(&path).expect("tokenizer");
    let messages = [
        ChatMessage::new(Role::System, "You are a helpful assistant."),
        ChatMessage::new(Role::User, "Hello, how are you? What is 2+2?"),
    ];
    let text = tok.render_chat(&messages, true).expect("render");
    let ids = tok.encode(&text, false).expect("encode");
    let json = format!(
        "{{\"prompt\": {prompt_ids:?}, {}, \"chat_text\": {text:?}, \"chat_ids\": {ids:?}}}",
        greedy.join(", ")
    );
    std::fs::write(dir.join("boyd.json"), json).expect("json");
}
