//! KV cache rows in `f32`, `f16` or `q8_0`, and one query row's attention over them.
//!
//! A [`KvBuf`] holds rows of one head dimension in one type: `f32` and `f16` rows are the
//! values; a `q8_0` row is `dim / 32` blocks of 34 bytes (an `f16` scale `d = max|x| / 127`
//! and 32 signed codes `round(x / d)`), GGML's `Q8_0` layout, so the bytes per position are the
//! sizing model's. [`Kernels::attend_kv`] computes `softmax(scale · K q) · V` over `n` rows of
//! each: the SIMD kernels (`avx2_kv`, head dims 64 and 128) widen the stored values to `f32` as
//! they load them; the scalar reference dequantizes one row at a time and uses the kernel set's
//! `f32` dot product and `axpy`. [`hadamard_rotate`] is the rotation a `q8_0` cache stores its
//! rows in (see `KvCache::rotation`).

use super::Kernels;

/// Values per `q8_0` block.
pub const Q8_ROW_BLOCK: usize = 32;
/// Bytes per `q8_0` block.
const Q8_BLOCK_BYTES: usize = 34;

/// The element type of KV rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[allow(non_camel_case_types)]
pub enum KvType {
    /// 32-bit float.
    F32,
    /// 16-bit IEEE float.
    F16,
    /// 8-bit codes, 32 per block, with an `f16` scale.
    Q8_0,
}

impl KvType {
    /// Storage units (floats, halves or bytes) of one row of `dim` values.
    pub fn row_units(self, dim: usize) -> usize {
        match self {
            Self::F32 | Self::F16 => dim,
            Self::Q8_0 => dim / Q8_ROW_BLOCK * Q8_BLOCK_BYTES,
        }
    }

    /// Bytes of one row of `dim` values.
    pub fn row_bytes(self, dim: usize) -> usize {
        match self {
            Self::F32 => 4 * dim,
            Self::F16 => 2 * dim,
            Self::Q8_0 => self.row_units(dim),
        }
    }

    /// Whether rows of `dim` values can be stored (`q8_0` needs whole blocks of 32).
    pub fn supports_dim(self, dim: usize) -> bool {
        self != Self::Q8_0 || dim.is_multiple_of(Q8_ROW_BLOCK)
    }
}

/// Rows of one type: `F16` holds the bit patterns of `f16` values.
#[derive(Debug, Clone, PartialEq)]
pub enum KvBuf {
    /// `f32` values.
    F32(Vec<f32>),
    /// `f16` bit patterns.
    F16(Vec<u16>),
    /// `q8_0` blocks.
    Q8_0(Vec<u8>),
}

/// Borrowed rows of one type.
#[derive(Debug, Clone, Copy)]
pub enum KvRows<'a> {
    /// `f32` values.
    F32(&'a [f32]),
    /// `f16` bit patterns.
    F16(&'a [u16]),
    /// `q8_0` blocks.
    Q8_0(&'a [u8]),
}

impl KvBuf {
    /// `rows` zero rows of `dim` values; panics when `ty` cannot store `dim` (see
    /// [`KvType::supports_dim`]).
    pub fn zeros(ty: KvType, rows: usize, dim: usize) -> Self {
        assert!(ty.supports_dim(dim), "{ty:?} cannot store rows of {dim}");
        let n = rows * ty.row_units(dim);
        match ty {
            KvType::F32 => Self::F32(vec![0.0; n]),
            KvType::F16 => Self::F16(vec![0; n]),
            KvType::Q8_0 => Self::Q8_0(vec![0; n]),
        }
    }

    /// The element type.
    pub fn kv_type(&self) -> KvType {
        match self {
            Self::F32(_) => KvType::F32,
            Self::F16(_) => KvType::F16,
            Self::Q8_0(_) => KvType::Q8_0,
        }
    }

    /// Rows `first .. first + n` of `dim` values each.
    pub fn rows(&self, first: usize, n: usize, dim: usize) -> KvRows<'_> {
        let u = self.kv_type().row_units(dim);
        let r = first * u..(first + n) * u;
        match self {
            Self::F32(b) => KvRows::F32(&b[r]),
            Self::F16(b) => KvRows::F16(&b[r]),
            Self::Q8_0(b) => KvRows::Q8_0(&b[r]),
        }
    }

    /// Write row `row` (of `x.len()` values) from `x`, converting or quantizing it.
    pub fn store_row(&mut self, row: usize, x: &[f32], k: &Kernels) {
        let dim = x.len();
        let u = self.kv_type().row_units(dim);
        match self {
            Self::F32(b) => b[row * u..(row + 1) * u].copy_from_slice(x),
            Self::F16(b) => k.store_f16(x, &mut b[row * u..(row + 1) * u]),
            Self::Q8_0(b) => quantize_q8_0(x, &mut b[row * u..(row + 1) * u]),
        }
    }

    /// Move `n` rows of `dim` values from row `src_row` to row `dst_row` of this buffer (the
    /// ranges may overlap).
    pub fn move_rows(&mut self, dst_row: usize, src_row: usize, n: usize, dim: usize) {
        let u = self.kv_type().row_units(dim);
        let (s, d) = (src_row * u..(src_row + n) * u, dst_row * u);
        match self {
            Self::F32(b) => b.copy_within(s, d),
            Self::F16(b) => b.copy_within(s, d),
            Self::Q8_0(b) => b.copy_within(s, d),
        }
    }

    /// Copy `n` rows of `dim` values from row `src_row` of `src` to row `dst_row` (the same
    /// type; panics otherwise).
    pub fn copy_rows(&mut self, dst_row: usize, src: &KvBuf, src_row: usize, n: usize, dim: usize) {
        let u = self.kv_type().row_units(dim);
        let (d, s) = (
            dst_row * u..(dst_row + n) * u,
            src_row * u..(src_row + n) * u,
        );
        match (self, src) {
            (Self::F32(a), Self::F32(b)) => a[d].copy_from_slice(&b[s]),
            (Self::F16(a), Self::F16(b)) => a[d].copy_from_slice(&b[s]),
            (Self::Q8_0(a), Self::Q8_0(b)) => a[d].copy_from_slice(&b[s]),
            _ => panic!("KV rows copied between types"),
        }
    }
}

impl KvRows<'_> {
    /// Row `j` of `out.len()` values as `f32`.
    pub fn dequantize(&self, j: usize, out: &mut [f32]) {
        let dim = out.len();
        match self {
            Self::F32(b) => out.copy_from_slice(&b[j * dim..(j + 1) * dim]),
            Self::F16(b) => {
                for (o, h) in out.iter_mut().zip(&b[j * dim..(j + 1) * dim]) {
                    *o = half::f16::from_bits(*h).to_f32();
                }
            }
            Self::Q8_0(b) => {
                let u = KvType::Q8_0.row_units(dim);
                for (o, blk) in out
                    .chunks_exact_mut(Q8_ROW_BLOCK)
                    .zip(b[j * u..(j + 1) * u].chunks_exact(Q8_BLOCK_BYTES))
                {
                    let d = half::f16::from_le_bytes([blk[0], blk[1]]).to_f32();
                    for (o, &c) in o.iter_mut().zip(&blk[2..]) {
                        *o = d * (c as i8) as f32;
                    }
                }
            }
        }
    }

    /// Whether these hold at least `n` rows of `dim` values.
    fn holds(&self, n: usize, dim: usize) -> bool {
        let (ty, len) = match self {
            Self::F32(b) => (KvType::F32, b.len()),
            Self::F16(b) => (KvType::F16, b.len()),
            Self::Q8_0(b) => (KvType::Q8_0, b.len()),
        };
        ty.supports_dim(dim) && len >= n * ty.row_units(dim)
    }
}

/// `x` (whole blocks of 32) as `q8_0` blocks in `out`: GGML's reference quantization.
pub fn quantize_q8_0(x: &[f32], out: &mut [u8]) {
    for (b, o) in x
        .chunks_exact(Q8_ROW_BLOCK)
        .zip(out.chunks_exact_mut(Q8_BLOCK_BYTES))
    {
        let amax = b.iter().fold(0f32, |m, v| m.max(v.abs()));
        let d = amax / 127.0;
        let id = if d > 0.0 { 1.0 / d } else { 0.0 };
        o[..2].copy_from_slice(&half::f16::from_f32(d).to_le_bytes());
        for (o, v) in o[2..].iter_mut().zip(b) {
            *o = ((v * id).round() as i8) as u8;
        }
    }
}

/// The widest block a `q8_0` cache rotates rows of `dim` values in: the largest power of two
/// that divides `dim`, at most 256, when that is a whole number of `q8_0` blocks (`None`: the
/// rows cannot be rotated and are stored as they are).
pub fn rotation_block(dim: usize) -> Option<usize> {
    if dim == 0 {
        return None;
    }
    let n = (1usize << dim.trailing_zeros()).min(256);
    (n >= Q8_ROW_BLOCK).then_some(n)
}

/// Rotate every `n`-wide block of `x` (`n` a power of two) by the orthonormal Walsh–Hadamard
/// matrix `H / sqrt(n)`, in place. The matrix is symmetric and its own inverse, so a second
/// call restores `x` (to rounding), and it keeps dot products: `(H q) · (H k) = q · k`.
///
/// A `q8_0` cache stores rotated keys and values and attends with a rotated query (the scores
/// are unchanged) and rotates the output back (it is a weighted sum of rotated values): a
/// channel that is large in every row is spread over the whole block, so it no longer takes
/// most of the scale its 31 neighbours share. llama.cpp rotates its quantized caches the same
/// way by default (since its April 2026 releases; `LLAMA_ATTN_ROT_DISABLE=1` turns it off).
pub fn hadamard_rotate(x: &mut [f32], n: usize) {
    assert!(
        n.is_power_of_two() && x.len().is_multiple_of(n),
        "Hadamard blocks of {n} do not tile {} values",
        x.len()
    );
    // The first three stages inside each run of 8, unrolled so they stay in registers; the
    // wider stages then work on whole runs of 8, which vectorize.
    let unrolled = if n >= 8 {
        x.chunks_exact_mut(8).for_each(hadamard8);
        8
    } else {
        1
    };
    for block in x.chunks_exact_mut(n) {
        let mut h = unrolled;
        while h < n {
            for pair in block.chunks_exact_mut(2 * h) {
                let (a, b) = pair.split_at_mut(h);
                for (a, b) in a.iter_mut().zip(b.iter_mut()) {
                    let (x, y) = (*a, *b);
                    *a = x + y;
                    *b = x - y;
                }
            }
            h *= 2;
        }
    }
    let norm = 1.0 / (n as f32).sqrt();
    x.iter_mut().for_each(|v| *v *= norm);
}

/// The unnormalized Walsh–Hadamard transform of 8 values in place: butterflies of distance
/// 1, 2 and 4.
fn hadamard8(row: &mut [f32]) {
    let a = [
        row[0] + row[1],
        row[0] - row[1],
        row[2] + row[3],
        row[2] - row[3],
        row[4] + row[5],
        row[4] - row[5],
        row[6] + row[7],
        row[6] - row[7],
    ];
    let b = [
        a[0] + a[2],
        a[1] + a[3],
        a[0] - a[2],
        a[1] - a[3],
        a[4] + a[6],
        a[5] + a[7],
        a[4] - a[6],
        a[5] - a[7],
    ];
    for i in 0..4 {
        row[i] = b[i] + b[i + 4];
        row[i + 4] = b[i] - b[i + 4];
    }
}

fn store_f16_scalar(x: &[f32], out: &mut [u16]) {
    for (o, v) in out.iter_mut().zip(x) {
        *o = half::f16::from_f32(*v).to_bits();
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    //! Safe wrappers of `avx2_kv`: reachable only through `Kernels` values whose
    //! `attend_simd` is set, which `Kernels::avx2` sets after detecting AVX2, FMA and F16C.
    use super::super::avx2_kv;

    pub fn store_f16(x: &[f32], out: &mut [u16]) {
        assert!(out.len() >= x.len());
        // SAFETY: features as above; the length is asserted.
        unsafe { avx2_kv::store_f16(x, out) }
    }

    /// Head dims 64 and 128; the caller has checked the row counts (`KvRows::holds`).
    #[allow(clippy::too_many_arguments)]
    pub fn attend(
        q: &[f32],
        k: super::KvRows,
        v: super::KvRows,
        n: usize,
        scale: f32,
        scores: &mut [f32],
        out: &mut [f32],
    ) -> bool {
        use super::KvRows as R;
        let d = q.len();
        assert!(
            (d == 64 || d == 128)
                && out.len() == d
                && k.holds(n, d)
                && v.holds(n, d)
                && scores.len() >= n,
            "attention slices do not fit {n} positions of head dim {d}"
        );
        // SAFETY: features checked by `Kernels::avx2`; the lengths are asserted above (for
        // q8_0, `holds` also checks that 64 and 128 are whole blocks).
        unsafe {
            match (k, v, d) {
                (R::F16(k), R::F16(v), 64) => {
                    avx2_kv::attend_f16::<8>(q, k, v, n, scale, scores, out)
                }
                (R::F16(k), R::F16(v), _) => {
                    avx2_kv::attend_f16::<16>(q, k, v, n, scale, scores, out)
                }
                (R::Q8_0(k), R::Q8_0(v), 64) => {
                    avx2_kv::attend_q8_0::<8>(q, k, v, n, scale, scores, out)
                }
                (R::Q8_0(k), R::Q8_0(v), _) => {
                    avx2_kv::attend_q8_0::<16>(q, k, v, n, scale, scores, out)
                }
                _ => return false,
            }
        }
        true
    }
}

impl Kernels {
    /// `out[i] = f16(x[i])` as bit patterns, rounding to nearest even (`out` at least as long
    /// as `x`).
    pub fn store_f16(&self, x: &[f32], out: &mut [u16]) {
        assert!(out.len() >= x.len(), "f16 output shorter than the input");
        #[cfg(target_arch = "x86_64")]
        if self.attend_simd {
            return x86::store_f16(x, out);
        }
        store_f16_scalar(x, out)
    }

    /// [`Kernels::attend`] over K and V rows of any [`KvType`]: one query row against `n`
    /// positions, `out = Σ_j softmax(scale · k_j·q)_j · v_j`. `scores` is scratch.
    #[allow(clippy::too_many_arguments)]
    pub fn attend_kv(
        &self,
        q: &[f32],
        k: KvRows,
        v: KvRows,
        n: usize,
        scale: f32,
        scores: &mut Vec<f32>,
        out: &mut [f32],
    ) {
        let hd = q.len();
        assert!(
            n > 0 && out.len() == hd && k.holds(n, hd) && v.holds(n, hd),
            "attention rows do not fit {n} positions of head dim {hd}"
        );
        if let (KvRows::F32(k), KvRows::F32(v)) = (k, v) {
            return self.attend(q, k, v, n, scale, scores, out);
        }
        scores.resize((n + 2 * hd).max(scores.len()), 0.0);
        #[cfg(target_arch = "x86_64")]
        if self.attend_simd
            && (hd == 64 || hd == 128)
            && x86::attend(q, k, v, n, scale, scores, out)
        {
            return;
        }
        let (scores, row) = scores.split_at_mut(n);
        let row = &mut row[..hd];
        let mut max = f32::NEG_INFINITY;
        for (j, s) in scores.iter_mut().enumerate() {
            k.dequantize(j, row);
            *s = self.dot(q, row) * scale;
            max = max.max(*s);
        }
        let mut sum = 0f32;
        for s in scores.iter_mut() {
            *s = (*s - max).exp();
            sum += *s;
        }
        out.fill(0.0);
        let inv = 1.0 / sum;
        for (j, s) in scores.iter().enumerate() {
            v.dequantize(j, row);
            self.axpy(s * inv, row, out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hadamard_rotation_is_the_orthonormal_sylvester_matrix_and_its_own_inverse() {
        // n = 4: H / 2 with H's rows ++++, +-+-, ++--, +--+.
        let mut e = [0f32; 16];
        for i in 0..4 {
            e[i * 4 + i] = 1.0;
        }
        hadamard_rotate(&mut e, 4);
        let h = [
            1., 1., 1., 1., 1., -1., 1., -1., 1., 1., -1., -1., 1., -1., -1., 1.,
        ];
        assert_eq!(e.map(|v| v * 2.0), h);
        // n = 64 (the unrolled path): entry (i, j) is (-1)^popcount(i & j) / 8.
        for j in [0, 1, 5, 8, 29, 63] {
            let mut e = vec![0f32; 64];
            e[j] = 1.0;
            hadamard_rotate(&mut e, 64);
            for (i, v) in e.iter().enumerate() {
                let want = if (i & j).count_ones() % 2 == 0 {
                    0.125
                } else {
                    -0.125
                };
                assert_eq!(*v, want, "H[{i}][{j}]");
            }
        }
        for n in [32, 64, 128, 256] {
            let x = data(3 * n, n as u32);
            let y = data(3 * n, n as u32 + 1);
            let (mut rx, mut ry) = (x.clone(), y.clone());
            hadamard_rotate(&mut rx, n);
            hadamard_rotate(&mut ry, n);
            let dot = |a: &[f32], b: &[f32]| a.iter().zip(b).map(|(a, b)| a * b).sum::<f32>();
            for b in 0..3 {
                let r = b * n..(b + 1) * n;
                let (d, rd) = (
                    dot(&x[r.clone()], &y[r.clone()]),
                    dot(&rx[r.clone()], &ry[r]),
                );
                assert!(
                    (d - rd).abs() < 1e-4 * n as f32,
                    "n {n} block {b}: {d} vs {rd}"
                );
            }
            assert_ne!(rx, x);
            hadamard_rotate(&mut rx, n);
            let back = rx
                .iter()
                .zip(&x)
                .map(|(a, b)| (a - b).abs())
                .fold(0f32, f32::max);
            assert!(back < 1e-5, "n {n}: H H x - x = {back}");
        }
        // A channel that is large in every row is spread evenly over the block.
        let mut x = vec![0f32; 64];
        x[29] = 160.0;
        hadamard_rotate(&mut x, 64);
        assert!(x.iter().all(|v| (v.abs() - 20.0).abs() < 1e-4), "{x:?}");
    }

    #[test]
    fn rotation_blocks_are_powers_of_two_of_whole_q8_0_blocks() {
        for (dim, n) in [
            (32, Some(32)),
            (64, Some(64)),
            (96, Some(32)),
            (128, Some(128)),
        ] {
            assert_eq!(rotation_block(dim), n, "dim {dim}");
        }
        for (dim, n) in [
            (192, Some(64)),
            (512, Some(256)),
            (80, None),
            (48, None),
            (0, None),
        ] {
            assert_eq!(rotation_block(dim), n, "dim {dim}");
        }
    }

    fn data(n: usize, seed: u32) -> Vec<f32> {
        // A small deterministic generator: values in about [-2, 2] with a few larger ones.
        let mut s = seed.wrapping_mul(2_654_435_761).max(1);
        (0..n)
            .map(|i| {
                s ^= s << 13;
                s ^= s >> 17;
                s ^= s << 5;
                let u = s as f32 / u32::MAX as f32 * 4.0 - 2.0;
                if i % 97 == 0 {
                    u * 4.0
                } else {
                    u
                }
            })
            .collect()
    }

    fn buf(ty: KvType, x: &[f32], dim: usize, k: &Kernels) -> KvBuf {
        let rows = x.len() / dim;
        let mut b = KvBuf::zeros(ty, rows, dim);
        for (r, row) in x.chunks_exact(dim).enumerate() {
            b.store_row(r, row, k);
        }
        b
    }

    #[test]
    fn q8_0_rows_round_trip_within_half_a_step() {
        let x = data(4 * 64, 7);
        let b = buf(KvType::Q8_0, &x, 64, &Kernels::scalar());
        assert_eq!(KvType::Q8_0.row_bytes(64), 68);
        let mut out = vec![0f32; 64];
        for r in 0..4 {
            b.rows(0, 4, 64).dequantize(r, &mut out);
            for (blk, (o, xi)) in out.chunks(32).zip(x[r * 64..].chunks(32)).enumerate() {
                let amax = xi.iter().fold(0f32, |m, v| m.max(v.abs()));
                for (a, e) in o.iter().zip(xi) {
                    // Half a step d = amax/127, plus the f16 rounding of the scale (relative
                    // 2^-11) times the largest code, 127.
                    let bound = amax / 127.0 * (0.5 + 127.0 / 2048.0) + 1e-6;
                    assert!((a - e).abs() <= bound, "row {r} block {blk}");
                }
            }
        }
    }

    #[test]
    fn f16_stores_round_to_nearest_on_every_kernel_set() {
        let x = data(100, 3);
        let mut want = vec![0u16; 100];
        store_f16_scalar(&x, &mut want);
        for k in [Kernels::scalar(), Kernels::detect()] {
            let mut got = vec![0u16; 100];
            k.store_f16(&x, &mut got);
            assert_eq!(got, want, "{}", k.name);
        }
    }

    #[test]
    fn copy_rows_moves_whole_rows() {
        let k = Kernels::scalar();
        let x = data(3 * 32, 11);
        let src = buf(KvType::Q8_0, &x, 32, &k);
        let mut dst = KvBuf::zeros(KvType::Q8_0, 5, 32);
        dst.copy_rows(2, &src, 0, 3, 32);
        let (mut a, mut b) = (vec![0f32; 32], vec![0f32; 32]);
        for r in 0..3 {
            src.rows(0, 3, 32).dequantize(r, &mut a);
            dst.rows(0, 5, 32).dequantize(r + 2, &mut b);
            assert_eq!(a, b);
        }
    }

    #[test]
    #[should_panic(expected = "cannot store rows of 40")]
    fn q8_0_refuses_rows_that_are_not_whole_blocks() {
        KvBuf::zeros(KvType::Q8_0, 1, 40);
    }

    /// Largest |difference| between attention over `ty` rows and the `f32` reference, relative
    /// to the largest |output| of the reference.
    fn attend_error(k: &Kernels, ty: KvType, dim: usize, n: usize, seed: u32) -> f32 {
        let (q, kx, vx) = (
            data(dim, seed),
            data(n * dim, seed + 1),
            data(n * dim, seed + 2),
        );
        let scale = 1.0 / (dim as f32).sqrt();
        let mut want = vec![0f32; dim];
        let mut sc = Vec::new();
        Kernels::scalar().attend(&q, &kx, &vx, n, scale, &mut sc, &mut want);
        let (kb, vb) = (buf(ty, &kx, dim, k), buf(ty, &vx, dim, k));
        let mut got = vec![0f32; dim];
        k.attend_kv(
            &q,
            kb.rows(0, n, dim),
            vb.rows(0, n, dim),
            n,
            scale,
            &mut sc,
            &mut got,
        );
        let top = want.iter().fold(0f32, |m, v| m.max(v.abs()));
        want.iter()
            .zip(&got)
            .map(|(a, b)| (a - b).abs())
            .fold(0f32, f32::max)
            / top
    }

    /// The tolerances the KV types are held to (relative to the output's largest magnitude):
    /// f32 rows agree to float rounding, f16 to a few half-precision steps, q8_0 to about a
    /// percent (its codes carry ~2.5 significant digits).
    const TOL: [(KvType, f32); 3] = [
        (KvType::F32, 1e-5),
        (KvType::F16, 2e-3),
        (KvType::Q8_0, 2e-2),
    ];

    #[test]
    fn every_kv_type_tracks_the_f32_attention_on_every_kernel_set() {
        let sets = [
            Some(Kernels::scalar()),
            Kernels::avx2(),
            Kernels::avx2().map(|k| k.without_simd_attention()),
        ];
        for k in sets.into_iter().flatten() {
            for (ty, tol) in TOL {
                for (dim, n) in [(64, 1), (64, 9), (64, 300), (128, 77), (96, 40), (32, 5)] {
                    let e = attend_error(&k, ty, dim, n, dim as u32 * 31 + n as u32);
                    assert!(
                        e <= tol,
                        "{} {ty:?} dim {dim} n {n}: error {e} > {tol}",
                        k.name
                    );
                }
            }
        }
    }

    #[test]
    fn simd_and_scalar_attention_agree_on_the_same_stored_rows() {
        let Some(simd) = Kernels::avx2() else {
            return;
        };
        let scalar = Kernels::scalar();
        for ty in [KvType::F16, KvType::Q8_0] {
            for (dim, n) in [(64, 33), (128, 200)] {
                let (q, kx, vx) = (data(dim, 5), data(n * dim, 6), data(n * dim, 8));
                let (kb, vb) = (buf(ty, &kx, dim, &scalar), buf(ty, &vx, dim, &scalar));
                let run = |k: &Kernels| {
                    let (mut sc, mut out) = (Vec::new(), vec![0f32; dim]);
                    k.attend_kv(
                        &q,
                        kb.rows(0, n, dim),
                        vb.rows(0, n, dim),
                        n,
                        0.125,
                        &mut sc,
                        &mut out,
                    );
                    out
                };
                let (a, b) = (run(&scalar), run(&simd));
                for (x, y) in a.iter().zip(&b) {
                    // Same stored values: only the summation order and exp differ.
                    assert!(
                        (x - y).abs() <= 1e-5 * (1.0 + x.abs()),
                        "{ty:?} {dim}: {x} vs {y}"
                    );
                }
            }
        }
    }

    #[test]
    #[should_panic(expected = "attention rows do not fit")]
    fn short_rows_are_refused() {
        let k = Kernels::detect();
        let kb = KvBuf::zeros(KvType::F16, 2, 64);
        let mut out = vec![0f32; 64];
        k.attend_kv(
            &[0.0; 64],
            kb.rows(0, 2, 64),
            kb.rows(0, 1, 64),
            2,
            1.0,
            &mut Vec::new(),
            &mut out,
        );
    }
}
