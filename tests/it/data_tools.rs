//! The `table` and `compute` tools through the ReAct dispatch with a scripted planner: the
//! tool computes from the file, and the model's final answer is the run's answer as given.

use serde_json::json;

use boyd::agent::react::{self, AgentEvent, Limits};
use boyd::agent::rundir::{read_transcript, Record, RunDir};
use boyd::agent::tools::{Sandbox, ToolErrorKind, Toolset};
use boyd::agent::types::{ObservationKind, RunOutcome, StopReason};
use boyd::agent::{ScriptedPlanner, ScriptedTurn};
use boyd::lm::CancelToken;

fn run(
    ws: &std::path::Path,
    task: &str,
    turns: Vec<ScriptedTurn>,
) -> (RunOutcome, Vec<boyd::agent::Step>) {
    let home = tempfile::tempdir().expect("home");
    let run_dir = RunDir::create(home.path()).expect("run dir");
    let mut planner = ScriptedPlanner::new(turns);
    let out = react::run(
        task,
        &mut planner,
        // `compute` is not in the built-in set yet (see `Toolset::builtin`): offered here.
        &Toolset::builtin(None).with(boyd::agent::tools::Compute),
        &Limits::default(),
        run_dir,
        Some(Sandbox::new(ws).expect("sandbox")),
        &CancelToken::new(),
        &mut |_ev: &AgentEvent<'_>| {},
    )
    .expect("run");
    let steps = read_transcript(&out.run_dir.join("transcript.jsonl"))
        .expect("transcript")
        .into_iter()
        .filter_map(|r| match r {
            Record::Step(s) => Some(s),
            _ => None,
        })
        .collect();
    (out, steps)
}

#[test]
fn a_table_call_answers_from_the_file_and_the_models_answer_is_kept() {
    let ws = tempfile::tempdir().expect("ws");
    std::fs::write(
        ws.path().join("sales.csv"),
        "region,rep,amount\neast,\"Smith, Ann\",1200\nwest,Bob,800\neast,Cy,\"1,500\"\n",
    )
    .expect("write");
    let (out, steps) = run(
        ws.path(),
        "Which rep in sales.csv closed the largest amount?",
        vec![
            ScriptedTurn::tool(
                "table",
                json!({"path": "sales.csv", "op": "argmax", "field": "amount"}),
            ),
            ScriptedTurn::answer("Cy, with 1,500"),
        ],
    );
    assert_eq!(out.stop, StopReason::Completed);
    assert_eq!(steps[0].observation.kind, ObservationKind::Output);
    assert!(
        steps[0]
            .observation
            .text
            .contains("record: region=east, rep=Cy, amount=1,500"),
        "{}",
        steps[0].observation.text
    );
    assert_eq!(out.answer.as_deref(), Some("Cy, with 1,500"));
}

#[test]
fn a_compute_program_runs_and_a_wrong_field_is_an_error_the_model_sees() {
    let ws = tempfile::tempdir().expect("ws");
    std::fs::write(ws.path().join("sales.csv"), "region,amount\neast,3\n").expect("write");
    let (out, steps) = run(
        ws.path(),
        "375 g of flour feed 6 people; how much for 22? Also sum sales.csv.",
        vec![
            ScriptedTurn::tool(
                "table",
                json!({"path": "sales.csv", "op": "sum", "field": "amout"}),
            ),
            ScriptedTurn::tool(
                "compute",
                json!({"program": "flour_g = 375\nper_person = flour_g / 6\nper_person * 22"}),
            ),
            ScriptedTurn::answer("1375 g"),
        ],
    );
    assert_eq!(out.stop, StopReason::Completed);
    assert_eq!(
        steps[0].observation.kind,
        ObservationKind::ToolError {
            kind: ToolErrorKind::InvalidArgs
        }
    );
    assert!(
        steps[0]
            .observation
            .text
            .contains("its fields are: region, amount"),
        "{}",
        steps[0].observation.text
    );
    assert!(
        steps[1].observation.text.ends_with("result: 1375"),
        "{}",
        steps[1].observation.text
    );
    assert_eq!(out.answer.as_deref(), Some("1375 g"));
}
