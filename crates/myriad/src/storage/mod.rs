//! Tables: a schema, an indirection array (tuple id → newest version) and the indexes.

pub mod table;

pub use table::{Table, TableRef, TupleId};
