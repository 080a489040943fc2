//! A session: one decoder, one KV cache, and the tokens that cache holds.
//!
//! Every request goes through `prefill`, which finds the longest common prefix between the new
//! prompt and the cached tokens, truncates the cache to it and runs only the rest. An agent
//! whose prompt grows by one step at a time therefore pays only for the new step's tokens.
//! Generation checks a cancel token between tokens and refuses prompts that do not fit the
//! context instead of overflowing it.

use std::time::Instant;

use candle_core::Tensor;

use crate::lm::{CancelToken, FinishReason, LmError, SamplingParams, Usage};
use crate::runtime::constrain::{ConstraintError, TokenConstraint};
use crate::runtime::decoder::{Decoder, DecoderError};
use crate::runtime::kv_cache::KvCache;
use crate::runtime::sampling::Sampler;

/// Tokens run through the model per forward call during prefill (llama.cpp's ubatch).
pub const PREFILL_CHUNK: usize = 512;

/// What `prefill` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PrefillStats {
    /// Prompt tokens.
    pub prompt: usize,
    /// Tokens whose KV came from the cache.
    pub reused: usize,
    /// Tokens run through the model.
    pub prefilled: usize,
}

/// Options of one token-level generation.
#[derive(Debug, Clone)]
pub struct GenOptions {
    /// Sampling settings.
    pub sampling: SamplingParams,
    /// Most tokens to generate.
    pub max_tokens: usize,
    /// Token ids that end generation (not emitted).
    pub eos: Vec<u32>,
}

/// A finished token-level generation.
#[derive(Debug, Clone)]
pub struct TokenOutput {
    /// Generated ids (EOS excluded).
    pub tokens: Vec<u32>,
    /// Why it ended.
    pub finish: FinishReason,
    /// Accounting.
    pub usage: Usage,
}

/// Decision of the per-token callback.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    /// Keep generating.
    Continue,
    /// Stop now (a stop string matched).
    Stop,
}

/// One decoder plus its cache and the tokens in it.
#[derive(Debug)]
pub struct Session {
    decoder: Decoder,
    cache: KvCache,
    tokens: Vec<u32>,
    /// Tokens per forward call during prefill.
    prefill_chunk: usize,
}

impl Session {
    /// A session with a cache of at most `max_len` positions (capped at the model's context),
    /// prefilling [`PREFILL_CHUNK`] tokens per forward call.
    pub fn new(decoder: Decoder, max_len: usize) -> Self {
        let cache = decoder.new_cache(max_len);
        Self {
            decoder,
            cache,
            tokens: Vec::new(),
            prefill_chunk: PREFILL_CHUNK,
        }
    }

    /// Prefill `chunk` tokens per forward call (at least one).
    pub fn with_prefill_chunk(mut self, chunk: usize) -> Self {
        self.prefill_chunk = chunk.max(1);
        self
    }

    /// Tokens per forward call during prefill.
    pub fn prefill_chunk(&self) -> usize {
        self.prefill_chunk
    }

    /// The decoder.
    pub fn decoder(&self) -> &Decoder {
        &self.decoder
    }

    /// The KV cache.
    pub fn cache(&self) -> &KvCache {
        &self.cache
    }

    /// Tokens currently in the cache.
    pub fn cached_tokens(&self) -> &[u32] {
        &self.tokens
    }

    /// Context length of this session.
    pub fn context_length(&self) -> usize {
        self.cache.max_len()
    }

    /// Forget everything cached.
    pub fn reset(&mut self) {
        self.cache.clear();
        self.tokens.clear();
    }

    /// Bring the cache to exactly `prompt`, reusing the longest cached prefix, and return the
    /// logits after the last prompt token.
    pub fn prefill(&mut self, prompt: &[u32]) -> Result<(Vec<f32>, PrefillStats), DecoderError> {
        if prompt.is_empty() {
            return Err(candle_core::Error::Msg("empty prompt".into()).into());
        }
        let common = self
            .tokens
            .iter()
            .zip(prompt)
            .take_while(|(a, b)| a == b)
            .count();
        // At least the last prompt token is run again: its logits are needed.
        let reused = common.min(prompt.len() - 1);
        self.cache.truncate(reused);
        self.tokens.truncate(reused);
        let mut logits = None;
        for chunk in prompt[reused..].chunks(self.prefill_chunk) {
            logits = Some(self.decoder.forward(chunk, &mut self.cache, false)?);
            self.tokens.extend_from_slice(chunk);
        }
        let logits = logits
            .ok_or_else(|| candle_core::Error::Msg("nothing to prefill".into()))?
            .to_vec1::<f32>()?;
        Ok((
            logits,
            PrefillStats {
                prompt: prompt.len(),
                reused,
                prefilled: prompt.len() - reused,
            },
        ))
    }

    /// Run `tokens` at the current position without reading logits back (benchmarks).
    pub fn extend(&mut self, tokens: &[u32]) -> Result<(), DecoderError> {
        self.decoder.forward(tokens, &mut self.cache, false)?;
        self.tokens.extend_from_slice(tokens);
        Ok(())
    }

    /// Keep only the first `n` cached positions.
    pub fn truncate(&mut self, n: usize) {
        self.cache.truncate(n);
        self.tokens.truncate(n);
    }

    /// Run one token and return the logits after it.
    pub fn step(&mut self, token: u32) -> Result<Vec<f32>, DecoderError> {
        let logits = self.decoder.forward_vec(&[token], &mut self.cache)?;
        self.tokens.push(token);
        Ok(logits)
    }

    /// Logits for every position of `tokens`, run from an empty cache (validation and tests).
    pub fn logits_all(&mut self, tokens: &[u32]) -> Result<Tensor, DecoderError> {
        self.reset();
        let out = self.decoder.forward(tokens, &mut self.cache, true)?;
        self.tokens.extend_from_slice(tokens);
        Ok(out)
    }

    /// Generate after `prompt`. `on_token` sees each new id and may stop generation.
    pub fn generate(
        &mut self,
        prompt: &[u32],
        opts: &GenOptions,
        cancel: &CancelToken,
        on_token: &mut dyn FnMut(u32) -> Flow,
    ) -> Result<TokenOutput, GenerateError> {
        self.generate_constrained(prompt, opts, None, cancel, on_token)
    }

    /// [`generate`](Self::generate) with an optional output constraint: before each sample it
    /// gives the allowed tokens (the mask link of the sampler chain), each sampled token is
    /// committed to it, and generation ends with `FinishReason::ConstraintDone` as soon as it
    /// admits nothing more.
    pub fn generate_constrained(
        &mut self,
        prompt: &[u32],
        opts: &GenOptions,
        mut constraint: Option<&mut dyn TokenConstraint>,
        cancel: &CancelToken,
        on_token: &mut dyn FnMut(u32) -> Flow,
    ) -> Result<TokenOutput, GenerateError> {
        let context = self.context_length();
        if prompt.len() >= context {
            return Err(LmError::ContextExceeded {
                prompt: prompt.len(),
                max_new: opts.max_tokens,
                context,
            }
            .into());
        }
        let t0 = Instant::now();
        let (mut logits, stats) = self.prefill(prompt)?;
        let prefill_s = t0.elapsed().as_secs_f64();
        let mut sampler = Sampler::new(opts.sampling.clone());
        let mut out = Vec::new();
        let t1 = Instant::now();
        let finish = loop {
            if cancel.is_cancelled() {
                break FinishReason::Cancelled;
            }
            if out.len() >= opts.max_tokens {
                break FinishReason::Length;
            }
            let next = match constraint.as_deref_mut() {
                None => sampler.sample(&mut logits, &self.tokens, None),
                Some(c) => {
                    if c.is_done() {
                        break FinishReason::ConstraintDone;
                    }
                    let mask = c.mask()?;
                    match sampler.sample(&mut logits, &self.tokens, Some(mask)) {
                        Some(t) => Some(t),
                        // A grammar that allows nothing would be an engine bug.
                        None => return Err(GenerateError::EmptyMask),
                    }
                }
            };
            let Some(next) = next else {
                break FinishReason::Eos;
            };
            if opts.eos.contains(&next) {
                break FinishReason::Eos;
            }
            if let Some(c) = constraint.as_deref_mut() {
                c.commit(next)?;
            }
            out.push(next);
            let flow = on_token(next);
            if flow == Flow::Stop {
                // The stop token is emitted but not run: the cache ends before it.
                break FinishReason::Stop;
            }
            if constraint.as_deref().is_some_and(|c| c.is_done()) {
                // Like a stop: the last token is emitted but not run.
                break FinishReason::ConstraintDone;
            }
            if self.tokens.len() + 1 >= context {
                break FinishReason::Length;
            }
            logits = self.step(next)?;
        };
        let usage = Usage {
            prompt_tokens: stats.prompt,
            reused_tokens: stats.reused,
            prefilled_tokens: stats.prefilled,
            generated_tokens: out.len(),
            prefill_s,
            decode_s: t1.elapsed().as_secs_f64(),
            kv_bytes: self.cache.used_bytes(),
            context_used: self.cache.len(),
        };
        Ok(TokenOutput {
            tokens: out,
            finish,
            usage,
        })
    }
}

/// Errors of `Session::generate`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GenerateError {
    /// A budget or request problem.
    #[error(transparent)]
    Lm(#[from] LmError),
    /// The decoder failed.
    #[error(transparent)]
    Decoder(#[from] DecoderError),
    /// The output constraint failed.
    #[error(transparent)]
    Constraint(#[from] ConstraintError),
    /// The output constraint allowed no token at all.
    #[error("the output constraint allows no token here (and the output is not complete)")]
    EmptyMask,
}
