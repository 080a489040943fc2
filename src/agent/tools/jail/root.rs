//! The fresh root the launcher's second stage builds and enters (Linux only): an empty `tmpfs`
//! that holds only bind mounts of what a program needs, then `pivot_root` into it, so that
//! everything else of the host's file tree (`$HOME`, `/run`, `/var`, host sockets, boyd's
//! directories, the approval key) does not exist for the program at all.
//!
//! The layout (paths as the program sees them):
//! - the workspace at its real absolute path: a bind mount, read-only unless the policy writes,
//!   always `nosuid,nodev,noexec` (so a workspace file can neither be run nor mapped
//!   executable); its hidden directories behind an empty read-only `tmpfs`;
//! - [`SYSTEM_DIRS`] as read-only binds (a directory that is a symlink on the host, such as
//!   `/bin -> usr/bin`, is the same symlink here);
//! - [`ETC_FILES`] and [`DEV_FILES`] as read-only binds of single files;
//! - a private, empty `/tmp` ([`TMP_SIZE`]) and, where the kernel allows it, a fresh read-only
//!   `/proc` of the sandbox's own PID namespace;
//! - the root itself read-only.
//!
//! Every step here needs the user, mount and PID namespaces the first stage created.

use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};

use nix::mount::{mount, umount2, MntFlags, MsFlags};
use nix::sys::statvfs::{statvfs, FsFlags};

/// The host directories the program sees, read-only (those that exist).
pub(super) const SYSTEM_DIRS: &[&str] = &[
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
];
/// The files of `/etc` the program sees, read-only (those that exist).
pub(super) const ETC_FILES: &[&str] = &[
    "/etc/ld.so.cache",
    "/etc/localtime",
    "/etc/passwd",
    "/etc/group",
    "/etc/nsswitch.conf",
];
/// The devices the program sees.
pub(super) const DEV_FILES: &[&str] = &["/dev/null", "/dev/zero", "/dev/urandom"];
/// Size of the private `/tmp`. Landlock grants it no rights today: it exists so that the
/// host's `/tmp` is absent, and to hold the mount points of a workspace that lies under `/tmp`.
pub(super) const TMP_SIZE: &str = "size=1m";
/// Where the new root is assembled before `pivot_root` (a private mount over the host's `/tmp`
/// in this mount namespace; the workspace is bound through a descriptor opened before, so a
/// workspace under `/tmp` is still found).
const STAGING: &str = "/tmp";

/// What [`enter`] built.
pub(super) struct Built {
    /// Whether `/proc` is mounted (the kernel may refuse a fresh procfs, e.g. inside a
    /// container whose `/proc` has masked paths; then `/proc` stays an empty directory).
    pub proc: bool,
}

/// A path of the host inside the staging root.
fn staged(p: &Path) -> PathBuf {
    Path::new(STAGING).join(p.strip_prefix("/").unwrap_or(p))
}

fn open_dir(path: &Path, what: &str) -> Result<std::fs::File, String> {
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_PATH | libc::O_NOFOLLOW | libc::O_DIRECTORY | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| {
            format!(
                "cannot open {} {what} (must be a plain directory): {e}",
                path.display()
            )
        })
}

/// The per-mount flags of `path` that a user namespace may not clear on a bind remount
/// (`nosuid`, `nodev`, `noexec` and the atime flags of the source mount).
fn locked_flags(path: &Path) -> Result<MsFlags, String> {
    let st = statvfs(path).map_err(|e| format!("cannot statvfs {}: {e}", path.display()))?;
    let f = st.flags();
    let mut out = MsFlags::empty();
    for (fs, ms) in [
        (FsFlags::ST_NOSUID, MsFlags::MS_NOSUID),
        (FsFlags::ST_NODEV, MsFlags::MS_NODEV),
        (FsFlags::ST_NOEXEC, MsFlags::MS_NOEXEC),
        (FsFlags::ST_NOATIME, MsFlags::MS_NOATIME),
        (FsFlags::ST_NODIRATIME, MsFlags::MS_NODIRATIME),
        (FsFlags::ST_RELATIME, MsFlags::MS_RELATIME),
    ] {
        if f.contains(fs) {
            out |= ms;
        }
    }
    Ok(out)
}

/// Bind `src` onto the existing `dst` (not recursively: mounts below `src` are absent), then
/// remount it with `flags` added to the flags it must keep.
fn bind(src: &str, dst: &Path, flags: MsFlags) -> Result<(), String> {
    mount(Some(src), dst, None::<&str>, MsFlags::MS_BIND, None::<&str>)
        .map_err(|e| format!("cannot bind {src} to {}: {e}", dst.display()))?;
    let keep = locked_flags(dst)?;
    mount(
        None::<&str>,
        dst,
        None::<&str>,
        MsFlags::MS_REMOUNT | MsFlags::MS_BIND | flags | keep,
        None::<&str>,
    )
    .map_err(|e| format!("cannot remount {}: {e}", dst.display()))
}

fn mkdir(p: &Path) -> Result<(), String> {
    std::fs::create_dir_all(p).map_err(|e| format!("cannot create {}: {e}", p.display()))
}

fn touch(p: &Path) -> Result<(), String> {
    std::fs::File::create(p)
        .map(drop)
        .map_err(|e| format!("cannot create {}: {e}", p.display()))
}

fn tmpfs(dst: &Path, flags: MsFlags, data: &str) -> Result<(), String> {
    mount(Some("tmpfs"), dst, Some("tmpfs"), flags, Some(data))
        .map_err(|e| format!("cannot mount a tmpfs on {}: {e}", dst.display()))
}

/// Build the fresh root for the workspace `root` (canonical), read-write when `write`, with
/// the directories `hide` (inside `root`) hidden, and make it this process's root; the working
/// directory is left at `/`.
pub(super) fn enter(root: &Path, write: bool, hide: &[PathBuf]) -> Result<Built, String> {
    // Opened before anything is mounted over the host's view, so that a workspace under
    // `/tmp` (covered by the staging tmpfs next) is still reachable.
    let ws = open_dir(root, "as the workspace")?;
    mount(
        None::<&str>,
        "/",
        None::<&str>,
        MsFlags::MS_REC | MsFlags::MS_PRIVATE,
        None::<&str>,
    )
    .map_err(|e| format!("cannot make the mounts private: {e}"))?;
    let base = Path::new(STAGING);
    tmpfs(
        base,
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
        "mode=0755,size=4m",
    )?;
    let ro = MsFlags::MS_RDONLY | MsFlags::MS_NOSUID | MsFlags::MS_NODEV;
    for d in SYSTEM_DIRS {
        let host = Path::new(d);
        let Ok(meta) = std::fs::symlink_metadata(host) else {
            continue;
        };
        let dst = staged(host);
        if meta.file_type().is_symlink() {
            let target =
                std::fs::read_link(host).map_err(|e| format!("cannot read the link {d}: {e}"))?;
            std::os::unix::fs::symlink(&target, &dst)
                .map_err(|e| format!("cannot create {}: {e}", dst.display()))?;
        } else if meta.is_dir() {
            mkdir(&dst)?;
            bind(d, &dst, ro)?;
        }
    }
    mkdir(&staged(Path::new("/etc")))?;
    mkdir(&staged(Path::new("/dev")))?;
    for f in ETC_FILES.iter().chain(DEV_FILES) {
        let host = Path::new(f);
        if !host.exists() {
            continue;
        }
        let dst = staged(host);
        touch(&dst)?;
        // Devices keep `dev` (they are devices), but are read-only so that `chmod` and the
        // like cannot change the host's node.
        let flags = if f.starts_with("/dev/") {
            MsFlags::MS_RDONLY | MsFlags::MS_NOSUID | MsFlags::MS_NOEXEC
        } else {
            ro | MsFlags::MS_NOEXEC
        };
        bind(f, &dst, flags)?;
    }
    for (name, target) in [
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
    ] {
        let dst = staged(Path::new("/dev")).join(name);
        std::os::unix::fs::symlink(target, &dst)
            .map_err(|e| format!("cannot create {}: {e}", dst.display()))?;
    }
    let tmp = staged(Path::new("/tmp"));
    mkdir(&tmp)?;
    tmpfs(
        &tmp,
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
        &format!("mode=1777,{TMP_SIZE}"),
    )?;
    let proc_dir = staged(Path::new("/proc"));
    mkdir(&proc_dir)?;
    let proc = mount(
        Some("proc"),
        &proc_dir,
        Some("proc"),
        MsFlags::MS_RDONLY | MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
        None::<&str>,
    )
    .is_ok();
    // The workspace, at its own path.
    let dst = staged(root);
    mkdir(&dst)?;
    let mut flags = MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC;
    if !write {
        flags |= MsFlags::MS_RDONLY;
    }
    bind(&format!("/proc/self/fd/{}", ws.as_raw_fd()), &dst, flags)?;
    drop(ws);
    for h in hide {
        hide_dir(&staged(h))?;
    }
    pivot(base)?;
    // The root tmpfs (mount points only) read-only.
    mount(
        None::<&str>,
        "/",
        None::<&str>,
        MsFlags::MS_REMOUNT | MsFlags::MS_BIND | ro,
        None::<&str>,
    )
    .map_err(|e| format!("cannot make the new root read-only: {e}"))?;
    Ok(Built { proc })
}

/// Mount an empty read-only tmpfs over `dir`, opened without following symlinks.
fn hide_dir(dir: &Path) -> Result<(), String> {
    let f = open_dir(dir, "to hide it")?;
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

/// Make `base` the root: `pivot_root` with the old root stacked on the new one and then
/// detached; where the root cannot be pivoted (an initramfs root), move `base` over `/` and
/// `chroot` into it (the old root stays below, unreachable: no descriptor, no `chroot` call).
fn pivot(base: &Path) -> Result<(), String> {
    std::env::set_current_dir(base).map_err(|e| format!("cannot enter {}: {e}", base.display()))?;
    match nix::unistd::pivot_root(".", ".") {
        Ok(()) => {
            umount2(".", MntFlags::MNT_DETACH)
                .map_err(|e| format!("cannot detach the old root: {e}"))?;
        }
        Err(nix::errno::Errno::EINVAL) => {
            mount(Some("."), "/", None::<&str>, MsFlags::MS_MOVE, None::<&str>)
                .map_err(|e| format!("cannot move the new root over /: {e}"))?;
            nix::unistd::chroot(".").map_err(|e| format!("cannot chroot: {e}"))?;
        }
        Err(e) => return Err(format!("cannot pivot_root into the new root: {e}")),
    }
    std::env::set_current_dir("/").map_err(|e| format!("cannot enter the new root: {e}"))
}

/// Close every descriptor above 2 (`close_range` needs `unsafe`; this lists
/// `/proc/self/fd` instead). Call it only while no open `File` or `OwnedFd` is alive above 2,
/// and with `/proc` mounted; returns whether it could list the descriptors.
pub(super) fn close_fds_above_stderr() -> bool {
    let Ok(rd) = std::fs::read_dir("/proc/self/fd") else {
        return false;
    };
    let fds: Vec<i32> = rd
        .flatten()
        .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse().ok()))
        .filter(|&fd| fd > 2)
        .collect();
    // The directory's own descriptor is closed by now (EBADF below, ignored).
    for fd in fds {
        let _ = nix::unistd::close(fd);
    }
    true
}
