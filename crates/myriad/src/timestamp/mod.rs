//! Timestamps (thesis §3.4.3). The seam is `TimestampPolicy` in `Config`; the one source built
//! is a single global counter: a begin (read) timestamp is a load, an end (commit) timestamp a
//! fetch-add — the one shared read-modify-write an MVOCC update transaction needs, counted in
//! every report. With ERMIA's log manager (`log/ermia.rs`) the same add also reserves the
//! commit record's log space: the end timestamp is the record's end LSN (`Clock::reserve`).

use crossbeam_utils::CachePadded;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// The global logical clock. Holds the last end timestamp handed out. Cloning shares it (the
/// ERMIA flusher reads it).
#[derive(Clone)]
pub(crate) struct Clock {
    now: Arc<CachePadded<AtomicU64>>,
}

impl Clock {
    pub fn new() -> Self {
        Clock {
            now: Arc::new(CachePadded::new(AtomicU64::new(1))),
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
    /// Draws `len ≥ 1` timestamps at once and returns the first: the caller's end timestamp
    /// is `first + len` (ERMIA: the log range `[first, first + len)` is its record).
    #[inline]
    pub fn reserve(&self, len: u64) -> u64 {
        self.now.fetch_add(len, Ordering::SeqCst)
    }
}
