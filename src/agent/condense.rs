//! The observation condenser and the blob store.
//!
//! A tool output longer than the limit (default 1,500 characters) is written whole to
//! `<run>/blobs/<sha256>.txt` and the model sees a preview: the head, the tail when the output has
//! enough lines for a tail to help, and a note with the size and the blob id so it can page with
//! `read_blob`. Blobs are content-addressed, so writing the same output twice is one file.
//! Context collapse (when the transcript nears the model's context) reuses the same store: an
//! older observation shrinks to a one-line preview pointing at its blob.

use std::io::Write;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use super::types::{Observation, ObservationKind};

/// Default condenser limit in characters.
pub const DEFAULT_LIMIT: usize = 1500;

/// Lowercase hex SHA-256 of a text.
pub fn sha256_hex(data: &[u8]) -> String {
    let digest = Sha256::digest(data);
    let mut s = String::with_capacity(64);
    for b in digest {
        s.push_str(&format!("{b:02x}"));
    }
    s
}

/// Path of a blob in a blob directory.
pub fn blob_path(dir: &Path, sha: &str) -> PathBuf {
    dir.join(format!("{sha}.txt"))
}

/// Store a text as a blob (idempotent); returns its SHA-256.
pub fn write_blob(dir: &Path, text: &str) -> std::io::Result<String> {
    let sha = sha256_hex(text.as_bytes());
    let path = blob_path(dir, &sha);
    if path.exists() {
        return Ok(sha);
    }
    std::fs::create_dir_all(dir)?;
    // Write to a temporary name, then rename: a crash never leaves a half blob under its hash.
    let tmp = dir.join(format!(".{sha}.tmp"));
    {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(text.as_bytes())?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, &path)?;
    Ok(sha)
}

/// Read a blob back.
pub fn read_blob(dir: &Path, sha: &str) -> std::io::Result<String> {
    std::fs::read_to_string(blob_path(dir, sha))
}

/// Condenser settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Condenser {
    /// Outputs longer than this many characters are condensed.
    pub limit: usize,
}

impl Default for Condenser {
    fn default() -> Self {
        Self {
            limit: DEFAULT_LIMIT,
        }
    }
}

/// The first `n` characters of `s`, cut back to the last newline when one is in the back half.
fn head_chars(s: &str, n: usize) -> &str {
    let end = s.char_indices().nth(n).map_or(s.len(), |(i, _)| i);
    let cut = &s[..end];
    if end < s.len() {
        if let Some(nl) = cut.rfind('\n') {
            if nl >= end / 2 {
                return &cut[..nl];
            }
        }
    }
    cut
}

/// The last `n` characters of `s`, cut forward to the next newline when one is in the front half.
fn tail_chars(s: &str, n: usize) -> &str {
    let total = s.chars().count();
    if total <= n {
        return s;
    }
    let start = s.char_indices().nth(total - n).map_or(0, |(i, _)| i);
    let cut = &s[start..];
    if let Some(nl) = cut.find('\n') {
        if nl <= cut.len() / 2 {
            return &cut[nl + 1..];
        }
    }
    cut
}

/// The truncation note the model sees.
pub fn truncation_note(bytes: usize, lines: usize, sha: &str) -> String {
    format!(
        "[Observation truncated: {bytes} bytes, {lines} lines; full output stored as blob {sha}; use read_blob to page]"
    )
}

impl Condenser {
    /// Condense `text` into an observation, writing a blob when it is over the limit.
    pub fn condense(
        &self,
        kind: ObservationKind,
        text: String,
        blob_dir: &Path,
    ) -> std::io::Result<Observation> {
        self.condense_with(kind, text, blob_dir, None)
    }

    /// [`Condenser::condense`], showing `preview` (what the tool's output holds for the task,
    /// see `tools::files::long_read_preview`) in place of the head and tail when the output is
    /// condensed.
    pub fn condense_with(
        &self,
        kind: ObservationKind,
        text: String,
        blob_dir: &Path,
        preview: Option<String>,
    ) -> std::io::Result<Observation> {
        let chars = text.chars().count();
        if chars <= self.limit {
            return Ok(Observation::new(kind, text));
        }
        let sha = write_blob(blob_dir, &text)?;
        let lines = text.lines().count();
        let note = truncation_note(text.len(), lines, &sha);
        let budget = self.limit.saturating_sub(note.len() + 16).max(200);
        let focused = preview.is_some();
        let preview = if let Some(p) = preview {
            // No paging note: the model paged a 3,000-line log's blob 1,200 characters at a
            // time instead of searching it.
            head_chars(&p, self.limit).to_string()
        } else if lines >= 8 {
            let head = head_chars(&text, budget * 2 / 3);
            let tail = tail_chars(&text, budget / 3);
            format!("{head}\n[...]\n{tail}\n{note}")
        } else {
            format!("{}\n[...]\n{note}", head_chars(&text, budget))
        };
        Ok(Observation {
            kind,
            bytes: text.len(),
            text: preview,
            blob: Some(sha),
            collapsed: false,
            focused,
            full: Some(text.into()),
        })
    }
}

/// Collapse an observation to a short preview to save context; the full text goes to a blob
/// (if it is not there yet). `full` is the text to store when there is no blob yet.
pub fn collapse(obs: &mut Observation, blob_dir: &Path) -> std::io::Result<()> {
    if obs.collapsed {
        return Ok(());
    }
    let whole = obs.blob.is_none();
    let sha = match &obs.blob {
        Some(sha) => sha.clone(),
        None => write_blob(blob_dir, &obs.text)?,
    };
    let first = obs.text.lines().next().unwrap_or("");
    let head = head_chars(first, 120);
    let text = format!(
        "{head} [collapsed to save context: {} bytes; blob {sha}; use read_blob to see it again]",
        obs.bytes
    );
    // Without a blob the text was the whole output: keep it for the answer step.
    if whole && obs.full.is_none() {
        obs.full = Some(std::mem::take(&mut obs.text).into());
    }
    obs.text = text;
    obs.blob = Some(sha);
    obs.collapsed = true;
    Ok(())
}
