//! Workloads: what a benchmark transaction does. A workload creates its tables, loads them, and
//! hands the runner (`bench`) one `Worker` per thread; the runner owns threads, timing, retries
//! and reporting, so every workload is measured the same way.
//!
//! A workload implements `Workload` (create and load its tables, hand out one `Worker` per
//! thread, describe itself for the fidelity block, report what its workers saw, check its
//! invariant), and `main.rs::bench_workload` runs every workload the same way: open, create,
//! parallel deterministic load with a progress bar, `bench::run`, `--check`, report. Smallbank
//! and TATP are SQL files (`crates/myriad-cli/workloads/{smallbank,tatp}.sql`, compiled in with
//! `include_str!`, also readable by `myriad explain`): the tables are created and the
//! procedures compiled by a `sql::Session`, the loader inserts rows through the Rust API, and a
//! worker fills one reused `CallFrame` per procedure and calls `execute_bound` inside its own
//! transaction. A `RAISE` in a procedure (a spec's expected failure: insufficient funds, a
//! missing or duplicate row) is a *user abort*: the runner counts it under `user_abort` and per
//! transaction type and does not retry it; every other serialization failure is retried with
//! backoff (after a write-write conflict with a commit, once that commit is readable:
//! `Database::take_retry_floor`). Workers keep their outcome counters (money moved, rows inserted) privately and add
//! them to the workload's atomics when they are dropped, so the invariant checks cost nothing
//! on the transaction path.

pub mod llt;
pub mod no_fragment;
pub mod rng;
pub mod smallbank;
pub mod tatp;

pub mod tpcc;
pub mod ycsb;
pub mod zipf;

use indicatif::ProgressBar;
use myriad::{Database, Error, Transaction, Value};
use rng::Rng;
use serde_json::Value as Json;

/// Stream tag of the load generators (worker streams are small thread indices).
pub(crate) const LOAD_STREAM: u64 = 1 << 63;

/// Loads one chunk in one transaction: `insert` gets the chunk's generator,
/// `Rng::new(seed, LOAD_STREAM | chunk)`, so the loaded data depends on the seed alone (not on
/// the thread count). A serialization failure reruns the whole chunk from a fresh generator,
/// so a retry loads the same rows. Returns what `insert` returned for the committed attempt.
pub(crate) fn load_chunk<T>(
    db: &Database,
    seed: u64,
    chunk: u64,
    mut insert: impl FnMut(&mut Transaction<'_>, &mut Rng) -> myriad::Result<T>,
) -> myriad::Result<T> {
    loop {
        let mut rng = Rng::new(seed, LOAD_STREAM | chunk);
        let mut tx = db.begin()?;
        match insert(&mut tx, &mut rng).and_then(|t| tx.commit().map(|()| t)) {
            Ok(t) => return Ok(t),
            Err(e) if e.is_retryable() => continue,
            Err(e) => return Err(e),
        }
    }
}

/// A transaction type drawn with the percentages `mix_pct` (which sum to 100).
pub(crate) fn draw_type(rng: &mut Rng, mix_pct: &[u64]) -> usize {
    let mut r = rng.below(100);
    for (ty, &pct) in mix_pct.iter().enumerate() {
        if r < pct {
            return ty;
        }
        r -= pct;
    }
    mix_pct.len() - 1
}

/// Whether the next transaction runs ad hoc, `pct` percent of them (`--adhoc-pct`): its
/// commit is logged as row writes, not as its call (`Transaction::log_as_rows`). Draws
/// nothing at 0, so a run without ad-hoc transactions draws the inputs it always did.
pub(crate) fn adhoc(rng: &mut Rng, pct: f64) -> bool {
    pct > 0.0 && rng.next_f64() * 100.0 < pct
}

/// One thread's source of transactions.
///
/// The runner calls `next_txn` once per transaction, then `attempt` until it commits: the
/// inputs drawn by `next_txn` are kept, so a retry after an abort is the same transaction.
/// `attempt` returning `SerializationFailure(UserAbort)` means the transaction rolled itself
/// back as the workload intends (TPC-C's 1% New-Order): counted as a user abort, not retried.
pub trait Worker {
    /// Draws the next transaction's inputs; returns its type (an index into the workload's
    /// transaction-type names).
    fn next_txn(&mut self) -> usize;

    /// Runs the drawn transaction once and commits it with `commit_deferred` (the runner
    /// waits for durability, so a worker never blocks on the log). `Error::SerializationFailure`
    /// means it aborted and may be retried; a user abort (`Error::ProcedureAbort`, or
    /// `SerializationFailure(UserAbort)`) is counted and not retried; any other error is fatal
    /// to the run.
    fn attempt(&mut self, db: &Database) -> myriad::Result<myriad::CommitTicket>;

    /// Whether this worker's commits count in the run's committed total and throughput
    /// (false for a background query thread such as TPC-C's StockScan, whose latency is
    /// still recorded under its own transaction type).
    fn counts_as_throughput(&self) -> bool {
        true
    }
}

/// A workload whose tables exist: what `myriad bench` needs to load it, run it and report.
pub trait Workload: Sync {
    type Worker<'a>: Worker
    where
        Self: 'a;

    /// Transaction-type names, in report order.
    fn txn_types(&self) -> &'static [&'static str];

    /// What the loader's progress bar counts: the total and its unit.
    fn load_units(&self) -> (u64, &'static str);

    /// Loads the tables with `threads` threads; the data depends on `seed` alone.
    fn load(
        &self,
        db: &Database,
        threads: usize,
        seed: u64,
        progress: Option<&ProgressBar>,
    ) -> myriad::Result<()>;

    /// Threads the runner starts beyond `--threads` (workers `threads..threads + extra`,
    /// e.g. TPC-C's StockScan threads).
    fn extra_threads(&self) -> usize {
        0
    }

    /// The worker of thread `thread`.
    fn worker(&self, thread: usize, seed: u64) -> Self::Worker<'_>;

    /// Sample the chain lengths of about this many tuples per series sample
    /// (`bench::RunOptions::chain_sample`).
    fn chain_sample(&self) -> Option<usize> {
        None
    }

    /// The memory guard: stop the run with an error above this many live version bytes.
    fn max_version_bytes(&self) -> Option<u64> {
        None
    }

    /// What this run's workload is, for the report's fidelity block.
    fn fidelity(&self) -> Vec<(&'static str, Json)>;

    /// What the workers observed (valid once they are all dropped): outcome counts.
    fn results(&self) -> Vec<(&'static str, Json)> {
        Vec::new()
    }

    /// Checks the workload's invariant after the run (workers dropped). `Ok` describes what
    /// held, `Err` what did not; `None` when the workload has no check.
    fn check(&self, _db: &Database) -> Option<myriad::Result<Result<String, String>>> {
        None
    }
}

/// The first `RETURN` value of procedure `name` as an integer.
pub(crate) fn returned_int(name: &str, out: &[Value]) -> myriad::Result<i64> {
    out.first()
        .and_then(Value::as_i64)
        .ok_or_else(|| Error::ProcedureArguments {
            procedure: name.to_string(),
            message: format!("expected to RETURN an integer, returned {out:?}"),
        })
}

/// How a workload's procedures run, for its fidelity block (`--procedures`): "compiled to
/// closures", "interpreted", or both counts when they differ.
pub(crate) fn procedures_run(procs: &[std::sync::Arc<myriad::procedure::Procedure>]) -> String {
    let compiled = procs.iter().filter(|p| p.is_compiled()).count();
    match compiled {
        n if n == procs.len() => "compiled to closures".into(),
        0 => "interpreted".into(),
        n => format!(
            "{n} of {} compiled to closures, the rest interpreted",
            procs.len()
        ),
    }
}

/// The single integer a one-row aggregate query (`SELECT count(*) ...`) returns.
pub(crate) fn query_int(db: &Database, sql: &str) -> myriad::Result<i64> {
    let out = myriad::sql::Session::new(db).execute(sql)?;
    match out.last() {
        Some(myriad::sql::Output::Rows { rows, .. }) => rows
            .first()
            .and_then(|r| r.first())
            .and_then(Value::as_i64)
            .ok_or_else(|| Error::InvalidConfig(format!("`{sql}` returned no integer"))),
        _ => Err(Error::InvalidConfig(format!("`{sql}` returned no rows"))),
    }
}

/// Runs `txns` transactions of the workload `make` creates, on one thread, once with
/// procedures compiled and once interpreted (two databases, same seeds), and checks that
/// every procedure of the workload is compiled in the first run, that each transaction ends
/// the same way (committed, or the same error) and that every table holds the same rows
/// after.
#[cfg(test)]
pub(crate) fn assert_compiled_matches_interpreted<W: Workload>(
    config: myriad::Config,
    make: impl Fn(&Database) -> W,
    txns: usize,
) {
    use myriad::ProcedureExec;
    let run = |mode: ProcedureExec| {
        let db = Database::open(config.clone().procedures(mode)).unwrap();
        let w = make(&db);
        w.load(&db, 1, 7, None).unwrap();
        let mut names = db.procedure_names();
        names.sort();
        let compiled: Vec<(String, bool)> = names
            .iter()
            .map(|n| (n.clone(), db.procedure(n).unwrap().is_compiled()))
            .collect();
        let mut worker = w.worker(0, 11);
        let outcomes: Vec<(usize, Result<(), String>)> = (0..txns)
            .map(|_| {
                let ty = worker.next_txn();
                (ty, worker.attempt(&db).map(drop).map_err(|e| e.to_string()))
            })
            .collect();
        drop(worker);
        let mut tables = db.table_names();
        tables.sort();
        let mut tx = db.begin().unwrap();
        let dumps: Vec<(String, Vec<String>)> = tables
            .iter()
            .map(|name| {
                let mut rows = Vec::new();
                tx.scan_table(&db.table(name).unwrap(), |r| {
                    rows.push(format!("{:?}", r.to_row()));
                    true
                })
                .unwrap();
                rows.sort();
                (name.clone(), rows)
            })
            .collect();
        tx.commit().unwrap();
        (compiled, outcomes, dumps)
    };
    let (ci, oi, di) = run(ProcedureExec::Interpreted);
    let (cc, oc, dc) = run(ProcedureExec::Compiled);
    assert!(!cc.is_empty(), "the workload has no procedures");
    assert!(cc.iter().all(|(_, c)| *c), "not all compiled: {cc:?}");
    assert!(
        ci.iter().all(|(_, c)| !c),
        "compiled under Interpreted: {ci:?}"
    );
    assert!(
        oi.iter().any(|(_, r)| r.is_ok()),
        "nothing committed: {oi:?}"
    );
    for (k, (i, c)) in oi.iter().zip(&oc).enumerate() {
        assert_eq!(i, c, "transaction {k}");
    }
    for ((name, i), (_, c)) in di.iter().zip(&dc) {
        assert!(i == c, "table {name} differs after the run");
    }
}
