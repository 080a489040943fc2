//! Build script.
//!
//! - Always: embed every `models/*.toml` catalog entry in the binary (see `src/catalog.rs`), so an
//!   installed `boyd` knows its catalog wherever it runs.
//! - Feature `cuda` (later): compile `kernels/cuda/*.cu` to PTX in `OUT_DIR`.

use std::fmt::Write as _;
use std::path::Path;

fn main() {
    embed_model_catalog();
}

/// Write `$OUT_DIR/catalog_models.rs`: a sorted `&[(stem, include_str!(path))]` of every
/// `models/*.toml` except `hardware.toml` (device presets, not a model).
fn embed_model_catalog() {
    let manifest = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let out_dir = std::env::var("OUT_DIR").expect("cargo sets OUT_DIR");
    let models = Path::new(&manifest).join("models");
    println!("cargo:rerun-if-changed={}", models.display());

    let mut entries: Vec<(String, String)> = Vec::new();
    if let Ok(dir) = std::fs::read_dir(&models) {
        for item in dir.flatten() {
            let path = item.path();
            let is_toml = path.extension().is_some_and(|e| e == "toml");
            let stem = path.file_stem().and_then(|s| s.to_str()).map(str::to_owned);
            if let (true, Some(stem)) = (is_toml, stem) {
                if stem != "hardware" {
                    entries.push((stem, path.display().to_string()));
                }
            }
        }
    }
    entries.sort();

    let mut code = String::from(
        "/// `(file stem, contents)` of every shipped `models/*.toml`, sorted by stem.\n\
         pub(crate) static SHIPPED: &[(&str, &str)] = &[\n",
    );
    for (stem, path) in &entries {
        let _ = writeln!(code, "    ({stem:?}, include_str!({path:?})),");
    }
    code.push_str("];\n");
    let out = Path::new(&out_dir).join("catalog_models.rs");
    std::fs::write(&out, code).expect("write catalog_models.rs to OUT_DIR");
}
