//! OODA sensors on their own threads, outcome memories in Orient, and hypotheses — through the
//! library path the CLI uses (`OodaBuilder`), with scripted phases.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;

use boyd::agent::ooda::decide::{
    Candidate, DecideInput, Decider, Proposal, ScriptedDecider, ScriptedDecision,
};
use boyd::agent::ooda::memory::MemoryStore;
use boyd::agent::ooda::observe::{Sensor, SensorFuture, Signal};
use boyd::agent::ooda::orient::{Extraction, OrientInput, Orienter, RuleOrienter};
use boyd::agent::ooda::{OodaBuilder, OodaConfig, OodaOutcome, OodaState, SplitPhases};
use boyd::agent::planner::PlannerError;
use boyd::agent::rundir::RunDir;
use boyd::agent::tools::Toolset;
use boyd::lm::CancelToken;

/// A decider that "generates" for a while (blocking the loop's thread, as a model call does)
/// before giving its scripted proposal.
struct SlowDecider {
    inner: ScriptedDecider,
    generate: Duration,
}

impl Decider for SlowDecider {
    fn propose(&mut self, input: &DecideInput<'_>) -> Result<Proposal, PlannerError> {
        std::thread::sleep(self.generate);
        self.inner.propose(input)
    }
    fn name(&self) -> String {
        "slow scripted".into()
    }
}

/// A critical sensor that answers its first reading at once and blocks its thread for 30 s on
/// every later one.
struct Heartbeat {
    reads: Arc<AtomicUsize>,
}

impl Sensor for Heartbeat {
    fn name(&self) -> &str {
        "heartbeat"
    }
    fn critical(&self) -> bool {
        true
    }
    fn timeout(&self) -> Option<Duration> {
        Some(Duration::from_millis(200))
    }
    fn read(&self) -> SensorFuture {
        let n = self.reads.fetch_add(1, Ordering::SeqCst);
        Box::pin(async move {
            if n > 0 {
                std::thread::sleep(Duration::from_secs(30));
            }
            Ok(vec![Signal::new("heartbeat", "heartbeat.beat", "ok")])
        })
    }
}

fn calc(expr: &str) -> Candidate {
    Candidate::tool("calculator", json!({ "expression": expr }))
}

/// Rule: sensors read on their own threads with real timeouts that fire while the model
/// generates. The critical heartbeat answers Observe, then hangs while Decide generates for
/// 1 s; its 200 ms timeout fires during the generation, the observation confidence drops to
/// 0.7 (orientation 0.63, under the threshold 0.7), and the run escalates before the chosen
/// action runs.
#[tokio::test]
async fn a_sensor_timing_out_during_generation_lowers_confidence_and_escalates() {
    let dir = tempfile::tempdir().expect("tempdir");
    let home = dir.path().join("home");
    std::fs::create_dir_all(&home).expect("home");
    let reads = Arc::new(AtomicUsize::new(0));
    let tools = Toolset::builtin(None);
    let mut decider = SlowDecider {
        inner: ScriptedDecider::new([ScriptedDecision::Propose(vec![calc("6 * 7")])]),
        generate: Duration::from_secs(1),
    };
    let mut orienter = RuleOrienter;
    let mut phases = SplitPhases {
        decider: &mut decider,
        orienter: &mut orienter,
    };
    let config = OodaConfig {
        confidence_threshold: 0.7,
        ..OodaConfig::default()
    };
    let ooda = OodaBuilder::new(config)
        .sensor(Arc::new(Heartbeat {
            reads: reads.clone(),
        }))
        .build_with(&mut phases, &tools, CancelToken::new());
    let t0 = Instant::now();
    let mut observed = Vec::new();
    let out: OodaOutcome = ooda
        .run(
            "What is 6 * 7?",
            RunDir::create(&home).expect("run dir"),
            &mut |ev| {
                if let boyd::agent::ooda::OodaEvent::Observed { observation } = ev {
                    observed.push(observation.confidence);
                }
            },
        )
        .await
        .expect("run");
    assert!(t0.elapsed() < Duration::from_secs(10), "{:?}", t0.elapsed());
    assert_eq!(out.state, OodaState::Escalated, "{out:?}");
    let detail = out.detail.clone().unwrap_or_default();
    assert!(
        detail.contains(
            "critical sensor failed during generation: heartbeat (no reading within 200 ms)"
        ),
        "{detail}"
    );
    assert!(
        detail.contains("orientation confidence 0.63 is below 0.70"),
        "{detail}"
    );
    assert_eq!(observed, vec![1.0], "Observe itself saw the heartbeat");
    assert_eq!(decider.inner.calls(), 1, "the model did generate");
    assert_eq!(out.counters.actions, 0, "the chosen action did not run");
    assert!(reads.load(Ordering::SeqCst) >= 2);
    let phases = std::fs::read_to_string(out.run_dir.join("ooda.jsonl")).expect("phases");
    let recheck = phases
        .lines()
        .find(|l| l.contains("\"phase\":\"recheck\""))
        .expect("a recheck record");
    assert!(recheck.contains("\"timed_out\":true"), "{recheck}");
    assert!(
        recheck.contains("\"observation_confidence\":0.7"),
        "{recheck}"
    );
}

/// The same run with a heartbeat that keeps answering acts and completes: the watch costs no
/// waiting and changes nothing.
#[tokio::test]
async fn a_healthy_critical_sensor_during_generation_changes_nothing() {
    struct Steady;
    impl Sensor for Steady {
        fn name(&self) -> &str {
            "steady"
        }
        fn critical(&self) -> bool {
            true
        }
        fn read(&self) -> SensorFuture {
            Box::pin(async { Ok(vec![Signal::new("steady", "steady.ok", "1")]) })
        }
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let home = dir.path().join("home");
    std::fs::create_dir_all(&home).expect("home");
    let tools = Toolset::builtin(None);
    let mut decider = SlowDecider {
        inner: ScriptedDecider::new([
            ScriptedDecision::Propose(vec![calc("6 * 7")]),
            ScriptedDecision::Propose(vec![Candidate::answer("42")]),
        ]),
        generate: Duration::from_millis(300),
    };
    let mut orienter = RuleOrienter;
    let mut phases = SplitPhases {
        decider: &mut decider,
        orienter: &mut orienter,
    };
    let config = OodaConfig {
        confidence_threshold: 0.7,
        ..OodaConfig::default()
    };
    let out = OodaBuilder::new(config)
        .sensor(Arc::new(Steady))
        .build_with(&mut phases, &tools, CancelToken::new())
        .run(
            "What is 6 * 7?",
            RunDir::create(&home).expect("run dir"),
            &mut |_| {},
        )
        .await
        .expect("run");
    assert_eq!(out.state, OodaState::Completed, "{out:?}");
    assert_eq!(out.answer.as_deref(), Some("42"));
    let phases = std::fs::read_to_string(out.run_dir.join("ooda.jsonl")).expect("phases");
    assert!(!phases.contains("\"phase\":\"recheck\""), "{phases}");
}

/// An orienter that records what it was shown.
#[derive(Default)]
struct Recorder {
    /// The world model's rendering at each call.
    seen: Vec<String>,
    /// The recalled outcomes at each call.
    recalled: Vec<Vec<String>>,
}

impl Orienter for Recorder {
    fn extract(&mut self, input: &OrientInput<'_>) -> Result<Extraction, PlannerError> {
        self.seen.push(input.world.render());
        self.recalled.push(
            input
                .world
                .recalled
                .iter()
                .map(|r| format!("{} => {} [{}]", r.action, r.result, r.run))
                .collect(),
        );
        Ok(Extraction::default())
    }
    fn name(&self) -> String {
        "recorder".into()
    }
}

/// Rule: outcome memories are retrieved into Orient. A run in a workspace stores its action's
/// outcome; the next run of a similar task in that workspace has it in the world model its
/// Orient is given (and so in what Decide is shown), naming the run it came from; a run in
/// another workspace does not.
#[test]
fn a_stored_outcome_appears_in_the_next_runs_orient_input() {
    let dir = tempfile::tempdir().expect("tempdir");
    let home = dir.path().join("home");
    let ws = dir.path().join("ws");
    let other = dir.path().join("other");
    for d in [&home, &ws, &other] {
        std::fs::create_dir_all(d).expect("mkdir");
    }
    let tools = Toolset::builtin(None);
    let run = |orienter: &mut dyn Orienter,
               decider: &mut ScriptedDecider,
               workspace: &std::path::Path| {
        let memory = MemoryStore::open(&home, Some(workspace)).expect("memory");
        let mut phases = SplitPhases { decider, orienter };
        let rd = RunDir::create(&home).expect("run dir");
        let fut = async {
            OodaBuilder::new(OodaConfig::default())
                .memory(Some(memory))
                .build_with(&mut phases, &tools, CancelToken::new())
                .run("What is 6 * 7?", rd, &mut |_| {})
                .await
                .expect("run")
        };
        block_on(fut)
    };
    let first = run(
        &mut RuleOrienter,
        &mut ScriptedDecider::new([
            ScriptedDecision::Propose(vec![calc("6 * 7")]),
            ScriptedDecision::Propose(vec![Candidate::answer("42")]),
        ]),
        ws.as_path(),
    );
    assert_eq!(first.state, OodaState::Completed);

    let mut rec = Recorder::default();
    let second = run(
        &mut rec,
        &mut ScriptedDecider::new([ScriptedDecision::Propose(vec![Candidate::answer("42")])]),
        ws.as_path(),
    );
    assert_eq!(second.state, OodaState::Completed);
    let want = format!(
        "calculator {{\"expression\":\"6 * 7\"}} => verified: 42 [{}]",
        first.run_id
    );
    assert_eq!(
        rec.recalled.first(),
        Some(&vec![want]),
        "{:?}",
        rec.recalled
    );
    assert!(
        rec.seen[0].contains(
            "Earlier outcomes in this workspace (from memory):\n- calculator {\"expression\":\"6 * 7\"} -> verified: 42\n"
        ),
        "{}",
        rec.seen[0]
    );
    let phases = std::fs::read_to_string(second.run_dir.join("ooda.jsonl")).expect("phases");
    assert!(
        phases.contains("\"recalled\":[{\"action\":\"calculator"),
        "{phases}"
    );

    // Another workspace has its own memory: nothing to recall.
    let mut rec = Recorder::default();
    run(
        &mut rec,
        &mut ScriptedDecider::new([ScriptedDecision::Propose(vec![Candidate::answer("42")])]),
        other.as_path(),
    );
    assert_eq!(rec.recalled.first(), Some(&Vec::new()));
}

/// Drive a future to completion on a fresh current-thread runtime (as the CLI does).
fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(f)
}

/// Rule: model context as a contradiction source. The model sensor reads the context used
/// after each Decide call: "has room" (confidence 0.9) after the first, then "nearly full"
/// (over 90 % of 8192) after the second — a `model_context` contradiction against a fact above
/// the 0.8 threshold, so the run pauses for review before a third decision.
#[tokio::test]
async fn a_model_context_nearly_full_contradicts_the_earlier_reading_and_pauses_the_run() {
    struct Filling {
        calls: usize,
    }
    impl Decider for Filling {
        fn propose(&mut self, _input: &DecideInput<'_>) -> Result<Proposal, PlannerError> {
            self.calls += 1;
            let used = if self.calls == 1 { 1000 } else { 7600 };
            Ok(Proposal {
                candidates: vec![calc(&format!("{} + 1", self.calls))],
                usage: boyd::lm::Usage {
                    context_used: used,
                    ..boyd::lm::Usage::default()
                },
                ..Proposal::default()
            })
        }
        fn name(&self) -> String {
            "filling".into()
        }
        fn context_window(&self) -> Option<usize> {
            Some(8192)
        }
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let home = dir.path().join("home");
    std::fs::create_dir_all(&home).expect("home");
    let tools = Toolset::builtin(None);
    let mut decider = Filling { calls: 0 };
    let mut orienter = RuleOrienter;
    let mut phases = SplitPhases {
        decider: &mut decider,
        orienter: &mut orienter,
    };
    let out = OodaBuilder::new(OodaConfig::default())
        .build_with(&mut phases, &tools, CancelToken::new())
        .run(
            "Add numbers",
            RunDir::create(&home).expect("run dir"),
            &mut |_| {},
        )
        .await
        .expect("run");
    assert_eq!(out.state, OodaState::PausedForReview, "{out:?}");
    let detail = out.detail.clone().unwrap_or_default();
    assert!(
        detail.contains(
            "model context: known \"has room\" (confidence 0.90, sensor context), now \"nearly full\""
        ),
        "{detail}"
    );
    assert_eq!(decider.calls, 2, "paused before a third decision");
    let phases = std::fs::read_to_string(out.run_dir.join("ooda.jsonl")).expect("phases");
    assert!(phases.contains("\"kind\":\"model_context\""), "{phases}");
}
