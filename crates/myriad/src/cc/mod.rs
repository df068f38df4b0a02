//! Concurrency control (thesis §5.3; Hekaton §2–3). The seam is `Protocol` in `Config`,
//! copied into each transaction. The multi-version protocols share the version format,
//! visibility (Hekaton Tables 1–2, `visibility.rs`), the write lock in the End field and the
//! commit path (`mvocc::commit`); they differ in what a read records and what a write and a
//! commit check:
//! - `mvocc` (`mvocc.rs`): nothing on reads; read validation and scan re-checks at commit;
//! - `si`: MVOCC's code at Snapshot Isolation only (first-updater-wins, no validation);
//! - `mvto` (`mvto.rs`): read-ts on reads and scans, checked by writes; no validation;
//! - `mv2pl` (`mv2pl.rs`): read locks on reads, checked by writes; scan re-checks at commit;
//! - `ssn`, `ssi`, `ermia-ssi` (`ssn.rs`): SI plus stamps — reader bits on reads, at commit
//!   the exclusion-window test (SSN), Cahill's two flags (SSI) or ERMIA's dangerous-structure
//!   test, stamps left in the versions.
//!
//! `silo` (`silo.rs`) is single-version: it runs on version storage `single-version` only,
//! with its own commit (buffered writes locked in a global order, read-set validation,
//! epoch-based TIDs); it shares the operations of `txn/mod.rs`, which branch on it where a
//! read takes the current record and where a write is buffered instead of installed.

pub mod mv2pl;
pub mod mvocc;
pub mod mvto;
pub mod silo;
pub mod ssn;
pub mod visibility;
