//! Identifier newtypes shared by every layer. A tuple id and a timestamp are both 64-bit
//! integers in memory; as distinct types they cannot be passed for one another (a version's
//! begin timestamp where a tuple id is meant, a read time where an indirection index is).

use std::fmt;

/// A tuple id: the index of a logical row's indirection entry in its table. Indexes map keys
/// to tuple ids; a row keeps its tuple id for life (updates add versions under it).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Default)]
#[repr(transparent)]
pub struct TupleId(u64);

impl TupleId {
    /// The largest tuple id, used as "no tuple" where a sentinel is needed.
    pub const MAX: TupleId = TupleId(u64::MAX);

    /// The tuple id `n`.
    #[inline]
    pub const fn new(n: u64) -> Self {
        TupleId(n)
    }

    /// The raw number (to encode in a key, a log record or an array index).
    #[inline]
    pub const fn get(self) -> u64 {
        self.0
    }

    /// The tuple id `n` places after this one.
    #[inline]
    pub const fn offset(self, n: u64) -> Self {
        TupleId(self.0 + n)
    }
}

impl fmt::Display for TupleId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}
