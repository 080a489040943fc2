//! `search_text`: lines found by plain words or a regex, and the fallbacks when none match.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::{check_regular, collect_files, plural, MAX_FILES_SCANNED, NO_MATCHES, PATH_MAX_CHARS};
use crate::agent::tools::{
    parse_args, rel_display, Sandbox, Tool, ToolContext, ToolError, Verification,
};

const MAX_MATCHES: usize = 50;
const MAX_SEARCH_FILE: u64 = 2 * 1024 * 1024;

/// `search_text`: find lines by plain words (all of them, any order, any case) or a regex.
#[derive(Debug, Default, Clone, Copy)]
pub struct SearchText;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SearchArgs {
    #[serde(alias = "pattern")]
    query: String,
    #[serde(default)]
    path: Option<String>,
    #[serde(default)]
    regex: bool,
    /// Accepted for old callers; plain-word search ignores case anyway.
    #[serde(default)]
    ignore_case: bool,
    /// Count the matching lines per file instead of printing them.
    #[serde(default)]
    count: bool,
}

/// How lines are matched.
pub(super) enum Matcher {
    /// Every word (lowercase stem, see `agent::words::stem`) appears in the lowercased line.
    Words(Vec<String>),
    /// A compiled regex.
    Regex(regex::Regex),
}

impl Matcher {
    /// The query's words as lower-case stems; question words ("what", "the") are left out
    /// when any other word is left.
    pub(super) fn words_in(query: &str) -> Vec<String> {
        let all: Vec<String> = query
            .split(|c: char| !c.is_alphanumeric() && c != '_' && c != '.' && c != '-')
            .map(|w| w.trim_matches(|c| c == '.' || c == '-').to_lowercase())
            .filter(|w| !w.is_empty())
            .collect();
        let content: Vec<String> = all
            .iter()
            .filter(|w| !crate::agent::words::STOPWORDS.contains(&w.as_str()))
            .cloned()
            .collect();
        let mut out: Vec<String> = if content.is_empty() { all } else { content }
            .iter()
            .map(|w| crate::agent::words::stem(w).to_string())
            .collect();
        out.dedup();
        out
    }
    /// Which words of the query `line` holds, as a bit set (for a regex: bit 0 on a match).
    pub(super) fn hits(&self, line: &str) -> u64 {
        match self {
            Matcher::Words(words) => {
                let l = line.to_lowercase();
                words
                    .iter()
                    .take(64)
                    .enumerate()
                    .filter(|(_, w)| l.contains(w.as_str()))
                    .fold(0u64, |m, (i, _)| m | (1 << i))
            }
            Matcher::Regex(re) => u64::from(re.is_match(line)),
        }
    }
    /// The bit set of a line that holds everything.
    pub(super) fn all(&self) -> u64 {
        match self {
            Matcher::Words(w) if w.len() >= 64 => u64::MAX,
            Matcher::Words(w) => (1u64 << w.len()) - 1,
            Matcher::Regex(_) => 1,
        }
    }
}

/// Rank lines that hold only some of the words: a word found on few lines weighs more than
/// one found on many (inverse document frequency over the lines searched), so "disk backup"
/// ranks the one disk line above a thousand backup lines.
pub(super) fn rank_partial(partial: &mut [(u64, String)], lines: usize) {
    let mut df = [0usize; 64];
    for (m, _) in partial.iter() {
        for (i, d) in df.iter_mut().enumerate() {
            if m & (1 << i) != 0 {
                *d += 1;
            }
        }
    }
    let n = lines.max(1) as f64;
    let weight = |m: u64| -> f64 {
        (0..64)
            .filter(|i| m & (1 << i) != 0)
            .map(|i| (n / df[i].max(1) as f64).ln() + 1.0)
            .sum()
    };
    partial.sort_by(|a, b| weight(b.0).total_cmp(&weight(a.0)));
}

/// What a search found: the lines holding every word (`file:line: text`), how many more there
/// were, (which words, line) for lines holding some, and how many lines and files it read.
struct Scan {
    full: Vec<String>,
    /// Lines holding every word, per file (file order; files without one left out).
    per_file: Vec<(String, usize)>,
    partial: Vec<(u64, String)>,
    lines_seen: usize,
    more: usize,
    scanned: usize,
}

/// Search `files` (paths under `root`) line by line with `matcher`.
/// The bytes of `f` when a search reads it: a regular file (not a link) of at most
/// [`MAX_SEARCH_FILE`] bytes with no NUL in its first 8 KiB (not binary).
fn searchable(ws: &Sandbox, f: &Path) -> Option<Vec<u8>> {
    let meta = std::fs::symlink_metadata(f).ok()?;
    if !meta.is_file() || meta.len() > MAX_SEARCH_FILE {
        return None;
    }
    let bytes = ws.read_found(f, MAX_SEARCH_FILE).ok()?;
    (!bytes.iter().take(8192).any(|b| *b == 0)).then_some(bytes)
}

fn scan(matcher: &Matcher, files: &[PathBuf], ws: &Sandbox, ctx: &ToolContext) -> Scan {
    let root = ws.root();
    let mut full: Vec<String> = Vec::new();
    let mut per_file: Vec<(String, usize)> = Vec::new();
    let mut partial: Vec<(u64, String)> = Vec::new();
    let mut lines_seen = 0usize;
    let mut more = 0usize;
    let mut scanned = 0usize;
    for f in files.iter().take(MAX_FILES_SCANNED) {
        if ctx.cancel.is_cancelled() {
            break;
        }
        let Some(bytes) = searchable(ws, f) else {
            continue;
        };
        scanned += 1;
        let text = String::from_utf8_lossy(&bytes);
        let mut in_file = 0usize;
        for (i, line) in text.lines().enumerate() {
            lines_seen += 1;
            let hits = matcher.hits(line);
            if hits == 0 {
                continue;
            }
            let shown = format!(
                "{}:{}: {}",
                rel_display(root, f),
                i + 1,
                crate::agent::tools::truncate_str(line.trim_end(), 300)
            );
            if hits == matcher.all() {
                in_file += 1;
                if full.len() < MAX_MATCHES {
                    full.push(shown);
                } else {
                    more += 1;
                }
            } else if partial.len() < 10_000 {
                partial.push((hits, shown));
            }
        }
        if in_file > 0 {
            per_file.push((rel_display(root, f), in_file));
        }
    }
    Scan {
        full,
        per_file,
        partial,
        lines_seen,
        more,
        scanned,
    }
}

/// Most lines a fallback search shows.
const TASK_WORD_LINES: usize = 8;

/// Least lines of a file whose rare lines a search that found nothing shows.
const RARE_MIN_LINES: usize = 200;

/// A line's shape occurring at most this often in its file makes it rare.
pub(super) const RARE_MAX_COUNT: usize = 3;

/// Most rare lines shown per search.
pub(super) const RARE_LINES: usize = 10;

/// A log line's shape: without its leading timestamp, every token holding a digit as `#`, and
/// every `key=value`'s value dropped. "… INFO http: GET /x status=200 dur_ms=12" and the same
/// line with other numbers have one shape.
pub(super) fn line_shape(line: &str) -> String {
    line.split_whitespace()
        .map(|t| match t.split_once('=') {
            Some((k, _)) => format!("{k}="),
            None if t.chars().any(|c| c.is_ascii_digit()) => "#".to_string(),
            None => t.to_string(),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The lines of long files (logs) whose shape ([`line_shape`]) occurs at most
/// [`RARE_MAX_COUNT`] times there, as `file:line: text`. A question worded unlike the log ("a
/// program touched memory it was not allowed to" for a segfault) matches no word, but what it
/// asks about is an event, and events are the lines a log rarely repeats.
fn rare_lines(files: &[PathBuf], ws: &Sandbox) -> Vec<String> {
    let root = ws.root();
    let mut out = Vec::new();
    for f in files.iter().take(MAX_FILES_SCANNED) {
        let Some(bytes) = searchable(ws, f) else {
            continue;
        };
        let text = String::from_utf8_lossy(&bytes);
        for (i, line) in rare_in(&text) {
            out.push(format!(
                "{}:{}: {}",
                rel_display(root, f),
                i,
                crate::agent::tools::truncate_str(line.trim_end(), 300)
            ));
        }
    }
    out
}

/// The rare lines of `text` (see [`rare_lines`]) with their 1-based numbers; none for a text
/// shorter than [`RARE_MIN_LINES`].
pub(super) fn rare_in(text: &str) -> Vec<(usize, &str)> {
    let lines: Vec<&str> = text.lines().collect();
    if lines.len() < RARE_MIN_LINES {
        return Vec::new();
    }
    let shapes: Vec<String> = lines.iter().map(|l| line_shape(l)).collect();
    let mut counts: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    for sh in &shapes {
        *counts.entry(sh.as_str()).or_default() += 1;
    }
    lines
        .iter()
        .enumerate()
        .filter(|(i, l)| {
            counts
                .get(shapes[*i].as_str())
                .is_some_and(|n| *n <= RARE_MAX_COUNT)
                && !l.trim().is_empty()
        })
        .map(|(i, l)| (i + 1, *l))
        .collect()
}

/// Most files a count lists by name.
const COUNT_FILES_SHOWN: usize = 50;

/// `search_text` with `count=true`: the total first (a small model answers "how many" from the
/// first number it sees), then the files by count, most first (file order on a tie).
fn count_report(per_file: &[(String, usize)], what: &str, files_note: &str) -> String {
    let total: usize = per_file.iter().map(|(_, n)| n).sum();
    let mut out = format!(
        "total: {} ({what}) in {} of the {files_note}",
        plural(total, "matching line", "matching lines"),
        plural(per_file.len(), "file", "files"),
    );
    let mut by_count: Vec<&(String, usize)> = per_file.iter().collect();
    by_count.sort_by_key(|f| std::cmp::Reverse(f.1));
    for (file, n) in by_count.iter().take(COUNT_FILES_SHOWN) {
        out.push_str(&format!("\n{file}: {n}"));
    }
    if by_count.len() > COUNT_FILES_SHOWN {
        out.push_str(&format!(
            "\n... and {} more files",
            by_count.len() - COUNT_FILES_SHOWN
        ));
    }
    out
}

/// Most of the task's words a fallback search uses.
const TASK_WORDS_MAX: usize = 12;

/// The task's content words (three letters or more, without its paths: "var/log/syslog" says
/// where, not what), at most [`TASK_WORDS_MAX`]; `None` when fewer than two.
pub(super) fn task_words(task: &str) -> Option<Vec<String>> {
    let task: String = task
        .split_whitespace()
        .filter(|t| !t.contains('/') && !t.trim_end_matches(['.', ',', '?']).contains('.'))
        .collect::<Vec<_>>()
        .join(" ");
    let words: Vec<String> = Matcher::words_in(&task)
        .into_iter()
        .filter(|w| w.chars().count() >= 3 && !w.contains('.'))
        .take(TASK_WORDS_MAX)
        .collect();
    (words.len() >= 2).then_some(words)
}

/// The lines of `files` holding the most of the task's content words (three letters or more),
/// rarest words weighing most; `None` without a task, for a regex search, or when no line
/// holds any.
fn task_word_lines(
    ctx: &ToolContext,
    files: &[PathBuf],
    ws: &Sandbox,
    regex: bool,
) -> Option<Vec<String>> {
    let task = ctx.task.as_deref().filter(|_| !regex)?;
    let matcher = Matcher::Words(task_words(task)?);
    let found = scan(&matcher, files, ws, ctx);
    let all = matcher.all();
    let mut lines: Vec<(u64, String)> = found
        .full
        .into_iter()
        .map(|l| (all, l))
        .chain(found.partial)
        .collect();
    if lines.is_empty() {
        return None;
    }
    rank_partial(&mut lines, found.lines_seen);
    Some(
        lines
            .into_iter()
            .take(TASK_WORD_LINES)
            .map(|(_, l)| l)
            .collect(),
    )
}

impl Tool for SearchText {
    fn name(&self) -> &str {
        "search_text"
    }
    fn needs_workspace(&self) -> bool {
        true
    }
    /// `pattern` (the old name of `query`) and `ignore_case` (plain words ignore case anyway).
    fn tolerated_args(&self) -> &[&'static str] {
        &["pattern", "ignore_case"]
    }
    fn description(&self) -> &str {
        "Find lines in the workspace files (recursively under path, default \".\"). The query is plain words: a line matches when it contains all of them, in any order and any case; when no line has them all, the lines with the most words are shown. Set regex=true to use the query as a regular expression. Prints file:line: text for each match."
    }
    fn args_schema(&self) -> serde_json::Value {
        serde_json::json!({
            "type": "object",
            "properties": {
                "query": {"type": "string", "maxLength": 120, "description": "words to find"},
                "path": {"type": "string", "maxLength": PATH_MAX_CHARS},
                "regex": {"type": "boolean"},
                "count": {"type": "boolean", "description": "count matching lines (in all and per file) before listing them"}
            },
            "required": ["query"],
            "additionalProperties": false
        })
    }
    /// Any search that returned is what the files hold (no match is an answer too).
    fn verify(&self, _args: &serde_json::Value, _output: &str, _ctx: &ToolContext) -> Verification {
        Verification::Holds
    }
    fn call(&self, args: serde_json::Value, ctx: &ToolContext) -> Result<String, ToolError> {
        let a: SearchArgs = parse_args(args)?;
        let _ = a.ignore_case;
        let matcher = if a.regex {
            let re = regex::RegexBuilder::new(&a.query)
                .size_limit(1 << 20)
                .build()
                .map_err(|e| ToolError::invalid(format!("bad regex {:?}: {e}.", a.query)))?;
            Matcher::Regex(re)
        } else {
            let words = Matcher::words_in(&a.query);
            if words.is_empty() {
                return Err(ToolError::invalid(
                    "the query has no words; give the words to look for.",
                ));
            }
            Matcher::Words(words)
        };
        let ws = ctx.workspace()?;
        let path = a.path.unwrap_or_else(|| ".".into());
        check_regular(ctx, &path)?;
        let start = ws.resolve(&path)?;
        let mut files = Vec::new();
        collect_files(ws, &start, &mut files, 0);
        files.sort();
        let found = scan(&matcher, &files, ws, ctx);
        let Scan {
            full,
            per_file,
            mut partial,
            lines_seen,
            more,
            scanned,
        } = found;
        let what = match &matcher {
            Matcher::Words(w) => format!("lines with all of the words {w:?} (any order, any case)"),
            Matcher::Regex(_) => format!("lines matching the regex {:?}", a.query),
        };
        let files_note = format!(
            "{} under {path}",
            plural(scanned, "text file", "text files")
        );
        if a.count {
            // The lines follow the counts: a count asked for on a look-up ("what port is set in
            // [redis]") still shows the line that answers it.
            let mut out = count_report(&per_file, &what, &files_note);
            if !full.is_empty() {
                out.push_str("\nmatching lines:\n");
                out.push_str(&full.join("\n"));
                if more > 0 {
                    out.push_str(&format!("\n... and {more} more"));
                }
            }
            return Ok(out);
        }
        if !full.is_empty() {
            let mut out = full.join("\n");
            if more > 0 {
                out.push_str(&format!("\n... and {more} more matches"));
            }
            out.push_str(&format!(
                "\n({} {what} in {files_note})",
                plural(full.len() + more, "match", "matches")
            ));
            return Ok(out);
        }
        if partial.is_empty() {
            let mut out = format!(
                "{NO_MATCHES} searched {files_note} for {what}. Try other words (a synonym, a shorter phrase) or list_dir."
            );
            // A log says "No space left on device" where the model searched "disk": the task's
            // own words, rarest first, usually find the line the model was after.
            if let Some(lines) = task_word_lines(ctx, &files, ws, a.regex) {
                out.push_str(&format!(
                    "\nLines with the most of the task's words instead:\n{}",
                    lines.join("\n")
                ));
            }
            let rare = rare_lines(&files, ws);
            if !rare.is_empty() && rare.len() <= 4 * RARE_LINES {
                out.push_str(&format!(
                    "\nThe rare lines of the long files searched (each shape seen at most {RARE_MAX_COUNT} times; the events among routine lines):\n{}",
                    rare.iter()
                        .take(RARE_LINES)
                        .map(String::as_str)
                        .collect::<Vec<_>>()
                        .join("\n")
                ));
            }
            return Ok(out);
        }
        // Stable: rarest words first, then file order.
        rank_partial(&mut partial, lines_seen);
        let shown: Vec<String> = partial
            .iter()
            .take(MAX_MATCHES / 2)
            .map(|(_, l)| l.clone())
            .collect();
        Ok(format!(
            "no line has all the words; searched {files_note} for {what}. Lines with the most of them:\n{}",
            shown.join("\n")
        ))
    }
}
