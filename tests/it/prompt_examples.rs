//! Prompts whose examples cannot be copied into answers: no example string of the OODA and ReAct
//! prompts (the ReAct system prompt with its tool descriptions, the answer step's system prompt,
//! the Decide system prompt, the Orient instructions) appears in, or would pass, any check of the
//! eval suites' `dev` and `test` splits. An approval round trip once ended with the Decide
//! example's "Bob Smith" as the final answer; an example value that an eval check accepts would
//! also score a copied example as a pass.
//!
//! An example string is any quoted string of a prompt that is not a JSON key (worked-example
//! values, `e.g. "..."` in tool descriptions), and the rest of a worked example's `Objective:`,
//! `Task:`, `Observation:` or `-> verified:` line. Placeholders (`<...>`) are not examples: they
//! are the neutral form. A tool line's `Args:` signature is the argument vocabulary (enums of
//! model and hardware names), not an example, and is left out.

use std::path::{Path, PathBuf};

use boyd::agent::eval::{load_suite, Checker, EvalTask};
use boyd::agent::ooda::lm_phases::{decide_system_prompt, ORIENT_INSTRUCTIONS};
use boyd::agent::ooda::writers::{DeleteFile, WriteFile};
use boyd::agent::planner::system_prompt;
use boyd::agent::tools::{ShellPolicy, Toolset};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every tool a prompt can list: the built-ins with the shell, and the OODA writers.
fn all_tools() -> Toolset {
    let mut t = Toolset::builtin(Some(ShellPolicy::default()));
    t.add(std::sync::Arc::new(WriteFile));
    t.add(std::sync::Arc::new(DeleteFile));
    t
}

/// The value of a `&str` constant as written in a Rust source file (string continuations and
/// the common escapes), when the file defines it.
fn str_const_in_source(path: &Path, name: &str) -> Option<String> {
    let src = std::fs::read_to_string(path).ok()?;
    let head = format!("const {name}: &str = \"");
    let start = src.find(&head)? + head.len();
    let mut out = String::new();
    let mut chars = src[start..].chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' => return Some(out),
            '\\' => match chars.next()? {
                '\n' => {
                    while chars.peek().is_some_and(|c| c.is_whitespace()) {
                        chars.next();
                    }
                }
                'n' => out.push('\n'),
                't' => out.push('\t'),
                other => out.push(other),
            },
            c => out.push(c),
        }
    }
    None
}

/// The prompts, by name.
fn prompts() -> Vec<(String, String)> {
    let tools = all_tools();
    let mut v = vec![
        ("ReAct system prompt".to_string(), system_prompt(&tools)),
        (
            "Decide system prompt".to_string(),
            decide_system_prompt(&tools, 3),
        ),
        (
            "Orient instructions".to_string(),
            ORIENT_INSTRUCTIONS.to_string(),
        ),
    ];
    // The answer step's prompt (src/agent/answer.rs), where this checkout has it.
    let answer = root().join("src/agent/answer.rs");
    if answer.exists() {
        let text = str_const_in_source(&answer, "ANSWER_SYSTEM")
            .expect("src/agent/answer.rs defines ANSWER_SYSTEM as a string constant");
        v.push(("answer step system prompt".to_string(), text));
    }
    v
}

fn is_placeholder(s: &str) -> bool {
    let s = s.trim();
    s.starts_with('<') && s.ends_with('>')
}

/// The example strings of one prompt.
fn examples(prompt: &str) -> Vec<String> {
    let quoted = regex::Regex::new(r#""((?:[^"\\]|\\.)*)"(\s*:)?"#).expect("regex");
    let line_example =
        regex::Regex::new(r"^(?:Objective|Task|Observation): (.+)$|-> verified: (.+)$")
            .expect("regex");
    let mut out = Vec::new();
    for line in prompt.lines() {
        // A tool line's argument signature is vocabulary, not an example.
        let line = match (line.starts_with("- "), line.find(" Args: ")) {
            (true, Some(i)) => &line[..i],
            _ => line,
        };
        for c in quoted.captures_iter(line) {
            if c.get(2).is_none() {
                out.push(c[1].to_string());
            }
        }
        if let Some(c) = line_example.captures(line) {
            let m = c.get(1).or_else(|| c.get(2)).expect("a group");
            out.push(m.as_str().to_string());
        }
    }
    out.retain(|e| e.trim().chars().count() >= 2 && !is_placeholder(e));
    out.sort();
    out.dedup();
    out
}

/// Why `example` collides with `check`, if it does: it appears in an expected or forbidden
/// string, holds it, matches the pattern, or holds a number the check accepts.
fn collision(example: &str, check: &Checker) -> Option<String> {
    let e = example.to_lowercase();
    match check {
        Checker::All { checks } | Checker::Any { checks } => {
            checks.iter().find_map(|c| collision(example, c))
        }
        Checker::Exact { value }
        | Checker::Contains { value, .. }
        | Checker::NotContains { value } => {
            let v = value.to_lowercase();
            (v.contains(&e) || e.contains(&v)).then(|| format!("check value {value:?}"))
        }
        Checker::Regex { pattern } => check
            .check(example)
            .then(|| format!("check pattern {pattern:?}")),
        Checker::NumberWithin { value, tolerance } => check
            .check(example)
            .then(|| format!("check number {value} ± {tolerance}")),
    }
}

fn suites() -> Vec<(String, EvalTask)> {
    let mut v = Vec::new();
    for split in ["dev", "test"] {
        let path = root().join("evals").join(format!("{split}.jsonl"));
        let tasks = load_suite(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert!(!tasks.is_empty(), "{} has no tasks", path.display());
        v.extend(tasks.into_iter().map(|t| (split.to_string(), t)));
    }
    v
}

fn collisions(prompts: &[(String, String)], suites: &[(String, EvalTask)]) -> Vec<String> {
    let mut found = Vec::new();
    for (name, text) in prompts {
        for ex in examples(text) {
            for (split, task) in suites {
                if let Some(why) = collision(&ex, &task.check) {
                    found.push(format!(
                        "{name}: example {ex:?} collides with {split}/{} ({why})",
                        task.id
                    ));
                }
            }
        }
    }
    found
}

#[test]
fn no_example_of_the_ooda_or_react_prompts_appears_in_or_passes_an_eval_check() {
    let prompts = prompts();
    let suites = suites();
    let found = collisions(&prompts, &suites);
    assert!(
        found.is_empty(),
        "example strings a model could copy into an answer:\n{}",
        found.join("\n")
    );
    // The Decide prompt still teaches by example (with placeholders).
    let decide = &prompts[1].1;
    assert!(decide.contains("Example 3:"), "{decide}");
    assert!(decide.contains("\"answer\": \"<the value from that line>\""));
}

/// The check above can fail: the worked examples the Decide prompt had before (a calculation
/// with its result, a file's owner) are found, and their numbers pass eval checks.
#[test]
fn the_ooda_example_check_catches_the_old_worked_examples() {
    let old = "Example 2:\nWorld model:\nObjective: What is 12 * (3 + 4)?\nActions so far:\n\
- calculator {\"expression\":\"12 * (3 + 4)\"} -> verified: 84\n\
{\"candidates\": [{\"thought\": \"The file says the owner is Bob Smith.\", \"tool\": \"final_answer\", \"args\": {\"answer\": \"Bob Smith\"}}]}\n";
    let ex = examples(old);
    for want in ["12 * (3 + 4)", "84", "Bob Smith", "What is 12 * (3 + 4)?"] {
        assert!(ex.iter().any(|e| e == want), "{want:?} not in {ex:?}");
    }
    assert!(
        !ex.iter().any(|e| e == "thought" || e == "answer"),
        "{ex:?}"
    );
    let found = collisions(&[("old Decide prompt".into(), old.into())], &suites());
    assert!(
        found.iter().any(|f| f.contains("\"12 * (3 + 4)\"")),
        "a copied expression holds numbers that pass a count check: {found:?}"
    );
    // Placeholders are not examples.
    assert!(examples("{\"answer\": \"<name>\"} -> verified: <result>").is_empty());
}
