//! Baseline engines for `myriad bench ycsb|smallbank --engine sqlite|redb|fjall` and
//! `myriad bench tpcc --engine sqlite`: the embedded stores a Rust developer would pick
//! instead of Myriad, run on the same transactions (YCSB: the same plans from
//! `workload::ycsb::Planner`; Smallbank: the same draws of `workload::smallbank::Drawn`;
//! TPC-C: the inputs Myriad's `TpccWorker` draws), the same loaded rows and the same seeds,
//! and reported in the same format, so a ratio between two reports compares engines, not
//! workloads.
//!
//! The engines are behind the cargo feature `baselines` (off by default: bundled SQLite alone
//! adds about a minute of build). Without it, `--engine` other than `myriad` is refused with an
//! error that names the feature. A baseline cannot honour Myriad's design flags (protocol,
//! version storage, GC, logging, ...): a non-default value of one is refused, never ignored
//! ([`refuse_myriad_flags`]).
//!
//! Each engine says in the report's fidelity block what it did: its concurrency (SQLite's
//! `BEGIN IMMEDIATE` writers with busy errors counted as aborts, redb's one write transaction
//! at a time, fjall's optimistic transactions), how a row is stored and its durability.

#[cfg(feature = "baselines")]
mod fjall_engine;
#[cfg(feature = "baselines")]
mod redb_engine;
#[cfg(feature = "baselines")]
mod run;
#[cfg(feature = "baselines")]
mod smallbank;
#[cfg(feature = "baselines")]
mod sqlite;
#[cfg(feature = "baselines")]
mod tpcc;
#[cfg(feature = "baselines")]
mod ycsb;
#[cfg(feature = "baselines")]
pub use run::BaselineArgs;

#[cfg(feature = "baselines")]
pub use smallbank::bench_smallbank;
#[cfg(feature = "baselines")]
pub use tpcc::bench_tpcc;
#[cfg(feature = "baselines")]
pub use ycsb::bench_ycsb;

use serde::Serialize;

/// The engine a benchmark runs on (`--engine`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Engine {
    /// Myriad itself (every other flag applies).
    Myriad,
    /// SQLite through rusqlite (bundled library): in memory with a shared cache, or a WAL file
    /// in --data-dir.
    Sqlite,
    /// redb: its in-memory backend, or a file in --data-dir with durable commits.
    Redb,
    /// fjall's optimistic transactional keyspace (a temporary directory without --data-dir).
    Fjall,
}

impl Engine {
    pub fn name(self) -> &'static str {
        match self {
            Engine::Myriad => "myriad",
            Engine::Sqlite => "sqlite",
            Engine::Redb => "redb",
            Engine::Fjall => "fjall",
        }
    }
}

/// Whether this build has the baseline engines (the cargo feature `baselines`).
pub const COMPILED: bool = cfg!(feature = "baselines");

/// The refusal for `what` (e.g. "--engine sqlite") in a build without the feature.
pub fn missing_feature(what: &str) -> String {
    format!(
        "{what} needs the cargo feature `baselines`, which this build of myriad does not have; \
         rebuild with `cargo build --release -p myriad-cli --features baselines`"
    )
}

/// Whether this build can run `engine`: the baselines need the `baselines` feature.
pub fn check_available(engine: Engine) -> Result<(), String> {
    available_in(engine, COMPILED)
}

/// [`check_available`] for a build that has (`compiled`) or lacks the feature, so that both
/// answers are tested in either build.
fn available_in(engine: Engine, compiled: bool) -> Result<(), String> {
    if engine == Engine::Myriad || compiled {
        return Ok(());
    }
    Err(missing_feature(&format!("--engine {}", engine.name())))
}

/// Refuses flags that only Myriad can honour: `set` lists each such flag with whether the
/// command line gave it a value other than its default. The message names every such flag.
pub fn refuse_myriad_flags(engine: Engine, set: &[(&str, bool)]) -> Result<(), String> {
    let given: Vec<&str> = set.iter().filter(|(_, s)| *s).map(|(f, _)| *f).collect();
    if engine == Engine::Myriad || given.is_empty() {
        return Ok(());
    }
    Err(format!(
        "--engine {} cannot honour {} (Myriad's own design and logging options); leave {} at \
         the default",
        engine.name(),
        given.join(", "),
        if given.len() == 1 { "it" } else { "them" }
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_name_the_flags_and_the_feature() {
        assert!(refuse_myriad_flags(Engine::Myriad, &[("--protocol", true)]).is_ok());
        assert!(refuse_myriad_flags(Engine::Redb, &[("--protocol", false)]).is_ok());
        let e =
            refuse_myriad_flags(Engine::Redb, &[("--protocol", true), ("--gc", true)]).unwrap_err();
        assert!(e.contains("--protocol, --gc") && e.contains("redb"), "{e}");
        assert!(check_available(Engine::Myriad).is_ok());
        assert_eq!(check_available(Engine::Sqlite).is_ok(), COMPILED);
        for engine in [Engine::Sqlite, Engine::Redb, Engine::Fjall] {
            assert!(available_in(engine, true).is_ok());
            let e = available_in(engine, false).unwrap_err();
            let name = format!(
                "--engine {} needs the cargo feature `baselines`",
                engine.name()
            );
            assert!(
                e.starts_with(&name) && e.contains("--features baselines"),
                "{e}"
            );
        }
        assert!(available_in(Engine::Myriad, false).is_ok());
    }
}
