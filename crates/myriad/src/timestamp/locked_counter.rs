//! The `locked-counter` timestamp source: the baseline POMVCC is measured against (MPDB's
//! "MVCC", Partial Order Multi-Version Concurrency Control §VI.A): a commit takes one lock,
//! increments the counter, stamps its versions (post-processing) and only then unlocks, so
//! "Tx.2 waits until the end of Tx.1 to allocate the CTs". Timestamps are distinct and
//! dense, as with `global-counter`; what differs is that update commits are serialised.
//!
//! Invariant: the lock is held from `lock` to `unlock` by exactly one committer, and the
//! counter is written only under it (`advance_to` excepted: recovery, nothing runs). A
//! committer takes the lock *before* it publishes PreparingPending (`Source::enter_commit`):
//! the holder may wait for a PreparingPending writer's end timestamp (validation walks its
//! versions), so no writer may be PreparingPending while it waits for the lock.
//! A read time is a load of the counter; a reader that meets the lock holder Preparing at a
//! timestamp ≤ its read time waits for it, as under `global-counter`.

use crossbeam_utils::{Backoff, CachePadded};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

struct Inner {
    now: CachePadded<AtomicU64>,
    locked: CachePadded<AtomicBool>,
}

/// The locked counter. Cloning shares it.
#[derive(Clone)]
pub(crate) struct LockedCounter {
    inner: Arc<Inner>,
}

impl LockedCounter {
    pub(crate) fn new() -> Self {
        LockedCounter {
            inner: Arc::new(Inner {
                now: CachePadded::new(AtomicU64::new(1)),
                locked: CachePadded::new(AtomicBool::new(false)),
            }),
        }
    }

    /// The last end timestamp handed out.
    #[inline]
    pub(crate) fn now(&self) -> u64 {
        self.inner.now.load(Ordering::SeqCst)
    }

    /// Takes the commit lock; returns the shared read-modify-writes it took (the successful
    /// swap and any failed ones).
    pub(crate) fn lock(&self) -> u64 {
        let backoff = Backoff::new();
        let mut rmw = 1;
        while self
            .inner
            .locked
            .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            while self.inner.locked.load(Ordering::Relaxed) {
                backoff.snooze();
            }
            rmw += 1;
        }
        rmw
    }

    /// Draws the next timestamp; the caller holds the lock (a store, not an RMW: nobody
    /// else writes the counter).
    pub(crate) fn draw_locked(&self) -> u64 {
        debug_assert!(
            self.inner.locked.load(Ordering::Relaxed),
            "locked-counter: a draw without the commit lock"
        );
        let ts = self.now() + 1;
        self.inner.now.store(ts, Ordering::SeqCst);
        ts
    }

    /// Leaves the commit critical section.
    pub(crate) fn unlock(&self) {
        debug_assert!(
            self.inner.locked.load(Ordering::Relaxed),
            "locked-counter: unlock without the commit lock"
        );
        self.inner.locked.store(false, Ordering::Release);
    }

    /// A timestamp drawn outside a commit (MVTO's begin, a single-version commit's history
    /// order): lock, increment, unlock.
    pub(crate) fn next_end_ts(&self) -> u64 {
        self.lock();
        let ts = self.draw_locked();
        self.unlock();
        ts
    }

    /// Moves the counter forward to at least `ts` (recovery).
    pub(crate) fn advance_to(&self, ts: u64) {
        self.inner.now.fetch_max(ts, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two committers never hold the section at once, and timestamps come out dense.
    #[test]
    fn the_commit_section_is_exclusive() {
        let c = LockedCounter::new();
        let inside = AtomicU64::new(0);
        std::thread::scope(|s| {
            for _ in 0..2 {
                s.spawn(|| {
                    for _ in 0..10_000 {
                        c.lock();
                        let ts = c.draw_locked();
                        assert_eq!(inside.fetch_add(1, Ordering::SeqCst), 0, "two inside");
                        assert_eq!(c.now(), ts);
                        inside.fetch_sub(1, Ordering::SeqCst);
                        c.unlock();
                    }
                });
            }
        });
        assert_eq!(c.now(), 1 + 20_000);
    }
}
