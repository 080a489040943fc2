//! The integration test binary: one module per area.

mod agent;
mod alloc;
mod architecture;
mod attacks_serve;
mod attacks_shell;
mod attacks_trust;
mod audit;
mod catalog;
mod common;
mod constrain;
mod decoder;
mod fuzz_corpus;
mod gguf;
mod kernels;
mod kv_dtype;
mod measure;
mod numerics;
mod ooda;
mod ooda_cli;
mod ooda_sensing;
mod prompt_examples;
mod react_audit;
mod remote;
mod serve;
mod sizing;
mod tokenizer;
