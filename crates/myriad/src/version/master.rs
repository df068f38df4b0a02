//! In-place version storage (thesis §5.4.2–5.4.3): `time-travel` and `delta`.
//!
//! Each tuple has one *master* block in the main table (`Table::master`), holding the row
//! data of its newest version, which its writer updates in place. Versions keep their
//! identity (the header every protocol, read set and write set names: Begin/End, `aux`,
//! the protocol words) but carry no row data; two words after the protocol words point at
//! the tuple's master and at the version's *image*:
//! - `time-travel`: a full copy of the version's row, taken into the time-travel store
//!   when a writer first supersedes it ("copies the master version to this location, then
//!   modifies the master version");
//! - `delta`: the before-images of only the columns its superseder changed, in the delta
//!   store ("the original values of modified attributes"); a read of an older version
//!   starts from the master and applies, newest first, the deltas down to that version.
//!
//! Written by hand (not a crate): this is the version storage the thesis compares.
//!
//! Invariants:
//! - only the writer holding the write lock on the newest version (its End field) writes
//!   the master, and it publishes the image of the version it supersedes (covering every
//!   column it will change) *before* it changes a byte of the master; a rollback restores
//!   the master from that image before releasing the lock, and keeps the image (a reader
//!   may have copied the aborted data: applying the image repairs that copy);
//! - a version's image is immutable once published (a delta that must cover more columns
//!   is replaced by a larger copy, the old one freed after the epoch), and is freed with
//!   its version (`Version::free_token`);
//! - readers copy the master under its sequence word (even: stable; odd: being written),
//!   so a read never sees a torn row, and the row a read returns is the reader's copy.
//!
//! A lock held by an aborted writer is not taken over under these storages (Hekaton §2.6
//! allows it): the master still holds the aborted data until its rollback restores it.

use std::alloc::Layout;
use std::ptr;
use std::sync::atomic::{fence, AtomicU64, Ordering};

use super::Version;

/// Which in-place scheme a table uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum InPlace {
    TimeTravel,
    Delta,
}

/// A tuple's master block: this header, the row data, then the tuple id (8-aligned).
///
/// The block is aligned to a cache line and the header is two words, so the sequence word
/// and the row data share the first line and `siro`'s two slots of a row of up to 88 bytes
/// fit in three lines (at 24 bytes of header an update, which reads one slot and writes the
/// other, touched four or five). The tuple id, which only a delta read needs, is after
/// the row data, off the lines a read or an update touches.
#[repr(C, align(8))]
pub(crate) struct Master {
    /// Even: stable; odd: the owner of the newest version's lock is writing the row.
    seq: AtomicU64,
    /// Bytes of row data.
    len: u32,
    _pad: u32,
}

const MASTER_HEADER: usize = std::mem::size_of::<Master>();

/// Masters are aligned to (and sized in) cache lines.
const MASTER_ALIGN: usize = 64;

/// Offset of the tuple id: after the row data, 8-aligned.
const fn tid_offset(len: usize) -> usize {
    (MASTER_HEADER + len + 7) & !7
}

fn layout(size: usize, align: usize) -> Layout {
    match Layout::from_size_align(size, align) {
        Ok(l) => l,
        Err(_) => panic!("layout overflow for a {size}-byte block"),
    }
}

fn master_layout(len: usize) -> Layout {
    layout(Master::size(len), MASTER_ALIGN)
}

impl Master {
    /// Bytes a master with `len` bytes of row data occupies (header, row, tuple id, rounded
    /// up to whole cache lines).
    pub(crate) fn size(len: usize) -> usize {
        (tid_offset(len) + 8).next_multiple_of(MASTER_ALIGN)
    }

    /// Bytes from a master's start to the end of `len` bytes of row data.
    pub(crate) const fn data_end(len: usize) -> usize {
        MASTER_HEADER + len
    }

    /// A zeroed master for `tid` with `len` bytes of row data.
    pub(crate) fn alloc(tid: crate::ids::TupleId, len: usize) -> *mut Master {
        let len32 = u32::try_from(len)
            .unwrap_or_else(|_| panic!("a {len}-byte row does not fit a master block"));
        let l = master_layout(len);
        // SAFETY: non-zero size (the header).
        let p = unsafe { std::alloc::alloc_zeroed(l) } as *mut Master;
        if p.is_null() {
            std::alloc::handle_alloc_error(l);
        }
        // SAFETY: fresh block of the right layout; the tuple id's word is inside it.
        unsafe {
            ptr::write(
                p,
                Master {
                    seq: AtomicU64::new(0),
                    len: len32,
                    _pad: 0,
                },
            );
            ptr::write((p as *mut u8).add(tid_offset(len)) as *mut u64, tid.get());
        }
        p
    }

    /// # Safety
    /// `m` came from `alloc` and is unreachable.
    pub(crate) unsafe fn free(m: *mut Master) {
        let len = (*m).len as usize;
        std::alloc::dealloc(m as *mut u8, master_layout(len));
    }

    /// The tuple id (a delta read finds the chain's newest version through it).
    pub(crate) fn tid(&self) -> crate::ids::TupleId {
        // SAFETY: written at allocation, 8-aligned inside the block, never changed.
        crate::ids::TupleId::new(unsafe {
            ptr::read(
                (self as *const Master as *const u8).add(tid_offset(self.len as usize))
                    as *const u64,
            )
        })
    }

    /// The address of byte `off` of the row data (for prefetching: not dereferenced here).
    pub(crate) fn data_addr(&self, off: usize) -> *const u8 {
        self.data_ptr().wrapping_add(off)
    }

    fn data_ptr(&self) -> *mut u8 {
        // SAFETY: the block holds `len` bytes after the header.
        unsafe { (self as *const Master as *mut u8).add(MASTER_HEADER) }
    }

    /// The row data, for the writer that holds the newest version's lock (no one else
    /// writes it meanwhile).
    #[inline]
    pub(crate) fn owned(&self) -> &[u8] {
        // SAFETY: see `data_ptr`; only the caller writes.
        unsafe { std::slice::from_raw_parts(self.data_ptr(), self.len as usize) }
    }

    /// Writes the row through `f`, under the sequence word. Only the lock owner calls this.
    pub(crate) fn write(&self, f: impl FnOnce(&mut [u8])) {
        let s = self.seq.load(Ordering::Relaxed);
        self.seq.store(s + 1, Ordering::Relaxed);
        // Readers that see the new data also see the odd word (or a later one).
        fence(Ordering::Release);
        // SAFETY: the block holds `len` bytes; we are the only writer (see `owned`).
        f(unsafe { std::slice::from_raw_parts_mut(self.data_ptr(), self.len as usize) });
        self.seq.store(s + 2, Ordering::Release);
    }

    /// The `len` bytes at `off` of the row data, for the lock owner (as `owned`).
    #[inline]
    pub(crate) fn owned_at(&self, off: usize, len: usize) -> &[u8] {
        &self.owned()[off..off + len]
    }

    /// Writes the `len` bytes at `off` through `f`, under the sequence word (as `write`).
    pub(crate) fn write_at(&self, off: usize, len: usize, f: impl FnOnce(&mut [u8])) {
        self.write(|d| f(&mut d[off..off + len]));
    }

    /// `siro`'s update in place: under the sequence word, copies the `len` bytes at `from` to
    /// the (disjoint) `len` bytes at `to`, then gives `f` both — the new row to change and
    /// the old one it came from. Only the lock owner calls this, and no version names the
    /// slot at `to` meanwhile (`SiroStore::take_slot`).
    pub(crate) fn write_from<R>(
        &self,
        to: usize,
        from: usize,
        len: usize,
        f: impl FnOnce(&mut [u8], &[u8]) -> R,
    ) -> R {
        assert!(
            to.max(from) + len <= self.len as usize && (to + len <= from || from + len <= to),
            "a master write past its row data or over its source"
        );
        let s = self.seq.load(Ordering::Relaxed);
        self.seq.store(s + 1, Ordering::Relaxed);
        fence(Ordering::Release);
        // SAFETY: two disjoint ranges inside the block's `len` bytes (asserted); we are the
        // only writer (see `owned`), and readers copy under the sequence word.
        let r = unsafe {
            let new = std::slice::from_raw_parts_mut(self.data_ptr().add(to), len);
            let old = std::slice::from_raw_parts(self.data_ptr().add(from), len);
            new.copy_from_slice(old);
            f(new, old)
        };
        self.seq.store(s + 2, Ordering::Release);
        r
    }

    /// A consistent copy of the row into `buf` (retries while a writer is at work).
    pub(crate) fn snapshot(&self, buf: &mut Vec<u8>) {
        self.snapshot_at(0, self.len as usize, buf)
    }

    /// A consistent copy of the `len` bytes at `off` into `buf` (as `snapshot`).
    pub(crate) fn snapshot_at(&self, off: usize, len: usize, buf: &mut Vec<u8>) {
        assert!(
            off + len <= self.len as usize,
            "a master read past its row data"
        );
        buf.clear();
        buf.reserve(len);
        loop {
            let s1 = self.seq.load(Ordering::Acquire);
            if s1 & 1 == 1 {
                std::hint::spin_loop();
                continue;
            }
            // SAFETY: `len` bytes at data_ptr; `buf` has capacity `len`. A racing write
            // makes the copy garbage, which the sequence check below discards (the seqlock
            // pattern: the racing bytes are never interpreted before the check).
            unsafe {
                ptr::copy_nonoverlapping(self.data_ptr().add(off), buf.as_mut_ptr(), len);
                buf.set_len(len);
            }
            fence(Ordering::Acquire);
            if self.seq.load(Ordering::Relaxed) == s1 {
                return;
            }
        }
    }
}

/// An image (time-travel copy or delta): a length word, then the bytes. A delta's bytes are
/// entries `offset u32, length u32, before-image`; a time-travel image is the whole row.
pub(crate) struct Image;

impl Image {
    fn alloc(bytes: &[u8]) -> *mut u8 {
        let l = layout(8 + bytes.len(), 8);
        // SAFETY: non-zero size.
        let p = unsafe { std::alloc::alloc(l) };
        if p.is_null() {
            std::alloc::handle_alloc_error(l);
        }
        // SAFETY: fresh block of 8 + len bytes, 8-aligned.
        unsafe {
            ptr::write(p as *mut u64, bytes.len() as u64);
            ptr::copy_nonoverlapping(bytes.as_ptr(), p.add(8), bytes.len());
        }
        p
    }

    #[cfg(test)]
    pub(crate) fn alloc_for_test(bytes: &[u8]) -> *mut u8 {
        Self::alloc(bytes)
    }

    /// # Safety
    /// `p` came from `alloc` and is unreachable.
    pub(crate) unsafe fn free(p: *mut u8) {
        let len = ptr::read(p as *const u64) as usize;
        std::alloc::dealloc(p, layout(8 + len, 8));
    }

    /// Bytes an image with `len` payload bytes occupies.
    pub(crate) fn size(len: usize) -> usize {
        8 + len
    }

    /// # Safety
    /// `p` is a live image.
    unsafe fn bytes<'a>(p: *const u8) -> &'a [u8] {
        let len = ptr::read(p as *const u64) as usize;
        std::slice::from_raw_parts(p.add(8), len)
    }
}

/// Decodes a delta's entries.
fn entries(mut d: &[u8]) -> impl Iterator<Item = (usize, &[u8])> {
    std::iter::from_fn(move || {
        if d.len() < 8 {
            return None;
        }
        let off = u32::from_le_bytes([d[0], d[1], d[2], d[3]]) as usize;
        let len = u32::from_le_bytes([d[4], d[5], d[6], d[7]]) as usize;
        let bytes = d.get(8..8 + len)?;
        d = &d[8 + len..];
        Some((off, bytes))
    })
}

/// Applies a delta's before-images to `row`.
fn apply(delta: &[u8], row: &mut [u8]) {
    for (off, bytes) in entries(delta) {
        if let Some(dst) = row.get_mut(off..off + bytes.len()) {
            dst.copy_from_slice(bytes);
        }
    }
}

impl Version {
    /// Under in-place storage, the word holding the tuple's master (second to last).
    #[inline]
    fn master_word(&self) -> &AtomicU64 {
        self.ext_word(self.ext as usize - 2)
    }
    /// Under in-place storage, the word holding the version's image (last).
    #[inline]
    fn image_word(&self) -> &AtomicU64 {
        self.ext_word(self.ext as usize - 1)
    }
    pub(crate) fn master(&self) -> &Master {
        // SAFETY: set at allocation to the tuple's master, which lives as long as its table.
        unsafe { &*(self.master_word().load(Ordering::Relaxed) as usize as *const Master) }
    }
    /// `master`, or `None` for a version allocated without one (`Table::alloc_version` for
    /// a tuple id past the master directory).
    pub(crate) fn master_opt(&self) -> Option<&Master> {
        // SAFETY: as `master`; null when none was set.
        unsafe { (self.master_word().load(Ordering::Relaxed) as usize as *const Master).as_ref() }
    }
    pub(crate) fn set_master(&self, m: *const Master) {
        self.master_word()
            .store(m as usize as u64, Ordering::Relaxed);
    }
    /// The image word itself (`siro` keeps tags and segment entries there, never an
    /// `Image`: see `is_image`).
    #[inline]
    pub(crate) fn image_word_ref(&self) -> &AtomicU64 {
        self.image_word()
    }
    /// Whether the image word holds a `siro` word (a slot tag, `PRUNED`, or a tagged
    /// segment entry: never 8-aligned), never an `Image`.
    pub(crate) fn image_word_is_tag(&self) -> bool {
        self.image_word().load(Ordering::Acquire) & 7 != 0
    }
    /// The version's `Image`, or null: none, or a `siro` word (a slot tag or a tagged
    /// segment entry, never 8-aligned: `siro.rs`), which owns no image.
    fn image(&self) -> *mut u8 {
        let w = self.image_word().load(Ordering::Acquire);
        if w & 7 != 0 {
            return ptr::null_mut();
        }
        w as usize as *mut u8
    }
    /// Bytes of the version's image (0 without one, or outside in-place storage): what
    /// freeing the version reclaims besides its header.
    pub(crate) fn image_size(&self) -> usize {
        if !self.is_in_place() {
            return 0;
        }
        let p = self.image();
        if p.is_null() {
            0
        } else {
            // SAFETY: images live as long as their version, which the caller holds.
            Image::size(unsafe { Image::bytes(p) }.len())
        }
    }
    /// Frees the image, if any (the version is being freed).
    ///
    /// # Safety
    /// The version is unreachable, as for `Version::free`.
    pub(crate) unsafe fn free_image(&self) {
        let p = self.image();
        if !p.is_null() {
            Image::free(p);
        }
    }
}

/// The row data of version `v` of a tuple whose newest version is found at `head` (loaded
/// after the master copy: see below), into `buf`.
///
/// Time-travel: the version's copy if it has one, else (it is the newest) the master,
/// re-checked: a writer publishes the copy before it changes the master.
/// Delta: a copy of the master, then the deltas from the newest version down to `v`
/// applied in that order. A delta holds its version's own values, so the result for each
/// column is the value in the oldest delta at or above `v` that has it — exactly `v`'s —
/// or, if none has it, the newest version's, which the master then holds (the master copy
/// is taken before the chain is walked, so every delta that copy may lack is seen).
pub(crate) fn read_into(
    kind: InPlace,
    v: &Version,
    head: impl Fn() -> *mut Version,
    buf: &mut Vec<u8>,
) {
    let m = v.master();
    match kind {
        InPlace::TimeTravel => loop {
            let img = v.image();
            if !img.is_null() {
                buf.clear();
                // SAFETY: images live as long as their version; the caller is pinned.
                buf.extend_from_slice(unsafe { Image::bytes(img) });
                return;
            }
            m.snapshot(buf);
            if v.image().is_null() {
                return;
            }
        },
        InPlace::Delta => {
            m.snapshot(buf);
            let mut x = head();
            // SAFETY: the caller is pinned; versions reachable from the entry stay allocated.
            while let Some(r) = unsafe { x.as_ref() } {
                let img = r.image();
                if !img.is_null() {
                    // SAFETY: as above.
                    apply(unsafe { Image::bytes(img) }, buf);
                }
                if ptr::eq(r, v) {
                    return;
                }
                x = r.next.load(Ordering::Acquire);
            }
        }
    }
}

/// Before the lock owner changes the master from `old` (the master's current row, the
/// newest version's) to `new`: makes sure `prev`, the version the newest supersedes, has
/// an image that holds its values for every column that will differ. Returns the bytes
/// the images allocated (accounting). `scratch` is a buffer.
pub(crate) fn cover(
    kind: InPlace,
    prev: &Version,
    old: &[u8],
    new: &[u8],
    cols: &[(usize, usize)],
    scratch: &mut Vec<u8>,
    guard: &crossbeam_epoch::Guard,
) -> usize {
    let cur = prev.image();
    match kind {
        InPlace::TimeTravel => {
            if !cur.is_null() {
                return 0;
            }
            let p = Image::alloc(old);
            prev.image_word()
                .store(p as usize as u64, Ordering::Release);
            Image::size(old.len())
        }
        InPlace::Delta => {
            // SAFETY: images live as long as their version; we hold the lock on the chain.
            let have = if cur.is_null() {
                &[][..]
            } else {
                unsafe { Image::bytes(cur) }
            };
            let covered = |off: usize| entries(have).any(|(o, _)| o == off);
            // One pass: the image is rebuilt (what it has, then the before-image of every
            // column that changes and has none yet) from the first such column on.
            let mut missing = false;
            for &(o, w) in cols {
                if differs(&old[o..o + w], &new[o..o + w]) && !covered(o) {
                    if !missing {
                        missing = true;
                        scratch.clear();
                        scratch.extend_from_slice(have);
                    }
                    scratch.extend_from_slice(&(o as u32).to_le_bytes());
                    scratch.extend_from_slice(&(w as u32).to_le_bytes());
                    scratch.extend_from_slice(&old[o..o + w]);
                }
            }
            if !missing {
                if !cur.is_null() {
                    return 0;
                }
                // No column changes: `prev` still gets an (empty) image of its own.
                scratch.clear();
            }
            let p = Image::alloc(scratch);
            prev.image_word()
                .store(p as usize as u64, Ordering::Release);
            if !cur.is_null() {
                let q = cur as usize;
                // SAFETY: replaced; readers pinned now may still read it.
                unsafe { guard.defer_unchecked(move || Image::free(q as *mut u8)) };
            }
            // Net of the image replaced (its bytes were counted when it was made).
            Image::size(scratch.len())
                - if cur.is_null() {
                    0
                } else {
                    Image::size(have.len())
                }
        }
    }
}

/// Whether two columns' bytes differ; an 8-byte column (INT, BIGINT, DOUBLE, ...) as one
/// word instead of a `memcmp` call (which cost ~50 instructions a column under `delta`).
#[inline(always)]
fn differs(a: &[u8], b: &[u8]) -> bool {
    match (<[u8; 8]>::try_from(a), <[u8; 8]>::try_from(b)) {
        (Ok(x), Ok(y)) => u64::from_ne_bytes(x) != u64::from_ne_bytes(y),
        _ => a != b,
    }
}

/// Rollback: puts `prev`'s values back into the master (its image was published before
/// the master changed). The image stays.
pub(crate) fn restore(kind: InPlace, prev: &Version) {
    let img = prev.image();
    if img.is_null() {
        return;
    }
    // SAFETY: `prev` is locked by us; its image lives as long as it.
    let bytes = unsafe { Image::bytes(img) };
    prev.master().write(|row| match kind {
        InPlace::TimeTravel => row.copy_from_slice(bytes),
        InPlace::Delta => apply(bytes, row),
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::TupleId;

    /// The tuple id after the row data survives a write of every row byte, for row lengths
    /// on and off 8-byte boundaries, and the block is the size `Master::size` accounts.
    #[test]
    fn the_tuple_id_after_the_row_survives_a_full_row_write() {
        for len in [0, 1, 7, 8, 88, 176, 255, 512] {
            let tid = TupleId::new(0x0123_4567_89ab_cdef ^ len as u64);
            let m = Master::alloc(tid, len);
            // SAFETY: fresh, owned by this test.
            let r = unsafe { &*m };
            r.write(|d| d.fill(0xff));
            assert_eq!(r.owned().len(), len);
            assert!(r.owned().iter().all(|&b| b == 0xff), "{len}-byte row");
            assert_eq!(r.tid(), tid, "{len}-byte row");
            assert!(tid_offset(len) + 8 <= Master::size(len), "{len}-byte row");
            // SAFETY: unreachable; came from `alloc`.
            unsafe { Master::free(m) };
        }
    }

    /// `siro`'s two slots of an 88-byte row (YCSB's key and ten INTs) and the sequence word
    /// lie in three cache lines (module docs of `Master`): the header is two words and the
    /// block starts a line.
    #[test]
    fn two_slots_of_88_bytes_and_the_sequence_word_span_three_lines() {
        let m = Master::alloc(TupleId::new(1), 2 * 88);
        // SAFETY: fresh, owned by this test.
        let r = unsafe { &*m };
        let base = m as usize;
        let last = r.data_addr(2 * 88 - 1) as usize;
        assert_eq!(base % 64, 0);
        assert_eq!(last / 64 - base / 64 + 1, 3);
        // SAFETY: unreachable; came from `alloc`.
        unsafe { Master::free(m) };
    }
}
