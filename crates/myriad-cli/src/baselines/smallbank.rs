//! Smallbank on a baseline engine. The loaded customers and the transactions are Myriad's: a
//! load chunk's balances come from the same generator (`Rng::new(seed, LOAD_STREAM | chunk)`,
//! `workload::smallbank::draw_balances`), and worker `i` draws its transactions with
//! `workload::smallbank::Drawn::next` from `Rng::new(seed, i)` and the same Zipfian, so the
//! types, customers and amounts are exactly those Myriad runs.
//!
//! The six procedures of `workloads/smallbank.sql` are written once, host-side, in [`execute`],
//! over a narrow per-transaction access ([`SbAccess`]: does a customer exist, read, set or add
//! to a balance), which each engine implements: SQLite with one prepared SQL statement per
//! access (`UPDATE checking SET bal = bal + ?2 ...`), redb and fjall with point reads and writes
//! of three tables (keyspaces) keyed by customer id. A procedure's `RAISE` (an unknown
//! customer, a payment checking cannot cover, a withdrawal savings cannot cover) rolls the
//! engine's transaction back and is a user abort, as in Myriad. Every transaction but Balance
//! may write (SQLite: `BEGIN IMMEDIATE`; redb: a write transaction); Balance is read-only.
//!
//! After the run the invariant of Myriad's `--check` is always checked: each table holds the
//! loaded customers, and the money in SAVINGS and CHECKING is what was loaded plus the net
//! change every committed call returned.

use super::fjall_engine::{self, FjallDb, FJALL_CONCURRENCY};
use super::redb_engine::{self, RedbDb, REDB_CONCURRENCY};
use super::run::{self, BaselineArgs, BaselineWorker, Failure};
use super::sqlite::{self, SqliteDb};
use super::Engine;
use crate::bench::report::Report;
use crate::workload::rng::Rng;
use crate::workload::smallbank::{
    check_money, customer_name, draw_balances, fidelity_of, Drawn, Params, AMALGAMATE, BALANCE,
    DEPOSIT_CHECKING, DEPOSIT_CHECKING_CENTS, LOAD_CHUNK, SEND_PAYMENT, SEND_PAYMENT_CENTS,
    TRANSACT_SAVINGS, TXN_TYPES, WRITE_CHECK_CENTS,
};
use crate::workload::zipf::GrayZipf;
use crate::workload::LOAD_STREAM;
use fjall::{OptimisticTxKeyspace, OptimisticWriteTx, Readable, Snapshot};
use redb::{ReadableDatabase, ReadableTable, ReadableTableMetadata, TableDefinition};
use rusqlite::{Connection, OptionalExtension};
use serde_json::json;
use std::hint::black_box;
use std::process::ExitCode;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Instant;

/// A balance table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Bal {
    Savings,
    Checking,
}

impl Bal {
    fn name(self) -> &'static str {
        match self {
            Bal::Savings => "savings",
            Bal::Checking => "checking",
        }
    }
}

/// What one Smallbank transaction does to an engine's tables.
pub(crate) trait SbAccess {
    /// Whether ACCOUNTS holds customer `id`.
    fn exists(&mut self, id: i64) -> Result<bool, Failure>;
    /// Customer `id`'s balance (fatal if the row is missing: the load made every one).
    fn get(&mut self, t: Bal, id: i64) -> Result<i64, Failure>;
    fn set(&mut self, t: Bal, id: i64, v: i64) -> Result<(), Failure>;
    /// `bal = bal + v`.
    fn add(&mut self, t: Bal, id: i64, v: i64) -> Result<(), Failure> {
        let b = self.get(t, id)?;
        self.set(t, id, b + v)
    }
}

/// A procedure's `RAISE` unless customer `id` exists.
fn need(a: &mut impl SbAccess, id: i64) -> Result<(), Failure> {
    if a.exists(id)? {
        Ok(())
    } else {
        Err(Failure::UserAbort)
    }
}

/// Runs the drawn procedure of `workloads/smallbank.sql` (the same statements in the same
/// order); returns the net change of money it RETURNs (0 for Balance, whose return is not a
/// change).
pub(crate) fn execute(d: &Drawn, a: &mut impl SbAccess) -> Result<i64, Failure> {
    let (c0, c1) = (d.c0, d.c1);
    match d.ty {
        AMALGAMATE => {
            need(a, c0)?;
            need(a, c1)?;
            let s = a.get(Bal::Savings, c0)?;
            let c = a.get(Bal::Checking, c0)?;
            a.set(Bal::Savings, c0, 0)?;
            a.set(Bal::Checking, c0, 0)?;
            a.add(Bal::Checking, c1, s + c)?;
            Ok(0)
        }
        BALANCE => {
            need(a, c0)?;
            let s = a.get(Bal::Savings, c0)?;
            let c = a.get(Bal::Checking, c0)?;
            black_box(s + c);
            Ok(0)
        }
        DEPOSIT_CHECKING => {
            let v = DEPOSIT_CHECKING_CENTS;
            need(a, c0)?;
            a.add(Bal::Checking, c0, v)?;
            Ok(v)
        }
        SEND_PAYMENT => {
            let v = SEND_PAYMENT_CENTS;
            need(a, c0)?;
            need(a, c1)?;
            if a.get(Bal::Checking, c0)? < v {
                return Err(Failure::UserAbort);
            }
            a.add(Bal::Checking, c0, -v)?;
            a.add(Bal::Checking, c1, v)?;
            Ok(0)
        }
        TRANSACT_SAVINGS => {
            let v = d.savings_cents;
            need(a, c0)?;
            if a.get(Bal::Savings, c0)? + v < 0 {
                return Err(Failure::UserAbort);
            }
            a.add(Bal::Savings, c0, v)?;
            Ok(v)
        }
        // write_check, the last type.
        _ => {
            let v = WRITE_CHECK_CENTS;
            need(a, c0)?;
            let s = a.get(Bal::Savings, c0)?;
            let c = a.get(Bal::Checking, c0)?;
            let charged = if s + c < v { v + 100 } else { v };
            a.add(Bal::Checking, c0, -charged)?;
            Ok(-charged)
        }
    }
}

/// A baseline engine holding the three Smallbank tables.
pub(crate) trait SbEngine: Sync {
    type Conn<'a>: SbConn
    where
        Self: 'a;
    fn connect(&self) -> Result<Self::Conn<'_>, String>;
    /// (the `engine` line, the `row_layout` line, the concurrency line).
    fn describe(&self) -> (String, String, String);
    fn durability(&self) -> String;
}

/// One thread's session with a baseline engine.
pub(crate) trait SbConn {
    /// Inserts customers `lo..` with their (savings, checking) balances in one transaction.
    fn load(&mut self, lo: i64, balances: &[(i64, i64)]) -> Result<(), String>;
    /// Runs the drawn transaction once and commits it; returns its net change of money.
    fn run(&mut self, d: &Drawn) -> Result<i64, Failure>;
    /// Rows in ACCOUNTS, SAVINGS and CHECKING, and the money in SAVINGS and CHECKING.
    fn summary(&mut self) -> Result<([i64; 3], i64), String>;
}

struct Worker<'a, C> {
    rng: Rng,
    zipf: &'a GrayZipf,
    d: Drawn,
    conn: C,
    /// Net change of this worker's commits; added to `committed` when dropped.
    delta_cents: i64,
    committed: &'a AtomicI64,
}

impl<C> Drop for Worker<'_, C> {
    fn drop(&mut self) {
        self.committed
            .fetch_add(self.delta_cents, Ordering::Relaxed);
    }
}

impl<C: SbConn> BaselineWorker for Worker<'_, C> {
    fn next_txn(&mut self) -> usize {
        self.d.next(&mut self.rng, self.zipf)
    }

    fn attempt(&mut self) -> Result<(), Failure> {
        self.delta_cents += self.conn.run(&self.d)?;
        Ok(())
    }
}

/// Loads the customers on one connection, a chunk per transaction; returns the money loaded.
fn load<E: SbEngine>(e: &E, accounts: u64, seed: u64) -> Result<i64, String> {
    let mut conn = e.connect()?;
    let mut cents = 0i64;
    let mut balances = Vec::with_capacity(LOAD_CHUNK as usize);
    for chunk in 0..accounts.div_ceil(LOAD_CHUNK) {
        let lo = chunk * LOAD_CHUNK;
        let hi = (lo + LOAD_CHUNK).min(accounts);
        let mut rng = Rng::new(seed, LOAD_STREAM | chunk);
        balances.clear();
        for _ in lo..hi {
            let (s, c) = draw_balances(&mut rng);
            cents += s + c;
            balances.push((s, c));
        }
        conn.load(lo as i64, &balances)?;
    }
    Ok(cents)
}

fn run_engine<E: SbEngine>(
    engine: Engine,
    e: &E,
    params: &Params,
    threads: usize,
    a: &BaselineArgs,
) -> Result<(Report, Option<String>), String> {
    let load_start = Instant::now();
    let loaded = load(e, params.accounts, a.seed).map_err(|m| format!("loading: {m}"))?;
    let load_s = load_start.elapsed().as_secs_f64();
    let zipf = GrayZipf::new(params.accounts, params.theta);
    let committed = AtomicI64::new(0);
    let result = run::run(threads, TXN_TYPES, a, |i| {
        Ok(Worker {
            rng: Rng::new(a.seed, i as u64),
            zipf: &zipf,
            d: Drawn::default(),
            conn: e.connect()?,
            delta_cents: 0,
            committed: &committed,
        })
    })
    .map_err(|m| format!("running smallbank on {}: {m}", engine.name()))?;
    // The workers are dropped: `committed` holds every commit's change.
    let delta = committed.load(Ordering::Relaxed);
    let (rows, total) = e
        .connect()?
        .summary()
        .map_err(|m| format!("checking: {m}"))?;
    let checked = check_money(params.accounts as i64, rows, total, loaded, delta);
    let failed = checked.as_ref().err().cloned();
    let results = vec![
        ("committed_delta_cents", json!(delta)),
        (
            "check",
            json!(match &checked {
                Ok(m) => format!("ok: {m}"),
                Err(m) => format!("FAILED: {m}"),
            }),
        ),
    ];
    let (what, rows, concurrency) = e.describe();
    let mut workload = fidelity_of(params);
    workload.push(("row_layout", json!(rows)));
    workload.push((
        "procedures",
        json!(
            "the six procedures of workloads/smallbank.sql written host-side (baselines/smallbank.rs), \
             one engine call per statement; balance read-only"
        ),
    ));
    let fidelity = run::fidelity(workload, a, what, concurrency, e.durability());
    let report = run::report(
        "smallbank",
        a,
        threads,
        load_s,
        TXN_TYPES,
        &result,
        results,
        fidelity,
    );
    Ok((report, failed))
}

/// `myriad bench smallbank --engine sqlite|redb|fjall`: loads, runs, checks the money and
/// reports like the Myriad run. Exit 1 on a fatal error or a failed check, 2 on a
/// configuration the engine cannot run.
pub fn bench_smallbank(
    engine: Engine,
    params: Params,
    threads: usize,
    a: BaselineArgs,
) -> ExitCode {
    let json_out = run::prepare(engine, &a);
    let dir = a.data_dir.as_deref();
    // Each table in the cache, as the other engines hold it in memory.
    let cache_bytes = params.accounts.saturating_mul(3 * 64);
    let ran = match engine {
        Engine::Sqlite => SqliteDb::open(
            "smallbank",
            dir,
            a.fsync_always,
            (cache_bytes / 1024).max(8 << 10),
            24,
            SQLITE_SCHEMA,
        )
        .and_then(|db| run_engine(engine, &SqliteSb(db), &params, threads, &a)),
        Engine::Redb => RedbDb::open("smallbank", dir, a.fsync_always)
            .and_then(RedbSb::new)
            .and_then(|e| run_engine(engine, &e, &params, threads, &a)),
        Engine::Fjall => FjallDb::open(dir, a.fsync_always, cache_bytes)
            .and_then(FjallSb::new)
            .and_then(|e| run_engine(engine, &e, &params, threads, &a)),
        Engine::Myriad => Err("--engine myriad is not a baseline".into()),
    };
    let (report, failed) = match ran {
        Ok(r) => r,
        Err(m) => return crate::fatal(engine.name(), m),
    };
    crate::bench::command::emit_report(&report, json_out, a.latency_histogram, failed, "smallbank")
}

// ---- SQLite: one prepared statement per access.

const SQLITE_SCHEMA: &str =
    "CREATE TABLE accounts (custid INTEGER PRIMARY KEY, name TEXT NOT NULL);
     CREATE TABLE savings (custid INTEGER PRIMARY KEY, bal INTEGER NOT NULL);
     CREATE TABLE checking (custid INTEGER PRIMARY KEY, bal INTEGER NOT NULL);";

struct SqliteSb(SqliteDb);

impl SbEngine for SqliteSb {
    type Conn<'a> = Connection;

    fn connect(&self) -> Result<Connection, String> {
        self.0.connect()
    }

    fn describe(&self) -> (String, String, String) {
        (
            self.0.engine(),
            "accounts(custid INTEGER PRIMARY KEY, name TEXT), savings and checking(custid \
             INTEGER PRIMARY KEY, bal INTEGER): B-trees on the customer id (rowid); one SQL \
             statement per statement of the procedure"
                .into(),
            self.0.concurrency(),
        )
    }

    fn durability(&self) -> String {
        self.0.durability()
    }
}

/// A statement's error: busy/locked is an abort to retry, anything else fatal.
fn sql<T>(r: rusqlite::Result<T>) -> Result<T, Failure> {
    r.map_err(sqlite::failure)
}

struct SqliteAccess<'a>(&'a Connection);

impl SbAccess for SqliteAccess<'_> {
    fn exists(&mut self, id: i64) -> Result<bool, Failure> {
        let mut st = sql(self
            .0
            .prepare_cached("SELECT 1 FROM accounts WHERE custid = ?1"))?;
        sql(st.exists([id]))
    }

    fn get(&mut self, t: Bal, id: i64) -> Result<i64, Failure> {
        let q = match t {
            Bal::Savings => "SELECT bal FROM savings WHERE custid = ?1",
            Bal::Checking => "SELECT bal FROM checking WHERE custid = ?1",
        };
        let mut st = sql(self.0.prepare_cached(q))?;
        sql(st.query_row([id], |r| r.get(0)).optional())?
            .ok_or_else(|| Failure::Fatal(format!("sqlite: {} has no customer {id}", t.name())))
    }

    fn set(&mut self, t: Bal, id: i64, v: i64) -> Result<(), Failure> {
        let q = match t {
            Bal::Savings => "UPDATE savings SET bal = ?2 WHERE custid = ?1",
            Bal::Checking => "UPDATE checking SET bal = ?2 WHERE custid = ?1",
        };
        self.update(q, t, id, v)
    }

    fn add(&mut self, t: Bal, id: i64, v: i64) -> Result<(), Failure> {
        let q = match t {
            Bal::Savings => "UPDATE savings SET bal = bal + ?2 WHERE custid = ?1",
            Bal::Checking => "UPDATE checking SET bal = bal + ?2 WHERE custid = ?1",
        };
        self.update(q, t, id, v)
    }
}

impl SqliteAccess<'_> {
    fn update(&mut self, q: &str, t: Bal, id: i64, v: i64) -> Result<(), Failure> {
        let mut st = sql(self.0.prepare_cached(q))?;
        match sql(st.execute([id, v]))? {
            1 => Ok(()),
            _ => Err(Failure::Fatal(format!(
                "sqlite: {} has no customer {id}",
                t.name()
            ))),
        }
    }
}

impl SbConn for Connection {
    fn load(&mut self, lo: i64, balances: &[(i64, i64)]) -> Result<(), String> {
        let tx = self.transaction().map_err(sqlite::fatal)?;
        {
            let mut name = String::new();
            let mut acc = tx
                .prepare_cached("INSERT INTO accounts VALUES (?1, ?2)")
                .map_err(sqlite::fatal)?;
            let mut sav = tx
                .prepare_cached("INSERT INTO savings VALUES (?1, ?2)")
                .map_err(sqlite::fatal)?;
            let mut chk = tx
                .prepare_cached("INSERT INTO checking VALUES (?1, ?2)")
                .map_err(sqlite::fatal)?;
            for (i, &(s, c)) in balances.iter().enumerate() {
                let id = lo + i as i64;
                customer_name(id, &mut name);
                acc.execute(rusqlite::params![id, name])
                    .map_err(sqlite::fatal)?;
                sav.execute([id, s]).map_err(sqlite::fatal)?;
                chk.execute([id, c]).map_err(sqlite::fatal)?;
            }
        }
        tx.commit().map_err(sqlite::fatal)
    }

    fn run(&mut self, d: &Drawn) -> Result<i64, Failure> {
        sqlite::in_txn(self, d.ty != BALANCE, |c| execute(d, &mut SqliteAccess(c)))
    }

    fn summary(&mut self) -> Result<([i64; 3], i64), String> {
        let q = |sql: &str| -> Result<i64, String> {
            self.query_row(sql, [], |r| r.get(0)).map_err(sqlite::fatal)
        };
        let rows = [
            q("SELECT count(*) FROM accounts")?,
            q("SELECT count(*) FROM savings")?,
            q("SELECT count(*) FROM checking")?,
        ];
        let total = q("SELECT coalesce(sum(bal), 0) FROM savings")?
            + q("SELECT coalesce(sum(bal), 0) FROM checking")?;
        Ok((rows, total))
    }
}

// ---- redb: three tables keyed by customer id.

const ACCOUNTS: TableDefinition<'static, u64, &str> = TableDefinition::new("accounts");
const SAVINGS: TableDefinition<'static, u64, i64> = TableDefinition::new("savings");
const CHECKING: TableDefinition<'static, u64, i64> = TableDefinition::new("checking");

/// The key-value engines' row layout line.
const KV_ROWS: &str = "three tables (accounts, savings, checking) from the customer id to its \
     name or its balance (an i64); one point read or write per statement of the procedure";

struct RedbSb(RedbDb);

impl RedbSb {
    fn new(db: RedbDb) -> Result<RedbSb, String> {
        let tx = db.begin_write()?;
        tx.open_table(ACCOUNTS).map_err(redb_engine::fatal)?;
        tx.open_table(SAVINGS).map_err(redb_engine::fatal)?;
        tx.open_table(CHECKING).map_err(redb_engine::fatal)?;
        tx.commit().map_err(redb_engine::fatal)?;
        Ok(RedbSb(db))
    }
}

impl SbEngine for RedbSb {
    type Conn<'a> = &'a RedbDb;

    fn connect(&self) -> Result<&RedbDb, String> {
        Ok(&self.0)
    }

    fn describe(&self) -> (String, String, String) {
        (self.0.engine(), KV_ROWS.into(), REDB_CONCURRENCY.into())
    }

    fn durability(&self) -> String {
        self.0.durability()
    }
}

/// The customer id as a key (ids are not negative).
#[inline]
fn kv_id(id: i64) -> u64 {
    id as u64
}

/// A write of a read-only transaction is a bug of this file.
fn read_only_write() -> Failure {
    Failure::Fatal("a write in a read-only transaction".into())
}

/// A balance table that can (`redb::Table`) or cannot (`ReadOnlyTable`) be written.
trait RedbBal: ReadableTable<u64, i64> {
    fn put(&mut self, id: u64, v: i64) -> Result<(), Failure>;
}

impl RedbBal for redb::Table<'_, u64, i64> {
    fn put(&mut self, id: u64, v: i64) -> Result<(), Failure> {
        self.insert(id, v).map_err(redb_engine::failure)?;
        Ok(())
    }
}

impl RedbBal for redb::ReadOnlyTable<u64, i64> {
    fn put(&mut self, _: u64, _: i64) -> Result<(), Failure> {
        Err(read_only_write())
    }
}

struct RedbAccess<A, B> {
    accounts: A,
    savings: B,
    checking: B,
}

impl<A: ReadableTable<u64, &'static str>, B: RedbBal> SbAccess for RedbAccess<A, B> {
    fn exists(&mut self, id: i64) -> Result<bool, Failure> {
        Ok(self
            .accounts
            .get(kv_id(id))
            .map_err(redb_engine::failure)?
            .is_some())
    }

    fn get(&mut self, t: Bal, id: i64) -> Result<i64, Failure> {
        let table = match t {
            Bal::Savings => &self.savings,
            Bal::Checking => &self.checking,
        };
        match table.get(kv_id(id)).map_err(redb_engine::failure)? {
            Some(v) => Ok(v.value()),
            None => Err(Failure::Fatal(format!(
                "redb: {} has no customer {id}",
                t.name()
            ))),
        }
    }

    fn set(&mut self, t: Bal, id: i64, v: i64) -> Result<(), Failure> {
        match t {
            Bal::Savings => self.savings.put(kv_id(id), v),
            Bal::Checking => self.checking.put(kv_id(id), v),
        }
    }
}

impl SbConn for &RedbDb {
    fn load(&mut self, lo: i64, balances: &[(i64, i64)]) -> Result<(), String> {
        let tx = self.begin_write()?;
        {
            let mut name = String::new();
            let mut acc = tx.open_table(ACCOUNTS).map_err(redb_engine::fatal)?;
            let mut sav = tx.open_table(SAVINGS).map_err(redb_engine::fatal)?;
            let mut chk = tx.open_table(CHECKING).map_err(redb_engine::fatal)?;
            for (i, &(s, c)) in balances.iter().enumerate() {
                let id = lo + i as i64;
                customer_name(id, &mut name);
                acc.insert(kv_id(id), name.as_str())
                    .map_err(redb_engine::fatal)?;
                sav.insert(kv_id(id), s).map_err(redb_engine::fatal)?;
                chk.insert(kv_id(id), c).map_err(redb_engine::fatal)?;
            }
        }
        tx.commit().map_err(redb_engine::fatal)
    }

    fn run(&mut self, d: &Drawn) -> Result<i64, Failure> {
        if d.ty == BALANCE {
            let tx = self.db.begin_read().map_err(redb_engine::failure)?;
            execute(
                d,
                &mut RedbAccess {
                    accounts: tx.open_table(ACCOUNTS).map_err(redb_engine::failure)?,
                    savings: tx.open_table(SAVINGS).map_err(redb_engine::failure)?,
                    checking: tx.open_table(CHECKING).map_err(redb_engine::failure)?,
                },
            )
        } else {
            // Dropping the transaction uncommitted (a user abort) rolls it back.
            let tx = self.begin_write().map_err(Failure::Fatal)?;
            let delta = execute(
                d,
                &mut RedbAccess {
                    accounts: tx.open_table(ACCOUNTS).map_err(redb_engine::failure)?,
                    savings: tx.open_table(SAVINGS).map_err(redb_engine::failure)?,
                    checking: tx.open_table(CHECKING).map_err(redb_engine::failure)?,
                },
            )?;
            tx.commit().map_err(redb_engine::failure)?;
            Ok(delta)
        }
    }

    fn summary(&mut self) -> Result<([i64; 3], i64), String> {
        let tx = self.db.begin_read().map_err(redb_engine::fatal)?;
        let acc = tx.open_table(ACCOUNTS).map_err(redb_engine::fatal)?;
        let mut rows = [acc.len().map_err(redb_engine::fatal)? as i64, 0, 0];
        let mut total = 0i64;
        for (k, def) in [SAVINGS, CHECKING].into_iter().enumerate() {
            let t = tx.open_table(def).map_err(redb_engine::fatal)?;
            for r in t.iter().map_err(redb_engine::fatal)? {
                let (_, v) = r.map_err(redb_engine::fatal)?;
                total += v.value();
                rows[k + 1] += 1;
            }
        }
        Ok((rows, total))
    }
}

// ---- fjall: three keyspaces keyed by the big-endian customer id.

struct FjallSb {
    db: FjallDb,
    /// accounts, savings, checking.
    ks: [OptimisticTxKeyspace; 3],
}

impl FjallSb {
    fn new(db: FjallDb) -> Result<FjallSb, String> {
        let ks = [
            db.keyspace("accounts")?,
            db.keyspace("savings")?,
            db.keyspace("checking")?,
        ];
        Ok(FjallSb { db, ks })
    }
}

impl SbEngine for FjallSb {
    type Conn<'a> = &'a FjallSb;

    fn connect(&self) -> Result<&FjallSb, String> {
        Ok(self)
    }

    fn describe(&self) -> (String, String, String) {
        (self.db.engine(), KV_ROWS.into(), FJALL_CONCURRENCY.into())
    }

    fn durability(&self) -> String {
        self.db.durability()
    }
}

/// A fjall transaction that can (`OptimisticWriteTx`) or cannot (`Snapshot`) write.
trait FjallTx: Readable {
    fn put(&mut self, ks: &OptimisticTxKeyspace, key: [u8; 8], v: i64) -> Result<(), Failure>;
}

impl FjallTx for OptimisticWriteTx {
    fn put(&mut self, ks: &OptimisticTxKeyspace, key: [u8; 8], v: i64) -> Result<(), Failure> {
        self.insert(ks, &key[..], &v.to_le_bytes()[..]);
        Ok(())
    }
}

impl FjallTx for Snapshot {
    fn put(&mut self, _: &OptimisticTxKeyspace, _: [u8; 8], _: i64) -> Result<(), Failure> {
        Err(read_only_write())
    }
}

struct FjallAccess<'a, T> {
    tx: &'a mut T,
    ks: &'a [OptimisticTxKeyspace; 3],
}

/// A balance table's keyspace.
fn bal_ks(ks: &[OptimisticTxKeyspace; 3], t: Bal) -> &OptimisticTxKeyspace {
    &ks[if t == Bal::Savings { 1 } else { 2 }]
}

impl<T: FjallTx> SbAccess for FjallAccess<'_, T> {
    fn exists(&mut self, id: i64) -> Result<bool, Failure> {
        self.tx
            .contains_key(&self.ks[0], (id as u64).to_be_bytes())
            .map_err(fjall_engine::failure)
    }

    fn get(&mut self, t: Bal, id: i64) -> Result<i64, Failure> {
        let v = self
            .tx
            .get(bal_ks(self.ks, t), (id as u64).to_be_bytes())
            .map_err(fjall_engine::failure)?
            .ok_or_else(|| Failure::Fatal(format!("fjall: {} has no customer {id}", t.name())))?;
        balance_of(&v).map_err(Failure::Fatal)
    }

    fn set(&mut self, t: Bal, id: i64, v: i64) -> Result<(), Failure> {
        self.tx
            .put(bal_ks(self.ks, t), (id as u64).to_be_bytes(), v)
    }
}

/// A stored balance (8 bytes, little-endian).
fn balance_of(v: &[u8]) -> Result<i64, String> {
    let b: [u8; 8] = v
        .try_into()
        .map_err(|_| format!("fjall: a balance of {} bytes", v.len()))?;
    Ok(i64::from_le_bytes(b))
}

impl SbConn for &FjallSb {
    fn load(&mut self, lo: i64, balances: &[(i64, i64)]) -> Result<(), String> {
        let mut tx = self.db.write_tx()?;
        let mut name = String::new();
        for (i, &(s, c)) in balances.iter().enumerate() {
            let id = lo + i as i64;
            let key = (id as u64).to_be_bytes();
            customer_name(id, &mut name);
            tx.insert(&self.ks[0], &key[..], name.as_bytes());
            tx.insert(&self.ks[1], &key[..], &s.to_le_bytes()[..]);
            tx.insert(&self.ks[2], &key[..], &c.to_le_bytes()[..]);
        }
        match tx.commit().map_err(fjall_engine::fatal)? {
            Ok(()) => Ok(()),
            Err(_) => Err("fjall: the load conflicted with itself".into()),
        }
    }

    fn run(&mut self, d: &Drawn) -> Result<i64, Failure> {
        if d.ty == BALANCE {
            let mut snap = self.db.db.read_tx();
            let ks = &self.ks;
            return execute(d, &mut FjallAccess { tx: &mut snap, ks });
        }
        // Dropping the transaction uncommitted (a user abort) rolls it back.
        let mut tx = self.db.write_tx().map_err(Failure::Fatal)?;
        let delta = execute(
            d,
            &mut FjallAccess {
                tx: &mut tx,
                ks: &self.ks,
            },
        )?;
        match tx.commit().map_err(fjall_engine::failure)? {
            Ok(()) => Ok(delta),
            Err(fjall::Conflict) => Err(Failure::Abort(myriad::AbortReason::ReadValidation)),
        }
    }

    fn summary(&mut self) -> Result<([i64; 3], i64), String> {
        let f = fjall_engine::fatal;
        let snap = self.db.db.read_tx();
        let mut rows = [0i64; 3];
        let mut total = 0i64;
        for (k, ks) in self.ks.iter().enumerate() {
            for g in snap.iter(ks) {
                let (_, v) = g.into_inner().map_err(f)?;
                rows[k] += 1;
                if k > 0 {
                    total += balance_of(&v)?;
                }
            }
        }
        Ok((rows, total))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::smallbank::Smallbank;
    use crate::workload::{query_int, Worker as _, Workload as _};
    use myriad::{Config, Database, Isolation};
    use std::collections::HashMap;

    /// The tables as maps: what `execute` does to them, without an engine.
    #[derive(Default)]
    struct Model {
        accounts: u64,
        bal: HashMap<(&'static str, i64), i64>,
    }

    impl SbAccess for Model {
        fn exists(&mut self, id: i64) -> Result<bool, Failure> {
            Ok((0..self.accounts as i64).contains(&id))
        }
        fn get(&mut self, t: Bal, id: i64) -> Result<i64, Failure> {
            self.bal
                .get(&(t.name(), id))
                .copied()
                .ok_or(Failure::Fatal(format!("no {id}")))
        }
        fn set(&mut self, t: Bal, id: i64, v: i64) -> Result<(), Failure> {
            self.bal.insert((t.name(), id), v);
            Ok(())
        }
    }

    /// The host-side procedures do what Myriad's SQL procedures do: on the same customers and
    /// the same draws, the same calls commit or abort, and every balance ends the same.
    #[test]
    fn host_side_procedures_match_myriads() {
        let (accounts, seed) = (10u64, 3u64);
        let params = Params {
            accounts,
            theta: 0.9,
            isolation: Isolation::Serializable,
            adhoc_pct: 0.0,
        };
        let db = Database::open(Config::new()).unwrap();
        let sb = Smallbank::create(&db, params.clone()).unwrap();
        sb.load(&db, 1, seed, None).unwrap();
        let mut model = Model {
            accounts,
            ..Model::default()
        };
        let mut rng = Rng::new(seed, LOAD_STREAM);
        for id in 0..accounts as i64 {
            let (s, c) = draw_balances(&mut rng);
            model.bal.insert(("savings", id), s);
            model.bal.insert(("checking", id), c);
        }
        let mut w = sb.worker(0, seed);
        let (mut d, mut rng) = (Drawn::default(), Rng::new(seed, 0));
        let zipf = GrayZipf::new(accounts, params.theta);
        let mut user_aborts = 0;
        for i in 0..3000 {
            let ty = w.next_txn();
            assert_eq!(d.next(&mut rng, &zipf), ty, "draw {i}");
            let mine = execute(&d, &mut model);
            match (w.attempt(&db), mine) {
                (Ok(_), Ok(_)) => {}
                (Err(myriad::Error::ProcedureAbort { .. }), Err(Failure::UserAbort)) => {
                    user_aborts += 1
                }
                (m, b) => panic!(
                    "draw {i} ({}): myriad {m:?}, host-side {b:?}",
                    TXN_TYPES[ty]
                ),
            }
        }
        assert!(user_aborts > 0);
        for id in 0..accounts as i64 {
            for t in ["savings", "checking"] {
                let got =
                    query_int(&db, &format!("SELECT bal FROM {t} WHERE custid = {id}")).unwrap();
                assert_eq!(got, model.bal[&(t, id)], "{t} of {id}");
            }
        }
    }
}
