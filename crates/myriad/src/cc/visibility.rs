//! Version visibility (Hekaton §2.5, Tables 1 and 2), shared by the multi-version protocols.
//!
//! A reader that meets a Preparing transaction whose end timestamp is at or below its read
//! time either reads or ignores the version *speculatively* and takes a commit dependency on
//! that transaction (Hekaton §2.5, §2.7; `Resolver::speculate`, MVOCC and SI), or waits for
//! the outcome (the paper's "safe approach"; the other protocols, checkpoints and replay).
//!
//! Deviation from the paper, on purpose: Table 2 as printed says an End field holding an
//! Active transaction's id makes V visible "only if V was created by T"; taken literally that
//! hides a row from every other reader while a delete or update is still uncommitted, and
//! shows a transaction the row it deleted itself. The correct rule, implemented here: V is
//! invisible only to TE itself, visible to everyone else.

use crate::timestamp::Timestamp;
use crate::txn::table::{TxnId, TxnState, TxnTable};
use crate::version::{is_txn, Version, INFINITY};
use crossbeam_utils::Backoff;
use std::sync::atomic::Ordering;

/// Resolves transaction ids in Begin/End fields.
pub(crate) struct Resolver<'a> {
    pub txns: &'a TxnTable,
    pub me: TxnId,
    /// No-wait mode (MVTO, thesis §5.3.1: "a transaction that attempts to read ... a version
    /// whose write lock is held by another transaction is aborted"): where the outcome of a
    /// Preparing transaction would be waited for, the flag is set instead and the field
    /// resolves as Active; the caller must then abort. `None`: wait.
    pub blocked: Option<&'a std::cell::Cell<bool>>,
    /// Commit dependencies (Hekaton §2.7): where the outcome of a Preparing transaction
    /// would be waited for, assume it commits, register a dependency on it and go on. Set
    /// when a dependency is taken (the transaction must then stay pinned: the version it
    /// read may be rolled back and freed). `None`: wait.
    pub speculate: Option<&'a std::cell::Cell<bool>>,
    /// Partial-order timestamps, at commit (`mvocc::unique_holder` as of the end timestamp):
    /// a writer Preparing at exactly `rt` is a member of our own commit group, which may be
    /// waiting for us in turn; instead of waiting, the flag is set and the field resolves as
    /// Active. The caller must then abort. `None`: wait (end timestamps are distinct).
    pub same_group: Option<&'a std::cell::Cell<bool>>,
}

/// A Begin or End field, resolved.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Field {
    /// A (possibly not yet finalised) committed timestamp.
    Ts(Timestamp),
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
    /// The common case, a timestamp, is inlined into every visibility test; a transaction
    /// id goes to [`Self::resolve_txn`] (kept out of line so the callers stay small).
    #[inline(always)]
    fn resolve(&self, field: &std::sync::atomic::AtomicU64, rt: Timestamp) -> Field {
        let w = field.load(Ordering::Acquire);
        if !is_txn(w) {
            return Field::Ts(Timestamp::new(w));
        }
        self.resolve_txn(field, w, rt)
    }

    /// [`Self::resolve`] of a field that held the transaction id word `w` when read.
    #[inline(never)]
    fn resolve_txn(&self, field: &std::sync::atomic::AtomicU64, w: u64, rt: Timestamp) -> Field {
        let backoff = Backoff::new();
        let mut waited = false;
        let mut w = w;
        loop {
            if !is_txn(w) {
                return Field::Ts(Timestamp::new(w));
            }
            let t = TxnId::from_word(w);
            if t == self.me {
                return Field::Mine;
            }
            match self.txns.state_of(t) {
                TxnState::Active => return Field::OtherActive,
                TxnState::Preparing(ts) if ts > rt => return Field::OtherActive,
                TxnState::Preparing(ts) if ts == rt && self.same_group.is_some() => {
                    if let Some(f) = self.same_group {
                        f.set(true);
                    }
                    return Field::OtherActive;
                }
                TxnState::Committed(ts) => return Field::Ts(ts),
                TxnState::Aborted => return Field::Aborted,
                // Preparing with ts ≤ rt: the outcome decides visibility; wait for it.
                // PreparingPending: the end timestamp is about to be published; wait.
                // Terminated: the field has been finalised; reread it.
                TxnState::Terminated => backoff.spin(),
                TxnState::Preparing(ts) if self.speculate.is_some() => {
                    // Speculative read (Begin) or ignore (End), valid if `t` commits.
                    if self.txns.depend(self.me, t) {
                        if let Some(took) = self.speculate {
                            took.set(true);
                        }
                        return Field::Ts(ts);
                    }
                    // It has reported or moved on since: its state is final; reread.
                }
                TxnState::Preparing(_) | TxnState::PreparingPending => {
                    if let Some(b) = self.blocked {
                        b.set(true);
                        return Field::OtherActive;
                    }
                    if !waited {
                        waited = true;
                        let stats = &self.txns.slot(self.me.slot()).stats;
                        crate::txn::table::bump(&stats.preparing_waits, 1);
                    }
                    backoff.snooze()
                }
            }
            w = field.load(Ordering::Acquire);
        }
    }

    /// Is `v` visible to this transaction as of read time `rt`?
    #[inline]
    pub fn visible(&self, v: &Version, rt: Timestamp) -> bool {
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
    fn end_after(&self, v: &Version, rt: Timestamp) -> bool {
        match self.resolve(&v.end, rt) {
            Field::Ts(e) => rt < e,
            Field::Mine => false,
            Field::OtherActive | Field::Aborted => true,
        }
    }

    /// Read validation (Hekaton §3.2): is `v`, which was visible at our begin time, still
    /// visible at our end timestamp `end_ts`? A version we ourselves superseded counts as
    /// still visible: we hold its write lock.
    pub fn still_visible(&self, v: &Version, end_ts: Timestamp) -> bool {
        match self.resolve(&v.end, end_ts) {
            Field::Ts(e) => end_ts < e,
            Field::Mine | Field::OtherActive | Field::Aborted => true,
        }
    }

    /// The version of the chain starting at `head` that is visible at `rt`, ignoring our own
    /// uncommitted writes when `skip_own` (used by the phantom re-check).
    pub fn visible_in_chain(
        &self,
        head: *const Version,
        rt: Timestamp,
        skip_own: bool,
    ) -> *const Version {
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
            #[cfg(test)]
            crate::txn::tests::pause_point(crate::txn::tests::Pause::ChainStep);
            v = r.next.load(Ordering::Acquire);
        }
        std::ptr::null()
    }
}

#[cfg(test)]
mod tests {
    //! Every row of Hekaton Tables 1 and 2, plus the waiting cases.
    use super::*;
    use crate::version::INFINITY;
    use std::sync::atomic::Ordering;
    use std::time::Duration;

    struct Fixture {
        txns: TxnTable,
        me: TxnId,
        other: TxnId,
    }

    /// A resolver that waits out Preparing writers (no commit dependencies).
    fn waiting(f: &Fixture) -> Resolver<'_> {
        Resolver {
            txns: &f.txns,
            me: f.me,
            blocked: None,
            speculate: None,
            same_group: None,
        }
    }

    fn fixture() -> Fixture {
        let txns = TxnTable::new(4);
        let me = txns.slot(0).start(0);
        let other = txns.slot(1).start(1);
        Fixture { txns, me, other }
    }

    /// A test-owned version, freed on drop.
    struct Owned(*mut Version);
    impl std::ops::Deref for Owned {
        type Target = Version;
        fn deref(&self) -> &Version {
            // SAFETY: allocated by Version::alloc and owned by this value.
            unsafe { &*self.0 }
        }
    }
    impl Drop for Owned {
        fn drop(&mut self) {
            // SAFETY: allocated by Version::alloc, never shared beyond the test.
            unsafe { Version::free(self.0) }
        }
    }

    fn version(begin: u64, end: u64) -> Owned {
        let v = Owned(Version::alloc(begin, 8, std::ptr::null_mut()).as_ptr());
        v.end.store(end, Ordering::Relaxed);
        v
    }

    fn free(v: Owned) {
        drop(v)
    }

    fn check(f: &Fixture, begin: u64, end: u64, rt: u64) -> bool {
        let v = version(begin, end);
        let r = waiting(f).visible(&v, Timestamp::new(rt));
        free(v);
        r
    }

    #[test]
    fn timestamps_only() {
        let f = fixture();
        assert!(check(&f, 5, INFINITY, 5));
        assert!(check(&f, 5, 10, 9));
        assert!(!check(&f, 5, 10, 10));
        assert!(!check(&f, 5, 10, 4));
        // An aborted version has Begin = INFINITY and is visible to no one.
        assert!(!check(&f, INFINITY, INFINITY, u64::MAX >> 2));
    }

    #[test]
    fn table1_begin_holds_txn_id() {
        let f = fixture();
        let other = f.txns.slot(1);
        // Active, TB = T: visible iff End is infinity.
        assert!(check(&f, f.me.word(), INFINITY, 3));
        assert!(!check(&f, f.me.word(), f.me.word(), 3));
        // Active, TB != T: invisible.
        assert!(!check(&f, f.other.word(), INFINITY, 100));
        // Preparing with TS > RT: invisible (it will begin after our read time).
        other.set_preparing(Timestamp::new(50));
        assert!(!check(&f, f.other.word(), INFINITY, 40));
        // Committed: use TS as the begin time.
        other.set_committed(Timestamp::new(50));
        assert!(check(&f, f.other.word(), INFINITY, 50));
        assert!(!check(&f, f.other.word(), INFINITY, 49));
        // Aborted: garbage, invisible.
        other.set_aborted();
        assert!(!check(&f, f.other.word(), INFINITY, 100));
    }

    #[test]
    fn table1_terminated_rereads_field() {
        let f = fixture();
        let other = f.txns.slot(1);
        let v = version(f.other.word(), INFINITY);
        other.set_committed(Timestamp::new(7));
        // Post-processing finalises the field, then the slot terminates.
        v.begin.store(7, Ordering::Release);
        other.terminate();
        assert!(waiting(&f).visible(&v, Timestamp::new(8)));
        free(v);
    }

    #[test]
    fn table2_end_holds_txn_id() {
        let f = fixture();
        let other = f.txns.slot(1);
        // Active TE != T: V is visible (an uncommitted update/delete is not seen).
        assert!(check(&f, 5, f.other.word(), 10));
        // Active TE == T: we superseded V ourselves; invisible to us.
        assert!(!check(&f, 5, f.me.word(), 10));
        // Preparing TE with TS > RT: visible.
        other.set_preparing(Timestamp::new(20));
        assert!(check(&f, 5, f.other.word(), 10));
        // Committed TE: use TS as the end time.
        other.set_committed(Timestamp::new(20));
        assert!(check(&f, 5, f.other.word(), 19));
        assert!(!check(&f, 5, f.other.word(), 20));
        // Aborted TE: V is visible.
        other.set_aborted();
        assert!(check(&f, 5, f.other.word(), 30));
    }

    /// A version whose End (or Begin) holds the other transaction, Preparing at 20.
    fn written_by_preparing(f: &Fixture, field_is_end: bool) -> Owned {
        f.txns.slot(1).set_preparing(Timestamp::new(20));
        if field_is_end {
            version(5, f.other.word())
        } else {
            version(f.other.word(), INFINITY)
        }
    }

    /// Preparing with TS < RT, without commit dependencies: the reader waits for the outcome.
    fn preparing_then(commit: bool, field_is_end: bool) -> bool {
        let f = fixture();
        let other = f.txns.slot(1);
        let v = written_by_preparing(&f, field_is_end);
        std::thread::scope(|s| {
            s.spawn(|| {
                std::thread::sleep(Duration::from_millis(50));
                if commit {
                    other.set_committed(Timestamp::new(20));
                } else {
                    other.set_aborted();
                }
            });
            let r = waiting(&f).visible(&v, Timestamp::new(30));
            free(v);
            r
        })
    }

    #[test]
    fn preparing_below_read_time_waits_for_outcome() {
        // Begin field: visible iff the writer commits.
        assert!(preparing_then(true, false));
        assert!(!preparing_then(false, false));
        // End field: invisible iff the writer commits (an uncommitted delete is never seen).
        assert!(!preparing_then(true, true));
        assert!(preparing_then(false, true));
    }

    #[test]
    fn preparing_pending_is_never_treated_as_active() {
        // The trap: a writer that published Preparing but has not yet stored its end timestamp
        // may draw one below our read time; the reader must wait, not treat it as Active.
        let f = fixture();
        let other = f.txns.slot(1);
        other.set_preparing_pending();
        let v = version(f.other.word(), INFINITY);
        let seen = std::thread::scope(|s| {
            s.spawn(|| {
                std::thread::sleep(Duration::from_millis(50));
                other.set_preparing(Timestamp::new(10));
                std::thread::sleep(Duration::from_millis(20));
                other.set_committed(Timestamp::new(10));
            });
            waiting(&f).visible(&v, Timestamp::new(30))
        });
        assert!(seen, "a commit at ts 10 must be visible at read time 30");
        free(v);
    }

    #[test]
    fn still_visible_for_read_validation() {
        let f = fixture();
        let r = waiting(&f);
        let v = version(5, INFINITY);
        assert!(r.still_visible(&v, Timestamp::new(100)));
        v.end.store(f.me.word(), Ordering::Relaxed); // we updated it: fine
        assert!(r.still_visible(&v, Timestamp::new(100)));
        v.end.store(50, Ordering::Relaxed); // someone committed an update at 50 < 100
        assert!(!r.still_visible(&v, Timestamp::new(100)));
        free(v);
    }

    /// Preparing with TS < RT, with commit dependencies (Hekaton §2.5, §2.7): no wait; the
    /// version is read (Begin) or ignored (End) as if the writer committed, one dependency is
    /// registered however often the writer is met, and the writer's report resolves it —
    /// with AbortNow if it aborted.
    #[test]
    fn preparing_below_read_time_is_read_or_ignored_speculatively() {
        for (commit, field_is_end) in [(true, false), (false, false), (true, true), (false, true)] {
            let f = fixture();
            let other = f.txns.slot(1);
            let v = written_by_preparing(&f, field_is_end);
            let took = std::cell::Cell::new(false);
            let r = Resolver {
                speculate: Some(&took),
                ..waiting(&f)
            };
            assert_eq!(r.visible(&v, Timestamp::new(30)), !field_is_end);
            assert!(took.get());
            assert_eq!(f.txns.slot(0).deps.pending(), (1, false));
            assert_eq!(r.visible(&v, Timestamp::new(30)), !field_is_end);
            assert_eq!(f.txns.slot(0).deps.pending(), (1, false));
            if commit {
                other.set_committed(Timestamp::new(20));
            } else {
                other.set_aborted();
            }
            f.txns.report(1, f.other, commit);
            assert_eq!(f.txns.slot(0).deps.pending(), (0, !commit));
            // Once the outcome is final it is read directly, without a dependency.
            took.set(false);
            assert_eq!(r.visible(&v, Timestamp::new(30)), commit != field_is_end);
            assert!(!took.get());
            assert_eq!(f.txns.slot(0).stats.commit_deps.load(Ordering::Relaxed), 1);
            free(v);
        }
    }

    /// A writer that already reported is never registered with, even while its state still
    /// reads Preparing to a racing reader; nor is one that is Active or Committed.
    #[test]
    fn dependencies_are_taken_only_on_an_unreported_preparing_writer() {
        let f = fixture();
        let other = f.txns.slot(1);
        assert!(!f.txns.depend(f.me, f.other), "Active");
        other.set_preparing(Timestamp::new(20));
        f.txns.report(1, f.other, true);
        assert!(!f.txns.depend(f.me, f.other), "reported");
        other.set_committed(Timestamp::new(20));
        assert!(!f.txns.depend(f.me, f.other), "Committed");
        assert_eq!(f.txns.slot(0).deps.pending(), (0, false));
    }
}
