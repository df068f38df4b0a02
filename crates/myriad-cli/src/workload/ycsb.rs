//! YCSB as the thesis (§5.7.1) and DBx1000 run it: one table `usertable` of `rows` rows, a
//! 64-bit key and `attrs` attributes (ten by default; the thesis's §5.7.3 also has 100); a
//! transaction of `ops` point operations on Zipfian-chosen keys, each a read of `attrs_read`
//! attributes or an update of `attrs_modified` attributes.
//!
//! Determinism: a load chunk's rows come from `Rng::new(seed, LOAD_STREAM | chunk)`, so the
//! loaded data depends on the seed alone (not on the thread count); worker `i` draws every
//! transaction from `Rng::new(seed, i)`, and a retried transaction reuses its drawn plan.

use super::rng::Rng;
use super::zipf::{GrayZipf, ScrambledZipf};
use super::{load_chunk, Worker, Workload};
use crate::bench::parallel_chunks;
use indicatif::ProgressBar;
use myriad::procedure::{CallFrame, Procedure};
use myriad::{
    ColumnType, Database, Error, IndexKind, Isolation, Result, RowRef, TableRef, TableSchema,
    TxnOptions, ValueRef,
};
use serde::Serialize;
use serde_json::{json, Value as Json};
use std::collections::HashSet;
use std::hint::black_box;
use std::sync::Arc;

/// Attributes per row (besides the key) by default.
pub const ATTRS: usize = 10;
/// Most attributes per row (`--attrs`): the thesis's widest table (§5.7.3).
pub const MAX_ATTRS: usize = 100;
/// Bytes per attribute in the `bytes100x10` layout.
pub const FIELD_BYTES: usize = 100;
/// Rows per load transaction.
pub const LOAD_CHUNK_ROWS: u64 = 1000;
/// Transaction types, in report order.
pub const TXN_TYPES: &[&str] = &["read_only_txn", "update_txn", "long_read_txn"];
const READ_ONLY_TXN: usize = 0;
const UPDATE_TXN: usize = 1;
const LONG_READ_TXN: usize = 2;
/// Size of a worker's source buffer for byte-attribute updates.
const UPDATE_SOURCE_BYTES: usize = 4096 + FIELD_BYTES;

/// Read/update proportions per operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mix {
    /// 100% reads.
    ReadOnly,
    /// 80% reads, 20% updates.
    ReadIntensive,
    /// 20% reads, 80% updates.
    UpdateIntensive,
}

impl Mix {
    pub fn name(self) -> &'static str {
        match self {
            Mix::ReadOnly => "read-only",
            Mix::ReadIntensive => "read-intensive",
            Mix::UpdateIntensive => "update-intensive",
        }
    }
    /// Percentage of operations that are reads.
    pub fn read_percent(self) -> u32 {
        match self {
            Mix::ReadOnly => 100,
            Mix::ReadIntensive => 80,
            Mix::UpdateIntensive => 20,
        }
    }
}

/// How keys are drawn.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum KeyDist {
    /// Gray et al.'s Zipfian as DBx1000/CCBench use it; hot keys are the low keys.
    Gray,
    /// YCSB's ScrambledZipfianGenerator: hot keys scattered by FNV-1a hashing.
    YcsbScrambled,
}

impl KeyDist {
    pub fn name(self) -> &'static str {
        match self {
            KeyDist::Gray => "gray",
            KeyDist::YcsbScrambled => "ycsb-scrambled",
        }
    }
}

/// The row layout of `usertable`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, Serialize)]
pub enum RowLayout {
    /// Key INT + ten INT attributes.
    #[value(name = "int64x10")]
    #[serde(rename = "int64x10")]
    Int64x10,
    /// Key INT + ten BYTES(100) attributes (DBx1000/YCSB).
    #[value(name = "bytes100x10")]
    #[serde(rename = "bytes100x10")]
    Bytes100x10,
}

impl RowLayout {
    pub fn name(self) -> &'static str {
        match self {
            RowLayout::Int64x10 => "int64x10",
            RowLayout::Bytes100x10 => "bytes100x10",
        }
    }
    fn column_type(self) -> ColumnType {
        match self {
            RowLayout::Int64x10 => ColumnType::Int,
            RowLayout::Bytes100x10 => ColumnType::Bytes(FIELD_BYTES),
        }
    }
}

/// Everything that shapes the YCSB data and transactions.
#[derive(Clone, Debug)]
pub struct Params {
    pub rows: u64,
    pub ops: usize,
    pub mix: Mix,
    pub theta: f64,
    pub key_dist: KeyDist,
    pub layout: RowLayout,
    /// Attributes per row (`--attrs`, 1..=MAX_ATTRS).
    pub attrs: usize,
    /// Percentage of update operations (`--update-pct`), overriding `mix`'s.
    pub update_pct: Option<u32>,
    /// Exactly this many updates per transaction, the last of its `ops`
    /// (`--writes-per-txn`), overriding `mix` and `update_pct`.
    pub writes_per_txn: Option<usize>,
    pub attrs_read: usize,
    pub attrs_modified: usize,
    /// Ordered secondary indexes on `field0`.. (`--secondary-indexes`).
    pub secondary_indexes: usize,
    /// Keys within one transaction never repeat (a repeated draw is redrawn).
    pub distinct_keys: bool,
    /// Call `Transaction::prefetch` on the transaction's keys before its operations (the
    /// native path; a procedure's compiled loop warms its keys itself).
    pub prefetch: bool,
    pub isolation: Isolation,
    /// Run each transaction as the stored procedure of [`procedure_sql`] instead of native
    /// Rust calls (`--as-procedure`).
    pub as_procedure: bool,
    /// Threads running `mix` (`--threads`); the read-only threads come after them.
    pub threads: usize,
    /// Extra threads running `ops` reads per transaction (`--read-only-threads`).
    pub read_only_threads: usize,
    /// Whether those transactions are declared READ ONLY (`--read-only-hint`).
    pub read_only_hint: bool,
}

impl Params {
    /// Checks the combinations a command line cannot express as per-flag ranges; the message
    /// names the flag.
    pub fn validate(&self) -> std::result::Result<(), String> {
        if self.rows == 0 || self.rows > i64::MAX as u64 {
            return Err(format!(
                "--rows must be in 1..={}, got {}",
                i64::MAX,
                self.rows
            ));
        }
        if self.ops == 0 {
            return Err("--ops must be at least 1".into());
        }
        if self.distinct_keys && self.ops as u64 > self.rows {
            return Err(format!(
                "--ops {} exceeds --rows {} while --distinct-keys is true (keys cannot be distinct)",
                self.ops, self.rows
            ));
        }
        if !(0.0..1.0).contains(&self.theta) {
            return Err(format!("--theta must be in [0, 1), got {}", self.theta));
        }
        if !(1..=MAX_ATTRS).contains(&self.attrs) {
            return Err(format!(
                "--attrs must be in 1..={MAX_ATTRS}, got {}",
                self.attrs
            ));
        }
        if self.secondary_indexes > self.attrs {
            return Err(format!(
                "--secondary-indexes must be in 0..={} (--attrs), got {}",
                self.attrs, self.secondary_indexes
            ));
        }
        for (flag, n) in [
            ("--attrs-read", self.attrs_read),
            ("--attrs-modified", self.attrs_modified),
        ] {
            if !(1..=self.attrs).contains(&n) {
                return Err(format!(
                    "{flag} must be in 1..={} (--attrs), got {n}",
                    self.attrs
                ));
            }
        }
        if let Some(w) = self.writes_per_txn.filter(|&w| w > self.ops) {
            return Err(format!(
                "--writes-per-txn must be in 0..={} (--ops), got {w}",
                self.ops
            ));
        }
        if let Some(u) = self.update_pct.filter(|&u| u > 100) {
            return Err(format!("--update-pct must be in 0..=100, got {u}"));
        }
        Ok(())
    }

    /// Percentage of operations that are reads: `--update-pct`'s complement if given, else
    /// the mix's.
    pub fn read_percent(&self) -> u32 {
        match (self.writes_per_txn, self.update_pct) {
            (Some(w), _) => (100 * (self.ops - w.min(self.ops)) / self.ops.max(1)) as u32,
            (None, Some(u)) => 100 - u.min(100),
            (None, None) => self.mix.read_percent(),
        }
    }
}

/// The key generator chosen by `--key-dist`, over [0, rows).
#[derive(Clone, Debug)]
pub enum KeyGen {
    Gray(GrayZipf),
    Scrambled(ScrambledZipf),
}

impl KeyGen {
    pub fn new(dist: KeyDist, rows: u64, theta: f64) -> KeyGen {
        match dist {
            KeyDist::Gray => KeyGen::Gray(GrayZipf::new(rows, theta)),
            KeyDist::YcsbScrambled => KeyGen::Scrambled(ScrambledZipf::new(rows, theta)),
        }
    }

    #[inline]
    pub fn next(&self, rng: &mut Rng) -> u64 {
        match self {
            KeyGen::Gray(z) => z.next(rng),
            KeyGen::Scrambled(z) => z.next(rng),
        }
    }
}

/// The YCSB workload over one database: its table and key generator.
pub struct Ycsb {
    pub params: Params,
    pub table: TableRef,
    keygen: KeyGen,
    procedure: Option<Arc<Procedure>>,
}

/// The YCSB transaction as a stored procedure: for each operation `i`, a read of
/// `attrs_read` attributes or an update of `attrs_modified` attributes starting at attribute
/// `attr[i]` (cyclically), exactly what the native transaction does. The start attribute
/// picks the columns, so each possible start is an `IF` branch of its own (generated).
pub fn procedure_sql(p: &Params) -> String {
    let cols = |first: usize, n: usize| -> Vec<String> {
        (0..n)
            .map(|j| format!("field{}", (first + j) % p.attrs))
            .collect()
    };
    let starts = |n: usize| if n == p.attrs { 1 } else { p.attrs };
    let mut read = String::new();
    for a in 0..starts(p.attrs_read) {
        let c = cols(a, p.attrs_read);
        let into: Vec<String> = (0..c.len()).map(|j| format!("x{j}")).collect();
        let stmt = format!(
            "SELECT {} INTO {} FROM usertable WHERE ycsb_key = keys[i];",
            c.join(", "),
            into.join(", ")
        );
        read += &branch(a, starts(p.attrs_read), &stmt);
    }
    let mut update = String::new();
    for a in 0..starts(p.attrs_modified) {
        let sets: Vec<String> = cols(a, p.attrs_modified)
            .into_iter()
            .enumerate()
            .map(|(j, c)| format!("{c} = vals[i] + {j}"))
            .collect();
        let stmt = format!(
            "UPDATE usertable SET {} WHERE ycsb_key = keys[i];",
            sets.join(", ")
        );
        update += &branch(a, starts(p.attrs_modified), &stmt);
    }
    let decls: String = (0..p.attrs_read)
        .map(|j| format!("x{j} BIGINT; "))
        .collect();
    format!(
        "CREATE PROCEDURE ycsb_txn(keys BIGINT[], upd BIGINT[], attr BIGINT[], vals BIGINT[]) AS $$
DECLARE {decls}
BEGIN
  FOR i IN 1..cardinality(keys) LOOP
    IF upd[i] = 1 THEN
{update}    ELSE
{read}    END IF;
  END LOOP;
END $$"
    )
}

/// One arm of the generated `IF attr[i] = 0 ... ELSIF ...` chain (no chain for one arm).
fn branch(a: usize, n: usize, stmt: &str) -> String {
    match (n, a) {
        (1, _) => format!("      {stmt}\n"),
        (_, 0) => format!("      IF attr[i] = 0 THEN {stmt}\n"),
        (_, a) if a + 1 == n => format!("      ELSE {stmt} END IF;\n"),
        (_, a) => format!("      ELSIF attr[i] = {a} THEN {stmt}\n"),
    }
}

impl Ycsb {
    /// Creates `usertable` (hash primary key, sized for `rows`).
    pub fn create(db: &Database, params: Params) -> Result<Ycsb> {
        if let Err(m) = params.validate() {
            return Err(Error::InvalidConfig(m));
        }
        let ty = params.layout.column_type();
        let mut schema = TableSchema::new("usertable").column("ycsb_key", ColumnType::Int);
        for i in 0..params.attrs {
            schema = schema.column(&format!("field{i}"), ty);
        }
        let mut schema = schema
            .primary_key(&["ycsb_key"])
            .expected_rows(params.rows as usize);
        for i in 0..params.secondary_indexes {
            let col = format!("field{i}");
            schema = schema.index(&format!("by_{col}"), &[&col], IndexKind::Ordered, false);
        }
        let table = db.create_table(schema)?;
        let keygen = KeyGen::new(params.key_dist, params.rows, params.theta);
        let procedure = if params.as_procedure {
            if params.layout != RowLayout::Int64x10 {
                return Err(Error::Unsupported(
                    "--as-procedure with --row-layout bytes100x10 (the SQL subset has no BYTES type)"
                        .into(),
                ));
            }
            Some(db.create_procedures(&procedure_sql(&params))?.remove(0))
        } else {
            None
        };
        Ok(Ycsb {
            params,
            table,
            keygen,
            procedure,
        })
    }

    /// Loads keys 0..rows with `threads` threads, each inserting a disjoint key range in
    /// transactions of `LOAD_CHUNK_ROWS` rows.
    pub fn load(
        &self,
        db: &Database,
        threads: usize,
        seed: u64,
        progress: Option<&ProgressBar>,
    ) -> Result<()> {
        let chunks = self.params.rows.div_ceil(LOAD_CHUNK_ROWS);
        let row_bytes = self.params.attrs * FIELD_BYTES;
        parallel_chunks(threads, chunks, progress, |chunk, buf: &mut Vec<u8>| {
            buf.resize(row_bytes, 0);
            let lo = chunk * LOAD_CHUNK_ROWS;
            let hi = (lo + LOAD_CHUNK_ROWS).min(self.params.rows);
            load_chunk(db, seed, chunk, |tx, rng| {
                for key in lo..hi {
                    self.insert_row(tx, key as i64, rng, buf)?;
                }
                Ok(hi - lo)
            })
        })
    }

    fn insert_row(
        &self,
        tx: &mut myriad::Transaction<'_>,
        key: i64,
        rng: &mut Rng,
        buf: &mut [u8],
    ) -> Result<()> {
        let mut values = [ValueRef::Int(key); MAX_ATTRS + 1];
        let values = &mut values[..=self.params.attrs];
        match self.params.layout {
            RowLayout::Int64x10 => {
                for v in &mut values[1..] {
                    *v = ValueRef::Int(rng.next_u64() as i64);
                }
            }
            RowLayout::Bytes100x10 => {
                rng.fill_bytes(buf);
                for (v, field) in values[1..].iter_mut().zip(buf.chunks_exact(FIELD_BYTES)) {
                    *v = ValueRef::Bytes(field);
                }
            }
        }
        tx.insert(&self.table, &*values)
    }

    /// The worker for thread `thread`.
    pub fn worker(&self, thread: usize, seed: u64) -> YcsbWorker<'_> {
        let planner = Planner::new(&self.params, &self.keygen, thread, seed);
        YcsbWorker {
            y: self,
            opts: TxnOptions {
                isolation: self.params.isolation,
                read_only: planner.long_reads && self.params.read_only_hint,
            },
            planner,
            keys: Vec::with_capacity(self.params.ops),
            frame: None,
        }
    }

    /// What this run's YCSB is, for the report's fidelity block (key → value; strings are
    /// shown as is in the terminal summary).
    pub fn fidelity(&self) -> Vec<(&'static str, Json)> {
        fidelity_of(&self.params)
    }
}

/// The fidelity entries of a YCSB run with `p` (shared by Myriad's run and the baselines').
pub(crate) fn fidelity_of(p: &Params) -> Vec<(&'static str, Json)> {
    let read = p.read_percent();
    let attr = match p.layout {
        RowLayout::Int64x10 => "INT",
        RowLayout::Bytes100x10 => "BYTES(100)",
    };
    let layout = format!(
        "{}: key INT + {} {attr} attributes, hash primary key",
        p.layout.name(),
        p.attrs
    );
    let keys = match p.key_dist {
            KeyDist::Gray => format!(
                "gray: Gray et al. Zipfian as DBx1000/CCBench, θ={}, unscrambled (hot keys are the low keys){}",
                p.theta,
                if p.theta == 0.0 { "; θ=0 is uniform" } else { "" }
            ),
            KeyDist::YcsbScrambled => format!(
                "ycsb-scrambled: YCSB ScrambledZipfianGenerator, θ={}, Zipf over {} items, FNV-1a-64 mod rows",
                p.theta,
                super::zipf::YCSB_ITEM_COUNT
            ),
        };
    vec![
        (
            "mix",
            json!(format!(
                "{}: {}% read / {}% update per operation",
                match (p.writes_per_txn, p.update_pct) {
                    (Some(_), _) => "--writes-per-txn",
                    (None, Some(_)) => "--update-pct",
                    (None, None) => p.mix.name(),
                },
                read,
                100 - read
            )),
        ),
        ("read_pct", json!(read)),
        ("update_pct", json!(100 - read)),
        ("ops_per_txn", json!(p.ops)),
        ("writes_per_txn", json!(p.writes_per_txn)),
        ("attrs", json!(p.attrs)),
        ("attrs_read_per_read", json!(p.attrs_read)),
        ("attrs_modified_per_update", json!(p.attrs_modified)),
        ("secondary_indexes", json!(p.secondary_indexes)),
        ("rows", json!(p.rows)),
        ("row_layout", json!(layout)),
        ("key_generator", json!(keys)),
        ("key_dist", json!(p.key_dist.name())),
        ("theta", json!(p.theta)),
        ("keys_may_repeat_in_txn", json!(!p.distinct_keys)),
        // The harness's own prefetch (a procedure's loop warms its keys itself).
        ("prefetch", json!(p.prefetch && !p.as_procedure)),
        ("as_procedure", json!(p.as_procedure)),
        ("read_only_threads", json!(p.read_only_threads)),
        (
            "long_reads",
            json!(if p.read_only_threads == 0 {
                "none".to_string()
            } else {
                format!(
                    "{} thread(s) of {}-read transactions{}",
                    p.read_only_threads,
                    p.ops,
                    if p.read_only_hint {
                        ", declared READ ONLY"
                    } else {
                        ", not declared READ ONLY"
                    }
                )
            }),
        ),
    ]
}

impl Workload for Ycsb {
    type Worker<'a> = YcsbWorker<'a>;

    fn txn_types(&self) -> &'static [&'static str] {
        TXN_TYPES
    }

    fn extra_threads(&self) -> usize {
        self.params.read_only_threads
    }

    fn load_units(&self) -> (u64, &'static str) {
        (self.params.rows, "rows")
    }

    fn load(
        &self,
        db: &Database,
        threads: usize,
        seed: u64,
        progress: Option<&ProgressBar>,
    ) -> Result<()> {
        Ycsb::load(self, db, threads, seed, progress)
    }

    fn worker(&self, thread: usize, seed: u64) -> YcsbWorker<'_> {
        Ycsb::worker(self, thread, seed)
    }

    fn fidelity(&self) -> Vec<(&'static str, Json)> {
        Ycsb::fidelity(self)
    }
}

/// Up to this many operations, duplicate keys are found by a linear scan of the plan.
const LINEAR_DEDUP_MAX: usize = 32;

/// One planned operation of a transaction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Op {
    pub(crate) key: i64,
    pub(crate) update: bool,
    /// First attribute touched (0-based); the next ones follow cyclically.
    pub(crate) attr: u8,
    /// Update payload: the new integer value, or an offset into the update source.
    pub(crate) value: u64,
}

/// One thread's stream of YCSB transaction plans, independent of the engine that runs them
/// (Myriad's [`YcsbWorker`], or a baseline engine's worker under `--engine`): the same seed
/// and thread give the same plans.
pub(crate) struct Planner<'a> {
    params: &'a Params,
    keygen: &'a KeyGen,
    rng: Rng,
    /// A `--read-only-threads` worker: every operation is a read.
    pub(crate) long_reads: bool,
    pub(crate) plan: Vec<Op>,
    seen: HashSet<u64>,
    /// Bytes that updates of the `bytes100x10` layout copy from (never allocated per operation).
    pub(crate) update_source: Box<[u8]>,
}

impl<'a> Planner<'a> {
    /// The planner of thread `thread`: its generator is `Rng::new(seed, thread)`, which first
    /// fills the update source.
    pub(crate) fn new(params: &'a Params, keygen: &'a KeyGen, thread: usize, seed: u64) -> Self {
        let mut rng = Rng::new(seed, thread as u64);
        let mut update_source = vec![0u8; UPDATE_SOURCE_BYTES].into_boxed_slice();
        rng.fill_bytes(&mut update_source);
        Planner {
            params,
            keygen,
            rng,
            long_reads: thread >= params.threads,
            plan: Vec::with_capacity(params.ops),
            seen: HashSet::with_capacity(if params.ops > LINEAR_DEDUP_MAX {
                params.ops
            } else {
                0
            }),
            update_source,
        }
    }

    /// The `j`-th field an update of `op` writes in the `bytes100x10` layout: a window of the
    /// update source.
    #[inline]
    pub(crate) fn update_bytes(&self, op: &Op, j: usize) -> &[u8] {
        let src = &self.update_source;
        let off = (op.value as usize).wrapping_add(j * 61) % (src.len() - FIELD_BYTES);
        &src[off..off + FIELD_BYTES]
    }
}

/// One thread's YCSB transactions.
pub struct YcsbWorker<'a> {
    y: &'a Ycsb,
    planner: Planner<'a>,
    opts: TxnOptions,
    keys: Vec<i64>,
    /// The procedure's call frame (`--as-procedure`): the arguments are written into it in
    /// place, reused by every transaction.
    frame: Option<CallFrame>,
}

/// Column of the `j`-th attribute touched by an operation starting at attribute `first`, of
/// `attrs`.
#[inline]
pub(crate) fn attr_col(first: u8, j: usize, attrs: usize) -> usize {
    1 + (first as usize + j) % attrs
}

impl Planner<'_> {
    fn draw_key(&mut self) -> u64 {
        let p = self.params;
        loop {
            let k = self.keygen.next(&mut self.rng);
            if !p.distinct_keys {
                return k;
            }
            let fresh = if p.ops <= LINEAR_DEDUP_MAX {
                !self.plan.iter().any(|o| o.key as u64 == k)
            } else {
                self.seen.insert(k)
            };
            if fresh {
                return k;
            }
        }
    }

    /// Draws the next transaction's plan; returns its type (an index into [`TXN_TYPES`]).
    pub(crate) fn next_txn(&mut self) -> usize {
        let p = self.params;
        let (ops, read_pct) = (p.ops, p.read_percent());
        let spread = p.attrs_read < p.attrs || p.attrs_modified < p.attrs;
        self.plan.clear();
        self.seen.clear();
        let mut any_update = false;
        let read_pct = if self.long_reads { 100 } else { read_pct };
        for i in 0..ops {
            let key = self.draw_key() as i64;
            let update = match (p.writes_per_txn, read_pct) {
                _ if self.long_reads => false,
                (Some(w), _) => i >= ops - w,
                (None, 100) => false,
                (None, 0) => true,
                (None, pct) => !self.rng.percent(pct),
            };
            let attr = if spread {
                self.rng.below(p.attrs as u64) as u8
            } else {
                0
            };
            let value = if update { self.rng.next_u64() } else { 0 };
            any_update |= update;
            self.plan.push(Op {
                key,
                update,
                attr,
                value,
            });
        }
        if self.long_reads {
            LONG_READ_TXN
        } else if any_update {
            UPDATE_TXN
        } else {
            READ_ONLY_TXN
        }
    }
}

impl Worker for YcsbWorker<'_> {
    fn next_txn(&mut self) -> usize {
        self.planner.next_txn()
    }

    fn attempt(&mut self, db: &Database) -> Result<myriad::CommitTicket> {
        let p = &self.y.params;
        let t = &self.y.table;
        let planner = &self.planner;
        let mut tx = db.begin_with(self.opts)?;
        // Not before a procedure: its compiled loop prefetches the keys it is passed (the
        // loop prefetch), as it does for any caller; a harness prefetch as well was a second
        // pass over the same keys (3 % of the procedure path's instructions).
        if p.prefetch && self.y.procedure.is_none() {
            self.keys.clear();
            self.keys.extend(planner.plan.iter().map(|o| o.key));
            tx.prefetch(t, &self.keys)?;
        }
        if let Some(proc) = &self.y.procedure {
            // The same plan as arguments: keys, update flags, first attributes, values (kept
            // below 2^61 so that `vals[i] + j` cannot overflow).
            let frame = self.frame.get_or_insert_with(|| proc.frame());
            let plan = &planner.plan;
            frame.set_ints(0, plan.iter().map(|o| o.key));
            frame.set_ints(1, plan.iter().map(|o| o.update as i64));
            frame.set_ints(2, plan.iter().map(|o| o.attr as i64));
            frame.set_ints(3, plan.iter().map(|o| (o.value >> 3) as i64));
            return proc.execute_commit(tx, frame).map(|(_, ticket)| ticket);
        }
        for op in &planner.plan {
            if op.update {
                tx.update_with(t, &op.key, |row| {
                    for j in 0..p.attrs_modified {
                        let col = attr_col(op.attr, j, p.attrs);
                        match p.layout {
                            RowLayout::Int64x10 => {
                                row.set(col, op.value.wrapping_add(j as u64) as i64)?
                            }
                            RowLayout::Bytes100x10 => row.set(col, planner.update_bytes(op, j))?,
                        }
                    }
                    Ok(())
                })?;
            } else {
                let sum = tx.get_with(t, &op.key, |r| {
                    read_attrs(r, op.attr, p.attrs_read, p.attrs)
                })?;
                match sum {
                    Some(s) => {
                        black_box(s?);
                    }
                    None => {
                        return Err(Error::NotFound {
                            table: t.name().to_string(),
                        })
                    }
                }
            }
        }
        tx.commit_deferred()
    }
}

/// Folds every byte of `b` into a sum, eight bytes at a time (touches all of the value, like a
/// reader that copies it out, without a per-byte loop dominating the measurement).
#[inline]
pub(crate) fn sum_bytes(b: &[u8]) -> u64 {
    let mut chunks = b.chunks_exact(8);
    let mut sum = 0u64;
    for c in &mut chunks {
        let mut w = [0u8; 8];
        w.copy_from_slice(c);
        sum = sum.wrapping_add(u64::from_le_bytes(w));
    }
    chunks
        .remainder()
        .iter()
        .fold(sum, |s, &x| s.wrapping_add(x as u64))
}

/// Sums the `n` attributes read by an operation starting at attribute `first` (bytes: the sum
/// of every byte), so the reads cannot be optimized away.
#[inline]
fn read_attrs(r: RowRef<'_>, first: u8, n: usize, attrs: usize) -> Result<u64> {
    let mut sum = 0u64;
    for j in 0..n {
        let col = attr_col(first, j, attrs);
        sum = sum.wrapping_add(match r.get(col) {
            Some(ValueRef::Int(v)) => v as u64,
            Some(ValueRef::Bytes(b)) => sum_bytes(b),
            _ => r.i64(col)? as u64,
        });
    }
    Ok(sum)
}

#[cfg(test)]
mod tests {
    use super::*;
    use myriad::{Config, Row, Value};

    fn params(rows: u64, layout: RowLayout) -> Params {
        Params {
            rows,
            ops: 10,
            mix: Mix::UpdateIntensive,
            theta: 0.9,
            key_dist: KeyDist::Gray,
            layout,
            attrs: ATTRS,
            update_pct: None,
            writes_per_txn: None,
            attrs_read: 10,
            attrs_modified: 2,
            secondary_indexes: 0,
            distinct_keys: true,
            prefetch: true,
            isolation: Isolation::Serializable,
            as_procedure: false,
            threads: 2,
            read_only_threads: 0,
            read_only_hint: true,
        }
    }

    fn loaded(rows: u64, layout: RowLayout, threads: usize, seed: u64) -> Vec<Row> {
        let db = Database::open(Config::new()).unwrap();
        let y = Ycsb::create(&db, params(rows, layout)).unwrap();
        y.load(&db, threads, seed, None).unwrap();
        let mut tx = db.begin().unwrap();
        let rows = (0..rows as i64)
            .map(|k| tx.get(&y.table, &k).unwrap().expect("loaded row"))
            .collect();
        tx.commit().unwrap();
        rows
    }

    #[test]
    fn same_seed_loads_identical_data_whatever_the_thread_count() {
        for layout in [RowLayout::Int64x10, RowLayout::Bytes100x10] {
            let a = loaded(2500, layout, 1, 42);
            assert_eq!(a.len(), 2500);
            assert_eq!(a, loaded(2500, layout, 3, 42), "{layout:?}");
            assert_ne!(a, loaded(2500, layout, 1, 43), "{layout:?}");
            for (k, row) in a.iter().enumerate() {
                assert_eq!(row[0].as_i64(), Some(k as i64));
            }
        }
    }

    #[test]
    fn the_procedure_runs_the_same_compiled_and_interpreted() {
        crate::workload::assert_compiled_matches_interpreted(
            Config::new(),
            |db| {
                let mut p = params(300, RowLayout::Int64x10);
                (p.attrs_read, p.attrs_modified) = (3, 2);
                p.as_procedure = true;
                Ycsb::create(db, p).unwrap()
            },
            200,
        );
    }

    #[test]
    fn the_procedure_path_writes_what_its_plan_says() {
        for (read, modified) in [(10, 1), (3, 2), (10, 10)] {
            let db = Database::open(Config::new()).unwrap();
            let mut p = params(300, RowLayout::Int64x10);
            (p.attrs_read, p.attrs_modified) = (read, modified);
            p.mix = Mix::UpdateIntensive;
            p.as_procedure = true;
            let y = Ycsb::create(&db, p).unwrap();
            y.load(&db, 1, 7, None).unwrap();
            let mut w = y.worker(0, 9);
            let mut updates = 0;
            for _ in 0..30 {
                w.next_txn();
                let plan = w.planner.plan.clone();
                w.attempt(&db).unwrap();
                let mut tx = db.begin().unwrap();
                for op in plan.iter().filter(|o| o.update) {
                    let row = tx.get(&y.table, &op.key).unwrap().unwrap();
                    for j in 0..modified {
                        let want = Value::Int((op.value >> 3) as i64 + j as i64);
                        assert_eq!(row.get(attr_col(op.attr, j, ATTRS)), Some(&want));
                    }
                    updates += 1;
                }
                tx.commit().unwrap();
            }
            assert!(updates > 100, "{updates}");
        }
        // Bytes rows have no SQL type: a clear error, not a wrong benchmark.
        let db = Database::open(Config::new()).unwrap();
        let mut p = params(10, RowLayout::Bytes100x10);
        p.as_procedure = true;
        assert!(matches!(Ycsb::create(&db, p), Err(Error::Unsupported(_))));
    }

    #[test]
    fn plans_are_deterministic_distinct_and_runnable() {
        let db = Database::open(Config::new()).unwrap();
        let mut p = params(500, RowLayout::Bytes100x10);
        p.ops = 40; // above LINEAR_DEDUP_MAX: exercises the set
        let y = Ycsb::create(&db, p).unwrap();
        y.load(&db, 2, 7, None).unwrap();
        let (mut a, mut b) = (y.worker(0, 7), y.worker(0, 7));
        for _ in 0..50 {
            let ty = a.next_txn();
            assert_eq!(ty, b.next_txn());
            assert_eq!(a.planner.plan, b.planner.plan);
            let mut keys: Vec<i64> = a.planner.plan.iter().map(|o| o.key).collect();
            keys.sort_unstable();
            keys.dedup();
            assert_eq!(keys.len(), 40);
            assert_eq!(ty == UPDATE_TXN, a.planner.plan.iter().any(|o| o.update));
            a.attempt(&db).unwrap();
        }
    }

    /// With secondary indexes, every row is found under each of its current attribute values
    /// (exactly once) after updates that change indexed attributes.
    #[test]
    fn secondary_indexes_find_every_row_after_updates() {
        for layout in [RowLayout::Int64x10, RowLayout::Bytes100x10] {
            let db = Database::open(Config::new()).unwrap();
            let mut p = params(200, layout);
            (p.secondary_indexes, p.attrs_modified, p.ops) = (3, 4, 5);
            let y = Ycsb::create(&db, p).unwrap();
            y.load(&db, 1, 7, None).unwrap();
            let mut w = y.worker(0, 9);
            let mut updated = HashSet::new();
            for _ in 0..100 {
                w.next_txn();
                updated.extend(w.planner.plan.iter().filter(|o| o.update).map(|o| o.key));
                w.attempt(&db).unwrap();
            }
            assert!(updated.len() > 50, "{}", updated.len());
            let mut tx = db.begin().unwrap();
            for k in 0..200i64 {
                let row = tx.get(&y.table, &k).unwrap().unwrap();
                for i in 0..3 {
                    let v = row.get(1 + i).unwrap().clone();
                    let mut found = Vec::new();
                    tx.get_by(&y.table, 1 + i, &[v][..], |r| {
                        found.push(r.i64(0).unwrap());
                        true
                    })
                    .unwrap();
                    assert!(
                        found.contains(&k),
                        "{layout:?}: row {k} not under index {i}"
                    );
                    assert_eq!(found.iter().filter(|&&f| f == k).count(), 1);
                }
            }
            tx.commit().unwrap();
        }
        let mut p = params(10, RowLayout::Int64x10);
        p.secondary_indexes = 11;
        assert!(p.validate().unwrap_err().contains("--secondary-indexes"));
    }

    /// `--attrs 100` rows: updates set exactly the planned attributes of the wide row (the
    /// column wraps past the last attribute); `--update-pct` decides the operation kinds.
    #[test]
    fn wide_rows_and_update_percentage() {
        for layout in [RowLayout::Int64x10, RowLayout::Bytes100x10] {
            let db = Database::open(Config::new()).unwrap();
            let mut p = params(100, layout);
            (p.attrs, p.attrs_modified, p.attrs_read, p.update_pct) = (100, 3, 2, Some(100));
            let y = Ycsb::create(&db, p).unwrap();
            y.load(&db, 1, 7, None).unwrap();
            let mut tx = db.begin().unwrap();
            let mut rows: Vec<Row> = (0..100i64)
                .map(|k| tx.get(&y.table, &k).unwrap().unwrap())
                .collect();
            tx.commit().unwrap();
            assert_eq!(rows[0].0.len(), 101);
            let mut w = y.worker(0, 9);
            let mut wrapped = false;
            for _ in 0..60 {
                assert_eq!(w.next_txn(), UPDATE_TXN);
                let plan = w.planner.plan.clone();
                assert!(plan.iter().all(|o| o.update));
                w.attempt(&db).unwrap();
                let mut tx = db.begin().unwrap();
                for op in &plan {
                    let row = tx.get(&y.table, &op.key).unwrap().unwrap();
                    let set: Vec<usize> = (0..3).map(|j| attr_col(op.attr, j, 100)).collect();
                    wrapped |= set.contains(&1) && set.contains(&100);
                    let old = &rows[op.key as usize];
                    for col in 1..=100 {
                        match set.iter().position(|&c| c == col) {
                            None => assert_eq!(row[col], old[col], "{layout:?} col {col}"),
                            Some(j) if layout == RowLayout::Int64x10 => {
                                let want = op.value.wrapping_add(j as u64) as i64;
                                assert_eq!(row[col], Value::Int(want));
                            }
                            Some(_) => {}
                        }
                    }
                    rows[op.key as usize] = row;
                }
                tx.commit().unwrap();
            }
            assert!(wrapped, "no update wrapped past the 100th attribute");
        }
        let mut p = params(100, RowLayout::Int64x10);
        p.update_pct = Some(0);
        let db = Database::open(Config::new()).unwrap();
        let y = Ycsb::create(&db, p).unwrap();
        let mut w = y.worker(0, 1);
        assert!((0..50).all(|_| w.next_txn() == READ_ONLY_TXN));
        let mut p = params(100, RowLayout::Int64x10);
        p.update_pct = Some(30);
        let y = Ycsb::create(&Database::open(Config::new()).unwrap(), p).unwrap();
        let mut w = y.worker(0, 1);
        let (mut ups, mut ops) = (0, 0);
        for _ in 0..200 {
            w.next_txn();
            ups += w.planner.plan.iter().filter(|o| o.update).count();
            ops += w.planner.plan.len();
        }
        let pct = ups * 100 / ops;
        assert!(
            (25..=35).contains(&pct),
            "{pct}% updates for --update-pct 30"
        );
    }

    /// `--writes-per-txn W`: exactly W updates per transaction, the last W operations; more
    /// than `--ops` is refused naming the flag.
    #[test]
    fn writes_per_txn_makes_exactly_that_many_updates() {
        let mut p = params(1000, RowLayout::Int64x10);
        (p.ops, p.writes_per_txn) = (12, Some(2));
        let keygen = KeyGen::new(p.key_dist, p.rows, p.theta);
        let mut planner = Planner::new(&p, &keygen, 0, 7);
        for _ in 0..100 {
            planner.next_txn();
            let updates: Vec<bool> = planner.plan.iter().map(|o| o.update).collect();
            assert_eq!(updates.iter().filter(|&&u| u).count(), 2);
            assert!(updates[10] && updates[11]);
        }
        assert_eq!(p.read_percent(), 83);
        p.writes_per_txn = Some(13);
        assert!(p.validate().unwrap_err().contains("--writes-per-txn"));
    }

    #[test]
    fn validate_names_the_flag() {
        let mut p = params(10, RowLayout::Int64x10);
        p.ops = 11;
        assert!(p.validate().unwrap_err().contains("--ops"));
        p.distinct_keys = false;
        assert!(p.validate().is_ok());
        p.theta = 1.0;
        assert!(p.validate().unwrap_err().contains("--theta"));
        p.theta = 0.5;
        p.attrs_read = 11;
        assert!(p.validate().unwrap_err().contains("--attrs-read"));
        p.attrs = 20;
        assert!(p.validate().is_ok());
        p.attrs = 101;
        assert!(p.validate().unwrap_err().contains("--attrs "));
        p.attrs = 20;
        p.update_pct = Some(101);
        assert!(p.validate().unwrap_err().contains("--update-pct"));
    }
}
