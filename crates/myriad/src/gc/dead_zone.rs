//! Dead-zone pruning (vDriver, Kim et al., *Long-lived Transactions Made Less Harmful*, §3.1
//! Theorem 3.5), run under GC `dead-zone` by the workers (`collect`) and the `vacuum` threads
//! (`vacuum.rs`).
//!
//! Definitions. A *read point* is a time some live transaction reads at: its registered read
//! time (`Slot::begin_ts`), and while it is Preparing its end timestamp (commit-time
//! validation re-reads there, `cc/mvocc.rs`). `ct` is the clock, loaded before the slots are
//! scanned, lowered to every provisional registration (`PROV_BIT`: Read Committed, or a
//! transaction still drawing its read time; it may read at any time from there on) and to
//! the read time of a transaction about to draw its end timestamp. The *dead zones* are the
//! gaps between consecutive read points, the first from −∞, the last up to `ct`. Myriad's
//! read rule is `Begin ≤ rt < End` (`cc/visibility.rs`), so a committed version is *dead*
//! iff `End ≤ ct` and no read point `s` has `Begin ≤ s < End` (Theorem 3.5 with that
//! boundary: the interval lies inside one zone).
//!
//! Invariants.
//! - A version visible at some read point, or at any time ≥ `ct`, is never cut. (The
//!   newest version of a chain has End = ∞ or a transaction's id and is never a candidate.)
//! - **A stale list is safe.** A transaction that registers after the builder scanned its
//!   slot stored its provisional registration after that scan (SeqCst) and loads its read
//!   time after it, so the read time is ≥ `ct`: it sees no version with `End ≤ ct`. One that
//!   registered earlier is in the list (possibly provisionally: then `ct ≤` its time), or
//!   has ended since, which only makes the list hold a point too many. A Preparing state
//!   the builder missed was stored after the builder's clock load (the end timestamp is a
//!   SeqCst fetch-add after it), so that end timestamp is > `ct`. Versions the list calls
//!   dead are therefore dead for every transaction, now and later, and a `Zones` may be
//!   used for a whole pass after it was built (`tests::a_stale_list_is_safe`).
//! - **One pruner per chain.** A splice stores `prev.next = v.next`; two pruners splicing
//!   neighbours would lose one splice (and free a version still linked). Every pruner of a
//!   `dead-zone` chain holds the chain's stripe of `PruneLocks` (hashed from table and tuple
//!   id) while it prunes, and holds no other stripe. Writers touch only the entry, the
//!   newest version's fields and (o2n) the newest version's `next`: never a spliced version
//!   or its `prev`'s `next`.
//! - **Who prunes.** The writer, first: a commit queues its tuples as transaction-level GC
//!   does, and every `gc_interval_txns` commits the worker builds fresh zones and prunes
//!   them (`collect`), while its cache still holds the chains (a vacuum thread pruning them
//!   instead fetched every one from the other core: 35 % of a YCSB run's cycles went to
//!   those misses). A tuple whose stripe is taken, or whose chain keeps an older version two
//!   collects running (a live snapshot still sees it) or at once when the oldest read point
//!   predates the worker's previous collect and every version it keeps beside the newest
//!   ended before that collect (a long-lived reader pins it: the tuple is *parked*), is
//!   handed to the vacuum thread owning its block, which revisits it until it is clean
//!   (`vacuum.rs`). Responsibility for a chain passes to newer entries: one whose tuple a
//!   later transaction committed a version of is dropped (that commit queued the tuple; an
//!   uncommitted writer does not count, as it may roll back): before its prune if the
//!   commit came first, so of a hot chain's entries only the newest prunes, else after it.
//!   The entry of the newest committed version therefore always exists until the chain is
//!   clean.
//! - A spliced version keeps its `next`, so a reader standing on it continues down the chain;
//!   its memory is freed after the memory epoch (`Cut::free_after_epoch`): a reader that can
//!   still reach it was pinned before the splice, and so keeps every version spliced later
//!   alive as well.
//!
//! Key operations. `build` scans the transaction table once per pass (at most
//! `max_concurrent_txns` loads and a sort); `Zones::is_dead` is one binary search;
//! `prune` cuts the tail below the watermark as `epoch::prune` does, then splices the dead
//! versions out of the rest of the chain; `collect` is a worker's pass over its queue.

use super::epoch::{prune_entry as prune_tail, Cut, Garbage};
use super::GcHost;
use crate::storage::{Table, TupleId};
use crate::timestamp::Source;
use crate::txn::table::{bump, Slot, TxnTable, Validating, PROV_BIT};
use crate::version::{is_txn, Order, Version};
use crossbeam_epoch::Guard;
use crossbeam_utils::CachePadded;
use std::collections::VecDeque;
use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicPtr, Ordering};
use std::time::Instant;

pub(crate) use crate::version::zones::Zones;

/// Rebuilds `z` from the clock and the transaction table (module docs; the buffer is
/// reused).
pub(crate) fn build(z: &mut Zones, clock: &Source, txns: &TxnTable) {
    z.fill(|points| {
        // The clock first: see the module's "stale list" argument.
        let mut ct = clock.now().get();
        for s in txns.slots() {
            let b = s.begin_ts.load(Ordering::SeqCst);
            if b == u64::MAX {
                continue;
            }
            if b & PROV_BIT != 0 {
                ct = ct.min(b & !PROV_BIT);
                continue;
            }
            points.push(b);
            match s.validating() {
                Validating::No => {}
                // Its end timestamp may already be drawn and below `ct`; it is above `b`.
                Validating::Pending => ct = ct.min(b),
                Validating::At(ts) => points.push(ts),
            }
        }
        ct
    });
}

/// Stripes of `PruneLocks`: a power of two. Two pruners meet on one only if their chains
/// hash to it while both prune (a few hundred nanoseconds each).
const STRIPES: usize = 1024;

/// The stripe locks that make every chain's pruner the only one (module docs). A spin lock
/// per cache line: held for one chain's prune, never while waiting for anything else.
pub(crate) struct PruneLocks(Box<[CachePadded<AtomicBool>]>);

impl Default for PruneLocks {
    fn default() -> Self {
        PruneLocks((0..STRIPES).map(|_| Default::default()).collect())
    }
}

/// A held stripe of `PruneLocks`, released on drop.
pub(crate) struct PruneGuard<'a>(&'a AtomicBool);

impl Drop for PruneGuard<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

impl PruneLocks {
    fn stripe(&self, table: u32, tid: TupleId) -> &AtomicBool {
        // Fibonacci hashing: neighbouring tuple ids land on different stripes.
        let h = (tid.get() ^ (u64::from(table) << 40)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        &self.0[(h >> (64 - STRIPES.trailing_zeros())) as usize]
    }

    /// The stripe of (`table`, `tid`), or `None` if another pruner holds it.
    pub(crate) fn try_lock(&self, table: u32, tid: TupleId) -> Option<PruneGuard<'_>> {
        let s = self.stripe(table, tid);
        // Not `then_some`: it would build (and drop, releasing the stripe) a guard on failure.
        s.compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
            .then(|| PruneGuard(s))
    }

    /// The stripe of (`table`, `tid`), waiting while another pruner holds it (it holds it
    /// for one chain's prune and waits for nothing meanwhile).
    pub(crate) fn lock(&self, table: u32, tid: TupleId) -> PruneGuard<'_> {
        let backoff = crossbeam_utils::Backoff::new();
        loop {
            if let Some(g) = self.try_lock(table, tid) {
                return g;
            }
            backoff.snooze();
        }
    }
}

/// A worker's dead-zone GC (module docs, "Who prunes"), run every `gc_interval_txns`
/// commits after its read time is unregistered, and for idle slots by
/// `Database::collect_garbage`. Builds `zones` now, prunes the queued tuples whose commit
/// is at or below its clock bound, and hands to the vacuum threads (through `handover`)
/// those whose stripe is taken or whose chains kept an older version at a second visit
/// (unless a later commit wrote the tuple: its own entry looks again).
pub(crate) fn collect(
    db: &impl GcHost,
    slot: &Slot,
    queue: &mut VecDeque<Garbage>,
    zones: &mut Zones,
    handover: &mut Vec<(u32, TupleId, bool)>,
    guard: &Guard,
) {
    let Some(vacuum) = db.vacuum() else {
        return;
    };
    if queue.is_empty() {
        return;
    }
    let start = Instant::now();
    let previous = zones.ct();
    build(zones, db.clock(), db.txns());
    // The oldest read point predates our previous collect: a long-lived reader pins what
    // stays, and a second look in `gc_interval_txns` commits would find it pinned again.
    let long = zones.watermark() < previous;
    let mut cut = Cut::default();
    let (mut spliced, mut locks) = (0, 0);
    let waiting = handover.len();
    // Entries seen once already and kept an older version go to the back, once.
    for _ in 0..queue.len() {
        let Some(g) = queue.front().copied() else {
            break;
        };
        if g.end_ts > zones.ct() {
            break;
        }
        queue.pop_front();
        let t = db.table_by_id(g.table);
        let Some(e) = t.entry(g.tid) else { continue };
        // A chain of one live version holds nothing to cut (a tuple this window wrote
        // twice, pruned at its first entry): no stripe, no walk. Only loads, so safe beside
        // the chain's pruner; a version added later is queued by its own commit.
        if nothing_to_cut(e) {
            continue;
        }
        // A later commit wrote the tuple and queued it: its entry prunes the chain (with
        // zones whose clock is past that commit, so past ours) and looks again while the
        // chain keeps an older version, so this one leaves the stripe and the walk to it. On a hot chain that two workers
        // update in turn, only the newest entry of each window prunes, and the stripe's line
        // moves between the cores once per window, not once per commit.
        if requeued_by_later_commit(t, e, g.end_ts) {
            continue;
        }
        locks += 1;
        let Some(_held) = vacuum.locks.try_lock(g.table, g.tid) else {
            handover.push((g.table, g.tid, false));
            continue;
        };
        let (n, older) = prune_at(t, e, zones, &mut cut);
        spliced += n;
        // What stays is another look's business only if no later commit queued the tuple:
        // one that did (its version is the head now) has its own collect look at the chain.
        if older && !requeued_by_later_commit(t, e, g.end_ts) {
            // Parked only if what stays ended before our previous collect (the long-lived
            // reader's version): a version superseded since is likely kept by a short reader
            // and is worth another look soon.
            let parked = long && !keeps_recent(t, g.tid, previous);
            if parked || g.retried {
                handover.push((g.table, g.tid, parked));
            } else {
                queue.push_back(Garbage { retried: true, ..g });
            }
        }
    }
    // A full batch goes now; so does what is left once a collect adds nothing to it (the
    // tail of a burst would otherwise wait for the next one).
    if !handover.is_empty()
        && (handover.len() >= crate::gc::vacuum::HAND_OVER || handover.len() == waiting)
    {
        // One lock acquisition per queue the batch went to.
        bump(&slot.stats.global_rmw, vacuum.hand_over(handover) as u64);
    }
    bump(&slot.stats.record_rmw, locks);
    bump(&slot.stats.versions_reclaimed, cut.versions.len() as u64);
    bump(&slot.stats.version_bytes_reclaimed, cut.bytes);
    bump(&slot.stats.versions_pruned_dead_zone, spliced);
    bump(
        &slot.stats.siro.pruned_first,
        std::mem::take(&mut cut.siro_in_slot),
    );
    // SAFETY: every version in the batch was unlinked under `guard` (as in
    // `epoch::collect`), so no thread pinned later can reach it.
    unsafe { cut.free_after_epoch(guard) };
    bump(&slot.stats.gc_ns, start.elapsed().as_nanos() as u64);
}

/// True if `tid`'s chain holds more than one version (something a later pass may cut).
pub(crate) fn has_older(t: &Table, tid: TupleId) -> bool {
    t.entry(tid).is_some_and(older_in)
}

/// `has_older` of the chain at entry `e` (the caller is pinned).
fn older_in(e: &AtomicPtr<Version>) -> bool {
    // SAFETY: the caller is pinned.
    unsafe {
        e.load(Ordering::Acquire)
            .as_ref()
            .is_some_and(|v| !v.next.load(Ordering::Acquire).is_null())
    }
}

/// True if the chain at entry `e` is one version that is not a delete (a lone tombstone is
/// cut with its chain, `epoch::prune`), or none. The caller is pinned.
fn nothing_to_cut(e: &AtomicPtr<Version>) -> bool {
    // SAFETY: the caller is pinned.
    unsafe {
        e.load(Ordering::Acquire)
            .as_ref()
            .is_none_or(|v| v.next.load(Ordering::Acquire).is_null() && !v.is_tombstone())
    }
}

/// Whether a transaction that committed after `end_ts` wrote the newest version of the
/// chain at `e`: its commit queued the tuple (`Transaction::install` stamps the version,
/// then queues it), so a worker's collect will visit the chain again without this entry.
/// Newest-first chains only (their entry is the newest version); an oldest-first chain
/// answers false. The caller is pinned.
fn requeued_by_later_commit(t: &Table, e: &AtomicPtr<Version>, end_ts: u64) -> bool {
    if t.store.order() != Order::NewestFirst {
        return false;
    }
    // SAFETY: the caller is pinned.
    unsafe {
        e.load(Ordering::Acquire).as_ref().is_some_and(|h| {
            let b = h.begin.load(Ordering::Acquire);
            !is_txn(b) && b > end_ts
        })
    }
}

/// Whether `tid`'s chain keeps a version other than its newest that ended at or after
/// `since`, or whose End is still a transaction's (the caller is pinned).
fn keeps_recent(t: &Table, tid: TupleId, since: u64) -> bool {
    let Some(e) = t.entry(tid) else { return false };
    let oldest_first = t.store.order() == Order::OldestFirst;
    // SAFETY: the caller is pinned.
    unsafe {
        let mut v = e.load(Ordering::Acquire);
        if !oldest_first {
            v = v
                .as_ref()
                .map_or(ptr::null_mut(), |h| h.next.load(Ordering::Acquire));
        }
        while let Some(x) = v.as_ref() {
            let n = x.next.load(Ordering::Acquire);
            if oldest_first && n.is_null() {
                break;
            }
            let end = x.end.load(Ordering::Acquire);
            if is_txn(end) || end >= since {
                return true;
            }
            v = n;
        }
    }
    false
}

/// Prunes `tid`'s chain: the tail below the watermark as `epoch::prune` does (counted by
/// the caller as the difference), then the dead versions in the middle. Returns how many
/// versions were spliced out of the middle. The caller is pinned and holds the chain's
/// stripe of `PruneLocks` (module docs).
pub(crate) fn prune(t: &Table, tid: TupleId, zones: &Zones, cut: &mut Cut) -> u64 {
    t.entry(tid).map_or(0, |e| prune_at(t, e, zones, cut).0)
}

/// `prune` of the chain at entry `e` of `t`; also whether the chain keeps a version besides
/// its newest (as `has_older`).
#[inline]
fn prune_at(t: &Table, e: &AtomicPtr<Version>, zones: &Zones, cut: &mut Cut) -> (u64, bool) {
    // Newest first: what stays is the head, the versions between it and X (the version
    // the oldest read point sees), and X, the last. X is never dead (it is visible at the
    // watermark, or ends after the clock), nor is the head; so with fewer than two versions
    // before X there is nothing to splice, and an older version stays iff one lies before X.
    if let Some(above) = prune_tail(t, e, zones.watermark(), cut) {
        if above < 2 {
            return (0, above == 1);
        }
    }
    let before = cut.versions.len();
    // SAFETY: pinned by the caller; the only pruner of this chain.
    unsafe { splice_dead(t, e, t.store.order(), zones, cut) };
    ((cut.versions.len() - before) as u64, older_in(e))
}

/// Splices the dead versions after the chain's first one out of it. Newest-first chains
/// keep their head (the newest); oldest-first chains keep their first version (moving the
/// entry is the watermark cut's job) and their last (the newest, whose `next` writers set).
///
/// # Safety
/// The caller is pinned and is the only pruner of this chain.
// Out of line: most prunes never get here, and inlined it made every call to `prune_at`
// save and restore its registers.
#[inline(never)]
unsafe fn splice_dead(
    t: &Table,
    e: &AtomicPtr<Version>,
    order: Order,
    zones: &Zones,
    cut: &mut Cut,
) {
    let mut prev = e.load(Ordering::Acquire);
    let Some(first) = prev.as_ref() else { return };
    let mut v = first.next.load(Ordering::Acquire);
    while let Some(x) = v.as_ref() {
        let n = x.next.load(Ordering::Acquire);
        if order == Order::OldestFirst && n.is_null() {
            break;
        }
        let b = x.begin.load(Ordering::Acquire);
        let end = x.end.load(Ordering::Acquire);
        if !is_txn(b) && !is_txn(end) && zones.is_dead(b, end) {
            // `x.next` stays: a reader standing on `x` goes on to `n`.
            (*prev).next.store(n, Ordering::Release);
            cut.take(t, v);
        } else {
            prev = v;
        }
        v = n;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::timestamp::Timestamp;

    /// Theorem 3.5 with Myriad's boundary (`Begin ≤ s < End`): read points 10 and 20,
    /// clock 30. A version is dead iff its interval holds no read point and it ended by 30.
    #[test]
    fn a_version_is_dead_iff_no_read_point_lies_in_its_interval() {
        let z = Zones::from_points(vec![20, 10], 30);
        let cases = [
            // (begin, end, dead)
            (1, 5, true),    // inside the first zone (−∞, 10]
            (1, 10, true),   // ends at 10: not visible at 10
            (1, 11, false),  // visible at 10
            (10, 12, false), // begins at 10: visible at 10 (one too eager would call it dead)
            (11, 20, true),  // strictly between the points
            (12, 19, true),
            (11, 21, false), // visible at 20
            (20, 25, false), // visible at 20
            (21, 30, true),  // the last zone, up to the clock
            (21, 31, false), // ends after the clock: a later transaction may read it
            (25, u64::MAX >> 1, false),
        ];
        for (b, e, dead) in cases {
            assert_eq!(z.is_dead(b, e), dead, "version [{b}, {e})");
        }
        assert_eq!(z.watermark(), 10);
        // No live transaction: everything that ended by the clock is dead (the corollary).
        let empty = Zones::from_points(Vec::new(), 30);
        assert!(empty.is_dead(1, 30) && empty.is_dead(29, 30) && !empty.is_dead(29, 31));
        assert_eq!(empty.watermark(), 30);
    }

    /// A stripe has one holder at a time, is free again once its guard drops, and
    /// neighbouring tuples of a table fall on different stripes (so a worker pruning one
    /// does not turn a vacuum thread away from the next).
    #[test]
    fn a_stripe_has_one_pruner() {
        let locks = PruneLocks::default();
        let a = TupleId::new(7);
        let held = locks.try_lock(3, a).expect("free");
        assert!(locks.try_lock(3, a).is_none(), "two pruners on one chain");
        drop(held);
        assert!(locks.try_lock(3, a).is_some());
        let stripes: std::collections::HashSet<usize> = (0..64u64)
            .map(|t| locks.stripe(3, TupleId::new(t)) as *const AtomicBool as usize)
            .collect();
        assert_eq!(stripes.len(), 64);
        // `lock` waits for the holder.
        let held = locks.try_lock(3, a).expect("free");
        std::thread::scope(|s| {
            let w = s.spawn(|| drop(locks.lock(3, a)));
            std::thread::sleep(std::time::Duration::from_millis(20));
            assert!(!w.is_finished(), "took a held stripe");
            drop(held);
            w.join().unwrap();
        });
    }

    /// A provisional registration lowers the clock bound: everything from it on is alive.
    #[test]
    fn a_provisional_registration_protects_everything_after_it() {
        let clock = Source::default();
        clock.advance_to(Timestamp::new(100));
        let txns = TxnTable::new(4);
        txns.slot(0).begin_ts.store(40 | PROV_BIT, Ordering::SeqCst);
        txns.slot(1).begin_ts.store(20, Ordering::SeqCst);
        let mut z = Zones::default();
        build(&mut z, &clock, &txns);
        assert_eq!(z.points(), vec![20]);
        assert_eq!(z.ct(), 40);
        assert!(z.is_dead(30, 40));
        assert!(
            !z.is_dead(30, 41),
            "visible at 40, where the provisional one may read"
        );
        assert!(!z.is_dead(60, 70), "after the provisional registration");
        // Preparing at 70: validation reads there.
        txns.slot(0).begin_ts.store(50, Ordering::SeqCst);
        txns.slot(0).set_preparing(Timestamp::new(70));
        build(&mut z, &clock, &txns);
        assert_eq!(z.points(), vec![20, 50, 70]);
        assert!(z.is_dead(60, 70) && !z.is_dead(60, 71) && !z.is_dead(70, 80));
        txns.slot(0).set_preparing_pending();
        build(&mut z, &clock, &txns);
        assert_eq!(
            z.ct(),
            50,
            "a pending end timestamp may be anywhere above the read time"
        );
    }

    /// A list built before a transaction registered is still safe for it: its read time is
    /// at least the list's clock bound, and every version the list calls dead ended by then.
    #[test]
    fn a_stale_list_is_safe() {
        let clock = Source::default();
        clock.advance_to(Timestamp::new(50));
        let txns = TxnTable::new(2);
        txns.slot(0).begin_ts.store(10, Ordering::SeqCst);
        let mut z = Zones::default();
        build(&mut z, &clock, &txns);
        // Later: the clock moves on, a new transaction registers at the clock, the old one
        // ends. The stale list must call nothing dead that the new one can see.
        clock.advance_to(Timestamp::new(80));
        let rt = clock.now().get();
        assert!(rt >= z.ct());
        for b in 0..100 {
            for e in b + 1..101 {
                let visible_to_new = b <= rt && rt < e;
                assert!(
                    !(z.is_dead(b, e) && visible_to_new),
                    "[{b}, {e}) is visible at {rt} but the stale list calls it dead"
                );
            }
        }
    }
}
