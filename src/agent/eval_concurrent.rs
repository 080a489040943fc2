//! Running an eval suite with several tasks in flight, for models behind a server that batches
//! requests (vLLM, llama-server with several slots).
//!
//! Design decision: one OS thread per worker, each with its own model handle (a cheap clone of
//! an HTTP client) and its own planner, pulling the next task index from a shared counter.
//! Results come back in suite order whatever order tasks finish in; `on_done` sees each one as
//! it finishes (for a progress bar). The in-process model is not `Clone` and serves one request
//! at a time, so it never comes here.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use super::eval::{run_task, EvalError, EvalOptions, EvalTask, TaskResult};
use super::planner::{LmPlanner, LmPlannerConfig};
use crate::lm::{CancelToken, LanguageModel};

/// Run `tasks` with at most `concurrency` at once; `make_model(worker)` gives each worker its
/// model. Returns one result per task, in suite order (`None` for tasks not started because
/// `cancel` fired).
pub fn run_concurrent<M, F>(
    tasks: &[EvalTask],
    concurrency: usize,
    make_model: F,
    config: &LmPlannerConfig,
    opts: &EvalOptions,
    cancel: &CancelToken,
    on_done: &(dyn Fn(&EvalTask, &Result<TaskResult, EvalError>) + Sync),
) -> Vec<Option<Result<TaskResult, EvalError>>>
where
    M: LanguageModel,
    F: Fn(usize) -> M + Sync,
{
    let workers = concurrency.clamp(1, tasks.len().max(1));
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<Result<TaskResult, EvalError>>>> =
        Mutex::new((0..tasks.len()).map(|_| None).collect());
    std::thread::scope(|s| {
        for w in 0..workers {
            let (next, results, make_model) = (&next, &results, &make_model);
            s.spawn(move || {
                let mut model = make_model(w);
                loop {
                    if cancel.is_cancelled() {
                        break;
                    }
                    let i = next.fetch_add(1, Ordering::SeqCst);
                    let Some(task) = tasks.get(i) else { break };
                    let mut planner = LmPlanner::new(&mut model, config.clone());
                    let r = run_task(task, &mut planner, opts, cancel, &mut |_| {});
                    on_done(task, &r);
                    let mut g = match results.lock() {
                        Ok(g) => g,
                        Err(p) => p.into_inner(),
                    };
                    g[i] = Some(r);
                }
            });
        }
    });
    match results.into_inner() {
        Ok(v) => v,
        Err(p) => p.into_inner(),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;
    use crate::agent::eval::{parse_suite, EvalOptions};
    use crate::agent::react::Limits;
    use crate::lm::{FinishReason, GenOutput, GenRequest, LmError, Usage};

    /// Answers every request with a final answer after a delay, counting requests in flight.
    struct SlowModel {
        in_flight: Arc<AtomicUsize>,
        peak: Arc<AtomicUsize>,
    }

    impl LanguageModel for SlowModel {
        fn generate(
            &mut self,
            req: &GenRequest,
            on_text: &mut dyn FnMut(&str),
            _cancel: &CancelToken,
        ) -> Result<GenOutput, LmError> {
            let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
            self.peak.fetch_max(now, Ordering::SeqCst);
            std::thread::sleep(Duration::from_millis(150));
            self.in_flight.fetch_sub(1, Ordering::SeqCst);
            // Answer with the number in the task ("Task: say 3" -> "3").
            let task = &req.messages[1].content;
            let n = task.rsplit(' ').next().unwrap_or("0");
            let text =
                format!("{{\"thought\": \"t\", \"tool\": \"final_answer\", \"args\": {{\"answer\": \"{n}\"}}}}");
            on_text(&text);
            Ok(GenOutput {
                text,
                finish: FinishReason::Stop,
                usage: Usage::default(),
            })
        }
        fn context_length(&self) -> usize {
            4096
        }
        fn name(&self) -> String {
            "slow".into()
        }
    }

    #[test]
    fn tasks_overlap_and_results_keep_suite_order() {
        let suite: String = (0..6)
            .map(|i| format!("{{\"id\": \"t{i}\", \"task\": \"say {i}\", \"check\": {{\"type\": \"exact\", \"value\": \"{i}\"}}}}\n"))
            .collect();
        let tasks = parse_suite(&suite, std::path::Path::new("mem.jsonl")).expect("suite");
        let home = tempfile::tempdir().expect("tmp");
        let opts = EvalOptions {
            limits: Limits::default(),
            home: home.path().to_path_buf(),
        };
        let in_flight = Arc::new(AtomicUsize::new(0));
        let peak = Arc::new(AtomicUsize::new(0));
        let done = AtomicUsize::new(0);
        let results = run_concurrent(
            &tasks,
            3,
            |_| SlowModel {
                in_flight: in_flight.clone(),
                peak: peak.clone(),
            },
            &LmPlannerConfig::default(),
            &opts,
            &CancelToken::new(),
            &|_, _| {
                done.fetch_add(1, Ordering::SeqCst);
            },
        );
        assert_eq!(done.load(Ordering::SeqCst), 6);
        let ids: Vec<String> = results
            .iter()
            .map(|r| match r {
                Some(Ok(t)) => {
                    assert!(t.passed, "{t:?}");
                    t.id.clone()
                }
                other => panic!("task did not run: {other:?}"),
            })
            .collect();
        assert_eq!(ids, ["t0", "t1", "t2", "t3", "t4", "t5"]);
        let p = peak.load(Ordering::SeqCst);
        assert!(
            (2..=3).contains(&p),
            "peak in-flight requests {p}, expected 2..=3"
        );
    }
}
