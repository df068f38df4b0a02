//! Opening a data directory: lock it, recover it, start logging (thesis ch. 4).
//!
//! Layout of a data directory:
//! - `LOCK` — held (`flock`) by the one process that has the directory open;
//! - `catalog` — every CREATE TABLE / CREATE INDEX (`log/catalog.rs`);
//! - `log-LL-SSSSSSSSSS` — the files of logger `LL`, in sequence `S` (`log/mod.rs`);
//! - `pepoch` — persistent-epoch records: the durable epoch and where each logger's durable
//!   bytes end;
//! - `checkpoint-TTTTTTTTTTTTTTTTTTTT/` — a transactionally consistent checkpoint as of
//!   timestamp `T` (`checkpoint.rs`), and `CURRENT`, which names the newest complete one.
//!
//! Recovery (one scheme so far: logical, last-writer-wins, tables installed in parallel):
//! 1. the catalog recreates every table under its old id (log records name tables by id);
//! 2. the current checkpoint's files are read and checked (checkpoint load);
//! 3. every log file from the checkpoint's first needed sequence on is read (log load): bytes
//!    up to the durable position of the last persistent-epoch record must be intact (else
//!    `Error::Corrupt` naming file and offset, and nothing is changed); a damaged tail after it
//!    is dropped and counted. Of the intact records, those of epochs ≤ the persistent epoch and
//!    end timestamps after the checkpoint's are kept, grouped by table and key;
//! 4. each table is filled (install: inserts through the normal write path, so every index is
//!    built): a key's changes are applied in commit order on top of its checkpoint row — a put
//!    replaces the row, a delete removes it, a patch overwrites the columns it names;
//! 5. if there was anything to recover, a fresh checkpoint is written and the old logs are
//!    deleted: the new session's epochs and log sequence numbers continue after the old ones,
//!    and its records are all newer than that checkpoint, so a later recovery never confuses
//!    a non-durable record of the old session with a durable one of the new.
//!
//! Not built yet: command logging and its serial replay (CLR), parallel latched replay of
//! individual records (LLR), physical logging (PLR), `--recovery` to choose among them.

pub mod checkpoint;

use crate::config::Isolation;
use crate::engine::Database;
use crate::error::{Error, Result};
use crate::log::catalog::{Catalog, TableRecord};
use crate::log::format::{self, Get};
use crate::log::{
    apply_patch, LogManager, PersistentEpoch, LOG_MAGIC, OP_DELETE, OP_PATCH, OP_PUT,
};
use crate::schema::TableSchema;
use crate::storage::TableRef;
use crate::txn::TxnOptions;
use checkpoint::Manifest;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// State of a durable database's directory.
pub(crate) struct DurableState {
    pub dir: PathBuf,
    _lock: File,
    /// `None` while recovery recreates the tables (their records are already in it).
    catalog: Mutex<Option<Catalog>>,
    pub checkpoint_lock: Mutex<()>,
    pub report: OnceLock<RecoveryReport>,
}

impl DurableState {
    pub(crate) fn log_table(
        &self,
        id: u32,
        replaces: Option<u32>,
        schema: &TableSchema,
    ) -> Result<()> {
        match self.catalog.lock().as_mut() {
            Some(c) => c.append(&TableRecord {
                id,
                replaces,
                schema: schema.clone(),
            }),
            None => Ok(()),
        }
    }
}

/// What opening a data directory found and did, with the time of each phase.
#[derive(Clone, Debug, Default)]
pub struct RecoveryReport {
    /// Timestamp of the checkpoint recovery started from, if any.
    pub checkpoint_ts: Option<u64>,
    pub checkpoint_rows: u64,
    /// The persistent epoch: every commit of this epoch or earlier was recovered.
    pub persistent_epoch: u64,
    pub log_files: usize,
    pub log_bytes: u64,
    /// Transaction records read from intact log blocks.
    pub log_records: u64,
    /// Of those, records recovered (epoch ≤ persistent epoch, newer than the checkpoint).
    pub records_replayed: u64,
    /// Records past the persistent epoch: commits that were never acknowledged.
    pub records_not_durable: u64,
    /// Bytes of damaged or torn log tails dropped (after the durable position).
    pub bytes_dropped: u64,
    /// One line per dropped tail: file, offset and why.
    pub dropped: Vec<String>,
    pub tables: usize,
    /// Rows in the recovered database.
    pub rows: u64,
    pub checkpoint_load: Duration,
    pub log_load: Duration,
    /// Inserting the rows into the tables, building every index on the way.
    pub install: Duration,
    /// Writing the checkpoint that closes recovery.
    pub checkpoint_write: Duration,
}

impl RecoveryReport {
    /// Total time of the phases.
    pub fn total(&self) -> Duration {
        self.checkpoint_load + self.log_load + self.install + self.checkpoint_write
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
    };
    let db = Database::new_in_memory(config, Some(state));
    let (report, next) = recover(&db, &dir)?;
    let Some(state) = db.durable.as_ref() else {
        return Err(Error::InvalidConfig("no data directory".into()));
    };
    *state.catalog.lock() = Some(Catalog::open(&dir)?);
    let log = LogManager::start(&dir, &db.config, db.txns.len(), next.epoch, next.seq)?;
    let _ = db.log.set(log);
    let mut report = report;
    if next.checkpoint {
        let t = Instant::now();
        db.checkpoint()?;
        report.checkpoint_write = t.elapsed();
    }
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

/// One table's recovery input: its checkpoint rows and its log images by key.
type TableInput = (TableRef, Vec<u8>, HashMap<Vec<u8>, Vec<Change>>);

/// One logged change of a key: a whole row (put), a delete, or a patch of changed columns.
struct Change {
    ts: u64,
    op: u8,
    data: Vec<u8>,
}

fn recover(db: &Database, dir: &Path) -> Result<(RecoveryReport, Next)> {
    let mut rep = RecoveryReport::default();
    // 1. Tables, under their old ids.
    let records = Catalog::read(dir)?;
    let replaced: Vec<u32> = records.iter().filter_map(|r| r.replaces).collect();
    let mut by_id: HashMap<u32, TableRef> = HashMap::new();
    let mut names: HashMap<u32, String> = HashMap::new();
    for r in &records {
        names.insert(r.id, r.schema.name.clone());
    }
    for r in &records {
        if !replaced.contains(&r.id) {
            by_id.insert(r.id, db.restore_table(r.id, r.schema.clone())?);
        }
    }
    // Records written under a replaced id belong to the table that replaced it.
    let current = |mut id: u32| -> Option<u32> {
        for _ in 0..records.len() + 1 {
            if by_id.contains_key(&id) {
                return Some(id);
            }
            id = records.iter().find(|r| r.replaces == Some(id))?.id;
        }
        None
    };
    rep.tables = by_id.len();

    // 2. Checkpoint.
    let t = Instant::now();
    let manifest = Manifest::read_current(dir)?;
    let mut ckpt_rows: HashMap<u32, Vec<u8>> = HashMap::new();
    if let Some(m) = &manifest {
        rep.checkpoint_ts = Some(m.ts);
        for tm in &m.tables {
            let Some(id) = current(tm.id) else {
                return Err(Error::Corrupt {
                    file: m.dir.join(&tm.file).display().to_string(),
                    offset: 0,
                    message: format!("checkpoint of table id {} not in the catalog", tm.id),
                });
            };
            let data = tm.read(&m.dir, by_id[&id].schema.row_size)?;
            rep.checkpoint_rows += tm.rows;
            ckpt_rows.insert(id, data);
        }
    }
    rep.checkpoint_load = t.elapsed();
    let ckpt_ts = manifest.as_ref().map_or(0, |m| m.ts);

    // 3. Logs.
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
    let mut max_ts = ckpt_ts;
    let mut max_epoch = durable_epoch;
    let mut images: HashMap<u32, HashMap<Vec<u8>, Vec<Change>>> = HashMap::new();
    let mut key = Vec::new();
    for (logger, seq, path) in &files {
        let data = std::fs::read(path).map_err(|e| Error::io(path, &e))?;
        rep.log_files += 1;
        rep.log_bytes += data.len() as u64;
        let durable_end = match pe.as_ref().and_then(|p| p.positions.get(*logger)) {
            Some(p) if *seq < p.seq => data.len() as u64,
            Some(p) if *seq == p.seq => p.offset,
            _ => 0,
        };
        let (blocks, end, why) = format::read_blocks(&data, LOG_MAGIC);
        if let Some(why) = why {
            if (end as u64) < durable_end {
                return Err(Error::Corrupt {
                    file: path.display().to_string(),
                    offset: end as u64,
                    message: format!(
                        "{why}, before the end of the durable log (byte {durable_end})"
                    ),
                });
            }
            rep.bytes_dropped += (data.len() - end) as u64;
            rep.dropped.push(format!(
                "{}: {} bytes from offset {end} ({why})",
                path.display(),
                data.len() - end
            ));
        }
        let mut at = 0u64;
        for b in blocks {
            let bad = || format::malformed(path, at, "log record");
            let mut g = Get::new(b);
            while !g.done() {
                let rec = crate::log::next_record(&mut g).ok_or_else(bad)?;
                let mut r = Get::new(rec);
                let epoch = r.u64().ok_or_else(bad)?;
                let ts = r.u64().ok_or_else(bad)?;
                let n = r.u32().ok_or_else(bad)?;
                rep.log_records += 1;
                max_ts = max_ts.max(ts);
                max_epoch = max_epoch.max(epoch);
                if epoch > durable_epoch {
                    rep.records_not_durable += 1;
                    continue;
                }
                if ts <= ckpt_ts {
                    continue;
                }
                rep.records_replayed += 1;
                for _ in 0..n {
                    let tid = r.u32().ok_or_else(bad)?;
                    let op = r.u8().ok_or_else(bad)?;
                    let id = current(tid).ok_or_else(|| Error::Corrupt {
                        file: path.display().to_string(),
                        offset: at,
                        message: format!(
                            "log record for table id {tid} ({}), which is not in the catalog",
                            names.get(&tid).map_or("unknown", |s| s.as_str())
                        ),
                    })?;
                    let schema = &by_id[&id].schema;
                    let data = match op {
                        OP_PUT | OP_DELETE => {
                            let row = r.bytes().ok_or_else(bad)?;
                            if row.len() != schema.row_size {
                                return Err(bad());
                            }
                            schema.encode_key_from_row(0, row, &mut key);
                            row
                        }
                        OP_PATCH => {
                            key.clear();
                            key.extend_from_slice(r.bytes().ok_or_else(bad)?);
                            // Walk the patch to find its end; it is applied at install.
                            let from = r.at;
                            let k = r.u32().ok_or_else(bad)?;
                            for _ in 0..k {
                                r.u32().ok_or_else(bad)?;
                                r.bytes().ok_or_else(bad)?;
                            }
                            &rec[from..r.at]
                        }
                        _ => return Err(bad()),
                    };
                    let change = Change {
                        ts,
                        op,
                        data: data.to_vec(),
                    };
                    let by_key = images.entry(id).or_default();
                    match by_key.get_mut(key.as_slice()) {
                        Some(v) => v.push(change),
                        None => {
                            by_key.insert(key.clone(), vec![change]);
                        }
                    }
                }
            }
            at += (format::BLOCK_HEADER + b.len()) as u64;
        }
    }
    rep.log_load = t.elapsed();

    // 4. Install, one table per thread at a time.
    let t = Instant::now();
    let tables: Vec<TableInput> = by_id
        .values()
        .map(|tr| {
            (
                tr.clone(),
                ckpt_rows.remove(&tr.id).unwrap_or_default(),
                images.remove(&tr.id).unwrap_or_default(),
            )
        })
        .collect();
    let work = Mutex::new(tables);
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(work.lock().len())
        .max(1);
    let results: Vec<Result<u64>> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    let mut rows = 0;
                    loop {
                        let Some((tr, ckpt, changes)) = work.lock().pop() else {
                            return Ok(rows);
                        };
                        rows += install(db, &tr, &ckpt, changes)?;
                    }
                })
            })
            .collect();
        hs.into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| {
                    Err(Error::InvalidConfig("recovery thread panicked".into()))
                })
            })
            .collect()
    });
    for r in results {
        rep.rows += r?;
    }
    rep.install = t.elapsed();
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

/// The state of a key after its logged changes, applied in commit order on top of `base`
/// (its checkpoint row). Only the changes after its last whole-row put or delete matter.
fn resolve(t: &TableRef, base: Option<&[u8]>, changes: &mut [Change]) -> Result<Option<Vec<u8>>> {
    changes.sort_unstable_by_key(|c| c.ts);
    let from = changes.iter().rposition(|c| c.op != OP_PATCH).unwrap_or(0);
    let mut cur = if changes.get(from).is_some_and(|c| c.op != OP_PATCH) {
        None
    } else {
        base.map(<[u8]>::to_vec)
    };
    let bad = |m: &str| Error::Corrupt {
        file: format!("log of table `{}`", t.schema.name),
        offset: 0,
        message: m.to_string(),
    };
    for c in &mut changes[from..] {
        match c.op {
            OP_PUT => cur = Some(std::mem::take(&mut c.data)),
            OP_DELETE => cur = None,
            _ => {
                let row = cur.as_mut().ok_or_else(|| {
                    bad("an update of a row that neither the checkpoint nor the log has")
                })?;
                apply_patch(&mut Get::new(&c.data), row)
                    .ok_or_else(|| bad("an update patch outside the row"))?;
            }
        }
    }
    Ok(cur)
}

/// Fills one table: checkpoint rows the log did not change, checkpoint rows with their
/// logged changes applied, and rows the log created. Returns the number of rows.
fn install(
    db: &Database,
    t: &TableRef,
    ckpt: &[u8],
    mut changes: HashMap<Vec<u8>, Vec<Change>>,
) -> Result<u64> {
    const BATCH: usize = 1024;
    let size = t.schema.row_size;
    let mut key = Vec::new();
    let opts = TxnOptions {
        isolation: Isolation::Snapshot,
        read_only: false,
    };
    let mut rows = 0u64;
    let mut owned: Vec<Vec<u8>> = Vec::new();
    let mut batch: Vec<&[u8]> = Vec::with_capacity(BATCH);
    let flush = |batch: &mut Vec<&[u8]>| -> Result<()> {
        if batch.is_empty() {
            return Ok(());
        }
        let mut tx = db.begin_with(opts)?;
        for r in batch.iter() {
            tx.insert_raw(t, r).map_err(|e| match e {
                Error::DuplicateKey { table, index } => Error::Corrupt {
                    file: format!("checkpoint or log of table `{table}`"),
                    offset: 0,
                    message: format!("two rows with the same key in index `{index}`"),
                },
                e => e,
            })?;
        }
        tx.commit_deferred()?;
        batch.clear();
        Ok(())
    };
    if size > 0 {
        for row in ckpt.chunks_exact(size) {
            t.schema.encode_key_from_row(0, row, &mut key);
            if let Some(mut ch) = changes.remove(key.as_slice()) {
                if let Some(r) = resolve(t, Some(row), &mut ch)? {
                    owned.push(r);
                }
                continue;
            }
            batch.push(row);
            rows += 1;
            if batch.len() == BATCH {
                flush(&mut batch)?;
            }
        }
    }
    flush(&mut batch)?;
    for ch in changes.values_mut() {
        if let Some(r) = resolve(t, None, ch)? {
            owned.push(r);
        }
    }
    for r in &owned {
        batch.push(r);
        rows += 1;
        if batch.len() == BATCH {
            flush(&mut batch)?;
        }
    }
    flush(&mut batch)?;
    Ok(rows)
}
