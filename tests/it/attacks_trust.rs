//! Attacks on the trust boundary of approvals, policy, resume, audit and model loading: each
//! class below tries what an attacker (a hostile workspace, a model told what to do by a file,
//! a local process editing the run directory) would, through the real code path (the `boyd`
//! binary where a test can drive it, else the library the binary calls), asserts the refusal,
//! and asserts that nothing outside the workspace changed. Each class asserts its case count.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use boyd::agent::approval::{parse_ttl, ApprovalError, ApprovalKey, Ledger, LEDGER_FILE};
use boyd::agent::audit::{
    read_events, verify_with_key, AuditError, AuditEvent, AuditSink, ChainLog, SignatureCheck,
    AUDIT_FILE, MANIFEST_FILE,
};
use boyd::agent::guard::fingerprint;
use boyd::agent::ooda::decide::{
    Baseline, Candidate, Policy, ScriptedDecider, ScriptedDecision, Tier,
};
use boyd::agent::ooda::orient::ScriptedOrienter;
use boyd::agent::ooda::writers::{DeleteFile, WriteFile};
use boyd::agent::ooda::{
    load_verified_snapshot, Ooda, OodaConfig, OodaError, OodaOutcome, OodaState, SNAPSHOT_FILE,
};
use boyd::agent::rundir::RunDir;
use boyd::agent::tools::{Cost, RiskProfile, Sandbox, Tool, ToolContext, ToolError, Toolset};
use boyd::lm::CancelToken;
use boyd::runtime::chat_template::{ChatTemplate, ChatTemplateError};

// ---------------------------------------------------------------------------------------------
// the lab: a workspace, things outside it, boyd's home and config

struct Lab {
    _tmp: tempfile::TempDir,
    ws: PathBuf,
    outside: PathBuf,
    home: PathBuf,
    cfg: PathBuf,
}

impl Lab {
    fn new() -> Self {
        let tmp = tempfile::tempdir().expect("tempdir");
        let root = tmp.path().to_path_buf();
        let ws = root.join("ws");
        let outside = root.join("outside");
        let home = root.join("home");
        let cfg = root.join("cfg");
        for d in [&ws, &outside, &home, &cfg] {
            std::fs::create_dir_all(d).expect("mkdir");
        }
        std::fs::write(outside.join("secret.txt"), "the user's secret\n").expect("secret");
        std::fs::create_dir_all(outside.join("dir")).expect("outside dir");
        std::fs::write(outside.join("dir").join("secret.txt"), "deep secret\n").expect("deep");
        let ws = ws.canonicalize().expect("canon");
        // The user's approval key exists before anything runs (as after the first `boyd run`).
        ApprovalKey::load_or_create(&cfg).expect("key");
        Self {
            _tmp: tmp,
            ws,
            outside,
            home,
            cfg,
        }
    }

    fn key(&self) -> ApprovalKey {
        ApprovalKey::load_or_create(&self.cfg).expect("key")
    }

    fn sandbox(&self) -> Sandbox {
        Sandbox::new(&self.ws).expect("sandbox")
    }

    fn ctx(&self) -> ToolContext {
        ToolContext {
            workspace: Some(self.sandbox()),
            blob_dir: self.home.join("blobs"),
            cancel: CancelToken::new(),
            task: None,
            observed: Vec::new(),
        }
    }

    /// Everything outside the workspace that must not change: the outside tree and the config.
    fn outside_state(&self) -> BTreeMap<PathBuf, String> {
        let mut m = tree(&self.outside);
        m.extend(tree(&self.cfg));
        m
    }

    fn boyd(&self) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_boyd"));
        c.env("BOYD_HOME", &self.home)
            .env("BOYD_CONFIG_DIR", &self.cfg)
            .env("HF_HUB_OFFLINE", "1")
            .env("BOYD_PYTHON", "/nonexistent/python3")
            .env_remove("BOYD_MODEL");
        c
    }
}

/// Every entry under `dir` (links not followed): path → type and content.
fn tree(dir: &Path) -> BTreeMap<PathBuf, String> {
    let mut out = BTreeMap::new();
    let Ok(rd) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in rd.filter_map(Result::ok) {
        let p = e.path();
        let Ok(m) = std::fs::symlink_metadata(&p) else {
            continue;
        };
        let ft = m.file_type();
        if ft.is_symlink() {
            let t = std::fs::read_link(&p).unwrap_or_default();
            out.insert(p, format!("link {}", t.display()));
        } else if ft.is_dir() {
            out.insert(p.clone(), "dir".into());
            out.extend(tree(&p));
        } else if ft.is_file() {
            let c = std::fs::read(&p).unwrap_or_default();
            out.insert(p, format!("file {}", String::from_utf8_lossy(&c)));
        } else {
            out.insert(p, "other".into());
        }
    }
    out
}

fn out_text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn mkfifo(p: &Path) {
    let st = Command::new("mkfifo").arg(p).status().expect("mkfifo");
    assert!(st.success(), "mkfifo {}", p.display());
}

#[cfg(unix)]
fn symlink(target: impl AsRef<Path>, link: &Path) {
    std::os::unix::fs::symlink(target, link).expect("symlink");
}

/// Run `f` on a thread and fail the test (instead of hanging) when it blocks.
fn within<T: Send + 'static>(secs: u64, what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(Duration::from_secs(secs))
        .unwrap_or_else(|_| panic!("{what}: blocked for more than {secs} s"))
}

/// A tool that counts its calls (irreversible unless told otherwise).
pub(crate) struct Launch {
    pub(crate) calls: Arc<AtomicUsize>,
}

impl Tool for Launch {
    fn name(&self) -> &str {
        "launch"
    }
    fn description(&self) -> &str {
        "Launch the rocket. Cannot be undone."
    }
    fn args_schema(&self) -> Value {
        json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]})
    }
    fn risk(&self) -> RiskProfile {
        RiskProfile {
            cost: Cost::Low,
            reversible: false,
        }
    }
    fn call(&self, _args: Value, _ctx: &ToolContext) -> Result<String, ToolError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        Ok("launched".into())
    }
}

pub(crate) fn quiet() -> OodaConfig {
    OodaConfig {
        builtin_sensors: false,
        ..OodaConfig::default()
    }
}

/// A run that escalated because `launch {"n": 1}` needs a token, signed with the lab's key.
struct Gated {
    tools: Toolset,
    calls: Arc<AtomicUsize>,
    run: PathBuf,
    run_id: String,
    fp: String,
}

async fn gated(lab: &Lab) -> Gated {
    let calls = Arc::new(AtomicUsize::new(0));
    let tools = Toolset::builtin(None).with(Launch {
        calls: calls.clone(),
    });
    let mut d = ScriptedDecider::new([ScriptedDecision::Propose(vec![Candidate::tool(
        "launch",
        json!({"n": 1}),
    )])]);
    let mut o = ScriptedOrienter::new([]);
    let mut ooda = Ooda::new(&mut d, &mut o, &tools, CancelToken::new());
    ooda.config = quiet();
    ooda.approval_key = Some(lab.key());
    ooda.workspace = Some(lab.sandbox());
    let run_dir = RunDir::create(&lab.home).expect("run dir");
    let out = ooda
        .run("launch it", run_dir, &mut |_| {})
        .await
        .expect("run");
    assert_eq!(out.state, OodaState::Escalated);
    let fp = out.pending_fingerprint.clone().expect("pending");
    Gated {
        tools,
        calls,
        run: out.run_dir.clone(),
        run_id: out.run_id.clone(),
        fp,
    }
}

async fn resume(
    lab: &Lab,
    g: &Gated,
    token: Option<&str>,
    key: Option<ApprovalKey>,
    workspace: Option<Sandbox>,
) -> Result<OodaOutcome, OodaError> {
    // After an approved launch the model asks for the same launch again: the spent token
    // does not cover it, so the run escalates again (and stays resumable).
    let mut d = ScriptedDecider::new([ScriptedDecision::Propose(vec![Candidate::tool(
        "launch",
        json!({"n": 1}),
    )])]);
    let mut o = ScriptedOrienter::new([]);
    let mut ooda = Ooda::new(&mut d, &mut o, &g.tools, CancelToken::new());
    ooda.config = quiet();
    ooda.approval_key = key;
    ooda.workspace = workspace.or_else(|| Some(lab.sandbox()));
    ooda.resume(&g.run, token, &mut |_| {}).await
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

// ---------------------------------------------------------------------------------------------
// 1. policy: a workspace may tighten, never loosen

#[cfg(unix)]
#[tokio::test]
async fn a_workspace_policy_cannot_loosen_the_users_policy() {
    let lab = Lab::new();
    let user = lab.cfg.join("user-policy.toml");
    std::fs::write(
        &user,
        "risk_budget = 20.0\n[tiers]\ncalculator = \"deny\"\nread_file = \"token\"\n",
    )
    .expect("user policy");
    std::fs::create_dir_all(lab.ws.join(".boyd")).expect(".boyd");
    let ws_policy = lab.ws.join(".boyd/policy.toml");
    let before = lab.outside_state();
    let tools = Toolset::builtin(None).with(WriteFile).with(DeleteFile);
    let tier = |p: &Policy, name: &str| p.tier(tools.get(name).expect("tool").as_ref());

    // (workspace file, check on the effective policy)
    type Check<'a> = Box<dyn Fn(&Policy) -> bool + 'a>;
    let cases: Vec<(&str, &str, Check<'_>)> = vec![
        (
            "write_file auto",
            "[tiers]\nwrite_file = \"auto\"\n",
            Box::new(move |p| tier(p, "write_file") == Tier::Token),
        ),
        (
            "delete_file auto",
            "[tiers]\ndelete_file = \"auto\"\n",
            Box::new(move |p| tier(p, "delete_file") == Tier::Token),
        ),
        (
            "user deny made auto",
            "[tiers]\ncalculator = \"auto\"\n",
            Box::new(move |p| tier(p, "calculator") == Tier::Deny),
        ),
        (
            "user token made auto",
            "[tiers]\nread_file = \"auto\"\n",
            Box::new(move |p| tier(p, "read_file") == Tier::Token),
        ),
        (
            "user deny made token",
            "[tiers]\ncalculator = \"token\"\n",
            Box::new(move |p| tier(p, "calculator") == Tier::Deny),
        ),
        (
            "risk budget raised",
            "risk_budget = 1e9\n",
            Box::new(|p| p.effective_budget(20.0) == 20.0),
        ),
        (
            "escalation threshold lowered",
            "confidence_threshold = 0.05\n",
            Box::new(|p| p.effective_confidence_threshold(0.3) == 0.3),
        ),
        (
            "contradiction threshold raised",
            "contradiction_threshold = 0.99\n",
            Box::new(|p| p.effective_contradiction_threshold(0.8) == 0.8),
        ),
        (
            "implicit-guidance rule",
            "[[rules]]\nkind = \"final_after\"\ntool = \"read_file\"\n",
            Box::new(|p| p.rules.is_empty()),
        ),
    ];
    assert_eq!(cases.len(), 9, "policy cases");
    let mut refused = 0;
    for (name, text, check) in &cases {
        std::fs::write(&ws_policy, text).expect("ws policy");
        let p = Policy::effective(Some(&user), Some(&lab.ws)).expect("policy");
        assert!(check(&p), "{name}: the workspace loosened the policy");
        let r = p.report(&tools, &Baseline::default());
        assert!(
            !r.refused.is_empty(),
            "{name}: the refusal is not reported: {r:?}"
        );
        refused += 1;
    }
    assert_eq!(refused, cases.len());

    // Tightening does apply (the control).
    std::fs::write(
        &ws_policy,
        "risk_budget = 2.0\nconfidence_threshold = 0.5\ncontradiction_threshold = 0.6\n[tiers]\nlist_dir = \"deny\"\n",
    )
    .expect("w");
    let p = Policy::effective(Some(&user), Some(&lab.ws)).expect("policy");
    assert_eq!(tier(&p, "list_dir"), Tier::Deny);
    assert_eq!(p.effective_budget(20.0), 2.0);
    let r = p.report(&tools, &Baseline::default());
    assert!(r.refused.is_empty(), "{r:?}");
    assert!(
        r.tightened
            .contains(&"escalation threshold: 0.3 → 0.5".to_string()),
        "{r:?}"
    );
    assert!(
        r.tightened
            .contains(&"contradiction threshold: 0.8 → 0.6".to_string()),
        "{r:?}"
    );

    // A FIFO in place of the policy file is refused without blocking.
    std::fs::remove_file(&ws_policy).expect("rm");
    mkfifo(&ws_policy);
    let (u, w) = (user.clone(), lab.ws.clone());
    let r = within(10, "policy FIFO", move || {
        Policy::effective(Some(&u), Some(&w)).map(|_| ())
    });
    assert!(r.is_err(), "a FIFO policy must be refused");
    std::fs::remove_file(&ws_policy).expect("rm fifo");
    // A link to a file outside the workspace is refused, not read.
    symlink(lab.outside.join("secret.txt"), &ws_policy);
    let r = Policy::effective(Some(&user), Some(&lab.ws));
    assert!(
        r.is_err(),
        "a policy link out of the workspace must be refused"
    );
    std::fs::remove_file(&ws_policy).expect("rm link");

    // `boyd run` prints the effective tiers and the refusal at run start (before any model is
    // loaded: this one does not exist).
    std::fs::write(&ws_policy, "[tiers]\nwrite_file = \"auto\"\n").expect("w");
    let out = lab
        .boyd()
        .args([
            "--model",
            "/nonexistent/model.gguf",
            "run",
            "--loop",
            "ooda",
            "--workspace",
        ])
        .arg(&lab.ws)
        .arg("write a note")
        .output()
        .expect("boyd run");
    let text = out_text(&out);
    assert!(!out.status.success(), "{text}");
    assert!(
        text.contains("REFUSED from the workspace")
            && text.contains("write_file = \"auto\"")
            && text.contains("write_file=token"),
        "{text}"
    );

    // End to end: the workspace says delete_file is auto; the run still stops for a token and
    // the file is not deleted.
    std::fs::write(&ws_policy, "[tiers]\ndelete_file = \"auto\"\n").expect("w");
    std::fs::write(lab.ws.join("victim.txt"), "keep me").expect("victim");
    let policy = Policy::effective(None, Some(&lab.ws)).expect("policy");
    let mut d = ScriptedDecider::new([ScriptedDecision::Propose(vec![Candidate::tool(
        "delete_file",
        json!({"path": "victim.txt"}),
    )])]);
    let mut o = ScriptedOrienter::new([]);
    let mut ooda = Ooda::new(&mut d, &mut o, &tools, CancelToken::new());
    ooda.config = quiet();
    ooda.config.policy = policy;
    ooda.workspace = Some(lab.sandbox());
    ooda.approval_key = Some(lab.key());
    let out = ooda
        .run(
            "delete victim.txt",
            RunDir::create(&lab.home).expect("run"),
            &mut |_| {},
        )
        .await
        .expect("run");
    assert_eq!(out.state, OodaState::Escalated, "{out:?}");
    assert!(
        lab.ws.join("victim.txt").exists(),
        "deleted without a token"
    );
    assert_eq!(
        lab.outside_state(),
        before,
        "something outside the workspace changed"
    );
}

// ---------------------------------------------------------------------------------------------
// 2. the agent cannot change .boyd/, however the path is spelled

#[cfg(unix)]
#[test]
fn every_spelling_of_the_policy_directory_is_refused_by_resolved_path() {
    let lab = Lab::new();
    let boyd_dir = lab.ws.join(".boyd");
    std::fs::create_dir_all(&boyd_dir).expect(".boyd");
    std::fs::write(boyd_dir.join("policy.toml"), "[tiers]\nshell = \"deny\"\n").expect("p");
    std::fs::create_dir_all(lab.ws.join("a")).expect("a");
    symlink(".boyd", &lab.ws.join("lnk"));
    symlink(&boyd_dir, &lab.ws.join("lnkabs"));
    symlink(".boyd/policy.toml", &lab.ws.join("polink"));
    symlink("../.boyd", &lab.ws.join("a").join("up"));
    let before_boyd = tree(&boyd_dir);
    let before = lab.outside_state();
    let ctx = lab.ctx();
    let content = "[tiers]\nwrite_file = \"auto\"\ndelete_file = \"auto\"\n";
    let writes = [
        ".boyd/policy.toml",
        "./.boyd/policy.toml",
        ".//.boyd/policy.toml",
        "././.boyd/policy.toml",
        " .boyd/policy.toml",
        ".boyd/./policy.toml",
        ".boyd//policy.toml",
        "a/../.boyd/policy.toml",
        "lnk/policy.toml",
        "lnkabs/policy.toml",
        "a/up/policy.toml",
        "polink",
        ".boyd/new/dir/x.toml",
        ".boyd",
    ];
    let deletes = [
        ".boyd/policy.toml",
        "./.boyd/policy.toml",
        " .boyd/policy.toml",
        "lnk/policy.toml",
        "a/up/policy.toml",
        "polink",
        ".boyd",
    ];
    let mut refused = 0;
    for p in writes {
        let r = WriteFile.call(json!({"path": p, "content": content}), &ctx);
        assert!(r.is_err(), "write_file {p:?} was allowed");
        refused += 1;
    }
    for p in deletes {
        let r = DeleteFile.call(json!({"path": p}), &ctx);
        assert!(r.is_err(), "delete_file {p:?} was allowed");
        refused += 1;
    }
    // A workspace whose .boyd is itself a link to another directory: that directory is
    // protected too.
    let lab2 = Lab::new();
    std::fs::create_dir_all(lab2.ws.join("conf")).expect("conf");
    std::fs::write(lab2.ws.join("conf/policy.toml"), "x").expect("p");
    symlink("conf", &lab2.ws.join(".boyd"));
    let ctx2 = lab2.ctx();
    for (tool, args) in [
        ("write", json!({"path": "conf/policy.toml", "content": "y"})),
        ("delete", json!({"path": "conf/policy.toml"})),
    ] {
        let r = if tool == "write" {
            WriteFile.call(args, &ctx2)
        } else {
            DeleteFile.call(args, &ctx2)
        };
        assert!(r.is_err(), "{tool} through a .boyd link target was allowed");
        refused += 1;
    }
    assert_eq!(
        std::fs::read_to_string(lab2.ws.join("conf/policy.toml")).expect("r"),
        "x"
    );
    assert_eq!(writes.len() + deletes.len() + 2, 23, "spelling cases");
    assert_eq!(refused, 23);
    assert_eq!(tree(&boyd_dir), before_boyd, ".boyd/ changed");
    assert_eq!(
        lab.outside_state(),
        before,
        "something outside the workspace changed"
    );
    // The guard is not a blanket refusal: an ordinary file is written.
    WriteFile
        .call(json!({"path": "notes.txt", "content": "ok"}), &ctx)
        .expect("ordinary write");
}

// ---------------------------------------------------------------------------------------------
// 3. links, FIFOs, devices and hard links: never followed, never blocking

#[cfg(unix)]
#[test]
fn deletion_and_writes_never_follow_links_or_block_on_special_files() {
    let lab = Lab::new();
    let ws = lab.ws.clone();
    std::fs::write(ws.join("inside.txt"), "inside").expect("inside");
    std::fs::create_dir_all(ws.join("subdir")).expect("subdir");
    symlink(lab.outside.join("secret.txt"), &ws.join("lnk_out"));
    symlink("inside.txt", &ws.join("lnk_in"));
    symlink(lab.outside.join("dir"), &ws.join("dlink"));
    symlink(lab.outside.join("nothing"), &ws.join("dangling"));
    mkfifo(&ws.join("fifo"));
    std::fs::hard_link(lab.outside.join("secret.txt"), ws.join("hard")).expect("hard link");
    let before = lab.outside_state();
    let before_inside = std::fs::read_to_string(ws.join("inside.txt")).expect("r");
    type Call = (&'static str, Value);
    let cases: Vec<Call> = vec![
        ("delete", json!({"path": "lnk_out"})),
        ("delete", json!({"path": "lnk_in"})),
        ("delete", json!({"path": "dlink/secret.txt"})),
        ("delete", json!({"path": "dangling"})),
        ("delete", json!({"path": "fifo"})),
        ("delete", json!({"path": "subdir"})),
        ("write", json!({"path": "lnk_out", "content": "pwned"})),
        ("write", json!({"path": "lnk_in", "content": "pwned"})),
        ("write", json!({"path": "fifo", "content": "pwned"})),
        ("write", json!({"path": "hard", "content": "pwned"})),
        (
            "write",
            json!({"path": "dlink/new.txt", "content": "pwned"}),
        ),
        ("write", json!({"path": "dangling", "content": "pwned"})),
    ];
    assert_eq!(cases.len(), 12, "link and special-file cases");
    let mut refused = 0;
    for (tool, args) in cases {
        let ctx = lab.ctx();
        let shown = args.to_string();
        let r = within(10, &format!("{tool} {shown}"), move || {
            if tool == "write" {
                WriteFile.call(args, &ctx).map(|_| ())
            } else {
                DeleteFile.call(args, &ctx).map(|_| ())
            }
        });
        assert!(r.is_err(), "{tool} {shown} was allowed");
        refused += 1;
    }
    assert_eq!(refused, 12);
    // The links themselves and their targets are still there.
    for l in ["lnk_out", "lnk_in", "dlink", "dangling", "fifo", "hard"] {
        assert!(std::fs::symlink_metadata(ws.join(l)).is_ok(), "{l} removed");
    }
    assert_eq!(
        std::fs::read_to_string(ws.join("inside.txt")).expect("r"),
        before_inside
    );
    assert_eq!(
        lab.outside_state(),
        before,
        "something outside the workspace changed"
    );
}

// ---------------------------------------------------------------------------------------------
// 4. tokens: one spelling, one use

/// Re-spellings of a valid token: case, padding, signs, whitespace, field shapes.
fn respellings(t: &str) -> Vec<(String, String)> {
    let f: Vec<&str> = t.split('.').collect();
    assert_eq!(f.len(), 6, "v2 token: {t}");
    let with = |i: usize, v: String| {
        let mut g: Vec<String> = f.iter().map(|s| s.to_string()).collect();
        g[i] = v;
        g.join(".")
    };
    vec![
        ("upper case".into(), t.to_uppercase()),
        ("upper-case version".into(), with(0, "V2".into())),
        (
            "upper-case fingerprint".into(),
            with(2, f[2].to_uppercase()),
        ),
        ("upper-case nonce".into(), with(4, f[4].to_uppercase())),
        ("upper-case signature".into(), with(5, f[5].to_uppercase())),
        ("zero-padded expiry".into(), with(3, format!("0{}", f[3]))),
        ("plus-signed expiry".into(), with(3, format!("+{}", f[3]))),
        ("minus-zero expiry".into(), with(3, format!("-0{}", f[3]))),
        ("leading space".into(), format!(" {t}")),
        ("trailing newline".into(), format!("{t}\n")),
        ("trailing tab".into(), format!("{t}\t")),
        ("inner space".into(), with(5, format!("{} ", f[5]))),
        (
            "zero-padded signature".into(),
            with(5, format!("00{}", f[5])),
        ),
        ("0x signature".into(), with(5, format!("0x{}", &f[5][2..]))),
        ("doubled dot".into(), t.replacen('.', "..", 1)),
        ("nonce dropped (v1 shape)".into(), {
            let mut g: Vec<&str> = f.clone();
            g.remove(4);
            g.join(".")
        }),
    ]
}

#[tokio::test]
async fn a_token_is_accepted_once_however_it_is_respelled() {
    let lab = Lab::new();
    let g = gated(&lab).await;
    let key = lab.key();
    let good = key.issue(&g.run_id, &g.fp, Duration::from_secs(900));
    let variants = respellings(&good);
    assert_eq!(variants.len(), 16, "re-spellings");
    let before = lab.outside_state();
    let mut refused = 0;
    // Before the real token is used: every re-spelling is refused by the parser.
    for (name, v) in &variants {
        let r = resume(&lab, &g, Some(v), Some(key.clone()), None).await;
        assert!(
            matches!(r, Err(OodaError::Approval(ApprovalError::Malformed { .. }))),
            "{name}: {r:?}"
        );
        assert!(
            Ledger::new(&g.run).spend(v).is_err(),
            "{name}: the ledger took it"
        );
        refused += 1;
    }
    assert_eq!(g.calls.load(Ordering::SeqCst), 0);
    let out = resume(&lab, &g, Some(&good), Some(key.clone()), None)
        .await
        .expect("the real token");
    assert_eq!(g.calls.load(Ordering::SeqCst), 1, "{out:?}");
    // After: still refused, and the token itself is spent.
    for (name, v) in &variants {
        let r = resume(&lab, &g, Some(v), Some(key.clone()), None).await;
        assert!(r.is_err(), "{name} after the spend: {r:?}");
        refused += 1;
    }
    let r = resume(&lab, &g, Some(&good), Some(key.clone()), None).await;
    assert!(
        matches!(r, Err(OodaError::Approval(ApprovalError::Replayed))),
        "{r:?}"
    );
    refused += 1;
    assert_eq!(refused, 2 * 16 + 1);
    assert_eq!(
        g.calls.load(Ordering::SeqCst),
        1,
        "the action ran more than once"
    );
    let ledger = std::fs::read_to_string(g.run.join(LEDGER_FILE)).expect("ledger");
    assert_eq!(ledger.lines().count(), 1, "{ledger}");
    assert_eq!(
        lab.outside_state(),
        before,
        "something outside the workspace changed"
    );
}

#[test]
fn a_token_valid_longer_than_a_day_is_refused() {
    let lab = Lab::new();
    let key = lab.key();
    let fp = fingerprint("launch", &json!({"n": 1}));
    let mut refused = 0;
    // Issued by the library for 48 h and for ten years: refused at the check.
    for ahead in [48 * 3600, 10 * 365 * 86_400] {
        let t = key.issue_until("run-1", &fp, now() + ahead);
        assert!(
            matches!(
                key.check(&t, "run-1", &fp),
                Err(ApprovalError::TtlTooLong { .. })
            ),
            "{ahead} s ahead"
        );
        refused += 1;
    }
    // Asked for on the command line: refused with the limit named.
    assert!(matches!(
        parse_ttl("25h"),
        Err(ApprovalError::TtlTooLong { .. })
    ));
    refused += 1;
    let out = lab
        .boyd()
        .args(["approve", "no-such-run", &fp, "--ttl", "2d"])
        .output()
        .expect("boyd approve");
    let text = out_text(&out);
    assert!(!out.status.success(), "{text}");
    assert!(text.contains("24 h"), "{text}");
    refused += 1;
    assert_eq!(refused, 4, "TTL cases");
}

// ---------------------------------------------------------------------------------------------
// 5. the snapshot and the workspace of a resumed run

fn edit_snapshot(run: &Path, f: impl FnOnce(&mut serde_json::Map<String, Value>)) {
    let p = run.join(SNAPSHOT_FILE);
    let mut v: Value =
        serde_json::from_str(&std::fs::read_to_string(&p).expect("read")).expect("json");
    f(v.as_object_mut().expect("object"));
    std::fs::write(&p, serde_json::to_string_pretty(&v).expect("ser")).expect("write");
}

fn resign(run: &Path, key: &ApprovalKey) {
    // What a holder of the key can do: sign the writer's form of the edited snapshot (its
    // pretty JSON, the signature added as a last field).
    let p = run.join(SNAPSHOT_FILE);
    let mut v: Value =
        serde_json::from_str(&std::fs::read_to_string(&p).expect("read")).expect("json");
    v.as_object_mut().expect("object").remove("mac");
    let body = serde_json::to_string_pretty(&v).expect("ser");
    let mac = key.sign_bytes("boyd-ooda-snapshot-v1", body.as_bytes());
    let open = body.strip_suffix("\n}").expect("object");
    std::fs::write(&p, format!("{open},\n  \"mac\": \"{mac}\"\n}}")).expect("write");
}

#[tokio::test]
async fn a_forged_snapshot_or_a_foreign_workspace_is_refused() {
    type Edit = Box<dyn Fn(&Lab, &Gated)>;
    let cases: Vec<(&str, Edit)> = vec![
        (
            "pending arguments edited",
            Box::new(|_, g| {
                edit_snapshot(&g.run, |o| o["pending"]["args"] = json!({"n": 99}));
            }),
        ),
        (
            "pending tool and fingerprint replaced",
            Box::new(|_, g| {
                edit_snapshot(&g.run, |o| {
                    o["pending"]["tool"] = json!("delete_file");
                    o["pending"]["args"] = json!({"path": "x"});
                    o["pending"]["fingerprint"] =
                        json!(fingerprint("delete_file", &json!({"path": "x"})));
                });
            }),
        ),
        (
            "signature removed",
            Box::new(|_, g| {
                edit_snapshot(&g.run, |o| {
                    o.remove("mac");
                });
            }),
        ),
        (
            "workspace moved outside",
            Box::new(|lab, g| {
                let to = lab.outside.clone();
                edit_snapshot(&g.run, |o| o["workspace"] = json!(to));
            }),
        ),
        (
            "re-signed with another key",
            Box::new(|_, g| {
                edit_snapshot(&g.run, |o| o["pending"]["args"] = json!({"n": 2}));
                resign(&g.run, &ApprovalKey::from_bytes([9; 32]));
            }),
        ),
        (
            "pending action edited and signed, fingerprint kept",
            Box::new(|lab, g| {
                // Even a holder of the key cannot make the approved fingerprint cover another
                // action: the fingerprint is recomputed from tool + args.
                edit_snapshot(&g.run, |o| o["pending"]["args"] = json!({"n": 2}));
                resign(&g.run, &lab.key());
            }),
        ),
        (
            "snapshot of another run",
            Box::new(|_, g| {
                edit_snapshot(&g.run, |o| o["run_id"] = json!("20260101-000000-aaaaaa"));
            }),
        ),
        (
            "the transcript's workspace changed",
            Box::new(|lab, g| {
                let t = g.run.join("transcript.jsonl");
                let text = std::fs::read_to_string(&t).expect("read");
                let ws = serde_json::to_string(&lab.ws).expect("ser");
                let out = serde_json::to_string(&lab.outside).expect("ser");
                std::fs::write(&t, text.replacen(&ws, &out, 1)).expect("write");
            }),
        ),
    ];
    assert_eq!(cases.len(), 8, "snapshot cases");
    let mut refused = 0;
    for (name, edit) in &cases {
        let lab = Lab::new();
        let g = gated(&lab).await;
        let token = lab.key().issue(&g.run_id, &g.fp, Duration::from_secs(900));
        let before = lab.outside_state();
        edit(&lab, &g);
        let r = resume(&lab, &g, Some(&token), Some(lab.key()), None).await;
        assert!(
            matches!(r, Err(OodaError::BadSnapshot { .. })),
            "{name}: {r:?}"
        );
        assert_eq!(g.calls.load(Ordering::SeqCst), 0, "{name}: the action ran");
        assert_eq!(lab.outside_state(), before, "{name}: outside changed");
        refused += 1;
    }
    // A session that brings another workspace than the run's.
    let lab = Lab::new();
    let g = gated(&lab).await;
    let token = lab.key().issue(&g.run_id, &g.fp, Duration::from_secs(900));
    let other = Sandbox::new(&lab.outside).expect("sandbox");
    let r = resume(&lab, &g, Some(&token), Some(lab.key()), Some(other)).await;
    assert!(matches!(r, Err(OodaError::BadSnapshot { .. })), "{r:?}");
    assert_eq!(g.calls.load(Ordering::SeqCst), 0);
    refused += 1;
    // Without a key the fingerprint is still recomputed.
    edit_snapshot(&g.run, |o| o["pending"]["args"] = json!({"n": 7}));
    assert!(matches!(
        load_verified_snapshot(&g.run, None),
        Err(OodaError::BadSnapshot { .. })
    ));
    refused += 1;
    // `boyd approve` refuses to describe (and sign for) a snapshot that does not verify.
    let out = lab
        .boyd()
        .args(["approve", &g.run_id, &g.fp])
        .output()
        .expect("boyd approve");
    let text = out_text(&out);
    assert!(!out.status.success(), "{text}");
    assert!(text.contains("refusing to approve"), "{text}");
    refused += 1;
    // ... and `boyd resume` refuses it before loading any model.
    let out = lab
        .boyd()
        .args(["resume", &g.run_id, "--approve", &token])
        .output()
        .expect("boyd resume");
    let text = out_text(&out);
    assert!(!out.status.success(), "{text}");
    assert!(text.contains("not a valid OODA snapshot"), "{text}");
    refused += 1;
    assert_eq!(refused, 12);
}

// ---------------------------------------------------------------------------------------------
// 6. two `boyd resume` processes, one token

#[test]
fn two_concurrent_resume_processes_spend_one_token_exactly_once() {
    let lab = Lab::new();
    // A real model file for the binary to load (it never generates: the approved action runs
    // first and --max-loops 1 ends the session).
    let model = lab.home.join("tiny.gguf");
    let mut spec = boyd::runtime::synth::SynthSpec::tiny(boyd::sizing::Architecture::Llama);
    spec.context_length = 8192;
    boyd::runtime::synth::write(&spec, &model).expect("synthetic model");
    std::fs::write(lab.ws.join("note.txt"), "old").expect("note");
    // The run, escalated on write_file, written by the library with the lab's key.
    let tools = Toolset::builtin(None).with(WriteFile).with(DeleteFile);
    let args = json!({"path": "note.txt", "content": "new"});
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("rt");
    let out = rt.block_on(async {
        let mut d = ScriptedDecider::new([ScriptedDecision::Propose(vec![Candidate::tool(
            "write_file",
            args.clone(),
        )])]);
        let mut o = ScriptedOrienter::new([]);
        let mut ooda = Ooda::new(&mut d, &mut o, &tools, CancelToken::new());
        ooda.config = quiet();
        ooda.workspace = Some(lab.sandbox());
        ooda.approval_key = Some(lab.key());
        ooda.run(
            "write note.txt",
            RunDir::create(&lab.home).expect("run"),
            &mut |_| {},
        )
        .await
        .expect("run")
    });
    assert_eq!(out.state, OodaState::Escalated, "{out:?}");
    let fp = out.pending_fingerprint.clone().expect("pending");
    assert_eq!(fp, fingerprint("write_file", &args));
    let token = lab.key().issue(&out.run_id, &fp, Duration::from_secs(900));
    let before = lab.outside_state();
    let spawn = || {
        lab.boyd()
            .args([
                "--model",
                model.to_str().expect("utf-8"),
                "resume",
                &out.run_id,
                "--approve",
                &token,
                "--max-loops",
                "1",
                "--orient",
                "rules",
                "--no-memory",
            ])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("spawn boyd resume")
    };
    let (a, b) = (spawn(), spawn());
    let outs = [
        a.wait_with_output().expect("wait"),
        b.wait_with_output().expect("wait"),
    ];
    let texts: Vec<String> = outs.iter().map(out_text).collect();
    let intents = read_events(&out.run_dir)
        .expect("audit")
        .into_iter()
        .filter(|r| {
            matches!(&r.event, AuditEvent::Intent { tool, approval: Some(_), .. } if tool == "write_file")
        })
        .count();
    assert_eq!(intents, 1, "approved intents: {texts:#?}");
    let ledger = std::fs::read_to_string(out.run_dir.join(LEDGER_FILE)).expect("ledger");
    assert_eq!(ledger.lines().count(), 1, "{ledger}");
    assert_eq!(
        std::fs::read_to_string(lab.ws.join("note.txt")).expect("r"),
        "new"
    );
    // The loser was refused: the token was spent, the run was busy, or (when it came after the
    // winner ended, or waited out the winner's lock) nothing waits for approval any more or the
    // run is complete.
    let refusals = texts
        .iter()
        .filter(|t| {
            t.contains("already used")
                || t.contains("being resumed by another process")
                || t.contains("no action waiting for approval")
                || t.contains("only runs that did not complete can be resumed")
        })
        .count();
    assert_eq!(refusals, 1, "exactly one process refused: {texts:#?}");
    // A third try after both ended changes nothing.
    let third = spawn().wait_with_output().expect("wait");
    assert!(!third.status.success(), "{}", out_text(&third));
    let ledger = std::fs::read_to_string(out.run_dir.join(LEDGER_FILE)).expect("ledger");
    assert_eq!(ledger.lines().count(), 1, "{ledger}");
    assert_eq!(
        lab.outside_state(),
        before,
        "something outside the workspace changed"
    );
}

// ---------------------------------------------------------------------------------------------
// 7. the audit chain: intact, damaged, not written by this key

fn intent(id: u64) -> AuditEvent {
    AuditEvent::Intent {
        action_id: id,
        cycle: 1,
        tool: "calculator".into(),
        args: json!({"expression": "1+1"}),
        fingerprint: "f".repeat(64),
        irreversible: false,
        approval: None,
        implicit: false,
        why: None,
    }
}

fn write_chain(dir: &Path, key: Option<ApprovalKey>, n: u64) {
    let mut log = ChainLog::create_with_key(dir, key).expect("create");
    for i in 0..n {
        log.record(intent(i + 1), true).expect("record");
    }
}

fn cut_to(dir: &Path, n: usize) {
    let p = dir.join(AUDIT_FILE);
    let text = std::fs::read_to_string(&p).expect("read");
    let kept: String = text.lines().take(n).map(|l| format!("{l}\n")).collect();
    std::fs::write(&p, kept).expect("write");
}

fn rewrite_manifest(dir: &Path, f: impl FnOnce(&mut serde_json::Map<String, Value>)) {
    let p = dir.join(MANIFEST_FILE);
    let mut v: Value =
        serde_json::from_str(&std::fs::read_to_string(&p).expect("read")).expect("json");
    f(v.as_object_mut().expect("object"));
    std::fs::write(&p, serde_json::to_string_pretty(&v).expect("ser")).expect("write");
}

fn head_after(dir: &Path, n: usize) -> String {
    let text = std::fs::read_to_string(dir.join(AUDIT_FILE)).expect("read");
    let line = text.lines().nth(n - 1).expect("line");
    let v: Value = serde_json::from_str(line).expect("json");
    v["hash"].as_str().expect("hash").to_string()
}

#[test]
fn a_forged_or_cut_audit_chain_is_not_written_by_this_key() {
    let lab = Lab::new();
    let key = lab.key();
    // (name, how to make it, expected exit code of `boyd audit verify`)
    type Make = Box<dyn Fn(&Path, &ApprovalKey)>;
    let cases: Vec<(&str, Make, i32)> = vec![
        (
            "forged from scratch, unsigned",
            Box::new(|d, _| write_chain(d, None, 8)),
            3,
        ),
        (
            "forged from scratch under another key",
            Box::new(|d, _| write_chain(d, Some(ApprovalKey::from_bytes([5; 32])), 8)),
            3,
        ),
        (
            "cut short, manifest rewritten (old signature kept)",
            Box::new(|d, k| {
                write_chain(d, Some(k.clone()), 8);
                cut_to(d, 5);
                let h = head_after(d, 5);
                rewrite_manifest(d, |m| {
                    m["records"] = json!(5);
                    m["head"] = json!(h);
                });
            }),
            3,
        ),
        (
            "cut short, manifest rewritten without a signature",
            Box::new(|d, k| {
                write_chain(d, Some(k.clone()), 8);
                cut_to(d, 5);
                let h = head_after(d, 5);
                rewrite_manifest(d, |m| {
                    m["records"] = json!(5);
                    m["head"] = json!(h);
                    m.remove("mac");
                });
            }),
            3,
        ),
        (
            "every record rewritten, manifest re-headed",
            Box::new(|d, k| {
                write_chain(d, Some(k.clone()), 8);
                let mac = std::fs::read_to_string(d.join(MANIFEST_FILE)).expect("m");
                std::fs::remove_file(d.join(AUDIT_FILE)).expect("rm");
                let mut log = ChainLog::create_with_key(d, None).expect("create");
                for i in 0..8 {
                    log.record(intent(100 + i), true).expect("record");
                }
                drop(log);
                let old: Value = serde_json::from_str(&mac).expect("json");
                rewrite_manifest(d, |m| {
                    m.insert("mac".into(), old["mac"].clone());
                });
            }),
            3,
        ),
        (
            "cut short, manifest untouched",
            Box::new(|d, k| {
                write_chain(d, Some(k.clone()), 8);
                cut_to(d, 5);
            }),
            1,
        ),
        (
            "manifest deleted",
            Box::new(|d, k| {
                write_chain(d, Some(k.clone()), 8);
                std::fs::remove_file(d.join(MANIFEST_FILE)).expect("rm");
            }),
            1,
        ),
    ];
    assert_eq!(cases.len(), 7, "audit cases");
    let before = lab.outside_state();
    let mut refused = 0;
    for (name, make, code) in &cases {
        let d = tempfile::tempdir().expect("tempdir");
        make(d.path(), &key);
        let r = verify_with_key(d.path(), Some(&key)).expect("verify");
        let intact = r.ok() && r.signature == SignatureCheck::Valid;
        assert!(!intact, "{name}: reported intact: {r:?}");
        let out = lab
            .boyd()
            .args(["audit", "verify", &d.path().to_string_lossy()])
            .output()
            .expect("boyd audit verify");
        let text = out_text(&out);
        assert_eq!(out.status.code(), Some(*code), "{name}: {text}");
        let word = if *code == 3 {
            "NOT WRITTEN BY THIS KEY"
        } else {
            "DAMAGED"
        };
        assert!(text.starts_with(word), "{name}: {text}");
        // A forged chain cannot be continued either.
        if *code == 3 {
            let e = ChainLog::reopen_with_key(d.path(), Some(key.clone()));
            assert!(
                matches!(e, Err(AuditError::NotThisKey { .. })),
                "{name}: reopened"
            );
        }
        refused += 1;
    }
    assert_eq!(refused, 7);
    // The control: a chain written under the key is intact.
    let d = tempfile::tempdir().expect("tempdir");
    write_chain(d.path(), Some(key.clone()), 8);
    let out = lab
        .boyd()
        .args(["audit", "verify", &d.path().to_string_lossy()])
        .output()
        .expect("boyd audit verify");
    assert_eq!(out.status.code(), Some(0), "{}", out_text(&out));
    assert!(out_text(&out).contains("intact"));
    assert_eq!(lab.outside_state(), before, "something outside changed");
}

// ---------------------------------------------------------------------------------------------
// 8. a file named like a catalog entry does not shadow it

#[test]
fn a_file_named_like_a_catalog_model_is_never_loaded_in_its_place() {
    use boyd::catalog::{is_path_spec, AGENT_DEFAULT_MODEL, DEFAULT_MODEL};
    let lab = Lab::new();
    let cwd = lab.ws.clone();
    let names = [DEFAULT_MODEL, AGENT_DEFAULT_MODEL];
    assert_eq!(names.len(), 2, "shadowing cases");
    let mut refused = 0;
    for name in names {
        assert!(!is_path_spec(name));
        let shadow = cwd.join(name);
        std::fs::write(&shadow, b"GGUF shadow: not the catalog's file").expect("shadow");
        let before = lab.outside_state();
        let out = lab
            .boyd()
            .current_dir(&cwd)
            .args(["--model", name, "generate", "hi"])
            .output()
            .expect("boyd generate");
        let text = out_text(&out);
        // The name went to the catalog and store (which are empty and offline here), never to
        // the file in the current directory.
        assert!(!out.status.success(), "{name}: {text}");
        assert!(
            !text.contains("shadow") && !text.contains(&*shadow.to_string_lossy()),
            "{name}: the shadow file was read: {text}"
        );
        assert!(text.contains(name), "{name}: {text}");
        assert_eq!(
            std::fs::read(&shadow).expect("r"),
            b"GGUF shadow: not the catalog's file"
        );
        assert_eq!(lab.outside_state(), before);
        refused += 1;
        // The control: asked for as a path, it is read as one.
        assert!(is_path_spec(&format!("./{name}")));
    }
    assert_eq!(refused, 2);
}

// ---------------------------------------------------------------------------------------------
// 9. a chat template that would hang or flood memory

#[test]
fn a_chat_template_that_would_hang_or_flood_is_stopped_naming_the_model() {
    use boyd::lm::{ChatMessage, Role};
    let cases: Vec<(&str, &str)> = vec![
        (
            "nested loops",
            "{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}",
        ),
        (
            "loop per message, forever",
            "{% for m in messages %}{% for a in range(100000) %}{% for b in range(100000) %}{{ '' }}{% endfor %}{% endfor %}{% endfor %}",
        ),
        (
            "printing without end",
            "{% for a in range(100000) %}{{ 'x' * 100000 }}{% endfor %}",
        ),
        (
            "recursive macro",
            "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}",
        ),
        (
            "recursive loop",
            "{% for x in range(100000) recursive %}{{ loop(range(100000)) }}{% endfor %}",
        ),
    ];
    assert_eq!(cases.len(), 5, "template cases");
    let mut refused = 0;
    for (name, src) in cases {
        let msgs = [ChatMessage::new(Role::User, "hi")];
        let mut t = ChatTemplate::new(src, "", "").expect("compiles");
        t.set_origin("/models/evil.gguf");
        let t0 = Instant::now();
        let r = within(60, name, move || t.render(&msgs, true));
        let took = t0.elapsed();
        let err = match r {
            Err(e) => e,
            Ok(s) => panic!("{name}: rendered {} bytes", s.len()),
        };
        assert!(took < Duration::from_secs(30), "{name}: took {took:?}");
        let limit = matches!(
            err,
            ChatTemplateError::OutOfFuel { .. } | ChatTemplateError::OutputTooLarge { .. }
        );
        assert!(
            limit || matches!(err, ChatTemplateError::Render { .. }),
            "{name}: {err:?}"
        );
        assert!(err.to_string().contains("evil.gguf"), "{name}: {err}");
        refused += 1;
    }
    assert_eq!(refused, 5);
}
