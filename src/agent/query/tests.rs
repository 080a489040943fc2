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
        Some(Rewrite::Table("./tickets.csv".to_string()))
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

/// The kinds a calculation schema offers, in order.
fn kinds_of(schema: &Value) -> Vec<String> {
    schema["anyOf"]
        .as_array()
        .expect("anyOf")
        .iter()
        .map(|k| {
            k["properties"]["kind"]["const"]
                .as_str()
                .expect("kind")
                .to_string()
        })
        .collect()
}

#[test]
fn a_calculation_offers_the_kinds_its_text_reads_and_only_the_dates_and_numbers_it_states() {
    let plain = calculation::calculation_request("What is 12% of 3,960?", "", false, &[]);
    assert_eq!(kinds_of(&plain.schema), ["arithmetic"]);
    // Written and ISO dates both count; a span needs two of them.
    let one_date =
        calculation::calculation_request("what weekday is 17 October 2026?", "", false, &[]);
    assert_eq!(
        kinds_of(&one_date.schema),
        ["arithmetic", "date_plus_days", "weekday"]
    );
    let weekday = &one_date.schema["anyOf"][2]["properties"]["date"]["enum"];
    assert_eq!(weekday, &json!(["2026-10-17"]));
    let context = "release.toml (2 lines):\n1: code_freeze = 2026-09-14\n2: release = 2026-10-01";
    let two = calculation::calculation_request("How many days until release?", context, false, &[]);
    assert_eq!(
        kinds_of(&two.schema),
        ["arithmetic", "days_between", "date_plus_days", "weekday"]
    );
    assert!(two.messages[1].content.contains("code_freeze = 2026-09-14"));
    // An amount with a unit offers a conversion, first, of a number the text states.
    let convert = calculation::calculation_request("how many GB is 48 GiB?", "", false, &[]);
    assert_eq!(kinds_of(&convert.schema), ["convert", "arithmetic"]);
    assert_eq!(
        convert.schema["anyOf"][0]["properties"]["amount"]["enum"],
        json!([48])
    );
    // Before an answer, no calculation is a choice, offered first; a kind may be left out.
    let optional = calculation::calculation_request(
        "How many days until release?",
        context,
        true,
        &["days_between"],
    );
    assert_eq!(
        kinds_of(&optional.schema),
        ["none", "arithmetic", "date_plus_days", "weekday"]
    );
    assert!(optional.messages[0].content.contains("- none:"));
    assert!(!optional.messages[0].content.contains("days_between"));
}

#[test]
fn each_kind_of_calculation_is_a_calculator_expression_it_evaluates() {
    use crate::agent::tools::calculator::output;
    let cases = [
        (
            json!({"kind": "convert", "amount": 48, "unit": "GiB", "to": "GB"}),
            "48 GiB in GB",
            "51.539608 GB",
        ),
        (
            json!({"kind": "days_between", "start": "2027-11-20", "end": "2028-03-05"}),
            "2028-03-05 - 2027-11-20",
            "106 days",
        ),
        (
            json!({"kind": "date_plus_days", "date": "2026-10-17", "days": 45}),
            "2026-10-17 + 45 days",
            "2026-12-01 (Tuesday)",
        ),
        (
            json!({"kind": "weekday", "date": "2028-02-29"}),
            "weekday(2028-02-29)",
            "Tuesday",
        ),
        (
            json!({"kind": "arithmetic", "expression": "1284 * 6 * 13"}),
            "1284 * 6 * 13",
            "100152",
        ),
    ];
    for (reply, expr, shown) in cases {
        assert_eq!(calculation::expression(&reply).as_deref(), Some(expr));
        let out = output(expr).expect("evaluates");
        assert!(out.contains(shown), "{expr} gave {out}");
    }
    assert_eq!(calculation::expression(&json!({"kind": "none"})), None);
    assert_eq!(
        calculation::expression(&json!({"kind": "convert", "amount": 3})),
        None
    );
}

fn calculated(lm: &mut Scripted, task: &str, context: &str, optional: bool) -> Option<Value> {
    calculation::write_calculation(
        lm,
        &SamplingParams::default(),
        task,
        context,
        optional,
        &CancelToken::new(),
    )
    .expect("no error")
    .map(|(args, _)| args)
}

#[test]
fn the_calculation_is_the_models_and_a_span_from_a_date_to_itself_is_asked_again() {
    let context = "lease.yaml (2 lines):\n1: start_date: 2026-02-01\n2: end_date: 2027-07-31";
    let task = "what weekday does the lease end on?";
    let mut lm = Scripted::new(&[
        r#"{"kind": "days_between", "start": "2027-07-31", "end": "2027-07-31"}"#,
        r#"{"kind": "weekday", "date": "2027-07-31"}"#,
    ]);
    let args = calculated(&mut lm, task, context, false);
    assert_eq!(args, Some(json!({"expression": "weekday(2027-07-31)"})));
    assert_eq!(lm.requests.len(), 2);
    assert!(!kinds_of(schema_of(&lm.requests[1])).contains(&"days_between".to_string()));
    // No calculation, a reply that is none, and one the calculator cannot evaluate leave the
    // planner's step.
    let mut lm = Scripted::new(&[r#"{"kind": "none"}"#]);
    assert_eq!(calculated(&mut lm, task, context, true), None);
    let mut lm = Scripted::new(&[r#"{"kind": "arithmetic", "expression": "end_date - )"}"#]);
    assert_eq!(calculated(&mut lm, task, context, false), None);
    let mut lm = Scripted::new(&["not json"]);
    assert_eq!(calculated(&mut lm, task, context, false), None);
}

#[test]
fn only_a_first_calculator_call_and_an_answer_after_reads_without_one_ask_for_a_calculation() {
    let args = json!({"expression": "2 + 2"});
    let read = step(
        1,
        "read_file",
        json!({"path": "lease.yaml"}),
        "lease.yaml (1 lines):\n1: end_date: 2027-07-31",
    );
    match rewrites(CALCULATOR, &args, std::slice::from_ref(&read)) {
        Some(Rewrite::Calculation { context, optional }) => {
            assert!(context.contains("end_date: 2027-07-31"));
            assert!(!optional);
        }
        other => panic!("expected a calculation, got {other:?}"),
    }
    let calc = step(2, CALCULATOR, args.clone(), "4");
    let both = [read.clone(), calc];
    assert_eq!(rewrites(CALCULATOR, &args, &both), None);
    // Before the answer: only after a file was read and while no calculation was made.
    assert_eq!(calculation_before_answer(&[]), None);
    let listing = step(1, "list_dir", json!({"path": "."}), "lease.yaml (40 bytes)");
    assert_eq!(calculation_before_answer(&[listing]), None);
    assert!(matches!(
        calculation_before_answer(std::slice::from_ref(&read)),
        Some(Rewrite::Calculation { optional: true, .. })
    ));
    assert_eq!(calculation_before_answer(&both), None);
}

#[test]
fn only_a_first_list_dir_call_is_rewritten_and_a_filtered_listing_answers() {
    let first = rewrites(LIST_DIR_NAME, &json!({"path": "docs/"}), &[]);
    assert_eq!(first, Some(Rewrite::Listing(Some("docs/".to_string()))));
    let listed = [step(
        1,
        LIST_DIR_NAME,
        json!({"path": "."}),
        "total: 1 file",
    )];
    assert_eq!(
        rewrites(LIST_DIR_NAME, &json!({"path": "docs/"}), &listed),
        None
    );
    // What comes next: only the answer after a listing the request filtered, or a
    // calculation; the planner's choice after a plain listing or a table query.
    let listing = Rewrite::Listing(None);
    assert!(listing.answers(&json!({"path": "docs/", "ext": "md"})));
    assert!(listing.answers(&json!({"path": "docs/", "kind": "dirs"})));
    assert!(!listing.answers(&json!({"path": "docs/", "recursive": true})));
    assert!(!Rewrite::Table("a.csv".into()).answers(&json!({})));
    let calc = Rewrite::Calculation {
        context: String::new(),
        optional: false,
    };
    assert!(calc.answers(&json!({"expression": "1 + 1"})));
}

const LIST_DIR_NAME: &str = crate::agent::tools::files::LIST_DIR;
