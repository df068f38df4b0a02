//! Concurrency control (thesis §5.3; Hekaton §2–3). The seam is `Protocol` in `Config`,
//! copied into each transaction. The transaction code (`txn/`) never asks which protocol
//! runs: it calls the hooks below and carries out what they decide — `begin`, `on_read`,
//! `before_scan`, `on_scan`, `on_miss`, `may_write`, `on_index_enter`; at commit
//! `commit_read_only`, `precommit`, `lock_for_commit`, `serialization_point`, `validate`,
//! `finalize`, `commit_tid`, `release` (the two commit pipelines are in `txn/end.rs`); at
//! abort `on_abort`, `after_abort`; `snapshot_protocol` for the engine — and the predicates
//! that read one table, `traits`. Each matches the protocol once, exhaustively (no
//! catch-all arm, so a new protocol is a compile error at every decision), and returns a
//! decision: `Ok` to proceed, `Err(reason)` to abort, a timestamp.
//!
//! A hook sees the transaction through `txn::state::TxnCtx` (ids, timestamps, level, the
//! read, scan and write sets), never the `Transaction` itself, plus the protocol's own state:
//! each protocol keeps it in its own struct (`ssn::Stamps`, `mvto::Blocked`,
//! `mv2pl::SlotLocks`, `ssn::SlotScratch`, `silo::SlotState`, `occ::SlotState`,
//! `hybrid::SlotState`, `silo::Epochs`, `mv2pl::RangeLocks`), gathered here into the
//! per-transaction (`TxnCc`), per-slot (`SlotCc`) and per-engine (`EngineCc`, which keeps
//! per-table state by table id) slots the mechanism holds without looking inside; the hooks
//! that need the per-engine state take it as a parameter. Inside the code protocols share
//! (`mvocc::validate`, `silo::validate`, `ssn::precommit`) the protocols that share it are
//! still told apart by comparing `tx.protocol`.
//!
//! The multi-version protocols share the version format, visibility (Hekaton Tables 1–2,
//! `visibility.rs`), the write lock in the End field and the multi-version commit pipeline;
//! they differ in what a read records and what a write and a commit check:
//! - `mvocc` (`mvocc.rs`): nothing on reads; read validation and scan re-checks at commit;
//! - `si`, `ermia-si`: MVOCC's code at Snapshot Isolation only (first-updater-wins, no
//!   validation);
//! - `mvto` (`mvto.rs`): read-ts on reads and scans, checked by writes; no validation;
//! - `mv2pl`, `mv2pl-wait` (`mv2pl.rs`): read locks on reads, checked by writes; scan
//!   re-checks at commit (`mv2pl-wait`: range locks instead, and waits at precommit);
//! - `ssn`, `ssi`, `ermia-ssi` (`ssn.rs`; pre-commit tests in `ssi.rs`, `ermia_ssi.rs`): SI
//!   plus stamps — reader bits on reads, at commit the exclusion-window test (SSN), Cahill's
//!   two flags (SSI) or ERMIA's dangerous-structure test, stamps left in the versions.
//!
//! `silo`, `occ`, `2pl` and `hybrid` (`silo.rs`, `occ.rs`, `twopl.rs`, `hybrid.rs`) are
//! single-version: they run on version storage `single-version` only, with Silo's commit
//! pipeline (buffered writes locked in a global order, read-set validation, epoch-based
//! TIDs); `hybrid` runs each transaction as `occ`, or as `2pl` after a validation failure in
//! the same transaction-table slot
//! (`hybrid::SlotState::retry_2pl`).

pub mod ermia_ssi;
pub mod healing;
pub mod hybrid;
pub mod mv2pl;
pub mod mvocc;
pub mod mvto;
pub mod occ;
pub mod silo;
pub mod ssi;
pub mod ssn;
pub mod twopl;
pub mod visibility;

use crate::config::{Isolation, Protocol};
use crate::error::AbortReason;
use crate::shared::{Shared, MAX_TABLES};
use crate::storage::Table;
use crate::timestamp::Timestamp;
use crate::txn::state::{TxnCtx, TABLE_SCAN};
use crate::txn::table::bump;
use crate::version::Version;
use std::sync::OnceLock;
use std::time::Duration;
use visibility::Resolver;

/// Per-transaction protocol state, one struct per protocol that keeps any.
pub(crate) struct TxnCc {
    /// SSN, SSI, ERMIA-SSI: the transaction's stamps.
    pub(crate) ssn: ssn::Stamps,
    /// MVTO: the no-wait resolver's "would have waited" flag.
    pub(crate) mvto: mvto::Blocked,
}

impl TxnCc {
    /// The state of a transaction that has done nothing yet.
    pub(crate) fn new() -> Self {
        TxnCc {
            ssn: ssn::Stamps::new(),
            mvto: mvto::Blocked::default(),
        }
    }
}

/// Per-slot reusable protocol state (scratch and held locks), kept with the slot's buffers
/// (`txn::SlotLocals`) between transactions so that a transaction allocates nothing in
/// steady state.
#[derive(Default)]
pub(crate) struct SlotCc {
    /// MV2PL, `mv2pl-wait`, 2PL: read locks and range locks held.
    pub(crate) mv2pl: mv2pl::SlotLocks,
    /// SSN, ERMIA-SSI: scratch of the commit.
    pub(crate) ssn: ssn::SlotScratch,
    /// Silo, OCC, 2PL: lock-order scratch, the slot's last TID.
    pub(crate) silo: silo::SlotState,
    /// OCC: lock-order scratch and the read-set locks its commit holds.
    pub(crate) occ: occ::SlotState,
    /// `hybrid`: the retry flag.
    pub(crate) hybrid: hybrid::SlotState,
    /// `healing`: the locks its commit holds, the validation cursor, the heals made.
    pub(crate) healing: healing::SlotState,
    /// `mvocc`: the column check's masks and re-pointed reads.
    pub(crate) mvocc: mvocc::SlotState,
}

impl SlotCc {
    /// Whether the slot's transaction holds no lock of any protocol (what `release` and
    /// `after_abort` must leave behind).
    pub(crate) fn holds_nothing(&self) -> bool {
        self.mv2pl.read_locks.is_empty()
            && self.mv2pl.range_locks.is_empty()
            && self.occ.locks.is_empty()
            && self.healing.held.is_empty()
    }
}

/// Per-engine protocol state.
pub(crate) struct EngineCc {
    /// Silo's global epoch.
    pub(crate) silo_epochs: silo::Epochs,
    /// Single-version, command-logging database: the largest TID drawn at a serialization
    /// point so far (`ordered_commit_tid`).
    tid_order: crossbeam_utils::CachePadded<std::sync::atomic::AtomicU64>,
    /// `mv2pl-wait`: per table id, per index, the range locks of serializable scanners
    /// (Hekaton §4.1.2, `mv2pl.rs`). The array is made on the engine's first range lock and
    /// a table's entry on the table's first one (other protocols never make them); a table's
    /// indexes never change (`Database::create_index` makes a copy under a new id).
    range_locks: OnceLock<Box<[OnceLock<TableRangeLocks>]>>,
}

/// `mv2pl-wait`: one table's range locks, per index.
type TableRangeLocks = Box<[mv2pl::RangeLocks]>;

impl EngineCc {
    /// The state of a database just opened.
    pub(crate) fn new() -> Self {
        EngineCc {
            silo_epochs: silo::Epochs::new(),
            tid_order: Default::default(),
            range_locks: OnceLock::new(),
        }
    }

    /// The range locks of every index of `t`, made on first use.
    pub(crate) fn range_locks(&self, t: &Table) -> &[mv2pl::RangeLocks] {
        let tables = self
            .range_locks
            .get_or_init(|| (0..MAX_TABLES).map(|_| OnceLock::new()).collect());
        match tables.get(t.id as usize) {
            Some(l) => l.get_or_init(|| (0..t.indexes.len()).map(|_| Default::default()).collect()),
            None => panic!("table id {} is not below MAX_TABLES", t.id),
        }
    }

    /// The range locks of table `id`'s indexes, if any was ever taken.
    pub(crate) fn range_locks_taken(&self, id: u32) -> Option<&[mv2pl::RangeLocks]> {
        let l = self.range_locks.get()?.get(id as usize)?.get()?;
        Some(l)
    }
}

/// What `begin` decided for a new transaction.
pub(crate) struct Begin {
    /// The protocol the transaction runs (`hybrid` resolved to `occ` or `2pl`).
    pub(crate) protocol: Protocol,
    /// Its begin timestamp (MVTO draws its own).
    pub(crate) begin_ts: Timestamp,
    /// Whether its reads are tracked (see `Transaction::tracks_reads`).
    pub(crate) tracks_reads: bool,
}

/// Hook `begin`: a transaction asked for `protocol` starts in slot `slot_idx` (whose
/// protocol state is `local`) with read time `begin_ts`; decides the protocol it runs, its
/// begin timestamp and whether its reads are tracked. Fails (an MVTO READ ONLY snapshot
/// whose wait ran out) with the reason the new transaction must abort for.
pub(crate) fn begin(
    db: &Shared,
    slot_idx: usize,
    local: &mut SlotCc,
    protocol: Protocol,
    read_only: bool,
    begin_ts: Timestamp,
    snapshot_wait: Duration,
) -> Result<Begin, AbortReason> {
    let slot = db.txns.slot(slot_idx);
    let protocol = match protocol {
        Protocol::Hybrid => {
            let p = hybrid::next(&mut local.hybrid);
            if p == Protocol::TwoPl {
                bump(&slot.stats.hybrid_2pl, 1);
            }
            p
        }
        p => p,
    };
    debug_assert!(
        protocol != Protocol::Hybrid,
        "hybrid runs each transaction as occ or 2pl"
    );
    let (begin_ts, tracks_reads) = match protocol {
        Protocol::Mvto => mvto::begin(db, slot_idx, read_only, begin_ts, snapshot_wait)?,
        // Under SSN and ERMIA-SSI the serial order is not the commit order, so a snapshot
        // alone is not serializable: a READ ONLY transaction is tracked like any other
        // (ssn.rs).
        Protocol::Ssn | Protocol::Ssi => (begin_ts, true),
        Protocol::ErmiaSsi => {
            if keeps_read_filter(protocol, &db.config) {
                slot.reads.clear();
            }
            (begin_ts, true)
        }
        Protocol::Mv2pl | Protocol::Mv2plWait => (begin_ts, !read_only),
        // Single-version protocols have no snapshot: every transaction is tracked.
        Protocol::TwoPl => (begin_ts, true),
        Protocol::Silo | Protocol::Occ | Protocol::Hybrid | Protocol::Healing => (begin_ts, false),
        Protocol::Mvocc | Protocol::Si | Protocol::ErmiaSi => (begin_ts, false),
    };
    Ok(Begin {
        protocol,
        begin_ts,
        tracks_reads,
    })
}

/// Which reads go to the read set for validation at commit.
#[derive(Clone, Copy, PartialEq, Eq)]
enum ReadValidation {
    /// None (the protocol protects reads in the version headers, or not at all).
    Never,
    /// At Serializable and Repeatable Read (MVOCC).
    Serializable,
    /// Always (Silo, OCC: single-version, no snapshot).
    Always,
}

/// What the transaction code must know of a protocol between hooks, as values: one
/// exhaustive table (`traits`), so a new protocol states each of them.
#[derive(Clone, Copy)]
struct Traits {
    /// Which reads are validated at commit (`validates_reads`).
    validates_reads: ReadValidation,
    /// Serializable reads take range locks (`mv2pl-wait`).
    range_locks: bool,
    /// A read that would wait for an older writer arms the no-wait resolver's `blocked`
    /// flag instead (MVTO).
    blocks: bool,
    /// Locks are held as the transaction runs (2PL): a conflict with another's lock is
    /// `LockConflict`.
    locks_as_it_runs: bool,
    /// An error a stale read may have caused becomes `read_validation` at once (Silo, OCC).
    stale_reads_fail_early: bool,
    /// `on_index_enter` checks something (MVTO).
    checks_index_entry: bool,
    /// A writer's end timestamp is its begin timestamp (MVTO, `ends_at_begin_ts`).
    ends_at_begin_ts: bool,
    /// A stored-procedure call's stale read heals at commit (`healing`); each read-set entry
    /// also records its row's lock-order key (`Sets::read_keys`).
    heals: bool,
}

/// The traits of no protocol in particular: every flag off.
const PLAIN: Traits = Traits {
    validates_reads: ReadValidation::Never,
    range_locks: false,
    blocks: false,
    locks_as_it_runs: false,
    stale_reads_fail_early: false,
    checks_index_entry: false,
    ends_at_begin_ts: false,
    heals: false,
};

/// The traits of `p`.
#[inline]
const fn traits(p: Protocol) -> Traits {
    match p {
        Protocol::Mvocc => Traits {
            validates_reads: ReadValidation::Serializable,
            ..PLAIN
        },
        Protocol::Mvto => Traits {
            blocks: true,
            checks_index_entry: true,
            ends_at_begin_ts: true,
            ..PLAIN
        },
        Protocol::Mv2plWait => Traits {
            range_locks: true,
            ..PLAIN
        },
        Protocol::Silo | Protocol::Occ => Traits {
            validates_reads: ReadValidation::Always,
            stale_reads_fail_early: true,
            ..PLAIN
        },
        // A healable call's stale read heals at commit (`Transaction::unless_stale_read`);
        // every other transaction fails early like OCC's.
        Protocol::Healing => Traits {
            validates_reads: ReadValidation::Always,
            stale_reads_fail_early: true,
            heals: true,
            ..PLAIN
        },
        Protocol::TwoPl => Traits {
            locks_as_it_runs: true,
            ..PLAIN
        },
        Protocol::Mv2pl
        | Protocol::Si
        | Protocol::Ssi
        | Protocol::ErmiaSi
        | Protocol::ErmiaSsi
        | Protocol::Ssn
        | Protocol::Hybrid => PLAIN,
    }
}

/// The protocol a READ ONLY snapshot transaction (a checkpoint's) runs when `p` is
/// configured: `p` itself, except that under SSN and ERMIA-SSI it is an MVOCC snapshot (a
/// checkpoint needs the state after a prefix of the commit order, not a serializable read
/// their commit test could abort) and under `hybrid` it is `occ`.
pub(crate) fn snapshot_protocol(p: Protocol) -> Protocol {
    match p {
        Protocol::Ssn | Protocol::Ssi | Protocol::ErmiaSsi => Protocol::Mvocc,
        Protocol::Hybrid => Protocol::Occ,
        Protocol::Mvocc
        | Protocol::Mvto
        | Protocol::Mv2pl
        | Protocol::Mv2plWait
        | Protocol::Si
        | Protocol::ErmiaSi
        | Protocol::Silo
        | Protocol::Occ
        | Protocol::TwoPl
        | Protocol::Healing => p,
    }
}

/// Whether reads go to the read set for validation at commit (MVOCC at Serializable and
/// Repeatable Read, Silo, OCC: MVTO and MV2PL protect their reads in the version headers;
/// SSN and ERMIA-SSI keep a read set for their stamps, `on_read`).
#[inline]
pub(crate) fn validates_reads(p: Protocol, isolation: Isolation) -> bool {
    match traits(p).validates_reads {
        ReadValidation::Never => false,
        ReadValidation::Serializable => matches!(
            isolation,
            Isolation::Serializable | Isolation::RepeatableRead
        ),
        ReadValidation::Always => true,
    }
}

/// Whether a READ ONLY transaction's commit validates what it read: under the
/// single-version protocols, and under SSN, SSI and ERMIA-SSI, which stamp readers. Every
/// other multi-version protocol ends it at its begin timestamp with no validation
/// (`Transaction::commit_multi_version`), so it keeps no read or scan set
/// (`Transaction::keeps_reads`).
#[inline]
pub(crate) fn validates_read_only(p: Protocol) -> bool {
    p.single_version() || p.stamped()
}

/// Whether a stored-procedure call's commit can heal it (`healing`, `heal_lock`); each
/// read-set entry then also records its row's lock-order key (`Sets::read_keys`).
#[inline]
pub(crate) fn heals(p: Protocol) -> bool {
    traits(p).heals
}

/// Whether each read-set entry also records its row's key (`Sets::read_keys`): under
/// `healing` (its lock order), and under `mvocc` with the column check on
/// (`Config::column_check`: the row's version at the end timestamp is found by it).
pub(crate) fn keys_reads(p: Protocol, config: &crate::config::Config) -> bool {
    heals(p)
        || (p == Protocol::Mvocc && config.protocol == Protocol::Mvocc && config.get_column_check())
}

/// Whether a transaction of protocol `p` keeps its slot's read filter (`Slot::reads`):
/// `ermia-ssi` with safe retry, whose pivot test asks it.
pub(crate) fn keeps_read_filter(p: Protocol, config: &crate::config::Config) -> bool {
    p == Protocol::ErmiaSsi && config.get_ermia_safe_retry()
}

/// The reads the column check re-pointed in the slot's commit (`Config::column_check`):
/// `healing`'s, or `mvocc`'s. Each is `(table, version read, version that stands at the
/// commit)`.
pub(crate) fn repointed(p: Protocol, sc: &mut SlotCc) -> &mut Vec<mvocc::Repoint> {
    if heals(p) {
        &mut sc.healing.repointed
    } else {
        &mut sc.mvocc.repointed
    }
}

/// Hook `heal_lock`, single-version step 1 of a commit that can heal (`heals`): locks the
/// read and write sets in the global order from the validation cursor on; `Stale` when a
/// row read is no longer current (the caller heals and calls again).
pub(crate) fn heal_lock(
    tx: &mut TxnCtx<'_>,
    sc: &mut SlotCc,
    cols: &[healing::TableCols],
    defer: bool,
) -> std::result::Result<healing::Step, AbortReason> {
    debug_assert!(heals(tx.protocol), "heal_lock under {}", tx.protocol);
    healing::lock_in_order(tx, &mut sc.healing, cols, defer)
}

/// After a `heal_lock` with `defer`, past the serialization point: whether the rows the
/// call only read are still current (`healing::check_deferred`). False: the caller releases
/// every lock (`heal_unlock`) and locks them all in order.
pub(crate) fn heal_check_deferred(
    tx: &mut TxnCtx<'_>,
    sc: &mut SlotCc,
    cols: &[healing::TableCols],
) -> bool {
    healing::check_deferred(tx, &mut sc.healing, cols)
}

/// Releases every lock a healing commit holds (nothing is installed yet), to lock again from
/// the start of the order.
pub(crate) fn heal_unlock(tx: &TxnCtx<'_>, sc: &mut SlotCc) {
    healing::release(&mut sc.healing, tx.id.word());
}

/// Whether serializable reads take range locks (`mv2pl-wait`, `mv2pl.rs`).
#[inline]
pub(crate) fn takes_range_locks(p: Protocol) -> bool {
    traits(p).range_locks
}

/// Whether a read whose transaction tracks reads arms the no-wait resolver's `blocked`
/// flag instead of waiting for an older writer (MVTO, `mvto.rs`).
#[inline]
pub(crate) fn blocks_instead_of_waiting(p: Protocol) -> bool {
    traits(p).blocks
}

/// The reason a read that met another transaction's uncommitted insert aborts with.
#[inline]
pub(crate) fn read_conflict(p: Protocol) -> AbortReason {
    if traits(p).locks_as_it_runs {
        AbortReason::LockConflict
    } else {
        AbortReason::ReadValidation
    }
}

/// The reason a write that found its record held by another writer aborts with.
#[inline]
pub(crate) fn write_conflict(p: Protocol) -> AbortReason {
    if traits(p).locks_as_it_runs {
        AbortReason::LockConflict
    } else {
        AbortReason::WriteWriteConflict
    }
}

/// Whether a write takes the record's write lock when it is made (every multi-version
/// protocol, and 2PL), rather than at commit (Silo and OCC buffer their writes unlocked).
#[inline]
pub(crate) fn locks_on_write(p: Protocol) -> bool {
    !p.single_version() || traits(p).locks_as_it_runs
}

/// Whether an error a stale read may have caused (a duplicate or missing key) becomes the
/// `read_validation` abort the commit would raise (Silo and OCC, which validate reads only
/// at commit; `Transaction::unless_stale_read`).
#[inline]
pub(crate) fn fails_stale_reads_early(p: Protocol) -> bool {
    traits(p).stale_reads_fail_early
}

/// Whether `on_index_enter` checks anything (MVTO): lets the caller skip working out which
/// indexes a write entered.
#[inline]
pub(crate) fn checks_index_entry(p: Protocol) -> bool {
    traits(p).checks_index_entry
}

/// Hook `on_read`: `tx`, which tracks reads, read `v` (not its own version). Err: the read
/// fails (the caller dooms the transaction). Adds to the read set what the protocol keeps
/// there beyond validation (`validates_reads`).
#[inline]
pub(crate) fn on_read(
    tx: &mut TxnCtx<'_>,
    c: &mut TxnCc,
    sc: &mut SlotCc,
    v: *const Version,
) -> std::result::Result<(), AbortReason> {
    // SAFETY: v is a visible version of a chain the transaction is pinned on.
    let r = unsafe { &*v };
    debug_assert!(
        tx.tracks_reads,
        "on_read for a transaction that tracks no reads"
    );
    debug_assert!(
        r.begin.load(std::sync::atomic::Ordering::Acquire) != tx.id.word(),
        "on_read of the transaction's own version"
    );
    match tx.protocol {
        Protocol::Mvto => mvto::on_read(r, tx.begin_ts, tx.slot(), &resolver(tx, c)),
        Protocol::Mv2pl => mv2pl::read_lock(tx, &mut sc.mv2pl, v),
        // Hekaton §4.2: no read locks below Repeatable Read.
        Protocol::Mv2plWait if tx.isolation == Isolation::ReadCommitted => Ok(()),
        Protocol::Mv2plWait => mv2pl::wait_read_lock(tx, &mut sc.mv2pl, v),
        Protocol::TwoPl => twopl::on_read(tx, &mut sc.mv2pl, v),
        Protocol::ErmiaSsi
            if tx.read_only
                && tx
                    .db
                    .config
                    .get_ermia_old_read_age()
                    .is_some_and(|age| ermia_ssi::is_old(r, tx.begin_ts, age)) =>
        {
            ermia_ssi::on_old_read(tx, r)
        }
        Protocol::Ssn | Protocol::Ssi | Protocol::ErmiaSsi => {
            ssn::on_read(tx, &mut c.ssn, r);
            if let Some(f) = tx.read_filter {
                // What safe retry asks of a slot whose bit a version has (`Slot::reads`).
                f.insert(v as usize);
            }
            tx.sets.read_set.push(v);
            Ok(())
        }
        Protocol::Mvocc
        | Protocol::Si
        | Protocol::ErmiaSi
        | Protocol::Silo
        | Protocol::Occ
        | Protocol::Hybrid
        | Protocol::Healing => Ok(()),
    }
}

/// Hook `before_scan`: before a scan of index `index` of `t` (a range, a secondary lookup,
/// a whole-table scan as index 0, or a point lookup that found nothing) reads the index.
#[inline]
pub(crate) fn before_scan(tx: &TxnCtx<'_>, t: &Table, index: usize) {
    match tx.protocol {
        Protocol::Mvto if tx.tracks_reads => mvto::before_scan(t, index, tx.begin_ts, tx.slot()),
        Protocol::Mvto
        | Protocol::Mvocc
        | Protocol::Mv2pl
        | Protocol::Mv2plWait
        | Protocol::Si
        | Protocol::Ssi
        | Protocol::ErmiaSi
        | Protocol::ErmiaSsi
        | Protocol::Ssn
        | Protocol::Silo
        | Protocol::Occ
        | Protocol::TwoPl
        | Protocol::Hybrid
        | Protocol::Healing => {}
    }
}

/// Hook `on_scan`: a serializable scan of index `index` of `t` (`txn::TABLE_SCAN` for a
/// whole-table scan) has run. Returns whether it goes to the scan set for the commit's
/// phantom re-check (MVTO protects scans with its scan-ts; `mv2pl-wait` with range locks,
/// except a whole-table scan, which it also re-checks).
#[inline]
pub(crate) fn on_scan(tx: &TxnCtx<'_>, t: &Table, index: u16) -> bool {
    match tx.protocol {
        Protocol::Mvto => false,
        Protocol::Mv2plWait => index == TABLE_SCAN,
        Protocol::Ssn | Protocol::Ssi | Protocol::ErmiaSsi => {
            if tx.tracks_reads {
                ssn::on_scan(tx, t, index);
            }
            true
        }
        Protocol::Mvocc
        | Protocol::Mv2pl
        | Protocol::Si
        | Protocol::ErmiaSi
        | Protocol::Silo
        | Protocol::Occ
        | Protocol::TwoPl
        | Protocol::Hybrid
        | Protocol::Healing => true,
    }
}

/// Hook `on_miss`: a point lookup of primary key `key` in `t` found no live row. Err: the
/// transaction must abort (MVTO: an older transaction added the key before our scan-ts
/// landed; it did not see us, so we must see it). `live(tid)`: whether row `tid` has a live
/// version visible at the begin timestamp.
pub(crate) fn on_miss(
    tx: &TxnCtx<'_>,
    t: &Table,
    key: &[u8],
    live: impl FnOnce(crate::storage::TupleId) -> bool,
) -> std::result::Result<(), AbortReason> {
    match tx.protocol {
        Protocol::Mvto if tx.tracks_reads => mvto::on_miss(t, key, tx.begin_ts, tx.slot(), live),
        Protocol::Mvto
        | Protocol::Mvocc
        | Protocol::Mv2pl
        | Protocol::Mv2plWait
        | Protocol::Si
        | Protocol::Ssi
        | Protocol::ErmiaSi
        | Protocol::ErmiaSsi
        | Protocol::Ssn
        | Protocol::Silo
        | Protocol::Occ
        | Protocol::TwoPl
        | Protocol::Hybrid
        | Protocol::Healing => Ok(()),
    }
}

/// Hook `may_write`: `tx` holds the write lock on `head` (the latest version); may it
/// supersede it? (MVTO: no later reader; MV2PL and 2PL: no other read lock.)
#[inline]
pub(crate) fn may_write(
    tx: &TxnCtx<'_>,
    sc: &SlotCc,
    head: &Version,
) -> std::result::Result<(), AbortReason> {
    debug_assert_eq!(
        head.end.load(std::sync::atomic::Ordering::Acquire),
        tx.id.word(),
        "may_write without the write lock on the head"
    );
    match tx.protocol {
        Protocol::Mvto => mvto::may_write(head, tx.begin_ts),
        Protocol::Mv2pl | Protocol::TwoPl => mv2pl::may_write(&sc.mv2pl, head),
        Protocol::Mvocc
        | Protocol::Mv2plWait
        | Protocol::Si
        | Protocol::Ssi
        | Protocol::ErmiaSi
        | Protocol::ErmiaSsi
        | Protocol::Ssn
        | Protocol::Silo
        | Protocol::Occ
        | Protocol::Hybrid
        | Protocol::Healing => Ok(()),
    }
}

/// Hook `on_index_enter`: a write added entries of `t`'s indexes at positions `indexes` (0
/// for a row new to the table) that a later transaction may already have scanned. Err: the
/// write must abort.
pub(crate) fn on_index_enter(
    tx: &TxnCtx<'_>,
    t: &Table,
    indexes: impl Iterator<Item = usize>,
) -> std::result::Result<(), AbortReason> {
    match tx.protocol {
        Protocol::Mvto => mvto::may_enter(t, tx.begin_ts, indexes),
        Protocol::Mvocc
        | Protocol::Mv2pl
        | Protocol::Mv2plWait
        | Protocol::Si
        | Protocol::Ssi
        | Protocol::ErmiaSi
        | Protocol::ErmiaSsi
        | Protocol::Ssn
        | Protocol::Silo
        | Protocol::Occ
        | Protocol::TwoPl
        | Protocol::Hybrid
        | Protocol::Healing => Ok(()),
    }
}

/// The resolver (`visibility.rs`) of a transaction's reads: MVTO's no-wait flag armed when
/// it tracks reads, commit dependencies when it speculates.
#[inline]
pub(crate) fn resolver<'a>(tx: &'a TxnCtx<'_>, c: &'a TxnCc) -> Resolver<'a> {
    Resolver {
        txns: &tx.db.txns,
        me: tx.id,
        blocked: (blocks_instead_of_waiting(tx.protocol) && tx.tracks_reads)
            .then_some(&c.mvto.flag),
        speculate: tx.speculates.then_some(&tx.took_deps),
        same_group: None,
    }
}

// ---------------------------------------------------------------------------------------
// Commit. `txn/end.rs` runs one of two pipelines and asks the protocol at each step:
// multi-version (`Protocol::single_version` false: Hekaton's — Preparing, end timestamp,
// validation, commit dependencies, post-processing) or single-version (Silo's — lock the
// records, serialization point, validation, TID, install). The hooks below are those steps.

/// Hook `commit_read_only`, multi-version: `tx` wrote nothing, draws no commit stamp, and its
/// commit dependencies are resolved; it commits at its begin timestamp. Releases what it
/// holds.
pub(crate) fn commit_read_only(tx: &TxnCtx<'_>, ec: &EngineCc, sc: &mut SlotCc) {
    release(tx, ec, sc);
    match tx.protocol {
        // Running MVTO transactions show as Preparing (`mvto.rs`); this one is done.
        Protocol::Mvto => tx.slot().set_committed(tx.begin_ts),
        Protocol::Mvocc
        | Protocol::Mv2pl
        | Protocol::Mv2plWait
        | Protocol::Si
        | Protocol::Ssi
        | Protocol::ErmiaSi
        | Protocol::ErmiaSsi
        | Protocol::Ssn
        | Protocol::Silo
        | Protocol::Occ
        | Protocol::TwoPl
        | Protocol::Hybrid
        | Protocol::Healing => {}
    }
}

/// Whether a writer's end timestamp is its begin timestamp, drawn at begin (MVTO), instead
/// of one drawn at commit: then it has no Preparing phase and `precommit` is not asked.
#[inline]
pub(crate) fn ends_at_begin_ts(p: Protocol) -> bool {
    traits(p).ends_at_begin_ts
}

/// Whether a version a read found visible can still turn invisible until `on_read` accepts
/// it (MVTO: an older writer, whose end timestamp is its begin timestamp, may commit over it
/// first; the version is then dead at every read point, and `siro` may drop its row at
/// once). Such a read copies the row only after `on_read`.
#[inline]
pub(crate) fn settles_at_on_read(p: Protocol) -> bool {
    traits(p).ends_at_begin_ts
}

/// Hook `precommit`, multi-version: before the end timestamp is drawn. Err: abort
/// (`mv2pl-wait` waits out its wait-for dependencies here, `mv2pl.rs`).
pub(crate) fn precommit(
    tx: &TxnCtx<'_>,
    ec: &EngineCc,
    sc: &mut SlotCc,
) -> std::result::Result<(), AbortReason> {
    match tx.protocol {
        Protocol::Mv2plWait => mv2pl::await_wait_fors(tx, ec, &sc.mv2pl),
        Protocol::Mvocc
        | Protocol::Mvto
        | Protocol::Mv2pl
        | Protocol::Si
        | Protocol::Ssi
        | Protocol::ErmiaSi
        | Protocol::ErmiaSsi
        | Protocol::Ssn
        | Protocol::Silo
        | Protocol::Occ
        | Protocol::TwoPl
        | Protocol::Hybrid
        | Protocol::Healing => Ok(()),
    }
}

/// Hook `lock_for_commit`, single-version (step 1 of Silo's commit): locks the buffered
/// writes' records in the global order (OCC: with the records read). Err: abort.
pub(crate) fn lock_for_commit(
    tx: &mut TxnCtx<'_>,
    sc: &mut SlotCc,
) -> std::result::Result<(), AbortReason> {
    if tx.db.config.unsafe_no_validation {
        // OCC⁻/SILO⁻ (only `occ` and `silo` open with it).
        return silo::lock_write_set_unvalidated(tx, &mut sc.silo);
    }
    match tx.protocol {
        Protocol::Occ => occ::lock_read_write_set(tx, &mut sc.occ),
        // A transaction that cannot heal: a stale read is OCC's abort.
        Protocol::Healing => match healing::lock_in_order(tx, &mut sc.healing, &[], false)? {
            healing::Step::Done => Ok(()),
            healing::Step::Stale => Err(AbortReason::ReadValidation),
        },
        Protocol::Silo | Protocol::TwoPl | Protocol::Hybrid => {
            silo::lock_write_set(tx, &mut sc.silo)
        }
        Protocol::Mvocc
        | Protocol::Mvto
        | Protocol::Mv2pl
        | Protocol::Mv2plWait
        | Protocol::Si
        | Protocol::Ssi
        | Protocol::ErmiaSi
        | Protocol::ErmiaSsi
        | Protocol::Ssn => {
            debug_assert!(false, "lock_for_commit under a multi-version protocol");
            Ok(())
        }
    }
}

/// Hook `serialization_point`, single-version (step 2 of Silo's commit): the records are
/// locked; returns the epoch the transaction's TID will be in.
pub(crate) fn serialization_point(ec: &EngineCc) -> u64 {
    std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
    ec.silo_epochs.current()
}

/// Hook `validate`: the commit's checks. Multi-version: as of end timestamp `end_ts`, which
/// the transaction holds Preparing (MVTO: its begin timestamp); single-version: with the
/// records locked, after the serialization point (`end_ts` unused). Err: abort.
pub(crate) fn validate(
    tx: &TxnCtx<'_>,
    c: &mut TxnCc,
    sc: &mut SlotCc,
    end_ts: Timestamp,
) -> std::result::Result<(), AbortReason> {
    debug_assert!(
        tx.protocol.single_version()
            || tx.db.txns.state_of(tx.id) == crate::txn::table::TxnState::Preparing(end_ts),
        "multi-version validation of a transaction that is not Preparing at its end timestamp"
    );
    match tx.protocol {
        Protocol::Silo | Protocol::Occ | Protocol::TwoPl | Protocol::Hybrid => {
            silo::validate(tx, c, tx.id.word(), true)
        }
        Protocol::Healing => silo::validate(tx, c, tx.id.word(), !sc.healing.reads_hold),
        Protocol::Mvto => {
            mvocc::validate(tx, c, sc, end_ts)?;
            // A read that would have waited for an older writer (`blocks_instead_of_waiting`).
            match c.mvto.flag.get() {
                true => Err(AbortReason::TimestampOrder),
                false => Ok(()),
            }
        }
        Protocol::Mvocc
        | Protocol::Mv2pl
        | Protocol::Mv2plWait
        | Protocol::Si
        | Protocol::Ssi
        | Protocol::ErmiaSi
        | Protocol::ErmiaSsi
        | Protocol::Ssn => mvocc::validate(tx, c, sc, end_ts),
    }
}

/// The stamp protocols' pre-commit test (SSN, SSI, ERMIA-SSI), the last of `validate`'s
/// checks for a transaction that tracks reads, with commit stamp `end_ts`.
pub(crate) fn stamp_test(
    tx: &TxnCtx<'_>,
    c: &mut TxnCc,
    sc: &mut SlotCc,
    end_ts: Timestamp,
) -> std::result::Result<(), AbortReason> {
    // The readers' bits and the index scanners must be read after our stamp was drawn.
    std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
    match tx.protocol {
        Protocol::Ssn => ssn::precommit(tx, &mut c.ssn, &mut sc.ssn, end_ts.get()),
        Protocol::Ssi => ssi::precommit(tx, &mut c.ssn, &mut sc.ssn, end_ts.get()),
        Protocol::ErmiaSsi => ermia_ssi::precommit(tx, &mut c.ssn, &mut sc.ssn, end_ts.get()),
        Protocol::Mvocc
        | Protocol::Mvto
        | Protocol::Mv2pl
        | Protocol::Mv2plWait
        | Protocol::Si
        | Protocol::ErmiaSi
        | Protocol::Silo
        | Protocol::Occ
        | Protocol::TwoPl
        | Protocol::Hybrid
        | Protocol::Healing => Ok(()),
    }
}

/// Hook `finalize`, multi-version: `tx` passed validation with end timestamp `end_ts` and is
/// about to turn Committed; leaves what the protocol keeps in the versions (SSN's and
/// ERMIA-SSI's stamps).
pub(crate) fn finalize(tx: &TxnCtx<'_>, c: &TxnCc, end_ts: Timestamp) {
    match tx.protocol {
        Protocol::Ssn if tx.tracks_reads => ssn::finalize(tx, &c.ssn, end_ts.get(), true),
        Protocol::Ssi | Protocol::ErmiaSsi if tx.tracks_reads => {
            ssn::finalize(tx, &c.ssn, end_ts.get(), false)
        }
        Protocol::Ssn
        | Protocol::Ssi
        | Protocol::ErmiaSsi
        | Protocol::Mvocc
        | Protocol::Mvto
        | Protocol::Mv2pl
        | Protocol::Mv2plWait
        | Protocol::Si
        | Protocol::ErmiaSi
        | Protocol::Silo
        | Protocol::Occ
        | Protocol::TwoPl
        | Protocol::Hybrid
        | Protocol::Healing => {}
    }
}

/// Hook `commit_tid`, single-version (step 4 of Silo's commit): the transaction's TID in
/// epoch `epoch`, above every TID it observed and above `floor`.
/// A Silo TID orders single-version commits as an end timestamp orders multi-version ones
/// (it is what the versions' Begin words and the log carry), so it is returned as one.
pub(crate) fn commit_tid(
    tx: &TxnCtx<'_>,
    sc: &mut SlotCc,
    epoch: u64,
    floor: Timestamp,
) -> Timestamp {
    Timestamp::new(silo::commit_tid(tx, &mut sc.silo, epoch, floor.get()))
}

/// Hook `commit_tid` of a command-logging database, drawn at the serialization point
/// (after `serialization_point`, before `validate`): `commit_tid` above every TID drawn this
/// way before it, too. Silo's TIDs order write-write and write-read dependencies but not
/// read-write anti-dependencies (Silo §4.2: a transaction that overwrites a row another one
/// read may draw the smaller TID), and a command log is replayed in TID order. With this
/// draw, if T1 read a row that T2 overwrites, T1 validated the row before T2 locked it (else
/// T1 aborts), so T1's draw came before T2's serialization point and T2's TID is larger.
pub(crate) fn ordered_commit_tid(
    tx: &TxnCtx<'_>,
    ec: &EngineCc,
    sc: &mut SlotCc,
    epoch: u64,
    floor: Timestamp,
) -> Timestamp {
    use std::sync::atomic::{fence, Ordering::SeqCst};
    let floor = floor.get().max(ec.tid_order.load(SeqCst));
    let tid = silo::commit_tid(tx, &mut sc.silo, epoch, floor);
    ec.tid_order.fetch_max(tid, SeqCst);
    // Published before validation reads the read set (a store-load pair with the writer's
    // lock-then-`serialization_point` fence).
    fence(SeqCst);
    Timestamp::new(tid)
}

/// Hook `release`: the transaction committed (its versions are installed) or wrote nothing;
/// releases the locks it holds (MV2PL's and 2PL's read and range locks, OCC's locks on the
/// records it only read).
pub(crate) fn release(tx: &TxnCtx<'_>, ec: &EngineCc, sc: &mut SlotCc) {
    occ::release_read_set_locks(&mut sc.occ, tx.id.word());
    healing::release(&mut sc.healing, tx.id.word());
    mv2pl::release(tx, ec, &mut sc.mv2pl);
}

/// Hook `on_abort`: `tx` aborts; called before it is marked Aborted and its writes undone.
pub(crate) fn on_abort(tx: &TxnCtx<'_>, sc: &mut SlotCc) {
    match tx.protocol {
        Protocol::Mv2plWait => mv2pl::reopen_read_locks(tx),
        // A commit that failed after it locked what it read.
        Protocol::Occ => occ::release_read_set_locks(&mut sc.occ, tx.id.word()),
        Protocol::Healing => healing::release(&mut sc.healing, tx.id.word()),
        Protocol::Mvocc
        | Protocol::Mvto
        | Protocol::Mv2pl
        | Protocol::Si
        | Protocol::Ssi
        | Protocol::ErmiaSi
        | Protocol::ErmiaSsi
        | Protocol::Ssn
        | Protocol::Silo
        | Protocol::TwoPl
        | Protocol::Hybrid => {}
    }
}

/// Hook `after_abort`: `tx` (started under the configured protocol `configured`) aborted for
/// `reason` and its writes are undone; releases what the protocol holds and records what the
/// slot's next transaction must know (`hybrid`).
pub(crate) fn after_abort(
    tx: &TxnCtx<'_>,
    ec: &EngineCc,
    sc: &mut SlotCc,
    configured: Protocol,
    reason: AbortReason,
) {
    // Read and range locks (MV2PL, `mv2pl-wait`, 2PL); nothing to do for the others.
    mv2pl::release(tx, ec, &mut sc.mv2pl);
    match configured {
        Protocol::Hybrid => hybrid::aborted(&mut sc.hybrid, tx.protocol == Protocol::TwoPl, reason),
        Protocol::Mvocc
        | Protocol::Mvto
        | Protocol::Mv2pl
        | Protocol::Mv2plWait
        | Protocol::Si
        | Protocol::Ssi
        | Protocol::ErmiaSi
        | Protocol::ErmiaSsi
        | Protocol::Ssn
        | Protocol::Silo
        | Protocol::Occ
        | Protocol::TwoPl
        | Protocol::Healing => {}
    }
}
