//! Act: audit the intent, execute with a timeout, verify the post-condition, audit the outcome.
//!
//! The intent record is written and fsync'd before the tool runs, so a crash mid-action leaves
//! an intent with no outcome, which `audit verify` reports as unknown and the loop never retries.
//! The tool runs on the blocking pool under a timeout (its cancel token is set when the time is
//! up). A tool's post-condition (`PostConditions`: per tool name, declared next to the tool set)
//! is checked against the world after the call; a failed check is a discrepancy, which becomes a
//! signal for the next Observe. The budget is debited by the risk the action took
//! (`super::risk`: declared cost, reversibility, uncertainty), which the request carries.

use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::agent::audit::{AuditError, AuditEvent, AuditSink, OutcomeStatus};
use crate::agent::condense::sha256_hex;
use crate::agent::tools::{Tool, ToolContext, ToolError, ToolErrorKind};
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
}

/// A post-condition: `Ok` when the world is as the call promised.
pub type PostCheck = Arc<dyn Fn(&Value, &str, &ToolContext) -> Result<(), String> + Send + Sync>;

/// Post-conditions by tool name.
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
    /// None declared.
    pub fn new() -> Self {
        Self::default()
    }

    /// Declare one.
    pub fn with(
        mut self,
        tool: &str,
        check: impl Fn(&Value, &str, &ToolContext) -> Result<(), String> + Send + Sync + 'static,
    ) -> Self {
        self.map.insert(tool.into(), Arc::new(check));
        self
    }

    /// The one for `tool`.
    pub fn get(&self, tool: &str) -> Option<&PostCheck> {
        self.map.get(tool)
    }

    /// The built-in tools' post-conditions.
    pub fn builtin() -> Self {
        Self::new()
            .with("calculator", |_a, out, _c| {
                let t = out.trim();
                if t.parse::<f64>().is_ok_and(f64::is_finite) {
                    Ok(())
                } else {
                    Err(format!("calculator output {t:?} is not a finite number"))
                }
            })
            .with("read_file", |_a, out, _c| {
                if out.trim().is_empty() {
                    Err("read_file returned nothing".into())
                } else {
                    Ok(())
                }
            })
            .with("list_dir", |_a, _out, _c| Ok(()))
            .with("search_text", |_a, _out, _c| Ok(()))
            .with("read_blob", |_a, out, _c| {
                if out.is_empty() {
                    Err("read_blob returned nothing".into())
                } else {
                    Ok(())
                }
            })
            .with("write_file", |a, _out, c| {
                let ws = c.workspace().map_err(|e| e.message)?;
                let path = a.get("path").and_then(Value::as_str).unwrap_or("");
                let want = a.get("content").and_then(Value::as_str).unwrap_or("");
                let p = ws.resolve(path).map_err(|e| e.to_string())?;
                match std::fs::read_to_string(&p) {
                    Ok(got) if got == want => Ok(()),
                    Ok(_) => Err(format!("{path} does not hold the content written")),
                    Err(e) => Err(format!("{path} cannot be read back: {e}")),
                }
            })
            .with("delete_file", |a, _out, c| {
                let ws = c.workspace().map_err(|e| e.message)?;
                let path = a.get("path").and_then(Value::as_str).unwrap_or("");
                match ws.lexical(path) {
                    Ok(p) if !p.exists() => Ok(()),
                    Ok(_) => Err(format!("{path} still exists")),
                    Err(e) => Err(e.to_string()),
                }
            })
    }
}

/// Wrap a scalar argument into the tool's single required property; `null` becomes `{}`.
pub fn normalize_args(tool: &dyn Tool, args: Value) -> Value {
    match args {
        Value::Object(_) => args,
        Value::Null => Value::Object(serde_json::Map::new()),
        scalar => {
            let schema = tool.args_schema();
            let required: Vec<&str> = schema
                .get("required")
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            match required.as_slice() {
                [only] => {
                    let mut m = serde_json::Map::new();
                    m.insert((*only).to_string(), scalar);
                    Value::Object(m)
                }
                _ => scalar,
            }
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
        Some(Ok(text)) => match post.get(req.tool.name()) {
            None => (OutcomeStatus::Unverified, text, Vec::new()),
            Some(check) => match check(&req.args, &text, ctx) {
                Ok(()) => (OutcomeStatus::Verified, text, Vec::new()),
                Err(d) => (OutcomeStatus::Unverified, text, vec![d]),
            },
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
    })
}
