//! ERMIA's SSI (`ermia-ssi`, ERMIA §3.6; Wang et al., "Efficiently making (almost) any
//! concurrency control mechanism serializable", VLDBJ 2017) on SSN's machinery (`ssn.rs`):
//! the same reader bits, read set and waits, with other stamps — a version's PSTAMP word is
//! its rstamp (the latest commit stamp of a reader), its SSTAMP word the s1 of the
//! transaction that overwrote it (0 when unset), and a third word, BSTAMP, the largest begin
//! timestamp of a READ ONLY transaction that read it untracked. Its own are the pre-commit
//! test and ERMIA's two optimisations:
//!
//! - **Safe retry** (`Config::ermia_safe_retry`, default on). A transaction with s1 set (a
//!   version it read was overwritten by T3, committed before it) that overwrote a version an
//!   in-flight transaction read would be the pivot T2 of T1 → T2 → T3 once that reader
//!   commits; ERMIA aborts T2 at pre-commit instead of letting the reader fail later. The
//!   retry reads T3's writes, so it does not form the same structure again. (ERMIA also
//!   checks when a read finds s1 set; we check at pre-commit only, where the decision is
//!   final.) "Read" is the version's reader bit *and* the slot's read filter
//!   (`Slot::reads`): the bit outlives the transaction that set it (ERMIA clears it at
//!   commit, a second shared read-modify-write per read), and without the filter any busy
//!   slot with a stale bit made the pivot abort (TPC-C 1 warehouse, 2 threads: 0.10 safe
//!   retries per commit, 0.003 with the filter).
//! - **Old-version reads** (`Config::ermia_old_read_age`, default off). A READ ONLY
//!   transaction R does not put versions committed at least `age` timestamps before its begin
//!   in its read set (ERMIA: "old" versions, most of what a long reader reads). It raises the
//!   version's BSTAMP to its begin timestamp and, at once, looks for the T1 case it can no
//!   longer check at pre-commit: the version overwritten by a committed transaction whose s1
//!   (the version's s2) is set and ≤ R's begin. The writer W of such a version takes over the
//!   rest: with s1 set it aborts if BSTAMP ≥ s1. ERMIA aborts W if an *in-flight* reader
//!   began before the bstamp; that misses readers that already committed, so our test is
//!   this one, which is exact for read-only readers: in a cycle T1 → T2 → T3 → … → T1 whose
//!   T3 commits first (Fekete et al.), a read-only T1 has only wr edges in, from a writer X
//!   committed before T1 began and after T3, so T1.begin ≥ X's stamp ≥ T3's stamp = s1.
//!   A reader that began before s1 can close no cycle through W; one that began at or after
//!   it may. Races: R stores BSTAMP, fences, then reads the End field; W is Preparing
//!   (stamp drawn, fenced) before it loads BSTAMP — of the two, one sees the other: R meets
//!   W in pre-commit and waits for its outcome (then reads s2), or W sees R's BSTAMP.
//!   Only READ ONLY transactions: an updater that skipped reads could be a pivot without
//!   knowing its s1.

use crate::cc::ssn::{for_overwritten_and_entered, has_inflight_reader, successor};
use crate::cc::ssn::{SlotScratch, Stamps, Touched, PSTAMP, SSTAMP};
use crate::error::AbortReason;
use crate::timestamp::Timestamp;
use crate::txn::state::TxnCtx;
use crate::txn::table::{bump, TxnId, TxnState};
use crate::version::{is_txn, Version, INFINITY};
use crossbeam_utils::Backoff;
use std::sync::atomic::{fence, Ordering};

/// `Version::ext_word` index of the bstamp: the largest begin timestamp of a READ ONLY
/// transaction that read the version untracked (0: none did).
pub(crate) const BSTAMP: usize = 2;

/// Whether `v` is old for a READ ONLY reader that began at `begin_ts`: committed at least
/// `age` timestamps before.
#[inline]
pub(crate) fn is_old(v: &Version, begin_ts: Timestamp, age: u64) -> bool {
    let b = v.begin.load(Ordering::Acquire);
    !is_txn(b) && b.saturating_add(age) <= begin_ts.get()
}

/// A READ ONLY transaction reads old version `v` untracked (see the module docs): leaves
/// its begin timestamp in the bstamp, then fails (as T1) if `v` was overwritten by a
/// committed transaction whose s1 is set and at most its begin timestamp.
pub(crate) fn on_old_read(tx: &TxnCtx<'_>, v: &Version) -> Result<(), AbortReason> {
    let me = tx.begin_ts.get();
    let stats = &tx.slot().stats;
    bump(&stats.ssi_untracked_reads, 1);
    let bstamp = v.ext_word(BSTAMP);
    if bstamp.load(Ordering::Acquire) < me {
        bump(&stats.record_rmw, 1);
        bstamp.fetch_max(me, Ordering::SeqCst);
    }
    // Pairs with the fence after a writer's stamp draw (`cc::stamp_test`).
    fence(Ordering::SeqCst);
    let backoff = Backoff::new();
    let s2 = loop {
        let e = v.end.load(Ordering::Acquire);
        if e == INFINITY {
            return Ok(());
        }
        if !is_txn(e) {
            break v.ext_word(SSTAMP).load(Ordering::Acquire);
        }
        match tx.db.txns.state_of(TxnId::from_word(e)) {
            // Not yet in pre-commit: it will see our bstamp.
            TxnState::Aborted | TxnState::Active => return Ok(()),
            // It stored the s2 before turning Committed.
            TxnState::Committed(_) => break v.ext_word(SSTAMP).load(Ordering::Acquire),
            TxnState::PreparingPending | TxnState::Preparing(_) => backoff.snooze(),
            TxnState::Terminated => backoff.spin(),
        }
    };
    if s2 != 0 && s2 <= me {
        bump(&stats.ssi_old_read_aborts, 1);
        return Err(AbortReason::Exclusion);
    }
    Ok(())
}

/// Why a writer with s1 set must abort at pre-commit, beyond the rstamp test.
#[derive(Clone, Copy)]
enum Pivot {
    /// Safe retry: it overwrote a version an in-flight transaction read.
    SafeRetry,
    /// It overwrote an old version a READ ONLY transaction that began at or after s1 read.
    OldRead,
}

/// The pre-commit test of a transaction with commit stamp `c` (called after a fence,
/// `cc::stamp_test`): s1 is the smallest commit stamp of an overwriter of what it read that
/// committed before it, rstamp the largest commit stamp of a reader of what it overwrote or
/// of an index it entered. A dangerous structure T1 → T2 → T3 with T3 committed first aborts
/// the committing transaction: as T1 (a version it read was overwritten by a T2 whose own s1
/// is set), or as T2 (a reader committed after its T3: s1 ≤ rstamp; or, with s1 set, an
/// in-flight reader under safe retry, an untracked old reader that began at or after s1).
pub(crate) fn precommit(
    tx: &TxnCtx<'_>,
    stamps: &mut Stamps,
    scratch: &mut SlotScratch,
    c: u64,
) -> Result<(), AbortReason> {
    let (mut s1, mut rstamp) = (u64::MAX, 0);
    for &v in &tx.sets.read_set {
        // SAFETY: versions we read stay allocated while we are registered (GC watermark).
        let v = unsafe { &*v };
        let Some(e) = successor(tx, v, c) else {
            continue;
        };
        if v.ext_word(SSTAMP).load(Ordering::Acquire) != 0 {
            // We → the overwriter → a T3 that committed before it: we are T1.
            return Err(AbortReason::Exclusion);
        }
        s1 = s1.min(e);
    }
    let safe_retry = tx.db.config.get_ermia_safe_retry();
    let mut pivot = None;
    for_overwritten_and_entered(tx, scratch, c, |tx, touched| {
        rstamp = rstamp.max(match touched {
            Touched::Overwritten(o) => {
                if s1 != u64::MAX && pivot.is_none() {
                    if o.ext_word(BSTAMP).load(Ordering::SeqCst) >= s1 {
                        pivot = Some(Pivot::OldRead);
                    } else if safe_retry && has_inflight_reader(&tx.db.txns, tx.slot_idx, o, c) {
                        pivot = Some(Pivot::SafeRetry);
                    }
                }
                o.ext_word(PSTAMP).load(Ordering::SeqCst)
            }
            Touched::Entered(stamp) => stamp,
        })
    });
    // A reader committed after our T3 (s1 set).
    if s1 <= rstamp {
        return Err(AbortReason::Exclusion);
    }
    if let Some(p) = pivot {
        let stats = &tx.slot().stats;
        bump(
            match p {
                Pivot::SafeRetry => &stats.ssi_safe_retries,
                Pivot::OldRead => &stats.ssi_old_read_aborts,
            },
            1,
        );
        return Err(AbortReason::Exclusion);
    }
    // What `ssn::finalize` leaves in the versions we overwrote: s1 as their s2, 0 if unset.
    stamps.sstamp = if s1 == u64::MAX { 0 } else { s1 };
    stamps.pstamp = rstamp;
    Ok(())
}
