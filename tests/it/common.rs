//! Helpers shared by the integration tests.

use std::path::PathBuf;

/// The store path of a catalog model's file, without fetching it: `BOYD_TEST_MODEL_<NAME>`
/// (name upper-cased, `-`/`.` as `_`) wins; otherwise `$BOYD_HOME/models/<name>/<file>`.
/// Returns `None` when the file is absent, unless `BOYD_REQUIRE_MODELS=1` (set by CI after it
/// pulls the models), in which case absence fails the test.
pub fn real_model(name: &str, file: &str) -> Option<PathBuf> {
    let var = format!(
        "BOYD_TEST_MODEL_{}",
        name.to_uppercase().replace(['-', '.'], "_")
    );
    let candidates: Vec<PathBuf> = std::env::var_os(&var)
        .map(PathBuf::from)
        .into_iter()
        .chain(
            std::env::var_os("BOYD_HOME")
                .map(PathBuf::from)
                .or_else(|| dirs::cache_dir().map(|d| d.join("boyd")))
                .map(|home| home.join("models").join(name).join(file)),
        )
        .collect();
    if let Some(p) = candidates.iter().find(|p| p.is_file()) {
        return Some(p.clone());
    }
    if std::env::var("BOYD_REQUIRE_MODELS").as_deref() == Ok("1") {
        panic!("model {name} not found at {candidates:?}; run `boyd models pull {name}`");
    }
    eprintln!("skipping: model {name} not found at {candidates:?} (set {var} or pull it)");
    None
}

/// The default model's file, if present.
pub fn smollm2() -> Option<PathBuf> {
    real_model("smollm2-135m-instruct", "SmolLM2-135M-Instruct.Q4_1.gguf")
}

/// The agent default model's file, if present.
pub fn qwen_coder() -> Option<PathBuf> {
    real_model(
        "qwen2.5-coder-0.5b-instruct",
        "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
    )
}

/// The Gemma 3 270M file (`boyd models pull gemma3-270m`), if present.
pub fn gemma3_270m() -> Option<PathBuf> {
    real_model("gemma3-270m", "gemma-3-270m-q4_k_m.gguf")
}
