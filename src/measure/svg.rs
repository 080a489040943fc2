//! `report.svg`: two plots drawn by hand from a [`ValidateReport`] — no plotting crate.
//!
//! Left: memory vs context. Lines are the sizing model's terms (weights, KV cache, compute,
//! total) over context lengths; markers are what was measured (weights after load, KV at each
//! depth, the compute peak of the prefill, the peak total). Right: decode tokens/s vs depth.
//! A dashed line is the prediction before calibration, a solid line after; markers are the
//! measured means with ± 1 sd error bars.

use std::fmt::Write as _;

use super::report::ValidateReport;

const W: f64 = 1000.0;
const H: f64 = 460.0;
const PANEL_W: f64 = 400.0;
const PANEL_H: f64 = 300.0;
const TOP: f64 = 70.0;
const LEFT: [f64; 2] = [80.0, 580.0];

const C_WEIGHTS: &str = "#1f77b4";
const C_KV: &str = "#d62728";
const C_COMPUTE: &str = "#2ca02c";
const C_TOTAL: &str = "#7f7f7f";
const C_BEFORE: &str = "#ff7f0e";
const C_AFTER: &str = "#1f77b4";
const C_MEASURED: &str = "#000000";

/// A tick step of 1, 2 or 5 × 10^k giving about five ticks up to `max`.
pub fn nice_step(max: f64) -> f64 {
    if !(max.is_finite() && max > 0.0) {
        return 1.0;
    }
    let raw = max / 5.0;
    let mag = 10f64.powf(raw.log10().floor());
    let f = raw / mag;
    let m = if f <= 1.0 {
        1.0
    } else if f <= 2.0 {
        2.0
    } else if f <= 5.0 {
        5.0
    } else {
        10.0
    };
    m * mag
}

/// One panel's coordinate system.
struct Axes {
    left: f64,
    x_max: f64,
    y_max: f64,
}

impl Axes {
    fn new(left: f64, x_max: f64, y_max: f64) -> Self {
        let sx = nice_step(x_max);
        let sy = nice_step(y_max);
        Self {
            left,
            x_max: ((x_max / sx).ceil() * sx).max(sx),
            y_max: ((y_max / sy).ceil() * sy).max(sy),
        }
    }
    fn x(&self, v: f64) -> f64 {
        self.left + v / self.x_max * PANEL_W
    }
    fn y(&self, v: f64) -> f64 {
        TOP + PANEL_H - v / self.y_max * PANEL_H
    }

    fn frame(&self, s: &mut String, title: &str, xlabel: &str, ylabel: &str) {
        let (l, b) = (self.left, TOP + PANEL_H);
        let _ = writeln!(
            s,
            r#"<text x="{:.1}" y="{:.1}" font-size="15" font-weight="bold" text-anchor="middle">{}</text>"#,
            l + PANEL_W / 2.0,
            TOP - 30.0,
            esc(title)
        );
        let sx = nice_step(self.x_max);
        let mut v = 0.0;
        while v <= self.x_max + sx * 1e-9 {
            let x = self.x(v);
            let _ = writeln!(
                s,
                r##"<line x1="{x:.1}" y1="{TOP}" x2="{x:.1}" y2="{b}" stroke="#e5e5e5"/><text x="{x:.1}" y="{:.1}" font-size="11" text-anchor="middle">{}</text>"##,
                b + 16.0,
                fmt_tick(v)
            );
            v += sx;
        }
        let sy = nice_step(self.y_max);
        let mut v = 0.0;
        while v <= self.y_max + sy * 1e-9 {
            let y = self.y(v);
            let _ = writeln!(
                s,
                r##"<line x1="{l}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#e5e5e5"/><text x="{:.1}" y="{:.1}" font-size="11" text-anchor="end">{}</text>"##,
                l + PANEL_W,
                l - 6.0,
                y + 4.0,
                fmt_tick(v)
            );
            v += sy;
        }
        let _ = writeln!(
            s,
            r##"<rect x="{l}" y="{TOP}" width="{PANEL_W}" height="{PANEL_H}" fill="none" stroke="#333"/>"##
        );
        let _ = writeln!(
            s,
            r#"<text x="{:.1}" y="{:.1}" font-size="12" text-anchor="middle">{}</text>"#,
            l + PANEL_W / 2.0,
            b + 36.0,
            esc(xlabel)
        );
        let _ = writeln!(
            s,
            r#"<text transform="translate({:.1},{:.1}) rotate(-90)" font-size="12" text-anchor="middle">{}</text>"#,
            l - 52.0,
            TOP + PANEL_H / 2.0,
            esc(ylabel)
        );
    }

    fn polyline(&self, s: &mut String, pts: &[(f64, f64)], color: &str, dashed: bool) {
        let d: Vec<String> = pts
            .iter()
            .filter(|(x, y)| x.is_finite() && y.is_finite())
            .map(|&(x, y)| format!("{:.1},{:.1}", self.x(x), self.y(y)))
            .collect();
        let dash = if dashed {
            r#" stroke-dasharray="6,4""#
        } else {
            ""
        };
        let _ = writeln!(
            s,
            r#"<polyline points="{}" fill="none" stroke="{color}" stroke-width="2"{dash}/>"#,
            d.join(" ")
        );
    }

    fn marker(&self, s: &mut String, x: f64, y: f64, color: &str) {
        if x.is_finite() && y.is_finite() {
            let _ = writeln!(
                s,
                r##"<circle cx="{:.1}" cy="{:.1}" r="4.5" fill="{color}" stroke="#000" stroke-width="1"/>"##,
                self.x(x),
                self.y(y)
            );
        }
    }

    fn error_bar(&self, s: &mut String, x: f64, y: f64, sd: f64) {
        if !(sd.is_finite() && sd > 0.0) {
            return;
        }
        let (cx, y0, y1) = (self.x(x), self.y((y - sd).max(0.0)), self.y(y + sd));
        let _ = writeln!(
            s,
            r#"<path d="M{:.1},{y0:.1}H{:.1}M{cx:.1},{y0:.1}V{y1:.1}M{:.1},{y1:.1}H{:.1}" stroke="{C_MEASURED}" stroke-width="1.5"/>"#,
            cx - 5.0,
            cx + 5.0,
            cx - 5.0,
            cx + 5.0
        );
    }
}

fn legend(s: &mut String, x: f64, y: f64, items: &[(&str, &str, &str)]) {
    for (i, (label, color, kind)) in items.iter().enumerate() {
        let yy = y + i as f64 * 16.0;
        match *kind {
            "dot" => {
                let _ = writeln!(
                    s,
                    r##"<circle cx="{:.1}" cy="{:.1}" r="4.5" fill="{color}" stroke="#000"/>"##,
                    x + 10.0,
                    yy - 4.0
                );
            }
            "dash" => {
                let _ = writeln!(
                    s,
                    r#"<line x1="{x:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="{color}" stroke-width="2" stroke-dasharray="6,4"/>"#,
                    yy - 4.0,
                    x + 20.0,
                    yy - 4.0
                );
            }
            _ => {
                let _ = writeln!(
                    s,
                    r#"<line x1="{x:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="{color}" stroke-width="2"/>"#,
                    yy - 4.0,
                    x + 20.0,
                    yy - 4.0
                );
            }
        }
        let _ = writeln!(
            s,
            r#"<text x="{:.1}" y="{yy:.1}" font-size="11">{}</text>"#,
            x + 26.0,
            esc(label)
        );
    }
}

fn fmt_tick(v: f64) -> String {
    if v == v.trunc() {
        format!("{v:.0}")
    } else {
        format!("{v}")
    }
}

fn esc(t: &str) -> String {
    t.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

const MIB: f64 = 1024.0 * 1024.0;

/// Render the report's two plots as one SVG document.
pub fn render(r: &ValidateReport) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" font-family="sans-serif">"#
    );
    let _ = writeln!(s, r#"<rect width="{W}" height="{H}" fill="white"/>"#);
    let _ = writeln!(
        s,
        r##"<text x="{:.1}" y="20" font-size="13" text-anchor="middle" fill="#444">{}</text>"##,
        W / 2.0,
        esc(&format!(
            "boyd validate: {} on {} ({}), bandwidth {:.1} GB/s",
            r.model.name,
            r.device,
            r.host.cpu,
            r.bandwidth.best.0 / 1e9
        ))
    );

    // Memory vs context.
    let m = &r.memory;
    let curve = &r.memory_curve;
    let x_max = curve.last().map_or(1.0, |p| p.ctx as f64);
    let mut y_max = curve
        .iter()
        .map(|p| p.total.0 as f64 / MIB)
        .fold(0.0, f64::max);
    if let Some(t) = m.total_measured {
        y_max = y_max.max(t.0 as f64 / MIB);
    }
    let a = Axes::new(LEFT[0], x_max, y_max * 1.05);
    a.frame(&mut s, "Memory vs context", "context (tokens)", "MiB");
    let line = |f: &dyn Fn(&super::report::MemoryCurvePoint) -> u64| -> Vec<(f64, f64)> {
        curve
            .iter()
            .map(|p| (p.ctx as f64, f(p) as f64 / MIB))
            .collect()
    };
    a.polyline(&mut s, &line(&|p| p.weights.0), C_WEIGHTS, false);
    a.polyline(&mut s, &line(&|p| p.kv.0), C_KV, false);
    a.polyline(&mut s, &line(&|p| p.compute.0), C_COMPUTE, false);
    a.polyline(&mut s, &line(&|p| p.total.0), C_TOTAL, false);
    if let Some(w) = m.weights.measured {
        a.marker(&mut s, 0.0, w.0 as f64 / MIB, C_WEIGHTS);
    }
    for k in &m.kv {
        if let Some(b) = k.measured {
            a.marker(&mut s, k.depth as f64, b.0 as f64 / MIB, C_KV);
        }
    }
    if let Some(c) = m.compute.measured {
        a.marker(&mut s, m.compute.tokens as f64, c.0 as f64 / MIB, C_COMPUTE);
    }
    if let Some(t) = m.total_measured {
        a.marker(&mut s, m.total_ctx as f64, t.0 as f64 / MIB, C_TOTAL);
    }
    legend(
        &mut s,
        LEFT[0] + 10.0,
        TOP + PANEL_H + 62.0,
        &[
            (
                "weights (line: predicted, dot: measured)",
                C_WEIGHTS,
                "line",
            ),
            ("KV cache", C_KV, "line"),
        ],
    );
    legend(
        &mut s,
        LEFT[0] + 260.0,
        TOP + PANEL_H + 62.0,
        &[
            ("compute peak", C_COMPUTE, "line"),
            ("total (dot: peak RSS)", C_TOTAL, "line"),
        ],
    );

    // Decode tok/s vs depth.
    let dc = &r.decode_curve;
    let x_max = dc.last().map_or(1.0, |p| p.depth as f64).max(1.0);
    let y_max = dc
        .iter()
        .flat_map(|p| [p.predicted_before, p.predicted_after])
        .chain(r.decode.iter().map(|d| d.measured + d.sd))
        .filter(|v| v.is_finite())
        .fold(0.0, f64::max);
    let b = Axes::new(LEFT[1], x_max, y_max * 1.1);
    b.frame(
        &mut s,
        "Decode speed vs depth",
        "depth (tokens in cache)",
        "tokens/s",
    );
    let pts = |f: &dyn Fn(&super::report::DecodeCurvePoint) -> f64| -> Vec<(f64, f64)> {
        dc.iter().map(|p| (p.depth as f64, f(p))).collect()
    };
    b.polyline(&mut s, &pts(&|p| p.predicted_before), C_BEFORE, true);
    b.polyline(&mut s, &pts(&|p| p.predicted_after), C_AFTER, false);
    for d in &r.decode {
        b.error_bar(&mut s, d.depth as f64, d.measured, d.sd);
        b.marker(&mut s, d.depth as f64, d.measured, C_MEASURED);
    }
    legend(
        &mut s,
        LEFT[1] + 10.0,
        TOP + PANEL_H + 62.0,
        &[
            ("predicted before calibration", C_BEFORE, "dash"),
            ("predicted after calibration", C_AFTER, "line"),
        ],
    );
    legend(
        &mut s,
        LEFT[1] + 230.0,
        TOP + PANEL_H + 62.0,
        &[("measured (mean ± sd)", C_MEASURED, "dot")],
    );
    s.push_str("</svg>\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nice_steps() {
        assert_eq!(nice_step(100.0), 20.0);
        assert_eq!(nice_step(2048.0), 500.0);
        assert_eq!(nice_step(7.0), 2.0);
        assert_eq!(nice_step(0.0), 1.0);
    }
}
