//! The interpreter: runs a compiled procedure inside a transaction of any protocol.
//!
//! Nothing is looked up by name here, and a statement allocates nothing of its own on the
//! point-key paths: keys and computed values go to buffers of the [`Frame`], which lives for
//! the whole call. Strings are the exception (a `VARCHAR` value is a `String`), as are scans
//! that must collect keys before they write.

use super::ir::{Items, Prefetch, Proc, Read, Stmt, PREFETCH_MAX};
use crate::error::{Error, Result};
use crate::query::expr::{eval_in, eval_int, holds, value_of, Ty, E, V};
use crate::query::{coerce, sql_error, visit_plan, SqlPos};
use crate::txn::Transaction;
use crate::value::Value;
use crate::value::{ToValueRef, ValueRef};

/// The variables of one call, plus scratch buffers reused by every statement.
pub(crate) struct Frame {
    pub vars: Vec<V>,
    pub(super) out: Vec<Value>,
    pub(super) key: Vec<Value>,
    /// A compiled point key (`compile::PointKey`).
    pub(super) pkey: super::compile::PointKeyBuf,
    /// INT results of a statement's expressions (the fast UPDATE path).
    pub(super) ints: Vec<i64>,
    /// The values of the `RETURN` that ended the call.
    pub(super) ret: Vec<Value>,
    /// Keys a loop warms (`warm`).
    warm: Vec<Vec<Value>>,
    /// Keys a compiled loop warms (`compile::Warm`).
    pub(super) pwarm: Vec<super::compile::PointKeyBuf>,
    /// The rows of a `FOR r IN SELECT` loop, kept for the next call (a nested such loop
    /// takes an empty one of its own).
    pub(super) loop_rows: Vec<Value>,
    /// `healing`'s memo of the call's operations, across the runs of one commit
    /// (`memo.rs`).
    pub(super) memo: super::memo::FrameMemo,
}

/// How a statement ended. `RETURN`'s values wait in `Frame::ret`, so a statement's result
/// (`Step`) is two words, returned in registers: with a `Vec` inside and `Error` (about
/// 100 bytes) as the error type, every statement's result went through memory.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Flow {
    Next,
    Return,
}

/// A statement's result; errors are boxed (rare, and it keeps `Step` small).
pub(super) type Step = std::result::Result<Flow, Box<Error>>;

/// The zero value of a type (a declared variable without an initial value starts here:
/// there is no NULL).
pub(crate) fn zero(ty: Ty) -> V {
    match ty {
        Ty::Int => V::Val(Value::Int(0)),
        Ty::Float => V::Val(Value::Float(0.0)),
        Ty::Str => V::Val(Value::Str(String::new())),
        Ty::Bool => V::Bool(false),
        Ty::IntArray => V::IntArr(Vec::new()),
        Ty::FloatArray | Ty::StrArray => V::Arr(Vec::new()),
    }
}

/// Stores an integer into a slot in place when it already holds one: building a `V` on the
/// stack and copying it in costs a store-forwarding stall on every loop iteration.
#[inline]
pub(super) fn set_int(slot: &mut V, i: i64) {
    match slot {
        V::Val(Value::Int(x)) => *x = i,
        s => *s = V::Val(Value::Int(i)),
    }
}

/// Warms the point accesses `prefetch` of a loop over `lo..=hi` (the first `PREFETCH_MAX`
/// iterations): each access's keys, evaluated with the loop variable at each value, go to
/// one `Transaction::prefetch`. Changes no result: a key that does not evaluate (an index
/// past an array's end) is left out, and a failed prefetch is the loop's own first access
/// to report.
#[inline(never)]
pub(super) fn warm(
    slot: usize,
    lo: i64,
    hi: i64,
    prefetch: &[Prefetch],
    tx: &mut Transaction<'_>,
    f: &mut Frame,
) {
    warm_keys(prefetch, warm_iters(lo, hi), tx, f, |i, vars| {
        set_int(&mut vars[slot], lo + i as i64)
    });
}

/// How many iterations of `FOR i IN lo..hi` a loop warms (at most `PREFETCH_MAX`).
pub(super) fn warm_iters(lo: i64, hi: i64) -> usize {
    let last = hi.min(lo.saturating_add(PREFETCH_MAX - 1));
    usize::try_from(last - lo + 1).unwrap_or(0)
}

/// The keys of `prefetch` for `iters` loop iterations, one `Transaction::prefetch` per
/// access: `bind(i, vars)` gives the loop's variables their values for iteration `i`, then
/// each access's key is evaluated (a key that does not evaluate is left out).
fn warm_keys(
    prefetch: &[Prefetch],
    iters: usize,
    tx: &mut Transaction<'_>,
    f: &mut Frame,
    mut bind: impl FnMut(usize, &mut [V]),
) {
    let mut keys = std::mem::take(&mut f.warm);
    for p in prefetch {
        let mut n = 0;
        for i in 0..iters {
            bind(i, &mut f.vars);
            if keys.len() <= n {
                keys.push(Vec::new());
            }
            let k = &mut keys[n];
            k.clear();
            let whole = p.key.iter().all(|e| match value_of(e, None, &f.vars) {
                Ok(V::Val(v)) => {
                    k.push(v);
                    true
                }
                _ => false,
            });
            n += usize::from(whole);
        }
        let _ = tx.prefetch(&p.table, &keys[..n]);
    }
    f.warm = keys;
}

/// `v` into a variable, in place where the slot already holds one of its kind (an INT
/// overwritten, text copied into the old buffer): no allocation per read or loop row.
#[inline]
pub(super) fn assign(slot: &mut V, v: ValueRef<'_>) {
    match (slot, v) {
        (V::Val(Value::Int(x)), ValueRef::Int(i)) => *x = i,
        (V::Val(Value::Str(old)), ValueRef::Str(new)) => {
            old.clear();
            old.push_str(new);
        }
        (slot, v) => *slot = V::Val(v.to_value()),
    }
}

/// Warms the point accesses `prefetch` of a `FOR r IN SELECT` loop for the rows in `batch`
/// (`fields.len()` values each): each access's keys, evaluated with the row's values in
/// the loop's fields, go to one `Transaction::prefetch`, as `warm` does for a range loop.
#[inline(never)]
pub(super) fn warm_rows(
    fields: &[usize],
    batch: &[Value],
    prefetch: &[Prefetch],
    tx: &mut Transaction<'_>,
    f: &mut Frame,
) {
    let width = fields.len();
    let iters = batch.len().checked_div(width).unwrap_or(0);
    warm_keys(prefetch, iters, tx, f, |i, vars| {
        for (&slot, v) in fields.iter().zip(&batch[i * width..(i + 1) * width]) {
            assign(&mut vars[slot], v.to_value_ref());
        }
    });
}

/// `v` stored into a variable of type `ty` (an INT widens to DOUBLE).
pub(super) fn fit(ty: Ty, v: V) -> V {
    match (ty, v) {
        (Ty::Float, V::Val(Value::Int(i))) => V::Val(Value::Float(i as f64)),
        (_, v) => v,
    }
}

impl Proc {
    /// A frame for one call; the caller fills the parameter slots.
    pub(crate) fn frame(&self) -> Frame {
        Frame {
            vars: self.vars.iter().map(|(_, t)| zero(*t)).collect(),
            out: Vec::new(),
            key: Vec::new(),
            pkey: Default::default(),
            ints: Vec::new(),
            ret: Vec::new(),
            warm: Vec::new(),
            pwarm: Vec::new(),
            loop_rows: Vec::new(),
            memo: Default::default(),
        }
    }

    fn at(&self, op: usize) -> SqlPos {
        SqlPos {
            line: self.ops[op].line,
            column: 0,
        }
    }

    /// Runs the body in `tx` with the parameters already in `f`; returns the values of
    /// `RETURN` (none if the body ends without one).
    pub(crate) fn run(&self, tx: &mut Transaction<'_>, f: &mut Frame) -> Result<Vec<Value>> {
        self.start(f)?;
        match self.block(&self.body, tx, f).map_err(|e| *e)? {
            Flow::Return => Ok(std::mem::take(&mut f.ret)),
            Flow::Next => Ok(Vec::new()),
        }
    }

    /// Gives every variable but the parameters its initial value (a call's start).
    pub(crate) fn start(&self, f: &mut Frame) -> Result<()> {
        self.reset_locals(f);
        for (slot, init) in &self.inits {
            if let Some(e) = init {
                let v = eval_in(e, None, &f.vars)?;
                f.vars[*slot] = fit(self.vars[*slot].1, v);
            }
        }
        Ok(())
    }

    /// A PACMAN piece's start: what `start` gives the slots the piece reads
    /// (`piece::run_start`), the others left as they were.
    pub(crate) fn start_some(&self, f: &mut Frame, rs: &super::piece::RunStart) -> Result<()> {
        self.reset_slots(f, &rs.reset);
        for &i in &rs.inits {
            if let Some((slot, Some(e))) = self.inits.get(i) {
                let v = eval_in(e, None, &f.vars)?;
                f.vars[*slot] = fit(self.vars[*slot].1, v);
            }
        }
        Ok(())
    }

    /// Every slot after the parameters that some statement reads (`Proc::reset`) back to
    /// its type's zero value (a call's start), keeping text and array storage from the last
    /// call.
    pub(super) fn reset_locals(&self, f: &mut Frame) {
        self.reset_slots(f, &self.reset);
    }

    /// `reset_locals` for the slots `slots`.
    fn reset_slots(&self, f: &mut Frame, slots: &[usize]) {
        for &slot in slots {
            let (Some(v), Some((_, ty))) = (f.vars.get_mut(slot), self.vars.get(slot)) else {
                continue;
            };
            match (v, ty) {
                (V::Val(Value::Int(x)), Ty::Int) => *x = 0,
                (V::Bool(b), Ty::Bool) => *b = false,
                // Text starts empty, keeping its buffer from the last call.
                (V::Val(Value::Str(s)), Ty::Str) => s.clear(),
                // A declared array starts empty, keeping its storage from the last call.
                (V::IntArr(xs), Ty::IntArray) => xs.clear(),
                (v, ty) => *v = zero(*ty),
            }
        }
    }

    /// Runs one PACMAN piece (thesis §4.4.1; `procedure/slice.rs`) in `tx`: the statements
    /// whose operation id `mask` marks, in program order, with the frame already started and
    /// its imports copied in. A marked `IF` or `FOR i IN` runs its header and the marked
    /// statements of its body; a marked `FOR r IN SELECT` runs whole (its body's operations
    /// are in its slice). A `RETURN` reached ends the piece.
    pub(crate) fn run_slice(
        &self,
        tx: &mut Transaction<'_>,
        f: &mut Frame,
        mask: &[bool],
    ) -> Result<()> {
        self.slice_block(&self.body, tx, f, mask)
            .map(drop)
            .map_err(|e| *e)
    }

    fn slice_block(
        &self,
        stmts: &[Stmt],
        tx: &mut Transaction<'_>,
        f: &mut Frame,
        mask: &[bool],
    ) -> Step {
        for s in stmts {
            if !mask.get(super::graph::op_of(s)).copied().unwrap_or(false) {
                continue;
            }
            let flow = match s {
                Stmt::If {
                    arms,
                    otherwise,
                    switch,
                    ..
                } => {
                    let body = self.arm_of(arms, otherwise, switch.as_deref(), &f.vars)?;
                    self.slice_block(body, tx, f, mask)?
                }
                Stmt::ForRange {
                    slot, lo, hi, body, ..
                } => {
                    let int = |e| match eval_in(e, None, &f.vars) {
                        Ok(V::Val(Value::Int(i))) => Ok(i),
                        Ok(_) => Ok(0),
                        Err(e) => Err(Box::new(e)),
                    };
                    let (lo, hi) = (int(lo)?, int(hi)?);
                    let mut flow = Flow::Next;
                    let mut i = lo;
                    while i <= hi && flow == Flow::Next {
                        set_int(&mut f.vars[*slot], i);
                        flow = self.slice_block(body, tx, f, mask)?;
                        if i == hi {
                            break;
                        }
                        i += 1;
                    }
                    flow
                }
                _ => self.stmt(s, tx, f)?,
            };
            if flow == Flow::Return {
                return Ok(Flow::Return);
            }
        }
        Ok(Flow::Next)
    }

    /// The body an `IF` runs: the first arm whose condition holds, else `otherwise`.
    #[inline]
    fn arm_of<'s>(
        &self,
        arms: &'s [(E, Vec<Stmt>)],
        otherwise: &'s [Stmt],
        switch: Option<&super::ir::Switch>,
        vars: &[V],
    ) -> std::result::Result<&'s [Stmt], Box<Error>> {
        if let Some(sw) = switch {
            if let Some(x) = eval_int(&sw.on, None, vars) {
                let arm = x
                    .checked_sub(sw.lo)
                    .and_then(|d| usize::try_from(d).ok())
                    .and_then(|d| sw.arm.get(d))
                    .map_or(arms.len(), |&a| a as usize);
                return Ok(arms.get(arm).map_or(otherwise, |(_, body)| body));
            }
        }
        for (c, body) in arms {
            if holds(c, None, vars)? {
                return Ok(body);
            }
        }
        Ok(otherwise)
    }

    fn block(&self, stmts: &[Stmt], tx: &mut Transaction<'_>, f: &mut Frame) -> Step {
        for s in stmts {
            if self.stmt(s, tx, f)? == Flow::Return {
                return Ok(Flow::Return);
            }
        }
        Ok(Flow::Next)
    }

    #[inline]
    fn set_found(&self, f: &mut Frame, found: bool) {
        match &mut f.vars[self.nparams] {
            V::Bool(b) => *b = found,
            s => *s = V::Bool(found),
        }
    }

    fn limit(&self, r: &Read, vars: &[V]) -> Result<u64> {
        Ok(match &r.limit {
            None => u64::MAX,
            Some(e) => match eval_in(e, None, vars)? {
                V::Val(Value::Int(n)) => n.max(0) as u64,
                _ => 0,
            },
        })
    }

    /// Calls `each` with the values of `r`'s items for each matching row, up to its limit,
    /// until `each` returns false; the values are in `out`.
    fn rows(
        &self,
        op: usize,
        r: &Read,
        es: &[E],
        tx: &mut Transaction<'_>,
        f: &mut Frame,
        each: &mut dyn FnMut(&[Value]) -> Result<bool>,
    ) -> Result<()> {
        let mut left = self.limit(r, &f.vars)?;
        if left == 0 {
            return Ok(());
        }
        let at = self.at(op);
        let Frame { vars, out, key, .. } = f;
        visit_plan(tx, &r.table, &r.access, vars, key, r.order, &mut |row| {
            out.clear();
            for e in es {
                out.push(value_of(e, Some(row), vars)?.stored(at)?);
            }
            left -= 1;
            Ok(each(out)? && left > 0)
        })
    }

    /// The statements a loop body runs most (point reads of columns, IF, integer
    /// assignments, integer FOR) in a small function; everything else in `general`, so the
    /// hot path does not pay for the large frame of the rare statements.
    #[inline]
    fn stmt(&self, s: &Stmt, tx: &mut Transaction<'_>, f: &mut Frame) -> Step {
        match s {
            Stmt::SelectInto {
                read: read @ Read {
                    int_key: Some(k), ..
                },
                into,
                ..
            } => match eval_int(k, None, &f.vars) {
                Some(key) => self.point_read(read, into, &key, tx, f),
                None => self.general(s, tx, f),
            },
            Stmt::SelectInto { read, into, .. }
                if read.access.pure_point()
                    && read.limit.is_none()
                    && read.cols.is_some()
                    && read
                        .access
                        .point_values(&read.table.schema, &f.vars, &mut f.key)? =>
            {
                let key = std::mem::take(&mut f.key);
                let r = self.point_read(read, into, key.as_slice(), tx, f);
                f.key = key;
                r
            }
            Stmt::Update {
                table,
                sets,
                int_key: Some(k),
                ..
            } => {
                let Some(key) = eval_int(k, None, &f.vars) else {
                    return self.general(s, tx, f);
                };
                f.ints.clear();
                for (_, e) in sets {
                    match eval_int(e, None, &f.vars) {
                        Some(v) => f.ints.push(v),
                        None => return self.general(s, tx, f),
                    }
                }
                let ints = &f.ints;
                let found = point_found(tx.update_with(table, &key, |row| {
                    for ((c, _), &v) in sets.iter().zip(ints) {
                        row.set(*c, v)?;
                    }
                    Ok(())
                }))?;
                self.set_found(f, found);
                Ok(Flow::Next)
            }
            Stmt::If {
                arms,
                otherwise,
                switch,
                ..
            } => {
                let body = self.arm_of(arms, otherwise, switch.as_deref(), &f.vars)?;
                self.block(body, tx, f)
            }
            _ => self.general(s, tx, f),
        }
    }

    /// A point read of plain columns into variables: no evaluator, no intermediate buffer.
    fn point_read<K: crate::value::Values + ?Sized>(
        &self,
        read: &Read,
        into: &[usize],
        key: &K,
        tx: &mut Transaction<'_>,
        f: &mut Frame,
    ) -> Step {
        let cols = read.cols.as_deref().unwrap_or_default();
        let vars = &mut f.vars;
        let got = tx.get_with(&read.table, key, |r| {
            for (&c, &slot) in cols.iter().zip(into) {
                // INT into INT in place: no temporary values through the stack.
                if let (V::Val(Value::Int(x)), Some(i)) = (&mut vars[slot], r.int_at(c)) {
                    *x = i;
                    continue;
                }
                match (self.vars[slot].1, r.get(c)) {
                    (Ty::Float, Some(ValueRef::Int(i))) => {
                        vars[slot] = V::Val(Value::Float(i as f64))
                    }
                    (_, Some(v)) => assign(&mut vars[slot], v),
                    (_, None) => {}
                }
            }
        })?;
        self.set_found(f, got.is_some());
        Ok(Flow::Next)
    }

    #[inline(never)]
    fn general(&self, s: &Stmt, tx: &mut Transaction<'_>, f: &mut Frame) -> Step {
        match s {
            Stmt::SelectInto { op, read, into } => match &read.items {
                Items::Exprs(es) => {
                    let mut got = false;
                    self.rows(*op, read, es, tx, f, &mut |_| {
                        got = true;
                        Ok(false)
                    })?;
                    if got {
                        for (i, &slot) in into.iter().enumerate() {
                            let v = std::mem::replace(&mut f.out[i], Value::Int(0));
                            f.vars[slot] = fit(self.vars[slot].1, V::Val(v));
                        }
                    }
                    self.set_found(f, got);
                }
                Items::Aggs(aggs) => {
                    let mut acc: Vec<Option<Value>> = vec![None; aggs.len()];
                    let mut left = self.limit(read, &f.vars)?;
                    if left > 0 {
                        let Frame { vars, key, .. } = f;
                        visit_plan(
                            tx,
                            &read.table,
                            &read.access,
                            vars,
                            key,
                            read.order,
                            &mut |row| {
                                for (a, acc) in aggs.iter().zip(acc.iter_mut()) {
                                    a.add(acc, row, vars)?;
                                }
                                left -= 1;
                                Ok(left > 0)
                            },
                        )?;
                    }
                    for ((a, acc), &slot) in aggs.iter().zip(acc).zip(into) {
                        let v = a.finish(acc, &self.vars[slot].0)?;
                        f.vars[slot] = fit(self.vars[slot].1, V::Val(v));
                    }
                    self.set_found(f, true);
                }
            },
            Stmt::Update {
                op,
                table,
                access,
                sets,
                ..
            } => {
                let at = self.at(*op);
                let point = access.pure_point()
                    && access.point_values(&table.schema, &f.vars, &mut f.key)?;
                let keys = if point {
                    None
                } else {
                    Some(keys_of(table, access, tx, f)?)
                };
                let schema = &table.schema;
                let Frame {
                    vars,
                    out,
                    key,
                    ints,
                    ..
                } = f;
                let mut apply = |tx: &mut Transaction<'_>, k: &[Value]| {
                    tx.update_with(table, k, |row| {
                        // Every SET expression sees the row as it was before the statement.
                        // Integers first: when every SET evaluates as INT (TPC-C's counters
                        // and balances), no `Value` is built for any of them.
                        ints.clear();
                        {
                            let r = row.as_ref();
                            for (_, e) in sets {
                                match eval_int(e, Some(&r), vars) {
                                    Some(i) => ints.push(i),
                                    None => break,
                                }
                            }
                        }
                        if ints.len() == sets.len() {
                            for ((c, _), &i) in sets.iter().zip(ints.iter()) {
                                row.set(*c, i)?;
                            }
                            return Ok(());
                        }
                        out.clear();
                        for (c, e) in sets {
                            let v = value_of(e, Some(row.as_ref()), vars)?.stored(at)?;
                            out.push(coerce(schema, *c, v));
                        }
                        for ((c, _), v) in sets.iter().zip(out.iter()) {
                            row.set(*c, v)?;
                        }
                        Ok(())
                    })
                };
                let found = match keys {
                    None => point_found(apply(tx, key.as_slice()))?,
                    Some(keys) => {
                        for k in &keys {
                            apply(tx, k)?;
                        }
                        !keys.is_empty()
                    }
                };
                self.set_found(f, found);
            }
            Stmt::Insert { op, table, rows } => {
                let at = self.at(*op);
                for r in rows {
                    // The row's values overwrite the last row's in place where they can
                    // (integers, text copied into the old buffer): no allocation per value.
                    f.out.truncate(r.len());
                    for (c, e) in r.iter().enumerate() {
                        let v = match (eval_int(e, None, &f.vars), f.out.get_mut(c)) {
                            (Some(i), Some(Value::Int(x)))
                                if !matches!(
                                    table.schema.columns()[c].ty,
                                    crate::schema::ColumnType::Float
                                ) =>
                            {
                                *x = i;
                                continue;
                            }
                            (Some(i), _) => coerce(&table.schema, c, Value::Int(i)),
                            (None, slot) => {
                                if let (Some(Value::Str(dst)), E::Var(v)) = (slot, e) {
                                    if let V::Val(Value::Str(src)) = &f.vars[*v] {
                                        dst.clear();
                                        dst.push_str(src);
                                        continue;
                                    }
                                }
                                let v = eval_in(e, None, &f.vars)?.stored(at)?;
                                coerce(&table.schema, c, v)
                            }
                        };
                        match f.out.get_mut(c) {
                            Some(slot) => *slot = v,
                            None => f.out.push(v),
                        }
                    }
                    tx.insert(table, f.out.as_slice())?;
                }
            }
            Stmt::Delete { table, access, .. } => {
                let found = if access.pure_point()
                    && access.point_values(&table.schema, &f.vars, &mut f.key)?
                {
                    point_found(tx.delete(table, f.key.as_slice()))?
                } else {
                    let keys = keys_of(table, access, tx, f)?;
                    for k in &keys {
                        tx.delete(table, k.as_slice())?;
                    }
                    !keys.is_empty()
                };
                self.set_found(f, found);
            }
            Stmt::Assign { slot, value, .. } => {
                if let E::Append(a, x) = value {
                    if a == slot {
                        // `arr := arr || x` appends in place.
                        let x = value_of(x, None, &f.vars)?;
                        if let (V::IntArr(xs), V::Val(Value::Int(i))) = (&mut f.vars[*slot], &x) {
                            xs.push(*i);
                            return Ok(Flow::Next);
                        }
                    }
                }
                if self.vars[*slot].1 == Ty::Int {
                    if let Some(i) = eval_int(value, None, &f.vars) {
                        set_int(&mut f.vars[*slot], i);
                        return Ok(Flow::Next);
                    }
                }
                let v = value_of(value, None, &f.vars)?;
                f.vars[*slot] = fit(self.vars[*slot].1, v);
            }
            // Handled by `stmt`, which never passes it here.
            Stmt::If { .. } => return self.stmt(s, tx, f),
            Stmt::ForRange {
                slot,
                lo,
                hi,
                body,
                prefetch,
                ..
            } => {
                let int = |v: V| match v {
                    V::Val(Value::Int(i)) => i,
                    _ => 0,
                };
                let (lo, hi) = (
                    int(eval_in(lo, None, &f.vars)?),
                    int(eval_in(hi, None, &f.vars)?),
                );
                if !prefetch.is_empty() && lo <= hi {
                    warm(*slot, lo, hi, prefetch, tx, f);
                }
                let mut i = lo;
                while i <= hi {
                    crate::query::cancel::tick()?;
                    set_int(&mut f.vars[*slot], i);
                    if self.block(body, tx, f)? == Flow::Return {
                        return Ok(Flow::Return);
                    }
                    // `hi` may be i64::MAX: stop before the increment overflows.
                    if i == hi {
                        break;
                    }
                    i += 1;
                }
            }
            Stmt::ForRows {
                op,
                read,
                fields,
                body,
                prefetch,
            } => {
                let Items::Exprs(es) = &read.items else {
                    return Err(Box::new(sql_error(
                        self.at(*op),
                        "FOR ... IN SELECT with aggregates is not supported".into(),
                    )));
                };
                // The query runs to completion before the body (PostgreSQL's semantics too):
                // the body's own writes cannot change which rows the loop visits. Its rows
                // go one after another into one buffer, `fields.len()` values each.
                let width = fields.len();
                let mut rows = std::mem::take(&mut f.loop_rows);
                rows.clear();
                let mut n = 0usize;
                let got = self.rows(*op, read, es, tx, f, &mut |vals| {
                    rows.extend_from_slice(vals);
                    n += 1;
                    Ok(true)
                });
                let r = got.map_err(Box::new).and_then(|()| {
                    for j in 0..n {
                        if !prefetch.is_empty() && j % PREFETCH_MAX as usize == 0 {
                            let batch = &rows[j * width..];
                            let upto = (n - j).min(PREFETCH_MAX as usize);
                            warm_rows(fields, &batch[..upto * width], prefetch, tx, f);
                        }
                        crate::query::cancel::tick()?;
                        let row = &rows[j * width..(j + 1) * width];
                        for (&slot, v) in fields.iter().zip(row) {
                            assign(&mut f.vars[slot], v.to_value_ref());
                        }
                        if self.block(body, tx, f)? == Flow::Return {
                            return Ok(Flow::Return);
                        }
                    }
                    Ok(Flow::Next)
                });
                f.loop_rows = rows;
                if r? == Flow::Return {
                    return Ok(Flow::Return);
                }
            }
            Stmt::Return { op, values } => {
                let at = self.at(*op);
                let mut out = Vec::with_capacity(values.len());
                for e in values {
                    out.push(eval_in(e, None, &f.vars)?.stored(at)?);
                }
                f.ret = out;
                return Ok(Flow::Return);
            }
            Stmt::Raise { message, .. } => {
                let message = match eval_in(message, None, &f.vars)? {
                    V::Val(Value::Str(s)) => s,
                    V::Val(v) => v.to_string(),
                    V::Bool(b) => b.to_string(),
                    V::Arr(_) | V::IntArr(_) => "array".into(),
                };
                return Err(Box::new(Error::ProcedureAbort {
                    procedure: self.name.clone(),
                    message,
                }));
            }
            Stmt::Rollback { .. } => {
                return Err(Box::new(Error::ProcedureAbort {
                    procedure: self.name.clone(),
                    message: "ROLLBACK".into(),
                }))
            }
        }
        Ok(Flow::Next)
    }
}

/// A point UPDATE's or DELETE's outcome as `FOUND`: done (true) or no such row (false);
/// any other error stands.
pub(super) fn point_found(r: Result<()>) -> std::result::Result<bool, Box<Error>> {
    match r {
        Ok(()) => Ok(true),
        Err(Error::NotFound { .. }) => Ok(false),
        Err(e) => Err(Box::new(e)),
    }
}

/// Primary keys of the rows `access` selects (for writes that cannot go by point key).
pub(super) fn keys_of(
    table: &crate::storage::TableRef,
    access: &crate::query::Access,
    tx: &mut Transaction<'_>,
    f: &mut Frame,
) -> Result<Vec<Vec<Value>>> {
    let pk = &table.schema.indexes()[0].columns;
    let mut keys = Vec::new();
    let Frame { vars, key, .. } = f;
    visit_plan(tx, table, access, vars, key, None, &mut |row| {
        let mut k = Vec::with_capacity(pk.len());
        for &c in pk {
            k.push(
                row.get(c)
                    .map(|v| v.to_value())
                    .ok_or_else(|| sql_error(SqlPos::default(), format!("no column #{c}")))?,
            );
        }
        keys.push(k);
        Ok(true)
    })?;
    Ok(keys)
}
