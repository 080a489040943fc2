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

// Calendar: the one civil-date routine, shared by the chat template's `strftime_now`, the
// calculator's date arithmetic and the run directory's timestamps.

/// The months' names, January first.
pub const MONTH_NAMES: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];

/// The weekdays' names, from the weekday of 1970-01-01 (a Thursday): day number `n` is
/// `WEEKDAYS_FROM_EPOCH[n.rem_euclid(7)]`.
pub const WEEKDAYS_FROM_EPOCH: [&str; 7] = [
    "Thursday",
    "Friday",
    "Saturday",
    "Sunday",
    "Monday",
    "Tuesday",
    "Wednesday",
];

/// The civil date (year, month 1-12, day) of a day number, days since 1970-01-01 (proleptic
/// Gregorian; Howard Hinnant's algorithm).
pub fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(month <= 2), month, day)
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

    #[test]
    fn civil_dates_round_the_leap_days() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(19_723), (2024, 1, 1));
        assert_eq!(civil_from_days(19_782), (2024, 2, 29));
        assert_eq!(civil_from_days(-1), (1969, 12, 31));
        assert_eq!(
            WEEKDAYS_FROM_EPOCH[19_723_i64.rem_euclid(7) as usize],
            "Monday"
        );
    }
}
