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
//! later end timestamp will itself see us and abort.
//!
//! `commit` is the commit of every multi-version protocol (`cc/mod.rs`): `si` is this code at
//! Snapshot Isolation; MV2PL validates only its scans (its reads are locked) and releases its
//! read locks; MVTO drew its end timestamp at begin and validates only unique keys (no-wait:
//! an older holder still running aborts us).

use super::visibility::Resolver;
use crate::config::{GcPolicy, Isolation, Protocol};
use crate::error::{AbortReason, Error, Result};
use crate::gc::Garbage;
use crate::storage::{Table, TupleId};
use crate::txn::table::bump;
use crate::txn::{ScanRecord, Transaction, TABLE_SCAN};
use crate::version::Version;
use std::ops::Bound;
use std::ptr;
use std::sync::atomic::Ordering;

/// Commits `tx` under MVOCC. Returns its durability ticket (`log/`): the group-commit epoch of
/// its log record, or with ERMIA's log manager the record's end LSN (0 for a memory-only
/// database).
pub(crate) fn commit(tx: &mut Transaction<'_>) -> Result<u64> {
    let slot = tx.slot();
    // SSN and ERMIA-SSI: every tracked transaction, readers too, draws a commit stamp.
    let stamped = tx.protocol.stamped() && tx.tracks_reads();
    if tx.local.write_set.is_empty() && !stamped {
        if let Err(reason) = tx.await_deps() {
            return Err(tx.fail(reason));
        }
        crate::cc::mv2pl::release(tx);
        if tx.protocol == Protocol::Mvto {
            // Running MVTO transactions show as Preparing (cc/mvto.rs); this one is done.
            slot.set_committed(tx.begin_ts);
        }
        return finish_read_only(tx, tx.begin_ts);
    }
    if tx.protocol == Protocol::Mvto {
        return commit_mvto(tx);
    }
    if tx.protocol == Protocol::Mv2plWait {
        // Wait-for dependencies are resolved before the end timestamp is drawn.
        if let Err(reason) = crate::cc::mv2pl::await_wait_fors(tx) {
            tx.rollback(reason);
            return Err(Error::SerializationFailure(reason));
        }
    }
    let read_only = tx.local.write_set.is_empty();
    let log = tx.db.log.get();
    // ERMIA: the record is encoded before the end timestamp is drawn, because the draw
    // reserves its log space (`log/ermia.rs`). A stamped reader draws one too (every draw
    // of ERMIA's clock is a log range), and covers its range with a skip record.
    let ermia = log.and_then(|l| l.ermia());
    let mut len = 0;
    if let Some(l) = ermia {
        let db = tx.db;
        let command = tx.logged_command();
        match l.prepare(tx.slot_idx, &tx.local.write_set, command, |id| {
            &**db.table_by_id(id)
        }) {
            Ok(n) => len = n,
            Err(e) => {
                tx.rollback(AbortReason::UserAbort);
                return Err(e);
            }
        }
    }
    // Publish Preparing before drawing the end timestamp (see txn/table.rs).
    slot.set_preparing_pending();
    bump(&slot.stats.global_rmw, 1);
    let end_ts = match ermia {
        Some(l) => l.reserve(tx.slot_idx, len),
        None => tx.db.clock.next_end_ts(),
    };
    slot.set_preparing(end_ts);

    #[cfg(test)]
    crate::txn::tests::pause_point(crate::txn::tests::Pause::Prepared);
    // Validation, then the wait for commit dependencies (Hekaton §3.2).
    let checked = validate(tx, end_ts).and_then(|()| tx.await_deps());
    if let Some(l) = ermia.filter(|_| checked.is_err() || read_only) {
        l.skip(tx.slot_idx, end_ts);
    }
    if let Err(reason) = checked {
        tx.rollback(reason);
        return Err(Error::SerializationFailure(reason));
    }
    if stamped {
        crate::cc::ssn::finalize(tx, end_ts);
    }
    if read_only {
        // A stamped reader: nothing to log or post-process.
        slot.set_committed(end_ts);
        return finish_read_only(tx, end_ts);
    }
    install(tx, end_ts)
}

/// Ends a transaction that wrote nothing and serializes at `commit_ts`.
pub(crate) fn finish_read_only(tx: &mut Transaction<'_>, commit_ts: u64) -> Result<u64> {
    let epoch = tx
        .db
        .log
        .get()
        .map_or(0, |l| l.read_only_ticket(&tx.db.clock));
    if let (Some(rec), Some(h)) = (tx.recording.take(), tx.db.history.as_ref()) {
        h.push(rec.into_record(tx.id.word(), tx.begin_ts, commit_ts, tx.isolation));
    }
    bump(&tx.slot().stats.committed, 1);
    tx.finish();
    Ok(epoch)
}

/// MVTO's commit: the end timestamp is the one drawn at begin, and only unique keys are
/// checked (read-ts and scan-ts did the rest while the transaction ran).
fn commit_mvto(tx: &mut Transaction<'_>) -> Result<u64> {
    let end_ts = tx.begin_ts;
    let reason =
        validate(tx, end_ts)
            .err()
            .or(tx.cc.mvto.flag.get().then_some(AbortReason::TimestampOrder));
    if let Some(reason) = reason {
        tx.rollback(reason);
        return Err(Error::SerializationFailure(reason));
    }
    install(tx, end_ts)
}

/// Logs a validated transaction, makes it Committed at `end_ts` and post-processes its
/// versions.
fn install(tx: &mut Transaction<'_>, end_ts: u64) -> Result<u64> {
    let slot = tx.slot();
    let ticket = log_commit(tx, end_ts)?;
    slot.set_committed(end_ts);
    if tx.db.config.speculates() {
        tx.db.txns.report(tx.slot_idx, tx.id, true);
    }

    // Post-processing (Hekaton §2.4): replace our id by the end timestamp in every field we wrote.
    let writes = std::mem::take(&mut tx.local.write_set);
    // GC `vacuum`: mark the tuple's block dirty; `coop`: nothing (readers and the full
    // passes find the garbage); `txn` (and `none`, which drops it): queue it.
    let gc = tx.db.config.gc;
    for w in &writes {
        // SAFETY: our own versions and versions we hold the write lock on; pinned.
        unsafe {
            (*w.new).begin.store(end_ts, Ordering::Release);
            if let Some(old) = w.old.as_ref() {
                old.end.store(end_ts, Ordering::Release);
            }
            if !w.old.is_null() || (*w.new).is_tombstone() {
                if gc == GcPolicy::Vacuum {
                    if tx.db.table_by_id(w.table).mark_dirty(w.tid) {
                        bump(&slot.stats.record_rmw, 1);
                    }
                } else if gc != GcPolicy::Coop {
                    tx.local.garbage.push_back(Garbage {
                        end_ts,
                        table: w.table,
                        tid: w.tid,
                    });
                }
            }
        }
    }
    tx.local.write_set = writes;
    crate::cc::mv2pl::release(tx);
    if let (Some(rec), Some(h)) = (tx.recording.take(), tx.db.history.as_ref()) {
        h.push(rec.into_record(end_ts, tx.begin_ts, end_ts, tx.isolation));
    }
    bump(&slot.stats.committed, 1);
    tx.local.commits_since_gc += 1;
    // GC runs in `finish`, after our read time is unregistered, so the collector never holds
    // the watermark back while it works.
    tx.finish();
    Ok(ticket)
}

/// Appends `tx`'s commit record for `end_ts` to the log, before anyone can see it Committed
/// (see the epoch argument in log/epoch.rs). Returns the durability ticket; on a log error
/// the transaction is rolled back.
pub(crate) fn log_commit(tx: &mut Transaction<'_>, end_ts: u64) -> Result<u64> {
    let logged = match tx.db.log.get().map(|l| &**l) {
        Some(crate::log::LogManager::Ermia(l)) => l.fill(tx.slot_idx, end_ts).map(|_| end_ts),
        Some(crate::log::LogManager::Epoch(l)) => {
            let db = tx.db;
            let command = tx.logged_command();
            l.append(tx.slot_idx, end_ts, &tx.local.write_set, command, |id| {
                &**db.table_by_id(id)
            })
        }
        None => Ok(0),
    };
    logged.inspect_err(|_| tx.rollback(AbortReason::UserAbort))
}

fn validate(tx: &mut Transaction<'_>, end_ts: u64) -> std::result::Result<(), AbortReason> {
    let r = tx.resolver();
    if tx.validates_reads() {
        for &v in &tx.local.read_set {
            // SAFETY: versions we read stay allocated while we are active (GC watermark).
            if !r.still_visible(unsafe { &*v }, end_ts) {
                return Err(AbortReason::ReadValidation);
            }
        }
    }
    // MVTO records no scans (its scan-ts protects them).
    if tx.isolation == Isolation::Serializable {
        for s in &tx.local.scan_set {
            if !rescan(tx, &r, s, end_ts) {
                return Err(AbortReason::Phantom);
            }
        }
    }
    unique_keys_still_ours(tx, Some(end_ts))?;
    if tx.protocol.stamped() && tx.tracks_reads() {
        crate::cc::ssn::precommit(tx, end_ts)?;
    }
    Ok(())
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
/// writes) differs from the one visible as of the begin timestamp. Under SSN and ERMIA-SSI
/// only a row new to the scan counts: a version the scan read that changed is in the read
/// set, where the stamps judge it (`cc/ssn.rs`).
fn rescan(tx: &Transaction<'_>, r: &Resolver<'_>, s: &ScanRecord, end_ts: u64) -> bool {
    let t = tx.db.table_by_id(s.table);
    if s.index == TABLE_SCAN {
        // Every tuple, including those allocated since the scan: same view at both times.
        return (0..t.tid_count()).all(|tid| same_view(tx, r, t, 0, tid, &[], end_ts));
    }
    let index = s.index as usize;
    let idx = &t.indexes[index];
    let arena = &tx.local.scan_keys;
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
        );
    }
    ok
}

fn same_view(
    tx: &Transaction<'_>,
    r: &Resolver<'_>,
    t: &Table,
    index: usize,
    tid: TupleId,
    key: &[u8],
    end_ts: u64,
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
    tx: &Transaction<'_>,
    end_ts: Option<u64>,
) -> std::result::Result<(), AbortReason> {
    for w in &tx.local.write_set {
        let t = tx.db.table_by_id(w.table);
        // SAFETY: our own version.
        let new = unsafe { &*w.new };
        if new.is_tombstone() {
            continue;
        }
        let mut rb = Vec::new();
        for i in 1..t.indexes.len() {
            if t.schema.indexes[i].unique
                && unique_holder(tx, t, i, t.row(new, &mut rb), Some(w.tid), end_ts)
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
    tx: &Transaction<'_>,
    t: &Table,
    index: usize,
    row: &[u8],
    own: Option<TupleId>,
    at_end_ts: Option<u64>,
) -> UniqueCheck {
    if tx.protocol.single_version() {
        return crate::cc::silo::unique_holder(tx, t, index, row, own);
    }
    let mut key = Vec::new();
    t.schema.encode_key_from_row(index, row, &mut key);
    let r = tx.resolver();
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
                let rt = tx
                    .begin_ts
                    .max(if tx.isolation == Isolation::ReadCommitted {
                        tx.db.clock.now()
                    } else {
                        0
                    });
                if holds(r.visible_in_chain(head, rt, false)) {
                    out = UniqueCheck::Taken;
                } else if holds(r.visible_in_chain(head, u64::MAX >> 2, false)) {
                    out = UniqueCheck::Contended;
                }
            }
        }
        out == UniqueCheck::Free
    });
    out
}
