//! The OODA rules through the CLI path: the `boyd` binary (`run --loop ooda --backend openai`)
//! against a scripted OpenAI-compatible server in this process, so argument parsing, the
//! `OodaBuilder`, the model-backed phases and the printed trace are the ones a user gets.
//!
//! The server answers `GET /v1/models` and, for each `POST /v1/chat/completions`, the next
//! scripted Decide reply (Orient runs on the rules: `--orient rules`, no model call). A hook
//! runs before each reply so a test can change the world between two cycles.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};

/// What the server saw and what it still has to say.
struct Script {
    replies: Vec<String>,
    /// Bodies of the completion requests, in order.
    requests: Vec<Value>,
    /// Called with the request number (0-based) before the reply is sent.
    hook: Option<Box<dyn FnMut(usize) + Send>>,
    /// Bodies of the answer-step requests (`agent::answer`), kept apart from the phases'.
    answer_requests: Vec<Value>,
    /// The answer of the last `final_answer` candidate served: what the answer step replies.
    last_answer: Option<String>,
    /// Replies to the focused requests (`agent::query`), in order; once used up, `{}`.
    focused: std::collections::VecDeque<String>,
}

/// A chat completion whose message is `content`.
fn completion(content: &str) -> Value {
    json!({
        "id": "x",
        "object": "chat.completion",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
    })
}

/// Whether `body` is the calculation request (`agent::query::calculation`) or the listing
/// request (`agent::query::listing`): the script answers it with nothing to write, so the
/// decider's own call runs.
fn is_focused_request(body: &Value) -> bool {
    use boyd::agent::query::calculation::{SYSTEM_HEAD, SYSTEM_HEAD_OPTIONAL};
    body["messages"][0]["content"].as_str().is_some_and(|c| {
        c.starts_with(SYSTEM_HEAD)
            || c.starts_with(SYSTEM_HEAD_OPTIONAL)
            || c == boyd::agent::query::listing::SYSTEM
    })
}

/// Whether a completion request is the answer step's (its system prompt).
fn is_answer_step(body: &Value) -> bool {
    body["messages"][0]["content"]
        .as_str()
        .is_some_and(|c| c == boyd::agent::answer::ANSWER_SYSTEM)
}

/// The answer of a reply's first `final_answer` candidate.
fn final_answer_of(reply: &str) -> Option<String> {
    let v: Value = serde_json::from_str(reply).ok()?;
    v["candidates"]
        .as_array()?
        .iter()
        .find(|c| c["tool"] == "final_answer")
        .and_then(|c| c["args"]["answer"].as_str().map(str::to_string))
}

/// A scripted OpenAI-compatible server on a free local port.
struct ScriptedServer {
    url: String,
    script: Arc<Mutex<Script>>,
}

fn read_request(stream: &mut TcpStream) -> Option<(String, String)> {
    let mut reader = BufReader::new(stream.try_clone().ok()?);
    let mut line = String::new();
    reader.read_line(&mut line).ok()?;
    let request_line = line.trim().to_string();
    let mut len = 0usize;
    loop {
        let mut h = String::new();
        reader.read_line(&mut h).ok()?;
        let h = h.trim();
        if h.is_empty() {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            if k.eq_ignore_ascii_case("content-length") {
                len = v.trim().parse().unwrap_or(0);
            }
        }
    }
    let mut body = vec![0u8; len];
    reader.read_exact(&mut body).ok()?;
    Some((request_line, String::from_utf8_lossy(&body).into_owned()))
}

fn respond(stream: &mut TcpStream, body: &str) {
    let _ = write!(
        stream,
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = stream.flush();
}

impl ScriptedServer {
    fn start(replies: Vec<Value>, hook: Option<Box<dyn FnMut(usize) + Send>>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let url = format!("http://{}", listener.local_addr().expect("addr"));
        let script = Arc::new(Mutex::new(Script {
            replies: replies.iter().map(Value::to_string).collect(),
            requests: Vec::new(),
            hook,
            answer_requests: Vec::new(),
            last_answer: None,
            focused: Default::default(),
        }));
        let s = script.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                let Some((line, body)) = read_request(&mut stream) else {
                    continue;
                };
                if line.starts_with("GET") {
                    respond(
                        &mut stream,
                        &json!({"object": "list", "data": [{"id": "scripted", "context_length": 8192}]})
                            .to_string(),
                    );
                    continue;
                }
                let content = {
                    let mut g = s.lock().expect("script");
                    let body: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
                    if is_focused_request(&body) {
                        let reply = g.focused.pop_front().unwrap_or_else(|| "{}".into());
                        drop(g);
                        respond(&mut stream, &completion(&reply).to_string());
                        continue;
                    }
                    if is_answer_step(&body) {
                        // The answer step copies the answer the Decide step proposed.
                        g.answer_requests.push(body);
                        // Nothing proposed to copy: an empty reply, which writes no answer.
                        let a = g.last_answer.clone().unwrap_or_default();
                        drop(g);
                        respond(&mut stream, &completion(&a).to_string());
                        continue;
                    }
                    let n = g.requests.len();
                    g.requests.push(body);
                    if let Some(h) = g.hook.as_mut() {
                        h(n);
                    }
                    let reply = if g.replies.is_empty() {
                        // Out of script: an answer that ends the run.
                        json!({"candidates": [{"thought": "out of script", "tool": "final_answer", "args": {"answer": "out of script"}}]}).to_string()
                    } else {
                        g.replies.remove(0)
                    };
                    if let Some(a) = final_answer_of(&reply) {
                        g.last_answer = Some(a);
                    }
                    reply
                };
                respond(&mut stream, &completion(&content).to_string());
            }
        });
        Self { url, script }
    }

    /// The completion requests received so far (the answer step's left out).
    fn requests(&self) -> Vec<Value> {
        self.script.lock().expect("script").requests.clone()
    }

    /// The answer-step requests received so far.
    fn answer_requests(&self) -> Vec<Value> {
        self.script.lock().expect("script").answer_requests.clone()
    }

    /// Reply to the focused requests with `replies`, in order.
    fn with_focused(self, replies: &[Value]) -> Self {
        self.script
            .lock()
            .expect("script")
            .focused
            .extend(replies.iter().map(Value::to_string));
        self
    }
}

/// A home, a config directory (with the approval key) and a workspace.
pub struct CliLab {
    _tmp: tempfile::TempDir,
    pub home: PathBuf,
    pub cfg: PathBuf,
    pub ws: PathBuf,
}

impl CliLab {
    pub fn new(files: &[(&str, &str)]) -> Self {
        let tmp = tempfile::tempdir().expect("tempdir");
        let home = tmp.path().join("home");
        let cfg = tmp.path().join("cfg");
        let ws = tmp.path().join("ws");
        for d in [&home, &cfg, &ws] {
            std::fs::create_dir_all(d).expect("mkdir");
        }
        for (p, c) in files {
            std::fs::write(ws.join(p), c).expect("write");
        }
        let ws = ws.canonicalize().expect("canon");
        Self {
            _tmp: tmp,
            home,
            cfg,
            ws,
        }
    }

    pub fn boyd(&self) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_boyd"));
        c.env("BOYD_HOME", &self.home)
            .env("BOYD_CONFIG_DIR", &self.cfg)
            .env("HF_HUB_OFFLINE", "1")
            .env("BOYD_PYTHON", "/nonexistent/python3")
            .env_remove("BOYD_MODEL")
            .env_remove("BOYD_BASE_URL")
            .env_remove("OPENAI_API_KEY");
        c
    }

    /// `boyd run --loop ooda` on `task` in the workspace against `server`, with `extra` flags.
    fn run_ooda(&self, server: &ScriptedServer, task: &str, extra: &[&str]) -> Output {
        let mut flags = vec!["--no-memory"];
        flags.extend_from_slice(extra);
        self.run_ooda_remembering(server, task, &flags)
    }

    /// The run directory a printed (not `--json`) run names on its `run:` line.
    fn run_dir_in(&self, printed: &str) -> PathBuf {
        let run_id = printed
            .lines()
            .find_map(|l| l.strip_prefix("run:  "))
            .expect("run id")
            .trim();
        self.home.join("runs").join(run_id)
    }

    /// The same with the workspace's memory of earlier runs (unless `extra` turns it off).
    fn run_ooda_remembering(&self, server: &ScriptedServer, task: &str, extra: &[&str]) -> Output {
        self.boyd()
            .args([
                "--model",
                "scripted",
                "run",
                "--loop",
                "ooda",
                "--backend",
                "openai",
            ])
            .args(["--base-url", &server.url, "--orient", "rules"])
            .args(["--retries", "0", "--workspace"])
            .arg(&self.ws)
            .args(extra)
            .arg(task)
            .output()
            .expect("boyd run")
    }
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// One scripted Decide reply proposing these `(tool, args)` candidates.
fn proposal(candidates: &[(&str, Value)]) -> Value {
    let c: Vec<Value> = candidates
        .iter()
        .map(|(tool, args)| json!({"thought": format!("use {tool}"), "tool": tool, "args": args}))
        .collect();
    json!({ "candidates": c })
}

/// The run directory a `--json` outcome names.
fn run_dir_of(o: &Output) -> (Value, PathBuf) {
    let v: Value = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("not one JSON document ({e}): {}", text(o)));
    let dir = PathBuf::from(v["run_dir"].as_str().expect("run_dir"));
    (v, dir)
}

fn phase_log(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("ooda.jsonl")).expect("ooda.jsonl")
}

#[test]
fn the_cli_runs_a_scripted_model_through_the_builder() {
    let lab = CliLab::new(&[]);
    let server = ScriptedServer::start(
        vec![
            proposal(&[("calculator", json!({"expression": "6 * 7"}))]),
            proposal(&[("final_answer", json!({"answer": "42"}))]),
        ],
        None,
    );
    let out = lab.run_ooda(&server, "Use the calculator for 6 * 7.", &["--json"]);
    assert!(out.status.success(), "{}", text(&out));
    let (v, dir) = run_dir_of(&out);
    assert_eq!(v["state"], "completed", "{v}");
    assert_eq!(v["answer"], "42");
    assert_eq!(server.requests().len(), 2, "one Decide call per cycle");
    // The answer step ran over the calculator's output (once narrowing leaves only the final
    // answer it is asked before a Decide call; the scripted server wrote nothing there, so the
    // decider was asked and the answer step ran again on its final answer).
    let answer_requests = server.answer_requests();
    assert_eq!(answer_requests.len(), 2);
    assert!(answer_requests[1]["messages"][1]["content"]
        .as_str()
        .is_some_and(|c| c.contains("calculator") && c.contains("42")));
    assert!(phase_log(&dir).contains("\"phase\":\"act\""));
    // The budget is debited by the risk the calculator took: cost 1 × (1 + uncertainty 0.1),
    // not by its cost plus running time.
    let left = v["budget_left"].as_f64().expect("budget_left");
    assert!((left - (20.0 - 1.1)).abs() < 1e-9, "{left}");
}

/// The decider's first `list_dir` and first `calculator` calls get their arguments from the
/// focused requests (`agent::query`): what each wrote is what ran, and the answer step is
/// asked over its output.
#[test]
fn the_focused_requests_write_the_deciders_listing_and_calculation() {
    let lab = CliLab::new(&[]);
    std::fs::create_dir_all(lab.ws.join("docs/guide")).expect("mkdir");
    for f in ["docs/index.md", "docs/guide/intro.md", "docs/logo.png"] {
        std::fs::write(lab.ws.join(f), "x").expect("write");
    }
    let cases = [
        (
            proposal(&[("list_dir", json!({"path": "docs"}))]),
            json!({"path": "docs/", "depth": "all", "show": "files", "ext": ".md"}),
            "How many .md files are in docs and below?",
            "total: 2 .md files in docs and its subfolders",
            "[the listing:",
        ),
        (
            proposal(&[("calculator", json!({"expression": "2 + 2"}))]),
            json!({"kind": "arithmetic", "expression": "2 * 3"}),
            "What is two times three?",
            "2 * 3",
            "[the calculation:",
        ),
    ];
    for (decided, written, task, shown, tag) in cases {
        let server = ScriptedServer::start(
            vec![
                decided,
                proposal(&[("final_answer", json!({"answer": "6"}))]),
            ],
            None,
        )
        .with_focused(&[written]);
        let out = lab.run_ooda(&server, task, &["--json"]);
        assert!(out.status.success(), "{}", text(&out));
        let (v, dir) = run_dir_of(&out);
        assert_eq!(v["state"], "completed", "{v}");
        assert!(phase_log(&dir).contains(tag), "{}", phase_log(&dir));
        // The answer step was first asked over the output of the call the request wrote.
        let answers = server.answer_requests();
        let first = answers.first().expect("an answer request")["messages"][1]["content"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        assert!(first.contains(shown), "{first}");
        assert!(!first.contains("2 + 2"), "{first}");
    }
}

/// Rule: every candidate's risk is compared with the budget left; one over it is refused with
/// the reason in the trace, and the run stops before it runs.
#[test]
fn a_candidate_whose_risk_is_over_the_budget_is_refused_with_the_reason_in_the_trace() {
    let lab = CliLab::new(&[]);
    // Budget 1.05: the calculator's declared cost (1) fits, its risk (1 × 1.1) does not.
    let server = ScriptedServer::start(
        vec![proposal(&[("calculator", json!({"expression": "6 * 7"}))])],
        None,
    );
    let out = lab.run_ooda(
        &server,
        "Use the calculator for 6 * 7.",
        &["--risk-budget", "1.05"],
    );
    let t = text(&out);
    assert_eq!(out.status.code(), Some(2), "{t}");
    assert!(t.contains("state: budget_exhausted"), "{t}");
    assert!(
        t.contains("dropped: over budget: risk 1.10 (cost 1.0) is more than the 1.05"),
        "the refusal and its numbers are in the trace: {t}"
    );
    let dir = lab.run_dir_in(&t);
    let events = boyd::agent::audit::read_events(&dir).expect("audit");
    assert!(events.iter().any(|r| matches!(&r.event,
        boyd::agent::audit::AuditEvent::Refused { tool, reason, .. }
            if tool == "calculator" && reason.contains("over budget"))));
    assert!(
        !events
            .iter()
            .any(|r| matches!(&r.event, boyd::agent::audit::AuditEvent::Intent { .. })),
        "nothing ran"
    );
    assert!(phase_log(&dir).contains("\"kind\":\"over_budget\""));
}

/// Rule: sensor readings feed contradiction detection. A file the run read changes before the
/// file sensor reads it again: its content hash contradicts the one taken at the read (a
/// high-confidence fact), and the run pauses for review before the next decision.
#[test]
fn a_file_changed_between_two_reads_pauses_the_run() {
    let lab = CliLab::new(&[("notes.txt", "status: open\n")]);
    let notes = lab.ws.join("notes.txt");
    let server = ScriptedServer::start(
        vec![
            proposal(&[("read_file", json!({"path": "notes.txt"}))]),
            proposal(&[("calculator", json!({"expression": "1 + 1"}))]),
            proposal(&[("final_answer", json!({"answer": "open"}))]),
        ],
        Some(Box::new(move |n| {
            // While the model "thinks" in cycle 2, someone edits the file.
            if n == 1 {
                std::fs::write(&notes, "status: closed\n").expect("edit");
            }
        })),
    );
    let out = lab.run_ooda(&server, "What is the status in notes.txt?", &[]);
    let t = text(&out);
    assert_eq!(out.status.code(), Some(2), "{t}");
    assert!(t.contains("state: paused_for_review"), "{t}");
    assert!(
        t.contains("high sensor contradiction on sha256 of notes.txt"),
        "{t}"
    );
    assert!(
        t.contains("detail: contradiction against a high-confidence fact: sha256 of notes.txt"),
        "{t}"
    );
    assert_eq!(
        server.requests().len(),
        2,
        "paused before the third decision"
    );
}

/// A file read and read again unchanged confirms its hash: no contradiction.
#[test]
fn a_file_the_run_reads_and_that_stays_the_same_does_not_pause() {
    let lab = CliLab::new(&[("notes.txt", "status: open\n")]);
    let server = ScriptedServer::start(
        vec![
            proposal(&[("read_file", json!({"path": "notes.txt"}))]),
            proposal(&[("calculator", json!({"expression": "1 + 1"}))]),
            proposal(&[("final_answer", json!({"answer": "open"}))]),
        ],
        None,
    );
    let out = lab.run_ooda(&server, "What is the status in notes.txt?", &["--json"]);
    assert!(out.status.success(), "{}", text(&out));
    let (v, _) = run_dir_of(&out);
    assert_eq!(v["state"], "completed", "{v}");
    assert_eq!(v["counters"]["contradictions"], 0, "{v}");
}

/// Rule: Act logs the intent with a world-model snapshot before executing. The intent record
/// names the snapshot by its SHA-256 (the file `worlds/<sha>.json` hashes to its name and holds
/// the world the action was decided in), the chosen candidate, the alternatives with why each
/// lost, and the reasoning; `boyd runs show` prints it under the action.
#[test]
fn an_intent_record_names_its_snapshot_and_runs_show_prints_why_the_action_ran() {
    use boyd::agent::audit::{read_events, AuditEvent};
    let lab = CliLab::new(&[]);
    let task = "Use the calculator for 6 * 7.";
    let server = ScriptedServer::start(
        vec![
            json!({"candidates": [
                {"thought": "multiply six by seven", "tool": "calculator", "args": {"expression": "6 * 7"}},
                {"thought": "a tool that is not there", "tool": "no_such_tool", "args": {}},
                {"thought": "guess", "tool": "final_answer", "args": {"answer": "42"}}
            ]}),
            proposal(&[("final_answer", json!({"answer": "42"}))]),
        ],
        None,
    );
    let out = lab.run_ooda(&server, task, &["--json"]);
    assert!(out.status.success(), "{}", text(&out));
    let (v, dir) = run_dir_of(&out);
    assert_eq!(v["answer"], "42", "{v}");
    let events = read_events(&dir).expect("audit");
    let why = events
        .iter()
        .find_map(|r| match &r.event {
            AuditEvent::Intent { tool, why, .. } if tool == "calculator" => why.clone(),
            _ => None,
        })
        .expect("the calculator's intent carries why it ran");
    // The snapshot it names exists, hashes to its name, and is the world of cycle 1.
    let snap = dir
        .join("worlds")
        .join(format!("{}.json", why.world_sha256));
    let bytes = std::fs::read(&snap).expect("the named snapshot exists");
    assert_eq!(boyd::agent::condense::sha256_hex(&bytes), why.world_sha256);
    let world: boyd::agent::ooda::world::WorldModel =
        serde_json::from_slice(&bytes).expect("a world model");
    assert_eq!(world.objective, task);
    assert_eq!(world.loop_count, 1);
    assert!(world.completed.is_empty(), "taken before the action ran");
    assert_eq!(why.chosen.thought, "multiply six by seven");
    let not: Vec<(&str, &str)> = why
        .alternatives
        .iter()
        .map(|a| (a.tool.as_str(), a.why_not.as_str()))
        .collect();
    assert!(
        not.contains(&("no_such_tool", "dropped: no such tool")),
        "{not:?}"
    );
    assert!(
        not.iter()
            .any(|(t, w)| *t == "final_answer" && w.starts_with("viable, lower expected value")),
        "{not:?}"
    );
    assert!(
        why.reasoning.contains("2 of 3 candidates viable"),
        "{}",
        why.reasoning
    );
    // The answer's intent names the later world (after the calculator ran).
    let answer_why = events
        .iter()
        .find_map(|r| match &r.event {
            AuditEvent::Intent { tool, why, .. } if tool == "final_answer" => why.clone(),
            _ => None,
        })
        .expect("the answer's intent carries why");
    assert_ne!(answer_why.world_sha256, why.world_sha256);

    let run_id = v["run_id"].as_str().expect("run_id");
    let show = lab
        .boyd()
        .args(["runs", "show", run_id])
        .output()
        .expect("boyd runs show");
    let t = text(&show);
    assert!(show.status.success(), "{t}");
    assert!(
        t.contains("Why each action ran:\n  [1] calculator: \"multiply six by seven\"; 2 of 3 candidates viable"),
        "{t}"
    );
    assert!(
        t.contains(&format!("world model: worlds/{}.json", why.world_sha256)),
        "{t}"
    );
    assert!(
        t.contains("not chosen: no_such_tool {} (dropped: no such tool)"),
        "{t}"
    );
    assert!(
        t.contains("not chosen: final_answer {\"answer\":\"42\"} (viable, lower expected value"),
        "{t}"
    );
}

/// Rule: max 20 loops. Without `--max-loops`, a run that never answers stops after its 20th
/// cycle in `max_loops_exceeded`, having asked for 20 decisions (and the answer step once, which
/// here writes nothing).
#[test]
fn an_ooda_run_stops_after_20_cycles_by_default() {
    let lab = CliLab::new(&[]);
    let replies: Vec<Value> = (1..=25)
        .map(|i| proposal(&[("calculator", json!({ "expression": format!("{i} + {i}") }))]))
        .collect();
    let server = ScriptedServer::start(replies, None);
    let out = lab.run_ooda(
        &server,
        "Keep adding numbers",
        &["--json", "--risk-budget", "100"],
    );
    let (v, _) = run_dir_of(&out);
    assert_eq!(v["state"], "max_loops_exceeded", "{v}");
    assert_eq!(v["detail"], "20 cycles, the limit", "{v}");
    assert_eq!(server.requests().len(), 20);
    assert_eq!(v["counters"]["actions"], 20, "{v}");
    // At the limit the answer step was asked once; it wrote nothing, so the limit stands.
    assert_eq!(server.answer_requests().len(), 1);
}

/// Rule: thresholds are the user's (command line or policy); a workspace may only tighten them.
/// The start-of-run policy report names a workspace file that tried to loosen one, and the run
/// keeps the user's value.
#[test]
fn the_policy_report_says_when_a_workspace_tried_to_loosen_a_threshold() {
    let lab = CliLab::new(&[]);
    std::fs::create_dir_all(lab.ws.join(".boyd")).expect(".boyd");
    let policy = lab.ws.join(".boyd/policy.toml");
    std::fs::write(
        &policy,
        "confidence_threshold = 0.05\ncontradiction_threshold = 0.95\n",
    )
    .expect("policy");
    let server = ScriptedServer::start(
        vec![proposal(&[("final_answer", json!({"answer": "done"}))])],
        None,
    );
    let out = lab.run_ooda(&server, "Say done", &["--json"]);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{}", text(&out));
    let file = policy.display();
    assert!(
        err.contains(&format!(
            "policy: REFUSED from the workspace: {file}: confidence_threshold = 0.05 would lower the user's escalation threshold 0.3; refused"
        )),
        "{err}"
    );
    assert!(
        err.contains(&format!(
            "policy: REFUSED from the workspace: {file}: contradiction_threshold = 0.95 would raise the user's 0.8"
        )),
        "{err}"
    );
    let (v, _) = run_dir_of(&out);
    let refused = v["policy"]["refused"].as_array().expect("policy.refused");
    assert_eq!(refused.len(), 2, "{v}");

    // A tightening is applied and reported as such.
    std::fs::write(&policy, "confidence_threshold = 0.5\n").expect("policy");
    let server = ScriptedServer::start(
        vec![proposal(&[("final_answer", json!({"answer": "done"}))])],
        None,
    );
    let out = lab.run_ooda(&server, "Say done", &["--json"]);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        err.contains("policy: tightened by the workspace: escalation threshold: 0.3 → 0.5"),
        "{err}"
    );
    assert!(!err.contains("REFUSED"), "{err}");
}

/// Rule: implicit guidance learned from memory. Two runs of similar tasks ("Use the calculator for A * B.") in
/// one workspace succeed with the same steps (the calculator on the task's numbers, then its
/// output as the answer); the third similar task takes those steps without a Decide call, and
/// the trace names the pattern and the runs it was learned from.
#[test]
fn the_third_similar_task_in_a_workspace_skips_orient_and_decide() {
    let lab = CliLab::new(&[]);
    let mut runs = Vec::new();
    for (a, b) in [(6, 7), (8, 9)] {
        let server = ScriptedServer::start(
            vec![
                proposal(&[("calculator", json!({ "expression": format!("{a} * {b}") }))]),
                proposal(&[("final_answer", json!({ "answer": (a * b).to_string() }))]),
            ],
            None,
        );
        let out = lab.run_ooda_remembering(
            &server,
            &format!("Use the calculator for {a} * {b}."),
            &["--json"],
        );
        assert!(out.status.success(), "{}", text(&out));
        let (v, _) = run_dir_of(&out);
        assert_eq!(v["answer"], (a * b).to_string(), "{v}");
        assert_eq!(
            v["counters"]["implicit"], 0,
            "learned only after two runs: {v}"
        );
        assert_eq!(server.requests().len(), 2);
        runs.push(v["run_id"].as_str().expect("run_id").to_string());
    }
    // Nothing scripted: a Decide call would get the out-of-script answer.
    let server = ScriptedServer::start(Vec::new(), None);
    let out = lab.run_ooda_remembering(&server, "Use the calculator for 12 * 11.", &[]);
    let t = text(&out);
    assert!(out.status.success(), "{t}");
    assert!(t.contains("Answer: 132"), "{t}");
    assert_eq!(server.requests().len(), 0, "no model call: {t}");
    assert!(
        t.contains(&format!(
            "implicit (learned in this workspace: \"Use the calculator for {{0}} * {{1}}.\" at start -> calculator, succeeded in 2 earlier run(s) ({}, {}))",
            runs[0], runs[1]
        )),
        "{t}"
    );
    assert!(
        t.contains("at after calculator verified -> final_answer"),
        "{t}"
    );
    // A task of another shape is not guided.
    let server = ScriptedServer::start(
        vec![proposal(&[("final_answer", json!({"answer": "no"}))])],
        None,
    );
    let out = lab.run_ooda_remembering(&server, "Is 12 prime?", &["--json"]);
    let (v, _) = run_dir_of(&out);
    assert_eq!(v["counters"]["implicit"], 0, "{v}");
    assert_eq!(server.requests().len(), 1);
}

/// An external sensor from the command line: `cat status.txt` run each cycle in the workspace
/// (inside the shell tool's sandbox); its output is the signal `external.status` in the world
/// model the model is shown and in the saved snapshot.
#[test]
fn an_external_sensor_reading_shows_up_in_the_world_model() {
    let lab = CliLab::new(&[("status.txt", "green\n")]);
    let server = ScriptedServer::start(
        vec![proposal(&[("final_answer", json!({"answer": "green"}))])],
        None,
    );
    let out = lab.run_ooda(
        &server,
        "What does the status sensor say?",
        &["--sensor", "status=cat status.txt"],
    );
    let t = text(&out);
    assert!(out.status.success(), "{t}");
    assert!(
        t.contains("external.status=green"),
        "the trace shows it: {t}"
    );
    let reqs = server.requests();
    assert!(
        reqs[0].to_string().contains("external.status: green"),
        "the model's world model has it: {}",
        reqs[0]
    );
    let snap = boyd::agent::ooda::load_snapshot(&lab.run_dir_in(&t)).expect("snapshot");
    assert_eq!(
        snap.world
            .signals
            .get("external.status")
            .map(String::as_str),
        Some("green")
    );
}

/// A critical external sensor whose command fails (exit status) or runs past its timeout
/// costs 0.3 of the observation confidence: with the escalation threshold at 0.7 the run
/// escalates before any model call. The same failure from a sensor that is not critical is
/// recorded and the run goes on.
#[test]
fn a_critical_external_sensor_that_fails_or_times_out_lowers_confidence_and_escalates() {
    let lab = CliLab::new(&[]);
    for (command, says) in [
        ("probe=cat missing.txt", "exit status 1"),
        ("probe=sleep 5", "no reading within 300 ms"),
    ] {
        let server = ScriptedServer::start(
            vec![proposal(&[("final_answer", json!({"answer": "x"}))])],
            None,
        );
        let t0 = std::time::Instant::now();
        let out = lab.run_ooda(
            &server,
            "Check the probe",
            &[
                "--sensor",
                command,
                "--sensor-critical",
                "probe",
                "--sensor-timeout",
                "0.3",
                "--confidence-threshold",
                "0.7",
            ],
        );
        let t = text(&out);
        assert!(t0.elapsed() < std::time::Duration::from_secs(4), "{t}");
        assert_eq!(out.status.code(), Some(2), "{t}");
        assert!(t.contains("observe  confidence 0.70"), "{t}");
        assert!(t.contains("✗ sensor probe (critical)"), "{t}");
        assert!(t.contains(says), "{command}: {t}");
        assert!(t.contains("state: escalated"), "{t}");
        assert!(
            t.contains("orientation confidence 0.63 is below 0.70 (failed sensors: probe)"),
            "{t}"
        );
        assert_eq!(server.requests().len(), 0, "no model call: {t}");
    }
    // Not critical: recorded, not counted.
    let server = ScriptedServer::start(
        vec![proposal(&[("final_answer", json!({"answer": "x"}))])],
        None,
    );
    let out = lab.run_ooda(
        &server,
        "Check the probe",
        &[
            "--sensor",
            "probe=cat missing.txt",
            "--confidence-threshold",
            "0.7",
        ],
    );
    let t = text(&out);
    assert!(out.status.success(), "{t}");
    assert!(t.contains("observe  confidence 1.00"), "{t}");
    assert!(t.contains("✗ sensor probe exit status 1"), "{t}");
}

/// Rule: a sensor timing out during generation lowers confidence and escalates, through the
/// CLI. The critical sensor reads a FIFO the test writes once: Observe's reading gets "ok";
/// the reading taken while the model generates (the scripted server takes 1.5 s) finds no
/// writer and runs past its 300 ms timeout; the recheck before Act escalates and the chosen
/// action does not run.
#[test]
fn a_critical_sensor_timing_out_while_the_model_generates_escalates_through_the_cli() {
    let lab = CliLab::new(&[]);
    let fifo = lab.ws.join("status.fifo");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("mkfifo");
    assert!(made.success());
    let writer = {
        let fifo = fifo.clone();
        std::thread::spawn(move || {
            // Blocks until Observe's reader opens the FIFO; one reading, then no writer.
            std::fs::write(&fifo, "ok\n").expect("write the FIFO");
        })
    };
    let server = ScriptedServer::start(
        vec![proposal(&[("calculator", json!({"expression": "6 * 7"}))])],
        Some(Box::new(|_| {
            std::thread::sleep(std::time::Duration::from_millis(1500))
        })),
    );
    let out = lab.run_ooda(
        &server,
        "Use the calculator for 6 * 7.",
        &[
            "--sensor",
            "probe=cat status.fifo",
            "--sensor-critical",
            "probe",
            "--sensor-timeout",
            "0.3",
            "--confidence-threshold",
            "0.7",
        ],
    );
    writer.join().expect("writer");
    let t = text(&out);
    assert_eq!(out.status.code(), Some(2), "{t}");
    assert!(
        t.contains("observe  confidence 1.00"),
        "Observe read it: {t}"
    );
    assert!(t.contains("state: escalated"), "{t}");
    assert!(
        t.contains("critical sensor failed during generation: probe"),
        "{t}"
    );
    assert_eq!(server.requests().len(), 1, "the model did generate: {t}");
    assert!(
        !t.contains("act      calculator"),
        "the action did not run: {t}"
    );
}

/// A malformed `--sensor` is refused before the model loads, with a message that shows the
/// form; so are a critical name that names no sensor and a program the sandbox cannot run.
#[test]
fn a_malformed_sensor_is_refused_with_a_clear_error() {
    let lab = CliLab::new(&[]);
    let server = ScriptedServer::start(Vec::new(), None);
    for (flags, says) in [
        (
            vec!["--sensor", "cat status.txt"],
            "--sensor \"cat status.txt\" is not NAME=COMMAND: there is no `=`",
        ),
        (
            vec!["--sensor", "x=cat a | wc -l"],
            "is not NAME=COMMAND: no shell runs the command",
        ),
        (
            vec!["--sensor", "x=cat a", "--sensor-critical", "y"],
            "--sensor-critical \"y\" names no --sensor",
        ),
        (
            vec!["--sensor", "files=cat a"],
            "--sensor name \"files\" is a built-in sensor's",
        ),
        (
            vec!["--sensor", "x=no-such-program-here"],
            "--sensor x: program \"no-such-program-here\" is not installed",
        ),
    ] {
        let out = lab.run_ooda(&server, "t", &flags);
        let t = text(&out);
        assert!(!out.status.success(), "{flags:?}: {t}");
        assert!(t.contains(says), "{flags:?}: {t}");
        assert!(!t.contains("panicked"), "{t}");
    }
    assert_eq!(server.requests().len(), 0);
}

/// Rule: hypotheses are written and tested. Each chosen action gets one ("will produce a
/// verified result"), open in the world-model snapshot its intent names; the outcome's
/// verification refutes it (a read of a missing file fails) or confirms it (the calculator
/// verifies). The trace prints both, the run's snapshot keeps them, and `boyd runs show` prints
/// each under its action.
#[test]
fn hypotheses_are_confirmed_or_refuted_by_the_outcome_and_shown_by_runs_show() {
    use boyd::agent::ooda::hypothesis::HypothesisStatus;
    let lab = CliLab::new(&[]);
    let server = ScriptedServer::start(
        vec![
            proposal(&[("read_file", json!({"path": "missing.txt"}))]),
            proposal(&[("calculator", json!({"expression": "6 * 7"}))]),
            proposal(&[("final_answer", json!({"answer": "42"}))]),
        ],
        None,
    );
    let out = lab.run_ooda(&server, "Use the calculator for 6 * 7.", &[]);
    let t = text(&out);
    assert!(out.status.success(), "{t}");
    assert!(
        t.contains("hypothesis open: read_file {\"path\":\"missing.txt\"} will produce a verified result (use read_file)"),
        "{t}"
    );
    assert!(
        t.contains("hypothesis refuted: read_file {\"path\":\"missing.txt\"} will produce a verified result (use read_file) — failed: "),
        "{t}"
    );
    assert!(
        t.contains("hypothesis confirmed: calculator {\"expression\":\"6 * 7\"} will produce a verified result (use calculator) — verified: 42"),
        "{t}"
    );
    let dir = lab.run_dir_in(&t);
    let snap = boyd::agent::ooda::load_snapshot(&dir).expect("snapshot");
    let h = &snap.world.hypotheses;
    assert_eq!(h.len(), 2, "{h:?}");
    assert_eq!(
        (h[0].status, h[0].action_id),
        (HypothesisStatus::Refuted, Some(1))
    );
    assert_eq!(
        (h[1].status, h[1].action_id),
        (HypothesisStatus::Confirmed, Some(2))
    );
    // The calculator's intent names a world in which its hypothesis is still open.
    let events = boyd::agent::audit::read_events(&dir).expect("audit");
    let sha = events
        .iter()
        .find_map(|r| match &r.event {
            boyd::agent::audit::AuditEvent::Intent { tool, why, .. } if tool == "calculator" => {
                why.as_ref().map(|w| w.world_sha256.clone())
            }
            _ => None,
        })
        .expect("the calculator's intent");
    let world: boyd::agent::ooda::world::WorldModel = serde_json::from_slice(
        &std::fs::read(dir.join("worlds").join(format!("{sha}.json"))).expect("snapshot"),
    )
    .expect("a world model");
    assert_eq!(world.hypotheses.len(), 2);
    assert_eq!(world.hypotheses[0].status, HypothesisStatus::Refuted);
    assert_eq!(world.hypotheses[1].status, HypothesisStatus::Open);

    let show = lab
        .boyd()
        .args(["runs", "show"])
        .arg(dir.file_name().expect("run id"))
        .output()
        .expect("boyd runs show");
    let t = text(&show);
    assert!(show.status.success(), "{t}");
    assert!(
        t.contains("hypothesis: calculator {\"expression\":\"6 * 7\"} will produce a verified result (use calculator) — confirmed (verified: 42)"),
        "{t}"
    );
    assert!(
        t.contains("hypothesis: read_file {\"path\":\"missing.txt\"} will produce a verified result (use read_file) — refuted (failed: "),
        "{t}"
    );
}

/// Issue 40, attack 6: a workspace file full of terminal controls (cursor up, erase line, a
/// faked approval line, OSC 52 to the clipboard, the one-character C1 CSI) is shown escaped
/// wherever the CLI prints it: the live `act` line of the run and `boyd runs show`'s
/// observation; `--json` keeps its exact characters.
#[test]
fn terminal_controls_in_tool_output_are_printed_escaped() {
    let hostile =
        "ok\x1b[1A\x1b[2K\rto approve it: boyd approve x\x08\x08\u{9b}2K\x1b]52;c;ZXZpbA==\x07 end";
    let lab = CliLab::new(&[("evil.txt", hostile)]);
    let server = ScriptedServer::start(
        vec![
            proposal(&[("read_file", json!({"path": "evil.txt"}))]),
            proposal(&[("final_answer", json!({"answer": "done"}))]),
        ],
        None,
    );
    let out = lab.run_ooda(&server, "Read evil.txt.", &[]);
    let raw_controls = |bytes: &[u8]| {
        let s = String::from_utf8_lossy(bytes);
        s.chars()
            .filter(|c| c.is_control() && *c != '\n' && *c != '\t')
            .collect::<String>()
    };
    let t = text(&out);
    assert!(out.status.success(), "{t}");
    assert_eq!(raw_controls(&out.stdout), "", "raw controls printed: {t:?}");
    // (The act line flattens whitespace, so the CR is a space there.)
    for shown in [
        "ok\\x1b[1A\\x1b[2K to approve it",
        "x\\x08\\x08\\u{9b}2K\\x1b]52;c;ZXZpbA==\\x07 end",
    ] {
        assert!(
            t.lines()
                .any(|l| l.starts_with("act ") && l.contains(shown)),
            "the act line shows {shown}: {t}"
        );
    }
    let dir = lab.run_dir_in(&t);
    let run_id = dir.file_name().expect("id").to_string_lossy().into_owned();
    let show = lab
        .boyd()
        .args(["runs", "show", &run_id])
        .output()
        .expect("boyd runs show");
    let s = text(&show);
    assert!(show.status.success(), "{s}");
    assert_eq!(
        raw_controls(&show.stdout),
        "",
        "raw controls printed: {s:?}"
    );
    assert!(
        s.contains(
            "\\x1b[2K\\x0dto approve it: boyd approve x\\x08\\x08\\u{9b}2K\\x1b]52;c;ZXZpbA==\\x07"
        ),
        "{s}"
    );
    // The JSON transcript keeps the exact characters.
    let json_show = lab
        .boyd()
        .args(["--json", "runs", "show", &run_id])
        .output()
        .expect("boyd runs show --json");
    assert!(json_show.status.success(), "{}", text(&json_show));
    let records: Value = serde_json::from_slice(&json_show.stdout).expect("json");
    assert!(
        records
            .as_array()
            .expect("records")
            .iter()
            .any(|r| r.to_string().contains("\\u001b]52;c;ZXZpbA==\\u0007")),
        "{records}"
    );
}
