use super::*;
use crate::agent::types::{Observation, StepTimings};
use serde_json::json;

pub(super) fn step(index: usize, tool: &str, kind: ObservationKind, text: &str) -> Step {
    Step {
        index,
        thought: String::new(),
        action: Some(Action::tool(tool, json!({"path": "a.txt"}))),
        raw: String::new(),
        observation: Observation::new(kind, text.to_string()),
        fingerprint: None,
        timings: StepTimings::default(),
        usage: Usage::default(),
    }
}

#[test]
fn the_block_keeps_outputs_and_missing_files_but_not_mistakes_or_guards() {
    let steps = vec![
        step(1, "read_file", ObservationKind::Output, "1: PORT=5433"),
        step(
            2,
            "read_file",
            ObservationKind::ToolError {
                kind: ToolErrorKind::NotFound,
            },
            "no such file: b.txt",
        ),
        step(
            3,
            "read_file",
            ObservationKind::ToolError {
                kind: ToolErrorKind::InvalidArgs,
            },
            "path is required",
        ),
        step(
            4,
            "read_file",
            ObservationKind::Guard,
            "System guard: repeat",
        ),
    ];
    let block = observations_block(&steps, None, 10_000).expect("test value");
    assert!(block.contains("[1] read_file {\"path\":\"a.txt\"}\n1: PORT=5433"));
    assert!(block.contains("no such file: b.txt"));
    assert!(!block.contains("path is required"));
    assert!(!block.contains("System guard"));
    assert!(block.find("[1]").expect("test value") < block.find("[2]").expect("test value"));
}

#[test]
fn of_two_equal_lines_a_question_about_what_came_after_ranks_the_later_first() {
    let log = "service.log (4 lines):\n1: INFO main: service starting pid=1187\n\
               2: ERROR main: thread panicked\n\
               3: INFO supervisor: exited, restarting\n\
               4: INFO main: service starting pid=48213";
    let steps = vec![step(1, "read_file", ObservationKind::Output, log)];
    let pid_lines = |task: &str| -> Vec<String> {
        ranked_lines(task, &steps)
            .into_iter()
            .map(|(_, line, _)| line)
            .filter(|l| l.contains("pid="))
            .collect()
    };
    let after = pid_lines("What pid did the service get after the restart?");
    assert!(after[0].contains("48213"), "{after:?}");
    let before = pid_lines("What pid did the service start with?");
    assert!(before[0].contains("1187"), "{before:?}");
}

#[test]
fn a_question_about_what_came_after_an_event_is_shown_the_next_line_naming_it() {
    let log = "service.log (5 lines):\n1: INFO main: service starting pid=1187\n\
               2: INFO http: GET / status=200\n\
               3: INFO supervisor: process exited, restarting in 2 s\n\
               4: INFO http: GET /a status=200\n\
               5: INFO main: service starting pid=48213";
    let steps = vec![step(1, "read_file", ObservationKind::Output, log)];
    let task = "The service was restarted once. What pid did it get after the restart?";
    let event = "INFO supervisor: process exited, restarting in 2 s";
    let after = line_after(task, &steps, event).expect("a line after");
    assert!(
        after.contains("pid=48213") && !after.contains("1187"),
        "{after}"
    );
    assert!(line_after("What pid did the service start with?", &steps, event).is_none());
}

#[test]
fn the_newest_outputs_win_when_the_budget_is_short() {
    let long = "x".repeat(500);
    let steps = vec![
        step(1, "read_file", ObservationKind::Output, &long),
        step(2, "read_file", ObservationKind::Output, "1: newest"),
    ];
    let block = observations_block(&steps, None, 100).expect("test value");
    assert!(block.contains("newest"));
    assert!(!block.contains("[1]"));
    // The newest is kept even when it alone is over the budget.
    let block = observations_block(&steps[..1], None, 10).expect("test value");
    assert!(block.contains("[1]"));
}

#[test]
fn nothing_to_answer_from_gives_none() {
    let steps = vec![step(1, "read_file", ObservationKind::Guard, "guard")];
    assert!(answer_messages("q", &steps, None).is_none());
    assert!(answer_messages("q", &[], None).is_none());
}

#[test]
fn answers_are_cleaned_to_one_bounded_line() {
    assert_eq!(
        clean_answer("\n  Answer: 5433 \nmore").as_deref(),
        Some("5433")
    );
    assert_eq!(clean_answer("   \n\n"), None);
    assert_eq!(clean_answer("Answer:   "), None);
    let long = "a".repeat(FINAL_ANSWER_MAX_CHARS + 50);
    assert_eq!(
        clean_answer(&long).expect("test value").chars().count(),
        FINAL_ANSWER_MAX_CHARS
    );
}

#[test]
fn the_best_lines_are_those_sharing_most_words_with_the_question() {
    let csv = "inventory.csv (4 lines):\n1: sku,name,qty\n2: HB-06,hex bolt M6,1200\n3: HB-08,hex bolt M8,845\n4: NT-08,hex nut M8,1975";
    let steps = vec![step(1, "read_file", ObservationKind::Output, csv)];
    let best = best_lines("How many units of 'hex bolt M8' are in stock?", &steps, 3);
    assert_eq!(best[0], "sku=HB-08, name=hex bolt M8, qty=845");
    assert!(
        !best.iter().any(|l| l.starts_with("sku,")),
        "the header is not a row"
    );

    // A TOML key is scored and shown with its section, without its line number; the words
    // of the file name the task gives do not make the file's header line a best line.
    let toml = "config.toml (6 lines):\n1: [server]\n2: port = 8080\n3: [metrics]\n4: port = 9102\n5: [admin]\n6: port = 7001";
    let steps = vec![step(1, "read_file", ObservationKind::Output, toml)];
    let best = best_lines(
        "According to config.toml, which port does the metrics endpoint listen on?",
        &steps,
        3,
    );
    assert_eq!(best, vec!["[metrics] port = 9102"]);

    // Identifiers split at underscores; "maximum" matches "MAX".
    let py = "1: MAX_RETRIES = 5\n2: MAX_UPLOAD_MB = 250\n3: CACHE_TTL_SECONDS = 3600";
    let steps = vec![step(1, "read_file", ObservationKind::Output, py)];
    let best = best_lines("what is the maximum upload size in MB?", &steps, 1);
    assert_eq!(best, vec!["MAX_UPLOAD_MB = 250"]);

    // Nothing shared: nothing shown, and the prompt has no hint section.
    let steps = vec![step(1, "read_file", ObservationKind::Output, "1: zzz")];
    assert!(best_lines("What is the port?", &steps, 3).is_empty());
    let m = answer_messages("What is the port?", &steps, None).expect("test value");
    assert!(!m[1].content.contains("share most words"));
}

#[test]
fn terms_the_task_names_that_no_output_holds_are_pointed_out() {
    let block = "settings.py (2 lines):\n1: MAX_RETRIES = 5\n2: WORKER_THREADS = 16";
    assert_eq!(
        absent_terms("What is the value of LOG_LEVEL in settings.py?", block),
        vec!["LOG_LEVEL"]
    );
    assert!(absent_terms("What is MAX_RETRIES in settings.py?", block).is_empty());
    assert_eq!(
        absent_terms(
            "How many units of 'hex bolt M8' are in stock?",
            "hex bolt M6"
        ),
        vec!["hex bolt M8"]
    );
    let steps = vec![step(1, "read_file", ObservationKind::Output, block)];
    let m = answer_messages(
        "What is the value of LOG_LEVEL in settings.py?",
        &steps,
        None,
    )
    .expect("messages");
    assert!(m[1]
        .content
        .contains("No tool output contains \"LOG_LEVEL\": unless"));
    // A search that matched nothing echoes the words it looked for; they were not found.
    let searched = step(
        2,
        "search_text",
        ObservationKind::Output,
        &format!(
            "{NO_MATCHES} searched 1 text file for lines with all of the words [\"log_level\"]"
        ),
    );
    let with_search = vec![steps[0].clone(), searched];
    let m =
        answer_messages("What is LOG_LEVEL in settings.py?", &with_search, None).expect("messages");
    assert!(m[1]
        .content
        .contains("No tool output contains \"LOG_LEVEL\""));
}

#[test]
fn a_section_the_read_file_lacks_is_answered_as_not_found() {
    let yaml = "config/envs.yaml (6 lines):\n1: development:\n2:   db_host: localhost\n3: production:\n4:   db_host: db-prod.internal\n5: test:\n6:   db_host: localhost";
    let read = Step {
        action: Some(Action::tool(
            "read_file",
            json!({"path": "config/envs.yaml"}),
        )),
        ..step(1, "read_file", ObservationKind::Output, yaml)
    };
    let ask = |t: &str| not_found_answer(t, std::slice::from_ref(&read), None);
    assert_eq!(
        ask("Which database host does the staging environment use, according to config/envs.yaml?")
            .as_deref(),
        Some("staging was not found in config/envs.yaml (its sections: development, production, test).")
    );
    // A section the file has, and words that qualify rather than name a section.
    assert_eq!(ask("Which database host does the production environment use, according to config/envs.yaml?"), None);
    assert_eq!(
        ask("Which database host does the default profile use in config/envs.yaml?"),
        None
    );
    // A file without sections says nothing about sections.
    let flat = Step {
        action: Some(Action::tool("read_file", json!({"path": "app.toml"}))),
        ..step(
            1,
            "read_file",
            ObservationKind::Output,
            "app.toml (1 lines):\n1: port = 80",
        )
    };
    assert_eq!(
        not_found_answer(
            "Which port does the staging environment use in app.toml?",
            &[flat],
            None
        ),
        None
    );
}

#[test]
fn a_key_the_read_file_does_not_hold_is_answered_as_not_found() {
    let text = "settings.py (2 lines):\n1: MAX_RETRIES = 5\n2: WORKER_THREADS = 16";
    let read = |path: &str| Step {
        action: Some(Action::tool("read_file", json!({"path": path}))),
        ..step(1, "read_file", ObservationKind::Output, text)
    };
    let task = "What is the value of LOG_LEVEL in settings.py?";
    assert_eq!(
        not_found_answer(task, &[read("settings.py")], None).as_deref(),
        Some("LOG_LEVEL was not found in settings.py.")
    );
    // Not before the named file was read, and not for a key the file holds.
    assert_eq!(not_found_answer(task, &[read("other.py")], None), None);
    assert_eq!(
        not_found_answer(
            "What is MAX_RETRIES in settings.py?",
            &[read("settings.py")],
            None
        ),
        None
    );
    // A named file that does not exist, and was not found later either.
    let missing = Step {
        action: Some(Action::tool(
            "read_file",
            json!({"path": "logs/worker.log"}),
        )),
        ..step(
            1,
            "read_file",
            ObservationKind::ToolError {
                kind: ToolErrorKind::NotFound,
            },
            "logs/worker.log does not exist",
        )
    };
    let task = "How many ERROR lines are in logs/worker.log?";
    assert_eq!(
        not_found_answer(task, std::slice::from_ref(&missing), None).as_deref(),
        Some("logs/worker.log was not found: it does not exist in the workspace.")
    );
    let found = Step {
        action: Some(Action::tool(
            "read_file",
            json!({"path": "logs/worker.log"}),
        )),
        ..step(2, "read_file", ObservationKind::Output, "1: ERROR x")
    };
    assert_eq!(not_found_answer(task, &[missing, found], None), None);
    // A capitalised word is not an exact key: the model answers as usual.
    assert_eq!(
        not_found_answer(
            "How many ERROR lines are in settings.py?",
            &[read("settings.py")],
            None
        ),
        None
    );
}

#[test]
fn a_summary_replaces_an_answer_that_restates_part_of_it() {
    let out = "summary: llama-3.1-70b Q4_K_M at 8192 tokens does not fit on rtx-4090 (needs 50.4 GB, 25.8 GB usable, short by 24.6 GB); decode about 14.6 tokens/s.\nfits: no";
    let steps = vec![step(1, "size_model", ObservationKind::Output, out)];
    let task = "Does Llama-3-70B at Q4_K_M with 8k context fit on an RTX 4090, and how fast would it decode?";
    let full = prefer_summary(
        task,
        "Llama-3.1-70B at 8k context does not fit on an RTX 4090; about 14.6 tokens/s.",
        &steps,
    );
    assert!(full.contains("short by 24.6 GB"), "{full}");
    assert!(full.starts_with("llama-3.1-70b"), "{full}");
    // A bare verdict is completed too.
    assert!(prefer_summary(task, "No.", &steps).contains("50.4 GB"));
    // A copy cut inside a number is completed from the summary.
    let cut = "llama-3.1-70b Q4_K_M at 8192 tokens does not fit on rtx-4090 (needs 50.4 GB, 25.8 GB usable, short by 24.6 GB); decode about 14.";
    assert!(prefer_summary(task, cut, &steps).ends_with("14.6 tokens/s."));
    // A number from elsewhere keeps the answer as written.
    let own = "It needs 61.0 GB.";
    assert_eq!(prefer_summary(task, own, &steps), own);
    // No summary: unchanged.
    let plain = vec![step(
        1,
        "read_file",
        ObservationKind::Output,
        "1: port = 8080",
    )];
    assert_eq!(prefer_summary("port?", "8080", &plain), "8080");
    assert_eq!(
        numbers("v3.1 at 4,090 and 24.6."),
        vec!["3.1", "4", "090", "24.6"]
    );
}

#[test]
fn modes_parse_and_reject_unknown_names() {
    assert_eq!("planner".parse::<AnswerMode>(), Ok(AnswerMode::Planner));
    assert_eq!("model".parse::<AnswerMode>(), Ok(AnswerMode::Model));
    assert!(AnswerMode::Model.from_observations() && !AnswerMode::Model.code_answers());
    assert!(AnswerMode::Observations.code_answers() && !AnswerMode::Planner.from_observations());
    assert_eq!(
        "observations".parse::<AnswerMode>(),
        Ok(AnswerMode::Observations)
    );
    assert!("magic"
        .parse::<AnswerMode>()
        .expect_err("test error")
        .contains("observations"));
}

pub(super) fn call(index: usize, tool: &str, args: serde_json::Value, text: &str) -> Step {
    Step {
        action: Some(Action::tool(tool, args)),
        ..step(index, tool, ObservationKind::Output, text)
    }
}

#[test]
fn a_look_ups_key_is_a_line_in_the_files_named_first_even_a_comment() {
    let task = "One FIXME comment in the code under src/ cites a ticket. What is that ticket's status in tracker/tickets.csv?";
    let listing = call(
        1,
        "list_dir",
        json!({"path": "src/"}),
        "total: 0 files and 2 folders directly in src; 5 files in src\nsrc/api/ (2 files)\nsrc/sync/ (3 files)",
    );
    let table = call(
        2,
        "read_file",
        json!({"path": "tracker/tickets.csv"}),
        "tracker/tickets.csv (4 lines):\n1: id,title,status,assignee\n2: OPS-2240,Bound the sync queue,wontfix,akimura\n3: OPS-2291,Merge drops conflicting edits,blocked,dokafor\n4: OPS-2302,Retry token refresh,in-progress,lrossi",
    );
    // A search of the whole workspace shows the table's header among its best lines.
    let everywhere = call(
        3,
        "search_text",
        json!({"query": "src"}),
        "no matches: searched 7 text files under . for lines with all of the words [\"src\"] (any order, any case).\nLines with the most of the task's words instead:\nsrc/sync/merge.py:2:     # FIXME(OPS-2291): conflicting edits to the same field are dropped silently\ntracker/tickets.csv:1: id,title,status,assignee",
    );
    let source = call(
        4,
        "read_file",
        json!({"path": "src/sync/merge.py"}),
        "src/sync/merge.py (3 lines):\n1: def merge(local, remote):\n2:     # FIXME(OPS-2291): conflicting edits to the same field are dropped silently\n3:     return dict(remote)",
    );
    for steps in [
        vec![listing.clone(), table.clone(), everywhere.clone()],
        vec![
            listing.clone(),
            table.clone(),
            everywhere.clone(),
            source.clone(),
        ],
        vec![listing.clone(), table.clone(), source.clone()],
    ] {
        let answer = lookup_answer(task, &steps).expect("a look-up");
        assert!(answer.contains("status=blocked"), "{answer}");
        assert!(!answer.contains("wontfix"), "{answer}");
    }
    // The folder listing alone holds no key ("sync" is not the ticket).
    assert_eq!(lookup_answer(task, &[listing, table]), None);
}

#[test]
fn a_value_found_in_one_file_is_looked_up_in_the_file_the_question_names_last() {
    let task = "The deploy log in logs/ records one rejected release with a reason code. What does that code mean according to docs/reasons.md?";
    let table = call(
        1,
        "read_file",
        json!({"path": "docs/reasons.md"}),
        "docs/reasons.md (5 lines):\n1: | code | meaning |\n2: |---|---|\n3: | R210 | image signature missing |\n4: | R214 | quota for the region exhausted |\n5: | R290 | health check timed out |",
    );
    let hit = call(
        2,
        "search_text",
        json!({"path": "logs/", "query": "rejected release"}),
        "logs/deploy.log:812: 2026-04-01T10:00:00Z WARN deploy: release rejected reason=R214 env=prod\n(1 match of lines with all of the words [\"rejected\", \"release\"] in 1 text file under logs/)",
    );
    let steps = [table.clone(), hit.clone()];
    let answer = lookup_answer(task, &steps).expect("a look-up");
    assert!(
        answer.contains("quota for the region exhausted"),
        "{answer}"
    );
    assert!(
        !answer.contains("R210") && !answer.contains("R290"),
        "{answer}"
    );
    // Without the value's line there is nothing to look up.
    assert_eq!(lookup_answer(task, std::slice::from_ref(&table)), None);
    // A question that does not point back ("that code") is not a look-up.
    let plain =
        "The deploy log in logs/ records rejected releases. List the codes in docs/reasons.md.";
    assert_eq!(lookup_answer(plain, &steps), None);

    // A CSV row is shown with its header's names; the id in a file's name counts.
    let task = "Which script in jobs/ rotates the api keys, and who approved it according to audit/approvals.csv?";
    let rows = call(
        1,
        "read_file",
        json!({"path": "audit/approvals.csv"}),
        "audit/approvals.csv (4 lines):\n1: job,approved_by,date\n2: 0031,lmarsh,2026-01-12\n3: 0032,okoye,2026-02-02\n4: 0033,lmarsh,2026-02-20",
    );
    let hit = call(
        2,
        "search_text",
        json!({"path": "jobs/", "query": "rotate api keys"}),
        "jobs/0032_rotate_keys.sh:4: rotate_api_keys --all\n(1 match of lines with all of the words [\"rotate\", \"api\", \"keys\"] in 3 text files under jobs/)",
    );
    let answer = lookup_answer(task, &[rows, hit]).expect("a look-up");
    assert!(answer.contains("approved_by=okoye"), "{answer}");
    assert!(!answer.contains("lmarsh"), "{answer}");

    // Code that shares no word with the question: each line of the short source is a
    // candidate key, and an identifier is not held by a longer one.
    let task = "web/src/api.js builds every request URL from an environment variable. What is that variable set to in web/.env.production?";
    let env = call(
        1,
        "read_file",
        json!({"path": "web/.env.production"}),
        "web/.env.production (3 lines):\n1: VITE_API_ORIGIN_V1=https://legacy.example.org\n2: VITE_API_ORIGIN=https://api.example.org\n3: VITE_CDN=https://cdn.example.org",
    );
    let code = call(
        2,
        "read_file",
        json!({"path": "web/src/api.js"}),
        "web/src/api.js (2 lines):\n1: const origin = import.meta.env.VITE_API_ORIGIN;\n2: export const get = (p) => fetch(`${origin}${p}`);",
    );
    let answer = lookup_answer(task, &[env, code]).expect("a look-up");
    assert!(
        answer.contains("VITE_API_ORIGIN=https://api.example.org"),
        "{answer}"
    );
    assert!(!answer.contains("legacy"), "{answer}");
}

#[test]
fn an_asked_byte_unit_is_taken_from_the_line_that_holds_the_answer() {
    let hw = call(
        1,
        "hardware",
        json!({"preset": "rtx-5090"}),
        "memory: 34.2 GB (31.84 GiB)\nmemory bandwidth: 1792 GB/s",
    );
    let steps = [hw];
    let task = "How much memory does the rtx-5090 preset have, in GiB?";
    assert_eq!(
        in_asked_unit(task, "34.2", &steps).as_deref(),
        Some("31.84 GiB")
    );
    assert_eq!(in_asked_unit(task, "31.84 GiB", &steps), None);
    // GB asked: "GB/s" is not GB, and an answer already in GB stays.
    assert_eq!(in_asked_unit("memory in GB?", "34.2 GB", &steps), None);
    assert_eq!(in_asked_unit("bandwidth in GB?", "1792", &steps), None);
    // No unit asked: unchanged.
    assert_eq!(in_asked_unit("How much memory?", "34.2", &steps), None);
}
