//! This machine as sizing [`Hardware`]: the one place that turns the host's RAM
//! ([`HostMemory`], `/proc/meminfo`) and thread count into the device `sizing::estimate` takes,
//! with the assumed bandwidth and matrix throughput of an uncalibrated host.
//!
//! `boyd size --hw this`, `boyd validate` and the runtime's load-time fit check all size "this
//! machine"; they start from [`this_machine`] and differ only in what they lay on top (a
//! calibration profile, a name, a note on where the numbers come from).

use super::{HostMemory, ProbeError};
use crate::sizing::{Backend, Hardware, SizingError};
use crate::units::BytesPerSec;

/// Assumed peak DRAM bandwidth of an uncalibrated host: dual-channel DDR4-3200
/// (2 × 25.6 GB/s), the common desktop and laptop configuration. Replaced by the measured
/// value once `boyd validate` has written a profile.
pub const ASSUMED_HOST_BANDWIDTH: BytesPerSec = BytesPerSec(51.2e9);

/// Assumed matrix throughput per CPU core of an uncalibrated host, in multiply-add pairs
/// counted as two operations: boyd's CPU matmuls multiply 8-bit codes (AVX2 `vpmaddubsw` or
/// AVX-512 VNNI `vpdpbusd`: 32 multiply-adds per 256-bit instruction, two per cycle, so
/// 128 operations/cycle) at 2.5 GHz. Calibration fits an efficiency on top.
pub const ASSUMED_FLOPS_PER_CORE: f64 = 128.0 * 2.5e9;

/// Where [`this_machine`]'s numbers come from.
pub const THIS_MACHINE_SOURCE: &str =
    "RAM from /proc/meminfo (MemAvailable as free); bandwidth assumed 51.2 GB/s \
     (dual-channel DDR4-3200) and 320 G int8 op/s per thread until `boyd validate` calibrates";

/// This machine, uncalibrated: RAM and `MemAvailable` from `/proc/meminfo`, the threads this
/// process may use, and the assumed bandwidth and per-core throughput.
pub fn this_machine() -> Result<Hardware, ProbeError> {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    host_hardware(HostMemory::read()?, cores).map_err(|e| ProbeError::System {
        what: "/proc/meminfo",
        reason: e.to_string(),
    })
}

/// [`this_machine`] for a given memory reading and thread count (pure, for tests).
pub fn host_hardware(mem: HostMemory, cores: usize) -> Result<Hardware, SizingError> {
    let cores = cores.max(1);
    Ok(Hardware::new(
        "this",
        &format!("this machine ({cores} CPU threads)"),
        Backend::Cpu,
        mem.total,
        1.0,
        ASSUMED_HOST_BANDWIDTH,
        cores as f64 * ASSUMED_FLOPS_PER_CORE,
        THIS_MACHINE_SOURCE,
    )?
    .with_free(mem.available.unwrap_or(mem.total))
    .with_threads(cores))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::units::Bytes;

    #[test]
    fn the_published_offload_check_assumes_this_hosts_per_thread_throughput() {
        assert_eq!(
            crate::sizing::published::check::HOST_FLOPS_PER_THREAD,
            ASSUMED_FLOPS_PER_CORE
        );
    }

    #[test]
    fn host_hardware_uses_available_memory_and_threads() {
        let mem = HostMemory {
            total: Bytes(16 * Bytes::GIB),
            available: Some(Bytes(6 * Bytes::GIB)),
        };
        let hw = host_hardware(mem, 8).expect("hardware");
        assert_eq!(hw.name, "this");
        assert_eq!(hw.backend, Backend::Cpu);
        assert_eq!(hw.memory, Bytes(16 * Bytes::GIB));
        assert_eq!(hw.free, Bytes(6 * Bytes::GIB));
        assert_eq!(hw.threads, Some(8));
        assert_eq!(hw.bandwidth, ASSUMED_HOST_BANDWIDTH);
        assert_eq!(hw.matrix_flops, 8.0 * 320e9);
    }

    #[test]
    fn without_mem_available_all_memory_counts_as_free() {
        let mem = HostMemory {
            total: Bytes(Bytes::GIB),
            available: None,
        };
        assert_eq!(
            host_hardware(mem, 0).expect("hardware").free,
            Bytes(Bytes::GIB)
        );
    }

    #[test]
    fn zero_memory_is_an_error_not_a_device() {
        let mem = HostMemory {
            total: Bytes(0),
            available: None,
        };
        assert!(host_hardware(mem, 4).is_err());
    }
}
