//! The compiled form of a procedure: tables resolved to handles, columns to positions,
//! variables to frame slots, every `WHERE` planned once (point key, key range or scan).
//!
//! Every operation carries an [`OpInfo`] that states which variables form its *access key*
//! (they decide which tuples it touches) and which are its *values* (they only decide what
//! it writes or computes). Transaction Healing (thesis §3.3) restores an operation whose key
//! inputs changed by re-running its lookup, and one whose value inputs changed by
//! recomputing only; PACMAN (§4.4) builds its flow/data dependencies from the same split.

use super::surface::{self, Def};
use crate::error::Result;
use crate::query::expr::{compile_in, Scope, Ty, E};
use crate::query::{condition, sql_error, Access, Agg, SqlPos};
use crate::schema::ColumnType;
use crate::shared::Shared;
use crate::storage::TableRef;
use crate::value::Value;
use sqlparser::ast::Expr;

/// Which role a variable plays in an operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum UseKind {
    /// Decides which tuples the operation accesses (a key, a bound, a predicate, a limit).
    Key,
    /// Decides what the operation writes, computes or returns.
    Value,
    /// Decides whether or how often nested operations run (an IF or loop condition).
    Control,
}

impl UseKind {
    /// The role's name as `explain` prints it: `key`, `value` or `control`.
    pub fn name(self) -> &'static str {
        match self {
            UseKind::Key => "key",
            UseKind::Value => "value",
            UseKind::Control => "control",
        }
    }
}

/// What the analyses need to know about one operation.
#[derive(Clone, Debug)]
pub struct OpInfo {
    /// Source line (1-based; 0 for procedures made with the builder).
    pub line: u64,
    /// The statement's text.
    pub text: String,
    /// Nesting depth (0 = top level).
    pub depth: usize,
    /// Variables read, with their role; sorted, no duplicates per (var, kind).
    pub uses: Vec<(usize, UseKind)>,
    /// Variables written.
    pub defs: Vec<usize>,
    /// Table accessed, if any.
    pub table: Option<String>,
    /// Reads or writes the database?
    pub access: Option<&'static str>,
    /// An `UPDATE` whose SET expressions read the row it writes (`SET bal = bal + v`): it
    /// reads the tuple before writing it (a read-write access, thesis §3.4.1).
    pub reads_row: bool,
    /// A FOR loop: the tables whose point accesses in its body it warms before running
    /// (`Prefetch`).
    pub warms: Vec<String>,
}

/// A select list: plain expressions, or aggregates over every matching row.
#[derive(Clone)]
pub(crate) enum Items {
    Exprs(Vec<E>),
    Aggs(Vec<Agg>),
}

#[derive(Clone)]
pub(crate) struct Read {
    pub table: TableRef,
    pub access: Access,
    pub items: Items,
    /// The items are plain columns (these): a point read copies them straight into the
    /// variables.
    pub cols: Option<Vec<usize>>,
    /// Ordered index and direction.
    pub order: Option<(usize, bool)>,
    pub limit: Option<E>,
    /// A point read of plain columns by a one-column INT primary key (this expression, when
    /// it evaluates to an INT): the interpreter's fast path. See [`int_point_key`].
    pub int_key: Option<E>,
}

/// A multi-way `IF x = c1 THEN ... ELSIF x = c2 ...` over one INT variable or array element
/// and distinct-enough INT literals, as a jump table (the chain tests its arms in order; the
/// table finds the first arm whose literal equals `x` in one step).
pub(crate) struct Switch {
    pub on: E,
    pub lo: i64,
    /// `arm[x - lo]`: the arm to run, or `arms.len()` for the ELSE branch.
    pub arm: Vec<u16>,
}

pub(crate) enum Stmt {
    /// `SELECT ... INTO`: the first matching row (aggregates: all), `FOUND` says if any.
    SelectInto {
        op: usize,
        read: Read,
        into: Vec<usize>,
    },
    Update {
        op: usize,
        table: TableRef,
        access: Access,
        sets: Vec<(usize, E)>,
        /// Set when the key is one INT primary-key column (this expression) and every SET
        /// stores an INT computed without reading the row: the interpreter's fast path.
        int_key: Option<E>,
    },
    Insert {
        op: usize,
        table: TableRef,
        rows: Vec<Vec<E>>,
    },
    Delete {
        op: usize,
        table: TableRef,
        access: Access,
    },
    Assign {
        op: usize,
        slot: usize,
        value: E,
    },
    If {
        op: usize,
        arms: Vec<(E, Vec<Stmt>)>,
        otherwise: Vec<Stmt>,
        switch: Option<Box<Switch>>,
    },
    ForRange {
        op: usize,
        slot: usize,
        lo: E,
        hi: E,
        body: Vec<Stmt>,
        /// Point accesses of the body to warm before the loop runs (`loop_prefetch`).
        prefetch: Vec<Prefetch>,
    },
    ForRows {
        op: usize,
        read: Read,
        fields: Vec<usize>,
        body: Vec<Stmt>,
        /// Point accesses of the body to warm, `PREFETCH_MAX` rows at a time
        /// (`loop_prefetch`; the query's rows are all read before the body runs).
        prefetch: Vec<Prefetch>,
    },
    Return {
        op: usize,
        values: Vec<E>,
    },
    Raise {
        op: usize,
        message: E,
    },
    Rollback {
        op: usize,
    },
}

/// A primary-key point access in a FOR loop's body whose key depends on nothing the body
/// writes: its keys for every iteration are known when the loop starts, so the loop warms
/// them first with one `Transaction::prefetch` (their cache misses overlap instead of
/// coming one iteration at a time: TPC-C New-Order's ITEM and STOCK rows, and the STOCK
/// rows of Stock-Level's loop over the order lines it selected).
#[derive(Clone)]
pub(crate) struct Prefetch {
    pub table: TableRef,
    /// The key, one expression per primary-key column.
    pub key: Vec<E>,
}

/// Most iterations a loop warms ahead (more would evict each other).
pub(crate) const PREFETCH_MAX: i64 = 32;

/// A compiled procedure.
pub(crate) struct Proc {
    pub name: String,
    /// Number of parameters: they occupy the first slots.
    pub nparams: usize,
    /// Every slot: parameters, `found`, declared variables, loop variables, row fields.
    pub vars: Vec<(String, Ty)>,
    /// Initial values of declared variables: (slot, expression).
    pub inits: Vec<(usize, Option<E>)>,
    pub body: Vec<Stmt>,
    pub ops: Vec<OpInfo>,
    /// The slots after the parameters that a call's start sets back to zero
    /// (`Proc::reset_locals`): those some statement or initial value reads. A slot nothing
    /// reads (YCSB's `SELECT ... INTO` targets, a `found` no statement tests) keeps what the
    /// last call left: no result can depend on it.
    pub reset: Vec<usize>,
}

/// Calls `f` on every statement of `body` and of the blocks nested in it, with whether it
/// runs once per iteration of the loop whose body this is (`direct`: not inside a nested
/// loop).
fn walk_loop_body<'a>(body: &'a [Stmt], direct: bool, f: &mut impl FnMut(&'a Stmt, bool)) {
    for s in body {
        f(s, direct);
        match s {
            Stmt::If {
                arms, otherwise, ..
            } => {
                for (_, b) in arms {
                    walk_loop_body(b, direct, f);
                }
                walk_loop_body(otherwise, direct, f);
            }
            Stmt::ForRange { body, .. } | Stmt::ForRows { body, .. } => {
                walk_loop_body(body, false, f)
            }
            _ => {}
        }
    }
}

/// The key expression of a pure point access on a one-column INT primary key.
fn int_point_key(t: &TableRef, a: &Access) -> Option<E> {
    let pk = &t.schema.indexes()[0].columns;
    match (a.pure_point(), pk.as_slice(), &a.point) {
        (true, &[c], Some(keys))
            if t.schema.columns()[c].ty == ColumnType::Int && keys.len() == 1 =>
        {
            Some(keys[0].clone())
        }
        _ => None,
    }
}

/// Longest jump table `switch` builds (entries, one `u16` each).
const SWITCH_SPAN: i64 = 1024;

/// The jump table of an `IF` chain whose every arm is `x = literal` (either side) for one
/// variable or loop-indexed array element `x`; `None` for anything else or fewer than three
/// arms (a test or two is as fast).
fn switch(arms: &[(E, Vec<Stmt>)]) -> Option<Box<Switch>> {
    if arms.len() < 3 || arms.len() >= u16::MAX as usize {
        return None;
    }
    let same = |a: &E, b: &E| match (a, b) {
        (E::Var(x), E::Var(y)) => x == y,
        (E::ElemVar(a, i, _), E::ElemVar(b, j, _)) => a == b && i == j,
        _ => false,
    };
    let mut on: Option<&E> = None;
    let mut lits = Vec::with_capacity(arms.len());
    for (c, _) in arms {
        let E::Bin(l, crate::query::expr::Op::Eq, r, _) = c else {
            return None;
        };
        let (x, n) = match (&**l, &**r) {
            (x, E::Lit(Value::Int(n))) | (E::Lit(Value::Int(n)), x) => (x, *n),
            _ => return None,
        };
        if !matches!(x, E::Var(_) | E::ElemVar(..)) || on.is_some_and(|o| !same(o, x)) {
            return None;
        }
        on = Some(x);
        lits.push(n);
    }
    let (lo, hi) = (*lits.iter().min()?, *lits.iter().max()?);
    if hi.checked_sub(lo)? >= SWITCH_SPAN {
        return None;
    }
    let none = arms.len() as u16;
    let mut arm = vec![none; (hi - lo + 1) as usize];
    for (k, n) in lits.iter().enumerate() {
        let e = &mut arm[(n - lo) as usize];
        if *e == none {
            *e = k as u16;
        }
    }
    Some(Box::new(Switch {
        on: on?.clone(),
        lo,
        arm,
    }))
}

/// Slot of the `found` variable (set by every SELECT INTO, UPDATE and DELETE).
pub(crate) const FOUND: &str = "found";

struct Compiler<'a> {
    db: &'a Shared,
    vars: Vec<(String, Ty)>,
    ops: Vec<OpInfo>,
    depth: usize,
    proc_name: String,
    /// Slot of `found`; the parameters are the slots before it.
    found_slot: usize,
}

/// The slots from `nparams` on that an operation (its `uses`: every expression of every
/// statement, conditions and loop bounds included) or an initial value reads, ascending.
fn read_locals(nparams: usize, ops: &[OpInfo], inits: &[(usize, Option<E>)]) -> Vec<usize> {
    let mut read: Vec<usize> = ops
        .iter()
        .flat_map(|o| o.uses.iter().map(|u| u.0))
        .collect();
    for e in inits.iter().filter_map(|(_, e)| e.as_ref()) {
        vars_of(e, &mut read);
    }
    read.retain(|&v| v >= nparams);
    read.sort_unstable();
    read.dedup();
    read
}

/// Every variable `e` reads.
pub(crate) fn vars_of(e: &E, out: &mut Vec<usize>) {
    match e {
        E::Var(v) | E::Len(v) => out.push(*v),
        E::ElemVar(v, i, _) => {
            out.push(*v);
            out.push(*i);
        }
        E::Elem(v, i, _) => {
            out.push(*v);
            vars_of(i, out);
        }
        E::Append(v, x) | E::AnyEq(x, v) => {
            out.push(*v);
            vars_of(x, out);
        }
        E::Col(_) | E::Lit(_) | E::Bool(_) => {}
        E::Neg(x) | E::Not(x) => vars_of(x, out),
        E::Concat(l, r) | E::Bin(l, _, r, _) => {
            vars_of(l, out);
            vars_of(r, out);
        }
        E::Substr(a, b, c) => {
            vars_of(a, out);
            vars_of(b, out);
            if let Some(c) = c {
                vars_of(c, out);
            }
        }
    }
}

fn type_of(t: ColumnType) -> Ty {
    Ty::of_column(t)
}

impl Compiler<'_> {
    fn scope<'s>(&'s self, t: Option<&'s TableRef>) -> Scope<'s> {
        Scope {
            table: t.map(|t| &t.schema),
            vars: &self.vars,
        }
    }

    fn expr(&self, e: &Expr, t: Option<&TableRef>) -> Result<(E, Ty)> {
        compile_in(e, self.scope(t))
    }

    fn slot(&self, name: &str, at: SqlPos) -> Result<usize> {
        self.vars
            .iter()
            .position(|(n, _)| n.eq_ignore_ascii_case(name))
            .ok_or_else(|| {
                sql_error(
                    at,
                    format!(
                        "unknown variable `{name}` (declare it in DECLARE) in procedure `{}`",
                        self.proc_name
                    ),
                )
            })
    }

    fn new_slot(&mut self, name: String, ty: Ty, at: SqlPos) -> Result<usize> {
        if self.vars.iter().any(|(n, _)| n.eq_ignore_ascii_case(&name)) {
            return Err(sql_error(
                at,
                format!("variable `{name}` is declared twice"),
            ));
        }
        self.vars.push((name, ty));
        Ok(self.vars.len() - 1)
    }

    fn table(&self, name: &str, at: SqlPos) -> Result<TableRef> {
        self.db
            .table(name)
            .map_err(|_| sql_error(at, format!("unknown table `{name}`")))
    }

    fn op(
        &mut self,
        s: &surface::Stmt,
        table: Option<&TableRef>,
        access: Option<&'static str>,
    ) -> usize {
        self.ops.push(OpInfo {
            line: s.at().line,
            text: s.describe(),
            depth: self.depth,
            uses: Vec::new(),
            defs: Vec::new(),
            table: table.map(|t| t.name().to_string()),
            access,
            reads_row: false,
            warms: Vec::new(),
        });
        self.ops.len() - 1
    }

    fn uses(&mut self, op: usize, e: &E, kind: UseKind) {
        let mut vs = Vec::new();
        vars_of(e, &mut vs);
        let u = &mut self.ops[op].uses;
        u.extend(vs.into_iter().map(|v| (v, kind)));
        u.sort();
        u.dedup();
    }

    fn access_uses(&mut self, op: usize, a: &Access) {
        if let Some(f) = &a.filter {
            self.uses(op, f, UseKind::Key);
        }
    }

    fn check_assign(&self, target: Ty, found: Ty, what: &str, at: SqlPos) -> Result<()> {
        if target.accepts(found) {
            Ok(())
        } else {
            Err(sql_error(
                at,
                format!(
                    "cannot assign {} to {what} of type {}",
                    found.name(),
                    target.name()
                ),
            ))
        }
    }

    fn filter(&self, f: &Option<Expr>, t: &TableRef) -> Result<Access> {
        let cond = match f {
            Some(e) => Some(condition(e, self.scope(Some(t)))?),
            None => None,
        };
        Ok(Access::plan(cond, &t.schema))
    }

    /// Compiles a row source; returns it with the output names and types of its items.
    fn read(&mut self, sel: &surface::Select, at: SqlPos) -> Result<(Read, Vec<(String, Ty)>)> {
        let t = self.table(&sel.table, at)?;
        let access = self.filter(&sel.filter, &t)?;
        let mut exprs = Vec::new();
        let mut aggs = Vec::new();
        let mut out = Vec::new();
        for (e, alias) in &sel.items {
            if let Expr::Wildcard(_) = e {
                for (i, c) in t.schema.columns().iter().enumerate() {
                    exprs.push(E::Col(i));
                    out.push((c.name.clone(), type_of(c.ty)));
                }
                continue;
            }
            let name = alias.clone().unwrap_or_else(|| match e {
                Expr::Identifier(id) => id.value.clone(),
                Expr::CompoundIdentifier(p) => {
                    p.last().map(|i| i.value.clone()).unwrap_or_default()
                }
                other => other.to_string(),
            });
            match Agg::compile(e, self.scope(Some(&t)))? {
                Some(a) => {
                    out.push((name, a.ty));
                    aggs.push(a);
                }
                None => {
                    let (c, ty) = self.expr(e, Some(&t))?;
                    if ty == Ty::Bool {
                        return Err(sql_error(at, format!("cannot select a boolean: {e}")));
                    }
                    out.push((name, ty));
                    exprs.push(c);
                }
            }
        }
        let items =
            match (exprs.is_empty(), aggs.is_empty()) {
                (_, true) => Items::Exprs(exprs),
                (true, false) => Items::Aggs(aggs),
                (false, false) => return Err(sql_error(
                    at,
                    "mixing aggregates and plain columns needs GROUP BY, which is not supported"
                        .into(),
                )),
            };
        let order = match &sel.order {
            None => None,
            Some((c, desc)) => {
                let index = t
                    .schema
                    .column_index(c)
                    .ok()
                    .and_then(|i| access.order_by_column(&t.schema, i));
                match index {
                    Some(i) => Some((i, *desc)),
                    None => {
                        return Err(sql_error(
                            at,
                            format!(
                                "ORDER BY `{c}`: only the primary key of `{}`, a column with a one-column B-tree index, or the key column after those `WHERE` fixes by equality can order rows",
                                t.name()
                            ),
                        ))
                    }
                }
            }
        };
        let limit = match &sel.limit {
            None => None,
            Some(l) => match self.expr(l, None)? {
                (e, Ty::Int) => Some(e),
                (_, ty) => {
                    return Err(sql_error(
                        at,
                        format!("LIMIT needs an INT, found {}", ty.name()),
                    ))
                }
            },
        };
        let cols = match &items {
            Items::Exprs(es) => es
                .iter()
                .map(|e| match e {
                    E::Col(c) => Some(*c),
                    _ => None,
                })
                .collect(),
            Items::Aggs(_) => None,
        };
        Ok((
            Read {
                int_key: match (&cols, &limit) {
                    (Some(_), None) => int_point_key(&t, &access),
                    _ => None,
                },
                table: t,
                access,
                items,
                cols,
                order,
                limit,
            },
            out,
        ))
    }

    fn read_uses(&mut self, op: usize, r: &Read) {
        self.access_uses(op, &r.access);
        if let Some(l) = &r.limit {
            self.uses(op, l, UseKind::Key);
        }
        let es: Vec<E> = match &r.items {
            Items::Exprs(es) => es.clone(),
            Items::Aggs(a) => a.iter().filter_map(|a| a.arg.clone()).collect(),
        };
        for e in &es {
            self.uses(op, e, UseKind::Value);
        }
    }

    fn block(&mut self, stmts: &[surface::Stmt]) -> Result<Vec<Stmt>> {
        stmts.iter().map(|s| self.stmt(s)).collect()
    }

    /// The point accesses of `body` (outside nested loops) whose key variables the body never
    /// writes, each (table, key) once, in order of first appearance.
    fn loop_prefetch(&self, body: &[Stmt]) -> Vec<Prefetch> {
        let mut written = Vec::new();
        let mut points = Vec::new();
        walk_loop_body(body, true, &mut |s, direct| {
            written.extend_from_slice(&self.ops[super::graph::op_of(s)].defs);
            let access = match s {
                Stmt::SelectInto { read, .. } => Some((&read.table, &read.access)),
                Stmt::Update { table, access, .. } | Stmt::Delete { table, access, .. } => {
                    Some((table, access))
                }
                _ => None,
            };
            if let (true, Some((t, a))) = (direct, access) {
                if let Some(key) = &a.point {
                    points.push((super::graph::op_of(s), t, key));
                }
            }
        });
        let mut out: Vec<Prefetch> = Vec::new();
        for (op, t, key) in points {
            let free = self.ops[op]
                .uses
                .iter()
                .filter(|u| u.1 == UseKind::Key)
                .all(|u| !written.contains(&u.0));
            let same = |p: &Prefetch| {
                p.table.id == t.id
                    && p.key.len() == key.len()
                    && p.key.iter().zip(key).all(|(a, b)| a.same(b))
            };
            if free && key.iter().all(|e| !e.reads_row()) && !out.iter().any(same) {
                out.push(Prefetch {
                    table: t.clone(),
                    key: key.clone(),
                });
            }
        }
        out
    }

    fn nested(&mut self, stmts: &[surface::Stmt]) -> Result<Vec<Stmt>> {
        self.depth += 1;
        let r = self.block(stmts);
        self.depth -= 1;
        r
    }

    fn found(&self) -> usize {
        self.found_slot
    }

    fn stmt(&mut self, s: &surface::Stmt) -> Result<Stmt> {
        use surface::Stmt as S;
        Ok(match s {
            S::SelectInto { sel, into, at } => {
                let (read, out) = self.read(sel, *at)?;
                if into.len() != out.len() {
                    return Err(sql_error(
                        *at,
                        format!(
                            "SELECT has {} values but INTO names {} variables",
                            out.len(),
                            into.len()
                        ),
                    ));
                }
                let mut slots = Vec::new();
                for (v, (name, ty)) in into.iter().zip(&out) {
                    let slot = self.slot(v, *at)?;
                    self.check_assign(
                        self.vars[slot].1,
                        *ty,
                        &format!("variable `{v}` (from `{name}`)"),
                        *at,
                    )?;
                    slots.push(slot);
                }
                let op = self.op(s, Some(&read.table), Some("read"));
                self.read_uses(op, &read);
                let found = self.found();
                self.ops[op].defs = slots.iter().copied().chain([found]).collect();
                Stmt::SelectInto {
                    op,
                    read,
                    into: slots,
                }
            }
            S::Update {
                table,
                sets,
                filter,
                at,
            } => {
                let t = self.table(table, *at)?;
                let access = self.filter(filter, &t)?;
                let pk = &t.schema.indexes()[0].columns;
                let mut cs = Vec::new();
                for (c, e) in sets {
                    let ci = t.schema.column_index(c).map_err(|_| {
                        sql_error(*at, format!("table `{}` has no column `{c}`", t.name()))
                    })?;
                    if pk.contains(&ci) {
                        return Err(sql_error(
                            *at,
                            format!("cannot update primary-key column `{}.{c}`; delete and insert instead", t.name()),
                        ));
                    }
                    let (x, ty) = self.expr(e, Some(&t))?;
                    self.check_assign(
                        type_of(t.schema.columns()[ci].ty),
                        ty,
                        &format!("column `{c}`"),
                        *at,
                    )?;
                    cs.push((ci, x));
                }
                let op = self.op(s, Some(&t), Some("write"));
                self.access_uses(op, &access);
                for (_, x) in &cs {
                    self.uses(op, x, UseKind::Value);
                }
                let found = self.found();
                self.ops[op].defs = vec![found];
                self.ops[op].reads_row = cs.iter().any(|(_, e)| e.reads_row());
                let int_sets = cs
                    .iter()
                    .all(|(c, e)| t.schema.columns()[*c].ty == ColumnType::Int && !e.reads_row());
                Stmt::Update {
                    int_key: int_sets.then(|| int_point_key(&t, &access)).flatten(),
                    op,
                    table: t,
                    access,
                    sets: cs,
                }
            }
            S::Insert {
                table,
                columns,
                rows,
                at,
            } => {
                let t = self.table(table, *at)?;
                let n = t.schema.columns().len();
                let order: Vec<usize> = if columns.is_empty() {
                    (0..n).collect()
                } else {
                    let mut order = vec![usize::MAX; n];
                    for (i, c) in columns.iter().enumerate() {
                        let ci = t.schema.column_index(c).map_err(|_| {
                            sql_error(*at, format!("table `{}` has no column `{c}`", t.name()))
                        })?;
                        order[ci] = i;
                    }
                    if let Some(m) = order.iter().position(|&o| o == usize::MAX) {
                        return Err(sql_error(
                            *at,
                            format!(
                                "no value for column `{}` (every column needs one)",
                                t.schema.columns()[m].name
                            ),
                        ));
                    }
                    order
                };
                let mut out = Vec::new();
                for row in rows {
                    if row.len() != n {
                        return Err(sql_error(
                            *at,
                            format!("{} values for {n} columns", row.len()),
                        ));
                    }
                    let mut r = Vec::with_capacity(n);
                    for (ci, &o) in order.iter().enumerate() {
                        let (x, ty) = self.expr(&row[o], None)?;
                        let c = &t.schema.columns()[ci];
                        self.check_assign(type_of(c.ty), ty, &format!("column `{}`", c.name), *at)?;
                        r.push(x);
                    }
                    out.push(r);
                }
                let op = self.op(s, Some(&t), Some("write"));
                let pk = t.schema.indexes()[0].columns.clone();
                for r in &out {
                    for (ci, x) in r.iter().enumerate() {
                        let kind = if pk.contains(&ci) {
                            UseKind::Key
                        } else {
                            UseKind::Value
                        };
                        self.uses(op, x, kind);
                    }
                }
                Stmt::Insert {
                    op,
                    table: t,
                    rows: out,
                }
            }
            S::Delete { table, filter, at } => {
                let t = self.table(table, *at)?;
                let access = self.filter(filter, &t)?;
                let op = self.op(s, Some(&t), Some("write"));
                self.access_uses(op, &access);
                let found = self.found();
                self.ops[op].defs = vec![found];
                Stmt::Delete {
                    op,
                    table: t,
                    access,
                }
            }
            S::Assign { var, value, at } => {
                let slot = self.slot(var, *at)?;
                if slot < self.found_slot {
                    // Parameters are read-only: a healed or replayed call must see them as given.
                    return Err(sql_error(
                        *at,
                        format!("parameter `{var}` cannot be assigned"),
                    ));
                }
                let (x, ty) = self.expr(value, None)?;
                self.check_assign(self.vars[slot].1, ty, &format!("variable `{var}`"), *at)?;
                let op = self.op(s, None, None);
                self.uses(op, &x, UseKind::Value);
                self.ops[op].defs = vec![slot];
                Stmt::Assign { op, slot, value: x }
            }
            S::If {
                arms,
                otherwise,
                at,
            } => {
                let op = self.op(s, None, None);
                let mut out = Vec::new();
                for (c, body) in arms {
                    let (x, ty) = self.expr(c, None)?;
                    if ty != Ty::Bool {
                        return Err(sql_error(
                            *at,
                            format!("IF needs a boolean condition, found {}", ty.name()),
                        ));
                    }
                    self.uses(op, &x, UseKind::Control);
                    out.push((x, self.nested(body)?));
                }
                let otherwise = self.nested(otherwise)?;
                Stmt::If {
                    op,
                    switch: switch(&out),
                    arms: out,
                    otherwise,
                }
            }
            S::ForRange {
                var,
                lo,
                hi,
                body,
                at,
            } => {
                let (l, lt) = self.expr(lo, None)?;
                let (h, ht) = self.expr(hi, None)?;
                if lt != Ty::Int || ht != Ty::Int {
                    return Err(sql_error(*at, "FOR ... IN a..b needs INT bounds".into()));
                }
                let slot = self.new_slot(var.clone(), Ty::Int, *at)?;
                let op = self.op(s, None, None);
                self.uses(op, &l, UseKind::Control);
                self.uses(op, &h, UseKind::Control);
                self.ops[op].defs = vec![slot];
                let body = self.nested(body)?;
                // The loop variable's name is free again after the loop.
                self.vars[slot].0 = format!("{var}#{slot}");
                let prefetch = self.loop_prefetch(&body);
                self.ops[op].warms = prefetch
                    .iter()
                    .map(|p| p.table.name().to_string())
                    .collect();
                Stmt::ForRange {
                    op,
                    slot,
                    lo: l,
                    hi: h,
                    body,
                    prefetch,
                }
            }
            S::ForRows { var, sel, body, at } => {
                let (read, out) = self.read(sel, *at)?;
                let mut fields = Vec::new();
                for (name, ty) in &out {
                    fields.push(self.new_slot(format!("{var}.{name}"), *ty, *at)?);
                }
                let op = self.op(s, Some(&read.table), Some("read"));
                self.read_uses(op, &read);
                self.ops[op].defs = fields.clone();
                let body = self.nested(body)?;
                for &f in &fields {
                    self.vars[f].0 = format!("{}#{f}", self.vars[f].0);
                }
                // The fields are defined by the loop, not the body: keys made of them and of
                // what the body does not write are known for every row before it runs.
                let prefetch = self.loop_prefetch(&body);
                self.ops[op].warms = prefetch
                    .iter()
                    .map(|p| p.table.name().to_string())
                    .collect();
                Stmt::ForRows {
                    op,
                    read,
                    fields,
                    body,
                    prefetch,
                }
            }
            S::Return { values, at } => {
                let mut out = Vec::new();
                for v in values {
                    let (x, ty) = self.expr(v, None)?;
                    if ty == Ty::Bool || ty.element().is_some() {
                        return Err(sql_error(*at, format!("cannot return {}", ty.name())));
                    }
                    out.push(x);
                }
                let op = self.op(s, None, None);
                for x in &out {
                    self.uses(op, x, UseKind::Value);
                }
                Stmt::Return { op, values: out }
            }
            S::Raise { message, .. } => {
                let (x, _) = self.expr(message, None)?;
                let op = self.op(s, None, None);
                self.uses(op, &x, UseKind::Value);
                Stmt::Raise { op, message: x }
            }
            S::Rollback { .. } => Stmt::Rollback {
                op: self.op(s, None, None),
            },
        })
    }
}

/// Compiles a definition against the database's tables.
pub(crate) fn compile(db: &Shared, def: &Def) -> Result<Proc> {
    let mut c = Compiler {
        db,
        vars: Vec::new(),
        ops: Vec::new(),
        depth: 0,
        proc_name: def.name.clone(),
        found_slot: 0,
    };
    for (n, ty) in &def.params {
        c.new_slot(n.clone(), *ty, def.at)?;
    }
    c.found_slot = c.new_slot(FOUND.into(), Ty::Bool, def.at)?;
    let mut inits = Vec::new();
    for (n, ty, init) in &def.decls {
        if ty.element().is_some() && (*ty != Ty::IntArray || init.is_some()) {
            return Err(sql_error(
                def.at,
                format!(
                    "variable `{n}`: a declared array must be INT[] and starts empty (no initial value)"
                ),
            ));
        }
        let init = match init {
            Some(e) => {
                let (x, t) = c.expr(e, None)?;
                c.check_assign(*ty, t, &format!("variable `{n}`"), def.at)?;
                Some(x)
            }
            None => None,
        };
        let slot = c.new_slot(n.clone(), *ty, def.at)?;
        inits.push((slot, init));
    }
    let body = c.block(&def.body)?;
    let reset = read_locals(def.params.len(), &c.ops, &inits);
    Ok(Proc {
        name: def.name.clone(),
        nparams: def.params.len(),
        vars: c.vars,
        inits,
        body,
        ops: c.ops,
        reset,
    })
}
