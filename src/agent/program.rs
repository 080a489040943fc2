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

/// The system prompt of the worked-answer request when facts define values.
pub const PROGRAM_SYSTEM_DEFINED: &str =
    "Solve the question with a short Python program. The values under \
Defined are already variables: use their names. Add one variable for any other quantity the \
question states (put its unit in the name), then the steps, ending with answer = ... . Use only \
numbers, variables and + - * / ( ). Reply with the code only.";

/// A value a fact states, bound to a name before the model's program runs.
#[derive(Debug, Clone, PartialEq)]
pub struct Binding {
    /// The variable's name: the file's stem and the value's key path (`quotas_orchid_storage_gb`).
    pub name: String,
    /// The value.
    pub value: f64,
    /// Where it came from: the fact line.
    pub source: String,
    /// The key it was read under: a value's last key, a record's field name.
    pub key: String,
    /// Whether it is a field of a record (a table's row, an array's object).
    pub in_record: bool,
}

/// `x` as the calculator holds it: a whole number exactly.
fn number(x: f64) -> Number {
    if x == x.trunc() && x.abs() < 1e15 {
        Number::Int(x as i128)
    } else {
        Number::Float(x)
    }
}

/// A name made of `parts`: lower case, runs of other characters as one `_`.
fn ident(parts: &[&str]) -> String {
    let mut out = String::new();
    for p in parts {
        for c in p.chars() {
            if c.is_ascii_alphanumeric() {
                out.push(c.to_ascii_lowercase());
            } else if !out.ends_with('_') && !out.is_empty() {
                out.push('_');
            }
        }
        if !out.is_empty() && !out.ends_with('_') {
            out.push('_');
        }
    }
    let out = out.trim_matches('_').to_string();
    if out.starts_with(|c: char| c.is_ascii_digit()) {
        format!("n_{out}")
    } else {
        out
    }
}

/// The number a value starts with ("500", "2.45", "500 (one-off)", "1,200 USD"); `None` when
/// it does not start with one or is a date, a version or an address ("2026-02", "1.2.3").
fn leading_number(v: &str) -> Option<f64> {
    let v = v.trim().trim_start_matches('$');
    let end = v
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == ',' || c == '-'))
        .unwrap_or(v.len());
    let head = &v[..end];
    let rest = &v[end..];
    // "2026-02", "10.0.0.1", "3:00", "10, 20, 30": not one quantity.
    if head.matches('.').count() > 1
        || head[1.min(head.len())..].contains('-')
        || rest.starts_with([':', '/'])
        || head.ends_with(',')
    {
        return None;
    }
    head.replace(',', "")
        .parse::<f64>()
        .ok()
        .filter(|x| x.is_finite())
}

/// The values the facts state, as named variables: a `key: value` line's number under the
/// file's stem and the key path (`slo_checkout_p95_ms = 450`), a record's numeric fields under
/// the record's name (`latency_checkout_p95_ms = 372` for `endpoint=checkout, p95 (ms)=372`).
/// The 0.5B model, shown such facts, transcribed whole files into dictionaries and ran out of
/// tokens; given the names, it writes the one line of arithmetic.
pub fn bindings(facts: &[String]) -> Vec<Binding> {
    let mut out: Vec<Binding> = Vec::new();
    let mut push = |name: String, value: f64, source: &str, key: &str, in_record: bool| {
        if name.is_empty() || !is_name(&name) {
            return;
        }
        let mut unique = name.clone();
        let mut n = 2;
        while out.iter().any(|b| b.name == unique) {
            unique = format!("{name}_{n}");
            n += 1;
        }
        out.push(Binding {
            name: unique,
            value,
            source: source.to_string(),
            key: key.to_string(),
            in_record,
        });
    };
    for fact in facts {
        let Some((path, content)) = fact.split_once(": ") else {
            continue;
        };
        if !path.contains('.') && !path.contains('/') {
            continue;
        }
        let file = path.rsplit('/').next().unwrap_or(path);
        let stem = file.split('.').next().unwrap_or("");
        // `.env` has no stem: its folder names it.
        let stem = if stem.is_empty() {
            path.rsplit('/').nth(1).unwrap_or("env")
        } else {
            stem
        };
        let stem_id = ident(&[stem]);
        let named = |key: &str| -> String {
            let k = ident(&[key]);
            if k == stem_id || k.starts_with(&format!("{stem_id}_")) {
                k
            } else {
                format!("{stem_id}_{k}")
            }
        };
        // A record: "at: a=x, b=1" or "a=x, b=1".
        let pairs = match content.split_once(": ") {
            Some((at, rest)) if rest.contains('=') && !at.contains('=') => rest,
            _ => content,
        };
        let fields: Vec<(&str, &str)> = pairs
            .split(", ")
            .filter_map(|f| f.split_once('='))
            .map(|(k, v)| (k.trim(), v.trim()))
            .collect();
        if fields.len() >= 2 && fields.len() == pairs.split(", ").count() {
            let who = fields
                .iter()
                .find(|(_, v)| leading_number(v).is_none())
                .map(|(_, v)| *v)
                .unwrap_or("");
            for (k, v) in &fields {
                if let Some(x) = leading_number(v) {
                    push(named(&format!("{who} {k}")), x, fact, k, true);
                }
            }
            continue;
        }
        // A value under its key path: "tenants.orchid.storage_gb: 500".
        let Some((key, value)) = content
            .split_once(": ")
            .or_else(|| content.split_once(" = "))
        else {
            continue;
        };
        if key.len() > 80 || key.contains(char::is_whitespace) && key.split_whitespace().count() > 4
        {
            continue;
        }
        let Some(x) = leading_number(value) else {
            continue;
        };
        // The container of parallel records ("tenants", "endpoints") says nothing the file's
        // stem and the record's name do not.
        let parts: Vec<&str> = key.split('.').collect();
        let parts = if parts.len() >= 3 {
            &parts[1..]
        } else {
            &parts[..]
        };
        let leaf = parts.last().copied().unwrap_or(key);
        push(named(&parts.join(" ")), x, fact, leaf, false);
    }
    out
}

/// Whether two words name the same thing: equal, a plural ("gpu", "gpus"), or one the other's
/// start when the shorter has four letters or more ("month", "monthly").
fn relates(a: &str, b: &str) -> bool {
    let (short, long) = if a.len() <= b.len() { (a, b) } else { (b, a) };
    short == long
        || long.strip_suffix('s') == Some(short)
        || (short.len() >= 4 && long.starts_with(short))
}

/// The bindings a question can use: a record's fields (the record was picked by the name the
/// question gives), and values whose key shares a word with the question; of a file none of
/// whose values does, all of them. Shown `PORT` and `WEB_THREADS` beside `WEB_CONCURRENCY`,
/// the model multiplied every number it was given.
fn relevant(task: &str, all: Vec<Binding>) -> Vec<Binding> {
    let keys = keywords(task);
    let file = |b: &Binding| b.source.split_once(": ").map(|x| x.0.to_string());
    // A key's words that are not its file's ("web" of web/.env's WEB_THREADS).
    let named = |b: &Binding| {
        let own = words(&file(b).unwrap_or_default());
        b.in_record
            || words(&b.key)
                .iter()
                .filter(|w| !own.contains(w))
                .any(|w| keys.iter().any(|k| relates(w, k)))
    };
    let files_named: std::collections::HashSet<Option<String>> =
        all.iter().filter(|b| named(b)).map(file).collect();
    all.iter()
        .filter(|b| named(b) || !files_named.contains(&file(b)))
        .cloned()
        .collect()
}

/// The messages of the program request: the values the facts state as defined variables, the
/// other facts as they are, and the question.
pub fn program_messages(task: &str, facts: &[String]) -> Vec<ChatMessage> {
    let defined = relevant(task, bindings(facts));
    let user = if facts.is_empty() {
        task.to_string()
    } else if defined.is_empty() {
        format!("Facts:\n{}\n\nQuestion: {task}", facts.join("\n"))
    } else {
        let mut text = String::from("Defined:\n");
        for b in &defined {
            text.push_str(&format!(
                "{} = {}  # {}\n",
                b.name,
                number(b.value),
                b.source
            ));
        }
        // Values not shown as defined (a setting the question does not name) are left out;
        // other facts (names, dates, prose) are shown as they are.
        let all = bindings(facts);
        let other: Vec<&String> = facts
            .iter()
            .filter(|f| !all.iter().any(|b| &b.source == *f))
            .collect();
        if !other.is_empty() {
            text.push_str("\nOther facts:\n");
            for f in other {
                text.push_str(f);
                text.push('\n');
            }
        }
        format!("{text}\nQuestion: {task}")
    };
    let system = if defined.is_empty() {
        PROGRAM_SYSTEM
    } else {
        PROGRAM_SYSTEM_DEFINED
    };
    vec![
        ChatMessage::new(Role::System, system),
        ChatMessage::new(Role::User, user),
    ]
}

/// Why a program gave no answer.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ProgramError {
    /// No line computed a value.
    #[error("the program computes no value")]
    NoResult,
    /// The program uses no number the question or the facts state (only constants): it
    /// computes something the task did not give.
    #[error("the program uses none of the numbers the question and the facts give")]
    NothingGiven,
    /// A number appears that neither the question nor the facts state.
    #[error("line {line}: the number {number} is in neither the question nor the facts")]
    UnknownNumber {
        /// 1-based line of the program.
        line: usize,
        /// The number as written.
        number: String,
    },
}

/// A program's result.
#[derive(Debug, Clone, PartialEq)]
pub struct Worked {
    /// The value.
    pub value: Number,
    /// The bindings in order (`name = value`), for the trace.
    pub steps: Vec<String>,
}

/// Words of a question that asks how far apart two values are: a magnitude, never negative
/// ("by how many ms is the p95 below its target", "how many GB were left unused").
const MAGNITUDE_WORDS: &[&str] = &[
    "left",
    "unused",
    "remaining",
    "remain",
    "spare",
    "headroom",
    "below",
    "above",
    "under",
    "over",
    "more",
    "less",
    "fewer",
    "shortfall",
    "short",
    "exceed",
    "exceeds",
    "difference",
];

/// Nouns of a part of a whole ("what percentage of the cluster's hours").
const SHARE_NOUNS: &[&str] = &["percentage", "percent", "share", "fraction", "proportion"];

/// A worked value as the question asks it: a difference asked as a magnitude is not negative
/// (the model subtracts in the order the question names the values), and a share of a whole
/// worked out as one ratio times 100 is not above 100 (the model divides the whole by the part).
pub fn as_asked(worked: &Worked, task: &str) -> Number {
    let w = words(task);
    let has = |x: &str| w.iter().any(|v| v == x);
    let v = worked.value.as_f64();
    if v < 0.0 && MAGNITUDE_WORDS.iter().any(|x| has(x)) && !has("net") && !has("change") {
        return number(-v);
    }
    let share_of = w
        .windows(2)
        .any(|p| SHARE_NOUNS.contains(&p[0].as_str()) && p[1] == "of");
    if v > 100.0 && share_of {
        // The last step's expression: "answer = (a / b) * 100 = 444.4" → "(a / b) * 100".
        let expr = worked
            .steps
            .last()
            .and_then(|s| s.rsplit_once(" = ").map(|x| x.0))
            .map(|e| e.rsplit_once(" = ").map_or(e, |x| x.1))
            .unwrap_or_default();
        let compact: String = expr.chars().filter(|c| !c.is_whitespace()).collect();
        let ratio = compact.matches('/').count() == 1
            && ["*100", "100*"].iter().any(|x| compact.contains(x))
            && !compact.contains(['+', '-']);
        if ratio {
            return Number::Float(10000.0 / v);
        }
    }
    worked.value
}

/// Whether `x` is one of `allowed` (or a hundredth or hundredfold of one: "17.5%" is written
/// `0.175`) or a constant.
fn known(x: f64, allowed: &[f64]) -> bool {
    CONSTANTS.iter().any(|c| close(*c, x)) || stated(x, allowed)
}

/// Whether `a` and `b` are the same number (up to rounding).
fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
}

/// Whether `x` is one of `allowed`, or a hundredth or hundredfold of one.
fn stated(x: f64, allowed: &[f64]) -> bool {
    allowed
        .iter()
        .any(|a| close(*a, x) || close(*a / 100.0, x) || close(*a * 100.0, x))
}

/// The number literals of an expression (not digits inside names like `x2`).
fn literals(expr: &str) -> Vec<String> {
    let chars: Vec<char> = expr.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_ascii_alphabetic() || c == '_' {
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            continue;
        }
        if c.is_ascii_digit() || (c == '.' && chars.get(i + 1).is_some_and(char::is_ascii_digit)) {
            let start = i;
            while i < chars.len()
                && (chars[i].is_ascii_digit() || chars[i] == '.' || chars[i] == '_')
            {
                i += 1;
            }
            out.push(chars[start..i].iter().filter(|c| **c != '_').collect());
            continue;
        }
        i += 1;
    }
    out
}

/// Run `program` with the numbers `allowed` (those of the question and the facts): the value
/// of `answer` when bound, else of the last `print`/bare expression, else of the last binding.
pub fn run(program: &str, allowed: &[f64]) -> Result<Worked, ProgramError> {
    run_with(program, allowed, &[])
}

/// [`run`] with `defined` bound before the program's first line: a program that uses one of
/// them uses a given number.
pub fn run_with(
    program: &str,
    allowed: &[f64],
    defined: &[Binding],
) -> Result<Worked, ProgramError> {
    let mut vars: HashMap<String, Number> = defined
        .iter()
        .map(|b| (b.name.clone(), number(b.value)))
        .collect();
    let mut steps = Vec::new();
    let mut last_bound: Option<String> = None;
    let mut printed: Option<Number> = None;
    let mut fenced = false;
    // Whether a number the question or the facts give was used.
    let mut given = false;
    for (i, raw) in program.lines().take(MAX_LINES).enumerate() {
        // The body of an `if`/`for`/`def` is indented: only top-level statements are run.
        if raw.starts_with([' ', '\t']) {
            continue;
        }
        let line = raw.split('#').next().unwrap_or_default().trim();
        if line.starts_with("```") {
            // The closing fence ends the program; what follows is the model's prose.
            if fenced {
                break;
            }
            fenced = true;
            continue;
        }
        let Line::Statement { bind, exprs } = lines::read(line) else {
            continue;
        };
        // A bare number on its own line is an output the model imagined, not a computation;
        // a quoted text is a label.
        if bind.is_none() && exprs.len() == 1 && exprs[0].parse::<f64>().is_ok()
            || exprs.iter().any(|e| e.contains(['"', '\'']))
        {
            continue;
        }
        for e in exprs {
            let Ok(v) = evaluate_with(&e, &vars) else {
                continue;
            };
            let lits = literals(&e);
            given |= e
                .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .any(|t| defined.iter().any(|b| b.name == t.to_ascii_lowercase()));
            given |= lits
                .iter()
                .any(|n| n.parse::<f64>().is_ok_and(|x| stated(x, allowed)));
            if let Some(bad) = lits
                .into_iter()
                .find(|n| !n.parse::<f64>().is_ok_and(|x| known(x, allowed)))
            {
                return Err(ProgramError::UnknownNumber {
                    line: i + 1,
                    number: bad,
                });
            }
            match &bind {
                Some(name) => {
                    steps.push(format!("{name} = {e} = {v}"));
                    vars.insert(name.clone(), v);
                    last_bound = Some(name.clone());
                }
                None => {
                    steps.push(format!("{e} = {v}"));
                    printed = Some(v);
                }
            }
            break;
        }
    }
    if !given {
        return Err(ProgramError::NothingGiven);
    }
    let value = vars
        .get("answer")
        .copied()
        .or(printed)
        .or_else(|| last_bound.and_then(|n| vars.get(&n).copied()))
        .ok_or(ProgramError::NoResult)?;
    Ok(Worked { value, steps })
}

/// The numbers stated by the question and the facts.
pub fn allowed_numbers(task: &str, facts: &[String]) -> Vec<f64> {
    let mut out = numbers_in(task);
    out.extend(super::words::number_words(task));
    for f in facts {
        out.extend(numbers_in(f));
    }
    out
}

/// How the task asks for the value to be rounded.
fn rounding(task: &str) -> Option<Box<dyn Fn(f64) -> f64>> {
    let t = task.to_ascii_lowercase();
    if t.contains("round up") || t.contains("rounded up") {
        return Some(Box::new(f64::ceil));
    }
    if t.contains("round down") || t.contains("rounded down") {
        return Some(Box::new(f64::floor));
    }
    if t.contains("whole number") || t.contains("nearest whole") || t.contains("nearest integer") {
        return Some(Box::new(f64::round));
    }
    let w = words(&t);
    let digits = w.windows(2).find_map(|p| {
        (p[1].starts_with("decimal")).then(|| match p[0].as_str() {
            "one" => Some(1),
            "two" => Some(2),
            "three" => Some(3),
            n => n.parse::<i32>().ok().filter(|d| (0..=10).contains(d)),
        })?
    })?;
    let m = 10f64.powi(digits);
    Some(Box::new(move |x: f64| (x * m).round() / m))
}

/// The value as the answer writes it: as the task asks it rounded, else an integer when it is
/// one, else up to four decimals (six significant digits below 1).
pub fn format_value(value: Number, task: &str) -> String {
    let x = match (value, rounding(task)) {
        (Number::Int(i), _) => return i.to_string(),
        (Number::Float(x), Some(r)) => r(x),
        (Number::Float(x), None) => x,
    };
    if (x - x.round()).abs() < 1e-9 && x.abs() < 1e15 {
        return format!("{}", x.round() as i64);
    }
    let decimals = if x.abs() >= 1.0 {
        4
    } else {
        (5 - x.abs().log10().floor() as i32).clamp(4, 12) as usize
    };
    let s = format!("{x:.decimals$}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

#[cfg(test)]
mod tests;
