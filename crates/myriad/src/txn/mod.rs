//! Transactions: the public operations (get, get via secondary index, insert, update, delete,
//! range scan, commit, abort) and the per-transaction state (read set, scan set, write set).
//! Split by phase: this file holds the state and the operation preamble, `read.rs` the reads,
//! `write.rs` the writes, `end.rs` commit and rollback, `state.rs` what the protocols see of a
//! transaction, `table.rs` the transaction table.
//!
//! The path of one transaction (see ARCHITECTURE.md): `Database::begin` claims a slot of the
//! transaction table (`txn/table.rs`) and registers its read time; an operation finds a tuple id
//! in an index (`index/`), walks the version chain from the indirection entry
//! (`storage/table.rs`) and checks visibility (`cc/visibility.rs`); a write locks the latest
//! version's End field and installs a new version at the chain head; `commit` runs the
//! protocol, post-processes timestamps and hands old versions to GC (`gc/`). The code here
//! never asks which protocol runs: it calls the hooks of `cc/mod.rs` (`cc::begin`,
//! `cc::on_read`, `cc::before_scan`, `cc::on_scan`, `cc::on_miss`, `cc::may_write`,
//! `cc::on_index_enter`, the commit hooks of `end.rs`'s two pipelines, `cc::on_abort`,
//! `cc::after_abort`) and its predicates, passing what they may see of the transaction
//! (`state.rs`, `TxnCtx`), and carries out what they decide; an abort decided inside an index callback is remembered
//! (`doom`) and raised when the operation returns.

mod end;
pub(crate) mod memo;
mod read;
pub(crate) mod state;
pub mod table;
#[cfg(test)]
pub(crate) mod tests;
mod write;

use crate::cc;
use crate::cc::visibility::Resolver;
use crate::config::{Isolation, Protocol};
use crate::error::{AbortReason, Error, Result};
use crate::gc::Garbage;
use crate::history::Recording;
use crate::index::{prefix_end, ScanDirection};
use crate::log::CommitTicket;
use crate::schema::TableSchema;
use crate::shared::Shared;
use crate::storage::{Table, TableRef, TupleId};
use crate::timestamp::Timestamp;
use crate::value::{Row, RowMut, RowRef, ToValueRef, Values};
use crate::version::{Version, INFINITY};
use crossbeam_epoch::Guard;
use std::collections::VecDeque;
use std::ops::Bound;
use std::ptr;
use std::sync::atomic::Ordering;
use table::{bump, Slot, TxnId, PROV_BIT};

thread_local! {
    /// The retry floor of the last transaction this thread ended after a write-write
    /// conflict with a commit (`Transaction::retry_floor`), with the address of its
    /// database's `Shared`: read by `Database::take_retry_floor`, for retry loops that do
    /// not hold the failed transaction (the bench runner).
    static RETRY_FLOOR: std::cell::Cell<Option<(usize, Timestamp)>> =
        const { std::cell::Cell::new(None) };
}

/// Takes the floor `RETRY_FLOOR` holds for `db`, if any.
pub(crate) fn take_retry_floor(db: &Shared) -> Option<Timestamp> {
    let key = db as *const Shared as usize;
    RETRY_FLOOR.with(|c| match c.take() {
        Some((k, ts)) if k == key => Some(ts),
        _ => None,
    })
}

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

pub(crate) use state::{ScanRecord, Sets, TxnCtx, TABLE_SCAN};

/// A table scan re-pins the memory epoch after this many tuple ids.
const TABLE_SCAN_REPIN_TIDS: u64 = 4096;

pub(crate) use crate::storage::WriteRecord;

/// Per-slot reusable state, so a transaction allocates nothing in steady state.
#[derive(Default)]
pub(crate) struct SlotLocal {
    /// The read, scan and write sets, lent to the slot's transaction (`TxnCtx::sets`).
    pub sets: Sets,
    pub key_buf: Vec<u8>,
    pub prefetched: Prefetched,
    /// The transaction's latest primary-key lookups (`Recent`).
    pub recent: Recent,
    pub entry_buf: Vec<u8>,
    pub key_buf2: Vec<u8>,
    /// A range scan's encoded bounds, and the key it stopped at (`Transaction::scan`).
    pub bound_lo: Vec<u8>,
    pub bound_hi: Vec<u8>,
    pub stop_buf: Vec<u8>,
    pub row_buf: Vec<u8>,
    /// In-place storage: the row a read returns (`Table::row`), and the row a write replaces.
    pub read_buf: Vec<u8>,
    pub old_buf: Vec<u8>,
    /// Delta storage: scratch for a version's before-images.
    pub image_buf: Vec<u8>,
    pub garbage: VecDeque<Garbage>,
    /// GC `dead-zone`: tuples this slot's collects could not leave clean, not yet handed to
    /// the vacuum thread that owns them (`gc::vacuum::Vacuum::hand_over`).
    pub written: Vec<(u32, TupleId, bool)>,
    /// GC `dead-zone`: the zones buffer of this slot's collects (`gc::dead_zone::collect`).
    pub zones: crate::version::zones::Zones,
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

/// Every transaction-table slot's `SlotLocal`, in an array parallel to the slots (owned by
/// the `Database`, above the transaction table). A slot's entry is touched only by the
/// thread that owns the slot (`Slot::in_use`).
pub(crate) struct SlotLocals {
    locals: Box<[crossbeam_utils::CachePadded<std::cell::UnsafeCell<SlotLocal>>]>,
}

// SAFETY: an entry is only accessed by the owner of its slot's `in_use` (acquired with a CAS,
// released with a Release store), which serialises all access to it.
unsafe impl Sync for SlotLocals {}
unsafe impl Send for SlotLocals {}

impl SlotLocals {
    /// The buffers of a transaction table of `n` slots.
    pub(crate) fn new(n: usize) -> Self {
        SlotLocals {
            locals: (0..n).map(|_| Default::default()).collect(),
        }
    }

    /// Slot `i`'s buffers. Dereference only while owning slot `i`.
    pub(crate) fn get(&self, i: usize) -> *mut SlotLocal {
        self.locals[i].get()
    }
}

/// A transaction's hold on its slot's `SlotLocal`: a pointer into `SlotLocals`, valid while
/// the transaction owns the slot (from `Transaction::new` until `finish` releases it).
/// Moving the buffers into the transaction and back, as a value, copied about a kilobyte
/// three times per transaction (3.5 % of a YCSB transaction's instructions).
///
/// After `finish` the slot may belong to another transaction at once, yet an operation that
/// failed (its rollback ended the transaction) still puts its scratch buffers back: from then
/// on the transaction reaches buffers of its own (`after`, made on first use, dropped with
/// it), never the slot's.
pub(crate) struct LocalRef<'db> {
    ptr: std::ptr::NonNull<SlotLocal>,
    /// False once `finish` gave the slot back.
    held: bool,
    after: std::cell::OnceCell<Box<SlotLocal>>,
    _slot: std::marker::PhantomData<&'db mut SlotLocal>,
}

// SAFETY: the buffers belong to the slot, which the transaction owns wherever it is moved
// (as when it held them by value); `LocalRef` is not `Sync`, as `SlotLocal` is not.
unsafe impl Send for LocalRef<'_> {}

impl<'db> LocalRef<'db> {
    /// # Safety
    /// The caller owns slot `i` of `locals` until it calls `release`.
    unsafe fn new(locals: &'db SlotLocals, i: usize) -> Self {
        LocalRef {
            ptr: std::ptr::NonNull::new(locals.get(i)).expect("a slot's buffers"),
            held: true,
            after: std::cell::OnceCell::new(),
            _slot: std::marker::PhantomData,
        }
    }

    /// The slot is about to be given back: no access reaches its buffers from here on.
    fn release(&mut self) {
        self.held = false;
    }

    #[cold]
    fn after(&self) -> &SlotLocal {
        self.after.get_or_init(Box::default)
    }

    #[cold]
    fn after_mut(&mut self) -> &mut SlotLocal {
        let _ = self.after.get_or_init(Box::default);
        self.after.get_mut().expect("made above")
    }
}

impl std::ops::Deref for LocalRef<'_> {
    type Target = SlotLocal;
    #[inline(always)]
    fn deref(&self) -> &SlotLocal {
        if self.held {
            // SAFETY: the slot is ours while `held` (`LocalRef::new`).
            unsafe { self.ptr.as_ref() }
        } else {
            self.after()
        }
    }
}

impl std::ops::DerefMut for LocalRef<'_> {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut SlotLocal {
        if self.held {
            // SAFETY: as `deref`; `&mut self` makes this the only borrow through us.
            unsafe { self.ptr.as_mut() }
        } else {
            self.after_mut()
        }
    }
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
    /// In-place and `siro` storage: the tuples' masters, found through the masters'
    /// directory in the same stage as `heads`.
    masters: Vec<*const u8>,
    /// Where `tid_of` looks first: one past its last hit, then the last hit itself
    /// (operations usually follow the prefetch order, reading a row and then updating it,
    /// so the search is one or two comparisons instead of a scan).
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
        self.masters.clear();
        self.cursor.set(0);
    }

    fn key(&self, i: usize) -> &[u8] {
        let start = if i == 0 { 0 } else { self.ends[i - 1] as usize };
        &self.keys[start..self.ends[i] as usize]
    }

    /// Whether lookup `i` found a row and was made for `key` (`i` in range). Inlined into
    /// `tid_of`'s probes: as a called closure it cost ~40 instructions per lookup.
    #[inline(always)]
    fn hit(&self, i: usize, key: &[u8]) -> bool {
        self.tids[i] != NO_TID && same_key(self.key(i), key)
    }

    /// Whether `keys`, encoded as primary keys of `schema` (into `kb`), are this prefetch's
    /// keys in the same order, every one of them kept (none failed to encode).
    fn repeats<K: Values>(&self, schema: &TableSchema, keys: &[K], kb: &mut Vec<u8>) -> bool {
        keys.len() == self.ends.len()
            && keys.iter().enumerate().all(
                |(i, k)| matches!(schema.encoded_key(0, k, kb), Ok(b) if same_key(self.key(i), b)),
            )
    }

    /// The tuple id a prefetch found for encoded primary key `key` of table `table`.
    #[inline]
    fn tid_of(&self, table: u32, key: &[u8]) -> Option<TupleId> {
        if self.table != Some(table) {
            return None;
        }
        let hit = |i: usize| self.hit(i, key);
        let c = self.cursor.get();
        let i = if c < self.tids.len() && hit(c) {
            c
        } else if c > 0 && c <= self.tids.len() && hit(c - 1) {
            // The row the last hit found, again (read, then updated).
            c - 1
        } else {
            (0..self.tids.len()).find(|&i| hit(i))?
        };
        self.cursor.set(i + 1);
        Some(self.tids[i])
    }
}

use crate::schema::same_encoded_key as same_key;

/// The last few primary-key lookups the transaction made through the index, so that a row
/// read and then updated (TPC-C's district, customer and stock rows; the read-modify-write
/// of every benchmark) is looked up once, not twice.
///
/// Sound for the reason `Prefetched` is: a primary index entry maps its key to one tuple id
/// for the life of the table. Only hits are kept. Cleared when a transaction starts.
#[derive(Default)]
pub(crate) struct Recent {
    /// `(table id, key length, tid)` per entry; length 0 marks an empty entry.
    meta: [(u32, u32, TupleId); RECENT],
    keys: [[u8; RECENT_KEY]; RECENT],
    /// The entry the next `keep` overwrites.
    next: usize,
}

/// Lookups `Recent` keeps, and the longest encoded key it keeps (TPC-C's longest primary
/// key, ORDER_LINE's four integers, is 32 bytes).
const RECENT: usize = 4;
const RECENT_KEY: usize = 32;

impl Recent {
    fn clear(&mut self) {
        self.meta = [(0, 0, NO_TID); RECENT];
    }

    /// The tuple id a recent lookup found for encoded primary key `key` of table `table`.
    #[inline]
    fn tid_of(&self, table: u32, key: &[u8]) -> Option<TupleId> {
        if key.is_empty() {
            return None;
        }
        let len = key.len() as u32;
        (0..RECENT)
            .find(|&i| {
                let (t, l, _) = self.meta[i];
                t == table && l == len && same_key(&self.keys[i][..key.len()], key)
            })
            .map(|i| self.meta[i].2)
    }

    /// Keeps a lookup that found `tid` (keys longer than `RECENT_KEY` are not kept).
    #[inline]
    fn keep(&mut self, table: u32, key: &[u8], tid: TupleId) {
        if key.is_empty() || key.len() > RECENT_KEY {
            return;
        }
        let i = self.next;
        self.next = (i + 1) % RECENT;
        self.meta[i] = (table, key.len() as u32, tid);
        self.keys[i][..key.len()].copy_from_slice(key);
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Status {
    Active,
    Ended,
}

/// An open transaction. Dropping it without `commit` aborts it.
pub struct Transaction<'db> {
    /// What the protocols see of it (`txn/state.rs`): ids, timestamps, flags, the sets.
    pub(crate) st: TxnCtx<'db>,
    /// The protocols' per-engine state (`Database::cc`).
    pub(crate) engine_cc: &'db cc::EngineCc,
    /// An abort decided where it could not be returned (inside an index callback, or a
    /// Silo read that met a locked record).
    doomed: std::cell::Cell<Option<AbortReason>>,
    /// The protocol's per-transaction state (`cc::TxnCc`: SSN's stamps, MVTO's `blocked`).
    pub(crate) cc: cc::TxnCc,
    pub(crate) guard: Guard,
    /// The slot's buffers, borrowed for the transaction's life (`LocalRef`).
    pub(crate) local: LocalRef<'db>,
    pub(crate) recording: Option<Box<Recording>>,
    ops_since_repin: u32,
    status: Status,
    /// Write operations started (inserts, updates, deletes), for `command`.
    writes: u64,
    /// The end timestamp drawn with `Source::join_end_ts` and not yet released or
    /// abandoned (`locked-counter`: the commit lock is held; `partial-order`: a group member).
    pub(crate) joined: Option<Timestamp>,
    /// What a commit returns (`CommitTicket::commit_ts`): the end timestamp, or a reader's
    /// read time.
    pub(crate) commit_ts: Timestamp,
    /// After a write-write conflict with a version committed (or Preparing) at some
    /// timestamp: that timestamp, the floor a retry begins at (`Database::run_with`).
    pub(crate) retry_floor: Option<Timestamp>,
    pub(crate) command: Command,
    /// `healing`: a stored-procedure call whose commit can heal it (`commit_healing`).
    /// Whether reads and scans go to the read and scan sets, when the protocol validates
    /// them at this level (`validates_reads`): not for a READ ONLY transaction whose commit
    /// does not validate (`cc::validates_read_only`), where what it kept would never be
    /// read (Stock-Level's 200 order lines and 200 stock rows under `mvocc`).
    keeps_reads: bool,
    healable: bool,
    /// `healing`: the call's last run stopped at an error a stale read may have caused
    /// (`unless_stale_read`); the transaction stays open for its commit to heal it.
    heal_requested: bool,
    /// `healing`: heals this commit made.
    heals: u32,
    /// `healing`: `command` when the call began (`set_healable`), what a heal starts from.
    heal_command: Command,
}

/// Re-pin the memory epoch this often, so a long transaction never holds back reclamation
/// (versions it can see are protected by the visibility watermark, not by the pin).
const REPIN_EVERY_OPS: u32 = 128;

impl<'db> Transaction<'db> {
    pub(crate) fn new(
        db: &'db Shared,
        engine_cc: &'db cc::EngineCc,
        locals: &'db SlotLocals,
        slot_idx: usize,
        opts: TxnOptions,
        protocol: Protocol,
        snapshot_wait: std::time::Duration,
    ) -> Result<Self> {
        let slot = db.txns.slot(slot_idx);
        let id = slot.start(slot_idx);
        // Register a provisional read time before drawing the real one, so the GC watermark
        // computed concurrently can never pass our read time (see gc/epoch.rs). It is
        // flagged: until the real read time replaces it, the dead-zone builder treats it as
        // "reads at any time from here on" (gc/dead_zone.rs).
        slot.begin_ts
            .store(db.clock.now().get() | PROV_BIT, Ordering::SeqCst);
        // SAFETY: we own the slot (acquired in Database::begin_with) until `finish`.
        let mut local = unsafe { LocalRef::new(locals, slot_idx) };
        local.prefetched.clear();
        local.recent.clear();
        local.cc.healing.cache.start(false);
        local.cc.healing.memo.start(false);
        // `mvocc`'s column check: masks are set by a procedure call's commit, for it alone.
        local.cc.mvocc.cols.clear();
        // `partial-order` with slot counts: make the groups complete since readable.
        bump(&slot.stats.global_rmw, db.clock.refresh_for_begin());
        let read_time = db.clock.now();
        // A refused begin still builds the transaction, so that `fail` below ends it and
        // gives the slot back the one way every abort does.
        let (begin, refused) = match cc::begin(
            db,
            slot_idx,
            &mut local.cc,
            protocol,
            opts.read_only,
            read_time,
            snapshot_wait,
        ) {
            Ok(b) => (b, None),
            Err(reason) => (
                cc::Begin {
                    protocol,
                    begin_ts: read_time,
                    tracks_reads: false,
                },
                Some(reason),
            ),
        };
        let cc::Begin {
            protocol,
            begin_ts,
            tracks_reads,
        } = begin;
        // The exact read time replaces the provisional one (it is not lower, so the
        // watermark stays a lower bound). Read Committed reads at the clock per statement:
        // its registration stays provisional.
        if opts.isolation != Isolation::ReadCommitted {
            slot.begin_ts.store(begin_ts.get(), Ordering::Release);
        }
        let recording = db.history.as_ref().map(|_| Box::default());
        let sets = std::mem::take(&mut local.sets);
        let mut tx = Transaction {
            st: TxnCtx {
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
                keys_reads: cc::keys_reads(protocol, &db.config),
                read_filter: cc::keeps_read_filter(protocol, &db.config).then_some(&slot.reads),
                sets,
            },
            engine_cc,
            doomed: std::cell::Cell::new(None),
            cc: cc::TxnCc::new(),
            guard: crossbeam_epoch::pin(),
            local,
            recording,
            ops_since_repin: 0,
            status: Status::Active,
            writes: 0,
            command: Command::None,
            keeps_reads: !opts.read_only || cc::validates_read_only(protocol),
            healable: false,
            heal_requested: false,
            heals: 0,
            heal_command: Command::None,
            joined: None,
            commit_ts: Timestamp::ZERO,
            retry_floor: None,
        };
        match refused {
            Some(reason) => Err(tx.fail(reason)),
            None => Ok(tx),
        }
    }

    /// Whether this transaction's commit would be logged as a procedure call if it is one:
    /// command logging is on and the transaction is serializable in its commit order (so
    /// replaying calls in commit order reproduces the state; a weaker level's call is logged
    /// as rows). `Config::validate` refuses command logging under the protocols whose commit
    /// order is not a serial order (`Protocol::command_log_refusal`); the single-version ones
    /// draw their TIDs in serialization order on such a database (`cc::ordered_commit_tid`).
    pub(crate) fn logs_commands(&self) -> bool {
        self.st.db.config.log == crate::config::LogPolicy::Command
            && self.st.isolation == Isolation::Serializable
            && self.st.protocol.command_log_refusal().is_none()
            && !self.st.read_only
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
        self.st.id.0
    }
    /// The begin (read) timestamp.
    pub fn begin_ts(&self) -> crate::Timestamp {
        self.st.begin_ts
    }
    /// The isolation level.
    pub fn isolation(&self) -> Isolation {
        self.st.isolation
    }

    /// Logs this transaction as its row writes even if it turns out to be one procedure
    /// call: what an ad-hoc transaction (statements, not a call) leaves in a command log
    /// (thesis §4.4.5; `bench --adhoc-pct`). A no-op unless command logging is on.
    pub fn log_as_rows(&mut self) {
        self.command = Command::Mixed;
    }

    pub(crate) fn slot(&self) -> &'db Slot {
        self.st.db.txns.slot(self.st.slot_idx)
    }

    pub(crate) fn resolver(&self) -> Resolver<'_> {
        cc::resolver(&self.st, &self.cc)
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

    /// Re-pins the memory epoch now (operations do it every 128). A transaction kept open
    /// while idle — a long-lived snapshot between statements — calls it now and then, so
    /// its pin does not hold back the freeing of versions the GC cut. What it can still
    /// read is protected by its registered read time, not by the pin.
    pub fn repin(&mut self) {
        if self.may_repin() {
            self.ops_since_repin = 0;
            self.guard.repin();
        }
    }

    /// Whether the memory epoch may be re-pinned (see `took_deps`). Not while a
    /// single-version transaction holds record addresses in its read or write set: it
    /// validates by address (and `healing` compares the record read with the current one),
    /// so a record replaced since it was read must not be freed, and its address reused,
    /// before the commit.
    #[inline]
    fn may_repin(&self) -> bool {
        !self.st.took_deps.get()
            && !(self.st.protocol.single_version()
                && !(self.st.sets.read_set.is_empty() && self.st.sets.write_set.is_empty()))
            // A heal runs with empty sets but keeps buffered writes of its earlier run for
            // reuse (`memo.rs`), whose base records must stay allocated.
            && self.heals == 0
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

    /// Starts an operation on `t`. Inlined into every operation: an active transaction on a
    /// live table of this database (nearly always) takes three compares and no call; the
    /// rest is out of line ([`Self::begin_op_checks`], [`Self::repin_if_due`]).
    #[inline(always)]
    fn begin_op(&mut self, t: &Table) -> Result<()> {
        if self.status != Status::Active
            || t.db_id != self.st.db.id
            // SeqCst as in `begin_op_checks`.
            || t.state.load(Ordering::SeqCst) != crate::storage::table::LIVE
        {
            self.begin_op_checks(t)?;
        }
        self.st.sets.op_reads = self.st.sets.read_set.len() as u32;
        self.ops_since_repin += 1;
        if self.ops_since_repin >= REPIN_EVERY_OPS {
            self.repin_if_due();
        }
        Ok(())
    }

    /// [`Self::begin_op`]'s checks with their errors (the table may also have become live
    /// since the fast path looked: then they pass).
    #[cold]
    #[inline(never)]
    fn begin_op_checks(&self, t: &Table) -> Result<()> {
        if self.status != Status::Active {
            return Err(Error::TransactionClosed);
        }
        if t.db_id != self.st.db.id {
            return Err(Error::UnknownTable(t.schema.name.clone()));
        }
        // SeqCst pairs with `Database::create_index`: it sets the state, then looks for
        // transactions in flight; we claimed our slot, then read the state.
        match t.state.load(Ordering::SeqCst) {
            crate::storage::table::LIVE => Ok(()),
            crate::storage::table::BUILDING => Err(Error::Busy(format!(
                "table `{}` is being rebuilt by CREATE INDEX; retry when it finishes",
                t.schema.name
            ))),
            _ => Err(Error::UnknownTable(format!(
                "{} (a handle from before CREATE INDEX; look the table up again)",
                t.schema.name
            ))),
        }
    }

    /// Every `REPIN_EVERY_OPS` operations: repins the epoch guard where that is safe.
    #[inline(never)]
    fn repin_if_due(&mut self) {
        if self.may_repin() {
            self.ops_since_repin = 0;
            self.guard.repin();
        }
    }

    fn begin_write(&mut self, t: &Table) -> Result<()> {
        self.writes += 1;
        self.begin_op(t)?;
        if self.st.read_only {
            return Err(Error::ReadOnlyTransaction);
        }
        Ok(())
    }

    /// Read time of the current statement: the begin timestamp, or now under Read Committed
    /// and `mv2pl-wait` (`TxnCtx::reads_latest`).
    #[inline]
    fn stmt_ts(&self) -> Timestamp {
        if self.st.reads_latest() {
            self.st.db.clock.now()
        } else {
            self.st.begin_ts
        }
    }

    /// Whether reads go to the read set for validation at commit (`cc::validates_reads`,
    /// and not for a transaction whose commit cannot validate: `keeps_reads`).
    #[inline]
    pub(crate) fn validates_reads(&self) -> bool {
        self.keeps_reads && cc::validates_reads(self.st.protocol, self.st.isolation)
    }

    /// Whether serializable reads take range locks (`cc::takes_range_locks`).
    #[inline]
    fn range_locking(&self) -> bool {
        cc::takes_range_locks(self.st.protocol)
            && self.st.tracks_reads
            && self.st.isolation == Isolation::Serializable
    }
}

/// Where a scan bound's bytes are: in its buffer (`Included`/`Excluded` of `()`), or none.
type BoundIn = Bound<()>;

/// Bound `b` with its bytes in `buf`.
fn bound_in(b: BoundIn, buf: &[u8]) -> Bound<&[u8]> {
    b.map(|()| buf)
}

/// Makes prefix `p` the smallest key above every key it prefixes (`index::prefix_end`, in
/// place); false if there is none (`p` is all 0xFF).
fn into_prefix_end(p: &mut Vec<u8>) -> bool {
    while let Some(last) = p.pop() {
        if last < 0xFF {
            p.push(last + 1);
            return true;
        }
    }
    false
}

/// Encodes scan bounds given as key prefixes into byte bounds on the index, their bytes in
/// `lo_buf` and `hi_buf` (the slot's buffers: a scan allocates nothing for its bounds).
fn encode_bounds<K: Values + ?Sized>(
    schema: &TableSchema,
    index: usize,
    lo: Bound<&K>,
    hi: Bound<&K>,
    lo_buf: &mut Vec<u8>,
    hi_buf: &mut Vec<u8>,
) -> Result<(BoundIn, BoundIn)> {
    let width = schema.indexes[index].columns.len();
    let secondary = index != 0;
    // Whether the encoded key is a prefix of the index's entries.
    let enc = |k: &K, b: &mut Vec<u8>| -> Result<bool> {
        let n = schema.encode_key_prefix(index, k, b)?;
        // A full key of a secondary index is still a prefix of its entries (tuple-id suffix).
        Ok(n < width || secondary)
    };
    let lo = match lo {
        Bound::Unbounded => Bound::Unbounded,
        Bound::Included(k) => {
            enc(k, lo_buf)?;
            Bound::Included(())
        }
        Bound::Excluded(k) => {
            if !enc(k, lo_buf)? {
                Bound::Excluded(())
            } else {
                let len = lo_buf.len();
                if into_prefix_end(lo_buf) {
                    Bound::Included(())
                } else {
                    // All 0xFF: above every key with that prefix.
                    lo_buf.clear();
                    lo_buf.resize(len + 1, 0xFF);
                    Bound::Excluded(())
                }
            }
        }
    };
    let hi = match hi {
        Bound::Unbounded => Bound::Unbounded,
        Bound::Excluded(k) => {
            enc(k, hi_buf)?;
            Bound::Excluded(())
        }
        Bound::Included(k) => {
            if !enc(k, hi_buf)? {
                Bound::Included(())
            } else if into_prefix_end(hi_buf) {
                Bound::Excluded(())
            } else {
                Bound::Unbounded
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

/// Like `prefetch_line`, with the intent to write (PREFETCHW: a line arrives exclusive, so
/// the store that follows needs no second request), for every line covering `[p, p + len)`.
pub(crate) fn prefetch_range_for_write(p: *const u8, len: usize) {
    prefetch_lines::<{ HINT_ET0 }>(p, len, 0);
}

/// `prefetch_line_l2` of the lines covering `[p, p + len)` after the first (which the caller
/// prefetched in an earlier batch).
pub(crate) fn prefetch_rest_l2(p: *const u8, len: usize) {
    prefetch_lines::<{ HINT_T1 }>(p, len, 1);
}

/// Prefetches the lines covering `[p, p + len)` from the `skip`-th on (`p` need not be
/// line-aligned).
#[inline(always)]
fn prefetch_lines<const HINT: i32>(p: *const u8, len: usize, skip: usize) {
    let first = p.wrapping_sub(p as usize % 64);
    let lines = (p as usize % 64 + len).div_ceil(64);
    for l in skip..lines {
        prefetch_hint::<HINT>(first.wrapping_add(l * 64));
    }
}

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::{_MM_HINT_ET0 as HINT_ET0, _MM_HINT_T0 as HINT_T0, _MM_HINT_T1 as HINT_T1};
#[cfg(not(target_arch = "x86_64"))]
const HINT_T0: i32 = 0;
#[cfg(not(target_arch = "x86_64"))]
const HINT_T1: i32 = 0;
#[cfg(not(target_arch = "x86_64"))]
const HINT_ET0: i32 = 0;

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
