//! The integration test binary: one module per area.

mod agent;
mod catalog;
mod common;
mod decoder;
mod sizing;
mod tokenizer;
