use super::*;
use crate::agent::tools::choices::named_paths;
use crate::agent::tools::choices::named_paths_in;
use crate::agent::types::{Observation, StepTimings, ToolErrorKind};
use crate::lm::Usage;
use serde_json::json;

fn done(index: usize, tool: &str, args: Value, kind: ObservationKind) -> Step {
    Step {
        index,
        thought: String::new(),
        action: Some(Action::tool(tool, args)),
        raw: String::new(),
        observation: Observation::new(kind, "x".to_string()),
        fingerprint: None,
        timings: StepTimings::default(),
        usage: Usage::default(),
    }
}

fn enum_of(tools: &Toolset, tool: &str, prop: &str) -> Vec<String> {
    enum_values(&tools.get(tool).expect("tool").args_schema()["properties"][prop]).expect("an enum")
}

#[test]
fn values_the_task_names_narrow_the_enum_and_spent_ones_drop_out() {
    let tools = Toolset::builtin(None);
    let task = "How many times more bandwidth does the H200 have than the RTX 4090?";
    let n = narrow(&tools, task, &[], &[]);
    let mut presets = enum_of(&n, "hardware", "preset");
    presets.sort();
    assert_eq!(presets, vec!["h200", "rtx-4090"]);
    let steps = vec![done(
        1,
        "hardware",
        json!({"preset": "h200"}),
        ObservationKind::Output,
    )];
    let n = narrow(&tools, task, &[], &steps);
    assert_eq!(enum_of(&n, "hardware", "preset"), vec!["rtx-4090"]);
    let steps = vec![
        steps[0].clone(),
        done(
            2,
            "hardware",
            json!({"preset": "rtx-4090"}),
            ObservationKind::Output,
        ),
    ];
    let n = narrow(&tools, task, &[], &steps);
    assert!(n.get("hardware").is_none(), "nothing left to describe");
    assert!(n.get("calculator").is_some());
    // Rule 6: the task names no model, so size_model is not offered.
    assert!(n.get("size_model").is_none());
    // size_model has several required arguments: rule 3 does not apply to it. A model
    // written as people write it ("Llama-3-70B") names the catalog's llama-3.1-70b.
    let task = "How fast would Llama-3-70B decode on the H200 and on the RTX 4090?";
    let n = narrow(&tools, task, &[], &steps);
    let mut hw = enum_of(&n, "size_model", "hw");
    hw.sort();
    assert_eq!(hw, vec!["h200", "rtx-4090"]);
    assert_eq!(enum_of(&n, "size_model", "model"), vec!["llama-3.1-70b"]);
    // A named value of an optional argument makes it required.
    let tools = Toolset::builtin(None).with(crate::agent::tools::SizeModel::extended());
    let n = narrow(
        &tools,
        "Does mistral-7b at Q8_0 fit on an m1-pro?",
        &[],
        &[],
    );
    let schema = n.get("size_model").expect("size_model").args_schema();
    assert_eq!(enum_of(&n, "size_model", "quant"), vec!["Q8_0"]);
    let required: Vec<&str> = schema["required"]
        .as_array()
        .expect("required")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(required.contains(&"quant"), "{required:?}");
    // Rule 4: a modifier the task does not name is not offered.
    let n = narrow(&tools, "Does mistral-7b fit on an m1-pro?", &[], &[]);
    let schema = n.get("size_model").expect("size_model").args_schema();
    assert!(schema["properties"].get("quant").is_none(), "{schema}");
    assert!(schema["properties"].get("kv_type").is_none(), "{schema}");
    assert!(schema["properties"].get("hw").is_some(), "{schema}");
    // A short value is named by a word of its own, not by letters across two words: "of
    // 32,768" does not name the f32 KV type; "Q8_0" and "h200" still name themselves.
    let n = narrow(
        &tools,
        "How many GB does qwen2.5-7b at Q4_K_M need with a context of 32,768 tokens on an h200?",
        &[],
        &[],
    );
    let schema = n.get("size_model").expect("size_model").args_schema();
    assert!(schema["properties"].get("kv_type").is_none(), "{schema}");
    assert_eq!(enum_of(&n, "size_model", "hw"), vec!["h200"]);
    assert_eq!(enum_of(&n, "size_model", "quant"), vec!["Q4_K_M"]);
    let n = narrow(
        &tools,
        "Does mistral-7b fit on an m1-pro with an f16 KV cache?",
        &[],
        &[],
    );
    assert_eq!(enum_of(&n, "size_model", "kv_type"), vec!["f16"]);
    // "Q8_0" alone is the weights' quantization, not the cache's type.
    let n = narrow(
        &tools,
        "Will mistral-7b quantized to Q8_0 run on the m1-pro?",
        &[],
        &[],
    );
    let schema = n.get("size_model").expect("size_model").args_schema();
    assert!(schema["properties"].get("kv_type").is_none(), "{schema}");
    assert_eq!(enum_of(&n, "size_model", "quant"), vec!["Q8_0"]);
    let n = narrow(
        &tools,
        "mistral-7b at Q8_0 with a q8_0 KV cache on the m1-pro?",
        &[],
        &[],
    );
    assert_eq!(enum_of(&n, "size_model", "kv_type"), vec!["q8_0"]);
}

#[test]
fn a_file_without_an_extension_is_named_when_the_workspace_has_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir_all(dir.path().join("network")).expect("mkdir");
    std::fs::create_dir_all(dir.path().join("fleet/racks")).expect("mkdir");
    std::fs::write(dir.path().join("network/hosts"), "10.0.0.1 web-1\n").expect("write");
    std::fs::write(dir.path().join("fleet/hosts.json"), "[]").expect("write");
    let task = "Which host in fleet/hosts.json has the fullest disk? Give its IP address from network/hosts.";
    assert_eq!(named_paths(task), vec!["fleet/hosts.json"]);
    assert_eq!(
        named_paths_in(task, Some(dir.path())),
        vec!["fleet/hosts.json", "network/hosts"]
    );
    // A folder, or a path that is not there, is not a file the task names.
    let task = "Count the files in fleet/racks and read network/routes.";
    assert!(named_paths_in(task, Some(dir.path())).is_empty());
    assert_eq!(named_paths_in(task, None), named_paths(task));
}

#[test]
fn a_stated_context_is_the_only_ctx_and_none_stated_leaves_the_default() {
    let tools = Toolset::builtin(None);
    let ctx_of = |task: &str| {
        let n = narrow(&tools, task, &[], &[]);
        n.get("size_model").expect("size_model").args_schema()
    };
    let schema = ctx_of("With a 4k context, how fast would mistral-7b decode on an rtx-3090?");
    assert_eq!(schema["properties"][CTX]["enum"], json!([4096]), "{schema}");
    assert!(
        schema["required"]
            .as_array()
            .expect("required")
            .contains(&json!(CTX)),
        "{schema}"
    );
    let schema = ctx_of("Can llama-3.1-70b run with 65,536 tokens of context on an h100-sxm?");
    assert_eq!(
        schema["properties"][CTX]["enum"],
        json!([65536]),
        "{schema}"
    );
    // No context stated: the tool's default, not a number the model makes up.
    let schema = ctx_of("What is the largest context llama-3.1-8b can use on an rtx-4090?");
    assert!(schema["properties"].get(CTX).is_none(), "{schema}");
}

#[test]
fn a_named_model_is_sized_first_and_named_hardware_described_first() {
    let tools = Toolset::builtin(None);
    let names = |t: &Toolset| t.iter().map(|t| t.name().to_string()).collect::<Vec<_>>();
    // Rule 11: only size_model until it has answered, then the rest comes back.
    let task = "Roughly how many tokens per second would llama-3.1-8b at Q4_K_M decode on an rtx-3090 with an 8192-token context?";
    assert_eq!(names(&narrow(&tools, task, &[], &[])), vec!["size_model"]);
    let sized = vec![done(
        1,
        "size_model",
        json!({"model": "llama-3.1-8b", "hw": "rtx-3090"}),
        ObservationKind::Output,
    )];
    // Sized: only the answer (the model sized it again and described the GPU instead).
    let after = narrow(&tools, task, &[], &sized);
    assert_eq!(names(&after), vec![FINAL_ANSWER]);
    // Two presets: each is sized, the other one next, then the answer and the calculator.
    let two = "How fast would llama-3.1-8b decode on an rtx-3090 and on an h200?";
    assert_eq!(
        enum_of(&narrow(&tools, two, &[], &sized), "size_model", "hw"),
        vec!["h200"]
    );
    let both = vec![
        sized[0].clone(),
        done(
            2,
            "size_model",
            json!({"model": "llama-3.1-8b", "hw": "h200"}),
            ObservationKind::Output,
        ),
    ];
    let after = narrow(&tools, two, &[], &both);
    assert!(after.get("calculator").is_some() && after.get(FINAL_ANSWER).is_some());
    assert!(after.get("size_model").is_none());
    // Two models: the one not sized yet.
    let pair = "Which decodes faster on an rtx-3090, llama-3.1-8b or qwen2.5-7b?";
    assert_eq!(
        enum_of(&narrow(&tools, pair, &[], &sized), "size_model", "model"),
        vec!["qwen2.5-7b"]
    );
    // A failed call has not answered.
    let failed = vec![done(
        1,
        "size_model",
        json!({"model": "llama-3.1-8b", "hw": "rtx-3090"}),
        ObservationKind::ToolError {
            kind: crate::agent::tools::ToolErrorKind::InvalidArgs,
        },
    )];
    assert_eq!(
        names(&narrow(&tools, task, &[], &failed)),
        vec!["size_model"]
    );
    // Rule 12: a comparison of two presets describes both before anything else.
    let task = "Which has more memory bandwidth, the H200 or the M2 Ultra?";
    let n = narrow(&tools, task, &[], &[]);
    assert_eq!(names(&n), vec!["hardware"]);
    let one = vec![done(
        1,
        "hardware",
        json!({"preset": "h200"}),
        ObservationKind::Output,
    )];
    let n = narrow(&tools, task, &[], &one);
    assert_eq!(names(&n), vec!["hardware"]);
    assert_eq!(enum_of(&n, "hardware", "preset"), vec!["m2-ultra"]);
    let both = vec![
        one[0].clone(),
        done(
            2,
            "hardware",
            json!({"preset": "m2-ultra"}),
            ObservationKind::Output,
        ),
    ];
    assert!(narrow(&tools, task, &[], &both).get(FINAL_ANSWER).is_some());
    // "this" alone names no hardware: a task about neither hardware nor this machine is
    // not offered the hardware tool; one about this machine is offered it for this one.
    let n = narrow(&tools, "What is 17 * 23 on this calculator?", &[], &[]);
    assert!(n.get("calculator").is_some() && n.get("hardware").is_none());
    let n = narrow(&tools, "How many cores does this machine have?", &[], &[]);
    assert_eq!(enum_of(&n, "hardware", "preset"), vec!["this"]);
}

#[test]
fn once_every_quantity_is_used_only_the_answer_is_offered() {
    let tools = Toolset::builtin(None);
    let task = "A warehouse ships 1,284 crates a day, 6 days a week. How many in 13 weeks?";
    let calc = |e: &str, kind| done(1, "calculator", json!({ "expression": e }), kind);
    // Part of the quantities: the calculator is still offered.
    let part = vec![calc("1284 * 6", ObservationKind::Output)];
    assert!(!arithmetic_done(task, &part));
    assert!(narrow(&tools, task, &[], &part).get("calculator").is_some());
    // All of them, over two calls: only the answer is left.
    let all = vec![
        calc("1284 * 6", ObservationKind::Output),
        calc("7704 * 13", ObservationKind::Output),
    ];
    assert!(arithmetic_done(task, &all));
    let n = narrow(&tools, task, &[], &all);
    let names: Vec<&str> = n.iter().map(|t| t.name()).collect();
    assert_eq!(names, vec![FINAL_ANSWER]);
    // A failed call does not count.
    let failed = vec![calc(
        "1284 * 6 * 13",
        ObservationKind::ToolError {
            kind: crate::agent::tools::ToolErrorKind::InvalidArgs,
        },
    )];
    assert!(!arithmetic_done(task, &failed));
    // One quantity is enough once a call has used it (a conversion, a square).
    let one = vec![calc("17 * 17", ObservationKind::Output)];
    assert!(arithmetic_done("What is 17 squared?", &one));
    let other = vec![calc("16 * 16", ObservationKind::Output)];
    assert!(!arithmetic_done("What is 17 squared?", &other));
    assert!(!arithmetic_done("What is a dozen squared?", &one));
    // A count written as a word is a quantity.
    let worded = vec![calc("17 * 3", ObservationKind::Output)];
    assert!(arithmetic_done("What is 17 times three?", &worded));
}

#[test]
fn blob_ids_are_the_blobs_the_run_holds() {
    let tools = Toolset::builtin(None);
    assert!(narrow(&tools, "t", &[], &[]).get("read_blob").is_none());
    let mut s = done(
        1,
        "read_file",
        json!({"path": "a.log"}),
        ObservationKind::Output,
    );
    s.observation.blob = Some("ab".repeat(32));
    let n = narrow(&tools, "t", &[], &[s]);
    assert_eq!(enum_of(&n, "read_blob", "blob"), vec!["ab".repeat(32)]);
}

#[test]
fn hardware_named_by_its_memory_is_the_only_hw_value_and_this_machine_stays_free() {
    let tools = Toolset::builtin(None);
    let n = narrow(
        &tools,
        "Is 20 GB of VRAM enough for llama-3.1-70b?",
        &[],
        &[],
    );
    assert_eq!(enum_of(&n, "size_model", "hw"), vec!["20 GB GPU"]);
    let n = narrow(&tools, "Would llama-3.1-8b run in 6 GB RAM?", &[], &[]);
    assert_eq!(enum_of(&n, "size_model", "hw"), vec!["6 GB RAM"]);
    // About this machine: hw stays free text (the model may pass "this").
    let n = narrow(
        &tools,
        "Does a 2 GB llama-3.2-1b fit on this machine?",
        &[],
        &[],
    );
    let schema = n.get("size_model").expect("size_model").args_schema();
    assert_eq!(schema["properties"]["hw"]["type"], "string", "{schema}");
}

#[test]
fn a_task_that_names_no_value_leaves_the_enum_whole() {
    let tools = Toolset::builtin(None);
    let n = narrow(&tools, "What is 2 + 2?", &[], &[]);
    let schema = |t: &Toolset| t.get("calculator").expect("calculator").args_schema();
    assert_eq!(schema(&n), schema(&tools));
}

#[test]
fn an_identifier_without_a_path_is_searched_for_everywhere_until_found() {
    let dir = tempfile::tempdir().expect("tmp");
    std::fs::create_dir(dir.path().join("src")).expect("mkdir");
    std::fs::write(dir.path().join("src/app.py"), "x = 1").expect("write");
    std::fs::write(dir.path().join("src/defaults.py"), "DEFAULT_REGION = 'eu'").expect("write");
    let task = "Some file in this workspace defines DEFAULT_REGION. What is its value?";
    let tools = constrain_paths(&Toolset::builtin(None), dir.path(), task);
    let n = narrow(&tools, task, &[], &[]);
    assert_eq!(enum_of(&n, "search_text", "path"), vec!["."]);
    // Before any search, the search is the only look offered.
    let names: Vec<&str> = n.iter().map(|t| t.name()).collect();
    assert_eq!(names, ["search_text"]);
    // A quant is a value a tool takes, not an identifier to search for.
    let quant = "How much memory does qwen2.5-7b at Q4_K_M need?";
    assert!(!names_identifier(&tools, quant));
    // Found: every path is open again.
    let steps = vec![done(
        1,
        "search_text",
        json!({"query": "DEFAULT_REGION", "path": "."}),
        ObservationKind::Output,
    )];
    let n = narrow(&tools, task, &[], &steps);
    assert!(enum_of(&n, "search_text", "path").len() > 1);
    // No identifier: no narrowing.
    let n = narrow(&tools, "Which file sets the region?", &[], &[]);
    assert!(enum_of(&n, "search_text", "path").len() > 1);
}

#[test]
fn a_record_file_the_task_names_is_asked_through_the_table_tool_once_read() {
    let dir = tempfile::tempdir().expect("tmp");
    std::fs::write(
        dir.path().join("sales.csv"),
        "region,units\nnorth,3\nsouth,4\n",
    )
    .expect("write");
    std::fs::write(dir.path().join("notes.md"), "# notes").expect("write");
    let task = "what are the north units in total? sales.csv";
    let tools = constrain_paths(&Toolset::builtin(None), dir.path(), task);
    let named = named_paths(task);
    // Not read yet: rule 2 offers the file tools on it.
    assert!(narrow(&tools, task, &named, &[]).get("read_file").is_some());
    let read = done(
        1,
        "read_file",
        json!({"path": "sales.csv"}),
        ObservationKind::Output,
    );
    let n = narrow(&tools, task, &named, std::slice::from_ref(&read));
    assert_eq!(n.iter().map(|t| t.name()).collect::<Vec<_>>(), vec![TABLE]);
    assert_eq!(enum_of(&n, TABLE, "path"), vec!["sales.csv"]);
    // Once a table call has answered, only the answer is left (rule 16).
    let asked = done(
        2,
        TABLE,
        json!({"path": "sales.csv", "op": "total", "field": "units"}),
        ObservationKind::Output,
    );
    let n = narrow(&tools, task, &named, &[read.clone(), asked.clone()]);
    assert_eq!(n.names(), vec![FINAL_ANSWER]);
    // A query no record met has not answered: the other tools are back.
    let mut unmet = asked;
    unmet.observation.text = format!(
        "sales.csv: 0 of 2 records match. {}",
        crate::agent::tools::table::NO_MATCH
    );
    let n = narrow(&tools, task, &named, &[read.clone(), unmet]);
    assert!(n.get(FINAL_ANSWER).is_some() && n.get("calculator").is_some());
    // A JSON file is a file of records when its read shows a list; a JSON object is not.
    std::fs::write(
        dir.path().join("runs.json"),
        "[\n  {\"run\": \"a\", \"rps\": 3}\n]\n",
    )
    .expect("write");
    std::fs::write(dir.path().join("conf.json"), "{\"db\": {\"pool\": 4}}\n").expect("write");
    for (file, text, records) in [
        (
            "runs.json",
            "runs.json (3 lines):\n1: [\n2:   {\"run\": \"a\", \"rps\": 3}\n3: ]",
            true,
        ),
        (
            "conf.json",
            "conf.json (1 lines):\n1: {\"db\": {\"pool\": 4}}",
            false,
        ),
    ] {
        let task = format!("which run in {file} has the most rps?");
        let tools = constrain_paths(&Toolset::builtin(None), dir.path(), &task);
        let mut read = done(
            1,
            "read_file",
            json!({"path": file}),
            ObservationKind::Output,
        );
        read.observation.text = text.to_string();
        let n = narrow(&tools, &task, &named_paths(&task), &[read]);
        assert_eq!(n.names() == vec![TABLE], records, "{file}: {:?}", n.names());
    }
    // A document (a config file) is not a file of records: no such step.
    std::fs::write(dir.path().join("app.toml"), "[db]\npool = 4\n").expect("write");
    let task = "what is the db pool in app.toml?";
    let tools = constrain_paths(&Toolset::builtin(None), dir.path(), task);
    let read = done(
        1,
        "read_file",
        json!({"path": "app.toml"}),
        ObservationKind::Output,
    );
    let n = narrow(&tools, task, &named_paths(task), &[read]);
    assert!(n.get(FINAL_ANSWER).is_some());
}

#[test]
fn named_paths_come_first_then_a_read_file_is_not_read_again() {
    let dir = tempfile::tempdir().expect("tmp");
    std::fs::write(dir.path().join("config.toml"), "a = 1").expect("write");
    std::fs::write(dir.path().join("notes.txt"), "b").expect("write");
    let task = "What API key is stored in secrets.toml?";
    let tools = constrain_paths(&Toolset::builtin(None), dir.path(), task);
    let named = vec!["secrets.toml".to_string()];
    let n = narrow(&tools, task, &named, &[]);
    assert_eq!(enum_of(&n, "read_file", "path"), vec!["secrets.toml"]);
    assert!(n.get("list_dir").is_none(), "no folder is named");
    assert!(
        n.get(FINAL_ANSWER).is_none(),
        "no answer before the named file is read"
    );
    assert!(
        n.get("calculator").is_none(),
        "no calculation before the named file is read"
    );
    let missing = ObservationKind::ToolError {
        kind: crate::agent::tools::ToolErrorKind::NotFound,
    };
    let steps = vec![done(
        1,
        "read_file",
        json!({"path": "secrets.toml"}),
        missing,
    )];
    let n = narrow(&tools, task, &named, &steps);
    assert_eq!(
        enum_of(&n, "read_file", "path"),
        vec!["config.toml", "notes.txt", "secrets.toml"],
        "touched: every path is open again, and a failed read may be retried"
    );
    assert!(
        n.get(FINAL_ANSWER).is_some(),
        "touched: the answer is offered"
    );
    let steps = vec![done(
        1,
        "read_file",
        json!({"path": "config.toml"}),
        ObservationKind::Output,
    )];
    let n = narrow(
        &tools,
        "What is in config.toml?",
        &["config.toml".into()],
        &steps,
    );
    assert_eq!(
        enum_of(&n, "read_file", "path"),
        vec!["notes.txt", "secrets.toml"]
    );
}

#[test]
fn a_field_the_table_tool_refused_by_name_is_not_offered_again() {
    let dir = tempfile::tempdir().expect("tmp");
    std::fs::write(
        dir.path().join("orders.csv"),
        "order_id,amount,status\n1,10.5,paid\n2,3,refunded\n",
    )
    .expect("write");
    let task = "Add up the amounts in orders.csv for the orders whose status is paid.";
    let tools = constrain_paths(&Toolset::builtin(None), dir.path(), task);
    let named = named_paths(task);
    let read = done(
        1,
        "read_file",
        json!({"path": "orders.csv"}),
        ObservationKind::Output,
    );
    let n = narrow(&tools, task, &named, std::slice::from_ref(&read));
    let mut fields = enum_of(&n, TABLE, "field");
    fields.sort();
    assert_eq!(fields, ["amount", "status"]);
    let mut refused = done(
        2,
        TABLE,
        json!({"path": "orders.csv", "field": "status", "op": "total"}),
        ObservationKind::ToolError {
            kind: ToolErrorKind::InvalidArgs,
        },
    );
    refused.observation.text =
        "no value of status is a number (values: paid); sum needs a numeric field.".into();
    let steps = [read.clone(), refused.clone()];
    assert_eq!(
        enum_of(&narrow(&tools, task, &named, &steps), TABLE, "field"),
        ["amount"]
    );
    // An error that does not name the value (or names a longer word) leaves it offered.
    refused.observation.text = "no value of status_code is a number".into();
    let steps = [read, refused];
    assert_eq!(
        enum_of(&narrow(&tools, task, &named, &steps), TABLE, "field").len(),
        2
    );
}
