use super::*;

fn ok(program: &str, allowed: &[f64]) -> String {
    match run(program, allowed) {
        Ok(w) => format_value(w.value),
        Err(e) => format!("ERR {e}"),
    }
}

#[test]
fn a_program_binds_names_and_answers_with_answer() {
    let p = "```python\n# Given values\nflour_g = 375  # grams\npeople = 6\nper_person = flour_g / people\nanswer = per_person * 22\nprint(answer)\n```\n1375";
    assert_eq!(ok(p, &[375.0, 6.0, 22.0]), "1375");
}

#[test]
fn the_model_s_own_results_after_an_expression_are_ignored() {
    // "= 23" and "= 173" are the model's arithmetic; the first part that evaluates counts.
    assert_eq!(ok("headcount = 14 + 9 = 23", &[14.0, 9.0]), "23");
    assert_eq!(
        ok("answer = 500 - 372 - 25 = 173", &[500.0, 372.0, 25.0]),
        "103"
    );
    // A bare expression with unknown names on its left.
    assert_eq!(ok("disk - used = 500 - 372 = 100", &[500.0, 372.0]), "128");
    // A printed value the model imagined is not a computation.
    assert_eq!(ok("x = 84 / 42\nprint(x)\n4050", &[84.0, 42.0]), "2");
}

#[test]
fn without_answer_the_last_print_or_binding_is_the_value() {
    assert_eq!(
        ok("a = 640\nb = 16\nt = a / b\nprint(t)", &[640.0, 16.0]),
        "40"
    );
    assert_eq!(ok("a = 640\nb = 16\nt = a / b", &[640.0, 16.0]), "40");
    assert_eq!(ok("area = 12.5 * 8 = 100 m²", &[12.5, 8.0]), "100");
}

#[test]
fn a_number_from_nowhere_refuses_the_program() {
    assert_eq!(
        run("answer = 4050", &[375.0, 6.0]),
        Err(ProgramError::UnknownNumber {
            line: 1,
            number: "4050".into()
        })
    );
    // Unit constants and percentages written as fractions are allowed.
    assert_eq!(ok("answer = 2.4 * 1000 / 48", &[2.4, 48.0]), "50");
    assert_eq!(ok("answer = 3960 * 0.175", &[17.5, 3960.0]), "693");
    assert_eq!(
        run("x = 13\nprint('hi')", &[13.0]).map(|w| w.value),
        Ok(Number::Int(13))
    );
    assert_eq!(run("# nothing\n", &[]), Err(ProgramError::NothingGiven));
    // Constants alone compute nothing the task gave ("3 regions of 10 servers" when no
    // file was read).
    assert_eq!(
        run("regions = 3\nanswer = regions * 10", &[]),
        Err(ProgramError::NothingGiven)
    );
}

#[test]
fn python_habits_are_read() {
    assert_eq!(
        ok("import math\nx = math.ceil(150 / 12)", &[150.0, 12.0]),
        "13"
    );
    assert_eq!(ok("x = 150 // 12", &[150.0, 12.0]), "12");
    assert_eq!(
        ok("total = 5\ntotal += 7\nanswer = total", &[5.0, 7.0]),
        "12"
    );
    assert_eq!(ok("price: float = 40 * (1 - 0.15)", &[40.0, 15.0]), "34");
    assert_eq!(ok("print(\"total:\", 3 * 4)", &[3.0]), "12");
    // Control flow and comparisons are skipped, not misread.
    assert_eq!(
        ok("x = 8000 / 24\nif x == 3:\n    x = 0", &[8000.0, 24.0]),
        "333.3333"
    );
}

#[test]
fn values_are_written_plainly() {
    assert_eq!(format_value(Number::Float(12.5)), "12.5");
    assert_eq!(format_value(Number::Float(0.000680272)), "0.000680272");
    assert_eq!(format_value(Number::Float(333.333333)), "333.3333");
    assert_eq!(format_value(Number::Float(3.0)), "3");
    assert_eq!(format_value(Number::Int(100152)), "100152");
}

#[test]
fn the_record_the_task_names_is_the_one_shown() {
    let g = |p: &str, lines: &[&str]| {
        (
            Some(p.to_string()),
            lines
                .iter()
                .map(|l| format!("{p}: {l}"))
                .collect::<Vec<_>>(),
        )
    };
    let groups = vec![
        g(
            "web.yaml",
            &["service: web", "replicas: 4", "memory_mb: 512"],
        ),
        g(
            "ingest.yaml",
            &["service: ingest", "replicas: 6", "memory_mb: 1536"],
        ),
        g("README.md", &["Descriptors live here."]),
    ];
    let task = "How much memory do the ingest service's replicas need together?";
    let kept: Vec<String> = focus(task, groups.clone())
        .into_iter()
        .filter_map(|g| g.0)
        .collect();
    assert_eq!(kept, vec!["ingest.yaml", "README.md"]);
    // No word names one record: all are kept.
    assert_eq!(
        focus("What is the combined headcount?", groups.clone()).len(),
        3
    );
    // Files that are not parallel records are all kept.
    let join = vec![
        g("prices.csv", &["item=widget, unit_price=4.50"]),
        g("order.txt", &["- 5 x widget"]),
    ];
    assert_eq!(focus("the total cost of the order?", join).len(), 2);
}

#[test]
fn short_outputs_are_facts_whole_and_line_numbers_are_dropped() {
    use crate::agent::types::Observation;
    use serde_json::json;
    let step = Step {
        index: 1,
        thought: String::new(),
        action: Some(Action::tool("read_file", json!({"path": "team_a.txt"}))),
        raw: String::new(),
        observation: Observation::new(
            ObservationKind::Output,
            "team_a.txt (2 lines):\n1: team: platform\n2: headcount: 14".to_string(),
        ),
        fingerprint: None,
        timings: Default::default(),
        usage: Default::default(),
    };
    let f = facts("What is the combined headcount?", &[step]);
    assert_eq!(
        f,
        vec!["team_a.txt: team: platform", "team_a.txt: headcount: 14"]
    );
    assert!(!allowed_numbers("combined?", &f).contains(&2.0));
}

#[test]
fn values_the_facts_state_are_bound_to_names_the_program_can_use() {
    let facts = [
        "quotas.yaml: tenants.orchid.storage_gb: 500".to_string(),
        "usage.csv: tenant=orchid, month=2026-02, storage_gb=347.9".to_string(),
        "reservations.json: month: 2026-04".to_string(),
        "web/.env: WEB_CONCURRENCY: 17".to_string(),
        "vendors/ci.txt: setup_fee_usd: 500 (one-off, paid 2025-11)".to_string(),
    ];
    let b = bindings(&facts);
    let names: Vec<(&str, f64)> = b.iter().map(|b| (b.name.as_str(), b.value)).collect();
    assert_eq!(
        names,
        [
            ("quotas_orchid_storage_gb", 500.0),
            ("usage_orchid_storage_gb", 347.9),
            ("web_concurrency", 17.0),
            ("ci_setup_fee_usd", 500.0),
        ]
    );
    let allowed = allowed_numbers("How much is left?", &facts);
    let worked = run_with(
        "answer = quotas_orchid_storage_gb - usage_orchid_storage_gb",
        &allowed,
        &b,
    )
    .expect("a worked value");
    assert!((worked.value.as_f64() - 152.1).abs() < 1e-9);
    // A program that uses none of them, nor any stated number, is still refused.
    assert_eq!(
        run_with("answer = 60 * 24", &allowed, &b),
        Err(ProgramError::NothingGiven)
    );
    let msgs = program_messages("How much is left?", &facts);
    assert!(msgs[1]
        .content
        .contains("quotas_orchid_storage_gb = 500  # quotas.yaml"));
    assert!(msgs[1]
        .content
        .contains("Other facts:\nreservations.json: month: 2026-04"));
}

#[test]
fn only_values_the_question_names_are_defined_for_the_program() {
    let facts = [
        "web/.env: PORT: 3000".to_string(),
        "web/.env: WEB_CONCURRENCY: 17".to_string(),
        "web/.env: WEB_THREADS: 6".to_string(),
        "worker/worker.ini: consumers.concurrency: 24".to_string(),
        "worker/worker.ini: consumers.prefetch: 10".to_string(),
        "r.json: reservations: type=gpu-large, count=3".to_string(),
    ];
    let task = "Every web process and every consumer holds one connection (their concurrency). How many connections altogether?";
    let user = program_messages(task, &facts)[1].content.clone();
    assert!(user.contains("web_concurrency = 17"), "{user}");
    assert!(user.contains("worker_consumers_concurrency = 24"), "{user}");
    assert!(user.contains("r_gpu_large_count = 3"), "{user}");
    for hidden in ["3000", "WEB_THREADS", "prefetch"] {
        assert!(!user.contains(hidden), "{hidden} in {user}");
    }
}
