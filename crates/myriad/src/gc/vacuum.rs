//! Tuple-level garbage collection by background vacuuming (thesis §5.5.1, VAC), with the
//! dirty-block bitmap optimisation.
//!
//! Definitions. A *block* is `BLOCK` consecutive tuple ids of a table. A committed
//! transaction does not queue its garbage (as transaction-level GC does, `epoch.rs`): it sets
//! the dirty bit of each block holding a tuple it gave a new version (`Table::mark_dirty`).
//! `gc_threads` background threads each own the blocks whose number is their index modulo
//! the thread count; every `PERIOD` a thread computes the visibility watermark, takes the
//! dirty words of its blocks (swapping them to zero) and prunes every chain of every dirty
//! block with the pruning of transaction-level GC (`epoch::prune`).
//!
//! Invariants.
//! - The same as `epoch.rs`: nothing visible at a read time ≥ the watermark is cut, each cut
//!   version is claimed by one thread (a swap or a CAS) and freed once, after the memory
//!   epoch has moved past every thread pinned at the cut.
//! - A block whose chains still hold more than one version after its pass (garbage that an
//!   open snapshot still sees) is marked dirty again, so it is visited until it is clean.
//!
//! GC `dead-zone` runs on the same threads without the bitmap (`ZonedPasses`). The workers
//! prune the tuples they wrote (`dead_zone::collect`) and hand a batch of `HAND_OVER`
//! tuples their collects could not leave clean to the queue of the thread owning each
//! tuple's block (one lock per queue per batch, counted as a global RMW). A thread adds what
//! was handed over to its revisit list, revisits the list every `REVISIT_PERIOD` (`CHUNK`
//! tuples per pass, a busy pass followed by the next at once, so that no pass is long), and
//! goes over all of its blocks once nothing committed for a `FULL_PERIOD` (the queues of
//! workers that stopped committing; while any commits, a full pass would cost a cache miss
//! per tuple of the database each time — 5 % of a YCSB run's cycles every second — for
//! garbage bounded per worker, as `txn`'s idle queues are). A pass over the dirty blocks would walk every tuple of each
//! 1,024-tuple block a commit touched: on `bench llt`'s 48 × 1,000 rows, every tuple, every
//! 2 ms.
//!
//! The threads share the clock, the transaction table and the table directory with the
//! `Database` (by `Arc`); `Vacuum`'s drop stops and joins them before those go away.

use super::dead_zone::{self, has_older, PruneLocks, Zones};
use super::epoch::{prune, watermark_of, Cut};
use crate::storage::table::DIRTY_BLOCK_BITS as BLOCK_BITS;
use crate::storage::{TableRef, TupleId};
use crate::timestamp::Source;
use crate::txn::table::{bump, SlotStats, TxnTable};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Time between two passes of one vacuum thread.
const PERIOD: Duration = Duration::from_millis(2);
/// Time between two full passes under cooperative cleaning.
const COOP_PERIOD: Duration = Duration::from_millis(20);

/// GC `dead-zone`: the tuples workers handed to one vacuum thread, (table id, tuple id,
/// pinned by a long-lived reader: park it).
type Written = parking_lot::Mutex<Vec<(u32, TupleId, bool)>>;

/// GC `dead-zone`: a slot hands the tuples its commits wrote to their vacuum threads once it
/// has noted this many (`Vacuum::hand_over`).
pub(crate) const HAND_OVER: usize = 64;

/// GC `dead-zone`: this often a thread revisits the tuples whose chains kept an older
/// version at their last visit (a reader still saw it), and this often it checks whether
/// anything committed since the last check, passing over all of its blocks if not (module
/// docs).
const REVISIT_PERIOD: Duration = Duration::from_millis(64);
/// GC `dead-zone`: parked tuples wait at most this long for their next visit (module docs
/// of `ZonedPasses`).
const PARKED_PERIOD: Duration = Duration::from_secs(1);
const FULL_PERIOD: Duration = Duration::from_secs(1);
/// Version storage `siro`: the first thread publishes zones and cuts dead segments this
/// often (`siro_step`).
const SIRO_PERIOD: Duration = Duration::from_millis(1);
/// GC `dead-zone`: a pass takes at most this many tuples of a revisit (module docs).
const CHUNK: usize = 1024;
/// GC `dead-zone`: a pass that visited at least this many tuples is followed by the next one
/// at once, not after `PERIOD`.
const BUSY: usize = 256;

/// The running vacuum threads of a database.
pub(crate) struct Vacuum {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
    /// Each thread's counters (versions and bytes reclaimed, time spent), and last those of
    /// the passes `Database::collect_garbage` runs (under `manual`); summed by
    /// `Database::stats`.
    pub(crate) stats: Vec<Arc<SlotStats>>,
    /// Background passes hold it shared, `pass_now` exclusively: a full pass starts after
    /// every running pass has finished (and counted what it freed).
    passes: Arc<parking_lot::RwLock<()>>,
    pub(crate) shared: Shared,
    /// GC `dead-zone`: passes prune by the dead zones, not only below the watermark.
    zones: bool,
    /// GC `dead-zone`: per thread, the tuples workers handed over since its last pass
    /// (the thread owning a tuple's block: its index modulo the thread count).
    written: Arc<[Written]>,
    /// GC `dead-zone`: every chain's pruner holds its stripe (`dead_zone.rs`).
    pub(crate) locks: Arc<PruneLocks>,
    /// Tests: the next pass of a vacuum thread panics (`background.rs`).
    #[cfg(test)]
    pub(crate) panic_next: Arc<AtomicBool>,
}

/// What a vacuum pass reads: shared with the `Database`.
#[derive(Clone)]
pub(crate) struct Shared {
    pub clock: Source,
    pub txns: Arc<TxnTable>,
    pub tables: Arc<[OnceLock<TableRef>]>,
    /// The latest watermark a pass or a worker computed (`coop.rs` prunes against it: an
    /// older watermark is still safe, since read times only grow).
    pub watermark: Arc<crossbeam_utils::CachePadded<AtomicU64>>,
    /// Version storage `siro`: the store whose zones the first thread publishes and whose
    /// dead segments it cuts (`siro_step`).
    pub siro: Option<Arc<crate::version::siro::SiroStore>>,
}

impl Vacuum {
    /// Starts `n ≥ 1` vacuum threads: each passes over its dirty blocks every `PERIOD`, or,
    /// with `full`, over all its blocks every `COOP_PERIOD` (cooperative cleaning's pass for
    /// the "dusty corners" no reader walks, `coop.rs`).
    /// With `zones` (GC `dead-zone`), every pass also splices dead versions out of the
    /// middle of the chains it visits (`dead_zone.rs`).
    /// A panic stops its thread and is recorded in `failures` (`background.rs`); a thread
    /// that cannot be started is an error (the ones started before it are stopped).
    pub(crate) fn start(
        n: usize,
        shared: Shared,
        full: bool,
        zones: bool,
        failures: &crate::background::Failures,
    ) -> crate::error::Result<Vacuum> {
        let stop = Arc::new(AtomicBool::new(false));
        let passes = Arc::new(parking_lot::RwLock::new(()));
        let stats: Vec<Arc<SlotStats>> = (0..=n).map(|_| Arc::default()).collect();
        let written: Arc<[Written]> = (0..n).map(|_| Default::default()).collect();
        let locks = Arc::new(PruneLocks::default());
        #[cfg(test)]
        let panic_next = Arc::new(AtomicBool::new(false));
        let mut threads = Vec::with_capacity(n);
        for i in 0..n {
            let (stop2, shared, stats) = (stop.clone(), shared.clone(), stats[i].clone());
            let (passes, written, locks) = (passes.clone(), written.clone(), locks.clone());
            let failures = failures.clone();
            #[cfg(test)]
            let panic_next = panic_next.clone();
            let name = format!("myriad-vacuum-{i}");
            let body = move || {
                let mut zoned = ZonedPasses::default();
                while !stop2.load(Ordering::Acquire) {
                    let busy = {
                        let _shared = passes.read();
                        #[cfg(test)]
                        if panic_next.swap(false, Ordering::AcqRel) {
                            panic!("injected by a test");
                        }
                        if zones {
                            zoned.pass(&shared, i, n, &stats, &written[i], &locks) >= BUSY
                        } else {
                            pass(&shared, i, n, &stats, full, None);
                            false
                        }
                    };
                    if busy {
                        // Commits hand over faster than a period drains: go on at once, so
                        // hot chains do not grow for a whole period.
                        std::thread::yield_now();
                    } else {
                        std::thread::sleep(if full { COOP_PERIOD } else { PERIOD });
                    }
                }
            };
            let thread_name = name.clone();
            match crate::background::spawn(name, move || {
                crate::background::guarded(&thread_name, &failures, body)
            }) {
                Ok(t) => threads.push(t),
                Err(e) => {
                    stop.store(true, Ordering::Release);
                    for t in threads {
                        let _ = t.join();
                    }
                    return Err(e);
                }
            }
        }
        Ok(Vacuum {
            stop,
            threads,
            stats,
            passes,
            shared,
            zones,
            written,
            locks,
            #[cfg(test)]
            panic_next,
        })
    }

    /// GC `dead-zone`: hands the tuples in `batch` (emptied) to the threads that own them;
    /// returns the queue locks taken.
    pub(crate) fn hand_over(&self, batch: &mut Vec<(u32, TupleId, bool)>) -> usize {
        let n = self.written.len();
        if n == 1 {
            self.written[0].lock().append(batch);
            return 1;
        }
        let owner = |tid: TupleId| ((tid.get() >> BLOCK_BITS) % n as u64) as usize;
        let mut locks = 0;
        for (i, q) in self.written.iter().enumerate() {
            if batch.iter().any(|&(_, tid, _)| owner(tid) == i) {
                q.lock()
                    .extend(batch.iter().filter(|&&(_, tid, _)| owner(tid) == i));
                locks += 1;
            }
        }
        batch.clear();
        locks
    }

    /// A full pass over every block, dirty or not, on the caller's thread, once no
    /// background pass is running (`Database::collect_garbage`).
    pub(crate) fn pass_now(&self) {
        let _alone = self.passes.write();
        if let Some(stats) = self.stats.last() {
            siro_step(&self.shared, stats, &mut Zones::default(), true);
            let locks = self.zones.then_some(&*self.locks);
            pass(&self.shared, 0, 1, stats, true, locks);
            // Versions the pass spliced may have been the last to pin a segment's interval.
            siro_step(&self.shared, stats, &mut Zones::default(), true);
        }
    }
}

impl Drop for Vacuum {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// Version storage `siro`: publishes fresh dead zones for the writers' relocations and cuts
/// the sealed segments dead by them (`SiroStore::step`; at most every millisecond unless
/// `force`). `zones` is a buffer.
fn siro_step(shared: &Shared, stats: &SlotStats, zones: &mut Zones, force: bool) {
    if let Some(store) = &shared.siro {
        dead_zone::build(zones, &shared.clock, &shared.txns);
        let mut totals = crate::version::siro::Totals::default();
        for s in shared.txns.slots() {
            totals.add(&s.stats.siro);
        }
        store.step(zones, totals, &stats.siro, force);
    }
}

/// One pass over the dirty blocks numbered `me` modulo `of` of every table, or over all of
/// its blocks if `full` (with or without a bitmap). Publishes the watermark it used.
/// With `locks` (GC `dead-zone`), the pass builds the dead zones once and prunes every
/// visited chain by them (a list built at the start stays safe for the whole pass,
/// `dead_zone.rs`), holding the chain's stripe.
fn pass(
    shared: &Shared,
    me: usize,
    of: usize,
    stats: &SlotStats,
    full: bool,
    locks: Option<&PruneLocks>,
) {
    let zones = locks.is_some();
    let start = Instant::now();
    let mut dz = Zones::default();
    let w = if zones {
        dead_zone::build(&mut dz, &shared.clock, &shared.txns);
        dz.watermark()
    } else {
        watermark_of(&shared.clock, &shared.txns)
    };
    shared.watermark.fetch_max(w, Ordering::AcqRel);
    let mut spliced = 0;
    let guard = crossbeam_epoch::pin();
    let mut cut = Cut::default();
    for (id, t) in shared.tables.iter().enumerate() {
        let Some(t) = t.get() else { continue };
        let blocks = (t.tid_count() >> BLOCK_BITS) + 1;
        for block in (me as u64..blocks).step_by(of) {
            if !full && !t.take_dirty(block) {
                continue;
            }
            let first = block << BLOCK_BITS;
            let end = (first + (1 << BLOCK_BITS)).min(t.tid_count());
            let mut again = false;
            for tid in (first..end).map(TupleId::new) {
                if let Some(locks) = locks {
                    let _held = locks.lock(id as u32, tid);
                    spliced += dead_zone::prune(t, tid, &dz, &mut cut);
                } else {
                    prune(t, tid, w, &mut cut);
                }
                again |= has_older(t, tid);
            }
            if again {
                t.mark_dirty(TupleId::new(first));
            }
        }
    }
    bump(&stats.versions_reclaimed, cut.versions.len() as u64);
    bump(&stats.version_bytes_reclaimed, cut.bytes);
    bump(&stats.versions_pruned_dead_zone, spliced);
    bump(
        &stats.siro.pruned_first,
        std::mem::take(&mut cut.siro_in_slot),
    );
    // SAFETY: every version in the batch was unlinked under `guard` (as in
    // `epoch::collect`), so no thread pinned later can reach it.
    unsafe { cut.free_after_epoch(&guard) };
    bump(&stats.gc_ns, start.elapsed().as_nanos() as u64);
}

/// A `dead-zone` vacuum thread's passes. The tuples handed to it (`Vacuum::hand_over`:
/// chains a worker could not leave clean) wait for the next revisit, every
/// `REVISIT_PERIOD`, when a live reader briefly pinned them; when the worker found them
/// pinned by a reader older than its previous collect (a long-lived one), they are
/// *parked*. Parked tuples are revisited once the oldest read point moves past the one they
/// were parked under, or `PARKED_PERIOD` after they were: while an LLT lives, every chain
/// written holds its version, and revisiting them all every 64 ms took 16 % of a
/// `bench llt` run's cycles to cut nothing (the writers prune the chains they write). A
/// revisit is spread over passes, `CHUNK` tuples each, a busy pass (`BUSY` tuples or more)
/// followed by the next at once; a tuple still unclean after its revisit is parked. Once
/// nothing committed for `FULL_PERIOD` a pass goes over all of the thread's blocks. Which
/// thread revisits a tuple is decided as for the full pass (block number modulo the thread
/// count).
struct ZonedPasses {
    last_full: Instant,
    /// Commits counted at the last full-pass check.
    commits: u64,
    last_revisit: Instant,
    work: Vec<(u32, TupleId)>,
    /// Handed over since the last revisit began.
    fresh: Vec<(u32, TupleId)>,
    /// The current revisit's tuples not visited yet (taken from the back).
    revisit: Vec<(u32, TupleId)>,
    /// Parked tuples, the oldest read point when the first of them was parked, when that
    /// was, and the length after the last dedup (a worker hands a hot chain over again at
    /// every collect while an LLT pins it).
    parked: Vec<(u32, TupleId)>,
    parked_w: u64,
    parked_at: Instant,
    parked_deduped: usize,
    zones: Zones,
    /// `siro`: the last cutter step (`siro_step`) and its zones buffer.
    last_siro: Instant,
    siro_zones: Zones,
}

impl Default for ZonedPasses {
    fn default() -> Self {
        let now = Instant::now();
        ZonedPasses {
            last_full: now,
            commits: 0,
            last_revisit: now,
            work: Vec::new(),
            fresh: Vec::new(),
            revisit: Vec::new(),
            parked: Vec::new(),
            parked_w: 0,
            parked_at: now,
            parked_deduped: 0,
            zones: Zones::default(),
            last_siro: now,
            siro_zones: Zones::default(),
        }
    }
}

impl ZonedPasses {
    /// One pass; returns the tuples it visited.
    fn pass(
        &mut self,
        shared: &Shared,
        me: usize,
        of: usize,
        stats: &SlotStats,
        written: &Written,
        locks: &PruneLocks,
    ) -> usize {
        let now = Instant::now();
        if me == 0 && now.duration_since(self.last_siro) >= SIRO_PERIOD {
            self.last_siro = now;
            siro_step(shared, stats, &mut self.siro_zones, false);
        }
        if now.duration_since(self.last_full) >= FULL_PERIOD {
            self.last_full = now;
            let commits = shared
                .txns
                .slots()
                .map(|s| s.stats.committed.load(Ordering::Relaxed))
                .sum();
            if std::mem::replace(&mut self.commits, commits) == commits {
                // Everything handed over, revisited or parked is covered by the pass.
                written.lock().clear();
                self.fresh.clear();
                self.revisit.clear();
                self.parked.clear();
                pass(shared, me, of, stats, true, Some(locks));
                return 0;
            }
        }
        // The workers pruned what they hand over just before: it waits for the revisit.
        for (table, tid, long) in written.lock().drain(..) {
            if long {
                self.park(table, tid, shared.watermark.load(Ordering::Acquire), now);
            } else {
                self.fresh.push((table, tid));
            }
        }
        if self.parked.len() > 2 * self.parked_deduped + CHUNK {
            self.parked.sort_unstable();
            self.parked.dedup();
            self.parked_deduped = self.parked.len();
        }
        if self.revisit.is_empty() && now.duration_since(self.last_revisit) >= REVISIT_PERIOD {
            self.last_revisit = now;
            dead_zone::build(&mut self.zones, &shared.clock, &shared.txns);
            std::mem::swap(&mut self.revisit, &mut self.fresh);
            if !self.parked.is_empty()
                && (self.zones.watermark() > self.parked_w
                    || now.duration_since(self.parked_at) >= PARKED_PERIOD)
            {
                self.revisit.append(&mut self.parked);
                self.parked_deduped = 0;
            }
            self.revisit.sort_unstable();
            self.revisit.dedup();
        }
        // A revisit is spread over passes, `CHUNK` tuples each, so a pass stays short and
        // the chains written meanwhile (the hot ones) wait at most one short pass.
        let k = self.revisit.len().min(CHUNK);
        self.work
            .extend(self.revisit.drain(self.revisit.len() - k..));
        if self.work.is_empty() {
            return 0;
        }
        // Any chain may be pruned by a list built now (`dead_zone.rs`).
        dead_zone::build(&mut self.zones, &shared.clock, &shared.txns);
        shared
            .watermark
            .fetch_max(self.zones.watermark(), Ordering::AcqRel);
        let guard = crossbeam_epoch::pin();
        let mut cut = Cut::default();
        let mut spliced = 0;
        let work = std::mem::take(&mut self.work);
        for &(table, tid) in &work {
            let Some(t) = shared.tables.get(table as usize).and_then(|t| t.get()) else {
                continue;
            };
            // Another pruner holds the stripe (this chain's or another's): next revisit.
            let Some(_held) = locks.try_lock(table, tid) else {
                self.fresh.push((table, tid));
                continue;
            };
            spliced += dead_zone::prune(t, tid, &self.zones, &mut cut);
            if has_older(t, tid) {
                self.park(table, tid, self.zones.watermark(), now);
            }
        }
        let visited = work.len();
        self.work = work;
        self.work.clear();
        bump(&stats.versions_reclaimed, cut.versions.len() as u64);
        bump(&stats.version_bytes_reclaimed, cut.bytes);
        bump(&stats.versions_pruned_dead_zone, spliced);
        bump(
            &stats.siro.pruned_first,
            std::mem::take(&mut cut.siro_in_slot),
        );
        // SAFETY: as in `pass`.
        unsafe { cut.free_after_epoch(&guard) };
        bump(&stats.gc_ns, now.elapsed().as_nanos() as u64);
        visited
    }

    /// Parks a tuple found unclean while `w` was the oldest read point.
    fn park(&mut self, table: u32, tid: TupleId, w: u64, now: Instant) {
        if self.parked.is_empty() {
            (self.parked_w, self.parked_at) = (w, now);
        }
        self.parked.push((table, tid));
    }
}
