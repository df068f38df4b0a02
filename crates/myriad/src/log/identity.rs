//! What makes a directory a Myriad data directory, and every file in it provably its own.
//!
//! **Identity.** `IDENTITY` is written (atomically, before anything else) when a directory
//! becomes a database: the format version and a random 128-bit database id. Opening refuses a
//! non-empty directory without it (it is not ours to write into), an identity of another
//! format version, and — where the caller asked not to create — a directory without one.
//!
//! **File headers.** Every file of the database carries the id, so a file copied in from
//! another database (same name, checksums intact) is refused instead of replayed: log files,
//! ERMIA segments, checkpoint files and the catalog start with one header block
//! (`FileHeader`: id, kind and two kind-specific numbers); the single-block files (`CURRENT`,
//! a checkpoint's `MANIFEST`) and every durable-point record hold the id in their payload.
//!
//! A log file's header also holds the final length of the file before it in its stream (the
//! file it was rotated from): a file cut at a block boundary shows no damage of its own, and
//! only its successor can tell it was longer.

use super::format::{self, Get, Put};
use crate::error::{Error, Result};
use std::path::Path;

pub(crate) const IDENTITY_FILE: &str = "IDENTITY";
/// The on-disk format this build reads and writes. A directory of another version is refused
/// (`Error::UnsupportedFormat`), never guessed at.
pub const FORMAT_VERSION: u32 = 1;
const IDENTITY_MAGIC: u32 = 0x4449_524d; // "MRID"
const HEADER_MAGIC: u32 = 0x4448_524d; // "MRHD"

/// A database's id: random, fixed at creation, stamped into every file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub(crate) struct DbId(pub u128);

impl std::fmt::Display for DbId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:032x}", self.0)
    }
}

impl DbId {
    /// A fresh random id (the kernel's random source; a hash of time, process and address
    /// where it cannot be read).
    pub(crate) fn fresh() -> DbId {
        use std::io::Read;
        let mut b = [0u8; 16];
        if std::fs::File::open("/dev/urandom")
            .and_then(|mut f| f.read_exact(&mut b))
            .is_ok()
        {
            return DbId(u128::from_le_bytes(b));
        }
        use std::hash::{BuildHasher, Hasher};
        let mut id = 0u128;
        for i in 0..2u64 {
            let mut h = std::collections::hash_map::RandomState::new().build_hasher();
            h.write_u128(
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_nanos()),
            );
            h.write_u32(std::process::id());
            h.write_usize(&b as *const _ as usize);
            h.write_u64(i);
            id = (id << 64) | u128::from(h.finish());
        }
        DbId(id)
    }

    pub(crate) fn put(&self, p: &mut Vec<u8>) {
        p.u64(self.0 as u64);
        p.u64((self.0 >> 64) as u64);
    }

    pub(crate) fn get(g: &mut Get<'_>) -> Option<DbId> {
        let lo = g.u64()?;
        let hi = g.u64()?;
        Some(DbId(u128::from(lo) | (u128::from(hi) << 64)))
    }

    /// Refuses `found` (read from `path`) unless it is this database's id.
    pub(crate) fn check(&self, found: DbId, path: &Path) -> Result<()> {
        if found == *self {
            return Ok(());
        }
        Err(Error::Corrupt {
            file: path.display().to_string(),
            offset: 0,
            message: format!(
                "the file belongs to another database (id {found}; this directory's is {self})"
            ),
        })
    }
}

/// Writes the identity of a new database into `dir` (atomically; the directory is synced).
pub(crate) fn create(dir: &Path) -> Result<DbId> {
    let id = DbId::fresh();
    let mut p = Vec::new();
    p.u32(FORMAT_VERSION);
    id.put(&mut p);
    let mut out = Vec::new();
    format::put_block(&mut out, IDENTITY_MAGIC, &p);
    format::write_atomic(&dir.join(IDENTITY_FILE), &out)?;
    Ok(id)
}

/// Reads the identity of `dir`: `None` if it has none; a damaged file is `Corrupt`, another
/// format version `UnsupportedFormat`.
pub(crate) fn read(dir: &Path) -> Result<Option<DbId>> {
    let path = dir.join(IDENTITY_FILE);
    let data = match std::fs::read(&path) {
        Ok(d) => d,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::io(&path, &e)),
    };
    let (blocks, end, why) = format::read_blocks(&data, IDENTITY_MAGIC);
    if let Some(why) = why {
        return Err(Error::Corrupt {
            file: path.display().to_string(),
            offset: end as u64,
            message: why,
        });
    }
    let [b] = blocks[..] else {
        return Err(format::malformed(&path, 0, "identity file"));
    };
    let mut g = Get::new(b);
    let version = g
        .u32()
        .ok_or_else(|| format::malformed(&path, 0, "identity file"))?;
    if version != FORMAT_VERSION {
        return Err(Error::UnsupportedFormat {
            path: path.display().to_string(),
            found: version,
            supported: FORMAT_VERSION,
        });
    }
    let id = DbId::get(&mut g)
        .filter(|_| g.done())
        .ok_or_else(|| format::malformed(&path, 0, "identity file"))?;
    Ok(Some(id))
}

/// What a file is (`FileHeader::kind`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FileKind {
    /// `log-LL-SSSSSSSSSS`: `a` = logger, `b` = sequence number.
    Log = 1,
    /// `seg-SSSSSSSSSS-L…`: `a` = sequence number, `b` = first LSN.
    Segment = 2,
    /// `catalog`.
    Catalog = 3,
    /// A checkpoint's table file: `a` = table id, `b` = checkpoint timestamp.
    CheckpointRows = 4,
    /// A checkpoint's tuple-id file: as `CheckpointRows`.
    CheckpointTids = 5,
}

/// The header block every log, segment, catalog and checkpoint file starts with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct FileHeader {
    pub id: DbId,
    pub kind: FileKind,
    pub a: u64,
    pub b: u64,
    /// Log files and segments: the final length of the previous file of the stream, or
    /// `u64::MAX` when this file starts the stream (a session's first file).
    pub prev_len: u64,
}

impl FileHeader {
    pub(crate) fn new(id: DbId, kind: FileKind, a: u64, b: u64) -> FileHeader {
        FileHeader {
            id,
            kind,
            a,
            b,
            prev_len: u64::MAX,
        }
    }

    /// The header block's bytes (`LEN` long).
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut p = Vec::new();
        self.id.put(&mut p);
        p.u8(self.kind as u8);
        p.u64(self.a);
        p.u64(self.b);
        p.u64(self.prev_len);
        let mut out = Vec::new();
        format::put_block(&mut out, HEADER_MAGIC, &p);
        out
    }

    /// The length of an encoded header: block header, id (16), kind (1), three numbers (24).
    pub(crate) const LEN: usize = format::BLOCK_HEADER + 16 + 1 + 24;

    /// Reads the header at the start of `data` (the file at `path`). `Ok(None)` if the file is
    /// shorter than a header or its header block is torn (a file created by a session that
    /// stopped before the header was on disk); any other damage is `Corrupt`.
    pub(crate) fn read(path: &Path, data: &[u8]) -> Result<Option<FileHeader>> {
        if data.len() < Self::LEN {
            return Ok(None);
        }
        let (blocks, _, why) = format::read_blocks(&data[..Self::LEN], HEADER_MAGIC);
        let bad = |m: String| Error::Corrupt {
            file: path.display().to_string(),
            offset: 0,
            message: format!("file header: {m}"),
        };
        if let Some(why) = why {
            return Err(bad(why));
        }
        let mut g = Get::new(blocks[0]);
        let id = DbId::get(&mut g).ok_or_else(|| bad("malformed".into()))?;
        let kind = match g.u8() {
            Some(1) => FileKind::Log,
            Some(2) => FileKind::Segment,
            Some(3) => FileKind::Catalog,
            Some(4) => FileKind::CheckpointRows,
            Some(5) => FileKind::CheckpointTids,
            k => return Err(bad(format!("unknown file kind {k:?}"))),
        };
        let (Some(a), Some(b), Some(prev_len)) = (g.u64(), g.u64(), g.u64()) else {
            return Err(bad("malformed".into()));
        };
        Ok(Some(FileHeader {
            id,
            kind,
            a,
            b,
            prev_len,
        }))
    }

    /// Reads and checks the header of a file that must have one: this database's id, the
    /// expected kind and numbers. Returns where the file's content starts.
    pub(crate) fn expect(
        path: &Path,
        data: &[u8],
        id: DbId,
        kind: FileKind,
        a: u64,
        b: u64,
    ) -> Result<FileHeader> {
        let h = Self::read(path, data)?.ok_or_else(|| Error::Corrupt {
            file: path.display().to_string(),
            offset: 0,
            message: format!(
                "the file is {} bytes, shorter than its {}-byte header",
                data.len(),
                Self::LEN
            ),
        })?;
        h.check(path, id, kind, a, b)?;
        Ok(h)
    }

    /// Refuses a header of another database, kind or place.
    pub(crate) fn check(
        &self,
        path: &Path,
        id: DbId,
        kind: FileKind,
        a: u64,
        b: u64,
    ) -> Result<()> {
        id.check(self.id, path)?;
        if self.kind != kind || self.a != a || self.b != b {
            return Err(Error::Corrupt {
                file: path.display().to_string(),
                offset: 0,
                message: format!(
                    "the file's header says it is {:?} ({}, {}), its name or place says {kind:?} \
                     ({a}, {b})",
                    self.kind, self.a, self.b
                ),
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_round_trip_and_refuse_strangers() {
        let id = DbId(0x1234_5678_9abc_def0_0fed_cba9_8765_4321);
        let mut h = FileHeader::new(id, FileKind::Log, 1, 7);
        h.prev_len = 99;
        let bytes = h.encode();
        assert_eq!(bytes.len(), FileHeader::LEN);
        let p = Path::new("log-01-0000000007");
        assert_eq!(FileHeader::read(p, &bytes).unwrap(), Some(h));
        assert!(FileHeader::expect(p, &bytes, id, FileKind::Log, 1, 7).is_ok());
        // Another database, kind or place.
        assert!(FileHeader::expect(p, &bytes, DbId(5), FileKind::Log, 1, 7).is_err());
        assert!(FileHeader::expect(p, &bytes, id, FileKind::Segment, 1, 7).is_err());
        assert!(FileHeader::expect(p, &bytes, id, FileKind::Log, 1, 8).is_err());
        // Short: no header (a torn creation); a flipped bit: damage.
        assert_eq!(FileHeader::read(p, &bytes[..10]).unwrap(), None);
        let mut b = bytes.clone();
        b[20] ^= 1;
        assert!(FileHeader::read(p, &b).is_err());
    }

    #[test]
    fn identity_round_trips_and_refuses_other_versions() {
        let dir = std::env::temp_dir().join(format!("myriad-ident-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        assert_eq!(read(&dir).unwrap(), None);
        let id = create(&dir).unwrap();
        assert_eq!(read(&dir).unwrap(), Some(id));
        assert_ne!(DbId::fresh(), DbId::fresh());
        let mut p = Vec::new();
        p.u32(FORMAT_VERSION + 1);
        id.put(&mut p);
        let mut out = Vec::new();
        format::put_block(&mut out, IDENTITY_MAGIC, &p);
        std::fs::write(dir.join(IDENTITY_FILE), &out).unwrap();
        assert!(matches!(
            read(&dir),
            Err(Error::UnsupportedFormat { found, .. }) if found == FORMAT_VERSION + 1
        ));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
