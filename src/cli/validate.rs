//! `boyd validate`: predict, load, measure, compare and calibrate one model on one device.
//!
//! Prints one table — component | predicted | measured | error % — for weights, the KV cache
//! at each depth, the compute peak, overhead, total, and prefill/decode tokens/s; saves the
//! fitted calibration profile where `boyd size --hw this` finds it; with `--out DIR` writes
//! `report.json` and `report.svg`. Progress bars go to stderr.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use indicatif::{ProgressBar, ProgressStyle};

use super::GlobalOpts;
use crate::catalog;
use crate::hw::{BandwidthConfig, CpuInfo, DeviceProbe, HostMemory, Probe};
use crate::measure::compare::Unit;
use crate::measure::report::ValidateReport;
use crate::measure::validate::{self, Progress, ValidateConfig};
use crate::sizing::{Backend, Hardware};
use crate::units::{Bytes, BytesPerSec};

/// Arguments of `boyd validate`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Cache depths for the decode tests and KV readings, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "0,512,2048")]
    pub depths: Vec<usize>,
    /// Timed repetitions per speed test (one untimed warm-up comes first).
    #[arg(long, default_value_t = 2)]
    pub reps: usize,
    /// Tokens generated per decode test.
    #[arg(long, default_value_t = 128)]
    pub n_gen: usize,
    /// Tokens of the prefill test.
    #[arg(long, default_value_t = 512)]
    pub n_prompt: usize,
    /// Write report.json and report.svg into this directory.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Do not save the calibration profile.
    #[arg(long)]
    pub no_save: bool,
    /// Hardware preset for a GPU device (h200, m3-max, …); the CPU is always `this` machine.
    /// Default for a GPU: the preset whose description matches the GPU's name, else the GPU as
    /// the driver describes it (memory from the driver, an assumed matrix throughput).
    #[arg(long)]
    pub hw: Option<String>,
    /// Bandwidth probe buffer in MiB (default: 16 × the last-level cache, at least 256).
    #[arg(long)]
    pub bw_mib: Option<u64>,
}

/// The device as the sizing model knows it before calibration.
fn hardware(args: &Args, g: &GlobalOpts) -> anyhow::Result<Hardware> {
    if let Some(name) = &args.hw {
        return Ok(Hardware::preset(name)?);
    }
    let backend = match g.device.as_str() {
        "cpu" => Backend::Cpu,
        spec => Probe::for_device(spec)?.backend(),
    };
    if backend != Backend::Cpu {
        return gpu_hardware(&g.device);
    }
    let mut hw = crate::hw::this_machine()?;
    hw.source = "RAM from /proc/meminfo; bandwidth measured by boyd validate".into();
    Ok(hw)
}

/// The shipped GPU preset that best matches a driver's device name
/// ([`Hardware::preset_for_gpu`]).
pub fn preset_for_gpu(name: &str, backend: Backend) -> Option<Hardware> {
    Hardware::preset_for_gpu(name, backend)
}

/// The GPU at `spec` as the sizing model should know it before calibration
/// ([`Hardware::for_gpu`]: its preset, else the driver's figures).
fn gpu_hardware(spec: &str) -> anyhow::Result<Hardware> {
    let probe = Probe::for_device(spec)?;
    let m = probe.memory()?;
    let name = probe.name();
    let mut hw = Hardware::for_gpu(&name, probe.backend(), m.total, m.free)?;
    if hw.name == "this" {
        eprintln!(
            "{name}: no hardware preset matches; using the driver's memory figures and an assumed \
             matrix throughput (--hw PRESET for the vendor's)"
        );
        hw.source =
            "memory from the driver; bandwidth measured by boyd validate; matrix throughput assumed"
                .into();
    } else {
        eprintln!(
            "{name}: using hardware preset {} (--hw to choose another)",
            hw.name
        );
    }
    Ok(hw)
}

/// Run `boyd validate`.
pub fn run(args: Args, g: &GlobalOpts) -> anyhow::Result<ExitCode> {
    let resolved = catalog::resolve_model(g.model.as_deref(), catalog::DEFAULT_MODEL)
        .context("cannot find the model to validate")?;
    let name = resolved
        .entry
        .as_ref()
        .map(|e| e.name.clone())
        .or_else(|| {
            resolved
                .path
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
        })
        .unwrap_or_default();
    let device = crate::runtime::parse_device(&g.device)?;
    let cpu = CpuInfo::detect();
    let mem = HostMemory::read()?;
    let mut bw = BandwidthConfig::for_host(&cpu, &mem);
    if let Some(mib) = args.bw_mib {
        bw.bytes = mib * Bytes::MIB;
    }
    let cfg = ValidateConfig {
        model_path: resolved.path.clone(),
        model_name: name,
        device_spec: g.device.clone(),
        depths: args.depths.clone(),
        n_gen: args.n_gen,
        n_prompt: args.n_prompt,
        reps: args.reps,
        hardware: hardware(&args, g)?,
        bandwidth: bw,
        seed: 42,
        measured_at: crate::agent::rundir::utc_timestamp(),
        runtime: super::runtime_options(g),
    };
    if let Some(w) = crate::measure::bench::BuildInfo::current(&cfg.runtime)
        .warnings()
        .first()
    {
        eprintln!("warning: {w}");
    }
    let bar = ProgressBar::new(0);
    bar.set_style(
        ProgressStyle::with_template("{prefix:>10} [{bar:30}] {pos}/{len} {msg} ({elapsed})")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    let mut report = validate::validate(&cfg, &device, &mut |p| match p {
        Progress::Stage { name, steps } => {
            bar.set_prefix(name);
            bar.set_length(steps);
            bar.set_position(0);
        }
        Progress::Step(msg) => {
            bar.set_message(msg);
            bar.inc(1);
        }
    })?;
    bar.finish_and_clear();

    if !args.no_save {
        let path = super::size::save_profile(&report.calibration.profile)?;
        report.calibration.saved_to = Some(path.display().to_string());
    }
    if let Some(dir) = &args.out {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        let json = serde_json::to_string_pretty(&report)? + "\n";
        std::fs::write(dir.join("report.json"), json)
            .with_context(|| format!("cannot write {}", dir.join("report.json").display()))?;
        std::fs::write(dir.join("report.svg"), crate::measure::svg::render(&report))
            .with_context(|| format!("cannot write {}", dir.join("report.svg").display()))?;
    }
    let text = if g.json {
        serde_json::to_string_pretty(&report)? + "\n"
    } else {
        render_table(&report)
    };
    print!("{text}");
    Ok(ExitCode::SUCCESS)
}

fn fmt_value(unit: Unit, v: f64) -> String {
    match unit {
        Unit::Bytes if v < 0.0 => format!("-{}", Bytes((-v) as u64)),
        Unit::Bytes => Bytes(v as u64).to_string(),
        Unit::TokPerSec => format!("{v:.1} tok/s"),
    }
}

/// The comparison table, with the context it was measured in.
pub fn render_table(r: &ValidateReport) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "boyd validate: {} ({}) on {} — {}, {} threads, {} build",
        r.model.name, r.model.arch, r.device, r.host.cpu, r.host.threads, r.build.profile
    );
    let _ = writeln!(
        s,
        "bandwidth: {} best of {} runs ({}, {} threads, spread {:.1} %); memory source: {:?}\n",
        BytesPerSec(r.bandwidth.best.0),
        r.bandwidth.samples.len(),
        Bytes(r.bandwidth.bytes_per_run.0),
        r.bandwidth.threads,
        r.bandwidth.spread * 100.0,
        r.memory.source
    );
    for k in r.bandwidth_kernels.iter().skip(1) {
        let _ = writeln!(
            s,
            "           {:?}: {} best ({} per run)",
            k.method,
            BytesPerSec(k.best.0),
            Bytes(k.bytes_per_run.0)
        );
    }
    if let Some(d) = &r.memory.device {
        match (d.context_overhead, &d.context_overhead_error) {
            (Some(c), _) => {
                let _ = writeln!(s, "context overhead: {c} (measured)");
            }
            (None, Some(e)) => {
                let _ = writeln!(s, "context overhead: not measured ({e})");
            }
            (None, None) => {}
        }
        for rd in &d.readings {
            let _ = writeln!(
                s,
                "device memory {:<14} {} used, {} free of {}",
                rd.stage, rd.used, rd.free, rd.total
            );
        }
        let _ = writeln!(s);
    }
    let _ = writeln!(
        s,
        "{:<24} {:>14} {:>22} {:>9} {:>7}  note",
        "component", "predicted", "measured", "error %", "target"
    );
    for row in &r.rows {
        let measured = match row.sd {
            Some(sd) => format!("{} ± {:.1}", fmt_value(row.unit, row.measured), sd),
            None => fmt_value(row.unit, row.measured),
        };
        let predicted = if row.component == "unaccounted" {
            "—".to_string()
        } else {
            fmt_value(row.unit, row.predicted)
        };
        let err = row.error_pct.map_or("—".into(), |e| format!("{e:+.1}"));
        let target = match (row.target_pct, row.pass) {
            (Some(t), Some(true)) => format!("≤{t:.0} ok"),
            (Some(t), _) => format!("≤{t:.0} NO"),
            _ => String::new(),
        };
        let _ = writeln!(
            s,
            "{:<24} {:>14} {:>22} {:>9} {:>7}  {}",
            row.component, predicted, measured, err, target, row.note
        );
    }
    let c = &r.calibration;
    let _ = writeln!(
        s,
        "\ncalibration: decode efficiency {:.3} of {}, fixed {:.3} ms/token (fit rms {:.1} %{}); prefill efficiency {}",
        c.decode.efficiency,
        BytesPerSec(r.bandwidth.best.0),
        c.decode.fixed_s * 1e3,
        c.decode.rms_rel_residual * 100.0,
        match (c.decode.intercept_clamped, c.decode.efficiency_clamped) {
            (true, _) => ", intercept clamped to 0",
            (_, true) => ", efficiency clamped to 1: decode is bound by compute, not memory",
            _ => "",
        },
        c.prefill_efficiency.map_or("not fitted (memory-bound)".into(), |e| format!("{e:.3}")),
    );
    match &c.saved_to {
        Some(p) => {
            let _ = writeln!(
                s,
                "profile saved to {p}; `boyd size MODEL --hw this` uses it"
            );
        }
        None => {
            let _ = writeln!(s, "profile not saved (--no-save)");
        }
    }
    let _ = writeln!(
        s,
        "took {:.0} s{}",
        r.wall_s,
        r.load_average
            .map(|l| format!(" (load average {:.2} {:.2} {:.2})", l[0], l[1], l[2]))
            .unwrap_or_default()
    );
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn driver_names_find_their_presets() {
        let name = |n: &str| preset_for_gpu(n, Backend::Cuda).map(|h| h.name);
        assert_eq!(name("NVIDIA H200").as_deref(), Some("h200"));
        assert_eq!(name("NVIDIA H100 PCIe").as_deref(), Some("h100-pcie"));
        assert_eq!(name("NVIDIA H100 80GB HBM3").as_deref(), Some("h100-sxm"));
        assert_eq!(name("NVIDIA A100-SXM4-40GB").as_deref(), Some("a100-40"));
        assert_eq!(name("NVIDIA GeForce RTX 4090").as_deref(), Some("rtx-4090"));
        assert_eq!(name("Tesla T4"), None);
        assert_eq!(name("NVIDIA RTX 6000 Ada Generation"), None);
    }
}
