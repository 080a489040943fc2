//! A tokenizer built from a GGUF file's `tokenizer.ggml.*` metadata alone: no `tokenizer.json`.
//!
//! Two vocabulary families are read: `gpt2` (byte-level BPE with ranked merges and a
//! pre-tokenizer regex chosen by `tokenizer.ggml.pre`, e.g. SmolLM2, Qwen2.5, Llama 3) and
//! `llama` (SentencePiece-style BPE by token score, `▁` for spaces, `<0xXX>` byte fallback).
//! For each, a [`tokenizers::Tokenizer`] (the crate's BPE model plus `Split`/`ByteLevel`
//! pre-tokenizers or a `▁` normalizer) does the merging of plain text.
//!
//! The key design decision: **token ids must equal llama.cpp's for the same file**, because the
//! model was trained on the ids its reference runtime produces, and agents pin prompts by ids
//! (KV prefix reuse). So the parts where llama.cpp differs from a `tokenizer.json` pipeline are
//! done here, in the order llama.cpp does them:
//!
//! - special tokens (control, unknown and user-defined types) are cut out of the text first,
//!   longest token text first, before any regex runs; control and unknown tokens only when
//!   `parse_special` is on, user-defined ones always;
//! - the pre-tokenizer regexes are llama.cpp's per-`pre` lists, applied in sequence with
//!   matches isolated (for `smollm`: digits one by one, then the GPT-2 pattern; no prefix
//!   space is added, so `"Hello"` is one token);
//! - SentencePiece vocabularies get a `▁` prefix at the start of the text and after every
//!   special token when `add_space_prefix` is on; BPE merges are ordered by the score of the
//!   merged token, which is how llama.cpp's SPM tokenizer picks pairs;
//! - BOS/EOS are added per `tokenizer.ggml.add_bos_token`/`add_eos_token`, with llama.cpp's
//!   defaults when the keys are absent.
//!
//! Decoding is done from a per-token byte table (the llama.cpp "piece" of each token), so that
//! [`StreamDecoder`] can emit valid UTF-8 as tokens arrive, holding back a multi-byte character
//! split across tokens. Decoding is the exact inverse of encoding: `decode(encode(s)) == s`.

use std::collections::HashMap;
use std::path::Path;

use tokenizers::models::bpe::{Vocab, BPE};
use tokenizers::normalizers::replace::Replace;
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::pre_tokenizers::sequence::Sequence;
use tokenizers::pre_tokenizers::split::{Split, SplitPattern};
use tokenizers::{
    AddedToken, DecoderWrapper, NormalizerWrapper, PreTokenizerWrapper, SplitDelimiterBehavior,
    Tokenizer,
};

use crate::lm::ChatMessage;
use crate::runtime::chat_template::{ChatTemplate, ChatTemplateError};
use crate::runtime::gguf::{Array, GgufError, GgufHeader, Value};

/// Why a tokenizer could not be built, or an input could not be tokenized or decoded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TokenizerError {
    /// The GGUF header could not be read.
    #[error(transparent)]
    Gguf(#[from] GgufError),
    /// A metadata key the tokenizer needs is absent.
    #[error("GGUF has no tokenizer: metadata key {0:?} is missing (re-convert the model with its tokenizer)")]
    MissingKey(&'static str),
    /// A tokenizer metadata key has the wrong type.
    #[error("GGUF metadata key {key:?}: expected {expected}")]
    WrongType {
        /// The key.
        key: &'static str,
        /// What was expected.
        expected: &'static str,
    },
    /// A per-token array does not have one entry per token.
    #[error(
        "GGUF metadata key {key:?} has {found} entries but the vocabulary has {expected} tokens"
    )]
    LengthMismatch {
        /// The key.
        key: &'static str,
        /// Number of tokens.
        expected: usize,
        /// Number of entries found.
        found: usize,
    },
    /// `tokenizer.ggml.model` names a vocabulary family boyd does not read.
    #[error("unsupported tokenizer model {0:?}; boyd reads \"gpt2\" (byte-level BPE) and \"llama\" (SentencePiece) vocabularies")]
    UnsupportedModel(String),
    /// `tokenizer.ggml.pre` names a pre-tokenizer boyd does not know.
    #[error("unsupported pre-tokenizer {0:?} in tokenizer.ggml.pre; known: {known}", known = PreTokenizerKind::KNOWN.join(", "))]
    UnsupportedPreTokenizer(String),
    /// The vocabulary has no tokens.
    #[error("GGUF metadata key \"tokenizer.ggml.tokens\" is an empty list")]
    EmptyVocab,
    /// Two tokens have the same text (llama.cpp refuses such files too).
    #[error("the vocabulary holds token {text:?} twice (ids {first} and {second})")]
    DuplicateToken {
        /// The token text.
        text: String,
        /// First id.
        first: u32,
        /// Second id.
        second: u32,
    },
    /// A special-token id in the metadata is outside the vocabulary.
    #[error("GGUF metadata key {key:?} = {id} is outside the vocabulary of {vocab} tokens")]
    BadSpecialId {
        /// The key.
        key: &'static str,
        /// The id found.
        id: u64,
        /// Vocabulary size.
        vocab: usize,
    },
    /// A token id passed to decode is outside the vocabulary.
    #[error("token id {id} is outside the vocabulary of {vocab} tokens")]
    UnknownId {
        /// The id.
        id: u32,
        /// Vocabulary size.
        vocab: usize,
    },
    /// The model asks for a BOS/EOS token to be added but does not define one.
    #[error("the tokenizer is configured to add a {0} token but the GGUF defines none")]
    MissingSpecial(&'static str),
    /// The `tokenizers` crate rejected the pipeline built from the metadata.
    #[error("building the tokenizer from GGUF metadata: {0}")]
    Build(String),
    /// The `tokenizers` crate failed on an input.
    #[error("tokenizing: {0}")]
    Encode(String),
    /// The chat template failed.
    #[error(transparent)]
    Template(#[from] ChatTemplateError),
}

type Result<T, E = TokenizerError> = std::result::Result<T, E>;

/// The vocabulary family, from `tokenizer.ggml.model`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum VocabKind {
    /// `gpt2`: byte-level BPE with ranked merges and a regex pre-tokenizer.
    Bpe,
    /// `llama`: SentencePiece BPE by token score, `▁` for spaces, `<0xXX>` byte fallback.
    Spm,
}

/// The kind of a token, from `tokenizer.ggml.token_type` (llama.cpp's numbering).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum TokenType {
    /// 1: ordinary text.
    Normal,
    /// 2: the unknown token.
    Unknown,
    /// 3: control tokens (`<|im_start|>`, BOS, EOS): parsed from text only with `parse_special`,
    /// skipped by `decode(.., skip_special = true)`.
    Control,
    /// 4: user-defined tokens: always cut out of the text as a whole and decoded as their text.
    UserDefined,
    /// 5: unused slots.
    Unused,
    /// 6: a raw byte, `<0xXX>` (SentencePiece).
    Byte,
    /// 0 or anything else.
    Undefined,
}

impl TokenType {
    fn from_code(code: i64) -> Self {
        match code {
            1 => Self::Normal,
            2 => Self::Unknown,
            3 => Self::Control,
            4 => Self::UserDefined,
            5 => Self::Unused,
            6 => Self::Byte,
            _ => Self::Undefined,
        }
    }

    /// Control or unknown: text that `parse_special` governs and `skip_special` drops.
    pub fn is_special(self) -> bool {
        matches!(self, Self::Control | Self::Unknown)
    }
}

/// The pre-tokenizer family, from `tokenizer.ggml.pre` (names as llama.cpp reads them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum PreTokenizerKind {
    /// `default` (or the key absent).
    Default,
    /// `gpt-2`, `phi-2`, `mpt`, `olmo`, `jais`, `roberta-bpe`, the `jina-*` family.
    Gpt2,
    /// `llama3`, `llama-v3`, `llama-bpe`, `falcon3`: whole words in the vocabulary skip merges.
    Llama3,
    /// `dbrx`, `smaug-bpe`: the Llama 3 pattern with merges always applied.
    Dbrx,
    /// `smollm`, `starcoder`, `refact`, `command-r`, `codeshell`, `exaone`, `minerva-7b`:
    /// every digit alone, then the GPT-2 pattern.
    StarCoder,
    /// `qwen2`, `stablelm2`, `megrez`: like Llama 3 with single digits.
    Qwen2,
    /// `falcon`.
    Falcon,
    /// `bloom`, `poro-chat`, `gpt3-finnish`.
    Bloom,
    /// `chatglm-bpe`.
    ChatGlm4,
    /// `viking`.
    Viking,
    /// `deepseek-coder`.
    DeepSeekCoder,
    /// `tekken` (Mistral Nemo): whole words in the vocabulary skip merges.
    Tekken,
}

const GPT2_PATTERN: &str =
    r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)";
const LLAMA3_PATTERN: &str = r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
const QWEN2_PATTERN: &str = r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
const BLOOM_PATTERN: &str = r" ?[^(\s|.,!?…。，、।۔،)]+";
const TEKKEN_PATTERN: &str = r"[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+";

impl PreTokenizerKind {
    /// Every `tokenizer.ggml.pre` value this build understands.
    pub const KNOWN: &'static [&'static str] = &[
        "default",
        "gpt-2",
        "phi-2",
        "mpt",
        "olmo",
        "jais",
        "roberta-bpe",
        "jina-es",
        "jina-de",
        "jina-v1-en",
        "jina-v2-es",
        "jina-v2-de",
        "jina-v2-code",
        "gigachat",
        "llama3",
        "llama-v3",
        "llama-bpe",
        "falcon3",
        "dbrx",
        "smaug-bpe",
        "smollm",
        "starcoder",
        "refact",
        "command-r",
        "codeshell",
        "exaone",
        "minerva-7b",
        "qwen2",
        "stablelm2",
        "megrez",
        "falcon",
        "bloom",
        "poro-chat",
        "gpt3-finnish",
        "chatglm-bpe",
        "viking",
        "deepseek-coder",
        "tekken",
    ];

    /// The kind for a `tokenizer.ggml.pre` value.
    pub fn from_gguf(name: &str) -> Option<Self> {
        Some(match name {
            "default" => Self::Default,
            "gpt-2" | "phi-2" | "mpt" | "olmo" | "jais" | "roberta-bpe" | "jina-es" | "jina-de"
            | "jina-v1-en" | "jina-v2-es" | "jina-v2-de" | "jina-v2-code" | "gigachat" => {
                Self::Gpt2
            }
            "llama3" | "llama-v3" | "llama-bpe" | "falcon3" => Self::Llama3,
            "dbrx" | "smaug-bpe" => Self::Dbrx,
            "smollm" | "starcoder" | "refact" | "command-r" | "codeshell" | "exaone"
            | "minerva-7b" => Self::StarCoder,
            "qwen2" | "stablelm2" | "megrez" => Self::Qwen2,
            "falcon" => Self::Falcon,
            "bloom" | "poro-chat" | "gpt3-finnish" => Self::Bloom,
            "chatglm-bpe" => Self::ChatGlm4,
            "viking" => Self::Viking,
            "deepseek-coder" => Self::DeepSeekCoder,
            "tekken" => Self::Tekken,
            _ => return None,
        })
    }

    /// The regexes applied in sequence; each splits every piece so far, keeping matches and
    /// the text between them as separate pieces.
    pub fn patterns(self) -> &'static [&'static str] {
        match self {
            Self::Default => &[
                r"[\p{P}\$\+<=>\^~\|]+",
                GPT2_PATTERN,
                r"\p{N}+",
                r"[0-9][0-9][0-9]",
            ],
            Self::Gpt2 => &[GPT2_PATTERN],
            Self::Llama3 | Self::Dbrx | Self::ChatGlm4 => &[LLAMA3_PATTERN],
            Self::StarCoder => &[r"\p{N}", GPT2_PATTERN],
            Self::Qwen2 => &[QWEN2_PATTERN],
            Self::Falcon => &[r"[\p{P}\$\+<=>\^~\|`]+", GPT2_PATTERN, r"[0-9][0-9][0-9]"],
            Self::Bloom => &[BLOOM_PATTERN],
            Self::Viking => &[BLOOM_PATTERN, r"\p{N}"],
            Self::DeepSeekCoder => &[
                r"[\r\n]",
                r"\s?\p{L}+",
                r"\s?\p{P}+",
                r"[一-龥ࠀ-一가-퟿]+",
                r"\p{N}",
            ],
            Self::Tekken => &[TEKKEN_PATTERN],
        }
    }

    /// Whether a whole pre-token found in the vocabulary is emitted without merging.
    pub fn ignore_merges(self) -> bool {
        matches!(self, Self::Llama3 | Self::Tekken)
    }

    /// llama.cpp's `add_bos` default when `tokenizer.ggml.add_bos_token` is absent.
    fn default_add_bos(self) -> bool {
        matches!(self, Self::Llama3 | Self::Tekken)
    }
}

/// Token texts that end a turn or the text, whatever their declared type (llama.cpp's list).
const END_OF_GENERATION_TEXTS: &[&str] = &[
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "<|eom_id|>",
    "<EOT>",
];

/// Texts that llama.cpp takes as the end-of-turn token when `eot_token_id` is absent.
const EOT_TEXTS: &[&str] = &[
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "<EOT>",
    "<｜end▁of▁sentence｜>",
];

/// The special-token ids a GGUF declares.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct SpecialTokens {
    /// Beginning of sequence.
    pub bos: Option<u32>,
    /// End of sequence.
    pub eos: Option<u32>,
    /// End of turn (declared, or found by text such as `<|im_end|>`).
    pub eot: Option<u32>,
    /// End of message (`<|eom_id|>`).
    pub eom: Option<u32>,
    /// Unknown.
    pub unk: Option<u32>,
    /// Padding.
    pub pad: Option<u32>,
}

/// A tokenizer read from GGUF metadata; see the module docs.
#[derive(Clone)]
pub struct GgufTokenizer {
    kind: VocabKind,
    pre: Option<PreTokenizerKind>,
    /// Model + normalizer/pre-tokenizer for plain text; no added tokens (special tokens are cut
    /// out before text reaches it).
    core: Tokenizer,
    tokens: Vec<String>,
    types: Vec<TokenType>,
    ids: HashMap<String, u32>,
    /// The bytes each token stands for (special tokens as their text).
    pieces: Vec<Box<[u8]>>,
    /// Ids cut out of text before tokenizing (control, unknown, user-defined), longest first.
    partition: Vec<u32>,
    special: SpecialTokens,
    add_bos: bool,
    add_eos: bool,
    add_space_prefix: bool,
    eog: Vec<u32>,
    chat: std::result::Result<ChatTemplate, ChatTemplateError>,
}

impl std::fmt::Debug for GgufTokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GgufTokenizer")
            .field("kind", &self.kind)
            .field("pre", &self.pre)
            .field("vocab_size", &self.tokens.len())
            .field("special", &self.special)
            .field("add_bos", &self.add_bos)
            .field("add_eos", &self.add_eos)
            .field("add_space_prefix", &self.add_space_prefix)
            .field("eog", &self.eog)
            .finish_non_exhaustive()
    }
}

/// GPT-2's reversible byte <-> printable-character map used by byte-level BPE.
fn byte_level_alphabet() -> [char; 256] {
    let mut map = ['\0'; 256];
    let mut extra = 0u32;
    for b in 0..256u32 {
        let printable =
            (33..=126).contains(&b) || (161..=172).contains(&b) || (174..=255).contains(&b);
        let cp = if printable {
            b
        } else {
            extra += 1;
            255 + extra
        };
        // Every value here is below 0x144, a valid scalar value.
        map[b as usize] = char::from_u32(cp).unwrap_or(char::REPLACEMENT_CHARACTER);
    }
    map
}

fn string_array<'a>(h: &'a GgufHeader, key: &'static str) -> Result<Option<&'a [String]>> {
    match h.opt_array(key).map_err(|_| TokenizerError::WrongType {
        key,
        expected: "an array of strings",
    })? {
        None => Ok(None),
        Some(Array::String(v)) => Ok(Some(v)),
        Some(_) => Err(TokenizerError::WrongType {
            key,
            expected: "an array of strings",
        }),
    }
}

fn opt_bool(h: &GgufHeader, key: &'static str) -> Result<Option<bool>> {
    match h.get(key) {
        None => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(v) => match v.as_u64() {
            Some(0) => Ok(Some(false)),
            Some(1) => Ok(Some(true)),
            _ => Err(TokenizerError::WrongType {
                key,
                expected: "a bool",
            }),
        },
    }
}

fn opt_id(h: &GgufHeader, key: &'static str, vocab: usize) -> Result<Option<u32>> {
    match h.get(key) {
        None => Ok(None),
        Some(v) => {
            let id = v.as_u64().ok_or(TokenizerError::WrongType {
                key,
                expected: "an unsigned integer token id",
            })?;
            match u32::try_from(id) {
                Ok(id) if (id as usize) < vocab => Ok(Some(id)),
                _ => Err(TokenizerError::BadSpecialId { key, id, vocab }),
            }
        }
    }
}

fn build_err(e: impl std::fmt::Display) -> TokenizerError {
    TokenizerError::Build(e.to_string())
}

impl GgufTokenizer {
    /// Read the GGUF header at `path` and build its tokenizer.
    pub fn from_path(path: &Path) -> Result<Self> {
        let header = GgufHeader::read_path(path)?;
        Self::from_header(&header)
    }

    /// Build the tokenizer from a parsed header's `tokenizer.*` metadata.
    pub fn from_header(h: &GgufHeader) -> Result<Self> {
        let model = h
            .opt_str("tokenizer.ggml.model")
            .map_err(|_| TokenizerError::WrongType {
                key: "tokenizer.ggml.model",
                expected: "a string",
            })?
            .ok_or(TokenizerError::MissingKey("tokenizer.ggml.model"))?;
        let kind = match model {
            "gpt2" => VocabKind::Bpe,
            "llama" => VocabKind::Spm,
            other => return Err(TokenizerError::UnsupportedModel(other.to_string())),
        };
        let pre = match kind {
            VocabKind::Spm => None,
            VocabKind::Bpe => {
                let name = h
                    .opt_str("tokenizer.ggml.pre")
                    .map_err(|_| TokenizerError::WrongType {
                        key: "tokenizer.ggml.pre",
                        expected: "a string",
                    })?
                    .unwrap_or("default");
                Some(
                    PreTokenizerKind::from_gguf(name)
                        .ok_or_else(|| TokenizerError::UnsupportedPreTokenizer(name.to_string()))?,
                )
            }
        };

        let raw_tokens = string_array(h, "tokenizer.ggml.tokens")?
            .ok_or(TokenizerError::MissingKey("tokenizer.ggml.tokens"))?;
        if raw_tokens.is_empty() {
            return Err(TokenizerError::EmptyVocab);
        }
        let n = raw_tokens.len();
        let tokens: Vec<String> = raw_tokens
            .iter()
            .enumerate()
            .map(|(i, t)| {
                if t.is_empty() {
                    format!("[EMPTY_{i}]")
                } else {
                    t.clone()
                }
            })
            .collect();
        let mut ids = HashMap::with_capacity(n);
        for (i, t) in tokens.iter().enumerate() {
            if let Some(first) = ids.insert(t.clone(), i as u32) {
                return Err(TokenizerError::DuplicateToken {
                    text: t.clone(),
                    first,
                    second: i as u32,
                });
            }
        }

        let mut types = match h.opt_array("tokenizer.ggml.token_type") {
            Err(_) => {
                return Err(TokenizerError::WrongType {
                    key: "tokenizer.ggml.token_type",
                    expected: "an array of integers",
                })
            }
            Ok(None) => vec![TokenType::Normal; n],
            Ok(Some(a)) => {
                let codes = a.to_i64s().ok_or(TokenizerError::WrongType {
                    key: "tokenizer.ggml.token_type",
                    expected: "an array of integers",
                })?;
                if codes.len() != n {
                    return Err(TokenizerError::LengthMismatch {
                        key: "tokenizer.ggml.token_type",
                        expected: n,
                        found: codes.len(),
                    });
                }
                codes.into_iter().map(TokenType::from_code).collect()
            }
        };
        let scores = match h.opt_array("tokenizer.ggml.scores") {
            Err(_) => {
                return Err(TokenizerError::WrongType {
                    key: "tokenizer.ggml.scores",
                    expected: "an array of floats",
                })
            }
            Ok(None) => None,
            Ok(Some(a)) => {
                let s = a.to_f32s().ok_or(TokenizerError::WrongType {
                    key: "tokenizer.ggml.scores",
                    expected: "an array of floats",
                })?;
                if s.len() != n {
                    return Err(TokenizerError::LengthMismatch {
                        key: "tokenizer.ggml.scores",
                        expected: n,
                        found: s.len(),
                    });
                }
                Some(s)
            }
        };

        // Special ids: llama.cpp's defaults for SentencePiece, then the metadata.
        let spm_default = |id: u32| (kind == VocabKind::Spm && (id as usize) < n).then_some(id);
        let mut special = SpecialTokens {
            bos: opt_id(h, "tokenizer.ggml.bos_token_id", n)?.or(spm_default(1)),
            eos: opt_id(h, "tokenizer.ggml.eos_token_id", n)?.or(spm_default(2)),
            eot: opt_id(h, "tokenizer.ggml.eot_token_id", n)?,
            eom: opt_id(h, "tokenizer.ggml.eom_token_id", n)?,
            unk: opt_id(h, "tokenizer.ggml.unknown_token_id", n)?.or(spm_default(0)),
            pad: opt_id(h, "tokenizer.ggml.padding_token_id", n)?,
        };
        if special.eot.is_none() {
            special.eot = EOT_TEXTS.iter().find_map(|t| ids.get(*t).copied());
        }
        if special.eom.is_none() {
            special.eom = ids.get("<|eom_id|>").copied();
        }
        // End-of-generation set; tokens that look like control tokens are treated as such.
        let mut eog: Vec<u32> = END_OF_GENERATION_TEXTS
            .iter()
            .filter_map(|t| ids.get(*t).copied())
            .collect();
        for &id in &eog {
            types[id as usize] = TokenType::Control;
        }
        eog.extend(
            [special.eos, special.eot, special.eom]
                .into_iter()
                .flatten(),
        );
        eog.sort_unstable();
        eog.dedup();

        let add_bos = opt_bool(h, "tokenizer.ggml.add_bos_token")?.unwrap_or(match pre {
            None => true,
            Some(p) => p.default_add_bos(),
        });
        let add_eos = opt_bool(h, "tokenizer.ggml.add_eos_token")?.unwrap_or(false);
        let add_space_prefix =
            opt_bool(h, "tokenizer.ggml.add_space_prefix")?.unwrap_or(kind == VocabKind::Spm);

        let core = match kind {
            VocabKind::Bpe => {
                let merges = string_array(h, "tokenizer.ggml.merges")?
                    .ok_or(TokenizerError::MissingKey("tokenizer.ggml.merges"))?;
                // `pre` is always Some for BPE.
                build_bpe(&ids, merges, pre.unwrap_or(PreTokenizerKind::Default))?
            }
            VocabKind::Spm => {
                let scores = scores.unwrap_or_else(|| vec![0.0; n]);
                build_spm(
                    &tokens,
                    &ids,
                    &scores,
                    special.unk.map(|u| tokens[u as usize].clone()),
                )?
            }
        };

        let pieces = make_pieces(kind, &tokens, &types);
        let mut partition: Vec<u32> = (0..n as u32)
            .filter(|&i| {
                matches!(
                    types[i as usize],
                    TokenType::Control | TokenType::Unknown | TokenType::UserDefined
                )
            })
            .collect();
        // Longest first; stable, so equal lengths keep id order as llama.cpp's sort usually does.
        partition.sort_by_key(|&i| std::cmp::Reverse(tokens[i as usize].len()));

        let text_of = |id: Option<u32>| id.map(|i| tokens[i as usize].clone()).unwrap_or_default();
        let chat = match h.get("tokenizer.chat_template") {
            None => Ok(ChatTemplate::chatml(
                &text_of(special.bos),
                &text_of(special.eos),
            )),
            Some(Value::String(src)) => {
                ChatTemplate::new(src, &text_of(special.bos), &text_of(special.eos))
            }
            Some(_) => Err(ChatTemplateError::NotAString),
        };
        if let Err(e) = &chat {
            tracing::warn!(error = %e, "the GGUF chat template cannot be used; render_chat will fail");
        }

        Ok(Self {
            kind,
            pre,
            core,
            tokens,
            types,
            ids,
            pieces,
            partition,
            special,
            add_bos,
            add_eos,
            add_space_prefix,
            eog,
            chat,
        })
    }

    /// The vocabulary family.
    pub fn kind(&self) -> VocabKind {
        self.kind
    }

    /// The pre-tokenizer (BPE vocabularies only).
    pub fn pre_tokenizer(&self) -> Option<PreTokenizerKind> {
        self.pre
    }

    /// Number of tokens in the vocabulary.
    pub fn vocab_size(&self) -> usize {
        self.tokens.len()
    }

    /// The vocabulary text of token `id` (byte-level or `▁`-escaped as stored in the GGUF).
    pub fn id_to_token(&self, id: u32) -> Option<&str> {
        self.tokens.get(id as usize).map(String::as_str)
    }

    /// The id of the token whose vocabulary text is exactly `text`.
    pub fn token_to_id(&self, text: &str) -> Option<u32> {
        self.ids.get(text).copied()
    }

    /// The type of token `id`.
    pub fn token_type(&self, id: u32) -> Option<TokenType> {
        self.types.get(id as usize).copied()
    }

    /// The bytes token `id` stands for (special tokens as their text). A multi-byte character
    /// may be split across tokens, so this is bytes, not a string.
    pub fn token_bytes(&self, id: u32) -> Result<&[u8]> {
        self.pieces
            .get(id as usize)
            .map(|p| &p[..])
            .ok_or(TokenizerError::UnknownId {
                id,
                vocab: self.tokens.len(),
            })
    }

    /// The declared special-token ids.
    pub fn special_tokens(&self) -> SpecialTokens {
        self.special
    }

    /// BOS id, if any.
    pub fn bos_id(&self) -> Option<u32> {
        self.special.bos
    }

    /// EOS id, if any.
    pub fn eos_id(&self) -> Option<u32> {
        self.special.eos
    }

    /// Whether `encode(.., add_special = true)` prepends BOS.
    pub fn add_bos(&self) -> bool {
        self.add_bos
    }

    /// Whether `encode(.., add_special = true)` appends EOS.
    pub fn add_eos(&self) -> bool {
        self.add_eos
    }

    /// Every id that ends generation: EOS, EOT, EOM and the end-of-turn tokens present in the
    /// vocabulary (`<|im_end|>`, `<|endoftext|>`, `<|eot_id|>`, `<end_of_turn>`, ...), sorted.
    pub fn eos_ids(&self) -> Vec<u32> {
        self.eog.clone()
    }

    /// Whether `id` ends generation (see [`eos_ids`](Self::eos_ids)).
    pub fn is_eog(&self, id: u32) -> bool {
        self.eog.binary_search(&id).is_ok()
    }

    /// Tokenize `text` with special tokens parsed (`<|im_start|>` becomes one id); with
    /// `add_special`, BOS/EOS are added as the model's metadata asks.
    pub fn encode(&self, text: &str, add_special: bool) -> Result<Vec<u32>> {
        self.encode_with(text, add_special, true)
    }

    /// Tokenize `text`; `parse_special = false` tokenizes the text of control tokens as plain
    /// text (user-defined tokens are still matched, as llama.cpp does).
    pub fn encode_with(
        &self,
        text: &str,
        add_special: bool,
        parse_special: bool,
    ) -> Result<Vec<u32>> {
        let fragments = self.split_special(text, parse_special);
        let mut out = Vec::with_capacity(text.len() / 3 + 2);
        if add_special && self.add_bos {
            out.push(
                self.special
                    .bos
                    .ok_or(TokenizerError::MissingSpecial("BOS"))?,
            );
        }
        let mut after_special = true;
        let mut buf = String::new();
        for frag in fragments {
            match frag {
                Fragment::Token(id) => {
                    out.push(id);
                    after_special = true;
                }
                Fragment::Text(t) => {
                    let t = if self.kind == VocabKind::Spm && self.add_space_prefix && after_special
                    {
                        buf.clear();
                        buf.push(' ');
                        buf.push_str(t);
                        buf.as_str()
                    } else {
                        t
                    };
                    let enc = self
                        .core
                        .encode_fast(t, false)
                        .map_err(|e| TokenizerError::Encode(e.to_string()))?;
                    out.extend_from_slice(enc.get_ids());
                    after_special = false;
                }
            }
        }
        if add_special && self.add_eos {
            out.push(
                self.special
                    .eos
                    .ok_or(TokenizerError::MissingSpecial("EOS"))?,
            );
        }
        Ok(out)
    }

    /// Cut special tokens out of `text`, longest token text first (llama.cpp's order).
    fn split_special<'t>(&self, text: &'t str, parse_special: bool) -> Vec<Fragment<'t>> {
        let mut frags = Vec::new();
        if text.is_empty() {
            return frags;
        }
        frags.push(Fragment::Text(text));
        for &id in &self.partition {
            if !parse_special && self.types[id as usize].is_special() {
                continue;
            }
            let needle = self.tokens[id as usize].as_str();
            if !frags
                .iter()
                .any(|f| matches!(f, Fragment::Text(t) if t.contains(needle)))
            {
                continue;
            }
            let mut next = Vec::with_capacity(frags.len() + 2);
            for f in frags {
                match f {
                    Fragment::Text(mut t) => {
                        while let Some(at) = t.find(needle) {
                            if at > 0 {
                                next.push(Fragment::Text(&t[..at]));
                            }
                            next.push(Fragment::Token(id));
                            t = &t[at + needle.len()..];
                        }
                        if !t.is_empty() {
                            next.push(Fragment::Text(t));
                        }
                    }
                    tok => next.push(tok),
                }
            }
            frags = next;
        }
        frags
    }

    /// Decode ids to text. With `skip_special`, control and unknown tokens (BOS, EOS,
    /// `<|im_end|>`) are left out; user-defined tokens always appear as their text. Bytes that
    /// are not valid UTF-8 become U+FFFD. The inverse of [`encode`](Self::encode).
    pub fn decode(&self, ids: &[u32], skip_special: bool) -> Result<String> {
        let mut bytes = Vec::with_capacity(ids.len() * 4);
        let mut strip = self.strips_space();
        for &id in ids {
            self.push_piece(id, skip_special, &mut strip, &mut bytes)?;
        }
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }

    /// A streaming decoder (see [`StreamDecoder`]).
    pub fn stream_decoder(&self, skip_special: bool) -> StreamDecoder<'_> {
        StreamDecoder {
            tok: self,
            skip_special,
            strip: self.strips_space(),
            pending: Vec::new(),
        }
    }

    fn strips_space(&self) -> bool {
        self.kind == VocabKind::Spm && self.add_space_prefix
    }

    /// Append the bytes of `id`, removing the space that encoding added at the start of a
    /// SentencePiece text fragment.
    fn push_piece(
        &self,
        id: u32,
        skip_special: bool,
        strip: &mut bool,
        out: &mut Vec<u8>,
    ) -> Result<()> {
        let piece = self.token_bytes(id)?;
        let ty = self.types[id as usize];
        if matches!(
            ty,
            TokenType::Control | TokenType::Unknown | TokenType::UserDefined
        ) {
            if !(skip_special && ty.is_special()) {
                out.extend_from_slice(piece);
            }
            *strip = self.strips_space();
            return Ok(());
        }
        let piece = match piece.split_first() {
            Some((b' ', rest)) if *strip => rest,
            _ => piece,
        };
        if !self.pieces[id as usize].is_empty() {
            *strip = false;
        }
        out.extend_from_slice(piece);
        Ok(())
    }

    /// The chat template: the GGUF's `tokenizer.chat_template`, or ChatML when it has none.
    pub fn chat_template(&self) -> std::result::Result<&ChatTemplate, &ChatTemplateError> {
        self.chat.as_ref()
    }

    /// Render a conversation with the model's chat template (see [`ChatTemplate::render`]).
    pub fn render_chat(
        &self,
        messages: &[ChatMessage],
        add_generation_prompt: bool,
    ) -> Result<String> {
        match &self.chat {
            Ok(t) => Ok(t.render(messages, add_generation_prompt)?),
            Err(e) => Err(TokenizerError::Template(e.clone())),
        }
    }

    /// Render `messages` with the chat template and tokenize the text for a prompt: special
    /// tokens parsed, BOS prepended when the model asks for it and the template did not already
    /// write it (templates such as Llama 3's start with `{{ bos_token }}`), never EOS.
    pub fn encode_chat(
        &self,
        messages: &[ChatMessage],
        add_generation_prompt: bool,
    ) -> Result<Vec<u32>> {
        let text = self.render_chat(messages, add_generation_prompt)?;
        let mut ids = self.encode(&text, false)?;
        if self.add_bos {
            let bos = self
                .special
                .bos
                .ok_or(TokenizerError::MissingSpecial("BOS"))?;
            if ids.first() != Some(&bos) {
                ids.insert(0, bos);
            }
        }
        Ok(ids)
    }

    /// A standalone `tokenizers::Tokenizer` with the special tokens registered as added tokens
    /// (control tokens as special, user-defined ones as normal added tokens) and a decoder,
    /// for code that wants the crate's API (e.g. a constraint engine). Plain-text ids equal
    /// [`encode`](Self::encode)'s; SentencePiece space handling around special tokens follows
    /// the `tokenizers` crate rather than llama.cpp, so prefer `encode` for prompts.
    pub fn to_hf_tokenizer(&self) -> Tokenizer {
        let mut t = self.core.clone();
        let added = |id: &u32, special: bool| {
            AddedToken::from(self.tokens[*id as usize].clone(), special).normalized(false)
        };
        let special: Vec<AddedToken> = self
            .partition
            .iter()
            .filter(|&&i| self.types[i as usize].is_special())
            .map(|i| added(i, true))
            .collect();
        let user: Vec<AddedToken> = self
            .partition
            .iter()
            .filter(|&&i| self.types[i as usize] == TokenType::UserDefined)
            .map(|i| added(i, false))
            .collect();
        t.add_special_tokens(&special);
        t.add_tokens(&user);
        t
    }
}

enum Fragment<'t> {
    Text(&'t str),
    Token(u32),
}

/// Decodes a stream of ids into valid UTF-8 pieces, holding back bytes of a character that is
/// split across tokens. The concatenation of everything it returns (including
/// [`finish`](Self::finish)) equals `decode(all ids, skip_special)`.
#[derive(Debug)]
pub struct StreamDecoder<'a> {
    tok: &'a GgufTokenizer,
    skip_special: bool,
    strip: bool,
    pending: Vec<u8>,
}

impl StreamDecoder<'_> {
    /// Add one token; returns the text that became complete (possibly empty).
    pub fn push(&mut self, id: u32) -> Result<String> {
        self.tok
            .push_piece(id, self.skip_special, &mut self.strip, &mut self.pending)?;
        Ok(self.drain_valid())
    }

    /// Bytes held back waiting for the rest of a character.
    pub fn pending_bytes(&self) -> usize {
        self.pending.len()
    }

    /// Flush what is held back (an incomplete character becomes U+FFFD).
    pub fn finish(&mut self) -> String {
        let s = String::from_utf8_lossy(&self.pending).into_owned();
        self.pending.clear();
        s
    }

    fn drain_valid(&mut self) -> String {
        let mut out = String::new();
        let mut start = 0;
        loop {
            let rest = &self.pending[start..];
            match std::str::from_utf8(rest) {
                Ok(s) => {
                    out.push_str(s);
                    start = self.pending.len();
                    break;
                }
                Err(e) => {
                    let valid = e.valid_up_to();
                    // The prefix up to `valid` is UTF-8 by construction.
                    out.push_str(&String::from_utf8_lossy(&rest[..valid]));
                    match e.error_len() {
                        None => {
                            start += valid;
                            break;
                        }
                        Some(bad) => {
                            out.push(char::REPLACEMENT_CHARACTER);
                            start += valid + bad;
                        }
                    }
                }
            }
        }
        self.pending.drain(..start);
        out
    }
}

/// The byte-level BPE pipeline: isolating regex splits, byte-to-char mapping, ranked merges.
fn build_bpe(
    ids: &HashMap<String, u32>,
    merges: &[String],
    pre: PreTokenizerKind,
) -> Result<Tokenizer> {
    let vocab: Vocab = ids.iter().map(|(k, v)| (k.clone(), *v)).collect();
    let mut seen = std::collections::HashSet::with_capacity(merges.len());
    let mut pairs = Vec::with_capacity(merges.len());
    for m in merges {
        // Split at the first space after the first byte, as llama.cpp does.
        let Some(at) = m
            .as_bytes()
            .iter()
            .skip(1)
            .position(|&b| b == b' ')
            .map(|p| p + 1)
        else {
            continue;
        };
        let (a, b) = (&m[..at], &m[at + 1..]);
        if !ids.contains_key(a) || !ids.contains_key(b) || !ids.contains_key(&format!("{a}{b}")) {
            continue;
        }
        if seen.insert((a, b)) {
            pairs.push((a.to_string(), b.to_string()));
        }
    }
    let model = BPE::builder()
        .vocab_and_merges(vocab, pairs)
        .ignore_merges(pre.ignore_merges())
        .build()
        .map_err(build_err)?;
    let mut steps: Vec<PreTokenizerWrapper> = Vec::new();
    for p in pre.patterns() {
        let split = Split::new(
            SplitPattern::Regex((*p).to_string()),
            SplitDelimiterBehavior::Isolated,
            false,
        )
        .map_err(build_err)?;
        steps.push(split.into());
    }
    steps.push(ByteLevel::new(false, false, false).into());
    let mut t = Tokenizer::new(model);
    t.with_pre_tokenizer(Some(PreTokenizerWrapper::Sequence(Sequence::new(steps))));
    t.with_decoder(Some(DecoderWrapper::ByteLevel(ByteLevel::new(
        false, false, false,
    ))));
    Ok(t)
}

/// The SentencePiece pipeline: ' ' -> '▁', then BPE whose merges are ranked by the score of
/// the merged token (llama.cpp picks the adjacent pair whose concatenation scores highest),
/// with `<0xXX>` byte fallback.
fn build_spm(
    tokens: &[String],
    ids: &HashMap<String, u32>,
    scores: &[f32],
    unk: Option<String>,
) -> Result<Tokenizer> {
    // Every way to write a token as the concatenation of two tokens is a merge.
    let mut cands: Vec<(f32, u32, u32, u32)> = Vec::new();
    for (id, t) in tokens.iter().enumerate() {
        for (at, _) in t.char_indices().skip(1) {
            if let (Some(&l), Some(&r)) = (ids.get(&t[..at]), ids.get(&t[at..])) {
                cands.push((scores[id], id as u32, l, r));
            }
        }
    }
    cands.sort_by(|x, y| y.0.total_cmp(&x.0).then(x.1.cmp(&y.1)).then(x.2.cmp(&y.2)));
    let merges = cands
        .into_iter()
        .map(|(_, _, l, r)| (tokens[l as usize].clone(), tokens[r as usize].clone()))
        .collect();
    let vocab: Vocab = ids.iter().map(|(k, v)| (k.clone(), *v)).collect();
    let mut b = BPE::builder()
        .vocab_and_merges(vocab, merges)
        .byte_fallback(true);
    if let Some(u) = unk {
        b = b.unk_token(u);
    }
    let model = b.build().map_err(build_err)?;
    let mut t = Tokenizer::new(model);
    let replace = Replace::new(" ", "▁").map_err(build_err)?;
    t.with_normalizer(Some(NormalizerWrapper::Replace(replace)));
    let decoders = vec![
        DecoderWrapper::Replace(Replace::new("▁", " ").map_err(build_err)?),
        DecoderWrapper::ByteFallback(tokenizers::decoders::byte_fallback::ByteFallback::new()),
        DecoderWrapper::Fuse(tokenizers::decoders::fuse::Fuse::new()),
    ];
    t.with_decoder(Some(DecoderWrapper::Sequence(
        tokenizers::decoders::sequence::Sequence::new(decoders),
    )));
    Ok(t)
}

/// The bytes each token decodes to, as llama.cpp's `token_to_piece` with specials rendered.
fn make_pieces(kind: VocabKind, tokens: &[String], types: &[TokenType]) -> Vec<Box<[u8]>> {
    let alphabet = byte_level_alphabet();
    let mut to_byte: HashMap<char, u8> = HashMap::with_capacity(256);
    for (b, c) in alphabet.iter().enumerate() {
        to_byte.insert(*c, b as u8);
    }
    tokens
        .iter()
        .zip(types)
        .map(|(text, ty)| -> Box<[u8]> {
            match ty {
                TokenType::Control | TokenType::Unknown | TokenType::UserDefined => {
                    text.as_bytes().into()
                }
                TokenType::Normal => match kind {
                    VocabKind::Bpe => {
                        let mut out = Vec::with_capacity(text.len());
                        for c in text.chars() {
                            match to_byte.get(&c) {
                                Some(&b) => out.push(b),
                                None => {
                                    let mut buf = [0u8; 4];
                                    out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
                                }
                            }
                        }
                        out.into()
                    }
                    VocabKind::Spm => text.replace('▁', " ").into_bytes().into(),
                },
                TokenType::Byte if kind == VocabKind::Spm => match parse_byte_token(text) {
                    Some(b) => Box::new([b]),
                    None => text.as_bytes().into(),
                },
                _ => Box::default(),
            }
        })
        .collect()
}

/// `<0xAB>` -> 0xAB.
fn parse_byte_token(text: &str) -> Option<u8> {
    let hex = text.strip_prefix("<0x")?.strip_suffix('>')?;
    if hex.len() != 2 {
        return None;
    }
    u8::from_str_radix(hex, 16).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokenizer_is_shareable_across_threads() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<GgufTokenizer>();
    }

    #[test]
    fn byte_token_parsing() {
        assert_eq!(parse_byte_token("<0x0A>"), Some(10));
        assert_eq!(parse_byte_token("<0xff>"), Some(255));
        assert_eq!(parse_byte_token("<0x0>"), None);
        assert_eq!(parse_byte_token("0x0A"), None);
    }

    #[test]
    fn alphabet_is_a_bijection() {
        let a = byte_level_alphabet();
        let set: std::collections::HashSet<char> = a.iter().copied().collect();
        assert_eq!(set.len(), 256);
        assert_eq!(a[b' ' as usize], 'Ġ');
        assert_eq!(a[b'\n' as usize], 'Ċ');
        assert_eq!(a[b'A' as usize], 'A');
    }

    #[test]
    fn every_known_pre_tokenizer_compiles() {
        for name in PreTokenizerKind::KNOWN {
            let kind = PreTokenizerKind::from_gguf(name).expect("known name maps to a kind");
            for p in kind.patterns() {
                Split::new(
                    SplitPattern::Regex((*p).to_string()),
                    SplitDelimiterBehavior::Isolated,
                    false,
                )
                .unwrap_or_else(|e| panic!("{name}: {p}: {e}"));
            }
        }
    }
}
