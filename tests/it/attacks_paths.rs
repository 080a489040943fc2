//! Attacks on the paths tools open (issue 40, attacks 4 and 5): `size_model`'s `config` as a
//! FIFO or a multi-gigabyte sparse file, an argument the advertised schema hides, and boyd's
//! own config and home directories (the approval key) inside the workspace. Each case goes
//! through the tool (or the `boyd` binary) as the agent loops would, and asserts the typed
//! refusal; a call that could block runs on a thread with a generous bound, so old code fails
//! instead of hanging the suite.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use boyd::agent::approval::{ApprovalKey, KEY_FILE};
use boyd::agent::ooda::memory::{store_path, MemoryStore};
use boyd::agent::ooda::observe::{file_hash, Sensor, WorkspaceSensor};
use boyd::agent::ooda::writers::{DeleteFile, WriteFile};
use boyd::agent::tools::choices::WorkspacePaths;
use boyd::agent::tools::{
    check_args, ListDir, Private, ReadFile, Sandbox, SearchText, SizeModel, Tool, ToolContext,
    ToolError, ToolErrorKind, WithSchema,
};
use boyd::lm::CancelToken;

/// A Hugging Face config.json `size_model` accepts.
const CONFIG: &str = r#"{"model_type": "llama", "hidden_size": 2048, "intermediate_size": 8192,
    "num_attention_heads": 32, "num_hidden_layers": 16, "num_key_value_heads": 8,
    "max_position_embeddings": 131072, "tie_word_embeddings": true, "vocab_size": 128256}"#;

/// Text that only boyd's own files hold: no tool output may show it.
const CFG_SECRET: &str = "zebracfg secret policy line";
const HOME_SECRET: &str = "zebrahome remembered secret";

fn ctx(ws: Sandbox) -> ToolContext {
    ToolContext {
        blob_dir: ws.root().join(".blobs"),
        workspace: Some(ws),
        cancel: CancelToken::new(),
        task: None,
        observed: Vec::new(),
    }
}

fn mkfifo(p: &Path) {
    let st = Command::new("mkfifo").arg(p).status().expect("mkfifo");
    assert!(st.success(), "mkfifo {}", p.display());
}

/// Run `f` on a thread and fail the test (instead of hanging) when it does not return: a
/// liveness bound, not a speed target.
fn within<T: Send + 'static>(secs: u64, what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(Duration::from_secs(secs))
        .unwrap_or_else(|_| panic!("{what}: blocked for more than {secs} s"))
}

fn size_args(config: &str) -> Value {
    json!({"model": "llama-3.1-8b", "hw": "rtx-4090", "quant": "Q4_K_M", "config": config})
}

fn expect_err(r: Result<String, ToolError>, what: &str) -> ToolError {
    match r {
        Ok(out) => panic!("{what}: expected a refusal, got:\n{out}"),
        Err(e) => e,
    }
}

// ---------------------------------------------------------------------------------------------
// attack 4: size_model's config

#[test]
fn a_fifo_as_size_models_config_is_refused_without_blocking() {
    let t = tempfile::tempdir().expect("tempdir");
    mkfifo(&t.path().join("config.json"));
    std::fs::create_dir(t.path().join("d")).expect("mkdir");
    #[cfg(unix)]
    std::os::unix::fs::symlink("../config.json", t.path().join("d/link.json")).expect("symlink");
    let ws = Sandbox::new(t.path()).expect("sandbox");
    for path in ["config.json", "d/link.json"] {
        let c = ctx(ws.clone());
        let args = size_args(path);
        let r = within(60, "size_model on a FIFO", move || {
            SizeModel::extended().call(args, &c)
        });
        let e = expect_err(r, path);
        assert_eq!(e.kind, ToolErrorKind::InvalidArgs, "{path}: {}", e.message);
        assert!(
            e.message.contains("not a regular file (a FIFO)"),
            "{path}: {}",
            e.message
        );
    }
    // The file sensor that re-hashes a file the run read does not block on one either.
    let r = within(60, "hashing a FIFO", move || file_hash(&ws, "config.json"));
    assert_eq!(r, None);
}

#[test]
fn a_sparse_file_of_gigabytes_as_config_is_refused_from_its_size() {
    let t = tempfile::tempdir().expect("tempdir");
    let big = std::fs::File::create(t.path().join("config.json")).expect("create");
    // Six GB that take no disk: read whole, they would take six GB of boyd's memory.
    big.set_len(6 << 30).expect("set_len");
    drop(big);
    let c = ctx(Sandbox::new(t.path()).expect("sandbox"));
    let r = within(60, "size_model on a sparse file", move || {
        SizeModel::extended().call(size_args("config.json"), &c)
    });
    let e = expect_err(r, "sparse config");
    assert_eq!(e.kind, ToolErrorKind::Failed, "{}", e.message);
    assert!(
        e.message
            .contains(&format!("is {} bytes, more than the", 6u64 << 30)),
        "{}",
        e.message
    );
}

/// `boyd size` reads a config.json the user names with the same bounds.
#[test]
fn boyd_size_refuses_a_fifo_and_a_sparse_config_without_reading_them() {
    let t = tempfile::tempdir().expect("tempdir");
    let fifo = t.path().join("fifo.json");
    mkfifo(&fifo);
    let sparse = t.path().join("sparse.json");
    std::fs::File::create(&sparse)
        .and_then(|f| f.set_len(6 << 30))
        .expect("sparse");
    for (file, expect) in [
        (&fifo, "is not a regular file"),
        (
            &sparse,
            "more than the 4194304 bytes a config.json may have",
        ),
    ] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_boyd"))
            .args(["size"])
            .arg(file)
            .args(["--quant", "Q4_K_M", "--hw", "rtx-4090"])
            .env("BOYD_HOME", t.path().join("home"))
            .env("HF_HUB_OFFLINE", "1")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("boyd size");
        let start = Instant::now();
        // Liveness bound: a read that blocks on the FIFO never ends.
        while child.try_wait().expect("wait").is_none() {
            if start.elapsed() > Duration::from_secs(120) {
                let _ = child.kill();
                panic!("boyd size {} did not return", file.display());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let out = child.wait_with_output().expect("output");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{err}");
        assert!(err.contains(expect), "{}: {err}", file.display());
    }
}

#[test]
fn an_argument_the_schema_hides_is_refused_by_name() {
    let t = tempfile::tempdir().expect("tempdir");
    std::fs::write(t.path().join("config.json"), CONFIG).expect("config");
    let c = ctx(Sandbox::new(t.path()).expect("sandbox"));
    // Offered: the config is read and sized.
    let out = SizeModel::extended()
        .call(size_args("config.json"), &c)
        .expect("extended size_model sizes a config.json");
    assert!(out.starts_with("summary: config.json Q4_K_M"), "{out}");
    // Hidden by the default schema (the agent loops' one): refused, naming it and the offered.
    let hidden = SizeModel::default();
    assert!(hidden.args_schema()["properties"].get("config").is_none());
    let e = expect_err(hidden.call(size_args("config.json"), &c), "hidden config");
    assert_eq!(e.kind, ToolErrorKind::InvalidArgs);
    assert!(
        e.message.starts_with(
            "size_model does not take the argument \"config\"; the arguments it takes are: "
        ),
        "{}",
        e.message
    );
    for offered in ["model", "hw", "quant", "ctx", "kv_type"] {
        assert!(e.message.contains(offered), "{}", e.message);
    }
    // The check the loops run before every call says the same.
    assert_eq!(
        check_args(&hidden, &size_args("config.json")).expect_err("hidden"),
        e
    );
    // A narrowed schema (what a loop shows a small model) steers; the tool's own schema is
    // the bound: a wrapper around the default tool refuses `config` too.
    let mut narrowed = hidden.args_schema();
    narrowed["properties"]
        .as_object_mut()
        .expect("properties")
        .remove("ctx");
    let wrapped = WithSchema::new(std::sync::Arc::new(SizeModel::default()), narrowed);
    let e = check_args(&wrapped, &size_args("config.json")).expect_err("wrapped");
    assert!(e.message.contains("\"config\""), "{}", e.message);
    assert!(e.message.contains("ctx"), "{}", e.message);
    // Old spellings a tool declares are not hidden arguments; anything else is.
    assert_eq!(
        check_args(&SearchText, &json!({"pattern": "x", "ignore_case": true})),
        Ok(())
    );
    let e = check_args(&ReadFile, &json!({"path": "a", "mode": "w"})).expect_err("mode");
    assert!(e.message.contains("\"mode\""), "{}", e.message);
}

// ---------------------------------------------------------------------------------------------
// attack 5: boyd's config and home inside the workspace

/// A workspace holding boyd's config directory (with the approval key and a policy) and
/// boyd's home (with a memory file), and the usual files.
struct Inside {
    _tmp: tempfile::TempDir,
    ws: PathBuf,
    cfg: PathBuf,
    home: PathBuf,
}

impl Inside {
    fn new() -> Self {
        let tmp = tempfile::tempdir().expect("tempdir");
        let ws = tmp.path().canonicalize().expect("canon").join("ws");
        let cfg = ws.join("dot-config/boyd");
        let home = ws.join("cache/boyd");
        std::fs::create_dir_all(&cfg).expect("cfg");
        std::fs::create_dir_all(home.join("memory")).expect("home");
        ApprovalKey::load_or_create(&cfg).expect("key");
        std::fs::write(cfg.join("policy.toml"), format!("# {CFG_SECRET}\n")).expect("policy");
        std::fs::write(home.join("memory/ws.json"), format!("{HOME_SECRET}\n")).expect("memory");
        std::fs::write(cfg.join("config.json"), CONFIG).expect("config");
        std::fs::write(ws.join("notes.txt"), "zebra notes of the user\n").expect("notes");
        Self {
            _tmp: tmp,
            ws,
            cfg,
            home,
        }
    }

    fn sandbox(&self) -> Sandbox {
        Sandbox::with_private(&self.ws, Private::none().with(&self.cfg).with(&self.home))
            .expect("sandbox")
    }
}

/// Every way a tool could show or change boyd's own files, checked on `ws` (which hides
/// `cfg` and `home`, both inside its root).
fn assert_hidden(ws: &Sandbox, cfg: &Path, home: &Path) {
    let root = ws.root().to_path_buf();
    let rel = |p: &Path| {
        p.strip_prefix(&root)
            .expect("inside")
            .to_string_lossy()
            .into_owned()
    };
    let (cfg_rel, home_rel) = (rel(cfg), rel(home));
    let key_rel = format!("{cfg_rel}/{KEY_FILE}");
    #[cfg(unix)]
    {
        // A link to the key, a link to the directory, and a hard link to the key.
        let _ = std::fs::remove_file(root.join("key-link"));
        let _ = std::fs::remove_file(root.join("cfg-link"));
        let _ = std::fs::remove_file(root.join("key-copy"));
        std::os::unix::fs::symlink(cfg.join(KEY_FILE), root.join("key-link")).expect("link");
        std::os::unix::fs::symlink(cfg, root.join("cfg-link")).expect("link");
        std::fs::hard_link(cfg.join(KEY_FILE), root.join("key-copy")).expect("hard link");
    }
    let c = ctx(ws.clone());
    let denied = |r: Result<String, ToolError>, what: &str| {
        let e = expect_err(r, what);
        assert_eq!(
            e.kind,
            ToolErrorKind::PermissionDenied,
            "{what}: {}",
            e.message
        );
    };
    // list_dir: the directories are not listed, nor counted, and cannot be listed.
    for args in [json!({}), json!({"recursive": true})] {
        let out = ListDir.call(args, &c).expect("list");
        for hidden in [KEY_FILE, "boyd/", "policy.toml", "ws.json", "memory"] {
            assert!(!out.contains(hidden), "list_dir shows {hidden}:\n{out}");
        }
        assert!(out.contains("notes.txt"), "{out}");
    }
    denied(ListDir.call(json!({"path": cfg_rel}), &c), "list_dir cfg");
    denied(ListDir.call(json!({"path": home_rel}), &c), "list_dir home");
    // read_file: the key by its path, through a link to the directory, and its hard link.
    denied(ReadFile.call(json!({"path": key_rel}), &c), "read key");
    denied(
        ReadFile.call(json!({"path": format!("{cfg_rel}/policy.toml")}), &c),
        "read policy",
    );
    #[cfg(unix)]
    {
        denied(
            ReadFile.call(json!({"path": format!("cfg-link/{KEY_FILE}")}), &c),
            "read key through a linked directory",
        );
        denied(
            ReadFile.call(json!({"path": "key-copy"}), &c),
            "read hard link",
        );
        assert!(ReadFile.call(json!({"path": "key-link"}), &c).is_err());
    }
    // search_text: nothing of theirs is found, from the root or aimed at them.
    for q in ["zebracfg", "zebrahome", "secret"] {
        let out = SearchText.call(json!({"query": q}), &c).expect("search");
        assert!(
            !out.contains(CFG_SECRET) && !out.contains(HOME_SECRET),
            "search {q}:\n{out}"
        );
    }
    denied(
        SearchText.call(json!({"query": "zebra", "path": cfg_rel}), &c),
        "search cfg",
    );
    // size_model's config.
    denied(
        SizeModel::extended().call(size_args(&format!("{cfg_rel}/config.json")), &c),
        "size config",
    );
    // write_file and delete_file.
    denied(
        WriteFile.call(
            json!({"path": format!("{cfg_rel}/policy.toml"), "content": "x"}),
            &c,
        ),
        "write policy",
    );
    denied(
        WriteFile.call(
            json!({"path": format!("{home_rel}/memory/new.json"), "content": "x"}),
            &c,
        ),
        "write home",
    );
    denied(DeleteFile.call(json!({"path": key_rel}), &c), "delete key");
    assert!(cfg.join(KEY_FILE).is_file());
    assert_eq!(
        std::fs::read_to_string(cfg.join("policy.toml")).expect("policy"),
        format!("# {CFG_SECRET}\n")
    );
    // The path choices offered to the model leave them out too (they read the environment;
    // the child test below runs with it pointing here).
    #[cfg(unix)]
    {
        let _ = std::fs::remove_file(root.join("key-link"));
        let _ = std::fs::remove_file(root.join("cfg-link"));
        let _ = std::fs::remove_file(root.join("key-copy"));
    }
}

#[test]
fn boyds_config_and_home_inside_the_workspace_are_hidden_from_every_tool() {
    let lab = Inside::new();
    assert_hidden(&lab.sandbox(), &lab.cfg, &lab.home);
    // The workspace is the config directory itself: nothing in it is reachable.
    let ws = Sandbox::with_private(&lab.cfg, Private::none().with(&lab.cfg)).expect("sandbox");
    let c = ctx(ws);
    let e = expect_err(ListDir.call(json!({}), &c), "list the config dir");
    assert_eq!(e.kind, ToolErrorKind::PermissionDenied);
    assert!(
        e.message.contains("boyd's own configuration or home"),
        "{}",
        e.message
    );
    let e = expect_err(ReadFile.call(json!({"path": KEY_FILE}), &c), "read key");
    assert_eq!(e.kind, ToolErrorKind::PermissionDenied);
}

/// The name of the child test the next test runs in a process of its own.
const CHILD: &str = "attacks_paths::hidden_by_the_environment_child";
/// Set (to the workspace) in the child's environment.
const CHILD_ENV: &str = "BOYD_ATTACKS_PATHS_WS";

/// The same attacks with the protection boyd wires by default: `BOYD_CONFIG_DIR` and
/// `BOYD_HOME` point inside the workspace and `Sandbox::new` finds them. Environment variables
/// are process-wide, so this runs the child test below in a process of its own (as the other
/// tests pass them to the `boyd` binary) instead of changing this process's environment.
#[test]
fn boyds_dirs_named_by_the_environment_are_hidden_wherever_they_sit() {
    let lab = Inside::new();
    let out = Command::new(std::env::current_exe().expect("test binary"))
        .args(["--exact", CHILD, "--include-ignored", "--test-threads", "1"])
        .env(CHILD_ENV, &lab.ws)
        .env("BOYD_CONFIG_DIR", &lab.cfg)
        .env("BOYD_HOME", &lab.home)
        .output()
        .expect("run the child test");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{text}");
    assert!(text.contains("1 passed"), "{text}");
}

/// Run by the test above with the environment set; ignored (and a no-op) otherwise.
#[test]
#[ignore = "run by boyds_dirs_named_by_the_environment_are_hidden_wherever_they_sit"]
fn hidden_by_the_environment_child() {
    let Some(ws) = std::env::var_os(CHILD_ENV).map(PathBuf::from) else {
        return;
    };
    let cfg = PathBuf::from(std::env::var_os("BOYD_CONFIG_DIR").expect("cfg"));
    let home = PathBuf::from(std::env::var_os("BOYD_HOME").expect("home"));
    assert_hidden(&Sandbox::new(&ws).expect("sandbox"), &cfg, &home);
    // The path choices offered to the model leave them out too.
    let paths = WorkspacePaths::scan(&ws).expect("scan");
    assert_eq!(paths.files, vec!["notes.txt".to_string()], "{paths:?}");
    // So does the workspace sensor: its count and its changed files never name them.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let sensor = WorkspaceSensor::new(&ws);
    let first = rt.block_on(sensor.read()).expect("reading");
    std::fs::write(home.join("memory/ws.json"), "changed\n").expect("change memory");
    std::fs::write(ws.join("notes.txt"), "changed notes\n").expect("change notes");
    let second = rt.block_on(sensor.read()).expect("reading");
    let files: Vec<&str> = first
        .iter()
        .chain(&second)
        .filter(|s| s.key == "workspace.files")
        .map(|s| s.value.as_str())
        .collect();
    assert_eq!(files, ["1", "1"], "{first:?} {second:?}");
    let changed: Vec<&str> = second
        .iter()
        .filter(|s| s.key == "workspace.changed")
        .map(|s| s.value.as_str())
        .collect();
    assert_eq!(changed, ["notes.txt"], "{second:?}");
}

#[test]
fn a_memory_file_that_is_a_fifo_is_refused_without_blocking() {
    let t = tempfile::tempdir().expect("tempdir");
    let path = store_path(t.path(), None);
    std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    mkfifo(&path);
    let home = t.path().to_path_buf();
    let r = within(60, "opening a FIFO memory file", move || {
        MemoryStore::open(&home, None).map(|_| ())
    });
    let e = r.expect_err("a FIFO is no memory file");
    assert!(e.to_string().contains("not valid"), "{e}");
}
