//! Attacks on the shell tool, each through the real code path: `Shell::call` (policy, then the
//! sandboxed child) or, to show the kernel holds when the policy is bypassed, `Jail::run` with
//! the attacker's argv. Every case asserts the refusal, that nothing outside the workspace (nor
//! `.boyd/`) changed, that no secret from outside reached the output, and that no payload ran
//! (payloads create `PWNED*` marker files, inside the workspace where they could).
//!
//! The fixture: `base/ws` is the workspace (`notes.txt`, `.boyd/policy.toml`, symlinks
//! `link -> ../outside` and `key_link -> ../outside/approval.key`); `base/outside` holds the
//! stand-in for boyd's approval key and a canary file.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::json;

use boyd::agent::tools::jail::{self, Jail, JailError};
use boyd::agent::tools::shell::{CappedOutput, PolicyError, ShellPolicy};
use boyd::agent::tools::{Sandbox, Shell, Tool, ToolContext, ToolError, ToolErrorKind};
use boyd::lm::CancelToken;

const KEY: &str = "KEY-SECRET-7f3a";
const CANARY: &str = "canary-unchanged";
const POLICY: &str = "[tiers]\nwrite_file = \"token\"\n";

struct Fx {
    _dir: tempfile::TempDir,
    ws: PathBuf,
    outside: PathBuf,
    ctx: ToolContext,
}

fn fx() -> Fx {
    jail::probe().expect("these tests need Landlock (Linux 5.13+) and user namespaces");
    let dir = tempfile::tempdir().expect("tempdir");
    let base = dir.path().canonicalize().expect("canon");
    let ws = base.join("ws");
    let outside = base.join("outside");
    std::fs::create_dir_all(ws.join(".boyd")).expect("mkdir");
    std::fs::create_dir_all(&outside).expect("mkdir");
    std::fs::write(ws.join("notes.txt"), "alpha\nbeta\nalpha\n").expect("w");
    std::fs::write(ws.join(".boyd/policy.toml"), POLICY).expect("w");
    std::fs::write(outside.join("approval.key"), KEY).expect("w");
    std::fs::write(outside.join("canary.txt"), CANARY).expect("w");
    std::os::unix::fs::symlink("../outside", ws.join("link")).expect("ln");
    std::os::unix::fs::symlink("../outside/approval.key", ws.join("key_link")).expect("ln");
    let ctx = ToolContext {
        workspace: Some(Sandbox::new(&ws).expect("sandbox")),
        blob_dir: base.join("blobs"),
        cancel: CancelToken::new(),
        task: None,
        observed: Vec::new(),
    };
    Fx {
        _dir: dir,
        ws,
        outside,
        ctx,
    }
}

/// Every file and symlink under `dir` (not following symlinks) with its content or target.
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

impl Fx {
    /// What must never change: everything outside the workspace, and `.boyd/`.
    fn guarded(&self) -> BTreeMap<PathBuf, Vec<u8>> {
        let mut m = BTreeMap::new();
        tree(&self.outside, &mut m);
        tree(&self.ws.join(".boyd"), &mut m);
        m
    }

    fn markers(&self) -> Vec<PathBuf> {
        let mut m = BTreeMap::new();
        tree(&self.ws, &mut m);
        tree(&self.outside, &mut m);
        m.into_keys()
            .filter(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with("PWNED"))
            })
            .collect()
    }

    fn shell(&self, policy: ShellPolicy, cmd: &str) -> Result<String, ToolError> {
        Shell::new(policy).call(json!({ "command": cmd }), &self.ctx)
    }

    fn jail(&self, writable: bool) -> Jail {
        Jail::new(&self.ws, writable).expect("jail")
    }

    /// The sandboxed runner alone, no policy.
    fn direct(
        &self,
        writable: bool,
        program: &str,
        args: &[String],
    ) -> Result<CappedOutput, ToolError> {
        self.jail(writable).run(
            program,
            args,
            Duration::from_secs(10),
            64 * 1024,
            &CancelToken::new(),
        )
    }

    /// Run one attack and check the invariants; `refused` says whether the outcome is a
    /// refusal (an error, or a non-zero exit status for the direct runner).
    fn attack(&self, case: &Case) {
        let before = self.guarded();
        let text = match case {
            Case::Policy(policy, cmd, kind) => match self.shell(policy.clone(), cmd) {
                Ok(out) => panic!("{cmd:?} was allowed: {out}"),
                Err(e) => {
                    if let Some(k) = kind {
                        assert_eq!(e.kind, *k, "{cmd:?}: {e}");
                    }
                    e.message
                }
            },
            Case::Direct(writable, prog, args) => match self.direct(*writable, prog, args) {
                Ok(out) => {
                    // find reports a refused -exec and still exits 0: then the kernel's
                    // refusal must be on stderr.
                    let denied = ["Permission denied", "Operation not permitted"]
                        .iter()
                        .any(|m| out.stderr.contains(m));
                    assert!(
                        out.status != Some(0) || denied,
                        "{prog} {args:?} succeeded in the sandbox: {out:?}"
                    );
                    format!("{}{}", out.stdout, out.stderr)
                }
                Err(e) => e.message,
            },
        };
        assert!(!text.contains(KEY), "{case:?} leaked the key: {text}");
        assert!(!text.contains(CANARY), "{case:?} leaked the canary: {text}");
        assert!(
            !text.contains("write_file"),
            "{case:?} leaked .boyd/policy.toml: {text}"
        );
        assert_eq!(self.guarded(), before, "{case:?} changed a guarded file");
        assert_eq!(
            self.markers(),
            Vec::<PathBuf>::new(),
            "{case:?} ran its payload"
        );
    }
}

#[derive(Debug)]
enum Case {
    /// Through `Shell::call` with this policy; the expected error kind when it is the policy's.
    Policy(ShellPolicy, String, Option<ToolErrorKind>),
    /// `Jail::run(program, args)` with the workspace writable or not: the kernel alone.
    Direct(bool, String, Vec<String>),
}

fn pol(cmd: &str) -> Case {
    Case::Policy(
        ShellPolicy::default(),
        cmd.to_string(),
        Some(ToolErrorKind::PermissionDenied),
    )
}

/// Through the policy, which lets it pass; the sandbox must refuse.
fn kern(cmd: &str) -> Case {
    Case::Policy(ShellPolicy::default(), cmd.to_string(), None)
}

fn direct(writable: bool, prog: &str, args: &[&str]) -> Case {
    Case::Direct(
        writable,
        prog.to_string(),
        args.iter().map(|s| s.to_string()).collect(),
    )
}

fn run_class(f: &Fx, class: &str, cases: &[Case], expected: usize) {
    assert_eq!(cases.len(), expected, "{class}: case count");
    for c in cases {
        f.attack(c);
    }
}

// ---------------------------------------------------------------------------------------------
// 1. Options that run other programs.

#[test]
fn attack_options_that_run_programs_are_refused_and_nothing_runs() {
    let f = fx();
    let o = f.outside.display();
    let cases = vec![
        pol("find . -exec touch PWNED_find {} +"),
        pol("find . -execdir touch PWNED_find {} +"),
        pol("find . -ok touch PWNED_find {} +"),
        pol("find . -okdir touch PWNED_find {} +"),
        pol("find . -fprint PWNED_find"),
        pol("find . -delete"),
        pol("sort --compress-program=touch notes.txt"),
        pol("sort --compress-prog=touch notes.txt"),
        // the kernel alone: the program may start, but nothing else may be executed
        direct(
            true,
            "find",
            &[".", "-exec", "/usr/bin/touch", "PWNED_exec", ";"],
        ),
        direct(
            true,
            "find",
            &[".", "-execdir", "touch", "PWNED_execdir", ";"],
        ),
        direct(
            true,
            "find",
            &[".", "-exec", "/bin/sh", "-c", "touch PWNED_sh", ";"],
        ),
        direct(true, "bash", &["-c", "/usr/bin/touch PWNED_bash"]),
        direct(
            true,
            "bash",
            &["-c", &format!("/usr/bin/cp {o}/approval.key PWNED_cp")],
        ),
    ];
    run_class(&f, "options that run programs", &cases, 13);
}

// ---------------------------------------------------------------------------------------------
// 2. Option values glued to their flag.

#[test]
fn attack_glued_option_values_are_refused() {
    let f = fx();
    let o = f.outside.display();
    let cases = vec![
        pol(&format!("sort -o{o}/PWNED_sort notes.txt")),
        pol("sort -o../outside/PWNED_sort notes.txt"),
        pol("sort -rno../outside/PWNED_sort notes.txt"),
        pol(&format!("grep -f{o}/approval.key notes.txt")),
        pol("grep -rf../outside/approval.key ."),
        pol(&format!("grep -e{o} notes.txt")),
        pol("head -n1 -c../outside/approval.key notes.txt"),
        pol(&format!("du -X{o}/approval.key .")),
        pol("sort -T../outside notes.txt"),
        direct(
            false,
            "grep",
            &[&format!("-f{o}/approval.key"), "notes.txt"],
        ),
        direct(true, "sort", &[&format!("-o{o}/PWNED_sort"), "notes.txt"]),
    ];
    run_class(&f, "glued values", &cases, 11);
}

// ---------------------------------------------------------------------------------------------
// 3. Long-option abbreviations.

#[test]
fn attack_long_option_abbreviations_are_refused() {
    let f = fx();
    let cases = vec![
        pol("sort --out=PWNED_sort notes.txt"),
        pol("sort --outp=../outside/PWNED_sort notes.txt"),
        pol("sort --compress=touch notes.txt"),
        pol("grep --fil=key_link x notes.txt"),
        pol("grep --recurs alpha ."),
        pol("wc --files0=key_link"),
        pol("du --exclude-f=key_link ."),
        pol("tail --foll notes.txt"),
        pol("cat --show-al notes.txt"),
        direct(true, "sort", &["--out=../outside/PWNED_sort", "notes.txt"]),
    ];
    run_class(&f, "long-option abbreviations", &cases, 10);
}

// ---------------------------------------------------------------------------------------------
// 4. --shell-allow: per-program option lists, runners refused, writers not reversible.

#[test]
fn attack_shell_allow_entries_get_rules_and_runners_are_refused() {
    let runs = |spec: &str| {
        assert!(
            matches!(
                ShellPolicy::from_specs(&[spec]),
                Err(PolicyError::RunsPrograms { .. })
            ),
            "{spec}"
        )
    };
    let specs = [
        "sh",
        "bash",
        "env",
        "xargs",
        "python3",
        "find:-exec",
        "find:-execdir=",
        "sort:--compress-program=",
        "sort:--compress=",
        "tar:--to-command=",
    ];
    for s in specs {
        runs(s);
    }
    let bad = ["wc:l", "wc:-lw", "wc:--=", "/bin/wc", "../wc", "wc:-l=?"];
    for s in bad {
        assert!(
            matches!(
                ShellPolicy::from_specs(&[s]),
                Err(PolicyError::BadSpec { .. })
            ),
            "{s}"
        );
    }
    assert_eq!(specs.len() + bad.len(), 16);

    // A program the user adds gets no options, and is assumed to write.
    let tee = ShellPolicy::from_specs(&["tee"]).expect("tee");
    assert!(tee.can_write());
    assert!(!Shell::new(tee.clone()).risk().reversible);
    assert!(Shell::new(ShellPolicy::default()).risk().reversible);
    let wc = ShellPolicy::from_specs(&["wc:-l"]).expect("wc");
    assert!(
        !wc.can_write(),
        "a subset of wc's built-in options only reads"
    );
    assert!(ShellPolicy::from_specs(&["cat,wc"])
        .expect("list")
        .names()
        .eq(&["cat", "wc"]));

    let f = fx();
    let o = f.outside.display();
    let cases = vec![
        Case::Policy(
            tee.clone(),
            "tee -a PWNED_tee".into(),
            Some(ToolErrorKind::PermissionDenied),
        ),
        Case::Policy(
            tee.clone(),
            "tee ../outside/PWNED_tee".into(),
            Some(ToolErrorKind::PermissionDenied),
        ),
        Case::Policy(
            tee.clone(),
            format!("tee {o}/PWNED_tee"),
            Some(ToolErrorKind::PermissionDenied),
        ),
        // passes the policy (a relative path), refused by the kernel: link/ leads outside
        Case::Policy(tee.clone(), "tee link/PWNED_tee".into(), None),
        Case::Policy(
            wc.clone(),
            "wc -c notes.txt".into(),
            Some(ToolErrorKind::PermissionDenied),
        ),
        Case::Policy(
            wc,
            "wc --lines notes.txt".into(),
            Some(ToolErrorKind::PermissionDenied),
        ),
    ];
    run_class(&f, "--shell-allow", &cases, 6);
    // and a listed option works
    let ok = f
        .shell(
            ShellPolicy::from_specs(&["wc:-l"]).expect("wc"),
            "wc -l notes.txt",
        )
        .expect("wc -l");
    assert_eq!(ok.trim(), "3 notes.txt");
}

// ---------------------------------------------------------------------------------------------
// 5. Environment and PATH.

#[test]
fn attack_environment_and_path_are_not_inherited() {
    let f = fx();
    // The child sees exactly the fixed PATH and LC_ALL, whatever the parent has.
    let out = f
        .shell(
            ShellPolicy::from_specs(&["printenv"]).expect("printenv"),
            "printenv",
        )
        .expect("printenv");
    let mut vars: Vec<&str> = out.lines().collect();
    vars.sort_unstable();
    assert_eq!(vars, vec!["LC_ALL=C", "PATH=/usr/bin:/bin"]);
    // A workspace program named like an allowed one is never what runs.
    let fake = f.ws.join("cat");
    std::fs::write(&fake, "#!/bin/sh\ntouch PWNED_fake\n").expect("w");
    std::fs::create_dir_all(f.ws.join("bin")).expect("mkdir");
    std::fs::copy(&fake, f.ws.join("bin/cat")).expect("cp");
    std::fs::copy("/usr/bin/touch", f.ws.join("mytouch")).expect("cp");
    use std::os::unix::fs::PermissionsExt;
    for p in [fake.clone(), f.ws.join("bin/cat"), f.ws.join("mytouch")] {
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }
    assert_eq!(
        f.shell(ShellPolicy::default(), "cat notes.txt")
            .expect("cat")
            .lines()
            .count(),
        3
    );
    let ws = f.ws.display();
    let cases = vec![
        pol("./cat notes.txt"),
        pol("bin/cat notes.txt"),
        pol(&format!("{ws}/mytouch PWNED_t")),
        // the kernel refuses to execute anything in the workspace
        direct(true, &format!("{ws}/mytouch"), &["PWNED_mytouch"]),
        direct(true, "bash", &["-c", "./mytouch PWNED_mytouch2"]),
        direct(true, "bash", &["-c", "PATH=.:bin; cat notes.txt"]),
    ];
    run_class(&f, "environment and PATH", &cases, 6);
    // The launcher itself, given a workspace program (bypassing Jail::run's check), refuses.
    let out = f
        .jail(true)
        .command(&f.ws.join("mytouch"), &["PWNED_launcher".into()])
        .expect("command")
        .output()
        .expect("launcher");
    assert_eq!(out.status.code(), Some(jail::SETUP_FAILED), "{out:?}");
    // and a script is never started: its interpreter would need to be executable
    assert!(matches!(
        jail::elf_interpreter(&fake),
        Err(JailError::NotElf { .. })
    ));
    let e = f
        .direct(true, &fake.display().to_string(), &[])
        .expect_err("script");
    assert_eq!(e.kind, ToolErrorKind::PermissionDenied, "{e}");
    assert_eq!(f.markers(), Vec::<PathBuf>::new());
}

// ---------------------------------------------------------------------------------------------
// 6. Symlinks out of the workspace (cat, grep -R, …): the kernel refuses.

#[test]
fn attack_symlinks_out_of_the_workspace_are_refused_by_the_kernel() {
    let f = fx();
    let cases = vec![
        kern("cat link/approval.key"),
        kern("cat key_link"),
        kern("head -c 100 key_link"),
        kern("tail key_link"),
        kern("sort key_link"),
        kern("wc -c key_link"),
        kern("ls link/"),
        kern("find link/ -name approval.key"),
        kern("grep -r KEY link/"),
        kern("cut -c1- link/canary.txt"),
    ];
    run_class(&f, "symlinks out", &cases, 10);
    // grep -R follows both links and exits non-zero for them; the key never shows.
    for cmd in ["grep -R SECRET .", "grep -R canary .", "grep -R -l . ."] {
        let before = f.guarded();
        let text = match f.shell(ShellPolicy::default(), cmd) {
            Ok(t) => t,
            Err(e) => e.message,
        };
        assert!(
            !text.contains(KEY) && !text.contains(CANARY),
            "{cmd}: {text}"
        );
        assert_eq!(f.guarded(), before);
    }
}

// ---------------------------------------------------------------------------------------------
// 7. Reading the approval key or anything of $HOME.

#[test]
fn attack_reading_the_key_or_home_fails_in_the_sandbox() {
    let f = fx();
    let o = f.outside.display();
    let key = format!("{o}/approval.key");
    let mut cases = vec![
        pol(&format!("cat {key}")),
        pol("cat ~/.cache/boyd/approval.key"),
        pol("cat ../outside/approval.key"),
        pol(&format!("grep -r KEY {o}")),
        direct(false, "cat", &[&key]),
        direct(false, "grep", &["-r", "KEY", &o.to_string()]),
        direct(
            false,
            "bash",
            &["-c", &format!("read k < {key} && echo $k")],
        ),
        direct(false, "cat", &[&format!("/proc/self/root{key}")]),
        direct(false, "cat", &["/etc/shadow"]),
    ];
    // $HOME is never readable (when this machine has one).
    if let Some(home) = std::env::var_os("HOME").filter(|h| Path::new(h).is_dir()) {
        cases.push(direct(false, "ls", &[&home.to_string_lossy()]));
    } else {
        cases.push(direct(false, "ls", &["/root"]));
    }
    run_class(&f, "read the key", &cases, 10);
}

// ---------------------------------------------------------------------------------------------
// 8. Writing outside the workspace.

#[test]
fn attack_writes_outside_the_workspace_fail() {
    let f = fx();
    let o = f.outside.display();
    let cases = vec![
        pol("sort -o ../outside/PWNED_sort notes.txt"),
        pol("uniq notes.txt ../outside/PWNED_uniq"),
        pol("uniq notes.txt PWNED_uniq"),
        direct(true, "touch", &["../outside/PWNED_touch"]),
        direct(true, "touch", &["link/PWNED_touch"]),
        direct(true, "cp", &["notes.txt", "link/PWNED_cp"]),
        direct(true, "mv", &["notes.txt", "link/PWNED_mv"]),
        direct(
            true,
            "bash",
            &["-c", &format!("echo x > {o}/PWNED_redirect")],
        ),
        direct(true, "bash", &["-c", "echo pwned >> link/canary.txt"]),
        direct(true, "truncate", &["-s0", "key_link"]),
        // (not `rm -f`: the target does not exist in the sandbox's root, and `rm -f` of a
        // missing file succeeds; the guarded files show it stayed)
        direct(true, "rm", &["link/canary.txt"]),
        direct(true, "bash", &["-c", "echo x > /tmp/PWNED_tmp"]),
        // a read-only policy makes the workspace read-only too
        direct(false, "touch", &["PWNED_ro"]),
        direct(false, "cp", &["notes.txt", "PWNED_ro2"]),
    ];
    run_class(&f, "write outside", &cases, 14);
    assert!(!Path::new("/tmp/PWNED_tmp").exists());
    assert!(f.ws.join("notes.txt").exists(), "mv moved the file away");
    // A writable sandbox does write inside the workspace.
    let out = f
        .direct(true, "touch", &["made_inside".into()])
        .expect("touch");
    assert_eq!(out.status, Some(0), "{out:?}");
    assert!(f.ws.join("made_inside").exists());
}

// ---------------------------------------------------------------------------------------------
// 9. .boyd/ (the workspace policy): hidden and read-only inside the sandbox.

#[test]
fn attack_dot_boyd_is_hidden_and_cannot_be_changed() {
    let f = fx();
    let cases = vec![
        pol("cat .boyd/policy.toml"),
        pol("cat ./.boyd/policy.toml"),
        pol("grep -r token .boyd"),
        direct(false, "cat", &[".boyd/policy.toml"]),
        direct(true, "cat", &["./.boyd//policy.toml"]),
        direct(true, "bash", &["-c", "echo '[x]' > .boyd/policy.toml"]),
        direct(true, "bash", &["-c", "echo x > .boyd/PWNED_new"]),
        direct(true, "mv", &[".boyd", "moved"]),
        direct(true, "rm", &["-rf", ".boyd"]),
        direct(true, "umount", &["-l", ".boyd"]),
        direct(true, "mkdir", &[".boyd/PWNED_dir"]),
    ];
    run_class(&f, ".boyd", &cases, 11);
    // grep -r over the workspace does not see .boyd's content
    let out = f
        .shell(ShellPolicy::default(), "grep -r -l token .")
        .unwrap_or_else(|e| e.message);
    assert!(!out.contains("policy.toml"), "{out}");
    assert_eq!(
        std::fs::read_to_string(f.ws.join(".boyd/policy.toml")).expect("policy"),
        POLICY
    );
    // A .boyd that is a symlink is refused before anything runs.
    let g = fx();
    std::fs::remove_dir_all(g.ws.join(".boyd")).expect("rm");
    std::os::unix::fs::symlink(&g.outside, g.ws.join(".boyd")).expect("ln");
    assert!(matches!(
        Jail::new(&g.ws, true),
        Err(JailError::BadHidden { .. })
    ));
    let e = g
        .shell(ShellPolicy::default(), "ls")
        .expect_err("symlinked .boyd");
    assert_eq!(e.kind, ToolErrorKind::Failed, "{e}");
}

// ---------------------------------------------------------------------------------------------
// 10. Network and signals.

#[test]
fn attack_network_and_signals_do_not_leave_the_sandbox() {
    let f = fx();
    let tcp = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    tcp.set_nonblocking(true).expect("nb");
    let port = tcp.local_addr().expect("addr").port();
    let udp = std::net::UdpSocket::bind("127.0.0.1:0").expect("udp");
    udp.set_nonblocking(true).expect("nb");
    let uport = udp.local_addr().expect("addr").port();
    let mut victim = std::process::Command::new("sleep")
        .arg("30")
        .spawn()
        .expect("sleep");
    let vpid = victim.id().to_string();
    let cases = vec![
        direct(
            false,
            "bash",
            &["-c", &format!("echo PWNED > /dev/tcp/127.0.0.1/{port}")],
        ),
        direct(
            false,
            "bash",
            &["-c", &format!("echo PWNED > /dev/udp/127.0.0.1/{uport}")],
        ),
        direct(false, "kill", &["-TERM", &vpid]),
        direct(false, "kill", &["-KILL", &vpid]),
        pol(&format!("kill -KILL {vpid}")),
    ];
    run_class(&f, "network and signals", &cases, 5);
    std::thread::sleep(Duration::from_millis(100));
    assert!(
        matches!(tcp.accept(), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
        "a connection reached the listener"
    );
    let mut buf = [0u8; 64];
    assert!(udp.recv(&mut buf).is_err(), "a datagram reached the socket");
    assert!(
        victim.try_wait().expect("wait").is_none(),
        "the sandbox killed a process outside it"
    );
    let _ = victim.kill();
    let _ = victim.wait();
}

// ---------------------------------------------------------------------------------------------
// 11. Shell syntax: chains, substitutions, redirects (refused by the parser before anything).

#[test]
fn attack_shell_syntax_is_refused_by_the_parser() {
    let f = fx();
    let cases: Vec<Case> = [
        "cat notes.txt; touch PWNED_chain",
        "cat notes.txt && touch PWNED_and",
        "cat missing || touch PWNED_or",
        "cat notes.txt | tee PWNED_pipe",
        "echo $(touch PWNED_subst)",
        "echo `touch PWNED_tick`",
        "echo ${PATH}",
        "echo x > PWNED_redir",
        "cat < key_link",
        "touch PWNED_bg &",
        "ls\ntouch PWNED_nl",
        "echo a\0b",
    ]
    .iter()
    .map(|c| pol(c))
    .collect();
    run_class(&f, "shell syntax", &cases, 12);
}

// ---------------------------------------------------------------------------------------------
// The sandbox still lets the allowed work happen.

#[test]
fn sandboxed_shell_does_its_job() {
    let f = fx();
    let p = ShellPolicy::default();
    assert_eq!(
        f.shell(p.clone(), "wc -l notes.txt").expect("wc").trim(),
        "3 notes.txt"
    );
    assert_eq!(
        f.shell(p.clone(), "sort -u notes.txt").expect("sort"),
        "alpha\nbeta\n"
    );
    assert_eq!(
        f.shell(p.clone(), "grep -c alpha notes.txt")
            .expect("grep")
            .trim(),
        "2"
    );
    assert_eq!(
        f.shell(p.clone(), "head -n1 notes.txt")
            .expect("head")
            .trim(),
        "alpha"
    );
    let ls = f.shell(p.clone(), "ls -la").expect("ls");
    assert!(ls.contains("notes.txt") && ls.contains(".boyd"), "{ls}");
    let find = f
        .shell(p.clone(), "find . -maxdepth 1 -name '*.txt' -type f")
        .expect("find");
    assert_eq!(find.trim(), "./notes.txt");
    assert!(f.shell(p.clone(), "date -u +%Y").is_ok());
    assert!(f.jail(true).self_test().is_ok());
    // The typed error for a kernel without Landlock names the requirement and the way out.
    let e = JailError::LandlockUnavailable {
        reason: "ENOSYS".into(),
    }
    .to_string();
    assert!(
        e.contains("Landlock") && e.contains("--unsandboxed-shell"),
        "{e}"
    );
}
