//! Compute kernels written for boyd where candle is slow or lacks them.
//!
//! `cpu`: quantized dot products (scalar reference, AVX2), the matrix products built on them,
//! and the `f32` helpers the CPU decoder uses. The kernels know only their own formats
//! ([`cpu::QType`]) and import nothing else from boyd.
//!
//! # Why `unsafe` is allowed here
//!
//! This is one of the three places that opt out of the crate's `deny(unsafe_code)` (see
//! ARCHITECTURE.md, "Unsafe code"). The SIMD kernels are `#[target_feature]` functions built
//! on `std::arch` intrinsics: calling one is `unsafe` because the CPU must have the features,
//! and their loads go through raw pointers without bounds checks in the inner loops. The
//! parallel matrix product writes disjoint output rows from the worker pool through a raw
//! pointer, and the pool (`cpu::pool`) hands each loop body to its workers as a pointer whose
//! lifetime it erases and then outlives by waiting for them. Every `unsafe fn` states its contract in a `# Safety` section (CPU features and
//! slice lengths); the safe wrappers in `cpu` (`Kernels`, and the private `x86` module)
//! detect the features once and assert the lengths on every call, outside the inner loops, so
//! that no safe caller can break a contract.
#![allow(unsafe_code)]

pub mod cpu;
