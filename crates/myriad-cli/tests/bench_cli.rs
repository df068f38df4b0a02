//! `myriad bench` as a user runs it: the built binary, its exit codes, messages and JSON
//! report. Every YCSB configuration axis, Smallbank and TATP run as tiny benchmarks so none
//! can rot.

use serde_json::Value;
use std::path::PathBuf;
use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};

fn myriad(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_myriad"))
        .args(args)
        .output()
        .expect("run the myriad binary")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn json_path() -> PathBuf {
    static N: AtomicUsize = AtomicUsize::new(0);
    let n = N.fetch_add(1, Ordering::Relaxed);
    PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("bench_cli-{}-{n}.json", std::process::id()))
}

/// Runs a tiny YCSB with `extra` flags and returns its JSON report.
fn ycsb(extra: &[&str]) -> Value {
    let mut args = vec!["--rows", "1000", "--duration", "1"];
    args.extend_from_slice(extra);
    bench("ycsb", &args)
}

/// Runs `myriad bench WORKLOAD` on 2 threads without warm-up with `extra` flags; returns its
/// JSON report.
fn bench(workload: &str, extra: &[&str]) -> Value {
    let path = json_path();
    let p = path.to_str().expect("utf-8 temp path");
    let mut args = vec![
        "bench",
        workload,
        "--warmup",
        "0",
        "--threads",
        "2",
        "--no-progress",
        "--json",
        p,
    ];
    args.extend_from_slice(extra);
    let out = myriad(&args);
    assert!(
        out.status.success(),
        "myriad {args:?} failed: {}",
        stderr(&out)
    );
    let human = String::from_utf8_lossy(&out.stdout);
    assert!(
        human.contains("throughput") && human.contains("fidelity"),
        "summary: {human}"
    );
    let text = std::fs::read_to_string(&path).expect("JSON report written");
    let _ = std::fs::remove_file(&path);
    serde_json::from_str(&text).expect("report is one JSON object")
}

fn has(v: &Value, path: &str) -> bool {
    path.split('.').try_fold(v, |v, k| v.get(k)).is_some()
}

const ABORT_REASONS: [&str; 5] = [
    "write_write_conflict",
    "read_validation",
    "phantom",
    "unique_conflict",
    "user_abort",
];

fn check_report(r: &Value, mix: &str, layout: &str, dist: &str) {
    for k in [
        "workload",
        "config",
        "seed",
        "threads",
        "duration_s",
        "committed",
        "warmup_committed",
        "aborted",
        "abort_reasons",
        "throughput_tps",
        "latency_us",
        "memory.version_bytes",
        "memory.live_versions",
        "memory.max_chain_len",
        "memory.chain_len_histogram",
        "memory.timeseries",
        "memory.version_bytes_per_txn",
        "gc_ms",
        "shared_rmw_per_txn",
        "global_rmw_per_txn",
        "record_rmw_per_txn",
        "preparing_waits_per_txn",
        "commit_deps_per_txn",
        "commit_dep_waits_per_txn",
        "load_s",
        "fidelity.mix",
        "fidelity.read_pct",
        "fidelity.update_pct",
        "fidelity.row_layout",
        "fidelity.key_generator",
        "fidelity.theta",
        "fidelity.keys_may_repeat_in_txn",
        "fidelity.protocol",
        "fidelity.isolation",
        "fidelity.commit_deps",
        "fidelity.durability",
        "fidelity.seed",
        "fidelity.git_commit",
        "fidelity.machine.nproc",
        "fidelity.machine.os",
        "fidelity.build_profile",
    ] {
        assert!(has(r, k), "report lacks `{k}`");
    }
    for flag in [
        "rows",
        "ops",
        "mix",
        "theta",
        "key_dist",
        "row_layout",
        "attrs_read",
        "attrs_modified",
        "distinct_keys",
        "threads",
        "duration",
        "warmup",
        "seed",
        "protocol",
        "isolation",
        "gc",
        "json",
        "no_progress",
        "latency_histogram",
    ] {
        assert!(r["config"].get(flag).is_some(), "config lacks `{flag}`");
    }
    assert_eq!(r["workload"], "ycsb");
    assert_eq!(r["config"]["mix"], mix);
    assert_eq!(r["config"]["row_layout"], layout);
    assert_eq!(r["config"]["key_dist"], dist);
    assert_eq!(r["fidelity"]["durability"], "none: in-memory");
    for reason in ABORT_REASONS {
        assert!(
            r["abort_reasons"].get(reason).is_some(),
            "abort_reasons lacks `{reason}`"
        );
    }

    let committed = r["committed"].as_u64().expect("committed");
    let duration = r["duration_s"].as_f64().expect("duration_s");
    let tps = r["throughput_tps"].as_f64().expect("throughput_tps");
    assert!(committed > 0, "{mix}/{layout}/{dist}: nothing committed");
    assert!((0.99..3.0).contains(&duration), "duration_s {duration}");
    assert!(
        (tps - committed as f64 / duration).abs() <= 1e-6 * tps.max(1.0),
        "tps {tps} vs {committed}/{duration}"
    );

    let lat = r["latency_us"].as_object().expect("latency_us object");
    let mut counted = 0;
    for (ty, l) in lat {
        for k in ["count", "p50", "p95", "p99", "p999"] {
            assert!(l.get(k).is_some(), "latency_us.{ty} lacks `{k}`");
        }
        counted += l["count"].as_u64().expect("count");
    }
    assert_eq!(
        counted, committed,
        "every committed transaction has a latency"
    );
    let read_only = lat["read_only_txn"]["count"].as_u64().unwrap_or(0);
    let update = lat["update_txn"]["count"].as_u64().unwrap_or(0);
    match mix {
        "read-only" => assert_eq!(update, 0),
        _ => assert!(update > 0),
    }
    if mix == "read-only" {
        assert_eq!(read_only, committed);
    }
    let ts = r["memory"]["timeseries"].as_array().expect("timeseries");
    assert!(
        !ts.is_empty()
            && ts
                .iter()
                .all(|s| has(s, "t_s") && has(s, "live_versions") && has(s, "version_bytes"))
    );
    assert!(
        r["memory"]["live_versions"]
            .as_u64()
            .expect("live_versions")
            >= 1000
    );
}

/// Every row layout and key generator, with the default transaction-level GC.
fn every_layout_and_key_dist(mix: &str) {
    let gc = "txn";
    for layout in ["int64x10", "bytes100x10"] {
        for dist in ["gray", "ycsb-scrambled"] {
            let r = ycsb(&[
                "--mix",
                mix,
                "--row-layout",
                layout,
                "--key-dist",
                dist,
                "--gc",
                gc,
            ]);
            check_report(&r, mix, layout, dist);
            assert_eq!(r["fidelity"]["gc"], gc);
            assert_eq!(r["fidelity"]["gc_interval_txns"], 16);
        }
    }
}

/// Commits made in the warm-up are reported apart (`warmup_committed`), not in `committed`:
/// `scripts/instructions.sh` divides a worker's whole run by both.
#[test]
fn warmup_commits_are_reported_apart_from_the_measured_ones() {
    let path = json_path();
    let p = path.to_str().expect("utf-8 temp path");
    let out = myriad(&[
        "bench",
        "ycsb",
        "--rows",
        "1000",
        "--threads",
        "1",
        "--warmup",
        "0.3",
        "--duration",
        "0.3",
        "--no-progress",
        "--json",
        p,
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let r: Value =
        serde_json::from_str(&std::fs::read_to_string(&path).expect("report")).expect("JSON");
    let _ = std::fs::remove_file(&path);
    let (warm, measured) = (
        r["warmup_committed"].as_u64().expect("warmup_committed"),
        r["committed"].as_u64().unwrap(),
    );
    assert!(
        warm > 0 && measured > 0,
        "warm-up {warm}, measured {measured}"
    );
    let tps = r["throughput_tps"].as_f64().unwrap();
    let dur = r["duration_s"].as_f64().unwrap();
    assert!(
        (tps * dur - measured as f64).abs() <= 1.0,
        "throughput counts the measured commits only: {tps} x {dur} vs {measured}"
    );
}

/// `--stop-after N` ends the run once the worker has finished N transactions, warm-up
/// included, long before `--duration`: the fixed amount of work `scripts/instructions.sh`
/// counts. YCSB has no user aborts, so the commits are exactly N.
#[test]
fn stop_after_ends_the_run_after_n_transactions() {
    let path = json_path();
    let p = path.to_str().expect("utf-8 temp path");
    let start = std::time::Instant::now();
    let out = myriad(&[
        "bench",
        "ycsb",
        "--rows",
        "1000",
        "--threads",
        "1",
        "--warmup",
        "0",
        "--duration",
        "60",
        "--stop-after",
        "2000",
        "--no-progress",
        "--json",
        p,
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let r: Value =
        serde_json::from_str(&std::fs::read_to_string(&path).expect("report")).expect("JSON");
    let _ = std::fs::remove_file(&path);
    let done = r["committed"].as_u64().unwrap() + r["warmup_committed"].as_u64().unwrap();
    assert_eq!(
        done, 2000,
        "commits of a run stopped after 2000 transactions"
    );
    assert!(
        start.elapsed() < std::time::Duration::from_secs(50),
        "the run waited for --duration: {:?}",
        start.elapsed()
    );
    let bad = myriad(&["bench", "ycsb", "--stop-after", "0", "--no-progress"]);
    assert_eq!(bad.status.code(), Some(2), "{}", stderr(&bad));
    assert!(stderr(&bad).contains("--stop-after"), "{}", stderr(&bad));
}

#[test]
fn ycsb_read_only() {
    every_layout_and_key_dist("read-only");
}

#[test]
fn ycsb_read_intensive() {
    every_layout_and_key_dist("read-intensive");
}

#[test]
fn ycsb_update_intensive() {
    every_layout_and_key_dist("update-intensive");
}

#[test]
fn ycsb_contended_updates_commit_and_report_abort_reasons() {
    let r = ycsb(&[
        "--mix",
        "update-intensive",
        "--theta",
        "0.9",
        "--latency-histogram",
    ]);
    check_report(&r, "update-intensive", "int64x10", "gray");
    assert_eq!(r["config"]["theta"], 0.9);
    let reasons = r["abort_reasons"]
        .as_object()
        .expect("abort_reasons object");
    let sum: u64 = reasons.values().map(|v| v.as_u64().expect("count")).sum();
    assert_eq!(sum, r["aborted"].as_u64().expect("aborted"));
    assert!(has(&r, "latency_buckets.update_txn.<10us"));
}

/// The heterogeneous workload of thesis §5.7.2: read-only threads beside the read-write ones,
/// their transactions reported as `long_read_txn`, with and without the READ ONLY hint,
/// under every protocol built.
#[test]
fn ycsb_heterogeneous_reports_the_read_only_threads_apart() {
    for (protocol, isolation, hint) in [
        ("mvocc", "serializable", "false"),
        ("mvto", "serializable", "true"),
        ("mvto", "serializable", "false"),
        ("mv2pl", "serializable", "true"),
        ("mv2pl-wait", "serializable", "true"),
        ("si", "si", "true"),
        ("ssn", "serializable", "true"),
        ("ermia-ssi", "serializable", "false"),
        ("ermia-si", "si", "true"),
        ("ssi", "serializable", "true"),
        ("silo", "serializable", "true"),
        ("silo", "serializable", "false"),
        ("occ", "serializable", "true"),
        ("2pl", "serializable", "true"),
        ("hybrid", "serializable", "false"),
    ] {
        let r = ycsb(&[
            "--mix",
            "update-intensive",
            "--theta",
            "0.8",
            "--read-only-threads",
            "1",
            "--read-only-hint",
            hint,
            "--protocol",
            protocol,
            "--isolation",
            isolation,
        ]);
        let lat = &r["latency_us"];
        assert!(
            lat["long_read_txn"]["count"].as_u64() > Some(0),
            "{protocol} {hint}: {lat}"
        );
        assert!(lat["update_txn"]["count"].as_u64() > Some(0), "{protocol}");
        assert_eq!(r["fidelity"]["read_only_threads"], 1);
        let declared = r["fidelity"]["long_reads"].as_str().unwrap_or("");
        assert_eq!(
            declared.contains("not declared"),
            hint == "false",
            "{declared}"
        );
    }
}

/// Transaction-level GC keeps up with contended updates: live versions stay bounded (the
/// runner's watchdog exits 1 if workers do not stop, which fails `ycsb`).
#[test]
fn transaction_gc_keeps_up_with_contended_updates() {
    for _ in 0..3 {
        let r = ycsb(&[
            "--mix",
            "update-intensive",
            "--theta",
            "0.9",
            "--gc",
            "txn",
            "--gc-interval",
            "8",
        ]);
        check_report(&r, "update-intensive", "int64x10", "gray");
        assert_eq!(r["fidelity"]["gc_interval_txns"], 8);
        let live = r["memory"]["live_versions"]
            .as_u64()
            .expect("live_versions");
        assert!(
            live < 100_000,
            "{live} live versions for 1000 rows after GC"
        );
    }
}

/// Oldest-to-newest chains (`--storage o2n`) under every multi-version protocol: contended
/// updates commit, GC (cutting chains from the front) keeps live versions bounded, and the
/// report names the storage.
#[test]
fn o2n_storage_runs_every_multi_version_protocol() {
    for p in [
        "mvocc",
        "si",
        "ermia-si",
        "mvto",
        "mv2pl",
        "mv2pl-wait",
        "ssn",
        "ssi",
        "ermia-ssi",
    ] {
        let iso = if matches!(p, "si" | "ermia-si") {
            "si"
        } else {
            "serializable"
        };
        let r = ycsb(&[
            "--protocol",
            p,
            "--isolation",
            iso,
            "--storage",
            "o2n",
            "--mix",
            "update-intensive",
            "--theta",
            "0.9",
        ]);
        check_report(&r, "update-intensive", "int64x10", "gray");
        assert_eq!(r["fidelity"]["version_storage"], "o2n", "{p}: {r}");
        let live = r["memory"]["live_versions"]
            .as_u64()
            .expect("live_versions");
        assert!(live < 100_000, "{p}: {live} live versions for 1000 rows");
    }
}

/// Background vacuuming (`--gc vacuum --gc-threads 2`, both chain orders), dead-zone
/// pruning (`--gc dead-zone`, both) and cooperative cleaning (`--gc coop`, o2n) keep live versions bounded under contended updates, and the
/// report names the policy and threads.
#[test]
fn vacuum_gc_keeps_up_with_contended_updates() {
    for (storage, gc) in [
        ("n2o", "vacuum"),
        ("o2n", "vacuum"),
        ("o2n", "coop"),
        ("n2o", "dead-zone"),
        ("o2n", "dead-zone"),
    ] {
        let r = ycsb(&[
            "--mix",
            "update-intensive",
            "--theta",
            "0.9",
            "--storage",
            storage,
            "--gc",
            gc,
            "--gc-threads",
            "2",
        ]);
        check_report(&r, "update-intensive", "int64x10", "gray");
        assert_eq!(r["fidelity"]["gc"], gc, "{r}");
        assert_eq!(r["fidelity"]["gc_threads"], 2, "{r}");
        // At least half of the versions the run made were reclaimed during it. (Not a bound on
        // the live versions at the end: a worker descheduled inside a transaction on a loaded
        // machine holds the watermark back for a while, and the chains of the hot keys grow
        // meanwhile; the end of the run can fall in such a moment.)
        let live = r["memory"]["live_versions"]
            .as_f64()
            .expect("live_versions");
        let made = r["memory"]["versions_per_txn"]
            .as_f64()
            .expect("versions_per_txn")
            * r["committed"].as_f64().expect("committed");
        assert!(
            made > 0.0 && live - 1000.0 < made / 2.0,
            "{storage} {gc}: {live} live versions for 1000 rows, {made} made"
        );
        assert!(
            r["gc_ms"].as_f64() > Some(0.0),
            "{storage} {gc}: no GC time: {r}"
        );
    }
}

#[test]
fn secondary_indexes_run_under_every_index_pointer_kind() {
    for pointers in ["logical-tid", "logical-pk", "physical"] {
        let r = ycsb(&[
            "--mix",
            "update-intensive",
            "--secondary-indexes",
            "3",
            "--attrs-modified",
            "4",
            "--index-pointers",
            pointers,
        ]);
        check_report(&r, "update-intensive", "int64x10", "gray");
        assert_eq!(r["config"]["secondary_indexes"], 3, "{r}");
        assert_eq!(r["fidelity"]["secondary_indexes"], 3, "{r}");
        assert_eq!(r["fidelity"]["index_pointers"], pointers, "{r}");
    }
    // TATP's subscriber index is a hash index, which logical-pk and physical pointers do not
    // cover.
    for pointers in ["logical-pk", "physical"] {
        let out = myriad(&[
            "bench",
            "tatp",
            "--subscribers",
            "100",
            "--duration",
            "0.1",
            "--no-progress",
            "--index-pointers",
            pointers,
        ]);
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        let err = stderr(&out);
        assert!(
            err.contains("subscriber_sub_nbr") && err.contains(pointers),
            "{err}"
        );
    }
    // Physical pointers point at versions of append-only chains: not under Silo.
    let out = myriad(&[
        "bench",
        "ycsb",
        "--rows",
        "100",
        "--duration",
        "0.1",
        "--no-progress",
        "--protocol",
        "silo",
        "--index-pointers",
        "physical",
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("physical") && err.contains("single-version"),
        "{err}"
    );
}

#[test]
fn memory_spaces_are_used_reported_and_bounded() {
    for spaces in ["1", "2"] {
        let r = ycsb(&["--mix", "update-intensive", "--memory-spaces", spaces]);
        check_report(&r, "update-intensive", "int64x10", "gray");
        assert_eq!(
            r["fidelity"]["memory_spaces"],
            spaces.parse::<u64>().unwrap()
        );
        // Every new version takes a space lock (and so does every free): at least as many
        // as versions allocated per transaction.
        let locks = r["space_locks_per_txn"].as_f64().unwrap();
        let versions = r["memory"]["versions_per_txn"].as_f64().unwrap();
        assert!(
            versions > 0.0 && locks >= versions,
            "{locks} < {versions}: {r}"
        );
    }
    let r = ycsb(&["--mix", "update-intensive"]);
    assert_eq!(r["fidelity"]["memory_spaces"], 0);
    assert_eq!(r["space_locks_per_txn"].as_f64(), Some(0.0), "{r}");
    let out = myriad(&["bench", "ycsb", "--memory-spaces", "65", "--no-progress"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("--memory-spaces"), "{}", stderr(&out));
}

/// `--prefault-mib` runs and says so in the fidelity block, given or sized by `auto` (the
/// default); out of range is refused by name.
#[test]
fn prefault_is_reported() {
    let r = ycsb(&["--mix", "update-intensive", "--prefault-mib", "16"]);
    check_report(&r, "update-intensive", "int64x10", "gray");
    let pages = r["fidelity"]["memory_pages"].as_str().unwrap();
    assert!(pages.contains("16 MiB faulted in"), "{pages}");
    assert!(pages.ends_with(", no purging"), "{pages}");
    // `auto` keeps freed memory even when it faults nothing in; an explicit 0 leaves the
    // allocator's default (purging).
    let r = ycsb(&["--mix", "update-intensive"]);
    let pages = r["fidelity"]["memory_pages"].as_str().unwrap();
    assert!(
        pages.contains("nothing faulted in before the load (--prefault-mib auto), no purging"),
        "{pages}"
    );
    let r = ycsb(&["--mix", "update-intensive", "--prefault-mib", "0"]);
    let pages = r["fidelity"]["memory_pages"].as_str().unwrap();
    assert!(
        pages.contains("nothing faulted in before the load, freed memory returned to the OS"),
        "{pages}"
    );
    // TPC-C with inserts grows: auto sizes it as 64 MiB per thread-second (2 × 0.5 s).
    let r = bench("tpcc", &["--duration", "0.5"]);
    let pages = r["fidelity"]["memory_pages"].as_str().unwrap();
    assert!(
        pages.contains("64 MiB faulted in before the load (--prefault-mib auto)"),
        "{pages}"
    );
    let out = myriad(&[
        "bench",
        "ycsb",
        "--prefault-mib",
        "2000000",
        "--no-progress",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("--prefault-mib"), "{}", stderr(&out));
}

#[test]
fn theta_of_one_or_more_is_rejected_naming_the_flag() {
    for theta in ["1.5", "1.0", "1"] {
        let out = myriad(&["bench", "ycsb", "--theta", theta, "--no-progress"]);
        assert!(!out.status.success());
        assert!(stderr(&out).contains("--theta"), "{}", stderr(&out));
    }
}

/// `--commit-deps true` under a protocol without commit dependencies (ERMIA's SI readers wait
/// for a pre-committed writer) is a usage error naming the protocol, not a silent no-op;
/// `false`, and leaving it out, run.
#[test]
fn commit_deps_true_is_refused_where_the_protocol_has_none() {
    let base = [
        "bench",
        "ycsb",
        "--rows",
        "100",
        "--duration",
        "0.1",
        "--no-progress",
    ];
    let run = |extra: &[&str]| myriad(&[&base[..], extra].concat());
    let out = run(&["--protocol", "ermia-si", "--commit-deps", "true"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("`ermia-si`"), "{}", stderr(&out));
    for extra in [
        &["--protocol", "ermia-si", "--commit-deps", "false"][..],
        &["--protocol", "ermia-si"],
    ] {
        let out = run(extra);
        assert!(out.status.success(), "{extra:?}: {}", stderr(&out));
    }
}

#[test]
fn unknown_flags_and_values_are_rejected_by_name() {
    let out = myriad(&["bench", "ycsb", "--bogus"]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("--bogus"), "{}", stderr(&out));
    for (flag, value) in [
        ("--rows", "0"),
        ("--ops", "0"),
        ("--threads", "0"),
        ("--attrs-read", "11"),
        ("--attrs", "101"),
        ("--update-pct", "101"),
        ("--duration", "0"),
        ("--gc-interval", "0"),
    ] {
        let out = myriad(&["bench", "ycsb", flag, value]);
        assert!(!out.status.success(), "{flag} {value} accepted");
        assert!(stderr(&out).contains(flag), "{flag}: {}", stderr(&out));
    }
    let out = myriad(&["bench", "ycsb", "--update-pct", "50", "--mix", "read-only"]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("--update-pct") && stderr(&out).contains("--mix"),
        "{}",
        stderr(&out)
    );
    let out = myriad(&["bench", "ycsb", "--rows", "5", "--ops", "10"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("--ops"), "{}", stderr(&out));
    let out = myriad(&["bench", "ycsb", "--json", "/nonexistent-dir/report.json"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("--json"), "{}", stderr(&out));
    let out = myriad(&["bench", "ycsb", "--isolation", "snapshot"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("serializable"),
        "the choices are named: {}",
        stderr(&out)
    );
}

/// `--storage` defaults to the protocol's own; a protocol on the other kind of storage exits
/// 2 naming both choices.
#[test]
fn storage_follows_the_protocol_and_a_mismatch_exits_2() {
    let r = ycsb(&["--protocol", "silo", "--mix", "update-intensive"]);
    assert_eq!(r["fidelity"]["version_storage"], "single-version", "{r}");
    assert!(r["committed"].as_u64() > Some(0), "{r}");
    let r = ycsb(&["--protocol", "mvocc", "--storage", "n2o"]);
    assert_eq!(r["fidelity"]["version_storage"], "n2o", "{r}");
    for (p, s) in [("silo", "n2o"), ("mvocc", "single-version")] {
        let out = myriad(&[
            "bench",
            "ycsb",
            "--protocol",
            p,
            "--storage",
            s,
            "--no-progress",
        ]);
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        let e = stderr(&out);
        assert!(e.contains(p) && e.contains(s), "{e}");
    }
}

/// `--unsafe-no-validation` (OCC⁻/SILO⁻) runs under occ and silo and marks the report's
/// fidelity block UNSAFE; a validated run says `on`; any other protocol exits 2 naming the
/// flag and the protocol.
#[test]
fn unsafe_no_validation_is_marked_and_refused_outside_occ_and_silo() {
    for p in ["occ", "silo"] {
        let r = ycsb(&[
            "--protocol",
            p,
            "--mix",
            "update-intensive",
            "--theta",
            "0.99",
            "--unsafe-no-validation",
        ]);
        let v = r["fidelity"]["validation"].as_str().unwrap_or("");
        assert!(
            v.starts_with("UNSAFE") && v.contains("not serializable"),
            "{p}: {r}"
        );
        assert_eq!(r["config"]["unsafe_no_validation"], true, "{p}: {r}");
        assert!(r["committed"].as_u64() > Some(0), "{p}: {r}");
    }
    let r = ycsb(&["--protocol", "occ"]);
    assert_eq!(r["fidelity"]["validation"], "on", "{r}");
    let out = myriad(&[
        "bench",
        "ycsb",
        "--protocol",
        "silo",
        "--unsafe-no-validation",
        "--rows",
        "1000",
        "--duration",
        "0.2",
        "--warmup",
        "0",
        "--threads",
        "2",
        "--no-progress",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("SILO⁻); the run is not serializable"),
        "{}",
        stderr(&out)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("UNSAFE"));
    for p in ["mvocc", "2pl"] {
        let out = myriad(&[
            "bench",
            "ycsb",
            "--protocol",
            p,
            "--unsafe-no-validation",
            "--no-progress",
        ]);
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        let e = stderr(&out);
        assert!(e.contains("unsafe-no-validation") && e.contains(p), "{e}");
    }
}

#[test]
fn an_impossible_design_exits_2_naming_both_choices() {
    let out = myriad(&[
        "bench",
        "ycsb",
        "--storage",
        "delta",
        "--index-pointers",
        "physical",
        "--no-progress",
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let e = stderr(&out);
    assert!(e.contains("delta") && e.contains("physical"), "{e}");
}

#[test]
fn a_failed_run_leaves_an_earlier_report_untouched_and_no_partial_file() {
    let path = json_path();
    let partial = PathBuf::from(format!("{}.partial", path.display()));
    std::fs::write(&path, "earlier report\n").unwrap();
    // Fails after the report file is set up (at open: an impossible pairing).
    let out = myriad(&[
        "bench",
        "ycsb",
        "--storage",
        "delta",
        "--index-pointers",
        "physical",
        "--no-progress",
        "--json",
        path.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        "earlier report\n",
        "a failed run must not clobber PATH"
    );
    assert!(!partial.exists(), "{} left behind", partial.display());
    // A successful run replaces it with a complete report and leaves no partial file.
    let p = path.to_str().unwrap();
    let out = myriad(&[
        "bench",
        "ycsb",
        "--rows",
        "100",
        "--duration",
        "0.2",
        "--warmup",
        "0",
        "--no-progress",
        "--json",
        p,
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert!(v.get("throughput_tps").is_some());
    assert!(!partial.exists());
    let _ = std::fs::remove_file(&path);
}

/// The report of a stored-procedure workload: one latency row, one user-abort count and one
/// conflict-abort count per transaction type, each summing to its share of `abort_reasons`,
/// and a passing `--check` if asked.
fn check_procedure_report(r: &Value, workload: &str, types: &[&str]) {
    assert_eq!(r["workload"], workload);
    let committed = r["committed"].as_u64().expect("committed");
    assert!(committed > 0, "{workload}: nothing committed");
    let lat = r["latency_us"].as_object().expect("latency_us");
    let user = r["user_aborts_by_type"]
        .as_object()
        .expect("user_aborts_by_type");
    let mut counted = 0;
    let mut user_total = 0;
    for t in types {
        counted += lat[*t]["count"].as_u64().expect("count");
        user_total += user[*t].as_u64().expect("user aborts");
        assert!(has(r, &format!("latency_buckets.{t}.<10us")), "{t}");
    }
    assert_eq!(lat.len(), types.len());
    assert_eq!(
        counted, committed,
        "every committed transaction has a latency"
    );
    assert_eq!(
        user_total,
        r["abort_reasons"]["user_abort"].as_u64().unwrap()
    );
    // Every other abort is a retried attempt of some transaction type.
    let reasons = r["abort_reasons"].as_object().expect("abort_reasons");
    let conflicts: u64 = reasons
        .iter()
        .filter(|(k, _)| *k != "user_abort")
        .map(|(_, n)| n.as_u64().unwrap())
        .sum();
    let by_type = r["conflict_aborts_by_type"]
        .as_object()
        .expect("conflict_aborts_by_type");
    assert_eq!(by_type.len(), types.len(), "{by_type:?}");
    let typed: u64 = types.iter().map(|t| by_type[*t].as_u64().unwrap()).sum();
    assert_eq!(typed, conflicts, "{by_type:?} against {reasons:?}");
    if r["config"]["check"].as_bool().expect("config.check") {
        let check = r["results"]["check"].as_str().expect("results.check");
        assert!(check.starts_with("ok: "), "{workload}: {check}");
    } else {
        assert!(r["results"].get("check").is_none());
    }
    for k in [
        "fidelity.mix",
        "fidelity.key_generator",
        "fidelity.procedures",
        "fidelity.isolation",
        "fidelity.commit_deps",
    ] {
        assert!(has(r, k), "report lacks `{k}`");
    }
}

const SMALLBANK_TYPES: [&str; 6] = [
    "amalgamate",
    "balance",
    "deposit_checking",
    "send_payment",
    "transact_savings",
    "write_check",
];

const TATP_TYPES: [&str; 7] = [
    "get_subscriber_data",
    "get_new_destination",
    "get_access_data",
    "update_subscriber_data",
    "update_location",
    "insert_call_forwarding",
    "delete_call_forwarding",
];

/// Read Committed runs without `--check`: Amalgamate's read and its write of the same
/// balance may see different versions there, so money can legitimately be lost.
fn check_flag(isolation: &str) -> &'static [&'static str] {
    if isolation == "rc" {
        &[]
    } else {
        &["--check"]
    }
}

#[test]
fn smallbank_runs_at_every_isolation_level_and_keeps_the_money() {
    for isolation in ["serializable", "si", "rr", "rc"] {
        let mut args = vec![
            "--accounts",
            "100",
            "--theta",
            "0.9",
            "--duration",
            "0.3",
            "--isolation",
            isolation,
            "--latency-histogram",
        ];
        args.extend_from_slice(check_flag(isolation));
        let r = bench("smallbank", &args);
        check_procedure_report(&r, "smallbank", &SMALLBANK_TYPES);
        assert_eq!(r["config"]["accounts"], 100);
        assert_eq!(r["config"]["theta"], 0.9);
        assert!(has(&r, "results.committed_delta_cents"));
    }
}

#[test]
fn tatp_runs_at_every_isolation_level_and_counts_its_expected_failures() {
    for isolation in ["serializable", "si", "rr", "rc"] {
        let mut args = vec![
            "--subscribers",
            "2000",
            "--duration",
            "0.3",
            "--isolation",
            isolation,
        ];
        args.extend_from_slice(check_flag(isolation));
        let r = bench("tatp", &args);
        check_procedure_report(&r, "tatp", &TATP_TYPES);
        assert_eq!(r["config"]["subscribers"], 2000);
        let user = &r["user_aborts_by_type"];
        assert!(
            user["insert_call_forwarding"].as_u64().unwrap() > 0,
            "{user}"
        );
        assert_eq!(user["get_subscriber_data"], 0);
        assert_eq!(r["results"]["success_pct"]["update_location"], 100.0);
        assert!(has(&r, "results.call_forwarding_inserted"));
    }
}

#[test]
fn smallbank_and_tatp_reject_bad_sizes_by_flag() {
    for (w, flag, value) in [
        ("smallbank", "--accounts", "1"),
        ("smallbank", "--theta", "1.0"),
        ("tatp", "--subscribers", "0"),
        ("tatp", "--theta", "0.5"),
    ] {
        let out = myriad(&["bench", w, flag, value, "--no-progress"]);
        assert_eq!(out.status.code(), Some(2), "{w} {flag} {value}");
        assert!(stderr(&out).contains(flag), "{w} {flag}: {}", stderr(&out));
    }
}

/// `bench llt` (`workload/llt.rs`): Zipf 1.2 updates over two tables with one long-lived
/// snapshot held through most of the run, under `txn` and `dead-zone` GC. The report's
/// series is non-empty and consistent (time and commits rise, the sampled p99 chain is at
/// most the max, dead-zone prunes are a part of the reclaimed versions); the LLT held its
/// snapshot; under `dead-zone` the dead-zone test pruned versions and under `txn` it did not.
/// Also on `siro` storage (with `dead-zone`): its report says versions were relocated into
/// segments, the LLT's among them, and some dropped; no other run has a `siro` section.
#[test]
fn llt_runs_and_reports_a_consistent_series() {
    for (gc, storage) in [("txn", "n2o"), ("dead-zone", "n2o"), ("dead-zone", "siro")] {
        let r = bench(
            "llt",
            &[
                "--storage",
                storage,
                "--tables",
                "2",
                "--rows",
                "200",
                "--row-bytes",
                "64",
                "--zipf",
                "1.2",
                "--llt",
                "1",
                "--llt-at",
                "0.2",
                "--llt-hold",
                "1.5",
                "--llt-reads",
                // Capped: uncapped, `txn` GC grows the hot chains by ~10^5 versions a second,
                // and the LLT's reads of them (each walks its chain) can outlast the run.
                "--rate",
                "50000",
                "--duration",
                "2",
                "--gc",
                gc,
            ],
        );
        assert_eq!(r["workload"], "llt", "{r}");
        assert_eq!(r["fidelity"]["gc"], gc, "{r}");
        let ts = r["memory"]["timeseries"].as_array().expect("timeseries");
        assert!(ts.len() >= 3, "{gc}: {ts:?}");
        let mut last = (-1.0, 0);
        for s in ts {
            let t = s["t_s"].as_f64().expect("t_s");
            let c = s["committed"].as_u64().expect("committed");
            assert!(t > last.0 && c >= last.1, "{gc}: {s} after {last:?}");
            last = (t, c);
            assert!(
                s["versions_pruned_dead_zone"].as_u64() <= s["versions_reclaimed"].as_u64(),
                "{gc}: {s}"
            );
            if let (Some(max), Some(p99)) =
                (s["chain_len_max"].as_u64(), s["chain_len_p99"].as_u64())
            {
                assert!(1 <= p99 && p99 <= max, "{gc}: {s}");
            }
        }
        assert!(last.1 > 0, "{gc}: nothing committed");
        assert!(
            ts.iter().filter(|s| s["chain_len_max"].is_u64()).count() >= 2,
            "{gc}: no chain samples: {ts:?}"
        );
        // Fig. 14: the worst sample's lengths by percentile, 0..=100, sorted, topped by a
        // longest chain no sample in the series exceeds.
        let pct: Vec<u64> = r["memory"]["chain_len_percentiles"]
            .as_array()
            .expect("chain_len_percentiles")
            .iter()
            .map(|v| v.as_u64().expect("a length"))
            .collect();
        assert_eq!(pct.len(), 101, "{gc}: {pct:?}");
        assert!(pct[0] >= 1 && pct.is_sorted(), "{gc}: {pct:?}");
        let series_max = ts.iter().filter_map(|s| s["chain_len_max"].as_u64()).max();
        assert!(series_max <= Some(pct[100]), "{gc}: {pct:?} {ts:?}");
        assert_eq!(r["results"]["long_lived"]["snapshots_held"], 1, "{r}");
        assert!(
            r["results"]["long_lived"]["reads"].as_u64() > Some(0),
            "{r}"
        );
        let pruned = ts.last().expect("a sample")["versions_pruned_dead_zone"]
            .as_u64()
            .expect("pruned");
        if gc == "dead-zone" {
            assert!(pruned > 0, "{r}");
        } else {
            assert_eq!(pruned, 0, "{r}");
        }
        if storage == "siro" {
            let v = &r["siro"];
            let sum = |k: &str| -> u64 {
                v[k].as_array()
                    .expect("per class")
                    .iter()
                    .map(|n| n.as_u64().expect("count"))
                    .sum()
            };
            assert!(sum("relocated") > 0, "{v}");
            assert!(
                v["relocated"][2].as_u64() > Some(0),
                "the LLT's versions: {v}"
            );
            assert!(
                v["pruned_first"].as_u64() > Some(0) || sum("pruned_seal") + sum("cut") > 0,
                "{v}"
            );
        } else {
            assert!(r.get("siro").is_none(), "{r}");
        }
    }
}

/// `bench llt` refuses bad parameters (exit 2, naming the flag) and its memory guard stops
/// a run that passes the limit with an error (exit 1).
#[test]
fn llt_refuses_bad_parameters_and_its_memory_guard_stops_the_run() {
    for (flag, value) in [
        ("--zipf", "-1"),
        ("--row-bytes", "10"),
        ("--rows", "0"),
        ("--rate", "0"),
    ] {
        let out = myriad(&["bench", "llt", "--no-progress", flag, value]);
        assert_eq!(
            out.status.code(),
            Some(2),
            "{flag} {value}: {}",
            stderr(&out)
        );
        assert!(stderr(&out).contains(flag), "{flag}: {}", stderr(&out));
    }
    // Snapshots due after the run ends: refused, not silently never taken.
    let out = myriad(&[
        "bench",
        "llt",
        "--no-progress",
        "--duration",
        "1",
        "--llt",
        "1",
        "--llt-at",
        "5",
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("--llt-at 5"), "{}", stderr(&out));
    // siro's knobs: out of range (clap names the flag), or without `--storage siro`, or
    // siro without the dead-zone GC it needs (the engine names both).
    for (args, needle) in [
        (
            &[
                "--storage",
                "siro",
                "--gc",
                "dead-zone",
                "--siro-segment-bytes",
                "100",
            ][..],
            "--siro-segment-bytes",
        ),
        (
            &["--siro-llt-multiple", "400"][..],
            "apply to version storage `siro` only",
        ),
        (&["--storage", "siro"][..], "needs gc `dead-zone`"),
    ] {
        let mut a = vec!["bench", "llt", "--no-progress", "--duration", "1"];
        a.extend_from_slice(args);
        let out = myriad(&a);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(needle), "{args:?}: {}", stderr(&out));
    }
    let out = myriad(&[
        "bench",
        "llt",
        "--no-progress",
        "--tables",
        "1",
        "--rows",
        "100",
        "--warmup",
        "0",
        "--duration",
        "5",
        "--max-version-mib",
        "0",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("memory guard"), "{}", stderr(&out));
}

/// `bench llt --long-readers` (Hekaton §5.2.2) with one updater and one long reader over one
/// table of 20,000 rows (each reader transaction reads 2,000): `protocol`'s JSON report.
fn long_readers_run(protocol: &str, readers: &str) -> Value {
    let path = json_path();
    let p = path.to_str().expect("utf-8 temp path");
    let args = [
        "bench",
        "llt",
        "--protocol",
        protocol,
        "--tables",
        "1",
        "--rows",
        "20000",
        "--row-bytes",
        "24",
        "--long-readers",
        readers,
        "--threads",
        "1",
        "--warmup",
        "0",
        "--duration",
        "1",
        "--no-progress",
        "--json",
        p,
    ];
    let out = myriad(&args);
    assert!(out.status.success(), "{args:?}: {}", stderr(&out));
    let text = std::fs::read_to_string(&path).expect("JSON report written");
    let _ = std::fs::remove_file(&path);
    serde_json::from_str(&text).expect("report is one JSON object")
}

/// Lock-conflict aborts of the updaters: the run's minus the long readers' own.
fn updater_lock_conflicts(r: &Value) -> u64 {
    let all = r["abort_reasons"]["lock_conflict"].as_u64().unwrap_or(0);
    let readers = r["results"]["long_readers"]["abort_reasons"]["lock_conflict"]
        .as_u64()
        .unwrap_or(0);
    all.saturating_sub(readers)
}

/// Long readers run and count: under `mvocc` they commit (each read 10% of the table) and
/// the lone updater never aborts (a snapshot reader takes no locks and is not validated);
/// under `2pl` the reader's read locks make that updater abort on lock conflicts, which it
/// never does alone; under `silo` the reader's validation fails (aborts > 0).
#[test]
fn llt_long_readers_commit_under_mvocc_and_hold_back_updaters_under_2pl() {
    let r = long_readers_run("mvocc", "1");
    let l = &r["results"]["long_readers"];
    let committed = l["committed"].as_u64().expect("committed");
    assert!(committed > 0, "{r}");
    assert_eq!(l["rows_per_txn"], 2000, "{r}");
    assert_eq!(l["rows_read"].as_u64(), Some(committed * 2000), "{r}");
    assert!(r["throughput_tps"].as_f64() > Some(0.0), "{r}");
    assert_eq!(r["aborted"], 0, "{r}");

    let alone = long_readers_run("2pl", "0");
    assert_eq!(updater_lock_conflicts(&alone), 0, "{alone}");
    assert!(alone["results"].get("long_readers").is_none(), "{alone}");
    let r = long_readers_run("2pl", "1");
    assert!(updater_lock_conflicts(&r) > 0, "{r}");
    assert!(
        r["results"]["long_readers"]["committed"].as_u64() > Some(0),
        "{r}"
    );

    let r = long_readers_run("silo", "1");
    let l = &r["results"]["long_readers"];
    assert!(l["aborted"].as_u64() > Some(0), "{r}");
    assert!(
        l["abort_reasons"]["read_validation"].as_u64() > Some(0),
        "{r}"
    );
}

/// `--long-readers` needs Serializable: `si` (Snapshot only) is refused naming the flag,
/// and `--long-read-pct` outside 1..=100 is refused (exit 2 both).
#[test]
fn llt_long_readers_refuse_a_protocol_without_serializable_and_a_bad_pct() {
    for args in [
        &["--protocol", "si", "--long-readers", "1"][..],
        &["--long-read-pct", "0"],
        &["--long-read-pct", "101"],
    ] {
        let out = myriad(&[&["bench", "llt", "--no-progress"][..], args].concat());
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        let flag = if args[0] == "--protocol" {
            "--long-readers"
        } else {
            "--long-read-pct"
        };
        assert!(stderr(&out).contains(flag), "{args:?}: {}", stderr(&out));
    }
}
