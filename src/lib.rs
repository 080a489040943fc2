//! # boyd
//!
//! A local-inference agent. boyd loads one quantized llama-family transformer from a GGUF
//! file and runs it in-process — on the CPU with its own kernels (`kernels`, the native
//! engine), or through candle (CUDA, Metal, or the CPU on request) — predicts what it will
//! cost on a machine (`sizing`), measures what it really costs (`measure`), runs ReAct and
//! OODA agent loops with a model as planner (`agent`), and serves the model over an
//! OpenAI-compatible API (`serve`) or uses one behind such an API (`remote`).
//!
//! Data flow: `catalog` resolves a model name to a verified file in the `store` (under the
//! `home` directory); `runtime::gguf` reads and validates its header into
//! `sizing::ArchParams` and a tensor inventory; `runtime::fit` checks it fits before any
//! tensor is read; `runtime::decoder` runs the one llama-family block on one of two engines
//! (`runtime::native` on `kernels::cpu`, or candle) over an explicit
//! `runtime::kv_cache::KvCache`; `runtime::session` reuses the longest cached token prefix
//! between calls; `runtime::local::LocalModel` puts it behind the `lm::LanguageModel` seam
//! that `agent`, `serve` and `cli` use.
//!
//! ARCHITECTURE.md at the repository root is the map: the parts, which may import which
//! (checked by `tests/it/architecture.rs`), each subcommand's data path, and the three places
//! where `unsafe` is allowed. `sizing`, `agent`, `lm` and `serve` never import candle; nothing
//! below `cli` prints.

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
pub mod sizer;
pub mod sizing;
pub mod store;
pub mod units;
