//! `boyd probe`: what hardware is here — CPU, SIMD, RAM, GPUs — and the measured memory
//! bandwidth, plus how this binary was built.

use std::fmt::Write as _;
use std::process::ExitCode;

use serde::Serialize;

use super::GlobalOpts;
use crate::hw::{self, BandwidthConfig, BandwidthResult, CpuInfo, HostMemory, ProbeReport};
use crate::measure::bench::BuildInfo;
use crate::units::{Bytes, BytesPerSec};

/// Arguments of `boyd probe`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Skip the bandwidth measurement (a few seconds).
    #[arg(long)]
    pub no_bandwidth: bool,
    /// Bandwidth buffer in MiB (default: 16 × the last-level cache, at least 256; a GPU uses
    /// at least 1024 MiB and at most a third of its free memory).
    #[arg(long)]
    pub bw_mib: Option<u64>,
    /// Timed bandwidth runs.
    #[arg(long, default_value_t = 8)]
    pub runs: usize,
    /// Threads for the CPU bandwidth probe (default: all logical CPUs).
    #[arg(long)]
    pub threads: Option<usize>,
}

/// `boyd probe --json`: the build and the probe.
#[derive(Debug, Serialize)]
pub struct ProbeOutput {
    /// How this binary was built.
    pub build: BuildInfo,
    /// What was found.
    #[serde(flatten)]
    pub probe: ProbeReport,
}

/// Run `boyd probe`.
pub fn run(args: Args, g: &GlobalOpts) -> anyhow::Result<ExitCode> {
    let cpu = CpuInfo::detect();
    let mem = HostMemory::read()?;
    let mut cfg = BandwidthConfig::for_host(&cpu, &mem);
    if let Some(mib) = args.bw_mib {
        cfg.bytes = mib * Bytes::MIB;
    }
    if let Some(t) = args.threads {
        cfg.threads = t;
    }
    cfg.runs = args.runs;
    if !args.no_bandwidth && !g.json {
        eprintln!(
            "measuring bandwidth: {} over {} threads, {} runs…",
            Bytes(cfg.bytes),
            cfg.threads,
            cfg.runs
        );
    }
    let probe = hw::probe((!args.no_bandwidth).then_some(&cfg))?;
    let out = ProbeOutput {
        build: BuildInfo::current(&super::runtime_options(g)),
        probe,
    };
    if g.json {
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        print!("{}", render(&out));
    }
    Ok(ExitCode::SUCCESS)
}

fn bw_line(b: &BandwidthResult) -> String {
    format!(
        "{} best, {} mean, spread {:.1} % ({:?}, {} per run, {} threads, {} runs)",
        BytesPerSec(b.best.0),
        BytesPerSec(b.mean.0),
        b.spread * 100.0,
        b.method,
        Bytes(b.bytes_per_run.0),
        b.threads,
        b.samples.len()
    )
}

/// Human-readable probe.
pub fn render(o: &ProbeOutput) -> String {
    let p = &o.probe;
    let mut s = String::new();
    let _ = writeln!(s, "cpu        {} ({})", p.cpu.model, p.cpu.arch);
    let _ = writeln!(
        s,
        "cores      {} logical{}",
        p.cpu.logical,
        p.cpu
            .physical
            .map(|n| format!(", {n} physical"))
            .unwrap_or_default()
    );
    let _ = writeln!(s, "simd       {}", p.cpu.simd.join(" "));
    if let Some(c) = p.cpu.last_level_cache {
        let _ = writeln!(s, "llc        {c}");
    }
    let _ = writeln!(
        s,
        "ram        {} total, {} available",
        p.memory.total,
        p.memory
            .available
            .map_or("unknown".into(), |b| b.to_string())
    );
    if let Some(b) = &p.cpu_bandwidth {
        let _ = writeln!(s, "bandwidth  {}", bw_line(b));
    }
    for gpu in &p.gpus {
        let head = format!("{}:{}", gpu.backend, gpu.index);
        match (&gpu.name, &gpu.error) {
            (Some(name), err) => {
                let _ = writeln!(s, "gpu        {head} {name}");
                if let Some(m) = gpu.memory {
                    let _ = writeln!(s, "           {} total, {} free", m.total, m.free);
                }
                if let Some(c) = gpu.context_overhead {
                    let _ = writeln!(s, "           context overhead {c} (measured)");
                }
                if gpu.bandwidth_kernels.is_empty() {
                    if let Some(b) = &gpu.bandwidth {
                        let _ = writeln!(s, "           bandwidth {}", bw_line(b));
                    }
                }
                for b in &gpu.bandwidth_kernels {
                    let _ = writeln!(s, "           bandwidth {}", bw_line(b));
                }
                if let Some(e) = err {
                    let _ = writeln!(s, "           {e}");
                }
            }
            (None, Some(e)) => {
                let _ = writeln!(s, "gpu        {head}: {e}");
            }
            (None, None) => {}
        }
    }
    let b = &o.build;
    let _ = writeln!(
        s,
        "build      boyd {} {} {}, simd compiled in: {}, features: {}",
        b.version,
        b.profile,
        b.arch,
        b.simd.join(" "),
        if b.features.is_empty() {
            "none".into()
        } else {
            b.features.join(" ")
        }
    );
    let _ = writeln!(
        s,
        "kernels    {} (native CPU engine, picked at run time; --kernels scalar|exact|avx2|vnni|no-panel or BOYD_KERNELS), engine {}",
        b.kernels, b.engine
    );
    for w in b.warnings() {
        let _ = writeln!(s, "warning    {w}");
    }
    s
}
