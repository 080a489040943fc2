//! Outputs that always complete: the constrained JSON the planners generate is bounded by its
//! schema, and the token limit of each request is at least that bound.
//!
//! llguidance's JSON grammar by default allows any run of whitespace between tokens and
//! `\uXXXX` escapes in strings, so a schema with `maxLength` on every string still admits
//! outputs of any length; and a token limit below the longest output the schema admits lets a
//! model that writes a 300-digit number be cut mid-string (OODA's Decide had 9 such parse
//! failures on the dev split). Here the schema fixes the separators (`", "`, `": "`, as the
//! prompts show them) and drops `\u` escapes ([`strict`]), and [`max_output_bytes`] computes
//! the longest output in bytes. Every token is at least one byte, so a request whose token
//! limit is at least that bound cannot be cut by the limit: zero parse failures from cut
//! output is a property of the grammar, not of the model.

use serde_json::{json, Value};

/// `schema` with llguidance's options for bounded output: no free whitespace, the separators
/// the prompts use, and no `\u` escapes.
pub fn strict(mut schema: Value) -> Value {
    if let Some(o) = schema.as_object_mut() {
        o.insert(
            "x-guidance".into(),
            json!({
                "whitespace_flexible": false,
                "item_separator": ", ",
                "key_separator": ": ",
                "json_allowed_escapes": "nrbtf\\\""
            }),
        );
    }
    schema
}

/// Most UTF-8 bytes one character of a JSON string can take (a four-byte character; an
/// escape such as `\n` takes two).
const BYTES_PER_CHAR: usize = 4;

/// The longest output (in bytes) `schema` admits under [`strict`]'s options, or `None` when it
/// admits outputs of any length (a string without `maxLength`, an array without `maxItems`,
/// an object open to other properties, a number without bounds).
pub fn max_output_bytes(schema: &Value) -> Option<usize> {
    let o = schema.as_object()?;
    if let Some(c) = o.get("const") {
        return Some(c.to_string().len());
    }
    if let Some(Value::Array(values)) = o.get("enum") {
        return values.iter().map(|v| v.to_string().len()).max();
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(Value::Array(branches)) = o.get(key) {
            return branches
                .iter()
                .map(max_output_bytes)
                .try_fold(0usize, |m, b| b.map(|b| m.max(b)));
        }
    }
    match o.get("type").and_then(Value::as_str)? {
        "string" => {
            let n = o.get("maxLength").and_then(Value::as_u64)? as usize;
            Some(2 + n * BYTES_PER_CHAR)
        }
        "integer" => {
            // Digits of the larger bound, and a sign.
            let lo = o.get("minimum").and_then(Value::as_i64)?;
            let hi = o.get("maximum").and_then(Value::as_i64)?;
            Some(lo.to_string().len().max(hi.to_string().len()) + 1)
        }
        "boolean" => Some(5),
        "null" => Some(4),
        "object" => {
            if o.get("additionalProperties") != Some(&Value::Bool(false)) {
                return None;
            }
            let props = match o.get("properties") {
                Some(Value::Object(p)) => p,
                None => return Some(2),
                Some(_) => return None,
            };
            let mut n = 2;
            for (k, v) in props {
                // "key": value, (quotes, ": ", ", ")
                n += k.len() + 2 + 2 + max_output_bytes(v)? + 2;
            }
            Some(n)
        }
        "array" => {
            let items = max_output_bytes(o.get("items")?)?;
            let max = o.get("maxItems").and_then(Value::as_u64)? as usize;
            Some(2 + max * (items + 2))
        }
        _ => None,
    }
}

/// The token limit of a request constrained by `schema`: `wanted`, raised to the schema's
/// bound so the limit can never cut a valid output (unbounded schemas keep `wanted`).
pub fn token_limit(schema: &Value, wanted: usize) -> usize {
    max_output_bytes(schema).map_or(wanted, |b| b.max(wanted))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounded_schemas_have_a_bound_and_open_ones_do_not() {
        let s = json!({"type": "object", "properties": {"a": {"type": "string", "maxLength": 10}, "b": {"const": "x"}}, "required": ["a", "b"], "additionalProperties": false});
        // {"a": "<10 chars, 4 bytes each>", "b": "x"}
        assert_eq!(
            max_output_bytes(&s),
            Some(2 + (1 + 2 + 2 + 42 + 2) + (1 + 2 + 2 + 3 + 2))
        );
        let open = json!({"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": false});
        assert_eq!(max_output_bytes(&open), None);
        let extra = json!({"type": "object", "properties": {}});
        assert_eq!(max_output_bytes(&extra), None);
        let arr = json!({"type": "array", "maxItems": 3, "items": {"enum": ["ab", "c"]}});
        assert_eq!(max_output_bytes(&arr), Some(2 + 3 * (4 + 2)));
        assert_eq!(max_output_bytes(&json!({"type": "number"})), None);
        assert_eq!(
            max_output_bytes(&json!({"type": "integer", "minimum": 1, "maximum": 100000})),
            Some(7)
        );
        assert_eq!(token_limit(&open, 256), 256);
        assert!(token_limit(&s, 8) >= 60);
    }

    #[test]
    fn every_builtin_tool_s_action_is_bounded() {
        use crate::agent::planner::action_schema;
        use crate::agent::tools::{ShellPolicy, Toolset};
        let tools = Toolset::builtin(Some(ShellPolicy::default()));
        let open: Vec<String> = tools
            .iter()
            .filter(|t| max_output_bytes(&action_schema(&tools.only(t.name()), 120)).is_none())
            .map(|t| format!("{}: {}", t.name(), t.args_schema()))
            .collect();
        assert!(open.is_empty(), "arguments of any length: {open:#?}");
    }

    #[test]
    fn the_orient_extraction_is_bounded() {
        let s = crate::agent::ooda::orient::extraction_schema();
        assert!(max_output_bytes(&s).is_some(), "{s}");
    }

    #[test]
    fn strict_sets_the_separators_the_prompts_show() {
        let s = strict(json!({"type": "object"}));
        assert_eq!(s["x-guidance"]["whitespace_flexible"], json!(false));
        assert_eq!(s["x-guidance"]["item_separator"], json!(", "));
    }
}
