//! Fuzz the GGUF header reader and what a loader does next with a header it accepts: tensor
//! bounds, architecture parameters, the tokenizer and the fit estimate. Any panic, abort or
//! out-of-memory is a finding.
#![no_main]

use std::io::Cursor;

use boyd::runtime::fit;
use boyd::runtime::gguf::{GgufHeader, HeaderLimits};
use boyd::runtime::tokenizer::GgufTokenizer;
use boyd::sizing::{Backend, Hardware, KvDtype};
use boyd::units::{Bytes, BytesPerSec};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let len = data.len() as u64;
    let Ok(header) = GgufHeader::read(Cursor::new(data), len, HeaderLimits::default()) else {
        return;
    };
    // Invariants of an accepted header.
    assert!(header.alignment.is_power_of_two());
    assert!(header.data_start >= 24 && header.data_start % header.alignment == 0);
    for t in &header.tensors {
        assert!(!t.dims.is_empty() && t.dims.len() <= 4);
        assert_eq!(t.offset % header.alignment, 0);
        assert!(t.offset.checked_add(t.bytes).is_some());
    }
    let _ = header.check_data(len);
    let _ = header.arch_params();
    if let Ok(tok) = GgufTokenizer::from_header(&header) {
        let _ = tok.encode("hello world", true);
    }
    if let Ok(hw) = Hardware::new(
        "fuzz",
        "fuzz",
        Backend::Cpu,
        Bytes(16 << 30),
        1.0,
        BytesPerSec(50e9),
        1e12,
        "fuzz",
    ) {
        if let Ok(e) = fit::estimate(&header, 4096, KvDtype::F32, &hw) {
            let _ = fit::decide(&e, false)
                .map(|_| ())
                .map_err(|e| e.to_string());
        }
    }
});
