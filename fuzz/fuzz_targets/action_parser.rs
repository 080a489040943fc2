//! Fuzz the tolerant action parser with arbitrary planner text.
#![no_main]

use boyd::agent::parse::parse_action;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    match parse_action(&text) {
        Ok(parsed) => {
            let _ = format!("{parsed:?}");
        }
        Err(e) => {
            let msg = e.for_model();
            assert!(!msg.is_empty());
        }
    }
});
