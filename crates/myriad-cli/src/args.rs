//! The command line: clap's definitions of every subcommand and flag (`Cli`), and the value
//! parsers they use. The subcommand bodies live in their own modules (`main.rs` dispatches).

use clap::{ArgAction, Args, Parser, Subcommand};
use myriad::{
    Error, FsyncPolicy, GcPolicy, IndexPointers, Isolation, LogManagerKind, LogPolicy, NonInline,
    PacmanMode, PacmanSlicing, PoCounters, ProcedureExec, Protocol, RecoveryScheme,
    TimestampPolicy, VersionStorage,
};
use serde::{Serialize, Serializer};
use std::fmt::Display;
use std::path::PathBuf;
use std::str::FromStr;

use crate::baselines::Engine;
use crate::workload::smallbank;
use crate::workload::tatp;
use crate::workload::ycsb::{self, KeyDist, Mix, RowLayout};
use crate::{experiment, isolation};

#[derive(Parser, Debug)]
#[command(name = "myriad", version, about = "Myriad: a multi-version main-memory transaction engine", long_about = None)]
/// The whole command line: one subcommand.
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) command: Command,
}

/// The subcommands of `myriad`.
#[derive(Subcommand, Debug)]
pub(crate) enum Command {
    /// Run a benchmark workload against an embedded in-memory database.
    Bench {
        #[command(subcommand)]
        workload: Box<BenchWorkload>,
    },
    /// An interactive SQL session on an in-memory database, or with --data-dir a durable one
    /// (reads stdin when it is not a terminal; then exits 1 if a statement failed).
    Shell {
        /// Concurrency-control protocol (as for `bench`), on its own version storage.
        #[arg(long, value_name = "P", default_value = "mvocc", value_parser = parse_choice::<Protocol>)]
        protocol: Protocol,
        /// Isolation level of `BEGIN` and of single statements: serializable, rr, si or rc.
        /// Default: the strongest level the protocol offers.
        #[arg(long, value_name = "LEVEL", value_parser = parse_choice::<Isolation>)]
        isolation: Option<Isolation>,
        /// Open (recovering it) or create the durable database in DIR, e.g. one `myriad
        /// recover` has recovered; it is closed with a checkpoint when the shell ends.
        #[arg(long, value_name = "DIR")]
        data_dir: Option<PathBuf>,
    },
    /// Print each stored procedure's IR and def-use graph (key, value and control uses).
    /// The files run in order on an empty in-memory database, so the CREATE TABLE statements
    /// a procedure needs go in an earlier file or earlier in the same file.
    Explain {
        /// SQL files: CREATE TABLE ...; CREATE PROCEDURE ... AS $$ ... $$; ...
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// Print the def-use graphs as Graphviz dot instead of text.
        #[arg(long)]
        dot: bool,
        /// Print PACMAN's static analysis instead (thesis §4.4.1): each writing procedure's
        /// slices and the global dependency graph of blocks over all of them (with `--dot`, as
        /// Graphviz dot).
        #[arg(long)]
        slices: bool,
        /// With `--slices`: the decomposition — pacman (its slices; the default), chopping
        /// (transaction chopping, thesis Fig. 4.18's baseline) or whole (one piece per
        /// procedure).
        #[arg(long, value_name = "S", value_parser = parse_choice::<PacmanSlicing>, requires = "slices")]
        pacman_slicing: Option<PacmanSlicing>,
        /// Print Transaction Healing's static analysis instead (thesis §3.3, §3.4.5): each
        /// procedure's dependency graph (key, value, condition, control and own-write edges,
        /// UPDATEs that read their row, the loops around each operation) and the global
        /// validation order of tables over all of them (with `--dot`, the graphs as Graphviz
        /// dot).
        #[arg(long, conflicts_with = "slices")]
        healing: bool,
    },
    /// Recover a data directory (checkpoint, then the log up to the persistent epoch), print
    /// the time of each phase, and close it (with a fresh checkpoint).
    Recover {
        /// The data directory.
        dir: PathBuf,
        /// Also write the report as JSON to PATH.
        #[arg(long, value_name = "PATH")]
        json: Option<PathBuf>,
        /// How the log is replayed: auto (serial for a command log, physical for a physical
        /// one, else parallel-partitioned), serial, parallel-latched, parallel-partitioned,
        /// physical (rows installed at their tuple ids, then the indexes rebuilt; a physical
        /// log only) or pacman (calls split into pieces by the procedures' static analysis,
        /// replayed in parallel; thesis §4.4).
        #[arg(long, value_name = "SCHEME", default_value = "auto", value_parser = parse_choice::<RecoveryScheme>)]
        recovery: RecoveryScheme,
        /// Recovery threads (default: the machine's cores).
        #[arg(long, value_name = "N")]
        threads: Option<usize>,
        /// Check only: read every file and replay the log into memory, write nothing (no
        /// checkpoint, no lock file); exit 1 on any problem recovery would refuse.
        #[arg(long)]
        verify: bool,
        /// `--recovery pacman` only: static (blocks in parallel, each block's pieces one
        /// after another), sync (also pieces on disjoint keys in parallel; log batches one
        /// after another) or pipelined (a block's piece-set of the next batch starts once its
        /// own piece-set of this batch and its parent blocks' of the next are done; thesis
        /// Fig. 4.9; the default).
        #[arg(long, value_name = "MODE", value_parser = parse_choice::<PacmanMode>)]
        pacman_mode: Option<PacmanMode>,
        /// `--recovery pacman` only: how each logged call is cut into pieces — pacman (its
        /// procedure slices; the default), chopping (transaction chopping, the coarser
        /// baseline of thesis Fig. 4.18) or whole (one piece per call).
        #[arg(long, value_name = "S", value_parser = parse_choice::<PacmanSlicing>)]
        pacman_slicing: Option<PacmanSlicing>,
        /// `--recovery pacman` only: epochs per log batch (default 4; the thesis's 100 are
        /// of epochs of a length it does not give, and 100 of ours replay slower).
        #[arg(long, value_name = "N")]
        pacman_batch_epochs: Option<u64>,
    },
    /// Recover a data directory and check a workload's consistency conditions on it (exit 1
    /// on a violation).
    Check {
        #[command(subcommand)]
        workload: CheckWorkload,
    },
    /// Inspect a data directory's log without opening it.
    Log {
        #[command(subcommand)]
        command: LogCommand,
    },
    /// Run isolation specs (PostgreSQL's isolation-tester syntax): every permutation of the
    /// sessions' steps on a fresh in-memory database; compare with expected output.
    IsolationTest(isolation::IsolationArgs),
    /// Run a design-space experiment of thesis chapter 5 (a sweep of `myriad bench` runs),
    /// print its table and write OUT/NAME.json and an SVG plot OUT/NAME.svg.
    Experiment(experiment::ExperimentArgs),
}

/// `myriad check <workload>`: the workloads whose consistency conditions can be checked.
#[derive(Subcommand, Debug)]
pub(crate) enum CheckWorkload {
    /// TPC-C consistency conditions 1-4 (clause 3.3.2) on a directory written by
    /// `myriad bench tpcc --data-dir`.
    Tpcc {
        /// The data directory.
        #[arg(long, value_name = "DIR")]
        data_dir: PathBuf,
        /// The run had --no-inserts (condition 2 is then not checked).
        #[arg(long)]
        no_inserts: bool,
    },
}

/// `myriad log <command>`.
#[derive(Subcommand, Debug)]
pub(crate) enum LogCommand {
    /// Print the persistent epoch, the current checkpoint, and per log file its epochs,
    /// record count, size and checksum status, and every problem recovery would refuse (exit
    /// 1 if there is one). Read-only: works while the directory is open.
    Inspect {
        /// The data directory.
        dir: PathBuf,
    },
}

/// `myriad bench <workload>`: each workload's own flags, with the shared `BenchArgs`.
#[derive(Subcommand, Debug)]
pub(crate) enum BenchWorkload {
    /// YCSB (thesis §5.7.1): one table, Zipfian point reads and updates.
    Ycsb(YcsbArgs),
    /// TPC-C (spec rev. 5.11, the five transactions as stored procedures) with StockScan.
    Tpcc(TpccArgs),
    /// Smallbank (thesis §3.5): six banking stored procedures over three tables, Zipfian customers.
    Smallbank(SmallbankArgs),
    /// TATP (Hekaton §5.3): seven telecom stored procedures over four tables, 80% reads.
    Tatp(TatpArgs),
    /// Long-lived transactions (vDriver §5): single-row updates over N tables while LLT
    /// threads hold snapshots open; a per-second series of throughput, version bytes and
    /// chain lengths.
    Llt(LltArgs),
}

impl BenchWorkload {
    /// The flags every workload shares, for `main` to complete before the run.
    pub(crate) fn bench_args_mut(&mut self) -> &mut BenchArgs {
        match self {
            BenchWorkload::Ycsb(a) => &mut a.bench,
            BenchWorkload::Smallbank(a) => &mut a.bench,
            BenchWorkload::Tatp(a) => &mut a.bench,
            BenchWorkload::Tpcc(a) => &mut a.bench,
            BenchWorkload::Llt(a) => &mut a.bench,
        }
    }

    /// What `--prefault-mib auto` faults in, given `available` bytes of memory: TPC-C with
    /// inserts on Myriad grows its heap during the run (measured 60–80 MB/s at 2 warehouses
    /// and 2 threads, docs/benchmarks.md "Page faults"), so it gets 64 MiB per thread per
    /// second of warm-up and run, at most 4 GiB and a quarter of `available`; the others hold
    /// their size once loaded (GC'd versions return to the pools) and get 0, as do baseline
    /// engines, whose heaps are not this allocator's.
    pub(crate) fn auto_prefault_mib(&self, available: Option<u64>) -> u64 {
        const MIB_PER_THREAD_SECOND: f64 = 64.0;
        const CAP_MIB: u64 = 4096;
        let BenchWorkload::Tpcc(a) = self else {
            return 0;
        };
        if a.no_inserts || a.engine != Engine::Myriad {
            return 0;
        }
        let b = &a.bench;
        let seconds = (b.warmup + b.duration).max(0.0);
        let want = (MIB_PER_THREAD_SECOND * b.threads as f64 * seconds).ceil() as u64;
        let cap = available.map_or(CAP_MIB, |bytes| CAP_MIB.min((bytes / 4) >> 20));
        want.min(cap)
    }
}

/// Flags every workload shares.
#[derive(Args, Debug, Clone, Serialize)]
pub(crate) struct BenchArgs {
    /// Worker threads (the loader uses as many). Default: the number of CPUs.
    #[arg(long, value_name = "N", default_value_t = default_threads(), value_parser = parse_threads)]
    pub(crate) threads: usize,
    /// Measured seconds (after warm-up).
    #[arg(long, value_name = "SECS", default_value_t = 10.0, allow_negative_numbers = true, value_parser = parse_duration)]
    pub(crate) duration: f64,
    /// Warm-up seconds, run but not counted.
    #[arg(long, value_name = "SECS", default_value_t = 1.0, allow_negative_numbers = true, value_parser = parse_warmup)]
    pub(crate) warmup: f64,
    /// End the run once a worker has finished N transactions (committed or rolled back by
    /// the transaction itself, warm-up included), or at --duration, whichever comes first.
    /// With one thread and a seed this runs the same transactions every time: a fixed amount
    /// of work for counting instructions (`scripts/instructions.sh`).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) stop_after: Option<u64>,
    /// Seed of every random choice (data and transactions).
    #[arg(long, value_name = "N", default_value_t = 42)]
    pub(crate) seed: u64,
    /// Concurrency-control protocol: mvocc, si, mvto, mv2pl, mv2pl-wait, ssn, ssi, ermia-si,
    /// ermia-ssi (multi-version) or silo, occ, 2pl, hybrid, healing (single-version; under healing
    /// a stored-procedure call heals a stale read at commit, every other transaction runs as
    /// OCC).
    #[arg(long, value_name = "P", default_value = "mvocc", value_parser = parse_choice::<Protocol>)]
    #[serde(serialize_with = "as_display")]
    pub(crate) protocol: Protocol,
    /// Version storage: n2o or o2n (append-only, newest to oldest or oldest to newest),
    /// time-travel or delta (the newest row updated in place; older versions as full copies
    /// or as before-images of the changed columns), siro (vDriver: the newest two rows in two
    /// slots of the record, older ones in hot, cold and LLT segments; with --gc dead-zone),
    /// all for the multi-version protocols; or single-version. Default: the
    /// protocol's own (single-version for silo, occ, 2pl, hybrid and healing, n2o for the others).
    #[arg(long, value_name = "S", value_parser = parse_choice::<VersionStorage>)]
    #[serde(serialize_with = "opt_display")]
    pub(crate) storage: Option<VersionStorage>,
    /// Isolation level: serializable, rr, si or rc (mvocc offers all four, mvto and mv2pl
    /// serializable, si only si). Default: the strongest level the protocol offers.
    #[arg(long, value_name = "LEVEL", value_parser = parse_choice::<Isolation>)]
    #[serde(serialize_with = "opt_display")]
    pub(crate) isolation: Option<Isolation>,
    /// Commit dependencies under mvocc and si (Hekaton §2.7): a reader that meets a Preparing
    /// writer below its read time reads or ignores its version speculatively instead of
    /// waiting. `false`: it waits. Default: on for mvocc and si. The other protocols always
    /// wait, and refuse `true`.
    #[arg(long, value_name = "BOOL", action = ArgAction::Set)]
    pub(crate) commit_deps: Option<bool>,
    /// ermia-ssi: safe retry (ERMIA §3.6) — a would-be pivot that overwrote a version an
    /// in-flight transaction read aborts at pre-commit instead of the reader later.
    /// Default: on under ermia-ssi; other protocols refuse it.
    #[arg(long, value_name = "BOOL", action = ArgAction::Set)]
    pub(crate) ermia_safe_retry: Option<bool>,
    /// ermia-ssi: READ ONLY transactions leave their reads of versions committed at least N
    /// timestamps before their begin out of the read set (ERMIA §3.6's old-version read
    /// optimisation). Default: off; other protocols refuse it.
    #[arg(long, value_name = "N")]
    pub(crate) ermia_old_age: Option<u64>,
    /// UNSAFE, NOT SERIALIZABLE: `occ` or `silo` with read validation off (the thesis's OCC⁻
    /// and SILO⁻, §3.5: an upper bound on what validation costs). Commits lock only what they
    /// write and replace the row's current record, so concurrent updates can be lost; the
    /// report's fidelity block says `validation: UNSAFE ...`. Refused for other protocols.
    #[arg(long)]
    pub(crate) unsafe_no_validation: bool,
    /// healing and mvocc: the column check of read validation (thesis §3.4.5's
    /// false-invalidation check). A row a procedure call read that another commit replaced
    /// only in columns the procedure does not read is a valid read: under healing it is taken
    /// in its current record (a write to it rebased) instead of a heal, under mvocc it passes
    /// read validation instead of aborting. Default: on; other protocols refuse it.
    #[arg(long, alias = "heal-column-check", value_name = "BOOL", action = ArgAction::Set)]
    pub(crate) column_check: Option<bool>,
    /// healing: the access cache (thesis §3.4.1). A call records the row each of its
    /// primary-key lookups found, and each point UPDATE's inputs and buffered write; a heal
    /// re-running it reaches the rows of keys it looked up before without an index lookup,
    /// and keeps the write of an UPDATE whose inputs and row are unchanged instead of running
    /// it again. A worker records only in the 32 calls after its last heal (and its first
    /// 32): recording costs every call, and only a call that heals gains. Default: off (on
    /// 2 threads TPC-C at 1 warehouse ran 4-5% faster without it, docs/healing.md; thesis
    /// Table 3.4 compares both); other protocols refuse it.
    #[arg(long, value_name = "BOOL", action = ArgAction::Set)]
    pub(crate) heal_access_cache: Option<bool>,
    /// After the run, check that the history of every committed transaction (the load's
    /// included) is serializable — no cycle of read, write and anti-dependencies (Adya's
    /// G0–G2; DESIGN.md §5) — and exit 1 if not. The database records every read and write
    /// to do it: slower, and memory grows with the run, so keep runs short.
    #[arg(long)]
    pub(crate) check_history: bool,
    /// Where commit and read timestamps come from: global-counter (one fetch-add per update
    /// commit), locked-counter (MPDB's baseline: increment, stamp and unlock under one lock)
    /// or partial-order (POMVCC: non-conflicting updaters share one commit timestamp;
    /// with --protocol si, or mvocc at --isolation si or rc; --log logical or physical makes
    /// a commit readable once its log record is durable).
    #[arg(long, value_name = "SOURCE", default_value = "global-counter", value_parser = parse_choice::<TimestampPolicy>)]
    #[serde(serialize_with = "as_display")]
    pub(crate) timestamps: TimestampPolicy,
    /// partial-order: microseconds between the ticks that close a non-empty open commit
    /// timestamp, making its commits readable (0: no tick).
    #[arg(long, value_name = "US", default_value_t = 100)]
    pub(crate) po_tick_us: u64,
    /// partial-order: where the per-timestamp pre-commit/commit counts live: shared (the
    /// paper's shared counters, two shared atomic read-modify-writes per commit) or slots
    /// (one word per transaction-table slot: none on the commit path; begins, the tick and
    /// floors scan the slots to make closed groups readable).
    #[arg(long, value_name = "WHERE", default_value = "shared", value_parser = parse_choice::<PoCounters>)]
    #[serde(serialize_with = "as_display")]
    pub(crate) po_counters: PoCounters,
    /// How stored procedures run: compiled (each procedure turned once into closures) or
    /// interpreted (the IR interpreter, the reference the compiled form is tested against).
    #[arg(long, value_name = "HOW", default_value = "compiled", value_parser = parse_choice::<ProcedureExec>)]
    #[serde(serialize_with = "as_display")]
    pub(crate) procedures: ProcedureExec,
    /// Garbage collection: txn (transaction-level, epoch-based: workers prune what their
    /// commits superseded), vacuum (tuple-level: background threads prune the chains of the
    /// blocks commits marked dirty), coop (with --storage o2n: readers cut the expired
    /// versions they walk past, background threads make full passes), dead-zone (with
    /// --storage n2o, o2n or siro: workers prune the chains their commits superseded, also
    /// splicing out of their middle the versions no live snapshot sees, vDriver Theorem 3.5;
    /// background threads revisit the chains a snapshot kept) or none.
    #[arg(long, value_name = "POLICY", default_value = "txn", value_parser = parse_choice::<GcPolicy>)]
    #[serde(serialize_with = "as_display")]
    pub(crate) gc: GcPolicy,
    /// How secondary indexes point at rows: logical-tid (tuple ids through the indirection
    /// array), logical-pk (primary keys, looked up in the primary index), either way an
    /// update touches only the indexes whose key it changes; or physical (one entry per
    /// version, so every update inserts into every secondary index and GC removes the
    /// entries of what it collects; append-only storage only). logical-pk and physical take
    /// ordered secondary indexes only, so TATP's hash index exits 2.
    #[arg(long, value_name = "KIND", default_value = "logical-tid", value_parser = parse_choice::<IndexPointers>)]
    #[serde(serialize_with = "as_display")]
    pub(crate) index_pointers: IndexPointers,
    /// Where append-only storage keeps VARCHAR/BYTES attributes (thesis §5.4.1): inline (in
    /// the version), copy (a block per attribute, copied for every new version) or shared
    /// (such blocks shared by reference count while unchanged). n2o/o2n storage, logical
    /// index pointers only.
    #[arg(long, value_name = "HOW", default_value = "inline", value_parser = parse_choice::<NonInline>)]
    #[serde(serialize_with = "as_display")]
    pub(crate) non_inline: NonInline,
    /// With `--gc vacuum`, `dead-zone` or `coop`: background GC threads (beside the workers).
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=64))]
    pub(crate) gc_threads: u16,
    /// With `--storage siro`: bytes of one version segment (vDriver's 64 KiB by default). A
    /// segment is cut only once full, so larger ones hold dead versions longer (Fig. 19).
    #[arg(long, value_name = "BYTES", default_value_t = 65536, value_parser = clap::value_parser!(u64).range(4096..=67_108_864))]
    pub(crate) siro_segment_bytes: u64,
    /// With `--storage siro`: a transaction older than this many mean transaction lengths
    /// (in commit timestamps) is long-lived; versions it reads go to LLT segments (vDriver's
    /// δ_LLT; the artifact's 200 by default, 40000 for Fig. 16's "huge" threshold).
    #[arg(long, value_name = "N", default_value_t = 200, value_parser = clap::value_parser!(u64).range(1..=1_000_000_000))]
    pub(crate) siro_llt_multiple: u64,
    /// With `--storage siro`: a relocated version that lived longer than this many mean
    /// lifetimes is cold, else hot (vDriver's δ_hot; the artifact's 10 by default).
    #[arg(long, value_name = "N", default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=1_000_000_000))]
    pub(crate) siro_cold_multiple: u64,
    /// Memory spaces new versions are carved from (thesis Fig. 5.16): N shared arenas growing
    /// in 512 KiB increments, worker i allocating from space i mod N; every allocation and
    /// free takes its space's lock (reported per transaction). 0: none, each thread recycles
    /// its own freed versions.
    #[arg(long, value_name = "N", default_value_t = 0, value_parser = clap::value_parser!(u16).range(0..=64))]
    pub(crate) memory_spaces: u16,
    /// With `--gc txn` or `dead-zone`: a worker prunes what its commits superseded after this
    /// many of its commits (with `coop`: refreshes its cached watermark as often).
    #[arg(long, value_name = "N", default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub(crate) gc_interval: u32,
    /// Also write the report as one JSON object to PATH.
    #[arg(long, value_name = "PATH")]
    pub(crate) json: Option<PathBuf>,
    /// Never draw progress bars (they are drawn only when stdout is a terminal).
    #[arg(long)]
    pub(crate) no_progress: bool,
    /// Print transaction counts per latency range (<10us ... >=100ms) per transaction type.
    #[arg(long)]
    pub(crate) latency_histogram: bool,
    /// Make the database durable in DIR (a new or empty directory: the benchmark loads its own
    /// data). Commits are acknowledged by epoch group commit; latencies run to durability.
    #[arg(long, value_name = "DIR")]
    pub(crate) data_dir: Option<PathBuf>,
    /// Logging with --data-dir: logical (after-images; the default), physical (whole rows at
    /// their tuple ids), command (stored-procedure calls) or none.
    #[arg(long, value_name = "KIND", value_parser = parse_choice::<LogPolicy>)]
    #[serde(serialize_with = "opt_display")]
    pub(crate) log: Option<LogPolicy>,
    /// Log manager with --data-dir: epoch (SiloR's epoch group commit over --loggers parallel
    /// logs) or ermia (one log; a commit's end timestamp is its LSN, reserved by one atomic add).
    /// Default: ermia under ermia-si and ermia-ssi (with --data-dir), epoch otherwise.
    #[arg(long, value_name = "KIND", value_parser = parse_choice::<LogManagerKind>)]
    #[serde(serialize_with = "opt_display")]
    pub(crate) log_manager: Option<LogManagerKind>,
    /// Logger threads, each writing its own log files (log manager epoch).
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=64))]
    pub(crate) loggers: u64,
    /// fsync each group commit (always), or not (never: for measuring; not durable).
    #[arg(long, value_name = "WHEN", default_value = "always", value_parser = parse_choice::<FsyncPolicy>)]
    #[serde(serialize_with = "as_display")]
    pub(crate) fsync: FsyncPolicy,
    /// Longest time between group commits, in milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=10_000))]
    pub(crate) epoch_ms: u64,
    /// Size at which a logger (or ERMIA's log) starts a new file, in MiB.
    #[arg(long, value_name = "MIB", default_value_t = 64, value_parser = clap::value_parser!(u64).range(1..=1024))]
    pub(crate) log_file_mib: u64,
    /// Take a checkpoint every SECS seconds while the benchmark runs.
    #[arg(long, value_name = "SECS", value_parser = parse_duration)]
    pub(crate) checkpoint_interval: Option<f64>,
    /// Back the heap with 2 MiB transparent huge pages (mimalloc's large OS pages): fewer TLB
    /// misses on large tables. Reported in the fidelity block.
    #[arg(long, value_name = "BOOL", default_value_t = true, action = ArgAction::Set)]
    pub(crate) huge_pages: bool,
    /// Fault in this many MiB of heap before the load and keep freed memory (no purging back
    /// to the OS), as Silo's `--numa-memory` and ERMIA's `-node_memory_gb` pre-fault theirs:
    /// a growing database (TPC-C's inserts) then does not pay the kernel's page faults and
    /// page zeroing during the run. `auto` (the default): what the run is expected to grow by
    /// on Myriad — TPC-C with inserts, 64 MiB per thread per second of warm-up and run, at most
    /// 4 GiB and a quarter of the memory available — and 0 for the workloads that do not grow
    /// (YCSB, Smallbank, TATP, llt, TPC-C `--no-inserts`) and for baseline engines; `auto`
    /// keeps freed memory (no purging) even when it faults nothing in, and an explicit `0`
    /// leaves the allocator's default (freed pages returned to the OS, faulted in again and
    /// zeroed on reuse). Reported in the fidelity block.
    #[arg(long, value_name = "MIB|auto", default_value = "auto", value_parser = parse_prefault)]
    pub(crate) prefault_mib: Prefault,
    /// Load even when the estimated size of the loaded tables exceeds the memory available
    /// (MemAvailable in /proc/meminfo); without it such a run is refused before loading.
    #[arg(long)]
    pub(crate) force: bool,
}

impl BenchArgs {
    /// `--isolation`, which `main` fills in before anything reads it.
    pub(crate) fn isolation(&self) -> Isolation {
        self.isolation.unwrap_or(Isolation::Serializable)
    }
}

/// `myriad bench ycsb`.
#[derive(Args, Debug, Clone, Serialize)]
pub(crate) struct YcsbArgs {
    /// Rows in usertable (DBx1000 uses 10M).
    #[arg(long, value_name = "N", default_value_t = 1_000_000, value_parser = clap::value_parser!(u64).range(1..=i64::MAX as u64))]
    pub(crate) rows: u64,
    /// Operations per transaction.
    #[arg(long, value_name = "N", default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub(crate) ops: u64,
    /// Read/update mix per operation: read-only 100/0, read-intensive 80/20, update-intensive 20/80.
    #[arg(long, value_enum, default_value_t = Mix::ReadIntensive)]
    pub(crate) mix: Mix,
    /// Percentage of operations that are updates (0..=100), instead of --mix (thesis
    /// Fig. 5.13 sweeps it).
    #[arg(long, value_name = "P", conflicts_with = "mix", value_parser = clap::value_parser!(u32).range(0..=100))]
    pub(crate) update_pct: Option<u32>,
    /// Exactly this many of the `--ops` operations are updates, the others reads (Hekaton
    /// §5.1's R reads and W writes: `--ops 12 --writes-per-txn 2`), instead of --mix.
    #[arg(long, value_name = "W", conflicts_with_all = ["mix", "update_pct"])]
    pub(crate) writes_per_txn: Option<u64>,
    /// Zipfian skew θ in [0, 1); 0 is uniform (DBx1000's default is 0.6).
    #[arg(long, value_name = "F", default_value_t = 0.6, allow_negative_numbers = true, value_parser = parse_theta)]
    pub(crate) theta: f64,
    /// Key generator: gray (DBx1000/CCBench, hot keys are the low keys) or ycsb-scrambled.
    #[arg(long, value_enum, default_value_t = KeyDist::Gray)]
    pub(crate) key_dist: KeyDist,
    /// Row layout: int64x10 (key + --attrs INT attributes) or bytes100x10 (key + --attrs
    /// BYTES(100) attributes); the names say the default of ten attributes.
    #[arg(long, value_enum, default_value_t = RowLayout::Int64x10)]
    pub(crate) row_layout: RowLayout,
    /// Attributes per row besides the key (1..=100; the thesis's §5.7.3 has 10 and 100).
    #[arg(long, value_name = "N", default_value_t = ycsb::ATTRS as u64, value_parser = clap::value_parser!(u64).range(1..=100))]
    pub(crate) attrs: u64,
    /// Attributes read per read operation (1..=--attrs).
    #[arg(long, value_name = "N", default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=100))]
    pub(crate) attrs_read: u64,
    /// Attributes set per update operation (1..=--attrs).
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=100))]
    pub(crate) attrs_modified: u64,
    /// Secondary indexes (0..=--attrs): index i is an ordered, non-unique index on attribute
    /// `field{i}`. Operations still go by primary key; an update that changes an indexed
    /// attribute adds that index's entry (thesis §5.7.5).
    #[arg(long, value_name = "N", default_value_t = 0, value_parser = clap::value_parser!(u64).range(0..=100))]
    pub(crate) secondary_indexes: u64,
    /// Keys within a transaction are distinct (a repeated draw is redrawn).
    #[arg(long, value_name = "BOOL", default_value_t = true, action = ArgAction::Set)]
    pub(crate) distinct_keys: bool,
    /// Interleave the index and version lookups of a transaction's keys before running it
    /// (`Transaction::prefetch`): overlaps their cache misses. Reported in the fidelity block.
    #[arg(long, value_name = "BOOL", default_value_t = true, action = ArgAction::Set)]
    pub(crate) prefetch: bool,
    /// Run each transaction as a stored procedure (`ycsb_txn`, written in the SQL procedure
    /// language, compiled or interpreted as `--procedures` says) instead of native Rust calls;
    /// int64x10 layout only.
    #[arg(long)]
    pub(crate) as_procedure: bool,
    /// Heterogeneous workload (thesis §5.7.2): this many more threads run transactions of
    /// `--ops` reads only, reported as `long_read_txn`, beside the `--threads` running `--mix`.
    #[arg(long, value_name = "N", default_value_t = 0, value_parser = clap::value_parser!(u64).range(0..=256))]
    pub(crate) read_only_threads: u64,
    /// Declare the `--read-only-threads` transactions READ ONLY (a snapshot, no validation
    /// and no read tracking), as the thesis's "with READ ONLY" runs do.
    #[arg(long, value_name = "BOOL", default_value_t = true, action = ArgAction::Set)]
    pub(crate) read_only_hint: bool,
    /// Engine: myriad, or a baseline a user would pick instead (sqlite, redb, fjall; builds
    /// with the cargo feature `baselines` only) running the same transactions on the same
    /// rows. A baseline refuses Myriad's design and logging flags.
    #[arg(long, value_enum, default_value_t = Engine::Myriad)]
    pub(crate) engine: Engine,
    #[command(flatten)]
    #[serde(flatten)]
    pub(crate) bench: BenchArgs,
}

/// `myriad bench tpcc`.
#[derive(Args, Debug, Clone, Serialize)]
pub(crate) struct TpccArgs {
    /// Warehouses (the contention knob: terminals share a home warehouse when there are
    /// fewer warehouses than threads).
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(i64).range(1..=100_000))]
    pub(crate) warehouses: i64,
    /// Percentage of New-Order lines supplied by another warehouse and of Payments for another
    /// warehouse's customer (both set to P); 0 disables cross-warehouse transactions. Default:
    /// the standard 1% and 15%.
    #[arg(long, value_name = "P", value_parser = parse_pct)]
    pub(crate) remote_pct: Option<f64>,
    /// Thesis §4.7.1: New-Order, Payment and Delivery without INSERT and DELETE (the database
    /// does not grow).
    #[arg(long)]
    pub(crate) no_inserts: bool,
    /// The transactions: `standard` (the five of clause 5.2.3), `updates` (New-Order, Payment
    /// and Delivery at 45:43:4, the calls a command log holds) or `new-order-fragment`
    /// (POMVCC §VII-B: per order line an ITEM read, a STOCK read and update and an
    /// ORDER_LINE insert, 5 to 15 lines; conflicts only on STOCK; no `--check`).
    #[arg(long, value_enum, default_value_t = TpccMix::Standard)]
    pub(crate) mix: TpccMix,
    /// Percentage of transactions run ad hoc (thesis §4.7, Figs. 4.12 and 4.17): a command log
    /// records their row writes instead of their calls, as it does for statements outside a
    /// procedure; under `healing` they
    /// run as OCC, never healed (thesis §3.4.8, Fig. 3.13). Needs `--log command` or
    /// `--protocol healing`.
    #[arg(long, value_name = "P", default_value_t = 0.0, value_parser = parse_pct)]
    pub(crate) adhoc_pct: f64,
    /// Extra threads that repeatedly run StockScan (thesis §5.7.1: a read-only scan of STOCK
    /// counting each warehouse's items); its latency is reported as `stock_scan`, and its
    /// commits are not counted in the throughput.
    #[arg(long, value_name = "N", default_value_t = 0, value_parser = clap::value_parser!(u64).range(0..=1024))]
    pub(crate) stock_scan_threads: u64,
    /// After the run, check TPC-C consistency conditions 1–4 (clause 3.3.2); exit 1 on a
    /// violation.
    #[arg(long)]
    pub(crate) check: bool,
    /// Engine: myriad, or sqlite (cargo feature `baselines`): the same five transactions as
    /// SQL statements from the host, on the same loaded rows and drawn inputs. A baseline
    /// refuses Myriad's design and logging flags and `--stock-scan-threads`.
    #[arg(long, value_enum, default_value_t = Engine::Myriad)]
    pub(crate) engine: Engine,
    #[command(flatten)]
    #[serde(flatten)]
    pub(crate) bench: BenchArgs,
}

/// `myriad bench tpcc --mix`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum TpccMix {
    /// New-Order 45%, Payment 43%, Order-Status, Delivery and Stock-Level 4% each.
    Standard,
    /// POMVCC's New-Order fragment (`workloads/tpcc-fragment.sql`).
    NewOrderFragment,
    /// New-Order, Payment and Delivery in the standard's proportions (45:43:4), without the
    /// read-only Order-Status and Stock-Level: the calls a command log holds, to compare a
    /// worker's forward throughput with serial command replay.
    Updates,
}

/// `myriad bench llt`.
#[derive(Args, Debug, Clone, Serialize)]
pub(crate) struct LltArgs {
    /// Tables (vDriver: 48).
    #[arg(long, value_name = "N", default_value_t = 48)]
    pub(crate) tables: u64,
    /// Rows per table (vDriver: 1000 or 10,000).
    #[arg(long, value_name = "N", default_value_t = 1000)]
    pub(crate) rows: u64,
    /// Bytes per row: an 8-byte id plus a BYTES column of the rest (vDriver: about 256).
    #[arg(long, value_name = "B", default_value_t = 256)]
    pub(crate) row_bytes: u64,
    /// Zipf exponent s ≥ 0 of the updated keys (exact for s ≥ 1); 0 is uniform.
    #[arg(
        long,
        value_name = "S",
        default_value_t = 0.0,
        allow_negative_numbers = true
    )]
    pub(crate) zipf: f64,
    /// Long-lived-transaction threads (besides --threads), each holding one snapshot.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub(crate) llt: usize,
    /// When the LLTs open their snapshots, in seconds from the start of the measured interval
    /// (before its end: a later one is refused).
    #[arg(long, value_name = "SECS", default_value_t = 0.0, value_parser = parse_warmup)]
    pub(crate) llt_at: f64,
    /// How long each LLT holds its snapshot, in seconds (cut at the end of the run).
    #[arg(long, value_name = "SECS", default_value_t = 0.0, value_parser = parse_warmup)]
    pub(crate) llt_hold: f64,
    /// The LLTs issue random point reads while they hold their snapshots (else they idle).
    #[arg(long)]
    pub(crate) llt_reads: bool,
    /// Long-reader threads (besides --threads and --llt; Hekaton §5.2.2): each runs
    /// Serializable READ ONLY transactions back to back, every one reading --long-read-pct%
    /// of a table. Needs a protocol that offers Serializable.
    #[arg(long, value_name = "N", default_value_t = 0, value_parser = clap::value_parser!(u64).range(0..=64))]
    pub(crate) long_readers: u64,
    /// Percentage of one table's rows each long-reader transaction reads (point reads of a
    /// contiguous key range; Hekaton: 10).
    #[arg(long, value_name = "PCT", default_value_t = 10)]
    pub(crate) long_read_pct: u64,
    /// Cap on the updates per second over all workers (default: uncapped).
    #[arg(long, value_name = "N")]
    pub(crate) rate: Option<u64>,
    /// Memory guard: stop the run with an error once live versions exceed this many MiB.
    #[arg(long, value_name = "MIB")]
    pub(crate) max_version_mib: Option<u64>,
    /// Chains whose lengths each sample of the time series walks (about; a stride over
    /// every table from its first row).
    #[arg(long, value_name = "N", default_value_t = 4096)]
    pub(crate) chain_sample: usize,
    #[command(flatten)]
    #[serde(flatten)]
    pub(crate) bench: BenchArgs,
}

/// `myriad bench smallbank`.
#[derive(Args, Debug, Clone, Serialize)]
pub(crate) struct SmallbankArgs {
    /// Customers, i.e. rows in each of ACCOUNTS, SAVINGS and CHECKING (thesis Table 3.2: 1000).
    #[arg(long, value_name = "N", default_value_t = 1000, value_parser = clap::value_parser!(u64).range(2..=smallbank::MAX_ACCOUNTS))]
    pub(crate) accounts: u64,
    /// Zipfian skew θ in [0, 1) of the customers the transactions pick; 0 is uniform.
    #[arg(long, value_name = "F", default_value_t = 0.5, allow_negative_numbers = true, value_parser = parse_theta)]
    pub(crate) theta: f64,
    /// Percentage of transactions run ad hoc (thesis §4.7, Fig. 4.17): a command log records
    /// their row writes instead of their calls; under `healing` they
    /// run as OCC, never healed (thesis §3.4.8, Fig. 3.13). Needs `--log command` or
    /// `--protocol healing`.
    #[arg(long, value_name = "P", default_value_t = 0.0, value_parser = parse_pct)]
    pub(crate) adhoc_pct: f64,
    /// After the run, check that the money in SAVINGS and CHECKING changed by exactly what the
    /// committed transactions deposited and withdrew; exit 1 if not. (A baseline engine always
    /// checks.)
    #[arg(long)]
    pub(crate) check: bool,
    /// Engine: myriad, or a baseline (sqlite, redb, fjall; cargo feature `baselines`) running
    /// the same transactions on the same customers. A baseline refuses Myriad's design and
    /// logging flags.
    #[arg(long, value_enum, default_value_t = Engine::Myriad)]
    pub(crate) engine: Engine,
    #[command(flatten)]
    #[serde(flatten)]
    pub(crate) bench: BenchArgs,
}

/// `myriad bench tatp`.
#[derive(Args, Debug, Clone, Serialize)]
pub(crate) struct TatpArgs {
    /// Subscribers (rows in SUBSCRIBER; about 2.5, 2.5 and 3.75 times as many in ACCESS_INFO,
    /// SPECIAL_FACILITY and CALL_FORWARDING).
    #[arg(long, value_name = "N", default_value_t = 100_000, value_parser = clap::value_parser!(u64).range(1..=tatp::MAX_SUBSCRIBERS))]
    pub(crate) subscribers: u64,
    /// After the run, check that CALL_FORWARDING holds the loaded rows plus the committed
    /// inserts minus the committed deletes; exit 1 if not.
    #[arg(long)]
    pub(crate) check: bool,
    #[command(flatten)]
    #[serde(flatten)]
    pub(crate) bench: BenchArgs,
}

/// `--threads` by default: the CPUs this process may use (1 if unknown).
pub(crate) fn default_threads() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}

/// Serializes an optional engine choice by its `Display` name (`null` when absent).
pub(crate) fn opt_display<T: Display, S: Serializer>(
    v: &Option<T>,
    s: S,
) -> Result<S::Ok, S::Error> {
    match v {
        Some(v) => s.serialize_str(&v.to_string()),
        None => s.serialize_none(),
    }
}

/// Serializes an engine choice by its `Display` name (the spelling its flag takes).
pub(crate) fn as_display<T: Display, S: Serializer>(v: &T, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(v)
}

/// Parses an engine choice with its own `FromStr` (whose error lists the choices).
pub(crate) fn parse_choice<T: FromStr<Err = Error>>(s: &str) -> Result<T, String> {
    s.parse().map_err(|e: Error| e.to_string())
}

/// `--threads`: a count in 1..=1024.
pub(crate) fn parse_threads(s: &str) -> Result<usize, String> {
    const MAX: usize = 1024;
    match s.parse::<usize>() {
        Ok(n) if (1..=MAX).contains(&n) => Ok(n),
        Ok(n) => Err(format!("{n} is not in 1..={MAX}")),
        Err(e) => Err(e.to_string()),
    }
}

/// A finite number of seconds up to 10^7; above 0 if `min_exclusive`, else at least 0.
pub(crate) fn parse_seconds(s: &str, min_exclusive: bool) -> Result<f64, String> {
    const MAX_S: f64 = 1e7;
    let x: f64 = s.parse().map_err(|e| format!("{e}"))?;
    let ok = x.is_finite() && x <= MAX_S && if min_exclusive { x > 0.0 } else { x >= 0.0 };
    if ok {
        Ok(x)
    } else if min_exclusive {
        Err(format!(
            "must be a number of seconds in (0, {MAX_S}], got {s}"
        ))
    } else {
        Err(format!(
            "must be a number of seconds in [0, {MAX_S}], got {s}"
        ))
    }
}

/// `--duration` and other intervals: seconds, above 0.
pub(crate) fn parse_duration(s: &str) -> Result<f64, String> {
    parse_seconds(s, true)
}

/// `--warmup`: seconds, 0 allowed.
pub(crate) fn parse_warmup(s: &str) -> Result<f64, String> {
    parse_seconds(s, false)
}

/// `--prefault-mib`: a size in MiB, or `auto` (sized by `main` from the workload before
/// anything runs, see `BenchWorkload::auto_prefault_mib`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub(crate) struct Prefault {
    /// MiB to fault in; for `auto`, 0 until `main` sizes it.
    pub(crate) mib: u64,
    /// Sized by the `auto` rule rather than given.
    pub(crate) auto: bool,
}

/// The largest `--prefault-mib` accepted (1 TiB).
const MAX_PREFAULT_MIB: u64 = 1 << 20;

/// `auto` or a size in MiB in [0, 2^20].
pub(crate) fn parse_prefault(s: &str) -> Result<Prefault, String> {
    if s == "auto" {
        return Ok(Prefault { mib: 0, auto: true });
    }
    match s.parse::<u64>() {
        Ok(mib) if mib <= MAX_PREFAULT_MIB => Ok(Prefault { mib, auto: false }),
        Ok(_) => Err(format!(
            "must be auto or at most {MAX_PREFAULT_MIB} MiB, got {s}"
        )),
        Err(_) => Err(format!("must be auto or a size in MiB, got {s}")),
    }
}

/// A percentage in [0, 100].
pub(crate) fn parse_pct(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(x) if (0.0..=100.0).contains(&x) => Ok(x),
        Ok(_) => Err(format!("must be a percentage in [0, 100], got {s}")),
        Err(e) => Err(e.to_string()),
    }
}

/// A Zipfian skew θ in [0, 1).
pub(crate) fn parse_theta(s: &str) -> Result<f64, String> {
    let x: f64 = s.parse().map_err(|e| format!("{e}"))?;
    if (0.0..1.0).contains(&x) {
        Ok(x)
    } else {
        Err(format!(
            "θ must be in [0, 1), got {s} (at θ ≥ 1 the Zipf exponent 1/(1−θ) is undefined)"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    fn bench(args: &[&str]) -> BenchWorkload {
        let argv = ["myriad", "bench"].iter().chain(args);
        match Cli::try_parse_from(argv).unwrap().command {
            Command::Bench { workload } => *workload,
            _ => panic!("not a bench command"),
        }
    }

    /// `--prefault-mib auto` is the default; it sizes TPC-C with inserts by threads × seconds
    /// under its caps and gives 0 to the workloads that do not grow; a number is taken as
    /// given, and neither a size past 1 TiB nor a word other than `auto` parses.
    #[test]
    fn prefault_auto_sizes_growing_runs_only() {
        let gib = 1u64 << 30;
        let mut w = bench(&[
            "tpcc",
            "--threads",
            "2",
            "--duration",
            "10",
            "--warmup",
            "1",
        ]);
        assert!(w.bench_args_mut().prefault_mib.auto);
        assert_eq!(w.auto_prefault_mib(Some(64 * gib)), 2 * 11 * 64);
        assert_eq!(
            w.auto_prefault_mib(Some(2 * gib)),
            512,
            "a quarter of 2 GiB"
        );
        let long = bench(&["tpcc", "--threads", "2", "--duration", "600"]);
        assert_eq!(long.auto_prefault_mib(None), 4096, "capped at 4 GiB");
        let no_inserts = bench(&["tpcc", "--no-inserts", "--duration", "10"]);
        assert_eq!(no_inserts.auto_prefault_mib(Some(64 * gib)), 0);
        for other in [&["ycsb"][..], &["smallbank"], &["tatp"], &["llt"]] {
            assert_eq!(
                bench(other).auto_prefault_mib(Some(64 * gib)),
                0,
                "{other:?}"
            );
        }
        let mut given = bench(&["tpcc", "--prefault-mib", "16"]);
        let p = given.bench_args_mut().prefault_mib;
        assert_eq!((p.mib, p.auto), (16, false));
        for bad in ["2000000", "lots", "-1"] {
            let r = Cli::try_parse_from(["myriad", "bench", "tpcc", "--prefault-mib", bad]);
            assert!(r.is_err(), "{bad}");
        }
    }

    #[test]
    fn defaults_parse_and_serialize_every_flag() {
        let BenchWorkload::Ycsb(a) = bench(&["ycsb"]) else {
            panic!("not ycsb")
        };
        let v = serde_json::to_value(&a).unwrap();
        for k in [
            "rows",
            "ops",
            "mix",
            "theta",
            "key_dist",
            "row_layout",
            "attrs",
            "update_pct",
            "attrs_read",
            "attrs_modified",
            "secondary_indexes",
            "index_pointers",
            "non_inline",
            "distinct_keys",
            "prefetch",
            "threads",
            "duration",
            "warmup",
            "seed",
            "protocol",
            "isolation",
            "gc",
            "gc_interval",
            "gc_threads",
            "siro_segment_bytes",
            "siro_llt_multiple",
            "siro_cold_multiple",
            "memory_spaces",
            "commit_deps",
            "unsafe_no_validation",
            "procedures",
            "json",
            "no_progress",
            "latency_histogram",
            "huge_pages",
        ] {
            assert!(v.get(k).is_some(), "config lacks {k}: {v}");
        }
        assert_eq!(v["protocol"], "mvocc");
        assert_eq!(v["row_layout"], "int64x10");
        assert_eq!(v["mix"], "read-intensive");
    }

    #[test]
    fn invalid_values_name_their_flag() {
        for (args, flag) in [
            (&["--theta", "1.0"][..], "--theta"),
            (&["--theta", "-0.1"], "--theta"),
            (&["--rows", "0"], "--rows"),
            (&["--ops", "0"], "--ops"),
            (&["--secondary-indexes", "101"], "--secondary-indexes"),
            (&["--attrs", "0"], "--attrs"),
            (&["--update-pct", "101"], "--update-pct"),
            (&["--non-inline", "sideways"], "--non-inline"),
            (&["--index-pointers", "pointy"], "--index-pointers"),
            (&["--threads", "0"], "--threads"),
            (&["--attrs-read", "101"], "--attrs-read"),
            (&["--attrs-modified", "0"], "--attrs-modified"),
            (&["--duration", "0"], "--duration"),
            (&["--warmup", "-1"], "--warmup"),
            (&["--distinct-keys", "maybe"], "--distinct-keys"),
            (&["--mix", "write-only"], "--mix"),
            (&["--isolation", "snapshot"], "--isolation"),
        ] {
            let mut argv = vec!["myriad", "bench", "ycsb"];
            argv.extend_from_slice(args);
            let e = Cli::try_parse_from(&argv).unwrap_err().to_string();
            assert!(e.contains(flag), "{args:?}: {e}");
        }
    }
}
