//! Process memory readings: the counting allocator's live and peak heap bytes, and the
//! kernel's view (`VmRSS`, `VmHWM` from `/proc/self/status`).
//!
//! The allocator is exact for what Rust code (candle's CPU tensors included) allocates; RSS
//! also sees the binary, thread stacks and memory freed but not yet returned to the OS. Both
//! are reported; the comparison uses the allocator where it is installed and RSS otherwise.

use serde::Serialize;

use super::alloc;
use crate::hw::memory::kib_field;
use crate::units::Bytes;

/// One reading.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct MemSnapshot {
    /// Live heap bytes (counting allocator), when installed.
    pub heap: Option<Bytes>,
    /// Highest live heap bytes since the last [`reset_peaks`], when installed.
    pub heap_peak: Option<Bytes>,
    /// Resident set size.
    pub rss: Option<Bytes>,
    /// Resident set high-water mark.
    pub rss_peak: Option<Bytes>,
}

impl MemSnapshot {
    /// Read now.
    pub fn now() -> Self {
        let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
        let (heap, heap_peak) = if alloc::installed() {
            let s = alloc::stats();
            (Some(Bytes(s.live)), Some(Bytes(s.peak)))
        } else {
            (None, None)
        };
        Self {
            heap,
            heap_peak,
            rss: kib_field(&status, "VmRSS"),
            rss_peak: kib_field(&status, "VmHWM"),
        }
    }
}

/// Start new high-water marks: the allocator's, and the kernel's where it allows
/// (`/proc/self/clear_refs`, Linux ≥ 4.0). Returns whether the RSS mark was reset.
pub fn reset_peaks() -> bool {
    alloc::reset_peak();
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// `after - before` as a signed byte count, when both are known.
pub fn delta(before: Option<Bytes>, after: Option<Bytes>) -> Option<i64> {
    Some(after?.0 as i64 - before?.0 as i64)
}
