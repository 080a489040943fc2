//! `read_file`, and the preview a condensed long read shows.

use serde::Deserialize;

use super::search::{rank_partial, rare_in, task_words, Matcher, RARE_LINES, RARE_MAX_COUNT};
use super::{read_text, PATH_MAX_CHARS};
use crate::agent::tools::{
    parse_args, FileEffect, PromptHint, Tool, ToolContext, ToolError, Verification,
};

/// Files up to this many lines are always shown whole.
/// The fewest lines a ranged read of a long file shows.
pub const MIN_WINDOW_LINES: usize = 12;

const SHORT_FILE_LINES: usize = 200;

/// `read_file`: the text of a file in the workspace, with line numbers, optionally a range.
#[derive(Debug, Default, Clone, Copy)]
pub struct ReadFile;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ReadArgs {
    path: String,
    #[serde(default)]
    start_line: Option<usize>,
    #[serde(default)]
    end_line: Option<usize>,
    #[serde(default)]
    max_lines: Option<usize>,
}

impl Tool for ReadFile {
    fn name(&self) -> &str {
        "read_file"
    }
    fn needs_workspace(&self) -> bool {
        true
    }
    fn description(&self) -> &str {
        "Read a text file in the workspace; every line is shown with its line number (\"<line number>: <text>\"). Path is relative to the workspace, e.g. \"notes.txt\" or \"src/main.rs\". Optional start_line and end_line (1-based, inclusive) read part of a long file. Read a file once, then answer from what it showed: find the line that names exactly what the task asks for."
    }
    fn args_schema(&self) -> serde_json::Value {
        serde_json::json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "maxLength": PATH_MAX_CHARS},
                "start_line": {"type": "integer", "minimum": 1, "maximum": 10_000_000},
                "end_line": {"type": "integer", "minimum": 1, "maximum": 10_000_000}
            },
            "required": ["path"],
            "additionalProperties": false
        })
    }
    /// A read returns text (an empty file says so).
    fn verify(&self, _args: &serde_json::Value, output: &str, _ctx: &ToolContext) -> Verification {
        if output.trim().is_empty() {
            Verification::Broken("read_file returned nothing".into())
        } else {
            Verification::Holds
        }
    }
    fn file_effect(&self) -> FileEffect {
        FileEffect::Reads
    }
    /// `max_lines` (old callers): a range like `end_line`, nothing more.
    fn tolerated_args(&self) -> &[&'static str] {
        &["max_lines"]
    }
    fn prompt_hint(&self) -> PromptHint {
        PromptHint {
            rule: Some(
                "- Facts about files come from list_dir, read_file or search_text. Never guess.\n",
            ),
            examples: Some(READ_FILE_EXAMPLE),
        }
    }
    fn call(&self, args: serde_json::Value, ctx: &ToolContext) -> Result<String, ToolError> {
        let a: ReadArgs = parse_args(args)?;
        let text = read_text(ctx, &a.path)?;
        let total = text.lines().count();
        if total == 0 {
            return Ok(format!("({} is empty)", a.path));
        }
        // A short file is shown whole whatever range was asked: a small model fills optional
        // arguments and would otherwise read one line of a file whose answer is on line 5.
        let (start_line, end_line, max_lines) = if total <= SHORT_FILE_LINES {
            (None, None, None)
        } else {
            (a.start_line, a.end_line, a.max_lines)
        };
        let start = start_line.unwrap_or(1).max(1);
        if start > total {
            return Err(ToolError::invalid(format!(
                "start_line {start} is past the end; {} has {total} lines.",
                a.path
            )));
        }
        let end = match (end_line, max_lines) {
            (Some(e), _) if e < start => {
                return Err(ToolError::invalid(format!(
                    "end_line {e} is before start_line {start}."
                )))
            }
            (Some(e), _) => e.min(total),
            (None, Some(n)) => start.saturating_add(n.max(1) - 1).min(total),
            (None, None) => total,
        };
        // A window of a few lines is widened: a small model asks for line 1 to line 1 of a
        // 3,000-line log by habit, and then reads the same line again.
        let end = end.max(start.saturating_add(MIN_WINDOW_LINES - 1).min(total));
        let mut out = if start == 1 && end == total {
            format!("{} ({total} lines):\n", a.path)
        } else {
            format!("{} lines {start}-{end} of {total}:\n", a.path)
        };
        for (i, line) in text
            .lines()
            .enumerate()
            .skip(start - 1)
            .take(end + 1 - start)
        {
            out.push_str(&format!("{}: {}\n", i + 1, line));
        }
        // A part of a long log: its events elsewhere follow (a small model reads its first
        // lines and answers from them).
        if start > 1 || end < total {
            let rare: Vec<(usize, &str)> = rare_in(&text)
                .into_iter()
                .filter(|(n, _)| *n < start || *n > end)
                .collect();
            if !rare.is_empty() && rare.len() <= 4 * RARE_LINES {
                out.push_str(&format!(
                    "Rare lines elsewhere in {} (each shape seen at most {RARE_MAX_COUNT} times; the events among routine lines):\n",
                    a.path
                ));
                for (n, line) in rare.iter().take(RARE_LINES) {
                    out.push_str(&format!(
                        "{n}: {}\n",
                        crate::agent::tools::truncate_str(line.trim_end(), 300)
                    ));
                }
            }
        }
        Ok(out)
    }
}

/// The preview a condensed output of `tool` shows for `task` ([`long_read_preview`] for a
/// `read_file`; `None` for any other tool).
pub fn read_preview(tool: &str, task: &str, output: &str) -> Option<String> {
    (tool == "read_file")
        .then(|| long_read_preview(task, output))
        .flatten()
}

/// Most lines of each kind a long file's preview shows.
const PREVIEW_LINES: usize = 6;

/// Longest line a long file's preview shows.
const PREVIEW_LINE_CHARS: usize = 170;

/// What the model is shown of a whole `read_file` of a file longer than [`SHORT_FILE_LINES`]
/// (`output` as `read_file` returned it, "app.log (1500 lines):" and numbered lines), in place
/// of the condensed head and tail: the lines holding the most of the task's words (rarest
/// words weighing most), then the rare lines ([`rare_in`]), then the first lines. The whole
/// output stays the run's record (the answer step reads it). `None` for any other output, or
/// when no line is either kind.
pub fn long_read_preview(task: &str, output: &str) -> Option<String> {
    let (header, body) = output.split_once('\n')?;
    let (path, count) = header.strip_suffix(" lines):")?.rsplit_once(" (")?;
    let total: usize = count.parse().ok()?;
    if total <= SHORT_FILE_LINES {
        return None;
    }
    // The file's own lines, without their numbers.
    let content: Vec<&str> = body
        .lines()
        .map(|l| l.split_once(": ").map_or(l, |(_, t)| t))
        .collect();
    let numbered = |n: usize, line: &str| {
        format!(
            "{n}: {}",
            crate::agent::tools::truncate_str(line.trim_end(), PREVIEW_LINE_CHARS)
        )
    };
    // (words held, line number), ranked rarest words first, then file order.
    let mut worded: Vec<(u64, String)> = Vec::new();
    if let Some(words) = task_words(task) {
        let matcher = Matcher::Words(words);
        for (i, line) in content.iter().enumerate() {
            let hits = matcher.hits(line);
            if hits != 0 {
                worded.push((hits, (i + 1).to_string()));
            }
        }
        rank_partial(&mut worded, content.len());
    }
    let shown: Vec<usize> = worded
        .iter()
        .take(PREVIEW_LINES)
        .filter_map(|(_, n)| n.parse().ok())
        .collect();
    let text = content.join("\n");
    let rare: Vec<(usize, &str)> = rare_in(&text)
        .into_iter()
        .filter(|(n, _)| !shown.contains(n))
        .take(PREVIEW_LINES)
        .collect();
    if shown.is_empty() && rare.is_empty() {
        return None;
    }
    let mut out = format!("{path} ({total} lines), too long to show whole.\n");
    let sections = [
        (
            "Lines with the most of the task's words:".to_string(),
            shown.iter().map(|n| numbered(*n, content[n - 1])).collect::<Vec<_>>(),
        ),
        (
            format!("Rare lines (each shape seen at most {RARE_MAX_COUNT} times; the events among routine lines):"),
            rare.iter().map(|(n, l)| numbered(*n, l)).collect(),
        ),
        (
            "First lines:".to_string(),
            content.iter().take(3).enumerate().map(|(i, l)| numbered(i + 1, l)).collect(),
        ),
    ];
    for (heading, lines) in sections.iter().filter(|(_, l)| !l.is_empty()) {
        out.push_str(heading);
        out.push('\n');
        for l in lines {
            out.push_str(l);
            out.push('\n');
        }
    }
    out.push_str("Other parts: read_file with start_line and end_line, or search_text.");
    Some(out)
}

/// `read_file`'s worked example for the Decide prompt (neutral placeholders). Numbered after the
/// calculator's two, as the prompt has always shown it.
const READ_FILE_EXAMPLE: &str = "Example 3:\nWorld model:\nObjective: <a question about a file>\nActions so far:\n- read_file {\"path\":\"<file named in the task>\"} -> verified: <the line that states the fact>\n\
{\"candidates\": [{\"thought\": \"The file states it.\", \"tool\": \"final_answer\", \"args\": {\"answer\": \"<the value from that line>\"}}]}\n";
