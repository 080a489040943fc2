//! `list_dir`: a directory's entries with their counts.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;

use super::{check_regular, plural, LIST_DIR, PATH_MAX_CHARS};
use crate::agent::tools::{
    parse_args, rel_display, Sandbox, Tool, ToolContext, ToolError, Verification,
};

const MAX_LIST: usize = 200;

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
pub(super) fn most_files(ws: &Sandbox, dir: &Path, prefix: &str) -> Option<String> {
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
