//! A YAML reader for configuration and data files: block mappings and sequences by
//! indentation, `- key: value` items, flow lists and maps on one line (`[a, b]`,
//! `{a: 1}`), quoted scalars, `|` and `>` block text, comments and `---`. Anchors, tags and
//! multi-document streams are not read (the first document is).

use serde_json::{Map, Value};

/// Why a YAML text could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {what}")]
pub struct YamlError {
    /// 1-based line.
    pub line: usize,
    /// What is wrong.
    pub what: String,
}

/// One content line: its indentation, its text (comment removed) and its 1-based number.
struct Ln {
    indent: usize,
    text: String,
    no: usize,
}

/// `s` without a trailing comment (a `#` at the start or after a space, outside quotes).
fn strip_comment(s: &str) -> &str {
    let mut quote: Option<char> = None;
    let mut prev = ' ';
    for (i, c) in s.char_indices() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (None, '"' | '\'') if prev == ' ' || prev == ':' || i == 0 => quote = Some(c),
            (None, '#') if prev == ' ' || i == 0 => return &s[..i],
            _ => {}
        }
        prev = c;
    }
    s
}

/// The value of a YAML text.
pub fn parse(text: &str) -> Result<Value, YamlError> {
    let mut lines = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let trimmed = raw.trim();
        if trimmed == "---" && lines.is_empty() {
            continue;
        }
        if trimmed == "---" || trimmed == "..." {
            break; // the first document only
        }
        let body = strip_comment(raw.trim_end());
        if body.trim().is_empty() {
            continue;
        }
        let indent = raw.len() - raw.trim_start().len();
        lines.push(Ln {
            indent,
            text: body.trim().to_string(),
            no: i + 1,
        });
    }
    if lines.is_empty() {
        return Ok(Value::Null);
    }
    let mut pos = 0;
    let indent = lines[0].indent;
    let v = block(&mut lines, &mut pos, indent)?;
    if let Some(l) = lines.get(pos) {
        return Err(YamlError {
            line: l.no,
            what: "indentation does not match any open block".into(),
        });
    }
    Ok(v)
}

fn is_item(text: &str) -> bool {
    text == "-" || text.starts_with("- ")
}

/// `key: value` split at the first `: ` (or a final `:`) outside quotes.
fn key_value(text: &str) -> Option<(String, &str)> {
    let (key, rest) = if let Some(q @ ('"' | '\'')) = text.chars().next() {
        let end = text[1..].find(q)? + 1;
        (text[1..end].to_string(), text[end + 1..].trim_start())
    } else {
        let at = text
            .find(": ")
            .or_else(|| text.ends_with(':').then(|| text.len() - 1))?;
        (text[..at].trim().to_string(), &text[at..])
    };
    let value = rest.strip_prefix(':')?;
    (!key.is_empty()).then_some((key, value.trim()))
}

/// The block starting at `lines[*pos]`, whose lines sit at `indent`.
fn block(lines: &mut [Ln], pos: &mut usize, indent: usize) -> Result<Value, YamlError> {
    if is_item(&lines[*pos].text) {
        let mut items = Vec::new();
        while *pos < lines.len() && lines[*pos].indent == indent && is_item(&lines[*pos].text) {
            let rest = lines[*pos].text[1..].trim_start().to_string();
            if rest.is_empty() {
                *pos += 1;
                items.push(nested(lines, pos, indent)?);
            } else {
                // "- key: v" opens a mapping whose lines sit where "key" starts.
                let inner = indent + (lines[*pos].text.len() - rest.len());
                lines[*pos].indent = inner;
                lines[*pos].text = rest;
                if key_value(&lines[*pos].text).is_some() || is_item(&lines[*pos].text) {
                    items.push(block(lines, pos, inner)?);
                } else {
                    items.push(scalar(&lines[*pos].text));
                    *pos += 1;
                }
            }
        }
        return Ok(Value::Array(items));
    }
    let mut map = Map::new();
    while *pos < lines.len() && lines[*pos].indent == indent && !is_item(&lines[*pos].text) {
        let no = lines[*pos].no;
        let text = lines[*pos].text.clone();
        let (key, value) = key_value(&text).ok_or_else(|| YamlError {
            line: no,
            what: format!("expected `key: value`, found {text:?}"),
        })?;
        *pos += 1;
        let v = match value {
            "" => {
                // A sequence may sit at its key's own indentation.
                let same_level_list = lines
                    .get(*pos)
                    .is_some_and(|l| l.indent == indent && is_item(&l.text));
                if same_level_list {
                    block(lines, pos, indent)?
                } else {
                    nested(lines, pos, indent)?
                }
            }
            "|" | ">" | "|-" | ">-" | "|+" | ">+" => {
                let mut parts = Vec::new();
                while *pos < lines.len() && lines[*pos].indent > indent {
                    parts.push(lines[*pos].text.clone());
                    *pos += 1;
                }
                Value::String(parts.join(if value.starts_with('|') { "\n" } else { " " }))
            }
            v => scalar(v),
        };
        map.insert(key, v);
    }
    Ok(Value::Object(map))
}

/// The block under a line at `indent`: the next line's, when it is indented deeper; else null.
fn nested(lines: &mut [Ln], pos: &mut usize, indent: usize) -> Result<Value, YamlError> {
    match lines.get(*pos) {
        Some(l) if l.indent > indent => {
            let inner = l.indent;
            block(lines, pos, inner)
        }
        _ => Ok(Value::Null),
    }
}

/// Split a flow collection's inside at top-level commas.
fn flow_parts(inner: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let (mut depth, mut start, mut quote) = (0i32, 0usize, None::<char>);
    for (i, c) in inner.char_indices() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '"' | '\'') => quote = Some(c),
            (None, '[' | '{') => depth += 1,
            (None, ']' | '}') => depth -= 1,
            (None, ',') if depth == 0 => {
                parts.push(inner[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(inner[start..].trim());
    parts.retain(|p| !p.is_empty());
    parts
}

/// A scalar or a one-line flow collection.
pub fn scalar(text: &str) -> Value {
    let t = text.trim();
    if let Some(inner) = t.strip_prefix('[').and_then(|x| x.strip_suffix(']')) {
        return Value::Array(flow_parts(inner).into_iter().map(scalar).collect());
    }
    if let Some(inner) = t.strip_prefix('{').and_then(|x| x.strip_suffix('}')) {
        let mut map = Map::new();
        for part in flow_parts(inner) {
            match key_value(part) {
                Some((k, v)) => map.insert(k, scalar(v)),
                None => map.insert(part.to_string(), Value::Null),
            };
        }
        return Value::Object(map);
    }
    for q in ['"', '\''] {
        if t.len() >= 2 && t.starts_with(q) && t.ends_with(q) {
            return Value::String(t[1..t.len() - 1].to_string());
        }
    }
    match t {
        "" | "~" | "null" | "Null" | "NULL" => return Value::Null,
        "true" | "True" | "TRUE" => return Value::Bool(true),
        "false" | "False" | "FALSE" => return Value::Bool(false),
        _ => {}
    }
    let plain = t.replace('_', "");
    if let Ok(i) = plain.parse::<i64>() {
        return Value::from(i);
    }
    if plain.contains(['.', 'e', 'E']) {
        if let Some(n) = plain
            .parse::<f64>()
            .ok()
            .filter(|f| f.is_finite())
            .and_then(serde_json::Number::from_f64)
        {
            return Value::Number(n);
        }
    }
    Value::String(t.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn mappings_sequences_and_scalars() {
        let text = "\
# service settings
---
database:
  pool:
    max_size: 24   # connections
    timeout: 2.5
  host: \"db.internal\"
replicas:
- name: east
  weight: 3
- name: west
  weight: 1
tags: [a, 'b c', 3]
limits: {cpu: 2, memory: 4Gi}
motd: |
  line one
  line two
enabled: true
empty:
";
        assert_eq!(
            parse(text).expect("parses"),
            json!({
                "database": {"pool": {"max_size": 24, "timeout": 2.5}, "host": "db.internal"},
                "replicas": [{"name": "east", "weight": 3}, {"name": "west", "weight": 1}],
                "tags": ["a", "b c", 3],
                "limits": {"cpu": 2, "memory": "4Gi"},
                "motd": "line one\nline two",
                "enabled": true,
                "empty": null
            })
        );
        let list = "- 1\n- two\n-\n  k: v\n- - nested\n";
        assert_eq!(
            parse(list).expect("parses"),
            json!([1, "two", {"k": "v"}, ["nested"]])
        );
        assert_eq!(
            parse("url: http://x:8080/a#frag\n").expect("p"),
            json!({"url": "http://x:8080/a#frag"})
        );
    }

    #[test]
    fn bad_indentation_is_an_error_with_its_line() {
        let e = parse("a:\n    b: 1\n  c: 2\n").expect_err("bad");
        assert_eq!(e.line, 3);
        let e = parse("a: 1\njust words\n").expect_err("bad");
        assert_eq!(e.line, 2);
    }
}
