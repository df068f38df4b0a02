//! Concurrent hash index with a version word per bucket.
//!
//! [`HashIndex`] maps byte-string keys to `u64` tuple ids (tids). It serves
//! both primary keys ([`HashIndex::insert_unique`]: at most one entry per key)
//! and hash secondary indexes ([`HashIndex::insert`]: a multimap that keeps
//! each distinct `(key, tid)` pair once).
//!
//! # Why it is hand-written
//!
//! Single-version concurrency-control protocols (OCC in the Silo style, and
//! friends) need phantom protection for point lookups: a transaction that
//! looked a key up — and in particular found nothing — must be able to check
//! at commit time that no entry was inserted into the place it looked. Each
//! bucket here therefore carries a *version word*: [`HashIndex::bucket_version`]
//! reads it before the lookup and [`HashIndex::validate`] checks at commit
//! that neither the bucket nor the bucket array changed since. No published
//! concurrent map crate exposes such a per-bucket version, so the structure is
//! written here, in full, with the invariants it relies on spelled out.
//!
//! # Layout
//!
//! * A *table* is a power-of-two array of buckets. Each bucket is
//!   `{ version word: AtomicU64, head: AtomicPtr<Entry> }` and heads a
//!   singly-linked chain of entries, newest first.
//! * An entry holds the full 64-bit hash, the tid, the key length and the key
//!   bytes — inline when the key is at most [`INLINE_KEY`] (24) bytes, so the
//!   common entry is exactly one 64-byte, line-aligned cache line; longer keys
//!   live in a separate heap copy. Lookups compare the hash first, then the
//!   bytes, and neither allocate nor write shared memory.
//! * Entry memory belongs to a table: each table has [`STRIPES`] bump
//!   allocators ("arenas", chosen by hash bits, each behind a tiny spin lock)
//!   over slabs of 8..4096 entries, so an insert costs no `malloc` (except
//!   the copy of a long key) and a table's entries are freed wholesale.
//! * The current table is published through a `crossbeam_epoch::Atomic`; every
//!   public call pins the epoch exactly once.
//!
//! # Phantom validation
//!
//! A point lookup is protected by `let v = idx.bucket_version(key);` *before*
//! `idx.get(key)` / `idx.for_each(key, ..)`, and `idx.validate(v)` at commit.
//! `validate` is true iff the same table is current and the bucket's word is
//! bit-for-bit unchanged: no insert into the bucket (of any key) and no resize
//! since. A version read while an insert held the bucket lock, or while the
//! bucket was being migrated, never validates (conservative: the insert may
//! or may not have been visible to the lookup).
//!
//! # Version word
//!
//! Bit 0 is the writer lock, bit 1 marks the bucket *retired* (its table is
//! being, or has been, replaced by a resize), bits 2.. count inserts. A writer
//! locks the bucket with a CAS (spinning with `crossbeam_utils::Backoff`, never
//! parking), scans the chain for the key, pushes the new entry at the head and
//! stores `old + VERSION_STEP`, which unlocks and bumps the count in one
//! release store. A writer that finds nothing to insert restores the old word,
//! so failed inserts do not disturb validation.
//!
//! # Growth
//!
//! When the entry count exceeds twice the bucket count, one writer (elected by
//! the `resizing` flag) builds a table with twice the buckets. It walks the old
//! buckets one at a time: lock the bucket, copy its chain (order preserved)
//! into the two new buckets it splits into, then leave the old bucket locked
//! *and* retired for good. Writers to not-yet-migrated buckets keep inserting
//! into the old table (their entries are migrated later); a writer that meets
//! a retired bucket reloads the table pointer and retries, so after the new
//! table is published every writer lands in it. Old chains are never modified,
//! so readers still walking the old table stay correct. The old table is freed
//! through `crossbeam_epoch` once no pinned thread can see it.
//!
//! # Invariants this module owns
//!
//! 1. An entry is immutable once published (its `next` is written only while
//!    it is private: before the head store that publishes it, or before the
//!    table it was copied into is published).
//! 2. A chain only grows at its head, and only under the bucket lock; a
//!    retired bucket is never unlocked again.
//! 3. Every entry of a retired table has a copy in its successor table: a
//!    bucket is migrated under its lock and is retired in the same critical
//!    section, so no insert can slip into it afterwards.
//! 4. Hence at any moment the current table holds (or will hold, once the
//!    running resize publishes it) every entry ever inserted, and uniqueness
//!    checked under one bucket lock is uniqueness across the whole index.
//! 5. Heap key copies are *moved* on resize: the entries of the newest table
//!    own them; a retired table frees only its own entry memory. Entries and
//!    keys are never removed before the index is dropped.
//! 6. `BucketVersion` generations are unique process-wide, so a version can
//!    never validate against a different table (or a different index).
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
//! * No removal: entries (and their memory) live until the index is dropped.
//! * The multimap keeps one flat entry per `(key, tid)`: a key with many tids
//!   makes a long chain, so inserting under it (which must check the exact
//!   pair) costs time linear in its tid count.
//! * Resizing blocks writers that hit already-migrated buckets until the new
//!   table is published (they spin/yield; readers are never blocked).
//! * The hash is unseeded (deterministic), so it offers no resistance to
//!   hash flooding by adversarial keys.
//! * Fixed overhead per index of about 8 KiB (32 padded counters and 32
//!   padded arenas) plus at most one 512-byte slab per stripe while small.
//! * Validation is per bucket, so unrelated keys sharing a bucket cause
//!   false conflicts (at load factor <= 2 that is rare).
//! * `for_each` keeps the epoch pinned while it runs the callback, delaying
//!   reclamation of retired tables for that long.

use std::cell::UnsafeCell;
use std::fmt;
use std::mem;
use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicUsize, Ordering};

use crossbeam_epoch::{self as epoch, Atomic, Guard, Owned, Shared};
use crossbeam_utils::{Backoff, CachePadded};

/// Keys up to this many bytes are stored inside the entry.
pub const INLINE_KEY: usize = 24;

/// Number of stripes (power of two) for the entry counters and the per-table
/// entry arenas; a key's stripe is the top bits of its hash.
pub const STRIPES: usize = 32;

/// Smallest bucket count.
const MIN_BUCKETS: usize = 16;

/// Largest bucket count `new` derives from a hint; the table still grows past
/// it on demand.
const MAX_INITIAL_BUCKETS: usize = 1 << 26;

/// Version-word bit: a writer (or the resizer) holds the bucket.
const LOCK: u64 = 1;
/// Version-word bit: the bucket's table has been (or is being) replaced.
const RETIRED: u64 = 2;
/// Added to the version word by each insert.
const VERSION_STEP: u64 = 4;

/// Slab capacity bounds (entries); each stripe's slabs double in size from
/// its first one up to `MAX_SLAB` (256 KiB).
const MIN_SLAB: usize = 8;
const MAX_SLAB: usize = 1 << 12;

/// Process-wide source of table generations (invariant 6).
static NEXT_GENERATION: AtomicU64 = AtomicU64::new(1);

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

/// One `(key, tid)` pair, 64 bytes and cache-line aligned. Immutable once
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
// Tables
// ---------------------------------------------------------------------------

#[repr(C, align(16))]
struct Bucket {
    version: AtomicU64,
    head: AtomicPtr<Entry>,
}

struct Table {
    generation: u64,
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

impl Table {
    /// A table of `buckets` buckets expecting about `entries` entries.
    fn new(buckets: usize, entries: usize) -> Table {
        debug_assert!(buckets.is_power_of_two());
        let buckets: Box<[Bucket]> = (0..buckets)
            .map(|_| Bucket {
                version: AtomicU64::new(0),
                head: AtomicPtr::new(ptr::null_mut()),
            })
            .collect();
        let per_stripe = entries / STRIPES;
        Table {
            generation: NEXT_GENERATION.fetch_add(1, Ordering::Relaxed),
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

// ---------------------------------------------------------------------------
// Public API
// ---------------------------------------------------------------------------

/// Identifies one bucket of one table and its version at the time it was read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BucketVersion {
    generation: u64,
    index: usize,
    word: u64,
}

/// A concurrent hash index from byte-string keys to `u64` tids; see the
/// module documentation.
pub struct HashIndex {
    table: Atomic<Table>,
    counts: Box<[CachePadded<AtomicUsize>]>,
    resizing: AtomicBool,
}

enum Mode {
    Unique,
    Multi,
}

impl HashIndex {
    /// Creates an index for about `capacity_hint` entries: the bucket count is
    /// the next power of two `>= capacity_hint` (at least 16; hints above
    /// 2^26 are clamped, the index still grows on demand).
    pub fn new(capacity_hint: usize) -> Self {
        let buckets = capacity_hint
            .clamp(MIN_BUCKETS, MAX_INITIAL_BUCKETS)
            .next_power_of_two();
        HashIndex {
            table: Atomic::new(Table::new(buckets, capacity_hint)),
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
    /// (nothing is changed then).
    pub fn insert_unique(&self, key: &[u8], tid: u64) -> Result<(), u64> {
        self.insert_impl(key, tid, Mode::Unique)
    }

    /// Multimap insert: adds `(key, tid)` unless that exact pair exists;
    /// returns whether it was added.
    pub fn insert(&self, key: &[u8], tid: u64) -> bool {
        self.insert_impl(key, tid, Mode::Multi).is_ok()
    }

    /// The first tid found under `key`: for a unique index the only one, for
    /// a multimap the most recently inserted one.
    /// Replaced by the bucket prefetch of the next hash-index revision.
    pub fn prefetch(&self, _key: &[u8]) {}

    pub fn get(&self, key: &[u8]) -> Option<u64> {
        let hash = Self::hash_key(key);
        let guard = epoch::pin();
        let table = Self::current(&self.table, &guard);
        let mut p = table.bucket(hash).head.load(Ordering::Acquire);
        while !p.is_null() {
            // SAFETY: chain entries are live while `guard` pins the epoch
            // (their table is freed only after it is unreachable and every
            // pinned thread has moved on) and immutable once published.
            let e = unsafe { &*p };
            if e.matches(hash, key) {
                return Some(e.tid);
            }
            p = e.next;
        }
        None
    }

    /// Calls `f` with every tid stored under `key` (newest first) until it
    /// returns `false`.
    pub fn for_each(&self, key: &[u8], f: &mut dyn FnMut(u64) -> bool) {
        let hash = Self::hash_key(key);
        let guard = epoch::pin();
        let table = Self::current(&self.table, &guard);
        let mut p = table.bucket(hash).head.load(Ordering::Acquire);
        while !p.is_null() {
            // SAFETY: as in `get`.
            let e = unsafe { &*p };
            if e.matches(hash, key) && !f(e.tid) {
                return;
            }
            p = e.next;
        }
    }

    /// The version of the bucket `key` maps to. Read it *before* the lookup
    /// it protects; [`validate`](Self::validate) later tells whether the
    /// bucket is unchanged.
    pub fn bucket_version(&self, key: &[u8]) -> BucketVersion {
        let hash = Self::hash_key(key);
        let guard = epoch::pin();
        let table = Self::current(&self.table, &guard);
        let index = (hash as usize) & table.mask;
        BucketVersion {
            generation: table.generation,
            index,
            word: table.buckets[index].version.load(Ordering::Acquire),
        }
    }

    /// True iff the bucket is unchanged since `v` was read: no insert into it
    /// and no resize. A version read while the bucket was locked (an insert in
    /// flight) or being migrated never validates.
    pub fn validate(&self, v: BucketVersion) -> bool {
        if v.word & (LOCK | RETIRED) != 0 {
            return false;
        }
        let guard = epoch::pin();
        let table = Self::current(&self.table, &guard);
        if table.generation != v.generation {
            return false;
        }
        match table.buckets.get(v.index) {
            Some(b) => b.version.load(Ordering::Acquire) == v.word,
            None => false,
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
        // Copy a long key before locking to keep the critical section short.
        let bytes = KeyBytes::copy_of(key);
        let guard = epoch::pin();
        let backoff = Backoff::new();
        let (table, bucket, word) = loop {
            let table = Self::current(&self.table, &guard);
            let bucket = table.bucket(hash);
            let word = bucket.version.load(Ordering::Relaxed);
            if word & (LOCK | RETIRED) != 0 {
                // Locked by a writer or the resizer, or retired: in the last
                // case the reload above eventually yields the new table.
                backoff.snooze();
                continue;
            }
            if bucket
                .version
                .compare_exchange_weak(word, word | LOCK, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
            {
                break (table, bucket, word);
            }
            backoff.spin();
        };
        // Locked: the chain cannot change under us.
        let head = bucket.head.load(Ordering::Acquire);
        let mut p = head;
        while !p.is_null() {
            // SAFETY: as in `get`.
            let e = unsafe { &*p };
            let conflict = match mode {
                Mode::Unique => e.matches(hash, key),
                Mode::Multi => e.tid == tid && e.matches(hash, key),
            };
            if conflict {
                let existing = e.tid;
                bucket.version.store(word, Ordering::Release);
                // SAFETY: `bytes` was never published; we own the copy.
                unsafe { bytes.free(key.len()) };
                return Err(existing);
            }
            p = e.next;
        }
        // The entry is complete (including `next`) before the release store
        // that publishes it (invariant 1). It is allocated from the locked
        // table's arena, so it lives exactly as long as that table.
        let stripe = stripe_of(hash);
        let entry = table.arenas[stripe].alloc(Entry {
            hash,
            tid,
            next: head,
            len: key.len(),
            key: bytes,
        });
        bucket.head.store(entry, Ordering::Release);
        // Unlock and bump the version in one store (`word` has no LOCK bit).
        bucket.version.store(word + VERSION_STEP, Ordering::Release);

        let c = self.counts[stripe].fetch_add(1, Ordering::Relaxed) + 1;
        let buckets = table.buckets.len();
        if c.saturating_mul(STRIPES) > buckets.saturating_mul(2) {
            self.maybe_grow(&guard);
        }
        Ok(())
    }

    /// Doubles the table if the index holds more than twice as many entries
    /// as buckets and no other thread is already resizing.
    #[cold]
    fn maybe_grow(&self, guard: &Guard) {
        if self.resizing.load(Ordering::Relaxed) {
            return;
        }
        let old_shared = self.table.load(Ordering::Acquire, guard);
        // SAFETY: see `current`.
        let old = unsafe { old_shared.as_ref() }.expect("hash index: table pointer is never null");
        if self.len() <= old.buckets.len().saturating_mul(2) {
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
                if len > old_n.saturating_mul(2)
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
        let backoff = Backoff::new();
        for (i, ob) in old.buckets.iter().enumerate() {
            // Lock the old bucket.
            let word = loop {
                let w = ob.version.load(Ordering::Relaxed);
                assert!(
                    w & RETIRED == 0,
                    "hash index: bucket of the current table is already retired"
                );
                if w & LOCK == 0
                    && ob
                        .version
                        .compare_exchange_weak(w, w | LOCK, Ordering::Acquire, Ordering::Relaxed)
                        .is_ok()
                {
                    backoff.reset();
                    break w;
                }
                backoff.snooze();
            };
            // Split the chain into new buckets i and i + old_n, keeping order.
            let mut tails: [*mut Entry; 2] = [ptr::null_mut(); 2];
            let mut p = ob.head.load(Ordering::Acquire);
            while !p.is_null() {
                // SAFETY: as in `get`; the bucket is locked, so stable.
                let e = unsafe { &*p };
                let half = usize::from((e.hash as usize) & old_n != 0);
                debug_assert_eq!((e.hash as usize) & (old_n - 1), i);
                // The key bytes are copied bitwise: inline bytes by value, a
                // heap key by pointer, whose ownership moves to `new`
                // (invariant 5).
                let copy = new.arenas[stripe_of(e.hash)].list.get_mut().alloc(Entry {
                    hash: e.hash,
                    tid: e.tid,
                    next: ptr::null_mut(),
                    len: e.len,
                    key: e.key,
                });
                if tails[half].is_null() {
                    *new.buckets[i + half * old_n].head.get_mut() = copy;
                } else {
                    // SAFETY: `tails[half]` is a private entry of `new`,
                    // which is not yet published.
                    unsafe { (*tails[half]).next = copy };
                }
                tails[half] = copy;
                p = e.next;
            }
            // Retire for good: never unlocked again (invariant 2/3).
            ob.version
                .store((word + VERSION_STEP) | LOCK | RETIRED, Ordering::Release);
        }
        old.keys_moved.store(true, Ordering::Relaxed);
        self.table.store(Owned::new(new), Ordering::Release);
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
        assert_eq!(mem::size_of::<Bucket>(), 16);
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
        assert_eq!(HashIndex::new(17).bucket_count(), 32);
        assert_eq!(HashIndex::new(1024).bucket_count(), 1024);
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
        // Both storage paths and the inline/heap boundary are exercised.
        for len in [0usize, 1, 23, 24, 25, 63] {
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

    /// Finds a key (distinct from `avoid`) whose bucket is (or is not) the
    /// bucket of `of` for the index's current bucket count.
    fn key_in_bucket(idx: &HashIndex, of: &[u8], same: bool, avoid: &[&[u8]]) -> Vec<u8> {
        let mask = (idx.bucket_count() - 1) as u64;
        let target = HashIndex::hash_key(of) & mask;
        (0u64..)
            .map(|i| format!("probe-{i}").into_bytes())
            .find(|k| {
                ((HashIndex::hash_key(k) & mask) == target) == same
                    && !avoid.contains(&k.as_slice())
            })
            .expect("some probe key lands in the bucket")
    }

    #[test]
    fn bucket_version_validates_per_bucket() {
        let idx = HashIndex::new(1024);
        let a = b"alpha".to_vec();
        assert!(idx.insert_unique(&a, 1).is_ok());
        let v = idx.bucket_version(&a);
        assert!(idx.validate(v));
        assert_eq!(v, idx.bucket_version(&a));

        // Insert into a different bucket: still valid (no resize happens).
        let other = key_in_bucket(&idx, &a, false, &[&a]);
        assert!(idx.insert_unique(&other, 2).is_ok());
        assert!(idx.validate(v));
        // Failed inserts change nothing.
        assert_eq!(idx.insert_unique(&a, 3), Err(1));
        assert!(!idx.insert(&a, 1));
        assert!(idx.validate(v));

        // Insert into the same bucket (another key): invalid.
        let same = key_in_bucket(&idx, &a, true, &[&a]);
        let before = idx.bucket_count();
        assert!(idx.insert_unique(&same, 4).is_ok());
        assert_eq!(idx.bucket_count(), before);
        assert!(!idx.validate(v));
        // A fresh version validates again; a version of a missing key too.
        let v2 = idx.bucket_version(&a);
        assert!(idx.validate(v2));
        assert_ne!(v, v2);
        let missing = idx.bucket_version(b"never inserted");
        assert!(idx.validate(missing));
        // Versions of another index never validate here.
        let other_idx = HashIndex::new(1024);
        assert!(!other_idx.validate(v2));
    }

    #[test]
    fn validate_false_after_resize() {
        let idx = HashIndex::new(16);
        let k = b"watched".to_vec();
        let v = idx.bucket_version(&k);
        let mut i = 0u64;
        while idx.bucket_count() == 16 {
            let key = key_in_bucket_n(&idx, &k, i);
            assert!(idx.insert_unique(&key, i).is_ok());
            i += 1;
        }
        assert!(!idx.validate(v));
        assert!(idx.validate(idx.bucket_version(&k)));
    }

    /// The i-th probe key that avoids the bucket of `of` (16-bucket table),
    /// so only the resize can invalidate the watched bucket.
    fn key_in_bucket_n(idx: &HashIndex, of: &[u8], i: u64) -> Vec<u8> {
        let mask = (idx.bucket_count() - 1) as u64;
        let target = HashIndex::hash_key(of) & mask;
        (i * 1000..)
            .map(|j| format!("fill-{j}").into_bytes())
            .find(|k| HashIndex::hash_key(k) & mask != target)
            .expect("some key avoids the bucket")
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
}
