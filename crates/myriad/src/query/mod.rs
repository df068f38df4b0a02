//! What SQL statements and stored procedures share below the SQL session: statement positions
//! and errors, expressions (`expr.rs`: compile and evaluate), the access-path planner
//! (`Access`, `visit_plan`), aggregates, the nesting bound that keeps parsing off the stack's
//! edge (`nesting.rs`), and statement cancellation (`cancel.rs`). `sql` (the session) and
//! `procedure` (stored procedures) both build on it; it imports neither.

pub(crate) mod cancel;
pub(crate) mod expr;
pub(crate) mod nesting;

use crate::error::{Error, Result};
use crate::schema::{ColumnType, IndexKind, TableSchema};
use crate::storage::TableRef;
use crate::txn::Transaction;
use crate::value::{RowRef, Value};
use expr::{compile_in, eval, eval_in, value_of, Op, Scope, Ty, E, V};
use sqlparser::ast::{self, Expr, ObjectName, Spanned};
use sqlparser::parser::ParserError;
use std::ops::Bound;

/// Maximum length of a `TEXT` column (the engine stores rows at a fixed width).
pub const TEXT_MAX_LEN: usize = 1024;

/// A position in the statement text (1-based; 0 when unknown).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SqlPos {
    /// The line, from 1.
    pub line: u64,
    /// The column, from 1.
    pub column: u64,
}

pub(crate) fn sql_error(at: SqlPos, message: String) -> Error {
    Error::Sql {
        line: at.line,
        column: at.column,
        message,
    }
}

pub(crate) fn at_span(s: sqlparser::tokenizer::Span) -> SqlPos {
    SqlPos {
        line: s.start.line,
        column: s.start.column,
    }
}

pub(crate) fn parse_error(e: ParserError) -> Error {
    let message = match e {
        ParserError::TokenizerError(m) | ParserError::ParserError(m) => m,
        ParserError::RecursionLimitExceeded => "statement nested too deeply".into(),
    };
    // sqlparser appends " at Line: L, Column: C".
    let mut at = SqlPos::default();
    let mut text = message.as_str();
    if let Some(i) = message.rfind(" at Line: ") {
        let tail = &message[i + " at Line: ".len()..];
        let mut parts = tail.split(", Column: ");
        if let (Some(l), Some(c)) = (parts.next(), parts.next()) {
            if let (Ok(l), Ok(c)) = (l.trim().parse(), c.trim().parse()) {
                at = SqlPos { line: l, column: c };
                text = &message[..i];
            }
        }
    }
    sql_error(at, text.to_string())
}

pub(crate) fn name_of(n: &ObjectName) -> Result<String> {
    match n.0.as_slice() {
        [ast::ObjectNamePart::Identifier(id)] => Ok(id.value.clone()),
        _ => Err(sql_error(
            at_span(n.span()),
            format!("qualified names are not supported: {n}"),
        )),
    }
}

pub(crate) fn column_type(t: &ast::DataType, at: SqlPos) -> Result<ColumnType> {
    use ast::DataType as D;
    Ok(match t {
        D::Int(_) | D::Integer(_) | D::BigInt(_) => ColumnType::Int,
        D::Double(_) | D::DoublePrecision | D::Real | D::Float(_) => ColumnType::Float,
        D::Varchar(Some(ast::CharacterLength::IntegerLength { length, .. })) => {
            if *length == 0 {
                return Err(sql_error(
                    at,
                    "VARCHAR(0): the length must be at least 1".into(),
                ));
            }
            ColumnType::Str(usize::try_from(*length).unwrap_or(usize::MAX))
        }
        D::Text => ColumnType::Str(TEXT_MAX_LEN),
        D::Varchar(_) => {
            return Err(sql_error(
                at,
                "VARCHAR needs a maximum length: VARCHAR(n)".into(),
            ))
        }
        other => return Err(sql_error(at, format!("type {other} is not supported"))),
    })
}

/// An integer stored into a DOUBLE column becomes a float.
pub(crate) fn coerce(s: &TableSchema, col: usize, v: Value) -> Value {
    match (s.columns()[col].ty, v) {
        (ColumnType::Float, Value::Int(i)) => Value::Float(i as f64),
        (_, v) => v,
    }
}

/// Compiles a `WHERE` condition, which must be boolean.
pub(crate) fn condition(e: &Expr, scope: Scope<'_>) -> Result<E> {
    let (c, ty) = compile_in(e, scope)?;
    if ty != Ty::Bool {
        return Err(sql_error(
            at_span(e.span()),
            format!("WHERE needs a boolean condition, found {}", ty.name()),
        ));
    }
    Ok(c)
}

/// How a statement reaches the rows its condition selects, decided once at compile time.
/// Key expressions do not read the row (literals, variables, parameters); their values are
/// computed when the statement runs.
#[derive(Clone, Debug)]
pub(crate) struct Access {
    pub filter: Option<E>,
    /// Equality on every primary-key column: a point lookup.
    pub point: Option<Vec<E>>,
    /// The condition says more than the key equalities (so a point update must read first).
    pub residual: bool,
    /// A range of an ordered index (the primary key or a B-tree secondary index).
    pub range: Option<KeyRange>,
    /// Equality on every column of a secondary index (position, key expressions): a lookup
    /// of that index, used when there is no point key.
    pub index: Option<(usize, Vec<E>)>,
}

impl Access {
    pub(crate) fn plan(filter: Option<E>, s: &TableSchema) -> Access {
        let mut a = Access {
            point: None,
            residual: false,
            range: None,
            index: None,
            filter: None,
        };
        if let Some(c) = &filter {
            let mut cs = Vec::new();
            conjuncts(c, &mut cs);
            a.point = point_key(&cs, s);
            a.residual = cs.len() > s.indexes()[0].columns.len();
            if a.point.is_none() {
                a.index = index_key(&cs, s);
                let at = match c {
                    E::Bin(_, Op::And, _, at) => *at,
                    _ => SqlPos::default(),
                };
                a.range = key_range(&cs, s, at);
            }
        }
        a.filter = filter;
        a
    }

    /// The point key's values, or `None` when one does not fit its column's type (then no
    /// row can match exactly... unless coercion applies, so the caller scans instead).
    pub(crate) fn point_values(
        &self,
        s: &TableSchema,
        vars: &[V],
        out: &mut Vec<Value>,
    ) -> Result<bool> {
        let Some(keys) = &self.point else {
            out.clear();
            return Ok(false);
        };
        // INT keys overwrite the buffer's INT values in place (building a `Value` and moving
        // it in stalls on store forwarding); anything else is pushed after a truncate.
        for (k, (e, &col)) in keys.iter().zip(&s.indexes()[0].columns).enumerate() {
            if s.columns()[col].ty == ColumnType::Int {
                if let Some(i) = expr::eval_int(e, None, vars) {
                    match out.get_mut(k) {
                        Some(Value::Int(x)) => *x = i,
                        _ => {
                            out.truncate(k);
                            out.push(Value::Int(i));
                        }
                    }
                    continue;
                }
            }
            out.truncate(k);
            match key_value(s, col, expr::value_of(e, None, vars)?) {
                Some(v) => out.push(v),
                None => return Ok(false),
            }
        }
        out.truncate(keys.len());
        Ok(true)
    }

    /// Does the (compiled) condition hold on `r`? `ranged`: `r` came from the key range,
    /// every bound a key, so only the conjuncts it does not decide are left
    /// (`KeyRange::rest`).
    pub(crate) fn passes(&self, r: RowRef<'_>, vars: &[V], ranged: bool) -> Result<bool> {
        match self.condition(ranged) {
            Some(c) => expr::holds(c, Some(r), vars),
            None => Ok(true),
        }
    }

    /// The condition a row must still pass: the range's `rest` if `ranged`, else the whole.
    pub(crate) fn condition(&self, ranged: bool) -> Option<&E> {
        match (&self.range, ranged) {
            (Some(r), true) => r.rest.as_ref(),
            _ => self.filter.as_ref(),
        }
    }

    /// A point lookup whose condition is exactly the key equalities (a found row matches).
    pub(crate) fn pure_point(&self) -> bool {
        self.point.is_some() && !self.residual
    }
}

/// A range scan of ordered index `index`: the condition fixes its first `prefix` columns by
/// equality and may bound the next one; `lo`/`hi` are key prefixes (the fixed values, plus
/// the bound when there is one), which the engine's scan accepts.
#[derive(Clone, Debug)]
pub(crate) struct KeyRange {
    pub index: usize,
    pub prefix: usize,
    pub lo: Bound<Vec<E>>,
    pub hi: Bound<Vec<E>>,
    /// The conjuncts of the condition the range does not decide (`None`: it decides them
    /// all), for rows the range scan returns when every bound value became a key: a row
    /// in the range holds exactly the prefix's values and lies within its column's bounds.
    /// Sound because no column holds NULL (the SQL front end refuses it): with NULLs, a
    /// NULL sorting inside a one-sided range would pass a comparison that is not true.
    pub rest: Option<E>,
}

impl Access {
    /// The ordered index whose order is `ORDER BY col` among the rows this plan selects: an
    /// index on `col` alone, or the range's index when `col` is the column right after the
    /// prefix its equalities fix (`WHERE w = 1 AND d = 2 ORDER BY o` on a key `(w, d, o)`).
    pub(crate) fn order_by_column(&self, s: &TableSchema, col: usize) -> Option<usize> {
        if let Some(r) = &self.range {
            if s.indexes()[r.index].columns.get(r.prefix) == Some(&col) {
                return Some(r.index);
            }
        }
        ordered_index(s, &[col])
    }
}

/// [`visit`] with a compiled access plan and the variables its expressions read; `key` is
/// a reusable buffer for the point key.
pub(crate) fn visit_plan(
    tx: &mut Transaction<'_>,
    t: &TableRef,
    a: &Access,
    vars: &[V],
    key: &mut Vec<Value>,
    order: Option<(usize, bool)>,
    f: &mut dyn FnMut(RowRef<'_>) -> Result<bool>,
) -> Result<()> {
    visit_plan_with(
        tx,
        t,
        a,
        &|r, vars, ranged| a.passes(r, vars, ranged),
        vars,
        key,
        order,
        f,
    )
}

/// Whether a row passes a plan's condition; the flag says it came from the exact key range
/// (`Access::passes`).
pub(crate) type Passes<'a> = dyn Fn(RowRef<'_>, &[V], bool) -> Result<bool> + 'a;

/// [`visit_plan`] with the condition decided by `passes` (a compiled procedure's own form
/// of `a.filter`, which must decide as `Access::passes` does, given the same `ranged`).
#[allow(clippy::too_many_arguments)]
pub(crate) fn visit_plan_with(
    tx: &mut Transaction<'_>,
    t: &TableRef,
    a: &Access,
    passes: &Passes<'_>,
    vars: &[V],
    key: &mut Vec<Value>,
    order: Option<(usize, bool)>,
    f: &mut dyn FnMut(RowRef<'_>) -> Result<bool>,
) -> Result<()> {
    if a.point_values(&t.schema, vars, key)? {
        tx.get_with(t, key.as_slice(), |r| -> Result<()> {
            if !a.residual || passes(r, vars, false)? {
                f(r)?;
            }
            Ok(())
        })?
        .transpose()?;
        return Ok(());
    }
    let mut err = Ok(());
    // Whether the rows come from the key range with every bound a key (set below).
    let ranged = std::cell::Cell::new(false);
    let mut each = |r: RowRef<'_>| match cancel::tick().and_then(|()| passes(r, vars, ranged.get()))
    {
        Ok(false) => true,
        Ok(true) => match f(r) {
            Ok(go) => go,
            Err(e) => {
                err = Err(e);
                false
            }
        },
        Err(e) => {
            err = Err(e);
            false
        }
    };
    if let (Some((i, keys)), None) = (&a.index, order) {
        let mut vals = KeyVals::new();
        for (e, &col) in keys.iter().zip(&t.schema.indexes()[*i].columns) {
            match key_value(&t.schema, col, expr::value_of(e, None, vars)?) {
                Some(v) => vals.push(v),
                None => break,
            }
        }
        if vals.len() == keys.len() {
            tx.get_by(t, *i, vals.as_slice(), each)?;
            return err;
        }
    }
    let range = match &a.range {
        Some(r) if order.is_none_or(|(i, _)| i == r.index) => {
            let cols = &t.schema.indexes()[r.index].columns;
            // Every bound value became a key (else the range is wider than the condition).
            let exact = std::cell::Cell::new(true);
            let bound = |b: &Bound<Vec<E>>| -> Result<Bound<KeyVals>> {
                let key = |es: &Vec<E>| -> Result<Option<KeyVals>> {
                    let mut k = KeyVals::new();
                    for (e, &col) in es.iter().zip(cols) {
                        match key_value(&t.schema, col, value_of(e, None, vars)?) {
                            Some(v) => k.push(v),
                            // A value that fits no key of the column: no bound from it (the
                            // condition still filters every row).
                            None => {
                                exact.set(false);
                                return Ok(None);
                            }
                        }
                    }
                    Ok(Some(k))
                };
                Ok(match b {
                    Bound::Included(es) => key(es)?.map_or(Bound::Unbounded, Bound::Included),
                    Bound::Excluded(es) => key(es)?.map_or(Bound::Unbounded, Bound::Excluded),
                    Bound::Unbounded => Bound::Unbounded,
                })
            };
            let (lo, hi) = (bound(&r.lo)?, bound(&r.hi)?);
            ranged.set(exact.get());
            Some((r.index, lo, hi))
        }
        _ => None,
    };
    if order.is_some() || range.is_some() {
        let (index, descending) = order.unwrap_or((0, false));
        // The key range bounds its index; another ordered index is scanned whole.
        let (index, lo, hi) = match range {
            Some(r) => r,
            None => (index, Bound::Unbounded, Bound::Unbounded),
        };
        let opts = crate::txn::ScanOptions {
            index,
            limit: None,
            descending,
        };
        tx.scan(t, as_slice(&lo), as_slice(&hi), opts, each)?;
    } else {
        tx.scan_table(t, &mut each)?;
    }
    err
}

/// The values of a key or key prefix a plan computes per run: inline up to four (every
/// TPC-C key), so that a range scan allocates nothing for its bounds.
type KeyVals = smallvec::SmallVec<[Value; 4]>;

/// A key-prefix bound as the engine's key type.
fn as_slice(b: &Bound<KeyVals>) -> Bound<&[Value]> {
    match b {
        Bound::Included(v) => Bound::Included(v.as_slice()),
        Bound::Excluded(v) => Bound::Excluded(v.as_slice()),
        Bound::Unbounded => Bound::Unbounded,
    }
}

/// The top-level AND-ed parts of a condition.
fn conjuncts<'a>(e: &'a E, out: &mut Vec<&'a E>) {
    match e {
        E::Bin(l, Op::And, r, _) => {
            conjuncts(l, out);
            conjuncts(r, out);
        }
        e => out.push(e),
    }
}

/// Does `e` read no column (so it can be computed before the row is found)?
fn row_free(e: &E) -> bool {
    match e {
        E::Col(_) => false,
        E::Lit(_) | E::Bool(_) | E::Var(_) | E::Len(_) | E::ElemVar(..) => true,
        E::Append(_, x) | E::AnyEq(x, _) => row_free(x),
        E::Elem(_, x, _) | E::Neg(x) | E::Not(x) => row_free(x),
        E::Concat(l, r) | E::Bin(l, _, r, _) => row_free(l) && row_free(r),
        E::Substr(a, b, c) => row_free(a) && row_free(b) && c.as_deref().is_none_or(row_free),
    }
}

/// `v` as a key value of column `col`, if its type fits (an INT fits a DOUBLE key, an
/// integral DOUBLE an INT key).
fn key_value(s: &TableSchema, col: usize, v: V) -> Option<Value> {
    match (s.columns()[col].ty, v) {
        (ColumnType::Int, V::Val(v @ Value::Int(_)))
        | (ColumnType::Float, V::Val(v @ Value::Float(_)))
        | (ColumnType::Str(_), V::Val(v @ Value::Str(_))) => Some(v),
        (ColumnType::Float, V::Val(Value::Int(i))) => Some(Value::Float(i as f64)),
        (ColumnType::Int, V::Val(Value::Float(f))) if f.fract() == 0.0 && f.abs() < 9.0e18 => {
            Some(Value::Int(f as i64))
        }
        _ => None,
    }
}

/// The `(column, expression)` pairs of the condition's top-level `col = x` conjuncts, `x`
/// not reading the row (PACMAN's key-space granularity: which key columns an operation fixes).
pub(crate) fn equalities(filter: &E) -> Vec<(usize, &E)> {
    let mut cs = Vec::new();
    conjuncts(filter, &mut cs);
    cs.into_iter().filter_map(equality).collect()
}

/// `(col, e)` if `e` is `col = x` or `x = col` with `x` not reading the row.
fn equality(e: &E) -> Option<(usize, &E)> {
    match e {
        E::Bin(l, Op::Eq, r, _) => match (l.as_ref(), r.as_ref()) {
            (E::Col(c), x) | (x, E::Col(c)) if row_free(x) => Some((*c, x)),
            _ => None,
        },
        _ => None,
    }
}

/// The key expressions of index `i`, if the condition's top-level conjuncts fix every one
/// of its columns by equality.
fn index_equalities(cs: &[&E], s: &TableSchema, i: usize) -> Option<Vec<E>> {
    s.indexes()[i]
        .columns
        .iter()
        .map(|&col| {
            cs.iter().find_map(|e| match equality(e) {
                Some((c, x)) if c == col => Some(x.clone()),
                _ => None,
            })
        })
        .collect()
}

/// The primary-key expressions, if the conjuncts fix every key column by equality.
fn point_key(cs: &[&E], s: &TableSchema) -> Option<Vec<E>> {
    index_equalities(cs, s, 0)
}

/// A secondary index whose every column the conjuncts fix by equality (unique indexes
/// first), with the key expressions in the index's column order.
fn index_key(cs: &[&E], s: &TableSchema) -> Option<(usize, Vec<E>)> {
    let mut order: Vec<usize> = (1..s.indexes().len()).collect();
    order.sort_by_key(|&i| !s.indexes()[i].unique);
    order
        .into_iter()
        .find_map(|i| index_equalities(cs, s, i).map(|k| (i, k)))
}

/// The best range of an ordered index implied by the condition's top-level conjuncts: the
/// index (primary key first on a tie) whose leading columns the most equalities fix, the next
/// column's bounds (`k > 3 AND k <= 9`, either side) counting too; `None` if no ordered index
/// has a fixed or bounded first column. Any implied range is sound: the full condition is
/// still applied to every row it yields.
fn key_range(cs: &[&E], s: &TableSchema, at: SqlPos) -> Option<KeyRange> {
    let mut best: Option<(usize, KeyRange)> = None;
    for (i, def) in s.indexes().iter().enumerate() {
        // A hash index (primary or secondary) cannot scan a range.
        if def.kind != IndexKind::Ordered {
            continue;
        }
        let mut prefix = Vec::new();
        // Positions in `cs` of the conjuncts the range decides.
        let mut decided = Vec::new();
        for &col in &def.columns {
            match cs
                .iter()
                .enumerate()
                .find_map(|(j, e)| equality(e).filter(|(c, _)| *c == col).map(|(_, x)| (j, x)))
            {
                Some((j, x)) => {
                    decided.push(j);
                    prefix.push(x.clone());
                }
                None => break,
            }
        }
        let k = prefix.len();
        let (lo, hi) = match def.columns.get(k) {
            Some(&col) => column_bounds(cs, col),
            None => (None, None),
        };
        decided.extend(lo.iter().chain(&hi).map(|b| b.2));
        let score = 2 * k + usize::from(lo.is_some() || hi.is_some());
        if score == 0 || best.as_ref().is_some_and(|(b, _)| *b >= score) {
            continue;
        }
        let with = |b: Option<(bool, E, usize)>| match b {
            Some((inclusive, x, _)) => {
                let mut key = prefix.clone();
                key.push(x);
                if inclusive {
                    Bound::Included(key)
                } else {
                    Bound::Excluded(key)
                }
            }
            None if k > 0 => Bound::Included(prefix.clone()),
            None => Bound::Unbounded,
        };
        let range = KeyRange {
            index: i,
            prefix: k,
            lo: with(lo),
            hi: with(hi),
            rest: and_all(
                cs.iter()
                    .enumerate()
                    .filter(|(j, _)| !decided.contains(j))
                    .map(|(_, e)| (*e).clone()),
                at,
            ),
        };
        best = Some((score, range));
    }
    best.map(|(_, r)| r)
}

/// `parts` joined by AND (`None`: no part), `at` the position of each AND.
fn and_all(parts: impl Iterator<Item = E>, at: SqlPos) -> Option<E> {
    parts.reduce(|l, r| E::Bin(Box::new(l), Op::And, Box::new(r), at))
}

/// The first lower and upper bound the conjuncts put on column `col`, each as
/// (inclusive, bound expression, position of the conjunct).
type ColBound = Option<(bool, E, usize)>;
fn column_bounds(cs: &[&E], col: usize) -> (ColBound, ColBound) {
    let (mut lo, mut hi) = (None, None);
    for (j, e) in cs.iter().enumerate() {
        let E::Bin(l, op, r, _) = e else { continue };
        // Normalise to `col op x`.
        let (op, v) = match (l.as_ref(), r.as_ref()) {
            (E::Col(c), x) if *c == col && row_free(x) => (*op, x),
            (x, E::Col(c)) if *c == col && row_free(x) => match op {
                Op::Lt => (Op::Gt, x),
                Op::Le => (Op::Ge, x),
                Op::Gt => (Op::Lt, x),
                Op::Ge => (Op::Le, x),
                o => (*o, x),
            },
            _ => continue,
        };
        match op {
            Op::Gt if lo.is_none() => lo = Some((false, v.clone(), j)),
            Op::Ge if lo.is_none() => lo = Some((true, v.clone(), j)),
            Op::Lt if hi.is_none() => hi = Some((false, v.clone(), j)),
            Op::Le if hi.is_none() => hi = Some((true, v.clone(), j)),
            _ => {}
        }
    }
    (lo, hi)
}

/// The first B-tree index (primary key first) on exactly `cols`.
pub(crate) fn ordered_index(s: &TableSchema, cols: &[usize]) -> Option<usize> {
    s.indexes()
        .iter()
        .enumerate()
        .find(|(_, d)| d.columns == cols && d.kind == IndexKind::Ordered)
        .map(|(i, _)| i)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AggKind {
    Count,
    Sum,
    Min,
    Max,
}

/// One compiled aggregate of a select list.
#[derive(Clone, Debug)]
pub(crate) struct Agg {
    pub kind: AggKind,
    /// `None` for `count(*)`.
    pub arg: Option<E>,
    pub ty: Ty,
    pub at: SqlPos,
}

impl Agg {
    /// `Some` if `e` is an aggregate call (`count/sum/min/max`), compiled in `scope`.
    pub(crate) fn compile(e: &Expr, scope: Scope<'_>) -> Result<Option<Agg>> {
        let at = at_span(e.span());
        let Expr::Function(f) = e else {
            return Ok(None);
        };
        let fname = name_of(&f.name)?.to_ascii_lowercase();
        let kind = match fname.as_str() {
            "count" => AggKind::Count,
            "sum" => AggKind::Sum,
            "min" => AggKind::Min,
            "max" => AggKind::Max,
            _ => return Ok(None),
        };
        let ast::FunctionArguments::List(list) = &f.args else {
            return Err(sql_error(at, format!("{fname} takes one argument")));
        };
        if f.filter.is_some()
            || f.over.is_some()
            || list.duplicate_treatment.is_some()
            || !list.clauses.is_empty()
        {
            return Err(sql_error(
                at,
                format!("{fname} with DISTINCT, FILTER or OVER is not supported"),
            ));
        }
        let arg = match list.args.as_slice() {
            [ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Wildcard)]
                if kind == AggKind::Count =>
            {
                None
            }
            [ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(x))] => {
                let (c, ty) = compile_in(x, scope)?;
                if !matches!(ty, Ty::Int | Ty::Float | Ty::Str)
                    || (kind == AggKind::Sum && ty == Ty::Str)
                {
                    return Err(sql_error(
                        at,
                        format!("{fname} of {} is not supported", ty.name()),
                    ));
                }
                Some((c, ty))
            }
            _ => return Err(sql_error(at, format!("{fname} takes one argument"))),
        };
        let ty = match (&arg, kind) {
            (Some((_, ty)), AggKind::Sum | AggKind::Min | AggKind::Max) => *ty,
            _ => Ty::Int,
        };
        Ok(Some(Agg {
            kind,
            arg: arg.map(|a| a.0),
            ty,
            at,
        }))
    }

    /// Folds row `r` into the running value `acc`.
    pub(crate) fn add(&self, acc: &mut Option<Value>, r: RowRef<'_>, vars: &[V]) -> Result<()> {
        let v = match &self.arg {
            Some(e) => eval_in(e, Some(r), vars)?.stored(self.at)?,
            None => Value::Int(0),
        };
        *acc = Some(match (acc.take(), self.kind) {
            (None, AggKind::Count) => Value::Int(1),
            (Some(Value::Int(n)), AggKind::Count) => Value::Int(n + 1),
            (Some(a), AggKind::Count) => a,
            (None, _) => v,
            (Some(a), AggKind::Sum) => eval(
                &E::Bin(Box::new(E::Lit(a)), Op::Add, Box::new(E::Lit(v)), self.at),
                None,
            )?
            .stored(self.at)?,
            (Some(a), AggKind::Min | AggKind::Max) => {
                let less = eval(
                    &E::Bin(
                        Box::new(E::Lit(v.clone())),
                        Op::Lt,
                        Box::new(E::Lit(a.clone())),
                        self.at,
                    ),
                    None,
                )? == V::Bool(true);
                if less == (self.kind == AggKind::Min) {
                    v
                } else {
                    a
                }
            }
        });
        Ok(())
    }

    /// The aggregate's result; `what` names it in the error for sum/min/max over no rows.
    pub(crate) fn finish(&self, acc: Option<Value>, what: &str) -> Result<Value> {
        match (self.kind, acc) {
            (AggKind::Count, v) => Ok(v.unwrap_or(Value::Int(0))),
            (_, Some(v)) => Ok(v),
            (_, None) => Err(sql_error(
                self.at,
                format!("{what} over no rows is NULL, and NULL is not supported yet"),
            )),
        }
    }
}
