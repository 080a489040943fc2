//! Partial offload: when a model does not fit on the GPU, how llama.cpp's `-ngl N` split would
//! run it — N layers on the GPU, the rest in host RAM on the CPU.
//!
//! The split follows llama.cpp's placement: `-ngl N` puts the last `min(N, layers)` repeating
//! layers on the GPU, and the output layer too when `N > layers` (so `layers + 1` is "all");
//! the token embedding stays in host memory; each layer's KV cache lives where the layer runs.
//!
//! ```text
//! GPU  = N/L × layer weights (+ output) + N/L × KV + compute buffers + backend overhead
//! host = the other weights (always the token embedding) + their KV + host compute + process
//! decode s/token = GPU roofline on the GPU share (its fitted terms, N layers)
//!                + host roofline on the host share (the CPU's terms, L − N layers)
//!                + crossings of the host link (the hidden state, each way it moves)
//! ```
//!
//! boyd's own runtime runs a model on one device; this sizes the split a workstation user runs
//! with llama.cpp or Ollama. Pure functions: the host (bandwidth, memory) and the link come in
//! as values.

use serde::Serialize;

use super::arch::ArchParams;
use super::compute::compute_buffers;
use super::error::{add, SizingError};
use super::hardware::Hardware;
use super::kv::{kv_cache, KvDtype};
use super::throughput::{
    attention_flops, attention_reads, decode_time, quantized_weights, step_terms,
};
use super::weights::WeightBytes;
use crate::units::{Bytes, BytesPerSec, TokensPerSec};

/// The link between host memory and the GPU.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Link {
    /// Name (`PCIe 4.0 x16`).
    pub name: String,
    /// Bandwidth one way.
    pub bandwidth: BytesPerSec,
    /// Seconds each crossing costs beyond its bytes (a small synchronous copy).
    pub latency_s: f64,
    /// Where the numbers come from.
    pub source: String,
}

impl Link {
    /// PCIe 4.0 x16: 16 GT/s × 16 lanes with 128b/130b coding, 31.5 GB/s each way (PCI-SIG
    /// PCIe 4.0 specification); 10 µs per small synchronous copy is an assumption (the driver
    /// round trip), not a measurement.
    pub fn pcie4_x16() -> Self {
        Self::pcie(4, 16)
    }

    /// PCIe generation `gen` (3, 4 or 5: 8, 16 or 32 GT/s per lane, 128b/130b coding) over
    /// `lanes` lanes, each way; 10 µs per crossing assumed as for [`Link::pcie4_x16`]. Other
    /// generations get the PCIe 4.0 lane rate.
    pub fn pcie(gen: u32, lanes: u32) -> Self {
        let gts = match gen {
            3 => 8.0,
            5 => 32.0,
            _ => 16.0,
        };
        let bw = gts * 1e9 * f64::from(lanes) * 128.0 / 130.0 / 8.0;
        Self {
            name: format!("PCIe {gen}.0 x{lanes}"),
            bandwidth: BytesPerSec(bw),
            latency_s: 10e-6,
            source: format!(
                "PCIe {gen}.0 x{lanes}: {:.1} GB/s each way (PCI-SIG); 10 us per crossing assumed",
                bw / 1e9
            ),
        }
    }
}

/// Memory on one side of the split.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SideMemory {
    /// Weights resident there.
    pub weights: Bytes,
    /// KV cache of the layers there.
    pub kv_cache: Bytes,
    /// Compute buffers there (none when no layer runs there).
    pub compute: Bytes,
    /// Fixed overhead (GPU context, or the host process).
    pub overhead: Bytes,
    /// Sum.
    pub total: Bytes,
}

/// One `-ngl` split, sized.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Offload {
    /// llama.cpp's `-ngl` value sized (0 ..= layers + 1).
    pub ngl: u32,
    /// Repeating layers of the model.
    pub layers: u32,
    /// Repeating layers on the GPU.
    pub gpu_layers: u32,
    /// Whether the output layer is on the GPU (`ngl > layers`).
    pub output_on_gpu: bool,
    /// GPU memory.
    pub gpu: SideMemory,
    /// Host memory.
    pub host: SideMemory,
    /// Free GPU memory.
    pub gpu_free: Bytes,
    /// `gpu.total <= gpu_free`.
    pub fits_gpu: bool,
    /// Free host memory, when known.
    pub host_free: Option<Bytes>,
    /// `host.total <= host_free`, when the host memory is known.
    pub fits_host: Option<bool>,
    /// Decode speed at an empty context.
    pub decode_empty: TokensPerSec,
    /// Decode speed with the whole context in the cache.
    pub decode_at_ctx: TokensPerSec,
    /// Seconds per token on the GPU at full context.
    pub gpu_s: f64,
    /// Seconds per token on the host at full context.
    pub host_s: f64,
    /// Seconds per token crossing the link.
    pub link_s: f64,
    /// Host bandwidth used.
    pub host_bandwidth: BytesPerSec,
    /// The link.
    pub link: Link,
    /// Where the host figures come from.
    pub host_source: String,
}

/// The host side: a CPU [`Hardware`] (bandwidth, FLOP/s, speed terms) and, when known, its
/// free memory.
#[derive(Debug, Clone)]
pub struct Host {
    /// The CPU as the sizing model knows it.
    pub hw: Hardware,
    /// Free RAM, when known (a preset GPU says nothing about its host).
    pub free: Option<Bytes>,
}

fn scale(b: u64, num: u32, den: u32) -> u64 {
    if den == 0 {
        return 0;
    }
    ((u128::from(b) * u128::from(num)) / u128::from(den)) as u64
}

/// Size `-ngl ngl` (clamped to `layers + 1`) of `arch` with weights `w` at `ctx` tokens on
/// `gpu` with the rest on `host` over `link`.
#[allow(clippy::too_many_arguments)]
pub fn split(
    arch: &ArchParams,
    w: &WeightBytes,
    kv: KvDtype,
    ctx: u32,
    ubatch: u32,
    gpu: &Hardware,
    host: &Host,
    link: &Link,
    ngl: u32,
) -> Result<Offload, SizingError> {
    const T: &str = "offload memory";
    arch.validate()?;
    if ctx == 0 {
        return Err(SizingError::Zero { what: "context" });
    }
    let layers = arch.n_layers;
    let ngl = ngl.min(layers + 1);
    let gpu_layers = ngl.min(layers);
    let output_on_gpu = ngl > layers;
    let head = w.lm_head().0;
    // A tied head is the embedding, which llama.cpp keeps on the host (and copies the output
    // projection to the GPU only for an untied file); count only an untied output here.
    let output = if w.tied { 0 } else { w.output.0 };
    let gpu_w = add(
        scale(w.layers.0, gpu_layers, layers),
        if output_on_gpu { output } else { 0 },
        T,
    )?;
    let host_w = w.total.0.saturating_sub(gpu_w);
    let kv_full = kv_cache(arch, kv, ctx)?.total.0;
    let gpu_kv = scale(kv_full, gpu_layers, layers);
    let host_kv = kv_full - gpu_kv;
    let k_quants = w.has_k_quant();
    let gpu_compute = if ngl > 0 {
        compute_buffers(arch, ctx, ubatch, gpu, k_quants)?.total.0
    } else {
        0
    };
    let host_compute = if gpu_layers < layers || !output_on_gpu {
        compute_buffers(arch, ctx, ubatch, &host.hw, k_quants)?
            .total
            .0
    } else {
        0
    };
    let sum = |items: Vec<super::OverheadItem>| -> Result<u64, SizingError> {
        items.iter().try_fold(0u64, |a, o| add(a, o.bytes.0, T))
    };
    let gpu_over = if ngl > 0 { sum(gpu.overhead())? } else { 0 };
    let host_over = sum(host.hw.overhead())?;
    let side = |weights: u64, kv: u64, compute: u64, overhead: u64| -> Result<SideMemory, _> {
        let total = [weights, kv, compute, overhead]
            .into_iter()
            .try_fold(0u64, |a, b| add(a, b, T))?;
        Ok::<_, SizingError>(SideMemory {
            weights: Bytes(weights),
            kv_cache: Bytes(kv),
            compute: Bytes(compute),
            overhead: Bytes(overhead),
            total: Bytes(total),
        })
    };
    let gpu_mem = side(gpu_w, gpu_kv, gpu_compute, gpu_over)?;
    let host_mem = side(host_w, host_kv, host_compute, host_over)?;

    // Speed: each side's roofline on its share of the bytes, quantized weights and attention.
    let wbytes = super::throughput::weight_bytes_per_token(arch, w)? as f64;
    let per_layer = w.layers.0 as f64 / f64::from(layers.max(1));
    let gpu_wbytes =
        per_layer * f64::from(gpu_layers) + if output_on_gpu { head as f64 } else { 0.0 };
    let host_wbytes = (wbytes - gpu_wbytes).max(0.0);
    let share = if wbytes > 0.0 {
        gpu_wbytes / wbytes
    } else {
        0.0
    };
    let quantized = quantized_weights(arch, w);
    let kv_per_pos = kv_cache(arch, kv, 1)?.per_token.0 as f64;
    let frac = f64::from(gpu_layers) / f64::from(layers.max(1));
    let step = |depth: f64| -> (f64, f64, f64) {
        let kv_bytes = kv_per_pos * depth;
        let attn = attention_flops(arch, depth);
        let reads = attention_reads(arch, kv, depth);
        let gpu_t = if ngl > 0 {
            decode_time(
                &step_terms(
                    gpu_wbytes + kv_bytes * frac,
                    quantized * share,
                    attn * frac,
                    reads * frac,
                    gpu_layers,
                    gpu.bandwidth.0,
                    gpu.matrix_flops,
                ),
                &gpu.speed.decode_coefficients(),
            )
        } else {
            0.0
        };
        let host_layers = layers - gpu_layers;
        let host_t = if host_layers > 0 || !output_on_gpu {
            decode_time(
                &step_terms(
                    host_wbytes + kv_bytes * (1.0 - frac),
                    quantized * (1.0 - share),
                    attn * (1.0 - frac),
                    reads * (1.0 - frac),
                    host_layers,
                    host.hw.bandwidth.0,
                    host.hw.matrix_flops,
                ),
                &host.hw.speed.decode_coefficients(),
            )
        } else {
            0.0
        };
        // The hidden state crosses to the GPU before its first layer, and back when the
        // output layer runs on the host; logits come back either way (in the fitted terms).
        let crossings = match (ngl > 0, output_on_gpu) {
            (false, _) => 0.0,
            (true, true) => {
                if gpu_layers == layers {
                    0.0
                } else {
                    1.0
                }
            }
            (true, false) => 2.0,
        };
        let hidden = f64::from(arch.hidden) * 4.0;
        let link_t = crossings * (hidden / link.bandwidth.0 + link.latency_s);
        (gpu_t, host_t, link_t)
    };
    let (g0, h0, l0) = step(0.0);
    let (g1, h1, l1) = step(f64::from(ctx));
    Ok(Offload {
        ngl,
        layers,
        gpu_layers,
        output_on_gpu,
        fits_gpu: gpu_mem.total <= gpu.free,
        fits_host: host.free.map(|f| host_mem.total <= f),
        gpu: gpu_mem,
        host: host_mem,
        gpu_free: gpu.free,
        host_free: host.free,
        decode_empty: TokensPerSec(1.0 / (g0 + h0 + l0)),
        decode_at_ctx: TokensPerSec(1.0 / (g1 + h1 + l1)),
        gpu_s: g1,
        host_s: h1,
        link_s: l1,
        host_bandwidth: host.hw.bandwidth,
        link: link.clone(),
        host_source: host.hw.source.clone(),
    })
}

/// The split with the most layers on the GPU that still fits its free memory (`ngl` from
/// `layers + 1` down to 0); `None` when not even `-ngl 0` fits (the GPU context alone).
#[allow(clippy::too_many_arguments)]
pub fn best_split(
    arch: &ArchParams,
    w: &WeightBytes,
    kv: KvDtype,
    ctx: u32,
    ubatch: u32,
    gpu: &Hardware,
    host: &Host,
    link: &Link,
) -> Result<Option<Offload>, SizingError> {
    // GPU memory grows with ngl, so a binary search over 0..=layers+1 finds the largest fit.
    let fits = |n: u32| -> Result<bool, SizingError> {
        Ok(split(arch, w, kv, ctx, ubatch, gpu, host, link, n)?.fits_gpu)
    };
    if !fits(0)? {
        return Ok(None);
    }
    let (mut lo, mut hi) = (0u32, arch.n_layers + 1);
    if fits(hi)? {
        lo = hi;
    }
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if fits(mid)? {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    split(arch, w, kv, ctx, ubatch, gpu, host, link, lo).map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sizing::hardware::{Backend, SpeedParams};
    use crate::sizing::kv::tests::llama3_8b;
    use crate::sizing::weights::from_params;

    fn dense_70b() -> ArchParams {
        ArchParams {
            n_layers: 80,
            n_heads: 64,
            hidden: 8192,
            ffn: 28_672,
            ..llama3_8b()
        }
    }

    fn host(bw: f64) -> Host {
        let mut hw = Hardware::new(
            "host",
            "test host",
            Backend::Cpu,
            Bytes(128 * Bytes::GIB),
            1.0,
            BytesPerSec(bw),
            10e12,
            "test",
        )
        .expect("host");
        hw.speed = SpeedParams::simple(0.5, 0.3, 0.0, 0.0, "test".into());
        Host {
            hw,
            free: Some(Bytes(64 * Bytes::GIB)),
        }
    }

    fn gpu(bw: f64) -> Hardware {
        let mut h = Hardware::preset("rtx-4090").expect("4090");
        h.bandwidth = BytesPerSec(bw);
        h.speed = SpeedParams::simple(0.5, 0.3, 0.0, 0.0, "test".into());
        h
    }

    /// Memory: the GPU holds its share of the layers and their KV; the host the rest and
    /// always the embedding; the two add up to the weights and the KV.
    #[test]
    fn memory_splits_by_layer_and_adds_up() {
        let arch = dense_70b();
        let w = from_params(&arch, 70_553_706_496, 4.5).expect("w");
        let (g, h) = (gpu(1e12), host(100e9));
        let link = Link::pcie4_x16();
        let o = split(&arch, &w, KvDtype::F16, 8192, 512, &g, &h, &link, 40).expect("split");
        assert_eq!((o.gpu_layers, o.output_on_gpu), (40, false));
        assert_eq!(o.gpu.weights, Bytes(w.layers.0 / 2));
        assert_eq!(o.gpu.weights.0 + o.host.weights.0, w.total.0);
        // 2 × 80 × 8 × 128 × 8192 × 2 bytes = 2.5 GiB; half on each side.
        assert_eq!(o.gpu.kv_cache, Bytes(5 * Bytes::GIB / 4));
        assert_eq!(o.host.kv_cache, Bytes(5 * Bytes::GIB / 4));
        // -ngl 81: everything but the embedding on the GPU.
        let all = split(&arch, &w, KvDtype::F16, 8192, 512, &g, &h, &link, 999).expect("all");
        assert_eq!((all.ngl, all.gpu_layers, all.output_on_gpu), (81, 80, true));
        assert_eq!(all.host.weights, w.token_embd);
        assert_eq!(all.host.kv_cache, Bytes(0));
        assert_eq!(all.link_s, 0.0, "nothing crosses but the logits");
        // -ngl 0: nothing on the GPU, not even a context.
        let none = split(&arch, &w, KvDtype::F16, 8192, 512, &g, &h, &link, 0).expect("0");
        assert_eq!(none.gpu.total, Bytes(0));
        assert_eq!(none.gpu_s, 0.0);
    }

    /// Speed: with no fixed costs each side reads its bytes at 0.5 × its bandwidth, so the
    /// time per token is the sum of the two reads plus two crossings of the link.
    #[test]
    fn decode_time_is_gpu_share_plus_host_share_plus_link() {
        let arch = dense_70b();
        let w = from_params(&arch, 70_553_706_496, 16.0).expect("w");
        let (g, h) = (gpu(1e12), host(100e9));
        let link = Link::pcie4_x16();
        let o = split(&arch, &w, KvDtype::F16, 4096, 512, &g, &h, &link, 20).expect("split");
        let wbytes = crate::sizing::throughput::weight_bytes_per_token(&arch, &w).expect("b");
        let gpu_bytes = w.layers.0 as f64 / 4.0;
        let host_bytes = wbytes as f64 - gpu_bytes;
        let link_t = 2.0 * (8192.0 * 4.0 / 31.5e9 + 10e-6);
        let want = 1.0 / (gpu_bytes / 0.5e12 + host_bytes / 0.5e11 + link_t);
        assert!(
            (o.decode_empty.0 / want - 1.0).abs() < 1e-9,
            "{} vs {want}",
            o.decode_empty.0
        );
        // More layers on the GPU is faster; the host part dominates a 1/4 split.
        let more = split(&arch, &w, KvDtype::F16, 4096, 512, &g, &h, &link, 60).expect("60");
        assert!(more.decode_empty > o.decode_empty);
        assert!(o.host_s > o.gpu_s);
        assert!(o.decode_at_ctx < o.decode_empty);
    }

    #[test]
    fn pcie_links_follow_lane_rate_and_count() {
        // 16 GT/s × 16 lanes × 128/130 / 8 bits = 31.5 GB/s; PCIe 3.0 x8 a quarter of that.
        let g4 = Link::pcie4_x16();
        assert!(
            (g4.bandwidth.0 - 31.507_692e9).abs() < 1e4,
            "{}",
            g4.bandwidth.0
        );
        assert_eq!(g4.name, "PCIe 4.0 x16");
        let g3 = Link::pcie(3, 8);
        assert!((g3.bandwidth.0 * 4.0 - g4.bandwidth.0).abs() < 1.0);
        assert_eq!(Link::pcie(5, 16).bandwidth.0, 2.0 * g4.bandwidth.0);
    }

    #[test]
    fn best_split_is_the_boundary_of_the_gpu_memory() {
        let arch = dense_70b();
        let w = from_params(&arch, 70_553_706_496, 4.85).expect("w");
        let g = Hardware::preset("rtx-4090").expect("4090");
        let h = host(100e9);
        let link = Link::pcie4_x16();
        let b = best_split(&arch, &w, KvDtype::F16, 8192, 512, &g, &h, &link)
            .expect("ok")
            .expect("some layers fit");
        assert!(b.fits_gpu && b.ngl > 0 && b.ngl < 81, "{}", b.ngl);
        let next =
            split(&arch, &w, KvDtype::F16, 8192, 512, &g, &h, &link, b.ngl + 1).expect("next");
        assert!(!next.fits_gpu);
        // 70B Q4_K_M (≈ 40 GiB) on 24 GiB: a bit under half the layers.
        assert!(b.gpu_layers > 25 && b.gpu_layers < 45, "{}", b.gpu_layers);
        assert_eq!(b.fits_host, Some(true));
    }
}
