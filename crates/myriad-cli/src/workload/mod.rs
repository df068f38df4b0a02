//! Workloads: what a benchmark transaction does. A workload creates its tables, loads them, and
//! hands the runner (`bench`) one `Worker` per thread; the runner owns threads, timing, retries
//! and reporting, so every workload is measured the same way.

pub mod rng;
pub mod tpcc;
pub mod ycsb;
pub mod zipf;

use myriad::Database;

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

    /// Runs the drawn transaction once and commits it. `Error::SerializationFailure` means it
    /// aborted and may be retried; any other error is fatal to the run.
    fn attempt(&mut self, db: &Database) -> myriad::Result<()>;

    /// Whether this worker's commits count in the run's committed total and throughput
    /// (false for a background query thread such as TPC-C's StockScan, whose latency is
    /// still recorded under its own transaction type).
    fn counts_as_throughput(&self) -> bool {
        true
    }
}
