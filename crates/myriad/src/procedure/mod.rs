//! Stored procedures (thesis §3.2–3.3, §4.3–4.4).
//!
//! A procedure is written in SQL (`CREATE PROCEDURE name(p INT, ks BIGINT[]) AS $$ DECLARE
//! ... BEGIN ... END $$`, a PL/pgSQL-like body: `SELECT ... INTO`, `INSERT`, `UPDATE`,
//! `DELETE`, `:=`, `IF/ELSIF/ELSE`, `FOR i IN a..b LOOP`, `FOR r IN SELECT ... LOOP`,
//! `RETURN`, `RAISE EXCEPTION`, `ROLLBACK`) or with the Rust [`ProcedureBuilder`]. Both reach
//! one compiler, which resolves tables, columns and variables once and plans every `WHERE`
//! (point key, key range, scan) into an IR that [`Procedure::execute`] runs (compiled to
//! closures, or interpreted) inside a transaction of any protocol. Each IR operation records which variables are its access key
//! and which its values ([`OpInfo`]); [`Procedure::def_use`] gives the def-use graph that
//! Transaction Healing and PACMAN are built on; [`slice`](mod@slice) is PACMAN's static analysis (procedure
//! slices and the global dependency graph of blocks, thesis §4.4.1); [`healing`](mod@healing) is
//! Transaction Healing's (dependency graphs with control and own-write edges, loop instances, the
//! global validation order of tables, thesis §3.3, §3.4.5; no run time uses it yet).
//!
//! Differences from PL/pgSQL, all deliberate: there is no NULL, so a declared variable
//! starts at its type's zero value and a `SELECT ... INTO` that finds no row leaves its
//! variables unchanged and sets `found` to false; parameters cannot be assigned (a replayed
//! or healed call must see them as given); `RAISE` only raises exceptions (an abort).
//!
//! **Pipeline.** Two front ends make one definition (`surface.rs`: names unresolved,
//! expressions still `sqlparser` ASTs): `parse.rs` parses `CREATE PROCEDURE ... AS $$ body $$`
//! on top of `sqlparser`'s parser (the body is re-tokenized with positions shifted into the
//! script, so errors point into it; PL/pgSQL's `a..b` is rewritten to `a TO b` first because
//! `sqlparser` reads `1..` as a number), and `build.rs` is the Rust builder. `ir.rs` compiles a
//! definition once: tables to handles, columns to positions, variables to frame slots
//! (parameters, then `found`, then the rest), expressions through `query/expr.rs` with a `Scope`
//! of columns and variables, and every `WHERE` to an `sql::Access` plan — the same planner the
//! ad-hoc statements use, now taking key expressions that read variables (point key,
//! secondary-index equality, one-column key range, else a scan). Each operation gets an
//! `OpInfo` with its uses split into key (key, bounds, predicate, limit), value (what it
//! writes, computes or returns) and control (IF/loop conditions), and its definitions.
//! `graph.rs` turns these into the def-use graph by reaching definitions over the structured IR
//! (branches joined, loop bodies walked twice, a `SELECT INTO` that may find nothing adds a
//! definition instead of replacing one); `explain`/`--dot` print it. `exec.rs` interprets the
//! IR in a `Transaction`: integer expressions and conditions take a fast path
//! (`expr::eval_int`, `eval_cond`) before the general evaluator, a point read of columns copies
//! INT columns into their slots in place, and a caller-kept `CallFrame` (arguments written into
//! it with `set_ints`, run with `execute_bound`) makes a call allocate nothing after the first;
//! statements return a two-word result (`RETURN` values wait in the frame, errors are boxed).
//! The compiler also marks superinstructions the hot dispatcher (`stmt`) runs without the
//! general path: a `SELECT INTO` or `UPDATE` by a one-column INT primary key (`Read::int_key`,
//! `Stmt::Update::int_key`: the key is an `i64`, no `Value` buffer; the UPDATE variant only
//! when every SET is INT and reads no column, so in-place sets cannot change what a later SET
//! sees), and an `IF x = c1 ... ELSIF x = c2` chain over one variable or loop-indexed element
//! as a jump table (`ir::Switch`, first equal arm wins, as in the chain). A `FOR i IN a..b`
//! loop warms the primary-key point accesses of its body whose key variables the body never
//! writes (`ir::Prefetch`, one per table and key, not those in a nested loop): before the first
//! iteration it evaluates their keys for up to 32 iterations and hands each table's to one
//! `Transaction::prefetch`, so the misses overlap (TPC-C New-Order's ITEM and STOCK; `explain`
//! lists them as `warms:`). A `FOR r IN SELECT` loop reads all its rows into one reused buffer
//! before the body runs, and warms the accesses keyed by the row's fields the same way, 32 rows
//! at a time (Stock-Level's STOCK reads). An UPDATE whose SET expressions all evaluate as INT
//! against the old row (`eval_int`) sets them without building a `Value` for any. `bench ycsb
//! --as-procedure` runs YCSB through this path (`workload/ycsb.rs` generates the procedure: one
//! `IF` arm per starting attribute).
//!
//! **Compiled form.** `compile.rs` turns the IR once more into a tree of closures with every
//! slot, type, table handle, column and access path fixed (the same fast paths as the
//! interpreter, without dispatching on statement kinds at run time); calls run it unless
//! `Config::procedures` picks the interpreter or the procedure has a form it does not take
//! (then the whole procedure is interpreted). Serial replay of a logged call runs it the same
//! way (`command::Replayer`, a frame kept per definition); a PACMAN piece is interpreted.

mod build;
mod command;
mod compile;
mod exec;
mod flow;
mod graph;
pub mod healing;
mod ir;
mod memo;
pub(crate) mod parse;
pub(crate) mod piece;
pub mod slice;
mod surface;

pub use build::{Block, Ex, ProcedureBuilder, VarType};
pub(crate) use command::{
    call_procedure, decode_args_into, decode_some_args_of, replay_failed, Replayer,
};
pub(crate) use exec::Frame;
pub use graph::{Edge, Source};
#[cfg(test)]
pub(crate) use ir::PREFETCH_MAX;
pub use ir::{OpInfo, UseKind};
pub(crate) use surface::Def;

use crate::error::{Error, Result};
use crate::query::expr::{Ty, V};
use crate::shared::Shared;
use crate::txn::Transaction;
use crate::value::Value;

/// An argument of a call: a scalar or an array.
#[derive(Clone, Debug, PartialEq)]
pub enum Arg {
    /// A scalar argument.
    Value(Value),
    /// An array argument (for a `BIGINT[]`, `DOUBLE[]` or `TEXT[]` parameter).
    Array(Vec<Value>),
}

impl From<Value> for Arg {
    fn from(v: Value) -> Self {
        Arg::Value(v)
    }
}
impl From<i64> for Arg {
    fn from(v: i64) -> Self {
        Arg::Value(Value::Int(v))
    }
}
impl From<f64> for Arg {
    fn from(v: f64) -> Self {
        Arg::Value(Value::Float(v))
    }
}
impl From<&str> for Arg {
    fn from(v: &str) -> Self {
        Arg::Value(Value::Str(v.to_string()))
    }
}
impl From<Vec<i64>> for Arg {
    fn from(v: Vec<i64>) -> Self {
        Arg::Array(v.into_iter().map(Value::Int).collect())
    }
}
impl From<Vec<Value>> for Arg {
    fn from(v: Vec<Value>) -> Self {
        Arg::Array(v)
    }
}

/// The variables and scratch buffers of a call, kept between calls by a caller that runs
/// one procedure many times (see [`Procedure::execute_in`]).
pub struct CallFrame(exec::Frame);

impl CallFrame {
    /// Sets scalar parameter `i` (0-based) for [`Procedure::execute_bound`].
    pub fn set(&mut self, i: usize, v: Value) {
        if let Some(slot) = self.0.vars.get_mut(i) {
            *slot = V::Val(v);
        }
    }

    /// Fills INT-array parameter `i` (0-based) in place, reusing its storage.
    pub fn set_ints(&mut self, i: usize, xs: impl IntoIterator<Item = i64>) {
        if let Some(slot) = self.0.vars.get_mut(i) {
            if !matches!(slot, V::IntArr(_)) {
                *slot = V::IntArr(Vec::new());
            }
            if let V::IntArr(out) = slot {
                out.clear();
                out.extend(xs);
            }
        }
    }
}

/// A procedure slice compiled to closures (`Procedure::compile_slice`).
pub(crate) struct SliceCode(compile::Compiled);

impl SliceCode {
    /// Runs the slice in a frame already started (parameters, initial values, imports).
    pub(crate) fn run(&self, tx: &mut crate::txn::Transaction<'_>, f: &mut Frame) -> Result<()> {
        self.0.run_slice(tx, f)
    }
}

/// A compiled stored procedure.
pub struct Procedure {
    pub(crate) p: ir::Proc,
    /// `p` compiled to closures (`compile.rs`); `None` when the database interprets
    /// procedures or `p` has a form the compiler does not take.
    compiled: Option<compile::Compiled>,
    /// Its `CREATE PROCEDURE` text; empty for a builder-made procedure, which a durable
    /// database neither keeps in its catalog nor logs as a command.
    source: String,
    /// Its definition number in a durable database's catalog (command-log records name it).
    logged_as: std::sync::OnceLock<u32>,
    /// The columns it reads and writes per table: `healing`'s false-invalidation check
    /// (`healing::column_masks`).
    heal_cols: Vec<healing::TableCols>,
}

impl Procedure {
    /// A compiled procedure with its `CREATE PROCEDURE` text (empty for a builder-made one),
    /// not yet numbered in a catalog.
    fn new(db: &Shared, p: ir::Proc, source: String) -> Self {
        let compiled = match db.config.procedures {
            crate::config::ProcedureExec::Compiled => compile::compile(&p),
            _ => None,
        };
        Procedure {
            compiled,
            heal_cols: healing::column_masks(&p),
            p,
            source,
            logged_as: Default::default(),
        }
    }
}

impl std::fmt::Debug for Procedure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Procedure")
            .field("name", &self.p.name)
            .field("ops", &self.p.ops.len())
            .finish()
    }
}

fn scalar_fits(ty: Ty, v: &Value) -> Option<V> {
    match (ty, v) {
        (Ty::Int, Value::Int(_)) | (Ty::Float, Value::Float(_)) | (Ty::Str, Value::Str(_)) => {
            Some(V::Val(v.clone()))
        }
        (Ty::Float, Value::Int(i)) => Some(V::Val(Value::Float(*i as f64))),
        (Ty::Bool, Value::Int(i)) => Some(V::Bool(*i != 0)),
        _ => None,
    }
}

impl Procedure {
    /// The procedure's name (what `CALL` and the catalog use).
    pub fn name(&self) -> &str {
        &self.p.name
    }

    /// Parameter names and SQL types.
    pub fn params(&self) -> Vec<(String, &'static str)> {
        self.p.vars[..self.p.nparams]
            .iter()
            .map(|(n, t)| (n.clone(), t.name()))
            .collect()
    }

    /// Every operation of the IR, in source order (the index is the operation id).
    pub fn ops(&self) -> &[OpInfo] {
        &self.p.ops
    }

    /// Name of variable slot `v` (parameters first, then `found`, then the rest).
    pub fn var_name(&self, v: usize) -> &str {
        self.p.vars[v].0.split('#').next().unwrap_or_default()
    }

    /// The def-use graph: which operations consume each operation's outputs, and how.
    pub fn def_use(&self) -> Vec<Edge> {
        self.p.def_use()
    }

    /// The IR and the def-use graph as text (`myriad explain`).
    pub fn explain(&self) -> String {
        self.p.explain()
    }

    /// The def-use graph as Graphviz `dot` (`myriad explain --dot`).
    pub fn explain_dot(&self) -> String {
        self.p.explain_dot()
    }

    /// Puts `args` into the parameter slots of `f` (reusing its arrays' storage).
    fn bind(&self, args: &[Arg], f: &mut exec::Frame) -> Result<()> {
        let bad = |message: String| Error::ProcedureArguments {
            procedure: self.p.name.clone(),
            message,
        };
        if args.len() != self.p.nparams {
            return Err(bad(format!(
                "{} arguments given, {} expected",
                args.len(),
                self.p.nparams
            )));
        }
        if f.vars.len() != self.p.vars.len() {
            *f = self.p.frame();
        }
        for (i, a) in args.iter().enumerate() {
            let (name, ty) = &self.p.vars[i];
            let ok = match (a, ty.element()) {
                (Arg::Value(v), None) => match scalar_fits(*ty, v) {
                    Some(v) => {
                        f.vars[i] = v;
                        true
                    }
                    None => false,
                },
                (Arg::Array(xs), Some(Ty::Int)) => {
                    if !matches!(f.vars[i], V::IntArr(_)) {
                        f.vars[i] = V::IntArr(Vec::new());
                    }
                    let V::IntArr(out) = &mut f.vars[i] else {
                        unreachable!("set just above")
                    };
                    out.clear();
                    let mut ok = true;
                    for x in xs {
                        match x {
                            Value::Int(v) => out.push(*v),
                            _ => {
                                ok = false;
                                break;
                            }
                        }
                    }
                    ok
                }
                (Arg::Array(xs), Some(el)) => {
                    if !matches!(f.vars[i], V::Arr(_)) {
                        f.vars[i] = V::Arr(Vec::new());
                    }
                    let V::Arr(out) = &mut f.vars[i] else {
                        unreachable!("set just above")
                    };
                    out.clear();
                    let mut ok = true;
                    for x in xs {
                        match scalar_fits(el, x) {
                            Some(V::Val(v)) => out.push(v),
                            _ => {
                                ok = false;
                                break;
                            }
                        }
                    }
                    ok
                }
                _ => false,
            };
            if !ok {
                let found = match a {
                    Arg::Value(v) => v.as_ref().type_name().to_string(),
                    Arg::Array(_) => "an array (or an array with elements of another type)".into(),
                };
                return Err(bad(format!(
                    "parameter `{name}` is {}, found {found}",
                    ty.name()
                )));
            }
        }
        Ok(())
    }

    /// Runs the procedure inside `tx`, which stays open after a call that succeeds; returns
    /// the values of its `RETURN`. A call that fails rolls `tx` back (the procedure may have
    /// written before it failed, and half a call is never kept): `tx`'s later operations fail
    /// with `Error::TransactionClosed`. The same holds for `execute_in` and `execute_bound`.
    pub fn execute(&self, tx: &mut Transaction<'_>, args: &[Arg]) -> Result<Vec<Value>> {
        self.execute_in(tx, args, &mut self.frame())
    }

    /// A call frame to reuse across calls of this procedure ([`Procedure::execute_in`]).
    pub fn frame(&self) -> CallFrame {
        CallFrame(self.p.frame())
    }

    /// Runs the procedure with the arguments already in `frame` (set with
    /// [`CallFrame::set`] and [`CallFrame::set_ints`]): the caller fills the parameters in
    /// place, so nothing is copied. Each parameter's type is checked.
    pub fn execute_bound(
        &self,
        tx: &mut Transaction<'_>,
        frame: &mut CallFrame,
    ) -> Result<Vec<Value>> {
        let f = &mut frame.0;
        if f.vars.len() != self.p.vars.len() {
            return Err(Error::ProcedureArguments {
                procedure: self.p.name.clone(),
                message: "the call frame belongs to another procedure".into(),
            });
        }
        for (i, (name, ty)) in self.p.vars[..self.p.nparams].iter().enumerate() {
            let ok = match (ty, &f.vars[i]) {
                (Ty::IntArray, V::IntArr(_)) => true,
                (Ty::IntArray, _) => false,
                (t, V::Arr(xs)) if t.element().is_some() => xs
                    .iter()
                    .all(|x| scalar_fits(t.element().unwrap_or(Ty::Int), x).is_some()),
                // A value of the parameter's own kind stays as it is (`scalar_fits` would
                // copy it: a text argument once per call); only a widening rewrites it.
                (Ty::Int, V::Val(Value::Int(_)))
                | (Ty::Float, V::Val(Value::Float(_)))
                | (Ty::Str, V::Val(Value::Str(_))) => true,
                (t, V::Val(v)) if t.element().is_none() => match scalar_fits(*t, v) {
                    Some(v) => {
                        f.vars[i] = v;
                        true
                    }
                    None => false,
                },
                (Ty::Bool, V::Bool(_)) => true,
                _ => false,
            };
            if !ok {
                return Err(Error::ProcedureArguments {
                    procedure: self.p.name.clone(),
                    message: format!("parameter `{name}` needs {}", ty.name()),
                });
            }
        }
        self.run(tx, f)
    }

    /// Runs the procedure with the arguments in `frame` as the whole of `tx` and commits `tx`
    /// (without waiting for durability, as [`Transaction::commit_deferred`]); returns the
    /// values of its `RETURN` and the commit's ticket. Under protocol `healing` the commit
    /// heals the call where validation finds a read stale — re-executes it under the locks
    /// validation holds, thesis ch. 3 — and the values returned are the healed run's. Under
    /// every other protocol it is `execute_bound`, then `commit_deferred`. On an error `tx` is
    /// rolled back.
    pub fn execute_commit(
        &self,
        mut tx: Transaction<'_>,
        frame: &mut CallFrame,
    ) -> Result<(Vec<Value>, crate::CommitTicket)> {
        self.call_in(&mut tx, frame)
    }

    /// `execute_commit` on a borrowed transaction (`Database::run_with`'s attempts).
    pub(crate) fn call_in(
        &self,
        tx: &mut Transaction<'_>,
        frame: &mut CallFrame,
    ) -> Result<(Vec<Value>, crate::CommitTicket)> {
        tx.set_healable();
        let (mut out, complete) = match self.execute_bound(tx, frame) {
            Ok(out) => (out, true),
            Err(_) if tx.heal_pending() => (Vec::new(), false),
            Err(e) => return Err(e),
        };
        let f = &mut frame.0;
        let ticket = tx.commit_healing(complete, &self.heal_cols, &mut |tx| {
            out = self.run(tx, f)?;
            Ok(())
        })?;
        Ok((out, ticket))
    }

    /// [`Procedure::execute`] with a caller-kept frame: after the first call, a call of a
    /// procedure that reads and writes integers allocates nothing.
    pub fn execute_in(
        &self,
        tx: &mut Transaction<'_>,
        args: &[Arg],
        frame: &mut CallFrame,
    ) -> Result<Vec<Value>> {
        self.bind(args, &mut frame.0)?;
        self.run(tx, &mut frame.0)
    }

    /// A frame holding `args`, checked against the parameters (`Procedure::call_with` binds
    /// once and runs the frame in each attempt).
    pub(crate) fn bound_frame(&self, args: &[Arg]) -> Result<CallFrame> {
        let mut f = self.p.frame();
        self.bind(args, &mut f)?;
        Ok(CallFrame(f))
    }

    /// The slice of this procedure that `mask` selects, compiled to closures
    /// (`compile::compile_slice`) when the procedure itself runs compiled; `None` (run it
    /// with `Proc::run_slice`) otherwise.
    pub(crate) fn compile_slice(&self, mask: &[bool]) -> Option<SliceCode> {
        self.compiled.as_ref()?;
        compile::compile_slice(&self.p, mask).map(SliceCode)
    }

    /// Whether calls run the procedure compiled to closures (`Config::procedures`), not
    /// through the interpreter: false when the database interprets procedures, or for a
    /// procedure with a form the compiler does not take (`FOR r IN SELECT` over aggregates).
    pub fn is_compiled(&self) -> bool {
        self.compiled.is_some()
    }

    /// Runs the body with the parameters already in `f`: compiled when it is, else
    /// interpreted.
    fn run_body(&self, tx: &mut Transaction<'_>, f: &mut exec::Frame) -> Result<Vec<Value>> {
        match &self.compiled {
            Some(c) => c.run(&self.p, tx, f),
            None => self.p.run(tx, f),
        }
    }

    /// Its `CREATE PROCEDURE` text (empty for a builder-made procedure).
    pub(crate) fn source(&self) -> &str {
        &self.source
    }

    /// Numbers the procedure as catalog definition `def` (once; later calls are ignored).
    pub(crate) fn set_logged_as(&self, def: u32) {
        let _ = self.logged_as.set(def);
    }
}

/// Compiles every `CREATE [OR REPLACE] PROCEDURE` in `sql` against the tables of `db` (any
/// other statement is an error): each procedure with its `OR REPLACE`.
pub(crate) fn compile_script(db: &Shared, sql: &str) -> Result<Vec<(Procedure, bool)>> {
    let mut defs = Vec::new();
    for item in parse::script(sql)? {
        match item {
            parse::Item::Procedure(d, replace) => defs.push((d, replace)),
            parse::Item::Sql(s) => {
                return Err(crate::query::sql_error(
                    crate::query::at_span(sqlparser::ast::Spanned::span(s.as_ref())),
                    "only CREATE PROCEDURE statements are allowed here".into(),
                ))
            }
        }
    }
    let mut out = Vec::new();
    for (d, replace) in &defs {
        out.push((compile_def(db, d)?, *replace));
    }
    Ok(out)
}

/// Compiles one parsed definition (`CREATE PROCEDURE` in a SQL session).
pub(crate) fn compile_def(db: &Shared, d: &Def) -> Result<Procedure> {
    Ok(Procedure::new(db, ir::compile(db, d)?, d.source.clone()))
}

/// Compiles a procedure kept in the catalog as definition number `def` (recovery).
pub(crate) fn compile_from_catalog(db: &Shared, sql: &str, def: u32) -> Result<Procedure> {
    let mut items = parse::script(sql)?;
    let (Some(parse::Item::Procedure(d, _)), None) = (items.pop(), items.pop()) else {
        return Err(Error::InvalidConfig(
            "a catalog procedure record is not one CREATE PROCEDURE".into(),
        ));
    };
    let p = Procedure::new(db, ir::compile(db, &d)?, d.source);
    p.set_logged_as(def);
    Ok(p)
}

/// Compiles the procedures of `sql`, skipping its other statements (`myriad explain`).
pub(crate) fn compile_all(db: &Shared, sql: &str) -> Result<Vec<Procedure>> {
    let mut out = Vec::new();
    for item in parse::script(sql)? {
        match item {
            parse::Item::Procedure(d, _) => {
                out.push(Procedure::new(db, ir::compile(db, &d)?, d.source))
            }
            parse::Item::Sql(_) => {}
        }
    }
    Ok(out)
}

/// Compiles a procedure made with the builder.
pub(crate) fn compile_built(db: &Shared, b: &ProcedureBuilder) -> Result<Procedure> {
    Ok(Procedure::new(db, ir::compile(db, &b.def)?, String::new()))
}

#[cfg(test)]
mod tests;
