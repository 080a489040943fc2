//! Hardware as people write it: "24 GB of GPU memory", "a 16 GB GPU", "RTX 3060 12 GB",
//! "M2 Ultra", "MacBook Pro M3 Max 64 GB", "a100 80gb".
//!
//! The text is read as tokens, not matched against phrases:
//! - **A preset** is named when consecutive tokens spell its name without dashes (`RTX 4090`,
//!   `rtx4090`, `M2 Ultra`, `A100 80GB`), or when a token equals its model number alone
//!   (`4090`, `H200`; `M2` alone picks the `m2-*` preset nearest the stated memory).
//! - **A memory size** is a number followed by a unit of bytes (`24 GB`, `24gb`, `1.5 TB`);
//!   a number followed by a unit per second (`936 GB/s`) is a bandwidth instead. Marketing
//!   "GB" on devices is binary (a "24 GB" card has 24 GiB, as the presets record it).
//! - **A class** (GPU, Apple, CPU) decides what an unnamed device is based on, from hardware
//!   nouns ([`GPU_NOUNS`], [`APPLE_NOUNS`]); without one it is a CPU machine with that RAM.
//!
//! A named preset with a different memory size is that preset with the memory replaced (an M3
//! Max with 64 GB). A device no preset names is the preset of its class nearest in memory,
//! with the stated memory (and bandwidth when stated): its bandwidth is that preset's, and the
//! description says so, so the answer can say it was assumed.

use super::hardware::{Backend, Hardware};
use super::SizingError;
use crate::units::{Bytes, BytesPerSec};

/// Tokens that make an unnamed device a discrete GPU.
pub const GPU_NOUNS: &[&str] = &[
    "gpu", "gpus", "vram", "rtx", "gtx", "geforce", "nvidia", "cuda", "radeon", "graphics", "card",
];
/// Tokens that make an unnamed device an Apple machine (unified memory, Metal).
pub const APPLE_NOUNS: &[&str] = &[
    "mac", "macbook", "imac", "apple", "macmini", "studio", "m1", "m2", "m3", "m4", "unified",
];
/// Words for a machine's memory, which place a memory size on the device.
const MEMORY_NOUNS: &[&str] = &["ram", "memory", "vram", "unified"];
/// Units of bytes, in GiB.
const BYTE_UNITS: &[(&str, f64)] = &[
    ("gb", 1.0),
    ("gib", 1.0),
    ("g", 1.0),
    ("gig", 1.0),
    ("gigs", 1.0),
    ("tb", 1024.0),
    ("tib", 1024.0),
    ("mb", 1.0 / 1024.0),
    ("mib", 1.0 / 1024.0),
];
/// Memory bandwidth of a CPU machine nobody measured: dual-channel DDR4-3200.
pub const CPU_BANDWIDTH: BytesPerSec = BytesPerSec(51.2e9);
/// Matrix throughput of a CPU machine nobody measured: 8 cores of AVX2 FMA at 2.5 GHz.
pub const CPU_FLOPS: f64 = 8.0 * 128.0 * 2.5e9;
/// Share of a CPU machine's RAM a model may use (the OS and other programs keep the rest).
pub const CPU_USABLE: f64 = 0.9;

/// The class of a described device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeviceClass {
    /// A discrete GPU (CUDA).
    Gpu,
    /// An Apple-silicon machine (Metal, unified memory).
    Apple,
    /// A CPU machine with RAM.
    Cpu,
}

/// What a hardware description says, before it is turned into a [`Hardware`].
#[derive(Debug, Clone, PartialEq)]
pub struct Reading {
    /// The preset named, if any.
    pub preset: Option<String>,
    /// The memory stated, in GiB.
    pub memory_gib: Option<f64>,
    /// The bandwidth stated, in GB/s.
    pub bandwidth_gbs: Option<f64>,
    /// The class the words give.
    pub class: DeviceClass,
}

impl Reading {
    /// Whether the description names any hardware at all (a preset or a memory size).
    pub fn names_hardware(&self) -> bool {
        self.preset.is_some() || self.memory_gib.is_some()
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Num(f64, String),
    Word(String),
    Slash,
}

impl Tok {
    fn text(&self) -> &str {
        match self {
            Tok::Num(_, s) | Tok::Word(s) => s,
            Tok::Slash => "/",
        }
    }
}

/// Numbers (`24`, `1.5`), words (letters, then letters or digits: `rtx4090`, `m2`) and `/`.
fn tokens(text: &str) -> Vec<Tok> {
    let chars: Vec<char> = text.to_lowercase().chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_ascii_digit() {
            let start = i;
            while i < chars.len()
                && (chars[i].is_ascii_digit()
                    || (chars[i] == '.' && chars.get(i + 1).is_some_and(char::is_ascii_digit)))
            {
                i += 1;
            }
            let s: String = chars[start..i].iter().collect();
            if let Ok(v) = s.parse::<f64>() {
                out.push(Tok::Num(v, s));
            }
        } else if c.is_alphabetic() {
            let start = i;
            while i < chars.len() && chars[i].is_alphanumeric() {
                i += 1;
            }
            out.push(Tok::Word(chars[start..i].iter().collect()));
        } else {
            if c == '/' {
                out.push(Tok::Slash);
            }
            i += 1;
        }
    }
    out
}

/// A unit of bytes per second in decimal GB/s (bandwidth is quoted in powers of ten).
fn decimal(unit: &str) -> f64 {
    match unit.chars().next() {
        Some('t') => 1000.0,
        Some('m') => 0.001,
        _ => 1.0,
    }
}

fn squash(name: &str) -> String {
    name.chars()
        .filter(char::is_ascii_alphanumeric)
        .collect::<String>()
        .to_lowercase()
}

/// The part of a preset name that carries its model number (`4090`, `m2`, `a100`, `l40s`).
fn model_number(name: &str) -> &str {
    name.split('-')
        .find(|p| p.chars().any(|c| c.is_ascii_digit()))
        .unwrap_or(name)
}

/// Read `text` against the preset list.
pub fn read(text: &str, presets: &[Hardware]) -> Reading {
    let toks = tokens(text);
    let mut memories: Vec<(usize, f64)> = Vec::new();
    let mut bandwidth_gbs = None;
    for (i, t) in toks.iter().enumerate() {
        let Tok::Num(v, _) = t else { continue };
        let Some(Tok::Word(unit)) = toks.get(i + 1) else {
            continue;
        };
        let per_second = matches!(toks.get(i + 2), Some(Tok::Slash))
            && matches!(toks.get(i + 3), Some(Tok::Word(s)) if s == "s" || s == "sec");
        if let Some(&(_, gib)) = BYTE_UNITS.iter().find(|(u, _)| u == unit) {
            if per_second {
                bandwidth_gbs.get_or_insert(v * decimal(unit));
            } else {
                memories.push((i, v * gib));
            }
        } else if let Some(per_s) = unit.strip_suffix("ps") {
            if BYTE_UNITS.iter().any(|(u, _)| *u == per_s) {
                bandwidth_gbs.get_or_insert(v * decimal(per_s));
            }
        }
    }
    let words: Vec<&str> = toks.iter().map(Tok::text).collect();
    // Of several sizes ("a 40 GB model on 48 GB of VRAM"), the one nearest a word for a device
    // or its memory; the first when there is none.
    let nouns: Vec<usize> = words
        .iter()
        .enumerate()
        .filter(|(_, w)| {
            GPU_NOUNS.contains(w) || APPLE_NOUNS.contains(w) || MEMORY_NOUNS.contains(w)
        })
        .map(|(i, _)| i)
        .collect();
    let distance = |i: usize| nouns.iter().map(|&n| n.abs_diff(i)).min().unwrap_or(0);
    let memory_gib = memories
        .iter()
        .min_by_key(|(i, _)| distance(*i))
        .map(|&(_, gib)| gib);
    let class = if words.iter().any(|w| GPU_NOUNS.contains(w)) {
        DeviceClass::Gpu
    } else if words.iter().any(|w| APPLE_NOUNS.contains(w)) {
        DeviceClass::Apple
    } else {
        DeviceClass::Cpu
    };
    Reading {
        preset: named_preset(&words, presets, memory_gib),
        memory_gib,
        bandwidth_gbs,
        class,
    }
}

/// The preset whose name the tokens spell (longest match first), else the one whose model
/// number is a token (nearest in memory to `memory_gib` when several share it).
fn named_preset(words: &[&str], presets: &[Hardware], memory_gib: Option<f64>) -> Option<String> {
    let mut best: Option<(usize, &Hardware)> = None;
    for h in presets {
        let want = squash(&h.name);
        for start in 0..words.len() {
            let mut joined = String::new();
            for w in &words[start..] {
                joined.push_str(w);
                if joined.len() >= want.len() {
                    break;
                }
            }
            if joined == want && best.is_none_or(|(l, _)| want.len() > l) {
                best = Some((want.len(), h));
            }
        }
    }
    if let Some((_, h)) = best {
        return Some(h.name.clone());
    }
    let by_number: Vec<&Hardware> = presets
        .iter()
        .filter(|h| words.contains(&model_number(&h.name)))
        .collect();
    nearest(&by_number, memory_gib).map(|h| h.name.clone())
}

fn gib_bytes(gib: f64) -> Bytes {
    Bytes((gib * Bytes::GIB as f64) as u64)
}

/// The device among `hs` nearest `memory_gib` in memory (the first when none is stated).
fn nearest<'a>(hs: &[&'a Hardware], memory_gib: Option<f64>) -> Option<&'a Hardware> {
    let Some(m) = memory_gib else {
        return hs.first().copied();
    };
    hs.iter().copied().min_by(|a, b| {
        (a.memory.gib() - m)
            .abs()
            .total_cmp(&(b.memory.gib() - m).abs())
    })
}

/// The hardware `text` describes, with what was assumed said in its description and source.
pub fn described(text: &str, presets: &[Hardware]) -> Result<Hardware, SizingError> {
    let r = read(text, presets);
    let bad = |reason: String| SizingError::Hardware {
        name: text.trim().to_owned(),
        reason,
    };
    if let Some(gib) = r.memory_gib {
        if !(gib.is_finite() && gib > 0.0 && gib < 1e7) {
            return Err(bad(format!("{gib} GiB is not a memory size")));
        }
    }
    let mut hw = match (&r.preset, r.memory_gib) {
        (Some(name), _) => presets
            .iter()
            .find(|h| &h.name == name)
            .cloned()
            .ok_or_else(|| bad("preset vanished".into()))?,
        (None, None) => {
            let names: Vec<&str> = presets.iter().map(|h| h.name.as_str()).collect();
            return Err(bad(format!(
                "names no hardware boyd knows and no memory size; write a preset ({}), \
                 `this` for this machine, or the memory, e.g. \"24 GB GPU\", \"64 GB Mac\", \
                 \"32 GB RAM\"",
                names.join(", ")
            )));
        }
        (None, Some(gib)) => custom(r.class, gib, presets)?,
    };
    if let (Some(_), Some(gib)) = (&r.preset, r.memory_gib) {
        if (gib - hw.memory.gib()).abs() > 0.5 {
            hw.description = format!("{} with {gib} GB", hw.description);
            hw.name = format!("{}-{gib}gb", hw.name);
            hw = hw.with_memory(gib_bytes(gib));
        }
    }
    if let Some(gbs) = r.bandwidth_gbs {
        if !(gbs.is_finite() && gbs > 0.0) {
            return Err(bad(format!("{gbs} GB/s is not a bandwidth")));
        }
        hw.bandwidth = BytesPerSec(gbs * 1e9);
        hw.source = format!("{}; bandwidth {gbs} GB/s as stated", hw.source);
    }
    Ok(hw)
}

/// An unnamed device of `class` with `gib` of memory: the preset of the class nearest in
/// memory with the memory replaced, or a CPU machine with the assumed host figures.
fn custom(class: DeviceClass, gib: f64, presets: &[Hardware]) -> Result<Hardware, SizingError> {
    let memory = gib_bytes(gib);
    let backend = match class {
        DeviceClass::Gpu => Some(Backend::Cuda),
        DeviceClass::Apple => Some(Backend::Metal),
        DeviceClass::Cpu => None,
    };
    let label = match class {
        DeviceClass::Gpu => "GPU",
        DeviceClass::Apple => "Apple machine",
        DeviceClass::Cpu => "machine (RAM)",
    };
    let name = format!("custom-{gib}gb-{}", squash(label));
    if let Some(backend) = backend {
        let same: Vec<&Hardware> = presets.iter().filter(|h| h.backend == backend).collect();
        if let Some(base) = nearest(&same, Some(gib)) {
            let mut hw = base.clone().with_memory(memory);
            hw.name = name;
            hw.description = format!("a {gib} GB {label}");
            hw.source = format!(
                "memory {gib} GB as stated; bandwidth {:.0} GB/s and matrix throughput assumed \
                 from {}, the {label} preset nearest in memory",
                base.bandwidth.0 / 1e9,
                base.name
            );
            return Ok(hw);
        }
    }
    Hardware::new(
        &name,
        &format!("a {gib} GB {label}"),
        Backend::Cpu,
        memory,
        CPU_USABLE,
        CPU_BANDWIDTH,
        CPU_FLOPS,
        "memory as stated, 90 % usable; bandwidth 51.2 GB/s (dual-channel DDR4-3200) and 8 \
         cores of AVX2 assumed",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn presets() -> Vec<Hardware> {
        Hardware::presets().expect("presets")
    }

    fn hw(text: &str) -> Hardware {
        described(text, &presets()).expect(text)
    }

    #[test]
    fn presets_are_found_however_they_are_spaced_or_cased() {
        for (text, want) in [
            ("RTX 4090", "rtx-4090"),
            ("an rtx4090", "rtx-4090"),
            ("my 4090", "rtx-4090"),
            ("M2 Ultra", "m2-ultra"),
            ("A100 80GB", "a100-80"),
            ("a100-40gb", "a100-40"),
            ("H100 PCIe", "h100-pcie"),
            ("an H200", "h200"),
            ("RTX 5060 Ti", "rtx-5060-ti"),
        ] {
            assert_eq!(hw(text).name, want, "{text}");
        }
    }

    #[test]
    fn a_preset_with_another_memory_size_keeps_its_bandwidth() {
        let m3 = Hardware::preset("m3-max").expect("m3-max");
        let h = hw("MacBook Pro M3 Max 64 GB");
        assert_eq!(h.memory, Bytes(64 * Bytes::GIB));
        assert_eq!(h.bandwidth, m3.bandwidth);
        assert_eq!(h.backend, Backend::Metal);
    }

    #[test]
    fn unnamed_devices_take_the_stated_memory_and_their_class() {
        let g = hw("24 GB of GPU memory");
        assert_eq!(g.backend, Backend::Cuda);
        assert_eq!(g.memory, Bytes(24 * Bytes::GIB));
        assert!(g.source.contains("assumed"), "{}", g.source);
        let g = hw("RTX 3060 12 GB");
        assert_eq!(g.backend, Backend::Cuda);
        assert_eq!(g.memory, Bytes(12 * Bytes::GIB));
        let c = hw("8 GB of memory");
        assert_eq!(c.backend, Backend::Cpu);
        assert_eq!(c.memory, Bytes(8 * Bytes::GIB));
        assert_eq!(c.bandwidth, CPU_BANDWIDTH);
        let m = hw("a Mac with 32gb");
        assert_eq!(m.backend, Backend::Metal);
        assert_eq!(m.memory, Bytes(32 * Bytes::GIB));
    }

    #[test]
    fn a_stated_bandwidth_is_not_a_memory_size() {
        let h = hw("a 16 GB GPU with 448 GB/s");
        assert_eq!(h.memory, Bytes(16 * Bytes::GIB));
        assert!((h.bandwidth.0 - 448e9).abs() < 1e3, "{:?}", h.bandwidth);
        let r = read("at 1 TB/s", &presets());
        assert_eq!(r.memory_gib, None);
        assert!(r.bandwidth_gbs.is_some());
    }

    #[test]
    fn text_without_hardware_is_refused_with_the_forms_to_use() {
        let err = described("a fast one", &presets()).expect_err("nothing named");
        let msg = err.to_string();
        assert!(msg.contains("24 GB GPU"), "{msg}");
        assert!(!read(
            "How much KV cache does Llama-3-8B need for 8192 tokens?",
            &presets()
        )
        .names_hardware());
        assert!(read("Will it fit in 8 GB of memory?", &presets()).names_hardware());
        // Of two sizes, the one placed on the device.
        let r = read(
            "Can a 40 GB model file load on a GPU with 48GB?",
            &presets(),
        );
        assert_eq!(r.memory_gib, Some(48.0));
        assert_eq!(r.class, DeviceClass::Gpu);
    }
}
