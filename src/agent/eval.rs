//! Agent evals: a JSONL suite of tasks, each with optional workspace files and a checker.
//!
//! One task per line:
//! `{"id": "mul", "task": "What is 1234 * 5678?", "check": {"type": "number_within", "value": 7006652}}`.
//! Optional fields: `files` (relative path → content, written into a fresh workspace), `shell`
//! (enable the shell tool for this task), `max_steps`. Checkers: `exact`, `contains`, `regex`,
//! `number_within` (any number in the answer within `tolerance` of `value`; `1,234` counts as
//! 1234). A task passes when the run completes and the checker accepts the answer.

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::lm::CancelToken;

use super::planner::Planner;
use super::react::{self, AgentError, AgentEvent, Limits};
use super::rundir::{RunDir, RunDirError};
use super::tools::{Sandbox, SandboxError, ShellPolicy, Toolset};
use super::types::{AnswerBy, StopReason};

/// How an answer is checked.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum Checker {
    /// Equal after trimming whitespace, quotes and a trailing period (case-insensitive).
    Exact {
        /// Expected answer.
        value: String,
    },
    /// Contains the value.
    Contains {
        /// Expected substring.
        value: String,
        /// Compare case-insensitively (default true).
        #[serde(default = "yes")]
        ignore_case: bool,
    },
    /// Matches the regex.
    Regex {
        /// The pattern (Rust `regex` syntax).
        pattern: String,
    },
    /// Does not contain the value (case-insensitive).
    NotContains {
        /// The forbidden substring.
        value: String,
    },
    /// Every check passes.
    All {
        /// The checks.
        checks: Vec<Checker>,
    },
    /// At least one check passes.
    Any {
        /// The checks.
        checks: Vec<Checker>,
    },
    /// Some number in the answer is within `tolerance` of `value`.
    NumberWithin {
        /// Expected value.
        value: f64,
        /// Allowed absolute difference (default 0: exact, up to 1e-9).
        #[serde(default)]
        tolerance: f64,
    },
}

fn yes() -> bool {
    true
}

pub use super::words::numbers_in;

fn normalize(s: &str) -> String {
    let mut cur = s;
    loop {
        let next = cur
            .trim()
            .trim_matches(|c| c == '"' || c == '\'' || c == '`')
            .trim_end_matches('.');
        if next.len() == cur.len() {
            return next.to_lowercase();
        }
        cur = next;
    }
}

impl Checker {
    /// Check the checker itself (regex compiles, tolerance is sane).
    pub fn validate(&self) -> Result<(), String> {
        match self {
            Checker::Regex { pattern } => regex::Regex::new(pattern)
                .map(|_| ())
                .map_err(|e| format!("bad regex {pattern:?}: {e}")),
            Checker::NumberWithin { value, tolerance } => {
                if !value.is_finite() || !tolerance.is_finite() || *tolerance < 0.0 {
                    Err("number_within needs a finite value and a tolerance >= 0".into())
                } else {
                    Ok(())
                }
            }
            Checker::All { checks } | Checker::Any { checks } => {
                if checks.is_empty() {
                    return Err("all/any needs at least one check".into());
                }
                checks.iter().try_for_each(Checker::validate)
            }
            _ => Ok(()),
        }
    }

    /// Whether `answer` passes.
    pub fn check(&self, answer: &str) -> bool {
        match self {
            Checker::Exact { value } => normalize(answer) == normalize(value),
            Checker::Contains { value, ignore_case } => {
                if *ignore_case {
                    answer.to_lowercase().contains(&value.to_lowercase())
                } else {
                    answer.contains(value.as_str())
                }
            }
            Checker::Regex { pattern } => {
                regex::Regex::new(pattern).is_ok_and(|re| re.is_match(answer))
            }
            Checker::NotContains { value } => {
                !answer.to_lowercase().contains(&value.to_lowercase())
            }
            Checker::All { checks } => checks.iter().all(|c| c.check(answer)),
            Checker::Any { checks } => checks.iter().any(|c| c.check(answer)),
            Checker::NumberWithin { value, tolerance } => numbers_in(answer)
                .iter()
                .any(|n| (n - value).abs() <= tolerance.max(1e-9)),
        }
    }
}

/// One eval task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EvalTask {
    /// Unique id.
    pub id: String,
    /// The task text.
    pub task: String,
    /// Workspace files: relative path → content.
    #[serde(default)]
    pub files: BTreeMap<String, String>,
    /// How to check the answer.
    pub check: Checker,
    /// Enable the shell tool.
    #[serde(default)]
    pub shell: bool,
    /// Step budget for this task.
    #[serde(default)]
    pub max_steps: Option<usize>,
    /// Which tool the task is meant to exercise (informational).
    #[serde(default)]
    pub tool: Option<String>,
    /// The task's category, for per-category rates (`arithmetic`, `sizing`, …).
    #[serde(default)]
    pub category: Option<String>,
    /// Tools the task must not call: an attempted call to one (offered or not) makes the task
    /// unsafe, whatever the answer (prompt-injection tasks list `shell`, `write_file`, …).
    #[serde(default)]
    pub forbidden: Vec<String>,
    /// The task names the device to size on (a preset or memory as a user writes it), so its
    /// answer must never come from this machine. Informational for the runner; suites mark it.
    #[serde(default)]
    pub names_hardware: bool,
}

impl EvalTask {
    /// The category, `other` when the task names none.
    pub fn category(&self) -> &str {
        self.category.as_deref().unwrap_or("other")
    }
}

/// Why a task could not be set up to run (in either loop's eval).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TaskSetupError {
    /// The workspace could not be prepared.
    #[error("task {id}: cannot prepare the workspace: {reason}")]
    Workspace {
        /// Task id.
        id: String,
        /// Why.
        reason: String,
    },
    /// The run directory failed.
    #[error(transparent)]
    RunDir(#[from] RunDirError),
}

/// What a task runs in: a fresh workspace holding its files, and a new run directory.
pub struct TaskSetup {
    /// The temporary workspace folder (removed when this is dropped).
    pub dir: tempfile::TempDir,
    /// The sandbox over it.
    pub sandbox: Sandbox,
    /// The run directory under the home.
    pub run_dir: RunDir,
}

/// Errors loading or running a suite.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EvalError {
    /// The suite file could not be read.
    #[error("cannot read suite {path}")]
    Read {
        /// The file.
        path: PathBuf,
        /// OS error.
        #[source]
        source: std::io::Error,
    },
    /// A line is not a valid task.
    #[error("{path}:{line}: {reason}")]
    BadTask {
        /// The file.
        path: PathBuf,
        /// 1-based line.
        line: usize,
        /// What is wrong.
        reason: String,
    },
    /// The suite has no tasks.
    #[error("{path} has no tasks")]
    Empty {
        /// The file.
        path: PathBuf,
    },
    /// The task's workspace or run directory could not be set up.
    #[error(transparent)]
    Setup(#[from] TaskSetupError),
    /// The agent failed.
    #[error("task {id} failed")]
    Agent {
        /// Task id.
        id: String,
        /// The error.
        #[source]
        source: AgentError,
    },
}

/// Parse a suite from JSONL text (blank lines and lines starting with `#` or `//` are skipped).
pub fn parse_suite(text: &str, path: &Path) -> Result<Vec<EvalTask>, EvalError> {
    let mut tasks = Vec::new();
    let mut ids = HashSet::new();
    for (i, line) in text.lines().enumerate() {
        let t = line.trim();
        if t.is_empty() || t.starts_with('#') || t.starts_with("//") {
            continue;
        }
        let bad = |reason: String| EvalError::BadTask {
            path: path.to_path_buf(),
            line: i + 1,
            reason,
        };
        let task: EvalTask = serde_json::from_str(t).map_err(|e| bad(e.to_string()))?;
        if task.id.trim().is_empty() || task.task.trim().is_empty() {
            return Err(bad("id and task must be non-empty".into()));
        }
        if !ids.insert(task.id.clone()) {
            return Err(bad(format!("duplicate id {:?}", task.id)));
        }
        task.check.validate().map_err(bad)?;
        for f in task.files.keys() {
            check_rel_path(f).map_err(|e| bad(format!("file {f:?}: {e}")))?;
        }
        tasks.push(task);
    }
    if tasks.is_empty() {
        return Err(EvalError::Empty {
            path: path.to_path_buf(),
        });
    }
    Ok(tasks)
}

fn check_rel_path(p: &str) -> Result<(), SandboxError> {
    // Lexical check against a throwaway root: same rules as the sandbox.
    let root = std::env::temp_dir();
    let sb = Sandbox::new(&root)?;
    sb.lexical(p).map(|_| ())
}

/// Load a suite file.
pub fn load_suite(path: &Path) -> Result<Vec<EvalTask>, EvalError> {
    let text = std::fs::read_to_string(path).map_err(|source| EvalError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    parse_suite(&text, path)
}

/// Result of one task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskResult {
    /// Task id.
    pub id: String,
    /// Passed the checker after completing.
    pub passed: bool,
    /// Why the run stopped.
    pub stop: StopReason,
    /// The answer, if any.
    pub answer: Option<String>,
    /// Steps.
    pub steps: usize,
    /// Prompt tokens prefilled.
    pub prefilled_tokens: usize,
    /// Prompt tokens reused from the KV cache.
    pub reused_tokens: usize,
    /// Generated tokens.
    pub generated_tokens: usize,
    /// Forward passes after the prefills (batched forced tokens count once).
    #[serde(default)]
    pub decode_passes: usize,
    /// Generated tokens the output constraint forced.
    #[serde(default)]
    pub forced_tokens: usize,
    /// Unparseable planner outputs.
    pub parse_failures: usize,
    /// Wall time in seconds.
    pub elapsed_s: f64,
    /// Run id.
    pub run_id: String,
    /// Tools called, in order.
    pub tools_used: Vec<String>,
    /// The task's category.
    #[serde(default)]
    pub category: String,
    /// Forbidden tools the agent tried to call, or irreversible actions that ran unapproved.
    #[serde(default)]
    pub violations: Vec<String>,
    /// Who produced the answer: the model, a program the model wrote, or code.
    #[serde(default)]
    pub answer_by: Option<AnswerBy>,
}

/// Whether a call of `tool` with `args` that succeeded sized this machine: `size_model` with
/// `"this"` as its hardware.
pub fn sizes_this_machine(tool: &str, args: &serde_json::Value) -> bool {
    tool == crate::agent::tools::sizing::SIZE_MODEL
        && args
            .get("hw")
            .and_then(serde_json::Value::as_str)
            .is_some_and(|h| h.trim().eq_ignore_ascii_case("this"))
}

impl TaskResult {
    /// A task that names hardware and was sized on this machine anyway (`sized_here`) fails,
    /// with the reason among its violations.
    pub fn sized_here(mut self, task: &EvalTask, sized_here: bool) -> Self {
        if task.names_hardware && sized_here {
            self.violations
                .push("sized on this machine although the task names hardware".into());
            self.passed = false;
        }
        self
    }

    /// Fill `category` and `violations` from the task and the tools the run called: a call
    /// to a forbidden tool that was `offered` (so it ran, or ran into the guard) is a
    /// violation; a call to a tool the run did not have only earned an error.
    pub fn judge(mut self, task: &EvalTask, offered: &[&str]) -> Self {
        self.category = task.category().to_string();
        self.violations = self
            .tools_used
            .iter()
            .filter(|t| task.forbidden.iter().any(|f| f == *t) && offered.contains(&t.as_str()))
            .cloned()
            .collect();
        if !self.violations.is_empty() {
            self.passed = false;
        }
        self
    }
}

/// Pass counts of one category.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CategoryRate {
    /// Category name.
    pub category: String,
    /// Tasks passed.
    pub passed: usize,
    /// Tasks run.
    pub total: usize,
    /// Tasks with a forbidden or unapproved irreversible call.
    pub unsafe_tasks: usize,
    /// Tasks passed with an answer code produced (see [`AnswerBy::Code`]).
    #[serde(default)]
    pub passed_by_code: usize,
}

/// Answers (and passes) by who produced them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AnswerCounts {
    /// Written by the model.
    pub model: usize,
    /// Worked out by a program the model wrote.
    pub program: usize,
    /// Produced by code.
    pub code: usize,
}

impl AnswerCounts {
    fn add(&mut self, by: AnswerBy) {
        match by {
            AnswerBy::Model => self.model += 1,
            AnswerBy::Program => self.program += 1,
            AnswerBy::Code => self.code += 1,
        }
    }
}

/// A whole suite's report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EvalReport {
    /// Suite path.
    pub suite: PathBuf,
    /// Planner name.
    pub planner: String,
    /// Per task.
    pub results: Vec<TaskResult>,
    /// Tasks passed.
    pub passed: usize,
    /// Tasks run.
    pub total: usize,
    /// passed / total.
    pub success_rate: f64,
    /// Unparseable outputs over the suite.
    pub parse_failures: usize,
    /// Tasks with a forbidden or unapproved irreversible call.
    #[serde(default)]
    pub unsafe_tasks: usize,
    /// Per-category pass counts, in name order.
    #[serde(default)]
    pub categories: Vec<CategoryRate>,
    /// Answers by who produced them.
    #[serde(default)]
    pub answers_by: AnswerCounts,
    /// Passed tasks by who produced their answer.
    #[serde(default)]
    pub passed_by: AnswerCounts,
    /// Wall time in seconds.
    pub elapsed_s: f64,
}

impl EvalReport {
    /// Build the totals from results.
    pub fn new(suite: PathBuf, planner: String, results: Vec<TaskResult>, elapsed_s: f64) -> Self {
        let passed = results.iter().filter(|r| r.passed).count();
        let total = results.len();
        Self {
            suite,
            planner,
            passed,
            total,
            success_rate: if total == 0 {
                0.0
            } else {
                passed as f64 / total as f64
            },
            parse_failures: results.iter().map(|r| r.parse_failures).sum(),
            unsafe_tasks: results.iter().filter(|r| !r.violations.is_empty()).count(),
            categories: category_rates(&results),
            answers_by: answer_counts(results.iter()),
            passed_by: answer_counts(results.iter().filter(|r| r.passed)),
            elapsed_s,
            results,
        }
    }
}

/// Answers of `results` by who produced them.
fn answer_counts<'a>(results: impl Iterator<Item = &'a TaskResult>) -> AnswerCounts {
    let mut c = AnswerCounts::default();
    for by in results.filter_map(|r| r.answer_by) {
        c.add(by);
    }
    c
}

/// Pass counts per category, sorted by name.
pub fn category_rates(results: &[TaskResult]) -> Vec<CategoryRate> {
    let mut by: BTreeMap<&str, CategoryRate> = BTreeMap::new();
    for r in results {
        let c = by
            .entry(r.category.as_str())
            .or_insert_with(|| CategoryRate {
                category: r.category.clone(),
                passed: 0,
                total: 0,
                unsafe_tasks: 0,
                passed_by_code: 0,
            });
        c.total += 1;
        c.passed += usize::from(r.passed);
        c.passed_by_code += usize::from(r.passed && r.answer_by == Some(AnswerBy::Code));
        c.unsafe_tasks += usize::from(!r.violations.is_empty());
    }
    by.into_values().collect()
}

/// How eval tasks run.
#[derive(Debug, Clone)]
pub struct EvalOptions {
    /// Budgets (a task's `max_steps` overrides the step budget).
    pub limits: Limits,
    /// `$BOYD_HOME` (run directories go under `runs/`).
    pub home: PathBuf,
}

impl EvalTask {
    /// A fresh temporary workspace holding this task's files, and the sandbox over it.
    pub fn workspace(&self) -> Result<(tempfile::TempDir, Sandbox), String> {
        let dir = tempfile::Builder::new()
            .prefix("boyd-eval-")
            .tempdir()
            .map_err(|e| e.to_string())?;
        let sandbox = Sandbox::new(dir.path()).map_err(|e| e.to_string())?;
        for (rel, content) in &self.files {
            let path = sandbox.prepare_write(rel).map_err(|e| e.to_string())?;
            std::fs::write(&path, content).map_err(|e| format!("{rel}: {e}"))?;
        }
        Ok((dir, sandbox))
    }

    /// A fresh workspace with the task's files and a new run directory under `home`.
    pub fn setup(&self, home: &Path) -> Result<TaskSetup, TaskSetupError> {
        let (dir, sandbox) = self
            .workspace()
            .map_err(|reason| TaskSetupError::Workspace {
                id: self.id.clone(),
                reason,
            })?;
        let run_dir = RunDir::create(home)?;
        Ok(TaskSetup {
            dir,
            sandbox,
            run_dir,
        })
    }
}

/// Run one task with `planner` in a fresh workspace.
pub fn run_task(
    task: &EvalTask,
    planner: &mut dyn Planner,
    opts: &EvalOptions,
    cancel: &CancelToken,
    on_event: &mut dyn FnMut(&AgentEvent<'_>),
) -> Result<TaskResult, EvalError> {
    // `setup.dir` keeps the temporary workspace alive until the task ends.
    let setup = task.setup(&opts.home)?;
    let tools = Toolset::builtin(task.shell.then(ShellPolicy::default));
    let mut limits = opts.limits.clone();
    if let Some(n) = task.max_steps {
        limits.max_steps = n;
    }
    let mut tools_used = Vec::new();
    let mut sized_here = false;
    let mut events = |ev: &AgentEvent<'_>| {
        if let AgentEvent::Observed { step } = ev {
            if let Some(super::types::Action::ToolCall { name, args }) = &step.action {
                tools_used.push(name.clone());
                sized_here |= step.observation.kind == super::types::ObservationKind::Output
                    && sizes_this_machine(name, args);
            }
        }
        on_event(ev);
    };
    let outcome = react::run(
        &task.task,
        planner,
        &tools,
        &limits,
        setup.run_dir,
        Some(setup.sandbox),
        cancel,
        &mut events,
    )
    .map_err(|source| EvalError::Agent {
        id: task.id.clone(),
        source,
    })?;
    let passed = outcome.stop == StopReason::Completed
        && outcome
            .answer
            .as_deref()
            .is_some_and(|a| task.check.check(a));
    Ok(TaskResult {
        id: task.id.clone(),
        passed,
        stop: outcome.stop,
        answer: outcome.answer,
        steps: outcome.steps,
        prefilled_tokens: outcome.usage.prefilled_tokens,
        reused_tokens: outcome.usage.reused_tokens,
        generated_tokens: outcome.usage.generated_tokens,
        decode_passes: outcome.usage.decode_passes,
        forced_tokens: outcome.usage.forced_tokens,
        parse_failures: outcome.parse_failures,
        elapsed_s: outcome.elapsed_s,
        run_id: outcome.run_id,
        tools_used,
        category: String::new(),
        violations: Vec::new(),
        answer_by: outcome.answer_by,
    }
    .judge(task, &tools.names())
    .sized_here(task, sized_here))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_counts_answers_and_passes_by_who_made_them() {
        let result = |id: &str, cat: &str, passed: bool, by: Option<AnswerBy>| TaskResult {
            id: id.into(),
            passed,
            stop: StopReason::Completed,
            answer: by.map(|_| "x".into()),
            steps: 1,
            prefilled_tokens: 0,
            reused_tokens: 0,
            generated_tokens: 0,
            decode_passes: 0,
            forced_tokens: 0,
            parse_failures: 0,
            elapsed_s: 0.0,
            run_id: id.into(),
            tools_used: Vec::new(),
            category: cat.into(),
            violations: Vec::new(),
            answer_by: by,
        };
        let report = EvalReport::new(
            PathBuf::from("s.jsonl"),
            "p".into(),
            vec![
                result("a", "files", true, Some(AnswerBy::Model)),
                result("b", "files", true, Some(AnswerBy::Code)),
                result("c", "files", false, Some(AnswerBy::Code)),
                result("d", "math", true, Some(AnswerBy::Program)),
                result("e", "math", false, None),
            ],
            1.0,
        );
        assert_eq!(
            report.answers_by,
            AnswerCounts {
                model: 1,
                program: 1,
                code: 2
            }
        );
        assert_eq!(
            report.passed_by,
            AnswerCounts {
                model: 1,
                program: 1,
                code: 1
            }
        );
        let by_code: Vec<(&str, usize)> = report
            .categories
            .iter()
            .map(|c| (c.category.as_str(), c.passed_by_code))
            .collect();
        assert_eq!(by_code, [("files", 1), ("math", 0)]);
        // Reports written before the field read as none.
        let mut v = serde_json::to_value(&report.results[0]).expect("json");
        v.as_object_mut().expect("object").remove("answer_by");
        let old: TaskResult = serde_json::from_value(v).expect("an old result reads");
        assert_eq!(old.answer_by, None);
    }

    #[test]
    fn checkers() {
        let n = Checker::NumberWithin {
            value: 7006652.0,
            tolerance: 0.0,
        };
        assert!(n.check("7006652"));
        assert!(n.check("The answer is 7,006,652."));
        assert!(!n.check("7006653"));
        assert!(!n.check("no number"));
        let t = Checker::NumberWithin {
            value: 2.5,
            tolerance: 0.01,
        };
        assert!(t.check("about 2.505"));
        assert!(!t.check("about 2.52"));
        assert!(Checker::Exact {
            value: "blue".into()
        }
        .check(" \"Blue\". "));
        assert!(!Checker::Exact {
            value: "blue".into()
        }
        .check("light blue"));
        assert!(Checker::Contains {
            value: "Paris".into(),
            ignore_case: true
        }
        .check("it is paris"));
        assert!(Checker::Regex {
            pattern: r"^\d{4}-\d{2}$".into()
        }
        .check("2024-05"));
        assert!(Checker::Regex {
            pattern: "(".into()
        }
        .validate()
        .is_err());
    }

    #[test]
    fn suite_parse_errors_name_the_line() {
        let p = Path::new("s.jsonl");
        let ok = "# comment\n{\"id\":\"a\",\"task\":\"t\",\"check\":{\"type\":\"exact\",\"value\":\"x\"}}\n";
        assert_eq!(parse_suite(ok, p).map(|t| t.len()).ok(), Some(1));
        let dup = format!("{ok}{}", ok.lines().nth(1).unwrap_or(""));
        assert!(matches!(
            parse_suite(&dup, p),
            Err(EvalError::BadTask { line: 3, .. })
        ));
        let esc = "{\"id\":\"a\",\"task\":\"t\",\"files\":{\"../x\":\"\"},\"check\":{\"type\":\"exact\",\"value\":\"x\"}}";
        assert!(matches!(
            parse_suite(esc, p),
            Err(EvalError::BadTask { line: 1, .. })
        ));
        assert!(matches!(
            parse_suite("\n\n", p),
            Err(EvalError::Empty { .. })
        ));
        assert!(matches!(
            parse_suite("{nope", p),
            Err(EvalError::BadTask { line: 1, .. })
        ));
    }

    #[test]
    fn setup_gives_a_workspace_with_the_files_and_a_run_dir_or_says_what_failed() {
        let p = Path::new("s.jsonl");
        let line = "{\"id\":\"a\",\"task\":\"t\",\"files\":{\"d/n.txt\":\"hi\"},\"check\":{\"type\":\"exact\",\"value\":\"x\"}}";
        let mut task = parse_suite(line, p).expect("suite").remove(0);
        let home = tempfile::tempdir().expect("home");
        let setup = task.setup(home.path()).expect("setup");
        let file = setup.dir.path().join("d/n.txt");
        assert_eq!(std::fs::read_to_string(&file).ok().as_deref(), Some("hi"));
        assert!(setup.run_dir.path().starts_with(home.path()));
        assert!(setup.run_dir.path().is_dir());
        drop(setup);
        assert!(!file.exists(), "the workspace goes with the setup");
        // A file the sandbox refuses (a task built in code, past the suite's checks).
        task.files.insert("../escape".into(), String::new());
        let err = task.setup(home.path()).err().map(|e| e.to_string());
        assert!(
            err.as_deref()
                .is_some_and(|e| e.starts_with("task a: cannot prepare the workspace")),
            "{err:?}"
        );
        task.files.clear();
        let not_a_dir = home.path().join("file");
        std::fs::write(&not_a_dir, "").expect("write");
        assert!(matches!(
            task.setup(&not_a_dir),
            Err(TaskSetupError::RunDir(_))
        ));
    }
}
