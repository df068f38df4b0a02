//! Transaction Healing's experiments (thesis §3.5), on this machine's threads: TPC-C (without
//! inserts, so that OCC⁻ can run it) over
//! warehouses (Figs. 3.8–3.10: throughput and abort rate of `healing` against `occ`, `silo`,
//! `2pl`, `hybrid` and the validation-free OCC⁻ and SILO⁻), New-Order and Delivery latency at
//! 4 warehouses (Table 3.1, as percentiles), ad-hoc transactions (Fig. 3.13), and Smallbank
//! over θ at 1,000 and 100 accounts (Fig. 3.14, Table 3.2's abort rates, Table 3.3's
//! percentiles), and healing's overhead at warehouses = threads (Table 3.4).

use super::protocols::by_protocol;
use super::{Metric, Panel, Scale};

/// The protocols of Figs. 3.8–3.10, with OCC⁻ and SILO⁻ as labels of their own.
const PROTOCOLS: [&str; 7] = ["healing", "occ", "silo", "2pl", "hybrid", "occ-", "silo-"];

/// Table 3.4's rows of `healing`, cumulative as the thesis's: "Normal" (neither the access
/// cache nor read copies, i.e. the false-invalidation check), "+Access Cache", then "+Read
/// Copy", with the flags each adds to `--protocol healing`. (Plain `healing` is "Normal"
/// with read copies: the access cache is off by default.)
const TABLE_3_4: [(&str, &[&str]); 3] = [
    (
        "healing, normal",
        &["--column-check", "false", "--heal-access-cache", "false"],
    ),
    (
        "healing, +access cache",
        &["--column-check", "false", "--heal-access-cache", "true"],
    ),
    ("healing, +read copy", &["--heal-access-cache", "true"]),
];

/// `myriad bench WORKLOAD` under `protocol` (`occ-`, `silo-`: `--unsafe-no-validation`;
/// a `TABLE_3_4` label) and `rest`.
fn run(workload: &str, protocol: &str, rest: &[String]) -> Vec<String> {
    let mut a = vec![workload.to_string(), "--protocol".into()];
    let row = TABLE_3_4.iter().find(|(label, _)| *label == protocol);
    match (protocol.strip_suffix('-'), row) {
        (Some(p), _) => a.extend([p.to_string(), "--unsafe-no-validation".into()]),
        (None, Some((_, flags))) => {
            a.push("healing".into());
            a.extend(flags.iter().map(|f| f.to_string()));
        }
        (None, None) => a.push(protocol.to_string()),
    }
    a.extend_from_slice(rest);
    a
}

/// TPC-C with `--no-inserts` (New-Order and Delivery leave ORDERS, NEW_ORDER and ORDER_LINE
/// as they are), for every protocol: OCC⁻ loses updates of `d_next_o_id`, and with inserts
/// every later New-Order of that district would then collide with an existing order for good.
fn tpcc(protocol: &str, warehouses: f64, extra: &[&str]) -> Vec<String> {
    let mut rest = vec![
        "--warehouses".to_string(),
        (warehouses as u64).to_string(),
        "--no-inserts".to_string(),
    ];
    rest.extend(extra.iter().map(|s| s.to_string()));
    run("tpcc", protocol, &rest)
}

fn smallbank(protocol: &str, accounts: u64, theta: f64) -> Vec<String> {
    let rest = [
        "--accounts".to_string(),
        accounts.to_string(),
        "--theta".into(),
        theta.to_string(),
    ];
    run("smallbank", protocol, &rest)
}

/// Figs. 3.8–3.10, Table 3.1, Fig. 3.13, Fig. 3.14 and Tables 3.2–3.3.
pub(super) fn healing(s: &Scale) -> Vec<Panel> {
    let warehouses: &[f64] = if s.quick { &[1.0] } else { &[1.0, 2.0, 4.0] };
    let protocols: &[&str] = if s.quick {
        &["healing", "occ", "occ-"]
    } else {
        &PROTOCOLS
    };
    let mut panels = Vec::new();
    // Figs. 3.8 and 3.10 (throughput), 3.9a (time in abort-and-restart) and 3.9b (abort
    // rate) over warehouses (each healing run's report has its heals per committed
    // transaction, `heals_per_txn`).
    for (fig, metric) in [
        ("Figs. 3.8/3.10: TPC-C throughput", Metric::Throughput),
        (
            "Fig. 3.9a: TPC-C time in abort-and-restart",
            Metric::RestartTimePct,
        ),
        (
            "Fig. 3.9b: TPC-C conflict abort rate",
            Metric::ConflictAbortPct,
        ),
    ] {
        panels.push(by_protocol(
            format!("{fig}, {} threads", s.threads),
            "warehouses",
            metric,
            protocols,
            warehouses,
            |p, w| tpcc(p, w, &[]),
        ));
    }
    // Table 3.1 at 4 warehouses (1 with --quick), as percentiles of New-Order and Delivery
    // latency.
    let w4 = if s.quick { 1.0 } else { 4.0 };
    for ty in ["new_order", "delivery"] {
        for key in ["p50", "p95"] {
            panels.push(by_protocol(
                format!("Table 3.1: TPC-C {ty} {key} latency, {w4} warehouses"),
                "warehouses",
                Metric::TypeLatencyUs(ty, key),
                protocols,
                &[w4],
                |p, w| tpcc(p, w, &[]),
            ));
        }
    }
    // Fig. 3.13: ad-hoc transactions (run as OCC) at 4 warehouses.
    let pcts: &[f64] = if s.quick {
        &[0.0, 100.0]
    } else {
        &[0.0, 25.0, 50.0, 75.0, 100.0]
    };
    panels.push(by_protocol(
        format!("Fig. 3.13: TPC-C with ad-hoc transactions, {w4} warehouses"),
        "ad-hoc transactions (%)",
        Metric::Throughput,
        &["healing", "occ"],
        pcts,
        |p, pct| {
            let pct = (pct as u64).to_string();
            match p {
                // OCC runs every transaction alike: the share changes nothing but the log,
                // and it has none here (`--adhoc-pct` needs a command log outside healing).
                "occ" => tpcc(p, w4, &[]),
                _ => tpcc(p, w4, &["--adhoc-pct", &pct]),
            }
        },
    ));
    // Fig. 3.14 (throughput) and Table 3.2 (abort rate) over θ, at the thesis's 1,000
    // accounts and at 100; Table 3.3's percentiles at 1,000.
    let thetas: &[f64] = if s.quick {
        &[0.9]
    } else {
        &[0.1, 0.3, 0.5, 0.7, 0.9]
    };
    let sb: &[&str] = if s.quick {
        &["healing", "occ"]
    } else {
        &["healing", "occ", "silo", "occ-"]
    };
    for accounts in [1000, 100] {
        for (fig, metric) in [
            ("Fig. 3.14: Smallbank throughput", Metric::Throughput),
            (
                "Table 3.2: Smallbank conflict abort rate",
                Metric::ConflictAbortPct,
            ),
        ] {
            panels.push(by_protocol(
                format!("{fig}, {accounts} accounts, {} threads", s.threads),
                "theta",
                metric,
                sb,
                thetas,
                |p, t| smallbank(p, accounts, t),
            ));
        }
    }
    for key in ["p25", "p80", "p95"] {
        panels.push(by_protocol(
            format!("Table 3.3: Smallbank write_check {key} latency, 1000 accounts"),
            "theta",
            Metric::TypeLatencyUs("write_check", key),
            sb,
            thetas,
            |p, t| smallbank(p, 1000, t),
        ));
    }
    // Table 3.4: healing's overhead without contention, warehouses = threads and every
    // order line and payment home (`--remote-pct 0`), over threads: "Normal" (neither the
    // access cache nor the false-invalidation check's read copies), "+Access Cache", then
    // "+Read Copy" (both), beside occ. Our access cache keeps tuple ids and point
    // UPDATEs' buffered writes (`cc::healing::AccessCache`, `Memo`).
    let threads: Vec<f64> = (1..=s.threads.max(1)).map(|t| t as f64).collect();
    panels.push(by_protocol(
        "Table 3.4: TPC-C overhead, warehouses = threads, no remote accesses".into(),
        "threads (= warehouses)",
        Metric::Throughput,
        &[TABLE_3_4[0].0, TABLE_3_4[1].0, TABLE_3_4[2].0, "occ"],
        &threads,
        |p, t| {
            tpcc(
                p,
                t,
                &["--remote-pct", "0", "--threads", &(t as u64).to_string()],
            )
        },
    ));
    panels
}
