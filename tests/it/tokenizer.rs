//! The GGUF tokenizer: synthetic vocabularies written as GGUF bytes here, and the two real
//! models against llama.cpp's ids pinned in tests/data/ (scripts/tokenizer-reference.py).

use std::path::{Path, PathBuf};

use boyd::lm::{ChatMessage, Role};
use boyd::runtime::gguf::{Array, GgufHeader, GgufWriter, HeaderLimits, Value};
use boyd::runtime::tokenizer::{GgufTokenizer, TokenType, TokenizerError, VocabKind};

use crate::common;

// ---------------------------------------------------------------------------------------------
// Synthetic vocabularies

/// GPT-2's byte -> printable-char map.
fn byte_chars() -> Vec<char> {
    let mut extra = 0;
    (0u32..256)
        .map(|b| {
            let printable =
                (33..=126).contains(&b) || (161..=172).contains(&b) || (174..=255).contains(&b);
            let cp = if printable {
                b
            } else {
                extra += 1;
                255 + extra
            };
            char::from_u32(cp).expect("valid char")
        })
        .collect()
}

fn header(w: &GgufWriter) -> GgufHeader {
    let bytes = w.to_bytes();
    GgufHeader::read(&bytes[..], bytes.len() as u64, HeaderLimits::default())
        .expect("synthetic GGUF parses")
}

fn strings(v: &[&str]) -> Value {
    Value::Array(Array::String(v.iter().map(|s| s.to_string()).collect()))
}

/// A byte-level BPE vocabulary: the 256 byte symbols, a few merges, three control tokens and
/// one user-defined token.
struct BpeVocab {
    tokens: Vec<String>,
    types: Vec<i32>,
    merges: Vec<String>,
}

impl BpeVocab {
    fn new() -> Self {
        let mut tokens: Vec<String> = byte_chars().iter().map(|c| c.to_string()).collect();
        let mut types = vec![1; 256];
        for s in ["<|endoftext|>", "<|im_start|>", "<|im_end|>"] {
            tokens.push(s.into());
            types.push(3);
        }
        tokens.push("<tool>".into());
        types.push(4);
        let merges: Vec<&str> = vec![
            "h e",
            "l l",
            "he ll",
            "hell o",
            "Ġ w",
            "o r",
            "Ġw or",
            "Ġwor l",
            "Ġworl d",
            "H e",
            "He ll",
            "Hell o",
            "1 2",
            "12 3",
            "Ġ Ġ",
            "ĠĠ ĠĠ",
        ];
        let mut v = Self {
            tokens,
            types,
            merges: merges.iter().map(|s| s.to_string()).collect(),
        };
        for m in merges {
            let (a, b) = m.split_once(' ').expect("pair");
            v.push(&format!("{a}{b}"));
        }
        v
    }

    fn push(&mut self, t: &str) {
        if !self.tokens.iter().any(|x| x == t) {
            self.tokens.push(t.to_string());
            self.types.push(1);
        }
    }

    fn id(&self, t: &str) -> u32 {
        self.tokens
            .iter()
            .position(|x| x == t)
            .expect("token in vocab") as u32
    }

    fn writer(&self, pre: &str) -> GgufWriter {
        let mut w = GgufWriter::new();
        w.kv("tokenizer.ggml.model", Value::String("gpt2".into()))
            .kv("tokenizer.ggml.pre", Value::String(pre.into()))
            .kv(
                "tokenizer.ggml.tokens",
                Value::Array(Array::String(self.tokens.clone())),
            )
            .kv(
                "tokenizer.ggml.token_type",
                Value::Array(Array::I32(self.types.clone())),
            )
            .kv(
                "tokenizer.ggml.merges",
                Value::Array(Array::String(self.merges.clone())),
            )
            .kv(
                "tokenizer.ggml.bos_token_id",
                Value::U32(self.id("<|im_start|>")),
            )
            .kv(
                "tokenizer.ggml.eos_token_id",
                Value::U32(self.id("<|endoftext|>")),
            )
            .kv("tokenizer.ggml.add_bos_token", Value::Bool(false));
        w
    }

    fn tokenizer(&self, pre: &str) -> GgufTokenizer {
        GgufTokenizer::from_header(&header(&self.writer(pre))).expect("tokenizer builds")
    }
}

#[test]
fn bpe_synthetic_encodes_with_merges_and_specials() {
    let v = BpeVocab::new();
    let tok = v.tokenizer("smollm");
    assert_eq!(tok.kind(), VocabKind::Bpe);
    assert_eq!(tok.vocab_size(), v.tokens.len());

    let ids = tok.encode("hello world", false).expect("encodes");
    assert_eq!(ids, vec![v.id("hello"), v.id("Ġworld")]);
    // No prefix space is invented: "Hello" is one token, not "ĠHello".
    assert_eq!(
        tok.encode("Hello", false).expect("encodes"),
        vec![v.id("Hello")]
    );
    // smollm isolates every digit before merging, so the "1 2" merge never applies.
    assert_eq!(
        tok.encode("123", false).expect("encodes"),
        vec![v.id("1"), v.id("2"), v.id("3")]
    );
    // ...while gpt-2 keeps digit runs together.
    let gpt2 = v.tokenizer("gpt-2");
    assert_eq!(
        gpt2.encode("123", false).expect("encodes"),
        vec![v.id("123")]
    );

    // Control tokens are single ids with parse_special, text without it.
    let chat = "<|im_start|>hello<|im_end|>";
    assert_eq!(
        tok.encode(chat, false).expect("encodes"),
        vec![v.id("<|im_start|>"), v.id("hello"), v.id("<|im_end|>")]
    );
    let plain = tok.encode_with(chat, false, false).expect("encodes");
    assert!(
        plain.len() > 5 && !plain.contains(&v.id("<|im_start|>")),
        "{plain:?}"
    );
    // User-defined tokens are matched even without parse_special.
    assert_eq!(
        tok.encode_with("<tool>hello", false, false)
            .expect("encodes"),
        vec![v.id("<tool>"), v.id("hello")]
    );
    assert_eq!(tok.token_type(v.id("<tool>")), Some(TokenType::UserDefined));

    // BOS is not added (add_bos_token = false); EOS ids include <|im_end|> and <|endoftext|>.
    assert_eq!(
        tok.encode("hello", true).expect("encodes"),
        vec![v.id("hello")]
    );
    let eos = tok.eos_ids();
    assert!(
        eos.contains(&v.id("<|endoftext|>")) && eos.contains(&v.id("<|im_end|>")),
        "{eos:?}"
    );
    assert!(!eos.contains(&v.id("<|im_start|>")));
}

#[test]
fn bpe_synthetic_decodes_and_streams_utf8() {
    let v = BpeVocab::new();
    let tok = v.tokenizer("smollm");
    for s in [
        "hello world",
        "  x\n\ty ",
        "héllo wörld 你好 🎉",
        "<|im_start|>hi<|im_end|><tool>",
        "",
    ] {
        let ids = tok.encode(s, false).expect("encodes");
        assert_eq!(tok.decode(&ids, false).expect("decodes"), s);
    }
    let ids = tok
        .encode("<|im_start|>hello<|im_end|>", false)
        .expect("encodes");
    assert_eq!(tok.decode(&ids, true).expect("decodes"), "hello");

    // "é" has no merge here: two byte tokens; the stream holds the first byte back.
    let ids = tok.encode("é!", false).expect("encodes");
    assert_eq!(ids.len(), 3);
    let mut sd = tok.stream_decoder(false);
    assert_eq!(sd.push(ids[0]).expect("push"), "");
    assert_eq!(sd.pending_bytes(), 1);
    assert_eq!(sd.push(ids[1]).expect("push"), "é");
    assert_eq!(sd.push(ids[2]).expect("push"), "!");
    assert_eq!(sd.finish(), "");

    // A dangling lead byte at the end becomes U+FFFD, in decode and in the stream alike.
    let cut = &ids[..1];
    assert_eq!(tok.decode(cut, false).expect("decodes"), "\u{FFFD}");
    let mut sd = tok.stream_decoder(false);
    let mut out = sd.push(cut[0]).expect("push");
    out.push_str(&sd.finish());
    assert_eq!(out, "\u{FFFD}");

    assert!(matches!(
        tok.decode(&[u32::MAX], false),
        Err(TokenizerError::UnknownId { .. })
    ));
}

/// A SentencePiece vocabulary: unk, bos, eos, the 256 byte tokens, pieces with scores.
fn spm_writer(add_space_prefix: Option<bool>) -> (GgufWriter, Vec<String>) {
    let mut tokens: Vec<String> = vec!["<unk>".into(), "<s>".into(), "</s>".into()];
    let mut types = vec![2, 3, 3];
    let mut scores = vec![0.0f32; 3];
    for b in 0..=255u8 {
        tokens.push(format!("<0x{b:02X}>"));
        types.push(6);
        scores.push(0.0);
    }
    // Higher score = merged first. Single characters score lowest.
    let pieces: &[(&str, f32)] = &[
        ("▁", -100.0),
        ("h", -101.0),
        ("e", -102.0),
        ("l", -103.0),
        ("o", -104.0),
        ("w", -105.0),
        ("r", -106.0),
        ("d", -107.0),
        ("ll", -10.0),
        ("he", -11.0),
        ("▁he", -12.0),
        ("▁hell", -13.0),
        ("▁hello", -14.0),
        ("or", -15.0),
        ("▁w", -16.0),
        ("▁wor", -17.0),
        ("▁worl", -18.0),
        ("▁world", -19.0),
        ("▁▁", -20.0),
    ];
    for (p, s) in pieces {
        tokens.push((*p).into());
        types.push(1);
        scores.push(*s);
    }
    tokens.push("<|im_start|>".into());
    types.push(3);
    scores.push(0.0);
    let mut w = GgufWriter::new();
    w.kv("tokenizer.ggml.model", Value::String("llama".into()))
        .kv(
            "tokenizer.ggml.tokens",
            Value::Array(Array::String(tokens.clone())),
        )
        .kv("tokenizer.ggml.scores", Value::Array(Array::F32(scores)))
        .kv("tokenizer.ggml.token_type", Value::Array(Array::I32(types)))
        .kv("tokenizer.ggml.bos_token_id", Value::U32(1))
        .kv("tokenizer.ggml.eos_token_id", Value::U32(2))
        .kv("tokenizer.ggml.unknown_token_id", Value::U32(0));
    if let Some(p) = add_space_prefix {
        w.kv("tokenizer.ggml.add_space_prefix", Value::Bool(p));
    }
    (w, tokens)
}

#[test]
fn spm_synthetic_encodes_by_score_with_byte_fallback() {
    let (w, tokens) = spm_writer(None);
    let id = |t: &str| tokens.iter().position(|x| x == t).expect("in vocab") as u32;
    let tok = GgufTokenizer::from_header(&header(&w)).expect("tokenizer builds");
    assert_eq!(tok.kind(), VocabKind::Spm);
    assert!(tok.add_bos());

    // BOS by default, a ▁ prefix, merges by the score of the merged piece.
    assert_eq!(
        tok.encode("hello world", true).expect("encodes"),
        vec![1, id("▁hello"), id("▁world")]
    );
    assert_eq!(
        tok.encode("hello", false).expect("encodes"),
        vec![id("▁hello")]
    );
    // Unknown characters fall back to their UTF-8 bytes.
    assert_eq!(
        tok.encode("é", false).expect("encodes"),
        vec![id("▁"), id("<0xC3>"), id("<0xA9>")]
    );
    // A ▁ prefix after a special token too, as llama.cpp does.
    assert_eq!(
        tok.encode("<|im_start|>hello", false).expect("encodes"),
        vec![id("<|im_start|>"), id("▁hello")]
    );

    // BOS is skipped and the prefix space removed again.
    let ids = tok.encode("hello world", true).expect("encodes");
    assert_eq!(tok.decode(&ids, true).expect("decodes"), "hello world");
    for s in [
        "hello world",
        "héllo  wörld",
        " leading",
        "<|im_start|>hello",
        "x\ny",
        "",
    ] {
        let ids = tok.encode(s, false).expect("encodes");
        assert_eq!(tok.decode(&ids, false).expect("decodes"), s, "{ids:?}");
        let mut sd = tok.stream_decoder(false);
        let mut streamed = String::new();
        for &i in &ids {
            streamed.push_str(&sd.push(i).expect("push"));
        }
        streamed.push_str(&sd.finish());
        assert_eq!(streamed, s);
    }

    // A template that writes BOS itself gets exactly one BOS from encode_chat.
    let (mut w, _) = spm_writer(None);
    w.kv(
        "tokenizer.chat_template",
        Value::String("{{ bos_token }}{% for m in messages %}{{ m.content }}{% endfor %}".into()),
    );
    let chat = GgufTokenizer::from_header(&header(&w)).expect("tokenizer builds");
    let msgs = [ChatMessage::new(Role::User, "hello")];
    assert_eq!(chat.render_chat(&msgs, true).expect("renders"), "<s>hello");
    assert_eq!(
        chat.encode_chat(&msgs, true).expect("encodes"),
        vec![1, id("▁hello")]
    );

    let (w, tokens) = spm_writer(Some(false));
    let id = |t: &str| tokens.iter().position(|x| x == t).expect("in vocab") as u32;
    let tok = GgufTokenizer::from_header(&header(&w)).expect("tokenizer builds");
    assert_eq!(
        tok.encode("hello", false).expect("encodes"),
        vec![id("he"), id("ll"), id("o")]
    );
    assert_eq!(
        tok.decode(&tok.encode(" hello", true).expect("encodes"), true)
            .expect("decodes"),
        " hello"
    );
}

#[test]
fn malformed_tokenizer_metadata_is_a_typed_error() {
    let v = BpeVocab::new();
    // Later keys cannot replace earlier ones in a GGUF, so each case writes a fresh header.
    let fresh = |kvs: Vec<(&str, Value)>| {
        let mut w = GgufWriter::new();
        for (k, val) in kvs {
            w.kv(k, val);
        }
        GgufTokenizer::from_header(&header(&w))
    };
    let toks = Value::Array(Array::String(v.tokens.clone()));
    let merges = Value::Array(Array::String(v.merges.clone()));
    let gpt2 = || Value::String("gpt2".into());

    assert!(matches!(
        fresh(vec![]),
        Err(TokenizerError::MissingKey("tokenizer.ggml.model"))
    ));
    assert!(matches!(
        fresh(vec![("tokenizer.ggml.model", Value::String("rwkv".into()))]),
        Err(TokenizerError::UnsupportedModel(_))
    ));
    assert!(matches!(
        fresh(vec![
            ("tokenizer.ggml.model", gpt2()),
            ("tokenizer.ggml.pre", Value::String("nope".into()))
        ]),
        Err(TokenizerError::UnsupportedPreTokenizer(_))
    ));
    assert!(matches!(
        fresh(vec![
            ("tokenizer.ggml.model", gpt2()),
            ("tokenizer.ggml.merges", merges.clone())
        ]),
        Err(TokenizerError::MissingKey("tokenizer.ggml.tokens"))
    ));
    assert!(matches!(
        fresh(vec![
            ("tokenizer.ggml.model", gpt2()),
            (
                "tokenizer.ggml.tokens",
                Value::Array(Array::U32(vec![1, 2, 3]))
            ),
        ]),
        Err(TokenizerError::WrongType {
            key: "tokenizer.ggml.tokens",
            ..
        })
    ));
    assert!(matches!(
        fresh(vec![
            ("tokenizer.ggml.model", gpt2()),
            ("tokenizer.ggml.tokens", strings(&[]))
        ]),
        Err(TokenizerError::EmptyVocab)
    ));
    assert!(matches!(
        fresh(vec![
            ("tokenizer.ggml.model", gpt2()),
            ("tokenizer.ggml.tokens", toks.clone()),
            ("tokenizer.ggml.token_type", Value::Array(Array::I32(vec![1; 10]))),
            ("tokenizer.ggml.merges", merges.clone()),
        ]),
        Err(TokenizerError::LengthMismatch { key: "tokenizer.ggml.token_type", expected, found: 10 })
            if expected == v.tokens.len()
    ));
    assert!(matches!(
        fresh(vec![
            ("tokenizer.ggml.model", gpt2()),
            ("tokenizer.ggml.tokens", toks.clone()),
            (
                "tokenizer.ggml.token_type",
                Value::Array(Array::String(vec!["x".into(); v.tokens.len()]))
            ),
            ("tokenizer.ggml.merges", merges.clone()),
        ]),
        Err(TokenizerError::WrongType {
            key: "tokenizer.ggml.token_type",
            ..
        })
    ));
    assert!(matches!(
        fresh(vec![
            ("tokenizer.ggml.model", gpt2()),
            ("tokenizer.ggml.tokens", toks.clone()),
            ("tokenizer.ggml.merges", merges.clone()),
            ("tokenizer.ggml.bos_token_id", Value::U32(1_000_000)),
        ]),
        Err(TokenizerError::BadSpecialId {
            key: "tokenizer.ggml.bos_token_id",
            id: 1_000_000,
            ..
        })
    ));
    assert!(matches!(
        fresh(vec![
            ("tokenizer.ggml.model", gpt2()),
            ("tokenizer.ggml.tokens", strings(&["a", "b", "a"])),
            ("tokenizer.ggml.merges", strings(&[])),
        ]),
        Err(TokenizerError::DuplicateToken {
            first: 0,
            second: 2,
            ..
        })
    ));
    assert!(matches!(
        fresh(vec![
            ("tokenizer.ggml.model", gpt2()),
            ("tokenizer.ggml.tokens", toks.clone())
        ]),
        Err(TokenizerError::MissingKey("tokenizer.ggml.merges"))
    ));
    let (_, tokens) = spm_writer(None);
    let mut w2 = GgufWriter::new();
    w2.kv("tokenizer.ggml.model", Value::String("llama".into()))
        .kv("tokenizer.ggml.tokens", Value::Array(Array::String(tokens)))
        .kv(
            "tokenizer.ggml.scores",
            Value::Array(Array::F32(vec![0.0; 3])),
        );
    assert!(matches!(
        GgufTokenizer::from_header(&header(&w2)),
        Err(TokenizerError::LengthMismatch {
            key: "tokenizer.ggml.scores",
            ..
        })
    ));
    // A merge naming tokens that are not in the vocabulary is skipped, not fatal.
    let mut vb = BpeVocab::new();
    vb.merges.push("q z".into());
    assert!(GgufTokenizer::from_header(&header(&vb.writer("smollm"))).is_ok());
}

// ---------------------------------------------------------------------------------------------
// Real models against llama.cpp

fn data_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join("data")
}

fn corpus() -> Vec<String> {
    let text =
        std::fs::read_to_string(data_dir().join("tokenizer-corpus.json")).expect("corpus file");
    let v: serde_json::Value = serde_json::from_str(&text).expect("corpus JSON");
    serde_json::from_value(v["strings"].clone()).expect("list of strings")
}

struct Case {
    text: String,
    ids: Vec<u32>,
    ids_plain: Vec<u32>,
}

fn reference(path: &Path) -> Vec<Case> {
    let text = std::fs::read_to_string(path).expect("ids file");
    let v: serde_json::Value = serde_json::from_str(&text).expect("ids JSON");
    let ids = |c: &serde_json::Value, k: &str| -> Vec<u32> {
        serde_json::from_value(c[k].clone()).expect("list of ids")
    };
    v["cases"]
        .as_array()
        .expect("cases")
        .iter()
        .map(|c| Case {
            text: c["text"].as_str().expect("text").to_string(),
            ids: ids(c, "ids"),
            ids_plain: ids(c, "ids_plain"),
        })
        .collect()
}

/// Compare with the pinned ids of `tests/data/{name}.ids.json`; returns (matching, total).
fn compare_with_llama_cpp(tok: &GgufTokenizer, name: &str) -> (usize, usize) {
    let cases = reference(&data_dir().join(format!("{name}.ids.json")));
    let corpus = corpus();
    assert_eq!(
        cases.iter().map(|c| c.text.as_str()).collect::<Vec<_>>(),
        corpus.iter().map(String::as_str).collect::<Vec<_>>(),
        "tests/data/{name}.ids.json is stale: rerun scripts/tokenizer-reference.py on the corpus"
    );
    compare_cases(tok, name, &cases)
}

/// Compare every case; returns (matching, total) and prints the mismatches.
fn compare_cases(tok: &GgufTokenizer, name: &str, cases: &[Case]) -> (usize, usize) {
    let mut ok = 0;
    for c in cases {
        let ours = tok.encode(&c.text, true).expect("encodes");
        let ours_plain = tok.encode_with(&c.text, false, false).expect("encodes");
        if ours == c.ids && ours_plain == c.ids_plain {
            ok += 1;
        } else {
            eprintln!(
                "{name}: {:?}\n  llama.cpp {:?} / plain {:?}\n  boyd      {:?} / plain {:?}",
                c.text, c.ids, c.ids_plain, ours, ours_plain
            );
        }
    }
    eprintln!(
        "{name}: {ok}/{} corpus strings tokenize exactly as llama.cpp",
        cases.len()
    );
    (ok, cases.len())
}

fn assert_round_trip(tok: &GgufTokenizer) {
    for s in corpus() {
        let ids = tok.encode(&s, false).expect("encodes");
        assert_eq!(tok.decode(&ids, false).expect("decodes"), s, "{ids:?}");
        let mut sd = tok.stream_decoder(false);
        let mut streamed = String::new();
        for &i in &ids {
            streamed.push_str(&sd.push(i).expect("push"));
        }
        streamed.push_str(&sd.finish());
        assert_eq!(streamed, s);
    }
}

/// With add_generation_prompt = false, each conversation renders to a prefix of the next.
fn assert_prefix_stable(tok: &GgufTokenizer, msgs: &[ChatMessage]) {
    let mut prev = String::new();
    for k in 1..=msgs.len() {
        let r = tok.render_chat(&msgs[..k], false).expect("renders");
        assert!(
            r.starts_with(&prev),
            "render of {} messages is not a prefix extension:\n{prev:?}\n{r:?}",
            k
        );
        prev = r;
    }
}

fn conversation(with_system: bool) -> Vec<ChatMessage> {
    let mut m = Vec::new();
    if with_system {
        m.push(ChatMessage::new(Role::System, "You are a careful agent."));
    }
    m.extend([
        ChatMessage::new(Role::User, "List the files."),
        ChatMessage::new(Role::Assistant, "Action: list_dir {\"path\": \".\"}"),
        ChatMessage::new(Role::Tool, "Cargo.toml\nsrc/"),
        ChatMessage::new(Role::Assistant, "There are two entries."),
        ChatMessage::new(Role::User, "Thanks!"),
    ]);
    m
}

/// The SentencePiece path against llama.cpp: tests/data/spm-test-vocab.gguf.bin is a vocabulary-only
/// "llama" GGUF (scripts/make-spm-test-vocab.py), so this runs everywhere.
#[test]
fn spm_test_vocab_matches_llama_cpp() {
    let tok = GgufTokenizer::from_path(&data_dir().join("spm-test-vocab.gguf.bin"))
        .expect("tokenizer loads");
    assert_eq!(tok.kind(), VocabKind::Spm);
    let (ok, total) = compare_with_llama_cpp(&tok, "spm-test-vocab");
    assert_eq!(ok, total, "token ids differ from llama.cpp (see stderr)");
    assert_round_trip(&tok);
}

#[test]
fn smollm2_tokenizer_matches_llama_cpp() {
    let Some(path) = common::smollm2() else {
        return;
    };
    let tok = GgufTokenizer::from_path(&path).expect("tokenizer loads");
    // Regression: candle's GGUF tokenizer adds a leading space for the smollm pre-tokenizer.
    assert_eq!(tok.encode("Hello", true).expect("encodes"), vec![19556]);
    assert_eq!(tok.decode(&[19556], true).expect("decodes"), "Hello");
    let (ok, total) = compare_with_llama_cpp(&tok, "smollm2-135m-instruct");
    assert_eq!(ok, total, "token ids differ from llama.cpp (see stderr)");
    assert_round_trip(&tok);
}

#[test]
fn qwen_coder_tokenizer_matches_llama_cpp() {
    let Some(path) = common::qwen_coder() else {
        return;
    };
    let tok = GgufTokenizer::from_path(&path).expect("tokenizer loads");
    let (ok, total) = compare_with_llama_cpp(&tok, "qwen2.5-coder-0.5b-instruct");
    assert_eq!(ok, total, "token ids differ from llama.cpp (see stderr)");
    assert_round_trip(&tok);
    let eos = tok.eos_ids();
    for t in ["<|im_end|>", "<|endoftext|>"] {
        let id = tok.token_to_id(t).expect("in vocab");
        assert!(eos.contains(&id), "{t} ({id}) not in {eos:?}");
    }
}

/// Gemma 3's SentencePiece vocabulary (262k tokens, byte fallback, no space prefix).
#[test]
fn gemma3_tokenizer_matches_llama_cpp() {
    let Some(path) = common::gemma3_270m() else {
        return;
    };
    let tok = GgufTokenizer::from_path(&path).expect("tokenizer loads");
    assert_eq!(tok.kind(), VocabKind::Spm);
    let (ok, total) = compare_with_llama_cpp(&tok, "gemma3-270m");
    assert_eq!(ok, total, "token ids differ from llama.cpp (see stderr)");
    assert_round_trip(&tok);
}

#[test]
fn smollm2_chat_template_renders_special_tokens_as_single_ids() {
    let Some(path) = common::smollm2() else {
        return;
    };
    let tok = GgufTokenizer::from_path(&path).expect("tokenizer loads");
    let t = tok.chat_template().expect("template compiles");
    assert!(!t.is_fallback());
    let msgs = [ChatMessage::new(Role::User, "What is 2+2?")];
    let text = tok.render_chat(&msgs, true).expect("renders");
    assert_eq!(
        text,
        "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n\
         <|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n"
    );
    let ids = tok.encode(&text, true).expect("encodes");
    assert_eq!(tok.encode_chat(&msgs, true).expect("encodes"), ids);
    let start = tok.token_to_id("<|im_start|>").expect("in vocab");
    let end = tok.token_to_id("<|im_end|>").expect("in vocab");
    assert_eq!((start, end), (1, 2));
    assert_eq!(ids.iter().filter(|&&i| i == start).count(), 3);
    assert_eq!(ids.iter().filter(|&&i| i == end).count(), 2);
    assert_eq!(ids[0], start);
    assert!(tok.is_eog(end));
    assert_eq!(tok.decode(&ids, false).expect("decodes"), text);
    assert_prefix_stable(&tok, &conversation(true));
    assert_prefix_stable(&tok, &conversation(false));
}

#[test]
fn qwen_coder_chat_template_is_prefix_stable() {
    let Some(path) = common::qwen_coder() else {
        return;
    };
    let tok = GgufTokenizer::from_path(&path).expect("tokenizer loads");
    let msgs = [ChatMessage::new(Role::User, "hi")];
    let text = tok.render_chat(&msgs, true).expect("renders");
    assert!(
        text.starts_with("<|im_start|>system\nYou are Qwen"),
        "{text}"
    );
    assert!(
        text.ends_with("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"),
        "{text}"
    );
    let tools = serde_json::json!([{"type": "function", "function": {"name": "read_file", "parameters": {}}}]);
    let with_tools = tok
        .chat_template()
        .expect("template compiles")
        .render_with_tools(&msgs, true, Some(&tools))
        .expect("renders");
    assert!(
        with_tools.contains("<tools>\n{") && with_tools.contains("read_file"),
        "{with_tools}"
    );
    assert_prefix_stable(&tok, &conversation(true));
    assert_prefix_stable(&tok, &conversation(false));
}

/// Any GGUF against any ids file from scripts/tokenizer-reference.py, when both are given:
/// `BOYD_TOKENIZER_GGUF=model.gguf BOYD_TOKENIZER_IDS=ids.json cargo test --test it tokenizer`.
#[test]
fn gguf_from_env_matches_its_reference_ids() {
    let (Some(gguf), Some(ids)) = (
        std::env::var_os("BOYD_TOKENIZER_GGUF"),
        std::env::var_os("BOYD_TOKENIZER_IDS"),
    ) else {
        return;
    };
    let tok = GgufTokenizer::from_path(Path::new(&gguf)).expect("tokenizer loads");
    let cases = reference(Path::new(&ids));
    let (ok, total) = compare_cases(&tok, &Path::new(&gguf).display().to_string(), &cases);
    assert_eq!(
        ok, total,
        "token ids differ from the reference (see stderr)"
    );
}
