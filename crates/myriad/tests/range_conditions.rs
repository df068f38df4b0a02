//! A range scan leaves out of its per-row check the conjuncts its key range decides
//! (`query::KeyRange::rest`: its prefix equalities and its column's bounds). Every generated
//! condition must select, through SQL and through a compiled procedure, exactly the rows a
//! full scan of an index-less copy of the table selects with the whole condition:
//! fractional and whole floats against INT columns, repeated and contradictory conjuncts,
//! bounds written either way round, ranges on the primary and a secondary index.

use myriad::sql::{Output, Session};
use myriad::{Config, Database, Value};

struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        // splitmix64
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        ((z ^ (z >> 31)) % n as u64) as usize
    }
}

const COLUMNS: [&str; 4] = ["a", "b", "c", "v"];
const OPS: [&str; 5] = ["=", "<", "<=", ">", ">="];
const LITERALS: [&str; 9] = ["4", "0", "1", "2", "3", "-1", "2.0", "2.5", "5"];

fn condition(r: &mut Rng) -> String {
    let n = 1 + r.below(4);
    (0..n)
        .map(|_| {
            let (col, op, lit) = (
                COLUMNS[r.below(4)],
                OPS[r.below(5)],
                LITERALS[r.below(LITERALS.len())],
            );
            if r.below(4) == 0 {
                // `x op col`, which the planner turns round.
                let flipped = match op {
                    "<" => ">",
                    "<=" => ">=",
                    ">" => "<",
                    ">=" => "<=",
                    o => o,
                };
                format!("{lit} {flipped} {col}")
            } else {
                format!("{col} {op} {lit}")
            }
        })
        .collect::<Vec<_>>()
        .join(" AND ")
}

fn setup() -> Database {
    let db = Database::open(Config::new()).unwrap();
    let mut s = Session::new(&db);
    s.execute(
        "CREATE TABLE r (a INT, b INT, c INT, v INT, PRIMARY KEY (a, b));
         CREATE INDEX r_cv ON r USING BTREE (c, v);
         CREATE TABLE plain (id INT, a INT, b INT, c INT, v INT, PRIMARY KEY (id) USING HASH);",
    )
    .unwrap();
    let mut id = 0;
    for a in 0..=4 {
        for b in 0..=4 {
            let (c, v) = ((a * b) % 5, (a + 2 * b) % 6);
            s.execute(&format!("INSERT INTO r VALUES ({a}, {b}, {c}, {v})"))
                .unwrap();
            s.execute(&format!(
                "INSERT INTO plain VALUES ({id}, {a}, {b}, {c}, {v})"
            ))
            .unwrap();
            id += 1;
        }
    }
    drop(s);
    db
}

fn rows(s: &mut Session<'_>, sql: &str) -> Vec<Vec<Value>> {
    match s.execute(sql) {
        Ok(mut out) => match out.pop() {
            Some(Output::Rows { mut rows, .. }) => {
                rows.sort_by_key(|r| format!("{r:?}"));
                rows
            }
            other => panic!("{sql}: no rows: {other:?}"),
        },
        Err(e) => panic!("{sql}: {e}"),
    }
}

#[test]
fn range_scans_select_the_rows_a_full_scan_selects() {
    let db = setup();
    let mut s = Session::new(&db);
    let mut r = Rng(0x7a6e);
    let mut nonempty = 0;
    for i in 0..400 {
        let cond = condition(&mut r);
        let want = rows(&mut s, &format!("SELECT a, b FROM plain WHERE {cond}"));
        let got = rows(&mut s, &format!("SELECT a, b FROM r WHERE {cond}"));
        assert_eq!(got, want, "SQL, WHERE {cond}");
        nonempty += usize::from(!want.is_empty());
        if i % 4 == 0 {
            // The same condition in a compiled procedure's loop.
            let count_sum = |s: &mut Session<'_>, table: &str| {
                s.execute(&format!(
                    "CREATE PROCEDURE q{table}{i}() AS $$ DECLARE n INT := 0; t INT := 0; BEGIN
                       FOR x IN SELECT a, b FROM {table} WHERE {cond} LOOP
                         n := n + 1; t := t + x.a * 10 + x.b;
                       END LOOP;
                       RETURN n, t; END $$"
                ))
                .unwrap_or_else(|e| panic!("{cond}: {e}"));
                rows(s, &format!("CALL q{table}{i}()"))
            };
            let want = count_sum(&mut s, "plain");
            let got = count_sum(&mut s, "r");
            assert_eq!(got, want, "procedure, WHERE {cond}");
        }
    }
    // The generator reaches rows (the check is not one of empty results only).
    assert!(nonempty > 40, "{nonempty} of 400 conditions selected a row");
}
