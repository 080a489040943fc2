//! A counting global allocator for the test binary, so tests can prove that hostile input is
//! refused before anything big is allocated.
//!
//! Counting is per thread (tests run in parallel) and only while [`measure`] runs its closure on
//! that thread; the counters are `const`-initialised thread-local cells, which never allocate,
//! so the allocator cannot recurse into itself.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

/// The system allocator with per-thread byte counting.
pub struct Counting;

#[global_allocator]
static GLOBAL: Counting = Counting;

thread_local! {
    static ACTIVE: Cell<bool> = const { Cell::new(false) };
    /// Net bytes allocated since `measure` started (frees of older blocks can make it negative).
    static CURRENT: Cell<i64> = const { Cell::new(0) };
    static PEAK: Cell<i64> = const { Cell::new(0) };
    static TOTAL: Cell<u64> = const { Cell::new(0) };
    static LARGEST: Cell<u64> = const { Cell::new(0) };
}

fn on_alloc(size: usize) {
    let _ = ACTIVE.try_with(|a| {
        if a.get() {
            let size = size as i64;
            let now = CURRENT.with(|c| {
                let n = c.get() + size;
                c.set(n);
                n
            });
            PEAK.with(|p| p.set(p.get().max(now)));
            TOTAL.with(|t| t.set(t.get() + size as u64));
            LARGEST.with(|l| l.set(l.get().max(size as u64)));
        }
    });
}

fn on_free(size: usize) {
    let _ = ACTIVE.try_with(|a| {
        if a.get() {
            CURRENT.with(|c| c.set(c.get() - size as i64));
        }
    });
}

// SAFETY: every method forwards to `System` with the caller's arguments unchanged; the counting
// only touches `const`-initialised thread-local cells, which neither allocate nor panic.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded with the caller's layout.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            on_alloc(layout.size());
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded with the caller's layout.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            on_alloc(layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller guarantees `ptr` came from this allocator with `layout`.
        unsafe { System.dealloc(ptr, layout) };
        on_free(layout.size());
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller upholds `GlobalAlloc::realloc`'s contract; forwarded unchanged.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            on_free(layout.size());
            on_alloc(new_size);
        }
        p
    }
}

/// What one measured closure allocated on its thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stats {
    /// Most bytes live at once (net of frees), counted from the start of the measurement.
    pub peak: u64,
    /// Bytes allocated in all, frees ignored.
    pub total: u64,
    /// The largest single allocation.
    pub largest: u64,
}

/// Run `f`, counting what it allocates on this thread.
pub fn measure<T>(f: impl FnOnce() -> T) -> (T, Stats) {
    CURRENT.with(|c| c.set(0));
    PEAK.with(|p| p.set(0));
    TOTAL.with(|t| t.set(0));
    LARGEST.with(|l| l.set(0));
    ACTIVE.with(|a| a.set(true));
    let out = f();
    ACTIVE.with(|a| a.set(false));
    let stats = Stats {
        peak: PEAK.with(|p| p.get()).max(0) as u64,
        total: TOTAL.with(|t| t.get()),
        largest: LARGEST.with(|l| l.get()),
    };
    (out, stats)
}

#[test]
fn counting_allocator_sees_this_threads_allocations() {
    let (v, s) = measure(|| vec![0u8; 3 << 20]);
    assert!(s.peak >= 3 << 20 && s.largest >= 3 << 20, "{s:?}");
    drop(v);
    let (_, s) = measure(|| ());
    assert_eq!(s.total, 0, "{s:?}");
}
