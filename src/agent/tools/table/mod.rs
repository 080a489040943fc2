//! The `table` tool: questions about records in a structured file, answered by code from the
//! file itself. CSV and TSV rows, JSON (an array of objects, an object of objects, one value a
//! line), YAML, TOML, INI and `.env` are read as records ([`read`]); a call filters them
//! (`where`) and applies one operation to one field: `get`, `count`, `sum`, `mean`, `min`,
//! `max`, `argmax`, `argmin` or `distinct`. The output is short and states the value, how many
//! records matched, and for `argmax`/`argmin` the whole record.
//!
//! A field that the file does not have is an error listing the fields it has, so the model can
//! correct its call; when the decoding is constrained and the file is known, the field is an
//! enum of those names ([`fields_with_values`], used by `choices::constrain_paths`).

pub mod csv;
mod ops;
pub mod read;
pub mod yaml;

use serde::Deserialize;
use serde_json::Value;

use super::files::{read_text, PATH_MAX_CHARS};
use super::{
    parse_args, FileEffect, PromptHint, Sandbox, Tool, ToolContext, ToolError, Verification,
};

pub use ops::Cmp;

/// The name of the table tool.
pub const TABLE: &str = "table";

/// The operations, as the schema offers them.
pub const OPS: [&str; 9] = [
    "get", "count", "sum", "mean", "min", "max", "argmax", "argmin", "distinct",
];

/// The operations as the schema offers them to a model: words a question uses, not a query
/// language's (a 0.5B planner offered `get`, `sum`, `mean` chose `get` for every total and
/// average). [`ops::Op::parse`] reads both. `minimum` and `maximum` show the record that holds
/// the value, so "which … is largest" and "what is the largest …" are one operation (`argmax`
/// and `argmin` stay readable but are not offered: with both offered, a 0.5B model asked
/// which run was fastest chose `maximum` and lost the run's name).
pub const OP_WORDS: [&str; 7] = [
    "value", "count", "total", "average", "minimum", "maximum", "distinct",
];

/// What a table call answers when no record meets its conditions.
pub const NO_MATCH: &str = "No record matches, so there is nothing to compute.";

/// Most bytes of a file the table tool reads.
const MAX_TABLE_BYTES: u64 = 8 * 1024 * 1024;

/// The `table` tool.
#[derive(Debug, Default, Clone, Copy)]
pub struct Table;

/// One condition of `where`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Condition {
    /// The field compared.
    pub field: String,
    /// How.
    pub cmp: Cmp,
    /// With what (a string, number or boolean).
    pub value: Value,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    path: String,
    op: String,
    #[serde(default)]
    field: Option<String>,
    #[serde(default, rename = "where")]
    conditions: Vec<Condition>,
}

/// The field names of the records of `text` (a file of kind `kind`), in order of first
/// appearance.
fn field_names(rows: &[serde_json::Map<String, Value>]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for r in rows {
        for k in r.keys() {
            if !out.contains(k) {
                out.push(k.clone());
            }
        }
    }
    out
}

/// Most distinct values of a field whose values a condition is offered as an enum.
const MAX_ENUM_VALUES: usize = 30;

/// Longest value offered in such an enum, in characters.
const MAX_ENUM_VALUE_CHARS: usize = 60;

/// A field of a table file and what its values are.
#[derive(Debug, Clone, PartialEq)]
pub struct FieldValues {
    /// The field's name.
    pub name: String,
    /// Every non-empty value is a number.
    pub numeric: bool,
    /// Its distinct text values when they are few and short ([`MAX_ENUM_VALUES`]); `None`
    /// otherwise, and for a numeric field.
    pub values: Option<Vec<String>>,
}

/// Most distinct text values of one field a [`Summary`] keeps.
const MAX_SUMMARY_VALUES: usize = 1000;

/// What a table file holds, for a typed call and for the focused query request
/// (`agent::query`): its fields, every field's distinct text values, and its first records.
#[derive(Debug, Clone, PartialEq)]
pub struct Summary {
    /// The fields, in order of first appearance.
    pub fields: Vec<FieldValues>,
    /// Per field (same order), its distinct non-empty text values in order of appearance, at
    /// most [`MAX_SUMMARY_VALUES`]; empty for a numeric field.
    pub distinct: Vec<Vec<String>>,
    /// Per field (same order), the smallest and largest value of a numeric field.
    pub range: Vec<Option<(f64, f64)>>,
    /// How many records the file holds.
    pub records: usize,
    /// The first records, each as `field=value, …`.
    pub first: Vec<String>,
}

/// How many records [`Summary::first`] shows.
const FIRST_RECORDS: usize = 3;

/// The [`Summary`] of the table file `path` in the workspace `ws`; `None` when it is not a
/// table file, cannot be read or has no fields.
pub fn summary(ws: &Sandbox, path: &str) -> Option<Summary> {
    let kind = read::kind_of(path)?;
    let (_, bytes) = ws.read_bytes(path, MAX_TABLE_BYTES).ok()?;
    let text = String::from_utf8(bytes).ok()?;
    let records = read::read(kind, &text).ok()?;
    let names = field_names(&records.rows);
    let mut fields = Vec::with_capacity(names.len());
    let mut all_distinct = Vec::with_capacity(names.len());
    let mut ranges = Vec::with_capacity(names.len());
    for name in names {
        let present: Vec<&Value> = records
            .rows
            .iter()
            .filter_map(|r| r.get(name.as_str()))
            .filter(|v| !matches!(v, Value::Null) && v.as_str() != Some(""))
            .collect();
        let numeric = !present.is_empty() && present.iter().all(|v| ops::num(v).is_some());
        let mut distinct: Vec<String> = Vec::new();
        let mut plain = true;
        for v in &present {
            let s = match v {
                Value::String(s) => s.clone(),
                Value::Bool(_) => v.to_string(),
                _ => {
                    plain = false;
                    continue;
                }
            };
            if !distinct.contains(&s) && distinct.len() < MAX_SUMMARY_VALUES {
                distinct.push(s);
            }
        }
        let few = plain
            && !distinct.is_empty()
            && distinct.len() <= MAX_ENUM_VALUES
            && distinct
                .iter()
                .all(|s| s.chars().count() <= MAX_ENUM_VALUE_CHARS);
        fields.push(FieldValues {
            name,
            numeric,
            values: (!numeric && few).then(|| distinct.clone()),
        });
        all_distinct.push(if numeric { Vec::new() } else { distinct });
        ranges.push(numeric.then(|| {
            present
                .iter()
                .filter_map(|v| ops::num(v).map(|n| n.as_f64()))
                .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), x| {
                    (lo.min(x), hi.max(x))
                })
        }));
    }
    if fields.is_empty() {
        return None;
    }
    Some(Summary {
        fields,
        distinct: all_distinct,
        range: ranges,
        records: records.rows.len(),
        first: records
            .rows
            .iter()
            .take(FIRST_RECORDS)
            .map(ops::record_line)
            .collect(),
    })
}

/// The fields of the table file `path` in the workspace `ws` with what their values are, in
/// order of first appearance, for a typed `field` argument and typed conditions; `None` when
/// it is not a table file, cannot be read or has no fields.
pub fn fields_with_values(ws: &Sandbox, path: &str) -> Option<Vec<FieldValues>> {
    summary(ws, path).map(|s| s.fields)
}

/// What a number in a condition looks like ("12", "-3.5", "1,250.00").
const NUMBER_PATTERN: &str = "^-?[0-9][0-9,]*(\\.[0-9]+)?$";

/// The schema of one `where` condition over `fields`: the value first, then the field. A text
/// field of few values takes one of them, so the value the question names ("paid") picks its
/// own field (`status`); a numeric field takes a number. A 0.5B planner otherwise copied the
/// field it computes over into the condition ("amount eq paid").
fn condition_schema(fields: &[FieldValues]) -> Value {
    let cmp_all = serde_json::json!({"enum": ["eq", "ne", "lt", "le", "gt", "ge", "contains"]});
    let branch = |value: Value, field: Value, cmp: Value| {
        serde_json::json!({
            "type": "object",
            "properties": {"value": value, "field": field, "cmp": cmp},
            "required": ["value", "field", "cmp"],
            "additionalProperties": false
        })
    };
    let mut branches: Vec<Value> = Vec::new();
    for f in fields {
        if let Some(values) = &f.values {
            branches.push(branch(
                serde_json::json!({ "enum": values }),
                serde_json::json!({ "const": f.name }),
                serde_json::json!({"enum": ["eq", "ne", "contains"]}),
            ));
        }
    }
    let numeric: Vec<&str> = fields
        .iter()
        .filter(|f| f.numeric)
        .map(|f| f.name.as_str())
        .collect();
    if !numeric.is_empty() {
        branches.push(branch(
            serde_json::json!({"type": "string", "maxLength": 40, "pattern": NUMBER_PATTERN}),
            serde_json::json!({ "enum": numeric }),
            cmp_all.clone(),
        ));
    }
    let open: Vec<&str> = fields
        .iter()
        .filter(|f| !f.numeric && f.values.is_none())
        .map(|f| f.name.as_str())
        .collect();
    if !open.is_empty() {
        branches.push(branch(
            serde_json::json!({"type": "string", "maxLength": 120}),
            serde_json::json!({ "enum": open }),
            cmp_all,
        ));
    }
    serde_json::json!({ "anyOf": branches })
}

/// The schema of the table tool; `fields`, when known, makes `field` an enum of them and each
/// condition a value of its field ([`condition_schema`]).
pub fn schema(paths: Option<&[String]>, known: Option<&[FieldValues]>) -> Value {
    let names: Option<Vec<String>> = known.map(|fs| fs.iter().map(|f| f.name.clone()).collect());
    let fields = names.as_deref();
    let path = match paths {
        Some(p) => serde_json::json!({ "enum": p }),
        None => serde_json::json!({"type": "string", "maxLength": PATH_MAX_CHARS}),
    };
    let field = match fields {
        Some(f) => serde_json::json!({ "enum": f }),
        None => {
            serde_json::json!({"type": "string", "maxLength": 120, "description": "a column or key name; a nested key as a.b.c"})
        }
    };
    let item = match known {
        Some(fs) => condition_schema(fs),
        None => serde_json::json!({
            "type": "object",
            "properties": {
                "field": field,
                "cmp": {"enum": ["eq", "ne", "lt", "le", "gt", "ge", "contains"]},
                "value": {"type": "string", "maxLength": 120, "description": "a number or text; numbers compare by value"}
            },
            "required": ["field", "cmp", "value"],
            "additionalProperties": false
        }),
    };
    serde_json::json!({
        "type": "object",
        "properties": {
            "path": path,
            "field": field,
            "op": {"enum": OP_WORDS},
            "where": {"type": "array", "maxItems": 4, "items": item}
        },
        "required": ["path", "op"],
        "additionalProperties": false
    })
}

impl Tool for Table {
    fn name(&self) -> &str {
        TABLE
    }
    fn needs_workspace(&self) -> bool {
        true
    }
    fn description(&self) -> &str {
        "Answer a question about the records of a data file (.csv .tsv .json .jsonl .yaml .toml .ini .env) by computing it: op value (a field's value), count, total, average, minimum, maximum (each with the record that holds it), distinct (values with counts); field is a column or key name (nested keys as a.b.c); where filters records: [{\"field\": \"<field>\", \"cmp\": \"eq\", \"value\": \"<value>\"}] (cmp: eq ne lt le gt ge contains)."
    }
    fn args_schema(&self) -> Value {
        schema(None, None)
    }
    fn file_effect(&self) -> FileEffect {
        FileEffect::Reads
    }
    /// Any answer that returned is what the file holds.
    fn verify(&self, _args: &Value, _output: &str, _ctx: &ToolContext) -> Verification {
        Verification::Holds
    }
    fn prompt_hint(&self) -> PromptHint {
        PromptHint {
            rule: Some("- Counts, totals, averages, largest and smallest over a data file's records come from the table tool.\n"),
            examples: None,
        }
    }
    fn call(&self, args: Value, ctx: &ToolContext) -> Result<String, ToolError> {
        let a: Args = parse_args(args)?;
        let op = ops::Op::parse(&a.op)?;
        let kind = read::kind_of(&a.path).ok_or_else(|| {
            ToolError::invalid(format!(
                "{} is not a data file the table tool reads ({}); use read_file or search_text for it.",
                a.path,
                read::KINDS
            ))
        })?;
        let text = read_text(ctx, &a.path)?;
        let records = read::read(kind, &text).map_err(|e| {
            ToolError::failed(format!("{} could not be read as {kind}: {e}.", a.path))
        })?;
        ops::run(&a.path, &records, op, a.field.as_deref(), &a.conditions)
    }
}

#[cfg(test)]
mod tests;
