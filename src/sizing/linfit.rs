//! The least-squares arithmetic behind the published fit ([`crate::sizing::published`]):
//! non-negative least squares on the relative error over every subset of a handful of terms,
//! and a roofline fit in which a row's time is the larger of two groups of terms plus the
//! rest.
//!
//! The roofline is what a decode step does: it waits either on memory (the bytes it reads) or
//! on the ALUs that unpack quantized blocks, whichever takes longer, and pays its fixed,
//! per-layer and attention costs on top:
//!
//! ```text
//! t = max(Σ memory terms, Σ compute terms) + Σ shared terms
//! ```
//!
//! A max is not linear in the coefficients, but it is once each row knows which side binds.
//! [`fit_roofline`] alternates: assign each row to the side its current prediction says is
//! larger, fit the resulting linear model (that side's terms and the shared ones) by
//! [`fit_nonneg`], reassign, until the assignment stops changing. It starts from several
//! assignments (everything memory-bound, everything compute-bound, the quantized rows
//! compute-bound, and the sides an all-terms additive fit says are larger) and keeps the
//! result with the smallest relative error of the max model. Pure arithmetic, no I/O.

/// One observation: its terms (seconds per unit coefficient) and the observed seconds.
#[derive(Debug, Clone, PartialEq)]
pub struct Features {
    /// The terms.
    pub x: Vec<f64>,
    /// Observed seconds per token.
    pub t: f64,
}

/// Solve `a·x = b` (n×n) by Gaussian elimination with partial pivoting; `None` if singular.
fn solve(mut a: Vec<Vec<f64>>, mut b: Vec<f64>) -> Option<Vec<f64>> {
    let n = b.len();
    for c in 0..n {
        let p = (c..n).max_by(|&i, &j| a[i][c].abs().total_cmp(&a[j][c].abs()))?;
        let scale = a.iter().map(|r| r[c].abs()).fold(0.0, f64::max);
        if a[p][c].abs() <= 1e-12 * scale.max(f64::MIN_POSITIVE) {
            return None;
        }
        a.swap(c, p);
        b.swap(c, p);
        let pivot = a[c].clone();
        let pb = b[c];
        for (r, (row, br)) in a.iter_mut().zip(b.iter_mut()).enumerate() {
            if r != c {
                let f = row[c] / pivot[c];
                if f != 0.0 {
                    for (x, p) in row[c..].iter_mut().zip(&pivot[c..]) {
                        *x -= f * p;
                    }
                    *br -= f * pb;
                }
            }
        }
    }
    Some((0..n).map(|i| b[i] / a[i][i]).collect())
}

/// Sum of squared relative errors of the additive model `coef` on `rows`.
pub fn relative_sse(rows: &[Features], coef: &[f64]) -> f64 {
    rows.iter()
        .map(|f| {
            let p: f64 = f.x.iter().zip(coef).map(|(x, c)| x * c).sum();
            ((p - f.t) / f.t).powi(2)
        })
        .sum()
}

/// Non-negative least squares on the relative error of the time per token: every subset of
/// the `allowed` terms that contains the `required` ones is solved by weighted least squares,
/// and the best subset with all coefficients ≥ 0 wins. Exact for the handful of terms used
/// here. Terms outside `allowed` get 0.
pub fn fit_nonneg(
    rows: &[Features],
    n: usize,
    required: &[usize],
    allowed: &[usize],
) -> Option<Vec<f64>> {
    let mut best: Option<(f64, Vec<f64>)> = None;
    for mask in 1u32..(1 << n) {
        if required.iter().any(|&i| mask & (1 << i) == 0)
            || (0..n).any(|i| mask & (1 << i) != 0 && !allowed.contains(&i))
        {
            continue;
        }
        let idx: Vec<usize> = (0..n).filter(|i| mask & (1 << i) != 0).collect();
        let m = idx.len();
        let mut a = vec![vec![0.0; m]; m];
        let mut b = vec![0.0; m];
        for f in rows {
            let w = 1.0 / (f.t * f.t);
            for (i, &fi) in idx.iter().enumerate() {
                b[i] += f.x[fi] * f.t * w;
                for (j, &fj) in idx.iter().enumerate() {
                    a[i][j] += f.x[fi] * f.x[fj] * w;
                }
            }
        }
        let Some(sol) = solve(a, b) else { continue };
        if sol.iter().any(|v| !v.is_finite() || *v < 0.0) {
            continue;
        }
        let mut coef = vec![0.0; n];
        for (i, &fi) in idx.iter().enumerate() {
            coef[fi] = sol[i];
        }
        let err = relative_sse(rows, &coef);
        if best.as_ref().is_none_or(|(e, _)| err < *e) {
            best = Some((err, coef));
        }
    }
    best.map(|(_, c)| c)
}

/// Which terms form the two sides of a roofline; every other term is shared (always added).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Roofline<'a> {
    /// Terms of the memory side.
    pub memory: &'a [usize],
    /// Terms of the compute side.
    pub compute: &'a [usize],
}

impl Roofline<'_> {
    fn side_sums(&self, x: &[f64], coef: &[f64]) -> (f64, f64, f64) {
        let (mut m, mut c, mut s) = (0.0, 0.0, 0.0);
        for (i, (xi, ci)) in x.iter().zip(coef).enumerate() {
            let v = xi * ci;
            if self.memory.contains(&i) {
                m += v;
            } else if self.compute.contains(&i) {
                c += v;
            } else {
                s += v;
            }
        }
        (m, c, s)
    }

    /// `max(memory side, compute side) + shared` for terms `x` and coefficients `coef`.
    pub fn time(&self, x: &[f64], coef: &[f64]) -> f64 {
        let (m, c, s) = self.side_sums(x, coef);
        m.max(c) + s
    }

    /// Whether the compute side binds (is strictly larger) for `x`.
    pub fn compute_bound(&self, x: &[f64], coef: &[f64]) -> bool {
        let (m, c, _) = self.side_sums(x, coef);
        c > m
    }

    /// Sum of squared relative errors of the roofline model `coef` on `rows`.
    pub fn relative_sse(&self, rows: &[Features], coef: &[f64]) -> f64 {
        rows.iter()
            .map(|f| ((self.time(&f.x, coef) - f.t) / f.t).powi(2))
            .sum()
    }

    /// `rows` with the terms of the side each row is not assigned to set to zero.
    fn masked(&self, rows: &[Features], compute: &[bool]) -> Vec<Features> {
        rows.iter()
            .zip(compute)
            .map(|(f, &cb)| {
                let off = if cb { self.memory } else { self.compute };
                let x =
                    f.x.iter()
                        .enumerate()
                        .map(|(i, &v)| if off.contains(&i) { 0.0 } else { v })
                        .collect();
                Features { x, t: f.t }
            })
            .collect()
    }
}

/// Fit the roofline `shape` to `rows` (coefficients ≥ 0, `required` terms in, only `allowed`
/// terms used) by alternating assignment from several starts; the best fit of the max model.
/// `None` when no start gives a solvable fit.
pub fn fit_roofline(
    rows: &[Features],
    n: usize,
    shape: Roofline<'_>,
    required: &[usize],
    allowed: &[usize],
) -> Option<Vec<f64>> {
    const MAX_ROUNDS: usize = 64;
    let mut starts: Vec<Vec<bool>> = vec![
        vec![false; rows.len()],
        vec![true; rows.len()],
        rows.iter()
            .map(|f| shape.compute.iter().any(|&i| f.x[i] > 0.0))
            .collect(),
    ];
    if let Some(c) = fit_nonneg(rows, n, required, allowed) {
        starts.push(rows.iter().map(|f| shape.compute_bound(&f.x, &c)).collect());
    }
    let mut best: Option<(f64, Vec<f64>)> = None;
    for start in starts {
        let mut assign = start;
        let mut seen: Vec<Vec<bool>> = Vec::new();
        let mut coef = None;
        for _ in 0..MAX_ROUNDS {
            let Some(c) = fit_nonneg(&shape.masked(rows, &assign), n, required, allowed) else {
                break;
            };
            let next: Vec<bool> = rows.iter().map(|f| shape.compute_bound(&f.x, &c)).collect();
            coef = Some(c);
            if next == assign || seen.contains(&next) {
                break;
            }
            seen.push(std::mem::replace(&mut assign, next));
        }
        if let Some(c) = coef {
            let err = shape.relative_sse(rows, &c);
            if best.as_ref().is_none_or(|(e, _)| err < *e) {
                best = Some((err, c));
            }
        }
    }
    best.map(|(_, c)| c)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(x: Vec<f64>, t: f64) -> Features {
        Features { x, t }
    }

    const ALL3: [usize; 3] = [0, 1, 2];

    #[test]
    fn nonneg_fit_recovers_known_coefficients_from_exact_rows() {
        // t = 2·x0 + 0·x1 + 0.5·x2, exactly.
        let truth = [2.0, 0.0, 0.5];
        let xs = [
            [1.0, 3.0, 0.0],
            [0.5, 1.0, 2.0],
            [2.0, 0.1, 1.0],
            [0.3, 2.0, 4.0],
            [1.5, 0.7, 0.2],
        ];
        let rows: Vec<Features> = xs
            .iter()
            .map(|x| row(x.to_vec(), x.iter().zip(truth).map(|(a, b)| a * b).sum()))
            .collect();
        let c = fit_nonneg(&rows, 3, &[0], &ALL3).expect("fit");
        for (got, want) in c.iter().zip(truth) {
            assert!((got - want).abs() < 1e-9, "{c:?}");
        }
        assert!(relative_sse(&rows, &c) < 1e-20);
    }

    #[test]
    fn nonneg_fit_drops_a_term_that_would_go_negative() {
        // Times fall with x1, so an unconstrained fit gives x1 a negative coefficient; the
        // constrained fit must leave it at zero and fit t ≈ c·x0.
        let rows = vec![
            row(vec![1.0, 0.0], 1.1),
            row(vec![2.0, 1.0], 1.9),
            row(vec![3.0, 2.0], 3.05),
            row(vec![4.0, 3.0], 3.8),
        ];
        let c = fit_nonneg(&rows, 2, &[0], &[0, 1]).expect("fit");
        assert_eq!(c[1], 0.0);
        assert!(c[0] > 0.9 && c[0] < 1.1, "{c:?}");
    }

    #[test]
    fn required_and_allowed_terms_are_honoured() {
        let rows = vec![row(vec![0.0, 1.0], 1.0), row(vec![0.0, 2.0], 2.0)];
        // x0 is all zero: the only subsets containing it are singular.
        assert_eq!(fit_nonneg(&rows, 2, &[0], &[0, 1]), None);
        assert_eq!(fit_nonneg(&rows, 2, &[], &[0, 1]), Some(vec![0.0, 1.0]));
        // With x1 not allowed nothing can explain the times.
        assert_eq!(fit_nonneg(&rows, 2, &[], &[0]), None);
    }

    /// Rows from a known roofline: t = max(2·x0, 3·x1) + 0.1·x2, half of them memory-bound,
    /// half compute-bound. The fit must recover the three coefficients exactly, which no
    /// additive model can.
    #[test]
    fn roofline_fit_recovers_a_known_max_model() {
        let shape = Roofline {
            memory: &[0],
            compute: &[1],
        };
        let truth = [2.0, 3.0, 0.1];
        let xs = [
            [1.0, 0.2, 1.0],
            [2.0, 0.5, 1.0],
            [0.5, 0.1, 2.0],
            [3.0, 1.0, 1.0],
            [0.2, 1.0, 1.0],
            [0.5, 2.0, 3.0],
            [1.0, 1.5, 1.0],
            [0.1, 0.4, 2.0],
        ];
        let rows: Vec<Features> = xs
            .iter()
            .map(|x| row(x.to_vec(), shape.time(x, &truth)))
            .collect();
        let bound: Vec<bool> = xs.iter().map(|x| shape.compute_bound(x, &truth)).collect();
        assert_eq!(bound.iter().filter(|&&b| b).count(), 4, "{bound:?}");
        let c = fit_roofline(&rows, 3, shape, &[0], &ALL3).expect("fit");
        for (got, want) in c.iter().zip(truth) {
            assert!((got - want).abs() < 1e-9, "{c:?}");
        }
        assert!(shape.relative_sse(&rows, &c) < 1e-20);
        // The best additive fit of the same rows is measurably worse.
        let add = fit_nonneg(&rows, 3, &[0], &ALL3).expect("additive");
        assert!(relative_sse(&rows, &add) > 1e-3, "{add:?}");
    }

    #[test]
    fn roofline_time_is_the_larger_side_plus_the_shared_terms() {
        let shape = Roofline {
            memory: &[0, 1],
            compute: &[2],
        };
        let coef = [1.0, 2.0, 10.0, 0.5];
        // memory 1 + 2 = 3, compute 10 × 0.2 = 2, shared 0.5 × 2 = 1.
        assert!((shape.time(&[1.0, 1.0, 0.2, 2.0], &coef) - 4.0).abs() < 1e-12);
        assert!(!shape.compute_bound(&[1.0, 1.0, 0.2, 2.0], &coef));
        // compute 10 × 0.5 = 5 > 3.
        assert!((shape.time(&[1.0, 1.0, 0.5, 2.0], &coef) - 6.0).abs() < 1e-12);
        assert!(shape.compute_bound(&[1.0, 1.0, 0.5, 2.0], &coef));
    }
}
