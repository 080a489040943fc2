//! `boyd size MODEL --hw h200x8 --tp 8 [--pp 2]`: per-GPU memory and speed of a multi-GPU
//! deployment (see `sizing::parallel`).

use std::fmt::Write as _;
use std::process::ExitCode;

use anyhow::Context as _;

use super::size::Args;
use super::GlobalOpts;
use crate::sizing::parallel::{self, Cluster, ParallelEstimate};
use crate::sizing::{weights, Hardware, KvDtype, Weights};

/// Run the multi-GPU estimate.
pub fn run(args: &Args, g: &GlobalOpts) -> anyhow::Result<ExitCode> {
    if args.sweep.is_some() {
        anyhow::bail!("--sweep is not available with --tp/--pp; give one --ctx");
    }
    if args.mem_gib.is_some() {
        anyhow::bail!(
            "--mem-gib is not available with --tp/--pp (the box preset sets each GPU's memory)"
        );
    }
    let model = args.model.clone().or_else(|| g.model.clone()).context(
        "no model given: pass a catalog name, a config.json or a .gguf (see `boyd models list`)",
    )?;
    let cluster = match Cluster::preset(&args.hw) {
        Ok(c) => c,
        Err(e) => {
            // A one-GPU preset with --tp/--pp: that many of it over PCIe.
            let gpu = Hardware::preset(&args.hw).map_err(|_| e)?;
            let n = args.tp.unwrap_or(1) * args.pp.unwrap_or(1);
            Cluster::single(gpu, n)
        }
    };
    let (tp, pp) = match (args.tp, args.pp) {
        (None, None) => (cluster.gpus, 1),
        (tp, pp) => (tp.unwrap_or(1), pp.unwrap_or(1)),
    };
    let (arch, w, default_ctx) = super::size::resolve_model(&model, args.quant.as_deref())?;
    let (wb, quant) = match w {
        Weights::Exact { bytes, label } => (bytes, label),
        Weights::Params { params, quant } => (
            weights::from_params(&arch, params, quant.bits_per_weight)?,
            quant.name,
        ),
    };
    // GPU clusters: f16 unless asked otherwise (what boyd's runtime allocates on a GPU).
    let kv = g.kv_dtype.unwrap_or(KvDtype::F16);
    let ctx = args
        .ctx
        .unwrap_or(default_ctx.min(arch.context_length).max(1));
    let e = parallel::estimate(&arch, &wb, ctx, kv, args.batch, &cluster, tp, pp)
        .with_context(|| format!("sizing {model} on {}", cluster.name))?;
    let text = if g.json {
        let mut v = serde_json::to_value(&e)?;
        v["model"] = serde_json::json!(model);
        v["quant"] = serde_json::json!(quant);
        serde_json::to_string_pretty(&v)? + "\n"
    } else {
        render(&model, &quant, &e)
    };
    super::size::emit(&text)
}

/// The text card.
pub fn render(model: &str, quant: &str, e: &ParallelEstimate) -> String {
    let c = &e.cluster;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{model} {quant} · ctx {} · KV {} · {} (TP {} x PP {} = {} of {} GPUs, {} {:.0} GB/s)",
        e.ctx,
        e.kv_dtype.name(),
        c.name,
        e.tp,
        e.pp,
        e.tp * e.pp,
        c.gpus,
        c.link,
        c.link_bandwidth.0 / 1e9
    );
    let _ = writeln!(s, "\nper GPU ({} each, {} usable)", c.gpu.name, e.gpu_free);
    let _ = writeln!(
        s,
        "  weights          {:>12}   (stage matrices / TP + norms {} replicated)",
        e.weights_per_gpu.to_string(),
        e.replicated_norms
    );
    let rep = if e.kv_replication > 1 {
        format!(
            "{} KV head per GPU, each on {} GPUs",
            e.kv_heads_per_gpu, e.kv_replication
        )
    } else {
        format!(
            "{} KV head{} per GPU",
            e.kv_heads_per_gpu,
            if e.kv_heads_per_gpu == 1 { "" } else { "s" }
        )
    };
    let _ = writeln!(
        s,
        "  KV cache         {:>12}   ({rep}; {} over all GPUs)",
        e.kv_per_gpu.to_string(),
        e.kv_all_gpus
    );
    let _ = writeln!(s, "  compute buffers  {:>12}", e.compute.to_string());
    let _ = writeln!(s, "  communication    {:>12}", e.comm_total.to_string());
    for b in &e.comm_buffers {
        let _ = writeln!(
            s,
            "    {:<18} {:>8}   {}",
            b.name,
            b.bytes.to_string(),
            b.source
        );
    }
    let _ = writeln!(s, "  overhead         {:>12}", e.overhead.to_string());
    let _ = writeln!(
        s,
        "  total (fullest)  {:>12}   {}",
        e.max_per_gpu.to_string(),
        if e.fits { "fits" } else { "DOES NOT FIT" }
    );
    if e.pp > 1 {
        let _ = writeln!(s, "\nstages");
        for st in &e.stages {
            let _ = writeln!(
                s,
                "  stage {}: {} layers · weights {} · KV {} · total {}",
                st.index, st.layers, st.weights, st.kv, st.total
            );
        }
    }
    let _ = writeln!(
        s,
        "\ndecode, one sequence: {:.0} tok/s empty · {:.0} tok/s at ctx {}",
        e.decode_empty.0, e.decode_at_ctx.0, e.ctx
    );
    let _ = writeln!(
        s,
        "  memory {:.2} ms/token · interconnect {:.2} ms/token ({} all-reduces x {:.1} us, {} hops x {:.1} us)",
        e.memory_s * 1e3,
        e.comm.per_token_s * 1e3,
        e.comm.allreduces_per_token,
        e.comm.allreduce_s * 1e6,
        e.comm.hops_per_token,
        e.comm.hop_s * 1e6
    );
    s
}
