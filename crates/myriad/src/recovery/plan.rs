//! Which files a data directory must hold, found before any of them is replayed.
//!
//! **Definitions.** A *stream* is one logger's files (`log-LL-*`), or ERMIA's segments. The
//! newest durable-point record of a stream's manager (`pepoch`, `durable-lsn`, each with a
//! mirror) names the stream's last file and the offset where its durable bytes end, the first
//! file recovery needs, the current checkpoint and the catalog's durable length. The current
//! checkpoint's manifest names the first file each stream needs from it on.
//!
//! **Invariants** (each violation is `Error::Corrupt` naming the file, before anything is
//! replayed or written):
//! - every file from the stream's first needed one to the one the durable point names exists,
//!   with this database's header, and every one of them but the last is exactly as long as
//!   its successor's header says it was when the stream moved on;
//! - files after the durable point are contiguous (a gap means a file was lost);
//! - a log file that holds records has a durable-point record of its manager;
//! - the checkpoint a durable-point record calls current (or a newer one) is what `CURRENT`
//!   names.
//!
//! File numbers are never reused: a new session starts after the largest number any file,
//! manifest or durable-point record mentions.

use crate::error::{Error, Result};
use crate::log::identity::DbId;
use crate::log::PersistentEpoch;
use crate::recovery::checkpoint::Manifest;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Where a file to load sits.
#[derive(Clone, Debug)]
pub(crate) enum Stream {
    /// One of the epoch manager's loggers.
    Logger(usize),
    /// ERMIA's segments; the file's first LSN.
    Segment(u64),
}

impl Stream {
    /// Both are the same stream (one logger's files, or the segments).
    pub(crate) fn same(&self, other: &Stream) -> bool {
        match (self, other) {
            (Stream::Logger(a), Stream::Logger(b)) => a == b,
            (Stream::Segment(_), Stream::Segment(_)) => true,
            _ => false,
        }
    }
}

/// A log file to load and how much of it must be intact.
#[derive(Clone, Debug)]
pub(crate) struct Source {
    pub stream: Stream,
    pub seq: u64,
    pub path: PathBuf,
    /// Where its durable bytes end: `u64::MAX` for all of it, 0 for none.
    pub durable_end: u64,
}

/// What recovery needs to know about a directory's files.
pub(crate) struct Plan {
    pub manifest: Option<Manifest>,
    /// The newest durable-point records of the epoch manager and of ERMIA's.
    pub pe: Option<PersistentEpoch>,
    pub dl: Option<PersistentEpoch>,
    pub sources: Vec<Source>,
    /// The sequence number a new session's files start at.
    pub next_seq: u64,
    /// Any log or segment file at all (older ones left by a crash included).
    pub any_log: bool,
    /// The catalog's durable length.
    pub catalog_bytes: u64,
    /// Things recovery worked around (a missing mirror, ...), for the report.
    pub notes: Vec<String>,
}

fn corrupt(path: &Path, message: String) -> Error {
    Error::Corrupt {
        file: path.display().to_string(),
        offset: 0,
        message,
    }
}

/// Reads the durable-point records, `CURRENT` and the file names of `dir`, and checks that
/// every file the durable points and the checkpoint need is there.
pub(crate) fn plan(dir: &Path, id: DbId) -> Result<Plan> {
    let (pe, mut notes) = PersistentEpoch::read_last_of(&dir.join(crate::log::PEPOCH_FILE), id)?;
    let (dl, n2) =
        PersistentEpoch::read_last_of(&dir.join(crate::log::ermia::DURABLE_LSN_FILE), id)?;
    notes.extend(n2);
    let manifest = Manifest::read_current(dir, id)?;
    let current = dir.join("CURRENT");
    for p in [&pe, &dl].into_iter().flatten() {
        let Some(t) = p.checkpoint else { continue };
        match &manifest {
            None => {
                return Err(corrupt(
                    &current,
                    format!(
                        "missing: the durable point says the checkpoint at timestamp {t} is \
                         current (without it the log alone would recover part of the data)"
                    ),
                ))
            }
            Some(m) if m.ts < t => {
                return Err(corrupt(
                    &current,
                    format!(
                        "names the checkpoint at timestamp {}, older than the current one \
                         ({t}) the durable point names",
                        m.ts
                    ),
                ))
            }
            Some(_) => {}
        }
    }
    let logs = crate::log::log_files(dir)?;
    let segments = crate::log::ermia::segment_files(dir)?;
    let any_log = !logs.is_empty() || !segments.is_empty();
    let first_of = |p: &Option<PersistentEpoch>, stream: usize| -> u64 {
        let from_manifest = manifest.as_ref().map_or(0, |m| {
            m.first_seq
                .get(stream)
                .or(m.first_seq.iter().min())
                .copied()
                .unwrap_or(0)
        });
        let from_point = p.as_ref().and_then(|p| p.first.get(stream).copied());
        from_manifest.max(from_point.unwrap_or(0))
    };
    let mut sources = Vec::new();
    // The epoch manager's streams: every logger that has files or a durable position.
    let mut by_logger: BTreeMap<usize, Vec<(u64, PathBuf)>> = BTreeMap::new();
    for (l, seq, path) in &logs {
        by_logger.entry(*l).or_default().push((*seq, path.clone()));
    }
    if let Some(p) = &pe {
        for l in 0..p.positions.len() {
            by_logger.entry(l).or_default();
        }
    }
    for (l, files) in by_logger {
        let first = first_of(&pe, l);
        let last = pe.as_ref().and_then(|p| p.positions.get(l)).copied();
        let name = |seq| dir.join(crate::log::log_file_name(l, seq));
        let files: Vec<(u64, PathBuf)> = files.into_iter().filter(|f| f.0 >= first).collect();
        stream_sources(
            &files,
            first,
            last.map(|p| (p.seq, p.offset)),
            name,
            &format!("logger {l}"),
            |seq, path, durable_end| Source {
                stream: Stream::Logger(l),
                seq,
                path,
                durable_end,
            },
            &mut sources,
        )?;
    }
    // ERMIA's one stream.
    let first = first_of(&dl, 0);
    let last = dl.as_ref().and_then(|p| p.positions.first()).copied();
    let starts: BTreeMap<u64, u64> = segments.iter().map(|s| (s.0, s.1)).collect();
    let files: Vec<(u64, PathBuf)> = segments
        .iter()
        .filter(|s| s.0 >= first)
        .map(|s| (s.0, s.2.clone()))
        .collect();
    stream_sources(
        &files,
        first,
        last.map(|p| (p.seq, p.offset)),
        |seq| dir.join(format!("seg-{seq:010}-*")),
        "the segment log",
        |seq, path, durable_end| Source {
            stream: Stream::Segment(starts.get(&seq).copied().unwrap_or(0)),
            seq,
            path,
            durable_end,
        },
        &mut sources,
    )?;
    let mut next_seq = 1;
    for s in logs.iter().map(|f| f.1).chain(segments.iter().map(|f| f.0)) {
        next_seq = next_seq.max(s + 1);
    }
    if let Some(m) = &manifest {
        next_seq = next_seq.max(m.first_seq.iter().copied().max().unwrap_or(0));
    }
    for p in [&pe, &dl].into_iter().flatten() {
        for x in &p.positions {
            next_seq = next_seq.max(x.seq + 1);
        }
        next_seq = next_seq.max(p.first.iter().copied().max().unwrap_or(0));
    }
    let catalog_bytes = [&pe, &dl]
        .into_iter()
        .flatten()
        .map(|p| p.catalog_bytes)
        .max()
        .unwrap_or(0);
    Ok(Plan {
        manifest,
        pe,
        dl,
        sources,
        next_seq,
        any_log,
        catalog_bytes,
        notes,
    })
}

/// The sources of one stream whose files (sequence number ≥ `first`, in order) are `files`
/// and whose durable point is `last` (file, offset) if it has one.
fn stream_sources(
    files: &[(u64, PathBuf)],
    first: u64,
    last: Option<(u64, u64)>,
    name: impl Fn(u64) -> PathBuf,
    what: &str,
    source: impl Fn(u64, PathBuf, u64) -> Source,
    out: &mut Vec<Source>,
) -> Result<()> {
    let have: BTreeMap<u64, &PathBuf> = files.iter().map(|(s, p)| (*s, p)).collect();
    if let Some((last_seq, _)) = last {
        for seq in first..=last_seq {
            if !have.contains_key(&seq) {
                return Err(corrupt(
                    &name(seq),
                    format!(
                        "missing: the durable point needs files {first} to {last_seq} of \
                         {what}, which hold acknowledged commits"
                    ),
                ));
            }
        }
    }
    // After the durable point (or with none), files are contiguous: a gap is a lost file.
    let mut prev: Option<u64> = last.map(|l| l.0).filter(|&s| s >= first);
    for &seq in have.keys() {
        if let Some(p) = prev {
            if seq > p + 1 {
                return Err(corrupt(
                    &name(p + 1),
                    format!("missing: {what} has files {p} and {seq} but not those between"),
                ));
            }
        }
        prev = Some(prev.map_or(seq, |p| p.max(seq)));
    }
    for (&seq, path) in &have {
        let durable_end = match last {
            Some((s, _)) if seq < s => u64::MAX,
            Some((s, off)) if seq == s => off,
            _ => 0,
        };
        out.push(source(seq, (*path).clone(), durable_end));
    }
    Ok(())
}
