//! The kernel-enforced sandbox every process a tool starts runs in.
//!
//! boyd never restricts itself. To start a program it runs its own binary again as a small
//! launcher (`boyd __sandbox-exec …`, dispatched in `main` before anything else starts), and
//! the launcher, still single-threaded, restricts *itself* and then `exec`s the program, which
//! inherits every restriction. This keeps the crate free of `unsafe` (no `pre_exec`). What it
//! guarantees and what it does not is written up in `docs/jail.md`.
//!
//! What the launcher does, in order (Linux only), in two stages:
//! 1. Stage 1 closes every descriptor above 2 it inherited (`exec 9>>file` before `boyd run`
//!    reaches nothing), then `unshare`s a new user, mount, network, PID, IPC and UTS namespace
//!    (the uid and gid map to 0 inside, so that stage 2 keeps the namespace's capabilities). The network namespace has only a loopback device
//!    that is down: no network at all; abstract UNIX sockets are per network namespace too.
//! 2. Stage 1 starts itself again as stage 2, the first process of the new PID namespace, and
//!    waits: it ends with stage 2's exit status or by the same signal. Stage 2 gets `SIGKILL`
//!    when stage 1 dies, and the whole namespace dies with its first process, so killing the
//!    launcher (the caller's timeout) leaves no process behind.
//! 3. Stage 2 builds a fresh root on an empty `tmpfs` and `pivot_root`s into it (`root`): the
//!    workspace at its real path (read-only unless the policy can write; always `nosuid`,
//!    `nodev`, `noexec`, so no workspace file is executed or mapped executable), the system
//!    directories programs need (`/usr`, `/bin`, `/sbin`, `/lib*`) read-only, a few files of
//!    `/etc` (`ld.so.cache`, `localtime`, `passwd`, `group`, `nsswitch.conf`) and
//!    `/dev/null`, `/dev/zero`, `/dev/urandom` read-only, an empty private `/tmp` and a fresh
//!    read-only `/proc` of the new PID namespace (left out where the kernel refuses one). The
//!    root itself is read-only. Everything else — `$HOME`, `/run`, `/var`, the host's `/tmp`
//!    and its sockets, boyd's directories and the approval key — does not exist inside.
//!    The hidden directories inside the workspace, `.boyd/` (the workspace's policy and run
//!    state) and boyd's own home and config directories when they lie inside it, are covered
//!    by an empty read-only `tmpfs`, mounted through an `O_NOFOLLOW` descriptor so that a
//!    symlink cannot redirect it; the program cannot undo a mount (Landlock and seccomp refuse
//!    `mount` and `umount`).
//! 4. Stage 2 `unshare`s a nested user namespace that maps the real uid and gid back: the
//!    program runs as the user, with no capability over the mount, network or PID namespace
//!    (the first user namespace owns them), even when boyd runs as root. It sets the resource
//!    limits ([`Limits`]: `RLIMIT_AS`, `RLIMIT_FSIZE`,
//!    `RLIMIT_NPROC` where the kernel counts it per namespace, `RLIMIT_CORE` 0) and closes the
//!    descriptors above 2 once more.
//! 5. Landlock, the second wall (required: ABI 1, Linux 5.13; newer rights are used where the
//!    kernel has them): the workspace read-only, or read-write when the policy can write,
//!    never executable; every directory of the fresh root listable; the system directories,
//!    `/proc` and the `/etc` and `/dev` files above read-only (`/dev/null` writable); execute
//!    only the program itself and its ELF interpreter. With ABI 4 TCP bind and connect are refused, with ABI 6 signals to
//!    processes outside the sandbox and abstract UNIX sockets are refused.
//! 6. seccomp (via `seccompiler`, on x86_64, aarch64 and riscv64): `socket()` for anything but
//!    `AF_UNIX`, `io_uring`, `ptrace`, `bpf`, `perf_event_open`, the key-ring calls, `mount`,
//!    `umount2`, the newer mount calls (`open_tree`, `move_mount`, `mount_setattr`, `fs*`),
//!    `pivot_root`, `chroot`, `unshare`, `setns` and `userfaultfd` fail with `EPERM`;
//!    when the workspace is read-only (no allowed program is a writer), so do the calls that
//!    change a file's mode, owner, times or extended attributes (the `chmod`, `chown`,
//!    `utime*` and `*xattr` families), which Landlock does not cover.
//! 7. `exec`s the program by its absolute path with a clean environment: `PATH=/usr/bin:/bin`
//!    and `LC_ALL=C`, nothing else. Scripts are refused (only ELF programs run), so an
//!    interpreter never has to be executable. The program is the PID namespace's first process.
//!
//! Any failure before the `exec` makes the launcher print one line starting with
//! `boyd sandbox: ` and exit with status 125; the program never runs unrestricted.
//!
//! Files: this one holds the parent's side ([`Jail`]: the launcher's command line, running a
//! program through it, the self-test, the limits); `programs` what may be executed (a system
//! ELF program and its interpreter); `launcher` the launcher process itself (both stages,
//! Landlock, seccomp, limits); `root` the fresh root (step 3).

mod launcher;
mod programs;
#[cfg(target_os = "linux")]
mod root;

pub use launcher::launcher_main;
pub use programs::{elf_interpreter, resolve_program, system_program};

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use super::shell::{run_capped, CappedOutput};
use super::ToolError;
use crate::lm::CancelToken;

/// The hidden subcommand that turns the `boyd` binary into the launcher.
pub const LAUNCHER_ARG: &str = "__sandbox-exec";
/// The only `PATH` a sandboxed program sees, and where program names are looked up.
pub const FIXED_PATH: &str = "/usr/bin:/bin";
/// Exit status of the launcher when the sandbox could not be set up.
pub const SETUP_FAILED: i32 = 125;
/// How every launcher error line starts.
pub const MARK: &str = "boyd sandbox: ";
/// Environment variable naming the launcher binary (default: this `boyd`, or the `boyd` next
/// to the running test or fuzz binary).
pub const LAUNCHER_ENV: &str = "BOYD_SANDBOX_LAUNCHER";

/// Default `RLIMIT_AS` of a sandboxed program: 1 GiB of address space. The allowed programs
/// (text tools, `find`, `sort`, `grep`) work in a few MiB; `sort` sizes its buffer from this
/// limit. A program that asks for more (a 2 GiB `dd` buffer, `grep -a` through a huge sparse
/// file) fails with "out of memory" instead of taking the host's memory.
pub const DEFAULT_ADDRESS_SPACE: u64 = 1 << 30;
/// Default `RLIMIT_FSIZE`: 256 MiB, the largest file a sandboxed program may write (larger
/// than any file the tools are meant to produce; a run that writes past it gets "File too
/// large").
pub const DEFAULT_FILE_SIZE: u64 = 256 << 20;
/// Default `RLIMIT_NPROC`: 256 processes and threads. Set only on Linux 5.14 or newer, where
/// the count is kept per user namespace (so it counts the sandbox's own processes); on older
/// kernels it would count every process of the user on the host, so it is left unset there
/// and the PID namespace is the only bound.
pub const DEFAULT_PROCESSES: u64 = 256;

/// Resource limits the launcher sets on the program (`setrlimit` before `exec`; never above
/// the hard limits boyd itself has). A 0 leaves that limit as boyd has it. `RLIMIT_CORE` is
/// always 0, so a crash writes no core file into the workspace. There is no cgroup: CPU time
/// is bounded by the caller's timeout, memory by the address space alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// `RLIMIT_AS` in bytes.
    pub address_space: u64,
    /// `RLIMIT_FSIZE` in bytes.
    pub file_size: u64,
    /// `RLIMIT_NPROC` (where the kernel counts it per user namespace, see
    /// [`DEFAULT_PROCESSES`]).
    pub processes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            address_space: DEFAULT_ADDRESS_SPACE,
            file_size: DEFAULT_FILE_SIZE,
            processes: DEFAULT_PROCESSES,
        }
    }
}

/// Why a sandboxed process cannot start.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum JailError {
    /// The kernel has no usable Landlock.
    #[error(
        "the shell tool's sandbox needs Landlock (Linux 5.13 or newer with `landlock` in the \
         kernel's lsm= list): {reason}. Use such a kernel, or pass --unsandboxed-shell to run \
         the shell tool without a sandbox (only for workspaces you trust)"
    )]
    LandlockUnavailable {
        /// What the kernel said.
        reason: String,
    },
    /// Not Linux.
    #[error(
        "the shell tool's sandbox (Landlock, namespaces, seccomp) exists only on Linux; pass \
         --unsandboxed-shell to run the shell tool without a sandbox (only for workspaces you \
         trust)"
    )]
    Unsupported,
    /// The launcher binary was not found.
    #[error(
        "cannot find the sandbox launcher (the `boyd` binary) for {exe}; set {LAUNCHER_ENV} \
         to the path of the boyd binary"
    )]
    NoLauncher {
        /// The running executable.
        exe: PathBuf,
    },
    /// The program is not installed where the sandbox looks.
    #[error("program {name:?} is not installed in /usr/bin or /bin")]
    ProgramNotFound {
        /// The bare name.
        name: String,
    },
    /// The program is a script or otherwise not a native program.
    #[error(
        "{path} is not a native (ELF) program; the sandbox runs no scripts, since their \
         interpreter would have to be executable too. Allow a compiled program instead"
    )]
    NotElf {
        /// The resolved path.
        path: PathBuf,
    },
    /// The program is not an installed system program (e.g. a file in the workspace).
    #[error(
        "{path} is not an installed program under /usr, /bin or /sbin; the sandbox executes \
         nothing else (never a file from the workspace)"
    )]
    NotSystemProgram {
        /// The path given.
        path: PathBuf,
    },
    /// A directory to hide is a symlink or not a directory.
    #[error(
        "{path} is not a plain directory (a symlink or a file?); the sandbox must hide it from \
         the shell. Remove or rename it"
    )]
    BadHidden {
        /// The path.
        path: PathBuf,
    },
    /// The workspace lies inside boyd's own home or config directory.
    #[error(
        "the workspace {root} lies inside boyd's directory {dir} (run state, approval key); \
         the shell sandbox would grant it. Use a workspace outside it"
    )]
    InsideBoydHome {
        /// The workspace.
        root: PathBuf,
        /// boyd's directory.
        dir: PathBuf,
    },
    /// Reading or preparing something failed.
    #[error("{what} {path}: {reason}")]
    Io {
        /// What was being done.
        what: &'static str,
        /// The path.
        path: PathBuf,
        /// The OS error.
        reason: String,
    },
    /// The launcher reported a setup failure.
    #[error("the sandbox could not start: {0}")]
    Setup(String),
}

impl From<JailError> for ToolError {
    fn from(e: JailError) -> Self {
        match e {
            JailError::ProgramNotFound { .. } => ToolError::not_found(format!("{e}.")),
            JailError::NotElf { .. } | JailError::NotSystemProgram { .. } => {
                ToolError::denied(format!("{e}."))
            }
            _ => ToolError::failed(format!("{e}.")),
        }
    }
}

/// Check that this kernel can enforce the sandbox (Landlock ABI 1 at least), without
/// restricting the calling process.
pub fn probe() -> Result<(), JailError> {
    launcher::probe()
}

/// Find the launcher: `$BOYD_SANDBOX_LAUNCHER`, else the running executable when it is `boyd`,
/// else a `boyd` next to it or one directory up (how cargo lays out test and fuzz binaries).
pub fn find_launcher() -> Result<PathBuf, JailError> {
    if let Some(p) = std::env::var_os(LAUNCHER_ENV) {
        let p = PathBuf::from(p);
        if p.is_file() {
            return Ok(p);
        }
        return Err(JailError::NoLauncher { exe: p });
    }
    let exe = std::env::current_exe().map_err(|e| JailError::Io {
        what: "cannot find the running executable",
        path: PathBuf::new(),
        reason: e.to_string(),
    })?;
    if exe.file_name().is_some_and(|n| n == "boyd") {
        return Ok(exe);
    }
    let mut dir = exe.parent();
    for _ in 0..2 {
        let Some(d) = dir else { break };
        let cand = d.join("boyd");
        if cand.is_file() {
            return Ok(cand);
        }
        dir = d.parent();
    }
    Err(JailError::NoLauncher { exe })
}

/// A sandbox for processes started in one workspace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Jail {
    root: PathBuf,
    writable: bool,
    hide: Vec<PathBuf>,
    launcher: PathBuf,
    limits: Limits,
}

impl Jail {
    /// A sandbox over the workspace `root` (canonicalized), read-write when `writable`.
    /// Checks that the kernel has Landlock and finds the launcher. When writable, creates
    /// `root/.boyd` if missing, so that it can be hidden (a program could otherwise create it).
    pub fn new(root: &Path, writable: bool) -> Result<Self, JailError> {
        probe()?;
        let root = root.canonicalize().map_err(|e| JailError::Io {
            what: "cannot resolve the workspace",
            path: root.to_path_buf(),
            reason: e.to_string(),
        })?;
        let mut hide = Vec::new();
        let dotboyd = root.join(".boyd");
        match std::fs::symlink_metadata(&dotboyd) {
            Ok(m) if m.is_dir() => hide.push(dotboyd),
            Ok(_) => return Err(JailError::BadHidden { path: dotboyd }),
            Err(_) if writable => {
                std::fs::create_dir(&dotboyd).map_err(|e| JailError::Io {
                    what: "cannot create",
                    path: dotboyd.clone(),
                    reason: e.to_string(),
                })?;
                hide.push(dotboyd);
            }
            Err(_) => {}
        }
        // boyd's own directories, should the workspace contain them.
        let own = [
            crate::agent::rundir::boyd_home().ok(),
            crate::agent::approval::config_dir().ok(),
        ];
        for dir in own.into_iter().flatten() {
            let Ok(dir) = dir.canonicalize() else {
                continue;
            };
            if dir == root || root.starts_with(&dir) {
                return Err(JailError::InsideBoydHome { root, dir });
            }
            if dir.starts_with(&root) && dir.is_dir() && !hide.contains(&dir) {
                hide.push(dir);
            }
        }
        Ok(Self {
            root,
            writable,
            hide,
            launcher: find_launcher()?,
            limits: Limits::default(),
        })
    }

    /// Use this launcher binary instead of the one found by [`find_launcher`].
    pub fn with_launcher(mut self, launcher: impl Into<PathBuf>) -> Self {
        self.launcher = launcher.into();
        self
    }

    /// Use these resource limits instead of [`Limits::default`].
    pub fn with_limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// The resource limits a program gets.
    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// The launcher arguments that set the limits.
    fn limit_args(&self, cmd: &mut Command) {
        let l = self.limits;
        cmd.arg("--limit-as")
            .arg(l.address_space.to_string())
            .arg("--limit-fsize")
            .arg(l.file_size.to_string())
            .arg("--limit-nproc")
            .arg(l.processes.to_string());
    }

    /// The canonical workspace root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Whether the workspace is writable inside the sandbox.
    pub fn writable(&self) -> bool {
        self.writable
    }

    /// The directories hidden behind an empty read-only mount.
    pub fn hidden(&self) -> &[PathBuf] {
        &self.hide
    }

    /// The command that runs `program` (an absolute path) with `args` inside the sandbox, with
    /// a clean environment and the workspace as working directory.
    pub fn command(&self, program: &Path, args: &[String]) -> Result<Command, JailError> {
        if !program.is_absolute() {
            return Err(JailError::ProgramNotFound {
                name: program.display().to_string(),
            });
        }
        let mut cmd = Command::new(&self.launcher);
        cmd.arg(LAUNCHER_ARG).arg("--root").arg(&self.root);
        if self.writable {
            cmd.arg("--write");
        }
        for h in &self.hide {
            cmd.arg("--hide").arg(h);
        }
        self.limit_args(&mut cmd);
        cmd.arg("--exec").arg(program).arg("--").args(args);
        cmd.env_clear()
            .env("PATH", FIXED_PATH)
            .env("LC_ALL", "C")
            .current_dir(&self.root);
        Ok(cmd)
    }

    /// Run `program` (an absolute path, or a bare name looked up in [`FIXED_PATH`]) with
    /// `args` in the sandbox, with the time limit, output cap and cancellation of
    /// [`run_capped`]. No allow-list applies here: this is the kernel's part alone.
    pub fn run(
        &self,
        program: &str,
        args: &[String],
        timeout: Duration,
        cap: usize,
        cancel: &CancelToken,
    ) -> Result<CappedOutput, ToolError> {
        let path = if program.contains('/') {
            PathBuf::from(program)
        } else {
            resolve_program(program)?
        };
        // Refuse workspace files and scripts here already, with typed errors (the launcher
        // checks again).
        let path = system_program(&path, &self.root)?;
        elf_interpreter(&path)?;
        let cmd = self.command(&path, args)?;
        let out = run_capped(cmd, timeout, cap, cancel)?;
        if out.status == Some(SETUP_FAILED) {
            if let Some(line) = out.stderr.lines().find(|l| l.starts_with(MARK)) {
                return Err(JailError::Setup(line[MARK.len()..].to_string()).into());
            }
        }
        Ok(out)
    }

    /// Start the launcher once in check mode: it sets up every restriction for this workspace
    /// and exits instead of running a program. Run at startup, so that a kernel without
    /// user namespaces is reported before the model first calls the shell.
    pub fn self_test(&self) -> Result<(), JailError> {
        let mut cmd = Command::new(&self.launcher);
        cmd.arg(LAUNCHER_ARG)
            .arg("--check")
            .arg("--root")
            .arg(&self.root);
        if self.writable {
            cmd.arg("--write");
        }
        for h in &self.hide {
            cmd.arg("--hide").arg(h);
        }
        self.limit_args(&mut cmd);
        cmd.env_clear().env("PATH", FIXED_PATH);
        let out = cmd.output().map_err(|e| JailError::Io {
            what: "cannot start the sandbox launcher",
            path: self.launcher.clone(),
            reason: e.to_string(),
        })?;
        if out.status.success() {
            return Ok(());
        }
        let err = String::from_utf8_lossy(&out.stderr);
        let line = err
            .lines()
            .find_map(|l| l.strip_prefix(MARK))
            .unwrap_or(err.trim());
        Err(JailError::Setup(line.to_string()))
    }
}
