//! Values: owned (`Value`), borrowed (`ValueRef`), and the `Values` trait through which keys
//! and rows are passed without allocating (a single value, a tuple, a slice or a vector).

use crate::error::{Error, Result};
use crate::schema::TableSchema;
use std::fmt;

/// An owned column value.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// A 64-bit integer (`ColumnType::Int`; SQL `INT`/`BIGINT`).
    Int(i64),
    /// A `DOUBLE` (the name SQL and error messages use; `ColumnType::Float`).
    Float(f64),
    /// A UTF-8 string (`ColumnType::Str`; SQL `VARCHAR`/`TEXT`).
    Str(String),
    /// A byte string (`ColumnType::Bytes`).
    Bytes(Vec<u8>),
}

/// A borrowed column value.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ValueRef<'a> {
    /// A 64-bit integer.
    Int(i64),
    /// A `DOUBLE`.
    Float(f64),
    /// A borrowed UTF-8 string.
    Str(&'a str),
    /// A borrowed byte string.
    Bytes(&'a [u8]),
}

impl ValueRef<'_> {
    pub(crate) fn type_name(self) -> &'static str {
        match self {
            ValueRef::Int(_) => "INT",
            ValueRef::Float(_) => "DOUBLE",
            ValueRef::Str(_) => "VARCHAR",
            ValueRef::Bytes(_) => "BYTES",
        }
    }
    /// Copies into an owned value.
    pub fn to_value(self) -> Value {
        match self {
            ValueRef::Int(i) => Value::Int(i),
            ValueRef::Float(f) => Value::Float(f),
            ValueRef::Str(s) => Value::Str(s.to_string()),
            ValueRef::Bytes(b) => Value::Bytes(b.to_vec()),
        }
    }
}

impl fmt::Display for ValueRef<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ValueRef::Int(i) => write!(f, "{i}"),
            ValueRef::Float(x) => write!(f, "{x}"),
            ValueRef::Str(s) => write!(f, "{s:?}"),
            ValueRef::Bytes(b) => write!(
                f,
                "x'{}'",
                b.iter().map(|x| format!("{x:02x}")).collect::<String>()
            ),
        }
    }
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.as_ref().fmt(f)
    }
}

impl Value {
    /// Borrows the value.
    pub fn as_ref(&self) -> ValueRef<'_> {
        match self {
            Value::Int(i) => ValueRef::Int(*i),
            Value::Float(f) => ValueRef::Float(*f),
            Value::Str(s) => ValueRef::Str(s),
            Value::Bytes(b) => ValueRef::Bytes(b),
        }
    }
    /// The integer, if this is an `Int`.
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Value::Int(i) => Some(*i),
            _ => None,
        }
    }
    /// The float, if this is a `Float`.
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Value::Float(f) => Some(*f),
            _ => None,
        }
    }
    /// The string, if this is a `Str`.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }
}

impl From<i64> for Value {
    fn from(v: i64) -> Self {
        Value::Int(v)
    }
}
impl From<f64> for Value {
    fn from(v: f64) -> Self {
        Value::Float(v)
    }
}
impl From<&str> for Value {
    fn from(v: &str) -> Self {
        Value::Str(v.to_string())
    }
}
impl From<String> for Value {
    fn from(v: String) -> Self {
        Value::Str(v)
    }
}
impl From<Vec<u8>> for Value {
    fn from(v: Vec<u8>) -> Self {
        Value::Bytes(v)
    }
}

/// Anything that can be viewed as one column value.
pub trait ToValueRef {
    /// Borrows `self` as a column value.
    fn to_value_ref(&self) -> ValueRef<'_>;
}

impl ToValueRef for i64 {
    fn to_value_ref(&self) -> ValueRef<'_> {
        ValueRef::Int(*self)
    }
}
impl ToValueRef for i32 {
    fn to_value_ref(&self) -> ValueRef<'_> {
        ValueRef::Int(i64::from(*self))
    }
}
impl ToValueRef for u32 {
    fn to_value_ref(&self) -> ValueRef<'_> {
        ValueRef::Int(i64::from(*self))
    }
}
impl ToValueRef for f64 {
    fn to_value_ref(&self) -> ValueRef<'_> {
        ValueRef::Float(*self)
    }
}
impl ToValueRef for str {
    fn to_value_ref(&self) -> ValueRef<'_> {
        ValueRef::Str(self)
    }
}
impl ToValueRef for String {
    fn to_value_ref(&self) -> ValueRef<'_> {
        ValueRef::Str(self)
    }
}
impl ToValueRef for [u8] {
    fn to_value_ref(&self) -> ValueRef<'_> {
        ValueRef::Bytes(self)
    }
}
impl ToValueRef for Vec<u8> {
    fn to_value_ref(&self) -> ValueRef<'_> {
        ValueRef::Bytes(self)
    }
}
impl ToValueRef for Value {
    fn to_value_ref(&self) -> ValueRef<'_> {
        self.as_ref()
    }
}
impl ToValueRef for ValueRef<'_> {
    fn to_value_ref(&self) -> ValueRef<'_> {
        *self
    }
}
impl<T: ToValueRef + ?Sized> ToValueRef for &T {
    fn to_value_ref(&self) -> ValueRef<'_> {
        (**self).to_value_ref()
    }
}

/// A sequence of values: a key (one value per key column) or a row (one per column).
/// Implemented for single values, tuples of up to six values, slices, arrays and vectors.
pub trait Values {
    /// Number of values.
    fn count(&self) -> usize;
    /// Calls `f` on each value in order, stopping at the first error.
    fn visit(&self, f: &mut dyn FnMut(ValueRef<'_>) -> Result<()>) -> Result<()>;
    /// The value, if this is exactly one value (lets single-column keys skip `visit`).
    #[inline]
    fn single(&self) -> Option<ValueRef<'_>> {
        None
    }
    /// Value `i` (`i < count()`), where the values can be indexed: lets key encoding loop
    /// over them without a callback per value. `None` (the default) means "use `visit`".
    #[inline]
    fn at(&self, i: usize) -> Option<ValueRef<'_>> {
        let _ = i;
        None
    }
    /// The values already in the index's byte encoding, all INT (`schema::encode_int` each):
    /// lets a compiled procedure's point key skip building values and encoding them again.
    /// Sealed: only the crate's own implementations can give bytes (`sealed::Token` cannot
    /// be named outside it), and key encoding takes them only for an all-INT index of that
    /// width; every other case goes through `at`/`visit`, which must give the same INTs.
    #[doc(hidden)]
    #[inline]
    fn encoded(&self, _: sealed::Token) -> Option<&[u8]> {
        None
    }
}

/// Seals `Values::encoded` (module `value`'s docs above it).
pub(crate) mod sealed {
    /// Names no value outside the crate, so no outside implementation can override
    /// `Values::encoded`.
    #[derive(Clone, Copy)]
    pub struct Token;
}

macro_rules! single_values {
    ($($t:ty),*) => {$(
        impl Values for $t {
            fn count(&self) -> usize { 1 }
            fn visit(&self, f: &mut dyn FnMut(ValueRef<'_>) -> Result<()>) -> Result<()> {
                f(self.to_value_ref())
            }
            #[inline]
            fn single(&self) -> Option<ValueRef<'_>> {
                Some(self.to_value_ref())
            }
        }
    )*};
}
single_values!(i64, i32, u32, f64, str, String, Value);
impl Values for &str {
    fn count(&self) -> usize {
        1
    }
    fn visit(&self, f: &mut dyn FnMut(ValueRef<'_>) -> Result<()>) -> Result<()> {
        f(ValueRef::Str(self))
    }
    #[inline]
    fn single(&self) -> Option<ValueRef<'_>> {
        Some(ValueRef::Str(self))
    }
}

/// The value of a one-element slice (the single-value key path).
#[inline]
fn one<T: ToValueRef>(s: &[T]) -> Option<ValueRef<'_>> {
    match s {
        [v] => Some(v.to_value_ref()),
        _ => None,
    }
}

impl<T: ToValueRef> Values for [T] {
    fn count(&self) -> usize {
        self.len()
    }
    fn visit(&self, f: &mut dyn FnMut(ValueRef<'_>) -> Result<()>) -> Result<()> {
        self.iter().try_for_each(|v| f(v.to_value_ref()))
    }
    #[inline]
    fn single(&self) -> Option<ValueRef<'_>> {
        one(self)
    }
    #[inline]
    fn at(&self, i: usize) -> Option<ValueRef<'_>> {
        self.get(i).map(|v| v.to_value_ref())
    }
}
impl<T: ToValueRef> Values for &[T] {
    fn count(&self) -> usize {
        self.len()
    }
    fn visit(&self, f: &mut dyn FnMut(ValueRef<'_>) -> Result<()>) -> Result<()> {
        self.iter().try_for_each(|v| f(v.to_value_ref()))
    }
    #[inline]
    fn single(&self) -> Option<ValueRef<'_>> {
        one(self)
    }
    #[inline]
    fn at(&self, i: usize) -> Option<ValueRef<'_>> {
        self.get(i).map(|v| v.to_value_ref())
    }
}
impl<T: ToValueRef, const N: usize> Values for [T; N] {
    fn count(&self) -> usize {
        N
    }
    fn visit(&self, f: &mut dyn FnMut(ValueRef<'_>) -> Result<()>) -> Result<()> {
        self.iter().try_for_each(|v| f(v.to_value_ref()))
    }
    #[inline]
    fn at(&self, i: usize) -> Option<ValueRef<'_>> {
        self.get(i).map(|v| v.to_value_ref())
    }
}
impl<T: ToValueRef> Values for Vec<T> {
    fn count(&self) -> usize {
        self.len()
    }
    fn visit(&self, f: &mut dyn FnMut(ValueRef<'_>) -> Result<()>) -> Result<()> {
        self.iter().try_for_each(|v| f(v.to_value_ref()))
    }
    #[inline]
    fn single(&self) -> Option<ValueRef<'_>> {
        one(self)
    }
    #[inline]
    fn at(&self, i: usize) -> Option<ValueRef<'_>> {
        self.get(i).map(|v| v.to_value_ref())
    }
}

macro_rules! tuple_values {
    ($n:expr; $($name:ident . $idx:tt),+) => {
        impl<$($name: ToValueRef),+> Values for ($($name,)+) {
            fn count(&self) -> usize { $n }
            fn visit(&self, f: &mut dyn FnMut(ValueRef<'_>) -> Result<()>) -> Result<()> {
                $( f(self.$idx.to_value_ref())?; )+
                Ok(())
            }
            #[inline]
            fn at(&self, i: usize) -> Option<ValueRef<'_>> {
                match i {
                    $( $idx => Some(self.$idx.to_value_ref()), )+
                    _ => None,
                }
            }
        }
    };
}
tuple_values!(1; A.0);
tuple_values!(2; A.0, B.1);
tuple_values!(3; A.0, B.1, C.2);
tuple_values!(4; A.0, B.1, C.2, D.3);
tuple_values!(5; A.0, B.1, C.2, D.3, E.4);
tuple_values!(6; A.0, B.1, C.2, D.3, E.4, F.5);

/// A borrowed view of a stored row, valid for the transaction that read it.
#[derive(Clone, Copy)]
pub struct RowRef<'a> {
    pub(crate) schema: &'a TableSchema,
    pub(crate) data: &'a [u8],
}

impl<'a> RowRef<'a> {
    /// Number of columns.
    pub fn len(&self) -> usize {
        self.schema.columns.len()
    }
    /// True for a table without columns (never: schemas need at least one).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Column `col` if it is an INT column (read without building a `ValueRef`).
    #[inline]
    pub(crate) fn int_at(&self, col: usize) -> Option<i64> {
        let c = self.schema.columns.get(col)?;
        if c.ty != crate::schema::ColumnType::Int {
            return None;
        }
        let b = self.data.get(c.offset..c.offset + 8)?;
        Some(i64::from_le_bytes(b.try_into().ok()?))
    }

    /// Column `col`, or `None` if out of range.
    #[inline]
    pub fn get(&self, col: usize) -> Option<ValueRef<'a>> {
        (col < self.len()).then(|| self.schema.read_column(self.data, col))
    }
    fn typed<T>(
        &self,
        col: usize,
        want: &str,
        f: impl FnOnce(ValueRef<'a>) -> Option<T>,
    ) -> Result<T> {
        let v = self.get(col).ok_or_else(|| Error::UnknownColumn {
            table: self.schema.name.clone(),
            column: format!("#{col}"),
        })?;
        f(v).ok_or_else(|| Error::TypeMismatch {
            table: self.schema.name.clone(),
            column: self.schema.columns[col].name.clone(),
            expected: want.to_string(),
            found: v.type_name().to_string(),
        })
    }
    /// Column `col` as an integer.
    pub fn i64(&self, col: usize) -> Result<i64> {
        self.typed(col, "INT", |v| {
            if let ValueRef::Int(i) = v {
                Some(i)
            } else {
                None
            }
        })
    }
    /// Column `col` as a float.
    pub fn f64(&self, col: usize) -> Result<f64> {
        self.typed(col, "DOUBLE", |v| {
            if let ValueRef::Float(x) = v {
                Some(x)
            } else {
                None
            }
        })
    }
    /// Column `col` as a string.
    pub fn str(&self, col: usize) -> Result<&'a str> {
        self.typed(col, "VARCHAR", |v| {
            if let ValueRef::Str(s) = v {
                Some(s)
            } else {
                None
            }
        })
    }
    /// Column `col` as bytes.
    pub fn bytes(&self, col: usize) -> Result<&'a [u8]> {
        self.typed(col, "BYTES", |v| match v {
            ValueRef::Bytes(b) => Some(b),
            ValueRef::Str(s) => Some(s.as_bytes()),
            _ => None,
        })
    }
    /// Copies the row into owned values.
    pub fn to_row(&self) -> Row {
        Row((0..self.len())
            .map(|c| self.schema.read_column(self.data, c).to_value())
            .collect())
    }
}

impl fmt::Debug for RowRef<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list()
            .entries((0..self.len()).map(|c| self.schema.read_column(self.data, c)))
            .finish()
    }
}

/// An owned row: one value per column, in column order.
#[derive(Clone, Debug, PartialEq)]
pub struct Row(pub Vec<Value>);

impl Row {
    /// Column `col`.
    pub fn get(&self, col: usize) -> Option<&Value> {
        self.0.get(col)
    }
}

impl std::ops::Index<usize> for Row {
    type Output = Value;
    fn index(&self, i: usize) -> &Value {
        &self.0[i]
    }
}

/// A mutable view of a new version's row data, for `Transaction::update_with`.
pub struct RowMut<'a> {
    pub(crate) schema: &'a TableSchema,
    pub(crate) data: &'a mut [u8],
}

impl RowMut<'_> {
    /// Current value of column `col`.
    pub fn get(&self, col: usize) -> Option<ValueRef<'_>> {
        (col < self.schema.columns.len()).then(|| self.schema.read_column(self.data, col))
    }
    /// Sets column `col` (type- and length-checked). Primary-key columns cannot be set.
    #[inline]
    pub fn set(&mut self, col: usize, v: impl ToValueRef) -> Result<()> {
        let v = v.to_value_ref();
        // An INT into an INT column (TPC-C's counters and balances), inline; anything else,
        // and every error, through `set_value`.
        if let (Some(c), ValueRef::Int(x)) = (self.schema.columns.get(col), v) {
            if c.ty == crate::schema::ColumnType::Int && !self.schema.is_pk_column(col) {
                if let Some(b) = self.data.get_mut(c.offset..c.offset + 8) {
                    b.copy_from_slice(&x.to_le_bytes());
                    return Ok(());
                }
            }
        }
        self.set_value(col, v)
    }

    fn set_value(&mut self, col: usize, v: ValueRef<'_>) -> Result<()> {
        if col >= self.schema.columns.len() {
            return Err(Error::UnknownColumn {
                table: self.schema.name.clone(),
                column: format!("#{col}"),
            });
        }
        if self.schema.is_pk_column(col) {
            return Err(Error::PrimaryKeyUpdate {
                table: self.schema.name.clone(),
                column: self.schema.columns[col].name.clone(),
            });
        }
        self.schema.write_column(self.data, col, v)
    }
    /// Read-only view of the row as modified so far.
    pub fn as_ref(&self) -> RowRef<'_> {
        RowRef {
            schema: self.schema,
            data: self.data,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::{ColumnType, TableSchema};

    /// `RowMut::set` writes an INT into an INT column inline; every other case, and every
    /// error, is the general path's.
    #[test]
    fn row_set_takes_ints_inline_and_refuses_what_the_general_path_refuses() {
        let s = TableSchema::new("t")
            .column("k", ColumnType::Int)
            .column("n", ColumnType::Int)
            .column("f", ColumnType::Float)
            .column("s", ColumnType::Str(4))
            .primary_key(&["k"])
            .build()
            .unwrap();
        let mut data = vec![0u8; s.row_size];
        let mut r = RowMut {
            schema: &s,
            data: &mut data,
        };
        r.set(1, -7i64).unwrap();
        assert_eq!(r.get(1), Some(ValueRef::Int(-7)));
        r.set(2, 3i64).unwrap();
        assert_eq!(r.get(2), Some(ValueRef::Float(3.0)));
        assert!(matches!(
            r.set(0, 1i64),
            Err(Error::PrimaryKeyUpdate { .. })
        ));
        assert!(matches!(r.set(3, 1i64), Err(Error::TypeMismatch { .. })));
        assert!(matches!(r.set(4, 1i64), Err(Error::UnknownColumn { .. })));
        assert!(matches!(r.set(1, "x"), Err(Error::TypeMismatch { .. })));
        // Nothing of the refused writes landed.
        assert_eq!(r.get(0), Some(ValueRef::Int(0)));
        assert_eq!(r.get(1), Some(ValueRef::Int(-7)));
    }
}
