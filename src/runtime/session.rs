//! A session: one decoder, one KV cache, and the tokens that cache holds.
//!
//! Every request goes through `prefill`, which finds the longest common prefix between the new
//! prompt and the cached tokens, truncates the cache to it and runs only the rest. An agent
//! whose prompt grows by one step at a time therefore pays only for the new step's tokens.
//!
//! A prompt that shares almost nothing with the cache (another phase's system prompt: OODA's
//! Orient and Decide alternate every cycle, and the answer step follows the planner) does not
//! throw the cache away: it is kept as a spare, up to [`SPARE_SLOTS`] of them within
//! [`SPARE_BUDGET_BYTES`], and the next prompt continues from whichever cache holds most of it
//! (llama-server's slots and prompt cache do the same across requests).
//! Generation checks a cancel token between tokens and refuses prompts that do not fit the
//! context instead of overflowing it.

use std::time::Instant;

use candle_core::Tensor;

use crate::lm::{CancelToken, FinishReason, LmError, SamplingParams, Usage};
use crate::runtime::constrain::{ConstraintError, TokenConstraint};
use crate::runtime::decoder::{Decoder, DecoderError};
use crate::runtime::kv_cache::KvCache;
use crate::runtime::sampling::{score_token, Sampler, TokenScore};

/// Tokens run through the model per forward call during prefill (llama.cpp's ubatch).
pub const PREFILL_CHUNK: usize = 512;

/// Most caches kept besides the active one for prompts of other kinds.
pub const SPARE_SLOTS: usize = 2;

/// Most bytes the spare caches hold allocated together; a spare over it is dropped (the
/// oldest first).
/// A 0.5B agent model's 4,096-token f16 cache is about 48 MiB; an 8B model's 8k cache is 1 GiB
/// and is never kept as a spare.
pub const SPARE_BUDGET_BYTES: u64 = 512 << 20;

/// A prompt that keeps fewer cached tokens than this, while throwing at least this many away,
/// starts a fresh cache and keeps the old one as a spare.
const SPARE_MIN_TOKENS: usize = 64;

/// A kept cache, the tokens it holds, and when it was last used.
#[derive(Debug)]
struct Spare {
    cache: KvCache,
    tokens: Vec<u32>,
    used: u64,
}

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
    /// Run the tokens an output constraint forces in one batched pass (see
    /// [`Session::generate_constrained`]).
    fast_forward: bool,
    /// Caches of earlier prompts of another kind, for reuse.
    spares: Vec<Spare>,
    /// Most spares kept.
    spare_slots: usize,
    /// Requests seen (the spares' use clock).
    clock: u64,
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
            fast_forward: true,
            spares: Vec::new(),
            spare_slots: SPARE_SLOTS,
            clock: 0,
        }
    }

    /// Keep at most `n` spare caches (0: one cache, truncated to each new prompt).
    pub fn with_spare_slots(mut self, n: usize) -> Self {
        self.spare_slots = n;
        self.spares.truncate(n);
        self
    }

    /// Positions held by the spare caches, in use order (tests and reports).
    pub fn spare_lens(&self) -> Vec<usize> {
        let mut s: Vec<(u64, usize)> = self
            .spares
            .iter()
            .map(|s| (s.used, s.tokens.len()))
            .collect();
        s.sort_unstable();
        s.into_iter().map(|(_, n)| n).collect()
    }

    /// Make the cache holding most of `prompt` the active one; keep the active cache as a spare
    /// when `prompt` would throw most of it away.
    fn pick_cache(&mut self, prompt: &[u32]) {
        self.clock += 1;
        if self.spare_slots == 0 {
            return;
        }
        let common = |t: &[u32]| t.iter().zip(prompt).take_while(|(a, b)| a == b).count();
        let here = common(&self.tokens);
        let best = self
            .spares
            .iter()
            .enumerate()
            .map(|(i, s)| (common(&s.tokens), i))
            .max();
        if let Some((_, i)) = best.filter(|(n, _)| *n > here) {
            let spare = &mut self.spares[i];
            std::mem::swap(&mut spare.cache, &mut self.cache);
            std::mem::swap(&mut spare.tokens, &mut self.tokens);
            spare.used = self.clock;
            return;
        }
        let lost = self.tokens.len() - here;
        if here >= SPARE_MIN_TOKENS || lost < SPARE_MIN_TOKENS {
            return;
        }
        let fresh = self.decoder.new_cache(self.cache.max_len());
        self.spares.push(Spare {
            cache: std::mem::replace(&mut self.cache, fresh),
            tokens: std::mem::take(&mut self.tokens),
            used: self.clock,
        });
        // The oldest go first, over the count or the byte budget.
        self.spares.sort_by_key(|s| std::cmp::Reverse(s.used));
        let mut bytes = 0u64;
        let mut keep = 0usize;
        for s in &self.spares {
            bytes += s.cache.allocated_bytes();
            if keep >= self.spare_slots || bytes > SPARE_BUDGET_BYTES {
                break;
            }
            keep += 1;
        }
        self.spares.truncate(keep);
    }

    /// Prefill `chunk` tokens per forward call (at least one).
    pub fn with_prefill_chunk(mut self, chunk: usize) -> Self {
        self.prefill_chunk = chunk.max(1);
        self
    }

    /// Tokens per forward call during prefill.
    /// Whether forced tokens are appended in one batched pass (on by default; off, each is
    /// generated by its own decode pass, the way the output was produced before).
    pub fn with_fast_forward(mut self, on: bool) -> Self {
        self.fast_forward = on;
        self
    }

    /// [`Session::with_fast_forward`] on a session in use.
    pub fn set_fast_forward(&mut self, on: bool) {
        self.fast_forward = on;
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
        self.spares.clear();
    }

    /// Bring the cache to exactly `prompt`, reusing the longest cached prefix, and return the
    /// logits after the last prompt token.
    pub fn prefill(&mut self, prompt: &[u32]) -> Result<(Vec<f32>, PrefillStats), DecoderError> {
        if prompt.is_empty() {
            return Err(candle_core::Error::Msg("empty prompt".into()).into());
        }
        self.pick_cache(prompt);
        let common = self
            .tokens
            .iter()
            .zip(prompt)
            .take_while(|(a, b)| a == b)
            .count();
        // At least the last prompt token is run again: its logits are needed.
        // A sliding-window ring may keep less than asked (then nothing).
        let reused = self.cache.truncate(common.min(prompt.len() - 1));
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

    /// Keep only the first `n` cached positions and return how many are kept (fewer when a
    /// sliding-window layer's ring no longer holds what position `n` attends to; see
    /// [`KvCache::truncate`]).
    pub fn truncate(&mut self, n: usize) -> usize {
        let kept = self.cache.truncate(n);
        self.tokens.truncate(kept);
        kept
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
    /// admits nothing more. With fast-forward on (the default), tokens the constraint forces
    /// (no choice left: a JSON key, the rest of a tool name) are emitted without sampling and
    /// run in one batched pass with the token before them, or with the prompt's prefill when
    /// they come first; `Usage::decode_passes` and `Usage::forced_tokens` count both.
    pub fn generate_constrained(
        &mut self,
        prompt: &[u32],
        opts: &GenOptions,
        constraint: Option<&mut dyn TokenConstraint>,
        cancel: &CancelToken,
        on_token: &mut dyn FnMut(u32) -> Flow,
    ) -> Result<TokenOutput, GenerateError> {
        let mut plain = |t: u32, _: Option<TokenScore>| on_token(t);
        self.generate_scored(prompt, opts, constraint, None, cancel, &mut plain)
    }

    /// [`generate_constrained`](Self::generate_constrained) that, with `top_logprobs` set,
    /// also hands `on_token` each generated token's [`TokenScore`]: its log-probability and
    /// the `top_logprobs` most likely tokens, from the log-softmax of the raw logits (before
    /// the repetition penalty, the constraint's mask, temperature and top-k/top-p; see
    /// [`score_token`]). Scoring turns fast-forward off for this call, so that every token,
    /// forced ones included, comes out of a decode pass with logits of its own.
    pub fn generate_scored(
        &mut self,
        prompt: &[u32],
        opts: &GenOptions,
        mut constraint: Option<&mut dyn TokenConstraint>,
        top_logprobs: Option<usize>,
        cancel: &CancelToken,
        on_token: &mut dyn FnMut(u32, Option<TokenScore>) -> Flow,
    ) -> Result<TokenOutput, GenerateError> {
        let fast_forward = self.fast_forward && top_logprobs.is_none();
        let context = self.context_length();
        if prompt.len() >= context {
            return Err(LmError::ContextExceeded {
                prompt: prompt.len(),
                max_new: opts.max_tokens,
                context,
            }
            .into());
        }
        let mut out = Vec::new();
        let mut passes = 0usize;
        let mut sampled = 0usize;
        // Tokens the constraint forces before the first choice (`{"thought": "` of an agent
        // step) ride along with the prompt's prefill.
        let mut pre: Vec<u32> = Vec::new();
        let mut early: Option<FinishReason> = None;
        if fast_forward {
            if let Some(c) = constraint.as_deref_mut() {
                let room = opts
                    .max_tokens
                    .min(context.saturating_sub(prompt.len() + 1));
                let mut on_forced = |t: u32| on_token(t, None);
                early = emit_forced(c, room, &opts.eos, &mut out, &mut pre, &mut on_forced);
            }
        }
        let t0 = Instant::now();
        let (mut logits, stats) = if pre.is_empty() {
            self.prefill(prompt)?
        } else {
            let mut full = Vec::with_capacity(prompt.len() + pre.len());
            full.extend_from_slice(prompt);
            full.extend_from_slice(&pre);
            let (l, s) = self.prefill(&full)?;
            // The forced tokens are output, not prompt.
            (
                l,
                PrefillStats {
                    prompt: prompt.len(),
                    reused: s.reused.min(prompt.len()),
                    prefilled: s.prefilled.saturating_sub(pre.len()),
                },
            )
        };
        let prefill_s = t0.elapsed().as_secs_f64();
        let mut sampler = Sampler::new(opts.sampling.clone());
        let t1 = Instant::now();
        let finish = loop {
            if let Some(reason) = early.take() {
                break reason;
            }
            if cancel.is_cancelled() {
                break FinishReason::Cancelled;
            }
            if out.len() >= opts.max_tokens {
                break FinishReason::Length;
            }
            let raw = top_logprobs.map(|_| logits.clone());
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
            sampled += 1;
            let score = raw.map(|r| score_token(&r, next, top_logprobs.unwrap_or(0)));
            let flow = on_token(next, score);
            if flow == Flow::Stop {
                // The stop token is emitted but not run: the cache ends before it.
                break FinishReason::Stop;
            }
            if constraint.as_deref().is_some_and(|c| c.is_done()) {
                // Like a stop: the last token is emitted but not run.
                break FinishReason::ConstraintDone;
            }
            // Tokens the constraint forces next (a JSON key, a tool name's tail, `", "args": `)
            // are emitted now and run with `next` in one batched pass instead of one decode
            // pass each. The constraint has already advanced past them.
            let mut batch = vec![next];
            let mut end: Option<FinishReason> = None;
            if fast_forward {
                if let Some(c) = constraint.as_deref_mut() {
                    let room = opts.max_tokens.saturating_sub(out.len());
                    let mut on_forced = |t: u32| on_token(t, None);
                    end = emit_forced(c, room, &opts.eos, &mut out, &mut batch, &mut on_forced);
                }
            }
            if self.tokens.len() + batch.len() >= context {
                break FinishReason::Length;
            }
            if let Some(reason) = end {
                if !batch.is_empty() {
                    self.decoder.forward_vec(&batch, &mut self.cache)?;
                    self.tokens.extend_from_slice(&batch);
                    passes += 1;
                }
                break reason;
            }
            logits = if batch.len() == 1 {
                self.step(next)?
            } else {
                let l = self.decoder.forward_vec(&batch, &mut self.cache)?;
                self.tokens.extend_from_slice(&batch);
                l
            };
            passes += 1;
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
            decode_passes: passes,
            forced_tokens: out.len() - sampled,
        };
        Ok(TokenOutput {
            tokens: out,
            finish,
            usage,
        })
    }
}

/// Emit the tokens `c` forces next, at most `room` of them: each is pushed to `out` (the
/// output) and, unless it ends generation, to `batch` (the tokens to run). Returns why
/// generation ends here, if it does: an end-of-generation id, a stop from `on_token`, forced
/// tokens beyond `room`, or a complete output (whose last token is emitted but not run).
fn emit_forced(
    c: &mut dyn TokenConstraint,
    room: usize,
    eos: &[u32],
    out: &mut Vec<u32>,
    batch: &mut Vec<u32>,
    on_token: &mut dyn FnMut(u32) -> Flow,
) -> Option<FinishReason> {
    let all = c.take_forced();
    for &t in all.iter().take(room) {
        if eos.contains(&t) {
            return Some(FinishReason::Eos);
        }
        out.push(t);
        if on_token(t) == Flow::Stop {
            return Some(FinishReason::Stop);
        }
        batch.push(t);
    }
    if all.len() > room {
        return Some(FinishReason::Length);
    }
    if c.is_done() {
        batch.pop();
        return Some(FinishReason::ConstraintDone);
    }
    None
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
