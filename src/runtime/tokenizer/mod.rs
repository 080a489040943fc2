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

mod load;
mod pipeline;
mod pretokenizer;
mod stream;

use pipeline::{build_bpe, build_spm, make_pieces};
pub use pretokenizer::PreTokenizerKind;
pub use stream::StreamDecoder;

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

impl GgufTokenizer {
    /// Read the GGUF header at `path` and build its tokenizer.
    pub fn from_path(path: &Path) -> Result<Self> {
        let header = GgufHeader::read_path(path)?;
        Self::from_header(&header)
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

    /// Whether every text is tokenized with a space put in front (SentencePiece's
    /// `add_space_prefix`): such a tokenizer cannot tokenize a fragment of a longer text alone.
    pub fn adds_space_prefix(&self) -> bool {
        self.add_space_prefix
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

    /// Name the model file in the chat template's errors.
    pub fn set_model_file(&mut self, model_file: &str) {
        if let Ok(t) = self.chat.as_mut() {
            t.set_origin(model_file);
        }
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

#[cfg(test)]
mod tests {
    use super::pipeline::{byte_level_alphabet, parse_byte_token};
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
