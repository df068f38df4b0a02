//! The end of a transaction: commit (the protocol's `cc::commit`), abort and rollback (undo of
//! the write set, with `cc::on_abort` and `cc::after_abort`), and handing the slot back.

use super::*;

impl<'db> Transaction<'db> {
    /// Commits, and in a durable database waits until the commit is durable (group commit,
    /// `log/`). On a serialization failure the transaction is aborted and the error says why.
    pub fn commit(self) -> Result<()> {
        let db = self.db;
        let ticket = self.commit_deferred()?;
        db.wait_durable(ticket)
    }

    /// Commits without waiting for durability: the changes are visible to other
    /// transactions at once, and the commit is durable (may be acknowledged to a client)
    /// once `Database::is_durable(ticket)`. For a memory-only database this is `commit`.
    pub fn commit_deferred(mut self) -> Result<CommitTicket> {
        if self.status != Status::Active {
            return Err(Error::TransactionClosed);
        }
        cc::commit(&mut self).map(|epoch| CommitTicket { epoch })
    }

    /// Aborts (a user abort).
    pub fn abort(mut self) {
        if self.status == Status::Active {
            self.rollback(AbortReason::UserAbort);
        }
    }

    /// Undoes every write, marks the transaction aborted and releases its slot's ids.
    pub(crate) fn rollback(&mut self, reason: AbortReason) {
        if self.status != Status::Active {
            return;
        }
        let slot = self.slot();
        // Only a Preparing transaction is registered with (`TxnTable::depend`), so one that
        // aborts while Active has no dependents and skips the report's lock.
        let prepared = slot.is_preparing();
        cc::on_abort(self);
        slot.set_aborted();
        if prepared && self.db.config.speculates() {
            // Cascading abort (Hekaton §2.7): whoever read our versions speculatively aborts.
            self.db.txns.report(self.slot_idx, self.id, false);
        }
        #[cfg(test)]
        tests::pause_point(tests::Pause::Rollback);
        let writes = std::mem::take(&mut self.local.write_set);
        for w in writes.iter().rev() {
            let t = self.db.table_by_id(w.table);
            // SAFETY: our own versions; we hold the lock on `old`.
            unsafe {
                (*w.new).begin.store(INFINITY, Ordering::Release);
                if let Some(e) = t.entry(w.tid) {
                    // Only if our version is still the head: once we are Aborted, a writer
                    // that took our lock on `old` over may already have installed its version
                    // on top of `old` (its `next` is `old`, ours is out of the chain). Putting
                    // `old` back then would lose that writer's update.
                    bump(&slot.stats.record_rmw, 1);
                    t.unpublish(e, w.new, w.old);
                }
                if let Some(old) = w.old.as_ref() {
                    // In place, the master gets the old values back before the lock is
                    // released (no writer takes over an aborted writer's lock there).
                    t.restore_row(old);
                    self.unlock_version(old);
                }
                // `physical`: no entry may outlive the version it points at.
                self.remove_entries(t, w.new, (*w.new).data());
                self.discard_version(t, w.new, true);
            }
        }
        self.local.write_set = writes;
        cc::after_abort(self, reason);
        bump(&slot.stats.aborted[reason.index()], 1);
        self.finish();
    }

    /// Clears per-transaction state, gives the buffers back to the slot and ends the
    /// transaction in the table.
    pub(crate) fn finish(&mut self) {
        self.status = Status::Ended;
        let slot = self.slot();
        if self.took_deps.get() {
            // A report must reach us, not our slot's next transaction (`CommitDeps`).
            let backoff = crossbeam_utils::Backoff::new();
            while slot.deps.pending().0 != 0 {
                backoff.snooze();
            }
        }
        self.local.read_set.clear();
        self.local.scan_set.clear();
        self.local.scan_keys.clear();
        self.local.write_set.clear();
        slot.terminate();
        if self.local.commits_since_gc >= self.db.config.gc_interval_txns {
            self.local.commits_since_gc = 0;
            if self.db.config.gc == crate::config::GcPolicy::Coop {
                crate::gc::coop::refresh_watermark(self.db);
            }
            crate::gc::collect(self.db, slot, &mut self.local.garbage, &self.guard);
        }
        // SAFETY: we own the slot until release below.
        unsafe { std::ptr::swap(slot.local.get(), &mut self.local) };
        self.db.txns.release(self.slot_idx);
    }
}

impl Drop for Transaction<'_> {
    fn drop(&mut self) {
        if self.status == Status::Active {
            self.rollback(AbortReason::UserAbort);
        }
    }
}
