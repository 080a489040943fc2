//! CPU kernels: quantized matrix × activation products with a scalar reference and SIMD paths.
//!
//! A weight matrix stays in its GGUF bytes (`QMatrix`). Activations are quantized once per
//! product to 8-bit blocks (`Acts`), and each output element is one quantized dot product,
//! computed by the kernel that `Kernels::detect` picked for this CPU at run time: AVX2 + FMA on
//! x86-64 when present, the scalar reference everywhere else. The build does not need
//! `target-cpu=native` for the fast path; [`KernelChoice::Scalar`] forces the reference (for
//! measuring what the SIMD code buys).
//!
//! Rows are split across the worker pool ([`pool`]) in chunks large enough that the hand-off costs less
//! than the work; for a batch of tokens (prefill) each chunk of weight rows is read once and
//! multiplied with every token while it sits in cache.

pub mod blocks;
pub mod kv;
pub mod panel;
pub mod pool;

#[cfg(target_arch = "x86_64")]
pub mod avx2;
#[cfg(target_arch = "x86_64")]
pub mod avx2_kv;

use std::sync::OnceLock;

pub use blocks::{ActBlocks32, ActBlocksK, QK32, QK_K};
pub use kv::{hadamard_rotate, KvBuf, KvRows, KvType};
pub use panel::{PackFn, Panel, PanelActs, PANEL_ROWS};

/// The storage formats the kernels compute with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[allow(non_camel_case_types)]
pub enum QType {
    /// 32-bit float.
    F32,
    /// 16-bit IEEE float.
    F16,
    /// 4-bit, 32 per block, scale.
    Q4_0,
    /// 4-bit, 32 per block, scale and offset.
    Q4_1,
    /// 5-bit, 32 per block, scale.
    Q5_0,
    /// 8-bit, 32 per block, scale.
    Q8_0,
    /// 4-bit K format, 256 per super-block.
    Q4_K,
    /// 5-bit K format, 256 per super-block.
    Q5_K,
    /// 6-bit K format, 256 per super-block.
    Q6_K,
}

impl QType {
    /// Weights per block.
    pub fn block_elems(self) -> usize {
        match self {
            QType::F32 | QType::F16 => 1,
            QType::Q4_0 | QType::Q4_1 | QType::Q5_0 | QType::Q8_0 => QK32,
            QType::Q4_K | QType::Q5_K | QType::Q6_K => QK_K,
        }
    }

    /// Bytes per block.
    pub fn block_bytes(self) -> usize {
        use blocks::size;
        match self {
            QType::F32 => 4,
            QType::F16 => 2,
            QType::Q4_0 => size::Q4_0,
            QType::Q4_1 => size::Q4_1,
            QType::Q5_0 => size::Q5_0,
            QType::Q8_0 => size::Q8_0,
            QType::Q4_K => size::Q4_K,
            QType::Q5_K => size::Q5_K,
            QType::Q6_K => size::Q6_K,
        }
    }

    /// Which activation quantization the format's dot product reads.
    fn act_kind(self) -> ActKind {
        match self {
            QType::F32 | QType::F16 => ActKind::F32,
            QType::Q4_0 | QType::Q4_1 | QType::Q5_0 | QType::Q8_0 => ActKind::B32,
            QType::Q4_K | QType::Q5_K | QType::Q6_K => ActKind::K,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ActKind {
    F32,
    B32,
    K,
}

/// Errors building a matrix.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum KernelError {
    /// The row length is not a whole number of blocks.
    #[error("a row of {cols} {ty:?} weights is not a whole number of {block}-weight blocks")]
    PartialBlock {
        /// Format.
        ty: QType,
        /// Row length.
        cols: usize,
        /// Block length.
        block: usize,
    },
    /// The byte count does not match the shape.
    #[error("{rows}×{cols} {ty:?} weights need {expected} bytes, got {found}")]
    Size {
        /// Format.
        ty: QType,
        /// Rows.
        rows: usize,
        /// Columns.
        cols: usize,
        /// Bytes the shape needs.
        expected: usize,
        /// Bytes given.
        found: usize,
    },
}

/// A weight matrix `(rows, cols)` in its stored format, row-major.
#[derive(Debug, Clone)]
pub struct QMatrix {
    ty: QType,
    rows: usize,
    cols: usize,
    row_bytes: usize,
    data: Vec<u8>,
}

impl QMatrix {
    /// Wrap `data` as a `(rows, cols)` matrix of `ty`, checking the size.
    pub fn new(ty: QType, rows: usize, cols: usize, data: Vec<u8>) -> Result<Self, KernelError> {
        let block = ty.block_elems();
        if !cols.is_multiple_of(block) {
            return Err(KernelError::PartialBlock { ty, cols, block });
        }
        let row_bytes = cols / block * ty.block_bytes();
        let expected = row_bytes.saturating_mul(rows);
        if data.len() != expected {
            return Err(KernelError::Size {
                ty,
                rows,
                cols,
                expected,
                found: data.len(),
            });
        }
        Ok(Self {
            ty,
            rows,
            cols,
            row_bytes,
            data,
        })
    }

    /// Storage format.
    pub fn qtype(&self) -> QType {
        self.ty
    }

    /// Output dimension.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Input dimension.
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// Bytes of weight data.
    pub fn bytes(&self) -> usize {
        self.data.len()
    }

    /// The stored bytes of row `r`.
    pub fn row(&self, r: usize) -> &[u8] {
        &self.data[r * self.row_bytes..(r + 1) * self.row_bytes]
    }

    /// Row `r` as floats.
    pub fn dequantize_row(&self, r: usize, out: &mut [f32]) {
        blocks::dequantize_row(self.ty, self.row(r), &mut out[..self.cols]);
    }
}

/// Activations of `t` tokens × `n` features, quantized for the formats that will read them.
#[derive(Debug, Clone, Default)]
pub struct Acts {
    n: usize,
    t: usize,
    x: Vec<f32>,
    b32: ActBlocks32,
    k: ActBlocksK,
    have_b32: bool,
    have_k: bool,
}

impl Acts {
    /// Empty buffers.
    pub fn new() -> Self {
        Self::default()
    }

    /// Take `x` (`t` rows of `n`) as the new input; quantized forms are made on first use.
    pub fn set(&mut self, x: &[f32], n: usize) {
        debug_assert_eq!(x.len() % n, 0);
        self.fill(n, x.len() / n, |dst| dst.copy_from_slice(x));
    }

    /// Write `t` rows of `n` features straight into the input buffer with `fill` (which gets
    /// the whole `t × n` buffer to overwrite), sparing the caller a buffer of its own and the
    /// copy [`Acts::set`] makes; quantized forms are made on first use.
    pub fn fill(&mut self, n: usize, t: usize, fill: impl FnOnce(&mut [f32])) {
        self.n = n;
        self.t = t;
        self.x.resize(n * t, 0.0);
        fill(&mut self.x);
        self.have_b32 = false;
        self.have_k = false;
    }

    /// Tokens held.
    pub fn tokens(&self) -> usize {
        self.t
    }

    /// The prepared activations as the panel kernels read them for weights of `ty`.
    fn panel_view(&self, ty: QType) -> PanelActs<'_> {
        match ty.act_kind() {
            ActKind::K => PanelActs {
                cols: self.n,
                qs: &self.k.qs,
                d: &self.k.d,
                dshift: 3,
                s: if panel::halves(ty) == Some(2) {
                    &self.k.s16
                } else {
                    &self.k.s32
                },
            },
            _ => PanelActs {
                cols: self.n,
                qs: &self.b32.qs,
                d: &self.b32.d,
                dshift: 0,
                s: &self.b32.s,
            },
        }
    }

    fn prepare(&mut self, kind: ActKind) {
        match kind {
            ActKind::F32 => {}
            ActKind::B32 if !self.have_b32 => {
                self.b32.quantize(&self.x);
                self.have_b32 = true;
            }
            ActKind::K if !self.have_k => {
                self.k.quantize(&self.x);
                self.have_k = true;
            }
            _ => {}
        }
    }
}

/// Which kernel set to run: the fastest this CPU has, or a slower one to measure what each
/// SIMD path buys (`BOYD_KERNELS`, read by the CLI).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum KernelChoice {
    /// The fastest kernels this CPU runs.
    #[default]
    Auto,
    /// The scalar reference.
    Scalar,
    /// The SIMD kernels without the packed-panel prefill path.
    NoPanel,
    /// AVX2 without the AVX-512 VNNI kernels.
    NoVnni,
    /// The numerical ground truth, slow: weights dequantized to `f32` and multiplied with the
    /// unquantized `f32` activations, summed in `f64` (no 8-bit activation blocks).
    Exact,
}

impl KernelChoice {
    /// `auto`, `scalar`, `exact`, `no-panel`, `no-vnni`, or `avx2` (= `no-vnni`) and `vnni`
    /// (= `auto`), the names `--kernels` takes, so `BOYD_KERNELS` and the flag agree. Whether
    /// this CPU runs the set is checked where it is chosen (`--kernels`).
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "auto" | "vnni" => Self::Auto,
            "avx2" => Self::NoVnni,
            "scalar" => Self::Scalar,
            "exact" => Self::Exact,
            "no-panel" => Self::NoPanel,
            "no-vnni" => Self::NoVnni,
            _ => return None,
        })
    }
}

/// Function pointers for one CPU.
#[derive(Debug, Clone, Copy)]
pub struct Kernels {
    /// Which implementation these are.
    pub name: &'static str,
    q4_0: fn(&[u8], &ActBlocks32, usize) -> f32,
    q4_1: fn(&[u8], &ActBlocks32, usize) -> f32,
    q5_0: fn(&[u8], &ActBlocks32, usize) -> f32,
    q8_0: fn(&[u8], &ActBlocks32, usize) -> f32,
    q4_k: fn(&[u8], &ActBlocksK, usize) -> f32,
    q5_k: fn(&[u8], &ActBlocksK, usize) -> f32,
    q6_k: fn(&[u8], &ActBlocksK, usize) -> f32,
    dot_f32: fn(&[f32], &[f32]) -> f32,
    axpy_f32: fn(f32, &[f32], &mut [f32]),
    silu_mul: fn(&mut [f32], &[f32]),
    /// Four-token kernels of the 32-weight formats (prefill), where the CPU has them.
    x4: Option<[Dot4; 4]>,
    /// Whole-row attention for head dims 64 and 128, where the CPU has it.
    attend_simd: bool,
    /// Packed-panel kernels for batches of tokens (prefill), where the CPU has them.
    panel: Option<PanelKernels>,
    /// Products of dequantized weights with unquantized activations in `f64` (the ground
    /// truth of [`KernelChoice::Exact`]) instead of the 8-bit integer dot products.
    exact: bool,
}

/// The products of a packed panel with tokens `tok0 .. tok0 + n` of the activations into
/// `out` (`n × 8`, token after token); panics when the lengths do not fit.
pub type PanelFn = fn(&Panel, &PanelActs, usize, usize, &mut [f32]);

/// The panel kernels of one CPU and the formats they take.
#[derive(Debug, Clone, Copy)]
pub struct PanelKernels {
    run: PanelFn,
    pack: PackFn,
    /// `Q8_0`'s shifted codes reach 255, which only the non-saturating VNNI sum takes.
    q8_0: bool,
}

/// Fewest tokens for which a batched product of any format packs panels.
pub const PANEL_MIN_TOKENS: usize = 4;

/// Fewest tokens for which packing `ty` repays itself. Measured with
/// `cargo bench --bench kernels -- prefill` (9728 × 896, 8 tokens, panel against one-row
/// kernels, AMD EPYC with VNNI): `Q5_0` 2.8×, `Q4_K` 1.6×, `Q8_0` 1.16× faster, `Q6_K`
/// 1.05× slower (its one-row kernel is the cheapest per weight).
fn panel_min_tokens(ty: QType) -> usize {
    match ty {
        QType::Q6_K => 16,
        QType::Q8_0 => 8,
        _ => PANEL_MIN_TOKENS,
    }
}

/// Packed panel codes a worker holds per chunk of a batched product (at least one panel).
pub const PANEL_CHUNK_BYTES: usize = 96 * 1024;

/// Tokens multiplied with a chunk of panels at a time (an activation slab kept in cache).
pub const PANEL_TOKEN_SLAB: usize = 64;

/// A four-token dot product: one weight row against four tokens' activations.
pub type Dot4 = fn(&[u8], &ActBlocks32, [usize; 4]) -> [f32; 4];

fn dot_f32_scalar(x: &[f32], y: &[f32]) -> f32 {
    // Eight lanes of partial sums keep the reference close to the SIMD summation order.
    let mut acc = [0f32; 8];
    let (xc, yc) = (x.chunks_exact(8), y.chunks_exact(8));
    let tail: f32 = xc
        .remainder()
        .iter()
        .zip(yc.remainder())
        .map(|(a, b)| a * b)
        .sum();
    for (a, b) in xc.zip(yc) {
        for l in 0..8 {
            acc[l] += a[l] * b[l];
        }
    }
    acc.iter().sum::<f32>() + tail
}

/// `Σ x·y` summed in `f64` (the exact kernels' product).
pub fn dot_f64(x: &[f32], y: &[f32]) -> f64 {
    // Four partial sums: independent chains, and still far below f32's rounding.
    let mut acc = [0f64; 4];
    let (xc, yc) = (x.chunks_exact(4), y.chunks_exact(4));
    let tail: f64 = xc
        .remainder()
        .iter()
        .zip(yc.remainder())
        .map(|(a, b)| *a as f64 * *b as f64)
        .sum();
    for (a, b) in xc.zip(yc) {
        for l in 0..4 {
            acc[l] += a[l] as f64 * b[l] as f64;
        }
    }
    acc.iter().sum::<f64>() + tail
}

fn silu_mul_scalar(g: &mut [f32], u: &[f32]) {
    for (g, u) in g.iter_mut().zip(u) {
        *g = *g / (1.0 + (-*g).exp()) * u;
    }
}

fn axpy_f32_scalar(a: f32, x: &[f32], y: &mut [f32]) {
    for (y, x) in y.iter_mut().zip(x) {
        *y += a * x;
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    //! Safe wrappers of the `avx2` kernels. The CPU features are their one unchecked
    //! condition: this module is private and its functions are reachable only through
    //! `Kernels::avx2`, which hands them out after detecting the features. Every slice-length
    //! condition of an `avx2` kernel is asserted here, once per call, before calling in (a
    //! short row of activations panics like the scalar reference instead of reading past it).
    use super::avx2;
    use super::blocks::size;
    use super::{ActBlocks32, ActBlocksK};

    macro_rules! wrap {
        ($name:ident, $act:ty, $bytes:expr) => {
            pub fn $name(w: &[u8], a: &$act, off: usize) -> f32 {
                assert!(
                    a.covers(off, w.len() / $bytes),
                    "activations shorter than the row"
                );
                // SAFETY: `Kernels::avx2` hands these out only after detecting AVX2, FMA and
                // F16C; `a` holds the row's blocks (asserted).
                unsafe { avx2::$name(w, a, off) }
            }
        };
    }
    wrap!(dot_q4_0, ActBlocks32, size::Q4_0);
    wrap!(dot_q4_1, ActBlocks32, size::Q4_1);
    wrap!(dot_q5_0, ActBlocks32, size::Q5_0);
    wrap!(dot_q8_0, ActBlocks32, size::Q8_0);
    wrap!(dot_q4_k, ActBlocksK, size::Q4_K);
    wrap!(dot_q5_k, ActBlocksK, size::Q5_K);
    wrap!(dot_q6_k, ActBlocksK, size::Q6_K);

    macro_rules! wrap4 {
        ($name:ident, $bytes:expr) => {
            pub fn $name(w: &[u8], a: &ActBlocks32, offs: [usize; 4]) -> [f32; 4] {
                let nb = w.len() / $bytes;
                assert!(
                    offs.iter().all(|&o| a.covers(o, nb)),
                    "activations shorter than the row"
                );
                // SAFETY: `Kernels::avx2` hands these out only after detecting the features;
                // `a` holds the row's blocks for every token (asserted).
                unsafe { avx2::$name(w, a, offs) }
            }
        };
    }
    wrap4!(dot4_q4_0, size::Q4_0);
    wrap4!(dot4_q4_1, size::Q4_1);
    wrap4!(dot4_q5_0, size::Q5_0);
    wrap4!(dot4_q8_0, size::Q8_0);

    pub fn dot_q5_0_vnni(w: &[u8], a: &ActBlocks32, off: usize) -> f32 {
        assert!(
            a.covers(off, w.len() / size::Q5_0),
            "activations shorter than the row"
        );
        // SAFETY: handed out only after detecting AVX-512 VNNI, BW and VL; `a` holds the
        // row's blocks (asserted).
        unsafe { avx2::dot_q5_0_vnni(w, a, off) }
    }

    pub mod vnni {
        //! Only reachable through `Kernels::avx2`, which checks AVX-512 VNNI and VL.
        use super::super::avx2::vnni as k;
        use super::super::blocks::size;
        use super::ActBlocks32;

        macro_rules! wrap4v {
            ($name:ident, $bytes:expr) => {
                pub fn $name(w: &[u8], a: &ActBlocks32, offs: [usize; 4]) -> [f32; 4] {
                    let nb = w.len() / $bytes;
                    assert!(
                        offs.iter().all(|&o| a.covers(o, nb)),
                        "activations shorter than the row"
                    );
                    // SAFETY: handed out only after detecting AVX-512 VNNI and VL; `a` holds
                    // the row's blocks for every token (asserted).
                    unsafe { k::$name(w, a, offs) }
                }
            };
        }
        wrap4v!(dot4_q4_0, size::Q4_0);
        wrap4v!(dot4_q4_1, size::Q4_1);
        wrap4v!(dot4_q5_0, size::Q5_0);
        wrap4v!(dot4_q8_0, size::Q8_0);
    }

    macro_rules! wrap_panel {
        ($name:ident, $big:literal) => {
            /// Tokens in tiles of the widest kernel, then of four, then one by one.
            #[allow(clippy::int_plus_one)]
            pub fn $name(
                p: &super::Panel,
                a: &super::PanelActs,
                tok0: usize,
                n: usize,
                out: &mut [f32],
            ) {
                assert!(a.fits(p, tok0, n), "activations do not fit the panel");
                assert!(out.len() >= n * super::PANEL_ROWS && (p.h == 1 || p.h == 2));
                let mut i = 0;
                // SAFETY: `Kernels::x86` hands these out only after detecting the features
                // in each kernel's `target_feature`; the asserts above are its length
                // conditions.
                unsafe {
                    macro_rules! tile {
                        ($t:literal) => {
                            while i + $t <= n {
                                let o = &mut out[i * super::PANEL_ROWS..];
                                if p.h == 1 {
                                    avx2::$name::<$t, 1>(p, a, tok0 + i, o);
                                } else {
                                    avx2::$name::<$t, 2>(p, a, tok0 + i, o);
                                }
                                i += $t;
                            }
                        };
                    }
                    tile!($big);
                    tile!(4);
                    tile!(1);
                }
            }
        };
    }
    wrap_panel!(panel_vnni, 8);
    wrap_panel!(panel_avx2, 4);

    /// Panics unless `ty` is a panel format, every row holds `nb` 32-weight blocks and `out`
    /// the `nb × 256` codes.
    pub fn pack_codes(
        ty: super::QType,
        rows: &[&[u8]; super::PANEL_ROWS],
        nb: usize,
        out: &mut [u8],
    ) {
        assert!(
            super::panel::halves(ty).is_some(),
            "{ty:?} has no panel form"
        );
        let per = ty.block_elems() / super::QK32;
        assert!(
            nb.is_multiple_of(per),
            "{nb} blocks are not whole {ty:?} blocks"
        );
        let need = nb / per * ty.block_bytes();
        assert!(
            rows.iter().all(|r| r.len() >= need),
            "a row is shorter than {need} bytes"
        );
        assert!(out.len() >= nb * super::panel::PANEL_BLOCK_BYTES);
        // SAFETY: handed out only after detecting AVX2; the lengths are asserted above.
        unsafe { avx2::pack_codes(ty, rows, nb, out) }
    }

    pub fn dot_f32(x: &[f32], y: &[f32]) -> f32 {
        // SAFETY: handed out only after detecting AVX2 and FMA; the kernel reads the common
        // length of the two slices only.
        unsafe { avx2::dot_f32(x, y) }
    }

    pub fn axpy_f32(a: f32, x: &[f32], y: &mut [f32]) {
        // SAFETY: as for `dot_f32`.
        unsafe { avx2::axpy_f32(a, x, y) }
    }

    pub fn silu_mul(g: &mut [f32], u: &[f32]) {
        assert!(u.len() >= g.len());
        // SAFETY: features as above; the length condition is asserted.
        unsafe { avx2::silu_mul(g, u) }
    }

    /// Head dims 64 and 128 only.
    pub fn attend(
        q: &[f32],
        k: &[f32],
        v: &[f32],
        n: usize,
        scale: f32,
        scores: &mut [f32],
        out: &mut [f32],
    ) {
        let d = q.len();
        assert!(
            (d == 64 || d == 128)
                && out.len() == d
                && k.len() >= n * d
                && v.len() >= n * d
                && scores.len() >= n,
            "attention slices do not fit {n} positions of head dim {d}"
        );
        // SAFETY: features checked by `Kernels::avx2`; the lengths are asserted above.
        unsafe {
            match q.len() {
                64 => avx2::attend::<8>(q, k, v, n, scale, scores, out),
                _ => avx2::attend::<16>(q, k, v, n, scale, scores, out),
            }
        }
    }
}

impl Kernels {
    /// The scalar reference kernels.
    pub fn scalar() -> Self {
        Self {
            name: "scalar",
            q4_0: blocks::dot_q4_0,
            q4_1: blocks::dot_q4_1,
            q5_0: blocks::dot_q5_0,
            q8_0: blocks::dot_q8_0,
            q4_k: blocks::dot_q4_k,
            q5_k: blocks::dot_q5_k,
            q6_k: blocks::dot_q6_k,
            dot_f32: dot_f32_scalar,
            axpy_f32: axpy_f32_scalar,
            silu_mul: silu_mul_scalar,
            x4: None,
            attend_simd: false,
            panel: None,
            exact: false,
        }
    }

    /// The numerical ground truth ([`KernelChoice::Exact`]): every matrix product multiplies
    /// the dequantized weights with the `f32` activations as they are, summing in `f64`, and
    /// attention, SwiGLU and the `f32` products are the scalar reference's. What the 8-bit
    /// activation blocks of the other sets cost is their distance from this one.
    pub fn exact() -> Self {
        Self {
            name: "exact",
            exact: true,
            ..Self::scalar()
        }
    }

    /// The SIMD writer of panel codes, where the CPU has one (to test it against the scalar
    /// packing).
    pub fn panel_packer(&self) -> Option<PackFn> {
        self.panel.map(|p| p.pack)
    }

    /// These kernels without the packed-panel prefill path (to test and measure it).
    pub fn without_panel(mut self) -> Self {
        if self.panel.take().is_some() {
            self.name = match self.name {
                "avx2+vnni" => "avx2+vnni, no panel",
                _ => "avx2, no panel",
            };
        }
        self
    }

    /// These kernels without the four-token variants (to test and measure them).
    pub fn without_x4(mut self) -> Self {
        self.x4 = None;
        self
    }

    /// The AVX2 + FMA + F16C kernels, when this CPU has them, with the AVX-512 VNNI
    /// four-token kernels when it has those too.
    pub fn avx2() -> Option<Self> {
        Self::x86(true)
    }

    /// These kernels with the per-position attention loop instead of the whole-row kernel.
    pub fn without_simd_attention(mut self) -> Self {
        self.attend_simd = false;
        self
    }

    /// [`Kernels::avx2`] without the VNNI kernels (to test and measure both paths).
    pub fn avx2_no_vnni() -> Option<Self> {
        Self::x86(false)
    }

    #[allow(unused_variables)]
    fn x86(allow_vnni: bool) -> Option<Self> {
        #[cfg(target_arch = "x86_64")]
        if is_x86_feature_detected!("avx2")
            && is_x86_feature_detected!("fma")
            && is_x86_feature_detected!("f16c")
        {
            let vnni = allow_vnni
                && is_x86_feature_detected!("avx512vnni")
                && is_x86_feature_detected!("avx512vl");
            // The one-row Q5_0 kernel also uses AVX-512 BW's byte masks. The other one-row
            // kernels stay AVX2: their VNNI forms measured slower in decode (SmolLM2's Q4_1
            // and Q8_0: 128-134 against 133-154 tok/s, interleaved runs).
            let vnni_bw = vnni && is_x86_feature_detected!("avx512bw");
            let x4: [Dot4; 4] = if vnni {
                [
                    x86::vnni::dot4_q4_0,
                    x86::vnni::dot4_q4_1,
                    x86::vnni::dot4_q5_0,
                    x86::vnni::dot4_q8_0,
                ]
            } else {
                [
                    x86::dot4_q4_0,
                    x86::dot4_q4_1,
                    x86::dot4_q5_0,
                    x86::dot4_q8_0,
                ]
            };
            return Some(Self {
                name: if vnni { "avx2+vnni" } else { "avx2" },
                q4_0: x86::dot_q4_0,
                q4_1: x86::dot_q4_1,
                q5_0: if vnni_bw {
                    x86::dot_q5_0_vnni
                } else {
                    x86::dot_q5_0
                },
                q8_0: x86::dot_q8_0,
                q4_k: x86::dot_q4_k,
                q5_k: x86::dot_q5_k,
                q6_k: x86::dot_q6_k,
                dot_f32: x86::dot_f32,
                axpy_f32: x86::axpy_f32,
                silu_mul: x86::silu_mul,
                x4: Some(x4),
                attend_simd: true,
                panel: Some(if vnni {
                    PanelKernels {
                        run: x86::panel_vnni,
                        pack: x86::pack_codes,
                        q8_0: true,
                    }
                } else {
                    PanelKernels {
                        run: x86::panel_avx2,
                        pack: x86::pack_codes,
                        q8_0: false,
                    }
                }),
                exact: false,
            });
        }
        None
    }

    /// The fastest kernels this CPU runs.
    pub fn detect() -> Self {
        Self::select(KernelChoice::Auto)
    }

    /// The kernels `choice` asks for on this CPU (the scalar reference where it lacks the
    /// SIMD features).
    pub fn select(choice: KernelChoice) -> Self {
        match choice {
            KernelChoice::Scalar => Self::scalar(),
            KernelChoice::Exact => Self::exact(),
            KernelChoice::NoPanel => Self::avx2().unwrap_or_else(Self::scalar).without_panel(),
            KernelChoice::NoVnni => Self::avx2_no_vnni().unwrap_or_else(Self::scalar),
            KernelChoice::Auto => Self::avx2().unwrap_or_else(Self::scalar),
        }
    }

    /// The kernels `choice` picks, detected once per process and choice.
    pub fn get_for(choice: KernelChoice) -> &'static Self {
        static K: [OnceLock<Kernels>; 5] = [const { OnceLock::new() }; 5];
        let slot = match choice {
            KernelChoice::Auto => 0,
            KernelChoice::Scalar => 1,
            KernelChoice::NoPanel => 2,
            KernelChoice::NoVnni => 3,
            KernelChoice::Exact => 4,
        };
        K[slot].get_or_init(|| Self::select(choice))
    }

    /// The fastest kernels this CPU runs, detected once per process.
    pub fn get() -> &'static Self {
        Self::get_for(KernelChoice::Auto)
    }

    /// `Σ x·y`.
    #[inline]
    pub fn dot(&self, x: &[f32], y: &[f32]) -> f32 {
        (self.dot_f32)(x, y)
    }

    /// `y += a·x`.
    #[inline]
    pub fn axpy(&self, a: f32, x: &[f32], y: &mut [f32]) {
        (self.axpy_f32)(a, x, y)
    }

    /// The SwiGLU gate: `g ← g · σ(g) · u` elementwise (`u` at least as long as `g`), split
    /// over the worker pool when long.
    pub fn silu_mul(&self, g: &mut [f32], u: &[f32]) {
        assert!(u.len() >= g.len(), "up must be as long as gate");
        const CHUNK: usize = 16 * 1024;
        if g.len() <= CHUNK {
            (self.silu_mul)(g, u);
        } else {
            let f = self.silu_mul;
            pool::for_each_chunk_mut(g, CHUNK, &|i, g| f(g, &u[i * CHUNK..]));
        }
    }

    /// SwiGLU over the rows of a fused gate/up product: each `2 · half`-long row of `rows`
    /// holds a token's gate then its up values, and its first `half` become `silu(gate) · up`
    /// in place (the up half is left as it was). Rows are split over the pool when there are
    /// several.
    pub fn silu_mul_rows(&self, rows: &mut [f32], half: usize) {
        assert!(
            half > 0 && rows.len().is_multiple_of(2 * half),
            "rows must be whole gate/up pairs"
        );
        let f = self.silu_mul;
        let one = |row: &mut [f32]| {
            let (g, u) = row.split_at_mut(half);
            f(g, u);
        };
        if rows.len() == 2 * half {
            one(rows);
        } else {
            pool::for_each_chunk_mut(rows, 2 * half, &|_, row| one(row));
        }
    }

    /// One query row's attention over `n` cached positions whose K and V rows (`q.len()`
    /// floats each) are contiguous in `k` and `v`: `out = Σ_j softmax(scale · k_j·q)_j · v_j`.
    /// `scores` is scratch of at least `n` floats.
    #[allow(clippy::too_many_arguments)]
    pub fn attend(
        &self,
        q: &[f32],
        k: &[f32],
        v: &[f32],
        n: usize,
        scale: f32,
        scores: &mut Vec<f32>,
        out: &mut [f32],
    ) {
        let hd = q.len();
        assert!(n > 0 && out.len() == hd && k.len() >= n * hd && v.len() >= n * hd);
        scores.resize(n.max(scores.len()), 0.0);
        #[cfg(target_arch = "x86_64")]
        if self.attend_simd && (hd == 64 || hd == 128) {
            x86::attend(q, k, v, n, scale, scores, out);
            return;
        }
        let mut max = f32::NEG_INFINITY;
        for j in 0..n {
            let s = (self.dot_f32)(q, &k[j * hd..(j + 1) * hd]) * scale;
            scores[j] = s;
            max = max.max(s);
        }
        let mut sum = 0f32;
        for s in scores[..n].iter_mut() {
            *s = (*s - max).exp();
            sum += *s;
        }
        out.fill(0.0);
        let inv = 1.0 / sum;
        for j in 0..n {
            (self.axpy_f32)(scores[j] * inv, &v[j * hd..(j + 1) * hd], out);
        }
    }

    /// One output element: row `r` of `w` with token `tok` of `a` (already prepared).
    #[inline]
    fn row_dot(&self, w: &QMatrix, r: usize, a: &Acts, tok: usize, f32row: &mut Vec<f32>) -> f32 {
        let row = w.row(r);
        let off = tok * a.n;
        match w.ty {
            QType::Q4_0 => (self.q4_0)(row, &a.b32, off),
            QType::Q4_1 => (self.q4_1)(row, &a.b32, off),
            QType::Q5_0 => (self.q5_0)(row, &a.b32, off),
            QType::Q8_0 => (self.q8_0)(row, &a.b32, off),
            QType::Q4_K => (self.q4_k)(row, &a.k, off),
            QType::Q5_K => (self.q5_k)(row, &a.k, off),
            QType::Q6_K => (self.q6_k)(row, &a.k, off),
            QType::F32 | QType::F16 => {
                f32row.resize(w.cols, 0.0);
                blocks::dequantize_row(w.ty, row, f32row);
                (self.dot_f32)(f32row, &a.x[off..off + a.n])
            }
        }
    }

    /// `out[tok][r] = Σ_c w[r][c] · x[tok][c]` for every token of `a` and every row of `w`;
    /// `out` has `tokens × w.rows()` elements. Runs on the worker pool.
    pub fn matmul(&self, w: &QMatrix, a: &mut Acts, out: &mut [f32]) {
        assert_eq!(
            a.n, w.cols,
            "activation width must equal the matrix's columns"
        );
        let (rows, t) = (w.rows, a.t);
        assert_eq!(out.len(), rows * t, "output must hold tokens × rows");
        a.prepare(if self.exact {
            ActKind::F32
        } else {
            w.ty.act_kind()
        });
        let a = &*a;
        let out_ptr = SyncPtr(out.as_mut_ptr());
        let threads = pool::threads();
        let mut r_done = 0;
        if let Some(pk) = self.panel_kernel(w.ty, t, rows) {
            let view = a.panel_view(w.ty);
            r_done = rows - rows % PANEL_ROWS;
            self.matmul_panels(pk, w, &view, r_done, out_ptr, threads);
            if r_done == rows {
                return;
            }
        }
        // Enough chunks to balance, few enough that each carries ≥ ~16k weights of work.
        let left = rows - r_done;
        let min_rows = (16_384 / w.cols.max(1)).max(1);
        let chunk = left.div_ceil(threads * 4).max(min_rows).min(left.max(1));
        let n_chunks = left.div_ceil(chunk);
        let work = |c: usize| {
            let r0 = r_done + c * chunk;
            self.rows_dot(w, a, r0, (r0 + chunk).min(rows), out_ptr);
        };
        pool::for_each(n_chunks, &work);
    }

    /// The panel kernel for a product of `t` tokens with a `rows`-row matrix of `ty`, when
    /// this CPU has one and the batch is large enough to repay the packing.
    fn panel_kernel(&self, ty: QType, t: usize, rows: usize) -> Option<PanelKernels> {
        let pk = self.panel?;
        let ok = t >= panel_min_tokens(ty)
            && rows >= PANEL_ROWS
            && panel::halves(ty).is_some()
            && (ty != QType::Q8_0 || pk.q8_0);
        ok.then_some(pk)
    }

    /// Rows `0 .. r_end` (a multiple of eight) of the product through packed panels: chunks
    /// of panels are packed once, then every token is multiplied with them, 64 tokens at a
    /// time so that a slab of activations stays in cache across the chunk.
    fn matmul_panels(
        &self,
        pk: PanelKernels,
        w: &QMatrix,
        view: &PanelActs,
        r_end: usize,
        out_ptr: SyncPtr,
        threads: usize,
    ) {
        let (rows, t) = (w.rows, view.tokens());
        let groups = r_end / PANEL_ROWS;
        let panel_bytes = (w.cols / QK32) * panel::PANEL_BLOCK_BYTES;
        let per_chunk = (PANEL_CHUNK_BYTES / panel_bytes.max(1))
            .min(groups.div_ceil(threads * 4))
            .max(1);
        let n_chunks = groups.div_ceil(per_chunk);
        let run = |(panels, tmp): &mut (Vec<Panel>, Vec<f32>), c: usize| {
            let g0 = c * per_chunk;
            let g1 = (g0 + per_chunk).min(groups);
            panels.resize_with(g1 - g0, Panel::default);
            for (p, g) in panels.iter_mut().zip(g0..g1) {
                p.pack(w.ty, w.cols, |r| w.row(r), g * PANEL_ROWS, Some(pk.pack));
            }
            tmp.resize(PANEL_TOKEN_SLAB * PANEL_ROWS, 0.0);
            for tok0 in (0..t).step_by(PANEL_TOKEN_SLAB) {
                let n = PANEL_TOKEN_SLAB.min(t - tok0);
                for (p, g) in panels.iter().zip(g0..g1) {
                    (pk.run)(p, view, tok0, n, tmp);
                    for i in 0..n {
                        for r in 0..PANEL_ROWS {
                            // SAFETY: each (token, row) is written by exactly one chunk, and
                            // `(tok0 + i) · rows + row < out.len()` (`matmul`'s asserts).
                            unsafe {
                                out_ptr.write(
                                    (tok0 + i) * rows + g * PANEL_ROWS + r,
                                    tmp[i * PANEL_ROWS + r],
                                )
                            };
                        }
                    }
                }
            }
        };
        let work = |c: usize| {
            PANEL_SCRATCH.with_borrow_mut(|scratch| run(scratch, c));
        };
        pool::for_each(n_chunks, &work);
    }

    /// Rows `r0 .. r1` of the product for every token, one row at a time (four tokens at a
    /// time where the format has a four-token kernel).
    fn rows_dot(&self, w: &QMatrix, a: &Acts, r0: usize, r1: usize, out_ptr: SyncPtr) {
        let (rows, t) = (w.rows, a.t);
        let mut f32row = Vec::new();
        if self.exact {
            f32row.resize(w.cols, 0.0);
            for r in r0..r1 {
                w.dequantize_row(r, &mut f32row);
                for tok in 0..t {
                    let v = dot_f64(&f32row, &a.x[tok * a.n..(tok + 1) * a.n]) as f32;
                    // SAFETY: as below.
                    unsafe { out_ptr.write(tok * rows + r, v) };
                }
            }
            return;
        }
        let x4 = match (self.x4, w.ty) {
            (Some(k), QType::Q4_0) => Some(k[0]),
            (Some(k), QType::Q4_1) => Some(k[1]),
            (Some(k), QType::Q5_0) => Some(k[2]),
            (Some(k), QType::Q8_0) => Some(k[3]),
            _ => None,
        };
        let mut tok0 = 0;
        if let Some(dot4) = x4 {
            while tok0 + 4 <= t {
                let offs = [0, 1, 2, 3].map(|j| (tok0 + j) * a.n);
                for r in r0..r1 {
                    let v = dot4(w.row(r), &a.b32, offs);
                    for (j, v) in v.into_iter().enumerate() {
                        // SAFETY: as below.
                        unsafe { out_ptr.write((tok0 + j) * rows + r, v) };
                    }
                }
                tok0 += 4;
            }
        }
        for tok in tok0..t {
            for r in r0..r1 {
                let v = self.row_dot(w, r, a, tok, &mut f32row);
                // SAFETY: each (tok, r) is written by exactly one chunk, and
                // `tok * rows + r < out.len()` by `matmul`'s asserts.
                unsafe { out_ptr.write(tok * rows + r, v) };
            }
        }
    }
}

thread_local! {
    /// Each thread's packed panels and output slab for [`Kernels::matmul_panels`].
    static PANEL_SCRATCH: std::cell::RefCell<(Vec<Panel>, Vec<f32>)> = Default::default();
}

/// A raw output pointer shared by the chunks of one product; each writes disjoint elements.
#[derive(Clone, Copy)]
struct SyncPtr(*mut f32);

// SAFETY: the chunks of `matmul` write disjoint indices and the borrow of `out` outlives them.
unsafe impl Sync for SyncPtr {}
// SAFETY: as above.
unsafe impl Send for SyncPtr {}

impl SyncPtr {
    /// Write `v` at index `i`.
    ///
    /// # Safety
    /// `i` is in bounds of the slice the pointer came from, that slice is still borrowed, and
    /// no other thread reads or writes index `i` meanwhile.
    #[inline(always)]
    unsafe fn write(self, i: usize, v: f32) {
        // SAFETY: the caller's contract above.
        unsafe { *self.0.add(i) = v }
    }
}

/// Quantize `x` (length a multiple of the block) to `ty`'s bytes: the inverse of
/// [`blocks::dequantize_row`] up to rounding, for tests and synthetic models. The K formats
/// have no quantizer here (`None`); tests fill their blocks with random bytes instead.
pub fn quantize_row(ty: QType, x: &[f32]) -> Option<Vec<u8>> {
    use half::f16;
    let mut out = Vec::new();
    match ty {
        QType::F32 => x
            .iter()
            .for_each(|v| out.extend_from_slice(&v.to_le_bytes())),
        QType::F16 => x
            .iter()
            .for_each(|v| out.extend_from_slice(&f16::from_f32(*v).to_le_bytes())),
        QType::Q8_0 => {
            for b in x.chunks_exact(QK32) {
                let amax = b.iter().fold(0f32, |m, v| m.max(v.abs()));
                let d = amax / 127.0;
                let id = if d > 0.0 { 1.0 / d } else { 0.0 };
                out.extend_from_slice(&f16::from_f32(d).to_le_bytes());
                out.extend(b.iter().map(|v| ((v * id).round() as i8) as u8));
            }
        }
        QType::Q4_0 | QType::Q4_1 | QType::Q5_0 => {
            for b in x.chunks_exact(QK32) {
                let (min, max) = b
                    .iter()
                    .fold((f32::MAX, f32::MIN), |(lo, hi), &v| (lo.min(v), hi.max(v)));
                let (levels, offset) = match ty {
                    QType::Q4_0 => (8.0, 8.0),
                    QType::Q5_0 => (16.0, 16.0),
                    _ => (15.0, 0.0),
                };
                let (d, m) = if ty == QType::Q4_1 {
                    ((max - min) / levels, min)
                } else {
                    let amax = if max.abs() > min.abs() { max } else { min };
                    (-amax / levels, 0.0)
                };
                let id = if d != 0.0 { 1.0 / d } else { 0.0 };
                let hi_max = if ty == QType::Q5_0 { 31.0 } else { 15.0 };
                let q: Vec<u8> = b
                    .iter()
                    .map(|v| ((v - m) * id + offset).round().clamp(0.0, hi_max) as u8)
                    .collect();
                out.extend_from_slice(&f16::from_f32(d).to_le_bytes());
                if ty == QType::Q4_1 {
                    out.extend_from_slice(&f16::from_f32(m).to_le_bytes());
                }
                if ty == QType::Q5_0 {
                    let qh = q
                        .iter()
                        .enumerate()
                        .fold(0u32, |h, (j, &v)| h | (((v >> 4) as u32 & 1) << j));
                    out.extend_from_slice(&qh.to_le_bytes());
                }
                for j in 0..16 {
                    out.push((q[j] & 0x0F) | ((q[j + 16] & 0x0F) << 4));
                }
            }
        }
        QType::Q4_K | QType::Q5_K | QType::Q6_K => return None,
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two `Q8_0` blocks of a row, against activations that hold only one block.
    fn short_activations() -> (Vec<u8>, ActBlocks32, ActBlocksK) {
        let row = quantize_row(QType::Q8_0, &[0.5; 64]).expect("Q8_0 quantizes");
        let mut a = ActBlocks32::default();
        a.quantize(&[0.25; 32]);
        let mut k = ActBlocksK::default();
        k.quantize(&[0.25; QK_K]);
        (row, a, k)
    }

    #[test]
    fn the_exact_set_is_chosen_by_name_and_reads_unquantized_activations() {
        assert_eq!(KernelChoice::parse("exact"), Some(KernelChoice::Exact));
        assert!(KernelChoice::parse("precise").is_none());
        // The environment takes the flag's names too.
        assert_eq!(KernelChoice::parse("avx2"), Some(KernelChoice::NoVnni));
        assert_eq!(KernelChoice::parse("vnni"), Some(KernelChoice::Auto));
        let k = Kernels::get_for(KernelChoice::Exact);
        assert_eq!(k.name, "exact");
        // One Q8_0 row of ones against activations whose block holds an outlier of 127: 8-bit
        // activation blocks round 0.4 to 0 (step 1), the exact product keeps it.
        let w = QMatrix::new(
            QType::Q8_0,
            1,
            32,
            quantize_row(QType::Q8_0, &[1.0; 32]).expect("Q8_0 quantizes"),
        )
        .expect("one block");
        let mut x = [0.4f32; 32];
        x[0] = 127.0;
        let mut a = Acts::new();
        a.set(&x, 32);
        let (mut exact, mut quant) = ([0f32], [0f32]);
        k.matmul(&w, &mut a, &mut exact);
        Kernels::scalar().matmul(&w, &mut a, &mut quant);
        // The stored weight is 1 up to its f16 scale's rounding.
        let mut wv = [0f32; 32];
        w.dequantize_row(0, &mut wv);
        let want: f64 = wv.iter().zip(&x).map(|(a, b)| *a as f64 * *b as f64).sum();
        assert!(
            (exact[0] as f64 - want).abs() < 1e-4,
            "{} vs {want}",
            exact[0]
        );
        assert!((quant[0] - 127.0 * wv[0]).abs() < 1e-3, "{}", quant[0]);
        assert!(exact[0] - quant[0] > 12.0, "the 31 values of 0.4 count");
    }

    #[test]
    fn activations_cover_exactly_the_blocks_they_hold() {
        let (_, a, k) = short_activations();
        assert!(a.covers(0, 1));
        assert!(!a.covers(0, 2));
        assert!(!a.covers(QK32, 1), "the second block is not there");
        assert!(k.covers(0, 1));
        assert!(!k.covers(QK_K, 1));
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    #[should_panic(expected = "activations shorter than the row")]
    fn the_simd_wrapper_refuses_activations_shorter_than_the_row() {
        let (row, a, _) = short_activations();
        // The wrapper asserts the lengths before it calls the kernel, so this panics on any
        // CPU, with or without AVX2.
        x86::dot_q8_0(&row, &a, 0);
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    #[should_panic(expected = "activations shorter than the row")]
    fn the_four_token_simd_wrapper_checks_every_token() {
        let (row, a, _) = short_activations();
        x86::dot4_q8_0(&row[..34], &a, [0, 0, 0, 32]);
    }

    #[test]
    fn swiglu_over_fused_rows_matches_the_split_gate_and_up_on_every_set() {
        let half = 40;
        let rows: Vec<f32> = (0..3 * 2 * half)
            .map(|i| ((i * 37 % 101) as f32 - 50.0) / 9.0)
            .collect();
        let mut sets = vec![Kernels::scalar()];
        sets.extend(Kernels::avx2());
        for k in sets {
            // One row (run in place) and three (split over the pool).
            for n in [1, 3] {
                let mut fused = rows[..n * 2 * half].to_vec();
                k.silu_mul_rows(&mut fused, half);
                for (r, row) in fused.chunks_exact(2 * half).enumerate() {
                    let src = &rows[r * 2 * half..(r + 1) * 2 * half];
                    let mut g = src[..half].to_vec();
                    k.silu_mul(&mut g, &src[half..]);
                    assert_eq!(&row[..half], &g[..], "{} row {r} of {n}", k.name);
                    assert_eq!(&row[half..], &src[half..], "the up half is left as it was");
                }
            }
        }
    }

    #[test]
    #[should_panic(expected = "rows must be whole gate/up pairs")]
    fn swiglu_refuses_rows_that_are_not_whole_pairs() {
        Kernels::scalar().silu_mul_rows(&mut [0.0; 5], 2);
    }

    #[test]
    fn filled_activations_replace_the_previous_ones() {
        let mut a = Acts::new();
        a.set(&[1.0; 64], 32);
        a.fill(16, 3, |x| {
            x.iter_mut().enumerate().for_each(|(i, v)| *v = i as f32)
        });
        assert_eq!(a.tokens(), 3);
        assert_eq!(a.x, (0..48).map(|i| i as f32).collect::<Vec<_>>());
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    #[should_panic(expected = "attention slices do not fit")]
    fn the_simd_attention_wrapper_refuses_a_short_cache() {
        let q = [0f32; 64];
        let (k, v) = (vec![0f32; 64], vec![0f32; 2 * 64]);
        let (mut scores, mut out) = (vec![0f32; 2], vec![0f32; 64]);
        x86::attend(&q, &k, &v, 2, 1.0, &mut scores, &mut out);
    }
}
