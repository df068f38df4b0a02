//! The procedure language's front end: `CREATE PROCEDURE name(params) AS $$ body $$` with a
//! PL/pgSQL-like body, parsed on top of `sqlparser`'s parser (its tokenizer, expressions,
//! types and `INSERT`/`UPDATE`/`DELETE`), so only the control statements are parsed here.
//! Positions in errors are positions in the whole script, inside the body too.

use super::surface::{Def, Select, Stmt};
use crate::error::Result;
use crate::query::expr::Ty;
use crate::query::{at_span, column_type, name_of, parse_error, sql_error, SqlPos};
use sqlparser::ast::{
    self, AssignmentTarget, Expr, FromTable, SelectItem, SetExpr, Spanned, Statement, TableObject,
};
use sqlparser::dialect::PostgreSqlDialect;
use sqlparser::keywords::Keyword;
use sqlparser::parser::Parser;
use sqlparser::tokenizer::{Location, Span, Token, TokenWithSpan, Tokenizer};

/// One statement of a script.
pub(crate) enum Item {
    Sql(Box<Statement>),
    Procedure(Box<Def>, bool),
}

fn pos(t: &TokenWithSpan) -> SqlPos {
    at_span(t.span)
}

fn err<T>(t: &TokenWithSpan, message: String) -> Result<T> {
    Err(sql_error(pos(t), message))
}

fn word_is(t: &TokenWithSpan, k: Keyword) -> bool {
    matches!(&t.token, Token::Word(w) if w.keyword == k)
}

/// Is `t` the word `w` (for PL/pgSQL words `sqlparser` has no keyword for, like LOOP)?
fn is_word(t: &TokenWithSpan, w: &str) -> bool {
    matches!(&t.token, Token::Word(x) if x.quote_style.is_none() && x.value.eq_ignore_ascii_case(w))
}

fn eat_word(p: &mut Parser<'_>, w: &str) -> bool {
    if is_word(&p.peek_token(), w) {
        p.next_token();
        true
    } else {
        false
    }
}

fn expect_word(p: &mut Parser<'_>, w: &str) -> Result<()> {
    let t = p.peek_token();
    if eat_word(p, w) {
        Ok(())
    } else {
        err(&t, format!("expected {w}, found `{}`", t.token))
    }
}

/// The byte offset in `sql` of a parser location (1-based line and character column).
fn byte_offset(sql: &str, at: Location) -> usize {
    let mut line = 1;
    let mut col = 1;
    for (i, c) in sql.char_indices() {
        if line == at.line && col == at.column {
            return i;
        }
        if c == '\n' {
            line += 1;
            col = 1;
        } else {
            col += 1;
        }
    }
    sql.len()
}

/// Parses a script of SQL statements and procedure definitions, separated by `;`.
pub(crate) fn script(sql: &str) -> Result<Vec<Item>> {
    let dialect = PostgreSqlDialect {};
    let tokens = Tokenizer::new(&dialect, sql)
        .tokenize_with_location()
        .map_err(|e| {
            sql_error(
                SqlPos {
                    line: e.location.line,
                    column: e.location.column,
                },
                e.message,
            )
        })?;
    // Before any tree is built: a too-deep one cannot even be dropped safely.
    crate::query::nesting::check(&tokens, false)?;
    let mut p = Parser::new(&dialect).with_tokens_with_locations(tokens);
    let mut out = Vec::new();
    loop {
        while p.consume_token(&Token::SemiColon) {}
        if p.peek_token().token == Token::EOF {
            return Ok(out);
        }
        let create = word_is(&p.peek_nth_token(0), Keyword::CREATE);
        let replace = create
            && word_is(&p.peek_nth_token(1), Keyword::OR)
            && word_is(&p.peek_nth_token(2), Keyword::REPLACE);
        let proc_at = if replace { 3 } else { 1 };
        if create && word_is(&p.peek_nth_token(proc_at), Keyword::PROCEDURE) {
            let from = p.peek_token().span.start;
            let mut d = create_procedure(&mut p)?;
            let to = p.peek_token();
            let end = match to.token {
                Token::EOF => sql.len(),
                _ => byte_offset(sql, to.span.start),
            };
            d.source = sql
                .get(byte_offset(sql, from)..end)
                .unwrap_or_default()
                .trim()
                .to_string();
            out.push(Item::Procedure(Box::new(d), replace));
        } else {
            out.push(Item::Sql(Box::new(
                p.parse_statement().map_err(parse_error)?,
            )));
        }
        let t = p.peek_token();
        if !matches!(t.token, Token::SemiColon | Token::EOF) {
            return err(
                &t,
                format!("expected `;` after the statement, found `{}`", t.token),
            );
        }
    }
}

fn ty_of(p: &mut Parser<'_>) -> Result<Ty> {
    let at = pos(&p.peek_token());
    let dt = p.parse_data_type().map_err(parse_error)?;
    var_type(&dt, at)
}

/// A variable or parameter type: a column type, BOOLEAN, or an array of a column type.
fn var_type(dt: &ast::DataType, at: SqlPos) -> Result<Ty> {
    use ast::DataType as D;
    match dt {
        D::Boolean | D::Bool => Ok(Ty::Bool),
        D::Array(ast::ArrayElemTypeDef::SquareBracket(inner, _))
        | D::Array(ast::ArrayElemTypeDef::AngleBracket(inner)) => match var_type(inner, at)? {
            Ty::Int => Ok(Ty::IntArray),
            Ty::Float => Ok(Ty::FloatArray),
            Ty::Str => Ok(Ty::StrArray),
            t => Err(sql_error(
                at,
                format!("arrays of {} are not supported", t.name()),
            )),
        },
        D::Varchar(None) | D::Text => Ok(Ty::Str),
        other => Ok(Ty::of_column(column_type(other, at)?)),
    }
}

fn create_procedure(p: &mut Parser<'_>) -> Result<Def> {
    let at = pos(&p.peek_token());
    p.expect_keyword(Keyword::CREATE).map_err(parse_error)?;
    let _ = p.parse_keywords(&[Keyword::OR, Keyword::REPLACE]);
    p.expect_keyword(Keyword::PROCEDURE).map_err(parse_error)?;
    let name = p.parse_identifier().map_err(parse_error)?.value;
    p.expect_token(&Token::LParen).map_err(parse_error)?;
    let mut params = Vec::new();
    if !p.consume_token(&Token::RParen) {
        loop {
            let n = p.parse_identifier().map_err(parse_error)?.value;
            params.push((n, ty_of(p)?));
            if p.consume_token(&Token::RParen) {
                break;
            }
            p.expect_token(&Token::Comma).map_err(parse_error)?;
        }
    }
    language(p)?;
    p.expect_keyword(Keyword::AS).map_err(parse_error)?;
    let body = p.next_token();
    let Token::DollarQuotedString(s) = &body.token else {
        return err(
            &body,
            format!(
                "expected the procedure body as a $$-quoted string, found `{}`",
                body.token
            ),
        );
    };
    // The body text starts after the opening `$tag$`.
    let open = 2 + s.tag.as_ref().map_or(0, |t| t.len()) as u64;
    let origin = Location::new(body.span.start.line, body.span.start.column + open);
    let (decls, stmts) = body_of(&s.value, origin)?;
    language(p)?;
    Ok(Def {
        name,
        params,
        decls,
        body: stmts,
        at,
        source: String::new(),
    })
}

/// An optional `LANGUAGE plpgsql` (the only language there is).
fn language(p: &mut Parser<'_>) -> Result<()> {
    if p.parse_keyword(Keyword::LANGUAGE) {
        let t = p.peek_token();
        let l = p.parse_identifier().map_err(parse_error)?;
        if !l.value.eq_ignore_ascii_case("plpgsql") && !l.value.eq_ignore_ascii_case("sql") {
            return err(&t, format!("unsupported procedure language `{}`", l.value));
        }
    }
    Ok(())
}

/// `a..b` is not a token sequence `sqlparser` knows (`1..` reads as a number); outside
/// string literals and comments it is rewritten to `a TO b` before tokenizing.
fn dots_to_keyword(body: &str) -> String {
    let mut out = String::with_capacity(body.len());
    let mut chars = body.chars().peekable();
    let (mut quote, mut comment) = (false, false);
    while let Some(c) = chars.next() {
        match c {
            '\'' if !comment => quote = !quote,
            '\n' => comment = false,
            '-' if !quote && chars.peek() == Some(&'-') => comment = true,
            '.' if !quote && !comment && chars.peek() == Some(&'.') => {
                chars.next();
                out.push_str(" TO ");
                continue;
            }
            _ => {}
        }
        out.push(c);
    }
    out
}

/// Declared variables with their initial values.
type Decls = Vec<(String, Ty, Option<Expr>)>;

fn body_of(text: &str, origin: Location) -> Result<(Decls, Vec<Stmt>)> {
    let dialect = PostgreSqlDialect {};
    let text = dots_to_keyword(text);
    let mut tokens = Tokenizer::new(&dialect, &text)
        .tokenize_with_location()
        .map_err(|e| {
            sql_error(
                SqlPos {
                    line: origin.line + e.location.line.saturating_sub(1),
                    column: e.location.column,
                },
                e.message,
            )
        })?;
    let shift = |l: Location| {
        if l.line == 1 {
            Location::new(origin.line, origin.column + l.column - 1)
        } else {
            Location::new(origin.line + l.line - 1, l.column)
        }
    };
    for t in &mut tokens {
        t.span = Span::new(shift(t.span.start), shift(t.span.end));
    }
    crate::query::nesting::check(&tokens, true)?;
    let mut p = Parser::new(&dialect).with_tokens_with_locations(tokens);
    let mut decls = Vec::new();
    if p.parse_keyword(Keyword::DECLARE) {
        while !p.peek_keyword(Keyword::BEGIN) {
            let n = p.parse_identifier().map_err(parse_error)?.value;
            let ty = ty_of(&mut p)?;
            let init = if p.consume_token(&Token::Assignment)
                || p.consume_token(&Token::Eq)
                || p.parse_keyword(Keyword::DEFAULT)
            {
                Some(p.parse_expr().map_err(parse_error)?)
            } else {
                None
            };
            p.expect_token(&Token::SemiColon).map_err(parse_error)?;
            decls.push((n, ty, init));
        }
    }
    p.expect_keyword(Keyword::BEGIN).map_err(parse_error)?;
    let stmts = block(&mut p, &["END"])?;
    p.expect_keyword(Keyword::END).map_err(parse_error)?;
    while p.consume_token(&Token::SemiColon) {}
    let t = p.peek_token();
    if t.token != Token::EOF {
        return err(&t, format!("unexpected `{}` after the body's END", t.token));
    }
    Ok((decls, stmts))
}

/// Statements up to (not including) one of the keywords `until`.
fn block(p: &mut Parser<'_>, until: &[&str]) -> Result<Vec<Stmt>> {
    let mut out = Vec::new();
    loop {
        let t = p.peek_token();
        if t.token == Token::EOF {
            return err(&t, "the body ends inside a block (missing END?)".into());
        }
        if until.iter().any(|k| is_word(&t, k)) {
            return Ok(out);
        }
        if let Some(s) = statement(p)? {
            out.push(s);
        }
    }
}

fn end_of_statement(p: &mut Parser<'_>) -> Result<()> {
    let t = p.peek_token();
    if p.consume_token(&Token::SemiColon) {
        Ok(())
    } else {
        err(&t, format!("expected `;`, found `{}`", t.token))
    }
}

fn statement(p: &mut Parser<'_>) -> Result<Option<Stmt>> {
    let t = p.peek_token();
    let at = pos(&t);
    let Token::Word(w) = &t.token else {
        return err(&t, format!("expected a statement, found `{}`", t.token));
    };
    let s =
        match w.keyword {
            Keyword::IF => {
                p.next_token();
                let mut arms = Vec::new();
                let cond = p.parse_expr().map_err(parse_error)?;
                p.expect_keyword(Keyword::THEN).map_err(parse_error)?;
                let stop = ["ELSIF", "ELSEIF", "ELSE", "END"];
                arms.push((cond, block(p, &stop)?));
                while eat_word(p, "ELSIF") || eat_word(p, "ELSEIF") {
                    let cond = p.parse_expr().map_err(parse_error)?;
                    p.expect_keyword(Keyword::THEN).map_err(parse_error)?;
                    arms.push((cond, block(p, &stop)?));
                }
                let otherwise = if p.parse_keyword(Keyword::ELSE) {
                    block(p, &["END"])?
                } else {
                    Vec::new()
                };
                p.expect_keyword(Keyword::END).map_err(parse_error)?;
                p.expect_keyword(Keyword::IF).map_err(parse_error)?;
                Stmt::If {
                    arms,
                    otherwise,
                    at,
                }
            }
            Keyword::FOR => {
                p.next_token();
                let var = p.parse_identifier().map_err(parse_error)?.value;
                p.expect_keyword(Keyword::IN).map_err(parse_error)?;
                let s = if p.peek_keyword(Keyword::SELECT) {
                    let (sel, into) = select(p)?;
                    if let Some((i, _)) = into {
                        return err(&i, "FOR ... IN SELECT takes no INTO".into());
                    }
                    expect_word(p, "LOOP")?;
                    let body = block(p, &["END"])?;
                    Stmt::ForRows { var, sel, body, at }
                } else {
                    let lo = p.parse_expr().map_err(parse_error)?;
                    p.expect_keyword(Keyword::TO).map_err(parse_error)?;
                    let hi = p.parse_expr().map_err(parse_error)?;
                    expect_word(p, "LOOP")?;
                    let body = block(p, &["END"])?;
                    Stmt::ForRange {
                        var,
                        lo,
                        hi,
                        body,
                        at,
                    }
                };
                p.expect_keyword(Keyword::END).map_err(parse_error)?;
                expect_word(p, "LOOP")?;
                s
            }
            Keyword::SELECT => {
                let (sel, into) = select(p)?;
                match into {
                    Some(i) => Stmt::SelectInto { sel, into: i.1, at },
                    None => return err(
                        &t,
                        "a SELECT in a procedure needs INTO variables (or use FOR row IN SELECT)"
                            .into(),
                    ),
                }
            }
            Keyword::UPDATE | Keyword::INSERT | Keyword::DELETE => {
                let s = p.parse_statement().map_err(parse_error)?;
                dml(&s, at)?
            }
            Keyword::RETURN => {
                p.next_token();
                let values = if p.peek_token().token == Token::SemiColon {
                    Vec::new()
                } else {
                    p.parse_comma_separated(Parser::parse_expr)
                        .map_err(parse_error)?
                };
                Stmt::Return { values, at }
            }
            Keyword::RAISE => {
                p.next_token();
                let _ = p.parse_keyword(Keyword::EXCEPTION);
                let fmt = p.next_token();
                let Token::SingleQuotedString(f) = &fmt.token else {
                    return err(
                        &fmt,
                        "RAISE needs a message string: RAISE EXCEPTION 'text %', value".into(),
                    );
                };
                let mut args = Vec::new();
                while p.consume_token(&Token::Comma) {
                    args.push(p.parse_expr().map_err(parse_error)?);
                }
                Stmt::Raise {
                    message: format_message(f, args, &fmt)?,
                    at,
                }
            }
            Keyword::ROLLBACK => {
                p.next_token();
                Stmt::Rollback { at }
            }
            Keyword::NULL => {
                p.next_token();
                end_of_statement(p)?;
                return Ok(None);
            }
            _ => {
                // `name := expr` (or `name = expr`).
                let n1 = p.peek_nth_token(1);
                if !matches!(n1.token, Token::Assignment | Token::Eq) {
                    return err(&t, format!("expected a statement, found `{}`", t.token));
                }
                let var = p.parse_identifier().map_err(parse_error)?.value;
                p.next_token();
                let value = p.parse_expr().map_err(parse_error)?;
                Stmt::Assign { var, value, at }
            }
        };
    end_of_statement(p)?;
    Ok(Some(s))
}

/// `RAISE`'s format: each `%` takes the next argument; the message becomes one `||` chain.
fn format_message(f: &str, args: Vec<Expr>, t: &TokenWithSpan) -> Result<Expr> {
    let parts: Vec<&str> = f.split('%').collect();
    if parts.len() - 1 != args.len() {
        return err(
            t,
            format!(
                "RAISE message has {} `%` but {} values",
                parts.len() - 1,
                args.len()
            ),
        );
    }
    let lit = |s: &str| Expr::value(ast::Value::SingleQuotedString(s.to_string()));
    let mut e = lit(parts[0]);
    for (a, part) in args.into_iter().zip(&parts[1..]) {
        e = concat(concat(e, a), lit(part));
    }
    Ok(e)
}

fn concat(l: Expr, r: Expr) -> Expr {
    Expr::BinaryOp {
        left: Box::new(l),
        op: ast::BinaryOperator::StringConcat,
        right: Box::new(r),
    }
}

/// `SELECT items [INTO vars] FROM table [WHERE c] [ORDER BY pk [ASC|DESC]] [LIMIT n]`.
#[allow(clippy::type_complexity)]
fn select(p: &mut Parser<'_>) -> Result<(Select, Option<(TokenWithSpan, Vec<String>)>)> {
    p.expect_keyword(Keyword::SELECT).map_err(parse_error)?;
    let mut items = Vec::new();
    for item in p
        .parse_comma_separated(Parser::parse_select_item)
        .map_err(parse_error)?
    {
        items.push(match item {
            SelectItem::UnnamedExpr(e) => (e, None),
            SelectItem::ExprWithAlias { expr, alias } => (expr, Some(alias.value)),
            SelectItem::Wildcard(o) => (
                Expr::Wildcard(ast::helpers::attached_token::AttachedToken::empty()),
                {
                    let _ = o;
                    None
                },
            ),
            other => {
                return Err(sql_error(
                    at_span(other.span()),
                    format!("select item not supported: {other}"),
                ))
            }
        });
    }
    let into = if p.peek_keyword(Keyword::INTO) {
        let t = p.next_token();
        let vars = p
            .parse_comma_separated(|p| p.parse_identifier())
            .map_err(parse_error)?;
        Some((t, vars.into_iter().map(|i| i.value).collect()))
    } else {
        None
    };
    p.expect_keyword(Keyword::FROM).map_err(parse_error)?;
    let table = name_of(&p.parse_object_name(false).map_err(parse_error)?)?;
    let filter = if p.parse_keyword(Keyword::WHERE) {
        Some(p.parse_expr().map_err(parse_error)?)
    } else {
        None
    };
    let order = if p.parse_keywords(&[Keyword::ORDER, Keyword::BY]) {
        let c = p.parse_identifier().map_err(parse_error)?.value;
        let desc = matches!(
            p.parse_one_of_keywords(&[Keyword::ASC, Keyword::DESC]),
            Some(Keyword::DESC)
        );
        Some((c, desc))
    } else {
        None
    };
    let limit = if p.parse_keyword(Keyword::LIMIT) {
        Some(p.parse_expr().map_err(parse_error)?)
    } else {
        None
    };
    Ok((
        Select {
            table,
            items,
            filter,
            order,
            limit,
        },
        into,
    ))
}

/// A parsed `INSERT`/`UPDATE`/`DELETE` as a procedure statement.
fn dml(s: &Statement, at: SqlPos) -> Result<Stmt> {
    let unsupported = |what: &str| {
        Err(sql_error(
            at,
            format!("{what} is not supported in a procedure"),
        ))
    };
    match s {
        Statement::Update(u) => {
            if u.from.is_some() || u.returning.is_some() || !u.order_by.is_empty() {
                return unsupported("UPDATE ... FROM/RETURNING/ORDER BY");
            }
            let table = match (&u.table.relation, u.table.joins.is_empty()) {
                (ast::TableFactor::Table { name, .. }, true) => name_of(name)?,
                _ => return unsupported("UPDATE of anything but one table"),
            };
            let mut sets = Vec::new();
            for a in &u.assignments {
                let AssignmentTarget::ColumnName(n) = &a.target else {
                    return unsupported("assigning a tuple of columns");
                };
                sets.push((name_of(n)?, a.value.clone()));
            }
            Ok(Stmt::Update {
                table,
                sets,
                filter: u.selection.clone(),
                at,
            })
        }
        Statement::Insert(ins) => {
            let TableObject::TableName(name) = &ins.table else {
                return unsupported("INSERT into a table function");
            };
            let Some(src) = &ins.source else {
                return unsupported("INSERT without VALUES");
            };
            let SetExpr::Values(values) = src.body.as_ref() else {
                return unsupported("INSERT ... SELECT");
            };
            Ok(Stmt::Insert {
                table: name_of(name)?,
                columns: ins.columns.iter().map(name_of).collect::<Result<_>>()?,
                rows: values.rows.iter().map(|r| r.content.clone()).collect(),
                at,
            })
        }
        Statement::Delete(d) => {
            if d.using.is_some()
                || d.returning.is_some()
                || d.limit.is_some()
                || !d.tables.is_empty()
            {
                return unsupported("DELETE ... USING/RETURNING/LIMIT");
            }
            let from = match &d.from {
                FromTable::WithFromKeyword(f) | FromTable::WithoutKeyword(f) => f,
            };
            let table = match from.as_slice() {
                [t] if t.joins.is_empty() => match &t.relation {
                    ast::TableFactor::Table { name, .. } => name_of(name)?,
                    _ => return unsupported("DELETE from anything but a table"),
                },
                _ => return unsupported("DELETE from several tables"),
            };
            Ok(Stmt::Delete {
                table,
                filter: d.selection.clone(),
                at,
            })
        }
        _ => unsupported("this statement"),
    }
}
