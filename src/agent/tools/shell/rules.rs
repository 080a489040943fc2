//! What each program may be given: [`ProgramRule`], a positive list of options parsed from the
//! `--shell-allow` form, the built-in list ([`DEFAULT_RULES`]), the programs and options that
//! run other programs (never listable), and the check of one program's arguments.

use std::collections::BTreeMap;

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

pub(super) fn builtin_rule(name: &str) -> Option<ProgramRule> {
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
