//! A chat template from a hostile model file that builds a huge string without printing it.
//!
//! Fuel and the output cap do not see a string doubled in a variable; rendered in boyd's own
//! process, the failed multi-GiB allocation aborted boyd. The binary renders in a child
//! process with a memory limit, so the render fails with a named error and boyd exits cleanly.

use std::process::Command;

use boyd::lm::{ChatMessage, Role};
use boyd::runtime::chat_template::{ChatTemplate, ChatTemplateError};
use boyd::runtime::gguf::Value;
use boyd::runtime::synth::{self, SynthSpec};
use boyd::sizing::Architecture;

/// Doubles a string 40 times (a TiB) and prints only a short line.
const DOUBLING: &str = "{% set ns = namespace(s='ab') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ 'done' }}";

fn model_with_template(dir: &std::path::Path, template: &str) -> std::path::PathBuf {
    let path = dir.join("evil.gguf");
    let bytes = synth::build_with(
        &SynthSpec::tiny(Architecture::Llama),
        &[("tokenizer.chat_template", Value::String(template.into()))],
    )
    .expect("synthetic model");
    std::fs::write(&path, bytes).expect("write model");
    path
}

#[test]
fn a_template_that_doubles_a_string_fails_its_render_and_boyd_exits_cleanly() {
    let dir = tempfile::tempdir().expect("tempdir");
    let model = model_with_template(dir.path(), DOUBLING);
    let out = Command::new(env!("CARGO_BIN_EXE_boyd"))
        .args(["generate", "--max-tokens", "2", "--model"])
        .arg(&model)
        .arg("hi")
        .env("BOYD_HOME", dir.path().join("home"))
        .output()
        .expect("run boyd");
    let stderr = String::from_utf8_lossy(&out.stderr);
    // An exit code, not a signal: boyd itself did not abort.
    assert_eq!(out.status.code(), Some(1), "{:?}\n{stderr}", out.status);
    assert!(
        stderr.contains("rendering the chat template of") && stderr.contains("was stopped"),
        "{stderr}"
    );
    assert!(stderr.contains("MiB of memory"), "{stderr}");
    assert!(stderr.contains("evil.gguf"), "{stderr}");
}

#[test]
fn a_rendering_process_gives_the_same_text_and_errors_as_rendering_here() {
    // The library renders in its own process unless told otherwise; this test process starts
    // the boyd binary as its rendering process, as the binary itself does.
    boyd::runtime::template_process::use_helper(env!("CARGO_BIN_EXE_boyd").into());
    let msgs = [
        ChatMessage::new(Role::System, "Be brief."),
        ChatMessage::new(Role::User, "Hi \u{1b}[2J \"quoted\" ünïcode"),
    ];
    let t = ChatTemplate::chatml("<s>", "</s>");
    let text = t.render(&msgs, true).expect("renders in the child");
    assert!(
        text.starts_with("<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi \u{1b}[2J \"quoted\" ünïcode<|im_end|>"),
        "{text:?}"
    );
    assert!(text.ends_with("<|im_start|>assistant\n"), "{text:?}");
    // The template's own error comes back typed.
    let raising =
        ChatTemplate::new("{{ raise_exception('no system role') }}", "", "").expect("compiles");
    let err = raising.render(&msgs, true).expect_err("raises");
    assert!(
        matches!(err, ChatTemplateError::Render { ref detail } if detail.contains("no system role")),
        "{err}"
    );
    // The doubling template is stopped in the child, and this process lives on.
    let mut evil = ChatTemplate::new(DOUBLING, "", "").expect("compiles");
    evil.set_origin("evil.gguf");
    let err = evil.render(&msgs, true).expect_err("stopped");
    assert!(
        matches!(err, ChatTemplateError::Resources { ref model, .. } if model == "evil.gguf"),
        "{err}"
    );
}
