//! A procedure as written, before names are resolved: what the SQL front end (`parse.rs`) and
//! the Rust builder (`build.rs`) both produce, so that both reach the same IR through one
//! compiler (`ir.rs`). Expressions stay `sqlparser` expressions until then.

use crate::query::expr::Ty;
use crate::query::SqlPos;
use sqlparser::ast::Expr;

/// A procedure definition.
#[derive(Clone, Debug)]
pub(crate) struct Def {
    pub name: String,
    pub params: Vec<(String, Ty)>,
    /// Declared variables with an optional initial value.
    pub decls: Vec<(String, Ty, Option<Expr>)>,
    pub body: Vec<Stmt>,
    pub at: SqlPos,
    /// The `CREATE PROCEDURE` text it was parsed from (empty for the builder): what a
    /// durable database keeps in its catalog.
    pub source: String,
}

/// The row source of `SELECT ... INTO` and `FOR row IN SELECT`.
#[derive(Clone, Debug)]
pub(crate) struct Select {
    pub table: String,
    /// Select-list items with their output names; `Expr::Wildcard` stands for every column.
    pub items: Vec<(Expr, Option<String>)>,
    pub filter: Option<Expr>,
    /// `ORDER BY` the primary key: descending?
    pub order: Option<(String, bool)>,
    pub limit: Option<Expr>,
}

#[derive(Clone, Debug)]
pub(crate) enum Stmt {
    SelectInto {
        sel: Select,
        into: Vec<String>,
        at: SqlPos,
    },
    Update {
        table: String,
        sets: Vec<(String, Expr)>,
        filter: Option<Expr>,
        at: SqlPos,
    },
    Insert {
        table: String,
        /// Empty: the table's column order.
        columns: Vec<String>,
        rows: Vec<Vec<Expr>>,
        at: SqlPos,
    },
    Delete {
        table: String,
        filter: Option<Expr>,
        at: SqlPos,
    },
    Assign {
        var: String,
        value: Expr,
        at: SqlPos,
    },
    If {
        arms: Vec<(Expr, Vec<Stmt>)>,
        otherwise: Vec<Stmt>,
        at: SqlPos,
    },
    ForRange {
        var: String,
        lo: Expr,
        hi: Expr,
        body: Vec<Stmt>,
        at: SqlPos,
    },
    ForRows {
        var: String,
        sel: Select,
        body: Vec<Stmt>,
        at: SqlPos,
    },
    Return {
        values: Vec<Expr>,
        at: SqlPos,
    },
    Raise {
        message: Expr,
        at: SqlPos,
    },
    Rollback {
        at: SqlPos,
    },
}

impl Select {
    /// `SELECT items FROM table [WHERE ...] [ORDER BY ...] [LIMIT ...]` as text.
    pub(crate) fn describe(&self, into: &[String]) -> String {
        let items: Vec<String> = self
            .items
            .iter()
            .map(|(e, alias)| match alias {
                Some(a) => format!("{e} AS {a}"),
                None => e.to_string(),
            })
            .collect();
        let mut s = format!("SELECT {}", items.join(", "));
        if !into.is_empty() {
            s += &format!(" INTO {}", into.join(", "));
        }
        s += &format!(" FROM {}", self.table);
        if let Some(f) = &self.filter {
            s += &format!(" WHERE {f}");
        }
        if let Some((c, desc)) = &self.order {
            s += &format!(" ORDER BY {c}{}", if *desc { " DESC" } else { "" });
        }
        if let Some(l) = &self.limit {
            s += &format!(" LIMIT {l}");
        }
        s
    }
}

fn list(es: &[Expr]) -> String {
    es.iter()
        .map(|e| e.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

impl Stmt {
    pub(crate) fn at(&self) -> SqlPos {
        match self {
            Stmt::SelectInto { at, .. }
            | Stmt::Update { at, .. }
            | Stmt::Insert { at, .. }
            | Stmt::Delete { at, .. }
            | Stmt::Assign { at, .. }
            | Stmt::If { at, .. }
            | Stmt::ForRange { at, .. }
            | Stmt::ForRows { at, .. }
            | Stmt::Return { at, .. }
            | Stmt::Raise { at, .. }
            | Stmt::Rollback { at } => *at,
        }
    }

    /// The statement's own text (without nested blocks), for `explain`.
    pub(crate) fn describe(&self) -> String {
        let filter = |f: &Option<Expr>| match f {
            Some(f) => format!(" WHERE {f}"),
            None => String::new(),
        };
        match self {
            Stmt::SelectInto { sel, into, .. } => sel.describe(into),
            Stmt::Update {
                table,
                sets,
                filter: f,
                ..
            } => {
                let sets: Vec<String> = sets.iter().map(|(c, e)| format!("{c} = {e}")).collect();
                format!("UPDATE {table} SET {}{}", sets.join(", "), filter(f))
            }
            Stmt::Insert {
                table,
                columns,
                rows,
                ..
            } => {
                let cols = if columns.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", columns.join(", "))
                };
                let rows: Vec<String> = rows.iter().map(|r| format!("({})", list(r))).collect();
                format!("INSERT INTO {table}{cols} VALUES {}", rows.join(", "))
            }
            Stmt::Delete {
                table, filter: f, ..
            } => format!("DELETE FROM {table}{}", filter(f)),
            Stmt::Assign { var, value, .. } => format!("{var} := {value}"),
            Stmt::If { arms, .. } => format!("IF {}", arms[0].0),
            Stmt::ForRange { var, lo, hi, .. } => format!("FOR {var} IN {lo}..{hi}"),
            Stmt::ForRows { var, sel, .. } => format!("FOR {var} IN {}", sel.describe(&[])),
            Stmt::Return { values, .. } => format!("RETURN {}", list(values)).trim().to_string(),
            Stmt::Raise { message, .. } => format!("RAISE {message}"),
            Stmt::Rollback { .. } => "ROLLBACK".into(),
        }
    }
}
