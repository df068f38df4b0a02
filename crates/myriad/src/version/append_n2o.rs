//! Append-only version chains (thesis §5.4.1; Hekaton §2.3).
//!
//! A logical row is a chain. Newest-to-oldest (`n2o`): the indirection entry of its tuple id
//! points at the newest version, and each version's `next` at the next older one.
//! Oldest-to-newest (`o2n`): the entry points at the oldest version and `next` at the next
//! newer one. Only the chain operations of `storage/table.rs` and GC's pruning know the
//! order; readers find the visible version by one walk in either. A version is one heap
//! block: this header followed by the table's fixed-size row data, then the protocol's
//! words (`ext_word`), if it keeps any.
//!
//! Invariants owned here:
//! - the row data of a version is written only by its creator while its Begin field holds the
//!   creator's transaction id (so no other transaction reads it), and never after;
//! - N2O: `next` only ever changes from a pointer to null (GC truncation, `take_next`), and
//!   whoever takes a non-null `next` owns (frees) the versions behind it. O2N: only the
//!   newest version's `next` changes (a writer appends, or a rollback takes its version
//!   back out); GC cuts from the front by moving the entry (`gc/epoch.rs`).

use super::pool;
use std::alloc::Layout;
use std::ptr::{self, NonNull};
use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering};

/// Version header; the row data follows it in the same allocation.
#[repr(C, align(8))]
pub struct Version {
    /// Begin timestamp, or the creating transaction's id (`TXN_BIT` set) until post-processing.
    pub(crate) begin: AtomicU64,
    /// End timestamp (`INFINITY` while latest), or the id of the transaction that superseded or
    /// is superseding this version (the write lock, Hekaton §2.6).
    pub(crate) end: AtomicU64,
    /// Next older version (N2O), or next newer version (O2N).
    pub(crate) next: AtomicPtr<Version>,
    /// The per-version word of the protocols that track reads in the version header
    /// (thesis §5.3): MVTO's read-ts (the largest timestamp of a transaction that read this
    /// version), MV2PL's read count (transactions holding a read lock on it). Zero otherwise.
    pub(crate) aux: AtomicU64,
    /// Bytes of row data after the header.
    pub(crate) data_len: u32,
    /// True if this version records a delete.
    pub(crate) tombstone: std::sync::atomic::AtomicBool,
    /// Protocol words after the row data (`ext_word`): as many as the database's protocol
    /// keeps per version beyond `aux` (`Protocol::version_ext`; SSN: 2). The same for every
    /// version of a database, so a protocol that needs none pays nothing.
    pub(crate) ext: u8,
    /// The memory space the block came from (`space.rs`; 1-based), 0 for the general
    /// allocator. Frees return the block there.
    pub(crate) space: u8,
    /// The layout of the row data (`FORM_*`): inline; in place (`master.rs`: no row data,
    /// the last two protocol words are the tuple's master and the version's image, freed
    /// with it); or `FORM_BLOBS + n`, the stored form of `non_inline.rs` whose first `n`
    /// words point at blobs the version holds a reference to.
    pub(crate) form: u8,
}

/// `Version::form` of a version holding its row inline.
pub(crate) const FORM_INLINE: u8 = 0;
/// `Version::form` under in-place storage.
pub(crate) const FORM_IN_PLACE: u8 = 1;
/// `Version::form` base of the non-inline stored form (plus the blob count).
pub(crate) const FORM_BLOBS: u8 = 2;

const HEADER: usize = std::mem::size_of::<Version>();

/// Offset of the first protocol word: after the row data, 8-aligned.
#[inline]
const fn ext_offset(data_len: usize) -> usize {
    (HEADER + data_len + 7) & !7
}

impl Version {
    /// Bytes a version with `data_len` bytes of row data and `ext` protocol words occupies.
    pub(crate) fn alloc_size(data_len: usize, ext: u8) -> usize {
        if ext == 0 {
            HEADER + data_len
        } else {
            ext_offset(data_len) + 8 * ext as usize
        }
    }

    fn layout(size: usize) -> Layout {
        // HEADER is a multiple of 8 and small; data_len is bounded by the schema.
        match Layout::from_size_align(size, 8) {
            Ok(l) => l,
            Err(_) => panic!("version layout overflow for a {size}-byte version"),
        }
    }

    /// Allocates a version with zeroed row data.
    #[cfg(test)]
    pub(crate) fn alloc(begin: u64, data_len: usize, next: *mut Version) -> NonNull<Version> {
        let n = Self::alloc_uninit(begin, data_len, next, 0, 0);
        // SAFETY: the block holds data_len bytes after the header.
        unsafe { ptr::write_bytes((n.as_ptr() as *mut u8).add(HEADER), 0, data_len) };
        n
    }

    /// Allocates a version whose row data is a copy of `data`, from memory space `space`
    /// (`space::for_slot`; 0: the general allocator).
    pub(crate) fn alloc_copy(
        begin: u64,
        data: &[u8],
        next: *mut Version,
        ext: u8,
        space: u8,
    ) -> NonNull<Version> {
        let n = Self::alloc_uninit(begin, data.len(), next, ext, space);
        // SAFETY: the block holds data.len() bytes after the header; `data` is another block.
        unsafe {
            ptr::copy_nonoverlapping(
                data.as_ptr(),
                (n.as_ptr() as *mut u8).add(HEADER),
                data.len(),
            )
        };
        n
    }

    /// An in-place storage version (`master.rs`): a header with `ext` words, the protocol's
    /// and then the master and image words (image: none yet). Its row lives in `master`.
    pub(crate) fn alloc_in_place(
        begin: u64,
        next: *mut Version,
        ext: u8,
        space: u8,
        master: *const super::master::Master,
    ) -> NonNull<Version> {
        debug_assert!(ext >= 2);
        let n = Self::alloc_uninit(begin, 0, next, ext, space);
        // SAFETY: fresh and unpublished.
        let v = unsafe { &mut *n.as_ptr() };
        v.form = FORM_IN_PLACE;
        v.set_master(master);
        n
    }

    /// A version in the non-inline stored form of `layout` holding the logical row `row`;
    /// `prev`, the version it supersedes (its blobs may be shared). Returns it and the bytes
    /// of the blobs it made.
    ///
    /// # Safety
    /// `prev` is a live version of the same table (its stored form) that the caller keeps
    /// from being freed.
    pub(crate) unsafe fn alloc_non_inline(
        begin: u64,
        row: &[u8],
        next: *mut Version,
        ext: u8,
        space: u8,
        layout: &super::non_inline::NiLayout,
        prev: Option<&Version>,
    ) -> (NonNull<Version>, usize) {
        let n = Self::alloc_uninit(begin, layout.stored_size(), next, ext, space);
        let v = &mut *n.as_ptr();
        v.form = FORM_BLOBS + layout.blobs() as u8;
        let out = (n.as_ptr() as *mut u8).add(HEADER);
        let made = layout.encode(row, prev.map(|p| p.data()), out);
        (n, made)
    }

    /// Blob pointers at the start of the row data (non-inline stored form), else 0.
    #[inline]
    pub(crate) fn blobs(&self) -> usize {
        self.form.saturating_sub(FORM_BLOBS) as usize
    }

    /// Gives up this version's blob references ahead of its free (which `BLOBS_DROPPED` in
    /// its token then tells to leave them be): blobs it held the last reference to go onto
    /// `zeroed`, for `non_inline::dealloc_blob` once no reader can reach them. Returns their
    /// bytes, which are reclaimed as of now (accounting).
    ///
    /// # Safety
    /// The version is unlinked (or never published) and retired once.
    pub(crate) unsafe fn drop_blob_refs(&self, zeroed: &mut Vec<usize>) -> usize {
        match self.blobs() {
            0 => 0,
            n => super::non_inline::drop_refs(self.data().as_ptr(), n, zeroed),
        }
    }

    #[inline]
    pub(crate) fn is_in_place(&self) -> bool {
        self.form == FORM_IN_PLACE
    }

    /// A version with its header written and its row data not yet initialized.
    /// Where the next version of `size` bytes (`alloc_size`) in memory space `space` that
    /// this thread allocates will be, if known now: the top of its pool.
    pub(crate) fn next_block(size: usize, space: u8) -> Option<*const u8> {
        if space != 0 && size <= super::space::MAX_BLOCK {
            return None;
        }
        pool::peek(size)
    }

    fn alloc_uninit(
        begin: u64,
        data_len: usize,
        next: *mut Version,
        ext: u8,
        space: u8,
    ) -> NonNull<Version> {
        let size = Self::alloc_size(data_len, ext);
        let layout = Self::layout(size);
        // A block too big for a space's increments comes from the general allocator.
        let space = if size > super::space::MAX_BLOCK {
            0
        } else {
            space
        };
        let p = if space == 0 {
            pool::take(layout)
        } else {
            super::space::take(space, (size + 7) & !7)
        } as *mut Version;
        let Some(nn) = NonNull::new(p) else {
            std::alloc::handle_alloc_error(layout)
        };
        // SAFETY: p is a block of HEADER + data_len bytes, aligned to 8, owned by us.
        unsafe {
            ptr::write(
                p,
                Version {
                    begin: AtomicU64::new(begin),
                    end: AtomicU64::new(super::INFINITY),
                    next: AtomicPtr::new(next),
                    aux: AtomicU64::new(0),
                    data_len: data_len as u32,
                    tombstone: std::sync::atomic::AtomicBool::new(false),
                    ext,
                    space,
                    form: FORM_INLINE,
                },
            );
            for i in 0..ext as usize {
                ptr::write(
                    (p as *mut u8).add(ext_offset(data_len) + 8 * i) as *mut AtomicU64,
                    AtomicU64::new(0),
                );
            }
        };
        nn
    }

    /// Frees a version.
    ///
    /// # Safety
    /// `v` came from `alloc`, is unreachable for every thread that is not pinned in an epoch
    /// older than the unlink, and is freed once.
    pub(crate) unsafe fn free(v: *mut Version) {
        Self::free_token(v, (*v).token());
    }

    /// A `token` flag: `drop_blob_refs` already gave up the version's blob references.
    pub(crate) const BLOBS_DROPPED: u64 = 1 << 48;
    /// In a token: an in-place version whose image word holds no image (a `siro` tag, which
    /// never becomes one), so `free_token` need not load that word (a cache miss: the
    /// version was last touched long before its free).
    pub(crate) const NO_IMAGE: u64 = 1 << 49;

    /// What `free_token` needs to free this version without reading its header again: its
    /// size, its memory space above bit 32, its form above bit 40, and `NO_IMAGE`.
    #[inline]
    pub(crate) fn token(&self) -> u64 {
        let no_image = if self.is_in_place() && self.image_word_is_tag() {
            Self::NO_IMAGE
        } else {
            0
        };
        self.size() as u64 | (self.space as u64) << 32 | (self.form as u64) << 40 | no_image
    }

    /// `free` for a version whose `token()` the caller took earlier, without reading its
    /// header (GC frees versions long after it last touched them).
    ///
    /// # Safety
    /// As `free`, and `token` is the version's `token()`, plus `BLOBS_DROPPED` if
    /// `drop_blob_refs` was called on it.
    pub(crate) unsafe fn free_token(v: *mut Version, token: u64) {
        debug_assert_eq!((*v).token(), token & !Self::BLOBS_DROPPED);
        match (token >> 40) as u8 {
            FORM_INLINE => {}
            FORM_IN_PLACE if token & Self::NO_IMAGE != 0 => {}
            FORM_IN_PLACE => (*v).free_image(),
            _ if token & Self::BLOBS_DROPPED != 0 => {}
            form => super::non_inline::release(
                (v as *const u8).add(HEADER),
                (form - FORM_BLOBS) as usize,
            ),
        }
        let (space, size) = ((token >> 32) as u8, token as u32 as usize);
        if space == 0 {
            pool::give(v as *mut u8, Self::layout(size));
        } else {
            super::space::give(space, v as *mut u8, (size + 7) & !7);
        }
    }

    /// Bytes this version occupies.
    #[inline]
    pub(crate) fn size(&self) -> usize {
        Self::alloc_size(self.data_len as usize, self.ext)
    }

    /// Protocol word `i` (< `ext`) after the row data.
    #[inline]
    pub(crate) fn ext_word(&self, i: usize) -> &AtomicU64 {
        assert!(
            i < self.ext as usize,
            "protocol word {i} of a version with {}",
            self.ext
        );
        // SAFETY: the allocation holds `ext` words at ext_offset (see `alloc_uninit`),
        // initialized at allocation and 8-aligned.
        unsafe {
            &*((self as *const Version as *const u8).add(ext_offset(self.data_len as usize) + 8 * i)
                as *const AtomicU64)
        }
    }

    /// The row data.
    #[inline]
    pub(crate) fn data(&self) -> &[u8] {
        // SAFETY: the allocation holds data_len bytes after the header (see `alloc`).
        unsafe {
            std::slice::from_raw_parts(
                (self as *const Version as *const u8).add(HEADER),
                self.data_len as usize,
            )
        }
    }

    /// Mutable row data.
    ///
    /// # Safety
    /// Caller is the creator of this version and it is not yet visible to anyone else
    /// (its Begin holds the caller's transaction id), and no other reference to the data exists.
    #[allow(clippy::mut_from_ref)]
    #[inline]
    pub(crate) unsafe fn data_mut(&self) -> &mut [u8] {
        std::slice::from_raw_parts_mut(
            (self as *const Version as *mut u8).add(HEADER),
            self.data_len as usize,
        )
    }

    #[inline]
    pub(crate) fn is_tombstone(&self) -> bool {
        self.tombstone.load(Ordering::Acquire)
    }

    /// Detaches everything older than this version; the caller owns what is returned.
    pub(crate) fn take_next(&self) -> *mut Version {
        self.next.swap(ptr::null_mut(), Ordering::AcqRel)
    }
}
