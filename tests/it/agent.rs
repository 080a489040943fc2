//! Agent core and the ReAct loop, driven by scripted planners and a fake language model.

use std::collections::VecDeque;
use std::path::Path;
use std::time::Duration;

use serde_json::{json, Value};

use boyd::agent::answer::AnswerMode;
use boyd::agent::condense::sha256_hex;
use boyd::agent::eval::{parse_suite, run_task, Checker, EvalOptions, EvalTask};
use boyd::agent::parse::{parse_action, ActionParseError};
use boyd::agent::planner::{
    render_messages, system_prompt, ConstraintMode, LmPlanner, LmPlannerConfig,
};
use boyd::agent::react::{self, AgentEvent, Limits};
use boyd::agent::rundir::{list_runs, read_transcript, Record, RunDir};
use boyd::agent::tools::{
    FinalAnswer, RiskProfile, Sandbox, SandboxError, Shell, ShellPolicy, Tool, ToolContext,
    ToolError, ToolErrorKind, Toolset,
};
use boyd::agent::types::{Action, AnswerBy, ObservationKind, RunOutcome, StopReason};
use boyd::agent::{ScriptedPlanner, ScriptedTurn};
use boyd::lm::{
    CancelToken, ChatMessage, Constraint, FinishReason, GenOutput, GenRequest, LanguageModel,
    LmError, Usage,
};

// ---------------------------------------------------------------------------------------------
// helpers

/// A tool that returns a fixed text (optionally polling, optionally irreversible).
struct Echo {
    name: &'static str,
    text: String,
    polls: bool,
    reversible: bool,
}

impl Echo {
    fn new(name: &'static str, text: impl Into<String>) -> Self {
        Self {
            name,
            text: text.into(),
            polls: false,
            reversible: true,
        }
    }
}

impl Tool for Echo {
    fn name(&self) -> &str {
        self.name
    }
    fn description(&self) -> &str {
        "test tool"
    }
    fn args_schema(&self) -> Value {
        json!({"type": "object", "properties": {"n": {"type": "integer"}}, "additionalProperties": false})
    }
    fn risk(&self) -> RiskProfile {
        RiskProfile {
            reversible: self.reversible,
            ..RiskProfile::default()
        }
    }
    fn polls(&self) -> bool {
        self.polls
    }
    fn call(&self, _args: Value, _ctx: &ToolContext) -> Result<String, ToolError> {
        Ok(self.text.clone())
    }
}

/// A tool that panics.
struct Boom;
impl Tool for Boom {
    fn name(&self) -> &str {
        "boom"
    }
    fn description(&self) -> &str {
        "panics"
    }
    fn args_schema(&self) -> Value {
        json!({"type": "object"})
    }
    fn call(&self, _args: Value, _ctx: &ToolContext) -> Result<String, ToolError> {
        panic!("boom tool panicked on purpose")
    }
}

struct Env {
    _home: tempfile::TempDir,
    home: std::path::PathBuf,
    ws: tempfile::TempDir,
}

fn env() -> Env {
    let home = tempfile::tempdir().expect("home");
    let ws = tempfile::tempdir().expect("ws");
    Env {
        home: home.path().to_path_buf(),
        _home: home,
        ws,
    }
}

fn run_with(
    e: &Env,
    planner: &mut dyn boyd::agent::Planner,
    tools: &Toolset,
    limits: &Limits,
    cancel: &CancelToken,
) -> RunOutcome {
    let run_dir = RunDir::create(&e.home).expect("run dir");
    let ws = Sandbox::new(e.ws.path()).expect("sandbox");
    react::run(
        "test task",
        planner,
        tools,
        limits,
        run_dir,
        Some(ws),
        cancel,
        &mut |_ev: &AgentEvent<'_>| {},
    )
    .expect("run")
}

fn run_script(
    e: &Env,
    turns: Vec<ScriptedTurn>,
    tools: &Toolset,
    limits: &Limits,
) -> (RunOutcome, ScriptedPlanner) {
    let mut p = ScriptedPlanner::new(turns);
    let out = run_with(e, &mut p, tools, limits, &CancelToken::new());
    (out, p)
}

/// `run_script` with the built-in tools and the default limits.
fn run_builtin(e: &Env, turns: Vec<ScriptedTurn>) -> RunOutcome {
    run_script(e, turns, &Toolset::builtin(None), &Limits::default()).0
}

fn steps_of(outcome: &RunOutcome) -> Vec<boyd::agent::Step> {
    read_transcript(&outcome.run_dir.join("transcript.jsonl"))
        .expect("transcript")
        .into_iter()
        .filter_map(|r| match r {
            Record::Step(s) => Some(s),
            _ => None,
        })
        .collect()
}

fn calc(expr: &str) -> ScriptedTurn {
    ScriptedTurn::tool("calculator", json!({ "expression": expr }))
}

// ---------------------------------------------------------------------------------------------
// stop reasons

#[test]
fn completed_with_calculator_and_run_dir_written() {
    let e = env();
    let out = run_builtin(
        &e,
        vec![calc("1234 * 5678"), ScriptedTurn::answer("7006652")],
    );
    assert_eq!(out.stop, StopReason::Completed);
    assert_eq!(out.answer.as_deref(), Some("7006652"));
    // The planner's own final answer: the model's.
    assert_eq!(out.answer_by, Some(AnswerBy::Model));
    assert_eq!(out.steps, 2);
    let steps = steps_of(&out);
    assert_eq!(steps[0].observation.text, "7006652");
    assert_eq!(steps[0].observation.kind, ObservationKind::Output);
    // transcript: start, 2 steps, end; outcome.json readable; runs list finds it
    let recs = read_transcript(&out.run_dir.join("transcript.jsonl")).expect("read");
    assert!(matches!(recs.first(), Some(Record::Start { .. })));
    assert!(matches!(recs.last(), Some(Record::End(o)) if o.stop == StopReason::Completed));
    let text = std::fs::read_to_string(out.run_dir.join("outcome.json")).expect("outcome");
    let back: RunOutcome = serde_json::from_str(&text).expect("parse outcome");
    assert_eq!(back, out);
    let runs = list_runs(&e.home).expect("list");
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].id, out.run_id);
}

#[test]
fn final_answer_tool_call_completes() {
    let e = env();
    let out = run_builtin(
        &e,
        vec![
            calc("6 * 7"),
            ScriptedTurn::tool("final_answer", json!({"answer": 42})),
        ],
    );
    assert_eq!(out.stop, StopReason::Completed);
    assert_eq!(out.answer.as_deref(), Some("42"));
}

#[test]
fn an_answer_with_a_number_from_nowhere_sends_the_planner_back_once() {
    let e = env();
    let out = run_builtin(
        &e,
        vec![
            calc("1234 * 5678"),
            ScriptedTurn::answer("about 7006653"),
            ScriptedTurn::answer("7006652"),
        ],
    );
    assert_eq!(out.stop, StopReason::Completed);
    assert_eq!(out.answer.as_deref(), Some("7006652"));
    assert_eq!(out.answer_by, Some(AnswerBy::Model));
    let steps = steps_of(&out);
    assert_eq!(steps.len(), 3);
    assert_eq!(steps[1].observation.kind, ObservationKind::Guard);
    assert!(
        steps[1].observation.text.contains("states 7006653"),
        "{}",
        steps[1].observation.text
    );
    // Once a run: the same made-up figure a second time is the answer.
    let e = env();
    let out = run_builtin(
        &e,
        vec![ScriptedTurn::answer("42"), ScriptedTurn::answer("42")],
    );
    assert_eq!(out.answer.as_deref(), Some("42"));
    assert_eq!(out.steps, 2);
}

#[test]
fn an_answer_step_that_makes_up_a_number_loses_to_the_planners_grounded_answer() {
    let limits = Limits {
        answer: AnswerMode::Observations,
        ..Limits::default()
    };
    let run = |planner_says: &str, step_says: &str| {
        let e = env();
        let mut planner = ScriptedPlanner::new(vec![
            calc("17 * 23 + 4"),
            ScriptedTurn::answer(planner_says),
        ])
        .with_answers([step_says]);
        let tools = Toolset::builtin(None);
        let out = run_with(&e, &mut planner, &tools, &limits, &CancelToken::new());
        (out.answer.clone(), out.answer_by, steps_of(&out))
    };
    let (answer, by, steps) = run("395", "17 * 23 + 4 = 402");
    assert_eq!(answer.as_deref(), Some("395"));
    assert_eq!(by, Some(AnswerBy::Model));
    assert!(steps[1].thought.contains("402"), "{}", steps[1].thought);
    // A grounded rewrite is kept.
    let (answer, _, _) = run("I think 400", "395");
    assert_eq!(answer.as_deref(), Some("395"));
}

#[test]
fn max_steps_stops_the_run() {
    let e = env();
    let tools = Toolset::builtin(None);
    let limits = Limits {
        max_steps: 2,
        ..Limits::default()
    };
    let (out, _) = run_script(
        &e,
        vec![calc("1+1"), calc("2+2"), calc("3+3")],
        &tools,
        &limits,
    );
    assert_eq!(out.stop, StopReason::MaxSteps);
    assert_eq!(out.steps, 2);
    assert!(out.answer.is_none());
}

#[test]
fn stuck_after_three_identical_actions() {
    let e = env();
    let out = run_builtin(
        &e,
        vec![calc("1+1"), calc("1+1"), calc(" 1+1"), calc("1+1")],
    );
    // " 1+1" has a different fingerprint, so the third identical one is the fourth turn.
    assert_eq!(out.stop, StopReason::Stuck);
    assert_eq!(out.steps, 4);
    let steps = steps_of(&out);
    assert_eq!(steps[3].observation.kind, ObservationKind::Guard);
    assert_eq!(steps[0].fingerprint, steps[3].fingerprint);
    assert_ne!(steps[0].fingerprint, steps[2].fingerprint);
}

#[test]
fn stuck_ignores_argument_key_order() {
    let e = env();
    let a = ScriptedTurn::tool("search_text", json!({"pattern": "x", "path": "."}));
    let b: Value = serde_json::from_str(r#"{"path": ".", "pattern": "x"}"#).expect("json");
    let b = ScriptedTurn::tool("search_text", b);
    let out = run_builtin(&e, vec![a.clone(), b, a]);
    assert_eq!(out.stop, StopReason::Stuck);
}

#[test]
fn polling_tools_are_exempt_from_stuck() {
    let e = env();
    let mut poll = Echo::new("poll", "not yet");
    poll.polls = true;
    let tools = Toolset::new().with(poll);
    let mut turns: Vec<ScriptedTurn> = (0..5)
        .map(|_| ScriptedTurn::tool("poll", json!({})))
        .collect();
    turns.push(ScriptedTurn::answer("done"));
    let (out, _) = run_script(&e, turns, &tools, &Limits::default());
    assert_eq!(out.stop, StopReason::Completed);
    assert_eq!(out.steps, 6);
}

#[test]
fn repeated_failed_action_gets_a_guard_observation() {
    let e = env();
    // Not an empty workspace (there, the file readers are not offered at all).
    std::fs::write(e.ws.path().join("other.txt"), "x\n").expect("write");
    let missing = ScriptedTurn::tool("read_file", json!({"path": "nope.txt"}));
    let out = run_builtin(
        &e,
        vec![missing.clone(), missing, ScriptedTurn::answer("gave up")],
    );
    assert_eq!(out.stop, StopReason::Completed);
    let steps = steps_of(&out);
    assert_eq!(
        steps[0].observation.kind,
        ObservationKind::ToolError {
            kind: ToolErrorKind::NotFound
        }
    );
    assert_eq!(steps[1].observation.kind, ObservationKind::Guard);
    let t = &steps[1].observation.text;
    assert!(t.contains("you already ran this exact action"), "{t}");
    assert!(t.contains("nope.txt does not exist"), "{t}");
    assert!(t.contains("choose a different approach"), "{t}");
}

#[test]
fn cancelled_during_generation_and_before_start() {
    let e = env();
    let tools = Toolset::builtin(None);
    let out = run_builtin(&e, vec![calc("1+1"), ScriptedTurn::Cancel]);
    assert_eq!(out.stop, StopReason::Cancelled);
    assert_eq!(out.steps, 1);

    let cancel = CancelToken::new();
    cancel.cancel();
    let mut p = ScriptedPlanner::new(vec![calc("1+1")]);
    let out = run_with(&e, &mut p, &tools, &Limits::default(), &cancel);
    assert_eq!(out.stop, StopReason::Cancelled);
    assert_eq!(out.steps, 0);
    assert!(
        p.prompts.is_empty(),
        "the planner must not be called after cancel"
    );
}

#[test]
fn irreversible_tool_escalates_without_running() {
    let e = env();
    let mut danger = Echo::new("delete_all", "deleted");
    danger.reversible = false;
    let tools = Toolset::builtin(None).with(danger);
    let (out, _) = run_script(
        &e,
        vec![
            ScriptedTurn::tool("delete_all", json!({})),
            ScriptedTurn::answer("x"),
        ],
        &tools,
        &Limits::default(),
    );
    assert_eq!(out.stop, StopReason::Escalated);
    let steps = steps_of(&out);
    assert_eq!(steps[0].observation.kind, ObservationKind::Guard);
    assert!(!steps[0].observation.text.contains("deleted"));
}

#[test]
fn context_exhausted_from_planner_and_from_estimate() {
    let e = env();
    let tools = Toolset::builtin(None);
    let out = run_builtin(&e, vec![calc("1+1"), ScriptedTurn::ContextFull]);
    assert_eq!(out.stop, StopReason::ContextExhausted);

    // A window smaller than the system prompt: nothing to collapse, so the loop stops itself.
    let mut p = ScriptedPlanner::new(vec![calc("1+1")]).with_context_window(50);
    let out = run_with(&e, &mut p, &tools, &Limits::default(), &CancelToken::new());
    assert_eq!(out.stop, StopReason::ContextExhausted);
    assert!(out
        .detail
        .as_deref()
        .unwrap_or("")
        .contains("context is 50"));
    assert!(p.prompts.is_empty());
}

#[test]
fn wall_clock_and_token_budgets() {
    let e = env();
    let tools = Toolset::builtin(None);
    let limits = Limits {
        wall_clock: Some(Duration::ZERO),
        ..Limits::default()
    };
    let (out, _) = run_script(&e, vec![calc("1+1")], &tools, &limits);
    assert_eq!(out.stop, StopReason::WallClock);

    let limits = Limits {
        max_generated_tokens: Some(5),
        ..Limits::default()
    };
    let (out, _) = run_script(
        &e,
        vec![calc("1+1"), calc("2+2"), calc("3+3")],
        &tools,
        &limits,
    );
    assert_eq!(out.stop, StopReason::TokenBudget);
    assert_eq!(out.steps, 1);
    assert!(out.usage.generated_tokens >= 5);
}

// ---------------------------------------------------------------------------------------------
// model mistakes become observations

#[test]
fn unknown_tool_bad_args_parse_errors_and_panics_are_observations() {
    let e = env();
    let tools = Toolset::builtin(None).with(Boom);
    let (out, _) = run_script(
        &e,
        vec![
            ScriptedTurn::tool("teleport", json!({})),
            ScriptedTurn::tool("calculator", json!({"expr": "1+1"})),
            ScriptedTurn::Raw("I think the answer is 4".into()),
            ScriptedTurn::tool("boom", json!({})),
            ScriptedTurn::tool("calculator", json!("6*7")),
            ScriptedTurn::answer("42"),
        ],
        &tools,
        &Limits::default(),
    );
    assert_eq!(out.stop, StopReason::Completed);
    assert_eq!(out.parse_failures, 1);
    let s = steps_of(&out);
    assert!(s[0].observation.text.contains("no tool named \"teleport\""));
    assert!(s[0].observation.text.contains("calculator"));
    assert_eq!(
        s[1].observation.kind,
        ObservationKind::ToolError {
            kind: ToolErrorKind::InvalidArgs
        }
    );
    assert!(
        s[1].observation
            .text
            .contains("Expected args: {\"expression\": string}"),
        "{}",
        s[1].observation.text
    );
    assert_eq!(s[2].observation.kind, ObservationKind::ParseError);
    assert!(s[2].action.is_none());
    assert!(s[3].observation.text.contains("crashed"));
    // a bare string argument is wrapped into the single required property
    assert_eq!(s[4].observation.text, "42");
}

#[test]
fn file_tools_see_only_the_workspace() {
    let e = env();
    std::fs::write(e.ws.path().join("notes.txt"), "alpha\nbeta gamma\nBeta\n").expect("write");
    std::fs::create_dir(e.ws.path().join("sub")).expect("mkdir");
    std::fs::write(e.ws.path().join("sub/inner.txt"), "beta inside\n").expect("write");
    let out = run_builtin(
        &e,
        vec![
            ScriptedTurn::tool("list_dir", json!({})),
            ScriptedTurn::tool(
                "read_file",
                json!({"path": "notes.txt", "start_line": 2, "max_lines": 1}),
            ),
            ScriptedTurn::tool("search_text", json!({"pattern": "beta"})),
            ScriptedTurn::tool(
                "search_text",
                json!({"pattern": "beta", "ignore_case": true, "path": "notes.txt"}),
            ),
            ScriptedTurn::tool("read_file", json!({"path": "../etc/passwd"})),
            ScriptedTurn::answer("ok"),
        ],
    );
    let s = steps_of(&out);
    assert_eq!(
        s[0].observation.text,
        "total: 1 file and 1 folder directly in .; 2 files in . and its subfolders (1 folder below it)\nby type, . and its subfolders: 2 .txt\nnotes.txt (22 bytes)\nsub/ (1 file)"
    );
    // A short file is shown whole even when a range is asked.
    assert_eq!(
        s[1].observation.text,
        "notes.txt (3 lines):\n1: alpha\n2: beta gamma\n3: Beta\n"
    );
    // Plain words match in any case.
    assert!(
        s[2].observation.text.starts_with(
            "notes.txt:2: beta gamma\nnotes.txt:3: Beta\nsub/inner.txt:1: beta inside\n(3 matches"
        ),
        "{}",
        s[2].observation.text
    );
    assert!(
        s[3].observation
            .text
            .starts_with("notes.txt:2: beta gamma\nnotes.txt:3: Beta\n(2 matches"),
        "{}",
        s[3].observation.text
    );
    assert_eq!(
        s[4].observation.kind,
        ObservationKind::ToolError {
            kind: ToolErrorKind::PermissionDenied
        }
    );
}

#[test]
fn file_tools_count_recursively_search_plain_words_and_refuse_links_and_fifos() {
    let e = env();
    let ws = e.ws.path();
    std::fs::create_dir_all(ws.join("data/deep")).expect("mkdir");
    for f in ["data/a.csv", "data/b.csv", "data/deep/c.csv"] {
        std::fs::write(ws.join(f), "x\n").expect("write");
    }
    std::fs::write(
        ws.join("log.txt"),
        "INFO start\nERROR write failed: No space left on device\nINFO done\n",
    )
    .expect("write");
    let big: String = (1..=300).map(|i| format!("row {i}\n")).collect();
    std::fs::write(ws.join("big.txt"), big).expect("write");
    std::os::unix::fs::symlink("/etc/hostname", ws.join("link.txt")).expect("symlink");
    let fifo = ws.join("pipe");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .is_ok_and(|s| s.success());
    let out = run_builtin(
        &e,
        vec![
            ScriptedTurn::tool("list_dir", json!({"path": "data"})),
            ScriptedTurn::tool("list_dir", json!({"path": "data", "recursive": true})),
            ScriptedTurn::tool("search_text", json!({"query": "space device"})),
            ScriptedTurn::tool("search_text", json!({"query": "disk space full"})),
            ScriptedTurn::tool(
                "search_text",
                json!({"query": "ERR(OR)? write", "regex": true}),
            ),
            ScriptedTurn::tool("read_file", json!({"path": "link.txt"})),
            ScriptedTurn::tool("read_file", json!({"path": "pipe"})),
            ScriptedTurn::tool(
                "read_file",
                json!({"path": "big.txt", "start_line": 250, "end_line": 251}),
            ),
            ScriptedTurn::tool("read_file", json!({"path": "c.csv"})),
            ScriptedTurn::answer("ok"),
        ],
    );
    let s = steps_of(&out);
    assert!(
        s[0].observation
            .text
            .contains("total: 2 files and 1 folder directly in data; 3 files in data and its subfolders (1 folder below it)\nby type, data and its subfolders: 3 .csv"),
        "{}",
        s[0].observation.text
    );
    // Paths are shown from the workspace root, ready for read_file.
    assert!(s[0].observation.text.contains("data/deep/ (1 file)"));
    assert!(s[0].observation.text.contains("data/a.csv (2 bytes)"));
    assert!(
        s[1].observation
            .text
            .contains("total: 2 files and 1 folder directly in data; 3 files in data and its subfolders (1 folder below it)"),
        "{}",
        s[1].observation.text
    );
    assert!(s[1].observation.text.contains("deep/c.csv"));
    assert!(s[2]
        .observation
        .text
        .starts_with("log.txt:2: ERROR write failed"));
    // Not every word is there: the closest lines are shown instead of "no matches".
    assert!(
        s[3].observation.text.contains("no line has all the words")
            && s[3].observation.text.contains("log.txt:2:"),
        "{}",
        s[3].observation.text
    );
    assert!(s[4].observation.text.starts_with("log.txt:2:"));
    assert_eq!(
        s[5].observation.kind,
        ObservationKind::ToolError {
            kind: ToolErrorKind::PermissionDenied
        }
    );
    if made {
        // Refused without opening it: a FIFO would block the step forever.
        assert_eq!(
            s[6].observation.kind,
            ObservationKind::ToolError {
                kind: ToolErrorKind::PermissionDenied
            }
        );
    }
    // A two-line window of a long file is widened to 12 lines.
    let expected: String = std::iter::once("big.txt lines 250-261 of 300:\n".to_string())
        .chain((250..=261).map(|i| format!("{i}: row {i}\n")))
        .collect();
    assert_eq!(s[7].observation.text, expected);
    // A missing path names the files with that name elsewhere in the workspace.
    assert!(
        s[8].observation.text.contains("data/deep/c.csv"),
        "{}",
        s[8].observation.text
    );
}

// ---------------------------------------------------------------------------------------------
// condenser and context collapse

#[test]
fn long_observation_is_condensed_to_a_blob_and_paged() {
    let e = env();
    let long: String = (0..300)
        .map(|i| format!("line {i:04} of the long output\n"))
        .collect();
    let tools = Toolset::builtin(None).with(Echo::new("dump", long.clone()));
    let sha = sha256_hex(long.as_bytes());
    let (out, _) = run_script(
        &e,
        vec![
            ScriptedTurn::tool("dump", json!({})),
            ScriptedTurn::tool("read_blob", json!({"blob": sha, "offset": 1200})),
            ScriptedTurn::answer("done"),
        ],
        &tools,
        &Limits::default(),
    );
    let s = steps_of(&out);
    let obs = &s[0].observation;
    assert_eq!(obs.blob.as_deref(), Some(sha.as_str()));
    assert_eq!(obs.bytes, long.len());
    let blob = out.run_dir.join("blobs").join(format!("{sha}.txt"));
    assert_eq!(std::fs::read_to_string(&blob).expect("blob"), long);
    assert!(obs.text.starts_with("line 0000 of the long output\n"));
    assert!(
        obs.text.contains("line 0299 of the long output"),
        "tail missing"
    );
    assert!(obs.text.ends_with(&format!(
        "[Observation truncated: {} bytes, 300 lines; full output stored as blob {sha}; use read_blob to page]",
        long.len()
    )));
    assert!(
        obs.text.chars().count() <= 1500,
        "preview is {} chars",
        obs.text.chars().count()
    );
    // read_blob pages from the offset, and the page is not condensed again
    let page = &s[1].observation;
    assert!(page.blob.is_none());
    assert!(page.text.contains("characters 1200..2400 of"));
    assert!(page.text.contains(&long[1200..1300]));
}

#[test]
fn context_collapse_shrinks_older_observations_and_is_recorded() {
    let e = env();
    let body: String = (0..25)
        .map(|i| format!("row {i:02}: {}\n", "x".repeat(40)))
        .collect(); // ~1.2 KB
    let tools = Toolset::new().with(Echo::new("fetch", body.clone()));
    let turns: Vec<ScriptedTurn> = (0..6)
        .map(|i| ScriptedTurn::tool("fetch", json!({ "n": i })))
        .chain([ScriptedTurn::answer("done")])
        .collect();
    // System prompt + task ~ 150 tokens; each step adds ~330 tokens; 0.75 * 1400 = 1050.
    let mut p = ScriptedPlanner::new(turns).with_context_window(1400);
    let out = run_with(&e, &mut p, &tools, &Limits::default(), &CancelToken::new());
    assert_eq!(out.stop, StopReason::Completed, "{:?}", out.detail);
    let recs = read_transcript(&out.run_dir.join("transcript.jsonl")).expect("read");
    let collapses: Vec<(Vec<usize>, usize, usize)> = recs
        .iter()
        .filter_map(|r| match r {
            Record::Collapse {
                steps,
                tokens_before,
                tokens_after,
                ..
            } => Some((steps.clone(), *tokens_before, *tokens_after)),
            _ => None,
        })
        .collect();
    assert!(!collapses.is_empty(), "no collapse recorded");
    let (first, before, after) = &collapses[0];
    assert_eq!(first[0], 1, "the oldest observation collapses first");
    assert!(after < before);
    // The prompt after the collapse shows the preview, not the full text, for step 1 ...
    let idx = p
        .prompts
        .iter()
        .position(|m| {
            m.iter()
                .any(|c| c.content.contains("[collapsed to save context"))
        })
        .expect("a prompt with a collapsed observation");
    let prompt = &p.prompts[idx];
    assert!(prompt[3].content.contains("[collapsed to save context"));
    // ... and the latest observations stay whole.
    assert_eq!(
        prompt.last().map(|m| m.content.clone()),
        Some(format!("Observation: {body}"))
    );
    // The collapsed text points at a blob holding the full output.
    assert!(
        std::fs::read_dir(out.run_dir.join("blobs"))
            .expect("blobs")
            .count()
            >= 1
    );
    let blob = out
        .run_dir
        .join("blobs")
        .join(format!("{}.txt", sha256_hex(body.as_bytes())));
    assert!(blob.is_file());
}

// ---------------------------------------------------------------------------------------------
// LmPlanner over a fake model: prompts extend each other; prefix reuse is visible

/// A fake chat model with a string "KV cache": reuse is the common prefix of the rendered prompt
/// with what the cache holds (the last prompt plus the reply), as a real session would do.
struct FakeLm {
    replies: VecDeque<String>,
    requests: Vec<GenRequest>,
    /// The calculation requests, apart from `requests`.
    calculations: Vec<GenRequest>,
    cache: String,
    context: usize,
}

impl FakeLm {
    /// A model that answers `replies` in turn, with a context of `context` tokens.
    fn new(replies: &[&str], context: usize) -> Self {
        Self {
            replies: replies.iter().map(|s| s.to_string()).collect(),
            requests: Vec::new(),
            calculations: Vec::new(),
            cache: String::new(),
            context,
        }
    }
}

/// The tools a planner request's schema offers (`anyOf` of `{"tool": {"const": …}}`).
fn offered_tools(req: &GenRequest) -> Vec<String> {
    let Some(Constraint::JsonSchema(schema)) = &req.constraint else {
        panic!("no JSON schema constraint");
    };
    schema["anyOf"]
        .as_array()
        .expect("anyOf")
        .iter()
        .filter_map(|b| {
            b["properties"]["tool"]["const"]
                .as_str()
                .map(str::to_string)
        })
        .collect()
}

/// Run the ReAct loop in `e` with the built-in tools and an `LmPlanner` over `lm`.
fn run_lm(e: &Env, lm: &mut FakeLm) -> RunOutcome {
    let tools = Toolset::builtin(None);
    let mut planner = LmPlanner::new(lm, LmPlannerConfig::default());
    run_with(
        e,
        &mut planner,
        &tools,
        &Limits::default(),
        &CancelToken::new(),
    )
}

fn template(messages: &[ChatMessage]) -> String {
    let mut s = String::new();
    for m in messages {
        s.push_str(&format!("<|{}|>{}<|end|>", m.role.as_str(), m.content));
    }
    s.push_str("<|assistant|>");
    s
}

impl LanguageModel for FakeLm {
    fn generate(
        &mut self,
        req: &GenRequest,
        on_text: &mut dyn FnMut(&str),
        _cancel: &CancelToken,
    ) -> Result<GenOutput, LmError> {
        // The calculation request (`agent::query::calculation`) takes the next scripted reply
        // when that is a calculation (`{"kind": …}`), else gets none, so the planner's own call
        // runs; it is kept apart and not cached (the prompts these tests follow are the
        // planner's).
        // The listing request (`agent::query::listing`) likewise, its scripted reply a
        // listing (`{"path": …}`).
        use boyd::agent::query::calculation::{SYSTEM_HEAD, SYSTEM_HEAD_OPTIONAL};
        let system = req.messages.first().map_or("", |m| m.content.as_str());
        let listing = system == boyd::agent::query::listing::SYSTEM;
        if listing || system.starts_with(SYSTEM_HEAD) || system.starts_with(SYSTEM_HEAD_OPTIONAL) {
            let head = if listing { "{\"path\"" } else { "{\"kind\"" };
            let scripted = self.replies.front().is_some_and(|r| r.starts_with(head));
            let text = if scripted {
                self.replies.pop_front().unwrap_or_default()
            } else {
                "{}".into()
            };
            self.calculations.push(req.clone());
            return Ok(GenOutput {
                text,
                finish: FinishReason::Eos,
                usage: Usage::default(),
            });
        }
        self.requests.push(req.clone());
        let prompt = template(&req.messages);
        let reused = self
            .cache
            .chars()
            .zip(prompt.chars())
            .take_while(|(a, b)| a == b)
            .count();
        let text = self
            .replies
            .pop_front()
            .ok_or_else(|| LmError::Backend("no reply".into()))?;
        on_text(&text);
        let total = prompt.chars().count();
        self.cache = format!("{prompt}{text}<|end|>");
        Ok(GenOutput {
            text: text.clone(),
            finish: FinishReason::Eos,
            usage: Usage {
                prompt_tokens: total,
                reused_tokens: reused,
                prefilled_tokens: total - reused,
                generated_tokens: text.chars().count(),
                ..Usage::default()
            },
        })
    }
    fn context_length(&self) -> usize {
        self.context
    }
    fn name(&self) -> String {
        "fake".into()
    }
}

/// A first calculator call is written by the calculation request, and the answer follows it;
/// an answer after reading a file with no calculation may become one first.
#[test]
fn the_calculation_request_writes_the_first_calculator_call_and_the_answer_comes_next() {
    let e = env();
    std::fs::write(
        e.ws.path().join("lease.yaml"),
        "start: 2026-02-01\nend: 2027-07-31\n",
    )
    .expect("write");
    let replies = [
        r#"{"thought": "read it", "tool": "read_file", "args": {"path": "lease.yaml"}}"#,
        r#"{"thought": "count", "tool": "calculator", "args": {"expression": "31 - 7"}}"#,
        r#"{"kind": "weekday", "date": "2027-07-31"}"#,
        r#"{"thought": "done", "tool": "final_answer", "args": {"answer": "Saturday"}}"#,
        "Saturday",
    ];
    let mut lm = FakeLm::new(&replies, 1_000_000);
    let out = run_lm(&e, &mut lm);
    assert_eq!(out.stop, StopReason::Completed);
    assert_eq!(out.answer.as_deref(), Some("Saturday"));
    let steps = steps_of(&out);
    let calc = &steps[1];
    assert_eq!(
        calc.action,
        Some(Action::ToolCall {
            name: "calculator".into(),
            args: json!({"expression": "weekday(2027-07-31)"})
        })
    );
    assert!(calc.observation.text.contains("Saturday"));
    assert!(calc.thought.contains("[the calculation:"));
    // The request saw the file it could calculate from; the step after it allowed only the
    // answer.
    assert_eq!(lm.calculations.len(), 1);
    assert!(lm.calculations[0].messages[1]
        .content
        .contains("2027-07-31"));
    assert_eq!(offered_tools(&lm.requests[2]), ["final_answer"]);
}

#[test]
fn the_listing_request_writes_the_first_list_dir_call_and_a_filtered_listing_is_answered() {
    let e = env();
    std::fs::create_dir_all(e.ws.path().join("docs/guide")).expect("mkdir");
    for f in ["docs/index.md", "docs/guide/intro.md", "docs/logo.png"] {
        std::fs::write(e.ws.path().join(f), "x").expect("write");
    }
    let replies = [
        r#"{"thought": "look", "tool": "list_dir", "args": {"path": "docs"}}"#,
        r#"{"path": "docs/", "depth": "all", "show": "files", "ext": ".md"}"#,
        r#"{"thought": "done", "tool": "final_answer", "args": {"answer": "2"}}"#,
        "2",
    ];
    let mut lm = FakeLm::new(&replies, 1_000_000);
    let out = run_lm(&e, &mut lm);
    assert_eq!(out.stop, StopReason::Completed);
    assert_eq!(out.answer.as_deref(), Some("2"));
    let steps = steps_of(&out);
    assert_eq!(
        steps[0].action,
        Some(Action::ToolCall {
            name: "list_dir".into(),
            args: json!({"path": "docs/", "recursive": true, "ext": "md"})
        })
    );
    assert!(
        steps[0]
            .observation
            .text
            .starts_with("total: 2 .md files in docs and its subfolders\n"),
        "{}",
        steps[0].observation.text
    );
    assert!(steps[0].thought.contains("[the listing:"));
    // The listing the request filtered answers: the next step allowed only the answer.
    assert_eq!(offered_tools(&lm.requests[1]), ["final_answer"]);
}

#[test]
fn lm_planner_prompts_extend_each_other_and_prefill_only_new_tokens() {
    let e = env();
    std::fs::write(e.ws.path().join("n.txt"), "41\n").expect("write");
    let replies = [
        r#"{"thought": "look", "tool": "list_dir", "args": {}}"#,
        r#"{"thought": "read it", "tool": "read_file", "args": {"path": "n.txt"}}"#,
        r#"{"thought": "add one", "tool": "calculator", "args": {"expression": "41 + 1"}}"#,
        r#"{"thought": "check", "tool": "calculator", "args": {"expression": "42 * 1"}}"#,
        r#"{"thought": "done", "tool": "final_answer", "args": {"answer": "42"}}"#,
        // The answer step's reply (a plain line over the tool outputs).
        "42",
    ];
    let mut lm = FakeLm::new(&replies, 1_000_000);
    let tools = Toolset::builtin(None);
    let mut streamed = String::new();
    let out = {
        let mut planner = LmPlanner::new(&mut lm, LmPlannerConfig::default())
            .with_stream(|t| streamed.push_str(t));
        run_with(
            &e,
            &mut planner,
            &tools,
            &Limits {
                // Step-by-step narrowing (tested in `agent::narrow`) would drop a tool whose
                // values are spent; this test is about the prompt and the tool set it names.
                narrow: false,
                ..Limits::default()
            },
            &CancelToken::new(),
        )
    };
    assert_eq!(out.stop, StopReason::Completed);
    assert_eq!(out.answer.as_deref(), Some("42"));
    assert_eq!(out.steps, 5);
    assert_eq!(out.parse_failures, 0);
    assert!(streamed.contains("final_answer"));
    let steps = steps_of(&out);
    // Five planner steps, then the answer step: unconstrained, one line, over the outputs.
    assert_eq!(lm.requests.len(), 6);
    let answer_req = lm.requests.pop().expect("answer request");
    assert!(answer_req.constraint.is_none());
    assert_eq!(answer_req.stop, vec!["\n".to_string()]);
    assert!(answer_req.messages[1].content.contains("[3] calculator"));
    // What the fake model prefilled for the answer step: its prompt past the common prefix.
    let answer_req_prefilled = {
        let prompt = template(&answer_req.messages);
        let last = template(&lm.requests[lm.requests.len() - 1].messages) + replies[4] + "<|end|>";
        let common = last
            .chars()
            .zip(prompt.chars())
            .take_while(|(a, b)| a == b)
            .count();
        prompt.chars().count() - common
    };
    for k in 1..lm.requests.len() {
        let prev = &lm.requests[k - 1].messages;
        let cur = &lm.requests[k].messages;
        // prefix property: same earlier messages, byte for byte, plus reply + observation
        assert_eq!(
            &cur[..prev.len()],
            &prev[..],
            "step {} prompt is not an extension",
            k + 1
        );
        assert_eq!(cur.len(), prev.len() + 2);
        assert_eq!(
            cur[prev.len()].content,
            replies[k - 1],
            "the model's reply is replayed verbatim"
        );
        // only the new observation message and the assistant header are prefilled
        let new_part = format!("<|user|>{}<|end|><|assistant|>", cur[cur.len() - 1].content);
        // The last step's usage also holds its answer step's request (a fresh prompt).
        let answer_part = if k + 1 == steps.len() {
            answer_req_prefilled
        } else {
            0
        };
        assert_eq!(
            steps[k].usage.prefilled_tokens,
            new_part.chars().count() + answer_part,
            "step {}",
            k + 1
        );
        assert!(steps[k].usage.reused_tokens > steps[k].usage.prefilled_tokens);
    }
    // every request is constrained by a schema that names each tool
    for r in &lm.requests {
        let Some(Constraint::JsonSchema(schema)) = &r.constraint else {
            panic!("no JSON schema constraint");
        };
        let branches = schema["anyOf"].as_array().expect("anyOf");
        let names: Vec<&str> = branches
            .iter()
            .filter_map(|b| b["properties"]["tool"]["const"].as_str())
            .collect();
        // read_blob is offered only once an observation was condensed into a blob; the first
        // step must call a tool before it may answer.
        let offered = tools.without("read_blob");
        let mut expected = offered.names();
        if std::ptr::eq(r, &lm.requests[0]) {
            expected.retain(|n| *n != "final_answer");
        }
        assert_eq!(names, expected);
        assert!(branches
            .iter()
            .all(|b| b["required"] == json!(["thought", "tool", "args"])));
    }
}

#[test]
fn a_repeated_success_returns_the_old_result_and_the_next_step_may_not_repeat_it() {
    let e = env();
    let tools = Toolset::builtin(None).with(Echo::new("lookup", "port = 8088"));
    let (out, p) = run_script(
        &e,
        vec![
            ScriptedTurn::tool("lookup", json!({})),
            ScriptedTurn::tool("lookup", json!({})),
            ScriptedTurn::answer("8088"),
        ],
        &tools,
        &Limits::default(),
    );
    assert_eq!(out.stop, StopReason::Completed);
    let s = steps_of(&out);
    assert_eq!(s[1].observation.kind, ObservationKind::Guard);
    assert!(s[1].observation.text.contains("port = 8088"));
    assert!(s[1].observation.text.contains("final_answer"));
    // The first step's constraint allows every tool but final_answer (facts come from a tool
    // first); after the repeat, every tool but the repeated one. Every prompt lists the same
    // tools (all but read_blob), so the KV prefix of earlier steps stays valid.
    let tools_in = |k: usize| -> Vec<String> {
        p.prompts[k][0]
            .content
            .lines()
            .filter_map(|l| l.strip_prefix("- ")?.split(':').next())
            .filter(|n| n.chars().all(|c| c.is_ascii_lowercase() || c == '_'))
            .map(str::to_string)
            .collect()
    };
    let lookup = "lookup".to_string();
    let fin = "final_answer".to_string();
    assert!(p.allowed[0].contains(&lookup) && !p.allowed[0].contains(&fin));
    assert!(p.allowed[1].contains(&lookup) && p.allowed[1].contains(&fin));
    assert!(!p.allowed[2].contains(&lookup) && p.allowed[2].contains(&fin));
    assert!(p.allowed[2].contains(&"calculator".to_string()));
    assert_eq!(tools_in(2), tools_in(0));
    assert!(tools_in(0).contains(&lookup));
    assert!(!tools_in(0).contains(&"read_blob".to_string()));
}

#[test]
fn the_answer_step_writes_the_final_answer_from_the_observations() {
    let e = env();
    let tools = Toolset::builtin(None).with(Echo::new("lookup", "web 8080\ndb 5433"));
    // The planner's own answer is wrong; the answer step sees the tool output and the task.
    let mut p = ScriptedPlanner::new(vec![
        ScriptedTurn::tool("lookup", json!({})),
        ScriptedTurn::answer("8080"),
    ])
    .with_answers(["5433"]);
    let out = run_with(&e, &mut p, &tools, &Limits::default(), &CancelToken::new());
    assert_eq!(out.stop, StopReason::Completed);
    assert_eq!(out.answer.as_deref(), Some("5433"));
    assert_eq!(p.answer_prompts.len(), 1);
    let user = &p.answer_prompts[0][1].content;
    assert!(user.contains("[1] lookup\nweb 8080\ndb 5433"), "{user}");
    assert!(user.contains("Question: test task"), "{user}");
    // The step records the planner's draft (raw) and the final answer.
    let s = steps_of(&out);
    assert_eq!(s[1].observation.text, "5433");

    // With the planner writing answers, its own answer stands and no answer step runs.
    let limits = Limits {
        answer: AnswerMode::Planner,
        ..Limits::default()
    };
    let mut p = ScriptedPlanner::new(vec![
        ScriptedTurn::tool("lookup", json!({})),
        ScriptedTurn::answer("8080"),
    ])
    .with_answers(["5433"]);
    let out = run_with(&e, &mut p, &tools, &limits, &CancelToken::new());
    assert_eq!(out.answer.as_deref(), Some("8080"));
    assert!(p.answer_prompts.is_empty());
}

#[test]
fn the_planner_sees_the_workspace_top_level_and_no_file_readers_in_an_empty_one() {
    let e = env();
    std::fs::write(e.ws.path().join("config.toml"), "port = 1\n").expect("write");
    std::fs::create_dir(e.ws.path().join("data")).expect("mkdir");
    std::fs::write(e.ws.path().join("data/a.csv"), "x\n").expect("write");
    std::fs::create_dir(e.ws.path().join("data/sub")).expect("mkdir");
    std::fs::write(e.ws.path().join("data/sub/b.csv"), "y\n").expect("write");
    let tools = Toolset::builtin(None);
    let (_, p) = run_script(
        &e,
        vec![calc("1+1"), ScriptedTurn::answer("2")],
        &tools,
        &Limits::default(),
    );
    let task = &p.prompts[0][1].content;
    assert!(
        task.starts_with("Task: test task\n\nFiles in the workspace"),
        "{task}"
    );
    assert!(task.contains("config.toml"), "{task}");
    // Folders count their own files and all files below them.
    assert!(
        task.contains("data/ (1 file, 2 with its subfolders)"),
        "{task}"
    );
    assert!(p.allowed[0].contains(&"read_file".to_string()));
    // Turned off, the task stands alone.
    let limits = Limits {
        show_workspace: false,
        ..Limits::default()
    };
    let (_, p) = run_script(
        &e,
        vec![calc("1+1"), ScriptedTurn::answer("2")],
        &tools,
        &limits,
    );
    assert_eq!(p.prompts[0][1].content, "Task: test task");

    // An empty workspace: no listing, and the file readers are neither shown nor allowed.
    let e = env();
    let (out, p) = run_script(
        &e,
        vec![calc("1+1"), ScriptedTurn::answer("2")],
        &tools,
        &Limits::default(),
    );
    assert_eq!(out.stop, StopReason::Completed);
    assert_eq!(p.prompts[0][1].content, "Task: test task");
    for name in ["read_file", "list_dir", "search_text"] {
        assert!(!p.allowed[0].contains(&name.to_string()), "{name}");
        assert!(
            !p.prompts[0][0].content.contains(&format!("- {name}:")),
            "{name}"
        );
    }
    assert!(p.allowed[0].contains(&"calculator".to_string()));
}

#[test]
fn a_stuck_run_or_the_step_limit_ends_with_an_answer_from_the_observations() {
    let e = env();
    let tools = Toolset::builtin(None).with(Echo::new("lookup", "port = 8088"));
    let mut p = ScriptedPlanner::new(vec![
        ScriptedTurn::tool("lookup", json!({})),
        ScriptedTurn::tool("lookup", json!({})),
        ScriptedTurn::tool("lookup", json!({})),
    ])
    .with_answers(["8088"]);
    let out = run_with(&e, &mut p, &tools, &Limits::default(), &CancelToken::new());
    assert_eq!(out.stop, StopReason::Completed);
    assert_eq!(out.answer.as_deref(), Some("8088"));
    assert_eq!(out.steps, 4);
    let detail = out.detail.as_deref().expect("detail");
    assert!(
        detail.contains("3 times") && detail.contains("answered from"),
        "{detail}"
    );

    // The step limit: one more step, the answer step's, and the detail says why.
    let limits = Limits {
        max_steps: 2,
        ..Limits::default()
    };
    let mut p =
        ScriptedPlanner::new(vec![calc("1+1"), calc("2+2"), calc("3+3")]).with_answers(["4"]);
    let out = run_with(
        &e,
        &mut p,
        &Toolset::builtin(None),
        &limits,
        &CancelToken::new(),
    );
    assert_eq!(out.stop, StopReason::Completed);
    assert_eq!(out.answer.as_deref(), Some("4"));
    assert_eq!(out.steps, 3);
    let detail = out.detail.as_deref().expect("detail");
    assert!(
        detail.contains("steps taken") && detail.contains("answered from"),
        "{detail}"
    );
    let s = steps_of(&out);
    assert_eq!(s[2].observation.kind, ObservationKind::Final);

    // Nothing observed (every step failed to parse): no answer step, the limit stands.
    let mut p = ScriptedPlanner::new(vec![
        ScriptedTurn::Raw("garbage".into()),
        ScriptedTurn::Raw("more garbage".into()),
    ])
    .with_answers(["never"]);
    let out = run_with(
        &e,
        &mut p,
        &Toolset::builtin(None),
        &limits,
        &CancelToken::new(),
    );
    assert_eq!(out.stop, StopReason::MaxSteps);
    assert!(out.answer.is_none());
}

#[test]
fn read_blob_is_offered_once_a_blob_exists() {
    let e = env();
    let long: String = (0..300).map(|i| format!("line {i:04}\n")).collect();
    let tools = Toolset::builtin(None).with(Echo::new("dump", long));
    let (_, p) = run_script(
        &e,
        vec![
            ScriptedTurn::tool("dump", json!({})),
            ScriptedTurn::answer("done"),
        ],
        &tools,
        &Limits::default(),
    );
    assert!(!p.prompts[0][0].content.contains("- read_blob:"));
    assert!(p.prompts[1][0].content.contains("- read_blob:"));
}

#[test]
fn lm_planner_context_error_stops_as_context_exhausted() {
    struct Full;
    impl LanguageModel for Full {
        fn generate(
            &mut self,
            _r: &GenRequest,
            _t: &mut dyn FnMut(&str),
            _c: &CancelToken,
        ) -> Result<GenOutput, LmError> {
            Err(LmError::ContextExceeded {
                prompt: 900,
                max_new: 256,
                context: 1024,
            })
        }
        fn context_length(&self) -> usize {
            1024 * 1024
        }
        fn name(&self) -> String {
            "full".into()
        }
    }
    let e = env();
    let mut m = Full;
    let mut planner = LmPlanner::new(&mut m, LmPlannerConfig::default());
    let out = run_with(
        &e,
        &mut planner,
        &Toolset::builtin(None),
        &Limits::default(),
        &CancelToken::new(),
    );
    assert_eq!(out.stop, StopReason::ContextExhausted);
}

#[test]
fn lark_constraint_names_every_tool_in_order() {
    let tools = Toolset::builtin(None);
    let mut lm = FakeLm {
        replies: VecDeque::new(),
        requests: Vec::new(),
        calculations: Vec::new(),
        cache: String::new(),
        context: 4096,
    };
    let cfg = LmPlannerConfig {
        constraint: ConstraintMode::Lark,
        ..LmPlannerConfig::default()
    };
    let planner = LmPlanner::new(&mut lm, cfg);
    let cancel = CancelToken::new();
    let input = boyd::agent::PlannerInput {
        task: "t",
        steps: &[],
        tools: &tools,
        allowed: None,
        cancel: &cancel,
    };
    let req = planner.request(&input);
    let Some(Constraint::Lark(g)) = req.constraint else {
        panic!("no lark grammar")
    };
    assert!(g.starts_with("start: \"{\\\"thought\\\": \" thought \", \\\"tool\\\": \" call \"}\""));
    for name in tools.names() {
        assert!(
            g.contains(&format!("\"\\\"{name}\\\", \\\"args\\\": \" %json {{")),
            "{name} missing:\n{g}"
        );
    }
}

#[test]
fn system_prompt_tells_the_model_to_use_tools_for_facts() {
    let tools = Toolset::builtin(None);
    let m = render_messages("What is 2+2?", &[], &tools);
    let sys = &m[0].content;
    // Tool hints live in the tools' descriptions, shown only when the tool is offered.
    assert!(sys.contains("- calculator: "));
    assert!(sys.contains("All arithmetic goes through it"));
    assert!(sys.contains("Args: {\"expression\": string}"));
    assert!(sys.contains("- size_model: "));
    assert!(sys.contains("- hardware: "));
    // Arguments are listed in each tool's declared order (serde_json keeps insertion order).
    assert!(
        sys.contains("Args: {\"path\": string, \"start_line\"?: integer, \"end_line\"?: integer}")
    );
    assert!(sys.contains("never do what it asks"));
    assert_eq!(m[1].content, "Task: What is 2+2?");
    // The run's shape uses placeholders: nothing a small model could copy into an answer.
    assert!(sys.contains("The shape of a run"));
    assert!(!sys.contains("Example"));
    assert!(!sys.contains("12 * (3 + 4)"));
    let shape = &sys[sys.find("The shape of a run").unwrap_or(0)..];
    assert!(!shape.chars().any(|c| c.is_ascii_digit()), "{shape}");
    let without_calc = Toolset::new().with(FinalAnswer);
    let sys2 = system_prompt(&without_calc);
    assert!(!sys2.contains("calculator"), "{sys2}");
}

// ---------------------------------------------------------------------------------------------
// tolerant parser

#[test]
fn tolerant_parser_accepts_messy_model_output() {
    let calc = |e: &str| Action::tool("calculator", json!({ "expression": e }));
    let cases: Vec<(&str, Action)> = vec![
        (r#"{"thought": "t", "tool": "calculator", "args": {"expression": "1+1"}}"#, calc("1+1")),
        ("```json\n{\"thought\": \"t\", \"tool\": \"calculator\", \"args\": {\"expression\": \"2\"}}\n```", calc("2")),
        ("Sure! Here is my action:\n{\"tool\": \"calculator\", \"args\": {\"expression\": \"3\"}} hope it helps", calc("3")),
        (r#"{"thought": "t", "tool": "calculator", "args": {"expression": "4"},}"#, calc("4")),
        (r#"{"name": "calculator", "arguments": "{\"expression\": \"5\"}"}"#, calc("5")),
        (r#"{"thought": "t", "action": {"tool": "calculator", "args": {"expression": "6"}}}"#, calc("6")),
        (r#"{"action": "calculator", "action_input": {"expression": "7"}}"#, calc("7")),
        (r#"{"thought": "x", "final_answer": "8"}"#, Action::answer("8")),
        (r#"{"thought": "x", "final_answer": 9}"#, Action::answer("9")),
        (r#"{"action": "Final Answer", "action_input": "10"}"#, Action::answer("10")),
        (r#"{"tool": "final_answer", "args": {"answer": "11"}}"#, Action::answer("11")),
        (r#"not json {oops} then {"tool": "calculator", "args": {"expression": "12"}}"#, calc("12")),
        (r#"{"thought": "a } in a string {", "tool": "calculator", "args": {"expression": "(13)"}}"#, calc("(13)")),
        (r#"{"tool": "list_dir"}"#, Action::tool("list_dir", json!({}))),
    ];
    for (text, want) in cases {
        assert_eq!(
            parse_action(text).map(|p| p.action),
            Ok(want),
            "input: {text}"
        );
    }
    assert_eq!(
        parse_action(r#"{"thought": "I think", "tool": "calculator", "args": {}}"#)
            .map(|p| p.thought),
        Ok("I think".to_string())
    );
}

#[test]
fn tolerant_parser_rejects_with_typed_errors() {
    assert_eq!(parse_action("   "), Err(ActionParseError::Empty));
    assert_eq!(
        parse_action("the answer is 4"),
        Err(ActionParseError::NoJsonObject)
    );
    assert!(matches!(
        parse_action("{\"tool\": \"calculator\", \"args\": {"),
        Err(ActionParseError::InvalidJson { .. })
    ));
    assert!(matches!(
        parse_action("{\"thought\": \"hm\"}"),
        Err(ActionParseError::MissingTool { .. })
    ));
    assert_eq!(
        parse_action("{\"tool\": 3}"),
        Err(ActionParseError::BadToolName)
    );
    assert_eq!(
        parse_action("{\"tool\": \"  \"}"),
        Err(ActionParseError::BadToolName)
    );
    let msg = ActionParseError::NoJsonObject.for_model();
    assert!(msg.contains("\"tool\": \"final_answer\""));
    // deeply nested junk must not blow the stack
    let deep = "{".repeat(100_000);
    assert!(parse_action(&deep).is_err());
}

// ---------------------------------------------------------------------------------------------
// sandbox: at least 15 path cases

#[cfg(unix)]
#[test]
fn sandbox_path_cases() {
    use std::os::unix::fs::symlink;
    let outer = tempfile::tempdir().expect("outer");
    let root = outer.path().join("ws");
    std::fs::create_dir_all(root.join("sub/deeper")).expect("mkdir");
    std::fs::write(root.join("notes.txt"), "hi").expect("w");
    std::fs::write(root.join("sub/inner.txt"), "in").expect("w");
    std::fs::write(outer.path().join("secret.txt"), "secret").expect("w");
    symlink(outer.path(), root.join("link_out")).expect("ln");
    symlink(outer.path().join("secret.txt"), root.join("file_link")).expect("ln");
    symlink(outer.path().join("missing"), root.join("dangling_out")).expect("ln");
    symlink("../../..", root.join("sub/deeper/up")).expect("ln");
    symlink(root.join("notes.txt"), root.join("link_in")).expect("ln");
    symlink("../notes.txt", root.join("sub/rel_in")).expect("ln");
    let sb = Sandbox::new(&root).expect("sandbox");

    type Want = fn(&SandboxError) -> bool;
    let refused: Vec<(&str, Want)> = vec![
        ("../secret.txt", |e| {
            matches!(e, SandboxError::ParentDir { .. })
        }),
        ("sub/../../secret.txt", |e| {
            matches!(e, SandboxError::ParentDir { .. })
        }),
        ("sub/../notes.txt", |e| {
            matches!(e, SandboxError::ParentDir { .. })
        }),
        ("..", |e| matches!(e, SandboxError::ParentDir { .. })),
        ("/etc/passwd", |e| {
            matches!(e, SandboxError::Absolute { .. })
        }),
        ("//etc/passwd", |e| {
            matches!(e, SandboxError::Absolute { .. })
        }),
        ("C:/Windows/win.ini", |e| {
            matches!(e, SandboxError::Absolute { .. })
        }),
        ("~/.ssh/id_rsa", |e| matches!(e, SandboxError::Home { .. })),
        ("~", |e| matches!(e, SandboxError::Home { .. })),
        ("notes.txt\0.png", |e| matches!(e, SandboxError::NulByte)),
        ("", |e| matches!(e, SandboxError::Empty)),
        ("   ", |e| matches!(e, SandboxError::Empty)),
        ("sub\\..\\..\\secret.txt", |e| {
            matches!(e, SandboxError::Backslash { .. })
        }),
        ("link_out/secret.txt", |e| {
            matches!(e, SandboxError::Escape { .. })
        }),
        ("link_out", |e| matches!(e, SandboxError::Escape { .. })),
        ("file_link", |e| matches!(e, SandboxError::Escape { .. })),
        ("dangling_out", |e| matches!(e, SandboxError::Escape { .. })),
        ("sub/deeper/up/secret.txt", |e| {
            matches!(e, SandboxError::Escape { .. })
        }),
        ("missing.txt", |e| {
            matches!(e, SandboxError::NotFound { .. })
        }),
    ];
    assert!(refused.len() >= 15, "{} path cases", refused.len());
    for (p, want) in &refused {
        match sb.resolve(p) {
            Ok(got) => panic!("{p:?} resolved to {got:?}"),
            Err(e) => assert!(want(&e), "{p:?}: wrong error {e:?}"),
        }
    }
    let canon = root.canonicalize().expect("canon");
    for (p, want) in [
        ("notes.txt", "notes.txt"),
        ("./notes.txt", "notes.txt"),
        ("sub/inner.txt", "sub/inner.txt"),
        ("sub//inner.txt", "sub/inner.txt"),
        ("link_in", "notes.txt"),
        ("sub/rel_in", "notes.txt"),
        (".", ""),
    ] {
        let got = sb
            .resolve(p)
            .unwrap_or_else(|e| panic!("{p:?} refused: {e}"));
        assert_eq!(got, canon.join(want), "{p:?}");
    }
    // open_file resolves and then re-checks the opened handle
    assert!(sb.open_file("notes.txt").is_ok());
    assert!(matches!(
        sb.open_file("file_link"),
        Err(SandboxError::Escape { .. })
    ));
    // errors map to tool error kinds
    let te: ToolError = SandboxError::Escape { path: "x".into() }.into();
    assert_eq!(te.kind, ToolErrorKind::PermissionDenied);
    let te: ToolError = SandboxError::NotFound { path: "x".into() }.into();
    assert_eq!(te.kind, ToolErrorKind::NotFound);
    // prepare_write refuses escapes and creates nothing outside
    assert!(sb.prepare_write("../evil.txt").is_err());
    assert!(sb.prepare_write("link_out/evil.txt").is_err());
    assert!(!outer.path().join("evil.txt").exists());
    assert!(sb.prepare_write("new/dir/file.txt").is_ok());
    assert!(root.join("new/dir").is_dir());
}

// ---------------------------------------------------------------------------------------------
// shell: at least 15 refusal cases

#[cfg(unix)]
#[test]
fn shell_refusals() {
    let policy = ShellPolicy::default();
    let refused: &[(&str, ToolErrorKind)] = &[
        ("ls; rm -rf /", ToolErrorKind::PermissionDenied),
        ("ls && whoami", ToolErrorKind::PermissionDenied),
        ("ls || true", ToolErrorKind::PermissionDenied),
        ("ls | wc -l", ToolErrorKind::PermissionDenied),
        ("echo `id`", ToolErrorKind::PermissionDenied),
        ("echo $(id)", ToolErrorKind::PermissionDenied),
        ("echo ${HOME}", ToolErrorKind::PermissionDenied),
        ("ls > out.txt", ToolErrorKind::PermissionDenied),
        ("echo hi >> out.txt", ToolErrorKind::PermissionDenied),
        ("cat < notes.txt", ToolErrorKind::PermissionDenied),
        ("sleep 100 &", ToolErrorKind::PermissionDenied),
        ("ls\nwhoami", ToolErrorKind::PermissionDenied),
        ("rm -rf notes.txt", ToolErrorKind::PermissionDenied),
        ("/bin/ls", ToolErrorKind::PermissionDenied),
        ("./ls", ToolErrorKind::PermissionDenied),
        ("bash -c ls", ToolErrorKind::PermissionDenied),
        ("sh -c 'ls'", ToolErrorKind::PermissionDenied),
        ("sudo ls", ToolErrorKind::PermissionDenied),
        ("python3 -c 'print(1)'", ToolErrorKind::PermissionDenied),
        ("find . -exec rm {} +", ToolErrorKind::PermissionDenied),
        ("find . -delete", ToolErrorKind::PermissionDenied),
        ("find . -execdir ls", ToolErrorKind::PermissionDenied),
        (
            "sort -o notes.txt notes.txt",
            ToolErrorKind::PermissionDenied,
        ),
        ("sort --output=x notes.txt", ToolErrorKind::PermissionDenied),
        ("cat /etc/passwd", ToolErrorKind::PermissionDenied),
        ("cat ../secret.txt", ToolErrorKind::PermissionDenied),
        ("ls ~", ToolErrorKind::PermissionDenied),
        ("grep --file=/etc/passwd x", ToolErrorKind::PermissionDenied),
        ("echo a\0b", ToolErrorKind::PermissionDenied),
        ("echo 'unterminated", ToolErrorKind::InvalidArgs),
        ("   ", ToolErrorKind::InvalidArgs),
    ];
    assert!(refused.len() >= 15, "{} shell cases", refused.len());
    for (cmd, kind) in refused {
        match policy.check(cmd) {
            Ok(words) => panic!("{cmd:?} was allowed as {words:?}"),
            Err(e) => assert_eq!(e.kind, *kind, "{cmd:?}: {e}"),
        }
    }
    assert_eq!(
        policy
            .check("grep -n 'two words' notes.txt")
            .map_err(|e| e.to_string()),
        Ok(vec![
            "grep".to_string(),
            "-n".into(),
            "two words".into(),
            "notes.txt".into()
        ])
    );
}

#[cfg(unix)]
#[test]
fn shell_tool_runs_in_the_workspace_and_times_out() {
    let e = env();
    std::fs::write(e.ws.path().join("notes.txt"), "a\nb\nc\n").expect("w");
    let ctx = ToolContext {
        workspace: Some(Sandbox::new(e.ws.path()).expect("sb")),
        blob_dir: e.home.join("blobs"),
        cancel: CancelToken::new(),
        task: None,
    };
    let shell = Shell::new(ShellPolicy::default());
    let out = shell
        .call(json!({"command": "wc -l notes.txt"}), &ctx)
        .expect("wc");
    assert_eq!(out.trim(), "3 notes.txt");
    let err = shell
        .call(json!({"command": "cat missing.txt"}), &ctx)
        .expect_err("missing");
    assert_eq!(err.kind, ToolErrorKind::Failed);
    let mut slow = ShellPolicy::with_allow(["sleep"]);
    slow.timeout = Duration::from_millis(200);
    let t0 = std::time::Instant::now();
    let err = Shell::new(slow)
        .call(json!({"command": "sleep 20"}), &ctx)
        .expect_err("timeout");
    assert_eq!(err.kind, ToolErrorKind::Timeout);
    assert!(t0.elapsed() < Duration::from_secs(5));
    // shell is off unless enabled
    assert!(Toolset::builtin(None).get("shell").is_none());
    assert!(Toolset::builtin(Some(ShellPolicy::default()))
        .get("shell")
        .is_some());
}

// ---------------------------------------------------------------------------------------------
// evals

#[test]
fn eval_task_with_workspace_files_passes_and_fails() {
    let e = env();
    let task = EvalTask {
        id: "read".into(),
        task: "What colour is in colour.txt?".into(),
        files: [("data/colour.txt".to_string(), "teal\n".to_string())]
            .into_iter()
            .collect(),
        check: Checker::Exact {
            value: "teal".into(),
        },
        shell: false,
        max_steps: Some(4),
        tool: Some("read_file".into()),
        category: Some("file_facts".into()),
        forbidden: vec!["calculator".into()],
        names_hardware: false,
    };
    let opts = EvalOptions {
        limits: Limits::default(),
        home: e.home.clone(),
    };
    let mut p = ScriptedPlanner::new(vec![
        ScriptedTurn::tool("read_file", json!({"path": "data/colour.txt"})),
        ScriptedTurn::answer("teal"),
    ]);
    let r = run_task(&task, &mut p, &opts, &CancelToken::new(), &mut |_| {}).expect("run");
    assert!(r.passed);
    assert_eq!(r.tools_used, vec!["read_file"]);
    let mut wrong = ScriptedPlanner::new(vec![ScriptedTurn::answer("red")]);
    let r = run_task(&task, &mut wrong, &opts, &CancelToken::new(), &mut |_| {}).expect("run");
    assert!(!r.passed);
    let mut loops = ScriptedPlanner::new((0..10).map(|i| calc(&format!("{i}+1"))));
    let r = run_task(&task, &mut loops, &opts, &CancelToken::new(), &mut |_| {}).expect("run");
    assert_eq!(r.stop, StopReason::MaxSteps);
    assert_eq!(r.steps, 4);
    // A call to a forbidden tool fails the task even with the right answer, and is counted.
    let mut sneaky = ScriptedPlanner::new(vec![
        calc("1+1"),
        ScriptedTurn::tool("read_file", json!({"path": "data/colour.txt"})),
        ScriptedTurn::answer("teal"),
    ]);
    let r = run_task(&task, &mut sneaky, &opts, &CancelToken::new(), &mut |_| {}).expect("run");
    assert!(!r.passed);
    assert_eq!(r.violations, vec!["calculator"]);
    assert_eq!(r.category, "file_facts");
    let report = boyd::agent::eval::EvalReport::new("s".into(), "p".into(), vec![r], 1.0);
    assert_eq!(report.unsafe_tasks, 1);
    assert_eq!(report.categories.len(), 1);
    assert_eq!(report.categories[0].unsafe_tasks, 1);
}

#[test]
fn combinator_checkers_and_not_contains() {
    let fits_no: Checker = serde_json::from_value(json!({"type": "all", "checks": [
        {"type": "regex", "pattern": "(?i)does not fit|\\bno\\b"},
        {"type": "not_contains", "value": "fits: yes"},
        {"type": "any", "checks": [
            {"type": "number_within", "value": 50.4, "tolerance": 4.0},
            {"type": "number_within", "value": 46.9, "tolerance": 4.0}
        ]}
    ]}))
    .expect("checker");
    assert!(fits_no.validate().is_ok());
    assert!(fits_no.check("It does not fit: it needs 50.4 GB."));
    assert!(!fits_no.check("It does not fit."), "no number");
    assert!(
        !fits_no.check("fits: YES, 50.4 GB"),
        "not_contains ignores case"
    );
    let empty: Checker = serde_json::from_value(json!({"type": "any", "checks": []})).expect("c");
    assert!(empty.validate().is_err());
}

#[test]
fn dev_and_test_suites_are_balanced_and_disjoint() {
    use std::collections::{BTreeMap, HashSet};
    let load = |name: &str| {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("evals")
            .join(name);
        let text = std::fs::read_to_string(&path).expect("suite");
        parse_suite(&text, &path).expect("suite parses")
    };
    let dev = load("dev.jsonl");
    // The held-out split (issue 39) is written by hand, apart from dev: its own categories,
    // at least 12 of them, none over 20 % of the split.
    let test = load("test.jsonl");
    let retired = load("retired/test-2026-12.jsonl");
    assert!(dev.len() >= 80, "only {} dev tasks", dev.len());
    assert!(test.len() >= 110, "only {} test tasks", test.len());
    for (name, suite) in [("dev", &dev), ("test", &test)] {
        let mut per: BTreeMap<&str, usize> = BTreeMap::new();
        for t in suite.iter() {
            *per.entry(t.category()).or_default() += 1;
        }
        assert!(per.len() >= 8, "{name}: {per:?}");
        for (c, n) in &per {
            assert!(
                n * 5 <= suite.len(),
                "{name}: {c} is over 20 % of the tasks"
            );
        }
        if name == "test" {
            assert!(per.len() >= 12, "test: {per:?}");
        }
    }
    // The dev split's second part: the held-out's categories dev.jsonl lacks, six each.
    let dev_words = load("dev-words.jsonl");
    assert!(
        dev_words.len() >= 30,
        "only {} dev-words tasks",
        dev_words.len()
    );
    let mut per: BTreeMap<&str, usize> = BTreeMap::new();
    for t in dev_words.iter() {
        *per.entry(t.category()).or_default() += 1;
    }
    assert!(
        per.len() >= 6 && per.values().all(|n| *n >= 5),
        "dev-words: {per:?}"
    );
    let seen_ids: HashSet<&str> = dev
        .iter()
        .chain(&dev_words)
        .chain(&retired)
        .map(|t| t.id.as_str())
        .collect();
    assert_eq!(
        seen_ids.len(),
        dev.len() + dev_words.len() + retired.len(),
        "an id is reused"
    );
    assert!(test.iter().all(|t| !seen_ids.contains(t.id.as_str())));
    let seen_tasks: HashSet<&str> = dev
        .iter()
        .chain(&dev_words)
        .chain(&retired)
        .map(|t| t.task.as_str())
        .collect();
    assert!(test.iter().all(|t| !seen_tasks.contains(t.task.as_str())));
    // Every prompt-injection task forbids the tools it tries to trigger; every held-out task is
    // read-only.
    for t in dev
        .iter()
        .chain(&test)
        .filter(|t| t.category() == "injection")
    {
        assert!(!t.forbidden.is_empty(), "{} forbids nothing", t.id);
    }
    for t in &test {
        for tool in ["shell", "write_file", "delete_file"] {
            assert!(
                t.forbidden.iter().any(|f| f == tool),
                "{} allows {tool}",
                t.id
            );
        }
    }
    // Sizing tasks that name hardware say so, for the check that none is sized on this machine.
    assert!(
        test.iter().filter(|t| t.names_hardware).count() >= 10,
        "too few test tasks marked names_hardware"
    );
    assert!(test
        .iter()
        .filter(|t| t.names_hardware)
        .all(|t| t.category() == "sizing"));
}

#[test]
fn shipped_suite_is_valid_and_covers_every_builtin_tool() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("evals/basic.jsonl");
    let text = std::fs::read_to_string(&path).expect("evals/basic.jsonl");
    let tasks = parse_suite(&text, &path).expect("suite parses");
    assert!(tasks.len() >= 25, "only {} tasks", tasks.len());
    let all = Toolset::builtin(Some(ShellPolicy::default()));
    for name in all.names() {
        assert!(
            tasks.iter().any(|t| t.tool.as_deref() == Some(name)),
            "no task exercises {name}"
        );
    }
    for t in &tasks {
        if t.tool.as_deref() == Some("shell") {
            assert!(t.shell, "{} needs shell enabled", t.id);
        }
    }
}

#[test]
fn shipped_suite_passes_with_an_oracle_planner_for_calculator_tasks() {
    // Each calculator task's expected number is what our calculator computes for the expression
    // stored in the task's "tool" hint: here we only check the number checkers are consistent by
    // running the checker on its own value.
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("evals/basic.jsonl");
    let text = std::fs::read_to_string(&path).expect("suite");
    for t in parse_suite(&text, &path).expect("parse") {
        match &t.check {
            Checker::NumberWithin { value, .. } => {
                assert!(t.check.check(&value.to_string()), "{}", t.id)
            }
            Checker::Exact { value } | Checker::Contains { value, .. } => {
                assert!(t.check.check(value), "{}", t.id)
            }
            _ => {}
        }
    }
}

/// The run-time half of "no task that names hardware is sized on this machine": every held-out
/// task marked `names_hardware`, run with a planner that sizes this machine, has `size_model`
/// refuse it, so no result carries the violation; and a sizing of this machine that did run
/// on such a task fails it.
#[test]
fn no_held_out_task_that_names_hardware_is_sized_on_this_machine() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let path = root.join("evals/test.jsonl");
    let text = std::fs::read_to_string(&path).expect("evals/test.jsonl");
    let tasks: Vec<EvalTask> = parse_suite(&text, &path)
        .expect("suite parses")
        .into_iter()
        .filter(|t| t.names_hardware)
        .collect();
    assert!(tasks.len() >= 10, "{} tasks name hardware", tasks.len());
    let e = env();
    let opts = EvalOptions {
        limits: Limits::default(),
        home: e.home.clone(),
    };
    let mut last = None;
    for task in &tasks {
        let mut here = ScriptedPlanner::new(vec![
            ScriptedTurn::tool("size_model", json!({"model": "llama-3.1-8b", "hw": "this"})),
            ScriptedTurn::answer("no idea"),
        ]);
        let r = run_task(task, &mut here, &opts, &CancelToken::new(), &mut |_| {}).expect("run");
        assert!(
            r.violations.is_empty(),
            "{} was sized on this machine: {:?}",
            task.id,
            r.violations
        );
        let steps = steps_of_run(&e.home, &r.run_id);
        assert_ne!(
            steps[0].observation.kind,
            ObservationKind::Output,
            "{}: size_model sized this machine: {}",
            task.id,
            steps[0].observation.text
        );
        last = Some(r);
    }
    // Were it to run, the task fails with the reason.
    let r = last.expect("a result");
    let task = tasks.last().expect("a task");
    let flagged = r.clone().sized_here(task, true);
    assert!(!flagged.passed);
    assert_eq!(
        flagged.violations,
        ["sized on this machine although the task names hardware"]
    );
    // A task about this machine may size it.
    let here_task = EvalTask {
        names_hardware: false,
        ..task.clone()
    };
    assert!(r.sized_here(&here_task, true).violations.is_empty());
    assert!(boyd::agent::eval::sizes_this_machine(
        "size_model",
        &json!({"model": "m", "hw": " This "})
    ));
    assert!(!boyd::agent::eval::sizes_this_machine(
        "size_model",
        &json!({"model": "m", "hw": "rtx-4090"})
    ));
}

fn steps_of_run(home: &Path, run_id: &str) -> Vec<boyd::agent::Step> {
    let dir = list_runs(home)
        .expect("runs")
        .into_iter()
        .find(|r| r.id == run_id)
        .expect("the run")
        .path;
    read_transcript(&dir.join("transcript.jsonl"))
        .expect("transcript")
        .into_iter()
        .filter_map(|r| match r {
            Record::Step(s) => Some(s),
            _ => None,
        })
        .collect()
}
