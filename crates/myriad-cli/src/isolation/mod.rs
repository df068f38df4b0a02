//! `myriad isolation-test SPEC...`: PostgreSQL-style isolation specs run against the engine.
//!
//! A spec (`spec.rs`, PostgreSQL's `specparse.y` syntax) names sessions and their steps; each
//! permutation runs on a fresh in-memory database: global setup, each session's setup, the
//! steps in permutation order — every session on its own thread with its own
//! `sql::Session`, driven by `runner.rs` — then the teardowns. The output (`format.rs`) is
//! text in PostgreSQL's style, compared with `--expected FILE` / `--expected-dir DIR` and
//! diffed (`diff.rs`), or one JSON object per step (`--format json`).
//!
//! After a statement fails inside `BEGIN ... COMMIT`, `sql::Session` keeps the block open
//! and aborted, as PostgreSQL does: it refuses the session's statements
//! (`Error::InFailedTransaction`, reported as `transaction_aborted`) until a
//! `COMMIT`/`ROLLBACK`, which then succeeds without effect. A step may hold several
//! statements; they run one at a time, so a step that fails part-way still prints the rows
//! of the statements before the failure.
//!
//! Exit status: 0 every spec ran (and matched its expected file); 1 a difference, a spec that
//! does not parse, an unreadable file, or a failed setup block; 2 a usage error or an engine
//! configuration this build does not support (`--protocol ermia-si`: "not supported").

mod diff;
mod format;
mod runner;
mod spec;

use clap::{Args, ValueEnum};
use myriad::sql::{Output, Session};
use myriad::{
    Config, Database, Error, GcPolicy, IndexPointers, Isolation, NonInline, PoCounters, Protocol,
    Timestamp, TimestampPolicy, Value, VersionStorage,
};
use runner::{Cell, Connector, Event, Executor, ResultSet, StepError, StepResult, Timing};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Mutex;
use std::time::Duration;

#[derive(Args, Debug)]
pub struct IsolationArgs {
    /// Spec files (PostgreSQL isolation-tester syntax).
    #[arg(required = true, value_name = "SPEC")]
    specs: Vec<PathBuf>,
    /// Concurrency-control protocol: mvocc, si, mvto, mv2pl, mv2pl-wait, ssn, ssi, ermia-si,
    /// ermia-ssi (multi-version) or silo, occ, 2pl, hybrid, healing (single-version; under healing
    /// a stored-procedure call heals a stale read at commit, every other transaction runs as
    /// OCC).
    #[arg(long, value_name = "P", default_value = "mvocc", value_parser = crate::args::parse_choice::<Protocol>)]
    protocol: Protocol,
    /// Version storage: n2o, o2n, time-travel, delta or single-version (default: the
    /// protocol's own, single-version for silo, occ, 2pl, hybrid and healing, n2o for the others).
    #[arg(long, value_name = "S", value_parser = crate::args::parse_choice::<VersionStorage>)]
    storage: Option<VersionStorage>,
    /// Garbage collection: txn, vacuum, coop (with --storage o2n), dead-zone (n2o or o2n) or
    /// none.
    #[arg(long, value_name = "POLICY", default_value = "txn", value_parser = crate::args::parse_choice::<GcPolicy>)]
    gc: GcPolicy,
    /// How secondary indexes point at rows: logical-tid, logical-pk or physical (with
    /// append-only storage).
    #[arg(long, value_name = "KIND", default_value = "logical-tid", value_parser = crate::args::parse_choice::<IndexPointers>)]
    index_pointers: IndexPointers,
    /// Where append-only storage keeps VARCHAR/BYTES attributes: inline, copy or shared
    /// (thesis §5.4.1; n2o/o2n storage with logical index pointers).
    #[arg(long, value_name = "HOW", default_value = "inline", value_parser = crate::args::parse_choice::<NonInline>)]
    non_inline: NonInline,
    /// Level of BEGIN without ISOLATION LEVEL and of autocommit statements: serializable, rr,
    /// si or rc. Default: the strongest level the protocol offers.
    #[arg(long, value_name = "LEVEL", value_parser = crate::args::parse_choice::<Isolation>)]
    isolation_default: Option<Isolation>,
    /// Timestamp source: global-counter, locked-counter or partial-order (POMVCC; with
    /// --protocol si, or mvocc at si or rc).
    #[arg(long, value_name = "SOURCE", default_value = "global-counter", value_parser = crate::args::parse_choice::<TimestampPolicy>)]
    timestamps: TimestampPolicy,
    /// partial-order: microseconds between the ticks that close a non-empty open commit
    /// timestamp (0: none, so only conflicts and floors make commits readable and the
    /// outputs are deterministic).
    #[arg(long, value_name = "US", default_value_t = 100)]
    po_tick_us: u64,
    /// partial-order: where the per-timestamp counts live: shared or slots.
    #[arg(long, value_name = "WHERE", default_value = "shared", value_parser = crate::args::parse_choice::<PoCounters>)]
    po_counters: PoCounters,
    /// Begin floors (`Database::begin_after`): `session`, each session begins after its own
    /// last commit and, when it connects, after the global setup; `ordered`, every
    /// transaction begins after every commit of an earlier step (the tester orders the
    /// steps, as an application orders dependent requests). The two differ only under
    /// partial-order timestamps, where `session` lets a session miss another's commit
    /// (HISTORICAL READ).
    #[arg(long, value_enum, default_value_t = Floors::Session)]
    floors: Floors,
    /// A step still running after this many milliseconds is reported as waiting (a step
    /// blocked on a lock is reported sooner: see --step-settle).
    #[arg(long, value_name = "MS", default_value_t = 200, value_parser = clap::value_parser!(u64).range(1..=3_600_000))]
    step_timeout: u64,
    /// A step the engine counts as blocked on a lock (mv2pl-wait) for this many milliseconds
    /// is reported as waiting, and waiting steps counted blocked this long stay waiting.
    #[arg(long, value_name = "MS", default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..=3_600_000))]
    step_settle: u64,
    /// mv2pl-wait: milliseconds a commit waits for an idle lock holder before it fails with
    /// lock_conflict (default 5000; `Config::lock_wait_timeout`).
    #[arg(long, value_name = "MS", value_parser = clap::value_parser!(u64).range(1..=3_600_000))]
    lock_wait_timeout: Option<u64>,
    /// Output: text (PostgreSQL's style) or json (one object per step per line).
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
    /// Compare the text output with FILE (one SPEC only); print a diff and exit 1 on a
    /// difference.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["expected_dir", "format"])]
    expected: Option<PathBuf>,
    /// Compare each SPEC's text output with DIR/NAME.out, NAME being the spec's file name
    /// without its extension.
    #[arg(long, value_name = "DIR", conflicts_with = "format")]
    expected_dir: Option<PathBuf>,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum Floors {
    Session,
    Ordered,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum Format {
    Text,
    Json,
}

/// Runs the subcommand.
pub fn run(a: IsolationArgs) -> ExitCode {
    if a.expected.is_some() && a.specs.len() > 1 {
        crate::usage_error(
            "--expected compares one SPEC; with several, use --expected-dir DIR".into(),
        );
    }
    let mut config = Config::new()
        .protocol(a.protocol)
        .version_storage(a.storage.unwrap_or(a.protocol.natural_storage()))
        .gc(a.gc)
        .index_pointers(a.index_pointers)
        .non_inline(a.non_inline)
        .timestamps(a.timestamps)
        .po_tick(Duration::from_micros(a.po_tick_us))
        .po_counters(a.po_counters)
        .isolation(crate::isolation_or_strongest(
            a.isolation_default,
            a.protocol,
        ));
    if let Some(ms) = a.lock_wait_timeout {
        config = config.lock_wait_timeout(Duration::from_millis(ms));
    }
    // Check the configuration once, before any spec runs.
    if let Err(e) = Database::open(config.clone()) {
        eprintln!("myriad: {e}");
        return ExitCode::from(2);
    }
    let timing = Timing {
        step_timeout: Duration::from_millis(a.step_timeout),
        settle: Duration::from_millis(a.step_settle),
    };
    let mut failed = false;
    for path in &a.specs {
        let expected = match (&a.expected, &a.expected_dir) {
            (Some(f), _) => Some(f.clone()),
            (None, Some(dir)) => Some(expected_in(dir, path)),
            (None, None) => None,
        };
        let header = a.specs.len() > 1 && expected.is_none() && a.format == Format::Text;
        if header {
            println!("==> {} <==", path.display());
        }
        if !run_spec(
            path,
            &config,
            a.floors,
            timing,
            a.format,
            expected.as_deref(),
        ) {
            failed = true;
        }
        if header {
            println!();
        }
    }
    if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

/// `DIR/NAME.out` for `.../NAME.spec`.
fn expected_in(dir: &Path, spec: &Path) -> PathBuf {
    let stem = spec.file_stem().unwrap_or(spec.as_os_str());
    let mut name = stem.to_os_string();
    name.push(".out");
    dir.join(name)
}

/// Runs one spec file; false if it failed (see the module comment).
fn run_spec(
    path: &Path,
    config: &Config,
    floors: Floors,
    timing: Timing,
    fmt: Format,
    expected: Option<&Path>,
) -> bool {
    let shown = path.display().to_string();
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("myriad: error: {shown}: {e}");
            return false;
        }
    };
    let spec = match spec::parse(&text) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("myriad: error: {shown}:{}: {}", e.line, e.message);
            return false;
        }
    };
    let perms = if spec.permutations.is_empty() {
        match spec::all_permutations(&spec) {
            Ok(p) => p,
            Err(m) => {
                eprintln!("myriad: error: {shown}: {m}");
                return false;
            }
        }
    } else {
        spec.permutations.clone()
    };
    // Text is printed as it comes unless it is to be compared.
    let stream = expected.is_none();
    let mut out = String::new();
    if fmt == Format::Text {
        out.push_str(&format::text_header(&spec));
    }
    let mut setup_ok = true;
    for (i, perm) in perms.iter().enumerate() {
        let number = i + 1;
        let db = match Database::open(config.clone()) {
            Ok(db) => db,
            Err(e) => {
                eprintln!("myriad: error: opening the database: {e}");
                return false;
            }
        };
        let names: Vec<&str> = perm.iter().map(|&r| spec.step(r).name.as_str()).collect();
        let mut sink = |e: Event<'_>| {
            match fmt {
                Format::Text => format::text_event(&mut out, &e),
                Format::Json => {
                    if let Some(line) = format::json_event(&shown, number, &names, &e) {
                        out.push_str(&line);
                        out.push('\n');
                    }
                }
            }
            if stream {
                let mut so = std::io::stdout().lock();
                let _ = so.write_all(out.as_bytes());
                let _ = so.flush();
                out.clear();
            }
        };
        let engine = Engine {
            db: &db,
            ordered: floors == Floors::Ordered,
            newest: Mutex::new(None),
            connected: Default::default(),
        };
        if !runner::run_permutation(&spec, number, perm, &engine, timing, &mut sink) {
            eprintln!("myriad: error: {shown}: a setup block failed in permutation {number}");
            setup_ok = false;
        }
    }
    let Some(exp_path) = expected else {
        return setup_ok;
    };
    let want = match std::fs::read_to_string(exp_path) {
        Ok(t) => t,
        Err(e) => {
            println!("FAILED  {shown}");
            eprintln!("myriad: error: expected output {}: {e}", exp_path.display());
            return false;
        }
    };
    match diff::unified(
        &want,
        &out,
        &exp_path.display().to_string(),
        &format!("{shown} (actual)"),
    ) {
        None => {
            println!("ok      {shown}");
            setup_ok
        }
        Some(d) => {
            println!("FAILED  {shown}");
            print!("{d}");
            false
        }
    }
}

/// The engine behind the runner: every session is a `sql::Session` on one database.
/// `newest` is the newest session floor published (`--floors`): by every session under
/// `ordered`; under `session` by the global connection only (the first to connect, which
/// runs the global setup before any session connects), so a session starts after the
/// setup and then follows its own commits alone.
struct Engine<'db> {
    db: &'db Database,
    ordered: bool,
    newest: Mutex<Option<Timestamp>>,
    connected: std::sync::atomic::AtomicBool,
}

impl Engine<'_> {
    fn newest(&self) -> Option<Timestamp> {
        *self.newest.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Connector for Engine<'_> {
    fn lock_waits(&self) -> Option<usize> {
        Some(self.db.lock_waits())
    }

    fn connect(&self) -> Box<dyn Executor + '_> {
        let mut session = Session::new(self.db);
        session.set_floor(self.newest());
        let global = !self
            .connected
            .swap(true, std::sync::atomic::Ordering::SeqCst);
        Box::new(SqlExecutor {
            session,
            engine: self,
            publishes: global || self.ordered,
        })
    }
}

struct SqlExecutor<'e> {
    session: Session<'e>,
    engine: &'e Engine<'e>,
    /// Whether its commits move `Engine::newest`.
    publishes: bool,
}

impl Executor for SqlExecutor<'_> {
    fn execute(&mut self, sql: &str) -> StepResult {
        if self.engine.ordered {
            let f = self.session.floor().max(self.engine.newest());
            self.session.set_floor(f);
        }
        let r = self.run(sql);
        if self.publishes {
            let mut newest = self.engine.newest.lock().unwrap_or_else(|p| p.into_inner());
            *newest = (*newest).max(self.session.floor());
        }
        r
    }
}

impl SqlExecutor<'_> {
    fn run(&mut self, sql: &str) -> StepResult {
        let mut r = StepResult::default();
        for stmt in split_statements(sql) {
            match self.session.execute(stmt.text) {
                Ok(outs) => {
                    for o in outs {
                        if let Output::Rows { columns, rows } = o {
                            r.results.push(ResultSet {
                                columns,
                                rows: rows
                                    .into_iter()
                                    .map(|row| row.into_iter().map(cell).collect())
                                    .collect(),
                            });
                        }
                    }
                }
                Err(e) => {
                    r.error = Some(step_error(&e));
                    return r;
                }
            }
        }
        r
    }
}

fn cell(v: Value) -> Cell {
    match v {
        Value::Int(i) => Cell::Int(i),
        Value::Float(x) => Cell::Float(x),
        Value::Str(s) => Cell::Text(s),
        v => Cell::Text(v.to_string()),
    }
}

fn step_error(e: &Error) -> StepError {
    let (kind, reason) = error_kind(e);
    StepError {
        kind,
        reason,
        message: e.to_string(),
    }
}

/// A stable snake_case name for each error class, and the abort reason of aborts.
fn error_kind(e: &Error) -> (&'static str, Option<&'static str>) {
    let kind = match e {
        Error::SerializationFailure(r) => return ("serialization_failure", Some(r.name())),
        Error::RetriesExhausted { last, .. } => return ("retries_exhausted", Some(last.name())),
        Error::UnknownTable(_) => "unknown_table",
        Error::UnknownColumn { .. } => "unknown_column",
        Error::UnknownIndex { .. } => "unknown_index",
        Error::AlreadyExists(_) => "already_exists",
        Error::InvalidSchema(_) => "invalid_schema",
        Error::TypeMismatch { .. } => "type_mismatch",
        Error::ValueTooLong { .. } => "value_too_long",
        Error::KeyArity { .. } => "key_arity",
        Error::RowArity { .. } => "row_arity",
        Error::DuplicateKey { .. } => "duplicate_key",
        Error::NotFound { .. } => "not_found",
        Error::PrimaryKeyUpdate { .. } => "primary_key_update",
        Error::ReadOnlyTransaction => "read_only_transaction",
        Error::TransactionClosed => "transaction_closed",
        Error::InFailedTransaction => "transaction_aborted",
        Error::Cancelled(_) => "cancelled",
        Error::TooManyTransactions { .. } => "too_many_transactions",
        Error::InvalidConfig(_) => "invalid_config",
        Error::Unsupported(_) => "unsupported",
        Error::Sql { .. } => "sql",
        Error::Busy(_) => "busy",
        Error::UnknownProcedure(_) => "unknown_procedure",
        Error::ProcedureArguments { .. } => "procedure_arguments",
        Error::ProcedureAbort { .. } => "procedure_abort",
        _ => "other",
    };
    (kind, None)
}

/// One statement of a step and its first word.
#[derive(Debug, PartialEq)]
struct Stmt<'a> {
    text: &'a str,
    /// Only the splitter's tests read it (they check where each statement starts).
    #[cfg_attr(not(test), allow(dead_code))]
    first_word: &'a str,
}

/// Splits SQL at `;` outside string literals, quoted identifiers, dollar-quoted strings and
/// comments. Pieces with nothing but blanks and comments are dropped. (Only statement
/// boundaries are found here; `sql::Session` parses each piece.)
fn split_statements(sql: &str) -> Vec<Stmt<'_>> {
    let b = sql.as_bytes();
    let mut out = Vec::new();
    let mut start = 0;
    let mut first: Option<(usize, usize)> = None;
    let mut i = 0;
    let mut push = |start: usize, end: usize, first: &mut Option<(usize, usize)>| {
        if let Some((f0, f1)) = first.take() {
            out.push(Stmt {
                text: &sql[start..end],
                first_word: &sql[f0..f1],
            });
        }
    };
    while i < b.len() {
        match b[i] {
            q @ (b'\'' | b'"') => {
                first.get_or_insert((i, i));
                i += 1;
                while i < b.len() && b[i] != q {
                    i += 1;
                }
                i += 1;
            }
            // PostgreSQL dollar quoting (`$$ ... $$`, `$tag$ ... $tag$`), as procedure
            // bodies use.
            b'$' if dollar_tag(b, i).is_some() => {
                first.get_or_insert((i, i));
                let tag = dollar_tag(b, i).unwrap_or(&[]);
                i += tag.len();
                while i < b.len() && !b[i..].starts_with(tag) {
                    i += 1;
                }
                i += tag.len();
            }
            b'-' if b.get(i + 1) == Some(&b'-') => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                i += 2;
                while i < b.len() && !(b[i] == b'*' && b.get(i + 1) == Some(&b'/')) {
                    i += 1;
                }
                i += 2;
            }
            b';' => {
                push(start, i + 1, &mut first);
                i += 1;
                start = i;
            }
            c if c.is_ascii_whitespace() => i += 1,
            c => {
                if first.is_none() {
                    let f0 = i;
                    let mut f1 = i;
                    if c.is_ascii_alphabetic() {
                        while f1 < b.len() && b[f1].is_ascii_alphabetic() {
                            f1 += 1;
                        }
                    }
                    first = Some((f0, f1));
                }
                i += 1;
            }
        }
    }
    push(start, b.len(), &mut first);
    out
}

/// The opening `$tag$` of a dollar-quoted string at `i`, if there is one.
fn dollar_tag(b: &[u8], i: usize) -> Option<&[u8]> {
    let mut j = i + 1;
    while j < b.len() && (b[j].is_ascii_alphanumeric() || b[j] == b'_') {
        j += 1;
    }
    (b.get(j) == Some(&b'$') && !b.get(i + 1).is_some_and(u8::is_ascii_digit)).then(|| &b[i..=j])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(s: &str) -> Vec<(&str, &str)> {
        split_statements(s)
            .into_iter()
            .map(|s| (s.text.trim(), s.first_word))
            .collect()
    }

    #[test]
    fn statements_split_outside_strings_and_comments() {
        assert_eq!(split(" BEGIN; "), [("BEGIN;", "BEGIN")]);
        assert_eq!(
            split("UPDATE t SET v = 'a;b' WHERE k = 1; commit"),
            [
                ("UPDATE t SET v = 'a;b' WHERE k = 1;", "UPDATE"),
                ("commit", "commit")
            ]
        );
        assert_eq!(
            split("-- c;\n/* x; */ ROLLBACK;;  -- tail;"),
            [("-- c;\n/* x; */ ROLLBACK;", "ROLLBACK")]
        );
        assert_eq!(
            split("SELECT \"a;\" FROM t"),
            [("SELECT \"a;\" FROM t", "SELECT")]
        );
        assert!(split("  -- only a comment\n").is_empty());
        assert_eq!(
            split("CREATE PROCEDURE p() AS $$ a; b; $$; CALL p()"),
            [
                ("CREATE PROCEDURE p() AS $$ a; b; $$;", "CREATE"),
                ("CALL p()", "CALL")
            ]
        );
        assert_eq!(split("SELECT $x$;$y$;$x$; $1").len(), 2);
        assert_eq!(split("SELECT $$ never closed; x").len(), 1);
        // Unterminated quotes and comments do not panic.
        assert_eq!(split("SELECT 'x").len(), 1);
        assert_eq!(split("/* x").len(), 0);
    }

    fn engine(db: &Database) -> Engine<'_> {
        Engine {
            db,
            ordered: false,
            newest: Mutex::new(None),
            connected: Default::default(),
        }
    }

    #[test]
    fn after_an_error_in_a_block_statements_fail_until_it_ends() {
        let db = Database::open(Config::new()).unwrap();
        let e = engine(&db);
        let mut a = e.connect();
        let mut b = e.connect();
        let ok = |r: StepResult| assert!(r.error.is_none(), "{r:?}");
        ok(a.execute("CREATE TABLE t (k INT PRIMARY KEY, v INT); INSERT INTO t VALUES (1, 0);"));
        ok(a.execute("BEGIN; UPDATE t SET v = 1 WHERE k = 1;"));
        ok(b.execute("BEGIN"));
        let r = b.execute("UPDATE t SET v = 2 WHERE k = 1");
        let e = r.error.unwrap();
        assert_eq!(
            (e.kind, e.reason),
            ("serialization_failure", Some("write_write_conflict"))
        );
        assert_eq!(e.message, "serialization failure: write_write_conflict");
        // Not run as an autocommit statement.
        let e = b.execute("SELECT v FROM t WHERE k = 1").error.unwrap();
        assert_eq!(e.kind, "transaction_aborted");
        ok(b.execute("COMMIT"));
        ok(a.execute("COMMIT"));
        let r = b.execute("SELECT v FROM t WHERE k = 1; SELECT count(*) FROM t");
        assert_eq!(r.results.len(), 2);
        assert_eq!(r.results[0].rows, [[Cell::Int(1)]]);
        // A failed COMMIT ends the block: nothing is refused afterwards.
        ok(a.execute("BEGIN; SELECT v FROM t WHERE k = 1"));
        ok(b.execute("UPDATE t SET v = 5 WHERE k = 1"));
        ok(a.execute("INSERT INTO t VALUES (2, 0)"));
        let e = a.execute("COMMIT").error.unwrap();
        assert_eq!(e.reason, Some("read_validation"));
        ok(a.execute("SELECT v FROM t WHERE k = 1"));
        ok(a.execute("BEGIN"));
        let e = a.execute("INSERT INTO t VALUES (1, 0)").error.unwrap();
        assert_eq!(e.kind, "duplicate_key");
        ok(a.execute("ROLLBACK"));
        // Rows of the statements before a failure are kept.
        let r = a.execute("SELECT v FROM t WHERE k = 1; SELECT nope FROM t");
        assert_eq!(r.results.len(), 1);
        assert_eq!(r.error.unwrap().kind, "sql");
    }
}
