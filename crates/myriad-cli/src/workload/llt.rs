//! The long-lived-transaction workload (`myriad bench llt`; vDriver §5, spec
//! `vdriver-pomvcc.md` A9): `tables` tables of `rows` rows of about `row_bytes` bytes
//! (`id INT` primary key, hash, plus one `BYTES` column `c`), short transactions that
//! update `c` of one row (table uniform, key uniform or exact Zipf with exponent s ≥ 0,
//! `ExactZipf`), and `llt` extra threads that each hold one snapshot open from `llt_at`
//! for `llt_hold` seconds (times from the start of the measured interval), idle or, with
//! `llt_reads`, issuing random point reads. An optional `rate` caps the updates per second
//! (split evenly over the workers); an optional memory guard stops the run with an error
//! once live version bytes pass a limit. The run's time series (`bench::MemSample`) carries
//! throughput, live version bytes, reclaimed and dead-zone-pruned versions, and the max and
//! p99 chain length of a sample of chains (`Database::chain_sample`, on its own thread).
//!
//! An idle long-lived snapshot re-pins its memory epoch every `IDLE_SLICE`
//! (`Transaction::repin`), so it holds back only what its read time protects.
//!
//! Long readers (Hekaton §5.2.2, Figs. 8–9; ERMIA's heterogeneous workload): `long_readers`
//! more threads, each running Serializable READ ONLY transactions back to back, every one
//! reading `long_read_pct`% of one table's rows as point reads of a contiguous key range
//! (the primary key is a hash index, so there is no ordered scan; point reads of a key
//! range touch the rows a range scan would, through the same per-row read path — 2PL's read
//! lock, Silo's read set). A reader's length depends on `rows` and `long_read_pct` only.
//! Its commits, aborts (by reason) and rows read are counted by the workload
//! (`results().long_readers`); its commits are not in the run's throughput, which is the
//! updaters'.

use super::rng::Rng;
use super::zipf::ExactZipf;
use super::{load_chunk, Worker, Workload};
use crate::bench::{parallel_chunks, reason_index};
use indicatif::ProgressBar;
use myriad::{
    AbortReason, ColumnType, CommitTicket, Database, Error, IndexKind, Isolation, Result, TableRef,
    TableSchema, TxnOptions,
};
use serde_json::{json, Value as Json};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Transaction types, in report order: the short update, the long-lived snapshot, the
/// empty read-only transactions an LLT thread commits every `IDLE_SLICE` outside its hold,
/// and the long reader's transaction.
pub const TXN_TYPES: &[&str] = &["update", "llt", "llt_idle", "long_read"];
/// The index of `long_read` in `TXN_TYPES`.
const LONG_READ: usize = 3;
/// Rows per load transaction.
const LOAD_CHUNK_ROWS: u64 = 1000;
/// Bytes of the `id` column and of the `BYTES` length prefix.
const ROW_OVERHEAD_BYTES: u64 = 8 + 2;
/// How long an LLT thread sleeps at a time (and how often an idle snapshot re-pins).
const IDLE_SLICE: Duration = Duration::from_millis(50);
/// Point reads a reading LLT does between two looks at the clock.
const READS_PER_CHECK: u32 = 64;

/// What `myriad bench llt` runs.
#[derive(Clone, Debug)]
pub struct Params {
    pub tables: u64,
    pub rows: u64,
    pub row_bytes: u64,
    /// Zipf exponent of the keys; 0 is uniform.
    pub zipf: f64,
    pub threads: usize,
    pub llt: usize,
    pub llt_at_s: f64,
    pub llt_hold_s: f64,
    pub llt_reads: bool,
    /// Long-reader threads (besides `threads` and `llt`).
    pub long_readers: usize,
    /// Percentage of one table's rows each long reader's transaction reads.
    pub long_read_pct: u64,
    /// Updates per second over all workers, if capped.
    pub rate: Option<u64>,
    pub max_version_bytes: Option<u64>,
    /// Chains sampled per series sample.
    pub chain_sample: usize,
    pub isolation: Isolation,
    /// The run's warm-up and measured seconds (the LLT times count from the end of the
    /// warm-up; an LLT thread never sleeps past the end of the run).
    pub warmup_s: f64,
    pub duration_s: f64,
}

impl Params {
    /// `Err` names the first parameter out of range.
    pub fn validate(&self) -> std::result::Result<(), String> {
        if self.tables == 0 || self.tables > 4096 {
            return Err(format!("--tables must be in 1..=4096, got {}", self.tables));
        }
        if self.rows == 0 || self.rows > super::zipf::EXACT_ZIPF_MAX_N {
            return Err(format!(
                "--rows must be in 1..={}, got {}",
                super::zipf::EXACT_ZIPF_MAX_N,
                self.rows
            ));
        }
        let max_bytes = ROW_OVERHEAD_BYTES + myriad::schema::MAX_VAR_LEN as u64;
        if self.row_bytes <= ROW_OVERHEAD_BYTES || self.row_bytes > max_bytes {
            return Err(format!(
                "--row-bytes must be in {}..={max_bytes} (an 8-byte id, a 2-byte length and \
                 at least one byte of payload), got {}",
                ROW_OVERHEAD_BYTES + 1,
                self.row_bytes
            ));
        }
        if !(self.zipf.is_finite() && self.zipf >= 0.0) {
            return Err(format!(
                "--zipf must be a finite exponent ≥ 0 (0 is uniform), got {}",
                self.zipf
            ));
        }
        if self.tables.saturating_mul(self.rows) > 1 << 28 {
            return Err(format!(
                "--tables × --rows must be at most 2^28 rows, got {} × {}",
                self.tables, self.rows
            ));
        }
        if self.rate == Some(0) {
            return Err("--rate must be at least 1 update per second".into());
        }
        if self.llt > 0 && self.llt_at_s >= self.duration_s {
            return Err(format!(
                "--llt-at {} opens the long-lived snapshots at or after the end of the measured \
                 interval (--duration {}): they would never be taken",
                self.llt_at_s, self.duration_s
            ));
        }
        if self.chain_sample == 0 {
            return Err("--chain-sample must be at least 1".into());
        }
        if !(1..=100).contains(&self.long_read_pct) {
            return Err(format!(
                "--long-read-pct must be in 1..=100, got {}",
                self.long_read_pct
            ));
        }
        Ok(())
    }

    /// Rows one long reader's transaction reads: `long_read_pct`% of a table, at least 1.
    pub fn long_read_rows(&self) -> u64 {
        (self.rows * self.long_read_pct).div_ceil(100).max(1)
    }

    fn payload_bytes(&self) -> usize {
        (self.row_bytes - ROW_OVERHEAD_BYTES) as usize
    }
}

/// The workload: its tables and key generator.
pub struct Llt {
    params: Params,
    tables: Vec<TableRef>,
    zipf: Option<ExactZipf>,
    /// Snapshots the LLT threads held, the seconds they held them, and their reads.
    llt_held: AtomicU64,
    llt_held_ms: AtomicU64,
    llt_reads: AtomicU64,
    /// Long readers' transactions that began in the measured interval: commits, rows they
    /// read, and aborted attempts by reason (`AbortReason::ALL` order).
    long_committed: AtomicU64,
    long_rows: AtomicU64,
    long_aborted: [AtomicU64; AbortReason::ALL.len()],
}

impl Llt {
    /// Creates the tables (`llt_0`, `llt_1`, ...).
    pub fn create(db: &Database, params: Params) -> Result<Llt> {
        let zipf = if params.zipf > 0.0 {
            Some(ExactZipf::new(params.rows, params.zipf).map_err(myriad::Error::InvalidConfig)?)
        } else {
            None
        };
        let tables = (0..params.tables)
            .map(|i| {
                db.create_table(
                    TableSchema::new(&format!("llt_{i}"))
                        .column("id", ColumnType::Int)
                        .column("c", ColumnType::Bytes(params.payload_bytes()))
                        .primary_key_with(&["id"], IndexKind::Hash),
                )
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Llt {
            params,
            tables,
            zipf,
            llt_held: AtomicU64::new(0),
            llt_held_ms: AtomicU64::new(0),
            llt_reads: AtomicU64::new(0),
            long_committed: AtomicU64::new(0),
            long_rows: AtomicU64::new(0),
            long_aborted: std::array::from_fn(|_| AtomicU64::new(0)),
        })
    }

    fn key(&self, rng: &mut Rng) -> i64 {
        match &self.zipf {
            Some(z) => z.next(rng) as i64,
            None => rng.below(self.params.rows) as i64,
        }
    }
}

impl Workload for Llt {
    type Worker<'a> = LltWorker<'a>;

    fn txn_types(&self) -> &'static [&'static str] {
        TXN_TYPES
    }

    fn extra_threads(&self) -> usize {
        self.params.llt + self.params.long_readers
    }

    fn load_units(&self) -> (u64, &'static str) {
        (self.params.tables * self.params.rows, "rows")
    }

    fn load(
        &self,
        db: &Database,
        threads: usize,
        seed: u64,
        progress: Option<&ProgressBar>,
    ) -> Result<()> {
        let per_table = self.params.rows.div_ceil(LOAD_CHUNK_ROWS);
        let chunks = self.params.tables * per_table;
        let n = self.params.payload_bytes();
        parallel_chunks(threads, chunks, progress, |chunk, buf: &mut Vec<u8>| {
            buf.resize(n, 0);
            let t = &self.tables[(chunk / per_table) as usize];
            let lo = (chunk % per_table) * LOAD_CHUNK_ROWS;
            let hi = (lo + LOAD_CHUNK_ROWS).min(self.params.rows);
            load_chunk(db, seed, chunk, |tx, rng| {
                for key in lo..hi {
                    rng.fill_bytes(buf);
                    tx.insert(
                        t,
                        &[
                            myriad::Value::Int(key as i64),
                            myriad::Value::Bytes(buf.clone()),
                        ],
                    )?;
                }
                Ok(hi - lo)
            })
        })
    }

    fn worker(&self, thread: usize, seed: u64) -> LltWorker<'_> {
        let mut rng = Rng::new(seed, thread as u64);
        let mut payload = vec![0u8; self.params.payload_bytes()];
        rng.fill_bytes(&mut payload);
        let start = Instant::now() + Duration::from_secs_f64(self.params.warmup_s);
        let end = start + Duration::from_secs_f64(self.params.duration_s);
        let role = if thread < self.params.threads {
            Role::Update {
                interval: self
                    .params
                    .rate
                    .map(|r| Duration::from_secs_f64(self.params.threads as f64 / r as f64)),
                due: Instant::now(),
            }
        } else if thread < self.params.threads + self.params.llt {
            let at = start + Duration::from_secs_f64(self.params.llt_at_s);
            Role::Long {
                at,
                until: at + Duration::from_secs_f64(self.params.llt_hold_s),
                held: false,
            }
        } else {
            Role::Reader { start }
        };
        LltWorker {
            w: self,
            rng,
            payload,
            table: 0,
            key: 0,
            stamp: 0,
            lo: 0,
            end,
            role,
        }
    }

    fn chain_sample(&self) -> Option<usize> {
        Some(self.params.chain_sample)
    }

    fn max_version_bytes(&self) -> Option<u64> {
        self.params.max_version_bytes
    }

    fn fidelity(&self) -> Vec<(&'static str, Json)> {
        let p = &self.params;
        vec![
            (
                "schema",
                json!(format!(
                    "{} tables × {} rows of {} B: id INT (hash primary key) + c BYTES({})",
                    p.tables,
                    p.rows,
                    p.row_bytes,
                    p.payload_bytes()
                )),
            ),
            (
                "transaction",
                json!("update c of one row: table uniform, key by the key distribution"),
            ),
            (
                "keys",
                json!(if p.zipf > 0.0 {
                    format!("exact Zipf s={} (CDF + binary search; hot keys are the low ids)", p.zipf)
                } else {
                    "uniform".to_string()
                }),
            ),
            (
                "long_lived",
                json!(format!(
                    "{} thread(s), each one snapshot from {} s to {} s of the measured interval, {}",
                    p.llt,
                    p.llt_at_s,
                    p.llt_at_s + p.llt_hold_s,
                    if p.llt_reads {
                        "issuing random point reads"
                    } else {
                        "idle (re-pinning its memory epoch every 50 ms)"
                    }
                )),
            ),
            (
                "long_readers",
                json!(format!(
                    "{} thread(s), each running Serializable READ ONLY transactions back to \
                     back, every one reading {} rows ({}% of a table): point reads of a \
                     contiguous key range of a random table from a random start",
                    p.long_readers,
                    p.long_read_rows(),
                    p.long_read_pct
                )),
            ),
            (
                "rate",
                json!(p.rate.map_or("uncapped".to_string(), |r| format!("{r} updates/s"))),
            ),
            (
                "memory_guard",
                json!(p
                    .max_version_bytes
                    .map_or("off".to_string(), |b| format!("{} MiB of live versions", b >> 20))),
            ),
            (
                "chain_sample",
                json!(format!(
                    "about {} chains per sample, every 200 ms, on a sampler thread",
                    p.chain_sample
                )),
            ),
        ]
    }

    fn results(&self) -> Vec<(&'static str, Json)> {
        let mut out = vec![(
            "long_lived",
            json!({
                "snapshots_held": self.llt_held.load(Ordering::Relaxed),
                "held_s": self.llt_held_ms.load(Ordering::Relaxed) as f64 / 1e3,
                "reads": self.llt_reads.load(Ordering::Relaxed),
            }),
        )];
        if self.params.long_readers > 0 {
            out.push(("long_readers", self.long_reader_results()));
        }
        out
    }
}

impl Llt {
    /// The long readers' outcome: commits and their rate over the measured interval, the
    /// share of attempts that aborted, and the aborts by reason.
    fn long_reader_results(&self) -> Json {
        let committed = self.long_committed.load(Ordering::Relaxed);
        let by_reason: Vec<(AbortReason, u64)> = AbortReason::ALL
            .iter()
            .zip(&self.long_aborted)
            .map(|(r, n)| (*r, n.load(Ordering::Relaxed)))
            .collect();
        let aborted: u64 = by_reason.iter().map(|(_, n)| n).sum();
        let reasons: serde_json::Map<String, Json> = by_reason
            .iter()
            .filter(|(_, n)| *n > 0)
            .map(|(r, n)| (r.name().to_string(), json!(n)))
            .collect();
        let attempts = committed + aborted;
        json!({
            "threads": self.params.long_readers,
            "rows_per_txn": self.params.long_read_rows(),
            "committed": committed,
            "throughput_tps": if self.params.duration_s > 0.0 {
                committed as f64 / self.params.duration_s
            } else {
                0.0
            },
            "rows_read": self.long_rows.load(Ordering::Relaxed),
            "aborted": aborted,
            "abort_rate": if attempts == 0 { 0.0 } else { aborted as f64 / attempts as f64 },
            "abort_reasons": reasons,
        })
    }
}

enum Role {
    /// A short-update worker, paced to `interval` per transaction under `--rate`.
    Update {
        interval: Option<Duration>,
        due: Instant,
    },
    /// A long-lived-transaction thread: one snapshot from `at` to `until`.
    Long {
        at: Instant,
        until: Instant,
        held: bool,
    },
    /// A long reader; `start` is the start of the measured interval (its counts are of
    /// transactions begun from then until the end of the run).
    Reader { start: Instant },
}

/// One thread of the workload.
pub struct LltWorker<'a> {
    w: &'a Llt,
    rng: Rng,
    payload: Vec<u8>,
    table: usize,
    key: i64,
    stamp: u64,
    /// A long reader's drawn transaction: its table and first key.
    lo: i64,
    /// The end of the run: an LLT thread never sleeps past it.
    end: Instant,
    role: Role,
}

/// Sleeps until `t` (at most until `end`).
fn sleep_until(t: Instant, end: Instant) {
    let now = Instant::now();
    let t = t.min(end);
    if t > now {
        std::thread::sleep(t - now);
    }
}

impl LltWorker<'_> {
    fn opts(&self, read_only: bool) -> TxnOptions {
        TxnOptions {
            isolation: self.w.params.isolation,
            read_only,
        }
    }

    /// The long-lived snapshot: opened at `at`, held until `until` (or the end of the run).
    fn hold(&mut self, db: &Database, at: Instant, until: Instant) -> Result<CommitTicket> {
        while Instant::now() < at.min(self.end) {
            sleep_until(Instant::now() + IDLE_SLICE, at.min(self.end));
        }
        let mut tx = db.begin_with(self.opts(true))?;
        let opened = Instant::now();
        let until = until.min(self.end);
        let mut reads = 0u64;
        // Open the snapshot by reading one row (every protocol has its read time by then).
        let t = &self.w.tables[0];
        tx.get_with(t, &0i64, |_| ())?;
        while Instant::now() < until {
            if self.w.params.llt_reads {
                for i in 0..READS_PER_CHECK {
                    // A read walks its chain back to the snapshot: under a GC that keeps every
                    // version, one batch could outlast the hold, so the clock is read often.
                    if i % 8 == 0 && Instant::now() >= until {
                        break;
                    }
                    let t = &self.w.tables[self.rng.below(self.w.params.tables) as usize];
                    let key = self.w.key(&mut self.rng);
                    tx.get_with(t, &key, |_| ())?;
                    reads += 1;
                }
            } else {
                sleep_until(Instant::now() + IDLE_SLICE, until);
                tx.repin();
            }
        }
        self.w.llt_held.fetch_add(1, Ordering::Relaxed);
        self.w
            .llt_held_ms
            .fetch_add(opened.elapsed().as_millis() as u64, Ordering::Relaxed);
        self.w.llt_reads.fetch_add(reads, Ordering::Relaxed);
        tx.commit_deferred()
    }

    /// One long reader's transaction: Serializable READ ONLY point reads of
    /// `long_read_rows()` consecutive keys of `self.table` from `self.lo`.
    fn long_read(&mut self, db: &Database) -> Result<CommitTicket> {
        let mut tx = db.begin_with(TxnOptions {
            isolation: Isolation::Serializable,
            read_only: true,
        })?;
        let t = &self.w.tables[self.table];
        let n = self.w.params.long_read_rows() as i64;
        for key in self.lo..self.lo + n {
            tx.get_with(t, &key, |_| ())?;
        }
        tx.commit_deferred()
    }
}

impl Worker for LltWorker<'_> {
    fn next_txn(&mut self) -> usize {
        match &mut self.role {
            Role::Update { interval, due } => {
                if let Some(i) = *interval {
                    *due += i;
                    let now = Instant::now();
                    if *due > now {
                        std::thread::sleep(*due - now);
                    } else if now - *due > Duration::from_secs(1) {
                        // Fallen behind by more than a second (descheduled): no burst to
                        // catch up.
                        *due = now;
                    }
                }
                self.table = self.rng.below(self.w.params.tables) as usize;
                self.key = self.w.key(&mut self.rng);
                self.stamp += 1;
                0
            }
            Role::Long { held, .. } => {
                if *held {
                    2
                } else {
                    1
                }
            }
            Role::Reader { .. } => {
                let p = &self.w.params;
                self.table = self.rng.below(p.tables) as usize;
                self.lo = self.rng.below(p.rows - p.long_read_rows() + 1) as i64;
                LONG_READ
            }
        }
    }

    fn attempt(&mut self, db: &Database) -> Result<CommitTicket> {
        match self.role {
            Role::Update { .. } => {
                let t = &self.w.tables[self.table];
                self.payload[..8].copy_from_slice(&self.stamp.to_le_bytes());
                let mut tx = db.begin_with(self.opts(false))?;
                tx.update(t, &self.key, &[(1, &self.payload[..])])?;
                tx.commit_deferred()
            }
            Role::Long { at, until, held } => {
                if !held {
                    // Held once, even if its commit aborts (a retry is an idle transaction).
                    self.role = Role::Long {
                        at,
                        until,
                        held: true,
                    };
                    return self.hold(db, at, until);
                }
                sleep_until(Instant::now() + IDLE_SLICE, self.end);
                db.begin_with(self.opts(true))?.commit_deferred()
            }
            Role::Reader { start } => {
                let began = Instant::now();
                let r = self.long_read(db);
                if began >= start && began < self.end {
                    match &r {
                        Ok(_) => {
                            self.w.long_committed.fetch_add(1, Ordering::Relaxed);
                            self.w
                                .long_rows
                                .fetch_add(self.w.params.long_read_rows(), Ordering::Relaxed);
                        }
                        Err(Error::SerializationFailure(reason)) => {
                            self.w.long_aborted[reason_index(*reason)]
                                .fetch_add(1, Ordering::Relaxed);
                        }
                        Err(_) => {}
                    }
                }
                r
            }
        }
    }

    fn counts_as_throughput(&self) -> bool {
        matches!(self.role, Role::Update { .. })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params() -> Params {
        Params {
            tables: 2,
            rows: 50,
            row_bytes: 64,
            zipf: 1.2,
            threads: 1,
            llt: 1,
            llt_at_s: 0.0,
            llt_hold_s: 0.0,
            llt_reads: true,
            long_readers: 1,
            long_read_pct: 10,
            rate: None,
            max_version_bytes: None,
            chain_sample: 16,
            isolation: Isolation::Snapshot,
            warmup_s: 0.0,
            duration_s: 1.0,
        }
    }

    /// Loads, runs updates (each changes the row's bytes) and one LLT hold, and checks the
    /// parameter checks name what is wrong.
    #[test]
    fn updates_change_rows_and_the_llt_commits() {
        let db = Database::open(myriad::Config::new().isolation(Isolation::Snapshot)).unwrap();
        let w = Llt::create(&db, params()).unwrap();
        w.load(&db, 1, 7, None).unwrap();
        let mut u = w.worker(0, 7);
        for _ in 0..20 {
            assert_eq!(u.next_txn(), 0);
            u.attempt(&db).unwrap();
        }
        let (t, k, stamp) = (u.table, u.key, u.stamp);
        let mut tx = db.begin().unwrap();
        let c = tx
            .get_with(&w.tables[t], &k, |r| r.bytes(1).unwrap().to_vec())
            .unwrap()
            .unwrap();
        assert_eq!(&c[..8], &stamp.to_le_bytes());
        assert_eq!(c.len(), 64 - 10);
        drop(tx);
        let mut l = w.worker(1, 7);
        assert_eq!(l.next_txn(), 1);
        l.attempt(&db).unwrap();
        assert_eq!(l.next_txn(), 2);
        assert_eq!(w.llt_held.load(Ordering::Relaxed), 1);

        // A long reader (thread 2) reads 10% of a table (5 of 50 rows) in the measured
        // interval and is counted.
        let db = Database::open(myriad::Config::new().isolation(Isolation::Snapshot)).unwrap();
        let p = Params {
            duration_s: 10.0,
            ..params()
        };
        assert_eq!(p.long_read_rows(), 5);
        let w = Llt::create(&db, p).unwrap();
        w.load(&db, 1, 7, None).unwrap();
        let mut r = w.worker(2, 7);
        for _ in 0..3 {
            assert_eq!(r.next_txn(), LONG_READ);
            assert!(r.lo >= 0 && r.lo <= 45, "{}", r.lo);
            r.attempt(&db).unwrap();
        }
        let res = w.long_reader_results();
        assert_eq!(res["committed"], 3, "{res}");
        assert_eq!(res["rows_read"], 15, "{res}");
        assert_eq!(res["aborted"], 0, "{res}");
        for (bad, what) in [
            (
                Params {
                    rows: 0,
                    ..params()
                },
                "--rows",
            ),
            (
                Params {
                    row_bytes: 10,
                    ..params()
                },
                "--row-bytes",
            ),
            (
                Params {
                    zipf: -1.0,
                    ..params()
                },
                "--zipf",
            ),
            (
                Params {
                    rate: Some(0),
                    ..params()
                },
                "--rate",
            ),
            (
                Params {
                    tables: 0,
                    ..params()
                },
                "--tables",
            ),
            (
                Params {
                    long_read_pct: 0,
                    ..params()
                },
                "--long-read-pct",
            ),
            (
                Params {
                    llt_at_s: 1.0,
                    ..params()
                },
                "--llt-at 1",
            ),
        ] {
            let e = bad.validate().unwrap_err();
            assert!(e.contains(what), "{e}");
        }
        assert!(params().validate().is_ok());
    }
}
