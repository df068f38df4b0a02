//! Logging experiments (thesis §4.7.1): what each log kind costs a running workload —
//! Table 4.1 (throughput and log size per transaction), Fig. 4.11 (throughput and latency
//! over time with checkpoints running), Table 4.2 (log bandwidth with and without a
//! checkpoint running), Table 4.3 (latency with and without fsync) and Fig. 4.12 (command
//! logging with a share of ad-hoc transactions).
//! Every logged run is durable in its own directory (`RUN_DIR`), on one logger, with the
//! run's default epoch and group commit.

use super::{Metric, Panel, Scale, Series, RUN_DIR};

/// The log kinds of Table 4.1, as the thesis labels them, with `--log`'s name (`None`:
/// logging off, the run in memory).
const KINDS: [(&str, Option<&str>); 4] = [
    ("OFF", None),
    ("PL (physical)", Some("physical")),
    ("LL (logical)", Some("logical")),
    ("CL (command)", Some("command")),
];

/// TPC-C as the thesis logs it (§4.7.1: `--no-inserts`, so the database does not grow), on
/// 2 warehouses (1 with `--quick`).
fn tpcc(s: &Scale) -> Vec<&'static str> {
    let w = if s.quick { "1" } else { "2" };
    vec!["tpcc", "--warehouses", w, "--no-inserts"]
}

/// Smallbank on thesis Table 3.2's 1,000 accounts.
fn smallbank() -> Vec<&'static str> {
    vec!["smallbank", "--accounts", "1000"]
}

/// `workload` logged as `log` (or in memory) with `fsync` and `extra` flags.
fn run(workload: &[&str], log: Option<&str>, fsync: &str, extra: &[&str]) -> Vec<String> {
    let mut a: Vec<&str> = workload.to_vec();
    if let Some(kind) = log {
        a.extend(["--data-dir", RUN_DIR, "--log", kind, "--fsync", fsync]);
    }
    a.extend_from_slice(extra);
    a.into_iter().map(String::from).collect()
}

/// One series over `xs`, each point's arguments from `args(x)`.
fn series(label: &str, xs: &[usize], args: impl Fn(usize) -> Vec<String>) -> Series {
    Series {
        label: label.to_string(),
        points: xs.iter().map(|&x| (x as f64, args(x))).collect(),
    }
}

/// Table 4.1, Table 4.3 and Fig. 4.12.
pub(super) fn logging(s: &Scale) -> Vec<Panel> {
    let threads = super::protocols::thread_counts(s);
    let t = |n: usize| n.to_string();
    let mut panels = Vec::new();
    // Table 4.1: throughput per log kind over threads, and the log's bytes per committed
    // transaction (the same runs; OFF writes no log).
    for (name, workload) in [("TPC-C", tpcc(s)), ("Smallbank", smallbank())] {
        let by_kind = |logged_only: bool| -> Vec<Series> {
            KINDS
                .iter()
                .filter(|(_, log)| !logged_only || log.is_some())
                .map(|&(label, log)| {
                    series(label, &threads, |n| {
                        run(&workload, log, "always", &["--threads", &t(n)])
                    })
                })
                .collect()
        };
        panels.push(Panel {
            title: format!("Table 4.1: {name} throughput by log (fsync always)"),
            x_label: "threads",
            metric: Metric::Throughput,
            series: by_kind(false),
        });
        panels.push(Panel {
            title: format!("Table 4.1: {name} log size"),
            x_label: "threads",
            metric: Metric::LogBytesPerTxn,
            series: by_kind(true),
        });
    }
    let workload = tpcc(s);
    // Fig. 4.11 and Table 4.2: one run per log kind on the scale's threads for the time-series
    // length, a checkpoint every quarter of it (none for OFF, which has no data directory):
    // throughput and mean latency per second, and from the same runs the log's bandwidth
    // while a checkpoint runs and while none does, and the checkpoints' own.
    let every = format!("{}", (s.series_duration / 4.0).max(0.5));
    let threads_s = t(s.threads);
    let timed = |log: Option<&str>| {
        let mut extra = vec!["--threads", threads_s.as_str()];
        if log.is_some() {
            extra.extend(["--checkpoint-interval", every.as_str()]);
        }
        run(&workload, log, "always", &extra)
    };
    for (title, metric) in [
        ("throughput", Metric::ThroughputOverTime),
        ("mean latency", Metric::LatencyOverTime),
    ] {
        panels.push(Panel {
            title: format!(
                "Fig. 4.11: TPC-C {title} over time by log, a checkpoint every {every} s"
            ),
            x_label: "seconds",
            metric,
            series: KINDS
                .iter()
                .map(|&(label, log)| Series {
                    label: label.to_string(),
                    points: vec![(0.0, timed(log))],
                })
                .collect(),
        });
    }
    for (title, metric) in [
        (
            "log bandwidth while a checkpoint runs",
            Metric::LogMibPerSec(true),
        ),
        ("log bandwidth while none runs", Metric::LogMibPerSec(false)),
        ("checkpoint bandwidth", Metric::CheckpointMibPerSec),
    ] {
        panels.push(Panel {
            title: format!("Table 4.2: TPC-C {title}"),
            x_label: "threads",
            metric,
            series: KINDS[1..]
                .iter()
                .map(|&(label, log)| Series {
                    label: label.to_string(),
                    points: vec![(s.threads as f64, timed(log))],
                })
                .collect(),
        });
    }
    // Table 4.3: mean latency of TPC-C's transactions per log kind, fsync always and never.
    let mut latency = Vec::new();
    for fsync in ["always", "never"] {
        for &(label, log) in &KINDS[1..] {
            latency.push(series(&format!("{label}, fsync {fsync}"), &threads, |n| {
                run(&workload, log, fsync, &["--threads", &t(n)])
            }));
        }
    }
    panels.push(Panel {
        title: "Table 4.3: TPC-C mean latency by log, with and without fsync".into(),
        x_label: "threads",
        metric: Metric::MeanLatencyUs,
        series: latency,
    });
    // Fig. 4.12: command logging with a share of ad-hoc transactions (logged as rows), on
    // the scale's threads; throughput and mean latency (the thesis shows TPC-C and finds
    // Smallbank alike).
    let pcts: &[usize] = if s.quick {
        &[0, 100]
    } else {
        &[0, 25, 50, 75, 100]
    };
    let adhoc = |workload: &[&str], p: usize| {
        let mut extra = vec!["--threads".to_string(), t(s.threads)];
        if p > 0 {
            extra.extend(["--adhoc-pct".to_string(), t(p)]);
        }
        let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
        run(workload, Some("command"), "always", &extra)
    };
    for metric in [Metric::Throughput, Metric::MeanLatencyUs] {
        panels.push(Panel {
            title: format!(
                "Fig. 4.12: command logging with ad-hoc transactions, {} threads",
                s.threads
            ),
            x_label: "ad-hoc transactions (%)",
            metric,
            series: vec![
                series("TPC-C", pcts, |p| adhoc(&workload, p)),
                series("Smallbank", pcts, |p| adhoc(&smallbank(), p)),
            ],
        });
    }
    panels
}
