//! Version visibility (Hekaton §2.5, Tables 1 and 2), shared by the multi-version protocols.
//!
//! Deviation from the paper, on purpose: until commit dependencies exist, a reader that meets a
//! Preparing transaction whose end timestamp is below its read time *waits* for the outcome
//! instead of reading or ignoring speculatively (the paper's "safe approach", §2.5). Table 2 as
//! printed says an End field holding an Active transaction's id makes V visible "only if V was
//! created by T"; taken literally that hides a row from every other reader while a delete or
//! update is still uncommitted, and shows a transaction the row it deleted itself. The correct
//! rule, implemented here: V is invisible only to TE itself, visible to everyone else.

use crate::txn::table::{TxnId, TxnState, TxnTable};
use crate::version::{is_txn, Version, INFINITY};
use crossbeam_utils::Backoff;
use std::sync::atomic::Ordering;

/// Resolves transaction ids in Begin/End fields.
pub(crate) struct Resolver<'a> {
    pub txns: &'a TxnTable,
    pub me: TxnId,
}

/// A Begin or End field, resolved.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Field {
    /// A (possibly not yet finalised) committed timestamp.
    Ts(u64),
    /// Written by the reader itself.
    Mine,
    /// Written by a transaction still Active (its end timestamp, if any, is later than any
    /// read time taken before now).
    OtherActive,
    /// Written by a transaction that aborted.
    Aborted,
}

impl Resolver<'_> {
    /// Resolves a field word, waiting out Preparing writers whose end timestamp is ≤ `rt`.
    #[inline]
    fn resolve(&self, field: &std::sync::atomic::AtomicU64, rt: u64) -> Field {
        let backoff = Backoff::new();
        loop {
            let w = field.load(Ordering::Acquire);
            if !is_txn(w) {
                return Field::Ts(w);
            }
            let t = TxnId::from_word(w);
            if t == self.me {
                return Field::Mine;
            }
            match self.txns.state_of(t) {
                TxnState::Active => return Field::OtherActive,
                TxnState::Preparing(ts) if ts > rt => return Field::OtherActive,
                TxnState::Committed(ts) => return Field::Ts(ts),
                TxnState::Aborted => return Field::Aborted,
                // Preparing with ts ≤ rt: the outcome decides visibility; wait for it.
                // PreparingPending: the end timestamp is about to be published; wait.
                // Terminated: the field has been finalised; reread it.
                TxnState::Preparing(_) | TxnState::PreparingPending | TxnState::Terminated => {
                    backoff.snooze()
                }
            }
        }
    }

    /// Is `v` visible to this transaction as of read time `rt`?
    #[inline]
    pub fn visible(&self, v: &Version, rt: u64) -> bool {
        match self.resolve(&v.begin, rt) {
            Field::Mine => {
                // Our own version: visible unless we superseded it ourselves (Table 1, row 1).
                let e = v.end.load(Ordering::Acquire);
                e == INFINITY
            }
            Field::Ts(b) => b <= rt && self.end_after(v, rt),
            Field::OtherActive | Field::Aborted => false,
        }
    }

    /// Given that V began at or before `rt`, does it end after `rt`? (Table 2.)
    #[inline]
    fn end_after(&self, v: &Version, rt: u64) -> bool {
        match self.resolve(&v.end, rt) {
            Field::Ts(e) => rt < e,
            Field::Mine => false,
            Field::OtherActive | Field::Aborted => true,
        }
    }

    /// Read validation (Hekaton §3.2): is `v`, which was visible at our begin time, still
    /// visible at our end timestamp `end_ts`? A version we ourselves superseded counts as
    /// still visible: we hold its write lock.
    pub fn still_visible(&self, v: &Version, end_ts: u64) -> bool {
        match self.resolve(&v.end, end_ts) {
            Field::Ts(e) => end_ts < e,
            Field::Mine | Field::OtherActive | Field::Aborted => true,
        }
    }

    /// The version of the chain starting at `head` that is visible at `rt`, ignoring our own
    /// uncommitted writes when `skip_own` (used by the phantom re-check).
    pub fn visible_in_chain(&self, head: *const Version, rt: u64, skip_own: bool) -> *const Version {
        let mut v = head;
        while !v.is_null() {
            // SAFETY: caller is pinned; chain versions reachable from a live head are not freed
            // while pinned.
            let r = unsafe { &*v };
            if skip_own {
                let b = self.resolve(&r.begin, rt);
                let ok = match b {
                    Field::Ts(b) => {
                        b <= rt
                            && match self.resolve(&r.end, rt) {
                                Field::Ts(e) => rt < e,
                                Field::Mine | Field::OtherActive | Field::Aborted => true,
                            }
                    }
                    _ => false,
                };
                if ok {
                    return v;
                }
            } else if self.visible(r, rt) {
                return v;
            }
            v = r.next.load(Ordering::Acquire);
        }
        std::ptr::null()
    }
}
