//! Logging with epoch group commit (thesis ch. 4.2, §4.6.1; SiloR; parallel logs as in
//! POMVCC §V). The seam is `LogPolicy` in `Config`; `logical` is built: after-images of the
//! rows a transaction wrote (thesis §4.2.1) — a whole row for an insert, the deleted row for a
//! delete, and for an update the primary key and the bytes of the columns that changed (a
//! TPC-C Payment changes a few of CUSTOMER's 21 columns; logging whole rows wrote 3 KB per
//! transaction and cost a third of the throughput on this 2-core machine, the logger's copy
//! into the page cache being the largest item). Physical and command logging are not built
//! yet and are refused by `Config::validate`.
//!
//! **Worker side.** A committing update transaction, after validation succeeded and before it
//! becomes Committed (`cc/mvocc.rs`), appends one record to the log buffer of its
//! transaction-table slot, under that slot's own mutex, reading the global epoch *inside*
//! the critical section: `len u32 | epoch u64 | end_ts u64 | writes u32 | (table u32, op u8,
//! row | key and patch)*`. No global lock and no shared read-modify-write: the epoch is a load.
//!
//! **Why the epoch order is safe.** A transaction that depends on T (reads or overwrites a
//! version T wrote) can do so only after T is Committed, and T read its epoch before that;
//! so the dependent transaction's epoch is at least T's. Recovering every transaction of
//! epochs ≤ E therefore never keeps a transaction while dropping one it depends on.
//!
//! **Group commit.** One coordinator thread runs rounds, every `Config::epoch_interval`, or at
//! once when a committer waits. A round advances the epoch from E to E+1 and asks each of the
//! `Config::loggers` logger threads to collect its slots' buffers (slot `s` belongs to logger
//! `s % loggers`). Taking a slot's mutex after the advance means every record tagged ≤ E is
//! already in the buffer (it was appended under that mutex before the advance was visible).
//! Each logger writes what it collected as one checksummed block (`format.rs`) to its own
//! file and fsyncs it; then the coordinator appends a persistent-epoch record (E and, per
//! logger, the file and offset up to which everything is durable) to `pepoch`, fsyncs it,
//! publishes E as durable and wakes the committers waiting for it. Blocks may hold records of
//! epoch E+1 (appended after the advance); recovery ignores records above the persistent
//! epoch, so the next round writes a persistent-epoch record even if it wrote no block. Only
//! a round after two rounds without blocks publishes its epoch without touching the disk.
//!
//! **Failure.** The first write or fsync error stops the coordinator: no epoch becomes durable
//! after it, waiting committers get `Error::LogFailed`, and later commits are refused (an
//! fsync is never retried: after a failed fsync the kernel may have dropped the dirty pages).

pub(crate) mod catalog;
pub(crate) mod format;
pub mod inspect;

use crate::error::{Error, Result};
use crate::schema::TableSchema;
use crate::txn::WriteRecord;
use crossbeam_utils::CachePadded;
use format::Put;
use parking_lot::{Condvar, Mutex};
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

pub(crate) const LOG_MAGIC: u32 = 0x4c59_524d; // "MRYL"
pub(crate) const PEPOCH_MAGIC: u32 = 0x4550_524d; // "MRPE"
pub(crate) const OP_PUT: u8 = 1;
pub(crate) const OP_DELETE: u8 = 2;
pub(crate) const OP_PATCH: u8 = 3;
/// Physical logging: the whole after-image at a tuple id (`table, OP_PUT_AT, tid, row`).
pub(crate) const OP_PUT_AT: u8 = 4;
/// Physical logging: the tuple id's row was deleted (`table, OP_DELETE_AT, tid`).
pub(crate) const OP_DELETE_AT: u8 = 5;

/// True if a record with `n` writes whose writes start at `body` is physical (its first
/// write's op, after the table id, is a physical one; a record is all of one kind).
pub(crate) fn is_physical(n: u32, body: &[u8]) -> bool {
    n != COMMAND && n > 0 && matches!(body.get(4), Some(&(OP_PUT_AT | OP_DELETE_AT)))
}
/// The write count of a command record: the rest of the record is a procedure call
/// (`procedure/command.rs`) instead of writes.
pub(crate) const COMMAND: u32 = u32::MAX;
const PEPOCH_FILE: &str = "pepoch";
/// The persistent-epoch file is rewritten with only its last record past this size.
const PEPOCH_MAX_BYTES: u64 = 1 << 20;

/// Log file `seq` of logger `logger`.
pub(crate) fn log_file_name(logger: usize, seq: u64) -> String {
    format!("log-{logger:02}-{seq:010}")
}

/// Parses a log file name back into (logger, seq).
pub(crate) fn parse_log_file_name(name: &str) -> Option<(usize, u64)> {
    let rest = name.strip_prefix("log-")?;
    let (l, s) = rest.split_once('-')?;
    if l.len() != 2 || s.len() != 10 {
        return None;
    }
    Some((l.parse().ok()?, s.parse().ok()?))
}

/// The log files in `dir` as (logger, seq, path), in logger then sequence order.
pub(crate) fn log_files(dir: &Path) -> Result<Vec<(usize, u64, PathBuf)>> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).map_err(|e| Error::io(dir, &e))? {
        let e = e.map_err(|e| Error::io(dir, &e))?;
        if let Some((logger, seq)) = parse_log_file_name(&e.file_name().to_string_lossy()) {
            out.push((logger, seq, e.path()));
        }
    }
    out.sort();
    Ok(out)
}

/// The next transaction record of a log block (`len u32 | record`); `None` at the end or
/// when the length does not fit (a format error: the block's checksum passed).
pub(crate) fn next_record<'a>(g: &mut format::Get<'a>) -> Option<&'a [u8]> {
    let len = g.u32()? as usize;
    let rec = g.data.get(g.at..g.at.checked_add(len)?)?;
    g.at += len;
    Some(rec)
}

/// Where a logger's durable bytes end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct LogPos {
    pub seq: u64,
    pub offset: u64,
}

/// A persistent-epoch record: every record of an epoch ≤ `epoch` is durable, and logger `i`'s
/// durable bytes end at `positions[i]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct PersistentEpoch {
    pub epoch: u64,
    pub positions: Vec<LogPos>,
}

impl PersistentEpoch {
    fn encode(&self) -> Vec<u8> {
        let mut p = Vec::new();
        p.u64(self.epoch);
        p.u32(self.positions.len() as u32);
        for x in &self.positions {
            p.u64(x.seq);
            p.u64(x.offset);
        }
        let mut out = Vec::new();
        format::put_block(&mut out, PEPOCH_MAGIC, &p);
        out
    }

    /// The last intact record of the persistent-epoch file (a torn last record is the one
    /// being written when the process stopped: the previous one holds).
    pub(crate) fn read_last(dir: &Path) -> Result<Option<PersistentEpoch>> {
        let path = dir.join(PEPOCH_FILE);
        let data = match std::fs::read(&path) {
            Ok(d) => d,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(Error::io(&path, &e)),
        };
        let (blocks, end, why) = format::read_blocks(&data, PEPOCH_MAGIC);
        if let Some(why) = why {
            // Only the record being written at the crash can be damaged; damage before it
            // would silently move the durable epoch back.
            if !catalog::is_torn_tail(&data[end..]) {
                return Err(Error::Corrupt {
                    file: path.display().to_string(),
                    offset: end as u64,
                    message: why,
                });
            }
        }
        let Some(last) = blocks.last() else {
            return Ok(None);
        };
        let mut g = format::Get::new(last);
        let bad = || format::malformed(&path, end as u64, "persistent-epoch record");
        let epoch = g.u64().ok_or_else(bad)?;
        let n = g.u32().ok_or_else(bad)?;
        let mut positions = Vec::new();
        for _ in 0..n {
            positions.push(LogPos {
                seq: g.u64().ok_or_else(bad)?,
                offset: g.u64().ok_or_else(bad)?,
            });
        }
        Ok(Some(PersistentEpoch { epoch, positions }))
    }
}

/// What a commit gets back: the epoch its log record belongs to. The commit is durable (and
/// may be acknowledged to a client) once `Database::is_durable` says so.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CommitTicket {
    pub(crate) epoch: u64,
}

impl CommitTicket {
    /// The group-commit epoch of this commit (0 when there was nothing to make durable).
    pub fn epoch(&self) -> u64 {
        self.epoch
    }
}

#[derive(Default)]
struct Ctl {
    kick: bool,
    stop: bool,
    rotate: bool,
    rounds: u64,
    /// The file sequence numbers the last rotation started, per logger.
    rotated_to: Vec<u64>,
}

/// Counters for reports.
#[derive(Clone, Copy, Debug, Default)]
pub struct LogStats {
    pub bytes_written: u64,
    pub blocks_written: u64,
    pub fsyncs: u64,
    pub rounds: u64,
    pub durable_epoch: u64,
}

pub(crate) struct LogManager {
    dir: PathBuf,
    epoch: CachePadded<AtomicU64>,
    durable: CachePadded<AtomicU64>,
    /// Per transaction-table slot: encoded records not yet collected by a logger.
    bufs: Box<[CachePadded<Mutex<SlotBuf>>]>,
    ctl: Mutex<Ctl>,
    wake: Condvar,
    done: Condvar,
    failed: OnceLock<String>,
    /// `LogPolicy::Physical`: records carry tuple ids and whole rows.
    physical: bool,
    coordinator: Mutex<Option<std::thread::JoinHandle<()>>>,
    bytes_written: AtomicU64,
    blocks_written: AtomicU64,
    fsyncs: AtomicU64,
}

/// A slot's log buffer, and a scratch key buffer for patches.
#[derive(Default)]
struct SlotBuf {
    bytes: Vec<u8>,
    key: Vec<u8>,
}

/// Appends the columns of `new` that differ from `old` as patches: a count, then per run of
/// adjacent changed columns its byte offset and bytes.
fn encode_patch(schema: &TableSchema, old: &[u8], new: &[u8], b: &mut Vec<u8>) {
    let at = b.len();
    b.u32(0);
    let mut n = 0u32;
    let mut run: Option<(usize, usize)> = None;
    for c in &schema.columns {
        let (lo, hi) = (c.offset, c.offset + c.ty.width());
        if old[lo..hi] == new[lo..hi] {
            continue;
        }
        run = match run {
            Some((s, e)) if e == lo => Some((s, hi)),
            Some((s, e)) => {
                b.u32(s as u32);
                b.bytes(&new[s..e]);
                n += 1;
                Some((lo, hi))
            }
            None => Some((lo, hi)),
        };
    }
    if let Some((s, e)) = run {
        b.u32(s as u32);
        b.bytes(&new[s..e]);
        n += 1;
    }
    b[at..at + 4].copy_from_slice(&n.to_le_bytes());
}

/// Applies a patch written by `encode_patch` to `row`; `None` if it does not fit.
pub(crate) fn apply_patch(g: &mut format::Get<'_>, row: &mut [u8]) -> Option<()> {
    let n = g.u32()?;
    for _ in 0..n {
        let off = g.u32()? as usize;
        let data = g.bytes()?;
        row.get_mut(off..off.checked_add(data.len())?)?
            .copy_from_slice(data);
    }
    Some(())
}

/// One logger's files.
struct Logger {
    id: usize,
    nloggers: usize,
    dir: PathBuf,
    fsync: bool,
    file_bytes: u64,
    file: File,
    path: PathBuf,
    pos: LogPos,
    payload: Vec<u8>,
    block: Vec<u8>,
    spare: Vec<u8>,
}

struct Round {
    rotate: bool,
}

struct Outcome {
    logger: usize,
    result: Result<(LogPos, bool)>,
}

impl LogManager {
    /// Starts logging into `dir`: epochs continue after `first_epoch - 1`, logger `i` starts
    /// file `first_seq`. The directory is already recovered and locked.
    pub(crate) fn start(
        dir: &Path,
        config: &crate::Config,
        slots: usize,
        first_epoch: u64,
        first_seq: u64,
    ) -> Result<Arc<LogManager>> {
        let fsync = config.fsync == crate::config::FsyncPolicy::Always;
        let mut loggers = Vec::new();
        for id in 0..config.loggers {
            let pos = LogPos {
                seq: first_seq,
                offset: 0,
            };
            let (file, path) = open_log_file(dir, id, pos.seq)?;
            loggers.push(Logger {
                id,
                nloggers: config.loggers,
                dir: dir.to_path_buf(),
                fsync,
                file_bytes: config.log_file_bytes,
                file,
                path,
                pos,
                payload: Vec::new(),
                block: Vec::new(),
                spare: Vec::new(),
            });
        }
        format::sync_dir(dir)?;
        let m = Arc::new(LogManager {
            dir: dir.to_path_buf(),
            epoch: CachePadded::new(AtomicU64::new(first_epoch)),
            durable: CachePadded::new(AtomicU64::new(first_epoch - 1)),
            bufs: (0..slots)
                .map(|_| CachePadded::new(Mutex::new(SlotBuf::default())))
                .collect(),
            ctl: Mutex::new(Ctl::default()),
            wake: Condvar::new(),
            done: Condvar::new(),
            failed: OnceLock::new(),
            physical: config.log == crate::config::LogPolicy::Physical,
            coordinator: Mutex::new(None),
            bytes_written: AtomicU64::new(0),
            blocks_written: AtomicU64::new(0),
            fsyncs: AtomicU64::new(0),
        });
        let pepoch = open_append(&dir.join(PEPOCH_FILE))?;
        let m2 = m.clone();
        let interval = config.epoch_interval;
        let h = std::thread::Builder::new()
            .name("myriad-log".into())
            .spawn(move || LogManager::coordinate(m2, loggers, pepoch, interval, fsync))
            .map_err(|e| Error::io(dir, &e))?;
        *m.coordinator.lock() = Some(h);
        Ok(m)
    }

    /// The epoch new commits are tagged with.
    #[inline]
    pub(crate) fn current_epoch(&self) -> u64 {
        self.epoch.load(Ordering::SeqCst)
    }

    pub(crate) fn durable_epoch(&self) -> u64 {
        self.durable.load(Ordering::Acquire)
    }

    pub(crate) fn check_failed(&self) -> Result<()> {
        match self.failed.get() {
            Some(m) => Err(Error::LogFailed(m.clone())),
            None => Ok(()),
        }
    }

    /// Appends the commit record of a transaction (called after validation, before the
    /// transaction is marked Committed). Returns the record's epoch. With `command`, the
    /// record is that procedure call (command logging) and `writes` are not logged. Physical
    /// logging writes every write as its tuple id and whole after-image (or a delete mark).
    /// Otherwise an update of a row that existed is logged as a patch (its primary key and the bytes of the columns that
    /// changed); an insert or re-insert as the whole row; a delete as the row it deleted.
    pub(crate) fn append<'s>(
        &self,
        slot: usize,
        end_ts: u64,
        writes: &[WriteRecord],
        command: Option<&[u8]>,
        schema_of: impl Fn(u32) -> &'s TableSchema,
    ) -> Result<u64> {
        self.check_failed()?;
        let mut guard = self.bufs[slot].lock();
        let sb = &mut *guard;
        let b = &mut sb.bytes;
        let epoch = self.epoch.load(Ordering::SeqCst);
        let start = b.len();
        b.u32(0);
        b.u64(epoch);
        b.u64(end_ts);
        if let Some(call) = command {
            b.u32(COMMAND);
            b.extend_from_slice(call);
            let len = (b.len() - start - 4) as u32;
            b[start..start + 4].copy_from_slice(&len.to_le_bytes());
            return Ok(epoch);
        }
        b.u32(writes.len() as u32);
        for w in writes {
            // SAFETY: our own committed-to-be versions and the versions they replace (write
            // locked by us); pinned by the caller.
            let v = unsafe { &*w.new };
            let old = unsafe { w.old.as_ref() }.filter(|o| !o.is_tombstone());
            b.u32(w.table);
            if self.physical {
                // The tuple id is the row's location: its indirection entry, which recovery
                // recreates (version blocks themselves are new memory in every process).
                b.u8(if v.is_tombstone() {
                    OP_DELETE_AT
                } else {
                    OP_PUT_AT
                });
                b.varint(w.tid as i64);
                if !v.is_tombstone() {
                    b.bytes(v.data());
                }
                continue;
            }
            match old {
                Some(o) if !v.is_tombstone() => {
                    let schema = schema_of(w.table);
                    b.u8(OP_PATCH);
                    schema.encode_key_from_row(0, v.data(), &mut sb.key);
                    b.bytes(&sb.key);
                    encode_patch(schema, o.data(), v.data(), b);
                }
                _ => {
                    b.u8(if v.is_tombstone() { OP_DELETE } else { OP_PUT });
                    b.bytes(v.data());
                }
            }
        }
        let len = (b.len() - start - 4) as u32;
        b[start..start + 4].copy_from_slice(&len.to_le_bytes());
        Ok(epoch)
    }

    /// Waits until `epoch` is durable (starting a round at once if none is running).
    pub(crate) fn wait_durable(&self, epoch: u64) -> Result<()> {
        if self.durable_epoch() >= epoch {
            return Ok(());
        }
        let mut c = self.ctl.lock();
        loop {
            if self.durable_epoch() >= epoch {
                return Ok(());
            }
            self.check_failed()?;
            if c.stop {
                return Err(Error::LogFailed("the database is closing".into()));
            }
            c.kick = true;
            self.wake.notify_one();
            self.done.wait(&mut c);
        }
    }

    /// Makes every logger start a new file and returns the new files' sequence numbers, per
    /// logger. Every record appended before this call is in a file with a smaller sequence
    /// number or in one of the new files; every record appended after it is in a new file or
    /// a later one.
    pub(crate) fn rotate(&self) -> Result<Vec<u64>> {
        let mut c = self.ctl.lock();
        let target = c.rounds + 1;
        c.rotate = true;
        self.wake.notify_one();
        loop {
            self.check_failed()?;
            if c.rounds >= target && !c.rotate {
                return Ok(c.rotated_to.clone());
            }
            self.done.wait(&mut c);
        }
    }

    pub(crate) fn stats(&self) -> LogStats {
        LogStats {
            bytes_written: self.bytes_written.load(Ordering::Relaxed),
            blocks_written: self.blocks_written.load(Ordering::Relaxed),
            fsyncs: self.fsyncs.load(Ordering::Relaxed),
            rounds: self.ctl.lock().rounds,
            durable_epoch: self.durable_epoch(),
        }
    }

    /// Runs a last round (so every commit made so far becomes durable) and stops the threads.
    pub(crate) fn shutdown(&self) {
        {
            let mut c = self.ctl.lock();
            c.stop = true;
            self.wake.notify_one();
        }
        if let Some(h) = self.coordinator.lock().take() {
            let _ = h.join();
        }
        // Wake anyone still waiting (they see `stop` or the final durable epoch).
        let _c = self.ctl.lock();
        self.done.notify_all();
    }

    fn fail(&self, e: &Error) {
        let _ = self.failed.set(e.to_string());
        let _c = self.ctl.lock();
        self.done.notify_all();
    }

    fn coordinate(
        self: Arc<Self>,
        loggers: Vec<Logger>,
        mut pepoch: File,
        interval: Duration,
        fsync: bool,
    ) {
        let n = loggers.len();
        let (out_tx, out_rx) = mpsc::channel::<Outcome>();
        let mut senders = Vec::new();
        let mut handles = Vec::new();
        for mut l in loggers {
            let (tx, rx) = mpsc::channel::<Round>();
            senders.push(tx);
            let out = out_tx.clone();
            let m = self.clone();
            handles.push(std::thread::spawn(move || {
                while let Ok(r) = rx.recv() {
                    let result = l.round(&m, r.rotate);
                    if out
                        .send(Outcome {
                            logger: l.id,
                            result,
                        })
                        .is_err()
                    {
                        break;
                    }
                }
            }));
        }
        drop(out_tx);
        let mut pepoch_bytes = pepoch.metadata().map(|m| m.len()).unwrap_or(0);
        let mut positions = vec![LogPos { seq: 0, offset: 0 }; n];
        let mut wrote_before = false;
        loop {
            let (stop, rotate) = {
                let mut c = self.ctl.lock();
                if !c.kick && !c.stop && !c.rotate {
                    self.wake.wait_for(&mut c, interval);
                }
                c.kick = false;
                (c.stop, c.rotate)
            };
            let e = self.epoch.load(Ordering::SeqCst);
            self.epoch.store(e + 1, Ordering::SeqCst);
            for s in &senders {
                let _ = s.send(Round { rotate });
            }
            let mut wrote = false;
            let mut err = None;
            for _ in 0..n {
                match out_rx.recv() {
                    Ok(Outcome {
                        logger,
                        result: Ok((pos, w)),
                    }) => {
                        positions[logger] = pos;
                        wrote |= w;
                    }
                    Ok(Outcome { result: Err(x), .. }) => err = Some(x),
                    Err(_) => err = Some(Error::LogFailed("a logger thread stopped".into())),
                }
            }
            // Blocks written in the previous round may hold records of this round's epoch
            // (appended after that round's advance): publishing this epoch needs a record
            // on disk even if this round wrote nothing.
            let need = wrote || wrote_before || rotate;
            wrote_before = wrote;
            if err.is_none() && need {
                let rec = PersistentEpoch {
                    epoch: e,
                    positions: positions.clone(),
                }
                .encode();
                let path = self.dir.join(PEPOCH_FILE);
                let r = if pepoch_bytes + rec.len() as u64 > PEPOCH_MAX_BYTES {
                    format::write_atomic(&path, &rec).and_then(|_| {
                        pepoch = open_append(&path)?;
                        pepoch_bytes = rec.len() as u64;
                        Ok(())
                    })
                } else {
                    pepoch
                        .write_all(&rec)
                        .and_then(|_| if fsync { pepoch.sync_data() } else { Ok(()) })
                        .map(|_| pepoch_bytes += rec.len() as u64)
                        .map_err(|x| Error::io(&path, &x))
                };
                if fsync {
                    self.fsyncs.fetch_add(1, Ordering::Relaxed);
                }
                err = r.err();
            }
            if let Some(x) = err {
                self.fail(&x);
                break;
            }
            self.durable.store(e, Ordering::Release);
            {
                let mut c = self.ctl.lock();
                c.rounds += 1;
                if rotate {
                    c.rotate = false;
                    c.rotated_to = positions.iter().map(|p| p.seq).collect();
                }
                self.done.notify_all();
            }
            if stop {
                break;
            }
        }
        drop(senders);
        for h in handles {
            let _ = h.join();
        }
    }
}

fn open_append(path: &Path) -> Result<File> {
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|e| Error::io(path, &e))
}

fn open_log_file(dir: &Path, logger: usize, seq: u64) -> Result<(File, PathBuf)> {
    let path = dir.join(log_file_name(logger, seq));
    let f = std::fs::OpenOptions::new()
        .create_new(true)
        .write(true)
        .open(&path)
        .map_err(|e| Error::io(&path, &e))?;
    Ok((f, path))
}

impl Logger {
    /// Collects this logger's slot buffers and writes them as one block. Returns the durable
    /// end position and whether anything was written.
    fn round(&mut self, m: &LogManager, rotate: bool) -> Result<(LogPos, bool)> {
        self.payload.clear();
        let mut s = self.id;
        while s < m.bufs.len() {
            {
                let mut b = m.bufs[s].lock();
                if !b.bytes.is_empty() {
                    std::mem::swap(&mut b.bytes, &mut self.spare);
                }
            }
            self.payload.extend_from_slice(&self.spare);
            self.spare.clear();
            s += self.nloggers;
        }
        let full = self.pos.offset > 0
            && self.pos.offset + (self.payload.len() + format::BLOCK_HEADER) as u64
                > self.file_bytes;
        if rotate || full {
            self.next_file()?;
        }
        if self.payload.is_empty() {
            return Ok((self.pos, false));
        }
        self.block.clear();
        format::put_block(&mut self.block, LOG_MAGIC, &self.payload);
        self.file
            .write_all(&self.block)
            .map_err(|e| Error::io(&self.path, &e))?;
        if self.fsync {
            self.file
                .sync_data()
                .map_err(|e| Error::io(&self.path, &e))?;
            m.fsyncs.fetch_add(1, Ordering::Relaxed);
        }
        self.pos.offset += self.block.len() as u64;
        m.bytes_written
            .fetch_add(self.block.len() as u64, Ordering::Relaxed);
        m.blocks_written.fetch_add(1, Ordering::Relaxed);
        Ok((self.pos, true))
    }

    fn next_file(&mut self) -> Result<()> {
        if self.fsync {
            self.file
                .sync_all()
                .map_err(|e| Error::io(&self.path, &e))?;
        }
        let seq = self.pos.seq + 1;
        let (f, p) = open_log_file(&self.dir, self.id, seq)?;
        format::sync_dir(&self.dir)?;
        self.file = f;
        self.path = p;
        self.pos = LogPos { seq, offset: 0 };
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::{ColumnType, TableSchema};

    #[test]
    fn patches_carry_exactly_the_changed_column_runs() {
        let s = TableSchema::new("t")
            .column("a", ColumnType::Int)
            .column("b", ColumnType::Int)
            .column("c", ColumnType::Str(5))
            .column("d", ColumnType::Int)
            .primary_key(&["a"])
            .build()
            .unwrap();
        let row = |b: i64, c: &str, d: i64| {
            let mut r = vec![0u8; s.row_size];
            s.encode_row(&(1i64, b, c, d), &mut r).unwrap();
            r
        };
        for (old, new, runs) in [
            (row(1, "x", 1), row(1, "x", 1), 0u32),
            (row(1, "x", 1), row(2, "x", 1), 1),
            (row(1, "x", 1), row(2, "yy", 1), 1),
            (row(1, "x", 1), row(2, "x", 3), 2),
            (row(1, "x", 1), row(2, "zz", 3), 1),
        ] {
            let mut b = Vec::new();
            encode_patch(&s, &old, &new, &mut b);
            assert_eq!(u32::from_le_bytes([b[0], b[1], b[2], b[3]]), runs);
            let mut r = old.clone();
            let mut g = format::Get::new(&b);
            apply_patch(&mut g, &mut r).unwrap();
            assert!(g.done());
            assert_eq!(r, new);
        }
        // A patch that does not fit the row is refused, not applied past its end.
        let mut b = Vec::new();
        b.u32(1);
        b.u32(s.row_size as u32 - 2);
        b.bytes(&[1, 2, 3]);
        let mut r = row(1, "x", 1);
        assert!(apply_patch(&mut format::Get::new(&b), &mut r).is_none());
    }
}
