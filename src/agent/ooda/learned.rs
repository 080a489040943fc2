//! Implicit guidance learned from memory: a pattern (the shape of a task, the state of the run →
//! an action) that succeeded in earlier runs of the same workspace picks the action without the
//! Orient and Decide model calls.
//!
//! A task's shape is its text with the variable tokens (numbers, paths) replaced by slots:
//! `What is 6 * 7?` and `What is 8 * 9?` are both `What is {0} * {1}?`. The state is `start`
//! or the last action's tool and status (`after calculator verified`). The action is stored with
//! its string arguments in the same slots (`{"expression": "{0} * {1}"}`; `{out}` for the last
//! output, as a final answer copies it). A run that completes with every action verified adds
//! one success to each of its steps' patterns (a different action for the same shape and state
//! starts the count again); from [`LEARN_AFTER`] successes on, the pattern is taken, and the
//! decision record names it and its evidence. A constant final answer (neither the last output
//! nor built from the task's tokens) is never learned: for another task it would be a guess.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::memory::{MemoryKind, MemoryStore};
use super::world::CompletedStep;
use crate::agent::audit::OutcomeStatus;

/// Successes in a workspace before a pattern skips Orient and Decide (the third similar task).
pub const LEARN_AFTER: usize = 2;
/// Runs named as evidence, at most.
const EVIDENCE_RUNS: usize = 5;

/// A task's text with its variable tokens as slots.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskShape {
    /// The text with `{k}` for the k-th variable token.
    pub template: String,
    /// The variable tokens, in order.
    pub slots: Vec<String>,
}

fn is_variable(core: &str) -> bool {
    let has_digit = core.chars().any(|c| c.is_ascii_digit());
    let numeric = has_digit
        && core
            .chars()
            .all(|c| c.is_ascii_digit() || matches!(c, '.' | ',' | '-' | '%'));
    let path = (core.contains('.') || core.contains('/'))
        && core.chars().any(|c| c.is_ascii_alphabetic())
        && !core.ends_with('.');
    numeric || path
}

/// The shape of a task.
pub fn task_shape(task: &str) -> TaskShape {
    let mut slots = Vec::new();
    let words: Vec<String> = task
        .split_whitespace()
        .map(|w| {
            let core = w.trim_matches(|c: char| {
                matches!(
                    c,
                    '?' | '!' | ',' | ';' | ':' | '(' | ')' | '"' | '\'' | '`'
                )
            });
            let core = core.strip_suffix('.').unwrap_or(core);
            if core.is_empty() || !is_variable(core) {
                return w.to_string();
            }
            let k = slots.len();
            slots.push(core.to_string());
            w.replacen(core, &format!("{{{k}}}"), 1)
        })
        .collect();
    TaskShape {
        template: words.join(" "),
        slots,
    }
}

/// The state a step was taken in: `start`, or the last action's tool and status.
pub fn state_kind(last: Option<&CompletedStep>) -> String {
    match last {
        None => "start".into(),
        Some(c) => format!("after {} {}", c.tool, status_word(c.status)),
    }
}

fn status_word(s: OutcomeStatus) -> &'static str {
    match s {
        OutcomeStatus::Verified => "verified",
        OutcomeStatus::Unverified => "unverified",
        OutcomeStatus::Failed => "failed",
        OutcomeStatus::TimedOut => "timed out",
    }
}

/// The memory key of a pattern.
pub fn pattern_key(shape: &TaskShape, state: &str) -> String {
    format!("pattern {} | {state}", shape.template)
}

/// A learned action and its evidence.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Pattern {
    /// Tool.
    pub tool: String,
    /// Arguments, string values with `{k}` slots and `{out}`.
    pub args: Value,
    /// Runs in which it succeeded.
    pub successes: usize,
    /// The latest of those runs.
    pub runs: Vec<String>,
}

/// `text` with each slot value that stands alone (not inside a longer number, word or path) as
/// `{k}`, in one pass (longest slot first); braces of the text are doubled.
fn slot_text(text: &str, slots: &[String]) -> String {
    let mut order: Vec<usize> = (0..slots.len()).filter(|&k| !slots[k].is_empty()).collect();
    order.sort_by_key(|&k| std::cmp::Reverse(slots[k].len()));
    let word = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '.');
    let mut out = String::new();
    let mut i = 0;
    'scan: while i < text.len() {
        let before = text[..i].chars().last();
        if !word(before) {
            for &k in &order {
                let s = &slots[k];
                if text[i..].starts_with(s.as_str()) {
                    let after = text[i + s.len()..].chars().next();
                    // A trailing full stop ends a sentence, not a number.
                    let sentence_end =
                        after == Some('.') && !word(text[i + s.len()..].chars().nth(1));
                    let after_word = word(after) && !sentence_end;
                    if !after_word {
                        out.push_str(&format!("{{{k}}}"));
                        i += s.len();
                        continue 'scan;
                    }
                }
            }
        }
        let c = text[i..].chars().next().unwrap_or(' ');
        match c {
            '{' => out.push_str("{{"),
            '}' => out.push_str("}}"),
            c => out.push(c),
        }
        i += c.len_utf8();
    }
    out
}

/// An action's arguments with the task's variable tokens as slots (`{out}`: the last output).
pub fn generalize(args: &Value, shape: &TaskShape, last_output: Option<&str>) -> Value {
    match args {
        Value::String(s) => {
            if let Some(out) = last_output.map(str::trim) {
                if !out.is_empty() && s.trim() == out {
                    return Value::String("{out}".into());
                }
            }
            Value::String(slot_text(s, &shape.slots))
        }
        Value::Object(m) => Value::Object(
            m.iter()
                .map(|(k, v)| (k.clone(), generalize(v, shape, last_output)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// Fill a pattern's slots; `None` when one cannot be filled.
pub fn instantiate(args: &Value, shape: &TaskShape, last_output: Option<&str>) -> Option<Value> {
    match args {
        Value::String(t) => {
            if t == "{out}" {
                return last_output.map(|o| Value::String(o.trim().to_string()));
            }
            let mut out = String::new();
            let mut chars = t.chars().peekable();
            while let Some(c) = chars.next() {
                match c {
                    '{' if chars.peek() == Some(&'{') => {
                        chars.next();
                        out.push('{');
                    }
                    '}' if chars.peek() == Some(&'}') => {
                        chars.next();
                        out.push('}');
                    }
                    '{' => {
                        let mut n = String::new();
                        for d in chars.by_ref() {
                            if d == '}' {
                                break;
                            }
                            n.push(d);
                        }
                        out.push_str(shape.slots.get(n.parse::<usize>().ok()?)?);
                    }
                    c => out.push(c),
                }
            }
            Some(Value::String(out))
        }
        Value::Object(m) => {
            let mut o = serde_json::Map::new();
            for (k, v) in m {
                o.insert(k.clone(), instantiate(v, shape, last_output)?);
            }
            Some(Value::Object(o))
        }
        other => Some(other.clone()),
    }
}

/// The pattern stored under `key`, if any.
pub fn lookup(mem: &MemoryStore, key: &str) -> Option<Pattern> {
    mem.entries()
        .iter()
        .rev()
        .find(|e| e.kind == MemoryKind::Pattern && e.key == key)
        .and_then(|e| serde_json::from_str(&e.value).ok())
}

/// Count one success of each step of a completed run (tool actions in order, then the answer).
pub fn learn_run(
    mem: &mut MemoryStore,
    task: &str,
    completed: &[CompletedStep],
    answer: &str,
    run_id: &str,
) {
    if completed
        .iter()
        .any(|c| c.status != OutcomeStatus::Verified)
    {
        return;
    }
    let shape = task_shape(task);
    let mut steps: Vec<(String, String, Value)> = Vec::new();
    for (i, c) in completed.iter().enumerate() {
        let prev = i.checked_sub(1).map(|p| &completed[p]);
        let args = generalize(&c.args, &shape, prev.map(|p| p.output.as_str()));
        steps.push((state_kind(prev), c.tool.clone(), args));
    }
    let last = completed.last();
    let answer_args = serde_json::json!({ "answer": answer });
    let general = generalize(&answer_args, &shape, last.map(|l| l.output.as_str()));
    // An answer that is neither the last output nor made of the task's tokens is a constant:
    // taking it again for another task of the same shape would be a guess.
    if general != answer_args {
        steps.push((
            state_kind(last),
            crate::agent::tools::FINAL_ANSWER.to_string(),
            general,
        ));
    }
    for (state, tool, args) in steps {
        let key = pattern_key(&shape, &state);
        let mut p = match lookup(mem, &key) {
            Some(p) if p.tool == tool && p.args == args => p,
            _ => Pattern {
                tool,
                args,
                successes: 0,
                runs: Vec::new(),
            },
        };
        p.successes += 1;
        p.runs.push(run_id.to_string());
        if p.runs.len() > EVIDENCE_RUNS {
            p.runs.remove(0);
        }
        if let Ok(v) = serde_json::to_string(&p) {
            mem.upsert(&key, &v, 1.0, run_id, MemoryKind::Pattern);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn similar_tasks_share_a_shape_and_the_action_fills_its_slots() {
        let a = task_shape("What is 6 * 7?");
        let b = task_shape("What is 12 * 11?");
        assert_eq!(a.template, "What is {0} * {1}?");
        assert_eq!(a.template, b.template);
        assert_eq!(b.slots, vec!["12", "11"]);
        let g = generalize(&json!({"expression": "6 * 7"}), &a, None);
        assert_eq!(g, json!({"expression": "{0} * {1}"}));
        assert_eq!(
            instantiate(&g, &b, None),
            Some(json!({"expression": "12 * 11"}))
        );
        let ans = generalize(&json!({"answer": "42"}), &a, Some("42"));
        assert_eq!(ans, json!({"answer": "{out}"}));
        assert_eq!(
            instantiate(&ans, &b, Some("132\n")),
            Some(json!({"answer": "132"}))
        );
        // A slot inside a longer number is not a slot; paths are.
        let c = task_shape("Sum 1 and 12 from data/a.csv.");
        assert_eq!(c.template, "Sum {0} and {1} from {2}.");
        assert_eq!(
            generalize(&json!("12+1 in data/a.csv"), &c, None),
            json!("{1}+{0} in {2}")
        );
        assert_eq!(instantiate(&json!("{5}"), &c, None), None);
    }

    #[test]
    fn a_run_counts_once_per_step_and_a_constant_answer_is_not_learned() {
        let d = tempfile::tempdir().expect("tempdir");
        let mut mem = MemoryStore::open(d.path(), None).expect("memory");
        let step = |expr: &str, out: &str| CompletedStep {
            cycle: 1,
            action_id: 1,
            tool: "calculator".into(),
            args: json!({ "expression": expr }),
            fingerprint: "f".into(),
            status: OutcomeStatus::Verified,
            output: out.into(),
            implicit: false,
        };
        learn_run(
            &mut mem,
            "What is 6 * 7?",
            &[step("6 * 7", "42")],
            "42",
            "r1",
        );
        learn_run(
            &mut mem,
            "What is 8 * 9?",
            &[step("8 * 9", "72")],
            "72",
            "r2",
        );
        let shape = task_shape("What is 1 * 2?");
        let p = lookup(&mem, &pattern_key(&shape, "start")).expect("start pattern");
        assert_eq!((p.successes, p.runs.len()), (2, 2));
        let a = lookup(&mem, &pattern_key(&shape, "after calculator verified")).expect("answer");
        assert_eq!(a.args, json!({"answer": "{out}"}));
        // Another action in the same state starts the count again.
        learn_run(
            &mut mem,
            "What is 2 * 3?",
            &[step("3 * 2 * 1", "6")],
            "6",
            "r3",
        );
        let p = lookup(&mem, &pattern_key(&shape, "start")).expect("start pattern");
        assert_eq!(p.successes, 1);
        // A constant answer is not learned; a failed step teaches nothing.
        let q = task_shape("Is 7 prime?");
        learn_run(&mut mem, "Is 7 prime?", &[], "yes", "r4");
        assert!(lookup(&mem, &pattern_key(&q, "start")).is_none());
        let mut bad = step("9 / 0", "error");
        bad.status = OutcomeStatus::Failed;
        learn_run(&mut mem, "What is 9 / 0?", &[bad], "error", "r5");
        assert!(lookup(&mem, &pattern_key(&task_shape("What is 9 / 0?"), "start")).is_none());
    }
}
