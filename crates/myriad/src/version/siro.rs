//! vDriver's SIRO versioning (Kim et al., *Long-lived Transactions Made Less Harmful*,
//! §3.3–3.4; `../shared/specs/vdriver-pomvcc.md` A4–A7, C3.4): version storage `siro`.
//!
//! Definitions. Each tuple's master (`master.rs`) holds **two row slots**. Versions keep
//! their identity as data-less headers in a newest-to-oldest chain (what read sets, write
//! sets and End-field locks name), and a header's image word says where its row is: a slot
//! tag (`SLOT[k]`), a tagged pointer to a **segment entry**, `PRUNED` (dropped), or `NONE`
//! (not placed yet). The newest committed version and the one before it ("v^{r,0}" and
//! "v^{r,1}") normally own the two slots; the toggle bit of [V] is implicit: the newest
//! header names its slot.
//!
//! A writer (holding the lock on the newest version) writes its row into the slot the
//! version it supersedes does not own. The versions that own that slot are first moved out
//! (vSorter's relocation): each is tested against the published dead zones (`dead_zone.rs`,
//! Theorem 3.5) and dropped if dead (**1st prune**), else classified — **LLT** if a
//! transaction older than `llt_multiple` average transaction lengths reads it, else
//! **cold** if it lived more than `cold_multiple` average version lifetimes, else **hot** —
//! and copied into the writer's open segment of its class. A full segment is sealed by its
//! writer: if its `[v_min, v_max]` (smallest Begin, largest End of its entries) lies in one
//! dead zone it is freed at once (**2nd prune**, [V]'s pruning at hardening: nothing is
//! hardened in memory); else it waits on its class's sealed list, which the **cutter** (the
//! first dead-zone vacuum thread, `gc/vacuum.rs`) walks every millisecond, freeing the
//! segments that have become dead (vCutter's segment cleaning). Abort needs no undo: the
//! superseded version's slot was never touched ([V] "undo = toggle").
//!
//! Differences from [V], and why. Chains are of headers: a dead version's header stays in
//! its chain after its row is dropped, until the dead-zone pruner splices it out by the same
//! test, so cutting a segment needs no chain fix-up and no collaborative flag protocol
//! ([V] Fig. 9): the pruner is the only one that changes a non-head `next`. The segment pool
//! (vBuffer) is in memory and nothing is flushed. Each worker slot fills its own open
//! segment per class, where [V] shares one per class with a fetch-add: an append then
//! takes no shared read-modify-write (at two workers the shared offset and fill counts
//! cost 2 contended RMWs per update), at the price of one unfilled segment per class per
//! slot, which is never cut while it stays open.
//!
//! Invariants.
//! - Only the writer holding the newest version's lock writes a slot, and it re-tags every
//!   version that owns the slot it takes (Release) before it changes a byte of it; readers
//!   copy a slot under the master's sequence word and re-check the tag afterwards, so a copy
//!   is always the version's own row.
//! - Slot owners are a prefix of the chain below its head (a relocation re-tags the older
//!   owners first), so a writer finds them by walking from the head to the first version that
//!   is not in a slot.
//! - A version dropped (1st prune) or whose segment was freed is dead by the dead zones:
//!   no live read point sees it, and a transaction registering later reads at or above the
//!   zones' `ct`, past its End (`dead_zone.rs`'s "a stale list is safe"). No reader asks
//!   for its row: under MVTO, where an older writer can end a version below the read point
//!   of a reader that already found it, a read copies the row only once `on_read` has
//!   accepted the version (`cc::settles_at_on_read`). A version the pruner cuts while it
//!   still holds a slot is marked dropped too (`drop_slot_row`). Segment memory is freed
//!   after the memory epoch.
//! - A segment entry is written once, by the slot that owns the open segment, before its
//!   version is re-tagged to it, and never changes; a segment is sealed by that slot and
//!   freed only once sealed (and dead, or the store is dropped).
//!
//! Written by hand (not a crate): this is the version store the paper describes.

use super::master::Master;
use super::zones::Zones;
use super::{is_txn, Version};
use std::alloc::Layout;
use std::ptr;
use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The classes of relocated versions, in the order of the per-class counters.
pub(crate) const HOT: usize = 0;
pub(crate) const COLD: usize = 1;
pub(crate) const LLT: usize = 2;
/// Class names, in counter order.
pub const CLASSES: [&str; 3] = ["hot", "cold", "llt"];

/// Image word: not placed yet.
const NONE: u64 = 0;
/// Image word: in slot 0 or 1 of the master.
const SLOT: [u64; 2] = [1, 2];
/// Image word: dropped at relocation (1st prune).
const PRUNED: u64 = 3;
/// Image word tag of a segment entry (entries are 8-aligned).
const ENTRY: u64 = 4;

/// A segment entry's header: Begin, End, row bytes; the row follows, padded to 8.
const ENTRY_HEADER: usize = 24;

/// The cutter publishes new zones at most this often.
const PUBLISH_PERIOD: Duration = Duration::from_millis(1);

fn slot_of(word: u64) -> Option<usize> {
    match word {
        1 => Some(0),
        2 => Some(1),
        _ => None,
    }
}

/// `siro`'s counters of one worker slot or vacuum thread, written by it alone (plain
/// stores, no read-modify-write) and summed by `Database::stats`; per class where an array
/// (hot, cold, LLT).
#[derive(Default)]
pub(crate) struct SiroCounters {
    /// Versions relocated from their record slot into a segment of the class.
    pub relocated: [AtomicU64; 3],
    /// Relocated versions dropped with their segment at its seal (2nd prune).
    pub pruned_seal: [AtomicU64; 3],
    /// Relocated versions dropped later with a segment the cutter found dead, the segments,
    /// and the nanoseconds from their seal to their cut, summed.
    pub cut: [AtomicU64; 3],
    pub segments_cut: [AtomicU64; 3],
    pub cut_delay_ns: [AtomicU64; 3],
    /// Versions dropped from a record slot without being relocated (1st prune): dead by
    /// the zones when a writer took the slot, or cut by the pruner while they held it.
    pub pruned_first: AtomicU64,
    /// Segment bytes allocated and freed.
    pub segment_bytes: AtomicU64,
    pub segment_bytes_freed: AtomicU64,
    /// Acquisitions of a class's sealed-list lock (engine-global).
    pub seal_locks: AtomicU64,
    /// The lifetimes (End − Begin, in timestamps) of the relocated versions, summed; their
    /// mean sets the cold class's bound.
    pub lifetime_sum: AtomicU64,
    /// Update commits and their lengths (end − read timestamp) summed; their mean sets the
    /// LLT bound.
    pub txn_len_sum: AtomicU64,
    pub txn_len_n: AtomicU64,
}

/// Adds `n` to an owner-written counter without an atomic read-modify-write.
fn bump(c: &AtomicU64, n: u64) {
    c.store(c.load(Ordering::Relaxed).wrapping_add(n), Ordering::Relaxed);
}

/// The totals the cutter's step averages over (`SiroStore::step`): summed `SiroCounters`
/// of every worker slot.
#[derive(Clone, Copy, Default)]
pub(crate) struct Totals {
    pub txn_len_sum: u64,
    pub txn_len_n: u64,
    pub lifetime_sum: u64,
    pub relocated: u64,
}

impl Totals {
    /// Adds one slot's counters.
    pub(crate) fn add(&mut self, c: &SiroCounters) {
        let l = |x: &AtomicU64| x.load(Ordering::Relaxed);
        self.txn_len_sum += l(&c.txn_len_sum);
        self.txn_len_n += l(&c.txn_len_n);
        self.lifetime_sum += l(&c.lifetime_sum);
        self.relocated += c.relocated.iter().map(l).sum::<u64>();
    }
}

/// The worker slot a write comes from: its open segments, its counters, and how a Begin or
/// End word holding a transaction id resolves to that transaction's end timestamp (`None`
/// if it has none yet).
#[derive(Clone, Copy)]
pub(crate) struct Writer<'a> {
    pub slot: usize,
    pub stats: &'a SiroCounters,
    pub resolve: &'a dyn Fn(u64) -> Option<u64>,
}

/// What writers classify and prune by: the dead zones of one build and the class bounds.
#[derive(Default)]
pub(crate) struct Published {
    zones: Zones,
    /// A read point below this belongs to a long-lived transaction.
    llt_before: u64,
    /// A version that lived longer than this (timestamps) is cold.
    cold_len: u64,
}

impl Published {
    /// The class of a live version with Begin `b` and End `e`.
    fn classify(&self, b: u64, e: u64) -> usize {
        // The first read point at or after `b`: an LLT reads the version iff it is below
        // both `e` and the LLT bound.
        let p = self.zones.points();
        let i = p.partition_point(|&s| s < b);
        if p.get(i).is_some_and(|&s| s < e && s < self.llt_before) {
            LLT
        } else if e - b > self.cold_len {
            COLD
        } else {
            HOT
        }
    }
}

/// One segment: `cap` bytes of entries, filled by one writer (the worker slot whose open
/// segment it is), then sealed and never changed.
struct Segment {
    buf: *mut u8,
    cap: usize,
    class: usize,
    /// Owner-written until the seal: bytes used, entries, smallest Begin, largest End.
    used: usize,
    entries: u64,
    v_min: u64,
    v_max: u64,
    sealed: Instant,
}

// SAFETY: `buf` is owned by the segment; until the seal only its slot's writer touches it,
// and after the seal no one writes it (a sealed segment reaches the cutter under its
// class's lock). Entries are read by readers only after their publication (Release on the
// image word).
unsafe impl Send for Segment {}
unsafe impl Sync for Segment {}

fn layout(cap: usize) -> Layout {
    match Layout::from_size_align(cap, 8) {
        Ok(l) => l,
        Err(_) => panic!("layout overflow for a {cap}-byte segment"),
    }
}

impl Segment {
    fn alloc(cap: usize, class: usize) -> *mut Segment {
        let l = layout(cap);
        // SAFETY: non-zero size (caps are at least 4 KiB or one entry).
        let buf = unsafe { std::alloc::alloc(l) };
        if buf.is_null() {
            std::alloc::handle_alloc_error(l);
        }
        Box::into_raw(Box::new(Segment {
            buf,
            cap,
            class,
            used: 0,
            entries: 0,
            v_min: u64::MAX,
            v_max: 0,
            sealed: Instant::now(),
        }))
    }

    /// # Safety
    /// `s` came from `alloc` and is unreachable.
    unsafe fn free(s: *mut Segment) {
        let b = Box::from_raw(s);
        std::alloc::dealloc(b.buf, layout(b.cap));
    }

    /// Appends an entry if it fits; returns its address.
    ///
    /// # Safety
    /// The caller owns the unsealed segment.
    unsafe fn push(s: *mut Segment, b: u64, e: u64, row: &[u8]) -> Option<*mut u8> {
        let seg = &mut *s;
        let sz = entry_size(row.len());
        if seg.used + sz > seg.cap {
            return None;
        }
        let p = seg.buf.add(seg.used);
        ptr::write(p as *mut u64, b);
        ptr::write(p.add(8) as *mut u64, e);
        ptr::write(p.add(16) as *mut u64, row.len() as u64);
        ptr::copy_nonoverlapping(row.as_ptr(), p.add(ENTRY_HEADER), row.len());
        seg.used += sz;
        seg.entries += 1;
        seg.v_min = seg.v_min.min(b);
        seg.v_max = seg.v_max.max(e);
        Some(p)
    }
}

fn entry_size(len: usize) -> usize {
    ENTRY_HEADER + len.div_ceil(8) * 8
}

/// A sealed segment on a class's list (the cutter's).
struct Sealed(*mut Segment);
// SAFETY: a sealed segment is immutable and freed only by whoever takes it off the list.
unsafe impl Send for Sealed {}

/// The averages the cutter keeps to publish the class bounds.
#[derive(Default)]
struct Averages {
    last: Option<Instant>,
    txn_len: (u64, u64),
    lifetime: (u64, u64),
    avg_txn_len: u64,
    avg_lifetime: u64,
}

/// The segment pool and published zones of one database under `siro`.
pub(crate) struct SiroStore {
    segment_bytes: usize,
    llt_multiple: u64,
    cold_multiple: u64,
    published: crossbeam_epoch::Atomic<Published>,
    /// Per worker slot and class, its open segment (written by the slot's transactions
    /// only: appends take no shared read-modify-write).
    open: Box<[[AtomicPtr<Segment>; 3]]>,
    sealed: [parking_lot::Mutex<Vec<Sealed>>; 3],
    averages: parking_lot::Mutex<Averages>,
}

impl SiroStore {
    /// A store for `slots` worker slots: segments of `segment_bytes`, the LLT and cold
    /// multiples (`Config::siro_*`).
    pub(crate) fn new(
        segment_bytes: usize,
        llt_multiple: u64,
        cold_multiple: u64,
        slots: usize,
    ) -> SiroStore {
        SiroStore {
            segment_bytes,
            llt_multiple,
            cold_multiple,
            published: crossbeam_epoch::Atomic::new(Published::default()),
            open: (0..slots).map(|_| Default::default()).collect(),
            sealed: Default::default(),
            averages: Default::default(),
        }
    }

    /// A commit of an update transaction that read at `rt` and ended at `end`: counted for
    /// the average transaction length (slot-local counters).
    pub(crate) fn note_commit(stats: &SiroCounters, rt: u64, end: u64) {
        bump(&stats.txn_len_sum, end.saturating_sub(rt));
        bump(&stats.txn_len_n, 1);
    }

    /// The cutter's step (the first dead-zone vacuum thread, each pass): publishes `zones`
    /// (at most every `PUBLISH_PERIOD`, unless `force`) with class bounds from the averages
    /// of the commits and relocations since the last publication (`totals`: every worker
    /// slot's counters summed now), then frees the sealed segments that are dead by them.
    /// Counts go to `stats`.
    pub(crate) fn step(&self, zones: &Zones, totals: Totals, stats: &SiroCounters, force: bool) {
        let guard = crossbeam_epoch::pin();
        {
            let mut a = self.averages.lock();
            let now = Instant::now();
            if !force
                && a.last
                    .is_some_and(|l| now.duration_since(l) < PUBLISH_PERIOD)
            {
                return;
            }
            a.last = Some(now);
            let (tl, tn) = (totals.txn_len_sum, totals.txn_len_n);
            let (vl, vn) = (totals.lifetime_sum, totals.relocated);
            let mean = |now: (u64, u64), then: (u64, u64), old: u64| {
                let n = now.1.saturating_sub(then.1);
                now.0
                    .saturating_sub(then.0)
                    .checked_div(n)
                    .map_or(old, |m| m.max(1))
            };
            a.avg_txn_len = mean((tl, tn), a.txn_len, a.avg_txn_len);
            a.avg_lifetime = mean((vl, vn), a.lifetime, a.avg_lifetime);
            a.txn_len = (tl, tn);
            a.lifetime = (vl, vn);
            let p = Published {
                zones: zones.clone(),
                // Until a commit has been measured nothing counts as long-lived.
                llt_before: match a.avg_txn_len {
                    0 => 0,
                    n => zones
                        .ct()
                        .saturating_sub(self.llt_multiple.saturating_mul(n)),
                },
                cold_len: match a.avg_lifetime {
                    0 => u64::MAX,
                    n => self.cold_multiple.saturating_mul(n),
                },
            };
            let old = self
                .published
                .swap(crossbeam_epoch::Owned::new(p), Ordering::AcqRel, &guard);
            // SAFETY: replaced; writers pinned now may still read it.
            unsafe { guard.defer_destroy(old) };
        }
        for class in 0..3 {
            let mut list = self.sealed[class].lock();
            list.retain(|s| {
                // SAFETY: sealed segments are immutable until freed by their list's owner.
                let seg = unsafe { &*s.0 };
                if !zones.is_dead(seg.v_min, seg.v_max) {
                    return true;
                }
                bump(&stats.cut[class], seg.entries);
                bump(&stats.segments_cut[class], 1);
                bump(
                    &stats.cut_delay_ns[class],
                    seg.sealed.elapsed().as_nanos() as u64,
                );
                bump(&stats.segment_bytes_freed, seg.cap as u64);
                let q = s.0 as usize;
                // SAFETY: off the list, unreachable for new readers (its versions are dead:
                // module invariants); readers pinned now finish first.
                unsafe { guard.defer_unchecked(move || Segment::free(q as *mut Segment)) };
                false
            });
        }
    }

    /// Appends a copy of `row` (a version with Begin `b`, End `e`) to worker slot `slot`'s
    /// open segment of `class` (sealing it and opening the next when full); returns the
    /// entry. Counts the segments it allocates in `stats`. Only `slot`'s transaction calls
    /// this.
    #[allow(clippy::too_many_arguments)]
    #[inline(never)]
    fn append(
        &self,
        slot: usize,
        class: usize,
        b: u64,
        e: u64,
        row: &[u8],
        stats: &SiroCounters,
        published: &Published,
    ) -> *mut u8 {
        let sz = entry_size(row.len());
        let cap = self.segment_bytes.max(2 * sz);
        let open = &self.open[slot][class];
        loop {
            let mut s = open.load(Ordering::Relaxed);
            if s.is_null() {
                s = Segment::alloc(cap, class);
                bump(&stats.segment_bytes, cap as u64);
                open.store(s, Ordering::Relaxed);
            }
            // SAFETY: our slot's open segment.
            if let Some(p) = unsafe { Segment::push(s, b, e, row) } {
                return p;
            }
            open.store(ptr::null_mut(), Ordering::Relaxed);
            // SAFETY: full and ours; no one else can reach it.
            unsafe {
                (*s).sealed = Instant::now();
                self.sealed_one(s, stats, published);
            }
        }
    }

    /// A sealed segment: freed at once if dead (2nd prune), else put on its class's list.
    ///
    /// # Safety
    /// `s` is sealed and owned by the caller.
    unsafe fn sealed_one(&self, s: *mut Segment, stats: &SiroCounters, published: &Published) {
        let seg = &*s;
        if published.zones.is_dead(seg.v_min, seg.v_max) {
            bump(&stats.pruned_seal[seg.class], seg.entries);
            bump(&stats.segment_bytes_freed, seg.cap as u64);
            let q = s as usize;
            // SAFETY: never on a list; its entries are dead (module invariants), and readers
            // pinned now finish first.
            crossbeam_epoch::pin().defer_unchecked(move || Segment::free(q as *mut Segment));
            return;
        }
        bump(&stats.seal_locks, 1);
        self.sealed[seg.class].lock().push(Sealed(s));
    }

    /// Moves version `x`, which owns slot `k` of master `m` (`row_len` bytes a slot), out of
    /// it: dropped if dead by the published zones (1st prune), else copied to a segment of
    /// its class. Re-tags `x` (Release) before returning. The caller holds the lock on the
    /// chain's newest version.
    #[allow(clippy::too_many_arguments)]
    fn relocate(
        &self,
        w: Writer<'_>,
        x: &Version,
        m: &Master,
        k: usize,
        row_len: usize,
        published: &Published,
    ) {
        let (slot, stats) = (w.slot, w.stats);
        let word = x.image_word_ref();
        // A transaction id whose transaction has finished post-processing resolves to
        // nothing (its slot moved on), but then the field holds the timestamp: read again.
        let field = |f: &AtomicU64| {
            for _ in 0..3 {
                let v = f.load(Ordering::Acquire);
                if !is_txn(v) {
                    return Some(v);
                }
                if let Some(ts) = (w.resolve)(v) {
                    return Some(ts);
                }
            }
            None
        };
        let (b, e, class) = match (field(&x.begin), field(&x.end)) {
            (Some(b), Some(e)) if published.zones.is_dead(b, e) => {
                word.store(PRUNED, Ordering::Release);
                bump(&stats.pruned_first, 1);
                return;
            }
            (Some(b), Some(e)) if b < e => (b, e, published.classify(b, e)),
            // A bound not known (its transaction has no end timestamp: not expected of a
            // version below the newest committed one, whose lock the caller holds): kept,
            // cold, with an End no zone ends below, so its segment is never cut — safe, at
            // the cost of that segment's memory.
            (b, _) => (b.unwrap_or(0), u64::MAX >> 2, COLD),
        };
        let row = m.owned_at(k * row_len, row_len);
        let p = self.append(slot, class, b, e, row, stats, published);
        word.store(p as usize as u64 | ENTRY, Ordering::Release);
        bump(&stats.relocated[class], 1);
        bump(&stats.lifetime_sum, e.saturating_sub(b).min(u64::MAX >> 8));
    }

    /// As the owner of the lock on `tid`'s newest version (or of a fresh tuple no one reads
    /// yet): makes `row` the row of `new`, the chain's newest version, whose next older one
    /// (if any) is `prev`. `None`: a delete, whose tombstone keeps `prev`'s row (it shares
    /// its place). A version already in a slot no older version owns is rewritten there;
    /// otherwise the row goes into the slot `prev` does not own (`take_slot`).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn place(
        &self,
        w: Writer<'_>,
        m: &Master,
        row_len: usize,
        new: &Version,
        prev: Option<&Version>,
        row: Option<&[u8]>,
        guard: &crossbeam_epoch::Guard,
    ) {
        let word = new.image_word_ref();
        let Some(row) = row else {
            let w = prev.map_or(NONE, |p| p.image_word_ref().load(Ordering::Acquire));
            word.store(w, Ordering::Release);
            return;
        };
        if let Some(k) = slot_of(word.load(Ordering::Acquire)) {
            if !owners(prev).any(|(_, s)| s == k) {
                m.write_at(k * row_len, row_len, |d| d.copy_from_slice(row));
                return;
            }
        }
        let k = self.take_slot(w, m, row_len, prev, guard);
        m.write_at(k * row_len, row_len, |d| d.copy_from_slice(row));
        word.store(SLOT[k], Ordering::Release);
    }

    /// As the owner of the lock on the chain's newest version `prev` (or of a fresh tuple:
    /// `None`): the slot a version superseding it writes its row into — the one `prev` does
    /// not own (0 if it owns none) — after moving that slot's owners out of it (`relocate`:
    /// dropped if dead, else copied to a segment). No version names the slot on return; the
    /// caller writes it and tags its version with it (`tag`), or leaves it unowned (a failed
    /// update: vDriver's undo by toggle, nothing to restore).
    pub(crate) fn take_slot(
        &self,
        w: Writer<'_>,
        m: &Master,
        row_len: usize,
        prev: Option<&Version>,
        guard: &crossbeam_epoch::Guard,
    ) -> usize {
        let k = match prev.and_then(|p| slot_of(p.image_word_ref().load(Ordering::Acquire))) {
            Some(a) => 1 - a,
            None => 0,
        };
        let published = self.published.load(Ordering::Acquire, guard);
        // SAFETY: published values are freed after the epoch; we are pinned.
        let published = unsafe { published.as_ref() }.unwrap_or_else(|| {
            unreachable!("the store is created with a published value and never unset")
        });
        for (v, _) in owners(prev).filter(|&(_, s)| s == k) {
            self.relocate(w, v, m, k, row_len, published);
        }
        k
    }

    /// Recovery: `new` (unpublished, in a table no transaction reaches yet) gets `row` in
    /// slot 0.
    pub(crate) fn place_recovered(m: &Master, row_len: usize, new: &Version, row: &[u8]) {
        m.write_at(0, row_len, |d| d.copy_from_slice(row));
        new.image_word_ref().store(SLOT[0], Ordering::Release);
    }
}

impl Drop for SiroStore {
    fn drop(&mut self) {
        // The database is gone: no reader or writer is left.
        for o in self.open.iter().flatten() {
            let s = o.swap(ptr::null_mut(), Ordering::AcqRel);
            if !s.is_null() {
                // SAFETY: unreachable now.
                unsafe { Segment::free(s) };
            }
        }
        for l in &self.sealed {
            for s in l.lock().drain(..) {
                // SAFETY: as above.
                unsafe { Segment::free(s.0) };
            }
        }
        // SAFETY: no one else holds the store.
        unsafe {
            let g = crossbeam_epoch::unprotected();
            let p = self
                .published
                .swap(crossbeam_epoch::Shared::null(), Ordering::AcqRel, g);
            if !p.is_null() {
                drop(p.into_owned());
            }
        }
    }
}

/// The versions from `prev` down that own a record slot, with it: a prefix of the chain
/// (module invariants). The caller is pinned and holds the chain's lock.
fn owners(prev: Option<&Version>) -> impl Iterator<Item = (&Version, usize)> {
    let mut x = prev.map_or(ptr::null(), |p| p as *const Version);
    std::iter::from_fn(move || {
        // SAFETY: the caller is pinned and holds the chain's lock.
        let v = unsafe { x.as_ref() }?;
        let s = slot_of(v.image_word_ref().load(Ordering::Acquire))?;
        x = v.next.load(Ordering::Acquire);
        Some((v, s))
    })
}

/// Names slot `k` as the row of `new` (unpublished, or ours), once the slot holds it.
#[inline]
pub(crate) fn tag(new: &Version, k: usize) {
    new.image_word_ref().store(SLOT[k], Ordering::Release);
}

/// The slot version `v` owns now, if it owns one.
#[inline]
pub(crate) fn slot_index(v: &Version) -> Option<usize> {
    slot_of(v.image_word_ref().load(Ordering::Acquire))
}

/// For a version the pruner cut from its chain: if it still holds a record slot (its row
/// was never relocated), marks its row dropped (1st prune) and returns true. Writers no
/// longer find it among the slot's owners and overwrite the slot, so a reader that still
/// asked for its row would otherwise copy another version's row; no reader does (module
/// invariants), and `read_into` catches one that would in debug builds.
pub(crate) fn drop_slot_row(v: &Version) -> bool {
    let word = v.image_word_ref();
    let w = word.load(Ordering::Acquire);
    // A writer relocating it at this moment (it found it in the chain before the cut) wins:
    // its entry is then dead and goes with its segment.
    slot_of(w).is_some()
        && word
            .compare_exchange(w, PRUNED, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
}

/// The offset in its master of the slot version `v` owns (`row_len` bytes a slot), if it
/// owns one now: where a read of it will copy from (a hint: a writer may re-tag it).
pub(crate) fn slot_offset(v: &Version, row_len: usize) -> Option<usize> {
    slot_of(v.image_word_ref().load(Ordering::Relaxed)).map(|k| k * row_len)
}

/// The row of version `v` (its tuple's master `m`, `row_len` bytes a slot) into `buf`: from
/// its slot, re-checked after the copy (a writer re-tags the owners of a slot before it
/// writes it), or from its segment entry.
pub(crate) fn read_into(v: &Version, m: &Master, row_len: usize, buf: &mut Vec<u8>) {
    loop {
        let w = v.image_word_ref().load(Ordering::Acquire);
        match w {
            NONE | PRUNED => {
                // Unreachable by the module's invariants: a version is read only by a
                // transaction that sees it (then it is live and placed). Zeros, not garbage.
                debug_assert!(false, "a siro version read without a row ({w})");
                buf.clear();
                buf.resize(row_len, 0);
                return;
            }
            1 | 2 => {
                m.snapshot_at((w - 1) as usize * row_len, row_len, buf);
                if v.image_word_ref().load(Ordering::Acquire) == w {
                    return;
                }
            }
            _ => {
                let p = (w & !7) as usize as *const u8;
                // SAFETY: an entry lives while its version is visible to a pinned reader
                // (module invariants); entries never change.
                unsafe {
                    let len = ptr::read(p.add(16) as *const u64) as usize;
                    buf.clear();
                    buf.extend_from_slice(std::slice::from_raw_parts(p.add(ENTRY_HEADER), len));
                }
                return;
            }
        }
    }
}
