//! Transaction Healing's static analysis (Wu 2017, thesis §3.3 and §3.4.5;
//! `healing-pacman.md` A.2, A.2.1, A.5 V1): each procedure's program dependency graph and
//! the global validation order of tables derived from all registered procedures.
//!
//! Definitions.
//! - A procedure's **dependency graph** ([`Pdg`]) has an edge `a → b` of kind
//!   - `key` / `value`: b uses a variable a defines as part of its access key / as a value
//!     (the def-use graph, `graph.rs`, thesis Fig. 3.3);
//!   - `condition`: b is an `IF` or loop header whose condition (or bounds) uses a's output;
//!   - `control`: a is the innermost `IF`/loop header b is nested in, so a changed
//!     condition changes *whether* (or how often) b runs (a membership change, treated like
//!     a key dependency when healing);
//!   - `own-write`: a writes a table b accesses and b may run after a in the same call
//!     (later in the program, or in a later iteration of a loop around both), so b may see
//!     a's buffered write. Statically this is only *may*: the run time keeps the edge when
//!     both touch the same `(table, tuple id)` (A.2.1 item 3).
//! - Per operation: `reads_row` (an UPDATE that reads the row it writes: a read-write
//!   element whose first reader is the UPDATE itself) and its enclosing loops; a dynamic
//!   execution is identified by an [`Instance`]: the operation and the iteration number of
//!   each enclosing loop, outermost first (A.2.1 item 4).
//! - A **table dependency** `A → B` ([`TableDep`]): some operation on B has a key use, or is
//!   nested under a condition or row loop, whose value derives (through assignments and
//!   enclosing headers) from an operation on A. Restoring the A operation can then change
//!   which B rows the transaction touches.
//!
//! The **validation order** ([`ValidationOrder`], §3.4.5): a topological order of the table
//! dependencies over every registered procedure, ties broken by table creation order, so
//! that a key-dependent restoration only adds read/write-set elements that come later than
//! the element being validated. This generalises the thesis's tree-schema order: for TPC-C
//! it puts NEW_ORDER and ORDERS before CUSTOMER (Delivery reads `o_c_id` from ORDERS and then
//! updates CUSTOMER by it), which table creation order does not.
//!
//! Fallback when the dependencies have a cycle (TPC-C's read-only Order-Status reads ORDERS
//! by a customer id it read from CUSTOMER, the reverse of Delivery): dependencies are taken
//! one at a time, those of procedures that write first, and one that would close a cycle is
//! left out and listed in [`ValidationOrder::unsatisfied`]. A restoration along it may need
//! an element ordered before the validation cursor, which the thesis takes with one
//! try-lock (no-wait) and aborts on failure (§3.4.2), so an order with a dependency left out
//! is still deadlock-free; only the abort rate depends on it. Tables no procedure touches
//! have no rank ([`ValidationOrder::rank`] is `None`); protocol `healing` orders them after
//! every ranked one, by table id.
//!
//! At run time protocol `healing` locks by this order (`cc/healing.rs`, `Table::heal_rank`,
//! set whenever a procedure is registered) and checks false invalidations (§3.4.5) against
//! each procedure's **column masks** ([`column_masks`]: per table, the columns it reads and
//! writes); the dependency graph is not used at run time yet (a heal re-executes the whole
//! call, `docs/healing.md`).

use super::flow::{Flow, Kind};
use super::graph::Source;
use super::ir::UseKind;
use super::slice::{key_equalities, Registered};
use super::Procedure;
use crate::error::{Error, Result};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

/// The kind of a dependency-graph edge (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum DepKind {
    /// The output is (part of) the using operation's access key.
    Key,
    /// The output is a value the using operation computes with or writes.
    Value,
    /// The output decides an `IF` or loop header's condition or bounds.
    Condition,
    /// From an `IF`/loop header to an operation nested directly in it.
    Control,
    /// From a write to a later access of the same table (may see the buffered write).
    OwnWrite,
}

impl DepKind {
    /// The kind's name as the healing view prints it.
    pub fn name(self) -> &'static str {
        match self {
            DepKind::Key => "key",
            DepKind::Value => "value",
            DepKind::Condition => "condition",
            DepKind::Control => "control",
            DepKind::OwnWrite => "own-write",
        }
    }
}

/// One edge of a procedure's dependency graph.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Dep {
    /// The operation whose output (or nesting, or write) the edge carries.
    pub from: usize,
    /// The operation that depends on it.
    pub to: usize,
    /// How.
    pub kind: DepKind,
    /// The variable carrying the value (key, value, condition), or the table (own-write).
    pub via: String,
}

/// What healing needs to know about one operation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HealOp {
    /// `#id line N: text`.
    pub text: String,
    /// The table it accesses, if any.
    pub table: Option<String>,
    /// Touches the database (a read, write or row loop).
    pub db: bool,
    /// An UPDATE that reads the row it writes.
    pub reads_row: bool,
    /// The innermost `IF`/loop header it is nested in.
    pub control_parent: Option<usize>,
    /// The loops around it, outermost first: it runs once per iteration of each.
    pub loops: Vec<usize>,
}

/// A dynamic execution of an operation: the operation and the iteration number of each
/// loop around it, outermost first (empty for an operation in no loop).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Instance {
    /// The operation id.
    pub op: usize,
    /// One iteration number per enclosing loop ([`HealOp::loops`]).
    pub iters: Vec<u32>,
}

impl std::fmt::Display for Instance {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "#{}", self.op)?;
        if !self.iters.is_empty() {
            let it: Vec<String> = self.iters.iter().map(u32::to_string).collect();
            write!(f, "[{}]", it.join(","))?;
        }
        Ok(())
    }
}

/// One procedure's dependency graph for healing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pdg {
    /// The procedure's name.
    pub procedure: String,
    /// Every operation, by id.
    pub ops: Vec<HealOp>,
    /// Every edge, sorted.
    pub edges: Vec<Dep>,
    /// The procedure writes (an UPDATE, INSERT or DELETE).
    pub writes: bool,
}

impl Pdg {
    /// The graph of `p`.
    pub fn of(p: &Procedure) -> Pdg {
        let f = Flow::new(&p.p);
        let n = p.p.ops.len();
        let var = |v: usize| p.var_name(v).to_string();
        let mut edges = BTreeSet::new();
        for e in p.p.def_use() {
            let Source::Op(from) = e.from else { continue };
            let kind = match e.kind {
                UseKind::Key => DepKind::Key,
                UseKind::Value => DepKind::Value,
                UseKind::Control => DepKind::Condition,
            };
            edges.insert(Dep {
                from,
                to: e.to,
                kind,
                via: var(e.var),
            });
        }
        for (to, parent) in f.parent.iter().enumerate() {
            if let Some(from) = *parent {
                edges.insert(Dep {
                    from,
                    to,
                    kind: DepKind::Control,
                    via: String::new(),
                });
            }
        }
        for w in (0..n).filter(|&w| f.kind[w] == Kind::Write) {
            let Some(t) = &p.p.ops[w].table else { continue };
            let lw = f.loops(w);
            for x in (0..n).filter(|&x| f.kind[x].db()) {
                let same_loop = !lw.is_disjoint(&f.loops(x));
                if p.p.ops[x].table.as_ref() == Some(t) && (x > w || same_loop) {
                    edges.insert(Dep {
                        from: w,
                        to: x,
                        kind: DepKind::OwnWrite,
                        via: t.clone(),
                    });
                }
            }
        }
        let ops =
            p.p.ops
                .iter()
                .enumerate()
                .map(|(i, o)| {
                    let mut loops: Vec<usize> = f.loops(i).into_iter().collect();
                    // Headers come before what they nest, so ids sort outermost first.
                    loops.sort_unstable();
                    HealOp {
                        text: format!("#{i} line {}: {}", o.line, o.text),
                        table: o.table.clone(),
                        db: f.kind[i].db(),
                        reads_row: o.reads_row,
                        control_parent: f.parent[i],
                        loops,
                    }
                })
                .collect();
        Pdg {
            procedure: p.name().to_string(),
            ops,
            edges: edges.into_iter().collect(),
            writes: f.kind.contains(&Kind::Write),
        }
    }

    /// The operations that depend on `op` directly, with how.
    pub fn children(&self, op: usize) -> impl Iterator<Item = &Dep> + '_ {
        self.edges.iter().filter(move |e| e.from == op)
    }

    /// The identity of the execution of `op` in the given iteration of each loop around it
    /// (outermost first); an error when `op` is no operation or `iters` does not give one
    /// number per enclosing loop.
    pub fn instance(&self, op: usize, iters: &[u32]) -> Result<Instance> {
        let bad = |message: String| Error::ProcedureArguments {
            procedure: self.procedure.clone(),
            message,
        };
        let o = self.ops.get(op).ok_or_else(|| {
            bad(format!(
                "no operation #{op} (the procedure has {})",
                self.ops.len()
            ))
        })?;
        if o.loops.len() != iters.len() {
            return Err(bad(format!(
                "operation #{op} is nested in {} loops, so an instance needs {} iteration numbers, not {}",
                o.loops.len(),
                o.loops.len(),
                iters.len()
            )));
        }
        Ok(Instance {
            op,
            iters: iters.to_vec(),
        })
    }

    /// The graph as text (`myriad explain --healing`).
    pub fn text(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "procedure {}:", self.procedure);
        for o in &self.ops {
            let mut notes = Vec::new();
            if let Some(t) = &o.table {
                notes.push(format!("table {t}"));
            }
            if o.reads_row {
                notes.push("reads the row it writes".to_string());
            }
            if !o.loops.is_empty() {
                let ls: Vec<String> = o.loops.iter().map(|l| format!("#{l}")).collect();
                notes.push(format!("per iteration of {}", ls.join(", ")));
            }
            let notes = if notes.is_empty() {
                String::new()
            } else {
                format!("  [{}]", notes.join("; "))
            };
            let _ = writeln!(s, "  {}{notes}", o.text);
        }
        let _ = writeln!(s, "  edges:");
        for e in &self.edges {
            let via = if e.via.is_empty() {
                String::new()
            } else {
                format!(" {}", e.via)
            };
            let _ = writeln!(s, "    #{} -> #{}  {}{via}", e.from, e.to, e.kind.name());
        }
        s
    }

    /// The graph in Graphviz `dot`: key solid, value dashed, condition dotted, control bold,
    /// own-write blue.
    pub fn dot(&self) -> String {
        let esc = |t: &str| t.replace('\\', "\\\\").replace('"', "\\\"");
        let mut s = String::new();
        let _ = writeln!(s, "digraph \"{}\" {{", esc(&self.procedure));
        let _ = writeln!(s, "  node [shape=box, fontname=\"monospace\"];");
        for (i, o) in self.ops.iter().enumerate() {
            let _ = writeln!(s, "  op{i} [label=\"{}\"];", esc(&o.text));
        }
        for e in &self.edges {
            let style = match e.kind {
                DepKind::Key => "style=solid",
                DepKind::Value => "style=dashed",
                DepKind::Condition => "style=dotted",
                DepKind::Control => "style=bold",
                DepKind::OwnWrite => "color=blue",
            };
            let _ = writeln!(
                s,
                "  op{} -> op{} [label=\"{} {}\", {style}];",
                e.from,
                e.to,
                e.kind.name(),
                esc(&e.via)
            );
        }
        s.push_str("}\n");
        s
    }
}

/// A table dependency `from → to`: which `to` rows a call of `procedure` touches depends on
/// what it read from `from` (see the module docs).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TableDep {
    /// The table read first.
    pub from: String,
    /// The table whose accessed rows depend on it.
    pub to: String,
    /// [`DepKind::Key`] or [`DepKind::Control`].
    pub kind: DepKind,
    /// The procedure it comes from.
    pub procedure: String,
    /// Operation ids in that procedure: the access of `from`, the access of `to` (the
    /// first such pair in program order).
    pub ops: (usize, usize),
    /// The procedure writes.
    pub writer: bool,
}

/// The global validation order of tables (§3.4.5).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ValidationOrder {
    /// Tables some procedure accesses, first validated first.
    pub tables: Vec<String>,
    /// The dependencies the order satisfies (`from` ranks before `to`).
    pub satisfied: Vec<TableDep>,
    /// The dependencies left out because they close a cycle (the fallback).
    pub unsatisfied: Vec<TableDep>,
}

impl ValidationOrder {
    /// The position of `table` in the order; `None` for a table no procedure accesses.
    pub fn rank(&self, table: &str) -> Option<usize> {
        self.tables.iter().position(|t| t == table)
    }

    /// The order and its dependencies as text.
    pub fn text(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "validation order (thesis §3.4.5; first locked first; tables no procedure accesses are not ranked):"
        );
        for (i, t) in self.tables.iter().enumerate() {
            let _ = writeln!(s, "  {i} {t}");
        }
        let dep = |d: &TableDep| {
            format!(
                "{} -> {}  {} ({} #{} -> #{}{})",
                d.from,
                d.to,
                d.kind.name(),
                d.procedure,
                d.ops.0,
                d.ops.1,
                if d.writer { "" } else { ", read-only" }
            )
        };
        let _ = writeln!(s, "table dependencies it satisfies:");
        for d in &self.satisfied {
            let _ = writeln!(s, "  {}", dep(d));
        }
        if !self.unsatisfied.is_empty() {
            let _ = writeln!(
                s,
                "left out (they close a cycle; a restoration along one try-locks, no-wait):"
            );
            for d in &self.unsatisfied {
                let _ = writeln!(s, "  {}", dep(d));
            }
        }
        s
    }
}

/// The table dependencies of one procedure, one per (from, to, kind), and the id of each
/// table it accesses.
fn table_deps(p: &Procedure, ids: &mut BTreeMap<String, u32>) -> Vec<TableDep> {
    let f = Flow::new(&p.p);
    let writer = f.kind.contains(&Kind::Write);
    let mut out: BTreeMap<(String, String, DepKind), (usize, usize)> = BTreeMap::new();
    for b in (0..f.kind.len()).filter(|&b| f.kind[b].db()) {
        let Some((tb, _)) = f.stmt[b].and_then(key_equalities) else {
            continue;
        };
        ids.insert(tb.name().to_string(), tb.id);
        let mut sources: Vec<(usize, DepKind)> = Vec::new();
        for &(v, kind) in &p.p.ops[b].uses {
            if kind != UseKind::Key {
                continue;
            }
            for s in f.reach(b, v) {
                if let Source::Op(d) = s {
                    sources.extend(f.db_sources(*d).into_iter().map(|a| (a, DepKind::Key)));
                }
            }
        }
        if let Some(h) = f.parent[b] {
            sources.extend(f.db_sources(h).into_iter().map(|a| (a, DepKind::Control)));
        }
        for (a, kind) in sources {
            let Some(ta) = p.p.ops[a].table.clone() else {
                continue;
            };
            if ta != tb.name() {
                out.entry((ta, tb.name().to_string(), kind))
                    .and_modify(|o| *o = (*o).min((a, b)))
                    .or_insert((a, b));
            }
        }
    }
    out.into_iter()
        .map(|((from, to, kind), ops)| TableDep {
            from,
            to,
            kind,
            procedure: p.name().to_string(),
            ops,
            writer,
        })
        .collect()
}

/// The validation order over `procs` (see the module docs).
pub fn validation_order(procs: &[&Procedure]) -> ValidationOrder {
    let mut ids: BTreeMap<String, u32> = BTreeMap::new();
    let mut deps: Vec<TableDep> = procs.iter().flat_map(|p| table_deps(p, &mut ids)).collect();
    // Writers' dependencies first: they are kept when a cycle forces a choice.
    deps.sort_by_key(|d| !d.writer);
    let mut adj: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    let reaches = |adj: &BTreeMap<&str, BTreeSet<&str>>, from: &str, to: &str| {
        let mut seen = BTreeSet::new();
        let mut stack = vec![from];
        while let Some(x) = stack.pop() {
            if x == to {
                return true;
            }
            if seen.insert(x) {
                stack.extend(adj.get(x).into_iter().flatten().copied());
            }
        }
        false
    };
    let mut keep = vec![false; deps.len()];
    for (i, d) in deps.iter().enumerate() {
        if !reaches(&adj, &d.to, &d.from) {
            adj.entry(&d.from).or_default().insert(&d.to);
            keep[i] = true;
        }
    }
    // Kahn's algorithm, ready tables by creation order.
    let mut indeg: BTreeMap<&str, usize> = ids.keys().map(|t| (t.as_str(), 0)).collect();
    for tos in adj.values() {
        for t in tos {
            *indeg.entry(t).or_default() += 1;
        }
    }
    let id = |t: &str| ids.get(t).copied().unwrap_or(u32::MAX);
    let mut ready: BTreeSet<(u32, &str)> = indeg
        .iter()
        .filter(|(_, &d)| d == 0)
        .map(|(&t, _)| (id(t), t))
        .collect();
    let mut tables = Vec::new();
    while let Some(first) = ready.pop_first() {
        let t = first.1;
        tables.push(t.to_string());
        for &u in adj.get(t).into_iter().flatten() {
            if let Some(d) = indeg.get_mut(u) {
                *d -= 1;
                if *d == 0 {
                    ready.insert((id(u), u));
                }
            }
        }
    }
    let (mut satisfied, mut unsatisfied) = (Vec::new(), Vec::new());
    for (d, k) in deps.iter().zip(keep) {
        if k {
            satisfied.push(d.clone());
        } else {
            unsatisfied.push(d.clone());
        }
    }
    satisfied.sort();
    unsatisfied.sort();
    ValidationOrder {
        tables,
        satisfied,
        unsatisfied,
    }
}

/// Every registered procedure's dependency graph and the validation order over them, as
/// text (`myriad explain --healing`).
pub fn explain_healing(db: &impl Registered) -> String {
    let procs = db.registered_procedures();
    let refs: Vec<&Procedure> = procs.iter().map(|p| p.as_ref()).collect();
    let mut s = String::from(
        "Transaction Healing static analysis (thesis §3.3, §3.4.5): dependency graphs\n",
    );
    for p in &refs {
        s += &Pdg::of(p).text();
    }
    s += &validation_order(&refs).text();
    s
}

/// Every registered procedure's dependency graph in Graphviz `dot`
/// (`myriad explain --healing --dot`).
pub fn explain_healing_dot(db: &impl Registered) -> String {
    db.registered_procedures()
        .iter()
        .map(|p| Pdg::of(p).dot())
        .collect()
}

#[cfg(test)]
mod tests;

pub(crate) use crate::schema::TableCols;

/// Every table `p` accesses with the columns it reads and writes there, sorted by table id
/// (`TableCols`). A DELETE adds its table with nothing read beyond its `WHERE`; an INSERT
/// with nothing read and every column written (its row replaces whatever the transaction's
/// buffered write of the row held).
pub(crate) fn column_masks(p: &super::ir::Proc) -> Vec<TableCols> {
    use super::ir::{Items, Read, Stmt};
    use crate::query::expr::E;
    fn cols(e: &E, m: &mut u64) {
        e.for_each_col(&mut |c| *m |= 1u64.checked_shl(c as u32).unwrap_or(0));
    }
    fn entry<'a>(out: &'a mut Vec<TableCols>, t: &crate::storage::TableRef) -> &'a mut TableCols {
        let i = match out.iter().position(|c| c.table == t.id) {
            Some(i) => i,
            None => {
                // Columns past the 64th cannot be told apart: count them read and written.
                let wide = if t.schema.columns().len() > 64 { !0 } else { 0 };
                out.push(TableCols {
                    table: t.id,
                    read: wide,
                    write: wide,
                    incr: 0,
                    blind: 0,
                });
                out.len() - 1
            }
        };
        &mut out[i]
    }
    /// `c = c + e`, `c = e + c` or `c = c - e`, `e` free of the table's columns.
    fn is_increment(c: usize, e: &E) -> bool {
        use crate::query::expr::Op;
        let free = |x: &E| {
            let mut any = false;
            x.for_each_col(&mut |_| any = true);
            !any
        };
        let me = |x: &E| matches!(x, E::Col(k) if *k == c);
        match e {
            E::Bin(a, Op::Add, b, _) => (me(a) && free(b)) || (free(a) && me(b)),
            E::Bin(a, Op::Sub, b, _) => me(a) && free(b),
            _ => false,
        }
    }
    // `plain`: per table, columns read other than as an increment's own term, and columns
    // set other than by an increment; what is left of `incr` after them is increment-only.
    fn read(r: &Read, out: &mut Vec<TableCols>, plain: &mut Vec<(u32, u64)>) {
        let mut m = 0;
        match &r.items {
            Items::Exprs(es) => es.iter().for_each(|e| cols(e, &mut m)),
            Items::Aggs(aggs) => aggs
                .iter()
                .filter_map(|a| a.arg.as_ref())
                .for_each(|e| cols(e, &mut m)),
        }
        for &c in r.cols.iter().flatten() {
            m |= 1u64.checked_shl(c as u32).unwrap_or(0);
        }
        if let Some(f) = &r.access.filter {
            cols(f, &mut m);
        }
        if let Some((idx, _)) = r.order {
            for &c in &r.table.schema.indexes()[idx].columns {
                m |= 1u64.checked_shl(c as u32).unwrap_or(0);
            }
        }
        entry(out, &r.table).read |= m;
        plain.push((r.table.id, m));
    }
    /// Per table, the columns every write statement so far sets (`TableCols::blind` before
    /// the columns read are taken out).
    fn sets_all(every: &mut Vec<(u32, u64)>, table: u32, m: u64) {
        match every.iter_mut().find(|e| e.0 == table) {
            Some(e) => e.1 &= m,
            None => every.push((table, m)),
        }
    }
    type Acc = (Vec<TableCols>, Vec<(u32, u64)>, Vec<(u32, u64)>);
    fn walk(body: &[Stmt], acc: &mut Acc) {
        for s in body {
            let (out, plain, every) = (&mut acc.0, &mut acc.1, &mut acc.2);
            match s {
                Stmt::SelectInto { read: r, .. } => read(r, out, plain),
                Stmt::ForRows { read: r, body, .. } => {
                    read(r, out, plain);
                    walk(body, acc);
                }
                Stmt::Update {
                    table,
                    access,
                    sets,
                    ..
                } => {
                    let (mut rm, mut wm, mut im) = (0, 0, 0);
                    if let Some(f) = &access.filter {
                        cols(f, &mut rm);
                    }
                    for (c, e) in sets {
                        let bit = 1u64.checked_shl(*c as u32).unwrap_or(0);
                        wm |= bit;
                        if is_increment(*c, e) {
                            im |= bit;
                        } else {
                            cols(e, &mut rm);
                            plain.push((table.id, bit));
                        }
                    }
                    let t = entry(out, table);
                    t.read |= rm | im;
                    t.write |= wm;
                    t.incr |= im;
                    plain.push((table.id, rm));
                    sets_all(every, table.id, wm);
                }
                Stmt::Delete { table, access, .. } => {
                    let mut m = 0;
                    if let Some(f) = &access.filter {
                        cols(f, &mut m);
                    }
                    entry(out, table).read |= m;
                    plain.push((table.id, m));
                }
                Stmt::Insert { table, .. } => {
                    // The row is the INSERT's: no column keeps a value from before, none
                    // is an increment.
                    entry(out, table).write = !0;
                    plain.push((table.id, !0));
                    sets_all(every, table.id, !0);
                }
                Stmt::If {
                    arms, otherwise, ..
                } => {
                    for (_, b) in arms {
                        walk(b, acc);
                    }
                    walk(otherwise, acc);
                }
                Stmt::ForRange { body, .. } => walk(body, acc),
                Stmt::Assign { .. }
                | Stmt::Return { .. }
                | Stmt::Raise { .. }
                | Stmt::Rollback { .. } => {}
            }
        }
    }
    let mut acc: Acc = Default::default();
    walk(&p.body, &mut acc);
    let (mut out, plain, every) = acc;
    for (table, m) in plain {
        if let Some(t) = out.iter_mut().find(|t| t.table == table) {
            t.incr &= !m;
        }
    }
    for (table, m) in every {
        if let Some(t) = out.iter_mut().find(|t| t.table == table) {
            t.blind = m & !t.read;
        }
    }
    out.sort_unstable_by_key(|c| c.table);
    out
}
