//! Myriad: a multi-core, main-memory, multi-version transaction engine.
//!
//! One module per design dimension: `cc` (concurrency control), `timestamp`,
//! `version` (version storage), `gc`, `index`, `log`, `recovery`, `procedure`; `storage` holds
//! tables (indirection arrays), `txn` the transaction API and the transaction table, `history`
//! the recorder and checker; `shared` the state a transaction runs in, `engine` the `Database`
//! facade that owns it. ARCHITECTURE.md walks one transaction through these files.
#![doc = include_str!("../../../README.md")]
#![warn(missing_docs)]
#![deny(clippy::unwrap_used)]
#![cfg_attr(test, allow(clippy::unwrap_used))]

pub(crate) mod background;
pub mod cc;
pub mod config;
pub mod engine;
pub mod error;
pub mod gc;
pub mod history;
pub mod ids;
pub mod index;
pub mod log;
pub mod procedure;
pub(crate) mod query;
pub mod recovery;
pub mod schema;
pub(crate) mod shared;
pub mod sql;
pub mod storage;
pub mod timestamp;
pub mod txn;
pub mod value;
pub mod version;

pub use config::{
    Config, FsyncPolicy, GcPolicy, IndexPointers, Isolation, LogManagerKind, LogPolicy, NonInline,
    PacmanMode, PacmanSlicing, PoCounters, ProcedureExec, Protocol, RecoveryScheme,
    TimestampPolicy, VersionStorage,
};
pub use engine::{ChainStats, Database, Stats};
pub use error::{AbortReason, Error, Result};
pub use ids::TupleId;
pub use log::{CommitTicket, LogStats};
pub use recovery::checkpoint::CheckpointInfo;
pub use recovery::RecoveryReport;
pub use schema::{ColumnType, IndexKind, TableBuilder, TableSchema};
pub use storage::TableRef;
pub use timestamp::Timestamp;
pub use txn::{ScanOptions, Transaction, TxnOptions};
pub use value::{Row, RowMut, RowRef, ToValueRef, Value, ValueRef, Values};
