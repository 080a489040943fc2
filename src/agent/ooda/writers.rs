//! Tools that change the workspace: `write_file` and `delete_file`. Both declare themselves
//! irreversible, so the OODA gate runs them only with an approval token unless the workspace's
//! policy lowers their tier; their post-conditions (`Tool::verify`, which the act phase checks)
//! look at the file afterwards. Paths go through the workspace sandbox like every file tool; the
//! sandbox keeps both out of the workspace's `.boyd/` (its policy) by the resolved path, however
//! it is spelled, and neither writes nor deletes through a symbolic link.

use serde::Deserialize;
use serde_json::Value;

use crate::agent::tools::{
    parse_args, Cost, FileEffect, RiskProfile, Tool, ToolContext, ToolError, Verification,
};

/// `write_file`: create or overwrite a text file in the workspace.
#[derive(Debug, Default, Clone, Copy)]
pub struct WriteFile;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WriteArgs {
    path: String,
    content: String,
}

/// Largest file `write_file` writes.
pub const WRITE_MAX: usize = 1 << 20;

impl Tool for WriteFile {
    fn name(&self) -> &str {
        "write_file"
    }
    fn description(&self) -> &str {
        "Create or overwrite a text file in the workspace. Cannot be undone: needs approval."
    }
    fn args_schema(&self) -> serde_json::Value {
        serde_json::json!({
            "type": "object",
            "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
            "required": ["path", "content"],
            "additionalProperties": false
        })
    }
    fn risk(&self) -> RiskProfile {
        RiskProfile {
            cost: Cost::Low,
            reversible: false,
        }
    }
    fn intent_words(&self) -> Vec<String> {
        [
            "write_file",
            "write",
            "create",
            "save",
            "overwrite",
            "append",
            "edit",
            "update",
            "replace",
            "store",
        ]
        .map(String::from)
        .to_vec()
    }
    fn file_effect(&self) -> FileEffect {
        FileEffect::Writes
    }
    /// The file holds exactly the content written.
    fn verify(&self, args: &Value, _output: &str, ctx: &ToolContext) -> Verification {
        written(args, ctx).into()
    }
    fn call(&self, args: serde_json::Value, ctx: &ToolContext) -> Result<String, ToolError> {
        let a: WriteArgs = parse_args(args)?;
        if a.content.len() > WRITE_MAX {
            return Err(ToolError::invalid(format!(
                "content is {} bytes; the limit is {WRITE_MAX}.",
                a.content.len()
            )));
        }
        let ws = ctx.workspace()?;
        let (_, mut f) = ws.open_for_write(&a.path).map_err(ToolError::from)?;
        use std::io::Write as _;
        f.write_all(a.content.as_bytes())
            .and_then(|_| f.flush())
            .map_err(|e| ToolError::failed(format!("cannot write {}: {e}.", a.path)))?;
        Ok(format!("wrote {} bytes to {}", a.content.len(), a.path))
    }
}

/// `delete_file`: delete a file in the workspace.
#[derive(Debug, Default, Clone, Copy)]
pub struct DeleteFile;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DeleteArgs {
    path: String,
}

impl Tool for DeleteFile {
    fn name(&self) -> &str {
        "delete_file"
    }
    fn description(&self) -> &str {
        "Delete a file in the workspace. Cannot be undone: needs approval."
    }
    fn args_schema(&self) -> serde_json::Value {
        serde_json::json!({
            "type": "object",
            "properties": {"path": {"type": "string"}},
            "required": ["path"],
            "additionalProperties": false
        })
    }
    fn risk(&self) -> RiskProfile {
        RiskProfile {
            cost: Cost::Medium,
            reversible: false,
        }
    }
    fn intent_words(&self) -> Vec<String> {
        [
            "delete_file",
            "delete",
            "remove",
            "erase",
            "rm",
            "unlink",
            "clean",
            "clear",
            "purge",
        ]
        .map(String::from)
        .to_vec()
    }
    fn file_effect(&self) -> FileEffect {
        FileEffect::Deletes
    }
    /// The path no longer exists.
    fn verify(&self, args: &Value, _output: &str, ctx: &ToolContext) -> Verification {
        deleted(args, ctx).into()
    }
    fn call(&self, args: serde_json::Value, ctx: &ToolContext) -> Result<String, ToolError> {
        let a: DeleteArgs = parse_args(args)?;
        let ws = ctx.workspace()?;
        let p = ws.resolve_for_delete(&a.path).map_err(ToolError::from)?;
        // `remove_file` unlinks the entry itself; it never follows a link.
        std::fs::remove_file(&p)
            .map_err(|e| ToolError::failed(format!("cannot delete {}: {e}.", a.path)))?;
        Ok(format!("deleted {}", a.path))
    }
}

/// The argument `name` as text (empty when absent: the check then fails on the path).
fn arg<'v>(args: &'v Value, name: &str) -> &'v str {
    args.get(name).and_then(Value::as_str).unwrap_or("")
}

/// `write_file`'s post-condition: the file reads back as the content.
fn written(args: &Value, ctx: &ToolContext) -> Result<(), String> {
    let ws = ctx.workspace().map_err(|e| e.message)?;
    let path = arg(args, "path");
    let want = arg(args, "content");
    // Read back through the sandbox, at most one byte more than was written.
    match ws.read_bytes(path, want.len() as u64 + 1) {
        Ok((_, got)) if got == want.as_bytes() => Ok(()),
        Ok(_) | Err(crate::agent::tools::SandboxError::TooLarge { .. }) => {
            Err(format!("{path} does not hold the content written"))
        }
        Err(e) => Err(format!("{path} cannot be read back: {e}")),
    }
}

/// `delete_file`'s post-condition: nothing is left at the path.
fn deleted(args: &Value, ctx: &ToolContext) -> Result<(), String> {
    let ws = ctx.workspace().map_err(|e| e.message)?;
    let path = arg(args, "path");
    match ws.lexical(path) {
        Ok(p) if !p.exists() => Ok(()),
        Ok(_) => Err(format!("{path} still exists")),
        Err(e) => Err(e.to_string()),
    }
}
