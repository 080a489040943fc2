//! The integration test binary: one module per area.

mod catalog;
mod common;
mod decoder;
mod tokenizer;
