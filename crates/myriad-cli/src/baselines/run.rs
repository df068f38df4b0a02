//! The measured run for a baseline engine: the same phases (warm-up, measured interval, stop),
//! the same rule that a transaction counts iff it started in the measured interval, the same
//! retry backoff and the same latency histograms as `bench::run`, for engines whose commit
//! returns once the transaction is as durable as the engine makes it (so no durability queue,
//! and no Myriad engine counters or version-memory time series).

use crate::bench::{
    RunOptions, RunResult, ThreadTally, TypeLatency, MEASURE, REASONS, STOP, WARMUP,
};
use myriad::{AbortReason, Stats};
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::{Duration, Instant};

/// Why an attempt did not commit.
#[derive(Debug)]
pub(crate) enum Failure {
    /// The engine refused the transaction for now (a busy lock, a conflict): counted under
    /// this reason and retried after the backoff.
    Abort(AbortReason),
    /// Anything else ends the run.
    Fatal(String),
}

/// One thread's transactions on a baseline engine.
pub(crate) trait BaselineWorker {
    /// Draws the next transaction; returns its type.
    fn next_txn(&mut self) -> usize;
    /// Runs the drawn transaction once and commits it.
    fn attempt(&mut self) -> Result<(), Failure>;
}

/// Runs `opts.threads` workers (`make_worker(i)`, built on the worker's own thread) through the
/// warm-up and the measured interval. Returns the first fatal error.
pub(crate) fn run<W: BaselineWorker>(
    opts: &RunOptions,
    make_worker: impl Fn(usize) -> Result<W, String> + Sync,
) -> Result<RunResult, String> {
    let phase = AtomicU8::new(WARMUP);
    let types = opts.txn_types.len();
    let (tallies, duration) = std::thread::scope(|s| {
        let handles: Vec<_> = (0..opts.threads)
            .map(|i| {
                let (phase, make_worker) = (&phase, &make_worker);
                s.spawn(move || match make_worker(i) {
                    Ok(w) => worker_loop(phase, types, w),
                    Err(e) => {
                        phase.store(STOP, Ordering::SeqCst);
                        Err(e)
                    }
                })
            })
            .collect();
        let duration = drive(opts, &phase);
        let tallies: Vec<_> = handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect();
        (tallies, duration)
    });
    let mut result = RunResult {
        committed: 0,
        aborted: [0; REASONS],
        abandoned: 0,
        user_aborted: vec![0; types],
        duration,
        latency: (0..types).map(|_| TypeLatency::new()).collect(),
        timeseries: Vec::new(),
        stats_start: Stats::default(),
        stats_end: Stats::default(),
    };
    for t in tallies {
        result.add(&t?);
    }
    Ok(result)
}

/// Phase changes; returns the measured duration.
fn drive(opts: &RunOptions, phase: &AtomicU8) -> Duration {
    const TICK: Duration = Duration::from_millis(10);
    let stopped = || phase.load(Ordering::Relaxed) == STOP;
    let start = Instant::now();
    while start.elapsed() < opts.warmup && !stopped() {
        std::thread::sleep(TICK.min(opts.warmup.saturating_sub(start.elapsed())));
    }
    let _ = phase.compare_exchange(WARMUP, MEASURE, Ordering::SeqCst, Ordering::SeqCst);
    let m0 = Instant::now();
    while m0.elapsed() < opts.duration && !stopped() {
        std::thread::sleep(TICK.min(opts.duration.saturating_sub(m0.elapsed())));
    }
    phase.store(STOP, Ordering::SeqCst);
    m0.elapsed()
}

fn worker_loop<W: BaselineWorker>(
    phase: &AtomicU8,
    types: usize,
    mut w: W,
) -> Result<ThreadTally, String> {
    let mut t = ThreadTally::new(types);
    loop {
        let ph = phase.load(Ordering::Relaxed);
        if ph == STOP {
            return Ok(t);
        }
        let measured = ph == MEASURE;
        let ty = w.next_txn();
        let start = Instant::now();
        let mut aborts = 0u32;
        loop {
            match w.attempt() {
                Ok(()) => {
                    if measured {
                        t.committed += 1;
                        t.latency[ty].record(start.elapsed().as_nanos() as u64);
                    }
                    break;
                }
                Err(Failure::Abort(reason)) => {
                    if !t.abort_and_back_off(reason, measured, phase, &mut aborts, start) {
                        break;
                    }
                }
                Err(Failure::Fatal(m)) => {
                    phase.store(STOP, Ordering::SeqCst);
                    return Err(m);
                }
            }
        }
    }
}
