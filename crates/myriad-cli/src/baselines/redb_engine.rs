//! YCSB on redb: one table `usertable` from the big-endian key to the row's attributes as one
//! value (`RowCodec`). redb runs one write transaction at a time (`begin_write` waits for the
//! previous one), so every transaction with an update is serialised; a read-only transaction
//! reads a snapshot (`begin_read`) beside the writer. Nothing aborts.
//!
//! In memory: redb's `InMemoryBackend`. On disk (`--data-dir`): a file whose every commit is
//! `Durability::Immediate` (fsynced before the commit returns). `--fsync never` is refused:
//! redb's non-durable commits keep the pages they free until a durable commit, so a run of
//! them alone is not a fair configuration.

use super::run::Failure;
use super::ycsb::{kv_key, run_kv_ops, KvAccess, RowCodec, TxnPlan, YcsbConn, YcsbEngine};
use redb::{
    backends::InMemoryBackend, Database, Durability, ReadableDatabase, ReadableTable,
    ReadableTableMetadata, TableDefinition,
};
use std::path::{Path, PathBuf};

/// Why `--engine redb --data-dir D --fsync never` is refused.
pub(crate) const REDB_FSYNC_NEVER: &str =
    "--engine redb with --data-dir commits durably (fsync) only: --fsync never is not supported \
     (redb keeps the pages its non-durable commits free until a durable one)";

const USERTABLE: TableDefinition<'static, &[u8; 8], &[u8]> = TableDefinition::new("usertable");

/// What the fidelity block says of redb's concurrency.
pub(crate) const REDB_CONCURRENCY: &str =
    "redb: writers serialised (one write transaction at a time: begin_write waits); a \
     read-only transaction reads a snapshot (begin_read) beside the writer; no aborts";

/// A redb database of one workload: in memory, or the file `name.redb` in `--data-dir`.
pub(crate) struct RedbDb {
    pub db: Database,
    pub file: Option<PathBuf>,
}

pub(crate) fn fatal(e: impl std::fmt::Display) -> String {
    format!("redb: {e}")
}

pub(crate) fn failure(e: impl std::fmt::Display) -> Failure {
    Failure::Fatal(fatal(e))
}

impl RedbDb {
    pub fn open(name: &str, dir: Option<&Path>, fsync_always: bool) -> Result<RedbDb, String> {
        let (db, file) = match dir {
            None => (
                Database::builder()
                    .create_with_backend(InMemoryBackend::new())
                    .map_err(fatal)?,
                None,
            ),
            Some(d) => {
                if !fsync_always {
                    return Err(REDB_FSYNC_NEVER.into());
                }
                std::fs::create_dir_all(d).map_err(|e| format!("{}: {e}", d.display()))?;
                let file = d.join(format!("{name}.redb"));
                (Database::create(&file).map_err(fatal)?, Some(file))
            }
        };
        Ok(RedbDb { db, file })
    }

    pub fn begin_write(&self) -> Result<redb::WriteTransaction, String> {
        let mut tx = self.db.begin_write().map_err(fatal)?;
        // Immediate is redb's default; said here because the durability line depends on it.
        tx.set_durability(Durability::Immediate).map_err(fatal)?;
        Ok(tx)
    }

    pub fn engine(&self) -> String {
        format!(
            "redb 4 ({})",
            if self.file.is_some() {
                "a file"
            } else {
                "InMemoryBackend"
            }
        )
    }

    pub fn durability(&self) -> String {
        match &self.file {
            None => "none: in-memory (redb InMemoryBackend)".into(),
            Some(f) => format!(
                "redb file {}, Durability::Immediate (every commit fsynced before it returns)",
                f.display()
            ),
        }
    }
}

pub(crate) struct RedbEngine {
    db: RedbDb,
    codec: RowCodec,
}

impl RedbEngine {
    pub fn open(
        dir: Option<&Path>,
        fsync_always: bool,
        codec: RowCodec,
    ) -> Result<RedbEngine, String> {
        let db = RedbDb::open("usertable", dir, fsync_always)?;
        let tx = db.begin_write()?;
        tx.open_table(USERTABLE).map_err(fatal)?;
        tx.commit().map_err(fatal)?;
        Ok(RedbEngine { db, codec })
    }
}

impl YcsbEngine for RedbEngine {
    type Conn<'a> = RedbConn<'a>;

    fn connect(&self) -> Result<RedbConn<'_>, String> {
        Ok(RedbConn {
            e: self,
            scratch: Vec::with_capacity(self.codec.row_bytes()),
        })
    }

    fn describe(&self) -> (String, String, String) {
        (
            self.db.engine(),
            format!(
                "{}: one value of {} bytes per key ({} attributes back to back) in a B-tree on \
                 the big-endian key; an update reads, changes and rewrites the whole value",
                self.codec.layout.name(),
                self.codec.row_bytes(),
                self.codec.attrs
            ),
            REDB_CONCURRENCY.into(),
        )
    }

    fn durability(&self) -> String {
        self.db.durability()
    }
}

pub(crate) struct RedbConn<'a> {
    e: &'a RedbEngine,
    scratch: Vec<u8>,
}

/// Point access through either kind of redb table.
struct Access<T>(T);

impl<T: ReadableTable<&'static [u8; 8], &'static [u8]>> Access<T> {
    fn get(&self, key: u64, f: &mut dyn FnMut(&[u8])) -> Result<bool, Failure> {
        match self.0.get(&kv_key(key)).map_err(failure)? {
            Some(v) => {
                f(v.value());
                Ok(true)
            }
            None => Ok(false),
        }
    }
}

impl KvAccess for Access<redb::ReadOnlyTable<&'static [u8; 8], &'static [u8]>> {
    fn with(&mut self, key: u64, f: &mut dyn FnMut(&[u8])) -> Result<bool, Failure> {
        self.get(key, f)
    }
    fn put(&mut self, _key: u64, _value: &[u8]) -> Result<(), Failure> {
        Err(Failure::Fatal(
            "redb: a write in a read-only transaction".into(),
        ))
    }
}

impl KvAccess for Access<redb::Table<'_, &'static [u8; 8], &'static [u8]>> {
    fn with(&mut self, key: u64, f: &mut dyn FnMut(&[u8])) -> Result<bool, Failure> {
        self.get(key, f)
    }
    fn put(&mut self, key: u64, value: &[u8]) -> Result<(), Failure> {
        self.0.insert(&kv_key(key), value).map_err(failure)?;
        Ok(())
    }
}

impl YcsbConn for RedbConn<'_> {
    fn load(&mut self, lo: u64, rows: &[u8]) -> Result<(), String> {
        let tx = self.e.db.begin_write()?;
        {
            let mut t = tx.open_table(USERTABLE).map_err(fatal)?;
            for (i, row) in rows.chunks_exact(self.e.codec.row_bytes()).enumerate() {
                t.insert(&kv_key(lo + i as u64), row).map_err(fatal)?;
            }
        }
        tx.commit().map_err(fatal)
    }

    fn run(&mut self, t: &TxnPlan<'_>) -> Result<(), Failure> {
        if t.writes {
            let tx = self.e.db.begin_write().map_err(Failure::Fatal)?;
            {
                let mut table = Access(tx.open_table(USERTABLE).map_err(failure)?);
                run_kv_ops(t, &mut table, &mut self.scratch)?;
            }
            tx.commit().map_err(failure)
        } else {
            let tx = self.e.db.db.begin_read().map_err(failure)?;
            let mut table = Access(tx.open_table(USERTABLE).map_err(failure)?);
            run_kv_ops(t, &mut table, &mut self.scratch)
        }
    }

    fn key_summary(&mut self) -> Result<(u64, Option<(u64, u64)>), String> {
        let tx = self.e.db.db.begin_read().map_err(fatal)?;
        let t = tx.open_table(USERTABLE).map_err(fatal)?;
        let n = t.len().map_err(fatal)?;
        let key = |g: Option<(redb::AccessGuard<'_, &[u8; 8]>, _)>| {
            g.map(|(k, _)| u64::from_be_bytes(*k.value()))
        };
        let lo = key(t.first().map_err(fatal)?);
        let hi = key(t.last().map_err(fatal)?);
        Ok((n, lo.zip(hi)))
    }
}
