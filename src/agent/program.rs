//! Worked answers: a question whose answer is a figure worked out from given numbers ("375 g
//! of flour feed 6 people; how much for 22?", "how much of the budget is left?") is answered
//! by a short program the model writes and code evaluates.
//!
//! Asked for one arithmetic expression, the 0.5B agent model wrote `(375 * 6) / 22` for the
//! recipe and `(48/1000) * (2.4/1000)` for a copy time; asked for a Python program with one
//! variable per given quantity, the same model wrote the right steps for most such questions
//! (15 of 20 fresh word problems against 4 of 10 as one expression, greedy). The model is
//! good at naming quantities and poor at arithmetic, so the program's value is computed here,
//! never taken from what the model says it prints.
//!
//! The program is read line by line: `name = expr` binds a name, `print(expr)` and a bare
//! expression give a result, `x = a + b = 23` keeps the first part that evaluates (the model
//! often writes its own wrong result after it), and everything else (imports, comments,
//! fences, control flow) is skipped. Every number a program uses must appear in the question
//! or the facts it was shown, or be a unit constant (60, 1000, 1024, …): a number from nowhere
//! is the model's own arithmetic, and the program is refused.

use std::collections::HashMap;

use crate::lm::{ChatMessage, Role};

use super::outputs::usable;
use super::tools::calculator::lines::{self, is_name, Line};
use super::tools::calculator::{evaluate_with, Number};
use super::types::{Action, ObservationKind, Step};
use super::words::numbers_in;
use super::words::{keywords, quantities, words};

mod worked;
pub use worked::*;

/// The system prompt of the worked-answer request.
pub const PROGRAM_SYSTEM: &str =
    "Solve the question with a short Python program: one variable per \
given quantity (put its unit in the name), then the steps, ending with answer = ... . Use only \
numbers, variables and + - * / ( ). Reply with the code only.";

/// Most tokens of the program.
pub const PROGRAM_MAX_TOKENS: usize = 200;

/// Most lines of a program that are read.
const MAX_LINES: usize = 60;

/// Most fact lines shown with the question.
const MAX_FACTS: usize = 30;

/// An output with at most this many lines is shown whole as facts; a longer one by its lines
/// that share most words with the question.
const WHOLE_OUTPUT_LINES: usize = 15;

/// Lines of a long output shown as facts.
const LINES_OF_LONG_OUTPUT: usize = 5;

/// Numbers a program may use without the question or the facts stating them: small counts and
/// unit conversions.
const CONSTANTS: &[f64] = &[
    0.0,
    1.0,
    2.0,
    3.0,
    4.0,
    5.0,
    6.0,
    7.0,
    8.0,
    9.0,
    10.0,
    11.0,
    12.0,
    0.5,
    0.25,
    24.0,
    30.0,
    31.0,
    52.0,
    60.0,
    100.0,
    365.0,
    1000.0,
    1024.0,
    3600.0,
    1e6,
    1048576.0,
    1e9,
    1073741824.0,
];

/// Words that make a question ask for a figure worked out from values, not one value as read.
const WORKED_OUT: &[&str] = &[
    "left",
    "remaining",
    "remain",
    "per",
    "each",
    "average",
    "mean",
    "difference",
    "sum",
    "total",
    "combined",
    "together",
    "altogether",
    "percent",
    "percentage",
    "cost",
    "change",
    "free",
    "unused",
    "spare",
    "headroom",
    "below",
    "above",
    "exceed",
    "exceeds",
    "shortfall",
];

/// Nouns that make "what is the …" ask for a figure.
const FIGURE_NOUNS: &[&str] = &[
    "percentage",
    "percent",
    "share",
    "fraction",
    "ratio",
    "total",
    "sum",
    "cost",
    "costs",
    "price",
    "amount",
    "difference",
];

/// Nouns of questions that count things in the workspace ("how many files"): answered by
/// the listing or the lines, not by arithmetic.
const WORKSPACE_COUNTS: &[&str] = &[
    "file",
    "files",
    "folder",
    "folders",
    "directory",
    "directories",
    "line",
    "lines",
    "entries",
    "occurrences",
    "times",
];

/// Whether `task` asks for a figure worked out from numbers (given in the task, or read by
/// the steps) rather than read, counted in the workspace or stated by the sizing tool.
pub fn wants_program(task: &str, steps: &[Step]) -> bool {
    let w = words(task);
    let has = |x: &str| w.iter().any(|v| v == x);
    let after = |a: &str, bs: &[&str]| {
        w.windows(2)
            .any(|p| p[0] == a && bs.contains(&p[1].as_str()))
    };
    // "Which team has the largest total, and what is it?" asks for a name first.
    let asks_name = w
        .first()
        .is_some_and(|x| ["which", "who", "where", "when"].contains(&x.as_str()));
    let asks_figure = !asks_name
        && (after("how", &["many", "much", "long", "far", "large", "big"])
            || has("what")
            || has("calculate")
            || has("compute"));
    let given = quantities(task, false).len() >= 2;
    let worked = WORKED_OUT
        .iter()
        .any(|x| has(x) && !(*x == "mean" && super::words::mean_is_verb(&w)));
    let counts_workspace = counts_workspace(task);
    let sized = steps
        .iter()
        .any(|s| matches!(&s.action, Some(Action::ToolCall { name, .. }) if name == "size_model"));
    // A figure asked of values in two or more files ("the quota in quotas.yaml minus the use in
    // usage.csv") is worked out from both, whatever words the question uses for the step.
    let asks_quantity = !asks_name
        && (after("how", &["many", "much"])
            || w.windows(4).any(|p| {
                p[0] == "what" && p[1..].iter().any(|x| FIGURE_NOUNS.contains(&x.as_str()))
            })
            || (has("what") && (has("cost") || has("costs"))));
    let several = asks_quantity && files_read(task, steps) >= 2;
    (asks_figure && (given || worked) || several)
        && !counts_workspace
        && !sized
        && !states_expression(task)
}

/// Whether `task` counts things in the workspace ("How many (.md) files", "the number of
/// lines"): the counted noun, not any mention ("a 2.4 GB file is copied").
pub fn counts_workspace(task: &str) -> bool {
    let w = words(task);
    w.windows(2).enumerate().any(|(i, p)| {
        ((p[0] == "how" && p[1] == "many") || (p[0] == "number" && p[1] == "of"))
            && w[i + 2..]
                .iter()
                .take(3)
                .any(|x| WORKSPACE_COUNTS.contains(&x.as_str()))
    })
}

/// How many distinct files the steps read with output, or the task names, whichever is more.
pub fn files_read(task: &str, steps: &[Step]) -> usize {
    let mut read: Vec<&str> = steps
        .iter()
        .filter(|s| usable(s) && s.observation.kind == ObservationKind::Output)
        .filter_map(|s| match &s.action {
            Some(Action::ToolCall { name, args }) if name == "read_file" => {
                args.get("path").and_then(|p| p.as_str())
            }
            _ => None,
        })
        .collect();
    read.sort_unstable();
    read.dedup();
    read.len()
        .max(super::tools::choices::named_paths(task).len())
}

/// Whether `task` writes out the arithmetic itself ("What is 6 * 7?", "4821 - 1397 * 12 / 8"):
/// that is the calculator's work, exactly, with nothing for a program to work out.
pub fn states_expression(task: &str) -> bool {
    static RE: std::sync::OnceLock<Option<regex::Regex>> = std::sync::OnceLock::new();
    RE.get_or_init(|| regex::Regex::new(r"\d\s*[+*/×÷^]\s*\(?\d|\d\s+-\s+\(?\d").ok())
        .as_ref()
        .is_some_and(|re| re.is_match(task))
}

/// The arithmetic a task writes out whole and asks only to evaluate ("What is (48 + 17) * 3 -
/// 12?", "Compute 2^10 minus 3 times 41, rounded to one decimal"), as the calculator reads it:
/// operator words become operators and "15% of" becomes "15/100 *". None when the task says
/// anything besides the expression, a question word and a rounding instruction, or when the
/// calculator cannot read it.
///
/// The agent model copies such an expression into the calculator unreliably (it dropped the
/// parentheses of `(48 + 17) * 3 - 12`) and answers with the expression instead of its value;
/// read from the task, the value is exact.
pub fn stated_expression(task: &str) -> Option<String> {
    use std::sync::OnceLock;
    static RES: OnceLock<Option<[regex::Regex; 4]>> = OnceLock::new();
    let [rounding, lead, percent, rest] = RES
        .get_or_init(|| {
            Some([
                // ", rounded to two decimals", "and round to the nearest whole number"
                regex::Regex::new(r"\s*[,;]?\s*(and\s+)?(then\s+)?(round|rounded|rounding)\b.*$")
                    .ok()?,
                regex::Regex::new(
                    r"^(what\s+is|what's|whats|compute|calculate|evaluate|work\s+out|find)\s+(the\s+value\s+of\s+|the\s+result\s+of\s+)?",
                )
                .ok()?,
                regex::Regex::new(r"(\d)\s*%\s*of\s+").ok()?,
                regex::Regex::new(r"^[0-9.,\s+\-*/×÷^()]+$").ok()?,
            ])
        })
        .as_ref()?;
    let t = task.trim().to_lowercase();
    let t = t.trim_end_matches(['?', '.', '!', ' ']);
    let t = rounding.replace(t, "");
    let t = lead.replace(&t, "");
    let mut e = format!(" {t} ");
    for (word, op) in [
        (" multiplied by ", " * "),
        (" divided by ", " / "),
        (" to the power of ", " ^ "),
        (" plus ", " + "),
        (" minus ", " - "),
        (" times ", " * "),
    ] {
        e = e.replace(word, op);
    }
    let e = percent.replace_all(e.trim(), "${1} / 100 * ").into_owned();
    if !rest.is_match(&e) || !states_expression(&e) {
        return None;
    }
    super::tools::calculator::evaluate(&e).ok().map(|_| e)
}

/// The value of the expression the task writes out ([`stated_expression`]), as asked rounded.
pub fn stated_answer(task: &str) -> Option<String> {
    let e = stated_expression(task)?;
    let v = super::tools::calculator::evaluate(&e).ok()?;
    Some(format_value(v, task))
}

/// The thought recorded for a task answered before any tool runs ([`self_contained`]).
pub fn self_contained_thought(task: &str) -> &'static str {
    if stated_expression(task).is_some() {
        "a written-out expression: evaluated by the calculator's parser"
    } else {
        "a word problem: worked out by a program from the task's numbers"
    }
}

/// Words of a question that points into the workspace.
const WORKSPACE_WORDS: &[&str] = &[
    "workspace",
    "log",
    "logs",
    "folder",
    "directory",
    "according",
    "listed",
    "recorded",
    "preset",
    "presets",
];

/// Whether `task` is a word problem that states all it needs: it wants a worked figure and
/// names no file, folder or anything else in the workspace. Such a task is answered by a
/// program before any tool runs.
pub fn self_contained(task: &str) -> bool {
    let w = words(task);
    if stated_expression(task).is_some() {
        return true;
    }
    wants_program(task, &[])
        && super::tools::choices::named_paths(task).is_empty()
        && !WORKSPACE_WORDS.iter().any(|x| w.iter().any(|v| v == x))
}

/// The lines of the steps' outputs shown to the program request: a short output whole, a long
/// one by its lines that share most words with the task, each prefixed with the file it came
/// from.
pub fn facts(task: &str, steps: &[Step]) -> Vec<String> {
    // The lines of each output, by the file it read (None: not a file).
    let mut groups: Vec<(Option<String>, Vec<String>)> = Vec::new();
    let keys = words(task);
    enum Contents {
        Structured(Vec<super::records::Fact>),
        Lines(Vec<String>),
    }
    let mut outputs: Vec<(Option<String>, Contents)> = Vec::new();
    for step in steps.iter().filter(|s| usable(s)) {
        if step.observation.kind != ObservationKind::Output {
            continue;
        }
        let text = super::outputs::whole_text(step);
        // The calculator's outputs are the planner's own arithmetic, often wrong, and a listing
        // holds sizes and counts, not the quantities asked about: only what was read counts.
        if matches!(&step.action, Some(Action::ToolCall { name, .. })
            if name == "calculator" || name == "list_dir")
        {
            continue;
        }
        let path = match &step.action {
            Some(Action::ToolCall { name, args }) if name == "read_file" => args
                .get("path")
                .and_then(|p| p.as_str())
                .map(str::to_string),
            _ => None,
        };
        let lines: Vec<&str> = text
            .lines()
            .filter(|l| !l.trim().is_empty())
            // read_file's header ("a.txt (4 lines):") says nothing the prefix does not.
            .filter(|l| path.is_none() || !l.ends_with("lines):"))
            .collect();
        let whole_read = super::outputs::is_whole_read(text);
        // A structured file (YAML, JSON, TOML, INI, CSV, a Markdown table) read whole: each
        // value under its key path or column names, of parallel records the one named.
        let structured = path.as_deref().filter(|_| whole_read).and_then(|p| {
            let body: Vec<&str> = lines
                .iter()
                .map(|l| super::tally::content(l).unwrap_or(l))
                .collect();
            super::records::facts_of(p, &body.join("\n"))
        });
        let contents = match structured {
            Some(facts) => Contents::Structured(facts),
            None => Contents::Lines(plain_lines(&path, &lines)),
        };
        outputs.push((path, contents));
    }
    // The structured files' facts, picked together: a record one names picks one in another.
    let structured: Vec<Vec<super::records::Fact>> = outputs
        .iter()
        .filter_map(|(_, c)| match c {
            Contents::Structured(f) => Some(f.clone()),
            Contents::Lines(_) => None,
        })
        .collect();
    let mut picked = super::records::select_linked(task, &structured).into_iter();
    for (path, contents) in outputs {
        let contents = match contents {
            Contents::Structured(_) => picked.next().unwrap_or_default(),
            Contents::Lines(l) => l,
        };
        let prefixed = |c: &str| match &path {
            Some(p) => format!("{p}: {c}"),
            None => c.to_string(),
        };
        if contents.len() <= WHOLE_OUTPUT_LINES {
            groups.push((path.clone(), contents.iter().map(|c| prefixed(c)).collect()));
        } else {
            let mut scored: Vec<(usize, usize, &str)> = contents
                .iter()
                .enumerate()
                .map(|(i, l)| {
                    let lw = words(l);
                    (
                        keys.iter().filter(|k| lw.contains(k)).count(),
                        i,
                        l.as_str(),
                    )
                })
                .filter(|x| x.0 > 0)
                .collect();
            scored.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
            scored.truncate(LINES_OF_LONG_OUTPUT);
            scored.sort_by_key(|x| x.1);
            groups.push((path.clone(), scored.iter().map(|x| prefixed(x.2)).collect()));
        }
    }
    let mut out: Vec<String> = focus(task, groups).into_iter().flat_map(|g| g.1).collect();
    let mut seen = std::collections::HashSet::new();
    out.retain(|l| seen.insert(l.clone()));
    out.truncate(MAX_FACTS);
    out
}

/// The contents of an output's lines without their line numbers; a CSV file's rows as
/// `column=value` pairs under its header (shown the raw rows, the model multiplied neighbouring
/// prices instead of each row's quantity by its price).
fn plain_lines(path: &Option<String>, lines: &[&str]) -> Vec<String> {
    let cells = |line: &str| -> Vec<String> {
        super::tally::content(line)
            .unwrap_or(line)
            .split(',')
            .map(|f| f.trim().to_string())
            .collect()
    };
    let header: Option<Vec<String>> = path
        .as_deref()
        .filter(|p| p.ends_with(".csv"))
        .and_then(|_| lines.first())
        .map(|l| cells(l))
        .filter(|h| h.len() > 1);
    let rows = if header.is_some() { &lines[1..] } else { lines };
    rows.iter()
        .map(|line| {
            // Line numbers are not quantities: "3: headcount: 14" is shown "headcount: 14".
            let content = super::tally::content(line).unwrap_or(line).trim();
            header
                .as_deref()
                .and_then(|h| super::outputs::csv_row(h, content))
                .unwrap_or_else(|| content.to_string())
        })
        .collect()
}

/// The keys of a file's `key: value` / `key = value` lines.
fn keys_of(lines: &[String]) -> std::collections::BTreeSet<String> {
    lines
        .iter()
        .filter_map(|l| {
            // Past the "path: " prefix.
            let l = l.split_once(": ").map_or(l.as_str(), |x| x.1);
            let (k, _) = l.split_once([':', '='])?;
            let k = k.trim();
            is_name(k).then(|| k.to_ascii_lowercase())
        })
        .collect()
}

/// The one record the task is about, when several files read hold the same keys and the task
/// names a word only one of them holds ("the ingest service" among web.yaml, ingest.yaml and
/// cron.yaml, each with `replicas` and `memory_mb`): shown all three, the model multiplied the
/// wrong file's values. Files that are not parallel records (a price list and an order) are
/// all kept.
fn focus(
    task: &str,
    groups: Vec<(Option<String>, Vec<String>)>,
) -> Vec<(Option<String>, Vec<String>)> {
    let task_words = words(task);
    let body_words = |g: &(Option<String>, Vec<String>)| -> Vec<String> {
        g.1.iter()
            .flat_map(|l| words(l.split_once(": ").map_or(l.as_str(), |x| x.1)))
            .collect()
    };
    let holds: Vec<Vec<String>> = groups.iter().map(body_words).collect();
    let record_keys: Vec<std::collections::BTreeSet<String>> = groups
        .iter()
        .map(|g| match g.0 {
            Some(_) => keys_of(&g.1),
            None => Default::default(),
        })
        .collect();
    let mut dropped = vec![false; groups.len()];
    for i in 0..groups.len() {
        if record_keys[i].len() < 2 {
            continue;
        }
        // The files holding the same record as file i.
        let members: Vec<usize> = (0..groups.len())
            .filter(|&j| record_keys[j] == record_keys[i])
            .collect();
        if members.len() < 2 || members[0] != i {
            continue;
        }
        let named: Vec<usize> = members
            .iter()
            .copied()
            .filter(|&m| {
                task_words.iter().any(|w| {
                    w.len() >= 3
                        && holds[m].contains(w)
                        && members.iter().all(|&o| o == m || !holds[o].contains(w))
                })
            })
            .collect();
        if let [one] = named[..] {
            for &m in &members {
                dropped[m] = m != one;
            }
        }
    }
    groups
        .into_iter()
        .zip(dropped)
        .filter(|(_, d)| !d)
        .map(|(g, _)| g)
        .collect()
}

#[cfg(test)]
mod tests;
