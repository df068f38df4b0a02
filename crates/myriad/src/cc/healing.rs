//! Transaction Healing (thesis ch. 3; Wu et al., SIGMOD 2016): `healing`, single-version
//! OCC whose validation locks every record the transaction read or wrote in one global order
//! (a healable call: first only those it wrote, below) and, when a stored-procedure call finds a read stale, heals the call under the locks it
//! already holds instead of aborting it. The commit pipeline is Silo's (`silo.rs`,
//! `txn/end.rs`); this file is its step 1 and the locks it holds.
//!
//! **Lock order** (thesis §3.4.5). An element is a row, `(table, tuple id)` — not a version
//! address: a single-version record is replaced on every commit, so its address is neither a
//! stable identity nor a stable order. Its key is `(rank, table id, tuple id)`; `rank` is
//! the table's position in the validation order the registered procedures' key
//! dependencies give (`procedure::healing::validation_order`, kept per table in
//! `Table::heal_rank` when a procedure is registered), so that re-executing a key-dependent
//! operation mostly needs rows *after* the validation cursor. Every committer under
//! `healing` locks in this order — healed calls and the transactions that run as plain OCC
//! alike — blocking on a lock another committer holds (ordered waits cannot form a cycle),
//! except for a row ordered before the cursor, which gets one try-lock whose failure aborts
//! (`HealLockConflict`, the thesis's no-wait rule, §3.4.2). A wait that outlasts
//! `WAIT_LIMIT` aborts too (`LockConflict`): the rank of a table can change while commits
//! run (a procedure registered mid-run), and a bounded wait keeps that from hanging.
//!
//! **Validation and healing** (Algorithm 1 and 2, `lock_in_order`). The elements are
//! locked from the cursor on; a locked row whose current record is not the one read is
//! inconsistent. For a transaction that cannot heal that is OCC's abort
//! (`read_validation`). A healable stored-procedure call (`Transaction::commit_healing`)
//! instead undoes its buffered writes and insert placeholders, keeps every lock, and
//! re-executes the procedure body: rows it holds read their locked (hence current,
//! consistent) records, rows after the cursor read optimistically and are validated when
//! the cursor reaches them, rows before the cursor are try-locked. Validation then resumes
//! at the cursor. A predicate re-check that fails (a phantom) heals the same way. The call
//! returns the healed execution's results.
//!
//! **Rows only read** [M] (`lock_in_order`'s `defer`, `check_deferred`). A healable call's
//! commit first locks only the rows it writes (its buffered writes are the only elements),
//! and validates its reads after the serialization point as Silo validates reads (current
//! and unlocked or locked by itself, or equal to the current record in the columns the call
//! reads). Only when that fails does it release its locks and lock every element as above.
//! Transactions that run as OCC lock every element.
//!
//! **False invalidations** (§3.4.5, `Config::column_check`, default on). Before a
//! stale element heals, a healable call compares the record it read with the current one in
//! the columns its procedure reads and writes of that table (`TableCols`, from
//! `procedure::healing::column_masks`). Equal there, the element is taken as current: a read
//! is re-pointed to the current record; a buffered write is *rebased* — the columns it does
//! not write are copied from the current record, which it then replaces — provided no
//! differing column is indexed. TPC-C's New-Order reads `w_tax` and Payment writes `w_ytd`
//! of the same WAREHOUSE row: without the check every such overlap is a heal. The history's
//! recorded reads follow the re-pointing (the call read the same values from the current
//! record), so the checker judges the history the commit stands for. An increment-only
//! column (`TableCols::incr`: every `SET` of it in the procedure is `c = c ± e` with `e`
//! free of the row's columns, and nothing else reads it) may differ too, if it is an
//! unindexed INT: the write takes its delta onto the current value — what the increment
//! run again on the current record writes, and all a restoration of it would change
//! (thesis Algorithm 2 restores only what depends on the stale value). Payment's `w_ytd`
//! and `d_ytd`: two Payments of one warehouse no longer heal. A blind column
//! (`TableCols::blind`: set by every statement of the procedure that writes the table, and
//! read by none) may differ as well: the buffered write's value stands, as the call run
//! again would write it. Two Deliveries of one order (TPC-C `--no-inserts`, where the
//! orders stay undelivered) no longer heal over `o_carrier_id` and `ol_delivery_d`.
//!
//! **Access cache** (§3.4.1, `Config::heal_access_cache`, default off: at 2 threads its
//! recording costs TPC-C more than heals gain, docs/healing.md): the tuple each
//! primary-key lookup of the call found (`AccessCache`), so that a heal reaches the rows of
//! unchanged keys without index lookups; and the write effects of its point UPDATEs
//! (`Memo`, spec A.6's memoized re-execution): a heal re-runs the body, but an UPDATE whose
//! inputs are unchanged and whose row still stands in the record it replaced is taken as
//! done, its buffered version kept. What the thesis has and this does not: cached read
//! outputs (a heal reads every row again, through the cached tuple ids — the thesis's
//! restoration of a value-dependent read — where the thesis skips reads the stale one does
//! not reach), and the same for INSERT, DELETE and range operations, which a heal runs
//! again.
//! **Uncommitted inserts** (spec A.4 R4, the thesis's insert scenario 1, §3.4.7): a
//! healable call's read phase (its reads, and the row reads of its updates and deletes)
//! reads past another transaction's uncommitted insert as absent
//! (`Transaction::in_heal_read_phase`); the key or range it looked at is re-checked at commit
//! (`silo::rescan`), which heals the call if the insert committed. A heal's re-run meeting
//! one aborts as under `occ` (`read_validation`).

use crate::error::AbortReason;
use crate::schema::ColumnType;
pub(crate) use crate::schema::TableCols;
use crate::storage::{Table, TupleId};
use crate::txn::state::TxnCtx;
use crate::value::ValueRef;
use crate::version::{is_txn, Version, INFINITY};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// An element's place in the global lock order: (table rank, table id, tuple id).
pub(crate) type Key = crate::txn::state::HealKey;

/// How long a blocking lock wait may last before the commit gives up (see the module doc).
const WAIT_LIMIT: Duration = Duration::from_millis(200);

/// Heals one commit may make before it gives up (`HealGiveUp`): a re-executed range read can
/// keep meeting new rows.
pub(crate) const HEAL_LIMIT: u32 = 16;

/// A slot records its calls' access cache (`AccessCache`, `Memo`) only in the first
/// `RECORD_WINDOW` healable calls after its last heal (and in its first calls). Recording
/// costs every call (≈ 2.3 K instructions per TPC-C transaction, 2 %), and only a call that
/// heals gains from it (an index lookup, or an UPDATE not run again), so where heals are
/// rare (TPC-C at 2 warehouses: a few per thousand calls) it costs more than it saves.
/// A heal in a quiet period runs without a cache, as with `--heal-access-cache false`.
pub(crate) const RECORD_WINDOW: u32 = 32;

impl SlotState {
    /// A healable call begins: whether it records its access cache (`RECORD_WINDOW`), given
    /// that the cache is on (`Config::heal_access_cache`).
    #[inline]
    pub(crate) fn record_access(&mut self, on: bool) -> bool {
        let quiet = self.calls_since_heal;
        self.calls_since_heal = quiet.saturating_add(1);
        on && quiet < RECORD_WINDOW
    }
}

pub(crate) use crate::storage::table::UNRANKED;

/// Per-slot state of `healing`, reused by the slot's transactions.
#[derive(Default)]
pub(crate) struct SlotState {
    /// The records whose lock the commit holds, ascending by key, with the record locked.
    pub(crate) held: Vec<(Key, *const Version)>,
    /// Scratch: the elements of the read and write sets — the sort key (`Key::shifted`, the
    /// low bit set for a buffered write, so a row's reads come before its write), the record
    /// each read, and its read-set position (`WRITTEN` and the write-set position for a
    /// buffered write's).
    elems: Vec<(u128, *const Version, u32)>,
    /// The validation cursor: every element up to it is locked (or was, and left the sets).
    cursor: Option<Key>,
    /// Heals made by the current commit.
    pub(crate) heals: u32,
    /// Every read of the commit is known current at its serialization point: locked by it
    /// (`lock_in_order` without `defer`) or checked after it (`check_deferred`). Step 3's
    /// read-set walk (`silo::validate`) then has nothing to find, and is skipped.
    pub(crate) reads_hold: bool,
    /// Healable calls the slot began since its last heal (`record_access`).
    pub(crate) calls_since_heal: u32,
    /// Rows whose read was re-pointed from one record to the current one by a false
    /// invalidation, `(table, read, current)`: the history's reads follow
    /// (`Transaction::repoint_recorded_reads`).
    pub(crate) repointed: Vec<super::mvocc::Repoint>,
    /// The access cache's tuple ids (`AccessCache`).
    pub(crate) cache: AccessCache,
    /// The access cache's operations: what a heal may reuse without running them (`Memo`).
    pub(crate) memo: Memo,
}

/// The part of the thesis's access cache (§3.4.1) that a heal by re-execution can use: the
/// tuple each primary-key lookup of the call found, so that a heal re-running an operation
/// whose access key did not change reaches its row without an index lookup (the thesis's
/// "skips index lookups while an operation's access key is unchanged"). Keyed by
/// `(table, encoded key)`, not by operation: the same key in any operation is the same row.
/// Sound for the same reason as `txn::Prefetched`: a primary index entry maps its key to
/// one tuple id for the life of the table (entries are never removed or re-pointed), so a
/// cached id is never wrong, only possibly a row deleted since — which the record read from
/// it shows, as after an index lookup. Misses are not cached (a concurrent insert may add
/// the key). The cached operations' outputs and write effects are not kept: a heal re-reads
/// every row (held rows in their locked records) and recomputes every operation.
#[derive(Default)]
pub(crate) struct AccessCache {
    /// The call's lookups are recorded (a healable call with `Config::heal_access_cache`).
    on: bool,
    /// A heal is running: lookups are answered from the cache first.
    answering: bool,
    /// Encoded keys back to back; entry `i`'s key ends at `entries[i].1`.
    keys: Vec<u8>,
    /// `(table id, end of its key in keys, tuple id)`, in the order the call looked them up.
    entries: Vec<(u32, u32, TupleId)>,
    /// Where `lookup` starts: one past its last hit (a heal mostly repeats the first run's
    /// order, so the search is one comparison).
    cursor: usize,
}

/// Entries one call may record: beyond it (a call scanning thousands of rows) new lookups
/// are not cached, which costs a heal only index lookups.
const CACHE_LIMIT: usize = 4096;

impl AccessCache {
    /// Starts a call: recording if `on`, nothing cached.
    pub(crate) fn start(&mut self, on: bool) {
        self.on = on;
        self.answering = false;
        self.keys.clear();
        self.entries.clear();
        self.cursor = 0;
    }

    /// A heal starts: answer lookups from what the call recorded.
    pub(crate) fn heal(&mut self) {
        self.answering = self.on;
        self.cursor = 0;
    }

    /// The call's primary-key lookup of `key` in table `table` found row `tid`.
    #[inline]
    pub(crate) fn record(&mut self, table: u32, key: &[u8], tid: TupleId) {
        if !self.on || self.entries.len() >= CACHE_LIMIT {
            return;
        }
        // During a heal the key may be cached already (`lookup` answered it); only new ones.
        if self.answering && self.find(table, key).is_some() {
            return;
        }
        self.keys.extend_from_slice(key);
        self.entries.push((table, self.keys.len() as u32, tid));
    }

    /// Whether a heal is running (`lookup` answers).
    #[inline]
    pub(crate) fn answering(&self) -> bool {
        self.answering
    }

    /// During a heal: the row the call's earlier lookup of `key` in `table` found.
    #[inline]
    pub(crate) fn lookup(&mut self, table: u32, key: &[u8]) -> Option<TupleId> {
        if !self.answering {
            return None;
        }
        let i = self.find(table, key)?;
        self.cursor = i + 1;
        Some(self.entries[i].2)
    }

    fn find(&self, table: u32, key: &[u8]) -> Option<usize> {
        let n = self.entries.len();
        let hit = |i: usize| {
            let (t, end, _) = self.entries[i];
            let start = if i == 0 { 0 } else { self.entries[i - 1].1 };
            t == table
                && crate::schema::same_encoded_key(&self.keys[start as usize..end as usize], key)
        };
        (self.cursor..n)
            .chain(0..self.cursor.min(n))
            .find(|&i| hit(i))
    }
}

/// The rest of the thesis's access cache (§3.4.1), as spec A.6's memoized re-execution, for
/// the operations whose restoration costs most: a healable call's point `UPDATE`s. Per
/// recorded UPDATE, the buffered version it made (the procedure's frame keeps which
/// operation and its inputs, `procedure::memo`). A heal running the call again takes an
/// UPDATE whose inputs are unchanged and whose row still stands in the record it replaced
/// as done: the buffered version goes back into the write set as it is, nothing is looked
/// up, copied or computed again. Two generations: the run being recorded (`cur`) and the
/// one before it, which a heal reuses from. Reads are not memoized: a heal reads them again
/// through the tuple ids `AccessCache` keeps (the thesis's restore of a value-dependent
/// operation through its cached access set); keeping their outputs cost more on every call
/// than it saved in heals (docs/healing.md).
///
/// Sound because a single-version record is never changed once committed (a commit
/// replaces it): an UPDATE that replaced record `o` with its inputs, finding `o` still the
/// row's record and the same inputs, would build the same new row. The record stays
/// allocated: the transaction does not re-pin its memory epoch while it heals
/// (`Transaction::may_repin`).
#[derive(Default)]
pub(crate) struct Memo {
    /// The call's UPDATEs are recorded (a healable call with `Config::heal_access_cache`).
    pub(crate) on: bool,
    /// Per generation: each recorded UPDATE's buffered version (null: changed again after
    /// it was recorded, so no longer what the operation made).
    pub(crate) writes: [Vec<*mut Version>; 2],
    /// The generation being recorded.
    pub(crate) cur: usize,
    /// During a heal: the previous run's recorded writes, kept out of the write set (not
    /// undone) until an operation reuses them; the rest are undone when the run ends.
    pub(crate) kept: Vec<crate::storage::WriteRecord>,
}

impl Memo {
    /// Starts a call: recording if `on`, nothing recorded.
    pub(crate) fn start(&mut self, on: bool) {
        self.on = on;
        self.cur = 0;
        self.writes[0].clear();
        self.writes[1].clear();
        self.kept.clear();
    }

    /// A heal starts: the run just ended becomes the one reused from.
    pub(crate) fn next_run(&mut self) {
        self.cur ^= 1;
        self.writes[self.cur].clear();
    }

    /// A recorded write of the current run was changed again (`new`, our buffered version,
    /// rewritten or deleted by a later operation): it is no longer what its operation made.
    pub(crate) fn forget_write(&mut self, new: *const Version) {
        if let Some(w) = self.writes[self.cur]
            .iter_mut()
            .find(|w| std::ptr::eq(**w, new))
        {
            *w = std::ptr::null_mut();
        }
    }
}

/// What `lock_in_order` found.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Step {
    /// Every element is locked and was read in its current record.
    Done,
    /// An element (locked now, if its row still exists) was read in a record that is no
    /// longer current: heal, or abort.
    Stale,
}

/// `SlotState::elems`: the element is the buffered write at `pos & !WRITTEN` of the write
/// set (reads are read-set positions, below it).
const WRITTEN: u32 = 1 << 31;

/// The lock-order key of row `tid` of table `table`.
#[inline]
pub(crate) fn key(t: &Table, tid: TupleId) -> Key {
    Key::new(t.heal_rank.load(Ordering::Relaxed), t.id, tid)
}

/// Step 1 of the commit (thesis Algorithm 1 with §3.4.5's order): locks the rows of the read
/// and write sets from the cursor on, in key order; rows ordered before the cursor that are
/// not held yet (the sets changed in a heal) get one try-lock. Returns at the first stale
/// element, with its lock held, so that a heal resumes from there.
///
/// `cols` (a healable call's; empty for a transaction that runs as OCC): the columns the
/// procedure reads and writes per table. A row whose current record differs from the one
/// read only in columns the call neither reads nor writes is a false invalidation (thesis
/// §3.4.5): the read is taken as a read of the current record, and a buffered write to the
/// row is rebased on it (`false_invalidation`), instead of a heal.
///
/// `defer` [M]: the elements are the buffered writes alone; rows the transaction only read
/// are left unlocked, and every read is left to `check_deferred` after the serialization
/// point, as OCC validates a read. If that check fails the commit releases every lock
/// (`release`) and runs this again without `defer`, the thesis's Algorithm 1.
pub(crate) fn lock_in_order(
    tx: &mut TxnCtx<'_>,
    st: &mut SlotState,
    cols: &[TableCols],
    defer: bool,
) -> Result<Step, AbortReason> {
    let me = tx.id.word();
    let mut elems = std::mem::take(&mut st.elems);
    elems.clear();
    let sets = &tx.sets;
    debug_assert_eq!(sets.read_set.len(), sets.read_keys.len());
    // Deferred, a read is `check_deferred`'s, also of a row written: the write's element
    // locks the row and checks the record the write replaced (which the read read, unless
    // the row changed between them — then the read is stale and `check_deferred` fails).
    if !defer {
        for (i, (&v, &k)) in sets.read_set.iter().zip(&sets.read_keys).enumerate() {
            elems.push((k.shifted(), v, i as u32));
        }
    }
    for (i, w) in sets.write_set.iter().enumerate() {
        if !w.old.is_null() {
            let k = key(tx.db.table_by_id(w.table), w.tid);
            elems.push((k.shifted() | 1, w.old as *const Version, WRITTEN | i as u32));
        }
    }
    // Per row, its reads first (in any order), then its buffered write.
    elems.sort_unstable_by_key(|e| e.0);
    let broken = tx.db.config.unsafe_heal_skips_reads;
    let mut out = Ok(Step::Done);
    // `held` and `elems` are both in key order: one walk finds each element's held lock
    // (a binary search per element cost 6 K instructions per TPC-C transaction).
    let mut at = 0;
    for &(sk, read, pos) in elems.iter() {
        let k = Key::unshifted(sk);
        while st.held.get(at).is_some_and(|h| h.0 < k) {
            at += 1;
        }
        let cur = match st.held.get(at) {
            Some(h) if h.0 == k => h.1,
            _ => {
                let before_cursor = st.cursor.is_some_and(|c| k < c);
                match lock_row(tx, k, me, !before_cursor) {
                    Ok(cur) => {
                        if !cur.is_null() {
                            st.held.insert(at, (k, cur));
                        }
                        if !before_cursor {
                            st.cursor = Some(k);
                        }
                        cur
                    }
                    Err(reason) => {
                        out = Err(reason);
                        break;
                    }
                }
            }
        };
        if cur == read {
            continue;
        }
        if !cur.is_null() {
            if broken && pos < WRITTEN && !written(&elems, k) {
                tx.sets.read_set[pos as usize] = cur;
                continue;
            }
            if false_invalidation(tx, st, cols, k.table(), read, cur, pos) {
                continue;
            }
        }
        out = Ok(Step::Stale);
        break;
    }
    st.elems = elems;
    // Without `defer` every read is an element: locked, and current (or re-pointed to the
    // current record) once the walk is done.
    st.reads_hold = !defer && matches!(out, Ok(Step::Done));
    out
}

/// The false-invalidation check (thesis §3.4.5) of element `pos` (a read-set position, or
/// `WRITTEN` and a write-set position) of row `cur`'s table `table`, read in record `read`
/// where `cur` is current now (its lock held): true when the call's result cannot depend on
/// the difference, after which the element stands for `cur`:
/// - a read: every column the procedure reads of the table is equal in both records; the
///   read-set entry becomes `cur`.
/// - a buffered write: every column the procedure reads or writes of the table is equal in
///   both but for increment-only columns (which take the write's delta onto `cur`'s value)
///   and blind ones (`TableCols::blind`: the call's value stands), and no column that
///   differs is indexed (the write's index entries were made from `read`); the write is
///   rebased: the columns it does not write are copied from `cur`, and it replaces `cur`.
///
/// Either way the history's reads of `read`'s row are re-pointed to `cur`'s writer
/// (`SlotState::repointed`, `Transaction::repoint_recorded_reads`). Tables stored other than
/// inline (whose records are not plain rows) and tombstones are never false invalidations.
fn false_invalidation(
    tx: &mut TxnCtx<'_>,
    st: &mut SlotState,
    cols: &[TableCols],
    table: u32,
    read: *const Version,
    cur: *const Version,
    pos: u32,
) -> bool {
    let Ok(c) = cols.binary_search_by_key(&table, |c| c.table) else {
        return false;
    };
    let tc = cols[c];
    let t = tx.db.table_by_id(table);
    if read.is_null() || t.rows_copied() {
        return false;
    }
    // SAFETY: `cur` is locked by us (or, from `check_deferred`, a read's current record,
    // reachable while we are pinned); `read` was read by this transaction, which has not
    // re-pinned since (`Transaction::may_repin`), so it is not freed.
    let (r, c) = unsafe { (&*read, &*cur) };
    if r.is_tombstone() || c.is_tombstone() {
        return false;
    }
    let (old, now) = (r.data(), c.data());
    let schema = &t.schema;
    if pos < WRITTEN {
        if !tc.reads_same_but_increments(schema.columns(), old, now) {
            return false;
        }
        tx.sets.read_set[pos as usize] = cur;
    } else {
        let w = &mut tx.sets.write_set[(pos & !WRITTEN) as usize];
        // SAFETY: our own unpublished record.
        let new = unsafe { &mut *w.new };
        if new.is_tombstone() {
            return false;
        }
        let indexed = |i: usize| schema.indexes().iter().any(|ix| ix.columns.contains(&i));
        // An increment-only INT column (`TableCols::incr`) may differ: the write takes its
        // delta onto the current value, which is what the increment run again on `cur`
        // would write (nothing else in the call read the column).
        let incr = |i: usize| tc.increments(i) && schema.columns()[i].ty == ColumnType::Int;
        let int = |row: &[u8], i: usize| match schema.read_column(row, i) {
            ValueRef::Int(v) => v,
            _ => unreachable!("an INT column"),
        };
        // A blind column (`TableCols::blind`) may differ too: every statement that wrote
        // the row set it from nothing the row holds, so the buffered value stands.
        if (schema.columns().iter().enumerate()).any(|(i, c)| {
            old[c.bytes()] != now[c.bytes()]
                && (indexed(i) || (tc.touches(i) && !incr(i) && !tc.blind(i)))
        }) {
            return false;
        }
        // The rebased increments, all computed before anything changes (an overflow heals,
        // and the run again raises it).
        let mut rebased: Vec<(usize, i64)> = Vec::new();
        for (i, c) in schema.columns().iter().enumerate() {
            if incr(i) && old[c.bytes()] != now[c.bytes()] {
                let delta = int(new.data(), i).checked_sub(int(old, i));
                match delta.and_then(|d| int(now, i).checked_add(d)) {
                    Some(v) => rebased.push((c.offset, v)),
                    None => return false,
                }
            }
        }
        // SAFETY: unpublished until the commit installs it; only we reference it.
        let data = unsafe { new.data_mut() };
        for (i, col) in schema.columns().iter().enumerate() {
            if !tc.writes(i) {
                data[col.bytes()].copy_from_slice(&now[col.bytes()]);
            }
        }
        for (offset, v) in rebased {
            crate::schema::TableSchema::write_int_at(data, offset, v);
        }
        w.old = cur as *mut Version;
    }
    st.repointed.push((table, read, cur));
    true
}

/// Step 3 of a commit whose `lock_in_order` deferred its reads: after the serialization
/// point, each read must still be of the current record, unlocked or locked by this commit
/// — OCC's read validation — or of a record the current one (so locked) equals in every
/// column the call reads (a false invalidation, §3.4.5: the read is re-pointed to the
/// current record, `false_invalidation`). False: a read is stale or its row is being
/// committed by another; the commit then takes every lock in order.
///
/// Sound as Silo's validation is: every row written is locked from before the
/// serialization point, and every read was current (in the columns the call uses) and not
/// locked by another after it.
pub(crate) fn check_deferred(tx: &mut TxnCtx<'_>, st: &mut SlotState, cols: &[TableCols]) -> bool {
    st.reads_hold = false;
    let me = tx.id.word();
    for i in 0..tx.sets.read_set.len() {
        let read = tx.sets.read_set[i];
        // SAFETY: read by this transaction, which has not re-pinned since (`may_repin`).
        let e = unsafe { (*read).end.load(Ordering::Acquire) };
        if e == INFINITY || e == me {
            continue;
        }
        if is_txn(e) {
            return false;
        }
        let k = tx.sets.read_keys[i];
        let t = tx.db.table_by_id(k.table());
        let cur = t
            .entry(k.tid())
            .map_or(std::ptr::null_mut(), |e| e.load(Ordering::Acquire));
        // SAFETY: reachable from the entry while we are pinned.
        let Some(c) = (unsafe { cur.as_ref() }) else {
            return false;
        };
        // Unlocked, or locked by this commit (a row it writes, whose element took the lock:
        // the record stays current until the install).
        let ce = c.end.load(Ordering::Acquire);
        if is_txn(c.begin.load(Ordering::Acquire)) || (ce != INFINITY && ce != me) {
            return false;
        }
        if !false_invalidation(tx, st, cols, k.table(), read, cur, i as u32) {
            return false;
        }
    }
    st.reads_hold = true;
    true
}

/// Whether row `k` has a buffered write among `elems` (sorted; per row reads first).
fn written(elems: &[(u128, *const Version, u32)], k: Key) -> bool {
    elems
        .binary_search_by_key(&(k.shifted() | 1), |e| e.0)
        .is_ok()
}

/// Locks the current record of the row at `k` and returns it, or null when the row has no
/// committed record (deleted, or an aborted insert being unlinked). `wait`: wait while
/// another committer holds the lock (in order); else one try (`HealLockConflict`).
fn lock_row(tx: &TxnCtx<'_>, k: Key, me: u64, wait: bool) -> Result<*const Version, AbortReason> {
    let t = tx.db.table_by_id(k.table());
    let backoff = crossbeam_utils::Backoff::new();
    let mut since: Option<Instant> = None;
    loop {
        let cur = t
            .entry(k.tid())
            .map_or(std::ptr::null_mut(), |e| e.load(Ordering::Acquire));
        // SAFETY: a record reachable from the entry while we are pinned.
        let Some(v) = (unsafe { cur.as_ref() }) else {
            return Ok(std::ptr::null());
        };
        let b = v.begin.load(Ordering::Acquire);
        if b == INFINITY {
            return Ok(std::ptr::null());
        }
        if is_txn(b) {
            // Another transaction's insert took the entry: the row we read is gone, and what
            // is there cannot be locked until it commits. OCC's answer.
            return Err(AbortReason::ReadValidation);
        }
        let e = v.end.load(Ordering::Acquire);
        if e == INFINITY {
            if crate::cc::silo::take_free_lock(tx, v, me) {
                return Ok(cur);
            }
            continue;
        }
        if e == me {
            return Ok(cur);
        }
        if !is_txn(e) {
            // Replaced between the load and the lock: take the newer record.
            continue;
        }
        if !wait {
            return Err(AbortReason::HealLockConflict);
        }
        if backoff.is_completed() {
            let start = *since.get_or_insert_with(Instant::now);
            if start.elapsed() > WAIT_LIMIT {
                return Err(AbortReason::LockConflict);
            }
        }
        backoff.snooze();
    }
}

/// Releases every lock the commit holds on a record it did not replace (a replaced record's
/// End is the new TID already), and resets the slot's state for its next transaction.
pub(crate) fn release(st: &mut SlotState, me: u64) {
    for &(_, v) in &st.held {
        // SAFETY: we hold its lock, so it is not reclaimed.
        let end = unsafe { &(*v).end };
        // Only the holder changes a locked End (to INFINITY here, or to the new TID at the
        // install), so a load tells whether the lock is still ours, and a store frees it: no
        // locked instruction for the records the install replaced — after a commit, every
        // record of a row written.
        if end.load(Ordering::Relaxed) == me {
            end.store(INFINITY, Ordering::Release);
        }
    }
    st.held.clear();
    st.cursor = None;
    st.heals = 0;
    st.reads_hold = false;
    st.repointed.clear();
}
