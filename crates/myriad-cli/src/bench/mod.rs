//! The benchmark runner shared by every workload: worker threads, warm-up, the measured
//! interval, retries of aborted transactions, per-thread latency histograms per transaction
//! type (merged at the end), the memory time series, and the progress bar.
//!
//! Timing. A shared `phase` word moves WARMUP → MEASURE → STOP; a worker reads it between
//! transactions, and a transaction counts iff it *started* in MEASURE. Its latency runs from
//! the start of its first attempt to its commit, across retries, and in a durable database
//! to the group commit that made it durable (workers commit with `commit_deferred` and go on;
//! each keeps its measured commits in a queue until they are durable). The measured duration is
//! the main thread's time between the MEASURE and STOP transitions.

pub mod command;
pub mod footprint;
pub mod report;

use crate::workload::Worker;
use hdrhistogram::Histogram;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use myriad::{AbortReason, CommitTicket, Database, Error, Stats};
use std::collections::VecDeque;
use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

pub(crate) const WARMUP: u8 = 0;
pub(crate) const MEASURE: u8 = 1;
pub(crate) const STOP: u8 = 2;

/// Latency histogram range: 1 ns to 1 hour, 3 significant digits.
const HIST_MAX_NS: u64 = 3_600_000_000_000;
/// Upper bounds (exclusive, ns) of the coarse latency buckets of thesis Table 3.1; the last
/// bucket is open.
pub const LATENCY_BUCKET_BOUNDS_NS: [u64; 5] =
    [10_000, 100_000, 1_000_000, 10_000_000, 100_000_000];
pub const LATENCY_BUCKET_NAMES: [&str; 6] = [
    "<10us",
    "10-100us",
    "100us-1ms",
    "1-10ms",
    "10-100ms",
    ">=100ms",
];
/// Number of abort reasons the engine reports.
pub const REASONS: usize = AbortReason::ALL.len();

/// How to run.
#[derive(Clone, Debug)]
pub struct RunOptions {
    pub threads: usize,
    pub warmup: Duration,
    pub duration: Duration,
    /// Draw a progress bar.
    pub progress: bool,
    /// Transaction-type names of the workload (its `Worker::next_txn` indexes into these).
    pub txn_types: &'static [&'static str],
    /// How long workers may take to finish their last transaction after the measured
    /// interval; past it the run is declared stalled and the process exits with status 1.
    pub stop_grace: Duration,
    /// Sample the chain lengths of about this many tuples in every series sample, on a
    /// sampler thread of its own (`Database::chain_sample`; the workers are not stopped).
    pub chain_sample: Option<usize>,
    /// The memory guard: the run stops, and `RunResult::memory_guard` says why, once live
    /// version bytes exceed this.
    pub max_version_bytes: Option<u64>,
    /// The run ends once a worker has finished this many transactions, warm-up included
    /// (`--stop-after`).
    pub stop_after: Option<u64>,
}

/// Latency of one transaction type.
#[derive(Clone, Debug)]
pub struct TypeLatency {
    pub hist: Histogram<u64>,
    pub buckets: [u64; 6],
}

impl TypeLatency {
    pub(crate) fn new() -> TypeLatency {
        // The bounds are constants that hdrhistogram accepts.
        let hist = Histogram::new_with_bounds(1, HIST_MAX_NS, 3).expect("valid histogram bounds");
        TypeLatency {
            hist,
            buckets: [0; 6],
        }
    }

    #[inline]
    pub(crate) fn record(&mut self, ns: u64) {
        self.hist.saturating_record(ns.clamp(1, HIST_MAX_NS));
        let b = LATENCY_BUCKET_BOUNDS_NS
            .iter()
            .position(|&hi| ns < hi)
            .unwrap_or(5);
        self.buckets[b] += 1;
    }

    pub(crate) fn merge(&mut self, other: &TypeLatency) {
        // Same bounds on both sides, so `add` cannot fail.
        self.hist
            .add(&other.hist)
            .expect("histograms with equal bounds");
        for (a, b) in self.buckets.iter_mut().zip(other.buckets) {
            *a += b;
        }
    }
}

impl RunResult {
    /// Adds one worker's counters.
    pub(crate) fn add(&mut self, t: &ThreadTally) {
        self.committed += t.committed;
        self.warmup_committed += t.warmup_committed;
        self.abandoned += t.abandoned;
        self.restart_ns += t.restart_ns;
        for (a, b) in self.aborted.iter_mut().zip(t.aborted) {
            *a += b;
        }
        for (a, b) in self.user_aborted.iter_mut().zip(&t.user_aborted) {
            *a += b;
        }
        for (a, b) in self.conflict_aborted.iter_mut().zip(&t.conflict_aborted) {
            *a += b;
        }
        for (a, b) in self.all_committed.iter_mut().zip(&t.all_committed) {
            *a += b;
        }
        for (a, b) in self.latency.iter_mut().zip(&t.latency) {
            a.merge(b);
        }
        if self.latency_by_s.len() < t.latency_by_s.len() {
            self.latency_by_s.resize(t.latency_by_s.len(), (0, 0));
        }
        for (a, b) in self.latency_by_s.iter_mut().zip(&t.latency_by_s) {
            a.0 += b.0;
            a.1 += b.1;
        }
    }
}

/// One worker's counters; merged into `RunResult` at the end.
pub(crate) struct ThreadTally {
    pub(crate) committed: u64,
    /// Transactions committed before the measured interval began (`RunResult`'s).
    pub(crate) warmup_committed: u64,
    pub(crate) aborted: [u64; REASONS],
    /// Transactions given up because the run ended while they were being retried.
    pub(crate) abandoned: u64,
    /// User aborts per transaction type.
    pub(crate) user_aborted: Vec<u64>,
    /// Aborted attempts (serialization failures, retried) per transaction type.
    pub(crate) conflict_aborted: Vec<u64>,
    pub(crate) latency: Vec<TypeLatency>,
    /// Commits per transaction type over the worker's whole run, warm-up included
    /// (`RunResult`'s).
    pub(crate) all_committed: Vec<u64>,
    /// Nanoseconds measured transactions spent in abort-and-restart: from their start to the
    /// start of the attempt that ended them (aborted attempts and backoffs), and the whole
    /// time of an abandoned one (thesis Fig. 3.9a).
    pub(crate) restart_ns: u64,
    /// Of the current transaction's time, how much `restart_ns` has counted already.
    counted_ns: u64,
    /// Measured latencies by the second of the measured interval they ended in (`RunResult`'s).
    pub(crate) latency_by_s: Vec<(u64, u64)>,
}

impl ThreadTally {
    /// Counts an aborted attempt (if `measured`) and waits the backoff before the retry;
    /// false when the run has stopped, so the transaction is abandoned instead of retried.
    #[inline]
    pub(crate) fn abort_and_back_off(
        &mut self,
        reason: AbortReason,
        ty: usize,
        measured: bool,
        phase: &AtomicU8,
        aborts: &mut u32,
        start: Instant,
    ) -> bool {
        if measured {
            self.aborted[reason_index(reason)] += 1;
            self.conflict_aborted[ty] += 1;
        }
        if *aborts == 0 {
            self.counted_ns = 0;
        }
        let stop = phase.load(Ordering::Relaxed) == STOP;
        if !stop {
            *aborts += 1;
            backoff(*aborts, start.elapsed().as_nanos() as u64 ^ self.committed);
        }
        // Everything up to here (the next attempt's start, or the end) was restart time.
        let now = start.elapsed().as_nanos() as u64;
        if measured {
            self.restart_ns += now.saturating_sub(self.counted_ns);
        }
        self.counted_ns = now;
        if stop {
            self.abandoned += measured as u64;
            return false;
        }
        true
    }

    pub(crate) fn new(types: usize) -> ThreadTally {
        ThreadTally {
            committed: 0,
            warmup_committed: 0,
            aborted: [0; REASONS],
            abandoned: 0,
            user_aborted: vec![0; types],
            conflict_aborted: vec![0; types],
            latency: (0..types).map(|_| TypeLatency::new()).collect(),
            all_committed: vec![0; types],
            restart_ns: 0,
            counted_ns: 0,
            latency_by_s: Vec::new(),
        }
    }

    /// Records a measured transaction's latency under its type and under the second of the
    /// measured interval (begun at `m0`) in which it ended, at `end`.
    #[inline]
    fn record_latency(&mut self, ty: usize, ns: u64, end: Instant, m0: Option<&Instant>) {
        self.latency[ty].record(ns);
        if let Some(m0) = m0 {
            let sec = end.saturating_duration_since(*m0).as_secs() as usize;
            if self.latency_by_s.len() <= sec {
                self.latency_by_s.resize(sec + 1, (0, 0));
            }
            let b = &mut self.latency_by_s[sec];
            b.0 += ns;
            b.1 += 1;
        }
    }
}

/// One sample of the version-memory time series.
#[derive(Clone, Copy, Debug, serde::Serialize)]
pub struct MemSample {
    /// Seconds since the start of the measured interval.
    pub t_s: f64,
    pub live_versions: u64,
    pub version_bytes: u64,
    /// Transactions committed since the start of the measured interval (so the throughput
    /// between two samples is their difference over their time difference).
    pub committed: u64,
    /// Version bytes allocated since the start of the measured interval.
    pub version_bytes_allocated: u64,
    /// Versions reclaimed since the start of the measured interval, and of those the ones
    /// spliced out of the middle of chains by GC `dead-zone` (the rest were cut below the
    /// watermark).
    pub versions_reclaimed: u64,
    pub versions_pruned_dead_zone: u64,
    /// With `RunOptions::chain_sample`: the longest chain and the 99th-percentile length of
    /// the latest sample of chains (taken at most a sampler pass before this sample).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub chain_len_max: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub chain_len_p99: Option<u64>,
    /// A durable database: bytes written to the log since the start of the measured
    /// interval.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub log_bytes: Option<u64>,
}

impl MemSample {
    fn of(t: f64, s: &Stats, s0: &Stats) -> MemSample {
        MemSample {
            t_s: t,
            live_versions: s.live_versions(),
            version_bytes: s.live_version_bytes(),
            committed: s.committed.saturating_sub(s0.committed),
            version_bytes_allocated: s
                .version_bytes_allocated
                .saturating_sub(s0.version_bytes_allocated),
            versions_reclaimed: s.versions_reclaimed.saturating_sub(s0.versions_reclaimed),
            versions_pruned_dead_zone: s
                .versions_pruned_dead_zone
                .saturating_sub(s0.versions_pruned_dead_zone),
            chain_len_max: None,
            chain_len_p99: None,
            log_bytes: None,
        }
    }

    /// Adds the log bytes written since `log0` (a durable database's count at the start of
    /// the measured interval).
    fn with_log(mut self, db: &Database, log0: Option<u64>) -> MemSample {
        if let (Some(l0), Some(l)) = (log0, db.log_stats()) {
            self.log_bytes = Some(l.bytes_written.saturating_sub(l0));
        }
        self
    }

    /// Adds the sampler's latest chain lengths, if it has a sample.
    fn with_chains(mut self, chains: &ChainSampler) -> MemSample {
        if let Some((max, p99)) = chains.latest() {
            self.chain_len_max = Some(max);
            self.chain_len_p99 = Some(p99);
        }
        self
    }
}

/// The chain-length sampler's latest result: `u64::MAX` in `max` until the first sample.
pub(crate) struct ChainSampler {
    max: std::sync::atomic::AtomicU64,
    p99: std::sync::atomic::AtomicU64,
    /// The sorted lengths of the sample whose longest chain was the run's longest so far
    /// (the latest such): vDriver Fig. 14's distribution at the run's worst moment.
    worst: std::sync::Mutex<Vec<u64>>,
}

impl ChainSampler {
    fn new() -> ChainSampler {
        ChainSampler {
            max: std::sync::atomic::AtomicU64::new(u64::MAX),
            p99: std::sync::atomic::AtomicU64::new(0),
            worst: Default::default(),
        }
    }

    /// The chain length at each percentile 0, 1, ..., 100 (nearest rank) of the worst sample
    /// (`worst`); empty before the first sample.
    fn worst_percentiles(&self) -> Vec<u64> {
        let w = self.worst.lock().unwrap_or_else(|p| p.into_inner());
        if w.is_empty() {
            return Vec::new();
        }
        (0..=100usize)
            .map(|q| w[(w.len() * q).div_ceil(100).max(1) - 1])
            .collect()
    }

    fn latest(&self) -> Option<(u64, u64)> {
        let p99 = self.p99.load(Ordering::Acquire);
        let max = self.max.load(Ordering::Acquire);
        (max != u64::MAX).then_some((max, p99))
    }

    /// Samples until the run stops: one pass over about `tuples` chains, then a pause.
    fn run(&self, db: &Database, tuples: usize, phase: &AtomicU8) {
        while phase.load(Ordering::Relaxed) != STOP {
            let mut lens = db.chain_sample(tuples);
            if let Some((max, p99)) = max_and_p99(&mut lens) {
                self.p99.store(p99, Ordering::Release);
                self.max.store(max, Ordering::Release);
                let mut w = self.worst.lock().unwrap_or_else(|p| p.into_inner());
                if w.last().is_none_or(|&m| max >= m) {
                    *w = lens;
                }
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

/// The largest value and the 99th percentile (nearest rank) of `v`; `None` if it is empty.
pub(crate) fn max_and_p99(v: &mut [u64]) -> Option<(u64, u64)> {
    if v.is_empty() {
        return None;
    }
    v.sort_unstable();
    let rank = (v.len() * 99).div_ceil(100).max(1);
    Some((v[v.len() - 1], v[rank - 1]))
}

/// What a run measured.
#[derive(Debug)]
pub struct RunResult {
    pub committed: u64,
    /// Transactions committed before the measured interval began: in the warm-up, which
    /// workers start in even without one until the driver starts the interval. Not in the
    /// throughput; `scripts/instructions.sh` needs it to divide a worker's whole run.
    pub warmup_committed: u64,
    pub aborted: [u64; REASONS],
    pub abandoned: u64,
    /// User aborts (the transaction's own decision, not retried) per transaction type.
    pub user_aborted: Vec<u64>,
    /// Aborted attempts (serialization failures, retried) per transaction type.
    pub conflict_aborted: Vec<u64>,
    /// Commits per transaction type over the workers' whole runs, warm-up included: what
    /// `scripts/instructions.sh` divides each type's instructions by.
    pub all_committed: Vec<u64>,
    /// Worker nanoseconds spent in abort-and-restart (`ThreadTally::restart_ns`, summed).
    pub restart_ns: u64,
    pub duration: Duration,
    pub latency: Vec<TypeLatency>,
    pub timeseries: Vec<MemSample>,
    /// With `RunOptions::chain_sample`: the chain length at each percentile 0..=100 of the
    /// sample whose longest chain was the run's longest (`ChainSampler::worst`).
    pub chain_percentiles: Vec<u64>,
    /// Engine counters at the start and the end of the measured interval.
    pub stats_start: Stats,
    pub stats_end: Stats,
    /// Why the memory guard stopped the run (`RunOptions::max_version_bytes`), if it did.
    pub memory_guard: Option<String>,
    /// Latency of measured transactions by the second of the measured interval they ended
    /// in (acknowledged, for a durable commit): (nanoseconds summed, count) per second.
    pub latency_by_s: Vec<(u64, u64)>,
    /// When the measured interval began (`None` if it never did).
    pub measure_start: Option<Instant>,
}

impl RunResult {
    /// A result with nothing counted yet, for `types` transaction types.
    pub(crate) fn empty(types: usize, duration: Duration) -> RunResult {
        RunResult {
            committed: 0,
            warmup_committed: 0,
            aborted: [0; REASONS],
            abandoned: 0,
            user_aborted: vec![0; types],
            conflict_aborted: vec![0; types],
            all_committed: vec![0; types],
            restart_ns: 0,
            duration,
            latency: (0..types).map(|_| TypeLatency::new()).collect(),
            timeseries: Vec::new(),
            chain_percentiles: Vec::new(),
            stats_start: Stats::default(),
            stats_end: Stats::default(),
            memory_guard: None,
            latency_by_s: Vec::new(),
            measure_start: None,
        }
    }

    /// Mean latency (µs) and count of each whole or final partial second of the measured
    /// interval: `(t_s, mean_us, count)` with `t_s` the second's end (the interval's end for
    /// the last), seconds without a commit left out.
    pub fn latency_series(&self) -> Vec<(f64, f64, u64)> {
        let end = self.duration.as_secs_f64();
        self.latency_by_s
            .iter()
            .enumerate()
            .filter(|(_, &(_, n))| n > 0)
            .map(|(i, &(ns, n))| (((i + 1) as f64).min(end), ns as f64 / n as f64 / 1e3, n))
            .collect()
    }

    pub fn aborted_total(&self) -> u64 {
        self.aborted.iter().sum()
    }
}

/// Whether progress bars may be drawn: stdout is a terminal and the user did not opt out.
pub fn progress_enabled(no_progress: bool) -> bool {
    !no_progress && std::io::stdout().is_terminal()
}

/// A progress bar on stdout (hidden when `enabled` is false).
pub fn progress_bar(enabled: bool, len: u64, template: &str) -> ProgressBar {
    if !enabled {
        return ProgressBar::hidden();
    }
    let pb = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stdout());
    if let Ok(style) = ProgressStyle::with_template(template) {
        pb.set_style(style.progress_chars("=> "));
    }
    pb
}

/// Runs `f(chunk, scratch)` for chunks `0..chunks` on `threads` threads, thread `t` taking the
/// contiguous range `[t·chunks/threads, (t+1)·chunks/threads)`. `f` returns the number of items
/// it did (added to `progress`). The first error stops the other threads and is returned.
pub fn parallel_chunks<S: Default, E: Send>(
    threads: usize,
    chunks: u64,
    progress: Option<&ProgressBar>,
    f: impl Fn(u64, &mut S) -> Result<u64, E> + Sync,
) -> Result<(), E> {
    let threads = threads.max(1) as u64;
    let failed = AtomicBool::new(false);
    let first_error: Mutex<Option<E>> = Mutex::new(None);
    std::thread::scope(|s| {
        for t in 0..threads {
            let (f, failed, first_error) = (&f, &failed, &first_error);
            s.spawn(move || {
                let mut scratch = S::default();
                for chunk in t * chunks / threads..(t + 1) * chunks / threads {
                    if failed.load(Ordering::Relaxed) {
                        return;
                    }
                    match f(chunk, &mut scratch) {
                        Ok(n) => {
                            if let Some(pb) = progress {
                                pb.inc(n);
                            }
                        }
                        Err(e) => {
                            failed.store(true, Ordering::Relaxed);
                            first_error
                                .lock()
                                .unwrap_or_else(|p| p.into_inner())
                                .get_or_insert(e);
                            return;
                        }
                    }
                }
            });
        }
    });
    match first_error.into_inner().unwrap_or_else(|p| p.into_inner()) {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// Position of `reason` in `AbortReason::ALL`.
pub(crate) fn reason_index(reason: AbortReason) -> usize {
    AbortReason::ALL
        .iter()
        .position(|&r| r == reason)
        .unwrap_or(REASONS - 1)
}

/// Runs `opts.threads` workers (`make_worker(i)` builds worker `i` on its own thread) through
/// the warm-up and the measured interval. Returns the first fatal (non-retryable) error.
pub fn run<W: Worker>(
    db: &Database,
    opts: &RunOptions,
    make_worker: impl Fn(usize) -> W + Sync,
) -> Result<RunResult, Error> {
    // Even without warm-up, workers start in WARMUP: the measured interval begins when the
    // driver says so, not when the first thread happens to be scheduled.
    let phase = AtomicU8::new(WARMUP);
    let types = opts.txn_types.len();
    let limit = opts.stop_after.unwrap_or(u64::MAX);
    let total_ms = (opts.warmup + opts.duration).as_millis() as u64;
    let pb = progress_bar(
        opts.progress,
        total_ms.max(1),
        "{prefix:>7} [{wide_bar}] {msg}",
    );
    pb.set_prefix(if opts.warmup.is_zero() {
        "run"
    } else {
        "warmup"
    });

    let running = AtomicUsize::new(opts.threads);
    let chains = ChainSampler::new();
    let measure_start = OnceLock::new();
    let (tallies, measured) = std::thread::scope(|s| {
        let handles: Vec<_> = (0..opts.threads)
            .map(|i| {
                let (phase, make_worker, running) = (&phase, &make_worker, &running);
                let m0 = &measure_start;
                s.spawn(move || {
                    let r = worker_loop(db, phase, m0, types, limit, make_worker(i));
                    running.fetch_sub(1, Ordering::SeqCst);
                    r
                })
            })
            .collect();
        if let Some(n) = opts.chain_sample {
            let (chains, phase) = (&chains, &phase);
            s.spawn(move || chains.run(db, n, phase));
        }
        let measured = drive(db, opts, &phase, &pb, &chains, &measure_start);
        let (done, stopped) = std::sync::mpsc::channel::<()>();
        let running = &running;
        s.spawn(move || watchdog(db, opts, running, &stopped));
        let tallies: Vec<_> = handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect();
        let _ = done.send(());
        (tallies, measured)
    });
    pb.finish_and_clear();

    let (duration, timeseries, stats_start, stats_end, memory_guard) = measured;
    let mut result = RunResult {
        timeseries,
        chain_percentiles: chains.worst_percentiles(),
        stats_start,
        stats_end,
        memory_guard,
        measure_start: measure_start.get().copied(),
        ..RunResult::empty(types, duration)
    };
    for t in tallies {
        result.add(&t?);
    }
    // A vacuum thread or the tick that died made the run something else than what was
    // asked for (memory no longer reclaimed, commits readable late): not a result.
    if let Some(e) = db.background_failures().into_iter().next() {
        return Err(e);
    }
    Ok(result)
}

/// What `drive` measured: duration, series, counters at both ends, memory-guard trip.
type Measured = (Duration, Vec<MemSample>, Stats, Stats, Option<String>);

/// The main thread's part: phase changes, memory samples, progress, the memory guard.
/// Returns the measured duration, the memory time series, the engine counters at both ends
/// of the interval and why the memory guard stopped the run, if it did.
fn drive(
    db: &Database,
    opts: &RunOptions,
    phase: &AtomicU8,
    pb: &ProgressBar,
    chains: &ChainSampler,
    measure_start: &OnceLock<Instant>,
) -> Measured {
    const TICK: Duration = Duration::from_millis(100);
    let start = Instant::now();
    // A worker that hits a fatal error sets STOP; the driver then ends early.
    let stopped = || phase.load(Ordering::Relaxed) == STOP;
    while start.elapsed() < opts.warmup && !stopped() {
        std::thread::sleep(TICK.min(opts.warmup.saturating_sub(start.elapsed())));
        pb.set_position(start.elapsed().as_millis() as u64);
        pb.set_message(format!(
            "{:.1}/{:.1} s",
            start.elapsed().as_secs_f64(),
            opts.warmup.as_secs_f64()
        ));
    }
    // Set before the workers see MEASURE, so every measured commit has the interval's start.
    let m0 = *measure_start.get_or_init(Instant::now);
    let _ = phase.compare_exchange(WARMUP, MEASURE, Ordering::SeqCst, Ordering::SeqCst);
    let s0 = db.stats();
    let log0 = db.log_stats().map(|l| l.bytes_written);
    pb.set_prefix("run");
    let sample = |t: f64, s: &Stats| {
        MemSample::of(t, s, &s0)
            .with_chains(chains)
            .with_log(db, log0)
    };
    let mut series = vec![sample(0.0, &s0)];
    let mut next_sample = Duration::from_secs(1);
    let mut guard = None;
    loop {
        let elapsed = m0.elapsed();
        if elapsed >= opts.duration || stopped() {
            break;
        }
        if let Some(limit) = opts.max_version_bytes {
            let live = db.stats().live_version_bytes();
            if live > limit {
                guard = Some(format!(
                    "the memory guard stopped the run {:.1} s into the measured interval: \
                     {} of live versions, above the limit of {}",
                    elapsed.as_secs_f64(),
                    report::bytes(live),
                    report::bytes(limit)
                ));
                break;
            }
        }
        std::thread::sleep(
            TICK.min(opts.duration - elapsed)
                .min(next_sample.saturating_sub(elapsed))
                .max(Duration::from_millis(1)),
        );
        let elapsed = m0.elapsed();
        if elapsed >= next_sample {
            let s = db.stats();
            series.push(sample(elapsed.as_secs_f64(), &s));
            next_sample += Duration::from_secs(1);
        }
        if opts.progress {
            let committed = db.stats().committed.saturating_sub(s0.committed);
            pb.set_position((opts.warmup + elapsed).as_millis() as u64);
            pb.set_message(format!(
                "{:.1}/{:.1} s  {} txn/s",
                elapsed.as_secs_f64(),
                opts.duration.as_secs_f64(),
                report::thousands((committed as f64 / elapsed.as_secs_f64().max(1e-9)) as u64)
            ));
        }
    }
    phase.store(STOP, Ordering::SeqCst);
    let duration = m0.elapsed();
    let s1 = db.stats();
    if series
        .last()
        .is_some_and(|l| duration.as_secs_f64() - l.t_s > 0.05)
    {
        series.push(sample(duration.as_secs_f64(), &s1));
    }
    (duration, series, s0, s1, guard)
}

/// Ends the process if workers are still inside a transaction `stop_grace` after the
/// measured interval: a benchmark must not hang, and a stalled engine is a result to report.
fn watchdog(db: &Database, opts: &RunOptions, running: &AtomicUsize, stopped: &Receiver<()>) {
    if stopped.recv_timeout(opts.stop_grace) != Err(RecvTimeoutError::Timeout) {
        return;
    }
    let s = db.stats();
    eprintln!(
        "myriad: error: {} of {} workers still inside a transaction {:.0} s after the measured \
         interval ended; the engine appears stalled ({} live versions, {} of versions, {:.0} ms \
         in completed garbage-collection passes)",
        running.load(Ordering::SeqCst),
        opts.threads,
        opts.stop_grace.as_secs_f64(),
        report::thousands(s.live_versions()),
        report::bytes(s.live_version_bytes()),
        s.gc_ns as f64 / 1e6,
    );
    std::process::exit(1);
}

/// How an aborted transaction is retried (stated in every report's fidelity block).
pub const RETRY_POLICY: &str =
    "same transaction again after a randomized exponential backoff: uniform in [0, 2 us * 2^k), k = aborts so far, capped at 0.5 ms; after a write-write conflict with a commit, first waits until that commit is readable (Database::take_retry_floor, wait_for_floor; at once under the counters)";

/// Waits before the `k`-th retry (k ≥ 1): uniform in [0, 2 µs · 2^k), at most 0.5 ms. Without it,
/// two workers that abort each other retry in lock step and can livelock on hot keys.
fn backoff(k: u32, salt: u64) {
    let cap_ns = (2_000u64 << k.min(8)).min(500_000);
    let mut z = salt
        .wrapping_add(u64::from(k))
        .wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 31)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    let wait = std::time::Duration::from_nanos((z ^ (z >> 29)) % cap_ns);
    let t0 = Instant::now();
    while t0.elapsed() < wait {
        std::hint::spin_loop();
    }
    // Let the conflicting transaction finish when threads outnumber cores.
    std::thread::yield_now();
}

/// A user abort: the procedure ran `RAISE`/`ROLLBACK`, or the workload aborted the
/// transaction itself.
fn is_user_abort(e: &Error) -> bool {
    matches!(
        e,
        Error::ProcedureAbort { .. } | Error::SerializationFailure(AbortReason::UserAbort)
    )
}

// Never inlined: `scripts/instructions.sh` counts the instructions spent inside it.
#[inline(never)]
fn worker_loop<W: Worker>(
    db: &Database,
    phase: &AtomicU8,
    measure_start: &OnceLock<Instant>,
    types: usize,
    limit: u64,
    mut w: W,
) -> Result<ThreadTally, Error> {
    let mut tally = ThreadTally::new(types);
    // Transactions finished (committed or rolled back by themselves), for `limit`.
    let mut finished = 0u64;
    let counted = w.counts_as_throughput();
    // Measured commits not yet durable, oldest first (a worker's tickets come in epoch
    // order): their latency ends when the group commit acknowledges them, as in SiloR.
    let mut pending: VecDeque<(CommitTicket, Instant, usize)> = VecDeque::new();
    loop {
        while let Some(&(k, start, ty)) = pending.front() {
            if !db.is_durable(k) {
                break;
            }
            let now = Instant::now();
            let ns = now.duration_since(start).as_nanos() as u64;
            tally.record_latency(ty, ns, now, measure_start.get());
            pending.pop_front();
        }
        if finished >= limit {
            // `--stop-after`: this worker ends the run (the driver sees STOP and stops).
            phase.store(STOP, Ordering::SeqCst);
        }
        let ph = phase.load(Ordering::Relaxed);
        if ph == STOP {
            if let Some(&(k, _, _)) = pending.back() {
                db.wait_durable(k)?;
                let now = Instant::now();
                for (_, start, ty) in pending.drain(..) {
                    let ns = now.duration_since(start).as_nanos() as u64;
                    tally.record_latency(ty, ns, now, measure_start.get());
                }
            }
            return Ok(tally);
        }
        let measured = ph == MEASURE;
        let ty = w.next_txn();
        debug_assert!(
            ty < types,
            "workload returned transaction type {ty} of {types}"
        );
        let start = Instant::now();
        let mut aborts = 0u32;
        loop {
            match attempt_as(ty, &mut w, db) {
                Ok(ticket) => {
                    finished += 1;
                    tally.all_committed[ty] += counted as u64;
                    if !measured {
                        tally.warmup_committed += counted as u64;
                    }
                    if measured {
                        tally.committed += counted as u64;
                        if pending.is_empty() && db.is_durable(ticket) {
                            let now = Instant::now();
                            let ns = now.duration_since(start).as_nanos() as u64;
                            tally.record_latency(ty, ns, now, measure_start.get());
                        } else {
                            pending.push_back((ticket, start, ty));
                        }
                    }
                    break;
                }
                Err(e) if is_user_abort(&e) => {
                    // The transaction's own decision (a RAISE, a missing row the workload
                    // treats as a failure): counted, never retried.
                    finished += 1;
                    if measured {
                        tally.aborted[reason_index(AbortReason::UserAbort)] += 1;
                        tally.user_aborted[ty] += 1;
                    }
                    break;
                }
                Err(Error::SerializationFailure(reason)) => {
                    // A write-write conflict with a commit: the retry begins only once that
                    // commit is readable, so it does not meet it again (a no-op under the
                    // counters; under `partial-order` the winner's group may still be open,
                    // or, durable, not yet logged). Counted as restart time below.
                    if let Some(ts) = db.take_retry_floor() {
                        if let Err(e) = db.wait_for_floor(ts) {
                            phase.store(STOP, Ordering::SeqCst);
                            return Err(e);
                        }
                    }
                    if !tally.abort_and_back_off(reason, ty, measured, phase, &mut aborts, start) {
                        break;
                    }
                }
                Err(e) => {
                    phase.store(STOP, Ordering::SeqCst);
                    return Err(e);
                }
            }
        }
    }
}

/// One attempt of a transaction of type `ty`, run inside a function of its own per type
/// (`txn_type_0` … `txn_type_7`, never inlined; types past the eighth share
/// `txn_type_more`), so that a callgrind profile of the worker splits its instructions by
/// transaction type (`scripts/instructions.sh`). Each body differs by its `black_box`ed
/// number: identical bodies could be merged into one symbol. No closure: one made in
/// `worker_loop` would be named after it and toggle the script's collection off.
#[inline(always)]
fn attempt_as<W: Worker>(ty: usize, w: &mut W, db: &Database) -> myriad::Result<CommitTicket> {
    macro_rules! typed {
        ($($name:ident = $n:literal),*) => {
            $(
                #[inline(never)]
                fn $name<W: Worker>(w: &mut W, db: &Database) -> myriad::Result<CommitTicket> {
                    std::hint::black_box($n);
                    w.attempt(db)
                }
            )*
        };
    }
    typed!(
        txn_type_0 = 0u8,
        txn_type_1 = 1u8,
        txn_type_2 = 2u8,
        txn_type_3 = 3u8,
        txn_type_4 = 4u8,
        txn_type_5 = 5u8,
        txn_type_6 = 6u8,
        txn_type_7 = 7u8,
        txn_type_more = 8u8
    );
    match ty {
        0 => txn_type_0(w, db),
        1 => txn_type_1(w, db),
        2 => txn_type_2(w, db),
        3 => txn_type_3(w, db),
        4 => txn_type_4(w, db),
        5 => txn_type_5(w, db),
        6 => txn_type_6(w, db),
        7 => txn_type_7(w, db),
        _ => txn_type_more(w, db),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An aborted attempt counts under its reason and its transaction type, in the measured
    /// interval only.
    #[test]
    fn aborted_attempts_count_by_reason_and_type_when_measured() {
        let mut t = ThreadTally::new(3);
        let phase = AtomicU8::new(MEASURE);
        let start = Instant::now();
        let mut aborts = 0;
        assert!(t.abort_and_back_off(
            AbortReason::ReadValidation,
            2,
            true,
            &phase,
            &mut aborts,
            start
        ));
        assert!(t.abort_and_back_off(
            AbortReason::WriteWriteConflict,
            2,
            true,
            &phase,
            &mut aborts,
            start
        ));
        assert!(t.abort_and_back_off(
            AbortReason::LockConflict,
            0,
            false,
            &phase,
            &mut aborts,
            start
        ));
        assert_eq!(t.conflict_aborted, [0, 0, 2]);
        assert_eq!(t.aborted.iter().sum::<u64>(), 2);
        let mut r = RunResult::empty(3, Duration::ZERO);
        r.add(&t);
        r.add(&t);
        assert_eq!(r.conflict_aborted, [0, 0, 4]);
    }

    /// Fig. 3.9a's accounting: a measured transaction's time up to each retry counts once,
    /// an abandoned one's whole time counts, and a new transaction starts from zero.
    #[test]
    fn restart_time_counts_each_stretch_before_a_retry_once() {
        let mut t = ThreadTally::new(1);
        let phase = AtomicU8::new(MEASURE);
        let abort = |t: &mut ThreadTally, measured, aborts: &mut u32, start| {
            t.abort_and_back_off(
                AbortReason::ReadValidation,
                0,
                measured,
                &phase,
                aborts,
                start,
            )
        };
        let start = Instant::now() - Duration::from_millis(5);
        let mut aborts = 0;
        assert!(abort(&mut t, true, &mut aborts, start));
        assert_eq!(aborts, 1);
        assert!(t.restart_ns >= 5_000_000, "{}", t.restart_ns);
        assert!(abort(&mut t, true, &mut aborts, start));
        let up_to_now = start.elapsed().as_nanos() as u64;
        assert!(
            t.restart_ns <= up_to_now,
            "counted twice: {} > {up_to_now}",
            t.restart_ns
        );
        phase.store(STOP, Ordering::Relaxed);
        let before = t.restart_ns;
        assert!(!abort(&mut t, true, &mut aborts, start));
        assert_eq!(t.abandoned, 1);
        assert!(t.restart_ns >= before && t.restart_ns <= start.elapsed().as_nanos() as u64);
        // The next transaction's first abort counts from its own start.
        phase.store(MEASURE, Ordering::Relaxed);
        let before = t.restart_ns;
        let (start2, mut aborts2) = (Instant::now() - Duration::from_millis(2), 0);
        assert!(abort(&mut t, true, &mut aborts2, start2));
        assert!(
            t.restart_ns - before >= 2_000_000,
            "{}",
            t.restart_ns - before
        );
        // Unmeasured (warm-up) transactions count nothing.
        let before = t.restart_ns;
        abort(&mut t, false, &mut 0, start2);
        assert_eq!(t.restart_ns, before);
    }

    #[test]
    fn latency_buckets_follow_table_3_1() {
        let mut l = TypeLatency::new();
        for ns in [
            0,
            9_999,
            10_000,
            99_999,
            100_000,
            1_000_000,
            10_000_000,
            99_999_999,
            100_000_000,
            u64::MAX,
        ] {
            l.record(ns);
        }
        assert_eq!(l.buckets, [2, 2, 1, 1, 2, 2]);
        assert_eq!(l.hist.len(), 10);
    }

    #[test]
    fn parallel_chunks_covers_every_chunk_once_and_stops_on_error() {
        let seen = Mutex::new(Vec::new());
        parallel_chunks::<(), ()>(3, 10, None, |c, _| {
            seen.lock().unwrap().push(c);
            Ok(1)
        })
        .unwrap();
        let mut v = seen.into_inner().unwrap();
        v.sort_unstable();
        assert_eq!(v, (0..10).collect::<Vec<_>>());
        let r = parallel_chunks::<(), u64>(2, 10, None, |c, _| if c == 3 { Err(c) } else { Ok(1) });
        assert_eq!(r, Err(3));
    }
}
