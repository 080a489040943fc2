//! The remote backend against a server this project did not write: llama.cpp's own
//! llama-server (the `xllamacpp` wheel, started by `scripts/llama_server.py`) with the agent's
//! default model, running boyd's ReAct loop on a calculator task.
//!
//! Needs `BOYD_TEST_PYTHON` (a python with `xllamacpp`; `.ci/run` makes one) and the
//! Qwen2.5-Coder-0.5B model in the store; skips with a note otherwise.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use boyd::agent::eval::numbers_in;
use boyd::agent::planner::{LmPlanner, LmPlannerConfig};
use boyd::agent::react::{self, AgentEvent, Limits};
use boyd::agent::rundir::RunDir;
use boyd::agent::tools::Toolset;
use boyd::agent::types::{Action, StopReason};
use boyd::lm::{CancelToken, LanguageModel};
use boyd::remote::{OpenAiModel, RemoteConfig};

use super::common;
use super::serve::test_python;

/// A llama-server child process, killed on drop.
struct LlamaServer {
    child: Child,
    url: String,
}

impl LlamaServer {
    fn start(python: &Path, model: &Path) -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("free port")
            .port();
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/llama_server.py");
        let mut child = Command::new(python)
            .arg(&script)
            .arg(model)
            .args([
                "--port",
                &port.to_string(),
                "--ctx",
                "4096",
                "--threads",
                "2",
            ])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start scripts/llama_server.py");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        let line = match rx.recv_timeout(Duration::from_secs(600)) {
            Ok(l) => l,
            Err(_) => {
                let _ = child.kill();
                panic!("llama-server did not start within 600 s");
            }
        };
        let Some(url) = line.trim().strip_prefix("listening ") else {
            let _ = child.kill();
            panic!("llama-server launcher said {line:?}; is xllamacpp installed?");
        };
        Self {
            url: url.to_string(),
            child,
        }
    }
}

impl Drop for LlamaServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn react_calculator_task_through_llama_server() {
    let Some(python) = test_python() else { return };
    let Some(model) = common::qwen_coder() else {
        return;
    };
    let t0 = Instant::now();
    let server = LlamaServer::start(&python, &model);
    eprintln!(
        "llama-server up at {} in {:.1} s",
        server.url,
        t0.elapsed().as_secs_f64()
    );
    let mut remote = OpenAiModel::connect(RemoteConfig::new(server.url.clone()))
        .expect("connect to llama-server");
    assert_eq!(remote.context_length(), 4096, "llama-server's meta.n_ctx");
    let tools = Toolset::builtin(None);
    let home = tempfile::tempdir().expect("tmp");
    let limits = Limits {
        max_steps: 6,
        ..Limits::default()
    };
    let mut planner = LmPlanner::new(&mut remote, LmPlannerConfig::default());
    let mut calculator_calls = 0;
    let outcome = react::run(
        "Use the calculator for 1234 * 5678.",
        &mut planner,
        &tools,
        &limits,
        RunDir::create(home.path()).expect("run dir"),
        None,
        &CancelToken::new(),
        &mut |ev| {
            if let AgentEvent::Decided {
                index,
                thought,
                action,
            } = ev
            {
                eprintln!("[{index}] {thought} -> {action:?}");
                if matches!(action, Ok(Action::ToolCall { name, .. }) if name == "calculator") {
                    calculator_calls += 1;
                }
            }
            if let AgentEvent::Observed { step } = ev {
                eprintln!("    observation: {}", step.observation.text);
            }
        },
    )
    .expect("react run");
    eprintln!(
        "{} in {} steps, {:.1} s; prompt {} tokens ({} reused by llama-server), {} generated; answer {:?}",
        outcome.stop,
        outcome.steps,
        outcome.elapsed_s,
        outcome.usage.prompt_tokens,
        outcome.usage.reused_tokens,
        outcome.usage.generated_tokens,
        outcome.answer
    );
    assert_eq!(outcome.stop, StopReason::Completed, "{:?}", outcome.detail);
    assert!(
        calculator_calls >= 1,
        "the answer must come from the calculator"
    );
    let answer = outcome.answer.expect("answer");
    assert!(
        numbers_in(&answer).contains(&7006652.0),
        "answer {answer:?} lacks 7006652"
    );
    assert_eq!(
        outcome.parse_failures, 0,
        "structured output kept every step parseable"
    );
    assert!(
        outcome.usage.reused_tokens > 0,
        "llama-server's prompt cache reused the transcript prefix"
    );
}
