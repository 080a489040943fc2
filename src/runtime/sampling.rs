//! The seeded sampler chain: repetition penalty → optional mask → temperature → top-k →
//! top-p → draw.
//!
//! Works on a plain `&mut [f32]` of logits so it is cheap to test and independent of the
//! device. With `temperature == 0` it is greedy (argmax, ties to the lowest id) and consumes no
//! randomness; otherwise it draws from a `StdRng` seeded once, so a run is reproducible.
//!
//! The mask link takes a [`TokenMask`], a bitset with 32 ids per word, the layout grammar
//! engines (llguidance) produce: applying it to a 151,936-entry vocabulary skips whole words of
//! allowed ids and writes `-inf` word by word, instead of calling a predicate per id.

use rand::{Rng, SeedableRng};

use crate::lm::SamplingParams;

/// A set of allowed token ids: a bitset, bit `id % 32` of word `id / 32`. Ids at or past
/// [`len`](Self::len) are never allowed (a model's logits may be longer than its tokenizer's
/// vocabulary: those padding ids can never be sampled under a mask).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenMask {
    words: Vec<u32>,
    len: usize,
}

impl TokenMask {
    /// A mask over `len` ids that allows none.
    pub fn none(len: usize) -> Self {
        Self {
            words: vec![0; len.div_ceil(32)],
            len,
        }
    }

    /// A mask over `len` ids that allows all.
    pub fn all(len: usize) -> Self {
        Self::from_words(vec![u32::MAX; len.div_ceil(32)], len)
    }

    /// A mask from bitset words (bit `id % 32` of word `id / 32`); bits at or past `len` and
    /// missing words count as disallowed.
    pub fn from_words(mut words: Vec<u32>, len: usize) -> Self {
        words.resize(len.div_ceil(32), 0);
        clear_tail(&mut words, len);
        Self { words, len }
    }

    /// Replace the contents with `words` (as [`from_words`](Self::from_words)), reusing the
    /// allocation.
    pub fn set_words(&mut self, words: &[u32]) {
        let n = self.len.div_ceil(32);
        self.words.clear();
        self.words.extend_from_slice(&words[..words.len().min(n)]);
        self.words.resize(n, 0);
        clear_tail(&mut self.words, self.len);
    }

    /// Number of ids the mask covers.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the mask covers no ids.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Allow `id` (ignored when out of range).
    pub fn allow(&mut self, id: u32) {
        if (id as usize) < self.len {
            if let Some(w) = self.words.get_mut(id as usize / 32) {
                *w |= 1 << (id % 32);
            }
        }
    }

    /// Whether `id` is allowed.
    pub fn is_allowed(&self, id: u32) -> bool {
        self.words
            .get(id as usize / 32)
            .is_some_and(|w| w & (1 << (id % 32)) != 0)
    }

    /// Number of allowed ids.
    pub fn count(&self) -> usize {
        self.words.iter().map(|w| w.count_ones() as usize).sum()
    }

    /// The allowed ids, ascending.
    pub fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        self.words.iter().enumerate().flat_map(|(i, &w)| {
            let base = (i * 32) as u32;
            let mut rest = w;
            std::iter::from_fn(move || {
                if rest == 0 {
                    return None;
                }
                let bit = rest.trailing_zeros();
                rest &= rest - 1;
                Some(base + bit)
            })
        })
    }

    /// Set every disallowed logit to `-inf`, including all past `len`.
    pub fn apply(&self, logits: &mut [f32]) {
        for (chunk, &w) in logits.chunks_mut(32).zip(&self.words) {
            if w == u32::MAX {
                continue;
            }
            if w == 0 {
                chunk.fill(f32::NEG_INFINITY);
                continue;
            }
            for (bit, l) in chunk.iter_mut().enumerate() {
                if w & (1 << bit) == 0 {
                    *l = f32::NEG_INFINITY;
                }
            }
        }
        let covered = self.words.len() * 32;
        if logits.len() > covered {
            logits[covered..].fill(f32::NEG_INFINITY);
        }
    }
}

/// Clear the bits at or past `len` in the last word.
fn clear_tail(words: &mut [u32], len: usize) {
    let rem = len % 32;
    if rem > 0 {
        if let Some(last) = words.last_mut() {
            *last &= (1u32 << rem) - 1;
        }
    }
}

/// A seeded sampler.
#[derive(Debug)]
pub struct Sampler {
    params: SamplingParams,
    rng: rand::rngs::StdRng,
}

impl Sampler {
    /// A sampler with its RNG seeded from `params.seed`.
    pub fn new(params: SamplingParams) -> Self {
        let rng = rand::rngs::StdRng::seed_from_u64(params.seed);
        Self { params, rng }
    }

    /// The settings.
    pub fn params(&self) -> &SamplingParams {
        &self.params
    }

    /// Pick the next token. `history` feeds the repetition penalty; `allowed`, when given,
    /// masks out every token it does not allow. `None` when every token is masked.
    pub fn sample(
        &mut self,
        logits: &mut [f32],
        history: &[u32],
        allowed: Option<&TokenMask>,
    ) -> Option<u32> {
        let p = &self.params;
        if p.repeat_penalty != 1.0 && p.repeat_penalty > 0.0 {
            let start = history.len().saturating_sub(p.repeat_last_n);
            let mut seen = std::collections::HashSet::new();
            for &tok in &history[start..] {
                if seen.insert(tok) {
                    if let Some(l) = logits.get_mut(tok as usize) {
                        *l = if *l >= 0.0 {
                            *l / p.repeat_penalty
                        } else {
                            *l * p.repeat_penalty
                        };
                    }
                }
            }
        }
        if let Some(allowed) = allowed {
            allowed.apply(logits);
        }
        if p.temperature <= 0.0 {
            return argmax(logits);
        }
        // Candidates sorted by logit, best first; ties keep the lower id first.
        let mut cand: Vec<(u32, f32)> = logits
            .iter()
            .enumerate()
            .filter(|(_, l)| l.is_finite())
            .map(|(i, &l)| (i as u32, l / p.temperature))
            .collect();
        if cand.is_empty() {
            return None;
        }
        cand.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        if p.top_k > 0 && p.top_k < cand.len() {
            cand.truncate(p.top_k);
        }
        let max = cand[0].1;
        let mut probs: Vec<f32> = cand.iter().map(|&(_, l)| (l - max).exp()).collect();
        let sum: f32 = probs.iter().sum();
        probs.iter_mut().for_each(|x| *x /= sum);
        if p.top_p < 1.0 && p.top_p > 0.0 {
            let mut acc = 0.0;
            let mut keep = probs.len();
            for (i, &pr) in probs.iter().enumerate() {
                acc += pr;
                if acc >= p.top_p {
                    keep = i + 1;
                    break;
                }
            }
            probs.truncate(keep);
            let sum: f32 = probs.iter().sum();
            probs.iter_mut().for_each(|x| *x /= sum);
        }
        let r: f32 = self.rng.random();
        let mut acc = 0.0;
        for (i, &pr) in probs.iter().enumerate() {
            acc += pr;
            if r < acc {
                return Some(cand[i].0);
            }
        }
        Some(cand[probs.len() - 1].0)
    }
}

/// Index of the largest finite logit (lowest id on ties); `None` if all are masked.
pub fn argmax(logits: &[f32]) -> Option<u32> {
    let mut best: Option<(usize, f32)> = None;
    for (i, &l) in logits.iter().enumerate() {
        if l.is_nan() || l == f32::NEG_INFINITY {
            continue;
        }
        if best.is_none_or(|(_, b)| l > b) {
            best = Some((i, l));
        }
    }
    best.map(|(i, _)| i as u32)
}

/// The log-probability of a chosen token and of the most likely tokens at one position.
#[derive(Debug, Clone, PartialEq)]
pub struct TokenScore {
    /// The chosen token.
    pub id: u32,
    /// Its log-probability.
    pub logprob: f32,
    /// The most likely tokens with their log-probabilities, best first (ties: lower id first).
    pub top: Vec<(u32, f32)>,
}

/// The log-softmax of `logits`: `l - log(sum(exp(l)))`, computed against the largest finite
/// logit so nothing overflows. `-inf` logits get `-inf`; all `-inf` (or empty) gives all `-inf`.
pub fn log_softmax(logits: &[f32]) -> Vec<f32> {
    let lse = log_sum_exp(logits);
    logits.iter().map(|&l| l - lse).collect()
}

fn log_sum_exp(logits: &[f32]) -> f32 {
    let max = logits
        .iter()
        .copied()
        .filter(|l| l.is_finite())
        .fold(f32::NEG_INFINITY, f32::max);
    if max == f32::NEG_INFINITY {
        return f32::INFINITY;
    }
    let sum: f64 = logits
        .iter()
        .filter(|l| l.is_finite())
        .map(|&l| f64::from(l - max).exp())
        .sum();
    max + sum.ln() as f32
}

/// Score `chosen` under the log-softmax of `logits` and list the `top` most likely tokens.
///
/// These are the model's own probabilities: `logits` are taken as the model produced them,
/// before the repetition penalty, an output constraint's mask, temperature, top-k and top-p.
/// Non-finite logits are left out of the alternatives.
pub fn score_token(logits: &[f32], chosen: u32, top: usize) -> TokenScore {
    let lse = log_sum_exp(logits);
    let logprob = logits
        .get(chosen as usize)
        .map_or(f32::NEG_INFINITY, |&l| l - lse);
    let mut ids: Vec<u32> = (0..logits.len() as u32)
        .filter(|&i| logits[i as usize].is_finite())
        .collect();
    let better = |a: &u32, b: &u32| {
        logits[*b as usize]
            .total_cmp(&logits[*a as usize])
            .then(a.cmp(b))
    };
    let k = top.min(ids.len());
    if k > 0 && k < ids.len() {
        ids.select_nth_unstable_by(k - 1, better);
    }
    ids.truncate(k);
    ids.sort_unstable_by(better);
    TokenScore {
        id: chosen,
        logprob,
        top: ids
            .into_iter()
            .map(|i| (i, logits[i as usize] - lse))
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(temperature: f32) -> SamplingParams {
        SamplingParams {
            temperature,
            ..SamplingParams::default()
        }
    }

    #[test]
    fn log_softmax_is_a_distribution_over_the_whole_vocabulary() {
        // Large logits (no overflow), negative ones and a masked one.
        let logits: Vec<f32> = (0..50_000)
            .map(|i| ((i * 7919) % 1000) as f32 * 0.05 + if i % 2 == 0 { 60.0 } else { -30.0 })
            .chain([f32::NEG_INFINITY])
            .collect();
        let lp = log_softmax(&logits);
        assert!(lp.iter().all(|&x| x <= 0.0), "log-probabilities are <= 0");
        assert_eq!(lp[50_000], f32::NEG_INFINITY);
        let total: f64 = lp.iter().map(|&x| f64::from(x).exp()).sum();
        assert!((total - 1.0).abs() < 1e-4, "sum of probabilities {total}");
        let s = score_token(&logits, 3, 20);
        assert_eq!(s.logprob, lp[3]);
        assert_eq!(s.top.len(), 20);
        assert!(s.top.windows(2).all(|w| w[0].1 >= w[1].1), "best first");
        let best = argmax(&logits).expect("finite logits");
        assert_eq!(s.top[0], (best, lp[best as usize]));
        for &(id, l) in &s.top {
            assert_eq!(l, lp[id as usize]);
        }
        // No alternative is better than the worst listed one.
        let worst = s.top[19].1;
        let better = lp.iter().filter(|&&x| x > worst).count();
        assert!(better < 20, "{better} tokens beat the 20th");
    }

    #[test]
    fn score_token_handles_small_and_masked_inputs() {
        let s = score_token(&[0.0, f32::NEG_INFINITY, 0.0], 0, 5);
        assert_eq!(s.top.len(), 2, "masked ids are no alternatives");
        assert!((s.logprob - 0.5f32.ln()).abs() < 1e-6);
        assert_eq!(s.top[0].0, 0, "ties: lower id first");
        assert_eq!(score_token(&[1.0, 2.0], 1, 0).top, vec![]);
        assert_eq!(score_token(&[], 0, 3).logprob, f32::NEG_INFINITY);
    }

    #[test]
    fn greedy_takes_argmax_and_lowest_on_ties() {
        let mut s = Sampler::new(params(0.0));
        assert_eq!(s.sample(&mut [0.1, 3.0, 3.0, -1.0], &[], None), Some(1));
    }

    #[test]
    fn mask_removes_tokens() {
        let mut s = Sampler::new(params(0.0));
        let mut allow = TokenMask::none(3);
        allow.allow(0);
        allow.allow(2);
        assert_eq!(s.sample(&mut [0.1, 3.0, 2.0], &[], Some(&allow)), Some(2));
        let none = TokenMask::none(2);
        assert_eq!(s.sample(&mut [0.1, 3.0], &[], Some(&none)), None);
    }

    #[test]
    fn mask_disallows_ids_past_its_length() {
        // Logits longer than the tokenizer's vocabulary (padding rows of the output matrix).
        let mut s = Sampler::new(params(0.0));
        let mask = TokenMask::all(2);
        assert_eq!(
            s.sample(&mut [0.0, 1.0, 9.0, 9.0], &[], Some(&mask)),
            Some(1)
        );
    }

    #[test]
    fn token_mask_words_and_iteration() {
        let mut m = TokenMask::none(70);
        for id in [0, 31, 32, 69, 70, 1000] {
            m.allow(id);
        }
        assert_eq!(m.iter().collect::<Vec<_>>(), vec![0, 31, 32, 69]);
        assert_eq!(m.count(), 4);
        assert!(m.is_allowed(69) && !m.is_allowed(70) && !m.is_allowed(1));
        let all = TokenMask::from_words(vec![u32::MAX; 5], 33);
        assert_eq!(all.count(), 33);
        let mut logits = vec![0.0f32; 100];
        m.apply(&mut logits);
        let finite: Vec<usize> = (0..100).filter(|&i| logits[i].is_finite()).collect();
        assert_eq!(finite, vec![0, 31, 32, 69]);
        let mut again = TokenMask::none(70);
        again.set_words(&[1, 0, u32::MAX, 7]);
        assert_eq!(
            again.iter().collect::<Vec<_>>(),
            vec![0, 64, 65, 66, 67, 68, 69]
        );
    }

    #[test]
    fn repetition_penalty_lowers_seen_tokens() {
        let mut s = Sampler::new(SamplingParams {
            repeat_penalty: 2.0,
            ..params(0.0)
        });
        // token 0 would win at 3.0, but was seen: 3.0 / 2 = 1.5 < 2.0
        assert_eq!(s.sample(&mut [3.0, 2.0], &[0, 0, 0], None), Some(1));
    }

    #[test]
    fn seeded_sampling_is_reproducible_and_varies_with_seed() {
        let logits = vec![1.0f32; 50];
        let draw = |seed| {
            let mut s = Sampler::new(SamplingParams {
                seed,
                ..params(1.0)
            });
            (0..20)
                .map(|_| s.sample(&mut logits.clone(), &[], None))
                .collect::<Vec<_>>()
        };
        assert_eq!(draw(7), draw(7));
        assert_ne!(draw(7), draw(8));
    }

    #[test]
    fn top_k_one_is_greedy() {
        let mut s = Sampler::new(SamplingParams {
            top_k: 1,
            ..params(5.0)
        });
        for _ in 0..20 {
            assert_eq!(s.sample(&mut [0.0, 1.0, 0.5], &[], None), Some(1));
        }
    }

    #[test]
    fn top_p_keeps_the_nucleus() {
        let mut s = Sampler::new(SamplingParams {
            top_p: 0.5,
            ..params(1.0)
        });
        // token 2 holds ~84% of the mass, so the nucleus at 0.5 is token 2 alone.
        for _ in 0..50 {
            assert_eq!(s.sample(&mut [0.0, 1.0, 3.0], &[], None), Some(2));
        }
    }
}
