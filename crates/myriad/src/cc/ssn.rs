//! SSN: the serial safety net on snapshot isolation (thesis §5.3.4; Wang, Johnson, Fekete and
//! Pandis, "The Serial Safety Net", DaMoN 2015).
//!
//! Transactions run as under `si`: reads at the begin timestamp, first-updater-wins on the
//! End field, no read validation. Every transaction T gets a commit stamp c(T) when it
//! commits (read-only ones too) and two stamps summarising its dependencies:
//! - η(T), the *pstamp*: the largest c(U) of a transaction U that must precede T and committed
//!   before it — the creator of a version T read or overwrote (wr, ww), or a reader of a
//!   version T overwrote (rw into T);
//! - π(T), the *sstamp*: the smallest π(U) of a transaction U that must follow T (T read a
//!   version U overwrote) and committed before it, or c(T) itself.
//!
//! T commits only if η(T) < π(T), the *exclusion window*: a dependency cycle always closes
//! with a transaction for which it fails, so this forbids every cycle (it also refuses some
//! histories that have none, far fewer than SSI's two-flag test). The stamps live in the
//! versions, so a committed transaction leaves nothing behind in the transaction table:
//! `ext_word(PSTAMP)` is the largest c of a committed reader (and of the creator), and
//! `ext_word(SSTAMP)` is π of the transaction that overwrote the version; `aux` is the
//! version's reader bitmap (below).
//!
//! **Parallel commit.** Several transactions may be in pre-commit at once; their commit
//! stamps decide who accounts for whom. A reader R and an overwriter U of the same version
//! with c(R) < c(U): U must see c(R) in η(U). R updates the version's pstamp *before* it
//! turns Committed, but it may not have done so when U looks. So each version also records
//! which transaction-table slots read it (ERMIA §3.6's reader bitmap: bit `slot mod 64`, set
//! on read, never cleared): U, after drawing c(U), waits out every slot of a set bit that is
//! in pre-commit with a smaller stamp, then reads the pstamp. Symmetrically R, meeting U's id
//! in the End field with c(U) < c(R), waits for U's outcome and then reads the sstamp, which
//! U stored before turning Committed. Every wait is for a smaller commit stamp, so none can
//! close a cycle of waits.
//!
//! **Phantoms.** What a scan observed as absent has no version to carry stamps. Each index has
//! a pstamp (`Table::scan_ts`) and a reader bitmap (`Table::scanners`), kept for scans and
//! point misses exactly as a version's are for reads: an inserter (or a writer that moves a
//! row to a new key) takes η from every index it entered. A scanner that would have to
//! follow a transaction that inserted into its range and committed first cannot learn that
//! transaction's π, so it aborts instead (`Phantom`): the MVOCC re-scan at the commit stamp,
//! counting only rows new to the range (rows that left it or changed are versions it read).
//!
//! **READ ONLY.** Under SSN the serial order is not the commit order, so a plain snapshot can
//! see a state no serial order produces (the read-only anomaly of SI). A READ ONLY
//! transaction is therefore tracked like any other; it skips nothing but the write checks.
//!
//! **ERMIA's SSI** (`ermia-ssi`, ERMIA §3.6) runs on the same machinery with other stamps;
//! its pre-commit test is in `ermia_ssi.rs`.
//! It looks only at anti-dependencies (rw edges) and aborts the pivot T2 of a dangerous
//! structure T1 → T2 → T3 in which T3 committed first (Cahill's condition):
//! - s1(T): the smallest commit stamp of a transaction that overwrote a version T read and
//!   committed before T (T → T3);
//! - rstamp: the largest commit stamp of a committed reader, per version (the pstamp word) and
//!   per index (`Table::scan_ts`); T, overwriting or inserting, aborts if a reader committed
//!   after T3 (rstamp ≥ s1: T1 → T → T3, T3 first);
//! - s2, per overwritten version: s1 of the transaction that overwrote it. A reader that
//!   finds the version overwritten by a transaction committed before it, with s2 set, is the
//!   T1 of a structure whose other two committed, T3 first: it aborts.
//!
//! **Cahill's SSI** (`ssi`) runs on the same machinery with two flags instead of stamps:
//! its pre-commit test is in `ssi.rs`. The shared pieces (`overwriter`, `successor`,
//! `for_overwritten_and_entered`, `finalize`, the stamp words) are here; `cc::stamp_test`
//! picks the pre-commit test.
//!
//! The end timestamp of a committed overwriter is its s1 contribution (ERMIA copies it into
//! the version because its TIDs are recycled; ours stay in the End field), so the two words
//! are rstamp and s2. ERMIA's safe retry and old-version read optimisation are in
//! `ermia_ssi.rs`.

use crate::error::AbortReason;
use crate::storage::Table;
use crate::txn::state::{TxnCtx, TABLE_SCAN};
use crate::txn::table::{bump, TxnId, TxnState, TxnTable};
use crate::version::{is_txn, Version, INFINITY};
use crossbeam_utils::Backoff;
use std::sync::atomic::{AtomicU64, Ordering};

/// The stamps of one transaction.
pub(crate) struct Stamps {
    /// SSN: η, the largest commit stamp of a predecessor seen so far (ERMIA-SSI: its
    /// rstamp, set at pre-commit).
    pub(crate) pstamp: u64,
    /// SSN: π, set at pre-commit (ERMIA-SSI: s1).
    pub(crate) sstamp: u64,
}

impl Stamps {
    /// The stamps of a transaction that has read nothing: η = 0, π = ∞.
    pub(crate) fn new() -> Self {
        Stamps {
            pstamp: 0,
            sstamp: u64::MAX,
        }
    }
}

/// Per-slot scratch of the commit.
#[derive(Default)]
pub(crate) struct SlotScratch {
    /// (table, index) pairs the transaction's writes entered.
    pub(crate) entered: Vec<(u32, u16)>,
}

/// `Version::ext_word` index of the pstamp (η of the version; ERMIA-SSI: rstamp).
pub(crate) const PSTAMP: usize = 0;
/// `Version::ext_word` index of the sstamp (π of the transaction that overwrote it;
/// ERMIA-SSI: its s1, the version's s2, 0 when unset).
pub(crate) const SSTAMP: usize = 1;

/// The reader-bitmap bit of transaction-table slot `slot`.
#[inline]
fn bit(slot: usize) -> u64 {
    1 << (slot % 64)
}

/// Sets our bit in a reader bitmap. The Acquire load pairs with whoever set the bit before
/// us, so the bit is ordered before our commit stamp draw either way.
#[inline]
fn mark(tx: &TxnCtx<'_>, bitmap: &AtomicU64) {
    let b = bit(tx.slot_idx);
    if bitmap.load(Ordering::Acquire) & b == 0 {
        bump(&tx.slot().stats.record_rmw, 1);
        bitmap.fetch_or(b, Ordering::SeqCst);
    }
}

/// A read of `v` (not our own version): η takes its creator's stamp, and the version learns
/// of our slot. The version goes to the read set (`Transaction::note_read`).
#[inline]
pub(crate) fn on_read(tx: &TxnCtx<'_>, stamps: &mut Stamps, v: &Version) {
    mark(tx, &v.aux);
    let b = v.begin.load(Ordering::Acquire);
    // A creator still post-processing committed at or before our snapshot: our begin
    // timestamp bounds its stamp from above (a larger η is only more careful).
    let c = if is_txn(b) { tx.begin_ts.get() } else { b };
    stamps.pstamp = stamps.pstamp.max(c);
}

/// A scan (or a point lookup that found nothing) of index `index` of `t`.
pub(crate) fn on_scan(tx: &TxnCtx<'_>, t: &Table, index: u16) {
    let i = if index == TABLE_SCAN {
        0
    } else {
        index as usize
    };
    mark(tx, &t.scanners[i]);
}

/// The transactions running in the slots of `bitmap`'s bits (slot `i` has bit `i mod 64`),
/// other than slot `me`'s, until `f` returns true (then true).
fn any_in_slots(txns: &TxnTable, me: usize, bitmap: u64, mut f: impl FnMut(TxnId) -> bool) -> bool {
    let n = txns.len();
    let mut bits = bitmap;
    while bits != 0 {
        let b = bits.trailing_zeros() as usize;
        bits &= bits - 1;
        for s in (b..n).step_by(64).filter(|&s| s != me) {
            let id = txns.slot(s).txn_id.load(Ordering::Acquire);
            if id != 0 && f(TxnId(id)) {
                return true;
            }
        }
    }
    false
}

/// Waits until no transaction in a slot of `bitmap`'s bits (other than ours) is in
/// pre-commit with a commit stamp below `c`: afterwards every such reader that committed
/// has raised the pstamp it protects.
fn wait_out_readers(txns: &TxnTable, me: usize, bitmap: u64, c: u64) {
    any_in_slots(txns, me, bitmap, |id| {
        let backoff = Backoff::new();
        loop {
            match txns.state_of(id) {
                TxnState::PreparingPending => backoff.snooze(),
                TxnState::Preparing(ts) if ts.get() < c => backoff.snooze(),
                _ => return false,
            }
        }
    });
}

/// Whether a slot of `v`'s reader bits (other than ours) runs a transaction that is still
/// in flight for a committer with stamp `c` — Active, or in pre-commit with a larger stamp
/// (call after `wait_out_readers`) — and that read `v`, as far as the slot's read filter
/// tells (`Slot::reads`: kept under `ermia-ssi` with safe retry). A bit says the slot read
/// `v` at some time, not that its current transaction did; the filter says which did, up
/// to its false positives. The answer errs towards yes (a false positive, or a slot whose
/// transaction changed between the loads); a reader whose filter store it does not see yet
/// is left to its own pre-commit test (`ermia_ssi::precommit`'s T1 case).
pub(crate) fn has_inflight_reader(txns: &TxnTable, me: usize, v: &Version, c: u64) -> bool {
    let addr = v as *const Version as usize;
    any_in_slots(txns, me, v.aux.load(Ordering::SeqCst), |id| {
        let running = match txns.state_of(id) {
            TxnState::Active | TxnState::PreparingPending => true,
            TxnState::Preparing(ts) => ts.get() > c,
            _ => false,
        };
        running && txns.slot(id.slot()).reads.may_contain(addr)
    })
}

/// Who overwrote a version we read, as seen by a transaction with commit stamp `c`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Overwriter {
    /// Nobody (or we ourselves, or a transaction that aborted).
    None,
    /// A transaction that committed with this stamp, below `c`. Its SSTAMP word is final.
    Before(u64),
    /// A transaction that is still running, or commits after us.
    Later,
}

/// The overwriter of `v`, waiting for the outcome of one that is in pre-commit with a
/// smaller stamp than `c`.
pub(crate) fn overwriter(tx: &TxnCtx<'_>, v: &Version, c: u64) -> Overwriter {
    let backoff = Backoff::new();
    let before = |ts: u64| {
        if ts < c {
            Overwriter::Before(ts)
        } else {
            Overwriter::Later
        }
    };
    loop {
        let e = v.end.load(Ordering::Acquire);
        if e == INFINITY {
            return Overwriter::None;
        }
        if !is_txn(e) {
            // Finalised after the overwriter stored the sstamp.
            return before(e);
        }
        let id = TxnId::from_word(e);
        if id == tx.id {
            return Overwriter::None;
        }
        match tx.db.txns.state_of(id) {
            TxnState::Aborted => return Overwriter::None,
            // Active: it draws its stamp after ours, and will see our bit.
            TxnState::Active => return Overwriter::Later,
            TxnState::Preparing(ts) if ts.get() > c => return Overwriter::Later,
            TxnState::Committed(ts) => return before(ts.get()),
            TxnState::PreparingPending | TxnState::Preparing(_) => backoff.snooze(),
            // The field is being finalised: read it again.
            TxnState::Terminated => backoff.spin(),
        }
    }
}

/// The commit stamp of the transaction that overwrote `v`, if it committed before stamp `c`.
pub(crate) fn successor(tx: &TxnCtx<'_>, v: &Version, c: u64) -> Option<u64> {
    match overwriter(tx, v, c) {
        Overwriter::Before(ts) => Some(ts),
        _ => None,
    }
}

/// SSN's pre-commit test of a transaction that drew commit stamp `c` and passed its other
/// checks (called after a fence, `cc::stamp_test`): computes π and η and applies the exclusion
/// window.
pub(crate) fn precommit(
    tx: &TxnCtx<'_>,
    stamps: &mut Stamps,
    scratch: &mut SlotScratch,
    c: u64,
) -> Result<(), AbortReason> {
    let (mut pi, mut eta) = (stamps.sstamp.min(c), stamps.pstamp);
    for &v in &tx.sets.read_set {
        // SAFETY: versions we read stay allocated while we are registered (GC watermark).
        let v = unsafe { &*v };
        if successor(tx, v, c).is_some() {
            pi = pi.min(v.ext_word(SSTAMP).load(Ordering::Acquire));
        }
    }
    for_overwritten_and_entered(tx, scratch, c, |tx, touched| match touched {
        Touched::Overwritten(o) => {
            eta = eta.max(o.ext_word(PSTAMP).load(Ordering::SeqCst));
            // ww: the creator precedes us.
            let b = o.begin.load(Ordering::Acquire);
            eta = eta.max(if is_txn(b) { tx.begin_ts.get() } else { b });
        }
        Touched::Entered(stamp) => eta = eta.max(stamp),
    });
    stamps.sstamp = pi;
    stamps.pstamp = eta;
    // The exclusion window.
    if pi <= eta {
        return Err(AbortReason::Exclusion);
    }
    Ok(())
}

/// What a writer's stamps are taken from (`for_overwritten_and_entered`).
pub(crate) enum Touched<'a> {
    /// A version the transaction overwrote.
    Overwritten(&'a Version),
    /// The pstamp (rstamp) of an index the transaction's writes entered.
    Entered(u64),
}

/// Calls `f` for every version `tx` overwrote and for every index its writes entered (all of
/// a new row's, the secondary indexes whose key an update changed), each after waiting out
/// the readers in pre-commit with a stamp below `c`, so that the pstamp (rstamp) read covers
/// every reader that commits before us.
pub(crate) fn for_overwritten_and_entered(
    tx: &TxnCtx<'_>,
    scratch: &mut SlotScratch,
    c: u64,
    mut f: impl FnMut(&TxnCtx<'_>, Touched<'_>),
) {
    // `precommit` fenced after the stamp draw: the bits and stamps read here are current.
    let txns = &tx.db.txns;
    let me = tx.slot_idx;
    let mut entered = std::mem::take(&mut scratch.entered);
    entered.clear();
    let (mut ob, mut nb) = (Vec::new(), Vec::new());
    for w in &tx.sets.write_set {
        let t = tx.db.table_by_id(w.table);
        // SAFETY: our own version and the version we hold the write lock on; pinned.
        let (new, old) = unsafe { (&*w.new, w.old.as_ref()) };
        if let Some(o) = old {
            wait_out_readers(txns, me, o.aux.load(Ordering::SeqCst), c);
            f(tx, Touched::Overwritten(o));
        }
        if new.is_tombstone() {
            continue;
        }
        // Indexes the row entered: all of them for a new (or revived) row, else the
        // secondary indexes whose key changed.
        let s = &t.schema;
        // Both rows materialised once per write (a copy under in-place storage, into
        // buffers reused across the write set).
        let rows = match old {
            Some(o) if !o.is_tombstone() && t.indexes.len() > 1 => {
                Some((t.row(o, &mut ob), t.row(new, &mut nb)))
            }
            _ => None,
        };
        for i in 0..t.indexes.len() {
            let moved = match (old, rows) {
                (Some(o), _) if o.is_tombstone() => true,
                (None, _) => true,
                (Some(_), None) => false,
                (Some(_), Some((or, nr))) => {
                    i > 0
                        && s.indexes[i]
                            .columns
                            .iter()
                            .any(|&col| s.read_column(or, col) != s.read_column(nr, col))
                }
            };
            if moved && !entered.contains(&(w.table, i as u16)) {
                entered.push((w.table, i as u16));
            }
        }
    }
    for &(table, i) in &entered {
        let t = tx.db.table_by_id(table);
        wait_out_readers(txns, me, t.scanners[i as usize].load(Ordering::SeqCst), c);
        f(
            tx,
            Touched::Entered(t.scan_ts[i as usize].load(Ordering::SeqCst)),
        );
    }
    scratch.entered = entered;
}

/// After a successful pre-commit test, before the transaction turns Committed: leaves its
/// stamps in what it read, overwrote, created and scanned. `stamps.sstamp` goes into every
/// version it overwrote (SSN: π; ERMIA-SSI: s1, 0 if unset; SSI: the outConflict flag);
/// `creator_stamp` (SSN): `c` goes into every version it created, whose next overwriter
/// takes η from it.
pub(crate) fn finalize(tx: &TxnCtx<'_>, stamps: &Stamps, c: u64, creator_stamp: bool) {
    let mut rmw = 0;
    let me = tx.id.word();
    for &v in &tx.sets.read_set {
        // SAFETY: as in `precommit`.
        let v = unsafe { &*v };
        // A version we also overwrote: its pstamp is read only by its overwriter's pre-commit
        // test, and we are its one overwriter (we hold its End field until we turn
        // Committed), past that test. Raising it would be a shared RMW for no reader.
        if v.end.load(Ordering::Relaxed) == me {
            continue;
        }
        let p = v.ext_word(PSTAMP);
        if p.load(Ordering::Relaxed) < c {
            p.fetch_max(c, Ordering::SeqCst);
            rmw += 1;
        }
    }
    for w in &tx.sets.write_set {
        // SAFETY: our own version (not yet visible) and the version we hold the lock on.
        unsafe {
            if creator_stamp {
                // Our successors by ww: the next overwriter takes η from it.
                (*w.new).ext_word(PSTAMP).store(c, Ordering::Release);
            }
            if let Some(o) = w.old.as_ref() {
                o.ext_word(SSTAMP).store(stamps.sstamp, Ordering::Release);
            }
        }
    }
    for s in &tx.sets.scan_set {
        let t = tx.db.table_by_id(s.table);
        let i = if s.index == TABLE_SCAN {
            0
        } else {
            s.index as usize
        };
        let p = &t.scan_ts[i];
        if p.load(Ordering::Relaxed) < c {
            p.fetch_max(c, Ordering::SeqCst);
            rmw += 1;
        }
    }
    bump(&tx.slot().stats.record_rmw, rmw);
}
