//! Durable benchmark runs and the data-directory commands, as a user runs them:
//! `myriad bench ... --data-dir`, `myriad recover`, `myriad log inspect`.

use serde_json::Value;
use std::path::PathBuf;
use std::process::{Command, Output};

fn myriad(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_myriad"))
        .args(args)
        .output()
        .expect("run the myriad binary")
}

fn tmp(tag: &str) -> PathBuf {
    let p = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("durability_cli-{}-{tag}", std::process::id()));
    let _ = std::fs::remove_dir_all(&p);
    let _ = std::fs::remove_file(&p);
    p
}

fn ok(out: &Output, what: &str) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{what} failed: {}\n{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// `bench tpcc` for half a second on 2 threads, durable in `dir`, with `extra` flags.
fn durable_tpcc(dir: &str, warehouses: &str, extra: &[&str]) -> Output {
    let mut a = vec![
        "bench",
        "tpcc",
        "--warehouses",
        warehouses,
        "--threads",
        "2",
        "--duration",
        "0.5",
        "--warmup",
        "0",
        "--no-progress",
        "--data-dir",
        dir,
    ];
    a.extend_from_slice(extra);
    myriad(&a)
}

#[test]
fn a_durable_run_recovers_with_every_row_and_the_log_reads_back() {
    let dir = tmp("smallbank");
    let json = tmp("smallbank.json");
    let d = dir.to_str().unwrap();
    let out = myriad(&[
        "bench",
        "smallbank",
        "--accounts",
        "500",
        "--threads",
        "2",
        "--duration",
        "1.2",
        "--warmup",
        "0",
        "--no-progress",
        "--check",
        "--data-dir",
        d,
        "--loggers",
        "2",
        "--checkpoint-interval",
        "0.2",
        "--json",
        json.to_str().unwrap(),
    ]);
    let human = ok(&out, "durable smallbank");
    assert!(human.contains("logical logging"), "{human}");
    let r: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let log = &r["results"]["log"];
    assert!(log["bytes"].as_u64().unwrap() > 0, "{log}");
    assert!(log["fsyncs"].as_u64().unwrap() > 0, "{log}");
    assert!(log["checkpoints"].as_u64().unwrap() >= 1, "{log}");
    assert!(r["committed"].as_u64().unwrap() > 0);
    // Thesis Fig. 4.11 and Table 4.2's inputs: when each checkpoint ran, the log's bytes at
    // each sample, and the latency of the transactions acknowledged in each second.
    let spans = log["checkpoint_spans"].as_array().unwrap();
    assert_eq!(spans.len() as u64, log["checkpoints"].as_u64().unwrap());
    for sp in spans {
        let (a, b) = (
            sp["start_s"].as_f64().unwrap(),
            sp["end_s"].as_f64().unwrap(),
        );
        assert!(a <= b && b < 5.0 && sp["bytes"].as_u64() > Some(0), "{sp}");
    }
    let samples = r["memory"]["timeseries"].as_array().unwrap();
    assert!(
        samples.len() >= 3,
        "samples at 0 s, 1 s and the end: {samples:?}"
    );
    let bytes: Vec<u64> = samples
        .iter()
        .map(|s| {
            s["log_bytes"]
                .as_u64()
                .expect("a durable sample has log_bytes")
        })
        .collect();
    assert!(bytes.windows(2).all(|w| w[0] <= w[1]), "{bytes:?}");
    assert!(*bytes.last().unwrap() > 0, "{bytes:?}");
    let lat = r["latency_timeseries"].as_array().unwrap();
    let counted: u64 = lat.iter().map(|l| l["count"].as_u64().unwrap()).sum();
    let by_type: u64 = r["latency_us"]
        .as_object()
        .unwrap()
        .values()
        .map(|l| l["count"].as_u64().unwrap())
        .sum();
    assert_eq!(counted, by_type, "{lat:?}");
    let end = r["duration_s"].as_f64().unwrap();
    for l in lat {
        assert!(l["mean_us"].as_f64().unwrap() > 0.0, "{l}");
        assert!(l["t_s"].as_f64().unwrap() <= end + 1e-3, "{l} after {end}");
    }

    let inspect = ok(&myriad(&["log", "inspect", d]), "log inspect");
    assert!(inspect.contains("persistent epoch"), "{inspect}");
    assert!(
        inspect.contains("log-01-"),
        "two loggers, two files: {inspect}"
    );
    assert!(!inspect.contains("damaged"), "{inspect}");

    let rj = tmp("recover.json");
    let rec = ok(
        &myriad(&["recover", d, "--json", rj.to_str().unwrap()]),
        "recover",
    );
    assert!(rec.contains("phases (ms)"), "{rec}");
    // Recovery keeps what it frees for reuse (no fresh pages zeroed per PACMAN batch).
    assert!(rec.contains("freed memory kept by the allocator"), "{rec}");
    let rv: Value = serde_json::from_str(&std::fs::read_to_string(&rj).unwrap()).unwrap();
    assert_eq!(
        rv["allocator_keeps_freed_memory"],
        Value::Bool(true),
        "{rv}"
    );
    // Smallbank's three tables, 500 rows each; nothing is inserted or deleted by the run.
    // Plus the durable run's load marker (`myriad_bench_load`, one row).
    assert_eq!(rv["rows"].as_u64(), Some(1501), "{rv}");
    assert_eq!(rv["tables"].as_u64(), Some(4), "{rv}");
    assert!(rv["checkpoint_ts"].as_u64().is_some(), "{rv}");
    // A second recovery starts from the checkpoint the first one wrote: no log to replay.
    let rec2 = ok(&myriad(&["recover", d]), "second recover");
    assert!(rec2.contains("0 replayed"), "{rec2}");

    // The benchmark loads its own data: a directory that is not empty is refused.
    let again = myriad(&[
        "bench",
        "smallbank",
        "--duration",
        "0.1",
        "--warmup",
        "0",
        "--no-progress",
        "--data-dir",
        d,
    ]);
    assert_eq!(again.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&again.stderr).contains("not empty"));
    for p in [&dir, &json, &rj] {
        let _ = std::fs::remove_dir_all(p);
        let _ = std::fs::remove_file(p);
    }
}

#[test]
fn a_durable_tpcc_run_recovers_consistent() {
    let dir = tmp("tpcc");
    let d = dir.to_str().unwrap();
    ok(&durable_tpcc(d, "2", &["--log", "command"]), "durable tpcc");
    // The log holds procedure calls, which only serial recovery replays.
    let inspect = ok(&myriad(&["log", "inspect", d]), "log inspect");
    assert!(inspect.contains("calls"), "{inspect}");
    let refused = myriad(&["recover", d, "--recovery", "parallel-partitioned"]);
    assert_eq!(refused.status.code(), Some(2));
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(err.contains("procedure calls"), "{err}");
    let out = ok(&myriad(&["check", "tpcc", "--data-dir", d]), "check tpcc");
    assert!(out.contains("conditions 1-4 hold"), "{out}");
    // Break condition 1 in the recovered data (a warehouse's W_YTD), and the check fails.
    {
        use myriad::{Config, Database, Value};
        let db = Database::open(Config::new().data_dir(&dir)).unwrap();
        let w = db.table("warehouse").unwrap();
        db.run(|tx| tx.update(&w, &1i64, &[(8, Value::Int(1))]))
            .unwrap();
    }
    let bad = myriad(&["check", "tpcc", "--data-dir", d]);
    assert_eq!(bad.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("condition 1"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn data_directory_errors_are_clear() {
    let missing = tmp("missing");
    let out = myriad(&["recover", missing.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no such directory"));
    let out = myriad(&["log", "inspect", missing.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a directory"));
    // Logging without a directory, and a log kind that is not built, are usage errors.
    let out = myriad(&[
        "bench",
        "tatp",
        "--duration",
        "0.1",
        "--warmup",
        "0",
        "--log",
        "logical",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("needs a data directory"));
    let dir = tmp("cmd");
    let out = myriad(&[
        "bench",
        "tatp",
        "--duration",
        "0.1",
        "--warmup",
        "0",
        "--data-dir",
        dir.to_str().unwrap(),
        "--log",
        "phisical",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("phisical") && err.contains("physical"),
        "{err}"
    );
    assert!(!dir.exists(), "a refused run created its directory");
}

#[test]
fn a_physical_log_recovers_by_plr() {
    let dir = tmp("plr");
    let d = dir.to_str().unwrap();
    ok(
        &durable_tpcc(d, "1", &["--log", "physical"]),
        "durable tpcc, physical log",
    );
    // `log inspect` counts the physical records: every record of every file.
    let inspect = ok(&myriad(&["log", "inspect", d]), "log inspect");
    let column = |i: usize| -> u64 {
        inspect
            .lines()
            .filter(|l| l.starts_with("log-"))
            .map(|l| {
                let cols: Vec<&str> = l.split_whitespace().collect();
                cols[i].replace(',', "").parse::<u64>().unwrap()
            })
            .sum()
    };
    let (records, physical) = (column(3), column(6));
    assert!(physical > 0 && physical == records, "{inspect}");
    let refused = myriad(&["recover", d, "--recovery", "serial"]);
    assert_eq!(refused.status.code(), Some(2));
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(err.contains("physical records"), "{err}");
    let json = tmp("plr.json");
    let out = ok(
        &myriad(&[
            "recover",
            d,
            "--recovery",
            "physical",
            "--threads",
            "2",
            "--json",
            json.to_str().unwrap(),
        ]),
        "recover physical",
    );
    assert!(out.contains("index build"), "{out}");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(v["scheme"], "physical");
    assert!(v["physical_replayed"].as_u64().unwrap() > 0, "{v}");
    assert_eq!(v["physical_replayed"], v["records_replayed"]);
    // Recovery closed with a checkpoint: the database passes the consistency check.
    let out = ok(&myriad(&["check", "tpcc", "--data-dir", d]), "check tpcc");
    assert!(out.contains("conditions 1-4 hold"), "{out}");
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_file(&json);
}

/// `ermia-si` and `ermia-ssi` log through ERMIA's log manager unless told otherwise.
#[test]
fn the_ermia_protocols_take_ermias_log_manager_by_default() {
    for (protocol, isolation) in [("ermia-si", "si"), ("ermia-ssi", "serializable")] {
        let dir = tmp(protocol);
        let d = dir.to_str().unwrap();
        let args = ["--protocol", protocol, "--isolation", isolation];
        let out = ok(&durable_tpcc(d, "1", &args), protocol);
        assert!(out.contains("ERMIA log manager"), "{out}");
        let out = ok(&myriad(&["check", "tpcc", "--data-dir", d]), "check tpcc");
        assert!(out.contains("conditions 1-4 hold"), "{out}");
        let _ = std::fs::remove_dir_all(&dir);
        // Asked for, the epoch manager is used.
        let mut epoch = args.to_vec();
        epoch.extend(["--log-manager", "epoch"]);
        let out = ok(&durable_tpcc(d, "1", &epoch), protocol);
        assert!(out.contains("epoch group commit"), "{out}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}

#[test]
fn an_ermia_log_recovers_consistent_and_reads_back() {
    let dir = tmp("ermia");
    let d = dir.to_str().unwrap();
    let run = |extra: &[&str]| {
        let mut a = vec!["--log-manager", "ermia"];
        a.extend_from_slice(extra);
        durable_tpcc(d, "2", &a)
    };
    // One log: asking for parallel loggers too is a usage error that names both.
    let refused = run(&["--loggers", "2"]);
    assert_eq!(refused.status.code(), Some(2));
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(err.contains("ermia") && err.contains("loggers"), "{err}");
    let out = ok(&run(&[]), "durable tpcc, ermia log");
    assert!(out.contains("ERMIA log manager"), "{out}");
    let inspect = ok(&myriad(&["log", "inspect", d]), "log inspect");
    assert!(inspect.contains("durable LSN"), "{inspect}");
    let records: u64 = inspect
        .lines()
        .filter(|l| l.starts_with("seg-"))
        .map(|l| {
            let cols: Vec<&str> = l.split_whitespace().collect();
            assert_eq!(cols.last(), Some(&"ok"), "{l}");
            cols[3].replace(',', "").parse::<u64>().unwrap()
        })
        .sum();
    assert!(records > 0, "{inspect}");
    let json = tmp("ermia.json");
    ok(
        &myriad(&["recover", d, "--json", json.to_str().unwrap()]),
        "recover ermia",
    );
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert!(v["durable_lsn"].as_u64().unwrap() > 0, "{v}");
    let replayed = v["records_replayed"].as_u64().unwrap();
    assert!(replayed > 0 && replayed <= records, "{v}");
    assert_eq!(v["records_not_durable"], 0, "{v}");
    let out = ok(&myriad(&["check", "tpcc", "--data-dir", d]), "check tpcc");
    assert!(out.contains("conditions 1-4 hold"), "{out}");
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_file(&json);
}
