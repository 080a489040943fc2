//! File tools confined to the workspace: `read_file`, `list_dir`, `search_text`.
//!
//! Every path goes through `Sandbox`. The tools refuse symbolic links and files that are not
//! regular (a FIFO would block) before opening anything. Directory walks never follow links,
//! skip binary files (a NUL byte in the first 8 KiB) and stop at fixed caps so a huge tree
//! cannot stall a step. The output is shaped for small models: numbered lines, counts stated
//! as a sentence, plain-word search that does not need a regex.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::{
    parse_args, rel_display, FileEffect, PromptHint, Sandbox, SandboxError, Tool, ToolContext,
    ToolError, Verification,
};

/// How `search_text` begins an output that found nothing (the answer step leaves such outputs
/// out of what was found: they echo the words searched for).
pub const NO_MATCHES: &str = "no matches:";

/// Most bytes a file tool reads of one file (`read_file`; `size_model`'s `config` too).
pub const MAX_READ_BYTES: u64 = 4 * 1024 * 1024;
const MAX_LIST: usize = 200;
const MAX_MATCHES: usize = 50;
const MAX_FILES_SCANNED: usize = 5_000;
const MAX_SEARCH_FILE: u64 = 2 * 1024 * 1024;

/// Refuse what a file tool must not open: a symbolic link (its target may lie anywhere) or a
/// file that is not a regular file (a FIFO or device would block or never end). Checked on the
/// path as given, before anything is opened, so a FIFO never blocks the step.
fn check_regular(ctx: &ToolContext, path: &str) -> Result<(), ToolError> {
    let ws = ctx.workspace()?;
    let joined = ws.lexical(path)?;
    let Ok(meta) = std::fs::symlink_metadata(&joined) else {
        return Ok(()); // missing: the sandbox's resolve reports it
    };
    let ft = meta.file_type();
    if ft.is_symlink() {
        return Err(ToolError::denied(format!(
            "{path} is a symbolic link; file tools do not follow links."
        )));
    }
    if !ft.is_file() && !ft.is_dir() {
        return Err(ToolError::denied(format!(
            "{path} is not a regular file (a pipe, socket or device); file tools read regular files only."
        )));
    }
    Ok(())
}

/// A not-found error with the workspace files of the same name, so `east.ini` finds
/// `regions/east.ini`.
fn not_found_hint(ctx: &ToolContext, path: &str, err: ToolError) -> ToolError {
    if err.kind != super::ToolErrorKind::NotFound {
        return err;
    }
    let Ok(ws) = ctx.workspace() else { return err };
    let Some(name) = Path::new(path).file_name() else {
        return err;
    };
    let mut files = Vec::new();
    collect_files(ws, ws.root(), &mut files, 0);
    let mut same: Vec<String> = files
        .iter()
        .filter(|f| f.file_name() == Some(name))
        .map(|f| rel_display(ws.root(), f))
        .collect();
    same.sort();
    same.truncate(5);
    if same.is_empty() {
        return err;
    }
    ToolError::not_found(format!(
        "{path} does not exist; files with that name: {}.",
        same.join(", ")
    ))
}

pub(crate) fn read_text(ctx: &ToolContext, path: &str) -> Result<String, ToolError> {
    check_regular(ctx, path)?;
    let ws = ctx.workspace()?;
    let (_, buf) = ws.read_bytes(path, MAX_READ_BYTES).map_err(|e| match e {
        SandboxError::NotRegular {
            kind: "a directory",
            ..
        } => ToolError::invalid(format!(
            "{path} is a directory; use list_dir to see what is in it."
        )),
        SandboxError::NotRegular { .. } => ToolError::denied(format!(
            "{path} is not a regular file; file tools read regular files only."
        )),
        SandboxError::TooLarge { size, limit, .. } => ToolError::failed(format!(
            "{path} is {size} bytes, more than the {limit} byte limit; use search_text to find the lines you need."
        )),
        e => not_found_hint(ctx, path, e.into()),
    })?;
    if buf.iter().take(8192).any(|b| *b == 0) {
        return Err(ToolError::failed(format!(
            "{path} is a binary file, not text."
        )));
    }
    Ok(String::from_utf8_lossy(&buf).into_owned())
}

/// Files up to this many lines are always shown whole.
/// The fewest lines a ranged read of a long file shows.
pub const MIN_WINDOW_LINES: usize = 12;

const SHORT_FILE_LINES: usize = 200;

/// Longest path argument the schemas accept.
pub(crate) const PATH_MAX_CHARS: usize = 160;

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
                        super::truncate_str(line.trim_end(), 300)
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
            super::truncate_str(line.trim_end(), PREVIEW_LINE_CHARS)
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
{\"candidates\": [{\"thought\": \"The file states it.\", \"tool\": \"final_answer\", \"args\": {\"answer\": \"<the value, copied from that line>\"}}]}\n";

/// `list_dir`: entries of a directory in the workspace, optionally the whole tree, with counts.
#[derive(Debug, Default, Clone, Copy)]
pub struct ListDir;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ListArgs {
    #[serde(default)]
    path: Option<String>,
    #[serde(default)]
    recursive: bool,
}

/// One directory walk's result.
#[derive(Default)]
struct Listing {
    lines: Vec<String>,
    files: usize,
    dirs: usize,
    truncated: bool,
}

fn list_into(
    ws: &Sandbox,
    dir: &Path,
    prefix: &str,
    recursive: bool,
    depth: usize,
    out: &mut Listing,
) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<_> = rd.flatten().filter(|e| !ws.hides(&e.path())).collect();
    entries.sort_by_key(|e| e.file_name());
    for ent in entries {
        let name = ent.file_name().to_string_lossy().into_owned();
        let Ok(ft) = ent.file_type() else { continue };
        let shown = format!("{prefix}{name}");
        if ft.is_symlink() {
            push_line(out, format!("{shown} (link, not followed)"));
        } else if ft.is_dir() {
            out.dirs += 1;
            let inner = count_direct(ws, &ent.path()).0;
            let all = count_all(ws, &ent.path(), 0).0;
            let counts = if all == inner {
                plural(inner, "file", "files")
            } else {
                format!(
                    "{}, {all} with its subfolders",
                    plural(inner, "file", "files")
                )
            };
            push_line(out, format!("{shown}/ ({counts})"));
            if recursive && depth < 32 {
                list_into(ws, &ent.path(), &format!("{shown}/"), true, depth + 1, out);
            }
        } else if ft.is_file() {
            out.files += 1;
            let size = ent.metadata().map(|m| m.len()).unwrap_or(0);
            push_line(out, format!("{shown} ({size} bytes)"));
        } else {
            push_line(out, format!("{shown} (special file)"));
        }
    }
}

fn push_line(out: &mut Listing, line: String) {
    if out.lines.len() < MAX_LIST {
        out.lines.push(line);
    } else {
        out.truncated = true;
    }
}

/// The entries of `dir` a walk shows: not boyd's own ([`Sandbox::hides`]).
fn shown_entries(ws: &Sandbox, dir: &Path) -> Vec<std::fs::DirEntry> {
    std::fs::read_dir(dir)
        .map(|rd| rd.flatten().filter(|e| !ws.hides(&e.path())).collect())
        .unwrap_or_default()
}

/// Regular files and folders directly in `dir` (links not followed).
fn count_direct(ws: &Sandbox, dir: &Path) -> (usize, usize) {
    shown_entries(ws, dir)
        .into_iter()
        .fold((0, 0), |(f, d), e| match e.file_type() {
            Ok(t) if t.is_file() => (f + 1, d),
            Ok(t) if t.is_dir() => (f, d + 1),
            _ => (f, d),
        })
}

/// Regular files in `dir` and every folder below it (links not followed, 32 levels at most).
fn count_all(ws: &Sandbox, dir: &Path, depth: usize) -> (usize, usize) {
    if depth > 32 {
        return (0, 0);
    }
    shown_entries(ws, dir)
        .into_iter()
        .map(|e| match e.file_type() {
            Ok(t) if t.is_file() => (1, 0),
            Ok(t) if t.is_dir() => {
                let (f, d) = count_all(ws, &e.path(), depth + 1);
                (f, d + 1)
            }
            _ => (0, 0),
        })
        .fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1))
}

/// Files below `dir` by extension (`.md`; "no extension" for none), most first, as
/// "5 .md, 2 .yaml, 1 .svg" (links not followed, 32 levels at most).
fn extension_counts(ws: &Sandbox, dir: &Path) -> String {
    fn walk(ws: &Sandbox, dir: &Path, depth: usize, out: &mut BTreeMap<String, usize>) {
        if depth > 32 {
            return;
        }
        for e in shown_entries(ws, dir) {
            match e.file_type() {
                Ok(t) if t.is_file() => {
                    let name = e.file_name().to_string_lossy().into_owned();
                    let ext = match name.rsplit_once('.') {
                        Some((stem, ext)) if !stem.is_empty() && !ext.is_empty() => {
                            format!(".{}", ext.to_lowercase())
                        }
                        _ => "no extension".to_string(),
                    };
                    *out.entry(ext).or_default() += 1;
                }
                Ok(t) if t.is_dir() => walk(ws, &e.path(), depth + 1, out),
                _ => {}
            }
        }
    }
    let mut counts = BTreeMap::new();
    walk(ws, dir, 0, &mut counts);
    let mut v: Vec<(String, usize)> = counts.into_iter().collect();
    v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    v.iter()
        .map(|(e, n)| format!("{n} {e}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// "most files: logs/jobs/ (6 files, counting its subfolders; next: logs/api/ with 4)" for a
/// folder with two or more subfolders (ties all named); `None` otherwise.
fn most_files(ws: &Sandbox, dir: &Path, prefix: &str) -> Option<String> {
    let mut subs: Vec<(usize, String)> = shown_entries(ws, dir)
        .into_iter()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            (count_all(ws, &e.path(), 0).0, format!("{prefix}{name}/"))
        })
        .collect();
    if subs.len() < 2 {
        return None;
    }
    subs.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    let top = subs[0].0;
    let leaders: Vec<&str> = subs
        .iter()
        .filter(|s| s.0 == top)
        .map(|s| s.1.as_str())
        .collect();
    let next = subs
        .iter()
        .find(|s| s.0 < top)
        .map(|s| format!("; next: {} with {}", s.1, s.0))
        .unwrap_or_default();
    let each = if leaders.len() > 1 { " each" } else { "" };
    Some(format!(
        "most files: {} ({}{each}, counting its subfolders{next})",
        leaders.join(" and "),
        plural(top, "file", "files")
    ))
}

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// The name of the `list_dir` tool.
pub const LIST_DIR: &str = "list_dir";

/// The tools that only read the workspace's files: nothing to offer in an empty workspace.
pub const FILE_READERS: [&str; 4] = ["read_file", LIST_DIR, "search_text", super::table::TABLE];

impl Tool for ListDir {
    fn name(&self) -> &str {
        LIST_DIR
    }
    fn needs_workspace(&self) -> bool {
        true
    }
    fn description(&self) -> &str {
        "List a workspace directory (default \".\"): files with sizes, folders ending in / with how many files each holds; its first lines count the files (in all, by type, and which subfolder holds the most). With recursive=true it lists every subfolder too and counts all files in the tree. Use it to find files and to count them."
    }
    fn args_schema(&self) -> serde_json::Value {
        serde_json::json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "maxLength": PATH_MAX_CHARS, "description": "directory relative to the workspace; \".\" for the root"},
                "recursive": {"type": "boolean"}
            },
            "additionalProperties": false
        })
    }
    /// Any listing that returned is what the folder holds.
    fn verify(&self, _args: &serde_json::Value, _output: &str, _ctx: &ToolContext) -> Verification {
        Verification::Holds
    }
    fn call(&self, args: serde_json::Value, ctx: &ToolContext) -> Result<String, ToolError> {
        let a: ListArgs = parse_args(args)?;
        let ws = ctx.workspace()?;
        let path = a.path.unwrap_or_else(|| ".".into());
        check_regular(ctx, &path)?;
        let dir = ws.resolve(&path)?;
        if !dir.is_dir() {
            return Err(ToolError::invalid(format!(
                "{path} is a file, not a directory; use read_file to read it."
            )));
        }
        let shown = rel_display(ws.root(), &dir);
        let mut listing = Listing::default();
        // Entries are shown with their path from the workspace root, so the model can pass
        // them to read_file as they are.
        let prefix = if shown == "." {
            String::new()
        } else {
            format!("{}/", shown.trim_end_matches('/'))
        };
        list_into(ws, &dir, &prefix, a.recursive, 0, &mut listing);
        if listing.lines.is_empty() {
            return Ok(format!("{shown} is empty: 0 files"));
        }
        // The counts come first: a long listing is condensed to its head, and a small model
        // answers "how many" from the first count it sees.
        let mut out = if a.recursive {
            // The top level's counts too: "how many folders sit directly inside plugins/" is
            // not answered by the tree's.
            let (direct_files, direct_dirs) = count_direct(ws, &dir);
            format!(
                "total: {} and {} directly in {shown}; {} in {shown} and its subfolders ({} below it)",
                plural(direct_files, "file", "files"),
                plural(direct_dirs, "folder", "folders"),
                plural(listing.files, "file", "files"),
                plural(listing.dirs, "folder", "folders")
            )
        } else if listing.dirs == 0 {
            format!(
                "total: {} and 0 folders directly in {shown}",
                plural(listing.files, "file", "files"),
            )
        } else {
            // The whole tree's count too: "how many files are in data/" is a question about
            // everything below it far more often than about its top level.
            let (files, dirs) = count_all(ws, &dir, 0);
            format!(
                "total: {} and {} directly in {shown}; {} in {shown} and its subfolders ({} below it)",
                plural(listing.files, "file", "files"),
                plural(listing.dirs, "folder", "folders"),
                plural(files, "file", "files"),
                plural(dirs, "folder", "folders")
            )
        };
        // Counting by type is arithmetic a small model gets wrong from a listing.
        if a.recursive || listing.dirs > 0 {
            out.push_str(&format!(
                "\nby type, {shown} and its subfolders: {}",
                extension_counts(ws, &dir)
            ));
        }
        // So is comparing the subfolders' counts ("which folder holds the most files").
        if let Some(line) = most_files(ws, &dir, &prefix) {
            out.push('\n');
            out.push_str(&line);
        }
        out.push('\n');
        out.push_str(&listing.lines.join("\n"));
        if listing.truncated {
            out.push_str(&format!("\n... (only the first {MAX_LIST} entries shown)"));
        }
        Ok(out)
    }
}

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
}

/// How lines are matched.
enum Matcher {
    /// Every word (lowercase stem, see `agent::words::stem`) appears in the lowercased line.
    Words(Vec<String>),
    /// A compiled regex.
    Regex(regex::Regex),
}

impl Matcher {
    /// The query's words as lower-case stems; question words ("what", "the") are left out
    /// when any other word is left.
    fn words_in(query: &str) -> Vec<String> {
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
    fn hits(&self, line: &str) -> u64 {
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
    fn all(&self) -> u64 {
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
fn rank_partial(partial: &mut [(u64, String)], lines: usize) {
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
                super::truncate_str(line.trim_end(), 300)
            );
            if hits == matcher.all() {
                if full.len() < MAX_MATCHES {
                    full.push(shown);
                } else {
                    more += 1;
                }
            } else if partial.len() < 10_000 {
                partial.push((hits, shown));
            }
        }
    }
    Scan {
        full,
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
const RARE_MAX_COUNT: usize = 3;

/// Most rare lines shown per search.
const RARE_LINES: usize = 10;

/// A log line's shape: without its leading timestamp, every token holding a digit as `#`, and
/// every `key=value`'s value dropped. "… INFO http: GET /x status=200 dur_ms=12" and the same
/// line with other numbers have one shape.
fn line_shape(line: &str) -> String {
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
                super::truncate_str(line.trim_end(), 300)
            ));
        }
    }
    out
}

/// The rare lines of `text` (see [`rare_lines`]) with their 1-based numbers; none for a text
/// shorter than [`RARE_MIN_LINES`].
fn rare_in(text: &str) -> Vec<(usize, &str)> {
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

/// Most of the task's words a fallback search uses.
const TASK_WORDS_MAX: usize = 12;

/// The task's content words (three letters or more, without its paths: "var/log/syslog" says
/// where, not what), at most [`TASK_WORDS_MAX`]; `None` when fewer than two.
fn task_words(task: &str) -> Option<Vec<String>> {
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
                "regex": {"type": "boolean"}
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

/// Files under `p` (or `p` itself), never following symlinks, depth-capped.
fn collect_files(ws: &Sandbox, p: &Path, out: &mut Vec<std::path::PathBuf>, depth: usize) {
    if depth > 32 || out.len() >= MAX_FILES_SCANNED || ws.hides(p) {
        return;
    }
    let Ok(meta) = std::fs::symlink_metadata(p) else {
        return;
    };
    if meta.file_type().is_symlink() && depth > 0 {
        return;
    }
    if meta.is_file() {
        out.push(p.to_path_buf());
        return;
    }
    if !p.is_dir() {
        return;
    }
    let Ok(rd) = std::fs::read_dir(p) else { return };
    for ent in rd.flatten() {
        let Ok(ft) = ent.file_type() else { continue };
        if ft.is_symlink() {
            continue;
        }
        collect_files(ws, &ent.path(), out, depth + 1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn touch(root: &Path, rel: &str) {
        let p = root.join(rel);
        std::fs::create_dir_all(p.parent().expect("test value")).expect("test value");
        std::fs::write(p, "x").expect("test value");
    }

    #[test]
    fn most_files_names_the_largest_subfolder_counting_its_tree() {
        let t = tempfile::tempdir().expect("test value");
        for f in [
            "logs/a/1",
            "logs/a/2",
            "logs/b/1",
            "logs/b/deep/2",
            "logs/b/deep/3",
            "logs/c/1",
        ] {
            touch(t.path(), f);
        }
        let ws = Sandbox::new(t.path()).expect("test value");
        let logs = ws.root().join("logs");
        let line = most_files(&ws, &logs, "logs/").expect("test value");
        assert_eq!(
            line,
            "most files: logs/b/ (3 files, counting its subfolders; next: logs/a/ with 2)"
        );
        touch(t.path(), "logs/a/3");
        let tie = most_files(&ws, &logs, "logs/").expect("test value");
        assert!(
            tie.starts_with("most files: logs/a/ and logs/b/ (3 files each"),
            "{tie}"
        );
        // One subfolder: nothing to compare.
        assert_eq!(most_files(&ws, &logs.join("b"), "logs/b/"), None);
    }

    #[test]
    fn a_search_that_finds_none_of_its_words_shows_the_tasks_best_lines() {
        let t = tempfile::tempdir().expect("test value");
        let mut log = String::new();
        for i in 0..200 {
            log.push_str(&format!("INFO worker: job {i} finished\n"));
        }
        log.push_str("ERROR backup: write failed: No space left on device (job_id=backup-7731)\n");
        std::fs::write(t.path().join("app.log"), log).expect("test value");
        let mut ctx = ToolContext {
            workspace: Some(crate::agent::tools::Sandbox::new(t.path()).expect("test value")),
            blob_dir: t.path().join("blobs"),
            cancel: crate::lm::CancelToken::new(),
            task: Some(
                "app.log records when the disk filled up and a backup failed. What was the job id?"
                    .into(),
            ),
        };
        let args = serde_json::json!({"query": "disk", "path": "app.log"});
        let out = SearchText.call(args.clone(), &ctx).expect("test value");
        assert!(out.starts_with(NO_MATCHES), "{out}");
        let fallback: Vec<&str> = out.lines().skip(2).collect();
        assert!(fallback[0].contains("backup-7731"), "{out}");
        // Without a task (or for a regex), no task words: only the log's rare lines follow.
        ctx.task = None;
        let out = SearchText.call(args, &ctx).expect("test value");
        assert!(!out.contains("task's words"), "{out}");
        assert!(
            out.lines()
                .last()
                .is_some_and(|l| l.contains("backup-7731")),
            "{out}"
        );
    }

    /// `n` routine log lines (`routine(i)`), with `event` right after line `at` (0-based).
    fn log_with_event(
        n: usize,
        routine: impl Fn(usize) -> String,
        at: usize,
        event: &str,
    ) -> String {
        let mut log = String::new();
        for i in 0..n {
            log.push_str(&routine(i));
            log.push('\n');
            if i == at {
                log.push_str(event);
                log.push('\n');
            }
        }
        log
    }

    /// A tool context over the workspace `root`, for no task.
    fn ctx_in(root: &Path) -> ToolContext {
        ToolContext {
            workspace: Some(crate::agent::tools::Sandbox::new(root).expect("test value")),
            blob_dir: root.join("blobs"),
            cancel: crate::lm::CancelToken::new(),
            task: None,
        }
    }

    #[test]
    fn a_long_files_preview_leads_with_the_tasks_lines_and_its_events() {
        let t = tempfile::tempdir().expect("test value");
        let log = log_with_event(
            400,
            |i| {
                format!(
                    "2026-05-01T09:{:02}:{:02}Z INFO worker: job {i} done",
                    i / 60,
                    i % 60
                )
            },
            333,
            "2026-05-01T09:05:33Z ERROR archiver: nightly archive failed code=A77",
        );
        std::fs::write(t.path().join("jobs.log"), log).expect("test value");
        let ctx = ctx_in(t.path());
        let out = ReadFile
            .call(serde_json::json!({"path": "jobs.log"}), &ctx)
            .expect("test value");
        // The output itself stays whole (the answer step reads it).
        assert!(
            out.starts_with("jobs.log (401 lines):\n1: "),
            "{}",
            &out[..80]
        );
        let task = "Which code did the failed archive run log in jobs.log?";
        let preview = read_preview("read_file", task, &out).expect("a preview");
        let event = "335: 2026-05-01T09:05:33Z ERROR archiver: nightly archive failed code=A77";
        let lines: Vec<&str> = preview.lines().collect();
        assert_eq!(lines[0], "jobs.log (401 lines), too long to show whole.");
        assert_eq!(lines[2], event, "{preview}");
        // Shown once, not again among the rare lines; the first lines follow.
        assert_eq!(preview.matches("code=A77").count(), 1, "{preview}");
        assert!(preview.contains("\n1: 2026-05-01T09:00:00Z INFO worker: job 0 done\n"));
        // Other tools, short files and ranged reads keep the usual condensed view.
        assert_eq!(read_preview("search_text", task, &out), None);
        let short = "a.txt (2 lines):\n1: x\n2: y";
        assert_eq!(read_preview("read_file", task, short), None);
        let part = ReadFile
            .call(
                serde_json::json!({"path": "jobs.log", "start_line": 1, "end_line": 300}),
                &ctx,
            )
            .expect("test value");
        assert_eq!(read_preview("read_file", task, &part), None);
        // The condenser shows the preview in place of the head.
        let obs = crate::agent::condense::Condenser::default()
            .condense_with(
                crate::agent::types::ObservationKind::Output,
                out.clone(),
                &t.path().join("blobs"),
                Some(preview.clone()),
            )
            .expect("test value");
        assert!(obs.text.contains(event), "{}", obs.text);
        assert_eq!(obs.full.as_deref(), Some(out.as_str()));
    }

    #[test]
    fn a_search_worded_unlike_the_log_shows_its_rare_lines() {
        let t = tempfile::tempdir().expect("test value");
        let log = log_with_event(
            300,
            |i| {
                let path = ["/a", "/b", "/c"][i % 3];
                format!(
                    "2026-03-02T08:{:02}:{:02}Z INFO http: GET {path} status=200 dur_ms={i}",
                    i / 60,
                    i % 60
                )
            },
            150,
            "2026-03-02T08:02:30Z ERROR imgproxy[4411]: segfault at 0 ip 7f3a error 4",
        );
        std::fs::write(t.path().join("sys.log"), log).expect("test value");
        let ctx = ctx_in(t.path());
        let out = SearchText
            .call(
                serde_json::json!({"query": "illegal memory access", "path": "sys.log"}),
                &ctx,
            )
            .expect("test value");
        assert!(out.starts_with(NO_MATCHES), "{out}");
        let rare: Vec<&str> = out
            .lines()
            .skip_while(|l| !l.starts_with("The rare lines"))
            .skip(1)
            .collect();
        assert_eq!(rare, vec!["sys.log:152: 2026-03-02T08:02:30Z ERROR imgproxy[4411]: segfault at 0 ip 7f3a error 4"]);
        // A read of the log's first lines shows the event too.
        let read = ReadFile
            .call(
                serde_json::json!({"path": "sys.log", "start_line": 1, "end_line": 5}),
                &ctx,
            )
            .expect("test value");
        assert!(
            read.ends_with(
                "152: 2026-03-02T08:02:30Z ERROR imgproxy[4411]: segfault at 0 ip 7f3a error 4\n"
            ),
            "{read}"
        );
        // Routine lines of one shape are never rare.
        assert_eq!(
            line_shape("T1 INFO http: GET /a status=200"),
            line_shape("T2 INFO http: GET /a status=404")
        );
    }
}
