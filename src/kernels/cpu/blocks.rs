//! GGML block layouts and the scalar reference kernels.
//!
//! Every format packs a fixed number of weights into a fixed number of bytes. The scalar code
//! here is the definition the SIMD paths are tested against: it decodes each block into small
//! integers, forms the integer dot product with the quantized activations, and scales once per
//! (sub-)block, exactly as the SIMD kernels do, so the two agree up to float summation order.
//!
//! Layouts (little-endian, `f16` is IEEE half):
//! - `Q4_0` (18 B / 32): `d: f16`, `qs[16]`; weight `j` is the low nibble of `qs[j]`, weight
//!   `j + 16` the high nibble; value `(q - 8) · d`.
//! - `Q4_1` (20 B / 32): `d, m: f16`, `qs[16]` as above; value `q · d + m`.
//! - `Q5_0` (22 B / 32): `d: f16`, `qh: u32`, `qs[16]`; bit `j` of `qh` is the fifth bit of
//!   weight `j`; value `(q - 16) · d`.
//! - `Q8_0` (34 B / 32): `d: f16`, `qs[32]: i8`; value `q · d`.
//! - `Q4_K` (144 B / 256): `d, dmin: f16`, `scales[12]` (eight 6-bit scales and mins), `qs[128]`;
//!   64 weights per 32 bytes of `qs`, low nibbles first; value `d·sc·q − dmin·m`.
//! - `Q5_K` (176 B / 256): as `Q4_K` plus `qh[32]`, two high bits per byte per 64-weight chunk.
//! - `Q6_K` (210 B / 256): `ql[128]`, `qh[64]`, `scales[16]: i8`, `d: f16`; value
//!   `d · sc · (q − 32)` with sixteen weights per scale.
//!
//! Activations are quantized once per matmul: to 32-element blocks (`ActBlocks32`: one `f32`
//! scale and the scaled sum per block, for the 32-weight formats) or to 256-element blocks
//! (`ActBlocksK`: scale and 16-element sums, for the K formats).

use half::f16;

/// Weights per block of the 32-element formats.
pub const QK32: usize = 32;
/// Weights per super-block of the K formats.
pub const QK_K: usize = 256;

/// Bytes per block of each format.
pub mod size {
    /// `Q4_0`.
    pub const Q4_0: usize = 18;
    /// `Q4_1`.
    pub const Q4_1: usize = 20;
    /// `Q5_0`.
    pub const Q5_0: usize = 22;
    /// `Q8_0`.
    pub const Q8_0: usize = 34;
    /// `Q4_K`.
    pub const Q4_K: usize = 144;
    /// `Q5_K`.
    pub const Q5_K: usize = 176;
    /// `Q6_K`.
    pub const Q6_K: usize = 210;
}

/// Read a little-endian `f16` at `at` as `f32`.
#[inline(always)]
pub fn f16_at(b: &[u8], at: usize) -> f32 {
    f16::from_bits(u16::from_le_bytes([b[at], b[at + 1]])).to_f32()
}

/// Activations quantized to 32-element blocks of `i8` (llama.cpp's `Q8_1`, stored as separate
/// arrays): `qs[i] ≈ x[i] / d[i / 32]`, and `s[b] = d[b] · Σ qs` over block `b`.
#[derive(Debug, Clone, Default)]
pub struct ActBlocks32 {
    /// Quantized values.
    pub qs: Vec<i8>,
    /// Scale per block.
    pub d: Vec<f32>,
    /// `d · Σ qs` per block (used by the formats with an offset, `Q4_1`).
    pub s: Vec<f32>,
}

impl ActBlocks32 {
    /// Whether blocks `off / 32 .. off / 32 + nb` are all here (values, scales and sums): the
    /// length condition of the SIMD kernels, which read them unchecked.
    pub fn covers(&self, off: usize, nb: usize) -> bool {
        let end = off / QK32 + nb;
        self.qs.len() >= end * QK32 && self.d.len() >= end && self.s.len() >= end
    }

    /// Quantize `x` (length a multiple of 32) in place of the previous contents.
    pub fn quantize(&mut self, x: &[f32]) {
        debug_assert_eq!(x.len() % QK32, 0);
        let nb = x.len() / QK32;
        self.qs.resize(x.len(), 0);
        self.d.resize(nb, 0.0);
        self.s.resize(nb, 0.0);
        for b in 0..nb {
            let xs = &x[b * QK32..(b + 1) * QK32];
            let amax = xs.iter().fold(0f32, |m, v| m.max(v.abs()));
            let d = amax / 127.0;
            let id = if d > 0.0 { 1.0 / d } else { 0.0 };
            let mut sum = 0i32;
            for (q, &v) in self.qs[b * QK32..(b + 1) * QK32].iter_mut().zip(xs) {
                let r = (v * id).round() as i32;
                *q = r as i8;
                sum += r;
            }
            self.d[b] = d;
            self.s[b] = d * sum as f32;
        }
    }
}

/// Activations quantized to 256-element super-blocks (llama.cpp's `Q8_K`): one scale per
/// super-block and the sum of every 16 quantized values.
#[derive(Debug, Clone, Default)]
pub struct ActBlocksK {
    /// Quantized values.
    pub qs: Vec<i8>,
    /// Scale per super-block.
    pub d: Vec<f32>,
    /// Sum of each run of 16 quantized values.
    pub bsums: Vec<i16>,
    /// `d · bsums` per run of 16 (the panel kernels' offset term for `Q6_K`).
    pub s16: Vec<f32>,
    /// `d · Σ q` per run of 32 (the panel kernels' offset term for `Q4_K` and `Q5_K`).
    pub s32: Vec<f32>,
}

impl ActBlocksK {
    /// Whether super-blocks `off / 256 .. off / 256 + nb` are all here (values, scales and
    /// run sums): the length condition of the SIMD kernels, which read them unchecked.
    pub fn covers(&self, off: usize, nb: usize) -> bool {
        let end = off / QK_K + nb;
        self.qs.len() >= end * QK_K && self.d.len() >= end && self.bsums.len() >= end * 16
    }

    /// Quantize `x` (length a multiple of 256) in place of the previous contents.
    pub fn quantize(&mut self, x: &[f32]) {
        debug_assert_eq!(x.len() % QK_K, 0);
        let nb = x.len() / QK_K;
        self.qs.resize(x.len(), 0);
        self.d.resize(nb, 0.0);
        self.bsums.resize(x.len() / 16, 0);
        self.s16.resize(x.len() / 16, 0.0);
        self.s32.resize(x.len() / 32, 0.0);
        for b in 0..nb {
            let xs = &x[b * QK_K..(b + 1) * QK_K];
            let amax = xs.iter().fold(0f32, |m, v| m.max(v.abs()));
            let qs = &mut self.qs[b * QK_K..(b + 1) * QK_K];
            if amax == 0.0 {
                qs.fill(0);
                self.d[b] = 0.0;
                self.bsums[b * 16..(b + 1) * 16].fill(0);
                continue;
            }
            let id = 127.0 / amax;
            for (q, &v) in qs.iter_mut().zip(xs) {
                *q = (v * id).round().clamp(-127.0, 127.0) as i8;
            }
            self.d[b] = 1.0 / id;
            for (g, sum) in self.bsums[b * 16..(b + 1) * 16].iter_mut().enumerate() {
                *sum = qs[g * 16..(g + 1) * 16].iter().map(|&q| q as i16).sum();
            }
        }
        let d = &self.d;
        for (i, (s, &b)) in self.s16.iter_mut().zip(&self.bsums).enumerate() {
            *s = d[i / 16] * b as f32;
        }
        for (i, s) in self.s32.iter_mut().enumerate() {
            *s = d[i / 8] * (self.bsums[2 * i] as i32 + self.bsums[2 * i + 1] as i32) as f32;
        }
    }
}

/// Decode the 6-bit scale and min of sub-block `j` (0..8) of a `Q4_K`/`Q5_K` block.
#[inline(always)]
pub fn scale_min_k4(j: usize, s: &[u8]) -> (u8, u8) {
    if j < 4 {
        (s[j] & 63, s[j + 4] & 63)
    } else {
        (
            (s[j + 4] & 0x0F) | ((s[j - 4] >> 6) << 4),
            (s[j + 4] >> 4) | ((s[j] >> 6) << 4),
        )
    }
}

/// Unpack one 32-weight block to its integer codes (before offset and scale).
#[inline(always)]
pub(super) fn nibbles(qs: &[u8], out: &mut [i32; 32]) {
    for j in 0..16 {
        out[j] = (qs[j] & 0x0F) as i32;
        out[j + 16] = (qs[j] >> 4) as i32;
    }
}

#[inline(always)]
fn idot(a: &[i32], b: &[i8]) -> i32 {
    a.iter().zip(b).map(|(&x, &y)| x * y as i32).sum()
}

/// Scalar `Q4_0 · A32`.
pub fn dot_q4_0(w: &[u8], a: &ActBlocks32, off: usize) -> f32 {
    let mut acc = 0f32;
    let mut q = [0i32; 32];
    for (b, blk) in w.chunks_exact(size::Q4_0).enumerate() {
        nibbles(&blk[2..], &mut q);
        q.iter_mut().for_each(|v| *v -= 8);
        let ab = off / QK32 + b;
        let sumi = idot(&q, &a.qs[ab * QK32..(ab + 1) * QK32]);
        acc += f16_at(blk, 0) * a.d[ab] * sumi as f32;
    }
    acc
}

/// Scalar `Q4_1 · A32`.
pub fn dot_q4_1(w: &[u8], a: &ActBlocks32, off: usize) -> f32 {
    let mut acc = 0f32;
    let mut q = [0i32; 32];
    for (b, blk) in w.chunks_exact(size::Q4_1).enumerate() {
        nibbles(&blk[4..], &mut q);
        let ab = off / QK32 + b;
        let sumi = idot(&q, &a.qs[ab * QK32..(ab + 1) * QK32]);
        acc += f16_at(blk, 0) * a.d[ab] * sumi as f32 + f16_at(blk, 2) * a.s[ab];
    }
    acc
}

/// Scalar `Q5_0 · A32`.
pub fn dot_q5_0(w: &[u8], a: &ActBlocks32, off: usize) -> f32 {
    let mut acc = 0f32;
    let mut q = [0i32; 32];
    for (b, blk) in w.chunks_exact(size::Q5_0).enumerate() {
        let qh = u32::from_le_bytes([blk[2], blk[3], blk[4], blk[5]]);
        nibbles(&blk[6..], &mut q);
        for (j, v) in q.iter_mut().enumerate() {
            *v = (*v | ((((qh >> j) & 1) as i32) << 4)) - 16;
        }
        let ab = off / QK32 + b;
        let sumi = idot(&q, &a.qs[ab * QK32..(ab + 1) * QK32]);
        acc += f16_at(blk, 0) * a.d[ab] * sumi as f32;
    }
    acc
}

/// Scalar `Q8_0 · A32`.
pub fn dot_q8_0(w: &[u8], a: &ActBlocks32, off: usize) -> f32 {
    let mut acc = 0f32;
    for (b, blk) in w.chunks_exact(size::Q8_0).enumerate() {
        let ab = off / QK32 + b;
        let sumi: i32 = blk[2..34]
            .iter()
            .zip(&a.qs[ab * QK32..(ab + 1) * QK32])
            .map(|(&x, &y)| (x as i8) as i32 * y as i32)
            .sum();
        acc += f16_at(blk, 0) * a.d[ab] * sumi as f32;
    }
    acc
}

/// The shared body of `Q4_K` and `Q5_K`: `qh_at` is where `Q5_K`'s fifth-bit bytes start
/// (`None` for `Q4_K`), `qs_at` where the nibbles start.
fn dot_k45(
    w: &[u8],
    a: &ActBlocksK,
    off: usize,
    bytes: usize,
    qh_at: Option<usize>,
    qs_at: usize,
) -> f32 {
    let mut acc = 0f32;
    for (b, blk) in w.chunks_exact(bytes).enumerate() {
        let ab = off / QK_K + b;
        let (d, dmin) = (f16_at(blk, 0) * a.d[ab], f16_at(blk, 2) * a.d[ab]);
        let scales = &blk[4..16];
        let qh = qh_at.map(|at| &blk[at..at + 32]);
        let qs = &blk[qs_at..qs_at + 128];
        let aq = &a.qs[ab * QK_K..(ab + 1) * QK_K];
        let bs = &a.bsums[ab * 16..(ab + 1) * 16];
        let (mut sumi, mut summ) = (0i32, 0i32);
        for j in 0..8 {
            let (sc, m) = scale_min_k4(j, scales);
            let chunk = &qs[(j / 2) * 32..(j / 2) * 32 + 32];
            let shift = if j % 2 == 0 { 0 } else { 4 };
            let s: i32 = (0..32)
                .map(|l| {
                    let lo = ((chunk[l] >> shift) & 0x0F) as i32;
                    let hi = qh.map_or(0, |qh| (((qh[l] >> j) & 1) as i32) << 4);
                    (lo | hi) * aq[j * 32 + l] as i32
                })
                .sum();
            sumi += sc as i32 * s;
            summ += m as i32 * (bs[2 * j] as i32 + bs[2 * j + 1] as i32);
        }
        acc += d * sumi as f32 - dmin * summ as f32;
    }
    acc
}

/// Scalar `Q4_K · AK`.
pub fn dot_q4_k(w: &[u8], a: &ActBlocksK, off: usize) -> f32 {
    dot_k45(w, a, off, size::Q4_K, None, 16)
}

/// Scalar `Q5_K · AK`.
pub fn dot_q5_k(w: &[u8], a: &ActBlocksK, off: usize) -> f32 {
    dot_k45(w, a, off, size::Q5_K, Some(16), 48)
}

/// The 6-bit codes (0..64) of one `Q6_K` block in weight order.
#[inline(always)]
pub(super) fn q6_codes(blk: &[u8], out: &mut [i32; 256]) {
    let (ql, qh) = (&blk[0..128], &blk[128..192]);
    for n in 0..2 {
        let (ql, qh) = (&ql[64 * n..], &qh[32 * n..]);
        let o = &mut out[128 * n..];
        for l in 0..32 {
            o[l] = ((ql[l] & 0x0F) | ((qh[l] & 3) << 4)) as i32;
            o[l + 32] = ((ql[l + 32] & 0x0F) | (((qh[l] >> 2) & 3) << 4)) as i32;
            o[l + 64] = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) as i32;
            o[l + 96] = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) as i32;
        }
    }
}

/// Scalar `Q6_K · AK`.
pub fn dot_q6_k(w: &[u8], a: &ActBlocksK, off: usize) -> f32 {
    let mut acc = 0f32;
    let mut q = [0i32; 256];
    for (b, blk) in w.chunks_exact(size::Q6_K).enumerate() {
        let ab = off / QK_K + b;
        q6_codes(blk, &mut q);
        let aq = &a.qs[ab * QK_K..(ab + 1) * QK_K];
        let mut sumi = 0i32;
        for g in 0..16 {
            let sc = blk[192 + g] as i8 as i32;
            let s: i32 = (0..16)
                .map(|l| (q[g * 16 + l] - 32) * aq[g * 16 + l] as i32)
                .sum();
            sumi += sc * s;
        }
        acc += f16_at(blk, 208) * a.d[ab] * sumi as f32;
    }
    acc
}

/// Dequantize one row of `n` weights of the 32-element formats or K formats into `out`.
pub fn dequantize_row(ty: super::QType, w: &[u8], out: &mut [f32]) {
    use super::QType;
    match ty {
        QType::F32 => {
            for (o, c) in out.iter_mut().zip(w.chunks_exact(4)) {
                *o = f32::from_le_bytes([c[0], c[1], c[2], c[3]]);
            }
        }
        QType::F16 => {
            for (i, o) in out.iter_mut().enumerate() {
                *o = f16_at(w, 2 * i);
            }
        }
        QType::Q4_0 | QType::Q4_1 | QType::Q5_0 | QType::Q8_0 => {
            let bs = ty.block_bytes();
            let mut q = [0i32; 32];
            for (blk, o) in w.chunks_exact(bs).zip(out.chunks_exact_mut(QK32)) {
                let d = f16_at(blk, 0);
                match ty {
                    QType::Q4_0 => {
                        nibbles(&blk[2..], &mut q);
                        o.iter_mut()
                            .zip(&q)
                            .for_each(|(o, &v)| *o = (v - 8) as f32 * d);
                    }
                    QType::Q4_1 => {
                        let m = f16_at(blk, 2);
                        nibbles(&blk[4..], &mut q);
                        o.iter_mut()
                            .zip(&q)
                            .for_each(|(o, &v)| *o = v as f32 * d + m);
                    }
                    QType::Q5_0 => {
                        let qh = u32::from_le_bytes([blk[2], blk[3], blk[4], blk[5]]);
                        nibbles(&blk[6..], &mut q);
                        for (j, o) in o.iter_mut().enumerate() {
                            let v = q[j] | ((((qh >> j) & 1) as i32) << 4);
                            *o = (v - 16) as f32 * d;
                        }
                    }
                    _ => {
                        for (o, &v) in o.iter_mut().zip(&blk[2..34]) {
                            *o = (v as i8) as f32 * d;
                        }
                    }
                }
            }
        }
        QType::Q4_K | QType::Q5_K => {
            let bs = ty.block_bytes();
            for (blk, o) in w.chunks_exact(bs).zip(out.chunks_exact_mut(QK_K)) {
                let (d, dmin) = (f16_at(blk, 0), f16_at(blk, 2));
                let scales = &blk[4..16];
                let (qh, qs) = if ty == QType::Q5_K {
                    (Some(&blk[16..48]), &blk[48..176])
                } else {
                    (None, &blk[16..144])
                };
                for j in 0..8 {
                    let (sc, m) = scale_min_k4(j, scales);
                    let (sc, m) = (d * sc as f32, dmin * m as f32);
                    let chunk = &qs[(j / 2) * 32..(j / 2) * 32 + 32];
                    let shift = if j % 2 == 0 { 0 } else { 4 };
                    for l in 0..32 {
                        let mut v = ((chunk[l] >> shift) & 0x0F) as i32;
                        if let Some(qh) = qh {
                            v |= (((qh[l] >> j) & 1) as i32) << 4;
                        }
                        o[j * 32 + l] = sc * v as f32 - m;
                    }
                }
            }
        }
        QType::Q6_K => {
            let mut q = [0i32; 256];
            for (blk, o) in w.chunks_exact(size::Q6_K).zip(out.chunks_exact_mut(QK_K)) {
                q6_codes(blk, &mut q);
                let d = f16_at(blk, 208);
                for (i, o) in o.iter_mut().enumerate() {
                    let sc = blk[192 + i / 16] as i8 as f32;
                    *o = d * sc * (q[i] - 32) as f32;
                }
            }
        }
    }
}
