use super::*;
use crate::agent::answer::tests::Scripted;
use crate::agent::types::{Observation, ObservationKind, StepTimings};

const TICKETS: &str = "id,title,status,priority,hours\n\
OPS-1,login loop,open,high,3\n\
OPS-2,export slow,open,low,12\n\
OPS-3,wrong VAT,closed,high,5\n\
OPS-4,typo,open,high,1\n";

fn ws_with(files: &[(&str, &str)]) -> (tempfile::TempDir, Sandbox) {
    let t = tempfile::tempdir().expect("tmp");
    for (name, body) in files {
        std::fs::write(t.path().join(name), body).expect("write");
    }
    let ws = Sandbox::new(t.path()).expect("sandbox");
    (t, ws)
}

fn step(index: usize, tool: &str, args: Value, text: &str) -> Step {
    Step {
        index,
        thought: String::new(),
        action: Some(Action::tool(tool, args)),
        raw: String::new(),
        observation: Observation::new(ObservationKind::Output, text.to_string()),
        fingerprint: None,
        timings: StepTimings::default(),
        usage: Usage::default(),
    }
}

fn schema_of(req: &GenRequest) -> &Value {
    match &req.constraint {
        Some(Constraint::JsonSchema(s)) => s,
        other => panic!("expected a JSON schema, got {other:?}"),
    }
}

#[test]
fn the_request_shows_the_fields_and_holds_the_named_values_as_conditions() {
    let (_t, ws) = ws_with(&[("tickets.csv", TICKETS)]);
    let task = "How many open tickets with high priority took over 2 hours in 2026?";
    let req = query_request(task, &ws, "tickets.csv").expect("a table file");
    let user = &req.messages[1].content;
    assert!(
        user.starts_with("File: tickets.csv, 4 records. Fields:\n"),
        "{user}"
    );
    assert!(user.contains("- status: open | closed\n"), "{user}");
    assert!(user.contains("- hours: number\n"), "{user}");
    assert!(
        user.contains(
            "First records:\nid=OPS-1, title=login loop, status=open, priority=high, hours=3\n"
        ),
        "{user}"
    );
    assert!(user.ends_with(&format!("Question: {task}")), "{user}");
    assert_eq!(req.fields, ["id", "title", "status", "priority", "hours"]);
    // Each text field the task names a value of is one required condition, in field order.
    let w = &req.conditions;
    assert_eq!(w["minItems"], 2);
    assert_eq!(
        w["prefixItems"][0]["properties"]["field"]["const"],
        "status"
    );
    assert_eq!(
        w["prefixItems"][0]["properties"]["value"]["enum"],
        json!(["open"])
    );
    assert_eq!(
        w["prefixItems"][1]["properties"]["field"]["const"],
        "priority"
    );
    assert_eq!(
        w["prefixItems"][1]["properties"]["value"]["enum"],
        json!(["high"])
    );
    // A number the task states may bound a numeric field, when it lies in its range: 2 does
    // (hours run 1 to 12), the year 2026 does not.
    assert_eq!(w["maxItems"], MAX_CONDITIONS);
    let numeric = &w["items"]["anyOf"][0]["properties"];
    assert_eq!(numeric["field"]["const"], "hours");
    assert_eq!(numeric["value"]["enum"], json!(["2"]));
    // The reply's schema: op from the tool's operations, field from the file.
    let schema = query_schema(&req.fields, &req.conditions);
    assert_eq!(schema["properties"]["op"]["enum"], json!(OP_WORDS));
    assert_eq!(schema["properties"]["field"]["enum"], json!(req.fields));
}

#[test]
fn a_task_that_names_no_value_gets_no_condition_and_other_files_no_request() {
    let (_t, ws) = ws_with(&[("tickets.csv", TICKETS), ("notes.md", "# notes\n")]);
    let req = query_request("Which ticket took longest?", &ws, "tickets.csv").expect("table");
    assert_eq!(req.conditions["maxItems"], 0);
    assert_eq!(req.conditions["items"], json!(false));
    assert!(query_request("what is in the notes?", &ws, "notes.md").is_none());
    assert!(query_request("anything", &ws, "missing.csv").is_none());
}

#[test]
fn an_operation_over_the_field_a_condition_fixes_is_sent_back() {
    let q = json!({"op": "distinct", "field": "page", "where": [{"field": "page", "cmp": "eq", "value": "/pricing"}]});
    assert_eq!(fixed_field(&q), Some(vec!["page".to_string()]));
    // A count reads no value; another field, or a field compared otherwise, says something.
    let count = json!({"op": "count", "field": "page", "where": [{"field": "page", "cmp": "eq", "value": "/pricing"}]});
    assert_eq!(fixed_field(&count), None);
    let other = json!({"op": "distinct", "field": "user", "where": [{"field": "page", "cmp": "eq", "value": "/pricing"}]});
    assert_eq!(fixed_field(&other), None);
    let ne = json!({"op": "distinct", "field": "page", "where": [{"field": "page", "cmp": "ne", "value": "/pricing"}]});
    assert_eq!(fixed_field(&ne), None);
}

#[test]
fn only_the_first_table_call_on_a_table_file_is_rewritten() {
    let args = json!({"path": "./tickets.csv", "op": "count"});
    assert_eq!(
        rewrites(TABLE, &args, &[]),
        Some("./tickets.csv".to_string())
    );
    assert_eq!(rewrites("read_file", &args, &[]), None);
    assert_eq!(
        rewrites(TABLE, &json!({"path": "notes.md", "op": "count"}), &[]),
        None
    );
    assert_eq!(rewrites(TABLE, &json!({"op": "count"}), &[]), None);
    let earlier = step(
        1,
        TABLE,
        json!({"path": "tickets.csv", "op": "count"}),
        "4 records",
    );
    assert_eq!(rewrites(TABLE, &args, std::slice::from_ref(&earlier)), None);
    let other_file = json!({"path": "other.csv", "op": "count"});
    assert!(rewrites(TABLE, &other_file, &[earlier]).is_some());
}

#[test]
fn the_query_is_the_models_and_a_degenerate_one_is_asked_again_with_its_conditions_kept() {
    let (_t, ws) = ws_with(&[("tickets.csv", TICKETS)]);
    let task = "how many different titles do the open tickets have?";
    let mut lm = Scripted::new(&[
        r#"{"op": "distinct", "field": "status", "where": [{"field": "status", "cmp": "eq", "value": "open"}]}"#,
        r#"{"op": "distinct", "field": "title", "where": [{"field": "status", "cmp": "eq", "value": "open"}]}"#,
    ]);
    let (args, _) = write_query(
        &mut lm,
        &SamplingParams::default(),
        task,
        &ws,
        "tickets.csv",
        &CancelToken::new(),
    )
    .expect("no error")
    .expect("a query");
    assert_eq!(
        args,
        json!({"path": "tickets.csv", "op": "distinct", "field": "title", "where": [{"field": "status", "cmp": "eq", "value": "open"}]})
    );
    assert_eq!(lm.requests.len(), 2);
    let again = schema_of(&lm.requests[1]);
    assert_eq!(
        again["properties"]["where"]["const"],
        json!([{"field": "status", "cmp": "eq", "value": "open"}])
    );
    let fields = again["properties"]["field"]["enum"]
        .as_array()
        .expect("enum");
    assert!(!fields.contains(&json!("status")) && fields.contains(&json!("title")));
    // A reply that is no query leaves the planner's own.
    let mut lm = Scripted::new(&["not json"]);
    let none = write_query(
        &mut lm,
        &SamplingParams::default(),
        task,
        &ws,
        "tickets.csv",
        &CancelToken::new(),
    )
    .expect("no error");
    assert!(none.is_none());
}

#[test]
fn the_answer_step_leaves_out_a_read_of_a_file_a_later_query_answered() {
    let read = step(
        1,
        "read_file",
        json!({"path": "tickets.csv"}),
        "tickets.csv (5 lines):\n1: id,title",
    );
    let notes = step(2, "read_file", json!({"path": "notes.md"}), "1: # notes");
    let query = step(
        3,
        TABLE,
        json!({"path": "./tickets.csv", "op": "count"}),
        "tickets.csv: 4 records.\ncount: 4",
    );
    let shown = crate::agent::answer::shown_steps(&[read.clone(), notes.clone(), query.clone()]);
    assert_eq!(
        shown.iter().map(|s| s.index).collect::<Vec<_>>(),
        vec![2, 3]
    );
    // A query no record met answered nothing: the read stays.
    let mut unmet = query;
    unmet.observation.text = format!("tickets.csv: 0 of 4 records match. {}", table::NO_MATCH);
    let shown = crate::agent::answer::shown_steps(&[read, notes, unmet]);
    assert_eq!(shown.len(), 3);
}
