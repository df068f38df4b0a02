//! The protocol studies as one-command experiments: the thesis's protocol comparison
//! (§5.7.2, Figs. 5.6–5.10), Hekaton's homogeneous workload and TATP (§5.1, Figs. 4–5,
//! Table 3; §5.3, Table 4), Hekaton's long readers beside short updaters (§5.2.2, Figs.
//! 8–9) and ERMIA's TPC-C comparison of SI, SSI and SSN with Silo's OCC.
//! Each scales the paper's thread counts (40 in the thesis, 24 in Hekaton's, up to 24 in
//! ERMIA's) to this machine's; the docs compare shapes, not absolute figures.

use super::{Metric, Panel, Scale, Series};

/// The thesis's §5.7.2 protocols (its SSI is the SSN variant).
const THESIS: [&str; 4] = ["mvocc", "mvto", "mv2pl", "ssn"];

/// 1, 2, 4, … up to the scale's threads (which is always the last point); one point with
/// `--quick`.
pub(super) fn thread_counts(s: &Scale) -> Vec<usize> {
    if s.quick {
        return vec![s.threads];
    }
    let mut t: Vec<usize> = std::iter::successors(Some(1usize), |t| Some(t * 2))
        .take_while(|&t| t < s.threads)
        .collect();
    t.push(s.threads);
    t
}

/// `myriad bench WORKLOAD --protocol P` and `rest`.
fn cmd(workload: &str, protocol: &str, rest: &[&str]) -> Vec<String> {
    [workload, "--protocol", protocol]
        .iter()
        .chain(rest)
        .map(|a| a.to_string())
        .collect()
}

/// A panel whose series are `protocols` and whose points are `xs`, each run being
/// `run(protocol, x)`.
pub(super) fn by_protocol(
    title: String,
    x_label: &'static str,
    metric: Metric,
    protocols: &[&str],
    xs: &[f64],
    run: impl Fn(&str, f64) -> Vec<String>,
) -> Panel {
    Panel {
        title,
        x_label,
        metric,
        series: protocols
            .iter()
            .map(|p| Series {
                label: p.to_string(),
                points: xs.iter().map(|&x| (x, run(p, x))).collect(),
            })
            .collect(),
    }
}

/// Fig. 5.6: read-only YCSB, theta 0.2, one and 100 operations per transaction (10 with
/// `--quick`), over worker threads.
pub(super) fn scaling(s: &Scale) -> Vec<Panel> {
    let xs: Vec<f64> = thread_counts(s).iter().map(|&t| t as f64).collect();
    let long = if s.quick { "10" } else { "100" };
    let rows = s.rows.to_string();
    ["1", long]
        .iter()
        .map(|ops| {
            by_protocol(
                format!("read-only, {ops} operations per transaction, theta 0.2"),
                "threads",
                Metric::Throughput,
                &THESIS,
                &xs,
                |p, t| {
                    let t = (t as usize).to_string();
                    let a = ["--mix", "read-only", "--ops", ops, "--theta", "0.2"];
                    cmd(
                        "ycsb",
                        p,
                        &[&a[..], &["--rows", &rows, "--threads", &t]].concat(),
                    )
                },
            )
        })
        .collect()
}

/// Fig. 5.7: read- and update-intensive YCSB, 10 operations, over contention (theta).
pub(super) fn contention(s: &Scale) -> Vec<Panel> {
    let thetas: &[f64] = if s.quick {
        &[0.2, 0.9]
    } else {
        &[0.2, 0.4, 0.6, 0.7, 0.8, 0.9]
    };
    let rows = s.rows.to_string();
    ["read-intensive", "update-intensive"]
        .iter()
        .map(|mix| {
            by_protocol(
                format!("{mix}, 10 operations per transaction"),
                "theta",
                Metric::Throughput,
                &THESIS,
                thetas,
                |p, theta| {
                    let theta = theta.to_string();
                    let a = [
                        "--mix", mix, "--ops", "10", "--theta", &theta, "--rows", &rows,
                    ];
                    cmd("ycsb", p, &a)
                },
            )
        })
        .collect()
}

/// Figs. 5.8–5.9: the heterogeneous workload, theta 0.8, 100 operations per transaction
/// (10 with `--quick`): one thread runs update-intensive transactions (the thesis's 20 of
/// 40), 1 or 2 more run reads only (the thesis's 0–20), without and with the READ ONLY hint;
/// the read-write and read-only throughputs are separate panels.
pub(super) fn heterogeneous(s: &Scale) -> Vec<Panel> {
    let readers: &[f64] = if s.quick { &[1.0] } else { &[1.0, 2.0] };
    let ops = if s.quick { "10" } else { "100" };
    let rows = s.rows.to_string();
    let mut panels = Vec::new();
    for (hint, fig) in [
        ("false", "5.8, without READ ONLY"),
        ("true", "5.9, with READ ONLY"),
    ] {
        for (metric, what) in [
            (Metric::TypeThroughput("update_txn"), "read-write"),
            (Metric::TypeThroughput("long_read_txn"), "read-only"),
        ] {
            panels.push(by_protocol(
                format!("Fig. {fig}: {what} transactions, theta 0.8"),
                "read-only threads",
                metric,
                &THESIS,
                readers,
                |p, n| {
                    let n = (n as usize).to_string();
                    let a = [
                        "--mix",
                        "update-intensive",
                        "--ops",
                        ops,
                        "--theta",
                        "0.8",
                        "--rows",
                        &rows,
                        "--threads",
                        "1",
                        "--read-only-threads",
                        &n,
                        "--read-only-hint",
                        hint,
                    ];
                    cmd("ycsb", p, &a)
                },
            ));
        }
    }
    panels
}

/// TPC-C warehouses of the protocol comparisons: 1 (every terminal on one warehouse, as
/// contended as the thesis's 10 warehouses for 40 threads) and 2.
fn warehouses(s: &Scale) -> &'static [f64] {
    if s.quick {
        &[1.0]
    } else {
        &[1.0, 2.0]
    }
}

/// A throughput panel and an abort-rate panel of the same runs (`series`).
fn throughput_and_aborts(title: String, x_label: &'static str, series: Vec<Series>) -> Vec<Panel> {
    [Metric::Throughput, Metric::AbortPct]
        .into_iter()
        .map(|metric| Panel {
            title: title.clone(),
            x_label,
            metric,
            series: series.clone(),
        })
        .collect()
}

/// Throughput and abort-rate panels of TPC-C (the standard mix) for `protocols` (label,
/// flags after `tpcc`) over warehouses.
fn tpcc_by_protocol(s: &Scale, what: &str, protocols: &[(&str, Vec<&str>)]) -> Vec<Panel> {
    let series = protocols
        .iter()
        .map(|(label, flags)| Series {
            label: label.to_string(),
            points: warehouses(s)
                .iter()
                .map(|&w| {
                    let mut a = vec!["tpcc".to_string(), "--warehouses".into()];
                    a.push((w as usize).to_string());
                    a.extend(flags.iter().map(|f| f.to_string()));
                    (w, a)
                })
                .collect(),
        })
        .collect();
    throughput_and_aborts(format!("TPC-C, {what}"), "warehouses", series)
}

/// Fig. 5.10: TPC-C throughput and abort rate of the thesis's protocols.
pub(super) fn tpcc(s: &Scale) -> Vec<Panel> {
    let protocols: Vec<(&str, Vec<&str>)> =
        THESIS.iter().map(|p| (*p, vec!["--protocol", p])).collect();
    tpcc_by_protocol(s, "the thesis protocols", &protocols)
}

/// ERMIA's TPC-C comparison (ERMIA §4.4, TPCC-fixed): its SI and SSI (with and without the
/// §3.6 optimisations: safe retry; untracked reads, by READ ONLY transactions, of versions
/// 1,000 or more commits old) and SSN against Silo's OCC.
pub(super) fn ermia_tpcc(s: &Scale) -> Vec<Panel> {
    let protocols: Vec<(&str, Vec<&str>)> = [
        ("silo", &["--protocol", "silo"][..]),
        ("ermia-si", &["--protocol", "ermia-si"]),
        (
            "ermia-ssi",
            &["--protocol", "ermia-ssi", "--ermia-old-age", "1000"],
        ),
        (
            "ermia-ssi, no optimisations",
            &["--protocol", "ermia-ssi", "--ermia-safe-retry", "false"],
        ),
        ("ssn", &["--protocol", "ssn"]),
    ]
    .into_iter()
    // ERMIA's TPCC-fixed: 1% cross-warehouse transactions.
    .map(|(label, flags)| (label, [flags, &["--remote-pct", "1"]].concat()))
    .collect();
    tpcc_by_protocol(
        s,
        "ERMIA SI / SSI / SSN against Silo, 1% remote",
        &protocols,
    )
}

/// Hekaton's schemes at Read Committed, as Hekaton runs them: MV/O (`mvocc`), MV/L
/// (`mv2pl-wait`), and 1V (single-version locking: `2pl`, which offers Serializable only).
const HEKATON: [(&str, &str, &str); 3] = [
    ("MV/O (mvocc)", "mvocc", "rc"),
    ("MV/L (mv2pl-wait)", "mv2pl-wait", "rc"),
    ("1V (2pl), Serializable", "2pl", "serializable"),
];

/// Hekaton §5.1's transaction: 10 reads and 2 writes of uniformly chosen rows of 24 bytes
/// (a key and two attributes).
fn r10w2(rows: &str) -> [&str; 14] {
    [
        "--ops",
        "12",
        "--writes-per-txn",
        "2",
        "--theta",
        "0",
        "--attrs",
        "2",
        "--attrs-read",
        "2",
        "--attrs-modified",
        "1",
        "--rows",
        rows,
    ]
}

/// The two table sizes of Hekaton §5.1: low contention (the scale's rows; Hekaton's 10 M)
/// and a hotspot of 1,000 rows.
fn hekaton_sizes(s: &Scale) -> [(String, &'static str); 2] {
    [
        (s.rows.to_string(), "low contention"),
        ("1000".into(), "high contention, 1,000 rows"),
    ]
}

/// Hekaton Figs. 4–5: R=10/W=2 throughput over threads, low and high contention.
pub(super) fn hekaton_scaling(s: &Scale) -> Vec<Panel> {
    let xs: Vec<f64> = thread_counts(s).iter().map(|&t| t as f64).collect();
    hekaton_sizes(s)
        .iter()
        .map(|(rows, what)| Panel {
            title: format!("R=10 W=2, {what}"),
            x_label: "threads",
            metric: Metric::Throughput,
            series: HEKATON
                .iter()
                .map(|(label, p, level)| Series {
                    label: label.to_string(),
                    points: xs
                        .iter()
                        .map(|&t| {
                            let t_s = (t as usize).to_string();
                            let a = [&r10w2(rows)[..], &["--isolation", level, "--threads", &t_s]]
                                .concat();
                            (t, cmd("ycsb", p, &a))
                        })
                        .collect(),
                })
                .collect(),
        })
        .collect()
}

/// Hekaton Table 3: R=10/W=2 at each isolation level a scheme offers (1 = Read Committed,
/// 2 = Repeatable Read, 3 = Serializable), at low contention and at the hotspot. MV/O and
/// MV/L run all three; 1V (`2pl`) offers Serializable only.
pub(super) fn hekaton_isolation(s: &Scale) -> Vec<Panel> {
    let levels: [(f64, &str); 3] = [(1.0, "rc"), (2.0, "rr"), (3.0, "serializable")];
    hekaton_sizes(s)
        .iter()
        .map(|(rows, what)| Panel {
            title: format!("R=10 W=2 by isolation level (1 RC, 2 RR, 3 SER), {what}"),
            x_label: "isolation level",
            metric: Metric::Throughput,
            series: [
                ("MV/O (mvocc)", "mvocc"),
                ("MV/L (mv2pl-wait)", "mv2pl-wait"),
                ("1V (2pl)", "2pl"),
            ]
            .iter()
            .map(|(label, p)| Series {
                label: label.to_string(),
                points: levels
                    .iter()
                    .filter(|(_, level)| *p != "2pl" || *level == "serializable")
                    .map(|(x, level)| {
                        let a = [&r10w2(rows)[..], &["--isolation", level]].concat();
                        (*x, cmd("ycsb", p, &a))
                    })
                    .collect(),
            })
            .collect(),
        })
        .collect()
}

/// Hekaton Table 4: TATP throughput and abort rate of the three schemes over threads.
pub(super) fn hekaton_tatp(s: &Scale) -> Vec<Panel> {
    let subscribers = (s.rows / 10).max(1000).to_string();
    let series = HEKATON
        .iter()
        .map(|(label, p, level)| Series {
            label: label.to_string(),
            points: thread_counts(s)
                .iter()
                .map(|&t| {
                    let t_s = t.to_string();
                    let a = [
                        "--subscribers",
                        &subscribers,
                        "--isolation",
                        level,
                        "--threads",
                        &t_s,
                    ];
                    (t as f64, cmd("tatp", p, &a))
                })
                .collect(),
        })
        .collect();
    throughput_and_aborts(
        format!("TATP, {subscribers} subscribers"),
        "threads",
        series,
    )
}

/// Hekaton Figs. 8–9 (§5.2.2) on the `llt` workload: short single-row updaters on `threads`
/// threads (Hekaton's R=10 W=2 updaters are here one-row updates) over one table of the
/// scale's rows of 24 bytes (Hekaton's 10 M rows of 24 B), with 0, 1 or 2 long readers
/// added (0 and 1 with `--quick`), each running Serializable READ ONLY transactions over a
/// contiguous 10% of the table back to back. Hekaton fixes 24 transactions and lets the
/// readers replace updaters; this machine has 2 cores, so the readers are added beside the
/// updaters and share the cores with them. Series: the multi-version MV/O (`mvocc`), MV/L
/// (`mv2pl-wait`) and ERMIA-SSI (`ermia-ssi`, ERMIA's heterogeneous case), the
/// single-version 1V (`2pl`, no-wait: a reader's read locks make updaters abort and retry)
/// and Silo (`silo`, whose reader validates every row it read and aborts). Panels: update
/// throughput (Fig. 8), and the long readers' throughput (Fig. 9) and abort rate.
pub(super) fn hekaton_long_readers(s: &Scale) -> Vec<Panel> {
    let readers: &[f64] = if s.quick {
        &[0.0, 1.0]
    } else {
        &[0.0, 1.0, 2.0]
    };
    let rows = s.rows.to_string();
    let protocols = [
        ("MV/O (mvocc)", "mvocc"),
        ("MV/L (mv2pl-wait)", "mv2pl-wait"),
        ("ermia-ssi", "ermia-ssi"),
        ("1V (2pl)", "2pl"),
        ("silo", "silo"),
    ];
    let run = |p: &str, n: f64| {
        let n = (n as usize).to_string();
        let a = [
            "--tables",
            "1",
            "--rows",
            &rows,
            "--row-bytes",
            "24",
            "--long-readers",
            &n,
            "--long-read-pct",
            "10",
        ];
        cmd("llt", p, &a)
    };
    let series = |xs: &[f64]| -> Vec<Series> {
        protocols
            .iter()
            .map(|(label, p)| Series {
                label: label.to_string(),
                points: xs.iter().map(|&x| (x, run(p, x))).collect(),
            })
            .collect()
    };
    // The readers' panels start at 1 reader: without one there is nothing to plot.
    let with_readers: Vec<f64> = readers.iter().copied().filter(|&x| x > 0.0).collect();
    let title = |what: &str| format!("{what}, 1 table of {rows} rows, long readers read 10%");
    vec![
        Panel {
            title: title("Fig. 8: update throughput"),
            x_label: "long readers",
            metric: Metric::Throughput,
            series: series(readers),
        },
        Panel {
            title: title("Fig. 9: long-reader throughput"),
            x_label: "long readers",
            metric: Metric::LongReaderTps,
            series: series(&with_readers),
        },
        Panel {
            title: title("long-reader abort rate"),
            x_label: "long readers",
            metric: Metric::LongReaderAbortPct,
            series: series(&with_readers),
        },
    ]
}
