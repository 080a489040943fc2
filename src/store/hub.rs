//! The hub: its local cache (no network) and downloads with a first-answer timeout and a
//! stall watchdog; files come into the store by hard link or verified copy.

use super::*;

pub(super) fn hub_repo(source: &Source) -> hf_hub::Repo {
    hf_hub::Repo::with_revision(
        source.hub_repo.clone(),
        hf_hub::RepoType::Model,
        source.revision.clone(),
    )
}

/// The file in the hub's local cache, if present (no network).
pub(super) fn hub_cache_lookup(source: &Source, cache_dir: Option<&Path>) -> Option<PathBuf> {
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
pub(super) fn hub_download(
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
pub(super) fn import_file(
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

/// A hub download that does not match the catalog is removed from the hub cache as well (the
/// cache's name for it and the blob behind that name), so no later run finds it there: the
/// store refused it, and nothing of it stays on disk.
pub(super) fn discard_mismatched_download(downloaded: &Path, err: &StoreError) {
    if !matches!(err, StoreError::SourceMismatch { .. }) {
        return;
    }
    let blob = std::fs::canonicalize(downloaded).ok();
    for path in std::iter::once(downloaded.to_owned()).chain(blob) {
        match std::fs::remove_file(&path) {
            Ok(()) => {
                tracing::info!(path = %path.display(), "removed a hub download that does not match the catalog")
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "cannot remove a hub download that does not match the catalog")
            }
        }
    }
}
