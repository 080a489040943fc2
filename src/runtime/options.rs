//! The runtime's tuning knobs — engine, kernel set, prefill chunk, profiling — and the one
//! place that reads them from the environment.
//!
//! The CLI calls [`RuntimeOptions::from_env`] once and passes the result down in
//! [`crate::runtime::local::LoadOptions`] (or a `measure` configuration); the decoder, the
//! native engine and the session take the values they are given and never look at the
//! environment themselves. Library callers build the options they want; the default is what
//! an unset environment means.

use std::sync::Arc;

use crate::kernels::cpu::KernelChoice;
use crate::runtime::decoder::EngineKind;
use crate::runtime::session::PREFILL_CHUNK;
use crate::sizing::KvDtype;

/// The native engine's KV cache type unless the caller picks one (`--kv-dtype`).
pub const DEFAULT_KV_DTYPE: KvDtype = KvDtype::F16;

/// Environment variable choosing the engine: `candle`, `native` or `auto`.
pub const ENGINE_ENV: &str = "BOYD_ENGINE";
/// Environment variable choosing the CPU kernel set: `auto`, `scalar`, `exact`, `no-panel`,
/// `no-vnni`.
pub const KERNELS_ENV: &str = "BOYD_KERNELS";
/// Environment variable with the prefill chunk in tokens (a positive number).
pub const PREFILL_CHUNK_ENV: &str = "BOYD_PREFILL_CHUNK";
/// Environment variable asking for the native engine's per-operation profile (`1`).
pub const PROFILE_ENV: &str = "BOYD_PROFILE";
/// Environment variable turning off the batched pass over constraint-forced tokens (`0`).
pub const FAST_FORWARD_ENV: &str = "BOYD_FAST_FORWARD";

/// The native engine's time per operation over its life, handed to a [`ProfileSink`] when the
/// model is dropped.
#[derive(Debug, Clone, PartialEq)]
pub struct EngineProfile {
    /// Forward calls.
    pub calls: u64,
    /// Seconds per operation, in the engine's order.
    pub ops: Vec<(&'static str, f64)>,
}

impl std::fmt::Display for EngineProfile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let total: f64 = self.ops.iter().map(|o| o.1).sum();
        writeln!(
            f,
            "native engine profile: {} forward calls, {total:.3} s",
            self.calls
        )?;
        for (name, secs) in &self.ops {
            writeln!(
                f,
                "  {name:<30} {:>9.3} ms {:>5.1} %",
                secs * 1e3,
                100.0 * secs / total.max(1e-12)
            )?;
        }
        Ok(())
    }
}

/// Where the native engine's profile goes when the model is dropped (the CLI prints it).
#[derive(Clone)]
pub struct ProfileSink(pub Arc<dyn Fn(&EngineProfile) + Send + Sync>);

impl std::fmt::Debug for ProfileSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ProfileSink(..)")
    }
}

/// How the runtime computes.
#[derive(Debug, Clone)]
pub struct RuntimeOptions {
    /// Which engine runs the decoder.
    pub engine: EngineKind,
    /// Which CPU kernel set the native engine uses.
    pub kernels: KernelChoice,
    /// Tokens per forward call during prefill (llama.cpp's ubatch).
    pub prefill_chunk: usize,
    /// Time every operation of the native engine and hand the totals here on drop.
    pub profile: Option<ProfileSink>,
    /// Run the tokens an output constraint forces in one batched pass (default on).
    pub fast_forward: bool,
    /// Element type of the native engine's KV cache: `f16` (the default), `f32` or `q8_0`
    /// (the candle engine keeps `f32` on the CPU and `f16` on GPUs).
    pub kv_dtype: KvDtype,
}

impl Default for RuntimeOptions {
    fn default() -> Self {
        Self {
            engine: EngineKind::Auto,
            kernels: KernelChoice::Auto,
            prefill_chunk: PREFILL_CHUNK,
            profile: None,
            fast_forward: true,
            kv_dtype: DEFAULT_KV_DTYPE,
        }
    }
}

impl RuntimeOptions {
    /// The options an unset environment means, with `engine`.
    pub fn with_engine(engine: EngineKind) -> Self {
        Self {
            engine,
            ..Self::default()
        }
    }

    /// `BOYD_ENGINE`, `BOYD_KERNELS`, `BOYD_PREFILL_CHUNK` and `BOYD_FAST_FORWARD` (the CLI
    /// calls this once; an unknown value is warned about and ignored). The profile sink stays `None`: whether one
    /// is wanted is [`RuntimeOptions::profile_requested`], and where it goes is the caller's.
    pub fn from_env() -> Self {
        Self {
            engine: EngineKind::from_env(),
            kernels: kernels_from_env(),
            prefill_chunk: prefill_chunk_from_env(),
            profile: None,
            fast_forward: std::env::var(FAST_FORWARD_ENV).map_or(true, |v| v != "0"),
            kv_dtype: DEFAULT_KV_DTYPE,
        }
    }

    /// Whether `BOYD_PROFILE=1` asks for the native engine's profile.
    pub fn profile_requested() -> bool {
        std::env::var(PROFILE_ENV).is_ok_and(|v| v == "1")
    }
}

impl EngineKind {
    /// `BOYD_ENGINE=candle|native|auto`, default auto (for the CLI; the library takes an
    /// `EngineKind` in its options).
    pub fn from_env() -> Self {
        match std::env::var(ENGINE_ENV).as_deref() {
            Ok(v) => EngineKind::parse(v).unwrap_or_else(|| {
                tracing::warn!("{ENGINE_ENV}={v:?} is not candle, native or auto; using auto");
                EngineKind::Auto
            }),
            Err(_) => EngineKind::Auto,
        }
    }
}

fn kernels_from_env() -> KernelChoice {
    match std::env::var(KERNELS_ENV).as_deref() {
        Ok(v) => KernelChoice::parse(v).unwrap_or_else(|| {
            tracing::warn!(
                "{KERNELS_ENV}={v:?} is not auto, scalar, avx2, vnni, no-panel, no-vnni or \
                 exact; using the detected kernels"
            );
            KernelChoice::Auto
        }),
        Err(_) => KernelChoice::Auto,
    }
}

fn prefill_chunk_from_env() -> usize {
    std::env::var(PREFILL_CHUNK_ENV)
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&n: &usize| n > 0)
        .unwrap_or(PREFILL_CHUNK)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_profile_report_lists_each_operation_with_its_share() {
        let p = EngineProfile {
            calls: 3,
            ops: vec![("attention", 0.003), ("matmul", 0.001)],
        };
        let text = p.to_string();
        assert!(
            text.starts_with("native engine profile: 3 forward calls, 0.004 s\n"),
            "{text}"
        );
        assert!(text.contains("attention"), "{text}");
        assert!(text.contains(" 75.0 %"), "{text}");
    }

    #[test]
    fn defaults_are_what_an_unset_environment_means() {
        let o = RuntimeOptions::default();
        assert_eq!(o.engine, EngineKind::Auto);
        assert_eq!(o.kernels, KernelChoice::Auto);
        assert_eq!(o.prefill_chunk, PREFILL_CHUNK);
        assert!(o.profile.is_none());
        assert_eq!(o.kv_dtype, KvDtype::F16);
    }
}
