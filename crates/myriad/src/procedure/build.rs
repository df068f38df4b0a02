//! The Rust builder for procedures: the same statements as the SQL body, made in code. It
//! produces the same definition the SQL front end does, so both compile to the same IR.

use super::surface::{Def, Select, Stmt};
use crate::query::expr::Ty;
use crate::query::SqlPos;
use sqlparser::ast::{self, BinaryOperator as B, Expr, Ident, UnaryOperator};
use std::cell::Cell;
use std::rc::Rc;

/// The type of a parameter or variable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VarType {
    /// SQL `INT`/`BIGINT`: a 64-bit integer.
    Int,
    /// SQL `DOUBLE`.
    Float,
    /// SQL `TEXT`/`VARCHAR`.
    Text,
    /// SQL `BOOLEAN`.
    Bool,
    /// SQL `BIGINT[]`: an array of integers (parameters and declared variables).
    IntArray,
    /// SQL `DOUBLE[]`.
    FloatArray,
    /// SQL `TEXT[]`.
    TextArray,
}

impl VarType {
    pub(crate) fn ty(self) -> Ty {
        match self {
            VarType::Int => Ty::Int,
            VarType::Float => Ty::Float,
            VarType::Text => Ty::Str,
            VarType::Bool => Ty::Bool,
            VarType::IntArray => Ty::IntArray,
            VarType::FloatArray => Ty::FloatArray,
            VarType::TextArray => Ty::StrArray,
        }
    }
}

/// An expression for the builder. Names (`Ex::name`) resolve as in SQL: to a column of the
/// statement's table or to a variable.
#[derive(Clone, Debug)]
pub struct Ex(pub(crate) Expr);

fn call(name: &str, args: Vec<ast::FunctionArgExpr>) -> Ex {
    Ex(Expr::Function(ast::Function {
        name: ast::ObjectName::from(vec![Ident::new(name)]),
        uses_odbc_syntax: false,
        parameters: ast::FunctionArguments::None,
        args: ast::FunctionArguments::List(ast::FunctionArgumentList {
            duplicate_treatment: None,
            args: args.into_iter().map(ast::FunctionArg::Unnamed).collect(),
            clauses: Vec::new(),
        }),
        filter: None,
        null_treatment: None,
        over: None,
        within_group: Vec::new(),
    }))
}

macro_rules! binary {
    ($($(#[$doc:meta])* $f:ident => $op:expr),* $(,)?) => {$(
        $(#[$doc])*
        pub fn $f(self, r: Ex) -> Ex {
            Ex(Expr::BinaryOp { left: Box::new(self.0), op: $op, right: Box::new(r.0) })
        }
    )*};
}

impl Ex {
    /// A column of the statement's table, or a variable or parameter.
    pub fn name(n: &str) -> Ex {
        Ex(Expr::Identifier(Ident::new(n)))
    }
    /// A field of a `for_rows` loop's row variable.
    pub fn field(row: &str, column: &str) -> Ex {
        Ex(Expr::CompoundIdentifier(vec![
            Ident::new(row),
            Ident::new(column),
        ]))
    }
    /// An integer literal.
    pub fn int(v: i64) -> Ex {
        let lit = Ex(Expr::value(ast::Value::Number(
            v.unsigned_abs().to_string(),
            false,
        )));
        if v < 0 {
            Ex(Expr::UnaryOp {
                op: UnaryOperator::Minus,
                expr: Box::new(lit.0),
            })
        } else {
            lit
        }
    }
    /// A `DOUBLE` literal.
    pub fn float(v: f64) -> Ex {
        let lit = Ex(Expr::value(ast::Value::Number(
            format!("{:?}", v.abs()),
            false,
        )));
        if v < 0.0 {
            Ex(Expr::UnaryOp {
                op: UnaryOperator::Minus,
                expr: Box::new(lit.0),
            })
        } else {
            lit
        }
    }
    /// A text literal.
    pub fn text(v: &str) -> Ex {
        Ex(Expr::value(ast::Value::SingleQuotedString(v.to_string())))
    }
    /// A boolean literal.
    pub fn bool(v: bool) -> Ex {
        Ex(Expr::value(ast::Value::Boolean(v)))
    }
    /// `array[index]`, 1-based.
    pub fn elem(array: &str, index: Ex) -> Ex {
        Ex(Expr::CompoundFieldAccess {
            root: Box::new(Expr::Identifier(Ident::new(array))),
            access_chain: vec![ast::AccessExpr::Subscript(ast::Subscript::Index {
                index: index.0,
            })],
        })
    }
    /// The number of elements of an array parameter.
    pub fn len(array: &str) -> Ex {
        call(
            "cardinality",
            vec![ast::FunctionArgExpr::Expr(Expr::Identifier(Ident::new(
                array,
            )))],
        )
    }
    /// `substring(self FROM from FOR len)`.
    pub fn substr(self, from: Ex, len: Ex) -> Ex {
        call(
            "substr",
            vec![
                ast::FunctionArgExpr::Expr(self.0),
                ast::FunctionArgExpr::Expr(from.0),
                ast::FunctionArgExpr::Expr(len.0),
            ],
        )
    }
    /// `count(*)` (in a select list).
    pub fn count() -> Ex {
        call("count", vec![ast::FunctionArgExpr::Wildcard])
    }
    /// `sum(e)` (in a select list).
    pub fn sum(e: Ex) -> Ex {
        call("sum", vec![ast::FunctionArgExpr::Expr(e.0)])
    }
    /// `min(e)` (in a select list).
    pub fn min(e: Ex) -> Ex {
        call("min", vec![ast::FunctionArgExpr::Expr(e.0)])
    }
    /// `max(e)` (in a select list).
    pub fn max(e: Ex) -> Ex {
        call("max", vec![ast::FunctionArgExpr::Expr(e.0)])
    }
    /// `NOT self`.
    #[allow(clippy::should_implement_trait)]
    pub fn not(self) -> Ex {
        Ex(Expr::UnaryOp {
            op: UnaryOperator::Not,
            expr: Box::new(self.0),
        })
    }
    binary! {
        /// `self + r`.
        #[allow(clippy::should_implement_trait)]
        add => B::Plus,
        /// `self - r`.
        #[allow(clippy::should_implement_trait)]
        sub => B::Minus,
        /// `self * r`.
        #[allow(clippy::should_implement_trait)]
        mul => B::Multiply,
        /// `self / r`.
        #[allow(clippy::should_implement_trait)]
        div => B::Divide,
        /// `self % r`.
        #[allow(clippy::should_implement_trait)]
        rem => B::Modulo,
        /// `self = r`.
        eq => B::Eq,
        /// `self <> r`.
        ne => B::NotEq,
        /// `self < r`.
        lt => B::Lt,
        /// `self <= r`.
        le => B::LtEq,
        /// `self > r`.
        gt => B::Gt,
        /// `self >= r`.
        ge => B::GtEq,
        /// `self AND r`.
        and => B::And,
        /// `self OR r`.
        or => B::Or,
        /// String concatenation (`||`).
        concat => B::StringConcat,
    }
}

/// A procedure under construction.
pub struct ProcedureBuilder {
    pub(crate) def: Def,
    line: Rc<Cell<u64>>,
}

impl ProcedureBuilder {
    /// Starts a procedure called `name`, with no parameters and an empty body.
    pub fn new(name: &str) -> Self {
        ProcedureBuilder {
            def: Def {
                name: name.to_string(),
                params: Vec::new(),
                decls: Vec::new(),
                body: Vec::new(),
                at: SqlPos::default(),
                source: String::new(),
            },
            line: Rc::new(Cell::new(0)),
        }
    }
    /// Appends a parameter (read-only in the body; bound by position at the call).
    pub fn param(mut self, name: &str, ty: VarType) -> Self {
        self.def.params.push((name.to_string(), ty.ty()));
        self
    }
    /// A variable; it starts at the type's zero value (0, 0.0, '' or false).
    pub fn declare(mut self, name: &str, ty: VarType) -> Self {
        self.def.decls.push((name.to_string(), ty.ty(), None));
        self
    }
    /// Appends statements to the body.
    pub fn body(mut self, f: impl FnOnce(&mut Block)) -> Self {
        let mut b = Block {
            stmts: Vec::new(),
            line: self.line.clone(),
        };
        f(&mut b);
        self.def.body.extend(b.stmts);
        self
    }
}

/// A sequence of statements. Each statement is numbered in the order it is added (the number
/// stands in for a source line in `explain`).
pub struct Block {
    stmts: Vec<Stmt>,
    line: Rc<Cell<u64>>,
}

impl Block {
    fn at(&self) -> SqlPos {
        self.line.set(self.line.get() + 1);
        SqlPos {
            line: self.line.get(),
            column: 0,
        }
    }
    fn nested(&self, f: impl FnOnce(&mut Block)) -> Vec<Stmt> {
        let mut b = Block {
            stmts: Vec::new(),
            line: self.line.clone(),
        };
        f(&mut b);
        b.stmts
    }
    fn select(table: &str, items: &[Ex], filter: Option<Ex>) -> Select {
        let items = if items.is_empty() {
            vec![(
                Expr::Wildcard(ast::helpers::attached_token::AttachedToken::empty()),
                None,
            )]
        } else {
            items.iter().map(|e| (e.0.clone(), None)).collect()
        };
        Select {
            table: table.to_string(),
            items,
            filter: filter.map(|f| f.0),
            order: None,
            limit: None,
        }
    }

    /// `SELECT items INTO into FROM table WHERE filter` (no items: every column).
    pub fn select_into(
        &mut self,
        table: &str,
        items: &[Ex],
        into: &[&str],
        filter: Option<Ex>,
    ) -> &mut Self {
        let at = self.at();
        self.stmts.push(Stmt::SelectInto {
            sel: Self::select(table, items, filter),
            into: into.iter().map(|s| s.to_string()).collect(),
            at,
        });
        self
    }
    /// `UPDATE table SET col = expr, ... [WHERE filter]`.
    pub fn update(&mut self, table: &str, sets: &[(&str, Ex)], filter: Option<Ex>) -> &mut Self {
        let at = self.at();
        self.stmts.push(Stmt::Update {
            table: table.to_string(),
            sets: sets
                .iter()
                .map(|(c, e)| (c.to_string(), e.0.clone()))
                .collect(),
            filter: filter.map(|f| f.0),
            at,
        });
        self
    }
    /// One row, values in the table's column order.
    pub fn insert(&mut self, table: &str, values: &[Ex]) -> &mut Self {
        let at = self.at();
        self.stmts.push(Stmt::Insert {
            table: table.to_string(),
            columns: Vec::new(),
            rows: vec![values.iter().map(|e| e.0.clone()).collect()],
            at,
        });
        self
    }
    /// `DELETE FROM table [WHERE filter]`.
    pub fn delete(&mut self, table: &str, filter: Option<Ex>) -> &mut Self {
        let at = self.at();
        self.stmts.push(Stmt::Delete {
            table: table.to_string(),
            filter: filter.map(|f| f.0),
            at,
        });
        self
    }
    /// `var := value`.
    pub fn assign(&mut self, var: &str, value: Ex) -> &mut Self {
        let at = self.at();
        self.stmts.push(Stmt::Assign {
            var: var.to_string(),
            value: value.0,
            at,
        });
        self
    }
    /// `IF cond THEN ... ELSE ... END IF`.
    pub fn if_else(
        &mut self,
        cond: Ex,
        then: impl FnOnce(&mut Block),
        otherwise: impl FnOnce(&mut Block),
    ) -> &mut Self {
        let at = self.at();
        let then = self.nested(then);
        let otherwise = self.nested(otherwise);
        self.stmts.push(Stmt::If {
            arms: vec![(cond.0, then)],
            otherwise,
            at,
        });
        self
    }
    /// `FOR var IN lo..hi LOOP ... END LOOP` (both bounds included).
    pub fn for_range(
        &mut self,
        var: &str,
        lo: Ex,
        hi: Ex,
        body: impl FnOnce(&mut Block),
    ) -> &mut Self {
        let at = self.at();
        let body = self.nested(body);
        self.stmts.push(Stmt::ForRange {
            var: var.to_string(),
            lo: lo.0,
            hi: hi.0,
            body,
            at,
        });
        self
    }
    /// `FOR row IN SELECT items FROM table WHERE filter LOOP ... END LOOP`; the body reads
    /// `Ex::field(row, column)`.
    pub fn for_rows(
        &mut self,
        row: &str,
        table: &str,
        items: &[Ex],
        filter: Option<Ex>,
        body: impl FnOnce(&mut Block),
    ) -> &mut Self {
        let at = self.at();
        let body = self.nested(body);
        self.stmts.push(Stmt::ForRows {
            var: row.to_string(),
            sel: Self::select(table, items, filter),
            body,
            at,
        });
        self
    }
    /// `RETURN values`: ends the call with these values as its result.
    pub fn ret(&mut self, values: &[Ex]) -> &mut Self {
        let at = self.at();
        self.stmts.push(Stmt::Return {
            values: values.iter().map(|e| e.0.clone()).collect(),
            at,
        });
        self
    }
    /// `RAISE EXCEPTION message`: the call fails and its transaction rolls back.
    pub fn raise(&mut self, message: Ex) -> &mut Self {
        let at = self.at();
        self.stmts.push(Stmt::Raise {
            message: message.0,
            at,
        });
        self
    }
    /// `ROLLBACK`: the call fails with `Error::ProcedureAbort` and its transaction rolls back.
    pub fn rollback(&mut self) -> &mut Self {
        let at = self.at();
        self.stmts.push(Stmt::Rollback { at });
        self
    }
}
