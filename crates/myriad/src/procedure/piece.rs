//! A PACMAN piece of a procedure call (thesis §4.4.3; `healing-pacman.md` B.4 D1): the
//! frame it starts from and its *footprint*, the `(table, first p_T key values)` pairs its
//! operations touch, computed before it runs.
//!
//! A key expression is evaluated from the piece's starting frame (arguments, declared
//! variables' initial values, imports) only when that frame's value is the one the operation
//! will see: every reaching definition of each variable it reads is the call's entry, or
//! the variable is an import of the slice (the analysis guarantees the piece does not
//! overwrite it before its last use), or it is defined by one top-level assignment before
//! the operation whose inputs are themselves known (evaluated first), or it is the counter
//! of an enclosing `FOR i IN a..b` whose bounds are known (the key is then taken for every
//! iteration). `IF`
//! headers are ignored: every arm's keys are in the footprint, a superset, which only orders
//! more. Anything else — a key read inside the piece, a row loop's field, a table whose
//! p_T is 0 — is the whole table, `(table, *)`.

use super::exec::{set_int, Frame};
use super::flow::Flow;
use super::graph::Source;
use super::ir::{vars_of, Stmt};
use super::slice::Slice;
use super::Procedure;
use crate::query::expr::{eval_int, value_of, E, V};
use crate::schema::{encode_int, ColumnType};
use crate::storage::TableRef;
use crate::value::Value;

/// Keys a footprint enumerates for one operation before it gives up and takes the table.
const KEYS_MAX: usize = 4096;

/// How one operation's footprint is found.
pub(crate) enum KeyPlan {
    /// `(table, *)`.
    Whole(TableRef),
    /// `(table, values of key)`, for every value of the counters of `loops` (outermost
    /// first: slot, low and high bound).
    Keys {
        table: TableRef,
        /// Top-level assignments the key depends on (slot, value), in program order.
        pre: Vec<(usize, E)>,
        loops: Vec<(usize, E, E)>,
        key: Vec<(usize, E)>,
        /// Every key column is INT: a key whose expressions all take the INT path
        /// (`eval_int`) is encoded straight from the integers (`int_key`).
        ints: bool,
    },
}

/// One entry of a footprint: the table (its address) and a hash of the first p_T components
/// of a key as the table encodes them (`TableSchema::encode_key_prefix`; `None`: `*`). A
/// call's key values and a row record's encoded key meet in the encoding, so calls and row
/// records queue alike (`row_key`). Two keys whose hashes collide share a queue: their
/// pieces run in log order although they need not, which costs parallelism, never
/// correctness.
pub(crate) type FootKey = (usize, Option<u64>);

impl KeyPlan {
    /// Whether `self` and `o` give the same footprint in every frame (their expressions
    /// differ at most in source positions).
    fn same(&self, o: &KeyPlan) -> bool {
        let same_e = |a: &[(usize, E)], b: &[(usize, E)]| {
            a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.0 == y.0 && x.1.same(&y.1))
        };
        match (self, o) {
            (KeyPlan::Whole(a), KeyPlan::Whole(b)) => std::sync::Arc::ptr_eq(a, b),
            (
                KeyPlan::Keys {
                    table: t1,
                    pre: p1,
                    loops: l1,
                    key: k1,
                    ints: i1,
                },
                KeyPlan::Keys {
                    table: t2,
                    pre: p2,
                    loops: l2,
                    key: k2,
                    ints: i2,
                },
            ) => {
                std::sync::Arc::ptr_eq(t1, t2)
                    && i1 == i2
                    && same_e(p1, p2)
                    && same_e(k1, k2)
                    && l1.len() == l2.len()
                    && l1
                        .iter()
                        .zip(l2)
                        .all(|(a, b)| a.0 == b.0 && a.1.same(&b.1) && a.2.same(&b.2))
            }
            _ => false,
        }
    }
}

fn table_id(t: &TableRef) -> usize {
    std::sync::Arc::as_ptr(t) as usize
}

fn hash_key(encoded: &[u8]) -> u64 {
    use std::hash::Hasher;
    let mut h = rustc_hash::FxHasher::default();
    h.write(encoded);
    h.finish()
}

/// The footprint entry of a row record's write to `t` with encoded primary key `key`, in a
/// table keyed by its first `p` components (`usize::MAX`: all of them; 0: the whole table).
pub(crate) fn row_key(t: &TableRef, key: &[u8], p: usize) -> FootKey {
    let len = match p {
        0 => None,
        usize::MAX => Some(key.len()),
        p => t.schema.key_prefix_len(0, key, p),
    };
    (table_id(t), len.map(|n| hash_key(&key[..n])))
}

/// Does `p` have a `RETURN` before its end (inside a block, or not its last statement)? The
/// replay view drops `RETURN`, which is right only when nothing follows it.
pub(crate) fn early_return(p: &Procedure) -> bool {
    fn nested(body: &[Stmt]) -> bool {
        body.iter().any(|s| match s {
            Stmt::Return { .. } => true,
            Stmt::If {
                arms, otherwise, ..
            } => arms.iter().any(|(_, b)| nested(b)) || nested(otherwise),
            Stmt::ForRange { body, .. } | Stmt::ForRows { body, .. } => nested(body),
            _ => false,
        })
    }
    let body = &p.p.body;
    let (last, rest) = match body.split_last() {
        Some((Stmt::Return { .. }, rest)) => (None, rest),
        Some((last, rest)) => (Some(last), rest),
        None => return false,
    };
    nested(rest) || last.is_some_and(|s| nested(std::slice::from_ref(s)))
}

/// The key plans of `slice` of `p`; `prefix(table)` is the block's p_T for a table the block
/// writes (`None`: a table nobody writes, which needs no footprint).
pub(crate) fn key_plans(
    p: &Procedure,
    slice: &Slice,
    prefix: impl Fn(&str) -> Option<usize>,
) -> Vec<KeyPlan> {
    let f = Flow::new(&p.p);
    // Operation x's statement and enclosing header.
    let stmts = |x: usize| Some((f.stmt.get(x).copied().flatten()?, f.parent[x]));
    let imported: Vec<usize> = slice.import_slots.iter().map(|&(v, _)| v).collect();
    let ancestors = |x: usize| f.ancestors(x);
    // The top-level assignments and the enclosing counting loops of `x` whose values `es`
    // need, or `None` if a value of `es` is not known before the piece runs.
    let loops_for = |x: usize, es: &[&E]| -> Option<(Vec<usize>, Vec<usize>)> {
        let mut need: Vec<(usize, Vec<usize>)> = vec![(x, Vec::new())];
        for e in es {
            vars_of(e, &mut need[0].1);
        }
        let mut loops = Vec::new();
        let mut pre = Vec::new();
        while let Some((at, vars)) = need.pop() {
            for v in vars {
                if imported.contains(&v) {
                    continue;
                }
                for src in f.reach(at, v) {
                    match src {
                        Source::Entry => {}
                        Source::Op(h) => {
                            // A top-level assignment before `x` always ran, and is the only
                            // definition reaching it.
                            if let Some((Stmt::Assign { slot, value, .. }, None)) = stmts(*h) {
                                if *slot != v || *h >= x {
                                    return None;
                                }
                                if !pre.contains(h) {
                                    pre.push(*h);
                                    let mut vs = Vec::new();
                                    vars_of(value, &mut vs);
                                    need.push((*h, vs));
                                }
                                continue;
                            }
                            let Some((Stmt::ForRange { slot, lo, hi, .. }, _)) = stmts(*h) else {
                                return None;
                            };
                            if *slot != v || !ancestors(x).any(|a| a == *h) {
                                return None;
                            }
                            if !loops.contains(h) {
                                loops.push(*h);
                                let mut vs = Vec::new();
                                vars_of(lo, &mut vs);
                                vars_of(hi, &mut vs);
                                need.push((*h, vs));
                            }
                        }
                    }
                }
            }
        }
        pre.sort_unstable();
        Some((pre, loops))
    };
    let mut out = Vec::new();
    for &x in &slice.ops {
        let Some((st, _)) = stmts(x) else {
            continue;
        };
        let Some((table, rows)) = super::slice::key_equalities(st) else {
            continue;
        };
        let Some(k) = prefix(&table.schema.name) else {
            continue;
        };
        let pk = &table.schema.indexes()[0].columns;
        for eqs in rows {
            let key: Option<Vec<(usize, E)>> = pk[..k.min(pk.len())]
                .iter()
                .map(|c| {
                    eqs.iter()
                        .find(|(col, _)| col == c)
                        .map(|(c, e)| (*c, (*e).clone()))
                })
                .collect();
            let plan = match key {
                Some(key) if k > 0 => {
                    let es: Vec<&E> = key.iter().map(|(_, e)| e).collect();
                    loops_for(x, &es).map(|(pre, ls)| {
                        let loops = ancestors(x)
                            .collect::<Vec<_>>()
                            .into_iter()
                            .rev()
                            .filter(|a| ls.contains(a))
                            .filter_map(|a| match stmts(a) {
                                Some((Stmt::ForRange { slot, lo, hi, .. }, _)) => {
                                    Some((*slot, lo.clone(), hi.clone()))
                                }
                                _ => None,
                            })
                            .collect();
                        let pre = pre
                            .iter()
                            .filter_map(|a| match stmts(*a) {
                                Some((Stmt::Assign { slot, value, .. }, _)) => {
                                    Some((*slot, value.clone()))
                                }
                                _ => None,
                            })
                            .collect();
                        KeyPlan::Keys {
                            ints: key
                                .iter()
                                .all(|(c, _)| table.schema.columns()[*c].ty == ColumnType::Int),
                            table: table.clone(),
                            pre,
                            loops,
                            key,
                        }
                    })
                }
                _ => None,
            };
            let plan = plan.unwrap_or_else(|| KeyPlan::Whole(table.clone()));
            // The arms of an IF often repeat one access (TPC-C's ten stock reads and the
            // UPDATE after them): one plan each is enough. Compared by what the plans
            // compute, not how they print: their expressions carry source positions, so a
            // printed signature told the eleven stock plans apart and each New-Order's
            // stock keys were enumerated eleven times.
            if !out.iter().any(|p: &KeyPlan| p.same(&plan)) {
                out.push(plan);
            }
        }
    }
    out
}

/// Adds the footprint of `plans` in frame `f` (filled as `fill_of(plans)` says) to `out`.
/// Changes the slots of loop counters and of the assignments it evaluates: start `f` again
/// before the piece runs (PACMAN's scheduler fills a frame afresh for each run).
///
/// Keys are hashed as they are enumerated (`Keys` holds the scratch), never kept as values:
/// a TPC-C log has millions of pieces.
pub(crate) fn footprint(plans: &[KeyPlan], f: &mut Frame, k: &mut Keys, out: &mut Vec<FootKey>) {
    footprint_by(plans, f, k, out, Path::Int);
}

/// How `Enumerate` encodes a key of all-INT columns.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Path {
    /// `int_key` when every expression takes the INT path, else `General`.
    Int,
    /// Values, `coerce`, `encode_key_prefix` (the reference the INT path must equal).
    General,
}

/// `footprint` by the general path only: the reference its INT path is tested against.
#[cfg(test)]
pub(crate) fn footprint_general(
    plans: &[KeyPlan],
    f: &mut Frame,
    k: &mut Keys,
    out: &mut Vec<FootKey>,
) {
    footprint_by(plans, f, k, out, Path::General);
}

fn footprint_by(
    plans: &[KeyPlan],
    f: &mut Frame,
    k: &mut Keys,
    out: &mut Vec<FootKey>,
    path: Path,
) {
    for plan in plans {
        match plan {
            KeyPlan::Whole(t) => out.push((table_id(t), None)),
            KeyPlan::Keys {
                table,
                pre,
                loops,
                key,
                ints,
            } => {
                let mark = out.len();
                let mut ok = true;
                for (slot, e) in pre {
                    match value_of(e, None, &f.vars) {
                        Ok(v) => f.vars[*slot] = v,
                        Err(_) => ok = false,
                    }
                }
                let path = if *ints { path } else { Path::General };
                let e = Enumerate {
                    key,
                    table,
                    path,
                    mark,
                };
                if !(ok && e.run(loops, &mut f.vars, k, out)) {
                    out.truncate(mark);
                    out.push((table_id(table), None));
                }
            }
        }
    }
}

/// The footprint of `plans` when none is keyed (`fill_of(plans).args` is false): their
/// tables, for which no frame is read. (A keyed plan, which `fill_of` rules out, would be
/// taken whole: more order, never less.)
pub(crate) fn tables_only(plans: &[KeyPlan], out: &mut Vec<FootKey>) {
    for plan in plans {
        debug_assert!(
            matches!(plan, KeyPlan::Whole(_)),
            "tables_only of a keyed plan"
        );
        match plan {
            KeyPlan::Whole(t) | KeyPlan::Keys { table: t, .. } => out.push((table_id(t), None)),
        }
    }
}

/// What a piece's footprint reads of its starting frame, so that the scheduler fills only
/// that much of it before `footprint` (the piece's run fills the whole frame again).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Fill {
    /// The arguments (every keyed plan; without one the frame is not touched at all).
    pub args: bool,
    /// Which of them (bit `i`: parameter `i`; every bit where a parameter past 63 or an
    /// initial value reads one): the others keep what the frame held.
    pub params: u64,
    /// The declared variables' initial values (`Proc::start`): some expression reads a
    /// local before `footprint` itself has set it.
    pub locals: bool,
    /// The slice's imports: some expression reads an imported slot.
    pub imports: bool,
}

/// The `Fill` `footprint(plans, ..)` needs, for a procedure with `nparams` parameters and
/// a slice importing the slots `imports`. A local counts as set only where `footprint`
/// always sets it first within the same plan: an earlier assignment of `pre` for later
/// `pre` entries, loop bounds and the key; the counter of an outer loop for an inner
/// loop's bounds and the key. Anything else a plan reads of a local — the value left by an
/// earlier plan, a loop's own or an inner counter, an assignment that comes later — is the
/// started frame's, and asks for `locals`.
pub(crate) fn fill_of(plans: &[KeyPlan], nparams: usize, imports: &[usize]) -> Fill {
    let mut fill = Fill {
        args: false,
        params: 0,
        locals: false,
        imports: false,
    };
    for plan in plans {
        let KeyPlan::Keys {
            pre, loops, key, ..
        } = plan
        else {
            continue;
        };
        fill.args = true;
        let mut set: Vec<usize> = Vec::new();
        let reads = |e: &E, set: &[usize], fill: &mut Fill| {
            let mut vs = Vec::new();
            vars_of(e, &mut vs);
            for v in vs {
                if imports.contains(&v) {
                    fill.imports = true;
                } else if v < nparams {
                    fill.params |= if v < 64 { 1 << v } else { u64::MAX };
                } else if !set.contains(&v) {
                    fill.locals = true;
                }
            }
        };
        for (slot, e) in pre {
            reads(e, &set, &mut fill);
            set.push(*slot);
        }
        for (slot, lo, hi) in loops {
            reads(lo, &set, &mut fill);
            reads(hi, &set, &mut fill);
            set.push(*slot);
        }
        for (_, e) in key {
            reads(e, &set, &mut fill);
        }
    }
    if fill.locals {
        // `Proc::start` evaluates initial values, which may read any parameter.
        fill.params = u64::MAX;
    }
    fill
}

/// The `Fill` a piece of the slice whose operations `mask` marks runs from: its imports,
/// every initial value (`Proc::start` evaluates them all) and the parameters the piece may
/// read — those its operations read, those every operation on a table its operations
/// access reads (a `FOR` loop of the slice warms that table's keys of its body,
/// `compile.rs`), those an initial value reads, and any it exports. The others are not
/// decoded: a New-Order district piece does not decode the order's three item arrays.
pub(crate) fn run_fill(p: &super::ir::Proc, mask: &[bool], exports: &[usize]) -> Fill {
    let mut read = run_reads(p, mask, exports);
    for e in p.inits.iter().filter_map(|(_, e)| e.as_ref()) {
        vars_of(e, &mut read);
    }
    let mut params = 0u64;
    for v in read.into_iter().filter(|&v| v < p.nparams) {
        params |= if v < 64 { 1 << v } else { u64::MAX };
    }
    Fill {
        args: true,
        params,
        locals: true,
        imports: true,
    }
}

/// The slots a piece of the slice whose operations `mask` marks may read (`run_fill`):
/// those its operations read, those every operation on a table its operations access reads,
/// and its exports.
fn run_reads(p: &super::ir::Proc, mask: &[bool], exports: &[usize]) -> Vec<usize> {
    let marked = |o: usize| mask.get(o).copied().unwrap_or(false);
    let tables: Vec<&str> = (0..p.ops.len())
        .filter(|&o| marked(o))
        .filter_map(|o| p.ops[o].table.as_deref())
        .collect();
    let mut read: Vec<usize> = exports.to_vec();
    for (o, op) in p.ops.iter().enumerate() {
        if marked(o) || op.table.as_deref().is_some_and(|t| tables.contains(&t)) {
            read.extend(op.uses.iter().map(|u| u.0));
        }
    }
    read
}

/// What of a call's start (`Proc::start`: every local some statement reads back to zero,
/// then every initial value) a piece's run needs: the locals it may read (`run_reads`) and
/// those their initial values read, set back to zero, and their initial values, in order.
/// Every slot the piece reads then holds what the whole start gives it. (A TPC-C piece
/// reads a few of its procedure's locals; the whole start reset and initialised all of them
/// for every piece.)
pub(crate) struct RunStart {
    /// Slots to set back to zero (`Proc::start_some`): a subset of `Proc::reset`.
    pub reset: Vec<usize>,
    /// Indices into `Proc::inits` to evaluate, ascending.
    pub inits: Vec<usize>,
}

/// The `RunStart` of a piece of the slice whose operations `mask` marks.
pub(crate) fn run_start(p: &super::ir::Proc, mask: &[bool], exports: &[usize]) -> RunStart {
    let mut needed: Vec<usize> = run_reads(p, mask, exports);
    needed.retain(|&v| v >= p.nparams);
    // An initial value may read an earlier local (its initial value, or zero): the slots
    // an initial value of a needed slot reads are needed too.
    let mut inits = Vec::new();
    for (i, (slot, e)) in p.inits.iter().enumerate().rev() {
        if needed.contains(slot) {
            inits.push(i);
            if let Some(e) = e {
                vars_of(e, &mut needed);
                needed.retain(|&v| v >= p.nparams);
            }
        }
    }
    inits.reverse();
    inits.retain(|&i| p.inits[i].1.is_some());
    RunStart {
        reset: p
            .reset
            .iter()
            .copied()
            .filter(|v| needed.contains(v))
            .collect(),
        inits,
    }
}

/// Scratch space of `footprint`: one key's values and their encoding.
#[derive(Default)]
pub(crate) struct Keys {
    values: Vec<Value>,
    encoded: Vec<u8>,
}

impl Keys {
    /// The encoding buffer, for a caller encoding a row record's keys (`row_key`'s input).
    pub(crate) fn buffer(&mut self) -> &mut Vec<u8> {
        &mut self.encoded
    }
}

/// One operation's keys being enumerated.
struct Enumerate<'p> {
    key: &'p [(usize, E)],
    table: &'p TableRef,
    path: Path,
    /// How many entries `out` held before this operation.
    mark: usize,
}

impl Enumerate<'_> {
    /// Adds the key for every value of the counters of `loops` to `out`; false if one does
    /// not evaluate, does not encode for the table, or there are more than `KEYS_MAX`.
    fn run(
        &self,
        loops: &[(usize, E, E)],
        vars: &mut [V],
        k: &mut Keys,
        out: &mut Vec<FootKey>,
    ) -> bool {
        let Some(((slot, lo, hi), rest)) = loops.split_first() else {
            if !(self.path == Path::Int && int_key(self.key, vars, &mut k.encoded)) {
                k.values.clear();
                for (c, e) in self.key {
                    match value_of(e, None, vars) {
                        Ok(V::Val(v)) => {
                            k.values
                                .push(crate::query::coerce(&self.table.schema, *c, v))
                        }
                        _ => return false,
                    }
                }
                if self
                    .table
                    .schema
                    .encode_key_prefix(0, k.values.as_slice(), &mut k.encoded)
                    .is_err()
                {
                    return false;
                }
            }
            out.push((table_id(self.table), Some(hash_key(&k.encoded))));
            return out.len() - self.mark <= KEYS_MAX;
        };
        let (Ok(V::Val(Value::Int(lo))), Ok(V::Val(Value::Int(hi)))) =
            (value_of(lo, None, vars), value_of(hi, None, vars))
        else {
            return false;
        };
        if hi.saturating_sub(lo) >= KEYS_MAX as i64 {
            return false;
        }
        for i in lo..=hi {
            set_int(&mut vars[*slot], i);
            if !self.run(rest, vars, k, out) {
                return false;
            }
        }
        true
    }
}

/// Encodes `key`, a key of all-INT columns, into `out` straight from the INT path of its
/// expressions: what `value_of`, `coerce` (an INT column keeps an INT) and
/// `encode_key_prefix` (an INT component is `encode_int`) make of it, without the values.
/// False, leaving `out` to the general path, when an expression does not take the INT path
/// (`value_of` would then ask the general evaluator).
fn int_key(key: &[(usize, E)], vars: &[V], out: &mut Vec<u8>) -> bool {
    out.clear();
    for (_, e) in key {
        let Some(i) = eval_int(e, None, vars) else {
            return false;
        };
        // `encode_component` of an INT, inlined (as a call it was 3 % of a PACMAN replay).
        encode_int(i, out);
    }
    true
}

#[cfg(test)]
mod tests;
