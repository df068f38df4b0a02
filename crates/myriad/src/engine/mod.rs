//! The `Database`, the engine's facade: tables and indexes (DDL), transactions, procedures
//! (`procedures.rs`), statistics and garbage collection. It owns the shared state a
//! transaction runs in (`shared.rs`: configuration, clock, transaction table, catalog,
//! history, log) and what the layers above that state keep per engine: the protocols' state
//! (`cc::EngineCc`), the slots' reusable buffers (`txn::SlotLocals`) and the procedure
//! registry. All engine state hangs off this value, so several engines can live in one
//! process.

mod procedures;

use crate::config::Config;
use crate::error::{AbortReason, Error, Result};
use crate::history::TxnRecord;
use crate::log::CommitTicket;
use crate::schema::{TableBuilder, TableSchema};
use crate::shared::Shared;
use crate::storage::table::{BUILDING, LIVE, REPLACED};
use crate::storage::{Table, TableRef};
use crate::timestamp::Timestamp;
use crate::txn::{SlotLocals, Transaction, TxnOptions};
use parking_lot::Mutex;
use std::cell::Cell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

pub use crate::shared::MAX_TABLES;

thread_local! {
    /// The transaction-table slot this thread used last (so it usually gets it back at once).
    static SLOT_HINT: Cell<usize> = const { Cell::new(usize::MAX) };
}

/// An open in-memory database.
pub struct Database {
    /// Registered stored procedures by lower-case name (read once per `Database::call`;
    /// callers that keep the `Arc<Procedure>` never touch it).
    pub(crate) procedures: std::sync::RwLock<HashMap<String, Arc<crate::procedure::Procedure>>>,
    /// The protocol's per-engine state (`cc::EngineCc`: Silo's global epoch, `mv2pl-wait`'s
    /// range locks).
    pub(crate) cc: crate::cc::EngineCc,
    /// Each transaction-table slot's reusable buffers, touched only by the slot's owner.
    pub(crate) locals: SlotLocals,
    /// Serialises `create_index` calls (held while it waits for transactions, so that
    /// table lookups, which take the names lock, are not blocked meanwhile).
    ddl: Mutex<()>,
    /// The state transactions run in (`shared.rs`).
    pub(crate) shared: Shared,
}

/// Engine-wide counters, summed over the transaction table.
#[derive(Clone, Debug, Default)]
pub struct Stats {
    /// Transactions committed.
    pub committed: u64,
    /// Aborts by reason, in `AbortReason::ALL` order.
    pub aborted: [u64; AbortReason::ALL.len()],
    /// Atomic read-modify-writes on engine-global words (timestamp counter, tuple-id counters;
    /// under `partial-order` also the group counters, and the closes and floor waits
    /// transactions' threads make).
    pub global_rmw: u64,
    /// Atomic read-modify-writes on per-record words (write locks, chain-head installs).
    pub record_rmw: u64,
    /// Multi-version update commits that drew an end timestamp from the source (those that
    /// then failed validation included; not ERMIA's log reservations, nor MVTO's begin
    /// timestamps).
    pub end_ts_draws: u64,
    /// Increments of the commit timestamp: one per `end_ts_draws` for the counters
    /// (`global-counter`, `locked-counter`); `partial-order`: the closes of its open commit
    /// timestamp (`ts_increments_by_cause`), so updaters per increment is the group size.
    pub ts_increments: u64,
    /// `partial-order`: the increments by cause — conflict aborts, begins with a floor,
    /// ticks (zero for the counters).
    pub ts_increments_by_cause: [u64; 3],
    /// `partial-order`: the visibility lag `CTs − BTs` when the stats were taken (open and
    /// incomplete commit timestamps a new reader does not see; zero for the counters).
    pub ts_visibility_lag: u64,
    /// `partial-order`: sampled commits whose visibility lag was measured (one at a time:
    /// the first released after the previous sample became readable; zero for the
    /// counters, whose commits are readable once stamped).
    pub ts_lag_samples: u64,
    /// `partial-order`: the sum of `CTs − BTs` seen by each sampled commit at its release.
    pub ts_lag_gap_sum: u64,
    /// `partial-order`: the sampled times from a commit's release to `BTs` passing it
    /// (readable by a new begin), as counts per histogram bucket (`ts_lag_us`); empty for
    /// the counters.
    pub ts_lag_hist: Vec<u64>,
    /// Versions allocated (new versions written).
    pub versions_allocated: u64,
    /// Bytes of those versions (blocks, before-images, non-inline data).
    pub version_bytes_allocated: u64,
    /// Versions freed by garbage collection.
    pub versions_reclaimed: u64,
    /// Bytes of those versions.
    pub version_bytes_reclaimed: u64,
    /// Time spent collecting garbage, in nanoseconds (summed over threads).
    pub gc_ns: u64,
    /// Field reads that waited for a Preparing writer's outcome (protocols without commit
    /// dependencies, writes, and `Config::commit_dependencies(false)`).
    pub preparing_waits: u64,
    /// Commit dependencies taken: speculative reads and ignores of Preparing writers'
    /// versions (Hekaton §2.7).
    pub commit_deps: u64,
    /// Transactions that reached commit (or abort) with a dependency unresolved and waited.
    pub commit_dep_waits: u64,
    /// `hybrid`: transactions run under 2PL because they retried a validation failure.
    pub hybrid_2pl: u64,
    /// `healing`: heals made — re-executions of a stored-procedure call under the locks its
    /// validation holds, instead of an abort (`cc/healing.rs`).
    pub heals: u64,
    /// `healing` and `mvocc`: rows validation found replaced since they were read, but only
    /// in columns the call does not read (thesis §3.4.5's false invalidations,
    /// `Config::column_check`): under `healing` taken as read in their current record (a
    /// write to one rebased on it), not healed; under `mvocc` valid reads, not a
    /// `read_validation` abort.
    pub false_invalidations: u64,
    /// `healing`: primary-key lookups made by heals that the access cache answered with the
    /// tuple the call's earlier lookup of the same key found (`Config::heal_access_cache`),
    /// and those that went to the index (a key the call had not looked up, or the cache off).
    pub heal_cache_hits: u64,
    /// `healing`: primary-key lookups made by heals that went to the index.
    pub heal_index_lookups: u64,
    /// `healing`: rows another transaction was still inserting that a healable call's read
    /// phase read past as absent (spec A.4 R4; its commit re-checks the key and heals if the
    /// insert committed meanwhile).
    pub heal_reads_past_inserts: u64,
    /// `healing`: point `UPDATE`s of a compiled procedure that a heal took as done from the
    /// access cache — same inputs, row still in the record the first run replaced, so the
    /// buffered version is kept, nothing looked up or built again (spec A.6's memoized
    /// re-execution) — and those a heal ran again (an input or the row changed, or the
    /// UPDATE was not reached before).
    pub heal_ops_reused: u64,
    /// (See `heal_ops_reused`.)
    pub heal_ops_rerun: u64,
    /// `healing`: calls whose commit locked the rows they write, validated the rows they only
    /// read as OCC does (no lock; a row changed only in columns the call does not read
    /// passes), found one stale or a range changed, released its locks and took every lock
    /// in the thesis's order (healing what is still stale). A call whose reads are current
    /// takes no lock on a row it only read; one that is not costs one validation more.
    pub heal_relocks: u64,
    /// `ermia-ssi`: would-be pivots aborted at pre-commit because they overwrote a version
    /// an in-flight transaction read (safe retry, `Config::ermia_safe_retry`).
    pub ssi_safe_retries: u64,
    /// `ermia-ssi`: reads of old versions by READ ONLY transactions left out of the read set
    /// (`Config::ermia_old_read_age`).
    pub ssi_untracked_reads: u64,
    /// `ermia-ssi`: aborts the old-version read optimisation caused (a reader that met a
    /// committed overwriter with s1 set, a writer that met a bstamp at or above its s1).
    pub ssi_old_read_aborts: u64,
    /// GC `coop`: versions readers cut from the chains they walked (a part of
    /// `versions_reclaimed`; the rest is the background full passes').
    pub versions_cut_by_readers: u64,
    /// GC `dead-zone`: versions spliced out of the middle of chains by vDriver's dead-zone
    /// test (a part of `versions_reclaimed`; the rest was cut below the watermark).
    pub versions_pruned_dead_zone: u64,
    /// Version storage `siro` (vDriver §3.3), per class `[hot, cold, LLT]`: versions
    /// relocated from their record into a segment of the class.
    pub siro_relocated: [u64; 3],
    /// `siro`: versions dropped from their record slot without being copied to a segment
    /// (vDriver's 1st prune): dead by the dead zones when a writer took the slot, or cut by
    /// the dead-zone pruner while they still held it.
    pub siro_pruned_first: u64,
    /// `siro`, per class: relocated versions dropped with their segment when it was sealed
    /// (full) and already dead (vDriver's 2nd prune, at "hardening").
    pub siro_pruned_seal: [u64; 3],
    /// `siro`, per class: relocated versions dropped later, with a sealed segment the
    /// cutter found dead (vDriver's vCutter).
    pub siro_cut: [u64; 3],
    /// `siro`, per class: segments the cutter freed, and the nanoseconds from each one's
    /// seal to its cut, summed (vDriver Fig. 16's cut delay: divide by the count).
    pub siro_segments_cut: [u64; 3],
    /// `siro`, per class: see `siro_segments_cut`.
    pub siro_cut_delay_ns: [u64; 3],
    /// `siro`: bytes of the segments allocated, and of those freed (both also in the
    /// version byte counts; `siro_segment_bytes_live`).
    pub siro_segment_bytes: u64,
    /// `siro`: see `siro_segment_bytes`.
    pub siro_segment_bytes_freed: u64,
    /// In-place (`time-travel`, `delta`) and `siro` storage: bytes of the tuples' master
    /// records, one per tuple for the table's life, allocated by transactions (counted in
    /// `live_version_bytes`; masters physical-log recovery places directly are not, as their
    /// version blocks are not).
    pub record_bytes: u64,
    /// Acquisitions of memory-space locks (`Config::memory_spaces`; allocations and frees).
    /// Process-wide: spaces are shared by every database of the process.
    pub space_locks: u64,
    /// Bytes memory spaces have taken from the general allocator (process-wide; never given
    /// back).
    pub space_reserved_bytes: u64,
}

impl Stats {
    /// `partial-order`: the `q`-quantile (0..=1) of the visibility lag in microseconds over
    /// the samples taken between `earlier` and these stats (the lower edge of its histogram
    /// bucket: within 1/8 below the sampled value); `None` without samples.
    pub fn ts_lag_us(&self, earlier: &Stats, q: f64) -> Option<f64> {
        let counts: Vec<u64> = self
            .ts_lag_hist
            .iter()
            .enumerate()
            .map(|(i, &n)| n.saturating_sub(earlier.ts_lag_hist.get(i).copied().unwrap_or(0)))
            .collect();
        let total: u64 = counts.iter().sum();
        if total == 0 {
            return None;
        }
        let rank = ((q.clamp(0.0, 1.0) * total as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (i, n) in counts.iter().enumerate() {
            seen += n;
            if seen >= rank {
                return Some(crate::timestamp::lag_bucket_floor(i) as f64 / 1000.0);
            }
        }
        None
    }
    /// Total aborts.
    pub fn aborted_total(&self) -> u64 {
        self.aborted.iter().sum()
    }
    /// Aborts for `reason`.
    pub fn aborted(&self, reason: AbortReason) -> u64 {
        self.aborted[reason.index()]
    }
    /// Versions allocated and not yet reclaimed.
    pub fn live_versions(&self) -> u64 {
        self.versions_allocated
            .saturating_sub(self.versions_reclaimed)
    }
    /// `siro`: bytes of the segments allocated and not yet freed.
    pub fn siro_segment_bytes_live(&self) -> u64 {
        self.siro_segment_bytes
            .saturating_sub(self.siro_segment_bytes_freed)
    }
    /// Bytes holding versions: version blocks (with their images and blobs) allocated and
    /// not yet reclaimed, `siro` segments among them, plus `record_bytes` (the master
    /// records of in-place and `siro` storage hold the newest version's row, or the newest
    /// two: versions too, where append storage counts them as version blocks).
    pub fn live_version_bytes(&self) -> u64 {
        self.version_bytes_allocated
            .saturating_sub(self.version_bytes_reclaimed)
            + self.record_bytes
    }
}

/// Version-chain lengths over all tuples of all tables (a full walk; not for hot paths).
#[derive(Clone, Debug, Default)]
pub struct ChainStats {
    /// Tuples walked (every tuple id in use).
    pub tuples: u64,
    /// The longest chain, in versions.
    pub max_chain_len: u64,
    /// `histogram[i]` = tuples whose chain has `i` versions (last bucket: that many or more).
    pub histogram: Vec<u64>,
}

/// Adds one slot's (or vacuum thread's) `siro` counters to `s`: segment bytes count as
/// version bytes, sealed-list locks as global read-modify-writes.
fn add_siro(s: &mut Stats, st: &crate::txn::table::SlotStats) {
    let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
    let c = &st.siro;
    for k in 0..3 {
        s.siro_relocated[k] += l(&c.relocated[k]);
        s.siro_pruned_seal[k] += l(&c.pruned_seal[k]);
        s.siro_cut[k] += l(&c.cut[k]);
        s.siro_segments_cut[k] += l(&c.segments_cut[k]);
        s.siro_cut_delay_ns[k] += l(&c.cut_delay_ns[k]);
    }
    s.siro_pruned_first += l(&c.pruned_first);
    s.siro_segment_bytes += l(&c.segment_bytes);
    s.siro_segment_bytes_freed += l(&c.segment_bytes_freed);
    s.version_bytes_allocated += l(&c.segment_bytes);
    s.version_bytes_reclaimed += l(&c.segment_bytes_freed);
    s.global_rmw += l(&c.seal_locks);
}

impl Database {
    /// Starts the background threads of GC `vacuum` and `coop` (no-op for the others).
    pub(crate) fn start_gc_threads(&self) -> Result<()> {
        self.shared.start_gc_threads()
    }

    /// What stopped a background thread of this database, oldest first: a vacuum thread
    /// (GC `vacuum`, `coop`, `dead-zone`) or the partial-order tick that panicked. Empty
    /// while all run. The database goes on without the thread — commits and reads stay
    /// correct, but without its vacuum threads version memory is no longer reclaimed, and
    /// without the tick a partial-order commit becomes readable only when a conflict or a
    /// floor closes its group — so a long-running application should check it (the
    /// benchmark fails its run on any). A log thread's failure is `Error::LogFailed` on
    /// every later commit instead.
    pub fn background_failures(&self) -> Vec<Error> {
        self.shared.failures.lock().clone()
    }

    /// The engine without a log (the recovery path attaches one when it is done).
    pub(crate) fn new_in_memory(
        config: Config,
        durable: Option<crate::log::durable::DurableState>,
    ) -> Database {
        let locals = SlotLocals::new(config.max_concurrent_txns);
        Database {
            procedures: Default::default(),
            cc: crate::cc::EngineCc::new(),
            locals,
            ddl: Mutex::new(()),
            shared: Shared::new(config, durable),
        }
    }

    /// Waits until the commit of `ticket` is durable. Memory-only databases return at once.
    /// Fails with `Error::LogFailed` if the log failed before the commit became durable.
    pub fn wait_durable(&self, ticket: CommitTicket) -> Result<()> {
        self.shared.wait_durable(ticket)
    }

    /// True once the commit of `ticket` is durable (always, for a memory-only database).
    pub fn is_durable(&self, ticket: CommitTicket) -> bool {
        self.shared.is_durable(ticket)
    }

    /// Log counters (`None` for a memory-only database).
    pub fn log_stats(&self) -> Option<crate::log::LogStats> {
        self.shared.log.get().map(|l| l.control().stats())
    }

    /// Makes a DDL change durable before it takes effect (a no-op for memory-only databases
    /// and while recovery recreates the tables).
    fn log_ddl(&self, id: usize, replaces: Option<u32>, schema: &TableSchema) -> Result<()> {
        match &self.shared.durable {
            Some(d) => d.log_table(id as u32, replaces, schema),
            None => Ok(()),
        }
    }

    /// The configuration this database was opened with.
    pub fn config(&self) -> &Config {
        &self.shared.config
    }

    /// Creates a table.
    pub fn create_table(&self, schema: TableBuilder) -> Result<TableRef> {
        self.create_table_from(schema.build()?)
    }

    /// Creates a table from a built schema.
    pub fn create_table_from(&self, schema: TableSchema) -> Result<TableRef> {
        let mut names = self.shared.names.lock();
        if names.contains_key(&schema.name) {
            return Err(Error::AlreadyExists(format!("table `{}`", schema.name)));
        }
        self.check_index_pointers(&schema)?;
        let id = self.free_table_id()?;
        self.log_ddl(id, None, &schema)?;
        let t = self.new_table(id as u32, schema);
        if self.shared.tables[id].set(t.clone()).is_err() {
            return Err(Error::AlreadyExists(format!("table id {id}")));
        }
        names.insert(t.schema.name.clone(), id as u32);
        Ok(t)
    }

    /// A table of this database: its versions carry the protocol's words.
    fn new_table(&self, id: u32, schema: TableSchema) -> TableRef {
        Arc::new(Table::new(
            id,
            self.shared.id,
            schema,
            self.shared.config.protocol.version_ext(),
            self.shared.config.storage,
            self.shared.config.gc.marks_dirty(),
            self.shared.config.index_pointers,
            self.shared.config.non_inline,
            self.shared.siro.clone(),
        ))
    }

    /// Index pointers `logical-pk` and `physical` are built for ordered secondary indexes
    /// only: a hash index's entries hold a fixed-width value, not a primary key or the
    /// address of a version next to the key.
    fn check_index_pointers(&self, schema: &TableSchema) -> Result<()> {
        let p = self.shared.config.index_pointers;
        if p == crate::config::IndexPointers::LogicalTid {
            return Ok(());
        }
        match schema.indexes[1..]
            .iter()
            .find(|d| d.kind == crate::schema::IndexKind::Hash)
        {
            Some(d) => Err(Error::Unsupported(format!(
                "hash secondary index `{}` on `{}` with index pointers `{p}`, which are \
                 built for ordered (B-tree) secondary indexes only",
                d.name, schema.name
            ))),
            None => Ok(()),
        }
    }

    /// Recreates a table under the id it had before a restart (recovery; no catalog write).
    pub(crate) fn restore_table(&self, id: u32, schema: TableSchema) -> Result<TableRef> {
        self.check_index_pointers(&schema)?;
        let mut names = self.shared.names.lock();
        let t = self.new_table(id, schema);
        if (id as usize) >= MAX_TABLES || self.shared.tables[id as usize].set(t.clone()).is_err() {
            return Err(Error::AlreadyExists(format!("table id {id}")));
        }
        names.insert(t.schema.name.clone(), id);
        Ok(t)
    }

    /// Adds a secondary index to a table, with or without rows. The table is replaced by a
    /// copy with the index: look it up again (`Database::table`); the old handle's
    /// operations fail with `UnknownTable`.
    ///
    /// The build is offline for this table: from the moment it starts, transactions that
    /// touch the table fail with `Error::Busy`; it waits (up to `Config::ddl_wait`) for every
    /// transaction already running to finish, then moves the version chains into the copy and
    /// builds all its indexes from them (a unique index first checks that no two live rows
    /// share a key: `DuplicateKey`). Other tables are not affected. A transaction still open
    /// after that wait (this thread's own included) makes it fail with `Busy` and leave the
    /// table as it was. A table a registered procedure uses cannot be changed (its compiled
    /// plans hold the handle).
    pub fn create_index(
        &self,
        table: &str,
        name: &str,
        columns: &[&str],
        kind: crate::schema::IndexKind,
        unique: bool,
    ) -> Result<TableRef> {
        let _ddl = self.ddl.lock();
        let old = self.table(table)?;
        let used_by: Vec<String> = self
            .procedures
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .filter(|p| p.ops().iter().any(|o| o.table.as_deref() == Some(table)))
            .map(|p| p.name().to_string())
            .collect();
        if !used_by.is_empty() {
            return Err(Error::Unsupported(format!(
                "CREATE INDEX on `{table}`, which procedure(s) {} use: create indexes before the procedures",
                used_by.join(", ")
            )));
        }
        let schema = old
            .schema
            .to_builder()
            .index(name, columns, kind, unique)
            .build()?;
        if old.schema.index_position(name).is_ok() {
            return Err(Error::AlreadyExists(format!("index `{name}` on `{table}`")));
        }
        self.check_index_pointers(&schema)?;
        let new_idx = schema.indexes.len() - 1;
        old.state.store(BUILDING, Ordering::SeqCst);
        let checked = self.quiesce(table).and_then(|()| {
            if unique && old.has_duplicate_key(&schema, new_idx) {
                return Err(Error::DuplicateKey {
                    table: table.to_string(),
                    index: name.to_string(),
                });
            }
            Ok(())
        });
        let mut names = self.shared.names.lock();
        let id = match checked.and_then(|()| self.free_table_id()) {
            Ok(id) => id,
            Err(e) => {
                old.state.store(LIVE, Ordering::SeqCst);
                return Err(e);
            }
        };
        let t = self.new_table(id as u32, schema);
        t.take_rows(&old);
        t.inherit_scan_ts(&old);
        t.build_indexes();
        if let Err(e) = self.log_ddl(id, Some(old.id), &t.schema) {
            old.take_rows(&t);
            old.state.store(LIVE, Ordering::SeqCst);
            return Err(e);
        }
        if self.shared.tables[id].set(t.clone()).is_err() {
            old.take_rows(&t);
            old.state.store(LIVE, Ordering::SeqCst);
            return Err(Error::AlreadyExists(format!("table id {id}")));
        }
        // The old id keeps its slot (ids are never reused); the name now maps to the copy.
        names.insert(table.to_string(), id as u32);
        old.state.store(REPLACED, Ordering::SeqCst);
        Ok(t)
    }

    /// Waits until every transaction that was running when the caller marked `table`
    /// BUILDING has ended (later ones cannot touch it), or fails with `Busy` after
    /// `Config::ddl_wait`.
    fn quiesce(&self, table: &str) -> Result<()> {
        let running: Vec<(usize, u64)> = self
            .shared
            .txns
            .slots()
            .enumerate()
            .filter(|(_, s)| s.in_use.load(Ordering::SeqCst))
            .map(|(i, s)| (i, s.txn_id.load(Ordering::SeqCst)))
            .collect();
        let still = |&(i, id): &(usize, u64)| {
            let s = self.shared.txns.slot(i);
            s.in_use.load(Ordering::SeqCst) && s.txn_id.load(Ordering::SeqCst) == id
        };
        let wait = self.shared.config.ddl_wait;
        let deadline = std::time::Instant::now() + wait;
        loop {
            let n = running.iter().filter(|r| still(r)).count();
            if n == 0 {
                return Ok(());
            }
            if std::time::Instant::now() >= deadline {
                return Err(Error::Busy(format!(
                    "CREATE INDEX on `{table}` waited {wait:?} for {n} open transaction(s) to \
                     finish (one may be this thread's own); nothing was changed"
                )));
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// The first unused table id (ids are never reused: a table replaced by
    /// `create_index` keeps its slot). Called with the names lock held.
    fn free_table_id(&self) -> Result<usize> {
        self.shared
            .tables
            .iter()
            .position(|s| s.get().is_none())
            .ok_or_else(|| {
                Error::InvalidSchema(format!(
                    "more than {MAX_TABLES} tables (each CREATE INDEX also uses one)"
                ))
            })
    }

    /// The table named `name`.
    pub fn table(&self, name: &str) -> Result<TableRef> {
        self.shared.table(name)
    }

    /// Names of all tables.
    pub fn table_names(&self) -> Vec<String> {
        let mut v: Vec<String> = self.shared.names.lock().keys().cloned().collect();
        v.sort();
        v
    }

    /// Begins a transaction at the configured default isolation level.
    pub fn begin(&self) -> Result<Transaction<'_>> {
        self.begin_with(TxnOptions {
            isolation: self.shared.config.isolation,
            read_only: false,
        })
    }

    /// Begins a transaction with explicit options.
    pub fn begin_with(&self, opts: TxnOptions) -> Result<Transaction<'_>> {
        self.shared.config.check_isolation(opts.isolation)?;
        // `hybrid` is resolved to `occ` or `2pl` by `cc::begin`, in the slot.
        self.start_txn(
            opts,
            self.shared.config.protocol,
            crate::cc::mvto::SNAPSHOT_WAIT,
        )
    }

    /// Begins a transaction that sees every commit whose commit timestamp is at or below
    /// `floor` (a timestamp `Transaction::commit_returning_ts` or `CommitTicket::commit_ts`
    /// returned): request-based avoidance of the HISTORICAL READ anomaly of `partial-order`
    /// timestamps, where a plain `begin` may read a snapshot older than a commit that
    /// returned before it. Under `partial-order` it may close the open commit timestamp
    /// and waits until every commit up to `floor` is complete; the counters' snapshots
    /// already hold every returned commit. `Error::FloorAhead` for a floor no commit returned.
    pub fn begin_after(&self, opts: TxnOptions, floor: Timestamp) -> Result<Transaction<'_>> {
        self.shared.config.check_isolation(opts.isolation)?;
        self.shared.floor(floor)?;
        self.begin_with(opts)
    }

    /// Waits until a transaction begun now sees every commit whose commit timestamp is at
    /// or below `floor`: what `begin_after` waits for before it begins. Under the counters
    /// every returned commit is already seen, so it returns at once; under `partial-order`
    /// it may close the open commit timestamp and waits for the groups up to `floor` (and,
    /// durable, for their log round). `Error::FloorAhead` for a floor no commit returned.
    pub fn wait_for_floor(&self, floor: Timestamp) -> Result<()> {
        self.shared.floor(floor)
    }

    /// The floor a retry of this thread's last failed transaction should begin at
    /// (`begin_after`, or `wait_for_floor` then `begin`): the commit timestamp of the writer
    /// it met in a write-write conflict, when that writer had one (committed, or committing).
    /// Without it a retry under `partial-order` may begin at a snapshot that still lacks the
    /// winner and meet the same conflict again (POMVCC §VI.C). Taken: a second call returns
    /// `None`; `None` too when no transaction of this thread on this database has failed
    /// that way since the last call. `run` does this itself; it is for retry loops that do
    /// not hold the failed transaction, such as a benchmark driver's.
    pub fn take_retry_floor(&self) -> Option<Timestamp> {
        crate::txn::take_retry_floor(&self.shared)
    }

    /// A READ ONLY transaction that reads a snapshot under every protocol, waiting as long
    /// as `Config::ddl_wait` for MVTO's older writers (checkpoints: a cut that misses a
    /// transaction ordered before it would lose it). Under SSN and ERMIA-SSI it is an MVOCC
    /// snapshot: a checkpoint needs the state after a prefix of the commit order (replay
    /// continues in commit order), not a serializable read, and must not be aborted by their
    /// commit test.
    pub(crate) fn begin_snapshot(&self) -> Result<Transaction<'_>> {
        let isolation = Config::strongest_isolation(self.shared.config.protocol)
            .unwrap_or(crate::config::Isolation::Serializable);
        let opts = TxnOptions {
            isolation,
            read_only: true,
        };
        let protocol = crate::cc::snapshot_protocol(self.shared.config.protocol);
        let mut tx = self.start_txn(opts, protocol, self.shared.config.ddl_wait)?;
        // A checkpoint must hold committed data only.
        tx.st.speculates = false;
        Ok(tx)
    }

    /// A transaction of recovery's replay: MVOCC whatever the configured protocol, since
    /// replay applies records that already committed in a known order, and no protocol's
    /// read tracking may abort it (replay threads of different records share no row).
    pub(crate) fn begin_replay(&self, opts: TxnOptions) -> Result<Transaction<'_>> {
        // `partial-order`: a plain begin reads at `BTs`, which may not hold the replay
        // transaction just committed (its group is still open), and the next record of the
        // same row would meet it as a write-write conflict. Begin after every commit so far.
        // (A no-op under the counters, whose begin already reads every commit.)
        let clock = &self.shared.clock;
        clock.floor(clock.newest_end_ts())?;
        let mut tx = self.start_txn(
            opts,
            crate::config::Protocol::Mvocc,
            std::time::Duration::ZERO,
        )?;
        tx.st.speculates = false;
        Ok(tx)
    }

    /// Claims a slot (this thread's last one if free) and starts a transaction in it.
    fn start_txn(
        &self,
        opts: TxnOptions,
        protocol: crate::config::Protocol,
        snapshot_wait: Duration,
    ) -> Result<Transaction<'_>> {
        let hint = SLOT_HINT.with(|h| h.get());
        let hint = if hint < self.shared.txns.len() {
            hint
        } else {
            0
        };
        let slot = self
            .shared
            .txns
            .acquire(hint)
            .ok_or(Error::TooManyTransactions {
                max: self.shared.txns.len(),
            })?;
        SLOT_HINT.with(|h| h.set(slot));
        Transaction::new(
            &self.shared,
            &self.cc,
            &self.locals,
            slot,
            opts,
            protocol,
            snapshot_wait,
        )
    }

    /// Runs `f` in a transaction and commits, retrying serialization failures with
    /// exponential backoff up to `Config::max_retries` attempts; a retry after a
    /// write-write conflict with a commit begins after that commit (`begin_after`). Any
    /// other error aborts the transaction and is returned.
    pub fn run<T>(&self, f: impl FnMut(&mut Transaction<'_>) -> Result<T>) -> Result<T> {
        self.run_with(
            TxnOptions {
                isolation: self.shared.config.isolation,
                read_only: false,
            },
            f,
        )
    }

    /// `run` with explicit transaction options.
    pub fn run_with<T>(
        &self,
        opts: TxnOptions,
        mut f: impl FnMut(&mut Transaction<'_>) -> Result<T>,
    ) -> Result<T> {
        self.attempts(opts, |tx| {
            let v = f(tx)?;
            tx.commit_in_place().map(|t| (v, t))
        })
    }

    /// `run_with`'s retry loop: `run` runs and commits one transaction (`run_with`: `f`,
    /// then the commit; `Procedure::call_with`: a call that may heal at commit).
    pub(crate) fn attempts<T>(
        &self,
        opts: TxnOptions,
        mut run: impl FnMut(&mut Transaction<'_>) -> Result<(T, CommitTicket)>,
    ) -> Result<T> {
        let mut backoff_us = 1u64;
        let mut last = AbortReason::UserAbort;
        // After a write-write conflict with a commit at some timestamp, the retry begins at
        // it (`begin_after`), so it sees the winner instead of meeting the same conflict
        // again (POMVCC §VI.C: under `partial-order` a plain begin may not see it yet).
        let mut floor = None;
        for attempt in 1..=self.shared.config.max_retries {
            // A begin can fail retryably too (an MVTO READ ONLY snapshot's wait).
            let begun = match floor.take() {
                Some(ts) => self.begin_after(opts, ts),
                None => self.begin_with(opts),
            };
            let (r, retry_floor) = match begun {
                Ok(mut tx) => {
                    let r = run(&mut tx);
                    let retry_floor = tx.retry_floor;
                    drop(tx);
                    (r, retry_floor)
                }
                Err(e) => (Err(e), None),
            };
            match r {
                Ok((v, ticket)) => {
                    self.wait_durable(ticket)?;
                    return Ok(v);
                }
                Err(e) if e.is_retryable() => {
                    if let Error::SerializationFailure(reason) = e {
                        last = reason;
                    }
                    floor = retry_floor;
                    if attempt < self.shared.config.max_retries {
                        // Jitter from the attempt number and thread keeps retries apart.
                        let jitter = (attempt as u64 * 7919) % (backoff_us + 1);
                        std::thread::sleep(Duration::from_micros(backoff_us + jitter));
                        backoff_us = (backoff_us * 2).min(10_000);
                    }
                }
                Err(e) => return Err(e),
            }
        }
        Err(Error::RetriesExhausted {
            attempts: self.shared.config.max_retries,
            last,
        })
    }

    /// How many transactions are blocked waiting for a lock right now: `mv2pl-wait` commits
    /// waiting for the readers of what they overwrote or for range-lock holders, counted once
    /// they have waited a fraction of a millisecond (when a waiter publishes its wait for
    /// deadlock detection). Always 0 under the other protocols, which never wait on a lock.
    /// A tool that drives transactions step by step (`myriad isolation-test`) asks this to
    /// tell a blocked step from a slow one without waiting out a timeout.
    pub fn lock_waits(&self) -> usize {
        crate::cc::mv2pl::published_waiters(&self.shared.txns)
    }

    /// Counters summed over every worker.
    pub fn stats(&self) -> Stats {
        let mut s = Stats::default();
        for slot in self.shared.txns.slots() {
            let st = &slot.stats;
            let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
            s.committed += l(&st.committed);
            for (i, a) in st.aborted.iter().enumerate() {
                s.aborted[i] += l(a);
            }
            s.global_rmw += l(&st.global_rmw);
            s.record_rmw += l(&st.record_rmw);
            s.end_ts_draws += l(&st.end_ts_draws);
            s.versions_allocated += l(&st.versions_allocated);
            s.version_bytes_allocated += l(&st.version_bytes_allocated);
            s.record_bytes += l(&st.record_bytes);
            s.versions_reclaimed += l(&st.versions_reclaimed);
            s.version_bytes_reclaimed += l(&st.version_bytes_reclaimed);
            s.gc_ns += l(&st.gc_ns);
            s.preparing_waits += l(&st.preparing_waits);
            s.commit_deps += l(&st.commit_deps);
            s.commit_dep_waits += l(&st.commit_dep_waits);
            s.hybrid_2pl += l(&st.hybrid_2pl);
            s.heals += l(&st.heals);
            s.false_invalidations += l(&st.false_invalidations);
            s.heal_cache_hits += l(&st.heal_cache_hits);
            s.heal_index_lookups += l(&st.heal_index_lookups);
            s.heal_reads_past_inserts += l(&st.heal_reads_past_inserts);
            s.heal_ops_reused += l(&st.heal_ops_reused);
            s.heal_ops_rerun += l(&st.heal_ops_rerun);
            s.heal_relocks += l(&st.heal_relocks);
            s.ssi_safe_retries += l(&st.ssi_safe_retries);
            s.ssi_untracked_reads += l(&st.ssi_untracked_reads);
            s.ssi_old_read_aborts += l(&st.ssi_old_read_aborts);
            s.versions_cut_by_readers += l(&st.versions_cut_by_readers);
            s.versions_pruned_dead_zone += l(&st.versions_pruned_dead_zone);
            add_siro(&mut s, st);
        }
        let clock = &self.shared.clock;
        match clock.increments() {
            Some(by) => {
                s.ts_increments = by.iter().sum();
                s.ts_increments_by_cause = by;
            }
            None => s.ts_increments = s.end_ts_draws,
        }
        if let Some(lag) = clock.lag() {
            s.ts_lag_samples = lag.samples;
            s.ts_lag_gap_sum = lag.gap_sum;
            s.ts_lag_hist = lag.hist;
        }
        // Slot counts: make the closed groups complete by now readable first.
        clock.refresh();
        s.ts_visibility_lag = clock
            .newest_end_ts()
            .get()
            .saturating_sub(clock.now().get());
        let spaces = crate::version::space::stats();
        s.space_locks = spaces.lock_acquisitions;
        s.space_reserved_bytes = spaces.reserved_bytes;
        for st in self
            .shared
            .vacuum
            .get()
            .into_iter()
            .flat_map(|v| v.stats.iter())
        {
            let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
            s.versions_reclaimed += l(&st.versions_reclaimed);
            s.version_bytes_reclaimed += l(&st.version_bytes_reclaimed);
            s.gc_ns += l(&st.gc_ns);
            s.versions_pruned_dead_zone += l(&st.versions_pruned_dead_zone);
            add_siro(&mut s, st);
        }
        s
    }

    /// Walks every chain and reports chain lengths (`buckets`: histogram size, ≥ 2).
    pub fn chain_stats(&self, buckets: usize) -> ChainStats {
        let buckets = buckets.max(2);
        let mut cs = ChainStats {
            histogram: vec![0; buckets],
            ..Default::default()
        };
        let _guard = crossbeam_epoch::pin();
        let names = self.shared.names.lock().len();
        for id in 0..names {
            let t = self.shared.table_by_id(id as u32);
            for tid in t.tids() {
                let Some(e) = t.entry(tid) else { continue };
                let mut v = e.load(Ordering::Acquire);
                let mut n = 0u64;
                // SAFETY: pinned; chain versions are freed only after the epoch advances.
                while let Some(x) = unsafe { v.as_ref() } {
                    n += 1;
                    v = x.next.load(Ordering::Acquire);
                }
                if n == 0 {
                    continue;
                }
                cs.tuples += 1;
                cs.max_chain_len = cs.max_chain_len.max(n);
                cs.histogram[(n as usize).min(buckets - 1)] += 1;
            }
        }
        cs
    }

    /// The chain lengths of a sample of at most about `max_tuples` tuples, taken with the
    /// same stride from tuple 0 of every table (so a workload whose hottest keys are loaded
    /// first samples them). Walks the chains while transactions run (no stop of the world):
    /// a length is a chain's length at some moment of its walk.
    pub fn chain_sample(&self, max_tuples: usize) -> Vec<u64> {
        let names = self.shared.names.lock().len();
        let tables: Vec<_> = (0..names)
            .map(|id| self.shared.table_by_id(id as u32))
            .collect();
        let total: u64 = tables.iter().map(|t| t.tid_count()).sum();
        let stride = total.div_ceil(max_tuples.max(1) as u64).max(1);
        let mut out = Vec::with_capacity(max_tuples.min(total as usize));
        let guard = crossbeam_epoch::pin();
        for t in tables {
            for tid in (0..t.tid_count()).step_by(stride as usize) {
                let Some(e) = t.entry(crate::storage::TupleId::new(tid)) else {
                    continue;
                };
                let mut v = e.load(Ordering::Acquire);
                let mut n = 0u64;
                // SAFETY: pinned; chain versions are freed only after the epoch advances.
                while let Some(x) = unsafe { v.as_ref() } {
                    n += 1;
                    v = x.next.load(Ordering::Acquire);
                }
                if n > 0 {
                    out.push(n);
                }
            }
        }
        drop(guard);
        out
    }

    /// Runs garbage collection for every idle worker slot now (also done automatically every
    /// `Config::gc_interval_txns` commits by each worker).
    pub fn collect_garbage(&self) {
        if let Some(v) = self.shared.vacuum.get() {
            v.pass_now();
        }
        let guard = crossbeam_epoch::pin();
        for i in 0..self.shared.txns.len() {
            let slot = self.shared.txns.slot(i);
            if slot.in_use.load(Ordering::Relaxed)
                || slot
                    .in_use
                    .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
                    .is_err()
            {
                continue;
            }
            // SAFETY: we own the slot until release.
            let local = unsafe { &mut *self.locals.get(i) };
            crate::gc::collect_slot(
                &self.shared,
                slot,
                &mut local.garbage,
                &mut local.zones,
                &mut local.written,
                &guard,
            );
            self.shared.txns.release(i);
        }
        drop(guard);
        // Let deferred frees run.
        for _ in 0..4 {
            crossbeam_epoch::pin().flush();
        }
    }

    /// The current visibility watermark (oldest read time any transaction may use).
    pub fn watermark(&self) -> u64 {
        crate::gc::watermark(&self.shared)
    }

    /// Takes the recorded history (empty unless `Config::record_history(true)`).
    pub fn take_history(&self) -> Vec<TxnRecord> {
        self.shared
            .history
            .as_ref()
            .map(|h| h.take())
            .unwrap_or_default()
    }
}

impl Drop for Database {
    fn drop(&mut self) {
        // A last group commit makes every deferred commit durable before the files close.
        if let Some(l) = self.shared.log.get() {
            l.control().shutdown();
        }
    }
}
