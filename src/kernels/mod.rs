//! Compute kernels written for boyd where candle is slow or lacks them.
//!
//! `cpu`: quantized dot products (scalar reference, AVX2), the matrix products built on them,
//! and the `f32` helpers the CPU decoder uses. `unsafe` code is allowed only inside this module.

pub mod cpu;
