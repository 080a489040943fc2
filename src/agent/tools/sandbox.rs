//! The workspace sandbox: resolves a model-supplied path to a real path inside one root.
//!
//! The rule is lexical first, then physical. Lexically, the path must be relative, non-empty
//! after trimming, free of NUL bytes, `~`, backslashes and `..` components (even ones that would
//! stay inside: the model has no reason to write them). Physically, the joined path is
//! canonicalized (which resolves every symlink) and must still lie under the canonical root, so a
//! symlink pointing outside is refused. Files are then opened and the opened handle's real path is
//! checked again (on Linux via `/proc/self/fd`), which closes the window where a symlink is swapped
//! in between the check and the open.

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
            SandboxError::Empty => ToolErrorKind::InvalidArgs,
            SandboxError::Io { .. } | SandboxError::BadRoot { .. } => ToolErrorKind::Failed,
            _ => ToolErrorKind::PermissionDenied,
        };
        ToolError::new(kind, e.to_string())
    }
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
        for part in parents {
            let next = dir.join(part);
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
            if !canon.is_dir() {
                return Err(SandboxError::Io {
                    path: path.into(),
                    reason: format!("{} is not a directory", rel.display()),
                });
            }
            dir = canon;
        }
        let target = dir.join(last);
        if std::fs::symlink_metadata(&target).is_ok_and(|m| m.file_type().is_symlink()) {
            return Err(escape());
        }
        Ok(target)
    }
}
