//! The public record: published llama.cpp measurements on hardware nobody here owns, the fit of
//! the speed model's terms to them, and the check that states the model's error.
//!
//! The rows live in `models/published/*.jsonl` (embedded at build time). Each names its public
//! source, date, model file, quantization and runtime build. Per backend, the speed terms of
//! [`crate::sizing::throughput`] are fitted to the rows on the relative error of the time per
//! token ([`crate::sizing::linfit`]):
//!
//! ```text
//! decode  s/token = max(c0·bytes/BW + c3·bytes·1e-12,          memory side
//!                       c2·quantized_weights/matrix)            unpacking side
//!                   + c4 + c5·layers
//!                   + c6·attention_flops(depth)/matrix + c8·attention_reads(depth)/BW
//!                   (bytes = weights + KV at the depth; attention_reads = the K and V the
//!                   unfused attention reads once per query head; c1·bytes/matrix and
//!                   c7·attention_flops·1e-15 are not fitted, see DECODE_FITTED_TERMS)
//! prefill s/token = p0·matmul_flops/matrix + p1·attention_flops/matrix
//!                   + p2·matmul_flops·1e-15 + p3·attention_flops·1e-15
//! ```
//!
//! Prefill is a sum of terms, each linear in its coefficient: a weighted least-squares solve
//! over each subset of terms, keeping the best subset whose coefficients are all non-negative.
//! Decode is a roofline: a step waits on memory or on unpacking quantized blocks, whichever is
//! slower (the published M1 Max reads its Llama-3 Q4_K_M files at 45 % of its bandwidth, the
//! M3 Max at 80 %: its GPU is compute-bound on them, in proportion to its FLOP/s), fitted by
//! alternating which side binds per row. A `tg N` row of llama-bench generates
//! N tokens from an empty cache, so its mean KV depth is (N − 1)/2; a `pp N` row processes an
//! N-token prompt whose mean attention span is (N + 1)/2.
//!
//! Nothing here does I/O: the dataset is a compile-time string, and the hardware specifications
//! come from the embedded presets.
//!
//! Three parts: [`dataset`] (the rows, their schema and parsing), [`fit`] (each row's terms and
//! the per-backend fit) and [`check`] (every row predicted held out by device, the depth
//! sweeps, the memory and partial-offload rows).

pub mod check;
pub mod dataset;
pub mod fit;

pub use super::linfit::Features;
pub use check::{check, Check, DepthCheck, ErrorSummary, MemoryCheck, RowCheck};
pub use dataset::{model_arch, Dataset, MemoryRow, PublishedError, SpeedRow, Summary, Test};
pub use fit::{
    fit_backend, row_features, shipped_fit, BackendFit, DECODE_FITTED_TERMS, DECODE_TERMS,
    PREFILL_TERMS,
};
