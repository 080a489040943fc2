//! Sizing in users' words (issue 39): hardware written as people write it is sized as
//! `boyd size` sizes it, and a task that names hardware is never sized on this machine.
//!
//! The held-out split's tasks are read here only as data: every task marked `names_hardware`
//! is put to `size_model` with `hw: "this"`, which must be refused. The split's text is never
//! copied into `src/` (`heldout.rs` checks that).

use std::path::Path;

use serde_json::{json, Value};

use boyd::agent::tools::{SizeModel, Tool, ToolContext};
use boyd::lm::CancelToken;
use boyd::sizer::{self, SizeQuery};

fn ctx(task: &str) -> ToolContext {
    ToolContext {
        workspace: None,
        blob_dir: std::env::temp_dir(),
        cancel: CancelToken::new(),
        task: Some(task.to_string()),
        observed: Vec::new(),
    }
}

/// The tasks of an eval suite, as JSON (comment lines skipped).
fn suite(name: &str) -> Vec<Value> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("evals")
        .join(name);
    let text = std::fs::read_to_string(&path).expect("suite");
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#') && !l.starts_with("//"))
        .map(|l| serde_json::from_str(l).expect("a JSON task"))
        .collect()
}

#[test]
fn no_task_that_names_hardware_is_sized_on_this_machine() {
    let tasks: Vec<Value> = suite("test.jsonl")
        .into_iter()
        .filter(|t| t["names_hardware"] == json!(true))
        .collect();
    let mut sized_here = Vec::new();
    for t in &tasks {
        let text = t["task"].as_str().unwrap_or_default();
        let r =
            SizeModel::default().call(json!({"model": "llama-3.1-8b", "hw": "this"}), &ctx(text));
        if r.is_ok() {
            sized_here.push(t["id"].as_str().unwrap_or("?").to_string());
        }
    }
    println!(
        "{} tasks name hardware; {} were sized on this machine",
        tasks.len(),
        sized_here.len()
    );
    assert!(
        !tasks.is_empty(),
        "the test split marks no task names_hardware"
    );
    assert!(
        sized_here.is_empty(),
        "sized on this machine: {sized_here:?}"
    );
}

#[test]
fn a_missing_hw_is_an_error_never_this_machine() {
    let err = SizeModel::default()
        .call(
            json!({"model": "llama-3.1-8b"}),
            &ctx("How big is llama 3.1 8b?"),
        )
        .expect_err("no hw");
    assert!(err.message.contains("hw is required"), "{}", err.message);
}

#[test]
fn size_model_and_boyd_size_agree_on_hardware_written_in_words() {
    for hw in [
        "a 16 GB GPU",
        "RTX 3060 12 GB",
        "MacBook Pro M3 Max 64 GB",
        "48GB of VRAM",
        "32 GB RAM",
    ] {
        let out = SizeModel::default()
            .call(
                json!({"model": "qwen2.5-7b", "hw": hw, "ctx": 8192}),
                &ctx("sizing"),
            )
            .expect(hw);
        let mut q = SizeQuery::new("qwen2.5-7b", hw);
        q.ctx = Some(8192);
        let e = sizer::estimate(&q).expect("boyd size's estimate");
        for figure in [
            format!("needs {:.1} GB", e.memory.total.gb()),
            format!("{:.1} GB usable", e.hardware.free.gb()),
            format!("{:.1} tokens/s at 8192 tokens", e.speed.decode_at_ctx.0),
        ] {
            assert!(out.contains(&figure), "{hw}: {figure} not in {out}");
        }
    }
}
