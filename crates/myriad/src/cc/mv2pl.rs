//! MV2PL: multi-version two-phase locking with the locks in the version header and the
//! no-wait policy (thesis §5.3.3).
//!
//! The write lock is the End field (as in every protocol here); the read lock is a count of
//! readers in `Version::aux`. A transaction reads as of its begin timestamp and read-locks
//! the version it reads, which must be the latest one: if a writer holds the End field, or a
//! newer version was committed after the snapshot, the reader aborts (`LockConflict`) instead
//! of waiting. A writer takes the End field and then requires that no other transaction holds
//! a read lock. Locks are held until commit, so the commit order (the end timestamp) is the
//! serialization order. The lock and the count are separate words: each side updates its own
//! word with a read-modify-write and then loads the other's, so a racing reader and writer
//! cannot both miss each other.
//!
//! Phantoms are not covered by row locks; under Serializable the commit re-scans each range
//! as of the end timestamp, as MVOCC does (Hekaton §3.2). Read-only transactions declared
//! READ ONLY read their snapshot without locks: a snapshot at the begin timestamp sees exactly
//! the transactions that committed before it in commit order.

use crate::error::AbortReason;
use crate::txn::table::bump;
use crate::txn::Transaction;
use crate::version::{Version, INFINITY};
use std::sync::atomic::{fence, Ordering};

/// Read-locks `v`, a version just read; the lock is recorded (and later released) even when
/// the read fails.
pub(crate) fn read_lock(tx: &mut Transaction<'_>, v: *const Version) -> Result<(), AbortReason> {
    // SAFETY: a visible version of a chain we are pinned on.
    let r = unsafe { &*v };
    bump(&tx.slot().stats.record_rmw, 1);
    r.aux.fetch_add(1, Ordering::SeqCst);
    tx.local.read_locks.push(v);
    let e = r.end.load(Ordering::SeqCst);
    if e == INFINITY || e == tx.id.word() {
        Ok(())
    } else {
        // Write-locked by another transaction, or superseded after our snapshot.
        Err(AbortReason::LockConflict)
    }
}

/// After taking the write lock on `h`: no other transaction may hold a read lock on it.
pub(crate) fn may_write(tx: &Transaction<'_>, h: &Version) -> Result<(), AbortReason> {
    fence(Ordering::SeqCst);
    let readers = h.aux.load(Ordering::SeqCst);
    let mine = tx
        .local
        .read_locks
        .iter()
        .filter(|&&v| std::ptr::eq(v, h))
        .count() as u64;
    if readers > mine {
        return Err(AbortReason::LockConflict);
    }
    Ok(())
}

/// Releases every read lock (commit or abort).
pub(crate) fn release(tx: &mut Transaction<'_>) {
    let n = tx.local.read_locks.len() as u64;
    if n == 0 {
        return;
    }
    for &v in &tx.local.read_locks {
        // SAFETY: a version we hold a read lock on cannot be superseded by anyone else, and
        // we are still registered, so it is not reclaimed.
        unsafe { (*v).aux.fetch_sub(1, Ordering::Release) };
    }
    bump(&tx.slot().stats.record_rmw, n);
    tx.local.read_locks.clear();
}
