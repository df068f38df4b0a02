//! Fixed schemas with typed columns, the contiguous row layout, and the order-preserving key
//! encoding shared by every index.
//!
//! Row layout: each column at a fixed offset; `Int`/`Float` take 8 bytes (little endian);
//! `Str(n)`/`Bytes(n)` take a 2-byte length and `n` bytes, so every version of a table has the
//! same size and lives inline after the version header.
//!
//! Key encoding: components are encoded so that `memcmp` order equals value order (integers
//! big-endian with the sign bit flipped, floats by the IEEE total-order transform, strings with
//! `0x00` escaped as `0x00 0xFF` and terminated by `0x00 0x00`), so one ordered index serves
//! composite keys of any types.

use crate::error::{Error, Result};
use crate::value::{ValueRef, Values};
use std::fmt;

/// Largest declared length of a `Str`/`Bytes` column.
pub const MAX_VAR_LEN: usize = u16::MAX as usize;

/// A column's type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ColumnType {
    /// 64-bit signed integer.
    Int,
    /// 64-bit IEEE float: `DOUBLE` to the user, in SQL, `Display` and every error message
    /// (SQL also accepts `FLOAT`, `REAL` and `DOUBLE PRECISION` for it).
    Float,
    /// UTF-8 string of at most the given number of bytes.
    Str(usize),
    /// Byte string of at most the given number of bytes.
    Bytes(usize),
}

impl ColumnType {
    pub(crate) fn width(self) -> usize {
        match self {
            ColumnType::Int | ColumnType::Float => 8,
            ColumnType::Str(n) | ColumnType::Bytes(n) => 2 + n,
        }
    }
}

impl fmt::Display for ColumnType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ColumnType::Int => f.write_str("INT"),
            ColumnType::Float => f.write_str("DOUBLE"),
            ColumnType::Str(n) => write!(f, "VARCHAR({n})"),
            ColumnType::Bytes(n) => write!(f, "BYTES({n})"),
        }
    }
}

/// Hash or ordered index.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum IndexKind {
    /// Point lookups only.
    Hash,
    /// Point lookups and ordered range scans.
    Ordered,
}

/// A column of a table.
#[derive(Clone, Debug)]
pub struct Column {
    /// The column's name (how SQL and `Table::column` refer to it).
    pub name: String,
    /// The column's type (and, for strings and bytes, its maximum length).
    pub ty: ColumnType,
    pub(crate) offset: usize,
}

impl Column {
    /// Where the column's value lies in a row's bytes.
    #[inline]
    pub(crate) fn bytes(&self) -> std::ops::Range<usize> {
        self.offset..self.offset + self.ty.width()
    }
}

/// An index definition. Index 0 of a table is always its primary key.
#[derive(Clone, Debug)]
pub struct IndexDef {
    /// The index's name (how `Table::index` refers to it).
    pub name: String,
    /// Positions of the key columns in the table's column list, in key order.
    pub columns: Vec<usize>,
    /// Hash (point lookups) or ordered (also range scans).
    pub kind: IndexKind,
    /// Whether the key must be unique among live rows (always true for the primary key).
    pub unique: bool,
}

/// A table's schema: columns, primary key and secondary indexes.
#[derive(Clone, Debug)]
pub struct TableSchema {
    pub(crate) name: String,
    pub(crate) columns: Vec<Column>,
    /// `indexes[0]` is the primary key.
    pub(crate) indexes: Vec<IndexDef>,
    pub(crate) row_size: usize,
    pub(crate) expected_rows: usize,
    /// Per index: whether every key column is INT (`encode_key_prefix`'s fast path).
    int_keys: Vec<bool>,
}

/// Builder for a `TableSchema`; errors are reported by `build` (and `Database::create_table`).
#[derive(Clone, Debug)]
pub struct TableBuilder {
    name: String,
    columns: Vec<(String, ColumnType)>,
    pk: Option<(Vec<String>, IndexKind)>,
    secondary: Vec<(String, Vec<String>, IndexKind, bool)>,
    expected_rows: usize,
}

impl TableSchema {
    /// Starts a schema for table `name`.
    #[allow(clippy::new_ret_no_self)]
    pub fn new(name: &str) -> TableBuilder {
        TableBuilder {
            name: name.to_string(),
            columns: Vec::new(),
            pk: None,
            secondary: Vec::new(),
            expected_rows: 1024,
        }
    }
    /// The table's name.
    pub fn name(&self) -> &str {
        &self.name
    }
    /// The columns, in row order.
    pub fn columns(&self) -> &[Column] {
        &self.columns
    }
    /// The indexes; `indexes()[0]` is the primary key.
    pub fn indexes(&self) -> &[IndexDef] {
        &self.indexes
    }
    /// Bytes of row data per version.
    pub fn row_size(&self) -> usize {
        self.row_size
    }
    /// Position of the column named `name`.
    pub fn column_index(&self, name: &str) -> Result<usize> {
        self.columns
            .iter()
            .position(|c| c.name == name)
            .ok_or_else(|| Error::UnknownColumn {
                table: self.name.clone(),
                column: name.to_string(),
            })
    }
    /// Position of the index named `name` (the primary key is "primary").
    pub fn index_position(&self, name: &str) -> Result<usize> {
        self.indexes
            .iter()
            .position(|i| i.name == name)
            .ok_or_else(|| Error::UnknownIndex {
                table: self.name.clone(),
                index: name.to_string(),
            })
    }

    /// A builder that rebuilds this schema (to extend it, e.g. with an index).
    pub fn to_builder(&self) -> TableBuilder {
        let names = |cols: &[usize]| -> Vec<String> {
            cols.iter().map(|&c| self.columns[c].name.clone()).collect()
        };
        TableBuilder {
            name: self.name.clone(),
            columns: self
                .columns
                .iter()
                .map(|c| (c.name.clone(), c.ty))
                .collect(),
            pk: self.indexes.first().map(|pk| (names(&pk.columns), pk.kind)),
            secondary: self.indexes[1..]
                .iter()
                .map(|d| (d.name.clone(), names(&d.columns), d.kind, d.unique))
                .collect(),
            expected_rows: self.expected_rows,
        }
    }

    pub(crate) fn is_pk_column(&self, col: usize) -> bool {
        self.indexes[0].columns.contains(&col)
    }

    // ---- row encoding ----

    /// Writes INT `v` at byte `offset` of a row: an INT column's layout (8 bytes, little
    /// endian), for the callers that checked the column is INT.
    #[inline]
    pub(crate) fn write_int_at(row: &mut [u8], offset: usize, v: i64) {
        row[offset..offset + 8].copy_from_slice(&v.to_le_bytes());
    }

    /// Writes `value` into column `col` of `row` after checking type and length.
    pub(crate) fn write_column(
        &self,
        row: &mut [u8],
        col: usize,
        value: ValueRef<'_>,
    ) -> Result<()> {
        let c = &self.columns[col];
        let o = c.offset;
        match (c.ty, value) {
            (ColumnType::Int, ValueRef::Int(v)) => Self::write_int_at(row, o, v),
            (ColumnType::Float, ValueRef::Float(v)) => {
                row[o..o + 8].copy_from_slice(&v.to_le_bytes())
            }
            (ColumnType::Float, ValueRef::Int(v)) => {
                row[o..o + 8].copy_from_slice(&(v as f64).to_le_bytes())
            }
            (ColumnType::Str(max), ValueRef::Str(s)) => {
                self.write_var(row, col, max, s.as_bytes())?
            }
            (ColumnType::Bytes(max), ValueRef::Bytes(b)) => self.write_var(row, col, max, b)?,
            (ColumnType::Bytes(max), ValueRef::Str(s)) => {
                self.write_var(row, col, max, s.as_bytes())?
            }
            (ty, v) => return Err(self.mismatch(col, ty, v)),
        }
        Ok(())
    }

    fn write_var(&self, row: &mut [u8], col: usize, max: usize, b: &[u8]) -> Result<()> {
        if b.len() > max {
            return Err(Error::ValueTooLong {
                table: self.name.clone(),
                column: self.columns[col].name.clone(),
                max_len: max,
                len: b.len(),
            });
        }
        let o = self.columns[col].offset;
        row[o..o + 2].copy_from_slice(&(b.len() as u16).to_le_bytes());
        row[o + 2..o + 2 + b.len()].copy_from_slice(b);
        Ok(())
    }

    #[cold]
    fn mismatch(&self, col: usize, ty: ColumnType, v: ValueRef<'_>) -> Error {
        Error::TypeMismatch {
            table: self.name.clone(),
            column: self.columns[col].name.clone(),
            expected: ty.to_string(),
            found: v.type_name().to_string(),
        }
    }

    /// Checks a row image that did not come through `write_column` (recovery reads them
    /// back whole from the log and checkpoints) as `write_column` would have: every
    /// variable-length column within its declared length, every VARCHAR valid UTF-8
    /// (`Error::InvalidText`). `row` has this table's row size.
    pub(crate) fn check_row(&self, row: &[u8]) -> Result<()> {
        debug_assert_eq!(row.len(), self.row_size);
        for c in &self.columns {
            let max = match c.ty {
                ColumnType::Str(max) | ColumnType::Bytes(max) => max,
                ColumnType::Int | ColumnType::Float => continue,
            };
            let o = c.offset;
            let len = u16::from_le_bytes([row[o], row[o + 1]]) as usize;
            if len > max {
                return Err(Error::ValueTooLong {
                    table: self.name.clone(),
                    column: c.name.clone(),
                    max_len: max,
                    len,
                });
            }
            if matches!(c.ty, ColumnType::Str(_))
                && std::str::from_utf8(&row[o + 2..o + 2 + len]).is_err()
            {
                return Err(Error::InvalidText {
                    table: self.name.clone(),
                    column: c.name.clone(),
                });
            }
        }
        Ok(())
    }

    /// Reads column `col` of `row`. `row` must be a row of this table.
    #[inline]
    pub(crate) fn read_column<'r>(&self, row: &'r [u8], col: usize) -> ValueRef<'r> {
        let c = &self.columns[col];
        let o = c.offset;
        let word = |o: usize| {
            let mut w = [0u8; 8];
            w.copy_from_slice(&row[o..o + 8]);
            w
        };
        match c.ty {
            ColumnType::Int => ValueRef::Int(i64::from_le_bytes(word(o))),
            ColumnType::Float => ValueRef::Float(f64::from_le_bytes(word(o))),
            ColumnType::Str(_) | ColumnType::Bytes(_) => {
                let len = u16::from_le_bytes([row[o], row[o + 1]]) as usize;
                let b = &row[o + 2..o + 2 + len];
                match c.ty {
                    // Text is validated once, where it enters the engine: `write_column`
                    // takes `&str`, and every whole row image (the logical log's replay,
                    // checkpoints, the physical log's `Table::placed_version`) passes
                    // `check_row` before it is stored. Rows start zeroed (length 0). So a
                    // read does not check again (it was 1.9 % of TPC-C's instructions).
                    ColumnType::Str(_) => {
                        debug_assert!(std::str::from_utf8(b).is_ok(), "unchecked text stored");
                        // SAFETY: every path that stores a Str column's bytes checked them
                        // as UTF-8 (above); `row` is a stored row of this table.
                        ValueRef::Str(unsafe { std::str::from_utf8_unchecked(b) })
                    }
                    _ => ValueRef::Bytes(b),
                }
            }
        }
    }

    /// Encodes a full row from `values` (one per column, in column order) into `row`.
    pub(crate) fn encode_row<V: Values + ?Sized>(&self, values: &V, row: &mut [u8]) -> Result<()> {
        if values.count() != self.columns.len() {
            return Err(Error::RowArity {
                table: self.name.clone(),
                expected: self.columns.len(),
                found: values.count(),
            });
        }
        let mut col = 0;
        values.visit(&mut |v| {
            self.write_column(row, col, v)?;
            col += 1;
            Ok(())
        })
    }

    // ---- key encoding ----

    /// Encodes the key of index `idx` from caller-supplied values into `out` (cleared first).
    #[inline]
    pub(crate) fn encode_key_values<K: Values + ?Sized>(
        &self,
        idx: usize,
        key: &K,
        out: &mut Vec<u8>,
    ) -> Result<()> {
        if let Some(b) = self.compiled_key(idx, key) {
            out.clear();
            out.extend_from_slice(b);
            return Ok(());
        }
        let cols = &self.indexes[idx].columns;
        if let (Some(v), &[col]) = (key.single(), &cols[..]) {
            // One-column key given as one value: no per-value callback.
            out.clear();
            match (self.columns[col].ty, v) {
                // The common integer key without the `ValueRef` round trip through
                // `coerce_key` (whose by-memory return showed as a store-forwarding stall).
                (ColumnType::Int, ValueRef::Int(i)) => encode_int(i, out),
                _ => encode_component(self.coerce_key(col, v)?, out),
            }
            return Ok(());
        }
        if key.count() != cols.len() {
            return Err(self.key_arity(idx, key.count()));
        }
        self.encode_key_prefix(idx, key, out).map(|_| ())
    }

    /// The key of index `idx` encoded: a compiled point key's own bytes where they already
    /// are this index's encoding (no copy), else encoded into `out` as `encode_key_values`.
    #[inline]
    pub(crate) fn encoded_key<'a, K: Values + ?Sized>(
        &self,
        idx: usize,
        key: &'a K,
        out: &'a mut Vec<u8>,
    ) -> Result<&'a [u8]> {
        if let Some(b) = self.compiled_key(idx, key) {
            return Ok(b);
        }
        self.encode_key_values(idx, key, out)?;
        Ok(out)
    }

    /// A compiled point key's own bytes, when they are index `idx`'s encoding of it (encoded
    /// by `encode_int` as this index's INT columns are).
    #[inline]
    pub(crate) fn compiled_key<'a, K: Values + ?Sized>(
        &self,
        idx: usize,
        key: &'a K,
    ) -> Option<&'a [u8]> {
        key.encoded(crate::value::sealed::Token)
            .filter(|b| self.int_keys[idx] && b.len() == 8 * self.indexes[idx].columns.len())
    }

    #[cold]
    fn key_arity(&self, idx: usize, found: usize) -> Error {
        let def = &self.indexes[idx];
        Error::KeyArity {
            table: self.name.clone(),
            index: def.name.clone(),
            expected: def.columns.len(),
            found,
        }
    }

    /// Encodes a key prefix (the first `n` components, n <= index width) for range bounds.
    pub(crate) fn encode_key_prefix<K: Values + ?Sized>(
        &self,
        idx: usize,
        key: &K,
        out: &mut Vec<u8>,
    ) -> Result<usize> {
        out.clear();
        let def = &self.indexes[idx];
        if key.count() > def.columns.len() {
            return Err(self.key_arity(idx, key.count()));
        }
        let n = key.count();
        if self.int_keys[idx] {
            // Every key column INT (TPC-C's, YCSB's keys): one reservation, then eight bytes
            // a value; a value of another kind falls through to the general loop (which
            // coerces or rejects it).
            out.reserve(8 * n);
            let mut i = 0;
            while let Some(ValueRef::Int(x)) = key.at(i) {
                encode_int(x, out);
                i += 1;
                if i == n {
                    return Ok(n);
                }
            }
            out.clear();
        }
        if n > 0 && key.at(0).is_some() {
            // Indexable values: a plain loop, integers encoded inline.
            for (i, &col) in def.columns[..n].iter().enumerate() {
                match (self.columns[col].ty, key.at(i)) {
                    (ColumnType::Int, Some(ValueRef::Int(x))) => encode_int(x, out),
                    (_, Some(v)) => encode_component(self.coerce_key(col, v)?, out),
                    (_, None) => return Err(self.key_arity(idx, i)),
                }
            }
            return Ok(n);
        }
        let mut i = 0;
        key.visit(&mut |v| {
            let v = self.coerce_key(def.columns[i], v)?;
            encode_component(v, out);
            i += 1;
            Ok(())
        })?;
        Ok(i)
    }

    #[inline]
    fn coerce_key<'v>(&self, col: usize, v: ValueRef<'v>) -> Result<ValueRef<'v>> {
        let ty = self.columns[col].ty;
        match (ty, v) {
            (ColumnType::Int, ValueRef::Int(_))
            | (ColumnType::Float, ValueRef::Float(_))
            | (ColumnType::Str(_), ValueRef::Str(_))
            | (ColumnType::Bytes(_), ValueRef::Bytes(_)) => Ok(v),
            (ColumnType::Float, ValueRef::Int(i)) => Ok(ValueRef::Float(i as f64)),
            (ColumnType::Bytes(_), ValueRef::Str(s)) => Ok(ValueRef::Bytes(s.as_bytes())),
            (ty, v) => Err(self.mismatch(col, ty, v)),
        }
    }

    /// Encodes the key of index `idx` from a stored row into `out` (cleared first).
    /// Whether rows `a` and `b` have the same key in index `idx`.
    pub(crate) fn same_key(&self, idx: usize, a: &[u8], b: &[u8]) -> bool {
        self.indexes[idx]
            .columns
            .iter()
            .all(|&col| self.read_column(a, col) == self.read_column(b, col))
    }

    /// The length in bytes of the first `n` components of `key`, an encoded key of index
    /// `idx` (`encode_key`); `None` if `key` holds fewer or is malformed. The prefix is
    /// byte-for-byte `encode_key_prefix` of those components' values.
    pub(crate) fn key_prefix_len(&self, idx: usize, key: &[u8], n: usize) -> Option<usize> {
        let mut at = 0;
        for &col in self.indexes[idx].columns.get(..n)? {
            match self.columns[col].ty {
                ColumnType::Int | ColumnType::Float => at += 8,
                ColumnType::Str(_) | ColumnType::Bytes(_) => {
                    // Escaped bytes up to the terminator `0 0` (a data zero is `0 0xFF`).
                    loop {
                        let z = at + key.get(at..)?.iter().position(|&b| b == 0)?;
                        let end = *key.get(z + 1)? == 0;
                        at = z + 2;
                        if end {
                            break;
                        }
                    }
                }
            }
            if at > key.len() {
                return None;
            }
        }
        Some(at)
    }

    pub(crate) fn encode_key_from_row(&self, idx: usize, row: &[u8], out: &mut Vec<u8>) {
        out.clear();
        self.append_key_from_row(idx, row, out);
    }

    /// `encode_key_from_row` appending to `out`.
    pub(crate) fn append_key_from_row(&self, idx: usize, row: &[u8], out: &mut Vec<u8>) {
        for &col in &self.indexes[idx].columns {
            encode_component(self.read_column(row, col), out);
        }
    }
}

/// Appends one order-preserving key component.
#[inline]
pub(crate) fn encode_component(v: ValueRef<'_>, out: &mut Vec<u8>) {
    match v {
        ValueRef::Int(i) => encode_int(i, out),
        ValueRef::Float(f) => {
            let b = f.to_bits();
            let k = if b >> 63 == 1 { !b } else { b ^ (1 << 63) };
            out.extend_from_slice(&k.to_be_bytes());
        }
        ValueRef::Str(s) => encode_bytes(s.as_bytes(), out),
        ValueRef::Bytes(b) => encode_bytes(b, out),
    }
}

/// An integer key component: sign bit flipped, big-endian, so byte order is numeric order.
#[inline]
pub(crate) fn encode_int(i: i64, out: &mut Vec<u8>) {
    out.extend_from_slice(&int_key_bytes(i));
}

/// The eight bytes `encode_int` writes for `i`.
#[inline]
pub(crate) fn int_key_bytes(i: i64) -> [u8; 8] {
    ((i as u64) ^ (1 << 63)).to_be_bytes()
}

/// The INT that `encode_int` wrote as `b`.
#[inline]
pub(crate) fn decode_int(b: [u8; 8]) -> i64 {
    (u64::from_be_bytes(b) ^ (1 << 63)) as i64
}

fn encode_bytes(b: &[u8], out: &mut Vec<u8>) {
    out.reserve(b.len() + 2);
    // Runs between zero bytes are copied whole; each zero byte becomes 0x00 0xFF.
    let mut rest = b;
    while let Some(z) = rest.iter().position(|&x| x == 0) {
        out.extend_from_slice(&rest[..z]);
        out.extend_from_slice(&[0, 0xFF]);
        rest = &rest[z + 1..];
    }
    out.extend_from_slice(rest);
    out.extend_from_slice(&[0, 0]);
}

impl TableBuilder {
    /// Adds a column.
    pub fn column(mut self, name: &str, ty: ColumnType) -> Self {
        self.columns.push((name.to_string(), ty));
        self
    }
    /// Sets the primary key (a hash index: point lookups only).
    pub fn primary_key(self, columns: &[&str]) -> Self {
        self.primary_key_with(columns, IndexKind::Hash)
    }
    /// Sets the primary key with the given index kind (`Ordered` allows range scans).
    pub fn primary_key_with(mut self, columns: &[&str], kind: IndexKind) -> Self {
        self.pk = Some((columns.iter().map(|s| s.to_string()).collect(), kind));
        self
    }
    /// Adds a secondary index.
    pub fn index(mut self, name: &str, columns: &[&str], kind: IndexKind, unique: bool) -> Self {
        self.secondary.push((
            name.to_string(),
            columns.iter().map(|s| s.to_string()).collect(),
            kind,
            unique,
        ));
        self
    }
    /// Sizes the hash indexes for this many rows (they grow beyond it, at a cost).
    pub fn expected_rows(mut self, n: usize) -> Self {
        self.expected_rows = n;
        self
    }

    /// Validates and lays out the schema.
    pub fn build(self) -> Result<TableSchema> {
        let bad = |m: String| Err(Error::InvalidSchema(m));
        if self.name.is_empty() {
            return bad("table name is empty".into());
        }
        if self.columns.is_empty() {
            return bad(format!("table `{}` has no columns", self.name));
        }
        let mut columns = Vec::with_capacity(self.columns.len());
        let mut offset = 0;
        for (name, ty) in &self.columns {
            if columns.iter().any(|c: &Column| &c.name == name) {
                return bad(format!(
                    "table `{}` declares column `{name}` twice",
                    self.name
                ));
            }
            if let ColumnType::Str(n) | ColumnType::Bytes(n) = ty {
                if *n > MAX_VAR_LEN {
                    return bad(format!(
                        "column `{}.{name}` declares length {n}, maximum is {MAX_VAR_LEN}",
                        self.name
                    ));
                }
            }
            columns.push(Column {
                name: name.clone(),
                ty: *ty,
                offset,
            });
            offset += ty.width();
        }
        let row_size = offset.div_ceil(8) * 8;
        let resolve = |cols: &[String], what: &str| -> Result<Vec<usize>> {
            if cols.is_empty() {
                return Err(Error::InvalidSchema(format!(
                    "{what} of `{}` has no columns",
                    self.name
                )));
            }
            let mut out = Vec::new();
            for c in cols {
                let i = columns.iter().position(|x| &x.name == c).ok_or_else(|| {
                    Error::UnknownColumn {
                        table: self.name.clone(),
                        column: c.clone(),
                    }
                })?;
                if out.contains(&i) {
                    return Err(Error::InvalidSchema(format!(
                        "{what} of `{}` repeats column `{c}`",
                        self.name
                    )));
                }
                out.push(i);
            }
            Ok(out)
        };
        let Some((pk_cols, pk_kind)) = &self.pk else {
            return bad(format!("table `{}` has no primary key", self.name));
        };
        let mut indexes = vec![IndexDef {
            name: "primary".into(),
            columns: resolve(pk_cols, "primary key")?,
            kind: *pk_kind,
            unique: true,
        }];
        for (name, cols, kind, unique) in &self.secondary {
            if indexes.iter().any(|i| &i.name == name) {
                return Err(Error::AlreadyExists(format!(
                    "index `{name}` on `{}`",
                    self.name
                )));
            }
            indexes.push(IndexDef {
                name: name.clone(),
                columns: resolve(cols, &format!("index `{name}`"))?,
                kind: *kind,
                unique: *unique,
            });
        }
        let int_keys = indexes
            .iter()
            .map(|i| i.columns.iter().all(|&c| columns[c].ty == ColumnType::Int))
            .collect();
        Ok(TableSchema {
            name: self.name,
            columns,
            indexes,
            int_keys,
            row_size,
            expected_rows: self.expected_rows.max(16),
        })
    }
}

/// The columns one stored procedure reads and writes of one table, as bit masks (bit `c`
/// for column `c`; a table of more than 64 columns has every column from the 64th on
/// /// counted as read and written). The column check of read validation (thesis §3.4.5's
/// false-invalidation check) compares only these: a row whose newer record differs from the
/// one a call read only in columns the call did not read has not invalidated the read. Made
/// by `procedure::healing::column_masks`, read by `cc/healing.rs` and `cc/mvocc.rs`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TableCols {
    /// `Table::id`.
    pub table: u32,
    /// Columns any statement of the procedure reads from the table: select items and
    /// aggregates, `WHERE` conditions, `ORDER BY` index columns, `SET` expressions.
    pub read: u64,
    /// Columns any `UPDATE` of the procedure sets.
    pub write: u64,
    /// Increment-only columns: every `SET` of the column in the procedure is an increment
    /// of itself, `c = c + e`, `c = e + c` or `c = c - e` with `e` free of the table's
    /// columns, and nothing else reads it (not in another `SET`, a select item, a
    /// condition). The procedure's results and other writes cannot depend on such a
    /// column's value, and its new value is the value read plus a delta: a row changed
    /// since in this column alone can take the delta instead of a heal (`healing`'s
    /// false-invalidation check; `read` and `write` include these columns).
    pub incr: u64,
    /// Blind columns: every statement of the procedure that writes the table sets the
    /// column (an `UPDATE`'s `SET`, or an `INSERT`'s row) and nothing reads it. A buffered
    /// write of such a row holds the call's own value there, computed from nothing of the
    /// row (thesis §3.4.5 compares the columns a call reads): a row changed since in this
    /// column alone keeps the call's value rather than heal.
    pub blind: u64,
}

impl TableCols {
    /// Whether column `c` is read or written (columns from the 64th on always are).
    #[inline]
    pub(crate) fn touches(&self, c: usize) -> bool {
        c >= 64 || (self.read | self.write) >> c & 1 == 1
    }

    /// Whether column `c` is read (columns from the 64th on always are).
    #[inline]
    pub(crate) fn reads(&self, c: usize) -> bool {
        c >= 64 || self.read >> c & 1 == 1
    }

    /// Whether column `c` is written (columns from the 64th on always are).
    #[inline]
    pub(crate) fn writes(&self, c: usize) -> bool {
        c >= 64 || self.write >> c & 1 == 1
    }
    /// Whether rows `a` and `b` of a table with columns `cols` hold the same values in every
    /// column read (the false-invalidation test of a read, thesis §3.4.5).
    pub(crate) fn reads_same(&self, cols: &[Column], a: &[u8], b: &[u8]) -> bool {
        cols.iter()
            .enumerate()
            .all(|(i, c)| !self.reads(i) || a[c.bytes()] == b[c.bytes()])
    }

    /// Whether column `c` is blind (`blind`).
    #[inline]
    pub(crate) fn blind(&self, c: usize) -> bool {
        c < 64 && self.blind >> c & 1 == 1
    }

    /// Whether column `c` is increment-only (`incr`).
    #[inline]
    pub(crate) fn increments(&self, c: usize) -> bool {
        c < 64 && self.incr >> c & 1 == 1
    }

    /// `reads_same`, not counting increment-only columns, which only the increments read.
    pub(crate) fn reads_same_but_increments(&self, cols: &[Column], a: &[u8], b: &[u8]) -> bool {
        cols.iter()
            .enumerate()
            .all(|(i, c)| !self.reads(i) || self.increments(i) || a[c.bytes()] == b[c.bytes()])
    }
}

/// Byte equality of two encoded keys, one word compare for the common 8-byte key (an
/// integer primary key) instead of a `memcmp` call.
#[inline]
pub(crate) fn same_encoded_key(a: &[u8], b: &[u8]) -> bool {
    match (<[u8; 8]>::try_from(a), <[u8; 8]>::try_from(b)) {
        (Ok(x), Ok(y)) => u64::from_ne_bytes(x) == u64::from_ne_bytes(y),
        _ => a == b,
    }
}
#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::{ToValueRef, Value};

    fn enc(v: ValueRef<'_>) -> Vec<u8> {
        let mut o = Vec::new();
        encode_component(v, &mut o);
        o
    }

    #[test]
    fn key_encoding_preserves_order() {
        let ints = [i64::MIN, -5, -1, 0, 1, 7, i64::MAX];
        for w in ints.windows(2) {
            assert!(enc(ValueRef::Int(w[0])) < enc(ValueRef::Int(w[1])));
        }
        let floats = [f64::NEG_INFINITY, -2.5, -0.0, 0.5, 3.0, f64::INFINITY];
        for w in floats.windows(2) {
            assert!(
                enc(ValueRef::Float(w[0])) < enc(ValueRef::Float(w[1])),
                "{w:?}"
            );
        }
        let strs = ["", "\0", "\0a", "a", "a\0", "ab", "b"];
        for w in strs.windows(2) {
            assert!(enc(ValueRef::Str(w[0])) < enc(ValueRef::Str(w[1])), "{w:?}");
        }
        // Composite: ("a", 2) < ("ab", 1) because the string terminator sorts first.
        let mut k1 = enc(ValueRef::Str("a"));
        k1.extend(enc(ValueRef::Int(2)));
        let mut k2 = enc(ValueRef::Str("ab"));
        k2.extend(enc(ValueRef::Int(1)));
        assert!(k1 < k2);
    }

    #[test]
    fn byte_strings_escape_every_zero_byte() {
        // The reference: byte by byte, 0x00 as 0x00 0xFF, then the 0x00 0x00 terminator.
        fn reference(b: &[u8]) -> Vec<u8> {
            let mut o = Vec::new();
            for &x in b {
                o.push(x);
                if x == 0 {
                    o.push(0xFF);
                }
            }
            o.extend_from_slice(&[0, 0]);
            o
        }
        let cases: [&[u8]; 8] = [
            b"",
            b"\0",
            b"\0\0",
            b"a\0b\0\0c",
            b"\0abc",
            b"abc\0",
            b"plain text without zeros",
            &[0xFF, 0, 0xFF, 0, 1],
        ];
        for b in cases {
            assert_eq!(enc(ValueRef::Bytes(b)), reference(b), "{b:?}");
        }
    }

    /// Values that can only be visited: the key encoder's general path.
    struct VisitOnly<'a>(&'a [Value]);
    impl Values for VisitOnly<'_> {
        fn count(&self) -> usize {
            self.0.len()
        }
        fn visit(&self, f: &mut dyn FnMut(ValueRef<'_>) -> Result<()>) -> Result<()> {
            self.0.iter().try_for_each(|v| f(v.to_value_ref()))
        }
    }

    #[test]
    fn a_key_prefix_length_cuts_the_encoded_key_where_the_prefix_encodes() {
        let s = TableSchema::new("t")
            .column("a", ColumnType::Int)
            .column("b", ColumnType::Str(8))
            .column("c", ColumnType::Bytes(8))
            .column("d", ColumnType::Float)
            .primary_key_with(&["a", "b", "c", "d"], IndexKind::Ordered)
            .build()
            .unwrap();
        let key = [
            Value::Int(-3),
            Value::from("x\0\0y"),
            Value::Bytes(vec![0, 0xFF, 0]),
            Value::Float(2.5),
        ];
        let mut full = Vec::new();
        s.encode_key_prefix(0, &key[..], &mut full).unwrap();
        for n in 0..=4 {
            let mut prefix = Vec::new();
            s.encode_key_prefix(0, &key[..n], &mut prefix).unwrap();
            assert_eq!(s.key_prefix_len(0, &full, n), Some(prefix.len()), "{n}");
        }
        // Cut short inside the string, or past the key's columns: no length.
        assert_eq!(s.key_prefix_len(0, &full[..10], 2), None);
        assert_eq!(s.key_prefix_len(0, &full, 5), None);
    }

    #[test]
    fn indexed_and_visited_keys_encode_alike() {
        let s = TableSchema::new("t")
            .column("a", ColumnType::Int)
            .column("b", ColumnType::Str(8))
            .column("c", ColumnType::Float)
            .primary_key_with(&["a", "b", "c"], IndexKind::Ordered)
            .build()
            .unwrap();
        let keys: [&[Value]; 4] = [
            &[Value::Int(-3), Value::from("x\0y"), Value::Float(1.5)],
            // An INT given for the FLOAT column is coerced on both paths.
            &[Value::Int(7), Value::from(""), Value::Int(2)],
            &[Value::Int(i64::MAX)],
            &[Value::Int(0), Value::from("ab")],
        ];
        for k in keys {
            let (mut a, mut b, mut c) = (Vec::new(), Vec::new(), Vec::new());
            let na = s.encode_key_prefix(0, &k, &mut a).unwrap();
            let nb = s.encode_key_prefix(0, &VisitOnly(k), &mut b).unwrap();
            assert_eq!((na, &a), (nb, &b), "{k:?}");
            assert_eq!(na, k.len());
            if k.len() == 3 {
                s.encode_key_values(0, &k.to_vec(), &mut c).unwrap();
                assert_eq!(c, a);
            }
        }
        // A type that does not fit is refused on both paths.
        let bad = [Value::from("no"), Value::from("x")];
        let mut o = Vec::new();
        assert!(matches!(
            s.encode_key_prefix(0, &bad.as_slice(), &mut o),
            Err(Error::TypeMismatch { .. })
        ));
        assert!(matches!(
            s.encode_key_prefix(0, &VisitOnly(&bad), &mut o),
            Err(Error::TypeMismatch { .. })
        ));
        // The tuple form agrees with the slice form.
        let mut t = Vec::new();
        s.encode_key_prefix(0, &(4i64, "q", 0.25f64), &mut t)
            .unwrap();
        s.encode_key_prefix(
            0,
            &[Value::Int(4), Value::from("q"), Value::Float(0.25)].as_slice(),
            &mut o,
        )
        .unwrap();
        assert_eq!(t, o);
    }

    #[test]
    fn all_int_keys_encode_as_the_general_path_does() {
        // Every key column INT: `encode_key_prefix` takes its fast path for indexable values;
        // `VisitOnly` always takes the general one.
        let s = TableSchema::new("t")
            .column("a", ColumnType::Int)
            .column("b", ColumnType::Int)
            .column("c", ColumnType::Int)
            .column("v", ColumnType::Str(4))
            .primary_key_with(&["a", "b", "c"], IndexKind::Ordered)
            .build()
            .unwrap();
        let keys: [&[Value]; 6] = [
            &[Value::Int(-3), Value::Int(0), Value::Int(i64::MIN)],
            &[Value::Int(i64::MAX), Value::Int(1)],
            &[Value::Int(5)],
            &[],
            // A FLOAT for an INT column is refused, wherever it comes.
            &[Value::Int(1), Value::Float(2.0)],
            &[Value::Float(2.0), Value::Int(1)],
        ];
        for k in keys {
            let (mut a, mut b) = (vec![9u8; 3], vec![7u8; 5]);
            let fast = s.encode_key_prefix(0, &k, &mut a).map(|n| (n, a));
            let general = s
                .encode_key_prefix(0, &VisitOnly(k), &mut b)
                .map(|n| (n, b));
            match (fast, general) {
                (Ok(x), Ok(y)) => assert_eq!(x, y, "{k:?}"),
                (Err(Error::TypeMismatch { .. }), Err(Error::TypeMismatch { .. })) => {}
                (x, y) => panic!("{k:?}: fast {x:?}, general {y:?}"),
            }
        }
        let mut o = Vec::new();
        assert_eq!(
            s.encode_key_prefix(0, &[Value::Int(1), Value::Int(2)].as_slice(), &mut o)
                .unwrap(),
            2
        );
        assert_eq!(o.len(), 16);
        // More values than key columns: refused before either path.
        let four = [Value::Int(1), Value::Int(2), Value::Int(3), Value::Int(4)];
        assert!(matches!(
            s.encode_key_prefix(0, &four.as_slice(), &mut o),
            Err(Error::KeyArity { .. })
        ));
    }

    #[test]
    fn schema_errors_are_typed() {
        let e = TableSchema::new("t")
            .column("a", ColumnType::Int)
            .build()
            .unwrap_err();
        assert!(matches!(e, Error::InvalidSchema(_)));
        let e = TableSchema::new("t")
            .column("a", ColumnType::Int)
            .primary_key(&["b"])
            .build()
            .unwrap_err();
        assert_eq!(
            e,
            Error::UnknownColumn {
                table: "t".into(),
                column: "b".into()
            }
        );
        let e = TableSchema::new("t")
            .column("a", ColumnType::Int)
            .column("a", ColumnType::Int)
            .primary_key(&["a"])
            .build()
            .unwrap_err();
        assert!(matches!(e, Error::InvalidSchema(_)));
        let e = TableSchema::new("t")
            .column("a", ColumnType::Str(70000))
            .primary_key(&["a"])
            .build()
            .unwrap_err();
        assert!(matches!(e, Error::InvalidSchema(_)));
    }

    #[test]
    fn row_roundtrip_and_checks() {
        let s = TableSchema::new("t")
            .column("id", ColumnType::Int)
            .column("x", ColumnType::Float)
            .column("name", ColumnType::Str(4))
            .primary_key(&["id"])
            .build()
            .unwrap();
        let mut row = vec![0u8; s.row_size()];
        s.encode_row(
            &[Value::Int(1), Value::Float(2.5), Value::from("abc")].as_slice(),
            &mut row,
        )
        .unwrap();
        assert_eq!(s.read_column(&row, 0), ValueRef::Int(1));
        assert_eq!(s.read_column(&row, 1), ValueRef::Float(2.5));
        assert_eq!(s.read_column(&row, 2), ValueRef::Str("abc"));
        let e = s
            .write_column(&mut row, 2, ValueRef::Str("abcde"))
            .unwrap_err();
        assert_eq!(
            e,
            Error::ValueTooLong {
                table: "t".into(),
                column: "name".into(),
                max_len: 4,
                len: 5
            }
        );
        let e = s.write_column(&mut row, 0, ValueRef::Str("x")).unwrap_err();
        assert!(matches!(e, Error::TypeMismatch { .. }));
        let e = s
            .encode_row(&[Value::Int(1)].as_slice(), &mut row)
            .unwrap_err();
        assert_eq!(
            e,
            Error::RowArity {
                table: "t".into(),
                expected: 3,
                found: 1
            }
        );
    }
}
