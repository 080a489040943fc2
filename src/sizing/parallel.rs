//! Multi-GPU sizing: tensor parallelism (TP) across the GPUs of a stage and pipeline
//! parallelism (PP) across stages, on one box from `src/sizing/clusters.toml`.
//!
//! Per GPU, the way vLLM-style serving engines lay a llama-family model out:
//!
//! ```text
//! layers of stage s     = L / pp, the first L % pp stages one more
//! weights per GPU       = stage matrices / tp + stage norms (replicated)
//!                         + embedding / tp (first stage) + LM head / tp (last stage)
//! KV heads per GPU      = kv_heads / tp when tp <= kv_heads (tp must divide them);
//!                         1 when tp > kv_heads (each head replicated on tp / kv_heads ranks)
//! KV per GPU            = 2 x stage layers x KV heads per GPU x head_dim x ctx x bytes
//! communication buffers = NCCL channels x 2 x NCCL_BUFFSIZE (4 MiB) per communicator
//!                         + all-reduce staging 2 x ubatch x hidden x 2 B (tp > 1)
//!                         + pipeline send/recv 2 x ubatch x hidden x 2 B (pp > 1)
//! decode s/token        = sum over stages of (stage bytes per GPU / (eff x bandwidth)
//!                           + 2 x stage layers x all-reduce time)
//!                         + (pp - 1) x hop time + fixed cost
//! all-reduce time       = latency + 2 (tp - 1) / tp x hidden x 2 B / link bandwidth
//! ```
//!
//! Design decision: the decode estimate is for one sequence, where pipeline stages run one
//! after another: PP spreads memory but does not speed a single stream up; TP divides the bytes
//! each GPU reads per token and pays two all-reduces per layer, whose latency the interconnect
//! term makes visible (NVLink versus PCIe).

use serde::{Deserialize, Serialize};

use super::arch::ArchParams;
use super::compute::compute_buffers;
use super::error::SizingError;
use super::hardware::{Hardware, OverheadItem};
use super::kv::KvDtype;
use super::weights::WeightBytes;
use crate::units::{Bytes, BytesPerSec, TokensPerSec};

/// The shipped box presets.
const CLUSTERS_TOML: &str = include_str!("clusters.toml");

/// NCCL's default buffer per channel and direction (`NCCL_BUFFSIZE`).
pub const NCCL_BUFFSIZE: u64 = 4 * 1024 * 1024;

/// Bytes of one activation element on the wire (bf16/f16).
pub const ACTIVATION_BYTES: u64 = 2;

/// Errors of multi-GPU sizing.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ParallelError {
    /// A single-GPU sizing step failed.
    #[error(transparent)]
    Sizing(#[from] SizingError),
    /// No such box.
    #[error("no multi-GPU preset {name:?}; known: {known}")]
    UnknownCluster {
        /// The name asked for.
        name: String,
        /// The presets.
        known: String,
    },
    /// The presets file is broken.
    #[error("src/sizing/clusters.toml: {0}")]
    Presets(String),
    /// TP or PP of zero.
    #[error("--tp and --pp must be at least 1")]
    Zero,
    /// More GPUs asked for than the box has.
    #[error(
        "--tp {tp} x --pp {pp} needs {need} GPUs but {cluster} has {gpus}; lower --tp or --pp"
    )]
    TooManyGpus {
        /// TP.
        tp: u32,
        /// PP.
        pp: u32,
        /// tp x pp.
        need: u32,
        /// The box.
        cluster: String,
        /// GPUs in it.
        gpus: u32,
    },
    /// TP does not split the KV heads evenly (nor replicate them evenly).
    #[error("--tp {tp} does not split {kv_heads} KV heads evenly: use a TP size that divides {kv_heads}, or a multiple of it")]
    UnevenKvHeads {
        /// TP.
        tp: u32,
        /// KV heads.
        kv_heads: u32,
    },
    /// TP does not divide the attention heads.
    #[error("--tp {tp} does not divide the {heads} attention heads; use a divisor of {heads}")]
    UnevenHeads {
        /// TP.
        tp: u32,
        /// Heads.
        heads: u32,
    },
    /// More pipeline stages than layers.
    #[error("--pp {pp} exceeds the {layers} layers")]
    TooManyStages {
        /// PP.
        pp: u32,
        /// Layers.
        layers: u32,
    },
}

/// One multi-GPU box.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Cluster {
    /// Preset name (`h200x8`).
    pub name: String,
    /// Human description.
    pub description: String,
    /// One GPU.
    pub gpu: Hardware,
    /// GPUs in the box.
    pub gpus: u32,
    /// Interconnect name (`nvlink4`, `pcie4`).
    pub link: String,
    /// Per-GPU, one-direction interconnect bandwidth.
    pub link_bandwidth: BytesPerSec,
    /// Latency of one small all-reduce or pipeline hop, seconds.
    pub latency_s: f64,
    /// NCCL channels per communicator.
    pub nccl_channels: u32,
    /// Where the numbers come from.
    pub source: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ClusterSpec {
    name: String,
    description: String,
    device: String,
    gpus: u32,
    link: String,
    link_gbs: f64,
    latency_us: f64,
    nccl_channels: u32,
    source: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ClustersFile {
    cluster: Vec<ClusterSpec>,
}

impl Cluster {
    /// Parse a presets file (the `clusters.toml` format).
    pub fn parse_presets(text: &str) -> Result<Vec<Cluster>, ParallelError> {
        let f: ClustersFile =
            toml::from_str(text).map_err(|e| ParallelError::Presets(e.message().to_owned()))?;
        f.cluster
            .into_iter()
            .map(|c| {
                let bad = |why: &str| ParallelError::Presets(format!("{}: {why}", c.name));
                if c.gpus == 0 || c.nccl_channels == 0 {
                    return Err(bad("gpus and nccl_channels must be positive"));
                }
                if !(c.link_gbs.is_finite() && c.link_gbs > 0.0) {
                    return Err(bad("link_gbs must be positive"));
                }
                if !(c.latency_us.is_finite() && c.latency_us >= 0.0) {
                    return Err(bad("latency_us must be non-negative"));
                }
                Ok(Cluster {
                    gpu: Hardware::preset(&c.device)?,
                    name: c.name,
                    description: c.description,
                    gpus: c.gpus,
                    link: c.link,
                    link_bandwidth: BytesPerSec(c.link_gbs * 1e9),
                    latency_s: c.latency_us * 1e-6,
                    nccl_channels: c.nccl_channels,
                    source: c.source,
                })
            })
            .collect()
    }

    /// The shipped presets.
    pub fn presets() -> Result<Vec<Cluster>, ParallelError> {
        Self::parse_presets(CLUSTERS_TOML)
    }

    /// The preset called `name` (case-insensitive).
    pub fn preset(name: &str) -> Result<Cluster, ParallelError> {
        let all = Self::presets()?;
        let known = all
            .iter()
            .map(|c| c.name.as_str())
            .collect::<Vec<_>>()
            .join(", ");
        all.iter()
            .find(|c| c.name.eq_ignore_ascii_case(name.trim()))
            .cloned()
            .ok_or_else(|| ParallelError::UnknownCluster {
                name: name.to_owned(),
                known,
            })
    }

    /// Whether `name` is a box preset.
    pub fn is_preset(name: &str) -> bool {
        Self::preset(name).is_ok()
    }

    /// One GPU of this box as a one-GPU "box" (for `--tp/--pp` with a single-GPU preset).
    pub fn single(gpu: Hardware, gpus: u32) -> Cluster {
        Cluster {
            name: format!("{}x{gpus}", gpu.name),
            description: format!("{gpus}x {}, PCIe 4.0 (assumed)", gpu.description),
            gpu,
            gpus,
            link: "pcie4".into(),
            link_bandwidth: BytesPerSec(25e9),
            latency_s: 30e-6,
            nccl_channels: 4,
            source: "assumed PCIe 4.0 x16 between GPUs".into(),
        }
    }
}

/// One pipeline stage on one of its GPUs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Stage {
    /// Stage index.
    pub index: u32,
    /// Layers in the stage.
    pub layers: u32,
    /// Weight bytes per GPU of this stage.
    pub weights: Bytes,
    /// KV bytes per GPU of this stage at the context.
    pub kv: Bytes,
    /// Everything per GPU (weights, KV, compute, communication, overhead).
    pub total: Bytes,
}

/// The interconnect part of the speed estimate.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CommTime {
    /// All-reduces per decoded token (2 per layer with tp > 1).
    pub allreduces_per_token: u32,
    /// Seconds per all-reduce of one token's activations.
    pub allreduce_s: f64,
    /// Pipeline hops per token (`pp - 1`).
    pub hops_per_token: u32,
    /// Seconds per hop.
    pub hop_s: f64,
    /// Interconnect seconds per token.
    pub per_token_s: f64,
}

/// Everything `boyd size --tp/--pp` reports.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ParallelEstimate {
    /// The box.
    pub cluster: Cluster,
    /// Tensor-parallel size.
    pub tp: u32,
    /// Pipeline-parallel size.
    pub pp: u32,
    /// Context length.
    pub ctx: u32,
    /// KV cache type.
    pub kv_dtype: KvDtype,
    /// KV heads each GPU stores.
    pub kv_heads_per_gpu: u32,
    /// GPUs holding a copy of each KV head (1: split, no copies).
    pub kv_replication: u32,
    /// Norm weights every GPU of a stage keeps whole (bytes, whole model).
    pub replicated_norms: Bytes,
    /// Per-GPU weights of the fullest stage.
    pub weights_per_gpu: Bytes,
    /// Per-GPU KV cache of the fullest stage.
    pub kv_per_gpu: Bytes,
    /// KV bytes over all GPUs (more than one GPU's worth when heads are replicated).
    pub kv_all_gpus: Bytes,
    /// Communication buffers per GPU, term by term.
    pub comm_buffers: Vec<OverheadItem>,
    /// Their sum.
    pub comm_total: Bytes,
    /// Compute buffers per GPU (as for one GPU: activations are not split).
    pub compute: Bytes,
    /// Fixed overhead per GPU (CUDA context, cuBLAS workspace).
    pub overhead: Bytes,
    /// Per stage.
    pub stages: Vec<Stage>,
    /// Most memory any GPU needs.
    pub max_per_gpu: Bytes,
    /// Whether every GPU fits.
    pub fits: bool,
    /// GPU memory a model may use.
    pub gpu_free: Bytes,
    /// Decode speed of one sequence at an empty context.
    pub decode_empty: TokensPerSec,
    /// Decode speed of one sequence at the full context.
    pub decode_at_ctx: TokensPerSec,
    /// Memory-bound seconds per token at an empty context (all stages).
    pub memory_s: f64,
    /// The interconnect term.
    pub comm: CommTime,
}

/// Layers of each stage: `L / pp`, the first `L % pp` stages one more.
pub fn stage_layers(layers: u32, pp: u32) -> Vec<u32> {
    (0..pp)
        .map(|s| layers / pp + u32::from(s < layers % pp))
        .collect()
}

/// KV heads per GPU and the replication factor for `tp` ranks.
pub fn kv_heads_per_gpu(kv_heads: u32, tp: u32) -> Result<(u32, u32), ParallelError> {
    if tp <= kv_heads {
        if !kv_heads.is_multiple_of(tp) {
            return Err(ParallelError::UnevenKvHeads { tp, kv_heads });
        }
        Ok((kv_heads / tp, 1))
    } else {
        if !tp.is_multiple_of(kv_heads) {
            return Err(ParallelError::UnevenKvHeads { tp, kv_heads });
        }
        Ok((1, tp / kv_heads))
    }
}

/// Norm parameters of a llama-family model: two per block and the final one.
fn norm_params(arch: &ArchParams) -> u64 {
    (2 * u64::from(arch.n_layers) + 1) * u64::from(arch.hidden)
}

/// Size `arch` with weights `w` at `ctx` on `cluster` with `tp` x `pp` GPUs.
#[allow(clippy::too_many_arguments)]
pub fn estimate(
    arch: &ArchParams,
    w: &WeightBytes,
    ctx: u32,
    kv_dtype: KvDtype,
    ubatch: u32,
    cluster: &Cluster,
    tp: u32,
    pp: u32,
) -> Result<ParallelEstimate, ParallelError> {
    arch.validate().map_err(SizingError::from)?;
    if tp == 0 || pp == 0 {
        return Err(ParallelError::Zero);
    }
    if ctx == 0 {
        return Err(SizingError::Zero { what: "context" }.into());
    }
    let need = tp.checked_mul(pp).ok_or(ParallelError::Zero)?;
    if need > cluster.gpus {
        return Err(ParallelError::TooManyGpus {
            tp,
            pp,
            need,
            cluster: cluster.name.clone(),
            gpus: cluster.gpus,
        });
    }
    if !arch.n_heads.is_multiple_of(tp) {
        return Err(ParallelError::UnevenHeads {
            tp,
            heads: arch.n_heads,
        });
    }
    if pp > arch.n_layers {
        return Err(ParallelError::TooManyStages {
            pp,
            layers: arch.n_layers,
        });
    }
    let (kv_heads, kv_replication) = kv_heads_per_gpu(arch.n_kv_heads, tp)?;
    let layers = u128::from(arch.n_layers);
    let tp128 = u128::from(tp);
    // Norms stay whole on every rank (stored as f32 in GGUF files), the rest is split.
    let norm_layer = 2 * u64::from(arch.hidden) * 4;
    let norm_final = u64::from(arch.hidden) * 4;
    let norms = (norm_params(arch) * 4).min(w.layers.0);
    let splittable = u128::from(w.layers.0 - norms);
    let k_row = kv_dtype.row_bytes(u64::from(kv_heads) * u64::from(arch.head_dim))?;
    let v_row = kv_dtype.row_bytes(u64::from(kv_heads) * u64::from(arch.head_dim_v))?;
    let kv_layer = (k_row + v_row) * u64::from(ctx);

    // Communication buffers, per GPU.
    let h = u64::from(arch.hidden);
    let ub = u64::from(ubatch.max(1));
    let nccl_one = u64::from(cluster.nccl_channels) * 2 * NCCL_BUFFSIZE;
    let mut comm_buffers = Vec::new();
    if tp > 1 {
        comm_buffers.push(OverheadItem::assumed(
            "nccl-tp",
            Bytes(nccl_one),
            "NCCL channels x 2 directions x NCCL_BUFFSIZE (4 MiB), tensor-parallel group",
        ));
        comm_buffers.push(OverheadItem::assumed(
            "allreduce-staging",
            Bytes(2 * ub * h * ACTIVATION_BYTES),
            "2 x ubatch x hidden x 2 B: all-reduce input and output",
        ));
    }
    if pp > 1 {
        comm_buffers.push(OverheadItem::assumed(
            "nccl-pp",
            Bytes(nccl_one),
            "NCCL channels x 2 directions x NCCL_BUFFSIZE (4 MiB), pipeline peers",
        ));
        comm_buffers.push(OverheadItem::assumed(
            "pp-send-recv",
            Bytes(2 * ub * h * ACTIVATION_BYTES),
            "2 x ubatch x hidden x 2 B: activations sent to / received from the next stage",
        ));
    }
    let comm_total: u64 = comm_buffers.iter().map(|c| c.bytes.0).sum();
    let compute = compute_buffers(arch, ctx, ubatch, &cluster.gpu, w.has_k_quant())?
        .total
        .0;
    let overhead: u64 = cluster.gpu.overhead().iter().map(|o| o.bytes.0).sum();

    // Interconnect time per token.
    let msg = h * ACTIVATION_BYTES;
    let allreduce_s = if tp > 1 {
        cluster.latency_s
            + 2.0 * f64::from(tp - 1) / f64::from(tp) * msg as f64 / cluster.link_bandwidth.0
    } else {
        0.0
    };
    let hop_s = if pp > 1 {
        cluster.latency_s + msg as f64 / cluster.link_bandwidth.0
    } else {
        0.0
    };
    let bw = cluster
        .gpu
        .speed
        .effective_decode_efficiency(cluster.gpu.bandwidth.0, cluster.gpu.matrix_flops)
        * cluster.gpu.bandwidth.0;

    let per_stage = stage_layers(arch.n_layers, pp);
    let mut stages = Vec::with_capacity(per_stage.len());
    let mut mem_s_empty = 0.0;
    let mut mem_s_full = 0.0;
    for (i, &l) in per_stage.iter().enumerate() {
        let first = i == 0;
        let last = i + 1 == per_stage.len();
        let l128 = u128::from(l);
        let mut weights = (splittable * l128).div_ceil(layers * tp128) as u64;
        weights += u64::from(l) * norm_layer;
        let mut touched = weights;
        if first {
            let e = w.token_embd.0.div_ceil(u64::from(tp));
            weights += e;
        }
        if last {
            weights += norm_final;
            touched += norm_final;
            // A tied model's head is the embedding matrix: a separate copy on the last stage
            // unless there is only one stage.
            let head = if w.tied {
                if first {
                    0
                } else {
                    w.token_embd.0.div_ceil(u64::from(tp))
                }
            } else {
                w.output.0.div_ceil(u64::from(tp))
            };
            weights += head;
            touched += w.lm_head().0.div_ceil(u64::from(tp));
        }
        let kv = kv_layer * u64::from(l);
        mem_s_empty += touched as f64 / bw;
        mem_s_full += (touched + kv) as f64 / bw;
        let total = weights + kv + compute + comm_total + overhead;
        stages.push(Stage {
            index: i as u32,
            layers: l,
            weights: Bytes(weights),
            kv: Bytes(kv),
            total: Bytes(total),
        });
    }
    let allreduces = if tp > 1 { 2 * arch.n_layers } else { 0 };
    let comm_s = f64::from(allreduces) * allreduce_s + f64::from(pp - 1) * hop_s;
    let s = &cluster.gpu.speed;
    let fixed = s.fixed_cost_s + s.per_layer_cost_s * f64::from(arch.n_layers);
    let max_stage = stages
        .iter()
        .max_by_key(|s| s.total.0)
        .cloned()
        .ok_or(ParallelError::Zero)?;
    let kv_all = kv_layer * u64::from(arch.n_layers) * u64::from(tp);
    Ok(ParallelEstimate {
        cluster: cluster.clone(),
        tp,
        pp,
        ctx,
        kv_dtype,
        kv_heads_per_gpu: kv_heads,
        kv_replication,
        replicated_norms: Bytes(norms),
        weights_per_gpu: Bytes(stages.iter().map(|s| s.weights.0).max().unwrap_or(0)),
        kv_per_gpu: Bytes(stages.iter().map(|s| s.kv.0).max().unwrap_or(0)),
        kv_all_gpus: Bytes(kv_all),
        comm_buffers,
        comm_total: Bytes(comm_total),
        compute: Bytes(compute),
        overhead: Bytes(overhead),
        max_per_gpu: max_stage.total,
        fits: max_stage.total.0 <= cluster.gpu.free.0,
        gpu_free: cluster.gpu.free,
        stages,
        decode_empty: TokensPerSec(1.0 / (mem_s_empty + comm_s + fixed)),
        decode_at_ctx: TokensPerSec(1.0 / (mem_s_full + comm_s + fixed)),
        memory_s: mem_s_empty,
        comm: CommTime {
            allreduces_per_token: allreduces,
            allreduce_s,
            hops_per_token: pp - 1,
            hop_s,
            per_token_s: comm_s,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sizing::weights;
    use crate::sizing::Architecture;

    /// Llama-3-70B (meta-llama/Meta-Llama-3-70B config.json).
    fn llama3_70b() -> ArchParams {
        ArchParams {
            architecture: Architecture::Llama,
            n_layers: 80,
            n_heads: 64,
            n_kv_heads: 8,
            head_dim: 128,
            head_dim_v: 128,
            hidden: 8192,
            ffn: 28672,
            vocab: 128256,
            rope_base: 500000.0,
            rope_scaling: None,
            norm_eps: 1e-5,
            context_length: 8192,
            sliding_window: None,
            tied_embeddings: false,
        }
    }

    /// BF16 weights: 70,553,706,496 parameters x 2 bytes.
    fn bf16(arch: &ArchParams) -> WeightBytes {
        weights::from_params(arch, 70_553_706_496, 16.0).expect("weights")
    }

    #[test]
    fn llama3_70b_bf16_on_8_gpus_tp8_by_hand() {
        let arch = llama3_70b();
        let w = bf16(&arch);
        // By hand: embedding = output = 128256 x 8192 = 1,050,673,152 params = 2,101,346,304 B;
        // total 141,107,412,992 B, so the blocks and norms hold 136,904,720,384 B.
        assert_eq!(w.token_embd, Bytes(2_101_346_304));
        assert_eq!(w.layers, Bytes(136_904_720_384));
        let c = Cluster::preset("h200x8").expect("preset");
        let e = estimate(&arch, &w, 8192, KvDtype::F16, 512, &c, 8, 1).expect("estimate");
        // Norms: (2 x 80 + 1) x 8192 x 4 B = 5,275,648 B, whole on every GPU.
        assert_eq!(e.replicated_norms, Bytes(5_275_648));
        // (136,904,720,384 - 5,275,648) / 8 = 17,112,430,592 of the blocks,
        // + 5,275,648 norms + 2 x 2,101,346,304 / 8 = 525,336,576 embedding and head shares.
        assert_eq!(
            e.weights_per_gpu,
            Bytes(17_112_430_592 + 5_275_648 + 525_336_576)
        );
        assert_eq!(e.weights_per_gpu, Bytes(17_643_042_816));
        // KV: 8 KV heads over 8 ranks = 1 head per GPU, no copies;
        // 2 x 80 layers x 1 x 128 x 8192 positions x 2 B = 335,544,320 B = 320 MiB per GPU.
        assert_eq!((e.kv_heads_per_gpu, e.kv_replication), (1, 1));
        assert_eq!(e.kv_per_gpu, Bytes(335_544_320));
        // Over the 8 GPUs: exactly one GPU's worth of KV (2.5 GiB), nothing duplicated.
        assert_eq!(e.kv_all_gpus, Bytes(8 * 335_544_320));
        assert_eq!(e.kv_all_gpus, Bytes(2 * 80 * 8 * 128 * 8192 * 2));
        // Communication: 16 channels x 2 x 4 MiB = 128 MiB + 2 x 512 x 8192 x 2 B = 16 MiB.
        assert_eq!(e.comm_total, Bytes((128 + 16) * 1024 * 1024));
        assert!(e.fits);
        // Interconnect: 160 all-reduces of 16 KiB at 8 us + 2 x 7/8 x 16384 B / 450 GB/s.
        assert_eq!(e.comm.allreduces_per_token, 160);
        let ar = 8e-6 + 2.0 * 7.0 / 8.0 * 16384.0 / 450e9;
        assert!((e.comm.allreduce_s - ar).abs() < 1e-12);
        assert!((e.comm.per_token_s - 160.0 * ar).abs() < 1e-9);
        // Memory time: 17.6 GB per GPU at the H200's 4.8 TB/s x the fitted CUDA decode
        // efficiency (every bytes-proportional term folded in).
        let sp = &c.gpu.speed;
        let eff = sp.effective_decode_efficiency(4.8e12, c.gpu.matrix_flops);
        assert!(eff > 0.1 && eff < 1.0, "{eff}");
        let t = 17.6e9 / (eff * 4.8e12);
        assert!((e.memory_s - t).abs() < 0.05 * t, "{} vs {t}", e.memory_s);
        // Speed = 1 / (memory + interconnect + the backend's fixed cost over 80 layers).
        let fixed = sp.fixed_cost_s + sp.per_layer_cost_s * 80.0;
        let want = 1.0 / (e.memory_s + e.comm.per_token_s + fixed);
        assert!((e.decode_empty.0 - want).abs() < 1e-9 * want);
        assert!(e.decode_at_ctx.0 < e.decode_empty.0);
    }

    #[test]
    fn llama3_70b_tp4_pp2_splits_layers_and_keeps_embedding_and_head_apart() {
        let arch = llama3_70b();
        let w = bf16(&arch);
        let c = Cluster::preset("h200x8").expect("preset");
        let e = estimate(&arch, &w, 8192, KvDtype::F16, 512, &c, 4, 2).expect("estimate");
        assert_eq!(
            e.stages.iter().map(|s| s.layers).collect::<Vec<_>>(),
            [40, 40]
        );
        // Stage 0: 40/80 x 136,899,444,736 / 4 = 17,112,430,592 + 40 x 65,536 block norms
        // + embedding / 4 = 525,336,576.
        assert_eq!(
            e.stages[0].weights,
            Bytes(17_112_430_592 + 2_621_440 + 525_336_576)
        );
        // Stage 1: the same blocks + the final norm (32,768 B) + the head / 4.
        assert_eq!(
            e.stages[1].weights,
            Bytes(17_112_430_592 + 2_621_440 + 32_768 + 525_336_576)
        );
        // KV: 8 heads / 4 = 2 per GPU over 40 layers: 2 x 40 x 2 x 128 x 8192 x 2 B = 320 MiB.
        assert_eq!(e.kv_heads_per_gpu, 2);
        assert_eq!(e.kv_per_gpu, Bytes(335_544_320));
        assert_eq!(e.comm.hops_per_token, 1);
        // Both TP and PP communicators.
        assert_eq!(e.comm_total, Bytes(2 * (128 + 16) * 1024 * 1024));
        // One stream gains nothing from PP: TP8 is faster than TP4 x PP2.
        let tp8 = estimate(&arch, &w, 8192, KvDtype::F16, 512, &c, 8, 1).expect("tp8");
        assert!(tp8.decode_empty.0 > e.decode_empty.0);
    }

    #[test]
    fn kv_heads_are_replicated_when_ranks_exceed_them() {
        assert_eq!(kv_heads_per_gpu(8, 8).ok(), Some((1, 1)));
        assert_eq!(kv_heads_per_gpu(8, 2).ok(), Some((4, 1)));
        assert_eq!(kv_heads_per_gpu(4, 8).ok(), Some((1, 2)));
        assert!(matches!(
            kv_heads_per_gpu(8, 3),
            Err(ParallelError::UnevenKvHeads { .. })
        ));
        assert!(matches!(
            kv_heads_per_gpu(4, 6),
            Err(ParallelError::UnevenKvHeads { .. })
        ));
        // Qwen2.5-7B: 28 heads, 4 KV heads; TP 4 splits them, a (hypothetical) 28 heads / TP 14
        // would not; with 2 KV heads and TP 4, each head lives on 2 GPUs and the KV over all
        // GPUs is twice one copy.
        let mut a = llama3_70b();
        a.n_kv_heads = 2;
        let w = bf16(&a);
        let c = Cluster::preset("h200x8").expect("preset");
        let e = estimate(&a, &w, 4096, KvDtype::F16, 512, &c, 4, 1).expect("estimate");
        assert_eq!((e.kv_heads_per_gpu, e.kv_replication), (1, 2));
        let one_copy = 2 * 80 * 2 * 128 * 4096 * 2;
        assert_eq!(e.kv_per_gpu, Bytes(one_copy / 2));
        assert_eq!(e.kv_all_gpus, Bytes(2 * one_copy));
    }

    #[test]
    fn pcie_pays_more_for_the_same_split_and_bad_layouts_are_refused() {
        let arch = llama3_70b();
        let w = weights::from_params(&arch, 70_553_706_496, 4.85).expect("q4_k_m");
        let nv = Cluster::preset("h100-sxmx8").expect("nvlink");
        let pcie = Cluster::preset("h100-pciex8").expect("pcie");
        let a = estimate(&arch, &w, 8192, KvDtype::F16, 512, &nv, 8, 1).expect("nv");
        let b = estimate(&arch, &w, 8192, KvDtype::F16, 512, &pcie, 8, 1).expect("pcie");
        assert!(b.comm.per_token_s > 2.0 * a.comm.per_token_s);
        assert!(a.decode_empty.0 > b.decode_empty.0);
        assert!(matches!(
            estimate(&arch, &w, 8192, KvDtype::F16, 512, &nv, 8, 2),
            Err(ParallelError::TooManyGpus { need: 16, .. })
        ));
        assert!(matches!(
            estimate(&arch, &w, 8192, KvDtype::F16, 512, &nv, 0, 1),
            Err(ParallelError::Zero)
        ));
        // TP 16 (a 16-GPU box): 8 KV heads, so every head lives on 2 GPUs.
        let x16 = Cluster::single(nv.gpu.clone(), 16);
        let e = estimate(&arch, &w, 8192, KvDtype::F16, 512, &x16, 16, 1).expect("tp16");
        assert_eq!((e.kv_heads_per_gpu, e.kv_replication), (1, 2));
        assert_eq!(
            e.kv_per_gpu,
            Bytes(335_544_320),
            "one head per GPU, as with TP 8"
        );
        assert_eq!(e.kv_all_gpus, Bytes(2 * 2 * 80 * 8 * 128 * 8192 * 2));
        assert!(matches!(
            estimate(
                &arch,
                &w,
                8192,
                KvDtype::F16,
                512,
                &Cluster::single(nv.gpu.clone(), 8),
                6,
                1
            ),
            Err(ParallelError::UnevenHeads { .. }) | Err(ParallelError::UnevenKvHeads { .. })
        ));
        let e = Cluster::preset("dgx-9000").expect_err("unknown");
        assert!(e.to_string().contains("h200x8"), "{e}");
    }

    #[test]
    fn shipped_cluster_presets_parse() {
        let all = Cluster::presets().expect("presets");
        for n in [
            "h200x8",
            "h100-sxmx8",
            "a100-80x8",
            "h100-pciex8",
            "l40sx8",
            "rtx-4090x4",
        ] {
            assert!(all.iter().any(|c| c.name == n), "missing {n}");
        }
        assert!(Cluster::parse_presets("[[cluster]]\nname = 1").is_err());
    }
}
