//! The `partial-order` timestamp source: POMVCC's partial-order timestamps (Partial Order
//! Multi-Version Concurrency Control, 2018, §IV.B, §VI.A, Figs. 15, 18–19), with the paper's
//! shared per-timestamp counters.
//!
//! Definitions.
//! - `CTs`: the open commit timestamp. An update transaction *joins* it at commit and takes
//!   it as its end timestamp: non-conflicting updaters share one (a commit *group*).
//! - `BTs`: the read time every transaction begins at; `BTs < CTs` always.
//! - `PC[t]`, `CC[t]`: transactions that joined group `t` (pre-commit), and those of them
//!   whose commit is complete (Committed, versions post-processed). A transaction that joins
//!   and then aborts takes its `PC` back.
//!
//! Invariants.
//! - `BTs` passes `t` only when `t < CTs` (the group is closed) and `PC[t] = CC[t]` (every
//!   member is complete), one timestamp at a time (D6): a snapshot holds whole groups, never
//!   a Preparing member, so readers never wait for one.
//! - `CTs` moves only in `close` (under `advance`, a lock: it is rare): on a conflict abort
//!   with the conflicting group's timestamp (D5, trigger 1), on a begin with a floor (trigger
//!   2), and by the periodic tick (trigger 3, `Ticker`). A join that loaded `c` re-reads `CTs`
//!   after raising `PC[c]`; `close` stores `CTs` before any advancer reads `PC[c]` (all
//!   SeqCst), so either the joiner sees the new `CTs` and leaves, or the advancer sees its
//!   join.
//! - Counters live in a ring of `RING` entries, entry `t % RING`, and are cumulative (never
//!   reset, so a late joiner's transient raise and undo cannot corrupt a newer group). `CTs`
//!   never opens beyond `BTs + RING − 1`, so the groups sharing an entry with an open one are
//!   all complete.
//!
//! Shared read-modify-writes: two per committed update transaction (join and release, on the
//! group's counters), plus one failed-or-not CAS on `BTs` per timestamp it moves.

use crossbeam_utils::CachePadded;
use parking_lot::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Ring entries (groups that may be open or incomplete at once).
const RING: u64 = 4096;

/// Why `CTs` moved (the counts `Source::increments` reports).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Cause {
    /// A write-write conflict aborted a transaction at the group's timestamp.
    Conflict,
    /// A begin asked for a floor at or above `CTs`.
    Floor,
    /// The periodic tick.
    Tick,
}

#[derive(Default)]
struct Counts {
    pc: AtomicU64,
    cc: AtomicU64,
}

struct Inner {
    cts: CachePadded<AtomicU64>,
    bts: CachePadded<AtomicU64>,
    ring: Box<[Counts]>,
    /// Serialises `close` (CTs moves are rare; the commit path never takes it). Holds the
    /// open group's counters as they were when it opened: the tick closes it only if they
    /// moved (someone joined it).
    advance: Mutex<(u64, u64)>,
    /// CTs increments by cause (`Cause as usize`).
    increments: [AtomicU64; 3],
}

/// The partial-order source. Cloning shares it.
#[derive(Clone)]
pub(crate) struct PartialOrder {
    inner: Arc<Inner>,
}

impl PartialOrder {
    pub(crate) fn new() -> Self {
        PartialOrder {
            inner: Arc::new(Inner {
                cts: CachePadded::new(AtomicU64::new(2)),
                bts: CachePadded::new(AtomicU64::new(1)),
                ring: (0..RING).map(|_| Counts::default()).collect(),
                advance: Mutex::new((0, 0)),
                increments: Default::default(),
            }),
        }
    }

    fn counts(&self, t: u64) -> &Counts {
        &self.inner.ring[(t % RING) as usize]
    }

    /// `BTs`: the read time.
    #[inline]
    pub(crate) fn bts(&self) -> u64 {
        self.inner.bts.load(Ordering::SeqCst)
    }

    /// `CTs`: the open group.
    #[inline]
    pub(crate) fn cts(&self) -> u64 {
        self.inner.cts.load(Ordering::SeqCst)
    }

    /// Joins the open group and returns its timestamp (`Allocate_CTs`). Returns the shared
    /// read-modify-writes it took (one, more if `CTs` moved under it).
    #[inline]
    pub(crate) fn join(&self) -> (u64, u64) {
        let mut rmw = 0;
        loop {
            let c = self.cts();
            self.counts(c).pc.fetch_add(1, Ordering::SeqCst);
            rmw += 1;
            if self.cts() == c {
                return (c, rmw);
            }
            // Closed under us: its advancer may already have judged it complete.
            self.counts(c).pc.fetch_sub(1, Ordering::SeqCst);
            rmw += 1;
        }
    }

    /// A member of group `c` is complete (`Increment_TsCC`); moves `BTs` if it can.
    #[inline]
    pub(crate) fn release(&self, c: u64) {
        self.counts(c).cc.fetch_add(1, Ordering::SeqCst);
        self.try_advance_bts();
    }

    /// A member of group `c` aborted after joining (`Decrement_TsPC` with the timestamp it
    /// joined, not the new `CTs`).
    pub(crate) fn abandon(&self, c: u64) {
        self.counts(c).pc.fetch_sub(1, Ordering::SeqCst);
        self.try_advance_bts();
    }

    /// Closes group `c` if it is still the open one (`Update_CTs`); true if this call moved
    /// `CTs`. Refused (false) while `RING` groups are incomplete.
    pub(crate) fn close(&self, c: u64, cause: Cause) -> bool {
        let mut base = self.inner.advance.lock();
        self.close_locked(&mut base, c, cause)
    }

    fn close_locked(&self, base: &mut (u64, u64), c: u64, cause: Cause) -> bool {
        if self.cts() != c || c + 1 >= self.bts() + RING {
            return false;
        }
        let e = self.counts(c + 1);
        *base = (e.pc.load(Ordering::SeqCst), e.cc.load(Ordering::SeqCst));
        self.inner.cts.store(c + 1, Ordering::SeqCst);
        self.inner.increments[cause as usize].fetch_add(1, Ordering::Relaxed);
        self.try_advance_bts();
        true
    }

    /// The periodic tick: closes the open group if anyone joined it since it opened, so a
    /// commit becomes readable without a conflict or a floor.
    pub(crate) fn tick(&self) {
        {
            let mut base = self.inner.advance.lock();
            let c = self.cts();
            let e = self.counts(c);
            if (e.pc.load(Ordering::SeqCst), e.cc.load(Ordering::SeqCst)) != *base {
                self.close_locked(&mut base, c, Cause::Tick);
            }
        }
        self.try_advance_bts();
    }

    /// Moves `BTs` over every complete closed group (`Update_BTs`, D6).
    pub(crate) fn try_advance_bts(&self) {
        loop {
            let b = self.bts();
            let next = b + 1;
            if next >= self.cts() {
                return;
            }
            let e = self.counts(next);
            // PC first: every real member's raise precedes the CTs store we just saw.
            let pc = e.pc.load(Ordering::SeqCst);
            let cc = e.cc.load(Ordering::SeqCst);
            if pc != cc {
                return;
            }
            let _ = self
                .inner
                .bts
                .compare_exchange(b, next, Ordering::SeqCst, Ordering::SeqCst);
        }
    }

    /// Makes `BTs ≥ floor` (`Allocate_BTs(Ts)`): closes the group at `floor` if it is still
    /// open, then waits until every group up to it is complete. The caller checked
    /// `floor < CTs` or `floor == CTs`.
    pub(crate) fn wait_for(&self, floor: u64) {
        let backoff = crossbeam_utils::Backoff::new();
        while self.bts() < floor {
            let c = self.cts();
            if c <= floor {
                self.close(c, Cause::Floor);
            }
            self.try_advance_bts();
            if self.bts() < floor {
                backoff.snooze();
            }
        }
    }

    /// Recovery: continue after `ts` (no transaction runs).
    pub(crate) fn advance_to(&self, ts: u64) {
        let mut base = self.inner.advance.lock();
        if self.bts() < ts {
            self.inner.bts.store(ts, Ordering::SeqCst);
        }
        if self.cts() <= ts {
            let e = self.counts(ts + 1);
            *base = (e.pc.load(Ordering::SeqCst), e.cc.load(Ordering::SeqCst));
            self.inner.cts.store(ts + 1, Ordering::SeqCst);
        }
    }

    /// CTs increments so far, by cause.
    pub(crate) fn increments(&self, cause: Cause) -> u64 {
        self.inner.increments[cause as usize].load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Members of one group share its timestamp; it becomes readable only once it is closed
    /// and every member is complete; an aborted member does not hold it back.
    #[test]
    fn groups_become_readable_when_closed_and_complete() {
        let p = PartialOrder::new();
        let (a, _) = p.join();
        let (b, _) = p.join();
        let (c, _) = p.join();
        assert_eq!((a, b), (2, 2));
        assert_eq!(c, 2);
        p.release(a);
        assert_eq!(p.bts(), 1, "the group is still open");
        assert!(p.close(2, Cause::Conflict));
        assert!(!p.close(2, Cause::Conflict), "closed once");
        assert_eq!(p.cts(), 3);
        assert_eq!(p.bts(), 1, "two members are in flight");
        p.abandon(c);
        assert_eq!(p.bts(), 1);
        p.release(b);
        assert_eq!(p.bts(), 2, "closed and complete");
        let (d, _) = p.join();
        assert_eq!(d, 3);
        p.tick();
        assert_eq!(p.cts(), 4, "a tick closes a group someone joined");
        assert_eq!(p.bts(), 2);
        p.release(d);
        assert_eq!(p.bts(), 3);
        p.tick();
        assert_eq!(p.cts(), 4, "a tick leaves an empty group open");
        p.wait_for(4);
        assert_eq!((p.bts(), p.cts()), (4, 5), "a floor closes the open group");
        assert_eq!(p.increments(Cause::Conflict), 1);
        assert_eq!(p.increments(Cause::Tick), 1);
        assert_eq!(p.increments(Cause::Floor), 1);
    }

    /// Threads joining, releasing and closing at once: BTs never passes a group with a
    /// member still in flight.
    #[test]
    fn bts_never_passes_an_incomplete_group() {
        let p = PartialOrder::new();
        let stop = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|s| {
            for _ in 0..2 {
                s.spawn(|| {
                    for i in 0..20_000u64 {
                        let (c, _) = p.join();
                        assert!(
                            p.bts() < c,
                            "BTs {} reached an open member's group {c}",
                            p.bts()
                        );
                        if i % 7 == 0 {
                            p.abandon(c);
                        } else {
                            p.release(c);
                        }
                    }
                });
            }
            s.spawn(|| {
                while !stop.load(Ordering::Relaxed) {
                    p.tick();
                    std::thread::yield_now();
                }
            });
            // Joined threads end the scope only after stop is set below; the tick thread
            // loops until then.
            s.spawn(|| {
                std::thread::sleep(std::time::Duration::from_millis(300));
                stop.store(true, Ordering::Relaxed);
            });
        });
        p.tick();
        p.try_advance_bts();
        assert_eq!(p.bts() + 1, p.cts(), "every group completed");
    }
}
