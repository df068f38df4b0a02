//! Smallbank (Alomari et al., ICDE 2008; thesis §3.5 with Table 3.2's 1,000 accounts per
//! table) as stored procedures: the tables and the six procedures are the SQL of
//! `workloads/smallbank.sql`, run with `Procedure::execute_bound` on a reused `CallFrame`.
//!
//! Mix: OLTPBench's SmallBank weights (the same as H-Store's): Amalgamate 15, Balance 15,
//! DepositChecking 15, SendPayment 25, TransactSavings 15, WriteCheck 15. Amounts are
//! OLTPBench's constants in cents (deposit 1.30, savings transaction 20.20, check 5.00,
//! payment 5.00), and balances start uniform in [$10,000, $50,000] (OLTPBench's MIN/MAX_BALANCE).
//! TransactSavings is a deposit or a withdrawal with equal probability, as the original
//! defines it ("increases or decreases the savings balance by V"): OLTPBench only withdraws,
//! and since nothing else refills savings (Amalgamate empties it), the hot customers' savings
//! reach zero within a second and every later TransactSavings on them is a user abort.
//! Customers are drawn with the Gray et al. Zipfian of DBx1000 (`--theta`, hot customers are
//! the low ids); the two customers of Amalgamate and SendPayment are distinct.
//!
//! Invariant (`check`): the money in SAVINGS and CHECKING equals the loaded money plus the net
//! change every committed call RETURNed. Each worker adds up its own commits' changes and
//! hands the sum over when it is dropped, so the check is exact for any isolation level
//! whose writes do not lose updates.

use super::rng::Rng;
use super::zipf::GrayZipf;
use super::{adhoc, draw_type, load_chunk, query_int, returned_int, Worker, Workload};
use crate::bench::parallel_chunks;
use indicatif::ProgressBar;
use myriad::procedure::{CallFrame, Procedure};
use myriad::{Database, Error, Isolation, Result, TableRef, TxnOptions, Value, ValueRef};
use serde_json::{json, Value as Json};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

/// The tables and procedures (also `myriad explain workloads/smallbank.sql`).
pub const SQL: &str = include_str!("../../workloads/smallbank.sql");
/// Transaction types (procedure names), in report order.
pub const TXN_TYPES: &[&str] = &[
    "amalgamate",
    "balance",
    "deposit_checking",
    "send_payment",
    "transact_savings",
    "write_check",
];
pub(crate) const AMALGAMATE: usize = 0;
pub(crate) const BALANCE: usize = 1;
pub(crate) const DEPOSIT_CHECKING: usize = 2;
pub(crate) const SEND_PAYMENT: usize = 3;
pub(crate) const TRANSACT_SAVINGS: usize = 4;
pub(crate) const WRITE_CHECK: usize = 5;
/// Percent of each type, in `TXN_TYPES` order (OLTPBench / H-Store).
pub const MIX_PCT: [u64; 6] = [15, 15, 15, 25, 15, 15];
/// Amounts in cents (OLTPBench's `SmallBankConstants`).
pub(crate) const DEPOSIT_CHECKING_CENTS: i64 = 130;
pub(crate) const TRANSACT_SAVINGS_CENTS: i64 = 2020;
pub(crate) const WRITE_CHECK_CENTS: i64 = 500;
pub(crate) const SEND_PAYMENT_CENTS: i64 = 500;
/// Initial balance range per account, in cents.
const MIN_BALANCE_CENTS: i64 = 1_000_000;
const MAX_BALANCE_CENTS: i64 = 5_000_000;
/// Customers per load transaction.
pub(crate) const LOAD_CHUNK: u64 = 1000;
/// Most customers (keeps every total far from i64 overflow: 2 · 10^9 · $50,000 in cents).
pub const MAX_ACCOUNTS: u64 = 1_000_000_000;

/// What shapes the Smallbank data and transactions.
#[derive(Clone, Debug)]
pub struct Params {
    /// Customers: rows per table.
    pub accounts: u64,
    pub theta: f64,
    pub isolation: Isolation,
    /// Percentage of transactions run ad hoc: logged as their row writes, not as the call,
    /// when the log is a command log (thesis §4.7, Fig. 4.17).
    pub adhoc_pct: f64,
}

impl Params {
    /// Checks what per-flag ranges cannot; the message names the flag.
    pub fn validate(&self) -> std::result::Result<(), String> {
        if !(2..=MAX_ACCOUNTS).contains(&self.accounts) {
            return Err(format!(
                "--accounts must be in 2..={MAX_ACCOUNTS} (Amalgamate and SendPayment need two customers), got {}",
                self.accounts
            ));
        }
        if !(0.0..1.0).contains(&self.theta) {
            return Err(format!("--theta must be in [0, 1), got {}", self.theta));
        }
        Ok(())
    }
}

/// Smallbank over one database.
pub struct Smallbank {
    pub params: Params,
    accounts: TableRef,
    savings: TableRef,
    checking: TableRef,
    procs: Vec<Arc<Procedure>>,
    zipf: GrayZipf,
    /// Money loaded (cents), summed per load chunk.
    loaded_cents: AtomicI64,
    /// Net change RETURNed by committed calls, handed over by dropped workers.
    committed_delta_cents: AtomicI64,
}

impl Smallbank {
    /// Creates the tables and procedures of [`SQL`].
    pub fn create(db: &Database, params: Params) -> Result<Smallbank> {
        params.validate().map_err(Error::InvalidConfig)?;
        myriad::sql::Session::new(db).execute(SQL)?;
        let procs = TXN_TYPES
            .iter()
            .map(|n| db.procedure(n))
            .collect::<Result<Vec<_>>>()?;
        Ok(Smallbank {
            accounts: db.table("accounts")?,
            savings: db.table("savings")?,
            checking: db.table("checking")?,
            procs,
            zipf: GrayZipf::new(params.accounts, params.theta),
            params,
            loaded_cents: AtomicI64::new(0),
            committed_delta_cents: AtomicI64::new(0),
        })
    }

    fn load_customers(
        &self,
        db: &Database,
        seed: u64,
        chunk: u64,
        name: &mut String,
    ) -> Result<u64> {
        let lo = chunk * LOAD_CHUNK;
        let hi = (lo + LOAD_CHUNK).min(self.params.accounts);
        let cents = load_chunk(db, seed, chunk, |tx, rng| {
            let mut cents = 0i64;
            for id in lo as i64..hi as i64 {
                customer_name(id, name);
                let (s, c) = draw_balances(rng);
                cents += s + c;
                tx.insert(&self.accounts, &[ValueRef::Int(id), ValueRef::Str(name)])?;
                tx.insert(&self.savings, &[ValueRef::Int(id), ValueRef::Int(s)])?;
                tx.insert(&self.checking, &[ValueRef::Int(id), ValueRef::Int(c)])?;
            }
            Ok(cents)
        })?;
        self.loaded_cents.fetch_add(cents, Ordering::Relaxed);
        Ok(hi - lo)
    }
}

impl Workload for Smallbank {
    type Worker<'a> = SmallbankWorker<'a>;

    fn txn_types(&self) -> &'static [&'static str] {
        TXN_TYPES
    }

    fn load_units(&self) -> (u64, &'static str) {
        (self.params.accounts, "customers")
    }

    /// Customers 0..accounts, one row in each table, in chunks of `LOAD_CHUNK` per transaction.
    fn load(
        &self,
        db: &Database,
        threads: usize,
        seed: u64,
        progress: Option<&ProgressBar>,
    ) -> Result<()> {
        let chunks = self.params.accounts.div_ceil(LOAD_CHUNK);
        parallel_chunks(threads, chunks, progress, |chunk, name: &mut String| {
            self.load_customers(db, seed, chunk, name)
        })
    }

    fn worker(&self, thread: usize, seed: u64) -> SmallbankWorker<'_> {
        SmallbankWorker {
            sb: self,
            rng: Rng::new(seed, thread as u64),
            frames: self.procs.iter().map(|p| p.frame()).collect(),
            d: Drawn::default(),
            adhoc: false,
            delta_cents: 0,
        }
    }

    fn fidelity(&self) -> Vec<(&'static str, Json)> {
        let mut f = fidelity_of(&self.params);
        f.push((
            "procedures",
            json!(format!(
                "workloads/smallbank.sql, {} (execute_bound on a reused call frame); balance declared READ ONLY",
                super::procedures_run(&self.procs)
            )),
        ));
        f
    }

    fn results(&self) -> Vec<(&'static str, Json)> {
        vec![(
            "committed_delta_cents",
            json!(self.committed_delta_cents.load(Ordering::Relaxed)),
        )]
    }

    fn check(&self, db: &Database) -> Option<Result<std::result::Result<String, String>>> {
        Some((|| {
            let loaded = self.loaded_cents.load(Ordering::Relaxed);
            let delta = self.committed_delta_cents.load(Ordering::Relaxed);
            let n = self.params.accounts as i64;
            let mut rows = [0i64; 3];
            for (r, t) in rows.iter_mut().zip(["accounts", "savings", "checking"]) {
                *r = query_int(db, &format!("SELECT count(*) FROM {t}"))?;
            }
            let total = query_int(db, "SELECT sum(bal) FROM savings")?
                + query_int(db, "SELECT sum(bal) FROM checking")?;
            Ok(check_money(n, rows, total, loaded, delta))
        })())
    }
}

/// Customer `id`'s name in ACCOUNTS.
#[inline]
pub(crate) fn customer_name(id: i64, name: &mut String) {
    use std::fmt::Write as _;
    name.clear();
    let _ = write!(name, "customer{id:010}");
}

/// A loaded customer's savings and checking balances, drawn from the load chunk's generator.
#[inline]
pub(crate) fn draw_balances(rng: &mut Rng) -> (i64, i64) {
    let span = (MAX_BALANCE_CENTS - MIN_BALANCE_CENTS + 1) as u64;
    let s = MIN_BALANCE_CENTS + rng.below(span) as i64;
    let c = MIN_BALANCE_CENTS + rng.below(span) as i64;
    (s, c)
}

/// The invariant: each table holds the `accounts` loaded rows (`rows`: ACCOUNTS, SAVINGS,
/// CHECKING), and the money in SAVINGS and CHECKING (`total`) is what was loaded plus what the
/// committed calls returned.
pub(crate) fn check_money(
    accounts: i64,
    rows: [i64; 3],
    total: i64,
    loaded: i64,
    delta: i64,
) -> std::result::Result<String, String> {
    for (t, r) in ["accounts", "savings", "checking"].iter().zip(rows) {
        if r != accounts {
            return Err(format!("{t} has {r} rows, {accounts} were loaded"));
        }
    }
    if total == loaded + delta {
        Ok(format!(
            "money {total} cents = {loaded} loaded {delta:+} committed by the transactions"
        ))
    } else {
        Err(format!(
            "money {total} cents != {loaded} loaded {delta:+} committed by the transactions (off by {})",
            total - loaded - delta
        ))
    }
}

/// The fidelity entries every engine shares (the mix, the customers, the amounts).
pub(crate) fn fidelity_of(p: &Params) -> Vec<(&'static str, Json)> {
    let mix: Vec<String> = TXN_TYPES
        .iter()
        .zip(MIX_PCT)
        .map(|(t, pct)| format!("{t} {pct}%"))
        .collect();
    vec![
        (
            "mix",
            json!(format!("OLTPBench/H-Store: {}", mix.join(", "))),
        ),
        ("accounts", json!(p.accounts)),
        (
            "key_generator",
            json!(format!(
                "gray: Gray et al. Zipfian as DBx1000, θ={}, unscrambled (hot customers are the low ids){}",
                p.theta,
                if p.theta == 0.0 { "; θ=0 is uniform" } else { "" }
            )),
        ),
        ("theta", json!(p.theta)),
        (
            "amounts",
            json!("cents: deposit_checking 130, transact_savings +2020 or -2020 (equally likely), write_check -500 (-600 overdrawn), send_payment 500; balances start uniform in [1,000,000, 5,000,000]"),
        ),
    ]
}

/// One drawn transaction: its type, its customers and (TransactSavings) its amount. Myriad's
/// worker and the baselines' draw the same sequence with [`Drawn::next`].
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Drawn {
    pub ty: usize,
    pub c0: i64,
    /// The second customer of Amalgamate and SendPayment (distinct from `c0`).
    pub c1: i64,
    /// The drawn TransactSavings amount: ±TRANSACT_SAVINGS_CENTS.
    pub savings_cents: i64,
}

impl Drawn {
    /// Draws the next transaction from a worker's generator; returns its type. `zipf` spans
    /// at least two customers (`Params::validate`).
    #[inline]
    pub(crate) fn next(&mut self, rng: &mut Rng, zipf: &GrayZipf) -> usize {
        self.ty = draw_type(rng, &MIX_PCT);
        self.c0 = zipf.next(rng) as i64;
        if self.ty == TRANSACT_SAVINGS {
            self.savings_cents = if rng.below(2) == 0 {
                TRANSACT_SAVINGS_CENTS
            } else {
                -TRANSACT_SAVINGS_CENTS
            };
        }
        if matches!(self.ty, AMALGAMATE | SEND_PAYMENT) {
            loop {
                self.c1 = zipf.next(rng) as i64;
                if self.c1 != self.c0 {
                    break;
                }
            }
        }
        self.ty
    }
}

/// One thread's Smallbank transactions.
pub struct SmallbankWorker<'a> {
    sb: &'a Smallbank,
    rng: Rng,
    /// One reused call frame per procedure.
    frames: Vec<CallFrame>,
    d: Drawn,
    /// The drawn transaction runs ad hoc (`Params::adhoc_pct`).
    adhoc: bool,
    /// Net change of this worker's committed calls.
    delta_cents: i64,
}

impl Drop for SmallbankWorker<'_> {
    fn drop(&mut self) {
        self.sb
            .committed_delta_cents
            .fetch_add(self.delta_cents, Ordering::Relaxed);
    }
}

impl Worker for SmallbankWorker<'_> {
    fn next_txn(&mut self) -> usize {
        self.adhoc = adhoc(&mut self.rng, self.sb.params.adhoc_pct);
        self.d.next(&mut self.rng, &self.sb.zipf)
    }

    fn attempt(&mut self, db: &Database) -> Result<myriad::CommitTicket> {
        let Drawn {
            ty,
            c0,
            c1,
            savings_cents,
        } = self.d;
        let mut tx = db.begin_with(TxnOptions {
            isolation: self.sb.params.isolation,
            read_only: ty == BALANCE,
        })?;
        if self.adhoc {
            tx.log_as_rows();
        }
        let f = &mut self.frames[ty];
        f.set(0, Value::Int(c0));
        let amount = match ty {
            AMALGAMATE => {
                f.set(1, Value::Int(c1));
                None
            }
            BALANCE => None,
            SEND_PAYMENT => {
                f.set(1, Value::Int(c1));
                f.set(2, Value::Int(SEND_PAYMENT_CENTS));
                None
            }
            DEPOSIT_CHECKING => Some(DEPOSIT_CHECKING_CENTS),
            TRANSACT_SAVINGS => Some(savings_cents),
            _ => {
                debug_assert_eq!(ty, WRITE_CHECK);
                Some(WRITE_CHECK_CENTS)
            }
        };
        if let Some(v) = amount {
            f.set(1, Value::Int(v));
        }
        // An ad-hoc transaction (logged as rows) runs as plain OCC under `healing` (thesis
        // §3.4.8); a call's commit may heal it, and `out` is then the healed run's.
        let (out, ticket) = if self.adhoc {
            let out = self.sb.procs[ty].execute_bound(&mut tx, f)?;
            (out, tx.commit_deferred()?)
        } else {
            self.sb.procs[ty].execute_commit(tx, f)?
        };
        if ty != BALANCE {
            self.delta_cents += returned_int(TXN_TYPES[ty], &out)?;
        }
        Ok(ticket)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::{run, RunOptions};
    use myriad::Config;
    use std::time::Duration;

    fn setup(isolation: Isolation, accounts: u64, theta: f64) -> (Database, Smallbank) {
        let db = Database::open(Config::new().isolation(isolation)).unwrap();
        let sb = Smallbank::create(
            &db,
            Params {
                accounts,
                theta,
                isolation,
                adhoc_pct: 0.0,
            },
        )
        .unwrap();
        (db, sb)
    }

    #[test]
    fn the_six_procedures_run_the_same_compiled_and_interpreted() {
        let params = Params {
            accounts: 50,
            theta: 0.5,
            isolation: Isolation::Serializable,
            adhoc_pct: 0.0,
        };
        crate::workload::assert_compiled_matches_interpreted(
            Config::new(),
            |db| Smallbank::create(db, params.clone()).unwrap(),
            600,
        );
    }

    #[test]
    fn the_load_is_deterministic_for_a_seed_whatever_the_thread_count() {
        let total = |threads: usize, seed: u64| {
            let (db, sb) = setup(Isolation::Serializable, 2500, 0.5);
            sb.load(&db, threads, seed, None).unwrap();
            (
                sb.loaded_cents.load(Ordering::Relaxed),
                query_int(&db, "SELECT sum(bal) FROM checking").unwrap(),
            )
        };
        let a = total(1, 42);
        assert_eq!(a, total(3, 42));
        assert_ne!(a, total(1, 43));
    }

    #[test]
    fn the_mix_and_the_customers_follow_the_parameters() {
        let (_db, sb) = setup(Isolation::Serializable, 1000, 0.9);
        let mut w = sb.worker(0, 7);
        let mut counts = [0u64; 6];
        let n = 60_000;
        for _ in 0..n {
            let ty = w.next_txn();
            counts[ty] += 1;
            assert!((0..1000).contains(&w.d.c0));
            if matches!(ty, AMALGAMATE | SEND_PAYMENT) {
                assert_ne!(w.d.c0, w.d.c1);
            }
        }
        for (c, pct) in counts.iter().zip(MIX_PCT) {
            let got = *c as f64 * 100.0 / n as f64;
            assert!((got - pct as f64).abs() < 1.0, "{counts:?}");
        }
    }

    /// Money changes exactly by the deposits and withdrawals the committed transactions made,
    /// under contention (θ = 0.9 on 100 customers), with 2 threads, at Serializable and SI.
    #[test]
    fn money_is_conserved_up_to_the_committed_deltas() {
        for isolation in [Isolation::Serializable, Isolation::Snapshot] {
            let (db, sb) = setup(isolation, 100, 0.9);
            sb.load(&db, 2, 5, None).unwrap();
            let opts = RunOptions {
                threads: 2,
                warmup: Duration::from_millis(50),
                duration: Duration::from_millis(300),
                progress: false,
                txn_types: TXN_TYPES,
                stop_grace: Duration::from_secs(10),
                chain_sample: None,
                max_version_bytes: None,
                stop_after: None,
            };
            let r = run(&db, &opts, |i| sb.worker(i, 5)).unwrap();
            assert!(r.committed > 100, "{isolation:?}: {}", r.committed);
            let delta = sb.committed_delta_cents.load(Ordering::Relaxed);
            assert_ne!(delta, 0, "{isolation:?}: no money moved");
            match sb.check(&db) {
                Some(Ok(Ok(msg))) => assert!(msg.contains("loaded"), "{msg}"),
                other => panic!("{isolation:?}: {other:?}"),
            }
        }
    }

    #[test]
    fn user_aborts_roll_back_and_leave_the_money_alone() {
        let (db, sb) = setup(Isolation::Serializable, 2, 0.0);
        sb.load(&db, 1, 1, None).unwrap();
        // Drain customer 0's savings below one withdrawal, then withdraw: a RAISE, no change.
        let before = query_int(&db, "SELECT sum(bal) FROM savings").unwrap();
        db.call("amalgamate", &[0i64.into(), 1i64.into()]).unwrap();
        let e = db
            .call(
                "transact_savings",
                &[0i64.into(), (-TRANSACT_SAVINGS_CENTS).into()],
            )
            .unwrap_err();
        assert!(matches!(e, Error::ProcedureAbort { .. }), "{e}");
        let e = db
            .call("send_payment", &[0i64.into(), 1i64.into(), 1i64.into()])
            .unwrap_err();
        assert!(matches!(e, Error::ProcedureAbort { .. }), "{e}");
        let e = db
            .call("deposit_checking", &[7i64.into(), 1i64.into()])
            .unwrap_err();
        assert!(e.to_string().contains("no customer 7"), "{e}");
        // An overdrawn check costs the penalty and says so.
        assert_eq!(
            db.call("write_check", &[0i64.into(), 500i64.into()])
                .unwrap(),
            [Value::Int(-600)]
        );
        let savings = query_int(&db, "SELECT sum(bal) FROM savings").unwrap();
        assert!(savings < before, "amalgamate moved customer 0's savings");
        assert_eq!(
            db.call("balance", &[0i64.into()]).unwrap(),
            [Value::Int(-600)]
        );
    }
}
