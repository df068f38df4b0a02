//! Timestamps (thesis §3.4.3). The seam is `TimestampPolicy` in `Config`, which picks the
//! `Source` the database holds (`Shared::clock`, built by `TimestampPolicy::source`);
//! every read time, end timestamp, log reservation and recovery advance goes through it. A
//! new source is a module here plus one arm in each of `Source`'s methods and in
//! `TimestampPolicy::source`; every `match` on it is exhaustive.
//!
//! Three sources are built:
//! - `global_counter` (`global-counter`, the default): a read time is a load, an end
//!   timestamp a fetch-add — the one shared read-modify-write an MVOCC update transaction
//!   needs, counted in every report. With ERMIA's log manager (`log/ermia.rs`) the same add
//!   also reserves the commit record's log space: the end timestamp is the record's end LSN
//!   (`Source::reserve`).
//! - `locked_counter` (`locked-counter`): MPDB's baseline from the POMVCC paper — a commit
//!   increments the counter, stamps its versions and unlocks inside one critical section
//!   (`Source::join_end_ts` takes the lock, `Source::release` drops it).
//! - `partial_order` (`partial-order`): POMVCC's partial-order timestamps. Non-conflicting
//!   updaters share the open commit timestamp `CTs` (`join_end_ts`), readers begin at `BTs`
//!   (`now`), which passes a group only when it is closed and complete; `CTs` moves on a
//!   conflict abort (`close_group`), a begin with a floor (`floor`) and a periodic tick
//!   (`Ticker`). A snapshot may therefore miss a transaction that committed before it began
//!   (the HISTORICAL READ anomaly) unless the begin names that commit's timestamp as its
//!   floor. The per-timestamp counts are the paper's shared counters (`PoCounters::Shared`)
//!   or one word per transaction-table slot (`PoCounters::Slots`: no shared
//!   read-modify-write on the commit path; `BTs` moves by scanning the slots, at a begin
//!   (`refresh`), the tick or a floor). Both sample the visibility lag (`lag`).
//!
//! `silo-epoch` is named in `TimestampPolicy` but not built: `TimestampPolicy::source` (and
//! so `Config::validate`) refuses it.

mod global_counter;
mod locked_counter;
pub(crate) mod partial_order;

use std::fmt;

/// A point in the database's commit order: a read time, a begin timestamp or an end
/// (commit) timestamp. A distinct type from tuple ids, transaction ids (`TxnId`, which
/// shares the Begin/End words of versions with timestamps) and counts, so one cannot be
/// passed for another. In a version's Begin/End word it is stored raw (`get`), below
/// `version::TXN_BIT`.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Default)]
#[repr(transparent)]
pub struct Timestamp(u64);

impl Timestamp {
    /// Before every commit.
    pub const ZERO: Timestamp = Timestamp(0);

    /// The timestamp `n`.
    #[inline]
    pub const fn new(n: u64) -> Self {
        Timestamp(n)
    }

    /// The raw number (to store in a version's word, a log record or a report).
    #[inline]
    pub const fn get(self) -> u64 {
        self.0
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

pub(crate) use global_counter::GlobalCounter;
pub(crate) use locked_counter::LockedCounter;
use partial_order::Cause;
pub(crate) use partial_order::{lag_bucket_floor, LagStats, PartialOrder};

/// Where read times and end timestamps come from (`TimestampPolicy::source` in `config.rs`
/// builds it: this layer does not import the configuration). Cloning shares the source (the
/// ERMIA flusher and the vacuum threads read it).
#[derive(Clone)]
pub(crate) enum Source {
    /// One global counter (`global_counter`).
    GlobalCounter(GlobalCounter),
    /// One counter behind a commit lock (`locked_counter`).
    LockedCounter(LockedCounter),
    /// POMVCC's partial-order timestamps (`partial_order`).
    PartialOrder(PartialOrder),
}

impl Default for Source {
    /// The default policy's source, `global-counter`.
    fn default() -> Self {
        Source::GlobalCounter(GlobalCounter::new())
    }
}

/// What `Config::validate` refuses for the sources without exclusive end timestamps.
const NO_EXCLUSIVE_TS: &str = "partial-order timestamps hand out no exclusive end timestamp: \
     Config::validate refuses the protocols and log managers that need one";

impl Source {
    /// A read time: every transaction that drew an end timestamp ≤ this has published at
    /// least the Preparing state (`partial-order`: has completed its commit).
    #[inline]
    pub(crate) fn now(&self) -> Timestamp {
        match self {
            Source::GlobalCounter(c) => Timestamp(c.now()),
            Source::LockedCounter(c) => Timestamp(c.now()),
            Source::PartialOrder(p) => Timestamp(p.bts()),
        }
    }

    /// The newest end timestamp handed out or open to join (what a floor may name).
    pub(crate) fn newest_end_ts(&self) -> Timestamp {
        match self {
            Source::GlobalCounter(c) => Timestamp(c.now()),
            Source::LockedCounter(c) => Timestamp(c.now()),
            Source::PartialOrder(p) => Timestamp(p.cts()),
        }
    }

    /// Moves the source forward to at least `ts` (recovery continues the old clock).
    pub(crate) fn advance_to(&self, ts: Timestamp) {
        match self {
            Source::GlobalCounter(c) => c.advance_to(ts.0),
            Source::LockedCounter(c) => c.advance_to(ts.0),
            Source::PartialOrder(p) => p.advance_to(ts.0),
        }
    }

    /// Draws a fresh end timestamp, above every read time handed out before, outside a
    /// commit (MVTO's begin, a single-version commit's history order).
    #[inline]
    pub(crate) fn next_end_ts(&self) -> Timestamp {
        match self {
            Source::GlobalCounter(c) => Timestamp(c.next_end_ts()),
            Source::LockedCounter(c) => Timestamp(c.next_end_ts()),
            Source::PartialOrder(_) => panic!("{NO_EXCLUSIVE_TS}"),
        }
    }

    /// Before a multi-version update commit publishes PreparingPending: `locked-counter`
    /// takes its commit lock (see `locked_counter`'s invariant). Returns the shared
    /// read-modify-writes it took.
    #[inline]
    pub(crate) fn enter_commit(&self) -> u64 {
        match self {
            Source::LockedCounter(c) => c.lock(),
            Source::GlobalCounter(_) | Source::PartialOrder(_) => 0,
        }
    }

    /// The end timestamp of a multi-version update commit (after `enter_commit`) by the
    /// transaction in transaction-table slot `slot`, and the
    /// shared read-modify-writes drawing it took. The caller then `release`s it once its versions are stamped, or
    /// `abandon`s it if it aborts (`locked-counter`: the lock is held until then;
    /// `partial-order`: the group waits for it).
    #[inline]
    pub(crate) fn join_end_ts(&self, slot: usize) -> (Timestamp, u64) {
        match self {
            Source::GlobalCounter(c) => (Timestamp(c.next_end_ts()), 1),
            Source::LockedCounter(c) => (Timestamp(c.draw_locked()), 0),
            Source::PartialOrder(p) => {
                let (ts, rmw) = p.join(slot);
                (Timestamp(ts), rmw)
            }
        }
    }

    /// `partial-order` with shared counters on a durable database: lists the member of group
    /// `ts` in slot `slot` for release once log epoch `epoch` is durable (`durable` reads the
    /// durable epoch; `PartialOrder::defer_release`). Returns the shared read-modify-writes,
    /// or `None` (nothing done) under any other source or slot counts.
    #[inline]
    pub(crate) fn defer_release(
        &self,
        ts: Timestamp,
        slot: usize,
        epoch: u64,
        durable: impl Fn() -> u64,
    ) -> Option<u64> {
        match self {
            Source::PartialOrder(p) if !p.slots() => {
                Some(p.defer_release(ts.0, slot, epoch, durable))
            }
            _ => None,
        }
    }

    /// The commit at `ts` (slot `slot`) is complete (Committed, versions stamped). Returns
    /// the shared read-modify-writes it took.
    #[inline]
    pub(crate) fn release(&self, ts: Timestamp, slot: usize) -> u64 {
        match self {
            Source::GlobalCounter(_) => 0,
            Source::LockedCounter(c) => {
                c.unlock();
                0
            }
            Source::PartialOrder(p) => p.release(ts.0, slot),
        }
    }

    /// The transaction in slot `slot` that drew `ts` with `join_end_ts` aborted (its
    /// versions are undone).
    pub(crate) fn abandon(&self, ts: Timestamp, slot: usize) {
        match self {
            Source::GlobalCounter(_) => {}
            Source::LockedCounter(c) => c.unlock(),
            Source::PartialOrder(p) => p.abandon(ts.0, slot),
        }
    }

    /// Before a begin reads `now`: `partial-order` with slot counts moves `BTs` over the
    /// closed groups that completed since (the shared counters move it at each release).
    /// Returns the shared read-modify-writes it took.
    #[inline]
    pub(crate) fn refresh(&self) -> u64 {
        match self {
            Source::GlobalCounter(_) | Source::LockedCounter(_) => 0,
            Source::PartialOrder(p) => p.refresh(),
        }
    }

    /// `refresh` for a begin, which also counts the shared read-modify-writes this
    /// thread's floor waits took since its last begin (`PartialOrder::take_floor_rmw`).
    #[inline]
    pub(crate) fn refresh_for_begin(&self) -> u64 {
        match self {
            Source::GlobalCounter(_) | Source::LockedCounter(_) => 0,
            Source::PartialOrder(p) => p.refresh() + p.take_floor_rmw(),
        }
    }

    /// `partial-order`: the sampled visibility lag so far; `None` for the counters (a
    /// commit is readable once it is stamped).
    pub(crate) fn lag(&self) -> Option<LagStats> {
        match self {
            Source::GlobalCounter(_) | Source::LockedCounter(_) => None,
            Source::PartialOrder(p) => Some(p.lag()),
        }
    }

    /// A write-write conflict with a version committed (or Preparing) at `ts`: under
    /// `partial-order` the group at `ts` is closed, so the retry can begin after it.
    /// Returns the shared read-modify-writes it took.
    pub(crate) fn close_group(&self, ts: Timestamp) -> u64 {
        match self {
            Source::GlobalCounter(_) | Source::LockedCounter(_) => 0,
            Source::PartialOrder(p) => p.close(ts.0, Cause::Conflict).1,
        }
    }

    /// Waits until a transaction beginning now reads at `floor` or later (the commit at
    /// `floor` is in its snapshot). `Err` names a floor no commit can have returned.
    pub(crate) fn floor(&self, floor: Timestamp) -> crate::Result<()> {
        let newest = self.newest_end_ts();
        if floor > newest {
            return Err(crate::Error::FloorAhead {
                floor: floor.get(),
                newest: newest.get(),
            });
        }
        match self {
            // Every end timestamp ≤ the counter is Preparing or done: a read time of `now`
            // already waits for it.
            Source::GlobalCounter(_) | Source::LockedCounter(_) => {}
            Source::PartialOrder(p) => p.wait_for(floor.0),
        }
        Ok(())
    }

    /// The periodic tick (`Ticker`): closes a non-empty open group.
    pub(crate) fn tick(&self) {
        match self {
            Source::GlobalCounter(_) | Source::LockedCounter(_) => {}
            Source::PartialOrder(p) => p.tick(),
        }
    }

    /// Tests: the next tick panics (`background.rs`).
    #[cfg(test)]
    pub(crate) fn test_panic_next_tick(&self) {
        if let Source::PartialOrder(p) = self {
            p.panic_next_tick();
        }
    }

    /// `partial-order`: a commit is readable only once its group is complete (and, on a
    /// durable database, its members' log records are durable: `txn/end.rs`).
    #[inline]
    pub(crate) fn is_partial_order(&self) -> bool {
        matches!(self, Source::PartialOrder(_))
    }

    /// `partial-order` with shared counters: on a durable database a member releases its
    /// group only once its log record is durable, without waiting for it
    /// (`PartialOrder::defer_release`); the log calls `release_durable` per durable point.
    /// `None` for the other sources and for slot counts (whose member waits in its commit).
    pub(crate) fn deferring(&self) -> Option<PartialOrder> {
        self.deferring_ref().cloned()
    }

    /// `deferring` without the clone.
    pub(crate) fn deferring_ref(&self) -> Option<&PartialOrder> {
        match self {
            Source::PartialOrder(p) if !p.slots() => Some(p),
            _ => None,
        }
    }

    /// Whether this source has a periodic tick to run (`Ticker`).
    pub(crate) fn ticks(&self) -> bool {
        matches!(self, Source::PartialOrder(_))
    }

    /// `partial-order`: the commit-timestamp increments so far by cause (conflict, floor,
    /// tick); `None` for the counters, which increment once per end timestamp drawn.
    pub(crate) fn increments(&self) -> Option<[u64; 3]> {
        match self {
            Source::GlobalCounter(_) | Source::LockedCounter(_) => None,
            Source::PartialOrder(p) => Some([
                p.increments(Cause::Conflict),
                p.increments(Cause::Floor),
                p.increments(Cause::Tick),
            ]),
        }
    }

    /// Draws `len ≥ 1` timestamps at once and returns the first: the caller's end timestamp
    /// is `first + len` (ERMIA: the log range `[first, first + len)` is its record).
    #[inline]
    pub(crate) fn reserve(&self, len: u64) -> u64 {
        match self {
            Source::GlobalCounter(c) => c.reserve(len),
            Source::LockedCounter(_) | Source::PartialOrder(_) => panic!("{NO_EXCLUSIVE_TS}"),
        }
    }
}

/// The periodic tick of a source that has one (`partial-order`): a thread that calls
/// `Source::tick` every `period`, stopped and joined on drop.
pub(crate) struct Ticker {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Ticker {
    /// Starts the tick of `source`; `None` if it has none or `period` is zero. A panic of
    /// the tick stops it and is recorded in `failures` (`background.rs`).
    pub(crate) fn start(
        source: &Source,
        period: std::time::Duration,
        failures: &crate::background::Failures,
    ) -> crate::error::Result<Option<Ticker>> {
        if !source.ticks() || period.is_zero() {
            return Ok(None);
        }
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (s, src, f) = (stop.clone(), source.clone(), failures.clone());
        let name = "myriad-ts-tick";
        let thread = crate::background::spawn(name.into(), move || {
            crate::background::guarded(name, &f, || {
                while !s.load(std::sync::atomic::Ordering::Acquire) {
                    std::thread::sleep(period);
                    src.tick();
                }
            })
        })?;
        Ok(Some(Ticker {
            stop,
            thread: Some(thread),
        }))
    }
}

impl Drop for Ticker {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Release);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Source, Timestamp};
    use crate::config::{PoCounters, TimestampPolicy};

    /// Every policy either builds a source whose end timestamps rise above its read times,
    /// or is refused as unsupported (no policy is silently served by another's source).
    #[test]
    fn every_policy_builds_a_source_or_is_refused() {
        let policies = TimestampPolicy::ALL
            .iter()
            .flat_map(|&p| PoCounters::ALL.iter().map(move |&c| (p, c)));
        for (p, counters) in policies {
            match p.source(counters, 2) {
                Ok(s) => {
                    let rt = s.now();
                    s.enter_commit();
                    let (end, _) = s.join_end_ts(0);
                    assert!(end > rt, "{p:?}: end {end} ≤ read time {rt}");
                    s.release(end, 0);
                    s.advance_to(Timestamp::new(100));
                    let now = s.now().get();
                    assert!(now >= 100, "{p:?}: advance_to(100) left {now}");
                    s.advance_to(Timestamp::new(50));
                    assert!(s.now().get() >= 100, "{p:?}: advance_to moved back");
                    match &s {
                        // The counter: a draw is the next read time; a reservation of `len`
                        // moves it by `len` from the first timestamp it returns.
                        Source::GlobalCounter(_) => {
                            let end = s.next_end_ts();
                            assert_eq!(s.now(), end);
                            assert_eq!(s.reserve(3), end.get());
                            assert_eq!(s.now().get(), end.get() + 3);
                        }
                        Source::LockedCounter(_) => {
                            let end = s.next_end_ts();
                            assert_eq!(s.now(), end);
                            s.enter_commit();
                            let (next, _) = s.join_end_ts(0);
                            assert_eq!(next.get(), end.get() + 1);
                            s.abandon(next, 0);
                            assert!(s.floor(next).is_ok());
                            assert!(s.floor(Timestamp::new(next.get() + 1)).is_err());
                        }
                        // Two joins share the open timestamp, readable once it is closed.
                        Source::PartialOrder(_) => {
                            let (a, _) = s.join_end_ts(0);
                            let (b, _) = s.join_end_ts(0);
                            assert_eq!(a, b);
                            s.release(a, 0);
                            s.release(b, 0);
                            assert!(s.now() < a);
                            assert!(s.floor(a).is_ok());
                            assert!(s.now() >= a);
                            assert!(s.floor(Timestamp::new(a.get() + 2)).is_err());
                        }
                    }
                }
                Err(e) => {
                    assert!(matches!(e, crate::Error::Unsupported(_)), "{p:?}: {e}");
                    assert_ne!(p, TimestampPolicy::GlobalCounter);
                }
            }
        }
    }
}
