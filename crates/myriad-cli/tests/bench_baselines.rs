//! `myriad bench ycsb|smallbank --engine sqlite|redb|fjall` as a user runs it. With the cargo
//! feature `baselines` (the README's test command has it, `--all-features`): each engine
//! runs a tiny YCSB and a tiny Smallbank in memory and on disk, commits, keeps its invariant
//! (exactly its rows; the money) and says what it did; Myriad-only flags are refused. Without
//! the feature (`cargo test -p myriad-cli --release`): `--engine sqlite` is refused with an
//! error naming the feature (that decision is also unit-tested for both builds in
//! `baselines/mod.rs`).

use std::process::{Command, Output};

fn myriad(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_myriad"))
        .args(args)
        .output()
        .expect("run the myriad binary")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[cfg(feature = "baselines")]
/// `myriad bench WORKLOAD ARGS...` exits 2 for each case, naming each of its `names` in the
/// error.
fn assert_refused(workload: &[&str], cases: &[(&[&str], &[&str])]) {
    for (args, names) in cases {
        let mut argv = vec!["bench"];
        argv.extend_from_slice(workload);
        argv.extend_from_slice(&["--duration", "0.1"]);
        argv.extend_from_slice(args);
        let out = myriad(&argv);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        for n in *names {
            assert!(stderr(&out).contains(n), "{args:?}: {}", stderr(&out));
        }
    }
}

/// A fresh path under the test's temporary directory.
#[cfg(feature = "baselines")]
fn temp_path(what: &str) -> std::path::PathBuf {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static N: AtomicUsize = AtomicUsize::new(0);
    let n = N.fetch_add(1, Ordering::Relaxed);
    std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("bench_baselines-{}-{n}-{what}", std::process::id()))
}

/// Runs `f` with a fresh data directory for `engine`; the run must leave files there.
#[cfg(feature = "baselines")]
fn in_data_dir(engine: &str, f: impl FnOnce(&str)) {
    let dir = temp_path(engine);
    f(dir.to_str().expect("utf-8 temp path"));
    assert!(
        std::fs::read_dir(&dir).unwrap().next().is_some(),
        "{engine}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[cfg(not(feature = "baselines"))]
#[test]
fn baseline_engines_need_the_feature() {
    for engine in ["sqlite", "redb", "fjall"] {
        for (workload, size) in [("ycsb", "--rows"), ("smallbank", "--accounts")] {
            let out = myriad(&[
                "bench",
                workload,
                "--engine",
                engine,
                size,
                "100",
                "--duration",
                "0.1",
            ]);
            assert_eq!(out.status.code(), Some(2), "{engine}: {}", stderr(&out));
            let e = stderr(&out);
            assert!(
                e.contains(&format!("--engine {engine}")) && e.contains("`baselines`"),
                "{workload} {engine}: {e}"
            );
        }
    }
    let out = myriad(&["bench", "tpcc", "--engine", "sqlite", "--duration", "0.1"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("`baselines`"), "{}", stderr(&out));
}

/// Runs a tiny YCSB on `engine` with `extra` flags; returns its JSON report and human summary.
#[cfg(feature = "baselines")]
fn run(engine: &str, extra: &[&str]) -> (serde_json::Value, String) {
    let mut args = vec!["ycsb", "--rows", "1000", "--mix", "update-intensive"];
    args.extend_from_slice(extra);
    bench(engine, &args)
}

/// Runs `myriad bench WORKLOAD --engine ENGINE ...` (`args` starts with the workload) for
/// 0.3 s on 2 threads; returns its JSON report and human summary.
#[cfg(feature = "baselines")]
fn bench(engine: &str, workload_args: &[&str]) -> (serde_json::Value, String) {
    let path = temp_path("report.json");
    let p = path.to_str().expect("utf-8 temp path");
    let mut args = vec!["bench"];
    args.extend_from_slice(workload_args);
    args.extend_from_slice(&[
        "--engine",
        engine,
        "--warmup",
        "0",
        "--duration",
        "0.3",
        "--threads",
        "2",
        "--no-progress",
        "--json",
        p,
    ]);
    let out = myriad(&args);
    assert!(
        out.status.success(),
        "myriad {args:?} failed: {}",
        stderr(&out)
    );
    let text = std::fs::read_to_string(&path).expect("the JSON report");
    let _ = std::fs::remove_file(&path);
    let report = serde_json::from_str(&text).expect("a JSON report");
    (report, String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The fidelity block `f` names the engine, its concurrency and its durability.
#[cfg(feature = "baselines")]
fn assert_engine_said(engine: &str, f: &serde_json::Value, durability: &str) {
    assert!(f["engine"].as_str().unwrap().starts_with(engine), "{f}");
    assert!(f["protocol"].as_str().unwrap().starts_with(engine), "{f}");
    assert!(
        f["durability"].as_str().unwrap().contains(durability),
        "{f}"
    );
}

/// The report of a healthy baseline run: commits, the row check held, the engine named.
#[cfg(feature = "baselines")]
fn assert_ran(engine: &str, r: &serde_json::Value, human: &str, durability: &str) {
    assert!(r["committed"].as_u64().unwrap() > 0, "{engine}: {r}");
    let check = r["results"]["check"].as_str().unwrap();
    assert!(
        check.starts_with("ok: usertable holds exactly the keys 0..1000"),
        "{engine}: {check}"
    );
    let f = &r["fidelity"];
    assert_engine_said(engine, f, durability);
    assert_eq!(f["update_pct"], 80);
    assert_eq!(f["prefetch"], false);
    assert!(human.contains("throughput") && human.contains(&format!("engine       {engine}")));
    assert!(!human.contains("live versions"), "{human}");
}

#[cfg(feature = "baselines")]
#[test]
fn baseline_engines_run_ycsb_in_memory() {
    for (engine, durability) in [
        ("sqlite", "mode=memory"),
        ("redb", "InMemoryBackend"),
        ("fjall", "no in-memory mode"),
    ] {
        let (r, human) = run(engine, &[]);
        assert_ran(engine, &r, &human, durability);
    }
    // Byte rows and long-read threads go the same way.
    for engine in ["sqlite", "redb", "fjall"] {
        let (r, human) = run(
            engine,
            &["--row-layout", "bytes100x10", "--read-only-threads", "1"],
        );
        assert_ran(engine, &r, &human, "");
        assert!(r["latency_us"]["long_read_txn"]["count"].as_u64().unwrap() > 0);
    }
    // redb serialises its writers and never aborts.
    let (r, _) = run("redb", &[]);
    assert_eq!(r["aborted"], 0);
    assert!(r["fidelity"]["protocol"]
        .as_str()
        .unwrap()
        .contains("writers serialised"));
}

#[cfg(feature = "baselines")]
#[test]
fn baseline_engines_run_ycsb_durably() {
    for (engine, fsync, durability) in [
        ("sqlite", "always", "synchronous=FULL"),
        ("sqlite", "never", "synchronous=NORMAL"),
        ("redb", "always", "Durability::Immediate"),
        ("fjall", "always", "SyncData"),
        ("fjall", "never", "NOT durable"),
    ] {
        in_data_dir(engine, |d| {
            let (r, human) = run(engine, &["--data-dir", d, "--fsync", fsync]);
            assert_ran(engine, &r, &human, durability);
        });
    }
}

#[cfg(feature = "baselines")]
#[test]
fn baseline_engines_refuse_what_they_cannot_honour() {
    let dir = temp_path("refused");
    let d = dir.to_str().unwrap();
    assert_refused(
        &["ycsb", "--rows", "100"],
        &[
            (
                &["--engine", "sqlite", "--protocol", "silo", "--gc", "none"][..],
                &["--protocol, --gc"][..],
            ),
            (&["--engine", "redb", "--isolation", "si"], &["--isolation"]),
            (
                &["--engine", "fjall", "--as-procedure"],
                &["--as-procedure"],
            ),
            (
                &["--engine", "sqlite", "--secondary-indexes", "1"],
                &["--secondary-indexes"],
            ),
            (
                &["--engine", "redb", "--data-dir", d, "--fsync", "never"],
                &["--fsync never"],
            ),
        ],
    );
    assert!(!dir.exists(), "a refused run created its data directory");
}

/// Runs a tiny Smallbank (100 customers, θ 0.9: contended) on `engine`; checks that it
/// committed every transaction type, kept the money, and said what it did.
#[cfg(feature = "baselines")]
fn assert_smallbank(engine: &str, extra: &[&str], durability: &str) -> serde_json::Value {
    let mut args = vec!["smallbank", "--accounts", "100", "--theta", "0.9"];
    args.extend_from_slice(extra);
    let (r, human) = bench(engine, &args);
    assert!(r["committed"].as_u64().unwrap() > 0, "{engine}: {r}");
    let check = r["results"]["check"].as_str().unwrap();
    assert!(
        check.starts_with("ok: money ") && check.contains("loaded"),
        "{engine}: {check}"
    );
    assert_ne!(r["results"]["committed_delta_cents"], 0, "{engine}: {r}");
    for ty in [
        "amalgamate",
        "balance",
        "deposit_checking",
        "send_payment",
        "transact_savings",
        "write_check",
    ] {
        assert!(
            r["latency_us"][ty]["count"].as_u64().unwrap() > 0,
            "{engine} {ty}: {r}"
        );
    }
    let f = &r["fidelity"];
    assert_engine_said(engine, f, durability);
    assert!(
        f["mix"].as_str().unwrap().contains("send_payment 25%"),
        "{f}"
    );
    assert!(
        f["procedures"].as_str().unwrap().contains("host-side"),
        "{f}"
    );
    assert_eq!(r["config"]["accounts"], 100);
    assert!(human.contains(&format!("engine       {engine}")), "{human}");
    r
}

#[cfg(feature = "baselines")]
#[test]
fn baseline_engines_run_smallbank_and_keep_the_money() {
    for (engine, durability) in [
        ("sqlite", "mode=memory"),
        ("redb", "InMemoryBackend"),
        ("fjall", "no in-memory mode"),
    ] {
        let r = assert_smallbank(engine, &[], durability);
        // Amalgamate empties the hot customers' accounts: some payments and withdrawals are
        // then refused (user aborts, as in Myriad); Balance never is.
        let user = r["user_aborts_by_type"].as_object().unwrap();
        assert!(
            user.values().map(|v| v.as_u64().unwrap()).sum::<u64>() > 0,
            "{engine}: {r}"
        );
        assert_eq!(user["balance"], 0, "{engine}: {r}");
    }
    for (engine, fsync, durability) in [
        ("sqlite", "always", "synchronous=FULL"),
        ("redb", "always", "Durability::Immediate"),
        ("fjall", "never", "NOT durable"),
    ] {
        in_data_dir(engine, |d| {
            assert_smallbank(engine, &["--data-dir", d, "--fsync", fsync], durability);
        });
    }
}

#[cfg(feature = "baselines")]
#[test]
fn baseline_smallbank_refuses_what_it_cannot_honour() {
    assert_refused(
        &["smallbank", "--accounts", "100"],
        &[
            (
                &["--engine", "sqlite", "--isolation", "si"][..],
                &["--isolation"][..],
            ),
            (
                &["--engine", "fjall", "--protocol", "silo"],
                &["--protocol"],
            ),
            (&["--engine", "redb", "--log", "command"], &["--log"]),
        ],
    );
}

/// TPC-C on SQLite, 1 warehouse, in memory and on disk: commits every transaction type, the
/// 1% New-Order rollbacks are user aborts, and Myriad's consistency checks hold afterwards.
#[cfg(feature = "baselines")]
#[test]
fn baseline_tpcc_on_sqlite_commits_and_passes_the_consistency_checks() {
    let dir = temp_path("tpcc");
    let d = dir.to_str().unwrap();
    for (extra, durability) in [
        (&[][..], "mode=memory"),
        (
            &["--data-dir", d, "--fsync", "always"][..],
            "synchronous=FULL",
        ),
    ] {
        let mut args = vec!["tpcc", "--warehouses", "1", "--check"];
        args.extend_from_slice(extra);
        let (r, human) = bench("sqlite", &args);
        assert!(r["committed"].as_u64().unwrap() > 0, "{r}");
        assert_eq!(
            r["results"]["check"], "ok: TPC-C consistency conditions 1-4 hold",
            "{r}"
        );
        for ty in ["new_order", "payment"] {
            assert!(
                r["latency_us"][ty]["count"].as_u64().unwrap() > 0,
                "{ty}: {r}"
            );
        }
        assert_eq!(r["user_aborts_by_type"]["payment"], 0, "{r}");
        let f = &r["fidelity"];
        assert!(f["engine"].as_str().unwrap().starts_with("sqlite"), "{f}");
        assert!(
            f["durability"].as_str().unwrap().contains(durability),
            "{f}"
        );
        assert!(
            f["transactions"].as_str().unwrap().contains("host-side"),
            "{f}"
        );
        assert!(human.contains("engine       sqlite"), "{human}");
    }
    assert!(dir.join("tpcc.sqlite").exists());
    let _ = std::fs::remove_dir_all(&dir);
}

#[cfg(feature = "baselines")]
#[test]
fn baseline_tpcc_refuses_what_it_cannot_run() {
    assert_refused(
        &["tpcc"],
        &[
            (
                &["--engine", "redb"][..],
                &["--engine redb", "sqlite only"][..],
            ),
            (&["--engine", "fjall"], &["--engine fjall"]),
            (
                &["--engine", "sqlite", "--stock-scan-threads", "1"],
                &["--stock-scan-threads"],
            ),
            (
                &["--engine", "sqlite", "--protocol", "silo"],
                &["--protocol"],
            ),
        ],
    );
}
