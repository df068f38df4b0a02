//! `myriad`: the command-line tool and benchmark harness.
//!
//! `myriad bench <workload>` opens an embedded in-memory database with the chosen design
//! (`--protocol`, `--isolation`, `--gc`), loads the workload's tables, runs it, and prints a
//! human summary (and with `--json PATH` one JSON object; DESIGN.md §4). Without
//! `--isolation` it runs at the protocol's strongest level. `myriad shell` is an interactive
//! SQL session (in memory, or durable with `--data-dir`); `myriad isolation-test SPEC...` runs
//! isolation specs (`isolation/`). `myriad experiment NAME` runs a sweep of benchmarks and
//! plots it (`experiment/`).
//!
//! Exit codes: 0 success; 1 a fatal error during the run; 2 a usage error (unknown flag,
//! invalid value, a `--data-dir` that is a file, a load estimated not to fit in memory) or a
//! configuration this build does not support. Output into a closed pipe ends the process by
//! SIGPIPE, as for `cat` (`restore_sigpipe`).

mod baselines;
mod bench;
mod experiment;
mod isolation;
mod shell;
mod workload;

/// mimalloc for the benchmark binary: versions are freed by whichever worker's epoch
/// collection runs, often not the one that allocated them, and glibc's per-arena locking made
/// those cross-thread frees a visible cost. The engine library itself leaves the allocator to
/// the application.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use baselines::Engine;
use bench::footprint;
use bench::report::{self, Fidelity, Report, ReportInput};
use bench::{progress_bar, progress_enabled, RunOptions};
use clap::error::ErrorKind;
use clap::{ArgAction, Args, CommandFactory, Parser, Subcommand};
use myriad::{
    Config, Database, Error, FsyncPolicy, GcPolicy, IndexPointers, Isolation, LogManagerKind,
    LogPolicy, NonInline, Protocol, RecoveryScheme, VersionStorage,
};
use serde::{Serialize, Serializer};
use std::fmt::Display;
use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::str::FromStr;
use std::time::{Duration, Instant};
use workload::smallbank::{self, Smallbank};
use workload::tatp::{self, Tatp};
use workload::tpcc::{self, Tpcc, TpccBench};
use workload::ycsb::{self, KeyDist, Mix, RowLayout, Ycsb};
use workload::Workload;

#[derive(Parser, Debug)]
#[command(name = "myriad", version, about = "Myriad: a multi-version main-memory transaction engine", long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run a benchmark workload against an embedded in-memory database.
    Bench {
        #[command(subcommand)]
        workload: BenchWorkload,
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
        /// one, else parallel-partitioned), serial, parallel-latched, parallel-partitioned or
        /// physical (rows installed at their tuple ids, then the indexes rebuilt; a physical
        /// log only).
        #[arg(long, value_name = "SCHEME", default_value = "auto", value_parser = parse_choice::<RecoveryScheme>)]
        recovery: RecoveryScheme,
        /// Recovery threads (default: the machine's cores).
        #[arg(long, value_name = "N")]
        threads: Option<usize>,
        /// Check only: read every file and replay the log into memory, write nothing (no
        /// checkpoint, no lock file); exit 1 on any problem recovery would refuse.
        #[arg(long)]
        verify: bool,
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

#[derive(Subcommand, Debug)]
enum CheckWorkload {
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

#[derive(Subcommand, Debug)]
enum LogCommand {
    /// Print the persistent epoch, the current checkpoint, and per log file its epochs,
    /// record count, size and checksum status, and every problem recovery would refuse (exit
    /// 1 if there is one). Read-only: works while the directory is open.
    Inspect {
        /// The data directory.
        dir: PathBuf,
    },
}

#[derive(Subcommand, Debug)]
enum BenchWorkload {
    /// YCSB (thesis §5.7.1): one table, Zipfian point reads and updates.
    Ycsb(YcsbArgs),
    /// TPC-C (spec rev. 5.11, the five transactions as stored procedures) with StockScan.
    Tpcc(TpccArgs),
    /// Smallbank (thesis §3.5): six banking stored procedures over three tables, Zipfian customers.
    Smallbank(SmallbankArgs),
    /// TATP (Hekaton §5.3): seven telecom stored procedures over four tables, 80% reads.
    Tatp(TatpArgs),
}

impl BenchWorkload {
    fn bench_args_mut(&mut self) -> &mut BenchArgs {
        match self {
            BenchWorkload::Ycsb(a) => &mut a.bench,
            BenchWorkload::Smallbank(a) => &mut a.bench,
            BenchWorkload::Tatp(a) => &mut a.bench,
            BenchWorkload::Tpcc(a) => &mut a.bench,
        }
    }
}

/// Flags every workload shares.
#[derive(Args, Debug, Clone, Serialize)]
struct BenchArgs {
    /// Worker threads (the loader uses as many). Default: the number of CPUs.
    #[arg(long, value_name = "N", default_value_t = default_threads(), value_parser = parse_threads)]
    threads: usize,
    /// Measured seconds (after warm-up).
    #[arg(long, value_name = "SECS", default_value_t = 10.0, allow_negative_numbers = true, value_parser = parse_duration)]
    duration: f64,
    /// Warm-up seconds, run but not counted.
    #[arg(long, value_name = "SECS", default_value_t = 1.0, allow_negative_numbers = true, value_parser = parse_warmup)]
    warmup: f64,
    /// Seed of every random choice (data and transactions).
    #[arg(long, value_name = "N", default_value_t = 42)]
    seed: u64,
    /// Concurrency-control protocol: mvocc, si, mvto, mv2pl, mv2pl-wait, ssn, ssi, ermia-si,
    /// ermia-ssi (multi-version) or silo, occ, 2pl, hybrid (single-version).
    #[arg(long, value_name = "P", default_value = "mvocc", value_parser = parse_choice::<Protocol>)]
    #[serde(serialize_with = "as_display")]
    protocol: Protocol,
    /// Version storage: n2o or o2n (append-only, newest to oldest or oldest to newest),
    /// time-travel or delta (the newest row updated in place; older versions as full copies
    /// or as before-images of the changed columns), all for the multi-version protocols; or
    /// single-version. Default: the
    /// protocol's own (single-version for silo, occ, 2pl and hybrid, n2o for the others).
    #[arg(long, value_name = "S", value_parser = parse_choice::<VersionStorage>)]
    #[serde(serialize_with = "opt_display")]
    storage: Option<VersionStorage>,
    /// Isolation level: serializable, rr, si or rc (mvocc offers all four, mvto and mv2pl
    /// serializable, si only si). Default: the strongest level the protocol offers.
    #[arg(long, value_name = "LEVEL", value_parser = parse_choice::<Isolation>)]
    #[serde(serialize_with = "opt_display")]
    isolation: Option<Isolation>,
    /// Commit dependencies under mvocc and si (Hekaton §2.7): a reader that meets a Preparing
    /// writer below its read time reads or ignores its version speculatively instead of
    /// waiting. `false`: it waits. The other protocols always wait.
    #[arg(long, value_name = "BOOL", default_value_t = true, action = ArgAction::Set)]
    commit_deps: bool,
    /// Garbage collection: txn (transaction-level, epoch-based: workers prune what their
    /// commits superseded), vacuum (tuple-level: background threads prune the chains of the
    /// blocks commits marked dirty), coop (with --storage o2n: readers cut the expired
    /// versions they walk past, background threads make full passes) or none.
    #[arg(long, value_name = "POLICY", default_value = "txn", value_parser = parse_choice::<GcPolicy>)]
    #[serde(serialize_with = "as_display")]
    gc: GcPolicy,
    /// How secondary indexes point at rows: logical-tid (tuple ids through the indirection
    /// array), logical-pk (primary keys, looked up in the primary index), either way an
    /// update touches only the indexes whose key it changes; or physical (one entry per
    /// version, so every update inserts into every secondary index and GC removes the
    /// entries of what it collects; append-only storage only). logical-pk and physical take
    /// ordered secondary indexes only, so TATP's hash index exits 2.
    #[arg(long, value_name = "KIND", default_value = "logical-tid", value_parser = parse_choice::<IndexPointers>)]
    #[serde(serialize_with = "as_display")]
    index_pointers: IndexPointers,
    /// Where append-only storage keeps VARCHAR/BYTES attributes (thesis §5.4.1): inline (in
    /// the version), copy (a block per attribute, copied for every new version) or shared
    /// (such blocks shared by reference count while unchanged). n2o/o2n storage, logical
    /// index pointers only.
    #[arg(long, value_name = "HOW", default_value = "inline", value_parser = parse_choice::<NonInline>)]
    #[serde(serialize_with = "as_display")]
    non_inline: NonInline,
    /// With `--gc vacuum` or `coop`: background GC threads (beside the workers).
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=64))]
    gc_threads: u16,
    /// Memory spaces new versions are carved from (thesis Fig. 5.16): N shared arenas growing
    /// in 512 KiB increments, worker i allocating from space i mod N; every allocation and
    /// free takes its space's lock (reported per transaction). 0: none, each thread recycles
    /// its own freed versions.
    #[arg(long, value_name = "N", default_value_t = 0, value_parser = clap::value_parser!(u16).range(0..=64))]
    memory_spaces: u16,
    /// With `--gc txn`: a worker looks for reclaimable versions after this many of its commits.
    #[arg(long, value_name = "N", default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    gc_interval: u32,
    /// Also write the report as one JSON object to PATH.
    #[arg(long, value_name = "PATH")]
    json: Option<PathBuf>,
    /// Never draw progress bars (they are drawn only when stdout is a terminal).
    #[arg(long)]
    no_progress: bool,
    /// Print transaction counts per latency range (<10us ... >=100ms) per transaction type.
    #[arg(long)]
    latency_histogram: bool,
    /// Make the database durable in DIR (a new or empty directory: the benchmark loads its own
    /// data). Commits are acknowledged by epoch group commit; latencies run to durability.
    #[arg(long, value_name = "DIR")]
    data_dir: Option<PathBuf>,
    /// Logging with --data-dir: logical (after-images; the default), physical (whole rows at
    /// their tuple ids), command (stored-procedure calls) or none.
    #[arg(long, value_name = "KIND", value_parser = parse_choice::<LogPolicy>)]
    #[serde(serialize_with = "opt_display")]
    log: Option<LogPolicy>,
    /// Log manager with --data-dir: epoch (SiloR's epoch group commit over --loggers parallel
    /// logs) or ermia (one log; a commit's end timestamp is its LSN, reserved by one atomic add).
    /// Default: ermia under ermia-si and ermia-ssi (with --data-dir), epoch otherwise.
    #[arg(long, value_name = "KIND", value_parser = parse_choice::<LogManagerKind>)]
    #[serde(serialize_with = "opt_display")]
    log_manager: Option<LogManagerKind>,
    /// Logger threads, each writing its own log files (log manager epoch).
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=64))]
    loggers: u64,
    /// fsync each group commit (always), or not (never: for measuring; not durable).
    #[arg(long, value_name = "WHEN", default_value = "always", value_parser = parse_choice::<FsyncPolicy>)]
    #[serde(serialize_with = "as_display")]
    fsync: FsyncPolicy,
    /// Longest time between group commits, in milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=10_000))]
    epoch_ms: u64,
    /// Size at which a logger (or ERMIA's log) starts a new file, in MiB.
    #[arg(long, value_name = "MIB", default_value_t = 64, value_parser = clap::value_parser!(u64).range(1..=1024))]
    log_file_mib: u64,
    /// Take a checkpoint every SECS seconds while the benchmark runs.
    #[arg(long, value_name = "SECS", value_parser = parse_duration)]
    checkpoint_interval: Option<f64>,
    /// Back the heap with 2 MiB transparent huge pages (mimalloc's large OS pages): fewer TLB
    /// misses on large tables. Reported in the fidelity block.
    #[arg(long, value_name = "BOOL", default_value_t = true, action = ArgAction::Set)]
    huge_pages: bool,
    /// Fault in this many MiB of heap before the load and keep freed memory (no purging back
    /// to the OS), as Silo's `--numa-memory` and ERMIA's `-node_memory_gb` pre-fault theirs:
    /// a growing database (TPC-C's inserts) then does not pay the kernel's page faults and
    /// page zeroing during the run. Reported in the fidelity block.
    #[arg(long, value_name = "MIB", default_value_t = 0, value_parser = clap::value_parser!(u64).range(0..=1 << 20))]
    prefault_mib: u64,
    /// Load even when the estimated size of the loaded tables exceeds the memory available
    /// (MemAvailable in /proc/meminfo); without it such a run is refused before loading.
    #[arg(long)]
    force: bool,
}

impl BenchArgs {
    /// `--isolation`, which `main` fills in before anything reads it.
    fn isolation(&self) -> Isolation {
        self.isolation.unwrap_or(Isolation::Serializable)
    }
}

/// `myriad bench ycsb`.
#[derive(Args, Debug, Clone, Serialize)]
struct YcsbArgs {
    /// Rows in usertable (DBx1000 uses 10M).
    #[arg(long, value_name = "N", default_value_t = 1_000_000, value_parser = clap::value_parser!(u64).range(1..=i64::MAX as u64))]
    rows: u64,
    /// Operations per transaction.
    #[arg(long, value_name = "N", default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    ops: u64,
    /// Read/update mix per operation: read-only 100/0, read-intensive 80/20, update-intensive 20/80.
    #[arg(long, value_enum, default_value_t = Mix::ReadIntensive)]
    mix: Mix,
    /// Percentage of operations that are updates (0..=100), instead of --mix (thesis
    /// Fig. 5.13 sweeps it).
    #[arg(long, value_name = "P", conflicts_with = "mix", value_parser = clap::value_parser!(u32).range(0..=100))]
    update_pct: Option<u32>,
    /// Zipfian skew θ in [0, 1); 0 is uniform (DBx1000's default is 0.6).
    #[arg(long, value_name = "F", default_value_t = 0.6, allow_negative_numbers = true, value_parser = parse_theta)]
    theta: f64,
    /// Key generator: gray (DBx1000/CCBench, hot keys are the low keys) or ycsb-scrambled.
    #[arg(long, value_enum, default_value_t = KeyDist::Gray)]
    key_dist: KeyDist,
    /// Row layout: int64x10 (key + --attrs INT attributes) or bytes100x10 (key + --attrs
    /// BYTES(100) attributes); the names say the default of ten attributes.
    #[arg(long, value_enum, default_value_t = RowLayout::Int64x10)]
    row_layout: RowLayout,
    /// Attributes per row besides the key (1..=100; the thesis's §5.7.3 has 10 and 100).
    #[arg(long, value_name = "N", default_value_t = ycsb::ATTRS as u64, value_parser = clap::value_parser!(u64).range(1..=100))]
    attrs: u64,
    /// Attributes read per read operation (1..=--attrs).
    #[arg(long, value_name = "N", default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=100))]
    attrs_read: u64,
    /// Attributes set per update operation (1..=--attrs).
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=100))]
    attrs_modified: u64,
    /// Secondary indexes (0..=--attrs): index i is an ordered, non-unique index on attribute
    /// `field{i}`. Operations still go by primary key; an update that changes an indexed
    /// attribute adds that index's entry (thesis §5.7.5).
    #[arg(long, value_name = "N", default_value_t = 0, value_parser = clap::value_parser!(u64).range(0..=100))]
    secondary_indexes: u64,
    /// Keys within a transaction are distinct (a repeated draw is redrawn).
    #[arg(long, value_name = "BOOL", default_value_t = true, action = ArgAction::Set)]
    distinct_keys: bool,
    /// Interleave the index and version lookups of a transaction's keys before running it
    /// (`Transaction::prefetch`): overlaps their cache misses. Reported in the fidelity block.
    #[arg(long, value_name = "BOOL", default_value_t = true, action = ArgAction::Set)]
    prefetch: bool,
    /// Run each transaction as a stored procedure (`ycsb_txn`, written in the SQL procedure
    /// language and interpreted) instead of native Rust calls; int64x10 layout only.
    #[arg(long)]
    as_procedure: bool,
    /// Heterogeneous workload (thesis §5.7.2): this many more threads run transactions of
    /// `--ops` reads only, reported as `long_read_txn`, beside the `--threads` running `--mix`.
    #[arg(long, value_name = "N", default_value_t = 0, value_parser = clap::value_parser!(u64).range(0..=256))]
    read_only_threads: u64,
    /// Declare the `--read-only-threads` transactions READ ONLY (a snapshot, no validation
    /// and no read tracking), as the thesis's "with READ ONLY" runs do.
    #[arg(long, value_name = "BOOL", default_value_t = true, action = ArgAction::Set)]
    read_only_hint: bool,
    /// Engine: myriad, or a baseline a user would pick instead (sqlite, redb, fjall; builds
    /// with the cargo feature `baselines` only) running the same transactions on the same
    /// rows. A baseline refuses Myriad's design and logging flags.
    #[arg(long, value_enum, default_value_t = Engine::Myriad)]
    engine: Engine,
    #[command(flatten)]
    #[serde(flatten)]
    bench: BenchArgs,
}

/// `myriad bench tpcc`.
#[derive(Args, Debug, Clone, Serialize)]
struct TpccArgs {
    /// Warehouses (the contention knob: terminals share a home warehouse when there are
    /// fewer warehouses than threads).
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(i64).range(1..=100_000))]
    warehouses: i64,
    /// Percentage of New-Order lines supplied by another warehouse and of Payments for another
    /// warehouse's customer (both set to P); 0 disables cross-warehouse transactions. Default:
    /// the standard 1% and 15%.
    #[arg(long, value_name = "P", value_parser = parse_pct)]
    remote_pct: Option<f64>,
    /// Thesis §4.7.1: New-Order, Payment and Delivery without INSERT and DELETE (the database
    /// does not grow).
    #[arg(long)]
    no_inserts: bool,
    /// Extra threads that repeatedly run StockScan (thesis §5.7.1: a read-only scan of STOCK
    /// counting each warehouse's items); its latency is reported as `stock_scan`, and its
    /// commits are not counted in the throughput.
    #[arg(long, value_name = "N", default_value_t = 0, value_parser = clap::value_parser!(u64).range(0..=1024))]
    stock_scan_threads: u64,
    /// After the run, check TPC-C consistency conditions 1–4 (clause 3.3.2); exit 1 on a
    /// violation.
    #[arg(long)]
    check: bool,
    #[command(flatten)]
    #[serde(flatten)]
    bench: BenchArgs,
}

/// `myriad bench smallbank`.
#[derive(Args, Debug, Clone, Serialize)]
struct SmallbankArgs {
    /// Customers, i.e. rows in each of ACCOUNTS, SAVINGS and CHECKING (thesis Table 3.2: 1000).
    #[arg(long, value_name = "N", default_value_t = 1000, value_parser = clap::value_parser!(u64).range(2..=smallbank::MAX_ACCOUNTS))]
    accounts: u64,
    /// Zipfian skew θ in [0, 1) of the customers the transactions pick; 0 is uniform.
    #[arg(long, value_name = "F", default_value_t = 0.5, allow_negative_numbers = true, value_parser = parse_theta)]
    theta: f64,
    /// After the run, check that the money in SAVINGS and CHECKING changed by exactly what the
    /// committed transactions deposited and withdrew; exit 1 if not.
    #[arg(long)]
    check: bool,
    #[command(flatten)]
    #[serde(flatten)]
    bench: BenchArgs,
}

/// `myriad bench tatp`.
#[derive(Args, Debug, Clone, Serialize)]
struct TatpArgs {
    /// Subscribers (rows in SUBSCRIBER; about 2.5, 2.5 and 3.75 times as many in ACCESS_INFO,
    /// SPECIAL_FACILITY and CALL_FORWARDING).
    #[arg(long, value_name = "N", default_value_t = 100_000, value_parser = clap::value_parser!(u64).range(1..=tatp::MAX_SUBSCRIBERS))]
    subscribers: u64,
    /// After the run, check that CALL_FORWARDING holds the loaded rows plus the committed
    /// inserts minus the committed deletes; exit 1 if not.
    #[arg(long)]
    check: bool,
    #[command(flatten)]
    #[serde(flatten)]
    bench: BenchArgs,
}

/// Least time workers get to finish their last transaction after the measured interval
/// before the run is declared stalled (see `bench::RunOptions::stop_grace`).
const STOP_GRACE_MIN_S: f64 = 10.0;

fn default_threads() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}

fn opt_display<T: Display, S: Serializer>(v: &Option<T>, s: S) -> Result<S::Ok, S::Error> {
    match v {
        Some(v) => s.serialize_str(&v.to_string()),
        None => s.serialize_none(),
    }
}

fn as_display<T: Display, S: Serializer>(v: &T, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(v)
}

/// Parses an engine choice with its own `FromStr` (whose error lists the choices).
fn parse_choice<T: FromStr<Err = Error>>(s: &str) -> Result<T, String> {
    s.parse().map_err(|e: Error| e.to_string())
}

fn parse_threads(s: &str) -> Result<usize, String> {
    const MAX: usize = 1024;
    match s.parse::<usize>() {
        Ok(n) if (1..=MAX).contains(&n) => Ok(n),
        Ok(n) => Err(format!("{n} is not in 1..={MAX}")),
        Err(e) => Err(e.to_string()),
    }
}

fn parse_seconds(s: &str, min_exclusive: bool) -> Result<f64, String> {
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

fn parse_duration(s: &str) -> Result<f64, String> {
    parse_seconds(s, true)
}

fn parse_warmup(s: &str) -> Result<f64, String> {
    parse_seconds(s, false)
}

fn parse_pct(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(x) if (0.0..=100.0).contains(&x) => Ok(x),
        Ok(_) => Err(format!("must be a percentage in [0, 100], got {s}")),
        Err(e) => Err(e.to_string()),
    }
}

fn parse_theta(s: &str) -> Result<f64, String> {
    let x: f64 = s.parse().map_err(|e| format!("{e}"))?;
    if (0.0..1.0).contains(&x) {
        Ok(x)
    } else {
        Err(format!(
            "θ must be in [0, 1), got {s} (at θ ≥ 1 the Zipf exponent 1/(1−θ) is undefined)"
        ))
    }
}

fn main() -> ExitCode {
    restore_sigpipe();
    let mut cli = Cli::parse();
    if let Command::Bench { workload } = &mut cli.command {
        let b = workload.bench_args_mut();
        b.isolation = Some(isolation_or_strongest(b.isolation, b.protocol));
        set_huge_pages(b.huge_pages);
        // Pre-faulting more than there is would fail the way an oversized load does.
        fits_in_memory(
            footprint::Estimate {
                bytes: b.prefault_mib << 20,
                from: format!("--prefault-mib {}", b.prefault_mib),
            },
            b,
        );
        prefault(b.prefault_mib);
    }
    match cli.command {
        Command::Shell {
            protocol,
            isolation,
            data_dir,
        } => shell::run(
            protocol,
            isolation_or_strongest(isolation, protocol),
            data_dir.as_deref(),
        ),
        Command::Explain { files, dot } => explain(&files, dot),
        Command::IsolationTest(a) => isolation::run(a),
        Command::Experiment(a) => experiment::run(a),
        Command::Recover {
            dir,
            json,
            recovery,
            threads,
            verify,
        } => recover(&dir, json.as_deref(), recovery, threads, verify),
        Command::Check {
            workload:
                CheckWorkload::Tpcc {
                    data_dir,
                    no_inserts,
                },
        } => check_tpcc(&data_dir, no_inserts),
        Command::Log {
            command: LogCommand::Inspect { dir },
        } => log_inspect(&dir),
        Command::Bench { workload } => match workload {
            BenchWorkload::Ycsb(a) => bench_ycsb(a),
            BenchWorkload::Tpcc(a) => bench_tpcc(a),
            BenchWorkload::Smallbank(a) => bench_smallbank(a),
            BenchWorkload::Tatp(a) => bench_tatp(a),
        },
    }
}

/// Gives SIGPIPE back its default action (terminate, silently), which the Rust runtime sets to
/// "ignore" before `main`. With it ignored, writing to a closed pipe (`myriad log inspect D |
/// head -1`) returns `BrokenPipe`, and `println!` panics on that with a backtrace. Restoring
/// the default makes every writer (the reports, the shell, isolation-test, progress bars on
/// stderr) stop the way `cat` or `grep` do, without wrapping each `print!` in a check. A
/// process ended this way skips its destructors: a durable database is then left as after a
/// crash (recovery's job), and a `--json` report is written before the human one, so it is
/// complete by then.
fn restore_sigpipe() {
    #[cfg(unix)]
    // SAFETY: installs the default disposition; no handler runs, single-threaded here.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

/// Asks mimalloc to back the memory it obtains from now on with 2 MiB pages (on Linux:
/// `madvise(MADV_HUGEPAGE)`, honoured when transparent huge pages are `always` or `madvise`).
/// Called once, before any worker thread starts (`mi_option_set` is not thread-safe).
fn set_huge_pages(on: bool) {
    // SAFETY: plain option store; single-threaded at this point.
    unsafe {
        libmimalloc_sys::mi_option_set(libmimalloc_sys::mi_option_large_os_pages, on as _);
    }
}

/// mimalloc's `purge_delay` option: its position in mimalloc v3's `mi_option_t`, which the
/// Rust bindings do not name (`libmimalloc-sys` 0.1.49 builds v3).
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// `--prefault-mib`: turns purging off, then allocates `mib` MiB in 1 MiB blocks, writes a
/// byte to every 4 KiB page of each and frees them all. The allocator keeps the faulted-in
/// pages in its arenas and hands them out again, to every thread. Called once, before any
/// worker thread starts.
fn prefault(mib: u64) {
    if mib == 0 {
        return;
    }
    // SAFETY: plain option store; single-threaded at this point.
    unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, -1) };
    let blocks: Vec<Vec<u8>> = (0..mib)
        .map(|_| {
            let mut b = vec![0u8; 1 << 20];
            for i in (0..b.len()).step_by(4096) {
                // A volatile write, so the pages are touched even though nothing reads them.
                // SAFETY: in bounds of `b`.
                unsafe { std::ptr::write_volatile(b.as_mut_ptr().add(i), 1) };
            }
            b
        })
        .collect();
    drop(blocks);
}

/// The isolation level to run at: the one given, else the strongest `protocol` offers (so `--protocol
/// si` alone runs, at `si`). A default below serializable is said on stderr, so a weaker run is
/// never mistaken for a serializable one. A protocol this build lacks gets serializable here
/// and its "not supported" error when the database opens.
pub(crate) fn isolation_or_strongest(given: Option<Isolation>, protocol: Protocol) -> Isolation {
    if let Some(i) = given {
        return i;
    }
    let level = Config::strongest_isolation(protocol).unwrap_or(Isolation::Serializable);
    if level != Isolation::Serializable {
        eprintln!(
            "myriad: isolation level {level}, the strongest protocol {protocol} offers \
             (--isolation chooses another)"
        );
    }
    level
}

/// A `--data-dir` that exists must be a directory: otherwise opening it would fail with the
/// OS's bare "File exists" or "Not a directory".
pub(crate) fn check_data_dir(dir: &std::path::Path) -> Result<(), String> {
    match std::fs::metadata(dir) {
        Ok(m) if !m.is_dir() => Err(format!(
            "--data-dir {}: not a directory (a file is there; give a new or existing directory)",
            dir.display()
        )),
        _ => Ok(()),
    }
}

/// A usage error found after parsing: clap's format and exit code (2).
fn usage_error(msg: String) -> ! {
    Cli::command().error(ErrorKind::ValueValidation, msg).exit()
}

fn fatal(what: &str, e: impl Display) -> ExitCode {
    eprintln!("myriad: error: {what}: {e}");
    ExitCode::from(1)
}

/// Opens the database; configurations the engine rejects are usage errors (exit 2).
fn open(b: &BenchArgs) -> Result<Database, ExitCode> {
    let mut config = Config::new()
        .protocol(b.protocol)
        .version_storage(b.storage.unwrap_or(b.protocol.natural_storage()))
        .isolation(b.isolation())
        .gc(b.gc)
        .gc_interval_txns(b.gc_interval)
        .gc_threads(b.gc_threads as usize)
        .memory_spaces(b.memory_spaces as usize)
        .index_pointers(b.index_pointers)
        .non_inline(b.non_inline)
        .commit_dependencies(b.commit_deps)
        .loggers(b.loggers as usize)
        .log_manager(b.log_manager.unwrap_or(if b.data_dir.is_some() {
            b.protocol.natural_log_manager()
        } else {
            LogManagerKind::Epoch
        }))
        .fsync(b.fsync)
        .epoch_interval(Duration::from_millis(b.epoch_ms))
        .log_file_bytes(b.log_file_mib << 20);
    if let Some(dir) = &b.data_dir {
        config = config.data_dir(dir);
    }
    if let Some(l) = b.log {
        config = config.log(l);
    }
    // One transaction-table slot per worker at least.
    if b.threads > 256 {
        config = config.max_concurrent_txns(b.threads);
    }
    Database::open(config).map_err(|e| match e {
        Error::Unsupported(_) | Error::InvalidConfig(_) => {
            eprintln!("myriad: {e}");
            ExitCode::from(2)
        }
        e => fatal("opening the database", e),
    })
}

/// `myriad recover DIR`.
fn recover(
    dir: &std::path::Path,
    json: Option<&std::path::Path>,
    scheme: RecoveryScheme,
    threads: Option<usize>,
    verify: bool,
) -> ExitCode {
    let t = Instant::now();
    // `recover` never creates a database: a missing or empty directory is an error.
    let mut config = Config::new()
        .data_dir(dir)
        .recovery(scheme)
        .create_if_missing(false);
    if let Some(n) = threads {
        config = config.recovery_threads(n);
    }
    let what = if verify { "verifying" } else { "recovering" };
    let opened = if verify {
        Database::verify(config).map(|r| (None, r))
    } else {
        Database::open(config).and_then(|db| {
            let r = db
                .recovery_report()
                .cloned()
                .ok_or_else(|| Error::InvalidConfig("no recovery report".into()))?;
            Ok((Some(db), r))
        })
    };
    let (db, r) = match opened {
        Ok(x) => x,
        Err(e @ (Error::InvalidConfig(_) | Error::Unsupported(_))) => {
            eprintln!("myriad: {e}");
            return ExitCode::from(2);
        }
        Err(e) => return fatal(&format!("{what} {}", dir.display()), e),
    };
    let open_s = t.elapsed().as_secs_f64();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!(
        "{} {} ({}, {} thread{})",
        if verify {
            "verified (nothing written)"
        } else {
            "recovered"
        },
        dir.display(),
        r.scheme,
        r.threads,
        if r.threads == 1 { "" } else { "s" }
    );
    println!(
        "  checkpoint        {}",
        r.checkpoint_ts.map_or("none".into(), |t| format!(
            "ts {t}, {} rows",
            report::thousands(r.checkpoint_rows)
        ))
    );
    println!("  persistent epoch  {}", r.persistent_epoch);
    if r.durable_lsn > 0 {
        println!(
            "  durable LSN       {} (ERMIA log; {} skip records)",
            r.durable_lsn,
            report::thousands(r.skip_records)
        );
    }
    println!(
        "  log               {} files, {}, {} records: {} replayed ({} procedure calls, {} physical), {} past the durable point (never acknowledged)",
        r.log_files,
        report::bytes(r.log_bytes),
        report::thousands(r.log_records),
        report::thousands(r.records_replayed),
        report::thousands(r.calls_replayed),
        report::thousands(r.physical_replayed),
        report::thousands(r.records_not_durable)
    );
    for d in &r.dropped {
        println!("  dropped tail      {d}");
    }
    for n in &r.notes {
        println!("  note              {n}");
    }
    if let Some(db) = &db {
        if let Some(state) = bench_load_state(db) {
            println!("  benchmark load    {state}");
        }
    }
    println!(
        "  database          {} tables, {} rows",
        r.tables,
        report::thousands(r.rows)
    );
    if r.scheme == "physical" {
        println!("  phases (ms)       checkpoint load (rows at their tuple ids) {:.1}, log load {:.1}, replay {:.1}, index build {:.1}, checkpoint write {:.1}; total {:.1} (open {:.1})",
            ms(r.checkpoint_load), ms(r.log_load), ms(r.replay), ms(r.index_build), ms(r.checkpoint_write), ms(r.total()), open_s * 1e3);
    } else {
        println!("  phases (ms)       checkpoint load (rows and indexes) {:.1}, log load {:.1}, replay {:.1}, checkpoint write {:.1}; total {:.1} (open {:.1})",
            ms(r.checkpoint_load), ms(r.log_load), ms(r.replay), ms(r.checkpoint_write), ms(r.total()), open_s * 1e3);
    }
    if let Some(path) = json {
        let v = serde_json::json!({
            "dir": dir.display().to_string(),
            "scheme": r.scheme,
            "threads": r.threads,
            "checkpoint_ts": r.checkpoint_ts,
            "checkpoint_rows": r.checkpoint_rows,
            "persistent_epoch": r.persistent_epoch,
            "durable_lsn": r.durable_lsn,
            "skip_records": r.skip_records,
            "log_files": r.log_files,
            "log_bytes": r.log_bytes,
            "log_records": r.log_records,
            "records_replayed": r.records_replayed,
            "calls_replayed": r.calls_replayed,
            "physical_replayed": r.physical_replayed,
            "records_not_durable": r.records_not_durable,
            "bytes_dropped": r.bytes_dropped,
            "dropped": r.dropped,
            "tables": r.tables,
            "rows": r.rows,
            "ms": {
                "checkpoint_load": ms(r.checkpoint_load),
                "log_load": ms(r.log_load),
                "replay": ms(r.replay),
                "index_build": ms(r.index_build),
                "checkpoint_write": ms(r.checkpoint_write),
                "total": ms(r.total()),
            },
        });
        let text = serde_json::to_string_pretty(&v).unwrap_or_default() + "\n";
        if let Err(e) = std::fs::write(path, text) {
            return fatal(&format!("writing {}", path.display()), e);
        }
    }
    ExitCode::SUCCESS
}

/// `myriad check tpcc --data-dir DIR`.
fn check_tpcc(dir: &std::path::Path, no_inserts: bool) -> ExitCode {
    let db = match Database::open(Config::new().data_dir(dir).create_if_missing(false)) {
        Ok(db) => db,
        Err(e) => return fatal(&format!("recovering {}", dir.display()), e),
    };
    if let Some(state) = bench_load_state(&db) {
        if state != LOAD_COMPLETE {
            return fatal("TPC-C check", format!("benchmark load {state}"));
        }
    }
    let tables = match tpcc::Tables::lookup(&db) {
        Ok(t) => t,
        Err(e) => return fatal("finding the TPC-C tables", e),
    };
    match tpcc::check_tables(&db, &tables, no_inserts) {
        Ok(bad) if bad.is_empty() => {
            println!(
                "TPC-C consistency conditions 1-4 hold{} ({} recovered rows)",
                if no_inserts {
                    " (2 not checked: --no-inserts)"
                } else {
                    ""
                },
                db.recovery_report().map_or(0, |r| r.rows)
            );
            ExitCode::SUCCESS
        }
        Ok(bad) => {
            for b in &bad {
                eprintln!("violation: {b}");
            }
            fatal("TPC-C check", format!("{} violation(s)", bad.len()))
        }
        Err(e) => fatal("checking", e),
    }
}

/// `myriad log inspect DIR`.
fn log_inspect(dir: &std::path::Path) -> ExitCode {
    let info = match myriad::recovery::inspect::inspect(dir) {
        Ok(i) => i,
        Err(e) => return fatal(&format!("inspecting {}", dir.display()), e),
    };
    match (info.persistent_epoch, info.durable_lsn) {
        (None, None) => println!("persistent epoch  none (nothing acknowledged yet)"),
        (pe, dl) => {
            if let Some(e) = pe {
                println!("persistent epoch  {e}");
            }
            if let Some(l) = dl {
                println!("durable LSN       {l} (ERMIA log)");
            }
        }
    }
    match &info.checkpoint {
        Some(c) => {
            println!("checkpoint        ts {} in {}", c.ts, c.dir.display());
            for (t, rows) in &c.tables {
                println!("  {t:<20} {} rows", report::thousands(*rows));
            }
        }
        None => println!("checkpoint        none"),
    }
    println!(
        "{:<41} {:>12} {:>8} {:>10} {:>7} {:>10} {:>10} {:>27}  checksums",
        "log file", "bytes", "blocks", "records", "skips", "calls", "physical", "epochs or LSNs"
    );
    let mut damaged = false;
    for f in &info.files {
        let name = f
            .path
            .file_name()
            .map_or(String::new(), |n| n.to_string_lossy().to_string());
        let epochs = match (f.epochs, f.lsns) {
            (Some((a, b)), _) => format!("{a}..{b}"),
            (None, Some((a, b))) => format!("lsn {a}..{b}"),
            (None, None) => "-".into(),
        };
        let status = match &f.damage {
            None => "ok".to_string(),
            Some(why) => {
                damaged = true;
                format!("damaged at byte {}: {why}", f.valid_bytes)
            }
        };
        println!(
            "{name:<41} {:>12} {:>8} {:>10} {:>7} {:>10} {:>10} {epochs:>27}  {status}{}",
            report::thousands(f.bytes),
            f.blocks,
            report::thousands(f.records),
            report::thousands(f.skips),
            report::thousands(f.calls),
            report::thousands(f.physical),
            if f.needed {
                ""
            } else {
                " (older than the checkpoint; unused)"
            }
        );
    }
    if damaged {
        println!("some files end in damaged bytes: a torn tail after the persistent epoch (or durable LSN) is dropped at recovery; damage before it makes recovery refuse to open");
    }
    if !info.problems.is_empty() {
        for p in &info.problems {
            eprintln!("problem: {p}");
        }
        return fatal(
            "inspecting",
            format!(
                "{} problem(s): recovery would refuse to open {}",
                info.problems.len(),
                dir.display()
            ),
        );
    }
    ExitCode::SUCCESS
}

/// The table a durable benchmark run marks its load in: `loading` before the first row,
/// `complete` once every row (and the checkpoint after them) is durable.
const LOAD_MARKER: &str = "myriad_bench_load";
const LOAD_COMPLETE: &str = "complete";

/// Marks the load of a durable run as `state` (creating the marker table first).
fn mark_load(db: &Database, state: &str) -> myriad::Result<()> {
    let mut s = myriad::sql::Session::new(db);
    if db.table(LOAD_MARKER).is_err() {
        s.execute(&format!(
            "CREATE TABLE {LOAD_MARKER} (id BIGINT PRIMARY KEY, state VARCHAR(16))"
        ))?;
        s.execute(&format!("INSERT INTO {LOAD_MARKER} VALUES (1, '{state}')"))?;
    } else {
        s.execute(&format!(
            "UPDATE {LOAD_MARKER} SET state = '{state}' WHERE id = 1"
        ))?;
    }
    Ok(())
}

/// What a recovered directory says of its benchmark load: `None` if it was not written by
/// a durable `myriad bench` run; else `complete`, or why the data is a partial load.
fn bench_load_state(db: &Database) -> Option<String> {
    db.table(LOAD_MARKER).ok()?;
    let out = myriad::sql::Session::new(db)
        .execute(&format!("SELECT state FROM {LOAD_MARKER} WHERE id = 1"))
        .ok()?;
    let state = out.iter().find_map(|o| match o {
        myriad::sql::Output::Rows { rows, .. } => rows.first().and_then(|r| match r.first() {
            Some(myriad::Value::Str(s)) => Some(s.clone()),
            _ => None,
        }),
        _ => None,
    });
    Some(match state.as_deref() {
        Some(LOAD_COMPLETE) => LOAD_COMPLETE.to_string(),
        _ => "incomplete: the run stopped while loading, so the tables hold part of the \
              initial data (its consistency conditions do not apply); load again"
            .to_string(),
    })
}

/// `myriad explain FILE...`: runs the files' statements in order on an empty in-memory
/// database (so the tables exist) and prints every procedure they define, in order.
fn explain(files: &[PathBuf], dot: bool) -> ExitCode {
    let db = match Database::open(Config::default()) {
        Ok(db) => db,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut s = myriad::sql::Session::new(&db);
    let mut out = String::new();
    for file in files {
        let run = |s: &mut myriad::sql::Session<'_>, out: &mut String| -> myriad::Result<()> {
            let text = std::fs::read_to_string(file)
                .map_err(|e| Error::InvalidConfig(format!("cannot read the file: {e}")))?;
            for o in s.execute(&text)? {
                if let myriad::sql::Output::Done(tag) = o {
                    if let Some(name) = tag.strip_prefix("CREATE PROCEDURE ") {
                        let p = db.procedure(name)?;
                        *out += &if dot { p.explain_dot() } else { p.explain() };
                        out.push('\n');
                    }
                }
            }
            Ok(())
        };
        if let Err(e) = run(&mut s, &mut out) {
            eprintln!("error: {}: {e}", file.display());
            return ExitCode::FAILURE;
        }
    }
    if out.is_empty() {
        eprintln!("error: no CREATE PROCEDURE in the files");
        return ExitCode::FAILURE;
    }
    print!("{out}");
    ExitCode::SUCCESS
}

fn bench_ycsb(a: YcsbArgs) -> ExitCode {
    let b = &a.bench;
    let params = ycsb::Params {
        rows: a.rows,
        ops: a.ops as usize,
        mix: a.mix,
        theta: a.theta,
        key_dist: a.key_dist,
        layout: a.row_layout,
        attrs: a.attrs as usize,
        update_pct: a.update_pct,
        attrs_read: a.attrs_read as usize,
        attrs_modified: a.attrs_modified as usize,
        secondary_indexes: a.secondary_indexes as usize,
        distinct_keys: a.distinct_keys,
        prefetch: a.prefetch,
        isolation: b.isolation(),
        as_procedure: a.as_procedure,
        threads: b.threads,
        read_only_threads: a.read_only_threads as usize,
        read_only_hint: a.read_only_hint,
    };
    if let Err(m) = params.validate() {
        usage_error(m);
    }
    fits_in_memory(
        footprint::ycsb(
            a.rows,
            a.attrs,
            a.row_layout == RowLayout::Bytes100x10,
            a.secondary_indexes,
        ),
        b,
    );
    let config = serde_json::to_value(&a).unwrap_or_default();
    if a.engine != Engine::Myriad {
        return bench_ycsb_baseline(&a, params, config);
    }
    bench_workload("ycsb", config, b, false, |db| Ycsb::create(db, params))
}

/// `myriad bench ycsb --engine sqlite|redb|fjall`: refuses what the baseline cannot honour
/// (exit 2), then runs it (`baselines`).
fn bench_ycsb_baseline(a: &YcsbArgs, params: ycsb::Params, config: serde_json::Value) -> ExitCode {
    let b = &a.bench;
    if let Err(m) = baselines::check_available(a.engine) {
        usage_error(m);
    }
    let refused = baselines::refuse_myriad_flags(
        a.engine,
        &[
            ("--protocol", b.protocol != Protocol::Mvocc),
            ("--storage", b.storage.is_some()),
            ("--isolation", b.isolation() != Isolation::Serializable),
            ("--commit-deps", !b.commit_deps),
            ("--gc", b.gc != GcPolicy::Txn),
            ("--gc-threads", b.gc_threads != 1),
            ("--gc-interval", b.gc_interval != 16),
            ("--memory-spaces", b.memory_spaces != 0),
            (
                "--index-pointers",
                b.index_pointers != IndexPointers::LogicalTid,
            ),
            ("--non-inline", b.non_inline != NonInline::Inline),
            ("--log", b.log.is_some()),
            ("--log-manager", b.log_manager.is_some()),
            ("--loggers", b.loggers != 1),
            ("--epoch-ms", b.epoch_ms != 10),
            ("--log-file-mib", b.log_file_mib != 64),
            ("--checkpoint-interval", b.checkpoint_interval.is_some()),
            ("--as-procedure", a.as_procedure),
            ("--secondary-indexes", a.secondary_indexes != 0),
        ],
    );
    if let Err(m) = refused {
        usage_error(m);
    }
    #[cfg(feature = "baselines")]
    {
        baselines::bench_ycsb(
            a.engine,
            params,
            baselines::BaselineArgs {
                warmup_s: b.warmup,
                duration_s: b.duration,
                seed: b.seed,
                data_dir: b.data_dir.clone(),
                fsync_always: b.fsync == FsyncPolicy::Always,
                json: b.json.clone(),
                latency_histogram: b.latency_histogram,
                huge_pages: b.huge_pages,
                prefault_mib: b.prefault_mib,
                config,
            },
        )
    }
    #[cfg(not(feature = "baselines"))]
    {
        // `check_available` refused every baseline above.
        let _ = (params, config);
        usage_error(format!("--engine {}: not in this build", a.engine.name()))
    }
}

fn bench_smallbank(a: SmallbankArgs) -> ExitCode {
    let b = &a.bench;
    let params = smallbank::Params {
        accounts: a.accounts,
        theta: a.theta,
        isolation: b.isolation(),
    };
    if let Err(m) = params.validate() {
        usage_error(m);
    }
    fits_in_memory(footprint::smallbank(a.accounts), b);
    let config = serde_json::to_value(&a).unwrap_or_default();
    bench_workload("smallbank", config, b, a.check, |db| {
        Smallbank::create(db, params)
    })
}

fn bench_tpcc(a: TpccArgs) -> ExitCode {
    let b = &a.bench;
    let params = tpcc::Params {
        warehouses: a.warehouses,
        scale: tpcc::Scale::standard(),
        remote_pct: a.remote_pct,
        no_inserts: a.no_inserts,
        isolation: b.isolation(),
    };
    fits_in_memory(footprint::tpcc(a.warehouses.unsigned_abs()), b);
    let config = serde_json::to_value(&a).unwrap_or_default();
    bench_workload("tpcc", config, b, a.check, |db| {
        Ok(TpccBench {
            t: Tpcc::create(db, params, b.seed)?,
            terminals: b.threads,
            scanners: a.stock_scan_threads as usize,
        })
    })
}

fn bench_tatp(a: TatpArgs) -> ExitCode {
    let b = &a.bench;
    let params = tatp::Params {
        subscribers: a.subscribers,
        isolation: b.isolation(),
    };
    if let Err(m) = params.validate() {
        usage_error(m);
    }
    fits_in_memory(footprint::tatp(a.subscribers), b);
    let config = serde_json::to_value(&a).unwrap_or_default();
    bench_workload("tatp", config, b, a.check, |db| Tatp::create(db, params))
}

/// Refuses (a usage error, exit 2) a load estimated not to fit in the available memory, unless
/// `--force`: loading it would end in a failed allocation after minutes of work.
fn fits_in_memory(e: footprint::Estimate, b: &BenchArgs) {
    if let Err(m) = footprint::check(&e, footprint::mem_available(), b.force) {
        usage_error(m);
    }
}

/// Every workload's run: opens the database, creates the workload (`create`), loads it with a
/// progress bar, runs it, optionally checks its invariant, and prints (and with `--json`
/// writes) the report. Exit 1 on a fatal error or a failed check.
fn bench_workload<W: Workload>(
    name: &str,
    config: serde_json::Value,
    b: &BenchArgs,
    check: bool,
    create: impl FnOnce(&Database) -> myriad::Result<W>,
) -> ExitCode {
    // Create the report file first, so an unwritable path fails before the load and the run.
    let json_out = match &b.json {
        Some(path) => match JsonOut::create(path) {
            Ok(f) => Some(f),
            Err(e) => usage_error(format!("--json {}: {e}", path.display())),
        },
        None => None,
    };
    if let Some(dir) = &b.data_dir {
        require_empty_data_dir(dir);
    }
    let db = match open(b) {
        Ok(db) => db,
        Err(code) => return code,
    };
    let progress = progress_enabled(b.no_progress);

    let load_start = Instant::now();
    let w = match create(&db) {
        Ok(w) => w,
        // A schema the chosen design cannot hold (a hash secondary index under `logical-pk`):
        // a configuration this build does not support, exit 2 like the others.
        Err(e @ Error::Unsupported(_)) => {
            eprintln!("myriad: creating the {name} tables: {e}");
            return ExitCode::from(2);
        }
        Err(e) => return fatal(&format!("creating the {name} tables"), e),
    };
    if b.data_dir.is_some() {
        if let Err(e) = mark_load(&db, "loading") {
            return fatal("marking the load", e);
        }
    }
    let (units, unit) = w.load_units();
    let pb = progress_bar(
        progress,
        units,
        &format!("{{prefix:>7}} [{{wide_bar}}] {{human_pos}}/{{human_len}} {unit}, eta {{eta}}"),
    );
    pb.set_prefix("load");
    let loaded = w.load(&db, b.threads, b.seed, Some(&pb));
    pb.finish_and_clear();
    if let Err(e) = loaded {
        return fatal(&format!("loading the {name} tables"), e);
    }
    // A durable run starts from a checkpoint of the loaded data, so its log (and a recovery
    // of it) holds the run's commits only. Counted in the load time.
    if b.data_dir.is_some() {
        if let Err(e) = db.checkpoint() {
            return fatal("checkpointing the loaded data", e);
        }
        if let Err(e) = mark_load(&db, LOAD_COMPLETE) {
            return fatal("marking the load", e);
        }
    }
    let load_s = load_start.elapsed().as_secs_f64();

    let txn_types = w.txn_types();
    let opts = RunOptions {
        threads: b.threads + w.extra_threads(),
        warmup: Duration::from_secs_f64(b.warmup),
        duration: Duration::from_secs_f64(b.duration),
        progress,
        txn_types,
        stop_grace: Duration::from_secs_f64(b.duration.max(STOP_GRACE_MIN_S)),
    };
    let log0 = db.log_stats();
    let (c0, t0) = (db.stats().committed, Instant::now());
    let ckpt = Checkpointer::default();
    let run = std::thread::scope(|s| {
        if let Some(secs) = b.checkpoint_interval {
            let (ckpt, db) = (&ckpt, &db);
            s.spawn(move || ckpt.run(db, Duration::from_secs_f64(secs)));
        }
        let r = bench::run(&db, &opts, |i| w.worker(i, b.seed));
        ckpt.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        r
    });
    let run = match run {
        Ok(r) => r,
        Err(e) => return fatal(&format!("running {name}"), e),
    };
    if let Some(e) = ckpt.error.lock().map(|mut e| e.take()).unwrap_or(None) {
        return fatal("taking a checkpoint", e);
    }
    let end = db.stats();
    let chains = db.chain_stats(64);
    let mut results = w.results();
    if let (Some(l0), Some(l1)) = (log0, db.log_stats()) {
        // Over the whole run (warm-up included), per committed transaction of any kind.
        let bytes = l1.bytes_written - l0.bytes_written;
        let secs = t0.elapsed().as_secs_f64().max(1e-9);
        let txns = db.stats().committed - c0;
        results.push((
            "log",
            serde_json::json!({
                "bytes": bytes,
                "bytes_per_s": (bytes as f64 / secs) as u64,
                "bytes_per_txn": if txns > 0 { (bytes as f64 / txns as f64 * 10.0).round() / 10.0 } else { 0.0 },
                "fsyncs": l1.fsyncs - l0.fsyncs,
                "group_commits": l1.rounds - l0.rounds,
                "checkpoints": ckpt.taken.load(std::sync::atomic::Ordering::Relaxed),
                "checkpoint_ms": ckpt.ms.load(std::sync::atomic::Ordering::Relaxed),
            }),
        ));
    }
    let mut failed_check = None;
    if check {
        match w.check(&db) {
            Some(Ok(Ok(m))) => results.push(("check", serde_json::json!(format!("ok: {m}")))),
            Some(Ok(Err(m))) => {
                results.push(("check", serde_json::json!(format!("FAILED: {m}"))));
                failed_check = Some(m);
            }
            Some(Err(e)) => return fatal("checking the invariant", e),
            None => {}
        }
    }
    let report = Report::new(ReportInput {
        workload: name,
        config,
        seed: b.seed,
        threads: b.threads,
        warmup_s: b.warmup,
        load_s,
        txn_types,
        run: &run,
        end,
        chains,
        results,
        fidelity: Fidelity::new(
            w.fidelity(),
            db.config(),
            b.seed,
            b.huge_pages,
            b.prefault_mib,
        ),
    });
    emit_report(&report, json_out, b.latency_histogram, failed_check, name)
}

/// A benchmark's `--data-dir` must be a new or empty directory (usage error, exit 2).
fn require_empty_data_dir(dir: &std::path::Path) {
    if let Err(m) = check_data_dir(dir) {
        usage_error(m);
    }
    if std::fs::read_dir(dir).is_ok_and(|mut d| d.next().is_some()) {
        usage_error(format!(
            "--data-dir {}: not empty; the benchmark loads its own data into a new or empty \
             directory",
            dir.display()
        ));
    }
}

/// Writes the report (to `--json`'s file first, then the terminal summary); exit 1 if
/// `failed_check` says the workload's check failed.
fn emit_report(
    report: &Report,
    json_out: Option<JsonOut>,
    latency_histogram: bool,
    failed_check: Option<String>,
    name: &str,
) -> ExitCode {
    // The JSON report first: printing to a closed pipe ends the process (`restore_sigpipe`).
    if let Some(out) = json_out {
        let text = match serde_json::to_string_pretty(&report) {
            Ok(t) => t + "\n",
            Err(e) => return fatal("serializing the report", e),
        };
        let path = out.path.clone();
        if let Err(e) = out.finish(&text) {
            return fatal(&format!("writing {}", path.display()), e);
        }
    }
    print!("{}", report.human(latency_histogram));
    match failed_check {
        Some(m) => fatal(&format!("{name} check failed"), m),
        None => ExitCode::SUCCESS,
    }
}

/// `--checkpoint-interval`: takes checkpoints while the benchmark runs.
#[derive(Default)]
struct Checkpointer {
    stop: std::sync::atomic::AtomicBool,
    taken: std::sync::atomic::AtomicU64,
    ms: std::sync::atomic::AtomicU64,
    error: std::sync::Mutex<Option<Error>>,
}

impl Checkpointer {
    fn run(&self, db: &Database, every: Duration) {
        use std::sync::atomic::Ordering::{Relaxed, SeqCst};
        let mut next = Instant::now() + every;
        while !self.stop.load(SeqCst) {
            if Instant::now() < next {
                std::thread::sleep(Duration::from_millis(10));
                continue;
            }
            match db.checkpoint() {
                Ok(info) => {
                    self.taken.fetch_add(1, Relaxed);
                    self.ms.fetch_add(info.elapsed.as_millis() as u64, Relaxed);
                }
                Err(e) => {
                    if let Ok(mut g) = self.error.lock() {
                        *g = Some(e);
                    }
                    return;
                }
            }
            next = Instant::now() + every;
        }
    }
}

/// The `--json` destination. The report goes to `PATH.partial`, created before the load (so an
/// unwritable path fails before any work) and renamed to PATH once complete: a run that fails
/// never leaves an empty or truncated PATH, and never clobbers an earlier report there. A
/// failure we handle removes the partial file; a killed process leaves it, under that name.
struct JsonOut {
    path: PathBuf,
    partial: PathBuf,
    file: Option<std::fs::File>,
}

impl JsonOut {
    fn create(path: &std::path::Path) -> std::io::Result<JsonOut> {
        let mut partial = path.as_os_str().to_owned();
        partial.push(".partial");
        let partial = PathBuf::from(partial);
        let file = std::fs::File::create(&partial)?;
        Ok(JsonOut {
            path: path.to_path_buf(),
            partial,
            file: Some(file),
        })
    }

    fn finish(mut self, text: &str) -> std::io::Result<()> {
        if let Some(mut f) = self.file.take() {
            f.write_all(text.as_bytes())?;
            f.sync_data()?;
        }
        std::fs::rename(&self.partial, &self.path)
    }
}

impl Drop for JsonOut {
    fn drop(&mut self) {
        // After a successful rename there is nothing left to remove.
        let _ = std::fs::remove_file(&self.partial);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cli_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn defaults_parse_and_serialize_every_flag() {
        let cli = Cli::try_parse_from(["myriad", "bench", "ycsb"]).unwrap();
        let Command::Bench {
            workload: BenchWorkload::Ycsb(a),
        } = cli.command
        else {
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
            "memory_spaces",
            "commit_deps",
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
