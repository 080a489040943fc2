//! The shell tool's policy: which programs it may run ([`ShellPolicy`]) and the check of one
//! command line: no chains, substitutions, redirects or newlines, split into words without
//! expansion ([`split_words`]), a bare allowed program, and its arguments checked by its rule.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use super::rules::{builtin_rule, PolicyError, ProgramRule, DEFAULT_RULES};
use super::SandboxMode;
use crate::agent::tools::ToolError;

/// What the shell tool may run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShellPolicy {
    /// Allowed programs (bare names) and their options.
    pub programs: BTreeMap<String, ProgramRule>,
    /// Time limit per command.
    pub timeout: Duration,
    /// Most bytes of output kept (stdout and stderr each).
    pub max_output: usize,
    /// Kernel sandbox or not.
    pub sandbox: SandboxMode,
    /// The sandbox launcher (default: found by [`crate::agent::tools::jail::find_launcher`]).
    pub launcher: Option<PathBuf>,
}

impl Default for ShellPolicy {
    fn default() -> Self {
        Self {
            programs: DEFAULT_RULES
                .iter()
                .filter_map(|s| s.split(':').next())
                .filter_map(|n| builtin_rule(n).map(|r| (n.to_string(), r)))
                .collect(),
            timeout: Duration::from_secs(10),
            max_output: 16 * 1024,
            sandbox: SandboxMode::Kernel,
            launcher: None,
        }
    }
}

impl ShellPolicy {
    /// A policy with exactly these programs (built-in options for built-in programs, no
    /// options for others). Names that run other programs are left out.
    pub fn with_allow<I, S>(allow: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Self {
            programs: allow
                .into_iter()
                .filter_map(|n| {
                    let n: String = n.into();
                    ProgramRule::parse_spec(n.split(':').next().unwrap_or_default()).ok()
                })
                .collect(),
            ..Self::default()
        }
    }

    /// A policy from `--shell-allow` entries: each `PROGRAM` or `PROGRAM:OPTION,…`; an entry
    /// without `:` may also be a comma-separated list of programs (`cat,wc`). No entries: the
    /// default policy.
    pub fn from_specs<S: AsRef<str>>(specs: &[S]) -> Result<Self, PolicyError> {
        if specs.is_empty() {
            return Ok(Self::default());
        }
        let mut programs = BTreeMap::new();
        for spec in specs {
            let spec = spec.as_ref();
            let parts: Vec<&str> = if spec.contains(':') {
                vec![spec]
            } else {
                spec.split(',').filter(|s| !s.trim().is_empty()).collect()
            };
            for part in parts {
                let (name, rule) = ProgramRule::parse_spec(part)?;
                programs.insert(name, rule);
            }
        }
        Ok(Self {
            programs,
            ..Self::default()
        })
    }

    /// The allowed program names.
    pub fn names(&self) -> Vec<&str> {
        self.programs.keys().map(String::as_str).collect()
    }

    /// Whether any allowed program may change files (then the workspace is writable in the
    /// sandbox and the tool is not reversible).
    pub fn can_write(&self) -> bool {
        self.programs.values().any(|r| r.writes)
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
        let Some(rule) = self.programs.get(program.as_str()) else {
            return Err(ToolError::denied(format!(
                "{program:?} is not an allowed program; allowed: {}.",
                self.names().join(", ")
            )));
        };
        rule.check_args(program, &words[1..])
            .map_err(|why| denied(&why))?;
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

#[cfg(test)]
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
}
