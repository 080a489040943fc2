//! Output constraints: a grammar or JSON schema turned into a per-token mask, one link of the
//! sampler chain.
//!
//! [`GrammarVocab`] binds the grammar engine (llguidance) to one model's vocabulary: a token
//! trie built from each token's bytes (`GgufTokenizer::token_bytes`, so byte-level BPE and
//! SentencePiece vocabularies work alike, with control tokens behind llguidance's `0xFF` marker
//! so no grammar text can match them). It is built once per model. [`GrammarVocab::compile`]
//! turns a [`Constraint`] into a [`GrammarConstraint`], the [`TokenConstraint`] the session
//! drives: before each sample it computes the allowed set ([`TokenMask`]); after it, it commits
//! the sampled token; when the grammar admits nothing more, generation ends with
//! `FinishReason::ConstraintDone`. Because every sampled token is inside the mask, the output is
//! in the grammar's language by construction; only `max_tokens` can cut it short.
//!
//! JSON schemas get llguidance's `x-guidance` options unless they carry their own: separators
//! `", "` and `": "` and no free whitespace, which is how the agent's prompt writes its
//! actions, and which leaves a small model no whitespace loops to fall into. Object properties
//! come out in schema order (serde_json's `preserve_order` keeps the order they were written).

use std::sync::Arc;
use std::time::{Duration, Instant};

use llguidance::api::TopLevelGrammar;
use llguidance::toktrie::{ApproximateTokEnv, TokEnv, TokRxInfo, TokTrie, TokenizerEnv};
use llguidance::{Matcher, ParserFactory};
use serde_json::{json, Value};

use crate::lm::Constraint;
use crate::runtime::sampling::TokenMask;
use crate::runtime::tokenizer::{GgufTokenizer, TokenType};

/// Longest token (in bytes) the trie accepts; longer ones can never be sampled under a
/// constraint (llguidance's trie allows about 1,024).
const MAX_TOKEN_BYTES: usize = 1000;

/// llguidance's marker for special tokens in the trie.
const SPECIAL_MARKER: u8 = 0xFF;

/// Errors building or applying an output constraint.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConstraintError {
    /// The vocabulary cannot back a token trie.
    #[error("the vocabulary cannot be used for constrained decoding: {0}")]
    Vocabulary(String),
    /// The grammar or schema does not compile.
    #[error("the {kind} constraint does not compile: {reason}")]
    Compile {
        /// `json_schema` or `lark`.
        kind: &'static str,
        /// The engine's message.
        reason: String,
    },
    /// The engine failed while decoding (an internal error or a budget it ran out of).
    #[error("the grammar engine failed while decoding: {0}")]
    Engine(String),
    /// A token outside the last mask was committed.
    #[error("token {token} is not allowed by the constraint here")]
    Rejected {
        /// The token.
        token: u32,
    },
}

/// A constraint the session consults around each sampled token.
pub trait TokenConstraint {
    /// The tokens allowed next. Includes end-of-generation ids exactly when the output so far
    /// is complete.
    fn mask(&mut self) -> Result<&TokenMask, ConstraintError>;
    /// Advance past `token`, which the sampler drew under the last mask.
    fn commit(&mut self, token: u32) -> Result<(), ConstraintError>;
    /// Whether the output is complete and admits nothing more: generation must end.
    fn is_done(&self) -> bool;
    /// The tokens the constraint forces next, already committed (the caller emits them
    /// without sampling). Empty when the next token is a real choice.
    fn take_forced(&mut self) -> Vec<u32> {
        Vec::new()
    }
}

/// Time spent computing masks.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct MaskStats {
    /// Masks computed.
    pub masks: usize,
    /// Total time computing them.
    pub total: Duration,
    /// The slowest one.
    pub max: Duration,
}

impl MaskStats {
    /// Mean time per mask.
    pub fn mean(&self) -> Duration {
        if self.masks == 0 {
            Duration::ZERO
        } else {
            self.total / self.masks as u32
        }
    }

    fn add(&mut self, d: Duration) {
        self.masks += 1;
        self.total += d;
        self.max = self.max.max(d);
    }
}

/// The grammar engine bound to one vocabulary (build once per model; cheap to share).
#[derive(Clone)]
pub struct GrammarVocab {
    factory: Arc<ParserFactory>,
    vocab_size: usize,
}

impl std::fmt::Debug for GrammarVocab {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GrammarVocab")
            .field("vocab_size", &self.vocab_size)
            .finish_non_exhaustive()
    }
}

impl GrammarVocab {
    /// The vocabulary of `tok`: each token's bytes, with control, unknown and unused tokens
    /// (and every end-of-generation token) marked special.
    pub fn from_tokenizer(tok: &GgufTokenizer) -> Result<Self, ConstraintError> {
        let n = tok.vocab_size();
        let mut words = Vec::with_capacity(n);
        let mut special = Vec::with_capacity(n);
        for id in 0..n as u32 {
            let bytes = tok
                .token_bytes(id)
                .map_err(|e| ConstraintError::Vocabulary(e.to_string()))?;
            words.push(bytes.to_vec());
            special.push(
                tok.is_eog(id)
                    || tok.token_type(id).is_some_and(|t| {
                        matches!(
                            t,
                            TokenType::Control | TokenType::Unknown | TokenType::Unused
                        )
                    }),
            );
        }
        // Forced tokens (fast-forward) need the model's own tokenization of the forced bytes;
        // a tokenizer that prefixes a space to every text cannot tokenize a fragment alone.
        let encoder: Option<Encoder> = (!tok.adds_space_prefix()).then(|| {
            let t = tok.clone();
            Arc::new(move |s: &str| t.encode_with(s, false, false).ok()) as Encoder
        });
        Self::build(words, &special, &tok.eos_ids(), encoder)
    }

    /// A vocabulary from raw token bytes; `special[id]` marks tokens no grammar text may match
    /// (end-of-generation ids are allowed exactly where the grammar is complete).
    pub fn from_words(
        words: Vec<Vec<u8>>,
        special: &[bool],
        eos: &[u32],
    ) -> Result<Self, ConstraintError> {
        Self::build(words, special, eos, None)
    }

    fn build(
        mut words: Vec<Vec<u8>>,
        special: &[bool],
        eos: &[u32],
        encoder: Option<Encoder>,
    ) -> Result<Self, ConstraintError> {
        let n = words.len();
        let vocab = u32::try_from(n)
            .ok()
            .filter(|&v| v > 0 && v < 0x00ff_ffff)
            .ok_or_else(|| ConstraintError::Vocabulary(format!("{n} tokens")))?;
        let eos: Vec<u32> = eos.iter().copied().filter(|&e| e < vocab).collect();
        let Some(&first_eos) = eos.first() else {
            return Err(ConstraintError::Vocabulary(
                "no end-of-generation token, so a complete output could not end".into(),
            ));
        };
        for (id, w) in words.iter_mut().enumerate() {
            if special.get(id).copied().unwrap_or(false) || eos.contains(&(id as u32)) {
                w.insert(0, SPECIAL_MARKER);
            }
            if w.len() > MAX_TOKEN_BYTES {
                w.clear();
            }
        }
        let info = TokRxInfo::new(vocab, first_eos);
        // The trie builder asserts on malformed input; keep any such panic inside this call.
        let trie = std::panic::catch_unwind(|| TokTrie::from(&info, &words).with_eos_tokens(&eos))
            .map_err(|_| ConstraintError::Vocabulary("the token trie could not be built".into()))?;
        let env: TokEnv = match encoder {
            Some(encode) => Arc::new(CanonicalTokEnv { trie, encode }),
            None => Arc::new(ApproximateTokEnv::new(trie)),
        };
        let mut factory = ParserFactory::new_simple(&env)
            .map_err(|e| ConstraintError::Vocabulary(e.to_string()))?;
        factory.quiet();
        Ok(Self {
            factory: Arc::new(factory),
            vocab_size: n,
        })
    }

    /// Number of tokens.
    pub fn vocab_size(&self) -> usize {
        self.vocab_size
    }

    /// Compile `constraint` into a fresh per-generation state.
    pub fn compile(&self, constraint: &Constraint) -> Result<GrammarConstraint, ConstraintError> {
        let (kind, grammar) = match constraint {
            Constraint::JsonSchema(schema) => (
                "json_schema",
                TopLevelGrammar::from_json_schema(with_default_json_format(schema)),
            ),
            Constraint::Lark(src) => ("lark", TopLevelGrammar::from_lark(src.clone())),
        };
        let compile_err = |reason: String| ConstraintError::Compile { kind, reason };
        let parser = self
            .factory
            .create_parser(grammar)
            .map_err(|e| compile_err(e.to_string()))?;
        let mut matcher = Matcher::new(Ok(parser));
        if let Some(e) = matcher.get_error() {
            return Err(compile_err(e));
        }
        for w in matcher.grammar_warnings() {
            tracing::warn!(kind, warning = %w, "output constraint");
        }
        Ok(GrammarConstraint {
            matcher,
            mask: TokenMask::none(self.vocab_size),
            stats: MaskStats::default(),
        })
    }
}

/// The model's tokenizer on a text fragment (`None` when it fails).
type Encoder = Arc<dyn Fn(&str) -> Option<Vec<u32>> + Send + Sync>;

/// A token environment whose tokenization is the model's own, so llguidance may force tokens
/// (fast-forward): a forced `", "args": ` becomes the ids the model would have produced.
struct CanonicalTokEnv {
    trie: TokTrie,
    encode: Encoder,
}

impl TokenizerEnv for CanonicalTokEnv {
    fn tok_trie(&self) -> &TokTrie {
        &self.trie
    }

    fn tokenize_bytes(&self, s: &[u8]) -> Vec<u32> {
        // Forced bytes that are not whole UTF-8 fall back to the trie's greedy split.
        std::str::from_utf8(s)
            .ok()
            .and_then(|text| (self.encode)(text))
            .unwrap_or_else(|| self.trie.greedy_tokenize(s))
    }

    fn tokenize_is_canonical(&self) -> bool {
        true
    }
}

/// `schema` with llguidance's formatting options (`x-guidance`) defaulted to the prompt's
/// style: `", "` and `": "`, no free whitespace. A schema that sets its own keeps them.
fn with_default_json_format(schema: &Value) -> Value {
    let mut schema = schema.clone();
    match &mut schema {
        Value::Object(map) => {
            map.entry("x-guidance").or_insert_with(|| {
                json!({
                    "item_separator": ", ",
                    "key_separator": ": ",
                    "whitespace_flexible": false
                })
            });
            schema
        }
        // `true`, `false` and the like: nothing to attach options to.
        _ => schema,
    }
}

/// One generation's grammar state (see the module docs).
#[derive(Clone)]
pub struct GrammarConstraint {
    matcher: Matcher,
    mask: TokenMask,
    stats: MaskStats,
}

impl std::fmt::Debug for GrammarConstraint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GrammarConstraint")
            .field("stopped", &self.matcher.is_stopped())
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

impl GrammarConstraint {
    /// Time spent computing masks so far.
    pub fn stats(&self) -> MaskStats {
        self.stats
    }

    /// Whether the output so far is a complete match (end-of-generation would be allowed).
    pub fn is_accepting(&mut self) -> bool {
        self.matcher.is_accepting().unwrap_or(false)
    }

    /// Commit a whole sequence (e.g. a forced prefix); fails on the first token not allowed.
    pub fn commit_all(&mut self, tokens: &[u32]) -> Result<(), ConstraintError> {
        for &t in tokens {
            self.commit(t)?;
        }
        Ok(())
    }
}

impl TokenConstraint for GrammarConstraint {
    fn mask(&mut self) -> Result<&TokenMask, ConstraintError> {
        let t0 = Instant::now();
        let vob = self
            .matcher
            .compute_mask()
            .map_err(|e| ConstraintError::Engine(e.to_string()))?;
        self.mask.set_words(vob.as_slice());
        self.stats.add(t0.elapsed());
        Ok(&self.mask)
    }

    fn commit(&mut self, token: u32) -> Result<(), ConstraintError> {
        // `try_consume_tokens` validates first, so a token outside the grammar is a typed
        // rejection and leaves the state as it was.
        match self.matcher.try_consume_tokens(&[token]) {
            Ok(1) => Ok(()),
            Ok(_) => Err(ConstraintError::Rejected { token }),
            Err(e) => Err(ConstraintError::Engine(e.to_string())),
        }
    }

    fn is_done(&self) -> bool {
        self.matcher.is_stopped() && !self.matcher.is_error()
    }

    fn take_forced(&mut self) -> Vec<u32> {
        if self.matcher.is_stopped() {
            return Vec::new();
        }
        // llguidance's fast-forward tokens: forced bytes tokenized canonically, without the
        // last token when a longer one could still start there.
        self.matcher.consume_ff_tokens()
    }
}
