//! The seeded sampler chain: repetition penalty → optional mask → temperature → top-k →
//! top-p → draw.
//!
//! Works on a plain `&mut [f32]` of logits so it is cheap to test and independent of the
//! device. With `temperature == 0` it is greedy (argmax, ties to the lowest id) and consumes no
//! randomness; otherwise it draws from a `StdRng` seeded once, so a run is reproducible.

use rand::{Rng, SeedableRng};

use crate::lm::SamplingParams;

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
    /// masks out every token for which it returns false.
    pub fn sample(
        &mut self,
        logits: &mut [f32],
        history: &[u32],
        allowed: Option<&dyn Fn(u32) -> bool>,
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
            for (i, l) in logits.iter_mut().enumerate() {
                if !allowed(i as u32) {
                    *l = f32::NEG_INFINITY;
                }
            }
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
    fn greedy_takes_argmax_and_lowest_on_ties() {
        let mut s = Sampler::new(params(0.0));
        assert_eq!(s.sample(&mut [0.1, 3.0, 3.0, -1.0], &[], None), Some(1));
    }

    #[test]
    fn mask_removes_tokens() {
        let mut s = Sampler::new(params(0.0));
        let allow = |t: u32| t != 1;
        assert_eq!(s.sample(&mut [0.1, 3.0, 2.0], &[], Some(&allow)), Some(2));
        let none = |_t: u32| false;
        assert_eq!(s.sample(&mut [0.1, 3.0], &[], Some(&none)), None);
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
