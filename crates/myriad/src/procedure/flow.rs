//! The structure both static analyses walk (PACMAN's slices, `slice.rs`; Transaction
//! Healing's dependency graph, `healing.rs`): each operation's kind, its enclosing `IF`/loop
//! header, its statement, and the reaching definitions of every variable it uses.

use super::graph::{op_of, Source};
use super::ir::{Proc, Stmt};
use std::collections::{BTreeMap, BTreeSet};

/// What an operation is, for the analyses.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Kind {
    /// `SELECT ... INTO`.
    Read,
    /// `UPDATE`, `INSERT`, `DELETE`.
    Write,
    /// `FOR r IN SELECT`: a read whose rows drive a loop.
    ForRows,
    Assign,
    If,
    ForRange,
    /// RETURN, RAISE, ROLLBACK.
    Gone,
}

impl Kind {
    /// Touches the database.
    pub(crate) fn db(self) -> bool {
        matches!(self, Kind::Read | Kind::Write | Kind::ForRows)
    }
    /// `:=`, `IF`, `FOR i IN a..b`: computes from variables only.
    pub(crate) fn transparent(self) -> bool {
        matches!(self, Kind::Assign | Kind::If | Kind::ForRange)
    }
    pub(crate) fn is_loop(self) -> bool {
        matches!(self, Kind::ForRows | Kind::ForRange)
    }
}

/// One procedure's nesting and reaching definitions, by operation id.
pub(crate) struct Flow<'a> {
    pub kind: Vec<Kind>,
    /// The innermost `IF`/loop header an operation is nested in.
    pub parent: Vec<Option<usize>>,
    pub stmt: Vec<Option<&'a Stmt>>,
    /// (op, var) → reaching definitions of var at op.
    pub reach: BTreeMap<(usize, usize), Vec<Source>>,
    /// Variables each op uses, without duplicates.
    pub uses: Vec<Vec<usize>>,
}

fn walk<'a>(body: &'a [Stmt], parent: Option<usize>, f: &mut Flow<'a>) {
    for s in body {
        let op = op_of(s);
        f.parent[op] = parent;
        f.stmt[op] = Some(s);
        f.kind[op] = match s {
            Stmt::SelectInto { .. } => Kind::Read,
            Stmt::Update { .. } | Stmt::Insert { .. } | Stmt::Delete { .. } => Kind::Write,
            Stmt::Assign { .. } => Kind::Assign,
            Stmt::If { .. } => Kind::If,
            Stmt::ForRange { .. } => Kind::ForRange,
            Stmt::ForRows { .. } => Kind::ForRows,
            Stmt::Return { .. } | Stmt::Raise { .. } | Stmt::Rollback { .. } => Kind::Gone,
        };
        match s {
            Stmt::If {
                arms, otherwise, ..
            } => {
                for (_, b) in arms {
                    walk(b, Some(op), f);
                }
                walk(otherwise, Some(op), f);
            }
            Stmt::ForRange { body, .. } | Stmt::ForRows { body, .. } => walk(body, Some(op), f),
            _ => {}
        }
    }
}

impl<'a> Flow<'a> {
    pub(crate) fn new(p: &'a Proc) -> Self {
        let n = p.ops.len();
        let mut reach: BTreeMap<(usize, usize), Vec<Source>> = BTreeMap::new();
        for e in p.def_use() {
            let r = reach.entry((e.to, e.var)).or_default();
            if !r.contains(&e.from) {
                r.push(e.from);
            }
        }
        let uses = p
            .ops
            .iter()
            .map(|o| {
                let mut v: Vec<usize> = o.uses.iter().map(|u| u.0).collect();
                v.dedup();
                v
            })
            .collect();
        let mut f = Flow {
            kind: vec![Kind::Gone; n],
            parent: vec![None; n],
            stmt: vec![None; n],
            reach,
            uses,
        };
        walk(&p.body, None, &mut f);
        f
    }

    /// The headers `op` is nested in, innermost first.
    pub(crate) fn ancestors(&self, op: usize) -> impl Iterator<Item = usize> + '_ {
        std::iter::successors(self.parent[op], |&a| self.parent[a])
    }

    /// The loops around `op`.
    pub(crate) fn loops(&self, op: usize) -> BTreeSet<usize> {
        self.ancestors(op)
            .filter(|&a| self.kind[a].is_loop())
            .collect()
    }

    /// The reaching definitions of variable `v` at `op`.
    pub(crate) fn reach(&self, op: usize, v: usize) -> &[Source] {
        self.reach.get(&(op, v)).map_or(&[], |r| r.as_slice())
    }

    /// The DB operations the values `start` computes derive from: through transparent
    /// operations, their inputs and their enclosing headers (a value assigned inside an `IF`
    /// depends on its condition). A DB operation is its own source.
    pub(crate) fn db_sources(&self, start: usize) -> BTreeSet<usize> {
        let mut out = BTreeSet::new();
        let mut seen = BTreeSet::new();
        let mut stack = vec![start];
        while let Some(x) = stack.pop() {
            if !seen.insert(x) {
                continue;
            }
            if self.kind[x].db() {
                out.insert(x);
                continue;
            }
            stack.extend(self.parent[x]);
            for &v in &self.uses[x] {
                stack.extend(self.reach(x, v).iter().filter_map(|s| match s {
                    Source::Op(d) => Some(*d),
                    Source::Entry => None,
                }));
            }
        }
        out
    }
}
