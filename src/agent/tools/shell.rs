//! The `shell` tool: runs one allow-listed program, without a shell, inside the workspace and
//! inside the kernel sandbox of [`super::jail`].
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

use std::collections::BTreeMap;
use std::io::Read;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde::Deserialize;

use super::jail::{resolve_program, Jail, FIXED_PATH};
use super::{parse_args, Cost, RiskProfile, Tool, ToolContext, ToolError, ToolErrorKind};
use crate::lm::CancelToken;

/// How an option takes a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OptValue {
    /// A flag: no value (`-l`, `--count`).
    None,
    /// A value, glued (`-n5`, `--lines=5`) or the next word (`-n 5`, `--lines 5`).
    Required,
    /// An optional value, only glued (`--color`, `--color=never`).
    Optional,
}

/// How a program reads its arguments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Syntax {
    /// GNU `getopt_long`: clustered short options, glued values, `--` ends the options, and
    /// options may come after operands.
    Getopt,
    /// `find`: start paths, then an expression whose primaries are whole words (`-name PAT`).
    Find,
}

/// What one program may be given: a positive list of options; anything else is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProgramRule {
    /// Allowed options (`-l`, `--lines`, or a `find` primary such as `-name`) and their values.
    pub options: BTreeMap<String, OptValue>,
    /// How the program reads its arguments.
    pub syntax: Syntax,
    /// Most operands (`uniq IN OUT` writes OUT, so `uniq` gets one); `None` for no limit.
    pub max_operands: Option<usize>,
    /// Whether the program may change files (then the workspace is writable in the sandbox
    /// and the tool is not reversible). Programs not in the built-in list are assumed to.
    pub writes: bool,
}

/// A bad `--shell-allow` entry or policy.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PolicyError {
    /// The entry does not parse.
    #[error(
        "--shell-allow {spec:?}: {reason}. Write PROGRAM or PROGRAM:OPTION,OPTION,… where an \
         option is -x or --long (a flag), -x= or --long= (takes a value), --long=? (optional \
         value), e.g. 'wc:-l,-w,-c' or 'head:-n=,--lines='"
    )]
    BadSpec {
        /// The entry.
        spec: String,
        /// What is wrong.
        reason: String,
    },
    /// The entry lists an option or program that runs other programs.
    #[error(
        "--shell-allow {spec:?}: {what} runs other programs, which the shell tool never allows \
         (and the sandbox would refuse to execute them)"
    )]
    RunsPrograms {
        /// The entry.
        spec: String,
        /// The program or option.
        what: String,
    },
}

/// The built-in programs and their options, in the `--shell-allow` form.
pub const DEFAULT_RULES: &[&str] = &[
    "cat:-n,-b,-s,-A,-E,-T,-v,--number,--number-nonblank,--squeeze-blank,--show-all,\
     --show-ends,--show-tabs",
    "cut:-b=,-c=,-f=,-d=,-s,-z,--bytes=,--characters=,--fields=,--delimiter=,--only-delimited,\
     --complement,--output-delimiter=,--zero-terminated",
    "date:-u,-R,-d=,--utc,--universal,--rfc-email,--date=",
    "du:-s,-h,-a,-c,-k,-m,-b,-d=,--summarize,--human-readable,--all,--total,--apparent-size,\
     --bytes,--max-depth=",
    "echo:-n,-e,-E",
    "find:-name=,-iname=,-path=,-ipath=,-wholename=,-iwholename=,-regex=,-iregex=,-type=,\
     -maxdepth=,-mindepth=,-size=,-mtime=,-mmin=,-newer=,-empty,-print,-print0,-not,-a,-o,\
     -and,-or,-true,-false,-readable,-writable,-executable",
    "grep:-i,-v,-n,-c,-l,-L,-h,-H,-r,-R,-w,-x,-o,-q,-s,-E,-F,-G,-I,-a,-z,-e=,-m=,-A=,-B=,-C=,\
     --ignore-case,--invert-match,--line-number,--count,--files-with-matches,\
     --files-without-match,--recursive,--dereference-recursive,--word-regexp,--line-regexp,\
     --only-matching,--quiet,--silent,--no-filename,--with-filename,--extended-regexp,\
     --fixed-strings,--basic-regexp,--no-messages,--regexp=,--max-count=,--after-context=,\
     --before-context=,--context=,--include=,--exclude=,--exclude-dir=,--color=?,--colour=?",
    "head:-n=,-c=,-q,-v,-z,--lines=,--bytes=,--quiet,--silent,--verbose,--zero-terminated",
    "ls:-l,-a,-A,-h,-R,-1,-t,-r,-S,-d,-F,-p,-i,-s,-n,-g,-o,--all,--almost-all,\
     --human-readable,--recursive,--reverse,--directory,--classify=?,--color=?,--sort=,\
     --group-directories-first",
    "pwd:-L,-P",
    "sort:-n,-r,-u,-f,-b,-d,-i,-h,-V,-M,-g,-s,-c,-C,-z,-k=,-t=,--numeric-sort,--reverse,\
     --unique,--ignore-case,--ignore-leading-blanks,--dictionary-order,--human-numeric-sort,\
     --version-sort,--month-sort,--general-numeric-sort,--stable,--check=?,--key=,\
     --field-separator=,--zero-terminated",
    "tail:-n=,-c=,-q,-v,-z,--lines=,--bytes=,--quiet,--silent,--verbose,--zero-terminated",
    "uniq:-c,-d,-D,-u,-i,-z,-f=,-s=,-w=,--count,--repeated,--unique,--ignore-case,\
     --skip-fields=,--skip-chars=,--check-chars=,--zero-terminated",
    "wc:-l,-w,-c,-m,-L,--lines,--words,--bytes,--chars,--max-line-length",
];

/// Most operands of built-in programs whose extra operands would write (`uniq IN OUT`) or do
/// something else (`date` sets the clock from a second form).
const MAX_OPERANDS: &[(&str, usize)] = &[("uniq", 1), ("date", 1)];

/// Programs whose job is to run other programs (or interpret code); never allowed.
const RUNNERS: &[&str] = &[
    "env", "xargs", "nice", "nohup", "timeout", "sudo", "su", "doas", "setsid", "chroot",
    "unshare", "nsenter", "strace", "ltrace", "gdb", "watch", "flock", "stdbuf", "busybox", "sh",
    "bash", "dash", "zsh", "ksh", "csh", "tcsh", "fish", "python", "python3", "perl", "ruby",
    "node", "php", "lua", "tclsh", "expect", "make", "awk", "gawk", "mawk", "sed", "vi", "vim",
    "less", "more", "man",
];

/// (program, option) pairs that run other programs or write where they are told; never
/// listable. Prefix matches too: `--compress` stands for `--compress-program` to `sort`.
const RUNS_PROGRAMS: &[(&str, &str)] = &[
    ("find", "-exec"),
    ("find", "-execdir"),
    ("find", "-ok"),
    ("find", "-okdir"),
    ("find", "-delete"),
    ("find", "-fprint"),
    ("find", "-fprint0"),
    ("find", "-fprintf"),
    ("find", "-fls"),
    ("sort", "--compress-program"),
    ("tar", "--to-command"),
    ("tar", "--use-compress-program"),
    ("tar", "-I"),
    ("tar", "--rsh-command"),
    ("tar", "--info-script"),
    ("tar", "--new-volume-script"),
    ("tar", "-F"),
    ("tar", "--checkpoint-action"),
    ("rsync", "-e"),
    ("rsync", "--rsh"),
    ("rsync", "--rsync-path"),
    ("git", "-c"),
    ("git", "--exec-path"),
    ("git", "--upload-pack"),
    ("git", "--receive-pack"),
    ("zip", "-TT"),
    ("zip", "--unzip-command"),
];

impl ProgramRule {
    /// Parse one `--shell-allow` entry: `PROGRAM` (the built-in options for a built-in
    /// program, none for any other) or `PROGRAM:OPTION,OPTION,…`.
    pub fn parse_spec(spec: &str) -> Result<(String, ProgramRule), PolicyError> {
        let bad = |reason: String| PolicyError::BadSpec {
            spec: spec.to_string(),
            reason,
        };
        let spec_t = spec.trim();
        let (name, opts) = match spec_t.split_once(':') {
            Some((n, o)) => (n.trim(), Some(o)),
            None => (spec_t, None),
        };
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "._+-".contains(c))
            || name.starts_with('-')
            || name.starts_with('.')
        {
            return Err(bad(format!(
                "{name:?} is not a bare program name (letters, digits, . _ + -)"
            )));
        }
        if RUNNERS.contains(&name) {
            return Err(PolicyError::RunsPrograms {
                spec: spec.to_string(),
                what: format!("the program {name:?}"),
            });
        }
        let builtin = builtin_rule(name);
        let syntax = if name == "find" {
            Syntax::Find
        } else {
            Syntax::Getopt
        };
        let Some(opts) = opts else {
            return Ok((
                name.to_string(),
                builtin.unwrap_or(ProgramRule {
                    options: BTreeMap::new(),
                    syntax,
                    max_operands: None,
                    writes: true,
                }),
            ));
        };
        let mut options = BTreeMap::new();
        for item in opts.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let (opt, value) = if let Some(o) = item.strip_suffix("=?") {
                (o, OptValue::Optional)
            } else if let Some(o) = item.strip_suffix('=') {
                (o, OptValue::Required)
            } else {
                (item, OptValue::None)
            };
            let valid = match syntax {
                Syntax::Find => {
                    opt.len() >= 2
                        && opt.starts_with('-')
                        && !opt.starts_with("--")
                        && opt[1..].chars().all(|c| c.is_ascii_alphanumeric())
                }
                Syntax::Getopt => {
                    if let Some(long) = opt.strip_prefix("--") {
                        long.len() >= 2
                            && long.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
                    } else {
                        opt.len() == 2
                            && opt.starts_with('-')
                            && opt[1..].chars().all(|c| c.is_ascii_alphanumeric())
                    }
                }
            };
            if !valid {
                return Err(bad(format!(
                    "{item:?} is not an option (-x, --long, with = or =? for a value{})",
                    if syntax == Syntax::Find {
                        "; find takes whole-word primaries such as -name="
                    } else {
                        ""
                    }
                )));
            }
            if syntax == Syntax::Getopt && opt.len() == 2 && value == OptValue::Optional {
                return Err(bad(format!(
                    "{item:?}: only long options can have an optional value"
                )));
            }
            if RUNS_PROGRAMS
                .iter()
                .any(|(p, o)| *p == name && (*o == opt || (opt.len() > 3 && o.starts_with(opt))))
            {
                return Err(PolicyError::RunsPrograms {
                    spec: spec.to_string(),
                    what: format!("{name} {opt}"),
                });
            }
            options.insert(opt.to_string(), value);
        }
        // Read-only only when it is a built-in program given a subset of its built-in options.
        let (writes, max_operands) = match &builtin {
            Some(b) => (
                !options
                    .iter()
                    .all(|(k, v)| b.options.get(k) == Some(v) && !b.writes),
                b.max_operands,
            ),
            None => (true, None),
        };
        Ok((
            name.to_string(),
            ProgramRule {
                options,
                syntax,
                max_operands,
                writes,
            },
        ))
    }

    /// Check `args` (the words after the program name) against this rule.
    pub fn check_args(&self, program: &str, args: &[String]) -> Result<(), String> {
        let mut operands = 0usize;
        match self.syntax {
            Syntax::Getopt => self.check_getopt(program, args, &mut operands)?,
            Syntax::Find => self.check_find(program, args, &mut operands)?,
        }
        if let Some(max) = self.max_operands {
            if operands > max {
                return Err(format!(
                    "{program} takes at most {max} operand{} here",
                    if max == 1 { "" } else { "s" }
                ));
            }
        }
        Ok(())
    }

    fn unlisted(&self, program: &str, opt: &str) -> String {
        let listed: Vec<String> = self
            .options
            .iter()
            .map(|(k, v)| match v {
                OptValue::None => k.clone(),
                OptValue::Required => format!("{k} VALUE"),
                OptValue::Optional => format!("{k}[=VALUE]"),
            })
            .collect();
        let hint = if opt.starts_with("--") {
            " (long options must be spelled in full)"
        } else {
            ""
        };
        if listed.is_empty() {
            format!("{opt} is not allowed: {program} takes no options here")
        } else {
            format!(
                "{opt} is not an allowed option of {program}{hint}; allowed: {}",
                listed.join(" ")
            )
        }
    }

    fn check_getopt(
        &self,
        program: &str,
        args: &[String],
        operands: &mut usize,
    ) -> Result<(), String> {
        let mut i = 0;
        let mut end_of_options = false;
        while i < args.len() {
            let a = &args[i];
            i += 1;
            if end_of_options || a == "-" || !a.starts_with('-') {
                check_operand(a)?;
                *operands += 1;
                continue;
            }
            if a == "--" {
                end_of_options = true;
                continue;
            }
            if let Some(long) = a.strip_prefix("--") {
                let (name, glued) = match long.split_once('=') {
                    Some((n, v)) => (n, Some(v)),
                    None => (long, None),
                };
                let key = format!("--{name}");
                match self.options.get(&key) {
                    None => return Err(self.unlisted(program, &key)),
                    Some(OptValue::None) => {
                        if glued.is_some() {
                            return Err(format!("{key} takes no value"));
                        }
                    }
                    Some(OptValue::Optional) => {
                        if let Some(v) = glued {
                            check_value(v)?;
                        }
                    }
                    Some(OptValue::Required) => {
                        let v = match glued {
                            Some(v) => v,
                            None => {
                                let v =
                                    args.get(i).ok_or_else(|| format!("{key} needs a value"))?;
                                i += 1;
                                v.as_str()
                            }
                        };
                        check_value(v)?;
                    }
                }
                continue;
            }
            // A cluster of short options; a value-taking one ends it.
            let body = &a[1..];
            for (at, c) in body.char_indices() {
                let key = format!("-{c}");
                match self.options.get(&key) {
                    None => return Err(self.unlisted(program, &key)),
                    Some(OptValue::None) => {}
                    Some(OptValue::Optional) => {
                        let rest = &body[at + c.len_utf8()..];
                        if !rest.is_empty() {
                            check_value(rest)?;
                        }
                        break;
                    }
                    Some(OptValue::Required) => {
                        let rest = &body[at + c.len_utf8()..];
                        if rest.is_empty() {
                            let v = args.get(i).ok_or_else(|| format!("{key} needs a value"))?;
                            i += 1;
                            check_value(v)?;
                        } else {
                            check_value(rest)?;
                        }
                        break;
                    }
                }
            }
        }
        Ok(())
    }

    fn check_find(
        &self,
        program: &str,
        args: &[String],
        operands: &mut usize,
    ) -> Result<(), String> {
        let mut i = 0;
        // Start paths: words before the expression.
        while i < args.len() {
            let a = &args[i];
            if a.starts_with('-') || a == "(" || a == "!" {
                break;
            }
            check_operand(a)?;
            *operands += 1;
            i += 1;
        }
        while i < args.len() {
            let a = &args[i];
            i += 1;
            if matches!(a.as_str(), "(" | ")" | "!") {
                continue;
            }
            match self.options.get(a.as_str()) {
                Some(OptValue::None) => {}
                Some(OptValue::Required) | Some(OptValue::Optional) => {
                    let v = args.get(i).ok_or_else(|| format!("{a} needs a value"))?;
                    i += 1;
                    check_value(v)?;
                }
                None if a.starts_with('-') => return Err(self.unlisted(program, a)),
                None => {
                    return Err(format!(
                        "{a:?} is not a {program} expression word (start paths come first)"
                    ))
                }
            }
        }
        Ok(())
    }
}

/// A path-like word must stay inside the workspace (the sandbox enforces it; this check gives
/// the model a clear refusal first).
fn check_value(v: &str) -> Result<(), String> {
    if v.starts_with('/') {
        return Err("absolute paths are not allowed; paths are relative to the workspace".into());
    }
    if v.starts_with('~') {
        return Err("~ paths are not allowed".into());
    }
    if v.split('/').any(|c| c == "..") {
        return Err("\"..\" is not allowed in arguments".into());
    }
    if v.split('/').find(|c| !c.is_empty() && *c != ".") == Some(".boyd") {
        return Err(".boyd/ holds the workspace policy; the shell cannot use it".into());
    }
    Ok(())
}

fn check_operand(a: &str) -> Result<(), String> {
    check_value(a)?;
    if let Some((_, v)) = a.split_once('=') {
        check_value(v)?;
    }
    Ok(())
}

fn builtin_rule(name: &str) -> Option<ProgramRule> {
    let spec = DEFAULT_RULES
        .iter()
        .find(|s| s.split(':').next() == Some(name))?;
    let (_, opts) = spec.split_once(':')?;
    let mut options = BTreeMap::new();
    for item in opts.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (opt, value) = if let Some(o) = item.strip_suffix("=?") {
            (o, OptValue::Optional)
        } else if let Some(o) = item.strip_suffix('=') {
            (o, OptValue::Required)
        } else {
            (item, OptValue::None)
        };
        options.insert(opt.to_string(), value);
    }
    Some(ProgramRule {
        options,
        syntax: if name == "find" {
            Syntax::Find
        } else {
            Syntax::Getopt
        },
        max_operands: MAX_OPERANDS
            .iter()
            .find(|(p, _)| *p == name)
            .map(|(_, n)| *n),
        writes: false,
    })
}

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
    /// The sandbox launcher (default: found by [`super::jail::find_launcher`]).
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
