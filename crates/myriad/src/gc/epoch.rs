//! Transaction-level, epoch-based garbage collection (thesis §5.5.2; ERMIA §3.3).
//!
//! Definitions. The *visibility watermark* `w` is the smallest read time any active or future
//! transaction can use: `min(clock, min registered begin_ts)`. A committed transaction hands
//! its tuples with superseded versions to its worker's garbage queue, tagged with its end
//! timestamp. The *memory epoch* (crossbeam-epoch) keeps a version's memory alive while some
//! thread may still be walking over it.
//!
//! Invariants.
//! - A version visible at some read time ≥ `w` is never unlinked. In a chain, the first
//!   committed version with begin ≤ `w` (call it X) is visible to the watermark snapshot;
//!   everything older than X is visible to no read time ≥ `w`, so the tail after X is cut.
//! - Ownership of a cut tail passes by swapping `next` pointers to null (`Version::take_next`):
//!   exactly one thread obtains each pointer, so each version is freed exactly once, even
//!   when two workers prune the same chain.
//! - Memory is freed only after the memory epoch has advanced past every thread pinned at the
//!   time of the cut.
//!
//! Key operations. `watermark` scans the registered read times (one load per slot).
//! `collect` pops queue entries whose end timestamp is ≤ `w` and prunes their chains.
//! A transaction registers its read time before drawing it (`Transaction::new`): if a
//! concurrent `watermark` misses the registration, the clock it read first is ≤ the read time.

use super::GcHost;
use crate::storage::{Table, TupleId};
use crate::txn::table::{bump, Slot, PROV_BIT};
use crate::version::{is_txn, Order, Version};
use crossbeam_epoch::Guard;
use std::collections::VecDeque;
use std::ptr;
use std::sync::atomic::Ordering;
use std::time::Instant;

/// A tuple that got a new version from a transaction that committed at `end_ts`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Garbage {
    pub end_ts: u64,
    pub table: u32,
    pub tid: TupleId,
    /// GC `dead-zone`: a worker's collect visited it once and its chain kept an older
    /// version (`dead_zone::collect`).
    pub retried: bool,
}

/// The visibility watermark (see module docs).
pub(crate) fn watermark(db: &impl GcHost) -> u64 {
    watermark_of(db.clock(), db.txns())
}

/// Whether timestamp word `ts` (a begin or end field) is a commit timestamp at or before `w`.
fn committed_by(ts: u64, w: u64) -> bool {
    !is_txn(ts) && ts <= w
}

/// `watermark` from the clock and the transaction table.
pub(crate) fn watermark_of(
    clock: &crate::timestamp::Source,
    txns: &crate::txn::table::TxnTable,
) -> u64 {
    // GC compares the watermark with the raw Begin/End words of versions.
    let mut w = clock.now().get();
    for s in txns.slots() {
        let b = s.begin_ts.load(Ordering::SeqCst);
        if b != u64::MAX {
            w = w.min(b & !PROV_BIT);
        }
    }
    w
}

/// Prunes the chains of queued tuples whose garbage is below the watermark.
pub(crate) fn collect(db: &impl GcHost, slot: &Slot, queue: &mut VecDeque<Garbage>, guard: &Guard) {
    if db.gc_policy() == crate::config::GcPolicy::None {
        queue.clear();
        return;
    }
    let Some(front) = queue.front() else { return };
    let w = watermark(db);
    if front.end_ts > w {
        return;
    }
    let start = Instant::now();
    let mut cut = Cut::default();
    while let Some(g) = queue.front().copied() {
        if g.end_ts > w {
            break;
        }
        queue.pop_front();
        let t = db.table_by_id(g.table);
        prune(t, g.tid, w, &mut cut);
    }
    bump(&slot.stats.versions_reclaimed, cut.versions.len() as u64);
    bump(&slot.stats.version_bytes_reclaimed, cut.bytes);
    // SAFETY: every version in the batch was unlinked (claimed by `take_next` or by the head
    // CAS) under `guard`, so no thread pinned later can reach it.
    unsafe { cut.free_after_epoch(guard) };
    bump(&slot.stats.gc_ns, start.elapsed().as_nanos() as u64);
}

/// Versions cut by one `collect` pass, freed together once no thread can still reach them.
#[derive(Default)]
pub(crate) struct Cut {
    /// Address and free token (`Version::token`: size and memory space) of each version.
    pub versions: Vec<(usize, u64)>,
    /// Bytes the cut versions free: their blocks, before-images and the non-inline blobs
    /// they held the last references to.
    pub bytes: u64,
    /// Version storage `siro`: cut versions that still held a record slot (their rows were
    /// never relocated: vDriver's 1st prune, done by the pruner).
    pub siro_in_slot: u64,
    /// Those blobs (the references are dropped at the cut, so that a blob two versions of
    /// one batch share is counted once, by whichever drops the last reference).
    blobs: Vec<usize>,
    /// Scratch for `Table::remove_entries` (index pointers `physical`).
    key: Vec<u8>,
    entry: Vec<u8>,
}

/// Cuts the versions of `tid` that no read time ≥ `w` can see, as the table's store orders
/// its chain (`version::Store::order`). On single-version storage only recovery's replay
/// queues garbage.
pub(crate) fn prune(t: &Table, tid: TupleId, w: u64, cut: &mut Cut) {
    if let Some(e) = t.entry(tid) {
        prune_entry(t, e, w, cut);
    }
}

/// `prune` of the chain at entry `e` of `t`. Returns what `prune_n2o` returns; `None` for
/// an oldest-first chain.
pub(crate) fn prune_entry(
    t: &Table,
    e: &std::sync::atomic::AtomicPtr<Version>,
    w: u64,
    cut: &mut Cut,
) -> Option<usize> {
    match t.store.order() {
        Order::OldestFirst => {
            prune_o2n(t, e, w, cut);
            None
        }
        Order::NewestFirst => prune_n2o(t, e, w, cut),
    }
}

/// `prune` for a newest-to-oldest chain: the versions after the newest committed version
/// with Begin ≤ `w` (call it X) are cut; so is the whole chain if X is its head and a delete,
/// where the store allows it (`Store::gc_cuts_deleted_chains`). Returns how many versions
/// lie before X, which is then the chain's last (0 once the chain is cut whole); `None` if
/// there is no X, or if it is a delete a writer put a version above while it was cut.
fn prune_n2o(
    t: &Table,
    e: &std::sync::atomic::AtomicPtr<Version>,
    w: u64,
    cut: &mut Cut,
) -> Option<usize> {
    let head = e.load(Ordering::Acquire);
    let mut v = head;
    let mut above = 0;
    // SAFETY (whole function): the caller is pinned (`collect`'s guard); versions reachable
    // from the head are not freed before the pin ends.
    unsafe {
        while let Some(x) = v.as_ref() {
            let b = x.begin.load(Ordering::Acquire);
            if !is_txn(b) && b <= w {
                break;
            }
            above += 1;
            v = x.next.load(Ordering::Acquire);
        }
        let x = v.as_ref()?;
        if x.is_tombstone() && v == head && t.store.gc_cuts_deleted_chains() {
            // The row is deleted as of a time every snapshot sees: the whole chain is garbage.
            if e.compare_exchange(head, ptr::null_mut(), Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
            {
                cut_chain(t, v, w, cut);
                return Some(0);
            }
            // A writer put a version above it meanwhile: X and its tail stay.
            return None;
        }
        // Most chains a pass visits hold nothing to cut: load before swapping, so a pass over
        // them (a vacuum thread's full pass) dirties no line a worker holds.
        if !x.next.load(Ordering::Acquire).is_null() {
            cut_chain(t, x.take_next(), w, cut);
        }
    }
    Some(above)
}

/// Adds a detached chain to `cut`, claiming each link with a swap. The size is read here,
/// while the header is in cache from the swap, so the free needs not touch it again.
/// Every version cut is visible to no read time ≥ `w`: it committed at or before `w` and is
/// not the newest version at `w` (checked in debug builds).
unsafe fn cut_chain(t: &Table, mut p: *mut Version, w: u64, cut: &mut Cut) {
    while !p.is_null() {
        debug_assert!(committed_by((*p).begin.load(Ordering::Acquire), w));
        let next = (*p).take_next();
        cut.take(t, p);
        p = next;
    }
}

impl Cut {
    /// Adds the unlinked version `p` of `t`. Under index pointers `physical` its index
    /// entries go now, before the batch's free is deferred: a thread that pins later can
    /// find it neither in the chain nor in an index.
    ///
    /// # Safety
    /// `p` is allocated, unlinked from its chain, and claimed by the caller alone.
    pub(crate) unsafe fn take(&mut self, t: &Table, p: *mut Version) {
        t.remove_entries(p, (*p).data(), &mut self.key, &mut self.entry);
        let blobs = (*p).drop_blob_refs(&mut self.blobs);
        self.versions
            .push((p as usize, (*p).token() | Version::BLOBS_DROPPED));
        self.bytes += ((*p).size() + (*p).image_size() + blobs) as u64;
        if t.siro.is_some() && crate::version::siro::drop_slot_row(&*p) {
            self.siro_in_slot += 1;
        }
    }

    /// Hands the batch (and its blobs) to the memory epoch, leaving the cut empty for reuse.
    ///
    /// # Safety
    /// Every version in the batch was unlinked under `guard` (no thread pinned later can
    /// reach it) and is in no other batch.
    pub(crate) unsafe fn free_after_epoch(&mut self, guard: &Guard) {
        if self.versions.is_empty() {
            return;
        }
        let versions = std::mem::take(&mut self.versions);
        let blobs = std::mem::take(&mut self.blobs);
        self.bytes = 0;
        // One deferred call for the whole pass rather than one per version: each deferred
        // function costs a slot in the thread's crossbeam bag and a call when the bag is run.
        guard.defer_unchecked(move || {
            for (addr, token) in versions {
                Version::free_token(addr as *mut Version, token);
            }
            for b in blobs {
                crate::version::non_inline::dealloc_blob(b);
            }
        });
        // Hand the batch to the global queue now rather than when the thread's bag of
        // deferred calls fills, up to 64 passes later: batching must not delay reclamation.
        guard.flush();
    }
}

/// `prune` for an oldest-to-newest chain: X (the newest committed version with Begin ≤ `w`)
/// becomes the chain's first version; the versions before it are cut. The entry's CAS from
/// the head we walked from to X claims them: a concurrent pass that walked from the same head
/// fails its CAS and cuts nothing, and writers only ever touch the newest version's `next`,
/// which is X or after it.
///
/// Unlike N2O, a chain whose newest version is a delete keeps that tombstone: freeing it
/// would race a writer reviving the row, which links its version from the tombstone's
/// `next` rather than from the entry (`Table::publish_cas`).
pub(crate) fn prune_o2n(
    t: &Table,
    e: &std::sync::atomic::AtomicPtr<Version>,
    w: u64,
    cut: &mut Cut,
) {
    let head = e.load(Ordering::Acquire);
    let mut x = ptr::null_mut();
    let mut v = head;
    // SAFETY (whole function): the caller is pinned (`collect`'s guard); versions reachable
    // from the entry are not freed before the pin ends.
    unsafe {
        while let Some(r) = v.as_ref() {
            let b = r.begin.load(Ordering::Acquire);
            if is_txn(b) || b > w {
                break;
            }
            x = v;
            v = r.next.load(Ordering::Acquire);
        }
        if x.is_null() || x == head {
            return;
        }
        if e.compare_exchange(head, x, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            return;
        }
        let mut p = head;
        while p != x {
            debug_assert!(committed_by((*p).begin.load(Ordering::Acquire), w));
            // Superseded at or before `w`: its successor committed by then.
            debug_assert!(committed_by((*p).end.load(Ordering::Acquire), w));
            let next = (*p).next.load(Ordering::Acquire);
            cut.take(t, p);
            p = next;
        }
    }
}
