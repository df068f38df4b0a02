//! SQLite (rusqlite, the bundled library), one connection per thread: the database every
//! workload shares ([`SqliteDb`], [`in_txn`]), and YCSB on it.
//!
//! In memory: a `mode=memory&cache=shared` database, whose connections share one page cache
//! and lock tables, not the file: a writer excludes the other connections' reads of the table
//! until it commits (`SQLITE_LOCKED`). On disk (`--data-dir`): a WAL file, `synchronous=FULL`
//! for `--fsync always` (the WAL is synced at every commit) and `NORMAL` for `never` (synced
//! only at checkpoints: consistent, not durable), readers never blocked by the writer.
//!
//! A transaction that may write starts with `BEGIN IMMEDIATE` (it takes the write lock first,
//! so two writers never deadlock upgrading), a read-only one with `BEGIN` (deferred). The
//! busy timeout is zero: a busy or locked answer rolls the transaction back and counts as a
//! `lock_conflict` abort, retried after the runner's backoff like a Myriad abort.

use super::run::Failure;
use super::ycsb::{Field, RowCodec, TxnPlan, YcsbConn, YcsbEngine};
use crate::workload::ycsb::{attr_col, sum_bytes, Params, RowLayout};
use myriad::AbortReason;
use rusqlite::{ffi::ErrorCode, Connection, OpenFlags};
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

/// Distinguishes the in-memory databases of one process.
static MEMORY_DB: AtomicU64 = AtomicU64::new(0);

/// A SQLite database of one workload: where it lives, how its connections are set up, and
/// what the report says of its concurrency and durability.
pub(crate) struct SqliteDb {
    /// The database's URI (in memory) or file path.
    target: String,
    in_memory: bool,
    fsync_always: bool,
    /// `PRAGMA cache_size` of each connection, in KiB (on disk: room for the whole database).
    cache_kib: u64,
    /// Prepared statements each connection caches.
    statements: usize,
    /// Keeps an in-memory database alive between connections (it lives while one is open).
    _keeper: Mutex<Connection>,
}

pub(crate) fn fatal(e: rusqlite::Error) -> String {
    format!("sqlite: {e}")
}

/// Busy and locked are the engine's "not now": an abort to retry. Anything else is fatal.
pub(crate) fn failure(e: rusqlite::Error) -> Failure {
    match e.sqlite_error_code() {
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) => {
            Failure::Abort(AbortReason::LockConflict)
        }
        _ => Failure::Fatal(fatal(e)),
    }
}

impl SqliteDb {
    /// Creates the database of workload `name` (in memory, or `name.sqlite` in `dir`) and runs
    /// `schema` on it.
    pub fn open(
        name: &str,
        dir: Option<&Path>,
        fsync_always: bool,
        cache_kib: u64,
        statements: usize,
        schema: &str,
    ) -> Result<SqliteDb, String> {
        let (target, in_memory) = match dir {
            None => (
                format!(
                    "file:myriad-{name}-{}-{}?mode=memory&cache=shared",
                    std::process::id(),
                    MEMORY_DB.fetch_add(1, Ordering::Relaxed)
                ),
                true,
            ),
            Some(d) => {
                std::fs::create_dir_all(d).map_err(|e| format!("{}: {e}", d.display()))?;
                let path: PathBuf = d.join(format!("{name}.sqlite"));
                (path.to_string_lossy().into_owned(), false)
            }
        };
        let keeper = Connection::open_with_flags(&target, OpenFlags::default()).map_err(fatal)?;
        if !in_memory {
            keeper
                .pragma_update(None, "journal_mode", "WAL")
                .map_err(fatal)?;
        }
        keeper.execute_batch(schema).map_err(fatal)?;
        Ok(SqliteDb {
            target,
            in_memory,
            fsync_always,
            cache_kib,
            statements,
            _keeper: Mutex::new(keeper),
        })
    }

    /// A connection for one thread: busy timeout 0, the durability `--fsync` asks for.
    pub fn connect(&self) -> Result<Connection, String> {
        let c = Connection::open_with_flags(&self.target, OpenFlags::default()).map_err(fatal)?;
        c.busy_timeout(Duration::ZERO).map_err(fatal)?;
        c.set_prepared_statement_cache_capacity(self.statements);
        if !self.in_memory {
            let sync = if self.fsync_always { "FULL" } else { "NORMAL" };
            c.pragma_update(None, "synchronous", sync).map_err(fatal)?;
            c.pragma_update(None, "cache_size", -(self.cache_kib as i64))
                .map_err(fatal)?;
        }
        Ok(c)
    }

    pub fn engine(&self) -> String {
        format!("sqlite {} (rusqlite, bundled)", rusqlite::version())
    }

    /// The concurrency line of the fidelity block.
    pub fn concurrency(&self) -> String {
        format!(
            "sqlite: one connection per thread; BEGIN IMMEDIATE for a transaction that may \
             write, BEGIN (deferred) for a read-only one; busy timeout 0, busy/locked answers \
             roll back and are counted as lock_conflict aborts and retried{}",
            if self.in_memory {
                "; shared cache: a writer locks the table against the other \
                 connections' reads until it commits"
            } else {
                "; WAL: one writer at a time, readers not blocked"
            }
        )
    }

    pub fn durability(&self) -> String {
        if self.in_memory {
            "none: in-memory (mode=memory, cache=shared)".into()
        } else if self.fsync_always {
            format!(
                "sqlite WAL in {}, synchronous=FULL (the WAL is synced at every commit); page cache {} KiB per connection",
                self.target, self.cache_kib
            )
        } else {
            format!(
                "sqlite WAL in {}, synchronous=NORMAL (synced at checkpoints only: NOT durable at commit); page cache {} KiB per connection",
                self.target, self.cache_kib
            )
        }
    }
}

/// Runs `body` in one transaction on `c` (`BEGIN IMMEDIATE` if it may write, else deferred)
/// and commits it; any failure, a user abort included, rolls the transaction back.
pub(crate) fn in_txn<T>(
    c: &Connection,
    write: bool,
    body: impl FnOnce(&Connection) -> Result<T, Failure>,
) -> Result<T, Failure> {
    let exec = |sql: &str| c.prepare_cached(sql)?.execute([]).map(|_| ());
    exec(if write { "BEGIN IMMEDIATE" } else { "BEGIN" }).map_err(failure)?;
    match body(c).and_then(|t| exec("COMMIT").map(|()| t).map_err(failure)) {
        Ok(t) => Ok(t),
        Err(e) => {
            // A failed COMMIT may leave the transaction open; roll it back either way.
            if !c.is_autocommit() {
                let _ = exec("ROLLBACK");
            }
            Err(e)
        }
    }
}

pub(crate) struct SqliteEngine {
    db: SqliteDb,
    codec: RowCodec,
    /// The statements per first attribute: `reads[a]`, `updates[a]`.
    reads: Vec<String>,
    updates: Vec<String>,
    insert: String,
}

impl SqliteEngine {
    pub fn open(
        dir: Option<&Path>,
        fsync_always: bool,
        params: &Params,
        codec: RowCodec,
    ) -> Result<SqliteEngine, String> {
        let ty = match codec.layout {
            RowLayout::Int64x10 => "INTEGER",
            RowLayout::Bytes100x10 => "BLOB",
        };
        let cols = |first: usize, n: usize| -> Vec<String> {
            (0..n)
                .map(|j| format!("field{}", attr_col(first as u8, j, params.attrs) - 1))
                .collect()
        };
        let reads = (0..params.attrs)
            .map(|a| {
                format!(
                    "SELECT {} FROM usertable WHERE ycsb_key = ?1",
                    cols(a, params.attrs_read).join(", ")
                )
            })
            .collect();
        let updates = (0..params.attrs)
            .map(|a| {
                let sets: Vec<String> = cols(a, params.attrs_modified)
                    .iter()
                    .enumerate()
                    .map(|(j, c)| format!("{c} = ?{}", j + 2))
                    .collect();
                format!(
                    "UPDATE usertable SET {} WHERE ycsb_key = ?1",
                    sets.join(", ")
                )
            })
            .collect();
        let placeholders: Vec<String> = (1..=params.attrs + 1).map(|i| format!("?{i}")).collect();
        let insert = format!("INSERT INTO usertable VALUES ({})", placeholders.join(", "));
        let cache_kib = (params.rows.saturating_mul(codec.row_bytes() as u64 + 32) / 1024)
            .saturating_mul(2)
            .max(8 << 10);
        let columns: Vec<String> = (0..params.attrs)
            .map(|i| format!("field{i} {ty} NOT NULL"))
            .collect();
        let db = SqliteDb::open(
            "usertable",
            dir,
            fsync_always,
            cache_kib,
            params.attrs * 2 + 8,
            &format!(
                "CREATE TABLE usertable (ycsb_key INTEGER PRIMARY KEY, {})",
                columns.join(", ")
            ),
        )?;
        Ok(SqliteEngine {
            db,
            codec,
            reads,
            updates,
            insert,
        })
    }
}

impl YcsbEngine for SqliteEngine {
    type Conn<'a> = SqliteConn<'a>;

    fn connect(&self) -> Result<SqliteConn<'_>, String> {
        Ok(SqliteConn {
            c: self.db.connect()?,
            e: self,
        })
    }

    fn describe(&self) -> (String, String, String) {
        (
            self.db.engine(),
            format!(
                "{}: usertable(ycsb_key INTEGER PRIMARY KEY, {} {} columns): a B-tree on the \
                 key (rowid); a read selects its attributes, an update SETs them",
                self.codec.layout.name(),
                self.codec.attrs,
                match self.codec.layout {
                    RowLayout::Int64x10 => "INTEGER",
                    RowLayout::Bytes100x10 => "BLOB(100)",
                }
            ),
            self.db.concurrency(),
        )
    }

    fn durability(&self) -> String {
        self.db.durability()
    }
}

pub(crate) struct SqliteConn<'a> {
    c: Connection,
    e: &'a SqliteEngine,
}

impl SqliteConn<'_> {
    fn ops(&self, t: &TxnPlan<'_>) -> rusqlite::Result<()> {
        let p = t.params;
        for op in t.ops() {
            if op.update {
                let mut st = self.c.prepare_cached(&self.e.updates[op.attr as usize])?;
                st.raw_bind_parameter(1, op.key)?;
                for j in 0..p.attrs_modified {
                    match t.new_value(op, j) {
                        Field::Int(v) => st.raw_bind_parameter(j + 2, v)?,
                        Field::Bytes(b) => st.raw_bind_parameter(j + 2, b)?,
                    }
                }
                if st.raw_execute()? != 1 {
                    return Err(rusqlite::Error::QueryReturnedNoRows);
                }
            } else {
                let mut st = self.c.prepare_cached(&self.e.reads[op.attr as usize])?;
                let sum = st.query_row([op.key], |r| {
                    (0..p.attrs_read).try_fold(0u64, |s, j| {
                        Ok(s.wrapping_add(match p.layout {
                            RowLayout::Int64x10 => r.get::<_, i64>(j)? as u64,
                            RowLayout::Bytes100x10 => sum_bytes(r.get_ref(j)?.as_blob()?),
                        }))
                    })
                })?;
                black_box(sum);
            }
        }
        Ok(())
    }
}

impl YcsbConn for SqliteConn<'_> {
    fn load(&mut self, lo: u64, rows: &[u8]) -> Result<(), String> {
        let codec = self.e.codec;
        let tx = self.c.transaction().map_err(fatal)?;
        {
            let mut st = tx.prepare_cached(&self.e.insert).map_err(fatal)?;
            for (i, row) in rows.chunks_exact(codec.row_bytes()).enumerate() {
                st.raw_bind_parameter(1, (lo + i as u64) as i64)
                    .map_err(fatal)?;
                for a in 0..codec.attrs {
                    match codec.value(row, a) {
                        Field::Int(v) => st.raw_bind_parameter(a + 2, v),
                        Field::Bytes(b) => st.raw_bind_parameter(a + 2, b),
                    }
                    .map_err(fatal)?;
                }
                st.raw_execute().map_err(fatal)?;
            }
        }
        tx.commit().map_err(fatal)
    }

    fn run(&mut self, t: &TxnPlan<'_>) -> Result<(), Failure> {
        in_txn(&self.c, t.writes, |_| {
            self.ops(t).map_err(|e| match e {
                rusqlite::Error::QueryReturnedNoRows => {
                    Failure::Fatal("sqlite: a planned usertable row is missing".into())
                }
                e => failure(e),
            })
        })
    }

    fn key_summary(&mut self) -> Result<(u64, Option<(u64, u64)>), String> {
        self.c
            .query_row(
                "SELECT count(*), min(ycsb_key), max(ycsb_key) FROM usertable",
                [],
                |r| {
                    let n: i64 = r.get(0)?;
                    let lo: Option<i64> = r.get(1)?;
                    let hi: Option<i64> = r.get(2)?;
                    Ok((n as u64, lo.zip(hi).map(|(a, b)| (a as u64, b as u64))))
                },
            )
            .map_err(fatal)
    }
}
