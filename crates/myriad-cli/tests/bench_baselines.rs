//! `myriad bench ycsb --engine sqlite|redb|fjall` as a user runs it. With the cargo feature
//! `baselines` (`cargo test -p myriad-cli --release --features baselines --test
//! bench_baselines`): each engine runs a tiny YCSB in memory and on disk, commits, keeps
//! exactly its rows and says what it did; Myriad-only flags are refused. Without the feature
//! (the default build): `--engine sqlite` is refused with an error naming the feature.

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

/// A fresh path under the test's temporary directory.
#[cfg(feature = "baselines")]
fn temp_path(what: &str) -> std::path::PathBuf {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static N: AtomicUsize = AtomicUsize::new(0);
    let n = N.fetch_add(1, Ordering::Relaxed);
    std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("bench_baselines-{}-{n}-{what}", std::process::id()))
}

#[cfg(not(feature = "baselines"))]
#[test]
fn baseline_engines_need_the_feature() {
    for engine in ["sqlite", "redb", "fjall"] {
        let out = myriad(&[
            "bench",
            "ycsb",
            "--engine",
            engine,
            "--rows",
            "100",
            "--duration",
            "0.1",
        ]);
        assert_eq!(out.status.code(), Some(2), "{engine}: {}", stderr(&out));
        let e = stderr(&out);
        assert!(
            e.contains(&format!("--engine {engine}")) && e.contains("`baselines`"),
            "{engine}: {e}"
        );
    }
}

/// Runs a tiny YCSB on `engine` with `extra` flags; returns its JSON report and human summary.
#[cfg(feature = "baselines")]
fn run(engine: &str, extra: &[&str]) -> (serde_json::Value, String) {
    let path = temp_path("report.json");
    let p = path.to_str().expect("utf-8 temp path");
    let mut args = vec![
        "bench",
        "ycsb",
        "--engine",
        engine,
        "--rows",
        "1000",
        "--warmup",
        "0",
        "--duration",
        "0.3",
        "--threads",
        "2",
        "--mix",
        "update-intensive",
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
    let text = std::fs::read_to_string(&path).expect("the JSON report");
    let _ = std::fs::remove_file(&path);
    let report = serde_json::from_str(&text).expect("a JSON report");
    (report, String::from_utf8_lossy(&out.stdout).into_owned())
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
    assert!(f["engine"].as_str().unwrap().starts_with(engine), "{f}");
    assert!(f["protocol"].as_str().unwrap().starts_with(engine), "{f}");
    assert!(
        f["durability"].as_str().unwrap().contains(durability),
        "{f}"
    );
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
        let dir = temp_path(engine);
        let d = dir.to_str().unwrap();
        let (r, human) = run(engine, &["--data-dir", d, "--fsync", fsync]);
        assert_ran(engine, &r, &human, durability);
        assert!(
            std::fs::read_dir(&dir).unwrap().next().is_some(),
            "{engine}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}

#[cfg(feature = "baselines")]
#[test]
fn baseline_engines_refuse_what_they_cannot_honour() {
    let dir = temp_path("refused");
    let d = dir.to_str().unwrap();
    for (args, names) in [
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
    ] {
        let mut argv = vec!["bench", "ycsb", "--rows", "100", "--duration", "0.1"];
        argv.extend_from_slice(args);
        let out = myriad(&argv);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        for n in names {
            assert!(stderr(&out).contains(n), "{args:?}: {}", stderr(&out));
        }
    }
    assert!(!dir.exists(), "a refused run created its data directory");
}
