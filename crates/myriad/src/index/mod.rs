//! Index management (thesis §5.6). Indexes map order-preserving encoded keys to tuple ids
//! (logical pointers through the indirection array, so an update that does not change a key
//! touches no index). Two structures, both ours: a hash index of one-cache-line buckets
//! (`hash`) and an optimistic-lock-coupling B+tree (`btree`). Neither exposes node or bucket
//! versions to the transaction layer: the protocols detect phantoms themselves (re-scans at
//! commit, per-index stamps; see `cc/`).
//!
//! Secondary indexes are stored as multimaps (key → every tuple id that ever held the key);
//! stale entries are filtered by re-checking the key on the visible version, and uniqueness of
//! a unique secondary index is enforced logically by the concurrency control, not physically,
//! so a key can pass from one row to another.

pub mod btree;
pub mod hash;

pub use btree::{BTree, ScanDirection};
pub use hash::HashIndex;

use crate::ids::TupleId;
use crate::schema::IndexKind;
use std::ops::Bound;

/// One physical index. (A few per table, so the size of the hash variant does not matter; not
/// boxing it saves a dependent load on every lookup.)
#[allow(clippy::large_enum_variant)]
pub(crate) enum Index {
    Hash(HashIndex),
    Ordered(BTree),
}

/// Bytes of the tuple-id suffix of ordered secondary-index entries.
const TID_SUFFIX: usize = 8;

impl Index {
    /// An index of `kind`; `ints`: how many of its key's leading columns are INT (an
    /// ordered index then compares such keys by compact prefixes,
    /// `BTree::with_int_components`).
    pub fn new(kind: IndexKind, capacity_hint: usize, ints: u8) -> Self {
        match kind {
            IndexKind::Hash => Index::Hash(HashIndex::new(capacity_hint)),
            IndexKind::Ordered => Index::Ordered(BTree::new().with_int_components(ints)),
        }
    }

    /// An ordered index whose entries `remove_raw` can remove: the secondary indexes under
    /// index pointers `physical`, whose entries come and go with the versions they point
    /// at (`BTree::removable`).
    pub fn removable(ints: u8) -> Self {
        Index::Ordered(BTree::removable().with_int_components(ints))
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        match self {
            Index::Hash(h) => h.len(),
            Index::Ordered(b) => b.len(),
        }
    }

    pub fn is_ordered(&self) -> bool {
        matches!(self, Index::Ordered(_))
    }

    /// Primary index: the tuple id of `key`.
    #[inline]
    pub fn get_unique(&self, key: &[u8]) -> Option<TupleId> {
        match self {
            Index::Hash(h) => h.get(key),
            Index::Ordered(b) => b.get(key),
        }
        .map(TupleId::new)
    }

    /// `get_unique` under a pin the caller holds (a transaction's): the index takes none of
    /// its own.
    #[inline]
    pub fn get_unique_in(&self, key: &[u8], guard: &crossbeam_epoch::Guard) -> Option<TupleId> {
        match self {
            Index::Hash(h) => h.get_hashed_in(HashIndex::hash_key(key), key, guard),
            Index::Ordered(b) => b.get_in(key, guard),
        }
        .map(TupleId::new)
    }

    /// The hash a hash index files `key` under (0 for an ordered index, which ignores it).
    #[inline]
    pub fn hash_of(&self, key: &[u8]) -> u64 {
        match self {
            Index::Hash(_) => HashIndex::hash_key(key),
            Index::Ordered(_) => 0,
        }
    }

    /// Prefetches the cache line a lookup of the key with `hash_of` `hash` starts with (hash
    /// indexes only).
    #[inline]
    pub fn prefetch_hashed(&self, hash: u64) {
        if let Index::Hash(h) = self {
            h.prefetch_hashed(hash);
        }
    }

    /// `get_unique` for a key whose `hash_of` the caller already has, one of a run of
    /// lookups: an ordered index first tries the leaf `hint` keeps from the run's previous
    /// lookup (`BTree::get_near`). Under `guard`, a pin the caller holds (`get_unique_in`).
    #[inline]
    pub fn get_unique_near<'t>(
        &'t self,
        hash: u64,
        key: &[u8],
        hint: &mut btree::GetHint<'t>,
        guard: &crossbeam_epoch::Guard,
    ) -> Option<TupleId> {
        match self {
            Index::Hash(h) => h.get_hashed_in(hash, key, guard),
            Index::Ordered(b) => b.get_near_in(key, hint, guard),
        }
        .map(TupleId::new)
    }

    /// Primary index: maps `key` to `tid` unless the key exists (returns its tuple id).
    pub fn insert_unique(&self, key: &[u8], tid: TupleId) -> Result<(), TupleId> {
        match self {
            Index::Hash(h) => h.insert_unique(key, tid.get()),
            Index::Ordered(b) => b.insert(key, tid.get()),
        }
        .map_err(TupleId::new)
    }

    /// Secondary index: records that tuple `tid` holds (or held) `key`. Idempotent.
    pub fn insert_entry(&self, key: &[u8], tid: TupleId, buf: &mut Vec<u8>) {
        let tid = tid.get();
        match self {
            Index::Hash(h) => {
                h.insert(key, tid);
            }
            Index::Ordered(b) => {
                buf.clear();
                buf.extend_from_slice(key);
                buf.extend_from_slice(&tid.to_be_bytes());
                let _ = b.insert(buf, tid);
            }
        }
    }

    /// Ordered index: inserts the whole entry `key` with `value` (index pointers
    /// `logical-pk` and `physical`, whose entries are the secondary key followed by the
    /// primary key or the version's address; see `Table::add_entry`). Idempotent. A hash
    /// index ignores it (both reject hash secondary indexes).
    pub fn insert_raw(&self, key: &[u8], value: u64) {
        if let Index::Ordered(b) = self {
            let _ = b.insert(key, value);
        }
    }

    /// Removes the whole entry `key` (a removable index only; the others keep every entry).
    pub fn remove_raw(&self, key: &[u8]) {
        if let Index::Ordered(b) = self {
            if b.is_removable() {
                b.remove(key);
            }
        }
    }

    /// Secondary index: every tuple id recorded under `key`; stops when `f` returns false.
    pub fn lookup_entries(&self, key: &[u8], f: &mut dyn FnMut(TupleId) -> bool) {
        match self {
            Index::Hash(h) => h.for_each(key, &mut |t| f(TupleId::new(t))),
            Index::Ordered(_) => {
                let mut hi = key.to_vec();
                hi.extend_from_slice(&[0xFF; TID_SUFFIX + 1]);
                self.scan(
                    Bound::Included(key),
                    Bound::Excluded(&hi),
                    ScanDirection::Ascending,
                    false,
                    &mut |k, t| k.len() != key.len() + TID_SUFFIX || f(TupleId::new(t)),
                );
            }
        }
    }

    /// Ordered scan over encoded key bounds; `f(entry key without tid suffix, value)`.
    /// `secondary` says whether entries carry a tuple-id suffix. The value is the raw
    /// entry value: a tuple id (`TupleId::new`), except in the secondary indexes under
    /// index pointers `logical-pk` and `physical` (see `Table::add_entry`). Hash indexes
    /// cannot scan.
    pub fn scan(
        &self,
        lo: Bound<&[u8]>,
        hi: Bound<&[u8]>,
        dir: ScanDirection,
        secondary: bool,
        f: &mut dyn FnMut(&[u8], u64) -> bool,
    ) {
        self.scan_stamped(lo, hi, dir, secondary, f, None)
    }

    /// `scan`, with the leaves it read stamped (`BTree::scan_stamped`).
    pub(crate) fn scan_stamped(
        &self,
        lo: Bound<&[u8]>,
        hi: Bound<&[u8]>,
        dir: ScanDirection,
        secondary: bool,
        f: &mut dyn FnMut(&[u8], u64) -> bool,
        stamps: Option<&mut Vec<btree::NodeStamp>>,
    ) {
        let Index::Ordered(b) = self else { return };
        if secondary {
            let mut g = |k: &[u8], t| {
                let n = k.len().saturating_sub(TID_SUFFIX);
                f(&k[..n], t)
            };
            b.scan_stamped(lo, hi, dir, &mut g, stamps)
        } else {
            b.scan_stamped(lo, hi, dir, f, stamps)
        }
    }

    /// Whether the leaves of `stamps` (this index's, `scan_stamped`) are unchanged since
    /// (`BTree::stamps_hold`). A hash index has none to stamp: false.
    pub(crate) fn stamps_hold(&self, stamps: &[btree::NodeStamp]) -> bool {
        match self {
            Index::Ordered(b) => b.stamps_hold(stamps),
            Index::Hash(_) => false,
        }
    }
}

/// The smallest byte string greater than every string that starts with `prefix`
/// (`None` if there is none: the prefix is all `0xFF`).
pub(crate) fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut p = prefix.to_vec();
    while let Some(last) = p.pop() {
        if last < 0xFF {
            p.push(last + 1);
            return Some(p);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A lookup under a pin the caller holds (a transaction's, held across the lookups)
    /// answers as one that pins itself: for a hash index that grows under that pin (its
    /// old bucket arrays retired while the pin lives), and for plain and removable trees.
    #[test]
    fn lookups_under_a_held_pin_answer_as_self_pinned_ones() {
        let key = |i: u64| (i * 7919).to_be_bytes();
        for index in [
            Index::new(IndexKind::Hash, 16, 0),
            Index::new(IndexKind::Ordered, 0, 1),
            Index::removable(1),
        ] {
            let guard = crossbeam_epoch::pin();
            let mut hint = btree::GetHint::default();
            for i in 0..5_000u64 {
                assert_eq!(index.insert_unique(&key(i), TupleId::new(i + 1)), Ok(()));
                if i % 97 == 0 {
                    // Keys inserted so far, and one not yet inserted.
                    for j in [0, i / 2, i, i + 1] {
                        let k = key(j);
                        let want = index.get_unique(&k);
                        assert_eq!(want, (j <= i).then(|| TupleId::new(j + 1)));
                        assert_eq!(index.get_unique_in(&k, &guard), want);
                        let h = index.hash_of(&k);
                        assert_eq!(index.get_unique_near(h, &k, &mut hint, &guard), want);
                    }
                }
            }
            if let Index::Hash(h) = &index {
                assert!(h.bucket_count() > 16, "the hash index should have grown");
            }
        }
    }

    #[test]
    fn prefix_end_works() {
        assert_eq!(prefix_end(b"ab"), Some(b"ac".to_vec()));
        assert_eq!(prefix_end(&[1, 0xFF]), Some(vec![2]));
        assert_eq!(prefix_end(&[0xFF, 0xFF]), None);
    }
}
