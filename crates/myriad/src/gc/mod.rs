//! Garbage collection (thesis §5.5). The seam is `GcPolicy` in `Config`; built are
//! transaction-level, epoch-based GC (`epoch.rs`, thesis §5.5.2), tuple-level background
//! vacuuming (`vacuum.rs`, thesis §5.5.1), cooperative cleaning on oldest-to-newest chains
//! (`coop.rs`, §5.5.1), or `none`.

pub(crate) mod coop;
pub mod epoch;
pub(crate) mod vacuum;

pub(crate) use epoch::{collect, watermark, Garbage};
