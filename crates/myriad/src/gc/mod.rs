//! Garbage collection (thesis §5.5). The seam is `GcPolicy` in `Config`; the policy built is
//! transaction-level, epoch-based GC (`epoch.rs`, thesis §5.5.2), or `none`.

pub mod epoch;

pub(crate) use epoch::{collect, watermark, Garbage};
