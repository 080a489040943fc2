//! The table query: the arguments of a `table` call written by a short, focused request, as
//! the answer step writes the answer.
//!
//! A 0.5B planner picks the `table` tool well enough (narrowing offers only it once a file of
//! records is read) but writes its arguments from a long transcript: it kept one of two
//! conditions ("open AND high priority" counted every high one), added a condition the
//! question never states ("run gt baseline"), or counted the distinct values of the very field
//! a condition fixed (1 distinct page where page = /pricing). Asked with only the file's
//! fields, their values and the question in front of it, the same model writes the query far
//! more often right. The model still writes the whole query; the constraint only keeps it to
//! what the file holds:
//!
//! - `op` is one of the tool's operations and `field` one of the file's fields;
//! - a condition compares a field with a value the question itself names: one of that field's
//!   values (compared without case or punctuation, as narrowing matches preset names) or, for
//!   a numeric field, a number the question states. With none named, there is no condition.
//!
//! One check may send the query back: an operation over the field a condition fixes
//! (`distinct page where page eq /pricing`, `total status where status eq paid`) says nothing
//! the condition did not, so the request runs again with the conditions kept and that field
//! left out of `field`'s choices. Only the first `table` call on a file is written this way; a
//! later one is the planner's (the focused request would write the same query again).

use serde_json::{json, Value};

use crate::lm::{CancelToken, ChatMessage, Constraint, GenRequest, LanguageModel, Role};
use crate::lm::{SamplingParams, Usage};

use super::narrow::named_values;
use super::outputs::call_path;
use super::tools::table::{self, Summary, OP_WORDS, TABLE};
use super::tools::Sandbox;
use super::types::{Action, PlannerError, Step};

pub mod calculation;
pub mod listing;

pub use super::tools::calculator::CALCULATOR;

/// The system prompt of the query request.
pub const QUERY_SYSTEM: &str = "You turn a question about the records of a file into one query. Reply with one JSON object:\n\
\"op\": value (the field's value), count (how many records), total (sum of the field), average, minimum or maximum (each with the record that holds it), distinct (the different values of the field);\n\
\"field\": the field the operation reads;\n\
\"where\": the conditions a record must meet (an empty list for all records; one condition for each restriction the question states).\n\
Use only field names and values the file has.";

/// How a step whose query the request wrote is marked in the run's record.
pub const HOW: &str = "written by a focused request over the file's fields";

/// Most tokens of the query.
const QUERY_MAX_TOKENS: usize = 200;

/// Most conditions a query holds.
const MAX_CONDITIONS: usize = 4;

/// Most distinct values a field's description lists; more are shown as one example.
const LISTED_VALUES: usize = 8;

/// Longest value a field's description lists, in characters.
const LISTED_VALUE_CHARS: usize = 40;

/// The comparisons a condition on a numeric field may use.
const NUMERIC_CMPS: [&str; 6] = ["eq", "ne", "lt", "le", "gt", "ge"];

/// The comparisons a condition on a text field may use.
const TEXT_CMPS: [&str; 3] = ["eq", "ne", "contains"];

/// What the query request is made of, for one question over one file.
#[derive(Debug, Clone, PartialEq)]
pub struct QueryRequest {
    /// The system and user messages.
    pub messages: Vec<ChatMessage>,
    /// The file's fields.
    pub fields: Vec<String>,
    /// The schema of `where`: conditions on values the question names, or none.
    pub conditions: Value,
}

/// The user message: the file's fields with their values, its first records, the question.
fn describe(path: &str, s: &Summary, task: &str) -> String {
    let mut out = format!("File: {path}, {} records. Fields:\n", s.records);
    for (f, values) in s.fields.iter().zip(&s.distinct) {
        let kind = if f.numeric {
            "number".to_string()
        } else if values.is_empty() {
            "text".to_string()
        } else if values.len() <= LISTED_VALUES
            && values
                .iter()
                .all(|v| v.chars().count() <= LISTED_VALUE_CHARS)
        {
            values.join(" | ")
        } else {
            format!("text, e.g. {}", values[0])
        };
        out.push_str(&format!("- {}: {kind}\n", f.name));
    }
    if !s.first.is_empty() {
        out.push_str(&format!("First records:\n{}\n", s.first.join("\n")));
    }
    out.push_str(&format!("\nQuestion: {task}"));
    out
}

/// The numbers `task` states, as a condition on a numeric field may use them ("100", "2.5").
fn stated_numbers(task: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for q in super::words::quantities(task, false) {
        let s = q.to_string();
        if !out.contains(&s) {
            out.push(s);
        }
    }
    out
}

/// The schema of `where` for `task` over `s`. A text field with values the task names gets one
/// condition, in the order of the fields, that the reply must hold (the model picks the value
/// among those named and how to compare); a numeric field may get conditions on the numbers
/// the task states within the field's range, after those (a year in the question is no bound
/// on a count of users: "active_users gt 2026" kept every record). Left optional, the named values were dropped about as often
/// as they were kept ("the average temperature at the north station" averaged every
/// station), and which depended on how the fields were listed.
fn conditions_schema(task: &str, s: &Summary) -> Value {
    let numbers = stated_numbers(task);
    let condition = |field: &str, cmps: &[&str], values: &[String]| {
        json!({
            "type": "object",
            "properties": {
                "field": {"const": field},
                "cmp": {"enum": cmps},
                "value": {"enum": values}
            },
            "required": ["field", "cmp", "value"],
            "additionalProperties": false
        })
    };
    let mut named: Vec<Value> = Vec::new();
    let mut numeric: Vec<Value> = Vec::new();
    for ((f, values), range) in s.fields.iter().zip(&s.distinct).zip(&s.range) {
        if f.numeric {
            let (lo, hi) = range.unwrap_or((f64::NEG_INFINITY, f64::INFINITY));
            let within: Vec<String> = numbers
                .iter()
                .filter(|n| n.parse::<f64>().is_ok_and(|x| lo <= x && x <= hi))
                .cloned()
                .collect();
            if !within.is_empty() {
                numeric.push(condition(&f.name, &NUMERIC_CMPS, &within));
            }
        } else {
            let values = named_values(task, values);
            if !values.is_empty() {
                named.push(condition(&f.name, &TEXT_CMPS, &values));
            }
        }
    }
    let required = named.len().min(MAX_CONDITIONS);
    named.truncate(required);
    let more = if numeric.is_empty() {
        0
    } else {
        MAX_CONDITIONS - required
    };
    let items = if numeric.is_empty() {
        json!(false)
    } else {
        json!({ "anyOf": numeric })
    };
    json!({
        "type": "array",
        "prefixItems": named,
        "minItems": required,
        "maxItems": required + more,
        "items": items
    })
}

/// The query request for `task` over the table file `path` in `ws`; `None` when `path` is not
/// a table file with fields.
pub fn query_request(task: &str, ws: &Sandbox, path: &str) -> Option<QueryRequest> {
    let s = table::summary(ws, path)?;
    Some(QueryRequest {
        messages: vec![
            ChatMessage::new(Role::System, QUERY_SYSTEM),
            ChatMessage::new(Role::User, describe(path, &s, task)),
        ],
        fields: s.fields.iter().map(|f| f.name.clone()).collect(),
        conditions: conditions_schema(task, &s),
    })
}

/// The schema of the reply: `op`, then `field` (one of `fields`), then `where`.
pub fn query_schema(fields: &[String], conditions: &Value) -> Value {
    json!({
        "type": "object",
        "properties": {
            "op": {"enum": OP_WORDS},
            "field": {"enum": fields},
            "where": conditions
        },
        "required": ["op", "field", "where"],
        "additionalProperties": false
    })
}

/// The fields a query's `eq` conditions fix, when its operation reads one of them (and is not
/// a count, which reads no value): what the check sends back.
pub fn fixed_field(query: &Value) -> Option<Vec<String>> {
    let op = query.get("op")?.as_str()?;
    let field = query.get("field")?.as_str()?;
    let fixed: Vec<String> = query
        .get("where")?
        .as_array()?
        .iter()
        .filter(|c| c.get("cmp").and_then(Value::as_str) == Some("eq"))
        .filter_map(|c| c.get("field").and_then(Value::as_str).map(str::to_string))
        .collect();
    (op != "count" && fixed.iter().any(|f| f == field)).then_some(fixed)
}

/// Whether the run has not yet called `table` on `path`: only the first call on a file is
/// written by the query request.
pub fn first_table_call(steps: &[Step], path: &str) -> bool {
    !steps.iter().any(|s| {
        matches!(&s.action, Some(Action::ToolCall { name, .. }) if name == TABLE)
            && call_path(s).is_some_and(|p| super::tools::choices::same_path(p, path))
    })
}

/// A call whose arguments a focused request writes.
#[derive(Debug, Clone, PartialEq)]
pub enum Rewrite {
    /// A first `table` call on the file at this path.
    Table(String),
    /// A first `calculator` call, or (`optional`) a final answer after files were read and
    /// no calculator call: the request may then say no calculation is needed (see
    /// [`calculation`]).
    Calculation {
        /// The outputs of the files read so far, as the request shows them.
        context: String,
        /// Whether `none` is a choice.
        optional: bool,
    },
    /// A first `list_dir` call, of the folder the planner named if any (see [`listing`]).
    Listing(Option<String>),
}

impl Rewrite {
    /// The note the step's thought carries in the run's record.
    pub fn tag(&self) -> String {
        match self {
            Rewrite::Table(_) => format!("[the query: {HOW}]"),
            Rewrite::Calculation { .. } => format!("[the calculation: {}]", calculation::HOW),
            Rewrite::Listing(_) => format!("[the listing: {}]", listing::HOW),
        }
    }

    /// Whether the call the request wrote (`args`) answers the question, so that only the
    /// answer is offered next: a calculation (the planner went on adding 45 days to each
    /// date it got back), or a listing the request filtered by extension or to folders (the
    /// planner went on listing each subfolder and answered from the last).
    pub fn answers(&self, args: &Value) -> bool {
        match self {
            Rewrite::Calculation { .. } => true,
            Rewrite::Listing(_) => args.get("ext").is_some() || args.get("kind").is_some(),
            Rewrite::Table(_) => false,
        }
    }
}

/// Most characters of file outputs a calculation request shows (the newest kept).
const CALCULATION_CONTEXT_CHARS: usize = 2400;

/// The outputs of the file reads among `steps` (`read_file`, `search_text`, `table`), newest
/// kept within [`CALCULATION_CONTEXT_CHARS`], in run order.
fn file_outputs(steps: &[Step]) -> String {
    let mut parts: Vec<&str> = Vec::new();
    let mut used = 0;
    use super::tools::files::{FILE_READERS, LIST_DIR};
    for s in steps.iter().rev().filter(|s| super::outputs::usable(s)) {
        let read = matches!(&s.action, Some(Action::ToolCall { name, .. })
            if name != LIST_DIR && FILE_READERS.contains(&name.as_str()));
        let text = s.observation.text.trim_end();
        if !read || used + text.len() > CALCULATION_CONTEXT_CHARS {
            continue;
        }
        used += text.len();
        parts.push(text);
    }
    parts.reverse();
    parts.join("\n\n")
}

/// Whether a step called the calculator.
fn calculates(step: &Step) -> bool {
    matches!(&step.action, Some(Action::ToolCall { name, .. }) if name == CALCULATOR)
}

/// Whether `action` ends the run with an answer (`final_answer` as a tool call or as the
/// answer itself): where [`calculation_before_answer`] is asked, in both loops.
pub fn is_answer(action: &Action) -> bool {
    match action {
        Action::Final { .. } => true,
        Action::ToolCall { name, .. } => name == super::tools::FINAL_ANSWER,
    }
}

/// What a call of `name` with `args` is when a focused request writes its arguments: a first
/// `table` call on a file, a first `calculator` call, or a first `list_dir` call.
pub fn rewrites(name: &str, args: &Value, steps: &[Step]) -> Option<Rewrite> {
    use super::tools::files::LIST_DIR;
    if name == LIST_DIR {
        let first = !steps
            .iter()
            .any(|s| matches!(&s.action, Some(Action::ToolCall { name, .. }) if name == LIST_DIR));
        let path = args.get("path").and_then(Value::as_str).map(str::to_string);
        return first.then_some(Rewrite::Listing(path));
    }
    if name == CALCULATOR {
        let first = !steps.iter().any(calculates);
        return first.then(|| Rewrite::Calculation {
            context: file_outputs(steps),
            optional: false,
        });
    }
    let path = args.get("path").and_then(Value::as_str)?;
    (name == TABLE && table::read::kind_of(path).is_some() && first_table_call(steps, path))
        .then(|| Rewrite::Table(path.to_string()))
}

/// The calculation asked before a final answer: when files were read and neither a
/// `calculator` call nor a `table` query computed anything, the calculation request runs with
/// `none` offered; a calculation it writes runs as a calculator call instead of the answer.
/// (After a table query, the request added a date to the count the table had answered.)
pub fn calculation_before_answer(steps: &[Step]) -> Option<Rewrite> {
    let calculated = steps
        .iter()
        .any(|s| calculates(s) || super::outputs::table_answer_path(s).is_some());
    let context = file_outputs(steps);
    (!calculated && !context.is_empty()).then_some(Rewrite::Calculation {
        context,
        optional: true,
    })
}

/// One focused request: `messages` under the JSON `schema`, its reply parsed as JSON (`None`
/// when it is not), the tokens it used added to `usage`; `what` names it in the debug log.
#[allow(clippy::too_many_arguments)]
pub(crate) fn ask_json(
    model: &mut dyn LanguageModel,
    sampling: &SamplingParams,
    messages: Vec<ChatMessage>,
    schema: Value,
    max_tokens: usize,
    usage: &mut Usage,
    cancel: &CancelToken,
    what: &str,
) -> Result<Option<Value>, PlannerError> {
    let gen = GenRequest {
        messages,
        sampling: sampling.clone(),
        max_tokens,
        stop: Vec::new(),
        constraint: Some(Constraint::JsonSchema(schema)),
    };
    let out = super::answer::generate(model, &gen, cancel)?;
    usage.add(&out.usage);
    let prompt = gen.messages.last().map_or("", |m| m.content.as_str());
    tracing::debug!(prompt = ?prompt, reply = ?out.text, "{what}");
    Ok(serde_json::from_str::<Value>(&out.text).ok())
}

/// Write the arguments of the call `rewrite` names for `task`, and the tokens it used; `None`
/// when the request has nothing to write (the planner's call runs).
pub fn write(
    model: &mut dyn LanguageModel,
    sampling: &SamplingParams,
    task: &str,
    ws: &Sandbox,
    rewrite: &Rewrite,
    cancel: &CancelToken,
) -> Result<Option<(Value, Usage)>, PlannerError> {
    match rewrite {
        Rewrite::Table(path) => write_query(model, sampling, task, ws, path, cancel),
        Rewrite::Calculation { context, optional } => {
            calculation::write_calculation(model, sampling, task, context, *optional, cancel)
        }
        Rewrite::Listing(path) => {
            listing::write_listing(model, sampling, task, ws, path.as_deref(), cancel)
        }
    }
}

/// Write the arguments of a `table` call on `path` for `task` with the query request: the
/// call's arguments (`path`, `op`, `field`, `where`) and the tokens it used. `None` when
/// `path` is not a table file with fields, or the reply is not a query.
pub fn write_query(
    model: &mut dyn LanguageModel,
    sampling: &SamplingParams,
    task: &str,
    ws: &Sandbox,
    path: &str,
    cancel: &CancelToken,
) -> Result<Option<(Value, Usage)>, PlannerError> {
    let Some(req) = query_request(task, ws, path) else {
        return Ok(None);
    };
    let mut usage = Usage::default();
    let mut ask = |schema: Value, usage: &mut Usage| -> Result<Option<Value>, PlannerError> {
        let messages = req.messages.clone();
        let reply = ask_json(
            model,
            sampling,
            messages,
            schema,
            QUERY_MAX_TOKENS,
            usage,
            cancel,
            "table query",
        )?;
        Ok(reply.filter(Value::is_object))
    };
    let Some(mut query) = ask(query_schema(&req.fields, &req.conditions), &mut usage)? else {
        return Ok(None);
    };
    if let Some(fixed) = fixed_field(&query) {
        let rest: Vec<String> = req
            .fields
            .iter()
            .filter(|f| !fixed.contains(f))
            .cloned()
            .collect();
        if !rest.is_empty() {
            let kept = json!({"const": query["where"].clone()});
            if let Some(again) = ask(query_schema(&rest, &kept), &mut usage)? {
                query = again;
            }
        }
    }
    let mut args = json!({"path": path});
    for key in ["op", "field", "where"] {
        if let Some(v) = query.get(key) {
            args[key] = v.clone();
        }
    }
    Ok(Some((args, usage)))
}

#[cfg(test)]
mod tests;
