//! Act: audit the intent, execute with a timeout, verify the post-condition, audit the outcome.
//!
//! The intent record is written and fsync'd before the tool runs, so a crash mid-action leaves
//! an intent with no outcome, which `audit verify` reports as unknown and the loop never retries.
//! The tool runs on the blocking pool under a timeout (its cancel token is set when the time is
//! up). A tool's post-condition (`Tool::verify`, declared by the tool; `PostConditions` lets a
//! caller put its own in place of a tool's) is checked against the world after the call; a
//! failed check is a discrepancy, which becomes a signal for the next Observe. The budget is
//! debited by the risk the action took (`super::risk`: declared cost, reversibility,
//! uncertainty), which the request carries.

use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::agent::audit::{AuditError, AuditEvent, AuditSink, OutcomeStatus};
use crate::agent::condense::sha256_hex;
use crate::agent::tools::{Tool, ToolContext, ToolError, ToolErrorKind, Verification};
use crate::lm::CancelToken;

use super::intent::IntentWhy;
pub use super::risk::cost_units;

/// What an action did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ActionReport {
    /// Action id (1-based over the run).
    pub action_id: u64,
    /// Cycle.
    pub cycle: usize,
    /// Tool.
    pub tool: String,
    /// Arguments.
    pub args: Value,
    /// Fingerprint.
    pub fingerprint: String,
    /// How it ended.
    pub status: OutcomeStatus,
    /// Full output (or the error text).
    pub output: String,
    /// Post-condition discrepancies.
    pub discrepancies: Vec<String>,
    /// Risk budget debited (the risk the action took).
    pub cost: f64,
    /// Running time.
    pub elapsed_s: f64,
    /// Chosen by implicit guidance.
    pub implicit: bool,
    /// SHA-256 of the approval token spent on it.
    pub approval: Option<String>,
    /// What kind of failure, when it failed (a missing file is a fact the answer can state).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ToolErrorKind>,
}

/// A post-condition: `Ok` when the world is as the call promised.
pub type PostCheck = Arc<dyn Fn(&Value, &str, &ToolContext) -> Result<(), String> + Send + Sync>;

/// Post-conditions the caller adds by tool name (tests, an embedding program): each is checked
/// in place of the named tool's own (`Tool::verify`). None by default: every tool declares its
/// own.
#[derive(Clone, Default)]
pub struct PostConditions {
    map: BTreeMap<String, PostCheck>,
}

impl std::fmt::Debug for PostConditions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.map.keys()).finish()
    }
}

impl PostConditions {
    /// None added.
    pub fn new() -> Self {
        Self::default()
    }

    /// Add one for `tool` (it replaces the tool's own).
    pub fn with(
        mut self,
        tool: &str,
        check: impl Fn(&Value, &str, &ToolContext) -> Result<(), String> + Send + Sync + 'static,
    ) -> Self {
        self.map.insert(tool.into(), Arc::new(check));
        self
    }

    /// The one added for `tool`.
    pub fn get(&self, tool: &str) -> Option<&PostCheck> {
        self.map.get(tool)
    }

    /// What the post-condition of `tool` says of a call that returned `output`: the one added
    /// for its name, else the tool's own.
    pub fn verify(
        &self,
        tool: &dyn Tool,
        args: &Value,
        output: &str,
        ctx: &ToolContext,
    ) -> Verification {
        match self.get(tool.name()) {
            Some(check) => check(args, output, ctx).into(),
            None => tool.verify(args, output, ctx),
        }
    }
}

/// One action to run.
pub struct ActRequest {
    /// Action id.
    pub action_id: u64,
    /// Cycle.
    pub cycle: usize,
    /// The tool.
    pub tool: Arc<dyn Tool>,
    /// Arguments (normalized).
    pub args: Value,
    /// Fingerprint.
    pub fingerprint: String,
    /// Chosen by implicit guidance.
    pub implicit: bool,
    /// SHA-256 of the approval token spent on it.
    pub approval: Option<String>,
    /// Time limit.
    pub timeout: Duration,
    /// The risk it takes (`super::risk::RiskAssessment::risk`): debited from the budget.
    pub risk: f64,
    /// Why it runs (`super::intent`), written into the intent record.
    pub why: Option<IntentWhy>,
}

/// Run one action: intent (fsync'd), execute under the timeout, verify, outcome.
pub async fn execute(
    req: ActRequest,
    ctx: &ToolContext,
    post: &PostConditions,
    audit: &mut dyn AuditSink,
) -> Result<ActionReport, AuditError> {
    let risk = req.tool.risk();
    audit.record(
        AuditEvent::Intent {
            action_id: req.action_id,
            cycle: req.cycle,
            tool: req.tool.name().to_string(),
            args: req.args.clone(),
            fingerprint: req.fingerprint.clone(),
            irreversible: !risk.reversible,
            approval: req.approval.clone(),
            implicit: req.implicit,
            why: req.why.map(Box::new),
        },
        true,
    )?;
    let call_cancel = CancelToken::new();
    let mut call_ctx = ctx.clone();
    call_ctx.cancel = call_cancel.clone();
    let tool = req.tool.clone();
    let args = req.args.clone();
    let t0 = Instant::now();
    let handle = tokio::task::spawn_blocking(move || {
        let name = tool.name().to_string();
        // An argument the offered schema hides is refused before the tool sees it.
        crate::agent::tools::check_args(tool.as_ref(), &args)?;
        match catch_unwind(AssertUnwindSafe(|| tool.call(args, &call_ctx))) {
            Ok(r) => r,
            Err(_) => Err(ToolError::failed(format!(
                "the {name} tool crashed (a bug in boyd, not your fault); try another approach."
            ))),
        }
    });
    let result = match tokio::time::timeout(req.timeout, handle).await {
        Ok(Ok(r)) => Some(r),
        Ok(Err(join)) => Some(Err(ToolError::failed(format!(
            "the tool task failed: {join}"
        )))),
        Err(_) => {
            call_cancel.cancel();
            None
        }
    };
    let elapsed = t0.elapsed().as_secs_f64();
    let error = match &result {
        None => Some(ToolErrorKind::Timeout),
        Some(Err(e)) => Some(e.kind),
        Some(Ok(_)) => None,
    };
    let (status, output, discrepancies) = match result {
        None => (
            OutcomeStatus::TimedOut,
            ToolError::new(
                ToolErrorKind::Timeout,
                format!("stopped after {:.1} s", req.timeout.as_secs_f64()),
            )
            .for_model(),
            vec!["the action timed out; its effect is unknown".to_string()],
        ),
        Some(Err(e)) => (OutcomeStatus::Failed, e.for_model(), Vec::new()),
        Some(Ok(text)) => match post.verify(req.tool.as_ref(), &req.args, &text, ctx) {
            Verification::Undeclared => (OutcomeStatus::Unverified, text, Vec::new()),
            Verification::Holds => (OutcomeStatus::Verified, text, Vec::new()),
            Verification::Broken(d) => (OutcomeStatus::Unverified, text, vec![d]),
        },
    };
    let cost = req.risk;
    audit.record(
        AuditEvent::Outcome {
            action_id: req.action_id,
            fingerprint: req.fingerprint.clone(),
            status,
            cost,
            discrepancies: discrepancies.clone(),
            output_sha256: sha256_hex(output.as_bytes()),
        },
        !risk.reversible,
    )?;
    Ok(ActionReport {
        action_id: req.action_id,
        cycle: req.cycle,
        tool: req.tool.name().to_string(),
        args: req.args,
        fingerprint: req.fingerprint,
        status,
        output,
        discrepancies,
        cost,
        elapsed_s: elapsed,
        implicit: req.implicit,
        approval: req.approval,
        error,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::ooda::writers::{DeleteFile, WriteFile};
    use crate::agent::tools::{
        Calculator, ListDir, ReadFile, Sandbox, SearchText, ShellPolicy, Toolset, WithSchema,
    };
    use serde_json::json;

    fn ctx(workspace: Option<Sandbox>) -> ToolContext {
        ToolContext {
            workspace,
            blob_dir: std::env::temp_dir(),
            cancel: CancelToken::new(),
            task: None,
            observed: Vec::new(),
        }
    }

    fn broken(v: Verification) -> String {
        match v {
            Verification::Broken(d) => d,
            other => panic!("expected a broken post-condition, got {other:?}"),
        }
    }

    #[test]
    fn the_tools_that_declare_a_post_condition_are_the_ones_act_verifies() {
        let mut tools = Toolset::builtin(Some(ShellPolicy::default()));
        tools.add(Arc::new(WriteFile));
        tools.add(Arc::new(DeleteFile));
        let c = ctx(None);
        let post = PostConditions::new();
        // Asked with an output that is no number, no text and no file: a tool with a
        // post-condition answers something other than `Undeclared`.
        let declared: Vec<&str> = tools
            .iter()
            .filter(|t| post.verify(t.as_ref(), &json!({}), "", &c) != Verification::Undeclared)
            .map(|t| t.name())
            .collect();
        assert_eq!(
            declared,
            [
                "calculator",
                "list_dir",
                "read_file",
                "search_text",
                "table",
                "read_blob",
                "write_file",
                "delete_file"
            ]
        );
    }

    #[test]
    fn the_file_tools_declare_what_they_do_to_the_file_they_name() {
        use crate::agent::tools::FileEffect;
        let mut tools = Toolset::builtin(Some(ShellPolicy::default()));
        tools.add(Arc::new(WriteFile));
        tools.add(Arc::new(DeleteFile));
        let effects: Vec<(&str, FileEffect)> = tools
            .iter()
            .map(|t| (t.name(), t.file_effect()))
            .filter(|(_, e)| *e != FileEffect::None)
            .collect();
        assert_eq!(
            effects,
            [
                ("read_file", FileEffect::Reads),
                ("table", FileEffect::Reads),
                ("write_file", FileEffect::Writes),
                ("delete_file", FileEffect::Deletes)
            ]
        );
        let narrowed = WithSchema::new(Arc::new(ReadFile), json!({"type": "object"}));
        assert_eq!(narrowed.file_effect(), FileEffect::Reads);
    }

    #[test]
    fn read_only_tools_check_their_output() {
        let c = ctx(None);
        let a = json!({});
        assert_eq!(Calculator.verify(&a, " 42\n", &c), Verification::Holds);
        assert_eq!(Calculator.verify(&a, "-1.5e3", &c), Verification::Holds);
        for bad in ["inf", "NaN", "7 apples", ""] {
            assert!(broken(Calculator.verify(&a, bad, &c)).contains("not a finite number"));
        }
        assert_eq!(ReadFile.verify(&a, "1: x", &c), Verification::Holds);
        assert_eq!(
            broken(ReadFile.verify(&a, " \n", &c)),
            "read_file returned nothing"
        );
        let blob = crate::agent::tools::ReadBlob;
        assert_eq!(blob.verify(&a, " ", &c), Verification::Holds);
        assert_eq!(
            broken(blob.verify(&a, "", &c)),
            "read_blob returned nothing"
        );
        assert_eq!(ListDir.verify(&a, "", &c), Verification::Holds);
        assert_eq!(SearchText.verify(&a, "", &c), Verification::Holds);
    }

    #[test]
    fn writers_check_the_file_afterwards() {
        let dir = tempfile::tempdir().expect("tempdir");
        let c = ctx(Some(Sandbox::new(dir.path()).expect("sandbox")));
        let args = json!({"path": "notes.txt", "content": "hello"});
        // A file that is not there fails the check, which names the path.
        assert!(broken(WriteFile.verify(&args, "", &c)).contains("notes.txt"));
        std::fs::write(dir.path().join("notes.txt"), "hello").expect("write");
        assert_eq!(WriteFile.verify(&args, "", &c), Verification::Holds);
        std::fs::write(dir.path().join("notes.txt"), "other").expect("write");
        assert_eq!(
            broken(WriteFile.verify(&args, "", &c)),
            "notes.txt does not hold the content written"
        );
        let del = json!({"path": "notes.txt"});
        assert_eq!(
            broken(DeleteFile.verify(&del, "", &c)),
            "notes.txt still exists"
        );
        std::fs::remove_file(dir.path().join("notes.txt")).expect("rm");
        assert_eq!(DeleteFile.verify(&del, "", &c), Verification::Holds);
        // Without a workspace there is nothing to check against: the check says why.
        let none = ctx(None);
        assert!(broken(WriteFile.verify(&args, "", &none)).contains("no workspace"));
        assert!(broken(DeleteFile.verify(&del, "", &none)).contains("no workspace"));
    }

    #[test]
    fn an_added_post_condition_replaces_the_tools_own_and_wrapping_keeps_it() {
        let c = ctx(None);
        let a = json!({});
        let post = PostConditions::new().with("calculator", |_, out, _| {
            if out == "7" {
                Ok(())
            } else {
                Err("not seven".into())
            }
        });
        assert_eq!(post.verify(&Calculator, &a, "7", &c), Verification::Holds);
        assert_eq!(
            post.verify(&Calculator, &a, "8", &c),
            Verification::Broken("not seven".into())
        );
        // Other tools keep their own.
        assert_eq!(
            post.verify(&ReadFile, &a, "", &c),
            Verification::Broken("read_file returned nothing".into())
        );
        // A tool offered with a narrowed schema is the same tool: same post-condition.
        let narrowed = WithSchema::new(Arc::new(Calculator), json!({"type": "object"}));
        assert!(broken(PostConditions::new().verify(&narrowed, &a, "x", &c))
            .contains("not a finite number"));
    }
}
