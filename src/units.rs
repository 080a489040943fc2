//! Units in types, not in names: `Bytes`, `TokensPerSec`, `BytesPerSec`.
//!
//! Each is a transparent newtype that serializes as its bare number, so JSON stays plain while
//! the code cannot add bytes to tokens/s by mistake. `Display` picks a human unit.

use serde::{Deserialize, Serialize};
use std::fmt;

/// A byte count.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct Bytes(pub u64);

impl Bytes {
    /// Bytes in one KiB.
    pub const KIB: u64 = 1024;
    /// Bytes in one MiB.
    pub const MIB: u64 = 1024 * 1024;
    /// Bytes in one GiB.
    pub const GIB: u64 = 1024 * 1024 * 1024;

    /// The value in GiB.
    pub fn gib(self) -> f64 {
        self.0 as f64 / Self::GIB as f64
    }

    /// The value in MiB.
    pub fn mib(self) -> f64 {
        self.0 as f64 / Self::MIB as f64
    }

    /// The value in decimal gigabytes (10^9), as spec sheets and calculators quote them.
    pub fn gb(self) -> f64 {
        self.0 as f64 / 1e9
    }
}

impl fmt::Display for Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.0;
        if b >= Self::GIB {
            write!(f, "{:.2} GiB", self.gib())
        } else if b >= Self::MIB {
            write!(f, "{:.1} MiB", self.mib())
        } else if b >= Self::KIB {
            write!(f, "{:.1} KiB", b as f64 / Self::KIB as f64)
        } else {
            write!(f, "{b} B")
        }
    }
}

/// A throughput in bytes per second.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd, Default, Serialize, Deserialize)]
#[serde(transparent)]
pub struct BytesPerSec(pub f64);

impl fmt::Display for BytesPerSec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:.1} GB/s", self.0 / 1e9)
    }
}

/// A generation or prefill speed in tokens per second.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd, Default, Serialize, Deserialize)]
#[serde(transparent)]
pub struct TokensPerSec(pub f64);

impl fmt::Display for TokensPerSec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:.1} tok/s", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_display_picks_unit() {
        assert_eq!(Bytes(512).to_string(), "512 B");
        assert_eq!(Bytes(3 * Bytes::MIB / 2).to_string(), "1.5 MiB");
        assert_eq!(Bytes(5 * Bytes::GIB).to_string(), "5.00 GiB");
    }
}
