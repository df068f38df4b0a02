//! `myriad log inspect DIR`: what a data directory holds, read without opening (or locking)
//! it: the persistent epoch (epoch manager) or durable LSN (ERMIA), the current checkpoint,
//! and per log file its blocks, records, epoch or LSN range, size and checksum status; and
//! every problem that would make recovery refuse the directory (a missing or foreign file,
//! damage before the durable point, a lost `CURRENT`, ...), found by the same checks.

use crate::error::{Error, Result};
use crate::log::format::{self, Get};
use crate::log::LOG_MAGIC;
use std::path::{Path, PathBuf};

/// One log file.
#[derive(Clone, Debug)]
pub struct LogFileInfo {
    /// Its path.
    pub path: PathBuf,
    /// The logger that wrote it (0 for an ERMIA segment).
    pub logger: usize,
    /// Its sequence number.
    pub seq: u64,
    /// Its size.
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
    /// Why reading stopped before the end, if it did.
    pub damage: Option<String>,
    /// False if the file is older than the current checkpoint needs (left by a crash
    /// between publishing the checkpoint and deleting it).
    pub needed: bool,
}

/// A data directory's contents.
#[derive(Clone, Debug)]
pub struct DirInfo {
    /// The epoch manager's persistent epoch (`None` if the directory has no `pepoch` records).
    pub persistent_epoch: Option<u64>,
    /// ERMIA's durable LSN (`None` if the directory has no `durable-lsn` records).
    pub durable_lsn: Option<u64>,
    /// The current checkpoint, if any.
    pub checkpoint: Option<CheckpointSummary>,
    /// Every log file and segment, by logger and sequence number.
    pub files: Vec<LogFileInfo>,
    /// What recovery would refuse to open, one line each (empty: nothing).
    pub problems: Vec<String>,
}

/// The current checkpoint.
#[derive(Clone, Debug)]
pub struct CheckpointSummary {
    /// Its snapshot timestamp.
    pub ts: u64,
    /// Its directory.
    pub dir: PathBuf,
    /// Each table's name and row count.
    pub tables: Vec<(String, u64)>,
}

/// Reads `dir` (read-only).
pub fn inspect(dir: &Path) -> Result<DirInfo> {
    if !dir.is_dir() {
        return Err(Error::NotADataDirectory {
            path: dir.display().to_string(),
            message: if dir.exists() {
                "it is a file, not a directory".into()
            } else {
                "no such directory (not a directory)".into()
            },
        });
    }
    let Some(id) = crate::log::identity::read(dir)? else {
        return Err(Error::NotADataDirectory {
            path: dir.display().to_string(),
            message: "it has no IDENTITY file".into(),
        });
    };
    let mut problems = Vec::new();
    let plan = super::plan::plan(dir, id);
    let plan_ok = plan.is_ok();
    let (pe, dl, manifest, durable_ends) = match &plan {
        Ok(p) => (
            p.pe.clone(),
            p.dl.clone(),
            p.manifest.clone(),
            p.sources
                .iter()
                .map(|s| (s.path.clone(), s.durable_end))
                .collect::<Vec<_>>(),
        ),
        Err(_) => (None, None, None, Vec::new()),
    };
    match &plan {
        Ok(p) => {
            if let Err(e) = crate::log::catalog::Catalog::read(dir, id, p.catalog_bytes) {
                problems.push(e.to_string());
            }
        }
        Err(e) => problems.push(e.to_string()),
    }
    let hl = crate::log::identity::FileHeader::LEN;
    let header = |path: &Path, data: &[u8], kind, a, b| -> Result<usize> {
        match crate::log::identity::FileHeader::read(path, data)? {
            Some(h) => h.check(path, id, kind, a, b).map(|_| hl),
            None => Ok(data.len()),
        }
    };
    let mut files = Vec::new();
    for (logger, seq, path) in crate::log::log_files(dir)? {
        let data = std::fs::read(&path).map_err(|x| Error::io(&path, &x))?;
        let skip = match header(
            &path,
            &data,
            crate::log::identity::FileKind::Log,
            logger as u64,
            seq,
        ) {
            Ok(n) => n,
            Err(e) => {
                problems.push(e.to_string());
                data.len()
            }
        };
        let (blocks, end, why) = format::read_blocks(&data[skip..], LOG_MAGIC);
        let end = end + skip;
        let mut records = 0;
        let mut calls = 0;
        let mut physical = 0;
        let mut epochs: Option<(u64, u64)> = None;
        for b in &blocks {
            let mut g = Get::new(b);
            while let Some(rec) = crate::log::next_record(&mut g) {
                let mut r = Get::new(rec);
                if let (Some(ep), Some(_), Some(n)) = (r.u64(), r.u64(), r.u32()) {
                    records += 1;
                    calls += u64::from(n == crate::log::COMMAND);
                    physical += u64::from(crate::log::is_physical(n, &rec[r.at..]));
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
    for (seq, start, path) in crate::log::ermia::segment_files(dir)? {
        let data = std::fs::read(&path).map_err(|x| Error::io(&path, &x))?;
        let skip = match header(
            &path,
            &data,
            crate::log::identity::FileKind::Segment,
            seq,
            start,
        ) {
            Ok(n) => n,
            Err(e) => {
                problems.push(e.to_string());
                data.len()
            }
        };
        let (mut blocks, mut records, mut skips, mut calls, mut physical) = (0, 0, 0, 0, 0);
        let (end, why) = crate::log::ermia::walk_segment(&data[skip..], |r| {
            blocks += 1;
            if r.kind == crate::log::ermia::KIND_SKIP {
                skips += 1;
            } else if let Some(n) = Get::new(r.body).u32() {
                records += 1;
                calls += u64::from(n == crate::log::COMMAND);
                physical += u64::from(crate::log::is_physical(n, &r.body[4..]));
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
            valid_bytes: (end + skip) as u64,
            damage: why,
            needed,
        });
    }
    for f in &files {
        let durable = durable_ends
            .iter()
            .find(|(p, _)| *p == f.path)
            .map_or(0, |x| x.1);
        if let Some(why) = &f.damage {
            if f.valid_bytes < durable {
                problems.push(format!(
                    "`{}` is damaged at byte {} ({why}), before the end of its durable bytes",
                    f.path.display(),
                    f.valid_bytes
                ));
            }
        }
    }
    // Records in a file whose manager has no durable-point record: that record was lost.
    if plan_ok {
        for f in files.iter().filter(|f| f.records > 0 && f.needed) {
            let (point, missing) = match f.lsns {
                Some(_) => (crate::log::ermia::DURABLE_LSN_FILE, dl.is_none()),
                None => (crate::log::PEPOCH_FILE, pe.is_none()),
            };
            if missing {
                problems.push(format!(
                    "`{}` is missing (with its mirror), but {} holds {} commit records",
                    dir.join(point).display(),
                    f.path.display(),
                    f.records
                ));
                break;
            }
        }
    }
    problems.dedup();
    Ok(DirInfo {
        persistent_epoch: pe.map(|p| p.epoch),
        durable_lsn: dl.map(|p| p.epoch),
        checkpoint: manifest.map(|m| CheckpointSummary {
            ts: m.ts,
            dir: m.dir,
            tables: m.tables.into_iter().map(|t| (t.name, t.rows)).collect(),
        }),
        files,
        problems,
    })
}
