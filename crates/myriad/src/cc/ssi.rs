//! Cahill's SSI (`ssi`; thesis §5.3.4; Cahill, Röhm and Fekete, SIGMOD 2008) on SSN's
//! machinery with two flags per transaction instead of stamps: outConflict (a concurrent
//! transaction overwrote what it read) and inConflict (a concurrent transaction read what it
//! overwrote); a transaction with both aborts, whatever the commit order of the other two
//! (`precommit`). The pstamp word is the rstamp as for ERMIA-SSI; the sstamp word holds
//! the overwriter's outConflict flag. It aborts more than ERMIA-SSI: the thesis's "high abort
//! rate due to false positives".
//!
//! Reads, writes, the read set and `finalize` are SSN's (`ssn.rs`); only the pre-commit test
//! differs.

use crate::cc::ssn::{
    for_overwritten_and_entered, overwriter, Overwriter, SlotScratch, Stamps, Touched, PSTAMP,
    SSTAMP,
};
use crate::error::AbortReason;
use crate::txn::state::TxnCtx;
use std::sync::atomic::Ordering;

/// Cahill's SSI (`ssi`): the pre-commit test of a transaction with commit stamp `c`.
///
/// - outConflict: a version we read was overwritten by a concurrent transaction — one that
///   committed before us, or one still running or committing after us (Cahill sets the flag
///   as soon as the edge exists, whoever commits first).
/// - inConflict: a version we overwrote (or an index we entered) was read by a transaction
///   that committed after our begin (its rstamp, the PSTAMP word, is above our begin
///   timestamp).
/// - Abort if both. Also abort if we read a version whose overwriter committed before us
///   with outConflict set (its SSTAMP word is 1): that committed transaction would become a
///   pivot through us (Cahill's rule for a committed T2).
///
/// Readers still running when we commit are not counted in inConflict: each one, at its own
/// commit, finds our overwrite committed before it, and aborts if we committed with
/// outConflict. With Fekete's theorem (every cycle of an SI history has a dangerous structure
/// T1 → T2 → T3 whose T3 commits first) this aborts a transaction of every cycle.
pub(crate) fn precommit(
    tx: &TxnCtx<'_>,
    stamps: &mut Stamps,
    scratch: &mut SlotScratch,
    c: u64,
) -> Result<(), AbortReason> {
    let mut out = false;
    for &v in &tx.sets.read_set {
        // SAFETY: versions we read stay allocated while we are registered (GC watermark).
        let v = unsafe { &*v };
        match overwriter(tx, v, c) {
            Overwriter::None => {}
            Overwriter::Later => out = true,
            Overwriter::Before(_) => {
                if v.ext_word(SSTAMP).load(Ordering::Acquire) != 0 {
                    return Err(AbortReason::Exclusion);
                }
                out = true;
            }
        }
    }
    let begin = tx.begin_ts;
    let mut inc = false;
    for_overwritten_and_entered(tx, scratch, c, |_, touched| {
        let rstamp = match touched {
            Touched::Overwritten(o) => o.ext_word(PSTAMP).load(Ordering::SeqCst),
            Touched::Entered(stamp) => stamp,
        };
        inc |= rstamp > begin.get();
    });
    if inc && out {
        return Err(AbortReason::Exclusion);
    }
    // Left in the versions we overwrote by `finalize`.
    stamps.sstamp = u64::from(out);
    Ok(())
}
