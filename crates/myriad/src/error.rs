//! Typed errors. Aborts are values with a reason (`AbortReason`), never panics.

use std::fmt;

/// Why a transaction was aborted by the engine (or by the user).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum AbortReason {
    /// First-writer-wins: another transaction holds the write lock on the latest version, or
    /// committed a newer version after our read time (Hekaton §2.6).
    WriteWriteConflict,
    /// A version in the read set is no longer visible as of the end timestamp (Hekaton §3.2).
    ReadValidation,
    /// Repeating a scan as of the end timestamp found a version that was not visible as of the
    /// begin timestamp (Hekaton §3.2, phantom detection).
    Phantom,
    /// A unique secondary-index key was claimed by a concurrent transaction that committed first.
    UniqueConflict,
    /// The application aborted (`Transaction::abort`, or a closure that returned an error).
    UserAbort,
    /// MVTO (thesis §5.3.1): the timestamp order forbids the operation — a write to a version
    /// a later transaction already read (its read-ts), an insert into a range a later
    /// transaction already scanned, or a read that met an uncommitted write of an earlier one.
    TimestampOrder,
    /// MV2PL no-wait (thesis §5.3.3): the version's read or write lock is held by another
    /// transaction, or a newer version was committed after the snapshot the read was for.
    /// Under `mv2pl-wait` also: a read lock refused by a writer at precommit
    /// (NoMoreReadLocks), a scanned insert of a transaction at precommit, or a precommit
    /// wait that timed out.
    LockConflict,
    /// SSN (thesis §5.3.4): the transaction's exclusion window closed — a transaction that
    /// must follow it in the serial order (π, its sstamp) committed no later than one that
    /// must precede it (η, its pstamp), so committing could close a dependency cycle.
    Exclusion,
    /// Commit dependencies (Hekaton §2.7): the transaction read or ignored a version of a
    /// Preparing transaction speculatively, and that transaction aborted (a cascading abort).
    CommitDependency,
    /// `mv2pl-wait` (Hekaton §4.4): the transaction waited at precommit on a wait-for
    /// dependency that closed a cycle of waiting transactions, and was chosen (the youngest
    /// of the cycle) to break it.
    Deadlock,
    /// MVTO READ ONLY (thesis §5.3.1): the transaction reads a snapshot once every
    /// transaction with a timestamp at or below it has finished, and older transactions were
    /// still running when the wait (`mvto::SNAPSHOT_WAIT`) ran out. It fails rather than run
    /// as an ordinary, read-tracking MVTO reader it was not asked to be; retrying may succeed.
    SnapshotWait,
    /// `healing` (thesis §3.4.2): healing a stored-procedure call needed a row ordered before
    /// the validation cursor, and its one try-lock found another committer holding it (the
    /// no-wait rule that keeps ordered validation deadlock-free).
    HealLockConflict,
    /// `healing`: a commit healed `cc::healing::HEAL_LIMIT` times and still found a stale
    /// read or a phantom, and gave up.
    HealGiveUp,
}

impl AbortReason {
    /// Every reason, in report order.
    pub const ALL: [AbortReason; 13] = [
        AbortReason::WriteWriteConflict,
        AbortReason::ReadValidation,
        AbortReason::Phantom,
        AbortReason::UniqueConflict,
        AbortReason::UserAbort,
        AbortReason::TimestampOrder,
        AbortReason::LockConflict,
        AbortReason::Exclusion,
        AbortReason::CommitDependency,
        AbortReason::Deadlock,
        AbortReason::SnapshotWait,
        AbortReason::HealLockConflict,
        AbortReason::HealGiveUp,
    ];

    /// Stable snake_case name used in reports and JSON.
    pub fn name(self) -> &'static str {
        match self {
            AbortReason::WriteWriteConflict => "write_write_conflict",
            AbortReason::ReadValidation => "read_validation",
            AbortReason::Phantom => "phantom",
            AbortReason::UniqueConflict => "unique_conflict",
            AbortReason::UserAbort => "user_abort",
            AbortReason::TimestampOrder => "timestamp_order",
            AbortReason::LockConflict => "lock_conflict",
            AbortReason::Exclusion => "ssn_exclusion",
            AbortReason::CommitDependency => "commit_dependency",
            AbortReason::Deadlock => "deadlock",
            AbortReason::SnapshotWait => "snapshot_wait",
            AbortReason::HealLockConflict => "heal_lock_conflict",
            AbortReason::HealGiveUp => "heal_give_up",
        }
    }

    pub(crate) fn index(self) -> usize {
        self as usize
    }
}

impl fmt::Display for AbortReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Every error the public API returns.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum Error {
    /// No table of this name exists (or the handle belongs to another database).
    UnknownTable(String),
    /// The table has no column of this name.
    UnknownColumn {
        /// The table's name.
        table: String,
        /// The column name that was not found.
        column: String,
    },
    /// The table has no index of this name.
    UnknownIndex {
        /// The table's name.
        table: String,
        /// The index name that was not found.
        index: String,
    },
    /// A table or index of this name already exists.
    AlreadyExists(String),
    /// The schema definition is invalid (the message says why).
    InvalidSchema(String),
    /// A value of the wrong type for the column.
    TypeMismatch {
        /// The table's name.
        table: String,
        /// The column's name.
        column: String,
        /// The column's declared type.
        expected: String,
        /// The type of the value given.
        found: String,
    },
    /// A string/bytes value longer than the column's declared maximum.
    ValueTooLong {
        /// The table's name.
        table: String,
        /// The column's name.
        column: String,
        /// The column's declared maximum length in bytes.
        max_len: usize,
        /// The length of the value given.
        len: usize,
    },
    /// Bytes for a VARCHAR column that are not valid UTF-8 (text enters as `&str` through
    /// the API, so only a row image that recovery reads back whole can carry them).
    InvalidText {
        /// The table's name.
        table: String,
        /// The column's name.
        column: String,
    },
    /// A key with the wrong number of components for the index.
    KeyArity {
        /// The table's name.
        table: String,
        /// The index's name.
        index: String,
        /// The number of key columns of the index.
        expected: usize,
        /// The number of components given.
        found: usize,
    },
    /// A row with the wrong number of values.
    RowArity {
        /// The table's name.
        table: String,
        /// The number of columns of the table.
        expected: usize,
        /// The number of values given.
        found: usize,
    },
    /// Insert of a key that exists (primary key or unique secondary index).
    DuplicateKey {
        /// The table's name.
        table: String,
        /// The index (primary or unique secondary) that already holds the key.
        index: String,
    },
    /// Update or delete of a key that does not exist (in this transaction's snapshot).
    NotFound {
        /// The table's name.
        table: String,
    },
    /// Primary-key columns cannot be updated; delete and re-insert instead.
    PrimaryKeyUpdate {
        /// The table's name.
        table: String,
        /// The primary-key column the update tried to change.
        column: String,
    },
    /// The transaction was aborted by concurrency control; retrying may succeed.
    SerializationFailure(AbortReason),
    /// `Database::run` gave up after the configured number of attempts.
    RetriesExhausted {
        /// Attempts made (`Config::max_retries`).
        attempts: u32,
        /// Why the last attempt aborted.
        last: AbortReason,
    },
    /// A write in a transaction declared READ ONLY.
    ReadOnlyTransaction,
    /// The transaction already committed or aborted (e.g. after a failed operation aborted it).
    TransactionClosed,
    /// A begin floor (`Database::begin_after`) above every commit timestamp handed out: a
    /// floor must be a timestamp a commit returned.
    FloorAhead {
        /// The floor asked for.
        floor: u64,
        /// The newest commit timestamp handed out (or open to join).
        newest: u64,
    },
    /// More concurrent transactions than `Config::max_concurrent_txns`.
    TooManyTransactions {
        /// The size of the transaction table.
        max: usize,
    },
    /// The configuration is invalid (names the setting and the problem).
    InvalidConfig(String),
    /// A valid configuration that this build does not implement yet (names the choice).
    Unsupported(String),
    /// A SQL statement that does not parse, type-check or is not supported; `line` and
    /// `column` (1-based, 0 when unknown) locate the offending text.
    Sql {
        /// 1-based line of the offending text, 0 when unknown.
        line: u64,
        /// 1-based column of the offending text, 0 when unknown.
        column: u64,
        /// What is wrong.
        message: String,
    },
    /// DDL and transactions met: a transaction touched a table that `CREATE INDEX` is
    /// rebuilding, or `CREATE INDEX` timed out waiting for open transactions (the message
    /// says which).
    Busy(String),
    /// No stored procedure of this name is registered.
    UnknownProcedure(String),
    /// A call with the wrong number or types of arguments (the message says which).
    ProcedureArguments {
        /// The procedure's name.
        procedure: String,
        /// Which argument is wrong and how.
        message: String,
    },
    /// The procedure ran `RAISE` or `ROLLBACK`: the transaction was rolled back (a user abort,
    /// never retried).
    ProcedureAbort {
        /// The procedure's name.
        procedure: String,
        /// The `RAISE` message (or that it was a `ROLLBACK`).
        message: String,
    },
    /// A file operation on the data directory failed (names the path and the OS error).
    Io {
        /// The file or directory the operation was on.
        path: String,
        /// The OS error.
        message: String,
    },
    /// A log, checkpoint or catalog file is damaged where it must be intact: bytes before the
    /// durable epoch, or a checkpoint the manifest names. Opening refuses; nothing is changed.
    Corrupt {
        /// The damaged file.
        file: String,
        /// Byte offset in the file where the damage was found (0 for the file as a whole).
        offset: u64,
        /// What is wrong there.
        message: String,
    },
    /// The path is not a Myriad data directory (a regular file; a non-empty directory
    /// without an `IDENTITY` file; or no database where one must exist): nothing was written.
    NotADataDirectory {
        /// The path given.
        path: String,
        /// Why it is not a data directory.
        message: String,
    },
    /// The data directory was written in another on-disk format version than this build
    /// reads.
    UnsupportedFormat {
        /// The data directory.
        path: String,
        /// The format version its `IDENTITY` file names.
        found: u32,
        /// The format version this build reads.
        supported: u32,
    },
    /// Writing or syncing the log failed earlier: the database acknowledges no further
    /// commits (the message is the first I/O error). Reopen the directory to recover.
    LogFailed(String),
    /// A background thread of the engine (a vacuum thread, the partial-order tick, the log)
    /// could not be started, or stopped because it panicked
    /// (`Database::background_failures`).
    BackgroundThread {
        /// The thread's name (`myriad-vacuum-0`, `myriad-ts-tick`, ...).
        name: String,
        /// What happened: "could not be started: <OS error>" or "stopped: it panicked:
        /// <message>".
        message: String,
    },
    /// A SQL statement inside a `BEGIN` block whose transaction an earlier error aborted
    /// (PostgreSQL's `in_failed_sql_transaction`): only `COMMIT` or `ROLLBACK`, which both
    /// end the block without effect, are accepted.
    InFailedTransaction,
    /// A SQL statement was cancelled: by `sql::CancelHandle::cancel` ("user request") or by
    /// the session's statement timeout (the message says which). Its transaction is rolled
    /// back like after any failed statement.
    Cancelled(String),
}

impl Error {
    /// True for errors that a retry of the whole transaction may cure.
    pub fn is_retryable(&self) -> bool {
        matches!(self, Error::SerializationFailure(r) if *r != AbortReason::UserAbort)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::UnknownTable(t) => write!(f, "unknown table `{t}`"),
            Error::UnknownColumn { table, column } => {
                write!(f, "table `{table}` has no column `{column}`")
            }
            Error::UnknownIndex { table, index } => {
                write!(f, "table `{table}` has no index `{index}`")
            }
            Error::AlreadyExists(n) => write!(f, "`{n}` already exists"),
            Error::InvalidSchema(m) => write!(f, "invalid schema: {m}"),
            Error::TypeMismatch {
                table,
                column,
                expected,
                found,
            } => write!(
                f,
                "type mismatch for `{table}.{column}`: expected {expected}, found {found}"
            ),
            Error::InvalidText { table, column } => {
                write!(f, "`{table}.{column}` is VARCHAR, but the value is not valid UTF-8")
            }
            Error::ValueTooLong {
                table,
                column,
                max_len,
                len,
            } => write!(
                f,
                "value too long for `{table}.{column}`: {len} bytes, maximum {max_len}"
            ),
            Error::KeyArity {
                table,
                index,
                expected,
                found,
            } => write!(
                f,
                "key for index `{index}` of `{table}` has {found} components, expected {expected}"
            ),
            Error::RowArity {
                table,
                expected,
                found,
            } => {
                write!(
                    f,
                    "row for `{table}` has {found} values, expected {expected}"
                )
            }
            Error::DuplicateKey { table, index } => {
                write!(f, "duplicate key in index `{index}` of table `{table}`")
            }
            Error::NotFound { table } => write!(f, "no such row in table `{table}`"),
            Error::PrimaryKeyUpdate { table, column } => write!(
                f,
                "cannot update primary-key column `{table}.{column}`; delete and insert instead"
            ),
            Error::SerializationFailure(r) => write!(f, "serialization failure: {r}"),
            Error::RetriesExhausted { attempts, last } => write!(
                f,
                "transaction failed after {attempts} attempts; last abort reason: {last}"
            ),
            Error::ReadOnlyTransaction => write!(f, "write in a READ ONLY transaction"),
            Error::TransactionClosed => write!(f, "the transaction has already ended"),
            Error::FloorAhead { floor, newest } => write!(
                f,
                "begin floor {floor} is above the newest commit timestamp {newest} (a floor \
                 must be a timestamp a commit returned)"
            ),
            Error::InFailedTransaction => write!(
                f,
                "current transaction is aborted, commands ignored until end of transaction block"
            ),
            Error::Cancelled(why) => write!(f, "canceling statement due to {why}"),
            Error::TooManyTransactions { max } => write!(
                f,
                "more than {max} concurrent transactions (raise Config::max_concurrent_txns)"
            ),
            Error::InvalidConfig(m) => write!(f, "invalid configuration: {m}"),
            Error::Unsupported(m) => write!(f, "not supported: {m}"),
            Error::Sql {
                line,
                column,
                message,
            } => {
                if *line == 0 {
                    write!(f, "SQL: {message}")
                } else {
                    write!(f, "SQL at line {line}, column {column}: {message}")
                }
            }
            Error::Busy(m) => write!(f, "busy: {m}"),
            Error::UnknownProcedure(p) => write!(f, "unknown procedure `{p}`"),
            Error::ProcedureArguments { procedure, message } => {
                write!(f, "call of `{procedure}`: {message}")
            }
            Error::ProcedureAbort { procedure, message } => {
                write!(f, "procedure `{procedure}` rolled back: {message}")
            }
            Error::Io { path, message } => write!(f, "I/O error on `{path}`: {message}"),
            Error::Corrupt {
                file,
                offset,
                message,
            } => write!(f, "`{file}` is damaged at byte {offset}: {message}"),
            Error::NotADataDirectory { path, message } => {
                write!(f, "`{path}` is not a Myriad data directory: {message}")
            }
            Error::UnsupportedFormat {
                path,
                found,
                supported,
            } => write!(
                f,
                "`{path}` is in on-disk format version {found}; this build reads version {supported}"
            ),
            Error::LogFailed(m) => write!(
                f,
                "the log failed and no further commits are acknowledged: {m}"
            ),
            Error::BackgroundThread { name, message } => {
                write!(f, "the background thread `{name}` {message}")
            }
        }
    }
}

impl std::error::Error for Error {}

impl Error {
    /// An `Io` error for `path`.
    pub(crate) fn io(path: &std::path::Path, e: &std::io::Error) -> Error {
        Error::Io {
            path: path.display().to_string(),
            message: e.to_string(),
        }
    }
}

/// Result alias used throughout the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;
