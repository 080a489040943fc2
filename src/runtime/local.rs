//! `LocalModel`: the in-process runtime behind the `LanguageModel` seam.
//!
//! It owns a `Session` (decoder + KV cache) and the GGUF's tokenizer and chat template. A
//! request is rendered with the template, tokenized, and handed to the session, which reuses
//! the longest cached prefix; text streams out through the tokenizer's UTF-8-safe stream
//! decoder, holding back any tail that could still become a stop string.

use std::path::Path;

use candle_core::Device;

use crate::lm::{
    BackendError, CancelToken, Constraint, GenOutput, GenRequest, LanguageModel, LmError,
    TokenLogprob, TopLogprob,
};
use crate::runtime::constrain::{GrammarConstraint, GrammarVocab, TokenConstraint};
use crate::runtime::decoder::{Decoder, DecoderError};
use crate::runtime::fit::{self, Fit, FitError};
use crate::runtime::gguf::{GgufError, GgufFile};
use crate::runtime::options::RuntimeOptions;
use crate::runtime::sampling::TokenScore;
use crate::runtime::session::{Flow, GenOptions, GenerateError, Session};
use crate::runtime::tokenizer::{GgufTokenizer, TokenizerError};
use crate::sizing::Hardware;

/// Errors loading a model.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LoadError {
    /// The file or its weights are unusable.
    #[error("loading {path}: {source}")]
    Decoder {
        /// The file.
        path: String,
        /// Why.
        #[source]
        source: DecoderError,
    },
    /// The tokenizer metadata is unusable.
    #[error("loading the tokenizer of {path}: {source}")]
    Tokenizer {
        /// The file.
        path: String,
        /// Why.
        #[source]
        source: TokenizerError,
    },
    /// The sizing model says the model will not fit in free memory (checked before any
    /// tensor is allocated; `LoadOptions::force` overrides).
    #[error("loading {path}: {source}")]
    WontFit {
        /// The file.
        path: String,
        /// The shortfall and what would fit.
        #[source]
        source: FitError,
    },
}

/// How to load a model.
#[derive(Debug, Clone, Default)]
pub struct LoadOptions {
    /// Load even when the fit check says the model will not fit.
    pub force: bool,
    /// The hardware to check the fit against; `None`: the device's own free memory (the CPU's
    /// `MemAvailable`; the check is skipped where boyd cannot tell).
    pub hardware: Option<Hardware>,
    /// Engine, kernel set, prefill chunk and profiling (the CLI reads them from `BOYD_*`).
    pub runtime: RuntimeOptions,
}

/// A GGUF model loaded in this process.
#[derive(Debug)]
pub struct LocalModel {
    session: Session,
    tokenizer: GgufTokenizer,
    name: String,
    /// The grammar engine over this vocabulary, built on the first constrained request.
    grammar: Option<GrammarVocab>,
    /// The last compiled constraint, unstarted: an agent sends the same one every step.
    compiled: Option<(Constraint, GrammarConstraint)>,
}

impl LocalModel {
    /// Load `path` onto `device` with a context of at most `ctx` tokens (capped at the
    /// model's own context length).
    pub fn load(path: &Path, device: &Device, ctx: usize) -> Result<Self, LoadError> {
        Self::load_with(path, device, ctx, &LoadOptions::default())
    }

    /// [`LocalModel::load`] with options: the fit check runs on the header before any tensor
    /// is allocated and refuses a model that will not fit unless `opts.force` is set.
    pub fn load_with(
        path: &Path,
        device: &Device,
        ctx: usize,
        opts: &LoadOptions,
    ) -> Result<Self, LoadError> {
        let p = path.display().to_string();
        let decoder_err = |source| LoadError::Decoder {
            path: p.clone(),
            source,
        };
        let mut file = GgufFile::open(path).map_err(|e| decoder_err(DecoderError::Gguf(e)))?;
        check_fit(&file, device, ctx, opts).map_err(|e| match e {
            FitError::Header(e) => decoder_err(DecoderError::Gguf(e)),
            source => LoadError::WontFit {
                path: p.clone(),
                source,
            },
        })?;
        let mut tokenizer =
            GgufTokenizer::from_header(&file.header).map_err(|source| LoadError::Tokenizer {
                path: p.clone(),
                source,
            })?;
        // Template errors (fuel, output cap) name the model file they came from.
        tokenizer.set_model_file(&p);
        // Token ids past the embedding's rows would fail mid-generation: refuse at load.
        let vocab = file
            .header
            .arch_params()
            .map_err(|e| decoder_err(DecoderError::Gguf(e)))?
            .vocab as usize;
        if tokenizer.vocab_size() > vocab {
            let msg = format!(
                "the tokenizer has {} tokens but the model's vocabulary is {vocab}",
                tokenizer.vocab_size()
            );
            let e = DecoderError::Gguf(GgufError::Inconsistent(msg));
            return Err(decoder_err(e));
        }
        let decoder = Decoder::load_with_options(&mut file, device, ctx, &opts.runtime)
            .map_err(decoder_err)?;
        let name = match file.header.opt_str("general.name") {
            Ok(Some(n)) => n.to_string(),
            _ => path
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default(),
        };
        Ok(Self {
            session: Session::new(decoder, ctx)
                .with_prefill_chunk(opts.runtime.prefill_chunk)
                .with_fast_forward(opts.runtime.fast_forward),
            tokenizer,
            name,
            grammar: None,
            compiled: None,
        })
    }

    /// A fresh grammar state for `constraint` (the engine and the compiled grammar are cached).
    pub fn constraint_state(
        &mut self,
        constraint: &Constraint,
    ) -> Result<GrammarConstraint, LmError> {
        if let Some((c, g)) = &self.compiled {
            if c == constraint {
                return Ok(g.clone());
            }
        }
        let vocab = match &self.grammar {
            Some(v) => v,
            None => {
                let t0 = std::time::Instant::now();
                let v = GrammarVocab::from_tokenizer(&self.tokenizer)
                    .map_err(|e| LmError::Constraint(e.to_string()))?;
                tracing::debug!(
                    ms = t0.elapsed().as_secs_f64() * 1e3,
                    "built the grammar engine's token trie"
                );
                self.grammar.insert(v)
            }
        };
        let t0 = std::time::Instant::now();
        let g = vocab
            .compile(constraint)
            .map_err(|e| LmError::Constraint(e.to_string()))?;
        tracing::debug!(
            ms = t0.elapsed().as_secs_f64() * 1e3,
            "compiled the output constraint"
        );
        self.compiled = Some((constraint.clone(), g.clone()));
        Ok(g)
    }

    /// The session (decoder, KV cache).
    pub fn session(&self) -> &Session {
        &self.session
    }

    /// Mutable access to the session (benchmarks, tests).
    pub fn session_mut(&mut self) -> &mut Session {
        &mut self.session
    }

    /// The tokenizer.
    pub fn tokenizer(&self) -> &GgufTokenizer {
        &self.tokenizer
    }

    /// Tokenize the rendered conversation of `req`.
    pub fn prompt_tokens(&self, req: &GenRequest) -> Result<Vec<u32>, LmError> {
        let text = self
            .tokenizer
            .render_chat(&req.messages, true)
            .map_err(|e| LmError::Backend(BackendError::new(e)))?;
        tracing::debug!(prompt = %text, "rendered chat prompt");
        self.tokenizer
            .encode(&text, true)
            .map_err(|e| LmError::Backend(BackendError::new(e)))
    }
}

/// Run the fit check for loading `file` at `ctx` tokens onto `device`.
fn check_fit(
    file: &GgufFile,
    device: &Device,
    ctx: usize,
    opts: &LoadOptions,
) -> Result<(), FitError> {
    let Some(mut hw) = opts
        .hardware
        .clone()
        .or_else(|| fit::device_hardware(device))
    else {
        tracing::warn!("free memory of this device is unknown; skipping the fit check");
        return Ok(());
    };
    // The activations of the engine that will run the file on this device.
    hw.compute_layout = opts.runtime.engine.compute_layout(
        device.is_cpu(),
        file.header.tensors.iter().map(|t| t.ggml_type),
    );
    if device.is_cpu() {
        hw = hw.with_threads(rayon::current_num_threads());
    }
    let kv = fit::runtime_kv_dtype(hw.compute_layout, device, opts.runtime.kv_dtype);
    let e = match fit::estimate(&file.header, ctx, kv, &hw) {
        Err(FitError::Unsizable(e)) if opts.force => {
            tracing::warn!("cannot size the model ({e}); loading anyway (--force)");
            return Ok(());
        }
        other => other?,
    };
    match fit::decide(&e, opts.force)? {
        Fit::Fits { headroom } => {
            tracing::info!(need = %e.memory.total, %headroom, "fit check passed");
        }
        Fit::Forced(w) => tracing::warn!("{w}; loading anyway (--force)"),
    }
    Ok(())
}

/// Length of the longest suffix of `text` that is a proper prefix of some stop string: the
/// part that must be held back because it may still become a stop string.
fn held_back(text: &str, stops: &[String]) -> usize {
    let mut keep = 0;
    for stop in stops {
        for (i, _) in stop.char_indices().skip(1) {
            if text.ends_with(&stop[..i]) {
                keep = keep.max(i);
            }
        }
    }
    keep
}

impl LocalModel {
    /// Generate for `req`; with `top_logprobs` set, every generated token is scored (see
    /// [`Session::generate_scored`]) and `on_text` gets each piece with the scores of the
    /// tokens that produced it.
    fn generate_inner(
        &mut self,
        req: &GenRequest,
        top_logprobs: Option<usize>,
        on_text: &mut dyn FnMut(&str, &[TokenLogprob]),
        cancel: &CancelToken,
    ) -> Result<(GenOutput, Vec<TokenLogprob>), LmError> {
        let mut grammar = match &req.constraint {
            Some(c) => Some(self.constraint_state(c)?),
            None => None,
        };
        let prompt = self.prompt_tokens(req)?;
        let opts = GenOptions {
            sampling: req.sampling.clone(),
            max_tokens: req.max_tokens,
            eos: self.tokenizer.eos_ids(),
        };
        let tokenizer = &self.tokenizer;
        let mut stream = tokenizer.stream_decoder(true);
        let mut text = String::new();
        let mut emitted = 0;
        let mut stopped_at = None;
        let mut decode_err = None;
        // Scores of tokens whose text has not been handed to `on_text` yet, and all handed.
        let mut pending: Vec<TokenLogprob> = Vec::new();
        let mut scored: Vec<TokenLogprob> = Vec::new();
        let mut emit = |piece: &str, pending: &mut Vec<TokenLogprob>| {
            on_text(piece, pending);
            scored.append(pending);
        };
        let constraint = grammar.as_mut().map(|g| g as &mut dyn TokenConstraint);
        let result = self.session.generate_scored(
            &prompt,
            &opts,
            constraint,
            top_logprobs,
            cancel,
            &mut |id, score| {
                match stream.push(id) {
                    Ok(piece) => text.push_str(&piece),
                    Err(e) => {
                        decode_err = Some(e);
                        return Flow::Stop;
                    }
                }
                if let Some(s) = score {
                    pending.push(token_logprob(tokenizer, &s));
                }
                if let Some(pos) = req
                    .stop
                    .iter()
                    .filter_map(|s| {
                        text[emitted.min(text.len())..]
                            .find(s.as_str())
                            .map(|p| p + emitted)
                    })
                    .min()
                {
                    stopped_at = Some(pos);
                    if pos > emitted {
                        emit(&text[emitted..pos], &mut pending);
                    }
                    // Tokens wholly inside the stop string are not output.
                    pending.clear();
                    emitted = pos;
                    return Flow::Stop;
                }
                let safe = text.len() - held_back(&text, &req.stop);
                if safe > emitted {
                    emit(&text[emitted..safe], &mut pending);
                    emitted = safe;
                }
                Flow::Continue
            },
        );
        if let Some(e) = decode_err {
            return Err(LmError::Backend(BackendError::new(e)));
        }
        let out = result.map_err(|e| match e {
            GenerateError::Lm(e) => e,
            e @ (GenerateError::Constraint(_) | GenerateError::EmptyMask) => {
                LmError::Constraint(e.to_string())
            }
            other => LmError::Backend(BackendError::new(other)),
        })?;
        if let Some(g) = &grammar {
            let st = g.stats();
            tracing::debug!(
                masks = st.masks,
                mean_us = st.mean().as_secs_f64() * 1e6,
                max_us = st.max.as_secs_f64() * 1e6,
                decode_s = out.usage.decode_s,
                "output constraint mask time"
            );
        }
        if let Some(pos) = stopped_at {
            text.truncate(pos);
        } else {
            text.push_str(&stream.finish());
            if text.len() > emitted || !pending.is_empty() {
                emit(&text[emitted..], &mut pending);
            }
        }
        Ok((
            GenOutput {
                text,
                finish: out.finish,
                usage: out.usage,
            },
            scored,
        ))
    }
}

/// A scored token as text and bytes (ids past the tokenizer's vocabulary, padding rows of the
/// output matrix, have no bytes).
fn token_logprob(tokenizer: &GgufTokenizer, s: &TokenScore) -> TokenLogprob {
    let piece = |id: u32| {
        let bytes = tokenizer.token_bytes(id).unwrap_or_default().to_vec();
        (String::from_utf8_lossy(&bytes).into_owned(), bytes)
    };
    let (token, bytes) = piece(s.id);
    TokenLogprob {
        token,
        bytes,
        logprob: s.logprob,
        top_logprobs: s
            .top
            .iter()
            .map(|&(id, logprob)| {
                let (token, bytes) = piece(id);
                TopLogprob {
                    token,
                    bytes,
                    logprob,
                }
            })
            .collect(),
    }
}

impl LanguageModel for LocalModel {
    fn generate(
        &mut self,
        req: &GenRequest,
        on_text: &mut dyn FnMut(&str),
        cancel: &CancelToken,
    ) -> Result<GenOutput, LmError> {
        let mut plain = |piece: &str, _: &[TokenLogprob]| on_text(piece);
        Ok(self.generate_inner(req, None, &mut plain, cancel)?.0)
    }

    /// Log-probabilities from the log-softmax of the raw logits, before the repetition
    /// penalty, the output constraint's mask, temperature and top-k/top-p.
    fn generate_logprobs(
        &mut self,
        req: &GenRequest,
        top_logprobs: usize,
        on_text: &mut dyn FnMut(&str, &[TokenLogprob]),
        cancel: &CancelToken,
    ) -> Result<(GenOutput, Vec<TokenLogprob>), LmError> {
        self.generate_inner(req, Some(top_logprobs), on_text, cancel)
    }

    fn context_length(&self) -> usize {
        self.session.context_length()
    }

    fn name(&self) -> String {
        self.name.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::held_back;

    #[test]
    fn holds_back_partial_stop_strings() {
        let stops = vec!["Observation:".to_string()];
        assert_eq!(held_back("Thought: x\nObserv", &stops), 6);
        assert_eq!(held_back("Thought: x\n", &stops), 0);
        assert_eq!(held_back("O", &stops), 1);
    }
}
