//! Timestamps (thesis §3.4.3). The seam is `TimestampPolicy` in `Config`; the one source built
//! is a single global counter: a begin (read) timestamp is a load, an end (commit) timestamp a
//! fetch-add — the one shared read-modify-write an MVOCC update transaction needs, counted in
//! every report.

use crossbeam_utils::CachePadded;
use std::sync::atomic::{AtomicU64, Ordering};

/// The global logical clock. Holds the last end timestamp handed out.
pub(crate) struct Clock {
    now: CachePadded<AtomicU64>,
}

impl Clock {
    pub fn new() -> Self {
        Clock {
            now: CachePadded::new(AtomicU64::new(1)),
        }
    }
    /// A read time: every transaction that drew an end timestamp ≤ this has published
    /// at least the Preparing state.
    #[inline]
    pub fn now(&self) -> u64 {
        self.now.load(Ordering::SeqCst)
    }
    /// Moves the clock forward to at least `ts` (recovery continues the old clock).
    pub fn advance_to(&self, ts: u64) {
        self.now.fetch_max(ts, Ordering::SeqCst);
    }
    /// Draws a fresh end timestamp.
    #[inline]
    pub fn next_end_ts(&self) -> u64 {
        self.now.fetch_add(1, Ordering::SeqCst) + 1
    }
}
