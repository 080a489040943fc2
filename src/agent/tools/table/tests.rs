use serde_json::json;

use super::*;
use crate::agent::tools::ToolErrorKind;

fn ws_with(files: &[(&str, &str)]) -> (tempfile::TempDir, ToolContext) {
    let t = tempfile::tempdir().expect("tmp");
    for (name, body) in files {
        let p = t.path().join(name);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::write(p, body).expect("write");
    }
    let ctx = ToolContext {
        workspace: Some(Sandbox::new(t.path()).expect("sandbox")),
        blob_dir: t.path().join("blobs"),
        cancel: crate::lm::CancelToken::new(),
        task: None,
    };
    (t, ctx)
}

const SALES: &str = "region,rep,amount,closed\n\
east,\"Smith, Ann\",1200,2024-03-02\n\
west,Bob,800,2024-01-15\n\
east,Cy,\"1,500\",2024-02-20\n\
north,Di,n/a,2024-04-01\n";

fn call(ctx: &ToolContext, args: serde_json::Value) -> Result<String, ToolError> {
    Table.call(args, ctx)
}

fn last_line(s: &str) -> &str {
    s.lines().last().unwrap_or_default()
}

#[test]
fn csv_ops_compute_from_quoted_fields() {
    let (_t, ctx) = ws_with(&[("sales.csv", SALES)]);
    let run = |op: &str, field: Option<&str>| {
        let mut a = json!({"path": "sales.csv", "op": op});
        if let Some(f) = field {
            a["field"] = json!(f);
        }
        call(&ctx, a).expect(op)
    };
    assert_eq!(run("count", None), "sales.csv: 4 records.\ncount: 4");
    assert_eq!(
        last_line(&run("sum", Some("amount"))),
        "sum of amount over 3 values: 3500 (1 value is not a number, left out: n/a)"
    );
    assert!(run("mean", Some("amount")).contains("mean of amount over 3 values: 1166.66666667"));
    // The smallest and largest values come with the record that holds them.
    assert!(run("min", Some("amount")).ends_with(
        "min of amount over 3 values: 800 (1 value is not a number, left out: n/a)\nrecord: region=west, rep=Bob, amount=800, closed=2024-01-15"
    ));
    let top = run("argmax", Some("amount"));
    assert!(
        top.contains("argmax of amount over 3 values: 1500"),
        "{top}"
    );
    assert!(
        top.ends_with("record: region=east, rep=Cy, amount=1,500, closed=2024-02-20"),
        "{top}"
    );
    let low = run("argmin", Some("amount"));
    assert!(
        low.ends_with("record: region=west, rep=Bob, amount=800, closed=2024-01-15"),
        "{low}"
    );
    // Text values (ISO dates) compare as text when none is a number.
    assert!(run("max", Some("closed")).contains(": 2024-04-01\nrecord: "));
    assert_eq!(
        last_line(&run("distinct", Some("region"))),
        "3 distinct values of region (with counts): east (2), west (1), north (1)"
    );
    let reps = run("get", Some("rep"));
    assert!(reps.contains("\neast: Smith, Ann\nwest: Bob\n"), "{reps}");
}

#[test]
fn where_filters_records_by_every_comparison() {
    let (_t, ctx) = ws_with(&[("sales.csv", SALES)]);
    let w = |conds: serde_json::Value, op: &str, field: &str| {
        call(
            &ctx,
            json!({"path": "sales.csv", "op": op, "field": field, "where": conds}),
        )
        .expect("runs")
    };
    let east = w(
        json!([{"field": "region", "cmp": "eq", "value": "East"}]),
        "sum",
        "amount",
    );
    assert!(
        east.starts_with("sales.csv: 2 of 4 records match where region eq \"East\".\n"),
        "{east}"
    );
    assert!(
        east.ends_with("sum of amount over 2 values: 2700"),
        "{east}"
    );
    let big = w(
        json!([{"field": "amount", "cmp": "ge", "value": 1200}]),
        "count",
        "rep",
    );
    assert!(
        big.ends_with("count of records with a value of rep: 2"),
        "{big}"
    );
    let cases = [
        ("ne", json!("east"), 2),
        ("lt", json!(1200), 1),
        ("le", json!("1200"), 2),
        ("gt", json!(800), 2),
        ("contains", json!("smith"), 1),
    ];
    for (cmp, value, n) in cases {
        let field = if cmp == "contains" {
            "rep"
        } else if cmp == "ne" {
            "region"
        } else {
            "amount"
        };
        let out = w(
            json!([{"field": field, "cmp": cmp, "value": value}]),
            "count",
            "rep",
        );
        assert!(
            out.contains(&format!(": {n} of 4 records match")),
            "{cmp}: {out}"
        );
    }
    let two = w(
        json!([{"field": "region", "cmp": "eq", "value": "east"}, {"field": "amount", "cmp": "lt", "value": 1300}]),
        "get",
        "rep",
    );
    assert!(
        two.ends_with("rep: Smith, Ann\nthe record: region=east, rep=Smith, Ann, amount=1200, closed=2024-03-02"),
        "{two}"
    );
    // No match: the values the field does take, so the model can correct its value.
    let none = w(
        json!([{"field": "region", "cmp": "eq", "value": "south"}]),
        "sum",
        "amount",
    );
    assert!(none.contains("No record matches"), "{none}");
    assert!(
        none.ends_with("Values of region in the file: east, west, north."),
        "{none}"
    );
}

#[test]
fn unknown_fields_ops_and_files_are_errors_the_model_can_fix() {
    let (_t, ctx) = ws_with(&[
        ("sales.csv", SALES),
        ("notes.txt", "x"),
        ("bad.csv", "a,b\n\"open,1\n"),
    ]);
    let e = call(
        &ctx,
        json!({"path": "sales.csv", "op": "sum", "field": "amout"}),
    )
    .expect_err("field");
    assert_eq!(e.kind, ToolErrorKind::InvalidArgs);
    assert_eq!(
        e.message,
        "sales.csv has no field \"amout\"; its fields are: region, rep, amount, closed."
    );
    // A total of a text field names the fields that hold numbers.
    let e = call(
        &ctx,
        json!({"path": "sales.csv", "op": "total", "field": "region"}),
    )
    .expect_err("text field");
    assert!(
        e.message.ends_with("The fields with numbers are: amount."),
        "{}",
        e.message
    );
    // The schema's op words and the query words are the same operations.
    for (word, op) in [("total", "sum"), ("average", "mean"), ("maximum", "max")] {
        let a = call(
            &ctx,
            json!({"path": "sales.csv", "op": word, "field": "amount"}),
        )
        .expect(word);
        let b = call(
            &ctx,
            json!({"path": "sales.csv", "op": op, "field": "amount"}),
        )
        .expect(op);
        assert_eq!(a, b, "{word}");
    }
    let e = call(&ctx, json!({"path": "sales.csv", "op": "count", "where": [{"field": "zone", "cmp": "eq", "value": "x"}]}))
        .expect_err("where field");
    assert!(e.message.contains("no field \"zone\""), "{}", e.message);
    let e = call(
        &ctx,
        json!({"path": "sales.csv", "op": "median", "field": "amount"}),
    )
    .expect_err("op");
    assert!(
        e.message
            .starts_with("unknown op \"median\"; the ops are: value, count"),
        "{}",
        e.message
    );
    let e = call(&ctx, json!({"path": "sales.csv", "op": "sum"})).expect_err("no field");
    assert!(e.message.contains("op sum needs a field"), "{}", e.message);
    let e = call(
        &ctx,
        json!({"path": "sales.csv", "op": "sum", "field": "rep"}),
    )
    .expect_err("text");
    assert!(
        e.message.contains("no value of rep is a number"),
        "{}",
        e.message
    );
    let e = call(&ctx, json!({"path": "sales.csv", "op": "count", "where": [{"field": "rep", "cmp": "like", "value": "x"}]}))
        .expect_err("cmp");
    assert_eq!(e.kind, ToolErrorKind::InvalidArgs);
    let e = call(&ctx, json!({"path": "notes.txt", "op": "count"})).expect_err("kind");
    assert!(e.message.contains("not a data file"), "{}", e.message);
    let e = call(&ctx, json!({"path": "missing.csv", "op": "count"})).expect_err("missing");
    assert_eq!(e.kind, ToolErrorKind::NotFound);
    let e = call(&ctx, json!({"path": "bad.csv", "op": "count"})).expect_err("bad csv");
    assert!(e.message.contains("never closed"), "{}", e.message);
    let e = call(&ctx, json!({"path": "../sales.csv", "op": "count"})).expect_err("escape");
    assert_eq!(e.kind, ToolErrorKind::PermissionDenied);
    // A field named in another case or with spaces for underscores is the file's own.
    let ok = call(
        &ctx,
        json!({"path": "sales.csv", "op": "max", "field": "AMOUNT"}),
    )
    .expect("case");
    assert!(
        ok.contains(": 1500 (1 value is not a number, left out: n/a)\nrecord: region=east"),
        "{ok}"
    );
}

#[test]
fn documents_are_records_and_nested_keys_are_dotted_paths() {
    let config = r#"{"database": {"pool": {"max_size": 24, "min_size": 2}, "host": "db"},
                     "cache": {"pool": {"max_size": 8}, "host": "redis"}}"#;
    let users = "version: 2\nusers:\n  - name: ann\n    age: 41\n  - name: bob\n    age: 29\n";
    let toml = "[server]\nport = 8080\n[worker]\nport = 9090\nthreads = 4\n";
    let ini = "; comment\n[db]\nuser = app\npool = 16 ; max\n[web]\nport=80\n";
    let env = "# env\nexport DB_POOL_SIZE=32\nAPI_KEY=\"k-1\"\n";
    let jsonl = "{\"id\": 1, \"ms\": 30}\n{\"id\": 2, \"ms\": 70}\n";
    let (_t, ctx) = ws_with(&[
        ("config.json", config),
        ("users.yaml", users),
        ("svc.toml", toml),
        ("app.ini", ini),
        (".env", env),
        ("calls.jsonl", jsonl),
    ]);
    let get = |path: &str, field: &str| {
        call(&ctx, json!({"path": path, "op": "get", "field": field})).expect(field)
    };
    assert_eq!(
        get("config.json", "database.pool.max_size"),
        "config.json: database.pool.max_size = 24"
    );
    let pools = call(
        &ctx,
        json!({"path": "config.json", "op": "max", "field": "pool.max_size"}),
    )
    .expect("max");
    assert!(
        pools.contains("max of pool.max_size over 2 values: 24\nrecord: key=database"),
        "{pools}"
    );
    let cache = call(&ctx, json!({"path": "config.json", "op": "get", "field": "host", "where": [{"field": "key", "cmp": "eq", "value": "cache"}]}))
        .expect("where key");
    assert!(cache.contains("\nhost: redis\n"), "{cache}");
    assert!(
        cache.ends_with("the record: key=cache, pool.max_size=8, host=redis"),
        "{cache}"
    );
    let old = call(
        &ctx,
        json!({"path": "users.yaml", "op": "argmax", "field": "age"}),
    )
    .expect("yaml");
    assert!(old.ends_with("record: name=ann, age=41"), "{old}");
    let ports = call(
        &ctx,
        json!({"path": "svc.toml", "op": "sum", "field": "port"}),
    )
    .expect("toml");
    assert!(
        ports.ends_with("sum of port over 2 values: 17170"),
        "{ports}"
    );
    assert!(get("app.ini", "db.pool").ends_with("db.pool = 16"));
    assert!(get(".env", "DB_POOL_SIZE").ends_with("DB_POOL_SIZE: 32"));
    assert!(get(".env", "api_key").ends_with("API_KEY: k-1"));
    let mean = call(
        &ctx,
        json!({"path": "calls.jsonl", "op": "mean", "field": "ms"}),
    )
    .expect("jsonl");
    assert!(mean.ends_with("mean of ms over 2 values: 50"), "{mean}");
    // The fields a typed schema offers.
    let ws = ctx.workspace().expect("ws");
    assert_eq!(
        fields_with_values(ws, "users.yaml").map(|fs| fs.into_iter().map(|f| f.name).collect()),
        Some(vec!["name".to_string(), "age".to_string()])
    );
    assert_eq!(fields_with_values(ws, "notes.md"), None);
}

#[test]
fn a_condition_names_a_value_first_and_its_field_follows() {
    let dir = tempfile::tempdir().expect("tmp");
    std::fs::write(
        dir.path().join("orders.csv"),
        "order_id,customer,amount,status\n1,\"Haldane, Rosa\",\"1,250.00\",paid\n2,Okafor Ltd,310.50,refunded\n",
    )
    .expect("write");
    let ws = Sandbox::new(dir.path()).expect("ws");
    let fields = fields_with_values(&ws, "orders.csv").expect("fields");
    let status = fields.iter().find(|f| f.name == "status").expect("status");
    assert_eq!(
        status.values.as_deref(),
        Some(&["paid".to_string(), "refunded".to_string()][..])
    );
    let amount = fields.iter().find(|f| f.name == "amount").expect("amount");
    assert!(amount.numeric && amount.values.is_none());
    let s = schema(Some(&["orders.csv".to_string()]), Some(&fields));
    let branches = s["properties"]["where"]["items"]["anyOf"]
        .as_array()
        .expect("one branch per kind of field");
    // `value` is the first property of every branch.
    for b in branches {
        let first = b["properties"]
            .as_object()
            .and_then(|p| p.keys().next().cloned());
        assert_eq!(first.as_deref(), Some("value"), "{b}");
    }
    let paid = branches
        .iter()
        .find(|b| b["properties"]["field"]["const"] == "status")
        .expect("status has its own branch");
    assert_eq!(
        paid["properties"]["value"]["enum"],
        json!(["paid", "refunded"])
    );
    let numbers = branches
        .iter()
        .find(|b| b["properties"]["field"]["enum"] == json!(["order_id", "amount"]))
        .expect("the numeric fields share a branch");
    assert!(numbers["properties"]["value"]["pattern"].is_string());
    // The top level keeps its properties for narrowing.
    assert_eq!(
        s["properties"]["field"]["enum"],
        json!(["order_id", "customer", "amount", "status"])
    );
}
