//! `--model auto`: the pure choice ([`boyd::catalog::pick_auto`]) on made-up machines, and the
//! CLI printing its choice and reason.

use std::path::Path;
use std::process::Command;

use boyd::catalog::{pick_auto, Catalog, ModelEntry, AGENT_DEFAULT_MODEL, AUTO_MIN_DECODE_TPS};
use boyd::sizer::{this_machine_from, GpuFacts, MachineFacts};
use boyd::sizing::{Backend, Hardware};
use boyd::units::{Bytes, BytesPerSec};

/// This machine as a probe would report a CUDA GPU of `gib` GiB, all of it free (no preset has
/// the name, so the sizing model assumes 1 TB/s and 100 TFLOP/s for it).
fn gpu(gib: u64) -> Hardware {
    let facts = MachineFacts {
        gpu: Some(GpuFacts {
            backend: Backend::Cuda,
            name: format!("Test GPU {gib}GB"),
            total: Bytes(gib * Bytes::GIB),
            free: Bytes(gib * Bytes::GIB),
        }),
        host: Err(boyd::hw::ProbeError::System {
            what: "/proc/meminfo",
            reason: "not read in this test".into(),
        }),
    };
    this_machine_from(&facts, None).expect("hardware from facts")
}

fn all_available(e: &ModelEntry) -> bool {
    e.source.is_some()
}

#[test]
fn auto_picks_the_largest_runnable_model_that_fits_8_24_and_96_gb() {
    let catalog = Catalog::shipped().expect("catalog");
    for (gib, expected) in [(8, "qwen3-8b"), (24, "qwen2.5-32b"), (96, "qwen2.5-72b")] {
        let hw = gpu(gib);
        let choice = pick_auto(&catalog, &hw, 8192, AUTO_MIN_DECODE_TPS, &all_available);
        assert_eq!(choice.name, expected, "{gib} GB: {choice:#?}");
        let fit = choice.fit.as_ref().expect("sized");
        assert!(fit.fits && fit.runnable, "{fit:?}");
        assert!(fit.decode_at_ctx.0 >= AUTO_MIN_DECODE_TPS, "{fit:?}");
        assert!(choice.reason.contains(expected), "{}", choice.reason);
        assert!(choice.reason.contains("tok/s"), "{}", choice.reason);
        // Every larger runnable, available model was looked at and does not fit.
        let chosen = catalog.get(expected).expect("entry");
        for c in &choice.considered {
            let e = catalog.get(&c.name).expect("entry");
            if e.params > chosen.params && e.arch.architecture.runnable() {
                let f = c.fit.as_ref().expect("a larger model is sized");
                assert!(!f.fits, "{gib} GB: {} fits but was passed over", c.name);
            }
        }
    }
}

#[test]
fn auto_takes_only_available_models_and_falls_back_to_the_default() {
    let catalog = Catalog::shipped().expect("catalog");
    let hw = gpu(96);
    // Only one larger model downloaded: it is the choice even though larger ones would fit.
    let only = |e: &ModelEntry| e.name == "llama-3.2-3b";
    let choice = pick_auto(&catalog, &hw, 8192, AUTO_MIN_DECODE_TPS, &only);
    assert_eq!(choice.name, "llama-3.2-3b");
    let passed = choice
        .considered
        .iter()
        .find(|c| c.name == "qwen2.5-72b")
        .expect("considered");
    assert!(passed.verdict.contains("not available"), "{passed:?}");
    // Nothing larger available: the default, saying so.
    let choice = pick_auto(&catalog, &hw, 8192, AUTO_MIN_DECODE_TPS, &|_| false);
    assert_eq!(choice.name, AGENT_DEFAULT_MODEL);
    assert!(choice.reason.contains("default"), "{}", choice.reason);
    // Architectures the decoder does not run are never chosen.
    assert!(choice
        .considered
        .iter()
        .filter(|c| c.name.starts_with("gemma-3"))
        .all(|c| c.verdict.contains("does not run")
            || catalog
                .get(&c.name)
                .is_some_and(|e| e.arch.architecture.runnable())));
}

#[test]
fn auto_respects_the_minimum_decode_speed() {
    let catalog = Catalog::shipped().expect("catalog");
    // 96 GiB of memory behind a 100 GB/s bus: a 72B model fits but decodes at about 1 tok/s.
    let slow = Hardware::new(
        "slow",
        "96 GiB, 100 GB/s",
        Backend::Cuda,
        Bytes(96 * Bytes::GIB),
        1.0,
        BytesPerSec(100e9),
        100e12,
        "test",
    )
    .expect("hardware");
    let choice = pick_auto(&catalog, &slow, 8192, AUTO_MIN_DECODE_TPS, &all_available);
    let chosen = choice.fit.as_ref().expect("sized");
    assert!(chosen.decode_at_ctx.0 >= AUTO_MIN_DECODE_TPS, "{choice:#?}");
    let big = choice
        .considered
        .iter()
        .find(|c| c.name == "qwen2.5-72b")
        .expect("considered");
    let f = big.fit.as_ref().expect("sized");
    assert!(f.fits, "it fits");
    assert!(big.verdict.contains("tok/s"), "{big:?}");
    let params = |n: &str| catalog.get(n).expect("entry").params;
    assert!(params(&choice.name) < params("qwen2.5-72b"));
}

#[test]
fn cli_model_auto_prints_the_choice_and_the_reason() {
    let home = tempfile::tempdir().expect("tempdir");
    // Nothing downloaded and no --pull: the default is chosen and named, whatever this machine.
    let out = boyd(
        &["generate", "--model", "auto", "--max-tokens", "1", "hi"],
        home.path(),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--model auto") && stderr.contains(AGENT_DEFAULT_MODEL),
        "{stderr}"
    );
    assert!(
        stderr.contains("tok/s"),
        "the reason states the speed floor: {stderr}"
    );
}

fn boyd(args: &[&str], home: &Path) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_boyd"))
        .args(args)
        .env("BOYD_HOME", home)
        .env("HF_HOME", home.join("hf"))
        .env("HF_HUB_OFFLINE", "1")
        .env("BOYD_PYTHON", home.join("no-python"))
        .output()
        .expect("run boyd")
}
