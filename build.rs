//! Build script.
//!
//! - Always: embed every `models/*.toml` catalog entry in the binary (see `src/catalog.rs`), so an
//!   installed `boyd` knows its catalog wherever it runs.
//! - Feature `cuda`: compile every `kernels/cuda/*.cu` to `$OUT_DIR/<stem>.ptx` with nvcc
//!   (`src/hw/cuda.rs` embeds the PTX and loads it through cudarc at run time). Without the
//!   feature nothing CUDA-related runs, so the default build needs no CUDA toolkit.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    embed_model_catalog();
    println!("cargo::rustc-check-cfg=cfg(boyd_cuda_ctx_create)");
    if std::env::var_os("CARGO_FEATURE_CUDA").is_some() {
        compile_cuda_kernels();
    }
}

/// The PTX virtual architecture: the lowest CUDA 13 supports (Turing, `compute_75`), so one
/// PTX runs on every GPU the toolkit targets (the driver JIT-compiles it for the real one);
/// lower when `CUDA_COMPUTE_CAP` asks for an older GPU (with a CUDA 12 toolkit).
fn ptx_arch() -> String {
    let cap = std::env::var("CUDA_COMPUTE_CAP")
        .ok()
        .and_then(|c| {
            c.trim_end_matches(|ch: char| ch.is_ascii_alphabetic())
                .parse::<u32>()
                .ok()
        })
        .unwrap_or(75);
    format!("compute_{}", cap.min(75))
}

/// nvcc: `$NVCC`, else `bin/nvcc` under `$CUDA_ROOT`, `$CUDA_HOME` or `$CUDA_PATH`, else `PATH`.
fn find_nvcc() -> PathBuf {
    if let Some(p) = std::env::var_os("NVCC") {
        return PathBuf::from(p);
    }
    for var in ["CUDA_ROOT", "CUDA_HOME", "CUDA_PATH"] {
        if let Some(root) = std::env::var_os(var) {
            let p = Path::new(&root).join("bin").join("nvcc");
            if p.is_file() {
                return p;
            }
        }
    }
    PathBuf::from("nvcc")
}

/// `(major, minor)` of the CUDA toolkit cudarc binds to: `$CUDARC_CUDA_VERSION` (`13000`), else
/// what `nvcc --version` says (`release 13.0,`), the same sources cudarc's build script uses.
fn cuda_version(nvcc: &Path) -> Option<(u32, u32)> {
    if let Ok(v) = std::env::var("CUDARC_CUDA_VERSION") {
        let n: u32 = v.parse().ok()?;
        return Some((n / 1000, (n % 1000) / 10));
    }
    let out = Command::new(nvcc).arg("--version").output().ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let rel = text.split("release ").nth(1)?.split(',').next()?;
    let (a, b) = rel.split_once('.')?;
    Some((a.trim().parse().ok()?, b.trim().parse().ok()?))
}

fn compile_cuda_kernels() {
    let manifest = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let out_dir = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    let dir = Path::new(&manifest).join("kernels").join("cuda");
    println!("cargo:rerun-if-changed={}", dir.display());
    for var in [
        "NVCC",
        "CUDA_ROOT",
        "CUDA_HOME",
        "CUDA_PATH",
        "CUDA_COMPUTE_CAP",
        "CUDARC_CUDA_VERSION",
    ] {
        println!("cargo:rerun-if-env-changed={var}");
    }
    let nvcc = find_nvcc();
    // cudarc's `CudaContext::new_non_primary` (cuCtxCreate), used to measure what one CUDA context
    // costs, exists for CUDA 11.4–13.1 only.
    match cuda_version(&nvcc) {
        Some(v) if ((11, 4)..=(13, 1)).contains(&v) => {
            println!("cargo:rustc-cfg=boyd_cuda_ctx_create");
        }
        _ => {}
    }
    let mut sources: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    sources.retain(|p| p.extension().is_some_and(|e| e == "cu"));
    sources.sort();
    let arch = ptx_arch();
    for src in &sources {
        let stem = src.file_stem().and_then(|s| s.to_str()).unwrap_or("kernel");
        let ptx = out_dir.join(format!("{stem}.ptx"));
        let status = Command::new(&nvcc)
            .args(["--ptx", "-O3", "-std=c++17"])
            .arg(format!("-arch={arch}"))
            .arg("-o")
            .arg(&ptx)
            .arg(src)
            .status();
        match status {
            Ok(s) if s.success() => {}
            Ok(s) => panic!(
                "nvcc failed ({s}) compiling {}: fix the kernel, or check the CUDA toolkit \
                 (scripts/check-cuda.sh installs one)",
                src.display()
            ),
            Err(e) => panic!(
                "cannot run nvcc ({}): {e}. The `cuda` feature needs the CUDA compiler: install \
                 the CUDA toolkit and put nvcc on PATH (or set CUDA_ROOT), or run \
                 scripts/check-cuda.sh, which installs it from Python wheels",
                nvcc.display()
            ),
        }
    }
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
