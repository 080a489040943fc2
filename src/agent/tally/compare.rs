//! Two figures the task names compared: their difference, their ratio, which is larger, read
//! off the tool outputs' lines with their units.

use super::*;

/// Words that, with "than", ask how two figures compare.
pub(super) const COMPARE_WORDS: &[&str] = &[
    "more", "less", "fewer", "faster", "slower", "larger", "bigger", "smaller", "higher", "lower",
];

/// Whether `task` asks how two figures compare: "how many times", a ratio, a difference, or
/// "more … than".
pub fn asks_to_compare(task: &str) -> bool {
    asks_ratio(task) || asks_difference(task)
}

/// Whether `task` asks by how much one figure differs from another: "difference", "by how
/// much", "exceed", "how much more/less/faster … than".
pub(super) fn asks_difference(task: &str) -> bool {
    let w = words(task);
    let has = |x: &str| w.iter().any(|v| v == x);
    !asks_ratio(task)
        && (has("difference")
            || has("exceed")
            || has("exceeds")
            || has("gap")
            || w.windows(3)
                .any(|p| p[0] == "by" && p[1] == "how" && (p[2] == "much" || p[2] == "many"))
            || (has("than") && COMPARE_WORDS.iter().any(|c| has(c))))
}

/// The answer to "by how much does A's memory bandwidth exceed B's?": the difference of the
/// two figures the tools showed, when they share a unit. Shown both presets' figures, the 0.5B
/// model answered with one of them.
pub fn difference_answer(task: &str, steps: &[Step]) -> Option<String> {
    if !asks_difference(task) {
        return None;
    }
    let (label, a, b) = compared(task, steps)?;
    // Both subjects named by the task ("h100-sxm", "eval.meta"): otherwise which two of the
    // figures shown are meant is a guess.
    let lower = task.to_lowercase();
    let named = |s: &str| {
        let s = s.to_lowercase();
        let stem = s.rsplit('/').next().unwrap_or(&s);
        let stem = stem.split('.').next().unwrap_or(stem);
        lower.contains(&s) || (stem.len() >= 3 && lower.contains(stem))
    };
    if a.2 != b.2 || !named(&a.0) || !named(&b.0) {
        return None;
    }
    let d = a.3.max(b.3);
    let (more, less) = if a.1 >= b.1 { (&a, &b) } else { (&b, &a) };
    Some(format!(
        "{:.*}{} ({} has {:.*}{} of {label}, {} has {:.*}{}).",
        d,
        more.1 - less.1,
        with_unit(&a.2),
        more.0,
        more.3,
        more.1,
        with_unit(&more.2),
        less.0,
        less.3,
        less.1,
        with_unit(&less.2)
    ))
}

/// What a call was about, as the task would name it: its `preset`, `model` or `path`
/// argument, or its first string argument.
pub(super) fn subject(step: &Step) -> Option<String> {
    let Some(Action::ToolCall { args, .. }) = &step.action else {
        return None;
    };
    ["preset", "model", "path"]
        .iter()
        .find_map(|k| args.get(*k).and_then(|v| v.as_str()))
        .or_else(|| {
            args.as_object()
                .and_then(|m| m.values().find_map(|v| v.as_str()))
        })
        .map(str::to_string)
}

/// A labelled figure of a tool output line: "memory bandwidth: 4800 GB/s" → ("memory
/// bandwidth", 4800, "GB/s", 0 decimals).
pub(super) fn figure(line: &str) -> Option<(String, f64, String, usize)> {
    // A two-column Markdown table row: "| p99 latency (ms) | 212 |".
    let cells: Vec<&str> = line
        .trim()
        .strip_prefix('|')
        .and_then(|r| r.strip_suffix('|'))
        .map(|r| r.split('|').map(str::trim).collect())
        .unwrap_or_default();
    let (label, value) = match cells.as_slice() {
        [label, value] => (*label, *value),
        _ => line.split_once([':', '='])?,
    };
    let label = label.trim();
    if label.is_empty() || label.split_whitespace().count() > 5 {
        return None;
    }
    let value = value.trim_start();
    let num: String = value
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.')
        .collect();
    let (v, d) = number(&num)?;
    let unit: String = value[num.len()..]
        .trim_start()
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '/' || *c == '%')
        .collect();
    Some((label.to_string(), v, unit, d))
}

/// One subject's figure: the subject (a preset, a path), its value, unit and decimals.
pub(super) type Figure = (String, f64, String, usize);

/// The label the task names and the two subjects' figures under it, in the order the task
/// names the subjects, when the task asks for a ratio or a difference and two tool calls (two
/// hardware presets, two files) showed a figure under that label.
pub(super) fn compared(task: &str, steps: &[Step]) -> Option<(String, Figure, Figure)> {
    if !asks_to_compare(task) {
        return None;
    }
    let (label, values) = asked_figures(task, steps, 2)?;
    let lower = task.to_lowercase();
    let mut ordered: Vec<&Figure> = values.iter().collect();
    ordered.sort_by_key(|(s, ..)| lower.find(&s.to_lowercase()).unwrap_or(usize::MAX));
    Some((label, ordered[0].clone(), ordered[1].clone()))
}

/// The label of the tool outputs' `label: value` lines that shares most words with the task
/// (the first read on a tie) and its figures, one per subject (a preset, a file) in reading
/// order; only labels at least `min` subjects showed.
pub(super) fn asked_figures(
    task: &str,
    steps: &[Step],
    min: usize,
) -> Option<(String, Vec<Figure>)> {
    let keys = keywords(task);
    // label → one figure per subject, in reading order.
    let mut by_label: Vec<(String, Vec<Figure>)> = Vec::new();
    for step in steps.iter().filter(|s| usable(s)) {
        let Some(step_subject) = subject(step) else {
            continue;
        };
        for raw in step.observation.text.lines() {
            // A search hit is about the file it is in, not the folder searched.
            let (subj, line) = match search_hit(raw) {
                Some((path, rest)) => (path.to_string(), rest),
                None => (step_subject.clone(), content(raw).unwrap_or(raw)),
            };
            let Some((label, v, unit, d)) = figure(line) else {
                continue;
            };
            let idx = match by_label.iter().position(|(l, _)| *l == label) {
                Some(i) => i,
                None => {
                    by_label.push((label, Vec::new()));
                    by_label.len() - 1
                }
            };
            let values = &mut by_label[idx].1;
            if !values.iter().any(|(s, ..)| *s == subj) {
                values.push((subj.clone(), v, unit, d));
            }
        }
    }
    let score = |label: &str| {
        words(label)
            .iter()
            .filter(|w| {
                keys.iter()
                    .any(|k| k == *w || (stem(k).len() >= 4 && stem(k) == stem(w)))
            })
            .count()
    };
    // The label sharing most words with the task; the first read on a tie.
    let mut best: Option<(usize, &(String, Vec<Figure>))> = None;
    for entry in by_label.iter().filter(|(_, v)| v.len() >= min) {
        let n = score(&entry.0);
        if n > 0 && best.is_none_or(|(m, _)| n > m) {
            best = Some((n, entry));
        }
    }
    let (_, (label, values)) = best?;
    Some((label.clone(), values.clone()))
}

pub(super) fn with_unit(u: &str) -> String {
    if u.is_empty() {
        String::new()
    } else {
        format!(" {u}")
    }
}

/// Whether the task asks for a ratio ("how many times more", "ratio"); "replicas times
/// memory_mb" is a product, not a ratio.
pub(super) fn asks_ratio(task: &str) -> bool {
    let w = words(task);
    w.iter().any(|x| x == "ratio")
        || w.windows(3)
            .any(|p| p[0] == "how" && p[1] == "many" && p[2] == "times")
        || w.windows(2)
            .any(|p| p[0] == "times" && (p[1] == "as" || COMPARE_WORDS.contains(&p[1].as_str())))
}

/// How two subjects' figures compare (see `compared`), for the answer step: "Compared: memory
/// bandwidth is 4800 GB/s for h200 and 1008 GB/s for rtx-4090; the difference is 3792 GB/s."
/// Only the figure asked for is given: shown both, a small model answered "how many times" with
/// the difference.
pub fn comparisons(task: &str, steps: &[Step]) -> Vec<String> {
    let Some((label, a, b)) = compared(task, steps) else {
        return Vec::new();
    };
    let mut out = format!(
        "Compared: {label} is {:.*}{} for {} and {:.*}{} for {}",
        a.3,
        a.1,
        with_unit(&a.2),
        a.0,
        b.3,
        b.1,
        with_unit(&b.2),
        b.0
    );
    if asks_ratio(task) {
        if b.1 != 0.0 {
            out.push_str(&format!(
                "; {} has {:.2} times the {label} of {}",
                a.0,
                a.1 / b.1,
                b.0
            ));
        }
    } else if a.2 == b.2 {
        out.push_str(&format!(
            "; the difference is {:.*}{}",
            a.3.max(b.3),
            (a.1 - b.1).abs(),
            with_unit(&a.2)
        ));
    }
    out.push('.');
    vec![out]
}

/// The answer to "how many times more … does A have than B": the ratio of the two figures
/// the tools showed, to two decimals (one when the task asks for one decimal). Shown the
/// ratio, a 0.5B model still answered "1.4"; a calculator would not, and this is one division.
pub fn ratio_answer(task: &str, steps: &[Step]) -> Option<String> {
    if !asks_ratio(task) {
        return None;
    }
    let (label, a, b) = compared(task, steps)?;
    if b.1 == 0.0 {
        return None;
    }
    let lower = task.to_lowercase();
    let places = if lower.contains("one decimal") || lower.contains("1 decimal") {
        1
    } else {
        2
    };
    Some(format!(
        "{} has {:.*} times the {label} of {} ({:.*}{} against {:.*}{}).",
        a.0,
        places,
        a.1 / b.1,
        b.0,
        a.3,
        a.1,
        with_unit(&a.2),
        b.3,
        b.1,
        with_unit(&b.2)
    ))
}
