//! Silo: single-version optimistic concurrency control (thesis §3.5, SILO; Tu et al.,
//! "Speedy Transactions in Multicore In-Memory Databases", SOSP 2013, §4).
//!
//! Storage. Version storage `single-version`: a row is one version at its indirection entry,
//! with Hekaton's header reused as Silo's TID word — Begin is the TID of the transaction that
//! wrote the record, End is `INFINITY` while the record is current, a transaction id while a
//! committer holds its lock, and the replacing TID once it was superseded (a superseded
//! record never becomes current again). Records are replaced, not updated in place: the
//! committer installs a fresh version and frees the old one after the memory epoch, as Silo
//! does for a value that does not fit in place. Readers thus copy nothing under a seqlock;
//! the TID check at commit is the same.
//!
//! Execution (`txn/mod.rs`). A read takes the record's current version, whatever its TID
//! (there is no snapshot), and adds it to the read set. An update or delete builds its new
//! version privately (a buffered write: `WriteRecord::old` is the version it read) and
//! neither locks nor installs anything; later reads of the row in the transaction see it
//! (`TxnCtx::pending_write`). An insert goes into the indexes at once, as an uncommitted
//! version: like Silo's absent-and-locked record it holds the key, and a reader that meets
//! it aborts as Silo's validation of it would.
//!
//! Commit (Silo Fig. 2; the pipeline is in `txn/end.rs`, the protocol's steps here):
//! 1. lock the buffered writes' records in a global order (table, tuple id), waiting for a
//!    lock another committer holds (deadlock-free: every committer locks in the same order,
//!    and no lock is held outside a commit); a record found superseded fails (its read is
//!    stale);
//! 2. the serialization point: a fence, then read the global epoch;
//! 3. validate: every record read is still current and not locked by another transaction;
//!    every predicate read (scan, secondary lookup, point miss) finds no row it did not read
//!    and no uncommitted insert (the role of Silo's leaf-node versions, here a re-scan);
//!    unique secondary keys are still ours;
//! 4. the TID: larger than every TID read or overwritten and than this slot's last, in the
//!    current epoch — no shared counter (`next_tid`);
//! 5. log, install the new versions with the TID (which releases the locks) and free the old
//!    ones after the memory epoch.
//!
//! `occ` differs in step 1 only (`occ.rs`); `hybrid` runs each transaction as `occ` or
//! `2pl` (`hybrid.rs`). With `Config::unsafe_no_validation` (the thesis's OCC⁻ and SILO⁻,
//! not serializable) both take `lock_write_set_unvalidated` in step 1 and skip step 3's read
//! and predicate checks.
//!
//! `2pl` (thesis §3.5's single-version 2PL, no-wait; `twopl.rs`) runs on the same storage
//! and the same commit, with its locks taken as it runs.
//!
//! Unlike Silo, a deleted row's entry is cleared at commit (Silo leaves an absent record for
//! its GC), and a predicate read is re-checked by re-scanning instead of node versions: both
//! are the same test of "nothing in the range changed", at the cost of a scan. Read-only
//! transactions validate too (Silo's snapshot transactions are not built).

use crate::cc::mvocc::UniqueCheck;
use crate::error::AbortReason;
use crate::storage::{Table, TupleId};
use crate::txn::state::{TxnCtx, TABLE_SCAN};
use crate::txn::table::bump;
use crate::version::{is_txn, Version, INFINITY};
use std::collections::HashSet;
use std::ops::Bound;
use std::sync::atomic::Ordering;
use std::time::Instant;

/// Low bits of a TID that hold the transaction-table slot: TIDs of different slots never
/// collide, so the log's commit order (TID order) is a total order.
const TID_SLOT_BITS: u32 = 16;
/// A TID's epoch starts at this bit.
const TID_EPOCH_SHIFT: u32 = 32;

/// Silo's global epoch (Silo §4.1: advanced every 40 ms; here derived from the time since
/// the database opened, which needs no advancing thread). Reading it is a clock read, not a
/// shared read-modify-write.
pub(crate) struct Epochs {
    started: Instant,
}

/// Silo's epoch length.
const EPOCH_MS: u128 = 40;

impl Epochs {
    pub(crate) fn new() -> Self {
        Epochs {
            started: Instant::now(),
        }
    }

    /// The current epoch (≥ 1).
    pub(crate) fn current(&self) -> u64 {
        1 + (self.started.elapsed().as_millis() / EPOCH_MS) as u64
    }
}

/// The TID of a committing transaction in `slot` (Silo §4.2): larger than every TID it
/// observed (`observed`) and than the slot's previous one (`last`), in `epoch` or later.
/// Carries past the sequence bits roll into the epoch bits, which keeps TIDs increasing.
pub(crate) fn next_tid(observed: u64, last: u64, epoch: u64, slot: usize) -> u64 {
    let base = observed.max(last).max(epoch << TID_EPOCH_SHIFT);
    (((base >> TID_SLOT_BITS) + 1) << TID_SLOT_BITS) | (slot as u64 & ((1 << TID_SLOT_BITS) - 1))
}

/// Per-slot state of Silo (and of OCC and 2PL, which share its commit), reused by the slot's
/// transactions.
#[derive(Default)]
pub(crate) struct SlotState {
    /// The slot's last TID (every new one is larger, `next_tid`).
    pub(crate) last_tid: u64,
    /// Silo: scratch for the lock order of the buffered writes.
    pub(crate) order: Vec<u32>,
}

/// Silo's and 2PL's step 1 of the commit: locks the buffered writes' records in the global
/// order (table, tuple id).
pub(crate) fn lock_write_set(
    tx: &TxnCtx<'_>,
    state: &mut SlotState,
) -> std::result::Result<(), AbortReason> {
    let me = tx.id.word();
    let mut order = std::mem::take(&mut state.order);
    order.clear();
    let ws = &tx.sets.write_set;
    order.extend((0..ws.len() as u32).filter(|&i| !ws[i as usize].old.is_null()));
    order.sort_unstable_by_key(|&i| (ws[i as usize].table, ws[i as usize].tid));
    let locked = order.iter().try_for_each(|&i| {
        // SAFETY: the version we read, pinned since.
        lock(tx, unsafe { &*ws[i as usize].old }, me, true)
    });
    state.order = order;
    locked
}

/// Step 1 of OCC⁻/SILO⁻ (`Config::unsafe_no_validation`, thesis §3.5): locks the buffered
/// writes' records in Silo's order (table, tuple id), but a record replaced since it was read
/// is no conflict: the row's *current* record is locked instead and becomes the write's
/// `old`, so the install replaces it with a version computed from the stale read (a lost
/// update: why the mode is unsafe). The order stays global because it does not depend on
/// which record is current. Fails only when the row is gone (deleted by a committed
/// transaction) or its entry holds another transaction's uncommitted insert.
pub(crate) fn lock_write_set_unvalidated(
    tx: &mut TxnCtx<'_>,
    state: &mut SlotState,
) -> std::result::Result<(), AbortReason> {
    let me = tx.id.word();
    let mut order = std::mem::take(&mut state.order);
    let mut ws = std::mem::take(&mut tx.sets.write_set);
    order.clear();
    order.extend((0..ws.len() as u32).filter(|&i| !ws[i as usize].old.is_null()));
    order.sort_unstable_by_key(|&i| (ws[i as usize].table, ws[i as usize].tid));
    let mut out = Ok(());
    for &i in &order {
        let w = &mut ws[i as usize];
        let t = tx.db.table_by_id(w.table);
        let locked = loop {
            let cur = match t.entry(w.tid) {
                Some(e) => e.load(Ordering::Acquire),
                None => std::ptr::null_mut(),
            };
            // SAFETY: a record reachable from the entry while we are pinned.
            let Some(v) = (unsafe { cur.as_ref() }) else {
                break Err(AbortReason::WriteWriteConflict);
            };
            if is_txn(v.begin.load(Ordering::Acquire)) {
                break Err(AbortReason::WriteWriteConflict);
            }
            match lock(tx, v, me, true) {
                Ok(()) => break Ok(cur),
                // Replaced between the load and the lock: take the newer one.
                Err(AbortReason::ReadValidation) => continue,
                Err(reason) => break Err(reason),
            }
        };
        match locked {
            Ok(cur) => w.old = cur,
            Err(reason) => {
                out = Err(reason);
                break;
            }
        }
    }
    tx.sets.write_set = ws;
    state.order = order;
    out
}

/// Step 4 of the commit: the TID, in epoch `epoch`, larger than every TID the transaction
/// observed (what it read and what it overwrites), than `floor` and than the slot's last.
pub(crate) fn commit_tid(tx: &TxnCtx<'_>, state: &mut SlotState, epoch: u64, floor: u64) -> u64 {
    let mut observed = floor;
    for &v in &tx.sets.read_set {
        // SAFETY: pinned.
        observed = observed.max(unsafe { (*v).begin.load(Ordering::Acquire) });
    }
    for w in &tx.sets.write_set {
        // SAFETY: pinned; we hold its lock.
        if let Some(old) = unsafe { w.old.as_ref() } {
            observed = observed.max(old.begin.load(Ordering::Acquire));
        }
    }
    let tid = next_tid(observed, state.last_tid, epoch, tx.slot_idx);
    state.last_tid = tid;
    tid
}

/// Takes the lock on `v` (its End field), waiting while another committer (or, under
/// `hybrid`, a 2PL transaction, which never waits itself) holds it. Fails if `v` was
/// superseded since it was read, or — when `write` — a 2PL transaction holds a read lock
/// on it (a lock OCC takes on a record it only read shares the record with 2PL readers).
pub(crate) fn lock(
    tx: &TxnCtx<'_>,
    v: &Version,
    me: u64,
    write: bool,
) -> std::result::Result<(), AbortReason> {
    let backoff = crossbeam_utils::Backoff::new();
    loop {
        let e = v.end.load(Ordering::Acquire);
        if e == INFINITY {
            if take_free_lock(tx, v, me) {
                // Under `hybrid` a 2PL transaction may hold a read lock on the record: it
                // counts itself in `aux`, then loads End; we took End, then load `aux` (both
                // SeqCst), so one of the two sees the other. The reader never waits; we
                // give way at once too.
                if write && v.aux.load(Ordering::SeqCst) != 0 {
                    v.end.store(INFINITY, Ordering::Release);
                    return Err(AbortReason::LockConflict);
                }
                return Ok(());
            }
        } else if e == me {
            return Ok(());
        } else if is_txn(e) {
            // Held by a committer, which holds it only until it installs or aborts.
            backoff.snooze();
        } else {
            return Err(AbortReason::ReadValidation);
        }
    }
}

/// One attempt to take the lock on `v`, whose End was just seen free (`INFINITY`): a
/// compare-and-swap to `me`, counted as a record read-modify-write.
#[inline]
pub(crate) fn take_free_lock(tx: &TxnCtx<'_>, v: &Version, me: u64) -> bool {
    bump(&tx.slot().stats.record_rmw, 1);
    v.end
        .compare_exchange(INFINITY, me, Ordering::SeqCst, Ordering::Acquire)
        .is_ok()
}

/// Silo's validation (step 3), with the write set locked. `reads`: walk the read set (false
/// when the caller knows every read still holds: `healing`'s `SlotState::reads_hold`).
pub(crate) fn validate(
    tx: &TxnCtx<'_>,
    c: &crate::cc::TxnCc,
    me: u64,
    reads: bool,
) -> std::result::Result<(), AbortReason> {
    // 2PL's read locks keep what it read current: only Silo and OCC validate reads, and
    // not as OCC⁻/SILO⁻; `healing` not when its commit already holds them (`!reads`).
    let unvalidated = tx.db.config.unsafe_no_validation;
    let reads: &[*const Version] =
        if reads && crate::cc::validates_reads(tx.protocol, tx.isolation) && !unvalidated {
            &tx.sets.read_set
        } else {
            &[]
        };
    for &v in reads {
        // SAFETY: pinned since the read.
        let e = unsafe { (*v).end.load(Ordering::Acquire) };
        if e != INFINITY && e != me {
            return Err(AbortReason::ReadValidation);
        }
    }
    if !unvalidated {
        for s in &tx.sets.scan_set {
            rescan(tx, s)?;
        }
    }
    crate::cc::mvocc::unique_keys_still_ours(tx, c, None)
}

/// What a row's record looks like to a predicate re-check.
enum Seen {
    /// No live row (no version, a delete, an aborted insert, our own insert).
    Nothing,
    /// Another transaction's uncommitted insert, or a record a committer holds locked (its
    /// new version may be moving into the range): a change to the range in itself, as the
    /// leaf-node version that Silo checks would show.
    Locked,
    /// A committed live row (for a row we have a buffered write on, the version the write
    /// read).
    Row(*const Version),
}

fn seen(tx: &TxnCtx<'_>, t: &Table, tid: TupleId) -> Seen {
    let me = tx.id.word();
    let h = match tx.pending_record(t.id, tid) {
        Some(w) => w.old as *const Version,
        None => match t.entry(tid) {
            Some(e) => e.load(Ordering::Acquire),
            None => return Seen::Nothing,
        },
    };
    // SAFETY: pinned.
    let Some(v) = (unsafe { h.as_ref() }) else {
        return Seen::Nothing;
    };
    let b = v.begin.load(Ordering::Acquire);
    if b == INFINITY || b == me {
        return Seen::Nothing;
    }
    let end = v.end.load(Ordering::Acquire);
    if is_txn(b) || (is_txn(end) && end != me) {
        return Seen::Locked;
    }
    if v.is_tombstone() {
        return Seen::Nothing;
    }
    Seen::Row(h)
}

/// Re-checks one predicate read: every committed row an entry now in its range leads to
/// (matching or stale) was judged by that same scan in its current version (so read
/// validation covers it), and no other transaction's insert or commit is pending there.
/// A range scan whose leaves still hold their stamps (`ScanRecord::nodes`: Silo's node set)
/// passes without a re-scan: its range holds the entries it met, each a read validated
/// with the others (a pending insert or an entry re-pointed would have changed a leaf).
///
/// Known gap: a row whose entry entered the range after the scan, and which was deleted
/// (its record emptied) after our serialization point but before this re-check, leaves
/// nothing to see; Silo's absent-record TIDs would catch it, our emptied records keep none.
fn rescan(
    tx: &TxnCtx<'_>,
    s: &crate::txn::state::ScanRecord,
) -> std::result::Result<(), AbortReason> {
    let t = tx.db.table_by_id(s.table);
    let slice = &tx.sets.read_set[s.reads.0 as usize..s.reads.1 as usize];
    let set: Option<HashSet<usize>> =
        (slice.len() > 16).then(|| slice.iter().map(|&v| v as usize).collect());
    let read = |v: *const Version| match &set {
        Some(set) => set.contains(&(v as usize)),
        None => slice.contains(&v),
    };
    let mut ok = true;
    let mut check = |tid: TupleId| -> bool {
        match seen(tx, t, tid) {
            Seen::Nothing => true,
            Seen::Locked => {
                ok = false;
                false
            }
            // Every live row an entry in the range leads to was judged by this very scan,
            // whether its key still matches or not. This re-check sees the present, one range
            // after another, not the serialization point: a row whose entry appeared after
            // the scan may have been in the range then and moved out since, and a stale entry
            // judged at the scan is covered by its version in the read set (`index_hit`). So
            // a row the scan did not judge in its current version fails even when its key
            // has left the range (conservative; validated reads catch the rest).
            Seen::Row(v) => {
                ok = read(v);
                ok
            }
        }
    };
    if s.index == TABLE_SCAN {
        for tid in t.tids() {
            if !check(tid) {
                break;
            }
        }
    } else {
        let index = s.index as usize;
        // Silo's node set: the leaves the scan read unchanged, the range holds the entries
        // it met, each a read that read validation covers (`ScanRecord::nodes`).
        let nodes = s
            .nodes
            .and_then(|(a, b)| tx.sets.scan_nodes.get(a as usize..b as usize));
        if nodes.is_some_and(|n| t.stamps_hold(index, n)) {
            return Ok(());
        }
        let idx = &t.indexes[index];
        let arena = &tx.sets.scan_keys;
        let bound = |b| crate::cc::mvocc::bound(arena, b);
        if s.point {
            if let Bound::Included(key) = bound(s.lo) {
                if index == 0 {
                    if let Some(tid) = idx.get_unique(key) {
                        check(tid);
                    }
                } else {
                    t.lookup_entries(index, key, &mut |tid, _| check(tid));
                }
            }
        } else {
            t.scan_index(
                index,
                bound(s.lo),
                bound(s.hi),
                crate::index::ScanDirection::Ascending,
                &mut |_, tid, _| check(tid),
                None,
            );
        }
    }
    if ok {
        Ok(())
    } else {
        Err(AbortReason::Phantom)
    }
}

/// Does a row other than `own` hold `row`'s key of unique index `index`? `Taken`: a
/// committed row; `Contended`: an uncommitted insert, or a row whose lock a committer holds
/// (it may be taking the key) — a conflict, not a duplicate.
pub(crate) fn unique_holder(
    tx: &TxnCtx<'_>,
    t: &Table,
    index: usize,
    row: &[u8],
    own: Option<TupleId>,
) -> UniqueCheck {
    let mut key = Vec::new();
    t.schema.encode_key_from_row(index, row, &mut key);
    let mut probe = Vec::new();
    let mut out = UniqueCheck::Free;
    t.lookup_entries(index, &key, &mut |tid, _| {
        if Some(tid) == own {
            return true;
        }
        // Our own rows (buffered writes, inserts) are judged by what we wrote.
        let mine = tx.pending_write(t.id, tid);
        let h = match mine {
            Some(n) => n,
            None => match t.entry(tid) {
                Some(e) => e.load(Ordering::Acquire),
                None => return true,
            },
        };
        // SAFETY: pinned.
        let Some(v) = (unsafe { h.as_ref() }) else {
            return true;
        };
        let b = v.begin.load(Ordering::Acquire);
        let end = v.end.load(Ordering::Acquire);
        if b == INFINITY {
            return true;
        }
        let me = tx.id.word();
        if mine.is_none() && b != me && (is_txn(b) || (is_txn(end) && end != me)) {
            out = UniqueCheck::Contended;
            return false;
        }
        if !v.is_tombstone() {
            t.schema.encode_key_from_row(index, v.data(), &mut probe);
            if probe == key {
                out = UniqueCheck::Taken;
                return false;
            }
        }
        true
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tid_exceeds_what_it_observed_and_names_its_slot() {
        let t = next_tid(0, 0, 1, 7);
        assert!(t > 1 << TID_EPOCH_SHIFT);
        assert_eq!(t & 0xFFFF, 7);
        let u = next_tid(t, 0, 1, 3);
        assert!(u > t);
        assert_eq!(u & 0xFFFF, 3);
        // The slot's own last TID counts, and a later epoch lifts the TID into it.
        let v = next_tid(0, u, 1, 3);
        assert!(v > u);
        let w = next_tid(v, 0, 5, 9);
        assert!(w >> TID_EPOCH_SHIFT >= 5);
        // Two slots that observed the same TID never draw the same one.
        assert_ne!(next_tid(u, 0, 1, 1), next_tid(u, 0, 1, 2));
    }
}
