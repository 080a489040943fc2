//! OODA shares ReAct's answer step and step-by-step narrowing: the final answer is written from
//! the tool outputs (not copied from the Decide proposal), and the Decide constraint is narrowed
//! to what the task names and what has not been done yet.

use std::time::Duration;

use serde_json::json;

use boyd::agent::answer::AnswerMode;
use boyd::agent::ooda::decide::{Candidate, ScriptedDecider, ScriptedDecision};
use boyd::agent::ooda::orient::ScriptedOrienter;
use boyd::agent::ooda::{Ooda, OodaConfig, OodaOutcome, OodaState};
use boyd::agent::rundir::RunDir;
use boyd::agent::tools::{Sandbox, Toolset};
use boyd::lm::CancelToken;

struct Case {
    _dir: tempfile::TempDir,
    home: std::path::PathBuf,
    ws: Sandbox,
}

fn case(files: &[(&str, &str)]) -> Case {
    let dir = tempfile::tempdir().expect("tempdir");
    let home = dir.path().join("home");
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&home).expect("home");
    std::fs::create_dir_all(&ws).expect("ws");
    for (p, c) in files {
        std::fs::write(ws.join(p), c).expect("write");
    }
    let ws = Sandbox::new(&ws).expect("sandbox");
    Case {
        _dir: dir,
        home,
        ws,
    }
}

async fn run(
    c: &Case,
    task: &str,
    decider: &mut ScriptedDecider,
    config: OodaConfig,
) -> OodaOutcome {
    let tools = Toolset::builtin(None).for_workspace(true);
    let mut orienter = ScriptedOrienter::new([]);
    let mut ooda = Ooda::new(decider, &mut orienter, &tools, CancelToken::new());
    ooda.config = OodaConfig {
        sensor_timeout: Duration::from_millis(500),
        ..config
    };
    ooda.workspace = Some(c.ws.clone());
    let run_dir = RunDir::create(&c.home).expect("run dir");
    ooda.run(task, run_dir, &mut |_| {}).await.expect("run")
}

fn read(path: &str) -> ScriptedDecision {
    ScriptedDecision::Propose(vec![Candidate::tool("read_file", json!({ "path": path }))])
}

fn answer(text: &str) -> ScriptedDecision {
    ScriptedDecision::Propose(vec![Candidate::answer(text)])
}

#[tokio::test]
async fn the_answer_step_writes_the_final_answer_from_the_tool_outputs() {
    let c = case(&[("config.toml", "[server]\nport = 8080\n")]);
    let task = "Which port does the server in config.toml listen on?";
    let mut d = ScriptedDecider::new([read("config.toml"), answer("the port")])
        .with_answers(["8080".to_string()]);
    let out = run(&c, task, &mut d, OodaConfig::default()).await;
    assert_eq!(out.state, OodaState::Completed);
    assert_eq!(out.answer.as_deref(), Some("8080"));
    // The answer step saw the file's content.
    assert_eq!(d.answer_inputs.len(), 1);
    assert!(d.answer_inputs[0][0].contains("port = 8080"));
    let phases = std::fs::read_to_string(out.run_dir.join("ooda.jsonl")).expect("phase log");
    assert!(phases.contains("\"phase\":\"answer\""), "{phases}");

    // With `--answer planner` the proposed answer stands.
    let mut d = ScriptedDecider::new([read("config.toml"), answer("port 8080")])
        .with_answers(["ignored".to_string()]);
    let config = OodaConfig {
        answer: AnswerMode::Planner,
        ..OodaConfig::default()
    };
    let out = run(&c, task, &mut d, config).await;
    assert_eq!(out.answer.as_deref(), Some("port 8080"));
    assert!(d.answer_inputs.is_empty());
}

#[tokio::test]
async fn an_answer_with_nothing_observed_and_no_made_up_number_is_the_proposed_one() {
    let c = case(&[("a.txt", "x")]);
    let mut d =
        ScriptedDecider::new([answer("yes, 4 is even")]).with_answers(["never".to_string()]);
    let out = run(
        &c,
        "Is 2 + 2 an even number? It is 4.",
        &mut d,
        OodaConfig::default(),
    )
    .await;
    assert_eq!(out.answer.as_deref(), Some("yes, 4 is even"));
    assert!(
        d.answer_inputs.is_empty(),
        "the answer step had nothing to do"
    );
}

#[tokio::test]
async fn the_decide_constraint_is_narrowed_to_the_named_file_and_not_offered_again() {
    let c = case(&[("notes.txt", "alpha\n"), ("other.txt", "beta\n")]);
    let task = "What does notes.txt say?";
    let mut d = ScriptedDecider::new([read("notes.txt"), answer("alpha")]);
    let out = run(&c, task, &mut d, OodaConfig::default()).await;
    assert_eq!(out.state, OodaState::Completed);
    assert_eq!(d.allowed.len(), 2);
    let paths = |cycle: usize| -> Option<Vec<String>> {
        let tools = d.allowed[cycle].as_ref().expect("narrowed");
        let (_, schema) = tools.iter().find(|(n, _)| n == "read_file")?;
        Some(
            schema["properties"]["path"]["enum"]
                .as_array()
                .expect("typed paths")
                .iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect(),
        )
    };
    // First cycle: the file the task names comes first (rule 2).
    assert_eq!(paths(0), Some(vec!["notes.txt".to_string()]));
    // Second cycle: notes.txt was read; read_file is offered for the other file only.
    let second = paths(1).expect("read_file still offered");
    assert!(!second.iter().any(|p| p == "notes.txt"), "{second:?}");
    assert!(second.iter().any(|p| p == "other.txt"), "{second:?}");

    // Without narrowing, the constraint is the prompt's tool set.
    let mut d = ScriptedDecider::new([read("notes.txt"), answer("alpha")]);
    let config = OodaConfig {
        narrow: false,
        ..OodaConfig::default()
    };
    run(&c, task, &mut d, config).await;
    assert!(d.allowed.iter().all(Option::is_none));
}

#[tokio::test]
async fn at_the_loop_limit_a_session_that_observed_something_answers_from_it() {
    let c = case(&[("a.txt", "alpha\n"), ("b.txt", "beta\n")]);
    let task = "What do the files say?";
    let config = OodaConfig {
        max_loops: 2,
        ..OodaConfig::default()
    };
    let mut d = ScriptedDecider::new([read("a.txt"), read("b.txt")])
        .with_answers(["alpha and beta".to_string()]);
    let out = run(&c, task, &mut d, config.clone()).await;
    assert_eq!(out.state, OodaState::Completed);
    assert_eq!(out.answer.as_deref(), Some("alpha and beta"));
    assert!(out
        .detail
        .as_deref()
        .is_some_and(|d| d.contains("answered from the observations")));
    assert_eq!(d.answer_inputs[0].len(), 2, "both reads were shown");
    // The answer is in the audit chain like any final answer.
    let events = boyd::agent::audit::read_events(&out.run_dir).expect("audit");
    assert!(events.iter().any(|e| matches!(
        &e.event,
        boyd::agent::audit::AuditEvent::Intent { tool, .. } if tool == "final_answer"
    )));

    // Nothing to answer from (no answer written): the limit stands.
    let mut d = ScriptedDecider::new([read("a.txt"), read("b.txt")]);
    let out = run(&c, task, &mut d, config).await;
    assert_eq!(out.state, OodaState::MaxLoopsExceeded);
    assert!(out.answer.is_none());
}

#[tokio::test]
async fn once_only_the_final_answer_is_left_the_answer_step_writes_it_without_a_decide_call() {
    let c = case(&[]);
    let task = "Use the calculator for 12 * 4 + 3.";
    // One scripted turn: a second Decide call would find the script empty.
    let mut d = ScriptedDecider::new([ScriptedDecision::Propose(vec![Candidate::tool(
        "calculator",
        json!({"expression": "12 * 4 + 3"}),
    )])])
    .with_answers(["51".to_string()]);
    let out = run(&c, task, &mut d, OodaConfig::default()).await;
    assert_eq!(out.state, OodaState::Completed, "{out:?}");
    assert_eq!(out.answer.as_deref(), Some("51"));
    assert_eq!(d.seen.len(), 1, "one Decide call, for the calculator");
    assert_eq!(d.answer_inputs.len(), 1);
    assert!(
        d.answer_inputs[0][0].contains("51"),
        "{:?}",
        d.answer_inputs
    );
    let phases = std::fs::read_to_string(out.run_dir.join("ooda.jsonl")).expect("phase log");
    assert!(
        phases.contains("only the final answer is left"),
        "the decision record says why no model was asked: {phases}"
    );
}

/// An answer that is the examples' `<…>` placeholder, before anything was read, is refused:
/// the refusal is in the audit log and the decider's next proposal runs.
#[tokio::test]
async fn a_placeholder_answer_is_refused_and_the_decider_goes_on() {
    let c = case(&[("config.toml", "[server]\nport = 8080\n")]);
    let task = "Which port does the server in config.toml listen on?";
    let mut d = ScriptedDecider::new([answer("<result>"), read("config.toml"), answer("8080")])
        .with_answers(["8080".to_string()]);
    let out = run(&c, task, &mut d, OodaConfig::default()).await;
    assert_eq!(out.state, OodaState::Completed, "{out:?}");
    assert_eq!(out.answer.as_deref(), Some("8080"));
    let audit = std::fs::read_to_string(out.run_dir.join("audit.jsonl")).expect("audit log");
    assert!(audit.contains("placeholder"), "{audit}");
}

#[tokio::test]
async fn a_missing_file_stays_a_not_found_fact_for_the_answer_step() {
    let c = case(&[("present.txt", "x\n")]);
    let task = "How many lines does missing.txt have?";
    let mut d = ScriptedDecider::new([read("missing.txt"), answer("the count")])
        .with_answers(["missing.txt was not found".to_string()]);
    let out = run(&c, task, &mut d, OodaConfig::default()).await;
    assert_eq!(out.state, OodaState::Completed, "{out:?}");
    // The transcript step keeps the tool's error kind (the answer step answers "not found"
    // from it, as it does in ReAct), and the answer step was given the error.
    let transcript =
        std::fs::read_to_string(out.run_dir.join("transcript.jsonl")).expect("transcript");
    assert!(transcript.contains("\"not_found\""), "{transcript}");
    assert!(
        d.answer_inputs[0]
            .iter()
            .any(|o| o.contains("does not exist")),
        "{:?}",
        d.answer_inputs
    );
}

#[tokio::test]
async fn a_word_problems_answer_is_the_answer_steps_even_with_nothing_observed() {
    let c = case(&[]);
    let task = "A crate holds 12 boxes of 4 bottles, plus 3 loose bottles. How many bottles?";
    // The decider answers at once with its own arithmetic; the answer step (a program, with
    // a model) writes the answer from no steps at all.
    let mut d = ScriptedDecider::new([answer("48")]).with_answers(["51".to_string()]);
    let out = run(&c, task, &mut d, OodaConfig::default()).await;
    assert_eq!(out.state, OodaState::Completed, "{out:?}");
    assert_eq!(out.answer.as_deref(), Some("51"));
    assert_eq!(d.seen.len(), 1, "one Decide call");
    assert_eq!(d.answer_inputs.len(), 1, "the answer step ran once");
    assert!(d.answer_inputs[0].is_empty(), "on no steps");
}
