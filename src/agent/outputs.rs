//! What the steps' tool outputs hold, read the same way by every part that answers from them
//! (`answer`, `program`, `narrow`): whether an output counts, its whole text, whether a
//! `read_file` showed a whole file, the path a call named, a CSV row as `name=value` pairs.

use serde_json::Value;

use super::tools::choices::trim_rel;
use super::types::{Action, ObservationKind, Step, ToolErrorKind};

/// The tool outputs worth answering from: normal outputs, and errors that are facts about the
/// world (a missing file), not the model's mistakes.
pub fn usable(step: &Step) -> bool {
    match step.observation.kind {
        ObservationKind::Output => true,
        ObservationKind::ToolError { kind } => kind == ToolErrorKind::NotFound,
        _ => false,
    }
}

/// Whether a `read_file` output shows the whole file ("app.log (3000 lines):"), not a range of
/// it ("lines 1-12 of 3000").
pub fn is_whole_read(text: &str) -> bool {
    text.lines().next().is_some_and(|h| h.ends_with(" lines):"))
}

/// The path and whole output of `step` when it read a whole file the task names (`named`):
/// "app.log (3000 lines):", not a range of it ("lines 1-12 of 3000").
pub fn whole_read_of_named<'a>(step: &'a Step, named: &[String]) -> Option<(&'a str, &'a str)> {
    let is_read =
        matches!(&step.action, Some(Action::ToolCall { name, .. }) if name == "read_file");
    let path = call_path(step)?;
    let text = whole_text(step);
    let whole = is_whole_read(text);
    (is_read && whole && named.iter().any(|n| trim_rel(n) == path)).then_some((path, text))
}

/// A CSV row under `header` as `name=value` pairs ("item=widget, qty=845"); `None` when its
/// field count differs from the header's.
pub fn csv_row(header: &[String], content: &str) -> Option<String> {
    let fields: Vec<&str> = content.split(',').map(str::trim).collect();
    (fields.len() == header.len()).then(|| {
        let pairs: Vec<String> = header
            .iter()
            .zip(&fields)
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        pairs.join(", ")
    })
}

/// A step's whole output: the full text of a condensed observation, else the text.
pub fn whole_text(step: &Step) -> &str {
    step.observation
        .full
        .as_deref()
        .unwrap_or(&step.observation.text)
}

/// Whether `w` is a camelCase or PascalCase identifier (`MaxBatchSize`, `maxConnections`): three
/// capitals that start a lower-case run, or a lower-case start and one such capital in seven or
/// more letters. Product names with two humps ("TypeScript", "GitHub") are not.
pub fn camel_case(w: &str) -> bool {
    let c: Vec<char> = w.chars().collect();
    if !c.iter().all(|x| x.is_ascii_alphanumeric()) {
        return false;
    }
    let humps = c
        .windows(2)
        .filter(|p| p[0].is_ascii_uppercase() && p[1].is_ascii_lowercase())
        .count();
    humps >= 3 || (c.first().is_some_and(char::is_ascii_lowercase) && humps >= 1 && c.len() >= 7)
}

/// The path a step's call named, as the file tools resolve it ("./a/" is "a").
pub fn call_path(step: &Step) -> Option<&str> {
    match &step.action {
        Some(Action::ToolCall { args, .. }) => {
            args.get("path").and_then(Value::as_str).map(trim_rel)
        }
        _ => None,
    }
}

/// The path a `table` call asked when it answered (it succeeded and some record matched);
/// `None` for any other step. What narrowing rule 16 and the answer step's shown steps read.
pub fn table_answer_path(step: &Step) -> Option<&str> {
    let table = matches!(&step.action, Some(Action::ToolCall { name, .. })
        if name == super::tools::table::TABLE);
    let answered = step.observation.kind == ObservationKind::Output
        && !step
            .observation
            .text
            .contains(super::tools::table::NO_MATCH);
    if table && answered {
        call_path(step)
    } else {
        None
    }
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
