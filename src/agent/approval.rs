//! Approval tokens: a human's permission for one exact action in one run, for a limited time.
//!
//! A token is `v2.<run id>.<action fingerprint>.<expiry, unix seconds>.<nonce>.<HMAC-SHA256>`
//! (tokens of the older form `v1.<run>.<fingerprint>.<expiry>.<HMAC>`, without a nonce, are still
//! accepted). The MAC covers the version, run id, fingerprint (SHA-256 of tool + canonical JSON
//! args, see `guard::fingerprint`), expiry and nonce, under a 32-byte key kept in the user's
//! config directory (created with mode 0600, never in the workspace or the run directory, so
//! neither the model nor a file it reads can mint one). The fields in clear text only make
//! refusals readable: a changed field breaks the MAC.
//!
//! Each token has exactly one spelling: lower-case hex of fixed length, a decimal expiry without
//! sign or leading zeros, no surrounding or inner whitespace. Any other spelling is refused as
//! malformed before the signature is checked, so a token cannot be re-spelled into a "new" one.
//! A token is valid at most [`MAX_TTL`] ahead. Tokens are single use: the ledger
//! `approvals.used` of the run holds one line per spent token, keyed by (run, fingerprint,
//! expiry, nonce), and the check-and-append runs under an exclusive lock on the ledger file and
//! is fsync'd before the action runs, so two processes cannot both spend one token.

use std::io::{Read, Write};
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
/// The version tokens are issued in.
const VERSION: &str = "v2";
/// The older version, without a nonce (still accepted).
const LEGACY_VERSION: &str = "v1";
/// The longest a token may be valid: tokens further ahead are refused when issued and checked.
pub const MAX_TTL: Duration = Duration::from_secs(24 * 3600);
/// Clock skew tolerated between the machine that issued a token and the one that checks it.
const SKEW_S: u64 = 60;
/// Longest token text accepted.
const MAX_TOKEN_LEN: usize = 400;
/// Longest run id accepted in a token.
const MAX_RUN_ID_LEN: usize = 128;

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
    /// The token (or the TTL asked for) reaches further ahead than [`MAX_TTL`].
    #[error("approval token would be valid for {ttl_s} s; the most is {max_s} s (24 h): issue a shorter one with `boyd approve --ttl`")]
    TtlTooLong {
        /// Seconds it would stay valid.
        ttl_s: u64,
        /// The most allowed.
        max_s: u64,
    },
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
    let secs = n.checked_mul(mult).ok_or_else(bad)?;
    if secs > MAX_TTL.as_secs() {
        return Err(ApprovalError::TtlTooLong {
            ttl_s: secs,
            max_s: MAX_TTL.as_secs(),
        });
    }
    Ok(Duration::from_secs(secs))
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
    /// Random nonce (32 hex digits); `None` for `v1` tokens.
    pub nonce: Option<String>,
}

impl TokenClaims {
    /// The single-use ledger's key of this token: (run, fingerprint, expiry, nonce).
    pub fn ledger_key(&self) -> String {
        format!(
            "{} {} {} {}",
            self.run_id,
            self.fingerprint,
            self.expires,
            self.nonce.as_deref().unwrap_or("-")
        )
    }
}

fn malformed(reason: &'static str) -> ApprovalError {
    ApprovalError::Malformed { reason }
}

fn is_lower_hex(s: &str, len: usize) -> bool {
    s.len() == len && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// Split a token into its claims and MAC bytes (no signature check). Only the one canonical
/// spelling is accepted: no whitespace, lower-case hex of the exact length, a decimal expiry
/// without sign or leading zeros.
pub fn parse_token(token: &str) -> Result<(TokenClaims, Vec<u8>), ApprovalError> {
    if token.len() > MAX_TOKEN_LEN {
        return Err(malformed("too long"));
    }
    if !token
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_'))
    {
        return Err(malformed(
            "only letters, digits, '.', '-' and '_' may appear (no spaces or signs); paste the token exactly as `boyd approve` printed it",
        ));
    }
    let parts: Vec<&str> = token.split('.').collect();
    let (run, fp, exp, nonce, mac) = match parts.as_slice() {
        [ver, run, fp, exp, nonce, mac] if *ver == VERSION => (*run, *fp, *exp, Some(*nonce), *mac),
        [ver, run, fp, exp, mac] if *ver == LEGACY_VERSION => (*run, *fp, *exp, None, *mac),
        [ver, ..] if *ver == VERSION || *ver == LEGACY_VERSION => {
            return Err(malformed("expected 6 dot-separated fields (5 for v1)"))
        }
        _ if parts.len() < 5 => return Err(malformed("expected 5 dot-separated fields")),
        _ => return Err(malformed("unknown version")),
    };
    if run.is_empty() || run.len() > MAX_RUN_ID_LEN {
        return Err(malformed("bad run id"));
    }
    if !is_lower_hex(fp, 64) {
        return Err(malformed(
            "bad fingerprint (64 lower-case hex digits expected)",
        ));
    }
    if exp.is_empty()
        || exp.len() > 20
        || !exp.bytes().all(|b| b.is_ascii_digit())
        || (exp.len() > 1 && exp.starts_with('0'))
    {
        return Err(malformed(
            "expiry is not a plain decimal number (no sign, no leading zeros)",
        ));
    }
    let expires: u64 = exp
        .parse()
        .map_err(|_| malformed("expiry is out of range"))?;
    if let Some(n) = nonce {
        if !is_lower_hex(n, 32) {
            return Err(malformed("bad nonce (32 lower-case hex digits expected)"));
        }
    }
    if !is_lower_hex(mac, 64) {
        return Err(malformed("signature is not 64 lower-case hex digits"));
    }
    let mac = hex_decode(mac).ok_or(malformed("signature is not hex"))?;
    Ok((
        TokenClaims {
            run_id: run.to_string(),
            fingerprint: fp.to_string(),
            expires,
            nonce: nonce.map(str::to_string),
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

fn message(c: &TokenClaims) -> String {
    match &c.nonce {
        Some(n) => format!(
            "boyd-approval-{VERSION}\n{}\n{}\n{}\n{n}",
            c.run_id, c.fingerprint, c.expires
        ),
        None => format!(
            "boyd-approval-{LEGACY_VERSION}\n{}\n{}\n{}",
            c.run_id, c.fingerprint, c.expires
        ),
    }
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

    /// Issue a token for `fingerprint` in `run_id`, valid until `expires` (unix seconds), with
    /// a fresh random nonce.
    pub fn issue_until(&self, run_id: &str, fingerprint: &str, expires: u64) -> String {
        let nonce: [u8; 16] = rand::random();
        let claims = TokenClaims {
            run_id: run_id.to_string(),
            fingerprint: fingerprint.to_string(),
            expires,
            nonce: Some(hex(&nonce)),
        };
        self.sign(&claims)
    }

    /// The token text of `claims` under this key (its one canonical spelling).
    pub fn sign(&self, claims: &TokenClaims) -> String {
        let mut m = self.mac();
        m.update(message(claims).as_bytes());
        let tag = hex(&m.finalize().into_bytes());
        match &claims.nonce {
            Some(n) => format!(
                "{VERSION}.{}.{}.{}.{n}.{tag}",
                claims.run_id, claims.fingerprint, claims.expires
            ),
            None => format!(
                "{LEGACY_VERSION}.{}.{}.{}.{tag}",
                claims.run_id, claims.fingerprint, claims.expires
            ),
        }
    }

    /// HMAC-SHA256 of `data` under this key with a domain label (other signed files: the run
    /// snapshot, the audit manifest), lower-case hex.
    pub fn sign_bytes(&self, domain: &str, data: &[u8]) -> String {
        let mut m = self.mac();
        m.update(domain.as_bytes());
        m.update(b"\n");
        m.update(data);
        hex(&m.finalize().into_bytes())
    }

    /// Whether `tag` is `sign_bytes(domain, data)` (constant-time compare).
    pub fn verify_bytes(&self, domain: &str, data: &[u8], tag: &str) -> bool {
        if !is_lower_hex(tag, 64) {
            return false;
        }
        let Some(tag) = hex_decode(tag) else {
            return false;
        };
        let mut m = self.mac();
        m.update(domain.as_bytes());
        m.update(b"\n");
        m.update(data);
        m.verify_slice(&tag).is_ok()
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
        m.update(message(&claims).as_bytes());
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
        if claims.expires - now > MAX_TTL.as_secs() + SKEW_S {
            return Err(ApprovalError::TtlTooLong {
                ttl_s: claims.expires - now,
                max_s: MAX_TTL.as_secs(),
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

/// The single-use ledger of a run: one line per spent token, `run fingerprint expiry nonce`.
///
/// Reads take a shared lock and spends an exclusive one on the ledger file, so the check and
/// the append of [`Ledger::spend`] are one step for every process on the machine.
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

    /// The ledger file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn spent_in(text: &str, claims: &TokenClaims, token: &str) -> bool {
        let key = claims.ledger_key();
        // Ledgers written before keys were claims hold the SHA-256 of the token text.
        let legacy = sha256_hex(token.as_bytes());
        text.lines().any(|l| l == key || l == legacy)
    }

    /// Whether the token was spent (a malformed token is refused).
    pub fn is_spent(&self, token: &str) -> Result<bool, ApprovalError> {
        let (claims, _) = parse_token(token)?;
        let mut f = match std::fs::File::open(&self.path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
            Err(e) => return Err(io_err("open", &self.path)(e)),
        };
        f.lock_shared().map_err(io_err("lock", &self.path))?;
        let mut text = String::new();
        f.read_to_string(&mut text)
            .map_err(io_err("read", &self.path))?;
        Ok(Self::spent_in(&text, &claims, token))
    }

    /// Spend the token: under an exclusive lock on the ledger, refuse it when it is already
    /// there, else append it and fsync. Returns the SHA-256 of the token (for the audit log).
    pub fn spend(&self, token: &str) -> Result<String, ApprovalError> {
        let (claims, _) = parse_token(token)?;
        let created = !self.path.exists();
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .read(true)
            .append(true)
            .open(&self.path)
            .map_err(io_err("open", &self.path))?;
        f.lock().map_err(io_err("lock", &self.path))?;
        let mut text = String::new();
        f.read_to_string(&mut text)
            .map_err(io_err("read", &self.path))?;
        if Self::spent_in(&text, &claims, token) {
            return Err(ApprovalError::Replayed);
        }
        f.write_all(format!("{}\n", claims.ledger_key()).as_bytes())
            .and_then(|_| f.sync_all())
            .map_err(io_err("write", &self.path))?;
        if created {
            // Make the new file's directory entry durable too.
            if let Some(dir) = self.path.parent() {
                if let Ok(d) = std::fs::File::open(dir) {
                    let _ = d.sync_all();
                }
            }
        }
        // The lock is released when `f` closes.
        Ok(sha256_hex(token.as_bytes()))
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
    fn every_other_spelling_is_refused_before_the_signature() {
        let k = ApprovalKey::from_bytes([7; 32]);
        let t = k.issue_until("run-1", FP, 1000);
        let parts: Vec<&str> = t.split('.').collect();
        let join = |p: &[String]| p.join(".");
        let mut variants: Vec<String> = vec![
            t.to_uppercase(),
            format!(" {t}"),
            format!("{t}\n"),
            t.replace(".1000.", ".01000."),
            t.replace(".1000.", ".+1000."),
            t.replace(".1000.", ".1000 ."),
            format!("V2{}", &t[2..]),
        ];
        for i in [2, 4, 5] {
            let mut p: Vec<String> = parts.iter().map(|s| s.to_string()).collect();
            p[i] = p[i].to_uppercase();
            variants.push(join(&p));
        }
        for v in &variants {
            assert!(
                matches!(
                    k.check_at(v, "run-1", FP, 999),
                    Err(ApprovalError::Malformed { .. })
                ),
                "{v:?}"
            );
        }
        assert!(k.check_at(&t, "run-1", FP, 999).is_ok());
        // A v1 token (no nonce) still verifies, in its one spelling.
        let v1 = k.sign(&TokenClaims {
            run_id: "run-1".into(),
            fingerprint: FP.into(),
            expires: 1000,
            nonce: None,
        });
        assert!(v1.starts_with("v1."));
        assert!(k.check_at(&v1, "run-1", FP, 999).is_ok());
    }

    #[test]
    fn a_token_further_ahead_than_a_day_is_refused() {
        let k = ApprovalKey::from_bytes([7; 32]);
        let t = k.issue_until("run-1", FP, 1_000_000);
        assert!(matches!(
            k.check_at(&t, "run-1", FP, 1_000_000 - 2 * 86_400),
            Err(ApprovalError::TtlTooLong { .. })
        ));
        assert!(k.check_at(&t, "run-1", FP, 1_000_000 - 86_400).is_ok());
        assert!(matches!(
            parse_ttl("25h"),
            Err(ApprovalError::TtlTooLong { .. })
        ));
        assert!(parse_ttl("24h").is_ok());
    }

    #[test]
    fn the_ledger_spends_a_token_once_across_threads() {
        let d = tempfile::tempdir().expect("tempdir");
        let k = ApprovalKey::from_bytes([7; 32]);
        let t = k.issue_until("run-1", FP, u64::MAX / 2);
        let ok = std::sync::atomic::AtomicUsize::new(0);
        std::thread::scope(|s| {
            for _ in 0..8 {
                s.spawn(|| {
                    if Ledger::new(d.path()).spend(&t).is_ok() {
                        ok.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    }
                });
            }
        });
        assert_eq!(ok.into_inner(), 1);
        assert!(Ledger::new(d.path()).is_spent(&t).expect("read"));
        // A second token for the same action (another nonce) is its own approval.
        let t2 = k.issue_until("run-1", FP, u64::MAX / 2);
        assert_ne!(t, t2);
        assert!(Ledger::new(d.path()).spend(&t2).is_ok());
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
