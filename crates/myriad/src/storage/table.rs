//! A table is an indirection array of version chains plus its indexes (ERMIA §3.1,
//! thesis §5.6.1). The indirection entry of a tuple id is the only place that points at the
//! newest version, so indexes hold tuple ids and never change when a row is updated.
//!
//! The indirection array is segmented (fixed directory of lazily allocated segments) so it
//! grows without moving entries and without a lock. Under in-place and `siro` storage each
//! entry has its tuple's master pointer beside it (`Table::master_word`), in the same line.

use crate::index::btree::NodeStamp;
use crate::index::{Index, ScanDirection};
use crate::schema::TableSchema;
use crate::version::master::Master;
use crate::version::non_inline::NiLayout;
use crate::version::{Order, Rows, Store, Version};
use std::ops::Bound;
use std::ptr;
use std::sync::atomic::{AtomicPtr, AtomicU16, AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;

/// Tuple ids per block of the dirty bitmap (one bit each), as a power of two; the GC
/// `vacuum` policy passes over dirty blocks only (`gc/vacuum.rs`).
pub(crate) const DIRTY_BLOCK_BITS: u32 = 10;

/// The dirty bitmap of a table: one bit per block, for the whole tuple-id space (empty unless
/// the database vacuums).
fn dirty_bitmap(vacuums: bool, tid_space: u64) -> Box<[AtomicU64]> {
    let words = if vacuums {
        (tid_space >> (DIRTY_BLOCK_BITS + 6)) as usize
    } else {
        0
    };
    (0..words).map(|_| AtomicU64::new(0)).collect()
}
pub use crate::ids::TupleId;

const SEG_BITS: u32 = 16;
const SEG_LEN: usize = 1 << SEG_BITS;
const DIR_LEN: usize = 1 << 16;

/// A segment of the indirection array: `SEG_LEN << Table::shift` words, its first (a thin
/// pointer to a leaked boxed slice, `make_segment`).
type Segment = AtomicPtr<Version>;

/// `Table::heal_rank` of a table no registered procedure accesses: after every ranked one.
pub(crate) const UNRANKED: u16 = u16::MAX;

/// A table's storage. Shared by handle (`TableRef`).
pub struct Table {
    pub(crate) id: u32,
    pub(crate) db_id: u64,
    pub(crate) schema: TableSchema,
    pub(crate) indexes: Vec<Index>,
    directory: Box<[AtomicPtr<Segment>]>,
    /// Words per tuple in a segment, as a shift: 0, the entry alone; 1 under in-place and
    /// `siro` storage, the entry then the tuple's master pointer (`master_word`), so
    /// `Transaction::prefetch` finds both in one line (they were two directories, two
    /// misses in the same stage for a tuple not in the cache).
    shift: u32,
    next_tid: AtomicU64,
    /// `LIVE`, `BUILDING` (`Database::create_index` is moving its rows into a copy with one
    /// more index) or `REPLACED` (the copy took over). Transactions refuse a table that is
    /// not live, so nothing is written where no lookup would find it.
    pub(crate) state: AtomicU8,
    /// `healing`: the table's rank in the validation order of the registered procedures
    /// (thesis §3.4.5, `cc/healing.rs`); `UNRANKED` until a procedure that accesses it is
    /// registered.
    pub(crate) heal_rank: AtomicU16,
    /// Per index, the largest timestamp of a transaction that scanned it (a range, a point
    /// lookup that found nothing, or for index 0 the whole table): MVTO's read-ts for what a
    /// scan observed as absent (`cc/mvto.rs`); under SSN the largest commit stamp of a
    /// committed scanner, the index's pstamp (`cc/ssn.rs`). Zero under other protocols.
    pub(crate) scan_ts: Box<[crossbeam_utils::CachePadded<AtomicU64>]>,
    /// SSN: per index, a bitmap of the transaction-table slots (slot mod 64) whose
    /// transactions have scanned it, the index's reader bitmap (`cc/ssn.rs`).
    pub(crate) scanners: Box<[crossbeam_utils::CachePadded<AtomicU64>]>,
    /// Protocol words per version (`Version::ext`), from the database's protocol.
    pub(crate) version_ext: u8,
    /// The version store (`version::Store`): chain order, where rows live, how a write
    /// joins the chain. Only this file's version and chain operations and GC's pruning
    /// match on it.
    pub(crate) store: Store,
    /// Index pointers `logical-pk` (thesis §5.6): a secondary entry holds the row's primary
    /// key, not its tuple id, and every lookup goes secondary index → primary key → primary
    /// index → tuple id → chain (`add_entry`, `lookup_entries`, `scan_index`). False:
    /// `logical-tid`, the entry's value is the tuple id.
    pub(crate) logical_pk: bool,
    /// Index pointers `physical` (thesis §5.6): a secondary entry is `key ++ the address of
    /// one version` (value: the tuple id), every version has an entry in every secondary
    /// index for its own key, and the entry is removed before its version is freed (GC's
    /// cuts and rollback, `remove_entries`), so an entry found while pinned points at a live
    /// version. The secondary indexes are removable B+trees (`Index::removable`). Reads judge the version an
    /// entry points at instead of walking the chain (`Transaction::index_hit`).
    pub(crate) physical: bool,
    /// GC `vacuum`: one dirty bit per block of tuple ids (`gc/vacuum.rs`); empty otherwise.
    pub(crate) dirty: Box<[AtomicU64]>,
    /// In-place stores (`time-travel`, `delta`, `siro`; `version/master.rs`): versions carry
    /// no row, each tuple's newest row is in its master (pointed at from beside the tuple's
    /// entry, `shift`), and rows are read through `row`.
    /// Offset and width of every column (what a delta's before-images are cut along).
    pub(crate) columns: Box<[(usize, usize)]>,
    /// Version storage `siro`: the database's segment pool and published zones
    /// (`version/siro.rs`); `None` under other stores.
    pub(crate) siro: Option<std::sync::Arc<crate::version::siro::SiroStore>>,
    /// Non-inline attributes `copy` or `shared` on a table with variable-length columns
    /// (`version/non_inline.rs`): versions hold the stored form, rows are read through
    /// `row`. `None`: rows inline.
    pub(crate) ni: Option<crate::version::non_inline::NiLayout>,
}

/// `Table::state`: in use.
pub(crate) const LIVE: u8 = 0;
/// `Table::state`: its rows are being moved to a copy with a new index.
pub(crate) const BUILDING: u8 = 1;
/// `Table::state`: replaced by the copy; the handle is stale.
pub(crate) const REPLACED: u8 = 2;

/// A cheap, clonable handle to a table.
pub type TableRef = Arc<Table>;

impl Table {
    /// A copy replacing `old` (CREATE INDEX) keeps MVTO's scan timestamps and SSN's scan
    /// stamps and scanners: every index of the copy counts as scanned as late, and by as
    /// many slots, as any index of `old` was (conservative).
    pub(crate) fn inherit_scan_ts(&self, old: &Table) {
        let max = old
            .scan_ts
            .iter()
            .map(|s| s.load(Ordering::SeqCst))
            .max()
            .unwrap_or(0);
        let bits = old
            .scanners
            .iter()
            .fold(0, |b, s| b | s.load(Ordering::SeqCst));
        for (s, r) in self.scan_ts.iter().zip(self.scanners.iter()) {
            s.fetch_max(max, Ordering::SeqCst);
            r.fetch_or(bits, Ordering::SeqCst);
        }
    }

    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        id: u32,
        db_id: u64,
        schema: TableSchema,
        version_ext: u8,
        storage: crate::config::VersionStorage,
        vacuums: bool,
        pointers: crate::config::IndexPointers,
        non_inline: crate::config::NonInline,
        siro: Option<std::sync::Arc<crate::version::siro::SiroStore>>,
    ) -> Self {
        let store = storage.store();
        let in_place = match store.rows() {
            Rows::InPlace(_) | Rows::Siro => true,
            Rows::Inline => false,
        };
        let siro = if store.rows() == Rows::Siro {
            siro
        } else {
            None
        };
        // In-place versions carry the master and image words after the protocol's.
        let version_ext = version_ext + if in_place { 2 } else { 0 };
        let columns = schema
            .columns
            .iter()
            .map(|c| (c.offset, c.ty.width()))
            .collect();
        let ni = match non_inline {
            _ if in_place => None,
            crate::config::NonInline::Copy => NiLayout::new(&schema, false),
            crate::config::NonInline::Shared => NiLayout::new(&schema, true),
            _ => None,
        };
        let logical_pk = pointers == crate::config::IndexPointers::LogicalPk;
        let physical = pointers == crate::config::IndexPointers::Physical;
        let indexes = schema
            .indexes
            .iter()
            .enumerate()
            .map(|(i, d)| {
                let ints = d
                    .columns
                    .iter()
                    .take_while(|&&c| schema.columns[c].ty == crate::schema::ColumnType::Int)
                    .count()
                    .min(u8::MAX as usize) as u8;
                if physical && i > 0 {
                    Index::removable(ints)
                } else {
                    Index::new(d.kind, schema.expected_rows, ints)
                }
            })
            .collect();
        let scan_ts = (0..schema.indexes.len())
            .map(|_| Default::default())
            .collect();
        let scanners = (0..schema.indexes.len())
            .map(|_| Default::default())
            .collect();
        Table {
            id,
            db_id,
            schema,
            indexes,
            directory: (0..DIR_LEN)
                .map(|_| AtomicPtr::new(ptr::null_mut()))
                .collect(),
            shift: u32::from(in_place),
            next_tid: AtomicU64::new(0),
            state: AtomicU8::new(LIVE),
            heal_rank: AtomicU16::new(UNRANKED),
            scan_ts,
            scanners,
            version_ext,
            store,
            logical_pk,
            physical,
            dirty: dirty_bitmap(vacuums, (DIR_LEN * SEG_LEN) as u64),
            columns,
            siro,
            ni,
        }
    }

    /// Bytes of row data in a master: two slots under `siro`, one row otherwise.
    fn master_len(&self) -> usize {
        match self.store.rows() {
            Rows::Siro => 2 * self.schema.row_size,
            Rows::InPlace(_) | Rows::Inline => self.schema.row_size,
        }
    }

    /// GC `vacuum`: marks the block of `tid` dirty (a committed transaction gave it a new
    /// version). A load first: a hot block's bit is usually set already, and the load keeps
    /// its line shared. The `fetch_or` is counted by the caller as a record RMW.
    #[inline]
    pub(crate) fn mark_dirty(&self, tid: TupleId) -> bool {
        let block = tid.get() >> DIRTY_BLOCK_BITS;
        let Some(w) = self.dirty.get((block >> 6) as usize) else {
            return false;
        };
        let bit = 1u64 << (block & 63);
        if w.load(Ordering::Relaxed) & bit != 0 {
            return false;
        }
        w.fetch_or(bit, Ordering::AcqRel);
        true
    }

    /// GC `vacuum`: clears the dirty bit of `block`; true if it was set.
    #[inline]
    pub(crate) fn take_dirty(&self, block: u64) -> bool {
        let Some(w) = self.dirty.get((block >> 6) as usize) else {
            return false;
        };
        let bit = 1u64 << (block & 63);
        w.load(Ordering::Relaxed) & bit != 0 && w.fetch_and(!bit, Ordering::AcqRel) & bit != 0
    }

    /// The table's schema.
    pub fn schema(&self) -> &TableSchema {
        &self.schema
    }
    /// The table's name.
    pub fn name(&self) -> &str {
        &self.schema.name
    }
    /// Position of column `name` (for `RowRef` accessors and `update`).
    pub fn column(&self, name: &str) -> crate::Result<usize> {
        self.schema.column_index(name)
    }
    /// Position of index `name` ("primary" is 0).
    pub fn index(&self, name: &str) -> crate::Result<usize> {
        self.schema.index_position(name)
    }

    /// Reserves `n` fresh consecutive tuple ids and returns the first (one shared
    /// fetch-add; counted by the caller). A transaction hands them out one by one with
    /// [`Table::claim_tid`], so inserting rows does not touch this counter's cache line once
    /// per row: with every worker inserting into ORDER_LINE it bounced between the cores.
    pub(crate) fn reserve_fresh_tids(&self, n: u64) -> TupleId {
        TupleId::new(self.next_tid.fetch_add(n, Ordering::Relaxed))
    }

    /// Makes `tid`, a reserved fresh id, usable: allocates its segment if need be. `None`
    /// past the directory (the table is full).
    pub(crate) fn claim_tid(&self, tid: TupleId) -> Option<TupleId> {
        self.segment_for(tid).map(|_| tid)
    }

    /// Allocates (if need be) the segment holding `tid`'s entry; `None` past the directory.
    fn segment_for(&self, tid: TupleId) -> Option<()> {
        make_segment(&self.directory, tid, self.shift)
    }

    /// The entry of `tid`, its segment allocated if need be (PLR puts rows back at their old
    /// tuple ids, then moves the counter with `reserve_tids`). `None` past the directory.
    pub(crate) fn entry_at(&self, tid: TupleId) -> Option<&AtomicPtr<Version>> {
        self.segment_for(tid)?;
        self.entry(tid)
    }

    /// Makes the tuple-id counter at least `n`, so that new rows get ids after the restored.
    pub(crate) fn reserve_tids(&self, n: TupleId) {
        self.next_tid.fetch_max(n.get(), Ordering::AcqRel);
    }

    /// Number of tuple ids handed out.
    pub(crate) fn tid_count(&self) -> u64 {
        self.next_tid.load(Ordering::Acquire)
    }

    /// Every tuple id handed out so far, in order.
    pub(crate) fn tids(&self) -> impl Iterator<Item = TupleId> {
        (0..self.tid_count()).map(TupleId::new)
    }

    /// The indirection entry of `tid`, or `None` if its segment was never allocated.
    #[inline]
    pub(crate) fn entry(&self, tid: TupleId) -> Option<&AtomicPtr<Version>> {
        word_of(&self.directory, tid, self.shift, 0)
    }
}

/// Allocates (if need be) the segment of the indirection array (`1 << shift` words a
/// tuple) that holds `tid`'s words; `None` past the directory.
fn make_segment(dir: &[AtomicPtr<Segment>], tid: TupleId, shift: u32) -> Option<()> {
    let dir = dir.get((tid.get() >> SEG_BITS) as usize)?;
    if dir.load(Ordering::Acquire).is_null() {
        let fresh: Box<[Segment]> = (0..SEG_LEN << shift)
            .map(|_| AtomicPtr::new(ptr::null_mut()))
            .collect();
        let raw = Box::into_raw(fresh) as *mut Segment;
        if dir
            .compare_exchange(ptr::null_mut(), raw, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            // SAFETY: raw was never published; it is the boxed slice made above.
            drop(unsafe { free_segment(raw, shift) });
        }
    }
    Some(())
}

/// The boxed slice behind a segment pointer, to drop.
///
/// # Safety
/// `seg` came from `make_segment` with the same `shift`, and no one else will use it.
unsafe fn free_segment(seg: *mut Segment, shift: u32) -> Box<[Segment]> {
    Box::from_raw(ptr::slice_from_raw_parts_mut(seg, SEG_LEN << shift))
}

/// Word `k` (< `1 << shift`) of `tid` in the indirection array, or `None` if its segment
/// was never allocated.
#[inline]
fn word_of(dir: &[AtomicPtr<Segment>], tid: TupleId, shift: u32, k: usize) -> Option<&Segment> {
    let seg = dir
        .get((tid.get() >> SEG_BITS) as usize)?
        .load(Ordering::Acquire);
    if seg.is_null() {
        return None;
    }
    // SAFETY: published segments hold `SEG_LEN << shift` words and live until the table is
    // dropped (or move whole to another table, `take_rows`).
    Some(unsafe { &*seg.add((((tid.get() as usize) & (SEG_LEN - 1)) << shift) + k) })
}

// Version allocation and row access, the one place that knows where each store keeps rows:
// in the versions (append-only, single-version; `version/non_inline.rs` for the stored form)
// or in place (`time-travel`, `delta`: `version/master.rs`). The transaction code calls these
// under every store alike.
impl Table {
    /// The master of `tid` (in-place storage), allocated on first use; `None` past the
    /// directory or under other storage.
    pub(crate) fn master(&self, tid: TupleId) -> Option<&Master> {
        self.master_fresh(tid).map(|(m, _)| m)
    }

    /// The word holding `tid`'s master pointer (in-place and `siro` storage: beside its
    /// entry), without allocating anything: for `Transaction::prefetch`, which finds the
    /// master this way in the same stage as the chain's head, from the same line (not
    /// through the head's header, a miss later).
    /// `None` when the tuple's directory segment does not exist (or under other storage).
    #[inline]
    pub(crate) fn master_word(&self, tid: TupleId) -> Option<&AtomicPtr<Master>> {
        if self.shift == 0 {
            return None;
        }
        let w = word_of(&self.directory, tid, self.shift, 1)?;
        // SAFETY: `AtomicPtr<T>` has one layout whatever `T`; this word only ever holds a
        // master pointer (`master_fresh`).
        Some(unsafe { &*(w as *const AtomicPtr<Version> as *const AtomicPtr<Master>) })
    }

    /// Bytes from a master's start to the end of its row data (both `siro` slots): the lines
    /// a read or an update of the tuple touches.
    #[inline]
    pub(crate) fn master_span(&self) -> usize {
        Master::data_end(self.master_len())
    }

    /// `master`, and whether this call allocated it.
    fn master_fresh(&self, tid: TupleId) -> Option<(&Master, bool)> {
        self.segment_for(tid)?;
        let slot = self.master_word(tid)?;
        let mut m = slot.load(Ordering::Acquire);
        let mut made = false;
        if m.is_null() {
            let fresh = Master::alloc(tid, self.master_len());
            m = match slot.compare_exchange(
                ptr::null_mut(),
                fresh,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => {
                    made = true;
                    fresh
                }
                Err(cur) => {
                    // SAFETY: never published.
                    unsafe { Master::free(fresh) };
                    cur
                }
            };
        }
        // SAFETY: masters live until the table is dropped.
        Some((unsafe { &*m }, made))
    }

    /// A new version of `tid` holding `row`, created by `begin`, followed by `next`. Under
    /// in-place storage the version gets no row: its creator writes `row` into the master
    /// when it may (`version/master.rs`: after covering the version it supersedes).
    ///
    /// `prev`: the version the new one supersedes, if any, kept from being freed by the
    /// caller (pinned, and its lock held or the table unreachable); under non-inline
    /// `shared` the new version shares its unchanged blobs. Returns the version, the bytes
    /// it allocated besides its block (blobs), and the bytes of the master record it
    /// allocated (in-place and `siro` storage, a tuple's first version: `Stats::record_bytes`).
    pub(crate) fn alloc_version(
        &self,
        begin: u64,
        tid: TupleId,
        row: &[u8],
        next: *mut Version,
        space: u8,
        prev: *const Version,
    ) -> (*mut Version, usize, usize) {
        match (self.store.rows(), &self.ni) {
            (Rows::InPlace(_) | Rows::Siro, _) => {
                // A version superseding `prev` shares its master (a tid's master, once made,
                // is its master for the table's life): no walk of the directory to the word
                // beside `tid`'s entry.
                // SAFETY: as documented, `prev` is a live version of `tid` in this table.
                let (m, made) = match unsafe { prev.as_ref() } {
                    Some(p) => {
                        let m = p.master_opt().map_or(ptr::null(), |m| m as *const Master);
                        debug_assert!(
                            self.master(tid).map_or(ptr::null(), |x| x as *const Master) == m
                        );
                        (m, false)
                    }
                    None => self
                        .master_fresh(tid)
                        .map_or((ptr::null(), false), |(m, made)| (m as *const Master, made)),
                };
                let v = Version::alloc_in_place(begin, next, self.version_ext, space, m);
                let record = if made {
                    Master::size(self.master_len())
                } else {
                    0
                };
                (v.as_ptr(), 0, record)
            }
            (Rows::Inline, Some(ni)) => {
                // SAFETY: as documented; `prev` is a version of this table, so in its
                // stored form (a tombstone too: it was made by this function).
                let prev = unsafe { prev.as_ref() };
                let (v, made) = unsafe {
                    Version::alloc_non_inline(begin, row, next, self.version_ext, space, ni, prev)
                };
                (v.as_ptr(), made, 0)
            }
            (Rows::Inline, None) => {
                let v = Version::alloc_copy(begin, row, next, self.version_ext, space);
                (v.as_ptr(), 0, 0)
            }
        }
    }

    /// Changes the row of `v`, the caller's own uncommitted newest version of `tid`, to
    /// `row`: in place, the master (`place_row`, with `v`'s predecessor as the version to
    /// keep); else the version's data. Returns the bytes allocated (before-images,
    /// non-inline blobs) and the bytes of replaced blobs no version refers to any more
    /// (freed after the epoch). `scratch` is a buffer.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn rewrite_own(
        &self,
        tid: TupleId,
        v: &Version,
        row: &[u8],
        scratch: &mut Vec<u8>,
        w: crate::version::siro::Writer<'_>,
        guard: &crossbeam_epoch::Guard,
    ) -> (usize, usize) {
        match self.store.rows() {
            Rows::InPlace(_) | Rows::Siro => {
                let prev = v.next.load(Ordering::Acquire);
                let placed = self.place_row(tid, v, prev, Some(row), scratch, w, guard);
                return (placed, 0);
            }
            Rows::Inline => {}
        }
        match &self.ni {
            None => {
                // SAFETY: our own uncommitted version; invisible to others.
                unsafe { v.data_mut().copy_from_slice(row) };
                (0, 0)
            }
            // SAFETY: as above; a replaced blob may still be read by a reader pinned now
            // (speculative readers of our version), so its memory waits for the epoch.
            Some(ni) => unsafe {
                let mut freed = 0;
                let made = ni.overwrite(v.data_mut().as_mut_ptr(), row, |old| {
                    let bytes = crate::version::non_inline::drop_ref(old);
                    if bytes > 0 {
                        freed += bytes;
                        let q = old as usize;
                        guard.defer_unchecked(move || crate::version::non_inline::dealloc_blob(q));
                    }
                });
                (made, freed)
            },
        }
    }

    /// As the owner of the write lock on `tid`'s newest version (or of a fresh tuple id no
    /// one reads yet), makes `row` the newest row where the store keeps it apart from the
    /// versions (`None`: leaves it, a delete). In place that is the master, after giving
    /// `prev`, the version the newest supersedes (null: none), the image that keeps its
    /// values (`master::cover`); the other stores keep rows in the versions, and this does
    /// nothing. Under `siro` the row goes into a slot of the master and `new` (the version
    /// that holds it) names the slot (`SiroStore::place`: the slot's older owners are
    /// relocated first; by the writer `w`, whose counters take the segment bytes). Returns the bytes of images
    /// allocated. `scratch` is a buffer.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn place_row(
        &self,
        tid: TupleId,
        new: *const Version,
        prev: *const Version,
        row: Option<&[u8]>,
        scratch: &mut Vec<u8>,
        w: crate::version::siro::Writer<'_>,
        guard: &crossbeam_epoch::Guard,
    ) -> usize {
        let kind = match self.store.rows() {
            Rows::InPlace(kind) => kind,
            Rows::Siro => {
                let Some(store) = self.siro.as_ref() else {
                    return 0;
                };
                // SAFETY: the caller is pinned and holds the lock `prev` is superseded under
                // (or owns the fresh tuple); `new` is its own version.
                if let Some(n) = unsafe { new.as_ref() } {
                    // `new`'s master is `tid`'s (`alloc_version`).
                    let Some(m) = n.master_opt() else { return 0 };
                    store.place(
                        w,
                        m,
                        self.schema.row_size,
                        n,
                        unsafe { prev.as_ref() },
                        row,
                        guard,
                    );
                }
                return 0;
            }
            Rows::Inline => return 0,
        };
        // `new`'s header names its master (`alloc_version`): no walk of the directory.
        // SAFETY: the caller's own version, live.
        let named = unsafe { new.as_ref() }.and_then(|n| n.master_opt());
        debug_assert!(named.is_none_or(|m| self.master(tid).is_some_and(|x| ptr::eq(x, m))));
        let Some(m) = named.or_else(|| self.master(tid)) else {
            return 0;
        };
        let mut bytes = 0;
        // SAFETY: the caller is pinned and holds the lock `prev` is superseded under, so
        // `prev` is not freed.
        if let Some(p) = unsafe { prev.as_ref() } {
            let old = m.owned();
            let new = row.unwrap_or(old);
            bytes = crate::version::master::cover(kind, p, old, new, &self.columns, scratch, guard);
        }
        if let Some(row) = row {
            m.write(|d| d.copy_from_slice(row));
        }
        bytes
    }

    /// Rollback, before the lock on `prev` is released: `prev` (the version an aborted
    /// write superseded) becomes the newest row again where the store keeps it apart from
    /// the versions — in place, the master gets `prev`'s values back from its image
    /// (`master::restore`; no writer takes over an aborted writer's lock there). Nothing
    /// under the other stores.
    pub(crate) fn restore_row(&self, prev: &Version) {
        match self.store.rows() {
            Rows::InPlace(kind) => crate::version::master::restore(kind, prev),
            // The superseded version's slot was never written (vDriver's undo by toggle).
            Rows::Siro | Rows::Inline => {}
        }
    }

    /// Recovery: a committed version (timestamp `ts`) of `tid` holding `row`, unpublished,
    /// in a table no transaction can reach yet (its master is written at once). `row` is
    /// checked as `write_column` would have written it first (`TableSchema::check_row`): a
    /// read trusts every VARCHAR in a stored row to be UTF-8 (`TableSchema::read_column`).
    pub(crate) fn placed_version(
        &self,
        ts: u64,
        tid: TupleId,
        row: &[u8],
    ) -> crate::Result<*mut Version> {
        self.schema.check_row(row)?;
        let (v, ..) = self.alloc_version(ts, tid, row, ptr::null_mut(), 0, ptr::null());
        match self.store.rows() {
            Rows::InPlace(_) => {
                if let Some(m) = self.master(tid) {
                    m.write(|d| d.copy_from_slice(row));
                }
            }
            Rows::Siro => {
                if let Some(m) = self.master(tid) {
                    // SAFETY: just allocated, unpublished.
                    let n = unsafe { &*v };
                    crate::version::siro::SiroStore::place_recovered(m, row.len(), n, row);
                }
            }
            Rows::Inline => {}
        }
        Ok(v)
    }

    /// Under `siro` storage, where an update superseding `v` (the newest version, pinned)
    /// will write its row: the master slot `v` does not own (`SiroStore::place`), as
    /// `(address, bytes)`. The update's first step prefetches it for writing, so the miss
    /// overlaps the work before the write (the read of `v`'s row touched the other slot).
    pub(crate) fn update_target(&self, v: &Version) -> Option<(*const u8, usize)> {
        if self.store.rows() != Rows::Siro {
            return None;
        }
        let len = self.schema.row_size;
        let other = len - crate::version::siro::slot_offset(v, len)?.min(len);
        Some((v.master_opt()?.data_addr(other), len))
    }

    /// Under `siro` storage, the header of the version below `v` (the newest, pinned): the
    /// owner of the record slot an update of `v` writes into (`SiroStore::place`). For
    /// `Transaction::prefetch`.
    pub(crate) fn slot_rival(&self, v: &Version) -> Option<*const u8> {
        if self.store.rows() != Rows::Siro {
            return None;
        }
        let n = v.next.load(Ordering::Relaxed);
        (!n.is_null()).then_some(n as *const u8)
    }

    /// Bytes one version block occupies (in-place: the header only; images are counted
    /// where they are made).
    pub(crate) fn version_bytes(&self) -> usize {
        let data = match (self.store.rows(), &self.ni) {
            (Rows::InPlace(_) | Rows::Siro, _) => 0,
            (Rows::Inline, Some(ni)) => ni.stored_size(),
            (Rows::Inline, None) => self.schema.row_size,
        };
        Version::alloc_size(data, self.version_ext)
    }

    /// Whether `row` copies rows into its buffer (in-place storage, non-inline attributes)
    /// rather than returning version data; then a version does not hold its row as written,
    /// so an update builds the new row in a scratch buffer before making the version.
    #[inline]
    pub(crate) fn rows_copied(&self) -> bool {
        match self.store.rows() {
            Rows::InPlace(_) | Rows::Siro => true,
            Rows::Inline => self.ni.is_some(),
        }
    }

    /// The row of version `v` (pinned): its data under inline storage; under in-place
    /// storage a copy into `buf` (`master::read_into`); under non-inline attributes the
    /// decoded stored form, in `buf`.
    #[inline]
    pub(crate) fn row<'a>(&self, v: &'a Version, buf: &'a mut Vec<u8>) -> &'a [u8] {
        match self.store.rows() {
            Rows::Inline => match &self.ni {
                None => v.data(),
                Some(ni) => {
                    // SAFETY: the caller is pinned: `v` and its blobs stay allocated.
                    unsafe { ni.decode(v.data(), buf) };
                    buf
                }
            },
            Rows::InPlace(kind) => {
                // Only a delta read walks from the head: time-travel's does not load the
                // tuple id (kept after the row data, maybe on a line of its own).
                let head = || {
                    self.entry(v.master().tid())
                        .map_or(ptr::null_mut(), |e| e.load(Ordering::Acquire))
                };
                crate::version::master::read_into(kind, v, head, buf);
                buf
            }
            Rows::Siro => {
                crate::version::siro::read_into(v, v.master(), self.schema.row_size, buf);
                buf
            }
        }
    }
}

// Chain operations, the one place that knows the chain order (`Store::order`). Every writer
// of a chain holds the write lock of its newest version (its End field) or, for an empty
// chain, wins the entry's CAS from null; so under O2N the `next` of the newest version is
// written by that writer alone, as the entry is under N2O. GC moves an O2N entry forward
// (cutting the oldest versions) and never touches the newest version's `next`.
impl Table {
    /// The newest version of the chain at `e` (null if empty). N2O: the entry; O2N: the end
    /// of a walk from the oldest version.
    #[inline]
    pub(crate) fn newest(&self, e: &AtomicPtr<Version>) -> *mut Version {
        let mut v = e.load(Ordering::Acquire);
        if self.store.order() == Order::OldestFirst {
            // SAFETY: the caller is pinned; versions reachable from the entry are freed only
            // after the epoch advances.
            while let Some(x) = unsafe { v.as_ref() } {
                let n = x.next.load(Ordering::Acquire);
                if n.is_null() {
                    break;
                }
                v = n;
            }
        }
        v
    }

    /// The `next` a new version replacing `newest` starts with: `newest` under N2O, null
    /// under O2N (the new version ends the chain).
    #[inline]
    pub(crate) fn next_for_new(&self, newest: *mut Version) -> *mut Version {
        match self.store.order() {
            Order::NewestFirst => newest,
            Order::OldestFirst => ptr::null_mut(),
        }
    }

    /// Publishes `n` as the newest version after `newest`, whose write lock the caller holds.
    #[inline]
    pub(crate) fn publish(&self, e: &AtomicPtr<Version>, newest: *mut Version, n: *mut Version) {
        // SAFETY: pinned; `newest` is locked by the caller, so GC does not cut it.
        match unsafe { newest.as_ref() } {
            Some(x) if self.store.order() == Order::OldestFirst => {
                x.next.store(n, Ordering::Release)
            }
            _ => e.store(n, Ordering::Release),
        }
    }

    /// `publish` by compare-and-swap, for a writer that may race GC's whole-chain cut or
    /// another writer: false if `newest` is no longer the newest version.
    #[inline]
    pub(crate) fn publish_cas(
        &self,
        e: &AtomicPtr<Version>,
        newest: *mut Version,
        n: *mut Version,
    ) -> bool {
        // SAFETY: as `publish`.
        match unsafe { newest.as_ref() } {
            Some(x) if self.store.order() == Order::OldestFirst => x
                .next
                .compare_exchange(ptr::null_mut(), n, Ordering::AcqRel, Ordering::Acquire)
                .is_ok(),
            _ => e
                .compare_exchange(newest, n, Ordering::AcqRel, Ordering::Acquire)
                .is_ok(),
        }
    }

    /// Rollback: takes the aborted version `new` out of the chain, making `old` (the version
    /// it replaced, or null) the newest again, if `new` is still the newest after `old`.
    #[inline]
    pub(crate) fn unpublish(&self, e: &AtomicPtr<Version>, new: *mut Version, old: *mut Version) {
        // SAFETY: as `publish`; we hold `old`'s lock until after this.
        let _ = match unsafe { old.as_ref() } {
            Some(x) if self.store.order() == Order::OldestFirst => {
                x.next
                    .compare_exchange(new, ptr::null_mut(), Ordering::AcqRel, Ordering::Acquire)
            }
            _ => e.compare_exchange(new, old, Ordering::AcqRel, Ordering::Acquire),
        };
    }
}

/// The row data of the newest committed version of a chain, unless that version is a delete
/// (or the chain holds no committed version).
///
/// # Safety
/// `head` is a chain head no writer is changing (the table is quiesced) and its versions
/// stay allocated for the call (the caller is pinned or the chains are private).
/// Either chain order: the committed version with the largest Begin.
unsafe fn latest_committed<'a>(head: *const Version) -> Option<&'a Version> {
    let mut v = head;
    let mut best: Option<(u64, &Version)> = None;
    while let Some(x) = v.as_ref() {
        let b = x.begin.load(Ordering::Acquire);
        if !crate::version::is_txn(b)
            && b != crate::version::INFINITY
            && best.is_none_or(|(bb, _)| b > bb)
        {
            best = Some((b, x));
        }
        v = x.next.load(Ordering::Acquire);
    }
    best.and_then(|(_, x)| (!x.is_tombstone()).then_some(x))
}

// Index builds (`Database::create_index`). The rows move by pointer rather than being copied:
// a copy would need new versions with the old timestamps for every chain, and the chains
// (with their history) are exactly what readers of old snapshots need to find unchanged.
impl Table {
    /// True if two rows whose newest committed versions are live share a key of index `idx`
    /// of `schema` (a table with this one's columns). Call only while no transaction can
    /// write this table.
    pub(crate) fn has_duplicate_key(&self, schema: &TableSchema, idx: usize) -> bool {
        let mut seen = std::collections::HashSet::new();
        let mut key = Vec::new();
        let mut rb = Vec::new();
        let _guard = crossbeam_epoch::pin();
        for tid in self.tids() {
            let Some(e) = self.entry(tid) else { continue };
            // SAFETY: no writer (quiesced); pinned against concurrent GC frees.
            if let Some(v) = unsafe { latest_committed(e.load(Ordering::Acquire)) } {
                schema.encode_key_from_row(idx, self.row(v, &mut rb), &mut key);
                if !seen.insert(key.clone()) {
                    return true;
                }
            }
        }
        false
    }

    /// Moves every version chain and the tuple-id counter of `from` into this table, which
    /// has the same columns and no rows; `from` is left empty. Call only while no
    /// transaction can reach either table. A garbage collector pruning a chain meanwhile is
    /// harmless: segments move whole, so its entry pointer still names the same word.
    pub(crate) fn take_rows(&self, from: &Table) {
        assert_eq!(
            self.shift, from.shift,
            "take_rows between different storages"
        );
        for (to, fr) in self.directory.iter().zip(from.directory.iter()) {
            let seg = fr.swap(ptr::null_mut(), Ordering::AcqRel);
            let prev = to.swap(seg, Ordering::AcqRel);
            debug_assert!(prev.is_null(), "take_rows into a table with rows");
        }
        self.next_tid
            .store(from.next_tid.swap(0, Ordering::AcqRel), Ordering::Release);
        // The copy's blocks are as dirty as the original's were.
        for (to, fr) in self.dirty.iter().zip(from.dirty.iter()) {
            to.fetch_or(fr.swap(0, Ordering::AcqRel), Ordering::AcqRel);
        }
    }

    /// Fills every index from the chains (after `take_rows`): the primary key of each tuple,
    /// and for each secondary index the key of every version still in a chain (secondary
    /// indexes are multimaps that keep every key a tuple held; see `index`).
    pub(crate) fn build_indexes(&self) {
        let _ = self.build_indexes_of(TupleId::new(0)..TupleId::new(self.tid_count()));
    }

    /// `build_indexes` for the tuple ids of `tids` (threads may build disjoint ranges at
    /// once: the indexes take concurrent inserts). Returns how many tuples had a primary key
    /// another tuple already had (none, unless the chains are inconsistent).
    pub(crate) fn build_indexes_of(&self, tids: std::ops::Range<TupleId>) -> u64 {
        let mut dups = 0;
        let mut key = Vec::new();
        let mut buf = Vec::new();
        let mut rb = Vec::new();
        let _guard = crossbeam_epoch::pin();
        for tid in (tids.start.get()..tids.end.get()).map(TupleId::new) {
            let Some(e) = self.entry(tid) else { continue };
            let head = e.load(Ordering::Acquire);
            // SAFETY: no writer (quiesced); pinned against concurrent GC frees.
            let Some(h) = (unsafe { head.as_ref() }) else {
                continue;
            };
            self.schema
                .encode_key_from_row(0, self.row(h, &mut rb), &mut key);
            // A tuple id is reachable from one primary key (primary keys are never updated),
            // so this cannot collide unless the chains are inconsistent.
            if self.indexes[0].insert_unique(&key, tid).is_err() {
                dups += 1;
            }
            let mut v = head;
            // SAFETY: as above.
            while let Some(x) = unsafe { v.as_ref() } {
                let row = self.row(x, &mut rb);
                for i in 1..self.indexes.len() {
                    self.schema.encode_key_from_row(i, row, &mut key);
                    self.add_entry(i, &key, tid, v, row, &mut buf);
                }
                v = x.next.load(Ordering::Acquire);
            }
        }
        dups
    }
}

// Secondary-index access, the one place that knows the index pointers (`Table::logical_pk`,
// `Table::physical`). Above it every lookup yields tuple ids, so the protocols' reads,
// validations and re-scans are the same under every kind of pointer; under `physical` it also
// yields the version the entry points at (null otherwise), which reads judge directly.
impl Table {
    /// Secondary index `i`: records that tuple `tid`, whose version `v` with row data `row`
    /// has key `key` in it, holds `key`. Idempotent. `buf` is scratch.
    ///
    /// Under `logical-pk` the entry is `key ++ primary key ++ primary key length (u16 BE)`:
    /// the key comes first so that entries stay in key order and a key is a prefix of its
    /// entries (as with the tuple-id suffix); the length at the end lets a scan split an
    /// entry whose key columns have variable width. Under `physical` it is
    /// `key ++ v's address (u64 BE)` with the tuple id as its value.
    pub(crate) fn add_entry(
        &self,
        i: usize,
        key: &[u8],
        tid: TupleId,
        v: *const Version,
        row: &[u8],
        buf: &mut Vec<u8>,
    ) {
        if self.physical {
            physical_entry(key, v, buf);
            return self.indexes[i].insert_raw(buf, tid.get());
        }
        if !self.logical_pk {
            return self.indexes[i].insert_entry(key, tid, buf);
        }
        buf.clear();
        buf.extend_from_slice(key);
        self.schema.append_key_from_row(0, row, buf);
        let pk_len = (buf.len() - key.len()) as u16;
        buf.extend_from_slice(&pk_len.to_be_bytes());
        self.indexes[i].insert_raw(buf, 0);
    }

    /// Entries in index `i` (a position, as in `TableSchema::indexes`); `None` if there is
    /// no such index. A secondary index counts every entry it keeps: under logical pointers
    /// one per key a row ever held, under `physical` one per version not yet collected.
    pub fn index_entries(&self, i: usize) -> Option<usize> {
        self.indexes.get(i).map(|x| x.len())
    }

    /// Index pointers `physical`: removes the entries of version `v` whose row data is (or
    /// was, for an owner's in-place change) `row` from every secondary index. Nothing under
    /// the other pointers, whose entries stay. Must run before `v` is freed (or handed to
    /// an epoch-deferred free), and while `v` is still allocated. `key` and `buf` are
    /// scratch.
    pub(crate) fn remove_entries(
        &self,
        v: *const Version,
        row: &[u8],
        key: &mut Vec<u8>,
        buf: &mut Vec<u8>,
    ) {
        if !self.physical {
            return;
        }
        for i in 1..self.indexes.len() {
            self.remove_entry(i, v, row, key, buf);
        }
    }

    /// `remove_entries` for index `i` alone; `key` and `buf` are scratch.
    pub(crate) fn remove_entry(
        &self,
        i: usize,
        v: *const Version,
        row: &[u8],
        key: &mut Vec<u8>,
        buf: &mut Vec<u8>,
    ) {
        if !self.physical {
            return;
        }
        self.schema.encode_key_from_row(i, row, key);
        physical_entry(key, v, buf);
        self.indexes[i].remove_raw(buf);
    }

    /// A `logical-pk` entry resolved to (its secondary key, the tuple id its primary key now
    /// leads to); `None` if the primary key has no row (or the entry is malformed).
    fn resolve_pk_entry<'k>(&self, k: &'k [u8]) -> Option<(&'k [u8], TupleId)> {
        let n = k.len().checked_sub(2)?;
        let pk_len = u16::from_be_bytes([k[n], k[n + 1]]) as usize;
        let at = n.checked_sub(pk_len)?;
        let tid = self.indexes[0].get_unique(&k[at..n])?;
        Some((&k[..at], tid))
    }

    /// Every tuple id index `i` records under `key` (for `logical-pk`: the current tuple id of
    /// each primary key recorded under it), with the version the entry points at (`physical`;
    /// else null); stops when `f` returns false. Entries may be stale: the caller re-checks
    /// the key on the version it reads. Under `physical` a tuple id comes once per version of
    /// it with the key.
    pub(crate) fn lookup_entries(
        &self,
        i: usize,
        key: &[u8],
        f: &mut dyn FnMut(TupleId, *const Version) -> bool,
    ) {
        if i == 0 || !(self.logical_pk || self.physical) {
            return self.indexes[i].lookup_entries(key, &mut |tid| f(tid, ptr::null()));
        }
        // The entries of `key` are contiguous from `key` on: stop at the first that does not
        // start with it (no upper bound to allocate).
        let mut scan = |k: &[u8], value: u64| {
            if !k.starts_with(key) {
                return false;
            }
            match self.split_entry(k, value) {
                Some((skey, tid, v)) if skey.len() == key.len() => f(tid, v),
                _ => true,
            }
        };
        self.indexes[i].scan(
            Bound::Included(key),
            Bound::Unbounded,
            ScanDirection::Ascending,
            false,
            &mut scan,
        );
    }

    /// A whole `logical-pk` or `physical` entry `k` with value `value` split into (its
    /// secondary key, the tuple id, the version it points at or null).
    #[inline]
    fn split_entry<'k>(
        &self,
        k: &'k [u8],
        value: u64,
    ) -> Option<(&'k [u8], TupleId, *const Version)> {
        if self.physical {
            let n = k.len().checked_sub(8)?;
            let addr = u64::from_be_bytes(k[n..].try_into().ok()?) as usize;
            return Some((&k[..n], TupleId::new(value), addr as *const Version));
        }
        let (skey, tid) = self.resolve_pk_entry(k)?;
        Some((skey, tid, ptr::null()))
    }

    /// Ordered scan of index `i` over encoded key bounds; `f(entry's key, tuple id, version
    /// the entry points at or null)`. Hash indexes cannot scan. With `stamps`, the leaves
    /// read are stamped there (`BTree::scan_stamped`); returns whether they were (not for a
    /// secondary index under index pointers `logical-pk` or `physical`, whose entries the
    /// scan may pass over without reporting).
    pub(crate) fn scan_index(
        &self,
        i: usize,
        lo: Bound<&[u8]>,
        hi: Bound<&[u8]>,
        dir: ScanDirection,
        f: &mut dyn FnMut(&[u8], TupleId, *const Version) -> bool,
        stamps: Option<&mut Vec<NodeStamp>>,
    ) -> bool {
        let secondary = i != 0;
        if !secondary || !(self.logical_pk || self.physical) {
            let mut g = |k: &[u8], tid| f(k, TupleId::new(tid), ptr::null());
            let stamped = stamps.is_some();
            self.indexes[i].scan_stamped(lo, hi, dir, secondary, &mut g, stamps);
            return stamped;
        }
        // Entries that `split_entry` passes over are not reported: no stamps.
        let mut scan = |k: &[u8], value: u64| match self.split_entry(k, value) {
            Some((skey, tid, v)) => f(skey, tid, v),
            None => true,
        };
        self.indexes[i].scan(lo, hi, dir, false, &mut scan);
        false
    }

    /// Whether the leaves a scan of index `i` stamped (`scan_index`) are unchanged since.
    pub(crate) fn stamps_hold(&self, i: usize, stamps: &[NodeStamp]) -> bool {
        self.indexes[i].stamps_hold(stamps)
    }
}

/// A `physical` entry: `key ++ v's address (u64 BE)`, into `buf`.
#[inline]
fn physical_entry(key: &[u8], v: *const Version, buf: &mut Vec<u8>) {
    buf.clear();
    buf.extend_from_slice(key);
    buf.extend_from_slice(&(v as usize as u64).to_be_bytes());
}

impl std::fmt::Debug for Table {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Table")
            .field("id", &self.id)
            .field("name", &self.schema.name)
            .finish()
    }
}

impl Drop for Table {
    fn drop(&mut self) {
        // No transaction can be running: the Database (which owns every transaction's borrow)
        // is being dropped. Free every chain, then the masters (a version names its own
        // tuple's master, in the same segment), then the segment.
        let words = 1usize << self.shift;
        for d in self.directory.iter() {
            let seg = d.load(Ordering::Acquire);
            if seg.is_null() {
                continue;
            }
            // SAFETY: exclusive access during drop; each version is reachable from one chain,
            // each master from one word.
            unsafe {
                let seg = free_segment(seg, self.shift);
                for e in seg.iter().step_by(words) {
                    let mut v = e.load(Ordering::Acquire);
                    while !v.is_null() {
                        let next = (*v).next.load(Ordering::Acquire);
                        Version::free(v);
                        v = next;
                    }
                }
                for w in seg
                    .iter()
                    .skip(1)
                    .step_by(words)
                    .take(SEG_LEN * (words - 1))
                {
                    let m = w.load(Ordering::Acquire) as *mut Master;
                    if !m.is_null() {
                        Master::free(m);
                    }
                }
            }
        }
    }
}
