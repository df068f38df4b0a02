//! Workloads: what a benchmark transaction does. A workload creates its tables, loads them, and
//! hands the runner (`bench`) one `Worker` per thread; the runner owns threads, timing, retries
//! and reporting, so every workload is measured the same way.

pub mod rng;
pub mod smallbank;
pub mod tatp;
pub mod ycsb;
pub mod zipf;

use indicatif::ProgressBar;
use myriad::{Database, Error, Value};
use serde_json::Value as Json;

/// One thread's source of transactions.
///
/// The runner calls `next_txn` once per transaction, then `attempt` until it commits: the
/// inputs drawn by `next_txn` are kept, so a retry after an abort is the same transaction.
pub trait Worker {
    /// Draws the next transaction's inputs; returns its type (an index into the workload's
    /// transaction-type names).
    fn next_txn(&mut self) -> usize;

    /// Runs the drawn transaction once and commits it. `Error::SerializationFailure` means it
    /// aborted and may be retried; a user abort (`Error::ProcedureAbort`, or
    /// `SerializationFailure(UserAbort)`) is counted and not retried; any other error is fatal
    /// to the run.
    fn attempt(&mut self, db: &Database) -> myriad::Result<()>;
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

    /// The worker of thread `thread`.
    fn worker(&self, thread: usize, seed: u64) -> Self::Worker<'_>;

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
