//! The epoch log manager (`--log-manager epoch`, the default): epoch group commit (thesis
//! §4.6.1; SiloR) with parallel logs.
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

use super::control::{Control, PointExtra};
use super::format::{self, Put};
use super::identity::{DbId, FileHeader, FileKind};
use super::{encode_writes, log_file_name, LogPos, PersistentEpoch, PointFile, LOG_MAGIC};
use crate::error::{Error, Result};
use crate::storage::WriteRecord;
use crossbeam_utils::CachePadded;
use parking_lot::Mutex;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

pub(crate) struct EpochLog {
    epoch: CachePadded<AtomicU64>,
    /// Per transaction-table slot: encoded records not yet collected by a logger.
    bufs: Box<[CachePadded<Mutex<SlotBuf>>]>,
    /// `LogPolicy::Physical`: records carry tuple ids and whole rows.
    physical: bool,
    /// The durable epoch, failure, rounds and counters.
    pub(crate) control: Control,
}

/// A slot's log buffer, and a scratch key buffer for patches.
#[derive(Default)]
struct SlotBuf {
    bytes: Vec<u8>,
    key: Vec<u8>,
}

/// One logger's files.
struct Logger {
    id: usize,
    db: DbId,
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

impl EpochLog {
    /// Starts logging into `dir`: epochs continue after `first_epoch - 1`, logger `i` starts
    /// file `first_seq`. The directory is already recovered and locked. Before any commit,
    /// a durable-point record names the new files (and `extra`'s checkpoint and catalog).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn start(
        dir: &Path,
        config: &crate::Config,
        slots: usize,
        first_epoch: u64,
        first_seq: u64,
        db: DbId,
        mut extra: PointExtra,
        mut pepoch: PointFile,
    ) -> Result<Arc<EpochLog>> {
        let fsync = config.fsync == crate::config::FsyncPolicy::Always;
        let mut loggers = Vec::new();
        for id in 0..config.loggers {
            let (file, path, pos) = open_log_file(dir, db, id, first_seq, u64::MAX, fsync)?;
            loggers.push(Logger {
                id,
                db,
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
        extra.first = vec![first_seq; config.loggers];
        let positions: Vec<LogPos> = loggers.iter().map(|l| l.pos).collect();
        pepoch.publish(&PersistentEpoch {
            id: db,
            epoch: first_epoch - 1,
            positions: positions.clone(),
            first: extra.first.clone(),
            checkpoint: extra.checkpoint,
            catalog_bytes: extra.catalog_bytes,
        })?;
        let m = Arc::new(EpochLog {
            epoch: CachePadded::new(AtomicU64::new(first_epoch)),
            bufs: (0..slots)
                .map(|_| CachePadded::new(Mutex::new(SlotBuf::default())))
                .collect(),
            physical: config.log == crate::config::LogPolicy::Physical,
            control: Control::new(first_epoch - 1, extra),
        });
        let m2 = m.clone();
        let interval = config.epoch_interval;
        let h = std::thread::Builder::new()
            .name("myriad-log".into())
            .spawn(move || {
                let m3 = m2.clone();
                m3.control.guarded("myriad-log", move || {
                    EpochLog::coordinate(m2, loggers, pepoch, interval, fsync, positions, db)
                });
            })
            .map_err(|e| Error::io(dir, &e))?;
        m.control.set_thread(h);
        Ok(m)
    }

    /// The epoch new commits are tagged with.
    #[inline]
    pub(crate) fn current_epoch(&self) -> u64 {
        self.epoch.load(Ordering::SeqCst)
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
        table_of: impl Fn(u32) -> &'s crate::storage::table::Table,
    ) -> Result<u64> {
        self.control.check_failed()?;
        let mut guard = self.bufs[slot].lock();
        let sb = &mut *guard;
        let b = &mut sb.bytes;
        let epoch = self.epoch.load(Ordering::SeqCst);
        let start = b.len();
        b.u32(0);
        b.u64(epoch);
        b.u64(end_ts);
        encode_writes(b, &mut sb.key, self.physical, writes, command, table_of);
        let len = (b.len() - start - 4) as u32;
        b[start..start + 4].copy_from_slice(&len.to_le_bytes());
        Ok(epoch)
    }

    #[allow(clippy::too_many_arguments)]
    fn coordinate(
        self: Arc<Self>,
        loggers: Vec<Logger>,
        mut pepoch: PointFile,
        interval: Duration,
        fsync: bool,
        mut positions: Vec<LogPos>,
        db: DbId,
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
                    // A panic is this round's failure: the coordinator fails the log (and
                    // this logger is not used again).
                    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        m.control.test_panic_point();
                        l.round(&m, r.rotate)
                    }))
                    .unwrap_or_else(|p| {
                        Err(Error::LogFailed(format!(
                            "logger {} panicked: {}",
                            l.id,
                            crate::background::panic_message(&*p)
                        )))
                    });
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
        let mut wrote_before = false;
        let mut published = self.control.extra().version;
        loop {
            let (stop, rotate) = self.control.next_round(interval);
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
            let extra = self.control.extra();
            let need = wrote || wrote_before || rotate || extra.version != published;
            wrote_before = wrote;
            if err.is_none() && need {
                published = extra.version;
                let rec = PersistentEpoch {
                    id: db,
                    epoch: e,
                    positions: positions.clone(),
                    first: extra.first,
                    checkpoint: extra.checkpoint,
                    catalog_bytes: extra.catalog_bytes,
                };
                let r = pepoch.publish(&rec);
                if fsync {
                    // `pepoch` and its mirror.
                    self.control.fsyncs.fetch_add(2, Ordering::Relaxed);
                }
                err = r.err();
            }
            if let Some(x) = err {
                self.control.fail(&x);
                break;
            }
            self.control
                .end_round(e, rotate.then(|| positions.iter().map(|p| p.seq).collect()));
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

/// Creates log file `seq` of `logger` with its header (which records `prev_len`, the final
/// length of the logger's previous file) and returns it with the position after the header.
fn open_log_file(
    dir: &Path,
    db: DbId,
    logger: usize,
    seq: u64,
    prev_len: u64,
    fsync: bool,
) -> Result<(File, PathBuf, LogPos)> {
    let path = dir.join(log_file_name(logger, seq));
    let mut f = std::fs::OpenOptions::new()
        .create_new(true)
        .write(true)
        .open(&path)
        .map_err(|e| Error::io(&path, &e))?;
    let mut h = FileHeader::new(db, FileKind::Log, logger as u64, seq);
    h.prev_len = prev_len;
    let h = h.encode();
    f.write_all(&h)
        .and_then(|_| if fsync { f.sync_data() } else { Ok(()) })
        .map_err(|e| Error::io(&path, &e))?;
    let pos = LogPos {
        seq,
        offset: h.len() as u64,
    };
    Ok((f, path, pos))
}

impl Logger {
    /// Collects this logger's slot buffers and writes them as one block. Returns the durable
    /// end position and whether anything was written.
    fn round(&mut self, m: &EpochLog, rotate: bool) -> Result<(LogPos, bool)> {
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
        let full = self.pos.offset > FileHeader::LEN as u64
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
            m.control.fsyncs.fetch_add(1, Ordering::Relaxed);
        }
        self.pos.offset += self.block.len() as u64;
        m.control
            .bytes_written
            .fetch_add(self.block.len() as u64, Ordering::Relaxed);
        m.control.blocks_written.fetch_add(1, Ordering::Relaxed);
        Ok((self.pos, true))
    }

    fn next_file(&mut self) -> Result<()> {
        if self.fsync {
            self.file
                .sync_all()
                .map_err(|e| Error::io(&self.path, &e))?;
        }
        let (f, p, pos) = open_log_file(
            &self.dir,
            self.db,
            self.id,
            self.pos.seq + 1,
            self.pos.offset,
            self.fsync,
        )?;
        format::sync_dir(&self.dir)?;
        self.file = f;
        self.path = p;
        self.pos = pos;
        Ok(())
    }
}
