//! Fuzz the workspace path resolver. The workspace holds files, directories and symlinks that
//! point inside and outside it; whatever path the model sends, an accepted one must resolve to
//! somewhere under the canonical root, and the lexical check must agree with the physical one.
//! `prepare_write` (which creates parent directories) must create nothing outside the root.
#![no_main]

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use boyd::agent::tools::Sandbox;
use libfuzzer_sys::fuzz_target;

struct Fixture {
    _dir: tempfile::TempDir,
    outside: PathBuf,
    sandbox: Sandbox,
    /// (directory, its entries) for the directories the fixture made, to undo what a call adds.
    listings: Vec<(PathBuf, BTreeSet<OsString>)>,
}

fn entries(dir: &Path) -> BTreeSet<OsString> {
    std::fs::read_dir(dir)
        .map(|rd| rd.flatten().map(|e| e.file_name()).collect())
        .unwrap_or_default()
}

fn fixture() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| {
        let dir = tempfile::tempdir().expect("tempdir");
        let outside = dir.path().canonicalize().expect("canon");
        let root = outside.join("ws");
        std::fs::create_dir_all(root.join("sub/deeper")).expect("mkdir");
        std::fs::write(root.join("notes.txt"), "hi").expect("write");
        std::fs::write(root.join("sub/inner.txt"), "in").expect("write");
        std::fs::write(outside.join("secret.txt"), "secret").expect("write");
        #[cfg(unix)]
        {
            use std::os::unix::fs::symlink;
            let _ = symlink(&outside, root.join("out"));
            let _ = symlink(outside.join("secret.txt"), root.join("s"));
            let _ = symlink("../../..", root.join("sub/deeper/up"));
            let _ = symlink("../notes.txt", root.join("sub/n"));
            let _ = symlink("sub", root.join("d"));
            let _ = symlink("loop", root.join("loop"));
        }
        let sandbox = Sandbox::new(&root).expect("sandbox");
        let listings = [
            outside.clone(),
            root.clone(),
            root.join("sub"),
            root.join("sub/deeper"),
        ]
        .into_iter()
        .map(|d| {
            let e = entries(&d);
            (d, e)
        })
        .collect();
        Fixture {
            _dir: dir,
            outside,
            sandbox,
            listings,
        }
    })
}

fuzz_target!(|data: &[u8]| {
    let Ok(path) = std::str::from_utf8(data) else {
        return;
    };
    let f = fixture();
    let root = f.sandbox.root();
    if let Ok(p) = f.sandbox.lexical(path) {
        assert!(p.starts_with(root), "lexical {path:?} -> {p:?}");
    }
    match f.sandbox.resolve(path) {
        Ok(p) => {
            assert!(p.starts_with(root), "{path:?} escaped to {p:?}");
            assert!(
                f.sandbox.lexical(path).is_ok(),
                "{path:?} resolved but fails lexically"
            );
        }
        Err(_) => {}
    }
    if let Ok((p, _file)) = f.sandbox.open_file(path) {
        assert!(p.starts_with(root), "{path:?} opened {p:?}");
    }
    if path.len() <= 128 && f.sandbox.prepare_write(path).is_ok() {
        assert!(f.sandbox.lexical(path).is_ok());
    }
    // Nothing new outside the root; undo what was created inside it.
    for (dir, before) in &f.listings {
        for name in entries(dir).difference(before) {
            let p = dir.join(name);
            assert!(
                dir != &f.outside,
                "prepare_write({path:?}) created {p:?} outside the workspace"
            );
            let _ = std::fs::remove_dir_all(&p);
        }
    }
    assert!(f.outside.join("secret.txt").exists());
});
