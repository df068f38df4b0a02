//! `2pl`: thesis §3.5's single-version two-phase locking, no-wait. It runs on Silo's storage
//! and commit pipeline (`silo.rs`): a read takes a read lock (`Version::aux`, MV2PL's
//! `mv2pl::read_lock`) and a write the write lock (End) when it is made
//! (`cc::locks_on_write`), both no-wait (`lock_conflict`) and held to the end, so at commit
//! `lock_for_commit` finds its locks already held and `validate` checks no read (the locks
//! protect them, `cc::validates_reads`); the predicate re-check stays (row locks do not cover
//! phantoms), and the read locks are released after the install (`cc::release`).

use crate::cc::mv2pl::{read_lock, SlotLocks};
use crate::error::AbortReason;
use crate::txn::state::TxnCtx;
use crate::version::Version;

/// A read of `v`: read-locks it. The version also goes to the read set, which 2PL does not
/// validate: it tells the phantom re-check which rows each scan read, and the TID what was
/// read (`silo.rs`).
pub(crate) fn on_read(
    tx: &mut TxnCtx<'_>,
    locks: &mut SlotLocks,
    v: *const Version,
) -> Result<(), AbortReason> {
    tx.sets.read_set.push(v);
    read_lock(tx, locks, v)
}
