//! The four log-replay schemes (thesis §4.7.1: CLR, LLR, LLR-P, PLR). The first three run
//! after the checkpoint's rows are in the tables and write through ordinary transactions, so
//! every index is maintained on the way; PLR (at the end) places rows at tuple ids itself.
//!
//! Why they agree: every key's final state is what its changes, applied in commit order on
//! top of the checkpoint row, give. `serial` applies everything in commit order. The
//! partitioned scheme groups each key's changes in one partition and sorts them by commit
//! timestamp. The latched scheme applies changes in whatever order threads meet them, but keeps
//! per column the timestamp of the write it holds and per row the timestamp of the last put or
//! delete: a change wins a column only if it is newer, so the result does not depend on order.

use super::{as_corrupt, in_parallel, Batcher, LogFile, Rec};
use crate::engine::Database;
use crate::error::{Error, Result};
use crate::index::HashIndex;
use crate::log::format::Get;
use crate::log::{apply_patch, COMMAND, OP_DELETE, OP_DELETE_AT, OP_PATCH, OP_PUT, OP_PUT_AT};
use crate::procedure::Procedure;
use crate::schema::TableSchema;
use crate::storage::{TableRef, TupleId};
use crate::txn::Transaction;
use crate::version::Version;
use parking_lot::Mutex;
use rustc_hash::FxHashMap;
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// What the schemes share.
pub(super) struct Ctx<'a> {
    pub db: &'a Database,
    pub tables: &'a HashMap<u32, TableRef>,
    /// Table id in a record → id of the table now holding its rows (see `CREATE INDEX`).
    pub resolve_id: &'a HashMap<u32, u32>,
    pub names: &'a HashMap<u32, String>,
    pub definitions: &'a [Option<Arc<Procedure>>],
    pub threads: usize,
}

fn corrupt(f: &LogFile, message: String) -> Error {
    Error::Corrupt {
        file: f.path.display().to_string(),
        offset: 0,
        message,
    }
}

fn missing_row(t: &TableRef) -> Error {
    Error::Corrupt {
        file: format!("log of table `{}`", t.schema.name),
        offset: 0,
        message: "an update of a row that neither the checkpoint nor the log has".into(),
    }
}

impl Ctx<'_> {
    /// The table now holding the rows of table id `id` in a record of `f`.
    fn table(&self, f: &LogFile, id: u32) -> Result<&TableRef> {
        self.resolve_id
            .get(&id)
            .and_then(|i| self.tables.get(i))
            .ok_or_else(|| {
                corrupt(
                    f,
                    format!(
                        "a log record for table id {id} ({}), which is not in the catalog",
                        self.names.get(&id).map_or("unknown", |s| s.as_str())
                    ),
                )
            })
    }

    /// Calls `f(table, op, key, data)` for each write of logical record `r` (data: the row of
    /// a put or delete, the patch of an update).
    pub(super) fn writes<'f>(
        &self,
        f: &'f LogFile,
        r: &Rec,
        key: &mut Vec<u8>,
        mut each: impl FnMut(&TableRef, u8, &[u8], &'f [u8]) -> Result<()>,
    ) -> Result<()> {
        let bad = || {
            corrupt(
                f,
                format!("a malformed log record (commit timestamp {})", r.ts),
            )
        };
        let mut g = Get::new(f.body(r));
        for _ in 0..r.n {
            let tid = g.u32().ok_or_else(bad)?;
            let op = g.u8().ok_or_else(bad)?;
            let t = self.table(f, tid)?;
            match op {
                OP_PUT | OP_DELETE => {
                    let row = g.bytes().ok_or_else(bad)?;
                    if row.len() != t.schema.row_size {
                        return Err(bad());
                    }
                    t.schema.encode_key_from_row(0, row, key);
                    each(t, op, key, row)?;
                }
                OP_PATCH => {
                    let k = g.bytes().ok_or_else(bad)?;
                    let from = g.at;
                    let runs = g.u32().ok_or_else(bad)?;
                    for _ in 0..runs {
                        g.u32().ok_or_else(bad)?;
                        g.bytes().ok_or_else(bad)?;
                    }
                    each(t, op, k, &g.data[from..g.at])?;
                }
                _ => return Err(bad()),
            }
        }
        Ok(())
    }
}

/// Applies one logged change inside `tx`.
pub(super) fn apply(
    tx: &mut Transaction<'_>,
    t: &TableRef,
    op: u8,
    key: &[u8],
    data: &[u8],
) -> Result<()> {
    match op {
        OP_PUT => tx.replay_set(t, key, Some(data)),
        OP_DELETE => tx.replay_set(t, key, None),
        _ => patch_row(tx, t, key, std::iter::once(data)),
    }
    .map_err(as_corrupt)
}

/// Applies patches in order to the row with primary key `key`.
fn patch_row<'p>(
    tx: &mut Transaction<'_>,
    t: &TableRef,
    key: &[u8],
    patches: impl Iterator<Item = &'p [u8]>,
) -> Result<()> {
    let r = tx.replay_update(t, key, |row| {
        for p in patches {
            apply_patch(&mut Get::new(p), row).ok_or_else(|| Error::Corrupt {
                file: format!("log of table `{}`", t.schema.name),
                offset: 0,
                message: "an update patch outside the row".into(),
            })?;
        }
        Ok(())
    });
    match r {
        Err(Error::NotFound { .. }) => Err(missing_row(t)),
        r => r,
    }
}

/// CLR: every record in commit order on one thread; a procedure call is run again (the
/// only way to replay a command log). Replay runs alone and in order, so nothing can
/// conflict. Each record is its own replay transaction. Batching saves commits (8 records:
/// 3% fewer instructions per call), but on a 10 s TPC-C command log (1.39 M calls,
/// docs/benchmarks.md) 8 per transaction replayed in 15.1–15.6 s against 13.7–13.8 s with 1
/// (why was not isolated: the batched replay's profile had the update closure at 6.3% of
/// samples against 2.4% forward, and more GC and fresh-page allocation); a logical log
/// replays as fast either way (7.9–8.4 s).
pub(super) fn serial(ctx: &Ctx<'_>, logs: &[LogFile]) -> Result<()> {
    let mut order: Vec<(u64, u32, u32)> = Vec::new();
    for (i, f) in logs.iter().enumerate() {
        for (j, r) in f.recs.iter().enumerate() {
            order.push((r.ts, i as u32, j as u32));
        }
    }
    order.sort_unstable();
    let mut key = Vec::new();
    let mut calls = crate::procedure::Replayer::new(ctx.definitions);
    for (_, i, j) in order {
        let f = &logs[i as usize];
        let r = &f.recs[j as usize];
        let mut tx = ctx.db.begin_replay(crate::txn::TxnOptions {
            isolation: crate::config::Isolation::Snapshot,
            read_only: false,
        })?;
        if r.n == COMMAND {
            calls.replay(&mut tx, f.body(r))?;
        } else {
            ctx.writes(f, r, &mut key, |t, op, k, data| {
                apply(&mut tx, t, op, k, data)
            })?;
        }
        tx.commit_deferred()?;
    }
    Ok(())
}

/// One change of a key, as the shuffle hands it to its partition.
struct Change<'a> {
    ts: u64,
    op: u8,
    data: &'a [u8],
}

/// Changes by table and key. Keys are the table id's bytes followed by the primary key, so a
/// lookup builds the key in a reused buffer and only a new key allocates; the hasher is Fx
/// (the keys come from our own log, so a hash-flooding defence buys nothing here).
type Groups<'a> = FxHashMap<Vec<u8>, Vec<Change<'a>>>;

/// Turns the shuffle's output (per file, one map per partition) into per partition the maps
/// of every file, for the partition's thread to merge.
fn by_partition<M>(parts: usize, shuffled: Vec<Vec<M>>) -> Vec<Vec<M>> {
    let mut per_part: Vec<Vec<M>> = (0..parts).map(|_| Vec::new()).collect();
    for file_parts in shuffled {
        for (p, m) in file_parts.into_iter().enumerate() {
            per_part[p].push(m);
        }
    }
    per_part
}

/// Writes the map key of (table `id`, primary key `k`) into `buf`.
fn map_key(buf: &mut Vec<u8>, id: u32, k: &[u8]) {
    buf.clear();
    buf.extend_from_slice(&id.to_le_bytes());
    buf.extend_from_slice(k);
}

/// The table id and primary key of a map key.
fn split_key(k: &[u8]) -> (u32, &[u8]) {
    let (id, key) = k.split_at(4);
    (u32::from_le_bytes([id[0], id[1], id[2], id[3]]), key)
}

/// LLR-P: each file's changes are shuffled by (table, key) into one partition per thread
/// (files read in parallel); then each partition replays its keys latch-free, a key's changes
/// in commit order.
pub(super) fn partitioned(ctx: &Ctx<'_>, logs: &[LogFile]) -> Result<()> {
    let parts = ctx.threads.max(1);
    let shuffled = in_parallel(ctx.threads, logs.iter().collect(), |f: &LogFile| {
        let mut out: Vec<Groups<'_>> = (0..parts).map(|_| FxHashMap::default()).collect();
        let mut key = Vec::new();
        let mut mk = Vec::new();
        for r in &f.recs {
            ctx.writes(f, r, &mut key, |t, op, k, data| {
                let p = (HashIndex::hash_key(k) ^ u64::from(t.id)) as usize % parts;
                let c = Change { ts: r.ts, op, data };
                map_key(&mut mk, t.id, k);
                match out[p].get_mut(mk.as_slice()) {
                    Some(v) => v.push(c),
                    None => {
                        out[p].insert(mk.clone(), vec![c]);
                    }
                }
                Ok(())
            })?;
        }
        Ok(out)
    })?;
    // Each partition's groups from every file, merged by the thread that replays it (moves,
    // no copies of the changes).
    in_parallel(ctx.threads, by_partition(parts, shuffled), |files| {
        let mut files = files.into_iter();
        let mut groups = files.next().unwrap_or_default();
        for more in files {
            for (k, mut v) in more {
                groups.entry(k).or_default().append(&mut v);
            }
        }
        let mut b = Batcher::new(ctx.db);
        for (mk, mut changes) in groups {
            let (id, key) = split_key(&mk);
            let t = &ctx.tables[&id];
            changes.sort_unstable_by_key(|c| c.ts);
            let tx = b.tx()?;
            match changes.iter().rposition(|c| c.op != OP_PATCH) {
                // Only updates: they apply to the checkpoint row.
                None => patch_row(tx, t, key, changes.iter().map(|c| c.data))?,
                // Everything before the last put or delete is overwritten by it.
                Some(i) => {
                    let last = &changes[i];
                    let rest = &changes[i + 1..];
                    if last.op == OP_DELETE {
                        if !rest.is_empty() {
                            return Err(missing_row(t));
                        }
                        tx.replay_set(t, key, None).map_err(as_corrupt)?;
                    } else if rest.is_empty() {
                        tx.replay_set(t, key, Some(last.data)).map_err(as_corrupt)?;
                    } else {
                        let mut row = last.data.to_vec();
                        for c in rest {
                            apply_patch(&mut Get::new(c.data), &mut row)
                                .ok_or_else(|| missing_row(t))?;
                        }
                        tx.replay_set(t, key, Some(&row)).map_err(as_corrupt)?;
                    }
                }
            }
            b.done_op()?;
        }
        b.finish()
    })?;
    Ok(())
}

/// A row as the latched scheme builds it: per column the newest value seen and its commit
/// timestamp, and the newest put or delete.
struct RowState {
    /// (timestamp, exists) of the newest put (true) or delete (false).
    last: Option<(u64, bool)>,
    row: Vec<u8>,
    col_ts: Vec<u64>,
}

impl RowState {
    fn new(schema: &TableSchema) -> Self {
        RowState {
            last: None,
            row: vec![0; schema.row_size],
            col_ts: vec![0; schema.columns.len()],
        }
    }

    /// Takes the bytes `data` at `offset` for every column inside them that has nothing newer.
    fn take(&mut self, schema: &TableSchema, ts: u64, offset: usize, data: &[u8]) -> Option<()> {
        let end = offset.checked_add(data.len())?;
        if end > self.row.len() {
            return None;
        }
        for (c, col) in schema.columns.iter().enumerate() {
            let (lo, hi) = (col.offset, col.offset + col.ty.width());
            if lo >= offset && hi <= end && self.col_ts[c] < ts {
                self.col_ts[c] = ts;
                self.row[lo..hi].copy_from_slice(&data[lo - offset..hi - offset]);
            }
        }
        Some(())
    }

    fn apply(&mut self, schema: &TableSchema, ts: u64, op: u8, data: &[u8]) -> Option<()> {
        match op {
            OP_PATCH => {
                let mut g = Get::new(data);
                for _ in 0..g.u32()? {
                    let off = g.u32()? as usize;
                    let bytes = g.bytes()?;
                    self.take(schema, ts, off, bytes)?;
                }
            }
            _ => {
                let put = op == OP_PUT;
                if self.last.is_none_or(|(t, _)| t < ts) {
                    self.last = Some((ts, put));
                }
                if put {
                    self.take(schema, ts, 0, data)?;
                }
            }
        }
        Some(())
    }
}

const STRIPES: usize = 1024;
/// Records per task: threads take chunks of a file, so one large file is still shared.
const CHUNK_RECORDS: usize = 4096;

/// LLR: threads apply records in any order to a table of row states behind striped latches
/// (a stripe's mutex guards the rows hashing to it); the newest write of each column wins.
/// Then the rows are written to the tables, stripes spread over the threads.
pub(super) fn latched(ctx: &Ctx<'_>, logs: &[LogFile]) -> Result<()> {
    type Stripe = Mutex<FxHashMap<Vec<u8>, RowState>>;
    let stripes: Vec<Stripe> = (0..STRIPES)
        .map(|_| Mutex::new(FxHashMap::default()))
        .collect();
    let mut tasks = Vec::new();
    for f in logs {
        for (i, _) in f.recs.chunks(CHUNK_RECORDS).enumerate() {
            tasks.push((f, i * CHUNK_RECORDS));
        }
    }
    in_parallel(ctx.threads, tasks, |(f, from)| {
        let mut key = Vec::new();
        let mut mk = Vec::new();
        // Order does not matter to this scheme; going through a chunk backwards means a
        // mistake in newest-wins cannot hide behind the log's near-commit order (the tests
        // rely on that).
        let end = (from + CHUNK_RECORDS).min(f.recs.len());
        for r in f.recs[from..end].iter().rev() {
            ctx.writes(f, r, &mut key, |t, op, k, data| {
                let s = (HashIndex::hash_key(k) ^ u64::from(t.id)) as usize % STRIPES;
                map_key(&mut mk, t.id, k);
                let mut stripe = stripes[s].lock();
                let applied = match stripe.get_mut(mk.as_slice()) {
                    Some(st) => st.apply(&t.schema, r.ts, op, data),
                    None => {
                        let mut st = RowState::new(&t.schema);
                        let a = st.apply(&t.schema, r.ts, op, data);
                        stripe.insert(mk.clone(), st);
                        a
                    }
                };
                applied.ok_or_else(|| corrupt(f, "an update patch outside the row".into()))
            })?;
        }
        Ok(())
    })?;
    let maps: Vec<FxHashMap<Vec<u8>, RowState>> =
        stripes.into_iter().map(Mutex::into_inner).collect();
    in_parallel(ctx.threads, maps, |rows| {
        let mut b = Batcher::new(ctx.db);
        for (mk, st) in rows {
            let (id, key) = split_key(&mk);
            let t = &ctx.tables[&id];
            let tx = b.tx()?;
            match st.last {
                Some((_, false)) => tx.replay_set(t, key, None).map_err(as_corrupt)?,
                // After a put every column holds that put's value or a newer one.
                Some((_, true)) => tx.replay_set(t, key, Some(&st.row)).map_err(as_corrupt)?,
                None => {
                    let r = tx.replay_update(t, key, |row| {
                        for (c, col) in t.schema.columns.iter().enumerate() {
                            if st.col_ts[c] > 0 {
                                let (lo, hi) = (col.offset, col.offset + col.ty.width());
                                row[lo..hi].copy_from_slice(&st.row[lo..hi]);
                            }
                        }
                        Ok(())
                    });
                    match r {
                        Err(Error::NotFound { .. }) => return Err(missing_row(t)),
                        r => r?,
                    }
                }
            }
            b.done_op()?;
        }
        b.finish()
    })?;
    Ok(())
}

// PLR (thesis §4.7.1). Physical records name the tuple id they wrote and carry the whole row,
// so replay needs neither key lookups nor patches: the newest record of each tuple id is its
// state. Threads own disjoint tuple ids (by hash), so nothing is latched; indexes are built
// once at the end from the installed rows. Written by hand rather than through transactions
// because placing a row at a given tuple id is exactly what the normal write path never does.

fn plr_corrupt(t: &TableRef, message: String) -> Error {
    Error::Corrupt {
        file: format!("checkpoint or log of table `{}`", t.schema.name),
        offset: 0,
        message,
    }
}

/// Puts checkpoint rows (`rows`, concatenated) back at their tuple ids `tids`, committed at
/// `ts`. The table is private to recovery and each tuple id is placed once.
pub(super) fn place_rows(t: &TableRef, ts: u64, rows: &[u8], tids: &[u64]) -> Result<()> {
    let mut top = 0;
    for (row, &tid) in rows.chunks_exact(t.schema.row_size.max(1)).zip(tids) {
        let tid = TupleId::new(tid);
        let e = t
            .entry_at(tid)
            .ok_or_else(|| plr_corrupt(t, format!("tuple id {tid} is out of range")))?;
        let v = t.placed_version(ts, tid, row)?;
        if e.compare_exchange(std::ptr::null_mut(), v, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            // SAFETY: v was never published.
            unsafe { Version::free(v) };
            return Err(plr_corrupt(t, format!("two rows at tuple id {tid}")));
        }
        top = top.max(tid.get() + 1);
    }
    t.reserve_tids(TupleId::new(top));
    Ok(())
}

/// The newest physical write of each (table, tuple id): its commit timestamp and row (`None`
/// for a delete).
type Newest<'a> = FxHashMap<(u32, u64), (u64, Option<&'a [u8]>)>;

fn keep_newest<'a>(m: &mut Newest<'a>, k: (u32, u64), ts: u64, row: Option<&'a [u8]>) {
    match m.get_mut(&k) {
        Some(cur) if cur.0 >= ts => {}
        Some(cur) => *cur = (ts, row),
        None => {
            m.insert(k, (ts, row));
        }
    }
}

impl Ctx<'_> {
    /// Calls `each(table, tid, row)` for each write of physical record `r` (`None`: delete).
    fn physical_writes<'f>(
        &self,
        f: &'f LogFile,
        r: &Rec,
        mut each: impl FnMut(&TableRef, u64, Option<&'f [u8]>),
    ) -> Result<()> {
        let bad = || {
            corrupt(
                f,
                format!(
                    "a malformed physical log record (commit timestamp {})",
                    r.ts
                ),
            )
        };
        let mut g = Get::new(f.body(r));
        for _ in 0..r.n {
            let id = g.u32().ok_or_else(bad)?;
            let op = g.u8().ok_or_else(bad)?;
            let t = self.table(f, id)?;
            let tid = u64::try_from(g.varint().ok_or_else(bad)?).map_err(|_| bad())?;
            match op {
                OP_PUT_AT => {
                    let row = g.bytes().ok_or_else(bad)?;
                    if row.len() != t.schema.row_size {
                        return Err(bad());
                    }
                    each(t, tid, Some(row));
                }
                OP_DELETE_AT => each(t, tid, None),
                _ => return Err(bad()),
            }
        }
        Ok(())
    }
}

/// PLR replay: each file's writes are reduced to the newest per (table, tuple id) and
/// shuffled into one partition per thread; each thread merges its partition from every file
/// (newest wins) and installs its tuple ids: a put replaces the row at the id, a delete empties it.
pub(super) fn physical(ctx: &Ctx<'_>, logs: &[LogFile]) -> Result<()> {
    let parts = ctx.threads.max(1);
    let part = |id: u32, tid: u64| {
        (tid.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ u64::from(id)) as usize % parts
    };
    let shuffled = in_parallel(ctx.threads, logs.iter().collect(), |f: &LogFile| {
        let mut out: Vec<Newest<'_>> = (0..parts).map(|_| FxHashMap::default()).collect();
        for r in &f.recs {
            ctx.physical_writes(f, r, |t, tid, row| {
                keep_newest(&mut out[part(t.id, tid)], (t.id, tid), r.ts, row);
            })?;
        }
        Ok(out)
    })?;
    in_parallel(ctx.threads, by_partition(parts, shuffled), |files| {
        let mut files = files.into_iter();
        let mut m = files.next().unwrap_or_default();
        for more in files {
            for (k, (ts, row)) in more {
                keep_newest(&mut m, k, ts, row);
            }
        }
        let mut top: HashMap<u32, u64> = HashMap::new();
        for ((id, tid), (ts, row)) in m {
            let tid = TupleId::new(tid);
            let t = &ctx.tables[&id];
            let e = t
                .entry_at(tid)
                .ok_or_else(|| plr_corrupt(t, format!("tuple id {tid} is out of range")))?;
            let new = match row {
                Some(r) => t.placed_version(ts, tid, r)?,
                None => std::ptr::null_mut(),
            };
            let old = e.swap(new, Ordering::AcqRel);
            if !old.is_null() {
                // SAFETY: placed by `place_rows` (or never published); recovery is alone
                // with the tables and this thread owns the tuple id.
                unsafe { Version::free(old) };
            }
            let m = top.entry(id).or_default();
            *m = (*m).max(tid.get() + 1);
        }
        for (id, n) in top {
            ctx.tables[&id].reserve_tids(TupleId::new(n));
        }
        Ok(())
    })?;
    Ok(())
}

/// Tuple ids per index-building task.
const INDEX_CHUNK: u64 = 1 << 16;

/// PLR's last phase: every index of every table built from the installed rows, tuple-id
/// ranges spread over the threads.
pub(super) fn build_indexes(ctx: &Ctx<'_>) -> Result<()> {
    let mut tasks = Vec::new();
    for t in ctx.tables.values() {
        let n = t.tid_count();
        let mut lo = 0;
        while lo < n {
            tasks.push((t, TupleId::new(lo)..TupleId::new((lo + INDEX_CHUNK).min(n))));
            lo += INDEX_CHUNK;
        }
    }
    in_parallel(ctx.threads, tasks, |(t, range)| {
        match t.build_indexes_of(range) {
            0 => Ok(()),
            n => Err(plr_corrupt(
                t,
                format!("{n} rows share a primary key with another"),
            )),
        }
    })?;
    Ok(())
}
