//! The measured run for a baseline engine: the same phases (warm-up, measured interval, stop),
//! the same rule that a transaction counts iff it started in the measured interval, the same
//! retry backoff and the same latency histograms as `bench::run`, for engines whose commit
//! returns once the transaction is as durable as the engine makes it (so no durability queue,
//! and no Myriad engine counters or version-memory time series).

use super::redb_engine::REDB_FSYNC_NEVER;
use super::Engine;
use crate::bench::command::JsonOut;
use crate::bench::report::{Fidelity, Report, ReportInput};
use crate::bench::{reason_index, RunOptions, RunResult, ThreadTally, MEASURE, STOP, WARMUP};
use myriad::{AbortReason, ChainStats, Config, Stats};
use serde_json::Value as Json;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::{Duration, Instant};

/// The run's options that are not the workload's own.
pub struct BaselineArgs {
    pub warmup_s: f64,
    pub duration_s: f64,
    pub seed: u64,
    /// Store in this (new or empty) directory instead of memory.
    pub data_dir: Option<PathBuf>,
    /// `--fsync always`: every commit is durable when it returns.
    pub fsync_always: bool,
    pub json: Option<PathBuf>,
    pub latency_histogram: bool,
    pub huge_pages: bool,
    pub prefault_mib: crate::args::Prefault,
    /// Every flag value of the command line.
    pub config: Json,
}

/// Before anything is created: refuses what `engine` cannot run with these options and an
/// unusable `--json` or `--data-dir` (usage errors, exit 2); opens the report file.
pub(crate) fn prepare(engine: Engine, a: &BaselineArgs) -> Option<JsonOut> {
    if engine == Engine::Redb && a.data_dir.is_some() && !a.fsync_always {
        crate::usage_error(REDB_FSYNC_NEVER.into());
    }
    let json_out = match &a.json {
        Some(path) => match JsonOut::create(path) {
            Ok(f) => Some(f),
            Err(e) => crate::usage_error(format!("--json {}: {e}", path.display())),
        },
        None => None,
    };
    if let Some(dir) = &a.data_dir {
        crate::bench::command::require_empty_data_dir(dir);
    }
    json_out
}

/// The fidelity block of a baseline run: the workload's entries, then the engine, its
/// concurrency and durability in place of Myriad's design choices.
pub(crate) fn fidelity(
    workload: Vec<(&'static str, Json)>,
    a: &BaselineArgs,
    engine: String,
    concurrency: String,
    durability: String,
) -> Fidelity {
    let mut fidelity = Fidelity::new(
        workload,
        &Config::new(),
        a.seed,
        a.huge_pages,
        a.prefault_mib,
    );
    fidelity.engine = engine;
    fidelity.protocol = concurrency;
    fidelity.isolation = "serializable".into();
    let na = || "n/a (not Myriad)".to_string();
    (fidelity.commit_deps, fidelity.gc, fidelity.version_storage) = (na(), na(), na());
    fidelity.ermia_ssi = na();
    fidelity.validation = na();
    (fidelity.index_pointers, fidelity.non_inline) = (na(), na());
    (fidelity.gc_interval_txns, fidelity.gc_threads) = (0, 0);
    fidelity.durability = durability;
    fidelity
}

/// The report of a baseline run (no Myriad engine counters).
#[allow(clippy::too_many_arguments)]
pub(crate) fn report(
    workload: &str,
    a: &BaselineArgs,
    threads: usize,
    load_s: f64,
    txn_types: &'static [&'static str],
    result: &RunResult,
    results: Vec<(&'static str, Json)>,
    fidelity: Fidelity,
) -> Report {
    Report::new(ReportInput {
        workload,
        config: a.config.clone(),
        seed: a.seed,
        threads,
        warmup_s: a.warmup_s,
        load_s,
        txn_types,
        run: result,
        end: Stats::default(),
        chains: ChainStats::default(),
        results,
        fidelity,
    })
}

/// Why an attempt did not commit.
#[derive(Debug)]
pub(crate) enum Failure {
    /// The engine refused the transaction for now (a busy lock, a conflict): counted under
    /// this reason and retried after the backoff.
    Abort(AbortReason),
    /// The transaction rolled itself back as the workload intends (a procedure's RAISE in
    /// Myriad's version): counted under `user_abort` and per type, not retried.
    UserAbort,
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

/// Runs `threads` workers (`make_worker(i)`, built on the worker's own thread) through the
/// warm-up and the measured interval `a` asks for. Returns the first fatal error.
pub(crate) fn run<W: BaselineWorker>(
    threads: usize,
    txn_types: &'static [&'static str],
    a: &BaselineArgs,
    make_worker: impl Fn(usize) -> Result<W, String> + Sync,
) -> Result<RunResult, String> {
    let opts = &RunOptions {
        threads,
        warmup: Duration::from_secs_f64(a.warmup_s),
        duration: Duration::from_secs_f64(a.duration_s),
        progress: false,
        txn_types,
        stop_grace: Duration::ZERO,
        chain_sample: None,
        max_version_bytes: None,
        stop_after: None,
    };
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
    let mut result = RunResult::empty(types, duration);
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
                    t.warmup_committed += !measured as u64;
                    if measured {
                        t.committed += 1;
                        t.latency[ty].record(start.elapsed().as_nanos() as u64);
                    }
                    break;
                }
                Err(Failure::UserAbort) => {
                    if measured {
                        t.aborted[reason_index(AbortReason::UserAbort)] += 1;
                        t.user_aborted[ty] += 1;
                    }
                    break;
                }
                Err(Failure::Abort(reason)) => {
                    if !t.abort_and_back_off(reason, ty, measured, phase, &mut aborts, start) {
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
