//! The worker pool the forward pass splits its operations over.
//!
//! A decode step runs a few hundred short parallel loops (each product, the attention), a few
//! microseconds to a millisecond each. Handing each one to rayon from the decoding thread costs
//! two thread switches: the caller parks until rayon's workers finish, and the workers sleep
//! between loops. On a 2-core host a profile of SmolLM2 decode spent about a quarter of its
//! samples in the scheduler that way.
//!
//! This pool keeps `threads − 1` workers that spin for a short while after each loop before they
//! park, and the calling thread does its share of the loop instead of waiting. One loop runs at a
//! time; a caller that finds the pool busy (another model in the same process, or a loop started
//! from inside a loop) runs its loop on its own thread, so nothing waits on anything else.
//!
//! `BOYD_POOL=rayon` hands the loops to rayon instead (for measuring what the pool buys);
//! `BOYD_SPIN_US` sets how long an idle worker spins before it parks (default 200 µs);
//! Worker `i` is pinned to the `i + 1`-th CPU the process may run on (Linux, when the process
//! may run on more CPUs than there are workers), leaving the first to the calling thread, which
//! is never pinned; `BOYD_PIN=0` leaves the workers to the scheduler.

use std::cell::UnsafeCell;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};
use std::thread::Thread;
use std::time::{Duration, Instant};

use rayon::prelude::*;

/// A loop body as the workers see it: the caller's closure with its lifetime erased. Sound
/// because [`Pool::run`] does not return before every worker has finished with it.
type Job = *const (dyn Fn(usize) + Sync + 'static);

/// One worker's state, on its own cache line so that the workers do not share one.
#[repr(align(128))]
struct Slot {
    /// The last loop (epoch) this worker finished.
    done: AtomicU64,
    /// Set while the worker is parked or about to park; the caller then unparks it.
    sleeping: AtomicBool,
    /// Set when the loop body panicked on this worker.
    panicked: AtomicBool,
}

struct Shared {
    /// Bumped once per loop; workers wait for it to change.
    epoch: AtomicU64,
    /// The current loop's body (written by the caller holding `busy`, before `epoch` moves).
    job: UnsafeCell<Option<Job>>,
    /// The next index to claim and the loop's length.
    next: AtomicUsize,
    len: AtomicUsize,
    slots: Vec<Slot>,
    spin: Duration,
}

// SAFETY: `job` is written only by the thread that holds `Pool::busy`, before the `epoch`
// store that publishes it (Release), and read by workers after they load that epoch (Acquire);
// it is not written again until every worker has reported the epoch done.
unsafe impl Sync for Shared {}
// SAFETY: as above; the raw pointer is only dereferenced within that window.
unsafe impl Send for Shared {}

/// The pool: workers plus the lock that lets one loop run at a time.
pub struct Pool {
    shared: &'static Shared,
    workers: Vec<Thread>,
    busy: Mutex<()>,
}

/// Which implementation runs the loops.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Spin,
    Rayon,
}

fn kind() -> Kind {
    static KIND: OnceLock<Kind> = OnceLock::new();
    *KIND.get_or_init(|| match std::env::var("BOYD_POOL").as_deref() {
        Ok("rayon") => Kind::Rayon,
        _ => Kind::Spin,
    })
}

/// The process's pool, started on first use with as many threads as rayon's global pool has
/// (so `RAYON_NUM_THREADS` sets both).
fn global() -> &'static Pool {
    static POOL: OnceLock<Pool> = OnceLock::new();
    POOL.get_or_init(|| {
        let spin_us = std::env::var("BOYD_SPIN_US")
            .ok()
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(200);
        Pool::start(
            rayon::current_num_threads().max(1),
            Duration::from_micros(spin_us),
        )
    })
}

/// The number of threads a loop is split over (the caller and the workers).
pub fn threads() -> usize {
    match kind() {
        Kind::Spin => global().workers.len() + 1,
        Kind::Rayon => rayon::current_num_threads().max(1),
    }
}

/// Run `f(i)` for every `i` in `0..n`, split over the pool's threads; returns when all have
/// run. A panic in `f` is raised again here once every thread has left the loop.
pub fn for_each(n: usize, f: &(dyn Fn(usize) + Sync)) {
    match n {
        0 => {}
        1 => f(0),
        _ => match kind() {
            Kind::Spin => global().run(n, f),
            Kind::Rayon => (0..n).into_par_iter().for_each(f),
        },
    }
}

/// Run `f(i, chunk)` for each `chunk_len`-long chunk of `data` (the last may be shorter), the
/// chunks split over the pool's threads.
pub fn for_each_chunk_mut<T: Send>(
    data: &mut [T],
    chunk_len: usize,
    f: &(dyn Fn(usize, &mut [T]) + Sync),
) {
    assert!(chunk_len > 0, "chunks must not be empty");
    let len = data.len();
    let base = SendPtr(data.as_mut_ptr());
    for_each(len.div_ceil(chunk_len), &|i| {
        let start = i * chunk_len;
        let n = chunk_len.min(len - start);
        // SAFETY: index `i` is run exactly once, so the chunks `start .. start + n` are
        // disjoint and inside `data`, which stays borrowed until `for_each` returns.
        let chunk = unsafe { std::slice::from_raw_parts_mut(base.get().add(start), n) };
        f(i, chunk)
    });
}

/// A pointer the chunks of one loop share; each touches a disjoint part.
struct SendPtr<T>(*mut T);

impl<T> SendPtr<T> {
    fn get(&self) -> *mut T {
        self.0
    }
}

// SAFETY: the chunks of `for_each_chunk_mut` write disjoint ranges of a slice of `Send` values.
unsafe impl<T: Send> Sync for SendPtr<T> {}

impl Pool {
    /// A pool of `threads` threads in all: the caller and `threads − 1` workers.
    fn start(threads: usize, spin: Duration) -> Pool {
        let n = threads.saturating_sub(1);
        let shared: &'static Shared = Box::leak(Box::new(Shared {
            epoch: AtomicU64::new(0),
            job: UnsafeCell::new(None),
            next: AtomicUsize::new(0),
            len: AtomicUsize::new(0),
            slots: (0..n)
                .map(|_| Slot {
                    done: AtomicU64::new(0),
                    sleeping: AtomicBool::new(false),
                    panicked: AtomicBool::new(false),
                })
                .collect(),
            spin,
        }));
        let mut workers = Vec::with_capacity(n);
        let pin = !std::env::var("BOYD_PIN").is_ok_and(|v| v == "0");
        let cpus = if pin { affinity::allowed() } else { Vec::new() };
        for i in 0..n {
            let cpu = (cpus.len() > n).then(|| cpus[i + 1]);
            let spawned = std::thread::Builder::new()
                .name(format!("boyd-worker-{i}"))
                .spawn(move || {
                    if let Some(c) = cpu {
                        // Best effort: a worker that cannot be pinned runs unpinned.
                        let _ = affinity::pin(c);
                    }
                    worker(shared, i)
                });
            match spawned {
                Ok(h) => workers.push(h.thread().clone()),
                // Fewer workers than asked: the loops still run, on fewer threads.
                Err(_) => break,
            }
        }
        // Slots of workers that failed to start are never waited on.
        Pool {
            shared,
            workers,
            busy: Mutex::new(()),
        }
    }

    fn run(&self, n: usize, f: &(dyn Fn(usize) + Sync)) {
        let guard = match self.busy.try_lock() {
            Ok(g) if !self.workers.is_empty() => g,
            // Busy (another loop, or this one nested) or no workers: run it here.
            _ => {
                (0..n).for_each(f);
                return;
            }
        };
        let s = self.shared;
        // SAFETY: only the holder of `busy` writes `job`, and no worker reads it until the
        // epoch store below; the lifetime is erased because this function waits for every
        // worker to finish the epoch before `f`'s borrow ends (see `Job`).
        unsafe {
            *s.job.get() =
                Some(std::mem::transmute::<*const (dyn Fn(usize) + Sync + '_), Job>(f as *const _));
        }
        s.next.store(0, Ordering::Relaxed);
        s.len.store(n, Ordering::Relaxed);
        let epoch = s.epoch.fetch_add(1, Ordering::SeqCst) + 1;
        for (slot, t) in s.slots.iter().zip(&self.workers) {
            if slot.sleeping.load(Ordering::SeqCst) {
                t.unpark();
            }
        }
        let mine = catch_unwind(AssertUnwindSafe(|| claim(s, f)));
        let mut panicked = false;
        for slot in &s.slots[..self.workers.len()] {
            let mut spins = 0u32;
            while slot.done.load(Ordering::Acquire) != epoch {
                spins += 1;
                if spins < 1 << 12 {
                    std::hint::spin_loop();
                } else {
                    std::thread::yield_now();
                }
            }
            panicked |= slot.panicked.swap(false, Ordering::Relaxed);
        }
        drop(guard);
        if let Err(p) = mine {
            resume_unwind(p);
        }
        assert!(!panicked, "a worker of the pool panicked in a loop body");
    }
}

/// Claim and run indices of the current loop until none are left.
fn claim(s: &Shared, f: &(dyn Fn(usize) + Sync)) {
    let n = s.len.load(Ordering::Relaxed);
    loop {
        let i = s.next.fetch_add(1, Ordering::Relaxed);
        if i >= n {
            break;
        }
        f(i);
    }
}

/// A worker: wait for a new epoch (spinning, then parked), run its share, report it done.
fn worker(s: &'static Shared, i: usize) {
    let slot = &s.slots[i];
    let mut seen = 0u64;
    loop {
        let started = Instant::now();
        let mut spins = 0u32;
        let epoch = loop {
            let e = s.epoch.load(Ordering::Acquire);
            if e != seen {
                break e;
            }
            spins = spins.wrapping_add(1);
            if !spins.is_multiple_of(64) || started.elapsed() < s.spin {
                std::hint::spin_loop();
                continue;
            }
            // Announce the nap, then look again: the caller either sees `sleeping` and
            // unparks, or this load sees its epoch (both are SeqCst).
            slot.sleeping.store(true, Ordering::SeqCst);
            if s.epoch.load(Ordering::SeqCst) == seen {
                std::thread::park();
            }
            slot.sleeping.store(false, Ordering::SeqCst);
        };
        seen = epoch;
        // SAFETY: the caller wrote `job` before publishing `epoch` and keeps it alive until
        // this worker stores `done = epoch` below.
        let job = unsafe { *s.job.get() };
        if let Some(job) = job {
            // SAFETY: as above.
            let f = unsafe { &*job };
            if catch_unwind(AssertUnwindSafe(|| claim(s, f))).is_err() {
                slot.panicked.store(true, Ordering::Relaxed);
            }
        }
        slot.done.store(epoch, Ordering::Release);
    }
}

/// CPU affinity of the calling thread (Linux; elsewhere nothing is pinned).
mod affinity {
    /// The CPUs this process may run on, in order; empty when unknown.
    #[cfg(target_os = "linux")]
    pub fn allowed() -> Vec<usize> {
        // SAFETY: `set` is a plain bit mask owned here; `sched_getaffinity` writes at most
        // `size_of::<cpu_set_t>()` bytes into it, and `CPU_ISSET` reads it in bounds.
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
                return Vec::new();
            }
            (0..libc::CPU_SETSIZE as usize)
                .filter(|&c| libc::CPU_ISSET(c, &set))
                .collect()
        }
    }

    /// Pin the calling thread to `cpu`; whether the OS agreed.
    #[cfg(target_os = "linux")]
    pub fn pin(cpu: usize) -> bool {
        if cpu >= libc::CPU_SETSIZE as usize {
            return false;
        }
        // SAFETY: as above; `cpu` is below `CPU_SETSIZE`, so `CPU_SET` writes in bounds.
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(cpu, &mut set);
            libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0
        }
    }

    #[cfg(not(target_os = "linux"))]
    pub fn allowed() -> Vec<usize> {
        Vec::new()
    }

    #[cfg(not(target_os = "linux"))]
    pub fn pin(_cpu: usize) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU32;

    #[test]
    fn every_index_runs_exactly_once() {
        let pool = Pool::start(3, Duration::from_micros(50));
        for n in [2, 3, 7, 100, 1000] {
            let hits: Vec<AtomicU32> = (0..n).map(|_| AtomicU32::new(0)).collect();
            pool.run(n, &|i| {
                hits[i].fetch_add(1, Ordering::Relaxed);
            });
            assert!(
                hits.iter().all(|h| h.load(Ordering::Relaxed) == 1),
                "n = {n}"
            );
        }
    }

    #[test]
    fn loops_after_the_workers_park_still_run() {
        let pool = Pool::start(2, Duration::from_micros(1));
        let sum = AtomicUsize::new(0);
        for round in 0..20 {
            if round % 5 == 0 {
                std::thread::sleep(Duration::from_millis(2));
            }
            pool.run(10, &|i| {
                sum.fetch_add(i, Ordering::Relaxed);
            });
        }
        assert_eq!(sum.load(Ordering::Relaxed), 20 * 45);
    }

    #[test]
    fn a_nested_or_concurrent_loop_runs_on_its_callers_thread() {
        let pool = Pool::start(2, Duration::from_micros(50));
        let total = AtomicUsize::new(0);
        pool.run(4, &|_| {
            // The pool is busy with the outer loop: this one runs inline.
            pool.run(3, &|j| {
                total.fetch_add(j + 1, Ordering::Relaxed);
            });
        });
        assert_eq!(total.load(Ordering::Relaxed), 4 * 6);
    }

    #[test]
    fn a_panic_in_the_body_reaches_the_caller_and_the_pool_keeps_working() {
        let pool = Pool::start(2, Duration::from_micros(50));
        let r = catch_unwind(AssertUnwindSafe(|| {
            pool.run(64, &|i| assert!(i != 40, "index 40"));
        }));
        assert!(r.is_err());
        let count = AtomicUsize::new(0);
        pool.run(64, &|_| {
            count.fetch_add(1, Ordering::Relaxed);
        });
        assert_eq!(count.load(Ordering::Relaxed), 64);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_thread_can_be_pinned_to_a_cpu_it_may_use() {
        let cpus = affinity::allowed();
        assert!(!cpus.is_empty(), "sched_getaffinity lists at least one CPU");
        let last = *cpus.last().expect("a CPU");
        let pinned = std::thread::spawn(move || (affinity::pin(last), affinity::allowed()))
            .join()
            .expect("the pinned thread ends");
        assert_eq!(pinned, (true, vec![last]));
        assert!(!affinity::pin(usize::MAX));
    }

    #[test]
    fn chunks_cover_the_slice_once() {
        let mut v = vec![0u32; 1003];
        for_each_chunk_mut(&mut v, 10, &|i, c| {
            for (j, x) in c.iter_mut().enumerate() {
                *x = (i * 10 + j) as u32;
            }
        });
        assert!(v.iter().enumerate().all(|(i, &x)| x as usize == i));
    }
}
