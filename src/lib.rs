//! # boyd
//!
//! A local-inference agent. boyd loads one quantized transformer from a GGUF file with candle
//! (CPU, CUDA or Metal), predicts what it will cost on a machine (`sizing`), measures what it
//! really costs (`measure`), and runs ReAct and OODA agent loops with the in-process model as
//! planner (`agent`).
//!
//! Data flow: `catalog` resolves a model name to a verified file; `runtime::gguf` reads and
//! validates its header into `sizing::ArchParams` and a tensor inventory; `runtime::decoder`
//! runs the one llama-family decoder over an explicit `runtime::kv_cache::KvCache`;
//! `runtime::session` reuses the longest cached token prefix between calls. `sizing` and
//! `agent` never import candle.

pub mod agent;
pub mod catalog;
pub mod cli;
pub mod home;
pub mod hw;
pub mod kernels;
pub mod lm;
pub mod measure;
pub mod remote;
pub mod runtime;
pub mod serve;
pub mod sizing;
pub mod store;
pub mod units;
