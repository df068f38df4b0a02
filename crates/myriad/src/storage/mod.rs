//! Tables: a schema, an indirection array (tuple id → newest version) and the indexes.

pub mod table;

pub use table::{Table, TableRef, TupleId};

/// A write of a transaction: the new version at the head of `tid`'s chain and the version it
/// superseded. The write set holds these; the log encodes them at commit.
#[derive(Clone, Copy, Debug)]
pub(crate) struct WriteRecord {
    pub table: u32,
    pub tid: TupleId,
    pub new: *mut crate::version::Version,
    /// Null when the tuple had no version (fresh insert).
    pub old: *mut crate::version::Version,
}
