//! A table is an indirection array of version chains plus its indexes (ERMIA §3.1,
//! thesis §5.6.1). The indirection entry of a tuple id is the only place that points at the
//! newest version, so indexes hold tuple ids and never change when a row is updated.
//!
//! The indirection array is segmented (fixed directory of lazily allocated segments) so it
//! grows without moving entries and without a lock.

use crate::index::Index;
use crate::schema::TableSchema;
use crate::version::Version;
use std::ptr;
use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering};
use std::sync::Arc;

/// A tuple id: the index of a logical row's indirection entry.
pub type TupleId = u64;

const SEG_BITS: u32 = 16;
const SEG_LEN: usize = 1 << SEG_BITS;
const DIR_LEN: usize = 1 << 16;

type Segment = [AtomicPtr<Version>; SEG_LEN];

/// A table's storage. Shared by handle (`TableRef`).
pub struct Table {
    pub(crate) id: u32,
    pub(crate) db_id: u64,
    pub(crate) schema: TableSchema,
    pub(crate) indexes: Vec<Index>,
    directory: Box<[AtomicPtr<Segment>]>,
    next_tid: AtomicU64,
    /// Replaced by a copy with one more index (`Database::create_index`): transactions
    /// refuse this handle, so nothing is written where no lookup would find it.
    pub(crate) retired: std::sync::atomic::AtomicBool,
}

/// A cheap, clonable handle to a table.
pub type TableRef = Arc<Table>;

impl Table {
    pub(crate) fn new(id: u32, db_id: u64, schema: TableSchema) -> Self {
        let indexes = schema
            .indexes
            .iter()
            .map(|d| Index::new(d.kind, schema.expected_rows))
            .collect();
        Table {
            id,
            db_id,
            schema,
            indexes,
            directory: (0..DIR_LEN)
                .map(|_| AtomicPtr::new(ptr::null_mut()))
                .collect(),
            next_tid: AtomicU64::new(0),
            retired: std::sync::atomic::AtomicBool::new(false),
        }
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

    /// Allocates a fresh tuple id (one shared fetch-add; counted by the caller).
    pub(crate) fn alloc_tid(&self) -> Option<TupleId> {
        let tid = self.next_tid.fetch_add(1, Ordering::Relaxed);
        let seg = (tid >> SEG_BITS) as usize;
        let dir = self.directory.get(seg)?;
        if dir.load(Ordering::Acquire).is_null() {
            let fresh: Box<Segment> = (0..SEG_LEN)
                .map(|_| AtomicPtr::new(ptr::null_mut()))
                .collect::<Vec<_>>()
                .into_boxed_slice()
                .try_into()
                .unwrap_or_else(|_| panic!("segment length invariant"));
            let raw = Box::into_raw(fresh);
            if dir
                .compare_exchange(ptr::null_mut(), raw, Ordering::AcqRel, Ordering::Acquire)
                .is_err()
            {
                // SAFETY: raw was never published.
                drop(unsafe { Box::from_raw(raw) });
            }
        }
        Some(tid)
    }

    /// Number of tuple ids handed out.
    pub(crate) fn tid_count(&self) -> u64 {
        self.next_tid.load(Ordering::Acquire)
    }

    /// The indirection entry of `tid`, or `None` if its segment was never allocated.
    #[inline]
    pub(crate) fn entry(&self, tid: TupleId) -> Option<&AtomicPtr<Version>> {
        let seg = self
            .directory
            .get((tid >> SEG_BITS) as usize)?
            .load(Ordering::Acquire);
        if seg.is_null() {
            return None;
        }
        // SAFETY: published segments live until the table is dropped.
        Some(unsafe { &(*seg)[(tid as usize) & (SEG_LEN - 1)] })
    }
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
        // is being dropped. Free every chain, then the segments.
        for d in self.directory.iter() {
            let seg = d.load(Ordering::Acquire);
            if seg.is_null() {
                continue;
            }
            // SAFETY: exclusive access during drop; each version is reachable from one chain.
            unsafe {
                for e in (*seg).iter() {
                    let mut v = e.load(Ordering::Acquire);
                    while !v.is_null() {
                        let next = (*v).next.load(Ordering::Acquire);
                        Version::free(v);
                        v = next;
                    }
                }
                drop(Box::from_raw(seg));
            }
        }
    }
}
