//! What every protocol sees of a transaction: who it is, its timestamps, level and flags,
//! and its read, scan and write sets. The hooks of `cc/` take this (with their own state,
//! `cc::TxnCc` and `cc::SlotCc`) instead of the whole `Transaction`, so a protocol cannot
//! reach the transaction's mechanics (its chains, indexes, buffers); the transaction code
//! (`txn/`) owns one inside each `Transaction` and carries out what the hooks decide.

use crate::config::{Isolation, Protocol};
use crate::shared::Shared;
use crate::storage::{TupleId, WriteRecord};
use crate::timestamp::Timestamp;
use crate::txn::table::{Slot, TxnId};
use crate::version::Version;
use std::cell::Cell;

/// `healing`'s lock-order key of a row: (table rank, table id, tuple id) (`cc/healing.rs`),
/// packed into one integer in that order (bits 112..128 the rank, 64..96 the table id, 0..64
/// the tuple id), so that the commit's sort and its walks compare one `u128` instead of a
/// tuple: with ~35 elements per TPC-C transaction and ~260 per Delivery, the tuple
/// comparisons were most of what `healing` sorted beyond OCC.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct HealKey(u128);

impl HealKey {
    #[inline]
    pub(crate) fn new(rank: u16, table: u32, tid: TupleId) -> HealKey {
        HealKey((u128::from(rank) << 112) | (u128::from(table) << 64) | u128::from(tid.get()))
    }

    #[inline]
    pub(crate) fn table(self) -> u32 {
        (self.0 >> 64) as u32
    }

    #[inline]
    pub(crate) fn tid(self) -> TupleId {
        TupleId::new(self.0 as u64)
    }

    /// The key as a sort key with room for one bit below it (`cc/healing.rs`'s elements).
    #[inline]
    pub(crate) fn shifted(self) -> u128 {
        self.0 << 1
    }

    /// `shifted`'s inverse.
    #[inline]
    pub(crate) fn unshifted(x: u128) -> HealKey {
        HealKey(x >> 1)
    }
}

/// A predicate read recorded for the phantom re-check (Hekaton §3.2).
#[derive(Clone, Copy, Debug)]
pub(crate) struct ScanRecord {
    pub table: u32,
    /// Index position, or `TABLE_SCAN` for a whole-table scan in tuple-id order.
    pub index: u16,
    /// Bounds as byte ranges of `Sets::scan_keys`; a point lookup has lo = hi = Included.
    pub lo: (u8, u32, u32),
    pub hi: (u8, u32, u32),
    pub point: bool,
    /// The read-set entries the operation that made this record added (`Sets::op_reads`
    /// to the end): Silo's re-check asks whether a row was read by this very scan.
    pub reads: (u32, u32),
    /// The leaves the scan read, as a range of `Sets::scan_nodes`, when they cover the
    /// record's range and every entry the scan met left a read in `reads` (Silo's node set,
    /// `index::btree::NodeStamp`): while they hold their stamps the range holds the same
    /// entries, each covered by its read's validation, so the re-check need not scan again.
    pub nodes: Option<(u32, u32)>,
}

/// `ScanRecord::index` of a whole-table scan (`Transaction::scan_table`).
pub(crate) const TABLE_SCAN: u16 = u16::MAX;

/// The read, scan and write sets. Kept with the transaction-table slot's buffers between
/// transactions (`SlotLocal::sets`), so a transaction allocates nothing for them in steady state.
#[derive(Default)]
pub(crate) struct Sets {
    pub read_set: Vec<*const Version>,
    /// The key of each `read_set` entry's row, `(table rank, table id, tuple id)`, taken
    /// when it is read so the commit need not look each table up, where `TxnCtx::keys_reads`
    /// (`healing`'s lock order, `mvocc`'s column check). Empty otherwise.
    pub read_keys: Vec<HealKey>,
    /// Length of `read_set` when the current operation began.
    pub op_reads: u32,
    pub scan_set: Vec<ScanRecord>,
    /// The keys of `scan_set`'s bounds, back to back.
    pub scan_keys: Vec<u8>,
    /// The leaves `scan_set`'s ordered scans read (`ScanRecord::nodes`).
    pub scan_nodes: Vec<crate::index::btree::NodeStamp>,
    pub write_set: Vec<WriteRecord>,
}

impl Sets {
    /// Empties every set (their memory stays).
    pub(crate) fn clear(&mut self) {
        self.read_set.clear();
        self.read_keys.clear();
        self.op_reads = 0;
        self.scan_set.clear();
        self.scan_keys.clear();
        self.scan_nodes.clear();
        self.write_set.clear();
    }
}

/// The state of one transaction that every protocol shares.
pub(crate) struct TxnCtx<'db> {
    /// The state the transaction runs in (the `Database`'s `Shared`).
    pub(crate) db: &'db Shared,
    /// Its transaction-table slot.
    pub(crate) slot_idx: usize,
    pub(crate) id: TxnId,
    pub(crate) begin_ts: Timestamp,
    pub(crate) isolation: Isolation,
    pub(crate) read_only: bool,
    /// The protocol this transaction runs (the configured one; `hybrid` resolved to `occ` or
    /// `2pl`; MVOCC for recovery's replay).
    pub(crate) protocol: Protocol,
    /// Whether reads are recorded in version headers (MVTO read-ts, MV2PL read locks): not
    /// for a READ ONLY transaction that reads a snapshot.
    pub(crate) tracks_reads: bool,
    /// Reads and ignores Preparing writers' versions speculatively, with commit dependencies
    /// (Hekaton §2.7; MVOCC and SI with `Config::commit_dependencies`), instead of waiting.
    pub(crate) speculates: bool,
    /// A commit dependency was taken (`Resolver::speculate`). The transaction then never
    /// re-pins its memory epoch: a version it read speculatively is freed by its creator's
    /// rollback, protected only by the pin, not by the visibility watermark.
    pub(crate) took_deps: Cell<bool>,
    /// Each read-set entry also records its row's key in `Sets::read_keys`
    /// (`cc::keys_reads`).
    pub(crate) keys_reads: bool,
    /// The slot's read filter, when the protocol keeps it (`cc::keeps_read_filter`).
    pub(crate) read_filter: Option<&'db crate::txn::table::ReadFilter>,
    pub(crate) sets: Sets,
}

impl<'db> TxnCtx<'db> {
    /// Its transaction-table slot.
    #[inline]
    pub(crate) fn slot(&self) -> &'db Slot {
        self.db.txns.slot(self.slot_idx)
    }

    /// Whether each statement reads as of now rather than as of the begin timestamp: Read
    /// Committed. (Hekaton §4.2 has every pessimistic transaction read as of now; under
    /// `mv2pl-wait` that made serializable readers of secondary groups on in-place storage
    /// with `logical-pk` pointers miss a row moved between their scans, so it reads as of its
    /// begin at rr and serializable, and its read locks fail on a version replaced since.)
    #[inline]
    pub(crate) fn reads_latest(&self) -> bool {
        self.isolation == crate::config::Isolation::ReadCommitted
    }

    /// Single-version protocols: our buffered (private, not yet installed) write of `tid`, if
    /// any. A write record with a superseded version is buffered until commit; one without
    /// is an insert, which Silo makes at once (`cc/silo.rs`).
    #[inline]
    pub(crate) fn pending_write(&self, table: u32, tid: TupleId) -> Option<*mut Version> {
        self.pending_record(table, tid).map(|w| w.new)
    }

    /// `pending_write`'s write record (with `old`, the version the write read).
    #[inline]
    pub(crate) fn pending_record(&self, table: u32, tid: TupleId) -> Option<&WriteRecord> {
        self.sets
            .write_set
            .iter()
            .rev()
            .find(|w| w.tid == tid && w.table == table && !w.old.is_null())
    }
}
