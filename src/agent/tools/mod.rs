//! Tools the agent can call: the `Tool` trait, its error type, and the built-in tools.
//!
//! A tool takes JSON arguments and returns text. Arguments are deserialized into a typed struct
//! first; a mismatch is a `ToolErrorKind::InvalidArgs` whose text tells the model what was wrong.
//! Tool errors are the model's (or the world's) problem and become observations; they never end
//! the run. File tools only see paths inside the workspace root (`sandbox`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::lm::CancelToken;

pub mod blob;
pub mod calculator;
pub mod choices;
pub mod compute;
pub mod files;
pub mod jail;
pub mod private;
pub mod sandbox;
pub mod shell;
pub mod sizing;
pub mod table;

pub use blob::ReadBlob;
pub use calculator::Calculator;
pub use compute::Compute;
pub use files::{ListDir, ReadFile, SearchText};
pub use jail::{Jail, JailError};
pub use private::Private;
pub use sandbox::{Sandbox, SandboxError};
pub use shell::{Shell, ShellPolicy};
pub use sizing::{HardwareInfo, SizeModel};
pub use table::Table;

/// What kind of failure a tool reports (defined with the run's other types).
pub use super::types::ToolErrorKind;

/// A tool's failure, with text meant for the model.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{kind_str}: {message}", kind_str = kind.as_str())]
pub struct ToolError {
    /// What kind of failure.
    pub kind: ToolErrorKind,
    /// What happened, in words the model can act on.
    pub message: String,
}

impl ToolError {
    /// A new error.
    pub fn new(kind: ToolErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
        }
    }
    /// `InvalidArgs`.
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(ToolErrorKind::InvalidArgs, message)
    }
    /// `NotFound`.
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(ToolErrorKind::NotFound, message)
    }
    /// `PermissionDenied`.
    pub fn denied(message: impl Into<String>) -> Self {
        Self::new(ToolErrorKind::PermissionDenied, message)
    }
    /// `Failed`.
    pub fn failed(message: impl Into<String>) -> Self {
        Self::new(ToolErrorKind::Failed, message)
    }

    /// The observation text for the model.
    pub fn for_model(&self) -> String {
        format!(
            "Error ({}): {} {}",
            self.kind.as_str(),
            self.message,
            self.kind.advice()
        )
    }
}

/// How much an action costs and whether it can be undone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RiskProfile {
    /// Rough cost of one call.
    pub cost: Cost,
    /// Whether the effect can be undone (read-only tools are reversible).
    pub reversible: bool,
}

impl Default for RiskProfile {
    fn default() -> Self {
        Self {
            cost: Cost::Low,
            reversible: true,
        }
    }
}

/// Rough cost of one tool call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Cost {
    /// Microseconds to milliseconds, no side effects.
    Low,
    /// Spawns a process or reads many files.
    Medium,
    /// Long-running or resource-heavy.
    High,
}

/// What a tool may use while it runs.
#[derive(Debug, Clone)]
pub struct ToolContext {
    /// The workspace file tools are confined to; `None` when the run has no workspace.
    pub workspace: Option<Sandbox>,
    /// The run directory's blob store (`<run>/blobs`).
    pub blob_dir: PathBuf,
    /// Cancellation.
    pub cancel: CancelToken,
    /// The user's task, when the tools run for one: a search that finds none of the model's
    /// words falls back to the task's own words.
    pub task: Option<String>,
}

impl ToolContext {
    /// The workspace, or a `PermissionDenied` error saying there is none.
    pub fn workspace(&self) -> Result<&Sandbox, ToolError> {
        self.workspace.as_ref().ok_or_else(|| {
            ToolError::denied("this run has no workspace directory, so file tools are unavailable.")
        })
    }
}

/// What a tool's post-condition says about a call that returned: whether the world is as the
/// call promised (the OODA act phase checks it after the call; ReAct does not).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verification {
    /// The tool declares no post-condition.
    Undeclared,
    /// The world is as promised.
    Holds,
    /// It is not: what differs, in words.
    Broken(String),
}

impl From<Result<(), String>> for Verification {
    fn from(r: Result<(), String>) -> Self {
        match r {
            Ok(()) => Verification::Holds,
            Err(d) => Verification::Broken(d),
        }
    }
}

/// What a call does to the workspace file its `path` argument names: the OODA loop keeps the
/// world model's file hashes and the files it watches by it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum FileEffect {
    /// Nothing the loop tracks.
    #[default]
    None,
    /// Reads it: its content hash becomes a fact and the file is watched.
    Reads,
    /// Writes it: its old hash is dropped and the file is watched.
    Writes,
    /// Deletes it: its old hash is dropped and the file is no longer watched.
    Deletes,
}

/// What a tool adds to the OODA Decide prompt while it is offered: a line for the rules and
/// worked examples in the Decide reply format, each ending in a newline. The prompt joins the
/// hints of the offered tools in tool order (`ooda::lm_phases::decide_system_prompt`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PromptHint {
    /// One rule, `"- ...\n"`.
    pub rule: Option<&'static str>,
    /// Worked examples, `"Example N:\n..."`.
    pub examples: Option<&'static str>,
}

/// A tool with another argument schema (an enum of workspace paths, a narrowed enum): the
/// constraint changes, the tool and everything else it declares stay the same.
pub struct WithSchema {
    inner: Arc<dyn Tool>,
    schema: serde_json::Value,
}

impl WithSchema {
    /// `inner` offered with `schema`.
    pub fn new(inner: Arc<dyn Tool>, schema: serde_json::Value) -> Self {
        Self { inner, schema }
    }
}

impl Tool for WithSchema {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn description(&self) -> &str {
        self.inner.description()
    }
    fn args_schema(&self) -> serde_json::Value {
        self.schema.clone()
    }
    fn needs_workspace(&self) -> bool {
        self.inner.needs_workspace()
    }
    fn risk(&self) -> RiskProfile {
        self.inner.risk()
    }
    fn polls(&self) -> bool {
        self.inner.polls()
    }
    fn side_effects(&self) -> bool {
        self.inner.side_effects()
    }
    fn intent_words(&self) -> Vec<String> {
        self.inner.intent_words()
    }
    fn verify(&self, args: &serde_json::Value, output: &str, ctx: &ToolContext) -> Verification {
        self.inner.verify(args, output, ctx)
    }
    fn prompt_hint(&self) -> PromptHint {
        self.inner.prompt_hint()
    }
    fn file_effect(&self) -> FileEffect {
        self.inner.file_effect()
    }
    fn tolerated_args(&self) -> &[&'static str] {
        self.inner.tolerated_args()
    }
    /// The inner tool's: the narrowed schema steers what a model writes, the tool's own bounds
    /// what a call may pass.
    fn own_schema(&self) -> serde_json::Value {
        self.inner.own_schema()
    }
    fn call(&self, args: serde_json::Value, ctx: &ToolContext) -> Result<String, ToolError> {
        self.inner.call(args, ctx)
    }
}

/// A tool the agent can call.
pub trait Tool: Send + Sync {
    /// Name the model uses (lowercase, `[a-z_]+`).
    fn name(&self) -> &str;
    /// One or two sentences for the model: what it does and when to use it.
    fn description(&self) -> &str;
    /// JSON schema of the arguments object.
    fn args_schema(&self) -> serde_json::Value;
    /// Whether the tool works on the workspace (file tools, the shell): a run without a
    /// workspace is not offered it, so the model never spends a step learning that.
    fn needs_workspace(&self) -> bool {
        false
    }
    /// Cost and reversibility.
    fn risk(&self) -> RiskProfile {
        RiskProfile::default()
    }
    /// Whether calling it repeatedly with the same arguments is legitimate (polling); such calls
    /// are exempt from the repeated-action guard.
    fn polls(&self) -> bool {
        false
    }
    /// Whether a call acts beyond reading and computing (runs a program, writes, deletes): the
    /// loops record such a call in the audit log, an intent before and an outcome after.
    /// Default: the irreversible tools.
    fn side_effects(&self) -> bool {
        !self.risk().reversible
    }
    /// Words a task uses when it asks for this tool's effect (lowercase). An irreversible
    /// action is only offered for approval when the task names one of them: one that only a
    /// file or a tool output asked for is refused. Default: the name and its first word
    /// (`launch_job` -> `launch_job`, `launch`).
    fn intent_words(&self) -> Vec<String> {
        let name = self.name().to_ascii_lowercase();
        let mut v = vec![name.clone()];
        if let Some(first) = name.split('_').next().filter(|w| *w != name) {
            v.push(first.to_string());
        }
        v
    }
    /// The post-condition of a call that returned `output`: checked against the world (the
    /// workspace through `ctx`) after the call. Default: none declared.
    fn verify(&self, _args: &serde_json::Value, _output: &str, _ctx: &ToolContext) -> Verification {
        Verification::Undeclared
    }
    /// What the tool adds to the OODA Decide prompt while it is offered. Default: nothing.
    fn prompt_hint(&self) -> PromptHint {
        PromptHint::default()
    }
    /// What a call does to the file named by its `path` argument. Default: nothing tracked.
    fn file_effect(&self) -> FileEffect {
        FileEffect::None
    }
    /// Argument names the tool accepts without offering them in its schema: old spellings of
    /// offered ones (`pattern` for `query`) that widen nothing. [`check_args`] lets them
    /// through; every other argument the schema does not offer is refused. Default: none.
    fn tolerated_args(&self) -> &[&'static str] {
        &[]
    }
    /// The schema the tool itself offers, which bounds the arguments a call may pass
    /// ([`check_args`]). A wrapper that only narrows what a model is shown ([`WithSchema`]: an
    /// optional argument left out so a greedy small model does not fill it) returns its inner
    /// tool's. Default: [`Tool::args_schema`].
    fn own_schema(&self) -> serde_json::Value {
        self.args_schema()
    }
    /// Run it.
    fn call(&self, args: serde_json::Value, ctx: &ToolContext) -> Result<String, ToolError>;
}

/// Deserialize tool arguments into a typed struct; a mismatch is `InvalidArgs` with the reason.
pub fn parse_args<T: DeserializeOwned>(args: serde_json::Value) -> Result<T, ToolError> {
    let args = if args.is_null() {
        serde_json::Value::Object(serde_json::Map::new())
    } else {
        args
    };
    serde_json::from_value(args).map_err(|e| ToolError::invalid(format!("bad arguments: {e}.")))
}

/// Refuse an argument `tool`'s own schema ([`Tool::own_schema`]) does not offer (its
/// `properties`, plus [`Tool::tolerated_args`]), naming it and the ones offered: a schema that
/// hides an argument (`size_model`'s `config` unless extended) means a call may not use it,
/// whatever the tool's code could do with it. A schema without `properties`, or one that
/// allows additional properties (`true` or a schema), checks nothing; arguments that are not
/// an object are left for the tool to refuse. Both loops call it before every tool call.
pub fn check_args(tool: &dyn Tool, args: &serde_json::Value) -> Result<(), ToolError> {
    use serde_json::Value;
    let Value::Object(given) = args else {
        return Ok(());
    };
    let schema = tool.own_schema();
    let Some(offered) = schema.get("properties").and_then(Value::as_object) else {
        return Ok(());
    };
    if matches!(
        schema.get("additionalProperties"),
        Some(Value::Bool(true) | Value::Object(_))
    ) {
        return Ok(());
    }
    let tolerated = tool.tolerated_args();
    let hidden: Vec<&str> = given
        .keys()
        .map(String::as_str)
        .filter(|k| !offered.contains_key(*k) && !tolerated.contains(k))
        .collect();
    if hidden.is_empty() {
        return Ok(());
    }
    let names: Vec<&str> = offered.keys().map(String::as_str).collect();
    let allowed = if names.is_empty() {
        "none".to_string()
    } else {
        names.join(", ")
    };
    Err(ToolError::invalid(format!(
        "{} does not take the argument{} {}; the arguments it takes are: {allowed}.",
        tool.name(),
        if hidden.len() == 1 { "" } else { "s" },
        hidden
            .iter()
            .map(|h| format!("{h:?}"))
            .collect::<Vec<_>>()
            .join(", ")
    )))
}

/// The arguments a model gave, as an object: a scalar goes into the tool's single required
/// property (`{"tool": "calculator", "args": "2+2"}` works); `null` becomes `{}`. Both loops
/// call it before a tool runs.
pub fn normalize_args(tool: &dyn Tool, args: serde_json::Value) -> serde_json::Value {
    use serde_json::Value;
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

/// The `final_answer` tool: ends the run with an answer. The loop treats a call to it as
/// `Action::Final`; `call` only echoes the answer.
#[derive(Debug, Default, Clone, Copy)]
pub struct FinalAnswer;

/// Name of the final-answer tool.
pub const FINAL_ANSWER: &str = "final_answer";

/// Longest final answer the schema allows: an answer is a value or a sentence, never an essay,
/// and a bound keeps a small model from writing until the step's token limit cuts the JSON.
pub const FINAL_ANSWER_MAX_CHARS: usize = 240;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FinalArgs {
    answer: serde_json::Value,
}

impl FinalAnswer {
    /// Extract the answer text from `final_answer` arguments (strings as-is, numbers printed).
    pub fn answer_from_args(args: &serde_json::Value) -> Result<String, ToolError> {
        let a: FinalArgs = parse_args(args.clone())?;
        Ok(match a.answer {
            serde_json::Value::String(s) => s,
            other => other.to_string(),
        })
    }
}

impl Tool for FinalAnswer {
    fn name(&self) -> &str {
        FINAL_ANSWER
    }
    fn description(&self) -> &str {
        "Give the final answer to the task and stop. Use it as soon as an observation contains the answer; copy the value (number, name, yes/no with the reason) from the observation."
    }
    fn args_schema(&self) -> serde_json::Value {
        serde_json::json!({
            "type": "object",
            "properties": {"answer": {"type": "string", "maxLength": FINAL_ANSWER_MAX_CHARS, "description": "the answer, short"}},
            "required": ["answer"],
            "additionalProperties": false
        })
    }
    fn call(&self, args: serde_json::Value, _ctx: &ToolContext) -> Result<String, ToolError> {
        Self::answer_from_args(&args)
    }
}

/// A set of tools by name, in a stable order (the order they are shown to the model).
#[derive(Clone, Default)]
pub struct Toolset {
    tools: Vec<Arc<dyn Tool>>,
}

impl std::fmt::Debug for Toolset {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.names()).finish()
    }
}

impl Toolset {
    /// An empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Add a tool; a tool with the same name is replaced.
    pub fn with(mut self, tool: impl Tool + 'static) -> Self {
        self.add(Arc::new(tool));
        self
    }

    /// Add a shared tool; a tool with the same name is replaced in place.
    pub fn add(&mut self, tool: Arc<dyn Tool>) {
        if let Some(slot) = self.tools.iter_mut().find(|t| t.name() == tool.name()) {
            *slot = tool;
        } else {
            self.tools.push(tool);
        }
    }

    /// Look a tool up by name.
    pub fn get(&self, name: &str) -> Option<&Arc<dyn Tool>> {
        self.tools.iter().find(|t| t.name() == name)
    }

    /// All tools in order.
    pub fn iter(&self) -> impl Iterator<Item = &Arc<dyn Tool>> {
        self.tools.iter()
    }

    /// Tool names in order.
    pub fn names(&self) -> Vec<&str> {
        self.tools.iter().map(|t| t.name()).collect()
    }

    /// Number of tools.
    pub fn len(&self) -> usize {
        self.tools.len()
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }

    /// The built-in tools. File tools need a workspace at call time; `shell` is included only
    /// when `shell` is `Some` (it is off unless enabled). `final_answer` is always last.
    /// [`Compute`] is not among them yet: offered beside `calculator`, the 0.5B agent model
    /// answered "What is 1234 * 5678?" with a run-on number instead of a tool call
    /// (`constrain::qwen_constrained_actions_parse`); it joins once it replaces `calculator`.
    pub fn builtin(shell: Option<ShellPolicy>) -> Self {
        let mut set = Toolset::new()
            .with(Calculator)
            .with(ListDir)
            .with(ReadFile)
            .with(SearchText)
            .with(Table)
            .with(ReadBlob)
            .with(SizeModel::default())
            .with(HardwareInfo::default());
        if let Some(policy) = shell {
            set = set.with(Shell::new(policy));
        }
        set.with(FinalAnswer)
    }

    /// A set holding only the tool named `name` (empty when there is none).
    pub fn only(&self, name: &str) -> Self {
        self.filtered(|t| t.name() == name)
    }

    /// The same set without the tool named `name`.
    pub fn without(&self, name: &str) -> Self {
        self.filtered(|t| t.name() != name)
    }

    fn filtered(&self, keep: impl Fn(&dyn Tool) -> bool) -> Self {
        Self {
            tools: self
                .tools
                .iter()
                .filter(|t| keep(t.as_ref()))
                .cloned()
                .collect(),
        }
    }

    /// Drop the tools that need a workspace when the run has none.
    pub fn for_workspace(mut self, has_workspace: bool) -> Self {
        if !has_workspace {
            self.tools.retain(|t| !t.needs_workspace());
        }
        self
    }

    /// Names and one-line descriptions, for listings.
    pub fn describe(&self) -> BTreeMap<String, String> {
        self.tools
            .iter()
            .map(|t| (t.name().to_string(), t.description().to_string()))
            .collect()
    }
}

/// Truncate `s` to at most `max` bytes on a char boundary.
pub(crate) fn truncate_str(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while end > 0 && !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// Display a path relative to the workspace root with `/` separators.
pub(crate) fn rel_display(root: &Path, p: &Path) -> String {
    let rel = p.strip_prefix(root).unwrap_or(p);
    let s = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join("/");
    if s.is_empty() {
        ".".to_string()
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn normalize_args_wraps_a_scalar_into_the_only_required_property() {
        assert_eq!(
            normalize_args(&Calculator, json!("2+2")),
            json!({"expression": "2+2"})
        );
        assert_eq!(normalize_args(&Calculator, json!(null)), json!({}));
        let obj = json!({"expression": "1"});
        assert_eq!(normalize_args(&Calculator, obj.clone()), obj);
        // No single required property: the scalar is left for the tool to refuse.
        assert_eq!(normalize_args(&ListDir, json!(".")), json!("."));
        assert_eq!(normalize_args(&ReadBlob, json!(3)), json!({"blob": 3}));
    }
}
