//! `myriad experiment NAME`: the design-space sweeps of thesis chapter 5 (§5.7.3–5.7.5), scaled
//! from the thesis's 40 threads and 10 M rows to this machine.
//!
//! An experiment is a list of panels; a panel is a list of series; a series is a list of
//! points, each one `myriad bench` command line. Every distinct command runs once per round,
//! as a child process of this binary (so each run starts from a fresh heap, and its memory
//! figures are its own), with `--json` into `OUT/NAME-runs/`. Rounds interleave the
//! commands, so a round's ratios come from runs minutes apart at most; a point's figure is the
//! median over the rounds. The results go to `OUT/NAME.json` and `OUT/NAME.svg`.
//!
//! Every experiment of the issue runs; an experiment that runs without some of the thesis's
//! series says which (`Spec::partial`).

mod healing;
mod logging;
mod plot;
mod protocols;
mod recovery;
mod timestamps;
mod vdriver;

use crate::bench::{progress_bar, progress_enabled};
use clap::{Args, ValueEnum};
use serde_json::{json, Value as Json};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// `myriad experiment`.
#[derive(Args, Debug)]
pub struct ExperimentArgs {
    /// The experiment (thesis figure), `all` (every one this build supports) or `list`.
    #[arg(value_enum)]
    name: Name,
    /// A small version of each experiment (10,000 rows, 0.5 s runs, one round, fewer points),
    /// for tests and for trying the command: `all --quick` takes about 4.5 minutes on two cores.
    #[arg(long)]
    quick: bool,
    /// Directory for NAME.json, NAME.svg and the runs' reports (NAME-runs/).
    #[arg(long, value_name = "DIR", default_value = "experiments")]
    out: PathBuf,
    /// Rounds; the figure of a point is its median. Default 3 (1 with --quick).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=99))]
    runs: Option<u32>,
    /// Measured seconds per run. Default 5, 20 for the GC experiments' time series
    /// (0.5 and 2 with --quick).
    #[arg(long, value_name = "SECS", value_parser = crate::args::parse_duration)]
    duration: Option<f64>,
    /// YCSB rows (the thesis has 10 M). Default 1,000,000 (10,000 with --quick).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(100..=1_000_000_000))]
    rows: Option<u64>,
    /// Worker threads (the thesis has 40). Default: the number of CPUs.
    #[arg(long, value_name = "N", value_parser = crate::args::parse_threads)]
    threads: Option<usize>,
    /// Seed of every run.
    #[arg(long, value_name = "N", default_value_t = 42)]
    seed: u64,
    /// Never draw progress bars; print one line per run instead.
    #[arg(long)]
    no_progress: bool,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum Name {
    List,
    All,
    NonInline,
    ChainOrder,
    Footprint,
    AttrsModified,
    AttrsAccessed,
    MemorySpaces,
    StorageTpcc,
    GcTupleLevel,
    GcTupleVsTxn,
    IndexPointers,
    Configurations,
    ProtocolsScaling,
    ProtocolsContention,
    ProtocolsHeterogeneous,
    ProtocolsTpcc,
    HekatonScaling,
    HekatonIsolation,
    HekatonTatp,
    HekatonLongReaders,
    VdriverSpace,
    VdriverSiro,
    ErmiaTpcc,
    PomvccFragment,
    PomvccLogs,
    PacmanRecovery,
    CommandLogging,
    TransactionHealing,
    Baselines,
}

/// The settings every run of an experiment shares.
#[derive(Clone, Copy, Debug)]
struct Scale {
    quick: bool,
    rows: u64,
    threads: usize,
    /// Measured seconds of sweep runs and of time-series runs.
    duration: f64,
    series_duration: f64,
    warmup: f64,
    runs: u32,
    seed: u64,
}

/// The layers of a `RecoveryPhases` panel, bottom up: (series label, key of `myriad recover
/// --json`'s `ms`). Thesis Fig. 4.20's breakdown: log loading, PACMAN's analyses, the time
/// workers wait for a piece to be schedulable, and execution.
const RECOVERY_PHASES: [(&str, &str); 5] = [
    ("log loading", "log_load"),
    ("static analysis", "static_analysis"),
    ("dynamic analysis", "dynamic_analysis"),
    ("scheduling waits", "schedule_wait"),
    ("execution", "execution"),
];

/// What a panel plots.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Metric {
    /// The run's throughput, against the point's x.
    Throughput,
    /// Throughput per worker thread as a percentage of the series's first point's, in the
    /// same round (POMVCC Figs. 24 and 27: "the performance at 10 threads assumed as 100"),
    /// against the point's x; 100 at the first point, 100 at every point under linear
    /// scaling. The rounds' percentages are reduced to their median.
    ScalabilityPct,
    /// Throughput in each 1 s interval, against time (one run per series).
    ThroughputOverTime,
    /// Live version memory at each sample, against time.
    LiveMibOverTime,
    /// Memory-space lock acquisitions per committed transaction, against the point's x.
    SpaceLocksPerTxn,
    /// Mean StockScan latency (TPC-C), against the point's x.
    StockScanUs,
    /// Aborted attempts as a percentage of all attempts, against the point's x.
    AbortPct,
    /// Attempts aborted for a conflict (any reason but `user_abort`: a RAISE or a spec's
    /// rollback) as a percentage of all attempts, against the point's x.
    ConflictAbortPct,
    /// Share of worker time spent in abort-and-restart (`restart_time_pct`, thesis Fig.
    /// 3.9a), against the point's x.
    RestartTimePct,
    /// Committed transactions of one type per second (its latency count over the measured
    /// time), against the point's x: the read-write or read-only half of a mixed run.
    TypeThroughput(&'static str),
    /// A per-committed-transaction counter of the report (its top-level key, e.g.
    /// `global_rmw_per_txn`), against the point's x.
    PerTxn(&'static str),
    /// The long readers' commits per second (`bench llt`'s `results.long_readers`),
    /// against the point's x.
    LongReaderTps,
    /// The long readers' aborted attempts as a percentage of theirs, against the point's x.
    LongReaderAbortPct,
    /// Seconds of a recovery phase (`myriad recover --json`'s `ms.<key>`; `replay_and_index`
    /// is replay plus index build), against the point's x.
    RecoverySeconds(&'static str),
    /// A stacked bar per x (thesis Fig. 4.20): each series is one layer, the recovery phase
    /// its label names in `RECOVERY_PHASES` (`ms.<key>`, seconds; the parallel phases are
    /// summed over workers), all layers read from the same runs.
    RecoveryPhases,
    /// Log bytes written per committed transaction (`results.log.bytes_per_txn`), against
    /// the point's x.
    LogBytesPerTxn,
    /// Mean latency of the committed transactions of every type (each type's mean weighted
    /// by its count), against the point's x.
    MeanLatencyUs,
    /// A latency figure of one transaction type (`latency_us.<type>.<key>`: `p25`, `p50`,
    /// `p80`, `p95`, `mean`...), against the point's x.
    TypeLatencyUs(&'static str, &'static str),
    /// The longest sampled chain at each sample (`chain_len_max`), against time.
    MaxChainOverTime,
    /// The longest chain any sample of the run saw, against the point's x.
    MaxChain,
    /// The chain length at each percentile of the run's worst chain sample
    /// (`memory.chain_len_percentiles`), against the percentile: vDriver Fig. 14's CDF with
    /// its axes swapped (the percentiles are the same in every round, so rounds align).
    ChainPercentiles,
    /// `siro`: a share (%) of the versions that left a record slot (1st prune plus
    /// relocated): stage `pruned_first`, or `pruned_seal`, `cut` or `kept` (relocated and
    /// not dropped) of one class (0 hot, 1 cold, 2 LLT; `None` with `kept`: hot and cold).
    SiroPct(&'static str, Option<usize>),
    /// `siro`: the mean time from a segment's seal to its cut (ms) in one class.
    SiroCutDelayMs(usize),
    /// Mean latency of the transactions that ended in each second (`latency_timeseries`),
    /// against time (thesis Fig. 4.11's lower half).
    LatencyOverTime,
    /// Log MiB written per second over the seconds of the run during which a checkpoint
    /// was running (`true`: the middle of the second inside a `checkpoint_spans` entry) or
    /// none was (`false`), against the point's x (thesis Table 4.2).
    LogMibPerSec(bool),
    /// Checkpoint MiB written per second of checkpointing (bytes over the spans' time),
    /// against the point's x (thesis Table 4.2's checkpoint share).
    CheckpointMibPerSec,
}

impl Metric {
    fn y_label(self) -> &'static str {
        match self {
            Metric::Throughput | Metric::ThroughputOverTime => "txn/s",
            Metric::ScalabilityPct => "txn/s per thread (% of the first point)",
            Metric::LiveMibOverTime => "live version MiB",
            Metric::SpaceLocksPerTxn => "space locks / txn",
            Metric::StockScanUs => "StockScan mean latency (us)",
            Metric::AbortPct => "aborts (% of attempts)",
            Metric::ConflictAbortPct => "conflict aborts (% of attempts)",
            Metric::RestartTimePct => "time in abort-and-restart (%)",
            Metric::PerTxn(key) => match key {
                "global_rmw_per_txn" => "global atomic RMW / txn",
                "ts_increments_per_txn" => "timestamp increments / txn",
                _ => "per committed txn",
            },
            Metric::TypeThroughput(t) => match t {
                "long_read_txn" => "read-only txn/s",
                "update_txn" => "read-write txn/s",
                _ => "txn/s of one type",
            },
            Metric::LongReaderTps => "long-reader txn/s",
            Metric::LongReaderAbortPct => "long-reader aborts (% of attempts)",
            Metric::RecoverySeconds(_) => "recovery seconds",
            Metric::RecoveryPhases => "seconds (parallel phases: summed over workers)",
            Metric::LogBytesPerTxn => "log bytes / txn",
            Metric::MeanLatencyUs => "mean latency (us)",
            Metric::TypeLatencyUs(..) => "latency (us)",
            Metric::MaxChainOverTime | Metric::MaxChain => "longest chain (versions)",
            Metric::ChainPercentiles => "chain length (versions)",
            Metric::SiroPct(..) => "% of versions leaving record slots",
            Metric::SiroCutDelayMs(_) => "mean cut delay (ms)",
            Metric::LatencyOverTime => "mean latency (us)",
            Metric::LogMibPerSec(_) => "log MiB/s",
            Metric::CheckpointMibPerSec => "checkpoint MiB/s",
        }
    }

    /// The metric of one series of a panel: a `RecoveryPhases` layer reads the phase its
    /// label names.
    fn of_series(self, label: &str) -> Result<Metric, String> {
        match self {
            Metric::RecoveryPhases => RECOVERY_PHASES
                .iter()
                .find(|(l, _)| *l == label)
                .map(|&(_, key)| Metric::RecoverySeconds(key))
                .ok_or_else(|| format!("'{label}' is not a recovery phase")),
            m => Ok(m),
        }
    }

    /// The smallest figure of the first series a ratio is taken to: a share in per cent
    /// (aborts, time in restarts, SIRO's stages) below 0.1 % is noise, and a ratio to it
    /// (thousands) says nothing; any other positive figure is a base.
    fn smallest_base(self) -> f64 {
        match self {
            Metric::AbortPct
            | Metric::ConflictAbortPct
            | Metric::RestartTimePct
            | Metric::SiroPct(..) => 0.1,
            _ => 0.0,
        }
    }

    /// Drawn as stacked bars, one layer per series.
    fn stacked(self) -> bool {
        self == Metric::RecoveryPhases
    }

    /// One figure per run, against the point's x (not a time series).
    fn is_sweep(self) -> bool {
        matches!(
            self,
            Metric::Throughput
                | Metric::ScalabilityPct
                | Metric::SpaceLocksPerTxn
                | Metric::StockScanUs
                | Metric::AbortPct
                | Metric::ConflictAbortPct
                | Metric::RestartTimePct
                | Metric::TypeThroughput(_)
                | Metric::PerTxn(_)
                | Metric::LongReaderTps
                | Metric::LongReaderAbortPct
                | Metric::RecoverySeconds(_)
                | Metric::RecoveryPhases
                | Metric::LogBytesPerTxn
                | Metric::MeanLatencyUs
                | Metric::TypeLatencyUs(..)
                | Metric::MaxChain
                | Metric::SiroPct(..)
                | Metric::SiroCutDelayMs(_)
                | Metric::LogMibPerSec(_)
                | Metric::CheckpointMibPerSec
        )
    }
}

#[derive(Clone)]
struct Series {
    label: String,
    /// (x, the command's arguments after `myriad bench`, or after `myriad` when the first is
    /// `recover`). Time-series panels have one point.
    points: Vec<(f64, Vec<String>)>,
}

struct Panel {
    title: String,
    x_label: &'static str,
    metric: Metric,
    series: Vec<Series>,
}

struct Spec {
    name: &'static str,
    figure: &'static str,
    /// The thesis's finding, quoted in the report for comparison.
    finding: &'static str,
    /// The thesis's series this build cannot run yet (the experiment runs without them).
    partial: Option<&'static str>,
    panels: fn(&Scale) -> Vec<Panel>,
}

const SPECS: &[Spec] = &[
    Spec {
        name: "non-inline",
        figure: "5.11",
        finding: "reference-counted non-inline attributes beat full-tuple copies: ~40% with 50 \
                  attributes read-intensive, over 100% update-intensive",
        partial: None,
        panels: non_inline,
    },
    Spec {
        name: "chain-order",
        figure: "5.12",
        finding: "N2O always beats O2N; by 2.4-3.4x at theta 0.9",
        partial: None,
        panels: chain_order,
    },
    Spec {
        name: "footprint",
        figure: "5.13",
        finding: "with 10 attributes the three schemes are alike; with 100 attributes delta \
                  storage is ~2x append-only and time-travel",
        partial: None,
        panels: footprint,
    },
    Spec {
        name: "attrs-modified",
        figure: "5.14",
        finding: "delta wins when few of 100 attributes change; equal when all change",
        partial: None,
        panels: attrs_modified,
    },
    Spec {
        name: "attrs-accessed",
        figure: "5.15",
        finding: "reading more attributes hurts delta storage most",
        partial: None,
        panels: attrs_accessed,
    },
    Spec {
        name: "memory-spaces",
        figure: "5.16",
        finding: "1 to 20 memory spaces speed append-only and time-travel 1.6-4x; delta is flat",
        partial: None,
        panels: memory_spaces,
    },
    Spec {
        name: "storage-tpcc",
        figure: "5.17",
        finding: "append-only has the best TPC-C throughput; delta the worst StockScan latency",
        partial: None,
        panels: storage_tpcc,
    },
    Spec {
        name: "gc-tuple-level",
        figure: "5.18-5.19",
        finding: "COOP has ~45% more throughput than VAC and 30-60% less memory per \
                  transaction; without GC throughput declines over time",
        partial: None,
        panels: gc_tuple_level,
    },
    Spec {
        name: "gc-tuple-vs-txn",
        figure: "5.20-5.21",
        finding: "transaction-level GC is slightly ahead of tuple-level read-intensive, 20% \
                  update-intensive; both 20-30% above no GC, and both bound memory",
        partial: None,
        panels: gc_tuple_vs_txn,
    },
    Spec {
        name: "index-pointers",
        figure: "5.22-5.23",
        finding: "logical pointers beat physical by 25-45%, more with more secondary indexes",
        partial: None,
        panels: index_pointers,
    },
    Spec {
        name: "configurations",
        figure: "5.24-5.25",
        finding: "the NuoDB configuration is fastest on TPC-C; delta storage has the worst \
                  scan latency",
        partial: Some("SAP HANA's hybrid GC (run with transaction-level GC)"),
        panels: configurations,
    },
    Spec {
        name: "protocols-scaling",
        figure: "5.6",
        finding: "read-only YCSB: every protocol but SSN scales almost linearly; with 100 \
                  operations throughput is ~30x lower and scales linearly",
        partial: None,
        panels: protocols::scaling,
    },
    Spec {
        name: "protocols-contention",
        figure: "5.7",
        finding: "alike below theta 0.7; beyond it MVOCC loses ~50% read-intensive; \
                  update-intensive only MV2PL differs",
        partial: None,
        panels: protocols::contention,
    },
    Spec {
        name: "protocols-heterogeneous",
        figure: "5.8-5.9",
        finding: "without READ ONLY, MVTO's and MV2PL's read-write throughput drops as readers \
                  are added and MVOCC starves readers; with it, read-only throughput is equal \
                  and read-write stable, SSN best (1.6x MV2PL and MVTO), MVOCC worst",
        partial: None,
        panels: protocols::heterogeneous,
    },
    Spec {
        name: "protocols-tpcc",
        figure: "5.10",
        finding: "MVTO 45-120% ahead of the others; SSN next; MVOCC aborts NewOrder, MV2PL \
                  Payment",
        partial: None,
        panels: protocols::tpcc,
    },
    Spec {
        name: "hekaton-scaling",
        figure: "H4-H5",
        finding: "Hekaton Figs. 4-5, R=10 W=2 at Read Committed: low contention 1V ahead, MV/L \
                  30% below MV/O; on 1,000 rows MV/O slightly ahead of both locking schemes",
        partial: Some("1V at Read Committed (2pl offers Serializable only)"),
        panels: protocols::hekaton_scaling,
    },
    Spec {
        name: "hekaton-isolation",
        figure: "H-Table 3",
        finding: "Hekaton Table 3: RR costs the locking schemes < 2%, MV/O 8%; Serializable \
                  costs 1V 2%, MV/L 10%, MV/O 19%",
        partial: Some("1V at Read Committed and Repeatable Read"),
        panels: protocols::hekaton_isolation,
    },
    Spec {
        name: "hekaton-tatp",
        figure: "H-Table 4",
        finding: "Hekaton Table 4, TATP at Read Committed: 1V 4,220,119, MV/L 3,129,816, MV/O \
                  3,121,494 tx/s (1V 1.35x ahead, the two MV schemes equal)",
        partial: Some("1V at Read Committed (2pl runs Serializable)"),
        panels: protocols::hekaton_tatp,
    },
    Spec {
        name: "hekaton-long-readers",
        figure: "H8-H9",
        finding: "Hekaton Figs. 8-9, 24 transactions of which x are long Serializable readers \
                  of 10% of a 10 M-row table: at x=1 1V's update throughput drops 75%, MV's \
                  5% (MV 2x 1V); at x=12 MV has 80x 1V's update throughput; MV's read \
                  throughput is above 1V's throughout",
        partial: None,
        panels: protocols::hekaton_long_readers,
    },
    Spec {
        name: "vdriver-space",
        figure: "V13, V14, V18",
        finding: "vDriver Fig. 13: the vanilla engines' throughput falls while an LLT lives, \
                  sharply under skew, and their space and max chain (to 10^4) keep growing; \
                  with vDriver throughput holds, space stays low and the max chain stays \
                  below 100 even under Zipf 1.2. Fig. 14: under skew with an LLT most records \
                  keep short chains (at most 35) with vDriver, a wide spread without. Fig. 18: vDriver unchanged with the record \
                  size (128 B or 1 KiB); vanilla PostgreSQL worse at 1 KiB",
        partial: Some(
            "Fig. 17 (24-96 cores); PostgreSQL and MySQL are replaced by o2n and n2o chains \
             with the watermark GC; Fig. 14's CDF is drawn as percentiles (axes swapped)",
        ),
        panels: vdriver::space,
    },
    Spec {
        name: "vdriver-siro",
        figure: "V15, V16, V19",
        finding: "vDriver Fig. 15: over 92% of the versions leaving records are dropped at the \
                  1st prune up to Zipf 1.1, with or without LLTs; under skew most survivors go \
                  at the 2nd prune, and LLT-class leftovers shrink as hot ones grow. Fig. 16: \
                  LLT segments are cut over the LLT's life, hot ones at once (a few stay \
                  under skew); with a huge LLT threshold hot segments holding LLT versions \
                  stay until the LLT ends. Fig. 19: chains stay short at every segment size \
                  under uniform keys; under skew a 16 MiB segment lets the max chain pass 10^3",
        partial: None,
        panels: vdriver::siro,
    },
    Spec {
        name: "ermia-tpcc",
        figure: "E-TPC-C",
        finding: "ERMIA Fig. 7 (right), TPCC-fixed (a home warehouse per worker, 1% remote): \
                  ERMIA-SI 10% and ERMIA-SSI 20% behind Silo at peak (SSI costs 10% over SI); \
                  ERMIA has no SSN series",
        partial: None,
        panels: protocols::ermia_tpcc,
    },
    Spec {
        name: "pomvcc-logs",
        figure: "P22-P24",
        finding: "POMVCC Figs. 22 and 24, New-Order fragment with MVCC: parallel logs (8) \
                  5.02x one log at 80 threads; one log's throughput falls past 40 threads \
                  (I/O interrupts on one core), eight logs' keeps rising",
        partial: Some(
            "1 and 2 log files on one disk and 1-2 threads (the paper: 1 and 8 logs, 10-80 \
             threads); the paper runs MPDB's MVCC only, partial-order (shared counters) is \
             added here",
        ),
        panels: timestamps::logs,
    },
    Spec {
        name: "pomvcc-fragment",
        figure: "P25-P27",
        finding: "POMVCC Figs. 25-27, New-Order fragment under snapshot isolation: POMVCC \
                  1.36-1.60x MVCC at 16 warehouses and 1.36-1.74x with warehouses = threads \
                  (10-80 threads); MVCC's scalability falls past 40 threads, POMVCC's holds",
        partial: Some("the logged runs (8 log files): the runs are in memory"),
        panels: timestamps::fragment,
    },
    Spec {
        name: "pacman-recovery",
        figure: "4.13-4.20",
        finding: "Fig. 4.14: CLR-P 18x faster than CLR; Fig. 4.16: CLR worst, LLR-P best, \
                  CLR-P slower than LLR-P (it re-executes reads); Fig. 4.17: recovery time \
                  falls smoothly as the ad-hoc share grows to 100% (LLR-P); Fig. 4.18: \
                  transaction chopping always slower than PACMAN's static analysis (coarser \
                  pieces); Fig. 4.19: synchronous > 4x static-only at 40 threads, pipelined \
                  best; Fig. 4.20: at 40 threads scheduling takes ~30% of the recovery time, log \
                  loading and dynamic analysis are light",
        partial: Some(
            "1-2 threads (the thesis: 1-40)",
        ),
        panels: recovery::pacman,
    },
    Spec {
        name: "command-logging",
        figure: "4.11-4.12, T4.1-T4.3",
        finding: "Table 4.1: TPC-C at 71 K (PL), 74 K (LL), 93 K (CL) tps, the logical log \
                  10.8x the command log's size; Smallbank's logs alike in size. Fig. 4.11: \
                  OFF steady at ~95 K tps; on one SSD PL and LL drop ~25% while checkpoints \
                  run, with latency spikes past 300 ms; CL's drop under 6%. Table 4.2: \
                  tuple-level logs write ~260 MB/s, ~350 MB/s with checkpoints running; \
                  CL's bandwidth is small either way. Table 4.3: \
                  with fsync CL's latency under half of PL's and LL's, without fsync all \
                  close. Fig. 4.12: throughput falls about linearly as the ad-hoc share grows",
        partial: Some(
            "one log device shared with the checkpoints (the thesis: one or two SSDs); Fig. \
             4.11 shades the first round's checkpoints only (every round's are in its run's \
             JSON, results.log.checkpoint_spans); 1-2 threads (the thesis: 32)",
        ),
        panels: logging::logging,
    },
    Spec {
        name: "transaction-healing",
        figure: "3.8-3.10, 3.13-3.14, T3.1-T3.4",
        finding: "Fig. 3.10: at 2 warehouses (46 threads) healing sustains near OCC⁻'s \
                  throughput while occ, silo, 2pl and hybrid fall sharply; Fig. 3.9a: at 2 \
                  warehouses OCC and Silo spend 69% and 91% of their time in \
                  abort-and-restart; Fig. 3.9b: OCC's and Silo's abort rates rise with \
                  contention; Table 3.1: 95% of healing's \
                  New-Orders within 80 us; Fig. 3.13: healing falls smoothly to OCC as the \
                  ad-hoc share reaches 100%; Fig. 3.14: at theta 0.9 healing 4.5x the others \
                  (24 threads); Table 3.2: healing aborts nothing at any theta; Table 3.4: \
                  read copies and the access cache cost under 5% without contention",
        partial: Some(
            "DT (the partitioned deterministic protocol), Figs. 3.11-3.12 (thread scaling, \
             cross-partition share), the access cache's cached read outputs (it keeps tuple \
             ids and point UPDATEs' buffered writes: a heal reads every row again, without the \
             index lookups of keys looked up before, and keeps the UPDATEs whose inputs and \
             rows are unchanged); \
             Table 3.1 as p50/p95 instead of buckets; 1-2 threads (the thesis: 24-46)",
        ),
        panels: healing::healing,
    },
    Spec {
        name: BASELINES,
        figure: "-",
        finding: "not a thesis figure: Myriad against the embedded stores a Rust developer \
                  would pick instead (SQLite, redb, fjall) on the same transactions; the \
                  issue's goals are Myriad >= 10x SQLite and redb on YCSB read-intensive \
                  theta 0.9 in memory, >= 5x SQLite WAL durable, >= 10x SQLite on TPC-C 1 wh",
        partial: None,
        panels: baselines,
    },
];

/// The experiment that runs the baseline engines (cargo feature `baselines`).
const BASELINES: &str = "baselines";

/// In a run's arguments: replaced by a fresh directory of its own (created by the run,
/// removed after it), for the durable runs.
const RUN_DIR: &str = "@run-dir";

/// Side by side with SQLite, redb and fjall (`myriad bench --engine`): YCSB read- and
/// update-intensive at theta 0.2 and 0.9, Smallbank, TPC-C at 1 and 2 warehouses; each in
/// memory and durable (`--data-dir`, `--fsync always`: every commit durable when it
/// returns), over worker threads (1 and 2 on this machine). The first series is Myriad, so
/// `ratio_to_first_series` is baseline ÷ Myriad.
fn baselines(s: &Scale) -> Vec<Panel> {
    let threads: Vec<usize> = if s.quick {
        vec![1]
    } else {
        (0..)
            .map(|k| 1usize << k)
            .take_while(|&t| t <= s.threads.max(1))
            .collect()
    };
    let modes: [(&str, &[&str]); 2] = [
        ("in memory", &[]),
        (
            "durable, fsync always",
            &["--data-dir", RUN_DIR, "--fsync", "always"],
        ),
    ];
    let all = ["myriad", "sqlite", "redb", "fjall"];
    let rows = s.rows.to_string();
    let mut cells: Vec<(String, Vec<&str>, &[&str])> = Vec::new();
    for (mix, short) in [("read-intensive", "RI"), ("update-intensive", "UI")] {
        for theta in ["0.2", "0.9"] {
            cells.push((
                format!("YCSB {short} theta {theta}"),
                vec!["ycsb", "--rows", &rows, "--mix", mix, "--theta", theta],
                &all,
            ));
        }
    }
    cells.push(("Smallbank".into(), vec!["smallbank"], &all));
    let warehouses: &[&str] = if s.quick { &["1"] } else { &["1", "2"] };
    for w in warehouses {
        cells.push((
            format!("TPC-C {w} wh"),
            vec!["tpcc", "--warehouses", w],
            &["myriad", "sqlite"],
        ));
    }
    let mut panels = Vec::new();
    for (mode, durable) in modes {
        for (title, base, engines) in &cells {
            panels.push(Panel {
                title: format!("{title}, {mode}"),
                x_label: "threads",
                metric: Metric::Throughput,
                series: engines
                    .iter()
                    .map(|e| Series {
                        label: e.to_string(),
                        points: threads
                            .iter()
                            .map(|t| {
                                let mut a: Vec<String> =
                                    base.iter().map(|x| x.to_string()).collect();
                                a.extend(["--engine".into(), e.to_string()]);
                                a.extend(["--threads".into(), t.to_string()]);
                                a.extend(durable.iter().map(|x| x.to_string()));
                                (*t as f64, a)
                            })
                            .collect(),
                    })
                    .collect(),
            });
        }
    }
    panels
}

/// Fig. 5.11: non-inline BYTES(100) attributes in append-only (N2O) storage, copied for
/// every version or shared by reference count, over the attributes per row; one attribute
/// read or written per operation, theta 0.2. Rows are a tenth of the other experiments'
/// (a 50-attribute row is 5 KB); inline storage is the reference.
fn non_inline(s: &Scale) -> Vec<Panel> {
    let attrs: &[u32] = if s.quick {
        &[1, 10]
    } else {
        &[1, 10, 20, 30, 40, 50]
    };
    let s = &Scale {
        rows: (s.rows / 10).max(1000),
        ..*s
    };
    ["read-intensive", "update-intensive"]
        .iter()
        .map(|mix| Panel {
            title: format!("{mix}, theta 0.2, BYTES(100) attributes (MVTO, N2O)"),
            x_label: "attributes",
            metric: Metric::Throughput,
            series: ["inline", "copy", "shared"]
                .iter()
                .map(|how| Series {
                    label: how.to_string(),
                    points: attrs
                        .iter()
                        .map(|&n| {
                            let n_s = n.to_string();
                            let d = [
                                "--storage",
                                "n2o",
                                "--gc",
                                "txn",
                                "--row-layout",
                                "bytes100x10",
                                "--attrs",
                                &n_s,
                                "--attrs-read",
                                "1",
                                "--attrs-modified",
                                "1",
                                "--non-inline",
                                how,
                            ];
                            (n as f64, ycsb(s, mix, 0.2, &d))
                        })
                        .collect(),
                })
                .collect(),
        })
        .collect()
}

/// The thesis's three version storage schemes (§5.4), as series labels and `--storage`.
const STORAGES: [(&str, &str); 3] = [
    ("append-only", "n2o"),
    ("time-travel", "time-travel"),
    ("delta", "delta"),
];

/// One panel per (title, mix, fixed flags): each storage scheme over `xs`, the swept flag
/// `sweep` taking each x.
fn storage_sweep(
    s: &Scale,
    x_label: &'static str,
    sweep: &str,
    xs: &[u32],
    cases: &[(String, &str, Vec<&str>)],
) -> Vec<Panel> {
    cases
        .iter()
        .map(|(title, mix, fixed)| Panel {
            title: title.clone(),
            x_label,
            metric: Metric::Throughput,
            series: STORAGES
                .iter()
                .map(|(label, storage)| Series {
                    label: label.to_string(),
                    points: xs
                        .iter()
                        .map(|&x| {
                            let x_s = x.to_string();
                            let mut d = vec!["--storage", storage, "--gc", "txn", sweep, &x_s];
                            d.extend(fixed.iter().copied());
                            (x as f64, ycsb(s, mix, 0.2, &d))
                        })
                        .collect(),
                })
                .collect(),
        })
        .collect()
}

/// Attribute counts swept over a 100-attribute row (§5.7.3's table).
fn attribute_counts(s: &Scale) -> &'static [u32] {
    if s.quick {
        &[1, 100]
    } else {
        &[1, 10, 25, 50, 75, 100]
    }
}

/// Fig. 5.14: attributes modified per update, of 100, theta 0.2; reads read one.
fn attrs_modified(s: &Scale) -> Vec<Panel> {
    let cases = ["read-intensive", "update-intensive"].map(|mix| {
        (
            format!("{mix}, theta 0.2, 100 attributes (MVTO)"),
            mix,
            vec!["--attrs", "100", "--attrs-read", "1"],
        )
    });
    storage_sweep(
        s,
        "attributes modified (of 100)",
        "--attrs-modified",
        attribute_counts(s),
        &cases,
    )
}

/// Fig. 5.15: attributes read per read operation, of 100, read-intensive, theta 0.2, with
/// updates modifying one attribute (a) or all of them (b).
fn attrs_accessed(s: &Scale) -> Vec<Panel> {
    let cases = [("1", "one"), ("100", "every")].map(|(m, what)| {
        (
            format!("read-intensive, 100 attributes, updates set {what} attribute (MVTO)"),
            "read-intensive",
            vec!["--attrs", "100", "--attrs-modified", m],
        )
    });
    storage_sweep(
        s,
        "attributes read (of 100)",
        "--attrs-read",
        attribute_counts(s),
        &cases,
    )
}

/// Fig. 5.13: the storage schemes over the percentage of update operations, with 10 and 100
/// attributes per row, one attribute read or written per operation, theta 0.2, one memory
/// space per thread (the thesis gives every scheme several).
fn footprint(s: &Scale) -> Vec<Panel> {
    let pcts: &[u32] = if s.quick {
        &[20, 100]
    } else {
        &[0, 20, 40, 60, 80, 100]
    };
    let spaces = s.threads.to_string();
    let cases = ["10", "100"].map(|attrs| {
        (
            format!("{attrs} attributes, theta 0.2 (MVTO)"),
            "",
            vec![
                "--attrs",
                attrs,
                "--attrs-read",
                "1",
                "--attrs-modified",
                "1",
                "--memory-spaces",
                spaces.as_str(),
            ],
        )
    });
    storage_sweep(s, "update operations (%)", "--update-pct", pcts, &cases)
}

/// YCSB as the thesis's §5.7.3–5.7.4 runs it: MVTO, 10 operations per transaction. An
/// empty `mix` leaves `--mix` out (the design sets `--update-pct`).
fn ycsb(s: &Scale, mix: &str, theta: f64, design: &[&str]) -> Vec<String> {
    let mix_flag: &[&str] = if mix.is_empty() { &[] } else { &["--mix", mix] };
    let mut a: Vec<String> = ["ycsb", "--protocol", "mvto"]
        .iter()
        .chain(mix_flag)
        .map(|x| x.to_string())
        .collect();
    a.extend(
        [
            "--ops",
            "10",
            "--rows",
            &s.rows.to_string(),
            "--theta",
            &theta.to_string(),
        ]
        .map(String::from),
    );
    a.extend(design.iter().map(|d| d.to_string()));
    a
}

/// Fig. 5.12: N2O against O2N under transaction-level GC, over contention.
fn chain_order(s: &Scale) -> Vec<Panel> {
    let thetas: &[f64] = if s.quick {
        &[0.2, 0.9]
    } else {
        &[0.2, 0.4, 0.6, 0.8, 0.9]
    };
    ["read-intensive", "update-intensive"]
        .iter()
        .map(|mix| Panel {
            title: format!("{mix} (MVTO, GC txn)"),
            x_label: "Zipfian theta",
            metric: Metric::Throughput,
            series: ["n2o", "o2n"]
                .iter()
                .map(|storage| Series {
                    label: storage.to_uppercase(),
                    points: thetas
                        .iter()
                        .map(|&t| (t, ycsb(s, mix, t, &["--storage", storage, "--gc", "txn"])))
                        .collect(),
                })
                .collect(),
        })
        .collect()
}

/// Time-series panels (throughput, then memory) of `designs` on each (title, mix, theta).
fn over_time(s: &Scale, cases: &[(&str, &str, f64)], designs: &[(&str, &[&str])]) -> Vec<Panel> {
    let mut panels = Vec::new();
    for metric in [Metric::ThroughputOverTime, Metric::LiveMibOverTime] {
        for &(title, mix, theta) in cases {
            panels.push(Panel {
                title: title.to_string(),
                x_label: "seconds",
                metric,
                series: designs
                    .iter()
                    .map(|(label, design)| Series {
                        label: label.to_string(),
                        points: vec![(0.0, ycsb(s, mix, theta, design))],
                    })
                    .collect(),
            });
        }
    }
    panels
}

/// Figs. 5.18–5.19: background vacuuming against cooperative cleaning, O2N, one GC thread.
fn gc_tuple_level(s: &Scale) -> Vec<Panel> {
    over_time(
        s,
        &[
            (
                "update-intensive, theta 0.2 (MVTO, O2N)",
                "update-intensive",
                0.2,
            ),
            (
                "update-intensive, theta 0.9 (MVTO, O2N)",
                "update-intensive",
                0.9,
            ),
        ],
        &[
            (
                "VAC",
                &["--storage", "o2n", "--gc", "vacuum", "--gc-threads", "1"],
            ),
            (
                "COOP",
                &["--storage", "o2n", "--gc", "coop", "--gc-threads", "1"],
            ),
            ("none", &["--storage", "o2n", "--gc", "none"]),
        ],
    )
}

/// Figs. 5.20–5.21: transaction-level against tuple-level GC, N2O, theta 0.8.
fn gc_tuple_vs_txn(s: &Scale) -> Vec<Panel> {
    over_time(
        s,
        &[
            (
                "read-intensive, theta 0.8 (MVTO, N2O)",
                "read-intensive",
                0.8,
            ),
            (
                "update-intensive, theta 0.8 (MVTO, N2O)",
                "update-intensive",
                0.8,
            ),
        ],
        &[
            ("txn", &["--storage", "n2o", "--gc", "txn"]),
            (
                "VAC",
                &["--storage", "n2o", "--gc", "vacuum", "--gc-threads", "1"],
            ),
            ("none", &["--storage", "n2o", "--gc", "none"]),
        ],
    )
}

/// Fig. 5.16: memory spaces for append-only (N2O), time-travel and delta storage, theta
/// 0.2, one attribute read or written per operation. Version blocks come from the spaces;
/// time-travel copies and deltas from the general allocator. Beside the sweep, append-only
/// without spaces (each thread recycling its own versions) as a flat reference, and the
/// lock acquisitions per transaction that show the contention two cores cannot.
fn memory_spaces(s: &Scale) -> Vec<Panel> {
    let spaces: &[u32] = if s.quick { &[1, 2] } else { &[1, 2, 4, 8] };
    let one_attr = ["--attrs-read", "1", "--attrs-modified", "1", "--storage"];
    let run = |mix: &str, storage: &str, n: Option<u32>| {
        let mut d: Vec<String> = one_attr.iter().map(|a| a.to_string()).collect();
        d.push(storage.to_string());
        if let Some(n) = n {
            d.extend(["--memory-spaces".to_string(), n.to_string()]);
        }
        let d: Vec<&str> = d.iter().map(String::as_str).collect();
        ycsb(s, mix, 0.2, &d)
    };
    let mut panels = Vec::new();
    for metric in [Metric::Throughput, Metric::SpaceLocksPerTxn] {
        for mix in ["read-intensive", "update-intensive"] {
            panels.push(Panel {
                title: format!("{mix}, theta 0.2 (MVTO)"),
                x_label: "memory spaces",
                metric,
                series: STORAGES
                    .iter()
                    .map(|(label, storage)| Series {
                        label: label.to_string(),
                        points: spaces
                            .iter()
                            .map(|&n| (n as f64, run(mix, storage, Some(n))))
                            .collect(),
                    })
                    .chain(std::iter::once(Series {
                        label: "no spaces".into(),
                        points: spaces
                            .iter()
                            .map(|&n| (n as f64, run(mix, "n2o", None)))
                            .collect(),
                    }))
                    .collect(),
            });
        }
    }
    panels
}

/// TPC-C on MVTO with one StockScan thread, as §5.7.1 runs it, over warehouses (1: high
/// contention; 4: low, for 2 workers).
fn tpcc(warehouses: u32, design: &[&str]) -> Vec<String> {
    let mut a: Vec<String> = [
        "tpcc",
        "--warehouses",
        &warehouses.to_string(),
        "--stock-scan-threads",
        "1",
    ]
    .map(String::from)
    .into();
    if !design.contains(&"--protocol") {
        a.extend(["--protocol".to_string(), "mvto".to_string()]);
    }
    a.extend(design.iter().map(|d| d.to_string()));
    a
}

fn tpcc_warehouses(s: &Scale) -> &'static [u32] {
    if s.quick {
        &[1]
    } else {
        &[1, 4]
    }
}

/// Throughput and StockScan latency panels of TPC-C `designs` (label, flags) over warehouses.
fn tpcc_panels(s: &Scale, what: &str, designs: &[(&str, Vec<&str>)]) -> Vec<Panel> {
    [Metric::Throughput, Metric::StockScanUs]
        .into_iter()
        .map(|metric| Panel {
            title: format!("TPC-C, {what}"),
            x_label: "warehouses",
            metric,
            series: designs
                .iter()
                .map(|(label, design)| Series {
                    label: label.to_string(),
                    points: tpcc_warehouses(s)
                        .iter()
                        .map(|&w| (w as f64, tpcc(w, design)))
                        .collect(),
                })
                .collect(),
        })
        .collect()
}

/// Fig. 5.17: the three storage schemes on TPC-C (MVTO, transaction-level GC).
fn storage_tpcc(s: &Scale) -> Vec<Panel> {
    let designs: Vec<(&str, Vec<&str>)> = STORAGES
        .iter()
        .map(|(label, storage)| (*label, vec!["--storage", storage, "--gc", "txn"]))
        .collect();
    tpcc_panels(s, "storage schemes (MVTO)", &designs)
}

/// Figs. 5.24–5.25: Table 5.1's systems as configurations (protocol, storage, GC, index
/// pointers). Postgres's SSI and SAP HANA's hybrid GC are run as MV2PL and
/// transaction-level GC; HYRISE has no GC.
fn configurations(s: &Scale) -> Vec<Panel> {
    let c = |p, st, gc, ip| {
        vec![
            "--protocol",
            p,
            "--storage",
            st,
            "--gc",
            gc,
            "--index-pointers",
            ip,
        ]
    };
    let designs: Vec<(&str, Vec<&str>)> = vec![
        ("Oracle/MySQL", c("mv2pl", "delta", "vacuum", "logical-tid")),
        ("Postgres", c("mv2pl", "o2n", "vacuum", "physical")),
        ("HYRISE", c("mvocc", "n2o", "none", "physical")),
        ("Hekaton", c("mvocc", "o2n", "coop", "physical")),
        ("MemSQL", c("mvocc", "n2o", "vacuum", "physical")),
        ("SAP HANA", c("mv2pl", "time-travel", "txn", "logical-tid")),
        ("NuoDB", c("mv2pl", "n2o", "vacuum", "logical-pk")),
        ("HyPer", c("mvocc", "delta", "txn", "logical-tid")),
    ];
    tpcc_panels(s, "Table 5.1 configurations", &designs)
}

/// Figs. 5.22–5.23: index pointers over the number of secondary indexes (5.22), and with
/// eight secondary indexes over the worker threads, powers of two up to `--threads` (5.23;
/// the thesis goes to 40); theta 0.2 and 0.9, N2O, update-intensive, every update setting
/// all ten attributes so that each index's key changes.
fn index_pointers(s: &Scale) -> Vec<Panel> {
    let counts: &[u32] = if s.quick {
        &[1, 10]
    } else {
        &[1, 2, 4, 6, 8, 10]
    };
    let mut threads: Vec<usize> = std::iter::successors(Some(1usize), |t| Some(t * 2))
        .take_while(|&t| t < s.threads)
        .collect();
    threads.push(s.threads);
    let mut panels: Vec<Panel> = [0.2, 0.9]
        .iter()
        .map(|&theta| {
            let points: Vec<(f64, u32, Option<usize>)> =
                counts.iter().map(|&n| (n as f64, n, None)).collect();
            let title = format!("update-intensive, theta {theta} (MVTO, N2O)");
            pointer_panel(s, title, "secondary indexes", theta, &points)
        })
        .collect();
    panels.extend([0.2, 0.9].iter().map(|&theta| {
        let points: Vec<(f64, u32, Option<usize>)> =
            threads.iter().map(|&t| (t as f64, 8, Some(t))).collect();
        let title = format!("8 secondary indexes, update-intensive, theta {theta} (MVTO, N2O)");
        pointer_panel(s, title, "worker threads", theta, &points)
    }));
    panels
}

/// The three kinds of index pointers at each (x, secondary indexes, worker threads if not
/// the scale's) of `points`.
fn pointer_panel(
    s: &Scale,
    title: String,
    x_label: &'static str,
    theta: f64,
    points: &[(f64, u32, Option<usize>)],
) -> Panel {
    Panel {
        title,
        x_label,
        metric: Metric::Throughput,
        series: ["logical-tid", "logical-pk", "physical"]
            .iter()
            .map(|kind| Series {
                label: kind.to_string(),
                points: points
                    .iter()
                    .map(|&(x, n, threads)| {
                        let n = n.to_string();
                        let t = threads.map(|t| t.to_string());
                        let mut d = vec![
                            "--storage",
                            "n2o",
                            "--attrs-modified",
                            "10",
                            "--secondary-indexes",
                            &n,
                            "--index-pointers",
                            kind,
                        ];
                        if let Some(t) = &t {
                            d.extend(["--threads", t.as_str()]);
                        }
                        (x, ycsb(s, "update-intensive", theta, &d))
                    })
                    .collect(),
            })
            .collect(),
    }
}

/// `myriad experiment list`'s lines, in a build that has (`compiled`) or lacks the baseline
/// engines.
fn list_lines(compiled: bool) -> Vec<String> {
    SPECS
        .iter()
        .map(|s| match s.partial {
            _ if s.name == BASELINES && !compiled => format!(
                "{:<16} not in this build: needs the cargo feature `baselines`",
                s.name
            ),
            None => format!("{:<16} Fig. {:<10} runs", s.name, s.figure),
            Some(p) => format!("{:<16} Fig. {:<10} runs, without {p}", s.name, s.figure),
        })
        .collect()
}

/// The experiments `name` (not `list`) runs in a build that has (`compiled`) or lacks the
/// baseline engines: `all` runs `baselines` only where it is built; naming it where it is not
/// is refused before anything runs or is written.
fn selected(name: Name, compiled: bool) -> Result<Vec<&'static Spec>, String> {
    let specs: Vec<&Spec> = match name {
        Name::All => SPECS
            .iter()
            .filter(|s| s.name != BASELINES || compiled)
            .collect(),
        n => {
            let name = n.to_possible_value().map(|v| v.get_name().to_string());
            match SPECS.iter().find(|s| Some(s.name) == name.as_deref()) {
                Some(s) => vec![s],
                None => return Err("unknown experiment".into()),
            }
        }
    };
    if specs.iter().any(|s| s.name == BASELINES) && !compiled {
        return Err(crate::baselines::missing_feature("experiment baselines"));
    }
    Ok(specs)
}

pub fn run(a: ExperimentArgs) -> ExitCode {
    let threads = a.threads.unwrap_or_else(crate::args::default_threads);
    let scale = Scale {
        quick: a.quick,
        rows: a.rows.unwrap_or(if a.quick { 10_000 } else { 1_000_000 }),
        threads,
        duration: a.duration.unwrap_or(if a.quick { 0.5 } else { 5.0 }),
        series_duration: a.duration.unwrap_or(if a.quick { 2.0 } else { 20.0 }),
        warmup: if a.quick { 0.0 } else { 1.0 },
        runs: a.runs.unwrap_or(if a.quick { 1 } else { 3 }),
        seed: a.seed,
    };
    if a.name == Name::List {
        for line in list_lines(crate::baselines::COMPILED) {
            println!("{line}");
        }
        return ExitCode::SUCCESS;
    }
    let specs = match selected(a.name, crate::baselines::COMPILED) {
        Ok(specs) => specs,
        Err(e) => return crate::fatal("experiment", e),
    };
    if let Err(e) = std::fs::create_dir_all(&a.out) {
        return crate::fatal(&format!("creating {}", a.out.display()), e);
    }
    let progress = progress_enabled(a.no_progress);
    for spec in specs {
        if let Err(e) = run_one(spec, &scale, &a.out, progress) {
            return crate::fatal(&format!("experiment {}", spec.name), e);
        }
    }
    ExitCode::SUCCESS
}

fn settings_json(s: &Scale) -> Json {
    json!({
        "threads": s.threads,
        "rows": s.rows,
        "duration_s": s.duration,
        "time_series_duration_s": s.series_duration,
        "warmup_s": s.warmup,
        "rounds": s.runs,
        "seed": s.seed,
        "quick": s.quick,
        "thesis": "40 worker threads, 10,000,000 rows",
    })
}

/// The common flags of every run of `panel` with arguments `args` (which may set their
/// own `--threads`).
fn common_flags(s: &Scale, metric: Metric, args: &[String], json: &Path) -> Vec<String> {
    if args.first().is_some_and(|a| a == "recover") {
        // Replay into memory, write nothing: every round recovers the same files.
        return vec![
            "--verify".into(),
            "--json".into(),
            json.display().to_string(),
        ];
    }
    let duration = match metric {
        Metric::Throughput
        | Metric::ScalabilityPct
        | Metric::SpaceLocksPerTxn
        | Metric::StockScanUs
        | Metric::AbortPct
        | Metric::ConflictAbortPct
        | Metric::RestartTimePct
        | Metric::TypeThroughput(_)
        | Metric::PerTxn(_)
        | Metric::LongReaderTps
        | Metric::LongReaderAbortPct
        | Metric::RecoverySeconds(_)
        | Metric::RecoveryPhases
        | Metric::LogBytesPerTxn
        | Metric::MeanLatencyUs
        | Metric::TypeLatencyUs(..)
        | Metric::MaxChain
        | Metric::SiroPct(..)
        | Metric::SiroCutDelayMs(_) => s.duration,
        Metric::ThroughputOverTime
        | Metric::LiveMibOverTime
        | Metric::MaxChainOverTime
        | Metric::ChainPercentiles
        | Metric::LatencyOverTime
        | Metric::LogMibPerSec(_)
        | Metric::CheckpointMibPerSec => s.series_duration,
    };
    let mut flags: Vec<String> = Vec::new();
    if !args.iter().any(|a| a == "--threads") {
        flags.extend(["--threads".into(), s.threads.to_string()]);
    }
    flags.extend([
        "--duration".into(),
        duration.to_string(),
        "--warmup".into(),
        s.warmup.to_string(),
        "--seed".into(),
        s.seed.to_string(),
        "--no-progress".into(),
        "--json".into(),
        json.display().to_string(),
    ]);
    flags
}

/// One `myriad bench` run, or `myriad recover` when `args` starts with `recover` (a child
/// process of this binary); its JSON report.
fn bench(args: &[String], flags: &[String], json: &Path) -> Result<Json, String> {
    let exe = std::env::current_exe().map_err(|e| format!("finding this executable: {e}"))?;
    let sub: &[&str] = if args.first().is_some_and(|a| a == "recover") {
        &[]
    } else {
        &["bench"]
    };
    let out = std::process::Command::new(exe)
        .args(sub)
        .args(args)
        .args(flags)
        .output()
        .map_err(|e| format!("starting myriad bench: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "`myriad {}{}` failed ({}): {}",
            sub.first().map_or(String::new(), |b| format!("{b} ")),
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let text = std::fs::read_to_string(json).map_err(|e| format!("{}: {e}", json.display()))?;
    serde_json::from_str(&text).map_err(|e| format!("{}: {e}", json.display()))
}

/// A run's figures for `metric`: one (x, y) for a sweep, one per sample for a time series.
fn figures(report: &Json, metric: Metric, x: f64) -> Result<Vec<(f64, f64)>, String> {
    let num = |v: &Json, k: &str| {
        v.get(k)
            .and_then(Json::as_f64)
            .ok_or_else(|| format!("report lacks {k}"))
    };
    match metric {
        Metric::Throughput => return Ok(vec![(x, num(report, "throughput_tps")?)]),
        // Normalised to the series's first point by the caller (`normalise_to_first`).
        Metric::ScalabilityPct => {
            let threads = num(report, "threads")?;
            if threads < 1.0 {
                return Err("report names no worker threads".into());
            }
            return Ok(vec![(x, num(report, "throughput_tps")? / threads)]);
        }
        Metric::SpaceLocksPerTxn => return Ok(vec![(x, num(report, "space_locks_per_txn")?)]),
        Metric::StockScanUs => {
            let l = report
                .pointer("/latency_us/stock_scan")
                .ok_or("report lacks latency_us.stock_scan")?;
            return Ok(vec![(x, num(l, "mean")?)]);
        }
        Metric::AbortPct => return Ok(vec![(x, 100.0 * num(report, "abort_rate")?)]),
        Metric::RestartTimePct => return Ok(vec![(x, num(report, "restart_time_pct")?)]),
        Metric::ConflictAbortPct => {
            let reasons = report
                .get("abort_reasons")
                .ok_or("report lacks abort_reasons")?;
            let aborted = num(report, "aborted")?;
            let attempts = num(report, "committed")? + aborted;
            let conflicts = aborted - num(reasons, "user_abort")?;
            let pct = if attempts > 0.0 {
                100.0 * conflicts / attempts
            } else {
                0.0
            };
            return Ok(vec![(x, pct)]);
        }
        Metric::PerTxn(key) => return Ok(vec![(x, num(report, key)?)]),
        Metric::LogBytesPerTxn => {
            let l = report
                .pointer("/results/log")
                .ok_or("report lacks results.log (a run without --log)")?;
            return Ok(vec![(x, num(l, "bytes_per_txn")?)]);
        }
        Metric::MeanLatencyUs => {
            let types = report
                .get("latency_us")
                .and_then(Json::as_object)
                .ok_or("report lacks latency_us")?;
            let (mut sum, mut count) = (0.0, 0.0);
            for l in types.values() {
                let n = num(l, "count")?;
                sum += n * num(l, "mean")?;
                count += n;
            }
            if count == 0.0 {
                return Err("no transaction committed (latency_us is empty)".into());
            }
            return Ok(vec![(x, sum / count)]);
        }
        Metric::TypeLatencyUs(t, key) => {
            let l = report
                .pointer(&format!("/latency_us/{t}"))
                .ok_or_else(|| format!("report lacks latency_us.{t}"))?;
            return Ok(vec![(x, num(l, key)?)]);
        }
        Metric::RecoveryPhases => {
            return Err("a stacked panel's figures are read per series (`of_series`)".into())
        }
        Metric::RecoverySeconds(key) => {
            let ms = report.get("ms").ok_or("report lacks ms")?;
            let v = match key {
                "replay_and_index" => num(ms, "replay")? + num(ms, "index_build")?,
                k => num(ms, k)?,
            };
            return Ok(vec![(x, v / 1000.0)]);
        }
        Metric::TypeThroughput(t) => {
            // A type that never committed has no latency entry.
            let count = match report.pointer(&format!("/latency_us/{t}")) {
                Some(l) => num(l, "count")?,
                None => 0.0,
            };
            return Ok(vec![(x, count / num(report, "duration_s")?)]);
        }
        Metric::MaxChain => {
            let samples = report
                .pointer("/memory/timeseries")
                .and_then(Json::as_array)
                .ok_or("report lacks memory.timeseries")?;
            let max = samples
                .iter()
                .filter_map(|s| s.get("chain_len_max").and_then(Json::as_f64))
                .fold(0.0, f64::max);
            return Ok(vec![(x, max)]);
        }
        Metric::SiroPct(stage, class) => {
            let v = report
                .get("siro")
                .ok_or("report lacks siro (not siro storage)")?;
            let arr = |k: &str| -> Result<Vec<f64>, String> {
                v.get(k)
                    .and_then(Json::as_array)
                    .map(|a| a.iter().filter_map(Json::as_f64).collect())
                    .ok_or_else(|| format!("report lacks siro.{k}"))
            };
            let (relocated, seal, cut) = (arr("relocated")?, arr("pruned_seal")?, arr("cut")?);
            let first = num(v, "pruned_first")?;
            let total = first + relocated.iter().sum::<f64>();
            let kept = |c: usize| relocated[c] - seal[c] - cut[c];
            let n = match (stage, class) {
                ("pruned_first", _) => first,
                ("pruned_seal", Some(c)) => seal[c],
                ("cut", Some(c)) => cut[c],
                ("kept", Some(c)) => kept(c),
                ("kept", None) => kept(0) + kept(1),
                _ => return Err(format!("no siro stage {stage} {class:?}")),
            };
            let pct = if total > 0.0 { 100.0 * n / total } else { 0.0 };
            return Ok(vec![(x, pct)]);
        }
        Metric::SiroCutDelayMs(c) => {
            let v = report
                .get("siro")
                .ok_or("report lacks siro (not siro storage)")?;
            let d = v
                .pointer(&format!("/mean_cut_delay_ms/{c}"))
                .and_then(Json::as_f64)
                .ok_or("report lacks siro.mean_cut_delay_ms")?;
            return Ok(vec![(x, d)]);
        }
        Metric::LatencyOverTime => {
            let l = report
                .get("latency_timeseries")
                .and_then(Json::as_array)
                .ok_or("report lacks latency_timeseries")?;
            return l
                .iter()
                .map(|v| Ok((num(v, "t_s")?, num(v, "mean_us")?)))
                .collect();
        }
        Metric::LogMibPerSec(during) => {
            return log_rate(report, during).map(|r| vec![(x, r)]);
        }
        Metric::CheckpointMibPerSec => {
            let spans = checkpoint_spans(report)?;
            let secs: f64 = spans.iter().map(|&(a, b, _)| b - a).sum();
            let bytes: f64 = spans.iter().map(|&(_, _, n)| n).sum();
            if secs <= 0.0 {
                return Err("no checkpoint ran (results.log.checkpoint_spans is empty)".into());
            }
            return Ok(vec![(x, bytes / secs / 1048576.0)]);
        }
        Metric::LongReaderTps | Metric::LongReaderAbortPct => {
            let l = report
                .pointer("/results/long_readers")
                .ok_or("report lacks results.long_readers")?;
            return Ok(vec![match metric {
                Metric::LongReaderTps => (x, num(l, "throughput_tps")?),
                _ => (x, 100.0 * num(l, "abort_rate")?),
            }]);
        }
        _ => {}
    }
    if metric == Metric::ChainPercentiles {
        let p = report
            .pointer("/memory/chain_len_percentiles")
            .and_then(Json::as_array)
            .ok_or("report lacks memory.chain_len_percentiles")?;
        return p
            .iter()
            .enumerate()
            .map(|(q, v)| {
                v.as_f64()
                    .map(|v| (q as f64, v))
                    .ok_or_else(|| "a chain percentile is not a number".to_string())
            })
            .collect();
    }
    let samples = report
        .pointer("/memory/timeseries")
        .and_then(Json::as_array)
        .ok_or("report lacks memory.timeseries")?;
    let mut out = Vec::new();
    for (i, s) in samples.iter().enumerate() {
        let t = num(s, "t_s")?;
        match metric {
            Metric::LiveMibOverTime => out.push((t, num(s, "version_bytes")? / 1048576.0)),
            // Samples before the first chain sample have none.
            Metric::MaxChainOverTime => {
                if let Some(m) = s.get("chain_len_max").and_then(Json::as_f64) {
                    out.push((t, m));
                }
            }
            _ if i == 0 => {}
            _ => {
                let p = &samples[i - 1];
                let dt = t - num(p, "t_s")?;
                let dc = num(s, "committed")? - num(p, "committed")?;
                if dt > 1e-3 {
                    out.push((t, dc / dt));
                }
            }
        }
    }
    Ok(out)
}

/// A report's checkpoints, `(start_s, end_s, bytes)` (`results.log.checkpoint_spans`).
fn checkpoint_spans(report: &Json) -> Result<Vec<(f64, f64, f64)>, String> {
    let spans = report
        .pointer("/results/log/checkpoint_spans")
        .and_then(Json::as_array)
        .ok_or("report lacks results.log.checkpoint_spans (a run without --log)")?;
    spans
        .iter()
        .map(|v| {
            let f = |k: &str| {
                v.get(k)
                    .and_then(Json::as_f64)
                    .ok_or_else(|| format!("a checkpoint span lacks {k}"))
            };
            Ok((f("start_s")?, f("end_s")?, f("bytes")?))
        })
        .collect()
}

/// `Metric::LogMibPerSec`: log MiB per second while a checkpoint ran (`during`) or while
/// none did. The log bytes are sampled once a second (`memory.timeseries`, `log_bytes`);
/// within a sample interval they are taken to grow evenly, so an interval a checkpoint
/// overlapped for a fraction f gives f of its bytes and of its time to `during`.
fn log_rate(report: &Json, during: bool) -> Result<f64, String> {
    let spans = checkpoint_spans(report)?;
    let samples = report
        .pointer("/memory/timeseries")
        .and_then(Json::as_array)
        .ok_or("report lacks memory.timeseries")?;
    let point = |v: &Json| -> Result<(f64, f64), String> {
        let t = v.get("t_s").and_then(Json::as_f64);
        let b = v.get("log_bytes").and_then(Json::as_f64);
        t.zip(b)
            .ok_or_else(|| "a sample lacks t_s or log_bytes (a run without --log)".into())
    };
    let (mut bytes, mut secs) = (0.0, 0.0);
    for w in samples.windows(2) {
        let ((t0, b0), (t1, b1)) = (point(&w[0])?, point(&w[1])?);
        if t1 <= t0 {
            continue;
        }
        // Checkpoints run one after another, so their overlaps add up.
        let overlap: f64 = spans
            .iter()
            .map(|&(a, b, _)| (t1.min(b) - t0.max(a)).max(0.0))
            .sum::<f64>()
            .min(t1 - t0);
        let share = if during { overlap } else { t1 - t0 - overlap };
        bytes += (b1 - b0) * share / (t1 - t0);
        secs += share;
    }
    if secs < 1e-3 {
        return Err(format!(
            "no time of the measured interval {} a checkpoint",
            if during { "during" } else { "outside" }
        ));
    }
    Ok(bytes / secs / 1048576.0)
}

/// `args` with `RUN_DIR` replaced by `dir`, which must not exist yet (a left-over from an
/// interrupted experiment is removed first: it holds nothing but that run's data).
fn with_run_dir(args: &[String], dir: &Path) -> Result<Vec<String>, String> {
    if !args.iter().any(|a| a == RUN_DIR) {
        return Ok(args.to_vec());
    }
    if dir.exists() {
        std::fs::remove_dir_all(dir).map_err(|e| format!("removing {}: {e}", dir.display()))?;
    }
    Ok(args
        .iter()
        .map(|a| {
            if a == RUN_DIR {
                dir.display().to_string()
            } else {
                a.clone()
            }
        })
        .collect())
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

fn command_line(args: &[String], flags: &[String]) -> String {
    // The --json path is per run; leave it out of the command the report quotes.
    let keep: Vec<&str> = flags
        .iter()
        .map(String::as_str)
        .take_while(|f| *f != "--json")
        .collect();
    let sub = if args.first().is_some_and(|a| a == "recover") {
        "myriad"
    } else {
        "myriad bench"
    };
    format!("{sub} {} {}", args.join(" "), keep.join(" "))
}

/// The `myriad bench` arguments of a `recover` point's log (after `recovery::LOG`, up to
/// `--recovery`), if it has one.
fn log_args(args: &[String]) -> Option<Vec<String>> {
    let at = args.iter().position(|a| a == recovery::LOG)?;
    Some(
        args[at + 1..]
            .iter()
            .take_while(|a| *a != "--recovery")
            .cloned()
            .collect(),
    )
}

/// `args` with `recovery::LOG` and the log's bench arguments replaced by `dir`.
fn with_log_dir(args: &[String], dir: &Path) -> Vec<String> {
    let Some(at) = args.iter().position(|a| a == recovery::LOG) else {
        return args.to_vec();
    };
    let end = args[at..]
        .iter()
        .position(|a| a == "--recovery")
        .map_or(args.len(), |e| at + e);
    let mut out = args[..at].to_vec();
    out.push(dir.display().to_string());
    out.extend_from_slice(&args[end..]);
    out
}

/// Runs each distinct log-writing `myriad bench` command of `commands` once, into
/// `runs_dir/log-N.data`; returns (bench arguments, directory, the command as quoted).
fn prepare_logs(
    commands: &[(Vec<String>, Metric)],
    s: &Scale,
    runs_dir: &Path,
) -> Result<Vec<(Vec<String>, PathBuf, String)>, String> {
    let mut logs: Vec<(Vec<String>, PathBuf, String)> = Vec::new();
    for (args, _) in commands {
        let Some(bench_args) = log_args(args) else {
            continue;
        };
        if logs.iter().any(|(a, _, _)| *a == bench_args) {
            continue;
        }
        let dir = runs_dir.join(format!("log-{}.data", logs.len()));
        if dir.exists() {
            std::fs::remove_dir_all(&dir)
                .map_err(|e| format!("removing {}: {e}", dir.display()))?;
        }
        let json = runs_dir.join(format!("log-{}.json", logs.len()));
        let mut a = bench_args.clone();
        a.extend(["--data-dir".to_string(), dir.display().to_string()]);
        let mut flags = common_flags(s, Metric::Throughput, &a, &json);
        // The log's own duration; no warm-up (the whole run is logged, the warm-up too).
        for (flag, own) in [("--duration", None), ("--warmup", Some("0"))] {
            if let Some(w) = flags.iter().position(|f| f == flag) {
                match own {
                    Some(v) => flags[w + 1] = v.into(),
                    None if bench_args.iter().any(|a| a == flag) => {
                        flags.drain(w..w + 2);
                    }
                    None => {}
                }
            }
        }
        let quoted = command_line(&bench_args, &flags);
        println!("  writing a log: {quoted} --data-dir {}", dir.display());
        bench(&a, &flags, &json)?;
        logs.push((bench_args, dir, quoted));
    }
    Ok(logs)
}

fn run_one(spec: &Spec, s: &Scale, out: &Path, progress: bool) -> Result<(), String> {
    let panels = (spec.panels)(s);
    let runs_dir = out.join(format!("{}-runs", spec.name));
    std::fs::create_dir_all(&runs_dir).map_err(|e| format!("{}: {e}", runs_dir.display()))?;
    println!(
        "experiment {} (thesis Fig. {}): {} threads (thesis 40), {} rows (thesis 10 M), \
         {} s runs ({} s for time series) after {} s warm-up, median of {} round(s)",
        spec.name, spec.figure, s.threads, s.rows, s.duration, s.series_duration, s.warmup, s.runs
    );

    // The distinct commands, in order of first appearance; a command shared by two panels
    // (throughput and memory of one run) runs once per round.
    let mut commands: Vec<(Vec<String>, Metric)> = Vec::new();
    let mut index: HashMap<Vec<String>, usize> = HashMap::new();
    for p in &panels {
        for se in &p.series {
            for (_, args) in &se.points {
                index.entry(args.clone()).or_insert_with(|| {
                    commands.push((args.clone(), p.metric));
                    commands.len() - 1
                });
            }
        }
    }
    // Logs the `recover` points replay, written once before the rounds.
    let logs = prepare_logs(&commands, s, &runs_dir)?;
    let total = commands.len() as u64 * s.runs as u64;
    let pb = progress_bar(
        progress,
        total,
        "{prefix:>10} [{wide_bar}] {pos}/{len} {msg}",
    );
    pb.set_prefix(spec.name);
    // reports[command][round]
    let mut reports: Vec<Vec<Json>> = vec![Vec::new(); commands.len()];
    let mut done = 0;
    for round in 0..s.runs {
        for (i, (args, metric)) in commands.iter().enumerate() {
            let json_path = runs_dir.join(format!("r{round}-{i}.json"));
            let flags = common_flags(s, *metric, args, &json_path);
            done += 1;
            if progress {
                pb.set_message(args[1..].join(" "));
            } else {
                println!("  [{done}/{total}] {}", command_line(args, &flags));
            }
            let run_dir = runs_dir.join(format!("r{round}-{i}.data"));
            let args = with_run_dir(args, &run_dir)?;
            let args = match log_args(&args) {
                Some(b) => match logs.iter().find(|(a, _, _)| *a == b) {
                    Some((_, dir, _)) => with_log_dir(&args, dir),
                    None => return Err("a recover point without its log".into()),
                },
                None => args,
            };
            let report = bench(&args, &flags, &json_path);
            if run_dir.exists() {
                std::fs::remove_dir_all(&run_dir)
                    .map_err(|e| format!("removing {}: {e}", run_dir.display()))?;
            }
            reports[i].push(report?);
            pb.inc(1);
        }
    }
    pb.finish_and_clear();
    for (_, dir, _) in &logs {
        std::fs::remove_dir_all(dir).map_err(|e| format!("removing {}: {e}", dir.display()))?;
    }

    let mut panels_json = Vec::new();
    let mut charts = Vec::new();
    for p in &panels {
        let mut series_json = Vec::new();
        let mut chart_series = Vec::new();
        // Per round, the first series's figure at each of its x: the base of the ratios (a
        // series's point at an x the first series lacks has none).
        let mut base: Vec<(f64, Vec<f64>)> = Vec::new();
        let mut bands = Vec::new();
        for (k, se) in p.series.iter().enumerate() {
            let mut points_json = Vec::new();
            let mut line = Vec::new();
            // `ScalabilityPct`: per round, the series's first point's figure.
            let mut first: Option<Vec<f64>> = None;
            for (x, args) in &se.points {
                let runs = &reports[index[args]];
                let mut per_round: Vec<Vec<(f64, f64)>> = runs
                    .iter()
                    .map(|r| figures(r, p.metric.of_series(&se.label)?, *x))
                    .collect::<Result<_, _>>()?;
                if p.metric == Metric::ScalabilityPct {
                    normalise_to_first(&mut first, &mut per_round);
                }
                let flags = common_flags(s, p.metric, args, Path::new(""));
                let command = command_line(args, &flags);
                // Align rounds sample by sample (time series: the shortest one's samples).
                let n = per_round.iter().map(Vec::len).min().unwrap_or(0);
                let mut medians = Vec::new();
                for m in 0..n {
                    let mut ys: Vec<f64> = per_round.iter().map(|r| r[m].1).collect();
                    medians.push((per_round[0][m].0, median(&mut ys)));
                }
                // A run's summary figure: the sweep's value, or a time series's mean.
                let summary: Vec<f64> = per_round
                    .iter()
                    .map(|r| r.iter().map(|f| f.1).sum::<f64>() / r.len().max(1) as f64)
                    .collect();
                if k == 0 {
                    base.push((*x, summary.clone()));
                }
                let base_here = base.iter().find(|(bx, _)| bx == x).map(|(_, b)| b);
                let ratio = base_here.map_or(f64::NAN, |b| {
                    same_round_ratio(&summary, b, p.metric.smallest_base())
                });
                let mut sm = summary.clone();
                let value = median(&mut sm);
                if p.metric.is_sweep() {
                    line.extend(medians.iter().copied());
                    points_json.push(json!({
                        "x": x, "median": value, "rounds": summary,
                        "ratio_to_first_series": ratio, "command": command,
                    }));
                } else {
                    line = medians.clone();
                    // The first round's checkpoints, shaded in the SVG (thesis Fig. 4.11).
                    let spans = runs
                        .first()
                        .and_then(|r| checkpoint_spans(r).ok())
                        .unwrap_or_default();
                    bands.extend(spans.iter().map(|&(a, b, _)| (k, a, b)));
                    points_json.push(json!({
                        "mean": value, "rounds_mean": summary,
                        "ratio_to_first_series": ratio,
                        "samples": medians.iter().map(|(t, y)| json!([t, y])).collect::<Vec<_>>(),
                        "checkpoints_first_round": spans.iter().map(|(a, b, _)| json!([a, b])).collect::<Vec<_>>(),
                        "command": command,
                    }));
                }
            }
            series_json.push(json!({ "label": se.label, "points": points_json }));
            chart_series.push((se.label.clone(), line));
        }
        if p.metric.stacked() {
            share_of_bar(&mut series_json);
        }
        print_panel(p, &series_json);
        panels_json.push(json!({
            "title": p.title,
            "x": p.x_label,
            "y": p.metric.y_label(),
            "series": series_json,
        }));
        charts.push(plot::Chart {
            title: p.title.clone(),
            x_label: p.x_label.to_string(),
            y_label: p.metric.y_label().to_string(),
            series: chart_series,
            bands,
            stacked: p.metric.stacked(),
        });
    }
    let result = json!({
        "experiment": spec.name,
        "figure": spec.figure,
        "thesis_finding": spec.finding,
        "not_built": spec.partial,
        "settings": settings_json(s),
        "panels": panels_json,
        "runs_dir": runs_dir.display().to_string(),
        "logs": logs.iter().map(|(_, _, q)| q.clone()).collect::<Vec<_>>(),
    });
    let json_path = out.join(format!("{}.json", spec.name));
    let text = serde_json::to_string_pretty(&result).map_err(|e| e.to_string())? + "\n";
    std::fs::write(&json_path, text).map_err(|e| format!("{}: {e}", json_path.display()))?;
    let svg_path = out.join(format!("{}.svg", spec.name));
    let title = format!("{} (thesis Fig. {})", spec.name, spec.figure);
    plot::write_svg(&svg_path, &title, &charts)
        .map_err(|e| format!("{}: {e}", svg_path.display()))?;
    println!("  thesis: {}", spec.finding);
    if let Some(p) = spec.partial {
        println!("  not run: {p}");
    }
    println!(
        "  wrote {} and {}\n",
        json_path.display(),
        svg_path.display()
    );
    Ok(())
}

/// The panel as a table: one row per x (sweeps) or one per series (time series: the mean).
/// A stacked panel's points: each layer's share of its bar (`share_of_bar`, the layer's
/// median over the sum of the layers' medians at that x) replaces the ratio to the first
/// series, which compares nothing there.
/// The median over rounds of `values[r] / base[r]`, leaving out rounds whose base is not
/// above `smallest` (NaN if none is left).
fn same_round_ratio(values: &[f64], base: &[f64], smallest: f64) -> f64 {
    let mut ratios: Vec<f64> = values
        .iter()
        .zip(base)
        .filter(|(_, b)| **b > smallest)
        .map(|(v, b)| v / b)
        .collect();
    median(&mut ratios)
}

/// `Metric::ScalabilityPct`: each round's figure of a point (`per_round[r]`, one figure) as
/// a percentage of the same round's figure at the series's first point, which the first
/// call (that point) stores in `first`. A round whose first figure is not positive gives
/// no percentage (NaN), as a ratio to a zero base has none.
fn normalise_to_first(first: &mut Option<Vec<f64>>, per_round: &mut [Vec<(f64, f64)>]) {
    let base = first.get_or_insert_with(|| {
        per_round
            .iter()
            .map(|r| r.first().map_or(0.0, |f| f.1))
            .collect()
    });
    for (r, b) in per_round.iter_mut().zip(base.iter()) {
        for f in r.iter_mut() {
            f.1 = if *b > 0.0 { 100.0 * f.1 / b } else { f64::NAN };
        }
    }
}

fn share_of_bar(series: &mut [Json]) {
    let median_at = |s: &Json, x: &Json| {
        s["points"].as_array().and_then(|ps| {
            ps.iter()
                .find(|p| &p["x"] == x)
                .and_then(|p| p["median"].as_f64())
        })
    };
    let xs: Vec<Json> = series
        .iter()
        .flat_map(|s| s["points"].as_array().into_iter().flatten())
        .map(|p| p["x"].clone())
        .collect();
    let totals: Vec<(Json, f64)> = xs
        .into_iter()
        .map(|x| {
            let t = series.iter().filter_map(|s| median_at(s, &x)).sum();
            (x, t)
        })
        .collect();
    for s in series.iter_mut() {
        for p in s["points"].as_array_mut().into_iter().flatten() {
            let total = totals
                .iter()
                .find(|(x, _)| x == &p["x"])
                .map_or(0.0, |(_, t)| *t);
            let share = p["median"]
                .as_f64()
                .filter(|_| total > 0.0)
                .map(|m| m / total);
            if let Some(o) = p.as_object_mut() {
                o.remove("ratio_to_first_series");
                o.insert("share_of_bar".into(), json!(share));
            }
        }
    }
}

fn print_panel(p: &Panel, series: &[Json]) {
    let y = p.metric.y_label();
    println!("  {} — {y}", p.title);
    let f = |v: &Json, k: &str| v.get(k).and_then(Json::as_f64).unwrap_or(f64::NAN);
    if p.metric.is_sweep() {
        // Each series's column is as wide as its label (at least 18).
        let widths: Vec<usize> = series
            .iter()
            .map(|s| s["label"].as_str().unwrap_or("").chars().count().max(16) + 2)
            .collect();
        let head: Vec<String> = series
            .iter()
            .zip(&widths)
            .map(|(s, &w)| format!("{:>w$}", s["label"].as_str().unwrap_or("")))
            .collect();
        // A stacked panel's layers are parts of one bar: each one's share of it.
        let (rel, rel_key) = if p.metric.stacked() {
            ("share of the bar".to_string(), "share_of_bar")
        } else {
            (
                format!("ratio to {}", series[0]["label"]),
                "ratio_to_first_series",
            )
        };
        println!("    {:>14}{}   ({rel})", p.x_label, head.join(""));
        let n = series[0]["points"].as_array().map_or(0, Vec::len);
        for j in 0..n {
            let x = f(&series[0]["points"][j], "x");
            let cells: Vec<String> = series
                .iter()
                .zip(&widths)
                .map(|(s, &w)| {
                    // The series's point at this x (a series may lack some of the first's).
                    let none = Json::Null;
                    let pt = s["points"]
                        .as_array()
                        .and_then(|ps| ps.iter().find(|p| f(p, "x") == x))
                        .unwrap_or(&none);
                    let median = f(pt, "median");
                    // Small figures (per-transaction counts, percentages) keep two decimals.
                    let prec = if median.abs() < 100.0 { 2 } else { 0 };
                    format!("{:>w$}", format!("{median:.prec$} ({:.2})", f(pt, rel_key)))
                })
                .collect();
            println!("    {x:>14}{}", cells.join(""));
        }
    } else {
        for s in series {
            let pt = &s["points"][0];
            println!(
                "    {:>8}: mean {:.1} (ratio to {}: {:.2})",
                s["label"].as_str().unwrap_or(""),
                f(pt, "mean"),
                series[0]["label"],
                f(pt, "ratio_to_first_series")
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Layers 1 and 3 at x = 1, 0 and 2 at x = 2: shares 0.25/0.75 and 0/1; the ratio to the
    /// first series is gone.
    #[test]
    fn a_stacked_panel_reports_each_layers_share_of_its_bar() {
        let point = |x: f64, m: f64| json!({"x": x, "median": m, "ratio_to_first_series": 1.0});
        let mut series = vec![
            json!({"label": "a", "points": [point(1.0, 1.0), point(2.0, 0.0)]}),
            json!({"label": "b", "points": [point(1.0, 3.0), point(2.0, 2.0)]}),
        ];
        share_of_bar(&mut series);
        let share = |s: usize, j: usize| series[s]["points"][j]["share_of_bar"].as_f64();
        assert_eq!(
            (share(0, 0), share(1, 0), share(0, 1), share(1, 1)),
            (Some(0.25), Some(0.75), Some(0.0), Some(1.0))
        );
        assert!(series[0]["points"][0]
            .get("ratio_to_first_series")
            .is_none());
        // Every layer's label names a recovery phase; anything else is an error.
        for (label, key) in RECOVERY_PHASES {
            assert_eq!(
                Metric::RecoveryPhases.of_series(label),
                Ok(Metric::RecoverySeconds(key))
            );
        }
        assert!(Metric::RecoveryPhases.of_series("replay").is_err());
        assert_eq!(Metric::Throughput.of_series("x"), Ok(Metric::Throughput));
    }

    #[test]
    fn run_dir_is_substituted_only_where_asked() {
        let dir = std::env::temp_dir().join(format!("myriad-exp-{}", std::process::id()));
        let a: Vec<String> = ["ycsb", "--data-dir", RUN_DIR].map(String::from).into();
        let b = with_run_dir(&a, &dir).unwrap();
        assert_eq!(b[2], dir.display().to_string());
        let plain: Vec<String> = ["ycsb", "--rows", "10"].map(String::from).into();
        assert_eq!(with_run_dir(&plain, &dir).unwrap(), plain);
    }

    #[test]
    fn the_baselines_are_listed_selected_and_refused_by_whether_they_are_built() {
        for compiled in [false, true] {
            let lines = list_lines(compiled);
            assert_eq!(lines.len(), SPECS.len());
            let b = lines.iter().find(|l| l.starts_with(BASELINES)).unwrap();
            assert_eq!(b.ends_with("runs"), compiled, "{b}");
            assert_eq!(b.contains("cargo feature `baselines`"), !compiled, "{b}");
            let all = selected(Name::All, compiled).unwrap();
            assert_eq!(all.iter().any(|s| s.name == BASELINES), compiled);
            assert_eq!(all.len(), SPECS.len() - usize::from(!compiled));
        }
        assert_eq!(selected(Name::Baselines, true).unwrap()[0].name, BASELINES);
        let e = selected(Name::Baselines, false).err().unwrap();
        assert!(
            e.starts_with("experiment baselines needs the cargo feature `baselines`"),
            "{e}"
        );
        assert!(e.contains("--features baselines"), "{e}");
        assert_eq!(
            selected(Name::ChainOrder, false).unwrap()[0].name,
            "chain-order"
        );
    }

    #[test]
    fn baselines_run_every_cell_in_memory_and_durable_with_myriad_first() {
        let s = Scale {
            quick: false,
            rows: 1000,
            threads: 2,
            duration: 1.0,
            series_duration: 1.0,
            warmup: 0.0,
            runs: 3,
            seed: 1,
        };
        let panels = baselines(&s);
        // 4 YCSB cells, Smallbank, TPC-C at 1 and 2 warehouses; in memory and durable.
        assert_eq!(panels.len(), 14);
        for p in &panels {
            assert_eq!(p.series[0].label, "myriad", "{}", p.title);
            let durable = p.title.contains("durable");
            for se in &p.series {
                let xs: Vec<f64> = se.points.iter().map(|(x, _)| *x).collect();
                assert_eq!(xs, vec![1.0, 2.0], "{}", p.title);
                for (_, a) in &se.points {
                    assert_eq!(a.iter().any(|x| x == RUN_DIR), durable, "{a:?}");
                    let e = a.iter().position(|x| x == "--engine").unwrap();
                    assert_eq!(a[e + 1], se.label);
                }
            }
        }
        let tpcc = panels
            .iter()
            .filter(|p| p.title.starts_with("TPC-C"))
            .count();
        assert_eq!(tpcc, 4);
    }

    /// Figs. 24/27: each round's per-thread figure over the same round's first point's;
    /// a zero base gives no percentage; `figures` divides by the report's threads.
    #[test]
    fn scalability_is_per_round_per_thread_and_normalised_to_the_first_point() {
        let r = |tps: f64, threads: u32| json!({ "throughput_tps": tps, "threads": threads });
        assert_eq!(
            figures(&r(300.0, 2), Metric::ScalabilityPct, 2.0).unwrap(),
            [(2.0, 150.0)]
        );
        assert!(figures(&r(300.0, 0), Metric::ScalabilityPct, 2.0).is_err());
        // Two rounds: 100 and 200 txn/s per thread at the first point, then 90 and 220.
        let mut first = None;
        let mut at1 = vec![vec![(1.0, 100.0)], vec![(1.0, 200.0)]];
        normalise_to_first(&mut first, &mut at1);
        assert_eq!(at1, [vec![(1.0, 100.0)], vec![(1.0, 100.0)]]);
        let mut at2 = vec![vec![(2.0, 90.0)], vec![(2.0, 220.0)]];
        normalise_to_first(&mut first, &mut at2);
        assert_eq!(at2, [vec![(2.0, 90.0)], vec![(2.0, 110.0)]]);
        let (mut zero, mut at) = (Some(vec![0.0]), vec![vec![(2.0, 5.0)]]);
        normalise_to_first(&mut zero, &mut at);
        assert!(at[0][0].1.is_nan());
    }

    /// Ratios are per round; an abort share of 0.0003 % is no base (pomvcc-logs printed a
    /// ratio of 3,768.91 to it), a throughput is.
    #[test]
    fn a_percentage_near_zero_is_no_base_for_a_ratio() {
        let pct = Metric::AbortPct.smallest_base();
        assert!(same_round_ratio(&[9.7, 9.6], &[0.0003, 0.0002], pct).is_nan());
        assert_eq!(same_round_ratio(&[9.0, 6.0], &[3.0, 0.0002], pct), 3.0);
        let tps = Metric::Throughput.smallest_base();
        assert_eq!(
            same_round_ratio(&[2.0, 6.0, 3.0], &[1.0, 2.0, 3.0], tps),
            2.0
        );
        assert_eq!(same_round_ratio(&[0.2], &[0.05], tps), 4.0);
    }

    #[test]
    fn median_of_odd_even_and_empty() {
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&mut [4.0, 1.0, 3.0, 2.0]), 2.5);
        assert!(median(&mut []).is_nan());
    }

    /// Table 4.2's rates: a checkpoint from 0.5 s to 1.5 s overlaps half of each of two
    /// 1 s intervals, which wrote 2 and 4 MiB; it gets half of each (3 MiB in 1 s), the rest
    /// (3 MiB in 1 s) is outside. The checkpoint wrote 8 MiB in 1 s. Fig. 4.11's latency is
    /// the report's per-second means.
    #[test]
    fn log_bandwidth_splits_each_interval_by_its_overlap_with_checkpoints() {
        const MIB: u64 = 1048576;
        let r = json!({
            "memory": {"timeseries": [
                {"t_s": 0.0, "log_bytes": 0},
                {"t_s": 1.0, "log_bytes": 2 * MIB},
                {"t_s": 2.0, "log_bytes": 6 * MIB},
            ]},
            "results": {"log": {"checkpoint_spans": [
                {"start_s": -0.2, "end_s": -0.1, "bytes": MIB},
                {"start_s": 0.5, "end_s": 1.5, "bytes": 7 * MIB},
            ]}},
            "latency_timeseries": [
                {"t_s": 1.0, "mean_us": 10.5, "count": 3},
                {"t_s": 1.7, "mean_us": 20.0, "count": 1},
            ],
        });
        let rate = |m| figures(&r, m, 2.0).unwrap();
        assert_eq!(rate(Metric::LogMibPerSec(true)), vec![(2.0, 3.0)]);
        assert_eq!(rate(Metric::LogMibPerSec(false)), vec![(2.0, 3.0)]);
        assert_eq!(rate(Metric::CheckpointMibPerSec), vec![(2.0, 8.0 / 1.1)]);
        assert_eq!(
            rate(Metric::LatencyOverTime),
            vec![(1.0, 10.5), (1.7, 20.0)]
        );
        // A run without checkpoints or without a log has no bandwidth to split.
        let bare = json!({"memory": {"timeseries": [{"t_s": 0.0}, {"t_s": 1.0}]},
                          "results": {"log": {"checkpoint_spans": []}}});
        assert!(figures(&bare, Metric::LogMibPerSec(true), 1.0).is_err());
        assert!(figures(&bare, Metric::CheckpointMibPerSec, 1.0).is_err());
        assert!(figures(&json!({}), Metric::LogMibPerSec(false), 1.0).is_err());
    }

    #[test]
    fn time_series_figures_are_interval_throughput_and_live_memory() {
        let r = json!({"memory": {"timeseries": [
            {"t_s": 0.0, "committed": 0, "version_bytes": 1048576},
            {"t_s": 1.0, "committed": 100, "version_bytes": 2097152},
            {"t_s": 1.5, "committed": 200, "version_bytes": 2097152},
        ]}});
        assert_eq!(
            figures(&r, Metric::ThroughputOverTime, 0.0).unwrap(),
            vec![(1.0, 100.0), (1.5, 200.0)]
        );
        assert_eq!(
            figures(&r, Metric::LiveMibOverTime, 0.0).unwrap(),
            vec![(0.0, 1.0), (1.0, 2.0), (1.5, 2.0)]
        );
        assert!(figures(&json!({}), Metric::Throughput, 0.0).is_err());
    }

    /// A `--quick` scale on 2 threads.
    fn quick_scale() -> Scale {
        Scale {
            quick: true,
            rows: 100,
            threads: 2,
            duration: 0.5,
            series_duration: 1.0,
            warmup: 0.0,
            runs: 1,
            seed: 1,
        }
    }

    #[test]
    fn a_recover_point_names_its_log_and_gets_its_directory() {
        let a: Vec<String> = [
            "recover",
            recovery::LOG,
            "tpcc",
            "--log",
            "command",
            "--recovery",
            "pacman",
            "--threads",
            "2",
        ]
        .map(String::from)
        .into();
        assert_eq!(
            log_args(&a).unwrap(),
            ["tpcc", "--log", "command"].map(String::from)
        );
        assert_eq!(
            with_log_dir(&a, Path::new("/x/log-0.data")),
            [
                "recover",
                "/x/log-0.data",
                "--recovery",
                "pacman",
                "--threads",
                "2"
            ]
            .map(String::from)
        );
        // A bench point has no log and is left alone.
        let b: Vec<String> = ["ycsb", "--threads", "2"].map(String::from).into();
        assert!(log_args(&b).is_none());
        assert_eq!(with_log_dir(&b, Path::new("/x")), b);
        let json = Path::new("/x/r.json");
        assert_eq!(
            common_flags(&quick_scale(), Metric::RecoverySeconds("replay"), &a, json),
            ["--verify", "--json", "/x/r.json"].map(String::from)
        );
        assert!(command_line(&a, &[]).starts_with("myriad recover @log tpcc"));
        assert!(command_line(&b, &[]).starts_with("myriad bench ycsb"));
    }

    #[test]
    fn every_name_but_list_and_all_has_a_spec_and_back() {
        for n in Name::value_variants() {
            let name = n.to_possible_value().unwrap().get_name().to_string();
            let found = SPECS.iter().any(|s| s.name == name);
            assert_eq!(found, !matches!(n, Name::List | Name::All), "{name}");
        }
        assert_eq!(SPECS.len(), Name::value_variants().len() - 2);
    }

    #[test]
    fn every_experiment_has_panels_of_two_or_more_series() {
        let s = quick_scale();
        for spec in SPECS {
            let panels = (spec.panels)(&s);
            assert!(!panels.is_empty(), "{}", spec.name);
            for p in &panels {
                assert!(p.series.len() >= 2, "{}: {}", spec.name, p.title);
                assert!(p.series.iter().all(|se| !se.points.is_empty()));
            }
        }
    }
}
