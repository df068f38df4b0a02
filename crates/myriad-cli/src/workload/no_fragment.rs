//! POMVCC's New-Order fragment (seed `pomvcc-partial-order-mvcc.txt` §VII-B, Fig. 21):
//! `myriad bench tpcc --mix new-order-fragment`. The TPC-C tables it reads are loaded as for
//! the full mix (ITEM, WAREHOUSE, DISTRICT, STOCK: `Tpcc::load_stock_only`; the paper's
//! database has ITEM, STOCK and ORDER_LINE); every transaction is `no_fragment` (`workloads/tpcc-fragment.sql`): 5 to
//! 15 order lines, each an ITEM read, a STOCK read and update and an ORDER_LINE insert, with
//! the lines drawn as New-Order draws them (NURand item ids, 1% from a remote warehouse).
//! Two transactions conflict only when they update the same STOCK row, which is the
//! workload POMVCC's shared commit timestamps are measured on.

use super::rng::Rng;
use super::tpcc::{nurand, uniform, Tpcc, DISTRICTS};
use super::Workload;
use indicatif::ProgressBar;
use myriad::procedure::{CallFrame, Procedure};
use myriad::{Database, Result, TxnOptions, Value};
use serde_json::{json, Value as Json};
use std::sync::Arc;

/// The fragment's procedure, created on top of `tpcc.sql`.
pub const SQL: &str = include_str!("../../workloads/tpcc-fragment.sql");

/// The one transaction type.
pub const TXN_TYPES: &[&str] = &["no_fragment"];

/// Order ids of a worker start here, past any the load made (3,000 per district), and each
/// worker has its own range of 2^32 (`o = BASE + thread << 32 + n`).
const O_ID_BASE: i64 = 1 << 40;

/// The fragment over loaded TPC-C tables.
pub struct NoFragmentBench {
    pub t: Tpcc,
    proc: Arc<Procedure>,
}

impl NoFragmentBench {
    /// Creates the TPC-C tables and procedures, then the fragment's procedure.
    pub fn create(db: &Database, t: Tpcc) -> Result<NoFragmentBench> {
        myriad::sql::Session::new(db).execute(SQL)?;
        Ok(NoFragmentBench {
            t,
            proc: db.procedure("no_fragment")?,
        })
    }
}

impl Workload for NoFragmentBench {
    type Worker<'a> = NoFragmentWorker<'a>;

    fn txn_types(&self) -> &'static [&'static str] {
        TXN_TYPES
    }

    fn load_units(&self) -> (u64, &'static str) {
        (self.t.stock_rows_estimate(), "rows")
    }

    fn load(
        &self,
        db: &Database,
        threads: usize,
        seed: u64,
        progress: Option<&ProgressBar>,
    ) -> Result<()> {
        self.t.load_stock_only(db, threads, seed, progress)
    }

    fn worker(&self, thread: usize, seed: u64) -> NoFragmentWorker<'_> {
        let w = self.t.params.warehouses;
        NoFragmentWorker {
            b: self,
            rng: Rng::new(seed, thread as u64),
            home: thread as i64 % w + 1,
            frame: self.proc.frame(),
            next_o: O_ID_BASE + ((thread as i64) << 32),
            items: Vec::with_capacity(15),
            supply: Vec::with_capacity(15),
            quantities: Vec::with_capacity(15),
        }
    }

    fn fidelity(&self) -> Vec<(&'static str, Json)> {
        let p = &self.t.params;
        let (ol, _) = p.remote();
        vec![
            (
                "mix",
                json!("new-order-fragment: no_fragment 100% (POMVCC §VII-B, Fig. 21)"),
            ),
            ("warehouses", json!(p.warehouses)),
            (
                "loaded",
                json!(format!(
                    "ITEM ({} rows), WAREHOUSE, DISTRICT, STOCK ({} per warehouse); no customers, orders or order lines",
                    p.scale.items, p.scale.items
                )),
            ),
            (
                "lines",
                json!("5-15 per transaction (uniform), each: ITEM read, STOCK read + update, ORDER_LINE insert"),
            ),
            ("remote", json!(format!("{ol}% of order lines from another warehouse"))),
            ("inserts", json!(!p.no_inserts)),
            (
                "terminals",
                json!("each worker thread draws for home warehouse (thread mod W) + 1; order ids unique per thread, no DISTRICT counter"),
            ),
            (
                "transactions",
                json!(format!(
                    "stored procedure no_fragment (workloads/tpcc-fragment.sql), {}",
                    super::procedures_run(std::slice::from_ref(&self.proc))
                )),
            ),
        ]
    }
}

/// One thread of the fragment workload.
pub struct NoFragmentWorker<'a> {
    b: &'a NoFragmentBench,
    rng: Rng,
    home: i64,
    frame: CallFrame,
    /// The order id of this thread's next transaction.
    next_o: i64,
    items: Vec<i64>,
    supply: Vec<i64>,
    quantities: Vec<i64>,
}

impl super::Worker for NoFragmentWorker<'_> {
    fn next_txn(&mut self) -> usize {
        let p = &self.b.t.params;
        let (remote_pct, _) = p.remote();
        let d = uniform(&mut self.rng, 1, DISTRICTS);
        let n = uniform(&mut self.rng, 5, 15);
        self.items.clear();
        self.supply.clear();
        self.quantities.clear();
        for _ in 0..n {
            let c = self.b.t.ol_i_id_c();
            self.items
                .push(nurand(&mut self.rng, 8191, c, 1, p.scale.items));
            let w = if remote_pct > 0.0 && self.rng.next_f64() * 100.0 < remote_pct {
                let o = uniform(&mut self.rng, 1, p.warehouses - 1);
                if o >= self.home {
                    o + 1
                } else {
                    o
                }
            } else {
                self.home
            };
            self.supply.push(w);
            self.quantities.push(uniform(&mut self.rng, 1, 10));
        }
        let f = &mut self.frame;
        for (i, v) in [self.home, d, self.next_o].into_iter().enumerate() {
            f.set(i, Value::Int(v));
        }
        f.set_ints(3, self.items.iter().copied());
        f.set_ints(4, self.supply.iter().copied());
        f.set_ints(5, self.quantities.iter().copied());
        f.set(6, Value::Int(!p.no_inserts as i64));
        self.next_o += 1;
        0
    }

    fn attempt(&mut self, db: &Database) -> Result<myriad::CommitTicket> {
        let tx = db.begin_with(TxnOptions {
            isolation: self.b.t.params.isolation,
            read_only: false,
        })?;
        self.b
            .proc
            .execute_commit(tx, &mut self.frame)
            .map(|(_, ticket)| ticket)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::tpcc::{Params, Scale};
    use crate::workload::Worker as _;
    use myriad::{Config, Isolation, Row};

    /// Every row of table `name`, in tuple-id order.
    fn rows(db: &Database, name: &str) -> Vec<Row> {
        let t = db.table(name).unwrap();
        let mut out = Vec::new();
        db.run(|tx| {
            out.clear();
            tx.scan_table(&t, |r| {
                out.push(r.to_row());
                true
            })
        })
        .unwrap();
        out
    }

    /// The load makes ITEM, WAREHOUSE, DISTRICT and STOCK only; each transaction inserts
    /// exactly its drawn lines into ORDER_LINE (under its own order id), changes STOCK quantities only on the rows it drew, and touches
    /// nothing else (ORDERS, NEW_ORDER, DISTRICT unchanged).
    #[test]
    fn each_transaction_writes_its_lines_and_stock_and_nothing_else() {
        let db = Database::open(Config::new()).unwrap();
        let params = Params {
            warehouses: 2,
            scale: Scale {
                items: 500,
                customers_per_district: 30,
                orders_per_district: 30,
                new_orders_per_district: 9,
            },
            remote_pct: Some(20.0),
            no_inserts: false,
            updates_only: false,
            isolation: Isolation::Serializable,
            adhoc_pct: 0.0,
        };
        let b = NoFragmentBench::create(&db, Tpcc::create(&db, params, 7).unwrap()).unwrap();
        b.load(&db, 2, 7, None).unwrap();
        assert!(rows(&db, "customer").is_empty() && rows(&db, "orders").is_empty());
        assert_eq!(rows(&db, "stock").len(), 2 * 500);
        let before: Vec<_> = ["orders", "new_order", "district", "order_line", "stock"]
            .iter()
            .map(|t| rows(&db, t))
            .collect();
        let mut w = b.worker(1, 7);
        let mut lines = 0;
        let mut drawn_stock = std::collections::HashSet::new();
        for _ in 0..20 {
            assert_eq!(w.next_txn(), 0);
            lines += w.items.len();
            drawn_stock.extend(w.supply.iter().copied().zip(w.items.iter().copied()));
            let ticket = w.attempt(&db).unwrap();
            db.wait_durable(ticket).unwrap();
        }
        for (i, t) in ["orders", "new_order", "district"].iter().enumerate() {
            assert_eq!(rows(&db, t), before[i], "{t} changed");
        }
        let ol = rows(&db, "order_line");
        assert_eq!(ol.len(), before[3].len() + lines);
        let new: Vec<_> = ol
            .iter()
            .filter(|r| r[2].as_i64().unwrap() >= O_ID_BASE)
            .collect();
        assert_eq!(
            new.len(),
            lines,
            "every new line carries a worker's own order id"
        );
        let stock = rows(&db, "stock");
        let changed: Vec<_> = stock
            .iter()
            .zip(&before[4])
            .filter(|(a, b)| a != b)
            .map(|(a, _)| (a[0].as_i64().unwrap(), a[1].as_i64().unwrap()))
            .collect();
        assert!(!changed.is_empty());
        assert!(
            changed.iter().all(|k| drawn_stock.contains(k)),
            "a STOCK row no transaction drew changed"
        );
    }
}
