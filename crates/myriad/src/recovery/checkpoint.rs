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

use crate::config::Isolation;
use crate::engine::Database;
use crate::error::{Error, Result};
use crate::log::format::{self, Get, Put};
use crate::txn::TxnOptions;
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
}

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
    pub dir: PathBuf,
    pub tables: usize,
    pub rows: u64,
    pub bytes: u64,
    pub elapsed: std::time::Duration,
    /// Old log files and checkpoints deleted after it was published.
    pub files_removed: usize,
}

fn ckpt_dir_name(ts: u64) -> String {
    format!("checkpoint-{ts:020}")
}

impl Manifest {
    fn encode(&self) -> Vec<u8> {
        let mut p = Vec::new();
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
        let mut out = Vec::new();
        format::put_block(&mut out, MANIFEST_MAGIC, &p);
        out
    }

    fn decode(b: &[u8], dir: PathBuf) -> Option<Manifest> {
        let mut g = Get::new(b);
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
            });
        }
        Some(Manifest {
            ts,
            dir,
            first_seq,
            tables,
        })
    }

    /// The checkpoint `CURRENT` names, checked; `None` if there is none yet. Any damage is an
    /// error: `CURRENT` is only written once the checkpoint is complete and synced.
    pub(crate) fn read_current(dir: &Path) -> Result<Option<Manifest>> {
        let cur = dir.join(CURRENT_FILE);
        let data = match std::fs::read(&cur) {
            Ok(d) => d,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(Error::io(&cur, &e)),
        };
        let name = read_one_block(&cur, &data, MANIFEST_MAGIC)?;
        let name = String::from_utf8(name.to_vec())
            .map_err(|_| format::malformed(&cur, 0, "checkpoint name"))?;
        let cdir = dir.join(&name);
        let mpath = cdir.join("MANIFEST");
        let data = std::fs::read(&mpath).map_err(|e| Error::io(&mpath, &e))?;
        let b = read_one_block(&mpath, &data, MANIFEST_MAGIC)?;
        Manifest::decode(b, cdir)
            .map(Some)
            .ok_or_else(|| format::malformed(&mpath, 0, "manifest"))
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
    /// Reads and checks the table's rows (concatenated).
    pub(crate) fn read(&self, dir: &Path, row_size: usize) -> Result<Vec<u8>> {
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
        let (blocks, end, why) = format::read_blocks(&data, CKPT_MAGIC);
        if let Some(why) = why {
            return Err(corrupt(end as u64, why));
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
        let (Some(state), Some(log)) = (self.durable.as_ref(), self.log.get()) else {
            return Err(Error::Unsupported(
                "checkpoint of a memory-only database (open it with a data directory)".into(),
            ));
        };
        let _one = state.checkpoint_lock.lock();
        let started = Instant::now();
        let first_seq = log.rotate()?;
        let dir = &state.dir;
        let mut tx = self.begin_with(TxnOptions {
            isolation: Isolation::Snapshot,
            read_only: true,
        })?;
        let ts = tx.begin_ts();
        let name = ckpt_dir_name(ts);
        let tmp = dir.join(format!("{name}.tmp"));
        if tmp.exists() {
            std::fs::remove_dir_all(&tmp).map_err(|e| Error::io(&tmp, &e))?;
        }
        std::fs::create_dir(&tmp).map_err(|e| Error::io(&tmp, &e))?;
        let mut tables = Vec::new();
        let (mut all_rows, mut all_bytes) = (0u64, 0u64);
        for (i, t) in self.live_tables().iter().enumerate() {
            let file = format!("table-{i:04}");
            let path = tmp.join(&file);
            let mut f = std::fs::File::create(&path).map_err(|e| Error::io(&path, &e))?;
            let mut payload = Vec::with_capacity(BLOCK_BYTES + t.schema.row_size);
            let mut out = Vec::new();
            let mut rows = 0u64;
            let mut bytes = 0u64;
            let mut io_err = None;
            let mut write = |payload: &mut Vec<u8>, out: &mut Vec<u8>| {
                out.clear();
                format::put_block(out, CKPT_MAGIC, payload);
                payload.clear();
                bytes += out.len() as u64;
                if let Err(e) = f.write_all(out) {
                    io_err.get_or_insert(e);
                }
            };
            tx.scan_table(t, |r| {
                payload.extend_from_slice(r.data);
                rows += 1;
                if payload.len() >= BLOCK_BYTES {
                    write(&mut payload, &mut out);
                }
                true
            })?;
            if !payload.is_empty() {
                write(&mut payload, &mut out);
            }
            if let Some(e) = io_err {
                return Err(Error::io(&path, &e));
            }
            f.sync_all().map_err(|e| Error::io(&path, &e))?;
            all_rows += rows;
            all_bytes += bytes;
            tables.push(TableManifest {
                id: t.id,
                name: t.schema.name.clone(),
                file,
                rows,
                bytes,
            });
        }
        tx.commit_deferred()?;
        let m = Manifest {
            ts,
            dir: dir.join(&name),
            first_seq,
            tables,
        };
        format::write_atomic(&tmp.join("MANIFEST"), &m.encode())?;
        let fin = dir.join(&name);
        std::fs::rename(&tmp, &fin).map_err(|e| Error::io(&fin, &e))?;
        format::sync_dir(dir)?;
        let mut cur = Vec::new();
        format::put_block(&mut cur, MANIFEST_MAGIC, name.as_bytes());
        format::write_atomic(&dir.join(CURRENT_FILE), &cur)?;
        let files_removed = remove_obsolete(dir, &name, &m.first_seq)?;
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
    Ok(n)
}
