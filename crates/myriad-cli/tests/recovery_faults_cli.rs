//! Issue 32's reproducers, as a user runs them: files missing from a durable TPC-C directory
//! are refused by `myriad recover` (which then changes nothing) and reported by `myriad log
//! inspect` with a non-zero exit; `recover --verify` writes nothing; `recover` never writes a
//! database into an empty or foreign directory; a run killed while loading is reported as an
//! incomplete load. And issue 33's: recovery `pacman` gives every row serial replay gives, on
//! TPC-C, Smallbank and TATP command logs, at 1 and 2 threads, also with a torn tail.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn myriad(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_myriad"))
        .args(args)
        .output()
        .expect("run the myriad binary")
}

fn tmp(tag: &str) -> PathBuf {
    let p = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("recovery_faults_cli-{}-{tag}", std::process::id()));
    let _ = std::fs::remove_dir_all(&p);
    let _ = std::fs::remove_file(&p);
    p
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Every file under `dir` (relative) with its bytes, `LOCK` aside.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    fn walk(root: &Path, d: &Path, out: &mut BTreeMap<PathBuf, Vec<u8>>) {
        for e in std::fs::read_dir(d).unwrap() {
            let e = e.unwrap();
            if e.file_type().unwrap().is_dir() {
                walk(root, &e.path(), out);
            } else if e.file_name() != "LOCK" {
                let p = e.path();
                out.insert(
                    p.strip_prefix(root).unwrap().to_path_buf(),
                    std::fs::read(&p).unwrap(),
                );
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

fn copy(from: &Path, to: &Path) {
    let _ = std::fs::remove_dir_all(to);
    for (rel, data) in snapshot(from) {
        let p = to.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, data).unwrap();
    }
}

/// A durable TPC-C run of a second on 1 warehouse, 1 thread, with `extra` flags.
fn tpcc_dir(tag: &str, extra: &[&str]) -> PathBuf {
    let mut a = vec![
        "tpcc",
        "--warehouses",
        "1",
        "--threads",
        "1",
        "--duration",
        "1",
    ];
    a.extend_from_slice(extra);
    bench_dir(tag, &a)
}

/// A durable `myriad bench` run of `workload` (the workload and its flags), without
/// warmup, into a fresh directory.
fn bench_dir(tag: &str, workload: &[&str]) -> PathBuf {
    let d = tmp(tag);
    let mut a = vec!["bench"];
    a.extend_from_slice(workload);
    a.extend_from_slice(&["--warmup", "0", "--no-progress", "--data-dir"]);
    a.push(d.to_str().unwrap());
    let o = myriad(&a);
    assert!(o.status.success(), "bench: {}", text(&o));
    d
}

fn files_starting(dir: &Path, prefix: &str) -> Vec<PathBuf> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut v: Vec<PathBuf> = rd
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with(prefix))
        .collect();
    v.sort();
    v
}

/// Removes `victims` (file names under `dir`'s copy), then: `log inspect` exits 1,
/// `recover --verify` and `recover` exit 1 naming `names`, and the copy is unchanged.
fn refused(dir: &Path, tag: &str, victims: &[&str], names: &str) {
    let c = tmp(tag);
    copy(dir, &c);
    for v in victims {
        for p in files_starting(&c, v) {
            std::fs::remove_file(p).unwrap();
        }
    }
    let before = snapshot(&c);
    let cs = c.to_str().unwrap();
    for args in [
        vec!["log", "inspect", cs],
        vec!["recover", "--verify", cs],
        vec!["recover", cs],
        vec!["check", "tpcc", "--data-dir", cs],
    ] {
        let o = myriad(&args);
        assert_eq!(o.status.code(), Some(1), "{tag}: {args:?} {}", text(&o));
        assert!(text(&o).contains(names), "{tag}: {args:?} {}", text(&o));
        assert!(!text(&o).contains("panicked"), "{}", text(&o));
    }
    assert_eq!(
        snapshot(&c),
        before,
        "{tag}: a refused recovery changed the directory"
    );
    let _ = std::fs::remove_dir_all(&c);
}

#[test]
fn missing_log_files_are_refused_by_name() {
    // The default log: command records of TPC-C calls.
    let d = tpcc_dir("cmd", &["--log", "command"]);
    refused(&d, "cmd-logs", &["log-"], "log-00-");
    refused(&d, "cmd-points", &["pepoch"], "pepoch");
    // The durable-point file alone: its mirror holds the same records, nothing is lost.
    let c = tmp("cmd-pepoch");
    copy(&d, &c);
    std::fs::remove_file(c.join("pepoch")).unwrap();
    let o = myriad(&["recover", c.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("its copy"), "{}", text(&o));
    assert!(
        text(&o).contains("0 past the durable point"),
        "{}",
        text(&o)
    );
    let o = myriad(&["check", "tpcc", "--data-dir", c.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o));
    let _ = std::fs::remove_dir_all(&c);

    // Physical logging on 2 loggers with small files: a middle file, the newest file, and
    // every file of one logger.
    let d = tpcc_dir(
        "phys",
        &["--log", "physical", "--loggers", "2", "--log-file-mib", "1"],
    );
    let logs = files_starting(&d, "log-00-");
    assert!(logs.len() >= 3, "{logs:?}");
    let name = |p: &PathBuf| p.file_name().unwrap().to_string_lossy().to_string();
    let middle = name(&logs[1]);
    refused(&d, "phys-middle", &[&middle], &middle);
    let newest = name(logs.last().unwrap());
    refused(&d, "phys-newest", &[&newest], &newest);
    refused(&d, "phys-logger", &["log-01-"], "log-01-");

    // ERMIA's log: segments, and the durable-LSN file with its mirror.
    let d = tpcc_dir("ermia", &["--log-manager", "ermia"]);
    refused(&d, "ermia-segs", &["seg-"], "seg-");
    refused(&d, "ermia-point", &["durable-lsn"], "durable-lsn");
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn recover_writes_no_database_where_there_is_none() {
    let e = tmp("empty");
    std::fs::create_dir_all(&e).unwrap();
    let o = myriad(&["recover", e.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("no database here"), "{}", text(&o));
    assert_eq!(std::fs::read_dir(&e).unwrap().count(), 0);
    // A directory of the user's own files.
    std::fs::write(e.join("thesis.tex"), b"\\documentclass{book}").unwrap();
    for args in [
        vec!["recover", e.to_str().unwrap()],
        vec!["log", "inspect", e.to_str().unwrap()],
    ] {
        let o = myriad(&args);
        assert_eq!(o.status.code(), Some(1), "{}", text(&o));
        assert!(
            text(&o).contains("not a Myriad data directory"),
            "{}",
            text(&o)
        );
    }
    assert_eq!(std::fs::read_dir(&e).unwrap().count(), 1);
    // A regular file.
    let f = e.join("thesis.tex");
    let o = myriad(&["recover", f.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("a file, not a directory"), "{}", text(&o));
    let _ = std::fs::remove_dir_all(&e);
}

#[test]
fn verify_writes_nothing_and_agrees_with_recover() {
    let d = tpcc_dir("verify", &[]);
    let before = snapshot(&d);
    let o = myriad(&["recover", "--verify", d.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains("verified (nothing written)"),
        "{}",
        text(&o)
    );
    assert_eq!(snapshot(&d), before);
    let o = myriad(&["log", "inspect", d.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o));
    let o = myriad(&["recover", d.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains("benchmark load    complete"),
        "{}",
        text(&o)
    );
    let _ = std::fs::remove_dir_all(&d);
}

/// A durable run killed while it loads: `check` says the load is incomplete (instead of
/// listing violations of the consistency conditions) and `recover` says so too.
#[test]
fn a_run_killed_while_loading_is_reported_as_an_incomplete_load() {
    let d = tmp("killed-load");
    let mut child = Command::new(env!("CARGO_BIN_EXE_myriad"))
        .args([
            "bench",
            "tpcc",
            "--warehouses",
            "8",
            "--threads",
            "1",
            "--duration",
            "30",
            "--no-progress",
            "--data-dir",
            d.to_str().unwrap(),
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Kill once the load has begun (the marker table is in the catalog) and rows are logged.
    let t = std::time::Instant::now();
    loop {
        let cat = std::fs::read(d.join("catalog")).unwrap_or_default();
        let began = cat.windows(17).any(|w| w == b"myriad_bench_load");
        let logged: u64 = files_starting(&d, "log-")
            .iter()
            .map(|p| std::fs::metadata(p).map_or(0, |m| m.len()))
            .sum();
        if began && logged > 200_000 {
            break;
        }
        assert!(
            t.elapsed().as_secs() < 120,
            "the load never started logging"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let o = myriad(&["check", "tpcc", "--data-dir", d.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        text(&o).contains("benchmark load incomplete"),
        "{}",
        text(&o)
    );
    assert!(!text(&o).contains("violation"), "{}", text(&o));
    let o = myriad(&["recover", d.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains("benchmark load    incomplete"),
        "{}",
        text(&o)
    );
    let _ = std::fs::remove_dir_all(&d);
}

/// Every table of a copy of `dir` recovered by `scheme` on `threads` threads (sorted rows
/// as text), and the recovery report. `pipelined`: PACMAN's pipelined mode, in batches of
/// two epochs (so a short run's log holds many), else its sync mode (in the default
/// batches). `slicing`: PACMAN's pieces, if not its slices (in its static mode, as thesis
/// Fig. 4.18 runs the baselines).
fn recovered_rows_with(
    dir: &Path,
    tag: &str,
    scheme: &str,
    threads: usize,
    pipelined: bool,
    slicing: Option<myriad::PacmanSlicing>,
) -> (Vec<String>, myriad::RecoveryReport) {
    use myriad::{Config, Database, PacmanMode, RecoveryScheme};
    let c = tmp(tag);
    copy(dir, &c);
    let mut config = Config::new()
        .data_dir(&c)
        .create_if_missing(false)
        .recovery(scheme.parse::<RecoveryScheme>().unwrap())
        .recovery_threads(threads);
    config = if pipelined {
        config
            .pacman_mode(PacmanMode::Pipelined)
            .pacman_batch_epochs(2)
    } else {
        config.pacman_mode(PacmanMode::Sync)
    };
    if let Some(s) = slicing {
        config = config.pacman_slicing(s).pacman_mode(PacmanMode::Static);
    }
    let db = Database::open(config)
        .unwrap_or_else(|e| panic!("{tag}: {scheme} on {threads} threads: {e}"));
    let rep = db.recovery_report().unwrap().clone();
    assert!(rep.calls_replayed > 0, "{tag}: {rep:?}");
    let mut names = db.table_names();
    names.sort();
    let mut out = Vec::new();
    for n in names {
        let t = db.table(&n).unwrap();
        let mut rows = Vec::new();
        let mut tx = db.begin().unwrap();
        tx.scan_table(&t, |r| {
            let vals: Vec<String> = (0..r.len()).map(|i| format!("{:?}", r.get(i))).collect();
            rows.push(format!("{n}: {}", vals.join(", ")));
            true
        })
        .unwrap();
        tx.commit().unwrap();
        rows.sort();
        out.extend(rows);
    }
    drop(db);
    let _ = std::fs::remove_dir_all(&c);
    (out, rep)
}

/// `recovered_rows_with` PACMAN's own slices.
fn recovered_rows(
    dir: &Path,
    tag: &str,
    scheme: &str,
    threads: usize,
    pipelined: bool,
) -> (Vec<String>, myriad::RecoveryReport) {
    recovered_rows_with(dir, tag, scheme, threads, pipelined, None)
}

/// `myriad bench` arguments of a small two-thread run of `workload` (tpcc: 2 warehouses,
/// smallbank: 300 accounts, tatp: 500 subscribers) for `duration` seconds.
fn small_run(workload: &'static str, duration: &'static str) -> Vec<&'static str> {
    let size = match workload {
        "tpcc" => ["--warehouses", "2"],
        "smallbank" => ["--accounts", "300"],
        _ => ["--subscribers", "500"],
    };
    let mut a = vec![workload];
    a.extend(size);
    a.extend(["--threads", "2", "--duration", duration]);
    a
}

/// Recovers copies of `dir` by `serial` (1 thread) and `pacman` (1 and 2 threads, sync
/// and pipelined; and static on 2 threads with the pieces of transaction chopping and of
/// whole calls) and compares every row.
fn pacman_agrees_with_serial(dir: &Path, tag: &str) {
    let (serial, s) = recovered_rows(dir, &format!("{tag}-serial"), "serial", 1, false);
    assert_eq!(s.scheme, "serial");
    assert!(serial.len() > 100, "{tag}: {} rows", serial.len());
    let (_, slices) = recovered_rows(dir, &format!("{tag}-slices"), "pacman", 2, false);
    for slicing in [
        myriad::PacmanSlicing::Chopping,
        myriad::PacmanSlicing::Whole,
    ] {
        let what = format!("{tag}: pacman static, pieces by {slicing}");
        let (got, rep) = recovered_rows_with(
            dir,
            &format!("{tag}-{slicing}"),
            "pacman",
            2,
            false,
            Some(slicing),
        );
        assert!(got == serial, "{what} differs from serial");
        // Coarser pieces: no more of them than PACMAN's slices make, and at most one per
        // record under `whole` (a row record writing several blocks' tables is one each).
        assert!(rep.pieces <= slices.pieces, "{what}: {rep:?} vs {slices:?}");
        assert!(rep.pieces > 0, "{what}");
        if slicing == myriad::PacmanSlicing::Whole {
            assert_eq!(rep.pieces, rep.records_replayed, "{what}: {rep:?}");
        }
    }
    for pipelined in [false, true] {
        for threads in [1, 2] {
            let (got, rep) = recovered_rows(
                dir,
                &format!("{tag}-pacman{threads}-{pipelined}"),
                "pacman",
                threads,
                pipelined,
            );
            assert_eq!(rep.scheme, "pacman");
            assert!(
                got == serial,
                "{tag}: pacman (pipelined: {pipelined}) on {threads} threads differs from \
                 serial: {} vs {} rows, first difference {:?}",
                got.len(),
                serial.len(),
                got.iter().zip(&serial).find(|(a, b)| a != b)
            );
            if !pipelined {
                assert_eq!(rep.sets_overlapped, 0, "{tag}: {rep:?}");
            } else if threads == 1 {
                // One worker takes the newest ready work: a block's next piece-set, once
                // ready, starts before the rest of the batch (every one of these workloads
                // has a block with a child).
                assert!(rep.batches > 1 && rep.sets_overlapped > 0, "{tag}: {rep:?}");
            }
            eprintln!(
                "{tag}: pacman pipelined {pipelined}, {threads} threads: {} batches, {} pieces, \
                 {} piece-sets overlapped",
                rep.batches, rep.pieces, rep.sets_overlapped
            );
        }
    }
}

#[test]
fn pacman_recovers_what_serial_recovers_on_tpcc_smallbank_and_tatp_command_logs() {
    for tag in ["tpcc", "smallbank", "tatp"] {
        let mut w = small_run(tag, if tag == "tpcc" { "0.7" } else { "0.5" });
        w.extend_from_slice(&["--log", "command", "--loggers", "2"]);
        let d = bench_dir(&format!("pacman-{tag}"), &w);
        pacman_agrees_with_serial(&d, tag);
        if tag == "tpcc" {
            // End to end: `myriad recover --recovery pacman`, then TPC-C's consistency check.
            let c = tmp("pacman-tpcc-cli");
            copy(&d, &c);
            let cs = c.to_str().unwrap();
            // PACMAN's options without `--recovery pacman` are refused by name.
            let o = myriad(&["recover", cs, "--pacman-mode", "pipelined"]);
            assert_eq!(o.status.code(), Some(2), "{}", text(&o));
            assert!(text(&o).contains("need --recovery pacman"), "{}", text(&o));
            let o = myriad(&[
                "recover",
                cs,
                "--recovery",
                "pacman",
                "--threads",
                "2",
                "--pacman-mode",
                "pipelined",
                "--pacman-batch-epochs",
                "3",
            ]);
            assert!(o.status.success(), "{}", text(&o));
            assert!(text(&o).contains("pacman (ms)"), "{}", text(&o));
            assert!(
                text(&o).contains("mode pipelined, pieces by pacman, 3 epochs per batch"),
                "{}",
                text(&o)
            );
            let o = myriad(&["check", "tpcc", "--data-dir", cs]);
            assert!(o.status.success(), "{}", text(&o));
            // Thesis Fig. 4.18's baseline by name, and a decomposition that does not exist.
            let o = myriad(&[
                "recover",
                "--verify",
                cs,
                "--recovery",
                "pacman",
                "--pacman-mode",
                "static",
                "--pacman-slicing",
                "chopping",
            ]);
            assert!(o.status.success(), "{}", text(&o));
            assert!(
                text(&o).contains("mode static, pieces by chopping"),
                "{}",
                text(&o)
            );
            let o = myriad(&[
                "recover",
                cs,
                "--recovery",
                "pacman",
                "--pacman-slicing",
                "tiny",
            ]);
            assert_eq!(o.status.code(), Some(2), "{}", text(&o));
            assert!(text(&o).contains("chopping"), "{}", text(&o));
            let o = myriad(&["recover", cs, "--pacman-slicing", "whole"]);
            assert_eq!(o.status.code(), Some(2), "{}", text(&o));
            assert!(text(&o).contains("need --recovery pacman"), "{}", text(&o));
            let _ = std::fs::remove_dir_all(&c);
        }
        let _ = std::fs::remove_dir_all(&d);
    }
}

#[test]
fn pacman_drops_a_torn_tail_as_serial_does() {
    let d = tpcc_dir("pacman-torn", &["--log", "command"]);
    // A half-written block after the durable end of the last log file.
    let last = files_starting(&d, "log-").pop().unwrap();
    let mut data = std::fs::read(&last).unwrap();
    data.extend_from_slice(&[0x4d, 0x52, 0x59, 0x4c]);
    data.extend_from_slice(&100u32.to_le_bytes());
    data.extend_from_slice(&[0u8; 30]);
    std::fs::write(&last, data).unwrap();
    let c = tmp("pacman-torn-verify");
    copy(&d, &c);
    let o = myriad(&[
        "recover",
        "--verify",
        c.to_str().unwrap(),
        "--recovery",
        "pacman",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("pacman"), "{}", text(&o));
    assert!(text(&o).contains("dropped tail"), "{}", text(&o));
    pacman_agrees_with_serial(&d, "tpcc-torn");
    let _ = std::fs::remove_dir_all(&c);
    let _ = std::fs::remove_dir_all(&d);
}

/// `--adhoc-pct P` (thesis Figs. 4.12, 4.17): about P% of the logged transactions are row
/// records, the rest calls; PACMAN replays the mix to serial's rows; 100% leaves no call;
/// without `--log command` the flag is refused by name.
#[test]
fn adhoc_transactions_are_logged_as_rows_and_pacman_replays_the_mix() {
    for tag in ["tpcc", "smallbank"] {
        let mut w = small_run(tag, if tag == "tpcc" { "0.5" } else { "0.4" });
        w.extend_from_slice(&["--log", "command", "--adhoc-pct", "40"]);
        let d = bench_dir(&format!("adhoc-{tag}"), &w);
        let (_, rep) = recovered_rows(&d, &format!("adhoc-{tag}-count"), "serial", 1, false);
        let rows = rep.records_replayed - rep.calls_replayed;
        let share = rows as f64 / rep.records_replayed as f64;
        assert!(
            rep.records_replayed > 500 && (0.3..0.5).contains(&share),
            "{tag}: {rows} row records of {} ({share:.3}) at --adhoc-pct 40",
            rep.records_replayed
        );
        pacman_agrees_with_serial(&d, &format!("adhoc-{tag}"));
        let _ = std::fs::remove_dir_all(&d);
    }

    // All ad hoc: a command log of row records only (PACMAN then is LLR-P, §4.4.5).
    let d = tpcc_dir("adhoc-all", &["--log", "command", "--adhoc-pct", "100"]);
    let json = tmp("adhoc-all.json");
    let o = myriad(&[
        "recover",
        "--verify",
        d.to_str().unwrap(),
        "--recovery",
        "pacman",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let r: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(r["calls_replayed"], 0, "{r}");
    assert!(r["records_replayed"].as_u64().unwrap() > 100, "{r}");
    let _ = std::fs::remove_file(&json);
    let _ = std::fs::remove_dir_all(&d);

    for (args, needs) in [
        (&["tpcc", "--adhoc-pct", "10"][..], "got no --log"),
        (
            &["smallbank", "--adhoc-pct", "10", "--log", "logical"][..],
            "got --log logical",
        ),
        (
            &[
                "tpcc",
                "--adhoc-pct",
                "10",
                "--log",
                "command",
                "--mix",
                "new-order-fragment",
            ][..],
            "--mix new-order-fragment",
        ),
    ] {
        let mut a = vec!["bench"];
        a.extend_from_slice(args);
        a.extend_from_slice(&["--duration", "0.1", "--warmup", "0", "--no-progress"]);
        let o = myriad(&a);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", text(&o));
        assert!(
            text(&o).contains("--adhoc-pct") && text(&o).contains(needs),
            "{args:?}: {}",
            text(&o)
        );
    }
}
