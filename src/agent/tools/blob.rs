//! `read_blob`: pages through an observation the condenser stored in the run's `blobs/` folder.

use serde::Deserialize;

use super::{parse_args, Tool, ToolContext, ToolError, Verification};
use crate::agent::condense;

/// Default page size in characters (below the condenser limit, so a page is never condensed).
pub const PAGE_CHARS: usize = 1200;

/// The `read_blob` tool.
#[derive(Debug, Default, Clone, Copy)]
pub struct ReadBlob;

/// Name of the blob-paging tool.
pub const READ_BLOB: &str = "read_blob";

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    blob: String,
    #[serde(default)]
    offset: usize,
    #[serde(default)]
    length: Option<usize>,
}

impl Tool for ReadBlob {
    fn name(&self) -> &str {
        READ_BLOB
    }
    fn description(&self) -> &str {
        "Read part of a long observation that was truncated. blob is the 64-character id from the truncation note; offset is the character to start at (0 first); length at most 1200."
    }
    fn args_schema(&self) -> serde_json::Value {
        serde_json::json!({
            "type": "object",
            "properties": {
                "blob": {"type": "string", "maxLength": 64, "pattern": "^[0-9a-f]{64}$"},
                "offset": {"type": "integer", "minimum": 0, "maximum": 100_000_000},
                "length": {"type": "integer", "minimum": 1, "maximum": PAGE_CHARS}
            },
            "required": ["blob"],
            "additionalProperties": false
        })
    }
    fn polls(&self) -> bool {
        // The same page twice is the same text: a 0.5B planner read one page five times in a
        // row until the step limit. Another offset is another action; a repeat gets the
        // guard's copy of the page it already returned.
        false
    }
    /// A page of a blob is never empty.
    fn verify(&self, _args: &serde_json::Value, output: &str, _ctx: &ToolContext) -> Verification {
        if output.is_empty() {
            Verification::Broken("read_blob returned nothing".into())
        } else {
            Verification::Holds
        }
    }
    fn call(&self, args: serde_json::Value, ctx: &ToolContext) -> Result<String, ToolError> {
        let a: Args = parse_args(args)?;
        let sha = a
            .blob
            .trim()
            .trim_start_matches("blob")
            .trim()
            .to_ascii_lowercase();
        if sha.len() != 64 || !sha.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(ToolError::invalid(format!(
                "{:?} is not a blob id; copy the 64 hex characters from the truncation note.",
                a.blob
            )));
        }
        let text = condense::read_blob(&ctx.blob_dir, &sha).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => {
                ToolError::not_found(format!("no blob {sha} in this run."))
            }
            _ => ToolError::failed(format!("cannot read blob {sha}: {e}.")),
        })?;
        let total = text.chars().count();
        if a.offset >= total && total > 0 {
            return Err(ToolError::invalid(format!(
                "offset {} is past the end; the blob has {total} characters.",
                a.offset
            )));
        }
        let len = a.length.unwrap_or(PAGE_CHARS).clamp(1, PAGE_CHARS);
        let page: String = text.chars().skip(a.offset).take(len).collect();
        let end = a.offset + page.chars().count();
        let mut out = format!(
            "[blob {} characters {}..{} of {}]\n",
            &sha[..12],
            a.offset,
            end,
            total
        );
        out.push_str(&page);
        if end < total {
            out.push_str(&format!("\n[more: call read_blob with offset {end}]"));
        }
        Ok(out)
    }
}
