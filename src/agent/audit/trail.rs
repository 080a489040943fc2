//! The ReAct loop's audit trail: an intent record before each call of a tool with side effects
//! ([`Tool::side_effects`]: the shell, the writers) and an outcome record after it, through the
//! [`AuditSink`] the OODA loop writes to, so `boyd audit verify` and `boyd runs show` cover the
//! commands a ReAct run ran.
//!
//! The chain is opened in the run directory on the first such call (with a `run_started`
//! record first), so a run that only reads and computes leaves no audit log; [`ActionTrail::finish`]
//! closes an opened one with the run's terminal state. Action ids count the audited calls from 1;
//! the intent's `cycle` is the ReAct step number.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::{AuditError, AuditEvent, AuditSink, ChainLog, OutcomeStatus};
use crate::agent::approval::ApprovalKey;
use crate::agent::condense::sha256_hex;
use crate::agent::tools::{Tool, ToolError, ToolErrorKind};

/// Where the trail's records go: not yet opened (the chain in `run_dir`, signed with `key` when
/// one is given), or the sink.
enum Sink {
    Closed {
        run_dir: PathBuf,
        key: Option<ApprovalKey>,
    },
    Open(Box<dyn AuditSink>),
}

/// An audited call in flight: what its outcome record needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditedCall {
    /// The intent's action id.
    pub action_id: u64,
    /// The action's fingerprint.
    pub fingerprint: String,
    /// Whether the tool is irreversible (its outcome is fsync'd too).
    pub irreversible: bool,
}

/// Intent and outcome records of one ReAct run's calls of tools with side effects.
pub struct ActionTrail {
    sink: Sink,
    run_id: String,
    task: String,
    next_id: u64,
}

impl ActionTrail {
    /// A trail whose chain is created in `run_dir` on the first audited call, its manifest and
    /// every record signed with the default config directory's approval key (loaded then;
    /// unsigned, with a warning, when there is none and none can be made).
    pub fn in_run_dir(run_dir: &Path, run_id: &str, task: &str) -> Self {
        Self::new(
            Sink::Closed {
                run_dir: run_dir.to_path_buf(),
                key: None,
            },
            run_id,
            task,
        )
    }

    /// A trail that writes to `sink` (a remote or in-memory sink) from the first audited call.
    pub fn to_sink(sink: Box<dyn AuditSink>, run_id: &str, task: &str) -> Self {
        Self::new(Sink::Open(sink), run_id, task)
    }

    fn new(sink: Sink, run_id: &str, task: &str) -> Self {
        Self {
            sink,
            run_id: run_id.to_string(),
            task: task.to_string(),
            next_id: 1,
        }
    }

    /// Sign the chain's manifest and records with `key` instead of the default key (before the
    /// first audited call; a sink given to
    /// [`ActionTrail::to_sink`] keeps its own signing).
    pub fn with_key(mut self, key: Option<ApprovalKey>) -> Self {
        if let Sink::Closed { key: k, .. } = &mut self.sink {
            *k = key;
        }
        self
    }

    /// Whether any record has been written (the chain exists).
    pub fn is_open(&self) -> bool {
        self.next_id > 1
    }

    fn sink(&mut self) -> Result<&mut dyn AuditSink, AuditError> {
        if let Sink::Closed { run_dir, key } = &mut self.sink {
            let key = key.take().or_else(super::chain::default_key);
            let log = ChainLog::create_with_key(run_dir, key)?;
            self.sink = Sink::Open(Box::new(log));
        }
        match &mut self.sink {
            Sink::Open(s) => Ok(s.as_mut()),
            Sink::Closed { .. } => unreachable!("opened above"),
        }
    }

    /// Before calling `tool` with `args` at ReAct step `step`: an intent record, fsync'd, when
    /// the tool has side effects (the first one opens the chain). `None` for a tool without.
    pub fn intent(
        &mut self,
        step: usize,
        tool: &dyn Tool,
        args: &Value,
        fingerprint: &str,
    ) -> Result<Option<AuditedCall>, AuditError> {
        if !tool.side_effects() {
            return Ok(None);
        }
        if !self.is_open() {
            let started = AuditEvent::RunStarted {
                run_id: self.run_id.clone(),
                task: self.task.clone(),
            };
            self.sink()?.record(started, true)?;
        }
        let call = AuditedCall {
            action_id: self.next_id,
            fingerprint: fingerprint.to_string(),
            irreversible: !tool.risk().reversible,
        };
        self.next_id += 1;
        let intent = AuditEvent::Intent {
            action_id: call.action_id,
            cycle: step,
            tool: tool.name().to_string(),
            args: args.clone(),
            fingerprint: call.fingerprint.clone(),
            irreversible: call.irreversible,
            approval: None,
            implicit: false,
            why: None,
        };
        self.sink()?.record(intent, true)?;
        Ok(Some(call))
    }

    /// After the call: its outcome record (`call` is what [`ActionTrail::intent`] returned;
    /// nothing is written for `None`). A ReAct call has no post-condition, so output is
    /// `unverified`; an error is `failed`, a timeout `timed_out`.
    pub fn outcome(
        &mut self,
        call: Option<AuditedCall>,
        result: &Result<String, ToolError>,
    ) -> Result<(), AuditError> {
        let Some(call) = call else {
            return Ok(());
        };
        let (status, output, discrepancies) = match result {
            Ok(text) => (OutcomeStatus::Unverified, text.clone(), Vec::new()),
            Err(e) if e.kind == ToolErrorKind::Timeout => (
                OutcomeStatus::TimedOut,
                e.for_model(),
                vec!["the action timed out; its effect is unknown".to_string()],
            ),
            Err(e) => (OutcomeStatus::Failed, e.for_model(), Vec::new()),
        };
        let outcome = AuditEvent::Outcome {
            action_id: call.action_id,
            fingerprint: call.fingerprint,
            status,
            cost: 0.0,
            discrepancies,
            output_sha256: sha256_hex(output.as_bytes()),
        };
        self.sink()?.record(outcome, call.irreversible)
    }

    /// The run ended in `state`: a terminal record, when the chain was opened.
    pub fn finish(&mut self, state: &str, detail: Option<&str>) -> Result<(), AuditError> {
        if !self.is_open() {
            return Ok(());
        }
        let terminal = AuditEvent::Terminal {
            state: state.to_string(),
            detail: detail.map(str::to_string),
        };
        self.sink()?.record(terminal, true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::audit::MemorySink;
    use crate::agent::tools::{Calculator, RiskProfile, ToolContext};
    use std::sync::{Arc, Mutex};

    /// A sink that shares its events with the test.
    #[derive(Clone, Default)]
    struct Shared(Arc<Mutex<MemorySink>>);

    impl AuditSink for Shared {
        fn record(&mut self, event: AuditEvent, durable: bool) -> Result<(), AuditError> {
            self.0.lock().expect("lock").record(event, durable)
        }
    }

    /// A tool that acts on the world (side effects), reversible.
    struct Effect;

    impl Tool for Effect {
        fn name(&self) -> &str {
            "effect"
        }
        fn description(&self) -> &str {
            "test"
        }
        fn args_schema(&self) -> Value {
            serde_json::json!({"type": "object"})
        }
        fn risk(&self) -> RiskProfile {
            RiskProfile::default()
        }
        fn side_effects(&self) -> bool {
            true
        }
        fn call(&self, _: Value, _: &ToolContext) -> Result<String, ToolError> {
            Ok("done".into())
        }
    }

    #[test]
    fn only_calls_with_side_effects_are_recorded_and_the_chain_opens_on_the_first() {
        let shared = Shared::default();
        let mut trail = ActionTrail::to_sink(Box::new(shared.clone()), "r1", "task");
        let args = serde_json::json!({"expr": "1+1"});
        assert_eq!(
            trail.intent(1, &Calculator, &args, "fp0").expect("intent"),
            None
        );
        trail.outcome(None, &Ok("2".into())).expect("outcome");
        trail.finish("completed", None).expect("finish");
        assert!(shared.0.lock().expect("lock").events.is_empty());

        let call = trail
            .intent(2, &Effect, &serde_json::json!({}), "fp1")
            .expect("intent")
            .expect("audited");
        assert_eq!(call.action_id, 1);
        trail
            .outcome(
                Some(call),
                &Err(ToolError::new(ToolErrorKind::Timeout, "slow")),
            )
            .expect("outcome");
        let second = trail
            .intent(3, &Effect, &serde_json::json!({}), "fp2")
            .expect("intent")
            .expect("audited");
        trail.outcome(Some(second), &Ok("done".into())).expect("o");
        trail.finish("completed", Some("ok")).expect("finish");
        let events = shared.0.lock().expect("lock").events.clone();
        let kinds: Vec<&str> = events
            .iter()
            .map(|(e, _)| match e {
                AuditEvent::RunStarted { .. } => "start",
                AuditEvent::Intent { .. } => "intent",
                AuditEvent::Outcome { .. } => "outcome",
                AuditEvent::Terminal { .. } => "terminal",
                _ => "other",
            })
            .collect();
        assert_eq!(
            kinds,
            ["start", "intent", "outcome", "intent", "outcome", "terminal"]
        );
        // Intents are durable; the first outcome timed out, the second is unverified.
        assert!(events[1].1);
        match (&events[1].0, &events[2].0, &events[4].0) {
            (
                AuditEvent::Intent {
                    action_id: 1,
                    cycle: 2,
                    tool,
                    fingerprint,
                    ..
                },
                AuditEvent::Outcome {
                    action_id: 1,
                    status: OutcomeStatus::TimedOut,
                    discrepancies,
                    ..
                },
                AuditEvent::Outcome {
                    action_id: 2,
                    status: OutcomeStatus::Unverified,
                    output_sha256,
                    ..
                },
            ) => {
                assert_eq!((tool.as_str(), fingerprint.as_str()), ("effect", "fp1"));
                assert_eq!(discrepancies.len(), 1);
                assert_eq!(*output_sha256, sha256_hex(b"done"));
            }
            other => panic!("unexpected records {other:?}"),
        }
    }

    #[test]
    fn a_run_without_audited_calls_leaves_no_chain_in_its_directory() {
        let dir = tempfile::tempdir().expect("dir");
        let mut trail = ActionTrail::in_run_dir(dir.path(), "r", "t");
        trail
            .intent(1, &Calculator, &serde_json::json!({}), "f")
            .expect("intent");
        trail.finish("completed", None).expect("finish");
        assert!(!dir.path().join(super::super::AUDIT_FILE).exists());
        let call = trail
            .intent(2, &Effect, &serde_json::json!({}), "g")
            .expect("intent");
        trail.outcome(call, &Ok("done".into())).expect("outcome");
        trail.finish("completed", None).expect("finish");
        let report = super::super::verify(dir.path()).expect("verify");
        assert!(
            report.problem.is_none() && report.unknown_intents.is_empty(),
            "{report:?}"
        );
        assert_eq!(report.records, 4);
    }
}
