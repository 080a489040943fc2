//! A counting global allocator: live heap bytes, their high-water mark, and allocation count.
//!
//! The `boyd` binary installs [`CountingAlloc`] as its `#[global_allocator]`, so on the CPU
//! every tensor candle allocates is counted: `boyd validate` reads the live bytes before and
//! after loading the weights, at each KV depth, and the peak during a prefill. Counting is
//! three relaxed atomic updates per call on top of the system allocator; exact ordering
//! between threads does not matter because readings are taken while the process is quiet.
//!
//! When the allocator is not installed (library users, most test binaries) nothing is counted
//! and [`installed`] says so; callers then fall back to the process RSS.

//!
//! # Why `unsafe` is allowed here
//!
//! `GlobalAlloc` is an unsafe trait: implementing it needs `unsafe impl`, and the calls into
//! `System` are unsafe. This module only forwards to `System` with the caller's own arguments
//! and counts. It is one of the three places that opt out of the crate's `deny(unsafe_code)`
//! (with `kernels` and `hw::cuda`; see ARCHITECTURE.md).
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

static LIVE: AtomicU64 = AtomicU64::new(0);
static PEAK: AtomicU64 = AtomicU64::new(0);
static CALLS: AtomicU64 = AtomicU64::new(0);

/// The system allocator, counting live bytes.
#[derive(Debug, Default, Clone, Copy)]
pub struct CountingAlloc;

fn grew(by: u64) {
    let now = LIVE.fetch_add(by, Relaxed) + by;
    PEAK.fetch_max(now, Relaxed);
    CALLS.fetch_add(1, Relaxed);
}

fn shrank(by: u64) {
    LIVE.fetch_sub(by, Relaxed);
}

// SAFETY: every method forwards to `System` with the caller's arguments unchanged and only
// updates counters, so `System`'s guarantees carry over.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded as is (the caller upholds `alloc`'s contract).
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            grew(layout.size() as u64);
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded as is.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            grew(layout.size() as u64);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded as is; `ptr` came from this allocator, i.e. from `System`.
        unsafe { System.dealloc(ptr, layout) };
        shrank(layout.size() as u64);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded as is.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            let old = layout.size() as u64;
            let new = new_size as u64;
            if new >= old {
                grew(new - old);
            } else {
                shrank(old - new);
            }
        }
        p
    }
}

/// Counter readings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct HeapStats {
    /// Live heap bytes.
    pub live: u64,
    /// Highest live bytes since the last [`reset_peak`].
    pub peak: u64,
    /// Allocation calls so far.
    pub calls: u64,
}

/// Read the counters.
pub fn stats() -> HeapStats {
    HeapStats {
        live: LIVE.load(Relaxed),
        peak: PEAK.load(Relaxed),
        calls: CALLS.load(Relaxed),
    }
}

/// Start a new high-water mark at the current live bytes.
pub fn reset_peak() {
    PEAK.store(LIVE.load(Relaxed), Relaxed);
}

/// Whether [`CountingAlloc`] is this process's global allocator (it has counted something).
pub fn installed() -> bool {
    // Any Rust program allocates before `main` returns control to user code (args, stdio);
    // a probe allocation makes sure.
    let probe = std::hint::black_box(vec![0u8; 64]);
    drop(probe);
    CALLS.load(Relaxed) > 0
}
