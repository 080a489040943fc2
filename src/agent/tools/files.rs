//! File tools confined to the workspace: `read_file`, `list_dir`, `search_text`.
//!
//! Every path goes through `Sandbox`. Directory walks never follow symbolic links, skip binary
//! files (a NUL byte in the first 8 KiB) and stop at fixed caps so a huge tree cannot stall a step.

use std::io::Read;
use std::path::Path;

use serde::Deserialize;

use super::{parse_args, rel_display, Tool, ToolContext, ToolError};

const MAX_READ_BYTES: u64 = 4 * 1024 * 1024;
const MAX_LIST: usize = 200;
const MAX_MATCHES: usize = 50;
const MAX_FILES_SCANNED: usize = 5_000;
const MAX_SEARCH_FILE: u64 = 2 * 1024 * 1024;

fn read_text(ctx: &ToolContext, path: &str) -> Result<String, ToolError> {
    let ws = ctx.workspace()?;
    let (real, file) = ws.open_file(path)?;
    let meta = file
        .metadata()
        .map_err(|e| ToolError::failed(format!("cannot stat {path}: {e}.")))?;
    if meta.is_dir() {
        return Err(ToolError::invalid(format!(
            "{path} is a directory; use list_dir to see what is in it."
        )));
    }
    if meta.len() > MAX_READ_BYTES {
        return Err(ToolError::failed(format!(
            "{path} is {} bytes, more than the {} byte limit; use search_text to find the lines you need.",
            meta.len(),
            MAX_READ_BYTES
        )));
    }
    let mut buf = Vec::with_capacity(meta.len() as usize);
    file.take(MAX_READ_BYTES)
        .read_to_end(&mut buf)
        .map_err(|e| ToolError::failed(format!("cannot read {}: {e}.", real.display())))?;
    if buf.iter().take(8192).any(|b| *b == 0) {
        return Err(ToolError::failed(format!(
            "{path} is a binary file, not text."
        )));
    }
    Ok(String::from_utf8_lossy(&buf).into_owned())
}

/// `read_file`: the text of a file in the workspace, optionally a line range.
#[derive(Debug, Default, Clone, Copy)]
pub struct ReadFile;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ReadArgs {
    path: String,
    #[serde(default)]
    start_line: Option<usize>,
    #[serde(default)]
    max_lines: Option<usize>,
}

impl Tool for ReadFile {
    fn name(&self) -> &str {
        "read_file"
    }
    fn description(&self) -> &str {
        "Read a text file in the workspace. Path is relative to the workspace, e.g. \"notes.txt\" or \"src/main.rs\". Optional start_line (1-based) and max_lines read part of a long file."
    }
    fn args_schema(&self) -> serde_json::Value {
        serde_json::json!({
            "type": "object",
            "properties": {
                "path": {"type": "string"},
                "start_line": {"type": "integer", "minimum": 1},
                "max_lines": {"type": "integer", "minimum": 1}
            },
            "required": ["path"],
            "additionalProperties": false
        })
    }
    fn call(&self, args: serde_json::Value, ctx: &ToolContext) -> Result<String, ToolError> {
        let a: ReadArgs = parse_args(args)?;
        let text = read_text(ctx, &a.path)?;
        if a.start_line.is_none() && a.max_lines.is_none() {
            return Ok(if text.is_empty() {
                format!("({} is empty)", a.path)
            } else {
                text
            });
        }
        let start = a.start_line.unwrap_or(1).max(1);
        let total = text.lines().count();
        if start > total.max(1) {
            return Err(ToolError::invalid(format!(
                "start_line {start} is past the end; {} has {total} lines.",
                a.path
            )));
        }
        let n = a.max_lines.unwrap_or(usize::MAX);
        let mut out = String::new();
        for line in text.lines().skip(start - 1).take(n) {
            out.push_str(line);
            out.push('\n');
        }
        Ok(out)
    }
}

/// `list_dir`: entries of a directory in the workspace.
#[derive(Debug, Default, Clone, Copy)]
pub struct ListDir;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ListArgs {
    #[serde(default)]
    path: Option<String>,
}

impl Tool for ListDir {
    fn name(&self) -> &str {
        "list_dir"
    }
    fn description(&self) -> &str {
        "List the files and folders in a workspace directory (default: the workspace root \".\"), with file sizes in bytes. Folders end with /."
    }
    fn args_schema(&self) -> serde_json::Value {
        serde_json::json!({
            "type": "object",
            "properties": {"path": {"type": "string", "description": "directory relative to the workspace; \".\" for the root"}},
            "additionalProperties": false
        })
    }
    fn call(&self, args: serde_json::Value, ctx: &ToolContext) -> Result<String, ToolError> {
        let a: ListArgs = parse_args(args)?;
        let ws = ctx.workspace()?;
        let path = a.path.unwrap_or_else(|| ".".into());
        let dir = ws.resolve(&path)?;
        if !dir.is_dir() {
            return Err(ToolError::invalid(format!(
                "{path} is a file, not a directory; use read_file to read it."
            )));
        }
        let rd = std::fs::read_dir(&dir)
            .map_err(|e| ToolError::failed(format!("cannot list {path}: {e}.")))?;
        let mut entries: Vec<(String, String)> = Vec::new();
        for ent in rd.flatten() {
            let name = ent.file_name().to_string_lossy().into_owned();
            let Ok(ft) = ent.file_type() else { continue };
            let line = if ft.is_symlink() {
                format!("{name} (link)")
            } else if ft.is_dir() {
                format!("{name}/")
            } else {
                let size = ent.metadata().map(|m| m.len()).unwrap_or(0);
                format!("{name} ({size} bytes)")
            };
            entries.push((name, line));
        }
        entries.sort();
        let total = entries.len();
        if total == 0 {
            return Ok(format!("{} is empty", rel_display(ws.root(), &dir)));
        }
        let mut out = entries
            .into_iter()
            .take(MAX_LIST)
            .map(|(_, l)| l)
            .collect::<Vec<_>>()
            .join("\n");
        if total > MAX_LIST {
            out.push_str(&format!("\n... and {} more entries", total - MAX_LIST));
        }
        Ok(out)
    }
}

/// `search_text`: find lines containing a literal string under a workspace path.
#[derive(Debug, Default, Clone, Copy)]
pub struct SearchText;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SearchArgs {
    pattern: String,
    #[serde(default)]
    path: Option<String>,
    #[serde(default)]
    ignore_case: bool,
}

impl Tool for SearchText {
    fn name(&self) -> &str {
        "search_text"
    }
    fn description(&self) -> &str {
        "Find lines that contain a literal text in the workspace files (recursively under path, default \".\"). Prints file:line: text for each match."
    }
    fn args_schema(&self) -> serde_json::Value {
        serde_json::json!({
            "type": "object",
            "properties": {
                "pattern": {"type": "string", "description": "literal text to find"},
                "path": {"type": "string"},
                "ignore_case": {"type": "boolean"}
            },
            "required": ["pattern"],
            "additionalProperties": false
        })
    }
    fn call(&self, args: serde_json::Value, ctx: &ToolContext) -> Result<String, ToolError> {
        let a: SearchArgs = parse_args(args)?;
        if a.pattern.is_empty() {
            return Err(ToolError::invalid(
                "pattern is empty; give the text to look for.",
            ));
        }
        let ws = ctx.workspace()?;
        let path = a.path.unwrap_or_else(|| ".".into());
        let start = ws.resolve(&path)?;
        let needle = if a.ignore_case {
            a.pattern.to_lowercase()
        } else {
            a.pattern.clone()
        };
        let mut files = Vec::new();
        collect_files(&start, &mut files, 0);
        files.sort();
        let mut matches = Vec::new();
        let mut more = 0usize;
        for f in files.iter().take(MAX_FILES_SCANNED) {
            if ctx.cancel.is_cancelled() {
                break;
            }
            let Ok(meta) = std::fs::metadata(f) else {
                continue;
            };
            if meta.len() > MAX_SEARCH_FILE {
                continue;
            }
            let Ok(bytes) = std::fs::read(f) else {
                continue;
            };
            if bytes.iter().take(8192).any(|b| *b == 0) {
                continue;
            }
            let text = String::from_utf8_lossy(&bytes);
            for (i, line) in text.lines().enumerate() {
                let hit = if a.ignore_case {
                    line.to_lowercase().contains(&needle)
                } else {
                    line.contains(&needle)
                };
                if hit {
                    if matches.len() < MAX_MATCHES {
                        matches.push(format!(
                            "{}:{}: {}",
                            rel_display(ws.root(), f),
                            i + 1,
                            super::truncate_str(line.trim_end(), 300)
                        ));
                    } else {
                        more += 1;
                    }
                }
            }
        }
        if matches.is_empty() {
            return Ok(format!("no matches for {:?} under {path}", a.pattern));
        }
        let mut out = matches.join("\n");
        if more > 0 {
            out.push_str(&format!("\n... and {more} more matches"));
        }
        Ok(out)
    }
}

/// Files under `p` (or `p` itself), never following symlinks, depth-capped.
fn collect_files(p: &Path, out: &mut Vec<std::path::PathBuf>, depth: usize) {
    if depth > 32 || out.len() >= MAX_FILES_SCANNED {
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
        collect_files(&ent.path(), out, depth + 1);
    }
}
