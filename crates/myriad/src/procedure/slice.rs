//! PACMAN's static analysis (Wu 2017, thesis §4.4.1; `healing-pacman.md` B.2.1): procedure
//! slices and the global dependency graph (GDG) of blocks over every registered procedure
//! that writes.
//!
//! Definitions. A *DB operation* is a `SELECT ... INTO`, `UPDATE`, `INSERT`, `DELETE` or
//! `FOR r IN SELECT` loop; `:=`, `IF` and `FOR i IN a..b` are *transparent*: they belong to no
//! slice and are replicated into every slice that needs them (an operation's enclosing
//! headers always, an assignment when a slice uses its value). A *slice* is a set of DB
//! operations of one procedure; its *piece* runs them in program order with the replicated
//! operations, after importing the final value of each variable it takes from another
//! slice of the same call. A *block* is a set of slices of different procedures.
//!
//! Invariants the analysis establishes (each step only merges, so it terminates):
//! - (P1) the DB operations of a procedure on a table it writes are in one slice; a
//!   `FOR r IN SELECT` and the DB operations in its body are in one slice;
//! - an import of `v` from slice A into S is allowed only when every reaching definition of
//!   `v` at each use in S is A's (or S's own), every definition A runs precedes the use, and
//!   none is per-iteration of a loop around the use; otherwise A and S merge;
//! - (P2) the local graph (A → S when S imports from A) is acyclic: cycles merge;
//! - (G2) slices of different procedures on a table either writes share a block; (G4) a
//!   block holds at most one slice per procedure; (G3) the block graph is acyclic.
//!
//! The replay view (S0): a logged call committed, so `RAISE` and `ROLLBACK` never ran and
//! `RETURN` has no effect on the database; they are dropped (recovery `pacman` refuses a
//! procedure whose `RETURN` is not its last statement, since that one decides what runs
//! after it). With dead-code elimination ([`Options::dce`]) only the operations in the
//! backward slice (def-use and control) of a write are kept. Pieces run in
//! `recovery/pacman/` (recovery `pacman`, `Proc::run_slice`).

use super::flow::{Flow, Kind};
use super::graph::Source;
use super::ir::{vars_of, Proc, Stmt};
use super::Procedure;
use crate::config::PacmanSlicing;
use crate::query::expr::E;
use crate::storage::TableRef;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::sync::Arc;

/// Choices of the analysis.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Options {
    /// Keep only operations a write depends on (S0's dead-code elimination).
    pub dce: bool,
    /// The decomposition: PACMAN's slices, or the coarser baselines of thesis Fig. 4.18
    /// (`coarsen`).
    pub slicing: PacmanSlicing,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            dce: true,
            slicing: PacmanSlicing::Pacman,
        }
    }
}

/// One slice of a procedure.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Slice {
    /// Its DB operations (operation ids, program order).
    pub ops: Vec<usize>,
    /// Transparent operations its piece replicates: enclosing `IF`/`FOR` headers and the
    /// assignments whose values it uses (program order).
    pub replicated: Vec<usize>,
    /// Variables it takes from other slices of the same call: (variable, slice index).
    pub imports: Vec<(String, usize)>,
    /// Variables whose final value it hands to other slices.
    pub exports: Vec<String>,
    /// `imports` by variable slot: (slot, slice index).
    pub import_slots: Vec<(usize, usize)>,
    /// `exports` by variable slot (ascending).
    pub export_slots: Vec<usize>,
    /// Its block (index into [`Gdg::blocks`]).
    pub block: usize,
}

/// The slices of one procedure and its local dependency graph.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProcSlices {
    /// The procedure's name.
    pub procedure: String,
    /// Its index in the procedures [`analyze`] was given.
    pub input: usize,
    /// Its slices (the indexes `edges`, `Slice::imports` and `Block::slices` use).
    pub slices: Vec<Slice>,
    /// Local edges (from, to): `to` imports a value of `from`.
    pub edges: Vec<(usize, usize)>,
    /// Operation descriptions (`#id line N: text`), for rendering.
    ops: Vec<String>,
    /// The table each operation accesses.
    op_tables: Vec<Option<String>>,
    /// Whether each operation writes its table.
    op_writes: Vec<bool>,
}

impl ProcSlices {
    /// Operation `op` as `#op line N: text`.
    pub fn op_text(&self, op: usize) -> Option<&str> {
        self.ops.get(op).map(String::as_str)
    }

    /// The table operation `op` accesses, if any.
    pub fn table_of(&self, op: usize) -> Option<&str> {
        self.op_tables.get(op)?.as_deref()
    }

    /// Whether operation `op` writes its table.
    pub fn writes(&self, op: usize) -> bool {
        self.op_writes.get(op).copied().unwrap_or(false)
    }
}

/// A table accessed in a block.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlockTable {
    /// The table's name.
    pub table: String,
    /// Written by a slice of the block (the block owns the table during replay).
    pub written: bool,
    /// Key-space granularity p_T: the number of leading primary-key columns every operation
    /// of the block on the table fixes from values known before its piece runs (parameters,
    /// imports, loop counters).
    pub key_prefix: usize,
}

/// A node of the global dependency graph.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Block {
    /// Its slices: (index into [`Gdg::procedures`], slice index).
    pub slices: Vec<(usize, usize)>,
    /// The tables its slices access.
    pub tables: Vec<BlockTable>,
}

/// The global dependency graph: blocks in topological order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Gdg {
    /// Procedures that write, by name.
    pub procedures: Vec<ProcSlices>,
    /// Procedures left out because they never write (never logged as commands).
    pub read_only: Vec<String>,
    /// The blocks, in topological order.
    pub blocks: Vec<Block>,
    /// Block edges (from, to), from < to.
    pub edges: Vec<(usize, usize)>,
    /// The decomposition it was built with ([`Options::slicing`]).
    pub slicing: PacmanSlicing,
}

/// Union-find over operation ids; the smaller id is the root, so results do not depend on
/// the order of unions.
#[derive(Clone, Debug)]
struct Uf(Vec<usize>);

impl Uf {
    fn new(n: usize) -> Self {
        Uf((0..n).collect())
    }
    fn find(&mut self, mut x: usize) -> usize {
        while self.0[x] != x {
            self.0[x] = self.0[self.0[x]];
            x = self.0[x];
        }
        x
    }
    /// Puts the members of each group that writes its table in one set (P1, G2).
    fn join_written<K>(&mut self, groups: &BTreeMap<K, (Vec<usize>, bool)>) {
        for (ids, written) in groups.values() {
            if *written {
                for w in ids.windows(2) {
                    self.union(w[0], w[1]);
                }
            }
        }
    }

    /// Returns whether the sets were different.
    fn union(&mut self, a: usize, b: usize) -> bool {
        let (a, b) = (self.find(a), self.find(b));
        if a == b {
            return false;
        }
        let (lo, hi) = (a.min(b), a.max(b));
        self.0[hi] = lo;
        true
    }
}

/// How one use of a variable in a piece is satisfied.
#[derive(Clone, Copy, Debug)]
enum Res {
    /// Computed in the piece (or a parameter); `entry`: the initial value may reach it.
    Local {
        entry: bool,
    },
    Import,
}

/// The pieces of one partition: per slice root, what it replicates and imports.
#[derive(Default, Debug)]
struct Piece {
    replicated: BTreeSet<usize>,
    /// variable → exporting slice root.
    imports: BTreeMap<usize, usize>,
    uses: Vec<(usize, usize, Res)>,
}

/// One procedure prepared for slicing.
struct Prog<'a> {
    f: Flow<'a>,
    p: &'a Proc,
    live: Vec<bool>,
    uf: Uf,
    /// [`Prog::home`] of the current partition (cleared by each [`Prog::resolve`]).
    homes: BTreeMap<usize, BTreeSet<usize>>,
}

impl<'a> Prog<'a> {
    /// S0–S4: the replay view, the flow graph's inputs, seed slices merged by table (P1)
    /// and by loop nesting.
    fn new(p: &'a Proc, opts: Options) -> Self {
        let n = p.ops.len();
        let f = Flow::new(p);
        let live = if opts.dce {
            // Backward closure from the writes over def-use and control nesting.
            let mut live = vec![false; n];
            let mut work: Vec<usize> = (0..n).filter(|&i| f.kind[i] == Kind::Write).collect();
            while let Some(x) = work.pop() {
                if live[x] {
                    continue;
                }
                live[x] = true;
                work.extend(f.parent[x]);
                for &v in &f.uses[x] {
                    for s in f.reach(x, v) {
                        if let Source::Op(d) = s {
                            work.push(*d);
                        }
                    }
                }
            }
            live
        } else {
            f.kind.iter().map(|k| *k != Kind::Gone).collect()
        };
        let mut prog = Prog {
            f,
            p,
            live,
            uf: Uf::new(n),
            homes: BTreeMap::new(),
        };
        // S3 (P1): one slice per written table.
        let mut by_table: BTreeMap<&str, (Vec<usize>, bool)> = BTreeMap::new();
        for i in prog.db_ops() {
            if let Some(t) = &p.ops[i].table {
                let e = by_table.entry(t.as_str()).or_default();
                e.0.push(i);
                e.1 |= prog.f.kind[i] == Kind::Write;
            }
        }
        prog.uf.join_written(&by_table);
        // S4: a row loop and the DB operations in its body.
        for i in prog.db_ops() {
            let fr: Vec<usize> = prog
                .f
                .ancestors(i)
                .filter(|&a| prog.f.kind[a] == Kind::ForRows)
                .collect();
            for a in fr {
                prog.uf.union(a, i);
            }
        }
        prog
    }

    fn db_ops(&self) -> Vec<usize> {
        (0..self.f.kind.len())
            .filter(|&i| self.live[i] && self.f.kind[i].db())
            .collect()
    }

    fn writes(&self) -> bool {
        self.f.kind.contains(&Kind::Write)
    }

    /// The slices a transparent operation's value derives from (through other transparent
    /// operations, its inputs and its enclosing headers); empty: parameters only.
    fn home(&mut self, t: usize) -> BTreeSet<usize> {
        if let Some(h) = self.homes.get(&t) {
            return h.clone();
        }
        let out: BTreeSet<usize> = self
            .f
            .db_sources(t)
            .into_iter()
            .map(|d| self.uf.find(d))
            .collect();
        self.homes.insert(t, out.clone());
        out
    }

    /// S5–S6 on the current partition: the pieces, or the merges it needs first.
    fn resolve(&mut self) -> Result<BTreeMap<usize, Piece>, Vec<(usize, usize)>> {
        self.homes.clear();
        let mut pieces: BTreeMap<usize, Piece> = BTreeMap::new();
        let mut merge: Vec<(usize, usize)> = Vec::new();
        let mut work: Vec<(usize, usize)> = Vec::new();
        for i in self.db_ops() {
            let s = self.uf.find(i);
            pieces.entry(s).or_default();
            work.push((i, s));
        }
        let mut seen = BTreeSet::new();
        while let Some((x, s)) = work.pop() {
            if !seen.insert((x, s)) {
                continue;
            }
            if self.f.kind[x].transparent() {
                pieces.entry(s).or_default().replicated.insert(x);
            }
            let anc: Vec<usize> = self.f.ancestors(x).collect();
            for &h in &anc {
                if self.f.kind[h] == Kind::ForRows {
                    let r = self.uf.find(h);
                    if r != s {
                        merge.push((r, s));
                    }
                } else {
                    work.push((h, s));
                }
            }
            for v in self.f.uses[x].clone() {
                let full: Vec<Source> = self.f.reach(x, v).to_vec();
                let entry = full.contains(&Source::Entry);
                let r: Vec<usize> = full
                    .iter()
                    .filter_map(|s| match s {
                        Source::Op(d) if !anc.contains(d) => Some(*d),
                        _ => None,
                    })
                    .collect();
                let mut homes = BTreeSet::new();
                for &d in &r {
                    if self.f.kind[d].db() {
                        homes.insert(self.uf.find(d));
                    } else {
                        homes.extend(self.home(d));
                    }
                }
                let transparent: Vec<usize> = r
                    .iter()
                    .copied()
                    .filter(|&d| self.f.kind[d].transparent())
                    .collect();
                let local = |pieces: &mut BTreeMap<usize, Piece>| {
                    pieces
                        .entry(s)
                        .or_default()
                        .uses
                        .push((v, x, Res::Local { entry }));
                };
                if homes.iter().all(|&h| h == s) {
                    work.extend(transparent.iter().map(|&d| (d, s)));
                    local(&mut pieces);
                } else if homes.len() == 1 {
                    let a = *homes.iter().next().unwrap_or(&s);
                    if self.import_ok(v, x, &r, a) {
                        let p = pieces.entry(s).or_default();
                        match p.imports.get(&v) {
                            Some(&b) if b != a => merge.push((a, b)),
                            _ => {
                                p.imports.insert(v, a);
                            }
                        }
                        p.uses.push((v, x, Res::Import));
                        work.extend(transparent.iter().map(|&d| (d, a)));
                    } else {
                        merge.push((a, s));
                    }
                } else {
                    for &d in &r {
                        if self.f.kind[d].db() {
                            let b = self.uf.find(d);
                            if b != s {
                                merge.push((b, s));
                            }
                        }
                    }
                    work.extend(transparent.iter().map(|&d| (d, s)));
                    local(&mut pieces);
                }
            }
        }
        if merge.is_empty() {
            // An import must give each use in the piece its value: a use the initial value
            // may reach, or a slice that imports what it exports, merges instead.
            for (&s, p) in &pieces {
                for (&v, &a) in &p.imports {
                    let early = p
                        .uses
                        .iter()
                        .any(|&(u, _, r)| u == v && matches!(r, Res::Local { entry: true }));
                    if early {
                        merge.push((a, s));
                    }
                    if let Some(&b) = pieces.get(&a).and_then(|q| q.imports.get(&v)) {
                        merge.push((a, b));
                    }
                    // The piece must not overwrite the imported value before a use of it.
                    let last = p
                        .uses
                        .iter()
                        .filter(|u| u.0 == v && matches!(u.2, Res::Import))
                        .map(|u| u.1)
                        .max()
                        .unwrap_or(0);
                    let overwrites = (0..last).any(|x| {
                        self.live[x]
                            && self.p.ops[x].defs.contains(&v)
                            && (p.replicated.contains(&x)
                                || (self.f.kind[x].db() && self.uf.find(x) == s))
                    });
                    if overwrites {
                        merge.push((a, s));
                    }
                }
            }
        }
        if merge.is_empty() {
            // S6: a cycle of slices merges.
            let nodes: Vec<usize> = pieces.keys().copied().collect();
            let edges: BTreeSet<(usize, usize)> = pieces
                .iter()
                .flat_map(|(&s, p)| p.imports.values().map(move |&a| (a, s)))
                .collect();
            for c in sccs(&nodes, &edges) {
                for w in c.windows(2) {
                    merge.push((w[0], w[1]));
                }
            }
        }
        if merge.is_empty() {
            Ok(pieces)
        } else {
            Err(merge)
        }
    }

    /// May slice `s` take `v` at `y` as the final value of slice `a` (reaching definitions
    /// `r`)?
    fn import_ok(&mut self, v: usize, y: usize, r: &[usize], a: usize) -> bool {
        let ly = self.f.loops(y);
        if r.iter().any(|&d| !self.f.loops(d).is_disjoint(&ly)) {
            return false;
        }
        // Every definition `a`'s piece may run must come before `y`.
        for d in 0..self.f.kind.len() {
            if !self.live[d] || d < y || !self.p.ops[d].defs.contains(&v) {
                continue;
            }
            let in_a = if self.f.kind[d].db() {
                self.uf.find(d) == a
            } else {
                r.contains(&d) || self.home(d).iter().all(|&h| h == a)
            };
            if in_a {
                return false;
            }
        }
        true
    }

    /// Resolves to a fixed point (S5–S6).
    fn settle(&mut self) -> BTreeMap<usize, Piece> {
        loop {
            match self.resolve() {
                Ok(p) => return p,
                Err(m) => {
                    for (a, b) in m {
                        self.uf.union(a, b);
                    }
                }
            }
        }
    }

    /// The number of leading primary-key columns op `x` of slice `s` fixes from values known
    /// before the piece runs.
    fn key_prefix(&mut self, x: usize, s: usize) -> usize {
        let Some((table, fixed)) = self.f.stmt[x].and_then(key_equalities) else {
            return 0;
        };
        let pk = table.schema.indexes()[0].columns.clone();
        let mut best = usize::MAX;
        for eqs in fixed {
            let mut k = 0;
            for c in &pk {
                let Some((_, e)) = eqs.iter().find(|(col, _)| col == c) else {
                    break;
                };
                let mut vs = Vec::new();
                vars_of(e, &mut vs);
                if !vs.into_iter().all(|v| self.known(v, x, s)) {
                    break;
                }
                k += 1;
            }
            best = best.min(k);
        }
        if best == usize::MAX {
            0
        } else {
            best
        }
    }

    /// Is `v` at op `x` known before slice `s`'s piece runs (a parameter, an import or a
    /// loop counter)?
    fn known(&mut self, v: usize, x: usize, s: usize) -> bool {
        let anc: Vec<usize> = self.f.ancestors(x).collect();
        for src in self.f.reach(x, v).to_vec() {
            let Source::Op(d) = src else { continue };
            let ok = if self.f.kind[d] == Kind::ForRange && anc.contains(&d) {
                true
            } else if self.f.kind[d].db() {
                self.uf.find(d) != s
            } else {
                !self.home(d).contains(&s)
            };
            if !ok {
                return false;
            }
        }
        true
    }

    fn var(&self, v: usize) -> String {
        self.p.vars[v]
            .0
            .split('#')
            .next()
            .unwrap_or_default()
            .to_string()
    }
}

/// Per row an operation touches, `(column, expression)` equalities.
pub(crate) type Equalities<'a> = Vec<Vec<(usize, &'a E)>>;

/// The table a DB operation accesses and, per row it touches (an INSERT may list several),
/// the `(column, expression)` equalities that fix its columns.
pub(crate) fn key_equalities(st: &Stmt) -> Option<(&TableRef, Equalities<'_>)> {
    fn eqs(a: &crate::query::Access) -> Equalities<'_> {
        vec![a
            .filter
            .as_ref()
            .map(crate::query::equalities)
            .unwrap_or_default()]
    }
    Some(match st {
        Stmt::SelectInto { read, .. } | Stmt::ForRows { read, .. } => {
            (&read.table, eqs(&read.access))
        }
        Stmt::Update { table, access, .. } | Stmt::Delete { table, access, .. } => {
            (table, eqs(access))
        }
        Stmt::Insert { table, rows, .. } => (
            table,
            rows.iter()
                .map(|r| r.iter().enumerate().collect())
                .collect(),
        ),
        _ => return None,
    })
}

/// Strongly connected components with more than one node (Tarjan, iterative), each sorted.
fn sccs(nodes: &[usize], edges: &BTreeSet<(usize, usize)>) -> Vec<Vec<usize>> {
    let idx: BTreeMap<usize, usize> = nodes.iter().enumerate().map(|(i, &n)| (n, i)).collect();
    let n = nodes.len();
    let mut adj = vec![Vec::new(); n];
    for &(a, b) in edges {
        if let (Some(&i), Some(&j)) = (idx.get(&a), idx.get(&b)) {
            adj[i].push(j);
        }
    }
    // Reachability is enough at these sizes: i and j are in one component when each
    // reaches the other.
    let reach: Vec<Vec<bool>> = (0..n)
        .map(|s| {
            let mut seen = vec![false; n];
            let mut st = vec![s];
            while let Some(x) = st.pop() {
                for &y in &adj[x] {
                    if !seen[y] {
                        seen[y] = true;
                        st.push(y);
                    }
                }
            }
            seen
        })
        .collect();
    let mut done = vec![false; n];
    let mut out = Vec::new();
    for i in 0..n {
        if done[i] || !reach[i][i] {
            continue;
        }
        let c: Vec<usize> = (0..n).filter(|&j| reach[i][j] && reach[j][i]).collect();
        for &j in &c {
            done[j] = true;
        }
        if c.len() > 1 {
            out.push(c.into_iter().map(|j| nodes[j]).collect());
        }
    }
    out
}

/// Builds the GDG over `procs` (S7–S8). Procedures that never write are listed in
/// [`Gdg::read_only`] and take no part.
pub fn analyze(procs: &[&Procedure], opts: Options) -> Gdg {
    let mut progs: Vec<Prog<'_>> = Vec::new();
    let mut inputs = Vec::new();
    let mut read_only = Vec::new();
    for (i, p) in procs.iter().enumerate() {
        let g = Prog::new(&p.p, opts);
        if g.writes() {
            progs.push(g);
            inputs.push(i);
        } else {
            read_only.push(p.name().to_string());
        }
    }
    // Block merges forced by cycles (G3), kept as (proc, op) pairs across rounds.
    let mut forced: Vec<((usize, usize), (usize, usize))> = Vec::new();
    loop {
        let pieces: Vec<BTreeMap<usize, Piece>> = progs.iter_mut().map(|g| g.settle()).collect();
        if coarsen(&mut progs, opts.slicing) {
            continue;
        }
        // Slices, globally numbered.
        let slices: Vec<(usize, usize)> = pieces
            .iter()
            .enumerate()
            .flat_map(|(i, ps)| ps.keys().map(move |&r| (i, r)))
            .collect();
        let gid: BTreeMap<(usize, usize), usize> =
            slices.iter().enumerate().map(|(g, &k)| (k, g)).collect();
        let mut blocks = Uf::new(slices.len());
        // G2: every slice on a table some slice writes joins that table's block.
        let mut by_table: BTreeMap<String, (Vec<usize>, bool)> = BTreeMap::new();
        for (pi, g) in progs.iter_mut().enumerate() {
            for x in g.db_ops() {
                let r = g.uf.find(x);
                if let (Some(t), Some(&id)) = (&g.p.ops[x].table, gid.get(&(pi, r))) {
                    let e = by_table.entry(t.clone()).or_default();
                    e.0.push(id);
                    e.1 |= g.f.kind[x] == Kind::Write;
                }
            }
        }
        blocks.join_written(&by_table);
        for &((pa, a), (pb, b)) in &forced {
            let ra = progs[pa].uf.find(a);
            let rb = progs[pb].uf.find(b);
            if let (Some(&x), Some(&y)) = (gid.get(&(pa, ra)), gid.get(&(pb, rb))) {
                blocks.union(x, y);
            }
        }
        // G4: two slices of one procedure in one block merge.
        if merge_same_procedure(&mut progs, &slices, &mut blocks) {
            continue;
        }
        // G3: block edges from local edges; a cycle of blocks merges.
        let mut bedges = BTreeSet::new();
        for (pi, ps) in pieces.iter().enumerate() {
            for (&s, p) in ps {
                for &a in p.imports.values() {
                    if let (Some(&x), Some(&y)) = (gid.get(&(pi, a)), gid.get(&(pi, s))) {
                        let (bx, by) = (blocks.find(x), blocks.find(y));
                        if bx != by {
                            bedges.insert((bx, by));
                        }
                    }
                }
            }
        }
        let roots: BTreeSet<usize> = (0..slices.len()).map(|g| blocks.find(g)).collect();
        let roots: Vec<usize> = roots.into_iter().collect();
        let cycles = sccs(&roots, &bedges);
        if !cycles.is_empty() {
            for c in cycles {
                for w in c.windows(2) {
                    forced.push((slices[w[0]], slices[w[1]]));
                }
            }
            continue;
        }
        let mut gdg = output(
            &mut progs,
            pieces,
            &slices,
            &mut blocks,
            &bedges,
            read_only,
            opts.slicing,
        );
        for (p, i) in gdg.procedures.iter_mut().zip(&inputs) {
            p.input = *i;
        }
        return gdg;
    }
}

/// The baselines of thesis Fig. 4.18 on the settled partitions: whether any slice merged.
///
/// `whole`: each procedure one slice. `chopping` (Shasha et al., TODS 1995, adapted as the
/// thesis's baseline): a chopping is correct when its SC-graph has no cycle that holds an
/// S-edge (between pieces of one call) and a C-edge (pieces of two calls that access one
/// table, one of them writing it; table-level, like the analysis). The finest correct
/// chopping of a procedure P, the others unchopped, merges two of P's pieces when each
/// conflicts with a procedure of one connected component of the procedures' conflict graph
/// (a C-path between them through other calls closes an SC-cycle with their S-edge). A log
/// holds many calls of each procedure, so P's other calls are among those procedures.
fn coarsen(progs: &mut [Prog<'_>], slicing: PacmanSlicing) -> bool {
    let mut changed = false;
    match slicing {
        PacmanSlicing::Pacman => {}
        PacmanSlicing::Whole => {
            for g in progs.iter_mut() {
                let ops = g.db_ops();
                for w in ops.windows(2) {
                    changed |= g.uf.union(w[0], w[1]);
                }
            }
        }
        PacmanSlicing::Chopping => {
            // Each procedure's tables (table → written), and each slice's.
            let access = |g: &mut Prog<'_>, slice: Option<usize>| {
                let mut m: BTreeMap<String, bool> = BTreeMap::new();
                for x in g.db_ops() {
                    if slice.is_some_and(|r| g.uf.find(x) != r) {
                        continue;
                    }
                    if let Some(t) = &g.p.ops[x].table {
                        *m.entry(t.clone()).or_default() |= g.f.kind[x] == Kind::Write;
                    }
                }
                m
            };
            let conflict = |a: &BTreeMap<String, bool>, b: &BTreeMap<String, bool>| {
                a.iter().any(|(t, &w)| b.get(t).is_some_and(|&bw| w || bw))
            };
            let procs: Vec<BTreeMap<String, bool>> =
                progs.iter_mut().map(|g| access(g, None)).collect();
            let mut comp = Uf::new(procs.len());
            for i in 0..procs.len() {
                for j in i + 1..procs.len() {
                    if conflict(&procs[i], &procs[j]) {
                        comp.union(i, j);
                    }
                }
            }
            for g in progs.iter_mut() {
                let roots: BTreeSet<usize> = g.db_ops().into_iter().map(|x| g.uf.find(x)).collect();
                let mut first: BTreeMap<usize, usize> = BTreeMap::new();
                for r in roots {
                    let tables = access(g, Some(r));
                    for (q, qt) in procs.iter().enumerate() {
                        if !conflict(&tables, qt) {
                            continue;
                        }
                        match first.get(&comp.find(q)) {
                            Some(&r0) => changed |= g.uf.union(r0, r),
                            None => {
                                first.insert(comp.find(q), r);
                            }
                        }
                    }
                }
            }
        }
    }
    changed
}

/// G4: unions, in each procedure, its slices that share a block; whether any did.
fn merge_same_procedure(
    progs: &mut [Prog<'_>],
    slices: &[(usize, usize)],
    blocks: &mut Uf,
) -> bool {
    let mut first: BTreeMap<(usize, usize), usize> = BTreeMap::new();
    let mut changed = false;
    for (g, &(pi, r)) in slices.iter().enumerate() {
        let b = blocks.find(g);
        match first.get(&(b, pi)) {
            Some(&r0) => changed |= progs[pi].uf.union(r0, r),
            None => {
                first.insert((b, pi), r);
            }
        }
    }
    changed
}

/// S8: numbers blocks in topological order and slices by their first operation.
fn output(
    progs: &mut [Prog<'_>],
    pieces: Vec<BTreeMap<usize, Piece>>,
    slices: &[(usize, usize)],
    blocks: &mut Uf,
    bedges: &BTreeSet<(usize, usize)>,
    read_only: Vec<String>,
    slicing: PacmanSlicing,
) -> Gdg {
    // Topological order, ties by the smallest global slice id (procedure name, first op).
    let roots: BTreeSet<usize> = (0..slices.len()).map(|g| blocks.find(g)).collect();
    let mut indeg: BTreeMap<usize, usize> = roots.iter().map(|&r| (r, 0)).collect();
    for &(_, b) in bedges {
        *indeg.entry(b).or_default() += 1;
    }
    let mut ready: BTreeSet<usize> = indeg
        .iter()
        .filter(|(_, &d)| d == 0)
        .map(|(&r, _)| r)
        .collect();
    let mut order = Vec::new();
    while let Some(&r) = ready.iter().next() {
        ready.remove(&r);
        order.push(r);
        for &(a, b) in bedges {
            if a == r {
                if let Some(d) = indeg.get_mut(&b) {
                    *d -= 1;
                    if *d == 0 {
                        ready.insert(b);
                    }
                }
            }
        }
    }
    let block_no: BTreeMap<usize, usize> = order.iter().enumerate().map(|(i, &r)| (r, i)).collect();
    let mut out_blocks: Vec<Block> = order
        .iter()
        .map(|_| Block {
            slices: Vec::new(),
            tables: Vec::new(),
        })
        .collect();
    let mut procedures = Vec::new();
    let mut table_info: Vec<BTreeMap<String, (bool, usize)>> = vec![BTreeMap::new(); order.len()];
    for (pi, (g, ps)) in progs.iter_mut().zip(pieces).enumerate() {
        let roots: Vec<usize> = ps.keys().copied().collect();
        let local: BTreeMap<usize, usize> =
            roots.iter().enumerate().map(|(i, &r)| (r, i)).collect();
        let mut out = Vec::new();
        let mut edges = BTreeSet::new();
        let mut exports: Vec<BTreeSet<String>> = vec![BTreeSet::new(); roots.len()];
        let mut export_slots: Vec<BTreeSet<usize>> = vec![BTreeSet::new(); roots.len()];
        for (si, (&r, p)) in ps.iter().enumerate() {
            let gslice = slices.iter().position(|&k| k == (pi, r)).unwrap_or(0);
            let b = block_no.get(&blocks.find(gslice)).copied().unwrap_or(0);
            let ops: Vec<usize> = g
                .db_ops()
                .into_iter()
                .filter(|&x| g.uf.find(x) == r)
                .collect();
            for &x in &ops {
                if let Some(t) = g.p.ops[x].table.clone() {
                    let k = g.key_prefix(x, r);
                    let e = table_info[b].entry(t).or_insert((false, usize::MAX));
                    e.0 |= g.f.kind[x] == Kind::Write;
                    e.1 = e.1.min(k);
                }
            }
            let mut imports = Vec::new();
            let mut import_slots = Vec::new();
            for (&v, &a) in &p.imports {
                let from = local.get(&a).copied().unwrap_or(0);
                imports.push((g.var(v), from));
                import_slots.push((v, from));
                edges.insert((from, si));
                exports[from].insert(g.var(v));
                export_slots[from].insert(v);
            }
            out_blocks[b].slices.push((pi, si));
            out.push(Slice {
                ops,
                replicated: p.replicated.iter().copied().collect(),
                imports,
                exports: Vec::new(),
                import_slots,
                export_slots: Vec::new(),
                block: b,
            });
        }
        for ((s, e), es) in out.iter_mut().zip(exports).zip(export_slots) {
            s.exports = e.into_iter().collect();
            s.export_slots = es.into_iter().collect();
        }
        procedures.push(ProcSlices {
            procedure: g.p.name.clone(),
            input: 0,
            slices: out,
            edges: edges.into_iter().collect(),
            ops: g
                .p
                .ops
                .iter()
                .enumerate()
                .map(|(i, o)| format!("#{i} line {}: {}", o.line, o.text))
                .collect(),
            op_tables: g.p.ops.iter().map(|o| o.table.clone()).collect(),
            op_writes: g.f.kind.iter().map(|k| *k == Kind::Write).collect(),
        });
    }
    for (b, info) in out_blocks.iter_mut().zip(table_info) {
        b.tables = info
            .into_iter()
            .map(|(table, (written, k))| BlockTable {
                table,
                written,
                key_prefix: if k == usize::MAX { 0 } else { k },
            })
            .collect();
    }
    let edges: Vec<(usize, usize)> = bedges
        .iter()
        .filter_map(|(a, b)| Some((*block_no.get(a)?, *block_no.get(b)?)))
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    Gdg {
        procedures,
        read_only,
        blocks: out_blocks,
        edges,
        slicing,
    }
}

impl Gdg {
    /// `procedure/k`: slice k of procedure `pi`.
    fn slice_name(&self, pi: usize, si: usize) -> String {
        format!("{}/{si}", self.procedures[pi].procedure)
    }

    /// The slices, blocks and block edges as text.
    pub fn text(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "PACMAN static analysis (thesis §4.4.1): {} procedures that write, {} blocks",
            self.procedures.len(),
            self.blocks.len()
        );
        if self.slicing != PacmanSlicing::Pacman {
            let _ = writeln!(
                s,
                "pieces: {} (thesis Fig. 4.18's baseline), not PACMAN's slices",
                self.slicing
            );
        }
        if !self.read_only.is_empty() {
            let _ = writeln!(
                s,
                "read-only (never logged as calls): {}",
                self.read_only.join(", ")
            );
        }
        let _ = writeln!(s, "blocks (topological order):");
        for (i, b) in self.blocks.iter().enumerate() {
            let names: Vec<String> = b
                .slices
                .iter()
                .map(|&(p, k)| self.slice_name(p, k))
                .collect();
            let _ = writeln!(s, "  B{i}: {}", names.join(", "));
            for t in &b.tables {
                let _ = writeln!(
                    s,
                    "      {} {} (key prefix p_T = {})",
                    if t.written { "owns" } else { "reads" },
                    t.table,
                    t.key_prefix
                );
            }
        }
        let _ = writeln!(s, "block edges:");
        for (a, b) in &self.edges {
            let _ = writeln!(s, "  B{a} -> B{b}");
        }
        for (pi, p) in self.procedures.iter().enumerate() {
            let _ = writeln!(s, "procedure {}:", p.procedure);
            for (si, sl) in p.slices.iter().enumerate() {
                let _ = writeln!(s, "  slice {} in B{}", self.slice_name(pi, si), sl.block);
                for &o in &sl.ops {
                    let _ = writeln!(s, "    {}", p.op_text(o).unwrap_or(""));
                }
                for &o in &sl.replicated {
                    let _ = writeln!(s, "    (replicated) {}", p.op_text(o).unwrap_or(""));
                }
                for (v, from) in &sl.imports {
                    let _ = writeln!(s, "    imports {v} from {}", self.slice_name(pi, *from));
                }
                if !sl.exports.is_empty() {
                    let _ = writeln!(s, "    exports {}", sl.exports.join(", "));
                }
            }
            for (a, b) in &p.edges {
                let _ = writeln!(
                    s,
                    "  edge {} -> {}",
                    self.slice_name(pi, *a),
                    self.slice_name(pi, *b)
                );
            }
        }
        s
    }

    /// The GDG in Graphviz `dot`: a cluster per block holding its slices, solid edges
    /// between slices of one procedure, bold edges between blocks.
    pub fn dot(&self) -> String {
        let esc = |t: &str| t.replace('\\', "\\\\").replace('"', "\\\"");
        let mut s = String::new();
        let _ = writeln!(s, "digraph gdg {{");
        let _ = writeln!(
            s,
            "  compound=true; node [shape=box, fontname=\"monospace\"];"
        );
        for (i, b) in self.blocks.iter().enumerate() {
            let tables: Vec<&str> = b.tables.iter().map(|t| t.table.as_str()).collect();
            let _ = writeln!(s, "  subgraph cluster_b{i} {{");
            let _ = writeln!(s, "    label=\"B{i}: {}\";", esc(&tables.join(", ")));
            let _ = writeln!(s, "    b{i} [shape=point, style=invis];");
            for &(p, k) in &b.slices {
                let _ = writeln!(
                    s,
                    "    s{p}_{k} [label=\"{}\"];",
                    esc(&self.slice_name(p, k))
                );
            }
            let _ = writeln!(s, "  }}");
        }
        for (pi, p) in self.procedures.iter().enumerate() {
            for (a, b) in &p.edges {
                let _ = writeln!(s, "  s{pi}_{a} -> s{pi}_{b};");
            }
        }
        for (a, b) in &self.edges {
            let _ = writeln!(
                s,
                "  b{a} -> b{b} [ltail=cluster_b{a}, lhead=cluster_b{b}, style=bold, color=gray];"
            );
        }
        s.push_str("}\n");
        s
    }
}

/// What holds registered procedures (a `Database` does): the input of [`registered`].
pub trait Registered {
    /// The registered procedures, in name order.
    fn registered_procedures(&self) -> Vec<Arc<Procedure>>;
}

/// The GDG over every procedure registered in `db` (`myriad explain --slices`).
pub fn explain_slices(db: &impl Registered) -> String {
    registered(db).text()
}

/// [`explain_slices`] in Graphviz `dot` (`myriad explain --slices --dot`).
pub fn explain_slices_dot(db: &impl Registered) -> String {
    registered(db).dot()
}

/// The GDG over every procedure registered in `db`, by name, with dead-code elimination.
pub fn registered(db: &impl Registered) -> Gdg {
    registered_with(db, Options::default())
}

/// The GDG over every procedure registered in `db`, by name, with `opts`
/// (`myriad explain --slices --pacman-slicing S`).
pub fn registered_with(db: &impl Registered, opts: Options) -> Gdg {
    let procs = db.registered_procedures();
    let refs: Vec<&Procedure> = procs.iter().map(|p| p.as_ref()).collect();
    analyze(&refs, opts)
}

#[cfg(test)]
mod tests;
