//! vDriver's experiments (Kim et al., §5; `../shared/specs/vdriver-pomvcc.md` A8–A9) on
//! `myriad bench llt`: short single-row updates over 48 tables of 1,000 rows of 256 B, keys
//! uniform or Zipf, with long-lived transactions (LLTs) holding a snapshot for part of the
//! run. The paper's PostgreSQL and MySQL cannot run here; their Myriad analogues are
//! oldest-to-newest chains with the watermark GC (`o2n` + `txn`, PostgreSQL-like: every
//! access to the newest version walks from the oldest) and newest-to-oldest chains with it
//! (`n2o` + `txn`, InnoDB-like), against dead-zone pruning and SIRO storage.
//!
//! Time series (`vdriver-space`): Fig. 13 (throughput, live version memory and the longest
//! chain over time; uniform, then Zipf 1.2, one LLT from 20% to 80% of the run), Fig. 14
//! (the chain-length distribution of the Zipf 1.2 runs at their longest-chain sample, as
//! percentiles) and Fig. 18 (128 and 1,024-byte rows, Zipf 1.1). Sweeps (`vdriver-siro`, SIRO only): Fig. 15 (where
//! the versions that leave a record slot go, by stage and class, over the Zipf exponent,
//! with and without 4 LLTs), Fig. 16 (mean cut delay per class, normal and huge LLT
//! threshold, uniform and Zipf 1.2, 48 × 10,000 rows) and Fig. 19 (the longest chain over
//! the segment size).

use super::{Metric, Panel, Scale, Series};

/// The paper's baselines' analogues and the two treatments, as `bench llt` flags.
const DESIGNS: [(&str, &[&str]); 4] = [
    (
        "PostgreSQL-like (o2n, txn GC)",
        &["--storage", "o2n", "--gc", "txn"],
    ),
    (
        "InnoDB-like (n2o, txn GC)",
        &["--storage", "n2o", "--gc", "txn"],
    ),
    (
        "dead-zone (n2o)",
        &["--storage", "n2o", "--gc", "dead-zone"],
    ),
    (
        "SIRO (siro, dead-zone)",
        &["--storage", "siro", "--gc", "dead-zone"],
    ),
];

/// SIRO's flags.
const SIRO: &[&str] = &["--storage", "siro", "--gc", "dead-zone"];

/// `myriad bench llt` with `n` LLTs holding their snapshots from 20% to 80% of a run of
/// `secs` seconds, keys Zipf `zipf` (0: uniform), and `rest`.
fn llt(n: usize, secs: f64, zipf: f64, rest: &[&str]) -> Vec<String> {
    let mut a: Vec<String> = ["llt", "--zipf", &zipf.to_string(), "--llt", &n.to_string()]
        .map(String::from)
        .to_vec();
    if n > 0 {
        a.extend([
            "--llt-at".into(),
            format!("{:.2}", 0.2 * secs),
            "--llt-hold".into(),
            format!("{:.2}", 0.6 * secs),
        ]);
    }
    a.extend(rest.iter().map(|r| r.to_string()));
    a
}

/// Figs. 13, 14 and 18: time series (and Fig. 14's distribution) of the four designs.
pub(super) fn space(s: &Scale) -> Vec<Panel> {
    let secs = s.series_duration;
    let mut panels = Vec::new();
    for metric in [
        Metric::ThroughputOverTime,
        Metric::LiveMibOverTime,
        Metric::MaxChainOverTime,
    ] {
        for (title, zipf) in [
            ("Fig. 13: uniform keys, one LLT", 0.0),
            ("Fig. 13: Zipf 1.2, one LLT", 1.2),
        ] {
            panels.push(Panel {
                title: title.into(),
                x_label: "seconds",
                metric,
                series: DESIGNS
                    .iter()
                    .map(|(label, d)| Series {
                        label: label.to_string(),
                        points: vec![(0.0, llt(1, secs, zipf, d))],
                    })
                    .collect(),
            });
        }
    }
    panels.push(Panel {
        title: "Fig. 14: chain length by percentile of the sampled records, at the \
                longest-chain sample of each run; Zipf 1.2, one LLT"
            .into(),
        x_label: "percentile of sampled records",
        metric: Metric::ChainPercentiles,
        // The same runs as Fig. 13's Zipf panels (one run per command and round).
        series: DESIGNS
            .iter()
            .map(|(label, d)| Series {
                label: label.to_string(),
                points: vec![(0.0, llt(1, secs, 1.2, d))],
            })
            .collect(),
    });
    for bytes in ["128", "1024"] {
        panels.push(Panel {
            title: format!("Fig. 18: {bytes}-byte rows, Zipf 1.1, one LLT"),
            x_label: "seconds",
            metric: Metric::ThroughputOverTime,
            series: DESIGNS
                .iter()
                .map(|(label, d)| {
                    let mut rest: Vec<&str> = d.to_vec();
                    rest.extend(["--row-bytes", bytes]);
                    Series {
                        label: label.to_string(),
                        points: vec![(0.0, llt(1, secs, 1.1, &rest))],
                    }
                })
                .collect(),
        });
    }
    panels
}

/// Figs. 15, 16 and 19: SIRO's prune stages, cut delays and segment size.
pub(super) fn siro(s: &Scale) -> Vec<Panel> {
    let secs = s.duration;
    let zipfs: &[f64] = if s.quick {
        &[0.0, 1.2]
    } else {
        &[0.0, 0.5, 0.9, 1.1, 1.2]
    };
    let mut panels = Vec::new();
    // Fig. 15: where the versions that leave a record slot go, as shares of them all; one
    // panel per stage (and class), with and without LLTs.
    let stages: [(&str, &'static str, Option<usize>); 7] = [
        ("1st prune (dropped from the record)", "pruned_first", None),
        ("hot, 2nd prune (at the seal)", "pruned_seal", Some(0)),
        ("hot, cut", "cut", Some(0)),
        ("cold, cut", "cut", Some(1)),
        ("LLT, cut", "cut", Some(2)),
        ("LLT, not pruned", "kept", Some(2)),
        ("hot and cold, not pruned", "kept", None),
    ];
    for (label, stage, class) in stages {
        panels.push(Panel {
            title: format!("Fig. 15: {label}"),
            x_label: "Zipf exponent",
            metric: Metric::SiroPct(stage, class),
            series: [("4 LLTs", 4), ("no LLT", 0)]
                .iter()
                .map(|&(l, n)| Series {
                    label: l.into(),
                    points: zipfs.iter().map(|&z| (z, llt(n, secs, z, SIRO))).collect(),
                })
                .collect(),
        });
    }
    // Fig. 16: mean cut delay per class, normal and huge LLT threshold.
    for (c, class) in ["hot", "cold", "LLT"].iter().enumerate() {
        panels.push(Panel {
            title: format!(
                "Fig. 16: mean cut delay of {class} segments, 48 x 10,000 rows, one LLT"
            ),
            x_label: "Zipf exponent",
            metric: Metric::SiroCutDelayMs(c),
            series: [
                ("normal LLT threshold (x200)", "200"),
                ("huge (x40000)", "40000"),
            ]
            .iter()
            .map(|&(label, multiple)| Series {
                label: label.into(),
                points: [0.0, 1.2]
                    .iter()
                    .map(|&z| {
                        let mut rest = SIRO.to_vec();
                        rest.extend(["--rows", "10000", "--siro-llt-multiple", multiple]);
                        (z, llt(1, secs, z, &rest))
                    })
                    .collect(),
            })
            .collect(),
        });
    }
    // Fig. 19: the longest chain over the segment size.
    let sizes: &[u64] = if s.quick {
        &[65_536, 1 << 20]
    } else {
        &[65_536, 262_144, 1 << 20, 4 << 20, 16 << 20]
    };
    panels.push(Panel {
        title: "Fig. 19: longest chain over the segment size, one LLT".into(),
        x_label: "segment KiB",
        metric: Metric::MaxChain,
        series: [("uniform", 0.0), ("Zipf 1.2", 1.2)]
            .iter()
            .map(|&(label, z)| Series {
                label: label.into(),
                points: sizes
                    .iter()
                    .map(|&b| {
                        let bytes = b.to_string();
                        let mut rest = SIRO.to_vec();
                        rest.extend(["--siro-segment-bytes", &bytes]);
                        ((b / 1024) as f64, llt(1, secs, z, &rest))
                    })
                    .collect(),
            })
            .collect(),
    });
    panels
}
