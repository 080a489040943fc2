//! AVX2 + FMA + F16C attention over `f16` and `q8_0` KV rows (x86-64), selected at run time.
//!
//! The same three phases as the `f32` kernel (`super::avx2::attend`): scores `scale · k_j·q`
//! with the query held in registers, a vectorised softmax, and `out = Σ_j p_j · v_j` accumulated
//! in registers. K and V rows are widened to `f32` as they are loaded (`vcvtph2ps` for `f16`,
//! sign extension and conversion for `q8_0`'s bytes, times the block's `f16` scale), so the
//! arithmetic is the `f32` kernel's on the stored values.
//!
//! Safety: every function here is `unsafe` because of `#[target_feature]`; `super::kv`'s safe
//! wrappers check the features (through `Kernels`) and assert the slice lengths before calling.
//! Each function, the private helpers included, states its contract in a `# Safety` section.

use std::arch::x86_64::*;

use super::avx2::{exp_neg, f16c, hsum};
use super::kv::Q8_ROW_BLOCK;

/// Bytes of one `q8_0` block: an `f16` scale and 32 signed bytes.
const Q8_BLOCK: usize = 34;

/// Eight `f16` at `p` as `f32` lanes.
///
/// # Safety
/// The CPU must support AVX and F16C, and the 16 bytes (eight `u16`) from `p` must be
/// readable (inside one allocation; no alignment needed).
#[inline(always)]
unsafe fn load_f16(p: *const u16) -> __m256 {
    _mm256_cvtph_ps(_mm_loadu_si128(p as *const __m128i))
}

/// Eight signed bytes at `p` as `f32` lanes.
///
/// # Safety
/// The CPU must support AVX2, and the eight bytes from `p` must be readable (inside one
/// allocation; no alignment needed).
#[inline(always)]
unsafe fn load_i8(p: *const u8) -> __m256 {
    _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(p as *const __m128i)))
}

/// `scores[..n] ← e^(scores − max)`; returns `1 / Σ`.
///
/// # Safety
/// The CPU must support AVX2 and FMA, and `n ≤ scores.len()` (the vector loop reads and writes
/// `scores[..n]` unchecked).
#[inline(always)]
unsafe fn softmax(scores: &mut [f32], n: usize, max: f32) -> f32 {
    let mv = _mm256_set1_ps(max);
    let mut sumv = _mm256_setzero_ps();
    let mut j = 0;
    while j + 8 <= n {
        let e = exp_neg(_mm256_sub_ps(_mm256_loadu_ps(scores.as_ptr().add(j)), mv));
        _mm256_storeu_ps(scores.as_mut_ptr().add(j), e);
        sumv = _mm256_add_ps(sumv, e);
        j += 8;
    }
    let mut sum = hsum(sumv);
    while j < n {
        let e = (scores[j] - max).exp();
        scores[j] = e;
        sum += e;
        j += 1;
    }
    1.0 / sum
}

/// Attention of one query row over `n` positions of `f16` K and V rows of `8·C` values each,
/// contiguous.
///
/// # Safety
/// The CPU must support AVX2, FMA and F16C; `q.len() == out.len() == 8·C`,
/// `k.len(), v.len() ≥ n·8·C` and `scores.len() ≥ n` (asserted by the safe wrapper).
#[target_feature(enable = "avx2,fma,f16c")]
#[allow(clippy::needless_range_loop)] // `c` indexes registers held in arrays of C.
pub unsafe fn attend_f16<const C: usize>(
    q: &[f32],
    k: &[u16],
    v: &[u16],
    n: usize,
    scale: f32,
    scores: &mut [f32],
    out: &mut [f32],
) {
    let hd = 8 * C;
    let mut qv = [_mm256_setzero_ps(); C];
    for c in 0..C {
        qv[c] = _mm256_loadu_ps(q.as_ptr().add(8 * c));
    }
    let mut max = f32::NEG_INFINITY;
    for j in 0..n {
        let kr = k.as_ptr().add(j * hd);
        let mut acc = _mm256_mul_ps(qv[0], load_f16(kr));
        for c in 1..C {
            acc = _mm256_fmadd_ps(qv[c], load_f16(kr.add(8 * c)), acc);
        }
        let s = hsum(acc) * scale;
        *scores.get_unchecked_mut(j) = s;
        max = max.max(s);
    }
    let inv = softmax(scores, n, max);
    let mut acc = [_mm256_setzero_ps(); C];
    for j in 0..n {
        let p = _mm256_set1_ps(*scores.get_unchecked(j) * inv);
        let vr = v.as_ptr().add(j * hd);
        for c in 0..C {
            acc[c] = _mm256_fmadd_ps(p, load_f16(vr.add(8 * c)), acc[c]);
        }
    }
    for c in 0..C {
        _mm256_storeu_ps(out.as_mut_ptr().add(8 * c), acc[c]);
    }
}

/// Attention of one query row over `n` positions of `q8_0` K and V rows of `8·C` values
/// (`C / 4` blocks of 34 bytes) each, contiguous.
///
/// # Safety
/// The CPU must support AVX2, FMA and F16C; `C` is a multiple of 4 (checked at compile time);
/// `q.len() == out.len() == 8·C`, `k.len(), v.len() ≥ n·(C/4)·34` and `scores.len() ≥ n`
/// (asserted by the safe wrapper).
#[target_feature(enable = "avx2,fma,f16c")]
#[allow(clippy::needless_range_loop)]
pub unsafe fn attend_q8_0<const C: usize>(
    q: &[f32],
    k: &[u8],
    v: &[u8],
    n: usize,
    scale: f32,
    scores: &mut [f32],
    out: &mut [f32],
) {
    // Checked when the kernel is instantiated: whole blocks of 32 values per row.
    const {
        assert!(C.is_multiple_of(4), "q8_0 rows hold whole 32-value blocks");
        assert!(Q8_ROW_BLOCK == 32, "q8_0 blocks hold 32 values");
    }
    let blocks = C / 4;
    let row = blocks * Q8_BLOCK;
    let mut qv = [_mm256_setzero_ps(); C];
    for c in 0..C {
        qv[c] = _mm256_loadu_ps(q.as_ptr().add(8 * c));
    }
    let mut max = f32::NEG_INFINITY;
    for j in 0..n {
        let kr = k.as_ptr().add(j * row);
        let mut acc = _mm256_setzero_ps();
        for b in 0..blocks {
            let blk = kr.add(b * Q8_BLOCK);
            let codes = blk.add(2);
            let mut s = _mm256_mul_ps(qv[4 * b], load_i8(codes));
            s = _mm256_fmadd_ps(qv[4 * b + 1], load_i8(codes.add(8)), s);
            s = _mm256_fmadd_ps(qv[4 * b + 2], load_i8(codes.add(16)), s);
            s = _mm256_fmadd_ps(qv[4 * b + 3], load_i8(codes.add(24)), s);
            acc = _mm256_fmadd_ps(_mm256_set1_ps(f16c(blk, 0)), s, acc);
        }
        let s = hsum(acc) * scale;
        *scores.get_unchecked_mut(j) = s;
        max = max.max(s);
    }
    let inv = softmax(scores, n, max);
    let mut acc = [_mm256_setzero_ps(); C];
    for j in 0..n {
        let p = *scores.get_unchecked(j) * inv;
        let vr = v.as_ptr().add(j * row);
        for b in 0..blocks {
            let blk = vr.add(b * Q8_BLOCK);
            let pd = _mm256_set1_ps(p * f16c(blk, 0));
            let codes = blk.add(2);
            for g in 0..4 {
                acc[4 * b + g] = _mm256_fmadd_ps(pd, load_i8(codes.add(8 * g)), acc[4 * b + g]);
            }
        }
    }
    for c in 0..C {
        _mm256_storeu_ps(out.as_mut_ptr().add(8 * c), acc[c]);
    }
}

/// `out[i] = f16(x[i])` (round to nearest even), eight at a time.
///
/// # Safety
/// The CPU must support AVX2 and F16C; `out.len() ≥ x.len()` (asserted by the safe wrapper).
#[target_feature(enable = "avx2,f16c")]
pub unsafe fn store_f16(x: &[f32], out: &mut [u16]) {
    let n = x.len();
    let mut i = 0;
    while i + 8 <= n {
        let h = _mm256_cvtps_ph(
            _mm256_loadu_ps(x.as_ptr().add(i)),
            _MM_FROUND_TO_NEAREST_INT,
        );
        _mm_storeu_si128(out.as_mut_ptr().add(i) as *mut __m128i, h);
        i += 8;
    }
    for j in i..n {
        out[j] = half::f16::from_f32(x[j]).to_bits();
    }
}
