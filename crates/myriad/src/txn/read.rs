//! Reads: point reads, secondary lookups, range and whole-table scans, prefetch, and what a
//! read records (`note_read`, `push_scan`, `note_miss`: the read and scan sets and the
//! protocol's `cc::on_read`, `cc::on_scan`, `cc::on_miss` hooks).

use super::*;

impl<'db> Transaction<'db> {
    /// `mv2pl-wait`: a locked range holds row `tid` with no version visible to us.
    pub(super) fn unseen_row(&self, t: &Table, tid: TupleId) {
        if self.range_locking() {
            if let Err(reason) = crate::cc::mv2pl::unseen_row(&self.st, t, tid) {
                self.doom(reason);
            }
        }
    }

    #[inline]
    pub(super) fn is_mine(&self, v: &Version) -> bool {
        v.begin.load(Ordering::Acquire) == self.st.id.word()
    }

    /// `e`, a duplicate or missing key the application will see — unless the protocol
    /// validates reads only at commit (Silo, OCC: `cc::fails_stale_reads_early`) and a record
    /// the transaction read has been replaced since: then the error may come from that stale
    /// read (two New-Orders that read one `d_next_o_id` insert the same order), and the
    /// transaction aborts with `read_validation`, as its commit would.
    pub(super) fn unless_stale_read(&mut self, e: Error) -> Error {
        if !cc::fails_stale_reads_early(self.st.protocol) {
            return e;
        }
        let me = self.st.id.word();
        // What it read, and what its buffered writes read (an UPDATE's row, which a
        // `SET x = x + 1` reads without a SELECT).
        let bases = self
            .st
            .sets
            .write_set
            .iter()
            .map(|w| w.old as *const Version);
        let stale = self.st.sets.read_set.iter().copied().chain(bases).any(|v| {
            // SAFETY: pinned since the read.
            let end = unsafe { v.as_ref() }.map_or(INFINITY, |v| v.end.load(Ordering::Acquire));
            end != INFINITY && end != me
        });
        if stale && self.healable {
            // Its commit heals the call: locks what it read and re-executes it.
            self.heal_requested = true;
            Error::SerializationFailure(AbortReason::ReadValidation)
        } else if stale {
            self.fail(AbortReason::ReadValidation)
        } else {
            e
        }
    }

    /// A single-version protocol's read of `tid`: our buffered write, else the record's one version (null if it
    /// has none, or an aborted insert is being unlinked). A record another transaction is
    /// still inserting is locked: the read dooms the transaction, as Silo's validation of it
    /// would (`cc/silo.rs`) — except in a healable call's read phase, which reads past it
    /// as absent (`in_heal_read_phase`).
    pub(super) fn single_version_read(&self, t: &Table, tid: TupleId) -> *const Version {
        if !self.st.sets.write_set.is_empty() {
            if let Some(n) = self.st.pending_write(t.id, tid) {
                return n;
            }
        }
        let Some(e) = t.entry(tid) else {
            return ptr::null();
        };
        let h = e.load(Ordering::Acquire);
        // SAFETY: pinned.
        let Some(v) = (unsafe { h.as_ref() }) else {
            return ptr::null();
        };
        let b = v.begin.load(Ordering::Acquire);
        if b == INFINITY {
            return ptr::null();
        }
        if crate::version::is_txn(b) && b != self.st.id.word() {
            if self.in_heal_read_phase() {
                bump(&self.slot().stats.heal_reads_past_inserts, 1);
                return ptr::null();
            }
            self.doom(cc::read_conflict(self.st.protocol));
            return ptr::null();
        }
        h
    }

    /// `healing`, a healable call before its commit (its read phase, holding no lock):
    /// - a read that meets another transaction's uncommitted insert takes the row as absent
    ///   instead of aborting (spec A.4 R4, the thesis's first insert scenario, §3.4.7: the
    ///   tuple is in the read set but invisible). Every read path that gets no row records
    ///   the key or range it looked at (`note_miss`, `push_scan`), so the commit's re-check
    ///   (`cc/silo.rs` `rescan`, after every row is locked) finds the row if the insert
    ///   committed, or still locked if it has not, and heals the call; an insert that
    ///   aborted leaves nothing to find. An UPDATE or DELETE reads its row the same way
    ///   (`live_row_at`);
    /// - an INSERT of a key another transaction is inserting waits that insert out
    ///   (`await_insert`; waiting cannot close a cycle while no lock is held). Its commit
    ///   then makes the call's earlier reads stale, which the commit heals (TPC-C: two
    ///   New-Orders that read one `d_next_o_id` insert the same order; the thesis's Cavalia
    ///   buffers inserts until validation, so the second never meets the first's insert).
    ///
    /// Not in a heal's re-run, which holds its locks: a row still being inserted there
    /// aborts the call (`read_validation`, an UPDATE's, DELETE's or INSERT's
    /// `write_write_conflict`), as a failed no-wait lock would.
    #[inline]
    pub(super) fn in_heal_read_phase(&self) -> bool {
        self.healable && self.heals == 0 && !self.heal_requested
    }

    /// Single-version storage: row `tid` of `t` holds another transaction's uncommitted
    /// insert (a version whose Begin is a transaction id; updates stay private until their
    /// install) and no buffered write of ours.
    pub(super) fn inserted_by_another(&self, t: &Table, tid: TupleId) -> bool {
        let Some(e) = t.entry(tid) else {
            return false;
        };
        // SAFETY: pinned.
        let inserting = unsafe { e.load(Ordering::Acquire).as_ref() }.is_some_and(|v| {
            let b = v.begin.load(Ordering::Acquire);
            crate::version::is_txn(b) && b != self.st.id.word()
        });
        // The record first: the write set's search is linear, and nearly every row is
        // committed.
        inserting && self.st.pending_write(t.id, tid).is_none()
    }

    /// Waits, up to `INSERT_WAIT`, for `v` — inserted by the transaction whose id is `b`, not
    /// yet committed — to be committed or aborted. True if it was.
    pub(super) fn await_insert(&self, v: &Version, b: u64) -> bool {
        const INSERT_WAIT: std::time::Duration = std::time::Duration::from_millis(2);
        let backoff = crossbeam_utils::Backoff::new();
        let mut since = None;
        loop {
            if v.begin.load(Ordering::Acquire) != b {
                return true;
            }
            if backoff.is_completed() {
                let start = *since.get_or_insert_with(std::time::Instant::now);
                if start.elapsed() > INSERT_WAIT {
                    return false;
                }
            }
            backoff.snooze();
        }
    }

    /// The visible version of `tid` as of `rt`, or null.
    #[inline]
    pub(crate) fn visible_version(&self, t: &Table, tid: TupleId, rt: Timestamp) -> *const Version {
        if self.st.protocol.single_version() {
            return self.single_version_read(t, tid);
        }
        let Some(e) = t.entry(tid) else {
            return ptr::null();
        };
        let head = e.load(Ordering::Acquire);
        let v = self.resolver().visible_in_chain(head, rt, false);
        self.doom_if_deps_aborted();
        if !std::ptr::eq(v, head) && self.st.db.config.gc == crate::config::GcPolicy::Coop {
            crate::gc::coop::cooperate(self.st.db, self.slot(), t, e, head, &self.guard);
        }
        v
    }

    /// After a read that may have been speculative: a version passed over because its
    /// Preparing writer was assumed to commit may have lost its successor when that writer
    /// aborted and unlinked its own version (O2N: the chain walk ends there, finding nothing;
    /// `physical`: the index entry of the writer's version is gone). What the read found is
    /// then not our snapshot, and a row that exists could be reported missing. That writer
    /// set our AbortNow before the unlink (`rollback` reports, then undoes), so the read
    /// fails as the cascading abort it is.
    #[inline]
    fn doom_if_deps_aborted(&self) {
        if self.st.took_deps.get() && self.slot().deps.pending().1 {
            self.doom(AbortReason::CommitDependency);
        }
    }

    /// `physical` pointers: `exact` if it is visible at `rt`, else null. A serializable
    /// range-locking read still learns whether the row has no visible version at all
    /// (`unseen_row`), which needs the chain.
    pub(super) fn exact_version(
        &self,
        t: &Table,
        tid: TupleId,
        exact: *const Version,
        rt: Timestamp,
    ) -> *const Version {
        // SAFETY: an entry is removed from the index before its version's free is deferred
        // (`Table::remove_entries`), and we are pinned: the version is allocated.
        if self.resolver().visible(unsafe { &*exact }, rt) {
            return exact;
        }
        self.doom_if_deps_aborted();
        if self.range_locking() && self.visible_version(t, tid, rt).is_null() {
            self.unseen_row(t, tid);
        }
        ptr::null()
    }

    /// Records that we read `v` (for validation and the history).
    #[inline]
    pub(super) fn note_read(&mut self, t: &Table, tid: TupleId, v: *const Version) {
        // SAFETY: v is a visible version of a chain we are pinned on.
        let r = unsafe { &*v };
        if self.is_mine(r) {
            if self.st.protocol.single_version() {
                // A row we have a buffered write on counts as a read of the version that
                // write read, so a predicate re-check finds it read by this scan.
                let base = self
                    .st
                    .sets
                    .write_set
                    .iter()
                    .rev()
                    .find(|w| std::ptr::eq(w.new, v));
                if let Some(old) = base.map(|w| w.old).filter(|o| !o.is_null()) {
                    self.st.sets.read_set.push(old);
                    if self.st.keys_reads {
                        self.st.sets.read_keys.push(cc::healing::key(t, tid));
                    }
                }
            }
            return;
        }
        if self.st.tracks_reads {
            if let Err(reason) = cc::on_read(&mut self.st, &mut self.cc, &mut self.local.cc, v) {
                // The read fails: nothing of it is kept (MVTO: `v` may already be dead, and
                // `siro` may have dropped its row).
                self.doom(reason);
                return;
            }
        }
        if self.validates_reads() {
            self.st.sets.read_set.push(v);
            if self.st.keys_reads {
                self.st.sets.read_keys.push(cc::healing::key(t, tid));
            }
        }
        if let Some(rec) = self.recording.as_mut() {
            let mut rb = Vec::new();
            rec.note_read(&t.schema, t.id, r, t.row(r, &mut rb), &self.st.db.txns);
        }
    }

    pub(super) fn push_scan(
        &mut self,
        t: &Table,
        index: usize,
        lo: Bound<&[u8]>,
        hi: Bound<&[u8]>,
        point: bool,
        nodes: Option<(u32, u32)>,
    ) -> bool {
        if self.st.isolation != Isolation::Serializable
            || !cc::on_scan(&self.st, t, index as u16)
            || !self.keeps_reads
        {
            return false;
        }
        // A range inside the one the last scan of the same index recorded needs no record
        // of its own: that record's re-check covers every key of it (TPC-C Payment by name
        // counts a customer name's rows, then reads the first half of the same range).
        if !point {
            if let Some(last) = self.st.sets.scan_set.last() {
                let (arena, bound) = (&self.st.sets.scan_keys, crate::cc::mvocc::bound);
                if !last.point
                    && last.table == t.id
                    && last.index == index as u16
                    && range_within((lo, hi), (bound(arena, last.lo), bound(arena, last.hi)))
                {
                    return false;
                }
            }
        }
        let keys = &mut self.st.sets.scan_keys;
        let mut put = |b: Bound<&[u8]>| -> (u8, u32, u32) {
            let start = keys.len() as u32;
            match b {
                Bound::Included(k) => {
                    keys.extend_from_slice(k);
                    (0, start, keys.len() as u32)
                }
                Bound::Excluded(k) => {
                    keys.extend_from_slice(k);
                    (1, start, keys.len() as u32)
                }
                Bound::Unbounded => (2, start, start),
            }
        };
        let lo = put(lo);
        let hi = if point { lo } else { put(hi) };
        let reads = (self.st.sets.op_reads, self.st.sets.read_set.len() as u32);
        self.st.sets.scan_set.push(ScanRecord {
            table: t.id,
            index: index as u16,
            lo,
            hi,
            point,
            reads,
            nodes,
        });
        true
    }

    pub(super) fn note_miss(&mut self, t: &Table, key_is_buf2: bool) {
        let key = if key_is_buf2 {
            std::mem::take(&mut self.local.key_buf2)
        } else {
            std::mem::take(&mut self.local.key_buf)
        };
        self.push_scan(
            t,
            0,
            Bound::Included(&key),
            Bound::Included(&key),
            true,
            None,
        );
        let live = |tid| {
            let v = self.visible_version(t, tid, self.st.begin_ts);
            // SAFETY: pinned; a visible version stays allocated while we are active.
            unsafe { v.as_ref() }.is_some_and(|r| !r.is_tombstone())
        };
        if let Err(reason) = cc::on_miss(&self.st, t, &key, live) {
            self.doom(reason);
        }
        if let Some(rec) = self.recording.as_mut() {
            rec.note_absent(t.id, &key);
        }
        if key_is_buf2 {
            self.local.key_buf2 = key;
        } else {
            self.local.key_buf = key;
        }
    }

    // ------------------------------------------------------------------ reads

    /// Reads the row with primary key `key` and passes it to `f` (no copy).
    pub fn get_with<K: Values + ?Sized, R>(
        &mut self,
        t: &TableRef,
        key: &K,
        f: impl FnOnce(RowRef<'_>) -> R,
    ) -> Result<Option<R>> {
        self.begin_op(t)?;
        let own = self.point_key(t, key)?;
        let rt = self.stmt_ts();
        if self.range_locking() {
            self.fill_key_buf(own);
            let key = std::mem::take(&mut self.local.key_buf);
            crate::cc::mv2pl::range_lock(
                &self.st,
                self.engine_cc,
                &mut self.local.cc.mv2pl,
                t,
                0,
                Some(&key),
                Bound::Unbounded,
                Bound::Unbounded,
            );
            self.local.key_buf = key;
        }
        let tid = self.primary_tid(t, own);
        let (tid, v) = match tid {
            Some(tid) => {
                let v = self.visible_version(t, tid, rt);
                if v.is_null() {
                    self.unseen_row(t, tid);
                }
                (tid, v)
            }
            None => (TupleId::default(), ptr::null()),
        };
        #[cfg(test)]
        tests::pause_point(tests::Pause::Found);
        // SAFETY: visible versions stay allocated while we are active (watermark + pin).
        match unsafe { v.as_ref() } {
            Some(r) if !r.is_tombstone() => {
                self.note_read(t, tid, v);
                self.raise()?;
                let mut rb = std::mem::take(&mut self.local.read_buf);
                let out = f(RowRef {
                    schema: &t.schema,
                    data: t.row(r, &mut rb),
                });
                self.local.read_buf = rb;
                Ok(Some(out))
            }
            Some(_) => {
                self.note_read(t, tid, v);
                self.fill_key_buf(own);
                self.note_miss(t, false);
                self.raise()?;
                Ok(None)
            }
            None => {
                self.fill_key_buf(own);
                self.note_miss(t, false);
                self.raise()?;
                Ok(None)
            }
        }
    }

    /// Primary key `key` of `t` for a point access: a compiled key's own bytes, looked up
    /// where they are (`Some`), else encoded into `local.key_buf` (`None`). `key_buf` gets a
    /// compiled key only on the paths that read it from there (`fill_key_buf`). Always
    /// inlined: as a call it cost TPC-C 0.8 % more instructions.
    #[inline(always)]
    pub(super) fn point_key<'k, K: Values + ?Sized>(
        &mut self,
        t: &Table,
        key: &'k K,
    ) -> Result<Option<&'k [u8]>> {
        if let Some(k) = t.schema.compiled_key(0, key) {
            return Ok(Some(k));
        }
        let mut kb = std::mem::take(&mut self.local.key_buf);
        let enc = t.schema.encode_key_values(0, key, &mut kb);
        self.local.key_buf = kb;
        enc.map(|()| None)
    }

    /// Puts `own`, a compiled point key used in place, into `local.key_buf` for the code
    /// that reads the key from there (`note_miss`, range locks); nothing for `None` (the
    /// key is there already). Out of line: only misses and range locks need it.
    #[cold]
    #[inline(never)]
    pub(super) fn fill_key_buf(&mut self, own: Option<&[u8]>) {
        if let Some(k) = own {
            self.local.key_buf.clear();
            self.local.key_buf.extend_from_slice(k);
        }
    }

    /// Reads the row with primary key `key` as owned values.
    pub fn get<K: Values + ?Sized>(&mut self, t: &TableRef, key: &K) -> Result<Option<Row>> {
        self.get_with(t, key, |r| r.to_row())
    }

    /// An index entry `(key, tid)` resolved to the live row visible at `rt`, recorded as read;
    /// `None` for no visible version, a deleted row, or a stale secondary entry (the row no
    /// longer has `key`). `check` is scratch space for the re-encoded key. `exact`: the
    /// version a `physical` entry points at (null for logical pointers), judged alone: the
    /// entry is a hit only if that version is the one visible at `rt` (another entry of the
    /// row leads to any other version). Under in-place storage a hit's row is left in `rb`
    /// (`hit_row`).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn index_hit(
        &mut self,
        t: &Table,
        index: usize,
        tid: TupleId,
        exact: *const Version,
        key: &[u8],
        rt: Timestamp,
        check: &mut Vec<u8>,
        rb: &mut Vec<u8>,
    ) -> Option<&'db Version> {
        let v = if exact.is_null() {
            let v = self.visible_version(t, tid, rt);
            if v.is_null() {
                self.unseen_row(t, tid);
            }
            v
        } else {
            self.exact_version(t, tid, exact, rt)
        };
        #[cfg(test)]
        tests::pause_point(tests::Pause::Found);
        // SAFETY: visible versions stay allocated while we are active (watermark + pin).
        let r: &'db Version = unsafe { v.as_ref() }?;
        if r.is_tombstone() {
            return None;
        }
        // MVTO: the version is ours only once `on_read` accepts it (`cc::settles_at_on_read`),
        // so that comes before its row is copied; for a stale entry it is a read too many,
        // which can only fail an older writer of this row.
        let settles = cc::settles_at_on_read(self.st.protocol);
        if settles {
            self.note_read(t, tid, v);
            if self.is_doomed() {
                return None;
            }
        }
        if index != 0 || t.rows_copied() {
            let row = t.row(r, rb);
            if index != 0 {
                t.schema.encode_key_from_row(index, row, check);
            }
        }
        if index != 0 && check.as_slice() != key {
            // A stale entry: the row has left this key. On single-version storage the
            // commit-time re-scan sees only the present, one range after another, so a row
            // that moves on twice while we validate could slip past every range we read; the
            // version we judged must itself stay current (validated or read-locked like any
            // read). Multi-version protocols re-check against their snapshot, which does not
            // move.
            if self.st.protocol.single_version() {
                self.note_read(t, tid, v);
            }
            return None;
        }
        if !settles {
            self.note_read(t, tid, v);
            if self.is_doomed() {
                return None;
            }
        }
        Some(r)
    }

    /// Rows whose secondary index `index` (position, see `Table::index`) has key `key`;
    /// `f` returns false to stop. Returns the number of rows passed to `f`.
    pub fn get_by<K: Values + ?Sized>(
        &mut self,
        t: &TableRef,
        index: usize,
        key: &K,
        mut f: impl FnMut(RowRef<'_>) -> bool,
    ) -> Result<usize> {
        self.begin_op(t)?;
        if index == 0 {
            return Ok(self.get_with(t, key, &mut f)?.map_or(0, |_| 1));
        }
        if index >= t.indexes.len() {
            return Err(Error::UnknownIndex {
                table: t.schema.name.clone(),
                index: format!("#{index}"),
            });
        }
        let mut kb = std::mem::take(&mut self.local.key_buf);
        if let Err(e) = t.schema.encode_key_values(index, key, &mut kb) {
            self.local.key_buf = kb;
            return Err(e);
        }
        let rt = self.stmt_ts();
        cc::before_scan(&self.st, t, index);
        if self.range_locking() {
            crate::cc::mv2pl::range_lock(
                &self.st,
                self.engine_cc,
                &mut self.local.cc.mv2pl,
                t,
                index,
                Some(&kb),
                Bound::Unbounded,
                Bound::Unbounded,
            );
        }
        let mut n = 0;
        let mut check = std::mem::take(&mut self.local.key_buf2);
        let mut rb = std::mem::take(&mut self.local.read_buf);
        let this = &mut *self;
        t.lookup_entries(index, &kb, &mut |tid, exact| {
            let Some(r) = this.index_hit(t, index, tid, exact, &kb, rt, &mut check, &mut rb) else {
                return !this.is_doomed();
            };
            n += 1;
            f(RowRef {
                schema: &t.schema,
                data: hit_row(t, r, &rb),
            })
        });
        self.local.key_buf2 = check;
        self.local.read_buf = rb;
        self.push_scan(
            t,
            index,
            Bound::Included(&kb),
            Bound::Included(&kb),
            true,
            None,
        );
        if let Some(rec) = self.recording.as_mut() {
            rec.note_scan(t.id, index, Bound::Included(&kb), Bound::Included(&kb));
        }
        self.local.key_buf = kb;
        self.raise()?;
        Ok(n)
    }

    /// Ordered range scan over index `opts.index` between `lo` and `hi` (key prefixes are
    /// allowed); `f` returns false to stop. Returns the number of rows passed to `f`.
    ///
    /// Under Serializable the requested range is recorded and re-scanned at commit
    /// (Hekaton §3.2); when `limit` or `f` stops the scan early, the range up to the last row
    /// returned is what the transaction observed, and that is what is protected.
    pub fn scan<K: Values + ?Sized>(
        &mut self,
        t: &TableRef,
        lo: Bound<&K>,
        hi: Bound<&K>,
        opts: ScanOptions,
        mut f: impl FnMut(RowRef<'_>) -> bool,
    ) -> Result<usize> {
        self.begin_op(t)?;
        let index = opts.index;
        let Some(idx) = t.indexes.get(index) else {
            return Err(Error::UnknownIndex {
                table: t.schema.name.clone(),
                index: format!("#{index}"),
            });
        };
        if !idx.is_ordered() {
            return Err(Error::Unsupported(format!(
                "range scan on hash index `{}` of `{}`; declare it IndexKind::Ordered",
                t.schema.indexes[index].name, t.schema.name
            )));
        }
        let mut lo_buf = std::mem::take(&mut self.local.bound_lo);
        let mut hi_buf = std::mem::take(&mut self.local.bound_hi);
        let bounds = encode_bounds(&t.schema, index, lo, hi, &mut lo_buf, &mut hi_buf);
        let (lo_b, hi_b) = match bounds {
            Ok((l, h)) => (bound_in(l, &lo_buf), bound_in(h, &hi_buf)),
            Err(e) => {
                (self.local.bound_lo, self.local.bound_hi) = (lo_buf, hi_buf);
                return Err(e);
            }
        };
        let rt = self.stmt_ts();
        cc::before_scan(&self.st, t, index);
        if self.range_locking() {
            // The whole requested range, even if the scan stops early (conservative).
            crate::cc::mv2pl::range_lock(
                &self.st,
                self.engine_cc,
                &mut self.local.cc.mv2pl,
                t,
                index,
                None,
                lo_b,
                hi_b,
            );
        }
        let dir = if opts.descending {
            ScanDirection::Descending
        } else {
            ScanDirection::Ascending
        };
        let limit = opts.limit.unwrap_or(usize::MAX);
        let mut n = 0usize;
        // The key of the row the scan stopped at, if it stopped early.
        let mut stop = std::mem::take(&mut self.local.stop_buf);
        let mut stopped = false;
        let mut stop_tid = TupleId::default();
        let mut check = std::mem::take(&mut self.local.key_buf2);
        let mut rb = std::mem::take(&mut self.local.read_buf);
        // Silo's node set (`ScanRecord::nodes`): the leaves the scan reads, for a protocol
        // whose commit validates the reads that a scan's stamps leave the rows to.
        let mut stamps = std::mem::take(&mut self.st.sets.scan_nodes);
        let stamps_from = stamps.len();
        let stamping = self.validates_reads() && self.st.isolation == Isolation::Serializable;
        let reads_from = self.st.sets.read_set.len();
        let mut met = 0usize;
        let mut stamped = false;
        if limit > 0 {
            let this = &mut *self;
            // The B+tree calls back only with validated entries and holds no latch meanwhile.
            let mut visit = |k: &[u8], tid, exact| {
                met += 1;
                let Some(r) = this.index_hit(t, index, tid, exact, k, rt, &mut check, &mut rb)
                else {
                    return !this.is_doomed();
                };
                n += 1;
                let go_on = f(RowRef {
                    schema: &t.schema,
                    data: hit_row(t, r, &rb),
                });
                if !go_on || n >= limit {
                    stop.clear();
                    stop.extend_from_slice(k);
                    stopped = true;
                    stop_tid = tid;
                    return false;
                }
                true
            };
            stamped = t.scan_index(
                index,
                lo_b,
                hi_b,
                dir,
                &mut visit,
                stamping.then_some(&mut stamps),
            );
        }
        self.local.key_buf2 = check;
        self.local.read_buf = rb;
        // A primary-key scan that stopped at a row (a LIMIT: TPC-C Delivery's oldest new
        // order, which it deletes next) leaves that row's key and tuple id with the recent
        // lookups, as a point lookup would (sound for the same reason: an entry keeps its id).
        if stopped && index == 0 {
            self.local.recent.keep(t.id, &stop, stop_tid);
        }
        // The observed range: up to the last row returned if the scan stopped early. On a
        // secondary index that includes every entry of the stop key (entries are the key
        // plus a suffix, so `Included(key)` alone would leave out the entries of rows
        // before ours under the same key: conservative for those after it).
        let stopped_at = stopped.then_some(stop.as_slice());
        let stop_end = match (stopped_at, opts.descending) {
            (Some(k), false) if index != 0 => Some(prefix_end(k)),
            _ => None,
        };
        let (plo, phi) = match (stopped_at, opts.descending) {
            (Some(_), false) if stop_end.is_some() => (
                lo_b,
                match stop_end.as_ref().and_then(|e| e.as_deref()) {
                    Some(e) => Bound::Excluded(e),
                    None => Bound::Unbounded,
                },
            ),
            (Some(k), false) => (lo_b, Bound::Included(k)),
            (Some(k), true) => (Bound::Included(k), hi_b),
            (None, _) => (lo_b, hi_b),
        };
        // The stamps stand for the recorded range if the leaves cover it (all of it, or up to
        // the row it stopped at — not a secondary index's wider stop range) and every entry
        // the scan met is a read (not an invisible row, a delete or an uncommitted insert,
        // whose change no read validation would see).
        let covered = stop_end.is_none()
            && met == self.st.sets.read_set.len() - reads_from
            && !self.is_doomed();
        let nodes = (stamped && covered).then_some((stamps_from as u32, stamps.len() as u32));
        if nodes.is_none() {
            stamps.truncate(stamps_from);
        }
        self.st.sets.scan_nodes = stamps;
        if !self.push_scan(t, index, plo, phi, false, nodes) {
            self.st.sets.scan_nodes.truncate(stamps_from);
        }
        if let Some(rec) = self.recording.as_mut() {
            rec.note_scan(t.id, index, plo, phi);
        }
        (self.local.bound_lo, self.local.bound_hi) = (lo_buf, hi_buf);
        self.local.stop_buf = stop;
        self.raise()?;
        Ok(n)
    }

    /// Visits every row of `t` visible to this transaction, in tuple-id (insertion) order,
    /// until `f` returns false; returns the number of rows visited. This is the full scan a
    /// query without a usable index needs. Under Serializable the whole table counts as read
    /// (a predicate read that matches every row): a row that a transaction committing between
    /// our begin and end timestamps inserts, deletes or changes aborts us at commit as a
    /// phantom, even if `f` stopped early (conservative). Each visited row is recorded as read.
    pub fn scan_table(
        &mut self,
        t: &TableRef,
        mut f: impl FnMut(RowRef<'_>) -> bool,
    ) -> Result<usize> {
        self.scan_table_tids(t, |_, r| f(r))
    }

    /// `scan_table`, also passing each row's tuple id (checkpoints record them for PLR).
    pub(crate) fn scan_table_tids(
        &mut self,
        t: &TableRef,
        mut f: impl FnMut(TupleId, RowRef<'_>) -> bool,
    ) -> Result<usize> {
        self.begin_op(t)?;
        let rt = self.stmt_ts();
        cc::before_scan(&self.st, t, 0);
        if self.range_locking() {
            // Every row enters the primary index: its whole range covers the table.
            crate::cc::mv2pl::range_lock(
                &self.st,
                self.engine_cc,
                &mut self.local.cc.mv2pl,
                t,
                0,
                None,
                Bound::Unbounded,
                Bound::Unbounded,
            );
        }
        let mut n = 0usize;
        let mut rb = std::mem::take(&mut self.local.read_buf);
        for tid in t.tids() {
            if tid.get() % TABLE_SCAN_REPIN_TIDS == TABLE_SCAN_REPIN_TIDS - 1 && self.may_repin() {
                // No version reference outlives an iteration (the read set is protected by
                // the watermark), so a long scan need not hold back memory reclamation.
                self.guard.repin();
            }
            let v = self.visible_version(t, tid, rt);
            if v.is_null() {
                self.unseen_row(t, tid);
            }
            // SAFETY: visible versions stay allocated while we are active (watermark + pin).
            let Some(r) = (unsafe { v.as_ref() }) else {
                if self.is_doomed() {
                    break;
                }
                continue;
            };
            if r.is_tombstone() {
                continue;
            }
            self.note_read(t, tid, v);
            if self.is_doomed() {
                break;
            }
            n += 1;
            if !f(
                tid,
                RowRef {
                    schema: &t.schema,
                    data: t.row(r, &mut rb),
                },
            ) {
                break;
            }
        }
        self.local.read_buf = rb;
        if self.st.isolation == Isolation::Serializable
            && cc::on_scan(&self.st, t, TABLE_SCAN)
            && self.keeps_reads
        {
            let reads = (self.st.sets.op_reads, self.st.sets.read_set.len() as u32);
            self.st.sets.scan_set.push(ScanRecord {
                table: t.id,
                index: TABLE_SCAN,
                lo: (2, 0, 0),
                hi: (2, 0, 0),
                point: false,
                reads,
                nodes: None,
            });
        }
        if let Some(rec) = self.recording.as_mut() {
            // For the history checker a whole-table read is an unbounded primary-key range.
            rec.note_scan(t.id, 0, Bound::Unbounded, Bound::Unbounded);
        }
        self.raise()?;
        Ok(n)
    }

    /// Like `scan`, returning owned rows.
    pub fn scan_rows<K: Values + ?Sized>(
        &mut self,
        t: &TableRef,
        lo: Bound<&K>,
        hi: Bound<&K>,
        opts: ScanOptions,
    ) -> Result<Vec<Row>> {
        let mut out = Vec::new();
        self.scan(t, lo, hi, opts, |r| {
            out.push(r.to_row());
            true
        })?;
        Ok(out)
    }

    /// Warms the cache for point accesses to `keys` of table `t` (primary key), so that the
    /// `get`/`update`/`delete` calls that follow find index buckets, indirection entries and
    /// chain heads in cache. The lookups of all keys are interleaved stage by stage (bucket,
    /// then indirection entry, then version), so their cache misses overlap instead of being
    /// paid one after another. The tuple ids it finds are remembered for the operations on
    /// the same keys that follow (no second index probe). A prefetch of exactly the keys the
    /// transaction's last prefetch took, in the same table and order, returns at once. Records
    /// no read: it changes no result, only speed.
    pub fn prefetch<K: Values>(&mut self, t: &TableRef, keys: &[K]) -> Result<()> {
        self.begin_op(t)?;
        let idx = &t.indexes[0];
        let mut kb = std::mem::take(&mut self.local.key_buf);
        let mut pf = std::mem::take(&mut self.local.prefetched);
        // The same keys as the prefetch just made (a caller that warms a call's keys, then
        // the procedure's loop warming them again, as `bench ycsb --as-procedure` did: 16 %
        // of its instructions): every tuple id is known and every line requested already.
        // Not during a heal, whose prefetch counts the access cache's answers.
        if pf.table == Some(t.id)
            && !self.local.cc.healing.cache.answering()
            && pf.repeats(&t.schema, keys, &mut kb)
        {
            pf.cursor.set(0);
            self.local.key_buf = kb;
            self.local.prefetched = pf;
            return Ok(());
        }
        pf.clear();
        pf.table = Some(t.id);
        // Three dependent stages (bucket, indirection entry, version), each a batch of misses.
        // Within a stage the prefetches are issued back to back, after the work that computes
        // their addresses (profiles showed the prefetches waiting, likely on page walks, so
        // spacing them out with hashing and encoding let only a few overlap).
        for k in keys {
            // A compiled key's own bytes are copied once, not through `kb`.
            if let Ok(b) = t.schema.encoded_key(0, k, &mut kb) {
                pf.hashes.push(idx.hash_of(b));
                pf.keys.extend_from_slice(b);
                pf.ends.push(pf.keys.len() as u32);
            }
        }
        for &h in &pf.hashes {
            idx.prefetch_hashed(h);
        }
        // `healing`'s access cache: a heal's keys the call looked up before need no lookup.
        let cache = &mut self.local.cc.healing.cache;
        let (mut hits, mut lookups) = (0, 0);
        let mut near = crate::index::btree::GetHint::default();
        for i in 0..pf.hashes.len() {
            let key = pf.key(i);
            let tid = match cache.lookup(t.id, key) {
                Some(tid) => {
                    debug_assert_eq!(idx.get_unique(key), Some(tid));
                    hits += 1;
                    Some(tid)
                }
                None => {
                    lookups += u64::from(cache.answering());
                    let tid = idx.get_unique_near(pf.hashes[i], key, &mut near, &self.guard);
                    if let Some(tid) = tid {
                        cache.record(t.id, key, tid);
                    }
                    tid
                }
            };
            pf.tids.push(tid.unwrap_or(NO_TID));
        }
        if hits + lookups > 0 {
            bump(&self.st.slot().stats.heal_cache_hits, hits);
            bump(&self.st.slot().stats.heal_index_lookups, lookups);
        }
        // In-place and `siro` storage: each tuple's master pointer too (beside its entry, in
        // the same line), so the masters' lines are asked for in the same stage as the
        // versions' headers rather than after them (through a header's master word, a
        // dependent miss).
        let masters = t.rows_copied();
        for &tid in &pf.tids {
            if let Some(e) = t.entry(tid) {
                prefetch_line(e as *const _ as *const u8);
            }
        }
        for &tid in &pf.tids {
            if let Some(e) = t.entry(tid) {
                let v = e.load(Ordering::Acquire) as *const u8;
                if !v.is_null() {
                    pf.heads.push(v);
                }
            }
            if masters {
                if let Some(m) = t.master_word(tid) {
                    let m = m.load(Ordering::Acquire) as *const u8;
                    if !m.is_null() {
                        pf.masters.push(m);
                    }
                }
            }
        }
        // Every line of every version (header and row), first lines first, into L2
        // (PREFETCHT1), not L1. Ten 1 KB rows are 170 lines: as T0 prefetches they filled the
        // L1 miss buffers and the transaction's own loads queued behind them. Measured on
        // YCSB bytes100x10 (10 M rows, 2 threads, alternating runs, docs/benchmarks.md),
        // against T0 for every line: 1.41× at θ 0.9 and 1.36× at θ 0 with attrs-read 10,
        // 0.95× and 1.04× with attrs-read 1. (All 17 lines vs header + first line: +10 % with
        // attrs-read 10, earlier.)
        let size = t.version_bytes();
        for &v in &pf.heads {
            prefetch_line_l2(v);
        }
        for &v in &pf.heads {
            prefetch_rest_l2(v, size);
        }
        // In-place and `siro` storage: the masters, every line of the row data (under
        // `siro` both slots: a read copies one, an update writes the other).
        let span = t.master_span();
        for &m in &pf.masters {
            prefetch_line_l2(m);
            prefetch_rest_l2(m, span);
        }
        // `siro`: a fourth stage. An update's row goes into the slot the version below the
        // newest owns, which the writer first tests against the dead zones (its header),
        // found through the headers just prefetched (the first of these loads waits for its
        // header; the others' are on their way by then).
        if t.siro.is_some() {
            for &v in &pf.heads {
                // SAFETY: pinned; a chain's newest version lives while we are.
                let v = unsafe { &*(v as *const Version) };
                if let Some(older) = t.slot_rival(v) {
                    prefetch_line_l2(older);
                    prefetch_rest_l2(older, size);
                }
            }
        }
        self.local.key_buf = kb;
        self.local.prefetched = pf;
        Ok(())
    }

    /// The tuple id of primary key `own` (a compiled key where it is, `point_key`), or of the
    /// one encoded in `local.key_buf` when `own` is `None` (`tid_by_key`).
    #[inline]
    pub(super) fn primary_tid(&mut self, t: &Table, own: Option<&[u8]>) -> Option<TupleId> {
        let l: &mut SlotLocal = &mut self.local;
        let cache = &mut l.cc.healing.cache;
        let key = own.unwrap_or(&l.key_buf);
        tid_by_key(
            &l.prefetched,
            cache,
            &mut l.recent,
            (self.st.slot(), &self.guard),
            t,
            key,
        )
    }
}

/// The tuple id of encoded primary key `key` of `t`: from the transaction's last `prefetch`
/// if it looked the key up, from `healing`'s access cache during a heal, from its recent
/// lookups, else from the primary index (then kept in the caches; the lookup runs under
/// the transaction's pin, `guard`). A free function over the slot's parts so that a key in
/// `SlotLocal::key_buf` needs no move out and back.
#[inline]
fn tid_by_key(
    prefetched: &super::Prefetched,
    cache: &mut crate::cc::healing::AccessCache,
    recent: &mut super::Recent,
    (slot, guard): (&super::table::Slot, &crossbeam_epoch::Guard),
    t: &Table,
    key: &[u8],
) -> Option<TupleId> {
    if let Some(tid) = prefetched.tid_of(t.id, key) {
        debug_assert_eq!(t.indexes[0].get_unique(key), Some(tid));
        return Some(tid);
    }
    let healing = cache.answering();
    if healing {
        if let Some(tid) = cache.lookup(t.id, key) {
            debug_assert_eq!(t.indexes[0].get_unique(key), Some(tid));
            bump(&slot.stats.heal_cache_hits, 1);
            return Some(tid);
        }
    }
    // After the heal's access cache, so that its hits are counted as the thesis's.
    if let Some(tid) = recent.tid_of(t.id, key) {
        debug_assert_eq!(t.indexes[0].get_unique(key), Some(tid));
        return Some(tid);
    }
    if healing {
        bump(&slot.stats.heal_index_lookups, 1);
    }
    let tid = t.indexes[0].get_unique_in(key, guard);
    if let Some(tid) = tid {
        cache.record(t.id, key, tid);
        recent.keep(t.id, key, tid);
    }
    tid
}

/// Whether every key of range `inner` (lower, upper bound) is in range `outer`.
pub(crate) fn range_within(
    inner: (Bound<&[u8]>, Bound<&[u8]>),
    outer: (Bound<&[u8]>, Bound<&[u8]>),
) -> bool {
    let lo_ok = match (outer.0, inner.0) {
        (Bound::Unbounded, _) => true,
        (_, Bound::Unbounded) => false,
        (Bound::Included(o), Bound::Included(i) | Bound::Excluded(i)) => i >= o,
        (Bound::Excluded(o), Bound::Included(i)) => i > o,
        (Bound::Excluded(o), Bound::Excluded(i)) => i >= o,
    };
    let hi_ok = match (outer.1, inner.1) {
        (Bound::Unbounded, _) => true,
        (_, Bound::Unbounded) => false,
        (Bound::Included(o), Bound::Included(i) | Bound::Excluded(i)) => i <= o,
        (Bound::Excluded(o), Bound::Included(i)) => i < o,
        (Bound::Excluded(o), Bound::Excluded(i)) => i <= o,
    };
    lo_ok && hi_ok
}
