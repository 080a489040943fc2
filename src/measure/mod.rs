//! "What did happen": speed and memory measured on this machine, and their comparison with
//! the sizing model's predictions.
//!
//! - [`bench`]: llama-bench style speed tests (`pp512`, `tg128 @ dN`).
//! - [`alloc`]: the counting global allocator the binary installs; [`memory`] reads it and
//!   the kernel's RSS.
//! - [`compare`]: predicted | measured | error rows; [`calibrate`]: fits the speed model's
//!   constants to the measurements.
//! - [`perplexity`]: sliding-window perplexity over a text (the numerics guard).
//! - [`validate`]: runs it all on one model and device into one [`report::ValidateReport`],
//!   which [`svg`] plots.

pub mod alloc;
pub mod bench;
pub mod calibrate;
pub mod compare;
pub mod memory;
pub mod perplexity;
pub mod report;
pub mod svg;
pub mod validate;
