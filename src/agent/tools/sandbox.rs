//! The workspace sandbox: resolves a model-supplied path to a real path inside one root.
//!
//! The rule is lexical first, then physical. Lexically, the path must be relative, non-empty
//! after trimming, free of NUL bytes, `~`, backslashes and `..` components (even ones that would
//! stay inside: the model has no reason to write them). Physically, the joined path is
//! canonicalized (which resolves every symlink) and must still lie under the canonical root, so a
//! symlink pointing outside is refused. Files are then opened and the opened handle's real path is
//! checked again (on Linux via `/proc/self/fd`), which closes the window where a symlink is swapped
//! in between the check and the open.
//!
//! The workspace's `.boyd/` directory (its policy) is protected: [`Sandbox::prepare_write`],
//! [`Sandbox::open_for_write`] and [`Sandbox::resolve_for_delete`] refuse any path whose
//! *resolved* location is `.boyd/` or lies under it (or under what a `.boyd` symlink points
//! to), however the path is spelled: `./.boyd/x`, `a/./../.boyd` (refused for its `..`
//! anyway), `link/x` with `link -> .boyd`. Writers refuse to write through a symbolic link, into
//! a FIFO or device, or into a file with other hard links; deletion removes only regular files
//! and never follows a symbolic link to its target.
//!
//! boyd's own files ([`Private`]: the config directory with the approval key, and boyd's home)
//! are refused to every tool, reading included, wherever they sit: [`Sandbox::resolve`] refuses
//! a path that resolves into one, and the walks skip them ([`Sandbox::hides`]).
//!
//! Every tool that opens a workspace file for reading goes through [`Sandbox::open_file`] (or
//! [`Sandbox::read_bytes`], which also bounds the read): the resolved path must be a regular
//! file (a FIFO, socket or device is refused from its metadata, before any open), it is opened
//! without blocking (`O_NONBLOCK`, in case one is swapped in), and the opened handle is checked
//! again: its real path, its type, and that it is the file that was checked.

use std::fs::File;
use std::io::Read as _;
use std::path::{Component, Path, PathBuf};

use super::private::Private;
use super::{ToolError, ToolErrorKind};

/// Why a path was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SandboxError {
    /// The path is empty.
    #[error("the path is empty; give a path relative to the workspace, e.g. \"notes.txt\"")]
    Empty,
    /// The path contains a NUL byte.
    #[error("the path contains a NUL byte")]
    NulByte,
    /// The path is absolute.
    #[error("absolute paths are not allowed ({path}); give a path relative to the workspace")]
    Absolute {
        /// The path as given.
        path: String,
    },
    /// The path starts with `~`.
    #[error(
        "home-directory paths (~) are not allowed ({path}); give a path relative to the workspace"
    )]
    Home {
        /// The path as given.
        path: String,
    },
    /// The path contains a backslash.
    #[error("backslashes are not allowed in paths ({path}); use / as the separator")]
    Backslash {
        /// The path as given.
        path: String,
    },
    /// The path contains a `..` component.
    #[error("\"..\" is not allowed in paths ({path}); everything is inside the workspace")]
    ParentDir {
        /// The path as given.
        path: String,
    },
    /// The path resolves (through a symlink) outside the workspace.
    #[error("{path} resolves outside the workspace (through a symbolic link)")]
    Escape {
        /// The path as given.
        path: String,
    },
    /// Nothing exists at the path.
    #[error("{path} does not exist in the workspace")]
    NotFound {
        /// The path as given.
        path: String,
    },
    /// The path is, or is under, the workspace's protected `.boyd/` directory.
    #[error("{path} is in the workspace's .boyd/ directory, which holds its policy; the agent cannot change it")]
    Protected {
        /// The path as given.
        path: String,
    },
    /// The path is, or is under, boyd's own config or home directory, or is the approval key.
    #[error("{path} is boyd's own configuration or home directory (it holds the approval key); no tool may read, list or change it. Give the workspace another directory")]
    Private {
        /// The path as given.
        path: String,
    },
    /// The file is larger than the caller reads.
    #[error("{path} is {size} bytes, more than the {limit} byte limit for this file")]
    TooLarge {
        /// The path as given.
        path: String,
        /// Its size.
        size: u64,
        /// The limit.
        limit: u64,
    },
    /// The file changed between its check and its open.
    #[error("{path} changed while it was being opened; try again")]
    Changed {
        /// The path as given.
        path: String,
    },
    /// The path is a symbolic link (writers and deletion never follow one).
    #[error("{path} is a symbolic link; file tools do not write, or delete, through links")]
    Symlink {
        /// The path as given.
        path: String,
    },
    /// The path is not a regular file.
    #[error("{path} is not a regular file ({kind}); file tools only open regular files")]
    NotRegular {
        /// The path as given.
        path: String,
        /// What it is.
        kind: &'static str,
    },
    /// The file has other hard links (writing it would change them too).
    #[error("{path} has {links} hard links; writing it would change files elsewhere too")]
    HardLinked {
        /// The path as given.
        path: String,
        /// Its link count.
        links: u64,
    },
    /// The root itself is unusable.
    #[error("workspace root {root} is not a directory: {reason}")]
    BadRoot {
        /// The root.
        root: PathBuf,
        /// Why.
        reason: String,
    },
    /// Some other I/O error.
    #[error("cannot access {path}: {reason}")]
    Io {
        /// The path as given.
        path: String,
        /// The OS error.
        reason: String,
    },
}

impl From<SandboxError> for ToolError {
    fn from(e: SandboxError) -> Self {
        let kind = match e {
            SandboxError::NotFound { .. } => ToolErrorKind::NotFound,
            SandboxError::Empty | SandboxError::NotRegular { .. } => ToolErrorKind::InvalidArgs,
            SandboxError::Io { .. }
            | SandboxError::BadRoot { .. }
            | SandboxError::TooLarge { .. }
            | SandboxError::Changed { .. } => ToolErrorKind::Failed,
            _ => ToolErrorKind::PermissionDenied,
        };
        ToolError::new(kind, e.to_string())
    }
}

/// The workspace directory the agent may not change.
pub const PROTECTED_DIR: &str = ".boyd";

fn kind_of(ft: std::fs::FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if ft.is_fifo() {
            return "a FIFO";
        }
        if ft.is_socket() {
            return "a socket";
        }
        if ft.is_block_device() || ft.is_char_device() {
            return "a device";
        }
    }
    if ft.is_dir() {
        "a directory"
    } else if ft.is_symlink() {
        "a symbolic link"
    } else {
        "not a regular file"
    }
}

#[cfg(unix)]
fn link_count(m: &std::fs::Metadata) -> u64 {
    use std::os::unix::fs::MetadataExt;
    m.nlink()
}

#[cfg(not(unix))]
fn link_count(_m: &std::fs::Metadata) -> u64 {
    1
}

/// Open `path` for reading without blocking on a FIFO or device (Linux: `O_NONBLOCK`, which
/// changes nothing for a regular file; `O_NOCTTY`, so a terminal never becomes ours).
fn open_nonblocking(path: &Path) -> std::io::Result<File> {
    let mut opts = std::fs::OpenOptions::new();
    opts.read(true);
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY);
    }
    opts.open(path)
}

/// Whether two metadata describe one file (device and inode; length and type elsewhere).
#[cfg(unix)]
fn same_file(a: &std::fs::Metadata, b: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::MetadataExt;
    a.dev() == b.dev() && a.ino() == b.ino()
}

#[cfg(not(unix))]
fn same_file(a: &std::fs::Metadata, b: &std::fs::Metadata) -> bool {
    a.len() == b.len() && a.file_type() == b.file_type()
}

/// Open the regular file at `real` for reading (`shown` names it in errors): refused from its
/// metadata when it is not a regular file (before any open, so a FIFO or device never blocks),
/// opened without blocking, and checked again through the handle: still a regular file, and
/// the very file that was checked. The first half of every read of a path boyd did not choose
/// itself: workspace files ([`Sandbox::open_file`]), policy and memory files.
pub fn open_regular(shown: &str, real: &Path) -> Result<(File, std::fs::Metadata), SandboxError> {
    let io = |e: std::io::Error| {
        if e.kind() == std::io::ErrorKind::NotFound {
            SandboxError::NotFound { path: shown.into() }
        } else {
            SandboxError::Io {
                path: shown.into(),
                reason: e.to_string(),
            }
        }
    };
    let before = std::fs::metadata(real).map_err(io)?;
    if !before.is_file() {
        return Err(SandboxError::NotRegular {
            path: shown.into(),
            kind: kind_of(before.file_type()),
        });
    }
    let file = open_nonblocking(real).map_err(io)?;
    let meta = file.metadata().map_err(io)?;
    if !meta.is_file() {
        return Err(SandboxError::NotRegular {
            path: shown.into(),
            kind: kind_of(meta.file_type()),
        });
    }
    if !same_file(&before, &meta) {
        return Err(SandboxError::Changed { path: shown.into() });
    }
    Ok((file, meta))
}

/// [`open_regular`], then read at most `limit` bytes: a larger file is refused from its size
/// before anything is read, and the read stops after `limit` bytes whatever the size said (a
/// file that grew is refused too).
pub fn read_regular(shown: &str, real: &Path, limit: u64) -> Result<Vec<u8>, SandboxError> {
    let (file, meta) = open_regular(shown, real)?;
    read_limited(shown, file, &meta, limit)
}

fn read_limited(
    path: &str,
    file: File,
    meta: &std::fs::Metadata,
    limit: u64,
) -> Result<Vec<u8>, SandboxError> {
    let too_large = |size| SandboxError::TooLarge {
        path: path.into(),
        size,
        limit,
    };
    if meta.len() > limit {
        return Err(too_large(meta.len()));
    }
    let mut buf = Vec::with_capacity(meta.len() as usize);
    file.take(limit.saturating_add(1))
        .read_to_end(&mut buf)
        .map_err(|e| SandboxError::Io {
            path: path.into(),
            reason: e.to_string(),
        })?;
    if buf.len() as u64 > limit {
        return Err(too_large(buf.len() as u64));
    }
    Ok(buf)
}

/// A workspace root that paths are resolved inside.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sandbox {
    root: PathBuf,
    private: Private,
}

impl Sandbox {
    /// A sandbox rooted at `root` (canonicalized; must be an existing directory), hiding
    /// boyd's own directories as this process finds them ([`Private::from_env`]).
    pub fn new(root: impl AsRef<Path>) -> Result<Self, SandboxError> {
        Self::with_private(root, Private::from_env())
    }

    /// A sandbox rooted at `root` that hides `private` (and nothing else of boyd's).
    pub fn with_private(root: impl AsRef<Path>, private: Private) -> Result<Self, SandboxError> {
        let root = root.as_ref();
        let canon = root.canonicalize().map_err(|e| SandboxError::BadRoot {
            root: root.to_path_buf(),
            reason: e.to_string(),
        })?;
        if !canon.is_dir() {
            return Err(SandboxError::BadRoot {
                root: root.to_path_buf(),
                reason: "not a directory".into(),
            });
        }
        Ok(Self {
            root: canon,
            private,
        })
    }

    /// The same sandbox also hiding `path` (a directory or file, see [`Private::with`]).
    pub fn guarding(mut self, path: impl AsRef<Path>) -> Self {
        self.private = self.private.with(path.as_ref());
        self
    }

    /// The canonical root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// What this sandbox hides of boyd's own.
    pub fn private(&self) -> &Private {
        &self.private
    }

    /// Whether the entry at `real` (a resolved path, or a canonical directory joined with one
    /// plain name, as a walk that never follows links makes) is boyd's own: walks skip it.
    pub fn hides(&self, real: &Path) -> bool {
        self.private.hides(&self.root, real)
    }

    /// Whether a resolved path is boyd's own (by path only, no file system access).
    fn is_private(&self, real: &Path) -> bool {
        self.private.covers(&self.root, real)
    }

    /// Whether a path (resolved, or a canonical directory joined with one plain name) is the
    /// protected `.boyd/` directory or lies under it, or under what a `.boyd` symlink points to.
    pub fn is_protected(&self, real: &Path) -> bool {
        let lexical = self.root.join(PROTECTED_DIR);
        if real.starts_with(&lexical) {
            return true;
        }
        match lexical.canonicalize() {
            // A `.boyd` that resolves to the root itself protects nothing more than the root's
            // own entry (refusing everything would be a denial of service, not a protection).
            Ok(c) if c != self.root => real.starts_with(&c),
            _ => false,
        }
    }

    /// Check a path lexically, returning its normal components joined to the root (unresolved).
    pub fn lexical(&self, path: &str) -> Result<PathBuf, SandboxError> {
        let given = path.to_string();
        if path.contains('\0') {
            return Err(SandboxError::NulByte);
        }
        let trimmed = path.trim();
        if trimmed.is_empty() {
            return Err(SandboxError::Empty);
        }
        if trimmed.starts_with('~') {
            return Err(SandboxError::Home { path: given });
        }
        if trimmed.contains('\\') {
            return Err(SandboxError::Backslash { path: given });
        }
        // Windows drive prefixes ("C:") are absolute everywhere for our purposes.
        let bytes = trimmed.as_bytes();
        if bytes.len() >= 2 && bytes[1] == b':' && bytes[0].is_ascii_alphabetic() {
            return Err(SandboxError::Absolute { path: given });
        }
        let p = Path::new(trimmed);
        let mut out = self.root.clone();
        for c in p.components() {
            match c {
                Component::Normal(part) => out.push(part),
                Component::CurDir => {}
                Component::ParentDir => return Err(SandboxError::ParentDir { path: given }),
                Component::RootDir | Component::Prefix(_) => {
                    return Err(SandboxError::Absolute { path: given })
                }
            }
        }
        Ok(out)
    }

    /// Resolve an existing path inside the workspace: lexical checks, then canonicalize and
    /// require the result to lie under the root.
    pub fn resolve(&self, path: &str) -> Result<PathBuf, SandboxError> {
        let joined = self.lexical(path)?;
        let canon = match joined.canonicalize() {
            Ok(c) => c,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                // A dangling symlink or a missing file. A symlink whose target is missing may
                // point outside; say "escape" only if we can tell, else "not found".
                if let Ok(target) = std::fs::read_link(&joined) {
                    let abs = if target.is_absolute() {
                        target
                    } else {
                        joined.parent().unwrap_or(&self.root).join(target)
                    };
                    if !abs.starts_with(&self.root) {
                        return Err(SandboxError::Escape { path: path.into() });
                    }
                }
                return Err(SandboxError::NotFound { path: path.into() });
            }
            Err(e) => {
                return Err(SandboxError::Io {
                    path: path.into(),
                    reason: e.to_string(),
                })
            }
        };
        if !canon.starts_with(&self.root) {
            return Err(SandboxError::Escape { path: path.into() });
        }
        if self.is_private(&canon) {
            return Err(SandboxError::Private { path: path.into() });
        }
        Ok(canon)
    }

    /// Open a regular file inside the workspace for reading: the resolved path (inside the
    /// root, not boyd's own) must be a regular file by its metadata before anything is opened,
    /// the open does not block, and the opened handle is checked again (its real path, that it
    /// is a regular file, and that it is the file checked). Returns the resolved path and the
    /// file.
    pub fn open_file(&self, path: &str) -> Result<(PathBuf, File), SandboxError> {
        let (real, file, _) = self.open_checked(path)?;
        Ok((real, file))
    }

    /// Read a workspace file opened by [`Sandbox::open_file`], at most `limit` bytes: a larger
    /// file is refused from its size before anything is read, and the read itself stops after
    /// `limit` bytes whatever the size said (a file that grows is refused too).
    pub fn read_bytes(&self, path: &str, limit: u64) -> Result<(PathBuf, Vec<u8>), SandboxError> {
        let (real, file, meta) = self.open_checked(path)?;
        Ok((real, read_limited(path, file, &meta, limit)?))
    }

    /// [`Sandbox::read_bytes`] for a file a walk found: `real` is a canonical directory of the
    /// workspace joined with a plain name (walks never follow links). boyd's own files and
    /// anything outside the root are refused like a resolved path.
    pub fn read_found(&self, real: &Path, limit: u64) -> Result<Vec<u8>, SandboxError> {
        let shown = super::rel_display(&self.root, real);
        if !real.starts_with(&self.root) {
            return Err(SandboxError::Escape { path: shown });
        }
        if self.is_private(real) {
            return Err(SandboxError::Private { path: shown });
        }
        let (file, meta) = self.open_resolved(&shown, real)?;
        read_limited(&shown, file, &meta, limit)
    }

    fn open_checked(&self, path: &str) -> Result<(PathBuf, File, std::fs::Metadata), SandboxError> {
        let real = self.resolve(path)?;
        let (file, meta) = self.open_resolved(path, &real)?;
        Ok((real, file, meta))
    }

    /// Open the resolved `real` (`path` as given, for errors) as [`Sandbox::open_file`] does.
    fn open_resolved(
        &self,
        path: &str,
        real: &Path,
    ) -> Result<(File, std::fs::Metadata), SandboxError> {
        let (file, meta) = open_regular(path, real)?;
        self.check_handle(path, &file)?;
        if self.private.is_guarded_file(&meta) {
            return Err(SandboxError::Private { path: path.into() });
        }
        Ok((file, meta))
    }

    /// Check that an opened file is really inside the root (Linux: via `/proc/self/fd`).
    #[cfg(target_os = "linux")]
    fn check_handle(&self, path: &str, file: &File) -> Result<(), SandboxError> {
        use std::os::fd::AsRawFd;
        let link = PathBuf::from(format!("/proc/self/fd/{}", file.as_raw_fd()));
        match std::fs::read_link(&link) {
            Ok(real) if self.is_private(&real) => Err(SandboxError::Private { path: path.into() }),
            Ok(real) if real.starts_with(&self.root) => Ok(()),
            Ok(_) => Err(SandboxError::Escape { path: path.into() }),
            // /proc not mounted: fall back to the canonicalize check already done.
            Err(_) => Ok(()),
        }
    }

    #[cfg(not(target_os = "linux"))]
    fn check_handle(&self, path: &str, _file: &File) -> Result<(), SandboxError> {
        let again = self.resolve(path)?;
        if again.starts_with(&self.root) {
            Ok(())
        } else {
            Err(SandboxError::Escape { path: path.into() })
        }
    }

    /// Create the parent directories of a relative path and return the path to write, refusing
    /// anything that would land outside the root. Used to materialize eval workspaces.
    ///
    /// Parents are walked and created one level at a time, and each existing one is resolved
    /// and checked before anything is created beneath it, so a symlink that leads outside never
    /// gets a directory made through it (`create_dir_all` on the joined path would).
    pub fn prepare_write(&self, path: &str) -> Result<PathBuf, SandboxError> {
        let joined = self.lexical(path)?;
        let io = |e: std::io::Error| SandboxError::Io {
            path: path.into(),
            reason: e.to_string(),
        };
        let escape = || SandboxError::Escape { path: path.into() };
        let rel = joined.strip_prefix(&self.root).map_err(|_| escape())?;
        let parts: Vec<&std::ffi::OsStr> = rel.iter().collect();
        let Some((last, parents)) = parts.split_last() else {
            return Err(SandboxError::Empty);
        };
        // `dir` is always a canonical directory under the root.
        let mut dir = self.root.clone();
        let protected = || SandboxError::Protected { path: path.into() };
        let private = || SandboxError::Private { path: path.into() };
        for part in parents {
            let next = dir.join(part);
            if self.is_protected(&next) {
                return Err(protected());
            }
            if self.is_private(&next) {
                return Err(private());
            }
            match std::fs::symlink_metadata(&next) {
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    std::fs::create_dir(&next).map_err(io)?;
                }
                Err(e) => return Err(io(e)),
            }
            // Resolve what is there now (also re-checks a directory just created, in case a
            // symlink was swapped in).
            let canon = match next.canonicalize() {
                Ok(c) => c,
                // a dangling symlink: never create through it
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(escape()),
                Err(e) => return Err(io(e)),
            };
            if !canon.starts_with(&self.root) {
                return Err(escape());
            }
            if self.is_protected(&canon) {
                return Err(protected());
            }
            if self.is_private(&canon) {
                return Err(private());
            }
            if !canon.is_dir() {
                return Err(SandboxError::Io {
                    path: path.into(),
                    reason: format!("{} is not a directory", rel.display()),
                });
            }
            dir = canon;
        }
        let target = dir.join(last);
        if self.is_protected(&target) {
            return Err(protected());
        }
        if self.hides(&target) {
            return Err(private());
        }
        if let Ok(m) = std::fs::symlink_metadata(&target) {
            if m.file_type().is_symlink() {
                return Err(escape());
            }
            if !m.is_file() {
                return Err(SandboxError::NotRegular {
                    path: path.into(),
                    kind: kind_of(m.file_type()),
                });
            }
        }
        Ok(target)
    }

    /// Open a file for writing (created when missing, truncated): [`Sandbox::prepare_write`],
    /// then the opened handle's real path and type are checked again before anything is written,
    /// so a symlink or FIFO swapped in after the check is refused.
    pub fn open_for_write(&self, path: &str) -> Result<(PathBuf, File), SandboxError> {
        let target = self.prepare_write(path)?;
        let io = |e: std::io::Error| SandboxError::Io {
            path: path.into(),
            reason: e.to_string(),
        };
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .open(&target)
            .map_err(io)?;
        self.check_handle(path, &file)?;
        #[cfg(target_os = "linux")]
        {
            use std::os::fd::AsRawFd;
            let link = PathBuf::from(format!("/proc/self/fd/{}", file.as_raw_fd()));
            if let Ok(real) = std::fs::read_link(&link) {
                if real != target || self.is_protected(&real) || self.is_private(&real) {
                    return Err(SandboxError::Escape { path: path.into() });
                }
            }
        }
        let m = file.metadata().map_err(io)?;
        if self.private.is_guarded_file(&m) {
            return Err(SandboxError::Private { path: path.into() });
        }
        if !m.is_file() {
            return Err(SandboxError::NotRegular {
                path: path.into(),
                kind: kind_of(m.file_type()),
            });
        }
        let links = link_count(&m);
        if links > 1 {
            return Err(SandboxError::HardLinked {
                path: path.into(),
                links,
            });
        }
        file.set_len(0).map_err(io)?;
        Ok((target, file))
    }

    /// The path to delete: its parent resolved inside the workspace, the last component not
    /// followed. Only a regular file outside `.boyd/` qualifies; a symbolic link is refused (its
    /// target is never deleted through it).
    pub fn resolve_for_delete(&self, path: &str) -> Result<PathBuf, SandboxError> {
        let joined = self.lexical(path)?;
        let rel = joined
            .strip_prefix(&self.root)
            .map_err(|_| SandboxError::Escape { path: path.into() })?;
        let parts: Vec<&std::ffi::OsStr> = rel.iter().collect();
        let Some((last, parents)) = parts.split_last() else {
            return Err(SandboxError::Empty);
        };
        let mut parent = self.root.clone();
        for p in parents {
            parent.push(p);
        }
        let parent = match parent.canonicalize() {
            Ok(c) => c,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(SandboxError::NotFound { path: path.into() })
            }
            Err(e) => {
                return Err(SandboxError::Io {
                    path: path.into(),
                    reason: e.to_string(),
                })
            }
        };
        if !parent.starts_with(&self.root) {
            return Err(SandboxError::Escape { path: path.into() });
        }
        let target = parent.join(last);
        if self.is_protected(&target) {
            return Err(SandboxError::Protected { path: path.into() });
        }
        if self.hides(&target) {
            return Err(SandboxError::Private { path: path.into() });
        }
        let m = match std::fs::symlink_metadata(&target) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(SandboxError::NotFound { path: path.into() })
            }
            Err(e) => {
                return Err(SandboxError::Io {
                    path: path.into(),
                    reason: e.to_string(),
                })
            }
        };
        if m.file_type().is_symlink() {
            return Err(SandboxError::Symlink { path: path.into() });
        }
        if !m.is_file() {
            return Err(SandboxError::NotRegular {
                path: path.into(),
                kind: kind_of(m.file_type()),
            });
        }
        Ok(target)
    }
}
