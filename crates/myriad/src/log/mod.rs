//! Logging (thesis ch. 4.2, §4.4.5): what a commit record holds, and the two log managers
//! that make records durable.
//!
//! **Records** (`LogPolicy`): `logical` writes after-images of the rows a transaction wrote
//! (thesis §4.2.1) — a whole row for an insert, the deleted row for a delete, and for an
//! update the primary key and the bytes of the columns that changed (a TPC-C Payment changes a
//! few of CUSTOMER's 21 columns; logging whole rows wrote 3 KB per transaction and cost a third
//! of the throughput on this 2-core machine); `physical` writes whole after-images at their
//! tuple ids (what PLR needs); `command` writes a serializable one-call transaction as the
//! call (`procedure/command.rs`). `encode_writes` builds the body every manager writes.
//!
//! **Managers** (`LogManagerKind`):
//! - `epoch` (`epoch.rs`): SiloR's epoch group commit over parallel logs: workers
//!   append to per-slot buffers, logger threads write them, a persistent-epoch file says what
//!   is durable. The commit order comes from the end timestamp; the log order does not matter.
//! - `ermia` (`ermia.rs`): ERMIA's single log (ERMIA §3.2): the end timestamp *is* the
//!   record's end LSN, drawn by the one atomic add that also reserves its log space; workers
//!   copy their record into a shared buffer at that LSN; a flusher writes the filled prefix
//!   into segment files.
//!
//! Both acknowledge a commit only once its record is durable; the `CommitTicket` says how far
//! the durable point must have come (an epoch, or an LSN).

pub(crate) mod catalog;
pub(crate) mod control;
pub(crate) mod durable;
pub(crate) mod epoch;
pub(crate) mod ermia;
pub(crate) mod format;
pub(crate) mod identity;

use crate::error::{Error, Result};
use crate::schema::TableSchema;
use crate::storage::WriteRecord;
use format::Put;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

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
pub(crate) const PEPOCH_FILE: &str = "pepoch";
/// The persistent-epoch file is rewritten with only its last record past this size.
pub(crate) const PEPOCH_MAX_BYTES: u64 = 1 << 20;

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

/// A durable-point record (`pepoch` for the epoch manager, `durable-lsn` for ERMIA's): every
/// record of an epoch ≤ `epoch` (or ending at an LSN ≤ it) is durable, and stream `i`'s
/// durable bytes end at `positions[i]`. It also says which files must exist — stream `i`'s
/// files `first[i] ..= positions[i].seq` — which checkpoint is current, and how long the
/// catalog is: recovery refuses a directory that lacks any of them instead of recovering
/// less than was acknowledged.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct PersistentEpoch {
    pub id: identity::DbId,
    pub epoch: u64,
    pub positions: Vec<LogPos>,
    /// Per stream, the first file recovery needs (the current checkpoint's, or the first of
    /// the session when there is none).
    pub first: Vec<u64>,
    /// The timestamp of the current checkpoint, if any.
    pub checkpoint: Option<u64>,
    /// The durable length of the catalog.
    pub catalog_bytes: u64,
}

impl PersistentEpoch {
    fn encode(&self) -> Vec<u8> {
        let mut p = Vec::new();
        self.id.put(&mut p);
        p.u64(self.epoch);
        p.u32(self.positions.len() as u32);
        for (x, f) in self.positions.iter().zip(&self.first) {
            p.u64(x.seq);
            p.u64(x.offset);
            p.u64(*f);
        }
        p.u8(u8::from(self.checkpoint.is_some()));
        p.u64(self.checkpoint.unwrap_or(0));
        p.u64(self.catalog_bytes);
        let mut out = Vec::new();
        format::put_block(&mut out, PEPOCH_MAGIC, &p);
        out
    }

    fn decode(b: &[u8]) -> Option<PersistentEpoch> {
        let mut g = format::Get::new(b);
        let id = identity::DbId::get(&mut g)?;
        let epoch = g.u64()?;
        let n = g.u32()?;
        let (mut positions, mut first) = (Vec::new(), Vec::new());
        for _ in 0..n.min(1 << 16) {
            positions.push(LogPos {
                seq: g.u64()?,
                offset: g.u64()?,
            });
            first.push(g.u64()?);
        }
        let has = g.u8()?;
        let ts = g.u64()?;
        let catalog_bytes = g.u64()?;
        g.done().then_some(PersistentEpoch {
            id,
            epoch,
            positions,
            first,
            checkpoint: (has != 0).then_some(ts),
            catalog_bytes,
        })
    }

    /// The newest durable point of `path` (`pepoch` or `durable-lsn`) and of its mirror
    /// (`PointFile` writes every record to both, so that losing, cutting or damaging either
    /// file loses no acknowledged commit), with a note for a file that was missing or damaged
    /// while the other was there. Each record must be `id`'s.
    pub(crate) fn read_last_of(
        path: &Path,
        id: identity::DbId,
    ) -> Result<(Option<PersistentEpoch>, Vec<String>)> {
        let mirror = mirror_of(path);
        let mut notes = Vec::new();
        let used =
            |why: String, copy: &Path| format!("{why}; its copy {} was used", copy.display());
        let (a, b) = match (Self::read_one(path, id), Self::read_one(&mirror, id)) {
            (Ok(a), Ok(b)) => {
                for (x, p, other) in [(&a, path, mirror.as_path()), (&b, mirror.as_path(), path)] {
                    if x.is_none() && other.exists() {
                        notes.push(used(format!("{} is missing or empty", p.display()), other));
                    }
                }
                (a, b)
            }
            // Damage in one file: the other holds every record (each is written to both).
            (Err(e @ Error::Corrupt { .. }), Ok(Some(b))) => {
                notes.push(used(e.to_string(), &mirror));
                (None, Some(b))
            }
            (Ok(Some(a)), Err(e @ Error::Corrupt { .. })) => {
                notes.push(used(e.to_string(), path));
                (Some(a), None)
            }
            (Err(e), _) | (_, Err(e)) => return Err(e),
        };
        let best = match (a, b) {
            (Some(a), Some(b)) => Some(if b.epoch > a.epoch { b } else { a }),
            (a, b) => a.or(b),
        };
        Ok((best, notes))
    }

    /// The last intact record of one durable-point file (a torn last record is the one being
    /// written when the process stopped: the previous one holds).
    fn read_one(path: &Path, id: identity::DbId) -> Result<Option<PersistentEpoch>> {
        let data = match std::fs::read(path) {
            Ok(d) => d,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(Error::io(path, &e)),
        };
        let (blocks, end, why) = format::read_blocks(&data, PEPOCH_MAGIC);
        if let Some(why) = why {
            // Only the record being written at the crash can be damaged; damage before it
            // would silently move the durable point back.
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
        let at = end - last.len() - format::BLOCK_HEADER;
        let rec = Self::decode(last)
            .ok_or_else(|| format::malformed(path, at as u64, "durable-point record"))?;
        id.check(rec.id, path)?;
        Ok(Some(rec))
    }
}

/// The mirror of a durable-point file.
pub(crate) fn mirror_of(path: &Path) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push("-mirror");
    PathBuf::from(s)
}

/// What a commit gets back: how far the log's durable point must come for the commit to be
/// durable — the epoch its record belongs to (epoch manager) or its record's end LSN, which is
/// its end timestamp (ERMIA). The commit may be acknowledged to a client once
/// `Database::is_durable` says so.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CommitTicket {
    pub(crate) epoch: u64,
    pub(crate) ts: crate::timestamp::Timestamp,
}

impl CommitTicket {
    /// The group-commit epoch of this commit, or with ERMIA's log manager the end LSN of its
    /// record (0 when there was nothing to make durable).
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// The commit timestamp: the end timestamp of an update transaction, the read time of a
    /// read-only one. A transaction that begins with it as its floor
    /// (`Database::begin_after`) sees this commit.
    pub fn commit_ts(&self) -> crate::timestamp::Timestamp {
        self.ts
    }
}

/// Counters for reports.
#[derive(Clone, Copy, Debug, Default)]
pub struct LogStats {
    /// Bytes of checksummed blocks written to log files.
    pub bytes_written: u64,
    /// Checksummed blocks written.
    pub blocks_written: u64,
    /// fsync calls (log files, durable-point files and their mirrors).
    pub fsyncs: u64,
    /// Group-commit rounds (epoch manager) or flushes (ERMIA).
    pub rounds: u64,
    /// The durable epoch (epoch manager) or the durable LSN (ERMIA).
    pub durable_epoch: u64,
}

/// The log of a durable database: one of the two managers (`LogManagerKind`).
pub(crate) enum LogManager {
    Epoch(Arc<epoch::EpochLog>),
    Ermia(Arc<ermia::ErmiaLog>),
}

impl LogManager {
    /// Starts logging into `dir` (recovered and locked) for database `db`: epochs continue at
    /// `first_epoch`, files at sequence `first_seq`, LSNs at the clock; `point` is the
    /// manager's durable-point file, and `extra` what its records say besides the point.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn start(
        dir: &Path,
        config: &crate::Config,
        slots: usize,
        first_epoch: u64,
        first_seq: u64,
        clock: &crate::timestamp::Source,
        db: identity::DbId,
        extra: control::PointExtra,
        point: PointFile,
    ) -> Result<LogManager> {
        Ok(match config.log_manager {
            crate::config::LogManagerKind::Epoch => {
                let l = epoch::EpochLog::start(
                    dir,
                    config,
                    slots,
                    first_epoch,
                    first_seq,
                    db,
                    extra,
                    point,
                )?;
                if let Some(p) = clock.deferring() {
                    l.control
                        .set_on_durable(Box::new(move |d| p.release_durable(d)));
                }
                LogManager::Epoch(l)
            }
            crate::config::LogManagerKind::Ermia => LogManager::Ermia(ermia::ErmiaLog::start(
                dir, config, slots, first_seq, clock, db, extra, point,
            )?),
        })
    }

    /// The ERMIA manager, whose commit protocol differs (`cc/mvocc.rs`).
    #[inline]
    pub(crate) fn ermia(&self) -> Option<&ermia::ErmiaLog> {
        match self {
            LogManager::Ermia(l) => Some(l),
            LogManager::Epoch(_) => None,
        }
    }

    /// The ticket of a read-only commit: durable once every commit it can have seen is.
    #[inline]
    pub(crate) fn read_only_ticket(&self, clock: &crate::timestamp::Source) -> u64 {
        match self {
            // `partial-order`: a snapshot holds only groups whose records are durable
            // (`txn/end.rs`), so a reader waits for nothing.
            LogManager::Epoch(_) if clock.is_partial_order() => 0,
            // Every commit it saw has an epoch ≤ the current one.
            LogManager::Epoch(l) => l.current_epoch(),
            // Every commit it saw ends at or below the clock.
            LogManager::Ermia(_) => clock.now().get(),
        }
    }

    /// The durable point (an epoch or an LSN), failure, rounds and counters.
    #[inline]
    pub(crate) fn control(&self) -> &control::Control {
        match self {
            LogManager::Epoch(l) => &l.control,
            LogManager::Ermia(l) => &l.control,
        }
    }
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

/// Appends the body of a commit record: `writes u32 | (table u32, op u8, ...)*`, or, for a
/// logged procedure call, `COMMAND u32 | call`. Physical logging writes every write as its
/// tuple id and whole after-image (or a delete mark). Otherwise an update of a row that existed
/// is a patch (its primary key and the bytes of the columns that changed); an insert or
/// re-insert the whole row; a delete the row it deleted. `key` is scratch space.
pub(crate) fn encode_writes<'s>(
    b: &mut Vec<u8>,
    key: &mut Vec<u8>,
    physical: bool,
    writes: &[WriteRecord],
    command: Option<&[u8]>,
    table_of: impl Fn(u32) -> &'s crate::storage::table::Table,
) {
    if let Some(call) = command {
        b.u32(COMMAND);
        b.extend_from_slice(call);
        return;
    }
    b.u32(writes.len() as u32);
    let (mut nb, mut ob) = (Vec::new(), Vec::new());
    for w in writes {
        // SAFETY: our own committed-to-be versions and the versions they replace (write
        // locked by us); pinned by the caller.
        let v = unsafe { &*w.new };
        let old = unsafe { w.old.as_ref() }.filter(|o| !o.is_tombstone());
        let t = table_of(w.table);
        b.u32(w.table);
        if physical {
            // The tuple id is the row's location: its indirection entry, which recovery
            // recreates (version blocks themselves are new memory in every process).
            b.u8(if v.is_tombstone() {
                OP_DELETE_AT
            } else {
                OP_PUT_AT
            });
            b.varint(w.tid.get() as i64);
            if !v.is_tombstone() {
                b.bytes(t.row(v, &mut nb));
            }
            continue;
        }
        match old {
            Some(o) if !v.is_tombstone() => {
                let schema = &t.schema;
                let new = t.row(v, &mut nb);
                b.u8(OP_PATCH);
                schema.encode_key_from_row(0, new, key);
                b.bytes(key);
                encode_patch(schema, t.row(o, &mut ob), new, b);
            }
            _ => {
                b.u8(if v.is_tombstone() { OP_DELETE } else { OP_PUT });
                b.bytes(t.row(v, &mut nb));
            }
        }
    }
}

/// An append-only file of `PersistentEpoch` records (the epoch manager's `pepoch`, ERMIA's
/// `durable-lsn`) and its mirror (`…-mirror`): each record is appended to both and fsynced
/// (with `FsyncPolicy::Always`) before the point it names is published, so a lost or cut
/// file still leaves the newest point in the other; past `PEPOCH_MAX_BYTES` each file is
/// atomically replaced by its last record.
pub(crate) struct PointFile {
    files: [(PathBuf, File, u64); 2],
    fsync: bool,
    /// The last record published (checked against the next one in debug builds).
    last: Option<PersistentEpoch>,
}

impl PointFile {
    pub(crate) fn open(path: &Path, fsync: bool) -> Result<PointFile> {
        let one = |p: PathBuf| -> Result<(PathBuf, File, u64)> {
            let f = open_append(&p)?;
            let mut n = f.metadata().map_err(|e| Error::io(&p, &e))?.len();
            if n > 0 {
                // A record torn by the previous session's stop is harmless only while it is
                // the last one (`read_one` skips it); appending after it would put it mid-file
                // and make the file unreadable at the next open. Cut it first.
                let data = std::fs::read(&p).map_err(|e| Error::io(&p, &e))?;
                let (_, end, why) = format::read_blocks(&data, PEPOCH_MAGIC);
                // A record damaged earlier in the file (recovery then used the other file,
                // which holds every record) is cut the same way: the later records it hides
                // are in the other file.
                if why.is_some() {
                    f.set_len(end as u64)
                        .and_then(|_| f.sync_data())
                        .map_err(|e| Error::io(&p, &e))?;
                    n = end as u64;
                }
            }
            Ok((p, f, n))
        };
        Ok(PointFile {
            files: [one(path.to_path_buf())?, one(mirror_of(path))?],
            fsync,
            last: None,
        })
    }

    pub(crate) fn publish(&mut self, p: &PersistentEpoch) -> Result<()> {
        use std::io::Write;
        if cfg!(debug_assertions) {
            if let Some(l) = &self.last {
                // A durable point only moves forward: every stream's end, the first file
                // needed, the checkpoint and the catalog's length never go back.
                debug_assert!(p.id == l.id && p.epoch >= l.epoch, "{l:?} then {p:?}");
                let pos = |x: &LogPos| (x.seq, x.offset);
                debug_assert!(
                    p.positions.len() == l.positions.len()
                        && p.positions
                            .iter()
                            .zip(&l.positions)
                            .all(|(a, b)| pos(a) >= pos(b)),
                    "{l:?} then {p:?}"
                );
                debug_assert!(p.checkpoint >= l.checkpoint, "{l:?} then {p:?}");
                debug_assert!(p.catalog_bytes >= l.catalog_bytes, "{l:?} then {p:?}");
            }
            self.last = Some(p.clone());
        }
        let rec = p.encode();
        if self.files[0].2 + rec.len() as u64 > PEPOCH_MAX_BYTES {
            for (path, file, bytes) in &mut self.files {
                format::write_atomic(path, &rec)?;
                *file = open_append(path)?;
                *bytes = rec.len() as u64;
            }
            return Ok(());
        }
        for (path, file, bytes) in &mut self.files {
            file.write_all(&rec).map_err(|x| Error::io(path, &x))?;
            *bytes += rec.len() as u64;
        }
        if self.fsync {
            // Both files at once: the mirror costs no second fsync latency on the commit path.
            let [(p0, f0, _), (p1, f1, _)] = &self.files;
            let (r0, r1) = std::thread::scope(|s| {
                let h = s.spawn(|| f1.sync_data());
                (f0.sync_data(), h.join())
            });
            r0.map_err(|x| Error::io(p0, &x))?;
            match r1 {
                Ok(r) => r.map_err(|x| Error::io(p1, &x))?,
                Err(_) => {
                    return Err(Error::LogFailed(format!(
                        "the thread syncing {} stopped",
                        p1.display()
                    )))
                }
            }
        }
        Ok(())
    }
}

pub(crate) fn open_append(path: &Path) -> Result<File> {
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|e| Error::io(path, &e))
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

    fn point(id: identity::DbId, epoch: u64) -> PersistentEpoch {
        PersistentEpoch {
            id,
            epoch,
            positions: vec![LogPos {
                seq: 1,
                offset: epoch * 10,
            }],
            first: vec![1],
            checkpoint: None,
            catalog_bytes: 0,
        }
    }

    /// A fresh directory whose point file and mirror hold epochs 1–3.
    fn three_points(tag: &str) -> (PathBuf, PathBuf, identity::DbId) {
        let dir = std::env::temp_dir().join(format!("myriad-point-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(PEPOCH_FILE);
        let id = identity::DbId::fresh();
        let mut f = PointFile::open(&path, false).unwrap();
        for e in 1..=3 {
            f.publish(&point(id, e)).unwrap();
        }
        (dir, path, id)
    }

    /// A record torn by a crash is cut when the file is next opened, so that records appended
    /// after it stay readable (before this, the torn record ended up mid-file and the next
    /// open failed with `Corrupt`).
    #[test]
    fn a_torn_last_point_record_is_cut_before_the_next_session_appends() {
        let (dir, path, id) = three_points("torn");
        // The crash: half of epoch 4's record reached each file.
        let rec = point(id, 4).encode();
        for p in [path.clone(), mirror_of(&path)] {
            use std::io::Write;
            let mut file = open_append(&p).unwrap();
            file.write_all(&rec[..rec.len() / 2]).unwrap();
        }
        let (last, notes) = PersistentEpoch::read_last_of(&path, id).unwrap();
        assert_eq!(last.map(|p| p.epoch), Some(3));
        assert!(notes.is_empty(), "{notes:?}");
        // The next session publishes more.
        let mut f = PointFile::open(&path, false).unwrap();
        for e in 5..=6 {
            f.publish(&point(id, e)).unwrap();
        }
        drop(f);
        let (last, notes) = PersistentEpoch::read_last_of(&path, id).unwrap();
        assert_eq!(last.map(|p| p.epoch), Some(6));
        assert!(notes.is_empty(), "{notes:?}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Damage inside one file (not at its end) is not a torn write; the other file holds every
    /// record, so the newest point is still found, with a note naming the damage.
    #[test]
    fn damage_inside_one_point_file_falls_back_to_its_copy() {
        let (dir, path, id) = three_points("bad");
        for (damaged, copy) in [
            (path.clone(), mirror_of(&path)),
            (mirror_of(&path), path.clone()),
        ] {
            let good = std::fs::read(&copy).unwrap();
            let mut data = good.clone();
            data[format::BLOCK_HEADER + 2] ^= 0xff; // inside the first record's payload
            std::fs::write(&damaged, &data).unwrap();
            let (last, notes) = PersistentEpoch::read_last_of(&path, id).unwrap();
            assert_eq!(last.map(|p| p.epoch), Some(3));
            assert_eq!(notes.len(), 1, "{notes:?}");
            assert!(notes[0].contains("damaged"), "{notes:?}");
            std::fs::write(&damaged, &good).unwrap();
        }
        // Both damaged: an error, not a silently older point.
        for p in [path.clone(), mirror_of(&path)] {
            let mut data = std::fs::read(&p).unwrap();
            data[format::BLOCK_HEADER + 2] ^= 0xff;
            std::fs::write(&p, &data).unwrap();
        }
        assert!(matches!(
            PersistentEpoch::read_last_of(&path, id),
            Err(Error::Corrupt { .. })
        ));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
