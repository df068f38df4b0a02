//! Optimistic-lock-coupling (OLC) B+tree: Myriad's ordered index for primary and
//! secondary keys.
//!
//! # What it is
//!
//! A concurrent B+tree in the style of Leis et al., "The ART of practical
//! synchronization" (optimistic lock coupling). Keys are arbitrary byte strings
//! ordered lexicographically (memcmp order); values are `u64` (in Myriad, a
//! pointer-sized handle to a record's version chain).
//!
//! * Every node carries a version word: bit 0 = obsolete (reserved; never set,
//!   because nothing is ever removed), bit 1 = locked, the remaining bits a counter.
//!   A writer locks a node by CAS-ing the word from an unlocked value `v` to `v + 2`
//!   and unlocks with `+ 2`, so every write critical section moves the counter.
//! * Readers never write shared memory: they read a node's version, read the node's
//!   fields, and re-check the version (restarting on a change). On the way down
//!   they validate the parent *after* reading the child's version, so a child that
//!   split in between is noticed.
//! * Writers descend optimistically too and take write locks only on the nodes they
//!   change (the leaf, or the node being split plus its parent). Full inner nodes
//!   are split eagerly on the way down, so a parent always has room for the
//!   separator of a splitting child. Conflicts restart the operation from the root,
//!   spinning with `crossbeam_utils::Backoff`.
//! * Leaves form a right-linked list (`next`), and each leaf records its immutable
//!   lower fence key, so ascending scans walk the chain (B-link style: a split only
//!   ever moves the upper half of a node into a *new* right sibling) and descending
//!   scans re-descend from the root to the leaf just below the previous leaf's fence.
//!   Each leaf also keeps its upper fence (the B-link high key: its right sibling's fence),
//!   with the inline comparison data below.
//! * Runs of inserts skip the descent. A tree keeps insert hints: per hash of a key without
//!   its last 8 bytes (`hint_slot`), the leaf the last descending insert of such a key went
//!   to. An insert first tries that leaf: if it is not full, its first key is at or below
//!   the new key and its upper fence above it, the key goes there (`BTree::try_hinted`),
//!   validated by locking the leaf at the version those reads saw; otherwise it descends as
//!   usual. Keys that grow in their last component (TPC-C's order ids per district) take
//!   this path until their leaf fills. A run that fills its hinted leaf (the insert lands
//!   right after the leaf's latest one) splits it where it inserts rather than in the
//!   middle, so the leaves it passes stay full instead of half empty for good.
//! * Nodes are 32-entry leaves and 64-key inner nodes. Next to each key pointer a
//!   node keeps an 8-byte prefix of the key and whether that prefix holds all of it
//!   (`prefix_of`: the first 8 bytes, or in a tree of keys that start with integers a
//!   compact code of those integers), so a binary search compares almost every key
//!   without touching the key block (only keys with equal prefixes that do not both hold
//!   their whole key need their bytes).
//! * Lock and unlock of a node are `SeqCst` read-modify-writes.
//!
//! # Why it is hand-written
//!
//! For the node layout above (compact integer prefixes beside the key pointers, so
//! composite integer keys compare inside the node) and for the removable variant's
//! epoch-deferred key frees (invariant 1). The node version words serve the tree's
//! own optimistic reads, and a scan can hand the leaves it read with their versions to
//! the transaction layer (`scan_stamped`, `NodeStamp`: Silo's node set, which the
//! single-version protocols' phantom check tries before a re-scan, `cc/silo.rs`).
//!
//! # Invariants this module owns
//!
//! 1. **Nothing is freed before `Drop`,** in a tree made by [`BTree::new`]. No node and
//!    no key block is ever released while the tree is alive (there are no deletes, and a
//!    split keeps the old node as the left half). This is what makes optimistic reads of
//!    pointers that a writer just moved memory-safe without epochs or hazard pointers.
//!    A tree made by [`BTree::removable`] (Myriad's index pointers `physical`, whose
//!    entries come and go with versions) also has [`BTree::remove`]: nodes are still never
//!    freed (a leaf may become empty), but a removed entry's key block is, through
//!    `crossbeam-epoch`: every operation of a removable tree runs pinned, and the block's
//!    free is deferred until every thread pinned at the removal has unpinned. So that no
//!    node borrows an entry's block, a removable tree's leaf split copies the separator
//!    into a block of its own, the new right leaf's fence, freed with that leaf at `Drop`.
//! 2. **Readers only perform tear-free reads.** Every node field an optimistic
//!    reader touches is an atomic. A key is reached through ONE word: a thin pointer
//!    to a heap block `[len: usize][bytes]` that is written once before it is
//!    published (Release store / Acquire load) and never mutated afterwards. Every
//!    optimistically read count is clamped before it is used as an index, and null
//!    pointers seen during a torn read are tolerated (then the version check fails).
//! 3. **Every change to a node moves its version.** Inserting into a leaf, removing from
//!    it and splitting a node all happen under the node's write lock, whose unlock bumps
//!    the counter, so an optimistic reader that read the node before the change fails
//!    its version check and restarts.
//! 4. **Structure.** Keys are strictly increasing within a node; an inner node with
//!    `n` keys has `n + 1` children and child `i` holds keys in `[key[i-1], key[i])`;
//!    all leaves are at the same depth; leaf `L`'s range is `[L.fence, L.next.fence)`
//!    (the leftmost leaf has a null fence, the rightmost a null `next`), and `L.high` is
//!    `L.next.fence` (both change together, under `L`'s lock, when it splits); a leaf's
//!    fence never changes after creation, and a leaf's range only shrinks (from the
//!    right) when it splits. Key blocks are owned by exactly one leaf slot within
//!    `0..count`; inner separators, fences and upper fences only borrow them (in a
//!    removable tree they borrow the fence copies of invariant 1 instead).
//!
//! Keys are meant to be 0..=4096 bytes long (the tree itself works for any length).
//! Values and keys of a present entry never change: `insert` of a present key
//! returns the existing value and changes nothing. Memory is only returned when the
//! tree is dropped. `len()` is a relaxed counter bumped after each insert returns
//! its leaf lock, so under concurrency it may briefly lag.

use std::alloc::{self, Layout};
use std::cmp::Ordering as CmpOrdering;
use std::fmt;
use std::mem::{align_of, size_of};
use std::ops::Bound;
use std::ptr;
use std::sync::atomic::{fence, AtomicPtr, AtomicU64, AtomicU8, AtomicUsize, Ordering};

use crossbeam_utils::{Backoff, CachePadded};

/// Maximum number of entries in a leaf.
const LEAF_CAP: usize = 32;
/// Maximum number of separator keys in an inner node (children = keys + 1).
const INNER_CAP: usize = 64;

/// Version-word bit: node retired (reserved; this tree never retires nodes).
const OBSOLETE: u64 = 0b01;
/// Version-word bit: a writer holds the node's lock.
const LOCKED: u64 = 0b10;

// ---------------------------------------------------------------------------
// Key blocks
// ---------------------------------------------------------------------------

/// Header of an immutable heap key block; `len` key bytes follow it directly.
#[repr(C)]
struct KeyBlock {
    len: usize,
}

const KEY_HDR: usize = size_of::<KeyBlock>();

fn key_layout(len: usize) -> Layout {
    match KEY_HDR
        .checked_add(len)
        .and_then(|size| Layout::from_size_align(size, align_of::<KeyBlock>()).ok())
    {
        Some(layout) => layout,
        None => panic!("key of {len} bytes is too large to allocate"),
    }
}

/// Allocates and fills a key block. The block is not yet published.
fn alloc_key(key: &[u8]) -> *mut KeyBlock {
    let layout = key_layout(key.len());
    // SAFETY: the layout has non-zero size (at least the header).
    let p = unsafe { alloc::alloc(layout) }.cast::<KeyBlock>();
    if p.is_null() {
        alloc::handle_alloc_error(layout);
    }
    // SAFETY: `p` is a fresh allocation of KEY_HDR + key.len() bytes, aligned for
    // KeyBlock; the byte area starts right after the header.
    unsafe {
        ptr::write(p, KeyBlock { len: key.len() });
        ptr::copy_nonoverlapping(key.as_ptr(), p.cast::<u8>().add(KEY_HDR), key.len());
    }
    p
}

/// Bytes of a key block; a null pointer (only seen by a torn optimistic read,
/// which will fail validation) reads as the empty key.
///
/// # Safety
/// `p` must be null or a key block of a live tree, and `'t` must not outlive it.
#[inline]
unsafe fn key_bytes<'t>(p: *const KeyBlock) -> &'t [u8] {
    if p.is_null() {
        return &[];
    }
    let len = (*p).len;
    std::slice::from_raw_parts(p.cast::<u8>().add(KEY_HDR), len)
}

/// # Safety
/// `p` must come from [`alloc_key`] and must not be used afterwards.
unsafe fn free_key(p: *mut KeyBlock) {
    let layout = key_layout((*p).len);
    alloc::dealloc(p.cast::<u8>(), layout);
}

/// `short` of a key its prefix does not determine: with equal prefixes, such a key is
/// compared by its bytes (raw prefixes use lengths up to 8, compact ones up to 64 bits).
const INEXACT: u8 = u8::MAX;

/// The inline comparison data of `key` in a tree whose keys start with `ints` integer
/// components (`BTree::with_int_components`): its prefix, a `u64` whose order is never
/// against the keys' memcmp order (if two prefixes differ, the keys differ the same way),
/// and `short`, the length of the key's code if the prefix holds all of it, else
/// `INEXACT`.
///
/// `ints == 0` (raw): the first 8 bytes, big-endian and zero-padded, and the byte length up
/// to 8. Otherwise (compact): the key's first `ints` 8-byte components are integers
/// (`schema::encode_int`: sign bit flipped, big-endian), so a raw prefix of a key of small
/// integers such as TPC-C's ORDER_LINE (w, d, o, n) would hold just `w`, and every binary
/// search step would read a key block (a cache miss). Each is coded instead as a 4-bit
/// length code and that many nibbles (1 and 10 in 8 bits, 3,000 in 16; codes order the
/// values, so the bit string sorts as the keys do), the rest of the key follows as raw bytes,
/// and the prefix is the first 64 bits of that string; `short` its length in bits.
/// (1, 5, 3000, 7) takes 40 bits. A negative or ≥ 2^52 component, or a key that ends
/// inside a component (`prefix_end`'s bounds), stops the code there: still ordered, not
/// exact.
#[inline]
fn prefix_of(key: &[u8], ints: u8) -> (u64, u8) {
    if ints == 0 {
        let mut b = [0u8; 8];
        let n = key.len().min(8);
        b[..n].copy_from_slice(&key[..n]);
        let short = if key.len() <= 8 {
            key.len() as u8
        } else {
            INEXACT
        };
        return (u64::from_be_bytes(b), short);
    }
    let mut bits = Bits { acc: 0, used: 0 };
    let mut rest = key;
    for _ in 0..ints {
        if rest.len() < 8 {
            if rest.is_empty() {
                return (bits.acc, bits.used as u8);
            }
            // Ends inside the component: zero-padded, it sorts at or below every key that
            // starts with it, and not exact.
            let mut b = [0u8; 8];
            b[..rest.len()].copy_from_slice(rest);
            bits.int(u64::from_be_bytes(b));
            return (bits.acc, INEXACT);
        }
        let (c, r) = rest.split_at(8);
        let mut b = [0u8; 8];
        b.copy_from_slice(c);
        if !bits.int(u64::from_be_bytes(b)) {
            return (bits.acc, INEXACT);
        }
        rest = r;
    }
    for &b in rest {
        if !bits.push(b as u64, 8) {
            return (bits.acc, INEXACT);
        }
    }
    (bits.acc, bits.used as u8)
}

/// The compact prefix under construction: `used` bits from the top of `acc`.
struct Bits {
    acc: u64,
    used: u32,
}

impl Bits {
    /// Appends the low `n` (≤ 64) bits of `x`; false if they did not all fit (the top ones
    /// that did are in).
    #[inline]
    fn push(&mut self, x: u64, n: u32) -> bool {
        let free = 64 - self.used;
        if n <= free {
            if n > 0 {
                self.acc |= x << (free - n);
            }
            self.used += n;
            true
        } else {
            if free > 0 {
                self.acc |= x >> (n - free);
            }
            self.used = 64;
            false
        }
    }

    /// Appends the code of an encoded integer component `u`: length code 0 for a negative
    /// value (and the code stops), 1 + nibbles for 0 ≤ v < 2^52 followed by the nibbles,
    /// 15 for larger values (and the code stops). False if the code stopped or ran out of
    /// bits.
    #[inline]
    fn int(&mut self, u: u64) -> bool {
        if u < 1 << 63 {
            self.push(0, 4);
            return false;
        }
        let v = u - (1 << 63);
        let nibbles = (64 - v.leading_zeros()).div_ceil(4);
        if nibbles > 13 {
            self.push(15, 4);
            return false;
        }
        // The length code and the nibbles as one push (at most 56 bits): the same bits as
        // pushing the code, then the nibbles, and true only if both fit.
        self.push(((nibbles as u64 + 1) << (4 * nibbles)) | v, 4 + 4 * nibbles)
    }
}

/// A search key with its inline comparison data precomputed.
#[derive(Clone, Copy)]
struct Probe<'k> {
    key: &'k [u8],
    prefix: u64,
    short: u8,
    /// A raw-prefix tree (`ints == 0`): there, a key its prefix holds whole and one it
    /// does not, with equal prefixes, order by length (the whole one is a prefix of the
    /// other), with no key block read. Not so in a compact tree: a bound that ends inside
    /// an integer can share its prefix with a whole key it sorts below.
    raw: bool,
}

impl<'k> Probe<'k> {
    #[inline]
    fn new(key: &'k [u8], ints: u8) -> Self {
        let (prefix, short) = prefix_of(key, ints);
        Probe {
            key,
            prefix,
            short,
            raw: ints == 0,
        }
    }
}

/// A separator on its way up after a split.
struct Sep {
    key: *mut KeyBlock,
    prefix: u64,
    short: u8,
    right: *mut Header,
}

// ---------------------------------------------------------------------------
// Nodes
// ---------------------------------------------------------------------------

/// Common node header; first field of both node kinds (`repr(C)`).
#[repr(C)]
struct Header {
    version: AtomicU64,
    /// Number of keys (leaf entries, or inner separators).
    count: AtomicUsize,
    /// Immutable after creation.
    is_leaf: bool,
}

impl Header {
    fn new(is_leaf: bool) -> Self {
        Header {
            version: AtomicU64::new(0),
            count: AtomicUsize::new(0),
            is_leaf,
        }
    }

    /// Waits until the node is unlocked and returns its version; `None` if obsolete.
    #[inline]
    fn stable_version(&self) -> Option<u64> {
        let backoff = Backoff::new();
        loop {
            let v = self.version.load(Ordering::Acquire);
            if v & OBSOLETE != 0 {
                return None;
            }
            if v & LOCKED == 0 {
                return Some(v);
            }
            backoff.snooze();
        }
    }

    /// True iff the version is still `v`: everything read since `v` was loaded is a
    /// consistent snapshot.
    #[inline]
    fn validate(&self, v: u64) -> bool {
        fence(Ordering::Acquire);
        self.version.load(Ordering::Relaxed) == v
    }

    /// Takes the write lock iff the version is still `v` (so everything read under
    /// `v` is still current).
    #[inline]
    fn try_upgrade(&self, v: u64) -> bool {
        if self
            .version
            .compare_exchange(v, v + LOCKED, Ordering::SeqCst, Ordering::Relaxed)
            .is_ok()
        {
            // Orders the lock before the data stores that follow (seqlock writer).
            fence(Ordering::Release);
            true
        } else {
            false
        }
    }

    /// Releases the write lock and advances the counter.
    #[inline]
    fn unlock(&self) {
        let prev = self.version.fetch_add(LOCKED, Ordering::SeqCst);
        debug_assert!(
            prev & LOCKED != 0,
            "invariant violated: unlocking a node that is not locked"
        );
    }
}

#[repr(C)]
struct Leaf {
    hdr: Header,
    /// Lower fence key (immutable; null for the leftmost leaf).
    fence: AtomicPtr<KeyBlock>,
    /// Right sibling, null for the rightmost leaf.
    next: AtomicPtr<Leaf>,
    /// Upper fence (the B-link high key): `next`'s fence, borrowed, null for the rightmost
    /// leaf, with its inline comparison data, so that a hinted insert (`BTree::try_hinted`)
    /// checks a key against the leaf's range without reading the sibling. Changes only when the
    /// leaf splits, under its lock.
    high: AtomicPtr<KeyBlock>,
    high_prefix: AtomicU64,
    high_short: AtomicU8,
    /// Position of the latest insert into this leaf (`u8::MAX`: none since it was made), so
    /// that a split can tell a run of inserts (each right after the one before) from keys
    /// in random order. Written under the lock; only a hint.
    last: AtomicU8,
    prefixes: [AtomicU64; LEAF_CAP],
    shorts: [AtomicU8; LEAF_CAP],
    keys: [AtomicPtr<KeyBlock>; LEAF_CAP],
    values: [AtomicU64; LEAF_CAP],
}

#[repr(C)]
struct Inner {
    hdr: Header,
    prefixes: [AtomicU64; INNER_CAP],
    shorts: [AtomicU8; INNER_CAP],
    keys: [AtomicPtr<KeyBlock>; INNER_CAP],
    children: [AtomicPtr<Header>; INNER_CAP + 1],
}

impl Leaf {
    /// A leaf with lower fence `fence`, right sibling `next` and upper fence `high` (key,
    /// prefix, short: `next`'s fence).
    fn boxed(fence: *mut KeyBlock, next: *mut Leaf, high: (*mut KeyBlock, u64, u8)) -> Box<Leaf> {
        Box::new(Leaf {
            hdr: Header::new(true),
            fence: AtomicPtr::new(fence),
            next: AtomicPtr::new(next),
            high: AtomicPtr::new(high.0),
            high_prefix: AtomicU64::new(high.1),
            high_short: AtomicU8::new(high.2),
            last: AtomicU8::new(u8::MAX),
            prefixes: [const { AtomicU64::new(0) }; LEAF_CAP],
            shorts: [const { AtomicU8::new(0) }; LEAF_CAP],
            keys: [const { AtomicPtr::new(ptr::null_mut()) }; LEAF_CAP],
            values: [const { AtomicU64::new(0) }; LEAF_CAP],
        })
    }
}

impl Inner {
    fn boxed() -> Box<Inner> {
        Box::new(Inner {
            hdr: Header::new(false),
            prefixes: [const { AtomicU64::new(0) }; INNER_CAP],
            shorts: [const { AtomicU8::new(0) }; INNER_CAP],
            keys: [const { AtomicPtr::new(ptr::null_mut()) }; INNER_CAP],
            children: [const { AtomicPtr::new(ptr::null_mut()) }; INNER_CAP + 1],
        })
    }
}

// SAFETY (for the three accessors below and all their call sites): node pointers
// only ever come from this tree's `root`, `children` and `next` fields. Nodes are
// freed only in `Drop`, which needs `&mut BTree`, so they outlive every `&BTree`
// borrow the references are tied to.

/// # Safety
/// `p` must be a non-null node of a live tree; `'t` must not outlive the tree.
#[inline]
unsafe fn node<'t>(p: *const Header) -> &'t Header {
    &*p
}

/// # Safety
/// As [`node`], and the node must be a leaf.
#[inline]
unsafe fn leaf<'t>(p: *const Header) -> &'t Leaf {
    debug_assert!(
        (*p).is_leaf,
        "invariant violated: leaf access to an inner node"
    );
    &*p.cast::<Leaf>()
}

/// # Safety
/// As [`node`], and the node must be an inner node.
#[inline]
unsafe fn inner<'t>(p: *const Header) -> &'t Inner {
    debug_assert!(!(*p).is_leaf, "invariant violated: inner access to a leaf");
    &*p.cast::<Inner>()
}

/// How the entry with inline data `prefix`, `short` and key block `key` orders against
/// `probe` (the entry's key compared with the probe's). On a torn read the answer is
/// garbage, and the caller's version check fails.
#[inline(always)]
fn cmp_entry(
    prefix: &AtomicU64,
    short: &AtomicU8,
    key: &AtomicPtr<KeyBlock>,
    probe: Probe<'_>,
) -> CmpOrdering {
    let p = prefix.load(Ordering::Relaxed);
    if p != probe.prefix {
        return p.cmp(&probe.prefix);
    }
    let sl = short.load(Ordering::Relaxed);
    let whole = (sl != INEXACT, probe.short != INEXACT);
    if whole == (true, true) || (probe.raw && whole != (false, false)) {
        // One code is a prefix of the other (equal prefixes, zero-padded): the
        // shorter key is (`Probe::raw` for the mixed case).
        sl.cmp(&probe.short)
    } else {
        let kb = key.load(Ordering::Acquire);
        // SAFETY: key blocks are never freed before the tree, or (removable trees) while
        // the caller is pinned (module invariant 1).
        unsafe { key_bytes(kb) }.cmp(probe.key)
    }
}

/// Binary search over the first `n` slots (`n` already clamped). Returns the
/// lower bound (first slot whose key is >= `key`) and whether that slot equals
/// `key`. On a torn read the answer is garbage but in `0..=n`.
#[inline]
fn search(
    prefixes: &[AtomicU64],
    shorts: &[AtomicU8],
    keys: &[AtomicPtr<KeyBlock>],
    n: usize,
    probe: Probe<'_>,
) -> (usize, bool) {
    let (mut lo, mut hi) = (0usize, n);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        match cmp_entry(&prefixes[mid], &shorts[mid], &keys[mid], probe) {
            CmpOrdering::Less => lo = mid + 1,
            CmpOrdering::Greater => hi = mid,
            CmpOrdering::Equal => return (mid, true),
        }
    }
    (lo, false)
}

/// Where a descent goes.
#[derive(Clone, Copy)]
enum Target<'k> {
    Leftmost,
    Rightmost,
    /// The leaf whose range contains the key.
    Le(Probe<'k>),
    /// The leaf whose range contains the keys just below the key.
    Lt(Probe<'k>),
}

/// Outcome of one optimistic insert attempt.
enum Step {
    Done(Result<(), u64>),
    /// A split made progress; retry at once.
    Retry,
    /// A concurrent writer interfered; back off and retry.
    Conflict,
}

/// Consistent copy of a leaf's entries.
struct LeafSnap {
    n: usize,
    keys: [*const KeyBlock; LEAF_CAP],
    values: [u64; LEAF_CAP],
    next: *const Leaf,
}

impl LeafSnap {
    fn new() -> Self {
        LeafSnap {
            n: 0,
            keys: [ptr::null(); LEAF_CAP],
            values: [0; LEAF_CAP],
            next: ptr::null(),
        }
    }

    /// Fills the snapshot from `leaf`, retrying until the copy validates; returns the leaf's
    /// version the copy validated at.
    fn read(&mut self, leaf: &Leaf) -> u64 {
        let backoff = Backoff::new();
        loop {
            let Some(v) = leaf.hdr.stable_version() else {
                panic!(
                    "invariant violated: a leaf is marked obsolete, but nodes are never retired"
                );
            };
            let n = leaf.hdr.count.load(Ordering::Relaxed).min(LEAF_CAP);
            for i in 0..n {
                self.keys[i] = leaf.keys[i].load(Ordering::Acquire);
                self.values[i] = leaf.values[i].load(Ordering::Relaxed);
            }
            self.next = leaf.next.load(Ordering::Acquire);
            if leaf.hdr.validate(v) {
                self.n = n;
                return v;
            }
            backoff.snooze();
        }
    }
}

/// A leaf a scan read and the version its copy validated at (`BTree::scan_stamped`): while
/// the leaf's version stays that, no entry entered or left it and its key range is the same
/// (every change to a leaf — insert, remove, split — moves its version, invariant 3; its
/// lower fence never changes and its upper one only by its own split). Silo's node set
/// (Tu et al., SOSP 2013, §4.6): a scan whose leaves all hold their stamps at commit saw
/// every entry its range holds then.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct NodeStamp {
    leaf: usize,
    version: u64,
}

/// Where a scan's leaf stamps go, if anywhere.
type Stamps<'a> = Option<&'a mut Vec<NodeStamp>>;

#[inline]
fn stamp(stamps: &mut Stamps<'_>, leaf: *const Leaf, version: u64) {
    if let Some(s) = stamps.as_deref_mut() {
        s.push(NodeStamp {
            leaf: leaf as usize,
            version,
        });
    }
}

/// Lower fence of a leaf that is some leaf's right sibling (so it has one).
///
/// # Safety
/// `p` must be a non-null leaf of a live tree; `'t` must not outlive it.
#[inline]
unsafe fn sibling_fence<'t>(p: *const Leaf) -> &'t [u8] {
    let f = (*p).fence.load(Ordering::Acquire);
    assert!(
        !f.is_null(),
        "invariant violated: a right sibling leaf has no lower fence"
    );
    key_bytes(f)
}

/// The first `i` in `0..n` for which `ok(i)` holds (`n` if none), for an `ok` that is false
/// then true over `0..n`. Index 0 first (a scan past its first leaf starts there), then a
/// binary search: a leaf's start used to be found by testing its keys one by one, half of
/// a 32-key leaf's key blocks loaded and compared per scan.
#[inline]
fn first_true(n: usize, ok: impl Fn(usize) -> bool) -> usize {
    if n == 0 || ok(0) {
        return 0;
    }
    let (mut a, mut b) = (1, n);
    while a < b {
        let m = a + (b - a) / 2;
        if ok(m) {
            b = m;
        } else {
            a = m + 1;
        }
    }
    a
}

/// `k` satisfies the lower bound.
#[inline]
fn above_lo(k: &[u8], lo: Bound<&[u8]>) -> bool {
    match lo {
        Bound::Unbounded => true,
        Bound::Included(l) => k >= l,
        Bound::Excluded(l) => k > l,
    }
}

/// `k` satisfies the upper bound.
#[inline]
fn below_hi(k: &[u8], hi: Bound<&[u8]>) -> bool {
    match hi {
        Bound::Unbounded => true,
        Bound::Included(h) => k <= h,
        Bound::Excluded(h) => k < h,
    }
}

/// True iff no byte string can satisfy both bounds in the obvious way
/// (`lo > hi`, or equal with an excluded end).
fn range_is_empty(lo: Bound<&[u8]>, hi: Bound<&[u8]>) -> bool {
    match (lo, hi) {
        (Bound::Included(a), Bound::Included(b)) => a > b,
        (Bound::Included(a), Bound::Excluded(b))
        | (Bound::Excluded(a), Bound::Included(b))
        | (Bound::Excluded(a), Bound::Excluded(b)) => a >= b,
        _ => false,
    }
}

// ---------------------------------------------------------------------------
// Public types
// ---------------------------------------------------------------------------

/// Direction of [`BTree::scan`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ScanDirection {
    /// From the lowest key in the range up.
    Ascending,
    /// From the highest key in the range down.
    Descending,
}

/// The insert-hint slot of `key`: a hash of the key without its last 8 bytes, so that
/// the keys of one ascending run whose last component grows (TPC-C's `(w, d, o)` of NEW_ORDER
/// and ORDERS, the lines of one order in ORDER_LINE) share a slot, and runs that differ
/// before it (other districts) mostly do not.
#[inline]
fn hint_slot(key: &[u8]) -> usize {
    const K: u64 = 0x9E37_79B9_7F4A_7C15;
    let stem = &key[..key.len().saturating_sub(8)];
    let mut h = 0u64;
    for c in stem.chunks(8) {
        let mut b = [0u8; 8];
        b[..c.len()].copy_from_slice(c);
        h = (h ^ u64::from_le_bytes(b)).wrapping_mul(K);
    }
    h = (h ^ (h >> 32)).wrapping_mul(K);
    (h >> (64 - HINTS.trailing_zeros())) as usize
}

/// Stripes of a tree's entry count.
const LEN_STRIPES: usize = 8;

/// This thread's stripe of every tree's entry count: threads numbered in order of first use.
fn len_stripe() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static STRIPE: usize = NEXT.fetch_add(1, Ordering::Relaxed) % LEN_STRIPES;
    }
    STRIPE.with(|s| *s)
}

/// One thread stripe of a tree's counters (`len_stripe`).
#[derive(Default)]
struct Stripe {
    /// Entries inserted less entries removed by the threads of this stripe.
    len: AtomicUsize,
    /// Inserts of those threads that went to their hint's leaf (`BTree::try_hinted`).
    hinted: AtomicUsize,
}

/// Slots of a tree's insert hints (`hint_slot`).
const HINTS: usize = 128;

/// A reader's hint for its next [`BTree::get_near`]: the tree and leaf its last descent
/// found. Held by the caller (never shared), for no longer than it borrows the tree.
pub struct GetHint<'t> {
    tree: *const BTree,
    leaf: *const Leaf,
    _tree: std::marker::PhantomData<&'t BTree>,
}

impl Default for GetHint<'_> {
    fn default() -> Self {
        GetHint {
            tree: ptr::null(),
            leaf: ptr::null(),
            _tree: std::marker::PhantomData,
        }
    }
}

/// Concurrent ordered map from byte-string keys to `u64` values (insert-only).
/// See the module documentation for the protocol and invariants.
pub struct BTree {
    root: AtomicPtr<Header>,
    /// Counters in stripes, each thread adding to its own (`len_stripe`): one shared
    /// entry count took a contended atomic add per insert when every worker inserts into
    /// the same tree (TPC-C's ORDER_LINE). The count is the wrapping sum of `len`.
    stripes: Box<[CachePadded<Stripe>; LEN_STRIPES]>,
    /// Insert hints: per slot, the leaf that the last descending insert of a key hashing
    /// there (`hint_slot`) went to, or null. Only a hint: `try_hinted` checks that the leaf
    /// still covers the key before using it. Any leaf of the tree may be named (leaves
    /// are never freed before `Drop`).
    hints: Box<[AtomicPtr<Leaf>; HINTS]>,
    /// Made by `removable`: entries can be removed (module invariant 1).
    removable: bool,
    /// Leading integer components of every key (`with_int_components`; `prefix_of`).
    ints: u8,
}

impl Default for BTree {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for BTree {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BTree").field("len", &self.len()).finish()
    }
}

impl BTree {
    /// An empty tree (a single empty leaf).
    pub fn new() -> Self {
        let root = Leaf::boxed(ptr::null_mut(), ptr::null_mut(), (ptr::null_mut(), 0, 0));
        BTree {
            root: AtomicPtr::new(Box::into_raw(root).cast::<Header>()),
            stripes: Box::new(std::array::from_fn(|_| CachePadded::default())),
            hints: Box::new([const { AtomicPtr::new(ptr::null_mut()) }; HINTS]),
            removable: false,
            ints: 0,
        }
    }

    /// This empty tree, for keys whose first `ints` 8-byte components are encoded integers
    /// (`schema::encode_int`), whatever follows; bounds may be any byte strings. Its nodes
    /// then keep compact prefixes (`prefix_of`), so that keys of several small integers
    /// compare without reading their key blocks.
    pub fn with_int_components(mut self, ints: u8) -> Self {
        debug_assert!(self.is_empty());
        self.ints = ints;
        self
    }

    #[inline]
    fn probe<'k>(&self, key: &'k [u8]) -> Probe<'k> {
        Probe::new(key, self.ints)
    }

    /// An empty tree whose entries [`remove`](Self::remove) can remove (module invariant
    /// 1): its operations pin the thread's `crossbeam-epoch` participant (cheap when the
    /// caller already is pinned) and its splits copy separators.
    pub fn removable() -> Self {
        let mut t = Self::new();
        t.removable = true;
        t
    }

    /// True if made by [`removable`](Self::removable).
    pub fn is_removable(&self) -> bool {
        self.removable
    }

    /// Pins the thread for the duration of an operation on a removable tree.
    #[inline]
    fn pin(&self) -> Option<crossbeam_epoch::Guard> {
        self.removable.then(crossbeam_epoch::pin)
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.stripes
            .iter()
            .fold(0usize, |n, c| n.wrapping_add(c.len.load(Ordering::Relaxed)))
    }

    /// Inserts so far that went to the leaf of their hint without descending from the root
    /// (`try_hinted`; like `len`, it may briefly lag under concurrency).
    pub fn hinted_inserts(&self) -> usize {
        self.stripes.iter().fold(0usize, |n, c| {
            n.wrapping_add(c.hinted.load(Ordering::Relaxed))
        })
    }

    /// True iff the tree has no entries.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes of a key block, borrowed for as long as the tree.
    #[inline]
    fn key_of(&self, p: *const KeyBlock) -> &[u8] {
        // SAFETY: every key pointer handled by this tree is null or one of its key
        // blocks, which are freed only in Drop (module invariant 1).
        unsafe { key_bytes(p) }
    }

    // ----- lookups -------------------------------------------------------

    /// One optimistic descent to the leaf for `t`. Returns the leaf and a version
    /// read before the parent was last validated (so the leaf at that version is the
    /// one the parent routed to), or `None` to restart.
    fn try_find_leaf(&self, t: Target<'_>) -> Option<(*const Leaf, u64)> {
        let mut p = self.root.load(Ordering::Acquire) as *const Header;
        // SAFETY: see the note above `node`.
        let mut h = unsafe { node(p) };
        let mut v = h.stable_version()?;
        if !ptr::eq(self.root.load(Ordering::Acquire), p) {
            return None;
        }
        while !h.is_leaf {
            // SAFETY: `h` is not a leaf.
            let inn = unsafe { inner(p) };
            let n = h.count.load(Ordering::Relaxed).min(INNER_CAP);
            let idx = match t {
                Target::Leftmost => 0,
                Target::Rightmost => n,
                Target::Le(probe) => {
                    let (pos, found) = search(&inn.prefixes, &inn.shorts, &inn.keys, n, probe);
                    pos + usize::from(found)
                }
                Target::Lt(probe) => search(&inn.prefixes, &inn.shorts, &inn.keys, n, probe).0,
            };
            let c = inn.children[idx].load(Ordering::Acquire) as *const Header;
            if c.is_null() {
                assert!(
                    !h.validate(v),
                    "invariant violated: validated inner node has a null child"
                );
                return None;
            }
            // SAFETY: see the note above `node`.
            let ch = unsafe { node(c) };
            let cv = ch.stable_version()?;
            if !h.validate(v) {
                return None;
            }
            p = c;
            h = ch;
            v = cv;
        }
        Some((p.cast::<Leaf>(), v))
    }

    fn find_leaf(&self, t: Target<'_>) -> (*const Leaf, u64) {
        let backoff = Backoff::new();
        loop {
            if let Some(r) = self.try_find_leaf(t) {
                return r;
            }
            backoff.snooze();
        }
    }

    /// `get`, first trying the leaf `hint` names (the leaf this caller's previous
    /// `get_near` on this tree found), without descending from the root when that leaf's
    /// range holds the key; a descent leaves its leaf in `hint`. A run of gets of nearby
    /// keys (TPC-C Delivery's order lines of one order) then descends once. The hint is the
    /// caller's own: unlike the insert hints, a get writes no shared memory.
    pub fn get_near<'t>(&'t self, key: &[u8], hint: &mut GetHint<'t>) -> Option<u64> {
        let _pin = self.pin();
        self.near(key, hint)
    }

    /// `get_near` under a pin the caller holds: no pin of its own.
    #[inline]
    pub fn get_near_in<'t>(
        &'t self,
        key: &[u8],
        hint: &mut GetHint<'t>,
        _pinned: &crossbeam_epoch::Guard,
    ) -> Option<u64> {
        self.near(key, hint)
    }

    /// `get_near`'s lookup; the caller is pinned where the tree needs it.
    #[inline]
    fn near<'t>(&'t self, key: &[u8], hint: &mut GetHint<'t>) -> Option<u64> {
        let probe = self.probe(key);
        if ptr::eq(hint.tree, self) && !hint.leaf.is_null() {
            if let Some(r) = self.get_in_leaf(hint.leaf, probe) {
                return r;
            }
        }
        let (value, lp) = self.descend_get(probe);
        hint.tree = self;
        hint.leaf = lp;
        value
    }

    /// `get`'s answer from leaf `lp` alone, if its range holds `probe`: its first key is at
    /// or below `probe` and its upper fence above it, so no other leaf can hold the key (as
    /// in `try_hinted`). All read optimistically and made good by validating the leaf at the
    /// version read first (module invariant 3). `None` if the range does not hold `probe`,
    /// the leaf is empty, or it changed meanwhile: the caller descends.
    #[inline]
    fn get_in_leaf(&self, lp: *const Leaf, probe: Probe<'_>) -> Option<Option<u64>> {
        // SAFETY: `lp` is a leaf of this tree (`GetHint` names one, checked by the caller),
        // and leaves live as long as the tree (note above `node`).
        let lf = unsafe { &*lp };
        let v = lf.hdr.version.load(Ordering::Acquire);
        if v & (LOCKED | OBSOLETE) != 0 {
            return None;
        }
        let n = lf.hdr.count.load(Ordering::Relaxed).min(LEAF_CAP);
        if n == 0 {
            return None;
        }
        if !range_holds(lf, probe) {
            return None;
        }
        let (pos, found) = search(&lf.prefixes, &lf.shorts, &lf.keys, n, probe);
        let value = if found {
            lf.values[pos].load(Ordering::Relaxed)
        } else {
            0
        };
        lf.hdr.validate(v).then_some(found.then_some(value))
    }

    /// The value stored under `key`, if any.
    pub fn get(&self, key: &[u8]) -> Option<u64> {
        let _pin = self.pin();
        self.descend_get(self.probe(key)).0
    }

    /// `get` under a pin the caller holds: no pin of its own.
    #[inline]
    pub fn get_in(&self, key: &[u8], _pinned: &crossbeam_epoch::Guard) -> Option<u64> {
        self.descend_get(self.probe(key)).0
    }

    /// `get` by a descent from the root: the value, and the leaf that answered.
    #[inline]
    fn descend_get(&self, probe: Probe<'_>) -> (Option<u64>, *const Leaf) {
        let backoff = Backoff::new();
        loop {
            if let Some((lp, v)) = self.try_find_leaf(Target::Le(probe)) {
                // SAFETY: see the note above `node`; `lp` is a leaf.
                let lf = unsafe { &*lp };
                let n = lf.hdr.count.load(Ordering::Relaxed).min(LEAF_CAP);
                let (pos, found) = search(&lf.prefixes, &lf.shorts, &lf.keys, n, probe);
                let value = if found {
                    lf.values[pos].load(Ordering::Relaxed)
                } else {
                    0
                };
                if lf.hdr.validate(v) {
                    return (found.then_some(value), lp);
                }
            }
            backoff.snooze();
        }
    }

    // ----- scans ---------------------------------------------------------

    /// Ordered range scan over the entries between `lo` and `hi`, in direction
    /// `dir`. Calls `f(key, value)` for each entry in order until it returns
    /// `false`. Entries are passed to `f` only after the leaf copy they came from
    /// validated; no key is reported twice, and no key present for the whole scan is
    /// skipped.
    pub fn scan(
        &self,
        lo: Bound<&[u8]>,
        hi: Bound<&[u8]>,
        dir: ScanDirection,
        f: &mut dyn FnMut(&[u8], u64) -> bool,
    ) {
        self.scan_stamped(lo, hi, dir, f, None)
    }

    /// `scan`, pushing onto `stamps` every leaf whose copy it read, with the version the
    /// copy validated at (`NodeStamp`; `stamps_hold` checks them later). The leaves cover
    /// the part of the range the scan went through: all of it, or, stopped by `f`, up to
    /// (descending: down to) the last key reported.
    pub(crate) fn scan_stamped(
        &self,
        lo: Bound<&[u8]>,
        hi: Bound<&[u8]>,
        dir: ScanDirection,
        f: &mut dyn FnMut(&[u8], u64) -> bool,
        stamps: Stamps<'_>,
    ) {
        if range_is_empty(lo, hi) {
            return;
        }
        // Keys handed to `f` (and the last one reported, which the scan resumes after)
        // stay allocated while pinned.
        let _pin = self.pin();
        match dir {
            ScanDirection::Ascending => self.scan_asc(lo, hi, f, stamps),
            ScanDirection::Descending => self.scan_desc(lo, hi, f, stamps),
        }
    }

    /// Whether every leaf of `stamps` (this tree's, from `scan_stamped`) still has the
    /// version stamped: unchanged and not locked by a writer.
    pub(crate) fn stamps_hold(&self, stamps: &[NodeStamp]) -> bool {
        stamps.iter().all(|s| {
            // SAFETY: a leaf of this tree (the caller's contract), and no node is freed
            // before the tree is dropped (invariant 1).
            let leaf = unsafe { &*(s.leaf as *const Leaf) };
            leaf.hdr.version.load(Ordering::Acquire) == s.version
        })
    }

    fn scan_asc(
        &self,
        lo: Bound<&[u8]>,
        hi: Bound<&[u8]>,
        f: &mut dyn FnMut(&[u8], u64) -> bool,
        mut stamps: Stamps<'_>,
    ) {
        let lo_key = match lo {
            Bound::Unbounded => None,
            Bound::Included(k) | Bound::Excluded(k) => Some(k),
        };
        let target = match lo_key {
            None => Target::Leftmost,
            Some(k) => Target::Le(self.probe(k)),
        };
        let (mut lp, _) = self.find_leaf(target);
        let mut snap = LeafSnap::new();
        let mut first = true;
        let mut last: Option<&[u8]> = None;
        loop {
            // SAFETY: see the note above `node`.
            let v = snap.read(unsafe { &*lp });
            if first {
                // B-link move right if the start leaf split after the descent and
                // holds nothing at or above `lo` any more.
                if let Some(k) = lo_key {
                    // SAFETY: `snap.next` is a live leaf when non-null.
                    if !snap.next.is_null() && unsafe { sibling_fence(snap.next) } <= k {
                        lp = snap.next;
                        continue;
                    }
                }
                first = false;
            }
            stamp(&mut stamps, lp, v);
            // Keys in a validated snapshot are strictly increasing: skip to the first
            // one above `lo` and above the last key reported, then only check `hi`. The
            // test is monotone over the snapshot, so the start is a binary search (the
            // first leaf's start is anywhere in it; a next leaf's is its first key).
            let starts = |i: usize| {
                let k = self.key_of(snap.keys[i]);
                above_lo(k, lo) && last.is_none_or(|l| k > l)
            };
            let i = first_true(snap.n, starts);
            for i in i..snap.n {
                let k = self.key_of(snap.keys[i]);
                if !below_hi(k, hi) {
                    return;
                }
                last = Some(k);
                if !f(k, snap.values[i]) {
                    return;
                }
            }
            if snap.next.is_null() {
                return;
            }
            // The next leaf's range starts at its fence; stop if that is past `hi`.
            // SAFETY: `snap.next` is a live leaf.
            if !below_hi(unsafe { sibling_fence(snap.next) }, hi) {
                return;
            }
            lp = snap.next;
        }
    }

    fn scan_desc(
        &self,
        lo: Bound<&[u8]>,
        hi: Bound<&[u8]>,
        f: &mut dyn FnMut(&[u8], u64) -> bool,
        mut stamps: Stamps<'_>,
    ) {
        let mut upper: Bound<&[u8]> = hi;
        let mut last: Option<&[u8]> = None;
        let mut snap = LeafSnap::new();
        loop {
            let target = match upper {
                Bound::Unbounded => Target::Rightmost,
                Bound::Included(k) => Target::Le(self.probe(k)),
                Bound::Excluded(k) => Target::Lt(self.probe(k)),
            };
            let (mut lp, _) = self.find_leaf(target);
            loop {
                // SAFETY: see the note above `node`.
                let v = snap.read(unsafe { &*lp });
                // B-link move right while the right sibling still covers keys
                // within `upper` (the leaf split after the descent).
                // SAFETY: `snap.next` is a live leaf when non-null.
                if !snap.next.is_null() && below_hi(unsafe { sibling_fence(snap.next) }, upper) {
                    lp = snap.next;
                    continue;
                }
                stamp(&mut stamps, lp, v);
                break;
            }
            // Skip (from the top) to the first key below `upper` and below the last
            // key reported, then only check `lo`: `end` is the first index whose key is
            // not (a binary search over the increasing keys, as in `scan_asc`).
            let past = |i: usize| {
                let k = self.key_of(snap.keys[i]);
                !(below_hi(k, upper) && last.is_none_or(|l| k < l))
            };
            let end = first_true(snap.n, past);
            for i in (0..end).rev() {
                let k = self.key_of(snap.keys[i]);
                if !above_lo(k, lo) {
                    return;
                }
                last = Some(k);
                if !f(k, snap.values[i]) {
                    return;
                }
            }
            // SAFETY: `lp` is a live leaf.
            let fence_ptr = unsafe { &*lp }.fence.load(Ordering::Acquire);
            if fence_ptr.is_null() {
                return; // leftmost leaf
            }
            let fk = self.key_of(fence_ptr);
            if let Bound::Included(l) | Bound::Excluded(l) = lo {
                if fk <= l {
                    return; // everything below this leaf is below `lo`
                }
            }
            upper = Bound::Excluded(fk);
        }
    }

    // ----- insert --------------------------------------------------------

    /// Inserts `key -> value` if `key` is absent. If present, returns
    /// `Err(existing value)` and changes nothing.
    pub fn insert(&self, key: &[u8], value: u64) -> Result<(), u64> {
        let _pin = self.pin();
        let probe = self.probe(key);
        let slot = hint_slot(key);
        let mut owned: *mut KeyBlock = ptr::null_mut();
        match self.try_hinted(slot, probe, value, &mut owned) {
            Some(Ok(())) => {
                let s = &self.stripes[len_stripe()];
                s.len.fetch_add(1, Ordering::Relaxed);
                s.hinted.fetch_add(1, Ordering::Relaxed);
                return Ok(());
            }
            Some(Err(existing)) => {
                if !owned.is_null() {
                    // SAFETY: allocated for this call, never published.
                    unsafe { free_key(owned) };
                }
                return Err(existing);
            }
            None => {}
        }
        let backoff = Backoff::new();
        loop {
            match self.try_insert(probe, slot, value, &mut owned) {
                Step::Done(r) => {
                    match r {
                        Ok(()) => {
                            self.stripes[len_stripe()]
                                .len
                                .fetch_add(1, Ordering::Relaxed);
                        }
                        Err(_) if !owned.is_null() => {
                            // SAFETY: the block was allocated for this call and never
                            // published (the insert did not happen).
                            unsafe { free_key(owned) };
                        }
                        Err(_) => {}
                    }
                    return r;
                }
                Step::Retry => {}
                Step::Conflict => backoff.snooze(),
            }
        }
    }

    /// The fast path of a run of keys that go to the same leaf one after another (TPC-C's
    /// order ids per district): inserts `probe` into the leaf hint `slot` names, without
    /// descending from the root, if that leaf is not full and its first key is at or below
    /// `probe` and its upper fence above it. Then the leaf's range `[fence, high)` holds
    /// `probe` (its first key is at or above the fence), so only this leaf can hold the key
    /// and the insert is the one a descent would make. All of it is read optimistically and
    /// made good by validating the leaf, or taking its lock, at the version read first
    /// (module invariant 3: a split or insert in between moves it). `None`, with nothing
    /// changed, if the hint is empty, stale or contended: the caller descends.
    #[inline]
    fn try_hinted(
        &self,
        slot: usize,
        probe: Probe<'_>,
        value: u64,
        owned: &mut *mut KeyBlock,
    ) -> Option<Result<(), u64>> {
        let lp = self.hints[slot].load(Ordering::Acquire);
        if lp.is_null() {
            return None;
        }
        // SAFETY: hints name leaves of this tree, which live as long as it (note above
        // `node`).
        let lf = unsafe { &*lp };
        let v = lf.hdr.version.load(Ordering::Acquire);
        if v & (LOCKED | OBSOLETE) != 0 {
            return None;
        }
        let n = lf.hdr.count.load(Ordering::Relaxed);
        if n == 0 || n >= LEAF_CAP {
            return None;
        }
        if !range_holds(lf, probe) {
            return None;
        }
        let (pos, found) = search(&lf.prefixes, &lf.shorts, &lf.keys, n, probe);
        if found {
            let existing = lf.values[pos].load(Ordering::Relaxed);
            return lf.hdr.validate(v).then_some(Err(existing));
        }
        if owned.is_null() {
            *owned = alloc_key(probe.key); // outside any lock
        }
        if !lf.hdr.try_upgrade(v) {
            return None;
        }
        // Locked at version `v`: `n`, `pos` and the leaf's range are as read.
        leaf_insert(lf, n, pos, probe, *owned, value);
        lf.hdr.unlock();
        Some(Ok(()))
    }

    /// After an insert into leaf `lp` that descended: the next key of its slot is tried
    /// there first. Stores only on a change: the slots are shared by all threads.
    #[inline]
    fn note_insert(&self, slot: usize, lp: *mut Leaf) {
        let hint = &self.hints[slot];
        if hint.load(Ordering::Relaxed) != lp {
            hint.store(lp, Ordering::Release);
        }
    }

    fn try_insert(
        &self,
        probe: Probe<'_>,
        slot: usize,
        value: u64,
        owned: &mut *mut KeyBlock,
    ) -> Step {
        let mut p = self.root.load(Ordering::Acquire);
        // SAFETY: see the note above `node`.
        let mut h = unsafe { node(p) };
        let Some(mut v) = h.stable_version() else {
            return Step::Conflict;
        };
        if self.root.load(Ordering::Acquire) != p {
            return Step::Conflict;
        }
        let mut parent: *mut Header = ptr::null_mut();
        let mut pv = 0u64;
        while !h.is_leaf {
            let n = h.count.load(Ordering::Relaxed);
            if n >= INNER_CAP {
                // Eager split so that a later child split finds room here.
                return self.split_locked(parent, pv, p, v, INNER_CAP / 2);
            }
            // SAFETY: `h` is not a leaf.
            let inn = unsafe { inner(p) };
            let (pos, found) = search(&inn.prefixes, &inn.shorts, &inn.keys, n, probe);
            let c = inn.children[pos + usize::from(found)].load(Ordering::Acquire);
            if c.is_null() {
                assert!(
                    !h.validate(v),
                    "invariant violated: validated inner node has a null child"
                );
                return Step::Conflict;
            }
            // SAFETY: see the note above `node`.
            let ch = unsafe { node(c) };
            let Some(cv) = ch.stable_version() else {
                return Step::Conflict;
            };
            // Validates the child pointer, the not-full check, and that the child did
            // not split between the pointer read and `cv`.
            if !h.validate(v) {
                return Step::Conflict;
            }
            parent = p;
            pv = v;
            p = c;
            h = ch;
            v = cv;
        }
        // SAFETY: `h` is a leaf.
        let lf = unsafe { leaf(p) };
        let n = h.count.load(Ordering::Relaxed).min(LEAF_CAP);
        let (pos, found) = search(&lf.prefixes, &lf.shorts, &lf.keys, n, probe);
        if found {
            let existing = lf.values[pos].load(Ordering::Relaxed);
            return if h.validate(v) {
                Step::Done(Err(existing))
            } else {
                Step::Conflict
            };
        }
        if n >= LEAF_CAP {
            // A run that filled the leaf its hint names (the leaf's latest insert was just
            // before `pos`): split where it inserts, so that the keys it has passed stay in
            // a full leaf rather than a half-empty one for good. Else in the middle.
            let run = pos > 0
                && usize::from(lf.last.load(Ordering::Relaxed)) == pos - 1
                && self.hints[slot].load(Ordering::Relaxed) == p.cast::<Leaf>();
            let at = if run {
                pos.min(LEAF_CAP - 1)
            } else {
                LEAF_CAP / 2
            };
            return self.split_locked(parent, pv, p, v, at);
        }
        if owned.is_null() {
            *owned = alloc_key(probe.key); // outside any lock
        }
        if !h.try_upgrade(v) {
            return Step::Conflict;
        }
        // Locked at version `v`: `n`, `pos` and the leaf's range are as read.
        leaf_insert(lf, n, pos, probe, *owned, value);
        h.unlock();
        self.note_insert(slot, p.cast::<Leaf>());
        Step::Done(Ok(()))
    }

    /// Locks `parent` (at `pv`, or the root pointer if null) and the full node `p`
    /// (at `v`), splits `p` (a leaf at entry `at`, in `1..LEAF_CAP`; an inner node in the
    /// middle), publishes the separator, and unlocks.
    fn split_locked(
        &self,
        parent: *mut Header,
        pv: u64,
        p: *mut Header,
        v: u64,
        at: usize,
    ) -> Step {
        // SAFETY: see the note above `node`.
        let ph = if parent.is_null() {
            None
        } else {
            Some(unsafe { node(parent) })
        };
        if let Some(ph) = ph {
            if !ph.try_upgrade(pv) {
                return Step::Conflict;
            }
        }
        // SAFETY: see the note above `node`.
        let h = unsafe { node(p) };
        if !h.try_upgrade(v) {
            if let Some(ph) = ph {
                ph.unlock();
            }
            return Step::Conflict;
        }
        if ph.is_none() && self.root.load(Ordering::Acquire) != p {
            h.unlock(); // a concurrent root split made `p` a non-root
            return Step::Conflict;
        }
        let sep = if h.is_leaf {
            self.split_leaf(p, at)
        } else {
            self.split_inner(p)
        };
        match ph {
            // SAFETY: the parent is an inner node, locked by us.
            Some(_) => unsafe { insert_separator(inner(parent), p, &sep, self.ints == 0) },
            None => {
                let root = Inner::boxed();
                root.prefixes[0].store(sep.prefix, Ordering::Relaxed);
                root.shorts[0].store(sep.short, Ordering::Relaxed);
                root.keys[0].store(sep.key, Ordering::Relaxed);
                root.children[0].store(p, Ordering::Relaxed);
                root.children[1].store(sep.right, Ordering::Relaxed);
                root.hdr.count.store(1, Ordering::Relaxed);
                self.root
                    .store(Box::into_raw(root).cast::<Header>(), Ordering::Release);
            }
        }
        h.unlock();
        if let Some(ph) = ph {
            ph.unlock();
        }
        Step::Retry
    }

    // ----- remove --------------------------------------------------------

    /// Removes the entry `key` (a tree made by [`removable`](Self::removable)); true if it
    /// was present. Its key block is freed once no thread pinned now can read it.
    ///
    /// # Panics
    /// On a tree made by [`new`](Self::new), which frees nothing before `Drop`.
    pub fn remove(&self, key: &[u8]) -> bool {
        assert!(self.removable, "remove on a BTree made without `removable`");
        let guard = crossbeam_epoch::pin();
        let probe = self.probe(key);
        let backoff = Backoff::new();
        loop {
            let Some((lp, v)) = self.try_find_leaf(Target::Le(probe)) else {
                backoff.snooze();
                continue;
            };
            // SAFETY: see the note above `node`; `lp` is a leaf, the one the parent routed
            // `key` to at version `v`.
            let lf = unsafe { &*lp };
            let n = lf.hdr.count.load(Ordering::Relaxed).min(LEAF_CAP);
            let (pos, found) = search(&lf.prefixes, &lf.shorts, &lf.keys, n, probe);
            if !found {
                if lf.hdr.validate(v) {
                    return false;
                }
                backoff.snooze();
                continue;
            }
            if !lf.hdr.try_upgrade(v) {
                backoff.snooze();
                continue;
            }
            // Locked at version `v`: `n` and `pos` are as read.
            let block = lf.keys[pos].load(Ordering::Relaxed);
            for i in pos..n - 1 {
                lf.prefixes[i].store(
                    lf.prefixes[i + 1].load(Ordering::Relaxed),
                    Ordering::Relaxed,
                );
                lf.shorts[i].store(lf.shorts[i + 1].load(Ordering::Relaxed), Ordering::Relaxed);
                lf.keys[i].store(lf.keys[i + 1].load(Ordering::Relaxed), Ordering::Release);
                lf.values[i].store(lf.values[i + 1].load(Ordering::Relaxed), Ordering::Relaxed);
            }
            lf.keys[n - 1].store(ptr::null_mut(), Ordering::Release);
            lf.hdr.count.store(n - 1, Ordering::Release);
            lf.hdr.unlock();
            self.stripes[len_stripe()]
                .len
                .fetch_sub(1, Ordering::Relaxed);
            let addr = block as usize;
            // SAFETY: the block left the leaf under its lock; no separator or fence borrows
            // it (removable trees copy them); a reader that loaded it is pinned, and the
            // free waits for every thread pinned now.
            unsafe { guard.defer_unchecked(move || free_key(addr as *mut KeyBlock)) };
            return true;
        }
    }

    /// Splits the locked, full leaf `p` at entry `mid` (entries `mid..` move right); returns
    /// the separator and the new right leaf.
    fn split_leaf(&self, p: *mut Header, mid: usize) -> Sep {
        // SAFETY: `p` is a leaf locked by the caller.
        let lf = unsafe { leaf(p) };
        let n = lf.hdr.count.load(Ordering::Relaxed);
        assert_eq!(
            n, LEAF_CAP,
            "invariant violated: splitting a leaf that is not full"
        );
        assert!(
            (1..n).contains(&mid),
            "invariant violated: a leaf split must leave entries on both sides"
        );
        let mut sep = lf.keys[mid].load(Ordering::Relaxed);
        if self.removable {
            // The entry may be removed later: the separator and fence get a copy.
            // SAFETY: an entry of the locked leaf.
            sep = alloc_key(unsafe { key_bytes(sep) });
        }
        let (prefix, short) = (
            lf.prefixes[mid].load(Ordering::Relaxed),
            lf.shorts[mid].load(Ordering::Relaxed),
        );
        let right = Leaf::boxed(
            sep,
            lf.next.load(Ordering::Relaxed),
            (
                lf.high.load(Ordering::Relaxed),
                lf.high_prefix.load(Ordering::Relaxed),
                lf.high_short.load(Ordering::Relaxed),
            ),
        );
        for i in mid..n {
            right.prefixes[i - mid]
                .store(lf.prefixes[i].load(Ordering::Relaxed), Ordering::Relaxed);
            right.shorts[i - mid].store(lf.shorts[i].load(Ordering::Relaxed), Ordering::Relaxed);
            right.keys[i - mid].store(lf.keys[i].load(Ordering::Relaxed), Ordering::Relaxed);
            right.values[i - mid].store(lf.values[i].load(Ordering::Relaxed), Ordering::Relaxed);
        }
        right.hdr.count.store(n - mid, Ordering::Relaxed);
        let rp = Box::into_raw(right);
        lf.next.store(rp, Ordering::Release);
        lf.high_prefix.store(prefix, Ordering::Relaxed);
        lf.high_short.store(short, Ordering::Relaxed);
        lf.high.store(sep, Ordering::Release);
        lf.hdr.count.store(mid, Ordering::Release);
        Sep {
            key: sep,
            prefix,
            short,
            right: rp.cast::<Header>(),
        }
    }

    /// Splits the locked, full inner node `p`; the middle key moves up.
    fn split_inner(&self, p: *mut Header) -> Sep {
        // SAFETY: `p` is an inner node locked by the caller.
        let inn = unsafe { inner(p) };
        let n = inn.hdr.count.load(Ordering::Relaxed);
        assert_eq!(
            n, INNER_CAP,
            "invariant violated: splitting an inner node that is not full"
        );
        let mid = n / 2;
        let right = Inner::boxed();
        for i in mid + 1..n {
            right.prefixes[i - mid - 1]
                .store(inn.prefixes[i].load(Ordering::Relaxed), Ordering::Relaxed);
            right.shorts[i - mid - 1]
                .store(inn.shorts[i].load(Ordering::Relaxed), Ordering::Relaxed);
            right.keys[i - mid - 1].store(inn.keys[i].load(Ordering::Relaxed), Ordering::Relaxed);
        }
        for i in mid + 1..=n {
            right.children[i - mid - 1]
                .store(inn.children[i].load(Ordering::Relaxed), Ordering::Relaxed);
        }
        right.hdr.count.store(n - mid - 1, Ordering::Relaxed);
        inn.hdr.count.store(mid, Ordering::Release);
        Sep {
            key: inn.keys[mid].load(Ordering::Relaxed),
            prefix: inn.prefixes[mid].load(Ordering::Relaxed),
            short: inn.shorts[mid].load(Ordering::Relaxed),
            right: Box::into_raw(right).cast::<Header>(),
        }
    }
}

/// Inserts the entry `probe` (key block `key`) with `value` at `pos` of the `n` entries of
/// the locked, not full leaf `lf`.
#[inline]
fn leaf_insert(lf: &Leaf, n: usize, pos: usize, probe: Probe<'_>, key: *mut KeyBlock, value: u64) {
    for i in (pos..n).rev() {
        lf.prefixes[i + 1].store(lf.prefixes[i].load(Ordering::Relaxed), Ordering::Relaxed);
        lf.shorts[i + 1].store(lf.shorts[i].load(Ordering::Relaxed), Ordering::Relaxed);
        lf.keys[i + 1].store(lf.keys[i].load(Ordering::Relaxed), Ordering::Release);
        lf.values[i + 1].store(lf.values[i].load(Ordering::Relaxed), Ordering::Relaxed);
    }
    lf.prefixes[pos].store(probe.prefix, Ordering::Relaxed);
    lf.shorts[pos].store(probe.short, Ordering::Relaxed);
    lf.keys[pos].store(key, Ordering::Release);
    lf.values[pos].store(value, Ordering::Relaxed);
    lf.last.store(pos as u8, Ordering::Relaxed);
    lf.hdr.count.store(n + 1, Ordering::Release);
}

/// Inserts separator `sep` and the new right child after `left` into the locked
/// inner node `par`.
fn insert_separator(par: &Inner, left: *mut Header, sep: &Sep, raw: bool) {
    let n = par.hdr.count.load(Ordering::Relaxed);
    assert!(
        n < INNER_CAP,
        "invariant violated: eager splitting must leave room in the parent"
    );
    // SAFETY: separators are live key blocks.
    let probe = Probe {
        key: unsafe { key_bytes(sep.key) },
        prefix: sep.prefix,
        short: sep.short,
        raw,
    };
    let (pos, found) = search(&par.prefixes, &par.shorts, &par.keys, n, probe);
    assert!(
        !found,
        "invariant violated: split separator already present in the parent"
    );
    assert!(
        par.children[pos].load(Ordering::Relaxed) == left,
        "invariant violated: parent does not route the separator to the split child"
    );
    for i in (pos..n).rev() {
        par.prefixes[i + 1].store(par.prefixes[i].load(Ordering::Relaxed), Ordering::Relaxed);
        par.shorts[i + 1].store(par.shorts[i].load(Ordering::Relaxed), Ordering::Relaxed);
        par.keys[i + 1].store(par.keys[i].load(Ordering::Relaxed), Ordering::Release);
        par.children[i + 2].store(
            par.children[i + 1].load(Ordering::Relaxed),
            Ordering::Release,
        );
    }
    par.prefixes[pos].store(sep.prefix, Ordering::Relaxed);
    par.shorts[pos].store(sep.short, Ordering::Relaxed);
    par.keys[pos].store(sep.key, Ordering::Release);
    par.children[pos + 1].store(sep.right, Ordering::Release);
    par.hdr.count.store(n + 1, Ordering::Release);
}

impl Drop for BTree {
    fn drop(&mut self) {
        let root = *self.root.get_mut();
        // SAFETY: `&mut self` excludes all readers and writers; every node is reached
        // exactly once through the live child slots `0..=count`, and every key block
        // is owned by exactly one live leaf slot (module invariant 4), or is the fence
        // copy of one leaf of a removable tree (invariant 1).
        unsafe { free_subtree(root, self.removable) };
    }
}

/// # Safety
/// Exclusive access; `p` is a node whose subtree is freed exactly once.
unsafe fn free_subtree(p: *mut Header, fences_owned: bool) {
    if (*p).is_leaf {
        let lf = Box::from_raw(p.cast::<Leaf>());
        let n = lf.hdr.count.load(Ordering::Relaxed);
        for slot in &lf.keys[..n] {
            free_key(slot.load(Ordering::Relaxed));
        }
        let fence = lf.fence.load(Ordering::Relaxed);
        if fences_owned && !fence.is_null() {
            free_key(fence);
        }
    } else {
        let inn = Box::from_raw(p.cast::<Inner>());
        let n = inn.hdr.count.load(Ordering::Relaxed);
        for slot in &inn.children[..=n] {
            free_subtree(slot.load(Ordering::Relaxed), fences_owned);
        }
    }
}

/// Whether the range of non-empty leaf `lf` holds `probe`: its first key is at or below
/// `probe` and its upper fence (if any) above it, so no other leaf can hold the key (its
/// first key is at or above its lower fence). Read optimistically: the caller makes the
/// answer good by validating the leaf at the version it read first (module invariant 3).
#[inline]
fn range_holds(lf: &Leaf, probe: Probe<'_>) -> bool {
    let high = &lf.high;
    if !high.load(Ordering::Acquire).is_null()
        && cmp_entry(&lf.high_prefix, &lf.high_short, high, probe) != CmpOrdering::Greater
    {
        return false;
    }
    cmp_entry(&lf.prefixes[0], &lf.shorts[0], &lf.keys[0], probe) != CmpOrdering::Greater
}

// ---------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::{BTreeMap, BTreeSet};
    use std::sync::atomic::AtomicBool;
    use std::sync::Arc;

    /// A scan's start in a leaf: every threshold of every leaf size, and how many tests a
    /// start takes (index 0 alone when it holds; at most 1 + log2 of the rest otherwise).
    #[test]
    fn first_true_finds_the_start_of_every_monotone_run() {
        for n in 0..=LEAF_CAP + 1 {
            for t in 0..=n {
                let calls = std::cell::Cell::new(0);
                let got = first_true(n, |i| {
                    assert!(i < n, "tested {i} of {n}");
                    calls.set(calls.get() + 1);
                    i >= t
                });
                assert_eq!(got, t, "n {n}, threshold {t}");
                let bound = if t == 0 { 1 } else { 2 + n.ilog2() as usize };
                assert!(calls.get() <= bound, "n {n}, t {t}: {} tests", calls.get());
            }
        }
    }

    /// Silo's node set (`scan_stamped`, `stamps_hold`): whatever the range, direction or
    /// stop, inserting any key into the part of the range a scan went through breaks one of
    /// its stamps; an insert into a leaf it did not read breaks none.
    #[test]
    fn an_insert_into_a_scanned_range_breaks_a_stamp_of_the_scan() {
        let t = BTree::new();
        let k = |x: u64| x.to_be_bytes();
        for x in (0..4000).step_by(4) {
            t.insert(&k(x), x).unwrap();
        }
        let mut rng = SplitMix64(7);
        for trial in 0..400 {
            let a = rng.next() % 4000;
            let b = a + rng.next() % 300;
            let desc = trial % 2 == 1;
            // Every third scan stops after 5 keys: its range ends (begins) at the 5th.
            let stop = trial % 3 == 0;
            let mut seen = Vec::new();
            let mut stamps = Vec::new();
            let dir = if desc {
                ScanDirection::Descending
            } else {
                ScanDirection::Ascending
            };
            let (lo, hi) = (k(a), k(b));
            t.scan_stamped(
                Bound::Included(&lo),
                Bound::Included(&hi),
                dir,
                &mut |key, _| {
                    seen.push(u64::from_be_bytes(key.try_into().unwrap()));
                    !(stop && seen.len() == 5)
                },
                Some(&mut stamps),
            );
            assert!(
                !stamps.is_empty() && t.stamps_hold(&stamps),
                "trial {trial}"
            );
            // The part of the range the scan went through.
            let (from, to) = match (stop && seen.len() == 5, desc) {
                (true, false) => (a, seen[4]),
                (true, true) => (seen[4], b),
                _ => (a, b),
            };
            // A key past the end of the tree goes to the last leaf: read only by a scan
            // that reached it.
            let far = 1_000_000 + trial;
            t.insert(&k(far), far).unwrap();
            let last_leaf_read = seen.last().is_some_and(|&x| x >= 3900) || b >= 3900;
            if !last_leaf_read {
                assert!(t.stamps_hold(&stamps), "trial {trial}: an insert elsewhere");
            }
            // A new key inside [from, to] (odd, so absent).
            let x = (from + rng.next() % (to - from + 1)) | 1;
            if x > to || t.get(&k(x)).is_some() {
                continue;
            }
            t.insert(&k(x), x).unwrap();
            assert!(
                !t.stamps_hold(&stamps),
                "trial {trial}: {x} inserted into [{from}, {to}]"
            );
        }
    }

    struct SplitMix64(u64);

    impl SplitMix64 {
        fn next(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        }
        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
        fn bytes(&mut self, len: usize, alphabet: &[u8]) -> Vec<u8> {
            (0..len)
                .map(|_| alphabet[self.below(alphabet.len() as u64) as usize])
                .collect()
        }
    }

    const ALL_BYTES: &[u8] = &[0, 1, 2, 0x41, 0x61, 0x7f, 0x80, 0xfe, 0xff];

    /// Keys of varied lengths, many sharing prefixes longer than 8 bytes, many
    /// differing only in trailing zero bytes (which pad the inline prefix).
    fn random_key(rng: &mut SplitMix64) -> Vec<u8> {
        match rng.below(7) {
            0 => {
                let len = rng.below(4) as usize;
                rng.bytes(len, ALL_BYTES)
            }
            1 => {
                let mut k = b"shared/prefix/longer/than/8/".to_vec();
                let len = rng.below(6) as usize;
                k.extend(rng.bytes(len, ALL_BYTES));
                k
            }
            2 => {
                let len = rng.below(20) as usize;
                (0..len).map(|_| rng.next() as u8).collect()
            }
            3 => rng.next().to_be_bytes().to_vec(),
            4 => {
                let mut k = b"abcdefgh".to_vec();
                let zeros = rng.below(4) as usize;
                k.resize(k.len() + zeros, 0);
                let len = rng.below(3) as usize;
                k.extend(rng.bytes(len, ALL_BYTES));
                k
            }
            5 => {
                let len = rng.below(9) as usize;
                rng.bytes(len, &[0, 0xff])
            }
            _ => {
                let mut k = vec![b'x'; 100 + rng.below(50) as usize];
                let len = rng.below(3) as usize;
                k.extend(rng.bytes(len, ALL_BYTES));
                k
            }
        }
    }

    fn value_for(key: &[u8]) -> u64 {
        let mut h = 0xcbf2_9ce4_8422_2325u64;
        for &b in key {
            h = (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
        }
        h
    }

    fn collect(
        t: &BTree,
        lo: Bound<&[u8]>,
        hi: Bound<&[u8]>,
        dir: ScanDirection,
        limit: usize,
    ) -> Vec<(Vec<u8>, u64)> {
        let mut out = Vec::new();
        t.scan(lo, hi, dir, &mut |k, v| {
            out.push((k.to_vec(), v));
            out.len() < limit
        });
        out
    }

    fn expected(
        m: &BTreeMap<Vec<u8>, u64>,
        lo: Bound<&[u8]>,
        hi: Bound<&[u8]>,
        dir: ScanDirection,
        limit: usize,
    ) -> Vec<(Vec<u8>, u64)> {
        // BTreeMap::range panics on inverted ranges; those hold nothing.
        let inverted = match (lo, hi) {
            (Bound::Included(a) | Bound::Excluded(a), Bound::Included(b) | Bound::Excluded(b)) => {
                a > b
            }
            _ => false,
        };
        if inverted || (matches!((lo, hi), (Bound::Excluded(a), Bound::Excluded(b)) if a == b)) {
            return Vec::new();
        }
        let it = m.range::<[u8], _>((lo, hi)).map(|(k, v)| (k.clone(), *v));
        match dir {
            ScanDirection::Ascending => it.take(limit).collect(),
            ScanDirection::Descending => it.rev().take(limit).collect(),
        }
    }

    impl BTree {
        /// Checks the structural invariants (quiescent tree only); returns #entries.
        fn check_invariants(&self) -> usize {
            let mut leaves = Vec::new();
            let root = self.root.load(Ordering::Acquire);
            let mut depth = None;
            // SAFETY: test-only walk of a quiescent tree.
            let total =
                unsafe { check_node(root, self.ints, None, None, 0, &mut depth, &mut leaves) };
            for w in leaves.windows(2) {
                // SAFETY: live leaves.
                assert_eq!(
                    unsafe { &*w[0] }.next.load(Ordering::Acquire) as *const Leaf,
                    w[1]
                );
            }
            if let Some(&last) = leaves.last() {
                // SAFETY: live leaf.
                assert!(unsafe { &*last }.next.load(Ordering::Acquire).is_null());
            }
            for &l in &leaves {
                // SAFETY: a live leaf of a quiescent tree.
                let l = unsafe { &*l };
                let next = l.next.load(Ordering::Acquire);
                let high = l.high.load(Ordering::Acquire);
                if next.is_null() {
                    assert!(high.is_null(), "the rightmost leaf has an upper fence");
                } else {
                    // SAFETY: live leaf.
                    let fence = unsafe { &*next }.fence.load(Ordering::Acquire);
                    assert_eq!(high, fence, "upper fence is not the next leaf's fence");
                    // SAFETY: a live key block.
                    let (prefix, short) = prefix_of(unsafe { key_bytes(high) }, self.ints);
                    assert_eq!(l.high_prefix.load(Ordering::Relaxed), prefix);
                    assert_eq!(l.high_short.load(Ordering::Relaxed), short);
                }
            }
            assert_eq!(total, self.len(), "len counter disagrees with the leaves");
            total
        }
    }

    unsafe fn check_node(
        p: *mut Header,
        ints: u8,
        lo: Option<&[u8]>,
        hi: Option<&[u8]>,
        depth: usize,
        leaf_depth: &mut Option<usize>,
        leaves: &mut Vec<*const Leaf>,
    ) -> usize {
        let h = node(p);
        assert_eq!(h.version.load(Ordering::Relaxed) & (LOCKED | OBSOLETE), 0);
        let n = h.count.load(Ordering::Relaxed);
        let (prefixes, shorts, keys): (&[AtomicU64], &[AtomicU8], &[AtomicPtr<KeyBlock>]) =
            if h.is_leaf {
                let l = leaf(p);
                (&l.prefixes[..n], &l.shorts[..n], &l.keys[..n])
            } else {
                let i = inner(p);
                (&i.prefixes[..n], &i.shorts[..n], &i.keys[..n])
            };
        let ks: Vec<&[u8]> = keys
            .iter()
            .map(|k| key_bytes(k.load(Ordering::Relaxed)))
            .collect();
        for (i, k) in ks.iter().enumerate() {
            let (prefix, short) = prefix_of(k, ints);
            assert_eq!(prefixes[i].load(Ordering::Relaxed), prefix);
            assert_eq!(shorts[i].load(Ordering::Relaxed), short);
            assert!(lo.is_none_or(|l| *k >= l), "key below node range");
            assert!(hi.is_none_or(|h| *k < h), "key above node range");
        }
        for w in ks.windows(2) {
            assert!(w[0] < w[1], "keys not strictly increasing");
        }
        if h.is_leaf {
            let l = leaf(p);
            let fence = l.fence.load(Ordering::Relaxed);
            match lo {
                None => assert!(fence.is_null()),
                Some(lo) => assert_eq!(key_bytes(fence), lo),
            }
            match *leaf_depth {
                None => *leaf_depth = Some(depth),
                Some(d) => assert_eq!(d, depth, "leaves at different depths"),
            }
            leaves.push(p.cast::<Leaf>());
            n
        } else {
            assert!(n >= 1);
            let i = inner(p);
            let mut total = 0;
            for c in 0..=n {
                let clo = if c == 0 { lo } else { Some(ks[c - 1]) };
                let chi = if c == n { hi } else { Some(ks[c]) };
                total += check_node(
                    i.children[c].load(Ordering::Relaxed),
                    ints,
                    clo,
                    chi,
                    depth + 1,
                    leaf_depth,
                    leaves,
                );
            }
            total
        }
    }

    fn bound_of(kind: u64, k: &[u8]) -> Bound<&[u8]> {
        match kind {
            0 => Bound::Unbounded,
            1 => Bound::Included(k),
            _ => Bound::Excluded(k),
        }
    }

    #[test]
    fn empty_tree() {
        let t = BTree::new();
        assert!(t.is_empty());
        assert_eq!(t.get(b""), None);
        for dir in [ScanDirection::Ascending, ScanDirection::Descending] {
            let got = collect(&t, Bound::Unbounded, Bound::Unbounded, dir, usize::MAX);
            assert!(got.is_empty());
        }
        assert_eq!(t.insert(b"", 7), Ok(()));
        assert_eq!(t.get(b""), Some(7));
        assert_eq!(t.len(), 1);
        t.check_invariants();
    }

    #[test]
    fn duplicate_insert_returns_existing() {
        let t = BTree::new();
        assert_eq!(t.insert(b"a", 1), Ok(()));
        assert_eq!(t.insert(b"a", 2), Err(1));
        assert_eq!(t.insert(b"a\0", 3), Ok(()));
        assert_eq!(t.insert(b"a\0", 4), Err(3));
        assert_eq!(t.get(b"a"), Some(1));
        assert_eq!(t.get(b"a\0"), Some(3));
        assert_eq!(t.get(b"a\0\0"), None);
        assert_eq!(t.len(), 2);
        // Duplicates in a tree with many leaves.
        for i in 0..5000u64 {
            assert_eq!(t.insert(&i.to_be_bytes(), i), Ok(()));
        }
        for i in 0..5000u64 {
            assert_eq!(t.insert(&i.to_be_bytes(), i + 1), Err(i));
        }
        assert_eq!(t.len(), 5002);
        t.check_invariants();
    }

    /// Keys of up to four components, the first three integers (small, of a few thousand,
    /// negative, around the compact code's 2^52 limit, huge), then sometimes bytes; some
    /// cut inside a component, some turned into `prefix_end` bounds.
    fn int_key(rng: &mut SplitMix64) -> Vec<u8> {
        let mut k = Vec::new();
        for _ in 0..rng.below(5) {
            let i: i64 = match rng.below(8) {
                0..=2 => rng.below(20) as i64,
                3 => rng.below(5000) as i64,
                4 => -(rng.below(3) as i64) - 1,
                5 => (1 << 52) - 1 + rng.below(3) as i64,
                6 => i64::MAX - rng.below(2) as i64,
                _ => rng.next() as i64,
            };
            k.extend_from_slice(&((i as u64) ^ (1 << 63)).to_be_bytes());
        }
        if rng.below(3) == 0 {
            let len = rng.below(12) as usize;
            k.extend(rng.bytes(len, ALL_BYTES));
        }
        match rng.below(6) {
            0 => k.truncate(rng.below(k.len() as u64 + 1) as usize),
            1 => {
                if let Some(e) = crate::index::prefix_end(&k) {
                    k = e;
                }
            }
            _ => {}
        }
        k
    }

    /// Compact prefixes never order two keys against their memcmp order, and two whole
    /// codes with equal prefixes order their keys by length.
    #[test]
    fn compact_prefixes_keep_the_key_order() {
        let mut rng = SplitMix64(0x5eed_0009);
        let mut keys: Vec<Vec<u8>> = (0..20_000).map(|_| int_key(&mut rng)).collect();
        keys.sort();
        keys.dedup();
        let mut exact = 0;
        for ints in 1..=3u8 {
            let coded: Vec<(u64, u8)> = keys.iter().map(|k| prefix_of(k, ints)).collect();
            exact += coded.iter().filter(|c| c.1 != INEXACT).count();
            for _ in 0..200_000 {
                let i = rng.below(keys.len() as u64) as usize;
                let j = (i + 1 + rng.below(8) as usize).min(keys.len() - 1);
                let j = if rng.below(4) == 0 {
                    rng.below(keys.len() as u64) as usize
                } else {
                    j
                };
                let (a, b) = (coded[i], coded[j]);
                let want = keys[i].cmp(&keys[j]);
                if a.0 != b.0 {
                    assert_eq!(
                        a.0.cmp(&b.0),
                        want,
                        "{ints}: {:?} vs {:?}",
                        keys[i],
                        keys[j]
                    );
                } else if a.1 != INEXACT && b.1 != INEXACT {
                    assert_eq!(
                        a.1.cmp(&b.1),
                        want,
                        "{ints}: {:?} vs {:?}",
                        keys[i],
                        keys[j]
                    );
                }
            }
        }
        // (1, 5, 3000, 7) in 8 + 8 + 16 + 8 bits: whole.
        let mut k = Vec::new();
        for i in [1i64, 5, 3000, 7] {
            k.extend_from_slice(&((i as u64) ^ (1 << 63)).to_be_bytes());
        }
        assert_eq!(prefix_of(&k, 4).1, 40);
        // The length rule was exercised, not only the prefix order.
        assert!(exact > 1000, "{exact} of {}", 3 * keys.len());
    }

    /// `Bits::int`'s single push writes what pushing the length code and then the nibbles
    /// wrote, at every fill level of the accumulator.
    #[test]
    fn an_int_code_in_one_push_is_the_code_then_the_nibbles() {
        let mut rng = SplitMix64(0x5eed_0010);
        for _ in 0..200_000 {
            let used = rng.below(65) as u32;
            let acc = if used == 0 {
                0
            } else {
                rng.next() & (u64::MAX << (64 - used))
            };
            let v = match rng.below(3) {
                0 => rng.below(16),
                1 => rng.next() >> rng.below(64),
                _ => rng.next(),
            };
            let u = v ^ (1 << 63);
            let mut one = Bits { acc, used };
            let got = one.int(u);
            let mut two = Bits { acc, used };
            let want = if u < 1 << 63 {
                two.push(0, 4);
                false
            } else {
                let v = u - (1 << 63);
                let nibbles = (64 - v.leading_zeros()).div_ceil(4);
                if nibbles > 13 {
                    two.push(15, 4);
                    false
                } else {
                    two.push(nibbles as u64 + 1, 4) && two.push(v, 4 * nibbles)
                }
            };
            assert_eq!(
                (one.acc, one.used, got),
                (two.acc, two.used, want),
                "{used} bits, {v}"
            );
        }
    }

    #[test]
    fn random_model_inserts_gets_scans() {
        random_model(BTree::new(), random_key, 0x5eed_0001);
    }

    #[test]
    fn random_model_with_compact_prefixes() {
        random_model(BTree::new().with_int_components(3), int_key, 0x5eed_0008);
        random_model(BTree::new().with_int_components(1), random_key, 0x5eed_0007);
    }

    fn random_model(t: BTree, random_key: fn(&mut SplitMix64) -> Vec<u8>, seed: u64) {
        let mut rng = SplitMix64(seed);
        let mut m: BTreeMap<Vec<u8>, u64> = BTreeMap::new();
        for must in [
            &b""[..],
            b"\0",
            b"\0\0",
            b"abcdefgh",
            b"abcdefgh\0",
            b"abcdefgh\0\0",
        ] {
            assert_eq!(t.insert(must, value_for(must)), Ok(()));
            m.insert(must.to_vec(), value_for(must));
        }
        for i in 0..30_000u64 {
            let k = random_key(&mut rng);
            let v = i;
            let r = t.insert(&k, v);
            match m.get(&k) {
                Some(&old) => assert_eq!(r, Err(old), "duplicate insert of {k:?}"),
                None => {
                    assert_eq!(r, Ok(()), "fresh insert of {k:?}");
                    m.insert(k, v);
                }
            }
        }
        assert_eq!(t.len(), m.len());
        assert_eq!(t.check_invariants(), m.len());
        for (k, v) in &m {
            assert_eq!(t.get(k), Some(*v), "get {k:?}");
        }
        for _ in 0..5000 {
            let k = random_key(&mut rng);
            assert_eq!(t.get(&k), m.get(&k).copied());
        }
        let keys: Vec<&Vec<u8>> = m.keys().collect();
        let dirs = [ScanDirection::Ascending, ScanDirection::Descending];
        for round in 0..120 {
            let pick = |rng: &mut SplitMix64| -> Vec<u8> {
                if rng.below(2) == 0 {
                    keys[rng.below(keys.len() as u64) as usize].clone()
                } else {
                    random_key(rng)
                }
            };
            let a = pick(&mut rng);
            let b = pick(&mut rng);
            let (a, b) = if round % 10 == 0 || a <= b {
                (a, b)
            } else {
                (b, a)
            }; // some inverted
            for lk in 0..3 {
                for hk in 0..3 {
                    let lo = bound_of(lk, &a);
                    let hi = bound_of(hk, &b);
                    for dir in dirs {
                        let limit = match rng.below(4) {
                            0 => 1 + rng.below(5) as usize,
                            1 => 1 + rng.below(100) as usize,
                            _ => usize::MAX,
                        };
                        let got = collect(&t, lo, hi, dir, limit);
                        let want = expected(&m, lo, hi, dir, limit);
                        assert_eq!(got, want, "scan {lo:?}..{hi:?} {dir:?} limit {limit}");
                    }
                }
            }
        }
        // Full scans both ways.
        let all = collect(
            &t,
            Bound::Unbounded,
            Bound::Unbounded,
            ScanDirection::Ascending,
            usize::MAX,
        );
        assert_eq!(
            all,
            expected(
                &m,
                Bound::Unbounded,
                Bound::Unbounded,
                ScanDirection::Ascending,
                usize::MAX
            )
        );
        let all = collect(
            &t,
            Bound::Unbounded,
            Bound::Unbounded,
            ScanDirection::Descending,
            usize::MAX,
        );
        assert_eq!(
            all,
            expected(
                &m,
                Bound::Unbounded,
                Bound::Unbounded,
                ScanDirection::Descending,
                usize::MAX
            )
        );
    }

    fn spaced_tree() -> BTree {
        let t = BTree::new();
        for i in 0..5000u32 {
            let k = format!("key{:06}", i * 10);
            assert_eq!(t.insert(k.as_bytes(), u64::from(i)), Ok(()));
        }
        t
    }

    #[test]
    fn early_stop_returns_the_first_entries() {
        let t = spaced_tree();
        for dir in [ScanDirection::Ascending, ScanDirection::Descending] {
            let got = collect(&t, Bound::Unbounded, Bound::Unbounded, dir, 3);
            assert_eq!(got.len(), 3);
            let want = if dir == ScanDirection::Ascending {
                b"key000000"
            } else {
                b"key049990"
            };
            assert_eq!(got[0].0, want);
        }
    }

    #[test]
    fn sequential_orders_and_long_keys() {
        // Ascending and descending insertion orders build deep trees (many root splits).
        for rev in [false, true] {
            let t = BTree::new();
            let n = 60_000u64;
            for i in 0..n {
                let i = if rev { n - 1 - i } else { i };
                assert_eq!(t.insert(&i.to_be_bytes(), i), Ok(()));
            }
            assert_eq!(t.check_invariants(), n as usize);
            let mut expect = 0u64;
            t.scan(
                Bound::Unbounded,
                Bound::Unbounded,
                ScanDirection::Ascending,
                &mut |k, v| {
                    assert_eq!(k, expect.to_be_bytes());
                    assert_eq!(v, expect);
                    expect += 1;
                    true
                },
            );
            assert_eq!(expect, n);
            t.scan(
                Bound::Unbounded,
                Bound::Unbounded,
                ScanDirection::Descending,
                &mut |_, v| {
                    expect -= 1;
                    assert_eq!(v, expect);
                    true
                },
            );
            assert_eq!(expect, 0);
        }
        // 4096-byte keys differing only near the end.
        let t = BTree::new();
        let mut m = BTreeMap::new();
        let mut rng = SplitMix64(0x5eed_0004);
        for i in 0..600u64 {
            let mut k = vec![b'p'; 4096 - 8];
            k.extend(rng.next().to_be_bytes());
            if i % 3 == 0 {
                k.truncate(4096 - rng.below(16) as usize);
            }
            if t.insert(&k, i).is_ok() {
                m.insert(k, i);
            }
        }
        assert_eq!(t.check_invariants(), m.len());
        let got = collect(
            &t,
            Bound::Unbounded,
            Bound::Unbounded,
            ScanDirection::Descending,
            usize::MAX,
        );
        assert_eq!(
            got,
            expected(
                &m,
                Bound::Unbounded,
                Bound::Unbounded,
                ScanDirection::Descending,
                usize::MAX
            )
        );
    }

    #[test]
    fn tree_is_send_sync() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<BTree>();
    }

    /// Random keys of varied lengths; two writers share 20k of their keys (so
    /// duplicate inserts race), two checker threads scan and read concurrently.
    #[test]
    fn concurrent_inserts_scans_and_gets() {
        const WRITERS: usize = 2;
        const OWN: usize = 80_000;
        const SHARED: usize = 20_000;
        let mut rng = SplitMix64(0x5eed_0005);
        let mut distinct = BTreeSet::new();
        let mut gen_unique = |rng: &mut SplitMix64| loop {
            let k = random_key(rng);
            if distinct.insert(k.clone()) {
                return k;
            }
        };
        let shared: Vec<Vec<u8>> = (0..SHARED).map(|_| gen_unique(&mut rng)).collect();
        let mut lists: Vec<Vec<Vec<u8>>> = Vec::new();
        for w in 0..WRITERS {
            let mut l: Vec<Vec<u8>> = (0..OWN).map(|_| gen_unique(&mut rng)).collect();
            l.extend(shared.iter().cloned());
            let mut r = SplitMix64(w as u64 + 99);
            for i in (1..l.len()).rev() {
                let j = r.below(i as u64 + 1) as usize;
                l.swap(i, j);
            }
            lists.push(l);
        }
        run_concurrent(BTree::new(), lists, distinct, 0x5eed_0006);
    }

    /// A removable tree against a model: rounds of inserts and removes (leaves emptied and
    /// refilled, separators whose entries are gone), with gets and scans both ways checked
    /// after each round.
    #[test]
    fn removable_random_model_inserts_removes_gets_scans() {
        let mut rng = SplitMix64(0x5eed_00a1);
        let t = BTree::removable();
        let mut m: BTreeMap<Vec<u8>, u64> = BTreeMap::new();
        for round in 0..8u64 {
            for i in 0..6_000u64 {
                let k = random_key(&mut rng);
                let v = round * 10_000 + i;
                match m.get(&k) {
                    Some(&old) => assert_eq!(t.insert(&k, v), Err(old)),
                    None => {
                        assert_eq!(t.insert(&k, v), Ok(()));
                        m.insert(k, v);
                    }
                }
            }
            // Remove most entries (all of them in round 3), and some absent keys.
            let keep = if round == 3 { 0 } else { 4 };
            let keys: Vec<Vec<u8>> = m.keys().cloned().collect();
            for k in keys {
                if rng.below(10) >= keep {
                    assert!(t.remove(&k), "remove {k:?}");
                    m.remove(&k);
                }
            }
            for _ in 0..200 {
                let k = random_key(&mut rng);
                assert_eq!(t.remove(&k), m.remove(&k).is_some(), "remove {k:?}");
            }
            assert_eq!(t.len(), m.len());
            assert_eq!(t.check_invariants(), m.len());
            for (k, v) in &m {
                assert_eq!(t.get(k), Some(*v), "get {k:?}");
            }
            for dir in [ScanDirection::Ascending, ScanDirection::Descending] {
                let all = (Bound::Unbounded, Bound::Unbounded);
                assert_eq!(
                    collect(&t, all.0, all.1, dir, usize::MAX),
                    expected(&m, all.0, all.1, dir, usize::MAX)
                );
                for _ in 0..20 {
                    let (a, b) = (random_key(&mut rng), random_key(&mut rng));
                    let (a, b) = if a <= b { (a, b) } else { (b, a) };
                    let (lo, hi) = (Bound::Included(&a[..]), Bound::Excluded(&b[..]));
                    assert_eq!(collect(&t, lo, hi, dir, 50), expected(&m, lo, hi, dir, 50));
                }
            }
        }
    }

    /// Removes race scans and inserts: two threads insert and remove their own churning
    /// keys while a scanner walks the whole tree both ways. Every scan sees strictly ordered
    /// keys and every stable key (inserted first, never removed); at the end the tree holds
    /// exactly the stable keys and each thread's survivors.
    #[test]
    fn removable_concurrent_removes_keep_scans_ordered_and_stable_keys_seen() {
        let t = BTree::removable();
        let stable: Vec<Vec<u8>> = (0..2_000u64)
            .map(|i| (i * 2).to_be_bytes().to_vec())
            .collect();
        for k in &stable {
            t.insert(k, 1).unwrap();
        }
        let done = AtomicBool::new(false);
        let survivors: Vec<Vec<Vec<u8>>> = std::thread::scope(|s| {
            let scanner = s.spawn(|| {
                let mut scans = 0;
                while !done.load(Ordering::Acquire) || scans < 3 {
                    for dir in [ScanDirection::Ascending, ScanDirection::Descending] {
                        let got = collect(&t, Bound::Unbounded, Bound::Unbounded, dir, usize::MAX);
                        let ordered = got.windows(2).all(|w| match dir {
                            ScanDirection::Ascending => w[0].0 < w[1].0,
                            ScanDirection::Descending => w[0].0 > w[1].0,
                        });
                        assert!(ordered, "scan out of order");
                        let seen: BTreeSet<&[u8]> = got.iter().map(|(k, _)| &k[..]).collect();
                        assert!(
                            stable.iter().all(|k| seen.contains(&k[..])),
                            "a stable key was skipped"
                        );
                    }
                    scans += 1;
                }
            });
            let writers: Vec<_> = (0..2u64)
                .map(|w| {
                    let t = &t;
                    s.spawn(move || {
                        let mut rng = SplitMix64(0x5eed_00b0 + w);
                        let mut live: Vec<Vec<u8>> = Vec::new();
                        for i in 0..40_000u64 {
                            if live.len() > 500 && rng.below(2) == 0 {
                                let k = live.swap_remove(rng.below(live.len() as u64) as usize);
                                assert!(t.remove(&k));
                            } else {
                                // Odd keys (between the stable ones), each thread its own.
                                let k = ((i * 2 + w) * 2 + 1).to_be_bytes().to_vec();
                                t.insert(&k, w).unwrap();
                                live.push(k);
                            }
                        }
                        live
                    })
                })
                .collect();
            let out = writers.into_iter().map(|h| h.join().unwrap()).collect();
            done.store(true, Ordering::Release);
            scanner.join().unwrap();
            out
        });
        let mut want: BTreeSet<Vec<u8>> = stable.into_iter().collect();
        want.extend(survivors.into_iter().flatten());
        let got: Vec<Vec<u8>> = collect(
            &t,
            Bound::Unbounded,
            Bound::Unbounded,
            ScanDirection::Ascending,
            usize::MAX,
        )
        .into_iter()
        .map(|(k, _)| k)
        .collect();
        assert_eq!(got, want.into_iter().collect::<Vec<_>>());
        assert_eq!(t.check_invariants(), got.len());
    }

    #[test]
    #[should_panic(expected = "remove on a BTree made without `removable`")]
    fn remove_on_a_plain_tree_panics() {
        BTree::new().remove(b"k");
    }

    /// Hot spot: two writers insert interleaved ascending 8-byte keys, so both hammer
    /// the rightmost leaf and every split (and root split) is contended.
    #[test]
    fn concurrent_hot_spot_inserts() {
        const PER_WRITER: u64 = 100_000;
        let lists: Vec<Vec<Vec<u8>>> = (0..2u64)
            .map(|t| {
                (0..PER_WRITER)
                    .map(|i| (i * 2 + t).to_be_bytes().to_vec())
                    .collect()
            })
            .collect();
        let distinct: BTreeSet<Vec<u8>> = lists.iter().flatten().cloned().collect();
        run_concurrent(BTree::new(), lists, distinct, 0x5eed_0007);
    }

    /// An encoded key of integer components (`schema::encode_int`).
    fn ints_key(parts: &[i64]) -> Vec<u8> {
        parts
            .iter()
            .flat_map(|&i| ((i as u64) ^ (1 << 63)).to_be_bytes())
            .collect()
    }

    /// The integer component `i` of an `ints_key`.
    fn ints_part(key: &[u8], i: usize) -> i64 {
        let mut b = [0u8; 8];
        b.copy_from_slice(&key[8 * i..8 * i + 8]);
        (u64::from_be_bytes(b) ^ (1 << 63)) as i64
    }

    /// TPC-C's shape: per district an ascending run of order ids, districts interleaved, so
    /// the end of one district's run shares a leaf with the start of the next. Two writers,
    /// each with five districts of its own and, as a race for the same leaves, alternate order
    /// ids of an eleventh, with the range scans and point reads of `run_concurrent` beside
    /// them. The hinted inserts must keep the tree exact, and be taken.
    #[test]
    fn concurrent_monotone_runs_interleaved_with_scans() {
        const ORDERS: i64 = 5_000;
        let mut rng = SplitMix64(0x5eed_0008);
        let lists: Vec<Vec<Vec<u8>>> = (0..2i64)
            .map(|t| {
                // Districts t, t + 2, ..., t + 8 are this writer's; district 10 is shared.
                let mut next = [0i64; 11];
                next[10] = t;
                let mut l = Vec::new();
                while l.len() < ORDERS as usize * 5 + ORDERS as usize / 2 {
                    let d = match rng.below(6) {
                        5 => 10,
                        i => (t + 2 * i as i64) as usize,
                    };
                    if next[d] < ORDERS {
                        l.push(ints_key(&[1, d as i64, next[d]]));
                        next[d] += if d == 10 { 2 } else { 1 };
                    }
                }
                l
            })
            .collect();
        let distinct: BTreeSet<Vec<u8>> = lists.iter().flatten().cloned().collect();
        assert_eq!(distinct.len(), ORDERS as usize * 11);
        let tree = run_concurrent(
            BTree::new().with_int_components(3),
            lists,
            distinct,
            0x5eed_0009,
        );
        assert!(
            tree.hinted_inserts() > tree.len() / 2,
            "only {} of {} inserts went to their hint's leaf",
            tree.hinted_inserts(),
            tree.len()
        );
    }

    /// One ascending run: every insert after the first goes to the hint's leaf until it is
    /// full; the next one descends and splits, and the hint then names the leaf it went to,
    /// the new right one. A key below that leaf's first key descends too; a duplicate found
    /// through the hint is refused with the stored value.
    #[test]
    fn insert_hint_is_taken_and_falls_back_when_the_leaf_splits() {
        let t = BTree::new().with_int_components(2);
        let slot = hint_slot(&ints_key(&[7, 0]));
        for o in 1..=LEAF_CAP as i64 {
            t.insert(&ints_key(&[7, o]), o as u64).unwrap();
        }
        assert_eq!(
            t.hinted_inserts(),
            LEAF_CAP - 1,
            "all but the first insert hinted"
        );
        let full = t.hints[slot].load(Ordering::Relaxed);
        // SAFETY: a live leaf of a quiescent tree.
        assert_eq!(
            unsafe { &*full }.hdr.count.load(Ordering::Relaxed),
            LEAF_CAP
        );

        // The leaf is full: the hint is refused, the insert descends and splits.
        t.insert(&ints_key(&[7, 33]), 33).unwrap();
        assert_eq!(
            t.hinted_inserts(),
            LEAF_CAP - 1,
            "a full leaf must not take it"
        );
        let right = t.hints[slot].load(Ordering::Relaxed);
        assert_ne!(right, full, "the hint moves to the split's right leaf");
        // SAFETY: as above.
        assert_eq!(unsafe { &*full }.next.load(Ordering::Relaxed), right);
        t.insert(&ints_key(&[7, 34]), 34).unwrap();
        assert_eq!(
            t.hinted_inserts(),
            LEAF_CAP,
            "the next key goes to the right leaf"
        );
        assert_eq!(
            t.insert(&ints_key(&[7, 33]), 99),
            Err(33),
            "duplicate via the hint"
        );
        assert_eq!(t.hints[slot].load(Ordering::Relaxed), right);

        // Below the right leaf's first key: descends, to the left leaf.
        t.insert(&ints_key(&[7, 0]), 0).unwrap();
        assert_eq!(t.hinted_inserts(), LEAF_CAP);
        assert_eq!(t.hints[slot].load(Ordering::Relaxed), full);
        assert_eq!(
            t.insert(&ints_key(&[7, 34]), 99),
            Err(34),
            "duplicate via a descent"
        );
        assert_eq!(t.hinted_inserts(), LEAF_CAP);
        assert_eq!(t.check_invariants(), 35);
        let want: Vec<(Vec<u8>, u64)> = (0..=34).map(|o| (ints_key(&[7, o]), o as u64)).collect();
        let got = collect(
            &t,
            Bound::Unbounded,
            Bound::Unbounded,
            ScanDirection::Ascending,
            usize::MAX,
        );
        assert_eq!(got, want);
    }

    /// Interleaved ascending runs (ten districts' order ids) leave full leaves behind them:
    /// a run that fills its hinted leaf splits it where it inserts, not in the middle, so
    /// the leaves hold about 31 entries, not 16. Keys in random order still split in the
    /// middle (no leaf is left with fewer than half).
    #[test]
    fn ascending_runs_split_where_they_insert() {
        fn leaves(t: &BTree) -> Vec<usize> {
            let mut out = Vec::new();
            let mut lp = t.find_leaf(Target::Leftmost).0;
            while !lp.is_null() {
                // SAFETY: live leaves of a quiescent tree.
                let lf = unsafe { &*lp };
                out.push(lf.hdr.count.load(Ordering::Relaxed));
                lp = lf.next.load(Ordering::Relaxed);
            }
            out
        }
        let t = BTree::new().with_int_components(3);
        let mut rng = SplitMix64(0x5eed_000a);
        let mut next = [0i64; 10];
        for _ in 0..20_000 {
            let d = rng.below(10) as usize;
            t.insert(&ints_key(&[1, d as i64, next[d]]), 0).unwrap();
            next[d] += 1;
        }
        assert_eq!(t.check_invariants(), 20_000);
        let counts = leaves(&t);
        let fill = 20_000.0 / (counts.len() * LEAF_CAP) as f64;
        assert!(fill > 0.9, "ascending runs left leaves {fill:.2} full");

        let r = BTree::new();
        let mut rng = SplitMix64(0x5eed_000b);
        for _ in 0..20_000 {
            let _ = r.insert(&rng.next().to_be_bytes(), 0);
        }
        r.check_invariants();
        let counts = leaves(&r);
        assert!(
            counts.iter().all(|&c| c >= LEAF_CAP / 2),
            "a random insert split a leaf off center"
        );
    }

    /// A hint whose leaf has a right sibling: a key inside the leaf's range goes there, in
    /// the middle or past its last key; one above its upper fence must not (it belongs to
    /// the sibling), even though it is above the leaf's last key.
    #[test]
    fn insert_hint_respects_the_upper_fence() {
        let t = BTree::new().with_int_components(2);
        // In random order (leaves split in the middle, so the first has room for two more).
        let mut order: Vec<i64> = (0..40).collect();
        let mut rng = SplitMix64(0x5eed_000c);
        for i in (1..order.len()).rev() {
            order.swap(i, rng.below(i as u64 + 1) as usize);
        }
        for o in order {
            t.insert(&ints_key(&[1, o * 10]), 0).unwrap();
        }
        let slot = hint_slot(&ints_key(&[1, 0]));
        // Point the run's hint at its first leaf, whose upper fence is inside the run.
        let first = t.find_leaf(Target::Leftmost).0 as *mut Leaf;
        t.hints[slot].store(first, Ordering::Relaxed);
        // SAFETY: a live leaf of a quiescent tree, and its live key blocks.
        let (last, high) = unsafe {
            let lf = &*first;
            let n = lf.hdr.count.load(Ordering::Relaxed);
            (
                ints_part(key_bytes(lf.keys[n - 1].load(Ordering::Relaxed)), 1),
                ints_part(key_bytes(lf.high.load(Ordering::Relaxed)), 1),
            )
        };
        assert!(high > last + 1, "the first leaf ends inside the run");

        let before = t.hinted_inserts();
        t.insert(&ints_key(&[1, high + 1]), 1).unwrap();
        assert_eq!(
            t.hinted_inserts(),
            before,
            "a key above the upper fence must descend"
        );
        t.hints[slot].store(first, Ordering::Relaxed);
        t.insert(&ints_key(&[1, last + 1]), 2).unwrap();
        t.insert(&ints_key(&[1, 5]), 3).unwrap();
        assert_eq!(
            t.hinted_inserts(),
            before + 2,
            "keys inside the range go there"
        );
        assert_eq!(t.check_invariants(), 43);
        assert_eq!(t.get(&ints_key(&[1, high + 1])), Some(1));
        assert_eq!(t.get(&ints_key(&[1, last + 1])), Some(2));
        assert_eq!(t.get(&ints_key(&[1, 5])), Some(3));
    }

    /// `get_near` gives `get`'s answer whatever its hint holds: runs of nearby keys (the
    /// hint's leaf), jumps, keys that are not there (inside and outside the hinted leaf's
    /// range), and a hint left by another tree; the hinted leaf answers only keys in its
    /// range.
    #[test]
    fn get_near_answers_as_get_does() {
        let t = BTree::new().with_int_components(4);
        let mut rng = SplitMix64(0x5eed_0021);
        // Order lines: (w, d, o, n), n in 1..=10, every other order left out.
        let mut keys = Vec::new();
        for d in 1..=3 {
            for o in (1..400).step_by(2) {
                for n in 1..=10 {
                    keys.push(ints_key(&[1, d, o, n]));
                }
            }
        }
        for i in (1..keys.len()).rev() {
            keys.swap(i, rng.below(i as u64 + 1) as usize);
        }
        for (v, k) in keys.iter().enumerate() {
            t.insert(k, v as u64).unwrap();
        }
        let mut hint = GetHint::default();
        let mut probes = 0;
        for _ in 0..3000 {
            let (d, o) = (rng.below(4) as i64, rng.below(402) as i64);
            // A run of one order's lines, one past its end; then a jump.
            for n in 0..=11 {
                let k = ints_key(&[1, d, o, n]);
                assert_eq!(t.get_near(&k, &mut hint), t.get(&k), "{d} {o} {n}");
                probes += 1;
            }
        }
        assert!(probes > 30_000);
        // The hinted leaf answers a key in its range, and only such keys.
        let inside = ints_key(&[1, 2, 201, 5]);
        t.get_near(&inside, &mut hint);
        let leaf = hint.leaf;
        assert!(!leaf.is_null());
        let probe = t.probe(&inside);
        assert_eq!(t.get_in_leaf(leaf, probe), Some(t.get(&inside)));
        for far in [
            ints_key(&[1, 1, 1, 1]),
            ints_key(&[1, 3, 399, 10]),
            ints_key(&[2]),
        ] {
            assert_eq!(t.get_in_leaf(leaf, t.probe(&far)), None, "{far:?}");
            assert_eq!(t.get_near(&far, &mut hint), t.get(&far));
        }
        // Another tree's hint is not used on this one.
        let other = BTree::new().with_int_components(4);
        other.insert(&inside, 7).unwrap();
        let mut h2 = GetHint::default();
        assert_eq!(other.get_near(&inside, &mut h2), Some(7));
        assert_eq!(t.get_near(&inside, &mut h2), t.get(&inside));
        assert!(ptr::eq(h2.tree, &t), "the descent keeps this tree's leaf");
    }

    /// Gets through a hint stay right while another thread's inserts split the hinted
    /// leaves: every key loaded before the run is found with its value, every key never
    /// inserted is not.
    #[test]
    fn get_near_is_right_while_inserts_split_its_leaves() {
        let t = Arc::new(BTree::new().with_int_components(3));
        let before: Vec<Vec<u8>> = (0..4000).map(|o| ints_key(&[1, o * 4, 0])).collect();
        for (v, k) in before.iter().enumerate() {
            t.insert(k, v as u64).unwrap();
        }
        let done = Arc::new(AtomicBool::new(false));
        let writer = {
            let (t, done) = (t.clone(), done.clone());
            std::thread::spawn(move || {
                let mut rng = SplitMix64(0x5eed_0022);
                for n in 0..100_000 {
                    // Between the loaded keys, in random places: leaves split under the
                    // reader's hint.
                    let o = rng.below(4000) as i64;
                    let _ = t.insert(&ints_key(&[1, o * 4 + 1 + rng.below(2) as i64, n]), 0);
                }
                done.store(true, Ordering::Release);
            })
        };
        let mut hint = GetHint::default();
        // Rounds until the writer is done (at least 3), so that gets and splits overlap.
        let mut round = 0;
        while round < 3 || !done.load(Ordering::Acquire) {
            for (v, k) in before.iter().enumerate() {
                assert_eq!(t.get_near(k, &mut hint), Some(v as u64), "round {round}");
                let absent = ints_key(&[1, v as i64 * 4 + 3, 0]);
                assert_eq!(t.get_near(&absent, &mut hint), None);
            }
            round += 1;
        }
        writer.join().unwrap();
        assert_eq!(t.check_invariants(), 4000 + 100_000);
    }

    /// One writer thread per list inserts it in order while two checker threads
    /// check scan order, completeness w.r.t. keys whose insert returned before the
    /// scan started, that a rescan (inserts only) loses no key, and point reads; finally the tree is compared with `distinct`.
    fn run_concurrent(
        tree: BTree,
        lists: Vec<Vec<Vec<u8>>>,
        distinct: BTreeSet<Vec<u8>>,
        seed: u64,
    ) -> Arc<BTree> {
        let writers_n = lists.len();
        let total_distinct = distinct.len();
        let lists = Arc::new(lists);
        let tree = Arc::new(tree);
        let done: Arc<Vec<AtomicUsize>> =
            Arc::new((0..writers_n).map(|_| AtomicUsize::new(0)).collect());
        let stop = Arc::new(AtomicBool::new(false));

        let mut writers = Vec::new();
        for w in 0..writers_n {
            let (tree, lists, done) = (tree.clone(), lists.clone(), done.clone());
            writers.push(std::thread::spawn(move || {
                let mut oks = 0usize;
                for (i, k) in lists[w].iter().enumerate() {
                    match tree.insert(k, value_for(k)) {
                        Ok(()) => oks += 1,
                        Err(v) => assert_eq!(v, value_for(k), "Err must carry the stored value"),
                    }
                    done[w].store(i + 1, Ordering::Release);
                }
                oks
            }));
        }

        let mut checkers = Vec::new();
        for s in 0..2u64 {
            let (tree, lists, done, stop) =
                (tree.clone(), lists.clone(), done.clone(), stop.clone());
            checkers.push(std::thread::spawn(move || {
                let mut rng = SplitMix64(seed + s);
                let mut scans = 0usize;
                while !stop.load(Ordering::Acquire) || scans < 4 {
                    let snapshot: Vec<usize> =
                        done.iter().map(|d| d.load(Ordering::Acquire)).collect();
                    let a = random_key(&mut rng);
                    let b = random_key(&mut rng);
                    let (a, b) = if a <= b { (a, b) } else { (b, a) };
                    let (lo, hi) = if scans.is_multiple_of(4) {
                        (Bound::Unbounded, Bound::Unbounded)
                    } else {
                        (
                            bound_of(1 + rng.below(2), &a),
                            bound_of(1 + rng.below(2), &b),
                        )
                    };
                    let dir = if rng.below(2) == 0 {
                        ScanDirection::Ascending
                    } else {
                        ScanDirection::Descending
                    };
                    let got = collect(&tree, lo, hi, dir, usize::MAX);
                    for w in got.windows(2) {
                        match dir {
                            ScanDirection::Ascending => {
                                assert!(w[0].0 < w[1].0, "ascending order broken")
                            }
                            ScanDirection::Descending => {
                                assert!(w[0].0 > w[1].0, "descending order broken")
                            }
                        }
                    }
                    for (k, v) in &got {
                        assert!(above_lo(k, lo) && below_hi(k, hi), "key outside range");
                        assert_eq!(*v, value_for(k));
                    }
                    let mut sorted: Vec<&[u8]> = got.iter().map(|(k, _)| k.as_slice()).collect();
                    if dir == ScanDirection::Descending {
                        sorted.reverse();
                    }
                    for (w, &n) in snapshot.iter().enumerate() {
                        for k in &lists[w][..n] {
                            if above_lo(k, lo) && below_hi(k, hi) {
                                assert!(
                                    sorted.binary_search(&k.as_slice()).is_ok(),
                                    "scan missed key {k:?} inserted before it started"
                                );
                            }
                        }
                    }
                    // The tree only grows: a rescan finds every key of the first scan.
                    let again: BTreeSet<Vec<u8>> = collect(&tree, lo, hi, dir, usize::MAX)
                        .into_iter()
                        .map(|(k, _)| k)
                        .collect();
                    for (k, _) in &got {
                        assert!(again.contains(k), "rescan lost {k:?}");
                    }
                    // Point reads of completed inserts.
                    for _ in 0..200 {
                        let w = rng.below(writers_n as u64) as usize;
                        let n = done[w].load(Ordering::Acquire);
                        if n > 0 {
                            let k = &lists[w][rng.below(n as u64) as usize];
                            assert_eq!(tree.get(k), Some(value_for(k)));
                        }
                    }
                    scans += 1;
                }
                scans
            }));
        }

        let oks: usize = writers
            .into_iter()
            .map(|h| h.join().expect("writer panicked"))
            .sum();
        stop.store(true, Ordering::Release);
        for c in checkers {
            assert!(c.join().expect("checker panicked") >= 4);
        }
        assert_eq!(
            oks, total_distinct,
            "each distinct key inserted exactly once"
        );
        assert_eq!(tree.len(), total_distinct);
        assert_eq!(tree.check_invariants(), total_distinct);
        let mut it = distinct.iter();
        tree.scan(
            Bound::Unbounded,
            Bound::Unbounded,
            ScanDirection::Ascending,
            &mut |k, v| {
                let want = it.next().expect("tree has more keys than the model");
                assert_eq!(k, want.as_slice());
                assert_eq!(v, value_for(k));
                true
            },
        );
        assert!(it.next().is_none(), "tree has fewer keys than the model");
        for k in &distinct {
            assert_eq!(tree.get(k), Some(value_for(k)));
        }
        tree
    }
}
