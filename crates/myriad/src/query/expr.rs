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
    /// Arrays exist only as procedure parameters; elements are scalars.
    IntArray,
    FloatArray,
    StrArray,
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
            Ty::IntArray => "INT[]",
            Ty::FloatArray => "DOUBLE[]",
            Ty::StrArray => "VARCHAR[]",
        }
    }
    /// The element type of an array type.
    pub(crate) fn element(self) -> Option<Ty> {
        match self {
            Ty::IntArray => Some(Ty::Int),
            Ty::FloatArray => Some(Ty::Float),
            Ty::StrArray => Some(Ty::Str),
            _ => None,
        }
    }
    /// Can a value of type `from` be stored where `self` is expected (INT widens to DOUBLE)?
    pub(crate) fn accepts(self, from: Ty) -> bool {
        self == from || (self == Ty::Float && from == Ty::Int)
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
    /// A procedure variable or parameter (a slot of the frame).
    Var(usize),
    /// Element of an array variable, 1-based as in PostgreSQL.
    Elem(usize, Box<E>, SqlPos),
    /// `array[i]` with `i` a variable (a loop's `ks[i]`): one dispatch instead of two.
    ElemVar(usize, usize, SqlPos),
    /// Number of elements of an array variable.
    Len(usize),
    /// `arr || x`: INT array variable `arr` with `x` appended (PostgreSQL's array append).
    Append(usize, Box<E>),
    /// `x = ANY(arr)`: does INT array variable `arr` hold `x`?
    AnyEq(Box<E>, usize),
    /// String concatenation (`||`); numbers are rendered as text.
    Concat(Box<E>, Box<E>),
    /// `substring(s FROM start [FOR len])`, 1-based, by characters.
    Substr(Box<E>, Box<E>, Option<Box<E>>),
    Lit(Value),
    Bool(bool),
    Neg(Box<E>),
    Not(Box<E>),
    Bin(Box<E>, Op, Box<E>, SqlPos),
}

impl E {
    /// Whether `self` and `o` compute the same thing (they differ at most in source
    /// positions).
    pub(crate) fn same(&self, o: &E) -> bool {
        match (self, o) {
            (E::Col(a), E::Col(b)) | (E::Var(a), E::Var(b)) | (E::Len(a), E::Len(b)) => a == b,
            (E::Elem(a, x, _), E::Elem(b, y, _)) | (E::Append(a, x), E::Append(b, y)) => {
                a == b && x.same(y)
            }
            (E::AnyEq(x, a), E::AnyEq(y, b)) => a == b && x.same(y),
            (E::ElemVar(a, i, _), E::ElemVar(b, j, _)) => a == b && i == j,
            (E::Concat(a, b), E::Concat(c, d)) => a.same(c) && b.same(d),
            (E::Substr(a, b, c), E::Substr(x, y, z)) => {
                a.same(x)
                    && b.same(y)
                    && match (c, z) {
                        (Some(c), Some(z)) => c.same(z),
                        (None, None) => true,
                        _ => false,
                    }
            }
            (E::Lit(a), E::Lit(b)) => a == b,
            (E::Bool(a), E::Bool(b)) => a == b,
            (E::Neg(a), E::Neg(b)) | (E::Not(a), E::Not(b)) => a.same(b),
            (E::Bin(a, p, b, _), E::Bin(c, q, d, _)) => p == q && a.same(c) && b.same(d),
            _ => false,
        }
    }

    /// Calls `f` with every column of the current row this expression reads.
    pub(crate) fn for_each_col(&self, f: &mut impl FnMut(usize)) {
        match self {
            E::Col(c) => f(*c),
            E::Var(_) | E::ElemVar(..) | E::Len(_) | E::Lit(_) | E::Bool(_) => {}
            E::Elem(_, x, _) | E::Neg(x) | E::Not(x) | E::Append(_, x) | E::AnyEq(x, _) => {
                x.for_each_col(f)
            }
            E::Concat(a, b) | E::Bin(a, _, b, _) => {
                a.for_each_col(f);
                b.for_each_col(f);
            }
            E::Substr(a, b, c) => {
                a.for_each_col(f);
                b.for_each_col(f);
                if let Some(c) = c {
                    c.for_each_col(f);
                }
            }
        }
    }

    /// True if evaluating this expression reads a column of the current row.
    pub(crate) fn reads_row(&self) -> bool {
        match self {
            E::Col(_) => true,
            E::Var(_) | E::ElemVar(..) | E::Len(_) | E::Lit(_) | E::Bool(_) => false,
            E::Elem(_, x, _) | E::Neg(x) | E::Not(x) | E::Append(_, x) | E::AnyEq(x, _) => {
                x.reads_row()
            }
            E::Concat(a, b) | E::Bin(a, _, b, _) => a.reads_row() || b.reads_row(),
            E::Substr(a, b, c) => {
                a.reads_row() || b.reads_row() || c.as_ref().is_some_and(|c| c.reads_row())
            }
        }
    }
}

/// A value during evaluation (booleans are not storable).
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum V {
    Val(Value),
    Bool(bool),
    /// An array (procedure parameters only).
    Arr(Vec<Value>),
    /// An INT array, unboxed (the common case: keys and codes passed to a procedure).
    IntArr(Vec<i64>),
}

impl V {
    /// The value to store in a column or key (booleans and arrays cannot be stored).
    pub(crate) fn stored(self, at: SqlPos) -> Result<Value> {
        match self {
            V::Val(v) => Ok(v),
            V::Bool(_) => Err(sql_error(at, "a boolean cannot be stored".into())),
            V::Arr(_) | V::IntArr(_) => Err(sql_error(at, "an array cannot be stored".into())),
        }
    }
}

/// What names mean while compiling an expression: the columns of the table the statement
/// reads (if any) and the procedure's variables (slot = position).
#[derive(Clone, Copy, Default)]
pub(crate) struct Scope<'a> {
    pub table: Option<&'a TableSchema>,
    pub vars: &'a [(String, Ty)],
}

/// Where `e` starts. Follows left operands in a loop: `Spanned::span` recurses through the
/// whole subtree, and calling it at every level of a long chain would stack one span
/// walk on every compile frame.
fn pos(mut e: &Expr) -> SqlPos {
    loop {
        e = match e {
            Expr::BinaryOp { left, .. } => left,
            Expr::InList { expr, .. } | Expr::AnyOp { left: expr, .. } => expr,
            _ => break,
        };
    }
    let s = e.span().start;
    SqlPos {
        line: s.line,
        column: s.column,
    }
}

/// Compiles `e` against `schema` (`None`: a constant expression, no columns allowed).
pub(crate) fn compile(e: &Expr, schema: Option<&TableSchema>) -> Result<(E, Ty)> {
    compile_in(
        e,
        Scope {
            table: schema,
            vars: &[],
        },
    )
}

/// Compiles `e` in `scope`: names resolve to the table's columns or to variables (a name that
/// is both is ambiguous), types are checked.
///
/// The arithmetic, comparison and logic operators, the only ones whose chains can be long
/// (`crate::query::nesting` bounds them), recurse here in a small frame; every other form is
/// compiled by [`compile_other`], whose frame is large in an unoptimised build.
pub(crate) fn compile_in(e: &Expr, scope: Scope<'_>) -> Result<(E, Ty)> {
    match e {
        Expr::Nested(inner) => compile_in(inner, scope),
        Expr::BinaryOp { left, op, right } if *op != BinaryOperator::StringConcat => {
            let (l, lt) = compile_in(left, scope)?;
            let (r, rt) = compile_in(right, scope)?;
            let at = pos(e);
            let (o, ty) = binary(op, lt, rt, at)?;
            Ok((E::Bin(Box::new(l), o, Box::new(r), at), ty))
        }
        e => compile_other(e, scope),
    }
}

#[inline(never)]
fn compile_other(e: &Expr, scope: Scope<'_>) -> Result<(E, Ty)> {
    let at = pos(e);
    let schema = scope.table;
    let compile = |e: &Expr, _: Option<&TableSchema>| compile_in(e, scope);
    match e {
        Expr::Nested(inner) => compile(inner, schema),
        Expr::Identifier(id) => name(&id.value, scope, at),
        Expr::CompoundIdentifier(parts)
            if parts.len() == 2 && var(&dotted(parts), scope).is_some() =>
        {
            name(&dotted(parts), scope, at)
        }
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
        Expr::Value(ast::ValueWithSpan {
            value: ast::Value::Placeholder(ph),
            ..
        }) => match var(ph, scope) {
            Some(v) => Ok((E::Var(v), scope.vars[v].1)),
            None => Err(sql_error(
                at,
                format!(
                    "no value for parameter {ph} ({} given)",
                    scope
                        .vars
                        .iter()
                        .filter(|(n, _)| n.starts_with('$'))
                        .count()
                ),
            )),
        },
        Expr::Value(v) => literal(&v.value, at),
        Expr::UnaryOp {
            op: UnaryOperator::Minus,
            expr: inner,
        } if matches!(inner.as_ref(), Expr::Value(v) if matches!(v.value, ast::Value::Number(..))) => {
            match inner.as_ref() {
                Expr::Value(ast::ValueWithSpan {
                    value: ast::Value::Number(n, _),
                    ..
                }) => number(n, true, at),
                _ => Err(sql_error(at, format!("expression not supported: {e}"))),
            }
        }
        Expr::InList {
            expr,
            list,
            negated,
        } => in_list(expr, list, *negated, scope, at),
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
        Expr::BinaryOp {
            left,
            op: BinaryOperator::StringConcat,
            right,
        } => {
            let (l, lt) = compile(left, schema)?;
            let (r, rt) = compile(right, schema)?;
            if let (E::Var(arr), Ty::IntArray, Ty::Int) = (&l, lt, rt) {
                return Ok((E::Append(*arr, Box::new(r)), Ty::IntArray));
            }
            if lt.element().is_some() || rt.element().is_some() || (lt != Ty::Str && rt != Ty::Str)
            {
                return Err(sql_error(
                    at,
                    format!(
                        "operator || needs a string, found {} and {}",
                        lt.name(),
                        rt.name()
                    ),
                ));
            }
            Ok((E::Concat(Box::new(l), Box::new(r)), Ty::Str))
        }
        Expr::CompoundFieldAccess { root, access_chain } => {
            let [ast::AccessExpr::Subscript(ast::Subscript::Index { index })] =
                access_chain.as_slice()
            else {
                return Err(sql_error(at, format!("expression not supported: {e}")));
            };
            let (arr, at_) = array_var(root, scope, at)?;
            let (i, it) = compile(index, schema)?;
            if it != Ty::Int {
                return Err(sql_error(
                    pos(index),
                    format!("an array index must be INT, found {}", it.name()),
                ));
            }
            Ok(match i {
                E::Var(iv) => (E::ElemVar(arr, iv, at), at_),
                i => (E::Elem(arr, Box::new(i), at), at_),
            })
        }
        Expr::Substring {
            expr,
            substring_from,
            substring_for,
            ..
        } => {
            let (s, st) = compile(expr, schema)?;
            if st != Ty::Str {
                return Err(sql_error(
                    at,
                    format!("substring needs a string, found {}", st.name()),
                ));
            }
            let int = |x: &Expr| -> Result<Box<E>> {
                match compile(x, schema)? {
                    (c, Ty::Int) => Ok(Box::new(c)),
                    (_, t) => Err(sql_error(
                        pos(x),
                        format!("substring positions must be INT, found {}", t.name()),
                    )),
                }
            };
            let from = match substring_from {
                Some(f) => int(f)?,
                None => Box::new(E::Lit(Value::Int(1))),
            };
            let len = substring_for.as_deref().map(int).transpose()?;
            Ok((E::Substr(Box::new(s), from, len), Ty::Str))
        }
        Expr::Function(f) => function(f, scope, at),
        Expr::AnyOp {
            left,
            compare_op: BinaryOperator::Eq,
            right,
            ..
        } => {
            let (x, xt) = compile(left, schema)?;
            let (arr, et) = array_var(right, scope, at)?;
            if xt != Ty::Int || et != Ty::Int {
                return Err(sql_error(
                    at,
                    format!("= ANY needs an INT and an INT array, found {}", xt.name()),
                ));
            }
            Ok((E::AnyEq(Box::new(x), arr), Ty::Bool))
        }
        _ => Err(sql_error(at, format!("expression not supported: {e}"))),
    }
}

fn dotted(parts: &[ast::Ident]) -> String {
    format!("{}.{}", parts[0].value, parts[1].value)
}

fn var(name: &str, scope: Scope<'_>) -> Option<usize> {
    scope
        .vars
        .iter()
        .position(|(n, _)| n.eq_ignore_ascii_case(name))
}

/// A column of the scope's table or a variable.
fn name(n: &str, scope: Scope<'_>, at: SqlPos) -> Result<(E, Ty)> {
    let col = scope.table.and_then(|s| s.column_index(n).ok());
    match (col, var(n, scope)) {
        (Some(_), Some(_)) => Err(sql_error(
            at,
            format!(
                "`{n}` is ambiguous: both a column of `{}` and a variable",
                scope.table.map(|s| s.name()).unwrap_or_default()
            ),
        )),
        (None, Some(v)) => Ok((E::Var(v), scope.vars[v].1)),
        _ if scope.table.is_none() && scope.vars.iter().any(|(n, _)| !n.starts_with('$')) => {
            Err(sql_error(at, format!("unknown variable `{n}`")))
        }
        _ => column(n, scope.table, at),
    }
}

/// An array variable named by `e`.
fn array_var(e: &Expr, scope: Scope<'_>, at: SqlPos) -> Result<(usize, Ty)> {
    let n = match e {
        Expr::Identifier(id) => id.value.clone(),
        _ => {
            return Err(sql_error(
                at,
                format!("only an array variable can be indexed: {e}"),
            ))
        }
    };
    match var(&n, scope) {
        Some(v) => match scope.vars[v].1.element() {
            Some(t) => Ok((v, t)),
            None => Err(sql_error(
                at,
                format!("`{n}` is {}, not an array", scope.vars[v].1.name()),
            )),
        },
        None => Err(sql_error(at, format!("unknown array variable `{n}`"))),
    }
}

/// The built-in functions usable in expressions (aggregates are handled by the statements).
fn function(f: &ast::Function, scope: Scope<'_>, at: SqlPos) -> Result<(E, Ty)> {
    let fname = f.name.to_string().to_ascii_lowercase();
    let args: Vec<&Expr> = match &f.args {
        ast::FunctionArguments::List(l) => l
            .args
            .iter()
            .map(|a| match a {
                ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(x)) => Ok(x),
                _ => Err(sql_error(at, format!("unsupported argument in {fname}()"))),
            })
            .collect::<Result<_>>()?,
        _ => return Err(sql_error(at, format!("function not supported: {fname}"))),
    };
    match (fname.as_str(), args.as_slice()) {
        ("array_length", [a, _]) | ("cardinality", [a]) => {
            let (v, _) = array_var(a, scope, at)?;
            Ok((E::Len(v), Ty::Int))
        }
        ("substr" | "substring", [s, from, rest @ ..]) if rest.len() <= 1 => {
            let (s, st) = compile_in(s, scope)?;
            let (from, ft) = compile_in(from, scope)?;
            let len = match rest {
                [l] => Some(compile_in(l, scope)?),
                _ => None,
            };
            if st != Ty::Str || ft != Ty::Int || len.as_ref().is_some_and(|l| l.1 != Ty::Int) {
                return Err(sql_error(at, "substr(string, INT [, INT]) expected".into()));
            }
            Ok((
                E::Substr(Box::new(s), Box::new(from), len.map(|l| Box::new(l.0))),
                Ty::Str,
            ))
        }
        _ => Err(sql_error(
            at,
            format!(
                "function not supported: {fname} with {} arguments",
                args.len()
            ),
        )),
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
        ast::Value::Number(n, _) => number(n, false, at),
        ast::Value::SingleQuotedString(s) => Ok((E::Lit(Value::Str(s.clone())), Ty::Str)),
        ast::Value::Boolean(b) => Ok((E::Bool(*b), Ty::Bool)),
        ast::Value::Null => Err(sql_error(
            at,
            "NULL is not supported: every column has a value".into(),
        )),
        other => Err(sql_error(at, format!("literal not supported: {other}"))),
    }
}

/// A numeric literal (`negative`: with a minus sign before it, so that
/// `-9223372036854775808` is an INT). Digits only make an INT, and one out of range is an
/// error, never silently a DOUBLE; a decimal point or exponent makes a DOUBLE.
fn number(n: &str, negative: bool, at: SqlPos) -> Result<(E, Ty)> {
    let integral = n.bytes().all(|b| b.is_ascii_digit() || b == b'_');
    if integral {
        let digits: String = n.chars().filter(|&c| c != '_').collect();
        let text = if negative {
            format!("-{digits}")
        } else {
            digits
        };
        return match text.parse::<i64>() {
            Ok(i) => Ok((E::Lit(Value::Int(i)), Ty::Int)),
            Err(_) => Err(sql_error(
                at,
                format!("integer out of range: {text} (INT is 64-bit)"),
            )),
        };
    }
    match n.parse::<f64>() {
        Ok(f) if f.is_finite() => Ok((
            E::Lit(Value::Float(if negative { -f } else { f })),
            Ty::Float,
        )),
        _ => Err(sql_error(
            at,
            format!("number out of range or malformed: {n}"),
        )),
    }
}

/// `x [NOT] IN (a, b, ...)`: a balanced tree of `x = a OR x = b ...`, so a list of any
/// length is only log2(n) deep.
fn in_list(
    x: &Expr,
    list: &[Expr],
    negated: bool,
    scope: Scope<'_>,
    at: SqlPos,
) -> Result<(E, Ty)> {
    if list.is_empty() {
        return Err(sql_error(at, "IN needs at least one value".into()));
    }
    let (l, lt) = compile_in(x, scope)?;
    let mut terms = Vec::with_capacity(list.len());
    for item in list {
        let (r, rt) = compile_in(item, scope)?;
        let (op, _) = binary(&BinaryOperator::Eq, lt, rt, pos(item))?;
        terms.push(E::Bin(Box::new(l.clone()), op, Box::new(r), pos(item)));
    }
    fn balance(mut terms: Vec<E>, at: SqlPos) -> E {
        if terms.len() == 1 {
            if let Some(t) = terms.pop() {
                return t;
            }
        }
        let right = terms.split_off(terms.len() / 2);
        E::Bin(
            Box::new(balance(terms, at)),
            Op::Or,
            Box::new(balance(right, at)),
            at,
        )
    }
    let e = balance(terms, at);
    Ok((if negated { E::Not(Box::new(e)) } else { e }, Ty::Bool))
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
            || (l == r && l != Ty::Bool && l.element().is_none())
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

/// Fast path for integer expressions (literals, variables, array elements, `+ - *`, and
/// INT columns of `row`; the row by reference: a 24-byte argument copied through the stack
/// stalls on store forwarding): `None` whenever the general [`eval_in`] is needed, including for
/// every error (overflow, index out of range), which it then reports.
///
/// The leaves (literal, variable, loop-indexed element) are inlined into every caller; a
/// call per leaf was most of the interpreter's expression cost.
#[inline(always)]
pub(crate) fn eval_int(e: &E, row: Option<&RowRef<'_>>, vars: &[V]) -> Option<i64> {
    match e {
        E::Lit(Value::Int(i)) => Some(*i),
        E::Var(v) => match &vars[*v] {
            V::Val(Value::Int(i)) => Some(*i),
            _ => None,
        },
        E::ElemVar(a, iv, _) => match vars[*iv] {
            V::Val(Value::Int(i)) => int_elem(&vars[*a], i),
            _ => None,
        },
        _ => eval_int_inner(e, row, vars),
    }
}

/// `eval_int` of the expressions that are not leaves.
#[inline(never)]
fn eval_int_inner(e: &E, row: Option<&RowRef<'_>>, vars: &[V]) -> Option<i64> {
    match e {
        E::Col(c) => row?.int_at(*c),
        E::Len(a) => Some(int_len(&vars[*a])),
        E::Elem(a, i, _) => int_elem(&vars[*a], eval_int(i, row, vars)?),
        E::Bin(l, op, r, _) => {
            let (a, b) = (eval_int(l, row, vars)?, eval_int(r, row, vars)?);
            match op {
                Op::Add => a.checked_add(b),
                Op::Sub => a.checked_sub(b),
                Op::Mul => a.checked_mul(b),
                Op::Mod if b != 0 => a.checked_rem(b),
                _ => None,
            }
        }
        _ => None,
    }
}

/// `cardinality(a)`, as `eval_in` gives it: an array's length, 0 for anything else (an
/// array variable not yet assigned).
#[inline]
pub(crate) fn int_len(arr: &V) -> i64 {
    match arr {
        V::IntArr(xs) => xs.len() as i64,
        V::Arr(xs) => xs.len() as i64,
        _ => 0,
    }
}

/// `x = ANY(arr)`, as `eval_in` gives it: for an INT array whether it holds `x`, false for
/// a non-array (one not yet assigned), `None` for an array of other values (the general
/// evaluator decides).
#[inline]
pub(crate) fn int_any(arr: &V, x: i64) -> Option<bool> {
    match arr {
        V::IntArr(xs) => Some(xs.contains(&x)),
        V::Arr(_) => None,
        _ => Some(false),
    }
}

/// Element `i` (1-based) of an INT array, if in range.
#[inline]
pub(crate) fn int_elem(arr: &V, i: i64) -> Option<i64> {
    let i = usize::try_from(i).ok()?.checked_sub(1)?;
    match arr {
        V::IntArr(xs) => xs.get(i).copied(),
        V::Arr(xs) => match xs.get(i)? {
            Value::Int(x) => Some(*x),
            _ => None,
        },
        _ => None,
    }
}

/// Fast path for conditions over integers (comparisons, NOT, AND, OR); `None`: use
/// [`eval_in`].
#[inline]
pub(crate) fn eval_cond(e: &E, row: Option<&RowRef<'_>>, vars: &[V]) -> Option<bool> {
    match e {
        E::Bool(b) => Some(*b),
        E::Not(x) => Some(!eval_cond(x, row, vars)?),
        E::Bin(l, Op::And, r, _) => Some(eval_cond(l, row, vars)? && eval_cond(r, row, vars)?),
        E::Bin(l, Op::Or, r, _) => Some(eval_cond(l, row, vars)? || eval_cond(r, row, vars)?),
        E::Bin(l, op @ (Op::Eq | Op::Ne | Op::Lt | Op::Le | Op::Gt | Op::Ge), r, _) => {
            let (a, b) = (eval_int(l, row, vars)?, eval_int(r, row, vars)?);
            Some(test(*op, a.cmp(&b)))
        }
        E::Var(v) => match &vars[*v] {
            V::Bool(b) => Some(*b),
            _ => None,
        },
        E::AnyEq(x, a) => int_any(&vars[*a], eval_int(x, row, vars)?),
        _ => None,
    }
}

/// A condition's truth: the fast path, else the general evaluator.
#[inline]
pub(crate) fn holds(e: &E, row: Option<RowRef<'_>>, vars: &[V]) -> Result<bool> {
    match eval_cond(e, row.as_ref(), vars) {
        Some(b) => Ok(b),
        None => Ok(eval_in(e, row, vars)? == V::Bool(true)),
    }
}

/// An expression's value: the integer fast path, else the general evaluator.
#[inline]
pub(crate) fn value_of(e: &E, row: Option<RowRef<'_>>, vars: &[V]) -> Result<V> {
    match eval_int(e, row.as_ref(), vars) {
        Some(i) => Ok(V::Val(Value::Int(i))),
        None => eval_in(e, row, vars),
    }
}

/// The elements of an INT array value (empty for anything else: the compiler checked types).
fn int_array(v: &V) -> Vec<i64> {
    match v {
        V::IntArr(xs) => xs.clone(),
        V::Arr(xs) => xs.iter().filter_map(Value::as_i64).collect(),
        _ => Vec::new(),
    }
}

fn int_of(v: V) -> Result<i64> {
    match v {
        V::Val(Value::Int(i)) => Ok(i),
        other => Err(sql_error(
            SqlPos::default(),
            format!("an INT array element must be INT, found {other:?}"),
        )),
    }
}

/// A value as text (for `||`).
fn text(v: V) -> String {
    match v {
        V::Val(Value::Str(s)) => s,
        V::Val(Value::Int(i)) => i.to_string(),
        V::Val(Value::Float(f)) => f.to_string(),
        V::Val(Value::Bytes(b)) => String::from_utf8_lossy(&b).into_owned(),
        V::Bool(b) => b.to_string(),
        V::Arr(_) | V::IntArr(_) => String::new(),
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
    eval_in(e, row, &[])
}

/// Evaluates a compiled expression on `row` with the variables `vars`. Binary operators,
/// whose chains can be long, recurse here in a small frame; the rest is [`eval_other`].
pub(crate) fn eval_in(e: &E, row: Option<RowRef<'_>>, vars: &[V]) -> Result<V> {
    match e {
        E::Bin(l, op, r, at) => {
            if matches!(op, Op::And | Op::Or) {
                let lb = eval_in(l, row, vars)? == V::Bool(true);
                return Ok(match op {
                    Op::And if !lb => V::Bool(false),
                    Op::Or if lb => V::Bool(true),
                    _ => V::Bool(eval_in(r, row, vars)? == V::Bool(true)),
                });
            }
            let (a, b) = (eval_in(l, row, vars)?, eval_in(r, row, vars)?);
            bin(&a, *op, &b, *at)
        }
        e => eval_other(e, row, vars),
    }
}

#[inline(never)]
fn eval_other(e: &E, row: Option<RowRef<'_>>, vars: &[V]) -> Result<V> {
    let eval = |e: &E, row: Option<RowRef<'_>>| eval_in(e, row, vars);
    Ok(match e {
        E::Var(v) => vars[*v].clone(),
        E::Elem(_, _, at) | E::ElemVar(_, _, at) => {
            let (a, i) = match e {
                E::Elem(a, i, _) => (a, eval(i, row)?),
                E::ElemVar(a, iv, _) => (a, vars[*iv].clone()),
                _ => unreachable!("matched above"),
            };
            let V::Val(Value::Int(i)) = i else {
                return Err(sql_error(*at, "array index is not an integer".into()));
            };
            let len = match &vars[*a] {
                V::Arr(xs) => xs.len(),
                V::IntArr(xs) => xs.len(),
                _ => return Err(sql_error(*at, "not an array".into())),
            };
            if i < 1 || (i as u64) > len as u64 {
                return Err(sql_error(
                    *at,
                    format!("array index {i} out of range 1..{len}"),
                ));
            }
            match &vars[*a] {
                V::IntArr(xs) => V::Val(Value::Int(xs[(i - 1) as usize])),
                V::Arr(xs) => V::Val(xs[(i - 1) as usize].clone()),
                _ => return Err(sql_error(*at, "not an array".into())),
            }
        }
        E::Len(a) => V::Val(Value::Int(int_len(&vars[*a]))),
        E::Append(a, x) => {
            let mut xs = int_array(&vars[*a]);
            xs.push(int_of(eval(x, row)?)?);
            V::IntArr(xs)
        }
        E::AnyEq(x, a) => {
            let x = int_of(eval(x, row)?)?;
            V::Bool(int_array(&vars[*a]).contains(&x))
        }
        E::Concat(l, r) => {
            let mut s = text(eval(l, row)?);
            s.push_str(&text(eval(r, row)?));
            V::Val(Value::Str(s))
        }
        E::Substr(s, from, len) => {
            let s = text(eval(s, row)?);
            let int = |v: V| match v {
                V::Val(Value::Int(i)) => i,
                _ => 0,
            };
            // PostgreSQL semantics: characters [from, from+len) intersected with [1, n].
            let from = int(eval(from, row)?);
            let end = match len {
                Some(l) => {
                    let l = int(eval(l, row)?);
                    if l < 0 {
                        return Err(sql_error(
                            SqlPos::default(),
                            "negative substring length not allowed".into(),
                        ));
                    }
                    from.saturating_add(l)
                }
                None => i64::MAX,
            };
            let (lo, hi) = (from.max(1), end);
            let out: String = if hi <= lo {
                String::new()
            } else {
                s.chars()
                    .skip((lo - 1) as usize)
                    .take(usize::try_from(hi - lo).unwrap_or(usize::MAX))
                    .collect()
            };
            V::Val(Value::Str(out))
        }
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
        E::Bin(..) => eval_in(e, row, vars)?,
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

pub(crate) fn test(op: Op, o: std::cmp::Ordering) -> bool {
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
