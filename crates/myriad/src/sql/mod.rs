//! The statement language (issue 3, first part; issue 32): a SQL subset parsed with
//! `sqlparser` and run on the engine's transaction API by a [`Session`].
//!
//! Supported: `CREATE TABLE` (INT/INTEGER/BIGINT, DOUBLE/REAL/FLOAT, VARCHAR(n) with n ≥ 1,
//! TEXT, single- or multi-column `PRIMARY KEY`, kept in an ordered index unless `USING
//! HASH`), `INSERT ... VALUES` (several rows, optional column list naming every column,
//! `ON CONFLICT [(cols) | ON CONSTRAINT index] DO NOTHING`, `ON CONFLICT (primary key) DO
//! UPDATE SET ... [WHERE ...]` with `excluded.col`), single-table `SELECT` (`*` or
//! expressions, `WHERE` with comparisons, AND/OR/NOT, arithmetic including `%`, `||`,
//! `[NOT] IN (...)`, `ORDER BY` an ordered index ASC or DESC, `LIMIT`, and
//! `count(*)`/`count`/`sum`/`min`/`max` without `GROUP BY`), `UPDATE ... SET ... WHERE`,
//! `DELETE ... WHERE`, `RETURNING` on `INSERT`/`UPDATE`/`DELETE` (the rows as written; for
//! `DELETE` as they were), `BEGIN|START TRANSACTION [ISOLATION LEVEL ...] [READ ONLY]`,
//! `COMMIT`, `ROLLBACK`, `CREATE [UNIQUE] INDEX`, `CREATE PROCEDURE` and `CALL` (with
//! `crate::procedure`). An integer literal is an INT (`-9223372036854775808` too); one out of
//! range is an error, a decimal point or exponent makes a DOUBLE.
//!
//! Every clause `sqlparser` accepts is either run or refused with an error naming it, never
//! ignored. Refused: table aliases and hints, joins,
//! subqueries, `GROUP BY`, `HAVING`, `DISTINCT`, `OFFSET`, `WITH`, locking clauses, `NULL`,
//! `ORDER BY` without an ordered index giving that order. A statement nested deeper than
//! [`MAX_NESTING`] (operators and parentheses, counted on its tokens) is refused
//! before it is parsed, since the trees of such statements overflow the stack.
//!
//! Transactions follow PostgreSQL (see [`Session`]): a session begins every transaction
//! after its own last commit (its floor, `Session::floor`), so it reads its own writes under
//! `partial-order` timestamps too; a statement outside `BEGIN` runs as its
//! own transaction; a failed statement inside `BEGIN` aborts the transaction and the block
//! refuses statements until `COMMIT`/`ROLLBACK`. A running statement can be cancelled
//! ([`CancelHandle`]) or time out ([`Session::set_statement_timeout`]); `cancel` says where
//! that is checked.
//!
//! The planner uses the primary key when `WHERE` fixes every key column by equality with
//! constants (a conjunct per column), a secondary index whose columns `WHERE` fixes likewise,
//! a range of an ordered index when `WHERE` bounds its leading column (`k > 3 AND k <= 9`)
//! or for `ORDER BY`, and otherwise a full scan (`Transaction::scan_table`); under
//! Serializable each scan is protected against phantoms over the range it covers. Key
//! expressions may read parameters (`$1`, [`Session::execute_with`]) and, in procedures,
//! variables.

use crate::error::{Error, Result};
use crate::procedure::parse::Item;
pub use crate::query::cancel::CancelHandle;
use crate::query::expr::{compile, compile_in, eval_in, Scope, Ty, E, V};
pub use crate::query::nesting::MAX_NESTING;
use crate::query::{
    at_span, coerce, column_type, condition, name_of, ordered_index, sql_error, visit_plan, Access,
    Agg,
};
use crate::query::{cancel, expr};
pub use crate::query::{SqlPos, TEXT_MAX_LEN};
use crate::schema::{IndexKind, TableSchema};
use crate::storage::TableRef;
use crate::timestamp::Timestamp;
use crate::txn::{Transaction, TxnOptions};
use crate::value::{RowMut, RowRef, Value, ValueRef};
use crate::{Database, Isolation};
use sqlparser::ast::{
    self, ColumnOption, Expr, FromTable, ObjectName, SelectItem, SetExpr, Spanned, Statement,
    TableConstraint, TableFactor, TableObject, TransactionAccessMode, TransactionIsolationLevel,
    TransactionMode,
};
use std::time::{Duration, Instant};

/// The `$1, $2, ...` parameters of [`Session::execute_with`]: names and types for the
/// compiler, values for the evaluator.
#[derive(Clone, Copy, Default)]
struct Params<'a> {
    names: &'a [(String, Ty)],
    vals: &'a [V],
}

impl Params<'_> {
    fn compile(&self, e: &Expr, table: Option<&TableSchema>) -> Result<(E, Ty)> {
        compile_in(
            e,
            Scope {
                table,
                vars: self.names,
            },
        )
    }
    fn eval(&self, e: &E, row: Option<RowRef<'_>>) -> Result<V> {
        eval_in(e, row, self.vals)
    }
}

/// What a statement produced.
#[derive(Clone, Debug, PartialEq)]
pub enum Output {
    /// A statement without rows; the tag says what it did (`INSERT 3`, `BEGIN`, ...).
    Done(String),
    /// Result rows of a `SELECT`, values in select-list order.
    Rows {
        /// The result's column names, in order.
        columns: Vec<String>,
        /// One entry per row, values in the order of `columns`.
        rows: Vec<Vec<Value>>,
    },
}

/// A SQL session on a database: at most one open explicit transaction.
///
/// Errors follow PostgreSQL. Outside `BEGIN` a statement is its own transaction, and a
/// failed statement changes nothing. Inside `BEGIN ... COMMIT`, any failed statement (a
/// duplicate key, a type error, a statement that does not parse, a cancel or timeout) rolls
/// the whole transaction back at once, and the block stays open in the *aborted* state: every
/// further statement fails with [`Error::InFailedTransaction`] until `COMMIT` or `ROLLBACK`,
/// both of which end the block and answer `ROLLBACK`. Nothing runs in autocommit behind the
/// user's back.
pub struct Session<'db> {
    db: &'db Database,
    txn: Option<Transaction<'db>>,
    /// A statement failed inside `BEGIN`: the transaction is rolled back, the block is open.
    aborted: bool,
    /// Parameters of the statements being run (`execute_with`).
    names: Vec<(String, Ty)>,
    vals: Vec<V>,
    cancel: CancelHandle,
    statement_timeout: Option<Duration>,
    /// The session floor: the commit timestamp of the session's last commit. Every
    /// transaction the session begins starts after it (`Database::begin_after`), so the
    /// session reads its own writes under `partial-order` timestamps too.
    floor: Option<Timestamp>,
}

impl<'db> Session<'db> {
    /// A session on `db` with no open transaction and no statement timeout.
    pub fn new(db: &'db Database) -> Self {
        Session {
            db,
            txn: None,
            aborted: false,
            names: Vec::new(),
            vals: Vec::new(),
            cancel: CancelHandle::default(),
            statement_timeout: None,
            floor: None,
        }
    }

    /// The session floor (see `Session`'s docs): the commit timestamp of its last commit.
    pub fn floor(&self) -> Option<Timestamp> {
        self.floor
    }

    /// Replaces the session floor: the transactions it begins from now on see every commit
    /// at or below `floor` (a timestamp a commit returned; `Error::FloorAhead` at the next
    /// begin otherwise). A client that orders requests across sessions passes the floor
    /// of one to the next.
    pub fn set_floor(&mut self, floor: Option<Timestamp>) {
        self.floor = floor;
    }

    /// Begins a transaction after the session floor.
    fn start(&self, opts: TxnOptions) -> Result<Transaction<'db>> {
        match self.floor {
            Some(f) => self.db.begin_after(opts, f),
            None => self.db.begin_with(opts),
        }
    }

    /// Commits `tx` and moves the session floor to its commit timestamp.
    fn finish(&mut self, tx: Transaction<'db>) -> Result<()> {
        let ts = tx.commit_returning_ts()?;
        self.floor = Some(self.floor.map_or(ts, |f| f.max(ts)));
        Ok(())
    }

    /// Is a `BEGIN` block open (running, or aborted by a failed statement)?
    pub fn in_transaction(&self) -> bool {
        self.txn.is_some() || self.aborted
    }

    /// Is the open `BEGIN` block aborted (statements refused until `COMMIT`/`ROLLBACK`)?
    pub fn transaction_aborted(&self) -> bool {
        self.aborted
    }

    /// A handle that cancels the statement this session is running, from another thread.
    pub fn cancel_handle(&self) -> CancelHandle {
        self.cancel.clone()
    }

    /// Cancels each statement that runs longer than `limit` (`None`: no limit) with
    /// [`Error::Cancelled`], like PostgreSQL's `statement_timeout`.
    pub fn set_statement_timeout(&mut self, limit: Option<Duration>) {
        self.statement_timeout = limit.filter(|d| !d.is_zero());
    }

    /// The statement timeout set by `set_statement_timeout` (`None`: no limit).
    pub fn statement_timeout(&self) -> Option<Duration> {
        self.statement_timeout
    }

    /// Parses and runs every statement of `sql` in order, stopping at the first error (the
    /// statements before it keep their effect; inside `BEGIN` the error aborts the
    /// transaction, see [`Session`]).
    pub fn execute(&mut self, sql: &str) -> Result<Vec<Output>> {
        self.execute_with(sql, &[])
    }

    /// [`Session::execute`] with parameters: `$1` is `params[0]`, and so on, usable wherever
    /// a value is (in `WHERE`, `SET`, `VALUES`, the select list, `LIMIT`); a parameter's type
    /// is its value's.
    pub fn execute_with(&mut self, sql: &str, params: &[Value]) -> Result<Vec<Output>> {
        let mut out = Vec::new();
        for r in self.run_script(sql, params, true) {
            out.push(r?);
        }
        Ok(out)
    }

    /// Runs every statement of `sql` like a `psql` script: an error does not stop the
    /// statements after it (inside an aborted `BEGIN` block they are refused, see
    /// [`Session`]). One result per statement; a script that does not parse runs nothing and
    /// gives that one error.
    pub fn execute_each(&mut self, sql: &str) -> Vec<Result<Output>> {
        self.run_script(sql, &[], false)
    }

    fn run_script(&mut self, sql: &str, params: &[Value], stop: bool) -> Vec<Result<Output>> {
        self.cancel.clear();
        let items = match self
            .bind_params(params)
            .and_then(|()| crate::procedure::parse::script(sql))
        {
            Ok(items) => items,
            Err(e) => return vec![Err(self.failed(e))],
        };
        let mut out = Vec::with_capacity(items.len());
        for item in &items {
            let r = self.item(item).map_err(|e| self.failed(e));
            let failed = r.is_err();
            out.push(r);
            if failed && stop {
                break;
            }
        }
        out
    }

    fn bind_params(&mut self, params: &[Value]) -> Result<()> {
        self.names.clear();
        self.vals.clear();
        for (i, v) in params.iter().enumerate() {
            let ty = match v {
                Value::Int(_) => Ty::Int,
                Value::Float(_) => Ty::Float,
                Value::Str(_) => Ty::Str,
                Value::Bytes(_) => {
                    return Err(sql_error(
                        SqlPos::default(),
                        format!(
                            "parameter ${}: BYTES values are not supported in SQL",
                            i + 1
                        ),
                    ))
                }
            };
            self.names.push((format!("${}", i + 1), ty));
            self.vals.push(V::Val(v.clone()));
        }
        Ok(())
    }

    /// An error inside an open block aborts its transaction (PostgreSQL's behaviour).
    fn failed(&mut self, e: Error) -> Error {
        if let Some(tx) = self.txn.take() {
            tx.abort();
            self.aborted = true;
        }
        e
    }

    /// Runs one statement under the session's cancel handle and timeout.
    fn item(&mut self, item: &Item) -> Result<Output> {
        if self.aborted {
            let ends = matches!(
                item,
                Item::Sql(s) if matches!(s.as_ref(), Statement::Commit { .. } | Statement::Rollback { .. })
            );
            if !ends {
                return Err(Error::InFailedTransaction);
            }
            self.aborted = false;
            return Ok(Output::Done("ROLLBACK".into()));
        }
        let _watch = cancel::watch(cancel::Watch {
            handle: self.cancel.clone(),
            deadline: self.statement_timeout.map(|d| (Instant::now() + d, d)),
        });
        cancel::check()?;
        match item {
            Item::Sql(s) => self.statement(s),
            Item::Procedure(d, replace) => self.create_procedure(d, *replace),
        }
    }

    fn statement(&mut self, s: &Statement) -> Result<Output> {
        match s {
            Statement::StartTransaction { modes, .. } => self.begin(modes, s),
            Statement::Commit { .. } => match self.txn.take() {
                Some(tx) => self.finish(tx).map(|_| Output::Done("COMMIT".into())),
                None => Err(sql_error(at_span(s.span()), "COMMIT without BEGIN".into())),
            },
            Statement::Rollback { .. } => match self.txn.take() {
                Some(tx) => {
                    tx.abort();
                    Ok(Output::Done("ROLLBACK".into()))
                }
                None => Err(sql_error(
                    at_span(s.span()),
                    "ROLLBACK without BEGIN".into(),
                )),
            },
            Statement::CreateTable(ct) => {
                if self.txn.is_some() {
                    return Err(sql_error(
                        at_span(s.span()),
                        "CREATE TABLE inside a transaction is not supported".into(),
                    ));
                }
                // Any clause beyond the name, columns, constraints and IF NOT EXISTS makes
                // the statement differ from the plain one built from those.
                let plain =
                    ast::helpers::stmt_create_table::CreateTableBuilder::new(ct.name.clone())
                        .if_not_exists(ct.if_not_exists)
                        .columns(ct.columns.clone())
                        .constraints(ct.constraints.clone())
                        .build();
                if plain != *ct {
                    return Err(sql_error(
                        at_span(s.span()),
                        format!(
                            "only CREATE TABLE [IF NOT EXISTS] name (columns, constraints) is supported: {}",
                            first_words(s)
                        ),
                    ));
                }
                if ct.if_not_exists && self.db.table(&name_of(&ct.name)?).is_ok() {
                    return Ok(Output::Done("CREATE TABLE".into()));
                }
                self.db.create_table_from(table_schema(ct)?)?;
                Ok(Output::Done("CREATE TABLE".into()))
            }
            Statement::CreateIndex(ci) => self.create_index(ci, at_span(s.span())),
            Statement::Call(f) => self.call(f),
            _ => {
                let (names, vals) = (
                    std::mem::take(&mut self.names),
                    std::mem::take(&mut self.vals),
                );
                let p = Params {
                    names: &names,
                    vals: &vals,
                };
                let r = self.in_txn(|db, tx| dml(db, tx, s, p));
                (self.names, self.vals) = (names, vals);
                r
            }
        }
    }

    /// `CREATE [UNIQUE] INDEX [name] ON table [USING BTREE|HASH] (col, ...)`
    /// (see `Database::create_index`). B-tree by default.
    fn create_index(&mut self, ci: &ast::CreateIndex, at: SqlPos) -> Result<Output> {
        if self.txn.is_some() {
            return Err(sql_error(
                at,
                "CREATE INDEX inside a transaction is not supported".into(),
            ));
        }
        if ci.concurrently
            || ci.predicate.is_some()
            || !ci.include.is_empty()
            || !ci.with.is_empty()
            || ci.nulls_distinct.is_some()
        {
            return Err(sql_error(
                at,
                "CREATE INDEX with CONCURRENTLY, WHERE, INCLUDE, WITH or NULLS is not supported"
                    .into(),
            ));
        }
        let table = name_of(&ci.table_name)?;
        let kind = match &ci.using {
            None | Some(ast::IndexType::BTree) => IndexKind::Ordered,
            Some(ast::IndexType::Hash) => IndexKind::Hash,
            Some(other) => {
                return Err(sql_error(
                    at,
                    format!("index type {other} is not supported (BTREE or HASH)"),
                ))
            }
        };
        let mut cols = Vec::new();
        for c in &ci.columns {
            match &c.column.expr {
                Expr::Identifier(id) if c.operator_class.is_none() => cols.push(id.value.clone()),
                other => {
                    return Err(sql_error(
                        at_span(other.span()),
                        format!("only plain columns can be indexed, not {other}"),
                    ))
                }
            }
        }
        let name = match &ci.name {
            Some(n) => name_of(n)?,
            None => format!("{table}_{}_idx", cols.join("_")),
        };
        let t = self.db.table(&table).map_err(|_| {
            sql_error(
                at_span(ci.table_name.span()),
                format!("unknown table `{table}`"),
            )
        })?;
        for c in &cols {
            if t.schema.column_index(c).is_err() {
                return Err(sql_error(
                    at,
                    format!("table `{table}` has no column `{c}`"),
                ));
            }
        }
        if ci.if_not_exists && t.schema.index_position(&name).is_ok() {
            return Ok(Output::Done("CREATE INDEX".into()));
        }
        let refs: Vec<&str> = cols.iter().map(String::as_str).collect();
        self.db
            .create_index(&table, &name, &refs, kind, ci.unique)?;
        Ok(Output::Done("CREATE INDEX".into()))
    }

    fn create_procedure(&mut self, d: &crate::procedure::Def, replace: bool) -> Result<Output> {
        if self.txn.is_some() {
            return Err(sql_error(
                d.at,
                "CREATE PROCEDURE inside a transaction is not supported".into(),
            ));
        }
        self.db.create_procedure_from(d, replace)?;
        Ok(Output::Done(format!("CREATE PROCEDURE {}", d.name)))
    }

    /// `CALL name(args)`: in the open transaction, or as a transaction of its own. The
    /// arguments are constants; `ARRAY[...]` passes an array.
    fn call(&mut self, f: &ast::Function) -> Result<Output> {
        let at = at_span(f.span());
        let proc = self.db.procedure(&name_of(&f.name)?)?;
        let exprs: Vec<&Expr> = match &f.args {
            ast::FunctionArguments::None => Vec::new(),
            ast::FunctionArguments::List(l) => l
                .args
                .iter()
                .map(|a| match a {
                    ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(x)) => Ok(x),
                    other => Err(sql_error(
                        at_span(other.span()),
                        format!("unsupported argument: {other}"),
                    )),
                })
                .collect::<Result<_>>()?,
            ast::FunctionArguments::Subquery(_) => {
                return Err(sql_error(at, "CALL arguments must be values".into()))
            }
        };
        let p = Params {
            names: &self.names,
            vals: &self.vals,
        };
        let constant = |e: &Expr| -> Result<Value> {
            p.eval(&p.compile(e, None)?.0, None)?
                .stored(at_span(e.span()))
        };
        let mut args = Vec::with_capacity(exprs.len());
        for e in exprs {
            args.push(match e {
                Expr::Array(a) => crate::procedure::Arg::Array(
                    a.elem.iter().map(constant).collect::<Result<_>>()?,
                ),
                e => crate::procedure::Arg::Value(constant(e)?),
            });
        }
        let values = self.in_txn(|_, tx| {
            proc.execute(tx, &args).map(|v| Output::Rows {
                columns: Vec::new(),
                rows: vec![v],
            })
        })?;
        Ok(match values {
            Output::Rows { rows, .. } if rows.first().is_some_and(|r| !r.is_empty()) => {
                let n = rows[0].len();
                Output::Rows {
                    columns: (1..=n)
                        .map(|i| {
                            if n == 1 {
                                "return".into()
                            } else {
                                format!("return{i}")
                            }
                        })
                        .collect(),
                    rows,
                }
            }
            _ => Output::Done("CALL".into()),
        })
    }

    fn begin(&mut self, modes: &[TransactionMode], s: &Statement) -> Result<Output> {
        if self.txn.is_some() {
            return Err(sql_error(
                at_span(s.span()),
                "a transaction is already open".into(),
            ));
        }
        let mut opts = TxnOptions {
            isolation: self.db.config().get_isolation(),
            read_only: false,
        };
        for m in modes {
            match m {
                TransactionMode::AccessMode(a) => {
                    opts.read_only = *a == TransactionAccessMode::ReadOnly
                }
                TransactionMode::IsolationLevel(l) => {
                    opts.isolation = match l {
                        TransactionIsolationLevel::ReadCommitted => Isolation::ReadCommitted,
                        TransactionIsolationLevel::RepeatableRead => Isolation::RepeatableRead,
                        TransactionIsolationLevel::Snapshot => Isolation::Snapshot,
                        TransactionIsolationLevel::Serializable => Isolation::Serializable,
                        TransactionIsolationLevel::ReadUncommitted => return Err(sql_error(
                            at_span(s.span()),
                            "READ UNCOMMITTED is not offered (the weakest level is READ COMMITTED)"
                                .into(),
                        )),
                    }
                }
            }
        }
        self.txn = Some(self.start(opts)?);
        Ok(Output::Done("BEGIN".into()))
    }

    /// Runs `f` in the open transaction, or in a transaction of its own that commits.
    fn in_txn(
        &mut self,
        f: impl FnOnce(&Database, &mut Transaction<'db>) -> Result<Output>,
    ) -> Result<Output> {
        match self.txn.as_mut() {
            Some(tx) => f(self.db, tx),
            None => {
                let opts = TxnOptions {
                    isolation: self.db.config().get_isolation(),
                    read_only: false,
                };
                let mut tx = self.start(opts)?;
                let out = f(self.db, &mut tx)?;
                self.finish(tx)?;
                Ok(out)
            }
        }
    }
}

fn table_schema(ct: &ast::CreateTable) -> Result<TableSchema> {
    let name = name_of(&ct.name)?;
    let mut b = TableSchema::new(&name);
    let mut pk: Vec<String> = Vec::new();
    for c in &ct.columns {
        b = b.column(&c.name.value, column_type(&c.data_type, at_span(c.span()))?);
        for o in &c.options {
            match &o.option {
                ColumnOption::PrimaryKey(_) => pk.push(c.name.value.clone()),
                ColumnOption::NotNull => {}
                other => {
                    return Err(sql_error(
                        at_span(c.span()),
                        format!("column option {other} is not supported"),
                    ))
                }
            }
        }
    }
    let mut pk_kind = IndexKind::Ordered;
    for k in &ct.constraints {
        match k {
            TableConstraint::PrimaryKey(p) if pk.is_empty() => {
                let using =
                    p.index_type
                        .iter()
                        .chain(p.index_options.iter().filter_map(|o| match o {
                            ast::IndexOption::Using(t) => Some(t),
                            _ => None,
                        }));
                for t in using {
                    pk_kind = match t {
                        ast::IndexType::BTree => IndexKind::Ordered,
                        ast::IndexType::Hash => IndexKind::Hash,
                        other => {
                            return Err(sql_error(
                                at_span(k.span()),
                                format!(
                                "primary key index type {other} is not supported (BTREE or HASH)"
                            ),
                            ))
                        }
                    };
                }
                for ic in &p.columns {
                    match &ic.column.expr {
                        Expr::Identifier(id) => pk.push(id.value.clone()),
                        e => {
                            return Err(sql_error(
                                at_span(e.span()),
                                "a primary key lists column names".into(),
                            ))
                        }
                    }
                }
            }
            other => {
                return Err(sql_error(
                    at_span(other.span()),
                    format!("table constraint not supported: {other}"),
                ))
            }
        }
    }
    if pk.is_empty() {
        return Err(sql_error(
            at_span(ct.name.span()),
            format!("table `{name}` needs a PRIMARY KEY"),
        ));
    }
    let cols: Vec<&str> = pk.iter().map(String::as_str).collect();
    // Ordered unless asked otherwise, so that key ranges and ORDER BY on the key can use it;
    // `PRIMARY KEY (cols) USING HASH` makes a hash index, for
    // tables read only by point keys.
    b.primary_key_with(&cols, pk_kind).build()
}

/// The table a DML statement names.
fn table_of(db: &Database, f: &TableFactor) -> Result<TableRef> {
    match f {
        TableFactor::Table {
            name,
            alias,
            args,
            with_hints,
            version,
            with_ordinality,
            partitions,
            json_path,
            sample,
            index_hints,
        } => {
            if alias.is_some()
                || args.is_some()
                || !with_hints.is_empty()
                || version.is_some()
                || *with_ordinality
                || !partitions.is_empty()
                || json_path.is_some()
                || sample.is_some()
                || !index_hints.is_empty()
            {
                return Err(sql_error(
                    at_span(f.span()),
                    format!("only a plain table name is supported here (no alias, hints, sample or arguments): {f}"),
                ));
            }
            db.table(&name_of(name)?)
        }
        other => Err(sql_error(
            at_span(other.span()),
            format!("only a plain table can be read here: {other}"),
        )),
    }
}

fn single_table(db: &Database, from: &[ast::TableWithJoins], at: SqlPos) -> Result<TableRef> {
    match from {
        [t] if t.joins.is_empty() => table_of(db, &t.relation),
        [] => Err(sql_error(
            at,
            "a FROM clause naming one table is required".into(),
        )),
        _ => Err(sql_error(
            at,
            "joins and several tables are not supported".into(),
        )),
    }
}

fn dml(db: &Database, tx: &mut Transaction<'_>, s: &Statement, p: Params<'_>) -> Result<Output> {
    let at = at_span(s.span());
    match s {
        Statement::Insert(ins) => insert(db, tx, ins, at, p),
        Statement::Query(q) => select(db, tx, q, at, p),
        Statement::Update(u) => {
            if u.from.is_some()
                || !u.order_by.is_empty()
                || u.limit.is_some()
                || u.or.is_some()
                || u.output.is_some()
                || !u.optimizer_hints.is_empty()
            {
                return Err(sql_error(
                    at,
                    "UPDATE ... FROM/ORDER BY/LIMIT/OR/OUTPUT is not supported".into(),
                ));
            }
            let t = single_table(db, std::slice::from_ref(&u.table), at)?;
            let sets = assignments(
                &u.assignments,
                &t,
                Scope {
                    table: Some(&t.schema),
                    vars: p.names,
                },
            )?;
            let ret = returning(&u.returning, &t.schema, p)?;
            let keys = matching_keys(tx, &t, u.selection.as_ref(), p, &mut |_| Ok(()))?;
            let mut out = Vec::new();
            for k in &keys {
                cancel::tick()?;
                tx.update_with(&t, k.as_slice(), |row| {
                    assign(
                        row,
                        &t.schema,
                        &sets,
                        p.vals,
                        ret.as_ref().map(|r| (r, &mut out)),
                        at,
                    )
                })?;
            }
            Ok(Projection::output(
                ret,
                out,
                format!("UPDATE {}", keys.len()),
            ))
        }
        Statement::Delete(d) => {
            let from = match &d.from {
                FromTable::WithFromKeyword(f) | FromTable::WithoutKeyword(f) => f,
            };
            if d.using.is_some()
                || d.limit.is_some()
                || !d.tables.is_empty()
                || !d.order_by.is_empty()
                || d.output.is_some()
                || !d.optimizer_hints.is_empty()
            {
                return Err(sql_error(
                    at,
                    "DELETE ... USING/LIMIT/ORDER BY/OUTPUT is not supported".into(),
                ));
            }
            let t = single_table(db, from, at)?;
            let ret = returning(&d.returning, &t.schema, p)?;
            let mut out = Vec::new();
            // RETURNING sees each row as it was before the delete.
            let keys = matching_keys(tx, &t, d.selection.as_ref(), p, &mut |r| {
                if let Some(pr) = &ret {
                    out.push(pr.row(r, p.vals, at)?);
                }
                Ok(())
            })?;
            for k in &keys {
                cancel::tick()?;
                tx.delete(&t, k.as_slice())?;
            }
            Ok(Projection::output(
                ret,
                out,
                format!("DELETE {}", keys.len()),
            ))
        }
        other => Err(sql_error(
            at,
            format!("statement not supported: {}", first_words(other)),
        )),
    }
}

/// The position of the column `n` names, or an error at `n` naming table and column.
fn column_of(t: &TableRef, n: &ObjectName) -> Result<usize> {
    let name = name_of(n)?;
    t.schema.column_index(&name).map_err(|_| {
        sql_error(
            at_span(n.span()),
            format!("table `{}` has no column `{name}`", t.name()),
        )
    })
}

fn first_words(s: &Statement) -> String {
    s.to_string()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

fn insert(
    db: &Database,
    tx: &mut Transaction<'_>,
    ins: &ast::Insert,
    at: SqlPos,
    p: Params<'_>,
) -> Result<Output> {
    let TableObject::TableName(name) = &ins.table else {
        return Err(sql_error(
            at,
            "INSERT into a table function is not supported".into(),
        ));
    };
    if ins.or.is_some()
        || ins.ignore
        || ins.table_alias.is_some()
        || ins.overwrite
        || !ins.assignments.is_empty()
        || ins.partitioned.is_some()
        || !ins.after_columns.is_empty()
        || ins.has_table_keyword
        || ins.output.is_some()
        || ins.replace_into
        || ins.priority.is_some()
        || ins.insert_alias.is_some()
        || ins.settings.is_some()
        || ins.format_clause.is_some()
        || ins.multi_table_insert_type.is_some()
        || !ins.multi_table_into_clauses.is_empty()
        || !ins.multi_table_when_clauses.is_empty()
        || !ins.optimizer_hints.is_empty()
    {
        return Err(sql_error(
            at,
            "only INSERT INTO table [(columns)] VALUES ... [ON CONFLICT ...] [RETURNING ...] is supported"
                .into(),
        ));
    }
    let t = db.table(&name_of(name)?)?;
    let ret = returning(&ins.returning, &t.schema, p)?;
    let mut out = Vec::new();
    let conflict = on_conflict(ins, &t, at, p)?;
    // Keys this statement inserted or updated (DO UPDATE may not touch a row twice).
    let mut touched: Vec<Vec<Value>> = Vec::new();
    let ncols = t.schema.columns().len();
    // Position in the statement's value list of each table column.
    let order: Vec<usize> = if ins.columns.is_empty() {
        (0..ncols).collect()
    } else {
        let mut order = vec![usize::MAX; ncols];
        for (i, c) in ins.columns.iter().enumerate() {
            order[column_of(&t, c)?] = i;
        }
        if let Some(missing) = order.iter().position(|&o| o == usize::MAX) {
            return Err(sql_error(
                at,
                format!(
                    "no value for column `{}` (every column needs one)",
                    t.schema.columns()[missing].name
                ),
            ));
        }
        order
    };
    let Some(src) = &ins.source else {
        return Err(sql_error(at, "INSERT needs VALUES".into()));
    };
    if src.with.is_some()
        || src.order_by.is_some()
        || src.limit_clause.is_some()
        || src.fetch.is_some()
        || !src.locks.is_empty()
        || src.for_clause.is_some()
        || src.settings.is_some()
        || src.format_clause.is_some()
        || !src.pipe_operators.is_empty()
    {
        return Err(sql_error(
            at,
            "INSERT ... VALUES takes no WITH, ORDER BY, LIMIT or other query clause".into(),
        ));
    }
    let SetExpr::Values(values) = src.body.as_ref() else {
        return Err(sql_error(
            at,
            "INSERT ... SELECT is not supported; use VALUES".into(),
        ));
    };
    let mut n = 0;
    for row in &values.rows {
        cancel::tick()?;
        if row.len() != ncols {
            return Err(sql_error(
                at_span(row.first().map(|e| e.span()).unwrap_or(ins.span())),
                format!("{} values for {} columns", row.len(), ncols),
            ));
        }
        let mut vals = Vec::with_capacity(ncols);
        for &o in &order {
            let e = &row[o];
            let v = p
                .eval(&p.compile(e, None)?.0, None)?
                .stored(at_span(e.span()))?;
            vals.push(coerce(&t.schema, vals.len(), v));
        }
        match tx.insert(&t, vals.as_slice()) {
            Ok(()) => {
                n += 1;
                if matches!(conflict, Conflict::Update { .. }) {
                    touched.push(primary_key(&t.schema, &vals));
                }
                if let Some(r) = &ret {
                    // The row as stored (after coercion), read back in the transaction.
                    let key = primary_key(&t.schema, &vals);
                    let row = tx.get_with(&t, key.as_slice(), |row| r.row(row, p.vals, at))?;
                    match row {
                        Some(row) => out.push(row?),
                        None => {
                            return Err(sql_error(at, "the inserted row is not visible".into()))
                        }
                    }
                }
            }
            // A failed insert changes nothing, so the row is simply skipped.
            Err(Error::DuplicateKey { index, .. })
                if matches!(&conflict, Conflict::Skip(target)
                    if target.as_ref().is_none_or(|t| *t == index)) => {}
            Err(Error::DuplicateKey { index, table })
                if matches!(&conflict, Conflict::Update { .. })
                    && index == t.schema.indexes()[0].name =>
            {
                let Conflict::Update { sets, filter } = &conflict else {
                    return Err(Error::DuplicateKey { index, table });
                };
                let key = primary_key(&t.schema, &vals);
                if touched.contains(&key) {
                    return Err(sql_error(
                        at,
                        "ON CONFLICT DO UPDATE cannot affect a row a second time (the VALUES \
                         repeat a key)"
                            .into(),
                    ));
                }
                // `excluded.col` are the variables after the parameters.
                let mut vars = p.vals.to_vec();
                vars.extend(vals.iter().cloned().map(V::Val));
                let mut updated = false;
                tx.update_with(&t, key.as_slice(), |row| {
                    if let Some(f) = filter {
                        if !expr::holds(f, Some(row.as_ref()), &vars)? {
                            return Ok(());
                        }
                    }
                    updated = true;
                    assign(
                        row,
                        &t.schema,
                        sets,
                        &vars,
                        ret.as_ref().map(|r| (r, &mut out)),
                        at,
                    )
                })?;
                if updated {
                    n += 1;
                    touched.push(key);
                }
            }
            Err(e) => return Err(e),
        }
    }
    Ok(Projection::output(ret, out, format!("INSERT {n}")))
}

/// Sets the columns of `sets` to their expressions' values on the row as it was (`vars`:
/// the expressions' variables), then adds the `RETURNING` values of the updated row to
/// `ret`'s rows. An error leaves the update unpublished (`Transaction::update_with`).
fn assign(
    row: &mut RowMut<'_>,
    s: &TableSchema,
    sets: &[(usize, E)],
    vars: &[V],
    ret: Option<(&Projection, &mut Vec<Vec<Value>>)>,
    at: SqlPos,
) -> Result<()> {
    let mut new = Vec::with_capacity(sets.len());
    for (c, e) in sets {
        let v = eval_in(e, Some(row.as_ref()), vars)?.stored(at)?;
        new.push((*c, coerce(s, *c, v)));
    }
    for (c, v) in new {
        row.set(c, &v)?;
    }
    if let Some((r, out)) = ret {
        out.push(r.row(row.as_ref(), vars, at)?);
    }
    Ok(())
}

/// The `SET col = expr, ...` of an `UPDATE` or `ON CONFLICT DO UPDATE`, compiled in
/// `scope` and type-checked against their columns.
fn assignments(
    list: &[ast::Assignment],
    t: &TableRef,
    scope: Scope<'_>,
) -> Result<Vec<(usize, E)>> {
    let mut sets = Vec::new();
    for a in list {
        let ast::AssignmentTarget::ColumnName(n) = &a.target else {
            return Err(sql_error(
                at_span(a.span()),
                "assign one column at a time".into(),
            ));
        };
        let c = column_of(t, n)?;
        let cty = Ty::of_column(t.schema.columns()[c].ty);
        let (e, ty) = compile_in(&a.value, scope)?;
        if !cty.accepts(ty) {
            return Err(sql_error(
                at_span(a.value.span()),
                format!(
                    "cannot assign {} to column `{}` of type {}",
                    ty.name(),
                    t.schema.columns()[c].name,
                    cty.name()
                ),
            ));
        }
        sets.push((c, e));
    }
    Ok(sets)
}

/// The primary-key values of a full row.
fn primary_key(s: &TableSchema, row: &[Value]) -> Vec<Value> {
    s.indexes()[0]
        .columns
        .iter()
        .map(|&c| row[c].clone())
        .collect()
}

/// What an `INSERT` does with a row whose key is taken.
enum Conflict {
    /// Fail (no `ON CONFLICT`).
    Error,
    /// `DO NOTHING`: skip the row if the taken key is in this unique index (`None`: any).
    Skip(Option<String>),
    /// `DO UPDATE SET ... [WHERE ...]` (the target is the primary key): assignments and
    /// condition over the existing row, `excluded.col` being the proposed row's values.
    Update {
        sets: Vec<(usize, E)>,
        filter: Option<E>,
    },
}

/// Compiles `INSERT`'s `ON CONFLICT` clause.
fn on_conflict(ins: &ast::Insert, t: &TableRef, at: SqlPos, p: Params<'_>) -> Result<Conflict> {
    let oc = match &ins.on {
        None => return Ok(Conflict::Error),
        Some(ast::OnInsert::OnConflict(oc)) => oc,
        Some(other) => {
            return Err(sql_error(
                at,
                format!("{other} is not supported (ON CONFLICT is)"),
            ))
        }
    };
    let s = &t.schema;
    let target = match &oc.conflict_target {
        None => None,
        Some(ast::ConflictTarget::Columns(cols)) => {
            let mut want = Vec::new();
            for c in cols {
                want.push(s.column_index(&c.value).map_err(|_| {
                    sql_error(
                        at_span(c.span),
                        format!("table `{}` has no column `{}`", t.name(), c.value),
                    )
                })?);
            }
            let ix = s
                .indexes()
                .iter()
                .enumerate()
                .find(|(i, d)| (*i == 0 || d.unique) && d.columns == want)
                .map(|(_, d)| d.name.clone());
            match ix {
                Some(name) => Some(name),
                None => {
                    return Err(sql_error(
                        at,
                        "ON CONFLICT needs the columns of the primary key or of a unique index"
                            .into(),
                    ))
                }
            }
        }
        Some(ast::ConflictTarget::OnConstraint(c)) => {
            let name = name_of(c)?;
            if s.index_position(&name).is_err() {
                return Err(sql_error(
                    at_span(c.span()),
                    format!("table `{}` has no index `{name}`", t.name()),
                ));
            }
            Some(name)
        }
    };
    let du = match &oc.action {
        ast::OnConflictAction::DoNothing => return Ok(Conflict::Skip(target)),
        ast::OnConflictAction::DoUpdate(du) => du,
    };
    if target.as_deref() != Some(s.indexes()[0].name.as_str()) {
        return Err(sql_error(
            at,
            "ON CONFLICT ... DO UPDATE needs the primary key as its target: ON CONFLICT (key columns)"
                .into(),
        ));
    }
    let mut names = p.names.to_vec();
    for c in s.columns() {
        names.push((format!("excluded.{}", c.name), Ty::of_column(c.ty)));
    }
    let scope = Scope {
        table: Some(s),
        vars: &names,
    };
    let sets = assignments(&du.assignments, t, scope)?;
    let filter = du
        .selection
        .as_ref()
        .map(|e| condition(e, scope))
        .transpose()?;
    Ok(Conflict::Update { sets, filter })
}

/// Primary keys of the rows `filter` selects (all rows when `None`), as of the transaction;
/// `each` sees every such row.
fn matching_keys(
    tx: &mut Transaction<'_>,
    t: &TableRef,
    filter: Option<&Expr>,
    p: Params<'_>,
    each: &mut dyn FnMut(RowRef<'_>) -> Result<()>,
) -> Result<Vec<Vec<Value>>> {
    let pk: Vec<usize> = t.schema.indexes()[0].columns.clone();
    let mut keys = Vec::new();
    visit(tx, t, filter, None, p, &mut |r| {
        each(r)?;
        keys.push(pk.iter().map(|&c| value_at(r, c)).collect::<Result<_>>()?);
        Ok(true)
    })?;
    Ok(keys)
}

/// Column `c` of a row (`c` was resolved against the row's schema, so it is in range).
fn value_at(r: RowRef<'_>, c: usize) -> Result<Value> {
    r.get(c)
        .map(ValueRef::to_value)
        .ok_or_else(|| sql_error(SqlPos::default(), format!("no column #{c} in the row")))
}

/// Calls `f` with each row that `filter` selects, until it returns false; in the order of
/// an ordered index (`Some((index, descending))`), else in whatever order is cheapest.
fn visit(
    tx: &mut Transaction<'_>,
    t: &TableRef,
    filter: Option<&Expr>,
    order: Option<(usize, bool)>,
    p: Params<'_>,
    f: &mut dyn FnMut(RowRef<'_>) -> Result<bool>,
) -> Result<()> {
    let cond = match filter {
        Some(e) => Some(condition(
            e,
            Scope {
                table: Some(&t.schema),
                vars: p.names,
            },
        )?),
        None => None,
    };
    let mut key = Vec::new();
    visit_plan(
        tx,
        t,
        &Access::plan(cond, &t.schema),
        p.vals,
        &mut key,
        order,
        f,
    )
}

fn select(
    db: &Database,
    tx: &mut Transaction<'_>,
    q: &ast::Query,
    at: SqlPos,
    p: Params<'_>,
) -> Result<Output> {
    if q.with.is_some()
        || q.fetch.is_some()
        || !q.locks.is_empty()
        || q.for_clause.is_some()
        || q.settings.is_some()
        || q.format_clause.is_some()
        || !q.pipe_operators.is_empty()
    {
        return Err(sql_error(
            at,
            "WITH, FETCH, locking and FOR/SETTINGS/FORMAT clauses are not supported".into(),
        ));
    }
    let SetExpr::Select(sel) = q.body.as_ref() else {
        return Err(sql_error(at, "only a single SELECT is supported".into()));
    };
    if !sel.optimizer_hints.is_empty()
        || sel.select_modifiers.is_some()
        || sel.top.is_some()
        || sel.exclude.is_some()
        || sel.into.is_some()
        || !sel.lateral_views.is_empty()
        || sel.prewhere.is_some()
        || !sel.connect_by.is_empty()
        || !sel.cluster_by.is_empty()
        || !sel.distribute_by.is_empty()
        || !sel.sort_by.is_empty()
        || !sel.named_window.is_empty()
        || sel.qualify.is_some()
        || sel.value_table_mode.is_some()
        || !matches!(sel.flavor, ast::SelectFlavor::Standard)
    {
        return Err(sql_error(
            at,
            "SELECT supports a select list, FROM one table, WHERE, ORDER BY and LIMIT; \
             TOP, INTO, EXCLUDE, QUALIFY, WINDOW and other clauses are not supported"
                .into(),
        ));
    }
    let grouped = match &sel.group_by {
        ast::GroupByExpr::Expressions(e, m) => !e.is_empty() || !m.is_empty(),
        ast::GroupByExpr::All(_) => true,
    };
    if grouped || sel.having.is_some() || sel.distinct.is_some() {
        return Err(sql_error(
            at,
            "GROUP BY, HAVING and DISTINCT are not supported yet".into(),
        ));
    }
    let limit_expr = match &q.limit_clause {
        None => None,
        Some(ast::LimitClause::LimitOffset {
            limit,
            offset: None,
            limit_by,
        }) if limit_by.is_empty() => limit.as_ref(),
        Some(_) => return Err(sql_error(at, "OFFSET is not supported yet".into())),
    };
    let limit = match limit_expr {
        None => usize::MAX,
        Some(e) => match p.compile(e, None)? {
            (x, Ty::Int) => match p.eval(&x, None)? {
                V::Val(Value::Int(n)) if n >= 0 => n as usize,
                _ => return Err(sql_error(at_span(e.span()), "LIMIT must be ≥ 0".into())),
            },
            _ => {
                return Err(sql_error(
                    at_span(e.span()),
                    "LIMIT needs an integer".into(),
                ))
            }
        },
    };
    let t = single_table(db, &sel.from, at)?;
    let order = match &q.order_by {
        None => None,
        Some(ob) => Some(order_by(ob, &t.schema, at)?),
    };
    if sel.projection.iter().any(|i| {
        matches!(
            i,
            SelectItem::UnnamedExpr(Expr::Function(_))
                | SelectItem::ExprWithAlias {
                    expr: Expr::Function(_),
                    ..
                }
        )
    }) {
        return aggregate(tx, &t, sel, order, limit, p);
    }
    let proj = Projection::compile(&sel.projection, &t.schema, p)?;
    let mut rows = Vec::new();
    if limit > 0 {
        visit(tx, &t, sel.selection.as_ref(), order, p, &mut |r| {
            rows.push(proj.row(r, p.vals, at)?);
            Ok(rows.len() < limit)
        })?;
    }
    Ok(Output::Rows {
        columns: proj.columns,
        rows,
    })
}

/// A compiled select list (of a `SELECT` or a `RETURNING`): column names and expressions.
struct Projection {
    columns: Vec<String>,
    exprs: Vec<E>,
}

impl Projection {
    fn compile(items: &[SelectItem], s: &TableSchema, p: Params<'_>) -> Result<Projection> {
        let mut columns = Vec::new();
        let mut exprs = Vec::new();
        for item in items {
            match item {
                SelectItem::Wildcard(o)
                    if o.opt_ilike.is_none()
                        && o.opt_exclude.is_none()
                        && o.opt_except.is_none()
                        && o.opt_replace.is_none()
                        && o.opt_rename.is_none()
                        && o.opt_alias.is_none() =>
                {
                    for (i, c) in s.columns().iter().enumerate() {
                        columns.push(c.name.clone());
                        exprs.push(E::Col(i));
                    }
                }
                SelectItem::UnnamedExpr(e) => {
                    columns.push(e.to_string());
                    exprs.push(p.compile(e, Some(s))?.0);
                }
                SelectItem::ExprWithAlias { expr, alias } => {
                    columns.push(alias.value.clone());
                    exprs.push(p.compile(expr, Some(s))?.0);
                }
                other => {
                    return Err(sql_error(
                        at_span(other.span()),
                        format!("select item not supported: {other}"),
                    ))
                }
            }
        }
        Ok(Projection { columns, exprs })
    }

    /// The list's values on row `r` (a boolean shows as 0 or 1); `vars` starts with the
    /// statement's parameters.
    fn row(&self, r: RowRef<'_>, vars: &[V], at: SqlPos) -> Result<Vec<Value>> {
        let mut out = Vec::with_capacity(self.exprs.len());
        for e in &self.exprs {
            out.push(match eval_in(e, Some(r), vars)? {
                V::Bool(b) => Value::Int(b as i64),
                v => v.stored(at)?,
            });
        }
        Ok(out)
    }

    /// `RETURNING`'s rows as the statement's output, or the plain tag without one.
    fn output(this: Option<Self>, rows: Vec<Vec<Value>>, tag: String) -> Output {
        match this {
            Some(pr) => Output::Rows {
                columns: pr.columns,
                rows,
            },
            None => Output::Done(tag),
        }
    }
}

/// The compiled `RETURNING` list of a write, if it has one.
fn returning(
    items: &Option<Vec<SelectItem>>,
    s: &TableSchema,
    p: Params<'_>,
) -> Result<Option<Projection>> {
    items
        .as_ref()
        .map(|items| Projection::compile(items, s, p))
        .transpose()
}

/// `ORDER BY` the primary-key columns, all ascending or all descending: true if descending.
/// The ordered index that gives `ORDER BY`'s order, and whether it runs descending: the
/// primary key, or one column with a one-column B-tree index of its own.
fn order_by(ob: &ast::OrderBy, s: &TableSchema, at: SqlPos) -> Result<(usize, bool)> {
    let not_key = || {
        sql_error(
            at,
            format!(
                "ORDER BY is supported on the primary key ({}) or on a column with a one-column B-tree index; other orders are not supported yet",
                s.indexes()[0]
                    .columns
                    .iter()
                    .map(|&c| s.columns()[c].name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        )
    };
    let ast::OrderByKind::Expressions(items) = &ob.kind else {
        return Err(not_key());
    };
    let mut cols = Vec::new();
    let mut desc = None;
    for item in items {
        match compile(&item.expr, Some(s))?.0 {
            E::Col(c) => cols.push(c),
            _ => return Err(not_key()),
        }
        let d = matches!(item.options.sort, Some(ast::OrderBySort::Desc));
        if matches!(item.options.sort, Some(ast::OrderBySort::Using(_)))
            || desc.is_some_and(|x| x != d)
        {
            return Err(not_key());
        }
        desc = Some(d);
    }
    let index = ordered_index(s, &cols).ok_or_else(not_key)?;
    Ok((index, desc.unwrap_or(false)))
}

/// `SELECT count(*) | count(e) | sum(e) | min(e) | max(e), ... FROM t [WHERE ...]`: one row.
fn aggregate(
    tx: &mut Transaction<'_>,
    t: &TableRef,
    sel: &ast::Select,
    order: Option<(usize, bool)>,
    limit: usize,
    p: Params<'_>,
) -> Result<Output> {
    let mixing = |at| {
        sql_error(
            at,
            "mixing aggregates and plain columns needs GROUP BY, which is not supported yet".into(),
        )
    };
    let scope = Scope {
        table: Some(&t.schema),
        vars: p.names,
    };
    let mut columns = Vec::new();
    let mut aggs = Vec::new();
    for item in &sel.projection {
        let (e, name) = match item {
            SelectItem::UnnamedExpr(e) => (e, e.to_string()),
            SelectItem::ExprWithAlias { expr, alias } => (expr, alias.value.clone()),
            other => return Err(mixing(at_span(other.span()))),
        };
        let Some(a) = Agg::compile(e, scope)? else {
            if let Expr::Function(f) = e {
                let fname = name_of(&f.name)?.to_ascii_lowercase();
                return Err(sql_error(
                    at_span(e.span()),
                    format!("function {fname} is not supported"),
                ));
            }
            return Err(mixing(at_span(e.span())));
        };
        aggs.push(a);
        columns.push(name);
    }
    let mut acc: Vec<Option<Value>> = vec![None; aggs.len()];
    visit(tx, t, sel.selection.as_ref(), order, p, &mut |r| {
        for (a, acc) in aggs.iter().zip(acc.iter_mut()) {
            a.add(acc, r, p.vals)?;
        }
        Ok(true)
    })?;
    let mut row = Vec::with_capacity(aggs.len());
    for ((a, acc), name) in aggs.iter().zip(acc).zip(&columns) {
        row.push(a.finish(acc, name)?);
    }
    let rows = if limit == 0 { Vec::new() } else { vec![row] };
    Ok(Output::Rows { columns, rows })
}

#[cfg(test)]
mod tests;
