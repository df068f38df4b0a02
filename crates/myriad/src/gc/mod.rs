//! Garbage collection (thesis §5.5). The seam is `GcPolicy` in `Config`; built are
//! transaction-level, epoch-based GC (`epoch.rs`, thesis §5.5.2), tuple-level background
//! vacuuming (`vacuum.rs`, thesis §5.5.1), cooperative cleaning on oldest-to-newest chains
//! (`coop.rs`, §5.5.1), vDriver's dead-zone pruning (`dead_zone.rs`, run by the workers and
//! the vacuum threads: besides the tail below the watermark, versions no live snapshot can
//! see are spliced out of the middle of `n2o`, `o2n` and `siro` chains), or `none`.

pub(crate) mod coop;
pub(crate) mod dead_zone;
pub mod epoch;
pub(crate) mod vacuum;

pub(crate) use epoch::{collect, watermark, Garbage};

/// A worker slot's GC pass over its queue (`gc_interval_txns` commits, or
/// `Database::collect_garbage` for an idle slot): dead-zone pruning under `dead-zone`
/// (`handover` holds the tuples for the vacuum threads, `zones` is a buffer), the
/// watermark's otherwise.
pub(crate) fn collect_slot(
    db: &impl GcHost,
    slot: &crate::txn::table::Slot,
    queue: &mut std::collections::VecDeque<Garbage>,
    zones: &mut crate::version::zones::Zones,
    handover: &mut Vec<(u32, crate::storage::TupleId, bool)>,
    guard: &crossbeam_epoch::Guard,
) {
    if db.gc_policy() == GcPolicy::DeadZone {
        dead_zone::collect(db, slot, queue, zones, handover, guard);
    } else {
        collect(db, slot, queue, guard);
    }
}

use crate::config::GcPolicy;
use crate::storage::Table;
use crate::timestamp::Source;
use crate::txn::table::TxnTable;

/// What garbage collection needs of the database it cleans. `Shared` (`shared.rs`) implements
/// it: GC sits below the shared state and does not import it (the functions taking one are generic, so the calls
/// compile to direct field reads).
pub(crate) trait GcHost {
    /// The configured policy.
    fn gc_policy(&self) -> GcPolicy;
    /// The timestamp clock (the watermark starts from its current value).
    fn clock(&self) -> &Source;
    /// The transaction table (the watermark is the oldest active begin timestamp).
    fn txns(&self) -> &TxnTable;
    /// The table with this id (one a queued garbage entry names; it exists).
    fn table_by_id(&self, id: u32) -> &Table;
    /// The running vacuum threads, if the policy is `vacuum` or cooperative cleaning.
    fn vacuum(&self) -> Option<&vacuum::Vacuum>;
}
