//! Attacks on the sandbox launcher itself (issue 40: 1, 2, 3 and 8, and the fresh root), each
//! through `Jail::run` with the attacker's argv, so that only the kernel's part stands between
//! the program and the host.
//!
//! The fixture: `base/ws` is the workspace (`notes.txt`, symlinks `link -> ../outside/target.txt`
//! and `key_link -> ../outside/approval.key`); `base/outside` holds the stand-in for boyd's
//! approval key and a target file with a known mode, size and mtime. `base` lies under cargo's
//! target directory, not under `/tmp`, so that the sandbox's own `/tmp` must look empty.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use boyd::agent::tools::jail::{self, Jail, Limits};
use boyd::agent::tools::shell::CappedOutput;
use boyd::lm::CancelToken;

const KEY: &str = "KEY-SECRET-40b1";
/// The outside target's size: a number no listing of the workspace would print.
const TARGET_LEN: usize = 31_337;

struct Fx {
    _dir: tempfile::TempDir,
    ws: PathBuf,
    outside: PathBuf,
}

fn fx() -> Fx {
    jail::probe().expect("these tests need Landlock (Linux 5.13+) and user namespaces");
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("tempdir");
    let base = dir.path().canonicalize().expect("canon");
    let ws = base.join("ws");
    let outside = base.join("outside");
    std::fs::create_dir_all(&ws).expect("mkdir");
    std::fs::create_dir_all(&outside).expect("mkdir");
    std::fs::write(ws.join("notes.txt"), "alpha\nbeta\n").expect("w");
    std::fs::write(outside.join("approval.key"), KEY).expect("w");
    let target = outside.join("target.txt");
    std::fs::write(&target, vec![b'x'; TARGET_LEN]).expect("w");
    std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o640)).expect("chmod");
    std::os::unix::fs::symlink(&target, ws.join("link")).expect("ln");
    std::os::unix::fs::symlink(outside.join("approval.key"), ws.join("key_link")).expect("ln");
    Fx {
        _dir: dir,
        ws,
        outside,
    }
}

impl Fx {
    fn jail(&self, writable: bool) -> Jail {
        Jail::new(&self.ws, writable).expect("jail")
    }

    fn run_in(&self, jail: &Jail, program: &str, args: &[&str]) -> CappedOutput {
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        jail.run(
            program,
            &args,
            Duration::from_secs(20),
            64 * 1024,
            &CancelToken::new(),
        )
        .unwrap_or_else(|e| panic!("{program} {args:?}: {e}"))
    }

    fn run(&self, writable: bool, program: &str, args: &[&str]) -> CappedOutput {
        self.run_in(&self.jail(writable), program, args)
    }

    /// Mode bits, size and mtime of the outside target.
    fn target_meta(&self) -> (u32, u64, i64) {
        let m = std::fs::metadata(self.outside.join("target.txt")).expect("target");
        (m.mode() & 0o7777, m.size(), m.mtime())
    }
}

/// The program failed, and its output shows nothing of the outside files.
fn refused(out: &CappedOutput, what: &str) {
    assert_ne!(
        out.status,
        Some(0),
        "{what} succeeded in the sandbox: {out:?}"
    );
    let text = format!("{}{}", out.stdout, out.stderr);
    assert!(!text.contains(KEY), "{what} leaked the key: {text}");
    assert!(
        !text.contains(&TARGET_LEN.to_string()),
        "{what} revealed the outside file's size: {text}"
    );
}

/// Start listening on a UNIX socket at `path`, not blocking on accept.
fn listener(path: &Path) -> std::os::unix::net::UnixListener {
    let l = std::os::unix::net::UnixListener::bind(path).expect("bind");
    l.set_nonblocking(true).expect("nb");
    l
}

/// Try to connect to the UNIX socket `path` from inside the sandbox with an installed program
/// (curl); `None` when there is none to try with.
fn connect_from_inside(f: &Fx, path: &Path) -> Option<CappedOutput> {
    if !Path::new("/usr/bin/curl").exists() {
        println!("note: no curl installed; the connect() sub-check is skipped");
        return None;
    }
    let p = path.to_string_lossy();
    Some(f.run(
        false,
        "curl",
        &[
            "-sS",
            "--max-time",
            "3",
            "--unix-socket",
            &p,
            "http://sandbox/",
        ],
    ))
}

fn assert_no_connection(l: &std::os::unix::net::UnixListener) {
    assert!(
        matches!(l.accept(), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
        "a connection from the sandbox reached the host socket"
    );
}

// ---------------------------------------------------------------------------------------------
// 1. Metadata outside the workspace: chmod / utimensat through a workspace symlink, and stat.

#[test]
fn attack1_metadata_through_a_workspace_symlink_changes_and_reveals_nothing() {
    let f = fx();
    let before = f.target_meta();
    // A writable sandbox (as with `--shell-allow chmod`): the link's target does not exist.
    for (prog, args) in [
        ("chmod", vec!["4777", "link"]),
        ("touch", vec!["-d", "2001-02-03 04:05", "link"]),
        ("chown", vec!["0:0", "link"]),
    ] {
        let out = f.run(true, prog, &args);
        refused(&out, &format!("{prog} {args:?}"));
        assert_eq!(
            f.target_meta(),
            before,
            "{prog} {args:?} changed the target"
        );
    }
    // A read-only sandbox refuses the metadata calls even on workspace files.
    let notes = f.ws.join("notes.txt");
    let mode = std::fs::metadata(&notes).expect("notes").mode() & 0o7777;
    let out = f.run(false, "chmod", &["777", "notes.txt"]);
    refused(&out, "chmod in a read-only workspace");
    assert_eq!(
        std::fs::metadata(&notes).expect("notes").mode() & 0o7777,
        mode
    );
    // stat, ls and du through the links see nothing: no mode, size or time of the target.
    for (prog, args) in [
        ("stat", vec!["-L", "link"]),
        ("stat", vec!["-L", "key_link"]),
        ("ls", vec!["-ldL", "link"]),
        ("du", vec!["-bL", "link"]),
    ] {
        let out = f.run(false, prog, &args);
        refused(&out, &format!("{prog} {args:?}"));
    }
    // The workspace itself still works: the link shows as a link, a writer may chmod inside.
    let out = f.run(false, "stat", &["-c", "%F", "link"]);
    assert_eq!(out.stdout.trim(), "symbolic link", "{out:?}");
    let out = f.run(true, "chmod", &["600", "notes.txt"]);
    assert_eq!(out.status, Some(0), "{out:?}");
    assert_eq!(
        std::fs::metadata(&notes).expect("notes").mode() & 0o7777,
        0o600
    );
}

// ---------------------------------------------------------------------------------------------
// 2. UNIX sockets by path.

#[test]
fn attack2_a_host_unix_socket_cannot_be_reached() {
    let f = fx();
    let host_tmp = tempfile::tempdir().expect("tempdir"); // under the host's /tmp
    let sock = host_tmp
        .path()
        .canonicalize()
        .expect("canon")
        .join("agent.sock");
    let l = listener(&sock);
    let s = sock.to_string_lossy().into_owned();
    let parent = host_tmp.path().to_string_lossy().into_owned();
    refused(&f.run(false, "stat", &[&s]), "stat of the socket");
    refused(
        &f.run(false, "ls", &["-la", &parent]),
        "ls of the socket's dir",
    );
    if let Some(out) = connect_from_inside(&f, &sock) {
        refused(&out, "curl --unix-socket");
    }
    assert_no_connection(&l);
}

// ---------------------------------------------------------------------------------------------
// 3. Inherited file descriptors.

#[test]
fn attack3_an_inherited_descriptor_is_closed_before_the_program_runs() {
    use nix::fcntl::{fcntl, FcntlArg, FdFlag};
    use std::os::fd::AsRawFd;
    let f = fx();
    let victim = f.outside.join("fd_victim.txt");
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&victim)
        .expect("open");
    // As after `exec 9>>file` in the shell that started boyd: no close-on-exec.
    fcntl(&file, FcntlArg::F_SETFD(FdFlag::empty())).expect("clear FD_CLOEXEC");
    let fd = file.as_raw_fd();
    let out = f.run(true, "bash", &["-c", &format!("echo PWNED >&{fd}")]);
    let listing = f.run(false, "ls", &["/proc/self/fd"]);
    drop(file);
    assert_ne!(
        out.status,
        Some(0),
        "the write through fd {fd} worked: {out:?}"
    );
    assert_eq!(
        std::fs::read_to_string(&victim).expect("victim"),
        "",
        "the program wrote outside through the inherited fd {fd}"
    );
    // Only stdin, stdout, stderr and ls's own directory handle.
    assert_eq!(listing.status, Some(0), "{listing:?}");
    let fds: Vec<&str> = listing.stdout.split_whitespace().collect();
    assert_eq!(fds, ["0", "1", "2", "3"], "{listing:?}");
}

// ---------------------------------------------------------------------------------------------
// 8. Memory and file size.

#[test]
fn attack8_memory_and_file_size_are_limited() {
    let f = fx();
    // The defaults: a 2 GiB buffer is more than the address space allows.
    assert_eq!(f.jail(false).limits(), Limits::default());
    let out = f.run(
        false,
        "dd",
        &["if=/dev/zero", "of=/dev/null", "bs=2G", "count=1"],
    );
    assert_ne!(out.status, Some(0), "dd got a 2 GiB buffer: {out:?}");
    // Limits from the configuration: 64 MiB of address space, 1 MiB files.
    let small = Limits {
        address_space: 64 << 20,
        file_size: 1 << 20,
        ..Limits::default()
    };
    let jail = f.jail(true).with_limits(small);
    let out = f.run_in(
        &jail,
        "dd",
        &["if=/dev/zero", "of=/dev/null", "bs=128M", "count=1"],
    );
    assert_ne!(out.status, Some(0), "dd got a 128 MiB buffer: {out:?}");
    let out = f.run_in(
        &jail,
        "dd",
        &["if=/dev/zero", "of=/dev/null", "bs=1M", "count=4"],
    );
    assert_eq!(out.status, Some(0), "a 1 MiB buffer must fit: {out:?}");
    let out = f.run_in(
        &jail,
        "dd",
        &["if=/dev/zero", "of=big.bin", "bs=64K", "count=64"],
    );
    assert_ne!(
        out.status,
        Some(0),
        "dd wrote 4 MiB past a 1 MiB limit: {out:?}"
    );
    let len = std::fs::metadata(f.ws.join("big.bin")).map_or(0, |m| m.len());
    assert!(len <= 1 << 20, "big.bin grew to {len} bytes");
}

// ---------------------------------------------------------------------------------------------
// The fresh root: nothing outside the workspace and the system paths exists.

#[test]
fn the_sandbox_sees_nothing_outside_the_workspace() {
    let f = fx();
    // Nothing to list above the workspace: `/`, `/tmp`, `/etc` and `/dev` are refused.
    for dir in ["/", "/tmp", "/etc", "/dev", "/proc/.."] {
        let out = f.run(false, "ls", &["-A", dir]);
        refused(&out, &format!("ls {dir}"));
        assert!(
            !out.stdout.contains("usr") && !out.stdout.contains("passwd"),
            "ls {dir} listed something: {out:?}"
        );
    }
    // The parents of the workspace cannot be listed either, though they are traversed.
    let parent =
        f.ws.parent()
            .expect("parent")
            .to_string_lossy()
            .into_owned();
    refused(
        &f.run(false, "ls", &["-A", &parent]),
        "ls of the workspace's parent",
    );
    // The workspace and the system directories can.
    let out = f.run(false, "ls", &["-A", "."]);
    assert_eq!(out.status, Some(0), "{out:?}");
    let out = f.run(false, "ls", &["/usr/bin"]);
    assert_eq!(out.status, Some(0), "{out:?}");
    assert!(out.stdout.split_whitespace().any(|e| e == "ls"), "{out:?}");
    // The names the program needs by path still resolve (`/etc/passwd` by name, `/dev/null`).
    let out = f.run(false, "cat", &["/etc/passwd", "/dev/null"]);
    assert_eq!(out.status, Some(0), "{out:?}");
    assert!(out.stdout.contains("root:"), "{out:?}");
    // The approval key's stand-in, boyd's own home, and the host's sockets do not exist.
    let key = f.outside.join("approval.key");
    refused(
        &f.run(false, "stat", &[&key.to_string_lossy()]),
        "stat of the key",
    );
    refused(&f.run(false, "cat", &["key_link"]), "cat of the key link");
    for p in ["/root", "/home", "/run", "/var"] {
        refused(&f.run(false, "ls", &[p]), p);
    }
    let host_tmp = tempfile::tempdir().expect("tempdir");
    let sock = host_tmp
        .path()
        .canonicalize()
        .expect("canon")
        .join("host.sock");
    let l = listener(&sock);
    if let Some(out) = connect_from_inside(&f, &sock) {
        refused(&out, "curl to a host socket");
    }
    assert_no_connection(&l);
    // The program runs in the workspace, at its real path.
    let out = f.run(false, "pwd", &[]);
    assert_eq!(out.stdout.trim(), f.ws.to_string_lossy(), "{out:?}");
}

#[test]
fn workspace_files_cannot_be_mapped_executable() {
    // The ELF loader maps a copy of a system program from the workspace: execve is Landlock's,
    // but mmap(PROT_EXEC) is only refused by the workspace's noexec mount.
    let f = fx();
    let touch = Path::new("/usr/bin/touch");
    let Some(ld) = jail::elf_interpreter(touch).expect("touch is ELF") else {
        println!("note: /usr/bin/touch is static; nothing to check");
        return;
    };
    std::fs::copy(touch, f.ws.join("mytouch")).expect("cp");
    let out = f.run(true, &ld.to_string_lossy(), &["./mytouch", "PWNED_loaded"]);
    assert_ne!(out.status, Some(0), "{out:?}");
    assert!(
        !f.ws.join("PWNED_loaded").exists(),
        "the workspace copy ran"
    );
}

#[test]
fn a_killed_run_leaves_no_process_behind() {
    // The caller's timeout kills the launcher; the second stage and the program (the PID
    // namespace's first process) must die with it.
    let f = fx();
    let marker = "987654.25";
    let e = f
        .jail(false)
        .run(
            "sleep",
            &[marker.to_string()],
            Duration::from_millis(1500),
            1024,
            &CancelToken::new(),
        )
        .expect_err("sleep outlived the timeout");
    assert_eq!(e.kind, boyd::agent::tools::ToolErrorKind::Timeout, "{e}");
    let mut left = Vec::new();
    for _ in 0..50 {
        left.clear();
        for entry in std::fs::read_dir("/proc").expect("/proc").flatten() {
            let cmd = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
            if String::from_utf8_lossy(&cmd).contains(marker) {
                left.push(entry.file_name());
            }
        }
        if left.is_empty() {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(left.is_empty(), "processes left behind: {left:?}");
}
