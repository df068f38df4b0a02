//! Transactionally consistent checkpoints from an MVCC snapshot (thesis §4.2.2).
//!
//! `Database::checkpoint` first makes every logger start a new log file (so each record
//! committed after the snapshot is in a file at or after the sequence numbers it notes), then
//! reads every table in one read-only snapshot transaction while other transactions go on,
//! and writes `checkpoint-<ts>.tmp/`: one file per table (checksummed blocks of rows in the
//! table's row layout) and a `MANIFEST` (the snapshot timestamp, the first log file each
//! logger still needs, and per table its id, file, row count and size). Files are fsynced,
//! the directory is renamed to `checkpoint-<ts>`, and `CURRENT` is replaced atomically to
//! name it. Only then are older checkpoints and log files that only hold commits the snapshot
//! already contains deleted. A crash at any point leaves the previous `CURRENT` valid.
//!
//! Beside each table file, `table-NNNN.tids` holds the tuple id of every row (u64, in the
//! same order, checksummed blocks): PLR puts each row back at its tuple id, where the
//! physical log records written after the checkpoint name it.

use crate::engine::Database;
use crate::error::{Error, Result};
use crate::log::format::{self, Get, Put};
use crate::log::identity::{DbId, FileHeader, FileKind};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

const CKPT_MAGIC: u32 = 0x4b43_524d; // "MRCK"
const MANIFEST_MAGIC: u32 = 0x464d_524d; // "MRMF"
const CURRENT_FILE: &str = "CURRENT";
/// Rows are written in blocks of about this many bytes.
const BLOCK_BYTES: usize = 1 << 20;

/// One table of a checkpoint.
#[derive(Clone, Debug)]
pub(crate) struct TableManifest {
    pub id: u32,
    pub name: String,
    pub file: String,
    pub rows: u64,
    pub bytes: u64,
    /// Size of the tuple-id file (`None` in checkpoints written before they existed).
    pub tid_bytes: Option<u64>,
}

/// Marks the manifest's trailing section of tuple-id file sizes.
const TIDS_SECTION: u32 = 1;

/// A complete checkpoint.
#[derive(Clone, Debug)]
pub(crate) struct Manifest {
    pub ts: u64,
    pub dir: PathBuf,
    /// Per logger, the first log file sequence number recovery still needs.
    pub first_seq: Vec<u64>,
    pub tables: Vec<TableManifest>,
}

/// What `Database::checkpoint` wrote.
#[derive(Clone, Debug)]
pub struct CheckpointInfo {
    /// Snapshot timestamp: the checkpoint holds exactly the commits with end timestamps ≤ it.
    pub ts: u64,
    /// The checkpoint's directory (`checkpoint-<ts>...` in the data directory).
    pub dir: PathBuf,
    /// Tables written (one file each).
    pub tables: usize,
    /// Rows written, over all tables.
    pub rows: u64,
    /// Bytes of the table files and their tuple-id files.
    pub bytes: u64,
    /// Wall-clock time of the whole checkpoint.
    pub elapsed: std::time::Duration,
    /// Old log files and checkpoints deleted after it was published.
    pub files_removed: usize,
}

fn ckpt_dir_name(ts: u64) -> String {
    format!("checkpoint-{ts:020}")
}

/// Whether `name` is a directory name for a checkpoint at `ts`: `checkpoint-<ts>`, or
/// `checkpoint-<ts>-<k>` for the k-th checkpoint at one timestamp (see `free_ckpt_name`).
fn ckpt_name_matches(ts: u64, name: &str) -> bool {
    let base = ckpt_dir_name(ts);
    name == base
        || name
            .strip_prefix(base.as_str())
            .and_then(|r| r.strip_prefix('-'))
            .is_some_and(|k| !k.is_empty() && k.bytes().all(|b| b.is_ascii_digit()))
}

impl Manifest {
    fn encode(&self, db: DbId) -> Vec<u8> {
        let mut p = Vec::new();
        db.put(&mut p);
        p.u64(self.ts);
        p.u32(self.first_seq.len() as u32);
        for &s in &self.first_seq {
            p.u64(s);
        }
        p.u32(self.tables.len() as u32);
        for t in &self.tables {
            p.u32(t.id);
            p.bytes(t.name.as_bytes());
            p.bytes(t.file.as_bytes());
            p.u64(t.rows);
            p.u64(t.bytes);
        }
        if self.tables.iter().all(|t| t.tid_bytes.is_some()) {
            p.u32(TIDS_SECTION);
            for t in &self.tables {
                p.u64(t.tid_bytes.unwrap_or(0));
            }
        }
        let mut out = Vec::new();
        format::put_block(&mut out, MANIFEST_MAGIC, &p);
        out
    }

    fn decode(b: &[u8], dir: PathBuf) -> Option<(DbId, Manifest)> {
        let mut g = Get::new(b);
        let id = DbId::get(&mut g)?;
        let ts = g.u64()?;
        let n = g.u32()?;
        let mut first_seq = Vec::new();
        for _ in 0..n {
            first_seq.push(g.u64()?);
        }
        let n = g.u32()?;
        let mut tables = Vec::new();
        for _ in 0..n {
            tables.push(TableManifest {
                id: g.u32()?,
                name: g.str()?,
                file: g.str()?,
                rows: g.u64()?,
                bytes: g.u64()?,
                tid_bytes: None,
            });
        }
        if !g.done() {
            if g.u32()? != TIDS_SECTION {
                return None;
            }
            for t in &mut tables {
                t.tid_bytes = Some(g.u64()?);
            }
            if !g.done() {
                return None;
            }
        }
        Some((
            id,
            Manifest {
                ts,
                dir,
                first_seq,
                tables,
            },
        ))
    }

    /// The checkpoint `CURRENT` names, checked (database `db`'s); `None` if there is none yet.
    /// Any damage is an error: `CURRENT` is only written once the checkpoint is complete and
    /// synced.
    pub(crate) fn read_current(dir: &Path, db: DbId) -> Result<Option<Manifest>> {
        let cur = dir.join(CURRENT_FILE);
        let data = match std::fs::read(&cur) {
            Ok(d) => d,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(Error::io(&cur, &e)),
        };
        let b = read_one_block(&cur, &data, MANIFEST_MAGIC)?;
        let mut g = Get::new(b);
        let id = DbId::get(&mut g).ok_or_else(|| format::malformed(&cur, 0, "CURRENT"))?;
        db.check(id, &cur)?;
        let name = String::from_utf8(b[16..].to_vec())
            .map_err(|_| format::malformed(&cur, 0, "checkpoint name"))?;
        if !name.starts_with("checkpoint-") || name.contains(['/', '\\']) {
            return Err(format::malformed(&cur, 0, "checkpoint name"));
        }
        let cdir = dir.join(&name);
        let mpath = cdir.join("MANIFEST");
        let data = std::fs::read(&mpath).map_err(|e| Error::io(&mpath, &e))?;
        let b = read_one_block(&mpath, &data, MANIFEST_MAGIC)?;
        let (id, m) =
            Manifest::decode(b, cdir).ok_or_else(|| format::malformed(&mpath, 0, "manifest"))?;
        db.check(id, &mpath)?;
        if !ckpt_name_matches(m.ts, &name) {
            return Err(format::malformed(
                &mpath,
                0,
                "manifest (its timestamp is not its directory's)",
            ));
        }
        Ok(Some(m))
    }
}

fn read_one_block<'a>(path: &Path, data: &'a [u8], magic: u32) -> Result<&'a [u8]> {
    let (blocks, end, why) = format::read_blocks(data, magic);
    match (blocks.first(), why) {
        (Some(b), None) if blocks.len() == 1 => Ok(b),
        (_, Some(why)) => Err(Error::Corrupt {
            file: path.display().to_string(),
            offset: end as u64,
            message: why,
        }),
        _ => Err(format::malformed(path, 0, "single-block file")),
    }
}

impl TableManifest {
    /// The tuple-id file of the table file.
    fn tids_file(file: &str) -> String {
        format!("{file}.tids")
    }

    /// Reads and checks the tuple ids of the table's rows (in row order).
    pub(crate) fn read_tids(&self, dir: &Path, db: DbId, ts: u64) -> Result<Vec<u64>> {
        let path = dir.join(Self::tids_file(&self.file));
        let Some(expect) = self.tid_bytes else {
            return Err(Error::Corrupt {
                file: path.display().to_string(),
                offset: 0,
                message: "this checkpoint has no tuple ids (written by an older version): \
                          physical recovery cannot place its rows; recover with a logical \
                          scheme"
                    .into(),
            });
        };
        let data = std::fs::read(&path).map_err(|e| Error::io(&path, &e))?;
        let corrupt = |offset: u64, message: String| Error::Corrupt {
            file: path.display().to_string(),
            offset,
            message,
        };
        if data.len() as u64 != expect {
            return Err(corrupt(
                data.len().min(expect as usize) as u64,
                format!("{} bytes, the manifest says {expect}", data.len()),
            ));
        }
        FileHeader::expect(
            &path,
            &data,
            db,
            FileKind::CheckpointTids,
            self.id.into(),
            ts,
        )?;
        let (blocks, end, why) = format::read_blocks(&data[FileHeader::LEN..], CKPT_MAGIC);
        if let Some(why) = why {
            return Err(corrupt((FileHeader::LEN + end) as u64, why));
        }
        let mut tids = Vec::with_capacity(self.rows as usize);
        for b in blocks {
            let mut g = Get::new(b);
            while !g.done() {
                tids.push(
                    g.u64()
                        .ok_or_else(|| corrupt(0, "a partial tuple id".into()))?,
                );
            }
        }
        if tids.len() as u64 != self.rows {
            return Err(corrupt(
                0,
                format!(
                    "{} tuple ids, the manifest says {} rows",
                    tids.len(),
                    self.rows
                ),
            ));
        }
        Ok(tids)
    }

    /// Reads and checks the table's rows (concatenated).
    pub(crate) fn read(&self, dir: &Path, row_size: usize, db: DbId, ts: u64) -> Result<Vec<u8>> {
        let path = dir.join(&self.file);
        let data = std::fs::read(&path).map_err(|e| Error::io(&path, &e))?;
        let corrupt = |offset: u64, message: String| Error::Corrupt {
            file: path.display().to_string(),
            offset,
            message,
        };
        if data.len() as u64 != self.bytes {
            return Err(corrupt(
                data.len().min(self.bytes as usize) as u64,
                format!("{} bytes, the manifest says {}", data.len(), self.bytes),
            ));
        }
        FileHeader::expect(
            &path,
            &data,
            db,
            FileKind::CheckpointRows,
            self.id.into(),
            ts,
        )?;
        let (blocks, end, why) = format::read_blocks(&data[FileHeader::LEN..], CKPT_MAGIC);
        if let Some(why) = why {
            return Err(corrupt((FileHeader::LEN + end) as u64, why));
        }
        let mut rows = Vec::with_capacity(data.len());
        for b in blocks {
            rows.extend_from_slice(b);
        }
        if row_size == 0
            || rows.len() % row_size != 0
            || (rows.len() / row_size) as u64 != self.rows
        {
            return Err(corrupt(
                0,
                format!(
                    "{} bytes of rows of {row_size} bytes, the manifest says {} rows",
                    rows.len(),
                    self.rows
                ),
            ));
        }
        Ok(rows)
    }
}

impl Database {
    /// Writes a transactionally consistent checkpoint while transactions go on, then deletes
    /// the log files and checkpoints it makes unnecessary. One checkpoint runs at a time.
    /// Memory-only databases have nothing to checkpoint (`Error::Unsupported`).
    ///
    /// The snapshot transaction holds back garbage collection while it runs, and a
    /// concurrent `create_index` waits for it (up to `Config::ddl_wait`).
    pub fn checkpoint(&self) -> Result<CheckpointInfo> {
        let (Some(state), Some(log)) = (self.shared.durable.as_ref(), self.shared.log.get()) else {
            return Err(Error::Unsupported(
                "checkpoint of a memory-only database (open it with a data directory)".into(),
            ));
        };
        if self.shared.config.storage == crate::config::VersionStorage::SingleVersion {
            // A checkpoint is a read at one snapshot while transactions run; single-version
            // storage keeps none (recovery's own checkpoint, written before the database is
            // handed out, needs none).
            return Err(Error::Unsupported(
                "checkpoint of a database on version storage `single-version` (it keeps no \
                 snapshot to copy while transactions run; recovery still replays the log)"
                    .into(),
            ));
        }
        let _one = state.checkpoint_lock.lock();
        let first_seq = log.control().rotate()?;
        // `partial-order`: a member of a commit group that appended its record before the
        // rotation may not be readable yet (its group waits for it to become durable), and
        // older log files are removed below: the snapshot must wait for every group open at
        // the rotation. (Other sources' end timestamps are drawn before the append, below
        // any read time drawn after it, and a snapshot waits for a Preparing writer.)
        // (A no-op under the counters.)
        self.shared.floor(self.shared.clock.newest_end_ts())?;
        self.write_checkpoint(state, first_seq)
    }

    /// Writes a checkpoint whose recovery needs the log files from `first_seq` on (per
    /// logger; one for ERMIA), then deletes older ones. The caller holds the checkpoint lock
    /// or is recovery (which runs before anyone else).
    pub(crate) fn write_checkpoint(
        &self,
        state: &crate::recovery::DurableState,
        first_seq: Vec<u64>,
    ) -> Result<CheckpointInfo> {
        let started = Instant::now();
        let dir = &state.dir;
        let tx = self.begin_snapshot()?;
        let ts = tx.begin_ts().get();
        let name = free_ckpt_name(dir, state.id, ts)?;
        let tmp = dir.join(format!("{name}.tmp"));
        if tmp.exists() {
            std::fs::remove_dir_all(&tmp).map_err(|e| Error::io(&tmp, &e))?;
        }
        std::fs::create_dir(&tmp).map_err(|e| Error::io(&tmp, &e))?;
        let r = self.write_checkpoint_files(state, tx, &tmp, &name, first_seq);
        let m = match r {
            Ok(m) => m,
            Err(e) => {
                // Nothing half-written stays behind (best effort: the error is the news).
                let _ = std::fs::remove_dir_all(&tmp);
                return Err(e);
            }
        };
        let fin = dir.join(&name);
        std::fs::rename(&tmp, &fin).map_err(|e| Error::io(&fin, &e))?;
        format::sync_dir(dir)?;
        let mut cur = Vec::new();
        let mut p = Vec::new();
        state.id.put(&mut p);
        p.extend_from_slice(name.as_bytes());
        format::put_block(&mut cur, MANIFEST_MAGIC, &p);
        format::write_atomic(&dir.join(CURRENT_FILE), &cur)?;
        if let Some(log) = self.shared.log.get() {
            // From the next durable-point record on, recovery refuses a directory without
            // this checkpoint (a lost `CURRENT` would otherwise recover the log alone).
            log.control().set_checkpoint(ts, m.first_seq.clone());
        }
        let files_removed = remove_obsolete(dir, &name, &m.first_seq)?;
        let (all_rows, all_bytes) = m.tables.iter().fold((0, 0), |(r, b), t| {
            (r + t.rows, b + t.bytes + t.tid_bytes.unwrap_or(0))
        });
        Ok(CheckpointInfo {
            ts,
            dir: fin,
            tables: m.tables.len(),
            rows: all_rows,
            bytes: all_bytes,
            elapsed: started.elapsed(),
            files_removed,
        })
    }

    /// Writes the table files and the manifest of a checkpoint at `ts` into `tmp`.
    fn write_checkpoint_files(
        &self,
        state: &crate::recovery::DurableState,
        mut tx: crate::txn::Transaction<'_>,
        tmp: &Path,
        name: &str,
        first_seq: Vec<u64>,
    ) -> Result<Manifest> {
        let ts = tx.begin_ts().get();
        let mut tables = Vec::new();
        for (i, t) in self.shared.live_tables().iter().enumerate() {
            let file = format!("table-{i:04}");
            let path = tmp.join(&file);
            let tpath = tmp.join(TableManifest::tids_file(&file));
            let header = |kind| FileHeader::new(state.id, kind, t.id.into(), ts).encode();
            let mut rows_out = BlockFile::create(&path, &header(FileKind::CheckpointRows))?;
            let mut tids_out = BlockFile::create(&tpath, &header(FileKind::CheckpointTids))?;
            let mut rows = 0u64;
            tx.scan_table_tids(t, |tid, r| {
                rows += 1;
                rows_out.push(r.data);
                tids_out.push(&tid.get().to_le_bytes());
                true
            })?;
            let bytes = rows_out.finish()?;
            let tid_bytes = tids_out.finish()?;
            tables.push(TableManifest {
                id: t.id,
                name: t.schema.name.clone(),
                file,
                rows,
                bytes,
                tid_bytes: Some(tid_bytes),
            });
        }
        tx.commit_deferred()?;
        let m = Manifest {
            ts,
            dir: state.dir.join(name),
            first_seq,
            tables,
        };
        format::write_atomic(&tmp.join("MANIFEST"), &m.encode(state.id))?;
        Ok(m)
    }
}

/// A checkpoint file being written: checksummed blocks of about `BLOCK_BYTES`.
struct BlockFile {
    path: PathBuf,
    f: std::fs::File,
    payload: Vec<u8>,
    out: Vec<u8>,
    bytes: u64,
    err: Option<std::io::Error>,
}

impl BlockFile {
    /// Creates the file and writes `header` (its `FileHeader`) first.
    fn create(path: &Path, header: &[u8]) -> Result<BlockFile> {
        let mut f = std::fs::File::create(path).map_err(|e| Error::io(path, &e))?;
        f.write_all(header).map_err(|e| Error::io(path, &e))?;
        Ok(BlockFile {
            path: path.to_path_buf(),
            f,
            payload: Vec::with_capacity(BLOCK_BYTES + 4096),
            out: Vec::new(),
            bytes: header.len() as u64,
            err: None,
        })
    }

    fn push(&mut self, data: &[u8]) {
        self.payload.extend_from_slice(data);
        if self.payload.len() >= BLOCK_BYTES {
            self.write();
        }
    }

    fn write(&mut self) {
        self.out.clear();
        format::put_block(&mut self.out, CKPT_MAGIC, &self.payload);
        self.payload.clear();
        self.bytes += self.out.len() as u64;
        if self.err.is_none() {
            if let Err(e) = self.f.write_all(&self.out) {
                self.err = Some(e);
            }
        }
    }

    /// Writes the last block and syncs; returns the file's size.
    fn finish(mut self) -> Result<u64> {
        if !self.payload.is_empty() {
            self.write();
        }
        if let Some(e) = self.err.take() {
            return Err(Error::io(&self.path, &e));
        }
        self.f.sync_all().map_err(|e| Error::io(&self.path, &e))?;
        Ok(self.bytes)
    }
}

/// The directory name for a new checkpoint at `ts`. Usually `checkpoint-<ts>`; but an
/// earlier run (often a recovery with nothing to add since) may have left a checkpoint at this
/// very timestamp, having stopped before it finished publishing or cleaning up. One that
/// `CURRENT` does not name was never published, so nothing depends on it: it is removed. The
/// one `CURRENT` names stays until the new one replaces it (its manifest may need older log
/// files than the new one, and a crash in between must still find it), so the new one takes
/// the next free `checkpoint-<ts>-<k>`.
fn free_ckpt_name(dir: &Path, db: DbId, ts: u64) -> Result<String> {
    let mut name = ckpt_dir_name(ts);
    let mut current: Option<Option<std::ffi::OsString>> = None;
    for k in 1.. {
        let fin = dir.join(&name);
        if !fin.exists() {
            break;
        }
        if current.is_none() {
            let m = Manifest::read_current(dir, db)?;
            current = Some(m.and_then(|m| m.dir.file_name().map(|n| n.to_owned())));
        }
        if current
            .as_ref()
            .is_some_and(|c| c.as_deref() == Some(name.as_ref()))
        {
            name = format!("{}-{k}", ckpt_dir_name(ts));
            continue;
        }
        std::fs::remove_dir_all(&fin).map_err(|e| Error::io(&fin, &e))?;
        format::sync_dir(dir)?;
        break;
    }
    Ok(name)
}

/// Deletes checkpoints other than `keep` and log files below `first_seq`.
fn remove_obsolete(dir: &Path, keep: &str, first_seq: &[u64]) -> Result<usize> {
    let mut n = 0;
    for e in std::fs::read_dir(dir).map_err(|e| Error::io(dir, &e))? {
        let e = e.map_err(|e| Error::io(dir, &e))?;
        let name = e.file_name().to_string_lossy().to_string();
        if name.starts_with("checkpoint-") && name != keep {
            let p = e.path();
            std::fs::remove_dir_all(&p).map_err(|e| Error::io(&p, &e))?;
            n += 1;
        }
    }
    for (logger, seq, p) in crate::log::log_files(dir)? {
        if first_seq.get(logger).is_none_or(|&f| seq < f) {
            std::fs::remove_file(&p).map_err(|e| Error::io(&p, &e))?;
            n += 1;
        }
    }
    // ERMIA's segments (one log): those before the first one needed. Sequence numbers
    // continue across sessions and managers, so this also removes another manager's files.
    let first = first_seq.iter().copied().min().unwrap_or(0);
    for (seq, _, p) in crate::log::ermia::segment_files(dir)? {
        if seq < first {
            std::fs::remove_file(&p).map_err(|e| Error::io(&p, &e))?;
            n += 1;
        }
    }
    Ok(n)
}
