//! On-disk framing shared by log files, the catalog, the persistent-epoch file and
//! checkpoints: checksummed blocks, and the little-endian field codec inside them.
//!
//! A block is `magic u32 | payload length u32 | crc32c u32 | payload`; the
//! checksum covers the length and the payload, so a torn write (a short or half-old block)
//! fails it. Files are sequences of blocks; a reader stops at the first block that does not
//! check out and reports its offset, and the caller decides whether that is a torn tail
//! (dropped) or damage where the data must be intact (`Error::Corrupt`).

use crate::error::{Error, Result};
use std::path::Path;

pub(crate) const BLOCK_HEADER: usize = 12;
/// Largest payload a reader accepts (a damaged length field must not make it allocate GBs).
pub(crate) const MAX_BLOCK: usize = 1 << 30;

/// Appends one block holding `payload` to `out`.
pub(crate) fn put_block(out: &mut Vec<u8>, magic: u32, payload: &[u8]) {
    out.extend_from_slice(&magic.to_le_bytes());
    out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    out.extend_from_slice(&block_crc(payload).to_le_bytes());
    out.extend_from_slice(payload);
}

fn block_crc(payload: &[u8]) -> u32 {
    let c = crc32c::crc32c(&(payload.len() as u32).to_le_bytes());
    crc32c::crc32c_append(c, payload)
}

/// Reads the blocks of `data` in order. Returns the payloads of the valid prefix, the offset
/// where it ends, and why reading stopped there (`None` at a clean end).
pub(crate) fn read_blocks(data: &[u8], magic: u32) -> (Vec<&[u8]>, usize, Option<String>) {
    let mut out = Vec::new();
    let mut at = 0;
    while at < data.len() {
        let rest = &data[at..];
        if rest.len() < BLOCK_HEADER {
            return (
                out,
                at,
                Some(format!("truncated block header ({} bytes)", rest.len())),
            );
        }
        let word = |i: usize| u32::from_le_bytes([rest[i], rest[i + 1], rest[i + 2], rest[i + 3]]);
        if word(0) != magic {
            return (out, at, Some("bad block magic".into()));
        }
        let len = word(4) as usize;
        if len > MAX_BLOCK {
            return (out, at, Some(format!("block length {len} out of range")));
        }
        if rest.len() < BLOCK_HEADER + len {
            return (
                out,
                at,
                Some(format!(
                    "truncated block: {} of {} payload bytes",
                    rest.len() - BLOCK_HEADER,
                    len
                )),
            );
        }
        let payload = &rest[BLOCK_HEADER..BLOCK_HEADER + len];
        if block_crc(payload) != word(8) {
            return (out, at, Some("checksum mismatch".into()));
        }
        out.push(payload);
        at += BLOCK_HEADER + len;
    }
    (out, at, None)
}

/// Little-endian field writer.
pub(crate) trait Put {
    fn u8(&mut self, v: u8);
    fn u32(&mut self, v: u32);
    fn u64(&mut self, v: u64);
    fn bytes(&mut self, v: &[u8]);
    /// A signed integer as a zigzag LEB128 varint (1 byte for -64..=63): command-log
    /// arguments are mostly small ids.
    fn varint(&mut self, v: i64);
}

impl Put for Vec<u8> {
    #[inline]
    fn u8(&mut self, v: u8) {
        self.push(v);
    }
    #[inline]
    fn u32(&mut self, v: u32) {
        self.extend_from_slice(&v.to_le_bytes());
    }
    #[inline]
    fn u64(&mut self, v: u64) {
        self.extend_from_slice(&v.to_le_bytes());
    }
    /// Length-prefixed bytes.
    #[inline]
    fn bytes(&mut self, v: &[u8]) {
        self.u32(v.len() as u32);
        self.extend_from_slice(v);
    }
    #[inline]
    fn varint(&mut self, v: i64) {
        let mut z = ((v << 1) ^ (v >> 63)) as u64;
        while z >= 0x80 {
            self.push((z as u8) | 0x80);
            z >>= 7;
        }
        self.push(z as u8);
    }
}

/// Little-endian field reader over a checksummed payload. A short read is a format error
/// (the checksum passed, so the writer and reader disagree), reported by `Get::err`.
pub(crate) struct Get<'a> {
    pub data: &'a [u8],
    pub at: usize,
}

impl<'a> Get<'a> {
    pub fn new(data: &'a [u8]) -> Self {
        Get { data, at: 0 }
    }
    pub fn done(&self) -> bool {
        self.at >= self.data.len()
    }
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let s = self.data.get(self.at..self.at.checked_add(n)?)?;
        self.at += n;
        Some(s)
    }
    pub fn u8(&mut self) -> Option<u8> {
        self.take(1).map(|s| s[0])
    }
    pub fn u32(&mut self) -> Option<u32> {
        self.take(4)
            .map(|s| u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
    }
    pub fn u64(&mut self) -> Option<u64> {
        let s = self.take(8)?;
        let mut b = [0u8; 8];
        b.copy_from_slice(s);
        Some(u64::from_le_bytes(b))
    }
    /// A zigzag LEB128 varint (`Put::varint`); a one-byte one inline (a command log's
    /// arguments are decoded once per PACMAN piece, and most are small).
    #[inline]
    pub fn varint(&mut self) -> Option<i64> {
        let b = *self.data.get(self.at)?;
        if b < 0x80 {
            self.at += 1;
            return Some(unzigzag(u64::from(b)));
        }
        self.long_varint()
    }
    fn long_varint(&mut self) -> Option<i64> {
        let mut z = 0u64;
        // Ten bytes at most: shifts 0, 7, ..., 63.
        for (i, &b) in self.data.get(self.at..)?.iter().take(10).enumerate() {
            z |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                self.at += i + 1;
                return Some(unzigzag(z));
            }
        }
        None
    }
    pub fn bytes(&mut self) -> Option<&'a [u8]> {
        let n = self.u32()? as usize;
        self.take(n)
    }
    pub fn str(&mut self) -> Option<String> {
        String::from_utf8(self.bytes()?.to_vec()).ok()
    }
}

fn unzigzag(z: u64) -> i64 {
    ((z >> 1) as i64) ^ -((z & 1) as i64)
}

/// A format error in a block whose checksum was right.
pub(crate) fn malformed(file: &Path, offset: u64, what: &str) -> Error {
    Error::Corrupt {
        file: file.display().to_string(),
        offset,
        message: format!("malformed {what}"),
    }
}

/// Writes `data` to `path` through a temporary file, fsyncs it, renames it into place and
/// fsyncs the directory: the file is either the old one or the complete new one.
pub(crate) fn write_atomic(path: &Path, data: &[u8]) -> Result<()> {
    use std::io::Write;
    let tmp = path.with_extension("tmp");
    let mut f = std::fs::File::create(&tmp).map_err(|e| Error::io(&tmp, &e))?;
    f.write_all(data).map_err(|e| Error::io(&tmp, &e))?;
    f.sync_all().map_err(|e| Error::io(&tmp, &e))?;
    drop(f);
    std::fs::rename(&tmp, path).map_err(|e| Error::io(path, &e))?;
    sync_dir(path.parent().unwrap_or(Path::new(".")))
}

/// Fsyncs a directory, so that files created or renamed in it survive a crash.
pub(crate) fn sync_dir(dir: &Path) -> Result<()> {
    std::fs::File::open(dir)
        .and_then(|f| f.sync_all())
        .map_err(|e| Error::io(dir, &e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_round_trip_and_small_ones_are_short() {
        let xs = [
            0i64,
            1,
            -1,
            63,
            -64,
            64,
            -65,
            300,
            i64::MAX,
            i64::MIN,
            1 << 40,
        ];
        let mut b = Vec::new();
        for &x in &xs {
            b.varint(x);
        }
        let mut g = Get::new(&b);
        for &x in &xs {
            assert_eq!(g.varint(), Some(x));
        }
        assert!(g.done());
        let mut one = Vec::new();
        one.varint(-64);
        assert_eq!(one.len(), 1);
        // A varint cut short is a format error, not a wrong value; so is one longer than
        // ten bytes.
        assert_eq!(Get::new(&[0x80, 0x80]).varint(), None);
        assert_eq!(Get::new(&[0x80; 11]).varint(), None);
        assert_eq!(Get::new(&[]).varint(), None);
        // Every length, each followed by a one-byte one (the position moves past exactly
        // the bytes read).
        for shift in 0..63 {
            for x in [1i64 << shift, (1i64 << shift) - 1, -(1i64 << shift)] {
                let mut b = Vec::new();
                b.varint(x);
                b.varint(-3);
                let mut g = Get::new(&b);
                assert_eq!((g.varint(), g.varint()), (Some(x), Some(-3)), "{x}");
                assert!(g.done());
            }
        }
    }

    #[test]
    fn blocks_round_trip_and_every_damage_is_caught() {
        let mut buf = Vec::new();
        put_block(&mut buf, 7, b"hello");
        put_block(&mut buf, 7, b"");
        put_block(&mut buf, 7, &[9u8; 100]);
        let (bs, end, err) = read_blocks(&buf, 7);
        assert_eq!(bs.len(), 3);
        assert_eq!(bs[0], b"hello");
        assert_eq!(end, buf.len());
        assert!(err.is_none());
        // Every truncation point stops at a block boundary before it.
        for cut in 0..buf.len() {
            let (bs, end, err) = read_blocks(&buf[..cut], 7);
            assert!(end <= cut);
            let complete = [0, 17, 29, buf.len()].iter().filter(|&&b| b <= cut).count();
            assert_eq!(bs.len(), complete - 1, "cut at {cut}");
            assert_eq!(err.is_some(), ![0, 17, 29].contains(&cut), "cut at {cut}");
        }
        // Every single-byte flip is detected in the block it hits.
        for i in 0..buf.len() {
            let mut d = buf.clone();
            d[i] ^= 0x40;
            let (bs, _, err) = read_blocks(&d, 7);
            assert!(err.is_some() && bs.len() < 3, "flip at byte {i} undetected");
        }
    }
}
