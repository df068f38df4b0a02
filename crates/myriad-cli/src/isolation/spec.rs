//! The spec-file language of PostgreSQL's isolation tester (`src/test/isolation/specparse.y`),
//! parsed by hand:
//!
//! ```text
//! spec        := setup* teardown? session+ permutation*
//! setup       := "setup" "{" SQL "}"
//! teardown    := "teardown" "{" SQL "}"
//! session     := "session" NAME setup? step+ teardown?
//! step        := "step" NAME "{" SQL "}"
//! permutation := "permutation" NAME+
//! ```
//!
//! A NAME is an identifier (`[A-Za-z_][A-Za-z0-9_]*`) or a double-quoted string (`"s1"`, the
//! older form). `#` starts a comment to the end of the line. The SQL of a block is everything
//! up to the first `}` (as in PostgreSQL, a `}` cannot appear inside a block). PostgreSQL's
//! blocker annotations (`s1a(s2b)`, `s1a(*)`) decide output order under real lock waits; they
//! are rejected here with an error that says so. Every error names the line.

use std::fmt;

/// A parsed spec: names are unique, every permutation names defined steps.
#[derive(Debug, Clone, PartialEq)]
pub struct Spec {
    /// Global setup blocks, run in order on a separate session before the sessions' own.
    pub setup: Vec<String>,
    pub teardown: Option<String>,
    pub sessions: Vec<Session>,
    /// Listed permutations (indexes into `steps`); empty means "every interleaving".
    pub permutations: Vec<Vec<StepRef>>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Session {
    pub name: String,
    pub setup: Option<String>,
    pub steps: Vec<Step>,
    pub teardown: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    pub name: String,
    pub sql: String,
}

/// A step by position: `session` in `Spec::sessions`, `step` in that session's `steps`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StepRef {
    pub session: usize,
    pub step: usize,
}

impl Spec {
    pub fn step(&self, r: StepRef) -> &Step {
        &self.sessions[r.session].steps[r.step]
    }
}

/// A spec that does not parse: the 1-based line and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpecError {
    pub line: usize,
    pub message: String,
}

impl fmt::Display for SpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}", self.line, self.message)
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    /// A bare identifier (keywords included).
    Ident(String),
    /// A double-quoted name.
    Quoted(String),
    /// The text between `{` and `}`.
    Sql(String),
    Open,
    Close,
    Star,
    Comma,
}

impl fmt::Display for Tok {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Tok::Ident(s) => write!(f, "`{s}`"),
            Tok::Quoted(s) => write!(f, "\"{s}\""),
            Tok::Sql(_) => f.write_str("a { SQL } block"),
            Tok::Open => f.write_str("`(`"),
            Tok::Close => f.write_str("`)`"),
            Tok::Star => f.write_str("`*`"),
            Tok::Comma => f.write_str("`,`"),
        }
    }
}

fn err(line: usize, message: impl Into<String>) -> SpecError {
    SpecError {
        line,
        message: message.into(),
    }
}

/// Splits the text into tokens with their (starting) line.
fn lex(text: &str) -> Result<Vec<(Tok, usize)>, SpecError> {
    let mut out = Vec::new();
    let mut line = 1;
    let mut it = text.chars().peekable();
    while let Some(c) = it.next() {
        match c {
            '\n' => line += 1,
            c if c.is_whitespace() => {}
            '#' => {
                while it.peek().is_some_and(|&c| c != '\n') {
                    it.next();
                }
            }
            '{' => {
                let start = line;
                let mut sql = String::new();
                loop {
                    match it.next() {
                        Some('}') => break,
                        Some(c) => {
                            if c == '\n' {
                                line += 1;
                            }
                            sql.push(c);
                        }
                        None => return Err(err(start, "unterminated `{` (no closing `}`)")),
                    }
                }
                out.push((Tok::Sql(sql), start));
            }
            '}' => return Err(err(line, "`}` without a matching `{`")),
            '"' => {
                let start = line;
                let mut name = String::new();
                loop {
                    match it.next() {
                        // `""` inside a quoted name is a literal quote, as in SQL.
                        Some('"') if it.peek() == Some(&'"') => {
                            it.next();
                            name.push('"');
                        }
                        Some('"') => break,
                        Some('\n') | None => {
                            return Err(err(start, "unterminated quoted name"));
                        }
                        Some(c) => name.push(c),
                    }
                }
                if name.is_empty() {
                    return Err(err(start, "empty quoted name"));
                }
                out.push((Tok::Quoted(name), start));
            }
            '(' => out.push((Tok::Open, line)),
            ')' => out.push((Tok::Close, line)),
            '*' => out.push((Tok::Star, line)),
            ',' => out.push((Tok::Comma, line)),
            c if c.is_ascii_alphabetic() || c == '_' => {
                let mut id = String::from(c);
                while let Some(&c) = it.peek() {
                    if c.is_ascii_alphanumeric() || c == '_' {
                        id.push(c);
                        it.next();
                    } else {
                        break;
                    }
                }
                out.push((Tok::Ident(id), line));
            }
            c => return Err(err(line, format!("unexpected character `{c}`"))),
        }
    }
    Ok(out)
}

/// Reserved words (as in PostgreSQL's spec scanner; quote a name to use one).
const KEYWORDS: [&str; 5] = ["setup", "teardown", "session", "step", "permutation"];

struct Parser {
    toks: Vec<(Tok, usize)>,
    pos: usize,
    /// Line of the last token, for errors at the end of the file.
    last_line: usize,
}

impl Parser {
    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.pos).map(|(t, _)| t)
    }

    fn line(&self) -> usize {
        self.toks.get(self.pos).map_or(self.last_line, |&(_, l)| l)
    }

    fn peek_keyword(&self) -> Option<&str> {
        match self.peek() {
            Some(Tok::Ident(s)) => Some(s.as_str()),
            _ => None,
        }
    }

    fn found(&self) -> String {
        match self.peek() {
            Some(t) => t.to_string(),
            None => "the end of the file".into(),
        }
    }

    /// `{ SQL }` after a keyword.
    fn sql(&mut self, after: &str) -> Result<String, SpecError> {
        if let Some(Tok::Sql(s)) = self.peek() {
            let s = s.clone();
            self.pos += 1;
            return Ok(s);
        }
        Err(err(
            self.line(),
            format!("expected {{ SQL }} after `{after}`, found {}", self.found()),
        ))
    }

    fn name(&mut self, what: &str) -> Result<String, SpecError> {
        let line = self.line();
        match self.peek() {
            Some(Tok::Ident(s)) | Some(Tok::Quoted(s)) => {
                let s = s.clone();
                self.pos += 1;
                Ok(s)
            }
            _ => Err(err(
                line,
                format!("expected {what} name, found {}", self.found()),
            )),
        }
    }
}

/// Parses a spec file's text.
pub fn parse(text: &str) -> Result<Spec, SpecError> {
    let toks = lex(text)?;
    let last_line = toks.last().map_or(1, |&(_, l)| l);
    let mut p = Parser {
        toks,
        pos: 0,
        last_line,
    };
    let mut spec = Spec {
        setup: Vec::new(),
        teardown: None,
        sessions: Vec::new(),
        permutations: Vec::new(),
    };
    // Step name -> (position, line it was defined on).
    let mut steps: Vec<(String, StepRef)> = Vec::new();
    let mut raw_perms: Vec<Vec<(String, usize)>> = Vec::new();

    while let Some(kw) = p.peek_keyword().map(str::to_owned) {
        let line = p.line();
        match kw.as_str() {
            "setup" => {
                if !spec.sessions.is_empty() {
                    return Err(err(
                        line,
                        "a global `setup` must come before the first `session`",
                    ));
                }
                if spec.teardown.is_some() {
                    return Err(err(line, "a global `setup` must come before `teardown`"));
                }
                p.pos += 1;
                spec.setup.push(p.sql("setup")?);
            }
            "teardown" => {
                if !spec.sessions.is_empty() {
                    return Err(err(
                        line,
                        "a global `teardown` must come before the first `session`",
                    ));
                }
                if spec.teardown.is_some() {
                    return Err(err(line, "a second global `teardown`"));
                }
                p.pos += 1;
                spec.teardown = Some(p.sql("teardown")?);
            }
            "session" => {
                if !raw_perms.is_empty() {
                    return Err(err(
                        line,
                        "`session` after a `permutation` (sessions come first)",
                    ));
                }
                p.pos += 1;
                let name = p.name("a session")?;
                if spec.sessions.iter().any(|s| s.name == name) {
                    return Err(err(line, format!("duplicate session name `{name}`")));
                }
                let index = spec.sessions.len();
                let mut s = Session {
                    name,
                    setup: None,
                    steps: Vec::new(),
                    teardown: None,
                };
                if p.peek_keyword() == Some("setup") {
                    p.pos += 1;
                    s.setup = Some(p.sql("setup")?);
                }
                while p.peek_keyword() == Some("step") {
                    let line = p.line();
                    p.pos += 1;
                    let name = p.name("a step")?;
                    if steps.iter().any(|(n, _)| *n == name) {
                        return Err(err(line, format!("duplicate step name `{name}`")));
                    }
                    let sql = p.sql("step")?;
                    steps.push((
                        name.clone(),
                        StepRef {
                            session: index,
                            step: s.steps.len(),
                        },
                    ));
                    s.steps.push(Step { name, sql });
                }
                if s.steps.is_empty() {
                    return Err(err(
                        p.line(),
                        format!(
                            "session `{}` has no steps (expected `step`, found {})",
                            s.name,
                            p.found()
                        ),
                    ));
                }
                if p.peek_keyword() == Some("teardown") {
                    p.pos += 1;
                    s.teardown = Some(p.sql("teardown")?);
                }
                spec.sessions.push(s);
            }
            "permutation" => {
                if spec.sessions.is_empty() {
                    return Err(err(line, "`permutation` before any `session`"));
                }
                p.pos += 1;
                let mut perm = Vec::new();
                while let Some(Tok::Ident(_) | Tok::Quoted(_)) = p.peek() {
                    // A keyword ends the list.
                    if p.peek_keyword().is_some_and(|k| KEYWORDS.contains(&k)) {
                        break;
                    }
                    let l = p.line();
                    let n = p.name("a step")?;
                    if p.peek() == Some(&Tok::Open) {
                        return Err(err(
                            l,
                            format!(
                                "blocker annotations (`{n}(...)`) are not supported: \
                                 a step that does not finish within --step-timeout is \
                                 reported as waiting"
                            ),
                        ));
                    }
                    perm.push((n, l));
                }
                if perm.is_empty() {
                    return Err(err(
                        line,
                        format!(
                            "expected step names after `permutation`, found {}",
                            p.found()
                        ),
                    ));
                }
                raw_perms.push(perm);
            }
            other => {
                return Err(err(
                    line,
                    format!(
                        "expected `setup`, `teardown`, `session` or `permutation`, found `{other}`"
                    ),
                ))
            }
        }
    }
    if p.peek().is_some() {
        return Err(err(
            p.line(),
            format!(
                "expected `setup`, `teardown`, `session` or `permutation`, found {}",
                p.found()
            ),
        ));
    }
    if spec.sessions.is_empty() {
        return Err(err(p.last_line, "the spec defines no `session`"));
    }
    for perm in raw_perms {
        let mut refs = Vec::with_capacity(perm.len());
        for (name, line) in perm {
            match steps.iter().find(|(n, _)| *n == name) {
                Some(&(_, r)) => refs.push(r),
                None => {
                    return Err(err(
                        line,
                        format!("permutation names an undefined step `{name}`"),
                    ))
                }
            }
        }
        spec.permutations.push(refs);
    }
    Ok(spec)
}

/// Collapses runs of whitespace to one space and trims (how step SQL is echoed).
pub fn collapse_ws(sql: &str) -> String {
    sql.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Most permutations generated for a spec that lists none.
pub const MAX_PERMUTATIONS: u64 = 100_000;

/// Every interleaving of the sessions' steps that keeps each session's order, in
/// PostgreSQL's order (depth-first, lower session first). Errors if there would be more than
/// [`MAX_PERMUTATIONS`].
pub fn all_permutations(spec: &Spec) -> Result<Vec<Vec<StepRef>>, String> {
    let counts: Vec<usize> = spec.sessions.iter().map(|s| s.steps.len()).collect();
    // Multinomial coefficient, built up one session at a time: C(total, n_i) products.
    let mut n: u64 = 1;
    let mut total: u64 = 0;
    for &c in &counts {
        for i in 1..=c as u64 {
            total += 1;
            // n * total / i stays integral at every step (it is C(total, i) * earlier).
            n = n
                .checked_mul(total)
                .map(|x| x / i)
                .filter(|&x| x <= MAX_PERMUTATIONS)
                .ok_or_else(|| too_many(&counts))?;
        }
    }
    let mut out = Vec::with_capacity(n as usize);
    let mut next = vec![0usize; counts.len()];
    let mut cur = Vec::with_capacity(total as usize);
    fn rec(
        counts: &[usize],
        next: &mut [usize],
        cur: &mut Vec<StepRef>,
        out: &mut Vec<Vec<StepRef>>,
    ) {
        let mut any = false;
        for s in 0..counts.len() {
            if next[s] < counts[s] {
                any = true;
                cur.push(StepRef {
                    session: s,
                    step: next[s],
                });
                next[s] += 1;
                rec(counts, next, cur, out);
                next[s] -= 1;
                cur.pop();
            }
        }
        if !any {
            out.push(cur.clone());
        }
    }
    rec(&counts, &mut next, &mut cur, &mut out);
    Ok(out)
}

fn too_many(counts: &[usize]) -> String {
    format!(
        "the sessions' steps ({}) have more than {MAX_PERMUTATIONS} interleavings; list the \
         ones to run with `permutation`",
        counts
            .iter()
            .map(|c| c.to_string())
            .collect::<Vec<_>>()
            .join(" + ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const SPEC: &str = r#"
# A comment.
setup { CREATE TABLE t (k INT PRIMARY KEY); }
setup
{
  INSERT INTO t VALUES (1);
}
teardown { SELECT * FROM t; }

session s1
setup { BEGIN; }
step s1r { SELECT * FROM t; }   # trailing comment
step "s1c" { COMMIT; }
teardown { ROLLBACK; }

session "s 2"
step s2w { UPDATE t SET k = 2 WHERE k = 1; }

permutation s1r s2w s1c
permutation "s2w" s1r
  s1c
"#;

    #[test]
    fn parses_every_construct() {
        let s = parse(SPEC).unwrap();
        assert_eq!(s.setup.len(), 2);
        assert!(s.setup[1].contains("INSERT"));
        assert_eq!(s.teardown.as_deref(), Some(" SELECT * FROM t; "));
        assert_eq!(s.sessions.len(), 2);
        assert_eq!(s.sessions[0].setup.as_deref(), Some(" BEGIN; "));
        assert_eq!(s.sessions[0].teardown.as_deref(), Some(" ROLLBACK; "));
        assert_eq!(s.sessions[1].name, "s 2");
        assert_eq!(s.sessions[0].steps[1].name, "s1c");
        assert_eq!(s.permutations.len(), 2);
        let names: Vec<&str> = s.permutations[1]
            .iter()
            .map(|&r| s.step(r).name.as_str())
            .collect();
        assert_eq!(names, ["s2w", "s1r", "s1c"]);
    }

    #[test]
    fn errors_name_the_line() {
        for (text, line, needle) in [
            (
                "session s1\nstep a { x }\nstep a { y }",
                3,
                "duplicate step name `a`",
            ),
            (
                "session s1\nstep a { x }\npermutation a b",
                3,
                "undefined step `b`",
            ),
            ("session s1\n\nstep a { x", 3, "unterminated"),
            (
                "session s1\nstep a { x }\nsetup { y }",
                3,
                "before the first `session`",
            ),
            ("setup { x }", 1, "no `session`"),
            ("session s1\nteardown { x }", 2, "has no steps"),
            ("session s1\nstep a\n", 2, "expected { SQL } after `step`"),
            (
                "session s1\nstep a { x }\npermutation a(*)",
                3,
                "blocker annotations",
            ),
            ("session s1 step a { x } bogus", 1, "found `bogus`"),
            ("session\n", 1, "expected a session name"),
            ("session s1\nstep a { x } }", 2, "without a matching"),
            (
                "session s1\nstep a { x }\n\n  @",
                4,
                "unexpected character `@`",
            ),
            (
                "session s1\nstep a { x }\npermutation\n",
                3,
                "expected step names",
            ),
            (
                "session s1\nstep a { x }\nsession s1 step b { y }",
                3,
                "duplicate session",
            ),
        ] {
            let e = parse(text).expect_err(text);
            assert_eq!(e.line, line, "{text:?}: {e}");
            assert!(e.message.contains(needle), "{text:?}: {e}");
        }
    }

    #[test]
    fn all_permutations_keep_session_order() {
        let s =
            parse("session a step a1 {x} step a2 {x} session b step b1 {x} step b2 {x}").unwrap();
        let ps = all_permutations(&s).unwrap();
        assert_eq!(ps.len(), 6); // C(4, 2)
        let first: Vec<&str> = ps[0].iter().map(|&r| s.step(r).name.as_str()).collect();
        assert_eq!(first, ["a1", "a2", "b1", "b2"]);
        for p in &ps {
            for sess in 0..2 {
                let order: Vec<usize> = p
                    .iter()
                    .filter(|r| r.session == sess)
                    .map(|r| r.step)
                    .collect();
                assert_eq!(order, [0, 1]);
            }
        }
        let three = parse("session a step a1 {x} step a2 {x} session b step b1 {x} session c step c1 {x} step c2 {x} step c3 {x}").unwrap();
        // 6! / (2! 1! 3!) = 60
        assert_eq!(all_permutations(&three).unwrap().len(), 60);
    }

    #[test]
    fn too_many_permutations_is_an_error_not_an_allocation() {
        let mut text = String::new();
        for s in 0..4 {
            text.push_str(&format!("session s{s}\n"));
            for i in 0..10 {
                text.push_str(&format!("step s{s}_{i} {{ x }}\n"));
            }
        }
        let e = all_permutations(&parse(&text).unwrap()).unwrap_err();
        assert!(e.contains("list the ones to run"), "{e}");
    }
}
