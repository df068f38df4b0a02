//! The engine's integration tests, one binary (`cargo test -p myriad --test engine`): each
//! file under `tests/` is a module here, so a release build links the engine once for all of
//! them instead of once per file. `crash.rs` stays its own binary (its own harness, it kills
//! child processes). Run one file's tests with a module filter, e.g.
//! `cargo test -p myriad --release --test engine history_checker::`.

mod api_basic;
mod api_errors;
mod cc_mvocc;
mod cc_protocols;
mod common;
mod concurrency_invariants;
mod create_index;
mod durability;
mod durability_faults;
mod gc_dead_zone;
mod gc_safety;
mod healing;
mod history_checker;
mod in_place_storage;
mod layering;
mod non_inline;
mod physical_pointers;
mod prefetch;
mod range_conditions;
mod siro_storage;
mod sql_fuzz;
mod sql_transactions;
mod table_scan;
mod timestamps_partial_order;
