//! Run directories: `$BOYD_HOME/runs/<run-id>/` with `transcript.jsonl`, `blobs/` and
//! `outcome.json`.
//!
//! The transcript is append-only JSONL, one record per event (start, step, collapse, end), each
//! line flushed as it is written so a crashed run still shows what it did. The run id sorts by
//! time: `YYYYMMDD-HHMMSS-xxxxxx` (UTC, then random hex).

use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::types::{RunOutcome, Step};
use crate::units::civil_from_days;

/// Errors reading or writing run directories.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RunDirError {
    /// An I/O error on a path.
    #[error("cannot {action} {path}")]
    Io {
        /// What we were doing.
        action: &'static str,
        /// The path.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A record could not be (de)serialized.
    #[error("bad record in {path}")]
    Json {
        /// The file.
        path: PathBuf,
        /// The serde error.
        #[source]
        source: serde_json::Error,
    },
    /// No home directory could be found.
    #[error("cannot find a cache directory; set BOYD_HOME")]
    NoHome,
    /// The run does not exist.
    #[error("no run {id:?} in {dir}; see `boyd runs list`")]
    NotFound {
        /// The id asked for.
        id: String,
        /// Where we looked.
        dir: PathBuf,
    },
}

fn io(action: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> RunDirError {
    let path = path.to_path_buf();
    move |source| RunDirError::Io {
        action,
        path,
        source,
    }
}

/// `$BOYD_HOME`, defaulting to the platform cache directory + `boyd` (the model store's root).
pub fn boyd_home() -> Result<PathBuf, RunDirError> {
    crate::store::Store::from_env()
        .map(|s| s.root().to_path_buf())
        .map_err(|_| RunDirError::NoHome)
}

/// `<home>/runs`.
pub fn runs_root(home: &Path) -> PathBuf {
    home.join("runs")
}

/// UTC timestamp `YYYY-MM-DDTHH:MM:SSZ` for records.
pub fn utc_timestamp() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    let (y, mo, d) = civil_from_days(secs.div_euclid(86_400));
    let s = secs.rem_euclid(86_400);
    format!(
        "{y:04}-{mo:02}-{d:02}T{:02}:{:02}:{:02}Z",
        s / 3600,
        (s / 60) % 60,
        s % 60
    )
}

/// A new run id.
pub fn new_run_id() -> String {
    let ts = utc_timestamp();
    let compact: String = ts
        .chars()
        .filter(|c| c.is_ascii_digit() || *c == 'T')
        .collect::<String>()
        .replace('T', "-");
    let r: u32 = rand::random();
    format!("{compact}-{:06x}", r & 0xff_ffff)
}

/// One transcript record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Record {
    /// The run began.
    Start {
        /// Run id.
        run_id: String,
        /// Task.
        task: String,
        /// Planner name.
        planner: String,
        /// Tool names.
        tools: Vec<String>,
        /// Workspace root, if any.
        workspace: Option<PathBuf>,
        /// UTC time.
        started_at: String,
    },
    /// A step finished.
    Step(Step),
    /// Older observations were collapsed to save context.
    Collapse {
        /// Steps whose observations were collapsed (1-based).
        steps: Vec<usize>,
        /// Estimated tokens before.
        tokens_before: usize,
        /// Estimated tokens after.
        tokens_after: usize,
        /// The model's context.
        context: usize,
    },
    /// The run ended.
    End(RunOutcome),
}

/// An open run directory.
#[derive(Debug)]
pub struct RunDir {
    id: String,
    path: PathBuf,
    transcript: File,
}

impl RunDir {
    /// Create a fresh run directory under `<home>/runs`.
    pub fn create(home: &Path) -> Result<Self, RunDirError> {
        let root = runs_root(home);
        std::fs::create_dir_all(&root).map_err(io("create", &root))?;
        // Retry on the (unlikely) id collision.
        for _ in 0..8 {
            let id = new_run_id();
            let path = root.join(&id);
            match std::fs::create_dir(&path) {
                Ok(()) => return Self::open_new(id, path),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(io("create", &path)(e)),
            }
        }
        Err(RunDirError::Io {
            action: "create",
            path: root,
            source: std::io::Error::new(std::io::ErrorKind::AlreadyExists, "run id collision"),
        })
    }

    /// Use an existing empty directory as the run directory (tests, evals).
    pub fn at(path: &Path) -> Result<Self, RunDirError> {
        std::fs::create_dir_all(path).map_err(io("create", path))?;
        let id = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(new_run_id);
        Self::open_new(id, path.to_path_buf())
    }

    fn open_new(id: String, path: PathBuf) -> Result<Self, RunDirError> {
        let blobs = path.join("blobs");
        std::fs::create_dir_all(&blobs).map_err(io("create", &blobs))?;
        let tpath = path.join("transcript.jsonl");
        let transcript = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&tpath)
            .map_err(io("open", &tpath))?;
        Ok(Self {
            id,
            path,
            transcript,
        })
    }

    /// The run id.
    pub fn id(&self) -> &str {
        &self.id
    }
    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }
    /// `blobs/`.
    pub fn blob_dir(&self) -> PathBuf {
        self.path.join("blobs")
    }

    /// Append one record to the transcript and flush it.
    pub fn append(&mut self, rec: &Record) -> Result<(), RunDirError> {
        let tpath = self.path.join("transcript.jsonl");
        let mut line = serde_json::to_string(rec).map_err(|source| RunDirError::Json {
            path: tpath.clone(),
            source,
        })?;
        line.push('\n');
        self.transcript
            .write_all(line.as_bytes())
            .and_then(|_| self.transcript.flush())
            .map_err(io("write", &tpath))
    }

    /// Write `outcome.json` (atomically).
    pub fn write_outcome(&self, outcome: &RunOutcome) -> Result<(), RunDirError> {
        let path = self.path.join("outcome.json");
        let tmp = self.path.join(".outcome.json.tmp");
        let text = serde_json::to_string_pretty(outcome).map_err(|source| RunDirError::Json {
            path: path.clone(),
            source,
        })?;
        std::fs::write(&tmp, text).map_err(io("write", &tmp))?;
        std::fs::rename(&tmp, &path).map_err(io("rename", &path))
    }
}

/// A run as listed by `boyd runs list`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunSummary {
    /// Run id.
    pub id: String,
    /// Directory.
    pub path: PathBuf,
    /// Task (from the start record).
    pub task: Option<String>,
    /// Outcome, when the run finished.
    pub outcome: Option<RunOutcome>,
}

/// Read a transcript file into records; a torn last line (crash mid-write) is skipped.
pub fn read_transcript(path: &Path) -> Result<Vec<Record>, RunDirError> {
    let f = File::open(path).map_err(io("open", path))?;
    let mut out = Vec::new();
    let lines: Vec<String> = BufReader::new(f)
        .lines()
        .collect::<Result<_, _>>()
        .map_err(io("read", path))?;
    let n = lines.len();
    for (i, line) in lines.into_iter().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<Record>(&line) {
            Ok(r) => out.push(r),
            Err(_) if i + 1 == n => break,
            Err(source) => {
                return Err(RunDirError::Json {
                    path: path.to_path_buf(),
                    source,
                })
            }
        }
    }
    Ok(out)
}

/// All runs under `<home>/runs`, newest first.
pub fn list_runs(home: &Path) -> Result<Vec<RunSummary>, RunDirError> {
    let root = runs_root(home);
    let rd = match std::fs::read_dir(&root) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io("list", &root)(e)),
    };
    let mut runs = Vec::new();
    for ent in rd.flatten() {
        if !ent.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        let path = ent.path();
        let id = ent.file_name().to_string_lossy().into_owned();
        let outcome = std::fs::read_to_string(path.join("outcome.json"))
            .ok()
            .and_then(|t| serde_json::from_str::<RunOutcome>(&t).ok());
        let task = outcome.as_ref().map(|o| o.task.clone()).or_else(|| {
            read_transcript(&path.join("transcript.jsonl"))
                .ok()
                .and_then(|recs| {
                    recs.into_iter().find_map(|r| match r {
                        Record::Start { task, .. } => Some(task),
                        _ => None,
                    })
                })
        });
        runs.push(RunSummary {
            id,
            path,
            task,
            outcome,
        });
    }
    runs.sort_by(|a, b| b.id.cmp(&a.id));
    Ok(runs)
}

/// Find a run by id or unique id prefix (`latest` or `last` for the newest).
pub fn find_run(home: &Path, id: &str) -> Result<RunSummary, RunDirError> {
    let runs = list_runs(home)?;
    let not_found = || RunDirError::NotFound {
        id: id.into(),
        dir: runs_root(home),
    };
    if id == "latest" || id == "last" {
        return runs.into_iter().next().ok_or_else(not_found);
    }
    if let Some(r) = runs.iter().find(|r| r.id == id) {
        return Ok(r.clone());
    }
    let mut matching = runs.into_iter().filter(|r| r.id.starts_with(id));
    match (matching.next(), matching.next()) {
        (Some(r), None) => Ok(r),
        _ => Err(not_found()),
    }
}
