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
use super::words::{keywords, words};

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
                .map(|l| super::outputs::content(l).unwrap_or(l))
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
        super::outputs::content(line)
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
            let content = super::outputs::content(line).unwrap_or(line).trim();
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
