//! OCC: `occ` (thesis §3.5's conventional OCC: Kung and Robinson with Silo's TIDs, the thesis's
//! Algorithm 1) differs from Silo (`silo.rs`) in step 1 of the commit only: it locks the
//! records it read together with those it writes, all in ascending address order (the thesis's global order), so that no
//! committer can replace a record between its validation and our install; a record read
//! and found superseded fails while locking, which is its timestamp check. The locks on
//! records only read are released after the install. Its reads, buffered writes, predicate
//! re-check and TIDs are Silo's. (Silo's gain over it is exactly these read locks: no
//! anti-dependency is tracked by locking.)

use crate::error::AbortReason;
use crate::txn::state::TxnCtx;
use crate::version::{Version, INFINITY};
use std::sync::atomic::Ordering;

/// OCC's per-slot scratch, reused by the slot's transactions.
#[derive(Default)]
pub(crate) struct SlotState {
    /// The lock order of the read and write sets (address, written).
    pub(crate) order: Vec<(usize, bool)>,
    /// Records only read whose lock the commit holds.
    pub(crate) locks: Vec<*const Version>,
}

/// OCC's step 1 (thesis §3.5, Algorithm 1): lock every record of the read and write sets in
/// one global order — ascending address, as in the thesis — waiting for a lock another
/// committer holds. A record read and found superseded (or deleted) fails: that is the
/// timestamp comparison of the validation, made while locking. Records only read are
/// remembered in `SlotState::locks` and released after the install.
pub(crate) fn lock_read_write_set(
    tx: &TxnCtx<'_>,
    state: &mut SlotState,
) -> std::result::Result<(), AbortReason> {
    let me = tx.id.word();
    let mut order = std::mem::take(&mut state.order);
    order.clear();
    // (address, written): a record both read and written is locked once, as a write.
    order.extend(
        tx.sets
            .write_set
            .iter()
            .filter(|w| !w.old.is_null())
            .map(|w| (w.old as usize, true)),
    );
    order.extend(tx.sets.read_set.iter().map(|&v| (v as usize, false)));
    order.sort_unstable_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)));
    order.dedup_by_key(|e| e.0);
    let mut out = Ok(());
    for &(v, written) in &order {
        // SAFETY: versions we read, pinned since.
        let r = unsafe { &*(v as *const Version) };
        if let Err(reason) = crate::cc::silo::lock(tx, r, me, written) {
            out = Err(reason);
            break;
        }
        if !written {
            state.locks.push(v as *const Version);
        }
    }
    state.order = order;
    out
}

/// Releases OCC's locks on the records it only read.
pub(crate) fn release_read_set_locks(state: &mut SlotState, me: u64) {
    for &v in &state.locks {
        // SAFETY: we hold its lock, so it is current and not reclaimed.
        let _ =
            unsafe { &*v }
                .end
                .compare_exchange(me, INFINITY, Ordering::Release, Ordering::Relaxed);
    }
    state.locks.clear();
}
