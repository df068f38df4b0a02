//! The def-use graph of a procedure (thesis Fig. 3.3): an edge from the operation that
//! defines a variable to each operation that may read that definition, marked by how the
//! reader uses it (key, value or control). Built by reaching definitions over the structured
//! IR: an `IF` joins its branches, a loop is walked twice so that values carried from one
//! iteration to the next are found, and a `SELECT ... INTO` that finds no row leaves its
//! variables as they were (so it adds a definition rather than replacing the old ones).

use super::ir::{Proc, Stmt, UseKind};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

/// Where a variable's value comes from: an operation, or the call's arguments / the
/// variable's initial value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Source {
    /// The call's arguments, or a declared variable's initial value.
    Entry,
    /// The operation with this index in `Procedure::ops`.
    Op(usize),
}

/// One def-use edge.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Edge {
    /// Where the value is defined.
    pub from: Source,
    /// The index in `Procedure::ops` of the operation that uses it.
    pub to: usize,
    /// The variable (slot) that carries the value.
    pub var: usize,
    /// The role the value plays in the using operation.
    pub kind: UseKind,
}

type Reach = BTreeMap<usize, BTreeSet<Source>>;

struct Walk<'a> {
    p: &'a Proc,
    edges: BTreeSet<Edge>,
}

fn union(a: &mut Reach, b: Reach) {
    for (v, s) in b {
        a.entry(v).or_default().extend(s);
    }
}

pub(crate) fn op_of(s: &Stmt) -> usize {
    match s {
        Stmt::SelectInto { op, .. }
        | Stmt::Update { op, .. }
        | Stmt::Insert { op, .. }
        | Stmt::Delete { op, .. }
        | Stmt::Assign { op, .. }
        | Stmt::If { op, .. }
        | Stmt::ForRange { op, .. }
        | Stmt::ForRows { op, .. }
        | Stmt::Return { op, .. }
        | Stmt::Raise { op, .. }
        | Stmt::Rollback { op } => *op,
    }
}

impl Walk<'_> {
    fn uses(&mut self, op: usize, reach: &Reach) {
        for &(v, kind) in &self.p.ops[op].uses {
            for &from in reach.get(&v).into_iter().flatten() {
                self.edges.insert(Edge {
                    from,
                    to: op,
                    var: v,
                    kind,
                });
            }
        }
    }

    fn define(&self, op: usize, reach: &mut Reach, weak: &[usize]) {
        for &d in &self.p.ops[op].defs {
            let set = reach.entry(d).or_default();
            if !weak.contains(&d) {
                set.clear();
            }
            set.insert(Source::Op(op));
        }
    }

    fn block(&mut self, stmts: &[Stmt], reach: &mut Reach) {
        for s in stmts {
            let op = op_of(s);
            self.uses(op, reach);
            match s {
                Stmt::If {
                    arms, otherwise, ..
                } => {
                    let mut out = Reach::new();
                    for body in arms.iter().map(|a| &a.1).chain([otherwise]) {
                        let mut r = reach.clone();
                        self.block(body, &mut r);
                        union(&mut out, r);
                    }
                    *reach = out;
                }
                Stmt::ForRange { body, .. } | Stmt::ForRows { body, .. } => {
                    self.define(op, reach, &[]);
                    let entry = reach.clone();
                    let mut r = entry.clone();
                    self.block(body, &mut r);
                    union(&mut r, entry.clone());
                    self.block(body, &mut r);
                    union(reach, r);
                }
                Stmt::SelectInto { into, .. } => self.define(op, reach, into),
                _ => self.define(op, reach, &[]),
            }
        }
    }
}

impl Proc {
    /// Every def-use edge, sorted.
    pub(crate) fn def_use(&self) -> Vec<Edge> {
        let mut reach = Reach::new();
        for v in 0..self.vars.len() {
            reach.entry(v).or_default().insert(Source::Entry);
        }
        let mut w = Walk {
            p: self,
            edges: BTreeSet::new(),
        };
        w.block(&self.body, &mut reach);
        w.edges.into_iter().collect()
    }

    fn var_name(&self, v: usize) -> &str {
        // Loop variables and row fields get `#slot` appended once out of scope.
        self.vars[v].0.split('#').next().unwrap_or_default()
    }

    /// The IR and the def-use graph as text.
    pub(crate) fn explain(&self) -> String {
        let mut s = String::new();
        let params: Vec<String> = (0..self.nparams)
            .map(|i| format!("{} {}", self.var_name(i), self.vars[i].1.name()))
            .collect();
        let _ = writeln!(s, "PROCEDURE {}({})", self.name, params.join(", "));
        let _ = writeln!(s, "variables:");
        for (i, (_, ty)) in self.vars.iter().enumerate() {
            let role = if i < self.nparams { " (parameter)" } else { "" };
            let _ = writeln!(s, "  ${i} {} {}{role}", self.var_name(i), ty.name());
        }
        let _ = writeln!(s, "operations:");
        let names = |vs: &mut dyn Iterator<Item = usize>| -> String {
            vs.map(|v| self.var_name(v).to_string())
                .collect::<Vec<_>>()
                .join(", ")
        };
        for (i, o) in self.ops.iter().enumerate() {
            let indent = "  ".repeat(o.depth);
            let what = match (o.access, &o.table) {
                (Some(a), Some(t)) => format!(" [{a} {t}]"),
                _ => String::new(),
            };
            let _ = writeln!(s, "  #{i:<3} line {:<4}{indent}{}{what}", o.line, o.text);
            let mut parts = Vec::new();
            for kind in [UseKind::Key, UseKind::Value, UseKind::Control] {
                let vs = names(&mut o.uses.iter().filter(|u| u.1 == kind).map(|u| u.0));
                if !vs.is_empty() {
                    parts.push(format!("{}: {vs}", kind.name()));
                }
            }
            if !o.defs.is_empty() {
                parts.push(format!("defines: {}", names(&mut o.defs.iter().copied())));
            }
            if !o.warms.is_empty() {
                parts.push(format!("warms: {}", o.warms.join(", ")));
            }
            if !parts.is_empty() {
                let _ = writeln!(s, "             {indent}{}", parts.join("; "));
            }
        }
        let _ = writeln!(s, "def-use edges (definition -> use):");
        for e in self.def_use() {
            if let Source::Op(from) = e.from {
                let _ = writeln!(
                    s,
                    "  #{from} (line {}) -> #{} (line {})  {} {}",
                    self.ops[from].line,
                    e.to,
                    self.ops[e.to].line,
                    e.kind.name(),
                    self.var_name(e.var)
                );
            }
        }
        s
    }

    /// The def-use graph in Graphviz `dot`: solid edges are key uses, dashed value uses,
    /// dotted control uses.
    pub(crate) fn explain_dot(&self) -> String {
        let esc = |t: &str| t.replace('\\', "\\\\").replace('"', "\\\"");
        let mut s = String::new();
        let _ = writeln!(s, "digraph \"{}\" {{", esc(&self.name));
        let _ = writeln!(s, "  node [shape=box, fontname=\"monospace\"];");
        for (i, o) in self.ops.iter().enumerate() {
            let _ = writeln!(
                s,
                "  op{i} [label=\"#{i} line {}: {}\"];",
                o.line,
                esc(&o.text)
            );
        }
        for e in self.def_use() {
            if let Source::Op(from) = e.from {
                let style = match e.kind {
                    UseKind::Key => "solid",
                    UseKind::Value => "dashed",
                    UseKind::Control => "dotted",
                };
                let _ = writeln!(
                    s,
                    "  op{from} -> op{} [label=\"{} ({})\", style={style}];",
                    e.to,
                    esc(self.var_name(e.var)),
                    e.kind.name()
                );
            }
        }
        s.push_str("}\n");
        s
    }
}
