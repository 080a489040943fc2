//! The launcher process (`boyd __sandbox-exec …`), in two stages (Linux only; elsewhere it
//! refuses).
//!
//! Stage 1 closes every inherited descriptor above 2, `unshare`s the namespaces, maps its uid
//! and gid to 0 inside (so that stage 2 keeps its capabilities in the namespace across the
//! `exec`), and starts itself again (`/proc/self/exe`, with [`INNER_ARG`]) as stage 2, the first process of the new PID namespace. It waits for it and ends the same way:
//! its exit status, or the same signal. Stage 2 asks for `SIGKILL` when stage 1 dies (and when
//! the PID namespace's first process dies the kernel kills everything in it), so killing
//! stage 1 (the parent's timeout kills its whole process group anyway) leaves no orphan.
//!
//! Stage 2 builds the fresh root and enters it (`root`), then `unshare`s one more user namespace
//! that maps the real uid and gid back (so the program runs as the user, and has no capability
//! over the mount namespace, which the first user namespace owns), sets the resource limits,
//! closes descriptors again, restricts itself with Landlock and seccomp, and `exec`s the program,
//! which inherits every restriction and is the PID namespace's first process.
//!
//! A setup failure is reported to the parent as one line on stderr starting with [`MARK`], and
//! exit status [`SETUP_FAILED`].

use std::ffi::OsString;
use std::path::PathBuf;

#[cfg(target_os = "linux")]
use super::{elf_interpreter, system_program, FIXED_PATH};
use super::{JailError, Limits, MARK, SETUP_FAILED};

/// The launcher argument that marks the second stage.
const INNER_ARG: &str = "--inner";

/// Whether this kernel can enforce the sandbox (see [`super::probe`]).
pub(super) fn probe() -> Result<(), JailError> {
    imp::probe()
}

/// The launcher's entry point: `args` are the process arguments after
/// [`super::LAUNCHER_ARG`]. Returns the exit status to end with (when the program could not be
/// `exec`ed, or the first stage's forwarded status).
pub fn launcher_main(args: Vec<OsString>) -> i32 {
    match imp::launch(args) {
        Ok(code) => code,
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
    inner: bool,
    /// The real uid and gid (stage 2 only).
    ids: Option<(u32, u32)>,
    root: PathBuf,
    write: bool,
    check: bool,
    hide: Vec<PathBuf>,
    limits: Limits,
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
        let number = |name: &str, v: PathBuf| {
            v.to_str()
                .and_then(|s| s.parse::<u64>().ok())
                .ok_or_else(|| format!("{name} needs a whole number, not {v:?}"))
        };
        match a.to_str() {
            Some(INNER_ARG) => spec.inner = true,
            Some("--ids") => {
                let v = value("--ids")?;
                let ids = v.to_str().and_then(|s| {
                    let (u, g) = s.split_once(':')?;
                    Some((u.parse().ok()?, g.parse().ok()?))
                });
                spec.ids = Some(ids.ok_or_else(|| format!("--ids needs UID:GID, not {v:?}"))?);
            }
            Some("--root") => root = Some(value("--root")?),
            Some("--write") => spec.write = true,
            Some("--check") => spec.check = true,
            Some("--hide") => spec.hide.push(value("--hide")?),
            Some("--limit-as") => {
                spec.limits.address_space = number("--limit-as", value("--limit-as")?)?
            }
            Some("--limit-fsize") => {
                spec.limits.file_size = number("--limit-fsize", value("--limit-fsize")?)?
            }
            Some("--limit-nproc") => {
                spec.limits.processes = number("--limit-nproc", value("--limit-nproc")?)?
            }
            Some("--exec") => spec.program = Some(value("--exec")?),
            Some("--") => {
                spec.args = it.collect();
                break;
            }
            _ => return Err(format!("unknown launcher argument {a:?}")),
        }
    }
    spec.root = root.ok_or("--root is required")?;
    if !spec.root.is_absolute() || spec.root.parent().is_none() {
        return Err("--root must be an absolute path below /".into());
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
    use std::os::unix::process::{CommandExt, ExitStatusExt};
    use std::path::{Path, PathBuf};
    use std::process::Command;

    use landlock::{
        Access, AccessFs, AccessNet, CompatLevel, Compatible, PathBeneath, PathFd, Ruleset,
        RulesetAttr, RulesetCreatedAttr, RulesetStatus, Scope, ABI,
    };
    use nix::sched::{unshare, CloneFlags};
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    use nix::sys::signal::Signal;
    use seccompiler::{
        BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
        SeccompRule, TargetArch,
    };

    use super::super::root::{self, DEV_FILES, ETC_FILES, SYSTEM_DIRS};
    use super::super::LAUNCHER_ARG;
    use super::{
        elf_interpreter, parse_launch, JailError, Limits, FIXED_PATH, INNER_ARG, SETUP_FAILED,
    };

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

    pub(super) fn launch(args: Vec<OsString>) -> Result<i32, Fail> {
        // Descriptors the caller's caller left open without close-on-exec (`exec 9>>file`
        // before `boyd run`) go first, before this process opens anything of its own.
        root::close_fds_above_stderr();
        let spec = parse_launch(args.clone()).map_err(fail)?;
        if spec.inner {
            return inner(spec);
        }
        let (uid, gid) = (nix::unistd::getuid(), nix::unistd::getgid());
        namespaces().map_err(fail)?;
        let status = Command::new("/proc/self/exe")
            .arg(LAUNCHER_ARG)
            .arg(INNER_ARG)
            .arg("--ids")
            .arg(format!("{uid}:{gid}"))
            .args(&args)
            .env_clear()
            .env("PATH", FIXED_PATH)
            .env("LC_ALL", "C")
            .status()
            .map_err(|e| fail(format!("cannot start the sandbox's second stage: {e}")))?;
        if let Some(code) = status.code() {
            return Ok(code);
        }
        let sig = status.signal().unwrap_or(libc::SIGKILL);
        // End by the same signal, without a core file of this process.
        let _ = setrlimit(Resource::RLIMIT_CORE, 0, 0);
        if let Ok(s) = Signal::try_from(sig) {
            let _ = nix::sys::signal::raise(s);
        }
        Ok(128 + sig)
    }

    /// Stage 2: the first process of the new PID namespace.
    fn inner(spec: super::LaunchSpec) -> Result<i32, Fail> {
        nix::sys::prctl::set_pdeathsig(Signal::SIGKILL)
            .map_err(|e| fail(format!("cannot set the parent-death signal: {e}")))?;
        let (program, interp) = match &spec.program {
            Some(p) => {
                let p = super::system_program(p, &spec.root).map_err(fail)?;
                let interp = elf_interpreter(&p).map_err(fail)?;
                (Some(p), interp)
            }
            None => (None, None),
        };
        let ids = spec
            .ids
            .ok_or_else(|| fail("--ids is required in the second stage"))?;
        // The host's procfs, kept open across the pivot to write the last user namespace's
        // maps (the sandbox's own /proc is read-only); closed before anything else runs.
        let host_proc =
            std::fs::File::open("/proc").map_err(|e| fail(format!("cannot open /proc: {e}")))?;
        let built = root::enter(&spec.root, spec.write, &spec.hide).map_err(fail)?;
        std::env::set_current_dir(&spec.root)
            .map_err(|e| fail(format!("cannot enter {}: {e}", spec.root.display())))?;
        user_again(&host_proc, ids).map_err(fail)?;
        drop(host_proc);
        set_limits(&spec.limits).map_err(fail)?;
        if built.proc {
            root::close_fds_above_stderr();
        }
        landlock_self(
            &spec.root,
            spec.write,
            built.proc,
            program.as_deref(),
            interp.as_deref(),
        )
        .map_err(fail)?;
        seccomp_self(spec.write).map_err(fail)?;
        let Some(program) = program else {
            return Ok(0); // --check
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
        unshare(
            CloneFlags::CLONE_NEWUSER
                | CloneFlags::CLONE_NEWNS
                | CloneFlags::CLONE_NEWNET
                | CloneFlags::CLONE_NEWPID
                | CloneFlags::CLONE_NEWIPC
                | CloneFlags::CLONE_NEWUTS,
        )
        .map_err(|e| {
            format!(
                "cannot create a user, mount, network and PID namespace ({e}); the shell \
                 sandbox needs unprivileged user namespaces (sysctl \
                 kernel.unprivileged_userns_clone=1, and \
                 kernel.apparmor_restrict_unprivileged_userns=0 where AppArmor has it). Enable \
                 them, or pass --unsandboxed-shell (only for workspaces you trust)"
            )
        })?;
        let write = |file: &str, text: String| {
            std::fs::write(file, text).map_err(|e| format!("cannot write {file}: {e}"))
        };
        write("/proc/self/setgroups", "deny".into())?;
        write("/proc/self/uid_map", format!("0 {uid} 1"))?;
        write("/proc/self/gid_map", format!("0 {gid} 1"))
    }

    /// A nested user namespace where the real ids map to 0 of the first one (stage 2's ids);
    /// its maps are written through the host's procfs `proc`.
    fn user_again(proc: &std::fs::File, (uid, gid): (u32, u32)) -> Result<(), String> {
        use nix::fcntl::{openat, OFlag};
        use nix::sys::stat::Mode;
        unshare(CloneFlags::CLONE_NEWUSER)
            .map_err(|e| format!("cannot create the inner user namespace: {e}"))?;
        for (file, text) in [
            ("self/setgroups", "deny".to_string()),
            ("self/uid_map", format!("{uid} 0 1")),
            ("self/gid_map", format!("{gid} 0 1")),
        ] {
            let fd = openat(
                proc,
                file,
                OFlag::O_WRONLY | OFlag::O_CLOEXEC,
                Mode::empty(),
            )
            .map_err(|e| format!("cannot open /proc/{file}: {e}"))?;
            let n = nix::unistd::write(&fd, text.as_bytes())
                .map_err(|e| format!("cannot write /proc/{file}: {e}"))?;
            if n != text.len() {
                return Err(format!("short write to /proc/{file}"));
            }
        }
        Ok(())
    }

    /// Whether `RLIMIT_NPROC` counts only the processes of this user namespace (Linux 5.14
    /// moved the count to per-namespace "ucounts"); before, it counts every process of the
    /// real uid on the host, and a limit could break a normal run.
    fn nproc_is_per_namespace() -> bool {
        let Ok(u) = nix::sys::utsname::uname() else {
            return false;
        };
        let rel = u.release().to_string_lossy().into_owned();
        let mut nums = rel
            .split(|c: char| !c.is_ascii_digit())
            .filter_map(|s| s.parse::<u32>().ok());
        let major = nums.next().unwrap_or(0);
        let minor = nums.next().unwrap_or(0);
        (major, minor) >= (5, 14)
    }

    /// Lower a limit to `value` (never above the hard limit this process already has).
    fn lower(res: Resource, value: u64) -> Result<(), String> {
        let (_, hard) = getrlimit(res).map_err(|e| format!("getrlimit {res:?}: {e}"))?;
        let v = value.min(hard);
        setrlimit(res, v, v).map_err(|e| format!("setrlimit {res:?} to {v}: {e}"))
    }

    fn set_limits(l: &Limits) -> Result<(), String> {
        lower(Resource::RLIMIT_CORE, 0)?;
        if l.address_space > 0 {
            lower(Resource::RLIMIT_AS, l.address_space)?;
        }
        if l.file_size > 0 {
            lower(Resource::RLIMIT_FSIZE, l.file_size)?;
        }
        if l.processes > 0 && nproc_is_per_namespace() {
            lower(Resource::RLIMIT_NPROC, l.processes)?;
        }
        Ok(())
    }

    fn landlock_self(
        root: &Path,
        write: bool,
        proc: bool,
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
        // No rule for `/` or `/tmp`: the program may list the workspace and the system
        // directories, and nothing else (`ls /`, `ls /tmp`, `ls /etc` fail).
        let mut rules: Vec<(PathBuf, landlock::BitFlags<AccessFs>)> =
            vec![(root.to_path_buf(), workspace)];
        for d in SYSTEM_DIRS {
            if Path::new(d).exists() {
                rules.push((d.into(), read));
            }
        }
        if proc {
            rules.push(("/proc".into(), read));
        }
        for f in ETC_FILES.iter().chain(DEV_FILES) {
            if *f == "/dev/null" || !Path::new(f).exists() {
                continue;
            }
            rules.push((f.into(), AccessFs::ReadFile.into()));
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

    /// The calls that change a file's mode, owner, times or extended attributes. Landlock
    /// does not cover them; they are refused to a sandbox whose workspace is read-only.
    fn metadata_calls() -> Vec<i64> {
        let mut v = vec![
            libc::SYS_fchmod,
            libc::SYS_fchmodat,
            libc::SYS_fchown,
            libc::SYS_fchownat,
            libc::SYS_utimensat,
            libc::SYS_setxattr,
            libc::SYS_lsetxattr,
            libc::SYS_fsetxattr,
            libc::SYS_removexattr,
            libc::SYS_lremovexattr,
            libc::SYS_fremovexattr,
        ];
        // The older calls exist only on x86_64 of the architectures seccompiler filters.
        #[cfg(target_arch = "x86_64")]
        v.extend([
            libc::SYS_fchmodat2,
            libc::SYS_chmod,
            libc::SYS_chown,
            libc::SYS_lchown,
            libc::SYS_utime,
            libc::SYS_utimes,
            libc::SYS_futimesat,
        ]);
        v
    }

    fn seccomp_self(write: bool) -> Result<(), String> {
        let Ok(arch) = TargetArch::try_from(std::env::consts::ARCH) else {
            // The namespaces and the fresh root still hold; seccompiler has no filter here.
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
        let mut denied = vec![
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
            // The newer mount calls (`mount_setattr` could clear a bind's read-only flag for
            // a program with capabilities in the user namespace, i.e. when boyd runs as root).
            libc::SYS_mount_setattr,
            libc::SYS_open_tree,
            libc::SYS_move_mount,
            libc::SYS_fsopen,
            libc::SYS_fsconfig,
            libc::SYS_fsmount,
            libc::SYS_fspick,
        ];
        if !write {
            denied.extend(metadata_calls());
        }
        for nr in denied {
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

    pub(super) fn launch(_args: Vec<OsString>) -> Result<i32, (i32, String)> {
        Err((SETUP_FAILED, JailError::Unsupported.to_string()))
    }
}
