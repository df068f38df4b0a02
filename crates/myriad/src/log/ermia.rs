//! ERMIA's log manager (`--log-manager ermia`; ERMIA §3.2): one log whose LSN space is the
//! commit order, reserved by a single atomic add per commit.
//!
//! **One atomic add.** A committing update transaction encodes its whole record first, into
//! its transaction-table slot's scratch buffer (`prepare`: `kind u8 | len u32 | crc32c u32 |
//! body`, the body being `encode_writes`'s). Then `reserve` draws its end timestamp with
//! `Source::reserve(len)`: the add returns `start`, the record owns the LSN range
//! `[start, start + len)`, and the end timestamp is `start + len`. Begin timestamps are loads
//! of the same counter, so the LSN order *is* the commit order, and the add that orders the
//! commit is the one that reserves its log space (ERMIA's "commit LSN from a single atomic
//! operation"). There is no separate epoch: a record is durable once the durable LSN reaches
//! its end, and everything it depends on has a smaller end timestamp, so a durable prefix of
//! the LSN space never keeps a transaction while dropping one it read from.
//!
//! **Filling.** After validation the worker copies its record into a shared ring buffer at
//! `start mod RING_BYTES` (`fill`); a transaction that fails validation after reserving writes
//! a skip record over its range instead (`skip`), as ERMIA's aborted transactions do. A
//! record larger than a quarter of the ring (a bulk load) is handed to the flusher in a side
//! map rather than copied into the ring (ERMIA's overflow blocks, simplified). A worker whose
//! range is more than a ring ahead of what the flusher has written waits ("log buffer full:
//! the transaction retains its LSN but must wait for the buffer to drain").
//!
//! **Which prefix is filled.** Every clock draw is a record, so every LSN below the clock
//! belongs to a record that is filled or still being filled. Before its add, a worker
//! announces a lower bound of its start in its slot (`pending` = the clock it loaded); it
//! clears the announcement once its bytes are in the ring. The flusher loads the clock `C`,
//! then every slot's announcement: everything below `min(C, announcements)` is filled. (If
//! the worker's add came before the flusher's load, its announcement came before too and is
//! seen; if after, its range starts at or above `C`.) Both the clock and every announcement
//! are record boundaries. No global lock, and no read-modify-write besides the add.
//!
//! **Flushing.** One flusher thread, every `Config::epoch_interval` or at once when a
//! committer waits, writes the filled prefix to the current segment file, fsyncs it, appends
//! (durable LSN, segment, offset) to `durable-lsn` and fsyncs that, then publishes the durable
//! LSN and wakes the committers whose records end at or below it. Segment files are named
//! `seg-SSSSSSSSSS-LLLLLLLLLLLLLLLLLLLL` (sequence, first LSN): a byte at offset `o` of a
//! segment is LSN `first + o`. The flusher starts a new segment at a record boundary once a
//! file passes `Config::log_file_bytes` (ERMIA lets the transaction whose block straddles the
//! end race to open the next one; here the single flusher does it, so no record straddles two
//! files and no committer ever needs a second atomic operation).
//!
//! **Failure.** As in the epoch manager: the first write or fsync error stops the flusher, no
//! LSN becomes durable after it, waiting committers get `Error::LogFailed`, later commits are
//! refused, and the fsync is never retried.

use super::control::Control;
use super::control::PointExtra;
use super::identity::{DbId, FileHeader, FileKind};
use super::{encode_writes, LogPos, PersistentEpoch, PointFile};
use crate::error::{Error, Result};
use crate::storage::WriteRecord;
use crate::timestamp::Source;
use crossbeam_utils::CachePadded;
use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The shared log buffer (a power of two).
const RING_BYTES: usize = 16 << 20;
/// Records above this size bypass the ring.
const OVERSIZED: usize = RING_BYTES / 4;
/// A transaction's record.
pub(crate) const KIND_TXN: u8 = 0xA1;
/// The range of a transaction that reserved log space and then aborted.
pub(crate) const KIND_SKIP: u8 = 0xA2;
/// `kind u8 | len u32 | crc32c u32`; `len` counts the header.
pub(crate) const HEADER: usize = 9;
pub(crate) const DURABLE_LSN_FILE: &str = "durable-lsn";
/// No record being filled (a slot's announcement).
const IDLE: u64 = u64::MAX;

/// The name of segment `seq`, whose first byte is LSN `start`.
pub(crate) fn segment_name(seq: u64, start: u64) -> String {
    format!("seg-{seq:010}-{start:020}")
}

/// Parses a segment file name back into (seq, first LSN).
pub(crate) fn parse_segment_name(name: &str) -> Option<(u64, u64)> {
    let (s, l) = name.strip_prefix("seg-")?.split_once('-')?;
    if s.len() != 10 || l.len() != 20 {
        return None;
    }
    Some((s.parse().ok()?, l.parse().ok()?))
}

/// The segment files in `dir` as (seq, first LSN, path), in sequence order.
pub(crate) fn segment_files(dir: &Path) -> Result<Vec<(u64, u64, PathBuf)>> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).map_err(|e| Error::io(dir, &e))? {
        let e = e.map_err(|e| Error::io(dir, &e))?;
        if let Some((seq, start)) = parse_segment_name(&e.file_name().to_string_lossy()) {
            out.push((seq, start, e.path()));
        }
    }
    out.sort();
    Ok(out)
}

fn record_crc(kind: u8, len: u32, body: &[u8]) -> u32 {
    let mut h = [0u8; 5];
    h[0] = kind;
    h[1..].copy_from_slice(&len.to_le_bytes());
    crc32c::crc32c_append(crc32c::crc32c(&h), body)
}

/// The header of a record of `len` bytes. A skip record's checksum covers only its header:
/// its body is whatever the buffer held.
fn header(kind: u8, len: u32, body: &[u8]) -> [u8; HEADER] {
    let crc = record_crc(kind, len, if kind == KIND_TXN { body } else { &[] });
    let mut h = [0u8; HEADER];
    h[0] = kind;
    h[1..5].copy_from_slice(&len.to_le_bytes());
    h[5..9].copy_from_slice(&crc.to_le_bytes());
    h
}

/// Writes the header of `rec` (whose first `HEADER` bytes are reserved for it).
fn seal(rec: &mut [u8], kind: u8) {
    let h = header(kind, rec.len() as u32, &rec[HEADER..]);
    rec[..HEADER].copy_from_slice(&h);
}

/// One intact record of a segment.
pub(crate) struct SegRecord<'a> {
    /// Byte offset of the record in the segment.
    pub offset: usize,
    pub kind: u8,
    /// The bytes after the header (`encode_writes`'s body for a transaction).
    pub body: &'a [u8],
}

/// Walks a segment's records: calls `f` for each intact one, and returns where the intact
/// prefix ends and why reading stopped there (`None` at a clean end).
pub(crate) fn walk_segment<'a>(
    data: &'a [u8],
    mut f: impl FnMut(SegRecord<'a>) -> Result<()>,
) -> Result<(usize, Option<String>)> {
    let mut at = 0;
    while at < data.len() {
        let rest = &data[at..];
        if rest.len() < HEADER {
            return Ok((
                at,
                Some(format!("truncated record header ({} bytes)", rest.len())),
            ));
        }
        let kind = rest[0];
        let len = u32::from_le_bytes([rest[1], rest[2], rest[3], rest[4]]);
        if kind != KIND_TXN && kind != KIND_SKIP {
            return Ok((at, Some(format!("bad record kind {kind:#04x}"))));
        }
        let n = len as usize;
        if n < HEADER {
            return Ok((at, Some(format!("record length {len} out of range"))));
        }
        if rest.len() < n {
            return Ok((
                at,
                Some(format!("truncated record: {} of {n} bytes", rest.len())),
            ));
        }
        let body = &rest[HEADER..n];
        if header(kind, len, body)[5..] != rest[5..HEADER] {
            return Ok((at, Some("checksum mismatch".into())));
        }
        f(SegRecord {
            offset: at,
            kind,
            body,
        })?;
        at += n;
    }
    Ok((at, None))
}

/// The ring buffer. Workers write disjoint ranges of it and the flusher reads ranges no
/// worker writes (see `fill`): a raw allocation shared without a lock.
struct Ring {
    ptr: *mut u8,
}

// SAFETY: access is coordinated by the LSN protocol above (disjoint ranges, handed over with
// release/acquire on the slot announcements and `written`).
unsafe impl Send for Ring {}
unsafe impl Sync for Ring {}

impl Ring {
    fn new() -> Ring {
        let b = vec![0u8; RING_BYTES].into_boxed_slice();
        Ring {
            ptr: Box::into_raw(b).cast::<u8>(),
        }
    }

    /// Copies `data` to LSN `lsn` onwards (wrapping).
    ///
    /// # Safety
    /// No other thread reads or writes the ring positions of `[lsn, lsn + data.len())`, and
    /// `data.len() <= RING_BYTES`.
    unsafe fn write(&self, lsn: u64, data: &[u8]) {
        let at = (lsn as usize) & (RING_BYTES - 1);
        let first = data.len().min(RING_BYTES - at);
        std::ptr::copy_nonoverlapping(data.as_ptr(), self.ptr.add(at), first);
        std::ptr::copy_nonoverlapping(data.as_ptr().add(first), self.ptr, data.len() - first);
    }

    /// The ring bytes of `[lsn, lsn + len)` as one or two slices.
    ///
    /// # Safety
    /// No thread writes those positions while the slices live; `len <= RING_BYTES`.
    unsafe fn slices(&self, lsn: u64, len: usize) -> (&[u8], &[u8]) {
        let at = (lsn as usize) & (RING_BYTES - 1);
        let first = len.min(RING_BYTES - at);
        (
            std::slice::from_raw_parts(self.ptr.add(at), first),
            std::slice::from_raw_parts(self.ptr, len - first),
        )
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        // SAFETY: allocated by `Ring::new` as a boxed slice of `RING_BYTES`.
        unsafe {
            drop(Box::from_raw(std::ptr::slice_from_raw_parts_mut(
                self.ptr, RING_BYTES,
            )))
        }
    }
}

/// A slot's record being committed.
#[derive(Default)]
struct Scratch {
    rec: Vec<u8>,
    key: Vec<u8>,
}

pub(crate) struct ErmiaLog {
    clock: Source,
    ring: Ring,
    /// Per slot: a lower bound of the start of the record it is filling, or `IDLE`.
    pending: Box<[CachePadded<AtomicU64>]>,
    /// Per slot: the record `prepare` encoded (only its own transaction touches it).
    scratch: Box<[CachePadded<Mutex<Scratch>>]>,
    /// Records too large for the ring, by start LSN.
    oversized: Mutex<BTreeMap<u64, Vec<u8>>>,
    /// Every LSN below this is written to a segment file (its ring space is free).
    written: CachePadded<AtomicU64>,
    physical: bool,
    /// The durable LSN (every LSN below it is durable), failure, flushes and counters.
    pub(crate) control: Control,
}

/// The flusher's current segment file.
struct Segment {
    db: DbId,
    dir: PathBuf,
    file: File,
    path: PathBuf,
    pos: LogPos,
    fsync: bool,
}

impl Segment {
    /// Creates segment `seq` starting at LSN `start`, with its header (which records
    /// `prev_len`, the final length of the previous segment). Byte `FileHeader::LEN + i` of
    /// the file is LSN `start + i`.
    fn create(
        db: DbId,
        dir: &Path,
        seq: u64,
        start: u64,
        prev_len: u64,
        fsync: bool,
    ) -> Result<Segment> {
        let path = dir.join(segment_name(seq, start));
        let mut file = std::fs::OpenOptions::new()
            .create_new(true)
            .write(true)
            .open(&path)
            .map_err(|e| Error::io(&path, &e))?;
        let mut h = FileHeader::new(db, FileKind::Segment, seq, start);
        h.prev_len = prev_len;
        let h = h.encode();
        file.write_all(&h)
            .and_then(|_| if fsync { file.sync_data() } else { Ok(()) })
            .map_err(|e| Error::io(&path, &e))?;
        super::format::sync_dir(dir)?;
        Ok(Segment {
            db,
            dir: dir.to_path_buf(),
            file,
            path,
            pos: LogPos {
                seq,
                offset: h.len() as u64,
            },
            fsync,
        })
    }

    fn write(&mut self, data: &[u8]) -> Result<()> {
        if data.is_empty() {
            return Ok(());
        }
        self.file
            .write_all(data)
            .map_err(|e| Error::io(&self.path, &e))?;
        self.pos.offset += data.len() as u64;
        Ok(())
    }

    /// Closes this file (durable to its end) and starts the next one at LSN `start`.
    fn next(&mut self, start: u64) -> Result<()> {
        if self.fsync {
            self.file
                .sync_all()
                .map_err(|e| Error::io(&self.path, &e))?;
        }
        *self = Segment::create(
            self.db,
            &self.dir,
            self.pos.seq + 1,
            start,
            self.pos.offset,
            self.fsync,
        )?;
        Ok(())
    }
}

impl ErmiaLog {
    /// Starts the log in `dir` (recovered and locked): LSNs continue from the clock, the first
    /// segment is number `first_seq`. Before any commit, a durable-point record names it
    /// (and `extra`'s checkpoint and catalog).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn start(
        dir: &Path,
        config: &crate::Config,
        slots: usize,
        first_seq: u64,
        clock: &Source,
        db: DbId,
        mut extra: PointExtra,
        mut point: PointFile,
    ) -> Result<Arc<ErmiaLog>> {
        let fsync = config.fsync == crate::config::FsyncPolicy::Always;
        let base = clock.now().get();
        let seg = Segment::create(db, dir, first_seq, base, u64::MAX, fsync)?;
        extra.first = vec![first_seq];
        point.publish(&PersistentEpoch {
            id: db,
            epoch: base,
            positions: vec![seg.pos],
            first: extra.first.clone(),
            checkpoint: extra.checkpoint,
            catalog_bytes: extra.catalog_bytes,
        })?;
        let m = Arc::new(ErmiaLog {
            clock: clock.clone(),
            ring: Ring::new(),
            pending: (0..slots)
                .map(|_| CachePadded::new(AtomicU64::new(IDLE)))
                .collect(),
            scratch: (0..slots)
                .map(|_| CachePadded::new(Mutex::new(Scratch::default())))
                .collect(),
            oversized: Mutex::new(BTreeMap::new()),
            written: CachePadded::new(AtomicU64::new(base)),
            physical: config.log == crate::config::LogPolicy::Physical,
            control: Control::new(base, extra),
        });
        let m2 = m.clone();
        let (interval, file_bytes) = (config.epoch_interval, config.log_file_bytes);
        let h = std::thread::Builder::new()
            .name("myriad-ermia-log".into())
            .spawn(move || {
                let m3 = m2.clone();
                m3.control.guarded("myriad-ermia-log", move || {
                    m2.flush_loop(seg, point, interval, file_bytes)
                });
            })
            .map_err(|e| Error::io(dir, &e))?;
        m.control.set_thread(h);
        Ok(m)
    }

    /// Encodes the commit record of the transaction in `slot` into the slot's scratch buffer
    /// and returns its length (what `reserve` must reserve).
    pub(crate) fn prepare<'s>(
        &self,
        slot: usize,
        writes: &[WriteRecord],
        command: Option<&[u8]>,
        table_of: impl Fn(u32) -> &'s crate::storage::table::Table,
    ) -> Result<u64> {
        self.control.check_failed()?;
        let mut g = self.scratch[slot].lock();
        let s = &mut *g;
        s.rec.clear();
        s.rec.resize(HEADER, 0);
        encode_writes(
            &mut s.rec,
            &mut s.key,
            self.physical,
            writes,
            command,
            table_of,
        );
        if s.rec.len() > u32::MAX as usize {
            return Err(Error::Unsupported(format!(
                "a commit record of {} bytes (the ERMIA log takes records up to 4 GiB)",
                s.rec.len()
            )));
        }
        seal(&mut s.rec, KIND_TXN);
        Ok(s.rec.len() as u64)
    }

    /// Draws the end timestamp of the record `prepare` encoded: the one atomic add that
    /// orders the commit and reserves `[end - len, end)` of the log. The caller must then
    /// `fill` or `skip` the range.
    #[inline]
    pub(crate) fn reserve(&self, slot: usize, len: u64) -> u64 {
        // Announce a lower bound of our start before the add (see "Which prefix is filled").
        self.pending[slot].store(self.clock.now().get(), Ordering::SeqCst);
        self.clock.reserve(len) + len
    }

    /// Copies the prepared record into its reserved range ending at `end`.
    pub(crate) fn fill(&self, slot: usize, end: u64) -> Result<()> {
        let g = self.scratch[slot].lock();
        let r = self.place(end, &g.rec);
        self.pending[slot].store(IDLE, Ordering::Release);
        r
    }

    /// Writes a skip record over the range ending at `end` reserved by a transaction that
    /// then aborted.
    pub(crate) fn skip(&self, slot: usize, end: u64) {
        let len = self.scratch[slot].lock().rec.len();
        let h = header(KIND_SKIP, len as u32, &[]);
        // Only the header goes into the ring: the rest of the range keeps whatever the ring
        // held (the skip's checksum does not cover it). An oversized range gets zeros.
        let _ = if len > OVERSIZED {
            let mut rec = vec![0u8; len];
            rec[..HEADER].copy_from_slice(&h);
            self.place(end, &rec)
        } else {
            self.place_prefix(end, len, &h)
        };
        self.pending[slot].store(IDLE, Ordering::Release);
    }

    fn place(&self, end: u64, rec: &[u8]) -> Result<()> {
        self.place_prefix(end, rec.len(), rec)
    }

    /// Puts `bytes` at the start of the range `[end - len, end)`.
    fn place_prefix(&self, end: u64, len: usize, bytes: &[u8]) -> Result<()> {
        let start = end - len as u64;
        if len > OVERSIZED {
            self.oversized.lock().insert(start, bytes.to_vec());
            return Ok(());
        }
        // Wait until the flusher has written what the ring held at our positions.
        let mut spins = 0u32;
        while end > self.written.load(Ordering::Acquire) + RING_BYTES as u64 {
            self.control.check_failed()?;
            if spins.is_multiple_of(64) {
                self.control.kick();
            }
            spins += 1;
            std::thread::sleep(Duration::from_micros(50));
        }
        // SAFETY: our reserved range, whose ring positions the flusher is done with (above)
        // and no other worker owns; `len <= OVERSIZED < RING_BYTES`.
        unsafe { self.ring.write(start, bytes) };
        Ok(())
    }

    /// The end of the filled prefix of the LSN space.
    fn filled_limit(&self) -> u64 {
        let mut limit = self.clock.now().get();
        for p in self.pending.iter() {
            limit = limit.min(p.load(Ordering::SeqCst));
        }
        limit
    }

    /// Writes `[from, to)` (filled) to the segment: ring bytes, and oversized records from
    /// the side map.
    fn write_range(&self, seg: &mut Segment, from: u64, to: u64) -> Result<()> {
        // Every oversized record below `to` is in the range (those below `from` are written).
        let big = {
            let mut o = self.oversized.lock();
            let later = o.split_off(&to);
            std::mem::replace(&mut *o, later)
        };
        let mut at = from;
        let ring_part = |seg: &mut Segment, a: u64, b: u64| -> Result<()> {
            let mut x = a;
            while x < b {
                let n = ((b - x) as usize).min(RING_BYTES);
                // SAFETY: `[x, x + n)` is filled and below no worker's range; workers write
                // these positions again only after `written` passes them.
                let (p, q) = unsafe { self.ring.slices(x, n) };
                seg.write(p)?;
                seg.write(q)?;
                x += n as u64;
            }
            Ok(())
        };
        for (k, v) in big {
            ring_part(seg, at, k)?;
            seg.write(&v)?;
            at = k + v.len() as u64;
        }
        ring_part(seg, at, to)?;
        self.control
            .bytes_written
            .fetch_add(to - from, Ordering::Relaxed);
        self.control.blocks_written.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    fn flush_loop(
        self: Arc<Self>,
        mut seg: Segment,
        mut point: PointFile,
        interval: Duration,
        file_bytes: u64,
    ) {
        let mut published = self.control.extra().version;
        loop {
            let (stop, rotate) = self.control.next_round(interval);
            let extra = self.control.extra();
            let limit = self.filled_limit();
            let written = self.written.load(Ordering::Relaxed);
            let durable = self.control.durable();
            let r = (|| -> Result<()> {
                self.control.test_panic_point();
                if limit > written {
                    self.write_range(&mut seg, written, limit)?;
                    self.written.store(limit, Ordering::Release);
                }
                if limit > durable || extra.version != published {
                    if seg.fsync {
                        seg.file.sync_data().map_err(|e| Error::io(&seg.path, &e))?;
                        // The segment, `durable-lsn` and its mirror.
                        self.control.fsyncs.fetch_add(3, Ordering::Relaxed);
                    }
                    point.publish(&PersistentEpoch {
                        id: seg.db,
                        epoch: limit.max(durable),
                        positions: vec![seg.pos],
                        first: extra.first.clone(),
                        checkpoint: extra.checkpoint,
                        catalog_bytes: extra.catalog_bytes,
                    })?;
                    published = extra.version;
                }
                if rotate || seg.pos.offset >= file_bytes {
                    seg.next(limit)?;
                }
                Ok(())
            })();
            if let Err(e) = r {
                self.control.fail(&e);
                break;
            }
            self.control
                .end_round(limit.max(durable), rotate.then(|| vec![seg.pos.seq]));
            if stop {
                break;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segment_names_round_trip() {
        let n = segment_name(7, 123_456);
        assert_eq!(parse_segment_name(&n), Some((7, 123_456)));
        assert_eq!(parse_segment_name("seg-7-1"), None);
        assert_eq!(parse_segment_name("log-00-0000000001"), None);
    }

    #[test]
    fn records_walk_and_every_damage_stops_the_walk() {
        let mut buf = Vec::new();
        for (kind, body) in [(KIND_TXN, &b"hello"[..]), (KIND_SKIP, &[7u8; 20][..])] {
            let mut r = vec![0u8; HEADER];
            r.extend_from_slice(body);
            seal(&mut r, kind);
            buf.extend_from_slice(&r);
        }
        let mut seen = Vec::new();
        let (end, why) = walk_segment(&buf, |r| {
            seen.push((r.offset, r.kind, r.body.len()));
            Ok(())
        })
        .unwrap();
        assert_eq!((end, why), (buf.len(), None));
        assert_eq!(seen, vec![(0, KIND_TXN, 5), (14, KIND_SKIP, 20)]);
        // A flip in the transaction record (header or body) or in the skip's header stops
        // the walk at that record; a flip in a skip's body is not data and is not checked.
        for i in 0..buf.len() {
            let mut d = buf.clone();
            d[i] ^= 0x10;
            let (end, why) = walk_segment(&d, |_| Ok(())).unwrap();
            let expect = if i < 14 {
                0
            } else if i < 14 + HEADER {
                14
            } else {
                buf.len()
            };
            assert_eq!(end, expect, "flip at {i}");
            assert_eq!(why.is_some(), expect < buf.len(), "flip at {i}");
        }
        for cut in 0..buf.len() {
            let (end, why) = walk_segment(&buf[..cut], |_| Ok(())).unwrap();
            assert_eq!(end, if cut < 14 { 0 } else { 14 }, "cut at {cut}");
            assert_eq!(why.is_some(), cut != 0 && cut != 14, "cut at {cut}");
        }
    }

    #[test]
    fn the_ring_wraps() {
        let r = Ring::new();
        let lsn = (RING_BYTES - 3) as u64 + 5 * RING_BYTES as u64;
        unsafe {
            r.write(lsn, b"abcdefg");
            let (p, q) = r.slices(lsn, 7);
            assert_eq!((p, q), (&b"abc"[..], &b"defg"[..]));
        }
    }
}
