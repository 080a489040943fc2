//! Approval tokens: a human's permission for one exact action in one run, for a limited time.
//!
//! A token is `v1.<run id>.<action fingerprint>.<expiry, unix seconds>.<HMAC-SHA256 hex>`. The
//! MAC covers the run id, the fingerprint (SHA-256 of tool + canonical JSON args, see
//! `guard::fingerprint`) and the expiry, under a 32-byte key kept in the user's config directory
//! (created with mode 0600, never in the workspace or the run directory, so neither the model nor
//! a file it reads can mint one). The fields in clear text only make refusals readable: a changed
//! field breaks the MAC. Tokens are single use: the SHA-256 of a spent token is appended (and
//! fsync'd) to the run's ledger `approvals.used` before the action runs.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use hmac::{Hmac, Mac};
use sha2::Sha256;

use super::condense::sha256_hex;

type HmacSha256 = Hmac<Sha256>;

/// Key file name inside the config directory.
pub const KEY_FILE: &str = "approval.key";
/// The single-use ledger inside a run directory.
pub const LEDGER_FILE: &str = "approvals.used";
const VERSION: &str = "v1";

/// Why a token was refused, or the key could not be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ApprovalError {
    /// The token does not have the `v1.run.fingerprint.expiry.mac` shape.
    #[error("malformed approval token: {reason}")]
    Malformed {
        /// What is wrong.
        reason: &'static str,
    },
    /// The MAC does not match: forged, or a field was changed.
    #[error("approval token signature is invalid (forged or altered)")]
    BadSignature,
    /// A valid token for another run.
    #[error("approval token is for run {token_run}, not {run}")]
    WrongRun {
        /// The run it was issued for.
        token_run: String,
        /// This run.
        run: String,
    },
    /// A valid token for another action.
    #[error("approval token is for action {token_fp}, not {fingerprint}")]
    WrongAction {
        /// The fingerprint it was issued for.
        token_fp: String,
        /// The action about to run.
        fingerprint: String,
    },
    /// The token's expiry has passed.
    #[error("approval token expired {ago_s} s ago")]
    Expired {
        /// Seconds since expiry.
        ago_s: u64,
    },
    /// The token was already spent.
    #[error("approval token was already used")]
    Replayed,
    /// The key or ledger could not be read or written.
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
    /// The key file has the wrong size.
    #[error("approval key {path} is corrupt ({len} bytes, want 32); delete it to make a new one (outstanding tokens stop working)")]
    BadKey {
        /// The key file.
        path: PathBuf,
        /// Its size.
        len: usize,
    },
    /// No config directory could be found.
    #[error("cannot find a config directory; set BOYD_CONFIG_DIR")]
    NoConfigDir,
    /// A TTL string did not parse.
    #[error("bad duration {text:?}: use a number with s, m, h or d (e.g. 15m)")]
    BadDuration {
        /// The text.
        text: String,
    },
}

fn io_err(action: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> ApprovalError {
    let path = path.to_path_buf();
    move |source| ApprovalError::Io {
        action,
        path,
        source,
    }
}

/// `$BOYD_CONFIG_DIR`, else the platform config directory + `boyd`.
pub fn config_dir() -> Result<PathBuf, ApprovalError> {
    if let Some(d) = std::env::var_os("BOYD_CONFIG_DIR") {
        return Ok(PathBuf::from(d));
    }
    dirs::config_dir()
        .map(|d| d.join("boyd"))
        .ok_or(ApprovalError::NoConfigDir)
}

/// Parse a TTL such as `90s`, `15m`, `2h`, `1d` (a bare number is seconds).
pub fn parse_ttl(text: &str) -> Result<Duration, ApprovalError> {
    let t = text.trim();
    let bad = || ApprovalError::BadDuration { text: text.into() };
    let (num, mult) = match t.chars().last() {
        Some('s') => (&t[..t.len() - 1], 1),
        Some('m') => (&t[..t.len() - 1], 60),
        Some('h') => (&t[..t.len() - 1], 3600),
        Some('d') => (&t[..t.len() - 1], 86_400),
        Some(c) if c.is_ascii_digit() => (t, 1),
        _ => return Err(bad()),
    };
    let n: u64 = num.trim().parse().map_err(|_| bad())?;
    if n == 0 {
        return Err(bad());
    }
    n.checked_mul(mult).map(Duration::from_secs).ok_or_else(bad)
}

fn now_unix() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// The HMAC key.
#[derive(Clone)]
pub struct ApprovalKey {
    key: [u8; 32],
}

impl std::fmt::Debug for ApprovalKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ApprovalKey(..)")
    }
}

/// The fields of a well-formed token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenClaims {
    /// Run id.
    pub run_id: String,
    /// Action fingerprint.
    pub fingerprint: String,
    /// Expiry, unix seconds.
    pub expires: u64,
}

/// Split a token into its claims and MAC bytes (no signature check).
pub fn parse_token(token: &str) -> Result<(TokenClaims, Vec<u8>), ApprovalError> {
    let parts: Vec<&str> = token.trim().split('.').collect();
    let [ver, run, fp, exp, mac] = parts.as_slice() else {
        return Err(ApprovalError::Malformed {
            reason: "expected 5 dot-separated fields",
        });
    };
    if *ver != VERSION {
        return Err(ApprovalError::Malformed {
            reason: "unknown version",
        });
    }
    if run.is_empty() || fp.len() != 64 || !fp.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(ApprovalError::Malformed {
            reason: "bad run id or fingerprint",
        });
    }
    let expires: u64 = exp.parse().map_err(|_| ApprovalError::Malformed {
        reason: "expiry is not a number",
    })?;
    let mac = hex_decode(mac).ok_or(ApprovalError::Malformed {
        reason: "signature is not hex",
    })?;
    Ok((
        TokenClaims {
            run_id: (*run).to_string(),
            fingerprint: (*fp).to_string(),
            expires,
        },
        mac,
    ))
}

fn hex_decode(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn message(run_id: &str, fingerprint: &str, expires: u64) -> String {
    format!("boyd-approval-{VERSION}\n{run_id}\n{fingerprint}\n{expires}")
}

impl ApprovalKey {
    /// A key from raw bytes (tests).
    pub fn from_bytes(key: [u8; 32]) -> Self {
        Self { key }
    }

    /// Load `<dir>/approval.key`, creating it (mode 0600, random) when missing.
    pub fn load_or_create(dir: &Path) -> Result<Self, ApprovalError> {
        let path = dir.join(KEY_FILE);
        match std::fs::read(&path) {
            Ok(bytes) => return Self::from_file_bytes(&path, &bytes),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io_err("read", &path)(e)),
        }
        std::fs::create_dir_all(dir).map_err(io_err("create", dir))?;
        let key: [u8; 32] = rand::random();
        let mut opts = std::fs::OpenOptions::new();
        opts.write(true).create_new(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            opts.mode(0o600);
        }
        match opts.open(&path) {
            Ok(mut f) => {
                f.write_all(&key)
                    .and_then(|_| f.sync_all())
                    .map_err(io_err("write", &path))?;
                Ok(Self { key })
            }
            // Another process created it first: use theirs.
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                let bytes = std::fs::read(&path).map_err(io_err("read", &path))?;
                Self::from_file_bytes(&path, &bytes)
            }
            Err(e) => Err(io_err("create", &path)(e)),
        }
    }

    /// The key in the default config directory.
    pub fn load_default() -> Result<Self, ApprovalError> {
        Self::load_or_create(&config_dir()?)
    }

    fn from_file_bytes(path: &Path, bytes: &[u8]) -> Result<Self, ApprovalError> {
        let key: [u8; 32] = bytes.try_into().map_err(|_| ApprovalError::BadKey {
            path: path.to_path_buf(),
            len: bytes.len(),
        })?;
        Ok(Self { key })
    }

    fn mac(&self) -> HmacSha256 {
        // HMAC accepts keys of any length; 32 bytes cannot fail.
        match HmacSha256::new_from_slice(&self.key) {
            Ok(m) => m,
            Err(_) => unreachable!("HMAC takes keys of any length"),
        }
    }

    /// Issue a token for `fingerprint` in `run_id`, valid until `expires` (unix seconds).
    pub fn issue_until(&self, run_id: &str, fingerprint: &str, expires: u64) -> String {
        let mut m = self.mac();
        m.update(message(run_id, fingerprint, expires).as_bytes());
        let tag = m.finalize().into_bytes();
        format!("{VERSION}.{run_id}.{fingerprint}.{expires}.{}", hex(&tag))
    }

    /// Issue a token valid for `ttl` from now.
    pub fn issue(&self, run_id: &str, fingerprint: &str, ttl: Duration) -> String {
        self.issue_until(
            run_id,
            fingerprint,
            now_unix().saturating_add(ttl.as_secs()),
        )
    }

    /// Check a token for this run and action at time `now` (unix seconds), without spending it.
    /// The signature is checked first (constant time), so a forged token learns nothing else.
    pub fn check_at(
        &self,
        token: &str,
        run_id: &str,
        fingerprint: &str,
        now: u64,
    ) -> Result<TokenClaims, ApprovalError> {
        let (claims, tag) = parse_token(token)?;
        let mut m = self.mac();
        m.update(message(&claims.run_id, &claims.fingerprint, claims.expires).as_bytes());
        m.verify_slice(&tag)
            .map_err(|_| ApprovalError::BadSignature)?;
        if claims.run_id != run_id {
            return Err(ApprovalError::WrongRun {
                token_run: claims.run_id,
                run: run_id.into(),
            });
        }
        if claims.fingerprint != fingerprint {
            return Err(ApprovalError::WrongAction {
                token_fp: claims.fingerprint,
                fingerprint: fingerprint.into(),
            });
        }
        if now >= claims.expires {
            return Err(ApprovalError::Expired {
                ago_s: now - claims.expires,
            });
        }
        Ok(claims)
    }

    /// `check_at` with the current time.
    pub fn check(
        &self,
        token: &str,
        run_id: &str,
        fingerprint: &str,
    ) -> Result<TokenClaims, ApprovalError> {
        self.check_at(token, run_id, fingerprint, now_unix())
    }
}

/// The single-use ledger of a run: SHA-256 of every spent token, one per line.
#[derive(Debug, Clone)]
pub struct Ledger {
    path: PathBuf,
}

impl Ledger {
    /// The ledger of the run directory `run_dir`.
    pub fn new(run_dir: &Path) -> Self {
        Self {
            path: run_dir.join(LEDGER_FILE),
        }
    }

    /// Whether the token was spent.
    pub fn is_spent(&self, token: &str) -> Result<bool, ApprovalError> {
        let h = sha256_hex(token.trim().as_bytes());
        match std::fs::read_to_string(&self.path) {
            Ok(text) => Ok(text.lines().any(|l| l.trim() == h)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(io_err("read", &self.path)(e)),
        }
    }

    /// Spend the token (fsync'd); refuses a replay.
    pub fn spend(&self, token: &str) -> Result<String, ApprovalError> {
        if self.is_spent(token)? {
            return Err(ApprovalError::Replayed);
        }
        let h = sha256_hex(token.trim().as_bytes());
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)
            .map_err(io_err("open", &self.path))?;
        f.write_all(format!("{h}\n").as_bytes())
            .and_then(|_| f.sync_all())
            .map_err(io_err("write", &self.path))?;
        Ok(h)
    }
}

/// Check a token and spend it: signature, run, action, expiry, then the single-use ledger.
pub fn verify_and_spend(
    key: &ApprovalKey,
    ledger: &Ledger,
    token: &str,
    run_id: &str,
    fingerprint: &str,
) -> Result<String, ApprovalError> {
    key.check(token, run_id, fingerprint)?;
    ledger.spend(token)
}

#[cfg(test)]
mod tests {
    use super::*;

    const FP: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    #[test]
    fn roundtrip_and_refusals() {
        let k = ApprovalKey::from_bytes([7; 32]);
        let t = k.issue_until("run-1", FP, 1000);
        assert!(k.check_at(&t, "run-1", FP, 999).is_ok());
        assert!(matches!(
            k.check_at(&t, "run-1", FP, 1000),
            Err(ApprovalError::Expired { .. })
        ));
        assert!(matches!(
            k.check_at(&t, "run-2", FP, 1),
            Err(ApprovalError::WrongRun { .. })
        ));
        let other = FP.replace('0', "f");
        assert!(matches!(
            k.check_at(&t, "run-1", &other, 1),
            Err(ApprovalError::WrongAction { .. })
        ));
        let other_key = ApprovalKey::from_bytes([8; 32]);
        assert!(matches!(
            other_key.check_at(&t, "run-1", FP, 1),
            Err(ApprovalError::BadSignature)
        ));
        let longer = t.replace(".1000.", ".99999.");
        assert!(matches!(
            k.check_at(&longer, "run-1", FP, 1),
            Err(ApprovalError::BadSignature)
        ));
        assert!(matches!(
            k.check_at("approved", "run-1", FP, 1),
            Err(ApprovalError::Malformed { .. })
        ));
    }

    #[test]
    fn ttl_parsing() {
        assert_eq!(parse_ttl("15m").ok(), Some(Duration::from_secs(900)));
        assert_eq!(parse_ttl("2h").ok(), Some(Duration::from_secs(7200)));
        assert_eq!(parse_ttl("30").ok(), Some(Duration::from_secs(30)));
        assert!(parse_ttl("0s").is_err());
        assert!(parse_ttl("soon").is_err());
    }

    #[cfg(unix)]
    #[test]
    fn key_file_is_private_and_stable() {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().expect("tempdir");
        let a = ApprovalKey::load_or_create(d.path()).expect("create");
        let b = ApprovalKey::load_or_create(d.path()).expect("load");
        assert_eq!(a.key, b.key);
        let mode = std::fs::metadata(d.path().join(KEY_FILE))
            .expect("meta")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }
}
