//! MVTO: multi-version timestamp ordering (thesis §5.3.1; Reed 1978).
//!
//! A transaction draws its timestamp `ts` at begin (the one shared read-modify-write it
//! makes) and serializes at it: it reads as of `ts`, its versions begin at `ts`, and nothing
//! is validated at commit. The order is enforced while the transaction runs:
//! - **Reads** raise the version's read-ts (`Version::aux`) to `ts`. A read that meets a
//!   version written or write-locked by a transaction with a smaller timestamp that has not
//!   committed is aborted (`TimestampOrder`): MVTO never reads uncommitted data, and waiting
//!   could block behind an interactive transaction for as long as it stays open. To make that
//!   visible, an active MVTO transaction publishes `Preparing(ts)` from its begin, and its
//!   readers resolve with the no-wait `Resolver` (`cc/visibility.rs`).
//! - **Writes** go to the latest version only, under its write lock (the End field), and only
//!   if no later transaction read it: after locking, the version's read-ts must be ≤ `ts`.
//!   The lock is a CAS and the read-ts a `fetch_max`, each followed by a fence and a load of
//!   the other word, so of a racing reader and writer at least one sees the other. The reader
//!   re-checks the End field also when it finds the read-ts already at or past its `ts` (a
//!   later reader's, which may have landed after an older writer's check): skipping the
//!   check there let a read miss an older writer's commit (a lost update).
//! - **Phantoms.** The thesis leaves ranges out; a serializable engine cannot. What a scan
//!   observed as absent has no version to carry a read-ts, so each index carries one
//!   (`Table::scan_ts`): a range scan, a point lookup that finds nothing, or a whole-table
//!   scan raises it *before* reading the index, and an insert (or an update that moves a row
//!   to a new secondary key) checks it *after* adding its index entries: a writer older than
//!   a transaction that already scanned the index aborts. Coarse (one word per index), but it
//!   costs a scan one load in the common case and never misses a phantom.
//!
//! Read-only transactions declared READ ONLY take a snapshot instead (`snapshot`): they wait
//! until every transaction with a timestamp at or below the current clock has finished, then
//! read as of the clock without touching read-ts. If that takes longer than
//! `SNAPSHOT_WAIT`, the begin fails with `AbortReason::SnapshotWait` (`Database::run`
//! retries it): a READ ONLY transaction never silently becomes a read-tracking reader.

use crate::cc::visibility::Resolver;
use crate::error::AbortReason;
use crate::storage::{Table, TupleId};
use crate::timestamp::Timestamp;
use crate::txn::table::{bump, Slot, TxnTable};
use crate::version::Version;
use std::sync::atomic::{fence, Ordering};
use std::time::{Duration, Instant};

/// How long a READ ONLY transaction waits for older writers before its begin fails with
/// `AbortReason::SnapshotWait`.
pub(crate) const SNAPSHOT_WAIT: Duration = Duration::from_millis(20);

/// MVTO's per-transaction state: set by the no-wait resolver where it would have waited for
/// an older writer (`Resolver::blocked`); the operation then fails with `timestamp_order`.
#[derive(Default)]
pub(crate) struct Blocked {
    /// Whether a read met an older uncommitted write.
    pub(crate) flag: std::cell::Cell<bool>,
}

/// Hook `begin` for MVTO: the transaction in slot `slot_idx`, whose provisional read time
/// is `rt`, gets its timestamp. A READ ONLY transaction reads a snapshot as of `rt` once
/// every older transaction has finished (waiting at most `wait`, then it fails with
/// `SnapshotWait`); any other draws its
/// timestamp at begin and publishes it as Preparing(ts) at once, so that later readers never
/// take its writes for those of an Active transaction that will serialize after them.
/// Returns the begin timestamp and whether reads are tracked (not for a snapshot).
pub(crate) fn begin(
    db: &crate::shared::Shared,
    slot_idx: usize,
    read_only: bool,
    rt: Timestamp,
    wait: Duration,
) -> Result<(Timestamp, bool), AbortReason> {
    if read_only {
        return if wait_for_older_slots(&db.txns, slot_idx, rt, wait) {
            Ok((rt, false))
        } else {
            Err(AbortReason::SnapshotWait)
        };
    }
    let slot = db.txns.slot(slot_idx);
    slot.set_preparing_pending();
    bump(&slot.stats.global_rmw, 1);
    let ts = db.clock.next_end_ts();
    slot.set_preparing(ts);
    Ok((ts, true))
}

/// Records a read of `v` by the transaction with timestamp `ts` in `slot` (raises its
/// read-ts). `resolver` is the transaction's, in no-wait mode (its `blocked` flag set).
pub(crate) fn on_read(
    v: &Version,
    ts: Timestamp,
    slot: &Slot,
    resolver: &Resolver<'_>,
) -> Result<(), AbortReason> {
    debug_assert!(
        resolver.blocked.is_some(),
        "MVTO reads resolve without waiting"
    );
    if v.aux.load(Ordering::Acquire) < ts.get() {
        bump(&slot.stats.record_rmw, 1);
        v.aux.fetch_max(ts.get(), Ordering::SeqCst);
    }
    // Pairs with `may_write`'s fence: of this fence and the writer's, whichever comes first,
    // the other side sees its store (our read-ts, or a later reader's read-ts we loaded; the
    // writer's lock).
    fence(Ordering::SeqCst);
    // A writer older than us may have locked v before the read-ts landed: it did not see it,
    // so we must see the writer. That holds when a later reader raised the read-ts past ours
    // too (the check above then skips the RMW, never this check): that reader may have
    // landed after the older writer's check and aborted, and the writer can have committed
    // since we found v visible.
    if !resolver.still_visible(v, ts) || resolver.blocked.is_some_and(|b| b.get()) {
        return Err(AbortReason::TimestampOrder);
    }
    Ok(())
}

/// After taking the write lock on `h` (the latest version): may a transaction at timestamp
/// `ts` supersede it?
pub(crate) fn may_write(h: &Version, ts: Timestamp) -> Result<(), AbortReason> {
    fence(Ordering::SeqCst);
    if h.aux.load(Ordering::SeqCst) > ts.get() {
        return Err(AbortReason::TimestampOrder);
    }
    Ok(())
}

/// Before a scan of index `index` of `t` (or a point lookup that found nothing) by the
/// transaction with timestamp `ts` in `slot` reads it.
pub(crate) fn before_scan(t: &Table, index: usize, ts: Timestamp, slot: &Slot) {
    let Some(w) = t.scan_ts.get(index) else {
        return;
    };
    if w.load(Ordering::Acquire) < ts.get() {
        bump(&slot.stats.global_rmw, 1);
        w.fetch_max(ts.get(), Ordering::SeqCst);
    }
    // Order the scan's index reads after the word (against `may_enter`'s fence).
    fence(Ordering::SeqCst);
}

/// A point lookup of primary key `key` in `t` by the transaction with timestamp `ts` in
/// `slot` found no live row: raises the primary index's scan-ts, then fails if an older
/// transaction added the key before it landed (that transaction did not see us, so we must
/// see it). `live(tid)`: whether row `tid` has a live version visible at `ts`.
pub(crate) fn on_miss(
    t: &Table,
    key: &[u8],
    ts: Timestamp,
    slot: &Slot,
    live: impl FnOnce(TupleId) -> bool,
) -> Result<(), AbortReason> {
    before_scan(t, 0, ts, slot);
    if t.indexes[0].get_unique(key).is_some_and(live) {
        return Err(AbortReason::TimestampOrder);
    }
    Ok(())
}

/// After a write by the transaction with timestamp `ts` added index entries for a row:
/// `indexes` yields the positions of the indexes the row newly entered (0 for a new row in
/// the table). Fails if a later transaction already scanned one of them.
pub(crate) fn may_enter(
    t: &Table,
    ts: Timestamp,
    mut indexes: impl Iterator<Item = usize>,
) -> Result<(), AbortReason> {
    fence(Ordering::SeqCst);
    if indexes.any(|i| {
        t.scan_ts
            .get(i)
            .is_some_and(|w| w.load(Ordering::SeqCst) > ts.get())
    }) {
        return Err(AbortReason::TimestampOrder);
    }
    Ok(())
}

/// A READ ONLY snapshot: waits (up to `wait`) until no transaction with a timestamp
/// ≤ `rt` is still running, so none can still write below `rt`. False on timeout.
pub(crate) fn wait_for_older_slots(
    txns: &TxnTable,
    me: usize,
    rt: Timestamp,
    wait: Duration,
) -> bool {
    let deadline = Instant::now() + wait;
    let backoff = crossbeam_utils::Backoff::new();
    for (i, s) in txns.slots().enumerate() {
        if i == me {
            continue;
        }
        while s.runs_at_or_below(rt) {
            if Instant::now() >= deadline {
                return false;
            }
            backoff.snooze();
        }
    }
    true
}
