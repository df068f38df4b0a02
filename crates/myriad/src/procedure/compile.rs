//! Closure compilation: a procedure's IR turned once into a tree of boxed Rust closures.
//!
//! Every statement becomes a closure over the call's [`Frame`] with its constants, slot
//! numbers, slot types, table handles, column positions and access path (point key by
//! `i64`, point key by values, key range, scan) fixed when the procedure is created: at run
//! time nothing matches on the kind of an IR node to find out what to do next. INT
//! expressions, conditions over INT values (what keys, counters, loop bounds, `IF`s and scan
//! conditions are made of) and point keys become closures too, each node calling its
//! children's closures directly (a leaf operation such as `x + 1` is one closure).
//! A closure that cannot finish on its typed path (a value that is not an INT, an overflow,
//! an array index out of range) hands the statement or expression to the same code the
//! interpreter uses at that point (`Access::point_values`, `visit_plan_with`, `expr::eval_in`),
//! so results and error messages are the interpreter's by construction; text and DOUBLE
//! expressions are evaluated that way too (`eval_in` on the expression, captured once).
//!
//! The interpreter (`exec.rs`) stays the reference: `Config::procedures(Interpreted)` (CLI
//! `--procedures interpreted`) runs it instead, a test runs every procedure of the
//! interpreter tests and of the shipped workloads both ways and compares results, errors and
//! the database. Serial replay of logged calls (`command::Replayer`) runs the compiled form
//! as the call did; PACMAN's pieces (`Proc::run_slice`) are interpreted.
//! A procedure with a form this compiler does not take (today only `FOR r IN SELECT` over
//! aggregates, an error at run time either way) is interpreted as a whole, never half
//! compiled ([`Procedure::is_compiled`](super::Procedure::is_compiled) says which).
//!
//! A JIT to machine code (Cranelift) was left out: it would add a large dependency to the
//! engine's build for what is mostly calls into the storage engine; closures keep the
//! statement logic in Rust and remove the dispatch.

use super::exec::{
    assign, fit, keys_of, point_found, set_int, warm, warm_iters, warm_rows, Flow, Frame, Step,
};
use super::ir::{Items, Prefetch, Proc, Read, Stmt, PREFETCH_MAX};
use crate::error::Error;
use crate::query::expr::{eval_in, int_any, int_elem, int_len, test, Op, Ty, E, V};
use crate::query::{coerce, visit_plan_with, Access, Agg, SqlPos};
use crate::schema::ColumnType;
use crate::storage::TableRef;
use crate::txn::Transaction;
use crate::value::{RowRef, ToValueRef, Value, ValueRef, Values};

/// A compiled statement.
type Run = Box<dyn Fn(&mut Transaction<'_>, &mut Frame) -> Step + Send + Sync>;
/// An INT expression's typed path: `None` when the value is not an INT or an operation
/// fails (the general evaluator then gives the value or the error).
type Int = Box<dyn Fn(Option<&RowRef<'_>>, &[V]) -> Option<i64> + Send + Sync>;
/// Any expression's value.
type Val = Box<dyn Fn(Option<RowRef<'_>>, &[V]) -> crate::error::Result<V> + Send + Sync>;
/// A condition's typed path (`None`: ask the general evaluator).
type Cond = Box<dyn Fn(Option<&RowRef<'_>>, &[V]) -> Option<bool> + Send + Sync>;
/// A read's condition on a row, as `Access::passes` decides it.
type Filter = Box<dyn Fn(RowRef<'_>, &[V], bool) -> crate::error::Result<bool> + Send + Sync>;
/// A condition on one row.
type RowCond = Box<dyn Fn(RowRef<'_>, &[V]) -> crate::error::Result<bool> + Send + Sync>;
/// A condition's truth (typed path, else the general evaluator).
type Holds = Box<dyn Fn(&[V]) -> crate::error::Result<bool> + Send + Sync>;
/// The rows of a read: calls its third argument with each row's item values until it
/// returns false. The callee may take the values (a loop moves them into its buffer rather
/// than cloning each one); what it leaves is cleared before the next row.
type Rows = Box<
    dyn Fn(
            &mut Transaction<'_>,
            &mut Frame,
            &mut dyn FnMut(&mut Vec<Value>) -> crate::error::Result<bool>,
        ) -> crate::error::Result<()>
        + Send
        + Sync,
>;

/// A procedure compiled to closures.
pub(crate) struct Compiled {
    inits: Vec<(usize, Ty, Val)>,
    body: Run,
}

impl Compiled {
    /// Runs the compiled body as `Proc::run` runs the IR (same frame, same result).
    pub(crate) fn run(
        &self,
        p: &Proc,
        tx: &mut Transaction<'_>,
        f: &mut Frame,
    ) -> crate::error::Result<Vec<Value>> {
        p.reset_locals(f);
        if tx.memo_on() {
            f.memo.start(p.ops.len(), tx.memo_run());
        }
        for (slot, ty, init) in &self.inits {
            let v = init(None, &f.vars)?;
            f.vars[*slot] = fit(*ty, v);
        }
        match (self.body)(tx, f).map_err(|e| *e)? {
            Flow::Return => Ok(std::mem::take(&mut f.ret)),
            Flow::Next => Ok(Vec::new()),
        }
    }
}

impl Compiled {
    /// Runs a slice compiled by `compile_slice` in a frame already started (parameters,
    /// initial values and imports in), as `Proc::run_slice` runs it.
    pub(crate) fn run_slice(
        &self,
        tx: &mut Transaction<'_>,
        f: &mut Frame,
    ) -> crate::error::Result<()> {
        (self.body)(tx, f).map(drop).map_err(|e| *e)
    }
}

/// Compiles the slice of `p` that `mask` selects (operation ids), as `Proc::run_slice`
/// interprets it: the statements of the body, of `IF` arms and of `FOR i IN lo..hi` bodies
/// whose operation is in the mask; a `FOR r IN SELECT` loop in the mask runs whole, and a
/// `FOR i` loop warms only the tables the slice's operations access (a slice must touch no
/// table outside its block). `None` when the slice has a form the compiler does not take.
pub(crate) fn compile_slice(p: &Proc, mask: &[bool]) -> Option<Compiled> {
    let c = Cx {
        p,
        mask: Some(mask),
    };
    Some(Compiled {
        inits: Vec::new(),
        body: c.block(&p.body)?,
    })
}

/// Compiles `p`; `None` when it has a form the compiler does not take (then the whole
/// procedure is interpreted).
pub(crate) fn compile(p: &Proc) -> Option<Compiled> {
    let c = Cx { p, mask: None };
    let inits = p
        .inits
        .iter()
        .filter_map(|(slot, e)| e.as_ref().map(|e| (*slot, p.vars[*slot].1, val(e))))
        .collect();
    Some(Compiled {
        inits,
        body: c.block(&p.body)?,
    })
}

/// The INT path of `e`, as `expr::eval_int` computes it; `None` when that path can never
/// succeed for `e` (it is not an INT expression of the forms `eval_int` takes).
fn int(e: &E) -> Option<Int> {
    Some(match e {
        E::Lit(Value::Int(i)) => {
            let i = *i;
            Box::new(move |_, _| Some(i))
        }
        &E::Var(v) => Box::new(move |_, vars| match &vars[v] {
            V::Val(Value::Int(i)) => Some(*i),
            _ => None,
        }),
        &E::ElemVar(a, iv, _) => Box::new(elem_leaf(a, iv)),
        &E::Col(c) => Box::new(move |row, _| row?.int_at(c)),
        &E::Len(a) => Box::new(move |_, vars| Some(int_len(&vars[a]))),
        E::Elem(a, i, _) => {
            let (a, i) = (*a, int(i)?);
            Box::new(move |row, vars| int_elem(&vars[a], i(row, vars)?))
        }
        E::Bin(l, op, r, _) => return leaves!(&**l, &**r, arith, *op),
        _ => return None,
    })
}

/// An INT leaf that needs no call of its own: a variable, a literal, a column of the row.
fn var_leaf(v: usize) -> impl Fn(Option<&RowRef<'_>>, &[V]) -> Option<i64> + Send + Sync {
    move |_, vars| match &vars[v] {
        V::Val(Value::Int(i)) => Some(*i),
        _ => None,
    }
}
fn lit_leaf(i: i64) -> impl Fn(Option<&RowRef<'_>>, &[V]) -> Option<i64> + Send + Sync {
    move |_, _| Some(i)
}
fn col_leaf(c: usize) -> impl Fn(Option<&RowRef<'_>>, &[V]) -> Option<i64> + Send + Sync {
    move |row, _| row?.int_at(c)
}
fn elem_leaf(
    a: usize,
    iv: usize,
) -> impl Fn(Option<&RowRef<'_>>, &[V]) -> Option<i64> + Send + Sync {
    move |_, vars| match vars[iv] {
        V::Val(Value::Int(i)) => int_elem(&vars[a], i),
        _ => None,
    }
}

/// `f(l, op, r)` with the operands as leaves where they are (one closure for `x + 1`, not
/// three), else as their compiled closures.
macro_rules! leaves {
    ($l:expr, $r:expr, $f:ident, $op:expr) => {
        match ($l, $r) {
            (&E::Var(a), &E::Lit(Value::Int(b))) => $f(var_leaf(a), $op, lit_leaf(b)),
            (&E::Var(a), &E::Var(b)) => $f(var_leaf(a), $op, var_leaf(b)),
            (&E::Col(a), &E::Var(b)) => $f(col_leaf(a), $op, var_leaf(b)),
            (&E::Col(a), &E::Lit(Value::Int(b))) => $f(col_leaf(a), $op, lit_leaf(b)),
            (&E::ElemVar(a, iv, _), &E::Lit(Value::Int(b))) => {
                $f(elem_leaf(a, iv), $op, lit_leaf(b))
            }
            (&E::ElemVar(a, iv, _), &E::Var(b)) => $f(elem_leaf(a, iv), $op, var_leaf(b)),
            (&E::Var(a), &E::ElemVar(b, iv, _)) => $f(var_leaf(a), $op, elem_leaf(b, iv)),
            (l, r) => $f(int(l)?, $op, int(r)?),
        }
    };
}
use leaves;

/// `l op r` on INTs as `expr::eval_int` computes it (`None` on overflow, a zero divisor,
/// and for the operators it leaves to the general evaluator).
fn arith<L, R>(l: L, op: Op, r: R) -> Option<Int>
where
    L: Fn(Option<&RowRef<'_>>, &[V]) -> Option<i64> + Send + Sync + 'static,
    R: Fn(Option<&RowRef<'_>>, &[V]) -> Option<i64> + Send + Sync + 'static,
{
    Some(match op {
        Op::Add => Box::new(move |row, vars| l(row, vars)?.checked_add(r(row, vars)?)),
        Op::Sub => Box::new(move |row, vars| l(row, vars)?.checked_sub(r(row, vars)?)),
        Op::Mul => Box::new(move |row, vars| l(row, vars)?.checked_mul(r(row, vars)?)),
        Op::Mod => Box::new(move |row, vars| {
            let (a, b) = (l(row, vars)?, r(row, vars)?);
            if b != 0 {
                a.checked_rem(b)
            } else {
                None
            }
        }),
        _ => return None,
    })
}

/// `l op r` for a comparison of INTs, as `expr::eval_cond` decides it.
fn compare<L, R>(l: L, op: Op, r: R) -> Option<Cond>
where
    L: Fn(Option<&RowRef<'_>>, &[V]) -> Option<i64> + Send + Sync + 'static,
    R: Fn(Option<&RowRef<'_>>, &[V]) -> Option<i64> + Send + Sync + 'static,
{
    macro_rules! cmp {
        ($o:tt) => {
            Box::new(move |row, vars| Some(l(row, vars)? $o r(row, vars)?))
        };
    }
    Some(match op {
        Op::Eq => cmp!(==),
        Op::Ne => cmp!(!=),
        Op::Lt => cmp!(<),
        Op::Le => cmp!(<=),
        Op::Gt => cmp!(>),
        Op::Ge => cmp!(>=),
        _ => return None,
    })
}

/// `l op r` for a comparison of INT expressions (`compare` over their leaves).
fn int_compare(l: &E, op: Op, r: &E) -> Option<Cond> {
    leaves!(l, r, compare, op)
}

/// A text operand of a comparison that `text_compare` reads in place.
enum TextLeaf {
    Var(usize),
    Col(usize),
    Lit(String),
}

impl TextLeaf {
    fn of(e: &E) -> Option<TextLeaf> {
        Some(match e {
            &E::Var(v) => TextLeaf::Var(v),
            &E::Col(c) => TextLeaf::Col(c),
            E::Lit(Value::Str(s)) => TextLeaf::Lit(s.clone()),
            _ => return None,
        })
    }

    /// The text, or `None` where the operand holds anything else (the general evaluator
    /// decides then).
    #[inline]
    fn get<'a>(&'a self, row: Option<&RowRef<'a>>, vars: &'a [V]) -> Option<&'a str> {
        match self {
            TextLeaf::Var(v) => match &vars[*v] {
                V::Val(Value::Str(s)) => Some(s),
                _ => None,
            },
            TextLeaf::Col(c) => match row?.get(*c)? {
                ValueRef::Str(s) => Some(s),
                _ => None,
            },
            TextLeaf::Lit(s) => Some(s),
        }
    }
}

/// `l op r` for a comparison of two texts, as `expr::eval_cond`'s fallback decides it
/// (`expr::bin`: ordered as `str`s). Payment's `x_credit = 'BC'`.
fn text_compare(l: &E, op: Op, r: &E) -> Option<Cond> {
    let (l, r) = (TextLeaf::of(l)?, TextLeaf::of(r)?);
    Some(Box::new(move |row, vars| {
        let (a, b) = (l.get(row, vars)?, r.get(row, vars)?);
        Some(test(op, a.cmp(b)))
    }))
}

/// A number on `num`'s path.
#[derive(Clone, Copy)]
enum Num {
    I(i64),
    F(f64),
}

/// A numeric expression's typed path (`num`): `None` where the general evaluator must answer.
type NumFn = Box<dyn Fn(Option<&RowRef<'_>>, &[V]) -> Option<Num> + Send + Sync>;

impl Num {
    #[inline]
    fn of(v: ValueRef<'_>) -> Option<Num> {
        match v {
            ValueRef::Int(i) => Some(Num::I(i)),
            ValueRef::Float(f) => Some(Num::F(f)),
            _ => None,
        }
    }

    /// `a op b` as `expr::bin` computes it on INTs and DOUBLEs (an INT widened where the
    /// other is a DOUBLE); `None` where `bin` raises an error (overflow, a zero divisor) or
    /// for another operator.
    #[inline]
    fn bin(a: Num, op: Op, b: Num) -> Option<Num> {
        if let (Num::I(x), Num::I(y)) = (a, b) {
            return Some(Num::I(match op {
                Op::Add => x.checked_add(y)?,
                Op::Sub => x.checked_sub(y)?,
                Op::Mul => x.checked_mul(y)?,
                Op::Div if y != 0 => x.checked_div(y)?,
                Op::Mod if y != 0 => x.checked_rem(y)?,
                _ => return None,
            }));
        }
        let f = |n| match n {
            Num::I(i) => i as f64,
            Num::F(f) => f,
        };
        let (x, y) = (f(a), f(b));
        Some(Num::F(match op {
            Op::Add => x + y,
            Op::Sub => x - y,
            Op::Mul => x * y,
            Op::Div if y != 0.0 => x / y,
            Op::Mod if y != 0.0 => x % y,
            _ => return None,
        }))
    }
}

/// The numeric path of `e` (INT and DOUBLE literals, variables and columns under + − × ÷ %),
/// as `expr::eval_in` computes it; at run time `None` wherever it meets another value (NULL,
/// text) or `bin` would raise an error, and the general evaluator (which evaluates the same
/// pure expression again) then gives the value or the error.
fn num(e: &E) -> Option<NumFn> {
    Some(match e {
        E::Lit(Value::Int(i)) => {
            let i = *i;
            Box::new(move |_, _| Some(Num::I(i)))
        }
        E::Lit(Value::Float(f)) => {
            let f = *f;
            Box::new(move |_, _| Some(Num::F(f)))
        }
        &E::Var(v) => Box::new(move |_, vars| match &vars[v] {
            V::Val(Value::Int(i)) => Some(Num::I(*i)),
            V::Val(Value::Float(f)) => Some(Num::F(*f)),
            _ => None,
        }),
        &E::Col(c) => Box::new(move |row, _| Num::of(row?.get(c)?)),
        E::Bin(l, op @ (Op::Add | Op::Sub | Op::Mul | Op::Div | Op::Mod), r, _) => {
            let (l, op, r) = (num(l)?, *op, num(r)?);
            Box::new(move |row, vars| Num::bin(l(row, vars)?, op, r(row, vars)?))
        }
        _ => return None,
    })
}

/// A concatenation's typed path (`text`): appends the text to the buffer, or returns false
/// where the general evaluator must answer.
type TextFn = Box<dyn Fn(Option<&RowRef<'_>>, &[V], &mut String) -> bool + Send + Sync>;

/// The path of a `||` tree over text and INT literals, variables and columns, as
/// `expr::eval_in` computes it (each part as its `text`: an INT in decimal), appended into
/// one buffer instead of a string made per part; false at run time for any other value.
fn text(e: &E) -> Option<TextFn> {
    use std::fmt::Write;
    fn part(v: ValueRef<'_>, out: &mut String) -> bool {
        match v {
            ValueRef::Str(s) => out.push_str(s),
            ValueRef::Int(i) => {
                let _ = write!(out, "{i}");
            }
            _ => return false,
        }
        true
    }
    Some(match e {
        E::Lit(v @ (Value::Str(_) | Value::Int(_))) => {
            let v = v.clone();
            Box::new(move |_, _, out| part(v.to_value_ref(), out))
        }
        &E::Var(v) => Box::new(move |_, vars, out| match &vars[v] {
            V::Val(x) => part(x.to_value_ref(), out),
            _ => false,
        }),
        &E::Col(c) => {
            Box::new(move |row, _, out| row.and_then(|r| r.get(c)).is_some_and(|v| part(v, out)))
        }
        E::Concat(l, r) => {
            let (l, r) = (text(l)?, text(r)?);
            Box::new(move |row, vars, out| l(row, vars, out) && r(row, vars, out))
        }
        // `substring(s FROM a FOR n)` cut in place from what `s` appends (Payment's
        // `c_data`: 500 characters, which the general evaluator copies once per `||`).
        E::Substr(s, from, len) => {
            let (s, from) = (text(s)?, int(from)?);
            let len = match len {
                Some(l) => Some(int(l)?),
                None => None,
            };
            Box::new(move |row, vars, out| {
                let start = out.len();
                if !s(row, vars, out) {
                    return false;
                }
                let Some(a) = from(row, vars) else {
                    return false;
                };
                let end = match &len {
                    // A negative length is the general evaluator's error.
                    Some(l) => match l(row, vars) {
                        Some(n) if n >= 0 => a.saturating_add(n),
                        _ => return false,
                    },
                    None => i64::MAX,
                };
                substr_in_place(out, start, a, end);
                true
            })
        }
        _ => return None,
    })
}

/// Keeps of `out[start..]` the characters `[lo, hi)` (1-based, PostgreSQL's `substring`
/// as `expr::eval_in` computes it: intersected with `[1, n]`, empty if `hi <= lo`).
fn substr_in_place(out: &mut String, start: usize, lo: i64, hi: i64) {
    let lo = lo.max(1);
    if hi <= lo {
        out.truncate(start);
        return;
    }
    let skip = usize::try_from(lo - 1).unwrap_or(usize::MAX);
    let take = usize::try_from(hi - lo).unwrap_or(usize::MAX);
    // Byte offset (from `start`) of character `n` of the tail, or its length.
    let at = |out: &String, from: usize, n: usize| -> usize {
        let tail = &out[from..];
        if tail.is_ascii() {
            n.min(tail.len())
        } else {
            tail.char_indices().nth(n).map_or(tail.len(), |(b, _)| b)
        }
    };
    let b0 = start + at(out, start, skip);
    let b1 = b0 + at(out, b0, take);
    out.truncate(b1);
    out.drain(start..b0);
}

/// The largest capacity `val` starts a text value at.
const TEXT_HINT_MAX: usize = 4096;

/// `e`'s value, as `expr::value_of` computes it: the INT path, else for arithmetic the
/// numeric path (DOUBLEs), for `||` the text path, else the general evaluator.
fn val(e: &E) -> Val {
    if let Some(i) = int(e) {
        let e = e.clone();
        return Box::new(move |row, vars| match i(row.as_ref(), vars) {
            Some(i) => Ok(V::Val(Value::Int(i))),
            None => eval_in(&e, row, vars),
        });
    }
    if let Some(n) = matches!(e, E::Bin(..)).then(|| num(e)).flatten() {
        let e = e.clone();
        return Box::new(move |row, vars| match n(row.as_ref(), vars) {
            Some(Num::I(i)) => Ok(V::Val(Value::Int(i))),
            Some(Num::F(f)) => Ok(V::Val(Value::Float(f))),
            None => eval_in(&e, row, vars),
        });
    }
    if let Some(t) = matches!(e, E::Concat(..) | E::Substr(..))
        .then(|| text(e))
        .flatten()
    {
        let e = e.clone();
        // The longest text this expression has built so far (capped): a fresh value starts
        // at that capacity rather than growing through two or three reallocations (Payment's
        // history row and `c_data`: 0.6 % of TPC-C's instructions). Written only when it
        // grows, so threads sharing the procedure do not pass its line around.
        let hint = std::sync::atomic::AtomicUsize::new(0);
        return Box::new(move |row, vars| {
            use std::sync::atomic::Ordering::Relaxed;
            let mut s = String::with_capacity(hint.load(Relaxed));
            if t(row.as_ref(), vars, &mut s) {
                if s.capacity() > hint.load(Relaxed) && s.capacity() <= TEXT_HINT_MAX {
                    hint.store(s.capacity(), Relaxed);
                }
                Ok(V::Val(Value::Str(s)))
            } else {
                eval_in(&e, row, vars)
            }
        });
    }
    match e {
        E::Lit(v) => {
            let v = V::Val(v.clone());
            Box::new(move |_, _| Ok(v.clone()))
        }
        &E::Bool(b) => Box::new(move |_, _| Ok(V::Bool(b))),
        _ => {
            let e = e.clone();
            Box::new(move |row, vars| eval_in(&e, row, vars))
        }
    }
}

/// The typed path of a condition, as `expr::eval_cond` computes it.
fn cond(e: &E) -> Option<Cond> {
    Some(match e {
        &E::Bool(b) => Box::new(move |_, _| Some(b)),
        E::Not(x) => {
            let x = cond(x)?;
            Box::new(move |row, vars| Some(!x(row, vars)?))
        }
        E::Bin(l, Op::And, r, _) => {
            let (l, r) = (cond(l)?, cond(r)?);
            Box::new(move |row, vars| Some(l(row, vars)? && r(row, vars)?))
        }
        E::Bin(l, Op::Or, r, _) => {
            let (l, r) = (cond(l)?, cond(r)?);
            Box::new(move |row, vars| Some(l(row, vars)? || r(row, vars)?))
        }
        E::Bin(l, op @ (Op::Eq | Op::Ne | Op::Lt | Op::Le | Op::Gt | Op::Ge), r, _) => {
            return int_compare(l, *op, r).or_else(|| text_compare(l, *op, r))
        }
        &E::Var(v) => Box::new(move |_, vars| match &vars[v] {
            V::Bool(b) => Some(*b),
            _ => None,
        }),
        E::AnyEq(x, a) => {
            let (x, a) = (int(x)?, *a);
            Box::new(move |row, vars| int_any(&vars[a], x(row, vars)?))
        }
        _ => return None,
    })
}

/// The condition of `a` on a row, as `Access::passes` decides it (`expr::holds`): the
/// whole condition, or with `ranged` the part the key range leaves (`Access::condition`).
fn filter(a: &Access) -> Filter {
    let whole = row_filter(a.condition(false));
    let rest = row_filter(a.condition(true));
    Box::new(move |r, vars, ranged| {
        if ranged {
            rest(r, vars)
        } else {
            whole(r, vars)
        }
    })
}

/// Condition `e` (none: every row passes) on a row, as `expr::holds` decides it.
fn row_filter(e: Option<&E>) -> RowCond {
    let Some(e) = e.cloned() else {
        return Box::new(|_, _| Ok(true));
    };
    match cond(&e) {
        Some(c) => Box::new(move |r, vars| match c(Some(&r), vars) {
            Some(b) => Ok(b),
            None => Ok(eval_in(&e, Some(r), vars)? == V::Bool(true)),
        }),
        None => Box::new(move |r, vars| Ok(eval_in(&e, Some(r), vars)? == V::Bool(true))),
    }
}

/// A condition's truth, as `expr::holds` decides it (no row).
fn holds(e: &E) -> Holds {
    let fast = cond(e);
    let e = e.clone();
    match fast {
        Some(c) => Box::new(move |vars| truth(&c, &e, vars)),
        None => Box::new(move |vars| Ok(eval_in(&e, None, vars)? == V::Bool(true))),
    }
}

/// Condition `e`'s truth by its typed path `c`, else by the general evaluator.
#[inline]
fn truth(c: &Cond, e: &E, vars: &[V]) -> crate::error::Result<bool> {
    match c(None, vars) {
        Some(b) => Ok(b),
        None => Ok(eval_in(e, None, vars)? == V::Bool(true)),
    }
}

/// One INT component of a compiled point key (or an INT a statement needs at once: a
/// one-column key, the value a `CASE`-like `IF` chain switches on): the common leaves (a
/// variable, an element of an array variable at a variable index, a literal) read in
/// place, anything else through its compiled closure (`int`). A TPC-C key is two to four
/// leaves: a dynamic call each was a third of the key's cost.
enum KeyPart {
    Var(usize),
    /// `arr[i]`: the array's slot and the index variable's.
    Elem(usize, usize),
    Lit(i64),
    Other(Int),
}

impl KeyPart {
    fn of(e: &E) -> Option<KeyPart> {
        Some(match e {
            &E::Var(v) => KeyPart::Var(v),
            &E::ElemVar(a, iv, _) => KeyPart::Elem(a, iv),
            E::Lit(Value::Int(i)) => KeyPart::Lit(*i),
            e => KeyPart::Other(int(e)?),
        })
    }

    /// The value `int(e)` gives.
    #[inline(always)]
    fn eval(&self, vars: &[V]) -> Option<i64> {
        match *self {
            KeyPart::Var(v) => match &vars[v] {
                V::Val(Value::Int(i)) => Some(*i),
                _ => None,
            },
            KeyPart::Elem(a, iv) => match vars[iv] {
                V::Val(Value::Int(i)) => int_elem(&vars[a], i),
                _ => None,
            },
            KeyPart::Lit(i) => Some(i),
            KeyPart::Other(ref k) => k(None, vars),
        }
    }
}

/// The point key of `a` on `t`, as `Access::point_values` computes it. When every key
/// column is INT and every key expression has an INT path (`KeyPart`), the INTs are
/// written in the index's encoding straight into the buffer (no `Value`, and key encoding
/// copies the bytes: `Values::encoded`), and `point_values` runs only when one of them
/// does not evaluate.
struct PointKey {
    parts: Option<Vec<KeyPart>>,
    table: TableRef,
    access: Access,
}

impl PointKey {
    fn new(t: &TableRef, a: &Access) -> PointKey {
        PointKey {
            parts: a.point.as_ref().and_then(|keys| int_parts(t, keys)),
            table: t.clone(),
            access: a.clone(),
        }
    }

    /// The key into `k`; `Ok(false)` where `point_values` says the access is no point.
    #[inline]
    fn eval(&self, vars: &[V], k: &mut PointKeyBuf) -> crate::error::Result<bool> {
        match &self.parts {
            Some(parts) if k.fill_ints(parts, vars) => Ok(true),
            _ => self.values(vars, k),
        }
    }

    #[cold]
    fn values(&self, vars: &[V], k: &mut PointKeyBuf) -> crate::error::Result<bool> {
        k.ints = false;
        self.access
            .point_values(&self.table.schema, vars, &mut k.vals)
    }
}

/// The INT paths of primary key `keys` of `t`: one per key column, each column INT and
/// each expression with an INT path; else `None` (a key of the wrong width included:
/// `point_values` reports its arity).
fn int_parts(t: &TableRef, keys: &[E]) -> Option<Vec<KeyPart>> {
    let s = &t.schema;
    let pk = &s.indexes()[0].columns;
    if keys.len() != pk.len() || keys.len() > POINT_KEY_INTS {
        return None;
    }
    keys.iter()
        .zip(pk)
        .map(|(e, &c)| {
            (s.columns()[c].ty == ColumnType::Int)
                .then(|| KeyPart::of(e))
                .flatten()
        })
        .collect()
}

/// A point key `PointKey::eval` made: INTs in the primary index's encoding (`ints`), or
/// values. As `Values` either way, the same INTs through `at`/`visit` as `encoded` gives.
/// The encoded INTs are kept in place (`bytes[..len]`), not in a `Vec`: filling one was
/// a capacity check and a length update per INT, on every point access of a procedure.
pub(crate) struct PointKeyBuf {
    vals: Vec<Value>,
    bytes: [u8; 8 * POINT_KEY_INTS],
    len: usize,
    ints: bool,
}

/// The most INT parts a point key is encoded from (`int_parts`); a wider key goes by values.
const POINT_KEY_INTS: usize = 8;

impl Default for PointKeyBuf {
    fn default() -> Self {
        PointKeyBuf {
            vals: Vec::new(),
            bytes: [0; 8 * POINT_KEY_INTS],
            len: 0,
            ints: false,
        }
    }
}

impl PointKeyBuf {
    /// The key of INT `parts` (at most `POINT_KEY_INTS`) in the index's encoding; false
    /// (and no key) if a part does not evaluate to an INT.
    #[inline(always)]
    fn fill_ints(&mut self, parts: &[KeyPart], vars: &[V]) -> bool {
        debug_assert!(parts.len() <= POINT_KEY_INTS);
        self.ints = true;
        let mut n = 0;
        for (p, out) in parts.iter().zip(self.bytes.chunks_exact_mut(8)) {
            match p.eval(vars) {
                Some(i) => out.copy_from_slice(&crate::schema::int_key_bytes(i)),
                None => return false,
            }
            n += 8;
        }
        self.len = n;
        true
    }

    /// A key of `ints` as `fill_ints` encodes it.
    #[cfg(test)]
    fn of_ints(ints: &[i64]) -> PointKeyBuf {
        let parts: Vec<KeyPart> = ints.iter().map(|&i| KeyPart::Lit(i)).collect();
        let mut k = PointKeyBuf::default();
        assert!(k.fill_ints(&parts, &[]));
        k
    }

    #[inline]
    fn int(&self, i: usize) -> Option<i64> {
        let b = self.bytes[..self.len].get(8 * i..8 * i + 8)?;
        Some(crate::schema::decode_int(b.try_into().ok()?))
    }
}

impl crate::value::Values for PointKeyBuf {
    fn count(&self) -> usize {
        if self.ints {
            self.len / 8
        } else {
            self.vals.len()
        }
    }
    fn visit(
        &self,
        f: &mut dyn FnMut(ValueRef<'_>) -> crate::error::Result<()>,
    ) -> crate::error::Result<()> {
        if !self.ints {
            return self.vals.as_slice().visit(f);
        }
        (0..self.count()).try_for_each(|i| f(ValueRef::Int(self.int(i).unwrap_or(0))))
    }
    #[inline]
    fn single(&self) -> Option<ValueRef<'_>> {
        if !self.ints {
            return self.vals.as_slice().single();
        }
        (self.len == 8).then(|| ValueRef::Int(self.int(0).unwrap_or(0)))
    }
    #[inline]
    fn at(&self, i: usize) -> Option<ValueRef<'_>> {
        if !self.ints {
            return self.vals.get(i).map(|v| v.to_value_ref());
        }
        self.int(i).map(ValueRef::Int)
    }
    #[inline]
    fn encoded(&self, _: crate::value::sealed::Token) -> Option<&[u8]> {
        self.ints.then_some(&self.bytes[..self.len])
    }
}

/// A loop's prefetches (`exec::warm`) when every key column of every one is INT with an
/// INT path: the keys are encoded as `PointKey` encodes them, into the frame's kept
/// buffers, with no `Value` built. A key with a part that does not evaluate to an INT is
/// left out (a prefetch changes no result).
struct Warm(Vec<(TableRef, Vec<KeyPart>)>);

impl Warm {
    fn of(prefetch: &[Prefetch]) -> Option<Warm> {
        prefetch
            .iter()
            .map(|p| Some((p.table.clone(), int_parts(&p.table, &p.key)?)))
            .collect::<Option<Vec<_>>>()
            .map(Warm)
    }

    /// The keys of `iters` iterations, one `Transaction::prefetch` per access; `bind(i,
    /// vars)` gives the loop's variables their values for iteration `i`. With `over` =
    /// (slot, lo) of a `FOR slot IN lo..` loop, an access keyed by `arr[slot]` alone is
    /// warmed with the INT array's elements from `lo` on as they stand (a loop over a
    /// call's key array: YCSB's operations, New-Order's items): no key is evaluated, no
    /// variable bound.
    fn warm(
        &self,
        iters: usize,
        over: Option<(usize, i64)>,
        tx: &mut Transaction<'_>,
        f: &mut Frame,
        mut bind: impl FnMut(usize, &mut [V]),
    ) {
        let mut keys = std::mem::take(&mut f.pwarm);
        for (table, parts) in &self.0 {
            if let (Some((slot, lo)), &[KeyPart::Elem(a, iv)]) = (over, &parts[..]) {
                let from = usize::try_from(lo).ok().and_then(|l| l.checked_sub(1));
                if let (true, V::IntArr(xs), Some(from)) = (iv == slot, &f.vars[a], from) {
                    // Elements past the end have no key, as `fill_ints` finds.
                    let xs = xs.get(from..).unwrap_or_default();
                    let _ = tx.prefetch(table, &xs[..iters.min(xs.len())]);
                    continue;
                }
            }
            let mut n = 0;
            for i in 0..iters {
                bind(i, &mut f.vars);
                if keys.len() <= n {
                    keys.push(PointKeyBuf::default());
                }
                n += usize::from(keys[n].fill_ints(parts, &f.vars));
            }
            let _ = tx.prefetch(table, &keys[..n]);
        }
        f.pwarm = keys;
    }
}

/// Sets the `found` variable (slot `slot`) in place.
#[inline]
pub(super) fn set_found(f: &mut Frame, slot: usize, found: bool) {
    set_flag(&mut f.vars[slot], found);
}

/// Sets a BOOL variable in place.
#[inline]
fn set_flag(v: &mut V, found: bool) {
    match v {
        V::Bool(b) => *b = found,
        s => *s = V::Bool(found),
    }
}

/// Copies INT column `col`, which lies at offset `at` of `r`'s row, into `x`; false (and
/// `x` untouched) if the row is too short for it. Debug builds check it against `int_at`.
#[inline(always)]
fn copy_int(x: &mut i64, r: &RowRef<'_>, at: usize, col: usize) -> bool {
    let Some(b) = r.data.get(at..).and_then(|d| d.first_chunk::<8>()) else {
        return false;
    };
    *x = i64::from_le_bytes(*b);
    debug_assert_eq!(Some(*x), r.int_at(col));
    true
}

/// A point read of plain columns into variables (`Proc::point_read`).
struct PointRead {
    table: TableRef,
    items: Vec<Item>,
    /// When every item is an INT column into an INT variable: each one's (offset in the
    /// row, slot, column), copied by a loop with no type dispatch.
    ints: Option<Vec<(u32, u32, u32)>>,
    found: usize,
}

/// One column a point read copies: into which slot, of which type, and where the column
/// lies in the row when it is INT (copied from there: the row's layout is its table's, fixed
/// for the table's life).
struct Item {
    col: usize,
    slot: usize,
    ty: Ty,
    int_at: Option<usize>,
}

impl PointRead {
    fn new(table: &TableRef, cols: &[usize], into: Vec<(usize, Ty)>, found: usize) -> PointRead {
        let columns = table.schema.columns();
        let items = cols
            .iter()
            .zip(into)
            .map(|(&col, (slot, ty))| Item {
                col,
                slot,
                ty,
                int_at: columns
                    .get(col)
                    .filter(|c| c.ty == ColumnType::Int)
                    .map(|c| c.offset),
            })
            .collect::<Vec<Item>>();
        let ints = items
            .iter()
            .map(|it| match (it.ty, it.int_at) {
                (Ty::Int, Some(at)) => Some((
                    u32::try_from(at).ok()?,
                    u32::try_from(it.slot).ok()?,
                    u32::try_from(it.col).ok()?,
                )),
                _ => None,
            })
            .collect();
        PointRead {
            table: table.clone(),
            items,
            ints,
            found,
        }
    }

    #[inline]
    fn run<K: crate::value::Values + ?Sized>(
        &self,
        key: &K,
        tx: &mut Transaction<'_>,
        vars: &mut [V],
    ) -> Step {
        let got = tx.get_with(&self.table, key, |r| {
            if let Some(ints) = &self.ints {
                let mut all = true;
                for &(at, slot, col) in ints {
                    all &= match &mut vars[slot as usize] {
                        V::Val(Value::Int(x)) => copy_int(x, &r, at as usize, col as usize),
                        _ => false,
                    };
                }
                if all {
                    return;
                }
            }
            for it in &self.items {
                if let (Some(at), V::Val(Value::Int(x))) = (it.int_at, &mut vars[it.slot]) {
                    if copy_int(x, &r, at, it.col) {
                        continue;
                    }
                }
                match (it.ty, r.get(it.col)) {
                    (Ty::Float, Some(ValueRef::Int(i))) => {
                        vars[it.slot] = V::Val(Value::Float(i as f64))
                    }
                    (_, Some(v)) => assign(&mut vars[it.slot], v),
                    (_, None) => {}
                }
            }
        })?;
        set_flag(&mut vars[self.found], got.is_some());
        Ok(Flow::Next)
    }
}

/// The compiler's view of the procedure being compiled.
struct Cx<'a> {
    p: &'a Proc,
    /// A slice's operations (`compile_slice`); `None`: the whole body.
    mask: Option<&'a [bool]>,
}

impl Cx<'_> {
    fn found(&self) -> usize {
        self.p.nparams
    }

    fn at(&self, op: usize) -> SqlPos {
        SqlPos {
            line: self.p.ops[op].line,
            column: 0,
        }
    }

    fn ty(&self, slot: usize) -> Ty {
        self.p.vars[slot].1
    }

    /// `run`, the point UPDATE `op` of `table`, as `healing`'s memoized re-execution runs
    /// it (`memo.rs`): under any other protocol, or outside a healable call, one test more.
    fn memoized(&self, op: usize, table: &TableRef, run: Run) -> Run {
        let mut inputs: Vec<usize> = self.p.ops[op]
            .uses
            .iter()
            .map(|&(v, _)| v)
            .filter(|&v| v >= self.p.nparams)
            .collect();
        inputs.sort_unstable();
        inputs.dedup();
        let s = super::memo::Slots {
            op: op as u32,
            table: table.clone(),
            inputs: inputs.into(),
            found: self.found(),
        };
        Box::new(move |tx, f| {
            if tx.memo_on() {
                super::memo::step(&s, tx, f, &run)
            } else {
                run(tx, f)
            }
        })
    }

    fn block(&self, stmts: &[Stmt]) -> Option<Run> {
        let mask = self.mask;
        let mut runs = stmts
            .iter()
            .filter(|s| {
                mask.is_none_or(|m| m.get(super::graph::op_of(s)).copied().unwrap_or(false))
            })
            .map(|s| self.stmt(s))
            .collect::<Option<Vec<Run>>>()?;
        Some(match runs.len() {
            0 => Box::new(|_, _| Ok(Flow::Next)),
            1 => runs.pop()?,
            _ => {
                let runs = runs.into_boxed_slice();
                Box::new(move |tx, f| {
                    for r in runs.iter() {
                        if r(tx, f)? == Flow::Return {
                            return Ok(Flow::Return);
                        }
                    }
                    Ok(Flow::Next)
                })
            }
        })
    }

    fn stmt(&self, s: &Stmt) -> Option<Run> {
        Some(match s {
            Stmt::SelectInto { op, read, into } => self.select_into(*op, read, into),
            Stmt::Update {
                op,
                table,
                access,
                sets,
                int_key,
            } => {
                let run = self.update(*op, table, access, sets, int_key.as_ref());
                // Only an UPDATE `Transaction::memo_capture` can record: a point one, on a
                // table without secondary indexes whose versions hold their rows (both
                // fixed for the table's life). Others skip the memo's bookkeeping.
                if access.pure_point() && table.indexes.len() == 1 && !table.rows_copied() {
                    self.memoized(*op, table, run)
                } else {
                    run
                }
            }
            Stmt::Insert { op, table, rows } => self.insert(*op, table, rows),
            Stmt::Delete { table, access, .. } => self.delete(table, access),
            Stmt::Assign { slot, value, .. } => self.assign(*slot, value),
            Stmt::If {
                arms,
                otherwise,
                switch,
                ..
            } => {
                let conds: Vec<_> = arms.iter().map(|(c, _)| holds(c)).collect();
                let bodies = arms
                    .iter()
                    .map(|(_, b)| self.block(b))
                    .collect::<Option<Vec<Run>>>()?;
                let otherwise = self.block(otherwise)?;
                let sw = switch
                    .as_ref()
                    .and_then(|sw| Some((KeyPart::of(&sw.on)?, sw.lo, sw.arm.clone())));
                if let (None, [(e, _)], Some(c)) =
                    (&sw, &arms[..], arms.first().and_then(|a| cond(&a.0)))
                {
                    // `IF c THEN a [ELSE b]` on a typed condition: one call fewer than the
                    // general arm loop (its `holds` wraps the same `cond`), and no switch test.
                    let (e, then) = (e.clone(), bodies.into_iter().next()?);
                    return Some(Box::new(move |tx, f| {
                        if truth(&c, &e, &f.vars)? {
                            then(tx, f)
                        } else {
                            otherwise(tx, f)
                        }
                    }));
                }
                Box::new(move |tx, f| {
                    if let Some((on, lo, arm)) = &sw {
                        if let Some(x) = on.eval(&f.vars) {
                            let k = x
                                .checked_sub(*lo)
                                .and_then(|d| usize::try_from(d).ok())
                                .and_then(|d| arm.get(d))
                                .map_or(bodies.len(), |&a| a as usize);
                            return match bodies.get(k) {
                                Some(body) => body(tx, f),
                                None => otherwise(tx, f),
                            };
                        }
                    }
                    for (c, body) in conds.iter().zip(&bodies) {
                        if c(&f.vars)? {
                            return body(tx, f);
                        }
                    }
                    otherwise(tx, f)
                })
            }
            Stmt::ForRange {
                slot,
                lo,
                hi,
                body,
                prefetch,
                ..
            } => {
                let (lo, hi, body, slot) = (val(lo), val(hi), self.block(body)?, *slot);
                // A slice warms only the tables its own operations access: the others belong
                // to other blocks, which PACMAN may be replaying at the same time. (The
                // interpreted `Proc::run_slice` warms nothing.)
                let prefetch = match self.mask {
                    None => prefetch.clone(),
                    Some(mask) => prefetch
                        .iter()
                        .filter(|pf| {
                            self.p.ops.iter().zip(mask).any(|(op, &m)| {
                                m && op.table.as_deref() == Some(pf.table.schema.name.as_str())
                            })
                        })
                        .cloned()
                        .collect(),
                };
                let ints = Warm::of(&prefetch);
                Box::new(move |tx, f| {
                    let int = |v: V| match v {
                        V::Val(Value::Int(i)) => i,
                        _ => 0,
                    };
                    let (lo, hi) = (int(lo(None, &f.vars)?), int(hi(None, &f.vars)?));
                    if !prefetch.is_empty() && lo <= hi {
                        match &ints {
                            Some(w) => {
                                w.warm(warm_iters(lo, hi), Some((slot, lo)), tx, f, |i, vars| {
                                    set_int(&mut vars[slot], lo + i as i64)
                                })
                            }
                            None => warm(slot, lo, hi, &prefetch, tx, f),
                        }
                    }
                    let mut i = lo;
                    while i <= hi {
                        crate::query::cancel::tick()?;
                        set_int(&mut f.vars[slot], i);
                        if body(tx, f)? == Flow::Return {
                            return Ok(Flow::Return);
                        }
                        if i == hi {
                            break;
                        }
                        i += 1;
                    }
                    Ok(Flow::Next)
                })
            }
            Stmt::ForRows {
                op,
                read,
                fields,
                body,
                prefetch,
            } => self.for_rows(*op, read, fields, body, prefetch)?,
            Stmt::Return { op, values } => {
                let at = self.at(*op);
                let values: Vec<Val> = values.iter().map(val).collect();
                Box::new(move |_, f| {
                    let mut out = Vec::with_capacity(values.len());
                    for v in &values {
                        out.push(v(None, &f.vars)?.stored(at)?);
                    }
                    f.ret = out;
                    Ok(Flow::Return)
                })
            }
            Stmt::Raise { message, .. } => {
                let (message, procedure) = (val(message), self.p.name.clone());
                Box::new(move |_, f| {
                    let message = match message(None, &f.vars)? {
                        V::Val(Value::Str(s)) => s,
                        V::Val(v) => v.to_string(),
                        V::Bool(b) => b.to_string(),
                        V::Arr(_) | V::IntArr(_) => "array".into(),
                    };
                    Err(Box::new(Error::ProcedureAbort {
                        procedure: procedure.clone(),
                        message,
                    }))
                })
            }
            Stmt::Rollback { .. } => {
                let procedure = self.p.name.clone();
                Box::new(move |_, _| {
                    Err(Box::new(Error::ProcedureAbort {
                        procedure: procedure.clone(),
                        message: "ROLLBACK".into(),
                    }))
                })
            }
        })
    }

    /// `Proc::rows`: calls `each` with the values of `es` for each row `read` selects, up
    /// to its limit, until `each` returns false.
    fn rows(&self, op: usize, read: &Read, es: &[E]) -> Rows {
        let at = self.at(op);
        // An INT column of the row (what keys and loop fields mostly are) is read in place,
        // as `val`'s INT path reads it, without going through a `V`.
        let es: Vec<(Option<usize>, Val)> = es
            .iter()
            .map(|e| (if let E::Col(c) = e { Some(*c) } else { None }, val(e)))
            .collect();
        let limit = read.limit.as_ref().map(val);
        let (table, access, order) = (read.table.clone(), read.access.clone(), read.order);
        let pass = filter(&read.access);
        Box::new(move |tx, f, each| {
            let mut left = match &limit {
                None => u64::MAX,
                Some(l) => match l(None, &f.vars)? {
                    V::Val(Value::Int(n)) => n.max(0) as u64,
                    _ => 0,
                },
            };
            if left == 0 {
                return Ok(());
            }
            let Frame { vars, out, key, .. } = f;
            visit_plan_with(tx, &table, &access, &pass, vars, key, order, &mut |row| {
                out.clear();
                for (col, e) in &es {
                    if let Some(i) = col.and_then(|c| row.int_at(c)) {
                        out.push(Value::Int(i));
                        continue;
                    }
                    out.push(e(Some(row), vars)?.stored(at)?);
                }
                left -= 1;
                Ok(each(out)? && left > 0)
            })
        })
    }

    fn select_into(&self, op: usize, read: &Read, into: &[usize]) -> Run {
        let found = self.found();
        let general: Run = match &read.items {
            Items::Exprs(es) => {
                let rows = self.rows(op, read, es);
                let into: Vec<(usize, Ty)> = into.iter().map(|&s| (s, self.ty(s))).collect();
                Box::new(move |tx, f| {
                    let mut got = false;
                    rows(tx, f, &mut |_| {
                        got = true;
                        Ok(false)
                    })?;
                    if got {
                        for (i, &(slot, ty)) in into.iter().enumerate() {
                            let v = std::mem::replace(&mut f.out[i], Value::Int(0));
                            f.vars[slot] = fit(ty, V::Val(v));
                        }
                    }
                    set_found(f, found, got);
                    Ok(Flow::Next)
                })
            }
            Items::Aggs(aggs) => self.aggregates(read, aggs.clone(), into),
        };
        let point = PointRead::new(
            &read.table,
            read.cols.as_deref().unwrap_or_default(),
            into.iter().map(|&s| (s, self.ty(s))).collect(),
            found,
        );
        if let Some(k) = &read.int_key {
            let Some(k) = KeyPart::of(k) else {
                return general;
            };
            return Box::new(move |tx, f| match k.eval(&f.vars) {
                Some(key) => point.run(&key, tx, &mut f.vars),
                None => general(tx, f),
            });
        }
        if read.access.pure_point() && read.limit.is_none() && read.cols.is_some() {
            let key = PointKey::new(&read.table, &read.access);
            return Box::new(move |tx, f| {
                let Frame { vars, pkey, .. } = f;
                match key.eval(vars, pkey) {
                    Ok(true) => point.run(pkey, tx, vars),
                    Ok(false) => general(tx, f),
                    Err(e) => Err(Box::new(e)),
                }
            });
        }
        general
    }

    fn aggregates(&self, read: &Read, aggs: Vec<Agg>, into: &[usize]) -> Run {
        let found = self.found();
        let limit = read.limit.as_ref().map(val);
        let (table, access, order) = (read.table.clone(), read.access.clone(), read.order);
        let pass = filter(&read.access);
        let into: Vec<(usize, Ty, String)> = into
            .iter()
            .map(|&s| (s, self.ty(s), self.p.vars[s].0.clone()))
            .collect();
        Box::new(move |tx, f| {
            let mut acc: Vec<Option<Value>> = vec![None; aggs.len()];
            let mut left = match &limit {
                None => u64::MAX,
                Some(l) => match l(None, &f.vars)? {
                    V::Val(Value::Int(n)) => n.max(0) as u64,
                    _ => 0,
                },
            };
            if left > 0 {
                let Frame { vars, key, .. } = f;
                visit_plan_with(tx, &table, &access, &pass, vars, key, order, &mut |row| {
                    for (a, acc) in aggs.iter().zip(acc.iter_mut()) {
                        a.add(acc, row, vars)?;
                    }
                    left -= 1;
                    Ok(left > 0)
                })?;
            }
            for ((a, acc), (slot, ty, name)) in aggs.iter().zip(acc).zip(&into) {
                let v = a.finish(acc, name)?;
                f.vars[*slot] = fit(*ty, V::Val(v));
            }
            set_found(f, found, true);
            Ok(Flow::Next)
        })
    }

    fn update(
        &self,
        op: usize,
        table: &TableRef,
        access: &Access,
        sets: &[(usize, E)],
        int_key: Option<&E>,
    ) -> Run {
        let (at, found) = (self.at(op), self.found());
        let key = PointKey::new(table, access);
        let pure = access.pure_point();
        let cols: Vec<usize> = sets.iter().map(|(c, _)| *c).collect();
        // The INT path of every SET, if each has one.
        let ints: Option<Vec<Int>> = sets.iter().map(|(_, e)| int(e)).collect();
        let vals: Vec<Val> = sets.iter().map(|(_, e)| val(e)).collect();
        let (t, a) = (table.clone(), access.clone());
        let general: Run = {
            let cols = cols.clone();
            let ints = sets
                .iter()
                .map(|(_, e)| int(e))
                .collect::<Option<Vec<Int>>>();
            Box::new(move |tx, f| {
                let point = pure && key.eval(&f.vars, &mut f.pkey)?;
                let keys = if point {
                    None
                } else {
                    Some(keys_of(&t, &a, tx, f)?)
                };
                let schema = &t.schema;
                let Frame {
                    vars,
                    out,
                    pkey,
                    ints: buf,
                    ..
                } = f;
                let mut apply = |tx: &mut Transaction<'_>, k: &dyn Values| {
                    tx.update_with(&t, k, |row| {
                        // Every SET sees the row as it was before the statement.
                        if let Some(ints) = &ints {
                            buf.clear();
                            {
                                let r = row.as_ref();
                                for i in ints {
                                    match i(Some(&r), vars) {
                                        Some(i) => buf.push(i),
                                        None => break,
                                    }
                                }
                            }
                            if buf.len() == cols.len() {
                                for (c, &i) in cols.iter().zip(buf.iter()) {
                                    row.set(*c, i)?;
                                }
                                return Ok(());
                            }
                        }
                        out.clear();
                        for (c, v) in cols.iter().zip(&vals) {
                            let v = v(Some(row.as_ref()), vars)?.stored(at)?;
                            out.push(coerce(schema, *c, v));
                        }
                        for (c, v) in cols.iter().zip(out.iter()) {
                            row.set(*c, v)?;
                        }
                        Ok(())
                    })
                };
                let got = match keys {
                    None => point_found(apply(tx, pkey))?,
                    Some(keys) => {
                        for k in &keys {
                            apply(tx, k)?;
                        }
                        !keys.is_empty()
                    }
                };
                set_found(f, found, got);
                Ok(Flow::Next)
            })
        };
        // The interpreter's INT point-key UPDATE: every SET an INT that reads no column.
        let (Some(k), Some(ints)) = (int_key.and_then(KeyPart::of), ints) else {
            return general;
        };
        let table = table.clone();
        Box::new(move |tx, f| {
            let Some(key) = k.eval(&f.vars) else {
                return general(tx, f);
            };
            f.ints.clear();
            for i in &ints {
                match i(None, &f.vars) {
                    Some(v) => f.ints.push(v),
                    None => return general(tx, f),
                }
            }
            let buf = &f.ints;
            let got = point_found(tx.update_with(&table, &key, |row| {
                for (c, &v) in cols.iter().zip(buf) {
                    row.set(*c, v)?;
                }
                Ok(())
            }))?;
            set_found(f, found, got);
            Ok(Flow::Next)
        })
    }

    fn insert(&self, op: usize, table: &TableRef, rows: &[Vec<E>]) -> Run {
        let at = self.at(op);
        /// One value of a row: its INT path, whether its column is DOUBLE, the variable it
        /// copies when it is one, and its value.
        struct Col {
            int: Option<Int>,
            float: bool,
            /// The column's offset in the row when it is INT: an INT value is stored there
            /// as `write_column` stores it, without the call.
            int_at: Option<usize>,
            var: Option<usize>,
            val: Val,
        }
        let rows: Vec<Vec<Col>> = rows
            .iter()
            .map(|r| {
                r.iter()
                    .enumerate()
                    .map(|(c, e)| Col {
                        int: int(e),
                        float: table.schema.columns()[c].ty == ColumnType::Float,
                        int_at: (table.schema.columns()[c].ty == ColumnType::Int)
                            .then(|| table.schema.columns()[c].offset),
                        var: match e {
                            E::Var(v) => Some(*v),
                            _ => None,
                        },
                        val: val(e),
                    })
                    .collect()
            })
            .collect();
        let table = table.clone();
        if rows.iter().all(|r| r.len() == table.schema.columns().len()) {
            // Every column given: the row is written in place (`Transaction::insert_with`),
            // each value as `encode_row` writes it (`write_column` coerces INT to DOUBLE as
            // `coerce` does), the first error computing a value before any a column refuses.
            return Box::new(move |tx, f| {
                for r in &rows {
                    let vars = &f.vars;
                    tx.insert_with(&table, |schema, row| {
                        let mut refused = Ok(());
                        for (c, col) in r.iter().enumerate() {
                            let wrote = if let Some(i) =
                                col.int.as_ref().and_then(|i| i(None, vars))
                            {
                                match col.int_at {
                                    Some(o) => {
                                        crate::schema::TableSchema::write_int_at(row, o, i);
                                        Ok(())
                                    }
                                    None => schema.write_column(row, c, ValueRef::Int(i)),
                                }
                            } else if let Some(V::Val(Value::Str(s))) = col.var.map(|v| &vars[v]) {
                                schema.write_column(row, c, ValueRef::Str(s))
                            } else {
                                let v = (col.val)(None, vars)?.stored(at)?;
                                schema.write_column(row, c, v.to_value_ref())
                            };
                            if refused.is_ok() {
                                refused = wrote;
                            }
                        }
                        Ok(refused)
                    })?;
                }
                Ok(Flow::Next)
            });
        }
        Box::new(move |tx, f| {
            for r in &rows {
                // Values overwrite the last row's in place where they can (`Proc::general`).
                f.out.truncate(r.len());
                for (c, col) in r.iter().enumerate() {
                    let i = col.int.as_ref().and_then(|i| i(None, &f.vars));
                    let v = match (i, f.out.get_mut(c)) {
                        (Some(i), Some(Value::Int(x))) if !col.float => {
                            *x = i;
                            continue;
                        }
                        (Some(i), _) => coerce(&table.schema, c, Value::Int(i)),
                        (None, slot) => {
                            if let (Some(Value::Str(dst)), Some(v)) = (slot, col.var) {
                                if let V::Val(Value::Str(src)) = &f.vars[v] {
                                    dst.clear();
                                    dst.push_str(src);
                                    continue;
                                }
                            }
                            let v = (col.val)(None, &f.vars)?.stored(at)?;
                            coerce(&table.schema, c, v)
                        }
                    };
                    match f.out.get_mut(c) {
                        Some(slot) => *slot = v,
                        None => f.out.push(v),
                    }
                }
                tx.insert(&table, f.out.as_slice())?;
            }
            Ok(Flow::Next)
        })
    }

    fn delete(&self, table: &TableRef, access: &Access) -> Run {
        let found = self.found();
        let key = PointKey::new(table, access);
        let pure = access.pure_point();
        let (table, access) = (table.clone(), access.clone());
        Box::new(move |tx, f| {
            let got = if pure && key.eval(&f.vars, &mut f.pkey)? {
                point_found(tx.delete(&table, &f.pkey))?
            } else {
                let keys = keys_of(&table, &access, tx, f)?;
                for k in &keys {
                    tx.delete(&table, k.as_slice())?;
                }
                !keys.is_empty()
            };
            set_found(f, found, got);
            Ok(Flow::Next)
        })
    }

    fn assign(&self, slot: usize, value: &E) -> Run {
        let ty = self.ty(slot);
        let general: Run = match (ty, int(value)) {
            (Ty::Int, Some(i)) => {
                let v = val(value);
                Box::new(move |_, f| {
                    match i(None, &f.vars) {
                        Some(i) => set_int(&mut f.vars[slot], i),
                        None => f.vars[slot] = fit(ty, v(None, &f.vars)?),
                    }
                    Ok(Flow::Next)
                })
            }
            _ => {
                let v = val(value);
                Box::new(move |_, f| {
                    f.vars[slot] = fit(ty, v(None, &f.vars)?);
                    Ok(Flow::Next)
                })
            }
        };
        match value {
            // `arr := arr || x` appends in place.
            E::Append(a, x) if *a == slot => {
                let x = val(x);
                Box::new(move |tx, f| {
                    let v = x(None, &f.vars)?;
                    if let (V::IntArr(xs), V::Val(Value::Int(i))) = (&mut f.vars[slot], &v) {
                        xs.push(*i);
                        return Ok(Flow::Next);
                    }
                    general(tx, f)
                })
            }
            _ => general,
        }
    }

    fn for_rows(
        &self,
        op: usize,
        read: &Read,
        fields: &[usize],
        body: &[Stmt],
        prefetch: &[Prefetch],
    ) -> Option<Run> {
        // Over aggregates the interpreter reports an error at run time; such a procedure
        // stays interpreted.
        let Items::Exprs(es) = &read.items else {
            return None;
        };
        let rows = self.rows(op, read, es);
        // In a slice the loop runs whole, as `Proc::run_slice` runs it.
        let body = Cx {
            p: self.p,
            mask: None,
        }
        .block(body)?;
        let (fields, prefetch) = (fields.to_vec(), prefetch.to_vec());
        let ints = Warm::of(&prefetch);
        Some(Box::new(move |tx, f| {
            // All rows are read before the body runs (`Proc::general`).
            let width = fields.len();
            let mut buf = std::mem::take(&mut f.loop_rows);
            buf.clear();
            let mut n = 0usize;
            let got = rows(tx, f, &mut |vals| {
                buf.append(vals);
                n += 1;
                Ok(true)
            });
            let r = got.map_err(Box::new).and_then(|()| {
                for j in 0..n {
                    if !prefetch.is_empty() && j % PREFETCH_MAX as usize == 0 {
                        let batch = &buf[j * width..];
                        let upto = (n - j).min(PREFETCH_MAX as usize);
                        let batch = &batch[..upto * width];
                        match &ints {
                            Some(w) => w.warm(upto, None, tx, f, |i, vars| {
                                let row = &batch[i * width..(i + 1) * width];
                                for (&slot, v) in fields.iter().zip(row) {
                                    assign(&mut vars[slot], v.to_value_ref());
                                }
                            }),
                            None => warm_rows(&fields, batch, &prefetch, tx, f),
                        }
                    }
                    crate::query::cancel::tick()?;
                    let row = &buf[j * width..(j + 1) * width];
                    for (&slot, v) in fields.iter().zip(row) {
                        assign(&mut f.vars[slot], v.to_value_ref());
                    }
                    if body(tx, f)? == Flow::Return {
                        return Ok(Flow::Return);
                    }
                }
                Ok(Flow::Next)
            });
            f.loop_rows = buf;
            r
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::{IndexKind, TableSchema};

    /// A text value starts at the capacity the expression's longest value so far needed
    /// (`val`'s hint): the capacity is only a start, each value is its own, whatever the
    /// lengths before it (longer, shorter, the cap passed).
    #[test]
    fn a_text_value_is_its_own_whatever_the_capacity_it_starts_at() {
        let e = E::Substr(
            Box::new(E::Concat(
                Box::new(E::Var(0)),
                Box::new(E::Lit(Value::Str("|".into()))),
            )),
            Box::new(E::Lit(Value::Int(1))),
            Some(Box::new(E::Var(1))),
        );
        let f = val(&e);
        for (text, keep) in [
            ("a".repeat(40), 100),
            ("b".to_string(), 100),
            ("c".repeat(TEXT_HINT_MAX * 2), 5),
            ("d".repeat(TEXT_HINT_MAX * 2), i64::from(u16::MAX)),
            (String::new(), 100),
            ("é".repeat(30), 10),
        ] {
            let vars = [V::Val(Value::Str(text.clone())), V::Val(Value::Int(keep))];
            let want: String = format!("{text}|").chars().take(keep as usize).collect();
            match f(None, &vars).unwrap() {
                V::Val(Value::Str(got)) => assert_eq!(got, want),
                other => panic!("not text: {other:?}"),
            }
        }
    }

    /// A point key encoded by `PointKey::eval`'s INT path reads back through `at`, `visit`
    /// and `single` as the INTs it holds, and key encoding takes its bytes only where the
    /// general path would write the same ones: an all-INT index of its width.
    #[test]
    fn an_encoded_point_key_is_the_key_its_values_encode_to() {
        let two = TableSchema::new("u")
            .column("k", ColumnType::Int)
            .column("j", ColumnType::Int)
            .primary_key_with(&["k", "j"], IndexKind::Ordered)
            .build()
            .unwrap();
        let k = PointKeyBuf::of_ints(&[-3, i64::MAX]);
        assert_eq!(k.count(), 2);
        assert_eq!(k.at(0), Some(ValueRef::Int(-3)));
        assert_eq!(k.at(1), Some(ValueRef::Int(i64::MAX)));
        assert_eq!(k.at(2), None);
        assert_eq!(k.single(), None);
        let mut seen = Vec::new();
        k.visit(&mut |v| {
            seen.push(v.to_value());
            Ok(())
        })
        .unwrap();
        assert_eq!(seen, vec![Value::Int(-3), Value::Int(i64::MAX)]);
        let (mut fast, mut general) = (Vec::new(), Vec::new());
        two.encode_key_values(0, &k, &mut fast).unwrap();
        two.encode_key_values(0, seen.as_slice(), &mut general)
            .unwrap();
        assert_eq!(fast, general);
        // One INT for a two-column index: not taken as bytes, the arity error as for values.
        let one = PointKeyBuf::of_ints(&[5]);
        assert_eq!(one.single(), Some(ValueRef::Int(5)));
        let e = two.encode_key_values(0, &one, &mut fast).unwrap_err();
        let v = two
            .encode_key_values(0, &[Value::Int(5)][..], &mut general)
            .unwrap_err();
        assert_eq!(e.to_string(), v.to_string());
        // Values (the fallback) are encoded as values.
        let vals = PointKeyBuf {
            vals: vec![Value::Int(1), Value::Int(2)],
            len: 16,
            ..PointKeyBuf::default()
        };
        assert_eq!(vals.encoded(crate::value::sealed::Token), None);
        two.encode_key_values(0, &vals, &mut fast).unwrap();
        two.encode_key_values(0, &[Value::Int(1), Value::Int(2)][..], &mut general)
            .unwrap();
        assert_eq!(fast, general);
    }
}
