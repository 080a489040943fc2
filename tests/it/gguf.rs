//! Hostile GGUF files (issue 8): every malformed header is a specific typed error, never a panic,
//! and memory stays bounded while it is refused (the counting allocator in `alloc.rs` proves it).
//! Also the fit check that runs before any tensor is allocated. Saved fuzz inputs are replayed
//! in `fuzz_corpus.rs`.

use std::collections::BTreeMap;
use std::io::Cursor;
use std::path::Path;

use boyd::runtime::decoder::{Decoder, DecoderError};
use boyd::runtime::fit::{self, Fit, FitError};
use boyd::runtime::gguf::{
    Array, GgufError, GgufFile, GgufHeader, GgufWriter, HeaderLimits, Value,
};
use boyd::runtime::local::{LoadError, LoadOptions, LocalModel};
use boyd::runtime::synth::{self, SynthSpec};
use boyd::runtime::tokenizer::{GgufTokenizer, TokenizerError};
use boyd::sizing::{
    self, ArchError, ArchParams, Architecture, Backend, GgmlType, Hardware, Input, KvDtype, Quant,
    Weights, DEFAULT_UBATCH,
};
use boyd::units::{Bytes, BytesPerSec};
use candle_core::Device;

use crate::alloc::measure;

// ---------------------------------------------------------------------------------------------
// building files

/// Raw header start: magic, version, tensor count, KV count.
fn raw(version: u32, n_tensors: u64, n_kv: u64) -> Vec<u8> {
    let mut v = b"GGUF".to_vec();
    v.extend_from_slice(&version.to_le_bytes());
    v.extend_from_slice(&n_tensors.to_le_bytes());
    v.extend_from_slice(&n_kv.to_le_bytes());
    v
}

fn put_u32(v: &mut Vec<u8>, x: u32) {
    v.extend_from_slice(&x.to_le_bytes());
}

fn put_u64(v: &mut Vec<u8>, x: u64) {
    v.extend_from_slice(&x.to_le_bytes());
}

/// A GGUF string: u64 length then bytes (which need not be UTF-8).
fn put_str(v: &mut Vec<u8>, s: &[u8]) {
    put_u64(v, s.len() as u64);
    v.extend_from_slice(s);
}

/// A raw file with one metadata key of type `ty` and the given payload.
fn one_kv(key: &[u8], ty: u32, payload: &[u8]) -> Vec<u8> {
    let mut v = raw(3, 0, 1);
    put_str(&mut v, key);
    put_u32(&mut v, ty);
    v.extend_from_slice(payload);
    v
}

/// A raw tensor-info entry.
fn put_tensor(v: &mut Vec<u8>, name: &[u8], dims: &[u64], ty: u32, offset: u64) {
    put_str(v, name);
    put_u32(v, dims.len() as u32);
    for d in dims {
        put_u64(v, *d);
    }
    put_u32(v, ty);
    put_u64(v, offset);
}

/// Replace the first occurrence of `from` with `to` (same length).
fn patch(mut bytes: Vec<u8>, from: &[u8], to: &[u8]) -> Vec<u8> {
    assert_eq!(from.len(), to.len());
    let at = bytes
        .windows(from.len())
        .position(|w| w == from)
        .expect("pattern present");
    bytes[at..at + to.len()].copy_from_slice(to);
    bytes
}

/// A writer with one F32 tensor of `n` elements.
fn with_f32(name: &str, n: u64) -> GgufWriter {
    let mut w = GgufWriter::new();
    w.tensor(name, GgmlType::F32, &[n], &vec![0u8; n as usize * 4]);
    w
}

/// A model as editable parts: metadata and (name, type, dims, bytes) tensors.
#[derive(Clone)]
struct Model {
    kv: BTreeMap<String, Value>,
    tensors: Vec<(String, GgmlType, Vec<u64>, Vec<u8>)>,
}

impl Model {
    fn synth(spec: &SynthSpec) -> Self {
        let bytes = synth::build(spec).expect("synth");
        let h = GgufHeader::read(
            Cursor::new(&bytes),
            bytes.len() as u64,
            HeaderLimits::default(),
        )
        .expect("synth header");
        let tensors = h
            .tensors
            .iter()
            .map(|t| {
                let s = (h.data_start + t.offset) as usize;
                let data = bytes[s..s + t.bytes as usize].to_vec();
                (t.name.clone(), t.ggml_type, t.dims.clone(), data)
            })
            .collect();
        Self {
            kv: h.metadata,
            tensors,
        }
    }

    fn tiny() -> Self {
        Self::synth(&SynthSpec::tiny(Architecture::Llama))
    }

    fn set(mut self, key: &str, v: Value) -> Self {
        self.kv.insert(key.to_string(), v);
        self
    }

    fn without_key(mut self, key: &str) -> Self {
        self.kv.remove(key);
        self
    }

    fn without_tensor(mut self, name: &str) -> Self {
        self.tensors.retain(|t| t.0 != name);
        self
    }

    /// Add an f32 tensor of zeros with `dims` (innermost first).
    fn with_tensor(mut self, name: &str, dims: &[u64]) -> Self {
        let n: u64 = dims.iter().product();
        self.tensors.push((
            name.to_string(),
            GgmlType::F32,
            dims.to_vec(),
            vec![0u8; n as usize * 4],
        ));
        self
    }

    fn bytes(&self) -> Vec<u8> {
        let mut w = GgufWriter::new();
        for (k, v) in &self.kv {
            w.kv(k, v.clone());
        }
        for (name, ty, dims, data) in &self.tensors {
            w.tensor(name, *ty, dims, data);
        }
        w.to_bytes()
    }
}

// ---------------------------------------------------------------------------------------------
// running a case

/// Where a case is expected to fail.
#[derive(Debug, Clone, Copy)]
enum Stage {
    /// `GgufHeader::read` then `check_data` over the bytes.
    Header,
    /// The header reads; `GgufTokenizer::from_header` refuses.
    Tokenizer,
    /// The file opens; `Decoder::load` refuses.
    Decoder,
}

#[derive(Debug)]
enum Failure {
    Gguf(GgufError),
    Tokenizer(TokenizerError),
    Decoder(DecoderError),
}

type Want = fn(&Failure) -> bool;

struct Case {
    name: &'static str,
    bytes: Vec<u8>,
    stage: Stage,
    want: Want,
}

fn case(name: &'static str, bytes: Vec<u8>, want: Want) -> Case {
    Case {
        name,
        bytes,
        stage: Stage::Header,
        want,
    }
}

fn read_header(bytes: &[u8]) -> Result<GgufHeader, GgufError> {
    let h = GgufHeader::read(
        Cursor::new(bytes),
        bytes.len() as u64,
        HeaderLimits::default(),
    )?;
    h.check_data(bytes.len() as u64)?;
    Ok(h)
}

fn run(c: &Case, dir: &Path) -> Result<(), Failure> {
    match c.stage {
        Stage::Header => read_header(&c.bytes).map(drop).map_err(Failure::Gguf),
        Stage::Tokenizer => {
            let h = read_header(&c.bytes).map_err(Failure::Gguf)?;
            GgufTokenizer::from_header(&h)
                .map(drop)
                .map_err(Failure::Tokenizer)
        }
        Stage::Decoder => {
            let path = dir.join(format!("{}.gguf", c.name.replace(' ', "_")));
            std::fs::write(&path, &c.bytes).expect("write case");
            let mut f = GgufFile::open(&path).map_err(Failure::Gguf)?;
            Decoder::load(&mut f, &Device::Cpu)
                .map(drop)
                .map_err(Failure::Decoder)
        }
    }
}

fn gguf(f: &Failure) -> Option<&GgufError> {
    match f {
        Failure::Gguf(e) | Failure::Decoder(DecoderError::Gguf(e)) => Some(e),
        _ => None,
    }
}

fn tok(f: &Failure) -> Option<&TokenizerError> {
    match f {
        Failure::Tokenizer(e) => Some(e),
        _ => None,
    }
}

/// Most bytes any malformed case may have live at once.
const CASE_PEAK_LIMIT: u64 = 4 << 20;

// ---------------------------------------------------------------------------------------------
// the table

fn header_cases() -> Vec<Case> {
    use GgufError as E;
    let mut cases = vec![
        case(
            "bad magic",
            b"GGUX\x03\0\0\0".to_vec(),
            |f| matches!(gguf(f), Some(E::BadMagic { found }) if found == b"GGUX"),
        ),
        case("ggml magic", b"lmgg\x01\0\0\0".to_vec(), |f| {
            matches!(gguf(f), Some(E::BadMagic { .. }))
        }),
        case("version 1", raw(1, 0, 0), |f| {
            matches!(gguf(f), Some(E::UnsupportedVersion(1)))
        }),
        case("version 4", raw(4, 0, 0), |f| {
            matches!(gguf(f), Some(E::UnsupportedVersion(4)))
        }),
        case("version u32 max", raw(u32::MAX, 0, 0), |f| {
            matches!(gguf(f), Some(E::UnsupportedVersion(u32::MAX)))
        }),
        case(
            "empty file",
            Vec::new(),
            |f| matches!(gguf(f), Some(E::Truncated { what, offset: 0 }) if what == "magic"),
        ),
        case(
            "truncated in version",
            b"GGUF\x03\0".to_vec(),
            |f| matches!(gguf(f), Some(E::Truncated { what, offset: 4 }) if what == "version"),
        ),
        case(
            "truncated in tensor count",
            raw(3, 0, 0)[..12].to_vec(),
            |f| matches!(gguf(f), Some(E::Truncated { what, .. }) if what == "tensor count"),
        ),
        case(
            "truncated in kv count",
            raw(3, 0, 0)[..20].to_vec(),
            |f| matches!(gguf(f), Some(E::Truncated { what, .. }) if what == "metadata count"),
        ),
        case(
            "truncated in key",
            {
                let mut v = raw(3, 0, 1);
                put_u64(&mut v, 40);
                v.extend_from_slice(b"general.");
                v
            },
            |f| matches!(gguf(f), Some(E::Truncated { what, offset: 24 }) if what == "metadata key"),
        ),
        case(
            "truncated in string value",
            {
                let mut p = Vec::new();
                put_u64(&mut p, 100);
                p.extend_from_slice(b"only a few bytes");
                one_kv(b"general.name", 8, &p)
            },
            |f| matches!(gguf(f), Some(E::Truncated { what, .. }) if what == "general.name"),
        ),
        case(
            "truncated in u64 value",
            one_kv(b"general.count", 10, &[1, 2, 3]),
            |f| matches!(gguf(f), Some(E::Truncated { what, .. }) if what == "general.count"),
        ),
        case(
            "truncated in tensor info",
            {
                let mut v = raw(3, 1, 0);
                put_tensor(&mut v, b"tensor_name", &[32], 0, 0);
                v.truncate(v.len() - 3);
                v
            },
            |f| matches!(gguf(f), Some(E::Truncated { what, .. }) if what == "tensor offset"),
        ),
        case(
            "truncated tensor data",
            {
                let mut b = with_f32("t", 64).to_bytes();
                b.pop();
                b
            },
            |f| matches!(gguf(f), Some(E::OutOfBounds { name, .. }) if name == "t"),
        ),
        case(
            "absurd tensor count",
            raw(3, 1 << 63, 0),
            |f| matches!(gguf(f), Some(E::TooMany { what: "tensor", count, .. }) if *count == 1 << 63),
        ),
        case("absurd kv count", raw(3, 0, u64::MAX), |f| {
            matches!(
                gguf(f),
                Some(E::TooMany {
                    what: "metadata",
                    count: u64::MAX,
                    ..
                })
            )
        }),
        case(
            "kv count beyond the remaining bytes",
            {
                let mut v = raw(3, 0, 1000);
                v.extend_from_slice(&[0; 100]);
                v
            },
            |f| {
                matches!(
                    gguf(f),
                    Some(E::TooMany {
                        what: "metadata",
                        count: 1000,
                        limit: 7
                    })
                )
            },
        ),
        case(
            "tensor count beyond the remaining bytes",
            {
                let mut v = raw(3, 10, 0);
                v.extend_from_slice(&[0; 100]);
                v
            },
            |f| {
                matches!(
                    gguf(f),
                    Some(E::TooMany {
                        what: "tensor",
                        count: 10,
                        limit: 3
                    })
                )
            },
        ),
        case(
            "2^40-byte key",
            {
                let mut v = raw(3, 0, 1);
                put_u64(&mut v, 1 << 40);
                v.extend_from_slice(&[b'a'; 32]);
                v
            },
            |f| matches!(gguf(f), Some(E::TooMany { what: "string length", count, .. }) if *count == 1 << 40),
        ),
        case(
            "2^40-byte string value",
            {
                let mut p = Vec::new();
                put_u64(&mut p, 1 << 40);
                p.extend_from_slice(&[b'a'; 32]);
                one_kv(b"general.name", 8, &p)
            },
            |f| {
                matches!(
                    gguf(f),
                    Some(E::TooMany {
                        what: "string length",
                        ..
                    })
                )
            },
        ),
        case(
            "2^60-element u8 array",
            {
                let mut p = Vec::new();
                put_u32(&mut p, 0);
                put_u64(&mut p, 1 << 60);
                p.extend_from_slice(&[0; 64]);
                one_kv(b"tokenizer.ggml.token_type", 9, &p)
            },
            |f| matches!(gguf(f), Some(E::TooMany { what: "array element", count, .. }) if *count == 1 << 60),
        ),
        case(
            "2^40-element string array",
            {
                let mut p = Vec::new();
                put_u32(&mut p, 8);
                put_u64(&mut p, 1 << 40);
                p.extend_from_slice(&[0; 64]);
                one_kv(b"tokenizer.ggml.tokens", 9, &p)
            },
            |f| {
                matches!(
                    gguf(f),
                    Some(E::TooMany {
                        what: "array element",
                        ..
                    })
                )
            },
        ),
        case(
            "string array element of 2^40 bytes",
            {
                let mut p = Vec::new();
                put_u32(&mut p, 8);
                put_u64(&mut p, 2);
                put_str(&mut p, b"ok");
                put_u64(&mut p, 1 << 40);
                p.extend_from_slice(&[0; 16]);
                one_kv(b"tokenizer.ggml.tokens", 9, &p)
            },
            |f| {
                matches!(
                    gguf(f),
                    Some(E::TooMany {
                        what: "string length",
                        ..
                    })
                )
            },
        ),
        case(
            "nesting too deep",
            GgufWriter::new()
                .kv(
                    "x",
                    Value::Array(Array::Array(vec![Array::Array(vec![Array::U8(vec![1])])])),
                )
                .to_bytes(),
            |f| matches!(gguf(f), Some(E::TooDeep { key, limit: 2 }) if key == "x"),
        ),
        case(
            "bad value type",
            one_kv(b"k", 13, &[0; 16]),
            |f| matches!(gguf(f), Some(E::BadValueType { key, ty: 13 }) if key == "k"),
        ),
        case(
            "value type u32 max",
            one_kv(b"k", u32::MAX, &[0; 16]),
            |f| matches!(gguf(f), Some(E::BadValueType { ty: u32::MAX, .. })),
        ),
        case(
            "bad array element type",
            {
                let mut p = Vec::new();
                put_u32(&mut p, 99);
                put_u64(&mut p, 1);
                p.extend_from_slice(&[0; 16]);
                one_kv(b"arr", 9, &p)
            },
            |f| matches!(gguf(f), Some(E::BadValueType { ty: 99, .. })),
        ),
        case(
            "alignment 0",
            with_f32("t", 8)
                .kv("general.alignment", Value::U32(0))
                .to_bytes(),
            |f| matches!(gguf(f), Some(E::BadAlignment(0))),
        ),
        case(
            "alignment not a power of two",
            with_f32("t", 8)
                .kv("general.alignment", Value::U32(48))
                .to_bytes(),
            |f| matches!(gguf(f), Some(E::BadAlignment(48))),
        ),
        case(
            "alignment of the wrong type",
            with_f32("t", 8)
                .kv("general.alignment", Value::String("32".into()))
                .to_bytes(),
            |f| matches!(gguf(f), Some(E::WrongType { key, .. }) if key == "general.alignment"),
        ),
        case(
            "negative alignment",
            with_f32("t", 8)
                .kv("general.alignment", Value::I32(-32))
                .to_bytes(),
            |f| matches!(gguf(f), Some(E::WrongType { key, .. }) if key == "general.alignment"),
        ),
        case(
            "dimension product overflows",
            GgufWriter::new()
                .raw_tensor("t", &[1 << 40, 1 << 40], 0, 0)
                .to_bytes(),
            |f| matches!(gguf(f), Some(E::SizeOverflow { name, .. }) if name == "t"),
        ),
        case(
            "byte size overflows",
            GgufWriter::new()
                .raw_tensor("t", &[1 << 40, 1 << 22], 0, 0)
                .to_bytes(),
            |f| matches!(gguf(f), Some(E::SizeOverflow { .. })),
        ),
        case(
            "offset plus size overflows",
            GgufWriter::new()
                .raw_tensor("t", &[8], 0, u64::MAX - 31)
                .to_bytes(),
            |f| matches!(gguf(f), Some(E::SizeOverflow { .. })),
        ),
        case(
            "zero dimension",
            GgufWriter::new()
                .raw_tensor("t", &[4096, 0], 0, 0)
                .to_bytes(),
            |f| matches!(gguf(f), Some(E::BadDim { dim: 0, .. })),
        ),
        case(
            "negative dimension",
            GgufWriter::new()
                .raw_tensor("t", &[(-1i64) as u64], 0, 0)
                .to_bytes(),
            |f| matches!(gguf(f), Some(E::BadDim { dim: u64::MAX, .. })),
        ),
        case(
            "too many dimensions",
            GgufWriter::new()
                .raw_tensor("t", &[2, 2, 2, 2, 2], 0, 0)
                .to_bytes(),
            |f| {
                matches!(
                    gguf(f),
                    Some(E::BadDimCount {
                        n_dims: 5,
                        limit: 4,
                        ..
                    })
                )
            },
        ),
        case(
            "zero dimensions",
            GgufWriter::new().raw_tensor("t", &[], 0, 0).to_bytes(),
            |f| matches!(gguf(f), Some(E::BadDimCount { n_dims: 0, .. })),
        ),
        case(
            "dimension count u32 max",
            {
                let mut v = raw(3, 1, 0);
                put_str(&mut v, b"t");
                put_u32(&mut v, u32::MAX);
                v.extend_from_slice(&[0; 64]);
                v
            },
            |f| {
                matches!(
                    gguf(f),
                    Some(E::BadDimCount {
                        n_dims: u32::MAX,
                        ..
                    })
                )
            },
        ),
        case(
            "unknown ggml type",
            GgufWriter::new().raw_tensor("t", &[32], 4, 0).to_bytes(),
            |f| matches!(gguf(f), Some(E::UnknownType { ty: 4, .. })),
        ),
        case(
            "ggml type u32 max",
            GgufWriter::new()
                .raw_tensor("t", &[32], u32::MAX, 0)
                .to_bytes(),
            |f| matches!(gguf(f), Some(E::UnknownType { ty: u32::MAX, .. })),
        ),
        case(
            "elements not a block multiple",
            GgufWriter::new()
                .raw_tensor("t", &[33], GgmlType::Q8_0.id(), 0)
                .to_bytes(),
            |f| {
                matches!(
                    gguf(f),
                    Some(E::NotBlockMultiple {
                        elems: 33,
                        ty: "Q8_0",
                        ..
                    })
                )
            },
        ),
        case(
            "row not a block multiple",
            GgufWriter::new()
                .raw_tensor("t", &[16, 2], GgmlType::Q8_0.id(), 0)
                .to_bytes(),
            |f| {
                matches!(
                    gguf(f),
                    Some(E::RowNotBlockMultiple {
                        row: 16,
                        ty: "Q8_0",
                        ..
                    })
                )
            },
        ),
        case(
            "unaligned offset",
            GgufWriter::new()
                .raw_tensor("t", &[8], 0, 4)
                .raw_data(&[0; 64])
                .to_bytes(),
            |f| {
                matches!(
                    gguf(f),
                    Some(E::Unaligned {
                        offset: 4,
                        alignment: 32,
                        ..
                    })
                )
            },
        ),
        case(
            "offset past the end",
            GgufWriter::new()
                .raw_tensor("t", &[8], 0, 1 << 20)
                .raw_data(&[0; 64])
                .to_bytes(),
            |f| matches!(gguf(f), Some(E::OutOfBounds { name, .. }) if name == "t"),
        ),
        case(
            "overlapping tensors",
            GgufWriter::new()
                .raw_tensor("a", &[16], 0, 0)
                .raw_tensor("b", &[16], 0, 32)
                .raw_data(&[0; 128])
                .to_bytes(),
            |f| matches!(gguf(f), Some(E::Overlap { first, second }) if first == "a" && second == "b"),
        ),
        case(
            "two tensors at one offset",
            GgufWriter::new()
                .raw_tensor("a", &[8], 0, 0)
                .raw_tensor("b", &[8], 0, 0)
                .raw_data(&[0; 64])
                .to_bytes(),
            |f| matches!(gguf(f), Some(E::Overlap { .. })),
        ),
        case(
            "duplicate key",
            GgufWriter::new()
                .kv("general.name", Value::String("a".into()))
                .kv("general.name", Value::String("b".into()))
                .to_bytes(),
            |f| matches!(gguf(f), Some(E::DuplicateKey(k)) if k == "general.name"),
        ),
        case(
            "duplicate tensor name",
            GgufWriter::new()
                .raw_tensor("w", &[8], 0, 0)
                .raw_tensor("w", &[8], 0, 32)
                .raw_data(&[0; 64])
                .to_bytes(),
            |f| matches!(gguf(f), Some(E::DuplicateTensor(n)) if n == "w"),
        ),
        case(
            "invalid utf-8 key",
            one_kv(b"gen\xffral", 4, &[1, 0, 0, 0]),
            |f| matches!(gguf(f), Some(E::InvalidUtf8 { offset: 24 })),
        ),
        case(
            "invalid utf-8 string value",
            {
                let mut p = Vec::new();
                put_str(&mut p, b"\xc3\x28");
                one_kv(b"general.name", 8, &p)
            },
            |f| matches!(gguf(f), Some(E::InvalidUtf8 { .. })),
        ),
        case(
            "invalid utf-8 in a string array",
            patch(
                GgufWriter::new()
                    .kv(
                        "tokenizer.ggml.tokens",
                        Value::Array(Array::String(vec!["a".into(), "zz".into()])),
                    )
                    .to_bytes(),
                b"zz",
                b"\xed\xa0",
            ),
            |f| matches!(gguf(f), Some(E::InvalidUtf8 { .. })),
        ),
        case(
            "invalid utf-8 tensor name",
            patch(with_f32("tensor", 8).to_bytes(), b"tensor", b"tens\xf0r"),
            |f| matches!(gguf(f), Some(E::InvalidUtf8 { .. })),
        ),
    ];
    // the same checks through a v2 header
    let mut v2 = with_f32("t", 8)
        .kv("general.alignment", Value::U32(0))
        .to_bytes();
    v2[4] = 2;
    cases.push(case("alignment 0 in a v2 file", v2, |f| {
        matches!(gguf(f), Some(E::BadAlignment(0)))
    }));
    cases
}

fn tokenizer_cases() -> Vec<Case> {
    use TokenizerError as T;
    let m = Model::tiny();
    let n = m.kv.get("tokenizer.ggml.tokens").map_or(0, |v| match v {
        Value::Array(a) => a.len(),
        _ => 0,
    });
    let t = |name, model: Model, want| Case {
        name,
        bytes: model.bytes(),
        stage: Stage::Tokenizer,
        want,
    };
    vec![
        t(
            "tokens of the wrong element type",
            m.clone().set(
                "tokenizer.ggml.tokens",
                Value::Array(Array::U32((0..n as u32).collect())),
            ),
            |f| {
                matches!(
                    tok(f),
                    Some(T::WrongType {
                        key: "tokenizer.ggml.tokens",
                        ..
                    })
                )
            },
        ),
        t(
            "tokens not an array",
            m.clone()
                .set("tokenizer.ggml.tokens", Value::String("abc".into())),
            |f| {
                matches!(
                    tok(f),
                    Some(T::WrongType {
                        key: "tokenizer.ggml.tokens",
                        ..
                    })
                )
            },
        ),
        t(
            "tokens missing",
            m.clone().without_key("tokenizer.ggml.tokens"),
            |f| matches!(tok(f), Some(T::MissingKey("tokenizer.ggml.tokens"))),
        ),
        t(
            "empty vocabulary",
            m.clone()
                .set("tokenizer.ggml.tokens", Value::Array(Array::String(vec![]))),
            |f| matches!(tok(f), Some(T::EmptyVocab)),
        ),
        t(
            "token types of the wrong length",
            m.clone().set(
                "tokenizer.ggml.token_type",
                Value::Array(Array::I32(vec![1; 7])),
            ),
            |f| {
                matches!(
                    tok(f),
                    Some(T::LengthMismatch {
                        key: "tokenizer.ggml.token_type",
                        found: 7,
                        ..
                    })
                )
            },
        ),
        t(
            "token types of the wrong element type",
            m.clone().set(
                "tokenizer.ggml.token_type",
                Value::Array(Array::String(vec!["1".into(); n])),
            ),
            |f| {
                matches!(
                    tok(f),
                    Some(T::WrongType {
                        key: "tokenizer.ggml.token_type",
                        ..
                    })
                )
            },
        ),
        t(
            "scores of the wrong length",
            m.clone().set(
                "tokenizer.ggml.scores",
                Value::Array(Array::F32(vec![0.0; 3])),
            ),
            |f| {
                matches!(
                    tok(f),
                    Some(T::LengthMismatch {
                        key: "tokenizer.ggml.scores",
                        found: 3,
                        ..
                    })
                )
            },
        ),
        t(
            "scores of the wrong element type",
            m.clone()
                .set("tokenizer.ggml.scores", Value::Array(Array::U8(vec![0; n]))),
            |f| {
                matches!(
                    tok(f),
                    Some(T::WrongType {
                        key: "tokenizer.ggml.scores",
                        ..
                    })
                )
            },
        ),
        t(
            "merges of the wrong type",
            m.clone().set(
                "tokenizer.ggml.merges",
                Value::Array(Array::I32(vec![1, 2])),
            ),
            |f| {
                matches!(
                    tok(f),
                    Some(T::WrongType {
                        key: "tokenizer.ggml.merges",
                        ..
                    })
                )
            },
        ),
        t(
            "special id outside the vocabulary",
            m.clone()
                .set("tokenizer.ggml.eos_token_id", Value::U32(1_000_000)),
            |f| matches!(tok(f), Some(T::BadSpecialId { id: 1_000_000, .. })),
        ),
        t(
            "duplicate token",
            m.clone().set(
                "tokenizer.ggml.tokens",
                Value::Array(Array::String({
                    let mut v: Vec<String> = (0..n).map(|i| format!("t{i}")).collect();
                    v[5] = "t4".into();
                    v
                })),
            ),
            |f| {
                matches!(
                    tok(f),
                    Some(T::DuplicateToken {
                        first: 4,
                        second: 5,
                        ..
                    })
                )
            },
        ),
    ]
}

fn decoder_cases() -> Vec<Case> {
    use GgufError as E;
    let m = Model::tiny();
    let phi3_spec = SynthSpec::tiny(Architecture::Phi3);
    let phi3 = Model::synth(&phi3_spec);
    let d = |name, model: Model, want| Case {
        name,
        bytes: model.bytes(),
        stage: Stage::Decoder,
        want,
    };
    vec![
        d(
            "zero heads",
            m.clone().set("llama.attention.head_count", Value::U32(0)),
            |f| {
                matches!(
                    gguf(f),
                    Some(E::BadHyperParams(ArchError::Zero { field: "n_heads" }))
                )
            },
        ),
        d(
            "zero kv heads",
            m.clone()
                .set("llama.attention.head_count_kv", Value::U32(0)),
            |f| {
                matches!(
                    gguf(f),
                    Some(E::BadHyperParams(ArchError::Zero {
                        field: "n_kv_heads"
                    }))
                )
            },
        ),
        d(
            "zero layers",
            m.clone().set("llama.block_count", Value::U32(0)),
            |f| {
                matches!(
                    gguf(f),
                    Some(E::BadHyperParams(ArchError::Zero { field: "n_layers" }))
                )
            },
        ),
        d(
            "kv heads not dividing heads",
            m.clone()
                .set("llama.attention.head_count_kv", Value::U32(3)),
            |f| {
                matches!(
                    gguf(f),
                    Some(E::BadHyperParams(ArchError::KvHeadsDoNotDivide {
                        n_heads: 4,
                        n_kv_heads: 3
                    }))
                )
            },
        ),
        d(
            "key and value head dims differ",
            m.clone().set("llama.attention.value_length", Value::U32(8)),
            |f| matches!(gguf(f), Some(E::Inconsistent(msg)) if msg.contains("k=16 v=8")),
        ),
        d(
            "odd head dim",
            m.clone()
                .set("llama.attention.key_length", Value::U32(15))
                .set("llama.attention.value_length", Value::U32(15)),
            |f| matches!(gguf(f), Some(E::Inconsistent(_))),
        ),
        d(
            "head dim disagrees with the q projection",
            m.clone()
                .set("llama.attention.key_length", Value::U32(8))
                .set("llama.attention.value_length", Value::U32(8)),
            |f| {
                matches!(f, Failure::Decoder(DecoderError::Shape { name, expected, found })
                    if name == "blk.0.attn_q.weight" && expected == &[32, 64] && found == &[64, 64])
            },
        ),
        d(
            "no key length and hidden not a multiple of heads",
            m.clone()
                .without_key("llama.attention.key_length")
                .set("llama.attention.head_count", Value::U32(6))
                .set("llama.attention.head_count_kv", Value::U32(6)),
            |f| matches!(gguf(f), Some(E::Inconsistent(msg)) if msg.contains("not a multiple")),
        ),
        d(
            "embedding length disagrees with token_embd",
            m.clone().set("llama.embedding_length", Value::U32(128)),
            |f| matches!(gguf(f), Some(E::Inconsistent(msg)) if msg.contains("token_embd")),
        ),
        d(
            "missing tensor",
            m.clone().without_tensor("blk.1.ffn_down.weight"),
            |f| matches!(gguf(f), Some(E::MissingTensor(n)) if n == "blk.1.ffn_down.weight"),
        ),
        d(
            "wrong tensor shape",
            {
                let mut m = m.clone();
                let t = m
                    .tensors
                    .iter_mut()
                    .find(|t| t.0 == "output_norm.weight")
                    .expect("output_norm");
                t.2 = vec![32];
                t.3.truncate(32 * 4);
                m
            },
            |f| {
                matches!(f, Failure::Decoder(DecoderError::Shape { name, expected, found })
                    if name == "output_norm.weight" && expected == &[64] && found == &[32])
            },
        ),
        d(
            "vocab size disagrees with token_embd",
            m.clone().set("llama.vocab_size", Value::U32(100)),
            |f| matches!(f, Failure::Decoder(DecoderError::Shape { name, .. }) if name == "token_embd.weight"),
        ),
        d(
            "absurd block count",
            m.clone().set("llama.block_count", Value::U32(u32::MAX)),
            |f| matches!(gguf(f), Some(E::MissingTensor(n)) if n.starts_with("blk.2.")),
        ),
        d(
            "head count wrong type",
            m.clone()
                .set("llama.attention.head_count", Value::String("4".into())),
            |f| matches!(gguf(f), Some(E::WrongType { key, .. }) if key == "llama.attention.head_count"),
        ),
        d(
            "negative head count",
            m.clone().set("llama.attention.head_count", Value::I32(-4)),
            |f| matches!(gguf(f), Some(E::WrongType { key, .. }) if key == "llama.attention.head_count"),
        ),
        d(
            "missing block count",
            m.clone().without_key("llama.block_count"),
            |f| matches!(gguf(f), Some(E::MissingKey(k)) if k == "llama.block_count"),
        ),
        d(
            "unknown architecture",
            m.clone()
                .set("general.architecture", Value::String("mamba".into())),
            |f| matches!(gguf(f), Some(E::UnknownArchitecture(a)) if a == "mamba"),
        ),
        d(
            "a llama file labelled gemma3 (no post-norms, no q and k norms)",
            {
                let mut m = m
                    .clone()
                    .set("general.architecture", Value::String("gemma3".into()));
                let keys: Vec<String> =
                    m.kv.keys()
                        .filter(|k| k.starts_with("llama."))
                        .cloned()
                        .collect();
                for k in keys {
                    let v = m.kv.remove(&k).expect("key");
                    m.kv.insert(k.replacen("llama.", "gemma3.", 1), v);
                }
                m
            },
            |f| matches!(gguf(f), Some(E::MissingTensor(t)) if t.starts_with("blk.0.")),
        ),
        d(
            "phi3 without its fused qkv matrix",
            phi3.clone().without_tensor("blk.1.attn_qkv.weight"),
            |f| matches!(gguf(f), Some(E::MissingTensor(t)) if t == "blk.1.attn_qkv.weight"),
        ),
        d(
            "phi3 with separate gate and up of the fused size",
            phi3.clone()
                .without_tensor("blk.0.ffn_up.weight")
                .with_tensor(
                    "blk.0.ffn_up.weight",
                    &[phi3_spec.hidden as u64, phi3_spec.ffn as u64],
                ),
            |f| {
                matches!(f, Failure::Decoder(DecoderError::Shape { name, expected, .. })
                    // Gate and up of the tiny model's 128 rows each.
                    if name == "blk.0.ffn_up.weight" && expected[0] == 256)
            },
        ),
        d(
            "phi3 LongRoPE factors",
            phi3.clone()
                .with_tensor("rope_factors_long.weight", &[phi3_spec.head_dim as u64 / 2]),
            |f| {
                matches!(f, Failure::Decoder(e @ DecoderError::Unsupported { .. })
                    if e.to_string().contains("LongRoPE") && e.to_string().contains("4k"))
            },
        ),
        d(
            "phi3 partial rotary",
            phi3.clone().set(
                "phi3.rope.dimension_count",
                Value::U32(phi3_spec.head_dim / 2),
            ),
            |f| {
                matches!(f, Failure::Decoder(e @ DecoderError::Unsupported { .. })
                    if e.to_string().contains("rope.dimension_count"))
            },
        ),
        d(
            "non-finite rms epsilon",
            m.clone().set(
                "llama.attention.layer_norm_rms_epsilon",
                Value::F32(f32::NAN),
            ),
            |f| matches!(gguf(f), Some(E::WrongType { key, .. }) if key.ends_with("layer_norm_rms_epsilon")),
        ),
    ]
}

#[test]
fn malformed_gguf_table() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cases = header_cases();
    cases.extend(tokenizer_cases());
    cases.extend(decoder_cases());
    let mut failed = Vec::new();
    for c in &cases {
        let (res, stats) = measure(|| run(c, dir.path()));
        match res {
            Ok(()) => failed.push(format!("{}: accepted", c.name)),
            Err(e) if !(c.want)(&e) => failed.push(format!("{}: wrong error {e:?}", c.name)),
            Err(e) => {
                // Every refusal has a message that names the problem.
                let msg = match &e {
                    Failure::Gguf(e) => e.to_string(),
                    Failure::Tokenizer(e) => e.to_string(),
                    Failure::Decoder(e) => e.to_string(),
                };
                if msg.len() < 10 {
                    failed.push(format!("{}: terse message {msg:?}", c.name));
                }
                let limit = match c.stage {
                    Stage::Header => CASE_PEAK_LIMIT,
                    // a tiny model's tensors are read before the bad one is found
                    _ => 4 * CASE_PEAK_LIMIT,
                };
                if stats.peak > limit {
                    failed.push(format!("{}: peak {} bytes", c.name, stats.peak));
                }
            }
        }
    }
    assert!(
        failed.is_empty(),
        "{} cases failed:\n{}",
        failed.len(),
        failed.join("\n")
    );
    assert!(cases.len() >= 60, "{} cases", cases.len());
}

/// The unmodified synthetic model passes every stage, so each case fails for its own reason.
#[test]
fn control_model_loads() {
    let dir = tempfile::tempdir().expect("tempdir");
    for stage in [Stage::Header, Stage::Tokenizer, Stage::Decoder] {
        let c = Case {
            name: "control",
            bytes: Model::tiny().bytes(),
            stage,
            want: |_| false,
        };
        if let Err(e) = run(&c, dir.path()) {
            panic!("{stage:?}: {e:?}");
        }
    }
}

// ---------------------------------------------------------------------------------------------
// bounded memory

#[test]
fn huge_claims_allocate_almost_nothing() {
    let claims: Vec<(&str, Vec<u8>)> = vec![
        ("2^40-byte key", {
            let mut v = raw(3, 0, 1);
            put_u64(&mut v, 1 << 40);
            v.extend_from_slice(&[b'a'; 64]);
            v
        }),
        ("2^60 u64 elements", {
            let mut p = Vec::new();
            put_u32(&mut p, 10);
            put_u64(&mut p, 1 << 60);
            p.extend_from_slice(&[0; 64]);
            one_kv(b"a", 9, &p)
        }),
        ("2^60 nested arrays", {
            let mut p = Vec::new();
            put_u32(&mut p, 9);
            put_u64(&mut p, 1 << 60);
            p.extend_from_slice(&[0; 64]);
            one_kv(b"a", 9, &p)
        }),
        ("2^63 tensors", raw(3, 1 << 63, 0)),
        ("2^64-1 kv", raw(3, 0, u64::MAX)),
        ("u32::MAX dims", {
            let mut v = raw(3, 1, 0);
            put_str(&mut v, b"t");
            put_u32(&mut v, u32::MAX);
            v.extend_from_slice(&[0; 64]);
            v
        }),
    ];
    for (name, bytes) in claims {
        let (res, s) = measure(|| {
            GgufHeader::read(
                Cursor::new(&bytes),
                bytes.len() as u64,
                HeaderLimits::default(),
            )
        });
        assert!(res.is_err(), "{name}");
        assert!(s.peak < 4096 && s.largest < 4096, "{name}: {s:?}");
    }
}

/// A large real-looking file whose header claims a 16M-element string array: reservations are
/// capped, so memory follows the bytes actually read, not the claim.
#[test]
fn array_claim_within_a_big_file_reserves_little() {
    let mut p = Vec::new();
    put_u32(&mut p, 8);
    put_u64(&mut p, 1 << 24);
    // 1 MiB of zeros: empty strings, then the file ends mid-array.
    p.extend_from_slice(&vec![0u8; 1 << 20]);
    let bytes = one_kv(b"tokenizer.ggml.tokens", 9, &p);
    // Claim the file is 1 GiB so the count check alone does not refuse it.
    let (res, s) =
        measure(|| GgufHeader::read(Cursor::new(&bytes), 1 << 30, HeaderLimits::default()));
    assert!(matches!(res, Err(GgufError::Truncated { .. })), "{res:?}");
    // 131072 empty Strings are 3 MiB; a 2^24 reservation would be 384 MiB.
    assert!(s.largest <= 8 << 20, "{s:?}");
}

#[test]
fn every_truncation_of_a_model_is_a_typed_error() {
    let bytes = Model::tiny().bytes();
    let full = read_header(&bytes).expect("full file");
    let end = full.data_start as usize + 64;
    for cut in 0..end {
        let prefix = &bytes[..cut];
        match read_header(prefix) {
            Ok(_) => panic!("prefix of {cut} bytes accepted"),
            Err(
                GgufError::Truncated { .. }
                | GgufError::TooMany { .. }
                | GgufError::OutOfBounds { .. },
            ) => {}
            Err(e) => panic!("prefix of {cut} bytes: unexpected {e:?}"),
        }
    }
}

/// A header claiming a 4-billion-token training context costs nothing when loaded for a small
/// session context: the RoPE tables follow the session (regression: they followed the claim).
#[test]
fn huge_training_context_loads_with_bounded_memory() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("ctx.gguf");
    let m = Model::tiny().set("llama.context_length", Value::U32(u32::MAX));
    std::fs::write(&path, m.bytes()).expect("write");
    let opts = LoadOptions {
        force: true,
        hardware: Some(hw("big", 64 * Bytes::GIB)),
        ..LoadOptions::default()
    };
    let (res, s) = measure(|| LocalModel::load_with(&path, &Device::Cpu, 64, &opts));
    let model = res.expect("loads");
    assert_eq!(model.session().context_length(), 64);
    assert!(s.peak < 64 << 20, "{s:?}");
}

// ---------------------------------------------------------------------------------------------
// fit check

fn hw(name: &str, memory: u64) -> Hardware {
    Hardware::new(
        name,
        "test device",
        Backend::Cpu,
        Bytes(memory),
        1.0,
        BytesPerSec(50e9),
        1e12,
        "test",
    )
    .expect("hardware")
}

/// Llama-3-8B's shape.
fn llama3_8b() -> ArchParams {
    ArchParams {
        architecture: Architecture::Llama,
        n_layers: 32,
        n_heads: 32,
        n_kv_heads: 8,
        head_dim: 128,
        head_dim_v: 128,
        hidden: 4096,
        ffn: 14_336,
        vocab: 128_256,
        rope_base: 500_000.0,
        rope_scaling: None,
        norm_eps: 1e-5,
        context_length: 131_072,
        sliding_window: None,
        tied_embeddings: false,
    }
}

fn estimate_8b(quant: &str, ctx: u32, hw: &Hardware) -> sizing::Estimate {
    let input = Input {
        arch: llama3_8b(),
        weights: Weights::Params {
            params: 8_030_261_248,
            quant: Quant::parse(quant).expect("quant"),
        },
        ctx,
        kv_dtype: KvDtype::F16,
        ubatch: DEFAULT_UBATCH,
    };
    sizing::estimate(&input, hw).expect("estimate")
}

#[test]
fn fit_decision_fits_refuses_and_forces() {
    // Q4_K_M 8B at 8k: about 5.5 GB in all — fits in 16 GiB.
    let big = hw("16g", 16 * Bytes::GIB);
    let e = estimate_8b("Q4_K_M", 8192, &big);
    match fit::decide(&e, false) {
        Ok(Fit::Fits { headroom }) => assert_eq!(headroom.0, big.free.0 - e.memory.total.0),
        other => panic!("{other:?}"),
    }

    // The full 128k context does not fit in 16 GiB (16 GiB of KV alone): suggest a smaller one.
    let e = estimate_8b("Q4_K_M", 131_072, &big);
    let Err(FitError::WontFit(w)) = fit::decide(&e, false) else {
        panic!("should not fit");
    };
    assert_eq!(w.need, e.memory.total);
    assert_eq!(w.shortfall.0, e.memory.total.0 - big.free.0);
    let c = w.max_ctx.expect("a smaller context fits");
    assert!(c < 131_072 && c > 8192, "{c}");
    let msg = w.to_string();
    for part in [
        "short",
        &format!("--ctx {c}"),
        "--force",
        &w.shortfall.to_string(),
    ] {
        assert!(msg.contains(part), "{msg:?} lacks {part:?}");
    }

    // F16 weights (16 GB) do not fit in 12 GiB at 4k; a smaller quantization does.
    let small = hw("12g", 12 * Bytes::GIB);
    let e = estimate_8b("F16", 4096, &small);
    let Err(FitError::WontFit(w)) = fit::decide(&e, false) else {
        panic!("F16 8B should not fit 12 GiB");
    };
    assert_eq!(w.max_ctx, None, "no context makes 16 GB of weights fit");
    let (q, total) = w.smaller_quant.clone().expect("a smaller quant fits");
    assert!(total <= small.free && total < w.need, "{q} {total}");
    assert!(w.to_string().contains(&q), "{w}");

    // --force turns the refusal into a warning carrying the same numbers.
    match fit::decide(&e, true) {
        Ok(Fit::Forced(f)) => assert_eq!(f, w),
        other => panic!("{other:?}"),
    }

    // Nothing fits in 1 GiB: the message says so instead of suggesting nonsense.
    let tiny = hw("1g", Bytes::GIB);
    let e = estimate_8b("Q4_K_M", 4096, &tiny);
    let Err(FitError::WontFit(w)) = fit::decide(&e, false) else {
        panic!("8B should not fit 1 GiB");
    };
    assert!(w.max_ctx.is_none() && w.smaller_quant.is_none(), "{w:?}");
    assert!(w.to_string().contains("smaller model"), "{w}");
}

#[test]
fn fit_estimate_reads_only_the_header() {
    let bytes = Model::tiny().bytes();
    let h = read_header(&bytes).expect("header");
    let roomy = hw("roomy", 64 * Bytes::GIB);
    let e = fit::estimate(&h, 1 << 30, KvDtype::F32, &roomy).expect("estimate");
    assert_eq!(e.ctx, 512, "ctx is capped at the training context");
    assert_eq!(e.memory.weights.0, h.tensor_bytes());
    assert!(matches!(fit::decide(&e, false), Ok(Fit::Fits { .. })));
}

/// `LocalModel::load_with` refuses before reading any tensor, and `force` loads anyway.
#[test]
fn load_refuses_a_model_that_does_not_fit_before_allocating_tensors() {
    let spec = SynthSpec {
        hidden: 128,
        ffn: 256,
        n_heads: 4,
        n_kv_heads: 2,
        head_dim: 32,
        vocab: 2048,
        weight_type: GgmlType::F32,
        ..SynthSpec::tiny(Architecture::Llama)
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("m.gguf");
    synth::write(&spec, &path).expect("write");
    let tensor_bytes = GgufHeader::read_path(&path).expect("h").tensor_bytes();
    assert!(tensor_bytes > 1 << 20);

    let small = LoadOptions {
        force: false,
        hardware: Some(hw("tiny", 4 << 20)),
        ..LoadOptions::default()
    };
    let (res, s) = measure(|| LocalModel::load_with(&path, &Device::Cpu, 256, &small));
    match res {
        Err(LoadError::WontFit {
            source: FitError::WontFit(w),
            ..
        }) => {
            assert_eq!(w.device, "tiny");
            assert!(w.need > w.free);
        }
        other => panic!("expected WontFit, got {other:?}"),
    }
    assert!(
        s.peak < tensor_bytes / 2,
        "refusal allocated {} bytes of a {tensor_bytes}-byte model",
        s.peak
    );

    let forced = LoadOptions {
        force: true,
        ..small
    };
    let model = LocalModel::load_with(&path, &Device::Cpu, 256, &forced).expect("forced load");
    assert_eq!(model.session().context_length(), 256);
    let roomy = LoadOptions {
        force: false,
        hardware: Some(hw("roomy", 64 * Bytes::GIB)),
        ..LoadOptions::default()
    };
    assert!(LocalModel::load_with(&path, &Device::Cpu, 256, &roomy).is_ok());
}

#[test]
fn cli_force_flag_parses_next_to_models_pull_force() {
    use boyd::cli::{Cli, Command};
    use clap::{CommandFactory, Parser};
    Cli::command().debug_assert();
    let cli = Cli::try_parse_from(["boyd", "--force", "generate", "hi"]).expect("parse");
    assert!(cli.global.force);
    assert!(matches!(cli.command, Command::Generate(_)));
    let cli = Cli::try_parse_from(["boyd", "generate", "hi"]).expect("parse");
    assert!(!cli.global.force);
    assert!(Cli::try_parse_from(["boyd", "models", "pull", "x", "--force"]).is_ok());
}

#[test]
fn cli_kernels_flag_picks_a_set_this_cpu_runs_or_says_why_not() {
    use boyd::cli::{runtime_options, Cli};
    use boyd::kernels::cpu::{KernelChoice, Kernels};
    use clap::Parser;
    let parse = |k: &str| Cli::try_parse_from(["boyd", "perplexity", "x.txt", "--kernels", k]);
    let cli = parse("scalar").expect("scalar runs everywhere");
    assert_eq!(cli.global.kernels, Some(KernelChoice::Scalar));
    assert_eq!(runtime_options(&cli.global).kernels, KernelChoice::Scalar);
    let cli = parse("exact").expect("the exact ground truth runs everywhere");
    assert_eq!(cli.global.kernels, Some(KernelChoice::Exact));
    let e = parse("sse9").expect_err("unknown set");
    assert!(
        e.to_string().contains("use auto, scalar, avx2, vnni"),
        "{e}"
    );
    let detected = Kernels::select(KernelChoice::Auto).name;
    match parse("vnni") {
        Ok(cli) => {
            assert_eq!(detected, "avx2+vnni");
            assert_eq!(cli.global.kernels, Some(KernelChoice::Auto));
        }
        Err(e) => {
            assert_ne!(detected, "avx2+vnni");
            assert!(e.to_string().contains("lacks AVX-512 VNNI"), "{e}");
        }
    }
    match parse("avx2") {
        Ok(cli) => {
            assert_eq!(cli.global.kernels, Some(KernelChoice::NoVnni));
            assert_eq!(Kernels::select(KernelChoice::NoVnni).name, "avx2");
        }
        Err(e) => {
            assert_eq!(detected, "scalar");
            assert!(e.to_string().contains("lacks AVX2"), "{e}");
        }
    }
}

/// A tokenizer with more tokens than the embedding has rows is refused at load, before the
/// first out-of-range id fails a generation.
#[test]
fn tokenizer_larger_than_the_model_vocabulary_is_refused() {
    let mut m = Model::tiny().set("llama.vocab_size", Value::U32(100));
    let embd = m
        .tensors
        .iter_mut()
        .find(|t| t.0 == "token_embd.weight")
        .expect("token_embd");
    let row_bytes = embd.3.len() / embd.2[1] as usize;
    embd.2[1] = 100;
    embd.3.truncate(100 * row_bytes);
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("m.gguf");
    std::fs::write(&path, m.bytes()).expect("write");
    // the decoder alone accepts the file: its shapes agree with vocab_size
    let mut f = GgufFile::open(&path).expect("open");
    assert!(Decoder::load(&mut f, &Device::Cpu).is_ok());
    let opts = LoadOptions {
        force: true,
        hardware: None,
        ..LoadOptions::default()
    };
    match LocalModel::load_with(&path, &Device::Cpu, 64, &opts) {
        Err(LoadError::Decoder {
            source: DecoderError::Gguf(GgufError::Inconsistent(msg)),
            ..
        }) => assert!(msg.contains("320 tokens"), "{msg}"),
        other => panic!("expected Inconsistent, got {other:?}"),
    }
}
