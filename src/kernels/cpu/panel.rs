//! Packed weight panels for prefill: eight rows decoded to byte codes and interleaved so that
//! one 32-byte vector holds four consecutive weights of each of the eight rows.
//!
//! A batched product (`tokens × rows`) is dominated by the per-block float work of the
//! one-row kernels: every (row, block, token) converts its integer sum, scales it and
//! accumulates it. With the eight rows in the eight `i32` lanes of a vector instead, one
//! `vpdpbusd` (or `maddubs` + `madd`) per four weights serves eight rows, and the float work
//! is done once per eight rows. The decode cost moves to packing, which runs once per panel and
//! is shared by every token of the batch.
//!
//! Every format is expressed as `w = scale · code + off` per 32-weight block, with `code` an
//! unsigned byte: `Q4_0` (`d`, `−8d`), `Q4_1` (`d`, `m`), `Q5_0` (`d`, `−16d`), `Q8_0` (`d`,
//! `−128d`, codes shifted by 128), `Q4_K`/`Q5_K` (`d·sc`, `−dmin·m` per 32-weight sub-block),
//! and `Q6_K` with two halves of 16 weights per block (`d·sc`, `−32·d·sc` each). The product
//! of a block with activations `a = d_a · q_a` is then
//! `Σ w·a = scale · d_a · Σ code·q_a + off · (d_a · Σ q_a)`: the integer sum is the same as
//! the one-row kernels form, and the second term uses the activations' block sums.

use super::blocks::{f16_at, nibbles, q6_codes, scale_min_k4, size, QK32, QK_K};
use super::QType;

/// Rows per panel: the eight `i32` lanes of a 256-bit vector.
pub const PANEL_ROWS: usize = 8;

/// Bytes of codes per 32-weight block of a panel (8 rows × 32 codes).
pub const PANEL_BLOCK_BYTES: usize = PANEL_ROWS * QK32;

/// Scale halves per 32-weight block: two for `Q6_K` (a scale per 16 weights), else one.
pub fn halves(ty: QType) -> Option<usize> {
    match ty {
        QType::Q4_0 | QType::Q4_1 | QType::Q5_0 | QType::Q8_0 | QType::Q4_K | QType::Q5_K => {
            Some(1)
        }
        QType::Q6_K => Some(2),
        QType::F32 | QType::F16 => None,
    }
}

/// Decode one row of `ty` to unsigned codes (one byte per weight), and per block (or half
/// block, see [`halves`]) a scale and an offset, so that weight `i` is
/// `scale[i / (32 / h)] · codes[i] + off[i / (32 / h)]` up to float rounding.
/// Returns `false` for formats without codes (`F32`, `F16`).
pub fn decode_row(
    ty: QType,
    w: &[u8],
    codes: &mut [u8],
    scale: &mut [f32],
    off: &mut [f32],
) -> bool {
    if !block_scales(ty, w, codes.len(), scale, off) {
        return false;
    }
    let n = codes.len();
    match ty {
        QType::Q4_0 | QType::Q4_1 | QType::Q5_0 | QType::Q8_0 => {
            for (blk, c) in w
                .chunks_exact(ty.block_bytes())
                .zip(codes.chunks_exact_mut(QK32))
            {
                let mut q = [0i32; QK32];
                match ty {
                    QType::Q4_0 => nibbles(&blk[2..18], &mut q),
                    QType::Q4_1 => nibbles(&blk[4..20], &mut q),
                    QType::Q5_0 => {
                        let qh = u32::from_le_bytes([blk[2], blk[3], blk[4], blk[5]]);
                        nibbles(&blk[6..22], &mut q);
                        for (j, v) in q.iter_mut().enumerate() {
                            *v |= (((qh >> j) & 1) as i32) << 4;
                        }
                    }
                    _ => {
                        for (v, &b) in q.iter_mut().zip(&blk[2..34]) {
                            *v = (b ^ 0x80) as i32;
                        }
                    }
                }
                c.iter_mut().zip(q).for_each(|(c, q)| *c = q as u8);
            }
        }
        QType::Q4_K | QType::Q5_K => {
            let (bb, qs_at) = if ty == QType::Q5_K {
                (size::Q5_K, 48)
            } else {
                (size::Q4_K, 16)
            };
            for (sb, blk) in w.chunks_exact(bb).take(n / QK_K).enumerate() {
                let qs = &blk[qs_at..qs_at + 128];
                for j in 0..8 {
                    let b = sb * 8 + j;
                    let chunk = &qs[(j / 2) * 32..(j / 2) * 32 + 32];
                    let shift = 4 * (j % 2);
                    for (l, v) in codes[b * QK32..(b + 1) * QK32].iter_mut().enumerate() {
                        *v = (chunk[l] >> shift) & 0x0F;
                        if ty == QType::Q5_K {
                            *v |= ((blk[16 + l] >> j) & 1) << 4;
                        }
                    }
                }
            }
        }
        QType::Q6_K => {
            let mut q = [0i32; QK_K];
            for (blk, c) in w.chunks_exact(size::Q6_K).zip(codes.chunks_exact_mut(QK_K)) {
                q6_codes(blk, &mut q);
                c.iter_mut().zip(q).for_each(|(c, q)| *c = q as u8);
            }
        }
        QType::F32 | QType::F16 => return false,
    }
    true
}

/// The scale and offset of each block (or half block) of the first `n` weights of a row of
/// `ty`, as [`decode_row`] gives them; `false` for formats without codes.
pub fn block_scales(ty: QType, w: &[u8], n: usize, scale: &mut [f32], off: &mut [f32]) -> bool {
    match ty {
        QType::Q4_0 | QType::Q4_1 | QType::Q5_0 | QType::Q8_0 => {
            for (b, blk) in w.chunks_exact(ty.block_bytes()).take(n / QK32).enumerate() {
                let d = f16_at(blk, 0);
                scale[b] = d;
                off[b] = match ty {
                    QType::Q4_0 => -8.0 * d,
                    QType::Q4_1 => f16_at(blk, 2),
                    QType::Q5_0 => -16.0 * d,
                    _ => -128.0 * d,
                };
            }
        }
        QType::Q4_K | QType::Q5_K => {
            for (sb, blk) in w.chunks_exact(ty.block_bytes()).take(n / QK_K).enumerate() {
                let (d, dmin) = (f16_at(blk, 0), f16_at(blk, 2));
                for j in 0..8 {
                    let (sc, m) = scale_min_k4(j, &blk[4..16]);
                    scale[sb * 8 + j] = d * sc as f32;
                    off[sb * 8 + j] = -(dmin * m as f32);
                }
            }
        }
        QType::Q6_K => {
            for (sb, blk) in w.chunks_exact(size::Q6_K).take(n / QK_K).enumerate() {
                let d = f16_at(blk, 208);
                for g in 0..16 {
                    let s = d * (blk[192 + g] as i8) as f32;
                    scale[sb * 16 + g] = s;
                    off[sb * 16 + g] = -32.0 * s;
                }
            }
        }
        QType::F32 | QType::F16 => return false,
    }
    true
}

/// Eight rows of a matrix, packed for the panel kernels.
#[derive(Debug, Clone, Default)]
pub struct Panel {
    /// 32-weight blocks per row.
    pub nb: usize,
    /// Scale halves per block (1, or 2 for `Q6_K`).
    pub h: usize,
    /// `nb × 8 groups × 8 rows × 4` codes: group `g` of block `b` holds weights
    /// `32b + 4g .. 32b + 4g + 4` of each row, row after row.
    pub codes: Vec<u8>,
    /// `nb × h × 8` scales, row fastest.
    pub scale: Vec<f32>,
    /// `nb × h × 8` offsets, row fastest.
    pub off: Vec<f32>,
    row_codes: Vec<u8>,
    row_scale: Vec<f32>,
    row_off: Vec<f32>,
}

impl Panel {
    /// Pack rows `r0 .. r0 + 8` of `w` (of format `ty`, `cols` weights, `row(r)` its bytes),
    /// reusing this panel's buffers; `simd`, when given, writes the interleaved codes instead
    /// of the scalar decoder. Returns `false` when the format has no panel form.
    pub fn pack<'a>(
        &mut self,
        ty: QType,
        cols: usize,
        row: impl Fn(usize) -> &'a [u8],
        r0: usize,
        simd: Option<PackFn>,
    ) -> bool {
        let Some(h) = halves(ty) else {
            return false;
        };
        let nb = cols / QK32;
        self.nb = nb;
        self.h = h;
        self.codes.resize(nb * PANEL_BLOCK_BYTES, 0);
        self.scale.resize(nb * h * PANEL_ROWS, 0.0);
        self.off.resize(nb * h * PANEL_ROWS, 0.0);
        self.row_scale.resize(nb * h, 0.0);
        self.row_off.resize(nb * h, 0.0);
        let rows: [&[u8]; PANEL_ROWS] = std::array::from_fn(|r| row(r0 + r));
        if let Some(pack) = simd {
            pack(ty, &rows, nb, &mut self.codes);
        }
        for (r, w) in rows.iter().enumerate() {
            if simd.is_some() {
                block_scales(ty, w, cols, &mut self.row_scale, &mut self.row_off);
            } else {
                self.row_codes.resize(cols, 0);
                decode_row(
                    ty,
                    w,
                    &mut self.row_codes,
                    &mut self.row_scale,
                    &mut self.row_off,
                );
                for b in 0..nb {
                    for g in 0..8 {
                        let src = &self.row_codes[b * QK32 + 4 * g..b * QK32 + 4 * g + 4];
                        let at = b * PANEL_BLOCK_BYTES + g * 32 + r * 4;
                        self.codes[at..at + 4].copy_from_slice(src);
                    }
                }
            }
            for i in 0..nb * h {
                self.scale[i * PANEL_ROWS + r] = self.row_scale[i];
                self.off[i * PANEL_ROWS + r] = self.row_off[i];
            }
        }
        true
    }
}

/// A SIMD writer of a panel's interleaved codes: format, the eight rows' bytes, 32-weight
/// blocks per row, and the `nb × 256`-byte destination. Panics when the lengths do not fit.
pub type PackFn = fn(QType, &[&[u8]; PANEL_ROWS], usize, &mut [u8]);

/// The activations a panel kernel reads: `tokens × cols` quantized values, a scale per
/// 32-value block (or per super-block, `dshift = 3`), and the scaled sum `d · Σ q` per
/// 32-value block (`h = 1`) or per 16 values (`h = 2`).
#[derive(Debug, Clone, Copy)]
pub struct PanelActs<'a> {
    /// Values per token.
    pub cols: usize,
    /// Quantized values, token after token.
    pub qs: &'a [i8],
    /// Scales; block `i` (counted over all tokens) uses `d[i >> dshift]`.
    pub d: &'a [f32],
    /// 0 for 32-value scales, 3 for 256-value scales.
    pub dshift: u32,
    /// Scaled sums per 32 / h values, in order.
    pub s: &'a [f32],
}

impl PanelActs<'_> {
    /// Tokens held.
    pub fn tokens(&self) -> usize {
        self.qs.len() / self.cols.max(1)
    }

    /// Whether this view can feed `p` for tokens `tok0 .. tok0 + n` (lengths only).
    pub fn fits(&self, p: &Panel, tok0: usize, n: usize) -> bool {
        let blocks = (tok0 + n) * p.nb;
        p.nb * QK32 == self.cols
            && self.qs.len() >= (tok0 + n) * self.cols
            && (blocks == 0 || self.d.len() > (blocks - 1) >> self.dshift)
            && self.s.len() >= blocks * p.h
            && p.codes.len() >= p.nb * PANEL_BLOCK_BYTES
            && p.scale.len() >= p.nb * p.h * PANEL_ROWS
            && p.off.len() >= p.nb * p.h * PANEL_ROWS
    }
}
