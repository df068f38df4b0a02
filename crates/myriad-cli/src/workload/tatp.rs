//! TATP (TATP Benchmark Description 1.0; Hekaton §5.3) as stored procedures: the four tables
//! and seven procedures are the SQL of `workloads/tatp.sql`, run with
//! `Procedure::execute_bound` on a reused `CallFrame`.
//!
//! Mix (the spec's): GetSubscriberData 35, GetNewDestination 10, GetAccessData 35 (80% read),
//! UpdateSubscriberData 2, UpdateLocation 14, InsertCallForwarding 2, DeleteCallForwarding 2.
//! Subscriber ids are the spec's non-uniform `(rand(0, A) | rand(1, N)) % N + 1`, A = 65535
//! up to a million subscribers, 1048575 up to ten million, 2097151 above; the other inputs
//! are uniform over the spec's ranges. The read transactions are declared READ ONLY.
//!
//! Population (spec §4): per subscriber 1–4 ACCESS_INFO rows and 1–4 SPECIAL_FACILITY rows of
//! distinct types, 0–3 CALL_FORWARDING rows of distinct start times (0, 8, 16) per special
//! facility, `is_active` 1 with probability 85%, `sub_nbr` the id as 15 digits.
//!
//! The spec's expected failures (UpdateSubscriberData, Insert/DeleteCallForwarding on a
//! missing or existing row) are user aborts, counted per type and never retried; a duplicate
//! key that a concurrent insert committed first is one too. Invariant (`check`): CALL_FORWARDING
//! holds the loaded rows plus the committed inserts minus the committed deletes.

use super::rng::Rng;
use super::{draw_type, load_chunk, query_int, returned_int, Worker, Workload};
use crate::bench::parallel_chunks;
use indicatif::ProgressBar;
use myriad::procedure::{CallFrame, Procedure};
use myriad::{
    AbortReason, Database, Error, Isolation, Result, TableRef, TxnOptions, Value, ValueRef,
};
use serde_json::{json, Value as Json};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;

/// The tables and procedures (also `myriad explain workloads/tatp.sql`).
pub const SQL: &str = include_str!("../../workloads/tatp.sql");
/// Transaction types (procedure names), in report order.
pub const TXN_TYPES: &[&str] = &[
    "get_subscriber_data",
    "get_new_destination",
    "get_access_data",
    "update_subscriber_data",
    "update_location",
    "insert_call_forwarding",
    "delete_call_forwarding",
];
const GET_SUBSCRIBER_DATA: usize = 0;
const GET_NEW_DESTINATION: usize = 1;
const GET_ACCESS_DATA: usize = 2;
const UPDATE_SUBSCRIBER_DATA: usize = 3;
const UPDATE_LOCATION: usize = 4;
const INSERT_CALL_FORWARDING: usize = 5;
const DELETE_CALL_FORWARDING: usize = 6;
const TYPES: usize = 7;
/// Integer parameters after the subscriber id, for the procedures that take an id.
const INT_ARGS: [usize; TYPES] = [0, 3, 1, 3, 0, 0, 0];
/// Percent of each type, in `TXN_TYPES` order (the spec's mix).
pub const MIX_PCT: [u64; TYPES] = [35, 10, 35, 2, 14, 2, 2];
/// Expected success rates (percent) on freshly loaded data: a special facility or access
/// type exists with probability 2.5/4, is active with 0.85, a start time has a call
/// forwarding with 1.5/3. For GetNewDestination the spec's text quotes about 23.9%; the
/// population and input ranges it specifies give 14.8% (0.625 · 0.85 · P(a forwarding with
/// start_time <= st ends after et), with st in {0, 8, 16}, et in 1..=24), and that is what
/// runs show.
const EXPECTED_SUCCESS_PCT: [f64; TYPES] = [100.0, 14.8, 62.5, 62.5, 100.0, 31.25, 31.25];
/// Subscribers per load transaction.
const LOAD_CHUNK: u64 = 1000;
/// Most subscribers (ids and sub_nbr have 15 digits at most).
pub const MAX_SUBSCRIBERS: u64 = 1_000_000_000;
/// Columns of SUBSCRIBER: s_id, sub_nbr, bit_1..10, hex_1..10, byte2_1..10, msc, vlr.
const SUBSCRIBER_COLS: usize = 34;

/// What shapes the TATP data and transactions.
#[derive(Clone, Debug)]
pub struct Params {
    pub subscribers: u64,
    pub isolation: Isolation,
}

impl Params {
    /// Checks what per-flag ranges cannot; the message names the flag.
    pub fn validate(&self) -> std::result::Result<(), String> {
        if !(1..=MAX_SUBSCRIBERS).contains(&self.subscribers) {
            return Err(format!(
                "--subscribers must be in 1..={MAX_SUBSCRIBERS}, got {}",
                self.subscribers
            ));
        }
        Ok(())
    }

    /// The spec's A of the non-uniform id generator for this population.
    pub fn nurand_a(&self) -> u64 {
        match self.subscribers {
            n if n <= 1_000_000 => 65_535,
            n if n <= 10_000_000 => 1_048_575,
            _ => 2_097_151,
        }
    }
}

/// TATP over one database.
pub struct Tatp {
    pub params: Params,
    subscriber: TableRef,
    access_info: TableRef,
    special_facility: TableRef,
    call_forwarding: TableRef,
    procs: Vec<Arc<Procedure>>,
    a: u64,
    /// CALL_FORWARDING rows loaded.
    loaded_cf: AtomicI64,
    /// Per type, handed over by dropped workers: finished calls (committed or user-aborted)
    /// and the successful ones among them (committed, and for the reads, found a row).
    calls: [AtomicU64; TYPES],
    succeeded: [AtomicU64; TYPES],
}

/// `n` distinct values of `from` in random order (a partial Fisher–Yates shuffle).
fn pick_distinct<const K: usize>(rng: &mut Rng, mut from: [i64; K], n: usize) -> [i64; K] {
    for i in 0..n.min(K) {
        let j = i + rng.below((K - i) as u64) as usize;
        from.swap(i, j);
    }
    from
}

/// `n` random characters of `alphabet` into `out` (cleared first).
fn random_text(rng: &mut Rng, alphabet: &[u8], n: usize, out: &mut String) {
    out.clear();
    for _ in 0..n {
        out.push(alphabet[rng.below(alphabet.len() as u64) as usize] as char);
    }
}

const UPPER: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ";
const DIGITS: &[u8] = b"0123456789";

/// A subscriber's `sub_nbr`: its id as 15 digits.
fn sub_nbr(s_id: i64) -> String {
    format!("{s_id:015}")
}

/// Reused strings of one load thread.
#[derive(Default)]
pub struct LoadScratch {
    a: String,
    b: String,
}

impl Tatp {
    /// Creates the tables, the sub_nbr index and the procedures of [`SQL`].
    pub fn create(db: &Database, params: Params) -> Result<Tatp> {
        params.validate().map_err(Error::InvalidConfig)?;
        myriad::sql::Session::new(db).execute(SQL)?;
        let procs = TXN_TYPES
            .iter()
            .map(|n| db.procedure(n))
            .collect::<Result<Vec<_>>>()?;
        Ok(Tatp {
            subscriber: db.table("subscriber")?,
            access_info: db.table("access_info")?,
            special_facility: db.table("special_facility")?,
            call_forwarding: db.table("call_forwarding")?,
            procs,
            a: params.nurand_a(),
            params,
            loaded_cf: AtomicI64::new(0),
            calls: Default::default(),
            succeeded: Default::default(),
        })
    }

    /// The spec's non-uniform subscriber id in 1..=N.
    #[inline]
    fn s_id(&self, rng: &mut Rng) -> i64 {
        let n = self.params.subscribers;
        (((rng.below(self.a + 1)) | (1 + rng.below(n))) % n + 1) as i64
    }

    /// Inserts subscriber `s_id` and its rows; returns how many CALL_FORWARDING rows.
    fn insert_subscriber(
        &self,
        tx: &mut myriad::Transaction<'_>,
        rng: &mut Rng,
        s_id: i64,
        s: &mut LoadScratch,
    ) -> Result<i64> {
        let nbr = sub_nbr(s_id);
        let mut row = [ValueRef::Int(0); SUBSCRIBER_COLS];
        row[0] = ValueRef::Int(s_id);
        row[1] = ValueRef::Str(&nbr);
        for (i, v) in row[2..32].iter_mut().enumerate() {
            // bit_1..10 in 0..=1, hex_1..10 in 0..=15, byte2_1..10 in 0..=255.
            let range = [2, 16, 256][i / 10];
            *v = ValueRef::Int(rng.below(range) as i64);
        }
        row[32] = ValueRef::Int(1 + rng.below(u32::MAX as u64) as i64);
        row[33] = ValueRef::Int(1 + rng.below(u32::MAX as u64) as i64);
        tx.insert(&self.subscriber, &row)?;

        let n_ai = 1 + rng.below(4) as usize;
        let types = pick_distinct(rng, [1, 2, 3, 4], n_ai);
        for &ai_type in &types[..n_ai] {
            let (d1, d2) = (rng.below(256) as i64, rng.below(256) as i64);
            random_text(rng, UPPER, 3, &mut s.a);
            random_text(rng, UPPER, 5, &mut s.b);
            tx.insert(
                &self.access_info,
                &[
                    ValueRef::Int(s_id),
                    ValueRef::Int(ai_type),
                    ValueRef::Int(d1),
                    ValueRef::Int(d2),
                    ValueRef::Str(&s.a),
                    ValueRef::Str(&s.b),
                ],
            )?;
        }

        let mut cf_rows = 0;
        let n_sf = 1 + rng.below(4) as usize;
        let types = pick_distinct(rng, [1, 2, 3, 4], n_sf);
        for &sf_type in &types[..n_sf] {
            let active = rng.percent(85) as i64;
            let (err, data_a) = (rng.below(256) as i64, rng.below(256) as i64);
            random_text(rng, UPPER, 5, &mut s.b);
            tx.insert(
                &self.special_facility,
                &[
                    ValueRef::Int(s_id),
                    ValueRef::Int(sf_type),
                    ValueRef::Int(active),
                    ValueRef::Int(err),
                    ValueRef::Int(data_a),
                    ValueRef::Str(&s.b),
                ],
            )?;
            let n_cf = rng.below(4) as usize;
            let starts = pick_distinct(rng, [0, 8, 16], n_cf);
            for &start in &starts[..n_cf] {
                let end = start + 1 + rng.below(8) as i64;
                random_text(rng, DIGITS, 15, &mut s.a);
                tx.insert(
                    &self.call_forwarding,
                    &[
                        ValueRef::Int(s_id),
                        ValueRef::Int(sf_type),
                        ValueRef::Int(start),
                        ValueRef::Int(end),
                        ValueRef::Str(&s.a),
                    ],
                )?;
                cf_rows += 1;
            }
        }
        Ok(cf_rows)
    }

    fn load_subscribers(
        &self,
        db: &Database,
        seed: u64,
        chunk: u64,
        s: &mut LoadScratch,
    ) -> Result<u64> {
        let lo = 1 + chunk * LOAD_CHUNK;
        let hi = (lo + LOAD_CHUNK).min(self.params.subscribers + 1);
        let cf_rows = load_chunk(db, seed, chunk, |tx, rng| {
            let mut cf_rows = 0;
            for s_id in lo as i64..hi as i64 {
                cf_rows += self.insert_subscriber(tx, rng, s_id, s)?;
            }
            Ok(cf_rows)
        })?;
        self.loaded_cf.fetch_add(cf_rows, Ordering::Relaxed);
        Ok(hi - lo)
    }

    fn success_pct(&self) -> Vec<f64> {
        (0..TYPES)
            .map(|t| {
                let calls = self.calls[t].load(Ordering::Relaxed);
                let ok = self.succeeded[t].load(Ordering::Relaxed);
                if calls == 0 {
                    0.0
                } else {
                    (ok as f64 * 10_000.0 / calls as f64).round() / 100.0
                }
            })
            .collect()
    }
}

impl Workload for Tatp {
    type Worker<'a> = TatpWorker<'a>;

    fn txn_types(&self) -> &'static [&'static str] {
        TXN_TYPES
    }

    fn load_units(&self) -> (u64, &'static str) {
        (self.params.subscribers, "subscribers")
    }

    /// Subscribers 1..=N with their rows, `LOAD_CHUNK` subscribers per transaction.
    fn load(
        &self,
        db: &Database,
        threads: usize,
        seed: u64,
        progress: Option<&ProgressBar>,
    ) -> Result<()> {
        let chunks = self.params.subscribers.div_ceil(LOAD_CHUNK);
        parallel_chunks(threads, chunks, progress, |chunk, s: &mut LoadScratch| {
            self.load_subscribers(db, seed, chunk, s)
        })
    }

    fn worker(&self, thread: usize, seed: u64) -> TatpWorker<'_> {
        TatpWorker {
            t: self,
            rng: Rng::new(seed, thread as u64),
            frames: self.procs.iter().map(|p| p.frame()).collect(),
            ty: 0,
            s_id: 0,
            args: [0; 3],
            calls: [0; TYPES],
            succeeded: [0; TYPES],
        }
    }

    fn fidelity(&self) -> Vec<(&'static str, Json)> {
        let p = &self.params;
        let mix: Vec<String> = TXN_TYPES
            .iter()
            .zip(MIX_PCT)
            .map(|(t, pct)| format!("{t} {pct}%"))
            .collect();
        vec![
            ("mix", json!(format!("TATP spec: {}", mix.join(", ")))),
            ("subscribers", json!(p.subscribers)),
            (
                "key_generator",
                json!(format!(
                    "TATP non-uniform: (rand(0, {}) | rand(1, N)) % N + 1",
                    self.a
                )),
            ),
            (
                "procedures",
                json!(format!(
                    "workloads/tatp.sql, {} (execute_bound on a reused call frame); the three reads declared READ ONLY",
                    super::procedures_run(&self.procs)
                )),
            ),
        ]
    }

    fn results(&self) -> Vec<(&'static str, Json)> {
        let obj = |v: &[f64]| -> Json {
            TXN_TYPES
                .iter()
                .zip(v)
                .map(|(t, x)| (t.to_string(), json!(x)))
                .collect::<serde_json::Map<_, _>>()
                .into()
        };
        let count = |t: usize| self.succeeded[t].load(Ordering::Relaxed);
        vec![
            ("success_pct", obj(&self.success_pct())),
            ("expected_success_pct", obj(&EXPECTED_SUCCESS_PCT)),
            (
                "call_forwarding_loaded",
                json!(self.loaded_cf.load(Ordering::Relaxed)),
            ),
            (
                "call_forwarding_inserted",
                json!(count(INSERT_CALL_FORWARDING)),
            ),
            (
                "call_forwarding_deleted",
                json!(count(DELETE_CALL_FORWARDING)),
            ),
        ]
    }

    fn check(&self, db: &Database) -> Option<Result<std::result::Result<String, String>>> {
        Some((|| {
            let n = self.params.subscribers as i64;
            let subs = query_int(db, "SELECT count(*) FROM subscriber")?;
            if subs != n {
                return Ok(Err(format!("subscriber has {subs} rows, {n} were loaded")));
            }
            let loaded = self.loaded_cf.load(Ordering::Relaxed);
            let ins = self.succeeded[INSERT_CALL_FORWARDING].load(Ordering::Relaxed) as i64;
            let del = self.succeeded[DELETE_CALL_FORWARDING].load(Ordering::Relaxed) as i64;
            let rows = query_int(db, "SELECT count(*) FROM call_forwarding")?;
            let what = format!("{loaded} loaded + {ins} inserted - {del} deleted");
            Ok(if rows == loaded + ins - del {
                Ok(format!("call_forwarding has {rows} rows = {what}"))
            } else {
                Err(format!("call_forwarding has {rows} rows != {what}"))
            })
        })())
    }
}

/// One thread's TATP transactions.
pub struct TatpWorker<'a> {
    t: &'a Tatp,
    rng: Rng,
    /// One reused call frame per procedure.
    frames: Vec<CallFrame>,
    ty: usize,
    s_id: i64,
    /// The drawn integer inputs after the subscriber, in parameter order.
    args: [i64; 3],
    calls: [u64; TYPES],
    succeeded: [u64; TYPES],
}

impl Drop for TatpWorker<'_> {
    fn drop(&mut self) {
        for t in 0..TYPES {
            self.t.calls[t].fetch_add(self.calls[t], Ordering::Relaxed);
            self.t.succeeded[t].fetch_add(self.succeeded[t], Ordering::Relaxed);
        }
    }
}

impl Worker for TatpWorker<'_> {
    fn next_txn(&mut self) -> usize {
        self.ty = draw_type(&mut self.rng, &MIX_PCT);
        self.s_id = self.t.s_id(&mut self.rng);
        let rng = &mut self.rng;
        let sf_type = 1 + rng.below(4) as i64;
        let start_time = 8 * rng.below(3) as i64;
        self.args = match self.ty {
            GET_SUBSCRIBER_DATA => [0; 3],
            // sf_type, start_time, end_time in 1..=24.
            GET_NEW_DESTINATION => [sf_type, start_time, 1 + rng.below(24) as i64],
            // ai_type in 1..=4.
            GET_ACCESS_DATA => [1 + rng.below(4) as i64, 0, 0],
            // bit_1, sf_type, data_a.
            UPDATE_SUBSCRIBER_DATA => [rng.below(2) as i64, sf_type, rng.below(256) as i64],
            // vlr_location.
            UPDATE_LOCATION => [1 + rng.below(u32::MAX as u64) as i64, 0, 0],
            // sf_type, start_time, end_time = start_time + 1..=8.
            INSERT_CALL_FORWARDING => [sf_type, start_time, start_time + 1 + rng.below(8) as i64],
            _ => [sf_type, start_time, 0],
        };
        self.ty
    }

    fn attempt(&mut self, db: &Database) -> Result<myriad::CommitTicket> {
        let ty = self.ty;
        let tx = db.begin_with(TxnOptions {
            isolation: self.t.params.isolation,
            read_only: matches!(
                ty,
                GET_SUBSCRIBER_DATA | GET_NEW_DESTINATION | GET_ACCESS_DATA
            ),
        })?;
        let f = &mut self.frames[ty];
        let [a, b, c] = self.args;
        match ty {
            UPDATE_LOCATION | INSERT_CALL_FORWARDING | DELETE_CALL_FORWARDING => {
                f.set(0, Value::Str(sub_nbr(self.s_id)));
                f.set(1, Value::Int(a));
                if ty != UPDATE_LOCATION {
                    f.set(2, Value::Int(b));
                }
                if ty == INSERT_CALL_FORWARDING {
                    f.set(3, Value::Int(c));
                    let mut numberx = String::with_capacity(15);
                    random_text(&mut self.rng, DIGITS, 15, &mut numberx);
                    f.set(4, Value::Str(numberx));
                }
            }
            _ => {
                f.set(0, Value::Int(self.s_id));
                for (i, v) in [a, b, c].into_iter().enumerate().take(INT_ARGS[ty]) {
                    f.set(1 + i, Value::Int(v));
                }
            }
        }
        let (out, ticket) = match self.t.procs[ty].execute_commit(tx, f) {
            Ok(r) => r,
            Err(e) => {
                let user = matches!(e, Error::ProcedureAbort { .. } | Error::DuplicateKey { .. });
                self.calls[ty] += user as u64;
                // A row a concurrent insert committed first: the spec's duplicate-key failure.
                return Err(match e {
                    Error::DuplicateKey { .. } => {
                        Error::SerializationFailure(AbortReason::UserAbort)
                    }
                    e => e,
                });
            }
        };
        self.calls[ty] += 1;
        if returned_int(TXN_TYPES[ty], &out)? > 0 {
            self.succeeded[ty] += 1;
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

    fn setup(isolation: Isolation, subscribers: u64) -> (Database, Tatp) {
        let db = Database::open(Config::new().isolation(isolation)).unwrap();
        let t = Tatp::create(
            &db,
            Params {
                subscribers,
                isolation,
            },
        )
        .unwrap();
        (db, t)
    }

    #[test]
    fn the_seven_procedures_run_the_same_compiled_and_interpreted() {
        crate::workload::assert_compiled_matches_interpreted(
            Config::new(),
            |db| {
                let params = Params {
                    subscribers: 200,
                    isolation: Isolation::Serializable,
                };
                Tatp::create(db, params).unwrap()
            },
            600,
        );
    }

    #[test]
    fn the_population_follows_the_spec_and_the_seed() {
        let counts = |threads: usize, seed: u64| {
            let (db, t) = setup(Isolation::Serializable, 3000);
            t.load(&db, threads, seed, None).unwrap();
            let q = |sql: &str| query_int(&db, sql).unwrap();
            let cf = q("SELECT count(*) FROM call_forwarding");
            assert_eq!(cf, t.loaded_cf.load(Ordering::Relaxed));
            (
                q("SELECT count(*) FROM subscriber"),
                q("SELECT count(*) FROM access_info"),
                q("SELECT count(*) FROM special_facility"),
                cf,
                q("SELECT sum(vlr_location) FROM subscriber"),
            )
        };
        let a = counts(1, 42);
        assert_eq!(a, counts(3, 42));
        assert_ne!(a, counts(1, 43));
        let (subs, ai, sf, cf, _) = a;
        assert_eq!(subs, 3000);
        // 2.5 rows of each per subscriber, 1.5 call forwardings per special facility.
        for (rows, mean) in [(ai, 2.5), (sf, 2.5), (cf, 3.75)] {
            let per = rows as f64 / subs as f64;
            assert!(
                (per - mean).abs() < 0.15,
                "{rows} rows: {per} per subscriber"
            );
        }
    }

    #[test]
    fn subscriber_ids_are_non_uniform_and_in_range() {
        let (_db, t) = setup(Isolation::Serializable, 100_000);
        assert_eq!(t.a, 65_535);
        let mut rng = Rng::new(1, 1);
        let mut hits = vec![0u32; 100_001];
        for _ in 0..1_000_000 {
            let s = t.s_id(&mut rng);
            assert!((1..=100_000).contains(&s));
            hits[s as usize] += 1;
        }
        // The OR with a 16-bit mask favours ids with many low bits set.
        let (max, min) = (
            hits[1..].iter().max().copied().unwrap_or(0),
            hits[1..].iter().min().copied().unwrap_or(0),
        );
        assert!(max > 4 * (min + 1), "max {max}, min {min}");
    }

    /// A short 2-thread run at Serializable and SI: the expected failures are user aborts,
    /// the success rates are near the spec's, and CALL_FORWARDING's row count adds up.
    #[test]
    fn a_short_run_keeps_call_forwarding_consistent() {
        for isolation in [Isolation::Serializable, Isolation::Snapshot] {
            let (db, t) = setup(isolation, 2000);
            t.load(&db, 2, 9, None).unwrap();
            let opts = RunOptions {
                threads: 2,
                warmup: Duration::from_millis(50),
                duration: Duration::from_millis(400),
                progress: false,
                txn_types: TXN_TYPES,
                stop_grace: Duration::from_secs(10),
                chain_sample: None,
                max_version_bytes: None,
                stop_after: None,
            };
            let r = run(&db, &opts, |i| t.worker(i, 9)).unwrap();
            assert!(r.committed > 1000, "{isolation:?}: {}", r.committed);
            assert!(r.user_aborted[INSERT_CALL_FORWARDING] > 0);
            assert!(r.user_aborted[DELETE_CALL_FORWARDING] > 0);
            assert_eq!(r.user_aborted[GET_SUBSCRIBER_DATA], 0);
            assert_eq!(r.user_aborted[UPDATE_LOCATION], 0);
            let pct = t.success_pct();
            for ty in [GET_SUBSCRIBER_DATA, UPDATE_LOCATION] {
                assert_eq!(pct[ty], 100.0, "{}", TXN_TYPES[ty]);
            }
            for ty in [GET_NEW_DESTINATION, GET_ACCESS_DATA] {
                assert!(
                    (pct[ty] - EXPECTED_SUCCESS_PCT[ty]).abs() < 5.0,
                    "{}: {pct:?}",
                    TXN_TYPES[ty]
                );
            }
            assert!(t.succeeded[INSERT_CALL_FORWARDING].load(Ordering::Relaxed) > 0);
            match t.check(&db) {
                Some(Ok(Ok(msg))) => assert!(msg.contains("inserted"), "{msg}"),
                other => panic!("{isolation:?}: {other:?}"),
            }
        }
    }
}
