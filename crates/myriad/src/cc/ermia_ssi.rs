//! ERMIA's SSI (`ermia-ssi`, ERMIA §3.6; Wang et al., "Efficiently making (almost) any
//! concurrency control mechanism serializable", VLDBJ 2017) on SSN's machinery (`ssn.rs`):
//! the same reader bits, read set and waits, with other stamps — a version's PSTAMP word is
//! its rstamp (the latest commit stamp of a reader), its SSTAMP word the s1 of the
//! transaction that overwrote it (0 when unset). Only the pre-commit test is its own.

use crate::cc::ssn::{for_overwritten_and_entered, successor, SlotScratch, Stamps, Touched};
use crate::cc::ssn::{PSTAMP, SSTAMP};
use crate::error::AbortReason;
use crate::txn::state::TxnCtx;
use std::sync::atomic::Ordering;

/// The pre-commit test of a transaction with commit stamp `c` (called after a fence,
/// `cc::stamp_test`): s1 is the smallest commit stamp of an overwriter of what it read that
/// committed before it, rstamp the largest commit stamp of a reader of what it overwrote or
/// of an index it entered. A dangerous structure T1 → T2 → T3 with T3 committed first aborts
/// the committing transaction: as T1 (a version it read was overwritten by a T2 whose own s1
/// is set), or as T2 (a reader committed after its T3: s1 ≤ rstamp).
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
    for_overwritten_and_entered(tx, scratch, c, |_, touched| {
        rstamp = rstamp.max(match touched {
            Touched::Overwritten(o) => o.ext_word(PSTAMP).load(Ordering::SeqCst),
            Touched::Entered(stamp) => stamp,
        })
    });
    // A reader committed after our T3 (s1 set).
    if s1 <= rstamp {
        return Err(AbortReason::Exclusion);
    }
    // What `ssn::finalize` leaves in the versions we overwrote: s1 as their s2, 0 if unset.
    stamps.sstamp = if s1 == u64::MAX { 0 } else { s1 };
    stamps.pstamp = rstamp;
    Ok(())
}
