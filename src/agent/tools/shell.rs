//! The `shell` tool: runs one allow-listed program, without a shell, inside the workspace.
//!
//! Off unless the run enables it. The command line is checked before anything runs: chains
//! (`;`, `&&`, `||`, `&`, `|`), substitutions (`` ` ``, `$(`, `${`), redirects (`>`, `<`),
//! newlines and NUL bytes are refused outright; then it is split into words (quotes and
//! backslashes, like a POSIX shell but with no expansion at all), the program name must be
//! exactly one of the allow-list (no paths), and no argument may be an absolute path, start with
//! `~`, contain a `..` component, or be an escape hatch such as `find -exec` or `sort -o`.
//! The program runs with `Command` directly (no shell), stdin closed, cwd the workspace root, in
//! its own process group; on timeout the whole group is killed. Output is capped.

use std::collections::BTreeSet;
use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde::Deserialize;

use super::{parse_args, Cost, RiskProfile, Tool, ToolContext, ToolError, ToolErrorKind};
use crate::lm::CancelToken;

/// What the shell tool may run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShellPolicy {
    /// Exact program names allowed.
    pub allow: BTreeSet<String>,
    /// Time limit per command.
    pub timeout: Duration,
    /// Most bytes of output kept (stdout and stderr each).
    pub max_output: usize,
}

impl Default for ShellPolicy {
    fn default() -> Self {
        Self {
            allow: [
                "cat", "cut", "date", "du", "echo", "find", "grep", "head", "ls", "pwd", "sort",
                "tail", "uniq", "wc",
            ]
            .iter()
            .map(|s| s.to_string())
            .collect(),
            timeout: Duration::from_secs(10),
            max_output: 16 * 1024,
        }
    }
}

impl ShellPolicy {
    /// A policy with exactly these programs.
    pub fn with_allow<I, S>(allow: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Self {
            allow: allow.into_iter().map(Into::into).collect(),
            ..Self::default()
        }
    }

    /// Check a command line and split it into program and arguments, or say why not.
    pub fn check(&self, command: &str) -> Result<Vec<String>, ToolError> {
        let denied = |why: &str| ToolError::denied(format!("refused {command:?}: {why}."));
        if command.contains('\0') {
            return Err(denied("NUL byte"));
        }
        if command.contains('\n') || command.contains('\r') {
            return Err(denied("one command per call; newlines are not allowed"));
        }
        for (pat, why) in [
            ("$(", "command substitution is not allowed"),
            ("${", "variable expansion is not allowed"),
            ("`", "backticks are not allowed"),
            (
                "&&",
                "chaining commands is not allowed; run one command per call",
            ),
            (
                "||",
                "chaining commands is not allowed; run one command per call",
            ),
            (
                ";",
                "chaining commands is not allowed; run one command per call",
            ),
            ("|", "pipes are not allowed; run one command per call"),
            ("&", "background jobs are not allowed"),
            (">", "redirects are not allowed"),
            ("<", "redirects are not allowed"),
        ] {
            if command.contains(pat) {
                return Err(denied(why));
            }
        }
        let words = split_words(command).map_err(|e| {
            ToolError::invalid(format!("cannot split {command:?} into words: {e}."))
        })?;
        let Some(program) = words.first() else {
            return Err(ToolError::invalid("the command is empty."));
        };
        if program.contains('/') {
            return Err(denied("give the bare program name, not a path"));
        }
        if !self.allow.contains(program.as_str()) {
            let allowed: Vec<&str> = self.allow.iter().map(String::as_str).collect();
            return Err(ToolError::denied(format!(
                "{program:?} is not an allowed program; allowed: {}.",
                allowed.join(", ")
            )));
        }
        for arg in &words[1..] {
            let value = arg.split_once('=').map_or(arg.as_str(), |(_, v)| v);
            for v in [arg.as_str(), value] {
                if v.starts_with('/') {
                    return Err(denied(
                        "absolute paths are not allowed; paths are relative to the workspace",
                    ));
                }
                if v.starts_with('~') {
                    return Err(denied("~ paths are not allowed"));
                }
                if v.split('/').any(|c| c == "..") {
                    return Err(denied("\"..\" is not allowed in arguments"));
                }
            }
            let lowered = arg.to_ascii_lowercase();
            let escape = match program.as_str() {
                "find" => [
                    "-exec", "-execdir", "-ok", "-okdir", "-delete", "-fprint", "-fprint0",
                    "-fprintf", "-fls",
                ]
                .contains(&lowered.as_str()),
                "sort" => {
                    lowered == "-o"
                        || lowered.starts_with("--output")
                        || (lowered.starts_with("-o") && !lowered.starts_with("--"))
                }
                _ => false,
            };
            if escape || lowered == "-exec" {
                return Err(denied(&format!("{arg} is not allowed with {program}")));
            }
        }
        Ok(words)
    }
}

/// Split a command line into words: whitespace separates, single quotes are literal, double
/// quotes allow `\"` and `\\`, a backslash outside quotes escapes the next character.
pub fn split_words(s: &str) -> Result<Vec<String>, String> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut in_word = false;
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        match c {
            c if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut cur));
                    in_word = false;
                }
            }
            '\'' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(ch) => cur.push(ch),
                        None => return Err("unterminated single quote".into()),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(ch @ ('"' | '\\')) => cur.push(ch),
                            Some(ch) => {
                                cur.push('\\');
                                cur.push(ch);
                            }
                            None => return Err("unterminated double quote".into()),
                        },
                        Some(ch) => cur.push(ch),
                        None => return Err("unterminated double quote".into()),
                    }
                }
            }
            '\\' => {
                in_word = true;
                match chars.next() {
                    Some(ch) => cur.push(ch),
                    None => return Err("trailing backslash".into()),
                }
            }
            ch => {
                in_word = true;
                cur.push(ch);
            }
        }
    }
    if in_word {
        words.push(cur);
    }
    Ok(words)
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
        let names: Vec<&str> = policy.allow.iter().map(String::as_str).collect();
        let description = format!(
            "Run ONE simple command in the workspace, no pipes or redirects. Allowed programs: {}.",
            names.join(", ")
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
    fn description(&self) -> &str {
        &self.description
    }
    fn args_schema(&self) -> serde_json::Value {
        serde_json::json!({
            "type": "object",
            "properties": {"command": {"type": "string", "description": "one command line, e.g. \"wc -l notes.txt\""}},
            "required": ["command"],
            "additionalProperties": false
        })
    }
    fn risk(&self) -> RiskProfile {
        // The allow-list is read-only programs by default; a policy that allows writers should be
        // wrapped by a tool that reports `reversible: false`.
        RiskProfile {
            cost: Cost::Medium,
            reversible: true,
        }
    }
    fn call(&self, args: serde_json::Value, ctx: &ToolContext) -> Result<String, ToolError> {
        let a: Args = parse_args(args)?;
        let words = self.policy.check(&a.command)?;
        let ws = ctx.workspace()?;
        let mut cmd = Command::new(&words[0]);
        cmd.args(&words[1..]).current_dir(ws.root());
        let out = run_capped(
            cmd,
            self.policy.timeout,
            self.policy.max_output,
            &ctx.cancel,
        )?;
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
                super::truncate_str(text.trim(), 2000)
            ))),
        }
    }
}

/// Output of a capped run.
#[derive(Debug, Clone, Default)]
pub struct CappedOutput {
    /// Exit code (`None` when killed by a signal).
    pub status: Option<i32>,
    /// Stdout (lossy UTF-8), at most the cap.
    pub stdout: String,
    /// Whether stdout was cut.
    pub stdout_truncated: bool,
    /// Stderr, at most the cap.
    pub stderr: String,
}

fn reader<R: Read + Send + 'static>(
    r: Option<R>,
    cap: usize,
) -> std::thread::JoinHandle<(Vec<u8>, bool)> {
    std::thread::spawn(move || {
        let mut kept = Vec::new();
        let mut truncated = false;
        let Some(mut r) = r else {
            return (kept, truncated);
        };
        let mut buf = [0u8; 8192];
        loop {
            match r.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    let room = cap.saturating_sub(kept.len());
                    if room < n {
                        truncated = true;
                    }
                    kept.extend_from_slice(&buf[..n.min(room)]);
                }
            }
        }
        (kept, truncated)
    })
}

/// Run a command in its own process group with stdin closed, capped output and a timeout that
/// kills the whole group (and cancellation, which does the same).
pub fn run_capped(
    mut cmd: Command,
    timeout: Duration,
    cap: usize,
    cancel: &CancelToken,
) -> Result<CappedOutput, ToolError> {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt;
        cmd.process_group(0);
    }
    let mut child = cmd.spawn().map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => ToolError::not_found(format!(
            "program {:?} is not installed on this machine.",
            cmd.get_program()
        )),
        _ => ToolError::failed(format!("cannot start {:?}: {e}.", cmd.get_program())),
    })?;
    let out_h = reader(child.stdout.take(), cap);
    let err_h = reader(child.stderr.take(), cap);
    let start = Instant::now();
    let mut killed: Option<ToolErrorKind> = None;
    let status = loop {
        match child.try_wait() {
            Ok(Some(st)) => break Some(st),
            Ok(None) => {}
            Err(_) => break None,
        }
        if start.elapsed() >= timeout {
            killed = Some(ToolErrorKind::Timeout);
        } else if cancel.is_cancelled() {
            killed = Some(ToolErrorKind::Failed);
        }
        if killed.is_some() {
            kill_group(&mut child);
            break child.wait().ok();
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    // Kill stragglers in the group that still hold the pipes, then collect output.
    if killed.is_none() {
        kill_group_quiet(child.id());
    }
    let (out, out_trunc) = out_h.join().unwrap_or_default();
    let (err, _) = err_h.join().unwrap_or_default();
    match killed {
        Some(ToolErrorKind::Timeout) => Err(ToolError::new(
            ToolErrorKind::Timeout,
            format!(
                "the command ran longer than {:.1} s and was killed.",
                timeout.as_secs_f64()
            ),
        )),
        Some(_) => Err(ToolError::failed("cancelled.")),
        None => Ok(CappedOutput {
            status: status.and_then(|s| s.code()),
            stdout: String::from_utf8_lossy(&out).into_owned(),
            stdout_truncated: out_trunc,
            stderr: String::from_utf8_lossy(&err).into_owned(),
        }),
    }
}

fn kill_group(child: &mut std::process::Child) {
    kill_group_quiet(child.id());
    let _ = child.kill();
}

/// Send SIGKILL to the process group `pgid` (the child's pid, since it leads its own group).
fn kill_group_quiet(pgid: u32) {
    #[cfg(unix)]
    {
        let _ = Command::new("kill")
            .args(["-KILL", "--", &format!("-{pgid}")])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
    #[cfg(not(unix))]
    {
        let _ = pgid;
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    #[test]
    fn split_words_handles_quotes() {
        assert_eq!(
            split_words(r#"grep -n "a b" 'c d' e\ f"#).unwrap_or_default(),
            vec!["grep", "-n", "a b", "c d", "e f"]
        );
        assert!(split_words("echo 'open").is_err());
        assert!(split_words("echo \"open").is_err());
        assert!(split_words("echo \\").is_err());
    }

    #[test]
    fn timeout_kills_the_whole_process_group() {
        // sh starts a background grandchild that prints its pid; both must die on timeout.
        let dir = tempfile::tempdir().expect("tempdir");
        let pidfile = dir.path().join("pid");
        let mut cmd = Command::new("sh");
        cmd.arg("-c")
            .arg(format!("sleep 30 & echo $! > {}; wait", pidfile.display()));
        let start = Instant::now();
        let r = run_capped(cmd, Duration::from_millis(300), 1024, &CancelToken::new());
        assert_eq!(
            r.map(|_| ()).map_err(|e| e.kind),
            Err(ToolErrorKind::Timeout)
        );
        assert!(start.elapsed() < Duration::from_secs(5));
        let pid = std::fs::read_to_string(&pidfile).expect("pid written");
        let pid = pid.trim();
        // The grandchild is gone (or a zombie reaped by init shortly).
        let mut alive = true;
        for _ in 0..100 {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            // state field after the ")" : Z (zombie) or missing means dead
            let state = stat
                .rsplit(')')
                .next()
                .unwrap_or("")
                .trim_start()
                .chars()
                .next();
            if stat.is_empty() || state == Some('Z') {
                alive = false;
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(!alive, "grandchild {pid} survived the timeout");
    }

    #[test]
    fn output_is_capped() {
        let mut cmd = Command::new("sh");
        cmd.arg("-c")
            .arg("i=0; while [ $i -lt 2000 ]; do echo 0123456789; i=$((i+1)); done");
        let out = run_capped(cmd, Duration::from_secs(10), 100, &CancelToken::new()).expect("runs");
        assert_eq!(out.stdout.len(), 100);
        assert!(out.stdout_truncated);
    }
}
