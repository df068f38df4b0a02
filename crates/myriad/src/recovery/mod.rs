//! Opening a data directory: lock it, recover it, start logging (thesis ch. 4).
//!
//! Layout of a data directory:
//! - `LOCK` — held (`flock`) by the one process that has the directory open;
//! - `catalog` — every CREATE TABLE / CREATE INDEX / CREATE PROCEDURE (`log/catalog.rs`);
//! - `log-LL-SSSSSSSSSS` — the files of logger `LL`, in sequence `S` (`log/mod.rs`);
//! - `pepoch` — persistent-epoch records: the durable epoch and where each logger's durable
//!   bytes end;
//! - `checkpoint-TTTTTTTTTTTTTTTTTTTT/` — a transactionally consistent checkpoint as of
//!   timestamp `T` (`checkpoint.rs`), and `CURRENT`, which names the newest complete one.
//!
//! Recovery (`Config::recovery`, thesis §4.7.1's schemes):
//! 1. the catalog recreates every table under its old id (log records name tables by id) and
//!    compiles every procedure definition (command records name definitions);
//! 2. the current checkpoint's files are read and checked;
//! 3. every log file from the checkpoint's first needed sequence on is read, one file per
//!    thread (log load): bytes up to the durable position of the last persistent-epoch record
//!    must be intact (else `Error::Corrupt` naming file and offset, and nothing is changed);
//!    a damaged tail after it is dropped and counted. Of the intact records, those of epochs
//!    ≤ the persistent epoch and end timestamps after the checkpoint's are kept;
//! 4. the checkpoint's rows are inserted through the normal write path, tables split among
//!    the threads (every index is built on the way: only PLR has a separate index phase);
//! 5. the log is replayed (`replay.rs`): `serial` runs every record as a transaction in
//!    commit order on one thread (the only scheme that can replay procedure calls);
//!    `parallel-latched` lets threads apply records in any order to a latched table of row
//!    images where the newest write of each column wins; `parallel-partitioned` shuffles the
//!    changes by table and key into one partition per thread, each replayed in commit order
//!    without latches; `physical` (PLR, for a physical log) puts the checkpoint's rows back at
//!    their tuple ids, installs the newest record of each tuple id there (threads own
//!    disjoint ids: no latches, no key lookups), then rebuilds every index in parallel.
//!    `auto` is `serial` if the log holds calls, `physical` if it holds physical records,
//!    else partitioned;
//! 6. if there was anything to recover, a fresh checkpoint is written and the old logs are
//!    deleted: the new session's epochs and log sequence numbers continue after the old ones,
//!    and its records are all newer than that checkpoint, so a later recovery never confuses
//!    a non-durable record of the old session with a durable one of the new.

pub mod checkpoint;
mod replay;

use crate::config::{Isolation, RecoveryScheme};
use crate::engine::Database;
use crate::error::{Error, Result};
use crate::log::catalog::{Catalog, Record, TableRecord};
use crate::log::format::{self, Get};
use crate::log::{LogManager, PersistentEpoch, COMMAND, LOG_MAGIC};
use crate::procedure::Procedure;
use crate::schema::TableSchema;
use crate::storage::TableRef;
use crate::txn::TxnOptions;
use checkpoint::Manifest;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

/// State of a durable database's directory.
pub(crate) struct DurableState {
    pub dir: PathBuf,
    _lock: File,
    /// `None` while recovery recreates the tables (their records are already in it).
    catalog: Mutex<Option<Catalog>>,
    pub checkpoint_lock: Mutex<()>,
    pub report: OnceLock<RecoveryReport>,
    /// Procedure definitions in the catalog so far (the next one gets this number).
    pub procedure_definitions: AtomicU32,
}

impl DurableState {
    pub(crate) fn log_table(
        &self,
        id: u32,
        replaces: Option<u32>,
        schema: &TableSchema,
    ) -> Result<()> {
        self.log_catalog(&Record::Table(TableRecord {
            id,
            replaces,
            schema: schema.clone(),
        }))
        .map(drop)
    }

    /// Makes a catalog change durable; false (nothing written) while recovery replays the
    /// catalog.
    pub(crate) fn log_catalog(&self, r: &Record) -> Result<bool> {
        match self.catalog.lock().as_mut() {
            Some(c) => c.append(r).map(|_| true),
            None => Ok(false),
        }
    }
}

/// What opening a data directory found and did, with the time of each phase.
#[derive(Clone, Debug, Default)]
pub struct RecoveryReport {
    /// The replay scheme used (`auto` resolved).
    pub scheme: String,
    pub threads: usize,
    /// Timestamp of the checkpoint recovery started from, if any.
    pub checkpoint_ts: Option<u64>,
    pub checkpoint_rows: u64,
    /// The persistent epoch: every commit of this epoch or earlier was recovered (epoch
    /// manager's log files).
    pub persistent_epoch: u64,
    /// The durable LSN: every commit ending at or below it was recovered (ERMIA segments).
    pub durable_lsn: u64,
    pub log_files: usize,
    pub log_bytes: u64,
    /// Transaction records read from intact log blocks.
    pub log_records: u64,
    /// Of those, records recovered (epoch ≤ persistent epoch, newer than the checkpoint).
    pub records_replayed: u64,
    /// Of the recovered records, procedure calls (command logging).
    pub calls_replayed: u64,
    /// Of the recovered records, physical ones (tuple ids and whole rows).
    pub physical_replayed: u64,
    /// Records past the persistent epoch or durable LSN: commits never acknowledged.
    pub records_not_durable: u64,
    /// ERMIA skip records: log space reserved by transactions that then aborted.
    pub skip_records: u64,
    /// Bytes of damaged or torn log tails dropped (after the durable position).
    pub bytes_dropped: u64,
    /// One line per dropped tail: file, offset and why.
    pub dropped: Vec<String>,
    pub tables: usize,
    /// Rows in the recovered database.
    pub rows: u64,
    /// Reading the checkpoint's files and inserting their rows (indexes built on the way).
    pub checkpoint_load: Duration,
    /// Reading and checking the log files.
    pub log_load: Duration,
    /// Applying the log records.
    pub replay: Duration,
    /// Rebuilding the indexes (PLR only; the other schemes build them on the way).
    pub index_build: Duration,
    /// Writing the checkpoint that closes recovery.
    pub checkpoint_write: Duration,
}

impl RecoveryReport {
    /// Total time of the phases.
    pub fn total(&self) -> Duration {
        self.checkpoint_load
            + self.log_load
            + self.replay
            + self.index_build
            + self.checkpoint_write
    }
}

impl Database {
    /// What opening the data directory recovered (`None` for a memory-only database).
    pub fn recovery_report(&self) -> Option<&RecoveryReport> {
        self.durable.as_ref().and_then(|d| d.report.get())
    }
}

/// Opens (creating or recovering) the durable database of `config.data_dir`.
pub(crate) fn open(config: crate::Config) -> Result<Database> {
    let Some(dir) = config.data_dir.clone() else {
        return Err(Error::InvalidConfig("no data directory".into()));
    };
    std::fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, &e))?;
    let lock_path = dir.join("LOCK");
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(|e| Error::io(&lock_path, &e))?;
    match lock.try_lock() {
        Ok(()) => {}
        Err(std::fs::TryLockError::WouldBlock) => {
            return Err(Error::Io {
                path: dir.display().to_string(),
                message: "the data directory is open in another process or Database \
                          (its LOCK file is held)"
                    .into(),
            })
        }
        Err(std::fs::TryLockError::Error(e)) => return Err(Error::io(&lock_path, &e)),
    }
    let state = DurableState {
        dir: dir.clone(),
        _lock: lock,
        catalog: Mutex::new(None),
        checkpoint_lock: Mutex::new(()),
        report: OnceLock::new(),
        procedure_definitions: AtomicU32::new(0),
    };
    let db = Database::new_in_memory(config, Some(state));
    let (report, next) = recover(&db, &dir)?;
    let Some(state) = db.durable.as_ref() else {
        return Err(Error::InvalidConfig("no data directory".into()));
    };
    *state.catalog.lock() = Some(Catalog::open(&dir)?);
    let mut report = report;
    if next.checkpoint {
        // Before the new log starts: until this checkpoint is current, the old logs and
        // their durable points are exactly as the crash left them, so a crash here recovers
        // the same state again. (Started first, a new session's durable point could cover
        // an old file's never-acknowledged tail.) New files continue at `next.seq`.
        let t = Instant::now();
        let files = match db.config.log_manager {
            crate::config::LogManagerKind::Epoch => db.config.loggers,
            crate::config::LogManagerKind::Ermia => 1,
        };
        db.write_checkpoint(state, vec![next.seq; files])?;
        report.checkpoint_write = t.elapsed();
    }
    let log = LogManager::start(
        &dir,
        &db.config,
        db.txns.len(),
        next.epoch,
        next.seq,
        &db.clock,
    )?;
    let _ = db.log.set(Arc::new(log));
    let _ = state.report.set(report);
    Ok(db)
}

/// Where the new session continues.
struct Next {
    epoch: u64,
    seq: u64,
    /// Something was recovered: close recovery with a checkpoint.
    checkpoint: bool,
}

/// A log file's bytes and the records of it to replay.
pub(super) struct LogFile {
    path: PathBuf,
    data: Vec<u8>,
    recs: Vec<Rec>,
}

/// A record to replay: its end timestamp, its write count (`COMMAND` for a procedure call)
/// and where its writes (or the call) are in the file's bytes.
#[derive(Clone, Copy)]
pub(super) struct Rec {
    ts: u64,
    n: u32,
    at: usize,
    end: usize,
}

impl LogFile {
    fn body(&self, r: &Rec) -> &[u8] {
        &self.data[r.at..r.end]
    }
}

/// What reading one log file found.
#[derive(Default)]
struct FileStats {
    records: u64,
    replayed: u64,
    calls: u64,
    physical: u64,
    not_durable: u64,
    skips: u64,
    max_ts: u64,
    max_epoch: u64,
    dropped: Option<(u64, String)>,
}

/// A log file to load: one of the epoch manager's (logger, seq, path), or an ERMIA segment
/// (seq, first LSN, path).
enum LogSource {
    Epoch((usize, u64, PathBuf)),
    Segment(u64, u64, PathBuf),
}

/// Runs `f` on every item on `threads` threads (items taken in order from a shared queue);
/// returns the results in item order, or the first error.
pub(super) fn in_parallel<T: Send, R: Send>(
    threads: usize,
    items: Vec<T>,
    f: impl Fn(T) -> Result<R> + Sync,
) -> Result<Vec<R>> {
    let n = items.len();
    let queue = Mutex::new(items.into_iter().enumerate());
    let out: Mutex<Vec<Option<R>>> = Mutex::new((0..n).map(|_| None).collect());
    let failed: Mutex<Option<Error>> = Mutex::new(None);
    std::thread::scope(|s| {
        for _ in 0..threads.clamp(1, n.max(1)) {
            s.spawn(|| loop {
                if failed.lock().is_some() {
                    return;
                }
                let Some((i, item)) = queue.lock().next() else {
                    return;
                };
                match f(item) {
                    Ok(r) => out.lock()[i] = Some(r),
                    Err(e) => {
                        failed.lock().get_or_insert(e);
                        return;
                    }
                }
            });
        }
    });
    if let Some(e) = failed.into_inner() {
        return Err(e);
    }
    Ok(out.into_inner().into_iter().flatten().collect())
}

/// Writes through transactions of up to `BATCH` operations (recovery runs before any client,
/// so a batch never conflicts; batching saves a commit per row).
pub(super) struct Batcher<'db> {
    db: &'db Database,
    tx: Option<crate::txn::Transaction<'db>>,
    ops: usize,
}

impl<'db> Batcher<'db> {
    const BATCH: usize = 512;

    pub(super) fn new(db: &'db Database) -> Self {
        Batcher {
            db,
            tx: None,
            ops: 0,
        }
    }

    /// The open transaction (begun if needed); call `done_op` after each operation.
    pub(super) fn tx(&mut self) -> Result<&mut crate::txn::Transaction<'db>> {
        if self.tx.is_none() {
            self.tx = Some(self.db.begin_replay(TxnOptions {
                isolation: Isolation::Snapshot,
                read_only: false,
            })?);
        }
        self.tx
            .as_mut()
            .ok_or_else(|| Error::InvalidConfig("no recovery transaction".into()))
    }

    pub(super) fn done_op(&mut self) -> Result<()> {
        self.ops += 1;
        if self.ops >= Self::BATCH {
            self.finish()?;
        }
        Ok(())
    }

    pub(super) fn finish(&mut self) -> Result<()> {
        self.ops = 0;
        match self.tx.take() {
            Some(tx) => tx.commit_deferred().map(drop),
            None => Ok(()),
        }
    }
}

/// Recovery's view of a write error: two rows with one key means the files are inconsistent.
pub(super) fn as_corrupt(e: Error) -> Error {
    match e {
        Error::DuplicateKey { table, index } => Error::Corrupt {
            file: format!("checkpoint or log of table `{table}`"),
            offset: 0,
            message: format!("two rows with the same key in index `{index}`"),
        },
        e => e,
    }
}

fn recover(db: &Database, dir: &Path) -> Result<(RecoveryReport, Next)> {
    let mut rep = RecoveryReport::default();
    let threads = db.config.recovery_threads;
    rep.threads = threads;
    // 1. Tables, under their old ids, then procedures.
    let records = Catalog::read(dir)?;
    let table_records: Vec<&TableRecord> = records
        .iter()
        .filter_map(|r| match r {
            Record::Table(t) => Some(t),
            Record::Procedures(_) => None,
        })
        .collect();
    let replaced: Vec<u32> = table_records.iter().filter_map(|r| r.replaces).collect();
    let mut by_id: HashMap<u32, TableRef> = HashMap::new();
    let mut names: HashMap<u32, String> = HashMap::new();
    for r in &table_records {
        names.insert(r.id, r.schema.name.clone());
    }
    for r in &table_records {
        if !replaced.contains(&r.id) {
            by_id.insert(r.id, db.restore_table(r.id, r.schema.clone())?);
        }
    }
    // Records written under a replaced id belong to the table that replaced it.
    let resolve_id: HashMap<u32, u32> = names
        .keys()
        .filter_map(|&id0| {
            let mut id = id0;
            for _ in 0..table_records.len() + 1 {
                if by_id.contains_key(&id) {
                    return Some((id0, id));
                }
                id = table_records.iter().find(|r| r.replaces == Some(id))?.id;
            }
            None
        })
        .collect();
    rep.tables = by_id.len();
    let definitions = restore_procedures(db, dir, &records)?;

    // 2. Checkpoint files.
    let t = Instant::now();
    let manifest = Manifest::read_current(dir)?;
    let mut ckpt: Vec<(TableRef, &checkpoint::TableManifest, Vec<u8>)> = Vec::new();
    if let Some(m) = &manifest {
        rep.checkpoint_ts = Some(m.ts);
        let mut files = Vec::new();
        for tm in &m.tables {
            let Some(tr) = resolve_id.get(&tm.id).and_then(|id| by_id.get(id)) else {
                return Err(Error::Corrupt {
                    file: m.dir.join(&tm.file).display().to_string(),
                    offset: 0,
                    message: format!("checkpoint of table id {} not in the catalog", tm.id),
                });
            };
            rep.checkpoint_rows += tm.rows;
            files.push((tr.clone(), tm));
        }
        // One table file per thread at a time.
        ckpt = in_parallel(threads, files, |(tr, tm)| {
            let rows = tm.read(&m.dir, tr.schema.row_size)?;
            Ok((tr, tm, rows))
        })?;
    }
    rep.checkpoint_load = t.elapsed();
    let ckpt_ts = manifest.as_ref().map_or(0, |m| m.ts);

    // 3. Logs, one file per thread.
    let t = Instant::now();
    let pe = PersistentEpoch::read_last(dir)?;
    let durable_epoch = pe.as_ref().map_or(0, |p| p.epoch);
    rep.persistent_epoch = durable_epoch;
    let all = crate::log::log_files(dir)?;
    let any_log = !all.is_empty();
    let max_seq = all.iter().map(|f| f.1).max().unwrap_or(0);
    let first = |logger: usize| {
        manifest
            .as_ref()
            .map_or(0, |m| m.first_seq.get(logger).copied().unwrap_or(0))
    };
    let files: Vec<(usize, u64, PathBuf)> = all.into_iter().filter(|f| f.1 >= first(f.0)).collect();
    // ERMIA's segments: one log, judged by the durable LSN.
    let dl = PersistentEpoch::read_last_of(&dir.join(crate::log::ermia::DURABLE_LSN_FILE))?;
    rep.durable_lsn = dl.as_ref().map_or(0, |p| p.epoch);
    let durable_lsn = rep.durable_lsn;
    let first_segment = manifest
        .as_ref()
        .map_or(0, |m| m.first_seq.iter().copied().min().unwrap_or(0));
    let segments = crate::log::ermia::segment_files(dir)?;
    let any_log = any_log || !segments.is_empty();
    let max_seq = max_seq.max(segments.iter().map(|f| f.0).max().unwrap_or(0));
    let mut work: Vec<LogSource> = files.into_iter().map(LogSource::Epoch).collect();
    work.extend(
        segments
            .into_iter()
            .filter(|f| f.0 >= first_segment)
            .map(|(seq, start, path)| LogSource::Segment(seq, start, path)),
    );
    let loaded = in_parallel(threads, work, |src| match src {
        LogSource::Epoch((logger, seq, path)) => {
            let end = durable_end(pe.as_ref().and_then(|p| p.positions.get(logger)), seq);
            load_file(path, end, durable_epoch, ckpt_ts)
        }
        LogSource::Segment(seq, start, path) => {
            let end = durable_end(dl.as_ref().and_then(|p| p.positions.first()), seq);
            load_segment(path, start, end, durable_lsn, ckpt_ts)
        }
    })?;
    let mut max_ts = ckpt_ts;
    let mut max_epoch = durable_epoch;
    let mut logs = Vec::new();
    for (f, st) in loaded {
        rep.log_files += 1;
        rep.log_bytes += f.data.len() as u64;
        rep.log_records += st.records;
        rep.records_replayed += st.replayed;
        rep.calls_replayed += st.calls;
        rep.physical_replayed += st.physical;
        rep.records_not_durable += st.not_durable;
        rep.skip_records += st.skips;
        max_ts = max_ts.max(st.max_ts);
        max_epoch = max_epoch.max(st.max_epoch);
        if let Some((bytes, line)) = st.dropped {
            rep.bytes_dropped += bytes;
            rep.dropped.push(line);
        }
        logs.push(f);
    }
    rep.log_load = t.elapsed();
    let scheme = resolve_scheme(db.config.recovery, &rep)?;
    rep.scheme = scheme.name().to_string();

    // 4. Checkpoint rows into the tables, in chunks spread over the threads.
    let t = Instant::now();
    const CHUNK_ROWS: usize = 1 << 14;
    if scheme == RecoveryScheme::Physical {
        // PLR: every row back at its tuple id, no index touched (they are rebuilt at the end).
        let ckpt_dir = manifest.as_ref().map(|m| m.dir.clone()).unwrap_or_default();
        let tids = in_parallel(threads, ckpt.iter().collect(), |(_, tm, _)| {
            tm.read_tids(&ckpt_dir)
        })?;
        let mut chunks = Vec::new();
        for ((tr, _, data), tids) in ckpt.iter().zip(&tids) {
            let size = tr.schema.row_size.max(1);
            for (rows, ids) in data.chunks(CHUNK_ROWS * size).zip(tids.chunks(CHUNK_ROWS)) {
                chunks.push((tr, rows, ids));
            }
        }
        in_parallel(threads, chunks, |(tr, rows, ids)| {
            replay::place_rows(tr, ckpt_ts, rows, ids)
        })?;
    } else {
        let mut chunks = Vec::new();
        for (tr, _, data) in &ckpt {
            let size = tr.schema.row_size.max(1);
            for c in data.chunks(CHUNK_ROWS * size) {
                chunks.push((tr, c));
            }
        }
        in_parallel(threads, chunks, |(tr, rows)| {
            let mut b = Batcher::new(db);
            for row in rows.chunks_exact(tr.schema.row_size) {
                b.tx()?.insert_raw(tr, row).map_err(as_corrupt)?;
                b.done_op()?;
            }
            b.finish()
        })?;
    }
    drop(ckpt);
    rep.checkpoint_load += t.elapsed();

    // 5. Replay.
    let t = Instant::now();
    let ctx = replay::Ctx {
        db,
        tables: &by_id,
        resolve_id: &resolve_id,
        names: &names,
        definitions: &definitions,
        threads,
    };
    match scheme {
        RecoveryScheme::Serial => replay::serial(&ctx, &logs)?,
        RecoveryScheme::ParallelLatched => replay::latched(&ctx, &logs)?,
        RecoveryScheme::ParallelPartitioned => replay::partitioned(&ctx, &logs)?,
        RecoveryScheme::Physical => replay::physical(&ctx, &logs)?,
        RecoveryScheme::Auto => {
            return Err(Error::InvalidConfig(
                "recovery scheme left unresolved".into(),
            ))
        }
    }
    rep.replay = t.elapsed();
    if scheme == RecoveryScheme::Physical {
        let t = Instant::now();
        replay::build_indexes(&ctx)?;
        rep.index_build = t.elapsed();
    }
    rep.rows = by_id.values().map(live_rows).sum();
    db.clock.advance_to(max_ts + 1);
    Ok((
        rep,
        Next {
            epoch: max_epoch + 1,
            seq: max_seq + 1,
            checkpoint: any_log || manifest.is_none() && !records.is_empty(),
        },
    ))
}

/// The scheme that replays what the log holds: `auto` picks by its content; an explicit
/// scheme that cannot replay it is refused, naming what it holds.
fn resolve_scheme(asked: RecoveryScheme, rep: &RecoveryReport) -> Result<RecoveryScheme> {
    let (calls, phys) = (rep.calls_replayed, rep.physical_replayed);
    let logical = rep.records_replayed - calls - phys;
    if phys > 0 && (calls > 0 || logical > 0) {
        return Err(Error::Corrupt {
            file: "log".into(),
            offset: 0,
            message: format!(
                "the log mixes {phys} physical records with {} logical or command records",
                calls + logical
            ),
        });
    }
    Ok(match asked {
        RecoveryScheme::Auto if calls > 0 => RecoveryScheme::Serial,
        RecoveryScheme::Auto if phys > 0 => RecoveryScheme::Physical,
        RecoveryScheme::Auto => RecoveryScheme::ParallelPartitioned,
        RecoveryScheme::Physical if calls + logical > 0 => {
            return Err(Error::InvalidConfig(format!(
                "the log holds {} logical or command records; recovery `physical` replays \
                 only a physical log (written with log `physical`): open with another scheme \
                 or `auto`",
                calls + logical
            )))
        }
        s if phys > 0 && s != RecoveryScheme::Physical => {
            return Err(Error::InvalidConfig(format!(
                "the log holds {phys} physical records (written with log `physical`); \
                 recovery `{s}` cannot replay them: open with recovery `physical` or `auto`"
            )))
        }
        RecoveryScheme::Serial => RecoveryScheme::Serial,
        s if calls > 0 => {
            return Err(Error::InvalidConfig(format!(
                "the log holds {calls} procedure calls (written with log `command`); recovery \
                 `{s}` cannot replay them: open with recovery `serial` or `auto`"
            )))
        }
        s => s,
    })
}

/// Compiles every procedure definition of the catalog, in order (their numbers are what
/// command records name), and registers the newest of each name.
fn restore_procedures(
    db: &Database,
    dir: &Path,
    records: &[Record],
) -> Result<Vec<Option<Arc<Procedure>>>> {
    let mut defs: Vec<(String, Result<Arc<Procedure>>)> = Vec::new();
    for r in records {
        if let Record::Procedures(sqls) = r {
            for sql in sqls {
                let n = defs.len() as u32;
                let p = db.procedure_from_catalog(sql, n);
                let name = match &p {
                    Ok(p) => p.name().to_ascii_lowercase(),
                    Err(_) => String::new(),
                };
                defs.push((name, p.map(Arc::new)));
            }
        }
    }
    let mut newest: HashMap<&str, usize> = HashMap::new();
    for (i, (name, _)) in defs.iter().enumerate() {
        newest.insert(name, i);
    }
    let mut reg = db.procedures.write().unwrap_or_else(|e| e.into_inner());
    for (i, (name, p)) in defs.iter().enumerate() {
        match p {
            Ok(p) if newest.get(name.as_str()) == Some(&i) => {
                reg.insert(name.clone(), p.clone());
            }
            Err(e) if name.is_empty() || newest.get(name.as_str()) == Some(&i) => {
                return Err(Error::Corrupt {
                    file: dir
                        .join(crate::log::catalog::CATALOG_FILE)
                        .display()
                        .to_string(),
                    offset: 0,
                    message: format!("procedure definition {i} does not compile: {e}"),
                });
            }
            _ => {}
        }
    }
    drop(reg);
    if let Some(d) = &db.durable {
        d.procedure_definitions
            .store(defs.len() as u32, Ordering::Relaxed);
    }
    Ok(defs.into_iter().map(|(_, p)| p.ok()).collect())
}

/// Reads and checks one log file: its blocks must be intact up to `durable_end` (the end of
/// its durable bytes; damage after that is a torn tail, dropped). Keeps the records of epochs
/// ≤ `durable_epoch` committed after the checkpoint (`ckpt_ts`).
fn load_file(
    path: PathBuf,
    durable_end: u64,
    durable_epoch: u64,
    ckpt_ts: u64,
) -> Result<(LogFile, FileStats)> {
    let data = std::fs::read(&path).map_err(|e| Error::io(&path, &e))?;
    let mut st = FileStats::default();
    let (blocks, end, why) = format::read_blocks(&data, LOG_MAGIC);
    if let Some(why) = why.or_else(|| cut_short(end, durable_end)) {
        check_tail(&path, &data, end, durable_end, why, &mut st)?;
    }
    let mut recs = Vec::new();
    let base = data.as_ptr() as usize;
    let mut at = 0u64;
    for b in blocks {
        let bad = || format::malformed(&path, at, "log record");
        let mut g = Get::new(b);
        while !g.done() {
            let rec = crate::log::next_record(&mut g).ok_or_else(bad)?;
            let mut r = Get::new(rec);
            let epoch = r.u64().ok_or_else(bad)?;
            let ts = r.u64().ok_or_else(bad)?;
            let n = r.u32().ok_or_else(bad)?;
            st.records += 1;
            st.max_ts = st.max_ts.max(ts);
            st.max_epoch = st.max_epoch.max(epoch);
            if epoch > durable_epoch {
                st.not_durable += 1;
                continue;
            }
            if ts <= ckpt_ts {
                continue;
            }
            st.replayed += 1;
            st.calls += u64::from(n == COMMAND);
            st.physical += u64::from(crate::log::is_physical(n, &rec[r.at..]));
            let start = rec.as_ptr() as usize - base + r.at;
            recs.push(Rec {
                ts,
                n,
                at: start,
                end: rec.as_ptr() as usize - base + rec.len(),
            });
        }
        at += (format::BLOCK_HEADER + b.len()) as u64;
    }
    Ok((LogFile { path, data, recs }, st))
}

/// Reads and checks one ERMIA segment whose first byte is LSN `start`: intact up to
/// `durable_end` (a damaged tail after it is dropped). Keeps the transaction records that end
/// at or below `durable_lsn` and after the checkpoint (`ckpt_ts`); a record's end LSN is its
/// end timestamp.
fn load_segment(
    path: PathBuf,
    start: u64,
    durable_end: u64,
    durable_lsn: u64,
    ckpt_ts: u64,
) -> Result<(LogFile, FileStats)> {
    use crate::log::ermia::{walk_segment, HEADER, KIND_SKIP};
    let data = std::fs::read(&path).map_err(|e| Error::io(&path, &e))?;
    let mut st = FileStats::default();
    let mut recs = Vec::new();
    let (end, why) = walk_segment(&data, |r| {
        let lsn_end = start + (r.offset + HEADER + r.body.len()) as u64;
        st.max_ts = st.max_ts.max(lsn_end);
        if r.kind == KIND_SKIP {
            st.skips += 1;
            return Ok(());
        }
        st.records += 1;
        if lsn_end > durable_lsn {
            st.not_durable += 1;
            return Ok(());
        }
        if lsn_end <= ckpt_ts {
            return Ok(());
        }
        let mut g = Get::new(r.body);
        let n = g
            .u32()
            .ok_or_else(|| format::malformed(&path, r.offset as u64, "log record"))?;
        st.replayed += 1;
        st.calls += u64::from(n == COMMAND);
        st.physical += u64::from(crate::log::is_physical(n, &r.body[4..]));
        let at = r.offset + HEADER + 4;
        recs.push(Rec {
            ts: lsn_end,
            n,
            at,
            end: r.offset + HEADER + r.body.len(),
        });
        Ok(())
    })?;
    if let Some(why) = why.or_else(|| cut_short(end, durable_end)) {
        check_tail(&path, &data, end, durable_end, why, &mut st)?;
    }
    Ok((LogFile { path, data, recs }, st))
}

/// Where the durable bytes of log file `seq` end, given the durable position of its log:
/// all of an earlier file, up to the offset in the file it names, nothing of a later one.
fn durable_end(durable: Option<&crate::log::LogPos>, seq: u64) -> u64 {
    match durable {
        Some(p) if seq < p.seq => u64::MAX,
        Some(p) if seq == p.seq => p.offset,
        _ => 0,
    }
}

/// A file with no damage that ends at `end`, before its durable bytes do: truncated at a
/// record or block boundary (its last records are gone, which nothing inside it shows).
/// Only a file holding the durable position knows where its durable bytes end; an earlier
/// file (`u64::MAX`) cut at a boundary cannot be told from a complete one.
fn cut_short(end: usize, durable_end: u64) -> Option<String> {
    (durable_end != u64::MAX && (end as u64) < durable_end)
        .then(|| "the file ends (cut at a record boundary)".to_string())
}

/// A log file whose intact prefix ends at `end` for reason `why`: damage before its durable
/// end is `Error::Corrupt`; after it, a torn tail, dropped and counted.
fn check_tail(
    path: &Path,
    data: &[u8],
    end: usize,
    durable_end: u64,
    why: String,
    st: &mut FileStats,
) -> Result<()> {
    if (end as u64) < durable_end {
        return Err(Error::Corrupt {
            file: path.display().to_string(),
            offset: end as u64,
            message: if durable_end == u64::MAX {
                format!("{why}, in a log file that is durable to its end")
            } else {
                format!("{why}, before the end of the durable log (byte {durable_end})")
            },
        });
    }
    st.dropped = Some((
        (data.len() - end) as u64,
        format!(
            "{}: {} bytes from offset {end} ({why})",
            path.display(),
            data.len() - end
        ),
    ));
    Ok(())
}

/// Live rows of `t` (recovery is alone with the tables: heads are read without a snapshot).
fn live_rows(t: &TableRef) -> u64 {
    let _pin = crossbeam_epoch::pin();
    (0..t.tid_count())
        .filter(|&tid| {
            t.entry(tid).is_some_and(|e| {
                let p = t.newest(e);
                // SAFETY: pinned; a published version lives until after the epoch.
                !p.is_null() && unsafe { !(*p).is_tombstone() }
            })
        })
        .count() as u64
}
