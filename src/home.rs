//! boyd's home directory: `$BOYD_HOME`, else `<user cache dir>/boyd`.
//!
//! Everything boyd keeps between runs lives under it: the model store (`models/`), run
//! directories (`runs/`), calibration profiles (`profiles/`), OODA memory (`memory/`). This is
//! the one place that decides where it is; the store, the run directories and the CLI ask here.

use std::path::PathBuf;

/// Environment variable naming the home directory.
pub const HOME_ENV: &str = "BOYD_HOME";

/// Neither `BOYD_HOME` nor a user cache directory is available.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("no cache directory found for boyd's home; set BOYD_HOME to a writable directory")]
pub struct NoHome;

/// `$BOYD_HOME` when set and not empty, else `<user cache dir>/boyd`.
pub fn boyd_home() -> Result<PathBuf, NoHome> {
    if let Some(home) = std::env::var_os(HOME_ENV).filter(|v| !v.is_empty()) {
        return Ok(PathBuf::from(home));
    }
    dirs::cache_dir().map(|d| d.join("boyd")).ok_or(NoHome)
}
