//! The held-out split stays unseen by the code (issue 39): no task's words, no workspace file
//! name of its own and no answer of `evals/test.jsonl` may appear anywhere under `src/`.
//!
//! What counts as appearing: a task whose text, or any run of six consecutive words of it,
//! occurs in a source file (words compared lowercase, without the punctuation around them, so
//! case and quoting do not hide a copy); a workspace path that only the test split uses (a
//! conventional top-level name such as `LICENSE` aside), or its file name when that is distinctive; an answer the checker looks for (`exact` or
//! `contains`, five characters or more, not a number or date and not a single plain word).

use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::{Path, PathBuf};

use boyd::agent::eval::{load_suite, parse_suite, Checker, EvalTask};

/// Length of the word runs compared between task texts and the source.
const RUN: usize = 6;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn suite(rel: &str) -> Vec<EvalTask> {
    let path = root().join(rel);
    load_suite(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Lowercase words: runs of letters, digits and `_ . -` (so `Q4_K_M` and `llama-3.1-8b` are one
/// word each, as a reader counts them), without `_ . -` at either end.
fn words(text: &str) -> Vec<String> {
    text.split(|c: char| !(c.is_alphanumeric() || matches!(c, '_' | '.' | '-')))
        .map(|w| w.trim_matches(|c| matches!(c, '_' | '.' | '-')))
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect()
}

/// Every run of `RUN` words of a text, or the whole text when it is shorter.
fn runs(text: &str) -> Vec<String> {
    let w = words(text);
    if w.len() <= RUN {
        return vec![w.join(" ")];
    }
    w.windows(RUN).map(|r| r.join(" ")).collect()
}

/// One file of the source tree, as read for the comparisons.
struct SourceFile {
    path: PathBuf,
    lower: String,
    words: String,
}

fn source_files(dir: &Path, out: &mut Vec<SourceFile>) {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    for entry in entries {
        let path = entry.expect("directory entry").path();
        if path.is_dir() {
            source_files(&path, out);
        } else {
            let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let text = String::from_utf8_lossy(&bytes);
            out.push(SourceFile {
                path,
                lower: text.to_lowercase(),
                words: format!(" {} ", words(&text).join(" ")),
            });
        }
    }
}

/// The strings a checker looks for in an answer (not the ones it rejects).
fn answers(check: &Checker, out: &mut Vec<String>) {
    match check {
        Checker::Exact { value } | Checker::Contains { value, .. } => out.push(value.clone()),
        Checker::All { checks } | Checker::Any { checks } => {
            checks.iter().for_each(|c| answers(c, out))
        }
        _ => {}
    }
}

/// An answer distinctive enough that finding it in the source means the source names it.
fn distinctive_answer(a: &str) -> bool {
    let a = a.trim();
    let numeric = a
        .chars()
        .all(|c| c.is_ascii_digit() || c.is_ascii_punctuation() || c.is_whitespace());
    let plain_word = a.chars().all(|c| c.is_ascii_lowercase())
        || (a.chars().next().is_some_and(|c| c.is_ascii_uppercase())
            && a.chars().skip(1).all(|c| c.is_ascii_lowercase()));
    a.chars().count() >= 5 && !numeric && !plain_word
}

/// File names every project has, which say nothing about a task.
const CONVENTIONAL: [&str; 12] = [
    ".env",
    "Makefile",
    "LICENSE",
    "README.md",
    "package.json",
    "setup.cfg",
    "go.mod",
    "Chart.yaml",
    "values.yaml",
    "Dockerfile",
    "__init__.py",
    "pyproject.toml",
];

/// Everything of the test split found under `src/`, one line per finding.
fn leaks(test: &[EvalTask], seen: &[EvalTask], src: &[SourceFile]) -> Vec<String> {
    let mut found = Vec::new();
    // Task words: index the source's word runs once.
    let mut index: HashMap<String, usize> = HashMap::new();
    for (i, f) in src.iter().enumerate() {
        let w: Vec<&str> = f.words.split_whitespace().collect();
        for r in w.windows(RUN) {
            index.entry(r.join(" ")).or_insert(i);
        }
    }
    for t in test {
        for r in runs(&t.task) {
            let hit = if r.split(' ').count() == RUN {
                index.get(&r).copied()
            } else {
                src.iter().position(|f| f.words.contains(&format!(" {r} ")))
            };
            if let Some(i) = hit {
                found.push(format!(
                    "{}: task words {r:?} in {}",
                    t.id,
                    src[i].path.display()
                ));
            }
        }
    }
    // File names only the test split uses.
    let seen_paths: HashSet<&str> = seen
        .iter()
        .flat_map(|t| t.files.keys())
        .map(String::as_str)
        .collect();
    let seen_names: HashSet<&str> = seen_paths
        .iter()
        .filter_map(|p| p.rsplit('/').next())
        .collect();
    let mut names = BTreeSet::new();
    for t in test {
        for p in t.files.keys().filter(|p| !seen_paths.contains(p.as_str())) {
            let base = p.rsplit('/').next().unwrap_or(p);
            if !(p == base && CONVENTIONAL.contains(&base)) {
                names.insert((t.id.as_str(), p.clone()));
            }
            if base.len() >= 8 && !seen_names.contains(base) && !CONVENTIONAL.contains(&base) {
                names.insert((t.id.as_str(), base.to_string()));
            }
        }
    }
    for (id, name) in names {
        let needle = name.to_lowercase();
        if let Some(f) = src.iter().find(|f| f.lower.contains(&needle)) {
            found.push(format!("{id}: file name {name:?} in {}", f.path.display()));
        }
    }
    // Answers.
    for t in test {
        let mut a = Vec::new();
        answers(&t.check, &mut a);
        for v in a.iter().filter(|v| distinctive_answer(v)) {
            let needle = v.to_lowercase();
            if let Some(f) = src.iter().find(|f| f.lower.contains(&needle)) {
                found.push(format!("{}: answer {v:?} in {}", t.id, f.path.display()));
            }
        }
    }
    found
}

#[test]
fn no_task_file_name_or_answer_of_the_test_split_appears_in_src() {
    let test = suite("evals/test.jsonl");
    assert!(test.len() >= 110, "only {} held-out tasks", test.len());
    let seen: Vec<EvalTask> = [
        "evals/dev.jsonl",
        "evals/dev-words.jsonl",
        "evals/basic.jsonl",
        "evals/retired/test-2026-12.jsonl",
    ]
    .iter()
    .flat_map(|p| suite(p))
    .collect();
    let mut src = Vec::new();
    source_files(&root().join("src"), &mut src);
    assert!(src.len() > 50, "only {} files under src/", src.len());
    let found = leaks(&test, &seen, &src);
    assert!(
        found.is_empty(),
        "the held-out split leaks into src/ ({} findings):\n{}",
        found.len(),
        found.join("\n")
    );
}

/// The check above can fail: a source file that quotes a task (in other case and punctuation),
/// names a test-only file, or holds an answer is found, and a plain word or number is not.
#[test]
fn the_leak_check_finds_a_copied_task_file_name_and_answer() {
    let line = r#"{"id": "t1", "category": "code", "task": "Which module still calls the deprecated fetch_legacy() helper today?", "files": {"reports/monthly_rollup.py": "x"}, "check": {"type": "all", "checks": [{"type": "contains", "value": "reports/monthly_rollup.py"}, {"type": "contains", "value": "Tuesday"}, {"type": "contains", "value": "12345"}, {"type": "not_contains", "value": "weekly_rollup"}]}}"#;
    let test = parse_suite(line, Path::new("t.jsonl")).expect("parses");
    let file = |name: &str, text: &str| SourceFile {
        path: PathBuf::from(name),
        lower: text.to_lowercase(),
        words: format!(" {} ", words(text).join(" ")),
    };
    let clean = [file(
        "a.rs",
        "// Tuesday 12345 weekly_rollup; which module still calls it?",
    )];
    assert!(
        leaks(&test, &[], &clean).is_empty(),
        "{:?}",
        leaks(&test, &[], &clean)
    );
    let copied = [file(
        "b.rs",
        "let q = \"STILL CALLS the Deprecated FETCH_LEGACY() helper\";",
    )];
    let found = leaks(&test, &[], &copied);
    assert!(found.iter().any(|f| f.contains("task words")), "{found:?}");
    let named = [file("c.rs", "open(\"monthly_rollup.py\")")];
    let found = leaks(&test, &[], &named);
    assert!(found.iter().any(|f| f.contains("file name")), "{found:?}");
    // The path is an answer too; a dev task that used the same path makes it seen, not a leak.
    let seen = test.clone();
    let pathed = [file("d.rs", "\"Reports/Monthly_Rollup.py\"")];
    let found = leaks(&test, &[], &pathed);
    assert!(found.iter().any(|f| f.contains("answer")), "{found:?}");
    let found = leaks(&test, &seen, &pathed);
    assert!(!found.iter().any(|f| f.contains("file name")), "{found:?}");
}

#[test]
fn names_hardware_is_read_from_a_task_and_defaults_to_false() {
    let text = concat!(
        r#"{"id": "a", "task": "q", "check": {"type": "contains", "value": "x"}, "names_hardware": true}"#,
        "\n",
        r#"{"id": "b", "task": "q", "check": {"type": "contains", "value": "x"}}"#,
        "\n"
    );
    let tasks = parse_suite(text, Path::new("t.jsonl")).expect("parses");
    assert!(tasks[0].names_hardware);
    assert!(!tasks[1].names_hardware);
    let bad = r#"{"id": "c", "task": "q", "check": {"type": "contains", "value": "x"}, "names_hardware": "yes"}"#;
    assert!(parse_suite(bad, Path::new("t.jsonl")).is_err());
}

#[test]
fn the_held_out_sizing_tasks_that_name_hardware_are_marked() {
    let test = suite("evals/test.jsonl");
    let sizing: Vec<&EvalTask> = test.iter().filter(|t| t.category() == "sizing").collect();
    assert!(sizing.len() >= 12, "only {} sizing tasks", sizing.len());
    let marked = sizing.iter().filter(|t| t.names_hardware).count();
    assert!(
        marked * 2 >= sizing.len(),
        "{marked} of {} sizing tasks name hardware",
        sizing.len()
    );
}
