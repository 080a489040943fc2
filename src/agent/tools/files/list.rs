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
    /// Only files with this extension ("rs", ".rs" or "*.rs"; any case).
    #[serde(default)]
    ext: Option<String>,
    /// Only files or only folders.
    #[serde(default)]
    kind: Option<Kind>,
}

/// Which entries a filtered listing shows.
#[derive(Deserialize, Clone, Copy, PartialEq, Eq, Debug)]
#[serde(rename_all = "lowercase")]
enum Kind {
    #[serde(alias = "file")]
    Files,
    #[serde(alias = "dir", alias = "folders", alias = "directories")]
    Dirs,
}

/// What a listing shows and counts: everything unless an extension or a kind is named.
#[derive(Default)]
struct Filter {
    /// Lower case, without the dot.
    ext: Option<String>,
    kind: Option<Kind>,
}

impl Filter {
    fn new(ext: Option<&str>, kind: Option<Kind>) -> Result<Filter, ToolError> {
        let ext =
            match ext.map(|e| e.trim().trim_start_matches('*').trim_start_matches('.')) {
                None => None,
                Some("") => return Err(ToolError::invalid(
                    "ext is empty; give an extension such as \"rs\" or \".md\", or leave it out.",
                )),
                Some(e) if e.contains(['/', '\\', '*', '?']) => {
                    return Err(ToolError::invalid(format!(
                        "ext {e:?} is not an extension; give one such as \"rs\" or \".md\"."
                    )))
                }
                Some(e) => Some(e.to_lowercase()),
            };
        if ext.is_some() && kind == Some(Kind::Dirs) {
            return Err(ToolError::invalid(
                "ext picks files and kind=dirs picks folders; give one of them.",
            ));
        }
        Ok(Filter { ext, kind })
    }
    fn active(&self) -> bool {
        self.ext.is_some() || self.kind.is_some()
    }
    fn shows_file(&self, name: &str) -> bool {
        self.kind != Some(Kind::Dirs)
            && self
                .ext
                .as_deref()
                .is_none_or(|want| extension_of(name).is_some_and(|e| e == want))
    }
    fn shows_dir(&self) -> bool {
        self.kind != Some(Kind::Files) && self.ext.is_none()
    }
    /// "3 .rs files", "1 folder", "4 files".
    fn noun(&self, n: usize) -> String {
        match (&self.ext, self.kind) {
            (Some(e), _) => plural(n, &format!(".{e} file"), &format!(".{e} files")),
            (None, Some(Kind::Dirs)) => plural(n, "folder", "folders"),
            _ => plural(n, "file", "files"),
        }
    }
}

/// A file name's extension in lower case without the dot; none for "Makefile" or ".env".
pub fn extension_of(name: &str) -> Option<String> {
    match name.rsplit_once('.') {
        Some((stem, ext)) if !stem.is_empty() && !ext.is_empty() => Some(ext.to_lowercase()),
        _ => None,
    }
}

/// Entries `filter` shows directly in `dir` and in its whole tree (links not followed, 32
/// levels at most).
fn count_shown(ws: &Sandbox, dir: &Path, filter: &Filter, depth: usize) -> (usize, usize) {
    if depth > 32 {
        return (0, 0);
    }
    let mut direct = 0;
    let mut all = 0;
    for e in shown_entries(ws, dir) {
        match e.file_type() {
            Ok(t) if t.is_file() && filter.shows_file(&e.file_name().to_string_lossy()) => {
                direct += 1;
                all += 1;
            }
            Ok(t) if t.is_dir() => {
                if filter.shows_dir() {
                    direct += 1;
                    all += 1;
                }
                all += count_shown(ws, &e.path(), filter, depth + 1).1;
            }
            _ => {}
        }
    }
    (direct, all)
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
    filter: &Filter,
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
            if !filter.active() {
                push_line(out, format!("{shown} (link, not followed)"));
            }
        } else if ft.is_dir() {
            if filter.shows_dir() {
                show_dir(ws, &ent.path(), &shown, out);
            }
            if recursive && depth < 32 {
                let next = format!("{shown}/");
                list_into(ws, &ent.path(), &next, true, filter, depth + 1, out);
            }
        } else if ft.is_file() {
            if !filter.shows_file(&name) {
                continue;
            }
            out.files += 1;
            let size = ent.metadata().map(|m| m.len()).unwrap_or(0);
            push_line(out, format!("{shown} ({size} bytes)"));
        } else if !filter.active() {
            push_line(out, format!("{shown} (special file)"));
        }
    }
}

/// A folder's line: its name and how many files it holds.
fn show_dir(ws: &Sandbox, path: &Path, shown: &str, out: &mut Listing) {
    out.dirs += 1;
    let inner = count_direct(ws, path).0;
    let all = count_all(ws, path, 0).0;
    let counts = if all == inner {
        plural(inner, "file", "files")
    } else {
        format!(
            "{}, {all} with its subfolders",
            plural(inner, "file", "files")
        )
    };
    push_line(out, format!("{shown}/ ({counts})"));
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
                    let ext = extension_of(&e.file_name().to_string_lossy())
                        .map_or_else(|| "no extension".to_string(), |x| format!(".{x}"));
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
                "recursive": {"type": "boolean"},
                "ext": {"type": "string", "maxLength": 16, "description": "only files with this extension (without the dot); the first line then counts those"},
                "kind": {"type": "string", "enum": ["files", "dirs"], "description": "only files or only folders; the first line then counts those"}
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
        let filter = Filter::new(a.ext.as_deref(), a.kind)?;
        let shown = rel_display(ws.root(), &dir);
        let mut listing = Listing::default();
        // Entries are shown with their path from the workspace root, so the model can pass
        // them to read_file as they are.
        let prefix = if shown == "." {
            String::new()
        } else {
            format!("{}/", shown.trim_end_matches('/'))
        };
        list_into(ws, &dir, &prefix, a.recursive, &filter, 0, &mut listing);
        if filter.active() {
            return Ok(filtered_listing(
                ws,
                &dir,
                &shown,
                &filter,
                a.recursive,
                listing,
            ));
        }
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

/// A listing of what `filter` keeps: its counts first (directly in `dir`, and in its whole
/// tree), then the entries.
fn filtered_listing(
    ws: &Sandbox,
    dir: &Path,
    shown: &str,
    filter: &Filter,
    recursive: bool,
    listing: Listing,
) -> String {
    let (direct, all) = count_shown(ws, dir, filter, 0);
    // What the filter left out is counted too: a filter the model set by mistake (".yml" for
    // ".yaml" files) shows as a total far below everything.
    let (files, dirs) = count_all(ws, dir, 0);
    // The count at the depth asked comes first, alone on its line: a small model answers
    // with the first count it sees.
    let (asked, other) = if recursive {
        (
            format!("{} in {shown} and its subfolders", filter.noun(all)),
            format!("{} directly in {shown}", filter.noun(direct)),
        )
    } else {
        (
            format!("{} directly in {shown}", filter.noun(direct)),
            format!("{} counting its subfolders", filter.noun(all)),
        )
    };
    let mut out = format!(
        "total: {asked}\nalso: {other}; without the filter, {} and {} there in all",
        plural(files, "file", "files"),
        plural(dirs, "folder", "folders")
    );
    if listing.lines.is_empty() {
        if all > 0 && !recursive {
            out.push_str("; none directly here, list with recursive=true to see them");
        }
        return out;
    }
    out.push('\n');
    out.push_str(&listing.lines.join("\n"));
    if listing.truncated {
        out.push_str(&format!("\n... (only the first {MAX_LIST} entries shown)"));
    }
    out
}
