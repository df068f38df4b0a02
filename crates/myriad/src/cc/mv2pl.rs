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

use super::EngineCc;
use crate::error::AbortReason;
use crate::txn::state::TxnCtx;
use crate::txn::table::bump;
use crate::version::{Version, INFINITY};
use std::sync::atomic::{fence, Ordering};

/// The locks a slot's transaction holds, kept with the slot's buffers between transactions.
#[derive(Default)]
pub(crate) struct SlotLocks {
    /// Versions read-locked (one entry per lock taken).
    pub(crate) read_locks: Vec<*const Version>,
    /// `mv2pl-wait`: (table, index) of every range lock the transaction holds.
    pub(crate) range_locks: Vec<(u32, u16)>,
}

/// Read-locks `v`, a version just read; the lock is recorded (and later released) even when
/// the read fails.
pub(crate) fn read_lock(
    tx: &TxnCtx<'_>,
    locks: &mut SlotLocks,
    v: *const Version,
) -> Result<(), AbortReason> {
    // SAFETY: a visible version of a chain we are pinned on.
    let r = unsafe { &*v };
    bump(&tx.slot().stats.record_rmw, 1);
    r.aux.fetch_add(1, Ordering::SeqCst);
    locks.read_locks.push(v);
    let e = r.end.load(Ordering::SeqCst);
    if e == INFINITY || e == tx.id.word() {
        Ok(())
    } else {
        // Write-locked by another transaction, or superseded after our snapshot.
        Err(AbortReason::LockConflict)
    }
}

/// After taking the write lock on `h`: no other transaction may hold a read lock on it.
pub(crate) fn may_write(locks: &SlotLocks, h: &Version) -> Result<(), AbortReason> {
    fence(Ordering::SeqCst);
    let readers = h.aux.load(Ordering::SeqCst);
    let mine = locks
        .read_locks
        .iter()
        .filter(|&&v| std::ptr::eq(v, h))
        .count() as u64;
    if readers > mine {
        return Err(AbortReason::LockConflict);
    }
    Ok(())
}

/// Releases every read lock and range lock (commit or abort).
pub(crate) fn release(tx: &TxnCtx<'_>, ec: &EngineCc, locks: &mut SlotLocks) {
    release_range_locks(tx, ec, locks);
    let n = locks.read_locks.len() as u64;
    if n == 0 {
        return;
    }
    for &v in &locks.read_locks {
        // SAFETY: a version we hold a read lock on cannot be superseded by anyone else, and
        // we are still registered, so it is not reclaimed.
        unsafe { (*v).aux.fetch_sub(1, Ordering::Release) };
    }
    bump(&tx.slot().stats.record_rmw, n);
    locks.read_locks.clear();
}

// ------------------------------------------------------------------------------------------
// `mv2pl-wait`: Hekaton's pessimistic scheme (Hekaton §4).
//
// Locks. The read lock is `aux`'s count, as above, with Hekaton's NoMoreReadLocks flag in its
// top bit; the write lock is the End field. Unlike no-wait MV2PL, a reader may lock a version
// a writer holds, and a writer may take a version readers hold (eager updates, §4.2): the
// writer then owes a wait-for dependency to those readers. Serializable scans and lookups
// take a range lock on what they cover (§4.1.2 bucket locks, here per index and per key range,
// `RangeLocks`), and an insert into (or a key moved into) a locked range owes a wait-for
// dependency to the locker.
//
// Wait-for dependencies are resolved at precommit (`await_wait_fors`), before the end
// timestamp is drawn: the transaction sets NoMoreWaitFors (`Slot::no_more_wait_fors`) and
// NoMoreReadLocks on every version it replaces, notes which other transactions hold range
// locks covering its new index keys, and waits until the replaced versions have no reader
// but itself and those transactions have drawn their end timestamps. Hekaton counts the
// dependencies in a WaitForCounter that readers decrement; here the writer re-reads the
// counts it waits on, which needs no per-transaction waiter list and ends the same way.
// A reader that meets NoMoreReadLocks, and a scanner that meets an uncommitted row of a
// transaction with NoMoreWaitFors set (it could no longer be made to wait, §4.3.1), aborts
// (`lock_conflict`).
//
// Read locks are held until after the end timestamp is drawn (they are released with the
// others in `release`), not released at the end of normal processing as §4.3.1 says: a
// reader that released its locks before drawing its end timestamp would let the writer of a
// version it read commit first, and two such transactions that read each other's writes
// would both commit (a write skew). Holding them is what §4.4's deadlock graph assumes (a
// blocked transaction's read set yields its implicit edges).
//
// Deadlocks (§4.4): a waiter that has waited a while publishes what it waits on
// (`Slot::wait_info`: its read locks, the range lockers it waits for) and periodically builds
// the wait-for graph of the published waiters. Edges: T2 → T1 when T1 read-locked a version
// that T2 write-locked; TU → TS when TU waits for TS's range lock. A waiter on a cycle
// aborts (`deadlock`) if it has the largest id of the cycle; the largest id of any strongly
// connected set of waiters finds itself the largest of the cycle it finds, so every deadlock
// is broken, and only one member of a simple cycle aborts.
//
// A wait longer than `Config::lock_wait_timeout` (5 s by default) on a holder that is not
// waiting ends in `lock_conflict` (a lock-wait timeout; Hekaton does not say).
//
// Reads are at the begin timestamp, as under `mv2pl` (Hekaton's serializable pessimistic
// reads are at the current time): a version superseded after the begin timestamp cannot be
// locked, and the reader aborts.

use crate::storage::{Table, TupleId};
use crate::txn::table::{TxnId, TxnState};
use crate::version::is_txn;
use std::ops::{Bound, RangeBounds};

/// `aux`: no more read locks are granted (Hekaton §4.1.1 NoMoreReadLocks): the writer holding
/// the version is at its precommit.
pub(crate) const NO_MORE_READ_LOCKS: u64 = 1 << 63;

/// How long a waiter waits before it publishes its wait and looks for deadlocks, and how
/// often it looks again.
const DEADLOCK_CHECK: std::time::Duration = std::time::Duration::from_micros(200);

/// What a range lock covers, in the index's stored keys.
enum Covered {
    /// Entries whose key (without a secondary index's tuple-id suffix) is this: a point
    /// lookup (primary or secondary, hash or ordered).
    Key(Vec<u8>),
    /// Stored keys between the bounds (an ordered scan; unbounded for a full table scan).
    Range(Bound<Vec<u8>>, Bound<Vec<u8>>),
}

struct RangeLock {
    owner: u64,
    covered: Covered,
}

/// The range locks of one index (Hekaton §4.1.2's LockCount and LockList).
#[derive(Default)]
pub(crate) struct RangeLocks {
    held: std::sync::atomic::AtomicUsize,
    list: parking_lot::Mutex<Vec<RangeLock>>,
}

/// `mv2pl-wait`'s read lock on `v`, a version just read at the begin timestamp.
pub(crate) fn wait_read_lock(
    tx: &TxnCtx<'_>,
    locks: &mut SlotLocks,
    v: *const Version,
) -> Result<(), AbortReason> {
    // SAFETY: a visible version of a chain we are pinned on.
    let r = unsafe { &*v };
    bump(&tx.slot().stats.record_rmw, 1);
    let mut cur = r.aux.load(Ordering::Relaxed);
    loop {
        if cur & NO_MORE_READ_LOCKS != 0 {
            // Its writer is at precommit: it waits for the read locks it found, ours among
            // them if we already hold one (a repeated read), and can wait for no new one.
            if locks.read_locks.iter().any(|&l| std::ptr::eq(l, v)) {
                return Ok(());
            }
            return Err(AbortReason::LockConflict);
        }
        match r
            .aux
            .compare_exchange_weak(cur, cur + 1, Ordering::SeqCst, Ordering::Relaxed)
        {
            Ok(_) => break,
            Err(x) => cur = x,
        }
    }
    locks.read_locks.push(v);
    let e = r.end.load(Ordering::SeqCst);
    if e == INFINITY || is_txn(e) {
        // The latest version; a writer holding it will wait for our lock at its precommit.
        Ok(())
    } else {
        // Superseded after our snapshot.
        Err(AbortReason::LockConflict)
    }
}

/// Takes a range lock on index `index` of `t` before a serializable read of it: the key
/// `key` (`point`), else the stored-key range `lo`..`hi`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn range_lock(
    tx: &TxnCtx<'_>,
    ec: &EngineCc,
    locks: &mut SlotLocks,
    t: &Table,
    index: usize,
    point: Option<&[u8]>,
    lo: Bound<&[u8]>,
    hi: Bound<&[u8]>,
) {
    let covered = match point {
        Some(k) => Covered::Key(k.to_vec()),
        None => Covered::Range(lo.map(<[u8]>::to_vec), hi.map(<[u8]>::to_vec)),
    };
    let index_locks = &ec.range_locks(t)[index];
    index_locks.list.lock().push(RangeLock {
        owner: tx.id.0,
        covered,
    });
    // The list's lock is one shared acquisition, the count one shared RMW.
    bump(&tx.slot().stats.global_rmw, 2);
    index_locks.held.fetch_add(1, Ordering::SeqCst);
    locks.range_locks.push((t.id, index as u16));
    // The lock is in place before the read looks at the index (pairs with the writer's
    // NoMoreWaitFors store and its load of `held`).
    fence(Ordering::SeqCst);
}

/// A serializable read found the row `tid` of a range it locked without a version visible
/// at the begin timestamp. A row another transaction is inserting is fine while that one
/// can still be made to wait for our range lock; otherwise (it is at precommit or committed
/// after our snapshot) the row is one we can neither lock nor ignore.
pub(crate) fn unseen_row(tx: &TxnCtx<'_>, t: &Table, tid: TupleId) -> Result<(), AbortReason> {
    let Some(e) = t.entry(tid) else {
        return Ok(());
    };
    // SAFETY: pinned.
    let Some(h) = (unsafe { t.newest(e).as_ref() }) else {
        return Ok(());
    };
    let b = h.begin.load(Ordering::Acquire);
    if b == INFINITY || b == tx.id.word() {
        return Ok(());
    }
    if !is_txn(b) {
        return if b > tx.begin_ts.get() {
            Err(AbortReason::LockConflict)
        } else {
            Ok(())
        };
    }
    let id = TxnId::from_word(b);
    match tx.db.txns.state_of(id) {
        TxnState::Aborted => Ok(()),
        TxnState::Active
            if tx
                .db
                .txns
                .slot(id.slot())
                .no_more_wait_fors
                .load(Ordering::SeqCst)
                != id.0 =>
        {
            Ok(())
        }
        _ => Err(AbortReason::LockConflict),
    }
}

/// `mv2pl-wait`'s precommit (Hekaton §4.3.1): waits out the transaction's wait-for
/// dependencies; `deadlock` if it is chosen to break a cycle of waiters.
pub(crate) fn await_wait_fors(
    tx: &TxnCtx<'_>,
    ec: &EngineCc,
    locks: &SlotLocks,
) -> Result<(), AbortReason> {
    let slot = tx.slot();
    let me = tx.id.0;
    slot.no_more_wait_fors.store(me, Ordering::SeqCst);
    for w in &tx.sets.write_set {
        // SAFETY: versions we hold the write lock on; pinned.
        if let Some(old) = unsafe { w.old.as_ref() } {
            old.aux.fetch_or(NO_MORE_READ_LOCKS, Ordering::SeqCst);
            bump(&slot.stats.record_rmw, 1);
        }
    }
    fence(Ordering::SeqCst);
    let on = range_lockers_of_our_keys(tx, ec);
    let own = |v: &Version| {
        locks
            .read_locks
            .iter()
            .filter(|&&r| std::ptr::eq(r, v))
            .count() as u64
    };
    let readers_gone = || {
        tx.sets.write_set.iter().all(|w| {
            // SAFETY: as above.
            unsafe { w.old.as_ref() }
                // Our own read locks are searched for only when the version has readers
                // (the usual commit finds none).
                .is_none_or(|old| {
                    let readers = old.aux.load(Ordering::SeqCst) & !NO_MORE_READ_LOCKS;
                    readers == 0 || readers <= own(old)
                })
        })
    };
    let lockers_done = || {
        on.iter().all(|&id| {
            !matches!(
                tx.db.txns.state_of(TxnId(id)),
                TxnState::Active | TxnState::PreparingPending
            )
        })
    };
    if readers_gone() && lockers_done() {
        return Ok(());
    }
    bump(&slot.stats.preparing_waits, 1);
    let started = std::time::Instant::now();
    let mut next_check = DEADLOCK_CHECK;
    let mut published = false;
    let backoff = crossbeam_utils::Backoff::new();
    let out = loop {
        if readers_gone() && lockers_done() {
            break Ok(());
        }
        if started.elapsed() >= next_check {
            if !published {
                let mut w = slot.wait_info.lock();
                w.id = me;
                w.reads.clear();
                w.reads.extend(locks.read_locks.iter().map(|&v| v as usize));
                w.on.clear();
                w.on.extend_from_slice(&on);
                published = true;
            } else if is_deadlock_victim(tx) {
                break Err(AbortReason::Deadlock);
            } else if started.elapsed() >= tx.db.config.get_lock_wait_timeout() {
                break Err(AbortReason::LockConflict);
            }
            next_check = started.elapsed() + DEADLOCK_CHECK;
        }
        if backoff.is_completed() {
            std::thread::yield_now();
        } else {
            backoff.snooze();
        }
    };
    if published {
        slot.wait_info.lock().id = 0;
    }
    out
}

/// Other transactions holding a range lock that covers a key our writes add to an index
/// (an insert, or an update that changes the key), in id order.
fn range_lockers_of_our_keys(tx: &TxnCtx<'_>, ec: &EngineCc) -> Vec<u64> {
    let me = tx.id.0;
    let mut on = Vec::new();
    let mut key = Vec::new();
    let mut old_key = Vec::new();
    let mut stored = Vec::new();
    let (mut new_row, mut old_row) = (Vec::new(), Vec::new());
    for w in &tx.sets.write_set {
        let t = tx.db.table_by_id(w.table);
        // SAFETY: our version and the one we replaced; pinned.
        let new = unsafe { &*w.new };
        if new.is_tombstone() {
            continue;
        }
        let old = unsafe { w.old.as_ref() }.filter(|o| !o.is_tombstone());
        let Some(table_locks) = ec.range_locks_taken(w.table) else {
            continue;
        };
        for (index, index_locks) in table_locks.iter().enumerate() {
            if index_locks.held.load(Ordering::SeqCst) == 0 {
                continue;
            }
            t.schema
                .encode_key_from_row(index, t.row(new, &mut new_row), &mut key);
            if let Some(o) = old {
                t.schema
                    .encode_key_from_row(index, t.row(o, &mut old_row), &mut old_key);
                if old_key == key {
                    continue;
                }
            }
            stored.clear();
            stored.extend_from_slice(&key);
            if index != 0 && t.indexes[index].is_ordered() {
                stored.extend_from_slice(&w.tid.get().to_be_bytes());
            }
            for l in index_locks.list.lock().iter() {
                let covers = match &l.covered {
                    Covered::Key(k) => *k == key,
                    Covered::Range(lo, hi) => (
                        lo.as_ref().map(Vec::as_slice),
                        hi.as_ref().map(Vec::as_slice),
                    )
                        .contains(stored.as_slice()),
                };
                if covers && l.owner != me {
                    on.push(l.owner);
                }
            }
        }
    }
    on.sort_unstable();
    on.dedup();
    on
}

/// How many transactions of `txns` are blocked in a precommit wait and have published it
/// (waited longer than `DEADLOCK_CHECK`): `Database::lock_waits`.
pub(crate) fn published_waiters(txns: &crate::txn::table::TxnTable) -> usize {
    txns.slots().filter(|s| s.wait_info.lock().id != 0).count()
}

/// Whether this waiter is on a cycle of waiting transactions and has its largest id.
fn is_deadlock_victim(tx: &TxnCtx<'_>) -> bool {
    let me = tx.id.0;
    // The published waiters.
    let mut nodes: Vec<(u64, Vec<usize>, Vec<u64>)> = Vec::new();
    for s in tx.db.txns.slots() {
        let w = s.wait_info.lock();
        if w.id != 0 {
            nodes.push((w.id, w.reads.clone(), w.on.clone()));
        }
    }
    let waiting = |id: u64| nodes.iter().any(|n| n.0 == id);
    // Edges waiter → waited-for.
    let mut edges: Vec<(u64, u64)> = Vec::new();
    for (id, reads, on) in &nodes {
        edges.extend(on.iter().filter(|&&o| waiting(o)).map(|&o| (*id, o)));
        for &v in reads {
            // SAFETY: a version a waiter holds a read lock on cannot be superseded and
            // reclaimed before it releases; one released since is reclaimed only after our
            // pin (we are pinned).
            let e = unsafe { &*(v as *const Version) }
                .end
                .load(Ordering::Acquire);
            if is_txn(e) {
                let writer = TxnId::from_word(e).0;
                if writer != *id && waiting(writer) {
                    edges.push((writer, *id));
                }
            }
        }
    }
    // A path from us back to us: depth-first, remembering the path.
    fn dfs(at: u64, me: u64, edges: &[(u64, u64)], path: &mut Vec<u64>) -> bool {
        for &(a, b) in edges {
            if a != at {
                continue;
            }
            if b == me {
                return true;
            }
            if path.contains(&b) {
                continue;
            }
            path.push(b);
            if dfs(b, me, edges, path) {
                return true;
            }
            path.pop();
        }
        false
    }
    let mut path = vec![me];
    dfs(me, me, &edges, &mut path) && path.iter().all(|&id| id <= me)
}

/// Releases the range locks of `tx` (after its end timestamp is drawn, or at abort).
pub(crate) fn release_range_locks(tx: &TxnCtx<'_>, ec: &EngineCc, locks: &mut SlotLocks) {
    if locks.range_locks.is_empty() {
        return;
    }
    let me = tx.id.0;
    let mut held = std::mem::take(&mut locks.range_locks);
    held.sort_unstable();
    held.dedup();
    for &(table, index) in &held {
        let t = tx.db.table_by_id(table);
        let index_locks = &ec.range_locks(t)[index as usize];
        let mut list = index_locks.list.lock();
        let before = list.len();
        list.retain(|l| l.owner != me);
        index_locks
            .held
            .fetch_sub(before - list.len(), Ordering::SeqCst);
    }
    bump(&tx.slot().stats.global_rmw, 2 * held.len() as u64);
    held.clear();
    locks.range_locks = held;
}

/// Clears NoMoreReadLocks on the versions `tx` replaced: it aborts (called before it is
/// marked Aborted, so no other writer has taken one of them over yet).
pub(crate) fn reopen_read_locks(tx: &TxnCtx<'_>) {
    for w in &tx.sets.write_set {
        // SAFETY: versions we hold the write lock on; pinned.
        if let Some(old) = unsafe { w.old.as_ref() } {
            old.aux.fetch_and(!NO_MORE_READ_LOCKS, Ordering::SeqCst);
        }
    }
}
