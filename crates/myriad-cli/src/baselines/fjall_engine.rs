//! YCSB on fjall's optimistic transactional database (`OptimisticTxDatabase`, fjall 3): one
//! keyspace `usertable` from the big-endian key to the row's attributes as one value
//! (`RowCodec`). A transaction with an update is a write transaction whose reads are recorded;
//! its commit fails with `Conflict` when a transaction that committed since its snapshot wrote
//! a key it read or wrote (serializable): counted as a `read_validation` abort and retried. A
//! read-only transaction reads a snapshot and never aborts.
//!
//! fjall has no in-memory mode: without `--data-dir` it runs in a temporary directory (removed
//! afterwards), its journal flushed to the OS at each commit and never fsynced. With
//! `--data-dir`, `--fsync always` makes each commit `PersistMode::SyncData` (fdatasync, as
//! Myriad's log) and `never` leaves it at `Buffer`.

use super::run::Failure;
use super::ycsb::{kv_key, run_kv_ops, KvAccess, RowCodec, TxnPlan, YcsbConn, YcsbEngine};
use crate::workload::ycsb::Params;
use fjall::{
    KeyspaceCreateOptions, OptimisticTxDatabase, OptimisticTxKeyspace, OptimisticWriteTx,
    PersistMode, Readable, Snapshot,
};
use myriad::AbortReason;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Distinguishes the temporary directories of one process.
static TEMP_DB: AtomicU64 = AtomicU64::new(0);

/// What the fidelity block says of fjall's concurrency.
pub(crate) const FJALL_CONCURRENCY: &str =
    "fjall: optimistic transactions (serializable: a commit conflicting with a transaction \
     committed since its snapshot fails, counted as a read_validation abort and retried); a \
     read-only transaction reads a snapshot";

/// A fjall database of one workload: in `--data-dir`, or a temporary directory.
pub(crate) struct FjallDb {
    pub db: OptimisticTxDatabase,
    dir: PathBuf,
    temporary: bool,
    /// Commit durability: `SyncData` for `--fsync always` on disk, else `Buffer`.
    persist: PersistMode,
    cache_bytes: u64,
}

pub(crate) fn fatal(e: impl std::fmt::Display) -> String {
    format!("fjall: {e}")
}

pub(crate) fn failure(e: impl std::fmt::Display) -> Failure {
    Failure::Fatal(fatal(e))
}

impl FjallDb {
    /// Opens the database with a block cache of `cache_bytes` (at least 64 MiB).
    pub fn open(
        dir: Option<&Path>,
        fsync_always: bool,
        cache_bytes: u64,
    ) -> Result<FjallDb, String> {
        let (dir, temporary) = match dir {
            Some(d) => (d.join("fjall"), false),
            None => (
                std::env::temp_dir().join(format!(
                    "myriad-fjall-{}-{}",
                    std::process::id(),
                    TEMP_DB.fetch_add(1, Ordering::Relaxed)
                )),
                true,
            ),
        };
        let cache_bytes = cache_bytes.max(64 << 20);
        let db = OptimisticTxDatabase::builder(&dir)
            .cache_size(cache_bytes)
            .temporary(temporary)
            .open()
            .map_err(fatal)?;
        let persist = if fsync_always && !temporary {
            PersistMode::SyncData
        } else {
            PersistMode::Buffer
        };
        Ok(FjallDb {
            db,
            dir,
            temporary,
            persist,
            cache_bytes,
        })
    }

    pub fn keyspace(&self, name: &str) -> Result<OptimisticTxKeyspace, String> {
        self.db
            .keyspace(name, KeyspaceCreateOptions::default)
            .map_err(fatal)
    }

    pub fn write_tx(&self) -> Result<OptimisticWriteTx, String> {
        Ok(self
            .db
            .write_tx()
            .map_err(fatal)?
            .durability(Some(self.persist)))
    }

    pub fn engine(&self) -> String {
        format!(
            "fjall 3 (OptimisticTxDatabase, LSM-tree; block cache {} MiB)",
            self.cache_bytes >> 20
        )
    }

    pub fn durability(&self) -> String {
        if self.temporary {
            format!(
                "none: fjall has no in-memory mode; a temporary directory {} (removed \
                 afterwards), journal written to the OS at each commit, never fsynced",
                self.dir.display()
            )
        } else if self.persist == PersistMode::SyncData {
            format!(
                "fjall journal in {}, PersistMode::SyncData at every commit (fdatasync)",
                self.dir.display()
            )
        } else {
            format!(
                "fjall journal in {}, PersistMode::Buffer (written to the OS at each commit, \
                 NOT durable at commit)",
                self.dir.display()
            )
        }
    }
}

pub(crate) struct FjallEngine {
    db: FjallDb,
    ks: OptimisticTxKeyspace,
    codec: RowCodec,
}

impl FjallEngine {
    pub fn open(
        dir: Option<&Path>,
        fsync_always: bool,
        params: &Params,
        codec: RowCodec,
    ) -> Result<FjallEngine, String> {
        // A block cache that holds the whole table, as the other engines hold it in memory.
        let cache_bytes = params
            .rows
            .saturating_mul(codec.row_bytes() as u64 + 32)
            .saturating_mul(2);
        let db = FjallDb::open(dir, fsync_always, cache_bytes)?;
        let ks = db.keyspace("usertable")?;
        Ok(FjallEngine { db, ks, codec })
    }
}

impl YcsbEngine for FjallEngine {
    type Conn<'a> = FjallConn<'a>;

    fn connect(&self) -> Result<FjallConn<'_>, String> {
        Ok(FjallConn {
            e: self,
            scratch: Vec::with_capacity(self.codec.row_bytes()),
        })
    }

    fn describe(&self) -> (String, String, String) {
        (
            self.db.engine(),
            format!(
                "{}: one value of {} bytes per key ({} attributes back to back) in an LSM-tree \
                 keyspace on the big-endian key; an update reads, changes and rewrites the \
                 whole value",
                self.codec.layout.name(),
                self.codec.row_bytes(),
                self.codec.attrs
            ),
            FJALL_CONCURRENCY.into(),
        )
    }

    fn durability(&self) -> String {
        self.db.durability()
    }
}

pub(crate) struct FjallConn<'a> {
    e: &'a FjallEngine,
    scratch: Vec<u8>,
}

struct Reader<'a>(&'a Snapshot, &'a OptimisticTxKeyspace);
struct Writer<'a>(&'a mut OptimisticWriteTx, &'a OptimisticTxKeyspace);

fn with(
    r: &impl Readable,
    ks: &OptimisticTxKeyspace,
    key: u64,
    f: &mut dyn FnMut(&[u8]),
) -> Result<bool, Failure> {
    match r.get(ks, kv_key(key)).map_err(failure)? {
        Some(v) => {
            f(&v);
            Ok(true)
        }
        None => Ok(false),
    }
}

impl KvAccess for Reader<'_> {
    fn with(&mut self, key: u64, f: &mut dyn FnMut(&[u8])) -> Result<bool, Failure> {
        with(self.0, self.1, key, f)
    }
    fn put(&mut self, _key: u64, _value: &[u8]) -> Result<(), Failure> {
        Err(Failure::Fatal(
            "fjall: a write in a read-only transaction".into(),
        ))
    }
}

impl KvAccess for Writer<'_> {
    fn with(&mut self, key: u64, f: &mut dyn FnMut(&[u8])) -> Result<bool, Failure> {
        with(&*self.0, self.1, key, f)
    }
    fn put(&mut self, key: u64, value: &[u8]) -> Result<(), Failure> {
        self.0.insert(self.1, &kv_key(key)[..], value);
        Ok(())
    }
}

impl YcsbConn for FjallConn<'_> {
    fn load(&mut self, lo: u64, rows: &[u8]) -> Result<(), String> {
        let mut tx = self.e.db.write_tx()?;
        for (i, row) in rows.chunks_exact(self.e.codec.row_bytes()).enumerate() {
            tx.insert(&self.e.ks, &kv_key(lo + i as u64)[..], row);
        }
        match tx.commit().map_err(fatal)? {
            Ok(()) => Ok(()),
            Err(_) => Err("fjall: the load conflicted with itself".into()),
        }
    }

    fn run(&mut self, t: &TxnPlan<'_>) -> Result<(), Failure> {
        if t.writes {
            let mut tx = self.e.db.write_tx().map_err(Failure::Fatal)?;
            run_kv_ops(t, &mut Writer(&mut tx, &self.e.ks), &mut self.scratch)?;
            match tx.commit().map_err(failure)? {
                Ok(()) => Ok(()),
                Err(fjall::Conflict) => Err(Failure::Abort(AbortReason::ReadValidation)),
            }
        } else {
            let snap = self.e.db.db.read_tx();
            run_kv_ops(t, &mut Reader(&snap, &self.e.ks), &mut self.scratch)
        }
    }

    fn key_summary(&mut self) -> Result<(u64, Option<(u64, u64)>), String> {
        let snap = self.e.db.db.read_tx();
        let n = snap.len(&self.e.ks).map_err(fatal)? as u64;
        let key = |g: Option<fjall::Guard>| -> Result<Option<u64>, String> {
            match g {
                None => Ok(None),
                Some(g) => {
                    let k = g.key().map_err(fatal)?;
                    let b: [u8; 8] = k[..]
                        .try_into()
                        .map_err(|_| format!("fjall: a key of {} bytes", k.len()))?;
                    Ok(Some(u64::from_be_bytes(b)))
                }
            }
        };
        let lo = key(snap.first_key_value(&self.e.ks))?;
        let hi = key(snap.last_key_value(&self.e.ks))?;
        Ok((n, lo.zip(hi)))
    }
}
