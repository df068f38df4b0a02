//! Non-inline attributes under append-only storage (thesis §5.4.1, Fig. 5.11).
//!
//! A table's variable-length columns (VARCHAR, BYTES) live outside the version, each in a
//! block of its own ("blob") that the version points to; the version keeps the pointers and
//! the inline columns. `copy`: every new version gets fresh copies of all of its blobs (the
//! full-tuple copy). `shared`: a new version points to the blobs of the version it supersedes
//! for every such attribute whose bytes it leaves unchanged, and a reference count frees a
//! blob when the last version pointing to it is freed.
//!
//! Stored form of a version's data: the `n` blob pointers first (8 bytes each, so that
//! `Version::free_token` can release them knowing only `n`, which the version header
//! records), then the inline columns in column order. The logical row (every column at its
//! schema offset, what the rest of the engine reads and writes) is rebuilt by `decode`
//! (`Table::row`). A blob holds its column's full width exactly as the inline layout would,
//! so a decoded row is byte-for-byte the row that was encoded.
//!
//! Written by hand rather than with `Arc<[u8]>`: the pointers live inside raw version blocks
//! that are freed by GC long after their table was last consulted.

use crate::schema::{ColumnType, TableSchema};
use std::alloc::{alloc, dealloc, handle_alloc_error, Layout};
use std::ptr;
use std::sync::atomic::{AtomicU32, Ordering};

/// Most non-inline columns of a table (the version header stores the count in a byte next
/// to the other layouts' codes); variable-length columns past this many stay inline.
pub(crate) const MAX_BLOBS: usize = 250;

/// Where a column's bytes are in the stored form.
#[derive(Clone, Copy, Debug)]
enum Place {
    /// At this offset of the stored data.
    Inline(usize),
    /// In the blob whose pointer is slot `i` of the stored data.
    Blob(usize),
}

/// One table's stored form.
#[derive(Debug)]
pub(crate) struct NiLayout {
    shared: bool,
    /// (offset in the logical row, width, place) per column.
    cols: Vec<(usize, usize, Place)>,
    blobs: usize,
    stored_size: usize,
    row_size: usize,
}

/// Blob header: reference count and payload length; the payload follows.
const BLOB_HEADER: usize = 8;

fn blob_layout(len: usize) -> Layout {
    match Layout::from_size_align(BLOB_HEADER + len, 8) {
        Ok(l) => l,
        Err(_) => panic!("blob layout overflow for {len} bytes"),
    }
}

/// A new blob holding `bytes`, with one reference.
fn blob_alloc(bytes: &[u8]) -> *mut u8 {
    let l = blob_layout(bytes.len());
    // SAFETY: non-zero size.
    let p = unsafe { alloc(l) };
    if p.is_null() {
        handle_alloc_error(l);
    }
    // SAFETY: a fresh block of BLOB_HEADER + len bytes, 8-aligned.
    unsafe {
        ptr::write(p as *mut AtomicU32, AtomicU32::new(1));
        ptr::write((p as *mut u32).add(1), bytes.len() as u32);
        ptr::copy_nonoverlapping(bytes.as_ptr(), p.add(BLOB_HEADER), bytes.len());
    }
    p
}

/// # Safety
/// `p` is a live blob.
unsafe fn blob_bytes<'a>(p: *const u8) -> &'a [u8] {
    let len = ptr::read((p as *const u32).add(1)) as usize;
    std::slice::from_raw_parts(p.add(BLOB_HEADER), len)
}

/// # Safety
/// `p` is a live blob.
unsafe fn refs<'a>(p: *const u8) -> &'a AtomicU32 {
    &*(p as *const AtomicU32)
}

/// Bytes a blob of `len` payload bytes occupies.
pub(crate) fn blob_size(len: usize) -> usize {
    BLOB_HEADER + len
}

/// # Safety
/// `data` starts with at least `i + 1` blob pointers.
unsafe fn slot(data: *const u8, i: usize) -> *mut u8 {
    ptr::read((data as *const usize).add(i)) as *mut u8
}

/// Drops one reference to each of the `n` blobs whose pointers start `data`, freeing those
/// no version refers to any more.
///
/// # Safety
/// `data` is the stored data of a version being freed, whose references are given up
/// exactly once.
pub(crate) unsafe fn release(data: *const u8, n: usize) {
    for i in 0..n {
        let b = slot(data, i);
        if drop_ref(b) > 0 {
            dealloc_blob(b as usize);
        }
    }
}

/// Drops the reference `p`; returns the blob's size if that was the last one (the caller
/// then owns the blob and frees it with `dealloc_blob`, once no reader can still reach it),
/// else 0. A blob whose count reached zero is never shared again (`try_share`), so the
/// bytes count as reclaimed from this moment, however late the memory itself goes.
///
/// # Safety
/// `p` is a live blob and the caller owns one of its references.
pub(crate) unsafe fn drop_ref(p: *mut u8) -> usize {
    if refs(p).fetch_sub(1, Ordering::AcqRel) == 1 {
        blob_size(blob_bytes(p).len())
    } else {
        0
    }
}

/// Drops one reference to each of the `n` blobs whose pointers start `data`, pushing those
/// it was the last reference to onto `zeroed` (for `dealloc_blob` after the epoch); returns
/// their bytes.
///
/// # Safety
/// `data` is the stored data of a version being retired, whose references are given up
/// exactly once.
pub(crate) unsafe fn drop_refs(data: *const u8, n: usize, zeroed: &mut Vec<usize>) -> usize {
    let mut bytes = 0;
    for i in 0..n {
        let b = slot(data, i);
        let freed = drop_ref(b);
        if freed > 0 {
            bytes += freed;
            zeroed.push(b as usize);
        }
    }
    bytes
}

/// Frees a blob whose last reference `drop_ref` dropped.
///
/// # Safety
/// `p` is such a blob, no thread can still read it, and it is freed once.
pub(crate) unsafe fn dealloc_blob(p: usize) {
    let p = p as *mut u8;
    debug_assert_eq!(refs(p).load(Ordering::Relaxed), 0);
    let len = blob_bytes(p).len();
    dealloc(p, blob_layout(len));
}

/// Takes one more reference to `p` unless its count already reached zero (the version
/// holding the last one was retired: a writer reviving a deleted row may still encode from
/// its cut tombstone). Returns whether it did.
///
/// # Safety
/// `p` is a blob not yet freed (the caller is pinned since it read the pointer).
unsafe fn try_share(p: *mut u8) -> bool {
    let r = refs(p);
    let mut n = r.load(Ordering::Relaxed);
    while n > 0 {
        match r.compare_exchange_weak(n, n + 1, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => return true,
            Err(now) => n = now,
        }
    }
    false
}

impl NiLayout {
    /// The stored form of `schema` under `shared` or copy; `None` without variable-length
    /// columns (the table stays inline).
    pub(crate) fn new(schema: &TableSchema, shared: bool) -> Option<NiLayout> {
        let mut blobs = 0;
        let mut cols: Vec<(usize, usize, Place)> = schema
            .columns
            .iter()
            .map(|c| {
                let w = c.ty.width();
                let var = matches!(c.ty, ColumnType::Str(_) | ColumnType::Bytes(_));
                if var && blobs < MAX_BLOBS {
                    blobs += 1;
                    (c.offset, w, Place::Blob(blobs - 1))
                } else {
                    (c.offset, w, Place::Inline(0))
                }
            })
            .collect();
        if blobs == 0 {
            return None;
        }
        let mut at = 8 * blobs;
        for c in &mut cols {
            if let Place::Inline(o) = &mut c.2 {
                *o = at;
                at += c.1;
            }
        }
        Some(NiLayout {
            shared,
            cols,
            blobs,
            stored_size: at,
            row_size: schema.row_size,
        })
    }

    /// Bytes of a version's stored data.
    pub(crate) fn stored_size(&self) -> usize {
        self.stored_size
    }

    /// Blob pointers at the start of the stored data.
    pub(crate) fn blobs(&self) -> usize {
        self.blobs
    }

    /// Writes the stored form of the logical row `row` into `out` (`stored_size` bytes).
    /// `prev`: the stored data of the version this one supersedes; under `shared` its blobs
    /// whose bytes equal the new column's are shared. Returns the bytes of the blobs made.
    ///
    /// # Safety
    /// `out` is `stored_size` writable bytes no one else reads yet; `prev` is the stored data
    /// of a live version of this table the caller keeps from being freed.
    pub(crate) unsafe fn encode(&self, row: &[u8], prev: Option<&[u8]>, out: *mut u8) -> usize {
        let mut made = 0;
        for &(lo, w, place) in &self.cols {
            let bytes = &row[lo..lo + w];
            match place {
                Place::Inline(o) => ptr::copy_nonoverlapping(bytes.as_ptr(), out.add(o), w),
                Place::Blob(i) => {
                    let old = prev
                        .filter(|_| self.shared)
                        .map(|p| slot(p.as_ptr(), i))
                        .filter(|&b| blob_bytes(b) == bytes && try_share(b));
                    let b = match old {
                        Some(b) => b,
                        None => {
                            made += blob_size(w);
                            blob_alloc(bytes)
                        }
                    };
                    ptr::write((out as *mut usize).add(i), b as usize);
                }
            }
        }
        made
    }

    /// Changes the stored data `data` of the caller's own uncommitted version to hold `row`:
    /// inline columns in place, a changed blob column by a new blob (the old reference is
    /// handed to `retire`, to be released once no reader can hold it). Returns the bytes of
    /// the blobs made.
    ///
    /// # Safety
    /// `data` is the stored data of a version only the caller writes.
    pub(crate) unsafe fn overwrite(
        &self,
        data: *mut u8,
        row: &[u8],
        mut retire: impl FnMut(*mut u8),
    ) -> usize {
        let mut made = 0;
        for &(lo, w, place) in &self.cols {
            let bytes = &row[lo..lo + w];
            match place {
                Place::Inline(o) => ptr::copy_nonoverlapping(bytes.as_ptr(), data.add(o), w),
                Place::Blob(i) => {
                    let old = slot(data, i);
                    if blob_bytes(old) != bytes {
                        made += blob_size(w);
                        ptr::write((data as *mut usize).add(i), blob_alloc(bytes) as usize);
                        retire(old);
                    }
                }
            }
        }
        made
    }

    /// The logical row of the stored data `stored`, into `buf`.
    ///
    /// # Safety
    /// `stored` is the stored data of a version the caller keeps from being freed.
    pub(crate) unsafe fn decode(&self, stored: &[u8], buf: &mut Vec<u8>) {
        buf.resize(self.row_size, 0);
        for &(lo, w, place) in &self.cols {
            let src = match place {
                Place::Inline(o) => &stored[o..o + w],
                Place::Blob(i) => blob_bytes(slot(stored.as_ptr(), i)),
            };
            buf[lo..lo + w].copy_from_slice(src);
        }
    }
}
