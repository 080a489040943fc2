//! The `compute` tool: arithmetic with named quantities. One expression
//! (`{"expression": "sqrt(144) * 3"}`) or a short program, one statement a line
//! (`{"program": "flour_g = 375\nper_person = flour_g / 6\nper_person * 22"}`), evaluated by
//! the calculator's evaluator with each bound name in scope. Lines are read as the
//! worked-answer step reads them ([`super::calculator::lines`]), but strictly: a line that
//! does not evaluate is an error naming the line and the reason, so the model can fix it.

use std::collections::HashMap;

use serde::Deserialize;

use super::calculator::lines::{self, Line};
use super::calculator::{evaluate_noting, evaluate_with, CalcError, Number};
use super::{parse_args, PromptHint, Tool, ToolContext, ToolError, Verification};

/// Most lines of a program.
const MAX_LINES: usize = 40;

/// Longest program, in characters.
const MAX_PROGRAM_CHARS: usize = 1_500;

/// How a program's result line begins.
pub const RESULT_PREFIX: &str = "result: ";

/// The name of the compute tool.
pub const COMPUTE: &str = "compute";

/// The `compute` tool.
#[derive(Debug, Default, Clone, Copy)]
pub struct Compute;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    #[serde(default)]
    expression: Option<String>,
    #[serde(default)]
    program: Option<String>,
}

/// The error text for `e` in a program's line `n` (`text` as written), with the names bound
/// so far when the error is an unknown name.
fn line_error(n: usize, text: &str, e: &CalcError, vars: &HashMap<String, Number>) -> ToolError {
    let mut msg = format!("line {n} ({text:?}): {e}");
    if matches!(e, CalcError::UnknownName(_)) {
        let mut names: Vec<&str> = vars.keys().map(String::as_str).collect();
        names.sort_unstable();
        if names.is_empty() {
            msg.push_str("; no name is bound yet: write `name = value` on a line before using it");
        } else {
            msg.push_str(&format!("; names bound so far: {}", names.join(", ")));
        }
    }
    ToolError::invalid(format!("{msg}."))
}

/// Run `program` strictly: every statement must evaluate. Returns the steps shown and the
/// value: `answer` when bound, else the last value line, else the last binding.
pub fn run_program(program: &str) -> Result<(Vec<String>, Number), ToolError> {
    if program.chars().count() > MAX_PROGRAM_CHARS {
        return Err(ToolError::invalid(format!(
            "the program is longer than {MAX_PROGRAM_CHARS} characters; compute fewer steps per call."
        )));
    }
    let mut vars: HashMap<String, Number> = HashMap::new();
    let mut steps = Vec::new();
    let mut last_value: Option<Number> = None;
    let mut last_bound: Option<String> = None;
    for (i, raw) in program.lines().enumerate() {
        if i >= MAX_LINES {
            return Err(ToolError::invalid(format!(
                "the program has more than {MAX_LINES} lines; compute fewer steps per call."
            )));
        }
        let Line::Statement { bind, exprs } = lines::read(raw) else {
            continue;
        };
        // `x = a + b = 23`: the first part that evaluates (the rest is the model's own result).
        let mut first_err = None;
        let mut value = None;
        for e in &exprs {
            match evaluate_with(e, &vars) {
                Ok(v) => {
                    value = Some((e, v));
                    break;
                }
                Err(err) => {
                    first_err.get_or_insert(err);
                }
            }
        }
        let Some((e, v)) = value else {
            let err = first_err.unwrap_or(CalcError::Empty);
            return Err(line_error(i + 1, raw.trim(), &err, &vars));
        };
        match bind {
            Some(name) => {
                steps.push(format!("{name} = {e} = {v}"));
                vars.insert(name.clone(), v);
                last_bound = Some(name);
            }
            None => {
                steps.push(format!("{e} = {v}"));
                last_value = Some(v);
            }
        }
    }
    let value = vars
        .get("answer")
        .copied()
        .or(last_value)
        .or_else(|| last_bound.and_then(|n| vars.get(&n).copied()))
        .ok_or_else(|| {
            ToolError::invalid(
                "the program computes nothing: write `name = expression` lines and end with the expression of the result.",
            )
        })?;
    Ok((steps, value))
}

impl Tool for Compute {
    fn name(&self) -> &str {
        COMPUTE
    }
    fn description(&self) -> &str {
        "Work out a number exactly. Either expression (one formula) or program: lines \"<name> = <number or formula>\", one name per given quantity, the last line the formula of the result. Operators + - * / % ^ and parentheses; functions sqrt abs round(x, digits) floor ceil ln log10 exp min max sum mean median (of any count of values), days(\"<later YYYY-MM-DD>\", \"<earlier YYYY-MM-DD>\") for the days between two dates."
    }
    fn args_schema(&self) -> serde_json::Value {
        serde_json::json!({
            "type": "object",
            "properties": {
                "expression": {"type": "string", "maxLength": 200, "description": "one expression of numbers, names of functions and quoted dates"},
                "program": {"type": "string", "maxLength": MAX_PROGRAM_CHARS, "description": "lines name = expression, the last line the result"}
            },
            "additionalProperties": false
        })
    }
    fn call(&self, args: serde_json::Value, _ctx: &ToolContext) -> Result<String, ToolError> {
        let a: Args = parse_args(args)?;
        match (a.expression, a.program) {
            (Some(expr), None) => evaluate_noting(&expr)
                .map(|(n, units)| {
                    if units.is_empty() {
                        n.to_string()
                    } else {
                        format!("{n} (units ignored: {})", units.join(", "))
                    }
                })
                .map_err(|e| ToolError::invalid(format!("cannot evaluate {expr:?}: {e}."))),
            (None, Some(program)) => {
                let (steps, value) = run_program(&program)?;
                Ok(format!("{}\n{RESULT_PREFIX}{value}", steps.join("\n")))
            }
            (Some(_), Some(_)) => Err(ToolError::invalid(
                "give either expression or program, not both.",
            )),
            (None, None) => Err(ToolError::invalid(
                "give expression (one formula) or program (lines name = expression).",
            )),
        }
    }
    /// The result is a finite number (a program's on its last line).
    fn verify(&self, _args: &serde_json::Value, output: &str, _ctx: &ToolContext) -> Verification {
        let last = output.trim().lines().last().unwrap_or_default();
        let value = last.strip_prefix(RESULT_PREFIX).unwrap_or(last);
        let value = value
            .split(" (units ignored")
            .next()
            .unwrap_or(value)
            .trim();
        if value.parse::<f64>().is_ok_and(f64::is_finite) {
            Verification::Holds
        } else {
            Verification::Broken(format!("compute output {value:?} is not a finite number"))
        }
    }
    fn prompt_hint(&self) -> PromptHint {
        PromptHint {
            rule: Some(
                "- Arithmetic with several named quantities or dates goes through compute.\n",
            ),
            examples: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ctx() -> ToolContext {
        ToolContext {
            workspace: None,
            blob_dir: std::env::temp_dir(),
            cancel: crate::lm::CancelToken::new(),
            task: None,
            observed: Vec::new(),
        }
    }

    fn run(args: serde_json::Value) -> Result<String, ToolError> {
        Compute.call(args, &ctx())
    }

    #[test]
    fn a_program_binds_names_and_ends_with_its_result() {
        let out =
            run(json!({"program": "flour_g = 375\nper_person = flour_g / 6\nper_person * 22"}))
                .expect("runs");
        assert_eq!(
            out,
            "flour_g = 375 = 375\nper_person = flour_g / 6 = 62.5\nper_person * 22 = 1375\nresult: 1375"
        );
        assert_eq!(
            Compute.verify(&json!({}), &out, &ctx()),
            Verification::Holds
        );
        // `answer` wins over a later value line; comments and imports are nothing.
        let out = run(json!({"program": "import math\na = 10 # given\nanswer = a * 3\na + 1"}))
            .expect("runs");
        assert!(out.ends_with("\nresult: 30"), "{out}");
        // Without a value line, the last binding.
        let out = run(json!({"program": "a = 2\nb = a ^ 10"})).expect("runs");
        assert!(out.ends_with("\nresult: 1024"), "{out}");
    }

    #[test]
    fn expressions_have_the_functions_people_expect() {
        let ev = |e: &str| run(json!({ "expression": e })).expect(e);
        assert_eq!(ev("sqrt(144) * 3"), "36");
        assert_eq!(ev("round(2 / 3, 2)"), "0.67");
        assert_eq!(ev("min(4, 2, 8, 5)"), "2");
        assert_eq!(ev("max(4, 2, 8, 5)"), "8");
        assert_eq!(ev("median(7, 1, 3)"), "3");
        assert_eq!(ev("median(4, 1, 3, 2)"), "2.5");
        assert_eq!(ev("mean(2, 4, 9)"), "5");
        assert_eq!(ev("sum(1.5, 2, 3)"), "6.5");
        assert_eq!(ev("days(\"2024-03-01\", \"2024-02-01\")"), "29");
        assert_eq!(ev("375 g / 6"), "62.5 (units ignored: g)");
    }

    #[test]
    fn errors_name_the_line_and_the_fix() {
        let err = |args: serde_json::Value| run(args).expect_err("an error");
        let e = err(json!({"program": "a = 375\nb = a / c"}));
        assert_eq!(e.kind, super::super::ToolErrorKind::InvalidArgs);
        assert!(
            e.message
                .starts_with("line 2 (\"b = a / c\"): unknown name \"c\""),
            "{}",
            e.message
        );
        assert!(e.message.contains("names bound so far: a"), "{}", e.message);
        let e = err(json!({"program": "x = 5 / 0"}));
        assert!(e.message.contains("division by zero"), "{}", e.message);
        let e = err(json!({"expression": "days(\"2024-02-30\", \"2024-02-01\")"}));
        assert!(
            e.message.contains("bad date \"2024-02-30\""),
            "{}",
            e.message
        );
        let e = err(json!({"expression": "1/0"}));
        assert!(e.message.contains("division by zero"), "{}", e.message);
        let e = err(json!({"program": "# nothing\n"}));
        assert!(e.message.contains("computes nothing"), "{}", e.message);
        let e = err(json!({"expression": "1", "program": "1"}));
        assert!(e.message.contains("not both"), "{}", e.message);
        assert!(err(json!({})).message.contains("give expression"));
        let long = "a = 1\n".repeat(MAX_LINES + 1);
        assert!(err(json!({ "program": long }))
            .message
            .contains("more than"));
        assert!(matches!(
            Compute.verify(&json!({}), "result: x", &ctx()),
            Verification::Broken(_)
        ));
    }
}
