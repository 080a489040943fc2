//! The tolerant action parser, for planner text that was not produced under our grammar (a
//! remote model, a scripted transcript, an unconstrained local run).
//!
//! It strips code fences, finds the first balanced JSON object that parses (repairing trailing
//! commas), and accepts the common shapes models write: `{"thought","tool","args"}`,
//! `{"thought","final_answer"}`, `{"action": {...}}`, `{"name","arguments"}` with arguments as an
//! object or a JSON string, `action_input`, and so on. Failure is a typed `ActionParseError`
//! whose text is fed back to the model as an observation.

use serde_json::{Map, Value};

use super::tools::FINAL_ANSWER;
use super::types::Action;

/// A parsed planner output.
#[derive(Debug, Clone, PartialEq)]
pub struct ParsedAction {
    /// The thought (empty when the model gave none).
    pub thought: String,
    /// The action.
    pub action: Action,
}

/// Why planner text did not parse into an action.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ActionParseError {
    /// Nothing but whitespace.
    #[error("the reply was empty")]
    Empty,
    /// No `{...}` object in the text.
    #[error("the reply contains no JSON object")]
    NoJsonObject,
    /// A `{...}` was found but is not valid JSON.
    #[error("the JSON object is not valid: {error}")]
    InvalidJson {
        /// The JSON error.
        error: String,
    },
    /// Valid JSON but no tool name and no final answer.
    #[error("the JSON object has no \"tool\" and no final answer (keys: {keys})")]
    MissingTool {
        /// The keys it had.
        keys: String,
    },
    /// The tool name is not a string or is empty.
    #[error("\"tool\" must be a non-empty string naming one tool")]
    BadToolName,
}

impl ActionParseError {
    /// The observation text for the model.
    pub fn for_model(&self) -> String {
        format!(
            "Your reply could not be used: {self}. Reply with exactly one JSON object: {{\"thought\": \"...\", \"tool\": \"<tool name>\", \"args\": {{...}}}}, or {{\"thought\": \"...\", \"tool\": \"final_answer\", \"args\": {{\"answer\": \"...\"}}}} to finish."
        )
    }
}

/// Strip Markdown code fences: return the inside of the first fenced block, if any.
fn strip_fences(text: &str) -> &str {
    let Some(start) = text.find("```") else {
        return text;
    };
    let after = &text[start + 3..];
    // Skip a language tag on the fence line.
    let body_start = after.find('\n').map_or(0, |i| i + 1);
    let tag = &after[..body_start.saturating_sub(1).min(after.len())];
    let body = if tag.trim().chars().all(|c| c.is_ascii_alphanumeric()) {
        &after[body_start..]
    } else {
        after
    };
    match body.find("```") {
        Some(end) => &body[..end],
        None => body,
    }
}

/// Byte ranges of balanced `{...}` spans, in order of their opening brace, string-aware.
fn balanced_objects(text: &str) -> Vec<(usize, usize)> {
    let bytes = text.as_bytes();
    let mut spans = Vec::new();
    let mut search_from = 0;
    while let Some(rel) = text[search_from..].find('{') {
        let start = search_from + rel;
        let mut depth = 0usize;
        let mut in_str = false;
        let mut escaped = false;
        let mut end = None;
        for (i, &b) in bytes.iter().enumerate().skip(start) {
            if in_str {
                if escaped {
                    escaped = false;
                } else if b == b'\\' {
                    escaped = true;
                } else if b == b'"' {
                    in_str = false;
                }
                continue;
            }
            match b {
                b'"' => in_str = true,
                b'{' => depth += 1,
                b'}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = Some(i + 1);
                        break;
                    }
                }
                _ => {}
            }
        }
        match end {
            Some(e) => {
                spans.push((start, e));
                search_from = e;
            }
            None => {
                // Unbalanced: offer the rest as a candidate (it will fail to parse with a reason).
                spans.push((start, text.len()));
                break;
            }
        }
        if spans.len() > 16 {
            break;
        }
    }
    spans
}

/// Remove trailing commas before `}` or `]` outside strings.
fn remove_trailing_commas(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let chars: Vec<char> = s.chars().collect();
    let mut in_str = false;
    let mut escaped = false;
    for (i, &c) in chars.iter().enumerate() {
        if in_str {
            out.push(c);
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_str = false;
            }
            continue;
        }
        if c == '"' {
            in_str = true;
        }
        if c == ',' {
            let next = chars[i + 1..].iter().find(|c| !c.is_whitespace());
            if matches!(next, Some('}') | Some(']')) {
                continue;
            }
        }
        out.push(c);
    }
    out
}

fn first_string(obj: &Map<String, Value>, keys: &[&str]) -> Option<String> {
    keys.iter().find_map(|k| match obj.get(*k) {
        Some(Value::String(s)) => Some(s.clone()),
        _ => None,
    })
}

fn value_to_answer(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Object(m) => m
            .get("answer")
            .map(value_to_answer)
            .unwrap_or_else(|| v.to_string()),
        other => other.to_string(),
    }
}

const THOUGHT_KEYS: &[&str] = &["thought", "thoughts", "reasoning", "reason", "think"];
const TOOL_KEYS: &[&str] = &["tool", "tool_name", "action", "name", "function"];
const ARGS_KEYS: &[&str] = &[
    "args",
    "arguments",
    "tool_args",
    "tool_input",
    "action_input",
    "parameters",
    "params",
    "input",
];
const FINAL_KEYS: &[&str] = &["final_answer", "answer", "final"];
const FINAL_TOOLS: &[&str] = &[FINAL_ANSWER, "final", "finish", "answer", "final answer"];

/// Interpret one JSON object as an action.
pub fn action_from_object(obj: &Map<String, Value>) -> Result<ParsedAction, ActionParseError> {
    let thought = first_string(obj, THOUGHT_KEYS).unwrap_or_default();
    // {"action": {"tool": ..., "args": ...}} or {"function": {"name": ..., "arguments": ...}}
    for key in ["action", "function", "tool_call"] {
        if let Some(Value::Object(inner)) = obj.get(key) {
            let mut parsed = action_from_object(inner)?;
            if parsed.thought.is_empty() {
                parsed.thought = thought;
            }
            return Ok(parsed);
        }
    }
    let tool_val = TOOL_KEYS.iter().find_map(|k| obj.get(*k));
    if let Some(tool_val) = tool_val {
        let name = match tool_val {
            Value::String(s) if !s.trim().is_empty() => s.trim().to_string(),
            _ => return Err(ActionParseError::BadToolName),
        };
        let mut args = ARGS_KEYS
            .iter()
            .find_map(|k| obj.get(*k))
            .cloned()
            .unwrap_or_else(|| Value::Object(Map::new()));
        // Arguments written as a JSON string: '{"arguments": "{\"x\": 1}"}'.
        if let Value::String(s) = &args {
            if let Ok(v @ Value::Object(_)) = serde_json::from_str::<Value>(s.trim()) {
                args = v;
            }
        }
        if FINAL_TOOLS.contains(&name.to_ascii_lowercase().as_str()) {
            let answer = match &args {
                Value::Object(m) if m.is_empty() => {
                    match FINAL_KEYS.iter().find_map(|k| obj.get(*k)) {
                        Some(v) => value_to_answer(v),
                        None => String::new(),
                    }
                }
                other => value_to_answer(other),
            };
            return Ok(ParsedAction {
                thought,
                action: Action::Final { answer },
            });
        }
        return Ok(ParsedAction {
            thought,
            action: Action::ToolCall { name, args },
        });
    }
    if let Some(v) = FINAL_KEYS.iter().find_map(|k| obj.get(*k)) {
        return Ok(ParsedAction {
            thought,
            action: Action::Final {
                answer: value_to_answer(v),
            },
        });
    }
    Err(ActionParseError::MissingTool {
        keys: obj.keys().cloned().collect::<Vec<_>>().join(", "),
    })
}

/// Parse planner text into a thought and an action.
pub fn parse_action(text: &str) -> Result<ParsedAction, ActionParseError> {
    if text.trim().is_empty() {
        return Err(ActionParseError::Empty);
    }
    let mut candidates: Vec<&str> = Vec::new();
    let inner = strip_fences(text);
    if inner.len() != text.len() {
        candidates.push(inner);
    }
    candidates.push(text);
    let mut first_err: Option<ActionParseError> = None;
    for cand in candidates {
        for (s, e) in balanced_objects(cand) {
            let slice = &cand[s..e];
            let parsed = serde_json::from_str::<Value>(slice)
                .or_else(|_| serde_json::from_str::<Value>(&remove_trailing_commas(slice)));
            match parsed {
                Ok(Value::Object(obj)) => match action_from_object(&obj) {
                    Ok(a) => return Ok(a),
                    Err(err) => {
                        first_err.get_or_insert(err);
                    }
                },
                Ok(_) => {}
                Err(err) => {
                    first_err.get_or_insert(ActionParseError::InvalidJson {
                        error: err.to_string(),
                    });
                }
            }
        }
    }
    Err(first_err.unwrap_or(ActionParseError::NoJsonObject))
}
