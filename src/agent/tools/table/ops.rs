//! The table tool's operations over records: filtering by conditions, resolving field names
//! against the file's own, and each operation's short output.

use serde::Deserialize;
use serde_json::{Map, Value};

use super::read::{at_path, Records};
use super::{field_names, Condition};
use crate::agent::tools::calculator::Number;
use crate::agent::tools::{truncate_str, ToolError};

/// Most values or records an output lists.
const MAX_LISTED: usize = 50;

/// Most characters of one record as shown.
const RECORD_CHARS: usize = 400;

/// How a condition compares a record's field with its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Cmp {
    /// Equal (numbers by value, text ignoring case).
    Eq,
    /// Not equal.
    Ne,
    /// Less than.
    Lt,
    /// Less than or equal.
    Le,
    /// Greater than.
    Gt,
    /// Greater than or equal.
    Ge,
    /// The text holds the value (ignoring case).
    Contains,
}

impl Cmp {
    fn as_str(self) -> &'static str {
        match self {
            Cmp::Eq => "eq",
            Cmp::Ne => "ne",
            Cmp::Lt => "lt",
            Cmp::Le => "le",
            Cmp::Gt => "gt",
            Cmp::Ge => "ge",
            Cmp::Contains => "contains",
        }
    }
}

/// An operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Op {
    Get,
    Count,
    Sum,
    Mean,
    Min,
    Max,
    ArgMax,
    ArgMin,
    Distinct,
}

impl Op {
    pub(super) fn parse(s: &str) -> Result<Op, ToolError> {
        Ok(match s.trim().to_ascii_lowercase().as_str() {
            "get" | "value" => Op::Get,
            "count" => Op::Count,
            "sum" | "total" => Op::Sum,
            "mean" | "avg" | "average" => Op::Mean,
            "min" | "minimum" => Op::Min,
            "max" | "maximum" => Op::Max,
            "argmax" | "row_with_max" => Op::ArgMax,
            "argmin" | "row_with_min" => Op::ArgMin,
            "distinct" => Op::Distinct,
            _ => {
                return Err(ToolError::invalid(format!(
                    "unknown op {s:?}; the ops are: {}.",
                    super::OP_WORDS.join(", ")
                )))
            }
        })
    }
    fn name(self) -> &'static str {
        super::OPS[self as usize]
    }
}

/// A value as text: strings as they are, arrays joined by ", ", null as empty.
pub(super) fn show(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        Value::Array(a) => a.iter().map(show).collect::<Vec<_>>().join(", "),
        other => other.to_string(),
    }
}

/// A value as a number: JSON numbers, and text like `1200`, `-3.5`, `1,234`, `$12.50`, `45%`.
pub(super) fn num(v: &Value) -> Option<Number> {
    match v {
        Value::Number(n) => n
            .as_i64()
            .map(|i| Number::Int(i128::from(i)))
            .or_else(|| n.as_f64().map(Number::Float)),
        Value::String(s) => {
            let t = s.trim();
            let t = t.strip_prefix(['$', '€', '£', '¥']).unwrap_or(t);
            let t = t.strip_suffix('%').unwrap_or(t).trim();
            let grouped = t.contains(',') && {
                let int = t
                    .trim_start_matches('-')
                    .split('.')
                    .next()
                    .unwrap_or_default();
                let mut parts = int.split(',');
                let head = parts.next().unwrap_or_default();
                (1..=3).contains(&head.len()) && parts.all(|p| p.len() == 3)
            };
            let t = if grouped {
                t.replace(',', "")
            } else {
                t.to_string()
            };
            if t.is_empty()
                || !t
                    .bytes()
                    .all(|b| b.is_ascii_digit() || b"+-.eE".contains(&b))
            {
                return None;
            }
            if !t.contains(['.', 'e', 'E']) {
                if let Ok(i) = t.parse::<i128>() {
                    return Some(Number::Int(i));
                }
            }
            t.parse::<f64>()
                .ok()
                .filter(|f| f.is_finite())
                .map(Number::Float)
        }
        _ => None,
    }
}

/// The file's field named `name`: exactly, else ignoring case and `_`/`-`/space differences.
fn resolve(name: &str, fields: &[String], path: &str) -> Result<String, ToolError> {
    if fields.iter().any(|f| f == name) {
        return Ok(name.to_string());
    }
    let norm = |s: &str| -> String {
        s.chars()
            .filter(|c| !matches!(c, '_' | '-' | ' '))
            .flat_map(char::to_lowercase)
            .collect()
    };
    let want = norm(name);
    if let Some(f) = fields.iter().find(|f| norm(f) == want) {
        return Ok(f.clone());
    }
    let shown: Vec<&str> = fields.iter().take(60).map(String::as_str).collect();
    Err(ToolError::invalid(format!(
        "{path} has no field {name:?}; its fields are: {}.",
        if shown.is_empty() {
            "none (no records)".to_string()
        } else {
            shown.join(", ")
        }
    )))
}

fn holds(record: &Map<String, Value>, field: &str, cmp: Cmp, want: &Value) -> bool {
    let have = record.get(field).unwrap_or(&Value::Null);
    let (a, b) = (show(have), show(want));
    if cmp == Cmp::Contains {
        return a.to_lowercase().contains(&b.to_lowercase());
    }
    let order = match (num(have), num(want)) {
        (Some(x), Some(y)) => x.as_f64().total_cmp(&y.as_f64()),
        // A text is neither above nor below a number ("n/a" is not >= 1200).
        (None, Some(_)) if !matches!(cmp, Cmp::Eq | Cmp::Ne) => return false,
        _ => a.trim().to_lowercase().cmp(&b.trim().to_lowercase()),
    };
    use std::cmp::Ordering::*;
    match cmp {
        Cmp::Eq => order == Equal,
        Cmp::Ne => order != Equal,
        Cmp::Lt => order == Less,
        Cmp::Le => order != Greater,
        Cmp::Gt => order == Greater,
        Cmp::Ge => order != Less,
        Cmp::Contains => false,
    }
}

/// A record as `field=value, ...`.
pub(super) fn record_line(r: &Map<String, Value>) -> String {
    let s = r
        .iter()
        .map(|(k, v)| format!("{k}={}", show(v)))
        .collect::<Vec<_>>()
        .join(", ");
    let cut = truncate_str(&s, RECORD_CHARS);
    if cut.len() < s.len() {
        format!("{cut}…")
    } else {
        s
    }
}

/// Run `op` on `field` of the records of `path` that meet every condition.
pub(super) fn run(
    path: &str,
    records: &Records,
    op: Op,
    field: Option<&str>,
    conditions: &[Condition],
) -> Result<String, ToolError> {
    let fields = field_names(&records.rows);
    // A nested key of a document asked whole ("database.pool.max_size" of a config file whose
    // records are its sections).
    if let (Op::Get, Some(f), true, Some(doc)) = (op, field, conditions.is_empty(), &records.doc) {
        if resolve(f, &fields, path).is_err() {
            if let Some(v) = at_path(doc, f).filter(|v| !v.is_object()) {
                return Ok(format!("{path}: {f} = {}", show(v)));
            }
        }
    }
    let mut conds = Vec::with_capacity(conditions.len());
    for c in conditions {
        conds.push((resolve(&c.field, &fields, path)?, c.cmp, c.value.clone()));
    }
    let field = field.map(|f| resolve(f, &fields, path)).transpose()?;
    let matched: Vec<&Map<String, Value>> = records
        .rows
        .iter()
        .filter(|r| conds.iter().all(|(f, cmp, v)| holds(r, f, *cmp, v)))
        .collect();
    let total = records.rows.len();
    let mut out = if conds.is_empty() {
        format!("{path}: {total} records.\n")
    } else {
        let desc = conds
            .iter()
            .map(|(f, cmp, v)| format!("{f} {} {v}", cmp.as_str()))
            .collect::<Vec<_>>()
            .join(" and ");
        format!(
            "{path}: {} of {total} records match where {desc}.\n",
            matched.len()
        )
    };
    if matched.is_empty() && op != Op::Count {
        out.push_str(super::NO_MATCH);
        // The values the first condition's field does take: the model can correct its value.
        if let Some((f, _, _)) = conds.first() {
            let mut seen: Vec<String> = Vec::new();
            for r in &records.rows {
                let v = show(r.get(f).unwrap_or(&Value::Null));
                if !v.is_empty() && !seen.contains(&v) && seen.len() < 20 {
                    seen.push(v);
                }
            }
            out.push_str(&format!(" Values of {f} in the file: {}.", seen.join(", ")));
        }
        return Ok(out);
    }
    let Some(field) = field else {
        return match op {
            Op::Count => Ok(format!("{out}count: {}", matched.len())),
            Op::Get => {
                for r in matched.iter().take(MAX_LISTED) {
                    out.push_str(&record_line(r));
                    out.push('\n');
                }
                if matched.len() > MAX_LISTED {
                    out.push_str(&format!(
                        "... and {} more records",
                        matched.len() - MAX_LISTED
                    ));
                }
                Ok(out.trim_end().to_string())
            }
            _ => Err(ToolError::invalid(format!(
                "op {} needs a field; the fields of {path} are: {}.",
                op.name(),
                fields.join(", ")
            ))),
        };
    };
    let values: Vec<(&Map<String, Value>, &Value)> = matched
        .iter()
        .filter_map(|r| {
            r.get(&field)
                .filter(|v| !v.is_null() && !show(v).trim().is_empty())
                .map(|v| (*r, v))
        })
        .collect();
    match op {
        Op::Count => {
            out.push_str(&format!(
                "count of records with a value of {field}: {}",
                values.len()
            ));
            Ok(out)
        }
        Op::Get => {
            if let [(r, v)] = values.as_slice() {
                out.push_str(&format!("{field}: {}", show(v)));
                // The whole record too: the value asked for is often the one the condition
                // named ("device where device = office-pc"), and the figure is beside it.
                if r.len() > 1 && !conds.is_empty() {
                    out.push_str(&format!("\nthe record: {}", record_line(r)));
                }
                return Ok(out);
            }
            // Each value beside the record's first other field, which usually names it.
            let label = fields.iter().find(|f| **f != field).cloned();
            out.push_str(&format!(
                "{field} of the {} matching records:\n",
                values.len()
            ));
            for (r, v) in values.iter().take(MAX_LISTED) {
                match label.as_ref().and_then(|l| r.get(l)) {
                    Some(name) => out.push_str(&format!("{}: {}\n", show(name), show(v))),
                    None => out.push_str(&format!("{}\n", show(v))),
                }
            }
            if values.len() > MAX_LISTED {
                out.push_str(&format!("... and {} more", values.len() - MAX_LISTED));
            }
            Ok(out.trim_end().to_string())
        }
        Op::Distinct => {
            let mut counts: Vec<(String, usize)> = Vec::new();
            for (_, v) in &values {
                let s = show(v);
                match counts.iter_mut().find(|(x, _)| *x == s) {
                    Some((_, n)) => *n += 1,
                    None => counts.push((s, 1)),
                }
            }
            counts.sort_by_key(|c| std::cmp::Reverse(c.1));
            let shown: Vec<String> = counts
                .iter()
                .take(MAX_LISTED)
                .map(|(v, n)| format!("{v} ({n})"))
                .collect();
            out.push_str(&format!(
                "{} distinct values of {field} (with counts): {}",
                counts.len(),
                shown.join(", ")
            ));
            Ok(out)
        }
        _ => numeric(out, op, &field, &values),
    }
}

/// `sum`, `mean`, `min`, `max`, `argmax` and `argmin` of `values`; text values are left out
/// and named (when no value is a number, `min`/`max`/`argmax`/`argmin` compare the texts, so
/// ISO dates work).
fn numeric(
    mut out: String,
    op: Op,
    field: &str,
    values: &[(&Map<String, Value>, &Value)],
) -> Result<String, ToolError> {
    let nums: Vec<(&Map<String, Value>, Number)> = values
        .iter()
        .filter_map(|(r, v)| num(v).map(|n| (*r, n)))
        .collect();
    let skipped: Vec<String> = values
        .iter()
        .filter(|(_, v)| num(v).is_none())
        .map(|(_, v)| show(v))
        .collect();
    let note = if skipped.is_empty() || nums.is_empty() {
        String::new()
    } else {
        format!(
            " ({} value{} not a number, left out: {})",
            skipped.len(),
            if skipped.len() == 1 { " is" } else { "s are" },
            skipped
                .iter()
                .take(3)
                .cloned()
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    let name = op.name();
    match op {
        Op::Sum | Op::Mean => {
            if nums.is_empty() {
                // The fields that do hold numbers, so the model can pick one.
                let mut numeric_fields: Vec<&str> = Vec::new();
                for (r, _) in values {
                    for (k, v) in r.iter() {
                        if num(v).is_some() && !numeric_fields.contains(&k.as_str()) {
                            numeric_fields.push(k);
                        }
                    }
                }
                let hint = if numeric_fields.is_empty() {
                    String::new()
                } else {
                    format!(
                        " The fields with numbers are: {}.",
                        numeric_fields.join(", ")
                    )
                };
                return Err(ToolError::invalid(format!(
                    "no value of {field} is a number (values: {}); {name} needs a numeric field.{hint}",
                    skipped
                        .iter()
                        .take(5)
                        .cloned()
                        .collect::<Vec<_>>()
                        .join(", ")
                )));
            }
            let exact = nums.iter().try_fold(0i128, |acc, (_, n)| match n {
                Number::Int(i) => acc.checked_add(*i),
                Number::Float(_) => None,
            });
            let total: f64 = nums.iter().map(|(_, n)| n.as_f64()).sum();
            let value = match (op, exact) {
                (Op::Sum, Some(i)) => Number::Int(i),
                (Op::Sum, None) => Number::Float(total),
                _ => Number::Float(total / nums.len() as f64),
            };
            out.push_str(&format!(
                "{name} of {field} over {} values: {value}{note}",
                nums.len()
            ));
            Ok(out)
        }
        _ => {
            let largest = matches!(op, Op::Max | Op::ArgMax);
            // (record, value shown, order key)
            let ranked: Vec<(&Map<String, Value>, String, Option<f64>)> = if nums.is_empty() {
                values.iter().map(|(r, v)| (*r, show(v), None)).collect()
            } else {
                nums.iter()
                    .map(|(r, n)| (*r, n.to_string(), Some(n.as_f64())))
                    .collect()
            };
            let better = |a: &(&Map<String, Value>, String, Option<f64>),
                          b: &(&Map<String, Value>, String, Option<f64>)| {
                let o = match (a.2, b.2) {
                    (Some(x), Some(y)) => x.total_cmp(&y),
                    _ => a.1.cmp(&b.1),
                };
                if largest {
                    o.is_gt()
                } else {
                    o.is_lt()
                }
            };
            let mut best = &ranked[0];
            for r in &ranked[1..] {
                if better(r, best) {
                    best = r;
                }
            }
            let ties: Vec<_> = ranked
                .iter()
                .filter(|r| !better(r, best) && !better(best, r))
                .collect();
            out.push_str(&format!(
                "{name} of {field} over {} values: {}{note}\nrecord: {}",
                ranked.len(),
                best.1,
                record_line(best.0)
            ));
            if ties.len() > 1 {
                out.push_str(&format!("\n{} records share this value:", ties.len()));
                for t in ties.iter().skip(1).take(5) {
                    out.push_str(&format!("\nrecord: {}", record_line(t.0)));
                }
            }
            Ok(out)
        }
    }
}
