//! File tools confined to the workspace: `read_file`, `list_dir`, `search_text`.
//!
//! Every path goes through `Sandbox`. The tools refuse symbolic links and files that are not
//! regular (a FIFO would block) before opening anything. Directory walks never follow links,
//! skip binary files (a NUL byte in the first 8 KiB) and stop at fixed caps so a huge tree
//! cannot stall a step. The output is shaped for small models: numbered lines, counts stated
//! as a sentence, plain-word search that does not need a regex.

mod list;
mod read;
mod search;
#[cfg(test)]
mod tests;

use std::path::Path;

use super::{rel_display, Sandbox, SandboxError, ToolContext, ToolError};

pub use list::{extension_of, ListDir};
pub use read::{long_read_preview, read_preview, ReadFile, MIN_WINDOW_LINES};
pub use search::SearchText;

/// How `search_text` begins an output that found nothing (the answer step leaves such outputs
/// out of what was found: they echo the words searched for).
pub const NO_MATCHES: &str = "no matches:";

/// Most bytes a file tool reads of one file (`read_file`; `size_model`'s `config` too).
pub const MAX_READ_BYTES: u64 = 4 * 1024 * 1024;
const MAX_FILES_SCANNED: usize = 5_000;

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

/// Longest path argument the schemas accept.
pub(crate) const PATH_MAX_CHARS: usize = 160;

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// The name of the `list_dir` tool.
pub const LIST_DIR: &str = "list_dir";

/// The tools that only read the workspace's files: nothing to offer in an empty workspace.
pub const FILE_READERS: [&str; 4] = ["read_file", LIST_DIR, "search_text", super::table::TABLE];

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
