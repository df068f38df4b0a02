//! The report of one run: a serializable `Report` (one JSON object) and its
//! human summary. Every report carries the full configuration, the seed, and a fidelity block
//! saying exactly what was measured and where (git commit, machine, build profile).

use super::{MemSample, RunResult, TypeLatency, LATENCY_BUCKET_NAMES};
use crate::args::Prefault;
use myriad::{AbortReason, ChainStats, Config, Stats};
use serde::ser::{SerializeMap, Serializer};
use serde::Serialize;
use serde_json::Value as Json;
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// Git commit of the build (`-dirty` when tracked files were modified), from build.rs.
pub const GIT_COMMIT: &str = env!("MYRIAD_GIT_COMMIT");
/// Cargo profile of the build (`debug` or `release`), from build.rs.
pub const BUILD_PROFILE: &str = env!("MYRIAD_BUILD_PROFILE");

#[derive(Clone, Debug, Serialize)]
pub struct Report {
    pub workload: String,
    /// Every flag value of the command line.
    pub config: Json,
    pub seed: u64,
    pub threads: usize,
    /// Measured interval (wall clock), without warm-up and load.
    pub duration_s: f64,
    pub warmup_s: f64,
    pub committed: u64,
    /// Transactions committed before the measured interval began (the warm-up; workers are
    /// in it even with `--warmup 0` until the driver starts the interval). Not in the
    /// throughput.
    pub warmup_committed: u64,
    /// Aborted attempts of measured transactions (each retry that failed counts once).
    pub aborted: u64,
    /// Measured transactions still being retried when the run ended (neither committed nor
    /// counted as latency).
    pub abandoned: u64,
    /// aborted / (committed + aborted).
    pub abort_rate: f64,
    /// Share of the workers' measured time (threads × duration) that measured transactions
    /// spent in abort-and-restart — aborted attempts and the backoffs before their retries,
    /// and abandoned transactions — in percent (thesis Fig. 3.9a). A heal is not counted:
    /// it is no abort.
    #[serde(default)]
    pub restart_time_pct: f64,
    /// Aborts by `AbortReason::name()`; every reason is present.
    pub abort_reasons: BTreeMap<&'static str, u64>,
    /// User aborts (counted in `abort_reasons.user_abort`, never retried) per transaction type.
    pub user_aborts_by_type: BTreeMap<String, u64>,
    /// Aborted attempts by a serialization failure (every reason of `abort_reasons` but
    /// `user_abort`; retried) per transaction type.
    pub conflict_aborts_by_type: BTreeMap<String, u64>,
    /// Commits per transaction type over the workers' whole runs, warm-up included, in the
    /// workload's type order (the order of `scripts/instructions.sh`'s `txn_type_N`).
    #[serde(default)]
    pub all_committed_by_type: Vec<(String, u64)>,
    /// committed / duration_s.
    pub throughput_tps: f64,
    /// Per transaction type; latency runs from the first attempt's start to the commit.
    pub latency_us: BTreeMap<String, LatencySummary>,
    /// Per transaction type: counts in the ranges of thesis Table 3.1.
    pub latency_buckets: BTreeMap<String, LatencyBuckets>,
    /// Over all types, per second of the measured interval in which transactions ended
    /// (were acknowledged, for durable commits): their mean latency (thesis Fig. 4.11).
    pub latency_timeseries: Vec<LatencySample>,
    pub memory: Memory,
    /// Time spent in garbage collection during the measured interval, summed over threads.
    pub gc_ms: f64,
    /// Atomic read-modify-writes on shared words per committed transaction (global + record).
    pub shared_rmw_per_txn: f64,
    pub global_rmw_per_txn: f64,
    pub record_rmw_per_txn: f64,
    /// Increments of the commit timestamp per committed transaction: one per end timestamp
    /// drawn under global-counter and locked-counter; closes of the open commit timestamp
    /// (conflicts, floors, ticks) under partial-order.
    pub ts_increments_per_txn: f64,
    /// Update commits that drew an end timestamp per increment: the commit group size under
    /// partial-order, 1 under the counters.
    pub ts_group_size: f64,
    /// partial-order: CTs − BTs at the end of the run (commit timestamps a new reader does
    /// not see yet; 0 under the counters).
    pub ts_visibility_lag: u64,
    /// Global (engine-wide) read-modify-writes per end timestamp drawn, i.e. per update
    /// commit (those that then failed validation included); 0 without update commits.
    pub global_rmw_per_update_txn: f64,
    /// partial-order, over the measured interval: sampled commits (one at a time, the first
    /// released after the previous sample became readable), the mean `CTs − BTs` each saw at
    /// its release, and the time from its release until a new begin reads it (µs, lower
    /// edge of a histogram bucket 1/8 wide); 0 samples and nulls under the counters.
    pub ts_lag_samples: u64,
    pub ts_lag_gap_mean: f64,
    pub ts_lag_us_p50: Option<f64>,
    pub ts_lag_us_p99: Option<f64>,
    /// Memory-space lock acquisitions (version allocations and frees, `--memory-spaces`)
    /// per committed transaction; 0 without spaces.
    pub space_locks_per_txn: f64,
    /// Field reads that waited for a Preparing writer's outcome, per committed transaction
    /// (writes always; reads under protocols without commit dependencies).
    pub preparing_waits_per_txn: f64,
    /// Commit dependencies taken (speculative reads and ignores, Hekaton §2.7) per committed
    /// transaction.
    pub commit_deps_per_txn: f64,
    /// Transactions that reached commit with a dependency unresolved and waited, per
    /// committed transaction.
    pub commit_dep_waits_per_txn: f64,
    /// `hybrid`: transactions run under 2PL (retries of a validation failure) per committed
    /// transaction.
    pub hybrid_2pl_per_txn: f64,
    /// `healing`: heals (re-executions of a call under its validation locks instead of an
    /// abort) per committed transaction.
    #[serde(default)]
    pub heals_per_txn: f64,
    /// `healing`: replaced rows found to be false invalidations (changed only in columns the
    /// call neither reads nor writes; taken as current, not healed) per committed transaction.
    #[serde(default)]
    pub false_invalidations_per_txn: f64,
    /// `healing`: primary-key lookups of heals answered by the access cache, and those that
    /// went to the index, per committed transaction.
    #[serde(default)]
    pub heal_cache_hits_per_txn: f64,
    #[serde(default)]
    pub heal_index_lookups_per_txn: f64,
    /// `healing`: rows another transaction was still inserting that a call's read phase read
    /// past as absent (spec A.4 R4), per committed transaction.
    #[serde(default)]
    pub heal_reads_past_inserts_per_txn: f64,
    /// `healing`: a heal's point UPDATEs taken as done from the access cache (memoized
    /// re-execution), and those it ran again, per committed transaction.
    #[serde(default)]
    pub heal_ops_reused_per_txn: f64,
    #[serde(default)]
    pub heal_ops_rerun_per_txn: f64,
    /// `healing`: calls whose lock-free validation of the rows they only read failed, so
    /// that they took every lock in order, per committed transaction.
    #[serde(default)]
    pub heal_relocks_per_txn: f64,
    /// `ermia-ssi` (ERMIA §3.6), per committed transaction: pivots aborted by safe retry,
    /// READ ONLY reads of old versions left untracked, aborts those untracked reads caused.
    pub ssi_safe_retries_per_txn: f64,
    pub ssi_untracked_reads_per_txn: f64,
    pub ssi_old_read_aborts_per_txn: f64,
    /// Version storage `siro` (vDriver §3.3–3.4): what happened to the versions writers
    /// moved out of their records, over the measured interval; absent under other storage.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub siro: Option<SiroReport>,
    /// Time to create and load the tables.
    pub load_s: f64,
    /// What the workload itself observed (outcome counts, its invariant check), in its order.
    #[serde(serialize_with = "as_map")]
    pub results: Vec<(&'static str, Json)>,
    pub fidelity: Fidelity,
}

/// `siro`'s counters over the measured interval, per class `[hot, cold, llt]` where
/// per class (vDriver Fig. 15's prune stages, Fig. 16's cut delay).
#[derive(Clone, Debug, Serialize)]
pub struct SiroReport {
    /// Versions copied from their record slot into a segment of the class.
    pub relocated: [u64; 3],
    /// Versions dropped when their slot was taken, dead by the zones (1st prune).
    pub pruned_first: u64,
    /// Relocated versions dropped with their segment at its seal (2nd prune).
    pub pruned_seal: [u64; 3],
    /// Relocated versions dropped later with a segment the cutter found dead.
    pub cut: [u64; 3],
    /// Segments the cutter freed, and their mean time from seal to cut (ms).
    pub segments_cut: [u64; 3],
    pub mean_cut_delay_ms: [f64; 3],
    /// Segment bytes live at the end.
    pub segment_bytes_live: u64,
}

impl SiroReport {
    fn of(s0: &Stats, s1: &Stats) -> SiroReport {
        let d3 = |f: fn(&Stats) -> [u64; 3]| {
            let (a, b) = (f(s0), f(s1));
            [0, 1, 2].map(|c| b[c].saturating_sub(a[c]))
        };
        let segments_cut = d3(|s| s.siro_segments_cut);
        let delay = d3(|s| s.siro_cut_delay_ns);
        SiroReport {
            relocated: d3(|s| s.siro_relocated),
            pruned_first: s1.siro_pruned_first.saturating_sub(s0.siro_pruned_first),
            pruned_seal: d3(|s| s.siro_pruned_seal),
            cut: d3(|s| s.siro_cut),
            segments_cut,
            mean_cut_delay_ms: [0, 1, 2].map(|c| {
                if segments_cut[c] == 0 {
                    0.0
                } else {
                    delay[c] as f64 / segments_cut[c] as f64 / 1e6
                }
            }),
            segment_bytes_live: s1.siro_segment_bytes_live(),
        }
    }
}

fn as_map<S: Serializer>(entries: &[(&'static str, Json)], s: S) -> Result<S::Ok, S::Error> {
    let mut m = s.serialize_map(Some(entries.len()))?;
    for (k, v) in entries {
        m.serialize_entry(k, v)?;
    }
    m.end()
}

#[derive(Clone, Debug, Serialize)]
pub struct LatencySummary {
    pub count: u64,
    /// Thesis Table 3.3's lower percentiles (25th, 80th) besides the usual ones.
    pub p25: f64,
    pub p50: f64,
    pub p80: f64,
    pub p95: f64,
    pub p99: f64,
    pub p999: f64,
    pub mean: f64,
    pub max: f64,
}

impl LatencySummary {
    fn of(l: &TypeLatency) -> LatencySummary {
        let h = &l.hist;
        let us = |ns: u64| ns as f64 / 1000.0;
        let empty = h.is_empty();
        let q = |q: f64| {
            if empty {
                0.0
            } else {
                us(h.value_at_quantile(q))
            }
        };
        LatencySummary {
            count: h.len(),
            p25: q(0.25),
            p50: q(0.50),
            p80: q(0.80),
            p95: q(0.95),
            p99: q(0.99),
            p999: q(0.999),
            mean: if empty { 0.0 } else { h.mean() / 1000.0 },
            max: if empty { 0.0 } else { us(h.max()) },
        }
    }
}

/// Transaction counts per latency range (thesis Table 3.1).
#[derive(Clone, Debug, Serialize)]
pub struct LatencyBuckets {
    #[serde(rename = "<10us")]
    pub lt_10us: u64,
    #[serde(rename = "10-100us")]
    pub us_10_100: u64,
    #[serde(rename = "100us-1ms")]
    pub us_100_ms_1: u64,
    #[serde(rename = "1-10ms")]
    pub ms_1_10: u64,
    #[serde(rename = "10-100ms")]
    pub ms_10_100: u64,
    #[serde(rename = ">=100ms")]
    pub ge_100ms: u64,
}

impl LatencyBuckets {
    fn of(b: [u64; 6]) -> LatencyBuckets {
        LatencyBuckets {
            lt_10us: b[0],
            us_10_100: b[1],
            us_100_ms_1: b[2],
            ms_1_10: b[3],
            ms_10_100: b[4],
            ge_100ms: b[5],
        }
    }
    fn counts(&self) -> [u64; 6] {
        [
            self.lt_10us,
            self.us_10_100,
            self.us_100_ms_1,
            self.ms_1_10,
            self.ms_10_100,
            self.ge_100ms,
        ]
    }
}

/// One second of `Report::latency_timeseries`.
#[derive(Clone, Debug, Serialize)]
pub struct LatencySample {
    /// The end of the second (of the measured interval, for its last, partial second).
    pub t_s: f64,
    pub mean_us: f64,
    pub count: u64,
}

#[derive(Clone, Debug, Serialize)]
pub struct Memory {
    /// Bytes of live (allocated, not reclaimed) versions at the end of the run.
    pub version_bytes: u64,
    pub live_versions: u64,
    pub max_chain_len: u64,
    /// Tuples per chain length (non-empty buckets); the last bucket counts that length or more.
    pub chain_len_histogram: Vec<ChainBucket>,
    /// One sample per second of the measured interval, plus one at its end.
    pub timeseries: Vec<MemSample>,
    /// With a chain sampler (`bench llt`): the chain length at each percentile 0, 1, ...,
    /// 100 of the sample whose longest chain was the run's longest (vDriver Fig. 14).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub chain_len_percentiles: Vec<u64>,
    /// Version bytes allocated during the measured interval per committed transaction.
    pub version_bytes_per_txn: f64,
    pub versions_per_txn: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct ChainBucket {
    pub chain_len: u64,
    /// True for the last bucket: chains of `chain_len` versions or more.
    pub or_longer: bool,
    pub tuples: u64,
}

/// Where the run happened.
#[derive(Clone, Debug, Serialize)]
pub struct Machine {
    pub nproc: usize,
    pub os: String,
    pub arch: &'static str,
    pub cpu: String,
    pub memory_gib: f64,
}

impl Machine {
    pub fn detect() -> Machine {
        let read = |p: &str| std::fs::read_to_string(p).unwrap_or_default();
        let cpuinfo = read("/proc/cpuinfo");
        let cpu = cpuinfo
            .lines()
            .find(|l| l.starts_with("model name"))
            .and_then(|l| l.split_once(':'))
            .map(|(_, v)| v.trim().to_string())
            .unwrap_or_else(|| "unknown".into());
        let kernel = read("/proc/sys/kernel/osrelease");
        let os = match kernel.trim() {
            "" => std::env::consts::OS.to_string(),
            k => format!("{} {k}", std::env::consts::OS),
        };
        let mem_kib: f64 = read("/proc/meminfo")
            .lines()
            .find(|l| l.starts_with("MemTotal:"))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0.0);
        Machine {
            nproc: std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1),
            os,
            arch: std::env::consts::ARCH,
            cpu,
            memory_gib: (mem_kib / (1024.0 * 1024.0) * 10.0).round() / 10.0,
        }
    }
}

/// The page size the heap was asked for, with the kernel's transparent-huge-page mode.
fn pages_description(huge_pages: bool, prefault: Prefault) -> String {
    let thp = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled")
        .ok()
        .and_then(|s| {
            let (_, rest) = s.split_once('[')?;
            Some(rest.split_once(']')?.0.to_string())
        })
        .unwrap_or_else(|| "unknown".into());
    let pages = if huge_pages {
        format!("2 MiB huge pages requested (mimalloc large OS pages; kernel THP mode: {thp})")
    } else {
        format!("allocator default, no huge pages requested (kernel THP mode: {thp})")
    };
    let how = if prefault.auto {
        " (--prefault-mib auto)"
    } else {
        ""
    };
    let purging = if crate::purges_freed_memory() {
        "freed memory returned to the OS (allocator default)"
    } else {
        "no purging"
    };
    if prefault.mib > 0 {
        let mib = prefault.mib;
        format!("{pages}; {mib} MiB faulted in before the load{how}, {purging}")
    } else {
        format!("{pages}; nothing faulted in before the load{how}, {purging}")
    }
}

/// What exactly was measured: the workload's own entries (in its order), then the engine
/// configuration and the environment.
#[derive(Clone, Debug)]
pub struct Fidelity {
    /// The engine measured: `myriad`, or a baseline's name and version (`--engine`).
    pub engine: String,
    pub workload: Vec<(&'static str, Json)>,
    pub protocol: String,
    pub isolation: String,
    /// Commit dependencies (`Config::commit_dependencies`): "on", "off", or "n/a" where the
    /// protocol always waits.
    pub commit_deps: String,
    /// ERMIA-SSI's optimisations (`--ermia-safe-retry`, `--ermia-old-age`), "n/a" under
    /// other protocols.
    pub ermia_ssi: String,
    /// Read validation: "on", or for OCC⁻/SILO⁻ (`--unsafe-no-validation`) a line that starts
    /// with `UNSAFE` (the run is not serializable).
    pub validation: String,
    /// The timestamp source (`Config::timestamps`).
    pub timestamps: String,
    pub gc: String,
    /// With GC on: a worker collects after this many of its commits.
    pub gc_interval_txns: u32,
    pub version_storage: String,
    /// Background threads of GC `vacuum`.
    pub gc_threads: usize,
    /// Memory spaces versions come from (0: the general allocator, per-thread pools).
    pub memory_spaces: usize,
    pub index_pointers: String,
    pub non_inline: String,
    pub durability: String,
    pub pages: String,
    pub seed: u64,
    pub git_commit: String,
    pub machine: Machine,
    pub build_profile: String,
}

impl Fidelity {
    pub fn new(
        workload: Vec<(&'static str, Json)>,
        config: &Config,
        seed: u64,
        huge_pages: bool,
        prefault: Prefault,
    ) -> Fidelity {
        Fidelity {
            engine: "myriad".into(),
            workload,
            protocol: config.get_protocol().name().into(),
            isolation: config.get_isolation().name().into(),
            commit_deps: match (
                Config::can_speculate(config.get_protocol()),
                config.get_commit_dependencies(),
            ) {
                (true, true) => "on",
                (true, false) => "off",
                (false, _) => "n/a",
            }
            .into(),
            ermia_ssi: if config.get_protocol() == myriad::Protocol::ErmiaSsi {
                format!(
                    "safe retry {}, old-version reads {}",
                    if config.get_ermia_safe_retry() {
                        "on"
                    } else {
                        "off"
                    },
                    match config.get_ermia_old_read_age() {
                        Some(age) => format!("untracked at age >= {age}"),
                        None => "tracked".into(),
                    }
                )
            } else {
                "n/a".into()
            },
            validation: if config.get_unsafe_no_validation() {
                "UNSAFE: off (--unsafe-no-validation, OCC⁻/SILO⁻ of thesis §3.5; not serializable, updates can be lost)".into()
            } else if matches!(
                config.get_protocol(),
                myriad::Protocol::Healing | myriad::Protocol::Mvocc
            ) {
                let on_off = |b: bool| if b { "on" } else { "off" };
                let cache = if config.get_protocol() == myriad::Protocol::Healing {
                    format!(
                        "; access cache {} (--heal-access-cache: heals reach rows of keys looked up before without an index lookup, and keep the buffered writes of UPDATEs whose inputs and rows are unchanged)",
                        on_off(config.get_heal_access_cache())
                    )
                } else {
                    String::new()
                };
                format!(
                    "on; column check {} (--column-check: a procedure's read of a row replaced \
                     only in columns it does not read is valid){cache}",
                    on_off(config.get_column_check())
                )
            } else {
                "on".into()
            },
            timestamps: match config.get_timestamps() {
                myriad::TimestampPolicy::PartialOrder => {
                    format!("partial-order ({} counters)", config.get_po_counters())
                }
                t => t.name().into(),
            },
            gc: config.get_gc().name().into(),
            gc_interval_txns: config.get_gc_interval_txns(),
            gc_threads: config.get_gc_threads(),
            memory_spaces: config.get_memory_spaces(),
            index_pointers: config.get_index_pointers().to_string(),
            non_inline: config.get_non_inline().to_string(),
            version_storage: config.get_storage().name().into(),
            durability: match config.get_log() {
                myriad::LogPolicy::None => "none: in-memory".into(),
                l => format!(
                    "{} logging in {}, {}, fsync {}{}",
                    l.name(),
                    config
                        .get_data_dir()
                        .map_or(String::new(), |d| d.display().to_string()),
                    match config.get_log_manager() {
                        myriad::LogManagerKind::Ermia =>
                            "ERMIA log manager (one log, end timestamp = LSN)".to_string(),
                        _ => format!("epoch group commit, {} logger(s)", config.get_loggers()),
                    },
                    config.get_fsync(),
                    if config.get_fsync() == myriad::FsyncPolicy::Never {
                        " (NOT durable: commits are acknowledged once written to the OS)"
                    } else {
                        ""
                    }
                ),
            },
            pages: pages_description(huge_pages, prefault),
            seed,
            git_commit: GIT_COMMIT.into(),
            machine: Machine::detect(),
            build_profile: BUILD_PROFILE.into(),
        }
    }

    /// Every entry in display order.
    fn entries(&self) -> Vec<(&'static str, Json)> {
        let mut v = vec![("engine", Json::from(self.engine.clone()))];
        v.extend(self.workload.iter().cloned());
        v.extend([
            ("protocol", Json::from(self.protocol.clone())),
            ("isolation", Json::from(self.isolation.clone())),
            ("commit_deps", Json::from(self.commit_deps.clone())),
            ("ermia_ssi", Json::from(self.ermia_ssi.clone())),
            ("validation", Json::from(self.validation.clone())),
            ("timestamps", Json::from(self.timestamps.clone())),
            ("gc", Json::from(self.gc.clone())),
            ("gc_interval_txns", Json::from(self.gc_interval_txns)),
            ("gc_threads", Json::from(self.gc_threads)),
            ("memory_spaces", Json::from(self.memory_spaces)),
            ("index_pointers", Json::from(self.index_pointers.clone())),
            ("non_inline", Json::from(self.non_inline.clone())),
            ("version_storage", Json::from(self.version_storage.clone())),
            ("durability", Json::from(self.durability.clone())),
            ("retry_policy", Json::from(super::RETRY_POLICY)),
            ("memory_pages", Json::from(self.pages.clone())),
            ("seed", Json::from(self.seed)),
            ("git_commit", Json::from(self.git_commit.clone())),
            (
                "machine",
                serde_json::to_value(&self.machine).unwrap_or(Json::Null),
            ),
            ("build_profile", Json::from(self.build_profile.clone())),
        ]);
        v
    }
}

impl Serialize for Fidelity {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        as_map(&self.entries(), s)
    }
}

/// Everything a report is made from.
pub struct ReportInput<'a> {
    pub workload: &'a str,
    pub config: Json,
    pub seed: u64,
    pub threads: usize,
    pub warmup_s: f64,
    pub load_s: f64,
    pub txn_types: &'a [&'a str],
    pub run: &'a RunResult,
    /// Engine counters after the run.
    pub end: Stats,
    pub chains: ChainStats,
    pub results: Vec<(&'static str, Json)>,
    pub fidelity: Fidelity,
}

/// `a / b`, 0 when `b` is 0.
fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}

impl Report {
    pub fn new(i: ReportInput<'_>) -> Report {
        let r = i.run;
        let duration_s = r.duration.as_secs_f64();
        let committed = r.committed;
        let aborted = r.aborted_total();
        let per_txn = |x: u64| {
            if committed == 0 {
                0.0
            } else {
                x as f64 / committed as f64
            }
        };
        let (s0, s1) = (&r.stats_start, &r.stats_end);
        let d = |f: fn(&Stats) -> u64| f(s1).saturating_sub(f(s0));
        let global = d(|s| s.global_rmw);
        let record = d(|s| s.record_rmw);
        let last = i.chains.histogram.len().saturating_sub(1);
        let chain_len_histogram = i
            .chains
            .histogram
            .iter()
            .enumerate()
            .filter(|(_, &n)| n > 0)
            .map(|(len, &tuples)| ChainBucket {
                chain_len: len as u64,
                or_longer: len == last,
                tuples,
            })
            .collect();
        // Per-type counts keyed by the workload's transaction type names.
        let by_type = |counts: &[u64]| -> BTreeMap<String, u64> {
            i.txn_types
                .iter()
                .zip(counts)
                .map(|(t, n)| (t.to_string(), *n))
                .collect()
        };
        Report {
            workload: i.workload.to_string(),
            config: i.config,
            seed: i.seed,
            threads: i.threads,
            duration_s,
            warmup_s: i.warmup_s,
            committed,
            warmup_committed: r.warmup_committed,
            aborted,
            abandoned: r.abandoned,
            abort_rate: if committed + aborted == 0 {
                0.0
            } else {
                aborted as f64 / (committed + aborted) as f64
            },
            restart_time_pct: {
                let worker_ns = r.duration.as_nanos() as f64 * i.threads as f64;
                if worker_ns > 0.0 {
                    (100.0 * r.restart_ns as f64 / worker_ns).min(100.0)
                } else {
                    0.0
                }
            },
            abort_reasons: AbortReason::ALL
                .iter()
                .zip(r.aborted)
                .map(|(reason, n)| (reason.name(), n))
                .collect(),
            user_aborts_by_type: by_type(&r.user_aborted),
            conflict_aborts_by_type: by_type(&r.conflict_aborted),
            all_committed_by_type: i
                .txn_types
                .iter()
                .zip(&r.all_committed)
                .map(|(t, n)| (t.to_string(), *n))
                .collect(),
            throughput_tps: if duration_s > 0.0 {
                committed as f64 / duration_s
            } else {
                0.0
            },
            latency_us: i
                .txn_types
                .iter()
                .zip(&r.latency)
                .map(|(t, l)| (t.to_string(), LatencySummary::of(l)))
                .collect(),
            latency_buckets: i
                .txn_types
                .iter()
                .zip(&r.latency)
                .map(|(t, l)| (t.to_string(), LatencyBuckets::of(l.buckets)))
                .collect(),
            latency_timeseries: r
                .latency_series()
                .into_iter()
                .map(|(t_s, mean_us, count)| LatencySample {
                    t_s: (t_s * 1e3).round() / 1e3,
                    mean_us: (mean_us * 10.0).round() / 10.0,
                    count,
                })
                .collect(),
            memory: Memory {
                version_bytes: i.end.live_version_bytes(),
                live_versions: i.end.live_versions(),
                max_chain_len: i.chains.max_chain_len,
                chain_len_histogram,
                timeseries: r.timeseries.clone(),
                chain_len_percentiles: r.chain_percentiles.clone(),
                version_bytes_per_txn: per_txn(d(|s| s.version_bytes_allocated)),
                versions_per_txn: per_txn(d(|s| s.versions_allocated)),
            },
            gc_ms: d(|s| s.gc_ns) as f64 / 1e6,
            shared_rmw_per_txn: per_txn(global + record),
            global_rmw_per_txn: per_txn(global),
            record_rmw_per_txn: per_txn(record),
            ts_increments_per_txn: per_txn(d(|s| s.ts_increments)),
            ts_group_size: ratio(d(|s| s.end_ts_draws), d(|s| s.ts_increments)),
            ts_visibility_lag: i.end.ts_visibility_lag,
            global_rmw_per_update_txn: ratio(global, d(|s| s.end_ts_draws)),
            ts_lag_samples: d(|s| s.ts_lag_samples),
            ts_lag_gap_mean: ratio(d(|s| s.ts_lag_gap_sum), d(|s| s.ts_lag_samples)),
            ts_lag_us_p50: s1.ts_lag_us(s0, 0.50),
            ts_lag_us_p99: s1.ts_lag_us(s0, 0.99),
            space_locks_per_txn: per_txn(d(|s| s.space_locks)),
            preparing_waits_per_txn: per_txn(d(|s| s.preparing_waits)),
            commit_deps_per_txn: per_txn(d(|s| s.commit_deps)),
            commit_dep_waits_per_txn: per_txn(d(|s| s.commit_dep_waits)),
            hybrid_2pl_per_txn: per_txn(d(|s| s.hybrid_2pl)),
            heals_per_txn: per_txn(d(|s| s.heals)),
            false_invalidations_per_txn: per_txn(d(|s| s.false_invalidations)),
            heal_cache_hits_per_txn: per_txn(d(|s| s.heal_cache_hits)),
            heal_index_lookups_per_txn: per_txn(d(|s| s.heal_index_lookups)),
            heal_reads_past_inserts_per_txn: per_txn(d(|s| s.heal_reads_past_inserts)),
            heal_ops_reused_per_txn: per_txn(d(|s| s.heal_ops_reused)),
            heal_ops_rerun_per_txn: per_txn(d(|s| s.heal_ops_rerun)),
            heal_relocks_per_txn: per_txn(d(|s| s.heal_relocks)),
            ssi_safe_retries_per_txn: per_txn(d(|s| s.ssi_safe_retries)),
            ssi_untracked_reads_per_txn: per_txn(d(|s| s.ssi_untracked_reads)),
            ssi_old_read_aborts_per_txn: per_txn(d(|s| s.ssi_old_read_aborts)),
            siro: (i.fidelity.version_storage == "siro").then(|| SiroReport::of(s0, s1)),
            load_s: i.load_s,
            results: i.results,
            fidelity: i.fidelity,
        }
    }

    /// The terminal summary.
    pub fn human(&self, latency_histogram: bool) -> String {
        let mut o = String::new();
        let _ = self.write_human(&mut o, latency_histogram);
        o
    }

    fn write_human(&self, o: &mut String, latency_histogram: bool) -> std::fmt::Result {
        writeln!(
            o,
            "myriad bench {}: {} threads, {:.2} s measured after {:.2} s warm-up (load {:.2} s), seed {}",
            self.workload, self.threads, self.duration_s, self.warmup_s, self.load_s, self.seed
        )?;
        writeln!(o)?;
        writeln!(
            o,
            "  throughput   {:>14} txn/s",
            thousands(self.throughput_tps.round() as u64)
        )?;
        writeln!(o, "  committed    {:>14}", thousands(self.committed))?;
        let reasons: Vec<String> = self
            .abort_reasons
            .iter()
            .filter(|(_, &n)| n > 0)
            .map(|(k, n)| format!("{k} {}", thousands(*n)))
            .collect();
        writeln!(
            o,
            "  aborted      {:>14}   ({:.2}% of attempts, {:.1}% of worker time in abort-and-restart){}{}",
            thousands(self.aborted),
            self.abort_rate * 100.0,
            self.restart_time_pct,
            if reasons.is_empty() {
                String::new()
            } else {
                format!(": {}", reasons.join(", "))
            },
            if self.abandoned > 0 {
                format!("; {} abandoned at the end", self.abandoned)
            } else {
                String::new()
            }
        )?;
        for (label, by_type) in [
            ("conflicts by type", &self.conflict_aborts_by_type),
            ("user aborts", &self.user_aborts_by_type),
        ] {
            let nonzero: Vec<String> = by_type
                .iter()
                .filter(|(_, &n)| n > 0)
                .map(|(k, n)| format!("{k} {}", thousands(*n)))
                .collect();
            if !nonzero.is_empty() {
                writeln!(o, "  {label}  {}", nonzero.join(", "))?;
            }
        }
        writeln!(o)?;
        // The first column fits the longest transaction-type name.
        let w = self.latency_us.keys().map(String::len).fold(15, usize::max);
        writeln!(
            o,
            "  {:<w$} {:>12} {:>9} {:>9} {:>9} {:>9} {:>9}",
            "latency (us)", "count", "p50", "p95", "p99", "p99.9", "max"
        )?;
        for (t, l) in &self.latency_us {
            writeln!(
                o,
                "  {:<w$} {:>12} {:>9.1} {:>9.1} {:>9.1} {:>9.1} {:>9.1}",
                t,
                thousands(l.count),
                l.p50,
                l.p95,
                l.p99,
                l.p999,
                l.max
            )?;
        }
        if latency_histogram {
            writeln!(o)?;
            write!(o, "  {:<w$}", "latency ranges")?;
            for name in LATENCY_BUCKET_NAMES {
                write!(o, " {name:>10}")?;
            }
            writeln!(o)?;
            for (t, b) in &self.latency_buckets {
                write!(o, "  {t:<w$}")?;
                for n in b.counts() {
                    write!(o, " {:>10}", thousands(n))?;
                }
                writeln!(o)?;
            }
        }
        writeln!(o)?;
        if self.fidelity.engine != "myriad" {
            writeln!(
                o,
                "  engine       {}: Myriad's version-memory, GC and contention counters do not \
                 apply (zero in the JSON report)",
                self.fidelity.engine
            )?;
            return self.write_results_and_fidelity(o);
        }
        let m = &self.memory;
        writeln!(
            o,
            "  memory       {} live versions, {} of versions at the end; {:.0} B ({:.2} versions) allocated per txn",
            thousands(m.live_versions),
            bytes(m.version_bytes),
            m.version_bytes_per_txn,
            m.versions_per_txn
        )?;
        let total: u64 = m.chain_len_histogram.iter().map(|b| b.tuples).sum();
        let chains: Vec<String> = m
            .chain_len_histogram
            .iter()
            .take(6)
            .map(|b| {
                format!(
                    "{}{}: {:.2}%",
                    b.chain_len,
                    if b.or_longer { "+" } else { "" },
                    100.0 * b.tuples as f64 / total.max(1) as f64
                )
            })
            .collect();
        writeln!(
            o,
            "  chains       max length {}; tuples by length {}",
            m.max_chain_len,
            chains.join(", ")
        )?;
        if let [p0, .., p100] = m.chain_len_percentiles[..] {
            let p = |q: usize| m.chain_len_percentiles[q];
            writeln!(
                o,
                "  worst sample chains by percentile: p0 {p0}, p50 {}, p90 {}, p99 {}, max {p100}",
                p(50),
                p(90),
                p(99),
            )?;
        }
        if let (Some(first), Some(peak)) = (
            m.timeseries.first(),
            m.timeseries.iter().max_by_key(|s| s.version_bytes),
        ) {
            writeln!(
                o,
                "  over time    {} at start, peak {} at {:.1} s ({} samples)",
                bytes(first.version_bytes),
                bytes(peak.version_bytes),
                peak.t_s,
                m.timeseries.len()
            )?;
        }
        writeln!(
            o,
            "  gc           {:.1} ms;  shared RMW/txn {:.2} (global {:.2}, record {:.2})",
            self.gc_ms, self.shared_rmw_per_txn, self.global_rmw_per_txn, self.record_rmw_per_txn,
        )?;
        writeln!(
            o,
            "  timestamps   {};  increments/txn {:.4}, group size {:.2}, visibility lag {}, global RMW/update txn {:.4}",
            self.fidelity.timestamps,
            self.ts_increments_per_txn,
            self.ts_group_size,
            self.ts_visibility_lag,
            self.global_rmw_per_update_txn,
        )?;
        if let (Some(p50), Some(p99)) = (self.ts_lag_us_p50, self.ts_lag_us_p99) {
            writeln!(
                o,
                "  visibility   commit→readable p50 {p50:.1} µs, p99 {p99:.1} µs;  CTs − BTs at commit {:.2} ({} samples)",
                self.ts_lag_gap_mean,
                thousands(self.ts_lag_samples),
            )?;
        }
        writeln!(
            o,
            "  Preparing    waits/txn {:.4};  commit dependencies/txn {:.4} (waited {:.4})",
            self.preparing_waits_per_txn, self.commit_deps_per_txn, self.commit_dep_waits_per_txn
        )?;
        if self.fidelity.memory_spaces > 0 {
            writeln!(
                o,
                "  spaces       {} memory spaces;  space locks/txn {:.2}",
                self.fidelity.memory_spaces, self.space_locks_per_txn
            )?;
        }
        if self.hybrid_2pl_per_txn > 0.0 {
            writeln!(
                o,
                "  hybrid       2PL retries/txn {:.4} (after a validation failure)",
                self.hybrid_2pl_per_txn
            )?;
        }
        if self.fidelity.protocol == "healing" {
            writeln!(
                o,
                "  healing      heals/txn {:.4} (a stale read re-executes the call under its locks); \
                 false invalidations/txn {:.4} (replaced only in columns the call does not use)",
                self.heals_per_txn, self.false_invalidations_per_txn
            )?;
            writeln!(
                o,
                "  heal lookups access cache/txn {:.4}, index/txn {:.4} (primary-key lookups of heals); \
                 reads past uncommitted inserts/txn {:.4}",
                self.heal_cache_hits_per_txn,
                self.heal_index_lookups_per_txn,
                self.heal_reads_past_inserts_per_txn
            )?;
            writeln!(
                o,
                "  heal ops     reused/txn {:.4}, run again/txn {:.4} (point UPDATEs a heal took from the access cache as done, and those it ran again)",
                self.heal_ops_reused_per_txn, self.heal_ops_rerun_per_txn
            )?;
            writeln!(
                o,
                "  relocks      relocks/txn {:.4} (a call locks the rows it writes and validates those it only read without locks; these found one stale and took every lock in order)",
                self.heal_relocks_per_txn
            )?;
        }
        if self.fidelity.protocol == "mvocc" && self.fidelity.validation.contains("column check on")
        {
            writeln!(
                o,
                "  validation   false invalidations/txn {:.4} (reads of rows replaced only in columns the call does not read: valid)",
                self.false_invalidations_per_txn
            )?;
        }
        if let Some(v) = &self.siro {
            let per = |a: [u64; 3]| {
                let c = myriad::version::siro::CLASSES;
                format!(
                    "{} {} / {} {} / {} {}",
                    c[0],
                    thousands(a[0]),
                    c[1],
                    thousands(a[1]),
                    c[2],
                    thousands(a[2])
                )
            };
            writeln!(
                o,
                "  siro         relocated {}; 1st prune {}; 2nd prune at seal {}; cut {} (mean delay ms {:.1} / {:.1} / {:.1}); segments {} live",
                per(v.relocated),
                thousands(v.pruned_first),
                per(v.pruned_seal),
                per(v.cut),
                v.mean_cut_delay_ms[0],
                v.mean_cut_delay_ms[1],
                v.mean_cut_delay_ms[2],
                bytes(v.segment_bytes_live),
            )?;
        }
        if self.fidelity.protocol == "ermia-ssi" {
            writeln!(
                o,
                "  ermia-ssi    safe retries/txn {:.4};  untracked old reads/txn {:.2} (aborts they caused/txn {:.4})",
                self.ssi_safe_retries_per_txn,
                self.ssi_untracked_reads_per_txn,
                self.ssi_old_read_aborts_per_txn
            )?;
        }
        self.write_results_and_fidelity(o)
    }

    fn write_results_and_fidelity(&self, o: &mut String) -> std::fmt::Result {
        if !self.results.is_empty() {
            writeln!(o)?;
            writeln!(o, "  results")?;
            for (k, v) in &self.results {
                writeln!(o, "    {:<26} {}", k, plain(v))?;
            }
        }
        writeln!(o)?;
        writeln!(o, "  fidelity")?;
        for (k, v) in self.fidelity.entries() {
            writeln!(o, "    {:<26} {}", k, plain(&v))?;
        }
        Ok(())
    }
}

/// A JSON value as plain text: strings unquoted, objects as `k v, k v`.
fn plain(v: &Json) -> String {
    match v {
        Json::String(s) => s.clone(),
        Json::Object(m) => m
            .iter()
            .map(|(k, v)| format!("{k} {}", plain(v)))
            .collect::<Vec<_>>()
            .join(", "),
        other => other.to_string(),
    }
}

/// `1234567` → `1,234,567`.
pub fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Bytes in binary units.
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut x = n as f64;
    let mut u = 0;
    while x >= 1024.0 && u < UNITS.len() - 1 {
        x /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{n} B")
    } else {
        format!("{x:.1} {}", UNITS[u])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn number_formatting() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(1234567), "1,234,567");
        assert_eq!(bytes(512), "512 B");
        assert_eq!(bytes(1536), "1.5 KiB");
        assert_eq!(bytes(3 << 30), "3.0 GiB");
    }
}
