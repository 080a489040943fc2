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
    /// Only files with this extension ("rs"; a leading dot is dropped, any case).
    #[serde(default)]
    ext: Option<String>,
    /// Only files ("files") or only folders ("dirs").
    #[serde(default)]
    kind: Option<String>,
}

/// The values `kind` takes.
const KINDS: [&str; 2] = ["files", "dirs"];

/// Which entries a listing shows and counts.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Filter {
    /// Everything: files, folders, links and special files.
    All,
    /// Regular files only.
    Files,
    /// Folders only.
    Dirs,
    /// Regular files with this extension, as [`extension_of`] gives it (".rs").
    Ext(String),
}

impl Filter {
    /// The filter `ext` and `kind` ask for; an invalid value or pair is `InvalidArgs` saying
    /// which values are valid.
    fn from_args(ext: Option<&str>, kind: Option<&str>) -> Result<Filter, ToolError> {
        let kind = match kind {
            None => None,
            Some(k) if KINDS.contains(&k) => Some(k),
            Some(k) => {
                return Err(ToolError::invalid(format!(
                    "kind must be \"files\" or \"dirs\", not {k:?}."
                )))
            }
        };
        let Some(ext) = ext else {
            return Ok(match kind {
                Some("files") => Filter::Files,
                Some(_) => Filter::Dirs,
                None => Filter::All,
            });
        };
        let bare = ext.trim().trim_start_matches('.');
        if bare.is_empty()
            || !bare
                .chars()
                .all(|c| c.is_alphanumeric() || c == '_' || c == '-')
        {
            return Err(ToolError::invalid(format!(
                "ext is a file extension without the dot, such as \"rs\" or \"md\"; {ext:?} is not one."
            )));
        }
        if kind == Some("dirs") {
            return Err(ToolError::invalid(
                "ext picks files, so it cannot go with kind \"dirs\"; leave one of them out.",
            ));
        }
        Ok(Filter::Ext(format!(".{}", bare.to_lowercase())))
    }
    /// Whether a listing shows the file `name`.
    fn shows_file(&self, name: &str) -> bool {
        match self {
            Filter::All | Filter::Files => true,
            Filter::Dirs => false,
            Filter::Ext(e) => extension_of(name).as_deref() == Some(e.as_str()),
        }
    }
    /// Whether a listing shows folders.
    fn shows_dirs(&self) -> bool {
        matches!(self, Filter::All | Filter::Dirs)
    }
    /// "5 .rs files", "1 folder": `n` entries of the kind this filter shows.
    fn counted(&self, n: usize) -> String {
        match self {
            Filter::All => plural(n, "entry", "entries"),
            Filter::Files => plural(n, "file", "files"),
            Filter::Dirs => plural(n, "folder", "folders"),
            Filter::Ext(e) => plural(n, &format!("{e} file"), &format!("{e} files")),
        }
    }
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
    filter: &Filter,
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
            if *filter == Filter::All {
                push_line(out, format!("{shown} (link, not followed)"));
            }
        } else if ft.is_dir() {
            out.dirs += 1;
            if filter.shows_dirs() {
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
            }
            if recursive && depth < 32 {
                let sub = format!("{shown}/");
                list_into(ws, &ent.path(), &sub, true, depth + 1, filter, out);
            }
        } else if ft.is_file() {
            if !filter.shows_file(&name) {
                continue;
            }
            out.files += 1;
            let size = ent.metadata().map(|m| m.len()).unwrap_or(0);
            push_line(out, format!("{shown} ({size} bytes)"));
        } else if *filter == Filter::All {
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

/// A file name's extension as the listing counts it: ".md" (lower case); `None` for a name
/// without one (".bashrc" has none).
fn extension_of(name: &str) -> Option<String> {
    match name.rsplit_once('.') {
        Some((stem, ext)) if !stem.is_empty() && !ext.is_empty() => {
            Some(format!(".{}", ext.to_lowercase()))
        }
        _ => None,
    }
}

/// How many files below `dir` have each extension ([`extension_of`]; "no extension" for
/// none), links not followed, 32 levels at most.
fn extension_map(ws: &Sandbox, dir: &Path) -> BTreeMap<String, usize> {
    fn walk(ws: &Sandbox, dir: &Path, depth: usize, out: &mut BTreeMap<String, usize>) {
        if depth > 32 {
            return;
        }
        for e in shown_entries(ws, dir) {
            match e.file_type() {
                Ok(t) if t.is_file() => {
                    let ext = extension_of(&e.file_name().to_string_lossy())
                        .unwrap_or_else(|| "no extension".to_string());
                    *out.entry(ext).or_default() += 1;
                }
                Ok(t) if t.is_dir() => walk(ws, &e.path(), depth + 1, out),
                _ => {}
            }
        }
    }
    let mut counts = BTreeMap::new();
    walk(ws, dir, 0, &mut counts);
    counts
}

/// Files below `dir` by extension ([`extension_map`]), most first, as "5 .md, 2 .yaml, 1 .svg".
fn extension_counts(ws: &Sandbox, dir: &Path) -> String {
    let mut v: Vec<(String, usize)> = extension_map(ws, dir).into_iter().collect();
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

/// A filtered listing's output: the count of what `filter` shows directly in `dir` (and in
/// its tree when it has subfolders) first, as "total: 5 .rs files directly in src; 12 .rs
/// files in src and its subfolders", then (with subfolders) the by-type line (files) or the
/// subfolder holding the most (folders), then the entries `listing` holds.
fn filtered(
    ws: &Sandbox,
    dir: &Path,
    shown: &str,
    prefix: &str,
    filter: &Filter,
    listing: &Listing,
) -> String {
    let (direct_files, direct_dirs) = count_direct(ws, dir);
    let direct = match filter {
        Filter::All | Filter::Files => direct_files,
        Filter::Dirs => direct_dirs,
        Filter::Ext(_) => shown_entries(ws, dir)
            .iter()
            .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
            .filter(|e| filter.shows_file(&e.file_name().to_string_lossy()))
            .count(),
    };
    let mut out = format!("total: {} directly in {shown}", filter.counted(direct));
    if direct_dirs > 0 {
        let tree = match filter {
            Filter::All | Filter::Files => count_all(ws, dir, 0).0,
            Filter::Dirs => count_all(ws, dir, 0).1,
            Filter::Ext(e) => extension_map(ws, dir).get(e).copied().unwrap_or(0),
        };
        out.push_str(&format!(
            "; {} in {shown} and its subfolders",
            filter.counted(tree)
        ));
        match filter {
            Filter::Files => out.push_str(&format!(
                "\nby type, {shown} and its subfolders: {}",
                extension_counts(ws, dir)
            )),
            Filter::Dirs => {
                if let Some(line) = most_files(ws, dir, prefix) {
                    out.push('\n');
                    out.push_str(&line);
                }
            }
            _ => {}
        }
    }
    for line in &listing.lines {
        out.push('\n');
        out.push_str(line);
    }
    if listing.truncated {
        out.push_str(&format!("\n... (only the first {MAX_LIST} entries shown)"));
    }
    out
}

impl Tool for ListDir {
    fn name(&self) -> &str {
        LIST_DIR
    }
    fn needs_workspace(&self) -> bool {
        true
    }
    fn description(&self) -> &str {
        "List a workspace directory (default \".\"): files with sizes, folders ending in / with how many files each holds; its first lines count the files (in all, by type, and which subfolder holds the most). With recursive=true it lists every subfolder too and counts all files in the tree. ext (an extension without the dot) lists and counts only the files with that extension; kind=\"files\" or kind=\"dirs\" only the files or only the folders. Use it to find files and to count them."
    }
    fn args_schema(&self) -> serde_json::Value {
        serde_json::json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "maxLength": PATH_MAX_CHARS, "description": "directory relative to the workspace; \".\" for the root"},
                "recursive": {"type": "boolean"},
                "ext": {"type": "string", "maxLength": 16, "description": "only files with this extension, without the dot"},
                "kind": {"type": "string", "enum": KINDS, "description": "only files or only folders"}
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
        let filter = Filter::from_args(a.ext.as_deref(), a.kind.as_deref())?;
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
        list_into(ws, &dir, &prefix, a.recursive, 0, &filter, &mut listing);
        if filter != Filter::All {
            return Ok(filtered(ws, &dir, &shown, &prefix, &filter, &listing));
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::tools::ToolErrorKind;

    /// A workspace with src/{a.rs, b.RS, c.txt, sub/{d.rs, e.md}, empty/} and its context.
    fn workspace() -> (tempfile::TempDir, ToolContext) {
        let t = tempfile::tempdir().expect("test value");
        for f in [
            "src/a.rs",
            "src/b.RS",
            "src/c.txt",
            "src/sub/d.rs",
            "src/sub/e.md",
        ] {
            let p = t.path().join(f);
            std::fs::create_dir_all(p.parent().expect("test value")).expect("test value");
            std::fs::write(p, "x").expect("test value");
        }
        std::fs::create_dir_all(t.path().join("src/empty")).expect("test value");
        let ctx = ToolContext {
            workspace: Some(Sandbox::new(t.path()).expect("test value")),
            blob_dir: t.path().join("blobs"),
            cancel: crate::lm::CancelToken::new(),
            task: None,
            observed: Vec::new(),
        };
        (t, ctx)
    }

    fn list(ctx: &ToolContext, args: serde_json::Value) -> Result<Vec<String>, ToolError> {
        let out = ListDir.call(args, ctx)?;
        Ok(out.lines().map(str::to_string).collect())
    }

    #[test]
    fn an_ext_filter_lists_and_counts_only_that_extension_in_any_case() {
        let (_t, ctx) = workspace();
        let lines = list(&ctx, serde_json::json!({"path": "src", "ext": "rs"})).expect("listed");
        assert_eq!(
            lines,
            vec![
                "total: 2 .rs files directly in src; 3 .rs files in src and its subfolders",
                "src/a.rs (1 bytes)",
                "src/b.RS (1 bytes)",
            ]
        );
        // A leading dot and upper case name the same extension; recursive lists the tree's.
        let lines = list(
            &ctx,
            serde_json::json!({"path": "src", "ext": ".RS", "recursive": true}),
        )
        .expect("listed");
        assert_eq!(
            lines[0],
            "total: 2 .rs files directly in src; 3 .rs files in src and its subfolders"
        );
        assert_eq!(
            &lines[1..],
            [
                "src/a.rs (1 bytes)",
                "src/b.RS (1 bytes)",
                "src/sub/d.rs (1 bytes)"
            ]
        );
        // None of that extension: the count says 0 and nothing is listed.
        let lines =
            list(&ctx, serde_json::json!({"path": "src/sub", "ext": "toml"})).expect("listed");
        assert_eq!(lines, vec!["total: 0 .toml files directly in src/sub"]);
    }

    #[test]
    fn a_kind_filter_lists_only_files_or_only_folders_with_their_counts() {
        let (_t, ctx) = workspace();
        let files =
            list(&ctx, serde_json::json!({"path": "src", "kind": "files"})).expect("listed");
        assert_eq!(
            files,
            vec![
                "total: 3 files directly in src; 5 files in src and its subfolders",
                "by type, src and its subfolders: 3 .rs, 1 .md, 1 .txt",
                "src/a.rs (1 bytes)",
                "src/b.RS (1 bytes)",
                "src/c.txt (1 bytes)",
            ]
        );
        let dirs = list(&ctx, serde_json::json!({"path": "src", "kind": "dirs"})).expect("listed");
        assert_eq!(
            dirs,
            vec![
                "total: 2 folders directly in src; 2 folders in src and its subfolders",
                "most files: src/sub/ (2 files, counting its subfolders; next: src/empty/ with 0)",
                "src/empty/ (0 files)",
                "src/sub/ (2 files)",
            ]
        );
        // Recursive files: every file of the tree, no folder lines.
        let all = list(
            &ctx,
            serde_json::json!({"path": ".", "kind": "files", "recursive": true}),
        )
        .expect("listed");
        assert_eq!(
            all[0],
            "total: 0 files directly in .; 5 files in . and its subfolders"
        );
        assert_eq!(all.iter().filter(|l| l.ends_with("(1 bytes)")).count(), 5);
        assert!(!all.iter().any(|l| l.contains("/ (")), "{all:?}");
        // Unfiltered, the listing is as before.
        let whole = list(&ctx, serde_json::json!({"path": "src"})).expect("listed");
        assert_eq!(
            whole[0],
            "total: 3 files and 2 folders directly in src; 5 files in src and its subfolders (2 folders below it)"
        );
        assert_eq!(whole.len(), 3 + 5);
    }

    #[test]
    fn a_bad_kind_or_ext_is_an_invalid_argument_naming_the_valid_values() {
        let (_t, ctx) = workspace();
        let err = list(&ctx, serde_json::json!({"path": "src", "kind": "folders"}))
            .expect_err("bad kind");
        assert_eq!(err.kind, ToolErrorKind::InvalidArgs);
        assert_eq!(
            err.message,
            "kind must be \"files\" or \"dirs\", not \"folders\"."
        );
        let err = list(&ctx, serde_json::json!({"ext": "rs", "kind": "dirs"})).expect_err("pair");
        assert_eq!(err.kind, ToolErrorKind::InvalidArgs);
        assert!(
            err.message.contains("cannot go with kind \"dirs\""),
            "{}",
            err.message
        );
        for bad in ["", ".", "r s", "src/rs"] {
            let err = list(&ctx, serde_json::json!({"ext": bad})).expect_err("bad ext");
            assert_eq!(err.kind, ToolErrorKind::InvalidArgs, "{bad:?}");
            assert!(
                err.message.starts_with("ext is a file extension"),
                "{}",
                err.message
            );
        }
        // Unknown arguments are still refused.
        let err = list(&ctx, serde_json::json!({"type": "files"})).expect_err("unknown");
        assert_eq!(err.kind, ToolErrorKind::InvalidArgs);
    }

    #[test]
    fn the_schema_offers_ext_and_kind() {
        let schema = ListDir.args_schema();
        assert_eq!(schema["properties"]["ext"]["type"], "string");
        assert_eq!(
            schema["properties"]["kind"]["enum"],
            serde_json::json!(["files", "dirs"])
        );
        let args = serde_json::json!({"path": "src", "ext": "rs", "kind": "files"});
        crate::agent::tools::check_args(&ListDir, &args).expect("offered");
    }
}
