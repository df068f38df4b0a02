//! A bound on how deeply a statement nests, checked on its tokens before it is parsed.
//!
//! `sqlparser` builds a chain `a OR b OR c ...` (or `1 + 1 + ...`) without recursion, as a
//! left-deep tree as deep as the chain is long; computing its span, compiling, evaluating,
//! printing and even dropping that tree recurse once per level and overflow the stack after a
//! few thousand levels. So a statement whose nesting bound passes [`MAX_NESTING`] is refused
//! before any tree is built. The bound counts, at each point of the token stream, the
//! operators and keywords since the last `,` at each enclosing parenthesis level, plus the
//! parenthesis depth; a tree cannot be deeper. Long lists (`IN (...)`, `VALUES` rows, select
//! lists) are not deep, because a comma resets its level. Procedure bodies also bound their
//! `IF`/`LOOP` nesting by [`MAX_BLOCKS`].

use super::{at_span, sql_error};
use crate::error::Result;
use sqlparser::keywords::Keyword;
use sqlparser::tokenizer::{Token, TokenWithSpan};

/// The deepest expression nesting accepted (see the module doc for how it is counted).
pub const MAX_NESTING: usize = 400;
/// The deepest `IF`/`LOOP` nesting accepted in a procedure body.
pub const MAX_BLOCKS: usize = 32;

/// Refuses `tokens` if their nesting bound passes [`MAX_NESTING`], or (`body`: a procedure
/// body) if `IF`/`LOOP` blocks nest deeper than [`MAX_BLOCKS`].
pub(crate) fn check(tokens: &[TokenWithSpan], body: bool) -> Result<()> {
    // Operators and keywords since the last comma, per open parenthesis level.
    let mut levels: Vec<usize> = vec![0];
    let mut total = 0usize;
    let mut blocks = 0usize;
    let mut after_end = false;
    for t in tokens {
        let mut counts = false;
        match &t.token {
            Token::Whitespace(_) | Token::EOF => continue,
            Token::LParen | Token::LBracket => {
                levels.push(0);
                total += 1;
            }
            Token::RParen | Token::RBracket => {
                if levels.len() > 1 {
                    total -= levels.pop().unwrap_or(0) + 1;
                }
            }
            Token::Comma => {
                if let Some(l) = levels.last_mut() {
                    total -= *l;
                    *l = 0;
                }
            }
            Token::SemiColon => {
                levels.truncate(1);
                levels[0] = 0;
                total = 0;
            }
            Token::Word(w) => {
                if body
                    && !after_end
                    && (w.keyword == Keyword::IF || w.value.eq_ignore_ascii_case("loop"))
                {
                    blocks += 1;
                    if blocks > MAX_BLOCKS {
                        return Err(sql_error(
                            at_span(t.span),
                            format!("IF/LOOP blocks nested more than {MAX_BLOCKS} deep"),
                        ));
                    }
                }
                if body
                    && after_end
                    && (w.keyword == Keyword::IF || w.value.eq_ignore_ascii_case("loop"))
                {
                    blocks = blocks.saturating_sub(1);
                }
                after_end = w.keyword == Keyword::END;
                counts = w.keyword != Keyword::NoKeyword;
            }
            Token::Number(..)
            | Token::SingleQuotedString(_)
            | Token::DollarQuotedString(_)
            | Token::Placeholder(_)
            | Token::Period => {}
            _ => counts = true,
        }
        if !matches!(&t.token, Token::Word(_)) {
            after_end = false;
        }
        if counts {
            if let Some(l) = levels.last_mut() {
                *l += 1;
            }
            total += 1;
        }
        if total > MAX_NESTING {
            return Err(sql_error(
                at_span(t.span),
                format!(
                    "statement nested too deeply: more than {MAX_NESTING} levels of operators \
                     and parentheses (a long OR chain of equalities can be written as IN (...))"
                ),
            ));
        }
    }
    Ok(())
}
