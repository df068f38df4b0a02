//! Stored procedures (thesis §3.3, §4.3). Not built yet: transactions are Rust closures
//! (`Database::run`) or explicit `Transaction` calls.
