//! Transactions: the public operations (get, get via secondary index, insert, update, delete,
//! range scan, commit, abort) and the per-transaction state (read set, scan set, write set).
//!
//! The path of one transaction (see ARCHITECTURE.md): `Database::begin` claims a slot of the
//! transaction table (`txn/table.rs`) and registers its read time; an operation finds a tuple id
//! in an index (`index/`), walks the version chain from the indirection entry
//! (`storage/table.rs`) and checks visibility (`cc/visibility.rs`); a write locks the latest
//! version's End field and installs a new version at the chain head; `commit` runs the
//! protocol (`cc/mvocc.rs`), post-processes timestamps and hands old versions to GC (`gc/`).
//! What a protocol adds to a read or a write (`cc/mvto.rs`, `cc/mv2pl.rs`) is called from
//! `note_read`, `lock_for_write` and `entered_indexes`; an abort decided inside an index
//! callback is remembered (`doom`) and raised when the operation returns.

pub mod table;
#[cfg(test)]
pub(crate) mod tests;

use crate::cc;
use crate::cc::visibility::Resolver;
use crate::config::{Isolation, Protocol};
use crate::engine::Database;
use crate::error::{AbortReason, Error, Result};
use crate::gc::Garbage;
use crate::history::Recording;
use crate::index::{prefix_end, ScanDirection};
use crate::log::CommitTicket;
use crate::schema::TableSchema;
use crate::storage::{Table, TableRef, TupleId};
use crate::value::{Row, RowMut, RowRef, ToValueRef, Values};
use crate::version::{Version, INFINITY};
use crossbeam_epoch::Guard;
use std::collections::VecDeque;
use std::ops::Bound;
use std::ptr;
use std::sync::atomic::Ordering;
use table::{bump, Slot, TxnId};

/// Options for one transaction.
#[derive(Clone, Copy, Debug)]
pub struct TxnOptions {
    /// Isolation level (must be one the configured protocol offers).
    pub isolation: Isolation,
    /// Declared READ ONLY: writes fail, and commit needs no validation.
    pub read_only: bool,
}

/// How a range scan runs.
#[derive(Clone, Copy, Debug, Default)]
pub struct ScanOptions {
    /// Position of the index to scan (0 = primary key); must be an ordered index.
    pub index: usize,
    /// Stop after this many rows.
    pub limit: Option<usize>,
    /// Highest key first.
    pub descending: bool,
}

/// A predicate read recorded for the phantom re-check (Hekaton §3.2).
#[derive(Clone, Copy, Debug)]
pub(crate) struct ScanRecord {
    pub table: u32,
    /// Index position, or `TABLE_SCAN` for a whole-table scan in tuple-id order.
    pub index: u16,
    /// Bounds as byte ranges of `SlotLocal::scan_keys`; a point lookup has lo = hi = Included.
    pub lo: (u8, u32, u32),
    pub hi: (u8, u32, u32),
    pub point: bool,
    /// The read-set entries the operation that made this record added (`SlotLocal::op_reads`
    /// to the end): Silo's re-check asks whether a row was read by this very scan.
    pub reads: (u32, u32),
}

/// `ScanRecord::index` of a whole-table scan (`Transaction::scan_table`).
pub(crate) const TABLE_SCAN: u16 = u16::MAX;
/// A table scan re-pins the memory epoch after this many tuple ids.
const TABLE_SCAN_REPIN_TIDS: u64 = 4096;

/// A write: the new version at the head of `tid`'s chain and the version it superseded.
#[derive(Clone, Copy, Debug)]
pub(crate) struct WriteRecord {
    pub table: u32,
    pub tid: TupleId,
    pub new: *mut Version,
    /// Null when the tuple had no version (fresh insert).
    pub old: *mut Version,
}

/// Per-slot reusable state, so a transaction allocates nothing in steady state.
#[derive(Default)]
pub(crate) struct SlotLocal {
    pub read_set: Vec<*const Version>,
    /// Length of `read_set` when the current operation began.
    pub op_reads: u32,
    pub scan_set: Vec<ScanRecord>,
    pub scan_keys: Vec<u8>,
    pub write_set: Vec<WriteRecord>,
    pub key_buf: Vec<u8>,
    pub prefetched: Prefetched,
    pub entry_buf: Vec<u8>,
    pub key_buf2: Vec<u8>,
    pub row_buf: Vec<u8>,
    /// In-place storage: the row a read returns (`Table::row`), and the row a write replaces.
    pub read_buf: Vec<u8>,
    pub old_buf: Vec<u8>,
    /// Delta storage: scratch for a version's before-images.
    pub image_buf: Vec<u8>,
    pub garbage: VecDeque<Garbage>,
    /// The protocol's per-slot state (`cc::SlotCc`: held locks, commit scratch, Silo's
    /// last TID, `hybrid`'s retry flag).
    pub cc: cc::SlotCc,
    pub commits_since_gc: u32,
    /// Fresh tuple ids reserved per table and not handed out yet: (table id, next, end).
    /// Table ids are never reused, so a range can only be used for the table it came from.
    pub tid_ranges: Vec<(u32, TupleId, TupleId)>,
    /// The call a command-logged transaction was (`Command::Called`): procedure definition
    /// number and arguments, encoded for the log (`Procedure::encode_call`).
    pub cmd: Vec<u8>,
}

/// Whether a transaction's effects are exactly one stored-procedure call, so that command
/// logging can log the call instead of the rows (thesis §4.4.5).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Command {
    /// No call yet (and no write yet, or it would be `Mixed`).
    None,
    /// Inside the call that started with no writes before it.
    Running,
    /// The call returned successfully after this many write operations.
    Called(u64),
    /// Anything else: written outside a call, a second call, a failed call.
    Mixed,
}

/// The primary-key lookups of the transaction's last `prefetch`, which the operations that
/// follow reuse instead of hashing and probing the index again.
///
/// Sound because a primary index entry, once inserted, maps its key to the same tuple id for
/// the life of the table: entries are never removed (a deleted row keeps its tuple id and a
/// re-insert revives it) and never re-pointed. Keys the index did not hold are not cached (a
/// concurrent insert may add them). Cleared when a transaction starts.
#[derive(Default)]
pub(crate) struct Prefetched {
    /// Table the lookups were made in (`None`: nothing cached).
    table: Option<u32>,
    /// Encoded keys back to back; key `i` ends at `ends[i]`.
    keys: Vec<u8>,
    ends: Vec<u32>,
    hashes: Vec<u64>,
    /// `NO_TID` where the index had no entry.
    tids: Vec<TupleId>,
    heads: Vec<*const u8>,
    /// Where `tid_of` looks first: one past its last hit (operations usually follow the
    /// prefetch order, so the search is one comparison instead of a scan).
    cursor: std::cell::Cell<usize>,
}

const NO_TID: TupleId = TupleId::MAX;
/// Fresh tuple ids a slot reserves per table at a time (`Transaction::fresh_tid`): one
/// shared fetch-add per 64 inserts instead of one per insert.
const TID_CHUNK: u64 = 64;

impl Prefetched {
    fn clear(&mut self) {
        self.table = None;
        self.keys.clear();
        self.ends.clear();
        self.hashes.clear();
        self.tids.clear();
        self.heads.clear();
        self.cursor.set(0);
    }

    fn key(&self, i: usize) -> &[u8] {
        let start = if i == 0 { 0 } else { self.ends[i - 1] as usize };
        &self.keys[start..self.ends[i] as usize]
    }

    /// The tuple id a prefetch found for encoded primary key `key` of table `table`.
    #[inline]
    fn tid_of(&self, table: u32, key: &[u8]) -> Option<TupleId> {
        if self.table != Some(table) {
            return None;
        }
        let hit = |i: usize| self.tids[i] != NO_TID && same_key(self.key(i), key);
        let c = self.cursor.get();
        let i = if c < self.tids.len() && hit(c) {
            c
        } else {
            (0..self.tids.len()).find(|&i| hit(i))?
        };
        self.cursor.set(i + 1);
        Some(self.tids[i])
    }
}

/// Byte equality of two encoded keys, one word compare for the common 8-byte key (an
/// integer primary key) instead of a `memcmp` call.
#[inline]
fn same_key(a: &[u8], b: &[u8]) -> bool {
    match (<[u8; 8]>::try_from(a), <[u8; 8]>::try_from(b)) {
        (Ok(x), Ok(y)) => u64::from_ne_bytes(x) == u64::from_ne_bytes(y),
        _ => a == b,
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Status {
    Active,
    Ended,
}

/// An open transaction. Dropping it without `commit` aborts it.
pub struct Transaction<'db> {
    pub(crate) db: &'db Database,
    pub(crate) slot_idx: usize,
    pub(crate) id: TxnId,
    pub(crate) begin_ts: u64,
    pub(crate) isolation: Isolation,
    pub(crate) read_only: bool,
    /// The protocol this transaction runs (the configured one; MVOCC for recovery's replay).
    pub(crate) protocol: Protocol,
    /// Whether reads are recorded in version headers (MVTO read-ts, MV2PL read locks): not
    /// for a READ ONLY transaction that reads a snapshot.
    tracks_reads: bool,
    /// Reads and ignores Preparing writers' versions speculatively, with commit dependencies
    /// (Hekaton §2.7; MVOCC and SI with `Config::commit_dependencies`), instead of waiting.
    pub(crate) speculates: bool,
    /// A commit dependency was taken (`Resolver::speculate`). The transaction then never
    /// re-pins its memory epoch: a version it read speculatively is freed by its creator's
    /// rollback, protected only by the pin, not by the visibility watermark.
    pub(crate) took_deps: std::cell::Cell<bool>,
    /// An abort decided where it could not be returned (inside an index callback, or a
    /// Silo read that met a locked record).
    doomed: std::cell::Cell<Option<AbortReason>>,
    /// The protocol's per-transaction state (`cc::TxnCc`: SSN's stamps, MVTO's `blocked`).
    pub(crate) cc: cc::TxnCc,
    pub(crate) guard: Guard,
    pub(crate) local: SlotLocal,
    pub(crate) recording: Option<Box<Recording>>,
    ops_since_repin: u32,
    status: Status,
    /// Write operations started (inserts, updates, deletes), for `command`.
    writes: u64,
    pub(crate) command: Command,
}

/// Re-pin the memory epoch this often, so a long transaction never holds back reclamation
/// (versions it can see are protected by the visibility watermark, not by the pin).
const REPIN_EVERY_OPS: u32 = 128;

impl<'db> Transaction<'db> {
    pub(crate) fn new(
        db: &'db Database,
        slot_idx: usize,
        opts: TxnOptions,
        protocol: Protocol,
        snapshot_wait: std::time::Duration,
    ) -> Self {
        let slot = db.txns.slot(slot_idx);
        let id = slot.start(slot_idx);
        // Register a provisional read time before drawing the real one, so the GC watermark
        // computed concurrently can never pass our read time (see gc/epoch.rs).
        slot.begin_ts.store(db.clock.now(), Ordering::SeqCst);
        // SAFETY: we own the slot (acquired in Database::begin_with).
        let mut local = std::mem::take(unsafe { &mut *slot.local.get() });
        local.prefetched.clear();
        let cc::Begin {
            protocol,
            begin_ts,
            tracks_reads,
        } = cc::begin(
            db,
            slot_idx,
            &mut local.cc,
            protocol,
            opts.read_only,
            db.clock.now(),
            snapshot_wait,
        );
        let recording = db.history.as_ref().map(|_| Box::default());
        Transaction {
            db,
            slot_idx,
            id,
            begin_ts,
            isolation: opts.isolation,
            read_only: opts.read_only,
            protocol,
            tracks_reads,
            speculates: db.config.speculates(),
            took_deps: std::cell::Cell::new(false),
            doomed: std::cell::Cell::new(None),
            cc: cc::TxnCc::new(),
            guard: crossbeam_epoch::pin(),
            local,
            recording,
            ops_since_repin: 0,
            status: Status::Active,
            writes: 0,
            command: Command::None,
        }
    }

    /// Whether this transaction's commit would be logged as a procedure call if it is one:
    /// command logging is on and the transaction is serializable in its commit order (so
    /// replaying calls in commit order reproduces the state; a weaker level's call is logged
    /// as rows). SSN and ERMIA-SSI are serializable but not in commit order — a transaction
    /// may serialize before one that committed earlier, having read what that one replaced —
    /// so under them every call is logged as rows. (MVTO logs its timestamp, its serialization order.)
    pub(crate) fn logs_commands(&self) -> bool {
        self.db.config.log == crate::config::LogPolicy::Command
            && self.isolation == Isolation::Serializable
            && !self.protocol.stamped()
            && !self.protocol.single_version()
            && !self.read_only
    }

    /// A procedure call starts. If it is the transaction's first call and nothing was written
    /// before it, `encode` writes the call into the command buffer and true is returned.
    pub(crate) fn command_begin(&mut self, encode: impl FnOnce(&mut Vec<u8>)) -> bool {
        if self.command == Command::None && self.writes == 0 {
            self.local.cmd.clear();
            encode(&mut self.local.cmd);
            self.command = Command::Running;
            true
        } else {
            self.command = Command::Mixed;
            false
        }
    }

    /// The call `command_begin` started has returned.
    pub(crate) fn command_end(&mut self, ok: bool) {
        if self.command == Command::Running {
            self.command = if ok {
                Command::Called(self.writes)
            } else {
                Command::Mixed
            };
        }
    }

    /// The call to log instead of the rows, if the transaction was exactly one call.
    pub(crate) fn logged_command(&self) -> Option<&[u8]> {
        match self.command {
            Command::Called(w) if w == self.writes && self.logs_commands() => Some(&self.local.cmd),
            _ => None,
        }
    }

    /// This transaction's id.
    pub fn id(&self) -> u64 {
        self.id.0
    }
    /// The begin (read) timestamp.
    pub fn begin_ts(&self) -> u64 {
        self.begin_ts
    }
    /// The isolation level.
    pub fn isolation(&self) -> Isolation {
        self.isolation
    }

    /// Whether reads are tracked for the protocol (not a READ ONLY snapshot).
    pub(crate) fn tracks_reads(&self) -> bool {
        self.tracks_reads
    }

    pub(crate) fn slot(&self) -> &'db Slot {
        self.db.txns.slot(self.slot_idx)
    }

    pub(crate) fn resolver(&self) -> Resolver<'_> {
        Resolver {
            txns: &self.db.txns,
            me: self.id,
            blocked: (cc::blocks_instead_of_waiting(self.protocol) && self.tracks_reads)
                .then_some(&self.cc.mvto.flag),
            speculate: self.speculates.then_some(&self.took_deps),
        }
    }

    /// A resolver that waits out Preparing writers even when the transaction speculates:
    /// for the version a write goes on top of. Hekaton allows speculative updates (§3.1); we
    /// do not, because if the creator then aborted, its version would stay in the chain under
    /// ours after its rollback had already queued it for freeing.
    fn waiting_resolver(&self) -> Resolver<'_> {
        Resolver {
            speculate: None,
            ..self.resolver()
        }
    }

    /// Whether the memory epoch may be re-pinned (see `took_deps`).
    #[inline]
    fn may_repin(&self) -> bool {
        !self.took_deps.get()
    }

    /// Remembers an abort to raise when the current operation returns (`raise`).
    #[inline]
    fn doom(&self, reason: AbortReason) {
        if self.doomed.get().is_none() {
            self.doomed.set(Some(reason));
        }
    }

    /// Whether the current operation has already failed (a doomed read, or an MVTO read
    /// that met an older uncommitted write).
    #[inline]
    fn is_doomed(&self) -> bool {
        self.doomed.get().is_some() || self.cc.mvto.flag.get()
    }

    /// Aborts the transaction if the operation that just ran was doomed.
    #[inline]
    fn raise(&mut self) -> Result<()> {
        if !self.is_doomed() {
            return Ok(());
        }
        let reason = self.doomed.get().unwrap_or(AbortReason::TimestampOrder);
        Err(self.fail(reason))
    }

    fn check_table(&self, t: &Table) -> Result<()> {
        if t.db_id != self.db.id {
            return Err(Error::UnknownTable(t.schema.name.clone()));
        }
        // SeqCst pairs with `Database::create_index`: it sets the state, then looks for
        // transactions in flight; we claimed our slot, then read the state.
        match t.state.load(Ordering::SeqCst) {
            crate::storage::table::LIVE => {}
            crate::storage::table::BUILDING => {
                return Err(Error::Busy(format!(
                    "table `{}` is being rebuilt by CREATE INDEX; retry when it finishes",
                    t.schema.name
                )))
            }
            _ => {
                return Err(Error::UnknownTable(format!(
                    "{} (a handle from before CREATE INDEX; look the table up again)",
                    t.schema.name
                )))
            }
        }
        Ok(())
    }

    fn begin_op(&mut self, t: &Table) -> Result<()> {
        if self.status != Status::Active {
            return Err(Error::TransactionClosed);
        }
        self.check_table(t)?;
        self.local.op_reads = self.local.read_set.len() as u32;
        self.ops_since_repin += 1;
        if self.ops_since_repin >= REPIN_EVERY_OPS && self.may_repin() {
            self.ops_since_repin = 0;
            self.guard.repin();
        }
        Ok(())
    }

    fn begin_write(&mut self, t: &Table) -> Result<()> {
        self.writes += 1;
        self.begin_op(t)?;
        if self.read_only {
            return Err(Error::ReadOnlyTransaction);
        }
        Ok(())
    }

    /// Read time of the current statement: the begin timestamp, or now under Read Committed.
    #[inline]
    fn stmt_ts(&self) -> u64 {
        if self.isolation == Isolation::ReadCommitted {
            self.db.clock.now()
        } else {
            self.begin_ts
        }
    }

    /// Whether reads go to the read set for validation at commit (`cc::validates_reads`).
    #[inline]
    pub(crate) fn validates_reads(&self) -> bool {
        cc::validates_reads(self.protocol, self.isolation)
    }

    /// Whether serializable reads take range locks (`cc::takes_range_locks`).
    #[inline]
    fn range_locking(&self) -> bool {
        cc::takes_range_locks(self.protocol)
            && self.tracks_reads
            && self.isolation == Isolation::Serializable
    }

    /// `mv2pl-wait`: a locked range holds row `tid` with no version visible to us.
    fn unseen_row(&self, t: &Table, tid: TupleId) {
        if self.range_locking() {
            if let Err(reason) = crate::cc::mv2pl::unseen_row(self, t, tid) {
                self.doom(reason);
            }
        }
    }

    #[inline]
    fn is_mine(&self, v: &Version) -> bool {
        v.begin.load(Ordering::Acquire) == self.id.word()
    }

    /// Silo: our buffered (private, not yet installed) write of `tid`, if any. A write
    /// record with a superseded version is buffered until commit; one without is an insert,
    /// which Silo makes at once (`cc/silo.rs`).
    #[inline]
    pub(crate) fn silo_pending(&self, table: u32, tid: TupleId) -> Option<*mut Version> {
        self.silo_pending_record(table, tid).map(|w| w.new)
    }

    /// `silo_pending`'s write record (with `old`, the version the write read).
    #[inline]
    pub(crate) fn silo_pending_record(&self, table: u32, tid: TupleId) -> Option<&WriteRecord> {
        self.local
            .write_set
            .iter()
            .rev()
            .find(|w| w.tid == tid && w.table == table && !w.old.is_null())
    }

    /// Silo: `e`, a duplicate or missing key the application will see, unless a record
    /// the transaction read has been replaced since: then the error may come from that stale
    /// read (two New-Orders that read one `d_next_o_id` insert the same order), and the
    /// transaction aborts with `read_validation`, as its commit would
    /// (`cc::fails_stale_reads_early`).
    fn silo_unless_stale(&mut self, e: Error) -> Error {
        if !cc::fails_stale_reads_early(self.protocol) {
            return e;
        }
        let me = self.id.word();
        // What it read, and what its buffered writes read (an UPDATE's row, which a
        // `SET x = x + 1` reads without a SELECT).
        let bases = self.local.write_set.iter().map(|w| w.old as *const Version);
        let stale = self.local.read_set.iter().copied().chain(bases).any(|v| {
            // SAFETY: pinned since the read.
            let end = unsafe { v.as_ref() }.map_or(INFINITY, |v| v.end.load(Ordering::Acquire));
            end != INFINITY && end != me
        });
        if stale {
            self.fail(AbortReason::ReadValidation)
        } else {
            e
        }
    }

    /// Silo's read of `tid`: our buffered write, else the record's one version (null if it
    /// has none, or an aborted insert is being unlinked). A record another transaction is
    /// still inserting is locked: the read dooms the transaction, as Silo's validation of it
    /// would (`cc/silo.rs`).
    fn silo_read(&self, t: &Table, tid: TupleId) -> *const Version {
        if !self.local.write_set.is_empty() {
            if let Some(n) = self.silo_pending(t.id, tid) {
                return n;
            }
        }
        let Some(e) = t.entry(tid) else {
            return ptr::null();
        };
        let h = e.load(Ordering::Acquire);
        // SAFETY: pinned.
        let Some(v) = (unsafe { h.as_ref() }) else {
            return ptr::null();
        };
        let b = v.begin.load(Ordering::Acquire);
        if b == INFINITY {
            return ptr::null();
        }
        if crate::version::is_txn(b) && b != self.id.word() {
            self.doom(cc::read_conflict(self.protocol));
            return ptr::null();
        }
        h
    }

    /// The visible version of `tid` as of `rt`, or null.
    #[inline]
    pub(crate) fn visible_version(&self, t: &Table, tid: TupleId, rt: u64) -> *const Version {
        if self.protocol.single_version() {
            return self.silo_read(t, tid);
        }
        let Some(e) = t.entry(tid) else {
            return ptr::null();
        };
        let head = e.load(Ordering::Acquire);
        let v = self.resolver().visible_in_chain(head, rt, false);
        if !std::ptr::eq(v, head) && self.db.config.gc == crate::config::GcPolicy::Coop {
            crate::gc::coop::cooperate(self.db, self.slot(), t, e, head, &self.guard);
        }
        v
    }

    /// `physical` pointers: `exact` if it is visible at `rt`, else null. A serializable
    /// range-locking read still learns whether the row has no visible version at all
    /// (`unseen_row`), which needs the chain.
    fn exact_version(
        &self,
        t: &Table,
        tid: TupleId,
        exact: *const Version,
        rt: u64,
    ) -> *const Version {
        // SAFETY: an entry is removed from the index before its version's free is deferred
        // (`Table::remove_entries`), and we are pinned: the version is allocated.
        if self.resolver().visible(unsafe { &*exact }, rt) {
            return exact;
        }
        if self.range_locking() && self.visible_version(t, tid, rt).is_null() {
            self.unseen_row(t, tid);
        }
        ptr::null()
    }

    /// Records that we read `v` (for validation and the history).
    #[inline]
    fn note_read(&mut self, t: &Table, v: *const Version) {
        // SAFETY: v is a visible version of a chain we are pinned on.
        let r = unsafe { &*v };
        if self.is_mine(r) {
            if self.protocol.single_version() {
                // A row we have a buffered write on counts as a read of the version that
                // write read, so a predicate re-check finds it read by this scan.
                let base = self
                    .local
                    .write_set
                    .iter()
                    .rev()
                    .find(|w| std::ptr::eq(w.new, v));
                if let Some(old) = base.map(|w| w.old).filter(|o| !o.is_null()) {
                    self.local.read_set.push(old);
                }
            }
            return;
        }
        if self.tracks_reads {
            if let Err(reason) = cc::on_read(self, v) {
                self.doom(reason);
            }
        }
        if self.validates_reads() {
            self.local.read_set.push(v);
        }
        if let Some(rec) = self.recording.as_mut() {
            let mut rb = Vec::new();
            rec.note_read(&t.schema, t.id, r, t.row(r, &mut rb), &self.db.txns);
        }
    }

    fn push_scan(
        &mut self,
        t: &Table,
        index: usize,
        lo: Bound<&[u8]>,
        hi: Bound<&[u8]>,
        point: bool,
    ) {
        if self.isolation != Isolation::Serializable || !cc::on_scan(self, t, index as u16) {
            return;
        }
        let keys = &mut self.local.scan_keys;
        let mut put = |b: Bound<&[u8]>| -> (u8, u32, u32) {
            let start = keys.len() as u32;
            match b {
                Bound::Included(k) => {
                    keys.extend_from_slice(k);
                    (0, start, keys.len() as u32)
                }
                Bound::Excluded(k) => {
                    keys.extend_from_slice(k);
                    (1, start, keys.len() as u32)
                }
                Bound::Unbounded => (2, start, start),
            }
        };
        let lo = put(lo);
        let hi = if point { lo } else { put(hi) };
        let reads = (self.local.op_reads, self.local.read_set.len() as u32);
        self.local.scan_set.push(ScanRecord {
            table: t.id,
            index: index as u16,
            lo,
            hi,
            point,
            reads,
        });
    }

    fn note_miss(&mut self, t: &Table, key_is_buf2: bool) {
        let key = if key_is_buf2 {
            std::mem::take(&mut self.local.key_buf2)
        } else {
            std::mem::take(&mut self.local.key_buf)
        };
        self.push_scan(t, 0, Bound::Included(&key), Bound::Included(&key), true);
        if let Err(reason) = cc::on_miss(self, t, &key) {
            self.doom(reason);
        }
        if let Some(rec) = self.recording.as_mut() {
            rec.note_absent(t.id, &key);
        }
        if key_is_buf2 {
            self.local.key_buf2 = key;
        } else {
            self.local.key_buf = key;
        }
    }

    // ------------------------------------------------------------------ reads

    /// Reads the row with primary key `key` and passes it to `f` (no copy).
    pub fn get_with<K: Values + ?Sized, R>(
        &mut self,
        t: &TableRef,
        key: &K,
        f: impl FnOnce(RowRef<'_>) -> R,
    ) -> Result<Option<R>> {
        self.begin_op(t)?;
        let mut kb = std::mem::take(&mut self.local.key_buf);
        let enc = t.schema.encode_key_values(0, key, &mut kb);
        self.local.key_buf = kb;
        enc?;
        let rt = self.stmt_ts();
        if self.range_locking() {
            let key = std::mem::take(&mut self.local.key_buf);
            crate::cc::mv2pl::range_lock(
                self,
                t,
                0,
                Some(&key),
                Bound::Unbounded,
                Bound::Unbounded,
            );
            self.local.key_buf = key;
        }
        let v = match self.primary_tid(t) {
            Some(tid) => {
                let v = self.visible_version(t, tid, rt);
                if v.is_null() {
                    self.unseen_row(t, tid);
                }
                v
            }
            None => ptr::null(),
        };
        // SAFETY: visible versions stay allocated while we are active (watermark + pin).
        match unsafe { v.as_ref() } {
            Some(r) if !r.is_tombstone() => {
                self.note_read(t, v);
                self.raise()?;
                let mut rb = std::mem::take(&mut self.local.read_buf);
                let out = f(RowRef {
                    schema: &t.schema,
                    data: t.row(r, &mut rb),
                });
                self.local.read_buf = rb;
                Ok(Some(out))
            }
            Some(_) => {
                self.note_read(t, v);
                self.note_miss(t, false);
                self.raise()?;
                Ok(None)
            }
            None => {
                self.note_miss(t, false);
                self.raise()?;
                Ok(None)
            }
        }
    }

    /// Reads the row with primary key `key` as owned values.
    pub fn get<K: Values + ?Sized>(&mut self, t: &TableRef, key: &K) -> Result<Option<Row>> {
        self.get_with(t, key, |r| r.to_row())
    }

    /// An index entry `(key, tid)` resolved to the live row visible at `rt`, recorded as read;
    /// `None` for no visible version, a deleted row, or a stale secondary entry (the row no
    /// longer has `key`). `check` is scratch space for the re-encoded key. `exact`: the
    /// version a `physical` entry points at (null for logical pointers), judged alone: the
    /// entry is a hit only if that version is the one visible at `rt` (another entry of the
    /// row leads to any other version). Under in-place storage a hit's row is left in `rb`
    /// (`hit_row`).
    #[allow(clippy::too_many_arguments)]
    fn index_hit(
        &mut self,
        t: &Table,
        index: usize,
        tid: TupleId,
        exact: *const Version,
        key: &[u8],
        rt: u64,
        check: &mut Vec<u8>,
        rb: &mut Vec<u8>,
    ) -> Option<&'db Version> {
        let v = if exact.is_null() {
            let v = self.visible_version(t, tid, rt);
            if v.is_null() {
                self.unseen_row(t, tid);
            }
            v
        } else {
            self.exact_version(t, tid, exact, rt)
        };
        // SAFETY: visible versions stay allocated while we are active (watermark + pin).
        let r: &'db Version = unsafe { v.as_ref() }?;
        if r.is_tombstone() {
            return None;
        }
        if index != 0 || t.rows_copied() {
            let row = t.row(r, rb);
            if index != 0 {
                t.schema.encode_key_from_row(index, row, check);
            }
        }
        if index != 0 && check.as_slice() != key {
            // A stale entry: the row has left this key. On single-version storage the
            // commit-time re-scan sees only the present, one range after another, so a row
            // that moves on twice while we validate could slip past every range we read; the
            // version we judged must itself stay current (validated or read-locked like any
            // read). Multi-version protocols re-check against their snapshot, which does not
            // move.
            if self.protocol.single_version() {
                self.note_read(t, v);
            }
            return None;
        }
        self.note_read(t, v);
        if self.is_doomed() {
            return None;
        }
        Some(r)
    }

    /// Rows whose secondary index `index` (position, see `Table::index`) has key `key`;
    /// `f` returns false to stop. Returns the number of rows passed to `f`.
    pub fn get_by<K: Values + ?Sized>(
        &mut self,
        t: &TableRef,
        index: usize,
        key: &K,
        mut f: impl FnMut(RowRef<'_>) -> bool,
    ) -> Result<usize> {
        self.begin_op(t)?;
        if index == 0 {
            return Ok(self.get_with(t, key, &mut f)?.map_or(0, |_| 1));
        }
        if index >= t.indexes.len() {
            return Err(Error::UnknownIndex {
                table: t.schema.name.clone(),
                index: format!("#{index}"),
            });
        }
        let mut kb = std::mem::take(&mut self.local.key_buf);
        if let Err(e) = t.schema.encode_key_values(index, key, &mut kb) {
            self.local.key_buf = kb;
            return Err(e);
        }
        let rt = self.stmt_ts();
        cc::before_scan(self, t, index);
        if self.range_locking() {
            crate::cc::mv2pl::range_lock(
                self,
                t,
                index,
                Some(&kb),
                Bound::Unbounded,
                Bound::Unbounded,
            );
        }
        let mut n = 0;
        let mut check = std::mem::take(&mut self.local.key_buf2);
        let mut rb = std::mem::take(&mut self.local.read_buf);
        let this = &mut *self;
        t.lookup_entries(index, &kb, &mut |tid, exact| {
            let Some(r) = this.index_hit(t, index, tid, exact, &kb, rt, &mut check, &mut rb) else {
                return !this.is_doomed();
            };
            n += 1;
            f(RowRef {
                schema: &t.schema,
                data: hit_row(t, r, &rb),
            })
        });
        self.local.key_buf2 = check;
        self.local.read_buf = rb;
        self.push_scan(t, index, Bound::Included(&kb), Bound::Included(&kb), true);
        if let Some(rec) = self.recording.as_mut() {
            rec.note_scan(t.id, index, Bound::Included(&kb), Bound::Included(&kb));
        }
        self.local.key_buf = kb;
        self.raise()?;
        Ok(n)
    }

    /// Ordered range scan over index `opts.index` between `lo` and `hi` (key prefixes are
    /// allowed); `f` returns false to stop. Returns the number of rows passed to `f`.
    ///
    /// Under Serializable the requested range is recorded and re-scanned at commit
    /// (Hekaton §3.2); when `limit` or `f` stops the scan early, the range up to the last row
    /// returned is what the transaction observed, and that is what is protected.
    pub fn scan<K: Values + ?Sized>(
        &mut self,
        t: &TableRef,
        lo: Bound<&K>,
        hi: Bound<&K>,
        opts: ScanOptions,
        mut f: impl FnMut(RowRef<'_>) -> bool,
    ) -> Result<usize> {
        self.begin_op(t)?;
        let index = opts.index;
        let Some(idx) = t.indexes.get(index) else {
            return Err(Error::UnknownIndex {
                table: t.schema.name.clone(),
                index: format!("#{index}"),
            });
        };
        if !idx.is_ordered() {
            return Err(Error::Unsupported(format!(
                "range scan on hash index `{}` of `{}`; declare it IndexKind::Ordered",
                t.schema.indexes[index].name, t.schema.name
            )));
        }
        let (lo_b, hi_b) = encode_bounds(&t.schema, index, lo, hi)?;
        let rt = self.stmt_ts();
        cc::before_scan(self, t, index);
        if self.range_locking() {
            // The whole requested range, even if the scan stops early (conservative).
            crate::cc::mv2pl::range_lock(
                self,
                t,
                index,
                None,
                as_ref_bound(&lo_b),
                as_ref_bound(&hi_b),
            );
        }
        let dir = if opts.descending {
            ScanDirection::Descending
        } else {
            ScanDirection::Ascending
        };
        let limit = opts.limit.unwrap_or(usize::MAX);
        let mut n = 0usize;
        let mut stopped_at: Option<Vec<u8>> = None;
        let mut check = std::mem::take(&mut self.local.key_buf2);
        let mut rb = std::mem::take(&mut self.local.read_buf);
        if limit > 0 {
            let this = &mut *self;
            // The B+tree calls back only with validated entries and holds no latch meanwhile.
            t.scan_index(
                index,
                as_ref_bound(&lo_b),
                as_ref_bound(&hi_b),
                dir,
                &mut |k, tid, exact| {
                    let Some(r) = this.index_hit(t, index, tid, exact, k, rt, &mut check, &mut rb)
                    else {
                        return !this.is_doomed();
                    };
                    n += 1;
                    let go_on = f(RowRef {
                        schema: &t.schema,
                        data: hit_row(t, r, &rb),
                    });
                    if !go_on || n >= limit {
                        stopped_at = Some(k.to_vec());
                        return false;
                    }
                    true
                },
            );
        }
        self.local.key_buf2 = check;
        self.local.read_buf = rb;
        // The observed range: up to the last row returned if the scan stopped early. On a
        // secondary index that includes every entry of the stop key (entries are the key
        // plus a suffix, so `Included(key)` alone would leave out the entries of rows
        // before ours under the same key: conservative for those after it).
        let stop_end = match (&stopped_at, opts.descending) {
            (Some(k), false) if index != 0 => Some(prefix_end(k)),
            _ => None,
        };
        let (plo, phi) = match (&stopped_at, opts.descending) {
            (Some(_), false) if stop_end.is_some() => (
                as_ref_bound(&lo_b),
                match stop_end.as_ref().and_then(|e| e.as_deref()) {
                    Some(e) => Bound::Excluded(e),
                    None => Bound::Unbounded,
                },
            ),
            (Some(k), false) => (as_ref_bound(&lo_b), Bound::Included(k.as_slice())),
            (Some(k), true) => (Bound::Included(k.as_slice()), as_ref_bound(&hi_b)),
            (None, _) => (as_ref_bound(&lo_b), as_ref_bound(&hi_b)),
        };
        self.push_scan(t, index, plo, phi, false);
        if let Some(rec) = self.recording.as_mut() {
            rec.note_scan(t.id, index, plo, phi);
        }
        self.raise()?;
        Ok(n)
    }

    /// Visits every row of `t` visible to this transaction, in tuple-id (insertion) order,
    /// until `f` returns false; returns the number of rows visited. This is the full scan a
    /// query without a usable index needs. Under Serializable the whole table counts as read
    /// (a predicate read that matches every row): a row that a transaction committing between
    /// our begin and end timestamps inserts, deletes or changes aborts us at commit as a
    /// phantom, even if `f` stopped early (conservative). Each visited row is recorded as read.
    pub fn scan_table(
        &mut self,
        t: &TableRef,
        mut f: impl FnMut(RowRef<'_>) -> bool,
    ) -> Result<usize> {
        self.scan_table_tids(t, |_, r| f(r))
    }

    /// `scan_table`, also passing each row's tuple id (checkpoints record them for PLR).
    pub(crate) fn scan_table_tids(
        &mut self,
        t: &TableRef,
        mut f: impl FnMut(TupleId, RowRef<'_>) -> bool,
    ) -> Result<usize> {
        self.begin_op(t)?;
        let rt = self.stmt_ts();
        cc::before_scan(self, t, 0);
        if self.range_locking() {
            // Every row enters the primary index: its whole range covers the table.
            crate::cc::mv2pl::range_lock(self, t, 0, None, Bound::Unbounded, Bound::Unbounded);
        }
        let mut n = 0usize;
        let mut rb = std::mem::take(&mut self.local.read_buf);
        for tid in 0..t.tid_count() {
            if tid % TABLE_SCAN_REPIN_TIDS == TABLE_SCAN_REPIN_TIDS - 1 && self.may_repin() {
                // No version reference outlives an iteration (the read set is protected by
                // the watermark), so a long scan need not hold back memory reclamation.
                self.guard.repin();
            }
            let v = self.visible_version(t, tid, rt);
            if v.is_null() {
                self.unseen_row(t, tid);
            }
            // SAFETY: visible versions stay allocated while we are active (watermark + pin).
            let Some(r) = (unsafe { v.as_ref() }) else {
                if self.is_doomed() {
                    break;
                }
                continue;
            };
            if r.is_tombstone() {
                continue;
            }
            self.note_read(t, v);
            if self.is_doomed() {
                break;
            }
            n += 1;
            if !f(
                tid,
                RowRef {
                    schema: &t.schema,
                    data: t.row(r, &mut rb),
                },
            ) {
                break;
            }
        }
        self.local.read_buf = rb;
        if self.isolation == Isolation::Serializable && cc::on_scan(self, t, TABLE_SCAN) {
            let reads = (self.local.op_reads, self.local.read_set.len() as u32);
            self.local.scan_set.push(ScanRecord {
                table: t.id,
                index: TABLE_SCAN,
                lo: (2, 0, 0),
                hi: (2, 0, 0),
                point: false,
                reads,
            });
        }
        if let Some(rec) = self.recording.as_mut() {
            // For the history checker a whole-table read is an unbounded primary-key range.
            rec.note_scan(t.id, 0, Bound::Unbounded, Bound::Unbounded);
        }
        self.raise()?;
        Ok(n)
    }

    /// Like `scan`, returning owned rows.
    pub fn scan_rows<K: Values + ?Sized>(
        &mut self,
        t: &TableRef,
        lo: Bound<&K>,
        hi: Bound<&K>,
        opts: ScanOptions,
    ) -> Result<Vec<Row>> {
        let mut out = Vec::new();
        self.scan(t, lo, hi, opts, |r| {
            out.push(r.to_row());
            true
        })?;
        Ok(out)
    }

    /// Warms the cache for point accesses to `keys` of table `t` (primary key), so that the
    /// `get`/`update`/`delete` calls that follow find index buckets, indirection entries and
    /// chain heads in cache. The lookups of all keys are interleaved stage by stage (bucket,
    /// then indirection entry, then version), so their cache misses overlap instead of being
    /// paid one after another. The tuple ids it finds are remembered for the operations on
    /// the same keys that follow (no second index probe). Records no read: it changes no
    /// result, only speed.
    pub fn prefetch<K: Values>(&mut self, t: &TableRef, keys: &[K]) -> Result<()> {
        self.begin_op(t)?;
        let idx = &t.indexes[0];
        let mut kb = std::mem::take(&mut self.local.key_buf);
        let mut pf = std::mem::take(&mut self.local.prefetched);
        pf.clear();
        pf.table = Some(t.id);
        // Three dependent stages (bucket, indirection entry, version), each a batch of misses.
        // Within a stage the prefetches are issued back to back, after the work that computes
        // their addresses (profiles showed the prefetches waiting, likely on page walks, so
        // spacing them out with hashing and encoding let only a few overlap).
        for k in keys {
            if t.schema.encode_key_values(0, k, &mut kb).is_ok() {
                pf.keys.extend_from_slice(&kb);
                pf.ends.push(pf.keys.len() as u32);
                pf.hashes.push(idx.hash_of(&kb));
            }
        }
        for &h in &pf.hashes {
            idx.prefetch_hashed(h);
        }
        for i in 0..pf.hashes.len() {
            let tid = idx.get_unique_hashed(pf.hashes[i], pf.key(i));
            pf.tids.push(tid.unwrap_or(NO_TID));
        }
        for &tid in &pf.tids {
            if let Some(e) = t.entry(tid) {
                prefetch_line(e as *const _ as *const u8);
            }
        }
        for &tid in &pf.tids {
            if let Some(e) = t.entry(tid) {
                let v = e.load(Ordering::Acquire) as *const u8;
                if !v.is_null() {
                    pf.heads.push(v);
                }
            }
        }
        // Every line of every version (header and row), first lines first, into L2
        // (PREFETCHT1), not L1. Ten 1 KB rows are 170 lines: as T0 prefetches they filled the
        // L1 miss buffers and the transaction's own loads queued behind them. Measured on
        // YCSB bytes100x10 (10 M rows, 2 threads, alternating runs, docs/benchmarks.md),
        // against T0 for every line: 1.41× at θ 0.9 and 1.36× at θ 0 with attrs-read 10,
        // 0.95× and 1.04× with attrs-read 1. (All 17 lines vs header + first line: +10 % with
        // attrs-read 10, earlier.)
        let size = t.version_bytes();
        for &v in &pf.heads {
            prefetch_line_l2(v);
        }
        for &v in &pf.heads {
            // Lines covering [v, v + size); v need not be line-aligned.
            let first = v.wrapping_sub(v as usize % 64);
            let lines = (v as usize % 64 + size).div_ceil(64);
            for l in 1..lines {
                prefetch_line_l2(first.wrapping_add(l * 64));
            }
        }
        self.local.key_buf = kb;
        self.local.prefetched = pf;
        Ok(())
    }

    /// The tuple id of the primary key encoded in `local.key_buf`: from the last `prefetch`
    /// if it looked the key up, else from the primary index.
    #[inline]
    fn primary_tid(&self, t: &Table) -> Option<TupleId> {
        let key = &self.local.key_buf;
        match self.local.prefetched.tid_of(t.id, key) {
            Some(tid) => {
                debug_assert_eq!(t.indexes[0].get_unique(key), Some(tid));
                Some(tid)
            }
            None => t.indexes[0].get_unique(key),
        }
    }

    // ------------------------------------------------------------------ writes

    /// Loads the head of `tid`'s chain, waiting out a just-aborted head that its writer is
    /// about to unlink.
    fn stable_head(&self, t: &Table, tid: TupleId) -> *mut Version {
        let backoff = crossbeam_utils::Backoff::new();
        let Some(e) = t.entry(tid) else {
            return ptr::null_mut();
        };
        loop {
            let h = t.newest(e);
            // SAFETY: pinned.
            match unsafe { h.as_ref() } {
                Some(v) if v.begin.load(Ordering::Acquire) == INFINITY => backoff.snooze(),
                Some(v)
                    if crate::version::is_txn(v.begin.load(Ordering::Acquire))
                        && !self.is_mine(v) =>
                {
                    let st = self
                        .db
                        .txns
                        .state_of(TxnId::from_word(v.begin.load(Ordering::Acquire)));
                    if st == table::TxnState::Aborted {
                        backoff.snooze();
                    } else {
                        return h;
                    }
                }
                _ => return h,
            }
        }
    }

    /// Takes the write lock on `head` (its End field, Hekaton §2.6). Err = write-write conflict.
    fn lock_version(&self, head: &Version) -> std::result::Result<(), ()> {
        let me = self.id.word();
        let slot = self.slot();
        loop {
            let e = head.end.load(Ordering::Acquire);
            if e == INFINITY {
                bump(&slot.stats.record_rmw, 1);
                match head
                    .end
                    .compare_exchange(INFINITY, me, Ordering::AcqRel, Ordering::Acquire)
                {
                    Ok(_) => return Ok(()),
                    Err(_) => continue,
                }
            }
            if crate::version::is_txn(e)
                && !self.db.config.storage.in_place()
                && self.db.txns.state_of(TxnId::from_word(e)) == table::TxnState::Aborted
            {
                // The aborted writer will reset the field; taking it over is also safe
                // (Hekaton §2.6: "or its End field contains the ID of an aborted transaction").
                bump(&slot.stats.record_rmw, 1);
                if head
                    .end
                    .compare_exchange(e, me, Ordering::AcqRel, Ordering::Acquire)
                    .is_ok()
                {
                    return Ok(());
                }
                continue;
            }
            return Err(());
        }
    }

    /// Takes the write lock on `head` and applies the protocol's write check (MVTO: no later
    /// reader; MV2PL: no other read lock). On failure the lock is not held.
    fn lock_for_write(&mut self, head: &Version) -> std::result::Result<(), AbortReason> {
        self.lock_version(head)
            .map_err(|_| cc::write_conflict(self.protocol))?;
        let ok = cc::may_write(self, head);
        if ok.is_err() {
            self.unlock_version(head);
        }
        ok
    }

    /// `new` (the row's values after a write; `old` before it, `None` for a row new to
    /// the table) has entered indexes a later transaction may already have scanned: asks the
    /// protocol (`cc::on_index_enter`). Under index pointers `physical` that is every
    /// secondary index: the new version's entries are new even where the key stays, and a
    /// scan that passed their place before they were added finds only the old version's,
    /// which our commit makes invisible to it.
    fn entered_indexes(&mut self, t: &Table, old: Option<&[u8]>, new: &[u8]) -> Result<()> {
        if !cc::checks_index_entry(self.protocol) {
            return Ok(());
        }
        let s = &t.schema;
        let moved = |i: &usize| {
            t.physical
                || old.is_none_or(|o| {
                    s.indexes[*i]
                        .columns
                        .iter()
                        .any(|&c| s.read_column(o, c) != s.read_column(new, c))
                })
        };
        let first = if old.is_none() { 0 } else { 1 };
        match cc::on_index_enter(self, t, (first..t.indexes.len()).filter(moved)) {
            Ok(()) => Ok(()),
            Err(reason) => Err(self.fail(reason)),
        }
    }

    /// Releases our write lock on `v`, only if it is still ours: once we are Aborted, another
    /// writer may already have taken it over (Hekaton §2.6) — never clobber that.
    fn unlock_version(&self, v: &Version) {
        let _ = v.end.compare_exchange(
            self.id.word(),
            INFINITY,
            Ordering::AcqRel,
            Ordering::Acquire,
        );
    }

    /// Waits until every commit dependency has been reported (Hekaton §3.2: "T can proceed
    /// ... if either its CommitDepCounter is zero or its AbortNow flag is set"). Err when a
    /// transaction we depend on aborted.
    pub(crate) fn await_deps(&self) -> std::result::Result<(), AbortReason> {
        if !self.took_deps.get() {
            return Ok(());
        }
        let slot = self.slot();
        let backoff = crossbeam_utils::Backoff::new();
        let mut waited = false;
        loop {
            match slot.deps.pending() {
                (_, true) => return Err(AbortReason::CommitDependency),
                (0, false) => return Ok(()),
                _ if !waited => {
                    waited = true;
                    bump(&slot.stats.commit_dep_waits, 1);
                }
                _ => backoff.snooze(),
            }
        }
    }

    /// Aborts the transaction for `reason` and returns the matching error.
    pub(crate) fn fail(&mut self, reason: AbortReason) -> Error {
        self.rollback(reason);
        Error::SerializationFailure(reason)
    }

    /// Finds the version of `tid` that a write applies to: the chain head if it is visible to
    /// us (or our own), else a write-write conflict. Under Read Committed a head committed after
    /// our statement time is simply the latest committed version.
    fn write_target(&mut self, t: &Table, tid: TupleId) -> Result<(*mut Version, bool)> {
        if self.protocol.single_version() {
            if let Some(n) = self.silo_pending(t.id, tid) {
                return Ok((n, true));
            }
        }
        let head = self.stable_head(t, tid);
        // SAFETY: pinned.
        let Some(h) = (unsafe { head.as_ref() }) else {
            return Ok((ptr::null_mut(), false));
        };
        if self.is_mine(h) {
            return Ok((head, true));
        }
        if self.protocol.single_version() {
            // The latest committed version, whatever its time (no snapshot); an uncommitted
            // one is another transaction's insert, which holds the record (or, Begin =
            // INFINITY, has just aborted and is being unlinked: a conflict all the same).
            let b = h.begin.load(Ordering::Acquire);
            if crate::version::is_txn(b) || b == INFINITY {
                return Err(self.fail(cc::write_conflict(self.protocol)));
            }
            return Ok((head, false));
        }
        let rt = if self.isolation == Isolation::ReadCommitted {
            self.db.clock.now()
        } else {
            self.begin_ts
        };
        if self.waiting_resolver().visible(h, rt) {
            return Ok((head, false));
        }
        // Not visible: an uncommitted or a newer committed version (first-writer-wins), or a
        // version already superseded by someone else.
        Err(self.fail(AbortReason::WriteWriteConflict))
    }

    /// Inserts a row (`values`: one per column, in column order).
    pub fn insert<V: Values + ?Sized>(&mut self, t: &TableRef, values: &V) -> Result<()> {
        self.begin_write(t)?;
        let size = t.schema.row_size;
        let mut row = std::mem::take(&mut self.local.row_buf);
        row.clear();
        row.resize(size, 0);
        let r = t.schema.encode_row(values, &mut row);
        let out = r.and_then(|_| self.insert_encoded(t, &row));
        self.local.row_buf = row;
        out
    }

    /// Inserts a row given in the table's row layout (recovery).
    pub(crate) fn insert_raw(&mut self, t: &TableRef, row: &[u8]) -> Result<()> {
        self.begin_write(t)?;
        self.insert_encoded(t, row)
    }

    fn insert_encoded(&mut self, t: &Table, row: &[u8]) -> Result<()> {
        let mut key = std::mem::take(&mut self.local.key_buf);
        t.schema.encode_key_from_row(0, row, &mut key);
        let r = self.insert_keyed(t, row, &key);
        self.local.key_buf = key;
        r
    }

    /// A fresh tuple id for `t`, from this slot's reserved range, refilled with
    /// `TID_CHUNK` ids by one shared fetch-add when it runs out. Ids reserved and never used
    /// are holes in the indirection array (entries that stay null), as are those of a lost
    /// insert race. `None`: the table is full.
    fn fresh_tid(&mut self, t: &Table) -> Option<TupleId> {
        let slot = self.slot();
        let ranges = &mut self.local.tid_ranges;
        let i = match ranges.iter().position(|r| r.0 == t.id) {
            Some(i) => i,
            None => {
                ranges.push((t.id, 0, 0));
                ranges.len() - 1
            }
        };
        let r = &mut ranges[i];
        if r.1 == r.2 {
            bump(&slot.stats.global_rmw, 1);
            let first = t.reserve_fresh_tids(TID_CHUNK);
            *r = (t.id, first, first.saturating_add(TID_CHUNK));
        }
        let tid = r.1;
        r.1 += 1;
        t.claim_tid(tid)
    }

    fn insert_keyed(&mut self, t: &Table, row: &[u8], key: &[u8]) -> Result<()> {
        let dup = || Error::DuplicateKey {
            table: t.schema.name.clone(),
            index: "primary".into(),
        };
        self.check_unique(t, row, None)?;
        let slot = self.slot();
        loop {
            let tid = match t.indexes[0].get_unique(key) {
                Some(tid) => tid,
                None => {
                    let Some(tid) = self.fresh_tid(t) else {
                        return Err(Error::Unsupported(format!(
                            "table `{}` is full",
                            t.schema.name
                        )));
                    };
                    let n = self.new_version(t, tid, row, ptr::null_mut(), ptr::null());
                    let Some(e) = t.entry(tid) else {
                        return Err(Error::Unsupported("tuple id space exhausted".into()));
                    };
                    // A fresh tuple id: no one reads its master yet.
                    self.write_master(t, tid, ptr::null(), Some(row));
                    e.store(n, Ordering::Release);
                    bump(&slot.stats.record_rmw, 1);
                    match t.indexes[0].insert_unique(key, tid) {
                        Ok(()) => {
                            return self.finish_write(t, tid, n, ptr::null_mut(), None, row, None);
                        }
                        Err(_) => {
                            // Lost a race to insert this key: the tuple id stays unused.
                            e.store(ptr::null_mut(), Ordering::Release);
                            // SAFETY: n was reachable only through this unindexed tuple id;
                            // only whole-table walks (chain_stats, pinned) can have seen it.
                            unsafe { self.discard_version(t, n, true) };
                            continue;
                        }
                    }
                }
            };
            let (head, mine) = self.write_target(t, tid)?;
            // SAFETY: pinned.
            match unsafe { head.as_ref() } {
                None => {
                    // A tuple whose versions were all aborted or collected: claim it.
                    let n = self.new_version(t, tid, row, ptr::null_mut(), ptr::null());
                    let Some(e) = t.entry(tid) else { continue };
                    bump(&slot.stats.record_rmw, 1);
                    if e.compare_exchange(ptr::null_mut(), n, Ordering::AcqRel, Ordering::Acquire)
                        .is_ok()
                    {
                        // The claim makes us the master's only writer (no version of the
                        // tuple is visible to anyone).
                        self.write_master(t, tid, ptr::null(), Some(row));
                        return self.finish_write(t, tid, n, ptr::null_mut(), None, row, None);
                    }
                    // SAFETY: never published.
                    unsafe { self.discard_version(t, n, false) };
                    return Err(self.fail(AbortReason::WriteWriteConflict));
                }
                Some(h) if mine => {
                    if !h.is_tombstone() {
                        return Err(self.silo_unless_stale(dup()));
                    }
                    // We deleted this row earlier in this transaction: revive our own version.
                    // Under `physical` the entries of what it held go first (it may never
                    // have had them, if it was born a tombstone: removing is idempotent).
                    self.remove_entries(t, head, h.data());
                    if t.in_place.is_some() {
                        self.write_master(t, tid, h.next.load(Ordering::Acquire), Some(row));
                    } else {
                        let extra = t.overwrite_own(h, row, &self.guard);
                        self.account_blobs(extra);
                    }
                    h.tombstone.store(false, Ordering::Release);
                    self.index_secondary(t, tid, head, None, row, true);
                    if let Some(rec) = self.recording.as_mut() {
                        rec.note_write(&t.schema, t.id, row, crate::history::WriteKind::Update);
                    }
                    return self.entered_indexes(t, None, row);
                }
                Some(h) => {
                    if !h.is_tombstone() {
                        self.note_read(t, head);
                        self.raise()?;
                        return Err(self.silo_unless_stale(dup()));
                    }
                    self.note_read(t, head);
                    self.raise()?;
                    if self.protocol.single_version() {
                        // Buffered like an update: installed over the tombstone at commit
                        // (2PL write-locks the tombstone first).
                        if cc::locks_on_write(self.protocol) {
                            if let Err(reason) = self.lock_for_write(h) {
                                return Err(self.fail(reason));
                            }
                        }
                        let n = self.new_version(t, tid, row, ptr::null_mut(), ptr::null());
                        return self.finish_write(
                            t,
                            tid,
                            n,
                            head,
                            Some(crate::history::WriteKind::Insert),
                            row,
                            None,
                        );
                    }
                    if let Err(reason) = self.lock_for_write(h) {
                        return Err(self.fail(reason));
                    }
                    #[cfg(test)]
                    tests::pause_point(tests::Pause::ReviveTombstone);
                    let n = self.new_version(t, tid, row, t.next_for_new(head), head);
                    // Install with a CAS, not a store: GC may just have cut this deleted row's
                    // whole chain (entry → null, tombstone freed after the epoch), and a store
                    // would link our version to freed memory. Losing that race (or finding an
                    // aborted writer's version still on top) is a write-write conflict.
                    bump(&self.slot().stats.record_rmw, 1);
                    let installed = t.entry(tid).is_some_and(|e| t.publish_cas(e, head, n));
                    if !installed {
                        self.unlock_version(h);
                        // SAFETY: never published.
                        unsafe { self.discard_version(t, n, false) };
                        return Err(self.fail(AbortReason::WriteWriteConflict));
                    }
                    self.write_master(t, tid, head, Some(row));
                    return self.finish_write(
                        t,
                        tid,
                        n,
                        head,
                        Some(crate::history::WriteKind::Insert),
                        row,
                        None,
                    );
                }
            }
        }
    }

    /// A new version of `tid` holding `row` (under in-place storage a header: the caller
    /// writes `row` into the master with `write_master` once it may).
    /// `prev`: the version it supersedes (null for a new row), locked by us.
    fn new_version(
        &self,
        t: &Table,
        tid: TupleId,
        row: &[u8],
        next: *mut Version,
        prev: *const Version,
    ) -> *mut Version {
        let space = crate::version::space::for_slot(self.db.config.memory_spaces, self.slot_idx);
        let (n, extra) = t.alloc_version(self.id.word(), tid, row, next, space, prev);
        let slot = self.slot();
        bump(&slot.stats.versions_allocated, 1);
        bump(
            &slot.stats.version_bytes_allocated,
            (t.version_bytes() + extra) as u64,
        );
        n
    }

    /// In-place storage (`version/master.rs`): as the owner of the newest version's lock,
    /// makes `row` the master's row (`None`: leaves it, a delete), after giving `prev`, the
    /// version the newest supersedes (null: none), the image that keeps its values.
    /// Nothing under other storage.
    fn write_master(&mut self, t: &Table, tid: TupleId, prev: *const Version, row: Option<&[u8]>) {
        let Some(kind) = t.in_place else { return };
        let Some(m) = t.master(tid) else { return };
        // SAFETY: pinned; `prev` is locked by us (superseded by our version), so not freed.
        if let Some(p) = unsafe { prev.as_ref() } {
            let mut scratch = std::mem::take(&mut self.local.image_buf);
            let old = m.owned();
            let new = row.unwrap_or(old);
            let bytes = crate::version::master::cover(
                kind,
                p,
                old,
                new,
                &t.columns,
                &mut scratch,
                &self.guard,
            );
            self.local.image_buf = scratch;
            if bytes > 0 {
                bump(&self.slot().stats.version_bytes_allocated, bytes as u64);
            }
        }
        if let Some(row) = row {
            m.write(|d| d.copy_from_slice(row));
        }
    }

    /// A new version with `row` replacing `head`: chained to it on multi-version storage (as
    /// its `next` under N2O; under O2N it ends the chain), alone on single-version storage.
    fn replacing_version(
        &self,
        t: &Table,
        tid: TupleId,
        row: &[u8],
        head: *mut Version,
    ) -> *mut Version {
        let next = if self.protocol.single_version() {
            ptr::null_mut()
        } else {
            t.next_for_new(head)
        };
        self.new_version(t, tid, row, next, head)
    }

    /// Counts `bytes` allocated for versions besides their blocks (non-inline blobs).
    fn account_extra(&self, bytes: usize) {
        if bytes > 0 {
            bump(&self.slot().stats.version_bytes_allocated, bytes as u64);
        }
    }

    /// Counts the blobs an own version's overwrite made and freed (`Table::overwrite_own`).
    fn account_blobs(&self, (made, freed): (usize, usize)) {
        self.account_extra(made);
        if freed > 0 {
            bump(&self.slot().stats.version_bytes_reclaimed, freed as u64);
        }
    }

    /// Frees `n`, a version of ours that will never commit, with the non-inline blobs it held
    /// the last references to, and counts them reclaimed: at once if it was never published,
    /// else after the epoch (readers may be on it).
    ///
    /// # Safety
    /// `n` is our version of `t`, unreachable for threads that pin from now on (for
    /// `published`) or never published, and discarded once.
    unsafe fn discard_version(&self, t: &Table, n: *mut Version, published: bool) {
        let mut zeroed = Vec::new();
        let blobs = (*n).drop_blob_refs(&mut zeroed);
        let token = (*n).token() | Version::BLOBS_DROPPED;
        let slot = self.slot();
        bump(&slot.stats.versions_reclaimed, 1);
        bump(
            &slot.stats.version_bytes_reclaimed,
            (t.version_bytes() + blobs) as u64,
        );
        let p = n as usize;
        let free = move || {
            Version::free_token(p as *mut Version, token);
            for b in zeroed {
                crate::version::non_inline::dealloc_blob(b);
            }
        };
        if published {
            self.guard.defer_unchecked(free);
        } else {
            free();
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn finish_write(
        &mut self,
        t: &Table,
        tid: TupleId,
        new: *mut Version,
        old: *mut Version,
        kind: Option<crate::history::WriteKind>,
        row: &[u8],
        before: Option<&[u8]>,
    ) -> Result<()> {
        self.local.write_set.push(WriteRecord {
            table: t.id,
            tid,
            new,
            old,
        });
        self.index_secondary(t, tid, new, before, row, false);
        if let Some(rec) = self.recording.as_mut() {
            rec.note_write(
                &t.schema,
                t.id,
                row,
                kind.unwrap_or(crate::history::WriteKind::Insert),
            );
        }
        self.entered_indexes(t, before, row)
    }

    /// Adds the secondary-index entries of `row`, the data of version `v` (idempotent for
    /// keys already present). `before`: the data `row` supersedes (an update's), whose
    /// entries exist already; under logical pointers (thesis §5.6) entries are never removed,
    /// and an index whose key the update leaves unchanged is not touched: they cost index
    /// work only when a key changes. Under `physical` a new version needs an entry in every
    /// index; `in_place` says `v` itself held `before` (our own version, changed again), so
    /// only a changed key's entry moves.
    fn index_secondary(
        &mut self,
        t: &Table,
        tid: TupleId,
        v: *const Version,
        before: Option<&[u8]>,
        row: &[u8],
        in_place: bool,
    ) {
        if t.indexes.len() == 1 {
            return;
        }
        let mut key = std::mem::take(&mut self.local.key_buf2);
        let mut buf = std::mem::take(&mut self.local.entry_buf);
        for i in 1..t.indexes.len() {
            if let Some(b) = before {
                if t.schema.same_key(i, b, row) {
                    if in_place || !t.physical {
                        continue;
                    }
                } else if in_place {
                    t.remove_entry(i, v, b, &mut key, &mut buf);
                }
            }
            t.schema.encode_key_from_row(i, row, &mut key);
            t.add_entry(i, &key, tid, v, row, &mut buf);
        }
        self.local.key_buf2 = key;
        self.local.entry_buf = buf;
    }

    /// `Table::remove_entries` with the transaction's scratch buffers.
    fn remove_entries(&mut self, t: &Table, v: *const Version, row: &[u8]) {
        let mut key = std::mem::take(&mut self.local.key_buf2);
        let mut buf = std::mem::take(&mut self.local.entry_buf);
        t.remove_entries(v, row, &mut key, &mut buf);
        self.local.key_buf2 = key;
        self.local.entry_buf = buf;
    }

    /// Write-time uniqueness check of the unique secondary indexes for `row` of tuple `own`.
    /// (Re-checked at commit, see `cc/mvocc.rs`.)
    fn check_unique(&mut self, t: &Table, row: &[u8], own: Option<TupleId>) -> Result<()> {
        for i in 1..t.indexes.len() {
            if !t.schema.indexes[i].unique {
                continue;
            }
            match crate::cc::mvocc::unique_holder(self, t, i, row, own, None) {
                crate::cc::mvocc::UniqueCheck::Free => {}
                crate::cc::mvocc::UniqueCheck::Taken => {
                    let e = Error::DuplicateKey {
                        table: t.schema.name.clone(),
                        index: t.schema.indexes[i].name.clone(),
                    };
                    return Err(self.silo_unless_stale(e));
                }
                crate::cc::mvocc::UniqueCheck::Contended => {
                    return Err(self.fail(AbortReason::UniqueConflict))
                }
            }
        }
        Ok(())
    }

    /// The live row with primary key `key` that a write applies to: its tuple id, the chain
    /// head (the version to supersede, or our own version) and whether the head is ours.
    /// `NotFound` if there is no such row in our snapshot (recorded as a point read).
    fn live_row_for_write<K: Values + ?Sized>(
        &mut self,
        t: &Table,
        key: &K,
    ) -> Result<(TupleId, *mut Version, bool)> {
        self.begin_write(t)?;
        let mut kb = std::mem::take(&mut self.local.key_buf);
        let enc = t.schema.encode_key_values(0, key, &mut kb);
        self.local.key_buf = kb;
        enc?;
        self.live_row_at_key(t)
    }

    /// `live_row_for_write` for the primary key already encoded in `local.key_buf`.
    fn live_row_at_key(&mut self, t: &Table) -> Result<(TupleId, *mut Version, bool)> {
        let not_found = |t: &Table| Error::NotFound {
            table: t.schema.name.clone(),
        };
        let Some(tid) = self.primary_tid(t) else {
            self.note_miss(t, false);
            return Err(self.silo_unless_stale(not_found(t)));
        };
        let (head, mine) = self.write_target(t, tid)?;
        // SAFETY: pinned.
        match unsafe { head.as_ref() } {
            Some(h) if !h.is_tombstone() => Ok((tid, head, mine)),
            h => {
                if h.is_some() && !mine {
                    self.note_read(t, head);
                }
                self.note_miss(t, false);
                Err(self.silo_unless_stale(not_found(t)))
            }
        }
    }

    /// Updates the row with primary key `key` through `f`, which sees the current values and
    /// sets new ones. Nothing is changed if `f` fails.
    pub fn update_with<K: Values + ?Sized>(
        &mut self,
        t: &TableRef,
        key: &K,
        f: impl FnOnce(&mut RowMut<'_>) -> Result<()>,
    ) -> Result<()> {
        let (tid, head, mine) = self.live_row_for_write(t, key)?;
        self.update_found(t, tid, head, mine, f)
    }

    /// Recovery: the row with encoded primary key `key` becomes `row` (inserted, or
    /// replacing the row there), or is deleted if `row` is `None` (nothing if there is none).
    pub(crate) fn replay_set(
        &mut self,
        t: &TableRef,
        key: &[u8],
        row: Option<&[u8]>,
    ) -> Result<()> {
        let found = self.replay_find(t, key);
        match (found, row) {
            (Ok((tid, head, mine)), Some(row)) => self.update_found(t, tid, head, mine, |r| {
                r.data.copy_from_slice(row);
                Ok(())
            }),
            (Ok((tid, head, mine)), None) => self.delete_found(t, tid, head, mine),
            (Err(Error::NotFound { .. }), Some(row)) => self.insert_raw(t, row),
            (Err(Error::NotFound { .. }), None) => Ok(()),
            (Err(e), _) => Err(e),
        }
    }

    /// Recovery: applies `f` to the bytes of the row with encoded primary key `key`
    /// (`Error::NotFound` if there is none).
    pub(crate) fn replay_update(
        &mut self,
        t: &TableRef,
        key: &[u8],
        f: impl FnOnce(&mut [u8]) -> Result<()>,
    ) -> Result<()> {
        let (tid, head, mine) = self.replay_find(t, key)?;
        self.update_found(t, tid, head, mine, |r| f(r.data))
    }

    /// Recovery: the live row with encoded primary key `key`, write-locked as for a write.
    fn replay_find(&mut self, t: &TableRef, key: &[u8]) -> Result<(TupleId, *mut Version, bool)> {
        self.begin_write(t)?;
        self.local.key_buf.clear();
        self.local.key_buf.extend_from_slice(key);
        self.live_row_at_key(t)
    }

    fn update_found(
        &mut self,
        t: &Table,
        tid: TupleId,
        head: *mut Version,
        mine: bool,
        f: impl FnOnce(&mut RowMut<'_>) -> Result<()>,
    ) -> Result<()> {
        let mut ob = std::mem::take(&mut self.local.old_buf);
        let r = self.update_head(t, tid, head, mine, &mut ob, f);
        self.local.old_buf = ob;
        r
    }

    /// `update_found` with `ob`, scratch for the row of `head` under in-place storage.
    fn update_head(
        &mut self,
        t: &Table,
        tid: TupleId,
        head: *mut Version,
        mine: bool,
        ob: &mut Vec<u8>,
        f: impl FnOnce(&mut RowMut<'_>) -> Result<()>,
    ) -> Result<()> {
        // SAFETY: pinned; live_row_for_write returned a non-null head.
        let h = unsafe { &*head };
        let old = t.row(h, ob);
        if mine {
            let (row, r) = self.scratch_update(t, tid, old, f);
            let mut r = r;
            if r.is_ok() {
                self.index_secondary(t, tid, head, Some(old), &row, true);
                // MVTO: the indexes the row moves into, checked once their entries exist;
                // `h` still holds the old values.
                r = self.entered_indexes(t, Some(old), &row);
            }
            if r.is_ok() {
                if t.in_place.is_some() {
                    self.write_master(t, tid, h.next.load(Ordering::Acquire), Some(&row));
                } else {
                    let extra = t.overwrite_own(h, &row, &self.guard);
                    self.account_blobs(extra);
                }
                if let Some(rec) = self.recording.as_mut() {
                    rec.note_write(&t.schema, t.id, &row, crate::history::WriteKind::Update);
                }
            }
            self.local.row_buf = row;
            return r;
        }
        // Versions not holding the row as it is written (in place; non-inline stored
        // form) are made from a row built in scratch.
        if t.in_place.is_some() || t.ni.is_some() {
            return self.update_in_place(t, tid, head, old, f);
        }
        // Build the new version directly (one row copy): a failing f frees the unpublished
        // version, so nothing is left behind. On single-version storage it stays private
        // until commit (a buffered write; 2PL holds the write lock meanwhile, Silo takes it
        // at commit) and is installed alone, never chained.
        let silo = self.protocol.single_version();
        let locks = cc::locks_on_write(self.protocol);
        let n = self.replacing_version(t, tid, old, head);
        // SAFETY: n is fresh and unpublished; only we reference it.
        let r = f(&mut RowMut {
            schema: &t.schema,
            data: unsafe { (*n).data_mut() },
        });
        // SAFETY: the mutable borrow above has ended; n is still ours alone.
        let new_row = unsafe { (*n).data() };
        let r = r.and_then(|_| self.check_unique_changed(t, old, new_row, tid));
        let r = r.and_then(|_| {
            if !locks {
                return Ok(());
            }
            self.lock_for_write(h).map_err(Error::SerializationFailure)
        });
        if let Err(e) = r {
            // SAFETY: never published.
            unsafe { self.discard_version(t, n, false) };
            if let Error::SerializationFailure(reason) = e {
                return Err(self.fail(reason));
            }
            return Err(e);
        }
        if !silo {
            if let Some(e) = t.entry(tid) {
                t.publish(e, head, n);
            }
        }
        self.finish_write(
            t,
            tid,
            n,
            head,
            Some(crate::history::WriteKind::Update),
            new_row,
            Some(old),
        )
    }

    /// An update of another transaction's version `head` (whose row is `old`) under
    /// in-place storage or non-inline attributes: the new row is built in a scratch buffer,
    /// then the version (a header, or the stored form) is published and, in place, the
    /// master written (`write_master`).
    fn update_in_place(
        &mut self,
        t: &Table,
        tid: TupleId,
        head: *mut Version,
        old: &[u8],
        f: impl FnOnce(&mut RowMut<'_>) -> Result<()>,
    ) -> Result<()> {
        // SAFETY: pinned; a live head.
        let h = unsafe { &*head };
        let (row, r) = self.scratch_update(t, tid, old, f);
        let r = r.and_then(|_| self.lock_for_write(h).map_err(Error::SerializationFailure));
        if let Err(e) = r {
            self.local.row_buf = row;
            if let Error::SerializationFailure(reason) = e {
                return Err(self.fail(reason));
            }
            return Err(e);
        }
        let n = self.replacing_version(t, tid, &row, head);
        if let Some(e) = t.entry(tid) {
            t.publish(e, head, n);
        }
        self.write_master(t, tid, head, Some(&row));
        let r = self.finish_write(
            t,
            tid,
            n,
            head,
            Some(crate::history::WriteKind::Update),
            &row,
            Some(old),
        );
        self.local.row_buf = row;
        r
    }

    /// Applies `f` to a copy of `old` (in the slot's row buffer, which the caller gives
    /// back) so a failing `f` leaves nothing behind, and checks the unique keys it changes.
    fn scratch_update(
        &mut self,
        t: &Table,
        tid: TupleId,
        old: &[u8],
        f: impl FnOnce(&mut RowMut<'_>) -> Result<()>,
    ) -> (Vec<u8>, Result<()>) {
        let mut row = std::mem::take(&mut self.local.row_buf);
        row.clear();
        row.extend_from_slice(old);
        let r = f(&mut RowMut {
            schema: &t.schema,
            data: &mut row,
        });
        let r = r.and_then(|_| self.check_unique_changed(t, old, &row, tid));
        (row, r)
    }

    fn check_unique_changed(
        &mut self,
        t: &Table,
        old: &[u8],
        new: &[u8],
        tid: TupleId,
    ) -> Result<()> {
        let changed = (1..t.indexes.len()).any(|i| {
            t.schema.indexes[i].unique
                && t.schema.indexes[i]
                    .columns
                    .iter()
                    .any(|&c| t.schema.read_column(old, c) != t.schema.read_column(new, c))
        });
        if changed {
            self.check_unique(t, new, Some(tid))
        } else {
            Ok(())
        }
    }

    /// Sets the given columns (by position) of the row with primary key `key`.
    pub fn update<K: Values + ?Sized, V: ToValueRef>(
        &mut self,
        t: &TableRef,
        key: &K,
        sets: &[(usize, V)],
    ) -> Result<()> {
        self.update_with(t, key, |row| {
            for (c, v) in sets {
                row.set(*c, v.to_value_ref())?;
            }
            Ok(())
        })
    }

    /// Deletes the row with primary key `key`.
    pub fn delete<K: Values + ?Sized>(&mut self, t: &TableRef, key: &K) -> Result<()> {
        let (tid, head, mine) = self.live_row_for_write(t, key)?;
        self.delete_found(t, tid, head, mine)
    }

    fn delete_found(
        &mut self,
        t: &Table,
        tid: TupleId,
        head: *mut Version,
        mine: bool,
    ) -> Result<()> {
        // SAFETY: pinned; live_row_for_write returned a non-null head.
        let h = unsafe { &*head };
        if mine {
            h.tombstone.store(true, Ordering::Release);
            if let Some(rec) = self.recording.as_mut() {
                let mut rb = Vec::new();
                rec.note_write(
                    &t.schema,
                    t.id,
                    t.row(h, &mut rb),
                    crate::history::WriteKind::Delete,
                );
            }
            return Ok(());
        }
        let silo = self.protocol.single_version();
        if cc::locks_on_write(self.protocol) {
            if let Err(reason) = self.lock_for_write(h) {
                return Err(self.fail(reason));
            }
        }
        let mut ob = std::mem::take(&mut self.local.old_buf);
        let n = self.replacing_version(t, tid, t.row(h, &mut ob), head);
        // SAFETY: unpublished.
        unsafe { (*n).tombstone.store(true, Ordering::Release) };
        if !silo {
            if let Some(e) = t.entry(tid) {
                t.publish(e, head, n);
            }
        }
        // The deleted version keeps its values (the master does not change).
        self.write_master(t, tid, head, None);
        self.local.write_set.push(WriteRecord {
            table: t.id,
            tid,
            new: n,
            old: head,
        });
        if let Some(rec) = self.recording.as_mut() {
            rec.note_write(
                &t.schema,
                t.id,
                t.row(h, &mut ob),
                crate::history::WriteKind::Delete,
            );
        }
        self.local.old_buf = ob;
        Ok(())
    }

    // ------------------------------------------------------------------ end

    /// Commits, and in a durable database waits until the commit is durable (group commit,
    /// `log/`). On a serialization failure the transaction is aborted and the error says why.
    pub fn commit(self) -> Result<()> {
        let db = self.db;
        let ticket = self.commit_deferred()?;
        db.wait_durable(ticket)
    }

    /// Commits without waiting for durability: the changes are visible to other
    /// transactions at once, and the commit is durable (may be acknowledged to a client)
    /// once `Database::is_durable(ticket)`. For a memory-only database this is `commit`.
    pub fn commit_deferred(mut self) -> Result<CommitTicket> {
        if self.status != Status::Active {
            return Err(Error::TransactionClosed);
        }
        cc::commit(&mut self).map(|epoch| CommitTicket { epoch })
    }

    /// Aborts (a user abort).
    pub fn abort(mut self) {
        if self.status == Status::Active {
            self.rollback(AbortReason::UserAbort);
        }
    }

    /// Undoes every write, marks the transaction aborted and releases its slot's ids.
    pub(crate) fn rollback(&mut self, reason: AbortReason) {
        if self.status != Status::Active {
            return;
        }
        let slot = self.slot();
        // Only a Preparing transaction is registered with (`TxnTable::depend`), so one that
        // aborts while Active has no dependents and skips the report's lock.
        let prepared = slot.is_preparing();
        cc::on_abort(self);
        slot.set_aborted();
        if prepared && self.db.config.speculates() {
            // Cascading abort (Hekaton §2.7): whoever read our versions speculatively aborts.
            self.db.txns.report(self.slot_idx, self.id, false);
        }
        #[cfg(test)]
        tests::pause_point(tests::Pause::Rollback);
        let writes = std::mem::take(&mut self.local.write_set);
        for w in writes.iter().rev() {
            let t = self.db.table_by_id(w.table);
            // SAFETY: our own versions; we hold the lock on `old`.
            unsafe {
                (*w.new).begin.store(INFINITY, Ordering::Release);
                if let Some(e) = t.entry(w.tid) {
                    // Only if our version is still the head: once we are Aborted, a writer
                    // that took our lock on `old` over may already have installed its version
                    // on top of `old` (its `next` is `old`, ours is out of the chain). Putting
                    // `old` back then would lose that writer's update.
                    bump(&slot.stats.record_rmw, 1);
                    t.unpublish(e, w.new, w.old);
                }
                if let Some(old) = w.old.as_ref() {
                    // In-place storage: the master gets the old values back before the
                    // lock is released (no writer takes over an aborted writer's lock).
                    if let Some(kind) = t.in_place {
                        crate::version::master::restore(kind, old);
                    }
                    self.unlock_version(old);
                }
                // `physical`: no entry may outlive the version it points at.
                self.remove_entries(t, w.new, (*w.new).data());
                self.discard_version(t, w.new, true);
            }
        }
        self.local.write_set = writes;
        cc::after_abort(self, reason);
        bump(&slot.stats.aborted[reason.index()], 1);
        self.finish();
    }

    /// Clears per-transaction state, gives the buffers back to the slot and ends the
    /// transaction in the table.
    pub(crate) fn finish(&mut self) {
        self.status = Status::Ended;
        let slot = self.slot();
        if self.took_deps.get() {
            // A report must reach us, not our slot's next transaction (`CommitDeps`).
            let backoff = crossbeam_utils::Backoff::new();
            while slot.deps.pending().0 != 0 {
                backoff.snooze();
            }
        }
        self.local.read_set.clear();
        self.local.scan_set.clear();
        self.local.scan_keys.clear();
        self.local.write_set.clear();
        slot.terminate();
        if self.local.commits_since_gc >= self.db.config.gc_interval_txns {
            self.local.commits_since_gc = 0;
            if self.db.config.gc == crate::config::GcPolicy::Coop {
                crate::gc::coop::refresh_watermark(self.db);
            }
            crate::gc::collect(self.db, slot, &mut self.local.garbage, &self.guard);
        }
        // SAFETY: we own the slot until release below.
        unsafe { std::ptr::swap(slot.local.get(), &mut self.local) };
        self.db.txns.release(self.slot_idx);
    }
}

impl Drop for Transaction<'_> {
    fn drop(&mut self) {
        if self.status == Status::Active {
            self.rollback(AbortReason::UserAbort);
        }
    }
}

type OwnedBound = Bound<Vec<u8>>;

fn as_ref_bound(b: &OwnedBound) -> Bound<&[u8]> {
    match b {
        Bound::Included(k) => Bound::Included(k.as_slice()),
        Bound::Excluded(k) => Bound::Excluded(k.as_slice()),
        Bound::Unbounded => Bound::Unbounded,
    }
}

/// Encodes scan bounds given as key prefixes into byte bounds on the index.
fn encode_bounds<K: Values + ?Sized>(
    schema: &TableSchema,
    index: usize,
    lo: Bound<&K>,
    hi: Bound<&K>,
) -> Result<(OwnedBound, OwnedBound)> {
    let width = schema.indexes[index].columns.len();
    let secondary = index != 0;
    let enc = |k: &K| -> Result<(Vec<u8>, bool)> {
        let mut b = Vec::new();
        let n = schema.encode_key_prefix(index, k, &mut b)?;
        // A full key of a secondary index is still a prefix of its entries (tuple-id suffix).
        Ok((b, n < width || secondary))
    };
    let lo = match lo {
        Bound::Unbounded => Bound::Unbounded,
        Bound::Included(k) => Bound::Included(enc(k)?.0),
        Bound::Excluded(k) => {
            let (b, prefix) = enc(k)?;
            if prefix {
                match prefix_end(&b) {
                    Some(e) => Bound::Included(e),
                    None => Bound::Excluded(vec![0xFF; b.len() + 1]),
                }
            } else {
                Bound::Excluded(b)
            }
        }
    };
    let hi = match hi {
        Bound::Unbounded => Bound::Unbounded,
        Bound::Excluded(k) => Bound::Excluded(enc(k)?.0),
        Bound::Included(k) => {
            let (b, prefix) = enc(k)?;
            if prefix {
                match prefix_end(&b) {
                    Some(e) => Bound::Excluded(e),
                    None => Bound::Unbounded,
                }
            } else {
                Bound::Included(b)
            }
        }
    };
    Ok((lo, hi))
}

/// The row of a version `Transaction::index_hit` returned: inline, or (in-place storage,
/// non-inline attributes) the copy it left in `rb`.
#[inline]
fn hit_row<'a>(t: &Table, r: &'a Version, rb: &'a [u8]) -> &'a [u8] {
    if t.rows_copied() {
        rb
    } else {
        r.data()
    }
}

/// Issues a software prefetch of the cache line at `p` into L1 (PREFETCHT0); never faults,
/// whatever `p` is.
#[inline(always)]
pub(crate) fn prefetch_line(p: *const u8) {
    prefetch_hint::<{ HINT_T0 }>(p);
}

/// Like `prefetch_line`, into L2 only (PREFETCHT1), for lines needed soon but not first.
#[inline(always)]
pub(crate) fn prefetch_line_l2(p: *const u8) {
    prefetch_hint::<{ HINT_T1 }>(p);
}

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::{_MM_HINT_T0 as HINT_T0, _MM_HINT_T1 as HINT_T1};
#[cfg(not(target_arch = "x86_64"))]
const HINT_T0: i32 = 0;
#[cfg(not(target_arch = "x86_64"))]
const HINT_T1: i32 = 0;

#[inline(always)]
fn prefetch_hint<const HINT: i32>(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: prefetch is a hint; it never faults, whatever the address.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<HINT>(p as *const i8)
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}
