//! Calibration profile: what `boyd validate` measured on one machine, replacing the default
//! speed assumptions and the assumed fixed overhead when `boyd size --hw this` sizes for that
//! machine.
//!
//! Stored as TOML at `$BOYD_HOME/profiles/<device>.toml` (device `cpu`, `cuda-0`, `metal`).
//! This module only converts between text and values; reading and writing the file is the
//! CLI's job, so sizing stays free of I/O.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::error::SizingError;
use super::hardware::{Backend, Hardware, OverheadItem, SpeedParams};
use crate::units::{Bytes, BytesPerSec};

/// Current profile format version.
pub const PROFILE_VERSION: u32 = 1;

/// Measured properties of one device.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    /// Format version ([`PROFILE_VERSION`]).
    pub version: u32,
    /// Device string as given to `--device` (`cpu`, `cuda:0`, `metal`).
    pub device: String,
    /// Backend of that device.
    pub backend: Backend,
    /// CPU or GPU model name.
    pub description: String,
    /// When it was measured (RFC 3339, UTC).
    pub measured_at: String,
    /// boyd version that measured it.
    pub boyd_version: String,
    /// Total memory of the device, when known.
    pub memory_total: Option<Bytes>,
    /// Bandwidth measured by the probe (bytes/s).
    pub bandwidth: BytesPerSec,
    /// Matrix throughput measured (FLOP/s), when measured.
    pub matrix_flops: Option<f64>,
    /// Measured decode bytes/s ÷ `bandwidth`.
    pub decode_efficiency: f64,
    /// Measured prefill FLOP/s ÷ `matrix_flops`.
    pub prefill_efficiency: f64,
    /// Fixed seconds per forward pass.
    pub fixed_cost_s: f64,
    /// Extra seconds per layer per forward pass.
    pub per_layer_cost_s: f64,
    /// Catalog name or file of the model used to calibrate.
    pub model: Option<String>,
    /// Fixed memory measured: on the CPU the process's RSS before loading a model, on a GPU
    /// one context (free memory with and without a second context). It replaces the
    /// backend's assumed term ([`Backend::measured_overhead_term`]). Absent when it was not
    /// measured, and in profiles written before boyd measured it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overhead: Option<Bytes>,
}

impl Profile {
    /// Path of the profile for `device`, relative to the boyd home:
    /// `profiles/cuda-0.toml` for `cuda:0`.
    pub fn relative_path(device: &str) -> PathBuf {
        let safe: String = device
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                    c
                } else {
                    '-'
                }
            })
            .collect();
        PathBuf::from("profiles").join(format!("{safe}.toml"))
    }

    /// Parse and check a profile.
    pub fn from_toml(text: &str) -> Result<Self, SizingError> {
        let p: Profile = toml::from_str(text).map_err(|e| SizingError::Hardware {
            name: "calibration profile".into(),
            reason: e.message().to_owned(),
        })?;
        p.check()?;
        Ok(p)
    }

    /// Serialize as TOML.
    pub fn to_toml(&self) -> Result<String, SizingError> {
        toml::to_string_pretty(self).map_err(|e| SizingError::Hardware {
            name: "calibration profile".into(),
            reason: e.to_string(),
        })
    }

    /// Check version and ranges.
    pub fn check(&self) -> Result<(), SizingError> {
        let bad = |reason: String| SizingError::Hardware {
            name: format!("calibration profile for {}", self.device),
            reason,
        };
        if self.version != PROFILE_VERSION {
            return Err(bad(format!(
                "version {} is not {PROFILE_VERSION}; run `boyd validate` again",
                self.version
            )));
        }
        let frac = |x: f64| x.is_finite() && x > 0.0 && x <= 1.5;
        if !frac(self.decode_efficiency) || !frac(self.prefill_efficiency) {
            return Err(bad("efficiencies must be in (0, 1.5]".into()));
        }
        if !(self.bandwidth.0.is_finite() && self.bandwidth.0 > 0.0) {
            return Err(bad("bandwidth must be positive".into()));
        }
        let nonneg = |x: f64| x.is_finite() && x >= 0.0;
        if !nonneg(self.fixed_cost_s) || !nonneg(self.per_layer_cost_s) {
            return Err(bad("fixed costs must be non-negative".into()));
        }
        if let Some(f) = self.matrix_flops {
            if !(f.is_finite() && f > 0.0) {
                return Err(bad("matrix_flops must be positive".into()));
            }
        }
        Ok(())
    }

    /// `hw` with this profile's measured bandwidth, throughput, speed constants and
    /// overhead.
    pub fn apply(&self, mut hw: Hardware) -> Hardware {
        if let Some(bytes) = self.overhead {
            let name = self.backend.measured_overhead_term();
            let what = match self.backend {
                Backend::Cpu => "process RSS before loading a model",
                Backend::Cuda | Backend::Metal => "one GPU context",
            };
            hw.measured_overhead = Some(OverheadItem {
                name,
                bytes,
                source: format!(
                    "measured by boyd validate {} on {} ({what})",
                    self.measured_at, self.device
                )
                .into(),
                measured: true,
            });
        }
        hw.bandwidth = self.bandwidth;
        if let Some(f) = self.matrix_flops {
            hw.matrix_flops = f;
        }
        hw.speed = SpeedParams::simple(
            self.decode_efficiency,
            self.prefill_efficiency,
            self.fixed_cost_s,
            self.per_layer_cost_s,
            format!(
                "calibrated profile for {} measured {}{}",
                self.device,
                self.measured_at,
                self.model
                    .as_deref()
                    .map(|m| format!(" with {m}"))
                    .unwrap_or_default()
            ),
        );
        hw.source = format!("{}; bandwidth measured by boyd validate", hw.source);
        hw
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Profile {
        Profile {
            version: PROFILE_VERSION,
            device: "cuda:0".into(),
            backend: Backend::Cuda,
            description: "NVIDIA H200".into(),
            measured_at: "2025-01-01T00:00:00Z".into(),
            boyd_version: "0.1.0".into(),
            memory_total: Some(Bytes(1 << 30)),
            bandwidth: BytesPerSec(4.0e12),
            matrix_flops: None,
            decode_efficiency: 0.4,
            prefill_efficiency: 0.2,
            fixed_cost_s: 1e-4,
            per_layer_cost_s: 2e-5,
            model: Some("smollm2-135m-instruct".into()),
            overhead: Some(Bytes(420 * Bytes::MIB)),
        }
    }

    #[test]
    fn round_trips_through_toml_and_applies() {
        let p = sample();
        let text = p.to_toml().expect("toml");
        assert_eq!(Profile::from_toml(&text).expect("parse"), p);
        let hw = Hardware::preset("h200").expect("h200");
        let flops = hw.matrix_flops;
        let hw = p.apply(hw);
        assert_eq!(hw.bandwidth, BytesPerSec(4.0e12));
        assert_eq!(
            hw.matrix_flops, flops,
            "unmeasured throughput keeps the preset's"
        );
        assert_eq!(hw.speed.decode_efficiency, 0.4);
        assert!(hw.speed.source.contains("calibrated") && hw.speed.source.contains("smollm2"));
        assert_eq!(
            Profile::relative_path("cuda:0"),
            PathBuf::from("profiles/cuda-0.toml")
        );
        // The measured context replaces the assumed one; the workspace stays.
        let o = hw.overhead();
        assert_eq!(o[0].name, "cuda-context");
        assert_eq!(o[0].bytes, Bytes(420 * Bytes::MIB));
        assert!(
            o[0].measured
                && o[0]
                    .source
                    .starts_with("measured by boyd validate 2025-01-01")
        );
        assert!(!o[1].measured);
    }

    #[test]
    fn profiles_without_a_measured_overhead_still_parse_and_keep_the_assumption() {
        // A version-1 profile written before the overhead was measured.
        let text = r#"
            version = 1
            device = "cpu"
            backend = "cpu"
            description = "test CPU"
            measured_at = "2025-01-01T00:00:00Z"
            boyd_version = "0.1.0"
            bandwidth = 20000000000.0
            decode_efficiency = 0.5
            prefill_efficiency = 0.2
            fixed_cost_s = 0.0
            per_layer_cost_s = 1e-5
        "#;
        let p = Profile::from_toml(text).expect("old profile parses");
        assert_eq!(p.overhead, None);
        let hw = Hardware::new(
            "this",
            "",
            Backend::Cpu,
            Bytes(Bytes::GIB),
            1.0,
            BytesPerSec(1e10),
            1e11,
            "",
        )
        .expect("hw");
        assert_eq!(p.apply(hw.clone()).overhead(), Backend::Cpu.overhead());
        // With one, the CPU's process term is the measured RSS.
        let p = Profile {
            overhead: Some(Bytes(9 * Bytes::MIB)),
            ..p
        };
        let o = p.apply(hw).overhead();
        assert_eq!(o.len(), 1);
        assert_eq!((o[0].name, o[0].bytes), ("process", Bytes(9 * Bytes::MIB)));
        assert!(o[0].source.contains("measured by boyd validate"));
        assert!(Profile::from_toml(&p.to_toml().expect("toml"))
            .expect("parse")
            .overhead
            .is_some());
    }

    #[test]
    fn rejects_bad_profiles() {
        let mut p = sample();
        p.version = 99;
        assert!(Profile::from_toml(&p.to_toml().expect("toml")).is_err());
        let mut p = sample();
        p.decode_efficiency = 0.0;
        assert!(p.check().is_err());
        assert!(Profile::from_toml("version = 1\nbogus = 2").is_err());
    }
}
