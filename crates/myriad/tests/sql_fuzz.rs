//! A randomized test of the SQL front end (issue 32, part 3): generated statements (every
//! statement kind, nested expressions, long operator chains, IN lists, edge literals,
//! procedures) and mutations of them (tokens replaced, dropped, duplicated; text cut short)
//! run through a `sql::Session`. No input may panic or overflow the stack, and every
//! failure must come back as a typed `Error`.
//!
//! Statement count: 25,000 per seed × 4 seeds in an optimised build (the release pass),
//! 1,500 per seed in a debug build; `MYRIAD_FUZZ_SCALE=N` multiplies it. A failure prints
//! the seed and the statement.

use myriad::sql::{Output, Session};
use myriad::{Config, Database, Error};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Duration;

const SEEDS: [u64; 4] = [1, 0x5eed, 0xdead_beef, 32];

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        // splitmix64
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn pick<'a>(&mut self, xs: &[&'a str]) -> &'a str {
        xs[self.below(xs.len())]
    }
    fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }
}

const SETUP: &str = "
    CREATE TABLE t (k INT PRIMARY KEY, v INT, s VARCHAR(8), x DOUBLE);
    CREATE INDEX t_v ON t (v);
    CREATE TABLE u (a INT, b INT, c TEXT, PRIMARY KEY (a, b));
    INSERT INTO t VALUES (1, 10, 'one', 1.5), (2, 20, 'two', 2.5), (3, 30, 'three', 3.5);
    INSERT INTO u VALUES (1, 1, 'x'), (1, 2, 'y'), (2, 1, 'z');
    CREATE PROCEDURE bump(d INT) AS $$ BEGIN UPDATE t SET v = v + d WHERE k = 1; END $$;
    CREATE PROCEDURE spin(n INT) AS $$ DECLARE y INT := 0; BEGIN
      FOR i IN 1..n LOOP y := y + 1; END LOOP; RETURN y; END $$;
";

const LITERALS: &[&str] = &[
    "0",
    "1",
    "-1",
    "42",
    "9223372036854775807",
    "-9223372036854775808",
    "9223372036854775808",
    "-9223372036854775809",
    "99999999999999999999999",
    "1.5",
    "-0.0",
    "1e308",
    "1e309",
    "'a'",
    "''",
    "'it''s'",
    "'toolongforvarchar8'",
    "TRUE",
    "FALSE",
    "NULL",
    "$1",
];
const INT_COLS: &[&str] = &["k", "v", "t.k", "t.v"];
const OPS: &[&str] = &[
    "+", "-", "*", "/", "%", "=", "<>", "<", "<=", ">", ">=", "AND", "OR", "||",
];
const WORDS: &[&str] = &[
    "SELECT",
    "FROM",
    "WHERE",
    "t",
    "u",
    "k",
    "v",
    "s",
    "x",
    "(",
    ")",
    ",",
    "=",
    "+",
    "-",
    "*",
    "IN",
    "NOT",
    "AND",
    "OR",
    "ORDER",
    "BY",
    "LIMIT",
    "DESC",
    "VALUES",
    "INSERT",
    "INTO",
    "UPDATE",
    "SET",
    "DELETE",
    "BEGIN",
    "COMMIT",
    "ROLLBACK",
    "ON",
    "CONFLICT",
    "DO",
    "NOTHING",
    "RETURNING",
    "count(*)",
    "sum(v)",
    "NULL",
    "'q'",
    "1",
    "-9223372036854775808",
    "CALL",
    "bump(1)",
    ";",
    "$$",
    "AS",
    "GROUP",
    "HAVING",
    "JOIN",
    "OFFSET",
    "CASE",
    "WHEN",
    "THEN",
    "END",
    "ARRAY[1,2]",
    "::INT",
    "BETWEEN",
    "LIKE",
    "IS",
];

/// A random expression, about `depth` levels deep.
fn expr(r: &mut Rng, depth: usize) -> String {
    if depth == 0 || r.chance(25) {
        return match r.below(3) {
            0 => r.pick(LITERALS).to_string(),
            1 => r.pick(INT_COLS).to_string(),
            _ => (r.below(50) as i64 - 10).to_string(),
        };
    }
    match r.below(10) {
        0 => format!("({})", expr(r, depth - 1)),
        1 => format!("NOT {}", expr(r, depth - 1)),
        2 => format!("-{}", expr(r, depth - 1)),
        3 => {
            let n = 1 + r.below(6);
            let items: Vec<String> = (0..n).map(|_| expr(r, depth / 2)).collect();
            format!(
                "{} {}IN ({})",
                expr(r, depth - 1),
                if r.chance(30) { "NOT " } else { "" },
                items.join(", ")
            )
        }
        4 => format!("substr({}, {})", expr(r, depth - 1), expr(r, 0)),
        _ => format!(
            "{} {} {}",
            expr(r, depth - 1),
            r.pick(OPS),
            expr(r, depth - 1)
        ),
    }
}

/// A condition over `t`, sometimes a long chain or deeply nested.
fn condition(r: &mut Rng) -> String {
    match r.below(12) {
        0 => {
            // A long chain: from well inside the nesting bound to far past it.
            let n = [10, 100, 190, 400, 2_000, 12_000][r.below(6)];
            let op = r.pick(&["OR", "AND", "+"]);
            let terms: Vec<String> = (0..n)
                .map(|i| match op {
                    "+" => "1".to_string(),
                    _ => format!("k = {i}"),
                })
                .collect();
            match op {
                "+" => format!("k = {}", terms.join(" + ")),
                _ => terms.join(&format!(" {op} ")),
            }
        }
        1 => {
            let d = [5, 40, 60, 300, 3_000][r.below(5)];
            format!("{}k = 1{}", "(".repeat(d), ")".repeat(d))
        }
        2 => {
            let n = [3, 50, 1_000][r.below(3)];
            let items: Vec<String> = (0..n).map(|i| (i * 7 % 13).to_string()).collect();
            format!("k IN ({})", items.join(", "))
        }
        3 => format!("k > {} AND k <= {}", r.below(5), r.below(9)),
        4..=7 => {
            // Well-typed more often than a random expression, so that statements run.
            let op = r.pick(&["=", "<>", "<", ">=", "IN"]);
            let rhs = expr(r, 2);
            match op {
                "IN" => format!("v IN ({rhs}, {})", r.below(40)),
                _ => format!("k {op} {rhs}"),
            }
        }
        _ => {
            let depth = 1 + r.below(5);
            expr(r, depth)
        }
    }
}

fn statement(r: &mut Rng) -> String {
    let k = r.below(40);
    match r.below(16) {
        0 | 1 => format!("SELECT * FROM t WHERE {}", condition(r)),
        2 => format!(
            "SELECT {}, {} FROM t WHERE {} ORDER BY k{} LIMIT {}",
            expr(r, 3),
            expr(r, 2),
            condition(r),
            if r.chance(50) { " DESC" } else { "" },
            r.below(5)
        ),
        3 => format!(
            "SELECT count(*), sum(v), min(s), max(x) FROM t WHERE {}",
            condition(r)
        ),
        4 | 5 => format!(
            "INSERT INTO t VALUES ({k}, {}, {}, {}){}",
            expr(r, 2),
            r.pick(&["'s'", "'longer than eight'", "1", "'x' || 'y'"]),
            r.pick(&["1.25", "7", "-1e3", "'d'"]),
            r.pick(&[
                "",
                " ON CONFLICT DO NOTHING",
                " ON CONFLICT (k) DO NOTHING",
                " ON CONFLICT (v) DO NOTHING",
                " ON CONFLICT (k) DO UPDATE SET v = 1",
                " ON CONFLICT (k) DO UPDATE SET v = t.v + excluded.v WHERE t.k > 2",
                " RETURNING k",
                " RETURNING k, v * 2 AS w",
            ])
        ),
        6 => format!(
            "UPDATE t SET v = {} WHERE {}{}",
            expr(r, 3),
            condition(r),
            r.pick(&["", " RETURNING *", " RETURNING k, s || 'x'"])
        ),
        7 => format!(
            "DELETE FROM t WHERE {}{}",
            condition(r),
            r.pick(&["", " RETURNING k"])
        ),
        8 => r
            .pick(&[
                "BEGIN",
                "BEGIN ISOLATION LEVEL SERIALIZABLE",
                "START TRANSACTION READ ONLY",
                "COMMIT",
                "ROLLBACK",
                "END",
                "ABORT",
            ])
            .to_string(),
        9 => format!(
            "CALL {}",
            r.pick(&[
                "bump(1)",
                "bump('a')",
                "spin(10)",
                "spin(100000)",
                "nope()",
                "spin()"
            ])
        ),
        10 => format!(
            "SELECT a, b FROM u WHERE a = {} AND b {} {} ORDER BY a, b",
            r.below(3),
            r.pick(&["=", "<", ">="]),
            r.below(3)
        ),
        11 => format!(
            "CREATE TABLE {} (k INT PRIMARY KEY, w {})",
            r.pick(&["t", "w1", "w2"]),
            r.pick(&[
                "VARCHAR(0)",
                "VARCHAR(3)",
                "INT",
                "BLOB",
                "VARCHAR(99999999999999)"
            ])
        ),
        12 => {
            let ifs = [1, 5, 30, 40, 200][r.below(5)];
            format!(
                "CREATE OR REPLACE PROCEDURE p{}() AS $$ DECLARE y INT := 0; BEGIN {} y := {}; {} END $$",
                r.below(3),
                "IF y = 0 THEN ".repeat(ifs),
                expr(r, 3),
                "END IF; ".repeat(ifs)
            )
        }
        13 => format!("CALL p{}()", r.below(3)),
        14 => format!("SELECT k FROM t WHERE k = $1 AND {}", condition(r)),
        _ => {
            let n = 1 + r.below(12);
            (0..n).map(|_| r.pick(WORDS)).collect::<Vec<_>>().join(" ")
        }
    }
}

/// A mutation of `s`: a token replaced, dropped or duplicated, or the text cut short.
fn mutate(r: &mut Rng, s: String) -> String {
    match r.below(4) {
        0 => {
            let cut = r.below(s.len() + 1);
            let mut cut = cut;
            while !s.is_char_boundary(cut) {
                cut -= 1;
            }
            s[..cut].to_string()
        }
        _ => {
            let mut words: Vec<&str> = s.split(' ').collect();
            let at = r.below(words.len());
            match r.below(3) {
                0 => words[at] = r.pick(WORDS),
                1 => {
                    words.remove(at);
                }
                _ => words.insert(at, r.pick(WORDS)),
            }
            words.join(" ")
        }
    }
}

#[derive(Default, Debug)]
struct Tally {
    ok: usize,
    sql: usize,
    refused: usize,
    engine: usize,
}

fn run_seed(seed: u64, count: usize) -> Tally {
    let db = Database::open(Config::new()).unwrap();
    let mut s = Session::new(&db);
    s.execute(SETUP).unwrap();
    // A pathological statement (a procedure loop of 100,000 iterations in a debug build)
    // ends at the timeout instead of slowing the test down.
    s.set_statement_timeout(Some(Duration::from_millis(500)));
    let mut r = Rng(seed);
    let mut tally = Tally::default();
    for i in 0..count {
        let mut stmt = statement(&mut r);
        if r.chance(35) {
            stmt = mutate(&mut r, stmt);
        }
        let params = [myriad::Value::Int(r.below(5) as i64)];
        let result = catch_unwind(AssertUnwindSafe(|| s.execute_with(&stmt, &params)));
        let result = match result {
            Ok(r) => r,
            Err(_) => panic!("seed {seed:#x}, statement {i} panicked: {stmt}"),
        };
        match result {
            Ok(_) => tally.ok += 1,
            Err(Error::Sql { message, .. }) => {
                assert!(
                    !message.is_empty(),
                    "seed {seed:#x}: empty message for {stmt}"
                );
                tally.sql += 1;
            }
            Err(Error::InFailedTransaction) => tally.refused += 1,
            Err(e) => {
                // Every other error is a typed engine error with a message.
                assert!(!e.to_string().is_empty(), "seed {seed:#x}: {e:?}");
                tally.engine += 1;
            }
        }
        // Leave an aborted block open for a few statements (they must be refused), then
        // end it.
        if s.transaction_aborted() && r.chance(30) {
            assert_eq!(
                s.execute("ROLLBACK").unwrap(),
                [Output::Done("ROLLBACK".into())],
                "seed {seed:#x}"
            );
        }
    }
    // The session and the database still work.
    if s.in_transaction() {
        s.execute("ROLLBACK").unwrap();
    }
    s.set_statement_timeout(None);
    assert!(
        s.execute("SELECT count(*) FROM t").is_ok(),
        "seed {seed:#x}"
    );
    tally
}

#[test]
fn generated_and_mutated_statements_never_panic_and_fail_with_typed_errors() {
    let per_seed = if cfg!(debug_assertions) {
        1_500
    } else {
        25_000
    };
    let scale: usize = std::env::var("MYRIAD_FUZZ_SCALE")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1);
    let mut total = Tally::default();
    for seed in SEEDS {
        let t = run_seed(seed, per_seed * scale);
        eprintln!("sql_fuzz seed {seed:#x}: {t:?}");
        total.ok += t.ok;
        total.sql += t.sql;
        total.refused += t.refused;
        total.engine += t.engine;
    }
    let n = per_seed * scale * SEEDS.len();
    assert_eq!(total.ok + total.sql + total.refused + total.engine, n);
    // The statements reach execution and every outcome class, not only the parser.
    assert!(
        total.ok > n / 20
            && total.sql > n / 10
            && total.engine > n / 100
            && total.refused > n / 400,
        "{total:?}"
    );
}
