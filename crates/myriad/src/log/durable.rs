//! The state of an open durable directory (`DurableState`: its id, lock, catalog and log
//! manager), which the engine holds, and what opening it found (`RecoveryReport`). Recovery
//! (`recovery/`) fills both when it opens the directory.

use super::catalog::{Catalog, Record, TableRecord};
use super::identity::DbId;
use super::LogManager;
use crate::error::Result;
use crate::schema::TableSchema;
use parking_lot::Mutex;
use std::fs::File;
use std::path::PathBuf;
use std::sync::atomic::AtomicU32;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

/// State of a durable database's directory.
pub(crate) struct DurableState {
    pub dir: PathBuf,
    /// The database's id (`IDENTITY`), stamped into every file it writes.
    pub id: DbId,
    _lock: Option<File>,
    /// `None` while recovery recreates the tables (their records are already in it).
    pub(crate) catalog: Mutex<Option<Catalog>>,
    pub checkpoint_lock: Mutex<()>,
    pub report: OnceLock<RecoveryReport>,
    /// Procedure definitions in the catalog so far (the next one gets this number).
    pub procedure_definitions: AtomicU32,
    /// The log manager (also `Shared::log`), for the catalog's length in durable points.
    pub(crate) log: OnceLock<Arc<LogManager>>,
}

impl DurableState {
    /// The state of `dir` (database `id`), whose lock is `lock`, before recovery.
    pub(crate) fn new(dir: PathBuf, id: DbId, lock: Option<File>) -> DurableState {
        DurableState {
            dir,
            id,
            _lock: lock,
            catalog: Mutex::new(None),
            checkpoint_lock: Mutex::new(()),
            report: OnceLock::new(),
            procedure_definitions: AtomicU32::new(0),
            log: OnceLock::new(),
        }
    }

    pub(crate) fn log_table(
        &self,
        id: u32,
        replaces: Option<u32>,
        schema: &TableSchema,
    ) -> Result<()> {
        self.log_catalog(&Record::Table(TableRecord {
            id,
            replaces,
            schema: schema.clone(),
        }))
        .map(drop)
    }

    /// Makes a catalog change durable; false (nothing written) while recovery replays the
    /// catalog. The next durable-point record names the catalog's new length.
    pub(crate) fn log_catalog(&self, r: &Record) -> Result<bool> {
        match self.catalog.lock().as_mut() {
            Some(c) => {
                let len = c.append(r)?;
                if let Some(log) = self.log.get() {
                    log.control().set_catalog_bytes(len);
                }
                Ok(true)
            }
            None => Ok(false),
        }
    }
}

/// What opening a data directory found and did, with the time of each phase.
#[derive(Clone, Debug, Default)]
pub struct RecoveryReport {
    /// The replay scheme used (`auto` resolved).
    pub scheme: String,
    /// Threads recovery used (`Config::recovery_threads`).
    pub threads: usize,
    /// Timestamp of the checkpoint recovery started from, if any.
    pub checkpoint_ts: Option<u64>,
    /// Rows the checkpoint held.
    pub checkpoint_rows: u64,
    /// The persistent epoch: every commit of this epoch or earlier was recovered (epoch
    /// manager's log files).
    pub persistent_epoch: u64,
    /// The durable LSN: every commit ending at or below it was recovered (ERMIA segments).
    pub durable_lsn: u64,
    /// Log files (or ERMIA segments) read.
    pub log_files: usize,
    /// Their bytes.
    pub log_bytes: u64,
    /// Transaction records read from intact log blocks.
    pub log_records: u64,
    /// Of those, records recovered (epoch ≤ persistent epoch, newer than the checkpoint).
    pub records_replayed: u64,
    /// Of the recovered records, procedure calls (command logging).
    pub calls_replayed: u64,
    /// Of the recovered records, physical ones (tuple ids and whole rows).
    pub physical_replayed: u64,
    /// Records past the persistent epoch or durable LSN: commits never acknowledged.
    pub records_not_durable: u64,
    /// ERMIA skip records: log space reserved by transactions that then aborted.
    pub skip_records: u64,
    /// Bytes of damaged or torn log tails dropped (after the durable position).
    pub bytes_dropped: u64,
    /// One line per dropped tail: file, offset and why.
    pub dropped: Vec<String>,
    /// What recovery worked around without losing a commit (e.g. a durable-point file was
    /// missing and its mirror was used).
    pub notes: Vec<String>,
    /// Tables recreated from the catalog.
    pub tables: usize,
    /// Rows in the recovered database.
    pub rows: u64,
    /// Reading the checkpoint's files and inserting their rows (indexes built on the way).
    pub checkpoint_load: Duration,
    /// Reading and checking the log files.
    pub log_load: Duration,
    /// Applying the log records.
    pub replay: Duration,
    /// Rebuilding the indexes (PLR only; the other schemes build them on the way).
    pub index_build: Duration,
    /// PACMAN only, parts of `replay`: the static analysis (slices and blocks of every
    /// procedure definition).
    pub static_analysis: Duration,
    /// PACMAN only, summed over the workers: the dynamic analysis (decoding calls, cutting
    /// batches, footprints and their queues).
    pub dynamic_analysis: Duration,
    /// PACMAN only, summed over the workers: time a worker waited for ready work.
    pub schedule_wait: Duration,
    /// PACMAN only, summed over the workers: time spent running pieces.
    pub execution: Duration,
    /// PACMAN only: log batches and pieces run.
    pub batches: u64,
    /// PACMAN only: pieces run.
    pub pieces: u64,
    /// PACMAN only: piece-sets whose pieces were released to run while a piece-set of an
    /// earlier batch was not done yet (pipelined mode overlapping batches; always 0 in sync
    /// mode).
    pub sets_overlapped: u64,
    /// Writing the checkpoint that closes recovery.
    pub checkpoint_write: Duration,
}

impl RecoveryReport {
    /// Total time of the phases.
    pub fn total(&self) -> Duration {
        self.checkpoint_load
            + self.log_load
            + self.replay
            + self.index_build
            + self.checkpoint_write
    }
}
