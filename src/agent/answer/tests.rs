use super::*;
use crate::agent::types::ToolErrorKind;
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
    // A figure with its unit is no file name, and spacing does not hide a term.
    assert!(absent_terms("How long does a 3.2GB upload take?", "size: 3.2 GB").is_empty());
    assert_eq!(
        absent_terms("What does v1.2 of build.gradle set?", "nothing"),
        vec!["build.gradle"]
    );
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
        .contains("No tool output contains \"LOG_LEVEL\"."));
    assert!(m[1].content.ends_with("If they do not, reply NOT FOUND."));
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
        .contains("No tool output contains \"LOG_LEVEL\"."));
}

#[test]
fn modes_parse_and_reject_unknown_names() {
    assert_eq!("planner".parse::<AnswerMode>(), Ok(AnswerMode::Planner));
    assert_eq!("model".parse::<AnswerMode>(), Ok(AnswerMode::Model));
    assert!(AnswerMode::Model.from_observations() && !AnswerMode::Model.checks());
    assert!(AnswerMode::Observations.checks() && !AnswerMode::Planner.from_observations());
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
fn a_partial_copy_of_a_summary_is_found_and_an_answer_with_other_numbers_is_not() {
    let out = "summary: llama-3.1-70b Q4_K_M at 8192 tokens does not fit on rtx-4090 (needs 50.4 GB, 25.8 GB usable, short by 24.6 GB); decode about 14.6 tokens/s.\nfits: no";
    let steps = vec![step(1, "size_model", ObservationKind::Output, out)];
    let task = "Does Llama-3-70B at Q4_K_M with 8k context fit on an RTX 4090, and how fast would it decode?";
    let partial = "Llama-3.1-70B at 8k context does not fit on an RTX 4090; about 14.6 tokens/s.";
    assert!(partial_summary(task, partial, &steps).is_some_and(|s| s.contains("short by 24.6 GB")));
    // A bare verdict, and a copy cut inside a number, restate part of it too.
    assert!(partial_summary(task, "No.", &steps).is_some());
    let cut = "llama-3.1-70b Q4_K_M at 8192 tokens does not fit on rtx-4090 (needs 50.4 GB, 25.8 GB usable, short by 24.6 GB); decode about 14.";
    assert!(partial_summary(task, cut, &steps).is_some());
    // A number from elsewhere, or no summary at all: nothing to send back for.
    assert_eq!(partial_summary(task, "It needs 61.0 GB.", &steps), None);
    let plain = vec![step(
        1,
        "read_file",
        ObservationKind::Output,
        "1: port = 8080",
    )];
    assert_eq!(partial_summary("port?", "8080", &plain), None);
    assert_eq!(
        numbers("v3.1 at 4,090 and 24.6."),
        vec!["3.1", "4", "090", "24.6"]
    );
}

#[test]
fn a_figure_in_an_unasked_byte_unit_names_the_line_in_the_asked_one() {
    let hw = call(
        1,
        "hardware",
        json!({"preset": "rtx-5090"}),
        "memory: 34.2 GB (31.84 GiB)\nmemory bandwidth: 1792 GB/s",
    );
    let steps = [hw];
    let task = "How much memory does the rtx-5090 preset have, in GiB?";
    assert_eq!(
        unit_mismatch(task, "34.2", &steps),
        Some(("GiB", "memory: 34.2 GB (31.84 GiB)".to_string()))
    );
    assert_eq!(unit_mismatch(task, "31.84 GiB", &steps), None);
    // GB asked: "GB/s" is not GB, and an answer already in GB stays.
    assert_eq!(unit_mismatch("memory in GB?", "34.2 GB", &steps), None);
    assert_eq!(unit_mismatch("bandwidth in GB?", "1792", &steps), None);
    // No unit asked: nothing to send back for.
    assert_eq!(unit_mismatch("How much memory?", "34.2", &steps), None);
}

/// A model that answers its replies in turn (the last one again when they run out) and
/// keeps the requests it was sent (the query step's tests use it too).
pub(crate) struct Scripted {
    replies: Vec<&'static str>,
    pub(crate) requests: Vec<GenRequest>,
}

impl Scripted {
    pub(crate) fn new(replies: &[&'static str]) -> Self {
        Self {
            replies: replies.to_vec(),
            requests: Vec::new(),
        }
    }
}

impl LanguageModel for Scripted {
    fn generate(
        &mut self,
        req: &GenRequest,
        _on_text: &mut dyn FnMut(&str),
        _cancel: &CancelToken,
    ) -> Result<crate::lm::GenOutput, crate::lm::LmError> {
        let i = self.requests.len().min(self.replies.len() - 1);
        self.requests.push(req.clone());
        Ok(crate::lm::GenOutput {
            text: self.replies[i].to_string(),
            finish: FinishReason::Stop,
            usage: Usage::default(),
        })
    }
    fn context_length(&self) -> usize {
        4096
    }
    fn name(&self) -> String {
        "scripted".into()
    }
}

fn answered(lm: &mut Scripted, task: &str, steps: &[Step], checks: bool) -> AnswerOutput {
    write_answer(
        lm,
        &SamplingParams::default(),
        task,
        steps,
        None,
        checks,
        &CancelToken::new(),
    )
    .expect("answers")
    .expect("an answer")
}

#[test]
fn the_model_decides_whether_outputs_missing_a_named_term_answer_the_question() {
    let read = call(
        1,
        "read_file",
        json!({"path": "settings.py"}),
        "settings.py (2 lines):\n1: MAX_RETRIES = 5\n2: WORKER_THREADS = 16",
    );
    let steps = [read];
    let task = "What is the value of LOG_LEVEL in settings.py?";
    let mut lm = Scripted::new(&["NOT FOUND"]);
    let out = answered(&mut lm, task, &steps, true);
    assert_eq!(
        out.answer,
        "not found: no tool output shows LOG_LEVEL (looked at settings.py)"
    );
    assert_eq!(out.by, AnswerBy::Model, "the model decided");
    let grammar = match &lm.requests[0].constraint {
        Some(Constraint::Lark(g)) => g.clone(),
        other => panic!("no grammar: {other:?}"),
    };
    assert!(
        grammar.contains("start: \"NOT FOUND\" | \"FOUND: \" REST"),
        "{grammar}"
    );
    let prompt = &lm.requests[0].messages[1].content;
    assert!(
        prompt.ends_with("No tool output contains \"LOG_LEVEL\". If the tool outputs give the value the question asks for, reply FOUND: and the answer in one short line. If they do not, reply NOT FOUND."),
        "{prompt}"
    );
    // Found after all (under another name): the prefix goes, and no program runs for it.
    let mut lm = Scripted::new(&["FOUND: 5"]);
    assert_eq!(answered(&mut lm, task, &steps, true).answer, "5");
    // Every exact term held: no grammar.
    let mut lm = Scripted::new(&["5"]);
    answered(&mut lm, "What is MAX_RETRIES in settings.py?", &steps, true);
    assert!(lm.requests[0].constraint.is_none());
    // A named file a tool said does not exist is decided on too.
    let mut gone = call(
        2,
        "read_file",
        json!({"path": "logs/worker.log"}),
        "logs/worker.log does not exist",
    );
    gone.observation.kind = ObservationKind::ToolError {
        kind: ToolErrorKind::NotFound,
    };
    let mut lm = Scripted::new(&["NOT FOUND"]);
    let out = answered(
        &mut lm,
        "How many ERROR lines are in logs/worker.log?",
        &[gone],
        true,
    );
    assert_eq!(out.answer, "not found: logs/worker.log does not exist");
    // The error names the file; that is no sighting of it, and the model is told the fact.
    let prompt = &lm.requests[0].messages[1].content;
    assert!(
        prompt.contains("The tools report that logs/worker.log does not exist.")
            && !prompt.contains("No tool output contains"),
        "{prompt}"
    );
}

#[test]
fn a_number_from_nowhere_is_worked_out_by_a_program_and_checks_off_keep_it() {
    let read = call(
        1,
        "read_file",
        json!({"path": "order.txt"}),
        "order.txt (2 lines):\n1: boxes = 12\n2: price_per_box = 7.5",
    );
    let steps = [read];
    let task = "What do the boxes in order.txt cost in total?";
    let mut lm = Scripted::new(&["95", "boxes = 12\nprice = 7.5\nanswer = boxes * price"]);
    let out = answered(&mut lm, task, &steps, true);
    assert_eq!(out.answer, "90");
    assert_eq!(out.by, AnswerBy::Program, "{}", out.how);
    assert!(out.how.contains("the model wrote \"95\""), "{}", out.how);
    // A grounded answer is not sent to a program.
    let mut lm = Scripted::new(&["12 boxes"]);
    let out = answered(&mut lm, task, &steps, true);
    assert_eq!((out.answer.as_str(), lm.requests.len()), ("12 boxes", 1));
    // Checks off (`--answer model`): the first answer stands.
    let mut lm = Scripted::new(&["95", "answer = 12 * 7.5"]);
    let out = answered(&mut lm, task, &steps, false);
    assert_eq!((out.answer.as_str(), lm.requests.len()), ("95", 1));
    assert_eq!(out.by, AnswerBy::Model);
}

#[test]
fn a_task_with_numbers_and_nothing_observed_is_worked_out_by_a_program() {
    let task = "A recipe uses 375 g of flour for 6 people. How much flour for 22 people?";
    let mut lm = Scripted::new(&[
        "flour_g = 375\npeople = 6\nguests = 22\nanswer = flour_g / people * guests",
    ]);
    let out = answered(&mut lm, task, &[], true);
    assert_eq!(out.answer, "1375");
    assert_eq!(out.by, AnswerBy::Program);
    // A program with a number from nowhere gives no answer.
    let mut lm = Scripted::new(&["answer = 375 / 6 * 23"]);
    let none = write_answer(
        &mut lm,
        &SamplingParams::default(),
        task,
        &[],
        None,
        true,
        &CancelToken::new(),
    )
    .expect("runs");
    assert_eq!(none, None);
    // No numbers in the task: nothing to work out.
    let mut lm = Scripted::new(&["Paris"]);
    let none = write_answer(
        &mut lm,
        &SamplingParams::default(),
        "What is the capital of France?",
        &[],
        None,
        true,
        &CancelToken::new(),
    )
    .expect("runs");
    assert_eq!((none, lm.requests.len()), (None, 0));
}

#[test]
fn a_partial_summary_sends_the_model_back_once_and_its_second_answer_stands() {
    let sized = call(
        1,
        "size_model",
        json!({"model": "llama-3.1-70b", "hw": "rtx-4090"}),
        "summary: llama-3.1-70b does not fit the rtx-4090: short by 24.6 GB; decode about 14.6 tokens/s",
    );
    let steps = [sized];
    let task = "Can I use llama-3.1-70b with an rtx-4090?";
    let mut lm = Scripted::new(&[
        "No, decode about 14.6 tokens/s",
        "llama-3.1-70b does not fit the rtx-4090: short by 24.6 GB; decode about 14.6 tokens/s",
    ]);
    let out = answered(&mut lm, task, &steps, true);
    assert_eq!(lm.requests.len(), 2);
    assert!(out.answer.contains("short by 24.6 GB"), "{}", out.answer);
    assert_eq!(out.by, AnswerBy::Model, "the model wrote both answers");
    assert!(out.how.contains("sent back once"), "{}", out.how);
    let back = &lm.requests[1].messages;
    assert_eq!(
        back[back.len() - 2].content,
        "No, decode about 14.6 tokens/s"
    );
    assert!(back[back.len() - 1].content.contains("leaves out figures"));
    // The model's second answer stands even when it is no better.
    let mut lm = Scripted::new(&["No, decode about 14.6 tokens/s"]);
    let out = answered(&mut lm, task, &steps, true);
    assert_eq!(out.answer, "No, decode about 14.6 tokens/s");
    assert_eq!(lm.requests.len(), 2);
}

#[test]
fn an_answer_that_repeats_the_question_or_a_file_header_says_nothing() {
    let task = "cache pool size in app.ini?";
    assert_eq!(
        says_nothing(task, "cache pool size in app.ini?"),
        Some("repeats the question")
    );
    assert_eq!(says_nothing(task, "48"), None);
    assert_eq!(
        says_nothing("Which is larger, A or B?", "B is larger"),
        None
    );
    assert!(says_nothing("What is the timeout?", "deploy.json (29 lines): 1: {").is_some());
    assert!(says_nothing("What is the timeout?", "app.log (lines 1-40 of 900): 1: x").is_some());
    assert_eq!(
        says_nothing("What is the timeout?", "45 s (services.worker)"),
        None
    );
    // Sent back once; the second answer stands.
    let read = call(
        1,
        "read_file",
        json!({"path": "app.ini"}),
        "app.ini (2 lines):\n1: [cache]\n2: pool_size = 48",
    );
    let mut lm = Scripted::new(&["cache pool size in app.ini?", "48"]);
    let out = answered(&mut lm, task, &[read], true);
    assert_eq!(out.answer, "48");
    assert!(lm.requests[1]
        .messages
        .last()
        .is_some_and(|m| m.content.contains("repeats the question")));
    // Said twice: no answer from the answer step (the planner's stands).
    let read = call(
        1,
        "read_file",
        json!({"path": "app.ini"}),
        "app.ini (2 lines):\n1: [cache]\n2: pool_size = 48",
    );
    let mut lm = Scripted::new(&["cache pool size in app.ini?"]);
    let none = write_answer(
        &mut lm,
        &SamplingParams::default(),
        task,
        &[read],
        None,
        true,
        &CancelToken::new(),
    )
    .expect("runs");
    assert_eq!((none, lm.requests.len()), (None, 2));
}

#[test]
fn a_json_file_read_whole_is_ranked_by_its_key_paths() {
    let json = "deploy.json (9 lines):\n1: {\n2:   \"services\": {\n3:     \"web\": {\"healthcheck\": {\"timeout_s\": 4}},\n4:     \"worker\": {\n5:       \"healthcheck\": {\"timeout_s\": 45}\n6:     }\n7:   },\n8:   \"timeout_s\": 300\n9: }";
    let read = call(1, "read_file", json!({"path": "deploy.json"}), json);
    let best = best_lines(
        "What's the health check timeout for the worker service? It's somewhere in deploy.json.",
        &[read],
        3,
    );
    assert_eq!(best, vec!["services.worker.healthcheck.timeout_s: 45"]);
}

#[test]
fn toml_table_arrays_and_ini_sections_are_ranked_as_records_and_key_paths() {
    // A TOML array of tables: each entry is one record, so the entry the question names and
    // the value asked for are on one line.
    let toml = "regions.toml (9 lines):\n1: [[region]]\n2: name = \"north\"\n3: quota_gb = 40\n4: \n5: [[region]]\n6: name = \"south\"\n7: quota_gb = 90\n8: [defaults]\n9: quota_gb = 10";
    let read = call(1, "read_file", json!({"path": "regions.toml"}), toml);
    let best = best_lines("What quota does the south region get?", &[read], 3);
    assert_eq!(best, vec!["region: name=south, quota_gb=90"]);

    // An INI key under its section's name: the section the question names outranks the
    // same key elsewhere.
    let ini = "svc.ini (6 lines):\n1: [db]\n2: workers = 4\n3: [queue]\n4: workers = 16\n5: [web]\n6: workers = 8";
    let read = call(1, "read_file", json!({"path": "svc.ini"}), ini);
    let best = best_lines("how many queue workers in svc.ini?", &[read], 3);
    assert_eq!(best, vec!["queue.workers: 16"]);

    // A file the tools searched, not read whole, is still ranked line by line.
    let hits = "svc.ini:4: workers = 16";
    let search = call(
        1,
        "search_text",
        json!({"path": "svc.ini", "query": "workers"}),
        hits,
    );
    assert_eq!(
        best_lines("how many queue workers in svc.ini?", &[search], 3),
        vec!["[svc.ini] workers = 16"]
    );
}

#[test]
fn an_answer_that_repeats_a_calls_argument_and_not_its_output_is_caught() {
    let calc = call(
        1,
        "calculator",
        serde_json::json!({"expression": "95 kph in m/s"}),
        "26.388889 m/s",
    );
    assert_eq!(
        repeats_call("95 kph in m/s", std::slice::from_ref(&calc)),
        Some(vec!["26.388889 m/s".to_string()])
    );
    assert!(repeats_call(" 95 KPH in m/s ", std::slice::from_ref(&calc)).is_some());
    assert_eq!(
        repeats_call("26.388889 m/s", std::slice::from_ref(&calc)),
        None
    );
    // A path the output shows too is an answer, not a repeat.
    let read = call(
        2,
        "read_file",
        serde_json::json!({"path": "src/money.js"}),
        "src/money.js (3 lines):\n1: export function f() {}",
    );
    assert_eq!(repeats_call("src/money.js", &[read]), None);
}
