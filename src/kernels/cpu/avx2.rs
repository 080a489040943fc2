//! AVX2 + FMA dot products (x86-64), selected at run time.
//!
//! Each function computes exactly the integer sums of its scalar reference in `blocks` and
//! differs only in the order of the float accumulation. Bytes are multiplied with
//! `maddubs` (unsigned × signed → pairs of `i16`), then `madd` with ones or with per-group
//! scales (→ `i32`), then converted and accumulated in `f32` with one FMA per block.
//!
//! Safety: every function here is `unsafe`: the `#[target_feature]` kernels because the CPU
//! must have the features, the `#[inline(always)]` helpers inlined into them because they use
//! the same intrinsics and some read through raw pointers. Each states its contract in a
//! `# Safety` section (features, and which bytes must be readable). The caller checks the CPU
//! features once (`super::Kernels::avx2`). Loads are unaligned (`loadu`) and stay inside the
//! slices when the length conditions hold; the safe wrappers (`super::x86`) assert them with
//! `assert!` before calling in, so a release build checks them too. (`unsafe` is allowed by
//! the parent `kernels` module; see its documentation.)

use std::arch::x86_64::*;

use super::blocks::{scale_min_k4, size, ActBlocks32, ActBlocksK, QK32, QK_K};
use super::panel::{Panel, PanelActs, PANEL_BLOCK_BYTES, PANEL_ROWS};
use super::QType;

/// The `f16` at byte `at` of `p` as `f32`, by the F16C instruction. Written as assembly:
/// from the intrinsics the compiler emits `vpinsrw` into whatever register is free, which in
/// the one-row loops was the running offset sum, so every block waited for the previous one
/// (a 2x slowdown measured on `Q8_0`). `vpbroadcastw` writes the whole register.
///
/// # Safety
/// The CPU must support AVX2 and F16C, and the two bytes `p + at .. p + at + 2` must be
/// readable (inside one allocation).
#[inline(always)]
pub(super) unsafe fn f16c(p: *const u8, at: usize) -> f32 {
    let x: __m128;
    std::arch::asm!(
        "vpbroadcastw {x}, word ptr [{p}]",
        "vcvtph2ps {x}, {x}",
        p = in(reg) p.add(at),
        x = out(xmm_reg) x,
        options(pure, readonly, nostack, preserves_flags),
    );
    _mm_cvtss_f32(x)
}

/// The sum of the eight lanes of `v`.
///
/// # Safety
/// The CPU must support AVX (every AVX2 CPU does). Reads no memory.
#[inline(always)]
pub(super) unsafe fn hsum(v: __m256) -> f32 {
    let lo = _mm256_castps256_ps128(v);
    let hi = _mm256_extractf128_ps(v, 1);
    let s = _mm_add_ps(lo, hi);
    let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    let s = _mm_add_ss(s, _mm_movehdup_ps(s));
    _mm_cvtss_f32(s)
}

/// 32 nibbles of 16 bytes: low nibbles in lanes 0..16, high nibbles in lanes 16..32.
///
/// # Safety
/// The CPU must support AVX2, and the 16 bytes `p .. p + 16` must be readable (inside one
/// allocation; no alignment needed).
#[inline(always)]
unsafe fn nibbles32(p: *const u8) -> __m256i {
    let b = _mm_loadu_si128(p as *const __m128i);
    let hi = _mm_srli_epi16(b, 4);
    let both = _mm256_set_m128i(hi, b);
    _mm256_and_si256(both, _mm256_set1_epi8(0x0F))
}

/// How many bytes ahead of its reads a one-row (decode) kernel asks for weights.
///
/// A decode step streams every weight once, one row after another. On some hosts the hardware
/// prefetchers keep too few cache lines in flight for loops that spend a few cycles per
/// 18–34-byte block: on a 2-core AVX-512 Xeon VM the one-row `Q4_0` product streamed 5.8 GiB/s
/// from memory without software prefetch and 13.4 GiB/s with it at 2 KiB ahead (no further gain
/// at 4 or 8 KiB), `Q8_0` 10.3 → 16.3 GiB/s (`cargo bench --bench kernels -- decode_stream`).
const PREFETCH_AHEAD: usize = 2048;

/// Ask for the cache lines holding `p + PREFETCH_AHEAD .. + len` (`len` ≤ 256: one request per
/// 64 bytes). A hint: it reads nothing and never faults, so the address may lie past the end of
/// the row or of the allocation (the pointer is formed with `wrapping_add`, never dereferenced).
///
/// # Safety
/// The CPU must support SSE (every x86-64 CPU does). Reads no memory.
#[inline(always)]
unsafe fn prefetch_ahead<const LEN: usize>(p: *const u8) {
    let q = p.wrapping_add(PREFETCH_AHEAD);
    let mut at = 0;
    while at < LEN {
        _mm_prefetch::<_MM_HINT_T0>(q.wrapping_add(at) as *const i8);
        at += 64;
    }
}

/// Signed × signed byte dot product, summed in pairs to 8 × `i32`.
///
/// # Safety
/// The CPU must support AVX2. Reads no memory.
#[inline(always)]
unsafe fn dot_i8(x: __m256i, y: __m256i) -> __m256i {
    let ax = _mm256_sign_epi8(x, x);
    let sy = _mm256_sign_epi8(y, x);
    let p = _mm256_maddubs_epi16(ax, sy);
    _mm256_madd_epi16(p, _mm256_set1_epi16(1))
}

/// Unsigned × signed byte dot product, summed in pairs to 8 × `i32`.
///
/// # Safety
/// The CPU must support AVX2. Reads no memory.
#[inline(always)]
unsafe fn dot_u8_i8(x: __m256i, y: __m256i) -> __m256i {
    _mm256_madd_epi16(_mm256_maddubs_epi16(x, y), _mm256_set1_epi16(1))
}

/// Spread the 32 bits of `bits` to 32 bytes: byte `j` is 0xFF when bit `j` is set.
///
/// # Safety
/// The CPU must support AVX2. Reads no memory.
#[inline(always)]
unsafe fn bits_to_bytes(bits: u32) -> __m256i {
    let shuf = _mm256_set_epi64x(
        0x0303_0303_0303_0303,
        0x0202_0202_0202_0202,
        0x0101_0101_0101_0101,
        0,
    );
    let v = _mm256_shuffle_epi8(_mm256_set1_epi32(bits as i32), shuf);
    let mask = _mm256_set1_epi64x(0x7fbf_dfef_f7fb_fdfe_u64 as i64);
    let v = _mm256_or_si256(v, mask);
    _mm256_cmpeq_epi8(v, _mm256_set1_epi64x(-1))
}

/// `Q4_0 · A32`.
///
/// # Safety
/// The CPU must support AVX2, FMA and F16C; `a` holds the activation blocks of the whole row
/// from `off` on: `a.covers(off, w.len() / BYTES)` for the format's block size `BYTES` (only
/// `debug_assert!`ed here; the safe wrappers assert it).
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn dot_q4_0(w: &[u8], a: &ActBlocks32, off: usize) -> f32 {
    let nb = w.len() / size::Q4_0;
    let ab0 = off / QK32;
    debug_assert!(a.qs.len() >= (ab0 + nb) * QK32);
    let mut acc = _mm256_setzero_ps();
    let mut offs = 0f32;
    for b in 0..nb {
        // Unsigned codes, offset −8·d times the activation block's sum (no sign trick).
        let blk = w.as_ptr().add(b * size::Q4_0);
        prefetch_ahead::<{ size::Q4_0 }>(blk);
        let q = nibbles32(blk.add(2));
        let y = _mm256_loadu_si256(a.qs.as_ptr().add((ab0 + b) * QK32) as *const __m256i);
        let s = _mm256_cvtepi32_ps(dot_u8_i8(q, y));
        let dw = f16c(blk, 0);
        let d = _mm256_set1_ps(dw * *a.d.get_unchecked(ab0 + b));
        acc = _mm256_fmadd_ps(d, s, acc);
        offs -= 8.0 * dw * *a.s.get_unchecked(ab0 + b);
    }
    hsum(acc) + offs
}

/// `Q4_1 · A32`.
///
/// # Safety
/// The CPU must support AVX2, FMA and F16C; `a` holds the activation blocks of the whole row
/// from `off` on: `a.covers(off, w.len() / BYTES)` for the format's block size `BYTES` (only
/// `debug_assert!`ed here; the safe wrappers assert it).
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn dot_q4_1(w: &[u8], a: &ActBlocks32, off: usize) -> f32 {
    let nb = w.len() / size::Q4_1;
    let ab0 = off / QK32;
    debug_assert!(a.qs.len() >= (ab0 + nb) * QK32);
    let mut acc = _mm256_setzero_ps();
    let mut offs = 0f32;
    for b in 0..nb {
        let o = b * size::Q4_1;
        prefetch_ahead::<{ size::Q4_1 }>(w.as_ptr().add(o));
        let q = nibbles32(w.as_ptr().add(o + 4));
        let y = _mm256_loadu_si256(a.qs.as_ptr().add((ab0 + b) * QK32) as *const __m256i);
        let s = _mm256_cvtepi32_ps(dot_u8_i8(q, y));
        let d = _mm256_set1_ps(f16c(w.as_ptr(), o) * *a.d.get_unchecked(ab0 + b));
        acc = _mm256_fmadd_ps(d, s, acc);
        offs += f16c(w.as_ptr(), o + 2) * *a.s.get_unchecked(ab0 + b);
    }
    hsum(acc) + offs
}

/// `Q5_0 · A32`.
///
/// # Safety
/// The CPU must support AVX2, FMA and F16C; `a` holds the activation blocks of the whole row
/// from `off` on: `a.covers(off, w.len() / BYTES)` for the format's block size `BYTES` (only
/// `debug_assert!`ed here; the safe wrappers assert it).
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn dot_q5_0(w: &[u8], a: &ActBlocks32, off: usize) -> f32 {
    let nb = w.len() / size::Q5_0;
    let ab0 = off / QK32;
    debug_assert!(a.qs.len() >= (ab0 + nb) * QK32);
    let mut acc = _mm256_setzero_ps();
    let mut offs = 0f32;
    let sixteen = _mm256_set1_epi8(16);
    for b in 0..nb {
        // Unsigned 5-bit codes, offset −16·d times the activation block's sum.
        let o = b * size::Q5_0;
        prefetch_ahead::<{ size::Q5_0 }>(w.as_ptr().add(o));
        let qh = (w.as_ptr().add(o + 2) as *const u32).read_unaligned();
        let hi = _mm256_and_si256(bits_to_bytes(qh), sixteen);
        let q = _mm256_or_si256(nibbles32(w.as_ptr().add(o + 6)), hi);
        let y = _mm256_loadu_si256(a.qs.as_ptr().add((ab0 + b) * QK32) as *const __m256i);
        let s = _mm256_cvtepi32_ps(dot_u8_i8(q, y));
        let dw = f16c(w.as_ptr(), o);
        let d = _mm256_set1_ps(dw * *a.d.get_unchecked(ab0 + b));
        acc = _mm256_fmadd_ps(d, s, acc);
        offs -= 16.0 * dw * *a.s.get_unchecked(ab0 + b);
    }
    hsum(acc) + offs
}

/// `Q8_0 · A32`.
///
/// # Safety
/// The CPU must support AVX2, FMA and F16C; `a` holds the activation blocks of the whole row
/// from `off` on: `a.covers(off, w.len() / BYTES)` for the format's block size `BYTES` (only
/// `debug_assert!`ed here; the safe wrappers assert it).
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn dot_q8_0(w: &[u8], a: &ActBlocks32, off: usize) -> f32 {
    let nb = w.len() / size::Q8_0;
    let ab0 = off / QK32;
    debug_assert!(a.qs.len() >= (ab0 + nb) * QK32);
    let mut acc = _mm256_setzero_ps();
    for b in 0..nb {
        let o = b * size::Q8_0;
        prefetch_ahead::<{ size::Q8_0 }>(w.as_ptr().add(o));
        let q = _mm256_loadu_si256(w.as_ptr().add(o + 2) as *const __m256i);
        let y = _mm256_loadu_si256(a.qs.as_ptr().add((ab0 + b) * QK32) as *const __m256i);
        let s = _mm256_cvtepi32_ps(dot_i8(q, y));
        let d = _mm256_set1_ps(f16c(w.as_ptr(), o) * *a.d.get_unchecked(ab0 + b));
        acc = _mm256_fmadd_ps(d, s, acc);
    }
    hsum(acc)
}

/// The sum over sub-blocks of `min_j · (bsum_2j + bsum_2j+1)`.
#[inline(always)]
fn k4_mins(scales: &[u8], bs: &[i16]) -> (i32, [i16; 8]) {
    let mut summ = 0i32;
    let mut sc = [0i16; 8];
    for j in 0..8 {
        let (s, m) = scale_min_k4(j, scales);
        sc[j] = s as i16;
        summ += m as i32 * (bs[2 * j] as i32 + bs[2 * j + 1] as i32);
    }
    (summ, sc)
}

/// The shared body of `Q4_K` (`Q5 = false`) and `Q5_K` (`Q5 = true`, with the fifth bit of
/// each code in `qh`). Inlined into the feature-enabled wrappers below.
///
/// # Safety
/// As for [`dot_q4_k`] and [`dot_q5_k`], which it is inlined into: the CPU must support AVX2,
/// FMA and F16C, and `a.covers(off, w.len() / BYTES)` for the format's super-block size
/// `BYTES` (`w` is read only below `w.len() / BYTES · BYTES`; `a`'s values and scales are read
/// unchecked).
#[inline(always)]
unsafe fn dot_k45<const Q5: bool>(w: &[u8], a: &ActBlocksK, off: usize) -> f32 {
    let bytes = if Q5 { size::Q5_K } else { size::Q4_K };
    let qs_at = if Q5 { 48 } else { 16 };
    let nb = w.len() / bytes;
    let ab0 = off / QK_K;
    debug_assert!(a.qs.len() >= (ab0 + nb) * QK_K);
    let mut acc = _mm256_setzero_ps();
    let mut mins = 0f32;
    let mask = _mm256_set1_epi8(0x0F);
    let sixteen = _mm256_set1_epi8(16);
    for b in 0..nb {
        let o = b * bytes;
        if Q5 {
            prefetch_ahead::<{ size::Q5_K }>(w.as_ptr().add(o));
        } else {
            prefetch_ahead::<{ size::Q4_K }>(w.as_ptr().add(o));
        }
        let ab = ab0 + b;
        let da = *a.d.get_unchecked(ab);
        let (summ, sc) = k4_mins(&w[o + 4..o + 16], &a.bsums[ab * 16..ab * 16 + 16]);
        mins += f16c(w.as_ptr(), o + 2) * da * summ as f32;
        let qh = if Q5 {
            _mm256_loadu_si256(w.as_ptr().add(o + 16) as *const __m256i)
        } else {
            _mm256_setzero_si256()
        };
        let qs = w.as_ptr().add(o + qs_at);
        let ys = a.qs.as_ptr().add(ab * QK_K);
        let mut sumi = _mm256_setzero_si256();
        for i in 0..4 {
            let q = _mm256_loadu_si256(qs.add(32 * i) as *const __m256i);
            let mut lo = _mm256_and_si256(q, mask);
            let mut hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), mask);
            if Q5 {
                // Bit 2i of each qh byte → 16 for the low half, bit 2i+1 for the high half.
                let bit = |k: i32| {
                    _mm256_and_si256(
                        _mm256_slli_epi16(_mm256_srlv_epi32(qh, _mm256_set1_epi32(k)), 4),
                        sixteen,
                    )
                };
                lo = _mm256_or_si256(lo, bit(2 * i as i32));
                hi = _mm256_or_si256(hi, bit(2 * i as i32 + 1));
            }
            let y0 = _mm256_loadu_si256(ys.add(64 * i) as *const __m256i);
            let y1 = _mm256_loadu_si256(ys.add(64 * i + 32) as *const __m256i);
            let p0 = _mm256_madd_epi16(_mm256_maddubs_epi16(lo, y0), _mm256_set1_epi16(sc[2 * i]));
            let p1 = _mm256_madd_epi16(
                _mm256_maddubs_epi16(hi, y1),
                _mm256_set1_epi16(sc[2 * i + 1]),
            );
            sumi = _mm256_add_epi32(sumi, _mm256_add_epi32(p0, p1));
        }
        let d = _mm256_set1_ps(f16c(w.as_ptr(), o) * da);
        acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(sumi), acc);
    }
    hsum(acc) - mins
}

/// `Q4_K · AK`.
///
/// # Safety
/// The CPU must support AVX2, FMA and F16C; `a` holds the activation super-blocks of the whole
/// row from `off` on: `a.covers(off, w.len() / BYTES)` for the format's block size `BYTES`
/// (only `debug_assert!`ed here; the safe wrappers assert it).
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn dot_q4_k(w: &[u8], a: &ActBlocksK, off: usize) -> f32 {
    dot_k45::<false>(w, a, off)
}

/// `Q5_K · AK`.
///
/// # Safety
/// The CPU must support AVX2, FMA and F16C; `a` holds the activation super-blocks of the whole
/// row from `off` on: `a.covers(off, w.len() / BYTES)` for the format's block size `BYTES`
/// (only `debug_assert!`ed here; the safe wrappers assert it).
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn dot_q5_k(w: &[u8], a: &ActBlocksK, off: usize) -> f32 {
    dot_k45::<true>(w, a, off)
}

/// `Q6_K · AK`.
///
/// # Safety
/// The CPU must support AVX2, FMA and F16C; `a` holds the activation super-blocks of the whole
/// row from `off` on: `a.covers(off, w.len() / BYTES)` for the format's block size `BYTES`
/// (only `debug_assert!`ed here; the safe wrappers assert it).
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn dot_q6_k(w: &[u8], a: &ActBlocksK, off: usize) -> f32 {
    let nb = w.len() / size::Q6_K;
    let ab0 = off / QK_K;
    debug_assert!(a.qs.len() >= (ab0 + nb) * QK_K);
    let mut acc = _mm256_setzero_ps();
    let m4 = _mm256_set1_epi8(0x0F);
    let m2 = _mm256_set1_epi8(3);
    let m32 = _mm256_set1_epi8(32);
    for b in 0..nb {
        let o = b * size::Q6_K;
        prefetch_ahead::<{ size::Q6_K }>(w.as_ptr().add(o));
        let ab = ab0 + b;
        let ys = a.qs.as_ptr().add(ab * QK_K);
        let sc = &w[o + 192..o + 208];
        let mut sumi = _mm256_setzero_si256();
        for n in 0..2 {
            let ql0 = _mm256_loadu_si256(w.as_ptr().add(o + 64 * n) as *const __m256i);
            let ql1 = _mm256_loadu_si256(w.as_ptr().add(o + 64 * n + 32) as *const __m256i);
            let qh = _mm256_loadu_si256(w.as_ptr().add(o + 128 + 32 * n) as *const __m256i);
            let h0 = _mm256_slli_epi16(_mm256_and_si256(qh, m2), 4);
            let h1 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2), m2), 4);
            let h2 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 4), m2), 4);
            let h3 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 6), m2), 4);
            let qs = [
                _mm256_or_si256(_mm256_and_si256(ql0, m4), h0),
                _mm256_or_si256(_mm256_and_si256(ql1, m4), h1),
                _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), m4), h2),
                _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), m4), h3),
            ];
            for (k, q) in qs.into_iter().enumerate() {
                let y = _mm256_loadu_si256(ys.add(128 * n + 32 * k) as *const __m256i);
                // (q - 32) · y  =  q·y − 32·y, both through maddubs (q and 32 are unsigned).
                let p = _mm256_sub_epi16(_mm256_maddubs_epi16(q, y), _mm256_maddubs_epi16(m32, y));
                let g = 8 * n + 2 * k;
                let scales = _mm256_set_m128i(
                    _mm_set1_epi16(sc[g + 1] as i8 as i16),
                    _mm_set1_epi16(sc[g] as i8 as i16),
                );
                sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p, scales));
            }
        }
        let d = _mm256_set1_ps(f16c(w.as_ptr(), o + 208) * *a.d.get_unchecked(ab));
        acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(sumi), acc);
    }
    hsum(acc)
}

/// `Σ x·y` over two `f32` slices of equal length.
///
/// # Safety
/// The CPU must support AVX2, FMA and F16C. Any lengths: only the common length is read.
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn dot_f32(x: &[f32], y: &[f32]) -> f32 {
    let n = x.len().min(y.len());
    let (mut a0, mut a1) = (_mm256_setzero_ps(), _mm256_setzero_ps());
    let mut i = 0;
    while i + 16 <= n {
        a0 = _mm256_fmadd_ps(
            _mm256_loadu_ps(x.as_ptr().add(i)),
            _mm256_loadu_ps(y.as_ptr().add(i)),
            a0,
        );
        a1 = _mm256_fmadd_ps(
            _mm256_loadu_ps(x.as_ptr().add(i + 8)),
            _mm256_loadu_ps(y.as_ptr().add(i + 8)),
            a1,
        );
        i += 16;
    }
    let mut s = hsum(_mm256_add_ps(a0, a1));
    while i < n {
        s += x[i] * y[i];
        i += 1;
    }
    s
}

/// `y += a · x` over two `f32` slices of equal length.
///
/// # Safety
/// The CPU must support AVX2, FMA and F16C. Any lengths: only the common length is touched.
#[target_feature(enable = "avx2,fma,f16c")]
pub unsafe fn axpy_f32(a: f32, x: &[f32], y: &mut [f32]) {
    let n = x.len().min(y.len());
    let av = _mm256_set1_ps(a);
    let mut i = 0;
    while i + 8 <= n {
        let yv = _mm256_loadu_ps(y.as_ptr().add(i));
        let r = _mm256_fmadd_ps(av, _mm256_loadu_ps(x.as_ptr().add(i)), yv);
        _mm256_storeu_ps(y.as_mut_ptr().add(i), r);
        i += 8;
    }
    while i < n {
        y[i] += a * x[i];
        i += 1;
    }
}

/// Four tokens against one row of a 32-weight format: each block is unpacked once and
/// multiplied with the four tokens' activations (prefill). `$unpack` yields the 32 codes
/// (signed when `$signed`) and the block's scale; `$offset` the offset term, if any.
macro_rules! dot4 {
    ($name:ident, $bytes:expr, $signed:expr, |$w:ident, $o:ident| $unpack:expr, $offset:expr) => {
        dot4!(@ $name, "avx2,fma,f16c", dot_i8, dot_u8_i8, $bytes, $signed, |$w, $o| $unpack, $offset);
    };
    (@ $name:ident, $feat:literal, $dot_s:ident, $dot_u:ident, $bytes:expr, $signed:expr, |$w:ident, $o:ident| $unpack:expr, $offset:expr) => {
        /// Four-token variant of the one-token kernel of the same format.
        ///
        /// # Safety
        /// The CPU must support the features named in `target_feature`; for every token,
        /// `a.covers(offs[j], w.len() / BYTES)` (the format's block size; only
        /// `debug_assert!`ed here, the safe wrappers assert it).
        #[target_feature(enable = $feat)]
        pub unsafe fn $name($w: &[u8], a: &ActBlocks32, offs: [usize; 4]) -> [f32; 4] {
            let nb = $w.len() / $bytes;
            let ab = offs.map(|o| o / QK32);
            debug_assert!(ab.iter().all(|&b| a.qs.len() >= (b + nb) * QK32));
            let mut acc = [_mm256_setzero_ps(); 4];
            let mut offsum = [0f32; 4];
            for b in 0..nb {
                let $o = b * $bytes;
                let q: __m256i = $unpack;
                let dw = f16c($w.as_ptr(), $o);
                let mw: Option<f32> = $offset;
                for j in 0..4 {
                    let blk = ab[j] + b;
                    let y = _mm256_loadu_si256(a.qs.as_ptr().add(blk * QK32) as *const __m256i);
                    let p = if $signed {
                        $dot_s(q, y)
                    } else {
                        $dot_u(q, y)
                    };
                    let d = _mm256_set1_ps(dw * *a.d.get_unchecked(blk));
                    acc[j] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(p), acc[j]);
                    if let Some(m) = mw {
                        offsum[j] += m * *a.s.get_unchecked(blk);
                    }
                }
            }
            [
                hsum(acc[0]) + offsum[0],
                hsum(acc[1]) + offsum[1],
                hsum(acc[2]) + offsum[2],
                hsum(acc[3]) + offsum[3],
            ]
        }
    };
}

// Q4_0 and Q5_0 run as unsigned codes plus an offset of −8·d (−16·d) times the activation
// block's sum, so `maddubs` takes the codes directly, without the sign trick.
dot4!(
    dot4_q4_0,
    size::Q4_0,
    false,
    |w, o| nibbles32(w.as_ptr().add(o + 2)),
    Some(-8.0 * f16c(w.as_ptr(), o))
);
dot4!(
    dot4_q4_1,
    size::Q4_1,
    false,
    |w, o| nibbles32(w.as_ptr().add(o + 4)),
    Some(f16c(w.as_ptr(), o + 2))
);
dot4!(
    dot4_q5_0,
    size::Q5_0,
    false,
    |w, o| {
        let qh = (w.as_ptr().add(o + 2) as *const u32).read_unaligned();
        let hi = _mm256_and_si256(bits_to_bytes(qh), _mm256_set1_epi8(16));
        _mm256_or_si256(nibbles32(w.as_ptr().add(o + 6)), hi)
    },
    Some(-16.0 * f16c(w.as_ptr(), o))
);
dot4!(
    dot4_q8_0,
    size::Q8_0,
    true,
    |w, o| _mm256_loadu_si256(w.as_ptr().add(o + 2) as *const __m256i),
    None
);

/// Signed × signed byte dot product with AVX-512 VNNI, summed in fours to 8 × `i32`.
///
/// # Safety
/// The CPU must support AVX2, AVX-512 VNNI and AVX-512 VL. Reads no memory.
#[inline(always)]
unsafe fn dot_i8_vnni(x: __m256i, y: __m256i) -> __m256i {
    _mm256_dpbusd_epi32(
        _mm256_setzero_si256(),
        _mm256_sign_epi8(x, x),
        _mm256_sign_epi8(y, x),
    )
}

/// Unsigned × signed byte dot product with AVX-512 VNNI, summed in fours to 8 × `i32`.
///
/// # Safety
/// The CPU must support AVX-512 VNNI and AVX-512 VL. Reads no memory.
#[inline(always)]
unsafe fn dot_u8_i8_vnni(x: __m256i, y: __m256i) -> __m256i {
    _mm256_dpbusd_epi32(_mm256_setzero_si256(), x, y)
}

/// The four-token kernels again with VNNI's fused byte dot product (`vpdpbusd`), for CPUs
/// with AVX-512 VNNI and VL.
pub mod vnni {
    use super::*;

    dot4!(@ dot4_q4_0, "avx2,fma,f16c,avx512vnni,avx512vl", dot_i8_vnni, dot_u8_i8_vnni, size::Q4_0, false,
        |w, o| nibbles32(w.as_ptr().add(o + 2)), Some(-8.0 * f16c(w.as_ptr(), o)));
    dot4!(@ dot4_q4_1, "avx2,fma,f16c,avx512vnni,avx512vl", dot_i8_vnni, dot_u8_i8_vnni, size::Q4_1, false,
        |w, o| nibbles32(w.as_ptr().add(o + 4)), Some(f16c(w.as_ptr(), o + 2)));
    dot4!(@ dot4_q5_0, "avx2,fma,f16c,avx512vnni,avx512vl", dot_i8_vnni, dot_u8_i8_vnni, size::Q5_0, false,
        |w, o| {
            let qh = (w.as_ptr().add(o + 2) as *const u32).read_unaligned();
            let hi = _mm256_and_si256(bits_to_bytes(qh), _mm256_set1_epi8(16));
            _mm256_or_si256(nibbles32(w.as_ptr().add(o + 6)), hi)
        }, Some(-16.0 * f16c(w.as_ptr(), o)));
    dot4!(@ dot4_q8_0, "avx2,fma,f16c,avx512vnni,avx512vl", dot_i8_vnni, dot_u8_i8_vnni, size::Q8_0, true,
        |w, o| _mm256_loadu_si256(w.as_ptr().add(o + 2) as *const __m256i), None);
}

/// `Q5_0 · A32` for one row (decode) with AVX-512 VNNI, BW and VL: the fifth bit is added
/// under a byte mask (`k` register) instead of being spread to bytes, `vpdpbusd` forms the
/// block sum in one instruction, and two accumulators split the chain of float adds. Same
/// integer sums as the AVX2 kernel. Only `Q5_0` has such a kernel: for the other 32-weight
/// formats the AVX2 kernels decoded faster.
///
/// # Safety
/// The CPU must support AVX2, FMA, F16C and AVX-512 VNNI, BW and VL; `a` holds the blocks of
/// the whole row from `off` on, `a.covers(off, w.len() / 22)` (as for the AVX2 kernel; only
/// `debug_assert!`ed here, the safe wrapper asserts it).
#[target_feature(enable = "avx2,fma,f16c,avx512vnni,avx512vl,avx512bw")]
pub unsafe fn dot_q5_0_vnni(w: &[u8], a: &ActBlocks32, off: usize) -> f32 {
    let nb = w.len() / size::Q5_0;
    let ab0 = off / QK32;
    debug_assert!(a.qs.len() >= (ab0 + nb) * QK32);
    let mut acc = [_mm256_setzero_ps(); 2];
    let mut offs = 0f32;
    for b in 0..nb {
        let o = b * size::Q5_0;
        prefetch_ahead::<{ size::Q5_0 }>(w.as_ptr().add(o));
        let qh = (w.as_ptr().add(o + 2) as *const u32).read_unaligned();
        let lo = nibbles32(w.as_ptr().add(o + 6));
        let q = _mm256_mask_add_epi8(lo, qh, lo, _mm256_set1_epi8(16));
        let y = _mm256_loadu_si256(a.qs.as_ptr().add((ab0 + b) * QK32) as *const __m256i);
        let p = _mm256_dpbusd_epi32(_mm256_setzero_si256(), q, y);
        let dw = f16c(w.as_ptr(), o);
        let d = _mm256_set1_ps(dw * *a.d.get_unchecked(ab0 + b));
        acc[b & 1] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(p), acc[b & 1]);
        offs -= 16.0 * dw * *a.s.get_unchecked(ab0 + b);
    }
    hsum(_mm256_add_ps(acc[0], acc[1])) + offs
}

/// `e^x` for eight lanes with `x ≤ 0` (softmax after subtracting the maximum): `2^n · e^f`
/// with `n = round(x / ln 2)`, `|f| ≤ ln 2 / 2`, and a degree-6 Taylor polynomial for `e^f`
/// (relative error about 1e-7). Inputs below −87 are clamped (e^−87 is still a normal float).
///
/// # Safety
/// The CPU must support AVX2 and FMA. Reads no memory.
#[inline(always)]
pub(super) unsafe fn exp_neg(x: __m256) -> __m256 {
    let x = _mm256_max_ps(x, _mm256_set1_ps(-87.0));
    let n = _mm256_round_ps(
        _mm256_mul_ps(x, _mm256_set1_ps(std::f32::consts::LOG2_E)),
        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC,
    );
    // f = x − n·ln2, with ln2 split in two for precision.
    let f = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693_145_75), x);
    let f = _mm256_fnmadd_ps(n, _mm256_set1_ps(1.428_606_8e-6), f);
    let mut p = _mm256_set1_ps(1.0 / 720.0);
    for c in [1.0 / 120.0, 1.0 / 24.0, 1.0 / 6.0, 0.5, 1.0, 1.0] {
        p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(c));
    }
    let pow2n = _mm256_castsi256_ps(_mm256_slli_epi32(
        _mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)),
        23,
    ));
    _mm256_mul_ps(p, pow2n)
}

/// `g ← silu(g) · u = g · σ(g) · u` in place, eight lanes at a time; `σ` from `e^−|g|`
/// so the exponential never overflows.
///
/// # Safety
/// The CPU must support AVX2 and FMA; `u.len() ≥ g.len()` (checked by the caller).
#[target_feature(enable = "avx2,fma")]
pub unsafe fn silu_mul(g: &mut [f32], u: &[f32]) {
    let n = g.len();
    let one = _mm256_set1_ps(1.0);
    let sign = _mm256_set1_ps(-0.0);
    let mut i = 0;
    while i + 8 <= n {
        let x = _mm256_loadu_ps(g.as_ptr().add(i));
        let e = exp_neg(_mm256_or_ps(x, sign));
        let r = _mm256_div_ps(one, _mm256_add_ps(one, e));
        // σ(x) = 1/(1+e) for x ≥ 0, e/(1+e) for x < 0.
        let neg = _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_LT_OQ);
        let sig = _mm256_blendv_ps(r, _mm256_mul_ps(e, r), neg);
        let y = _mm256_mul_ps(_mm256_mul_ps(x, sig), _mm256_loadu_ps(u.as_ptr().add(i)));
        _mm256_storeu_ps(g.as_mut_ptr().add(i), y);
        i += 8;
    }
    for j in i..n {
        let x = g[j];
        g[j] = x / (1.0 + (-x).exp()) * u[j];
    }
}

/// One query row's attention over `n` cached positions: `scores = softmax(scale · K q)`,
/// `out = Σ_j scores_j · V_j`. `k` and `v` hold `n` rows of `8·C` floats each, contiguous;
/// the output accumulates in `C` registers across all positions.
///
/// # Safety
/// The CPU must support AVX2 and FMA; `q.len() == out.len() == 8·C`, `k.len(), v.len() ≥ n·8·C`
/// and `scores.len() ≥ n` (asserted by the safe wrapper).
#[target_feature(enable = "avx2,fma")]
#[allow(clippy::needless_range_loop)] // `c` indexes registers held in arrays of C.
pub unsafe fn attend<const C: usize>(
    q: &[f32],
    k: &[f32],
    v: &[f32],
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
        let mut acc = _mm256_mul_ps(qv[0], _mm256_loadu_ps(kr));
        for c in 1..C {
            acc = _mm256_fmadd_ps(qv[c], _mm256_loadu_ps(kr.add(8 * c)), acc);
        }
        let s = hsum(acc) * scale;
        *scores.get_unchecked_mut(j) = s;
        max = max.max(s);
    }
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
    let inv = 1.0 / sum;
    let mut acc = [_mm256_setzero_ps(); C];
    for j in 0..n {
        let p = _mm256_set1_ps(*scores.get_unchecked(j) * inv);
        let vr = v.as_ptr().add(j * hd);
        for c in 0..C {
            acc[c] = _mm256_fmadd_ps(p, _mm256_loadu_ps(vr.add(8 * c)), acc[c]);
        }
    }
    for c in 0..C {
        _mm256_storeu_ps(out.as_mut_ptr().add(8 * c), acc[c]);
    }
}

/// The panel product of `T` tokens from `tok0`: `out[i·8 + r] = Σ_k w[r][k] · a[tok0 + i][k]`
/// for the eight rows of `p` (see `super::panel`). `H` is the panel's scale halves. `$acc`
/// adds the unsigned × signed byte products of a 32-byte vector, in fours, to `i32` lanes.
macro_rules! panel_kernel {
    ($name:ident, $feat:literal, $acc:ident) => {
        /// # Safety
        /// The CPU must support the features named in `target_feature`;
        /// `a.fits(p, tok0, T)` and `out.len() ≥ 8·T` (checked by the caller).
        #[target_feature(enable = $feat)]
        pub unsafe fn $name<const T: usize, const H: usize>(
            p: &Panel,
            a: &PanelActs,
            tok0: usize,
            out: &mut [f32],
        ) {
            let nb = p.nb;
            let mut facc = [_mm256_setzero_ps(); T];
            let per_half = 8 / H;
            for b in 0..nb {
                let cw = p.codes.as_ptr().add(b * PANEL_BLOCK_BYTES);
                for h in 0..H {
                    let mut iacc = [_mm256_setzero_si256(); T];
                    for g in h * per_half..(h + 1) * per_half {
                        let w = _mm256_loadu_si256(cw.add(g * 32) as *const __m256i);
                        for t in 0..T {
                            let ap = a.qs.as_ptr().add((tok0 + t) * a.cols + b * QK32 + g * 4);
                            let y = _mm256_set1_epi32((ap as *const i32).read_unaligned());
                            iacc[t] = $acc(iacc[t], w, y);
                        }
                    }
                    let at = (b * H + h) * PANEL_ROWS;
                    let sc = _mm256_loadu_ps(p.scale.as_ptr().add(at));
                    let of = _mm256_loadu_ps(p.off.as_ptr().add(at));
                    for t in 0..T {
                        let blk = (tok0 + t) * nb + b;
                        let da = _mm256_set1_ps(*a.d.get_unchecked(blk >> a.dshift));
                        let sa = _mm256_set1_ps(*a.s.get_unchecked(blk * H + h));
                        let f = _mm256_cvtepi32_ps(iacc[t]);
                        facc[t] = _mm256_fmadd_ps(f, _mm256_mul_ps(sc, da), facc[t]);
                        facc[t] = _mm256_fmadd_ps(of, sa, facc[t]);
                    }
                }
            }
            for t in 0..T {
                _mm256_storeu_ps(out.as_mut_ptr().add(t * PANEL_ROWS), facc[t]);
            }
        }
    };
}

/// `acc + Σ₄ x·y` for unsigned `x` and signed `y`, through `maddubs` (pairs, saturating at
/// ±32767: safe for codes below 64 against activations of at most 127) and `madd`.
///
/// # Safety
/// The CPU must support AVX2. Reads no memory.
#[inline(always)]
unsafe fn acc_u8_i8(acc: __m256i, x: __m256i, y: __m256i) -> __m256i {
    _mm256_add_epi32(acc, dot_u8_i8(x, y))
}

/// `acc + Σ₄ x·y` with AVX-512 VNNI's `vpdpbusd` (no intermediate saturation).
///
/// # Safety
/// The CPU must support AVX-512 VNNI and AVX-512 VL. Reads no memory.
#[inline(always)]
unsafe fn acc_u8_i8_vnni(acc: __m256i, x: __m256i, y: __m256i) -> __m256i {
    _mm256_dpbusd_epi32(acc, x, y)
}

panel_kernel!(panel_avx2, "avx2,fma,f16c", acc_u8_i8);
panel_kernel!(
    panel_vnni,
    "avx2,fma,f16c,avx512vnni,avx512vl",
    acc_u8_i8_vnni
);

/// The 32 codes of 32-weight block `b` of a row of `ty` (see `super::panel::decode_row`).
///
/// # Safety
/// The CPU must support AVX2, and the bytes of the block that holds weights `32b .. 32b + 32`
/// must be readable from `w`: for the 32-weight formats (`Q4_0`, `Q4_1`, `Q5_0`, `Q8_0`) the
/// first `(b + 1) · BYTES` bytes, for the super-block formats (`Q4_K`, `Q5_K`, `Q6_K`) the first
/// `(b / 8 + 1) · BYTES`, where `BYTES` is `ty`'s block size. `F32` and `F16` read nothing
/// (they have no panel form and give zeros).
#[inline(always)]
unsafe fn block_codes(ty: QType, w: *const u8, b: usize) -> __m256i {
    let low4 = _mm256_set1_epi8(0x0F);
    match ty {
        QType::Q4_0 => nibbles32(w.add(b * size::Q4_0 + 2)),
        QType::Q4_1 => nibbles32(w.add(b * size::Q4_1 + 4)),
        QType::Q5_0 => {
            let p = w.add(b * size::Q5_0);
            let qh = (p.add(2) as *const u32).read_unaligned();
            let hi = _mm256_and_si256(bits_to_bytes(qh), _mm256_set1_epi8(16));
            _mm256_or_si256(nibbles32(p.add(6)), hi)
        }
        QType::Q8_0 => _mm256_xor_si256(
            _mm256_loadu_si256(w.add(b * size::Q8_0 + 2) as *const __m256i),
            _mm256_set1_epi8(-128),
        ),
        QType::Q4_K | QType::Q5_K => {
            let (bytes, qs_at) = if ty == QType::Q5_K {
                (size::Q5_K, 48)
            } else {
                (size::Q4_K, 16)
            };
            let (sb, j) = (b / 8, (b % 8) as i32);
            let blk = w.add(sb * bytes);
            let x = _mm256_loadu_si256(blk.add(qs_at + (j as usize / 2) * 32) as *const __m256i);
            let lo = _mm256_and_si256(_mm256_srl_epi16(x, _mm_cvtsi32_si128(4 * (j % 2))), low4);
            if ty == QType::Q4_K {
                return lo;
            }
            // Bit j of each qh byte to bit 4: 16-bit shifts keep each byte's bit in place
            // after the mask.
            let qh = _mm256_loadu_si256(blk.add(16) as *const __m256i);
            let bit = _mm256_srl_epi16(qh, _mm_cvtsi32_si128(j));
            let hi = _mm256_and_si256(_mm256_slli_epi16(bit, 4), _mm256_set1_epi8(0x10));
            _mm256_or_si256(lo, hi)
        }
        QType::Q6_K => {
            let (sb, j) = (b / 8, b % 8);
            let (n, q) = (j / 4, j % 4);
            let blk = w.add(sb * size::Q6_K);
            let ql = _mm256_loadu_si256(blk.add(64 * n + (q & 1) * 32) as *const __m256i);
            let shift = _mm_cvtsi32_si128(4 * (q as i32 >> 1));
            let lo = _mm256_and_si256(_mm256_srl_epi16(ql, shift), low4);
            let qh = _mm256_loadu_si256(blk.add(128 + 32 * n) as *const __m256i);
            let two = _mm256_and_si256(
                _mm256_srl_epi16(qh, _mm_cvtsi32_si128(2 * q as i32)),
                _mm256_set1_epi8(3),
            );
            _mm256_or_si256(lo, _mm256_slli_epi16(two, 4))
        }
        QType::F32 | QType::F16 => _mm256_setzero_si256(),
    }
}

/// Write the interleaved panel codes of eight rows: per 32-weight block, the eight rows'
/// codes are an 8 × 8 matrix of 4-byte groups, transposed so that vector `g` holds group `g`
/// of every row.
///
/// # Safety
/// The CPU must support AVX2; each row holds `nb` 32-weight blocks of `ty`, a panel format, and
/// `out.len() ≥ nb · 256` (checked by the caller).
#[target_feature(enable = "avx2")]
pub unsafe fn pack_codes(ty: QType, rows: &[&[u8]; PANEL_ROWS], nb: usize, out: &mut [u8]) {
    for b in 0..nb {
        let v: [__m256i; 8] = std::array::from_fn(|r| block_codes(ty, rows[r].as_ptr(), b));
        let t0 = _mm256_unpacklo_epi32(v[0], v[1]);
        let t1 = _mm256_unpackhi_epi32(v[0], v[1]);
        let t2 = _mm256_unpacklo_epi32(v[2], v[3]);
        let t3 = _mm256_unpackhi_epi32(v[2], v[3]);
        let t4 = _mm256_unpacklo_epi32(v[4], v[5]);
        let t5 = _mm256_unpackhi_epi32(v[4], v[5]);
        let t6 = _mm256_unpacklo_epi32(v[6], v[7]);
        let t7 = _mm256_unpackhi_epi32(v[6], v[7]);
        // u_k holds groups k and k + 4 of four rows.
        let u = [
            _mm256_unpacklo_epi64(t0, t2),
            _mm256_unpackhi_epi64(t0, t2),
            _mm256_unpacklo_epi64(t1, t3),
            _mm256_unpackhi_epi64(t1, t3),
        ];
        let w = [
            _mm256_unpacklo_epi64(t4, t6),
            _mm256_unpackhi_epi64(t4, t6),
            _mm256_unpacklo_epi64(t5, t7),
            _mm256_unpackhi_epi64(t5, t7),
        ];
        let dst = out.as_mut_ptr().add(b * PANEL_BLOCK_BYTES) as *mut __m256i;
        for k in 0..4 {
            _mm256_storeu_si256(dst.add(k), _mm256_permute2x128_si256(u[k], w[k], 0x20));
            _mm256_storeu_si256(dst.add(k + 4), _mm256_permute2x128_si256(u[k], w[k], 0x31));
        }
    }
}
