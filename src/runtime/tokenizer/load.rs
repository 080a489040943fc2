//! Building a [`GgufTokenizer`] from a header's `tokenizer.*` metadata.

use super::*;

/// Token texts that end a turn or the text, whatever their declared type (llama.cpp's list).
pub(super) const END_OF_GENERATION_TEXTS: &[&str] = &[
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "<|eom_id|>",
    "<EOT>",
];

/// Texts that llama.cpp takes as the end-of-turn token when `eot_token_id` is absent.
pub(super) const EOT_TEXTS: &[&str] = &[
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "<EOT>",
    "<｜end▁of▁sentence｜>",
];

pub(super) fn string_array<'a>(
    h: &'a GgufHeader,
    key: &'static str,
) -> Result<Option<&'a [String]>> {
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

pub(super) fn opt_bool(h: &GgufHeader, key: &'static str) -> Result<Option<bool>> {
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

pub(super) fn opt_id(h: &GgufHeader, key: &'static str, vocab: usize) -> Result<Option<u32>> {
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

pub(super) fn build_err(e: impl std::fmt::Display) -> TokenizerError {
    TokenizerError::Build(e.to_string())
}

impl GgufTokenizer {
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
}
