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

mod compare;
mod records;
pub use compare::*;
pub use records::*;

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

#[cfg(test)]
mod tests;
