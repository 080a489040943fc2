//! The launcher process (`boyd __sandbox-exec …`): parses its arguments, restricts itself —
//! namespaces, hidden directories, Landlock, seccomp — and `exec`s the program, which inherits
//! every restriction. On other systems than Linux it refuses.
//!
//! It is its own process: a setup failure is reported to the parent as one line on stderr
//! starting with [`MARK`], and exit status [`SETUP_FAILED`].

use std::ffi::OsString;
use std::path::PathBuf;

#[cfg(target_os = "linux")]
use super::{elf_interpreter, system_program, FIXED_PATH};
use super::{JailError, MARK, SETUP_FAILED};

/// Whether this kernel can enforce the sandbox (see [`super::probe`]).
pub(super) fn probe() -> Result<(), JailError> {
    imp::probe()
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
