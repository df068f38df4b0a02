//! `myriad log inspect DIR`: what a data directory holds, read without opening (or locking)
//! it: the persistent epoch (epoch manager) or durable LSN (ERMIA), the current checkpoint,
//! and per log file its blocks, records, epoch or LSN range, size and checksum status.

use super::format::{self, Get};
use super::{PersistentEpoch, LOG_MAGIC};
use crate::error::{Error, Result};
use crate::recovery::checkpoint::Manifest;
use std::path::{Path, PathBuf};

/// One log file.
#[derive(Clone, Debug)]
pub struct LogFileInfo {
    pub path: PathBuf,
    pub logger: usize,
    pub seq: u64,
    pub bytes: u64,
    /// Checksummed blocks: group-commit blocks, or ERMIA's per-transaction records (skip
    /// records included).
    pub blocks: u64,
    /// Transaction records.
    pub records: u64,
    /// ERMIA skip records (log space of transactions that aborted after reserving it).
    pub skips: u64,
    /// Of the records, procedure calls (command logging).
    pub calls: u64,
    /// Of the records, physical ones (tuple ids and whole rows).
    pub physical: u64,
    /// Smallest and largest epoch of its records (`None` if it has none, or for an ERMIA
    /// segment).
    pub epochs: Option<(u64, u64)>,
    /// An ERMIA segment's LSN range: its first LSN and the end of its intact records.
    pub lsns: Option<(u64, u64)>,
    /// Where the intact blocks end, and why reading stopped there (`None`: the whole file
    /// is intact).
    pub valid_bytes: u64,
    pub damage: Option<String>,
    /// False if the file is older than the current checkpoint needs (left by a crash
    /// between publishing the checkpoint and deleting it).
    pub needed: bool,
}

/// A data directory's contents.
#[derive(Clone, Debug)]
pub struct DirInfo {
    pub persistent_epoch: Option<u64>,
    /// ERMIA's durable LSN (`None` if the directory has no `durable-lsn` records).
    pub durable_lsn: Option<u64>,
    pub checkpoint: Option<CheckpointSummary>,
    pub files: Vec<LogFileInfo>,
}

/// The current checkpoint.
#[derive(Clone, Debug)]
pub struct CheckpointSummary {
    pub ts: u64,
    pub dir: PathBuf,
    pub tables: Vec<(String, u64)>,
}

/// Reads `dir` (read-only).
pub fn inspect(dir: &Path) -> Result<DirInfo> {
    if !dir.is_dir() {
        return Err(Error::Io {
            path: dir.display().to_string(),
            message: "not a directory".into(),
        });
    }
    let pe = PersistentEpoch::read_last(dir)?;
    let manifest = Manifest::read_current(dir)?;
    let mut files = Vec::new();
    for (logger, seq, path) in super::log_files(dir)? {
        let data = std::fs::read(&path).map_err(|x| Error::io(&path, &x))?;
        let (blocks, end, why) = format::read_blocks(&data, LOG_MAGIC);
        let mut records = 0;
        let mut calls = 0;
        let mut physical = 0;
        let mut epochs: Option<(u64, u64)> = None;
        for b in &blocks {
            let mut g = Get::new(b);
            while let Some(rec) = super::next_record(&mut g) {
                let mut r = Get::new(rec);
                if let (Some(ep), Some(_), Some(n)) = (r.u64(), r.u64(), r.u32()) {
                    records += 1;
                    calls += u64::from(n == super::COMMAND);
                    physical += u64::from(super::is_physical(n, &rec[r.at..]));
                    epochs = Some(epochs.map_or((ep, ep), |(lo, hi)| (lo.min(ep), hi.max(ep))));
                }
            }
        }
        let needed = manifest
            .as_ref()
            .is_none_or(|m| m.first_seq.get(logger).is_none_or(|&f| seq >= f));
        files.push(LogFileInfo {
            path,
            logger,
            seq,
            bytes: data.len() as u64,
            blocks: blocks.len() as u64,
            records,
            skips: 0,
            calls,
            physical,
            epochs,
            lsns: None,
            valid_bytes: end as u64,
            damage: why,
            needed,
        });
    }
    for (seq, start, path) in super::ermia::segment_files(dir)? {
        let data = std::fs::read(&path).map_err(|x| Error::io(&path, &x))?;
        let (mut blocks, mut records, mut skips, mut calls, mut physical) = (0, 0, 0, 0, 0);
        let (end, why) = super::ermia::walk_segment(&data, |r| {
            blocks += 1;
            if r.kind == super::ermia::KIND_SKIP {
                skips += 1;
            } else if let Some(n) = Get::new(r.body).u32() {
                records += 1;
                calls += u64::from(n == super::COMMAND);
                physical += u64::from(super::is_physical(n, &r.body[4..]));
            }
            Ok(())
        })?;
        let needed = manifest
            .as_ref()
            .is_none_or(|m| m.first_seq.iter().min().is_none_or(|&f| seq >= f));
        files.push(LogFileInfo {
            path,
            logger: 0,
            seq,
            bytes: data.len() as u64,
            blocks,
            records,
            skips,
            calls,
            physical,
            epochs: None,
            lsns: Some((start, start + end as u64)),
            valid_bytes: end as u64,
            damage: why,
            needed,
        });
    }
    let dl = PersistentEpoch::read_last_of(&dir.join(super::ermia::DURABLE_LSN_FILE))?;
    Ok(DirInfo {
        persistent_epoch: pe.map(|p| p.epoch),
        durable_lsn: dl.map(|p| p.epoch),
        checkpoint: manifest.map(|m| CheckpointSummary {
            ts: m.ts,
            dir: m.dir,
            tables: m.tables.into_iter().map(|t| (t.name, t.rows)).collect(),
        }),
        files,
    })
}
