//! The CPU: model name, logical and physical cores, SIMD features detected at run time, and the
//! last-level cache size (which the bandwidth probe must exceed by far).
//!
//! Everything comes from `/proc/cpuinfo` and `/sys/devices/system/cpu` where they exist; on
//! other systems the fields that cannot be read are `None` rather than guesses.

use serde::Serialize;

use crate::units::Bytes;

/// What this host's CPU is.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CpuInfo {
    /// Model name (`AMD EPYC 9654`), or the architecture when unknown.
    pub model: String,
    /// Target architecture.
    pub arch: &'static str,
    /// Logical CPUs this process may run on.
    pub logical: usize,
    /// Physical cores (distinct `core id` per `physical id`), when known.
    pub physical: Option<usize>,
    /// SIMD features the CPU supports (detected at run time, not compiled in).
    pub simd: Vec<&'static str>,
    /// Size of the last-level cache, when known.
    pub last_level_cache: Option<Bytes>,
}

impl CpuInfo {
    /// Describe this host's CPU.
    pub fn detect() -> Self {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        Self {
            model: parse_model(&cpuinfo).unwrap_or_else(|| std::env::consts::ARCH.to_string()),
            arch: std::env::consts::ARCH,
            logical: std::thread::available_parallelism().map_or(1, |n| n.get()),
            physical: parse_physical_cores(&cpuinfo),
            simd: simd_features(),
            last_level_cache: last_level_cache(),
        }
    }
}

/// The first `model name` in `/proc/cpuinfo` text.
pub fn parse_model(cpuinfo: &str) -> Option<String> {
    cpuinfo
        .lines()
        .find(|l| l.starts_with("model name") || l.starts_with("Model"))
        .and_then(|l| l.split_once(':'))
        .map(|(_, v)| v.trim().to_string())
        .filter(|s| !s.is_empty())
}

/// Distinct `(physical id, core id)` pairs in `/proc/cpuinfo` text.
pub fn parse_physical_cores(cpuinfo: &str) -> Option<usize> {
    let mut pairs = std::collections::BTreeSet::new();
    let mut phys = None;
    for line in cpuinfo.lines() {
        let Some((k, v)) = line.split_once(':') else {
            continue;
        };
        match k.trim() {
            "physical id" => phys = v.trim().parse::<u32>().ok(),
            "core id" => {
                if let Ok(core) = v.trim().parse::<u32>() {
                    pairs.insert((phys.unwrap_or(0), core));
                }
            }
            _ => {}
        }
    }
    (!pairs.is_empty()).then_some(pairs.len())
}

/// A cache size as sysfs writes it: `32768K`, `2M`, `512`.
pub fn parse_cache_size(s: &str) -> Option<Bytes> {
    let s = s.trim();
    let (num, mult) = match s.chars().last()? {
        'K' | 'k' => (&s[..s.len() - 1], Bytes::KIB),
        'M' | 'm' => (&s[..s.len() - 1], Bytes::MIB),
        'G' | 'g' => (&s[..s.len() - 1], Bytes::GIB),
        _ => (s, 1),
    };
    num.trim().parse::<u64>().ok()?.checked_mul(mult).map(Bytes)
}

/// The largest cache of CPU 0 (sysfs), i.e. the last level.
fn last_level_cache() -> Option<Bytes> {
    let dir = std::fs::read_dir("/sys/devices/system/cpu/cpu0/cache").ok()?;
    dir.flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("index"))
        .filter_map(|e| std::fs::read_to_string(e.path().join("size")).ok())
        .filter_map(|s| parse_cache_size(&s))
        .max()
}

/// SIMD features this CPU supports, detected at run time.
fn simd_features() -> Vec<&'static str> {
    #[allow(unused_mut)]
    let mut out = Vec::new();
    #[cfg(target_arch = "x86_64")]
    {
        macro_rules! detect {
            ($($f:tt),*) => {$(
                if std::arch::is_x86_feature_detected!($f) {
                    out.push($f);
                }
            )*};
        }
        detect!(
            "sse4.2",
            "avx",
            "avx2",
            "fma",
            "f16c",
            "avx512f",
            "avx512bw",
            "avx512vl",
            "avx512vnni",
            "avx512bf16",
            "avxvnni"
        );
    }
    #[cfg(target_arch = "aarch64")]
    {
        macro_rules! detect {
            ($($f:tt),*) => {$(
                if std::arch::is_aarch64_feature_detected!($f) {
                    out.push($f);
                }
            )*};
        }
        detect!("neon", "dotprod", "i8mm", "fp16", "bf16", "sve", "sve2");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_cpuinfo_and_cache_sizes() {
        let text = "processor\t: 0\nmodel name\t: AMD EPYC 9654\nphysical id\t: 0\ncore id\t\t: 0\n\n\
                    processor\t: 1\nmodel name\t: AMD EPYC 9654\nphysical id\t: 0\ncore id\t\t: 0\n\n\
                    processor\t: 2\nmodel name\t: AMD EPYC 9654\nphysical id\t: 0\ncore id\t\t: 1\n";
        assert_eq!(parse_model(text).as_deref(), Some("AMD EPYC 9654"));
        assert_eq!(parse_physical_cores(text), Some(2));
        assert_eq!(parse_physical_cores("processor: 0\n"), None);
        assert_eq!(parse_cache_size("32768K\n"), Some(Bytes(32 * Bytes::MIB)));
        assert_eq!(parse_cache_size("2M"), Some(Bytes(2 * Bytes::MIB)));
        assert_eq!(parse_cache_size("x"), None);
    }
}
