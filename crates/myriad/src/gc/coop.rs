//! Cooperative cleaning (thesis §5.5.1, COOP), on oldest-to-newest chains only.
//!
//! A reader walks an O2N chain from its oldest version to the one it sees. If the oldest
//! version ended at or before the cached watermark (`vacuum::Shared::watermark`, refreshed
//! by every worker every `gc_interval_txns` commits and by the background pass), the reader
//! cuts the chain's expired prefix itself (`epoch::prune_o2n`: one CAS on the entry claims it)
//! and defers the free of what it cut to its own epoch guard. Commits queue and mark
//! nothing. Chains no reader walks ("dusty corners", Hekaton's term) are pruned by the full
//! passes of `gc_threads` background threads every 20 ms (`vacuum.rs`).
//!
//! Safety: a watermark computed earlier is at most the current one (read times only grow),
//! so pruning against the cached value cuts nothing a reader can still see.

use super::epoch::{prune_o2n, watermark_of, Cut};
use super::GcHost;
use crate::storage::Table;
use crate::txn::table::{bump, Slot};
use crate::version::{is_txn, Version};
use crossbeam_epoch::Guard;
use std::sync::atomic::{AtomicPtr, Ordering};

/// After a read walked from `head` (the chain's oldest version) past it: cuts the expired
/// prefix if the oldest version is expired.
#[inline]
pub(crate) fn cooperate(
    db: &impl GcHost,
    slot: &Slot,
    t: &Table,
    e: &AtomicPtr<Version>,
    head: *const Version,
    guard: &Guard,
) {
    let Some(v) = db.vacuum() else { return };
    let w = v.shared.watermark.load(Ordering::Acquire);
    // SAFETY: the caller is pinned and read `head` from `e`.
    let end = unsafe { (*head).end.load(Ordering::Acquire) };
    if is_txn(end) || end > w {
        return;
    }
    let mut cut = Cut::default();
    prune_o2n(t, e, w, &mut cut);
    if cut.versions.is_empty() {
        return;
    }
    bump(&slot.stats.versions_reclaimed, cut.versions.len() as u64);
    bump(
        &slot.stats.versions_cut_by_readers,
        cut.versions.len() as u64,
    );
    bump(&slot.stats.version_bytes_reclaimed, cut.bytes);
    // SAFETY: the versions were unlinked by our CAS while we are pinned: no thread pinned
    // later can reach them, and only we claimed them.
    unsafe { cut.free_after_epoch(guard) };
}

/// Refreshes the cached watermark (a worker, every `gc_interval_txns` commits).
pub(crate) fn refresh_watermark(db: &impl GcHost) {
    if let Some(v) = db.vacuum() {
        let w = watermark_of(db.clock(), db.txns());
        v.shared.watermark.fetch_max(w, Ordering::AcqRel);
    }
}
