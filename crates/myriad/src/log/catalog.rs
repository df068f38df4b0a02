//! The catalog file: every `CREATE TABLE`, `CREATE INDEX` and `CREATE PROCEDURE` of a durable
//! database, appended and fsynced before the DDL call returns (DDL is rare; a synchronous
//! write keeps it simple). Log records name tables by id; the catalog maps ids to schemas, and
//! a `CREATE INDEX` record says which id the new table replaces, so records written under the
//! old id still find their table. A procedure is kept as its SQL text (command-log records
//! name procedures, and recovery replays them).

use super::format::{self, Get, Put};
use super::identity::{DbId, FileHeader, FileKind};
use crate::error::{Error, Result};
use crate::schema::{ColumnType, IndexKind, TableSchema};
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

const CATALOG_MAGIC: u32 = 0x4341_524d; // "MRAC"
pub(crate) const CATALOG_FILE: &str = "catalog";
const NO_TABLE: u32 = u32::MAX;
/// First word of a procedure record (a table record starts with its id, always smaller).
const PROCEDURE: u32 = u32::MAX - 1;

/// One catalog record.
#[derive(Clone, Debug)]
pub(crate) enum Record {
    Table(TableRecord),
    /// The SQL texts of procedures registered together (one record, so all or none are
    /// durable); a later procedure of the same name replaces an earlier one.
    Procedures(Vec<String>),
}

/// A table's catalog record.
#[derive(Clone, Debug)]
pub(crate) struct TableRecord {
    pub id: u32,
    /// The table this one replaces (`CREATE INDEX`).
    pub replaces: Option<u32>,
    pub schema: TableSchema,
}

pub(crate) struct Catalog {
    path: PathBuf,
    file: File,
    /// The file's length: every byte of it is durable.
    len: u64,
}

impl Catalog {
    /// Opens the catalog of `dir` (database `db`) for appending: creates it with its header,
    /// or cuts a torn last record `Catalog::read` found (`intact` bytes are whole records).
    pub(crate) fn open(dir: &Path, db: DbId, intact: u64) -> Result<Catalog> {
        let path = dir.join(CATALOG_FILE);
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(|e| Error::io(&path, &e))?;
        let mut len = file.metadata().map_err(|e| Error::io(&path, &e))?.len();
        if len < FileHeader::LEN as u64 {
            // New, or created by a session that stopped before its header was on disk.
            file.set_len(0)
                .and_then(|_| {
                    file.write_all(&FileHeader::new(db, FileKind::Catalog, 0, 0).encode())
                })
                .and_then(|_| file.sync_data())
                .map_err(|e| Error::io(&path, &e))?;
            format::sync_dir(dir)?;
            len = FileHeader::LEN as u64;
        } else if len > intact {
            // A torn last record: appending after it would hide every later record.
            file.set_len(intact)
                .and_then(|_| file.sync_data())
                .map_err(|e| Error::io(&path, &e))?;
            len = intact;
        }
        Ok(Catalog { path, file, len })
    }

    /// The catalog's durable length.
    pub(crate) fn len(&self) -> u64 {
        self.len
    }

    /// Appends `rec` durably; returns the catalog's new length.
    pub(crate) fn append(&mut self, rec: &Record) -> Result<u64> {
        let mut out = Vec::new();
        format::put_block(&mut out, CATALOG_MAGIC, &encode(rec));
        self.file
            .write_all(&out)
            .and_then(|_| self.file.sync_data())
            .map_err(|e| Error::io(&self.path, &e))?;
        self.len += out.len() as u64;
        Ok(self.len)
    }

    /// Reads every record of database `db`'s catalog, and the length of its intact part. A
    /// torn last record (a DDL that never returned) is dropped; any other damage is an error,
    /// and so is a catalog shorter than `durable` bytes (the length the newest durable-point
    /// record saw), missing ones included.
    pub(crate) fn read(dir: &Path, db: DbId, durable: u64) -> Result<(Vec<Record>, u64)> {
        let path = dir.join(CATALOG_FILE);
        let data = match std::fs::read(&path) {
            Ok(d) => d,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(Error::io(&path, &e)),
        };
        let short = |have: u64, what: &str| Error::Corrupt {
            file: path.display().to_string(),
            offset: have,
            message: format!(
                "{what}: the catalog has {have} intact bytes, the durable point says \
                 {durable} (tables or procedures that were created are missing)"
            ),
        };
        if FileHeader::read(&path, &data)?.is_none() {
            // Never written past its header: no DDL was ever acknowledged with it.
            return match durable {
                0 => Ok((Vec::new(), 0)),
                _ => Err(short(data.len() as u64, "missing or cut")),
            };
        }
        FileHeader::expect(&path, &data, db, FileKind::Catalog, 0, 0)?;
        let body = &data[FileHeader::LEN..];
        let (blocks, end, why) = format::read_blocks(body, CATALOG_MAGIC);
        let intact = (FileHeader::LEN + end) as u64;
        if let Some(why) = why {
            // Only the very last write can be torn: what follows the damage must be shorter
            // than one block header plus the payload it announces, i.e. nothing complete.
            if !is_torn_tail(&body[end..]) {
                return Err(Error::Corrupt {
                    file: path.display().to_string(),
                    offset: intact,
                    message: why,
                });
            }
        }
        if intact < durable {
            return Err(short(intact, "cut short"));
        }
        let mut out = Vec::new();
        let mut at = FileHeader::LEN as u64;
        for b in blocks {
            out.push(decode(b).ok_or_else(|| format::malformed(&path, at, "catalog record"))?);
            at += (format::BLOCK_HEADER + b.len()) as u64;
        }
        Ok((out, intact))
    }
}

/// True if `rest` (what follows the last intact block) can be one partly written block.
pub(crate) fn is_torn_tail(rest: &[u8]) -> bool {
    if rest.len() < format::BLOCK_HEADER {
        return true;
    }
    let len = u32::from_le_bytes([rest[4], rest[5], rest[6], rest[7]]) as usize;
    rest.len() <= format::BLOCK_HEADER + len.min(format::MAX_BLOCK)
}

fn encode(r: &Record) -> Vec<u8> {
    let mut p = Vec::new();
    match r {
        Record::Table(r) => {
            p.u32(r.id);
            p.u32(r.replaces.unwrap_or(NO_TABLE));
            encode_schema(&r.schema, &mut p);
        }
        Record::Procedures(sqls) => {
            p.u32(PROCEDURE);
            p.u32(sqls.len() as u32);
            for sql in sqls {
                p.bytes(sql.as_bytes());
            }
        }
    }
    p
}

fn decode(b: &[u8]) -> Option<Record> {
    let mut g = Get::new(b);
    let id = g.u32()?;
    if id == PROCEDURE {
        let n = g.u32()?;
        let mut sqls = Vec::new();
        for _ in 0..n {
            sqls.push(g.str()?);
        }
        return Some(Record::Procedures(sqls));
    }
    let replaces = g.u32()?;
    let schema = decode_schema(&mut g)?;
    Some(Record::Table(TableRecord {
        id,
        replaces: (replaces != NO_TABLE).then_some(replaces),
        schema,
    }))
}

pub(crate) fn encode_schema(s: &TableSchema, p: &mut Vec<u8>) {
    p.bytes(s.name.as_bytes());
    p.u64(s.expected_rows as u64);
    p.u32(s.columns.len() as u32);
    for c in &s.columns {
        p.bytes(c.name.as_bytes());
        let (tag, n) = match c.ty {
            ColumnType::Int => (0, 0),
            ColumnType::Float => (1, 0),
            ColumnType::Str(n) => (2, n),
            ColumnType::Bytes(n) => (3, n),
        };
        p.u8(tag);
        p.u64(n as u64);
    }
    p.u32(s.indexes.len() as u32);
    for i in &s.indexes {
        p.bytes(i.name.as_bytes());
        p.u32(i.columns.len() as u32);
        for &c in &i.columns {
            p.u32(c as u32);
        }
        p.u8(matches!(i.kind, IndexKind::Ordered) as u8);
        p.u8(i.unique as u8);
    }
}

pub(crate) fn decode_schema(g: &mut Get<'_>) -> Option<TableSchema> {
    let name = g.str()?;
    let expected = g.u64()? as usize;
    let ncols = g.u32()? as usize;
    let mut cols = Vec::new();
    let mut b = TableSchema::new(&name).expected_rows(expected);
    for _ in 0..ncols {
        let cname = g.str()?;
        let tag = g.u8()?;
        let n = g.u64()? as usize;
        let ty = match tag {
            0 => ColumnType::Int,
            1 => ColumnType::Float,
            2 => ColumnType::Str(n),
            3 => ColumnType::Bytes(n),
            _ => return None,
        };
        b = b.column(&cname, ty);
        cols.push(cname);
    }
    let nidx = g.u32()? as usize;
    for k in 0..nidx {
        let iname = g.str()?;
        let n = g.u32()? as usize;
        let mut names = Vec::new();
        for _ in 0..n {
            names.push(cols.get(g.u32()? as usize)?.as_str());
        }
        let kind = if g.u8()? == 1 {
            IndexKind::Ordered
        } else {
            IndexKind::Hash
        };
        let unique = g.u8()? == 1;
        b = if k == 0 {
            b.primary_key_with(&names, kind)
        } else {
            b.index(&iname, &names, kind, unique)
        };
    }
    b.build().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schemas_round_trip() {
        let s = TableSchema::new("t")
            .column("a", ColumnType::Int)
            .column("b", ColumnType::Str(12))
            .column("c", ColumnType::Float)
            .column("d", ColumnType::Bytes(3))
            .primary_key_with(&["b", "a"], IndexKind::Ordered)
            .index("by_c", &["c"], IndexKind::Hash, false)
            .index("by_d", &["d", "a"], IndexKind::Ordered, true)
            .expected_rows(77)
            .build()
            .unwrap();
        let rec = Record::Table(TableRecord {
            id: 5,
            replaces: Some(2),
            schema: s.clone(),
        });
        let Some(Record::Table(back)) = decode(&encode(&rec)) else {
            panic!("not a table record")
        };
        assert_eq!(back.id, 5);
        assert_eq!(back.replaces, Some(2));
        assert_eq!(format!("{:?}", back.schema), format!("{s:?}"));
        let sqls = vec![
            "CREATE PROCEDURE p(x INT) AS $$ BEGIN RETURN x; END $$".to_string(),
            "CREATE PROCEDURE q() AS $$ BEGIN END $$".to_string(),
        ];
        let Some(Record::Procedures(back)) = decode(&encode(&Record::Procedures(sqls.clone())))
        else {
            panic!("not a procedure record")
        };
        assert_eq!(back, sqls);
    }
}
