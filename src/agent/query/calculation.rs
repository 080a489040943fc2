//! The calculation: the expression of a first `calculator` call written by a short, focused
//! request, as the table query writes a first `table` call.
//!
//! From a long transcript the 0.5B planner wrote `48 * 1024 * 1024` for "how many GB is 48
//! GiB", `floor((29 + 1) / 7) * 7 + 1` for the weekday of a date, and used the calculator
//! not at all for the days between two dates it had read. Asked with only the question and
//! the outputs of the files read so far, and made to pick a kind of calculation first, it
//! wrote `48 GiB in GB`, `weekday(2028-02-29)` and the right dates far more often. The model
//! still writes the calculation; the constraint keeps it to what the text holds:
//!
//! - a conversion, days between two dates, a date plus days, a weekday, or any other
//!   arithmetic as an expression; a kind about dates is offered only when the text mentions
//!   a date, a conversion only when the question states one amount with a unit (the
//!   calculator's own reading of both, no word list);
//! - a date is one the text mentions; the amount of a conversion and a number of days are
//!   numbers the text states.
//!
//! The calculation becomes one calculator expression (`48 GiB in GB`, `2028-03-05 -
//! 2027-11-20`, `weekday(2027-07-31)`); one the calculator cannot evaluate leaves the
//! planner's own call. The days from a date to itself say nothing, so that reply is asked
//! again without the kind.
//!
//! When the planner answers after reading files without having called the calculator, the
//! same request runs once with one more kind, `none` (the outputs already show the value),
//! offered first: a question about the days between two dates of a file was answered "14",
//! the day of one of them, with no calculation. A calculation the model
//! writes then runs as a calculator call before the answer.

use serde_json::{json, Value};

use crate::agent::tools::calculator::{self, units};
use crate::agent::types::PlannerError;
use crate::lm::{CancelToken, ChatMessage, LanguageModel, Role};
use crate::lm::{SamplingParams, Usage};

/// How a step whose expression the request wrote is marked in the run's record.
pub const HOW: &str = "written by a focused request over the question and the files read";

/// The first line of the system prompt; the kinds offered follow it.
pub const SYSTEM_HEAD: &str = "You turn a question into one calculation. Pick its kind:";

/// The first line of the system prompt when no calculation is a choice (`none` first).
pub const SYSTEM_HEAD_OPTIONAL: &str =
    "You decide whether answering a question needs one calculation, and write it. Pick its kind:";

/// The last line of the system prompt.
const SYSTEM_TAIL: &str =
    "Write the numbers and dates the question or the tool outputs give, never the result.";

/// Most tokens of the calculation.
const MAX_TOKENS: usize = 120;

/// Most numbers a conversion's amount is chosen from.
const MAX_NUMBERS: usize = 40;

/// The kind that is no calculation.
const NONE: &str = "none";

/// The kind that counts the days between two dates.
const DAYS_BETWEEN: &str = "days_between";

/// One kind of calculation: its name, how the system prompt describes it, and its fields.
struct Kind {
    name: &'static str,
    about: &'static str,
    fields: Vec<(&'static str, Value)>,
}

impl Kind {
    fn schema(&self) -> Value {
        let mut props = serde_json::Map::new();
        props.insert("kind".into(), json!({"const": self.name}));
        let mut required = vec!["kind"];
        for (k, v) in &self.fields {
            props.insert((*k).into(), v.clone());
            required.push(k);
        }
        json!({"type": "object", "properties": props, "required": required, "additionalProperties": false})
    }
}

/// The request for `task` with `context` (the outputs of the files read, possibly empty).
#[derive(Debug, Clone, PartialEq)]
pub struct CalculationRequest {
    /// The system and user messages.
    pub messages: Vec<ChatMessage>,
    /// The schema of the reply: one of the kinds offered.
    pub schema: Value,
}

/// The numbers `text` states, as JSON numbers (integers written without a fraction).
fn stated(text: &str) -> Vec<Value> {
    let mut out: Vec<Value> = Vec::new();
    for x in crate::agent::words::quantities(text, true) {
        let v = if x.fract() == 0.0 && x.abs() < 1e15 {
            json!(x as i64)
        } else {
            json!(x)
        };
        if !out.contains(&v) {
            out.push(v);
        }
        if out.len() == MAX_NUMBERS {
            break;
        }
    }
    out
}

/// The kinds offered for `task` over `context`, most specific first (`none` before them when
/// `optional`), without those named in `left_out`. A conversion is offered when the task
/// states one amount with a unit: with two ("3.2GB over a 40 Mbit/s line") the answer is
/// worked out from both, and converting one of them was the small model's pick.
fn kinds(task: &str, context: &str, optional: bool, left_out: &[&str]) -> Vec<Kind> {
    let text = format!("{context}\n{task}");
    let seen = units::mentions(&text);
    let numbers = stated(&text);
    let number = if numbers.is_empty() {
        json!({"type": "number"})
    } else {
        json!({ "enum": numbers })
    };
    let date = json!({ "enum": seen.dates });
    let unit = json!({ "enum": units::unit_choices() });
    let mut out = Vec::new();
    if optional {
        out.push(Kind {
            name: NONE,
            about: "the tool outputs already show the value asked for; no calculation",
            fields: Vec::new(),
        });
    }
    if units::mentions(task).amounts == 1 {
        out.push(Kind {
            name: "convert",
            about: "an amount from one unit to another",
            fields: vec![
                ("amount", number.clone()),
                ("unit", unit.clone()),
                ("to", unit),
            ],
        });
    }
    out.push(Kind {
        name: "arithmetic",
        about: "any other calculation on the numbers given, as an expression with + - * / ^ ( ) sqrt round min max; numbers may carry units (12 MB / 4 MB/s)",
        fields: vec![(
            "expression",
            json!({"type": "string", "maxLength": 120, "pattern": calculator::EXPRESSION_PATTERN}),
        )],
    });
    if seen.dates.len() >= 2 {
        out.push(Kind {
            name: DAYS_BETWEEN,
            about: "the days from one date to another (dates YYYY-MM-DD)",
            fields: vec![("start", date.clone()), ("end", date.clone())],
        });
    }
    if !seen.dates.is_empty() {
        out.push(Kind {
            name: "date_plus_days",
            about: "the date some days after a date",
            fields: vec![("date", date.clone()), ("days", number)],
        });
        out.push(Kind {
            name: "weekday",
            about: "the day of the week of a date",
            fields: vec![("date", date)],
        });
    }
    out.retain(|k| !left_out.contains(&k.name));
    out
}

/// The calculation request for `task`, with the outputs of the files read so far; `optional`
/// offers `none` first, and `left_out` names kinds not offered.
pub fn calculation_request(
    task: &str,
    context: &str,
    optional: bool,
    left_out: &[&str],
) -> CalculationRequest {
    let kinds = kinds(task, context, optional, left_out);
    let mut system = if optional {
        SYSTEM_HEAD_OPTIONAL
    } else {
        SYSTEM_HEAD
    }
    .to_string();
    for k in &kinds {
        system.push_str(&format!("\n- {}: {}", k.name, k.about));
    }
    system.push('\n');
    system.push_str(SYSTEM_TAIL);
    let user = if context.trim().is_empty() {
        format!("Question: {task}")
    } else {
        format!("Tool outputs:\n{}\n\nQuestion: {task}", context.trim_end())
    };
    CalculationRequest {
        messages: vec![
            ChatMessage::new(Role::System, system),
            ChatMessage::new(Role::User, user),
        ],
        schema: json!({ "anyOf": kinds.iter().map(Kind::schema).collect::<Vec<_>>() }),
    }
}

/// The calculator expression of a reply (`{"kind": "convert", "amount": 48, "unit": "GiB",
/// "to": "GB"}` is `48 GiB in GB`); `None` when the reply is not a calculation.
pub fn expression(reply: &Value) -> Option<String> {
    let s = |k: &str| reply.get(k).and_then(Value::as_str);
    let n = |k: &str| reply.get(k).filter(|v| v.is_number()).map(Value::to_string);
    Some(match s("kind")? {
        "convert" => format!("{} {} in {}", n("amount")?, s("unit")?, s("to")?),
        DAYS_BETWEEN => format!("{} - {}", s("end")?, s("start")?),
        "date_plus_days" => format!("{} + {} days", s("date")?, n("days")?),
        "weekday" => format!("weekday({})", s("date")?),
        "arithmetic" => s("expression")?.to_string(),
        _ => return None,
    })
}

/// Whether a reply is a span from a date to itself (zero days, whatever was asked).
fn degenerate(reply: &Value) -> bool {
    reply.get("kind").and_then(Value::as_str) == Some(DAYS_BETWEEN)
        && reply.get("start").is_some()
        && reply.get("start") == reply.get("end")
}

/// Write the arguments of a `calculator` call for `task` with the calculation request:
/// `{"expression": …}` and the tokens it used. `None` when the reply is no calculation (with
/// `optional`, the model may say so), is not one, or the calculator cannot evaluate it (the
/// planner's call runs). A span from a date to itself is asked again without that kind.
pub fn write_calculation(
    model: &mut dyn LanguageModel,
    sampling: &SamplingParams,
    task: &str,
    context: &str,
    optional: bool,
    cancel: &CancelToken,
) -> Result<Option<(Value, Usage)>, PlannerError> {
    let mut usage = Usage::default();
    let mut left_out: Vec<&str> = Vec::new();
    let reply = loop {
        let req = calculation_request(task, context, optional, &left_out);
        let reply = super::ask_json(
            model,
            sampling,
            req.messages,
            req.schema,
            MAX_TOKENS,
            &mut usage,
            cancel,
            "calculation",
        )?;
        if reply.as_ref().is_some_and(degenerate) && left_out.is_empty() {
            left_out.push(DAYS_BETWEEN);
            continue;
        }
        break reply;
    };
    let expr = reply
        .as_ref()
        .and_then(expression)
        .filter(|e| calculator::output(e).is_ok());
    Ok(expr.map(|e| (json!({ "expression": e }), usage)))
}
