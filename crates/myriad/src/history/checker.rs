//! Offline history checker: Adya's direct serialization graph (DSG).
//!
//! The engine records, for every COMMITTED transaction, which version of each key it read, what
//! it wrote (with the written row's secondary-index keys) and which primary-key or
//! secondary-index ranges it scanned. [`check`] builds the dependency graph over
//! those transactions and reports every cycle that the isolation level of a transaction on the
//! cycle forbids, naming the transactions and keys on it.
//!
//! # Edges
//! The version order of a key is its writers sorted by commit timestamp (writer `0`, the initial
//! state / bulk load, comes first). [`check_with_version_order`] can override it per key (for
//! example with the order of the in-memory version chain, so that a chain that disagrees with the
//! commit order shows up as a `G0`).
//!
//! * `ww`: consecutive writers of a key, `W1 -> W2`.
//! * `wr`: the writer of the version a transaction read, `W -> T` (reads of one's own writes and
//!   of the initial state add nothing). A scan that observed a key as absent because the last
//!   version visible at its snapshot (`commit_ts <= begin_ts`) is a delete also gets `D -> T`
//!   (Adya's predicate-read dependency; earlier writers reach `D` through `ww`).
//! * `rw` (anti-dependency): `T` read the version of `W` (or observed the absence left by `W`'s
//!   delete, or by the initial state); the next writer `U != T` after `W` gives `T -> U`. An
//!   absent read recorded with writer `0` whose key's last version visible at `begin_ts` is a
//!   delete (e.g. a collected tombstone) counts as a read of that delete, not of the initial state.
//! * `PredicateRW`: for a scan of `T`, every key in the scanned range that `T` did not read was
//!   observed as absent at `T`'s snapshot; the first writer `U != T` of that key with
//!   `commit_ts > begin_ts` gives `T -> U`. For a scan of a secondary index, every row `T` did
//!   not read did not match at the snapshot; the first later version that matches (its
//!   recorded index key lies in the range) gives `T -> U` if its writer `U != T`.
//!
//! # What each level forbids
//! A cycle is reported when at least one transaction on it has a level that forbids it, with
//! the strictest such level:
//!
//! | level              | forbids                                                           |
//! |--------------------|-------------------------------------------------------------------|
//! | `ReadCommitted`    | G0 (ww only), G1c (ww/wr only)                                    |
//! | `RepeatableRead`   | also every cycle of item edges (ww/wr/rw), i.e. G2-item           |
//! | `SnapshotIsolation`| G0, G1c and every cycle without two consecutive anti-dependencies |
//! | `Serializable`     | every cycle (G2, predicate edges included)                        |
//!
//! # Names
//! The name of a reported cycle describes its shape: `G0` (ww edges only), `G1c` (ww/wr, at least
//! one wr), `G-single` (exactly one anti-dependency), `G-nonadjacent` (several anti-dependencies,
//! no two consecutive, wrap-around included), `G2-item` (several anti-dependencies, two of them
//! consecutive, all item) and `G2` (the same with at least one predicate anti-dependency). Two
//! more records are not cycles: `G1a` (a read of a version whose writer is not a committed
//! transaction of the history: an aborted read, or an incomplete history) and `unknown-version`
//! (a read of a version its writer never wrote, including a claimed read of one's own write);
//! their `cycle` is the one offending `wr` edge. `G1a` is reported once per unknown writer and
//! `unknown-version` once per (writer, key). Nor is `shared-commit-ts`: two writers of one key
//! with the same commit timestamp, whose version order is therefore undefined (under partial-
//! order timestamps non-conflicting updaters share a commit timestamp, but two writers of one
//! key never may); its `cycle` is their ww edge both ways.
//!
//! # Shared commit timestamps
//! Transactions are identified by `TxnRecord::id` alone, never by commit timestamp: several
//! records may share a `commit_ts` (a partial-order commit group) and all of them are kept.
//! Visibility at a snapshot is `commit_ts <= begin_ts` for every member of a group alike, and
//! members of a group that wrote different keys need no order between them.
//!
//! # Algorithm
//! Nothing enumerates cycles. Strongly connected components (iterative Tarjan, so 100k-txn
//! histories do not overflow the stack) of the relevant edge subset locate violations, and one
//! shortest witness per component and category is extracted by BFS: for G0/G1c and for
//! components where an anti-dependency touches a transaction of the checked level, the shortest
//! cycle through that edge; otherwise the shortest closed walk through a transaction of that
//! level that contains the required edge. Snapshot isolation is checked in the product graph
//! whose state is (transaction, "the last edge was an anti-dependency") with consecutive
//! anti-dependencies forbidden: a closed walk in that graph is exactly a cycle without two
//! consecutive anti-dependencies, wrap-around included. Witnesses found as closed walks can
//! repeat a transaction (Fekete's argument that SI admits no such walk holds for walks too;
//! finding a *simple* cycle through a given vertex and edge is NP-hard in general).
//!
//! # Limitations
//! * One witness per component and category: further violations inside the same strongly
//!   connected component are not listed separately.
//! * `begin_ts` is taken as the snapshot of every scan. A read-committed statement that scans at
//!   a later snapshot can therefore get a `PredicateRW` edge where it really read a delete;
//!   read committed allows every anti-dependency, so this only matters on cycles that also pass
//!   through a stricter transaction.
//! * Mixed levels follow "a cycle through a transaction whose level forbids it" literally; Adya's
//!   mixed serialization graph would in addition ignore anti-dependencies out of weaker
//!   transactions.
//! * `Read::found` is not cross-checked against the kind of the version read, and intermediate
//!   reads (G1b) cannot be seen without per-write version ids.
//! * A primary-key scan costs O(log keys + keys of the table in its range that have writers);
//!   a secondary-index scan costs O(log versions + versions of the table whose recorded index
//!   key lies in its range), after a sort of the recorded keys of each (table, index) scanned.
//! * A secondary-index scan is judged by the index keys recorded with each write
//!   (`Write::index_keys`); rows of the initial state carry none, so the delete of an initial
//!   row that matched a scan's range adds no `D -> T` edge for that scan.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::hash::{BuildHasherDefault, Hasher};
use std::ops::Bound;

// ------------------------------------------------------------------------------------------------
// Public data model
// ------------------------------------------------------------------------------------------------

/// Isolation level a transaction ran at. Ordered from weakest to strictest.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Level {
    /// Forbids G0 and G1c.
    ReadCommitted,
    /// Additionally forbids every cycle of item edges (G2-item); predicate anti-dependencies
    /// are allowed.
    RepeatableRead,
    /// Forbids G0, G1c and every cycle without two consecutive anti-dependencies.
    SnapshotIsolation,
    /// Forbids every cycle.
    Serializable,
}

/// A record key: table id + order-preserving encoded primary key bytes.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Key {
    /// Table id.
    pub table: u32,
    /// Order-preserving encoding of the primary key.
    pub key: Vec<u8>,
}

impl Key {
    /// Builds a key.
    pub fn new(table: u32, key: impl Into<Vec<u8>>) -> Self {
        Key {
            table,
            key: key.into(),
        }
    }
}

/// Writer id 0 means "the initial state / bulk load". Versions of a key are ordered by their
/// writer's commit_ts (the version order).
#[derive(Clone, Debug)]
pub struct Read {
    /// Key read.
    pub key: Key,
    /// Id of the transaction whose version was read; 0 = initial state.
    pub writer: u64,
    /// False when the read saw no live row (absent or deleted).
    pub found: bool,
}

/// What a write did to its key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum WriteKind {
    /// Created a row.
    Insert,
    #[default]
    /// Replaced a row.
    Update,
    /// Deleted a row (installed a tombstone version).
    Delete,
}

/// A write of one key.
#[derive(Clone, Debug, Default)]
pub struct Write {
    /// Key written.
    pub key: Key,
    /// Kind of write.
    pub kind: WriteKind,
    /// The written row's key in each secondary index, as `(index number, encoded key)` (index
    /// numbers as in the table's schema; the primary key is index 0 and not listed). Empty for
    /// a delete. Secondary-index scans are judged against these.
    pub index_keys: Vec<(u32, Vec<u8>)>,
}

/// A predicate read: the range scanned on index `index` of table `table` over that index's
/// order-preserving key encoding (the requested range; a point lookup through a secondary
/// index is the range of its one key). Rows returned are ALSO listed as Reads.
#[derive(Clone, Debug)]
pub struct Scan {
    /// Table scanned.
    pub table: u32,
    /// Index scanned: 0 the primary key, otherwise a secondary index (see `Write::index_keys`).
    pub index: u32,
    /// Lower bound of the requested range.
    pub lo: Bound<Vec<u8>>,
    /// Upper bound of the requested range.
    pub hi: Bound<Vec<u8>>,
}

/// Everything one committed transaction did.
#[derive(Clone, Debug)]
pub struct TxnRecord {
    /// Transaction id (non-zero; 0 names the initial state).
    pub id: u64,
    /// Isolation level it ran at.
    pub level: Level,
    /// Snapshot timestamp.
    pub begin_ts: u64,
    /// Commit timestamp (orders versions).
    pub commit_ts: u64,
    /// Item reads, including the rows returned by scans.
    pub reads: Vec<Read>,
    /// Writes, in program order (the last write of a key decides its kind).
    pub writes: Vec<Write>,
    /// Predicate reads (range scans).
    pub scans: Vec<Scan>,
}

/// Kind of a dependency edge.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EdgeKind {
    /// Write dependency: `to` overwrote `from`'s version.
    WW,
    /// Read dependency: `to` read `from`'s version.
    WR,
    /// Item anti-dependency: `to` overwrote the version `from` read.
    RW,
    /// Predicate anti-dependency: `to` changed a key in a range `from` scanned, after its snapshot.
    PredicateRW,
}

impl EdgeKind {
    /// True for `RW` and `PredicateRW`.
    pub fn is_anti_dependency(self) -> bool {
        matches!(self, EdgeKind::RW | EdgeKind::PredicateRW)
    }

    fn label(self) -> &'static str {
        match self {
            EdgeKind::WW => "ww",
            EdgeKind::WR => "wr",
            EdgeKind::RW => "rw",
            EdgeKind::PredicateRW => "prw",
        }
    }
}

/// One edge of a reported cycle.
#[derive(Clone, Debug)]
pub struct Edge {
    /// Source transaction id.
    pub from: u64,
    /// Target transaction id.
    pub to: u64,
    /// Dependency kind.
    pub kind: EdgeKind,
    /// Key that induced the edge.
    pub key: Key,
}

/// A forbidden cycle (or, for `G1a` / `unknown-version`, a single bad read).
#[derive(Clone, Debug)]
pub struct Anomaly {
    /// "G0", "G1c", "G-single", "G-nonadjacent", "G2-item", "G2", "G1a", "unknown-version" or
    /// "shared-commit-ts".
    pub name: &'static str,
    /// Strictest level, among the transactions on the cycle, that forbids it.
    pub level: Level,
    /// The cycle's edges in order: `cycle[i].to == cycle[i + 1].from`, and the last edge returns
    /// to `cycle[0].from`.
    pub cycle: Vec<Edge>,
}

impl Anomaly {
    /// Ids of the transactions on the cycle, in cycle order (a closed-walk witness may repeat one).
    pub fn txns(&self) -> Vec<u64> {
        self.cycle.iter().map(|e| e.from).collect()
    }

    /// Number of anti-dependency edges on the cycle.
    pub fn anti_dependencies(&self) -> usize {
        self.cycle
            .iter()
            .filter(|e| e.kind.is_anti_dependency())
            .count()
    }
}

/// Result of [`check`].
#[derive(Clone, Debug)]
pub struct CheckReport {
    /// Transactions in the graph.
    pub txns: usize,
    /// Distinct dependency edges `(from, to, kind, key)` in the graph.
    pub edges: usize,
    /// Forbidden cycles and bad reads.
    pub anomalies: Vec<Anomaly>,
    /// Records skipped because their id was 0 or repeated an earlier record's id.
    pub ignored_txns: usize,
}

impl CheckReport {
    /// True when nothing was reported.
    pub fn is_ok(&self) -> bool {
        self.anomalies.is_empty()
    }

    /// Anomalies with the given name.
    pub fn named<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a Anomaly> + 'a {
        self.anomalies.iter().filter(move |a| a.name == name)
    }
}

impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "t{}:", self.table)?;
        if self.key.is_empty() {
            return f.write_str("<empty>");
        }
        for b in &self.key {
            write!(f, "{b:02x}")?;
        }
        if self.key.iter().all(|b| b.is_ascii_graphic() || *b == b' ') {
            write!(f, "(\"{}\")", String::from_utf8_lossy(&self.key))?;
        }
        Ok(())
    }
}

impl fmt::Display for Edge {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "T{} -{} {}-> T{}",
            self.from,
            self.kind.label(),
            self.key,
            self.to
        )
    }
}

impl fmt::Display for Anomaly {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} forbidden at {:?}", self.name, self.level)?;
        match self.name {
            "G1a" => {
                f.write_str(" (read of a version whose writer did not commit in this history)")?
            }
            "unknown-version" => f.write_str(" (read of a version its writer never wrote)")?,
            "shared-commit-ts" => {
                let (a, b) = self.cycle.first().map_or((0, 0), |e| (e.from, e.to));
                write!(f, " (T{a} and T{b} wrote one key at one commit timestamp)")?
            }
            _ => {
                let mut ids = self.txns();
                ids.sort_unstable();
                ids.dedup();
                let ids: Vec<String> = ids.iter().map(|i| format!("T{i}")).collect();
                write!(f, " on {{{}}}", ids.join(", "))?;
            }
        }
        f.write_str(": ")?;
        match self.cycle.first() {
            None => Ok(()),
            Some(first) => {
                write!(f, "T{}", first.from)?;
                for e in &self.cycle {
                    write!(f, " -{} {}-> T{}", e.kind.label(), e.key, e.to)?;
                }
                Ok(())
            }
        }
    }
}

impl fmt::Display for CheckReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} txns, {} edges, {} anomalies",
            self.txns,
            self.edges,
            self.anomalies.len()
        )?;
        if self.ignored_txns > 0 {
            write!(f, " ({} records ignored)", self.ignored_txns)?;
        }
        for a in &self.anomalies {
            write!(f, "\n  {a}")?;
        }
        Ok(())
    }
}

// ------------------------------------------------------------------------------------------------
// Entry points
// ------------------------------------------------------------------------------------------------

/// Checks a history of committed transactions (in any order), with the commit-timestamp version
/// order. Records with id 0 or with the id of an earlier record are skipped and counted in
/// [`CheckReport::ignored_txns`].
pub fn check(history: &[TxnRecord]) -> CheckReport {
    check_with_version_order(history, &HashMap::new())
}

/// Like [`check`], but the version order of every key in `version_order` is the listed writer ids
/// (oldest first; 0 entries are ignored); writers of such a key that are not listed follow, in
/// commit-timestamp order. Keys not in the map use the commit-timestamp order.
pub fn check_with_version_order(
    history: &[TxnRecord],
    version_order: &HashMap<Key, Vec<u64>>,
) -> CheckReport {
    let built = build(history, version_order);
    let mut anomalies = built.bad_reads;
    let mut seen = HashSet::new();
    let mut ana = Analysis::new(&built.txns, &built.edges);
    for walk in ana.run() {
        let a = ana.anomaly(&walk, &built.keys);
        if seen.insert(a.1) {
            anomalies.push(a.0);
        }
    }
    CheckReport {
        txns: built.txns.len(),
        edges: built.edges.len(),
        anomalies,
        ignored_txns: built.ignored,
    }
}

// ------------------------------------------------------------------------------------------------
// Graph construction
// ------------------------------------------------------------------------------------------------

const NONE: u32 = u32::MAX;
const WW: u8 = 0;
const WR: u8 = 1;
const RW: u8 = 2;
const PRW: u8 = 3;
const M_WW: u8 = 1 << WW;
const M_WR: u8 = 1 << WR;
const M_RW: u8 = 1 << RW;
const M_PRW: u8 = 1 << PRW;
const M_ANTI: u8 = M_RW | M_PRW;
const M_ALL: u8 = M_WW | M_WR | M_RW | M_PRW;

fn is_anti(kind: u8) -> bool {
    kind == RW || kind == PRW
}

fn edge_kind(kind: u8) -> EdgeKind {
    match kind {
        WW => EdgeKind::WW,
        WR => EdgeKind::WR,
        RW => EdgeKind::RW,
        _ => EdgeKind::PredicateRW,
    }
}

/// FxHash-style hasher: the maps below are keyed by ids and short keys, built once per check.
#[derive(Default)]
struct FastHasher(u64);

impl Hasher for FastHasher {
    fn finish(&self) -> u64 {
        // Final avalanche (murmur3 fmix64): the rotate-xor-multiply rounds alone leave the low
        // bits, which pick the bucket, poorly mixed.
        let mut h = self.0;
        h ^= h >> 33;
        h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
        h ^= h >> 33;
        h
    }
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let mut w = [0u8; 8];
            w.copy_from_slice(c);
            self.write_u64(u64::from_le_bytes(w));
        }
        for &b in chunks.remainder() {
            self.write_u64(u64::from(b));
        }
    }
    fn write_u8(&mut self, i: u8) {
        self.write_u64(u64::from(i));
    }
    fn write_u32(&mut self, i: u32) {
        self.write_u64(u64::from(i));
    }
    fn write_usize(&mut self, i: usize) {
        self.write_u64(i as u64);
    }
    fn write_u64(&mut self, i: u64) {
        self.0 = (self.0.rotate_left(5) ^ i).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<FastHasher>>;

/// Key interner with its own compact storage (keys of up to 16 bytes inline, longer ones in
/// an arena), so that probing and the ordered range lookups of scans touch a few cache-friendly
/// arrays instead of the history's scattered key buffers.
struct Interner {
    /// Open-addressing table of (high hash bits, key id + 1); id 0 = empty. Power-of-two sized.
    slots: Vec<(u32, u32)>,
    entries: Vec<KeyEntry>,
    arena: Vec<u8>,
}

#[derive(Clone, Copy)]
struct KeyEntry {
    table: u32,
    len: u32,
    /// The key bytes when `len <= 16`, else the arena offset (little-endian u64).
    data: [u8; 16],
}

impl Interner {
    fn new() -> Self {
        Interner {
            slots: vec![(0, 0); 1024],
            entries: Vec::new(),
            arena: Vec::new(),
        }
    }

    fn len(&self) -> usize {
        self.entries.len()
    }

    fn table(&self, k: u32) -> u32 {
        self.entries[k as usize].table
    }

    fn bytes(&self, k: u32) -> &[u8] {
        let e = &self.entries[k as usize];
        let len = e.len as usize;
        if len <= 16 {
            &e.data[..len]
        } else {
            let mut off = [0u8; 8];
            off.copy_from_slice(&e.data[..8]);
            let off = u64::from_le_bytes(off) as usize;
            &self.arena[off..off + len]
        }
    }

    fn hash_of(table: u32, bytes: &[u8]) -> u64 {
        let mut h = FastHasher::default();
        h.write_u32(table);
        h.write(bytes);
        h.finish()
    }

    /// The key's id, or the empty slot where it would go.
    fn find(&self, table: u32, bytes: &[u8], h: u64) -> Result<u32, usize> {
        let mask = self.slots.len() - 1;
        let tag = (h >> 32) as u32;
        let mut i = h as usize & mask;
        loop {
            let (t, k) = self.slots[i];
            if k == 0 {
                return Err(i);
            }
            if t == tag && self.table(k - 1) == table && self.bytes(k - 1) == bytes {
                return Ok(k - 1);
            }
            i = (i + 1) & mask;
        }
    }

    fn get(&self, key: &Key) -> Option<u32> {
        self.find(key.table, &key.key, Self::hash_of(key.table, &key.key))
            .ok()
    }

    /// The key's id and whether it is new.
    fn intern(&mut self, key: &Key) -> (u32, bool) {
        let h = Self::hash_of(key.table, &key.key);
        match self.find(key.table, &key.key, h) {
            Ok(k) => (k, false),
            Err(slot) => {
                let k = self.entries.len() as u32;
                self.slots[slot] = ((h >> 32) as u32, k + 1);
                let mut data = [0u8; 16];
                if key.key.len() <= 16 {
                    data[..key.key.len()].copy_from_slice(&key.key);
                } else {
                    data[..8].copy_from_slice(&(self.arena.len() as u64).to_le_bytes());
                    self.arena.extend_from_slice(&key.key);
                }
                self.entries.push(KeyEntry {
                    table: key.table,
                    len: key.key.len() as u32,
                    data,
                });
                if self.len() * 2 > self.slots.len() {
                    self.grow();
                }
                (k, true)
            }
        }
    }

    fn grow(&mut self) {
        let size = self.slots.len() * 2;
        let old = std::mem::replace(&mut self.slots, vec![(0, 0); size]);
        let mask = self.slots.len() - 1;
        for (tag, k) in old.into_iter().filter(|s| s.1 != 0) {
            let e = &self.entries[k as usize - 1];
            let h = Self::hash_of(e.table, self.bytes(k - 1));
            debug_assert_eq!((h >> 32) as u32, tag);
            let mut i = h as usize & mask;
            while self.slots[i].1 != 0 {
                i = (i + 1) & mask;
            }
            self.slots[i] = (tag, k);
        }
    }
}

/// A dependency edge between transaction indices.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct E {
    from: u32,
    to: u32,
    kind: u8,
    key: u32,
}

struct Built<'a> {
    txns: Vec<&'a TxnRecord>,
    keys: Vec<&'a Key>,
    /// Sorted by `from`, deduplicated.
    edges: Vec<E>,
    bad_reads: Vec<Anomaly>,
    ignored: usize,
}

/// The version order of every key, flattened: writers of key `k` are `start[k]..start[k + 1]`.
struct Versions {
    start: Vec<u32>,
    txn: Vec<u32>,
    ts: Vec<u64>,
    id: Vec<u64>,
    delete: Vec<bool>,
    /// Index of the version's write in its transaction's `writes`.
    write: Vec<u32>,
    /// Keys whose order came from the caller (not sorted by commit_ts).
    overridden: Vec<bool>,
}

impl Versions {
    fn range(&self, k: u32) -> std::ops::Range<usize> {
        self.start[k as usize] as usize..self.start[k as usize + 1] as usize
    }

    /// Position of transaction `t` (with commit `ts`, id `id`) in key `k`'s version order.
    fn position(&self, k: u32, t: u32, ts: u64, id: u64) -> Option<usize> {
        let r = self.range(k);
        if self.overridden[k as usize] {
            return r.clone().find(|&p| self.txn[p] == t);
        }
        let mut p = r.start + self.ts[r.clone()].partition_point(|&x| x < ts);
        while p < r.end && self.ts[p] == ts && self.id[p] < id {
            p += 1;
        }
        (p < r.end && self.txn[p] == t).then_some(p)
    }

    /// First position in key `k`'s version order whose commit_ts is > `ts` (visible-after).
    fn first_after(&self, k: u32, ts: u64) -> Option<usize> {
        let r = self.range(k);
        if self.overridden[k as usize] {
            return r.clone().find(|&p| self.ts[p] > ts);
        }
        let p = r.start + self.ts[r.clone()].partition_point(|&x| x <= ts);
        (p < r.end).then_some(p)
    }

    /// Last position in key `k`'s version order whose commit_ts is <= `ts` (visible at `ts`).
    fn last_visible(&self, k: u32, ts: u64) -> Option<usize> {
        let r = self.range(k);
        if self.overridden[k as usize] {
            return r.clone().rev().find(|&p| self.ts[p] <= ts);
        }
        let p = r.start + self.ts[r.clone()].partition_point(|&x| x <= ts);
        if p > r.start {
            Some(p - 1)
        } else {
            None
        }
    }
}

fn build<'a>(history: &'a [TxnRecord], version_order: &HashMap<Key, Vec<u64>>) -> Built<'a> {
    build_with::<false>(history, version_order)
}

/// [`build`]; with `BRUTE` (tests only) secondary-index scans go through the reference
/// [`secondary_scan_edges_brute`] instead of the per-index entries.
fn build_with<'a, const BRUTE: bool>(
    history: &'a [TxnRecord],
    version_order: &HashMap<Key, Vec<u64>>,
) -> Built<'a> {
    // Transactions.
    let mut idx_of: FastMap<u64, u32> = FastMap::default();
    idx_of.reserve(history.len());
    let mut txns: Vec<&TxnRecord> = Vec::with_capacity(history.len());
    let mut ignored = 0;
    for t in history {
        if t.id == 0 || idx_of.contains_key(&t.id) {
            ignored += 1;
            continue;
        }
        idx_of.insert(t.id, txns.len() as u32);
        txns.push(t);
    }

    let commit: Vec<u64> = txns.iter().map(|t| t.commit_ts).collect();

    // Keys and writes.
    let mut keys: Vec<&Key> = Vec::new();
    let mut interner = Interner::new();
    let mut intern = |k: &'a Key| -> u32 {
        let (id, new) = interner.intern(k);
        if new {
            keys.push(k);
        }
        id
    };
    // (key, override rank, commit_ts, txn id, op seq, txn index, is delete)
    let mut w: Vec<(u32, u64, u64, u64, u32, u32, bool)> = Vec::new();
    // Every read flattened: txn `t`'s are `read_start[t]..read_start[t + 1]`.
    let mut read_start: Vec<usize> = Vec::with_capacity(txns.len() + 1);
    let mut read_keys: Vec<u32> = Vec::new();
    let mut read_writer: Vec<u64> = Vec::new();
    let mut read_found: Vec<bool> = Vec::new();
    read_start.push(0);
    for (ti, t) in txns.iter().enumerate() {
        for (seq, wr) in t.writes.iter().enumerate() {
            let k = intern(&wr.key);
            w.push((
                k,
                0,
                t.commit_ts,
                t.id,
                seq as u32,
                ti as u32,
                wr.kind == WriteKind::Delete,
            ));
        }
        for r in &t.reads {
            read_keys.push(intern(&r.key));
            read_writer.push(r.writer);
            read_found.push(r.found);
        }
        read_start.push(read_keys.len());
    }
    let nkeys = keys.len();
    let mut overridden = vec![false; nkeys];
    if !version_order.is_empty() {
        let mut rank: FastMap<(u32, u64), u64> = FastMap::default();
        for (key, order) in version_order {
            let Some(k) = interner.get(key) else { continue };
            overridden[k as usize] = true;
            for (i, &id) in order.iter().enumerate() {
                rank.entry((k, id)).or_insert(i as u64);
            }
        }
        for e in &mut w {
            if overridden[e.0 as usize] {
                e.1 = rank.get(&(e.0, e.3)).copied().unwrap_or(u64::MAX);
            }
        }
    }
    w.sort_unstable();
    let mut vers = Versions {
        start: vec![0; nkeys + 1],
        txn: Vec::with_capacity(w.len()),
        ts: Vec::with_capacity(w.len()),
        id: Vec::with_capacity(w.len()),
        delete: Vec::with_capacity(w.len()),
        write: Vec::with_capacity(w.len()),
        overridden,
    };
    for (i, e) in w.iter().enumerate() {
        // Several writes of a key by one transaction are one version; the last one decides.
        if w.get(i + 1).is_some_and(|n| n.0 == e.0 && n.5 == e.5) {
            continue;
        }
        vers.start[e.0 as usize + 1] += 1;
        vers.txn.push(e.5);
        vers.ts.push(e.2);
        vers.id.push(e.3);
        vers.delete.push(e.6);
        vers.write.push(e.4);
    }
    drop(w);
    for k in 0..nkeys {
        vers.start[k + 1] += vers.start[k];
    }

    let mut edges: Vec<E> = Vec::new();
    let mut bad_reads = Vec::new();
    let mut bad_seen: HashSet<(u64, u32)> = HashSet::new();

    // ww: consecutive writers. Two writers of one key that share a commit timestamp (partial-
    // order timestamps let non-conflicting updaters share one) have no version order: neither
    // saw the other, and first-committer-wins should have aborted one. Reported as
    // `shared-commit-ts` (its cycle: the ww edge both ways); the edges follow the id order.
    for k in 0..nkeys as u32 {
        let r = vers.range(k);
        for p in r.start + 1..r.end {
            let (a, b) = (vers.txn[p - 1], vers.txn[p]);
            if !vers.overridden[k as usize] && vers.ts[p - 1] == vers.ts[p] {
                let (ta, tb) = (txns[a as usize], txns[b as usize]);
                let ww = |from: &TxnRecord, to: &TxnRecord| Edge {
                    from: from.id,
                    to: to.id,
                    kind: EdgeKind::WW,
                    key: keys[k as usize].clone(),
                };
                bad_reads.push(Anomaly {
                    name: "shared-commit-ts",
                    level: ta.level.max(tb.level),
                    cycle: vec![ww(ta, tb), ww(tb, ta)],
                });
            }
            edges.push(E {
                from: a,
                to: b,
                kind: WW,
                key: k,
            });
        }
    }

    // wr and rw from item reads.
    for (ti, t) in txns.iter().enumerate() {
        let ti = ti as u32;
        let first = read_start[ti as usize];
        for i in first..read_start[ti as usize + 1] {
            let (k, writer) = (read_keys[i], read_writer[i]);
            let bad = |name| Anomaly {
                name,
                level: t.level,
                cycle: vec![Edge {
                    from: writer,
                    to: t.id,
                    kind: EdgeKind::WR,
                    key: t.reads[i - first].key.clone(),
                }],
            };
            if writer == t.id {
                // A read of one's own write adds no edge, but the write must exist.
                if vers.position(k, ti, t.commit_ts, t.id).is_none() && bad_seen.insert((writer, k))
                {
                    bad_reads.push(bad("unknown-version"));
                }
                continue;
            }
            let next = if writer == 0 {
                // An absence recorded as "initial state" (say, its tombstone was collected) is
                // the delete visible at the snapshot when there is one; otherwise the initial
                // state really was read and the first writer overwrote it.
                match vers.last_visible(k, t.begin_ts) {
                    Some(p) if !read_found[i] && vers.delete[p] && vers.txn[p] != ti => {
                        edges.push(E {
                            from: vers.txn[p],
                            to: ti,
                            kind: WR,
                            key: k,
                        });
                        p + 1
                    }
                    _ => vers.range(k).start,
                }
            } else {
                let Some(&wi) = idx_of.get(&writer) else {
                    // Reported once per unknown writer.
                    if bad_seen.insert((writer, NONE)) {
                        bad_reads.push(bad("G1a"));
                    }
                    continue;
                };
                let Some(p) = vers.position(k, wi, commit[wi as usize], writer) else {
                    if bad_seen.insert((writer, k)) {
                        bad_reads.push(bad("unknown-version"));
                    }
                    continue;
                };
                edges.push(E {
                    from: wi,
                    to: ti,
                    kind: WR,
                    key: k,
                });
                p + 1
            };
            if next < vers.range(k).end && vers.txn[next] != ti {
                edges.push(E {
                    from: ti,
                    to: vers.txn[next],
                    kind: RW,
                    key: k,
                });
            }
        }
    }

    // Predicate reads.
    if txns.iter().any(|t| !t.scans.is_empty()) {
        // Per table, the keys that have at least one writer, sorted by encoded key.
        let mut by_table: FastMap<u32, Vec<u32>> = FastMap::default();
        for k in 0..nkeys {
            if vers.start[k + 1] > vers.start[k] {
                by_table
                    .entry(interner.table(k as u32))
                    .or_default()
                    .push(k as u32);
            }
        }
        for v in by_table.values_mut() {
            v.sort_unstable_by(|&a, &b| interner.bytes(a).cmp(interner.bytes(b)));
        }
        let bytes = |k: &u32| interner.bytes(*k);
        // Per (table, secondary index) that some scan uses, built on first use.
        let mut index_entries: FastMap<(u32, u32), IndexEntries> = FastMap::default();
        let mut candidates: Vec<u32> = Vec::new();
        let mut read: Vec<u32> = Vec::new();
        for (ti, t) in txns.iter().enumerate() {
            if t.scans.is_empty() {
                continue;
            }
            read.clear();
            read.extend_from_slice(&read_keys[read_start[ti]..read_start[ti + 1]]);
            read.sort_unstable();
            let ti = ti as u32;
            for s in &t.scans {
                let Some(list) = by_table.get(&s.table) else {
                    continue;
                };
                if s.index != 0 {
                    #[cfg(test)]
                    if BRUTE {
                        secondary_scan_edges_brute(ti, t, s, list, &read, &vers, &txns, &mut edges);
                        continue;
                    }
                    let entries = index_entries
                        .entry((s.table, s.index))
                        .or_insert_with(|| secondary_entries(list, s.index, &vers, &txns));
                    secondary_scan_edges(
                        ti,
                        t,
                        s,
                        entries,
                        &read,
                        &vers,
                        &txns,
                        &mut candidates,
                        &mut edges,
                    );
                    continue;
                }
                let lo = match &s.lo {
                    Bound::Included(b) => list.partition_point(|k| bytes(k) < b.as_slice()),
                    Bound::Excluded(b) => list.partition_point(|k| bytes(k) <= b.as_slice()),
                    Bound::Unbounded => 0,
                };
                let hi = match &s.hi {
                    Bound::Included(b) => list.partition_point(|k| bytes(k) <= b.as_slice()),
                    Bound::Excluded(b) => list.partition_point(|k| bytes(k) < b.as_slice()),
                    Bound::Unbounded => list.len(),
                };
                for &k in list.get(lo..hi).unwrap_or(&[]) {
                    if read.binary_search(&k).is_err() {
                        // Not observed through an item read (those the item rules cover).
                        predicate_edges(ti, t.begin_ts, k, &vers, None, &mut edges);
                    }
                }
            }
        }
    }

    let edges = sort_by_source(edges, txns.len());
    Built {
        txns,
        keys,
        edges,
        bad_reads,
        ignored,
    }
}

/// Whether `key` lies between the bounds of a scan.
fn in_range(key: &[u8], lo: &Bound<Vec<u8>>, hi: &Bound<Vec<u8>>) -> bool {
    let above = match lo {
        Bound::Included(b) => key >= b.as_slice(),
        Bound::Excluded(b) => key > b.as_slice(),
        Bound::Unbounded => true,
    };
    let below = match hi {
        Bound::Included(b) => key <= b.as_slice(),
        Bound::Excluded(b) => key < b.as_slice(),
        Bound::Unbounded => true,
    };
    above && below
}

/// Whether the version at position `p` is a live row whose key in index `s.index` lies in the
/// scanned range.
fn version_matches(p: usize, s: &Scan, vers: &Versions, txns: &[&TxnRecord]) -> bool {
    if vers.delete[p] {
        return false;
    }
    let w = &txns[vers.txn[p] as usize].writes[vers.write[p] as usize];
    w.index_keys
        .iter()
        .any(|(i, k)| *i == s.index && in_range(k, &s.lo, &s.hi))
}

/// `(index key, key)` pairs of one secondary index of one table, sorted.
type IndexEntries<'a> = Vec<(&'a [u8], u32)>;

/// `(index key, key)` for every index key in index `index` recorded with a live version of the
/// keys `list` (the written keys of one table), sorted. A delete never matches a scan (see
/// [`version_matches`]), so its version is left out.
fn secondary_entries<'a>(
    list: &[u32],
    index: u32,
    vers: &Versions,
    txns: &[&'a TxnRecord],
) -> IndexEntries<'a> {
    let mut entries = Vec::new();
    for &k in list {
        for p in vers.range(k) {
            if vers.delete[p] {
                continue;
            }
            let w = &txns[vers.txn[p] as usize].writes[vers.write[p] as usize];
            for (i, b) in &w.index_keys {
                if *i == index {
                    entries.push((b.as_slice(), k));
                }
            }
        }
    }
    entries.sort_unstable();
    entries
}

/// Predicate edges of a secondary-index scan `s` by transaction `ti`, judged by the index keys
/// recorded with each write. `predicate_edges` adds an edge for a key only when some version of
/// it matches the scan, so only the keys with an entry of `entries` (from [`secondary_entries`]
/// for `s.table` and `s.index`) in the scanned range are examined: O(log entries + entries in
/// the range) per scan. `candidates` is scratch space.
#[allow(clippy::too_many_arguments)]
fn secondary_scan_edges(
    ti: u32,
    t: &TxnRecord,
    s: &Scan,
    entries: &[(&[u8], u32)],
    read: &[u32],
    vers: &Versions,
    txns: &[&TxnRecord],
    candidates: &mut Vec<u32>,
    edges: &mut Vec<E>,
) {
    // The same bounds as `in_range`.
    let lo = match &s.lo {
        Bound::Included(b) => entries.partition_point(|e| e.0 < b.as_slice()),
        Bound::Excluded(b) => entries.partition_point(|e| e.0 <= b.as_slice()),
        Bound::Unbounded => 0,
    };
    let hi = match &s.hi {
        Bound::Included(b) => entries.partition_point(|e| e.0 <= b.as_slice()),
        Bound::Excluded(b) => entries.partition_point(|e| e.0 < b.as_slice()),
        Bound::Unbounded => entries.len(),
    };
    candidates.clear();
    candidates.extend(entries.get(lo..hi).unwrap_or(&[]).iter().map(|e| e.1));
    candidates.sort_unstable();
    candidates.dedup();
    let matches = |p: usize| version_matches(p, s, vers, txns);
    for &k in candidates.iter() {
        if read.binary_search(&k).is_err() {
            predicate_edges(ti, t.begin_ts, k, vers, Some(&matches), edges);
        }
    }
}

/// Reference for [`secondary_scan_edges`]: examines every written key of the table (`list`).
#[cfg(test)]
#[allow(clippy::too_many_arguments)]
fn secondary_scan_edges_brute(
    ti: u32,
    t: &TxnRecord,
    s: &Scan,
    list: &[u32],
    read: &[u32],
    vers: &Versions,
    txns: &[&TxnRecord],
    edges: &mut Vec<E>,
) {
    let matches = |p: usize| version_matches(p, s, vers, txns);
    for &k in list {
        if read.binary_search(&k).is_err() {
            predicate_edges(ti, t.begin_ts, k, vers, Some(&matches), edges);
        }
    }
}

/// Predicate edges for key `k`, which `ti`'s scan covered but did not read: absent (or, for a
/// secondary index, not matching) at its snapshot `begin_ts`. `matches` says whether a version
/// lies in the scanned range; `None` (a primary-key scan) means every version of `k` does.
///
/// The first later version that matches changed what the scan would return: `T -> U` unless
/// `U` is `T`. If the version visible at the snapshot is a delete of a row that matched, the
/// scan observed that delete: `D -> T`. Rows of the initial state carry no index keys, so for
/// a secondary index a delete of one adds no edge.
fn predicate_edges(
    ti: u32,
    begin_ts: u64,
    k: u32,
    vers: &Versions,
    matches: Option<&dyn Fn(usize) -> bool>,
    edges: &mut Vec<E>,
) {
    let r = vers.range(k);
    let matched = |p: usize| matches.is_none_or(|m| m(p));
    if let Some(first) = vers.first_after(k, begin_ts) {
        let mut later = (first..r.end).filter(|&p| vers.ts[p] > begin_ts);
        if let Some(p) = later.find(|&p| matched(p)) {
            if vers.txn[p] != ti {
                edges.push(E {
                    from: ti,
                    to: vers.txn[p],
                    kind: PRW,
                    key: k,
                });
            }
        }
    }
    if let Some(p) = vers.last_visible(k, begin_ts) {
        let removed_a_match = match matches {
            None => true,
            Some(m) => p > r.start && m(p - 1),
        };
        if vers.delete[p] && vers.txn[p] != ti && removed_a_match {
            edges.push(E {
                from: vers.txn[p],
                to: ti,
                kind: WR,
                key: k,
            });
        }
    }
}

/// Sorts edges by source (counting sort, then each source's few edges) and drops duplicates.
fn sort_by_source(edges: Vec<E>, n: usize) -> Vec<E> {
    let mut off = vec![0usize; n + 1];
    for e in &edges {
        off[e.from as usize + 1] += 1;
    }
    for v in 0..n {
        off[v + 1] += off[v];
    }
    let mut fill = off.clone();
    let mut out = vec![
        E {
            from: 0,
            to: 0,
            kind: 0,
            key: 0
        };
        edges.len()
    ];
    for e in edges {
        out[fill[e.from as usize]] = e;
        fill[e.from as usize] += 1;
    }
    let mut len = 0;
    for v in 0..n {
        let (lo, hi) = (off[v], off[v + 1]);
        out[lo..hi].sort_unstable();
        for i in lo..hi {
            if i == lo || out[i] != out[i - 1] {
                out[len] = out[i];
                len += 1;
            }
        }
    }
    out.truncate(len);
    out
}

// ------------------------------------------------------------------------------------------------
// Graph algorithms
// ------------------------------------------------------------------------------------------------

/// Compressed adjacency: the out-edges of node `v` are positions `off[v]..off[v + 1]`.
struct Csr {
    off: Vec<u32>,
    to: Vec<u32>,
}

impl Csr {
    fn nodes(&self) -> usize {
        self.off.len() - 1
    }
    fn out(&self, v: u32) -> std::ops::Range<usize> {
        self.off[v as usize] as usize..self.off[v as usize + 1] as usize
    }
}

/// Strongly connected components (iterative Tarjan) of the subgraph of `g` made of the edges
/// `allow` accepts, reachable from `roots`. Returns the component of each node (`NONE` when not
/// reached) and the number of components.
fn tarjan(g: &Csr, roots: &[u32], allow: impl Fn(usize) -> bool) -> (Vec<u32>, u32) {
    let n = g.nodes();
    let mut index = vec![NONE; n];
    let mut low = vec![0u32; n];
    let mut comp = vec![NONE; n];
    let mut on_stack = vec![false; n];
    let mut stack: Vec<u32> = Vec::new();
    let mut call: Vec<(u32, usize)> = Vec::new();
    let mut counter = 0u32;
    let mut ncomp = 0u32;
    for &root in roots {
        if index[root as usize] != NONE {
            continue;
        }
        index[root as usize] = counter;
        low[root as usize] = counter;
        counter += 1;
        stack.push(root);
        on_stack[root as usize] = true;
        call.push((root, g.off[root as usize] as usize));
        while let Some(top) = call.last_mut() {
            let v = top.0 as usize;
            if top.1 < g.off[v + 1] as usize {
                let pos = top.1;
                top.1 += 1;
                if !allow(pos) {
                    continue;
                }
                let w = g.to[pos] as usize;
                if index[w] == NONE {
                    index[w] = counter;
                    low[w] = counter;
                    counter += 1;
                    stack.push(w as u32);
                    on_stack[w] = true;
                    call.push((w as u32, g.off[w] as usize));
                } else if on_stack[w] {
                    low[v] = low[v].min(index[w]);
                }
            } else {
                call.pop();
                if let Some(&(p, _)) = call.last() {
                    low[p as usize] = low[p as usize].min(low[v]);
                }
                if low[v] == index[v] {
                    loop {
                        let x = stack.pop().expect("tarjan stack") as usize;
                        on_stack[x] = false;
                        comp[x] = ncomp;
                        if x == v {
                            break;
                        }
                    }
                    ncomp += 1;
                }
            }
        }
    }
    (comp, ncomp)
}

/// Members of each component: component `c` is `nodes[start[c]..start[c + 1]]`.
struct Members {
    start: Vec<u32>,
    nodes: Vec<u32>,
}

impl Members {
    fn new(comp: &[u32], ncomp: u32) -> Self {
        let mut start = vec![0u32; ncomp as usize + 1];
        for &c in comp {
            if c != NONE {
                start[c as usize + 1] += 1;
            }
        }
        for c in 0..ncomp as usize {
            start[c + 1] += start[c];
        }
        let mut fill = start.clone();
        let mut nodes = vec![0u32; start[ncomp as usize] as usize];
        for (v, &c) in comp.iter().enumerate() {
            if c != NONE {
                nodes[fill[c as usize] as usize] = v as u32;
                fill[c as usize] += 1;
            }
        }
        Members { start, nodes }
    }
    fn of(&self, c: u32) -> &[u32] {
        &self.nodes[self.start[c as usize] as usize..self.start[c as usize + 1] as usize]
    }
    fn count(&self) -> u32 {
        self.start.len() as u32 - 1
    }
}

/// Reusable BFS over states `node * 2 + flag` of a [`Csr`]; `flag` becomes 1 once an edge that
/// `mark` accepts has been taken.
#[derive(Default)]
struct Bfs {
    stamp: Vec<u32>,
    gen: u32,
    prev_edge: Vec<u32>,
    prev_state: Vec<u32>,
    queue: Vec<u32>,
}

impl Bfs {
    /// Shortest sequence of edge positions from state `src` to state `dst`.
    fn run(
        &mut self,
        g: &Csr,
        src: u32,
        dst: u32,
        allow: impl Fn(usize) -> bool,
        mark: impl Fn(usize) -> bool,
    ) -> Option<Vec<u32>> {
        if src == dst {
            return Some(Vec::new());
        }
        let states = g.nodes() * 2;
        if self.stamp.len() < states {
            self.stamp.resize(states, 0);
            self.prev_edge.resize(states, 0);
            self.prev_state.resize(states, 0);
        }
        if self.gen == u32::MAX {
            self.stamp.iter_mut().for_each(|s| *s = 0);
            self.gen = 0;
        }
        self.gen += 1;
        let gen = self.gen;
        self.queue.clear();
        self.queue.push(src);
        self.stamp[src as usize] = gen;
        let mut head = 0;
        while head < self.queue.len() {
            let s = self.queue[head];
            head += 1;
            let (v, flag) = (s / 2, s % 2);
            for pos in g.out(v) {
                if !allow(pos) {
                    continue;
                }
                let ns = g.to[pos] * 2 + (flag | u32::from(mark(pos)));
                if self.stamp[ns as usize] == gen {
                    continue;
                }
                self.stamp[ns as usize] = gen;
                self.prev_edge[ns as usize] = pos as u32;
                self.prev_state[ns as usize] = s;
                if ns == dst {
                    let mut path = Vec::new();
                    let mut cur = dst;
                    while cur != src {
                        path.push(self.prev_edge[cur as usize]);
                        cur = self.prev_state[cur as usize];
                    }
                    path.reverse();
                    return Some(path);
                }
                self.queue.push(ns);
            }
        }
        None
    }
}

// ------------------------------------------------------------------------------------------------
// Cycle search
// ------------------------------------------------------------------------------------------------

fn classify(kinds: &[u8]) -> &'static str {
    let anti = kinds.iter().filter(|&&k| is_anti(k)).count();
    if anti == 0 {
        return if kinds.contains(&WR) { "G1c" } else { "G0" };
    }
    if anti == 1 {
        return "G-single";
    }
    if !adjacent_anti(kinds) {
        "G-nonadjacent"
    } else if kinds.contains(&PRW) {
        "G2"
    } else {
        "G2-item"
    }
}

/// Two consecutive anti-dependencies, wrapping around.
fn adjacent_anti(kinds: &[u8]) -> bool {
    let n = kinds.len();
    (0..n).any(|i| is_anti(kinds[i]) && is_anti(kinds[(i + 1) % n]))
}

fn forbids(level: Level, kinds: &[u8]) -> bool {
    if !kinds.iter().any(|&k| is_anti(k)) {
        return true;
    }
    match level {
        Level::ReadCommitted => false,
        Level::RepeatableRead => !kinds.contains(&PRW),
        Level::SnapshotIsolation => !adjacent_anti(kinds),
        Level::Serializable => true,
    }
}

struct Analysis<'a> {
    txns: &'a [&'a TxnRecord],
    edges: &'a [E],
    g: Csr,
    bfs: Bfs,
}

impl<'a> Analysis<'a> {
    fn new(txns: &'a [&'a TxnRecord], edges: &'a [E]) -> Self {
        let n = txns.len();
        let mut off = vec![0u32; n + 1];
        for e in edges {
            off[e.from as usize + 1] += 1;
        }
        for v in 0..n {
            off[v + 1] += off[v];
        }
        let to = edges.iter().map(|e| e.to).collect();
        Analysis {
            txns,
            edges,
            g: Csr { off, to },
            bfs: Bfs::default(),
        }
    }

    fn level(&self, v: u32) -> Level {
        self.txns[v as usize].level
    }

    fn kind_in(&self, pos: usize, mask: u8) -> bool {
        mask & (1 << self.edges[pos].kind) != 0
    }

    /// Shortest cycle through edge `e` using edges of `mask` inside component `c` of `comp`.
    fn cycle_through(&mut self, e: usize, mask: u8, comp: &[u32], c: u32) -> Option<Vec<u32>> {
        let (from, to) = (self.edges[e].from, self.edges[e].to);
        let edges = self.edges;
        let allow = |p: usize| mask & (1 << edges[p].kind) != 0 && comp[edges[p].to as usize] == c;
        let mut path = self.bfs.run(&self.g, to * 2, from * 2, allow, |_| false)?;
        path.push(e as u32);
        Some(path)
    }

    /// Shortest closed walk through `t` using edges of `mask` inside component `c` of `comp` and
    /// containing at least one edge of `need`.
    fn walk_through(
        &mut self,
        t: u32,
        mask: u8,
        need: u8,
        comp: &[u32],
        c: u32,
    ) -> Option<Vec<u32>> {
        let edges = self.edges;
        let allow = |p: usize| mask & (1 << edges[p].kind) != 0 && comp[edges[p].to as usize] == c;
        let mark = |p: usize| need & (1 << edges[p].kind) != 0;
        self.bfs.run(&self.g, t * 2, t * 2 + 1, allow, mark)
    }

    /// First edge of a kind in `want` from `members` to a node of component `c` (of `comp`)
    /// that `pick` accepts.
    fn find_edge(
        &self,
        members: &[u32],
        comp: &[u32],
        c: u32,
        want: u8,
        pick: impl Fn(&E) -> bool,
    ) -> Option<usize> {
        members.iter().find_map(|&v| {
            self.g.out(v).find(|&p| {
                let e = &self.edges[p];
                self.kind_in(p, want) && comp[e.to as usize] == c && pick(e)
            })
        })
    }

    /// All witness walks (edge positions), in report order.
    fn run(&mut self) -> Vec<Vec<u32>> {
        let mut out = Vec::new();
        let n = self.txns.len() as u32;
        let all: Vec<u32> = (0..n).collect();
        let (full, nfull) = tarjan(&self.g, &all, |_| true);
        let full_members = Members::new(&full, nfull);
        let cyclic: Vec<u32> = (0..nfull)
            .filter(|&c| full_members.of(c).len() > 1)
            .flat_map(|c| full_members.of(c).to_vec())
            .collect();
        if cyclic.is_empty() {
            return out;
        }
        let edges = self.edges;
        let internal = |p: usize| full[edges[p].from as usize] == full[edges[p].to as usize];

        // G0 and G1c: forbidden at every level.
        for (mask, need) in [(M_WW, M_WW), (M_WW | M_WR, M_WR)] {
            let (comp, nc) = tarjan(&self.g, &cyclic, |p| internal(p) && self.kind_in(p, mask));
            let members = Members::new(&comp, nc);
            for c in 0..members.count() {
                let m = members.of(c);
                if m.len() < 2 {
                    continue;
                }
                if let Some(e) = self.find_edge(m, &comp, c, need, |_| true) {
                    out.extend(self.cycle_through(e, mask, &comp, c));
                }
            }
        }

        // Anti-dependency cycles through a RepeatableRead (item edges) or Serializable (all
        // edges) transaction.
        for (level, mask, need) in [
            (Level::Serializable, M_ALL, M_ANTI),
            (Level::RepeatableRead, M_WW | M_WR | M_RW, M_RW),
        ] {
            if !cyclic.iter().any(|&v| self.level(v) == level) {
                continue;
            }
            let (comp, nc) = if mask == M_ALL {
                (full.clone(), nfull)
            } else {
                tarjan(&self.g, &cyclic, |p| internal(p) && self.kind_in(p, mask))
            };
            let members = Members::new(&comp, nc);
            for c in 0..members.count() {
                let m = members.of(c);
                if m.len() < 2 {
                    continue;
                }
                let Some(&t) = m.iter().find(|&&v| self.level(v) == level) else {
                    continue;
                };
                let txns = self.txns;
                let touches = |e: &E| {
                    txns[e.from as usize].level == level || txns[e.to as usize].level == level
                };
                let walk = match self.find_edge(m, &comp, c, need, touches) {
                    Some(e) => self.cycle_through(e, mask, &comp, c),
                    None if self.find_edge(m, &comp, c, need, |_| true).is_some() => {
                        self.walk_through(t, mask, need, &comp, c)
                    }
                    None => None,
                };
                out.extend(walk);
            }
        }

        // Snapshot isolation: cycles without two consecutive anti-dependencies.
        if cyclic
            .iter()
            .any(|&v| self.level(v) == Level::SnapshotIsolation)
        {
            self.snapshot_isolation(&full, &full_members, &mut out);
        }
        out
    }

    /// Product graph with state (txn, last edge was an anti-dependency); node `2 * v + a`.
    /// Taking an anti-dependency from state `a = 1` is forbidden, so closed walks in it are
    /// exactly the cycles without two consecutive anti-dependencies (wrap-around included:
    /// the walk returns to the state it started from).
    fn snapshot_isolation(
        &mut self,
        full: &[u32],
        full_members: &Members,
        out: &mut Vec<Vec<u32>>,
    ) {
        let n = self.txns.len();
        let edges = self.edges;
        let si_comp: Vec<bool> = (0..full_members.count())
            .map(|c| {
                let m = full_members.of(c);
                m.len() > 1 && m.iter().any(|&v| self.level(v) == Level::SnapshotIsolation)
            })
            .collect();
        let mut off = vec![0u32; 2 * n + 1];
        let mut to = Vec::new();
        let mut orig = Vec::new();
        let mut roots = Vec::new();
        for v in 0..n as u32 {
            let c = full[v as usize];
            for a in 0..2u32 {
                let pv = 2 * v + a;
                if si_comp[c as usize] {
                    roots.push(pv);
                    for p in self.g.out(v) {
                        let e = &edges[p];
                        let anti = is_anti(e.kind);
                        if full[e.to as usize] != c || (a == 1 && anti) {
                            continue;
                        }
                        to.push(2 * e.to + u32::from(anti));
                        orig.push(p as u32);
                    }
                }
                off[pv as usize + 1] = to.len() as u32;
            }
        }
        let pg = Csr { off, to };
        let (pcomp, npc) = tarjan(&pg, &roots, |_| true);
        let pmembers = Members::new(&pcomp, npc);
        let anti_in = |pp: usize, c: u32| {
            is_anti(edges[orig[pp] as usize].kind) && pcomp[pg.to[pp] as usize] == c
        };
        // Product components holding a closed walk with at least one anti-dependency.
        let flagged: Vec<bool> = (0..npc)
            .map(|c| {
                pmembers
                    .of(c)
                    .iter()
                    .any(|&pv| pg.out(pv).any(|pp| anti_in(pp, c)))
            })
            .collect();
        let si = |v: u32| self.txns[v as usize].level == Level::SnapshotIsolation;
        for fc in 0..full_members.count() {
            if !si_comp[fc as usize] {
                continue;
            }
            let m = full_members.of(fc);
            // Prefer an anti-dependency (u,0) -> (v,1) touching an SI txn: shortest cycle through it.
            let through_edge = m.iter().flat_map(|&v| [2 * v, 2 * v + 1]).find_map(|pv| {
                let c = pcomp[pv as usize];
                if c == NONE || !flagged[c as usize] {
                    return None;
                }
                pg.out(pv).find(|&pp| {
                    let e = &edges[orig[pp] as usize];
                    anti_in(pp, c) && (si(e.from) || si(e.to))
                })
            });
            let walk = if let Some(pp) = through_edge {
                let c = pcomp[pg.to[pp] as usize];
                let allow = |q: usize| pcomp[pg.to[q] as usize] == c;
                let src = pg.to[pp];
                let dst = pp_source(&pg, pp);
                self.bfs
                    .run(&pg, src * 2, dst * 2, allow, |_| false)
                    .map(|mut path| {
                        path.push(pp as u32);
                        path
                    })
            } else {
                let start = m.iter().flat_map(|&v| [2 * v, 2 * v + 1]).find(|&pv| {
                    let c = pcomp[pv as usize];
                    si(pv / 2) && c != NONE && flagged[c as usize] && pmembers.of(c).len() > 1
                });
                start.and_then(|pv| {
                    let c = pcomp[pv as usize];
                    let allow = |q: usize| pcomp[pg.to[q] as usize] == c;
                    let mark = |q: usize| is_anti(edges[orig[q] as usize].kind);
                    self.bfs.run(&pg, pv * 2, pv * 2 + 1, allow, mark)
                })
            };
            if let Some(walk) = walk {
                out.push(walk.into_iter().map(|pp| orig[pp as usize]).collect());
            }
        }
    }

    /// Converts a witness walk to an [`Anomaly`] (rotated to start at its smallest txn id) and
    /// a rotation-invariant identity for deduplication.
    fn anomaly(&self, walk: &[u32], keys: &[&Key]) -> (Anomaly, Vec<u32>) {
        let id = |v: u32| self.txns[v as usize].id;
        let start = (0..walk.len())
            .min_by_key(|&i| (id(self.edges[walk[i] as usize].from), walk[i]))
            .unwrap_or(0);
        let rotated: Vec<u32> = walk[start..]
            .iter()
            .chain(&walk[..start])
            .copied()
            .collect();
        let kinds: Vec<u8> = rotated
            .iter()
            .map(|&p| self.edges[p as usize].kind)
            .collect();
        let name = classify(&kinds);
        let mut present = [false; 4];
        for &p in &rotated {
            present[self.level(self.edges[p as usize].from) as usize] = true;
        }
        let levels = [
            Level::ReadCommitted,
            Level::RepeatableRead,
            Level::SnapshotIsolation,
            Level::Serializable,
        ];
        let on_cycle = levels.into_iter().filter(|&l| present[l as usize]);
        let level = on_cycle
            .clone()
            .filter(|&l| forbids(l, &kinds))
            .max()
            .or_else(|| on_cycle.max())
            .unwrap_or(Level::ReadCommitted);
        let cycle = rotated
            .iter()
            .map(|&p| {
                let e = &self.edges[p as usize];
                Edge {
                    from: id(e.from),
                    to: id(e.to),
                    kind: edge_kind(e.kind),
                    key: keys[e.key as usize].clone(),
                }
            })
            .collect();
        (Anomaly { name, level, cycle }, rotated)
    }
}

/// Source node of product-graph edge position `pp`.
fn pp_source(g: &Csr, pp: usize) -> u32 {
    (g.off.partition_point(|&o| o as usize <= pp) - 1) as u32
}

// ------------------------------------------------------------------------------------------------
// Tests
// ------------------------------------------------------------------------------------------------

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;
    use EdgeKind::{PredicateRW as P, RW as Rw, WR as Wr, WW as Ww};
    use Level::{
        ReadCommitted as RC, RepeatableRead as RR, Serializable as SER, SnapshotIsolation as SI,
    };

    fn key(s: &str) -> Key {
        Key::new(1, s.as_bytes())
    }

    /// Test builder for one transaction record.
    struct B(TxnRecord);

    fn txn(id: u64, level: Level, begin_ts: u64, commit_ts: u64) -> B {
        B(TxnRecord {
            id,
            level,
            begin_ts,
            commit_ts,
            reads: vec![],
            writes: vec![],
            scans: vec![],
        })
    }

    impl B {
        fn rk(mut self, key: Key, writer: u64, found: bool) -> Self {
            self.0.reads.push(Read { key, writer, found });
            self
        }
        fn r(self, k: &str, writer: u64) -> Self {
            self.rk(key(k), writer, true)
        }
        fn r_absent(self, k: &str, writer: u64) -> Self {
            self.rk(key(k), writer, false)
        }
        fn wk(mut self, key: Key, kind: WriteKind) -> Self {
            self.0.writes.push(Write {
                key,
                kind,
                index_keys: vec![],
            });
            self
        }
        /// A write of row `k` of table 1 whose key in secondary index 1 is `ix`.
        fn wx(mut self, k: &str, kind: WriteKind, ix: &str) -> Self {
            self.0.writes.push(Write {
                key: key(k),
                kind,
                index_keys: vec![(1, ix.as_bytes().to_vec())],
            });
            self
        }
        /// Scan of `[lo, hi)` of secondary index 1 of table 1.
        fn scan_ix(mut self, lo: &str, hi: &str) -> Self {
            self.0.scans.push(Scan {
                table: 1,
                index: 1,
                lo: Bound::Included(lo.as_bytes().to_vec()),
                hi: Bound::Excluded(hi.as_bytes().to_vec()),
            });
            self
        }
        fn w(self, k: &str) -> Self {
            self.wk(key(k), WriteKind::Update)
        }
        fn ins(self, k: &str) -> Self {
            self.wk(key(k), WriteKind::Insert)
        }
        fn del(self, k: &str) -> Self {
            self.wk(key(k), WriteKind::Delete)
        }
        /// Scan of `[lo, hi)` on table 1.
        fn scan(mut self, lo: &str, hi: &str) -> Self {
            self.0.scans.push(Scan {
                table: 1,
                index: 0,
                lo: Bound::Included(lo.as_bytes().to_vec()),
                hi: Bound::Excluded(hi.as_bytes().to_vec()),
            });
            self
        }
        fn t(self) -> TxnRecord {
            self.0
        }
    }

    /// (name, level, txn ids in cycle order) of every anomaly.
    fn summary(r: &CheckReport) -> Vec<(&'static str, Level, Vec<u64>)> {
        r.anomalies
            .iter()
            .map(|a| (a.name, a.level, a.txns()))
            .collect()
    }

    /// (from, to, kind, key table, key bytes as text) of every edge of the cycle.
    fn edges(a: &Anomaly) -> Vec<(u64, u64, EdgeKind, u32, String)> {
        a.cycle
            .iter()
            .map(|e| {
                (
                    e.from,
                    e.to,
                    e.kind,
                    e.key.table,
                    String::from_utf8_lossy(&e.key.key).into_owned(),
                )
            })
            .collect()
    }

    fn e(from: u64, to: u64, kind: EdgeKind, k: &str) -> (u64, u64, EdgeKind, u32, String) {
        (from, to, kind, 1, k.to_string())
    }

    fn assert_well_formed(r: &CheckReport) {
        for a in &r.anomalies {
            let n = a.cycle.len();
            if a.name == "G1a" || a.name == "unknown-version" {
                assert_eq!(n, 1);
                continue;
            }
            assert!(n >= 2, "{a}");
            for i in 0..n {
                assert_eq!(a.cycle[i].to, a.cycle[(i + 1) % n].from, "not a cycle: {a}");
            }
        }
    }

    fn run(h: &[TxnRecord]) -> CheckReport {
        let r = check(h);
        assert_well_formed(&r);
        r
    }

    #[test]
    fn empty_history() {
        let r = run(&[]);
        assert_eq!((r.txns, r.edges), (0, 0));
        assert!(r.is_ok());
    }

    #[test]
    fn serial_history_is_clean() {
        let h = vec![
            txn(1, SER, 0, 1).ins("x").ins("y").t(),
            txn(2, SI, 2, 3).r("x", 1).w("y").t(),
            txn(3, RR, 4, 5).r("x", 1).r("y", 2).del("x").t(),
            // Scan sees y; x is absent because of T3's delete (predicate wr T3 -> T4).
            txn(4, SER, 6, 7).scan("a", "z").r("y", 2).ins("x").t(),
            txn(5, RC, 8, 9).r("x", 4).r("y", 2).r_absent("q", 0).t(),
        ];
        let r = run(&h);
        assert!(r.is_ok(), "{r}");
        assert_eq!(r.txns, 5);
        // ww x: 1->3, 3->4; ww y: 1->2; wr: 1->2, 1->3, 2->3, 2->4, 3->4 (predicate), 4->5, 2->5;
        // rw: 2->3 (x; T3 read its own predecessor and then overwrote it: no edge)
        assert_eq!(r.edges, 11, "{r}");
    }

    fn lost_update(l1: Level, l2: Level) -> Vec<TxnRecord> {
        vec![
            txn(1, l1, 0, 2).r("x", 0).w("x").t(),
            txn(2, l2, 1, 3).r("x", 0).w("x").t(),
        ]
    }

    #[test]
    fn lost_update_forbidden_at_rr_si_serializable_allowed_at_rc() {
        assert!(run(&lost_update(RC, RC)).is_ok());
        for l in [RR, SI, SER] {
            let r = run(&lost_update(l, l));
            assert_eq!(summary(&r), vec![("G-single", l, vec![1, 2])], "{r}");
            assert_eq!(
                edges(&r.anomalies[0]),
                vec![e(1, 2, Ww, "x"), e(2, 1, Rw, "x")]
            );
        }
    }

    #[test]
    fn lost_insert_after_delete_uses_absent_reads() {
        let h = vec![
            txn(1, SI, 0, 1).ins("x").t(),
            txn(2, SI, 2, 3).r("x", 1).del("x").t(),
            txn(3, SI, 4, 7).r_absent("x", 2).ins("x").t(),
            txn(4, SI, 4, 6).r_absent("x", 2).ins("x").t(),
        ];
        let r = run(&h);
        assert_eq!(summary(&r), vec![("G-single", SI, vec![3, 4])], "{r}");
        assert_eq!(
            edges(&r.anomalies[0]),
            vec![e(3, 4, Rw, "x"), e(4, 3, Ww, "x")]
        );
    }

    #[test]
    fn absent_read_recorded_as_initial_state() {
        // T3's snapshot includes T2's delete of x; the recorder lost the tombstone and wrote
        // writer 0. That is a read of T2's delete, not an anti-dependency on T1.
        let h = vec![
            txn(1, SER, 0, 1).ins("x").ins("z").t(),
            txn(2, SER, 2, 3).del("x").t(),
            txn(3, SER, 4, 5).r_absent("x", 0).r("z", 1).t(),
        ];
        let r = run(&h);
        assert!(r.is_ok(), "{r}");
        // Without T2, x was live at T3's snapshot: T3 missed T1's insert but saw its z.
        let h = vec![h[0].clone(), h[2].clone()];
        let r = run(&h);
        assert_eq!(summary(&r), vec![("G-single", SER, vec![1, 3])], "{r}");
        assert_eq!(
            edges(&r.anomalies[0]),
            vec![e(1, 3, Wr, "z"), e(3, 1, Rw, "x")]
        );
    }

    fn write_skew(l1: Level, l2: Level) -> Vec<TxnRecord> {
        vec![
            txn(1, l1, 0, 2).r("x", 0).r("y", 0).w("x").t(),
            txn(2, l2, 0, 3).r("x", 0).r("y", 0).w("y").t(),
        ]
    }

    #[test]
    fn write_skew_forbidden_at_rr_and_serializable_allowed_at_si() {
        assert!(run(&write_skew(SI, SI)).is_ok());
        assert!(run(&write_skew(RC, RC)).is_ok());
        for l in [RR, SER] {
            let r = run(&write_skew(l, l));
            assert_eq!(summary(&r), vec![("G2-item", l, vec![1, 2])], "{r}");
            assert_eq!(
                edges(&r.anomalies[0]),
                vec![e(1, 2, Rw, "y"), e(2, 1, Rw, "x")]
            );
        }
    }

    #[test]
    fn g1c_circular_information_flow() {
        // Each reads the other's write (T1 must have seen T2's y before T2 committed).
        let h = |l| {
            vec![
                txn(1, l, 0, 3).w("x").r("y", 2).t(),
                txn(2, RC, 0, 4).w("y").r("x", 1).t(),
            ]
        };
        let r = run(&h(RC));
        assert_eq!(summary(&r), vec![("G1c", RC, vec![1, 2])], "{r}");
        assert_eq!(
            edges(&r.anomalies[0]),
            vec![e(1, 2, Wr, "x"), e(2, 1, Wr, "y")]
        );
        // The strictest level on the cycle is reported.
        let r = run(&h(SER));
        assert_eq!(summary(&r), vec![("G1c", SER, vec![1, 2])], "{r}");
    }

    #[test]
    fn g0_write_cycle_with_chain_order() {
        let h = vec![
            txn(1, RC, 0, 1).w("x").w("y").t(),
            txn(2, RC, 0, 2).w("x").w("y").t(),
        ];
        // Commit-timestamp order can never form a ww cycle...
        assert!(run(&h).is_ok());
        // ...but a version chain that disagrees with it does.
        let order: HashMap<Key, Vec<u64>> = [(key("x"), vec![1, 2]), (key("y"), vec![2, 1])]
            .into_iter()
            .collect();
        let r = check_with_version_order(&h, &order);
        assert_well_formed(&r);
        assert_eq!(summary(&r), vec![("G0", RC, vec![1, 2])], "{r}");
        assert_eq!(
            edges(&r.anomalies[0]),
            vec![e(1, 2, Ww, "x"), e(2, 1, Ww, "y")]
        );
    }

    /// Fekete, O'Neil, O'Neil: "A read-only transaction anomaly under snapshot isolation".
    /// T2 withdraws from x after reading x0, y0; T1 deposits into y; read-only T3 sees T1's
    /// deposit but not T2's withdrawal.
    fn read_only_anomaly(l: Level, l3: Level) -> Vec<TxnRecord> {
        vec![
            txn(2, l, 0, 4).r("x", 0).r("y", 0).w("x").t(),
            txn(1, l, 0, 1).r("y", 0).w("y").t(),
            txn(3, l3, 2, 3).r("x", 0).r("y", 1).t(),
        ]
    }

    #[test]
    fn read_only_anomaly_serializable_not_si() {
        assert!(run(&read_only_anomaly(SI, SI)).is_ok());
        let r = run(&read_only_anomaly(SER, SER));
        assert_eq!(summary(&r), vec![("G2-item", SER, vec![1, 3, 2])], "{r}");
        assert_eq!(
            edges(&r.anomalies[0]),
            vec![e(1, 3, Wr, "y"), e(3, 2, Rw, "x"), e(2, 1, Rw, "y")]
        );
        // Only the read-only transaction is serializable: still reported (it is on the cycle).
        let r = run(&read_only_anomaly(SI, SER));
        assert_eq!(summary(&r), vec![("G2-item", SER, vec![1, 3, 2])], "{r}");
    }

    #[test]
    fn consecutive_anti_dependencies_wrap_around() {
        // The read-only anomaly relabelled so the cycle printed from T1 has its two
        // anti-dependencies at the end and the start.
        let h = |l| {
            vec![
                txn(1, l, 0, 4).r("x", 0).r("y", 0).w("x").t(),
                txn(2, l, 0, 1).r("y", 0).w("y").t(),
                txn(3, l, 2, 3).r("x", 0).r("y", 2).t(),
            ]
        };
        assert!(run(&h(SI)).is_ok());
        let r = run(&h(SER));
        assert_eq!(summary(&r), vec![("G2-item", SER, vec![1, 2, 3])], "{r}");
        assert_eq!(
            edges(&r.anomalies[0]),
            vec![e(1, 2, Rw, "y"), e(2, 3, Wr, "y"), e(3, 1, Rw, "x")]
        );
    }

    #[test]
    fn non_adjacent_anti_dependencies_forbidden_at_si() {
        // T1 -rw a-> T2 -wr b-> T3 -rw c-> T4 -wr d-> T1
        let h = |l| {
            vec![
                txn(1, l, 0, 10).r("a", 0).r("d", 4).t(),
                txn(2, l, 0, 2).w("a").w("b").t(),
                txn(3, l, 3, 11).r("b", 2).r("c", 0).t(),
                txn(4, l, 0, 4).w("c").w("d").t(),
            ]
        };
        for l in [SI, SER, RR] {
            let r = run(&h(l));
            assert_eq!(
                summary(&r),
                vec![("G-nonadjacent", l, vec![1, 2, 3, 4])],
                "{r}"
            );
            assert_eq!(
                edges(&r.anomalies[0]),
                vec![
                    e(1, 2, Rw, "a"),
                    e(2, 3, Wr, "b"),
                    e(3, 4, Rw, "c"),
                    e(4, 1, Wr, "d")
                ]
            );
        }
        assert!(run(&h(RC)).is_ok());
    }

    /// T1 scans [a, m) of table 1 and finds nothing; T2 inserts b into that range and writes x
    /// (table 2), commits; T1 then reads T2's x (a locking RR implementation without predicate
    /// locks allows this).
    fn phantom(l: Level) -> Vec<TxnRecord> {
        let x = Key::new(2, "x");
        vec![
            txn(1, l, 0, 4).scan("a", "m").rk(x.clone(), 2, true).t(),
            txn(2, RC, 1, 2).ins("b").wk(x, WriteKind::Update).t(),
        ]
    }

    #[test]
    fn phantom_serializable_not_rr() {
        assert!(run(&phantom(RR)).is_ok());
        assert!(run(&phantom(RC)).is_ok());
        for l in [SI, SER] {
            let r = run(&phantom(l));
            assert_eq!(summary(&r), vec![("G-single", l, vec![1, 2])], "{r}");
            let got = edges(&r.anomalies[0]);
            assert_eq!(got, vec![e(1, 2, P, "b"), (2, 1, Wr, 2, "x".to_string())]);
        }
        // Scanning after T2 committed sees b (listed as a read): no predicate edge, no cycle.
        let x = Key::new(2, "x");
        let h = vec![
            txn(1, SER, 3, 4)
                .scan("a", "m")
                .r("b", 2)
                .rk(x.clone(), 2, true)
                .t(),
            txn(2, SER, 1, 2).ins("b").wk(x, WriteKind::Update).t(),
        ];
        assert!(run(&h).is_ok());
    }

    /// Secondary index 1 of table 1 holds a "colour" per row. T1 scans colours [g, h) and
    /// finds nothing; T2 moves row r (not green at T1's snapshot) to green and writes x; T1
    /// then reads T2's x. Only the recorded index keys can show that T2's write changed T1's
    /// result.
    fn secondary_phantom(l: Level, new_colour: &str) -> Vec<TxnRecord> {
        let x = Key::new(2, "x");
        vec![
            txn(3, RC, 0, 1).wx("r", WriteKind::Insert, "blue").t(),
            txn(1, l, 1, 4).scan_ix("g", "h").rk(x.clone(), 2, true).t(),
            txn(2, RC, 1, 2)
                .wx("r", WriteKind::Update, new_colour)
                .wk(x, WriteKind::Update)
                .t(),
        ]
    }

    #[test]
    fn secondary_index_phantom_is_a_predicate_edge() {
        for l in [SI, SER] {
            let r = run(&secondary_phantom(l, "green"));
            assert_eq!(summary(&r), vec![("G-single", l, vec![1, 2])], "{r}");
            let got = edges(&r.anomalies[0]);
            assert_eq!(got, vec![e(1, 2, P, "r"), (2, 1, Wr, 2, "x".to_string())]);
        }
        assert!(run(&secondary_phantom(RR, "green")).is_ok());
        // A move that stays outside the range changes nothing T1 scanned.
        assert!(run(&secondary_phantom(SER, "red")).is_ok());
    }

    #[test]
    fn secondary_index_scan_sees_deletes_and_first_matching_writer_only() {
        // Row r is green at T1's snapshot but deleted before it (T2): the scan observed the
        // delete (D -> T1). T4 later re-inserts r as red (no edge), then T5 makes it green
        // (the first matching writer: T1 -> T5).
        let h = vec![
            txn(9, RC, 0, 1).wx("r", WriteKind::Insert, "green").t(),
            txn(2, RC, 1, 2).del("r").t(),
            txn(1, SER, 3, 10).scan_ix("g", "h").t(),
            txn(4, RC, 4, 5).wx("r", WriteKind::Insert, "red").t(),
            txn(5, RC, 5, 6).wx("r", WriteKind::Update, "green").t(),
        ];
        let b = build(&h, &HashMap::new());
        let id = |v: u32| b.txns[v as usize].id;
        let mut got: Vec<(u64, u64, EdgeKind)> = b
            .edges
            .iter()
            .filter(|e| e.kind == PRW || (e.kind == WR && id(e.to) == 1))
            .map(|e| (id(e.from), id(e.to), edge_kind(e.kind)))
            .collect();
        got.sort_by_key(|&(f, t, _)| (f, t));
        assert_eq!(got, vec![(1, 5, P), (2, 1, Wr)]);
    }

    #[test]
    fn predicate_write_skew_only_serializable() {
        // Each scans the other's range, finds it empty and inserts into the other's range.
        let h = |l| {
            vec![
                txn(1, l, 0, 1).scan("a", "m").ins("n").t(),
                txn(2, l, 0, 2).scan("m", "z").ins("b").t(),
            ]
        };
        assert!(run(&h(RR)).is_ok());
        assert!(run(&h(SI)).is_ok());
        let r = run(&h(SER));
        assert_eq!(summary(&r), vec![("G2", SER, vec![1, 2])], "{r}");
        assert_eq!(
            edges(&r.anomalies[0]),
            vec![e(1, 2, P, "b"), e(2, 1, P, "n")]
        );
        // Own writes inside the scanned range and keys outside it add no edges.
        let h2 = vec![
            txn(1, SER, 0, 1).scan("a", "c").ins("b").t(),
            txn(2, SER, 0, 2).ins("c").ins("0").t(),
        ];
        let r = run(&h2);
        assert!(r.is_ok() && r.edges == 0, "{r}");
    }

    #[test]
    fn mixed_levels() {
        // Write skew needs a transaction that forbids it.
        let r = run(&write_skew(SER, SI));
        assert_eq!(summary(&r), vec![("G2-item", SER, vec![1, 2])], "{r}");
        let r = run(&write_skew(SI, RR));
        assert_eq!(summary(&r), vec![("G2-item", RR, vec![1, 2])], "{r}");
        assert!(run(&write_skew(SI, RC)).is_ok());
        // Lost update with a read-committed partner.
        let r = run(&lost_update(RC, SI));
        assert_eq!(summary(&r), vec![("G-single", SI, vec![1, 2])], "{r}");
        let r = run(&lost_update(SER, RC));
        assert_eq!(summary(&r), vec![("G-single", SER, vec![1, 2])], "{r}");
        // SER and RR on one cycle: both levels forbid it, one report at the strictest.
        let r = run(&lost_update(RR, SER));
        assert_eq!(summary(&r), vec![("G-single", SER, vec![1, 2])], "{r}");
        // Phantom: forbidden by the SI reader, allowed at RR.
        let mut h = phantom(SI);
        h[1].level = RR;
        let r = run(&h);
        assert_eq!(summary(&r), vec![("G-single", SI, vec![1, 2])], "{r}");
        // Two independent anomalies in one history are both reported.
        let mut h = write_skew(SER, SER);
        h.extend(lost_update(RC, RC).into_iter().map(|mut t| {
            t.id += 10;
            t.writes[0].key = key("z");
            t.reads[0].key = key("z");
            t
        }));
        h.extend(lost_update(SI, SI).into_iter().map(|mut t| {
            t.id += 20;
            t.writes[0].key = key("q");
            t.reads[0].key = key("q");
            t
        }));
        let r = run(&h);
        let mut s = summary(&r);
        s.sort();
        assert_eq!(
            s,
            vec![("G-single", SI, vec![21, 22]), ("G2-item", SER, vec![1, 2])],
            "{r}"
        );
    }

    #[test]
    fn bad_reads() {
        let h = vec![
            txn(1, SI, 0, 1).w("x").t(),
            txn(2, SI, 2, 3)
                .r("x", 99)
                .r("y", 99)
                .r("y", 1)
                .r("x", 1)
                .r("z", 2)
                .r("z", 2)
                .t(),
        ];
        let r = run(&h);
        assert_eq!(
            summary(&r),
            vec![
                ("G1a", SI, vec![99]),
                ("unknown-version", SI, vec![1]),
                ("unknown-version", SI, vec![2])
            ],
            "{r}"
        );
        assert!(
            r.anomalies[0]
                .to_string()
                .contains("T99 -wr t1:78(\"x\")-> T2"),
            "{r}"
        );
    }

    /// Partial-order timestamps: several updaters share one commit timestamp. Every record is
    /// kept (identity is the id, not the timestamp), a snapshot at the shared timestamp sees
    /// the whole group, cycles through group members are found, and two writers of one key
    /// at one timestamp are reported.
    #[test]
    fn shared_commit_timestamps() {
        let h = vec![
            txn(1, SI, 1, 5).r("x", 0).w("x").t(),
            txn(2, SI, 1, 5).r("y", 0).w("y").t(),
            txn(3, SI, 5, 5).r("x", 1).r("y", 2).t(),
            txn(4, SI, 4, 4).r("x", 0).r("y", 0).t(),
        ];
        let r = run(&h);
        assert!(r.is_ok(), "{r}");
        assert_eq!((r.txns, r.ignored_txns), (4, 0));
        // A write skew inside one group: each member read what the other wrote.
        let skew = vec![
            txn(1, SER, 1, 5).r("x", 0).r("y", 0).w("x").t(),
            txn(2, SER, 1, 5).r("x", 0).r("y", 0).w("y").t(),
        ];
        let r = run(&skew);
        assert_eq!(r.txns, 2, "{r}");
        let s = summary(&r);
        assert_eq!(s.len(), 1, "{r}");
        assert_eq!((s[0].0, s[0].1), ("G2-item", SER), "{r}");
        let mut on = s[0].2.clone();
        on.sort_unstable();
        assert_eq!(on, vec![1, 2]);
        let same_key = vec![
            txn(1, SI, 1, 5).w("x").t(),
            txn(2, SI, 1, 5).w("x").t(),
            txn(3, SI, 1, 6).w("x").t(),
        ];
        let r = run(&same_key);
        assert_eq!(
            summary(&r),
            vec![("shared-commit-ts", SI, vec![1, 2])],
            "{r}"
        );
        assert!(r.anomalies[0].to_string().contains("T1 and T2"), "{r}");
    }

    #[test]
    fn display_names_txns_edges_and_keys() {
        let mut h = lost_update(SI, SI);
        h[0].id = 7;
        h[1].reads.push(Read {
            key: Key::new(3, vec![0, 255]),
            writer: 0,
            found: false,
        });
        h[0].writes.push(Write {
            key: Key::new(3, vec![0, 255]),
            kind: WriteKind::Insert,
            index_keys: vec![],
        });
        let r = run(&h);
        assert_eq!(r.anomalies.len(), 1, "{r}");
        let text = r.anomalies[0].to_string();
        assert!(
            text.starts_with("G-single forbidden at SnapshotIsolation on {T2, T7}: T2 -"),
            "{text}"
        );
        assert!(text.contains("T7 -ww t1:78(\"x\")-> T2"), "{text}");
        assert!(text.contains("-rw t"), "{text}");
        // Non-printable key bytes are shown in hex only.
        assert_eq!(Key::new(3, vec![0, 255]).to_string(), "t3:00ff");
        assert!(r.to_string().starts_with("2 txns, "), "{r}");
    }

    #[test]
    fn long_cycle_does_not_overflow_the_stack() {
        let n: u64 = if cfg!(debug_assertions) {
            10_000
        } else {
            100_000
        };
        let name = |i: u64| i.to_be_bytes().to_vec();
        let h: Vec<TxnRecord> = (1..=n)
            .map(|i| {
                let prev = if i == 1 { n } else { i - 1 };
                txn(i, RC, i, i)
                    .wk(Key::new(1, name(i)), WriteKind::Insert)
                    .rk(Key::new(1, name(prev)), prev, true)
                    .t()
            })
            .collect();
        let r = run(&h);
        assert_eq!(r.anomalies.len(), 1);
        assert_eq!(r.anomalies[0].name, "G1c");
        assert_eq!(r.anomalies[0].cycle.len() as u64, n);
    }

    // ---- brute-force cross-check on small random histories ------------------------------

    /// Calls `f` with the nodes and edge kinds of every simple cycle of `edges` over `n` nodes.
    fn simple_cycles(n: u32, edges: &[E], f: &mut dyn FnMut(&[u32], &[u8])) {
        fn dfs(
            s: u32,
            v: u32,
            edges: &[E],
            nodes: &mut Vec<u32>,
            kinds: &mut Vec<u8>,
            f: &mut dyn FnMut(&[u32], &[u8]),
        ) {
            for e in edges.iter().filter(|e| e.from == v) {
                if e.to == s {
                    kinds.push(e.kind);
                    f(nodes, kinds);
                    kinds.pop();
                } else if e.to > s && !nodes.contains(&e.to) {
                    nodes.push(e.to);
                    kinds.push(e.kind);
                    dfs(s, e.to, edges, nodes, kinds, f);
                    kinds.pop();
                    nodes.pop();
                }
            }
        }
        for s in 0..n {
            dfs(s, s, edges, &mut vec![s], &mut Vec::new(), f);
        }
    }

    fn small_random_history(rng: &mut Rng, level: Level) -> Vec<TxnRecord> {
        let n = 2 + rng.below(4);
        let keys = ["a", "b", "c", "d"];
        let mut ts: Vec<u64> = (1..=2 * n).collect();
        for j in (1..ts.len()).rev() {
            ts.swap(j, rng.below(j as u64 + 1) as usize);
        }
        let mut h: Vec<TxnRecord> = (0..n)
            .map(|i| {
                let (b, c) = (
                    ts[2 * i as usize].min(ts[2 * i as usize + 1]),
                    ts[2 * i as usize].max(ts[2 * i as usize + 1]),
                );
                txn(i + 1, level, b, c).t()
            })
            .collect();
        for t in h.iter_mut() {
            for _ in 0..rng.below(3) {
                let k = keys[rng.below(4) as usize];
                let kind = [WriteKind::Insert, WriteKind::Update, WriteKind::Delete]
                    [rng.below(3) as usize];
                t.writes.push(Write {
                    key: key(k),
                    kind,
                    index_keys: vec![],
                });
            }
            if rng.below(4) == 0 {
                let lo = rng.below(4) as usize;
                let hi = lo + 1 + rng.below(3) as usize;
                t.scans.push(Scan {
                    table: 1,
                    index: 0,
                    lo: Bound::Included(keys[lo].as_bytes().to_vec()),
                    hi: if hi >= 4 {
                        Bound::Unbounded
                    } else {
                        Bound::Excluded(keys[hi].as_bytes().to_vec())
                    },
                });
            }
        }
        let writers: Vec<Vec<u64>> = keys
            .iter()
            .map(|k| {
                h.iter()
                    .filter(|t| t.writes.iter().any(|w| w.key == key(k)))
                    .map(|t| t.id)
                    .collect()
            })
            .collect();
        for t in h.iter_mut() {
            for _ in 0..rng.below(4) {
                let ki = rng.below(4) as usize;
                let ws = &writers[ki];
                let writer = if ws.is_empty() || rng.below(3) == 0 {
                    0
                } else {
                    ws[rng.below(ws.len() as u64) as usize]
                };
                t.reads.push(Read {
                    key: key(keys[ki]),
                    writer,
                    found: rng.below(2) == 0,
                });
            }
        }
        h
    }

    #[test]
    fn small_random_histories_agree_with_brute_force() {
        let rounds = if cfg!(debug_assertions) { 1_500 } else { 6_000 };
        let mut rng = Rng(0x2545_f491_4f6c_dd1d);
        let mut reported = [0usize; 4];
        for round in 0..rounds {
            let level = [RC, RR, SI, SER][round % 4];
            let h = small_random_history(&mut rng, level);
            let r = run(&h);
            assert!(
                r.anomalies
                    .iter()
                    .all(|a| a.name != "G1a" && a.name != "unknown-version"),
                "{r}"
            );
            let built = build(&h, &HashMap::new());
            let n = built.txns.len() as u32;
            let mut expected = false;
            simple_cycles(n, &built.edges, &mut |_, kinds| {
                expected |= forbids(level, kinds)
            });
            let id_of = |i: u32| built.txns[i as usize].id;
            for a in &r.anomalies {
                // Every witness edge is a graph edge, and the level forbids the witness.
                for e in &a.cycle {
                    assert!(
                        built.edges.iter().any(|g| id_of(g.from) == e.from
                            && id_of(g.to) == e.to
                            && edge_kind(g.kind) == e.kind
                            && *built.keys[g.key as usize] == e.key),
                        "{a} {h:?}"
                    );
                }
                let kinds: Vec<u8> = a.cycle.iter().map(|e| e.kind as u8).collect();
                assert!(forbids(level, &kinds), "{a}");
                assert_eq!(a.level, level);
                assert_eq!(a.name, classify(&kinds));
            }
            if level == SI {
                // SI witnesses may be closed walks; a simple forbidden cycle must be found.
                assert!(!expected || !r.is_ok(), "missed: {h:#?}");
            } else {
                assert_eq!(expected, !r.is_ok(), "{r}\n{h:#?}");
            }
            reported[round % 4] += usize::from(!r.is_ok());
        }
        // The generator does produce anomalies at every level.
        assert!(reported.iter().all(|&c| c > rounds / 100), "{reported:?}");
    }

    #[test]
    fn small_random_mixed_level_histories_agree_with_brute_force() {
        let rounds = if cfg!(debug_assertions) { 1_500 } else { 6_000 };
        let mut rng = Rng(0x6a09_e667_f3bc_c909);
        let (mut reported, mut walk_only) = (0, 0);
        for _ in 0..rounds {
            let mut h = small_random_history(&mut rng, RC);
            for t in h.iter_mut() {
                t.level = [RC, RR, SI, SER][rng.below(4) as usize];
            }
            let r = run(&h);
            let built = build(&h, &HashMap::new());
            let level_of = |i: u32| built.txns[i as usize].level;
            let mut expected = false;
            // A simple cycle is forbidden when a transaction on it forbids it.
            simple_cycles(
                built.txns.len() as u32,
                &built.edges,
                &mut |nodes, kinds| {
                    expected |= nodes.iter().any(|&v| forbids(level_of(v), kinds));
                },
            );
            for a in &r.anomalies {
                let kinds: Vec<u8> = a.cycle.iter().map(|e| e.kind as u8).collect();
                let levels: Vec<Level> = a
                    .txns()
                    .iter()
                    .map(|id| h.iter().find(|t| t.id == *id).unwrap().level)
                    .collect();
                assert!(levels.contains(&a.level) && forbids(a.level, &kinds), "{a}");
                assert!(
                    levels.iter().all(|&l| l <= a.level || !forbids(l, &kinds)),
                    "{a}"
                );
            }
            assert!(!expected || !r.is_ok(), "missed: {h:#?}");
            reported += usize::from(!r.is_ok());
            walk_only += usize::from(!expected && !r.is_ok());
        }
        eprintln!("mixed: {reported} reported, {walk_only} only as closed walks");
        assert!(reported > rounds / 10);
    }

    /// A random history over two tables whose rows carry keys in secondary indexes 1 and 2
    /// (several, repeated, on deletes too), with secondary scans of every bound kind.
    fn random_secondary_history(rng: &mut Rng) -> Vec<TxnRecord> {
        let rows = ["a", "b", "c", "d", "e", "f"];
        let ix: [&[u8]; 6] = [b"", b"a", b"b", b"ba", b"c", b"d"];
        let n = 2 + rng.below(8);
        let mut h: Vec<TxnRecord> = (1..=n)
            .map(|id| {
                let b = rng.below(20);
                // Commit timestamps may repeat (shared-commit-ts) and start at the snapshot.
                txn(id, SER, b, b + rng.below(8)).t()
            })
            .collect();
        let bound = |rng: &mut Rng| match rng.below(3) {
            0 => Bound::Included(ix[rng.below(6) as usize].to_vec()),
            1 => Bound::Excluded(ix[rng.below(6) as usize].to_vec()),
            _ => Bound::Unbounded,
        };
        for t in h.iter_mut() {
            for _ in 0..rng.below(5) {
                let kind = [WriteKind::Insert, WriteKind::Update, WriteKind::Delete]
                    [rng.below(3) as usize];
                let index_keys = (0..rng.below(4))
                    .map(|_| (1 + rng.below(2) as u32, ix[rng.below(6) as usize].to_vec()))
                    .collect();
                t.writes.push(Write {
                    key: Key::new(1 + rng.below(2) as u32, rows[rng.below(6) as usize]),
                    kind,
                    index_keys,
                });
            }
            for _ in 0..rng.below(3) {
                t.scans.push(Scan {
                    table: 1 + rng.below(2) as u32,
                    index: rng.below(3) as u32,
                    lo: bound(rng),
                    hi: bound(rng),
                });
            }
        }
        let writers: Vec<u64> = h
            .iter()
            .filter(|t| !t.writes.is_empty())
            .map(|t| t.id)
            .collect();
        for t in h.iter_mut() {
            for _ in 0..rng.below(4) {
                let writer = if writers.is_empty() || rng.below(3) == 0 {
                    0
                } else {
                    writers[rng.below(writers.len() as u64) as usize]
                };
                t.reads.push(Read {
                    key: Key::new(1 + rng.below(2) as u32, rows[rng.below(6) as usize]),
                    writer,
                    found: rng.below(2) == 0,
                });
            }
        }
        h
    }

    #[test]
    fn secondary_scan_edges_agree_with_brute_force() {
        let rounds = if cfg!(debug_assertions) {
            3_000
        } else {
            20_000
        };
        let mut rng = Rng(0x3c6e_f372_fe94_f82b);
        let mut added = 0;
        for round in 0..rounds {
            let h = random_secondary_history(&mut rng);
            // Every other round overrides the version order of some keys (a shuffle of their
            // writers).
            let mut chosen: std::collections::BTreeMap<Key, Vec<u64>> = Default::default();
            if round % 2 == 1 {
                for t in &h {
                    for w in &t.writes {
                        if rng.below(2) == 0 {
                            chosen.entry(w.key.clone()).or_default().push(t.id);
                        }
                    }
                }
                for ids in chosen.values_mut() {
                    ids.dedup();
                    for j in (1..ids.len()).rev() {
                        ids.swap(j, rng.below(j as u64 + 1) as usize);
                    }
                }
            }
            let order: HashMap<Key, Vec<u64>> = chosen.into_iter().collect();
            let fast = build_with::<false>(&h, &order);
            let brute = build_with::<true>(&h, &order);
            assert!(fast.edges == brute.edges, "{h:#?}\n{order:?}");
            // Count the rounds where secondary scans add edges.
            let mut primary_only = h.clone();
            for t in primary_only.iter_mut() {
                t.scans.retain(|s| s.index == 0);
            }
            let without = build_with::<false>(&primary_only, &order);
            added += usize::from(fast.edges != without.edges);
        }
        // The generator does produce edges from secondary scans.
        assert!(added > rounds / 10, "{added}");
    }

    // ---- random histories ----------------------------------------------------------------

    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
    }

    fn kb(k: u64) -> Vec<u8> {
        (k as u32).to_be_bytes().to_vec()
    }

    /// A serial history: transactions run one at a time in commit order; each reads the latest
    /// committed version (or its own write). Returns the history and each key's writers in order.
    fn serial_history(n: u64, nkeys: u64, rng: &mut Rng) -> (Vec<TxnRecord>, Vec<Vec<u64>>) {
        let levels = [RC, RR, SI, SER];
        let mut cur: Vec<(u64, bool)> = vec![(0, true); nkeys as usize];
        let mut versions: Vec<Vec<u64>> = vec![vec![]; nkeys as usize];
        let mut h = Vec::with_capacity(n as usize);
        for id in 1..=n {
            let mut t = txn(id, levels[rng.below(4) as usize], 10 * id, 10 * id + 5).t();
            let mut own: Vec<(u64, bool)> = Vec::new();
            let visible = |own: &Vec<(u64, bool)>, cur: &Vec<(u64, bool)>, k: u64| {
                own.iter()
                    .rev()
                    .find(|o| o.0 == k)
                    .map(|o| (id, o.1))
                    .unwrap_or(cur[k as usize])
            };
            for _ in 0..10 {
                let op = rng.below(10);
                let k = rng.below(nkeys);
                if op < 5 {
                    let (writer, found) = visible(&own, &cur, k);
                    t.reads.push(Read {
                        key: Key::new(1, kb(k)),
                        writer,
                        found,
                    });
                } else if op < 9 {
                    let live = visible(&own, &cur, k).1;
                    let kind = if !live {
                        WriteKind::Insert
                    } else if rng.below(4) == 0 {
                        WriteKind::Delete
                    } else {
                        WriteKind::Update
                    };
                    t.writes.push(Write {
                        key: Key::new(1, kb(k)),
                        kind,
                        index_keys: vec![],
                    });
                    own.push((k, kind != WriteKind::Delete));
                } else {
                    let hi = (k + 1 + rng.below(8)).min(nkeys);
                    t.scans.push(Scan {
                        table: 1,
                        index: 0,
                        lo: Bound::Included(kb(k)),
                        hi: Bound::Excluded(kb(hi)),
                    });
                    for j in k..hi {
                        let (writer, found) = visible(&own, &cur, j);
                        if found {
                            t.reads.push(Read {
                                key: Key::new(1, kb(j)),
                                writer,
                                found,
                            });
                        }
                    }
                }
            }
            for (i, &(k, live)) in own.iter().enumerate() {
                if own[i + 1..].iter().all(|o| o.0 != k) {
                    cur[k as usize] = (id, live);
                    versions[k as usize].push(id);
                }
            }
            h.push(t);
        }
        (h, versions)
    }

    #[test]
    fn random_serial_history_is_clean_and_injected_anomalies_are_found() {
        random_history_with_injected_anomalies(if cfg!(debug_assertions) {
            4_000
        } else {
            20_000
        });
    }

    /// The 100k-transaction timing run (`cargo test --release -- --ignored --nocapture`).
    #[test]
    #[ignore = "timing run; about 2 s in release"]
    fn random_history_100k() {
        random_history_with_injected_anomalies(100_000);
    }

    fn random_history_with_injected_anomalies(n: u64) {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ n);
        let (mut h, versions) = serial_history(n, n / 2, &mut rng);
        let ops: usize = h
            .iter()
            .map(|t| t.reads.len() + t.writes.len() + t.scans.len())
            .sum();
        let t0 = Instant::now();
        let r = run(&h);
        let took = t0.elapsed();
        eprintln!(
            "serial history: {n} txns, {ops} ops, {} edges, checked in {took:?}",
            r.edges
        );
        assert!(r.is_ok(), "{r}");
        assert_eq!(r.txns as u64, n);
        assert!(r.edges as u64 > 5 * n);

        // (a) A lost update on fresh keys, at a random point in time.
        let m = 1 + rng.below(n);
        let lu = Key::new(9, "lu");
        let (a, b) = (n + 1, n + 2);
        h.push(
            txn(a, SI, 10 * m + 1, 10 * m + 2)
                .rk(lu.clone(), 0, false)
                .wk(lu.clone(), WriteKind::Insert)
                .t(),
        );
        h.push(
            txn(b, SI, 10 * m + 1, 10 * m + 3)
                .rk(lu.clone(), 0, false)
                .wk(lu, WriteKind::Insert)
                .t(),
        );

        // (b) Read skew: a read-only serializable transaction right after W sees W's write of
        // one key and the version before W of another key W wrote.
        let mut i = rng.below(n - 100) as usize;
        let (w, ka, kb_) = loop {
            let mut ks: Vec<&Key> = h[i].writes.iter().map(|w| &w.key).collect();
            ks.sort();
            ks.dedup();
            if ks.len() >= 2 {
                break (h[i].id, ks[0].clone(), ks[1].clone());
            }
            i += 1;
        };
        let kbv = u32::from_be_bytes(kb_.key.clone().try_into().unwrap()) as usize;
        let pos = versions[kbv].iter().position(|&x| x == w).unwrap();
        let before = if pos == 0 { 0 } else { versions[kbv][pos - 1] };
        let reader = n + 3;
        h.push(
            txn(reader, SER, 10 * w + 6, 10 * w + 7)
                .rk(ka.clone(), w, true)
                .rk(kb_.clone(), before, true)
                .t(),
        );

        // Shuffle: the checker must not depend on the order of records.
        for j in (1..h.len()).rev() {
            h.swap(j, rng.below(j as u64 + 1) as usize);
        }
        let t0 = Instant::now();
        let r = run(&h);
        eprintln!("with injected anomalies: checked in {:?}", t0.elapsed());
        let mut s = summary(&r);
        s.sort();
        assert_eq!(
            s,
            vec![
                ("G-single", SI, vec![a, b]),
                ("G-single", SER, vec![w, reader])
            ],
            "{r}"
        );
        let skew = r.anomalies.iter().find(|x| x.level == SER).unwrap();
        assert_eq!(skew.cycle[0].kind, Wr);
        assert_eq!(skew.cycle[0].key, ka);
        assert_eq!(skew.cycle[1].kind, Rw);
        assert_eq!(skew.cycle[1].key, kb_);
    }
}
