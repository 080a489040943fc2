//! Fuzz the shell tool's policy, with the sandbox as the judge. The input is one command line;
//! whatever `ShellPolicy::check` accepts (with a policy that also lists writers, so more gets
//! through) is run for real by the `shell` tool, in the kernel sandbox. Invariant: nothing
//! outside the workspace is created, changed or removed, `.boyd/` is untouched, the secret
//! outside never appears in the output, and no payload marker (`PWNED*`) appears anywhere.
//!
//! Needs the `boyd` binary as the sandbox launcher: build it first (`cargo build --release` at
//! the repository root) or set `BOYD_SANDBOX_LAUNCHER`.
#![no_main]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

use boyd::agent::tools::shell::ShellPolicy;
use boyd::agent::tools::{Sandbox, Shell, Tool, ToolContext};
use boyd::lm::CancelToken;
use libfuzzer_sys::fuzz_target;

const SECRET: &str = "FUZZ-SECRET-91c2";

struct Fixture {
    _dir: tempfile::TempDir,
    ws: PathBuf,
    outside: PathBuf,
    shell: Shell,
    ctx: ToolContext,
    guarded: BTreeMap<PathBuf, Vec<u8>>,
}

fn tree(dir: &Path, out: &mut BTreeMap<PathBuf, Vec<u8>>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let p = e.path();
        let Ok(m) = std::fs::symlink_metadata(&p) else {
            continue;
        };
        if m.file_type().is_symlink() {
            let t = std::fs::read_link(&p).unwrap_or_default();
            out.insert(p, t.into_os_string().into_encoded_bytes());
        } else if m.is_dir() {
            out.insert(p.clone(), b"<dir>".to_vec());
            tree(&p, out);
        } else {
            out.insert(p.clone(), std::fs::read(&p).unwrap_or_default());
        }
    }
}

fn guarded(ws: &Path, outside: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut m = BTreeMap::new();
    tree(outside, &mut m);
    tree(&ws.join(".boyd"), &mut m);
    m
}

fn fixture() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| {
        if std::env::var_os("BOYD_SANDBOX_LAUNCHER").is_none() {
            let built = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/release/boyd");
            if built.is_file() {
                std::env::set_var("BOYD_SANDBOX_LAUNCHER", built);
            }
        }
        let dir = tempfile::tempdir().expect("tempdir");
        let base = dir.path().canonicalize().expect("canon");
        let ws = base.join("ws");
        let outside = base.join("outside");
        std::fs::create_dir_all(ws.join(".boyd")).expect("mkdir");
        std::fs::create_dir_all(ws.join("sub")).expect("mkdir");
        std::fs::create_dir_all(&outside).expect("mkdir");
        std::fs::write(ws.join("notes.txt"), "b\na\nc\n").expect("write");
        std::fs::write(ws.join("sub/inner.txt"), "inner\n").expect("write");
        std::fs::write(ws.join(".boyd/policy.toml"), "[tiers]\n").expect("write");
        std::fs::write(outside.join("secret.txt"), SECRET).expect("write");
        let _ = std::os::unix::fs::symlink(&outside, ws.join("out"));
        let _ = std::os::unix::fs::symlink(outside.join("secret.txt"), ws.join("s"));
        // The defaults plus writers, so that the sandbox's write rules are exercised too.
        let mut specs: Vec<String> = boyd::agent::tools::shell::DEFAULT_RULES
            .iter()
            .map(|s| s.to_string())
            .collect();
        specs.extend(
            ["tee:-a", "touch:-c,-d=", "cp:-r,-f", "mv:-f", "rm:-r,-f", "mkdir:-p", "ln:-s,-f"]
                .map(String::from),
        );
        let mut policy = ShellPolicy::from_specs(&specs).expect("policy");
        policy.timeout = Duration::from_secs(2);
        let ctx = ToolContext {
            workspace: Some(Sandbox::new(&ws).expect("sandbox")),
            blob_dir: base.join("blobs"),
            cancel: CancelToken::new(),
        };
        let guarded = guarded(&ws, &outside);
        Fixture {
            _dir: dir,
            ws,
            outside,
            shell: Shell::new(policy),
            ctx,
            guarded,
        }
    })
}

fuzz_target!(|data: &[u8]| {
    let Ok(cmd) = std::str::from_utf8(data) else {
        return;
    };
    if cmd.len() > 256 {
        return;
    }
    let f = fixture();
    if f.shell.policy().check(cmd).is_err() {
        return;
    }
    let text = match f.shell.call(serde_json::json!({ "command": cmd }), &f.ctx) {
        Ok(t) => t,
        Err(e) => e.message,
    };
    assert!(!text.contains(SECRET), "{cmd:?} read outside: {text}");
    assert_eq!(
        guarded(&f.ws, &f.outside),
        f.guarded,
        "{cmd:?} changed something outside the workspace or in .boyd"
    );
    let mut all = BTreeMap::new();
    tree(&f.ws, &mut all);
    tree(&f.outside, &mut all);
    assert!(
        !all.keys().any(|p| p
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with("PWNED"))),
        "{cmd:?} ran a payload"
    );
});
