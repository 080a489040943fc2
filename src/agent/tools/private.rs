//! boyd's own files, hidden from every tool wherever they sit: the config directory (it holds
//! the approval key that signs tokens and audit chains), the home directory (models, runs,
//! memory, profiles) and the approval key itself.
//!
//! A workspace may contain them (`--workspace ~`, or `BOYD_CONFIG_DIR` set under the
//! workspace). The comparison is by resolved path, never by name: each guarded location is
//! resolved once (symbolic links followed; a location that does not exist yet is resolved
//! through its deepest existing ancestor), and a path a tool resolved is refused when it is that
//! location or lies under it. Files are also compared by device and inode, so a hard link to
//! the approval key under another name is refused too.
//!
//! A guarded directory that *contains* the workspace root (an eval workspace made under the
//! home) would refuse every path of the workspace; it guards nothing there: everything of it
//! outside the workspace is already out of reach, and the key keeps its own guard.

use std::path::{Path, PathBuf};

use crate::agent::approval::{config_dir, KEY_FILE};

/// A file's identity: (device, inode).
type FileId = (u64, u64);

#[cfg(unix)]
fn file_id(m: &std::fs::Metadata) -> Option<FileId> {
    use std::os::unix::fs::MetadataExt;
    Some((m.dev(), m.ino()))
}

#[cfg(not(unix))]
fn file_id(_m: &std::fs::Metadata) -> Option<FileId> {
    None
}

/// `p` made absolute and resolved: the deepest existing ancestor canonicalized, the rest
/// appended as given (so a directory created later at that place is still recognised).
fn resolve_lenient(p: &Path) -> PathBuf {
    let abs = if p.is_absolute() {
        p.to_path_buf()
    } else {
        match std::env::current_dir() {
            Ok(c) => c.join(p),
            Err(_) => p.to_path_buf(),
        }
    };
    let mut tail = Vec::new();
    let mut cur = abs.as_path();
    loop {
        if let Ok(mut c) = cur.canonicalize() {
            for part in tail.iter().rev() {
                c.push(part);
            }
            return c;
        }
        match (cur.parent(), cur.file_name()) {
            (Some(parent), Some(name)) => {
                tail.push(name.to_os_string());
                cur = parent;
            }
            _ => return abs,
        }
    }
}

/// The locations no tool may list, read, search, size, write or delete.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Private {
    /// Resolved directories and files.
    paths: Vec<PathBuf>,
    /// Device and inode of the guarded files (the approval key).
    ids: Vec<FileId>,
}

impl Private {
    /// Nothing guarded.
    pub fn none() -> Self {
        Self::default()
    }

    /// boyd's config directory (`BOYD_CONFIG_DIR`, else the platform's), its approval key and
    /// boyd's home (`BOYD_HOME`, else the user cache directory), as this process sees them.
    pub fn from_env() -> Self {
        let mut p = Self::none();
        if let Ok(dir) = config_dir() {
            p = p.with(&dir);
        }
        if let Ok(home) = crate::home::boyd_home() {
            p = p.with(&home);
        }
        p
    }

    /// Also guard `path` (a directory or a file); a directory's approval key, when there is
    /// one, is guarded by device and inode too.
    pub fn with(mut self, path: &Path) -> Self {
        let real = resolve_lenient(path);
        for f in [real.clone(), real.join(KEY_FILE)] {
            if let Some(id) = std::fs::metadata(&f)
                .ok()
                .filter(std::fs::Metadata::is_file)
                .and_then(|m| file_id(&m))
            {
                if !self.ids.contains(&id) {
                    self.ids.push(id);
                }
            }
        }
        if !self.paths.contains(&real) {
            self.paths.push(real);
        }
        self
    }

    /// Whether the resolved path `real` is a guarded location or lies under one, for a
    /// workspace whose canonical root is `root` (a guarded directory holding the root guards
    /// nothing there; see the module documentation).
    pub fn covers(&self, root: &Path, real: &Path) -> bool {
        self.paths.iter().any(|g| {
            let holds_root = root.starts_with(g) && root != g.as_path();
            !holds_root && real.starts_with(g)
        })
    }

    /// Whether `meta` (of a file, however it was reached) is a guarded file: the approval key
    /// under any name.
    pub fn is_guarded_file(&self, meta: &std::fs::Metadata) -> bool {
        meta.is_file() && file_id(meta).is_some_and(|id| self.ids.contains(&id))
    }

    /// [`Private::covers`] or [`Private::is_guarded_file`] for the entry at `real` (its
    /// metadata read without following a final link).
    pub fn hides(&self, root: &Path, real: &Path) -> bool {
        self.covers(root, real)
            || std::fs::symlink_metadata(real).is_ok_and(|m| self.is_guarded_file(&m))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_guarded_dir_covers_its_tree_by_resolved_path_but_not_a_workspace_inside_it() {
        let t = tempfile::tempdir().expect("tempdir");
        let root = t.path().canonicalize().expect("canon");
        let cfg = root.join("cfg");
        std::fs::create_dir(&cfg).expect("mkdir");
        std::fs::write(cfg.join(KEY_FILE), [7u8; 32]).expect("key");
        // Given through a symlink: the resolved directory is what is guarded.
        #[cfg(unix)]
        std::os::unix::fs::symlink(&cfg, root.join("alias")).expect("symlink");
        #[cfg(unix)]
        let p = Private::none().with(&root.join("alias"));
        #[cfg(not(unix))]
        let p = Private::none().with(&cfg);
        assert!(p.covers(&root, &cfg));
        assert!(p.covers(&root, &cfg.join(KEY_FILE)));
        assert!(!p.covers(&root, &root.join("cfgx")));
        // A hard link to the key elsewhere is the key.
        std::fs::hard_link(cfg.join(KEY_FILE), root.join("copy")).expect("link");
        assert!(p.hides(&root, &root.join("copy")));
        assert!(!p.hides(&root, &root));
        // A workspace inside the guarded directory is not refused wholesale.
        let inner = cfg.join("ws");
        std::fs::create_dir(&inner).expect("mkdir");
        assert!(!p.covers(&inner, &inner.join("a.txt")));
        // A location that does not exist yet is still recognised once created.
        let later = Private::none().with(&root.join("later/boyd"));
        assert!(later.covers(&root, &root.join("later/boyd/approval.key")));
    }
}
