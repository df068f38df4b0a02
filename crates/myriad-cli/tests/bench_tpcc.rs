//! `myriad bench tpcc` as a user runs it: short two-thread runs under Serializable and SI
//! that must pass TPC-C consistency conditions 1–4 (`--check`), with StockScan reported on
//! its own, and the procedures file readable by `myriad explain`.

use serde_json::Value;
use std::path::PathBuf;
use std::process::{Command, Output};

fn myriad(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_myriad"))
        .args(args)
        .output()
        .expect("run the myriad binary")
}

/// A 2-thread, 0.5 s TPC-C run with `--check` and `extra` flags: its JSON report and its
/// printed one.
fn tpcc(tag: &str, extra: &[&str]) -> (Value, String) {
    let mut args = vec![
        "--threads",
        "2",
        "--duration",
        "0.5",
        "--warmup",
        "0",
        "--check",
    ];
    args.extend_from_slice(extra);
    run(tag, &args)
}

/// `myriad bench tpcc --no-progress ARGS` (it must succeed): its JSON report and its printed
/// one.
fn run(tag: &str, args: &[&str]) -> (Value, String) {
    let path = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("bench_tpcc-{}-{tag}.json", std::process::id()));
    let p = path.to_str().expect("utf-8 temp path");
    let mut argv = vec!["bench", "tpcc", "--no-progress", "--json", p];
    argv.extend_from_slice(args);
    let out = myriad(&argv);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "myriad {argv:?} failed: {}\n{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&path).expect("JSON report written");
    let _ = std::fs::remove_file(&path);
    (
        serde_json::from_str(&text).expect("one JSON object"),
        stdout,
    )
}

#[test]
fn short_runs_keep_the_consistency_conditions_under_serializable_and_si() {
    for (isolation, warehouses) in [("serializable", "2"), ("si", "1"), ("rr", "1")] {
        let (r, human) = tpcc(
            isolation,
            &[
                "--isolation",
                isolation,
                "--warehouses",
                warehouses,
                "--stock-scan-threads",
                "1",
            ],
        );
        assert!(
            human.contains("consistency conditions 1-4 hold"),
            "{isolation}: {human}"
        );
        assert_eq!(r["workload"], "tpcc");
        assert_eq!(
            r["config"]["warehouses"].as_i64(),
            Some(warehouses.parse().unwrap())
        );
        assert_eq!(r["fidelity"]["isolation"], isolation);
        let lat = &r["latency_us"];
        for ty in [
            "new_order",
            "payment",
            "order_status",
            "delivery",
            "stock_level",
        ] {
            assert!(
                lat[ty]["count"].as_u64() > Some(0),
                "{isolation}: no {ty}: {lat}"
            );
        }
        // StockScan runs on its own thread, is reported under its own type, and is not part
        // of the committed count.
        let scans = lat["stock_scan"]["count"].as_u64().unwrap_or(0);
        assert!(scans > 0, "{isolation}: {lat}");
        let terminal: u64 = [
            "new_order",
            "payment",
            "order_status",
            "delivery",
            "stock_level",
        ]
        .iter()
        .map(|t| lat[t]["count"].as_u64().unwrap_or(0))
        .sum();
        assert_eq!(r["committed"].as_u64(), Some(terminal), "{isolation}");
        // The 1% New-Order rollback is a user abort, counted and not retried.
        assert!(r["abort_reasons"]["user_abort"].as_u64() > Some(0), "{r}");
    }
}

#[test]
fn no_inserts_keeps_the_database_size_and_remote_zero_keeps_warehouses_apart() {
    let (r, human) = tpcc(
        "noins",
        &["--no-inserts", "--remote-pct", "0", "--warehouses", "2"],
    );
    assert!(human.contains("2 not checked: --no-inserts"), "{human}");
    assert_eq!(r["fidelity"]["inserts"], false);
    assert!(
        r["fidelity"]["remote"]
            .as_str()
            .unwrap_or("")
            .starts_with("0% "),
        "{}",
        r["fidelity"]
    );
}

/// `--mix updates`: only New-Order, Payment and Delivery run (the calls a command log holds),
/// roughly at 45:43:4, and the consistency conditions hold.
#[test]
fn the_updates_mix_runs_no_read_only_transaction() {
    let (r, human) = tpcc("updates", &["--mix", "updates", "--warehouses", "1"]);
    assert!(human.contains("consistency conditions 1-4 hold"), "{human}");
    assert!(
        r["fidelity"]["mix"]
            .as_str()
            .unwrap()
            .starts_with("updates"),
        "{}",
        r["fidelity"]
    );
    let count = |t: &str| r["latency_us"][t]["count"].as_u64().unwrap_or(0);
    assert_eq!(
        (count("order_status"), count("stock_level")),
        (0, 0),
        "{human}"
    );
    let (no, pay, del) = (count("new_order"), count("payment"), count("delivery"));
    assert!(no > 0 && pay > 0 && del > 0, "{human}");
    // 45:43 within a wide margin for a short run; Delivery ~4/92 of all.
    let all = (no + pay + del) as f64;
    assert!(
        (0.40..0.58).contains(&(no as f64 / all)),
        "{no} {pay} {del}"
    );
    assert!(
        (0.01..0.10).contains(&(del as f64 / all)),
        "{no} {pay} {del}"
    );
}

#[test]
fn invalid_flags_are_usage_errors() {
    for args in [
        &["--warehouses", "0"][..],
        &["--remote-pct", "101"],
        &["--remote-pct", "-1"],
    ] {
        let mut argv = vec!["bench", "tpcc"];
        argv.extend_from_slice(args);
        let out = myriad(&argv);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
    }
}

#[test]
fn the_tpcc_procedures_explain() {
    let file = concat!(env!("CARGO_MANIFEST_DIR"), "/workloads/tpcc.sql");
    let out = myriad(&["explain", file]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for p in [
        "new_order",
        "payment",
        "order_status",
        "delivery",
        "stock_level",
        "stock_scan",
    ] {
        assert!(text.contains(&format!("PROCEDURE {p}(")), "{p} missing");
    }
}

/// Read Committed runs TPC-C without a fatal error: the duplicate order id its lost update of
/// `d_next_o_id` produces is retried as a unique conflict. (No `--check`: the level permits
/// anomalies the conditions can see.)
#[test]
fn read_committed_runs() {
    let out = myriad(&[
        "bench",
        "tpcc",
        "--isolation",
        "rc",
        "--threads",
        "2",
        "--duration",
        "0.5",
        "--warmup",
        "0",
        "--no-progress",
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}\n{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("throughput"), "{stdout}");
}

/// Every protocol runs the full mix (with StockScan and inserts) and keeps TPC-C's
/// consistency conditions; its own abort reason shows up in the report.
#[test]
fn every_protocol_keeps_the_consistency_conditions() {
    for (protocol, isolation, reason) in [
        ("mvto", "serializable", "timestamp_order"),
        ("mv2pl", "serializable", "lock_conflict"),
        ("mv2pl-wait", "serializable", "lock_conflict"),
        ("si", "si", "write_write_conflict"),
        ("ssn", "serializable", "write_write_conflict"),
        ("ermia-ssi", "serializable", "write_write_conflict"),
        ("ermia-si", "si", "write_write_conflict"),
        ("ssi", "serializable", "write_write_conflict"),
        ("silo", "serializable", "read_validation"),
        ("occ", "serializable", "read_validation"),
        ("2pl", "serializable", "lock_conflict"),
        ("hybrid", "serializable", "read_validation"),
    ] {
        // Its own JSON path: the other tests run in parallel, with tags such as `si`.
        let (r, human) = tpcc(
            &format!("every-{protocol}"),
            &[
                "--protocol",
                protocol,
                "--isolation",
                isolation,
                "--warehouses",
                "1",
                "--stock-scan-threads",
                "1",
            ],
        );
        assert!(
            human.contains("consistency conditions 1-4 hold"),
            "{protocol}: {human}"
        );
        assert_eq!(r["fidelity"]["protocol"], protocol, "{r}");
        assert!(r["committed"].as_u64() > Some(0), "{protocol}: {r}");
        // One warehouse, two terminals: conflicts are certain in half a second.
        assert!(
            r["abort_reasons"][reason].as_u64() > Some(0),
            "{protocol}: no {reason}: {}",
            r["abort_reasons"]
        );
    }
}

/// Oldest-to-newest chains (`--storage o2n`) under MVOCC, MVTO and SSN: the full mix keeps
/// the consistency conditions (Delivery's deletes leave tombstone chains GC cuts from the
/// front; New-Order re-inserts nothing, so none is revived here).
/// Index pointers `logical-pk` (secondary entries hold primary keys: customer by last name,
/// orders by customer) keep them too, under a protocol of each family: Order-Status and
/// Payment find customers by name through the primary index. So do `physical` pointers (an
/// entry per version in every secondary index, removed when GC collects the version) under
/// the multi-version protocols.
#[test]
fn o2n_storage_and_logical_pk_pointers_keep_the_consistency_conditions() {
    let o2n = (
        "--storage",
        "o2n",
        "version_storage",
        &["mvocc", "mvto", "ssn"][..],
    );
    let lpk = (
        "--index-pointers",
        "logical-pk",
        "index_pointers",
        &["mvocc", "mvto", "ssn", "silo"][..],
    );
    let physical = (
        "--index-pointers",
        "physical",
        "index_pointers",
        &["mvocc", "mvto", "ssn"][..],
    );
    for (flag, value, field, protocols) in [o2n, lpk, physical] {
        for &protocol in protocols {
            let (r, human) = tpcc(
                &format!("{value}-{protocol}"),
                &["--protocol", protocol, flag, value, "--warehouses", "1"],
            );
            assert!(
                human.contains("consistency conditions 1-4 hold"),
                "{value} {protocol}: {human}"
            );
            assert_eq!(r["fidelity"][field], value, "{r}");
            assert!(r["committed"].as_u64() > Some(0), "{protocol}: {r}");
        }
    }
}

/// `--mix new-order-fragment` (POMVCC §VII-B) runs only its one transaction type, says so
/// in the fidelity block, runs under every timestamp source, and refuses `--check` and
/// `--stock-scan-threads` by name.
#[test]
fn the_new_order_fragment_runs_alone_and_refuses_the_full_mix_flags() {
    for (tag, extra) in [
        ("frag", &[][..]),
        (
            "frag-po",
            &["--protocol", "si", "--timestamps", "partial-order"][..],
        ),
        ("frag-lc", &["--timestamps", "locked-counter"][..]),
    ] {
        let mut args = vec![
            "--mix",
            "new-order-fragment",
            "--warehouses",
            "1",
            "--threads",
            "2",
            "--duration",
            "0.5",
            "--warmup",
            "0",
        ];
        args.extend_from_slice(extra);
        let (r, _) = run(tag, &args);
        let lat = &r["latency_us"];
        let frags = lat["no_fragment"]["count"].as_u64().unwrap_or(0);
        assert!(frags > 0, "{tag}: {lat}");
        assert_eq!(
            r["committed"].as_u64(),
            Some(frags),
            "{tag}: only fragments"
        );
        assert!(lat.get("new_order").is_none(), "{tag}: {lat}");
        let mix = r["fidelity"]["mix"].as_str().unwrap_or("");
        assert!(mix.starts_with("new-order-fragment"), "{tag}: {mix}");
    }
    for flag in [&["--check"][..], &["--stock-scan-threads", "1"]] {
        let mut argv = vec!["bench", "tpcc", "--mix", "new-order-fragment"];
        argv.extend_from_slice(flag);
        let out = myriad(&argv);
        assert_eq!(out.status.code(), Some(2), "{flag:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(flag[0]) && err.contains("standard mix"),
            "{err}"
        );
    }
}

/// Durable `partial-order` (a commit readable only once logged): a fragment that meets its
/// own thread's previous, not yet logged commit aborts; the runner's retry waits until that
/// commit is readable (`Database::take_retry_floor`, `wait_for_floor`) instead of retrying
/// at a snapshot that still lacks it. One thread, so every conflict is with its own commits:
/// before the wait, 83% of attempts aborted (each retry met the same commit until its round
/// ran); with it, about one in ten.
#[test]
fn durable_partial_order_retries_wait_for_the_commit_they_met() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("bench_tpcc-po-durable-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let d = dir.to_str().expect("utf-8 temp path");
    let (r, _) = run(
        "po-durable",
        &[
            "--mix",
            "new-order-fragment",
            "--protocol",
            "si",
            "--timestamps",
            "partial-order",
            "--data-dir",
            d,
            "--log",
            "logical",
            "--warehouses",
            "4",
            "--threads",
            "1",
            "--duration",
            "1",
            "--warmup",
            "0",
        ],
    );
    let _ = std::fs::remove_dir_all(&dir);
    let committed = r["committed"].as_u64().unwrap_or(0);
    let aborts = r["abort_reasons"]["write_write_conflict"]
        .as_u64()
        .unwrap_or(0);
    assert!(committed > 200, "{r}");
    assert!(
        aborts > 0,
        "no conflict to retry: the test shows nothing: {r}"
    );
    assert!(
        r["abort_rate"].as_f64().unwrap_or(1.0) < 0.4,
        "retries meet the same unlogged commit again: {r}"
    );
}
