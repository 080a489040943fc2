//! Memory across runs: verified facts and action outcomes per workspace, retrieved by BM25.
//!
//! One JSON file per workspace under `$BOYD_HOME/memory/` (named by the SHA-256 of the
//! workspace's canonical path; runs without a workspace share `no-workspace.json`). At the end of
//! a run the facts it verified (confidence at least 0.8) and its action outcomes are stored; the
//! next run's Orient retrieves the entries whose text ranks best against the objective and the
//! latest output, and adds them to the world model marked as prior knowledge, with their
//! confidence discounted. A retrieved fact that contradicts a new observation is a contradiction
//! like any other. `boyd memory list | forget KEY` manage the store.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::agent::condense::sha256_hex;
use crate::agent::rundir::utc_timestamp;

/// Confidence of a stored fact is multiplied by this when retrieved.
pub const PRIOR_DISCOUNT: f64 = 0.9;
/// Facts below this confidence are not stored.
pub const STORE_MIN_CONFIDENCE: f64 = 0.8;
/// Most entries per workspace (oldest dropped first).
pub const MAX_ENTRIES: usize = 2000;

/// What an entry records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MemoryKind {
    /// A fact.
    Fact,
    /// An action's outcome.
    Outcome,
    /// A learned (task shape, state → action) pattern (`super::learned`).
    Pattern,
}

/// One remembered item.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MemoryEntry {
    /// Key (as in the world model).
    pub key: String,
    /// Value.
    pub value: String,
    /// Confidence when stored.
    pub confidence: f64,
    /// Run id that learned it.
    pub source: String,
    /// Kind.
    pub kind: MemoryKind,
    /// UTC time stored.
    pub time: String,
}

/// Prefix of an outcome entry's key (then the action: tool and arguments).
pub const OUTCOME_PREFIX: &str = "outcome ";

/// An earlier run's outcome of an action, recalled into Orient.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecalledOutcome {
    /// The action (tool and arguments).
    pub action: String,
    /// How it ended and what it returned (`verified: 42`).
    pub result: String,
    /// The run it happened in.
    pub run: String,
}

impl RecalledOutcome {
    /// The outcome an entry records.
    pub fn of(e: &MemoryEntry) -> Self {
        Self {
            action: e.key.strip_prefix(OUTCOME_PREFIX).unwrap_or(&e.key).into(),
            result: e.value.clone(),
            run: e.source.clone(),
        }
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct MemoryFile {
    workspace: String,
    entries: Vec<MemoryEntry>,
}

/// Errors of the memory store.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MemoryError {
    /// I/O.
    #[error("memory: cannot {action} {path}")]
    Io {
        /// What we were doing.
        action: &'static str,
        /// Path.
        path: PathBuf,
        /// OS error.
        #[source]
        source: std::io::Error,
    },
    /// Bad JSON.
    #[error("memory file {path} is not valid: {reason}; delete it to start over")]
    Corrupt {
        /// Path.
        path: PathBuf,
        /// Why.
        reason: String,
    },
}

/// Largest memory file read (a store holds short entries; one this large is not boyd's).
pub const MEMORY_MAX_BYTES: u64 = 16 << 20;

/// The store of one workspace.
#[derive(Debug, Clone)]
pub struct MemoryStore {
    path: PathBuf,
    workspace: String,
    entries: Vec<MemoryEntry>,
}

/// The workspace's name in the store: its canonical path, or `(none)`.
pub fn workspace_label(workspace: Option<&Path>) -> String {
    match workspace {
        Some(p) => p
            .canonicalize()
            .unwrap_or_else(|_| p.to_path_buf())
            .display()
            .to_string(),
        None => "(none)".into(),
    }
}

/// The store file for a workspace.
pub fn store_path(home: &Path, workspace: Option<&Path>) -> PathBuf {
    let name = match workspace {
        Some(_) => {
            let h = sha256_hex(workspace_label(workspace).as_bytes());
            format!("{}.json", &h[..16])
        }
        None => "no-workspace.json".into(),
    };
    home.join("memory").join(name)
}

/// Lowercase alphanumeric tokens.
pub fn tokenize(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|t| !t.is_empty())
        .map(|t| t.to_lowercase())
        .collect()
}

impl MemoryStore {
    /// Open (or start) the store of `workspace` under `home`.
    pub fn open(home: &Path, workspace: Option<&Path>) -> Result<Self, MemoryError> {
        let path = store_path(home, workspace);
        let label = workspace_label(workspace);
        use crate::agent::tools::sandbox::{read_regular, SandboxError};
        let corrupt = |reason: String| MemoryError::Corrupt {
            path: path.clone(),
            reason,
        };
        // A regular file of bounded size, read without blocking (the shared bounded read).
        let file = match read_regular(&path.display().to_string(), &path, MEMORY_MAX_BYTES) {
            Ok(bytes) => {
                serde_json::from_slice::<MemoryFile>(&bytes).map_err(|e| corrupt(e.to_string()))?
            }
            Err(SandboxError::NotFound { .. }) => MemoryFile::default(),
            Err(e @ (SandboxError::TooLarge { .. } | SandboxError::NotRegular { .. })) => {
                return Err(corrupt(e.to_string()))
            }
            Err(e) => {
                return Err(MemoryError::Io {
                    action: "read",
                    path: path.clone(),
                    source: std::io::Error::other(e.to_string()),
                })
            }
        };
        Ok(Self {
            path,
            workspace: label,
            entries: file.entries,
        })
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }
    /// The workspace label.
    pub fn workspace(&self) -> &str {
        &self.workspace
    }
    /// All entries, oldest first.
    pub fn entries(&self) -> &[MemoryEntry] {
        &self.entries
    }

    /// Add an entry, replacing one with the same key.
    pub fn upsert(
        &mut self,
        key: &str,
        value: &str,
        confidence: f64,
        source: &str,
        kind: MemoryKind,
    ) {
        self.entries.retain(|e| e.key != key);
        self.entries.push(MemoryEntry {
            key: key.into(),
            value: value.into(),
            confidence,
            source: source.into(),
            kind,
            time: utc_timestamp(),
        });
        if self.entries.len() > MAX_ENTRIES {
            let extra = self.entries.len() - MAX_ENTRIES;
            self.entries.drain(..extra);
        }
    }

    /// Forget entries whose key is `key` (exactly, after normalizing); returns how many.
    pub fn forget(&mut self, key: &str) -> usize {
        let k = super::orient::normalize(key);
        let before = self.entries.len();
        self.entries
            .retain(|e| super::orient::normalize(&e.key) != k);
        before - self.entries.len()
    }

    /// Write the store (atomically).
    pub fn save(&self) -> Result<(), MemoryError> {
        let io = |action, path: &Path| {
            let path = path.to_path_buf();
            move |source| MemoryError::Io {
                action,
                path,
                source,
            }
        };
        if let Some(dir) = self.path.parent() {
            std::fs::create_dir_all(dir).map_err(io("create", dir))?;
        }
        let file = MemoryFile {
            workspace: self.workspace.clone(),
            entries: self.entries.clone(),
        };
        let text = serde_json::to_string_pretty(&file).map_err(|e| MemoryError::Corrupt {
            path: self.path.clone(),
            reason: e.to_string(),
        })?;
        let tmp = self.path.with_extension("json.tmp");
        std::fs::write(&tmp, text).map_err(io("write", &tmp))?;
        std::fs::rename(&tmp, &self.path).map_err(io("rename", &self.path))
    }

    /// The `k` entries ranking best against `query` by BM25 (k1 = 1.2, b = 0.75), best first,
    /// with their scores; entries that share no term with the query are left out.
    pub fn retrieve(&self, query: &str, k: usize) -> Vec<(f64, &MemoryEntry)> {
        self.retrieve_where(query, k, |_| true)
    }

    /// The `k` entries of this kind ranking best against `query` (as [`Self::retrieve`]).
    pub fn retrieve_kind(
        &self,
        query: &str,
        k: usize,
        kind: MemoryKind,
    ) -> Vec<(f64, &MemoryEntry)> {
        self.retrieve_where(query, k, |e| e.kind == kind)
    }

    /// The `k` best-ranking entries that `keep` accepts (ranked over the whole store).
    fn retrieve_where(
        &self,
        query: &str,
        k: usize,
        keep: impl Fn(&MemoryEntry) -> bool,
    ) -> Vec<(f64, &MemoryEntry)> {
        let q = tokenize(query);
        if q.is_empty() || self.entries.is_empty() {
            return Vec::new();
        }
        let docs: Vec<Vec<String>> = self
            .entries
            .iter()
            .map(|e| tokenize(&format!("{} {}", e.key, e.value)))
            .collect();
        let n = docs.len() as f64;
        let avgdl = docs.iter().map(Vec::len).sum::<usize>() as f64 / n;
        let mut df: HashMap<&str, usize> = HashMap::new();
        for d in &docs {
            let mut seen: Vec<&str> = d.iter().map(String::as_str).collect();
            seen.sort_unstable();
            seen.dedup();
            for t in seen {
                *df.entry(t).or_default() += 1;
            }
        }
        let (k1, b) = (1.2, 0.75);
        let mut scored: Vec<(f64, &MemoryEntry)> = docs
            .iter()
            .zip(&self.entries)
            .map(|(d, e)| {
                let dl = d.len() as f64;
                let mut s = 0.0;
                for term in &q {
                    let tf = d.iter().filter(|t| *t == term).count() as f64;
                    if tf == 0.0 {
                        continue;
                    }
                    let nq = df.get(term.as_str()).copied().unwrap_or(0) as f64;
                    let idf = ((n - nq + 0.5) / (nq + 0.5) + 1.0).ln();
                    s += idf * tf * (k1 + 1.0) / (tf + k1 * (1.0 - b + b * dl / avgdl.max(1e-9)));
                }
                (s, e)
            })
            .filter(|(s, e)| *s > 0.0 && keep(e))
            .collect();
        scored.sort_by(|a, b| b.0.total_cmp(&a.0));
        scored.truncate(k);
        scored
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bm25_ranks_the_matching_entry_first_and_forget_removes_it() {
        let d = tempfile::tempdir().expect("tempdir");
        let mut m = MemoryStore::open(d.path(), None).expect("open");
        m.upsert(
            "read_file {\"path\":\"config.ini\"}",
            "port = 8088",
            0.95,
            "r1",
            MemoryKind::Fact,
        );
        m.upsert(
            "calculator {\"expression\":\"2+2\"}",
            "4",
            0.95,
            "r1",
            MemoryKind::Fact,
        );
        m.upsert(
            "read_file {\"path\":\"readme.md\"}",
            "Author: Ada",
            0.95,
            "r1",
            MemoryKind::Fact,
        );
        let r = m.retrieve("What is the port in config.ini?", 2);
        assert_eq!(
            r.first().map(|(_, e)| e.value.as_str()),
            Some("port = 8088")
        );
        m.upsert(
            "outcome read_file {\"path\":\"config.ini\"}",
            "verified: port = 8088",
            1.0,
            "r1",
            MemoryKind::Outcome,
        );
        let o = m.retrieve_kind("What is the port in config.ini?", 3, MemoryKind::Outcome);
        assert_eq!(o.len(), 1);
        let r = RecalledOutcome::of(o[0].1);
        assert_eq!(r.action, "read_file {\"path\":\"config.ini\"}");
        assert_eq!(r.result, "verified: port = 8088");
        assert!(m
            .retrieve_kind("What is the port in config.ini?", 3, MemoryKind::Fact)
            .iter()
            .all(|(_, e)| e.kind == MemoryKind::Fact));
        m.forget("outcome read_file {\"path\":\"config.ini\"}");
        m.save().expect("save");
        let mut again = MemoryStore::open(d.path(), None).expect("reopen");
        assert_eq!(again.entries().len(), 3);
        assert_eq!(again.forget("calculator {\"expression\":\"2+2\"}"), 1);
        assert_eq!(again.entries().len(), 2);
    }
}
