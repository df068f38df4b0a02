//! Opening a data directory: lock it, recover it, start logging (thesis ch. 4).
//!
//! Layout of a data directory:
//! - `IDENTITY` — format version and database id, written first (`log/identity.rs`);
//! - `LOCK` — held (`flock`) by the one process that has the directory open;
//! - `catalog` — every CREATE TABLE / CREATE INDEX / CREATE PROCEDURE (`log/catalog.rs`);
//! - `log-LL-SSSSSSSSSS` — the files of logger `LL`, in sequence `S` (`log/mod.rs`);
//! - `pepoch` and `pepoch-mirror` — persistent-epoch records: the durable epoch, where each
//!   logger's durable bytes end, which files it needs, the current checkpoint and the
//!   catalog's length (ERMIA: `seg-*` files and `durable-lsn`, with its mirror);
//! - `checkpoint-TTTTTTTTTTTTTTTTTTTT/` — a transactionally consistent checkpoint as of
//!   timestamp `T` (`checkpoint.rs`), and `CURRENT`, which names the newest complete one.
//!
//! Recovery (`Config::recovery`, thesis §4.7.1's schemes):
//! 0. `plan.rs` checks that every file the durable points and the checkpoint need is there
//!    (and nothing is written before the whole recovery has succeeded);
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
//! 5. the log is replayed (`replay.rs`): `serial` runs every record in commit order on one
//!    thread, one record to a replay transaction (a call runs compiled, as it ran forward;
//!    with `pacman`, the schemes that replay procedure calls);
//!    `parallel-latched` lets threads apply records in any order to a latched table of row
//!    images where the newest write of each column wins; `parallel-partitioned` shuffles the
//!    changes by table and key into one partition per thread, each replayed in commit order
//!    without latches; `physical` (PLR, for a physical log) puts the checkpoint's rows back at
//!    their tuple ids, installs the newest record of each tuple id there (threads own
//!    disjoint ids: no latches, no key lookups), then rebuilds every index in parallel;
//!    `pacman` (CLR-P, `pacman/`) splits every call into pieces by the procedures' static
//!    analysis and runs them on the threads, per log batch, block after parent block and in
//!    log order per key (row records as write-only pieces).
//!    `auto` is `serial` if the log holds calls, `physical` if it holds physical records,
//!    else partitioned;
//! 6. if there was anything to recover, a fresh checkpoint is written and the old logs are
//!    deleted: the new session's epochs and log sequence numbers continue after the old ones,
//!    and its records are all newer than that checkpoint, so a later recovery never confuses
//!    a non-durable record of the old session with a durable one of the new.

pub mod checkpoint;
pub mod inspect;
mod pacman;
pub(crate) mod plan;
mod replay;

pub use crate::log::durable::RecoveryReport;

use crate::config::{Config, Isolation, RecoveryScheme};
use crate::engine::Database;
use crate::error::{Error, Result};
use crate::log::catalog::{Catalog, Record, TableRecord};
use crate::log::durable::DurableState;
use crate::log::format::{self, Get};
use crate::log::identity::{self, DbId, FileHeader, FileKind};
use crate::log::{LogManager, PointFile, COMMAND, LOG_MAGIC};
use crate::procedure::Procedure;
use crate::storage::TableRef;
use crate::txn::TxnOptions;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

impl Database {
    /// Opens a database after validating `config`: memory-only, or durable in
    /// `Config::data_dir` (an existing directory is recovered first; `recovery/`).
    pub fn open(config: Config) -> Result<Database> {
        config.validate()?;
        let db = if config.data_dir.is_some() {
            open(config)?
        } else {
            Self::new_in_memory(config, None)
        };
        db.start_gc_threads()?;
        Ok(db)
    }

    /// Checks the data directory of `config` as opening it would — every file, every record
    /// replayed into memory — and writes nothing: no checkpoint, no log, not even a lock file
    /// (an existing `LOCK` is taken shared, so a directory another process has open is
    /// refused with `Error::Io`). Returns what recovery would find, or the error opening
    /// would refuse with. Never creates a database.
    pub fn verify(config: Config) -> Result<RecoveryReport> {
        config.validate()?;
        verify(config.create_if_missing(false))
    }

    /// What opening the data directory recovered (`None` for a memory-only database).
    pub fn recovery_report(&self) -> Option<&RecoveryReport> {
        self.shared.durable.as_ref().and_then(|d| d.report.get())
    }
}

/// The identity of `dir`, creating the database when `create` allows and the directory is
/// new or empty. Nothing is written into a non-empty directory that is not a database.
fn identify(dir: &Path, create: bool) -> Result<DbId> {
    let not_db = |message: String| Error::NotADataDirectory {
        path: dir.display().to_string(),
        message,
    };
    match std::fs::metadata(dir) {
        Ok(m) if !m.is_dir() => return Err(not_db("it is a file, not a directory".into())),
        Ok(_) => {
            if let Some(id) = identity::read(dir)? {
                return Ok(id);
            }
            let mut names = Vec::new();
            for e in std::fs::read_dir(dir).map_err(|e| Error::io(dir, &e))? {
                let e = e.map_err(|e| Error::io(dir, &e))?;
                let n = e.file_name().to_string_lossy().to_string();
                // A creation that stopped before its identity was renamed into place.
                if n != "IDENTITY.tmp" {
                    names.push(n);
                }
            }
            if !names.is_empty() {
                names.sort();
                names.truncate(3);
                return Err(not_db(format!(
                    "it is not empty ({}, ...) and has no IDENTITY file; refusing to write \
                     into it",
                    names.join(", ")
                )));
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(Error::io(dir, &e)),
    }
    if !create {
        return Err(not_db(if dir.exists() {
            "there is no database here (no IDENTITY file); opening with a data directory \
             creates one"
                .into()
        } else {
            "no such directory".into()
        }));
    }
    std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, &e))?;
    identity::create(dir)
}

/// Takes `dir`'s lock: exclusively to open it, shared to verify it (`None` if there is no
/// lock file to share: nobody has it open).
fn lock(dir: &Path, shared: bool) -> Result<Option<File>> {
    let lock_path = dir.join("LOCK");
    let lock = if shared {
        match File::open(&lock_path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            r => r,
        }
    } else {
        std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
    }
    .map_err(|e| Error::io(&lock_path, &e))?;
    let r = if shared {
        lock.try_lock_shared()
    } else {
        lock.try_lock()
    };
    match r {
        Ok(()) => Ok(Some(lock)),
        Err(std::fs::TryLockError::WouldBlock) => Err(Error::Io {
            path: dir.display().to_string(),
            message: "the data directory is open in another process or Database \
                      (its LOCK file is held)"
                .into(),
        }),
        Err(std::fs::TryLockError::Error(e)) => Err(Error::io(&lock_path, &e)),
    }
}

/// Opens (creating or recovering) the durable database of `config.data_dir`.
pub(crate) fn open(config: crate::Config) -> Result<Database> {
    let Some(dir) = config.data_dir.clone() else {
        return Err(Error::InvalidConfig("no data directory".into()));
    };
    let id = identify(&dir, config.create_if_missing)?;
    let lock = lock(&dir, false)?;
    let state = DurableState::new(dir.clone(), id, lock);
    let db = Database::new_in_memory(config, Some(state));
    let (mut report, next) = recover(&db, &dir, id)?;
    let Some(state) = db.shared.durable.as_ref() else {
        return Err(Error::InvalidConfig("no data directory".into()));
    };
    // Every file the new session writes to is opened before anything is replaced or
    // deleted: a recovery that fails (a permission error, say) leaves the directory as it was.
    let fsync = db.shared.config.fsync == crate::config::FsyncPolicy::Always;
    let point = PointFile::open(
        &dir.join(match db.shared.config.log_manager {
            crate::config::LogManagerKind::Epoch => crate::log::PEPOCH_FILE,
            crate::config::LogManagerKind::Ermia => crate::log::ermia::DURABLE_LSN_FILE,
        }),
        fsync,
    )?;
    let catalog = Catalog::open(&dir, id, next.catalog_intact)?;
    let catalog_bytes = catalog.len();
    *state.catalog.lock() = Some(catalog);
    let mut checkpoint = next.checkpoint_ts;
    if next.checkpoint {
        // Before the new log starts: until this checkpoint is current, the old logs and
        // their durable points are exactly as the crash left them, so a crash here recovers
        // the same state again. (Started first, a new session's durable point could cover
        // an old file's never-acknowledged tail.) New files continue at `next.seq`.
        let t = Instant::now();
        let files = match db.shared.config.log_manager {
            crate::config::LogManagerKind::Epoch => db.shared.config.loggers,
            crate::config::LogManagerKind::Ermia => 1,
        };
        checkpoint = Some(db.write_checkpoint(state, vec![next.seq; files])?.ts);
        report.checkpoint_write = t.elapsed();
    }
    let extra = crate::log::control::PointExtra {
        first: Vec::new(),
        checkpoint,
        catalog_bytes,
        version: 0,
    };
    let log = Arc::new(LogManager::start(
        &dir,
        &db.shared.config,
        db.shared.txns.len(),
        next.epoch,
        next.seq,
        &db.shared.clock,
        id,
        extra,
        point,
    )?);
    let _ = state.log.set(log.clone());
    let _ = db.shared.log.set(log);
    let _ = state.report.set(report);
    Ok(db)
}

/// `Database::verify`: recovers `config.data_dir` into memory and reports what it found,
/// writing nothing (not even a lock file: it takes the existing one shared).
pub(crate) fn verify(config: crate::Config) -> Result<RecoveryReport> {
    verify_db(config).map(|(_, r)| r)
}

/// [`verify`], keeping the recovered database (in memory, its directory untouched; for
/// tests that recover one directory several ways).
pub(crate) fn verify_db(config: crate::Config) -> Result<(Database, RecoveryReport)> {
    let Some(dir) = config.data_dir.clone() else {
        return Err(Error::InvalidConfig(
            "verify needs a data directory (Config::data_dir)".into(),
        ));
    };
    let id = identify(&dir, false)?;
    let lock = lock(&dir, true)?;
    let state = DurableState::new(dir.clone(), id, lock);
    let db = Database::new_in_memory(config, Some(state));
    let (report, _) = recover(&db, &dir, id)?;
    Ok((db, report))
}

/// Where the new session continues.
struct Next {
    epoch: u64,
    seq: u64,
    /// Something was recovered: close recovery with a checkpoint.
    checkpoint: bool,
    /// The current checkpoint's timestamp, if any.
    checkpoint_ts: Option<u64>,
    /// The catalog's intact length (a torn last record after it is cut when it reopens).
    catalog_intact: u64,
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
    /// Its epoch (PACMAN cuts batches at epoch boundaries); for an ERMIA segment, which has
    /// no epochs, its end LSN / 64 KiB.
    epoch: u64,
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

/// What loading one log file found: its statistics, and what its header says the previous
/// file of its stream was (`u64::MAX`: none, or no header).
struct Loaded {
    stats: FileStats,
    prev_len: u64,
}

/// The header of a log file to load: a file whose durable bytes start past its header must
/// have an intact one (this database's, this name's); a file with nothing durable may have a
/// torn one (its creation was cut short), and is then dropped whole.
fn load_header(
    path: &Path,
    data: &[u8],
    id: DbId,
    kind: FileKind,
    a: u64,
    b: u64,
    durable_end: u64,
) -> Result<Option<FileHeader>> {
    match FileHeader::read(path, data) {
        Ok(Some(h)) => {
            h.check(path, id, kind, a, b)?;
            Ok(Some(h))
        }
        Ok(None) | Err(_) if durable_end == 0 => Ok(None),
        Ok(None) => Err(Error::Corrupt {
            file: path.display().to_string(),
            offset: data.len() as u64,
            message: format!(
                "the file is {} bytes, shorter than its {}-byte header, and holds durable \
                 commits",
                data.len(),
                FileHeader::LEN
            ),
        }),
        Err(e) => Err(e),
    }
}

/// A file whose header never reached the disk: nothing in it is durable; dropped whole.
fn headerless(path: PathBuf, data: Vec<u8>) -> (LogFile, Loaded) {
    let st = FileStats {
        dropped: (!data.is_empty()).then(|| {
            (
                data.len() as u64,
                format!(
                    "{}: {} bytes from offset 0 (a file whose header was never completed)",
                    path.display(),
                    data.len()
                ),
            )
        }),
        ..FileStats::default()
    };
    (
        LogFile {
            path,
            data,
            recs: Vec::new(),
        },
        Loaded {
            stats: st,
            prev_len: u64::MAX,
        },
    )
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

fn recover(db: &Database, dir: &Path, id: DbId) -> Result<(RecoveryReport, Next)> {
    let mut rep = RecoveryReport::default();
    let threads = db.shared.config.recovery_threads;
    rep.threads = threads;
    // 0. Which files must be there (every one is checked before anything is replayed).
    let plan = plan::plan(dir, id)?;
    rep.notes = plan.notes.clone();
    // 1. Tables, under their old ids, then procedures.
    let (records, catalog_intact) = Catalog::read(dir, id, plan.catalog_bytes)?;
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
    let manifest = plan.manifest.clone();
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
            let rows = tm.read(&m.dir, tr.schema.row_size, id, m.ts)?;
            Ok((tr, tm, rows))
        })?;
    }
    rep.checkpoint_load = t.elapsed();
    let ckpt_ts = manifest.as_ref().map_or(0, |m| m.ts);

    // 3. Logs, one file per thread.
    let t = Instant::now();
    let durable_epoch = plan.pe.as_ref().map_or(0, |p| p.epoch);
    rep.persistent_epoch = durable_epoch;
    rep.durable_lsn = plan.dl.as_ref().map_or(0, |p| p.epoch);
    let durable_lsn = rep.durable_lsn;
    let any_log = plan.any_log;
    let max_seq = plan.next_seq - 1;
    let loaded = in_parallel(threads, plan.sources.clone(), |src| match src.stream {
        plan::Stream::Logger(logger) => load_file(
            src.path,
            id,
            logger,
            src.seq,
            src.durable_end,
            durable_epoch,
            ckpt_ts,
        ),
        plan::Stream::Segment(start) => load_segment(
            src.path,
            id,
            src.seq,
            start,
            src.durable_end,
            durable_lsn,
            ckpt_ts,
        ),
    })?;
    // `loaded[i]` is `plan.sources[i]`'s file (`in_parallel` keeps the order).
    // A file the durable point covers to its end must be as long as its successor's header
    // says it was (a cut at a block boundary shows no damage of its own).
    let files: Vec<(&plan::Source, &(LogFile, Loaded))> =
        plan.sources.iter().zip(&loaded).collect();
    for w in files.windows(2) {
        let ((src, (f, _)), (next, (_, after))) = (w[0], w[1]);
        let expect = after.prev_len;
        let len = f.data.len() as u64;
        if src.durable_end == u64::MAX
            && src.stream.same(&next.stream)
            && next.seq == src.seq + 1
            && expect != u64::MAX
            && len != expect
        {
            return Err(Error::Corrupt {
                file: src.path.display().to_string(),
                offset: len.min(expect),
                message: format!(
                    "{len} bytes, but it was {expect} bytes when its log moved on to the next \
                     file (acknowledged commits are missing)"
                ),
            });
        }
    }
    // Records in a file with no durable-point record of its manager: that record was lost.
    for (src, (f, st)) in &files {
        let (point, missing) = match src.stream {
            plan::Stream::Logger(_) => (crate::log::PEPOCH_FILE, plan.pe.is_none()),
            plan::Stream::Segment(_) => (crate::log::ermia::DURABLE_LSN_FILE, plan.dl.is_none()),
        };
        if missing && st.stats.records > 0 {
            return Err(Error::Corrupt {
                file: dir.join(point).display().to_string(),
                offset: 0,
                message: format!(
                    "missing (with its mirror), but {} holds {} commit records: which of them \
                     were acknowledged is unknown",
                    f.path.display(),
                    st.stats.records
                ),
            });
        }
    }
    let mut max_ts = ckpt_ts;
    let mut max_epoch = durable_epoch;
    let mut logs = Vec::new();
    for (f, st) in loaded {
        let st = st.stats;
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
    let scheme = resolve_scheme(db.shared.config.recovery, &rep)?;
    rep.scheme = scheme.name().to_string();

    // 4. Checkpoint rows into the tables, in chunks spread over the threads.
    let t = Instant::now();
    const CHUNK_ROWS: usize = 1 << 14;
    if scheme == RecoveryScheme::Physical {
        // PLR: every row back at its tuple id, no index touched (they are rebuilt at the end).
        let ckpt_dir = manifest.as_ref().map(|m| m.dir.clone()).unwrap_or_default();
        let tids = in_parallel(threads, ckpt.iter().collect(), |(_, tm, _)| {
            tm.read_tids(&ckpt_dir, id, ckpt_ts)
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
        RecoveryScheme::Pacman => pacman::replay(&ctx, &logs, &mut rep)?,
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
    let clock = &db.shared.clock;
    // `partial-order`: the last replay transactions' group may still be open (replay draws
    // its own timestamps, one group per replay transaction at most): close it and wait, so a
    // snapshot taken now holds every replayed row. (A no-op under the counters.)
    clock.floor(clock.newest_end_ts())?;
    clock.advance_to(crate::timestamp::Timestamp::new(max_ts + 1));
    Ok((
        rep,
        Next {
            epoch: max_epoch + 1,
            seq: max_seq + 1,
            checkpoint: any_log || manifest.is_none() && !records.is_empty(),
            checkpoint_ts: manifest.as_ref().map(|m| m.ts),
            catalog_intact,
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
        RecoveryScheme::Pacman => RecoveryScheme::Pacman,
        s if calls > 0 => {
            return Err(Error::InvalidConfig(format!(
                "the log holds {calls} procedure calls (written with log `command`); recovery \
                 `{s}` cannot replay them: open with recovery `serial`, `pacman` or `auto`"
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
    if let Some(d) = &db.shared.durable {
        d.procedure_definitions
            .store(defs.len() as u32, Ordering::Relaxed);
    }
    Ok(defs.into_iter().map(|(_, p)| p.ok()).collect())
}

/// Reads and checks log file `seq` of `logger`: its blocks must be intact up to
/// `durable_end` (the end of its durable bytes; damage after that is a torn tail, dropped).
/// Keeps the records of epochs ≤ `durable_epoch` committed after the checkpoint (`ckpt_ts`).
#[allow(clippy::too_many_arguments)]
fn load_file(
    path: PathBuf,
    id: DbId,
    logger: usize,
    seq: u64,
    durable_end: u64,
    durable_epoch: u64,
    ckpt_ts: u64,
) -> Result<(LogFile, Loaded)> {
    let data = std::fs::read(&path).map_err(|e| Error::io(&path, &e))?;
    let Some(h) = load_header(
        &path,
        &data,
        id,
        FileKind::Log,
        logger as u64,
        seq,
        durable_end,
    )?
    else {
        return Ok(headerless(path, data));
    };
    let mut st = FileStats::default();
    let hl = FileHeader::LEN;
    let (blocks, end, why) = format::read_blocks(&data[hl..], LOG_MAGIC);
    let end = end + hl;
    if let Some(why) = why.or_else(|| cut_short(end, durable_end)) {
        check_tail(&path, &data, end, durable_end, why, &mut st)?;
    }
    let mut recs = Vec::new();
    let base = data.as_ptr() as usize;
    let mut at = hl as u64;
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
                epoch,
                n,
                at: start,
                end: rec.as_ptr() as usize - base + rec.len(),
            });
        }
        at += (format::BLOCK_HEADER + b.len()) as u64;
    }
    Ok((
        LogFile { path, data, recs },
        Loaded {
            stats: st,
            prev_len: h.prev_len,
        },
    ))
}

/// Reads and checks ERMIA segment `seq`, whose first byte after its header is LSN `start`:
/// intact up to `durable_end` (a damaged tail after it is dropped). Keeps the transaction
/// records that end at or below `durable_lsn` and after the checkpoint (`ckpt_ts`); a
/// record's end LSN is its end timestamp.
#[allow(clippy::too_many_arguments)]
fn load_segment(
    path: PathBuf,
    id: DbId,
    seq: u64,
    start: u64,
    durable_end: u64,
    durable_lsn: u64,
    ckpt_ts: u64,
) -> Result<(LogFile, Loaded)> {
    use crate::log::ermia::{walk_segment, HEADER, KIND_SKIP};
    let data = std::fs::read(&path).map_err(|e| Error::io(&path, &e))?;
    let Some(h) = load_header(&path, &data, id, FileKind::Segment, seq, start, durable_end)? else {
        return Ok(headerless(path, data));
    };
    let hl = FileHeader::LEN;
    let mut st = FileStats::default();
    let mut recs = Vec::new();
    let (end, why) = walk_segment(&data[hl..], |r| {
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
            .ok_or_else(|| format::malformed(&path, (hl + r.offset) as u64, "log record"))?;
        st.replayed += 1;
        st.calls += u64::from(n == COMMAND);
        st.physical += u64::from(crate::log::is_physical(n, &r.body[4..]));
        let at = hl + r.offset + HEADER + 4;
        recs.push(Rec {
            ts: lsn_end,
            epoch: lsn_end >> 16,
            n,
            at,
            end: hl + r.offset + HEADER + r.body.len(),
        });
        Ok(())
    })?;
    let end = end + hl;
    if let Some(why) = why.or_else(|| cut_short(end, durable_end)) {
        check_tail(&path, &data, end, durable_end, why, &mut st)?;
    }
    Ok((
        LogFile { path, data, recs },
        Loaded {
            stats: st,
            prev_len: h.prev_len,
        },
    ))
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
    t.tids()
        .filter(|&tid| {
            t.entry(tid).is_some_and(|e| {
                let p = t.newest(e);
                // SAFETY: pinned; a published version lives until after the epoch.
                !p.is_null() && unsafe { !(*p).is_tombstone() }
            })
        })
        .count() as u64
}
