//! A structured file read as facts that each say what they are about.
//!
//! Shown a YAML file line by line, a small model cannot tell `p95_ms: 150` under `search:` from
//! `p95_ms: 450` under `checkout:`; shown a Markdown table's row `| checkout | 97 | 372 | 811 |`,
//! it cannot tell which number is the p95. Each fact here carries its whole key path
//! (`endpoints.checkout.p95_ms: 450`) or its column names (`endpoint=checkout, p95 (ms)=372`),
//! and facts that are parallel records of one kind (the tenants' quotas, a table's rows) form a
//! family, of which [`select`] keeps the records the question names.
//!
//! Files are read by their kind: JSON and TOML by their parsers, YAML by indentation, INI
//! sections, `.env` assignments, CSV rows under their header, and Markdown tables in any file.
//! Anything else (prose, logs, source) is not structured here ([`facts_of`] gives `None`).

use std::collections::{BTreeMap, BTreeSet};

use super::tools::table::read::toml_to_json;
use super::words::{keywords, words};

/// Most facts read from one file.
const MAX_FACTS: usize = 400;

/// One fact of a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fact {
    /// The kind of record the fact is one of ("endpoints.*.p95_ms", a table's rows): facts of
    /// one family differ in which record they describe. `None` for a fact of its own kind.
    pub family: Option<String>,
    /// The fact as shown: "endpoints.checkout.p95_ms: 450", "endpoint=checkout, p95 (ms)=372".
    pub text: String,
}

/// A value found at a key path.
struct Leaf {
    path: Vec<String>,
    value: String,
}

/// What a file held: values at key paths, records (a table's rows, an array's objects) and
/// other lines, in reading order.
#[derive(Default)]
struct Found {
    items: Vec<Item>,
}

enum Item {
    Leaf(Leaf),
    /// A record: the family it belongs to, the path it sits at, its (name, value) fields.
    Record(String, String, Vec<(String, String)>),
    Line(String),
}

impl Found {
    fn leaf(&mut self, path: Vec<String>, value: impl Into<String>) {
        self.items.push(Item::Leaf(Leaf {
            path,
            value: value.into(),
        }));
    }
}

/// The facts of a file `path` whose text is `body` (without line numbers); `None` when the file
/// is of no structured kind, or does not parse as its kind says.
pub fn facts_of(path: &str, body: &str) -> Option<Vec<Fact>> {
    let name = path.rsplit('/').next().unwrap_or(path).to_ascii_lowercase();
    let ext = name.rsplit_once('.').map(|x| x.1).unwrap_or("");
    let found = match ext {
        "json" => json(body)?,
        "toml" => toml_file(body).or_else(|| ini(body))?,
        "yaml" | "yml" => yaml(body),
        "ini" | "cfg" | "conf" => ini(body)?,
        "csv" => csv(body)?,
        _ if name == ".env" || name.starts_with(".env.") || ext == "env" => ini(body)?,
        _ => markdown(body)?,
    };
    Some(render(found))
}

/// The facts of `found`: each value with its key path, each record with its field names;
/// a value whose parent key varies among values of the same key (`endpoints.search.p95_ms`,
/// `endpoints.checkout.p95_ms`) is of the family `endpoints.*.p95_ms`.
fn render(found: Found) -> Vec<Fact> {
    let family_of = |path: &[String]| -> Option<String> {
        (path.len() >= 2).then(|| {
            let mut p = path.to_vec();
            let n = p.len();
            p[n - 2] = "*".to_string();
            p.join(".")
        })
    };
    let mut sizes: BTreeMap<String, usize> = BTreeMap::new();
    for item in &found.items {
        if let Item::Leaf(l) = item {
            if let Some(f) = family_of(&l.path) {
                *sizes.entry(f).or_default() += 1;
            }
        }
    }
    let mut out = Vec::new();
    for item in found.items.into_iter().take(MAX_FACTS) {
        out.push(match item {
            Item::Leaf(l) => Fact {
                family: family_of(&l.path).filter(|f| sizes.get(f).copied().unwrap_or(0) >= 2),
                text: format!("{}: {}", l.path.join("."), l.value),
            },
            Item::Record(family, at, fields) => {
                let pairs: Vec<String> = fields.iter().map(|(k, v)| format!("{k}={v}")).collect();
                let pairs = pairs.join(", ");
                Fact {
                    family: Some(family),
                    text: if at.is_empty() {
                        pairs
                    } else {
                        format!("{at}: {pairs}")
                    },
                }
            }
            Item::Line(text) => Fact { family: None, text },
        });
    }
    out
}

fn scalar(v: &serde_json::Value) -> Option<String> {
    use serde_json::Value;
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        Value::Null => Some("null".to_string()),
        _ => None,
    }
}

fn json(body: &str) -> Option<Found> {
    let v: serde_json::Value = serde_json::from_str(body).ok()?;
    let mut found = Found::default();
    walk(&v, &mut Vec::new(), &mut found);
    Some(found)
}

fn toml_file(body: &str) -> Option<Found> {
    let v: toml::Table = toml::from_str(body).ok()?;
    let v = toml_to_json(toml::Value::Table(v));
    let mut found = Found::default();
    walk(&v, &mut Vec::new(), &mut found);
    Some(found)
}

/// A parsed document's values by key path; an array of flat objects as records.
fn walk(v: &serde_json::Value, path: &mut Vec<String>, found: &mut Found) {
    use serde_json::Value;
    match v {
        Value::Object(map) => {
            for (k, x) in map {
                path.push(k.clone());
                walk(x, path, found);
                path.pop();
            }
        }
        Value::Array(items) => {
            let flat = |x: &Value| -> Option<Vec<(String, String)>> {
                x.as_object()?
                    .iter()
                    .map(|(k, v)| scalar(v).map(|s| (k.clone(), s)))
                    .collect()
            };
            let records: Option<Vec<Vec<(String, String)>>> = items.iter().map(flat).collect();
            let scalars: Option<Vec<String>> = items.iter().map(scalar).collect();
            if let (Some(records), false) = (records, items.is_empty()) {
                let at = path.join(".");
                for fields in records {
                    found
                        .items
                        .push(Item::Record(format!("{at}[]"), at.clone(), fields));
                }
            } else if let Some(scalars) = scalars {
                found.leaf(path.clone(), scalars.join(", "));
            } else {
                for (i, x) in items.iter().enumerate() {
                    path.push(i.to_string());
                    walk(x, path, found);
                    path.pop();
                }
            }
        }
        x => {
            if let Some(s) = scalar(x) {
                found.leaf(path.clone(), s);
            }
        }
    }
}

/// A value as written, its quotes and a trailing comment removed.
fn unquote(v: &str) -> String {
    let v = v.trim();
    let v = match v.find(" #") {
        Some(i) if !v.starts_with(['"', '\'']) => v[..i].trim_end(),
        _ => v,
    };
    v.trim_matches(|c| c == '"' || c == '\'').to_string()
}

/// A `key: value` or `key = value` line's key and value.
fn assignment(line: &str) -> Option<(&str, &str)> {
    let at = line.find([':', '='])?;
    let (k, v) = (line[..at].trim(), line[at + 1..].trim());
    let k = k.strip_prefix("export ").unwrap_or(k).trim();
    let key_like = !k.is_empty()
        && k.len() <= 60
        && k.chars()
            .all(|c| c.is_alphanumeric() || matches!(c, '_' | '-' | '.' | ' '));
    (key_like && !v.is_empty()).then_some((k, v))
}

/// An INI or `.env` file (also a TOML file its parser refuses): `[section]` lines and
/// `key = value` lines under them.
fn ini(body: &str) -> Option<Found> {
    let mut found = Found::default();
    let mut section: Option<String> = None;
    let mut any = false;
    for raw in body.lines() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with(['#', ';']) {
            continue;
        }
        if line.starts_with('[') && line.ends_with(']') && line.len() > 2 {
            section = Some(line[1..line.len() - 1].trim().to_string());
            continue;
        }
        match assignment(line) {
            Some((k, v)) => {
                any = true;
                let mut path: Vec<String> = section.iter().cloned().collect();
                path.push(k.to_string());
                found.leaf(path, unquote(v));
            }
            None => found.items.push(Item::Line(line.to_string())),
        }
    }
    any.then_some(found)
}

/// A YAML list item being read: the indent of its fields, the path it sits at, its fields.
type ListItem = (usize, String, Vec<(String, String)>);

/// A YAML file read by indentation: nested mappings as key paths, a list of mappings as
/// records, a list of scalars as one value.
fn yaml(body: &str) -> Found {
    let mut found = Found::default();
    // Open mappings: (indent, key).
    let mut open: Vec<(usize, String)> = Vec::new();
    // The list item being read.
    let mut item: Option<ListItem> = None;
    // Scalars of a list: (path, values).
    let mut list: Option<(Vec<String>, Vec<String>)> = None;
    let flush_item = |item: &mut Option<ListItem>, found: &mut Found| {
        if let Some((_, at, fields)) = item.take() {
            if !fields.is_empty() {
                found
                    .items
                    .push(Item::Record(format!("{at}[]"), at.clone(), fields));
            }
        }
    };
    let flush_list = |list: &mut Option<(Vec<String>, Vec<String>)>, found: &mut Found| {
        if let Some((path, values)) = list.take() {
            found.leaf(path, values.join(", "));
        }
    };
    for raw in body.lines() {
        let trimmed = raw.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') || trimmed == "---" {
            continue;
        }
        let indent = raw.len() - raw.trim_start().len();
        if let Some(rest) = trimmed
            .strip_prefix("- ")
            .or((trimmed == "-").then_some(""))
        {
            flush_item(&mut item, &mut found);
            open.retain(|(i, _)| *i < indent);
            let at: Vec<String> = open.iter().map(|(_, k)| k.clone()).collect();
            match assignment(rest) {
                Some((k, v)) => {
                    flush_list(&mut list, &mut found);
                    item = Some((indent + 2, at.join("."), vec![(k.to_string(), unquote(v))]));
                }
                None if rest.is_empty() => {
                    item = Some((indent + 2, at.join("."), Vec::new()));
                }
                None => match &mut list {
                    Some((p, values)) if *p == at => values.push(unquote(rest)),
                    _ => {
                        flush_list(&mut list, &mut found);
                        list = Some((at, vec![unquote(rest)]));
                    }
                },
            }
            continue;
        }
        if let Some((field_indent, _, fields)) = &mut item {
            if indent >= *field_indent {
                if let Some((k, v)) = assignment(trimmed) {
                    fields.push((k.to_string(), unquote(v)));
                }
                continue;
            }
        }
        flush_item(&mut item, &mut found);
        flush_list(&mut list, &mut found);
        open.retain(|(i, _)| *i < indent);
        if let Some(k) = trimmed.strip_suffix(':') {
            open.push((indent, unquote(k)));
            continue;
        }
        let mut path: Vec<String> = open.iter().map(|(_, k)| k.clone()).collect();
        match assignment(trimmed) {
            Some((k, v)) => {
                path.push(k.to_string());
                found.leaf(path, unquote(v));
            }
            None => found.items.push(Item::Line(trimmed.to_string())),
        }
    }
    flush_item(&mut item, &mut found);
    flush_list(&mut list, &mut found);
    found
}

/// A CSV file: each row under its header's names.
fn csv(body: &str) -> Option<Found> {
    let mut lines = body.lines().filter(|l| !l.trim().is_empty());
    let header: Vec<String> = lines
        .next()?
        .split(',')
        .map(|f| f.trim().to_string())
        .collect();
    if header.len() < 2 {
        return None;
    }
    let mut found = Found::default();
    for line in lines {
        let cells: Vec<String> = line.split(',').map(|f| f.trim().to_string()).collect();
        if cells.len() == header.len() {
            found.items.push(Item::Record(
                "rows".to_string(),
                String::new(),
                header.iter().cloned().zip(cells).collect(),
            ));
        } else {
            found.items.push(Item::Line(line.trim().to_string()));
        }
    }
    Some(found)
}

/// A Markdown table's cells: `| a | b |` → ["a", "b"].
fn cells(line: &str) -> Option<Vec<String>> {
    let inner = line.trim().strip_prefix('|')?;
    let inner = inner.strip_suffix('|').unwrap_or(inner);
    Some(inner.split('|').map(|c| c.trim().to_string()).collect())
}

/// A file with Markdown tables: each row under its table's header; other lines as they are.
/// `None` when the file has no table.
fn markdown(body: &str) -> Option<Found> {
    let lines: Vec<&str> = body.lines().collect();
    let mut found = Found::default();
    let mut tables = 0;
    let mut i = 0;
    while i < lines.len() {
        let separator = |l: &str| {
            cells(l).is_some_and(|c| {
                c.iter()
                    .all(|x| !x.is_empty() && x.chars().all(|ch| matches!(ch, '-' | ':' | ' ')))
            })
        };
        match (cells(lines[i]), lines.get(i + 1)) {
            (Some(header), Some(next)) if separator(next) && header.len() >= 2 => {
                tables += 1;
                let family = format!("table {tables}");
                i += 2;
                while let Some(row) = lines.get(i).and_then(|l| cells(l)) {
                    if row.len() == header.len() {
                        found.items.push(Item::Record(
                            family.clone(),
                            String::new(),
                            header.iter().cloned().zip(row).collect(),
                        ));
                    }
                    i += 1;
                }
            }
            _ => {
                let l = lines[i].trim();
                if !l.is_empty() {
                    found.items.push(Item::Line(l.to_string()));
                }
                i += 1;
            }
        }
    }
    (tables > 0).then_some(found)
}

const MONTHS: [&str; 12] = [
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
];

/// The words a fact is matched on for `task`: its keywords, and each month it names as its
/// number ("February" → "02"), as dates are written in files (`2026-02`).
pub fn terms(task: &str) -> BTreeSet<String> {
    let mut t: BTreeSet<String> = keywords(task).into_iter().collect();
    for w in words(task) {
        if let Some(i) = MONTHS.iter().position(|m| *m == w) {
            t.insert(format!("{:02}", i + 1));
        }
    }
    t
}

/// The facts to show for `task`: of each family, the records that hold the most of the task's
/// words that not every record of the family holds (the record the question names: `orchid`'s
/// row among the tenants'); a family none of whose records is named is kept whole. Of a record,
/// the fields that hold a word of the task (and its first field, which names it) when any
/// field but the first does.
pub fn select(task: &str, facts: &[Fact]) -> Vec<String> {
    let terms = terms(task);
    let (keep, _) = pick(&terms, facts);
    shown(facts, &keep, &terms)
}

/// [`select`] over several files read for one question, with one hop: a record picked in one
/// file names the record to pick in another. `retry_policy: patient` picked among the clients
/// of http.toml picks `policies.patient.max_attempts` among the policies of retry.yaml, which
/// the question never names.
pub fn select_linked(task: &str, files: &[Vec<Fact>]) -> Vec<Vec<String>> {
    let terms = terms(task);
    let mut linked = terms.clone();
    for facts in files {
        let (_, found) = pick(&terms, facts);
        linked.extend(found);
    }
    files
        .iter()
        .map(|facts| {
            let (keep, _) = pick(&linked, facts);
            shown(facts, &keep, &terms)
        })
        .collect()
}

fn shown(facts: &[Fact], keep: &[bool], terms: &BTreeSet<String>) -> Vec<String> {
    facts
        .iter()
        .zip(keep)
        .filter(|(_, k)| **k)
        .map(|(f, _)| narrow_fields(&f.text, terms))
        .collect()
}

/// Which facts to keep, and the words (not numbers, not `terms`) that set the picked records
/// apart from the rest of their family.
fn pick(terms: &BTreeSet<String>, facts: &[Fact]) -> (Vec<bool>, BTreeSet<String>) {
    let mut families: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (i, f) in facts.iter().enumerate() {
        if let Some(fam) = &f.family {
            families.entry(fam).or_default().push(i);
        }
    }
    let mut keep = vec![true; facts.len()];
    let mut found = BTreeSet::new();
    for members in families.values().filter(|m| m.len() >= 2) {
        let held: Vec<BTreeSet<String>> = members
            .iter()
            .map(|&i| words(&facts[i].text).into_iter().collect())
            .collect();
        let common: BTreeSet<&String> = held[0]
            .iter()
            .filter(|w| held.iter().all(|h| h.contains(*w)))
            .collect();
        let scores: Vec<usize> = held
            .iter()
            .map(|h| {
                h.iter()
                    .filter(|w| terms.contains(*w) && !common.contains(w))
                    .count()
            })
            .collect();
        let best = scores.iter().copied().max().unwrap_or(0);
        if best > 0 {
            for ((&i, &s), h) in members.iter().zip(&scores).zip(&held) {
                keep[i] = s == best;
                if s == best {
                    found.extend(
                        h.iter()
                            .filter(|w| !common.contains(w) && !terms.contains(*w))
                            .filter(|w| w.len() >= 3 && !w.chars().all(|c| c.is_ascii_digit()))
                            .cloned(),
                    );
                }
            }
        }
    }
    (keep, found)
}

/// A record's fields that hold one of `terms`, with its first field; the record whole when no
/// other field does (or it is not a record).
fn narrow_fields(text: &str, terms: &BTreeSet<String>) -> String {
    let (at, pairs) = match text.split_once(": ") {
        Some((at, rest)) if rest.contains('=') && !at.contains('=') => (Some(at), rest),
        _ => (None, text),
    };
    let fields: Vec<&str> = pairs.split(", ").collect();
    if fields.len() < 3 || !fields.iter().all(|f| f.contains('=')) {
        return text.to_string();
    }
    // A field is named by its name ("storage_gb") or its value ("month=2026-02" for
    // "February 2026").
    let named = |f: &str| words(f).iter().any(|w| terms.contains(w));
    if !fields[1..].iter().any(|f| named(f)) {
        return text.to_string();
    }
    let kept: Vec<&str> = fields
        .iter()
        .enumerate()
        .filter(|(i, f)| *i == 0 || named(f))
        .map(|(_, f)| *f)
        .collect();
    match at {
        Some(at) => format!("{at}: {}", kept.join(", ")),
        None => kept.join(", "),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shown(path: &str, body: &str, task: &str) -> Vec<String> {
        select(task, &facts_of(path, body).expect("structured"))
    }

    #[test]
    fn a_yaml_value_carries_its_key_path_and_the_named_record_is_kept() {
        let body = "endpoints:\n  search:\n    p95_ms: 150\n    p99_ms: 400\n  checkout:\n    p95_ms: 450\n    p99_ms: 900\n";
        let got = shown(
            "slo.yaml",
            body,
            "How far is the checkout p95 below its target?",
        );
        assert_eq!(
            got,
            [
                "endpoints.checkout.p95_ms: 450",
                "endpoints.checkout.p99_ms: 900"
            ]
        );
        // Nothing names a record: the family is kept whole.
        let all = shown("slo.yaml", body, "What are the targets?");
        assert_eq!(all.len(), 4);
    }

    #[test]
    fn a_markdown_table_row_is_shown_under_its_column_names() {
        let body = "# Latency\n\n| endpoint | p50 (ms) | p95 (ms) | p99 (ms) |\n|---|---:|---:|---:|\n| search | 38 | 121 | 260 |\n| checkout | 97 | 372 | 811 |\n";
        let got = shown(
            "reports/latency.md",
            body,
            "the checkout endpoint's p95 latency",
        );
        assert_eq!(got, ["# Latency", "endpoint=checkout, p95 (ms)=372"]);
        assert!(facts_of("notes.md", "# Notes\n\nplain prose\n").is_none());
    }

    #[test]
    fn csv_rows_are_picked_by_name_and_month() {
        let body = "tenant,month,storage_gb,buckets\norchid,2026-01,312.4,11\nmaple,2026-01,598.0,33\norchid,2026-02,347.9,12\n";
        let got = shown(
            "usage.csv",
            body,
            "How much storage did tenant orchid use in February 2026?",
        );
        assert_eq!(got, ["tenant=orchid, month=2026-02, storage_gb=347.9"]);
    }

    #[test]
    fn json_arrays_of_objects_are_records_and_scalars_stay() {
        let body = r#"{"hours": 720, "reservations": [{"type": "cpu-large", "count": 10}, {"type": "gpu-large", "count": 3}]}"#;
        let got = shown("r.json", body, "What do the gpu-large reservations cost?");
        assert_eq!(got, ["hours: 720", "reservations: type=gpu-large, count=3"]);
    }

    #[test]
    fn toml_and_ini_sections_scope_their_keys() {
        let toml = "currency = \"USD\"\n[rates.cpu-large]\nhourly_usd = 0.168\n[rates.gpu-large]\nhourly_usd = 2.45\n";
        let got = shown("rates.toml", toml, "the gpu-large hourly rate");
        assert_eq!(got, ["currency: USD", "rates.gpu-large.hourly_usd: 2.45"]);
        let ini = "[consumers]\nqueue = orders\nconcurrency = 24\n\n[scheduler]\nconcurrency = 3\n";
        let got = shown(
            "worker.ini",
            ini,
            "the concurrency of the [consumers] section",
        );
        assert_eq!(
            got,
            ["consumers.queue: orders", "consumers.concurrency: 24"]
        );
        let env = "# web\nWEB_CONCURRENCY=17\nPORT=3000\n";
        assert_eq!(
            shown("web/.env", env, "WEB_CONCURRENCY"),
            ["WEB_CONCURRENCY: 17", "PORT: 3000"]
        );
    }

    #[test]
    fn yaml_lists_become_records_or_one_value() {
        let body = "services:\n  - name: web\n    replicas: 3\n  - name: worker\n    replicas: 5\nregions:\n  - eu\n  - us\n";
        let facts = facts_of("deploy.yaml", body).expect("yaml");
        let texts: Vec<&str> = facts.iter().map(|f| f.text.as_str()).collect();
        assert_eq!(
            texts,
            [
                "services: name=web, replicas=3",
                "services: name=worker, replicas=5",
                "regions: eu, us"
            ]
        );
        assert_eq!(
            select("How many replicas does the worker run?", &facts),
            ["services: name=worker, replicas=5", "regions: eu, us"]
        );
    }

    #[test]
    fn unparseable_or_unstructured_files_are_left_to_the_caller() {
        assert!(facts_of("a.json", "{not json").is_none());
        assert!(facts_of("app.log", "12:00 started\n12:01 stopped\n").is_none());
        assert!(facts_of("a.csv", "justonecolumn\n1\n").is_none());
    }

    #[test]
    fn a_record_picked_in_one_file_picks_the_record_it_names_in_another() {
        let http = "[clients.search]\nretry_policy = \"fast\"\n[clients.payments]\nretry_policy = \"patient\"\n";
        let retry = "policies:\n  fast:\n    max_attempts: 3\n  patient:\n    max_attempts: 7\n";
        let files = vec![
            facts_of("config/http.toml", http).expect("toml"),
            facts_of("policies/retry.yaml", retry).expect("yaml"),
        ];
        let task =
            "The payments client uses a named retry policy. How many attempts does it allow?";
        let got = select_linked(task, &files);
        assert_eq!(got[0], ["clients.payments.retry_policy: patient"]);
        assert_eq!(got[1], ["policies.patient.max_attempts: 7"]);
        // Alone, retry.yaml names no policy the task names: all are kept.
        assert_eq!(select(task, &files[1]).len(), 2);
    }
}
