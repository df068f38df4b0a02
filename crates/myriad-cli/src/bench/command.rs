//! `myriad bench <workload>`: the subcommand's body. Opens the database the flags describe,
//! creates and loads the workload, runs it with the runner (`bench::run`), and prints (and with
//! `--json` writes) the report. A durable run marks its load in a table (`LOAD_MARKER`) that
//! `myriad recover` and `myriad check` read.

use super::footprint;
use super::report::{Fidelity, Report, ReportInput};
use super::{progress_bar, progress_enabled, RunOptions};
use crate::args::{BenchArgs, LltArgs, SmallbankArgs, TatpArgs, TpccArgs, TpccMix, YcsbArgs};
use crate::baselines::{self, Engine};
use crate::workload::llt::{self, Llt};
use crate::workload::no_fragment::NoFragmentBench;
use crate::workload::smallbank::{self, Smallbank};
use crate::workload::tatp::{self, Tatp};
use crate::workload::tpcc::{self, Tpcc, TpccBench};
use crate::workload::ycsb::{self, RowLayout, Ycsb};
use crate::workload::Workload;
use crate::{check_data_dir, fatal, usage_error};
use myriad::{
    Config, Database, Error, GcPolicy, IndexPointers, Isolation, LogManagerKind, NonInline,
    ProcedureExec, Protocol,
};
use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// Least time workers get to finish their last transaction after the measured interval
/// before the run is declared stalled (see `bench::RunOptions::stop_grace`).
pub(crate) const STOP_GRACE_MIN_S: f64 = 10.0;

/// Opens the database; configurations the engine rejects are usage errors (exit 2).
pub(crate) fn open(b: &BenchArgs) -> Result<Database, ExitCode> {
    let mut config = Config::new()
        .protocol(b.protocol)
        .version_storage(b.storage.unwrap_or(b.protocol.natural_storage()))
        .isolation(b.isolation())
        .gc(b.gc)
        .gc_interval_txns(b.gc_interval)
        .gc_threads(b.gc_threads as usize)
        .siro_segment_bytes(b.siro_segment_bytes as usize)
        .siro_llt_multiple(b.siro_llt_multiple)
        .siro_cold_multiple(b.siro_cold_multiple)
        .memory_spaces(b.memory_spaces as usize)
        .index_pointers(b.index_pointers)
        .non_inline(b.non_inline)
        .unsafe_no_validation(b.unsafe_no_validation)
        .record_history(b.check_history)
        .timestamps(b.timestamps)
        .po_tick(Duration::from_micros(b.po_tick_us))
        .po_counters(b.po_counters)
        .procedures(b.procedures)
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
    if let Some(on) = b.commit_deps {
        config = config.commit_dependencies(on);
    }
    if let Some(on) = b.heal_access_cache {
        config = config.heal_access_cache(on);
    }
    if let Some(on) = b.column_check {
        config = config.column_check(on);
    }
    if let Some(on) = b.ermia_safe_retry {
        config = config.ermia_safe_retry(on);
    }
    if let Some(age) = b.ermia_old_age {
        config = config.ermia_old_read_age(age);
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

/// The table a durable benchmark run marks its load in: `loading` before the first row,
/// `complete` once every row (and the checkpoint after them) is durable.
pub(crate) const LOAD_MARKER: &str = "myriad_bench_load";
/// The marker's state once the load is complete and durable.
pub(crate) const LOAD_COMPLETE: &str = "complete";

/// Marks the load of a durable run as `state` (creating the marker table first).
pub(crate) fn mark_load(db: &Database, state: &str) -> myriad::Result<()> {
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
pub(crate) fn bench_load_state(db: &Database) -> Option<String> {
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

/// `myriad bench ycsb`.
pub(crate) fn bench_ycsb(a: YcsbArgs) -> ExitCode {
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
        writes_per_txn: a.writes_per_txn.map(|w| w as usize),
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

/// `myriad bench llt` (Myriad only).
pub(crate) fn bench_llt(a: LltArgs) -> ExitCode {
    let b = &a.bench;
    let params = llt::Params {
        tables: a.tables,
        rows: a.rows,
        row_bytes: a.row_bytes,
        zipf: a.zipf,
        threads: b.threads,
        llt: a.llt,
        llt_at_s: a.llt_at,
        llt_hold_s: a.llt_hold,
        llt_reads: a.llt_reads,
        long_readers: a.long_readers as usize,
        long_read_pct: a.long_read_pct,
        rate: a.rate,
        max_version_bytes: a.max_version_mib.map(|m| m.saturating_mul(1 << 20)),
        chain_sample: a.chain_sample,
        isolation: b.isolation(),
        warmup_s: b.warmup,
        duration_s: b.duration,
    };
    if let Err(m) = params.validate() {
        usage_error(m);
    }
    if a.long_readers > 0
        && !myriad::Config::isolation_levels(b.protocol).contains(&myriad::Isolation::Serializable)
    {
        usage_error(format!(
            "--long-readers runs Serializable READ ONLY transactions, which --protocol {} \
             does not offer (it offers {})",
            b.protocol.name(),
            myriad::Config::isolation_levels(b.protocol)
                .iter()
                .map(|l| l.name())
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    let config = serde_json::to_value(&a).unwrap_or_default();
    bench_workload("llt", config, b, false, |db| Llt::create(db, params))
}

/// `myriad bench ycsb --engine sqlite|redb|fjall`: refuses what the baseline cannot honour
/// (exit 2), then runs it (`baselines`).
fn bench_ycsb_baseline(a: &YcsbArgs, params: ycsb::Params, config: serde_json::Value) -> ExitCode {
    refuse_for_baseline(
        a.engine,
        &a.bench,
        &[
            ("--as-procedure", a.as_procedure),
            ("--secondary-indexes", a.secondary_indexes != 0),
        ],
    );
    #[cfg(feature = "baselines")]
    {
        baselines::bench_ycsb(a.engine, params, baseline_args(&a.bench, config))
    }
    #[cfg(not(feature = "baselines"))]
    {
        // `refuse_for_baseline` refused every baseline.
        let _ = (params, config);
        usage_error(format!("--engine {}: not in this build", a.engine.name()))
    }
}

/// Refuses (exit 2) a baseline this build does not have, and the flags only Myriad can
/// honour (`extra`: the workload's own, with whether they were given).
fn refuse_for_baseline(engine: Engine, b: &BenchArgs, extra: &[(&str, bool)]) {
    if let Err(m) = baselines::check_available(engine) {
        usage_error(m);
    }
    let mut flags = vec![
        ("--protocol", b.protocol != Protocol::Mvocc),
        ("--storage", b.storage.is_some()),
        ("--isolation", b.isolation() != Isolation::Serializable),
        ("--commit-deps", b.commit_deps.is_some()),
        ("--ermia-safe-retry", b.ermia_safe_retry.is_some()),
        ("--ermia-old-age", b.ermia_old_age.is_some()),
        ("--unsafe-no-validation", b.unsafe_no_validation),
        ("--column-check", b.column_check.is_some()),
        ("--heal-access-cache", b.heal_access_cache.is_some()),
        ("--check-history", b.check_history),
        (
            "--timestamps",
            b.timestamps != myriad::TimestampPolicy::GlobalCounter,
        ),
        ("--procedures", b.procedures != ProcedureExec::Compiled),
        ("--gc", b.gc != GcPolicy::Txn),
        ("--gc-threads", b.gc_threads != 1),
        ("--siro-segment-bytes", b.siro_segment_bytes != 65536),
        ("--siro-llt-multiple", b.siro_llt_multiple != 200),
        ("--siro-cold-multiple", b.siro_cold_multiple != 10),
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
        ("--stop-after", b.stop_after.is_some()),
    ];
    flags.extend_from_slice(extra);
    if let Err(m) = baselines::refuse_myriad_flags(engine, &flags) {
        usage_error(m);
    }
}

/// The options of a baseline run that are not the workload's own.
#[cfg(feature = "baselines")]
fn baseline_args(b: &BenchArgs, config: serde_json::Value) -> baselines::BaselineArgs {
    baselines::BaselineArgs {
        warmup_s: b.warmup,
        duration_s: b.duration,
        seed: b.seed,
        data_dir: b.data_dir.clone(),
        fsync_always: b.fsync == myriad::FsyncPolicy::Always,
        json: b.json.clone(),
        latency_histogram: b.latency_histogram,
        huge_pages: b.huge_pages,
        prefault_mib: b.prefault_mib,
        config,
    }
}

/// `--adhoc-pct` only changes what a command log holds: refused (exit 2) without
/// `--log command` rather than run as if it meant something.
fn refuse_adhoc_without_command_log(pct: f64, b: &BenchArgs) {
    if pct > 0.0 && b.log != Some(myriad::LogPolicy::Command) && b.protocol != Protocol::Healing {
        usage_error(format!(
            "--adhoc-pct: ad-hoc transactions differ from calls only in a command log (they \
             are logged as rows) or under --protocol healing (they run as OCC); it needs \
             --log command or --protocol healing, got {}",
            b.log
                .map_or("no --log".to_string(), |l| format!("--log {}", l.name()))
        ));
    }
}

/// `myriad bench smallbank`.
pub(crate) fn bench_smallbank(a: SmallbankArgs) -> ExitCode {
    let b = &a.bench;
    let params = smallbank::Params {
        accounts: a.accounts,
        theta: a.theta,
        isolation: b.isolation(),
        adhoc_pct: a.adhoc_pct,
    };
    if let Err(m) = params.validate() {
        usage_error(m);
    }
    refuse_adhoc_without_command_log(a.adhoc_pct, b);
    fits_in_memory(footprint::smallbank(a.accounts), b);
    let config = serde_json::to_value(&a).unwrap_or_default();
    if a.engine != Engine::Myriad {
        refuse_for_baseline(a.engine, b, &[("--adhoc-pct", a.adhoc_pct > 0.0)]);
        #[cfg(feature = "baselines")]
        return baselines::bench_smallbank(a.engine, params, b.threads, baseline_args(b, config));
        #[cfg(not(feature = "baselines"))]
        usage_error(format!("--engine {}: not in this build", a.engine.name()));
    }
    bench_workload("smallbank", config, b, a.check, |db| {
        Smallbank::create(db, params)
    })
}

/// `myriad bench tpcc`.
pub(crate) fn bench_tpcc(a: TpccArgs) -> ExitCode {
    let b = &a.bench;
    let params = tpcc::Params {
        warehouses: a.warehouses,
        scale: tpcc::Scale::standard(),
        remote_pct: a.remote_pct,
        no_inserts: a.no_inserts,
        updates_only: a.mix == TpccMix::Updates,
        isolation: b.isolation(),
        adhoc_pct: a.adhoc_pct,
    };
    refuse_adhoc_without_command_log(a.adhoc_pct, b);
    fits_in_memory(footprint::tpcc(a.warehouses.unsigned_abs()), b);
    let config = serde_json::to_value(&a).unwrap_or_default();
    if a.engine != Engine::Myriad {
        if a.mix == TpccMix::NewOrderFragment {
            usage_error(format!(
                "--engine {}: --mix new-order-fragment runs on myriad only",
                a.engine.name()
            ));
        }
        if matches!(a.engine, Engine::Redb | Engine::Fjall) {
            usage_error(format!(
                "--engine {}: TPC-C runs on myriad and sqlite only",
                a.engine.name()
            ));
        }
        refuse_for_baseline(
            a.engine,
            b,
            &[
                ("--stock-scan-threads", a.stock_scan_threads != 0),
                ("--adhoc-pct", a.adhoc_pct > 0.0),
            ],
        );
        #[cfg(feature = "baselines")]
        return baselines::bench_tpcc(
            a.engine,
            params,
            b.threads,
            a.check,
            baseline_args(b, config),
        );
        #[cfg(not(feature = "baselines"))]
        usage_error(format!("--engine {}: not in this build", a.engine.name()));
    }
    if a.mix == TpccMix::NewOrderFragment {
        for (flag, given) in [
            ("--check", a.check),
            ("--stock-scan-threads", a.stock_scan_threads != 0),
            ("--adhoc-pct", a.adhoc_pct > 0.0),
        ] {
            if given {
                usage_error(format!(
                    "{flag}: applies to the standard mix, not --mix new-order-fragment"
                ));
            }
        }
        return bench_workload("tpcc", config, b, false, |db| {
            NoFragmentBench::create(db, Tpcc::create(db, params, b.seed)?)
        });
    }
    if b.unsafe_no_validation && !a.no_inserts {
        // Measured: 1 warehouse, 2 threads, 146 commits in a second, then only
        // `unique_conflict` retries of New-Order.
        usage_error(
            "--unsafe-no-validation with TPC-C's inserts: a commit without validation can \
             lose an update of a district's d_next_o_id (a Payment writes back the DISTRICT \
             row it read), and from then on every New-Order of that district collides with \
             an order that exists and retries for good; add --no-inserts (New-Order and \
             Delivery then leave ORDERS, NEW_ORDER and ORDER_LINE as they are)"
                .to_string(),
        );
    }
    bench_workload("tpcc", config, b, a.check, |db| {
        Ok(TpccBench {
            t: Tpcc::create(db, params, b.seed)?,
            terminals: b.threads,
            scanners: a.stock_scan_threads as usize,
        })
    })
}

/// `myriad bench tatp`.
pub(crate) fn bench_tatp(a: TatpArgs) -> ExitCode {
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
pub(crate) fn fits_in_memory(e: footprint::Estimate, b: &BenchArgs) {
    if let Err(m) = footprint::check(&e, footprint::mem_available(), b.force) {
        usage_error(m);
    }
}

/// Every workload's run: opens the database, creates the workload (`create`), loads it with a
/// progress bar, runs it, optionally checks its invariant, and prints (and with `--json`
/// writes) the report. Exit 1 on a fatal error or a failed check.
pub(crate) fn bench_workload<W: Workload>(
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
        chain_sample: w.chain_sample(),
        max_version_bytes: w.max_version_bytes(),
        stop_after: b.stop_after,
    };
    let log0 = db.log_stats();
    let (c0, t0) = (db.stats().committed, Instant::now());
    let ckpt = Checkpointer::default();
    let run = std::thread::scope(|s| {
        if let Some(secs) = b.checkpoint_interval {
            let (ckpt, db) = (&ckpt, &db);
            s.spawn(move || ckpt.run(db, Duration::from_secs_f64(secs)));
        }
        let r = super::run(&db, &opts, |i| w.worker(i, b.seed));
        ckpt.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        r
    });
    let run = match run {
        Ok(r) => r,
        Err(e) => return fatal(&format!("running {name}"), e),
    };
    if let Some(m) = &run.memory_guard {
        return fatal(&format!("running {name}"), m);
    }
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
                "checkpoint_spans": ckpt.spans_json(run.measure_start),
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
    if b.check_history {
        let h = db.take_history();
        let r = myriad::history::check(&h);
        let m = format!(
            "{} committed transactions, {} dependency edges, {} anomalies{}",
            h.len(),
            r.edges,
            r.anomalies.len(),
            r.anomalies
                .first()
                .map_or(String::new(), |a| format!("; first: {a}"))
        );
        if r.anomalies.is_empty() {
            results.push(("history", serde_json::json!(format!("ok: {m}"))));
        } else {
            results.push(("history", serde_json::json!(format!("FAILED: {m}"))));
            failed_check.get_or_insert(m);
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
pub(crate) fn require_empty_data_dir(dir: &std::path::Path) {
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
pub(crate) fn emit_report(
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
pub(crate) struct Checkpointer {
    stop: std::sync::atomic::AtomicBool,
    taken: std::sync::atomic::AtomicU64,
    ms: std::sync::atomic::AtomicU64,
    error: std::sync::Mutex<Option<Error>>,
    /// Each checkpoint's start, end and bytes written (thesis Fig. 4.11's grey intervals).
    spans: std::sync::Mutex<Vec<(Instant, Instant, u64)>>,
}

impl Checkpointer {
    /// Takes a checkpoint every `every` until `stop` is set; the first error ends it (kept
    /// in `error`).
    fn run(&self, db: &Database, every: Duration) {
        use std::sync::atomic::Ordering::{Relaxed, SeqCst};
        let mut next = Instant::now() + every;
        while !self.stop.load(SeqCst) {
            if Instant::now() < next {
                std::thread::sleep(Duration::from_millis(10));
                continue;
            }
            let start = Instant::now();
            match db.checkpoint() {
                Ok(info) => {
                    self.taken.fetch_add(1, Relaxed);
                    self.ms.fetch_add(info.elapsed.as_millis() as u64, Relaxed);
                    if let Ok(mut spans) = self.spans.lock() {
                        spans.push((start, Instant::now(), info.bytes));
                    }
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

impl Checkpointer {
    /// The checkpoints taken, as `{start_s, end_s, bytes}` in seconds from `m0` (the start of
    /// the measured interval; negative for one begun in the warm-up).
    fn spans_json(&self, m0: Option<Instant>) -> serde_json::Value {
        let spans = self.spans.lock().map(|s| s.clone()).unwrap_or_default();
        let Some(m0) = m0 else {
            return serde_json::Value::Array(Vec::new());
        };
        let secs = |t: Instant| {
            let s = match t.checked_duration_since(m0) {
                Some(d) => d.as_secs_f64(),
                None => -m0.duration_since(t).as_secs_f64(),
            };
            (s * 1e3).round() / 1e3
        };
        spans
            .iter()
            .map(|&(a, b, bytes)| {
                serde_json::json!({"start_s": secs(a), "end_s": secs(b), "bytes": bytes})
            })
            .collect()
    }
}

/// The `--json` destination. The report goes to `PATH.partial`, created before the load (so an
/// unwritable path fails before any work) and renamed to PATH once complete: a run that fails
/// never leaves an empty or truncated PATH, and never clobbers an earlier report there. A
/// failure we handle removes the partial file; a killed process leaves it, under that name.
pub(crate) struct JsonOut {
    path: PathBuf,
    partial: PathBuf,
    file: Option<std::fs::File>,
}

impl JsonOut {
    /// Creates `PATH.partial` for the report to `path`.
    pub(crate) fn create(path: &std::path::Path) -> std::io::Result<JsonOut> {
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

    /// Writes and syncs `text`, then renames the partial file to PATH.
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
