//! MVOCC: Hekaton's optimistic multi-version concurrency control (Hekaton §3).
//!
//! Normal processing reads as of the begin timestamp and writes by locking the latest
//! version's End field (first-writer-wins, `txn/mod.rs`). At commit an update transaction
//! publishes Preparing, draws its end timestamp, then validates according to its isolation
//! level (§3.2–3.4):
//! - Serializable: every version read must still be visible as of the end timestamp (read
//!   validation) and repeating every scan as of the end timestamp must find no version that was
//!   not visible as of the begin timestamp (phantom detection);
//! - Repeatable Read: read validation only;
//! - Snapshot Isolation and Read Committed: no validation.
//!
//! Read-only transactions commit at their begin timestamp without validation: every update
//! transaction serialises at its end timestamp, and a snapshot at the begin timestamp sees
//! exactly the updates serialised before it.
//!
//! Commit dependencies (Hekaton §2.7, `Config::commit_dependencies`): a transaction that read
//! or ignored a Preparing writer's version speculatively (`cc/visibility.rs`) waits, after
//! validation and before logging, until every such writer has reported; if one aborted, so
//! does it (`commit_dependency`). A transaction reports its own outcome to its dependents
//! right after publishing Committed or Aborted (`TxnTable::report`).
//!
//! Unique secondary indexes are re-checked after the end timestamp is drawn: a competing
//! holder of the key that is Preparing with an earlier end timestamp is waited for, one with a
//! later end timestamp will itself see us and abort, and one with the same end timestamp (a
//! member of our partial-order commit group, which may be waiting for us) is a conflict.
//!
//! **Column check** (`Config::column_check`, default on; thesis §3.4.5's false-invalidation
//! check, which the thesis gives Transaction Healing, applied to Hekaton's read validation).
//! A stored-procedure call's commit carries the columns the procedure reads per table
//! (`procedure::healing::column_masks`, in `SlotState::cols`). A read whose version is no
//! longer visible at the end timestamp still passes when the version that is visible then
//! is a live row equal to the one read in every one of those columns: every value the
//! transaction saw is the value it would see at its end timestamp, where it serialises, so
//! the commit is the same as if it had read that version. Only inline tables (whose
//! version data is the row) are judged so; the history's read is re-pointed to the newer
//! version (`Transaction::repoint_recorded_reads`). Without masks (statements outside a
//! procedure) reads are validated by version, as Hekaton does.
//!
//! The commit pipeline (`txn/end.rs`) is that of every multi-version protocol; `validate` here
//! is its check for all of them (`cc::validate`): `si` is MVOCC at Snapshot Isolation; MV2PL
//! validates only its scans (its reads are locked); MVTO drew its end timestamp at begin and
//! validates only unique keys (no-wait: an older holder still running aborts us).

use super::visibility::Resolver;
use crate::cc::{resolver, validates_reads, SlotCc, TxnCc};
use crate::config::Isolation;
use crate::error::AbortReason;
use crate::schema::TableCols;
use crate::storage::{Table, TupleId};
use crate::timestamp::Timestamp;
use crate::txn::state::{ScanRecord, TxnCtx, TABLE_SCAN};
use crate::version::Version;
use std::ops::Bound;
use std::ptr;
use std::sync::atomic::Ordering;

/// The commit's checks as of end timestamp `end_ts` (`cc::validate`): the read set (where
/// the protocol validates reads), the scan set's phantom re-checks at Serializable, unique
/// keys, and under SSN, SSI and ERMIA-SSI the stamps' pre-commit test.
pub(crate) fn validate(
    tx: &TxnCtx<'_>,
    c: &mut TxnCc,
    sc: &mut SlotCc,
    end_ts: Timestamp,
) -> std::result::Result<(), AbortReason> {
    let r = resolver(tx, c);
    if validates_reads(tx.protocol, tx.isolation) {
        let cols = &sc.mvocc.cols;
        sc.mvocc.repointed.clear();
        for (i, &v) in tx.sets.read_set.iter().enumerate() {
            // SAFETY: versions we read stay allocated while we are active (GC watermark).
            if !r.still_visible(unsafe { &*v }, end_ts) {
                match same_columns_at(tx, &r, cols, i, v, end_ts) {
                    Some(rp) => sc.mvocc.repointed.push(rp),
                    None => return Err(AbortReason::ReadValidation),
                }
            }
        }
    }
    // MVTO records no scans (its scan-ts protects them).
    if tx.isolation == Isolation::Serializable {
        for s in &tx.sets.scan_set {
            if !rescan(tx, &r, s, end_ts) {
                return Err(AbortReason::Phantom);
            }
        }
    }
    unique_keys_still_ours(tx, c, Some(end_ts))?;
    if tx.protocol.stamped() && tx.tracks_reads {
        crate::cc::stamp_test(tx, c, sc, end_ts)?;
    }
    Ok(())
}

/// A read the column check re-pointed: `(table, version read, version that stands at the
/// commit)`.
pub(crate) type Repoint = (u32, *const Version, *const Version);

/// `mvocc`'s per-slot state: the column check's masks and what it re-pointed.
#[derive(Default)]
pub(crate) struct SlotState {
    /// The columns the committing call's procedure reads and writes per table, sorted by
    /// table (empty: no column check, e.g. statements outside a procedure). Set for the
    /// length of one commit (`Transaction::commit_healing`).
    pub(crate) cols: Vec<TableCols>,
    /// Reads the column check passed, `(table, read, visible at the end timestamp)`: the
    /// history's reads follow (`Transaction::repoint_recorded_reads`).
    pub(crate) repointed: Vec<Repoint>,
}

/// The column check (module docs) of read-set entry `i`, version `read`, which is no longer
/// visible at `end_ts`: the row's version visible at `end_ts` when it is a live row of an
/// inline table equal to `read` in every column `cols` says the procedure reads, as
/// `(table, read, that version)`; `None` (the read fails validation) otherwise.
fn same_columns_at(
    tx: &TxnCtx<'_>,
    r: &Resolver<'_>,
    cols: &[TableCols],
    i: usize,
    read: *const Version,
    end_ts: Timestamp,
) -> Option<Repoint> {
    let k = *tx.sets.read_keys.get(i)?;
    let (table, tid) = (k.table(), k.tid());
    let tc = cols[cols.binary_search_by_key(&table, |c| c.table).ok()?];
    let t = tx.db.table_by_id(table);
    if t.rows_copied() {
        return None;
    }
    let head = t.entry(tid)?.load(Ordering::Acquire);
    let now = r.visible_in_chain(head, end_ts, true);
    // SAFETY: pinned, and `read` was read by this transaction (GC watermark).
    let (old, new) = unsafe { (&*read, now.as_ref()?) };
    if old.is_tombstone() || new.is_tombstone() {
        return None;
    }
    tc.reads_same(t.schema.columns(), old.data(), new.data())
        .then_some((table, read, now))
}

/// A `ScanRecord` bound as a byte bound into the scan-key arena.
pub(crate) fn bound(arena: &[u8], b: (u8, u32, u32)) -> Bound<&[u8]> {
    let k = &arena[b.1 as usize..b.2 as usize];
    match b.0 {
        0 => Bound::Included(k),
        1 => Bound::Excluded(k),
        _ => Bound::Unbounded,
    }
}

/// Repeats one scan as of `end_ts`; false if some tuple's visible version (ignoring our own
/// writes) differs from the one visible as of the begin timestamp. A range scan whose
/// leaves hold their stamps (`ScanRecord::nodes`) is not repeated: its reads, validated
/// before this, are every row it met. Under SSN and ERMIA-SSI
/// only a row new to the scan counts: a version the scan read that changed is in the read
/// set, where the stamps judge it (`cc/ssn.rs`).
fn rescan(tx: &TxnCtx<'_>, r: &Resolver<'_>, s: &ScanRecord, end_ts: Timestamp) -> bool {
    let t = tx.db.table_by_id(s.table);
    if s.index == TABLE_SCAN {
        // Every tuple, including those allocated since the scan: same view at both times.
        return t.tids().all(|tid| same_view(tx, r, t, 0, tid, &[], end_ts));
    }
    let index = s.index as usize;
    // Silo's node set (`ScanRecord::nodes`): the range holds the entries the scan met, and
    // each led to a read that `validate` found still visible (or equal in the columns read).
    let nodes = s
        .nodes
        .and_then(|(a, b)| tx.sets.scan_nodes.get(a as usize..b as usize));
    if nodes.is_some_and(|n| t.stamps_hold(index, n)) {
        return true;
    }
    let idx = &t.indexes[index];
    let arena = &tx.sets.scan_keys;
    let mut ok = true;
    if s.point {
        let Bound::Included(key) = bound(arena, s.lo) else {
            return true;
        };
        if index == 0 {
            if let Some(tid) = idx.get_unique(key) {
                ok = same_view(tx, r, t, index, tid, key, end_ts);
            }
        } else {
            t.lookup_entries(index, key, &mut |tid, _| {
                ok = same_view(tx, r, t, index, tid, key, end_ts);
                ok
            });
        }
    } else {
        t.scan_index(
            index,
            bound(arena, s.lo),
            bound(arena, s.hi),
            crate::index::ScanDirection::Ascending,
            &mut |k, tid, _| {
                ok = same_view(tx, r, t, index, tid, k, end_ts);
                ok
            },
            None,
        );
    }
    ok
}

fn same_view(
    tx: &TxnCtx<'_>,
    r: &Resolver<'_>,
    t: &Table,
    index: usize,
    tid: TupleId,
    key: &[u8],
    end_ts: Timestamp,
) -> bool {
    let Some(e) = t.entry(tid) else { return true };
    let head = e.load(Ordering::Acquire);
    let live = |v: *const Version| -> *const Version {
        // SAFETY: pinned.
        match unsafe { v.as_ref() } {
            None => ptr::null(),
            Some(x) if x.is_tombstone() => ptr::null(),
            Some(x) => {
                if index != 0 {
                    let (mut k, mut rb) = (Vec::new(), Vec::new());
                    t.schema
                        .encode_key_from_row(index, t.row(x, &mut rb), &mut k);
                    if k != key {
                        return ptr::null();
                    }
                }
                v
            }
        }
    };
    let before = r.visible_in_chain(head, tx.begin_ts, true);
    let after = r.visible_in_chain(head, end_ts, true);
    if before == after {
        // The same version (or none) at both times: whatever `live` makes of it, it makes
        // the same of both, and both rules below hold. The common case, and it needs no
        // key encoding.
        return true;
    }
    let (before, after) = (live(before), live(after));
    if tx.protocol.stamped() {
        // A row new to the range: absent at begin, present at the end.
        return !before.is_null() || after.is_null();
    }
    before == after
}

/// The unique secondary keys of every row we wrote must still be ours alone (at commit: as
/// of `end_ts`; single-version protocols: now).
pub(crate) fn unique_keys_still_ours(
    tx: &TxnCtx<'_>,
    c: &TxnCc,
    end_ts: Option<Timestamp>,
) -> std::result::Result<(), AbortReason> {
    for w in &tx.sets.write_set {
        let t = tx.db.table_by_id(w.table);
        // SAFETY: our own version.
        let new = unsafe { &*w.new };
        if new.is_tombstone() {
            continue;
        }
        let mut rb = Vec::new();
        for i in 1..t.indexes.len() {
            if t.schema.indexes[i].unique
                && unique_holder(tx, c, t, i, t.row(new, &mut rb), Some(w.tid), end_ts)
                    != UniqueCheck::Free
            {
                return Err(AbortReason::UniqueConflict);
            }
        }
    }
    Ok(())
}

/// Outcome of a uniqueness check on a unique secondary index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum UniqueCheck {
    Free,
    /// Another row holds the key in our snapshot (or, at commit, as of our end timestamp).
    Taken,
    /// Another row took the key after our snapshot: a write-write style conflict.
    Contended,
}

/// Does a row other than `own` hold `row`'s key of unique index `index`? At write time
/// (`at_end_ts == None`) as of our snapshot; at commit as of our end timestamp.
pub(crate) fn unique_holder(
    tx: &TxnCtx<'_>,
    c: &TxnCc,
    t: &Table,
    index: usize,
    row: &[u8],
    own: Option<TupleId>,
    at_end_ts: Option<Timestamp>,
) -> UniqueCheck {
    if tx.protocol.single_version() {
        return crate::cc::silo::unique_holder(tx, t, index, row, own);
    }
    let mut key = Vec::new();
    t.schema.encode_key_from_row(index, row, &mut key);
    // At commit, a holder Preparing at our own end timestamp (a partial-order commit group)
    // is a conflict, not something to wait for: it may be checking us in turn.
    let same_group = std::cell::Cell::new(false);
    let r = Resolver {
        same_group: at_end_ts.is_some().then_some(&same_group),
        ..resolver(tx, c)
    };
    let mut out = UniqueCheck::Free;
    let mut probe = Vec::new();
    let mut rb = Vec::new();
    let mut holds = |v: *const Version| -> bool {
        // SAFETY: pinned.
        match unsafe { v.as_ref() } {
            Some(x) if !x.is_tombstone() => {
                t.schema
                    .encode_key_from_row(index, t.row(x, &mut rb), &mut probe);
                probe == key
            }
            _ => false,
        }
    };
    t.lookup_entries(index, &key, &mut |tid, _| {
        if Some(tid) == own {
            return true;
        }
        let Some(e) = t.entry(tid) else { return true };
        let head = e.load(Ordering::Acquire);
        match at_end_ts {
            Some(ts) => {
                if holds(r.visible_in_chain(head, ts, false)) {
                    out = UniqueCheck::Taken;
                }
            }
            None => {
                let rt = tx.begin_ts.max(if tx.reads_latest() {
                    tx.db.clock.now()
                } else {
                    Timestamp::ZERO
                });
                if holds(r.visible_in_chain(head, rt, false)) {
                    out = UniqueCheck::Taken;
                } else if holds(r.visible_in_chain(head, Timestamp::new(u64::MAX >> 2), false)) {
                    out = UniqueCheck::Contended;
                }
            }
        }
        out == UniqueCheck::Free && !same_group.get()
    });
    if same_group.get() {
        return UniqueCheck::Taken;
    }
    out
}
