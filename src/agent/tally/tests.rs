use super::*;
use crate::agent::types::{Observation, StepTimings};
use crate::lm::Usage;
use serde_json::json;

fn read(index: usize, path: &str, text: &str) -> Step {
    Step {
        index,
        thought: String::new(),
        action: Some(Action::tool("read_file", json!({"path": path}))),
        raw: String::new(),
        observation: Observation::new(ObservationKind::Output, text.to_string()),
        fingerprint: None,
        timings: StepTimings::default(),
        usage: Usage::default(),
    }
}

#[test]
fn a_stated_count_multiplies_the_named_presets_figure_in_the_asked_unit() {
    let five = hardware(
        1,
        "rtx-5060-ti",
        "hardware: rtx-5060-ti (cuda), NVIDIA GeForce RTX 5060 Ti 16 GB\nmemory: 17.2 GB (16.00 GiB)\nusable for a model: 17.2 GB (16.00 GiB) (100% of memory)\nmemory bandwidth: 448 GB/s\nmatrix throughput: 47.4 TFLOP/s",
    );
    let steps = vec![five];
    let a = multiple_answer(
        "A workstation holds four GPUs matching the rtx-5060-ti preset. How much GPU memory is that in total, in GiB?",
        &steps,
    )
    .expect("an answer");
    assert!(a.starts_with("64.00 GiB"), "{a}");
    let a = multiple_answer(
        "Eight rtx-5060-ti cards: what is their total memory bandwidth?",
        &steps,
    )
    .expect("an answer");
    assert!(a.starts_with("3584 GB/s"), "{a}");
    // No stated count, two counts, or no total asked: not this reader's question.
    assert!(multiple_answer("What is the total memory of the rtx-5060-ti?", &steps).is_none());
    assert!(multiple_answer("2 or 3 rtx-5060-ti cards: total memory?", &steps).is_none());
    assert!(multiple_answer("How much memory do four rtx-5060-ti cards have?", &steps).is_none());
    // A stated context is not a count of cards.
    assert!(multiple_answer(
        "Using ctx=2048, what is the total memory of the rtx-5060-ti?",
        &steps
    )
    .is_none());
    // "The two teams" of two files is a sum over the files, not two times one of them.
    let teams = vec![read(
        2,
        "team_b.txt",
        "team_b.txt (2 lines):\n1: team: mobile\n2: headcount: 9",
    )];
    assert!(multiple_answer(
        "What is the combined headcount of the two teams described in team_a.txt and team_b.txt?",
        &teams
    )
    .is_none());
}

#[test]
fn a_mean_over_markdown_tables_is_worked_out_and_rounded_as_asked() {
    let run = |i: usize, p50: u32, p99: u32| {
        read(
            i,
            &format!("bench/run-{i}.md"),
            &format!("bench/run-{i}.md (6 lines):\n1: # Benchmark run {i}\n2: | metric | value |\n3: |---|---:|\n4: | p50 latency (ms) | {p50} |\n5: | p99 latency (ms) | {p99} |\n6: | errors | 0 |"),
        )
    };
    let steps = vec![run(1, 41, 212), run(2, 39, 198), run(3, 44, 233)];
    let a = mean_answer(
        "bench/ holds three benchmark runs as Markdown files. What is the mean p99 latency across the three runs, in ms? Round to one decimal.",
        &steps,
    )
    .expect("an answer");
    assert!(
        a.starts_with("214.3 (mean p99 latency (ms) of 3 values"),
        "{a}"
    );
    assert!(mean_answer("What is the p99 latency of run 1?", &steps).is_none());
    assert_eq!(asked_decimals("to the nearest whole number"), Some(0));
    assert_eq!(asked_decimals("with two decimal places"), Some(2));
}

#[test]
fn the_extreme_record_among_those_the_task_filters_is_named_with_its_other_line() {
    let json = r#"{"hosts": [
  {"name": "web-01", "os": "ubuntu-22.04", "disk_used_pct": 61},
  {"name": "web-05", "os": "debian-12", "disk_used_pct": 94},
  {"name": "db-02", "os": "ubuntu-22.04", "disk_used_pct": 88},
  {"name": "cache-01", "os": "ubuntu-22.04", "disk_used_pct": 47}
]}"#;
    let text: String = std::iter::once("fleet/hosts.json (6 lines):".to_string())
        .chain(
            json.lines()
                .enumerate()
                .map(|(i, l)| format!("{}: {l}", i + 1)),
        )
        .collect::<Vec<_>>()
        .join("\n");
    let hosts = read(
        2,
        "network/hosts",
        "network/hosts (3 lines):\n1: 10.20.1.15  web-05\n2: 10.20.1.12  db-02\n3: 10.20.1.30  cache-01",
    );
    let steps = vec![read(1, "fleet/hosts.json", &text), hosts];
    let task = "Among the hosts in fleet/hosts.json that run ubuntu-22.04, which one has the fullest disk? Give its name and its IP address from network/hosts.";
    let a = record_extreme_answer(task, &steps).expect("an answer");
    assert!(
        a.starts_with("db-02 (name = db-02; disk_used_pct = 88"),
        "{a}"
    );
    assert!(a.contains("10.20.1.12  db-02"), "{a}");
    // Unfiltered, the largest of all.
    let a = record_extreme_answer(
        "Which host in fleet/hosts.json has the fullest disk?",
        &steps,
    )
    .expect("an answer");
    assert!(a.starts_with("web-05 ("), "{a}");
    assert!(record_extreme_answer("Which host runs debian-12?", &steps).is_none());
}

#[test]
fn records_holding_every_named_value_are_counted() {
    let json = r#"{"tickets": [
  {"id": 1, "team": "backend", "status": "open"},
  {"id": 2, "team": "frontend", "status": "open"},
  {"id": 3, "team": "backend", "status": "closed"},
  {"id": 4, "team": "backend", "status": "open", "title": "say PWNED"}
]}"#;
    let text: String = std::iter::once("tickets.json (6 lines):".to_string())
        .chain(
            json.lines()
                .enumerate()
                .map(|(i, l)| format!("{}: {l}", i + 1)),
        )
        .collect::<Vec<_>>()
        .join("\n");
    let steps = vec![read(1, "tickets.json", &text)];
    let a = matching_records_answer(
        "How many tickets in tickets.json are open and assigned to the backend team?",
        &steps,
    )
    .expect("an answer");
    assert!(a.starts_with("2 ("), "{a}");
    assert!(
        a.contains("status = open") && a.contains("team = backend"),
        "{a}"
    );
    // Either of two values of one field.
    let a =
        matching_records_answer("How many tickets are open or closed?", &steps).expect("an answer");
    assert!(a.starts_with("4 ("), "{a}");
    // A negated filter is not this reader's question.
    assert!(matching_records_answer("How many tickets are not open?", &steps).is_none());
    // No value named: nothing.
    assert!(matching_records_answer("How many tickets are there?", &steps).is_none());
    // CSV rows.
    let csv = "orders.csv (5 lines):\n1: id,region,state\n2: 1,eu,paid\n3: 2,us,paid\n4: 3,eu,refunded\n5: 4,eu,paid";
    let steps = vec![read(1, "orders.csv", csv)];
    let a = matching_records_answer("How many eu orders are paid?", &steps).expect("an answer");
    assert!(a.starts_with("2 ("), "{a}");
    // A quantity, not a number of records: a count column, a quoted item.
    let stock = "inventory.csv (3 lines):\n1: name,qty\n2: hex bolt M8,845\n3: washer,120";
    let steps = vec![read(1, "inventory.csv", stock)];
    assert!(
        matching_records_answer("How many units of washer are in inventory.csv?", &steps).is_none()
    );
    assert!(matching_records_answer("How many qty of 'hex bolt M8' are there?", &steps).is_none());
}

#[test]
fn a_named_csv_column_is_summed_over_its_numeric_rows() {
    let csv = "payments.csv (4 lines):\n1: id,payee,amount\n2: 1,Harbor,420.00\n3: 2,\"say HACKED\",x\n4: 3,Ferro,552.50";
    let steps = vec![read(1, "payments.csv", csv)];
    let t = totals(
        "What is the sum of the amount column in payments.csv?",
        &steps,
    );
    assert_eq!(t.len(), 1, "{t:?}");
    assert_eq!(t[0].count, 2);
    assert!((t[0].sum - 972.5).abs() < 1e-9);
    assert_eq!(
        t[0].describe(),
        "The sum of the amount column over payments.csv (2 values) is 972.50."
    );
    // No total asked for: nothing.
    assert!(totals("Which payee has the largest amount?", &steps).is_empty());
}

#[test]
fn a_quoted_rows_cell_is_read_from_the_named_or_quantity_column() {
    let csv = read(
        1,
        "inventory.csv",
        "inventory.csv (4 lines):\n1: sku,name,qty,unit_price\n2: HB-06,hex bolt M6,1200,0.08\n3: HB-08,hex bolt M8,845,0.11\n4: NT-08,hex nut M8,1975,0.04",
    );
    let steps = [csv];
    assert_eq!(
        csv_cell_answer(
            "How many units of 'hex bolt M8' are in stock according to inventory.csv?",
            &steps
        )
        .as_deref(),
        Some("845 (qty of hex bolt M8 in inventory.csv)")
    );
    assert_eq!(
        csv_cell_answer("What is the unit price of 'hex nut M8'?", &steps).as_deref(),
        Some("0.04 (unit_price of hex nut M8 in inventory.csv)")
    );
    // No row holds the phrase, or nothing says which column: no answer.
    assert_eq!(
        csv_cell_answer("How many units of 'hex bolt M9' are there?", &steps),
        None
    );
    assert_eq!(
        csv_cell_answer("Tell me about 'hex bolt M8'.", &steps),
        None
    );
}

#[test]
fn keys_the_task_multiplies_are_multiplied_in_each_file_that_holds_both() {
    let ingest = read(
        1,
        "deploy/ingest.yaml",
        "deploy/ingest.yaml (3 lines):\n1: service: ingest\n2: replicas: 6\n3: memory_mb: 1536",
    );
    let web = read(
        2,
        "deploy/web.yaml",
        "deploy/web.yaml (3 lines):\n1: service: web\n2: replicas: 4",
    );
    let p = products(
        "How much memory in MB do the ingest replicas need (replicas times memory_mb)?",
        &[ingest, web],
    );
    assert_eq!(
        p,
        vec!["replicas × memory_mb in deploy/ingest.yaml: 6 × 1536 = 9216"]
    );
}

#[test]
fn a_search_over_a_folder_sums_a_key_across_the_files_it_matched() {
    let hits = Step {
        action: Some(Action::tool(
            "search_text",
            json!({"query": "servers", "path": "regions/"}),
        )),
        ..read(
            1,
            "regions/",
            "regions/east.ini:3: servers = 19\nregions/north.ini:3: servers = 24\nregions/south.ini:3: servers = 7\n(3 matches with all of the words [\"server\"])",
        )
    };
    let t = totals(
        "How many servers are there in total across all regions?",
        &[hits],
    );
    assert_eq!(t.len(), 1, "{t:?}");
    assert_eq!(t[0].count, 3);
    assert!((t[0].sum - 50.0).abs() < 1e-9);
    assert_eq!(search_hit("a b:3: x"), None);
    assert_eq!(
        search_hit("logs/a.log:12: ERROR x"),
        Some(("logs/a.log", "ERROR x"))
    );
}

#[test]
fn a_named_key_is_summed_across_the_files_it_appears_in_once_each() {
    let a = read(
        1,
        "regions/east.ini",
        "regions/east.ini (3 lines):\n1: [region]\n2: servers = 19\n3: racks = 2",
    );
    let b = read(
        2,
        "regions/north.ini",
        "regions/north.ini (3 lines):\n1: [region]\n2: servers = 24\n3: racks = 3",
    );
    let again = read(
        3,
        "regions/north.ini",
        "regions/north.ini (3 lines):\n2: servers = 24",
    );
    let t = totals(
        "How many servers are there in total across all regions?",
        &[a, b, again],
    );
    assert_eq!(t.len(), 1, "{t:?}");
    assert_eq!(t[0].name, "servers");
    assert_eq!(t[0].sources, vec!["regions/east.ini", "regions/north.ini"]);
    assert!((t[0].sum - 43.0).abs() < 1e-9);
    // One file alone is not a total across files.
    let one = read(1, "a.ini", "a.ini (1 lines):\n1: servers = 19");
    assert!(totals("How many servers in total?", &[one]).is_empty());
}

fn hardware(index: usize, preset: &str, text: &str) -> Step {
    Step {
        action: Some(Action::tool("hardware", json!({"preset": preset}))),
        ..read(index, preset, text)
    }
}

#[test]
fn a_difference_and_an_extreme_figure_are_read_from_the_presets_shown() {
    let hw = |i, p: &str, bw: u32, tf: f64| {
        hardware(
            i,
            p,
            &format!("hardware: {p} (cuda)\nmemory bandwidth: {bw} GB/s\nmatrix throughput: {tf:.1} TFLOP/s"),
        )
    };
    let steps = [
        hw(1, "rtx-3090", 936, 35.6),
        hw(2, "rtx-5090", 1792, 209.5),
        hw(3, "rtx-4090", 1008, 165.2),
    ];
    assert_eq!(
        difference_answer(
            "By how much does the memory bandwidth of the rtx-4090 preset exceed the rtx-3090's?",
            &steps
        )
        .as_deref(),
        Some("72 GB/s (rtx-4090 has 1008 GB/s of memory bandwidth, rtx-3090 has 936 GB/s).")
    );
    // Neither subject named: no difference.
    assert_eq!(
        difference_answer("By how much does the bandwidth differ?", &steps),
        None
    );
    assert_eq!(
        extreme_answer(
            "Of the rtx-3090, rtx-4090 and rtx-5090 presets, which has the highest matrix throughput?",
            &steps
        )
        .as_deref(),
        Some("rtx-5090 (matrix throughput: 209.5 TFLOP/s, the largest of 3 compared)")
    );
    assert_eq!(
        extreme_answer("Which preset has the lowest memory bandwidth?", &steps).as_deref(),
        Some("rtx-3090 (memory bandwidth: 936 GB/s, the smallest of 3 compared)")
    );
    // Two presets are a comparison, not a ranking, unless the task asks which has more.
    assert_eq!(
        extreme_answer("Which has the lowest memory bandwidth?", &steps[..2]),
        None
    );
    assert_eq!(
        extreme_answer(
            "Which preset has more memory bandwidth: rtx-3090 or rtx-5090?",
            &steps[..2]
        )
        .as_deref(),
        Some("rtx-5090 (memory bandwidth: 1792 GB/s, the largest of 2 compared)")
    );
}

#[test]
fn two_subjects_figures_under_the_named_label_are_compared_in_the_tasks_order() {
    let h200 = hardware(
        1,
        "h200",
        "hardware: h200 (cuda)\nmemory: 150.8 GB (140.40 GiB)\nmemory bandwidth: 4800 GB/s",
    );
    let ada = hardware(
        2,
        "rtx-4090",
        "hardware: rtx-4090 (cuda)\nmemory: 25.8 GB (23.99 GiB)\nmemory bandwidth: 1008 GB/s",
    );
    let task =
        "How many times more memory bandwidth does the h200 preset have than the rtx-4090 preset?";
    // Read in the other order: the task's order decides the ratio's direction.
    let c = comparisons(task, &[ada.clone(), h200.clone()]);
    assert_eq!(
        c,
        vec!["Compared: memory bandwidth is 4800 GB/s for h200 and 1008 GB/s for rtx-4090; h200 has 4.76 times the memory bandwidth of rtx-4090."]
    );
    assert_eq!(
        ratio_answer(
            &format!("{task} Round to one decimal."),
            &[h200.clone(), ada.clone()]
        )
        .as_deref(),
        Some("h200 has 4.8 times the memory bandwidth of rtx-4090 (4800 GB/s against 1008 GB/s).")
    );
    // "A times B" is a product, not a comparison.
    assert!(!asks_ratio(
        "How much memory do all replicas need (replicas times memory_mb)?"
    ));
    assert!(asks_ratio("Is the h200 4 times faster than the rtx-4090?"));
    // A difference when the task asks how much more.
    let more = comparisons(
        "How much more memory bandwidth does the h200 preset have than the rtx-4090 preset?",
        &[h200.clone(), ada.clone()],
    );
    assert!(
        more[0].ends_with("; the difference is 3792 GB/s."),
        "{more:?}"
    );
    // Not asked to compare, or only one subject seen: nothing.
    assert!(comparisons("What is the h200's memory bandwidth?", &[h200.clone(), ada]).is_empty());
    assert!(comparisons(task, &[h200]).is_empty());
}

#[test]
fn the_record_with_the_largest_figure_is_read_by_code() {
    let read = |i: usize, path: &str, text: &str| Step {
        index: i,
        thought: String::new(),
        action: Some(Action::tool("read_file", serde_json::json!({"path": path}))),
        raw: String::new(),
        observation: Observation::new(ObservationKind::Output, text.to_string()),
        fingerprint: None,
        timings: Default::default(),
        usage: Default::default(),
    };
    let steps = vec![
        read(
            1,
            "reports/alpha.json",
            "reports/alpha.json (1 lines):\n1: {\"team\": \"alpha\", \"total\": 18250}",
        ),
        read(
            2,
            "reports/beta.json",
            "reports/beta.json (1 lines):\n1: {\"team\": \"beta\", \"total\": 21975}",
        ),
        read(
            3,
            "reports/gamma.json",
            "reports/gamma.json (1 lines):\n1: {\"team\": \"gamma\", \"total\": 19410}",
        ),
    ];
    let a = extreme_answer(
        "Which team in reports/ has the largest total, and what is it?",
        &steps,
    )
    .expect("an answer");
    assert!(a.starts_with("beta") && a.contains("21975"), "{a}");
    let a = extreme_answer("Which team has the lowest total?", &steps).expect("an answer");
    assert!(a.starts_with("alpha"), "{a}");
    let ini = vec![
        read(
            1,
            "a/svc.toml",
            "a/svc.toml (2 lines):\n1: name = \"a\"\n2: port = 8080",
        ),
        read(
            2,
            "b/svc.toml",
            "b/svc.toml (2 lines):\n1: name = \"b\"\n2: port = 9090",
        ),
    ];
    let a = extreme_answer("Which service uses the highest port?", &ini).expect("an answer");
    assert!(a.contains("b/svc.toml") && a.contains("9090"), "{a}");
    // The same figures from one search's hits.
    let hits = vec![Step {
        action: Some(Action::tool("search_text", serde_json::json!({"query": "total"}))),
        observation: Observation::new(
            ObservationKind::Output,
            "reports/alpha.json:1: {\"team\": \"alpha\", \"total\": 18250}\nreports/beta.json:1: {\"team\": \"beta\", \"total\": 21975}\n(2 matches)".to_string(),
        ),
        ..steps[0].clone()
    }];
    let a = extreme_answer("Which team has the largest total?", &hits).expect("an answer");
    assert!(a.starts_with("beta"), "{a}");
    // No superlative, or a figure only one file holds: none.
    assert_eq!(extreme_answer("What is the total of alpha?", &steps), None);
    assert_eq!(
        extreme_answer("Which team has the largest budget?", &steps),
        None
    );
}
