//! Workloads: what a benchmark transaction does. A workload creates its tables, loads them, and
//! hands the runner (`bench`) one `Worker` per thread; the runner owns threads, timing, retries
//! and reporting, so every workload is measured the same way.

pub mod rng;
pub mod ycsb;
pub mod zipf;

use myriad::Database;

/// One thread's source of transactions.
///
/// The runner calls `next_txn` once per transaction, then `attempt` until it commits: the
/// inputs drawn by `next_txn` are kept, so a retry after an abort is the same transaction.
pub trait Worker {
    /// Draws the next transaction's inputs; returns its type (an index into the workload's
    /// transaction-type names).
    fn next_txn(&mut self) -> usize;

    /// Runs the drawn transaction once and commits it. `Error::SerializationFailure` means it
    /// aborted and may be retried; any other error is fatal to the run.
    fn attempt(&mut self, db: &Database) -> myriad::Result<()>;
}
