//! Inputs that used to crash the CLI or make it fail needlessly: output into a closed pipe,
//! loads that cannot fit in memory, `--protocol` without `--isolation`, `--data-dir` naming a
//! file, and `recover --help`'s list of schemes and PACMAN modes.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Output, Stdio};
use std::time::{Duration, Instant};

fn myriad(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_myriad"))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run the myriad binary")
}

fn tmp(tag: &str) -> PathBuf {
    let p = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("cli_robustness-{}-{tag}", std::process::id()));
    let _ = std::fs::remove_dir_all(&p);
    let _ = std::fs::remove_file(&p);
    p
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A short in-memory YCSB run's flags, with `extra`.
fn small_ycsb(extra: &[&str]) -> Vec<String> {
    let mut a: Vec<String> = [
        "bench",
        "ycsb",
        "--rows",
        "2000",
        "--threads",
        "1",
        "--duration",
        "0.1",
        "--warmup",
        "0",
        "--no-progress",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    a.extend(extra.iter().map(|s| s.to_string()));
    a
}

/// Runs the binary with stdout a pipe whose read end is already closed and `stdin` as its
/// input; returns the exit status and stderr.
fn into_closed_pipe(args: &[String], stdin: Option<&Path>) -> (ExitStatus, String) {
    let (reader, writer) = std::io::pipe().expect("a pipe");
    drop(reader);
    let input = match stdin {
        Some(p) => Stdio::from(std::fs::File::open(p).expect("the input file")),
        None => Stdio::null(),
    };
    let out = Command::new(env!("CARGO_BIN_EXE_myriad"))
        .args(args)
        .stdin(input)
        .stdout(writer)
        .stderr(Stdio::piped())
        .output()
        .expect("run the myriad binary");
    (out.status, stderr(&out))
}

/// Exited quietly, as `cat` does into a closed pipe: status 0 or killed by SIGPIPE, never a
/// panic (exit 101 with "panicked" and a backtrace hint on stderr).
fn assert_quiet_exit(what: &str, status: ExitStatus, err: &str) {
    use std::os::unix::process::ExitStatusExt;
    assert!(!err.contains("panicked"), "{what}: {err}");
    assert!(
        status.code() == Some(0) || status.signal() == Some(13),
        "{what}: {status:?}: {err}"
    );
}

#[test]
fn output_into_a_closed_pipe_ends_quietly() {
    // bench
    let (st, err) = into_closed_pipe(&small_ycsb(&[]), None);
    assert_quiet_exit("bench ycsb", st, &err);

    // log inspect, on a directory a durable run wrote
    let dir = tmp("pipe-data");
    let d = dir.to_str().unwrap().to_string();
    let out = myriad(
        &small_ycsb(&["--data-dir", &d])
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>(),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let (st, err) = into_closed_pipe(&["log".into(), "inspect".into(), d.clone()], None);
    assert_quiet_exit("log inspect", st, &err);

    // shell, reading a script
    let script = tmp("pipe.sql");
    std::fs::write(
        &script,
        "CREATE TABLE t (k INT PRIMARY KEY);\nINSERT INTO t VALUES (1), (2);\nSELECT k FROM t;\n",
    )
    .unwrap();
    let (st, err) = into_closed_pipe(&["shell".into()], Some(&script));
    assert_quiet_exit("shell", st, &err);

    // isolation-test
    let spec = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/isolation/lost-update.spec");
    let (st, err) = into_closed_pipe(
        &["isolation-test".into(), spec.to_str().unwrap().into()],
        None,
    );
    assert_quiet_exit("isolation-test", st, &err);

    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_file(&script);
}

/// Runs `args`; a run still going after `limit` is killed and fails the test (the old
/// behaviour: loading until an allocation fails).
fn refused_within(args: &[&str], limit: Duration) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_myriad"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run the myriad binary");
    let start = Instant::now();
    loop {
        if child.try_wait().expect("wait").is_some() {
            return child.wait_with_output().expect("output");
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{args:?} still loading after {limit:?} instead of being refused");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_load_that_cannot_fit_in_memory_is_refused_before_loading() {
    if !Path::new("/proc/meminfo").exists() {
        return; // nothing to compare the estimate with: the check is off
    }
    for (workload, flag, n) in [
        ("tpcc", "--warehouses", "100000"),
        ("ycsb", "--prefault-mib", "1048576"),
        ("ycsb", "--rows", "9000000000000"),
        ("smallbank", "--accounts", "1000000000"),
        ("tatp", "--subscribers", "1000000000"),
    ] {
        let out = refused_within(
            &[
                "bench",
                workload,
                flag,
                n,
                "--no-progress",
                "--duration",
                "1",
            ],
            Duration::from_secs(60),
        );
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{workload}: {err}");
        assert!(
            err.contains(&format!("{flag} {n}"))
                && err.contains("MemAvailable")
                && err.contains("--force"),
            "{workload}: {err}"
        );
    }
}

#[test]
fn without_isolation_the_protocols_strongest_level_is_used_and_said() {
    let out = myriad(
        &small_ycsb(&["--protocol", "si"])
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>(),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("isolation level si"),
        "{}",
        stderr(&out)
    );
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(
        report.lines().any(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            w == ["isolation", "si"]
        }),
        "{report}"
    );

    let spec = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/isolation/lost-update.spec");
    let out = myriad(&["isolation-test", "--protocol", "si", spec.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("isolation level si"),
        "{}",
        stderr(&out)
    );

    // An explicit level still wins, and a wrong one is still refused.
    let out = myriad(
        &small_ycsb(&["--protocol", "si", "--isolation", "serializable"])
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>(),
    );
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
}

#[test]
fn a_data_dir_that_is_a_file_is_named_as_such() {
    let file = tmp("a-file");
    std::fs::write(&file, "not a directory").unwrap();
    let f = file.to_str().unwrap();
    let out = myriad(
        &small_ycsb(&["--data-dir", f])
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>(),
    );
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("not a directory") && stderr(&out).contains(f),
        "{}",
        stderr(&out)
    );
    let out = myriad(&["shell", "--data-dir", f]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("not a directory") && stderr(&out).contains(f),
        "{}",
        stderr(&out)
    );
    let _ = std::fs::remove_file(&file);
}

#[test]
fn recover_help_lists_every_scheme() {
    let out = myriad(&["recover", "--help"]);
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    for scheme in [
        "auto",
        "serial",
        "parallel-latched",
        "parallel-partitioned",
        "physical",
        "pacman",
    ] {
        assert!(help.contains(scheme), "{scheme} missing from:\n{help}");
    }
    // PACMAN's modes, from the enum: a new mode must be documented in the help.
    for mode in myriad::PacmanMode::ALL {
        assert!(help.contains(mode.name()), "{mode} missing from:\n{help}");
    }
}
