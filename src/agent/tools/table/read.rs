//! A file read as records: CSV and TSV rows under their header, JSON (also one value a line),
//! YAML, TOML, INI and `.env` documents, turned into records by [`records_of`].

use serde_json::{Map, Value};

use super::{csv, yaml};

/// The kinds of file the table tool reads, by name.
pub const KINDS: &str = ".csv, .tsv, .json, .jsonl, .yaml, .yml, .toml, .ini, .cfg, .conf, .env";

/// A file's kind, from its name; `None` for a kind the table tool does not read.
pub fn kind_of(path: &str) -> Option<&'static str> {
    let name = path.rsplit('/').next().unwrap_or(path).to_ascii_lowercase();
    if name == ".env" || name.starts_with(".env.") {
        return Some("env");
    }
    let ext = name.rsplit_once('.').map(|x| x.1)?;
    Some(match ext {
        "csv" => "csv",
        "tsv" | "tab" => "tsv",
        "json" => "json",
        "jsonl" | "ndjson" => "jsonl",
        "yaml" | "yml" => "yaml",
        "toml" => "toml",
        "ini" | "cfg" | "conf" => "ini",
        "env" => "env",
        _ => return None,
    })
}

/// A file's records: each a map from field (a dotted path for nested keys) to a scalar, in
/// the file's order; and the whole document when the file is one (for dotted-path lookups).
pub struct Records {
    /// The records.
    pub rows: Vec<Map<String, Value>>,
    /// The document the records came from (`None` for CSV and TSV).
    pub doc: Option<Value>,
}

/// Read `text` of the kind `kind` ([`kind_of`]); the error says what is wrong where.
pub fn read(kind: &str, text: &str) -> Result<Records, String> {
    let doc = match kind {
        "csv" | "tsv" => {
            let delim = if kind == "csv" { ',' } else { '\t' };
            let rows = csv::rows(text, delim).map_err(|e| e.to_string())?;
            return Ok(Records {
                rows: rows_under_header(rows),
                doc: None,
            });
        }
        "json" => serde_json::from_str(text).map_err(|e| format!("not valid JSON: {e}"))?,
        "jsonl" => Value::Array(
            text.lines()
                .enumerate()
                .filter(|(_, l)| !l.trim().is_empty())
                .map(|(i, l)| {
                    serde_json::from_str(l)
                        .map_err(|e| format!("line {}: not valid JSON: {e}", i + 1))
                })
                .collect::<Result<_, _>>()?,
        ),
        "yaml" => yaml::parse(text).map_err(|e| format!("not valid YAML: {e}"))?,
        "toml" => toml_value(
            toml::from_str::<toml::Table>(text).map_err(|e| format!("not valid TOML: {e}"))?,
        ),
        _ => ini(text),
    };
    Ok(Records {
        rows: records_of(&doc),
        doc: Some(doc),
    })
}

/// CSV rows as records under the first row's names (a blank name is `column N`); a short row
/// leaves its last fields empty.
fn rows_under_header(rows: Vec<Vec<String>>) -> Vec<Map<String, Value>> {
    let mut it = rows.into_iter();
    let Some(header) = it.next() else {
        return Vec::new();
    };
    let names: Vec<String> = header
        .iter()
        .enumerate()
        .map(|(i, h)| {
            let h = h.trim();
            if h.is_empty() {
                format!("column {}", i + 1)
            } else {
                h.to_string()
            }
        })
        .collect();
    it.map(|row| {
        let mut m = Map::new();
        for (i, name) in names.iter().enumerate() {
            let cell = row.get(i).map(|c| c.trim().to_string()).unwrap_or_default();
            m.insert(name.clone(), Value::String(cell));
        }
        for (i, extra) in row.iter().enumerate().skip(names.len()) {
            m.insert(
                format!("column {}", i + 1),
                Value::String(extra.trim().to_string()),
            );
        }
        m
    })
    .collect()
}

/// A TOML value as JSON (dates as their text).
pub(crate) fn toml_to_json(v: toml::Value) -> Value {
    match v {
        toml::Value::String(s) => Value::String(s),
        toml::Value::Integer(i) => Value::from(i),
        toml::Value::Float(f) => Value::from(f),
        toml::Value::Boolean(b) => Value::Bool(b),
        toml::Value::Datetime(d) => Value::String(d.to_string()),
        toml::Value::Array(a) => Value::Array(a.into_iter().map(toml_to_json).collect()),
        toml::Value::Table(t) => {
            Value::Object(t.into_iter().map(|(k, v)| (k, toml_to_json(v))).collect())
        }
    }
}

fn toml_value(t: toml::Table) -> Value {
    toml_to_json(toml::Value::Table(t))
}

/// An INI or `.env` text: `[section]` headers as objects, `key = value` and `key: value`
/// (also `export KEY=value`) as strings, quotes and trailing comments removed.
fn ini(text: &str) -> Value {
    let mut top = Map::new();
    let mut section: Option<String> = None;
    for raw in text.lines() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with(['#', ';']) {
            continue;
        }
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            let name = name.trim().to_string();
            top.entry(name.clone())
                .or_insert_with(|| Value::Object(Map::new()));
            section = Some(name);
            continue;
        }
        let Some(at) = line.find(['=', ':']) else {
            continue;
        };
        let key = line[..at].trim();
        let key = key
            .strip_prefix("export ")
            .unwrap_or(key)
            .trim()
            .to_string();
        let value = line[at + 1..].trim();
        let value = match value.chars().next() {
            Some(q @ ('"' | '\'')) => value[1..].split(q).next().unwrap_or_default(),
            _ => value
                .split(" #")
                .next()
                .unwrap_or(value)
                .split(" ;")
                .next()
                .unwrap_or(value)
                .trim(),
        };
        let target = match &section {
            Some(s) => top.get_mut(s).and_then(Value::as_object_mut),
            None => Some(&mut top),
        };
        if let Some(t) = target {
            t.insert(key, Value::String(value.to_string()));
        }
    }
    Value::Object(top)
}

/// `v`'s fields by dotted path into `out` (objects opened; other values kept as they are).
fn flatten(prefix: &str, v: &Value, out: &mut Map<String, Value>) {
    match v {
        Value::Object(m) if !m.is_empty() => {
            for (k, x) in m {
                let key = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                flatten(&key, x, out);
            }
        }
        other => {
            out.insert(prefix.to_string(), other.clone());
        }
    }
}

/// One record of an array element: an object's fields, or a scalar as `value`.
fn record(v: &Value) -> Map<String, Value> {
    let mut m = Map::new();
    match v {
        Value::Object(_) => flatten("", v, &mut m),
        other => {
            m.insert("value".into(), other.clone());
        }
    }
    m
}

/// The records of a document: an array's elements; the elements of the one array of objects
/// an object holds (`{"users": [...], "version": 2}`); an object of objects as one record per
/// key (its name as the field `key`); otherwise the whole object as one record of dotted paths.
pub fn records_of(doc: &Value) -> Vec<Map<String, Value>> {
    match doc {
        Value::Array(items) => items.iter().map(record).collect(),
        Value::Object(m) => {
            let lists: Vec<&Vec<Value>> = m
                .values()
                .filter_map(Value::as_array)
                .filter(|a| !a.is_empty() && a.iter().all(Value::is_object))
                .collect();
            if let ([list], true) = (lists.as_slice(), m.values().all(|v| !v.is_object())) {
                return list.iter().map(record).collect();
            }
            if m.len() >= 2
                && m.values()
                    .all(|v| v.as_object().is_some_and(|o| !o.is_empty()))
            {
                let key = if m.values().any(|v| v.get("key").is_some()) {
                    "_key"
                } else {
                    "key"
                };
                return m
                    .iter()
                    .map(|(k, v)| {
                        let mut r = Map::new();
                        r.insert(key.into(), Value::String(k.clone()));
                        flatten("", v, &mut r);
                        r
                    })
                    .collect();
            }
            vec![record(doc)]
        }
        Value::Null => Vec::new(),
        other => vec![record(other)],
    }
}

/// The value at the dotted path `path` of `doc` (object keys; array indexes as numbers).
pub fn at_path<'a>(doc: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.').try_fold(doc, |v, part| match v {
        Value::Object(m) => m.get(part),
        Value::Array(a) => a.get(part.parse::<usize>().ok()?),
        _ => None,
    })
}
