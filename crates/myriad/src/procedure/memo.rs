//! The procedure's side of `healing`'s memoized re-execution (spec A.6; thesis §3.4.1's
//! access cache) for point `UPDATE`s of a compiled call: per execution, its identity (the
//! operation, and how many times the run had executed it before: a loop's iterations are
//! distinct entries) and the values of the variables it used. A heal runs the body again;
//! an UPDATE whose entry from the previous run has equal inputs, and whose buffered version
//! the transaction can take back as it is (`Transaction::memo_reuse`: its row still stands
//! in the record it replaced), is not run. An UPDATE whose inputs differ (it depends on a
//! stale read), whose row changed, or that the previous run never reached runs — the
//! thesis's restoration of the operations a stale read affects, found by comparing instead
//! of walking the dependency graph (the spec's "equivalent implementation"; it follows
//! control flow too: an `IF` whose condition changed reaches other operations, which have
//! no entry and run). Reads always run again, through the access cache's tuple ids
//! (`cc::healing::Memo` says why).
//!
//! Parameters are not compared: a call cannot assign them (`ir.rs`), so they are the same
//! in every run of it. Inputs are compared as INTs and BOOLs; an execution with another
//! kind of value among them (text, NULL, an array) is not recorded.

use super::exec::{Flow, Frame, Step};
use crate::query::expr::V;
use crate::storage::TableRef;
use crate::txn::Transaction;
use crate::value::Value;

/// One recorded execution of an UPDATE.
#[derive(Clone, Copy)]
struct Entry {
    op: u32,
    /// Executions of `op` earlier in the same run.
    occ: u32,
    /// Its inputs, from here in the generation's `vals`.
    vals: u32,
    /// Where the transaction recorded its buffered version.
    write: u32,
}

/// One run's entries.
#[derive(Default)]
struct Generation {
    entries: Vec<Entry>,
    vals: Vec<i64>,
}

/// A call's memo, kept in its frame across the runs of one commit.
#[derive(Default)]
pub(crate) struct FrameMemo {
    gens: [Generation; 2],
    /// The generation being recorded.
    cur: usize,
    /// Executions of each operation so far in this run.
    occ: Vec<u32>,
    /// Where the search of the previous run's entries starts (a heal mostly meets them in
    /// their order).
    cursor: usize,
}

/// What one memoizable UPDATE is: its operation, table, the variable slots it uses
/// (parameters left out) and `found`'s slot.
pub(super) struct Slots {
    pub(super) op: u32,
    pub(super) table: TableRef,
    pub(super) inputs: Box<[usize]>,
    pub(super) found: usize,
}

/// A variable's value as an input: INTs and BOOLs only.
#[inline]
fn int_of(v: &V) -> Option<i64> {
    match v {
        V::Val(Value::Int(x)) => Some(*x),
        V::Bool(b) => Some(i64::from(*b)),
        _ => None,
    }
}

impl FrameMemo {
    /// A run of the call starts: `run` 0 is its first (nothing to reuse), `run` n the run
    /// of its n-th heal (reuses the run before).
    pub(super) fn start(&mut self, ops: usize, run: u32) {
        if run == 0 {
            self.cur = 0;
            self.gens[1].entries.clear();
        } else {
            self.cur ^= 1;
        }
        let g = &mut self.gens[self.cur];
        g.entries.clear();
        g.vals.clear();
        self.occ.clear();
        self.occ.resize(ops, 0);
        self.cursor = 0;
    }

    /// The previous run's entry for execution `occ` of `op`.
    fn find(&mut self, op: u32, occ: u32) -> Option<Entry> {
        let prev = &self.gens[self.cur ^ 1].entries;
        let n = prev.len();
        let i = (self.cursor..n)
            .chain(0..self.cursor.min(n))
            .find(|&i| prev[i].op == op && prev[i].occ == occ)?;
        self.cursor = i + 1;
        Some(prev[i])
    }
}

/// Runs a memoizable UPDATE (`run`) of a call under `healing`: in a heal, reused from the
/// previous run when its inputs and row are unchanged; otherwise run, and recorded if the
/// transaction can reuse it later.
pub(super) fn step(
    s: &Slots,
    tx: &mut Transaction<'_>,
    f: &mut Frame,
    run: &dyn Fn(&mut Transaction<'_>, &mut Frame) -> Step,
) -> Step {
    let m = &mut f.memo;
    let Some(occ) = m.occ.get_mut(s.op as usize) else {
        return run(tx, f);
    };
    let this = *occ;
    *occ += 1;
    let healing = tx.memo_run() > 0;
    if healing {
        if let Some(e) = m.find(s.op, this) {
            let prev = &m.gens[m.cur ^ 1].vals[e.vals as usize..];
            let same = s
                .inputs
                .iter()
                .zip(prev)
                .all(|(&slot, &x)| int_of(&f.vars[slot]) == Some(x));
            if same {
                if let Some(write) = tx.memo_reuse(e.write) {
                    let g = &mut m.gens[m.cur];
                    let vals = g.vals.len() as u32;
                    for &slot in s.inputs.iter() {
                        g.vals.extend(int_of(&f.vars[slot]));
                    }
                    g.entries.push(Entry {
                        op: s.op,
                        occ: this,
                        vals,
                        write,
                    });
                    // A recorded UPDATE found its row.
                    super::compile::set_found(f, s.found, true);
                    return Ok(Flow::Next);
                }
            }
        }
        tx.memo_ran_again();
    }
    // Inputs as they are before the UPDATE.
    let g = &mut m.gens[m.cur];
    let vals = g.vals.len();
    for &slot in s.inputs.iter() {
        match int_of(&f.vars[slot]) {
            Some(x) => g.vals.push(x),
            None => {
                g.vals.truncate(vals);
                return run(tx, f);
            }
        }
    }
    let mark = tx.memo_mark();
    let flow = run(tx, f);
    let write = match flow {
        Ok(Flow::Next) => tx.memo_capture(mark, &s.table),
        _ => None,
    };
    let g = &mut f.memo.gens[f.memo.cur];
    match write {
        Some(write) => g.entries.push(Entry {
            op: s.op,
            occ: this,
            vals: vals as u32,
            write,
        }),
        None => g.vals.truncate(vals),
    }
    flow
}
