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

use std::fs::File;
use std::path::{Component, Path, PathBuf};

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
    /// The path is a symbolic link (writers and deletion never follow one).
    #[error("{path} is a symbolic link; file tools do not write, or delete, through links")]
    Symlink {
        /// The path as given.
        path: String,
    },
    /// The path is not a regular file.
    #[error("{path} is not a regular file ({kind}); file tools only change regular files")]
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
            SandboxError::Io { .. } | SandboxError::BadRoot { .. } => ToolErrorKind::Failed,
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

/// A workspace root that paths are resolved inside.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sandbox {
    root: PathBuf,
}

impl Sandbox {
    /// A sandbox rooted at `root` (canonicalized; must be an existing directory).
    pub fn new(root: impl AsRef<Path>) -> Result<Self, SandboxError> {
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
        Ok(Self { root: canon })
    }

    /// The canonical root.
    pub fn root(&self) -> &Path {
        &self.root
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
        Ok(canon)
    }

    /// Open a file inside the workspace for reading, re-checking the opened handle's real path.
    pub fn open_file(&self, path: &str) -> Result<(PathBuf, File), SandboxError> {
        let real = self.resolve(path)?;
        let file = File::open(&real).map_err(|e| SandboxError::Io {
            path: path.into(),
            reason: e.to_string(),
        })?;
        self.check_handle(path, &file)?;
        Ok((real, file))
    }

    /// Check that an opened file is really inside the root (Linux: via `/proc/self/fd`).
    #[cfg(target_os = "linux")]
    fn check_handle(&self, path: &str, file: &File) -> Result<(), SandboxError> {
        use std::os::fd::AsRawFd;
        let link = PathBuf::from(format!("/proc/self/fd/{}", file.as_raw_fd()));
        match std::fs::read_link(&link) {
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
        for part in parents {
            let next = dir.join(part);
            if self.is_protected(&next) {
                return Err(protected());
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
                if real != target || self.is_protected(&real) {
                    return Err(SandboxError::Escape { path: path.into() });
                }
            }
        }
        let m = file.metadata().map_err(io)?;
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
