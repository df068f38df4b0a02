//! YCSB on a baseline engine. The loaded rows and the transactions are Myriad's: a load chunk's
//! rows come from the same generator (`Rng::new(seed, LOAD_STREAM | chunk)`, drawn in the same
//! order), and worker `i`'s plans come from `workload::ycsb::Planner` with `Rng::new(seed, i)`,
//! so the keys, operation kinds, attributes and written values are exactly those Myriad runs.
//!
//! A row is stored as the engine stores rows: SQLite as a table with one column per attribute
//! (`INTEGER PRIMARY KEY` key), redb and fjall as one value per key holding the attributes
//! back to back ([`RowCodec`]), an update being a read-modify-write of that value. A read sums
//! the attributes it reads, as Myriad's does, so it cannot be optimized away.
//!
//! After the run every engine is checked: the table holds exactly the keys `0..rows` (its row
//! count, smallest and largest key), so no transaction lost or invented a row.

use super::fjall_engine::FjallEngine;
use super::redb_engine::RedbEngine;
use super::run::{self, BaselineArgs, BaselineWorker, Failure};
use super::sqlite::SqliteEngine;
use super::Engine;
use crate::bench::report::Report;
use crate::workload::rng::Rng;
use crate::workload::ycsb::{
    attr_col, fidelity_of, sum_bytes, KeyGen, Op, Params, Planner, RowLayout, FIELD_BYTES,
    LOAD_CHUNK_ROWS, TXN_TYPES,
};
use crate::workload::LOAD_STREAM;
use serde_json::json;
use std::hint::black_box;
use std::process::ExitCode;
use std::time::Instant;

/// How a row's attributes lie in one value of a key-value engine: `attrs` fields of 8 bytes
/// (an INT, little-endian) or of `FIELD_BYTES` bytes, back to back.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RowCodec {
    pub layout: RowLayout,
    pub attrs: usize,
}

impl RowCodec {
    pub fn field_bytes(self) -> usize {
        match self.layout {
            RowLayout::Int64x10 => 8,
            RowLayout::Bytes100x10 => FIELD_BYTES,
        }
    }

    pub fn row_bytes(self) -> usize {
        self.attrs * self.field_bytes()
    }

    /// Draws one row's attributes from the load generator, as Myriad's loader does (an INT
    /// per attribute, or all attribute bytes at once).
    pub fn draw(self, rng: &mut Rng, row: &mut [u8]) {
        match self.layout {
            RowLayout::Int64x10 => {
                for f in row.chunks_exact_mut(8) {
                    f.copy_from_slice(&(rng.next_u64() as i64).to_le_bytes());
                }
            }
            RowLayout::Bytes100x10 => rng.fill_bytes(row),
        }
    }

    /// Attribute `i` (0-based) of an encoded row.
    #[inline]
    pub fn field(self, row: &[u8], i: usize) -> &[u8] {
        let w = self.field_bytes();
        &row[i * w..(i + 1) * w]
    }

    /// Attribute `i` as a SQL value.
    #[inline]
    pub fn value(self, row: &[u8], i: usize) -> Field<'_> {
        let f = self.field(row, i);
        match self.layout {
            RowLayout::Int64x10 => Field::Int(int_of(f)),
            RowLayout::Bytes100x10 => Field::Bytes(f),
        }
    }
}

/// An INT field's value (`f` is 8 bytes).
#[inline]
pub(crate) fn int_of(f: &[u8]) -> i64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&f[..8]);
    i64::from_le_bytes(w)
}

/// One attribute value.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Field<'a> {
    Int(i64),
    Bytes(&'a [u8]),
}

/// One drawn transaction, as an engine runs it.
pub(crate) struct TxnPlan<'a> {
    pub planner: &'a Planner<'a>,
    pub params: &'a Params,
    pub codec: RowCodec,
    /// Some operation updates (else the transaction is read-only).
    pub writes: bool,
}

impl TxnPlan<'_> {
    pub fn ops(&self) -> &[Op] {
        &self.planner.plan
    }

    /// The 0-based attribute of the `j`-th field `op` touches.
    #[inline]
    pub fn attr(&self, op: &Op, j: usize) -> usize {
        attr_col(op.attr, j, self.params.attrs) - 1
    }

    /// The value an update of `op` writes into its `j`-th field (Myriad's native path writes
    /// the same).
    #[inline]
    pub fn new_value(&self, op: &Op, j: usize) -> Field<'_> {
        match self.params.layout {
            RowLayout::Int64x10 => Field::Int(op.value.wrapping_add(j as u64) as i64),
            RowLayout::Bytes100x10 => Field::Bytes(self.planner.update_bytes(op, j)),
        }
    }

    /// Sum of the fields a read of `op` reads from an encoded row.
    #[inline]
    pub fn read_sum(&self, row: &[u8], op: &Op) -> u64 {
        (0..self.params.attrs_read).fold(0u64, |s, j| {
            let f = self.codec.field(row, self.attr(op, j));
            s.wrapping_add(match self.params.layout {
                RowLayout::Int64x10 => int_of(f) as u64,
                RowLayout::Bytes100x10 => sum_bytes(f),
            })
        })
    }

    /// Writes `op`'s update into an encoded row.
    #[inline]
    pub fn apply(&self, row: &mut [u8], op: &Op) {
        let w = self.codec.field_bytes();
        for j in 0..self.params.attrs_modified {
            let a = self.attr(op, j);
            let dst = &mut row[a * w..(a + 1) * w];
            match self.new_value(op, j) {
                Field::Int(v) => dst.copy_from_slice(&v.to_le_bytes()),
                Field::Bytes(b) => dst.copy_from_slice(b),
            }
        }
    }
}

/// A baseline engine holding `usertable`.
pub(crate) trait YcsbEngine: Sync {
    type Conn<'a>: YcsbConn
    where
        Self: 'a;
    /// A connection (a session) for one thread.
    fn connect(&self) -> Result<Self::Conn<'_>, String>;
    /// What the engine is and how it runs the transactions: (the `engine` line, the
    /// `row_layout` line, the concurrency line for `protocol`).
    fn describe(&self) -> (String, String, String);
    /// The durability line.
    fn durability(&self) -> String;
}

/// One thread's session with a baseline engine.
pub(crate) trait YcsbConn {
    /// Inserts `rows` (`RowCodec::row_bytes` each) under keys `lo..` in one transaction.
    fn load(&mut self, lo: u64, rows: &[u8]) -> Result<(), String>;
    /// Runs the transaction once and commits it.
    fn run(&mut self, t: &TxnPlan<'_>) -> Result<(), Failure>;
    /// The table's row count and its smallest and largest key (none when empty).
    fn key_summary(&mut self) -> Result<(u64, Option<(u64, u64)>), String>;
}

/// Point access inside one transaction of a key-value engine.
pub(crate) trait KvAccess {
    /// Calls `f` with the value of `key`; false if there is none.
    fn with(&mut self, key: u64, f: &mut dyn FnMut(&[u8])) -> Result<bool, Failure>;
    fn put(&mut self, key: u64, value: &[u8]) -> Result<(), Failure>;
}

/// A YCSB transaction's operations on a key-value engine: a read sums its fields in place; an
/// update copies the value, changes its fields and writes it back.
pub(crate) fn run_kv_ops(
    t: &TxnPlan<'_>,
    kv: &mut impl KvAccess,
    scratch: &mut Vec<u8>,
) -> Result<(), Failure> {
    for op in t.ops() {
        let key = op.key as u64;
        let found = if op.update {
            kv.with(key, &mut |v| {
                scratch.clear();
                scratch.extend_from_slice(v);
            })?
        } else {
            kv.with(key, &mut |v| {
                black_box(t.read_sum(v, op));
            })?
        };
        if !found {
            return Err(Failure::Fatal(format!("usertable has no row {key}")));
        }
        if op.update {
            t.apply(scratch, op);
            kv.put(key, scratch)?;
        }
    }
    Ok(())
}

/// The big-endian key of a key-value engine (so its order is the keys' order).
#[inline]
pub(crate) fn kv_key(key: u64) -> [u8; 8] {
    key.to_be_bytes()
}

struct Worker<'a, C> {
    planner: Planner<'a>,
    params: &'a Params,
    codec: RowCodec,
    conn: C,
    writes: bool,
}

impl<C: YcsbConn> BaselineWorker for Worker<'_, C> {
    fn next_txn(&mut self) -> usize {
        let ty = self.planner.next_txn();
        self.writes = self.planner.plan.iter().any(|o| o.update);
        ty
    }

    fn attempt(&mut self) -> Result<(), Failure> {
        let t = TxnPlan {
            planner: &self.planner,
            params: self.params,
            codec: self.codec,
            writes: self.writes,
        };
        self.conn.run(&t)
    }
}

/// Loads `params.rows` rows on one connection, in transactions of `LOAD_CHUNK_ROWS` rows.
fn load<E: YcsbEngine>(e: &E, params: &Params, codec: RowCodec, seed: u64) -> Result<(), String> {
    let mut conn = e.connect()?;
    let mut buf = Vec::new();
    let row_bytes = codec.row_bytes();
    for chunk in 0..params.rows.div_ceil(LOAD_CHUNK_ROWS) {
        let lo = chunk * LOAD_CHUNK_ROWS;
        let hi = (lo + LOAD_CHUNK_ROWS).min(params.rows);
        let mut rng = Rng::new(seed, LOAD_STREAM | chunk);
        buf.resize(((hi - lo) as usize) * row_bytes, 0);
        for row in buf.chunks_exact_mut(row_bytes) {
            codec.draw(&mut rng, row);
        }
        conn.load(lo, &buf)?;
    }
    Ok(())
}

/// `usertable` holds exactly the keys `0..rows`.
fn check<E: YcsbEngine>(e: &E, rows: u64) -> Result<Result<String, String>, String> {
    let (count, range) = e.connect()?.key_summary()?;
    Ok(if count == rows && range == Some((0, rows - 1)) {
        Ok(format!(
            "usertable holds exactly the keys 0..{rows} ({count} rows)"
        ))
    } else {
        Err(format!(
            "usertable holds {count} rows, keys {range:?}; expected exactly the keys 0..{rows}"
        ))
    })
}

/// What a run produced: the report, and the failed check's message if the check failed.
fn run_engine<E: YcsbEngine>(
    engine: Engine,
    e: &E,
    params: &Params,
    a: &BaselineArgs,
) -> Result<(Report, Option<String>), String> {
    let codec = RowCodec {
        layout: params.layout,
        attrs: params.attrs,
    };
    let load_start = Instant::now();
    load(e, params, codec, a.seed).map_err(|m| format!("loading usertable: {m}"))?;
    let load_s = load_start.elapsed().as_secs_f64();
    let keygen = KeyGen::new(params.key_dist, params.rows, params.theta);
    let result = run::run(
        params.threads + params.read_only_threads,
        TXN_TYPES,
        a,
        |i| {
            Ok(Worker {
                planner: Planner::new(params, &keygen, i, a.seed),
                params,
                codec,
                conn: e.connect()?,
                writes: false,
            })
        },
    )
    .map_err(|m| format!("running ycsb on {}: {m}", engine.name()))?;
    let checked = check(e, params.rows).map_err(|m| format!("checking usertable: {m}"))?;
    let failed = checked.as_ref().err().cloned();
    let results = vec![(
        "check",
        json!(match &checked {
            Ok(m) => format!("ok: {m}"),
            Err(m) => format!("FAILED: {m}"),
        }),
    )];
    let (what, rows, concurrency) = e.describe();
    let mut workload = fidelity_of(params);
    for (k, v) in workload.iter_mut() {
        match *k {
            "row_layout" => *v = json!(rows),
            // Myriad's `Transaction::prefetch`; no baseline has it.
            "prefetch" => *v = json!(false),
            _ => {}
        }
    }
    let fidelity = run::fidelity(workload, a, what, concurrency, e.durability());
    let report = run::report(
        "ycsb",
        a,
        params.threads,
        load_s,
        TXN_TYPES,
        &result,
        results,
        fidelity,
    );
    Ok((report, failed))
}

/// `myriad bench ycsb --engine sqlite|redb|fjall`: loads, runs, checks and reports like the
/// Myriad run. Exit 1 on a fatal error or a failed check, 2 on a configuration the engine
/// cannot run.
pub fn bench_ycsb(engine: Engine, params: Params, a: BaselineArgs) -> ExitCode {
    let json_out = run::prepare(engine, &a);
    let codec = RowCodec {
        layout: params.layout,
        attrs: params.attrs,
    };
    let dir = a.data_dir.as_deref();
    let ran = match engine {
        Engine::Sqlite => SqliteEngine::open(dir, a.fsync_always, &params, codec)
            .and_then(|e| run_engine(engine, &e, &params, &a)),
        Engine::Redb => RedbEngine::open(dir, a.fsync_always, codec)
            .and_then(|e| run_engine(engine, &e, &params, &a)),
        Engine::Fjall => FjallEngine::open(dir, a.fsync_always, &params, codec)
            .and_then(|e| run_engine(engine, &e, &params, &a)),
        Engine::Myriad => Err("--engine myriad is not a baseline".into()),
    };
    let (report, failed) = match ran {
        Ok(r) => r,
        Err(m) => return crate::fatal(engine.name(), m),
    };
    crate::bench::command::emit_report(&report, json_out, a.latency_histogram, failed, "ycsb")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::ycsb::Ycsb;
    use myriad::{Config, Database, Isolation, Value};

    /// The rows a baseline loads are the rows Myriad loads for the same seed.
    #[test]
    fn baseline_rows_are_myriads_rows() {
        for layout in [RowLayout::Int64x10, RowLayout::Bytes100x10] {
            let p = Params {
                rows: 1500,
                ops: 4,
                mix: crate::workload::ycsb::Mix::ReadIntensive,
                theta: 0.5,
                key_dist: crate::workload::ycsb::KeyDist::Gray,
                layout,
                attrs: 10,
                update_pct: None,
                writes_per_txn: None,
                attrs_read: 10,
                attrs_modified: 1,
                secondary_indexes: 0,
                distinct_keys: true,
                prefetch: false,
                isolation: Isolation::Serializable,
                as_procedure: false,
                threads: 1,
                read_only_threads: 0,
                read_only_hint: false,
            };
            let db = Database::open(Config::new()).unwrap();
            let y = Ycsb::create(&db, p.clone()).unwrap();
            y.load(&db, 2, 5, None).unwrap();
            let codec = RowCodec { layout, attrs: 10 };
            let mut tx = db.begin().unwrap();
            for chunk in 0..2u64 {
                let mut rng = Rng::new(5, LOAD_STREAM | chunk);
                let mut row = vec![0u8; codec.row_bytes()];
                for key in chunk * 1000..(chunk * 1000 + 1000).min(1500) {
                    codec.draw(&mut rng, &mut row);
                    let got = tx.get(&y.table, &(key as i64)).unwrap().unwrap();
                    for i in 0..10 {
                        let want = match codec.value(&row, i) {
                            Field::Int(v) => Value::Int(v),
                            Field::Bytes(b) => Value::Bytes(b.to_vec()),
                        };
                        assert_eq!(got[i + 1], want, "{layout:?} key {key} attr {i}");
                    }
                }
            }
            tx.commit().unwrap();
        }
    }
}
