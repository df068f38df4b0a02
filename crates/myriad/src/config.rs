//! `Config`: every design dimension (ARCHITECTURE.md) is a run-time value here, validated once
//! at `Database::open`. Choices that exist in the design space but are not built yet are
//! named (so a user gets "not supported: ..." rather than "unknown value"), and `validate`
//! rejects them with `Error::Unsupported`.

use crate::error::{Error, Result};
use std::fmt;
use std::str::FromStr;

macro_rules! choice_enum {
    ($(#[$m:meta])* $name:ident { $($(#[$vm:meta])* $var:ident = $s:literal),+ $(,)? }) => {
        $(#[$m])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        #[non_exhaustive]
        pub enum $name { $($(#[$vm])* $var),+ }
        impl $name {
            /// Every choice, in documentation order.
            pub const ALL: &'static [$name] = &[$($name::$var),+];
            /// The name used on the command line and in reports.
            pub fn name(self) -> &'static str { match self { $($name::$var => $s),+ } }
        }
        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result { f.write_str(self.name()) }
        }
        impl FromStr for $name {
            type Err = Error;
            fn from_str(s: &str) -> Result<Self> {
                $name::ALL.iter().copied().find(|c| c.name() == s).ok_or_else(|| {
                    let names: Vec<&str> = $name::ALL.iter().map(|c| c.name()).collect();
                    Error::InvalidConfig(format!(
                        "unknown {} `{}` (choices: {})", stringify!($name), s, names.join(", ")))
                })
            }
        }
    };
}

choice_enum!(
    /// Concurrency-control protocol (`cc/`): `mvocc`, `si`, `mvto`, `mv2pl`,
    /// `mv2pl-wait`, `ssn`, `ssi`, `ermia-si`, `ermia-ssi` (multi-version) and `silo`, `occ`,
    /// `2pl`, `hybrid` (single-version).
    Protocol {
        /// Hekaton optimistic MVCC (Hekaton §3).
        Mvocc = "mvocc",
        /// Multi-version timestamp ordering: read-ts in the version header (thesis §5.3.1).
        Mvto = "mvto",
        /// Multi-version 2PL, no-wait, locks in the version header (thesis §5.3.3).
        Mv2pl = "mv2pl",
        /// Hekaton's pessimistic MVCC (Hekaton §4): MV2PL whose reads may lock a version a
        /// writer holds and whose writes may replace a read-locked version (eager updates);
        /// the writer then waits at precommit for those read locks, and for the range locks
        /// of serializable scanners of the ranges it inserted into (wait-for dependencies),
        /// with NoMoreReadLocks / NoMoreWaitFors against starvation and deadlock detection
        /// over the waiting transactions (`cc/mv2pl.rs`).
        Mv2plWait = "mv2pl-wait",
        /// Snapshot isolation, first-updater-wins (thesis §5.3.4).
        Si = "si",
        /// Cahill's serializable SI on snapshot isolation: inConflict/outConflict flags,
        /// abort when both are set (thesis §5.3.4; Cahill, Röhm and Fekete, SIGMOD 2008).
        Ssi = "ssi",
        /// ERMIA's snapshot isolation (ERMIA §3.4–3.5): `si` — first-updater-wins on the
        /// indirection arrays, epoch-based reclamation — with the commit order drawn by one
        /// atomic operation, which on a durable database is ERMIA's log manager's LSN
        /// reservation (its natural log manager, `natural_log_manager`).
        ErmiaSi = "ermia-si",
        /// ERMIA's stamp-based serializable SI: abort the pivot of a dangerous structure
        /// whose last transaction committed first (ERMIA §3.6; s1, s2, rstamp).
        ErmiaSsi = "ermia-ssi",
        /// The serial safety net on snapshot isolation: per-version pstamp/sstamp, the
        /// exclusion-window test at commit (thesis §5.3.4; Wang et al., DaMoN 2015).
        Ssn = "ssn",
        /// Silo's single-version OCC (thesis §3.5; Tu et al., SOSP 2013): writes buffered and
        /// locked at commit in a global order, read-set validation against each record's
        /// TID, epoch-based TIDs drawn without a shared counter. Needs version storage
        /// `single-version`.
        Silo = "silo",
        /// The thesis's conventional OCC (thesis §3.5, OCC; Kung and Robinson with Silo's
        /// TIDs): like `silo`, but the commit locks the read set together with the write set,
        /// in one global order, and validates each read under its lock (thesis Algorithm 1).
        /// Needs version storage `single-version`.
        Occ = "occ",
        /// Single-version two-phase locking, no-wait (thesis §3.5, 2PL): a read-lock count
        /// and the write lock in each record's header, held to the end; writes buffered and
        /// installed at commit. Needs version storage `single-version`.
        TwoPl = "2pl",
        /// OCC first, 2PL for a transaction that failed validation (thesis §3.5, HYBRID): a
        /// transaction runs as `occ`; after a validation failure (`read_validation`,
        /// `phantom`) the thread's next transaction — the retry — runs as `2pl`, and so do its
        /// retries until it commits. Needs version storage `single-version`.
        Hybrid = "hybrid",
        /// Transaction Healing (thesis ch. 3, Wu et al. SIGMOD 2016): OCC whose validation
        /// locks every record read or written in one global order — tables ranked by the
        /// registered procedures' key dependencies (§3.4.5), then tuple id — and, when a
        /// stored-procedure call finds a read stale, heals it under the locks already held
        /// instead of aborting (`cc/healing.rs`). Other transactions (ad-hoc SQL, the native
        /// API, a CALL inside BEGIN) run as OCC with the same lock order. Needs version
        /// storage `single-version`.
        Healing = "healing",
    }
);

impl Protocol {
    /// Protocol words kept per version after the row data (`Version::ext_word`), beyond the
    /// header's `aux`: SSN's pstamp and sstamp, ERMIA-SSI's rstamp, s2 and bstamp
    /// (`cc/ssn.rs`, `cc/ermia_ssi.rs`).
    pub(crate) fn version_ext(self) -> u8 {
        match self {
            // Its rstamp and s2, and the bstamp of untracked old-version reads.
            Protocol::ErmiaSsi => 3,
            p if p.stamped() => 2,
            _ => 0,
        }
    }

    /// A serializable SI that tracks dependencies in stamps (`cc/ssn.rs`): SSN, Cahill's SSI
    /// or ERMIA's SSI. Their serial order is not their commit order.
    pub fn stamped(self) -> bool {
        match self {
            Protocol::Ssn | Protocol::Ssi | Protocol::ErmiaSsi => true,
            Protocol::Mvocc
            | Protocol::Si
            | Protocol::ErmiaSi
            | Protocol::Mvto
            | Protocol::Mv2pl
            | Protocol::Mv2plWait
            | Protocol::Silo
            | Protocol::Occ
            | Protocol::TwoPl
            | Protocol::Hybrid
            | Protocol::Healing => false,
        }
    }

    /// A single-version protocol (thesis §3.5's baselines): it runs on version storage
    /// `single-version` only, and every other protocol on multi-version storage only.
    pub fn single_version(self) -> bool {
        match self {
            Protocol::Silo
            | Protocol::Occ
            | Protocol::TwoPl
            | Protocol::Hybrid
            | Protocol::Healing => true,
            Protocol::Mvocc
            | Protocol::Si
            | Protocol::ErmiaSi
            | Protocol::Mvto
            | Protocol::Mv2pl
            | Protocol::Mv2plWait
            | Protocol::Ssn
            | Protocol::Ssi
            | Protocol::ErmiaSsi => false,
        }
    }

    /// Why a command log (`LogPolicy::Command`) cannot follow this protocol, or `None` when
    /// it can: command replay reruns the logged calls in the order of their commit
    /// timestamps, so that order must be a serial order of the run. It is under MVOCC, MV2PL
    /// and MV2PL-wait (end timestamps drawn while the commit holds what it read and wrote),
    /// MVTO (its timestamps are its serialization order) and, on a command-logging database,
    /// the single-version protocols (their TIDs are then drawn at the serialization point
    /// above every TID drawn before it, `cc::ordered_commit_tid`).
    pub fn command_log_refusal(self) -> Option<&'static str> {
        match self {
            Protocol::Ssn | Protocol::Ssi | Protocol::ErmiaSsi => Some(
                "it serializes by dependencies, not by commit order: a transaction that read \
                 a row may commit after the transaction that replaced the row and still \
                 serialize before it, so replaying calls in commit-timestamp order can give \
                 another state",
            ),
            Protocol::Si | Protocol::ErmiaSi => Some(
                "it runs no transaction at serializable isolation (snapshot isolation allows \
                 write skew), and only a serializable call can be replayed from its \
                 arguments: every commit would be logged as rows (use log `logical`)",
            ),
            Protocol::Mvocc
            | Protocol::Mvto
            | Protocol::Mv2pl
            | Protocol::Mv2plWait
            | Protocol::Silo
            | Protocol::Occ
            | Protocol::TwoPl
            | Protocol::Hybrid
            | Protocol::Healing => None,
        }
    }

    /// The log manager this protocol's design uses, what a tool picks when the user names
    /// none: ERMIA's (one log, the commit order from its LSN) for `ermia-si` and
    /// `ermia-ssi`, the epoch group commit for the others.
    pub fn natural_log_manager(self) -> LogManagerKind {
        match self {
            Protocol::ErmiaSi | Protocol::ErmiaSsi => LogManagerKind::Ermia,
            Protocol::Mvocc
            | Protocol::Si
            | Protocol::Mvto
            | Protocol::Mv2pl
            | Protocol::Mv2plWait
            | Protocol::Ssn
            | Protocol::Ssi
            | Protocol::Silo
            | Protocol::Occ
            | Protocol::TwoPl
            | Protocol::Hybrid
            | Protocol::Healing => LogManagerKind::Epoch,
        }
    }

    /// The version storage this protocol runs on by default: `single-version` for the
    /// single-version protocols, append-only newest-to-oldest for the others (what a tool
    /// picks when the user names a protocol but no storage).
    pub fn natural_storage(self) -> VersionStorage {
        if self.single_version() {
            VersionStorage::SingleVersion
        } else {
            VersionStorage::AppendN2o
        }
    }
}

choice_enum!(
    /// Isolation level of a transaction (Hekaton §3.4).
    Isolation {
        /// Read Committed: each read sees the newest committed version; no validation.
        ReadCommitted = "rc",
        /// Repeatable Read: reads are validated at commit, scans are not.
        RepeatableRead = "rr",
        /// Snapshot Isolation: every read sees the begin-time snapshot; write-write
        /// conflicts abort.
        Snapshot = "si",
        /// Serializable: reads and scans (phantoms) are validated or protected by the protocol.
        Serializable = "serializable",
    }
);

choice_enum!(
    /// Where commit and begin timestamps come from (thesis §3.4.3; `timestamp/`). Built:
    /// `global-counter`, `locked-counter` and `partial-order` (POMVCC's partial-order
    /// timestamps, with the paper's shared counters or the counts in the transaction-table
    /// slots: `PoCounters`). `silo-epoch` is named but not built:
    /// `Config::validate` rejects it as unsupported.
    TimestampPolicy {
        /// One global counter: a begin timestamp is a load, an end timestamp a fetch-add.
        GlobalCounter = "global-counter",
        /// Silo-style epoch-based timestamps. Not built yet (rejected by `Config::validate`).
        SiloEpoch = "silo-epoch",
        /// POMVCC's partial-order timestamps: non-conflicting updaters share one commit
        /// timestamp; readers begin at the newest complete group, so a transaction may miss
        /// one that committed before it began unless it begins with a floor
        /// (`Database::begin_after`). Pairs with `si`, and `mvocc` at `si` or `rc`, on a
        /// memory-only database (`Config::validate` names what it refuses).
        PartialOrder = "partial-order",
        /// MPDB's baseline from the POMVCC paper: a commit increments one counter, stamps its
        /// versions and unlocks inside one critical section.
        LockedCounter = "locked-counter",
    }
);

choice_enum!(
    /// Where `partial-order` keeps its per-timestamp pre-commit and commit counts
    /// (`timestamp/partial_order.rs`). Both pair with exactly the same protocols, levels and
    /// logs.
    PoCounters {
        /// One pair of shared counters per timestamp, as in the paper: two shared
        /// read-modify-writes per commit, and the release that completes a closed group
        /// makes it readable.
        Shared = "shared",
        /// One word per transaction-table slot (the timestamp its transaction joined, and
        /// whether it is done): no shared read-modify-write on the commit path; a begin, the
        /// tick or a floor makes closed groups readable by scanning the slots.
        Slots = "slots",
    }
);

choice_enum!(
    /// Version storage (thesis §5.4). Built: append-only newest-to-oldest (`n2o`, the
    /// default) and oldest-to-newest (`o2n`: the entry points at the oldest version, so
    /// every access to the newest walks the chain) for the multi-version protocols, and
    /// `single-version` (one version per row, replaced at commit) for the single-version
    /// ones; in place for the multi-version protocols (`version/master.rs`): `time-travel`
    /// (the newest row in the main table, a full copy of each older version in the
    /// time-travel store) and `delta` (the newest row in the main table, older versions as
    /// before-images of the columns their successor changed), and vDriver's `siro` (two
    /// in-record slots per row, older versions in classified segments; `version/siro.rs`,
    /// with GC `dead-zone`).
    VersionStorage {
        /// Append-only, newest to oldest: the indirection entry points at the newest version.
        AppendN2o = "n2o",
        /// Append-only, oldest to newest: the entry points at the oldest version.
        AppendO2n = "o2n",
        /// In place: the newest row in the main table, full copies of older versions.
        TimeTravel = "time-travel",
        /// In place: the newest row in the main table, older versions as column before-images.
        Delta = "delta",
        /// In place, vDriver's SIRO (§3.3): the newest two rows of a tuple in two slots of its
        /// record, older ones relocated into hot, cold and LLT segments (GC `dead-zone` only).
        Siro = "siro",
        /// One version per row, replaced at commit (the single-version protocols).
        SingleVersion = "single-version",
    }
);

impl GcPolicy {
    /// Commits mark the blocks they gave new versions dirty, and background threads prune
    /// the dirty blocks (`gc/vacuum.rs`), instead of queueing garbage per worker.
    pub(crate) fn marks_dirty(self) -> bool {
        matches!(self, GcPolicy::Vacuum)
    }
}

impl VersionStorage {
    /// `time-travel`, `delta` and `siro`: the newest row lives in the main table
    /// (`version/master.rs`, `version/siro.rs`).
    pub fn in_place(self) -> bool {
        matches!(
            self,
            VersionStorage::TimeTravel | VersionStorage::Delta | VersionStorage::Siro
        )
    }

    /// The version store a table on this storage holds (`version::Store`).
    pub(crate) fn store(self) -> crate::version::Store {
        use crate::version::Store;
        match self {
            VersionStorage::AppendN2o => Store::AppendN2o,
            VersionStorage::AppendO2n => Store::AppendO2n,
            VersionStorage::TimeTravel => Store::TimeTravel,
            VersionStorage::Delta => Store::Delta,
            VersionStorage::Siro => Store::Siro,
            VersionStorage::SingleVersion => Store::SingleVersion,
        }
    }
}

impl TimestampPolicy {
    /// The timestamp source this policy names (`timestamp::Source`), for a transaction table
    /// of `slots` slots (`partial-order` with `counters` `slots` keeps a word per slot);
    /// `Error::Unsupported` for a policy not built yet.
    pub(crate) fn source(
        self,
        counters: PoCounters,
        slots: usize,
    ) -> Result<crate::timestamp::Source> {
        use crate::timestamp::{GlobalCounter, LockedCounter, PartialOrder, Source};
        match self {
            TimestampPolicy::GlobalCounter => Ok(Source::GlobalCounter(GlobalCounter::new())),
            TimestampPolicy::LockedCounter => Ok(Source::LockedCounter(LockedCounter::new())),
            TimestampPolicy::PartialOrder => Ok(Source::PartialOrder(match counters {
                PoCounters::Shared => PartialOrder::new(slots),
                PoCounters::Slots => PartialOrder::with_slots(slots),
            })),
            TimestampPolicy::SiloEpoch => Err(Error::Unsupported(format!(
                "timestamp policy `{}` is not implemented yet",
                self
            ))),
        }
    }
}

choice_enum!(
    /// Where append-only storage keeps variable-length attributes (VARCHAR, BYTES; thesis
    /// §5.4.1, Fig. 5.11; `version/non_inline.rs`). `inline` (the default): in the version,
    /// like every attribute. `copy`: each in a block of its own that the version points to,
    /// copied for every new version. `shared`: such blocks, shared by reference count between
    /// a version and its successors that leave the attribute unchanged.
    NonInline {
        /// Every attribute inside the version.
        Inline = "inline",
        /// Each variable-length attribute in its own block, copied for every new version.
        Copy = "copy",
        /// Such blocks, shared by reference count with successors that leave them unchanged.
        Shared = "shared",
    }
);

choice_enum!(
    /// How stored procedures run (`procedure/`). `compiled` (the default): each procedure is
    /// turned once into pre-resolved closures (`procedure/compile.rs`). `interpreted`: the
    /// tree-walking interpreter (`procedure/exec.rs`), the reference the compiled form is
    /// tested against.
    ProcedureExec {
        /// Closures built once per procedure.
        Compiled = "compiled",
        /// The IR interpreter.
        Interpreted = "interpreted",
    }
);

choice_enum!(
    /// Garbage collection (thesis §5.5): `txn`, transaction-level and epoch-based (each
    /// worker prunes the chains its transactions superseded, `gc/epoch.rs`); `vacuum`,
    /// tuple-level background threads that prune every chain of the blocks committed
    /// transactions marked dirty (`gc/vacuum.rs`); `coop`, cooperative cleaning on `o2n`
    /// chains: readers cut the expired versions they walk past, and background full passes
    /// clean what no reader walks (`gc/coop.rs`); `dead-zone`, workers that prune the chains
    /// their commits superseded as `txn` does and also splice out of their middle the
    /// versions no live snapshot can see (vDriver Theorem 3.5, `gc/dead_zone.rs`), with
    /// background threads revisiting the chains a snapshot kept; `none`.
    GcPolicy {
        /// Transaction-level, epoch-based: each worker prunes the chains it superseded.
        Txn = "txn",
        /// Tuple-level background threads over the blocks commits marked dirty.
        Vacuum = "vacuum",
        /// Cooperative cleaning by readers on `o2n` chains, plus background passes.
        Coop = "coop",
        /// vDriver's dead-zone pruning by the writers and background threads, on `n2o`, `o2n`
        /// and `siro` chains.
        DeadZone = "dead-zone",
        /// No garbage collection: every version stays.
        None = "none",
    }
);

choice_enum!(
    /// How secondary indexes point at rows (thesis §5.6): `logical-tid` (the default), the
    /// entry holds the tuple id, which leads through the indirection array to the chain;
    /// `logical-pk`, the entry holds the primary key, looked up in the primary index
    /// (ordered secondary indexes only); `physical`: entries point at versions, one per
    /// version (append-only storage and ordered secondary indexes only).
    IndexPointers {
        /// The entry holds the tuple id (through the indirection array to the chain).
        LogicalTid = "logical-tid",
        /// The entry holds the primary key, resolved through the primary index.
        LogicalPk = "logical-pk",
        /// The entry points at a version, one entry per version.
        Physical = "physical",
    }
);

choice_enum!(
    /// Durability (thesis ch. 4). `none` is memory-only; `logical` writes the after-image of
    /// every written row (thesis §4.2.1); `command` writes a serializable transaction that is
    /// one stored-procedure call as the call, anything else as rows (thesis §4.4.5).
    /// `logical`: row after-images (updates as patches of the changed columns); `physical`:
    /// whole after-images at their tuple ids (what PLR replays); `command`: procedure calls,
    /// refused under a protocol whose commit order is not a serial order
    /// (`Protocol::command_log_refusal`).
    LogPolicy {
        /// No log: the database lives in memory only.
        None = "none",
        /// Row after-images; updates as patches of the changed columns.
        Logical = "logical",
        /// Whole after-images at their tuple ids (what PLR replays).
        Physical = "physical",
        /// A serializable one-call transaction as the call; anything else as rows.
        Command = "command",
    }
);

choice_enum!(
    /// How commit records become durable (`log/`). `epoch`: SiloR's epoch group commit over
    /// `loggers` parallel logs (thesis §4.6.1, SiloR); `ermia`: ERMIA's single log, whose
    /// LSNs are the end timestamps, reserved by the commit's one atomic add (ERMIA §3.2).
    LogManagerKind {
        /// Epoch group commit over parallel log files (`log/epoch.rs`).
        Epoch = "epoch",
        /// ERMIA's single LSN-ordered log (`log/ermia.rs`).
        Ermia = "ermia",
    }
);

choice_enum!(
    /// How recovery replays the log after loading the checkpoint (thesis §4.7.1's baselines,
    /// and PACMAN, thesis §4.4). `auto` is `serial` for a command log, `physical` for a
    /// physical one and `parallel-partitioned` for a logical one.
    RecoveryScheme {
        /// Chosen from the log's contents: `serial`, `physical` or `parallel-partitioned`.
        Auto = "auto",
        /// CLR: every record (command or logical) in commit order on one thread.
        Serial = "serial",
        /// LLR: threads apply records in any order into a latched table of rows, last writer
        /// (per column) wins.
        ParallelLatched = "parallel-latched",
        /// LLR-P: records shuffled by table and key into one partition per thread, each
        /// replayed latch-free in commit order.
        ParallelPartitioned = "parallel-partitioned",
        /// PLR: checkpoint rows and the newest physical record of each tuple id installed at
        /// their tuple ids by threads that own disjoint ids, then the indexes rebuilt.
        Physical = "physical",
        /// CLR-P (PACMAN, thesis §4.4): each logged call split into one piece per block of
        /// the procedures' global dependency graph; per log batch, a block's pieces run in
        /// log order after its parent blocks, pieces on disjoint keys in parallel.
        Pacman = "pacman",
    }
);

choice_enum!(
    /// How PACMAN recovery coordinates log batches (thesis §4.4.3, Fig. 4.19).
    PacmanMode {
        /// Static analysis only (Fig. 4.19's first bar): batches one after another, each
        /// piece-set's pieces one after another in log order; only blocks run in parallel.
        Static = "static",
        /// Batches one after another, with a barrier between them; in a piece-set, pieces on
        /// disjoint footprint keys run in parallel (dynamic analysis).
        Sync = "sync",
        /// A block's piece-set of batch k+1 may start once its parent blocks' piece-sets of
        /// batch k+1 and its own piece-set of batch k are done (Fig. 4.9). Batches are
        /// pipelined in windows of at least 8 batches and 65,536 log records (or up to a row
        /// record that must replay alone), with a barrier between windows.
        Pipelined = "pipelined",
    }
);

choice_enum!(
    /// How PACMAN recovery decomposes each logged procedure into pieces (thesis §4.7.3,
    /// Fig. 4.18).
    PacmanSlicing {
        /// PACMAN's procedure slices (thesis §4.4.1): the finest partition keeping the
        /// operations on a table the procedure writes, and flow paths, together.
        Pacman = "pacman",
        /// Transaction chopping (Shasha et al., TODS 1995) as the thesis's baseline: PACMAN's
        /// slices, then, in each procedure, every two pieces that conflict with one same
        /// procedure (another call of itself included) merge, until no SC-cycle is left.
        Chopping = "chopping",
        /// One piece per call: the whole procedure.
        Whole = "whole",
    }
);

choice_enum!(
    /// Whether loggers `fsync` each group commit. `never` is for measuring the rest of the
    /// logging path: a commit is then acknowledged once written to the OS, not to the disk.
    FsyncPolicy {
        /// Every group commit is fsynced before it is acknowledged.
        Always = "always",
        /// Written to the OS but never fsynced (for measurement only).
        Never = "never",
    }
);

/// Version storage `siro`'s knobs (`Config::siro_segment_bytes`, `siro_llt_multiple`,
/// `siro_cold_multiple`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SiroKnobs {
    pub segment_bytes: usize,
    pub llt_multiple: u64,
    pub cold_multiple: u64,
}

impl Default for SiroKnobs {
    fn default() -> Self {
        // The vDriver artifact's defaults (`vcluster.c`).
        SiroKnobs {
            segment_bytes: 64 << 10,
            llt_multiple: 200,
            cold_multiple: 10,
        }
    }
}

impl SiroKnobs {
    fn check(&self) -> Result<()> {
        if !(4 << 10..=64 << 20).contains(&self.segment_bytes) {
            return Err(Error::InvalidConfig(format!(
                "siro segment bytes must be in 4096..=67108864, got {}",
                self.segment_bytes
            )));
        }
        for (name, v) in [
            ("siro LLT multiple", self.llt_multiple),
            ("siro cold multiple", self.cold_multiple),
        ] {
            if !(1..=1_000_000_000).contains(&v) {
                return Err(Error::InvalidConfig(format!(
                    "{name} must be in 1..=1000000000, got {v}"
                )));
            }
        }
        Ok(())
    }
}

/// Engine configuration: a builder with defaults, validated at `Database::open`.
#[derive(Clone, Debug)]
pub struct Config {
    pub(crate) protocol: Protocol,
    pub(crate) isolation: Isolation,
    pub(crate) timestamps: TimestampPolicy,
    pub(crate) po_counters: PoCounters,
    pub(crate) po_tick: std::time::Duration,
    pub(crate) storage: VersionStorage,
    pub(crate) non_inline: NonInline,
    pub(crate) gc: GcPolicy,
    pub(crate) index_pointers: IndexPointers,
    pub(crate) log: LogPolicy,
    pub(crate) log_manager: LogManagerKind,
    pub(crate) max_concurrent_txns: usize,
    pub(crate) max_retries: u32,
    pub(crate) record_history: bool,
    pub(crate) gc_interval_txns: u32,
    pub(crate) gc_threads: usize,
    pub(crate) siro: SiroKnobs,
    pub(crate) memory_spaces: usize,
    pub(crate) ddl_wait: std::time::Duration,
    pub(crate) data_dir: Option<std::path::PathBuf>,
    pub(crate) create_if_missing: bool,
    pub(crate) loggers: usize,
    pub(crate) fsync: FsyncPolicy,
    pub(crate) epoch_interval: std::time::Duration,
    pub(crate) log_file_bytes: u64,
    pub(crate) recovery: RecoveryScheme,
    pub(crate) recovery_threads: usize,
    pub(crate) pacman_mode: PacmanMode,
    pub(crate) pacman_slicing: PacmanSlicing,
    pub(crate) pacman_batch_epochs: u64,
    /// Test only: PACMAN ignores key footprints and runs a piece-set's pieces newest first,
    /// so a test can show its comparison with serial replay fails without them.
    #[cfg(test)]
    pub(crate) pacman_unordered: bool,
    /// Test only: pipelined PACMAN drops the edge from a block's piece-set of batch k to its
    /// piece-set of batch k+1, so a test can show the pipeline needs it.
    #[cfg(test)]
    pub(crate) pacman_unpipelined: bool,
    /// `None`: the protocol's own choice (on where it can speculate).
    pub(crate) commit_dependencies: Option<bool>,
    /// `ermia-ssi` only (`None`: on).
    pub(crate) ermia_safe_retry: Option<bool>,
    /// `ermia-ssi` only (`None`: off).
    pub(crate) ermia_old_read_age: Option<u64>,
    /// `mv2pl-wait`'s lock-wait timeout (`None`: the default, 5 s).
    pub(crate) lock_wait_timeout: Option<std::time::Duration>,
    pub(crate) procedures: ProcedureExec,
    pub(crate) unsafe_no_validation: bool,
    pub(crate) unsafe_heal_skips_reads: bool,
    /// `healing` and `mvocc` only (`None`: on).
    pub(crate) column_check: Option<bool>,
    pub(crate) heal_access_cache: Option<bool>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            protocol: Protocol::Mvocc,
            isolation: Isolation::Serializable,
            timestamps: TimestampPolicy::GlobalCounter,
            po_counters: PoCounters::Shared,
            po_tick: std::time::Duration::from_micros(100),
            storage: VersionStorage::AppendN2o,
            non_inline: NonInline::Inline,
            gc: GcPolicy::Txn,
            index_pointers: IndexPointers::LogicalTid,
            log: LogPolicy::None,
            log_manager: LogManagerKind::Epoch,
            max_concurrent_txns: 256,
            max_retries: 64,
            record_history: false,
            // 16, not 64: a shorter pass interval frees versions (and hands their blocks to
            // the next update) while they are still in L2; on YCSB bytes100x10 θ 0.9 it was
            // faster in 5 of 6 alternating pairs, and no different at θ 0 (docs/benchmarks.md).
            gc_interval_txns: 16,
            gc_threads: 1,
            siro: SiroKnobs::default(),
            memory_spaces: 0,
            ddl_wait: std::time::Duration::from_secs(10),
            data_dir: None,
            create_if_missing: true,
            loggers: 1,
            fsync: FsyncPolicy::Always,
            // SiloR uses 40 ms; a waiting committer also starts a round at once (log/), so
            // the interval bounds latency only for commits nobody waits for.
            epoch_interval: std::time::Duration::from_millis(10),
            log_file_bytes: 64 << 20,
            recovery: RecoveryScheme::Auto,
            recovery_threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
            pacman_mode: PacmanMode::Pipelined,
            pacman_slicing: PacmanSlicing::Pacman,
            // "the batch size to 100 epochs" (thesis §4.6.1).
            pacman_batch_epochs: 4,
            #[cfg(test)]
            pacman_unordered: false,
            #[cfg(test)]
            pacman_unpipelined: false,
            commit_dependencies: None,
            ermia_safe_retry: None,
            ermia_old_read_age: None,
            lock_wait_timeout: None,
            procedures: ProcedureExec::Compiled,
            unsafe_no_validation: false,
            unsafe_heal_skips_reads: false,
            column_check: None,
            heal_access_cache: None,
        }
    }
}

impl Config {
    /// The defaults: MVOCC, Serializable, one global timestamp counter, append-only N2O,
    /// transaction-level GC, tuple-id index pointers, no logging.
    pub fn new() -> Self {
        Self::default()
    }
    /// Concurrency-control protocol (default `mvocc`); `Database::open` checks its pairing with
    /// the isolation level and version storage.
    pub fn protocol(mut self, p: Protocol) -> Self {
        self.protocol = p;
        self
    }
    /// Commit dependencies (Hekaton §2.7; default on where the protocol has them): under
    /// `mvocc` and `si` a reader that meets a Preparing writer below its read time reads or
    /// ignores the version speculatively and may commit only if that writer commits (it
    /// waits for the outcome just before its own commit, and aborts with
    /// `commit_dependency` if the writer aborted). Off: the reader waits for the outcome
    /// where it meets the writer. The other protocols always wait (MVTO aborts instead), so
    /// `Database::open` refuses `true` for them (`can_speculate`) rather than ignore it.
    /// Reads a transaction returns to the application may thus come from a writer that
    /// later aborts; such a transaction then fails to commit, as in Hekaton, where results
    /// are held back until commit.
    pub fn commit_dependencies(mut self, on: bool) -> Self {
        self.commit_dependencies = Some(on);
        self
    }
    /// The thesis's OCC⁻ and SILO⁻ (Wu 2017 §3.5, Figs. 3.8 and 3.10; default off): `occ` or
    /// `silo` with read validation switched off, an upper bound on what validation costs.
    /// **Not serializable.** A commit locks only the records it writes, in (table, tuple id)
    /// order; reads and predicate reads are not re-checked, and a record written after a
    /// read that a concurrent commit has since replaced is locked and replaced in its current
    /// version (a lost update). A write still aborts when its row was deleted or holds
    /// another transaction's uncommitted insert, and unique keys are still checked. With this
    /// on, `occ` and `silo` run the same commit (they differ only in what validation locks).
    /// Any other protocol is `Error::InvalidConfig` at open.
    pub fn unsafe_no_validation(mut self, on: bool) -> Self {
        self.unsafe_no_validation = on;
        self
    }
    /// A deliberately broken `healing`, for tests only: a row the call only read and found
    /// stale at validation is accepted as if current, so the operations that depend on it are
    /// not restored (rows it wrote still heal). Not serializable: it exists to show that the
    /// history checker catches a healing step left out. Any other protocol is
    /// `Error::InvalidConfig` at open.
    #[doc(hidden)]
    pub fn unsafe_heal_skips_reads(mut self, on: bool) -> Self {
        self.unsafe_heal_skips_reads = on;
        self
    }
    /// Default isolation level of `Database::begin` (a transaction may ask for another).
    pub fn isolation(mut self, i: Isolation) -> Self {
        self.isolation = i;
        self
    }
    /// Timestamp source (default `global-counter`; `silo-epoch` is not built and is
    /// `Error::Unsupported` at open; `Config::validate` refuses the pairings a source
    /// cannot serve).
    pub fn timestamps(mut self, t: TimestampPolicy) -> Self {
        self.timestamps = t;
        self
    }
    /// Where `partial-order` keeps its per-timestamp counts (default `shared`; ignored by the
    /// other timestamp sources).
    pub fn po_counters(mut self, c: PoCounters) -> Self {
        self.po_counters = c;
        self
    }
    /// `partial-order`: how often the tick closes a non-empty open commit timestamp, so a
    /// commit becomes readable without a conflict or a floor (default 100 µs; zero: no tick,
    /// commits become readable only on a conflict abort or a begin with a floor).
    pub fn po_tick(mut self, d: std::time::Duration) -> Self {
        self.po_tick = d;
        self
    }
    /// Version storage (default `n2o`; single-version protocols need `single-version`).
    pub fn version_storage(mut self, s: VersionStorage) -> Self {
        self.storage = s;
        self
    }
    /// How stored procedures run (`ProcedureExec`; default `compiled`). Takes effect for
    /// procedures created after the database opens with it.
    pub fn procedures(mut self, p: ProcedureExec) -> Self {
        self.procedures = p;
        self
    }
    /// Non-inline variable-length attributes (`NonInline`): append-only multi-version
    /// storage (`n2o`, `o2n`) only.
    pub fn non_inline(mut self, n: NonInline) -> Self {
        self.non_inline = n;
        self
    }
    /// Garbage-collection policy (default `txn`; `coop` needs version storage `o2n`).
    pub fn gc(mut self, g: GcPolicy) -> Self {
        self.gc = g;
        self
    }
    /// Background threads of GC `vacuum` (default 1; 1..=64), each vacuuming its share of
    /// the dirty blocks every 2 ms; under `coop`, the threads of the full passes (every
    /// 20 ms); under `dead-zone`, the threads that revisit the chains workers hand over.
    pub fn gc_threads(mut self, n: usize) -> Self {
        self.gc_threads = n;
        self
    }
    /// Version storage `siro`: the bytes of one version segment (default 64 KiB, the
    /// vDriver artifact's `VCLUSTER_SEGSIZE`; 4 KiB..=64 MiB). A segment is cut only once it
    /// is full, so larger segments keep dead versions longer (vDriver Fig. 19).
    pub fn siro_segment_bytes(mut self, n: usize) -> Self {
        self.siro.segment_bytes = n;
        self
    }
    /// Version storage `siro`: a transaction is long-lived (its versions go to LLT segments)
    /// once it is older than this many average transaction lengths, counted in commit
    /// timestamps (default 200, the artifact's `CLASSIFICATION_THRESHOLD_LLT`; 1..=10^9).
    pub fn siro_llt_multiple(mut self, n: u64) -> Self {
        self.siro.llt_multiple = n;
        self
    }
    /// Version storage `siro`: a relocated version is cold when its lifetime (End − Begin)
    /// exceeds this many average lifetimes, else hot (default 10, the artifact's
    /// `CLASSIFICATION_THRESHOLD_COLD`; 1..=10^9).
    pub fn siro_cold_multiple(mut self, n: u64) -> Self {
        self.siro.cold_multiple = n;
        self
    }
    /// Memory spaces versions are allocated from (thesis §5.4, Fig. 5.16; `version/space.rs`):
    /// N shared arenas growing in 512 KiB increments, worker slot `s` using space `s % N`
    /// (0..=64). 0, the default: no spaces; each thread recycles its own freed versions and
    /// takes new ones from the general allocator. Spaces are process-wide and keep their
    /// memory for reuse until the process exits.
    pub fn memory_spaces(mut self, n: usize) -> Self {
        self.memory_spaces = n;
        self
    }
    /// How secondary indexes point at rows (default `logical-tid`).
    pub fn index_pointers(mut self, p: IndexPointers) -> Self {
        self.index_pointers = p;
        self
    }
    /// What commit records hold (default `none`; `data_dir` sets `logical` unless another was
    /// chosen).
    pub fn log(mut self, l: LogPolicy) -> Self {
        self.log = l;
        self
    }
    /// Which log manager makes commits durable (default `epoch`).
    pub fn log_manager(mut self, m: LogManagerKind) -> Self {
        self.log_manager = m;
        self
    }
    /// Upper bound on transactions open at once (the size of the transaction table).
    pub fn max_concurrent_txns(mut self, n: usize) -> Self {
        self.max_concurrent_txns = n;
        self
    }
    /// Attempts `Database::run` makes before returning `Error::RetriesExhausted`.
    pub fn max_retries(mut self, n: u32) -> Self {
        self.max_retries = n;
        self
    }
    /// Record every committed transaction's reads and writes for the history checker.
    pub fn record_history(mut self, on: bool) -> Self {
        self.record_history = on;
        self
    }
    /// A worker prunes what its commits superseded after this many of its commits (GC `txn`
    /// and `dead-zone`; under `coop` it refreshes its cached watermark as often; default 16).
    pub fn gc_interval_txns(mut self, n: u32) -> Self {
        self.gc_interval_txns = n;
        self
    }
    /// Whether opening a data directory with no database creates one (default true). With
    /// false, such a directory is `Error::NotADataDirectory` (what `myriad recover` wants).
    pub fn create_if_missing(mut self, create: bool) -> Self {
        self.create_if_missing = create;
        self
    }

    /// How long `Database::create_index` waits for running transactions to finish before it
    /// gives up with `Error::Busy` (default 10 s).
    pub fn ddl_wait(mut self, d: std::time::Duration) -> Self {
        self.ddl_wait = d;
        self
    }

    /// Makes the database durable in `dir` (created if missing or empty, unless
    /// `create_if_missing(false)`; an existing one is recovered at open; a non-empty directory
    /// that is not a database is refused with `Error::NotADataDirectory`). Sets logical logging
    /// unless another log policy was chosen.
    pub fn data_dir(mut self, dir: impl Into<std::path::PathBuf>) -> Self {
        self.data_dir = Some(dir.into());
        if self.log == LogPolicy::None {
            self.log = LogPolicy::Logical;
        }
        self
    }
    /// Logger threads, each writing its own log files (default 1).
    pub fn loggers(mut self, n: usize) -> Self {
        self.loggers = n;
        self
    }
    /// Whether group commits are fsynced (default `always`).
    pub fn fsync(mut self, f: FsyncPolicy) -> Self {
        self.fsync = f;
        self
    }
    /// Longest time between group commits when no committer is waiting (default 10 ms).
    pub fn epoch_interval(mut self, d: std::time::Duration) -> Self {
        self.epoch_interval = d;
        self
    }
    /// A logger starts a new log file once its current one reaches this size (default 64 MiB).
    pub fn log_file_bytes(mut self, n: u64) -> Self {
        self.log_file_bytes = n;
        self
    }

    /// How opening a data directory replays its log (default `auto`).
    pub fn recovery(mut self, r: RecoveryScheme) -> Self {
        self.recovery = r;
        self
    }
    /// Threads recovery uses (default: the machine's cores).
    pub fn recovery_threads(mut self, n: usize) -> Self {
        self.recovery_threads = n;
        self
    }
    /// How PACMAN recovery coordinates log batches (default `pipelined`, the thesis's full
    /// design, Fig. 4.9; `static` and `sync` are Fig. 4.19's other bars).
    pub fn pacman_mode(mut self, m: PacmanMode) -> Self {
        self.pacman_mode = m;
        self
    }
    /// How PACMAN recovery decomposes logged calls into pieces (default `pacman`: its
    /// slices; `chopping` and `whole` are the coarser baselines of thesis Fig. 4.18).
    pub fn pacman_slicing(mut self, s: PacmanSlicing) -> Self {
        self.pacman_slicing = s;
        self
    }
    /// Epochs per PACMAN log batch (default 4); ERMIA's log has no epochs, so there a
    /// record's epoch is its LSN / 64 KiB. The thesis sets 100 of its epochs (§4.6.1), of a
    /// length its text does not give; 100 of ours (10 ms each) is about 190,000 TPC-C calls
    /// and half a million pieces, whose queues and edges no longer fit a core's cache: with
    /// 100 (and `sync`) replay took 1.18x as long on 2 threads as with 4 (and `pipelined`)
    /// on a TPC-C command log (docs/benchmarks.md, "PACMAN's batch size").
    pub fn pacman_batch_epochs(mut self, n: u64) -> Self {
        self.pacman_batch_epochs = n;
        self
    }
    /// The PACMAN batch coordination (`pacman_mode`).
    pub fn get_pacman_mode(&self) -> PacmanMode {
        self.pacman_mode
    }
    /// The PACMAN decomposition (`pacman_slicing`).
    pub fn get_pacman_slicing(&self) -> PacmanSlicing {
        self.pacman_slicing
    }
    /// Epochs per PACMAN log batch (`pacman_batch_epochs`).
    pub fn get_pacman_batch_epochs(&self) -> u64 {
        self.pacman_batch_epochs
    }
    /// The configured recovery scheme (`recovery`).
    pub fn get_recovery(&self) -> RecoveryScheme {
        self.recovery
    }
    /// Threads recovery uses (`recovery_threads`).
    pub fn get_recovery_threads(&self) -> usize {
        self.recovery_threads
    }

    /// The data directory, if the database is durable (`data_dir`).
    pub fn get_data_dir(&self) -> Option<&std::path::Path> {
        self.data_dir.as_deref()
    }
    /// Logger threads (`loggers`).
    pub fn get_loggers(&self) -> usize {
        self.loggers
    }
    /// The fsync policy (`fsync`).
    pub fn get_fsync(&self) -> FsyncPolicy {
        self.fsync
    }

    /// Read validation is off (`unsafe_no_validation`: OCC⁻/SILO⁻).
    pub fn get_unsafe_no_validation(&self) -> bool {
        self.unsafe_no_validation
    }

    /// The concurrency-control protocol (`protocol`).
    pub fn get_protocol(&self) -> Protocol {
        self.protocol
    }
    /// The default isolation level (`isolation`).
    pub fn get_isolation(&self) -> Isolation {
        self.isolation
    }
    /// The version storage (`version_storage`).
    pub fn get_storage(&self) -> VersionStorage {
        self.storage
    }
    /// The GC policy (`gc`).
    pub fn get_gc(&self) -> GcPolicy {
        self.gc
    }
    /// Commits between a worker's GC passes (`gc_interval_txns`).
    pub fn get_gc_interval_txns(&self) -> u32 {
        self.gc_interval_txns
    }
    /// Background GC threads (`gc_threads`).
    pub fn get_gc_threads(&self) -> usize {
        self.gc_threads
    }
    /// Version storage `siro`'s segment bytes, LLT multiple and cold multiple.
    pub fn get_siro(&self) -> (usize, u64, u64) {
        (
            self.siro.segment_bytes,
            self.siro.llt_multiple,
            self.siro.cold_multiple,
        )
    }
    /// Memory spaces versions are allocated from, 0 for none (`memory_spaces`).
    pub fn get_memory_spaces(&self) -> usize {
        self.memory_spaces
    }
    /// The timestamp source (`timestamps`).
    pub fn get_timestamps(&self) -> TimestampPolicy {
        self.timestamps
    }
    /// Where `partial-order` keeps its counts (`po_counters`).
    pub fn get_po_counters(&self) -> PoCounters {
        self.po_counters
    }
    /// `partial-order`'s tick period (`po_tick`).
    pub fn get_po_tick(&self) -> std::time::Duration {
        self.po_tick
    }
    /// How stored procedures run (`procedures`).
    pub fn get_procedures(&self) -> ProcedureExec {
        self.procedures
    }
    /// Where variable-length attributes live (`non_inline`).
    pub fn get_non_inline(&self) -> NonInline {
        self.non_inline
    }
    /// How secondary indexes point at rows (`index_pointers`).
    pub fn get_index_pointers(&self) -> IndexPointers {
        self.index_pointers
    }
    /// What commit records hold (`log`).
    pub fn get_log(&self) -> LogPolicy {
        self.log
    }
    /// The log manager (`log_manager`).
    pub fn get_log_manager(&self) -> LogManagerKind {
        self.log_manager
    }
    /// ERMIA-SSI's safe retry (ERMIA §3.6; `ermia-ssi` only, default on): a transaction
    /// that would be the pivot of a dangerous structure (it has s1: a version it read was
    /// overwritten by a transaction that committed before it) and that overwrote a version
    /// an in-flight transaction has read aborts at pre-commit, rather than commit and leave
    /// that reader to abort. Its retry reads the committed overwriter's writes, so it does
    /// not meet the same structure again; the reader is spared. Off: the reader aborts when
    /// it commits (still serializable). Counted as `Stats::ssi_safe_retries`.
    pub fn ermia_safe_retry(mut self, on: bool) -> Self {
        self.ermia_safe_retry = Some(on);
        self
    }
    /// The column check of read validation (thesis §3.4.5's false-invalidation check;
    /// protocols `healing` and `mvocc`, default on): at validation, a row a stored-procedure
    /// call read that another commit replaced only in columns the procedure does not read
    /// (`procedure::healing`'s column masks; e.g. a Payment's `w_ytd` under a New-Order that
    /// read `w_tax`) is still a valid read. Counted as `Stats::false_invalidations`; the
    /// history's read of the row is re-pointed to the record that stands at the commit.
    /// - `healing`: the read is taken in the current record, and a write the call buffered
    ///   on the row is rebased on it (unless the row changed in a column the call writes or
    ///   an index covers), instead of a heal.
    /// - `mvocc` (Repeatable Read and Serializable, the levels that validate reads): the read
    ///   passes when the version visible at the end timestamp is a full row equal to the one
    ///   read in every column the procedure reads, instead of a `read_validation` abort.
    ///   Statements outside a procedure have no column masks and validate whole versions.
    ///
    /// Off: every replaced row heals (`healing`) or fails validation (`mvocc`), as in the
    /// papers. Other protocols refuse it.
    pub fn column_check(mut self, on: bool) -> Self {
        self.column_check = Some(on);
        self
    }
    /// `healing`: the access cache (thesis §3.4.1; `cc/healing.rs`). A healable call records
    /// the tuple each of its primary-key lookups found, and for each point UPDATE of a
    /// compiled procedure its inputs and buffered version. A heal re-running the call reaches
    /// the rows of keys already looked up without an index lookup
    /// (`Stats::heal_cache_hits`), and takes an UPDATE whose inputs are unchanged and whose
    /// row still stands in the record it replaced as done, keeping its buffered version
    /// (`Stats::heal_ops_reused`). A transaction-table slot records only in the 32 healable
    /// calls after its last heal, and its first 32 (`cc::healing::RECORD_WINDOW`): recording
    /// costs every call, and only a call that heals gains from it; a heal in a quiet period
    /// runs as with the cache off. Default off: on this machine (2 threads) recording costs
    /// more than heals gain on TPC-C — 4–5% faster without it at 1 warehouse, level at 2 —
    /// while Smallbank (100 accounts) measured between 5% slower and 2% faster
    /// (docs/healing.md, "The access cache, on or off by default"). Off, every heal looks
    /// every key up again and runs every operation; the thesis's Table 3.4 compares the two.
    /// Other protocols refuse it.
    pub fn heal_access_cache(mut self, on: bool) -> Self {
        self.heal_access_cache = Some(on);
        self
    }
    /// Whether `healing`'s access cache is on (`heal_access_cache`).
    pub fn get_heal_access_cache(&self) -> bool {
        self.protocol == Protocol::Healing && self.heal_access_cache.unwrap_or(false)
    }
    /// Whether the column check of read validation is on (`column_check`).
    pub fn get_column_check(&self) -> bool {
        matches!(self.protocol, Protocol::Healing | Protocol::Mvocc)
            && self.column_check.unwrap_or(true)
    }
    /// Whether ERMIA-SSI's safe retry is on (`ermia_safe_retry`).
    pub fn get_ermia_safe_retry(&self) -> bool {
        self.protocol == Protocol::ErmiaSsi && self.ermia_safe_retry.unwrap_or(true)
    }
    /// ERMIA-SSI's read optimisation (ERMIA §3.6; `ermia-ssi` only, default off): a READ
    /// ONLY transaction does not track its reads of versions committed at least `age`
    /// timestamps before its begin ("old" versions). Such a read leaves the reader's begin
    /// timestamp in the version's bstamp (the largest, one more word per version under
    /// `ermia-ssi`) and checks at once whether the version was overwritten by a transaction
    /// that committed with its s1 set; a writer of a version with a bstamp ≥ its own s1
    /// aborts at pre-commit (`cc/ermia_ssi.rs` says why that test is exact for read-only
    /// readers). Counted as `Stats::ssi_untracked_reads` and `ssi_old_read_aborts`.
    pub fn ermia_old_read_age(mut self, age: u64) -> Self {
        self.ermia_old_read_age = Some(age);
        self
    }
    /// ERMIA-SSI's old-version age threshold, if the read optimisation is on.
    pub fn get_ermia_old_read_age(&self) -> Option<u64> {
        self.ermia_old_read_age
            .filter(|_| self.protocol == Protocol::ErmiaSsi)
    }
    /// `mv2pl-wait` only: how long a commit waits for a lock holder that is not itself waiting
    /// (one that is idle, or a single thread's other transaction) before it gives up with
    /// `lock_conflict` — a lock-wait timeout, as `innodb_lock_wait_timeout` or PostgreSQL's
    /// `lock_timeout`. Default 5 s. Zero, or any other protocol, is `Error::InvalidConfig`
    /// at open. Deadlocks do not wait for it: the wait-for graph breaks them at once.
    pub fn lock_wait_timeout(mut self, d: std::time::Duration) -> Self {
        self.lock_wait_timeout = Some(d);
        self
    }
    /// The lock-wait timeout `mv2pl-wait` applies (5 s unless `lock_wait_timeout` set it).
    pub fn get_lock_wait_timeout(&self) -> std::time::Duration {
        self.lock_wait_timeout
            .unwrap_or(std::time::Duration::from_secs(5))
    }
    /// Whether commit dependencies are on (`commit_dependencies`; unset, on exactly where
    /// the protocol can take them, but not under `partial-order` timestamps).
    pub fn get_commit_dependencies(&self) -> bool {
        self.commit_dependencies.unwrap_or_else(|| {
            Self::can_speculate(self.protocol) && self.timestamps != TimestampPolicy::PartialOrder
        })
    }
    /// Whether transactions of this configuration take commit dependencies.
    pub(crate) fn speculates(&self) -> bool {
        // Partial-order: a snapshot never holds a Preparing transaction, so nothing is read
        // speculatively; and a member of one's own commit group must be a conflict, not a
        // dependency (`Resolver::same_group`). `get_commit_dependencies` says off there.
        Self::can_speculate(self.protocol) && self.get_commit_dependencies()
    }

    /// Whether `protocol` can take commit dependencies at all (`commit_dependencies` only
    /// matters for these).
    pub fn can_speculate(protocol: Protocol) -> bool {
        // Hekaton §2.7's speculative reads are built for the optimistic protocols whose
        // validation covers them.
        match protocol {
            Protocol::Mvocc | Protocol::Si => true,
            Protocol::ErmiaSi
            | Protocol::Mvto
            | Protocol::Mv2pl
            | Protocol::Mv2plWait
            | Protocol::Ssn
            | Protocol::Ssi
            | Protocol::ErmiaSsi
            | Protocol::Silo
            | Protocol::Occ
            | Protocol::TwoPl
            | Protocol::Hybrid
            | Protocol::Healing => false,
        }
    }

    /// Isolation levels `protocol` can honour in this build, weakest first.
    pub fn isolation_levels(protocol: Protocol) -> &'static [Isolation] {
        match protocol {
            Protocol::Mvocc => &[
                Isolation::ReadCommitted,
                Isolation::RepeatableRead,
                Isolation::Snapshot,
                Isolation::Serializable,
            ],
            Protocol::Si | Protocol::ErmiaSi => &[Isolation::Snapshot],
            // Timestamp order and two-phase locking serialize every transaction; they have no
            // weaker mode that would differ (thesis §5.3.1, §5.3.3).
            Protocol::Mvto | Protocol::Mv2pl => &[Isolation::Serializable],
            // Hekaton Table 3 runs its pessimistic scheme at RC (no read locks), RR (read
            // locks) and Serializable (read and range locks).
            Protocol::Mv2plWait => &[
                Isolation::ReadCommitted,
                Isolation::RepeatableRead,
                Isolation::Serializable,
            ],
            // SSN makes snapshot isolation serializable; without it, it is `si`.
            Protocol::Ssn | Protocol::Ssi | Protocol::ErmiaSsi => &[Isolation::Serializable],
            // Silo validates every read; it has no snapshot to offer weaker levels on.
            Protocol::Silo
            | Protocol::Occ
            | Protocol::TwoPl
            | Protocol::Hybrid
            | Protocol::Healing => &[Isolation::Serializable],
        }
    }

    /// The strongest isolation level `protocol` offers (what a tool should default to).
    pub fn strongest_isolation(protocol: Protocol) -> Option<Isolation> {
        Self::isolation_levels(protocol).last().copied()
    }

    /// Checks every choice and pairing; called by `Database::open`.
    pub fn validate(&self) -> Result<()> {
        fn unsupported(what: &str, name: &str) -> Error {
            Error::Unsupported(format!("{what} `{name}` is not implemented yet"))
        }
        if Self::isolation_levels(self.protocol).is_empty() {
            return Err(unsupported("protocol", self.protocol.name()));
        }
        if self.commit_dependencies == Some(true) && !Self::can_speculate(self.protocol) {
            return Err(Error::InvalidConfig(format!(
                "commit dependencies (Hekaton §2.7) are built for protocols `mvocc` and `si` \
                 only; protocol `{}` waits for (or, mvto, aborts on) a Preparing writer \
                 instead: leave them unset or off",
                self.protocol
            )));
        }
        if self.protocol != Protocol::ErmiaSsi {
            for (set, what) in [
                (self.ermia_safe_retry.is_some(), "safe retry"),
                (
                    self.ermia_old_read_age.is_some(),
                    "the old-version read optimisation",
                ),
            ] {
                if set {
                    return Err(Error::InvalidConfig(format!(
                        "{what} (ERMIA §3.6) belongs to protocol `ermia-ssi`, not `{}`",
                        self.protocol
                    )));
                }
            }
        }
        if let Some(d) = self.lock_wait_timeout {
            if self.protocol != Protocol::Mv2plWait {
                return Err(Error::InvalidConfig(format!(
                    "a lock-wait timeout applies to protocol `mv2pl-wait` only (the one that \
                     waits for locks), not `{}`",
                    self.protocol
                )));
            }
            if d.is_zero() {
                return Err(Error::InvalidConfig(
                    "the lock-wait timeout must be positive".into(),
                ));
            }
        }
        if self.unsafe_heal_skips_reads && self.protocol != Protocol::Healing {
            return Err(Error::InvalidConfig(format!(
                "unsafe-heal-skips-reads applies to protocol `healing` only, not `{}`",
                self.protocol
            )));
        }
        if self.column_check.is_some()
            && !matches!(self.protocol, Protocol::Healing | Protocol::Mvocc)
        {
            return Err(Error::InvalidConfig(format!(
                "the column check of read validation (thesis §3.4.5) applies to protocols \
                 `healing` and `mvocc` only, not `{}`",
                self.protocol
            )));
        }
        if self.heal_access_cache.is_some() && self.protocol != Protocol::Healing {
            return Err(Error::InvalidConfig(format!(
                "the access cache (thesis §3.4.1) applies to protocol `healing` only, not `{}`",
                self.protocol
            )));
        }
        if self.unsafe_no_validation && !matches!(self.protocol, Protocol::Occ | Protocol::Silo) {
            return Err(Error::InvalidConfig(format!(
                "unsafe-no-validation (OCC⁻/SILO⁻) applies to protocols `occ` and `silo` only, \
                 not `{}`",
                self.protocol
            )));
        }
        if self.commit_dependencies == Some(true)
            && self.timestamps == TimestampPolicy::PartialOrder
        {
            return Err(Error::InvalidConfig(
                "commit dependencies cannot be taken under timestamps `partial-order` (a \
                 snapshot never holds a Preparing writer, and one of the reader's own commit \
                 group is a conflict): leave them unset or off"
                    .into(),
            ));
        }
        // The source is built again by `Database::open`; this refuses the unbuilt ones.
        // Whether the policy is built (no slot words: the table size is checked below).
        self.timestamps.source(self.po_counters, 0)?;
        self.check_timestamps()?;
        self.check_isolation(self.isolation)?;
        match (self.protocol.single_version(), self.storage) {
            (false, VersionStorage::SingleVersion) => {
                return Err(Error::InvalidConfig(format!(
                    "protocol `{}` is multi-version and cannot run on version storage `{}`",
                    self.protocol, self.storage
                )))
            }
            (true, s) if s != VersionStorage::SingleVersion => {
                return Err(Error::InvalidConfig(format!(
                    "protocol `{}` is single-version and cannot run on version storage `{}` \
                     (use version storage `single-version`)",
                    self.protocol, s
                )))
            }
            _ => {}
        }
        if self.gc == GcPolicy::Coop && self.storage != VersionStorage::AppendO2n {
            return Err(Error::InvalidConfig(format!(
                "gc `coop` needs version storage `o2n`, not `{}`",
                self.storage
            )));
        }

        if self.storage == VersionStorage::Siro && self.gc != GcPolicy::DeadZone {
            return Err(Error::InvalidConfig(format!(
                "version storage `siro` needs gc `dead-zone` (its pruning publishes the dead \
                 zones relocations are tested against, and its threads cut dead segments), \
                 not `{}`",
                self.gc
            )));
        }
        self.siro.check()?;
        if self.storage != VersionStorage::Siro && self.siro != SiroKnobs::default() {
            return Err(Error::InvalidConfig(format!(
                "the siro segment bytes, LLT multiple and cold multiple apply to version \
                 storage `siro` only, not `{}`",
                self.storage
            )));
        }
        if self.gc == GcPolicy::DeadZone
            && !matches!(
                self.storage,
                VersionStorage::AppendN2o | VersionStorage::AppendO2n | VersionStorage::Siro
            )
        {
            // In-place stores keep before-images that older versions need (`delta` applies
            // them newest-first), and single-version storage has no chains to splice.
            return Err(Error::InvalidConfig(format!(
                "gc `dead-zone` splices versions out of append-only chains and is not \
                 supported on version storage `{}` (use `n2o`, `o2n` or `siro`)",
                self.storage
            )));
        }

        if self.non_inline != NonInline::Inline {
            if !matches!(
                self.storage,
                VersionStorage::AppendN2o | VersionStorage::AppendO2n
            ) {
                return Err(Error::InvalidConfig(format!(
                    "non-inline attributes `{}` are an append-only layout and version storage \
                     `{}` is not append-only (use `n2o` or `o2n`)",
                    self.non_inline, self.storage
                )));
            }
            if self.index_pointers == IndexPointers::Physical {
                return Err(Error::InvalidConfig(format!(
                    "non-inline attributes `{}` with index pointers `physical`: physical \
                     entries are keyed by the version's inline bytes (use `logical-tid` or \
                     `logical-pk`)",
                    self.non_inline
                )));
            }
        }
        if self.gc_threads == 0 || self.gc_threads > 64 {
            return Err(Error::InvalidConfig(format!(
                "gc threads must be in 1..=64, got {}",
                self.gc_threads
            )));
        }
        if self.memory_spaces > crate::version::space::MAX_SPACES {
            return Err(Error::InvalidConfig(format!(
                "memory spaces must be in 0..={}, got {}",
                crate::version::space::MAX_SPACES,
                self.memory_spaces
            )));
        }
        if self.index_pointers == IndexPointers::Physical
            && !matches!(
                self.storage,
                VersionStorage::AppendN2o | VersionStorage::AppendO2n
            )
        {
            return Err(Error::InvalidConfig(format!(
                "index pointers `physical` point at versions in an append-only chain, and \
                 version storage `{}` has none (use `n2o` or `o2n`)",
                self.storage
            )));
        }
        match (self.log, &self.data_dir) {
            (LogPolicy::None, None)
            | (LogPolicy::Logical | LogPolicy::Command | LogPolicy::Physical, Some(_)) => {}
            (LogPolicy::None, Some(_)) => {
                return Err(Error::InvalidConfig(
                    "a data directory needs a log (`none` is the memory-only mode)".into(),
                ))
            }
            (_, None) => {
                return Err(Error::InvalidConfig(format!(
                    "log `{}` needs a data directory (Config::data_dir / --data-dir)",
                    self.log
                )))
            }
        }
        if self.log == LogPolicy::Command {
            if let Some(why) = self.protocol.command_log_refusal() {
                return Err(Error::InvalidConfig(format!(
                    "log `command` cannot be used with protocol `{}`: {why}",
                    self.protocol
                )));
            }
        }
        // What the directory's existing log holds is checked at recovery; this catches the
        // pairing that can never work for the log this configuration writes.
        if self.log == LogPolicy::Command
            && matches!(
                self.recovery,
                RecoveryScheme::ParallelLatched | RecoveryScheme::ParallelPartitioned
            )
        {
            return Err(Error::InvalidConfig(format!(
                "log `command` cannot be replayed by recovery `{}`: a logged call must run in \
                 commit order (recovery `serial`, `pacman` or `auto`)",
                self.recovery
            )));
        }
        if self.pacman_batch_epochs == 0 {
            return Err(Error::InvalidConfig(
                "pacman batch epochs must be at least 1".into(),
            ));
        }
        if self.recovery_threads == 0 || self.recovery_threads > 256 {
            return Err(Error::InvalidConfig(format!(
                "recovery threads must be in 1..=256, got {}",
                self.recovery_threads
            )));
        }
        if self.log_manager == LogManagerKind::Ermia && self.log == LogPolicy::None {
            return Err(Error::InvalidConfig(
                "log manager `ermia` needs a log (a data directory and log `logical`, \
                 `physical` or `command`)"
                    .into(),
            ));
        }
        if self.log_manager == LogManagerKind::Ermia && self.protocol.single_version() {
            return Err(Error::InvalidConfig(format!(
                "log manager `ermia` draws the commit order from one shared counter as the log \
                 position, but protocol `{}` orders transactions by TIDs it draws without \
                 one; use log manager `epoch`",
                self.protocol
            )));
        }
        if self.log_manager == LogManagerKind::Ermia && self.protocol == Protocol::Mvto {
            return Err(Error::InvalidConfig(
                "log manager `ermia` draws the end timestamp at commit as the log position, \
                 but protocol `mvto` orders transactions by the timestamp drawn at begin; use \
                 log manager `epoch`"
                    .into(),
            ));
        }
        if self.log_manager == LogManagerKind::Ermia && self.loggers != 1 {
            return Err(Error::InvalidConfig(format!(
                "log manager `ermia` writes one log; loggers must be 1, got {} (parallel \
                 logs are log manager `epoch`)",
                self.loggers
            )));
        }
        if self.loggers == 0 || self.loggers > 64 {
            return Err(Error::InvalidConfig(format!(
                "loggers must be in 1..=64, got {}",
                self.loggers
            )));
        }
        if self.epoch_interval.is_zero() || self.epoch_interval > std::time::Duration::from_secs(10)
        {
            return Err(Error::InvalidConfig(format!(
                "epoch interval must be in (0, 10 s], got {:?}",
                self.epoch_interval
            )));
        }
        if self.log_file_bytes < 4096 || self.log_file_bytes > 1 << 30 {
            return Err(Error::InvalidConfig(format!(
                "log file size must be in 4 KiB..=1 GiB, got {}",
                self.log_file_bytes
            )));
        }
        if self.max_concurrent_txns == 0 || self.max_concurrent_txns > crate::txn::table::MAX_SLOTS
        {
            return Err(Error::InvalidConfig(format!(
                "max_concurrent_txns must be in 1..={}, got {}",
                crate::txn::table::MAX_SLOTS,
                self.max_concurrent_txns
            )));
        }
        if self.max_retries == 0 {
            return Err(Error::InvalidConfig(
                "max_retries must be at least 1".into(),
            ));
        }
        if self.gc_interval_txns == 0 {
            return Err(Error::InvalidConfig(
                "gc_interval_txns must be at least 1".into(),
            ));
        }
        Ok(())
    }

    /// The pairings a timestamp source cannot serve (POMVCC spec C4.1).
    fn check_timestamps(&self) -> Result<()> {
        let ts = self.timestamps;
        if ts == TimestampPolicy::LockedCounter && self.log_manager == LogManagerKind::Ermia {
            return Err(Error::InvalidConfig(
                "timestamps `locked-counter` with log manager `ermia`: ERMIA's end timestamp \
                 is the log position its one atomic add reserves, not a locked counter; use \
                 log manager `epoch`"
                    .into(),
            ));
        }
        if ts != TimestampPolicy::PartialOrder {
            return Ok(());
        }
        let why = match self.protocol {
            Protocol::Mvocc | Protocol::Si => None,
            Protocol::Mvto => Some("draws its timestamp at begin, not at commit"),
            Protocol::Ssn | Protocol::Ssi | Protocol::ErmiaSsi | Protocol::ErmiaSi => Some(
                "its stamps (and ERMIA's log positions) need a distinct end timestamp per \
                 transaction",
            ),
            Protocol::Mv2pl | Protocol::Mv2plWait => {
                Some("its locking reads of the latest version need a distinct commit order")
            }
            Protocol::Silo
            | Protocol::Occ
            | Protocol::TwoPl
            | Protocol::Hybrid
            | Protocol::Healing => Some("it is single-version and orders commits by its own TIDs"),
        };
        if let Some(why) = why {
            return Err(Error::InvalidConfig(format!(
                "timestamps `partial-order` with protocol `{}`: {why} (use `si`, or `mvocc` at \
                 `si` or `rc`)",
                self.protocol
            )));
        }
        self.check_timestamps_isolation(self.isolation)?;
        if self.log_manager == LogManagerKind::Ermia {
            return Err(Error::InvalidConfig(
                "timestamps `partial-order` with log manager `ermia`: ERMIA's end timestamp is \
                 a distinct log position"
                    .into(),
            ));
        }
        if self.log == LogPolicy::Command {
            return Err(Error::InvalidConfig(
                "timestamps `partial-order` with log `command`: replaying calls needs one \
                 serial order, and the members of a commit group share a timestamp (use log \
                 `logical` or `physical`)"
                    .into(),
            ));
        }
        Ok(())
    }

    /// Under `partial-order`, the levels whose validation is defined at a shared end
    /// timestamp: `si` and `rc` (the paper defers the others).
    fn check_timestamps_isolation(&self, i: Isolation) -> Result<()> {
        if self.timestamps == TimestampPolicy::PartialOrder
            && !matches!(i, Isolation::Snapshot | Isolation::ReadCommitted)
        {
            return Err(Error::InvalidConfig(format!(
                "timestamps `partial-order` with isolation level `{i}`: read validation at a \
                 commit timestamp shared by a group is not defined (use `si` or `rc`)"
            )));
        }
        Ok(())
    }

    pub(crate) fn check_isolation(&self, i: Isolation) -> Result<()> {
        self.check_timestamps_isolation(i)?;
        if Self::isolation_levels(self.protocol).contains(&i) {
            Ok(())
        } else {
            let offers: Vec<&str> = Self::isolation_levels(self.protocol)
                .iter()
                .map(|l| l.name())
                .collect();
            Err(Error::InvalidConfig(format!(
                "protocol `{}` cannot provide isolation level `{}` (it offers: {})",
                self.protocol,
                i,
                offers.join(", ")
            )))
        }
    }
}
