//! Timestamps (thesis §3.4.3). The seam is `TimestampPolicy` in `Config`, which picks the
//! `Source` the database holds (`Shared::clock`, built by `TimestampPolicy::source`);
//! every read time, end timestamp, log
//! reservation and recovery advance goes through it. A new source (POMVCC's partial-order
//! timestamps) is a module here plus one arm in each of `Source`'s methods and in
//! `TimestampPolicy::source`; every `match` on it is exhaustive.
//!
//! The one source built is `global_counter`: a begin (read) timestamp is a load, an end
//! (commit) timestamp a fetch-add — the one shared read-modify-write an MVOCC update
//! transaction needs, counted in every report. With ERMIA's log manager (`log/ermia.rs`)
//! the same add also reserves the commit record's log space: the end timestamp is the
//! record's end LSN (`Source::reserve`). `silo-epoch` and `partial-order` are named in
//! `TimestampPolicy` but not built: `TimestampPolicy::source` (and so `Config::validate`)
//! refuses them.

mod global_counter;

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

/// Where read times and end timestamps come from (`TimestampPolicy::source` in `config.rs`
/// builds it: this layer does not import the configuration). Cloning shares the source (the
/// ERMIA flusher and the vacuum threads read it).
#[derive(Clone)]
pub(crate) enum Source {
    /// One global counter (`global_counter`).
    GlobalCounter(GlobalCounter),
}

impl Default for Source {
    /// The default policy's source, `global-counter`.
    fn default() -> Self {
        Source::GlobalCounter(GlobalCounter::new())
    }
}

impl Source {
    /// A read time: every transaction that drew an end timestamp ≤ this has published at
    /// least the Preparing state.
    #[inline]
    pub(crate) fn now(&self) -> Timestamp {
        match self {
            Source::GlobalCounter(c) => Timestamp(c.now()),
        }
    }

    /// Moves the source forward to at least `ts` (recovery continues the old clock).
    pub(crate) fn advance_to(&self, ts: Timestamp) {
        match self {
            Source::GlobalCounter(c) => c.advance_to(ts.0),
        }
    }

    /// Draws a fresh end timestamp, above every read time handed out before.
    #[inline]
    pub(crate) fn next_end_ts(&self) -> Timestamp {
        match self {
            Source::GlobalCounter(c) => Timestamp(c.next_end_ts()),
        }
    }

    /// Draws `len ≥ 1` timestamps at once and returns the first: the caller's end timestamp
    /// is `first + len` (ERMIA: the log range `[first, first + len)` is its record).
    #[inline]
    pub(crate) fn reserve(&self, len: u64) -> u64 {
        match self {
            Source::GlobalCounter(c) => c.reserve(len),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Source, Timestamp};
    use crate::config::TimestampPolicy;

    /// Every policy either builds a source whose end timestamps rise above its read times,
    /// or is refused as unsupported (no policy is silently served by another's source).
    #[test]
    fn every_policy_builds_a_source_or_is_refused() {
        for &p in TimestampPolicy::ALL {
            match p.source() {
                Ok(s) => {
                    let rt = s.now();
                    let end = s.next_end_ts();
                    assert!(end > rt, "{p:?}: end {end} ≤ read time {rt}");
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
