//! The kernel-enforced sandbox every process a tool starts runs in.
//!
//! boyd never restricts itself. To start a program it runs its own binary again as a small
//! launcher (`boyd __sandbox-exec …`, dispatched in `main` before anything else starts), and
//! the launcher, still single-threaded, restricts *itself* and then `exec`s the program, which
//! inherits every restriction. This keeps the crate free of `unsafe` (no `pre_exec`).
//!
//! What the launcher does, in order (Linux only):
//! 1. `unshare` a new user, mount and network namespace (the uid and gid map to themselves).
//!    The network namespace has only a loopback device that is down: no network at all.
//! 2. Marks every mount private, then mounts an empty, read-only `tmpfs` over each hidden
//!    directory inside the workspace: `.boyd/` (the workspace's policy and run state) and
//!    boyd's own home and config directories when they lie inside the workspace. Landlock
//!    rules only add access and cannot carve a subtree out of a granted one, so the hiding is
//!    done by the mount, which the sandboxed program cannot undo (Landlock refuses `mount` and
//!    `umount` to a restricted process, and seccomp refuses them too). The directory is opened
//!    with `O_NOFOLLOW` and mounted through `/proc/self/fd`, so a symlink cannot redirect it.
//! 3. Landlock (required: ABI 1, Linux 5.13; newer rights are used where the kernel has them):
//!    the workspace read-only, or read-write when the policy can write, never executable; the
//!    system directories programs need (`/usr`, `/bin`, `/sbin`, `/lib*`) read-only; a few
//!    files of `/etc` (`ld.so.cache`, `localtime`, `passwd`, `group`, `nsswitch.conf`) and
//!    `/dev/null`, `/dev/zero`, `/dev/urandom`; execute only the program itself and its ELF
//!    interpreter. Nothing of `$HOME`, `/tmp` or boyd's directories. With ABI 4 TCP bind and
//!    connect are refused, with ABI 6 signals to processes outside the sandbox and abstract
//!    UNIX sockets are refused.
//! 4. seccomp (via `seccompiler`, on x86_64, aarch64 and riscv64): `socket()` for anything but
//!    `AF_UNIX`, `io_uring`, `ptrace`, `bpf`, `perf_event_open`, the key-ring calls, `mount`,
//!    `umount2`, `pivot_root`, `chroot`, `unshare`, `setns` and `userfaultfd` fail with `EPERM`.
//! 5. `exec`s the program by its absolute path with a clean environment: `PATH=/usr/bin:/bin`
//!    and `LC_ALL=C`, nothing else. Scripts are refused (only ELF programs run), so an
//!    interpreter never has to be executable.
//!
//! Any failure before the `exec` makes the launcher print one line starting with
//! `boyd sandbox: ` and exit with status 125; the program never runs unrestricted.

use std::ffi::OsString;
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
    imp::probe()
}

/// Look up a bare program name in [`FIXED_PATH`] and return its canonical path.
pub fn resolve_program(name: &str) -> Result<PathBuf, JailError> {
    if name.is_empty() || name.contains('/') || name == "." || name == ".." {
        return Err(JailError::ProgramNotFound { name: name.into() });
    }
    for dir in FIXED_PATH.split(':') {
        let p = Path::new(dir).join(name);
        if let Ok(meta) = std::fs::metadata(&p) {
            use std::os::unix::fs::PermissionsExt;
            if meta.is_file() && meta.permissions().mode() & 0o111 != 0 {
                return p.canonicalize().map_err(|e| JailError::Io {
                    what: "cannot resolve",
                    path: p,
                    reason: e.to_string(),
                });
            }
        }
    }
    Err(JailError::ProgramNotFound { name: name.into() })
}

/// The ELF interpreter (`PT_INTERP`) a program names, `None` for a static program; an error
/// for anything that is not a 64- or 32-bit little- or big-endian ELF file.
pub fn elf_interpreter(path: &Path) -> Result<Option<PathBuf>, JailError> {
    use std::io::{Read, Seek, SeekFrom};
    let io = |what: &'static str, e: std::io::Error| JailError::Io {
        what,
        path: path.to_path_buf(),
        reason: e.to_string(),
    };
    let not_elf = || JailError::NotElf {
        path: path.to_path_buf(),
    };
    let mut f = std::fs::File::open(path).map_err(|e| io("cannot open", e))?;
    let mut h = [0u8; 64];
    let n = f.read(&mut h).map_err(|e| io("cannot read", e))?;
    if n < 52 || h[..4] != *b"\x7fELF" {
        return Err(not_elf());
    }
    let wide = match h[4] {
        1 => false,
        2 => true,
        _ => return Err(not_elf()),
    };
    let big = match h[5] {
        1 => false,
        2 => true,
        _ => return Err(not_elf()),
    };
    let u16_at = |b: &[u8], o: usize| -> u64 {
        let v = [b[o], b[o + 1]];
        u64::from(if big {
            u16::from_be_bytes(v)
        } else {
            u16::from_le_bytes(v)
        })
    };
    let u32_at = |b: &[u8], o: usize| -> u64 {
        let v = [b[o], b[o + 1], b[o + 2], b[o + 3]];
        u64::from(if big {
            u32::from_be_bytes(v)
        } else {
            u32::from_le_bytes(v)
        })
    };
    let u64_at = |b: &[u8], o: usize| -> u64 {
        let mut v = [0u8; 8];
        v.copy_from_slice(&b[o..o + 8]);
        if big {
            u64::from_be_bytes(v)
        } else {
            u64::from_le_bytes(v)
        }
    };
    if wide && n < 64 {
        return Err(not_elf());
    }
    let (phoff, phentsize, phnum) = if wide {
        (u64_at(&h, 0x20), u16_at(&h, 0x36), u16_at(&h, 0x38))
    } else {
        (u32_at(&h, 0x1c), u16_at(&h, 0x2a), u16_at(&h, 0x2c))
    };
    let need = if wide { 56 } else { 32 };
    if phentsize < need || phnum > 4096 {
        return Err(not_elf());
    }
    for i in 0..phnum {
        let mut ph = vec![0u8; phentsize as usize];
        f.seek(SeekFrom::Start(phoff + i * phentsize))
            .map_err(|e| io("cannot read", e))?;
        f.read_exact(&mut ph).map_err(|_| not_elf())?;
        if u32_at(&ph, 0) != 3 {
            continue; // not PT_INTERP
        }
        let (off, size) = if wide {
            (u64_at(&ph, 8), u64_at(&ph, 32))
        } else {
            (u32_at(&ph, 4), u32_at(&ph, 16))
        };
        if size == 0 || size > 4096 {
            return Err(not_elf());
        }
        let mut name = vec![0u8; size as usize];
        f.seek(SeekFrom::Start(off))
            .map_err(|e| io("cannot read", e))?;
        f.read_exact(&mut name).map_err(|_| not_elf())?;
        while name.last() == Some(&0) {
            name.pop();
        }
        use std::os::unix::ffi::OsStringExt;
        return Ok(Some(PathBuf::from(OsString::from_vec(name))));
    }
    Ok(None)
}

/// The only places programs are executed from.
const SYSTEM_DIRS: &[&str] = &["/usr", "/bin", "/sbin"];

/// `path` resolved, when it is a regular file under [`SYSTEM_DIRS`] and not inside `root`.
pub fn system_program(path: &Path, root: &Path) -> Result<PathBuf, JailError> {
    let refuse = || JailError::NotSystemProgram {
        path: path.to_path_buf(),
    };
    let canon = path.canonicalize().map_err(|_| refuse())?;
    let ok = canon.is_file()
        && !canon.starts_with(root)
        && SYSTEM_DIRS.iter().any(|d| canon.starts_with(d));
    if ok {
        Ok(canon)
    } else {
        Err(refuse())
    }
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
        })
    }

    /// Use this launcher binary instead of the one found by [`find_launcher`].
    pub fn with_launcher(mut self, launcher: impl Into<PathBuf>) -> Self {
        self.launcher = launcher.into();
        self
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
        for h in &self.hide {
            cmd.arg("--hide").arg(h);
        }
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

/// The launcher's entry point: `args` are the process arguments after [`LAUNCHER_ARG`].
/// Returns the exit status to use when it could not `exec` the program.
pub fn launcher_main(args: Vec<OsString>) -> i32 {
    match imp::launch(args) {
        Ok(()) => 0,
        Err((code, msg)) => {
            #[allow(clippy::print_stderr)]
            {
                eprintln!("{MARK}{msg}");
            }
            code
        }
    }
}

/// What the launcher was asked to do.
#[derive(Debug, Default)]
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
struct LaunchSpec {
    root: PathBuf,
    write: bool,
    check: bool,
    hide: Vec<PathBuf>,
    program: Option<PathBuf>,
    args: Vec<OsString>,
}

#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
fn parse_launch(args: Vec<OsString>) -> Result<LaunchSpec, String> {
    let mut spec = LaunchSpec::default();
    let mut it = args.into_iter();
    let mut root = None;
    while let Some(a) = it.next() {
        let mut value = |name: &str| {
            it.next()
                .map(PathBuf::from)
                .ok_or_else(|| format!("{name} needs a value"))
        };
        match a.to_str() {
            Some("--root") => root = Some(value("--root")?),
            Some("--write") => spec.write = true,
            Some("--check") => spec.check = true,
            Some("--hide") => spec.hide.push(value("--hide")?),
            Some("--exec") => spec.program = Some(value("--exec")?),
            Some("--") => {
                spec.args = it.collect();
                break;
            }
            _ => return Err(format!("unknown launcher argument {a:?}")),
        }
    }
    spec.root = root.ok_or("--root is required")?;
    if !spec.root.is_absolute() {
        return Err("--root must be absolute".into());
    }
    for h in &spec.hide {
        if !h.starts_with(&spec.root) {
            return Err(format!("{} is not inside the workspace", h.display()));
        }
    }
    if spec.program.is_none() && !spec.check {
        return Err("--exec is required".into());
    }
    Ok(spec)
}

#[cfg(target_os = "linux")]
mod imp {
    use std::collections::BTreeMap;
    use std::ffi::OsString;
    use std::os::unix::fs::OpenOptionsExt;
    use std::os::unix::io::AsRawFd;
    use std::os::unix::process::CommandExt;
    use std::path::{Path, PathBuf};
    use std::process::Command;

    use landlock::{
        Access, AccessFs, AccessNet, CompatLevel, Compatible, PathBeneath, PathFd, Ruleset,
        RulesetAttr, RulesetCreatedAttr, RulesetStatus, Scope, ABI,
    };
    use nix::mount::{mount, MsFlags};
    use nix::sched::{unshare, CloneFlags};
    use seccompiler::{
        BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
        SeccompRule, TargetArch,
    };

    use super::{elf_interpreter, parse_launch, JailError, FIXED_PATH, SETUP_FAILED};

    /// The newest Landlock ABI whose rights this code asks for (tested on it).
    const ABI_USED: ABI = ABI::V7;

    pub(super) fn probe() -> Result<(), JailError> {
        let r = Ruleset::default()
            .set_compatibility(CompatLevel::HardRequirement)
            .handle_access(AccessFs::from_all(ABI::V1))
            .and_then(|r| r.create());
        match r {
            Ok(_) => Ok(()),
            Err(e) => Err(JailError::LandlockUnavailable {
                reason: e.to_string(),
            }),
        }
    }

    type Fail = (i32, String);

    fn fail(what: impl std::fmt::Display) -> Fail {
        (SETUP_FAILED, what.to_string())
    }

    pub(super) fn launch(args: Vec<OsString>) -> Result<(), Fail> {
        let spec = parse_launch(args).map_err(fail)?;
        namespaces().map_err(fail)?;
        for h in &spec.hide {
            hide(h).map_err(fail)?;
        }
        let (program, interp) = match &spec.program {
            Some(p) => {
                let p = super::system_program(p, &spec.root).map_err(fail)?;
                let interp = elf_interpreter(&p).map_err(fail)?;
                (Some(p), interp)
            }
            None => (None, None),
        };
        landlock_self(
            &spec.root,
            spec.write,
            program.as_deref(),
            interp.as_deref(),
        )
        .map_err(fail)?;
        seccomp_self().map_err(fail)?;
        std::env::set_current_dir(&spec.root)
            .map_err(|e| fail(format!("cannot enter {}: {e}", spec.root.display())))?;
        let Some(program) = program else {
            return Ok(()); // --check
        };
        let name = program.file_name().map(OsString::from).unwrap_or_default();
        let err = Command::new(&program)
            .arg0(name)
            .args(&spec.args)
            .env_clear()
            .env("PATH", FIXED_PATH)
            .env("LC_ALL", "C")
            .exec();
        let code = if err.kind() == std::io::ErrorKind::NotFound {
            127
        } else {
            126
        };
        Err((code, format!("cannot execute {}: {err}", program.display())))
    }

    fn namespaces() -> Result<(), String> {
        let uid = nix::unistd::getuid();
        let gid = nix::unistd::getgid();
        unshare(CloneFlags::CLONE_NEWUSER | CloneFlags::CLONE_NEWNS | CloneFlags::CLONE_NEWNET)
            .map_err(|e| {
                format!(
                    "cannot create a user, mount and network namespace ({e}); the shell sandbox \
                     needs unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1, \
                     and kernel.apparmor_restrict_unprivileged_userns=0 where AppArmor has it). \
                     Enable them, or pass --unsandboxed-shell (only for workspaces you trust)"
                )
            })?;
        let write = |file: &str, text: String| {
            std::fs::write(file, text).map_err(|e| format!("cannot write {file}: {e}"))
        };
        write("/proc/self/setgroups", "deny".into())?;
        write("/proc/self/uid_map", format!("{uid} {uid} 1"))?;
        write("/proc/self/gid_map", format!("{gid} {gid} 1"))?;
        mount(
            None::<&str>,
            "/",
            None::<&str>,
            MsFlags::MS_REC | MsFlags::MS_PRIVATE,
            None::<&str>,
        )
        .map_err(|e| format!("cannot make the mounts private: {e}"))
    }

    /// Mount an empty read-only tmpfs over `dir`, opened without following symlinks.
    fn hide(dir: &Path) -> Result<(), String> {
        let f = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_PATH | libc::O_NOFOLLOW | libc::O_DIRECTORY | libc::O_CLOEXEC)
            .open(dir)
            .map_err(|e| {
                format!(
                    "cannot open {} to hide it (must be a plain directory): {e}",
                    dir.display()
                )
            })?;
        let target = format!("/proc/self/fd/{}", f.as_raw_fd());
        mount(
            Some("tmpfs"),
            target.as_str(),
            Some("tmpfs"),
            MsFlags::MS_RDONLY | MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
            Some("size=4k,mode=0555"),
        )
        .map_err(|e| format!("cannot hide {}: {e}", dir.display()))
    }

    fn landlock_self(
        root: &Path,
        write: bool,
        program: Option<&Path>,
        interp: Option<&Path>,
    ) -> Result<(), String> {
        let err = |e: landlock::RulesetError| format!("Landlock: {e}");
        let read = AccessFs::ReadFile | AccessFs::ReadDir;
        let workspace = if write {
            AccessFs::from_all(ABI_USED) & !AccessFs::Execute
        } else {
            read
        };
        let file_rights = AccessFs::from_file(ABI_USED);
        let mut rules: Vec<(PathBuf, landlock::BitFlags<AccessFs>)> =
            vec![(root.to_path_buf(), workspace)];
        for d in [
            "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
        ] {
            if Path::new(d).exists() {
                rules.push((d.into(), read));
            }
        }
        for f in [
            "/etc/ld.so.cache",
            "/etc/localtime",
            "/etc/passwd",
            "/etc/group",
            "/etc/nsswitch.conf",
            "/dev/zero",
            "/dev/urandom",
        ] {
            if Path::new(f).exists() {
                rules.push((f.into(), AccessFs::ReadFile.into()));
            }
        }
        rules.push((
            "/dev/null".into(),
            (AccessFs::ReadFile | AccessFs::WriteFile | AccessFs::Truncate) & file_rights,
        ));
        for p in [program, interp].into_iter().flatten() {
            rules.push((p.to_path_buf(), AccessFs::Execute | AccessFs::ReadFile));
        }
        let mut created = Ruleset::default()
            .set_compatibility(CompatLevel::HardRequirement)
            .handle_access(AccessFs::from_all(ABI::V1))
            .map_err(err)?
            .set_compatibility(CompatLevel::BestEffort)
            .handle_access(AccessFs::from_all(ABI_USED))
            .map_err(err)?
            .handle_access(AccessNet::from_all(ABI_USED))
            .map_err(err)?
            .scope(Scope::from_all(ABI_USED))
            .map_err(err)?
            .create()
            .map_err(err)?;
        for (path, access) in rules {
            let fd =
                PathFd::new(&path).map_err(|e| format!("Landlock: {}: {e}", path.display()))?;
            created = created
                .add_rule(PathBeneath::new(fd, access))
                .map_err(err)?;
        }
        let status = created.restrict_self().map_err(err)?;
        if status.ruleset == RulesetStatus::NotEnforced {
            return Err("Landlock is not enforced by this kernel".into());
        }
        if !status.no_new_privs {
            return Err("cannot set no_new_privs".into());
        }
        Ok(())
    }

    fn seccomp_self() -> Result<(), String> {
        let Ok(arch) = TargetArch::try_from(std::env::consts::ARCH) else {
            // The network namespace still cuts the network; seccompiler has no filter here.
            return Ok(());
        };
        let err = |e: seccompiler::BackendError| format!("seccomp: {e}");
        let not_unix = SeccompRule::new(vec![SeccompCondition::new(
            0,
            SeccompCmpArgLen::Dword,
            SeccompCmpOp::Ne,
            libc::AF_UNIX as u64,
        )
        .map_err(err)?])
        .map_err(err)?;
        let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
        rules.insert(libc::SYS_socket, vec![not_unix]);
        for nr in [
            libc::SYS_io_uring_setup,
            libc::SYS_io_uring_enter,
            libc::SYS_io_uring_register,
            libc::SYS_ptrace,
            libc::SYS_bpf,
            libc::SYS_perf_event_open,
            libc::SYS_keyctl,
            libc::SYS_add_key,
            libc::SYS_request_key,
            libc::SYS_mount,
            libc::SYS_umount2,
            libc::SYS_pivot_root,
            libc::SYS_chroot,
            libc::SYS_unshare,
            libc::SYS_setns,
            libc::SYS_userfaultfd,
        ] {
            rules.insert(nr, vec![]);
        }
        let filter = SeccompFilter::new(
            rules,
            SeccompAction::Allow,
            SeccompAction::Errno(libc::EPERM as u32),
            arch,
        )
        .map_err(err)?;
        let prog: BpfProgram = filter.try_into().map_err(err)?;
        seccompiler::apply_filter(&prog).map_err(|e| format!("seccomp: {e}"))
    }
}

#[cfg(not(target_os = "linux"))]
mod imp {
    use std::ffi::OsString;

    use super::{JailError, SETUP_FAILED};

    pub(super) fn probe() -> Result<(), JailError> {
        Err(JailError::Unsupported)
    }

    pub(super) fn launch(_args: Vec<OsString>) -> Result<(), (i32, String)> {
        Err((SETUP_FAILED, JailError::Unsupported.to_string()))
    }
}
