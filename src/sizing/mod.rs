//! "What should happen": pure functions that predict memory and speed. No candle, no I/O.

pub mod arch;
pub mod error;
pub mod kv;
pub mod quant;
pub mod weights;

pub use arch::{ArchError, ArchParams, Architecture, RopeScaling};
pub use error::SizingError;
pub use kv::{kv_cache, KvCache, KvDtype};
pub use quant::{GgmlType, QuantPreset};
