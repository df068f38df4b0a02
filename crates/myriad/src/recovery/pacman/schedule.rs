//! A run of PACMAN batches (thesis §4.4.3–4.4.4, B.3–B.5 with one worker pool): one
//! piece-set per (batch, block), released to run when its parent blocks' piece-sets of the
//! same batch are done and — the pipelining of Fig. 4.9 — its own block's piece-set of the
//! previous batch is; inside one, pieces queued by footprint key (queues a worker may build
//! before the set is released, unless a footprint reads an import); workers run ready pieces.
//! Sync mode passes one batch at a time, so batches run one after another; pipelined mode
//! passes a window of consecutive batches, so a block may run batch k+1 while another
//! still runs batch k.
//!
//! Invariant: a piece runs only after every earlier piece of its piece-set that shares a
//! footprint key (or its table, for a `(table, *)` entry) has committed, after every
//! piece-set of its block's parent blocks in its batch has, and after its block's
//! piece-set of the previous batch has. So each key of a block's tables sees its writes in
//! log order, and a piece's imports (values its call's pieces in parent blocks exported)
//! are set before it starts. Across blocks nothing but those values flows: a table some
//! block writes is read by no other block (`slice.rs`: data-dependent slices share a block).

use super::{Plan, RecId};
use crate::error::{Error, Result};
use crate::log::COMMAND;
use crate::procedure::piece::{footprint, row_key, tables_only, Fill, FootKey, Keys, RunStart};
use crate::procedure::{
    call_procedure, decode_args_into, decode_some_args_of, replay_failed, Frame, Procedure,
};
use crate::query::expr::V;
use crate::recovery::replay::{apply, Ctx};
use crate::recovery::LogFile;
use parking_lot::{Condvar, Mutex};
use rustc_hash::{FxHashMap, FxHashSet};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Worker time by phase, summed over workers.
#[derive(Default)]
pub(super) struct Times {
    pub analysis: Duration,
    pub wait: Duration,
    pub execution: Duration,
}

/// A call of the batch. Its arguments stay in the log record and are decoded into a
/// worker's frame for each piece (`frame`): nothing is allocated per call but its exports.
struct Call<'a> {
    p: &'a Procedure,
    def: usize,
    /// The logged call (definition number and arguments).
    body: &'a [u8],
    /// Where its slices' exports start in `Batch::exports`.
    exports_at: usize,
}

/// A piece: a slice of a call, or the writes of a row record to one block's tables.
#[derive(Clone, Copy, Default)]
struct Piece {
    rec: RecId,
    /// Index into the batch's calls, or `NO_CALL` for a row record.
    call: u32,
    /// The call's slice.
    slice: u32,
    block: u32,
    /// Its piece-set: `batch * plan.blocks + block`.
    set: u32,
}

/// `Piece::call` of a row record's piece.
const NO_CALL: u32 = u32::MAX;

impl Piece {
    /// Its call and slice, or `None` for a row record.
    fn call(&self) -> Option<(usize, usize)> {
        (self.call != NO_CALL).then_some((self.call as usize, self.slice as usize))
    }
}

enum Task {
    Start(usize),
    Run(usize),
}

struct State {
    /// Ready work, taken newest first.
    ready: Vec<Task>,
    parents_left: Vec<usize>,
    /// Per piece-set, how far its queues are (`Batch::start`): `NOT_STARTED`, `BUILDING`
    /// or `BUILT`. A set may be queued to start twice (early, and again on top of the
    /// ready work when its parents are done); the second `Start` taken finds it claimed.
    started: Vec<u8>,
    /// Per piece-set started before its parents were done, the pieces ready at once: they
    /// are released when the last parent is done.
    held: Vec<Vec<usize>>,
    set_left: Vec<usize>,
    sets_done: usize,
    /// Per batch, its piece-sets not done yet.
    batch_left: Vec<usize>,
    /// The first batch with a piece-set not done.
    oldest: usize,
    /// Piece-sets released while an earlier batch was not done.
    overlapped: u64,
    preds_left: Vec<u32>,
    /// Per piece, where its successors start in `succ` and how many there are.
    succ_of: Vec<[u32; 2]>,
    /// Successor lists, each piece-set's appended when it starts, its pieces' in order:
    /// a piece-set finishing in log order reads this forward.
    succ: Vec<u32>,
    /// Tasks being worked on.
    running: usize,
    error: Option<Error>,
}

impl State {
    /// Appends the successor lists of the pieces from `first` on: piece `first + i` has
    /// `lists[ends[i - 1]..ends[i]]` (from 0 for the first).
    fn add_succs(&mut self, first: usize, lists: &[u32], ends: &[u32]) -> Result<()> {
        let base = u32::try_from(self.succ.len() + lists.len())
            .map_err(|_| internal("more than 2^32 successor entries in one run"))?
            - lists.len() as u32;
        self.succ.extend_from_slice(lists);
        let mut from = 0;
        for (i, &end) in ends.iter().enumerate() {
            self.succ_of[first + i] = [base + from, end - from];
            from = end;
        }
        Ok(())
    }
}

/// Sorts `v[from..]` and keeps one of each value there, dropping those `drop` picks.
fn sort_dedup_tail<T: Ord + Copy>(v: &mut Vec<T>, from: usize, drop: impl Fn(T) -> bool) {
    let tail = &mut v[from..];
    tail.sort_unstable();
    let mut n = 0;
    for x in 0..tail.len() {
        if !drop(tail[x]) && (n == 0 || tail[x] != tail[n - 1]) {
            tail[n] = tail[x];
            n += 1;
        }
    }
    v.truncate(from + n);
}

const NOT_STARTED: u8 = 0;
const BUILDING: u8 = 1;
const BUILT: u8 = 2;

/// What the workers share.
struct Batch<'a, 'c> {
    ctx: &'a Ctx<'c>,
    logs: &'a [LogFile],
    plan: &'a Plan,
    calls: Vec<Call<'a>>,
    /// Per (call, slice), the values of the slice's exports once its piece has run.
    exports: Vec<OnceLock<Vec<V>>>,
    /// The pieces set by set, each set's in log order: a piece-set runs through
    /// consecutive entries of this and of the per-piece arrays of `State`. (Laid out in log
    /// order, a set's pieces were a call's width apart and every piece's entries missed the
    /// cache: loads of them were most of `Batch::work`'s own time.)
    pieces: Vec<Piece>,
    /// Where each piece-set (`batch * plan.blocks + block`) starts in `pieces`, and the end.
    sets: Vec<usize>,
    /// How many batches this run holds.
    batches: usize,
    state: Mutex<State>,
    wake: Condvar,
    unordered: bool,
    unpipelined: bool,
    /// Static mode: no footprints; a piece-set's pieces run one after another.
    chained: bool,
}

/// What a run of batches did.
pub(super) struct Ran {
    pub pieces: u64,
    /// Piece-sets released (their pieces free to run) while an earlier batch was not done.
    pub overlapped: u64,
}

/// Runs the pieces of `batches` (consecutive batches, each in log order).
pub(super) fn run_batches(
    ctx: &Ctx<'_>,
    logs: &[LogFile],
    plan: &Plan,
    batches: &[Vec<RecId>],
    times: &mut Times,
) -> Result<Ran> {
    let t = Instant::now();
    let mut calls = Vec::new();
    // In log order first, with the size of each piece-set; then laid out set by set.
    let mut logged = Vec::new();
    let nsets = batches.len() * plan.blocks;
    let mut sizes = vec![0usize; nsets];
    let mut key = Vec::new();
    let mut checked = Frames::default();
    let mut exports = 0;
    for (k, &(i, j)) in batches
        .iter()
        .enumerate()
        .flat_map(|(k, recs)| recs.iter().map(move |r| (k, r)))
    {
        let f = &logs[i as usize];
        let r = &f.recs[j as usize];
        let mut add = |call: Option<(usize, usize)>, block: usize| {
            let set = k * plan.blocks + block;
            sizes[set] += 1;
            let (call, slice) = call.map_or((NO_CALL, 0), |(c, s)| (c as u32, s as u32));
            logged.push(Piece {
                rec: (i, j),
                call,
                slice,
                block: block as u32,
                set: set as u32,
            });
        };
        if r.n == COMMAND {
            let body = f.body(r);
            let (def, p) = call_procedure(ctx.definitions, body)?;
            // Decoded once here to refuse a damaged record before anything runs.
            let scratch = checked.entry(def as usize).or_insert_with(|| p.p.frame());
            decode_args_into(ctx.definitions, body, scratch)?;
            let slices = match plan.defs.get(def as usize) {
                Some(Some(Ok(s))) => s,
                Some(Some(Err(name))) => {
                    return Err(Error::Unsupported(format!(
                        "recovery `pacman` cannot replay calls of `{name}`: it has a RETURN \
                         before its end (use recovery `serial`)"
                    )))
                }
                // A definition that never writes is never logged as a call.
                _ => {
                    return Err(Error::Corrupt {
                        file: f.path.display().to_string(),
                        offset: 0,
                        message: format!(
                            "a logged call of `{}`, which never writes (a read-only \
                             procedure is not logged)",
                            p.name()
                        ),
                    })
                }
            };
            let c = calls.len();
            for (s, sp) in slices.iter().enumerate() {
                add(Some((c, s)), sp.block);
            }
            calls.push(Call {
                p,
                def: def as usize,
                body,
                exports_at: exports,
            });
            exports += slices.len();
        } else {
            let mut blocks = FxHashSet::default();
            ctx.writes(f, r, &mut key, |t, _, _, _| {
                if let Some(&b) = plan.owner.get(&t.schema.name) {
                    blocks.insert(b);
                }
                Ok(())
            })?;
            let mut blocks: Vec<usize> = blocks.into_iter().collect();
            blocks.sort_unstable();
            for b in blocks {
                add(None, b);
            }
        }
    }
    let n = logged.len();
    let mut sets = Vec::with_capacity(nsets + 1);
    let mut at = 0;
    for &z in &sizes {
        sets.push(at);
        at += z;
    }
    sets.push(at);
    let mut pieces = vec![Piece::default(); n];
    let mut next = sets.clone();
    for p in logged {
        let x = &mut next[p.set as usize];
        pieces[*x] = p;
        *x += 1;
    }
    let set_left = sizes;
    let unpipelined = unpipelined(ctx);
    // A piece-set waits for its parent blocks in its batch and, after the first batch, for
    // its own block in the batch before.
    let parents_left: Vec<usize> = (0..nsets)
        .map(|s| plan.parents[s % plan.blocks] + usize::from(s >= plan.blocks && !unpipelined))
        .collect();
    // A piece-set's queues (`Batch::start`: footprints, predecessors) depend on its own
    // pieces alone, unless a footprint reads a value a parent block's piece exports: every
    // other set may start at once, and a worker with no piece to run builds the queues of
    // sets still waiting for their parents (the big TPC-C block's start was a wait for the
    // other worker). Its pieces are released when its parents are done.
    let early: Vec<bool> = (0..plan.blocks)
        .map(|b| {
            !plan
                .defs
                .iter()
                .flatten()
                .flatten()
                .flatten()
                .any(|sp| sp.block == b && sp.fill.imports)
        })
        .collect();
    // Reversed, so that the worker taking newest first starts the first batch's sets first
    // (the test-only `unpipelined` schedule starts the last batch first instead).
    let mut ready: Vec<Task> = (0..nsets)
        .rev()
        .filter(|&s| parents_left[s] == 0 || early[s % plan.blocks])
        .map(Task::Start)
        .collect();
    if unpipelined {
        ready.reverse();
    }
    let batch = Batch {
        ctx,
        logs,
        plan,
        calls,
        exports: (0..exports).map(|_| OnceLock::new()).collect(),
        pieces,
        sets,
        batches: batches.len(),
        state: Mutex::new(State {
            ready,
            parents_left,
            started: vec![NOT_STARTED; nsets],
            held: vec![Vec::new(); nsets],
            set_left,
            sets_done: 0,
            batch_left: vec![plan.blocks; batches.len()],
            oldest: 0,
            overlapped: 0,
            preds_left: vec![0; n],
            succ_of: vec![[0, 0]; n],
            succ: Vec::with_capacity(n),
            running: 0,
            error: None,
        }),
        wake: Condvar::new(),
        unordered: unordered(ctx),
        unpipelined,
        chained: ctx.db.shared.config.pacman_mode == crate::config::PacmanMode::Static,
    };
    times.analysis += t.elapsed();
    let threads = ctx.threads.max(1);
    let got: Vec<Times> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..threads).map(|_| s.spawn(|| batch.work())).collect();
        hs.into_iter()
            .map(|h| h.join().unwrap_or_default())
            .collect()
    });
    for g in got {
        times.analysis += g.analysis;
        times.wait += g.wait;
        times.execution += g.execution;
    }
    let st = batch.state.into_inner();
    if let Some(e) = st.error {
        return Err(e);
    }
    if st.sets_done != nsets {
        return Err(Error::Corrupt {
            file: "command log".into(),
            offset: 0,
            message: format!(
                "pacman replay stopped with {} of {nsets} piece-sets done",
                st.sets_done
            ),
        });
    }
    Ok(Ran {
        pieces: n as u64,
        overlapped: st.overlapped,
    })
}

#[cfg(test)]
fn unordered(ctx: &Ctx<'_>) -> bool {
    ctx.db.shared.config.pacman_unordered
}

#[cfg(not(test))]
fn unordered(_: &Ctx<'_>) -> bool {
    false
}

#[cfg(test)]
fn unpipelined(ctx: &Ctx<'_>) -> bool {
    ctx.db.shared.config.pacman_unpipelined
}

#[cfg(not(test))]
fn unpipelined(_: &Ctx<'_>) -> bool {
    false
}

/// Most pieces one replay transaction runs. (Serial replay runs one call per transaction;
/// here one per piece replayed no faster on a 10 s TPC-C log: 17.1–18.2 s against
/// 15.8–17.6 s at 2 threads, static and sync.)
const RUN_GROUP: usize = 8;

/// A worker's frames, one per procedure definition, refilled for each piece.
type Frames = FxHashMap<usize, Frame>;

/// What a worker keeps from one piece-set it starts to the next: its frames and the
/// vectors and maps of the footprints and queues, cleared but not freed. Allocated afresh
/// per piece-set, they grew by doubling each time, faulting in new pages.
#[derive(Default)]
struct Scratch {
    frames: Frames,
    foot: Footprints,
    preds: Vec<usize>,
    pred_ends: Vec<usize>,
    /// Per footprint key, the last piece queued on it.
    last: FxHashMap<FootKey, usize>,
    /// Per table, the keyed pieces queued since its last `*` (kept per table, emptied).
    since_star: FxHashMap<usize, Vec<usize>>,
    /// Per table, its last `*` piece.
    star: FxHashMap<usize, usize>,
    /// A piece-set's successor lists and where each piece's ends (`State::add_succs`).
    succ_lists: Vec<u32>,
    succ_ends: Vec<u32>,
}

/// The footprints of a run of pieces: every key in one vector, and where each piece's end.
#[derive(Default)]
struct Footprints {
    k: Keys,
    keys: Vec<FootKey>,
    ends: Vec<usize>,
    seen: Seen,
}

/// Drops repeats from one footprint at a time without sorting it: a small open-addressing
/// table of positions in the footprint, valid for the current footprint only (a stamp per
/// slot). A footprint longer than `Seen::MAX` is sorted instead.
struct Seen {
    /// Per slot: the stamp of the footprint that filled it, and the position it holds.
    slots: Box<[(u32, u32)]>,
    stamp: u32,
}

impl Default for Seen {
    fn default() -> Self {
        Seen {
            slots: vec![(0, 0); Self::SLOTS].into_boxed_slice(),
            stamp: 0,
        }
    }
}

impl Seen {
    /// Slots (a power of two), twice the longest footprint deduplicated here.
    const SLOTS: usize = 1024;
    const MAX: usize = Self::SLOTS / 2;

    /// Keeps the first of each value in `v[from..]`, in order (nothing before `from` is
    /// compared).
    fn dedup_tail(&mut self, v: &mut Vec<FootKey>, from: usize) {
        let len = v.len() - from;
        if len < 2 {
            return;
        }
        if len > Self::MAX {
            sort_dedup_tail(v, from, |_| false);
            return;
        }
        self.stamp = self.stamp.wrapping_add(1);
        if self.stamp == 0 {
            // Every slot's stamp is now stale or zero; zero marks an empty slot.
            self.slots.fill((0, 0));
            self.stamp = 1;
        }
        let mask = Self::SLOTS - 1;
        let mut n = from;
        for x in from..v.len() {
            let key = v[x];
            let h = (key.0 as u64 ^ key.1.map_or(0x5bd1_e995, |k| k.rotate_left(17)))
                .wrapping_mul(0x9E37_79B9_7F4A_7C15);
            let mut i = (h >> 54) as usize & mask;
            let fresh = loop {
                let (st, at) = self.slots[i];
                if st != self.stamp {
                    self.slots[i] = (self.stamp, n as u32);
                    break true;
                }
                if v[at as usize] == key {
                    break false;
                }
                i = (i + 1) & mask;
            };
            if fresh {
                v[n] = key;
                n += 1;
            }
        }
        v.truncate(n);
    }
}

impl Batch<'_, '_> {
    fn nsets(&self) -> usize {
        self.sets.len() - 1
    }

    /// The pieces of piece-set `set`.
    fn set(&self, set: usize) -> std::ops::Range<usize> {
        self.sets[set]..self.sets[set + 1]
    }

    /// A worker: takes ready work until every piece-set is done or something failed.
    fn work(&self) -> Times {
        let mut times = Times::default();
        let mut scratch = Scratch::default();
        let mut group = Vec::with_capacity(RUN_GROUP);
        let mut st = self.state.lock();
        loop {
            if st.error.is_some() || st.sets_done == self.nsets() {
                self.wake.notify_all();
                return times;
            }
            let Some(task) = st.ready.pop() else {
                if st.running == 0 {
                    // Nothing ready, nothing running, piece-sets left: a schedule bug,
                    // reported rather than waited on forever.
                    st.error.get_or_insert(internal("no piece is ready"));
                    continue;
                }
                let t = Instant::now();
                self.wake.wait(&mut st);
                times.wait += t.elapsed();
                continue;
            };
            if let Task::Start(set) = task {
                if st.started[set] != NOT_STARTED {
                    continue;
                }
                st.started[set] = BUILDING;
            }
            st.running += 1;
            // Ready pieces on top of this one join its replay transaction, up to
            // `RUN_GROUP` and an even share of what is ready among the workers: pieces ready
            // together share no footprint key, so one transaction may run them in turn.
            group.clear();
            if let Task::Run(q) = task {
                group.push(q);
                let share = (st.ready.len() + 1) / self.ctx.threads.max(1);
                while group.len() < RUN_GROUP.min(share) {
                    match st.ready.last() {
                        Some(&Task::Run(q)) => {
                            st.ready.pop();
                            group.push(q);
                        }
                        _ => break,
                    }
                }
            }
            drop(st);
            let t = Instant::now();
            let r = match task {
                Task::Start(b) => {
                    let r = self.start(&mut scratch, b);
                    times.analysis += t.elapsed();
                    r
                }
                Task::Run(_) => {
                    let r = self.run(&mut scratch.frames, &group);
                    times.execution += t.elapsed();
                    r.map(|()| Vec::new())
                }
            };
            st = self.state.lock();
            st.running -= 1;
            match (r, task) {
                (Err(e), _) => {
                    st.error.get_or_insert(e);
                }
                (Ok(ready), Task::Start(set)) => {
                    st.started[set] = BUILT;
                    st.held[set] = ready;
                    if st.parents_left[set] == 0 {
                        self.release(&mut st, set);
                    }
                }
                (Ok(_), Task::Run(_)) => {
                    for &q in &group {
                        let st = &mut *st;
                        let [from, len] = st.succ_of[q];
                        for &s in &st.succ[from as usize..(from + len) as usize] {
                            let s = s as usize;
                            st.preds_left[s] -= 1;
                            if st.preds_left[s] == 0 {
                                st.ready.push(Task::Run(s));
                            }
                        }
                        let set = self.pieces[q].set as usize;
                        st.set_left[set] -= 1;
                        if st.set_left[set] == 0 {
                            self.set_done(st, set);
                        }
                    }
                }
            }
            // This worker takes the newest ready task itself at the top of the loop; wake
            // the others only for more than that (or to stop). Waking them for every piece
            // of a chain (static mode) cost each piece a futile wake-up on the other core.
            if st.ready.len() > 1 || st.error.is_some() || st.sets_done == self.nsets() {
                self.wake.notify_all();
            }
        }
    }

    /// Piece-set `set` is started and its parents are done: its pieces ready at once may
    /// run.
    fn release(&self, st: &mut State, set: usize) {
        if set / self.plan.blocks > st.oldest {
            st.overlapped += 1;
        }
        let ready = std::mem::take(&mut st.held[set]);
        // The first in log order on top: workers take them in order. (Under the test-only
        // `unordered` schedule, where every piece is ready at once, the last on top: pieces
        // sharing a key run newest first.)
        if self.unordered {
            st.ready.extend(ready.into_iter().map(Task::Run));
        } else {
            st.ready.extend(ready.into_iter().rev().map(Task::Run));
        }
        if self.set(set).is_empty() {
            self.set_done(st, set);
        }
    }

    /// Piece-set `set` is done: wake its children in its batch and its block's piece-set of
    /// the next batch.
    fn set_done(&self, st: &mut State, set: usize) {
        st.sets_done += 1;
        let blocks = self.plan.blocks;
        let (k, b) = (set / blocks, set % blocks);
        st.batch_left[k] -= 1;
        while st.oldest < self.batches && st.batch_left[st.oldest] == 0 {
            st.oldest += 1;
        }
        let next = (k + 1 < self.batches && !self.unpipelined).then_some(set + blocks);
        for c in self.plan.children[b]
            .iter()
            .map(|&c| k * blocks + c)
            .chain(next)
        {
            st.parents_left[c] -= 1;
            if st.parents_left[c] == 0 {
                match st.started[c] {
                    BUILT => self.release(st, c),
                    // On top of the ready work, as the newest (an early `Start` of it may
                    // still wait below).
                    NOT_STARTED => st.ready.push(Task::Start(c)),
                    // Its start releases it when done.
                    _ => {}
                }
            }
        }
    }

    /// Fills `frames`' frame of call `c`'s definition as slice `s` starts from, as far as
    /// `fill` asks: arguments, initial values, imports; returns it. Each worker keeps one
    /// frame per definition and refills it for every piece: a frame per piece, built at its
    /// footprint and kept until it ran, held a piece-set's worth of frames at once, and the
    /// allocator gave their pages back and faulted them in again (700 K page faults on a
    /// 10 s TPC-C log). A footprint asks only for what its keys read (`piece::fill_of`), a
    /// run for what its slice may read (`piece::run_fill`): a slot neither decoded nor set
    /// keeps another call's value, which that slice never reads; so does a local a run's
    /// start (`start`, `piece::run_start`) leaves alone. (Unit tests poison such parameters
    /// and locals, so a slice reading one fails to replay.)
    fn frame<'f>(
        &self,
        frames: &'f mut Frames,
        c: usize,
        s: usize,
        fill: Fill,
        start: Option<&RunStart>,
    ) -> Result<&'f mut Frame> {
        let call = &self.calls[c];
        let f = frames.entry(call.def).or_insert_with(|| call.p.p.frame());
        if fill.args {
            // `run_batches` found `call.p` from this record and decoded it once already.
            decode_some_args_of(call.p, call.body, f, fill.params)?;
            #[cfg(test)]
            poison_skipped(call.p, f, fill.params);
        }
        if fill.locals {
            match start {
                Some(rs) => {
                    call.p.p.start_some(f, rs)?;
                    #[cfg(test)]
                    poison_unstarted(call.p, f, rs);
                }
                None => call.p.p.start(f)?,
            }
        }
        if !fill.imports {
            return Ok(f);
        }
        let sp = self.slice(c, s)?;
        for &(v, from) in &sp.imports {
            let Some(exp) = self
                .exports
                .get(call.exports_at + from)
                .and_then(OnceLock::get)
            else {
                return Err(internal("a piece started before the piece it imports from"));
            };
            let Some(at) = self.slice(c, from)?.exports.iter().position(|&x| x == v) else {
                return Err(internal("an import its slice does not export"));
            };
            f.vars[v] = exp[at].clone();
        }
        Ok(f)
    }

    fn slice(&self, c: usize, s: usize) -> Result<&super::SlicePlan> {
        match self.plan.defs.get(self.calls[c].def) {
            Some(Some(Ok(ss))) => ss.get(s).ok_or_else(|| internal("no such slice")),
            _ => Err(internal("a call of a definition without slices")),
        }
    }

    /// Appends the footprint of piece `q` of block `b`'s piece-set to `out` (computed in a
    /// frame of `frames`; the piece's run fills one afresh), each key once, in the order
    /// enumerated. Repeats are common (a loop's keys cut to a table's key prefix repeat it
    /// every iteration: TPC-C's order lines by district, between each item's item and stock
    /// keys); left in, they cost `start` (serial per piece-set) more than dropping them
    /// here, and sorting each footprint to drop them took 8% of a one-thread PACMAN
    /// replay's instructions on TPC-C (`Seen` takes a hash probe per key).
    fn footprint_of(
        &self,
        frames: &mut Frames,
        k: &mut Keys,
        seen: &mut Seen,
        b: usize,
        q: usize,
        out: &mut Vec<FootKey>,
    ) -> Result<()> {
        let piece = &self.pieces[q];
        let from = out.len();
        match piece.call() {
            Some((c, s)) => {
                let sp = self.slice(c, s)?;
                if sp.fill.args {
                    footprint(&sp.keys, self.frame(frames, c, s, sp.fill, None)?, k, out);
                } else {
                    tables_only(&sp.keys, out);
                }
            }
            None => {
                let (i, j) = piece.rec;
                let lf = &self.logs[i as usize];
                self.ctx
                    .writes(lf, &lf.recs[j as usize], k.buffer(), |t, _, key, _| {
                        let name = &t.schema.name;
                        if self.plan.owner.get(name) == Some(&b) {
                            let p = self.plan.prefix.get(name).copied().unwrap_or(0);
                            out.push(row_key(t, key, p));
                        }
                        Ok(())
                    })?;
            }
        }
        seen.dedup_tail(out, from);
        Ok(())
    }

    /// Appends the footprints of `qs`, pieces of block `b`, to `out` (no allocation per
    /// piece).
    fn footprints(
        &self,
        frames: &mut Frames,
        b: usize,
        qs: std::ops::Range<usize>,
        out: &mut Footprints,
    ) -> Result<()> {
        out.keys.reserve(qs.len() * 2);
        out.ends.reserve(qs.len());
        for q in qs {
            self.footprint_of(frames, &mut out.k, &mut out.seen, b, q, &mut out.keys)?;
            out.ends.push(out.keys.len());
        }
        Ok(())
    }

    /// Starts piece-set `set`: footprints, then queues in log order; returns the pieces
    /// ready at once.
    fn start(&self, scratch: &mut Scratch, set: usize) -> Result<Vec<usize>> {
        let b = set % self.plan.blocks;
        let set = self.set(set);
        if self.chained {
            // Each piece waits for the one before it; its frame is built when it runs.
            let lists = &mut scratch.succ_lists;
            lists.clear();
            lists.extend((set.start + 1..set.end).map(|q| q as u32));
            let ends = &mut scratch.succ_ends;
            ends.clear();
            ends.extend((1..=set.len()).map(|i| i.min(set.len() - 1) as u32));
            let mut st = self.state.lock();
            st.add_succs(set.start, lists, ends)?;
            for q in set.start + 1..set.end {
                st.preds_left[q] = 1;
            }
            return Ok(set.take(1).collect());
        }
        // On this worker alone: footprints of a set of 512 pieces or more were once split
        // with `recovery_threads - 1` helper threads, which then competed for the cores
        // with the other workers' pieces (other workers build other sets' queues early,
        // 3038f27); without them a 10 s TPC-C log replayed on 2 threads in 0.985x the time
        // (dynamic analysis 1.60 -> 1.30 worker-s), Smallbank no slower.
        let foot = &mut scratch.foot;
        foot.keys.clear();
        foot.ends.clear();
        self.footprints(&mut scratch.frames, b, set.clone(), foot)?;
        let (keys, ends) = (&foot.keys, &foot.ends);
        // Each piece's predecessors: the last earlier piece on each of its keys, every
        // keyed piece of a table since its last `*`, and that `*`. A footprint may repeat a
        // key (`footprint_of`): the sort below drops the piece itself and repeats.
        let preds = &mut scratch.preds;
        let pred_ends = &mut scratch.pred_ends;
        let (last, since_star, star) = (
            &mut scratch.last,
            &mut scratch.since_star,
            &mut scratch.star,
        );
        preds.clear();
        pred_ends.clear();
        last.clear();
        star.clear();
        for v in since_star.values_mut() {
            v.clear();
        }
        let mut from = 0;
        for (q, &end) in set.clone().zip(ends) {
            let start = preds.len();
            if !self.unordered {
                for &k in &keys[from..end] {
                    let t = k.0;
                    preds.extend(star.get(&t).copied());
                    if k.1.is_some() {
                        preds.extend(last.insert(k, q));
                        since_star.entry(t).or_default().push(q);
                    } else {
                        if let Some(v) = since_star.get_mut(&t) {
                            preds.append(v);
                        }
                        star.insert(t, q);
                    }
                }
                sort_dedup_tail(preds, start, |x| x == q);
            }
            pred_ends.push(preds.len());
            from = end;
        }
        // The successor lists, by counting: each piece's successors ascending.
        let ends = &mut scratch.succ_ends;
        ends.clear();
        ends.resize(set.len(), 0);
        for &x in preds.iter() {
            ends[x - set.start] += 1;
        }
        let mut total = 0;
        for e in ends.iter_mut() {
            (*e, total) = (total, total + *e);
        }
        let lists = &mut scratch.succ_lists;
        lists.clear();
        lists.resize(total as usize, 0);
        let mut from = 0;
        for (q, &end) in set.clone().zip(pred_ends.iter()) {
            for &x in &preds[from..end] {
                let at = &mut ends[x - set.start];
                lists[*at as usize] = q as u32;
                *at += 1;
            }
            from = end;
        }
        let mut st = self.state.lock();
        st.add_succs(set.start, lists, ends)?;
        let mut ready = Vec::new();
        let mut from = 0;
        for (q, &end) in set.zip(pred_ends.iter()) {
            st.preds_left[q] = (end - from) as u32;
            if end == from {
                ready.push(q);
            }
            from = end;
        }
        Ok(ready)
    }

    /// Runs the pieces of `group` (ready together, in this order) as one replay
    /// transaction; again after a serialization failure, up to `REPLAY_RETRIES` times.
    fn run(&self, frames: &mut Frames, group: &[usize]) -> Result<()> {
        let mut tries = 0;
        loop {
            match self.run_once(frames, group) {
                Ok(()) => return Ok(()),
                Err(Failed::Transient(_)) if tries < REPLAY_RETRIES => tries += 1,
                Err(Failed::Transient(e) | Failed::Fatal(e)) => return Err(e),
            }
        }
    }

    /// One attempt of `run`: the group's pieces in one replay transaction, their exports
    /// published once it committed.
    fn run_once(&self, frames: &mut Frames, group: &[usize]) -> std::result::Result<(), Failed> {
        let mut tx = self
            .ctx
            .db
            .begin_replay(crate::txn::TxnOptions {
                isolation: crate::config::Isolation::Snapshot,
                read_only: false,
            })
            .map_err(Failed::of)?;
        let mut exports = Vec::new();
        for &q in group {
            let piece = &self.pieces[q];
            let (i, j) = piece.rec;
            let lf = &self.logs[i as usize];
            let r = &lf.recs[j as usize];
            match piece.call() {
                Some((c, s)) => {
                    let call = &self.calls[c];
                    let sp = self.slice(c, s).map_err(Failed::Fatal)?;
                    let f = self
                        .frame(frames, c, s, sp.run, Some(&sp.start))
                        .map_err(Failed::Fatal)?;
                    match &sp.code {
                        Some(code) => code.run(&mut tx, f),
                        None => call.p.p.run_slice(&mut tx, f, &sp.mask),
                    }
                    .map_err(|e| {
                        let transient = matches!(e, Error::SerializationFailure(_));
                        let e = replay_failed(call.p, &e);
                        if transient {
                            Failed::Transient(e)
                        } else {
                            Failed::Fatal(e)
                        }
                    })?;
                    if !sp.exports.is_empty() {
                        let vals: Vec<V> = sp.exports.iter().map(|&v| f.vars[v].clone()).collect();
                        exports.push((call.exports_at + s, vals));
                    }
                }
                None => {
                    let mut key = Vec::new();
                    let b = piece.block as usize;
                    self.ctx
                        .writes(lf, r, &mut key, |t, op, k, data| {
                            if self.plan.owner.get(&t.schema.name) == Some(&b) {
                                apply(&mut tx, t, op, k, data)
                            } else {
                                Ok(())
                            }
                        })
                        .map_err(Failed::of)?;
                }
            }
        }
        tx.commit_deferred().map_err(Failed::of)?;
        for (at, vals) in exports {
            let _ = self.exports[at].set(vals);
        }
        Ok(())
    }
}

/// Attempts one replay transaction may make (`Batch::run`). A replay transaction can fail
/// with a serialization failure that is no disagreement between log and checkpoint: an
/// insert over a deleted row loses its install to garbage collection cutting that row's
/// chain at the same moment (`txn/write.rs::insert_keyed`; another replay thread's commit
/// collects), which a forward transaction would retry. Run again, it finds the row cut and
/// claims it. Anything else, or the same failure this many times, fails the recovery.
const REPLAY_RETRIES: u32 = 100;

/// Why an attempt of a replay transaction failed.
enum Failed {
    /// A serialization failure (`REPLAY_RETRIES`).
    Transient(Error),
    Fatal(Error),
}

impl Failed {
    fn of(e: Error) -> Failed {
        if matches!(e, Error::SerializationFailure(_)) {
            Failed::Transient(e)
        } else {
            Failed::Fatal(e)
        }
    }
}

/// Sets each parameter slot `params` skipped to a value of another type (unit tests only,
/// `Batch::frame`): a piece reading one fails its replay, as a wrong value need not.
#[cfg(test)]
fn poison_skipped(p: &Procedure, f: &mut Frame, params: u64) {
    for v in 0..p.p.nparams.min(64) {
        if params & (1 << v) == 0 {
            f.vars[v] = match p.p.vars[v].1 {
                crate::query::expr::Ty::Bool => V::Val(crate::Value::Str("poison".into())),
                _ => V::Bool(false),
            };
        }
    }
}

/// Sets each local a whole start would have reset and `rs` leaves alone to a value of
/// another type (unit tests only, `Batch::frame`): a piece reading one fails its replay.
#[cfg(test)]
fn poison_unstarted(p: &Procedure, f: &mut Frame, rs: &RunStart) {
    for &v in &p.p.reset {
        if !rs.reset.contains(&v) && !rs.inits.iter().any(|&i| p.p.inits[i].0 == v) {
            f.vars[v] = match p.p.vars[v].1 {
                crate::query::expr::Ty::Bool => V::Val(crate::Value::Str("poison".into())),
                _ => V::Bool(false),
            };
        }
    }
}

fn internal(m: &str) -> Error {
    Error::Corrupt {
        file: "command log".into(),
        offset: 0,
        message: format!("pacman replay: {m}"),
    }
}

#[cfg(test)]
mod dedup_tests {
    use super::Seen;
    use crate::procedure::piece::FootKey;

    /// A footprint keeps the first of each key, in order; footprints before it in the vector
    /// are never compared with it (a piece whose first key is the previous piece's last keeps
    /// that key); a stamp that wraps leaves no stale slot; a footprint longer than the table
    /// takes the sort and keeps each key once.
    #[test]
    fn each_key_once_within_the_footprint_only() {
        let k = |t: usize, x: Option<u64>| -> FootKey { (t, x) };
        let mut seen = Seen::default();
        let mut v = vec![
            k(8, Some(1)),
            k(8, Some(1)),
            k(16, None),
            k(8, Some(2)),
            k(8, Some(1)),
            k(16, None),
            k(8, None),
        ];
        seen.dedup_tail(&mut v, 1);
        assert_eq!(
            v,
            [
                k(8, Some(1)),
                k(8, Some(1)),
                k(16, None),
                k(8, Some(2)),
                k(8, None)
            ]
        );
        seen.stamp = u32::MAX;
        let mut v = vec![k(8, Some(3)), k(8, Some(3)), k(8, Some(4))];
        seen.dedup_tail(&mut v, 0);
        assert_eq!(v, [k(8, Some(3)), k(8, Some(4))]);
        // Through the table (450 keys, 150 distinct: probe chains), first of each kept in
        // order; then through the sort (1,200 keys, 700 distinct).
        let key = |i: u64| k(8 + 8 * (i % 2) as usize, Some(i % 150));
        let mut v: Vec<FootKey> = (0..450u64).map(key).collect();
        seen.dedup_tail(&mut v, 0);
        assert_eq!(v, (0..150u64).map(key).collect::<Vec<_>>());
        let mut v: Vec<FootKey> = (0..1200u64).map(|i| k(8, Some(i % 700))).collect();
        seen.dedup_tail(&mut v, 0);
        assert_eq!(v.len(), 700);
        let mut w = v.clone();
        w.sort_unstable();
        w.dedup();
        assert_eq!(w.len(), 700);
    }
}
