//! PACMAN: parallel replay of a command log (Wu 2017, thesis §4.4.2–4.4.5;
//! `healing-pacman.md` B.3–B.7). Recovery `pacman` replaces step 5 of `recovery/mod.rs`.
//!
//! Definitions. The static analysis (`procedure/slice.rs`) splits every procedure
//! definition of the catalog into *slices* and groups them into *blocks* (the GDG), in
//! topological order (`pacman_slicing`: PACMAN's slices, or the coarser pieces of thesis
//! Fig. 4.18's baselines, transaction chopping and whole procedures). A logged call becomes one *piece* per slice of its procedure; the
//! log, sorted by commit timestamp, is cut into *batches* at every `pacman_batch_epochs`-th
//! epoch; the pieces of one block in one batch, in log order, are its *piece-set*. A
//! row (ad-hoc) record becomes a write-only piece in each block owning a table it writes
//! (thesis §4.4.5), queued on the same keys as calls: the first p_T components of each
//! written row's primary key.
//!
//! Schedule (B.3–B.5): in sync mode batches run one after another; in pipelined mode
//! (Fig. 4.9) a block's piece-set of batch k+1 also waits for its own piece-set of batch k,
//! but not for the rest of batch k (`schedule.rs`). In a batch a piece-set starts when the
//! piece-sets of its parent blocks are done; it then computes each piece's
//! footprint (`procedure/piece.rs`) and queues the piece, in log order, behind the last
//! earlier piece of the piece-set on each key of its footprint (Calvin-style; a `(table,
//! *)` entry waits for every earlier piece on the table and blocks every later one). A piece
//! is ready when those predecessors are done. One pool of `recovery_threads` workers runs
//! ready pieces in replay transactions (`begin_replay`, `commit_deferred`; pieces ready
//! together share one, up to `RUN_GROUP`), each piece in a frame its worker
//! keeps per definition, compiled (`procedure::compile_slice`) where its procedure is.
//!
//! Why it equals serial replay (B.7): every table some procedure writes belongs to exactly
//! one block, and within a block's piece-set operations on one key prefix run in log order
//! (the queues), piece-sets of one block run batch after batch; across blocks only values
//! flow (a piece's imports, exported by the same call's pieces in parent blocks, which are
//! done). Tables no procedure writes never change during replay — unless row records write
//! them: a row record writing a table that some block reads but none owns is replayed alone
//! between batches (a barrier); one writing a table no block touches gets a block of its
//! own per table.
//!
//! Limits (V1): pipelining runs in windows of at least `PIPELINE_WINDOW_BATCHES` batches and
//! `PIPELINE_WINDOW_RECORDS` records with a barrier between windows (the thesis pipelines as
//! batches load); pieces run in replay transactions (up to 8 ready pieces to one), not
//! installed directly; a procedure whose `RETURN` is not its last statement is refused (the
//! replay view drops `RETURN`). The worker that starts a piece-set computes its footprints
//! and its queues, in vectors and maps it keeps from one piece-set to the next.

mod schedule;
#[cfg(test)]
mod tests;

use super::replay::Ctx;
use super::{LogFile, RecoveryReport};
use crate::config::{PacmanMode, PacmanSlicing};
use crate::error::Result;
use crate::log::COMMAND;
use crate::procedure::piece::{self, KeyPlan};
use crate::procedure::slice::{self, Options};
use crate::procedure::Procedure;
use rustc_hash::FxHashMap;
use std::time::Instant;

/// One slice of a procedure definition, ready to run as pieces.
pub(super) struct SlicePlan {
    pub block: usize,
    /// Operation ids the piece runs (`Proc::run_slice`).
    pub mask: Vec<bool>,
    /// (variable slot, slice index) it imports.
    pub imports: Vec<(usize, usize)>,
    /// Variable slots it exports.
    pub exports: Vec<usize>,
    pub keys: Vec<KeyPlan>,
    /// What of a piece's starting frame `keys` read (the footprint fills only that).
    pub fill: piece::Fill,
    /// What of it the piece's run reads (`piece::run_fill`).
    pub run: piece::Fill,
    /// What of a call's start the piece's run needs (`piece::run_start`).
    pub start: piece::RunStart,
    /// The slice compiled to closures, when its procedure runs compiled (else interpreted).
    pub code: Option<crate::procedure::SliceCode>,
}

/// What the static analysis gives recovery.
pub(super) struct Plan {
    /// Blocks, GDG blocks first, then one per table only row records write.
    pub blocks: usize,
    /// Per block, its children.
    pub children: Vec<Vec<usize>>,
    /// Per block, how many parents it has.
    pub parents: Vec<usize>,
    /// Per definition number: its slices, or why it cannot be replayed by pieces (`Err`:
    /// the procedure's name, for an early `RETURN`), or `None` (read-only or not compiled).
    pub defs: Vec<Option<std::result::Result<Vec<SlicePlan>, String>>>,
    /// Owning block of each table a procedure (or a row record) writes, by name.
    pub owner: FxHashMap<String, usize>,
    /// p_T of each owned table: the leading primary-key columns its queues are keyed by
    /// (0: the whole table; `usize::MAX`: the whole key, for a table only row records write).
    pub prefix: FxHashMap<String, usize>,
    /// Tables some block reads.
    pub read: Vec<String>,
}

impl Plan {
    fn build(definitions: &[Option<std::sync::Arc<Procedure>>], slicing: PacmanSlicing) -> Plan {
        let live: Vec<&Procedure> = definitions.iter().flatten().map(|p| p.as_ref()).collect();
        let numbers: Vec<usize> = definitions
            .iter()
            .enumerate()
            .filter_map(|(i, p)| p.as_ref().map(|_| i))
            .collect();
        let gdg = slice::analyze(
            &live,
            Options {
                slicing,
                ..Options::default()
            },
        );
        let mut owner = FxHashMap::default();
        let mut prefix = FxHashMap::default();
        let mut read = Vec::new();
        for (b, block) in gdg.blocks.iter().enumerate() {
            for t in &block.tables {
                if t.written {
                    owner.insert(t.table.clone(), b);
                    prefix.insert(t.table.clone(), t.key_prefix);
                } else {
                    read.push(t.table.clone());
                }
            }
        }
        let mut defs: Vec<Option<std::result::Result<Vec<SlicePlan>, String>>> =
            (0..definitions.len()).map(|_| None).collect();
        for ps in &gdg.procedures {
            let p = live[ps.input];
            let plan = if piece::early_return(p) {
                Err(ps.procedure.clone())
            } else {
                let n = p.p.ops.len();
                Ok(ps
                    .slices
                    .iter()
                    .map(|s| {
                        let mut mask = vec![false; n];
                        for &o in s.ops.iter().chain(&s.replicated) {
                            if let Some(m) = mask.get_mut(o) {
                                *m = true;
                            }
                        }
                        let tables = &gdg.blocks[s.block].tables;
                        let keys = piece::key_plans(p, s, |t| {
                            tables
                                .iter()
                                .find(|bt| bt.table == t && bt.written)
                                .map(|bt| bt.key_prefix)
                        });
                        let imported: Vec<usize> = s.import_slots.iter().map(|&(v, _)| v).collect();
                        SlicePlan {
                            block: s.block,
                            fill: piece::fill_of(&keys, p.p.nparams, &imported),
                            run: piece::run_fill(&p.p, &mask, &s.export_slots),
                            start: piece::run_start(&p.p, &mask, &s.export_slots),
                            code: p.compile_slice(&mask),
                            mask,
                            imports: s.import_slots.clone(),
                            exports: s.export_slots.clone(),
                            keys,
                        }
                    })
                    .collect())
            };
            defs[numbers[ps.input]] = Some(plan);
        }
        let blocks = gdg.blocks.len();
        let mut children = vec![Vec::new(); blocks];
        let mut parents = vec![0; blocks];
        for &(a, b) in &gdg.edges {
            children[a].push(b);
            parents[b] += 1;
        }
        Plan {
            blocks,
            children,
            parents,
            defs,
            owner,
            prefix,
            read,
        }
    }

    /// A block of its own for `table`, which only row records write.
    fn own_block(&mut self, table: &str) -> usize {
        if let Some(&b) = self.owner.get(table) {
            return b;
        }
        let b = self.blocks;
        self.blocks += 1;
        self.children.push(Vec::new());
        self.parents.push(0);
        self.owner.insert(table.to_string(), b);
        self.prefix.insert(table.to_string(), usize::MAX);
        b
    }
}

/// Pipelined mode runs consecutive batches together until they hold at least
/// `PIPELINE_WINDOW_BATCHES` batches and `PIPELINE_WINDOW_RECORDS` log records (or a row
/// record must replay alone): a window's calls, pieces and exports stay in memory until it
/// ends, so the window bounds memory; a barrier between windows costs one piece-set's tail
/// per block, so a window pipelines all but one of its batch boundaries. Small windows
/// replay faster — we take it that a window's per-piece arrays (`schedule.rs`: pieces,
/// their state, successor lists, footprints), walked again and again, fit a core's 4 MiB
/// L2 better: 8 batches and 64 Ki records held about 240 K pieces on TPC-C, some 9 MB of
/// them. At 2 batches and 16 Ki records a 10 s TPC-C command log replayed on 2 threads in
/// 0.975× the time (median of 10 alternating rounds), a Smallbank log in 0.95×; on 1
/// thread no change (docs/benchmarks.md).
const PIPELINE_WINDOW_RECORDS: usize = 1 << 14;
const PIPELINE_WINDOW_BATCHES: usize = 2;

/// A record to replay: (file, record index).
pub(super) type RecId = (u32, u32);

/// What a batch holds: its records in log order, or one record replayed alone.
enum Batch {
    Pieces(Vec<RecId>),
    Alone(RecId),
}

/// Replays `logs` by PACMAN (recovery `pacman`), adding its phase times to `rep`.
pub(super) fn replay(ctx: &Ctx<'_>, logs: &[LogFile], rep: &mut RecoveryReport) -> Result<()> {
    let config = &ctx.db.shared.config;
    let t = Instant::now();
    let mut plan = Plan::build(ctx.definitions, config.pacman_slicing);
    rep.static_analysis = t.elapsed();

    let t = Instant::now();
    let mut order: Vec<(u64, u32, u32)> = Vec::new();
    for (i, f) in logs.iter().enumerate() {
        for (j, r) in f.recs.iter().enumerate() {
            order.push((r.ts, i as u32, j as u32));
        }
    }
    order.sort_unstable();
    // Row records: which blocks own their tables; one writing a table that a block reads but
    // none owns is a barrier.
    let mut alone = Vec::new();
    let mut key = Vec::new();
    for &(_, i, j) in &order {
        let f = &logs[i as usize];
        let r = &f.recs[j as usize];
        if r.n == COMMAND {
            continue;
        }
        let mut barrier = false;
        ctx.writes(f, r, &mut key, |t, _, _, _| {
            let name = &t.schema.name;
            if !plan.owner.contains_key(name) {
                if plan.read.contains(name) {
                    barrier = true;
                } else {
                    plan.own_block(name);
                }
            }
            Ok(())
        })?;
        if barrier {
            alone.push((i, j));
        }
    }
    alone.sort_unstable();
    let per = config.pacman_batch_epochs.max(1);
    let mut batches = Vec::new();
    let mut cur: Vec<RecId> = Vec::new();
    let mut cur_batch = None;
    for &(_, i, j) in &order {
        let epoch = logs[i as usize].recs[j as usize].epoch / per;
        let barrier = alone.binary_search(&(i, j)).is_ok();
        if barrier || cur_batch.is_some_and(|b| epoch > b) {
            if !cur.is_empty() {
                batches.push(Batch::Pieces(std::mem::take(&mut cur)));
            }
            cur_batch = None;
        }
        if barrier {
            batches.push(Batch::Alone((i, j)));
        } else {
            cur.push((i, j));
            cur_batch = Some(cur_batch.map_or(epoch, |b: u64| b.max(epoch)));
        }
    }
    if !cur.is_empty() {
        batches.push(Batch::Pieces(cur));
    }
    rep.dynamic_analysis += t.elapsed();

    let mut times = schedule::Times::default();
    // Consecutive batches of pieces waiting to run: one at a time in sync mode, a window in
    // pipelined mode.
    let mut window: Vec<Vec<RecId>> = Vec::new();
    let mut in_window = 0;
    let flush = |window: &mut Vec<Vec<RecId>>,
                 times: &mut schedule::Times,
                 rep: &mut RecoveryReport|
     -> Result<()> {
        if window.is_empty() {
            return Ok(());
        }
        let ran = schedule::run_batches(ctx, logs, &plan, window, times)?;
        rep.pieces += ran.pieces;
        rep.sets_overlapped += ran.overlapped;
        window.clear();
        Ok(())
    };
    for b in batches {
        rep.batches += 1;
        match b {
            Batch::Alone((i, j)) => {
                flush(&mut window, &mut times, rep)?;
                in_window = 0;
                let f = &logs[i as usize];
                let r = &f.recs[j as usize];
                let t = Instant::now();
                let mut tx = ctx.db.begin_replay(crate::txn::TxnOptions {
                    isolation: crate::config::Isolation::Snapshot,
                    read_only: false,
                })?;
                ctx.writes(f, r, &mut key, |t, op, k, data| {
                    super::replay::apply(&mut tx, t, op, k, data)
                })?;
                tx.commit_deferred()?;
                rep.pieces += 1;
                times.execution += t.elapsed();
            }
            Batch::Pieces(recs) => {
                in_window += recs.len();
                window.push(recs);
                if config.pacman_mode != PacmanMode::Pipelined
                    || (in_window >= PIPELINE_WINDOW_RECORDS
                        && window.len() >= PIPELINE_WINDOW_BATCHES)
                {
                    flush(&mut window, &mut times, rep)?;
                    in_window = 0;
                }
            }
        }
    }
    flush(&mut window, &mut times, rep)?;
    rep.dynamic_analysis += times.analysis;
    rep.schedule_wait = times.wait;
    rep.execution = times.execution;
    Ok(())
}
