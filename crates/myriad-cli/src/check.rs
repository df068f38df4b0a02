//! `myriad check tpcc --data-dir DIR`: recover a directory written by a durable TPC-C run and
//! check its consistency conditions.

use crate::bench::command::{bench_load_state, LOAD_COMPLETE};
use crate::fatal;
use crate::workload::tpcc;
use myriad::{Config, Database};
use std::process::ExitCode;

/// `myriad check tpcc --data-dir DIR`.
pub(crate) fn check_tpcc(dir: &std::path::Path, no_inserts: bool) -> ExitCode {
    let db = match Database::open(Config::new().data_dir(dir).create_if_missing(false)) {
        Ok(db) => db,
        Err(e) => return fatal(&format!("recovering {}", dir.display()), e),
    };
    if let Some(state) = bench_load_state(&db) {
        if state != LOAD_COMPLETE {
            return fatal("TPC-C check", format!("benchmark load {state}"));
        }
    }
    let tables = match tpcc::Tables::lookup(&db) {
        Ok(t) => t,
        Err(e) => return fatal("finding the TPC-C tables", e),
    };
    match tpcc::check_tables(&db, &tables, no_inserts) {
        Ok(bad) if bad.is_empty() => {
            println!(
                "TPC-C consistency conditions 1-4 hold{} ({} recovered rows)",
                if no_inserts {
                    " (2 not checked: --no-inserts)"
                } else {
                    ""
                },
                db.recovery_report().map_or(0, |r| r.rows)
            );
            ExitCode::SUCCESS
        }
        Ok(bad) => {
            for b in &bad {
                eprintln!("violation: {b}");
            }
            fatal("TPC-C check", format!("{} violation(s)", bad.len()))
        }
        Err(e) => fatal("checking", e),
    }
}
