//! Sensor threads: every sensor reads on its own thread, so its timeout is real wall-clock time
//! whatever the loop's thread is doing — including blocking in a model call.
//!
//! [`SensorThreads`] starts one long-lived thread per sensor (each with its own small async
//! runtime, so a sensor's future may use timers and blocking tasks). A reading is a request sent
//! to that thread and an answer on one shared channel; the loop's thread waits with
//! `recv_timeout` up to each sensor's deadline. A sensor past its deadline is recorded as timed
//! out; its thread stays busy until the read returns, and a sensor still busy when the next
//! reading is asked for fails at once (it is not asked twice). A panicking read is a failure.
//!
//! Two uses per cycle: [`SensorThreads::observe`] (Observe: all sensors, waiting up to their
//! deadlines) and [`SensorThreads::start_watch`] / [`SensorThreads::check_watch`] (the critical
//! sensors read again while Orient and Decide generate; checked, without waiting, before Act).

use std::collections::BTreeMap;
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError, Sender};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::observe::{
    confidence_after, Sensor, SensorError, SensorFailure, SensorReadings, Signal,
};
use crate::agent::rundir::utc_timestamp;

/// One answer of a sensor thread.
struct Answer {
    worker: usize,
    id: u64,
    result: Result<Vec<Signal>, SensorError>,
}

/// A sensor and its thread.
struct Worker {
    sensor: Arc<dyn Sensor>,
    /// Requests (a reading id); `None` once the thread is gone.
    tx: Option<Sender<u64>>,
    /// The reading it is busy with, and when it started.
    busy: Option<(u64, Instant)>,
    limit: Duration,
}

/// Readings asked for and not yet collected.
#[derive(Debug, Default)]
pub struct Pending {
    /// Worker → (reading id, deadline).
    waiting: BTreeMap<usize, (u64, Instant)>,
    /// Failures known when the readings were asked for (a sensor still busy, a dead thread).
    failed: BTreeMap<usize, SensorFailure>,
}

impl Pending {
    /// Whether nothing was asked for.
    pub fn is_empty(&self) -> bool {
        self.waiting.is_empty() && self.failed.is_empty()
    }
}

/// What a collection found, by sensor order.
type Collected = (BTreeMap<usize, Vec<Signal>>, BTreeMap<usize, SensorFailure>);

/// The sensor threads of one session.
pub struct SensorThreads {
    workers: Vec<Worker>,
    answers: Receiver<Answer>,
    next_id: u64,
    /// The readings started while the model generates.
    watch: Pending,
}

fn run_worker(index: usize, sensor: Arc<dyn Sensor>, requests: Receiver<u64>, out: Sender<Answer>) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build();
    while let Ok(id) = requests.recv() {
        let result = match &runtime {
            Ok(rt) => {
                let fut = sensor.read();
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| rt.block_on(fut)))
                    .unwrap_or_else(|_| Err(SensorError("the sensor panicked".into())))
            }
            Err(e) => Err(SensorError(format!(
                "cannot start the sensor's runtime: {e}"
            ))),
        };
        if out
            .send(Answer {
                worker: index,
                id,
                result,
            })
            .is_err()
        {
            return;
        }
    }
}

impl SensorThreads {
    /// Start one thread per sensor; `default_timeout` for sensors without their own.
    pub fn start(sensors: Vec<Arc<dyn Sensor>>, default_timeout: Duration) -> Self {
        let (answer_tx, answers) = channel();
        let workers = sensors
            .into_iter()
            .enumerate()
            .map(|(i, sensor)| {
                let (tx, rx) = channel();
                let out = answer_tx.clone();
                let s = sensor.clone();
                let spawned = std::thread::Builder::new()
                    .name(format!("boyd-sensor-{}", sensor.name()))
                    .spawn(move || run_worker(i, s, rx, out));
                let limit = sensor.timeout().unwrap_or(default_timeout);
                if let Err(e) = &spawned {
                    tracing::warn!("cannot start the thread of sensor {}: {e}", sensor.name());
                }
                Worker {
                    sensor,
                    tx: spawned.ok().map(|_| tx),
                    busy: None,
                    limit,
                }
            })
            .collect();
        Self {
            workers,
            answers,
            next_id: 1,
            watch: Pending::default(),
        }
    }

    /// The sensors, in order.
    pub fn sensors(&self) -> impl Iterator<Item = &Arc<dyn Sensor>> {
        self.workers.iter().map(|w| &w.sensor)
    }

    fn failure(&self, i: usize, timed_out: bool, reason: String) -> SensorFailure {
        let s = &self.workers[i].sensor;
        SensorFailure {
            sensor: s.name().into(),
            critical: s.critical(),
            timed_out,
            reason,
        }
    }

    /// Ask the sensors `which` selects for a reading. A sensor still busy with an earlier one
    /// past its deadline fails now; one busy within it gets the request queued behind that one
    /// (an older reading never stands for a newer one).
    fn ask(&mut self, which: impl Fn(&dyn Sensor) -> bool) -> Pending {
        let mut p = Pending::default();
        let now = Instant::now();
        for i in 0..self.workers.len() {
            if !which(self.workers[i].sensor.as_ref()) {
                continue;
            }
            let limit = self.workers[i].limit;
            if let Some((_, started)) = self.workers[i].busy {
                if now.duration_since(started) >= limit {
                    let f = self.failure(
                        i,
                        true,
                        format!(
                            "still busy with a reading started {} ms ago (limit {} ms)",
                            now.duration_since(started).as_millis(),
                            limit.as_millis()
                        ),
                    );
                    p.failed.insert(i, f);
                    continue;
                }
                // Busy within its deadline (a reading started earlier, e.g. while the model
                // generated): that reading is older than this request, so a fresh one is
                // queued behind it.
            }
            let id = self.next_id;
            self.next_id += 1;
            let sent = self.workers[i]
                .tx
                .as_ref()
                .is_some_and(|tx| tx.send(id).is_ok());
            if sent {
                self.workers[i].busy = Some((id, now));
                p.waiting.insert(i, (id, now + limit));
            } else {
                self.workers[i].tx = None;
                let f = self.failure(i, false, "the sensor's thread is gone".into());
                p.failed.insert(i, f);
            }
        }
        p
    }

    /// Take one answer: free its worker, and file it when `p` waits for it.
    fn file(&mut self, a: Answer, p: &mut Pending, got: &mut BTreeMap<usize, Vec<Signal>>) {
        let w = &mut self.workers[a.worker];
        if w.busy.is_some_and(|(id, _)| id == a.id) {
            w.busy = None;
        }
        if p.waiting.get(&a.worker).is_some_and(|(id, _)| *id == a.id) {
            p.waiting.remove(&a.worker);
            match a.result {
                Ok(s) => {
                    got.insert(a.worker, s);
                }
                Err(e) => {
                    let f = self.failure(a.worker, false, e.0);
                    p.failed.insert(a.worker, f);
                }
            }
        }
    }

    /// Collect the answers of `p`: waiting up to each deadline when `wait`, else only those
    /// already there. Readings past their deadline are timed out; when not waiting, readings
    /// still within theirs are dropped (not failures).
    fn collect(&mut self, mut p: Pending, wait: bool) -> Collected {
        let mut got = BTreeMap::new();
        loop {
            while let Ok(a) = self.answers.try_recv() {
                self.file(a, &mut p, &mut got);
            }
            let Some(deadline) = p.waiting.values().map(|(_, d)| *d).min() else {
                break;
            };
            let now = Instant::now();
            if now >= deadline {
                // Time out every reading past its deadline.
                let late: Vec<usize> = p
                    .waiting
                    .iter()
                    .filter(|(_, (_, d))| *d <= now)
                    .map(|(i, _)| *i)
                    .collect();
                for i in late {
                    p.waiting.remove(&i);
                    let limit = self.workers[i].limit;
                    let f = self.failure(
                        i,
                        true,
                        format!("no reading within {} ms", limit.as_millis()),
                    );
                    p.failed.insert(i, f);
                }
                continue;
            }
            if !wait {
                break;
            }
            match self.answers.recv_timeout(deadline - now) {
                Ok(a) => self.file(a, &mut p, &mut got),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => break,
            }
        }
        (got, p.failed)
    }

    /// Observe: read every sensor, each under its deadline.
    pub fn observe(&mut self, cycle: usize) -> SensorReadings {
        let p = self.ask(|_| true);
        let (mut got, mut failed) = self.collect(p, true);
        let mut signals = Vec::new();
        let mut failures = Vec::new();
        for i in 0..self.workers.len() {
            if let Some(mut s) = got.remove(&i) {
                signals.append(&mut s);
            } else if let Some(f) = failed.remove(&i) {
                failures.push(f);
            }
        }
        SensorReadings {
            cycle,
            time: utc_timestamp(),
            confidence: confidence_after(&failures),
            signals,
            failed: failures,
        }
    }

    /// Read the critical sensors again, in the background, while the model generates.
    pub fn start_watch(&mut self) {
        let old = std::mem::take(&mut self.watch);
        // Answers of an earlier watch that was never checked only free their workers.
        drop(old);
        self.watch = self.ask(|s| s.critical());
    }

    /// The critical sensors that failed or ran past their deadline since [`Self::start_watch`],
    /// without waiting for readings still within theirs.
    pub fn check_watch(&mut self) -> Vec<SensorFailure> {
        let p = std::mem::take(&mut self.watch);
        if p.is_empty() {
            return Vec::new();
        }
        let (_, failed) = self.collect(p, false);
        failed.into_values().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::ooda::observe::SensorFuture;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Answers, fails, blocks its thread for 10 s, or blocks from its second reading on.
    struct Fixed {
        name: &'static str,
        critical: bool,
        mode: u8,
        reads: Arc<AtomicUsize>,
    }
    fn fixed(name: &'static str, critical: bool, mode: u8) -> Arc<dyn Sensor> {
        Arc::new(Fixed {
            name,
            critical,
            mode,
            reads: Arc::new(AtomicUsize::new(0)),
        })
    }
    impl Sensor for Fixed {
        fn name(&self) -> &str {
            self.name
        }
        fn critical(&self) -> bool {
            self.critical
        }
        fn read(&self) -> SensorFuture {
            let (mode, name) = (self.mode, self.name);
            let n = self.reads.fetch_add(1, Ordering::SeqCst);
            Box::pin(async move {
                let block = mode == 2 || (mode == 3 && n > 0);
                if block {
                    // Blocks the thread: only a timeout on another thread can see it.
                    std::thread::sleep(Duration::from_secs(10));
                }
                match mode {
                    1 => Err(SensorError("broken".into())),
                    4 => panic!("sensor bug"),
                    _ => Ok(vec![Signal::new(name, "k", "v")]),
                }
            })
        }
    }

    #[test]
    fn a_blocking_sensor_times_out_on_time_and_the_others_answer() {
        let mut t = SensorThreads::start(
            vec![
                fixed("a", true, 0),
                fixed("slow", false, 2),
                fixed("bad", false, 1),
                fixed("buggy", true, 4),
            ],
            // Long enough for the panic's backtrace to be printed.
            Duration::from_millis(1500),
        );
        let t0 = Instant::now();
        let obs = t.observe(1);
        let took = t0.elapsed();
        assert!(
            took >= Duration::from_millis(1500) && took < Duration::from_secs(5),
            "{took:?}"
        );
        assert_eq!(obs.signals.len(), 1);
        assert_eq!(obs.failed.len(), 3);
        assert!(obs.failed.iter().any(|f| f.sensor == "slow" && f.timed_out));
        assert!(
            obs.failed
                .iter()
                .any(|f| f.sensor == "buggy" && f.reason.contains("panicked")),
            "{:?}",
            obs.failed
        );
        // One critical failure (the panic): 1 − 0.3.
        assert!((obs.confidence - 0.7).abs() < 1e-9, "{}", obs.confidence);
        // The stuck sensor is not asked again: it fails at once in the next observation.
        let t0 = Instant::now();
        let obs = t.observe(2);
        assert!(
            t0.elapsed() < Duration::from_millis(250),
            "{:?}",
            t0.elapsed()
        );
        assert!(obs
            .failed
            .iter()
            .any(|f| f.sensor == "slow" && f.timed_out && f.reason.contains("still busy")));
    }

    #[test]
    fn a_critical_sensor_that_hangs_while_the_loop_thread_is_blocked_is_reported() {
        let mut t = SensorThreads::start(
            vec![fixed("heartbeat", true, 3), fixed("other", false, 3)],
            Duration::from_millis(100),
        );
        assert!(t.observe(1).failed.is_empty());
        t.start_watch();
        // The loop's thread blocks (a model call), far past the sensor's deadline.
        std::thread::sleep(Duration::from_millis(400));
        let failed = t.check_watch();
        assert_eq!(failed.len(), 1, "{failed:?}");
        assert_eq!(failed[0].sensor, "heartbeat");
        assert!(failed[0].critical && failed[0].timed_out);
        // Nothing watched: nothing to report.
        assert!(t.check_watch().is_empty());
    }

    /// Reads a counter that the test moves on: a reading shows the value when it ran.
    struct Slot {
        value: Arc<AtomicUsize>,
    }
    impl Sensor for Slot {
        fn name(&self) -> &str {
            "slot"
        }
        fn critical(&self) -> bool {
            true
        }
        fn read(&self) -> SensorFuture {
            let v = self.value.clone();
            Box::pin(async move {
                // Slow enough to still be running when the next reading is asked for.
                tokio::time::sleep(Duration::from_millis(150)).await;
                Ok(vec![Signal::new(
                    "slot",
                    "slot.value",
                    v.load(Ordering::SeqCst).to_string(),
                )])
            })
        }
    }

    #[test]
    fn a_reading_started_before_a_change_never_stands_for_one_after_it() {
        let value = Arc::new(AtomicUsize::new(1));
        let mut t = SensorThreads::start(
            vec![Arc::new(Slot {
                value: value.clone(),
            })],
            Duration::from_secs(2),
        );
        t.start_watch();
        // Checked before the watch reading answered: dropped, its worker still busy.
        assert!(t.check_watch().is_empty());
        std::thread::sleep(Duration::from_millis(200));
        value.store(2, Ordering::SeqCst);
        let obs = t.observe(2);
        assert_eq!(obs.get("slot.value"), Some("2"), "{obs:?}");
    }

    #[test]
    fn a_watch_reading_within_its_deadline_is_not_a_failure() {
        let mut t = SensorThreads::start(vec![fixed("ok", true, 0)], Duration::from_secs(5));
        t.start_watch();
        std::thread::sleep(Duration::from_millis(50));
        assert!(t.check_watch().is_empty());
        assert!(t.observe(2).failed.is_empty());
    }
}
