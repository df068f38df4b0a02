//! The `global-counter` timestamp source (thesis §3.4.3): one shared counter holding the last
//! end timestamp handed out. A read time is a load, an end timestamp a fetch-add.

use crossbeam_utils::CachePadded;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// The global logical clock. Cloning shares it (the ERMIA flusher and the vacuum threads
/// read it).
#[derive(Clone)]
pub(crate) struct GlobalCounter {
    now: Arc<CachePadded<AtomicU64>>,
}

impl GlobalCounter {
    pub(crate) fn new() -> Self {
        GlobalCounter {
            now: Arc::new(CachePadded::new(AtomicU64::new(1))),
        }
    }
    /// The last end timestamp handed out.
    #[inline]
    pub(crate) fn now(&self) -> u64 {
        self.now.load(Ordering::SeqCst)
    }
    /// Moves the counter forward to at least `ts`.
    pub(crate) fn advance_to(&self, ts: u64) {
        self.now.fetch_max(ts, Ordering::SeqCst);
    }
    /// Draws a fresh end timestamp.
    #[inline]
    pub(crate) fn next_end_ts(&self) -> u64 {
        self.now.fetch_add(1, Ordering::SeqCst) + 1
    }
    /// Draws `len` timestamps at once and returns the first.
    #[inline]
    pub(crate) fn reserve(&self, len: u64) -> u64 {
        self.now.fetch_add(len, Ordering::SeqCst)
    }
}
