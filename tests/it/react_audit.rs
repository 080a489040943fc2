//! The ReAct loop writes its calls of tools with side effects to the run's audit chain, as the
//! OODA loop does: `boyd run --enable-shell` with a scripted model leaves an intent and an
//! outcome record for each shell command, and a run that only computes leaves no chain.

use serde_json::json;

use boyd::agent::audit::{read_events, verify, AuditEvent, OutcomeStatus, AUDIT_FILE};
use boyd::agent::condense::sha256_hex;
use boyd::agent::react::{self, AgentEvent, Limits};
use boyd::agent::rundir::RunDir;
use boyd::agent::tools::{Sandbox, ShellPolicy, Toolset};
use boyd::agent::types::{ObservationKind, RunOutcome, StopReason};
use boyd::agent::{ScriptedPlanner, ScriptedTurn};
use boyd::lm::CancelToken;

/// A finished run: its outcome and directory, with the temporary home and workspace kept
/// alive for the checks.
struct Ran {
    outcome: RunOutcome,
    path: std::path::PathBuf,
    _home: tempfile::TempDir,
    _ws: tempfile::TempDir,
}

/// Run `turns` with `tools` in a fresh home and a workspace holding `notes.txt`.
fn run(turns: Vec<ScriptedTurn>, tools: &Toolset) -> Ran {
    let home = tempfile::tempdir().expect("home");
    let ws = tempfile::tempdir().expect("ws");
    std::fs::write(ws.path().join("notes.txt"), "a\nb\nc\n").expect("write");
    let run_dir = RunDir::create(home.path()).expect("run dir");
    let path = run_dir.path().to_path_buf();
    let mut planner = ScriptedPlanner::new(turns);
    let outcome = react::run(
        "count the lines of notes.txt",
        &mut planner,
        tools,
        &Limits::default(),
        run_dir,
        Some(Sandbox::new(ws.path()).expect("sandbox")),
        &CancelToken::new(),
        &mut |_ev: &AgentEvent<'_>| {},
    )
    .expect("run");
    Ran {
        outcome,
        path,
        _home: home,
        _ws: ws,
    }
}

#[cfg(unix)]
#[test]
fn a_react_shell_call_leaves_an_intent_and_an_outcome_in_the_audit_chain() {
    // What `boyd run --enable-shell` builds: the built-in tools with the default shell policy.
    let tools = Toolset::builtin(Some(ShellPolicy::default())).for_workspace(true);
    let ran = run(
        vec![
            ScriptedTurn::tool("shell", json!({"command": "wc -l notes.txt"})),
            ScriptedTurn::answer("3"),
        ],
        &tools,
    );
    let (outcome, path) = (&ran.outcome, ran.path.as_path());
    assert_eq!(outcome.stop, StopReason::Completed, "{outcome:?}");
    let transcript =
        boyd::agent::rundir::read_transcript(&path.join("transcript.jsonl")).expect("transcript");
    let shell_output = transcript
        .iter()
        .find_map(|r| match r {
            boyd::agent::rundir::Record::Step(s)
                if s.observation.kind == ObservationKind::Output =>
            {
                Some(s.observation.text.clone())
            }
            _ => None,
        })
        .expect("the shell step");
    assert_eq!(shell_output.trim(), "3 notes.txt");

    let report = verify(path).expect("verify");
    assert!(
        report.ok() && report.unknown_intents.is_empty(),
        "{report:?}"
    );
    // Every record carries a MAC by the approval key, as an OODA run's do: a forged record
    // appended to a ReAct run's chain fails verification like one in an OODA run's.
    let key = boyd::agent::approval::ApprovalKey::load_default().expect("approval key");
    let signed = boyd::agent::audit::verify_with_key(path, Some(&key)).expect("verify");
    assert_eq!(
        signed.record_macs,
        boyd::agent::audit::RecordMacs::Signed,
        "{signed:?}"
    );
    let events: Vec<AuditEvent> = read_events(path)
        .expect("read")
        .into_iter()
        .map(|r| r.event)
        .collect();
    assert_eq!(events.len(), 4, "{events:#?}");
    assert!(
        matches!(&events[0], AuditEvent::RunStarted { run_id, .. } if *run_id == outcome.run_id)
    );
    match (&events[1], &events[2]) {
        (
            AuditEvent::Intent {
                action_id,
                cycle,
                tool,
                args,
                irreversible,
                ..
            },
            AuditEvent::Outcome {
                action_id: done,
                status,
                output_sha256,
                ..
            },
        ) => {
            assert_eq!((*action_id, *done, *cycle), (1, 1, 1));
            assert_eq!(tool, "shell");
            assert_eq!(args, &json!({"command": "wc -l notes.txt"}));
            assert!(!irreversible, "the default shell only reads");
            assert_eq!(*status, OutcomeStatus::Unverified);
            assert_eq!(*output_sha256, sha256_hex(shell_output.as_bytes()));
        }
        other => panic!("expected an intent then an outcome, got {other:?}"),
    }
    assert!(
        matches!(&events[3], AuditEvent::Terminal { state, .. } if state == "completed"),
        "{:?}",
        events[3]
    );
}

#[cfg(unix)]
#[test]
fn a_failed_shell_call_is_recorded_as_failed() {
    let tools = Toolset::builtin(Some(ShellPolicy::default())).for_workspace(true);
    let ran = run(
        vec![
            ScriptedTurn::tool("shell", json!({"command": "cat missing.txt"})),
            ScriptedTurn::answer("no such file"),
        ],
        &tools,
    );
    let statuses: Vec<OutcomeStatus> = read_events(&ran.path)
        .expect("read")
        .into_iter()
        .filter_map(|r| match r.event {
            AuditEvent::Outcome { status, .. } => Some(status),
            _ => None,
        })
        .collect();
    assert_eq!(statuses, [OutcomeStatus::Failed]);
}

#[test]
fn a_react_run_without_side_effects_leaves_no_audit_chain() {
    let tools = Toolset::builtin(None);
    let ran = run(
        vec![
            ScriptedTurn::tool("calculator", json!({"expression": "2+2"})),
            ScriptedTurn::answer("4"),
        ],
        &tools,
    );
    assert_eq!(ran.outcome.stop, StopReason::Completed);
    assert!(!ran.path.join(AUDIT_FILE).exists());
}
