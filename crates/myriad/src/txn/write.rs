//! Writes: insert, update, delete and recovery's replay writes — finding the version a write
//! applies to, the write lock in its End field (with the protocol's `cc::may_write`), new
//! versions, secondary index entries (with `cc::on_index_enter`) and the write set.

use super::*;

impl<'db> Transaction<'db> {
    /// Loads the head of `tid`'s chain, waiting out a just-aborted head that its writer is
    /// about to unlink.
    pub(super) fn stable_head(&self, t: &Table, tid: TupleId) -> *mut Version {
        let backoff = crossbeam_utils::Backoff::new();
        let Some(e) = t.entry(tid) else {
            return ptr::null_mut();
        };
        loop {
            let h = t.newest(e);
            // SAFETY: pinned.
            match unsafe { h.as_ref() } {
                Some(v) if v.begin.load(Ordering::Acquire) == INFINITY => backoff.snooze(),
                Some(v)
                    if crate::version::is_txn(v.begin.load(Ordering::Acquire))
                        && !self.is_mine(v) =>
                {
                    let st = self
                        .st
                        .db
                        .txns
                        .state_of(TxnId::from_word(v.begin.load(Ordering::Acquire)));
                    if st == table::TxnState::Aborted {
                        backoff.snooze();
                    } else {
                        return h;
                    }
                }
                _ => return h,
            }
        }
    }

    /// Takes the write lock on `head`, a version of `t` (its End field, Hekaton §2.6). Err =
    /// write-write conflict.
    pub(super) fn lock_version(&self, t: &Table, head: &Version) -> std::result::Result<(), ()> {
        let me = self.st.id.word();
        let slot = self.slot();
        loop {
            let e = head.end.load(Ordering::Acquire);
            if e == INFINITY {
                bump(&slot.stats.record_rmw, 1);
                match head
                    .end
                    .compare_exchange(INFINITY, me, Ordering::AcqRel, Ordering::Acquire)
                {
                    Ok(_) => return Ok(()),
                    Err(_) => continue,
                }
            }
            if crate::version::is_txn(e)
                && t.store.takes_over_aborted_locks()
                && self.st.db.txns.state_of(TxnId::from_word(e)) == table::TxnState::Aborted
            {
                // The aborted writer will reset the field; taking it over is also safe
                // (Hekaton §2.6: "or its End field contains the ID of an aborted transaction").
                bump(&slot.stats.record_rmw, 1);
                if head
                    .end
                    .compare_exchange(e, me, Ordering::AcqRel, Ordering::Acquire)
                    .is_ok()
                {
                    return Ok(());
                }
                continue;
            }
            return Err(());
        }
    }

    /// Takes the write lock on `head` and applies the protocol's write check (MVTO: no later
    /// reader; MV2PL: no other read lock). On failure the lock is not held.
    pub(super) fn lock_for_write(
        &mut self,
        t: &Table,
        head: &Version,
    ) -> std::result::Result<(), AbortReason> {
        self.lock_version(t, head)
            .map_err(|_| cc::write_conflict(self.st.protocol))?;
        let ok = cc::may_write(&self.st, &self.local.cc, head);
        if ok.is_err() {
            self.unlock_version(head);
        }
        ok
    }

    /// `new` (the row's values after a write; `old` before it, `None` for a row new to
    /// the table) has entered indexes a later transaction may already have scanned: asks the
    /// protocol (`cc::on_index_enter`). Under index pointers `physical` that is every
    /// secondary index: the new version's entries are new even where the key stays, and a
    /// scan that passed their place before they were added finds only the old version's,
    /// which our commit makes invisible to it.
    #[inline]
    pub(super) fn entered_indexes(
        &mut self,
        t: &Table,
        old: Option<&[u8]>,
        new: &[u8],
    ) -> Result<()> {
        if !cc::checks_index_entry(self.st.protocol) {
            return Ok(());
        }
        self.enter_indexes(t, old, new)
    }

    /// `entered_indexes` under a protocol that checks index entries (out of line: the
    /// check above is on every write's path).
    fn enter_indexes(&mut self, t: &Table, old: Option<&[u8]>, new: &[u8]) -> Result<()> {
        let s = &t.schema;
        let moved = |i: &usize| {
            t.physical
                || old.is_none_or(|o| {
                    s.indexes[*i]
                        .columns
                        .iter()
                        .any(|&c| s.read_column(o, c) != s.read_column(new, c))
                })
        };
        let first = if old.is_none() { 0 } else { 1 };
        match cc::on_index_enter(&self.st, t, (first..t.indexes.len()).filter(moved)) {
            Ok(()) => Ok(()),
            Err(reason) => Err(self.fail(reason)),
        }
    }

    /// Releases our write lock on `v`, only if it is still ours: once we are Aborted, another
    /// writer may already have taken it over (Hekaton §2.6) — never clobber that.
    pub(super) fn unlock_version(&self, v: &Version) {
        let _ = v.end.compare_exchange(
            self.st.id.word(),
            INFINITY,
            Ordering::AcqRel,
            Ordering::Acquire,
        );
    }

    /// Waits until every commit dependency has been reported (Hekaton §3.2: "T can proceed
    /// ... if either its CommitDepCounter is zero or its AbortNow flag is set"). Err when a
    /// transaction we depend on aborted.
    pub(crate) fn await_deps(&self) -> std::result::Result<(), AbortReason> {
        if !self.st.took_deps.get() {
            return Ok(());
        }
        let slot = self.slot();
        let backoff = crossbeam_utils::Backoff::new();
        let mut waited = false;
        loop {
            match slot.deps.pending() {
                (_, true) => return Err(AbortReason::CommitDependency),
                (0, false) => return Ok(()),
                _ if !waited => {
                    waited = true;
                    bump(&slot.stats.commit_dep_waits, 1);
                }
                _ => backoff.snooze(),
            }
        }
    }

    /// Aborts the transaction for `reason` and returns the matching error.
    pub(crate) fn fail(&mut self, reason: AbortReason) -> Error {
        self.rollback(reason);
        Error::SerializationFailure(reason)
    }

    /// Finds the version of `tid` that a write applies to: the chain head if it is visible to
    /// us (or our own), else a write-write conflict. Under Read Committed a head committed after
    /// our statement time is simply the latest committed version.
    pub(super) fn write_target(&mut self, t: &Table, tid: TupleId) -> Result<(*mut Version, bool)> {
        if self.st.protocol.single_version() {
            if let Some(n) = self.st.pending_write(t.id, tid) {
                return Ok((n, true));
            }
        }
        let head = self.stable_head(t, tid);
        // SAFETY: pinned.
        let Some(h) = (unsafe { head.as_ref() }) else {
            return Ok((ptr::null_mut(), false));
        };
        if self.is_mine(h) {
            return Ok((head, true));
        }
        if self.st.protocol.single_version() {
            // The latest committed version, whatever its time (no snapshot); an uncommitted
            // one is another transaction's insert, which holds the record (or, Begin =
            // INFINITY, has just aborted and is being unlinked: a conflict all the same).
            let b = h.begin.load(Ordering::Acquire);
            if crate::version::is_txn(b) && self.in_heal_read_phase() && self.await_insert(h, b) {
                // The insert is over (committed: a duplicate, maybe from a stale read, which
                // the commit heals; aborted: the entry is free): judge the entry again.
                return self.write_target(t, tid);
            }
            if crate::version::is_txn(b) || b == INFINITY {
                return Err(self.fail(cc::write_conflict(self.st.protocol)));
            }
            return Ok((head, false));
        }
        let rt = if self.st.reads_latest() {
            self.st.db.clock.now()
        } else {
            self.st.begin_ts
        };
        if self.waiting_resolver().visible(h, rt) {
            return Ok((head, false));
        }
        // Not visible: an uncommitted or a newer committed version (first-writer-wins), or a
        // version already superseded by someone else. If its writer has a commit timestamp
        // (Committed, or Preparing at one), that is the floor a retry must begin at to see
        // it; under `partial-order` the group at it is closed now, so the retry can.
        if let Some(ts) = self.writer_ts(h) {
            self.retry_floor = Some(ts);
            let rmw = self.st.db.clock.close_group(ts);
            bump(&self.slot().stats.global_rmw, rmw);
        }
        Err(self.fail(AbortReason::WriteWriteConflict))
    }

    /// The commit timestamp of `v`'s writer, if it has one: committed, or Preparing at one.
    /// `None` for an Active writer (no group yet) or an aborted one.
    fn writer_ts(&self, v: &Version) -> Option<Timestamp> {
        let b = v.begin.load(Ordering::Acquire);
        if !crate::version::is_txn(b) {
            return (b != INFINITY).then_some(Timestamp::new(b));
        }
        match self.st.db.txns.state_of(TxnId::from_word(b)) {
            table::TxnState::Preparing(ts) | table::TxnState::Committed(ts) => Some(ts),
            _ => None,
        }
    }

    /// Inserts a row (`values`: one per column, in column order).
    pub fn insert<V: Values + ?Sized>(&mut self, t: &TableRef, values: &V) -> Result<()> {
        self.begin_write(t)?;
        let size = t.schema.row_size;
        let mut row = std::mem::take(&mut self.local.row_buf);
        row.clear();
        row.resize(size, 0);
        let r = t.schema.encode_row(values, &mut row);
        let out = r.and_then(|_| self.insert_encoded(t, &row));
        self.local.row_buf = row;
        out
    }

    /// `insert` of the row `fill` writes into the table's row layout (zeroed first): a
    /// compiled procedure's INSERT, which builds no values. `fill` returns `Err` for an
    /// error computing a value, reported first (as by a caller of `insert` computing its
    /// values), and `Ok(Err)` for a value the row refuses (`TableSchema::write_column`'s
    /// errors, the first column's), reported after `begin_write`'s as `encode_row`'s are.
    pub(crate) fn insert_with(
        &mut self,
        t: &TableRef,
        fill: impl FnOnce(&crate::schema::TableSchema, &mut [u8]) -> Result<Result<()>>,
    ) -> Result<()> {
        let mut row = std::mem::take(&mut self.local.row_buf);
        row.clear();
        row.resize(t.schema.row_size, 0);
        let out = fill(&t.schema, &mut row).and_then(|refused| {
            self.begin_write(t)?;
            refused?;
            self.insert_encoded(t, &row)
        });
        self.local.row_buf = row;
        out
    }

    /// Inserts a row given in the table's row layout (recovery). A row whose variable-length
    /// columns `write_column` would have refused is refused (`TableSchema::check_row`).
    pub(crate) fn insert_raw(&mut self, t: &TableRef, row: &[u8]) -> Result<()> {
        t.schema.check_row(row)?;
        self.begin_write(t)?;
        self.insert_encoded(t, row)
    }

    pub(super) fn insert_encoded(&mut self, t: &Table, row: &[u8]) -> Result<()> {
        let mut key = std::mem::take(&mut self.local.key_buf);
        t.schema.encode_key_from_row(0, row, &mut key);
        let r = self.insert_keyed(t, row, &key);
        self.local.key_buf = key;
        r
    }

    /// A fresh tuple id for `t`, from this slot's reserved range, refilled with
    /// `TID_CHUNK` ids by one shared fetch-add when it runs out. Ids reserved and never used
    /// are holes in the indirection array (entries that stay null), as are those of a lost
    /// insert race. `None`: the table is full.
    pub(super) fn fresh_tid(&mut self, t: &Table) -> Option<TupleId> {
        let slot = self.slot();
        let ranges = &mut self.local.tid_ranges;
        let i = match ranges.iter().position(|r| r.0 == t.id) {
            Some(i) => i,
            None => {
                ranges.push((t.id, TupleId::new(0), TupleId::new(0)));
                ranges.len() - 1
            }
        };
        let r = &mut ranges[i];
        if r.1 == r.2 {
            bump(&slot.stats.global_rmw, 1);
            let first = t.reserve_fresh_tids(TID_CHUNK);
            *r = (t.id, first, first.offset(TID_CHUNK));
        }
        let tid = r.1;
        r.1 = tid.offset(1);
        t.claim_tid(tid)
    }

    /// Hands `tid`, the last id `fresh_tid` gave out for `t`, back to the slot's range, so
    /// that the next insert uses it: its entry is null again and no index names it.
    fn give_back_tid(&mut self, t: &Table, tid: TupleId) {
        if let Some(r) = self.local.tid_ranges.iter_mut().find(|r| r.0 == t.id) {
            if r.1 == tid.offset(1) {
                r.1 = tid;
            }
        }
    }

    pub(super) fn insert_keyed(&mut self, t: &Table, row: &[u8], key: &[u8]) -> Result<()> {
        let dup = || Error::DuplicateKey {
            table: t.schema.name.clone(),
            index: "primary".into(),
        };
        self.check_unique(t, row, None)?;
        let slot = self.slot();
        // Where a key is new, its lookup in an ordered primary index is a descent as long as
        // the insert's own: with rows whole in their versions (nothing placed outside them)
        // the insert goes first, and a key it finds already there (a revived row, a lost
        // race) costs a version made and discarded and the tuple id handed back. A hash
        // lookup is cheap, and placed rows cannot be undone that simply: look first.
        let mut look = !t.indexes[0].is_ordered() || t.rows_copied();
        let mut known = None;
        loop {
            let found = if look {
                t.indexes[0].get_unique_in(key, &self.guard)
            } else {
                known.take()
            };
            look = true;
            let tid = match found {
                Some(tid) => tid,
                None => {
                    let Some(tid) = self.fresh_tid(t) else {
                        return Err(Error::Unsupported(format!(
                            "table `{}` is full",
                            t.schema.name
                        )));
                    };
                    let n = self.new_version(t, tid, row, ptr::null_mut(), ptr::null());
                    let Some(e) = t.entry(tid) else {
                        return Err(Error::Unsupported("tuple id space exhausted".into()));
                    };
                    // A fresh tuple id: no one reads its row yet.
                    self.place_row(t, tid, n, ptr::null(), Some(row));
                    e.store(n, Ordering::Release);
                    bump(&slot.stats.record_rmw, 1);
                    match t.indexes[0].insert_unique(key, tid) {
                        Ok(()) => {
                            return self.finish_write(t, tid, n, ptr::null_mut(), None, row, None);
                        }
                        Err(existing) => {
                            // The key is there (inserted before, or by a racing insert):
                            // go on with its tuple. Ours stays unused, handed back to this
                            // slot's range when nothing was placed outside the version.
                            e.store(ptr::null_mut(), Ordering::Release);
                            // SAFETY: n was reachable only through this unindexed tuple id;
                            // only whole-table walks (chain_stats, pinned) can have seen it.
                            unsafe { self.discard_version(t, n, true) };
                            if !t.rows_copied() {
                                self.give_back_tid(t, tid);
                            }
                            known = Some(existing);
                            look = false;
                            continue;
                        }
                    }
                }
            };
            let (head, mine) = self.write_target(t, tid)?;
            // SAFETY: pinned.
            match unsafe { head.as_ref() } {
                None => {
                    // A tuple whose versions were all aborted or collected: claim it.
                    let n = self.new_version(t, tid, row, ptr::null_mut(), ptr::null());
                    let Some(e) = t.entry(tid) else { continue };
                    bump(&slot.stats.record_rmw, 1);
                    if e.compare_exchange(ptr::null_mut(), n, Ordering::AcqRel, Ordering::Acquire)
                        .is_ok()
                    {
                        // The claim makes us the row's only writer (no version of the
                        // tuple is visible to anyone).
                        self.place_row(t, tid, n, ptr::null(), Some(row));
                        return self.finish_write(t, tid, n, ptr::null_mut(), None, row, None);
                    }
                    // SAFETY: never published.
                    unsafe { self.discard_version(t, n, false) };
                    return Err(self.fail(AbortReason::WriteWriteConflict));
                }
                Some(h) if mine => {
                    if !h.is_tombstone() {
                        return Err(self.unless_stale_read(dup()));
                    }
                    // We deleted this row earlier in this transaction: revive our own version.
                    // Under `physical` the entries of what it held go first (it may never
                    // have had them, if it was born a tombstone: removing is idempotent).
                    self.remove_entries(t, head, h.data());
                    self.rewrite_own(t, tid, h, row);
                    h.tombstone.store(false, Ordering::Release);
                    self.index_secondary(t, tid, head, None, row, true);
                    if let Some(rec) = self.recording.as_mut() {
                        rec.note_write(&t.schema, t.id, row, crate::history::WriteKind::Update);
                    }
                    return self.entered_indexes(t, None, row);
                }
                Some(h) => {
                    if !h.is_tombstone() {
                        self.note_read(t, tid, head);
                        self.raise()?;
                        return Err(self.unless_stale_read(dup()));
                    }
                    self.note_read(t, tid, head);
                    self.raise()?;
                    if self.st.protocol.single_version() {
                        // Buffered like an update: installed over the tombstone at commit
                        // (2PL write-locks the tombstone first).
                        if cc::locks_on_write(self.st.protocol) {
                            if let Err(reason) = self.lock_for_write(t, h) {
                                return Err(self.fail(reason));
                            }
                        }
                        let n = self.new_version(t, tid, row, ptr::null_mut(), ptr::null());
                        return self.finish_write(
                            t,
                            tid,
                            n,
                            head,
                            Some(crate::history::WriteKind::Insert),
                            row,
                            None,
                        );
                    }
                    if let Err(reason) = self.lock_for_write(t, h) {
                        return Err(self.fail(reason));
                    }
                    #[cfg(test)]
                    tests::pause_point(tests::Pause::ReviveTombstone);
                    let n = self.new_version(t, tid, row, t.next_for_new(head), head);
                    // Install with a CAS, not a store: GC may just have cut this deleted row's
                    // whole chain (entry → null, tombstone freed after the epoch), and a store
                    // would link our version to freed memory. Losing that race (or finding an
                    // aborted writer's version still on top) is a write-write conflict.
                    bump(&self.slot().stats.record_rmw, 1);
                    let installed = t.entry(tid).is_some_and(|e| t.publish_cas(e, head, n));
                    if !installed {
                        self.unlock_version(h);
                        // SAFETY: never published.
                        unsafe { self.discard_version(t, n, false) };
                        return Err(self.fail(AbortReason::WriteWriteConflict));
                    }
                    self.place_row(t, tid, n, head, Some(row));
                    return self.finish_write(
                        t,
                        tid,
                        n,
                        head,
                        Some(crate::history::WriteKind::Insert),
                        row,
                        None,
                    );
                }
            }
        }
    }

    /// A new version of `tid` holding `row` (under in-place storage a header: the caller
    /// writes `row` into the master with `place_row` once it may).
    /// `prev`: the version it supersedes (null for a new row), locked by us.
    pub(super) fn new_version(
        &self,
        t: &Table,
        tid: TupleId,
        row: &[u8],
        next: *mut Version,
        prev: *const Version,
    ) -> *mut Version {
        let space =
            crate::version::space::for_slot(self.st.db.config.memory_spaces, self.st.slot_idx);
        let (n, extra, record) = t.alloc_version(self.st.id.word(), tid, row, next, space, prev);
        let slot = self.slot();
        bump(&slot.stats.versions_allocated, 1);
        bump(
            &slot.stats.version_bytes_allocated,
            (t.version_bytes() + extra) as u64,
        );
        if record > 0 {
            bump(&slot.stats.record_bytes, record as u64);
        }
        n
    }

    /// `Table::place_row` (as the owner of the lock on `tid`'s newest version, `row` becomes
    /// the row the store keeps apart from the versions, if it does) with the transaction's
    /// scratch buffer, counting the images it makes. `new`: our version that holds `row`;
    /// `prev`: the version it supersedes (null: none), locked by us.
    pub(super) fn place_row(
        &mut self,
        t: &Table,
        tid: TupleId,
        new: *const Version,
        prev: *const Version,
        row: Option<&[u8]>,
    ) {
        let mut scratch = std::mem::take(&mut self.local.image_buf);
        let bytes =
            self.as_writer(|w| t.place_row(tid, new, prev, row, &mut scratch, w, &self.guard));
        self.local.image_buf = scratch;
        self.account_extra(bytes);
    }

    /// This transaction as a writer of `siro` storage (`version::siro::Writer`: its slot's
    /// open segments and counters, and Begin/End words resolved through the transaction
    /// table), for `f`.
    fn as_writer<R>(&self, f: impl FnOnce(crate::version::siro::Writer<'_>) -> R) -> R {
        let txns = &self.st.db.txns;
        let resolve = |w: u64| txns.end_ts_of(w);
        f(crate::version::siro::Writer {
            slot: self.st.slot_idx,
            stats: &self.slot().stats.siro,
            resolve: &resolve,
        })
    }

    /// `Table::rewrite_own` (our own newest version `h` of `tid` gets `row`) with the
    /// transaction's scratch buffer, counting what it allocates and frees.
    pub(super) fn rewrite_own(&mut self, t: &Table, tid: TupleId, h: &Version, row: &[u8]) {
        self.memo_forget_write(h);
        let mut scratch = std::mem::take(&mut self.local.image_buf);
        let extra = self.as_writer(|w| t.rewrite_own(tid, h, row, &mut scratch, w, &self.guard));
        self.local.image_buf = scratch;
        self.account_blobs(extra);
    }

    /// A new version with `row` replacing `head`: linked as the store orders its chain
    /// (`Table::next_for_new`) under a multi-version protocol, alone under a single-version
    /// one (a buffered write, installed in place of `head` at commit). Recovery's replay runs
    /// MVOCC on single-version storage too, so its versions are chained.
    pub(super) fn replacing_version(
        &self,
        t: &Table,
        tid: TupleId,
        row: &[u8],
        head: *mut Version,
    ) -> *mut Version {
        let next = if self.st.protocol.single_version() {
            ptr::null_mut()
        } else {
            t.next_for_new(head)
        };
        self.new_version(t, tid, row, next, head)
    }

    /// Counts `bytes` allocated for versions besides their blocks (non-inline blobs).
    pub(super) fn account_extra(&self, bytes: usize) {
        if bytes > 0 {
            bump(&self.slot().stats.version_bytes_allocated, bytes as u64);
        }
    }

    /// Counts the blobs an own version's overwrite made and freed (`Table::rewrite_own`).
    pub(super) fn account_blobs(&self, (made, freed): (usize, usize)) {
        self.account_extra(made);
        if freed > 0 {
            bump(&self.slot().stats.version_bytes_reclaimed, freed as u64);
        }
    }

    /// Frees `n`, a version of ours that will never commit, with the non-inline blobs it held
    /// the last references to, and counts them reclaimed: at once if it was never published,
    /// else after the epoch (readers may be on it).
    ///
    /// # Safety
    /// `n` is our version of `t`, unreachable for threads that pin from now on (for
    /// `published`) or never published, and discarded once.
    pub(super) unsafe fn discard_version(&self, t: &Table, n: *mut Version, published: bool) {
        let mut zeroed = Vec::new();
        let blobs = (*n).drop_blob_refs(&mut zeroed);
        let token = (*n).token() | Version::BLOBS_DROPPED;
        let slot = self.slot();
        bump(&slot.stats.versions_reclaimed, 1);
        bump(
            &slot.stats.version_bytes_reclaimed,
            (t.version_bytes() + blobs) as u64,
        );
        let p = n as usize;
        let free = move || {
            Version::free_token(p as *mut Version, token);
            for b in zeroed {
                crate::version::non_inline::dealloc_blob(b);
            }
        };
        if published {
            self.guard.defer_unchecked(free);
        } else {
            free();
        }
    }

    /// `finish_write` of an update: `n` replaces `head`, `row` replaces `old`.
    fn finish_update(
        &mut self,
        t: &Table,
        tid: TupleId,
        n: *mut Version,
        head: *mut Version,
        row: &[u8],
        old: &[u8],
    ) -> Result<()> {
        let kind = Some(crate::history::WriteKind::Update);
        self.finish_write(t, tid, n, head, kind, row, Some(old))
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn finish_write(
        &mut self,
        t: &Table,
        tid: TupleId,
        new: *mut Version,
        old: *mut Version,
        kind: Option<crate::history::WriteKind>,
        row: &[u8],
        before: Option<&[u8]>,
    ) -> Result<()> {
        self.st.sets.write_set.push(WriteRecord {
            table: t.id,
            tid,
            new,
            old,
        });
        self.index_secondary(t, tid, new, before, row, false);
        if let Some(rec) = self.recording.as_mut() {
            rec.note_write(
                &t.schema,
                t.id,
                row,
                kind.unwrap_or(crate::history::WriteKind::Insert),
            );
        }
        self.entered_indexes(t, before, row)
    }

    /// Adds the secondary-index entries of `row`, the data of version `v` (idempotent for
    /// keys already present). `before`: the data `row` supersedes (an update's), whose
    /// entries exist already; under logical pointers (thesis §5.6) entries are never removed,
    /// and an index whose key the update leaves unchanged is not touched: they cost index
    /// work only when a key changes. Under `physical` a new version needs an entry in every
    /// index; `in_place` says `v` itself held `before` (our own version, changed again), so
    /// only a changed key's entry moves.
    #[inline]
    pub(super) fn index_secondary(
        &mut self,
        t: &Table,
        tid: TupleId,
        v: *const Version,
        before: Option<&[u8]>,
        row: &[u8],
        in_place: bool,
    ) {
        if t.indexes.len() > 1 {
            self.index_secondaries(t, tid, v, before, row, in_place);
        }
    }

    /// `index_secondary` for a table with secondary indexes.
    fn index_secondaries(
        &mut self,
        t: &Table,
        tid: TupleId,
        v: *const Version,
        before: Option<&[u8]>,
        row: &[u8],
        in_place: bool,
    ) {
        let mut key = std::mem::take(&mut self.local.key_buf2);
        let mut buf = std::mem::take(&mut self.local.entry_buf);
        for i in 1..t.indexes.len() {
            if let Some(b) = before {
                if t.schema.same_key(i, b, row) {
                    if in_place || !t.physical {
                        continue;
                    }
                } else if in_place {
                    t.remove_entry(i, v, b, &mut key, &mut buf);
                }
            }
            t.schema.encode_key_from_row(i, row, &mut key);
            t.add_entry(i, &key, tid, v, row, &mut buf);
        }
        self.local.key_buf2 = key;
        self.local.entry_buf = buf;
    }

    /// `Table::remove_entries` with the transaction's scratch buffers.
    pub(super) fn remove_entries(&mut self, t: &Table, v: *const Version, row: &[u8]) {
        let mut key = std::mem::take(&mut self.local.key_buf2);
        let mut buf = std::mem::take(&mut self.local.entry_buf);
        t.remove_entries(v, row, &mut key, &mut buf);
        self.local.key_buf2 = key;
        self.local.entry_buf = buf;
    }

    /// Write-time uniqueness check of the unique secondary indexes for `row` of tuple `own`.
    /// (Re-checked at commit, see `cc/mvocc.rs`.)
    pub(super) fn check_unique(
        &mut self,
        t: &Table,
        row: &[u8],
        own: Option<TupleId>,
    ) -> Result<()> {
        for i in 1..t.indexes.len() {
            if !t.schema.indexes[i].unique {
                continue;
            }
            match crate::cc::mvocc::unique_holder(&self.st, &self.cc, t, i, row, own, None) {
                crate::cc::mvocc::UniqueCheck::Free => {}
                crate::cc::mvocc::UniqueCheck::Taken => {
                    let e = Error::DuplicateKey {
                        table: t.schema.name.clone(),
                        index: t.schema.indexes[i].name.clone(),
                    };
                    return Err(self.unless_stale_read(e));
                }
                crate::cc::mvocc::UniqueCheck::Contended => {
                    return Err(self.fail(AbortReason::UniqueConflict))
                }
            }
        }
        Ok(())
    }

    /// The live row with primary key `key` that a write applies to: its tuple id, the chain
    /// head (the version to supersede, or our own version) and whether the head is ours.
    /// `NotFound` if there is no such row in our snapshot (recorded as a point read).
    pub(super) fn live_row_for_write<K: Values + ?Sized>(
        &mut self,
        t: &Table,
        key: &K,
    ) -> Result<(TupleId, *mut Version, bool)> {
        self.begin_write(t)?;
        let own = self.point_key(t, key)?;
        self.live_row_at(t, own)
    }

    /// `live_row_for_write` for the primary key already encoded in `local.key_buf`.
    pub(super) fn live_row_at_key(&mut self, t: &Table) -> Result<(TupleId, *mut Version, bool)> {
        self.live_row_at(t, None)
    }

    /// `live_row_for_write` for the encoded primary key `own`, or the one in
    /// `local.key_buf` when `None`.
    fn live_row_at(
        &mut self,
        t: &Table,
        own: Option<&[u8]>,
    ) -> Result<(TupleId, *mut Version, bool)> {
        let not_found = |t: &Table| Error::NotFound {
            table: t.schema.name.clone(),
        };
        let tid = self.primary_tid(t, own);
        let Some(tid) = tid else {
            self.fill_key_buf(own);
            self.note_miss(t, false);
            return Err(self.unless_stale_read(not_found(t)));
        };
        if self.in_heal_read_phase() && self.inserted_by_another(t, tid) {
            // The UPDATE's or DELETE's read of the row, past an uncommitted insert as a
            // read's (`in_heal_read_phase`): no row, the key recorded as a miss.
            bump(&self.slot().stats.heal_reads_past_inserts, 1);
            self.fill_key_buf(own);
            self.note_miss(t, false);
            return Err(self.unless_stale_read(not_found(t)));
        }
        let (head, mine) = self.write_target(t, tid)?;
        // SAFETY: pinned.
        match unsafe { head.as_ref() } {
            Some(h) if !h.is_tombstone() => Ok((tid, head, mine)),
            h => {
                if h.is_some() && !mine {
                    self.note_read(t, tid, head);
                }
                self.fill_key_buf(own);
                self.note_miss(t, false);
                Err(self.unless_stale_read(not_found(t)))
            }
        }
    }

    /// Updates the row with primary key `key` through `f`, which sees the current values and
    /// sets new ones. Nothing is changed if `f` fails.
    pub fn update_with<K: Values + ?Sized>(
        &mut self,
        t: &TableRef,
        key: &K,
        f: impl FnOnce(&mut RowMut<'_>) -> Result<()>,
    ) -> Result<()> {
        let (tid, head, mine) = self.live_row_for_write(t, key)?;
        self.update_found(t, tid, head, mine, f)
    }

    /// Recovery: the row with encoded primary key `key` becomes `row` (inserted, or
    /// replacing the row there), or is deleted if `row` is `None` (nothing if there is none).
    /// A row `TableSchema::check_row` refuses changes nothing.
    pub(crate) fn replay_set(
        &mut self,
        t: &TableRef,
        key: &[u8],
        row: Option<&[u8]>,
    ) -> Result<()> {
        if let Some(row) = row {
            t.schema.check_row(row)?;
        }
        let found = self.replay_find(t, key);
        match (found, row) {
            (Ok((tid, head, mine)), Some(row)) => self.update_found(t, tid, head, mine, |r| {
                r.data.copy_from_slice(row);
                Ok(())
            }),
            (Ok((tid, head, mine)), None) => self.delete_found(t, tid, head, mine),
            (Err(Error::NotFound { .. }), Some(row)) => self.insert_raw(t, row),
            (Err(Error::NotFound { .. }), None) => Ok(()),
            (Err(e), _) => Err(e),
        }
    }

    /// Recovery: applies `f` to the bytes of the row with encoded primary key `key`
    /// (`Error::NotFound` if there is none). A result `TableSchema::check_row` refuses is
    /// refused, and changes nothing (as a failing `f`).
    pub(crate) fn replay_update(
        &mut self,
        t: &TableRef,
        key: &[u8],
        f: impl FnOnce(&mut [u8]) -> Result<()>,
    ) -> Result<()> {
        let (tid, head, mine) = self.replay_find(t, key)?;
        self.update_found(t, tid, head, mine, |r| {
            f(r.data)?;
            r.schema.check_row(r.data)
        })
    }

    /// Recovery: the live row with encoded primary key `key`, write-locked as for a write.
    pub(super) fn replay_find(
        &mut self,
        t: &TableRef,
        key: &[u8],
    ) -> Result<(TupleId, *mut Version, bool)> {
        self.begin_write(t)?;
        self.local.key_buf.clear();
        self.local.key_buf.extend_from_slice(key);
        self.live_row_at_key(t)
    }

    pub(super) fn update_found(
        &mut self,
        t: &Table,
        tid: TupleId,
        head: *mut Version,
        mine: bool,
        f: impl FnOnce(&mut RowMut<'_>) -> Result<()>,
    ) -> Result<()> {
        let mut ob = std::mem::take(&mut self.local.old_buf);
        let r = self.update_head(t, tid, head, mine, &mut ob, f);
        self.local.old_buf = ob;
        r
    }

    /// `update_found` with `ob`, scratch for the row of `head` under in-place storage.
    pub(super) fn update_head(
        &mut self,
        t: &Table,
        tid: TupleId,
        head: *mut Version,
        mine: bool,
        ob: &mut Vec<u8>,
        f: impl FnOnce(&mut RowMut<'_>) -> Result<()>,
    ) -> Result<()> {
        // SAFETY: pinned; live_row_for_write returned a non-null head.
        let h = unsafe { &*head };
        if !mine {
            // (`master_opt` only once the table is known to be `siro`'s: an inline version
            // has no master word.)
            if let Some(store) = t.siro.as_deref() {
                if let (Some(m), Some(_)) = (h.master_opt(), crate::version::siro::slot_index(h)) {
                    return self.update_in_slot(t, tid, h, store, m, f);
                }
            }
        }
        let old = t.row(h, ob);
        if !mine {
            // An update reads the row it replaces (`SET bal = bal + v`; the WHERE that found
            // it): the history says which version, so a lost update is a cycle the checker
            // sees even when no SELECT read the row first.
            if let Some(rec) = self.recording.as_mut() {
                rec.note_read(&t.schema, t.id, h, old, &self.st.db.txns);
            }
        }
        if mine {
            let (row, r) = self.scratch_update(t, tid, old, f);
            let mut r = r;
            if r.is_ok() {
                self.index_secondary(t, tid, head, Some(old), &row, true);
                // MVTO: the indexes the row moves into, checked once their entries exist;
                // `h` still holds the old values.
                r = self.entered_indexes(t, Some(old), &row);
            }
            if r.is_ok() {
                self.rewrite_own(t, tid, h, &row);
                if let Some(rec) = self.recording.as_mut() {
                    rec.note_write(&t.schema, t.id, &row, crate::history::WriteKind::Update);
                }
            }
            self.local.row_buf = row;
            return r;
        }
        // Versions not holding the row as it is written (in place; non-inline stored
        // form) are made from a row built in scratch.
        if t.rows_copied() {
            return self.update_via_scratch(t, tid, head, old, f);
        }
        // Build the new version directly (one row copy): a failing f frees the unpublished
        // version, so nothing is left behind. On single-version storage it stays private
        // until commit (a buffered write; 2PL holds the write lock meanwhile, Silo takes it
        // at commit) and is installed alone, never chained.
        let silo = self.st.protocol.single_version();
        let locks = cc::locks_on_write(self.st.protocol);
        let n = self.replacing_version(t, tid, old, head);
        // SAFETY: n is fresh and unpublished; only we reference it.
        let r = f(&mut RowMut {
            schema: &t.schema,
            data: unsafe { (*n).data_mut() },
        });
        // SAFETY: the mutable borrow above has ended; n is still ours alone.
        let new_row = unsafe { (*n).data() };
        let r = r.and_then(|_| self.check_unique_changed(t, old, new_row, tid));
        let r = r.and_then(|_| {
            if !locks {
                return Ok(());
            }
            self.lock_for_write(t, h)
                .map_err(Error::SerializationFailure)
        });
        if let Err(e) = r {
            // SAFETY: never published.
            unsafe { self.discard_version(t, n, false) };
            if let Error::SerializationFailure(reason) = e {
                return Err(self.fail(reason));
            }
            return Err(e);
        }
        if !silo {
            if let Some(e) = t.entry(tid) {
                t.publish(e, head, n);
            }
        }
        self.finish_update(t, tid, n, head, new_row, old)
    }

    /// Before an update of `h` built in scratch (`update_via_scratch`) or, under `siro`, in
    /// the freed slot (`update_in_slot`): the lines it will
    /// write, asked for (PREFETCHW) so that their misses overlap the row copy and the lock
    /// before the writes — the new version's block (a recycled one has usually left the
    /// cache) and, under `siro`, the master slot it fills. Not for inline storage, whose
    /// update writes its new version at once (there it cost 4 % more instructions per YCSB
    /// transaction and gained no throughput).
    #[inline(never)]
    fn prefetch_update_targets(&self, t: &Table, h: &Version) {
        let space =
            crate::version::space::for_slot(self.st.db.config.memory_spaces, self.st.slot_idx);
        let size = t.version_bytes();
        if let Some(b) = Version::next_block(size, space) {
            super::prefetch_range_for_write(b, size);
        }
        if let Some((p, len)) = t.update_target(h) {
            super::prefetch_range_for_write(p, len);
        }
    }

    /// An update of another transaction's version `head` (whose row is `old`) under
    /// in-place storage (`siro`: only a `head` in no slot, see `update_in_slot`) or
    /// non-inline attributes: the new row is built in a scratch buffer,
    /// then the version (a header, or the stored form) is published and, in place, the
    /// master written (`place_row`).
    pub(super) fn update_via_scratch(
        &mut self,
        t: &Table,
        tid: TupleId,
        head: *mut Version,
        old: &[u8],
        f: impl FnOnce(&mut RowMut<'_>) -> Result<()>,
    ) -> Result<()> {
        // SAFETY: pinned; a live head.
        let h = unsafe { &*head };
        self.prefetch_update_targets(t, h);
        let (row, r) = self.scratch_update(t, tid, old, f);
        let r = r.and_then(|_| {
            self.lock_for_write(t, h)
                .map_err(Error::SerializationFailure)
        });
        if let Err(e) = r {
            self.local.row_buf = row;
            if let Error::SerializationFailure(reason) = e {
                return Err(self.fail(reason));
            }
            return Err(e);
        }
        let n = self.replacing_version(t, tid, &row, head);
        if let Some(e) = t.entry(tid) {
            t.publish(e, head, n);
        }
        self.place_row(t, tid, n, head, Some(&row));
        let r = self.finish_update(t, tid, n, head, &row, old);
        self.local.row_buf = row;
        r
    }

    /// An update of another transaction's version `h`, the newest, which owns a record
    /// slot under `siro` storage: one row copy, as under `n2o`. The lock on `h` is taken
    /// first, so `h`'s slot holds still and is read where it is; the other slot is freed
    /// (`SiroStore::take_slot`), `h`'s row copied into it and `f` applied there
    /// (`Master::write_from`). A failing `f` (or unique check) leaves that slot unowned —
    /// vDriver's undo by toggle: no version names it — and releases the lock, so nothing is
    /// left behind. (`update_via_scratch`, which the other in-place stores use, copies the
    /// row out of the master, again into scratch, and from scratch into the master.)
    fn update_in_slot(
        &mut self,
        t: &Table,
        tid: TupleId,
        h: &Version,
        store: &crate::version::siro::SiroStore,
        m: &crate::version::master::Master,
        f: impl FnOnce(&mut RowMut<'_>) -> Result<()>,
    ) -> Result<()> {
        self.prefetch_update_targets(t, h);
        if let Err(reason) = self.lock_for_write(t, h) {
            return Err(self.fail(reason));
        }
        let len = t.schema.row_size;
        // Only a writer holding the lock on the newest version re-tags a version, and only
        // ones below the newest: `h`'s slot is the one seen before the lock.
        let Some(kh) = crate::version::siro::slot_index(h) else {
            self.unlock_version(h);
            debug_assert!(
                false,
                "the newest siro version lost its slot under our lock"
            );
            return Err(self.fail(cc::write_conflict(self.st.protocol)));
        };
        let old = m.owned_at(kh * len, len);
        // An update reads the row it replaces (as `update_head` notes it).
        if let Some(rec) = self.recording.as_mut() {
            rec.note_read(&t.schema, t.id, h, old, &self.st.db.txns);
        }
        let k = self.as_writer(|w| store.take_slot(w, m, len, Some(h), &self.guard));
        let schema = &t.schema;
        let r = m.write_from(k * len, kh * len, len, |data, _| {
            f(&mut RowMut { schema, data })
        });
        let new = m.owned_at(k * len, len);
        if let Err(e) = r.and_then(|_| self.check_unique_changed(t, old, new, tid)) {
            self.unlock_version(h);
            if let Error::SerializationFailure(reason) = e {
                return Err(self.fail(reason));
            }
            return Err(e);
        }
        let head = h as *const Version as *mut Version;
        let n = self.replacing_version(t, tid, new, head);
        // SAFETY: fresh and unpublished; only we reference it.
        crate::version::siro::tag(unsafe { &*n }, k);
        if let Some(e) = t.entry(tid) {
            t.publish(e, head, n);
        }
        self.finish_update(t, tid, n, head, new, old)
    }

    /// Applies `f` to a copy of `old` (in the slot's row buffer, which the caller gives
    /// back) so a failing `f` leaves nothing behind, and checks the unique keys it changes.
    pub(super) fn scratch_update(
        &mut self,
        t: &Table,
        tid: TupleId,
        old: &[u8],
        f: impl FnOnce(&mut RowMut<'_>) -> Result<()>,
    ) -> (Vec<u8>, Result<()>) {
        let mut row = std::mem::take(&mut self.local.row_buf);
        row.clear();
        row.extend_from_slice(old);
        let r = f(&mut RowMut {
            schema: &t.schema,
            data: &mut row,
        });
        let r = r.and_then(|_| self.check_unique_changed(t, old, &row, tid));
        (row, r)
    }

    pub(super) fn check_unique_changed(
        &mut self,
        t: &Table,
        old: &[u8],
        new: &[u8],
        tid: TupleId,
    ) -> Result<()> {
        let changed = (1..t.indexes.len()).any(|i| {
            t.schema.indexes[i].unique
                && t.schema.indexes[i]
                    .columns
                    .iter()
                    .any(|&c| t.schema.read_column(old, c) != t.schema.read_column(new, c))
        });
        if changed {
            self.check_unique(t, new, Some(tid))
        } else {
            Ok(())
        }
    }

    /// Sets the given columns (by position) of the row with primary key `key`.
    pub fn update<K: Values + ?Sized, V: ToValueRef>(
        &mut self,
        t: &TableRef,
        key: &K,
        sets: &[(usize, V)],
    ) -> Result<()> {
        self.update_with(t, key, |row| {
            for (c, v) in sets {
                row.set(*c, v.to_value_ref())?;
            }
            Ok(())
        })
    }

    /// Deletes the row with primary key `key`.
    pub fn delete<K: Values + ?Sized>(&mut self, t: &TableRef, key: &K) -> Result<()> {
        let (tid, head, mine) = self.live_row_for_write(t, key)?;
        self.delete_found(t, tid, head, mine)
    }

    pub(super) fn delete_found(
        &mut self,
        t: &Table,
        tid: TupleId,
        head: *mut Version,
        mine: bool,
    ) -> Result<()> {
        // SAFETY: pinned; live_row_for_write returned a non-null head.
        let h = unsafe { &*head };
        if mine {
            self.memo_forget_write(h);
            h.tombstone.store(true, Ordering::Release);
            if let Some(rec) = self.recording.as_mut() {
                let mut rb = Vec::new();
                rec.note_write(
                    &t.schema,
                    t.id,
                    t.row(h, &mut rb),
                    crate::history::WriteKind::Delete,
                );
            }
            return Ok(());
        }
        // A delete reads the row it removes (that it exists), as an update does.
        if let Some(rec) = self.recording.as_mut() {
            let mut rb = Vec::new();
            rec.note_read(&t.schema, t.id, h, t.row(h, &mut rb), &self.st.db.txns);
        }
        let silo = self.st.protocol.single_version();
        if cc::locks_on_write(self.st.protocol) {
            if let Err(reason) = self.lock_for_write(t, h) {
                return Err(self.fail(reason));
            }
        }
        let mut ob = std::mem::take(&mut self.local.old_buf);
        let n = self.replacing_version(t, tid, t.row(h, &mut ob), head);
        // SAFETY: unpublished.
        unsafe { (*n).tombstone.store(true, Ordering::Release) };
        if !silo {
            if let Some(e) = t.entry(tid) {
                t.publish(e, head, n);
            }
        }
        // The deleted version keeps its values (the master does not change).
        self.place_row(t, tid, n, head, None);
        self.st.sets.write_set.push(WriteRecord {
            table: t.id,
            tid,
            new: n,
            old: head,
        });
        if let Some(rec) = self.recording.as_mut() {
            rec.note_write(
                &t.schema,
                t.id,
                t.row(h, &mut ob),
                crate::history::WriteKind::Delete,
            );
        }
        self.local.old_buf = ob;
        Ok(())
    }
}
