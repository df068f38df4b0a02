//! Version storage (thesis §5.4). The seam is `VersionStorage` in `Config`; built are
//! append-only chains in either order (`append_n2o`: newest-to-oldest and oldest-to-newest,
//! the order kept by `Table::o2n`), in-place storage (`master`: `time-travel` and `delta`,
//! newest-to-oldest chains of data-less versions over a master row per tuple) and
//! single-version storage (one-version chains).
//!
//! Every version carries Hekaton's Begin and End fields (Hekaton §2.3). Each field is one
//! 64-bit word holding either a timestamp or, with the top bit set, the id of the transaction
//! that wrote it; a transaction id in End is the write lock on the version.

pub mod append_n2o;
pub(crate) mod master;
pub(crate) mod non_inline;
mod pool;
pub mod space;

pub use append_n2o::Version;

/// A Begin/End field word: a timestamp, or a transaction id when the top bit is set.
pub(crate) const TXN_BIT: u64 = 1 << 63;
/// End of a version that no one has superseded; also the Begin of an aborted version (so the
/// version is visible to no read time).
pub(crate) const INFINITY: u64 = TXN_BIT - 1;

#[inline]
pub(crate) fn is_txn(word: u64) -> bool {
    word & TXN_BIT != 0
}
