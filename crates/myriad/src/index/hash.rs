//! Concurrent hash index: one cache line per bucket, locked by a word in the bucket.
//!
//! [`HashIndex`] maps byte-string keys to `u64` tuple ids (tids). It serves
//! both primary keys ([`HashIndex::insert_unique`]: at most one entry per key)
//! and hash secondary indexes ([`HashIndex::insert`]: a multimap that keeps
//! each distinct `(key, tid)` pair once).
//!
//! # Why it is hand-written
//!
//! For its layout (next section): a lookup of a short or packed integer key
//! touches one cache line, and [`HashIndex::prefetch`] computes that line's
//! address without pinning the epoch. The structure is written here, in
//! full, with the invariants it relies on spelled out.
//!
//! # Layout: one cache line per lookup
//!
//! Point reads are memory bound (a cache-missing load costs hundreds of
//! nanoseconds), so the layout is built to make the common lookup — a short
//! key, as produced by integer primary keys — touch exactly one cache line.
//!
//! * A *table* is a power-of-two array of buckets. Each bucket is exactly one
//!   64-byte, line-aligned cache line:
//!   `{ lock word: AtomicU64, head: AtomicPtr<Entry>, slots: [Slot; 3] }`.
//! * A *slot* is 16 bytes, `{ key_word: AtomicU64, meta: AtomicU64 }`, and
//!   holds one `(key, tid)` pair inline when the key is at most 8 bytes and
//!   the tid fits in 48 bits. `key_word` is the key's bytes zero-padded to 8
//!   and read as a little-endian `u64` (native on x86-64); `meta` is
//!   `valid (bit 63) | key length (bits 48..52, 0..=8) | tid (bits 0..48)`,
//!   zero while the slot is empty. The length is part of the comparison, so
//!   `"a"` and `"a\0"` (same `key_word`) are different keys. Slots fill in
//!   index order and are never changed or removed once valid.
//! * Composite keys of small integers are packed into a slot too: a 16-byte
//!   key of two order-preserving integer encodings (`schema.rs`: sign bit
//!   flipped, big-endian) whose values are below 2^32, or a 24-byte key of
//!   three below 2^21, is stored as the values side by side in `key_word`,
//!   with length codes 9 and 10 (`pack_key`; exactly invertible, so a resize
//!   recomputes the hash from the slot alone). TPC-C's STOCK, DISTRICT and
//!   CUSTOMER keys are such keys: without packing each of their lookups paid
//!   a second cache miss for the overflow entry (half of `get_hashed`'s
//!   time in a TPC-C profile).
//! * Everything else — longer keys, tids of 48 bits or more, pairs arriving
//!   when the three slots are full (and, to keep the order below, pairs whose
//!   key already has an overflow entry in the bucket) — goes to the bucket's
//!   *overflow chain*: a singly-linked list of 64-byte entries, newest first,
//!   each with the full 64-bit hash, the tid, the key length and the key
//!   bytes — inline up to [`INLINE_KEY`] (24) bytes, otherwise in a separate
//!   heap copy. Chain lookups compare the hash first, then the bytes.
//! * Bit 0 of `head` (entries are 64-byte aligned, so it is free) is the
//!   *shadow* bit: set, and kept set, once the chain holds an entry whose key
//!   also has a slot in the bucket. Only multimaps ever set it.
//! * Entry memory belongs to a table: each table has [`STRIPES`] bump
//!   allocators ("arenas", chosen by hash bits, each behind a tiny spin lock)
//!   over slabs of 8..4096 entries, so an insert costs no `malloc` (except
//!   the copy of a long key) and a table's entries are freed wholesale.
//! * The current table is published through a `crossbeam_epoch::Atomic`; every
//!   public call except [`HashIndex::prefetch`] pins the epoch exactly once.
//!   Lookups neither allocate nor write shared memory.
//!
//! # Order: newest first
//!
//! Within a bucket, slots are ordered by index (a higher index is newer) and
//! the chain by position (the head is newest). Per key, every slot pair is
//! older than every chain pair: a writer puts a pair in a slot only if the key
//! has no chain entry, and slots never open up again. Hence the newest-first
//! order of a key's tids is: its chain entries from the head, then its slots
//! from the highest index down. [`HashIndex::get`] returns the first tid of
//! that order and [`HashIndex::for_each`] yields them in it.
//!
//! # Reading a bucket
//!
//! A reader loads `head` (Acquire) first, then the slots' `meta` words
//! (Acquire, highest index first), comparing length and `key_word` of valid
//! slots. A writer holding the bucket lock fills a slot by storing `key_word`
//! and then `meta` with Release, so a reader that sees a valid `meta` sees its
//! key. Because slots and chain entries are immutable, readers need no retry
//! loop. The reading order gives each lookup a consistent view per key:
//!
//! * If the chain (as of the loaded `head`) holds an entry of the key, every
//!   slot of that key was written before that entry was published, so the
//!   Acquire load of `head` makes all of them visible to the slot loads.
//! * Slots are scanned from the highest index down; a visible slot implies
//!   that all lower slots are visible (they were written earlier, under the
//!   same lock), so the slots seen form a prefix of the bucket's slot history.
//! * If a key matched in a slot and the loaded `head` is not shadowed, the
//!   chain (as of that `head`) holds no entry of the key — an entry pushed
//!   after one of the key's slots would carry the shadow bit, which is
//!   sticky — so the lookup skips the chain: one cache line.
//!
//! So a lookup sees every pair inserted before it started, and what it sees
//! of a key is a prefix of that key's insert history: it never reports a
//! pair while missing an older pair of the same key. In a quiescent index,
//! `get` returns exactly the newest tid and `for_each` yields all tids,
//! newest first.
//!
//! # Lock word
//!
//! Bit 0 is the writer lock, bit 1 marks the bucket *retired* (its table is
//! being, or has been, replaced by a resize). A writer locks the bucket with a
//! CAS (spinning with `crossbeam_utils::Backoff`, never parking), scans the
//! slots and the chain for the key, fills a slot or pushes a new entry at the
//! chain head (or finds nothing to insert), and unlocks by storing the old,
//! unlocked word back with Release. Readers never look at the word.
//!
//! # Sizing and growth
//!
//! `new(hint)` makes the next power of two `>= hint / 2` buckets (at least
//! 16): one to two keys per bucket at the hinted size. The table doubles when
//! the entry count exceeds `MAX_LOAD` (2) times the bucket count, so the
//! load factor stays in (1, 2] once grown and a hinted index never resizes
//! before it holds `hint` entries. With hashed keys the number of pairs in a
//! bucket is close to Poisson: at load 2 about 11 % of the pairs overflow the
//! three slots (2 % at load 1, 4 % at load 1.2), so chains stay short and
//! most lookups read one line. Memory: a bucket is 64 bytes, so 32..64 bytes per
//! key for the bucket array plus 64 bytes per overflow entry.
//!
//! Growth is done by one writer (elected by the `resizing` flag), which builds
//! a table with twice the buckets. It walks the old buckets one at a time:
//! lock the bucket, reinsert its pairs into the two new buckets it splits into
//! — slots in index order, then the chain from its oldest entry to its
//! newest, with the same placement rule as an insert (so chain pairs move
//! into free slots of the new table when the order allows) — then leave the
//! old bucket locked *and* retired for good. Reinserting in that order keeps
//! every key's newest-first order. Slot keys are rehashed from their bytes
//! (the slot keeps no hash). Writers to not-yet-migrated buckets keep
//! inserting into the old table (their entries are migrated later); a writer
//! that meets a retired bucket reloads the table pointer and retries, so after
//! the new table is published every writer lands in it. Old buckets are never
//! modified after retirement, so readers still walking the old table stay
//! correct. The old table is freed through `crossbeam_epoch` once no pinned
//! thread can see it.
//!
//! # Prefetch
//!
//! [`HashIndex::prefetch`] issues a software prefetch of the bucket line a
//! lookup of the key will read, so callers can overlap the misses of several
//! lookups. It does not pin the epoch (a pin costs a fence, comparable to
//! what a prefetch saves on a warm line): the index keeps a copy of the current
//! bucket array's address with `log2(bucket count)` in its low 6 bits (the
//! array is 64-byte aligned), in one atomic word, so address and size are
//! always from the same table. The address may be that of an array already
//! retired and freed; that is harmless: the address is computed with wrapping
//! pointer arithmetic and only handed to the prefetch instruction, which is a
//! hint — it never faults, is not a memory access of the Rust abstract
//! machine and has no architectural effect — so the worst case is one useless
//! line fetched into the cache.
//!
//! # Invariants this module owns
//!
//! 1. A slot is written once, under its bucket's lock (or while its table is
//!    private), `key_word` before `meta`; it is never changed afterwards. An
//!    entry is immutable once published (its `next` is written only while it
//!    is private: before the head store that publishes it, or before the
//!    table it was copied into is published).
//! 2. Slots fill in index order and a chain only grows at its head, both only
//!    under the bucket lock; the shadow bit, once set, stays set; a retired
//!    bucket is never unlocked again.
//! 3. Per key and bucket, slot pairs are older than chain pairs, and a chain
//!    entry whose key has a slot in the bucket is published with the shadow
//!    bit set.
//! 4. Every pair of a retired table has a copy in its successor table: a
//!    bucket is migrated under its lock and is retired in the same critical
//!    section, so no insert can slip into it afterwards. Hence at any moment
//!    the current table holds (or will hold, once the running resize
//!    publishes it) every pair ever inserted, and uniqueness checked under one
//!    bucket lock is uniqueness across the whole index.
//! 5. Heap key copies are *moved* on resize (a long key always stays in the
//!    chain): the entries of the newest table own them; a retired table frees
//!    only its own entry memory. Pairs and keys are never removed before the
//!    index is dropped.
//!
//! # Entry count
//!
//! `len` is kept in [`STRIPES`] cache-padded counters selected by the top bits
//! of the key hash: one shared counter would be a contended cache line on
//! every insert. Counts are updated right after the insert is published, so
//! `len` may lag concurrent inserts but is exact once writers are quiescent.
//!
//! # Limitations
//!
//! * No removal: pairs (and their memory) live until the index is dropped.
//! * Only keys of at most 8 bytes with tids below 2^48 are stored inline;
//!   other lookups read the bucket and then chain entries (a miss each).
//!   A bucket holding a long key also pays a chain walk for lookups of
//!   absent keys.
//! * The multimap keeps one flat pair per `(key, tid)`: a key with many tids
//!   makes a long chain, so inserting under it (which must check the exact
//!   pair) costs time linear in its tid count, and once such a chain shadows
//!   the slots, lookups of the bucket's slot keys walk it too.
//! * Resizing blocks writers that hit already-migrated buckets until the new
//!   table is published (they spin/yield; readers are never blocked).
//! * The hash is unseeded (deterministic), so it offers no resistance to
//!   hash flooding by adversarial keys.
//! * Fixed overhead per index of about 8 KiB (32 padded counters and 32
//!   padded arenas) plus at most one 512-byte slab per stripe while small;
//!   at least 16 buckets (1 KiB). `new` clamps hints to 2^24 buckets (1 GiB);
//!   the index still grows on demand.
//! * Validation is per bucket, so unrelated keys sharing a bucket cause
//!   false conflicts (one to two keys per bucket).
//! * `for_each` keeps the epoch pinned while it runs the callback, delaying
//!   reclamation of retired tables for that long.

use std::cell::UnsafeCell;
use std::fmt;
use std::mem;
use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicUsize, Ordering};

use crossbeam_epoch::{self as epoch, Atomic, Guard, Owned, Shared};
use crossbeam_utils::{Backoff, CachePadded};

/// Keys up to this many bytes are stored inside an overflow entry.
pub const INLINE_KEY: usize = 24;

/// Number of stripes (power of two) for the entry counters and the per-table
/// entry arenas; a key's stripe is the top bits of its hash.
pub const STRIPES: usize = 32;

/// Inline slots per bucket.
const SLOTS: usize = 3;

/// Longest key a slot holds byte for byte.
const SLOT_KEY: usize = 8;

/// Slot length codes of packed keys (`pack_key`): two integers below 2^32,
/// three below 2^21.
const PACKED2: u64 = 9;
const PACKED3: u64 = 10;
const BITS21: u64 = (1 << 21) - 1;

/// The integer value of an 8-byte order-preserving key component.
#[inline]
fn int_part(key: &[u8], i: usize) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&key[8 * i..8 * i + 8]);
    u64::from_be_bytes(b) ^ (1 << 63)
}

/// A 16- or 24-byte key of small non-negative integer components as
/// (length code, word); `None` for any other key.
#[inline]
fn pack_key(key: &[u8]) -> Option<(u64, u64)> {
    match key.len() {
        16 => {
            let (a, b) = (int_part(key, 0), int_part(key, 1));
            (a >> 32 == 0 && b >> 32 == 0).then_some((PACKED2, (a << 32) | b))
        }
        24 => {
            let (a, b, c) = (int_part(key, 0), int_part(key, 1), int_part(key, 2));
            (a | b | c <= BITS21).then_some((PACKED3, (a << 42) | (b << 21) | c))
        }
        _ => None,
    }
}

/// The key bytes of a slot (its length code and word): the inverse of
/// `SlotKey::of`. Returns the buffer and the key's length.
fn slot_key_bytes(code: u64, word: u64) -> ([u8; 24], usize) {
    let mut out = [0u8; 24];
    let mut put = |i: usize, v: u64| {
        out[8 * i..8 * i + 8].copy_from_slice(&(v ^ (1 << 63)).to_be_bytes());
    };
    let len = match code {
        PACKED2 => {
            put(0, word >> 32);
            put(1, word & 0xFFFF_FFFF);
            16
        }
        PACKED3 => {
            put(0, word >> 42);
            put(1, (word >> 21) & BITS21);
            put(2, word & BITS21);
            24
        }
        len => {
            out[..8].copy_from_slice(&word.to_le_bytes());
            (len as usize).min(SLOT_KEY)
        }
    };
    (out, len)
}

/// Largest tid a slot holds (48 bits).
const SLOT_TID_MAX: u64 = (1 << 48) - 1;

/// Slot `meta`: valid bit, key length field, tid field.
const META_VALID: u64 = 1 << 63;
const META_LEN_SHIFT: u32 = 48;
const META_LEN: u64 = 0xF << META_LEN_SHIFT;
const META_TID: u64 = SLOT_TID_MAX;

/// Tag bit of a bucket's `head`: the chain shadows a slot key (invariant 3).
const SHADOW: usize = 1;

/// The table doubles when it holds more than this many pairs per bucket.
const MAX_LOAD: usize = 2;

/// Smallest bucket count.
const MIN_BUCKETS: usize = 16;

/// Largest bucket count `new` derives from a hint (1 GiB of buckets); the
/// table still grows past it on demand.
const MAX_INITIAL_BUCKETS: usize = 1 << 24;

/// Lock-word bit: a writer (or the resizer) holds the bucket.
const LOCK: u64 = 1;
/// Lock-word bit: the bucket's table has been (or is being) replaced.
const RETIRED: u64 = 2;

/// Slab capacity bounds (entries); each stripe's slabs double in size from
/// its first one up to `MAX_SLAB` (256 KiB).
const MIN_SLAB: usize = 8;
const MAX_SLAB: usize = 1 << 12;

/// Low bits of the prefetch word that hold `log2(bucket count)`.
const LINE_SHIFT_BITS: usize = 63;

// ---------------------------------------------------------------------------
// Hash
// ---------------------------------------------------------------------------

const WY0: u64 = 0xa076_1d64_78bd_642f;
const WY1: u64 = 0xe703_7ed1_a0b4_28db;
const WY2: u64 = 0x8ebc_6af0_9c88_c6e3;
const WY3: u64 = 0x5899_65cc_7537_4cc3;
const SEED: u64 = 0x9e37_79b9_7f4a_7c15;

#[inline]
const fn mum(a: u64, b: u64) -> (u64, u64) {
    let r = (a as u128) * (b as u128);
    (r as u64, (r >> 64) as u64)
}

#[inline]
const fn mix(a: u64, b: u64) -> u64 {
    let (lo, hi) = mum(a, b);
    lo ^ hi
}

/// The seed after wyhash's initial scramble, folded at compile time.
const SEED0: u64 = SEED ^ mix(SEED ^ WY0, WY1);

#[inline]
fn r8(b: &[u8], i: usize) -> u64 {
    let mut x = [0u8; 8];
    x.copy_from_slice(&b[i..i + 8]);
    u64::from_le_bytes(x)
}

#[inline]
fn r4(b: &[u8], i: usize) -> u64 {
    let mut x = [0u8; 4];
    x.copy_from_slice(&b[i..i + 4]);
    u64::from(u32::from_le_bytes(x))
}

// ---------------------------------------------------------------------------
// Entries
// ---------------------------------------------------------------------------

/// Key storage: which field is live is decided by the key length.
#[derive(Clone, Copy)]
union KeyBytes {
    inline: [u8; INLINE_KEY],
    /// Start of a leaked `Box<[u8]>` of the entry's length, owned as
    /// described in invariant 5.
    heap: *mut u8,
}

impl KeyBytes {
    /// A fresh copy of `key`: inline, or a new heap allocation the caller
    /// must publish or release with [`KeyBytes::free`].
    fn copy_of(key: &[u8]) -> KeyBytes {
        if key.len() <= INLINE_KEY {
            let mut inline = [0u8; INLINE_KEY];
            inline[..key.len()].copy_from_slice(key);
            KeyBytes { inline }
        } else {
            let boxed: Box<[u8]> = Box::from(key);
            KeyBytes {
                heap: Box::into_raw(boxed).cast::<u8>(),
            }
        }
    }

    /// Frees the heap copy, if the key has one.
    ///
    /// # Safety
    /// `self` was made by `copy_of` for a key of `len` bytes, the caller owns
    /// the copy, and nothing reads it afterwards.
    unsafe fn free(self, len: usize) {
        if len > INLINE_KEY {
            // SAFETY: `heap` came from `Box::<[u8]>::into_raw` with `len`
            // bytes; the caller guarantees exclusive ownership.
            unsafe {
                drop(Box::from_raw(ptr::slice_from_raw_parts_mut(self.heap, len)));
            }
        }
    }
}

/// One overflow `(key, tid)` pair, 64 bytes and cache-line aligned. Immutable once
/// published (invariant 1). Entries live in the slabs of their table.
#[repr(C, align(64))]
struct Entry {
    hash: u64,
    tid: u64,
    next: *mut Entry,
    len: usize,
    key: KeyBytes,
}

impl Entry {
    #[inline]
    fn key(&self) -> &[u8] {
        if self.len <= INLINE_KEY {
            // SAFETY: keys of at most INLINE_KEY bytes use the inline field.
            unsafe { &self.key.inline[..self.len] }
        } else {
            // SAFETY: longer keys use `heap`, a live allocation of `len`
            // bytes: it is freed only when the index is dropped (invariant 5),
            // and `&self` is reachable only from a live index or table.
            unsafe { std::slice::from_raw_parts(self.key.heap, self.len) }
        }
    }

    #[inline]
    fn matches(&self, hash: u64, key: &[u8]) -> bool {
        self.hash == hash && self.key() == key
    }
}

/// A block of entry slots allocated in one go.
struct Slab {
    ptr: *mut Entry,
    cap: usize,
    len: usize,
}

impl Slab {
    fn new(cap: usize) -> Slab {
        let layout = std::alloc::Layout::array::<Entry>(cap)
            .expect("hash index: slab capacity is bounded by MAX_SLAB");
        // SAFETY: the layout has non-zero size (cap >= MIN_SLAB > 0).
        let ptr = unsafe { std::alloc::alloc(layout) }.cast::<Entry>();
        if ptr.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        Slab { ptr, cap, len: 0 }
    }

    /// The initialized entries.
    fn entries(&self) -> &[Entry] {
        // SAFETY: slots `0..len` were written by `SlabList::alloc`.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

impl Drop for Slab {
    fn drop(&mut self) {
        let layout = std::alloc::Layout::array::<Entry>(self.cap)
            .expect("hash index: slab layout was valid at allocation");
        // SAFETY: allocated in `Slab::new` with this layout; `Entry` has no
        // destructor (its heap key is handled by `Table::drop`).
        unsafe { std::alloc::dealloc(self.ptr.cast::<u8>(), layout) }
    }
}

/// Bump allocator over a growing list of slabs.
struct SlabList {
    slabs: Vec<Slab>,
    next_cap: usize,
}

impl SlabList {
    fn new(first_cap: usize) -> SlabList {
        SlabList {
            slabs: Vec::new(),
            next_cap: first_cap.clamp(MIN_SLAB, MAX_SLAB),
        }
    }

    /// Moves `e` into a fresh slot and returns its (stable) address.
    fn alloc(&mut self, e: Entry) -> *mut Entry {
        let full = match self.slabs.last() {
            Some(s) => s.len == s.cap,
            None => true,
        };
        if full {
            self.slabs.push(Slab::new(self.next_cap));
            self.next_cap = (self.next_cap * 2).min(MAX_SLAB);
        }
        let slab = self
            .slabs
            .last_mut()
            .expect("hash index: a slab with room was just ensured");
        // SAFETY: `len < cap`, so the slot is inside the allocation; slabs
        // never move their memory, so the address stays valid until the
        // slab is dropped with its table.
        let slot = unsafe { slab.ptr.add(slab.len) };
        // SAFETY: `slot` is valid, aligned and unused.
        unsafe { slot.write(e) };
        slab.len += 1;
        slot
    }
}

/// A table's allocator for one stripe: a spin lock around a `SlabList`.
struct Arena {
    locked: AtomicBool,
    list: UnsafeCell<SlabList>,
}

// SAFETY: `list` is only accessed by the holder of `locked` (or through
// `&mut Arena`); the slabs are plain memory that moves with the table.
unsafe impl Send for Arena {}
// SAFETY: as above.
unsafe impl Sync for Arena {}

impl Arena {
    fn new(first_cap: usize) -> Arena {
        Arena {
            locked: AtomicBool::new(false),
            list: UnsafeCell::new(SlabList::new(first_cap)),
        }
    }

    /// Allocates under the arena's spin lock (held for a bump, rarely a
    /// slab allocation; never parks).
    fn alloc(&self, e: Entry) -> *mut Entry {
        let backoff = Backoff::new();
        while self
            .locked
            .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            backoff.snooze();
        }
        // SAFETY: we hold the lock, so we have exclusive access to `list`.
        let p = unsafe { (*self.list.get()).alloc(e) };
        self.locked.store(false, Ordering::Release);
        p
    }
}

// ---------------------------------------------------------------------------
// Buckets and slots
// ---------------------------------------------------------------------------

/// One inline `(key, tid)` pair. Written once, under the bucket lock (or
/// while its table is private): `key_word` first, then `meta` with Release;
/// never changed afterwards (invariant 1).
#[repr(C)]
struct Slot {
    key_word: AtomicU64,
    meta: AtomicU64,
}

/// The slot form of a key of at most [`SLOT_KEY`] bytes, or of a packed key (`pack_key`).
#[derive(Clone, Copy)]
struct SlotKey {
    /// `META_VALID | len << META_LEN_SHIFT`: `meta` without the tid.
    tag: u64,
    /// The key bytes, zero-padded, as a little-endian word.
    word: u64,
}

impl SlotKey {
    /// `None` for keys longer than [`SLOT_KEY`] that do not pack.
    #[inline]
    fn of(key: &[u8]) -> Option<SlotKey> {
        if key.len() > SLOT_KEY {
            return pack_key(key).map(|(code, word)| SlotKey {
                tag: META_VALID | (code << META_LEN_SHIFT),
                word,
            });
        }
        let mut bytes = [0u8; SLOT_KEY];
        bytes[..key.len()].copy_from_slice(key);
        Some(SlotKey {
            tag: META_VALID | ((key.len() as u64) << META_LEN_SHIFT),
            word: u64::from_le_bytes(bytes),
        })
    }

    #[inline]
    fn meta(self, tid: u64) -> u64 {
        debug_assert!(tid <= SLOT_TID_MAX);
        self.tag | tid
    }

    /// Whether a slot with this `meta` and `word` holds this key. An empty
    /// slot (`meta == 0`) never matches: `tag` has the valid bit.
    #[inline]
    fn matches(self, meta: u64, word: u64) -> bool {
        meta & !META_TID == self.tag && word == self.word
    }
}

impl Slot {
    /// The slot's tid if it holds `k`. The Acquire load pairs with the
    /// Release store of `meta`, so `key_word` is read after it is written.
    #[inline]
    fn load_match(&self, k: SlotKey) -> Option<u64> {
        let meta = self.meta.load(Ordering::Acquire);
        if k.matches(meta, self.key_word.load(Ordering::Relaxed)) {
            Some(meta & META_TID)
        } else {
            None
        }
    }
}

/// One cache line: the lock word, the overflow chain head (tagged with
/// [`SHADOW`]) and three inline slots. All-zero bytes are an empty bucket.
#[repr(C, align(64))]
struct Bucket {
    lock: AtomicU64,
    head: AtomicPtr<Entry>,
    slots: [Slot; SLOTS],
}

const _: () = assert!(mem::size_of::<Bucket>() == 64 && mem::align_of::<Bucket>() == 64);
const _: () = assert!(mem::align_of::<Entry>() > SHADOW);

/// The entry pointer of a (tagged) `head`.
#[inline]
fn untag(head: *mut Entry) -> *mut Entry {
    head.map_addr(|a| a & !SHADOW)
}

#[inline]
fn shadowed(head: *mut Entry) -> bool {
    head.addr() & SHADOW != 0
}

/// Whether the chain starting at (tagged) `head` has an entry of `key`.
///
/// # Safety
/// The chain must be live: read from a bucket of a table that the caller
/// keeps alive (pinned epoch, or the table is owned and private).
#[inline]
unsafe fn chain_has(head: *mut Entry, hash: u64, key: &[u8]) -> bool {
    let mut p = untag(head);
    while !p.is_null() {
        // SAFETY: guaranteed by the caller; entries are immutable.
        let e = unsafe { &*p };
        if e.matches(hash, key) {
            return true;
        }
        p = e.next;
    }
    false
}

// ---------------------------------------------------------------------------
// Tables
// ---------------------------------------------------------------------------

struct Table {
    mask: usize,
    buckets: Box<[Bucket]>,
    /// Entry memory, one allocator per stripe (selected by hash, like the
    /// counters) so concurrent writers rarely share one.
    arenas: Box<[CachePadded<Arena>]>,
    /// Set when the table is retired: its entries' heap keys now belong to
    /// the successor (invariant 5).
    keys_moved: AtomicBool,
}

#[inline]
fn stripe_of(hash: u64) -> usize {
    (hash >> (64 - STRIPES.trailing_zeros())) as usize
}

/// `n` empty buckets, from zeroed memory (untouched pages stay unmapped
/// until first used).
fn zeroed_buckets(n: usize) -> Box<[Bucket]> {
    let layout = std::alloc::Layout::array::<Bucket>(n)
        .expect("hash index: bucket count is bounded by new and maybe_grow");
    assert!(
        layout.size() > 0,
        "hash index: at least MIN_BUCKETS buckets"
    );
    // SAFETY: the layout has non-zero size.
    let p = unsafe { std::alloc::alloc_zeroed(layout) }.cast::<Bucket>();
    if p.is_null() {
        std::alloc::handle_alloc_error(layout);
    }
    // SAFETY: `p` was allocated by the global allocator with the layout of
    // `[Bucket; n]`, and all-zero bytes are a valid `Bucket` (zero atomics,
    // a null `AtomicPtr`, empty slots), so the box owns `n` initialized
    // buckets.
    unsafe { Box::from_raw(ptr::slice_from_raw_parts_mut(p, n)) }
}

impl Table {
    /// A table of `buckets` buckets expecting about `entries` pairs.
    fn new(buckets: usize, entries: usize) -> Table {
        debug_assert!(buckets.is_power_of_two());
        let buckets = zeroed_buckets(buckets);
        // Most pairs live in slots; only a small fraction needs entries.
        let per_stripe = entries / STRIPES / 8;
        Table {
            mask: buckets.len() - 1,
            buckets,
            arenas: (0..STRIPES)
                .map(|_| CachePadded::new(Arena::new(per_stripe)))
                .collect(),
            keys_moved: AtomicBool::new(false),
        }
    }

    #[inline]
    fn bucket(&self, hash: u64) -> &Bucket {
        // `mask` is `buckets.len() - 1`, so the index is in bounds.
        &self.buckets[(hash as usize) & self.mask]
    }

    /// The prefetch word of this table: the bucket array's address with
    /// `log2(bucket count)` in the low bits (the array is 64-byte aligned).
    fn lines(&self) -> *mut Bucket {
        let shift = self.buckets.len().trailing_zeros() as usize;
        debug_assert!(shift <= LINE_SHIFT_BITS);
        self.buckets.as_ptr().cast_mut().map_addr(|a| a | shift)
    }
}

impl Drop for Table {
    fn drop(&mut self) {
        if *self.keys_moved.get_mut() {
            return; // Entry memory goes with the slabs; keys are not ours.
        }
        for arena in self.arenas.iter_mut() {
            for slab in &arena.list.get_mut().slabs {
                for e in slab.entries() {
                    // SAFETY: this table owns its entries' heap keys (it was
                    // never retired) and `&mut self` means nothing else can
                    // reach them; each key is freed exactly once because
                    // each entry is in exactly one slab slot.
                    unsafe { e.key.free(e.len) };
                }
            }
        }
        // The slabs are freed when the `arenas` field is dropped.
    }
}

/// Adds a pair to a bucket of a table that is not yet published (resize),
/// with the placement rule of an insert: a slot if the key and tid fit, a
/// slot is free and the key has no chain entry yet; else the chain head
/// (shadowing if the key has a slot). `bytes` is the entry's key storage if
/// the pair goes to the chain (a heap key's ownership moves into it).
fn place_private(
    bucket: &mut Bucket,
    arena: &mut Arena,
    hash: u64,
    tid: u64,
    key: &[u8],
    bytes: KeyBytes,
) {
    let head = *bucket.head.get_mut();
    let mut in_slots = false;
    if let Some(k) = SlotKey::of(key) {
        for slot in bucket.slots.iter_mut() {
            let meta = *slot.meta.get_mut();
            if meta == 0 {
                // SAFETY: the chain consists of entries of this private
                // table, alive as long as it is.
                if tid <= SLOT_TID_MAX && !unsafe { chain_has(head, hash, key) } {
                    *slot.key_word.get_mut() = k.word;
                    *slot.meta.get_mut() = k.meta(tid);
                    return;
                }
                break;
            }
            in_slots |= k.matches(meta, *slot.key_word.get_mut());
        }
    }
    let entry = arena.list.get_mut().alloc(Entry {
        hash,
        tid,
        next: untag(head),
        len: key.len(),
        key: bytes,
    });
    let tag = (head.addr() & SHADOW) | if in_slots { SHADOW } else { 0 };
    *bucket.head.get_mut() = entry.map_addr(|a| a | tag);
}

// ---------------------------------------------------------------------------
// Public API
// ---------------------------------------------------------------------------

/// A concurrent hash index from byte-string keys to `u64` tids; see the
/// module documentation.
pub struct HashIndex {
    table: Atomic<Table>,
    /// The current table's [`Table::lines`], for [`HashIndex::prefetch`]
    /// only: never dereferenced.
    lines: AtomicPtr<Bucket>,
    counts: Box<[CachePadded<AtomicUsize>]>,
    resizing: AtomicBool,
}

enum Mode {
    Unique,
    Multi,
}

impl HashIndex {
    /// Creates an index for about `capacity_hint` entries: the bucket count is
    /// the next power of two `>= capacity_hint / 2` (at least 16; hints above
    /// 2^25 are clamped, the index still grows on demand).
    pub fn new(capacity_hint: usize) -> Self {
        let buckets = (capacity_hint / 2)
            .clamp(MIN_BUCKETS, MAX_INITIAL_BUCKETS)
            .next_power_of_two();
        let table = Table::new(buckets, capacity_hint);
        let lines = table.lines();
        HashIndex {
            table: Atomic::new(table),
            lines: AtomicPtr::new(lines),
            counts: (0..STRIPES)
                .map(|_| CachePadded::new(AtomicUsize::new(0)))
                .collect(),
            resizing: AtomicBool::new(false),
        }
    }

    /// Fast 64-bit hash of a key (a hand-written wyhash variant, unseeded).
    #[inline]
    pub fn hash_key(key: &[u8]) -> u64 {
        let len = key.len();
        let mut seed = SEED0;
        let (a, b);
        if len <= 16 {
            if len >= 4 {
                let q = (len >> 3) << 2;
                a = (r4(key, 0) << 32) | r4(key, q);
                b = (r4(key, len - 4) << 32) | r4(key, len - 4 - q);
            } else if len > 0 {
                a = (u64::from(key[0]) << 16)
                    | (u64::from(key[len >> 1]) << 8)
                    | u64::from(key[len - 1]);
                b = 0;
            } else {
                a = 0;
                b = 0;
            }
        } else {
            let mut p = 0;
            let mut i = len;
            if i > 48 {
                let mut s1 = seed;
                let mut s2 = seed;
                while i > 48 {
                    seed = mix(r8(key, p) ^ WY1, r8(key, p + 8) ^ seed);
                    s1 = mix(r8(key, p + 16) ^ WY2, r8(key, p + 24) ^ s1);
                    s2 = mix(r8(key, p + 32) ^ WY3, r8(key, p + 40) ^ s2);
                    p += 48;
                    i -= 48;
                }
                seed ^= s1 ^ s2;
            }
            while i > 16 {
                seed = mix(r8(key, p) ^ WY1, r8(key, p + 8) ^ seed);
                p += 16;
                i -= 16;
            }
            a = r8(key, len - 16);
            b = r8(key, len - 8);
        }
        let (a, b) = mum(a ^ WY1, b ^ seed);
        mix(a ^ WY0 ^ (len as u64), b ^ WY1)
    }

    /// Unique insert: `Err(existing tid)` if any entry with this key exists
    /// (nothing is changed then; the tid is the key's newest).
    pub fn insert_unique(&self, key: &[u8], tid: u64) -> Result<(), u64> {
        self.insert_impl(key, tid, Mode::Unique)
    }

    /// Multimap insert: adds `(key, tid)` unless that exact pair exists;
    /// returns whether it was added.
    pub fn insert(&self, key: &[u8], tid: u64) -> bool {
        self.insert_impl(key, tid, Mode::Multi).is_ok()
    }

    /// Prefetches the cache line a lookup of `key` starts with (its bucket in
    /// the current table) into all cache levels. Issue it some work ahead of
    /// the [`get`](Self::get) / [`for_each`](Self::for_each) of the same key. It does not
    /// pin the epoch and never reads index memory; see the module
    /// documentation for why a possibly stale address is harmless. A no-op on
    /// targets other than x86-64.
    #[inline]
    pub fn prefetch(&self, key: &[u8]) {
        self.prefetch_hashed(Self::hash_key(key));
    }

    /// `prefetch` for a key whose `hash_key` the caller already has.
    #[inline]
    pub fn prefetch_hashed(&self, hash: u64) {
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
            let lines = self.lines.load(Ordering::Relaxed);
            let shift = lines.addr() & LINE_SHIFT_BITS;
            let base = lines.map_addr(|a| a & !LINE_SHIFT_BITS);
            let mask = (1usize << shift) - 1;
            // Wrapping arithmetic: defined even if the array has been freed.
            let line = base.wrapping_add((hash as usize) & mask);
            // SAFETY: `_mm_prefetch` (PREFETCHT0, SSE, baseline on x86-64)
            // is a hint: it never faults and performs no access the program
            // can observe, whatever the address.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(line.cast::<i8>().cast_const()) };
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = hash;
        }
    }

    /// The first tid found under `key`: for a unique index the only one, for
    /// a multimap the most recently inserted one. A short key found in a
    /// slot costs one cache line (the bucket).
    #[inline]
    pub fn get(&self, key: &[u8]) -> Option<u64> {
        self.get_hashed(Self::hash_key(key), key)
    }

    /// `get` for a key whose `hash_key` the caller already has.
    #[inline]
    pub fn get_hashed(&self, hash: u64, key: &[u8]) -> Option<u64> {
        self.get_hashed_in(hash, key, &epoch::pin())
    }

    /// `get_hashed` under a pin the caller holds (a transaction's, taken once at its
    /// begin): a lookup's own pin and unpin were 0.6 % of TPC-C's instructions.
    #[inline]
    pub fn get_hashed_in(&self, hash: u64, key: &[u8], guard: &Guard) -> Option<u64> {
        debug_assert_eq!(hash, Self::hash_key(key));
        let table = Self::current(&self.table, guard);
        let bucket = table.bucket(hash);
        // `head` before the slots: see "Reading a bucket".
        let head = bucket.head.load(Ordering::Acquire);
        let in_slot = match SlotKey::of(key) {
            Some(k) => bucket.slots.iter().rev().find_map(|s| s.load_match(k)),
            None => None,
        };
        if in_slot.is_some() && !shadowed(head) {
            return in_slot;
        }
        let mut p = untag(head);
        while !p.is_null() {
            // SAFETY: chain entries are live while `guard` pins the epoch
            // (their table is freed only after it is unreachable and every
            // pinned thread has moved on) and immutable once published.
            let e = unsafe { &*p };
            if e.matches(hash, key) {
                // Chain entries of a key are newer than its slots.
                return Some(e.tid);
            }
            p = e.next;
        }
        in_slot
    }

    /// Calls `f` with every tid stored under `key` (newest first: chain
    /// entries, then slots from the highest index) until it returns `false`.
    pub fn for_each(&self, key: &[u8], f: &mut dyn FnMut(u64) -> bool) {
        let hash = Self::hash_key(key);
        let guard = epoch::pin();
        let table = Self::current(&self.table, &guard);
        let bucket = table.bucket(hash);
        let head = bucket.head.load(Ordering::Acquire);
        let mut in_slots = [0u64; SLOTS];
        let mut n = 0;
        if let Some(k) = SlotKey::of(key) {
            for slot in bucket.slots.iter().rev() {
                if let Some(t) = slot.load_match(k) {
                    in_slots[n] = t;
                    n += 1;
                }
            }
        }
        if n == 0 || shadowed(head) {
            let mut p = untag(head);
            while !p.is_null() {
                // SAFETY: as in `get`.
                let e = unsafe { &*p };
                if e.matches(hash, key) && !f(e.tid) {
                    return;
                }
                p = e.next;
            }
        }
        for &t in &in_slots[..n] {
            if !f(t) {
                return;
            }
        }
    }

    /// Number of entries (exact once writers are quiescent).
    pub fn len(&self) -> usize {
        self.counts
            .iter()
            .map(|c| c.load(Ordering::Relaxed))
            .fold(0usize, usize::wrapping_add)
    }

    /// True iff [`len`](Self::len) is zero.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Current number of buckets (diagnostics and tests).
    pub fn bucket_count(&self) -> usize {
        let guard = epoch::pin();
        Self::current(&self.table, &guard).buckets.len()
    }

    // -- internals ----------------------------------------------------------

    #[inline]
    fn current<'g>(table: &Atomic<Table>, guard: &'g Guard) -> &'g Table {
        let shared = table.load(Ordering::Acquire, guard);
        // SAFETY: the pointer is never null (set in `new`, replaced only by
        // a non-null table) and the table stays alive while `guard` is pinned.
        unsafe { shared.as_ref() }.expect("hash index: table pointer is never null")
    }

    fn insert_impl(&self, key: &[u8], tid: u64, mode: Mode) -> Result<(), u64> {
        let hash = Self::hash_key(key);
        let short = SlotKey::of(key);
        // Copy a long key before locking to keep the critical section short.
        let heap = (key.len() > INLINE_KEY).then(|| KeyBytes::copy_of(key));
        let guard = epoch::pin();
        let backoff = Backoff::new();
        let (table, bucket, word) = loop {
            let table = Self::current(&self.table, &guard);
            let bucket = table.bucket(hash);
            let word = bucket.lock.load(Ordering::Relaxed);
            if word & (LOCK | RETIRED) != 0 {
                // Locked by a writer or the resizer, or retired: in the last
                // case the reload above eventually yields the new table.
                backoff.snooze();
                continue;
            }
            if bucket
                .lock
                .compare_exchange_weak(word, word | LOCK, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
            {
                break (table, bucket, word);
            }
            backoff.spin();
        };
        // Locked: the slots and the chain cannot change under us.
        let head = bucket.head.load(Ordering::Acquire);

        // Slots (oldest first): the first free one, whether the key has a
        // slot, and a conflicting slot pair (for a unique insert the key's
        // newest slot, for a multimap insert the exact pair).
        let mut free = None;
        let mut in_slots = false;
        let mut slot_conflict = None;
        if let Some(k) = short {
            for (i, slot) in bucket.slots.iter().enumerate() {
                let meta = slot.meta.load(Ordering::Relaxed);
                if meta == 0 {
                    free = Some(i);
                    break;
                }
                if k.matches(meta, slot.key_word.load(Ordering::Relaxed)) {
                    in_slots = true;
                    let t = meta & META_TID;
                    if matches!(mode, Mode::Unique) || t == tid {
                        slot_conflict = Some(t);
                    }
                }
            }
        }
        // The chain, unless a slot already settles it: newer pairs of a key
        // can be in the chain only if it shadows the slots.
        let mut conflict = match (slot_conflict, &mode) {
            (Some(t), Mode::Multi) => Some(t),
            (Some(t), Mode::Unique) if !shadowed(head) => Some(t),
            _ => None,
        };
        let mut in_chain = false;
        if conflict.is_none() {
            let mut p = untag(head);
            while !p.is_null() {
                // SAFETY: as in `get`.
                let e = unsafe { &*p };
                if e.matches(hash, key) {
                    in_chain = true;
                    if matches!(mode, Mode::Unique) || e.tid == tid {
                        conflict = Some(e.tid);
                        break;
                    }
                }
                p = e.next;
            }
            conflict = conflict.or(slot_conflict);
        }
        if let Some(existing) = conflict {
            bucket.lock.store(word, Ordering::Release);
            if let Some(bytes) = heap {
                // SAFETY: `bytes` was never published; we own the copy.
                unsafe { bytes.free(key.len()) };
            }
            return Err(existing);
        }

        let stripe = stripe_of(hash);
        match (short, free) {
            (Some(k), Some(i)) if tid <= SLOT_TID_MAX && !in_chain => {
                // Invariant 1: `key_word` before the Release store of `meta`.
                let slot = &bucket.slots[i];
                slot.key_word.store(k.word, Ordering::Relaxed);
                slot.meta.store(k.meta(tid), Ordering::Release);
            }
            _ => {
                // The entry is complete (including `next`) before the release
                // store that publishes it (invariant 1). It is allocated from
                // the locked table's arena, so it lives exactly as long as
                // that table. The shadow bit is kept, or set if the key has a
                // slot (invariant 3).
                let entry = table.arenas[stripe].alloc(Entry {
                    hash,
                    tid,
                    next: untag(head),
                    len: key.len(),
                    key: heap.unwrap_or_else(|| KeyBytes::copy_of(key)),
                });
                let tag = (head.addr() & SHADOW) | if in_slots { SHADOW } else { 0 };
                bucket
                    .head
                    .store(entry.map_addr(|a| a | tag), Ordering::Release);
            }
        }
        // Unlock (`word` has no LOCK bit).
        bucket.lock.store(word, Ordering::Release);

        let c = self.counts[stripe].fetch_add(1, Ordering::Relaxed) + 1;
        let buckets = table.buckets.len();
        if c.saturating_mul(STRIPES) > buckets.saturating_mul(MAX_LOAD) {
            self.maybe_grow(&guard);
        }
        Ok(())
    }

    /// Doubles the table if the index holds more than `MAX_LOAD` times as
    /// many entries as buckets and no other thread is already resizing.
    #[cold]
    fn maybe_grow(&self, guard: &Guard) {
        if self.resizing.load(Ordering::Relaxed) {
            return;
        }
        let old_shared = self.table.load(Ordering::Acquire, guard);
        // SAFETY: see `current`.
        let old = unsafe { old_shared.as_ref() }.expect("hash index: table pointer is never null");
        if self.len() <= old.buckets.len().saturating_mul(MAX_LOAD) {
            return;
        }
        if self
            .resizing
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            return;
        }
        // We are the only resizer. Re-read the table: a previous resizer
        // published its table before releasing the flag.
        let old_shared = self.table.load(Ordering::Acquire, guard);
        // SAFETY: see `current`.
        let old = unsafe { old_shared.as_ref() }.expect("hash index: table pointer is never null");
        let old_n = old.buckets.len();
        let len = self.len();
        let new_n = match old_n.checked_mul(2) {
            Some(n)
                if len > old_n.saturating_mul(MAX_LOAD)
                    && n <= (isize::MAX as usize) / mem::size_of::<Bucket>() =>
            {
                n
            }
            _ => {
                self.resizing.store(false, Ordering::Release);
                return;
            }
        };
        let mut new = Table::new(new_n, len);
        let Table {
            buckets: new_buckets,
            arenas: new_arenas,
            ..
        } = &mut new;
        let backoff = Backoff::new();
        // Chain of the bucket being migrated, to replay it oldest first.
        let mut chain: Vec<*const Entry> = Vec::new();
        for (i, ob) in old.buckets.iter().enumerate() {
            // Lock the old bucket.
            let word = loop {
                let w = ob.lock.load(Ordering::Relaxed);
                assert!(
                    w & RETIRED == 0,
                    "hash index: bucket of the current table is already retired"
                );
                if w & LOCK == 0
                    && ob
                        .lock
                        .compare_exchange_weak(w, w | LOCK, Ordering::Acquire, Ordering::Relaxed)
                        .is_ok()
                {
                    backoff.reset();
                    break w;
                }
                backoff.snooze();
            };
            // Split into new buckets i and i + old_n. Replaying the slots in
            // index order and then the chain oldest first is an order in
            // which every key's pairs are oldest first (invariant 3), so the
            // placement rule rebuilds each key's newest-first order.
            let target = |hash: u64| {
                debug_assert_eq!((hash as usize) & (old_n - 1), i);
                i + usize::from((hash as usize) & old_n != 0) * old_n
            };
            for slot in &ob.slots {
                let meta = slot.meta.load(Ordering::Relaxed);
                if meta == 0 {
                    break;
                }
                let (bytes, len) = slot_key_bytes(
                    (meta & META_LEN) >> META_LEN_SHIFT,
                    slot.key_word.load(Ordering::Relaxed),
                );
                let key = &bytes[..len];
                let hash = Self::hash_key(key);
                place_private(
                    &mut new_buckets[target(hash)],
                    &mut new_arenas[stripe_of(hash)],
                    hash,
                    meta & META_TID,
                    key,
                    KeyBytes::copy_of(key),
                );
            }
            chain.clear();
            let mut p = untag(ob.head.load(Ordering::Acquire));
            while !p.is_null() {
                chain.push(p);
                // SAFETY: as in `get`; the bucket is locked, so stable.
                p = unsafe { (*p).next };
            }
            for &p in chain.iter().rev() {
                // SAFETY: as above.
                let e = unsafe { &*p };
                // The key bytes are copied bitwise: inline bytes by value, a
                // heap key by pointer, whose ownership moves to `new`
                // (invariant 5; a long key always goes to the chain).
                place_private(
                    &mut new_buckets[target(e.hash)],
                    &mut new_arenas[stripe_of(e.hash)],
                    e.hash,
                    e.tid,
                    e.key(),
                    e.key,
                );
            }
            // Retire for good: never unlocked again (invariants 2 and 4).
            ob.lock.store(word | LOCK | RETIRED, Ordering::Release);
        }
        old.keys_moved.store(true, Ordering::Relaxed);
        let lines = new.lines();
        self.table.store(Owned::new(new), Ordering::Release);
        // Prefetches may use the old array until this store; harmless.
        self.lines.store(lines, Ordering::Relaxed);
        // SAFETY: `old` is unreachable from the index now; threads still
        // pinned may hold it, and the epoch scheme frees it only after they
        // unpin. Its Drop frees only its own entries (keys have moved).
        unsafe { guard.defer_destroy(old_shared) };
        self.resizing.store(false, Ordering::Release);
        guard.flush();
    }
}

impl Drop for HashIndex {
    fn drop(&mut self) {
        // SAFETY: `&mut self`: no other thread can access the index; retired
        // tables were handed to the epoch collector and do not own keys.
        unsafe {
            let guard = epoch::unprotected();
            let t: Shared<'_, Table> = self.table.load(Ordering::Relaxed, guard);
            if !t.is_null() {
                drop(t.into_owned());
            }
        }
    }
}

impl fmt::Debug for HashIndex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HashIndex")
            .field("len", &self.len())
            .field("buckets", &self.bucket_count())
            .finish()
    }
}

// ---------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::{HashMap, HashSet};
    use std::sync::Arc;

    /// Deterministic splitmix64.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        }
        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
        fn key(&mut self, max_len: u64) -> Vec<u8> {
            let len = self.below(max_len) as usize;
            (0..len).map(|_| self.next() as u8).collect()
        }
    }

    fn assert_send_sync<T: Send + Sync>() {}

    #[test]
    fn is_send_sync() {
        assert_send_sync::<HashIndex>();
    }

    #[test]
    fn entry_fits_a_cache_line() {
        assert_eq!(mem::size_of::<Entry>(), 64);
        // A bucket (lock word, head, three slots) is exactly one cache line.
        assert_eq!(mem::size_of::<Slot>(), 16);
        assert_eq!(mem::size_of::<Bucket>(), 64);
        assert_eq!(mem::align_of::<Bucket>(), 64);
        let idx = HashIndex::new(1000);
        let guard = epoch::pin();
        let table = HashIndex::current(&idx.table, &guard);
        assert_eq!(table.buckets.as_ptr().addr() % 64, 0);
    }

    #[test]
    fn hash_is_deterministic_and_spreads() {
        assert_eq!(HashIndex::hash_key(b"abc"), HashIndex::hash_key(b"abc"));
        assert_ne!(HashIndex::hash_key(b""), HashIndex::hash_key(b"\0"));
        // All lengths 0..=100 of a fixed pattern hash differently, and the
        // low bits of sequential integer keys fill buckets evenly.
        let buf: Vec<u8> = (0..100u8).collect();
        let hs: HashSet<u64> = (0..=100).map(|l| HashIndex::hash_key(&buf[..l])).collect();
        assert_eq!(hs.len(), 101);
        let mut counts = [0u32; 256];
        for i in 0u64..256 * 64 {
            counts[(HashIndex::hash_key(&i.to_le_bytes()) & 255) as usize] += 1;
        }
        assert!(
            counts.iter().all(|&c| (30..=100).contains(&c)),
            "{counts:?}"
        );
    }

    #[test]
    fn new_bucket_counts() {
        assert_eq!(HashIndex::new(0).bucket_count(), 16);
        // Next power of two >= hint / 2, at least 16.
        assert_eq!(HashIndex::new(17).bucket_count(), 16);
        assert_eq!(HashIndex::new(33).bucket_count(), 16);
        assert_eq!(HashIndex::new(34).bucket_count(), 32);
        assert_eq!(HashIndex::new(1024).bucket_count(), 512);
        assert_eq!(HashIndex::new(1000).bucket_count(), 512);
        let idx = HashIndex::new(0);
        assert!(idx.is_empty());
        assert_eq!(idx.get(b"missing"), None);
    }

    #[test]
    fn model_unique_against_std() {
        let mut rng = Rng(1);
        let idx = HashIndex::new(16);
        let mut model: HashMap<Vec<u8>, u64> = HashMap::new();
        for tid in 0..20_000u64 {
            let key = rng.key(64);
            let got = idx.insert_unique(&key, tid);
            match model.get(&key) {
                Some(&old) => assert_eq!(got, Err(old)),
                None => {
                    assert_eq!(got, Ok(()));
                    model.insert(key, tid);
                }
            }
        }
        assert_eq!(idx.len(), model.len());
        assert!(idx.bucket_count() > 16, "the model test should resize");
        for (k, &t) in &model {
            assert_eq!(idx.get(k), Some(t));
        }
        for _ in 0..5_000 {
            let k = rng.key(64);
            assert_eq!(idx.get(&k), model.get(&k).copied());
        }
        // Slots, chain entries and the slot/chain and inline/heap boundaries
        // are exercised.
        for len in [0usize, 1, 7, 8, 9, 23, 24, 25, 63] {
            let k = vec![0xAB; len];
            let expect = model.get(&k).copied();
            let r = idx.insert_unique(&k, 1 << 40);
            match expect {
                Some(t) => assert_eq!(r, Err(t)),
                None => assert_eq!(r, Ok(())),
            }
            assert_eq!(idx.get(&k), Some(expect.unwrap_or(1 << 40)));
        }
    }

    #[test]
    fn model_multimap_against_std() {
        let mut rng = Rng(2);
        let idx = HashIndex::new(16);
        let mut model: HashMap<Vec<u8>, HashSet<u64>> = HashMap::new();
        // Few distinct keys and tids, so pairs repeat often.
        let keys: Vec<Vec<u8>> = (0..300).map(|_| rng.key(64)).collect();
        for _ in 0..20_000 {
            let k = &keys[rng.below(keys.len() as u64) as usize];
            let t = rng.below(40);
            let added = model.entry(k.clone()).or_default().insert(t);
            assert_eq!(idx.insert(k, t), added);
        }
        let total: usize = model.values().map(HashSet::len).sum();
        assert_eq!(idx.len(), total);
        for k in &keys {
            let mut got = Vec::new();
            idx.for_each(k, &mut |t| {
                got.push(t);
                true
            });
            let set: HashSet<u64> = got.iter().copied().collect();
            assert_eq!(set.len(), got.len(), "no duplicate pairs");
            let expect = model.get(k).cloned().unwrap_or_default();
            assert_eq!(set, expect);
            assert_eq!(idx.get(k).is_some(), !expect.is_empty());
        }
    }

    #[test]
    fn unique_conflicts() {
        let idx = HashIndex::new(16);
        assert_eq!(idx.insert_unique(b"k", 1), Ok(()));
        assert_eq!(idx.insert_unique(b"k", 2), Err(1));
        assert_eq!(idx.insert_unique(b"k", 1), Err(1));
        let long = [7u8; 40];
        assert_eq!(idx.insert_unique(&long, 3), Ok(()));
        assert_eq!(idx.insert_unique(&long, 4), Err(3));
        assert_eq!(idx.insert_unique(b"", 5), Ok(()));
        assert_eq!(idx.insert_unique(b"", 6), Err(5));
        assert_eq!(idx.get(b"k"), Some(1));
        assert_eq!(idx.get(&long), Some(3));
        assert_eq!(idx.get(b""), Some(5));
        assert_eq!(idx.len(), 3);
    }

    #[test]
    fn multimap_dedup_and_many_tids() {
        let idx = HashIndex::new(16);
        assert!(idx.insert(b"color=red", 10));
        assert!(!idx.insert(b"color=red", 10));
        assert!(idx.insert(b"color=red", 11));
        assert!(idx.insert(b"color=red", 12));
        assert!(idx.insert(b"color=blue", 10));
        assert!(!idx.insert(b"color=blue", 10));
        assert_eq!(idx.len(), 4);
        let mut tids = Vec::new();
        idx.for_each(b"color=red", &mut |t| {
            tids.push(t);
            true
        });
        assert_eq!(tids, vec![12, 11, 10], "newest first");
        assert_eq!(idx.get(b"color=red"), Some(12));
        // A unique insert sees the existing entries of a multimap key.
        assert!(idx.insert_unique(b"color=blue", 99).is_err());
        // Many tids under one key, across resizes.
        for t in 0..1000 {
            assert!(idx.insert(b"hot", t));
        }
        for t in 0..1000 {
            assert!(!idx.insert(b"hot", t));
        }
        let mut n = 0;
        idx.for_each(b"hot", &mut |_| {
            n += 1;
            true
        });
        assert_eq!(n, 1000);
        assert_eq!(idx.len(), 1004);
    }

    #[test]
    fn for_each_stops_early() {
        let idx = HashIndex::new(16);
        for t in 0..10 {
            assert!(idx.insert(b"k", t));
        }
        let mut calls = 0;
        idx.for_each(b"k", &mut |_| {
            calls += 1;
            calls < 3
        });
        assert_eq!(calls, 3);
        let mut calls = 0;
        idx.for_each(b"absent", &mut |_| {
            calls += 1;
            true
        });
        assert_eq!(calls, 0);
    }

    #[test]
    fn grows_from_16_to_a_million() {
        const N: u64 = 1_000_000;
        let idx = HashIndex::new(16);
        for i in 0..N {
            assert!(idx.insert_unique(&i.to_le_bytes(), i).is_ok());
        }
        assert_eq!(idx.len(), N as usize);
        let buckets = idx.bucket_count();
        assert!(
            buckets >= (N as usize) / 2 && buckets <= N as usize,
            "{buckets}"
        );
        for i in 0..N {
            assert_eq!(idx.get(&i.to_le_bytes()), Some(i));
        }
        assert_eq!(idx.get(&N.to_le_bytes()), None);
    }

    #[test]
    fn concurrent_unique_inserts_and_readers() {
        const WRITERS: u64 = 4;
        const OWN: u64 = 20_000;
        const SHARED: u64 = 20_000;
        let idx = Arc::new(HashIndex::new(16));
        let done = Arc::new(AtomicBool::new(false));
        // Lengths vary across the inline/heap boundary.
        let own_key = |w: u64, i: u64| {
            let mut k = format!("own/{w}/{i}/").into_bytes();
            k.resize(k.len() + (i % 30) as usize, b'x');
            k
        };
        let shared_key = |i: u64| format!("shared/{i}").into_bytes();

        // Readers: a key once seen must stay visible with the same tid.
        let readers: Vec<_> = (0..2u64)
            .map(|r| {
                let idx = Arc::clone(&idx);
                let done = Arc::clone(&done);
                std::thread::spawn(move || {
                    let mut seen: HashMap<u64, u64> = HashMap::new();
                    let mut rng = Rng(100 + r);
                    let mut rounds = 0u64;
                    while !done.load(Ordering::Acquire) || rounds < 2 {
                        rounds += 1;
                        for _ in 0..2_000 {
                            let i = rng.below(SHARED);
                            match (idx.get(&shared_key(i)), seen.get(&i)) {
                                (Some(t), Some(&old)) => assert_eq!(t, old, "tid changed"),
                                (Some(t), None) => {
                                    seen.insert(i, t);
                                }
                                (None, Some(_)) => panic!("key shared/{i} vanished"),
                                (None, None) => {}
                            }
                        }
                    }
                    for (i, t) in seen {
                        assert_eq!(idx.get(&shared_key(i)), Some(t));
                    }
                })
            })
            .collect();

        let writers: Vec<_> = (0..WRITERS)
            .map(|w| {
                let idx = Arc::clone(&idx);
                std::thread::spawn(move || {
                    let mut wins = Vec::new();
                    let mut rng = Rng(w);
                    for i in 0..OWN.max(SHARED) {
                        if i < OWN {
                            let k = own_key(w, i);
                            assert_eq!(idx.insert_unique(&k, (w << 32) | i), Ok(()));
                            // Own earlier keys never vanish.
                            let j = rng.below(i + 1);
                            assert_eq!(idx.get(&own_key(w, j)), Some((w << 32) | j));
                        }
                        if i < SHARED {
                            // Threads walk the shared keys in different orders.
                            let s = if w % 2 == 0 { i } else { SHARED - 1 - i };
                            let tid = (w << 32) | s | (1 << 63);
                            match idx.insert_unique(&shared_key(s), tid) {
                                Ok(()) => wins.push((s, tid)),
                                Err(t) => assert_ne!(t, tid),
                            }
                            assert!(idx.get(&shared_key(s)).is_some());
                        }
                    }
                    wins
                })
            })
            .collect();

        let mut winners: HashMap<u64, u64> = HashMap::new();
        for h in writers {
            for (s, tid) in h.join().expect("writer thread panicked") {
                assert!(
                    winners.insert(s, tid).is_none(),
                    "two winners for shared/{s}"
                );
            }
        }
        done.store(true, Ordering::Release);
        for h in readers {
            h.join().expect("reader thread panicked");
        }
        assert_eq!(
            winners.len() as u64,
            SHARED,
            "every shared key has a winner"
        );
        assert_eq!(idx.len() as u64, WRITERS * OWN + SHARED);
        for (s, tid) in &winners {
            assert_eq!(idx.get(&shared_key(*s)), Some(*tid));
        }
        for w in 0..WRITERS {
            for i in 0..OWN {
                assert_eq!(idx.get(&own_key(w, i)), Some((w << 32) | i));
            }
        }
        assert!(idx.bucket_count() >= 16 * 1024);
    }

    #[test]
    fn concurrent_multimap_pairs_added_once() {
        const THREADS: u64 = 4;
        const KEYS: u64 = 500;
        const TIDS: u64 = 20;
        let idx = Arc::new(HashIndex::new(16));
        let handles: Vec<_> = (0..THREADS)
            .map(|w| {
                let idx = Arc::clone(&idx);
                std::thread::spawn(move || {
                    let mut added = Vec::new();
                    for n in 0..KEYS * TIDS {
                        // Every thread inserts every pair, in its own order.
                        let n = if w % 2 == 0 { n } else { KEYS * TIDS - 1 - n };
                        let (k, t) = (n % KEYS, n / KEYS);
                        let key = format!("sec/{k}/{}", "y".repeat((k % 40) as usize));
                        if idx.insert(key.as_bytes(), t) {
                            added.push(n);
                        }
                    }
                    added
                })
            })
            .collect();
        let mut all = HashSet::new();
        for h in handles {
            for n in h.join().expect("writer thread panicked") {
                assert!(all.insert(n), "pair {n} added twice");
            }
        }
        assert_eq!(all.len() as u64, KEYS * TIDS);
        assert_eq!(idx.len() as u64, KEYS * TIDS);
        for k in 0..KEYS {
            let key = format!("sec/{k}/{}", "y".repeat((k % 40) as usize));
            let mut tids = Vec::new();
            idx.for_each(key.as_bytes(), &mut |t| {
                tids.push(t);
                true
            });
            tids.sort_unstable();
            assert_eq!(tids, (0..TIDS).collect::<Vec<_>>());
        }
    }

    // -- slots and overflow -------------------------------------------------

    /// Where a pair lives (test-only inspection of the current table).
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    enum Place {
        Slot(usize),
        Chain,
    }

    /// The pairs of `key` in the current table, newest first, with where
    /// they live.
    fn places(idx: &HashIndex, key: &[u8]) -> Vec<(Place, u64)> {
        let guard = epoch::pin();
        let table = HashIndex::current(&idx.table, &guard);
        let hash = HashIndex::hash_key(key);
        let bucket = table.bucket(hash);
        let mut out = Vec::new();
        let mut p = untag(bucket.head.load(Ordering::Acquire));
        while !p.is_null() {
            // SAFETY: pinned; entries are immutable.
            let e = unsafe { &*p };
            if e.matches(hash, key) {
                out.push((Place::Chain, e.tid));
            }
            p = e.next;
        }
        if let Some(k) = SlotKey::of(key) {
            for (i, slot) in bucket.slots.iter().enumerate().rev() {
                if let Some(t) = slot.load_match(k) {
                    out.push((Place::Slot(i), t));
                }
            }
        }
        out
    }

    /// Every tid of `key` via `for_each`, in the order yielded.
    fn all(idx: &HashIndex, key: &[u8]) -> Vec<u64> {
        let mut v = Vec::new();
        idx.for_each(key, &mut |t| {
            v.push(t);
            true
        });
        v
    }

    /// Checks the structural invariants of every bucket of the current table
    /// (quiescent index): unlocked, slots filled in order with valid, padded
    /// keys of the right bucket, chain entries in the right bucket, and the
    /// shadow bit set when a chain key also has a slot. Returns (slot pairs,
    /// chain pairs).
    fn check_structure(idx: &HashIndex) -> (usize, usize) {
        let guard = epoch::pin();
        let table = HashIndex::current(&idx.table, &guard);
        let (mut in_slots, mut in_chain) = (0, 0);
        for (bi, b) in table.buckets.iter().enumerate() {
            assert_eq!(b.lock.load(Ordering::Relaxed) & (LOCK | RETIRED), 0);
            let mut slot_keys: Vec<Vec<u8>> = Vec::new();
            let mut empty_seen = false;
            for s in &b.slots {
                let m = s.meta.load(Ordering::Acquire);
                if m == 0 {
                    empty_seen = true;
                    continue;
                }
                assert!(!empty_seen, "slots fill in index order");
                assert_ne!(m & META_VALID, 0);
                let code = (m & META_LEN) >> META_LEN_SHIFT;
                assert!(code <= SLOT_KEY as u64 || code == PACKED2 || code == PACKED3);
                let w = s.key_word.load(Ordering::Relaxed);
                if code < 8 {
                    assert_eq!(w >> (8 * code), 0, "key_word is zero-padded");
                }
                let (bytes, len) = slot_key_bytes(code, w);
                let key = bytes[..len].to_vec();
                // The slot form is the key's own: packing it again gives it.
                let k = SlotKey::of(&key).expect("a slot key has a slot form");
                assert_eq!((k.tag, k.word), (m & !META_TID, w));
                assert_eq!((HashIndex::hash_key(&key) as usize) & table.mask, bi);
                slot_keys.push(key);
                in_slots += 1;
            }
            let head = b.head.load(Ordering::Acquire);
            let mut p = untag(head);
            while !p.is_null() {
                // SAFETY: pinned; entries are immutable.
                let e = unsafe { &*p };
                assert_eq!(e.hash, HashIndex::hash_key(e.key()));
                assert_eq!((e.hash as usize) & table.mask, bi);
                if slot_keys.iter().any(|k| k.as_slice() == e.key()) {
                    assert!(shadowed(head), "chain key with a slot must shadow");
                }
                in_chain += 1;
                p = e.next;
            }
        }
        assert_eq!(in_slots + in_chain, idx.len());
        (in_slots, in_chain)
    }

    /// The first `n` keys (from `gen`) that land in the bucket of `of`, other
    /// than `of` itself.
    fn bucket_mates(
        idx: &HashIndex,
        of: &[u8],
        n: usize,
        gen: impl Fn(u64) -> Vec<u8>,
    ) -> Vec<Vec<u8>> {
        let mask = (idx.bucket_count() - 1) as u64;
        let target = HashIndex::hash_key(of) & mask;
        (0u64..)
            .map(gen)
            .filter(|k| k.as_slice() != of && HashIndex::hash_key(k) & mask == target)
            .take(n)
            .collect()
    }

    /// Integer keys as `schema.rs` encodes them.
    fn int_key(parts: &[i64]) -> Vec<u8> {
        parts
            .iter()
            .flat_map(|&v| ((v as u64) ^ (1 << 63)).to_be_bytes())
            .collect()
    }

    #[test]
    fn small_integer_composite_keys_pack_into_slots() {
        let idx = HashIndex::new(1 << 14);
        let (m32, m21) = ((1i64 << 32) - 1, (1i64 << 21) - 1);
        let packs = [
            vec![0, 0],
            vec![1, m32],
            vec![m32, 0],
            vec![0, 0, 0],
            vec![m21, 10, m21],
        ];
        let do_not = [
            vec![m32 + 1, 0],
            vec![0, m32 + 1],
            vec![-1, 5],
            vec![m21 + 1, 0, 0],
            vec![0, 0, -1],
            vec![1, 2, 3, 4],
        ];
        for (i, k) in packs.iter().chain(&do_not).enumerate() {
            assert!(idx.insert(&int_key(k), i as u64));
        }
        for (i, k) in packs.iter().chain(&do_not).enumerate() {
            let key = int_key(k);
            assert_eq!(idx.get(&key), Some(i as u64), "{k:?}");
            let p = places(&idx, &key);
            if i < packs.len() {
                assert!(
                    matches!(p[..], [(Place::Slot(_), t)] if t == i as u64),
                    "{k:?}: {p:?}"
                );
            } else {
                assert_eq!(p, vec![(Place::Chain, i as u64)], "{k:?}");
            }
            // A packed key never matches another key of another length or value.
            let mut other = key.clone();
            *other.last_mut().unwrap() ^= 1;
            assert_ne!(idx.get(&other), Some(i as u64), "{k:?}");
        }
        check_structure(&idx);
        // Many packed keys from a small table: every resize rebuilds the keys
        // (and their hashes) from packed slots.
        let idx = HashIndex::new(16);
        let mut n = 0u64;
        for w in 0..3i64 {
            for i in 0..6_000i64 {
                assert!(idx.insert(&int_key(&[w, i]), n));
                assert!(idx.insert(&int_key(&[w, i % 10, i]), n + 1));
                n += 2;
            }
        }
        let (slots, _) = check_structure(&idx);
        assert!(slots > 0);
        let mut n = 0u64;
        for w in 0..3i64 {
            for i in 0..6_000i64 {
                assert_eq!(idx.get(&int_key(&[w, i])), Some(n));
                assert_eq!(idx.get(&int_key(&[w, i % 10, i])), Some(n + 1));
                n += 2;
            }
        }
    }

    #[test]
    fn short_keys_inline_long_keys_in_overflow() {
        let idx = HashIndex::new(1 << 14);
        let buf: Vec<u8> = (1..=40u8).collect();
        for len in 0..=40usize {
            let key = &buf[..len];
            assert_eq!(idx.insert_unique(key, len as u64), Ok(()));
        }
        for len in 0..=40usize {
            let key = &buf[..len];
            assert_eq!(idx.get(key), Some(len as u64));
            let p = places(&idx, key);
            assert_eq!(p.len(), 1, "{len}: {p:?}");
            if len <= SLOT_KEY {
                assert!(
                    matches!(p[0], (Place::Slot(_), t) if t == len as u64),
                    "{len}: {p:?}"
                );
            } else {
                assert_eq!(p[0], (Place::Chain, len as u64), "{len}");
            }
            assert_eq!(idx.insert_unique(key, 999), Err(len as u64));
        }
        // Tids: up to 48 bits inline, larger ones in the chain.
        let idx = HashIndex::new(1 << 14);
        let cases = [
            (b"t0".as_slice(), 0u64),
            (b"t1", SLOT_TID_MAX),
            (b"t2", SLOT_TID_MAX + 1),
            (b"t3", u64::MAX),
            (b"t4", 1 << 63),
        ];
        for &(k, t) in &cases {
            assert!(idx.insert(k, t));
        }
        for &(k, t) in &cases {
            assert_eq!(idx.get(k), Some(t));
            let p = places(&idx, k);
            if t <= SLOT_TID_MAX {
                assert!(matches!(p[..], [(Place::Slot(_), x)] if x == t), "{p:?}");
            } else {
                assert_eq!(p, vec![(Place::Chain, t)]);
            }
            assert!(!idx.insert(k, t));
        }
        check_structure(&idx);
    }

    #[test]
    fn zero_padded_variants_are_distinct() {
        // "", "\0", "\0\0", ..., and "a", "a\0", ...: equal key words, different
        // lengths; plus keys that differ only in where a byte sits.
        let mut keys: Vec<Vec<u8>> = Vec::new();
        for base in [&b""[..], b"a", b"\0a", b"abcdefg", b"\x01\0\0"] {
            for pad in 0..=(11 - base.len()) {
                let mut k = base.to_vec();
                k.resize(base.len() + pad, 0);
                keys.push(k);
            }
        }
        for i in 0..8 {
            let mut k = vec![0u8; 8];
            k[i] = 1;
            keys.push(k);
        }
        keys.sort();
        keys.dedup();
        // A roomy index (mostly slots), and a tiny one (collisions, resizes).
        for hint in [1 << 12, 0] {
            let idx = HashIndex::new(hint);
            for (t, k) in keys.iter().enumerate() {
                assert_eq!(idx.insert_unique(k, t as u64), Ok(()), "{k:?}");
            }
            assert_eq!(idx.len(), keys.len());
            for (t, k) in keys.iter().enumerate() {
                assert_eq!(idx.get(k), Some(t as u64), "{k:?}");
                assert_eq!(all(&idx, k), vec![t as u64], "{k:?}");
                assert_eq!(idx.insert_unique(k, 1000), Err(t as u64));
            }
            assert_eq!(idx.get(&[0u8; 12]), None);
            assert_eq!(idx.get(b"a\0\0\0\0\0\0\0\0\0\0\0"), None);
            check_structure(&idx);
            // The same keys as a multimap: each key has exactly its own tids.
            let idx = HashIndex::new(hint);
            for (t, k) in keys.iter().enumerate() {
                assert!(idx.insert(k, t as u64));
                assert!(idx.insert(k, 500 + t as u64));
            }
            for (t, k) in keys.iter().enumerate() {
                assert_eq!(all(&idx, k), vec![500 + t as u64, t as u64], "{k:?}");
            }
            check_structure(&idx);
        }
    }

    #[test]
    fn more_than_three_keys_in_one_bucket() {
        let idx = HashIndex::new(0);
        assert_eq!(idx.bucket_count(), 16);
        let anchor = b"anchor".to_vec();
        // 11 short mates and 3 long ones: 15 keys in one bucket, no resize
        // (16 buckets hold up to 32 pairs).
        let short = bucket_mates(&idx, &anchor, 11, |i| (i as u32).to_le_bytes().to_vec());
        let long = bucket_mates(&idx, &anchor, 3, |i| {
            format!("long-key-{i:08}").into_bytes()
        });
        let mut keys = vec![anchor.clone()];
        for i in 0..11 {
            keys.push(short[i].clone());
            if i % 4 == 1 {
                keys.push(long[i / 4].clone());
            }
        }
        for (t, k) in keys.iter().enumerate() {
            assert_eq!(idx.insert_unique(k, t as u64), Ok(()));
        }
        assert_eq!(idx.bucket_count(), 16);
        assert_eq!(check_structure(&idx), (3, keys.len() - 3));
        for (t, k) in keys.iter().enumerate() {
            assert_eq!(idx.get(k), Some(t as u64));
            assert_eq!(all(&idx, k), vec![t as u64]);
            assert_eq!(idx.insert_unique(k, 99), Err(t as u64));
            let p = places(&idx, k);
            // The first three (short) keys fill the slots, in order.
            let expect = if t < 3 { Place::Slot(t) } else { Place::Chain };
            assert_eq!(p, vec![(expect, t as u64)], "{t}");
        }
        // Absent keys of the same bucket, short and long, are not found.
        for k in bucket_mates(&idx, &anchor, 40, |i| (i as u32).to_le_bytes().to_vec())
            .into_iter()
            .skip(11)
            .chain(
                bucket_mates(&idx, &anchor, 10, |i| {
                    format!("long-key-{i:08}").into_bytes()
                })
                .into_iter()
                .skip(3),
            )
        {
            assert_eq!(idx.get(&k), None);
            assert!(all(&idx, &k).is_empty());
        }
        // Grow well past the bucket: everything is still found.
        for i in 0..5_000u64 {
            assert_eq!(
                idx.insert_unique(&(1_000_000 + i).to_le_bytes(), 1_000 + i),
                Ok(())
            );
        }
        assert!(idx.bucket_count() > 16);
        for (t, k) in keys.iter().enumerate() {
            assert_eq!(idx.get(k), Some(t as u64));
        }
        check_structure(&idx);
    }

    #[test]
    fn multimap_newest_first_across_slots_and_overflow() {
        let idx = HashIndex::new(0);
        let k = b"key".to_vec();
        let mates = bucket_mates(&idx, &k, 2, |i| format!("m{i}").into_bytes());
        let (a, c) = (&mates[0], &mates[1]);
        let big = 1u64 << 50;
        assert!(idx.insert(a, 1)); // slot 0
        assert!(idx.insert(&k, 10)); // slot 1
        assert!(idx.insert(&k, 11)); // slot 2
        assert!(idx.insert(&k, 12)); // chain, shadows the slots
        assert!(idx.insert(a, 2)); // chain
        assert!(idx.insert(&k, big)); // chain (tid too large for a slot)
        assert!(idx.insert(&k, 13)); // chain
        assert!(idx.insert(c, 7)); // chain (slots full)
        assert_eq!(
            places(&idx, &k),
            vec![
                (Place::Chain, 13),
                (Place::Chain, big),
                (Place::Chain, 12),
                (Place::Slot(2), 11),
                (Place::Slot(1), 10),
            ]
        );
        assert_eq!(all(&idx, &k), vec![13, big, 12, 11, 10]);
        assert_eq!(idx.get(&k), Some(13));
        assert_eq!(all(&idx, a), vec![2, 1]);
        assert_eq!(idx.get(a), Some(2));
        assert_eq!(all(&idx, c), vec![7]);
        for t in [10, 11, 12, 13, big] {
            assert!(!idx.insert(&k, t), "pair ({t}) is deduplicated");
        }
        assert!(!idx.insert(a, 1));
        assert!(!idx.insert(a, 2));
        // A unique insert reports the newest tid, slot or chain.
        assert_eq!(idx.insert_unique(&k, 99), Err(13));
        assert_eq!(idx.insert_unique(a, 99), Err(2));
        assert_eq!(idx.insert_unique(c, 99), Err(7));
        // Early stop after the chain part and inside the slot part.
        for stop in 1..=5 {
            let mut got = Vec::new();
            idx.for_each(&k, &mut |t| {
                got.push(t);
                got.len() < stop
            });
            assert_eq!(got, vec![13, big, 12, 11, 10][..stop].to_vec());
        }
        check_structure(&idx);

        // A key whose first pair went to the chain keeps its later pairs
        // there even while slots are free: order is kept.
        let idx2 = HashIndex::new(1 << 10);
        let b = b"bee".to_vec();
        assert!(idx2.insert(&b, big));
        assert!(idx2.insert(&b, 5));
        assert!(idx2.insert(&b, 6));
        assert_eq!(
            places(&idx2, &b),
            vec![(Place::Chain, 6), (Place::Chain, 5), (Place::Chain, big)]
        );
        assert_eq!(all(&idx2, &b), vec![6, 5, big]);
        assert_eq!(idx2.get(&b), Some(6));
        check_structure(&idx2);

        // Orders survive resizes (chain pairs may move into slots).
        for i in 0..3_000u64 {
            assert!(idx.insert(&i.to_le_bytes(), i));
            assert!(idx2.insert(&i.to_le_bytes(), i));
        }
        assert!(idx.bucket_count() >= 1024);
        assert!(idx2.bucket_count() >= 1024);
        assert_eq!(all(&idx, &k), vec![13, big, 12, 11, 10]);
        assert_eq!(idx.get(&k), Some(13));
        assert_eq!(all(&idx, a), vec![2, 1]);
        assert_eq!(all(&idx, c), vec![7]);
        assert_eq!(all(&idx2, &b), vec![6, 5, big]);
        assert_eq!(idx2.get(&b), Some(6));
        // After the move `a`'s pairs are alone in their bucket: both slots.
        let pa = places(&idx, a);
        assert!(
            pa.iter().all(|(p, _)| matches!(p, Place::Slot(_))),
            "{pa:?}"
        );
        check_structure(&idx);
        check_structure(&idx2);
    }

    #[test]
    fn resize_preserves_mixed_contents() {
        let mut rng = Rng(7);
        let idx = HashIndex::new(16);
        // Insertion-ordered model of the multimap.
        let mut model: HashMap<Vec<u8>, Vec<u64>> = HashMap::new();
        let mut keys: Vec<Vec<u8>> = Vec::new();
        for i in 0..1_500 {
            // Short keys of every length 0..=8 and long keys (inline and heap
            // entry storage); a few keys get many tids.
            let len = match i % 5 {
                0..=2 => (rng.below(9)) as usize,
                3 => 9 + rng.below(16) as usize,
                _ => 25 + rng.below(40) as usize,
            };
            keys.push((0..len).map(|_| rng.below(4) as u8).collect());
        }
        keys.sort();
        keys.dedup();
        let mut buckets_seen = HashSet::new();
        for n in 0..12_000u64 {
            let k = if n % 10 == 0 {
                keys[rng.below(8) as usize].clone() // hot keys
            } else {
                keys[rng.below(keys.len() as u64) as usize].clone()
            };
            let t = match rng.below(8) {
                0 => (1 << 48) + rng.below(3),
                1 => u64::MAX - rng.below(3),
                _ => rng.below(50),
            };
            let tids = model.entry(k.clone()).or_default();
            let fresh = !tids.contains(&t);
            if fresh {
                tids.push(t);
            }
            assert_eq!(idx.insert(&k, t), fresh);
            if buckets_seen.insert(idx.bucket_count()) || n % 3_000 == 0 {
                check_structure(&idx);
                for (k, tids) in &model {
                    let newest_first: Vec<u64> = tids.iter().rev().copied().collect();
                    assert_eq!(all(&idx, k), newest_first, "{k:?}");
                    assert_eq!(idx.get(k), newest_first.first().copied());
                }
            }
        }
        assert!(buckets_seen.len() >= 5, "several resizes: {buckets_seen:?}");
        let (in_slots, in_chain) = check_structure(&idx);
        assert!(in_slots > 0 && in_chain > 0);
        for (k, tids) in &model {
            let newest_first: Vec<u64> = tids.iter().rev().copied().collect();
            assert_eq!(all(&idx, k), newest_first, "{k:?}");
        }
        let total: usize = model.values().map(Vec::len).sum();
        assert_eq!(idx.len(), total);

        // A unique index with mixed contents across resizes.
        let idx = HashIndex::new(0);
        let mut expect = Vec::new();
        for (i, k) in keys.iter().enumerate() {
            let t = if i % 3 == 0 {
                u64::MAX - i as u64
            } else {
                i as u64
            };
            assert_eq!(idx.insert_unique(k, t), Ok(()));
            expect.push(t);
        }
        assert!(idx.bucket_count() > 16);
        for (k, &t) in keys.iter().zip(&expect) {
            assert_eq!(idx.get(k), Some(t));
            assert_eq!(idx.insert_unique(k, 0), Err(t));
        }
        check_structure(&idx);
    }

    #[test]
    fn prefetch_is_harmless() {
        let idx = Arc::new(HashIndex::new(0));
        idx.prefetch(b"");
        idx.prefetch(b"anything");
        idx.prefetch(&[7u8; 100]);
        let done = Arc::new(AtomicBool::new(false));
        // A thread prefetching (possibly stale or freed bucket lines) while
        // the table grows under it.
        let h = {
            let idx = Arc::clone(&idx);
            let done = Arc::clone(&done);
            std::thread::spawn(move || {
                let mut i = 0u64;
                while !done.load(Ordering::Acquire) {
                    idx.prefetch(&i.to_le_bytes());
                    i = i.wrapping_add(1);
                }
            })
        };
        let n: u64 = if cfg!(miri) { 300 } else { 100_000 };
        for i in 0..n {
            idx.prefetch(&i.to_le_bytes());
            assert_eq!(idx.insert_unique(&i.to_le_bytes(), i), Ok(()));
        }
        done.store(true, Ordering::Release);
        h.join().expect("prefetch thread panicked");
        for i in 0..n {
            idx.prefetch(&i.to_le_bytes());
            assert_eq!(idx.get(&i.to_le_bytes()), Some(i));
        }
        // The prefetch word tracks the current table.
        let guard = epoch::pin();
        let table = HashIndex::current(&idx.table, &guard);
        assert_eq!(idx.lines.load(Ordering::Relaxed), table.lines());
        assert_eq!(
            1usize << (table.lines().addr() & LINE_SHIFT_BITS),
            table.buckets.len()
        );
    }

    #[test]
    fn concurrent_multimap_readers_see_prefixes() {
        // Each key belongs to one writer, which adds its tids in order, so
        // the newest-first view of a key must always be a prefix of its
        // history: [n-1, ..., 0] (tids encoded so that some go to the chain).
        const WRITERS: u64 = 2;
        const KEYS: u64 = 300;
        const TIDS: u64 = 12;
        let tid_of = |k: u64, i: u64| {
            if (k + i).is_multiple_of(4) {
                (1 << 50) | i
            } else {
                i
            }
        };
        let key_of = |k: u64| {
            if k.is_multiple_of(3) {
                format!("long-multimap-key-{k}").into_bytes()
            } else {
                // Unique: two low bytes of k, zero-padded to 2..=5 bytes.
                (k as u32 as u64).to_le_bytes()[..2 + (k % 4) as usize].to_vec()
            }
        };
        let idx = Arc::new(HashIndex::new(0));
        let done = Arc::new(AtomicBool::new(false));
        let readers: Vec<_> = (0..2u64)
            .map(|r| {
                let idx = Arc::clone(&idx);
                let done = Arc::clone(&done);
                std::thread::spawn(move || {
                    let mut rng = Rng(300 + r);
                    let mut last = vec![0u64; KEYS as usize];
                    while !done.load(Ordering::Acquire) {
                        for _ in 0..1_000 {
                            let k = rng.below(KEYS);
                            let key = key_of(k);
                            let got = all(&idx, &key);
                            let n = got.len() as u64;
                            let expect: Vec<u64> = (0..n).rev().map(|i| tid_of(k, i)).collect();
                            assert_eq!(got, expect, "key {k}: not a prefix");
                            assert!(n >= last[k as usize], "key {k}: went back");
                            last[k as usize] = n;
                            let g = idx.get(&key);
                            match g {
                                None => assert_eq!(n, 0),
                                Some(t) => {
                                    let i = t & !(1 << 50);
                                    assert!(i + 1 >= n && tid_of(k, i) == t, "key {k}: get {t}");
                                }
                            }
                        }
                    }
                })
            })
            .collect();
        let writers: Vec<_> = (0..WRITERS)
            .map(|w| {
                let idx = Arc::clone(&idx);
                std::thread::spawn(move || {
                    for i in 0..TIDS {
                        for k in (w..KEYS).step_by(WRITERS as usize) {
                            assert!(idx.insert(&key_of(k), tid_of(k, i)));
                            // Unrelated fill to force resizes.
                            let fill = (w << 40) | (i << 20) | k;
                            assert!(idx.insert(&fill.to_le_bytes(), fill));
                        }
                    }
                })
            })
            .collect();
        for h in writers {
            h.join().expect("writer thread panicked");
        }
        done.store(true, Ordering::Release);
        for h in readers {
            h.join().expect("reader thread panicked");
        }
        for k in 0..KEYS {
            let expect: Vec<u64> = (0..TIDS).rev().map(|i| tid_of(k, i)).collect();
            assert_eq!(all(&idx, &key_of(k)), expect);
        }
        assert_eq!(idx.len() as u64, 2 * KEYS * TIDS);
        check_structure(&idx);
    }
}
