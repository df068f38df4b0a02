//! Dead-zone pruning (vDriver, Kim et al., *Long-lived Transactions Made Less Harmful*, §3.1
//! Theorem 3.5), run by the `vacuum` threads (`vacuum.rs`) under GC `dead-zone`.
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
//!   neighbours would lose one splice (and free a version still linked). Only the vacuum
//!   threads prune under `dead-zone`: each owns the blocks whose number is its index modulo
//!   the thread count, `Vacuum::pass_now` runs alone (it takes the passes' lock
//!   exclusively), and commits hand the tuples they wrote to the thread owning each one's
//!   block instead of queueing garbage, so no worker prunes (`txn/end.rs`,
//!   `vacuum::Vacuum::hand_over`). Writers touch only the entry, the newest version's fields and
//!   (o2n) the newest version's `next`: never a spliced version or its `prev`'s `next`.
//! - A spliced version keeps its `next`, so a reader standing on it continues down the chain;
//!   its memory is freed after the memory epoch (`Cut::free_after_epoch`): a reader that can
//!   still reach it was pinned before the splice, and so keeps every version spliced later
//!   alive as well.
//!
//! Key operations. `build` scans the transaction table once per pass (at most
//! `max_concurrent_txns` loads and a sort); `Zones::is_dead` is one binary search;
//! `prune` cuts the tail below the watermark as `epoch::prune` does, then splices the dead
//! versions out of the rest of the chain.

use super::epoch::{prune as prune_tail, Cut};
use crate::storage::{Table, TupleId};
use crate::timestamp::Source;
use crate::txn::table::{TxnTable, Validating, PROV_BIT};
use crate::version::{is_txn, Order, Version};
use std::sync::atomic::{AtomicPtr, Ordering};

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

/// Prunes `tid`'s chain: the tail below the watermark as `epoch::prune` does (counted by
/// the caller as the difference), then the dead versions in the middle. Returns how many
/// versions were spliced out of the middle. The caller is pinned and is the chain's only
/// pruner (module docs).
pub(crate) fn prune(t: &Table, tid: TupleId, zones: &Zones, cut: &mut Cut) -> u64 {
    prune_tail(t, tid, zones.watermark(), cut);
    let Some(e) = t.entry(tid) else { return 0 };
    let before = cut.versions.len();
    // SAFETY: pinned by the caller; the only pruner of this chain.
    unsafe { splice_dead(t, e, t.store.order(), zones, cut) };
    (cut.versions.len() - before) as u64
}

/// Splices the dead versions after the chain's first one out of it. Newest-first chains
/// keep their head (the newest); oldest-first chains keep their first version (moving the
/// entry is the watermark cut's job) and their last (the newest, whose `next` writers set).
///
/// # Safety
/// The caller is pinned and is the only pruner of this chain.
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
