//! The command-line tool's integration tests, one binary (`cargo test -p myriad-cli --test cli`):
//! each file under `tests/` is a module here, so a release build links once for all of them.
//! Run one file's tests with a module filter, e.g.
//! `cargo test -p myriad-cli --release --test cli recovery_faults_cli::`.

mod bench_baselines;
mod bench_cli;
mod bench_tpcc;
mod cli_robustness;
mod durability_cli;
mod experiment_cli;
mod explain_cli;
mod healing_cli;
mod isolation_suite;
mod recovery_faults_cli;
mod shell_cancel;
mod shell_cli;
