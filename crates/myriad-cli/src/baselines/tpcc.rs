//! TPC-C on SQLite, written against SQL from the host side: the five transactions of
//! `workloads/tpcc.sql` as the same statements in the same order, each one prepared SQL
//! statement, inside one SQLite transaction (`BEGIN IMMEDIATE` for New-Order, Payment and
//! Delivery, deferred `BEGIN` for Order-Status and Stock-Level).
//!
//! The same inputs as Myriad's run: the initial database is Myriad's own load (`Tpcc::load`
//! into an in-memory Myriad database, then copied table by table into SQLite, so every row is
//! the one Myriad loads for the seed), and worker `i` draws its transactions with Myriad's
//! `TpccWorker` (the same generator, home warehouse, NURand constants and mix), reading the
//! drawn inputs back from it instead of running its procedures. The 1% New-Order on an unused
//! item rolls back and is a user abort, as in Myriad.
//!
//! The same consistency checks: after the run (with `--check`) the SQLite tables are copied
//! back into a fresh Myriad database with the TPC-C schema and checked by
//! `workload::tpcc::check_tables`, the code that checks a Myriad run.
//!
//! Two differences, both said in the fidelity block: Delivery scans a district's `new_order`
//! from its first key (SQLite removes a deleted row's entry, so Myriad's lower-bound hint is
//! not needed), and `--stock-scan-threads` is refused (exit 2).

use super::run::{self, BaselineArgs, BaselineWorker, Failure};
use super::sqlite::{self, in_txn, SqliteDb};
use super::Engine;
use crate::workload::tpcc::{
    check_tables, Params, Tables, Tpcc, TpccWorker, DELIVERY, DISTRICTS, EPOCH_S, NEW_ORDER,
    ORDER_STATUS, PAYMENT, STOCK_LEVEL, TXN_TYPES,
};
use crate::workload::Worker as _;
use myriad::{Config, Database, TableRef, Value};
use rusqlite::types::ValueRef as SqlRef;
use rusqlite::{Connection, OptionalExtension};
use serde_json::json;
use std::hint::black_box;
use std::process::ExitCode;
use std::time::Instant;

/// The tables, in `workloads/tpcc.sql`'s column order, and the two secondary indexes.
const SCHEMA: &str = "
CREATE TABLE warehouse (w_id INTEGER PRIMARY KEY, w_name TEXT, w_street_1 TEXT, w_street_2 TEXT,
  w_city TEXT, w_state TEXT, w_zip TEXT, w_tax INTEGER, w_ytd INTEGER);
CREATE TABLE district (d_w_id INTEGER, d_id INTEGER, d_name TEXT, d_street_1 TEXT,
  d_street_2 TEXT, d_city TEXT, d_state TEXT, d_zip TEXT, d_tax INTEGER, d_ytd INTEGER,
  d_next_o_id INTEGER, PRIMARY KEY (d_w_id, d_id)) WITHOUT ROWID;
CREATE TABLE customer (c_w_id INTEGER, c_d_id INTEGER, c_id INTEGER, c_first TEXT,
  c_middle TEXT, c_last TEXT, c_street_1 TEXT, c_street_2 TEXT, c_city TEXT, c_state TEXT,
  c_zip TEXT, c_phone TEXT, c_since INTEGER, c_credit TEXT, c_credit_lim INTEGER,
  c_discount INTEGER, c_balance INTEGER, c_ytd_payment INTEGER, c_payment_cnt INTEGER,
  c_delivery_cnt INTEGER, c_data TEXT, PRIMARY KEY (c_w_id, c_d_id, c_id)) WITHOUT ROWID;
CREATE INDEX customer_by_name ON customer (c_w_id, c_d_id, c_last, c_first);
CREATE TABLE history (h_id INTEGER PRIMARY KEY, h_c_id INTEGER, h_c_d_id INTEGER,
  h_c_w_id INTEGER, h_d_id INTEGER, h_w_id INTEGER, h_date INTEGER, h_amount INTEGER,
  h_data TEXT);
CREATE TABLE new_order (no_w_id INTEGER, no_d_id INTEGER, no_o_id INTEGER,
  PRIMARY KEY (no_w_id, no_d_id, no_o_id)) WITHOUT ROWID;
CREATE TABLE orders (o_w_id INTEGER, o_d_id INTEGER, o_id INTEGER, o_c_id INTEGER,
  o_entry_d INTEGER, o_carrier_id INTEGER, o_ol_cnt INTEGER, o_all_local INTEGER,
  PRIMARY KEY (o_w_id, o_d_id, o_id)) WITHOUT ROWID;
CREATE INDEX orders_by_customer ON orders (o_w_id, o_d_id, o_c_id, o_id);
CREATE TABLE order_line (ol_w_id INTEGER, ol_d_id INTEGER, ol_o_id INTEGER,
  ol_number INTEGER, ol_i_id INTEGER, ol_supply_w_id INTEGER, ol_delivery_d INTEGER,
  ol_quantity INTEGER, ol_amount INTEGER, ol_dist_info TEXT,
  PRIMARY KEY (ol_w_id, ol_d_id, ol_o_id, ol_number)) WITHOUT ROWID;
CREATE TABLE item (i_id INTEGER PRIMARY KEY, i_im_id INTEGER, i_name TEXT, i_price INTEGER,
  i_data TEXT);
CREATE TABLE stock (s_w_id INTEGER, s_i_id INTEGER, s_quantity INTEGER, s_dist_01 TEXT,
  s_dist_02 TEXT, s_dist_03 TEXT, s_dist_04 TEXT, s_dist_05 TEXT, s_dist_06 TEXT,
  s_dist_07 TEXT, s_dist_08 TEXT, s_dist_09 TEXT, s_dist_10 TEXT, s_ytd INTEGER,
  s_order_cnt INTEGER, s_remote_cnt INTEGER, s_data TEXT,
  PRIMARY KEY (s_w_id, s_i_id)) WITHOUT ROWID;
";

/// Every table with its handle in a Myriad database holding the TPC-C schema.
fn tables(t: &Tables) -> [(&'static str, &TableRef); 9] {
    [
        ("warehouse", &t.warehouse),
        ("district", &t.district),
        ("customer", &t.customer),
        ("history", &t.history),
        ("new_order", &t.new_order),
        ("orders", &t.orders),
        ("order_line", &t.order_line),
        ("item", &t.item),
        ("stock", &t.stock),
    ]
}

fn myriad_err(e: myriad::Error) -> String {
    format!("myriad: {e}")
}

/// Copies every row of Myriad's loaded tables into SQLite, one transaction per table.
fn copy_in(db: &Database, t: &Tables, c: &mut Connection) -> Result<(), String> {
    for (name, table) in tables(t) {
        let mut rows = Vec::new();
        let mut tx = db.begin().map_err(myriad_err)?;
        tx.scan_table(table, |r| {
            rows.push(r.to_row());
            true
        })
        .map_err(myriad_err)?;
        tx.commit().map_err(myriad_err)?;
        let Some(first) = rows.first() else { continue };
        let marks: Vec<String> = (1..=first.0.len()).map(|i| format!("?{i}")).collect();
        let stx = c.transaction().map_err(sqlite::fatal)?;
        {
            let mut st = stx
                .prepare(&format!("INSERT INTO {name} VALUES ({})", marks.join(", ")))
                .map_err(sqlite::fatal)?;
            for row in &rows {
                for (i, v) in row.0.iter().enumerate() {
                    match v {
                        Value::Int(x) => st.raw_bind_parameter(i + 1, x),
                        Value::Str(s) => st.raw_bind_parameter(i + 1, s.as_str()),
                        v => return Err(format!("{name}: a value of an unexpected type: {v:?}")),
                    }
                    .map_err(sqlite::fatal)?;
                }
                st.raw_execute().map_err(sqlite::fatal)?;
            }
        }
        stx.commit().map_err(sqlite::fatal)?;
    }
    Ok(())
}

/// Copies SQLite's tables into a fresh Myriad database with the TPC-C schema and checks
/// consistency conditions 1–4 there; returns the violations.
fn check(c: &Connection, params: &Params, seed: u64) -> Result<Vec<String>, String> {
    let db = Database::open(Config::new()).map_err(myriad_err)?;
    let t = Tpcc::create(&db, params.clone(), seed).map_err(myriad_err)?;
    for (name, table) in tables(&t.tables) {
        let mut st = c
            .prepare(&format!("SELECT * FROM {name}"))
            .map_err(sqlite::fatal)?;
        let cols = st.column_count();
        let mut rows = st.query([]).map_err(sqlite::fatal)?;
        let mut tx = db.begin().map_err(myriad_err)?;
        let mut row = Vec::with_capacity(cols);
        while let Some(r) = rows.next().map_err(sqlite::fatal)? {
            row.clear();
            for i in 0..cols {
                row.push(match r.get_ref(i).map_err(sqlite::fatal)? {
                    SqlRef::Integer(x) => Value::Int(x),
                    SqlRef::Text(s) => Value::Str(String::from_utf8_lossy(s).into_owned()),
                    v => return Err(format!("{name}: a value of an unexpected type: {v:?}")),
                });
            }
            tx.insert(table, &row).map_err(myriad_err)?;
        }
        tx.commit().map_err(myriad_err)?;
    }
    check_tables(&db, &t.tables, params.no_inserts).map_err(myriad_err)
}

struct Worker<'a> {
    w: TpccWorker<'a>,
    /// The drawn transaction's type.
    ty: usize,
    c: Connection,
    params: &'a Params,
}

/// A statement's error: busy/locked is an abort to retry, anything else fatal.
fn sql<T>(r: rusqlite::Result<T>) -> Result<T, Failure> {
    r.map_err(sqlite::failure)
}

/// The single row `q` returns for `p` (fatal if there is none: the load made it).
fn one<T>(
    c: &Connection,
    q: &str,
    p: impl rusqlite::Params,
    f: impl FnOnce(&rusqlite::Row<'_>) -> rusqlite::Result<T>,
) -> Result<T, Failure> {
    sql(sql(c.prepare_cached(q))?.query_row(p, f).optional())?
        .ok_or_else(|| Failure::Fatal(format!("sqlite: no row for `{q}`")))
}

fn exec(c: &Connection, q: &str, p: impl rusqlite::Params) -> Result<(), Failure> {
    sql(sql(c.prepare_cached(q))?.execute(p)).map(|_| ())
}

/// Payment's and Order-Status's customer by last name: the one at position ceil(n / 2) of
/// the n customers of that name in c_first order.
fn customer_by_name(c: &Connection, w: i64, d: i64, name: &str) -> Result<i64, Failure> {
    let n: i64 = one(
        c,
        "SELECT count(*) FROM customer WHERE c_w_id = ?1 AND c_d_id = ?2 AND c_last = ?3",
        rusqlite::params![w, d, name],
        |r| r.get(0),
    )?;
    if n == 0 {
        return Err(Failure::Fatal(format!("no customer named {name}")));
    }
    one(
        c,
        "SELECT c_id FROM customer WHERE c_w_id = ?1 AND c_d_id = ?2 AND c_last = ?3 \
         ORDER BY c_first LIMIT 1 OFFSET ?4",
        rusqlite::params![w, d, name, (n + 1) / 2 - 1],
        |r| r.get(0),
    )
}

impl Worker<'_> {
    fn new_order(&self, c: &Connection) -> Result<(), Failure> {
        let w = &self.w;
        let (home, d, cust) = (w.home, w.drawn.d, w.drawn.c);
        let inserts = !self.params.no_inserts;
        let w_tax: i64 = one(
            c,
            "SELECT w_tax FROM warehouse WHERE w_id = ?1",
            [home],
            |r| r.get(0),
        )?;
        let (d_tax, o_id): (i64, i64) = one(
            c,
            "SELECT d_tax, d_next_o_id FROM district WHERE d_w_id = ?1 AND d_id = ?2",
            [home, d],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )?;
        exec(
            c,
            "UPDATE district SET d_next_o_id = ?3 WHERE d_w_id = ?1 AND d_id = ?2",
            [home, d, o_id + 1],
        )?;
        let discount: i64 = one(
            c,
            "SELECT c_discount, c_last, c_credit FROM customer \
             WHERE c_w_id = ?1 AND c_d_id = ?2 AND c_id = ?3",
            [home, d, cust],
            |r| {
                black_box((r.get_ref(1)?, r.get_ref(2)?));
                r.get(0)
            },
        )?;
        let n = w.items.len() as i64;
        if inserts {
            exec(
                c,
                "INSERT INTO orders VALUES (?1, ?2, ?3, ?4, ?5, 0, ?6, ?7)",
                [
                    home,
                    d,
                    o_id,
                    cust,
                    EPOCH_S + w.txns,
                    n,
                    w.drawn.all_local as i64,
                ],
            )?;
            exec(
                c,
                "INSERT INTO new_order VALUES (?1, ?2, ?3)",
                [home, d, o_id],
            )?;
        }
        let stock_q = format!(
            "SELECT s_quantity, s_dist_{d:02} FROM stock WHERE s_w_id = ?1 AND s_i_id = ?2"
        );
        let mut total = 0i64;
        for (i, ((&item, &supply), &qty)) in
            w.items.iter().zip(&w.supply).zip(&w.quantities).enumerate()
        {
            let price: Option<i64> = sql(sql(
                c.prepare_cached("SELECT i_price, i_name, i_data FROM item WHERE i_id = ?1")
            )?
            .query_row([item], |r| {
                black_box((r.get_ref(1)?, r.get_ref(2)?));
                r.get(0)
            })
            .optional())?;
            let Some(price) = price else {
                // The drawn 1% rollback: a user abort. Any other missing item is a bug.
                return Err(if w.rollback {
                    Failure::UserAbort
                } else {
                    Failure::Fatal(format!("item {item} not found"))
                });
            };
            let (s_qty, dist): (i64, String) =
                one(c, &stock_q, [supply, item], |r| Ok((r.get(0)?, r.get(1)?)))?;
            let s_qty = if s_qty >= qty + 10 {
                s_qty - qty
            } else {
                s_qty - qty + 91
            };
            exec(
                c,
                "UPDATE stock SET s_quantity = ?3, s_ytd = s_ytd + ?4, \
                 s_order_cnt = s_order_cnt + 1, s_remote_cnt = s_remote_cnt + ?5 \
                 WHERE s_w_id = ?1 AND s_i_id = ?2",
                [supply, item, s_qty, qty, (supply != home) as i64],
            )?;
            let amount = qty * price;
            total += amount;
            if inserts {
                exec(
                    c,
                    "INSERT INTO order_line VALUES (?1, ?2, ?3, ?4, ?5, ?6, 0, ?7, ?8, ?9)",
                    rusqlite::params![home, d, o_id, i as i64 + 1, item, supply, qty, amount, dist],
                )?;
            }
        }
        black_box(total * (10_000 - discount) * (10_000 + w_tax + d_tax) / 100_000_000);
        Ok(())
    }

    fn payment(&self, c: &Connection) -> Result<(), Failure> {
        let w = &self.w;
        let x = w.drawn;
        let (home, d, amount) = (w.home, x.d, x.amount);
        exec(
            c,
            "UPDATE warehouse SET w_ytd = w_ytd + ?2 WHERE w_id = ?1",
            [home, amount],
        )?;
        let w_name: String = one(
            c,
            "SELECT w_name FROM warehouse WHERE w_id = ?1",
            [home],
            |r| r.get(0),
        )?;
        exec(
            c,
            "UPDATE district SET d_ytd = d_ytd + ?3 WHERE d_w_id = ?1 AND d_id = ?2",
            [home, d, amount],
        )?;
        let d_name: String = one(
            c,
            "SELECT d_name FROM district WHERE d_w_id = ?1 AND d_id = ?2",
            [home, d],
            |r| r.get(0),
        )?;
        let cust = if x.by_name {
            customer_by_name(c, x.c_w, x.c_d, &w.name)?
        } else {
            x.c
        };
        let (credit, balance): (String, i64) = one(
            c,
            "SELECT c_credit, c_balance FROM customer WHERE c_w_id = ?1 AND c_d_id = ?2 AND c_id = ?3",
            [x.c_w, x.c_d, cust],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )?;
        if credit == "BC" {
            let data: String = one(
                c,
                "SELECT c_data FROM customer WHERE c_w_id = ?1 AND c_d_id = ?2 AND c_id = ?3",
                [x.c_w, x.c_d, cust],
                |r| r.get(0),
            )?;
            let mut new = format!("{cust} {} {} {d} {home} {amount} {data}", x.c_d, x.c_w);
            // ASCII only (the load's a-strings and these numbers): 500 characters.
            new.truncate(500);
            exec(
                c,
                "UPDATE customer SET c_balance = c_balance - ?4, \
                 c_ytd_payment = c_ytd_payment + ?4, c_payment_cnt = c_payment_cnt + 1, \
                 c_data = ?5 WHERE c_w_id = ?1 AND c_d_id = ?2 AND c_id = ?3",
                rusqlite::params![x.c_w, x.c_d, cust, amount, new],
            )?;
        } else {
            exec(
                c,
                "UPDATE customer SET c_balance = c_balance - ?4, \
                 c_ytd_payment = c_ytd_payment + ?4, c_payment_cnt = c_payment_cnt + 1 \
                 WHERE c_w_id = ?1 AND c_d_id = ?2 AND c_id = ?3",
                [x.c_w, x.c_d, cust, amount],
            )?;
        }
        if !self.params.no_inserts {
            exec(
                c,
                "INSERT INTO history VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                rusqlite::params![
                    w.h_seq,
                    cust,
                    x.c_d,
                    x.c_w,
                    d,
                    home,
                    EPOCH_S + w.txns,
                    amount,
                    format!("{w_name}    {d_name}")
                ],
            )?;
        }
        black_box(balance - amount);
        Ok(())
    }

    fn order_status(&self, c: &Connection) -> Result<(), Failure> {
        let w = &self.w;
        let (home, d) = (w.home, w.drawn.d);
        let cust = if w.drawn.by_name {
            customer_by_name(c, home, d, &w.name)?
        } else {
            w.drawn.c
        };
        let balance: i64 = one(
            c,
            "SELECT c_balance, c_first FROM customer WHERE c_w_id = ?1 AND c_d_id = ?2 AND c_id = ?3",
            [home, d, cust],
            |r| {
                black_box(r.get_ref(1)?);
                r.get(0)
            },
        )?;
        let o_id: Option<i64> = sql(sql(c.prepare_cached(
            "SELECT o_id, o_entry_d, o_carrier_id FROM orders \
             WHERE o_w_id = ?1 AND o_d_id = ?2 AND o_c_id = ?3 ORDER BY o_id DESC LIMIT 1",
        ))?
        .query_row([home, d, cust], |r| {
            black_box((r.get_ref(1)?, r.get_ref(2)?));
            r.get(0)
        })
        .optional())?;
        let (mut lines, mut total) = (0i64, 0i64);
        if let Some(o) = o_id {
            let mut st = sql(c.prepare_cached(
                "SELECT ol_amount FROM order_line WHERE ol_w_id = ?1 AND ol_d_id = ?2 AND ol_o_id = ?3",
            ))?;
            let mut rows = sql(st.query([home, d, o]))?;
            while let Some(r) = sql(rows.next())? {
                lines += 1;
                total += sql(r.get::<_, i64>(0))?;
            }
        }
        black_box((balance, lines, total));
        Ok(())
    }

    fn delivery(&self, c: &Connection) -> Result<(), Failure> {
        let w = &self.w;
        let (home, carrier, date) = (w.home, w.drawn.carrier, EPOCH_S + w.txns);
        for d in 1..=DISTRICTS {
            let o: Option<i64> = sql(sql(c.prepare_cached(
                "SELECT no_o_id FROM new_order WHERE no_w_id = ?1 AND no_d_id = ?2 \
                 ORDER BY no_o_id LIMIT 1",
            ))?
            .query_row([home, d], |r| r.get(0))
            .optional())?;
            let Some(o) = o else { continue };
            if !self.params.no_inserts {
                exec(
                    c,
                    "DELETE FROM new_order WHERE no_w_id = ?1 AND no_d_id = ?2 AND no_o_id = ?3",
                    [home, d, o],
                )?;
            }
            let (cust, cnt): (i64, i64) = one(
                c,
                "SELECT o_c_id, o_ol_cnt FROM orders WHERE o_w_id = ?1 AND o_d_id = ?2 AND o_id = ?3",
                [home, d, o],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )?;
            exec(
                c,
                "UPDATE orders SET o_carrier_id = ?4 WHERE o_w_id = ?1 AND o_d_id = ?2 AND o_id = ?3",
                [home, d, o, carrier],
            )?;
            let mut total = 0i64;
            for i in 1..=cnt {
                total += one::<i64>(
                    c,
                    "SELECT ol_amount FROM order_line \
                     WHERE ol_w_id = ?1 AND ol_d_id = ?2 AND ol_o_id = ?3 AND ol_number = ?4",
                    [home, d, o, i],
                    |r| r.get(0),
                )?;
                exec(
                    c,
                    "UPDATE order_line SET ol_delivery_d = ?5 \
                     WHERE ol_w_id = ?1 AND ol_d_id = ?2 AND ol_o_id = ?3 AND ol_number = ?4",
                    [home, d, o, i, date],
                )?;
            }
            exec(
                c,
                "UPDATE customer SET c_balance = c_balance + ?4, c_delivery_cnt = c_delivery_cnt + 1 \
                 WHERE c_w_id = ?1 AND c_d_id = ?2 AND c_id = ?3",
                [home, d, cust, total],
            )?;
        }
        Ok(())
    }

    fn stock_level(&self, c: &Connection) -> Result<(), Failure> {
        let w = &self.w;
        let (home, d, threshold) = (w.home, w.drawn.d, w.drawn.threshold);
        let next: i64 = one(
            c,
            "SELECT d_next_o_id FROM district WHERE d_w_id = ?1 AND d_id = ?2",
            [home, d],
            |r| r.get(0),
        )?;
        let mut st = sql(c.prepare_cached(
            "SELECT ol_i_id FROM order_line \
             WHERE ol_w_id = ?1 AND ol_d_id = ?2 AND ol_o_id >= ?3 AND ol_o_id < ?4",
        ))?;
        let mut rows = sql(st.query([home, d, next - 20, next]))?;
        let mut low: Vec<i64> = Vec::new();
        while let Some(r) = sql(rows.next())? {
            let item: i64 = sql(r.get(0))?;
            let q: i64 = one(
                c,
                "SELECT s_quantity FROM stock WHERE s_w_id = ?1 AND s_i_id = ?2",
                [home, item],
                |r| r.get(0),
            )?;
            if q < threshold && !low.contains(&item) {
                low.push(item);
            }
        }
        black_box(low.len());
        Ok(())
    }
}

impl BaselineWorker for Worker<'_> {
    fn next_txn(&mut self) -> usize {
        self.ty = self.w.next_txn();
        self.ty
    }

    fn attempt(&mut self) -> Result<(), Failure> {
        let ty = self.ty;
        let this = &*self;
        in_txn(
            &self.c,
            !matches!(ty, ORDER_STATUS | STOCK_LEVEL),
            |c| match ty {
                NEW_ORDER => this.new_order(c),
                PAYMENT => this.payment(c),
                ORDER_STATUS => this.order_status(c),
                DELIVERY => this.delivery(c),
                STOCK_LEVEL => this.stock_level(c),
                _ => Err(Failure::Fatal(format!(
                    "sqlite: transaction type {} is not run on a baseline",
                    TXN_TYPES[ty]
                ))),
            },
        )
    }
}

/// `myriad bench tpcc --engine sqlite`: loads Myriad's initial database into SQLite, runs,
/// checks (with `check`) and reports like the Myriad run. Exit 1 on a fatal error or a failed
/// check.
pub fn bench_tpcc(
    engine: Engine,
    params: Params,
    threads: usize,
    check_after: bool,
    a: BaselineArgs,
) -> ExitCode {
    let json_out = run::prepare(engine, &a);
    let ran = if engine == Engine::Sqlite {
        run_sqlite(&params, threads, check_after, &a)
    } else {
        Err(format!(
            "--engine {}: TPC-C runs on myriad and sqlite only",
            engine.name()
        ))
    };
    let (report, failed) = match ran {
        Ok(r) => r,
        Err(m) => return crate::fatal(engine.name(), m),
    };
    crate::bench::command::emit_report(&report, json_out, a.latency_histogram, failed, "tpcc")
}

fn run_sqlite(
    params: &Params,
    threads: usize,
    check_after: bool,
    a: &BaselineArgs,
) -> Result<(crate::bench::report::Report, Option<String>), String> {
    let load_start = Instant::now();
    // Myriad's load, in memory; its workers then draw the transactions.
    let mdb = Database::open(Config::new()).map_err(myriad_err)?;
    let t = Tpcc::create(&mdb, params.clone(), a.seed).map_err(myriad_err)?;
    t.load(&mdb, threads, a.seed, None).map_err(myriad_err)?;
    // About 1 KiB per stock and customer row: room for a warehouse's tables.
    let cache_kib = (params.warehouses as u64).saturating_mul(600 << 10);
    let db = SqliteDb::open(
        "tpcc",
        a.data_dir.as_deref(),
        a.fsync_always,
        cache_kib,
        64,
        SCHEMA,
    )?;
    copy_in(&mdb, &t.tables, &mut db.connect()?).map_err(|m| format!("loading: {m}"))?;
    let load_s = load_start.elapsed().as_secs_f64();
    let result = run::run(threads, TXN_TYPES, a, |i| {
        Ok(Worker {
            w: t.worker(i, threads, a.seed),
            ty: 0,
            c: db.connect()?,
            params,
        })
    })
    .map_err(|m| format!("running tpcc on sqlite: {m}"))?;
    let mut results = Vec::new();
    let mut failed = None;
    if check_after {
        let bad = check(&db.connect()?, params, a.seed).map_err(|m| format!("checking: {m}"))?;
        results.push((
            "check",
            json!(if bad.is_empty() {
                "ok: TPC-C consistency conditions 1-4 hold".to_string()
            } else {
                let m = bad.join("; ");
                failed = Some(m.clone());
                format!("FAILED: {m}")
            }),
        ));
    }
    let mut workload = t.fidelity(0);
    for (k, v) in workload.iter_mut() {
        if *k == "transactions" {
            *v = json!(
                "the five procedures of workloads/tpcc.sql written host-side as SQL statements \
                 (baselines/tpcc.rs); Delivery scans new_order from the district's first key"
            );
        }
    }
    workload.push((
        "load",
        json!("Myriad's load (in memory), copied into SQLite table by table; counted in load_s"),
    ));
    let fidelity = run::fidelity(workload, a, db.engine(), db.concurrency(), db.durability());
    let report = run::report(
        "tpcc", a, threads, load_s, TXN_TYPES, &result, results, fidelity,
    );
    Ok((report, failed))
}
