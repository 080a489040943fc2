//! The KV cache: per-layer key and value buffers, pre-allocated in chunks.
//!
//! Each layer owns one K and one V buffer of shape `(1, kv_heads, capacity, head_dim)`. New
//! positions are written in place (`slice_set`), and attention reads a narrowed view of the
//! first `len` positions, so a decode step costs no re-concatenation. When the buffers are full
//! they grow by whole chunks (the copy happens once per chunk, not once per token), up to the
//! model's context length.
//!
//! The native CPU engine's cache lives in host memory instead (`KvCache::new_host`), in one
//! of the kernels' KV types (`f32`, `f16`, `q8_0`; see `kernels::cpu::kv`), with the same
//! `[kv_head][capacity][row]` layout per layer.
//!
//! A host cache keeps only the last positions of a sliding-window layer (Gemma 3's local
//! layers): `window + 2 × ring_slack` rows per KV head, compacted when full (the last
//! `window − 1 + ring_slack` positions move to the front), so such a layer's memory stops
//! growing past its window. One forward call may then add at most `ring_slack + 1` positions
//! ([`KvCache::max_batch`]; the decoder splits longer ones), and a truncation may go back at
//! most `ring_slack` positions past the last compaction before the cache must start again
//! ([`KvCache::truncate`] says how much it kept).
//!
//! The numbers the sizing and measurement code read — `len`, `capacity`, `used_bytes`,
//! `allocated_bytes` — come straight from this structure. A prefix "snapshot" is just a length:
//! positions below it are never rewritten unless the cache is truncated below it, which
//! `restore` checks.

use candle_core::{DType, Device, Result, Tensor};

use crate::kernels::cpu::{KvBuf, KvType};

/// A marker for a cached prefix; `KvCache::restore` rolls back to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KvSnapshot {
    len: usize,
    epoch: u64,
}

impl KvSnapshot {
    /// Number of positions in the snapshot.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the snapshot is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// Shape and storage settings of a cache.
#[derive(Debug, Clone)]
pub struct KvConfig {
    /// Transformer layers.
    pub n_layers: usize,
    /// KV heads.
    pub n_kv_heads: usize,
    /// Key head dimension.
    pub head_dim_k: usize,
    /// Value head dimension.
    pub head_dim_v: usize,
    /// Element type of the buffers.
    pub dtype: DType,
    /// Positions added per growth step.
    pub chunk: usize,
    /// Largest capacity (the context length).
    pub max_len: usize,
    /// Per layer, its sliding window (`None` or a missing entry: the layer sees every
    /// position). Host caches keep only a window's worth, and a slack, of such a layer.
    pub windows: Vec<Option<usize>>,
    /// Positions one forward call may add to a windowed layer's ring beyond the window, and
    /// how far back a truncation may go ([`DEFAULT_RING_SLACK`]).
    pub ring_slack: usize,
}

/// The slack of a windowed layer's ring: 256 positions, so a windowed layer holds at most
/// `window + 512` rows, what the sizing model counts ([`crate::sizing::kv::WINDOW_SLACK`],
/// llama.cpp's `n_swa + n_ubatch` at its default batch).
pub const DEFAULT_RING_SLACK: usize = crate::sizing::kv::WINDOW_SLACK as usize / 2;

/// The per-layer K/V buffers.
#[derive(Debug)]
pub struct KvCache {
    cfg: KvConfig,
    device: Device,
    k: Vec<Tensor>,
    v: Vec<Tensor>,
    len: usize,
    capacity: usize,
    /// The length each truncation cut back to, in order; a snapshot taken after `epoch`
    /// cuts stays valid while every later cut kept its positions.
    cuts: Vec<usize>,
    /// Host storage (rows of one KV type, same `[kv_head][capacity][row]` layout) instead
    /// of tensors: the native CPU engine's cache.
    host: Option<KvType>,
    hk: Vec<KvBuf>,
    hv: Vec<KvBuf>,
    /// Per layer, the vector every stored key of a host cache is relative to (empty: none);
    /// see [`KvCache::shift_keys`].
    key_shift: Vec<Vec<f32>>,
    /// Per layer of a host cache: `(window, rows per KV head)` when the layer is a ring (its
    /// window plus twice the slack is shorter than the context), else `None`.
    ring: Vec<Option<(usize, usize)>>,
    /// Per layer, the first position its buffer holds (0 unless it is a compacted ring).
    base: Vec<usize>,
}

impl KvCache {
    /// An empty cache; nothing is allocated until the first `reserve`.
    pub fn new(cfg: KvConfig, device: &Device) -> Self {
        Self {
            cfg,
            device: device.clone(),
            k: Vec::new(),
            v: Vec::new(),
            len: 0,
            capacity: 0,
            cuts: Vec::new(),
            host: None,
            hk: Vec::new(),
            hv: Vec::new(),
            key_shift: Vec::new(),
            ring: Vec::new(),
            base: Vec::new(),
        }
    }

    /// An empty cache in host memory with rows of `ty` (whatever `cfg.dtype` says), for the
    /// native CPU engine, which reads and writes it as rows. When `ty` cannot store the head
    /// dims (`q8_0` needs multiples of 32; the decoder refuses that at load) the rows are
    /// `f32`, with a warning.
    pub fn new_host(mut cfg: KvConfig, ty: KvType) -> Self {
        let ty = if ty.supports_dim(cfg.head_dim_k) && ty.supports_dim(cfg.head_dim_v) {
            ty
        } else {
            tracing::warn!(
                "a {ty:?} KV cache cannot hold head dims {}/{}; using f32",
                cfg.head_dim_k,
                cfg.head_dim_v
            );
            KvType::F32
        };
        cfg.dtype = DType::F32;
        let slack = cfg.ring_slack.max(1);
        let ring = (0..cfg.n_layers)
            .map(|l| {
                let w = cfg.windows.get(l).copied().flatten()?;
                let rows = w.checked_add(slack.checked_mul(2)?)?;
                (w > 0 && rows < cfg.max_len).then_some((w, rows))
            })
            .collect();
        let n_layers = cfg.n_layers;
        Self {
            host: Some(ty),
            ring,
            base: vec![0; n_layers],
            ..Self::new(cfg, &Device::Cpu)
        }
    }

    /// Whether some layer keeps only its window (a ring).
    pub fn has_rings(&self) -> bool {
        self.ring.iter().any(Option::is_some)
    }

    /// Most positions one forward call may add: unlimited without rings, else the slack + 1
    /// (a ring must still hold the window of the call's first query after its last key).
    pub fn max_batch(&self) -> usize {
        if self.has_rings() {
            self.cfg.ring_slack.max(1) + 1
        } else {
            usize::MAX
        }
    }

    /// Where `layer`'s positions sit in a host cache: `(rows per KV head, first position held)`.
    /// Position `p` of KV head `g` is row `g × rows + (p − first)`.
    pub fn layer_rows(&self, layer: usize) -> (usize, usize) {
        match self.ring.get(layer).copied().flatten() {
            Some((_, rows)) => (
                rows.min(self.capacity),
                self.base.get(layer).copied().unwrap_or(0),
            ),
            None => (self.capacity, 0),
        }
    }

    /// Whether every ring still holds what a query at position `n` attends to besides
    /// itself (positions `n + 1 − window .. n`).
    fn rings_hold(&self, n: usize) -> bool {
        self.ring.iter().zip(&self.base).all(|(r, &base)| match r {
            Some((w, _)) => base <= (n + 1).saturating_sub(*w),
            None => true,
        })
    }

    /// Make `keys` (rows of `n_kv_heads × head_dim_k`, about to be stored at the cache's
    /// position in `layer`) relative to the layer's key shift, when this is a `q8_0` host
    /// cache; other caches store keys as they are.
    ///
    /// `q8_0` gives each block of 32 values one step, `max|x| / 127`. Some models' keys hold a
    /// few channels that are large and nearly the same at every position (Qwen2's key bias puts
    /// them near ±100–200), so every block holding one loses most of the bits of its other
    /// channels (Qwen2.5-Coder-0.5B, 1024 tokens: +8.6 % perplexity with `q8_0` keys against
    /// `f32`; +0.8 % with the shift). A key
    /// cache may store `k − c` for one fixed `c` per layer: each score of a query moves by the
    /// same `q · c`, which softmax cancels, so attention over the stored rows is attention over
    /// the keys. `c` is the mean key of the first rows written to an empty cache (the prompt's
    /// first batch; the first key when decoding from scratch) and stays until the cache is
    /// emptied, so every row it holds shares it.
    ///
    /// `BOYD_KV_KEY_SHIFT=0` stores `q8_0` keys unshifted, as llama.cpp's `q8_0` cache does (to
    /// hold boyd's `q8_0` kernels to llama.cpp's perplexity on the same cache format).
    pub fn shift_keys(&mut self, layer: usize, keys: &mut [f32]) {
        static SHIFT: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        let on = *SHIFT.get_or_init(|| !std::env::var("BOYD_KV_KEY_SHIFT").is_ok_and(|v| v == "0"));
        if !on || self.host != Some(KvType::Q8_0) || keys.is_empty() {
            return;
        }
        let width = self.cfg.n_kv_heads * self.cfg.head_dim_k;
        if width == 0 || !keys.len().is_multiple_of(width) {
            return;
        }
        if self.key_shift.len() < self.cfg.n_layers {
            self.key_shift.resize(self.cfg.n_layers, Vec::new());
        }
        let Some(c) = self.key_shift.get_mut(layer) else {
            return;
        };
        if self.len == 0 {
            let rows = (keys.len() / width) as f64;
            let mut sum = vec![0f64; width];
            for row in keys.chunks_exact(width) {
                sum.iter_mut().zip(row).for_each(|(s, v)| *s += *v as f64);
            }
            *c = sum.iter().map(|s| (s / rows) as f32).collect();
        }
        if c.len() == width {
            for row in keys.chunks_exact_mut(width) {
                row.iter_mut().zip(c.iter()).for_each(|(x, c)| *x -= c);
            }
        }
    }

    /// The block width the engine rotates queries, keys, values and attention outputs in
    /// (see [`crate::kernels::cpu::kv::hadamard_rotate`]) when this is a `q8_0` host cache whose
    /// head dims allow it; `None` otherwise (other caches keep rows as they are).
    ///
    /// Perplexity cost of `q8_0` over the `f32` cache (`boyd perplexity tests/data/english.txt
    /// --ctx 512`, Qwen2.5-Coder-0.5B / SmolLM2-135M): stored as they are +4.8 % / +0.2 %,
    /// with the key shift +0.8 % / −0.3 %, rotated +1.9 % / +0.1 %, both (the default)
    /// +0.4 % / +0.0 % (`benches/results/perplexity-kv-rotation-2026-12-03.md`).
    /// `BOYD_KV_ROTATE=0` turns the rotation off.
    pub fn rotation(&self) -> Option<usize> {
        static ROTATE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        let on = *ROTATE.get_or_init(|| !std::env::var("BOYD_KV_ROTATE").is_ok_and(|v| v == "0"));
        if !on || self.host != Some(KvType::Q8_0) || self.cfg.head_dim_k != self.cfg.head_dim_v {
            return None;
        }
        crate::kernels::cpu::kv::rotation_block(self.cfg.head_dim_k)
    }

    /// Whether this is a host cache.
    pub fn is_host(&self) -> bool {
        self.host.is_some()
    }

    /// The row type of a host cache.
    pub fn host_type(&self) -> Option<KvType> {
        self.host
    }

    fn not_host() -> candle_core::Error {
        candle_core::Error::Msg("the KV cache holds tensors, not host buffers".into())
    }

    /// K and V of `layer` as `[kv_head][capacity]` rows (host caches only).
    pub fn host_layer(&self, layer: usize) -> Result<(&KvBuf, &KvBuf)> {
        match (self.host, self.hk.get(layer), self.hv.get(layer)) {
            (Some(_), Some(k), Some(v)) => Ok((k, v)),
            _ => Err(Self::not_host()),
        }
    }

    /// Mutable K and V of `layer` (host caches only); write positions `len..len + t` after
    /// `reserve(t)`, then `advance(t)`.
    pub fn host_layer_mut(&mut self, layer: usize) -> Result<(&mut KvBuf, &mut KvBuf)> {
        match (self.host, self.hk.get_mut(layer), self.hv.get_mut(layer)) {
            (Some(_), Some(k), Some(v)) => Ok((k, v)),
            _ => Err(Self::not_host()),
        }
    }

    /// The settings.
    pub fn config(&self) -> &KvConfig {
        &self.cfg
    }

    /// Positions stored.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no positions are stored.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Positions that fit without growing.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Largest number of positions the cache will hold.
    pub fn max_len(&self) -> usize {
        self.cfg.max_len
    }

    /// Bytes of one position across all layers, K and V.
    pub fn bytes_per_token(&self) -> u64 {
        let c = &self.cfg;
        let per_head = match self.host {
            Some(ty) => ty.row_bytes(c.head_dim_k) + ty.row_bytes(c.head_dim_v),
            None => (c.head_dim_k + c.head_dim_v) * c.dtype.size_in_bytes(),
        };
        (c.n_layers * c.n_kv_heads * per_head) as u64
    }

    /// Bytes holding the stored positions: 2 × layers × kv heads × head dim × len × elem size
    /// (with K and V dims summed when they differ; a `q8_0` row is 34 bytes per 32 values);
    /// a ring layer counts the positions it still holds.
    pub fn used_bytes(&self) -> u64 {
        self.layer_positions(|l| match self.ring.get(l).copied().flatten() {
            Some(_) => self.len - self.base[l].min(self.len),
            None => self.len,
        })
    }

    /// Bytes allocated for the buffers (capacity, not length; a ring's rows stop at its size).
    pub fn allocated_bytes(&self) -> u64 {
        self.layer_positions(|l| match self.ring.get(l).copied().flatten() {
            Some((_, rows)) => rows.min(self.capacity),
            None => self.capacity,
        })
    }

    /// Bytes of `rows(layer)` positions summed over the layers.
    fn layer_positions(&self, rows: impl Fn(usize) -> usize) -> u64 {
        let per_layer = self.bytes_per_token() / self.cfg.n_layers.max(1) as u64;
        (0..self.cfg.n_layers)
            .map(|l| per_layer * rows(l) as u64)
            .sum()
    }

    /// Make room for `extra` more positions, growing by whole chunks (and compacting the
    /// rings that would overflow).
    pub fn reserve(&mut self, extra: usize) -> Result<()> {
        let need = self.len + extra;
        if need > self.cfg.max_len {
            candle_core::bail!(
                "KV cache full: {need} positions needed, context is {}",
                self.cfg.max_len
            );
        }
        if extra > self.max_batch() {
            candle_core::bail!(
                "{extra} positions in one call; a cache with sliding-window rings takes at most {}",
                self.max_batch()
            );
        }
        self.compact_rings(extra);
        if need <= self.capacity {
            return Ok(());
        }
        let chunk = self.cfg.chunk.max(1);
        let new_cap = need
            .div_ceil(chunk)
            .saturating_mul(chunk)
            .min(self.cfg.max_len);
        let (h, dk, dv) = (
            self.cfg.n_kv_heads,
            self.cfg.head_dim_k,
            self.cfg.head_dim_v,
        );
        if let Some(ty) = self.host {
            let old = self.capacity;
            let (ring, base, len) = (&self.ring, &self.base, self.len);
            let grow = |bufs: &mut Vec<KvBuf>, d: usize| {
                for layer in 0..self.cfg.n_layers {
                    // A ring grows with the others until it reaches its rows, then stays.
                    let (from, to, held) = match ring.get(layer).copied().flatten() {
                        Some((_, rows)) => (old.min(rows), new_cap.min(rows), len - base[layer]),
                        None => (old, new_cap, len),
                    };
                    if from == to && layer < bufs.len() {
                        continue;
                    }
                    let mut nb = KvBuf::zeros(ty, h * to, d);
                    if let Some(ob) = bufs.get(layer) {
                        for g in 0..h {
                            nb.copy_rows(g * to, ob, g * from, held, d);
                        }
                    }
                    if layer < bufs.len() {
                        bufs[layer] = nb;
                    } else {
                        bufs.push(nb);
                    }
                }
            };
            grow(&mut self.hk, dk);
            grow(&mut self.hv, dv);
            self.capacity = new_cap;
            return Ok(());
        }
        let mut k = Vec::with_capacity(self.cfg.n_layers);
        let mut v = Vec::with_capacity(self.cfg.n_layers);
        for layer in 0..self.cfg.n_layers {
            let nk = Tensor::zeros((1, h, new_cap, dk), self.cfg.dtype, &self.device)?;
            let nv = Tensor::zeros((1, h, new_cap, dv), self.cfg.dtype, &self.device)?;
            if self.len > 0 {
                nk.slice_set(&self.k[layer].narrow(2, 0, self.len)?.contiguous()?, 2, 0)?;
                nv.slice_set(&self.v[layer].narrow(2, 0, self.len)?.contiguous()?, 2, 0)?;
            }
            k.push(nk);
            v.push(nv);
        }
        self.k = k;
        self.v = v;
        self.capacity = new_cap;
        Ok(())
    }

    /// Before `extra` positions are written: move the last `window − 1 + slack` positions of
    /// every ring that could not take them to its front.
    fn compact_rings(&mut self, extra: usize) {
        let (h, dk, dv, slack) = (
            self.cfg.n_kv_heads,
            self.cfg.head_dim_k,
            self.cfg.head_dim_v,
            self.cfg.ring_slack.max(1),
        );
        for layer in 0..self.cfg.n_layers {
            let Some((w, rows)) = self.ring.get(layer).copied().flatten() else {
                continue;
            };
            let base = self.base[layer];
            if self.len + extra - base <= rows || layer >= self.hk.len() {
                continue;
            }
            // The rows per head allocated now (the ring may not have reached its size yet).
            let stride = rows.min(self.capacity);
            let keep = (self.len - base).min(w - 1 + slack);
            let from = self.len - keep - base;
            for (bufs, d) in [(&mut self.hk, dk), (&mut self.hv, dv)] {
                for g in 0..h {
                    bufs[layer].move_rows(g * stride, g * stride + from, keep, d);
                }
            }
            self.base[layer] = self.len - keep;
        }
    }

    /// Write `k`/`v` of shape `(1, kv_heads, t, dim)` for `layer` at positions
    /// `len..len + t` and return views of positions `0..len + t`. Call `reserve(t)` first and
    /// `advance(t)` after every layer has been written.
    pub fn write(&mut self, layer: usize, k: &Tensor, v: &Tensor) -> Result<(Tensor, Tensor)> {
        if self.host.is_some() {
            candle_core::bail!(
                "the KV cache holds host buffers; tensor writes need a tensor cache"
            );
        }
        let t = k.dim(2)?;
        if self.len + t > self.capacity {
            candle_core::bail!(
                "KV write of {t} positions at {} exceeds capacity {}",
                self.len,
                self.capacity
            );
        }
        let kb = &self.k[layer];
        let vb = &self.v[layer];
        kb.slice_set(&k.to_dtype(self.cfg.dtype)?.contiguous()?, 2, self.len)?;
        vb.slice_set(&v.to_dtype(self.cfg.dtype)?.contiguous()?, 2, self.len)?;
        let end = self.len + t;
        Ok((kb.narrow(2, 0, end)?, vb.narrow(2, 0, end)?))
    }

    /// Commit `t` positions written to every layer.
    pub fn advance(&mut self, t: usize) {
        self.len = (self.len + t).min(self.capacity);
    }

    /// Keep only the first `n` positions (no reallocation) and return how many are kept:
    /// `n`, or 0 when a ring no longer holds the window position `n` needs (it went back
    /// further than the slack past the last compaction), in which case the cache starts again.
    pub fn truncate(&mut self, n: usize) -> usize {
        if n < self.len {
            if !self.rings_hold(n) {
                self.len = 0;
                self.base.iter_mut().for_each(|b| *b = 0);
                self.cuts.push(0);
                return 0;
            }
            self.len = n;
            self.cuts.push(n);
        }
        self.len
    }

    /// Drop every position and free the buffers.
    pub fn clear(&mut self) {
        self.k.clear();
        self.v.clear();
        self.hk.clear();
        self.hv.clear();
        self.key_shift.clear();
        self.base.iter_mut().for_each(|b| *b = 0);
        self.len = 0;
        self.capacity = 0;
        self.cuts.push(0);
    }

    /// Mark the current prefix so it can be restored later.
    pub fn snapshot(&self) -> KvSnapshot {
        KvSnapshot {
            len: self.len,
            epoch: self.cuts.len() as u64,
        }
    }

    /// Roll back to a snapshot. Fails if positions inside it were discarded since.
    pub fn restore(&mut self, snap: KvSnapshot) -> Result<()> {
        let later_cuts = self.cuts.get(snap.epoch as usize..).unwrap_or(&[]);
        if snap.len > self.len
            || later_cuts.iter().any(|&cut| cut < snap.len)
            || !self.rings_hold(snap.len)
        {
            candle_core::bail!("KV snapshot of {} positions is no longer valid", snap.len);
        }
        self.truncate(snap.len);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::cpu::hadamard_rotate;

    fn cfg() -> KvConfig {
        KvConfig {
            n_layers: 3,
            n_kv_heads: 2,
            head_dim_k: 4,
            head_dim_v: 4,
            dtype: DType::F32,
            chunk: 8,
            max_len: 64,
            windows: Vec::new(),
            ring_slack: DEFAULT_RING_SLACK,
        }
    }

    fn step(c: &mut KvCache, t: usize, fill: f32) -> Result<Vec<(Tensor, Tensor)>> {
        c.reserve(t)?;
        let k = Tensor::full(fill, (1, 2, t, 4), &Device::Cpu)?;
        let v = Tensor::full(-fill, (1, 2, t, 4), &Device::Cpu)?;
        let mut out = Vec::new();
        for layer in 0..3 {
            out.push(c.write(layer, &k, &v)?);
        }
        c.advance(t);
        Ok(out)
    }

    #[test]
    fn used_bytes_is_the_formula() -> Result<()> {
        let mut c = KvCache::new(cfg(), &Device::Cpu);
        step(&mut c, 5, 1.0)?;
        // 2 x layers x kv heads x head dim x len x 4 bytes
        assert_eq!(c.used_bytes(), 2 * 3 * 2 * 4 * 5 * 4);
        assert_eq!(c.capacity(), 8);
        assert_eq!(c.allocated_bytes(), 2 * 3 * 2 * 4 * 8 * 4);
        Ok(())
    }

    #[test]
    fn grows_by_chunks_and_keeps_contents() -> Result<()> {
        let mut c = KvCache::new(cfg(), &Device::Cpu);
        step(&mut c, 6, 1.0)?;
        let views = step(&mut c, 5, 2.0)?;
        assert_eq!(c.len(), 11);
        assert_eq!(c.capacity(), 16);
        let k = views[2].0.squeeze(0)?.to_vec3::<f32>()?;
        assert_eq!(k[1][0][0], 1.0);
        assert_eq!(k[1][5][0], 1.0);
        assert_eq!(k[1][6][0], 2.0);
        assert_eq!(k[1][10][3], 2.0);
        Ok(())
    }

    #[test]
    fn refuses_past_max_len() -> Result<()> {
        let mut c = KvCache::new(cfg(), &Device::Cpu);
        step(&mut c, 60, 1.0)?;
        assert!(c.reserve(5).is_err());
        assert_eq!(c.len(), 60);
        Ok(())
    }

    /// Write `t` positions of value `fill` (K) and `-fill` (V) into a host cache.
    fn host_step(c: &mut KvCache, t: usize, fill: f32) -> Result<()> {
        c.reserve(t)?;
        let (cap, len, k) = (c.capacity(), c.len(), crate::kernels::cpu::Kernels::get());
        for layer in 0..3 {
            let (kb, vb) = c.host_layer_mut(layer)?;
            for g in 0..2 {
                for i in 0..t {
                    kb.store_row(g * cap + len + i, &[fill; 32], k);
                    vb.store_row(g * cap + len + i, &[-fill; 32], k);
                }
            }
        }
        c.advance(t);
        Ok(())
    }

    fn host_cfg() -> KvConfig {
        KvConfig {
            head_dim_k: 32,
            head_dim_v: 32,
            ..cfg()
        }
    }

    #[test]
    fn host_used_bytes_follow_the_row_type() -> Result<()> {
        // 3 layers x 2 heads x (K + V) rows of 32 values per position.
        for (ty, row) in [(KvType::F32, 128), (KvType::F16, 64), (KvType::Q8_0, 34)] {
            let mut c = KvCache::new_host(host_cfg(), ty);
            assert_eq!(c.host_type(), Some(ty));
            host_step(&mut c, 5, 1.0)?;
            assert_eq!(c.used_bytes(), 3 * 2 * 2 * row * 5, "{ty:?}");
            assert_eq!(c.allocated_bytes(), 3 * 2 * 2 * row * 8, "{ty:?}");
        }
        Ok(())
    }

    #[test]
    fn host_caches_grow_and_keep_their_rows_in_every_type() -> Result<()> {
        for ty in [KvType::F32, KvType::F16, KvType::Q8_0] {
            let mut c = KvCache::new_host(host_cfg(), ty);
            host_step(&mut c, 6, 1.5)?;
            host_step(&mut c, 5, -0.25)?;
            assert_eq!((c.len(), c.capacity()), (11, 16));
            let cap = c.capacity();
            let (kb, vb) = c.host_layer(2)?;
            let mut row = [0f32; 32];
            // q8_0 keeps 127 · f16(want / 127): within 0.1 %.
            let near = |row: &[f32; 32], want: f32| row.iter().all(|x| (x - want).abs() <= 1e-3);
            for (pos, want) in [(0, 1.5f32), (5, 1.5), (6, -0.25), (10, -0.25)] {
                kb.rows(cap, 11, 32).dequantize(pos, &mut row);
                assert!(near(&row, want), "{ty:?} K head 1 position {pos}: {row:?}");
                vb.rows(cap, 11, 32).dequantize(pos, &mut row);
                assert!(near(&row, -want), "{ty:?} V head 1 position {pos}: {row:?}");
            }
            // Truncation and snapshots mean positions, whatever the row type.
            let snap = c.snapshot();
            host_step(&mut c, 2, 3.0)?;
            c.restore(snap)?;
            assert_eq!(c.len(), 11);
        }
        Ok(())
    }

    #[test]
    fn a_q8_0_host_cache_of_odd_head_dims_falls_back_to_f32() {
        let c = KvCache::new_host(cfg(), KvType::Q8_0);
        assert_eq!(c.host_type(), Some(KvType::F32));
    }

    #[test]
    fn truncate_and_snapshot() -> Result<()> {
        let mut c = KvCache::new(cfg(), &Device::Cpu);
        step(&mut c, 4, 1.0)?;
        let snap = c.snapshot();
        step(&mut c, 4, 2.0)?;
        c.restore(snap)?;
        assert_eq!(c.len(), 4);
        let views = step(&mut c, 1, 3.0)?;
        assert_eq!(views[0].0.dim(2)?, 5);
        let long = c.snapshot();
        c.restore(snap)?;
        step(&mut c, 1, 4.0)?;
        assert!(
            c.restore(long).is_err(),
            "position 4 was rewritten after `long` was taken"
        );
        c.truncate(2);
        assert!(
            c.restore(snap).is_err(),
            "positions inside the snapshot were dropped"
        );
        assert_eq!(c.used_bytes(), 2 * 3 * 2 * 4 * 2 * 4);
        Ok(())
    }

    /// Keys with one large, nearly constant channel per block (Qwen2's key bias) and small
    /// varied others; values varied. Returns (keys as rows of 2 heads × 32, values, a query).
    fn biased_keys(n: usize) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
        let wave = |i: usize, j: usize, f: f32| ((i * 7 + j * 13) as f32 * f).sin();
        let mut k = Vec::new();
        let mut v = Vec::new();
        for i in 0..n {
            for j in 0..64 {
                let big = if j % 32 == 29 {
                    150.0 + 0.5 * wave(i, j, 0.3)
                } else {
                    0.0
                };
                k.push(big + 2.0 * wave(i, j, 0.71));
                v.push(wave(i, j, 0.37));
            }
        }
        let q = (0..32)
            .map(|j| 3.0 * wave(1, j, 1.3) + if j == 29 { 0.2 } else { 0.0 })
            .collect();
        (k, v, q)
    }

    /// Attention of `q` over head 0 of layer 0 of `c` (n positions), by the scalar kernels;
    /// with `c`'s rotation when `rotate` (the query rotated in, the output rotated back).
    fn attend_head0(c: &KvCache, q: &[f32], n: usize, rotate: bool) -> Result<Vec<f32>> {
        let (kb, vb) = c.host_layer(0)?;
        let mut out = vec![0f32; 32];
        let mut scores = Vec::new();
        let mut q = q.to_vec();
        let rotation = c.rotation().filter(|_| rotate);
        if let Some(r) = rotation {
            hadamard_rotate(&mut q, r);
        }
        crate::kernels::cpu::Kernels::scalar().attend_kv(
            &q,
            kb.rows(0, n, 32),
            vb.rows(0, n, 32),
            n,
            1.0 / (32f32).sqrt(),
            &mut scores,
            &mut out,
        );
        if let Some(r) = rotation {
            hadamard_rotate(&mut out, r);
        }
        Ok(out)
    }

    /// Store `keys`/`vals` (rows of 2 heads × 32) in every layer of `c`, in two batches,
    /// shifting the keys first when `shift` and rotating keys and values when `rotate`.
    fn fill(c: &mut KvCache, keys: &[f32], vals: &[f32], shift: bool, rotate: bool) -> Result<()> {
        let k = &crate::kernels::cpu::Kernels::scalar();
        let n = keys.len() / 64;
        for (from, to) in [(0, n / 2), (n / 2, n)] {
            c.reserve(to - from)?;
            let cap = c.capacity();
            for layer in 0..3 {
                let mut ks = keys[from * 64..to * 64].to_vec();
                let mut vs = vals[from * 64..to * 64].to_vec();
                if shift {
                    c.shift_keys(layer, &mut ks);
                }
                if let Some(r) = c.rotation().filter(|_| rotate) {
                    hadamard_rotate(&mut ks, r);
                    hadamard_rotate(&mut vs, r);
                }
                let (kb, vb) = c.host_layer_mut(layer)?;
                for (i, pos) in (from..to).enumerate() {
                    for g in 0..2 {
                        let at = i * 64 + g * 32;
                        kb.store_row(g * cap + pos, &ks[at..at + 32], k);
                        vb.store_row(g * cap + pos, &vs[at..at + 32], k);
                    }
                }
            }
            c.advance(to - from);
        }
        Ok(())
    }

    #[test]
    fn q8_0_keys_stored_relative_to_the_first_batch_mean_keep_attention_exact() -> Result<()> {
        let n = 48;
        let (keys, vals, q) = biased_keys(n);
        // The truth: f64 softmax over the raw keys of head 0.
        let scale = 1.0 / (32f64).sqrt();
        let s: Vec<f64> = (0..n)
            .map(|i| {
                (0..32)
                    .map(|j| q[j] as f64 * keys[i * 64 + j] as f64)
                    .sum::<f64>()
                    * scale
            })
            .collect();
        let m = s.iter().cloned().fold(f64::MIN, f64::max);
        let w: Vec<f64> = s.iter().map(|x| (x - m).exp()).collect();
        let z: f64 = w.iter().sum();
        let truth: Vec<f64> = (0..32)
            .map(|j| (0..n).map(|i| w[i] / z * vals[i * 64 + j] as f64).sum())
            .collect();
        let err = |out: &[f32]| {
            out.iter()
                .zip(&truth)
                .map(|(o, t)| (*o as f64 - t).abs())
                .fold(0f64, f64::max)
        };
        let filled = |shift: bool, rotate: bool| -> Result<KvCache> {
            let mut c = KvCache::new_host(host_cfg(), KvType::Q8_0);
            fill(&mut c, &keys, &vals, shift, rotate)?;
            Ok(c)
        };
        let plain = filled(false, false)?;
        let mut shifted = filled(true, false)?;
        let (e_plain, e_shift) = (
            err(&attend_head0(&plain, &q, n, false)?),
            err(&attend_head0(&shifted, &q, n, false)?),
        );
        assert!(
            e_shift < 0.02,
            "shifted q8_0 keys: attention error {e_shift}"
        );
        assert!(
            e_shift * 4.0 < e_plain,
            "shift {e_shift} against plain {e_plain}"
        );
        // Rotated rows (the query rotated in, the output back): the large channel spreads
        // over the block, alone and with the shift.
        let (rotated, both) = (filled(false, true)?, filled(true, true)?);
        let (e_rot, e_both) = (
            err(&attend_head0(&rotated, &q, n, true)?),
            err(&attend_head0(&both, &q, n, true)?),
        );
        assert_eq!(rotated.rotation(), Some(32));
        assert!(
            e_rot * 3.0 < e_plain,
            "rotated {e_rot} against plain {e_plain}"
        );
        assert!(
            e_both < 0.02,
            "shifted and rotated q8_0 keys: attention error {e_both}"
        );
        // f32 and f16 caches store keys unchanged and are not rotated.
        for ty in [KvType::F32, KvType::F16] {
            let mut c = KvCache::new_host(host_cfg(), ty);
            let mut ks = keys[..64].to_vec();
            c.shift_keys(0, &mut ks);
            assert_eq!(ks, keys[..64], "{ty:?}");
            assert_eq!(c.rotation(), None, "{ty:?}");
        }
        // Emptying the cache forgets the shift: the next first batch sets a new one.
        shifted.clear();
        let mut ks = vec![1.0f32; 64];
        shifted.shift_keys(0, &mut ks);
        assert!(ks.iter().all(|x| *x == 0.0), "{ks:?}");
        Ok(())
    }
}
