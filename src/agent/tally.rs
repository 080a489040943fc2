//! Totals the answer step is shown: the sum of a CSV column the task names, or of one key's
//! values across the files read, when the task asks for a total.
//!
//! A 0.5B planner reads the right files and then answers a sum with one of its terms ("what is
//! the sum of the amount column" → "162.00"), and asked to write the arithmetic it writes
//! `1182 + 12 + … - 5 * widget`. A spreadsheet sums a column without a model; so does this,
//! over what the tools showed, and the answer step is told the sum and what it covers.

use std::collections::BTreeMap;

use super::outputs::usable;
use super::types::{Action, ObservationKind, Step};
use super::words::{asks_count, keywords, quantities, quoted_phrases, stem, words};

/// Words that ask for a total.
const TOTAL_WORDS: &[&str] = &[
    "sum",
    "total",
    "totals",
    "combined",
    "altogether",
    "together",
    "add",
];

/// Whether `task` asks for a total.
pub fn asks_for_total(task: &str) -> bool {
    words(task)
        .iter()
        .any(|w| TOTAL_WORDS.contains(&w.as_str()))
}

/// One total: what was summed, over which sources, and the sum.
#[derive(Debug, Clone, PartialEq)]
pub struct Total {
    /// The column or key summed.
    pub name: String,
    /// The files (or tool calls) the values came from, in the order read.
    pub sources: Vec<String>,
    /// How many values.
    pub count: usize,
    /// Their sum.
    pub sum: f64,
    /// Decimals to show (the most any value was written with).
    pub decimals: usize,
}

impl Total {
    /// "the amount column of payments.csv (4 values): 1287.50".
    pub fn describe(&self) -> String {
        format!(
            "The sum of {} over {} ({} values) is {:.*}.",
            self.name,
            self.sources.join(", "),
            self.count,
            self.decimals,
            self.sum
        )
    }
}

/// Whether a task keyword names `field` (a CSV header or a `key = value` key): one of the
/// field's words equals a keyword or shares its stem.
fn named(field: &str, keys: &[String]) -> bool {
    words(field).iter().any(|w| {
        keys.iter()
            .any(|k| k == w || (stem(k).len() >= 4 && stem(k) == stem(w)))
    })
}

/// A number as written (`1,284` is not one: a CSV field never holds a thousands comma), and
/// its decimals.
fn number(text: &str) -> Option<(f64, usize)> {
    let t = text.trim().trim_matches('"');
    let v: f64 = t.parse().ok()?;
    v.is_finite()
        .then(|| (v, t.split_once('.').map_or(0, |(_, d)| d.len())))
}

/// The content of a `read_file` output line ("12: text" → "text"); `None` for other lines.
pub fn content(line: &str) -> Option<&str> {
    let (n, rest) = line.split_once(": ")?;
    let n = n.trim();
    (!n.is_empty() && n.chars().all(|c| c.is_ascii_digit())).then_some(rest)
}

/// A `search_text` match line's file and content ("regions/east.ini:3: servers = 19" →
/// ("regions/east.ini", "servers = 19")); `None` for other lines.
pub fn search_hit(line: &str) -> Option<(&str, &str)> {
    let (head, rest) = line.split_once(": ")?;
    let (path, n) = head.rsplit_once(':')?;
    (!path.is_empty()
        && !path.contains(char::is_whitespace)
        && !n.is_empty()
        && n.chars().all(|c| c.is_ascii_digit()))
    .then_some((path, rest))
}

fn source(step: &Step) -> String {
    match &step.action {
        Some(Action::ToolCall { name, args }) => args
            .get("path")
            .and_then(|p| p.as_str())
            .map_or_else(|| name.clone(), str::to_string),
        _ => String::new(),
    }
}

/// The totals `task` asks for, from the steps' outputs: a CSV column the task names (its
/// numeric rows), or a `key = value` / `key: value` key the task names, summed across the
/// distinct files it appears in. Empty unless the task asks for a total.
pub fn totals(task: &str, steps: &[Step]) -> Vec<Total> {
    if !asks_for_total(task) {
        return Vec::new();
    }
    let keys = keywords(task);
    let mut out: Vec<Total> = Vec::new();
    // key → (source → (value, decimals)), first value per source.
    let mut by_key: BTreeMap<String, Vec<(String, f64, usize)>> = BTreeMap::new();
    let mut seen_csv: Vec<(String, String)> = Vec::new();
    for step in steps.iter().filter(|s| usable(s)) {
        let src = source(step);
        let lines: Vec<&str> = step.observation.text.lines().filter_map(content).collect();
        // A CSV table: a first line with commas and rows with as many fields.
        if let Some(header) = lines.first().filter(|h| h.contains(',')) {
            let fields: Vec<&str> = header.split(',').map(str::trim).collect();
            for (col, name) in fields.iter().enumerate() {
                if !named(name, &keys) || seen_csv.contains(&(src.clone(), name.to_string())) {
                    continue;
                }
                let mut count = 0;
                let mut sum = 0.0;
                let mut decimals = 0;
                for row in &lines[1..] {
                    let cells: Vec<&str> = row.split(',').collect();
                    if cells.len() != fields.len() {
                        continue;
                    }
                    if let Some((v, d)) = number(cells[col]) {
                        count += 1;
                        sum += v;
                        decimals = decimals.max(d);
                    }
                }
                if count >= 2 {
                    seen_csv.push((src.clone(), name.to_string()));
                    out.push(Total {
                        name: format!("the {name} column"),
                        sources: vec![src.clone()],
                        count,
                        sum,
                        decimals,
                    });
                }
            }
            continue;
        }
        // Lines of a read file, or a search's matches, each from the file it names.
        let keyed = step
            .observation
            .text
            .lines()
            .filter_map(|l| match content(l) {
                Some(c) => Some((src.clone(), c)),
                None => search_hit(l).map(|(p, c)| (p.to_string(), c)),
            });
        for (src, line) in keyed {
            let Some((key, value)) = line.split_once(['=', ':']) else {
                continue;
            };
            let key = key.trim();
            if key.is_empty() || key.split_whitespace().count() > 3 {
                continue;
            }
            let Some((v, d)) = number(value) else {
                continue;
            };
            if !named(key, &keys) {
                continue;
            }
            let entry = by_key.entry(key.to_string()).or_default();
            if !entry.iter().any(|(s, _, _)| *s == src) {
                entry.push((src.clone(), v, d));
            }
        }
    }
    for (key, values) in by_key {
        if values.len() < 2 {
            continue;
        }
        out.push(Total {
            name: key,
            sources: values.iter().map(|(s, _, _)| s.clone()).collect(),
            count: values.len(),
            sum: values.iter().map(|(_, v, _)| v).sum(),
            decimals: values.iter().map(|(_, _, d)| *d).max().unwrap_or(0),
        });
    }
    out
}

/// Column names that hold "how many" of a row's thing.
const COUNT_COLUMNS: &[&str] = &[
    "qty", "quantity", "count", "stock", "units", "number", "amount",
];

/// The answer to "how many units of 'hex bolt M8' are in inventory.csv": the cell of the row
/// whose cell is the quoted phrase, in the column the task names (or, for "how many", the one
/// quantity column). Shown the row as `name=hex bolt M8, qty=845, unit_price=0.11`, a 0.5B
/// model answered "11".
pub fn csv_cell_answer(task: &str, steps: &[Step]) -> Option<String> {
    let phrases = quoted_phrases(task);
    let [phrase] = phrases.as_slice() else {
        return None;
    };
    let keys = keywords(task);
    let how_many = asks_count(task);
    for step in steps.iter().filter(|s| usable(s)) {
        let lines: Vec<&str> = step.observation.text.lines().filter_map(content).collect();
        let Some(header) = lines.first().filter(|h| h.contains(',')) else {
            continue;
        };
        let fields: Vec<&str> = header.split(',').map(str::trim).collect();
        for row in &lines[1..] {
            let cells: Vec<&str> = row.split(',').map(str::trim).collect();
            if cells.len() != fields.len() {
                continue;
            }
            let Some(key_col) = cells.iter().position(|c| c.eq_ignore_ascii_case(phrase)) else {
                continue;
            };
            let numeric = |i: &usize| *i != key_col && number(cells[*i]).is_some();
            let named_cols: Vec<usize> = (0..fields.len())
                .filter(numeric)
                .filter(|i| named(fields[*i], &keys))
                .collect();
            let counts: Vec<usize> = (0..fields.len())
                .filter(numeric)
                .filter(|i| COUNT_COLUMNS.contains(&fields[*i].to_lowercase().as_str()))
                .collect();
            // "How many" asks for the quantity column even when another column shares a word
            // with the task ("units" and "unit_price").
            let col = match (counts.as_slice(), named_cols.as_slice()) {
                ([one], _) if how_many => *one,
                (_, [one]) => *one,
                _ => return None,
            };
            return Some(format!(
                "{} ({} of {} in {})",
                cells[col],
                fields[col],
                cells[key_col],
                source(step)
            ));
        }
    }
    None
}

/// "replicas × memory_mb in deploy/ingest.yaml: 6 × 1536 = 9216" for each file read that holds
/// both keys the task multiplies ("replicas times memory_mb", "replicas * memory_mb").
pub fn products(task: &str, steps: &[Step]) -> Vec<String> {
    let Ok(re) = regex::Regex::new(
        r"([A-Za-z_][A-Za-z0-9_]*)\s+(?:times|\*|x|×)\s+([A-Za-z_][A-Za-z0-9_]*)",
    ) else {
        return Vec::new();
    };
    let Some(c) = re.captures(task) else {
        return Vec::new();
    };
    let (a, b) = (&c[1], &c[2]);
    let mut out = Vec::new();
    for step in steps.iter().filter(|s| usable(s)) {
        let value = |key: &str| {
            step.observation.text.lines().find_map(|l| {
                let line = content(l).unwrap_or(l);
                let (k, v) = line.split_once(['=', ':'])?;
                (k.trim().trim_matches('"') == key)
                    .then(|| number(v.trim().trim_end_matches(',')))?
            })
        };
        if let (Some((x, dx)), Some((y, dy))) = (value(a), value(b)) {
            let line = format!(
                "{a} × {b} in {}: {:.*} × {:.*} = {:.*}",
                source(step),
                dx,
                x,
                dy,
                y,
                dx + dy,
                x * y
            );
            if !out.contains(&line) {
                out.push(line);
            }
        }
    }
    out
}

/// Words that, with "than", ask how two figures compare.
const COMPARE_WORDS: &[&str] = &[
    "more", "less", "fewer", "faster", "slower", "larger", "bigger", "smaller", "higher", "lower",
];

/// Whether `task` asks how two figures compare: "how many times", a ratio, a difference, or
/// "more … than".
pub fn asks_to_compare(task: &str) -> bool {
    asks_ratio(task) || asks_difference(task)
}

/// Whether `task` asks by how much one figure differs from another: "difference", "by how
/// much", "exceed", "how much more/less/faster … than".
fn asks_difference(task: &str) -> bool {
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
fn subject(step: &Step) -> Option<String> {
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
fn figure(line: &str) -> Option<(String, f64, String, usize)> {
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
type Figure = (String, f64, String, usize);

/// The label the task names and the two subjects' figures under it, in the order the task
/// names the subjects, when the task asks for a ratio or a difference and two tool calls (two
/// hardware presets, two files) showed a figure under that label.
fn compared(task: &str, steps: &[Step]) -> Option<(String, Figure, Figure)> {
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
fn asked_figures(task: &str, steps: &[Step], min: usize) -> Option<(String, Vec<Figure>)> {
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

fn with_unit(u: &str) -> String {
    if u.is_empty() {
        String::new()
    } else {
        format!(" {u}")
    }
}

/// Whether the task asks for a ratio ("how many times more", "ratio"); "replicas times
/// memory_mb" is a product, not a ratio.
fn asks_ratio(task: &str) -> bool {
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

/// A record's `(key, value)` fields.
type Fields = Vec<(String, String)>;

/// Words asking for the record with the largest figure, and those asking for the smallest.
const LARGEST: &[&str] = &[
    "largest", "highest", "most", "biggest", "maximum", "max", "greatest",
];
const SMALLEST: &[&str] = &["smallest", "lowest", "least", "fewest", "minimum", "min"];

/// The scalar fields of some lines of one file: a one-object JSON text's top-level fields, or
/// its `key = value` / `key: value` lines (quotes dropped), in order.
fn fields_of(body: &[&str]) -> Vec<(String, String)> {
    let joined = body.join("\n");
    if let Ok(serde_json::Value::Object(map)) = serde_json::from_str::<serde_json::Value>(&joined) {
        return map
            .into_iter()
            .filter_map(|(k, v)| match v {
                serde_json::Value::String(s) => Some((k, s)),
                serde_json::Value::Number(n) => Some((k, n.to_string())),
                _ => None,
            })
            .collect();
    }
    if body.len() > 1 {
        // One JSON object per line (search hits of several lines of a file).
        let per_line: Vec<(String, String)> = body.iter().flat_map(|l| fields_of(&[l])).collect();
        if !per_line.is_empty() {
            return per_line;
        }
    }
    body.iter()
        .filter_map(|l| {
            let (k, v) = l.split_once(['=', ':'])?;
            let k = k.trim().trim_matches('"');
            (!k.is_empty() && !k.contains(' ') && !k.contains('{'))
                .then(|| (k.to_string(), v.trim().trim_matches('"').to_string()))
        })
        .collect()
}

/// The fields of each file the steps read whole (`read_file`) or matched lines of
/// (`search_text`), by path, in reading order.
fn records(steps: &[Step]) -> Vec<(String, Vec<(String, String)>)> {
    let mut out: Vec<(String, Vec<(String, String)>)> = Vec::new();
    let mut add = |path: &str, f: Vec<(String, String)>| {
        if f.is_empty() {
            return;
        }
        match out.iter_mut().find(|(p, _)| p == path) {
            Some((_, have)) => {
                for kv in f {
                    if !have.iter().any(|(k, _)| *k == kv.0) {
                        have.push(kv);
                    }
                }
            }
            None => out.push((path.to_string(), f)),
        }
    };
    for s in steps
        .iter()
        .filter(|s| s.observation.kind == ObservationKind::Output)
    {
        let Some(Action::ToolCall { name, .. }) = &s.action else {
            continue;
        };
        let text = super::outputs::whole_text(s);
        if name == "read_file" {
            let body: Vec<&str> = text.lines().filter_map(content).collect();
            add(&source(s), fields_of(&body));
        } else if name == "search_text" {
            let mut by_file: Vec<(&str, Vec<&str>)> = Vec::new();
            for (path, line) in text.lines().filter_map(search_hit) {
                match by_file.iter_mut().find(|(p, _)| *p == path) {
                    Some((_, lines)) => lines.push(line),
                    None => by_file.push((path, vec![line])),
                }
            }
            for (path, lines) in by_file {
                add(path, fields_of(&lines));
            }
        }
    }
    out
}

/// The answer to "which team in reports/ has the largest total, and what is it?": of the files
/// read that hold the figure the task names (`total`, `port`), the one with the largest (or
/// smallest) value, named by its first text field and its path. Shown three such files, the
/// 0.5B model answered with the first file's line; picking a maximum is code's work.
pub fn extreme_answer(task: &str, steps: &[Step]) -> Option<String> {
    let w = words(task);
    let has = |list: &[&str]| w.iter().any(|v| list.contains(&v.as_str()));
    // "Which has more bandwidth: A or B?" picks the larger of two as "the most" does of many.
    let which = w.first().is_some_and(|x| x == "which");
    let more = which && has(&["more", "higher", "faster", "larger", "bigger", "greater"]);
    let less = which && has(&["less", "lower", "slower", "smaller", "fewer"]);
    let largest = has(LARGEST) || more;
    if largest == (has(SMALLEST) || less) {
        return None;
    }
    if more || less {
        return extreme_figure(task, steps, largest, 2);
    }
    let records = records(steps);
    // The figure: a field the task names whose value is a number in two or more files.
    let key = w.iter().find_map(|word| {
        let holding = records
            .iter()
            .filter(|(_, f)| {
                f.iter()
                    .any(|(k, v)| k.eq_ignore_ascii_case(word) && number(v).is_some())
            })
            .count();
        (holding >= 2).then(|| word.clone())
    });
    let Some(key) = key else {
        return extreme_figure(task, steps, largest, 3);
    };
    let mut best: Option<(f64, &str, &String, &Fields)> = None;
    for (path, f) in &records {
        let Some((_, v)) = f.iter().find(|(k, _)| k.eq_ignore_ascii_case(&key)) else {
            continue;
        };
        let Some((x, _)) = number(v) else { continue };
        let better = best.is_none_or(|b| if largest { x > b.0 } else { x < b.0 });
        if better {
            best = Some((x, v.as_str(), path, f));
        }
    }
    let (_, value, path, f) = best?;
    let name = f
        .iter()
        .find(|(k, v)| !k.eq_ignore_ascii_case(&key) && number(v).is_none() && !v.is_empty());
    Some(match name {
        Some((k, n)) => format!("{n} ({k} = {n}; {key} = {value} in {path})"),
        None => format!("{path} ({key} = {value})"),
    })
}

/// The subject (a hardware preset, a model) whose figure under the label the task names is the
/// largest (or smallest) of three or more the tools showed: "which of these presets has the
/// highest matrix throughput?".
fn extreme_figure(task: &str, steps: &[Step], largest: bool, least: usize) -> Option<String> {
    let (label, values) = asked_figures(task, steps, 2)?;
    if values.len() < least {
        return None;
    }
    let best = values.iter().fold(None::<&Figure>, |b, f| match b {
        Some(b) if (largest && b.1 >= f.1) || (!largest && b.1 <= f.1) => Some(b),
        _ => Some(f),
    })?;
    Some(format!(
        "{} ({label}: {:.*}{}, the {} of {} compared)",
        best.0,
        best.3,
        best.1,
        with_unit(&best.2),
        if largest { "largest" } else { "smallest" },
        values.len()
    ))
}

/// The answer to "a workstation holds four GPUs matching the rtx-5060-ti preset; how much GPU
/// memory is that in total?": the one quantity the task states times the one figure a tool
/// showed for the subject the task names. Shown the preset's 16 GiB, the 0.5B model answered
/// 16 GiB.
pub fn multiple_answer(task: &str, steps: &[Step]) -> Option<String> {
    if !asks_for_total(task) || asks_to_compare(task) {
        return None;
    }
    let stated = quantities(task, false);
    let [n] = stated.as_slice() else {
        return None;
    };
    if *n < 2.0 || n.fract() != 0.0 {
        return None;
    }
    // A context length is not a count of cards ("Using ctx=2048, what is the total memory").
    if super::words::stated_contexts(task).contains(&(*n as u64)) {
        return None;
    }
    // Figures of the sizing tools only: "the two teams in team_a.txt and team_b.txt" counts
    // files, whose figures the totals add.
    let tool_steps: Vec<Step> = steps
        .iter()
        .filter(|s| {
            matches!(&s.action, Some(Action::ToolCall { name, .. })
                if name == "hardware" || name == "size_model")
        })
        .cloned()
        .collect();
    let (label, values) = asked_figures(task, &tool_steps, 1)?;
    let [(subj, v, unit, d)] = values.as_slice() else {
        return None;
    };
    let lower = task.to_lowercase();
    if !lower.contains(&subj.to_lowercase()) {
        return None;
    }
    // "16.00 GiB" of "memory: 17.18 GB (16.00 GiB)" when the task asks in GiB.
    let asked = steps
        .iter()
        .filter(|s| usable(s) && subject(s).as_deref() == Some(subj.as_str()))
        .flat_map(|s| s.observation.text.lines())
        .filter_map(|l| {
            let line = content(l).unwrap_or(l);
            let (l, rest) = line.split_once([':', '='])?;
            (l.trim() == label).then_some(rest)
        })
        .flat_map(amounts)
        .find(|(_, u, _)| words(task).iter().any(|w| w.eq_ignore_ascii_case(u)));
    let (v, unit, d) = asked.unwrap_or((*v, unit.clone(), *d));
    Some(format!(
        "{:.*}{} ({n} × {:.*}{} of {label} for {subj})",
        d,
        n * v,
        with_unit(&unit),
        d,
        v,
        with_unit(&unit)
    ))
}

/// Every "number unit" of a text: "17.18 GB (16.00 GiB)" → (17.18, "GB", 2), (16.0, "GiB", 2).
fn amounts(text: &str) -> Vec<(f64, String, usize)> {
    text.split(|c: char| c.is_whitespace() || c == '(' || c == ')' || c == ',')
        .collect::<Vec<_>>()
        .windows(2)
        .filter_map(|p| {
            let (v, d) = number(p[0])?;
            let unit = p[1].trim_end_matches(['.', ';']);
            (!unit.is_empty() && unit.chars().all(|c| c.is_alphabetic() || c == '/'))
                .then(|| (v, unit.to_string(), d))
        })
        .collect()
}

/// Whether the task asks for a mean ("mean", "average").
pub fn asks_mean(task: &str) -> bool {
    let w = words(task);
    w.iter().any(|x| x == "average")
        || (w.iter().any(|x| x == "mean") && !super::words::mean_is_verb(&w))
}

/// Decimals a task asks its answer rounded to: "round to one decimal", "two decimal places",
/// "to the nearest whole number".
fn asked_decimals(task: &str) -> Option<usize> {
    let w = words(task);
    if w.windows(2).any(|p| p[0] == "whole" && p[1] == "number")
        || w.windows(2).any(|p| p[0] == "nearest" && p[1] == "integer")
    {
        return Some(0);
    }
    let at = w.iter().position(|x| x == "decimal" || x == "decimals")?;
    let n = w.get(at.checked_sub(1)?)?;
    ["zero", "one", "two", "three", "four"]
        .iter()
        .position(|x| x == n)
        .or_else(|| n.parse().ok())
}

/// The answer to "what is the mean p99 latency across the three runs?": the mean of the figure
/// under the label the task names, over every file (or preset) that showed one. Shown three
/// tables, the 0.5B model answered with the first one's p50.
pub fn mean_answer(task: &str, steps: &[Step]) -> Option<String> {
    if !asks_mean(task) {
        return None;
    }
    let (label, values) = asked_figures(task, steps, 2)?;
    if values.iter().any(|v| v.2 != values[0].2) {
        return None;
    }
    let mean = values.iter().map(|v| v.1).sum::<f64>() / values.len() as f64;
    let d =
        asked_decimals(task).unwrap_or_else(|| values.iter().map(|v| v.3).max().unwrap_or(0) + 1);
    let each: Vec<String> = values
        .iter()
        .map(|(s, v, _, dv)| format!("{s}: {v:.dv$}", dv = *dv))
        .collect();
    Some(format!(
        "{mean:.d$}{} (mean {label} of {} values: {})",
        with_unit(&values[0].2),
        values.len(),
        each.join(", ")
    ))
}

/// Words asking for the record with the largest value of a field, besides [`LARGEST`].
const LARGEST_ALSO: &[&str] = &["fullest", "busiest", "heaviest", "longest"];
/// And the smallest.
const SMALLEST_ALSO: &[&str] = &["emptiest", "lightest", "shortest"];

/// The answer to "among the hosts in fleet/hosts.json that run ubuntu-22.04, which one has the
/// fullest disk?": of the records of a file read whole (a JSON array of objects, CSV rows)
/// that hold every text value the task names, the one with the largest (or smallest) value of
/// the numeric field whose name shares most words with the task, named by its first text field
/// — with the line of another output that holds that name (its address in `network/hosts`).
pub fn record_extreme_answer(task: &str, steps: &[Step]) -> Option<String> {
    let w = words(task);
    let has = |list: &[&str]| w.iter().any(|x| list.contains(&x.as_str()));
    let largest = has(LARGEST) || has(LARGEST_ALSO);
    if largest == (has(SMALLEST) || has(SMALLEST_ALSO)) || asks_count(task) {
        return None;
    }
    let keys = keywords(task);
    let lower = format!(" {} ", w.join(" "));
    let named = |v: &str| names_value(&lower, &keys, v);
    for (step, table) in read_tables(steps) {
        if table.len() < 2 {
            continue;
        }
        // The numeric field the task names most words of ("disk" → disk_used_pct).
        let field_score = |k: &str| {
            words(&k.replace(['_', '-'], " "))
                .iter()
                .filter(|x| {
                    keys.iter()
                        .any(|t| t == *x || (stem(t).len() >= 4 && stem(t) == stem(x)))
                })
                .count()
        };
        let mut best_field: Option<(usize, &str)> = None;
        for (k, v) in table.iter().flatten() {
            let n = field_score(k);
            if number(v).is_some() && n > 0 && best_field.is_none_or(|(m, _)| n > m) {
                best_field = Some((n, k));
            }
        }
        let Some((_, field)) = best_field else {
            continue;
        };
        let mut filters: Vec<(&str, &str)> = Vec::new();
        for (k, v) in table.iter().flatten() {
            if number(v).is_none() && named(v) && !filters.contains(&(k.as_str(), v.as_str())) {
                filters.push((k, v));
            }
        }
        let holds = |rec: &Vec<(String, String)>| {
            let fields: Vec<&str> = filters.iter().map(|(k, _)| *k).collect();
            fields.iter().all(|f| {
                rec.iter()
                    .any(|(k, v)| k == f && filters.iter().any(|(fk, fv)| fk == f && fv == v))
            })
        };
        let mut best: Option<(f64, &Vec<(String, String)>)> = None;
        for rec in table.iter().filter(|r| holds(r)) {
            let Some(x) = rec
                .iter()
                .find(|(k, _)| k == field)
                .and_then(|(_, v)| number(v))
            else {
                continue;
            };
            if best.is_none_or(|(b, _)| if largest { x.0 > b } else { x.0 < b }) {
                best = Some((x.0, rec));
            }
        }
        let (_, rec) = best?;
        let (name_key, name) = rec
            .iter()
            .find(|(k, v)| number(v).is_none() && !filters.iter().any(|(fk, _)| fk == k))?;
        let value = rec
            .iter()
            .find(|(k, _)| k == field)
            .map(|(_, v)| v.as_str())?;
        let filter_text: Vec<String> = filters.iter().map(|(k, v)| format!("{k} = {v}")).collect();
        let mut out = format!(
            "{name} ({name_key} = {name}; {field} = {value}, the {} of the records in {}{})",
            if largest { "largest" } else { "smallest" },
            source(step),
            if filter_text.is_empty() {
                String::new()
            } else {
                format!(" with {}", filter_text.join(" and "))
            }
        );
        // Where another output names it: its address, its owner.
        let lname = name.to_lowercase();
        let other = steps
            .iter()
            .filter(|s| usable(s) && s.index != step.index)
            .find_map(|s| {
                s.observation.text.lines().find_map(|l| {
                    let line = content(l).unwrap_or(l).trim();
                    let lw = words(line);
                    (lw.len() > words(name).len()
                        && line
                            .to_lowercase()
                            .split(|c: char| c.is_whitespace() || c == ',' || c == ';')
                            .any(|t| t == lname))
                    .then(|| format!("{}: {line}", source(s)))
                })
            });
        if let Some(o) = other {
            out.push_str(&format!("; {o}"));
        }
        return Some(out);
    }
    None
}

/// Words that turn a filter around ("not open", "other than backend"): a count under them is
/// not the count of the records the named values select.
const NEGATIONS: &[&str] = &[
    "not",
    "except",
    "excluding",
    "other",
    "without",
    "isn't",
    "aren't",
    "non",
    "unless",
];

/// One file's records: each a list of (field, value) pairs with scalar values as text.
type Table = Vec<Vec<(String, String)>>;

/// The records of a whole file's text: the longest array of objects in a JSON document (at any
/// depth), or the rows of a CSV text under its header.
fn table_of(text: &str) -> Option<Table> {
    if let Ok(v) = serde_json::from_str::<serde_json::Value>(text) {
        fn longest(v: &serde_json::Value) -> Option<&Vec<serde_json::Value>> {
            let (own, children): (Option<&Vec<serde_json::Value>>, Vec<&serde_json::Value>) =
                match v {
                    serde_json::Value::Array(a) => (
                        (!a.is_empty() && a.iter().all(serde_json::Value::is_object)).then_some(a),
                        a.iter().collect(),
                    ),
                    serde_json::Value::Object(m) => (None, m.values().collect()),
                    _ => (None, Vec::new()),
                };
            children
                .into_iter()
                .filter_map(longest)
                .chain(own)
                .max_by_key(|a| a.len())
        }
        let rows = longest(&v)?;
        let scalar = |x: &serde_json::Value| match x {
            serde_json::Value::String(s) => Some(s.clone()),
            serde_json::Value::Number(n) => Some(n.to_string()),
            serde_json::Value::Bool(b) => Some(b.to_string()),
            _ => None,
        };
        return Some(
            rows.iter()
                .filter_map(serde_json::Value::as_object)
                .map(|m| {
                    m.iter()
                        .filter_map(|(k, v)| Some((k.clone(), scalar(v)?)))
                        .collect()
                })
                .collect(),
        );
    }
    let mut lines = text.lines().filter(|l| !l.trim().is_empty());
    let header: Vec<String> = lines
        .next()?
        .split(',')
        .map(|h| h.trim().to_string())
        .collect();
    if header.len() < 2 || header.iter().any(|h| h.is_empty() || h.contains(' ')) {
        return None;
    }
    let rows: Table = lines
        .filter_map(|l| {
            let cells: Vec<&str> = l.split(',').map(str::trim).collect();
            (cells.len() == header.len()).then(|| {
                header
                    .iter()
                    .zip(cells)
                    .map(|(h, c)| (h.clone(), c.trim_matches('"').to_string()))
                    .collect()
            })
        })
        .collect();
    (rows.len() >= 2).then_some(rows)
}

/// Whether the task (its words joined by spaces, padded with one on each side, and its
/// keywords) names the text value `v`: the value's words — three at most — in order among the
/// task's, one of them a content word ("open", not "a").
fn names_value(lower: &str, keys: &[String], v: &str) -> bool {
    let vw = words(v);
    !vw.is_empty()
        && vw.len() <= 3
        && vw.iter().any(|x| keys.contains(x))
        && lower.contains(&format!(" {} ", vw.join(" ")))
}

/// The records of every file the steps read whole ([`table_of`]), with the step that read it.
fn read_tables(steps: &[Step]) -> Vec<(&Step, Table)> {
    steps
        .iter()
        .filter(|s| usable(s))
        .filter(|s| matches!(&s.action, Some(Action::ToolCall { name, .. }) if name == "read_file"))
        .filter_map(|s| {
            let body: Vec<&str> = super::outputs::whole_text(s)
                .lines()
                .filter_map(content)
                .collect();
            Some((s, table_of(&body.join("\n"))?))
        })
        .collect()
}

/// The answer to "how many tickets in tickets.json are open and assigned to the backend
/// team?": the records of a file read whole (a JSON array of objects, CSV rows) whose fields
/// hold every value the task names — values of one field are alternatives, values of two
/// fields must both hold. Shown the file, the 0.5B model counted the lines that say "open";
/// a record has several lines, and "open" alone is not the question.
pub fn matching_records_answer(task: &str, steps: &[Step]) -> Option<String> {
    // "How many GB of its quota …" asks for a quantity, not for a number of records.
    if !asks_count(task) || super::words::asks_measure(task) {
        return None;
    }
    let w = words(task);
    if w.iter().any(|x| NEGATIONS.contains(&x.as_str())) || !quoted_phrases(task).is_empty() {
        return None;
    }
    // "How many units of …" asks for a quantity column's value, not for a number of records.
    let counted = w
        .windows(2)
        .find(|p| p[0] == "how" && p[1] == "many")
        .and_then(|_| w.iter().skip_while(|x| *x != "many").nth(1));
    if counted.is_some_and(|c| COUNT_COLUMNS.contains(&c.as_str())) {
        return None;
    }
    let lower = format!(" {} ", w.join(" "));
    let keys = keywords(task);
    // A value the task names: the value's words, in order, among the task's words, one of
    // them a content word ("open", not "a").
    let named = |v: &str| names_value(&lower, &keys, v);
    for (step, table) in read_tables(steps) {
        // field → the values the task names, over all records; only text values (a number
        // in the task is a quantity, not a filter).
        let mut filters: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for rec in &table {
            for (k, v) in rec {
                if number(v).is_none() && named(v) {
                    let vals = filters.entry(k).or_default();
                    if !vals.contains(&v.as_str()) {
                        vals.push(v);
                    }
                }
            }
        }
        // A numeric field the counted noun names ("how many seats": a `seats` column) holds
        // the answer, not the number of records.
        let names_numeric_field = counted.is_some_and(|c| {
            table.iter().flatten().any(|(k, v)| {
                number(v).is_some() && {
                    let k = k.to_lowercase();
                    k == *c || stem(&k) == stem(c)
                }
            })
        });
        if filters.is_empty() || names_numeric_field {
            continue;
        }
        let hits: Vec<&Vec<(String, String)>> = table
            .iter()
            .filter(|rec| {
                filters.iter().all(|(k, vals)| {
                    rec.iter()
                        .any(|(rk, rv)| rk == k && vals.contains(&rv.as_str()))
                })
            })
            .collect();
        let condition: Vec<String> = filters
            .iter()
            .map(|(k, vals)| format!("{k} = {}", vals.join(" or ")))
            .collect();
        let ids: Vec<&str> = hits
            .iter()
            .filter_map(|rec| rec.first().map(|(_, v)| v.as_str()))
            .collect();
        let id_field = table
            .first()
            .and_then(|r| r.first())
            .map_or("", |(k, _)| k.as_str());
        return Some(format!(
            "{} ({} of the {} records in {} have {}{})",
            hits.len(),
            hits.len(),
            table.len(),
            source(step),
            condition.join(" and "),
            if ids.is_empty() || ids.len() > 12 {
                String::new()
            } else {
                format!("; {id_field}: {}", ids.join(", "))
            }
        ));
    }
    None
}

#[cfg(test)]
mod tests;
