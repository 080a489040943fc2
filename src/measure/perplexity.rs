//! `boyd perplexity`'s engine: the sliding-window perplexity of a model over a text's tokens.
//!
//! The text's tokens (encoded without special tokens) are cut into windows of `ctx` text
//! tokens that start `stride` tokens apart: window `w` holds tokens `w·stride ..
//! min(w·stride + ctx, n)`, and the last window is the first that reaches the end. Each window
//! is evaluated from an empty KV cache, with the model's BOS token in front when its tokenizer
//! adds one (the BOS takes one of the `ctx` positions, so a window then holds `ctx − 1` text
//! tokens). A window scores only the tokens no earlier window scored: all but its first token
//! for the first window, and the tokens past the previous window's end for the others — so
//! every token after the first is scored exactly once, and with `stride = ctx / 2` (the
//! default) each scored token sees at least `ctx / 2` tokens of context. Perplexity is
//! `exp(mean negative log-likelihood)` over the scored tokens, with log-softmax in `f64`.
//!
//! `benches/compare/perplexity.py` computes the same windows with llama.cpp (through
//! llama-cpp-python, `logits_all`) on the token ids this module used.

use std::time::Instant;

use serde::Serialize;

use crate::runtime::decoder::{Decoder, DecoderError};

/// Errors computing a perplexity.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PerplexityError {
    /// The settings cannot make windows.
    #[error("{0}")]
    Settings(String),
    /// The model failed.
    #[error(transparent)]
    Decoder(#[from] DecoderError),
}

/// How to cut and evaluate the windows.
#[derive(Debug, Clone, Copy)]
pub struct PerplexityConfig {
    /// Positions per window (text tokens plus the BOS, when there is one).
    pub ctx: usize,
    /// Text tokens between the starts of consecutive windows (less than the window's text
    /// tokens).
    pub stride: usize,
    /// Tokens per forward call.
    pub batch: usize,
}

/// One window, in text-token indices.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Window {
    /// First text token of the window.
    pub begin: usize,
    /// One past its last text token.
    pub end: usize,
    /// First token it scores (the tokens `score_from .. end` are scored).
    pub score_from: usize,
}

/// The windows over `n` tokens with `len` text tokens per window, `stride` apart.
pub fn windows(n: usize, len: usize, stride: usize) -> Result<Vec<Window>, PerplexityError> {
    if n < 2 {
        return Err(PerplexityError::Settings(format!(
            "the text has {n} token(s); perplexity needs at least 2"
        )));
    }
    if len < 2 {
        return Err(PerplexityError::Settings(format!(
            "a window of {len} text token(s) scores nothing; use --ctx of at least 3"
        )));
    }
    if stride == 0 || stride >= len {
        return Err(PerplexityError::Settings(format!(
            "--stride {stride} must be between 1 and {} (the window's {len} text tokens less \
             one: a window's first token has no context, so the next window must cover it)",
            len - 1
        )));
    }
    let mut out = Vec::new();
    let mut scored_to = 1;
    let mut begin = 0;
    loop {
        let end = (begin + len).min(n);
        out.push(Window {
            begin,
            end,
            score_from: scored_to.max(begin + 1),
        });
        scored_to = end;
        if end == n {
            return Ok(out);
        }
        begin += stride;
    }
}

/// `−log softmax(logits)[target]`, in `f64`.
pub fn nll(logits: &[f32], target: usize) -> f64 {
    let max = logits.iter().fold(f32::NEG_INFINITY, |m, &x| m.max(x)) as f64;
    let sum: f64 = logits.iter().map(|&x| (x as f64 - max).exp()).sum();
    sum.ln() + max - logits[target] as f64
}

/// The result.
#[derive(Debug, Clone, Serialize)]
pub struct Perplexity {
    /// `exp(nll)`.
    pub perplexity: f64,
    /// Mean negative log-likelihood per scored token (nats).
    pub nll: f64,
    /// Standard error of `nll` (the scored tokens' spread over √count).
    pub nll_stderr: f64,
    /// Text tokens.
    pub tokens: usize,
    /// Tokens scored.
    pub scored: usize,
    /// Windows evaluated.
    pub windows: usize,
    /// Positions per window.
    pub ctx: usize,
    /// Text tokens between window starts.
    pub stride: usize,
    /// The BOS id put in front of every window, when the tokenizer adds one.
    pub bos: Option<u32>,
    /// Wall time of the evaluation.
    pub seconds: f64,
    /// Positions evaluated per second.
    pub tokens_per_s: f64,
}

/// The perplexity of `decoder` over `tokens` (text tokens, no special tokens), with `bos` in
/// front of every window when given. `progress(done, total)` is called after each window.
pub fn perplexity(
    decoder: &Decoder,
    tokens: &[u32],
    bos: Option<u32>,
    cfg: &PerplexityConfig,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<Perplexity, PerplexityError> {
    let off = usize::from(bos.is_some());
    let len = cfg.ctx.saturating_sub(off);
    let ws = windows(tokens.len(), len, cfg.stride)?;
    let vocab = decoder.params().vocab as usize;
    if let Some(&bad) = tokens.iter().find(|&&t| t as usize >= vocab) {
        return Err(PerplexityError::Settings(format!(
            "token id {bad} is outside the model's vocabulary of {vocab}"
        )));
    }
    let batch = cfg.batch.max(1);
    let mut cache = decoder.new_cache(cfg.ctx);
    if cache.max_len() < cfg.ctx {
        return Err(PerplexityError::Settings(format!(
            "--ctx {} exceeds the model's context of {} positions",
            cfg.ctx,
            cache.max_len()
        )));
    }
    let t0 = Instant::now();
    let (mut sum, mut sum_sq, mut scored, mut evaluated) = (0f64, 0f64, 0usize, 0usize);
    let mut seq = Vec::with_capacity(cfg.ctx);
    for (wi, w) in ws.iter().enumerate() {
        // Keep the buffers; only the length goes back to zero.
        cache.truncate(0);
        seq.clear();
        seq.extend(bos);
        seq.extend_from_slice(&tokens[w.begin..w.end]);
        // Row `p` of the logits predicts `seq[p + 1]`; the scored targets are the sequence
        // positions of tokens `score_from .. end`.
        let first_row = w.score_from - w.begin + off - 1;
        let rows = seq.len() - 1;
        for chunk in seq[..first_row].chunks(batch) {
            decoder.forward_logits(chunk, &mut cache, false)?;
        }
        let mut p = first_row;
        while p < rows {
            let n = batch.min(rows - p);
            let logits = decoder.forward_logits(&seq[p..p + n], &mut cache, true)?;
            for (r, row) in logits.chunks_exact(vocab).enumerate() {
                let l = nll(row, seq[p + r + 1] as usize);
                sum += l;
                sum_sq += l * l;
            }
            scored += n;
            p += n;
        }
        evaluated += rows;
        progress(wi + 1, ws.len());
    }
    let seconds = t0.elapsed().as_secs_f64();
    let mean = sum / scored as f64;
    let var = (sum_sq / scored as f64 - mean * mean).max(0.0);
    Ok(Perplexity {
        perplexity: mean.exp(),
        nll: mean,
        nll_stderr: (var / scored as f64).sqrt(),
        tokens: tokens.len(),
        scored,
        windows: ws.len(),
        ctx: cfg.ctx,
        stride: cfg.stride,
        bos,
        seconds,
        tokens_per_s: if seconds > 0.0 {
            evaluated as f64 / seconds
        } else {
            0.0
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_token_after_the_first_is_scored_exactly_once() {
        for (n, len, stride) in [(10, 4, 2), (11, 4, 3), (9, 4, 1), (3, 8, 4), (100, 16, 5)] {
            let ws = windows(n, len, stride).expect("windows");
            let mut scored = vec![0; n];
            for w in &ws {
                assert!(w.end - w.begin <= len);
                assert!(
                    w.score_from > w.begin,
                    "{w:?}: the first token has no context"
                );
                for s in &mut scored[w.score_from..w.end] {
                    *s += 1;
                }
            }
            assert_eq!(scored[0], 0);
            assert!(
                scored[1..].iter().all(|&s| s == 1),
                "{n} {len} {stride}: {scored:?}"
            );
            assert_eq!(ws.last().map(|w| w.end), Some(n));
        }
    }

    #[test]
    fn half_stride_windows_score_the_second_half() {
        let ws = windows(10, 4, 2).expect("windows");
        let spans: Vec<_> = ws.iter().map(|w| (w.begin, w.end, w.score_from)).collect();
        assert_eq!(spans, [(0, 4, 1), (2, 6, 4), (4, 8, 6), (6, 10, 8)]);
    }

    #[test]
    fn bad_settings_are_refused_with_the_fix() {
        assert!(windows(1, 4, 2).is_err());
        let e = windows(10, 4, 4)
            .expect_err("stride of the whole window")
            .to_string();
        assert!(e.contains("--stride 4 must be between 1 and 3"), "{e}");
        assert!(windows(10, 4, 0).is_err());
        assert!(windows(10, 1, 1).is_err());
    }

    #[test]
    fn nll_is_the_negative_log_softmax() {
        let logits = [1.0f32, 2.0, 3.0];
        let z: f64 = [1.0f64, 2.0, 3.0].iter().map(|x| x.exp()).sum();
        assert!((nll(&logits, 2) - (z.ln() - 3.0)).abs() < 1e-12);
        // Uniform logits: log(vocab).
        assert!((nll(&[0.5; 8], 3) - 8f64.ln()).abs() < 1e-12);
        // Large logits do not overflow.
        assert!(nll(&[1e4, 0.0], 0).abs() < 1e-12);
    }
}
