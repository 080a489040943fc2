//! Calibration: fit the speed model's constants to what was measured.
//!
//! Decode time per token is modelled as `t = fixed + bytes / (efficiency × bandwidth)`, where
//! `bytes` is what one step reads (the weight matrices plus the KV cache at that depth) and
//! `bandwidth` the probe's measurement. That is a straight line in `bytes`, so the fit is a
//! least-squares line through the `(bytes, t)` points of the `tg` tests at several depths:
//! intercept = fixed cost, slope = 1 / (efficiency × bandwidth). Points are weighted by
//! `1 / t²`, which minimizes *relative* residuals — the acceptance test is a percentage. A
//! negative intercept (noise on a tiny fixed cost) is clamped to zero and the slope refitted
//! through the origin. A slope steeper than the bandwidth allows (efficiency above 1: a step
//! cannot read faster than the probe measured; this happens when decode is bound by compute or
//! per-token overheads and noise tilts the line) is clamped to efficiency 1 and the intercept
//! refitted.
//!
//! Prefill has one measured point (`pp512`); its efficiency is solved directly from the sizing
//! model's prefill formula when prefill is compute-bound.

use serde::Serialize;

/// One decode measurement.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct DecodePoint {
    /// Cache depth the test started at.
    pub depth: usize,
    /// Bytes one step reads on average over the test.
    pub bytes_per_token: f64,
    /// Measured seconds per token (mean).
    pub secs_per_token: f64,
}

/// The fitted decode constants.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct DecodeFit {
    /// Fixed seconds per token (intercept).
    pub fixed_s: f64,
    /// Share of the measured bandwidth a decode step achieves.
    pub efficiency: f64,
    /// Root-mean-square relative residual of the fit.
    pub rms_rel_residual: f64,
    /// The intercept came out negative and was clamped to zero.
    pub intercept_clamped: bool,
    /// The efficiency came out above 1 and was clamped to 1.
    pub efficiency_clamped: bool,
}

/// Why a fit is impossible.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum CalibrationError {
    /// No usable points.
    #[error("no decode measurements to fit")]
    NoPoints,
    /// The bandwidth is not a positive number.
    #[error("bandwidth {0} is not positive")]
    BadBandwidth(f64),
    /// A point is not finite and positive.
    #[error("decode point at depth {depth} is not positive and finite")]
    BadPoint {
        /// Its depth.
        depth: usize,
    },
    /// Time does not grow with bytes read: the efficiency is undefined.
    #[error("decode time does not grow with bytes read (slope {slope:e} s/byte); cannot fit an efficiency")]
    NoSlope {
        /// The fitted slope.
        slope: f64,
    },
}

/// Fit `t = fixed + bytes / (efficiency × bandwidth)` to `points`.
pub fn fit_decode(points: &[DecodePoint], bandwidth: f64) -> Result<DecodeFit, CalibrationError> {
    if points.is_empty() {
        return Err(CalibrationError::NoPoints);
    }
    if !(bandwidth.is_finite() && bandwidth > 0.0) {
        return Err(CalibrationError::BadBandwidth(bandwidth));
    }
    for p in points {
        let ok = |x: f64| x.is_finite() && x > 0.0;
        if !ok(p.bytes_per_token) || !ok(p.secs_per_token) {
            return Err(CalibrationError::BadPoint { depth: p.depth });
        }
    }
    let (mut s, mut sx, mut sxx, mut st, mut sxt) = (0.0, 0.0, 0.0, 0.0, 0.0);
    for p in points {
        let (x, t) = (p.bytes_per_token, p.secs_per_token);
        let w = 1.0 / (t * t);
        s += w;
        sx += w * x;
        sxx += w * x * x;
        st += w * t;
        sxt += w * x * t;
    }
    let det = s * sxx - sx * sx;
    let mut clamped = false;
    let (mut a, mut b) = if det > 1e-12 * s * sxx {
        let b = (s * sxt - sx * st) / det;
        ((st - b * sx) / s, b)
    } else {
        // One distinct byte count: the intercept cannot be separated; fit through the origin.
        (0.0, sxt / sxx)
    };
    if a < 0.0 {
        clamped = true;
        a = 0.0;
        b = sxt / sxx;
    }
    if !(b.is_finite() && b > 0.0) {
        return Err(CalibrationError::NoSlope { slope: b });
    }
    let eff_clamped = b * bandwidth < 1.0;
    if eff_clamped {
        b = 1.0 / bandwidth;
        a = ((st - b * sx) / s).max(0.0);
    }
    let rms = (points
        .iter()
        .map(|p| ((a + b * p.bytes_per_token) / p.secs_per_token - 1.0).powi(2))
        .sum::<f64>()
        / points.len() as f64)
        .sqrt();
    Ok(DecodeFit {
        fixed_s: a,
        efficiency: 1.0 / (b * bandwidth),
        rms_rel_residual: rms,
        intercept_clamped: clamped,
        efficiency_clamped: eff_clamped,
    })
}

/// Prefill efficiency from one measurement, by the sizing model's formula
/// `t = max(flops / (eff × matrix), memory_s) + fixed / ubatch` per token:
/// `eff = flops / (matrix × (t − fixed / ubatch))`. `None` when the measurement is
/// memory-bound (no compute share to solve for) or the numbers are unusable.
pub fn fit_prefill_efficiency(
    measured_tps: f64,
    flops_per_token: f64,
    matrix_flops: f64,
    memory_s_per_token: f64,
    fixed_s_per_token: f64,
) -> Option<f64> {
    if !(measured_tps > 0.0 && flops_per_token > 0.0 && matrix_flops > 0.0) {
        return None;
    }
    let t = 1.0 / measured_tps - fixed_s_per_token;
    if !(t.is_finite() && t > memory_s_per_token && t > 0.0) {
        return None;
    }
    let eff = flops_per_token / (matrix_flops * t);
    eff.is_finite().then_some(eff)
}
