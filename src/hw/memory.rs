//! System memory: total and available RAM from `/proc/meminfo`.

use serde::Serialize;

use super::ProbeError;
use crate::units::Bytes;

/// The host's RAM.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct HostMemory {
    /// `MemTotal`.
    pub total: Bytes,
    /// `MemAvailable`: what a new process can allocate without swapping (kernel ≥ 3.14).
    pub available: Option<Bytes>,
}

impl HostMemory {
    /// Read `/proc/meminfo`.
    pub fn read() -> Result<Self, ProbeError> {
        let text = std::fs::read_to_string("/proc/meminfo").map_err(|e| ProbeError::System {
            what: "/proc/meminfo",
            reason: e.to_string(),
        })?;
        Self::parse(&text).ok_or_else(|| ProbeError::System {
            what: "/proc/meminfo",
            reason: "no MemTotal line".into(),
        })
    }

    /// Parse the text of `/proc/meminfo`.
    pub fn parse(text: &str) -> Option<Self> {
        Some(Self {
            total: kib_field(text, "MemTotal")?,
            available: kib_field(text, "MemAvailable"),
        })
    }
}

/// A `Key:   123 kB` line of `/proc/meminfo` or `/proc/self/status`, in bytes.
pub fn kib_field(text: &str, key: &str) -> Option<Bytes> {
    let line = text
        .lines()
        .find(|l| l.split_once(':').is_some_and(|(k, _)| k == key))?;
    let (_, rest) = line.split_once(':')?;
    let kib: u64 = rest.split_whitespace().next()?.parse().ok()?;
    kib.checked_mul(1024).map(Bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_meminfo() {
        let m = HostMemory::parse(
            "MemTotal:       16384 kB\nMemFree: 1 kB\nMemAvailable:    8192 kB\n",
        )
        .expect("parse");
        assert_eq!(m.total, Bytes(16 * Bytes::MIB));
        assert_eq!(m.available, Some(Bytes(8 * Bytes::MIB)));
        assert!(HostMemory::parse("MemFree: 1 kB").is_none());
        assert_eq!(
            kib_field("VmRSS:\t  100 kB\n", "VmRSS"),
            Some(Bytes(102_400))
        );
        assert_eq!(kib_field("VmRSSx: 1 kB", "VmRSS"), None);
    }

    /// Moved from the runtime's fit check, whose parser this one replaced.
    #[test]
    fn meminfo_parsing() {
        let parse = |t: &str| HostMemory::parse(t).map(|m| (m.total, m.available));
        let text =
            "MemTotal:       16318480 kB\nMemFree:         1000 kB\nMemAvailable:   8000000 kB\n";
        assert_eq!(
            parse(text),
            Some((Bytes(16_318_480 * 1024), Some(Bytes(8_000_000 * 1024))))
        );
        assert_eq!(parse("MemTotal: 1024 kB\n"), Some((Bytes(1 << 20), None)));
        assert_eq!(parse("MemAvailable: 5 kB\n"), None);
        assert_eq!(parse("MemTotal: lots\n"), None);
        assert_eq!(parse("MemTotal: 99999999999999999999 kB\n"), None);
    }
}
