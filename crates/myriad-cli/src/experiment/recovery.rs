//! Recovery experiments (thesis ch. 4): each point is a `myriad recover --verify` of a log
//! that one `myriad bench` run wrote before the rounds (`LOG`, prepared once per experiment
//! and removed after it). `--verify` replays the whole log into memory and writes nothing,
//! so every round recovers the same files.

use super::{Metric, Panel, Scale, Series, RECOVERY_PHASES};

/// In a `recover` point's arguments: `LOG` followed by the `myriad bench` arguments of the
/// run that writes the log; the runner replaces both by the directory that run wrote.
pub(super) const LOG: &str = "@log";

/// The TPC-C run whose log the experiment recovers: 2 warehouses, `--no-inserts` (as the
/// thesis's recovery experiments), on the scale's threads, twice the scale's duration (the
/// thesis: 60 s), no checkpoint during the run, so all of it is replayed.
fn tpcc_log(s: &Scale, kind: &str) -> Vec<String> {
    workload_log(s, &["tpcc", "--warehouses", "2", "--no-inserts"], kind)
}

/// The Smallbank run whose logs Figs. 4.16 and 4.17 recover: 1,000 accounts (thesis Table 3.2), the
/// scale's threads and twice its duration, as `tpcc_log`.
fn smallbank_log(s: &Scale, kind: &str) -> Vec<String> {
    workload_log(s, &["smallbank", "--accounts", "1000"], kind)
}

/// `workload` (a bench subcommand and its flags) logged as `kind`.
fn workload_log(s: &Scale, workload: &[&str], kind: &str) -> Vec<String> {
    let secs = if s.quick { 0.5 } else { 2.0 * s.duration };
    let mut a: Vec<String> = workload.iter().map(|w| w.to_string()).collect();
    a.extend(["--duration", &secs.to_string(), "--log", kind].map(String::from));
    a
}

/// `myriad recover @log BENCH... --recovery SCHEME --threads N [rest]`.
fn recover(log: &[String], scheme: &str, threads: usize, rest: &[&str]) -> Vec<String> {
    let mut a = vec!["recover".to_string(), LOG.to_string()];
    a.extend(log.iter().cloned());
    a.extend(
        ["--recovery", scheme, "--threads", &threads.to_string()]
            .into_iter()
            .chain(rest.iter().copied())
            .map(String::from),
    );
    a
}

/// Figs. 4.13/4.14/4.16 (log recovery time per scheme), 4.18 (PACMAN's slices against
/// transaction chopping, both static), 4.19 (PACMAN's static, sync and pipelined modes) and
/// 4.20 (the dynamic modes' dynamic analysis and execution), over recovery threads.
pub(super) fn pacman(s: &Scale) -> Vec<Panel> {
    let threads = super::protocols::thread_counts(s);
    let command = tpcc_log(s, "command");
    let series = |label: &str, log: &[String], scheme: &str, rest: &[&str]| Series {
        label: label.to_string(),
        points: threads
            .iter()
            .map(|&t| (t as f64, recover(log, scheme, t, rest)))
            .collect(),
    };
    let pacman_mode = |mode: &str| {
        series(
            &format!("pacman {mode}"),
            &command,
            "pacman",
            &["--pacman-mode", mode],
        )
    };
    let modes = vec![
        series("serial", &command, "serial", &[]),
        pacman_mode("static"),
        pacman_mode("sync"),
        pacman_mode("pipelined"),
    ];
    // Fig. 4.20: where a dynamic mode's time goes (static computes no footprints, so it has
    // no dynamic analysis), one layer per phase, read from the same runs as Fig. 4.19.
    let breakdown = |mode: &str| {
        let runs = pacman_mode(mode);
        Panel {
            title: format!("Fig. 4.20: PACMAN {mode}, recovery time breakdown, TPC-C command log"),
            x_label: "recovery threads",
            metric: Metric::RecoveryPhases,
            series: RECOVERY_PHASES
                .iter()
                .map(|&(label, _)| Series {
                    label: label.to_string(),
                    points: runs.points.clone(),
                })
                .collect(),
        }
    };
    // Fig. 4.18: the static decompositions alone (dynamic analysis off: `static` mode).
    let decompositions = vec![
        series(
            "pacman static (slices)",
            &command,
            "pacman",
            &["--pacman-mode", "static"],
        ),
        series(
            "transaction chopping",
            &command,
            "pacman",
            &["--pacman-mode", "static", "--pacman-slicing", "chopping"],
        ),
    ];
    // Fig. 4.16 compares the schemes "in both benchmarks": each workload's three logs.
    let schemes = |log: &dyn Fn(&str) -> Vec<String>| {
        let (command, logical, physical) = (log("command"), log("logical"), log("physical"));
        vec![
            series("command, serial (CLR)", &command, "serial", &[]),
            series("command, pacman (CLR-P)", &command, "pacman", &[]),
            series("logical, serial (LLR)", &logical, "serial", &[]),
            series(
                "logical, parallel-partitioned (LLR-P)",
                &logical,
                "parallel-partitioned",
                &[],
            ),
            series("physical (PLR)", &physical, "physical", &[]),
        ]
    };
    let tpcc_schemes = schemes(&|kind| tpcc_log(s, kind));
    let smallbank_schemes = schemes(&|kind| smallbank_log(s, kind));
    let adhoc = adhoc_panel(s);
    vec![
        Panel {
            title: "Fig. 4.19: PACMAN modes, TPC-C command log (replay)".into(),
            x_label: "recovery threads",
            metric: Metric::RecoverySeconds("replay"),
            series: modes,
        },
        Panel {
            title: "Fig. 4.18: PACMAN static analysis vs transaction chopping, TPC-C command \
                    log (replay)"
                .into(),
            x_label: "recovery threads",
            metric: Metric::RecoverySeconds("replay"),
            series: decompositions,
        },
        breakdown("sync"),
        breakdown("pipelined"),
        Panel {
            title: "Figs. 4.13/4.16: log recovery by scheme, TPC-C (replay + index build)".into(),
            x_label: "recovery threads",
            metric: Metric::RecoverySeconds("replay_and_index"),
            series: tpcc_schemes,
        },
        Panel {
            title: "Fig. 4.16: log recovery by scheme, Smallbank (replay + index build)".into(),
            x_label: "recovery threads",
            metric: Metric::RecoverySeconds("replay_and_index"),
            series: smallbank_schemes,
        },
        adhoc,
    ]
}

/// Fig. 4.17: PACMAN's recovery of command logs with a share of ad-hoc transactions
/// (`bench --adhoc-pct`, logged as rows), on the scale's threads, for TPC-C and Smallbank;
/// at 100% the log holds no call and PACMAN is LLR-P (§4.4.5). Each share writes its own
/// log. With `--quick` only 0% and 100%.
fn adhoc_panel(s: &Scale) -> Panel {
    let pcts: &[u32] = if s.quick {
        &[0, 100]
    } else {
        &[0, 25, 50, 75, 100]
    };
    let series = |label: &str, log: &dyn Fn(&str) -> Vec<String>| Series {
        label: label.to_string(),
        points: pcts
            .iter()
            .map(|&p| {
                let log = log(&p.to_string());
                (f64::from(p), recover(&log, "pacman", s.threads, &[]))
            })
            .collect(),
    };
    // 0% is the plain command log (the other panels' TPC-C log: written once).
    let flag = |p: &str| -> Vec<String> {
        match p {
            "0" => Vec::new(),
            p => vec!["--adhoc-pct".into(), p.into()],
        }
    };
    let tpcc = |p: &str| {
        let mut a = tpcc_log(s, "command");
        a.extend(flag(p));
        a
    };
    let smallbank = |p: &str| {
        let mut a = smallbank_log(s, "command");
        a.extend(flag(p));
        a
    };
    Panel {
        title: format!(
            "Fig. 4.17: PACMAN with ad-hoc transactions, {} threads (replay + index build)",
            s.threads
        ),
        x_label: "ad-hoc transactions (%)",
        metric: Metric::RecoverySeconds("replay_and_index"),
        series: vec![series("TPC-C", &tpcc), series("Smallbank", &smallbank)],
    }
}
