//! Verification: sha256 hashing, `.verified` markers, and the atomic verified write every
//! fetch goes through.

use super::*;

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

pub(super) fn marker_matches(path: &Path, marker: &Path, expected: Expected<'_>) -> bool {
    let Ok(text) = std::fs::read_to_string(marker) else {
        return false;
    };
    let Ok(recorded) = serde_json::from_str::<Marker>(&text) else {
        return false;
    };
    current_marker(path, expected.sha256).is_some_and(|now| now == recorded)
}

pub(super) fn current_marker(path: &Path, sha256: &str) -> Option<Marker> {
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
pub(super) fn write_marker(path: &Path, marker: &Path, sha256: &str) {
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
