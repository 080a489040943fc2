//! What the sandbox lets run: a bare name looked up in the fixed `PATH`, only regular files
//! under the system directories and outside the workspace, and the ELF interpreter such a
//! program names (the one other file the launcher makes executable). Scripts are not ELF and
//! are refused.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use super::{JailError, FIXED_PATH};

/// Look up a bare program name in [`FIXED_PATH`] and return its canonical path.
pub fn resolve_program(name: &str) -> Result<PathBuf, JailError> {
    if name.is_empty() || name.contains('/') || name == "." || name == ".." {
        return Err(JailError::ProgramNotFound { name: name.into() });
    }
    for dir in FIXED_PATH.split(':') {
        let p = Path::new(dir).join(name);
        if let Ok(meta) = std::fs::metadata(&p) {
            use std::os::unix::fs::PermissionsExt;
            if meta.is_file() && meta.permissions().mode() & 0o111 != 0 {
                return p.canonicalize().map_err(|e| JailError::Io {
                    what: "cannot resolve",
                    path: p,
                    reason: e.to_string(),
                });
            }
        }
    }
    Err(JailError::ProgramNotFound { name: name.into() })
}

/// The ELF interpreter (`PT_INTERP`) a program names, `None` for a static program; an error
/// for anything that is not a 64- or 32-bit little- or big-endian ELF file.
pub fn elf_interpreter(path: &Path) -> Result<Option<PathBuf>, JailError> {
    use std::io::{Read, Seek, SeekFrom};
    let io = |what: &'static str, e: std::io::Error| JailError::Io {
        what,
        path: path.to_path_buf(),
        reason: e.to_string(),
    };
    let not_elf = || JailError::NotElf {
        path: path.to_path_buf(),
    };
    let mut f = std::fs::File::open(path).map_err(|e| io("cannot open", e))?;
    let mut h = [0u8; 64];
    let n = f.read(&mut h).map_err(|e| io("cannot read", e))?;
    if n < 52 || h[..4] != *b"\x7fELF" {
        return Err(not_elf());
    }
    let wide = match h[4] {
        1 => false,
        2 => true,
        _ => return Err(not_elf()),
    };
    let big = match h[5] {
        1 => false,
        2 => true,
        _ => return Err(not_elf()),
    };
    let u16_at = |b: &[u8], o: usize| -> u64 {
        let v = [b[o], b[o + 1]];
        u64::from(if big {
            u16::from_be_bytes(v)
        } else {
            u16::from_le_bytes(v)
        })
    };
    let u32_at = |b: &[u8], o: usize| -> u64 {
        let v = [b[o], b[o + 1], b[o + 2], b[o + 3]];
        u64::from(if big {
            u32::from_be_bytes(v)
        } else {
            u32::from_le_bytes(v)
        })
    };
    let u64_at = |b: &[u8], o: usize| -> u64 {
        let mut v = [0u8; 8];
        v.copy_from_slice(&b[o..o + 8]);
        if big {
            u64::from_be_bytes(v)
        } else {
            u64::from_le_bytes(v)
        }
    };
    if wide && n < 64 {
        return Err(not_elf());
    }
    let (phoff, phentsize, phnum) = if wide {
        (u64_at(&h, 0x20), u16_at(&h, 0x36), u16_at(&h, 0x38))
    } else {
        (u32_at(&h, 0x1c), u16_at(&h, 0x2a), u16_at(&h, 0x2c))
    };
    let need = if wide { 56 } else { 32 };
    if phentsize < need || phnum > 4096 {
        return Err(not_elf());
    }
    for i in 0..phnum {
        let mut ph = vec![0u8; phentsize as usize];
        f.seek(SeekFrom::Start(phoff + i * phentsize))
            .map_err(|e| io("cannot read", e))?;
        f.read_exact(&mut ph).map_err(|_| not_elf())?;
        if u32_at(&ph, 0) != 3 {
            continue; // not PT_INTERP
        }
        let (off, size) = if wide {
            (u64_at(&ph, 8), u64_at(&ph, 32))
        } else {
            (u32_at(&ph, 4), u32_at(&ph, 16))
        };
        if size == 0 || size > 4096 {
            return Err(not_elf());
        }
        let mut name = vec![0u8; size as usize];
        f.seek(SeekFrom::Start(off))
            .map_err(|e| io("cannot read", e))?;
        f.read_exact(&mut name).map_err(|_| not_elf())?;
        while name.last() == Some(&0) {
            name.pop();
        }
        use std::os::unix::ffi::OsStringExt;
        return Ok(Some(PathBuf::from(OsString::from_vec(name))));
    }
    Ok(None)
}

/// The only places programs are executed from.
const SYSTEM_DIRS: &[&str] = &["/usr", "/bin", "/sbin"];

/// `path` resolved, when it is a regular file under [`SYSTEM_DIRS`] and not inside `root`.
pub fn system_program(path: &Path, root: &Path) -> Result<PathBuf, JailError> {
    let refuse = || JailError::NotSystemProgram {
        path: path.to_path_buf(),
    };
    let canon = path.canonicalize().map_err(|_| refuse())?;
    let ok = canon.is_file()
        && !canon.starts_with(root)
        && SYSTEM_DIRS.iter().any(|d| canon.starts_with(d));
    if ok {
        Ok(canon)
    } else {
        Err(refuse())
    }
}
