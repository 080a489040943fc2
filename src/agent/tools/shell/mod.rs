//! The `shell` tool: runs one allow-listed program, without a shell, inside the workspace and
//! inside the kernel sandbox of [`crate::agent::tools::jail`].
//!
//! Off unless the run enables it. Two layers, the second one the real boundary:
//!
//! 1. **The policy** (defence in depth, and clear refusals for the model). Chains (`;`, `&&`,
//!    `||`, `&`, `|`), substitutions (`` ` ``, `$(`, `${`), redirects (`>`, `<`), newlines and
//!    NUL bytes are refused outright; the line is split into words (quotes and backslashes, no
//!    expansion); the program must be one of the allow-list, by bare name; and every option
//!    must be on that program's **positive list** ([`ProgramRule`]): short options may be
//!    clustered (`-nr`), a value may be glued (`-n5`, `--lines=5`) or the next word, long
//!    options must be spelled in full (a program would take an abbreviation, we do not guess
//!    which option it means), `--` ends the options. Anything unlisted is refused. Option values
//!    and operands may not be absolute, start with `~`, contain a `..` component or name
//!    `.boyd`. Options that make a program run other programs (`find -exec`,
//!    `sort --compress-program`, …) cannot be listed at all.
//! 2. **The sandbox**: the program runs through [`Jail`]: Landlock limits it to the workspace
//!    (read-only unless the policy can write), `.boyd/` hidden, no other program executable,
//!    no network, a clean environment with `PATH=/usr/bin:/bin`. Symlinks out of the workspace
//!    (`cat link`, `grep -R`) hit the kernel's refusal. Where the kernel lacks Landlock the tool
//!    refuses to run, unless the user chose [`SandboxMode::Off`] (`--unsandboxed-shell`).
//!
//! The program runs with stdin closed, cwd the workspace root, in its own process group; on
//! timeout the whole group is killed. Output is capped.
//!
//! Files: this one holds the tool; `rules` the per-program option lists ([`ProgramRule`]) and
//! the built-in allow-list; `policy` the command-line check ([`ShellPolicy::check`]);
//! `capped` running a program with a timeout, capped output and its process group killed.

mod capped;
mod policy;
mod rules;

pub use capped::{run_capped, CappedOutput};
pub use policy::{split_words, ShellPolicy};
pub use rules::{OptValue, PolicyError, ProgramRule, Syntax, DEFAULT_RULES};

use std::process::Command;

use serde::Deserialize;

use super::jail::{resolve_program, Jail, FIXED_PATH};
use super::{parse_args, Cost, RiskProfile, Tool, ToolContext, ToolError};

/// Whether the shell tool's programs run in the kernel sandbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SandboxMode {
    /// In [`Jail`]; the tool refuses to run where the kernel cannot enforce it.
    #[default]
    Kernel,
    /// Directly (`--unsandboxed-shell`): only the policy, a clean environment and the fixed
    /// `PATH` apply.
    Off,
}

/// The `shell` tool.
#[derive(Debug, Clone)]
pub struct Shell {
    policy: ShellPolicy,
    description: String,
}

impl Shell {
    /// A shell tool with this policy.
    pub fn new(policy: ShellPolicy) -> Self {
        let description = format!(
            "Run ONE simple command in the workspace, no pipes or redirects. Allowed programs: \
             {}. Each takes only its listed options (a refusal lists them); spell long options \
             in full.",
            policy.names().join(", ")
        );
        Self {
            policy,
            description,
        }
    }

    /// The policy.
    pub fn policy(&self) -> &ShellPolicy {
        &self.policy
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    command: String,
}

impl Tool for Shell {
    fn name(&self) -> &str {
        "shell"
    }
    fn needs_workspace(&self) -> bool {
        true
    }
    fn description(&self) -> &str {
        &self.description
    }
    fn args_schema(&self) -> serde_json::Value {
        serde_json::json!({
            "type": "object",
            "properties": {"command": {"type": "string", "maxLength": 200, "description": "one command line, e.g. \"wc -l notes.txt\""}},
            "required": ["command"],
            "additionalProperties": false
        })
    }
    fn risk(&self) -> RiskProfile {
        // The built-in programs only read, and the sandbox then grants the workspace read-only;
        // a policy with a program that may write is not reversible.
        RiskProfile {
            cost: Cost::Medium,
            reversible: !self.policy.can_write(),
        }
    }
    fn side_effects(&self) -> bool {
        // It runs programs, even read-only ones: every command goes in the audit log.
        true
    }
    fn call(&self, args: serde_json::Value, ctx: &ToolContext) -> Result<String, ToolError> {
        let a: Args = parse_args(args)?;
        let words = self.policy.check(&a.command)?;
        let ws = ctx.workspace()?;
        let p = &self.policy;
        let out = match p.sandbox {
            SandboxMode::Kernel => {
                let mut jail = Jail::new(ws.root(), p.can_write())?;
                if let Some(l) = &p.launcher {
                    jail = jail.with_launcher(l);
                }
                jail.run(&words[0], &words[1..], p.timeout, p.max_output, &ctx.cancel)?
            }
            SandboxMode::Off => {
                let mut cmd = Command::new(resolve_program(&words[0])?);
                cmd.args(&words[1..])
                    .env_clear()
                    .env("PATH", FIXED_PATH)
                    .env("LC_ALL", "C")
                    .current_dir(ws.root());
                run_capped(cmd, p.timeout, p.max_output, &ctx.cancel)?
            }
        };
        let mut text = String::new();
        text.push_str(&out.stdout);
        if out.stdout_truncated {
            text.push_str(&format!(
                "\n[stdout cut at {} bytes]",
                self.policy.max_output
            ));
        }
        if !out.stderr.is_empty() {
            text.push_str("\n[stderr]\n");
            text.push_str(&out.stderr);
        }
        match out.status {
            Some(0) => Ok(if text.trim().is_empty() {
                "(no output, exit status 0)".into()
            } else {
                text
            }),
            code => Err(ToolError::failed(format!(
                "exit status {}: {}",
                code.map_or("killed".to_string(), |c| c.to_string()),
                crate::agent::tools::truncate_str(text.trim(), 2000)
            ))),
        }
    }
}
