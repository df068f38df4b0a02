//! The timestamp sources compared as POMVCC compares them (seed
//! `pomvcc-partial-order-mvcc.txt` §VII-D, Figs. 25–27): the New-Order fragment
//! (`myriad bench tpcc --mix new-order-fragment`) under snapshot isolation, with one global
//! counter (the engine's default: one fetch-add per update transaction), POMVCC's partial
//! order (commit timestamps shared by non-conflicting updaters) and MPDB's locked counter
//! (the paper's MVCC baseline), over threads. The paper runs 10–80 threads and logs to 8
//! files; this machine has 2 cores, and the runs are in memory (logged partial-order runs
//! are not an experiment yet), so the docs compare shapes.

use super::protocols::thread_counts;
use super::{Metric, Panel, Scale, Series};

/// The timestamp sources, as series: (label, flags). `global-counter` is the engine's
/// lock-free MVCC, `partial-order` POMVCC with its shared counters and with the counts kept
/// in the transaction-table slots, `locked-counter` MPDB's MVCC.
const SOURCES: [(&str, &[&str]); 4] = [
    ("global-counter", &["--timestamps", "global-counter"]),
    ("partial-order", &["--timestamps", "partial-order"]),
    (
        "partial-order, slots",
        &["--timestamps", "partial-order", "--po-counters", "slots"],
    ),
    ("locked-counter", &["--timestamps", "locked-counter"]),
];

/// The fragment at `warehouses(t)` warehouses over threads `t`, one series per source.
fn series(s: &Scale, warehouses: impl Fn(usize) -> usize) -> Vec<Series> {
    SOURCES
        .iter()
        .map(|(label, flags)| fragment_series(s, label, flags, &[], &warehouses))
        .collect()
}

/// One series of the fragment: `flags` and then `extra` (a durable run's) over threads.
fn fragment_series(
    s: &Scale,
    label: &str,
    flags: &[&str],
    extra: &[&str],
    warehouses: &impl Fn(usize) -> usize,
) -> Series {
    Series {
        label: label.to_string(),
        points: thread_counts(s)
            .into_iter()
            .map(|t| {
                let (w, t_s) = (warehouses(t).to_string(), t.to_string());
                let head = [
                    "tpcc",
                    "--mix",
                    "new-order-fragment",
                    "--protocol",
                    "si",
                    "--isolation",
                    "si",
                ];
                let tail = ["--warehouses", &w, "--threads", &t_s];
                let args = head.iter().chain(flags).chain(extra).chain(&tail);
                (t as f64, args.map(|a| a.to_string()).collect())
            })
            .collect(),
    }
}

/// Figs. 22 and 24 (log processing): the fragment at 16 warehouses (1 with `--quick`),
/// durable (`--log logical`, `--fsync always`: a commit returns once its log record is
/// durable, and under `partial-order` becomes readable only then), with one log file and
/// with two (`--loggers`), under the global counter, the paper's MVCC (`locked-counter`) and
/// `partial-order`; throughput and the abort rate over threads, and Fig. 24 from the same
/// runs: throughput per thread as a percentage of the series's first point
/// (`Metric::ScalabilityPct`).
pub(super) fn logs(s: &Scale) -> Vec<Panel> {
    let fixed = if s.quick { 1 } else { 16 };
    let sources = [SOURCES[0], SOURCES[3], SOURCES[1]];
    let mut series = Vec::new();
    for (label, flags) in sources {
        for (n, logs) in [("1", "1 log"), ("2", "2 logs")] {
            let extra = [
                "--data-dir",
                super::RUN_DIR,
                "--log",
                "logical",
                "--loggers",
                n,
                "--fsync",
                "always",
            ];
            series.push(fragment_series(
                s,
                &format!("{label}, {logs}"),
                flags,
                &extra,
                &|_| fixed,
            ));
        }
    }
    [Metric::Throughput, Metric::AbortPct, Metric::ScalabilityPct]
        .into_iter()
        .map(|metric| Panel {
            title: format!("New-Order fragment, warehouses: {fixed}, SI, logged"),
            x_label: "threads",
            metric,
            series: series.clone(),
        })
        .collect()
}

/// Fig. 25 (16 warehouses; 1 with `--quick`): throughput, global atomic read-modify-writes
/// and timestamp increments per committed transaction over threads; Fig. 26 (warehouses =
/// threads): throughput; Fig. 27 (scalability at a fixed conflict rate) from Fig. 26's runs:
/// throughput per thread as a percentage of the series's first point
/// (`Metric::ScalabilityPct`).
pub(super) fn fragment(s: &Scale) -> Vec<Panel> {
    let fixed = if s.quick { 1 } else { 16 };
    let by_fixed = series(s, |_| fixed);
    let mut panels: Vec<Panel> = [
        Metric::Throughput,
        Metric::PerTxn("global_rmw_per_txn"),
        Metric::PerTxn("ts_increments_per_txn"),
    ]
    .into_iter()
    .map(|metric| Panel {
        title: format!("New-Order fragment, warehouses: {fixed}, SI"),
        x_label: "threads",
        metric,
        series: by_fixed.clone(),
    })
    .collect();
    let by_threads = series(s, |t| t);
    for metric in [Metric::Throughput, Metric::ScalabilityPct] {
        panels.push(Panel {
            title: "New-Order fragment, warehouses = threads, SI".into(),
            x_label: "threads",
            metric,
            series: by_threads.clone(),
        });
    }
    panels
}
