//! `boyd size --check-published`: the check of the speed and memory model against the public
//! record ([`crate::sizing::published`]) rendered as tables.

use std::fmt::Write as _;

use crate::sizing::published::{Check, ErrorSummary, Test};

/// The check as a table: every row, then the summaries.
pub fn render_check(c: &Check) -> String {
    let mut s = String::new();
    let sm = &c.summary;
    let _ = writeln!(
        s,
        "published rows: {} speed ({} kept out as outliers) from {} sources, {} memory",
        sm.speed_rows, sm.outliers, sm.sources, sm.memory_rows
    );
    for (class, tests) in &sm.per_class {
        let parts: Vec<String> = tests.iter().map(|(t, n)| format!("{n} {t}")).collect();
        let _ = writeln!(s, "  {class:<18} {}", parts.join(", "));
    }
    let _ = writeln!(
        s,
        "  devices: {}; models: {}; quants: {}",
        sm.devices.join(", "),
        sm.models.join(", "),
        sm.quants.join(", ")
    );
    let _ = writeln!(s);
    let _ = writeln!(
        s,
        "{:<10} {:<12} {:<7} {:<7} {:>8} {:>10} {:>10} {:>10} {:>8}",
        "device", "model", "quant", "test", "tokens", "published", "fit", "held-out", "error"
    );
    for r in &c.rows {
        let test = match r.row.test {
            Test::Tg => "tg",
            Test::Pp => "pp",
        };
        let _ = writeln!(
            s,
            "{:<10} {:<12} {:<7} {:<7} {:>8} {:>10.2} {:>10.2} {:>10.2} {:>+7.1}%{}",
            r.row.device,
            r.row.model,
            r.row.quant,
            test,
            r.row.n_tokens,
            r.row.tok_s,
            r.fitted,
            r.held_out,
            r.held_out_error * 100.0,
            if r.row.outlier.is_some() {
                "  (outlier: not fitted or scored)"
            } else {
                ""
            }
        );
    }
    let _ = writeln!(s);
    let _ = writeln!(
        s,
        "error, leave-one-device-out (each device predicted by a fit that never saw it):"
    );
    let line = |s: &mut String, name: &str, e: &ErrorSummary| {
        let _ = writeln!(
            s,
            "  {name:<22} {:>4} rows  median |error| {:>5.1}%  worst {:>5.1}%  mean {:>+6.1}%",
            e.rows,
            e.median_abs * 100.0,
            e.worst_abs * 100.0,
            e.mean * 100.0
        );
    };
    for (name, e) in &c.errors {
        line(&mut s, name, e);
    }
    for (class, e) in &c.decode_by_class {
        line(&mut s, &format!("tg {class}"), e);
    }
    let _ = writeln!(s);
    let _ = writeln!(
        s,
        "depth: decode slowdown from the shortest to the longest tg run"
    );
    for d in &c.depth {
        let _ = writeln!(
            s,
            "  {:<10} {:<12} {:<7} tg{}->tg{}  published {:>5.1}%  predicted {:>5.1}%  ({:+.1} points)",
            d.device,
            d.model,
            d.quant,
            d.from_tokens,
            d.to_tokens,
            d.published * 100.0,
            d.predicted * 100.0,
            (d.predicted - d.published) * 100.0
        );
    }
    let within = c
        .depth
        .iter()
        .filter(|d| (d.predicted - d.published).abs() <= 0.10)
        .count();
    let worst = c
        .depth
        .iter()
        .map(|d| (d.predicted - d.published).abs())
        .fold(0.0, f64::max);
    let _ = writeln!(
        s,
        "  {within} of {} sweeps within 10 points; worst {:.1} points",
        c.depth.len(),
        worst * 100.0
    );
    let _ = writeln!(s);
    let _ = writeln!(s, "memory: boyd's terms against llama.cpp's load reports");
    for m in &c.memory {
        let _ = writeln!(
            s,
            "  {:<10} {:<26} {:<21} published {:>9.2}  boyd {:>9.2} {:<9} {:>+6.1}%",
            m.device,
            m.what,
            m.term,
            m.published,
            m.predicted,
            m.unit,
            m.error * 100.0
        );
    }
    let _ = writeln!(s);
    render_offload(&mut s, c);
    let _ = writeln!(s);
    let _ = writeln!(
        s,
        "fitted terms (the presets' defaults; decode seconds per token = max(memory side: bytes \
         terms, unpacking side: quantized weights) + the other terms; prefill = their sum):"
    );
    const DECODE: [&str; crate::sizing::throughput::DECODE_TERMS] = [
        "bytes/BW",
        "bytes/matrix",
        "quantized weights/matrix",
        "bytes x 1e-12",
        "1 (fixed s)",
        "layers (s)",
        "attention FLOPs/matrix",
        "attention FLOPs x 1e-15",
        "attention K/V reads/BW",
    ];
    const PREFILL: [&str; 4] = [
        "matmul FLOPs/matrix",
        "attention FLOPs/matrix",
        "matmul FLOPs x 1e-15",
        "attention FLOPs x 1e-15",
    ];
    for f in &c.fits {
        let terms = |names: &[&str], coef: &[f64]| {
            names
                .iter()
                .zip(coef)
                .map(|(n, c)| format!("{c:.4e} {n}"))
                .collect::<Vec<_>>()
                .join(" + ")
        };
        let _ = writeln!(
            s,
            "  {} decode  ({} rows): {}",
            f.backend.name(),
            f.decode_rows,
            terms(&DECODE, &f.decode)
        );
        let _ = writeln!(
            s,
            "  {} prefill ({} rows): {}",
            f.backend.name(),
            f.prefill_rows,
            terms(&PREFILL, &f.prefill)
        );
    }
    s
}

/// The published `-ngl` runs against the split's prediction.
fn render_offload(s: &mut String, c: &Check) {
    let _ = writeln!(
        s,
        "partial offload: published llama.cpp -ngl runs against the split (GPU: the preset's \
         fitted terms; host: the CPU's hand-set terms at the stated RAM bandwidth)"
    );
    let _ = writeln!(
        s,
        "  {:<12} {:<12} {:<7} {:>4} {:>10} {:>9} {:>10} {:>8} {:>8} {:>9}",
        "device",
        "model",
        "quant",
        "ngl",
        "GPU layers",
        "host GB/s",
        "published",
        "boyd",
        "error",
        "GPU MB"
    );
    for o in &c.offload {
        let layers = format!(
            "{}/{}{}",
            o.gpu_layers,
            o.layers,
            if o.output_on_gpu { "+out" } else { "" }
        );
        let mb = o
            .row
            .gpu_used_mb
            .map_or_else(String::new, |p| format!(" (published {p:.0})"));
        let _ = writeln!(
            s,
            "  {:<12} {:<12} {:<7} {:>4} {:>10} {:>9.1} {:>10.2} {:>8.2} {:>+7.1}% {:>9.0}{mb}",
            o.row.device,
            o.row.model,
            o.row.quant,
            o.row.ngl,
            layers,
            o.row.host_bw_gbs,
            o.row.tok_s,
            o.predicted,
            o.error * 100.0,
            o.gpu_mb
        );
    }
    if let Some(e) = &c.offload_error {
        let _ = writeln!(
            s,
            "  {} rows  median |error| {:.1}%  worst {:.1}%  mean {:+.1}%",
            e.rows,
            e.median_abs * 100.0,
            e.worst_abs * 100.0,
            e.mean * 100.0
        );
    }
    let mut sources: Vec<&str> = c.offload.iter().map(|o| o.row.source.as_str()).collect();
    sources.dedup();
    for src in sources {
        let _ = writeln!(s, "  source: {src}");
    }
}
