//! Scalar expressions of the statement language: compiled once against a table's schema
//! (columns resolved to positions, types checked), then evaluated per row without lookups.

use super::{sql_error, SqlPos};
use crate::error::Result;
use crate::schema::{ColumnType, TableSchema};
use crate::value::{RowRef, Value};
use sqlparser::ast::{self, BinaryOperator, Expr, Spanned, UnaryOperator};

/// The type of an expression.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Ty {
    Int,
    Float,
    Str,
    Bool,
}

impl Ty {
    pub(crate) fn of_column(t: ColumnType) -> Ty {
        match t {
            ColumnType::Int => Ty::Int,
            ColumnType::Float => Ty::Float,
            ColumnType::Str(_) | ColumnType::Bytes(_) => Ty::Str,
        }
    }
    pub(crate) fn name(self) -> &'static str {
        match self {
            Ty::Int => "INT",
            Ty::Float => "DOUBLE",
            Ty::Str => "VARCHAR",
            Ty::Bool => "BOOLEAN",
        }
    }
    fn numeric(self) -> bool {
        matches!(self, Ty::Int | Ty::Float)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Op {
    Add,
    Sub,
    Mul,
    Div,
    Mod,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    And,
    Or,
}

/// A compiled expression.
#[derive(Clone, Debug)]
pub(crate) enum E {
    Col(usize),
    Lit(Value),
    Bool(bool),
    Neg(Box<E>),
    Not(Box<E>),
    Bin(Box<E>, Op, Box<E>, SqlPos),
}

/// A value during evaluation (booleans are not storable).
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum V {
    Val(Value),
    Bool(bool),
}

fn pos(e: &Expr) -> SqlPos {
    let s = e.span().start;
    SqlPos {
        line: s.line,
        column: s.column,
    }
}

/// Compiles `e` against `schema` (`None`: a constant expression, no columns allowed).
pub(crate) fn compile(e: &Expr, schema: Option<&TableSchema>) -> Result<(E, Ty)> {
    let at = pos(e);
    match e {
        Expr::Nested(inner) => compile(inner, schema),
        Expr::Identifier(id) => column(&id.value, schema, at),
        Expr::CompoundIdentifier(parts) if parts.len() == 2 => {
            if let Some(s) = schema {
                if !parts[0].value.eq_ignore_ascii_case(s.name()) {
                    return Err(sql_error(
                        at,
                        format!(
                            "unknown table `{}` (the statement reads `{}`)",
                            parts[0].value,
                            s.name()
                        ),
                    ));
                }
            }
            column(&parts[1].value, schema, at)
        }
        Expr::Value(v) => literal(&v.value, at),
        Expr::UnaryOp { op, expr } => {
            let (x, t) = compile(expr, schema)?;
            match op {
                UnaryOperator::Minus if t.numeric() => Ok((
                    match x {
                        E::Lit(Value::Int(i)) if i != i64::MIN => E::Lit(Value::Int(-i)),
                        E::Lit(Value::Float(f)) => E::Lit(Value::Float(-f)),
                        x => E::Neg(Box::new(x)),
                    },
                    t,
                )),
                UnaryOperator::Plus if t.numeric() => Ok((x, t)),
                UnaryOperator::Not if t == Ty::Bool => Ok((E::Not(Box::new(x)), Ty::Bool)),
                _ => Err(sql_error(
                    at,
                    format!("operator {op} does not apply to {}", t.name()),
                )),
            }
        }
        Expr::BinaryOp { left, op, right } => {
            let (l, lt) = compile(left, schema)?;
            let (r, rt) = compile(right, schema)?;
            let (o, ty) = binary(op, lt, rt, at)?;
            Ok((E::Bin(Box::new(l), o, Box::new(r), at), ty))
        }
        _ => Err(sql_error(at, format!("expression not supported: {e}"))),
    }
}

fn column(name: &str, schema: Option<&TableSchema>, at: SqlPos) -> Result<(E, Ty)> {
    let Some(s) = schema else {
        return Err(sql_error(
            at,
            format!("column `{name}` is not allowed here (a constant is expected)"),
        ));
    };
    let i = s
        .columns()
        .iter()
        .position(|c| c.name.eq_ignore_ascii_case(name))
        .ok_or_else(|| sql_error(at, format!("table `{}` has no column `{name}`", s.name())))?;
    Ok((E::Col(i), Ty::of_column(s.columns()[i].ty)))
}

fn literal(v: &ast::Value, at: SqlPos) -> Result<(E, Ty)> {
    match v {
        ast::Value::Number(n, _) => {
            if let Ok(i) = n.parse::<i64>() {
                Ok((E::Lit(Value::Int(i)), Ty::Int))
            } else {
                match n.parse::<f64>() {
                    Ok(f) if f.is_finite() => Ok((E::Lit(Value::Float(f)), Ty::Float)),
                    _ => Err(sql_error(at, format!("number out of range: {n}"))),
                }
            }
        }
        ast::Value::SingleQuotedString(s) => Ok((E::Lit(Value::Str(s.clone())), Ty::Str)),
        ast::Value::Boolean(b) => Ok((E::Bool(*b), Ty::Bool)),
        ast::Value::Null => Err(sql_error(
            at,
            "NULL is not supported: every column has a value".into(),
        )),
        other => Err(sql_error(at, format!("literal not supported: {other}"))),
    }
}

fn binary(op: &BinaryOperator, l: Ty, r: Ty, at: SqlPos) -> Result<(Op, Ty)> {
    let arith = |o: Op| -> Result<(Op, Ty)> {
        if l.numeric() && r.numeric() {
            let ty = if l == Ty::Int && r == Ty::Int {
                Ty::Int
            } else {
                Ty::Float
            };
            Ok((o, ty))
        } else {
            Err(sql_error(
                at,
                format!(
                    "operator {op} needs numbers, found {} and {}",
                    l.name(),
                    r.name()
                ),
            ))
        }
    };
    let cmp = |o: Op| -> Result<(Op, Ty)> {
        if (l.numeric() && r.numeric())
            || (l == r && l != Ty::Bool)
            || (l == Ty::Bool && r == Ty::Bool && matches!(o, Op::Eq | Op::Ne))
        {
            Ok((o, Ty::Bool))
        } else {
            Err(sql_error(
                at,
                format!("cannot compare {} with {}", l.name(), r.name()),
            ))
        }
    };
    let logic = |o: Op| -> Result<(Op, Ty)> {
        if l == Ty::Bool && r == Ty::Bool {
            Ok((o, Ty::Bool))
        } else {
            Err(sql_error(
                at,
                format!(
                    "operator {op} needs booleans, found {} and {}",
                    l.name(),
                    r.name()
                ),
            ))
        }
    };
    match op {
        BinaryOperator::Plus => arith(Op::Add),
        BinaryOperator::Minus => arith(Op::Sub),
        BinaryOperator::Multiply => arith(Op::Mul),
        BinaryOperator::Divide => arith(Op::Div),
        BinaryOperator::Modulo => arith(Op::Mod),
        BinaryOperator::Eq => cmp(Op::Eq),
        BinaryOperator::NotEq => cmp(Op::Ne),
        BinaryOperator::Lt => cmp(Op::Lt),
        BinaryOperator::LtEq => cmp(Op::Le),
        BinaryOperator::Gt => cmp(Op::Gt),
        BinaryOperator::GtEq => cmp(Op::Ge),
        BinaryOperator::And => logic(Op::And),
        BinaryOperator::Or => logic(Op::Or),
        _ => Err(sql_error(at, format!("operator {op} is not supported"))),
    }
}

fn as_f64(v: &Value) -> f64 {
    match v {
        Value::Int(i) => *i as f64,
        Value::Float(f) => *f,
        _ => f64::NAN,
    }
}

/// Evaluates a compiled expression on `row` (`None` for constant expressions).
pub(crate) fn eval(e: &E, row: Option<RowRef<'_>>) -> Result<V> {
    Ok(match e {
        E::Col(i) => match row.and_then(|r| r.get(*i)) {
            Some(v) => V::Val(v.to_value()),
            None => {
                return Err(sql_error(
                    SqlPos::default(),
                    "column value outside a row".into(),
                ))
            }
        },
        E::Lit(v) => V::Val(v.clone()),
        E::Bool(b) => V::Bool(*b),
        E::Neg(x) => match eval(x, row)? {
            V::Val(Value::Int(i)) => V::Val(Value::Int(i.checked_neg().ok_or_else(|| {
                sql_error(SqlPos::default(), "integer overflow in negation".into())
            })?)),
            V::Val(Value::Float(f)) => V::Val(Value::Float(-f)),
            v => v,
        },
        E::Not(x) => match eval(x, row)? {
            V::Bool(b) => V::Bool(!b),
            v => v,
        },
        E::Bin(l, op, r, at) => {
            if matches!(op, Op::And | Op::Or) {
                let lb = eval(l, row)? == V::Bool(true);
                return Ok(match op {
                    Op::And if !lb => V::Bool(false),
                    Op::Or if lb => V::Bool(true),
                    _ => V::Bool(eval(r, row)? == V::Bool(true)),
                });
            }
            let (a, b) = (eval(l, row)?, eval(r, row)?);
            bin(&a, *op, &b, *at)?
        }
    })
}

fn bin(a: &V, op: Op, b: &V, at: SqlPos) -> Result<V> {
    use std::cmp::Ordering as O;
    let overflow = || sql_error(at, "integer overflow".into());
    let ord = match (a, b) {
        (V::Val(Value::Int(x)), V::Val(Value::Int(y))) => {
            let v = match op {
                Op::Add => x.checked_add(*y).ok_or_else(overflow)?,
                Op::Sub => x.checked_sub(*y).ok_or_else(overflow)?,
                Op::Mul => x.checked_mul(*y).ok_or_else(overflow)?,
                Op::Div | Op::Mod if *y == 0 => {
                    return Err(sql_error(at, "division by zero".into()))
                }
                Op::Div => x.checked_div(*y).ok_or_else(overflow)?,
                Op::Mod => x.checked_rem(*y).ok_or_else(overflow)?,
                _ => return Ok(V::Bool(test(op, x.cmp(y)))),
            };
            return Ok(V::Val(Value::Int(v)));
        }
        (
            V::Val(x @ (Value::Int(_) | Value::Float(_))),
            V::Val(y @ (Value::Int(_) | Value::Float(_))),
        ) => {
            let (x, y) = (as_f64(x), as_f64(y));
            let v = match op {
                Op::Add => x + y,
                Op::Sub => x - y,
                Op::Mul => x * y,
                Op::Div | Op::Mod if y == 0.0 => {
                    return Err(sql_error(at, "division by zero".into()))
                }
                Op::Div => x / y,
                Op::Mod => x % y,
                _ => return Ok(V::Bool(x.partial_cmp(&y).is_some_and(|o| test(op, o)))),
            };
            return Ok(V::Val(Value::Float(v)));
        }
        (V::Val(Value::Str(x)), V::Val(Value::Str(y))) => x.cmp(y),
        (V::Bool(x), V::Bool(y)) => x.cmp(y),
        _ => O::Less,
    };
    Ok(V::Bool(test(op, ord)))
}

fn test(op: Op, o: std::cmp::Ordering) -> bool {
    use std::cmp::Ordering as O;
    match op {
        Op::Eq => o == O::Equal,
        Op::Ne => o != O::Equal,
        Op::Lt => o == O::Less,
        Op::Le => o != O::Greater,
        Op::Gt => o == O::Greater,
        Op::Ge => o != O::Less,
        _ => false,
    }
}
