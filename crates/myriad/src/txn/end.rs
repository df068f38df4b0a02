//! The end of a transaction: commit, abort and rollback (undo of the write set, with
//! `cc::on_abort` and `cc::after_abort`), and handing the slot back.
//!
//! Commit runs one of two pipelines and asks the protocol (`cc/mod.rs`) at each step:
//! - multi-version (Hekaton §2.4–2.7, §3): publish Preparing, draw the end timestamp
//!   (`cc::precommit` before; MVTO ends at its begin timestamp, `cc::ends_at_begin_ts`),
//!   `cc::validate`, wait for commit dependencies, `cc::finalize`, log, turn Committed,
//!   post-process the versions' timestamps, `cc::release`;
//! - single-version (Silo, SOSP 2013 §4.2): `cc::lock_for_commit`, `cc::serialization_point`,
//!   `cc::validate`, `cc::commit_tid`, log, install the buffered writes in place,
//!   `cc::release`.

use super::*;
use crate::config::GcPolicy;
use crate::gc::Garbage;
use crate::schema::TableCols;

/// A healable call's body, run again by a heal (`Transaction::commit_healing`).
pub(crate) type Rerun<'a, 'db> = &'a mut dyn FnMut(&mut Transaction<'db>) -> Result<()>;

impl<'db> Transaction<'db> {
    /// Commits, and in a durable database waits until the commit is durable (group commit,
    /// `log/`). On a serialization failure the transaction is aborted and the error says why.
    pub fn commit(self) -> Result<()> {
        let db = self.st.db;
        let ticket = self.commit_deferred()?;
        db.wait_durable(ticket)
    }

    /// Commits without waiting for durability: the changes are visible to other
    /// transactions at once, and the commit is durable (may be acknowledged to a client)
    /// once `Database::is_durable(ticket)`. For a memory-only database this is `commit`.
    pub fn commit_deferred(mut self) -> Result<CommitTicket> {
        self.commit_in_place()
    }

    /// `commit_deferred` that leaves the (then ended) transaction to the caller, who may
    /// still read `retry_floor` after a failure (`Database::run_with`).
    pub(crate) fn commit_in_place(&mut self) -> Result<CommitTicket> {
        if self.status != Status::Active {
            return Err(Error::TransactionClosed);
        }
        let ticket = if self.st.protocol.single_version() {
            self.commit_single_version(None)
        } else {
            self.commit_multi_version()
        };
        let ts = self.commit_ts;
        ticket.map(|epoch| CommitTicket { epoch, ts })
    }

    /// Marks the transaction as one stored-procedure call whose commit may heal it
    /// (`commit_healing`): under `healing`, an error a stale read may have caused leaves it
    /// open (`heal_pending`) instead of aborting it. Other protocols ignore it.
    pub(crate) fn set_healable(&mut self) {
        // A call after other writes in the transaction is not the whole transaction: re-running
        // it could not restore what came before, so it commits as OCC.
        self.healable = cc::heals(self.st.protocol) && self.writes == 0;
        self.heal_command = self.command;
        let h = &mut self.local.cc.healing;
        let cache = self.healable && h.record_access(self.st.db.config.get_heal_access_cache());
        h.cache.start(cache);
        h.memo.start(cache);
    }

    /// Whether the call's last run stopped at an error a stale read may have caused, and the
    /// transaction is open for `commit_healing` to heal it.
    pub(crate) fn heal_pending(&self) -> bool {
        self.heal_requested && self.status == Status::Active
    }

    /// Commits a healable call (`set_healable`; thesis ch. 3, `cc/healing.rs`): where
    /// validation finds a read stale, `rerun` runs the call's body again under the locks
    /// validation holds, instead of an abort. `complete`: whether the body's last run
    /// finished (false after `heal_pending`: a heal runs first, whatever validation finds).
    /// Returns the ticket as `commit_deferred`; the caller's results are those of the last
    /// run. Without `healing` it is `commit_deferred`.
    ///
    /// `cols`: the columns the procedure reads and writes per table
    /// (`procedure::healing::column_masks`), for the false-invalidation check: a row whose
    /// newer record differs only in other columns is taken as read (and a write to it is
    /// rebased on the newer record) instead of healed (`cc/healing.rs`).
    pub(crate) fn commit_healing(
        &mut self,
        complete: bool,
        cols: &[TableCols],
        rerun: Rerun<'_, 'db>,
    ) -> Result<CommitTicket> {
        if self.status != Status::Active {
            return Err(Error::TransactionClosed);
        }
        if !self.healable {
            debug_assert!(
                complete,
                "an incomplete call under a protocol that cannot heal"
            );
            if !self.st.keys_reads || self.st.protocol.single_version() {
                return self.commit_in_place();
            }
            // `mvocc`'s column check (`cc/mvocc.rs`): the masks of this commit. (They are
            // cleared when the slot's next transaction begins: the slot's state is handed
            // back when this one ends, so a clear here would miss it.)
            let mine = &mut self.local.cc.mvocc.cols;
            mine.clear();
            mine.extend_from_slice(cols);
            return self.commit_in_place();
        }
        let cols = if self.st.db.config.get_column_check() {
            cols
        } else {
            &[]
        };
        let ticket = self.commit_single_version(Some((complete, rerun, cols)));
        let ts = self.commit_ts;
        ticket.map(|epoch| CommitTicket { epoch, ts })
    }

    /// After `heal_lock`, or `mvocc`'s validation: counts the false invalidations it found
    /// and re-points the history's reads of their rows to the records that stand at the
    /// commit (`cc/healing.rs`'s `false_invalidation`, `cc/mvocc.rs`'s column check).
    fn repoint_recorded_reads(&mut self) {
        let repointed = cc::repointed(self.st.protocol, &mut self.local.cc);
        if repointed.is_empty() {
            return;
        }
        let n = repointed.len() as u64;
        bump(&self.st.slot().stats.false_invalidations, n);
        if let Some(rec) = self.recording.as_mut() {
            for &(table, from, to) in repointed.iter() {
                let t = self.st.db.table_by_id(table);
                // SAFETY: healing: `to` is locked by us, and `from` was read by this
                // transaction, which has not re-pinned since (`may_repin`); mvocc: both are
                // versions a transaction still active may see (GC watermark).
                let (from, to) = unsafe { (&*from, &*to) };
                rec.repoint_read(&t.schema, table, to.data(), from, to, &self.st.db.txns);
            }
        }
        repointed.clear();
    }

    /// One heal: undoes the buffered writes and inserts (keeping every validation lock),
    /// empties the read, scan and write sets and runs the body again. Ok(true): the run
    /// finished; Ok(false): it stopped at an error a stale read may have caused (heal
    /// again); Err: the transaction is rolled back, and this is why.
    fn heal(&mut self, rerun: Rerun<'_, 'db>) -> Result<bool> {
        if self.heals >= cc::healing::HEAL_LIMIT {
            return Err(self.refuse(AbortReason::HealGiveUp));
        }
        self.heals += 1;
        self.local.cc.healing.calls_since_heal = 0;
        bump(&self.slot().stats.heals, 1);
        self.local.cc.healing.cache.heal();
        self.memo_keep_writes();
        self.undo_writes(false);
        self.st.sets.clear();
        if let Some(r) = self.recording.as_mut() {
            **r = Recording::default();
        }
        self.doomed.set(None);
        self.heal_requested = false;
        // The call starts again: a command log logs the healed run, as one call.
        self.command = self.heal_command;
        self.writes = 0;
        let ran = rerun(self);
        self.memo_drop_kept();
        match ran {
            Ok(()) => Ok(true),
            Err(_) if self.heal_pending() => Ok(false),
            Err(e) => {
                if self.status == Status::Active {
                    let reason = match e {
                        Error::SerializationFailure(r) => r,
                        _ => AbortReason::UserAbort,
                    };
                    self.rollback(reason);
                }
                Err(e)
            }
        }
    }

    /// Commits like `commit` and returns the commit timestamp: a later transaction that
    /// begins with it as its floor (`Database::begin_after`) sees this one's writes, whatever
    /// the timestamp source (under `partial-order` one that begins without it may not).
    pub fn commit_returning_ts(self) -> Result<Timestamp> {
        let db = self.st.db;
        let ticket = self.commit_deferred()?;
        db.wait_durable(ticket)?;
        Ok(ticket.ts)
    }

    /// Aborts for `reason` (the protocol refused the commit) and returns the error.
    fn refuse(&mut self, reason: AbortReason) -> Error {
        self.rollback(reason);
        Error::SerializationFailure(reason)
    }

    /// The multi-version commit. Returns the durability ticket (`log/`): the group-commit
    /// epoch of its log record, or with ERMIA's log manager the record's end LSN (0 for a
    /// memory-only database).
    fn commit_multi_version(&mut self) -> Result<u64> {
        #[cfg(test)]
        tests::pause_point(tests::Pause::MultiVersionCommit);
        let slot = self.slot();
        // SSN, SSI and ERMIA-SSI: every tracked transaction, readers too, draws a commit stamp.
        let stamped = self.st.protocol.stamped() && self.st.tracks_reads;
        if self.st.sets.write_set.is_empty() && !stamped {
            if let Err(reason) = self.await_deps() {
                return Err(self.fail(reason));
            }
            cc::commit_read_only(&self.st, self.engine_cc, &mut self.local.cc);
            return self.finish_read_only(self.st.begin_ts);
        }
        if cc::ends_at_begin_ts(self.st.protocol) {
            let end_ts = self.st.begin_ts;
            if let Err(reason) = cc::validate(&self.st, &mut self.cc, &mut self.local.cc, end_ts) {
                return Err(self.refuse(reason));
            }
            return self.install(end_ts);
        }
        if let Err(reason) = cc::precommit(&self.st, self.engine_cc, &mut self.local.cc) {
            return Err(self.refuse(reason));
        }
        let read_only = self.st.sets.write_set.is_empty();
        let log = self.st.db.log.get();
        // ERMIA: the record is encoded before the end timestamp is drawn, because the draw
        // reserves its log space (`log/ermia.rs`). A stamped reader draws one too (every draw
        // of ERMIA's clock is a log range), and covers its range with a skip record.
        let ermia = log.and_then(|l| l.ermia());
        let mut len = 0;
        if let Some(l) = ermia {
            let db = self.st.db;
            let command = self.logged_command();
            match l.prepare(self.st.slot_idx, &self.st.sets.write_set, command, |id| {
                &**db.table_by_id(id)
            }) {
                Ok(n) => len = n,
                Err(e) => {
                    self.rollback(AbortReason::UserAbort);
                    return Err(e);
                }
            }
        }
        // Publish Preparing before drawing the end timestamp (see txn/table.rs);
        // `locked-counter` takes its commit lock before either.
        if ermia.is_none() {
            let rmw = self.st.db.clock.enter_commit();
            bump(&slot.stats.global_rmw, rmw);
        }
        slot.set_preparing_pending();
        let end_ts = match ermia {
            Some(l) => {
                bump(&slot.stats.global_rmw, 1);
                Timestamp::new(l.reserve(self.st.slot_idx, len))
            }
            None => {
                // `locked-counter`: the commit lock is ours until `release`/`abandon`;
                // `partial-order`: we are a member of the group at `end_ts` until then.
                let (ts, rmw) = self.st.db.clock.join_end_ts(self.st.slot_idx);
                bump(&slot.stats.global_rmw, rmw);
                bump(&slot.stats.end_ts_draws, 1);
                self.joined = Some(ts);
                ts
            }
        };
        slot.set_preparing(end_ts);
        debug_assert!(
            end_ts > self.st.begin_ts,
            "end timestamp {end_ts} at or before the begin timestamp {}",
            self.st.begin_ts
        );

        #[cfg(test)]
        tests::pause_point(tests::Pause::Prepared);
        // Validation, then the wait for commit dependencies (Hekaton §3.2).
        let checked = cc::validate(&self.st, &mut self.cc, &mut self.local.cc, end_ts)
            .and_then(|()| self.await_deps());
        if let Some(l) = ermia.filter(|_| checked.is_err() || read_only) {
            l.skip(self.st.slot_idx, end_ts.get());
        }
        if let Err(reason) = checked {
            return Err(self.refuse(reason));
        }
        self.repoint_recorded_reads();
        cc::finalize(&self.st, &self.cc, end_ts);
        if read_only {
            // A stamped reader: nothing to log or post-process.
            slot.set_committed(end_ts);
            self.release_end_ts();
            return self.finish_read_only(end_ts);
        }
        self.install(end_ts)
    }

    /// Hands back the end timestamp drawn with `Source::join_end_ts`: the commit is
    /// complete.
    fn release_end_ts(&mut self) {
        if let Some(ts) = self.joined.take() {
            let rmw = self.st.db.clock.release(ts, self.st.slot_idx);
            bump(&self.slot().stats.global_rmw, rmw);
        }
    }

    /// Ends a transaction that wrote nothing and serializes at `commit_ts`.
    fn finish_read_only(&mut self, commit_ts: Timestamp) -> Result<u64> {
        let db = self.st.db;
        self.commit_ts = commit_ts;
        let epoch = db.log.get().map_or(0, |l| l.read_only_ticket(&db.clock));
        if let (Some(rec), Some(h)) = (self.recording.take(), db.history.as_ref()) {
            // Wrote nothing: its stamp names no version.
            let r = rec.into_record(
                self.st.id.word(),
                self.st.begin_ts,
                commit_ts,
                self.st.isolation,
            );
            h.push(0, r);
        }
        bump(&self.slot().stats.committed, 1);
        self.finish();
        Ok(epoch)
    }

    /// Logs a validated multi-version transaction, makes it Committed at `end_ts` and
    /// post-processes its versions.
    fn install(&mut self, end_ts: Timestamp) -> Result<u64> {
        let slot = self.slot();
        let ticket = self.log_commit(end_ts)?;
        slot.set_committed(end_ts);
        self.commit_ts = end_ts;
        let db = self.st.db;
        if db.config.speculates() {
            db.txns.report(self.st.slot_idx, self.st.id, true);
        }

        // Post-processing (Hekaton §2.4): replace our id by the end timestamp in every field
        // we wrote. GC `vacuum`: mark the tuple's block dirty; `coop`: nothing (readers and
        // the full passes find the garbage); `txn`, `dead-zone` (and `none`, which drops it):
        // queue it for this worker's next collect.
        let gc = db.config.gc;
        for w in &self.st.sets.write_set {
            // SAFETY: our own versions and versions we hold the write lock on; pinned.
            unsafe {
                debug_assert_eq!(
                    (*w.new).begin.load(Ordering::Acquire),
                    self.st.id.word(),
                    "post-processing a version this transaction did not write"
                );
                (*w.new).begin.store(end_ts.get(), Ordering::Release);
                if let Some(old) = w.old.as_ref() {
                    old.end.store(end_ts.get(), Ordering::Release);
                }
                if !w.old.is_null() || (*w.new).is_tombstone() {
                    if gc.marks_dirty() {
                        if db.table_by_id(w.table).mark_dirty(w.tid) {
                            bump(&slot.stats.record_rmw, 1);
                        }
                    } else if gc != GcPolicy::Coop {
                        self.local.garbage.push_back(Garbage {
                            end_ts: end_ts.get(),
                            table: w.table,
                            tid: w.tid,
                            retried: false,
                        });
                    }
                }
            }
        }
        if db.siro.is_some() {
            // `siro`'s LLT bound is a multiple of the mean update-transaction length.
            crate::version::siro::SiroStore::note_commit(
                &slot.stats.siro,
                self.st.begin_ts.get(),
                end_ts.get(),
            );
        }
        // `partial-order` on a durable database: a commit becomes readable only once its
        // log record is durable (POMVCC §V), so we count ourselves complete in the group, and
        // `BTs` may pass it, only then. Shared counters: the group-commit round that makes
        // our epoch durable does it (we are listed and go on); slot counts: the slot's word
        // holds one member, so we wait here. (A failed log releases what it held, or `BTs`
        // would stop for good; the error is returned and later commits are refused.)
        let mut durable = Ok(());
        if let (Some(ts), Some(l)) = (self.joined, db.log.get().filter(|_| ticket != 0)) {
            let c = l.control();
            let now = || {
                if c.check_failed().is_err() {
                    u64::MAX
                } else {
                    c.durable()
                }
            };
            if let Some(rmw) = db.clock.defer_release(ts, self.st.slot_idx, ticket, now) {
                self.joined = None;
                bump(&slot.stats.global_rmw, rmw);
            } else if db.clock.is_partial_order() {
                durable = c.wait_durable(ticket);
            }
        }
        #[cfg(test)]
        tests::pause_point(tests::Pause::Durable);
        // Stamped: `locked-counter`'s critical section ends, `partial-order`'s group counts
        // us complete.
        self.release_end_ts();
        cc::release(&self.st, self.engine_cc, &mut self.local.cc);
        if let (Some(rec), Some(h)) = (self.recording.take(), db.history.as_ref()) {
            let r = rec.into_record(
                self.st.id.word(),
                self.st.begin_ts,
                end_ts,
                self.st.isolation,
            );
            h.push(end_ts.get(), r);
        }
        bump(&slot.stats.committed, 1);
        self.local.commits_since_gc += 1;
        // GC runs in `finish`, after our read time is unregistered, so the collector never
        // holds the watermark back while it works.
        self.finish();
        durable.map(|()| ticket)
    }

    /// Appends the commit record for `end_ts` to the log, before anyone can see the
    /// transaction Committed (see the epoch argument in log/epoch.rs). Returns the durability
    /// ticket; on a log error the transaction is rolled back.
    fn log_commit(&mut self, end_ts: Timestamp) -> Result<u64> {
        let db = self.st.db;
        let end_ts = end_ts.get();
        let logged = match db.log.get().map(|l| &**l) {
            Some(crate::log::LogManager::Ermia(l)) => {
                l.fill(self.st.slot_idx, end_ts).map(|_| end_ts)
            }
            Some(crate::log::LogManager::Epoch(l)) => {
                let command = self.logged_command();
                l.append(
                    self.st.slot_idx,
                    end_ts,
                    &self.st.sets.write_set,
                    command,
                    |id| &**db.table_by_id(id),
                )
            }
            None => Ok(0),
        };
        logged.inspect_err(|_| self.rollback(AbortReason::UserAbort))
    }

    /// The single-version commit (Silo's, shared by OCC, 2PL and `healing`); returns the
    /// durability ticket. `heal`: a healable call (`commit_healing`), whether its last run
    /// finished, and its body.
    fn commit_single_version(
        &mut self,
        mut heal: Option<(bool, Rerun<'_, 'db>, &[TableCols])>,
    ) -> Result<u64> {
        let db = self.st.db;
        #[cfg(test)]
        tests::pause_point(tests::Pause::SingleVersionCommit);
        // `healing` [M]: a healable call first locks (and heals) only the rows it writes, and
        // validates its reads in step 3 as OCC validates reads, without a lock of its own
        // (`cc::heal_check_deferred`); a call that wrote nothing locks nothing. Only if that
        // check fails does it release its locks and take every lock in order, the thesis's
        // Algorithm 1, healing what is stale there. Either way every read stands at the
        // serialization point; a call whose reads are current pays no lock per row it only
        // read (TPC-C's items, warehouse and customer reads; Stock-Level's ~200 rows).
        let mut optimistic = heal.is_some();
        let (epoch, order_ts, ordered_tid) = loop {
            // 1. Lock the records written (OCC, `healing`: and read) in the global order; a
            // healable call heals a stale read (under the locks taken so far) and goes on.
            match heal.as_mut() {
                // Nothing to lock.
                Some((true, _, _)) if optimistic && self.st.sets.write_set.is_empty() => {}
                None => {
                    if let Err(reason) = cc::lock_for_commit(&mut self.st, &mut self.local.cc) {
                        return Err(self.refuse(reason));
                    }
                }
                Some((complete, rerun, cols)) => {
                    let step = cc::heal_lock(&mut self.st, &mut self.local.cc, cols, optimistic);
                    self.repoint_recorded_reads();
                    match step {
                        Ok(cc::healing::Step::Done) if *complete => {}
                        Ok(_) => {
                            *complete = self.heal(&mut **rerun)?;
                            continue;
                        }
                        Err(reason) => return Err(self.refuse(reason)),
                    }
                }
            }
            // 2. The serialization point.
            let epoch = cc::serialization_point(self.engine_cc);
            // The history checker orders transactions by commit timestamp: a recording database
            // takes one from the global clock here, at the serialization point (`history/`).
            // Without a recording no shared counter is touched.
            let order_ts = self.recording.is_some().then(|| {
                bump(&self.slot().stats.global_rmw, 1);
                db.clock.next_end_ts()
            });
            // A command log is replayed in TID order, which must then be a serial order: the TID
            // is drawn here, before validation (`cc::ordered_commit_tid`).
            let ordered_tid = (db.config.log == crate::config::LogPolicy::Command
                && !self.st.sets.write_set.is_empty())
            .then(|| {
                bump(&self.slot().stats.global_rmw, 1);
                cc::ordered_commit_tid(
                    &self.st,
                    self.engine_cc,
                    &mut self.local.cc,
                    epoch,
                    db.clock.now(),
                )
            });
            // 3. Validation. A healable call heals a phantom too (its records stay locked;
            // the TID and the history's stamp are drawn again after the heal).
            let deferred = match heal.as_ref() {
                Some((_, _, cols)) if optimistic => {
                    let current = cc::heal_check_deferred(&mut self.st, &mut self.local.cc, cols);
                    self.repoint_recorded_reads();
                    current
                }
                _ => true,
            };
            let valid = match deferred {
                true => cc::validate(&self.st, &mut self.cc, &mut self.local.cc, Timestamp::ZERO),
                false => Err(AbortReason::ReadValidation),
            };
            match valid {
                Ok(()) => break (epoch, order_ts, ordered_tid),
                Err(AbortReason::ReadValidation | AbortReason::Phantom) if optimistic => {
                    bump(&self.slot().stats.heal_relocks, 1);
                    cc::heal_unlock(&self.st, &mut self.local.cc);
                    optimistic = false;
                }
                Err(AbortReason::Phantom) if heal.is_some() => {
                    if let Some((complete, rerun, _)) = heal.as_mut() {
                        *complete = self.heal(&mut **rerun)?;
                    }
                }
                Err(reason) => return Err(self.refuse(reason)),
            }
        };
        if self.st.sets.write_set.is_empty() {
            if let Some(ts) = order_ts {
                self.st.begin_ts = ts;
            }
            let at = self.st.begin_ts;
            cc::release(&self.st, self.engine_cc, &mut self.local.cc);
            return self.finish_read_only(at);
        }
        // 4. The TID. The clock is a floor, read, never advanced: recovery leaves it at the
        // newest recovered commit, and the next checkpoint's timestamp is read from it, so
        // every TID of this session sorts after both (a load of a line no Silo commit writes).
        let tid = match ordered_tid {
            Some(tid) => tid,
            None => cc::commit_tid(&self.st, &mut self.local.cc, epoch, db.clock.now()),
        };
        // 5. Log, then install.
        let ticket = self.log_commit(tid)?;
        let slot = self.slot();
        slot.set_committed(tid);
        // TIDs are not read times: a floor of the clock's value is one every later
        // transaction has (single-version commits are visible at once).
        self.commit_ts = db.clock.now();
        let mut retired = Retired::default();
        for w in &self.st.sets.write_set {
            let t = db.table_by_id(w.table);
            // SAFETY: our versions, and versions we hold the lock on; pinned.
            unsafe {
                let n = &*w.new;
                n.begin.store(tid.get(), Ordering::Release);
                let Some(e) = t.entry(w.tid) else { continue };
                let dead = n.is_tombstone();
                if w.old.is_null() {
                    // Our insert, already in place; inserted and deleted again: nothing stays.
                    if dead
                        && e.compare_exchange(
                            w.new,
                            std::ptr::null_mut(),
                            Ordering::AcqRel,
                            Ordering::Acquire,
                        )
                        .is_ok()
                    {
                        retired.push(w.new);
                    }
                    continue;
                }
                // Only the holder of the old record's lock replaces it, and inserts claim
                // only empty entries: the entry still holds `old`, and a store installs.
                debug_assert_eq!(e.load(Ordering::Acquire), w.old);
                e.store(
                    if dead { std::ptr::null_mut() } else { w.new },
                    Ordering::Release,
                );
                (*w.old).end.store(tid.get(), Ordering::Release);
                retired.push(w.old);
                // Anything an earlier multi-version replay left behind it goes too.
                if !(*w.old).next.load(Ordering::Acquire).is_null() {
                    let mut p = (*w.old).take_next();
                    while !p.is_null() {
                        let next = (*p).take_next();
                        retired.push(p);
                        p = next;
                    }
                }
                if dead {
                    retired.push(w.new);
                }
            }
        }
        // SAFETY: every retired version was unlinked above, while pinned, and only once.
        unsafe { retired.free_after_epoch(slot, &self.guard) };
        // 2PL: the read locks go after the new versions are in (strict 2PL); OCC's locks on
        // the records it only read, likewise.
        cc::release(&self.st, self.engine_cc, &mut self.local.cc);
        if let (Some(rec), Some(h)) = (self.recording.take(), db.history.as_ref()) {
            let ts = order_ts.unwrap_or(tid);
            let r = rec.into_record(self.st.id.word(), ts, ts, self.st.isolation);
            h.push(tid.get(), r);
        }
        bump(&slot.stats.committed, 1);
        self.finish();
        Ok(ticket)
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
        cc::on_abort(&self.st, &mut self.local.cc);
        slot.set_aborted();
        if prepared && self.st.db.config.speculates() {
            // Cascading abort (Hekaton §2.7): whoever read our versions speculatively aborts.
            self.st.db.txns.report(self.st.slot_idx, self.st.id, false);
        }
        #[cfg(test)]
        tests::pause_point(tests::Pause::Rollback);
        self.undo_writes(true);
        // Undone: leave the commit group (or the commit lock) we joined, if any.
        if let Some(ts) = self.joined.take() {
            self.st.db.clock.abandon(ts, self.st.slot_idx);
        }
        cc::after_abort(
            &self.st,
            self.engine_cc,
            &mut self.local.cc,
            self.st.db.config.protocol,
            reason,
        );
        bump(&slot.stats.aborted[reason.index()], 1);
        self.finish();
    }

    /// Undoes the write set, newest first: our versions leave the chains and indexes and are
    /// discarded; `unlock`: the locks on the records they replaced are released (a heal
    /// keeps them, `heal`).
    pub(super) fn undo_writes(&mut self, unlock: bool) {
        let slot = self.slot();
        let writes = std::mem::take(&mut self.st.sets.write_set);
        for w in writes.iter().rev() {
            let t = self.st.db.table_by_id(w.table);
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
                    if unlock {
                        self.unlock_version(old);
                    }
                }
                // `physical`: no entry may outlive the version it points at.
                self.remove_entries(t, w.new, (*w.new).data());
                self.discard_version(t, w.new, true);
            }
        }
        self.st.sets.write_set = writes;
    }

    /// Clears per-transaction state, gives the buffers back to the slot and ends the
    /// transaction in the table.
    pub(crate) fn finish(&mut self) {
        debug_assert!(
            self.local.cc.holds_nothing(),
            "a transaction ends holding protocol locks"
        );
        self.status = Status::Ended;
        let slot = self.slot();
        if self.st.took_deps.get() {
            // A report must reach us, not our slot's next transaction (`CommitDeps`).
            let backoff = crossbeam_utils::Backoff::new();
            while slot.deps.pending().0 != 0 {
                backoff.snooze();
            }
        }
        self.st.sets.clear();
        self.local.sets = std::mem::take(&mut self.st.sets);
        slot.terminate();
        if self.local.commits_since_gc >= self.st.db.config.gc_interval_txns {
            self.local.commits_since_gc = 0;
            if self.st.db.config.gc == crate::config::GcPolicy::Coop {
                crate::gc::coop::refresh_watermark(self.st.db);
            }
            let l: &mut SlotLocal = &mut self.local;
            crate::gc::collect_slot(
                self.st.db,
                slot,
                &mut l.garbage,
                &mut l.zones,
                &mut l.written,
                &self.guard,
            );
        }
        self.local.release();
        self.st.db.txns.release(self.st.slot_idx);
    }
}

impl Drop for Transaction<'_> {
    fn drop(&mut self) {
        if self.status == Status::Active {
            self.rollback(AbortReason::UserAbort);
        }
        if let Some(ts) = self.retry_floor {
            let key = self.st.db as *const crate::shared::Shared as usize;
            RETRY_FLOOR.with(|c| c.set(Some((key, ts))));
        }
    }
}

/// Versions a single-version commit unlinked, freed together once no pinned thread can still
/// reach them (one deferred call per commit, not one per version: each costs a slot in the
/// thread's crossbeam bag).
#[derive(Default)]
struct Retired {
    versions: Vec<usize>,
    bytes: u64,
}

impl Retired {
    /// # Safety
    /// `v` must be unreachable for threads that pin from now on, and retired once.
    unsafe fn push(&mut self, v: *mut Version) {
        self.bytes += (*v).size() as u64;
        self.versions.push(v as usize);
    }

    /// # Safety
    /// As for `push`, for every version pushed.
    unsafe fn free_after_epoch(self, slot: &Slot, guard: &Guard) {
        if self.versions.is_empty() {
            return;
        }
        bump(&slot.stats.versions_reclaimed, self.versions.len() as u64);
        bump(&slot.stats.version_bytes_reclaimed, self.bytes);
        let versions = self.versions;
        guard.defer_unchecked(move || {
            for p in versions {
                Version::free(p as *mut Version);
            }
        });
    }
}
