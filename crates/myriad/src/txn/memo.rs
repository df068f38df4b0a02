//! `healing`'s memoized re-execution of point UPDATEs (spec A.6; `cc::healing::Memo` says
//! what is kept and why it is sound): the transaction's side of recording an UPDATE of a
//! healable call, and of reusing it in a heal. The procedure's side (which operation, its
//! inputs) is `procedure::memo`.
//!
//! An UPDATE is recorded only when a heal could take its buffered version as it is: it made
//! exactly one write record, replacing a committed record (not a row this transaction wrote
//! or inserted before, which changes in place), on a table without secondary indexes whose
//! versions hold their rows (the version is then exactly the new row, and keeping it leaves
//! no index entry behind), and no predicate read (a miss, which the commit re-checks).

use super::Transaction;
use crate::storage::{Table, TupleId};
use crate::version::Version;
use std::ptr;

/// Where the sets stood before an operation ran (`Transaction::memo_mark`).
#[derive(Clone, Copy)]
pub(crate) struct MemoMark {
    writes: usize,
    scans: usize,
    started: u64,
}

impl<'db> Transaction<'db> {
    /// Whether the call's UPDATEs are recorded for a heal to reuse (a healable call with
    /// `Config::heal_access_cache`).
    #[inline]
    pub(crate) fn memo_on(&self) -> bool {
        self.healable && self.local.cc.healing.memo.on
    }

    /// Which run of the call this is: 0 the first, n after n heals.
    #[inline]
    pub(crate) fn memo_run(&self) -> u32 {
        self.heals
    }

    /// The sets before an operation runs.
    #[inline]
    pub(crate) fn memo_mark(&self) -> MemoMark {
        let s = &self.st.sets;
        MemoMark {
            writes: s.write_set.len(),
            scans: s.scan_set.len(),
            started: self.writes,
        }
    }

    /// After an UPDATE of table `t` ran (since `m`): records its buffered version if a heal
    /// could reuse it (see the module doc), in the current generation, and returns where.
    /// Whether its row still stands in the record it replaced is `memo_reuse`'s to check.
    #[inline]
    pub(crate) fn memo_capture(&mut self, m: MemoMark, t: &Table) -> Option<u32> {
        let s = &self.st.sets;
        if s.write_set.len() != m.writes + 1
            || self.writes != m.started + 1
            || s.scan_set.len() != m.scans
            || t.indexes.len() > 1
            || t.rows_copied()
            || self.is_doomed()
            || self.heal_requested
        {
            return None;
        }
        let w = s.write_set.last()?;
        if w.old.is_null() || w.table != t.id {
            return None;
        }
        let memo = &mut self.local.cc.healing.memo;
        let g = &mut memo.writes[memo.cur];
        g.push(w.new);
        Some(g.len() as u32 - 1)
    }

    /// The record row `tid` of `t` stands in now (null: none).
    fn memo_head(t: &Table, tid: TupleId) -> *mut Version {
        t.entry(tid).map_or(ptr::null_mut(), |e| t.newest(e))
    }

    /// During a heal: takes the UPDATE the previous run recorded at `at` as done again, if
    /// its buffered version (kept since the heal began) still replaces its row's record,
    /// and this run has not written the row. The version goes back into the write set and
    /// into the history being recorded, and into the current generation (where is
    /// returned). `None`: the UPDATE must run.
    pub(crate) fn memo_reuse(&mut self, at: u32) -> Option<u32> {
        let db = self.st.db;
        let memo = &self.local.cc.healing.memo;
        let n = *memo.writes[memo.cur ^ 1].get(at as usize)?;
        if n.is_null() {
            return None;
        }
        let i = memo.kept.iter().position(|w| w.new == n)?;
        let w = memo.kept[i];
        let t = db.table_by_id(w.table);
        if t.db_id != db.id
            || t.state.load(std::sync::atomic::Ordering::SeqCst) != crate::storage::table::LIVE
            || !ptr::eq(Self::memo_head(t, w.tid), w.old)
            || self.st.pending_write(w.table, w.tid).is_some()
        {
            return None;
        }
        // Reused: what follows puts back what the recorded run had.
        let memo = &mut self.local.cc.healing.memo;
        memo.kept.remove(i);
        let g = &mut memo.writes[memo.cur];
        g.push(w.new);
        let out = g.len() as u32 - 1;
        self.st.sets.write_set.push(w);
        self.writes += 1;
        if let Some(rec) = self.recording.as_mut() {
            // SAFETY: `old` is the row's record (checked above; we have not re-pinned since
            // the UPDATE read it, `may_repin`) and `new` our buffered version of it.
            let (old, new) = unsafe { (&*w.old, &*w.new) };
            let mut rb = Vec::new();
            rec.note_read(&t.schema, t.id, old, t.row(old, &mut rb), &db.txns);
            rec.note_write(
                &t.schema,
                t.id,
                new.data(),
                crate::history::WriteKind::Update,
            );
        }
        super::bump(&self.slot().stats.heal_ops_reused, 1);
        Some(out)
    }

    /// A heal's run ran an UPDATE it could not reuse (counted beside `heal_ops_reused`).
    #[inline]
    pub(crate) fn memo_ran_again(&self) {
        super::bump(&self.slot().stats.heal_ops_rerun, 1);
    }

    /// A heal starts (before its undo): the run that ended becomes the one reused from, and
    /// its recorded writes leave the write set unharmed (`Memo::kept`) instead of being
    /// undone with the rest.
    pub(super) fn memo_keep_writes(&mut self) {
        let memo = &mut self.local.cc.healing.memo;
        if !memo.on {
            return;
        }
        memo.kept.clear();
        let ws = &mut self.st.sets.write_set;
        for &n in &memo.writes[memo.cur] {
            if n.is_null() {
                continue;
            }
            if let Some(i) = ws.iter().position(|w| w.new == n && !w.old.is_null()) {
                memo.kept.push(ws.remove(i));
            }
        }
        memo.next_run();
    }

    /// The heal's run is over (however it ended): undoes the kept writes it did not reuse.
    pub(super) fn memo_drop_kept(&mut self) {
        let kept = std::mem::take(&mut self.local.cc.healing.memo.kept);
        if kept.is_empty() {
            self.local.cc.healing.memo.kept = kept;
            return;
        }
        let run = std::mem::replace(&mut self.st.sets.write_set, kept);
        self.undo_writes(false);
        let mut kept = std::mem::replace(&mut self.st.sets.write_set, run);
        kept.clear();
        self.local.cc.healing.memo.kept = kept;
    }

    /// A buffered version of ours changed again after it was written (rewritten, deleted):
    /// if an UPDATE was recorded with it, it is no longer what that UPDATE made.
    #[inline]
    pub(super) fn memo_forget_write(&mut self, new: *const Version) {
        let memo = &mut self.local.cc.healing.memo;
        if memo.on {
            memo.forget_write(new);
        }
    }
}
