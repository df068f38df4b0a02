//! Statement-language tests: each statement kind, the planner's two paths, transactions, and
//! every error class with its position.

use super::*;
use crate::{Config, Database};

fn db() -> Database {
    Database::open(Config::new()).unwrap()
}

fn rows(out: &[Output]) -> Vec<Vec<Value>> {
    match out.last() {
        Some(Output::Rows { rows, .. }) => rows.clone(),
        other => panic!("no rows: {other:?}"),
    }
}

fn ints(out: &[Output]) -> Vec<Vec<i64>> {
    rows(out)
        .into_iter()
        .map(|r| {
            r.into_iter()
                .map(|v| match v {
                    Value::Int(i) => i,
                    other => panic!("not an int: {other:?}"),
                })
                .collect()
        })
        .collect()
}

fn sql_err(r: Result<Vec<Output>>) -> (u64, u64, String) {
    match r {
        Err(Error::Sql {
            line,
            column,
            message,
        }) => (line, column, message),
        other => panic!("expected a SQL error, got {other:?}"),
    }
}

const SETUP: &str =
    "CREATE TABLE acct (id INT PRIMARY KEY, owner VARCHAR(8), bal BIGINT, rate DOUBLE);
     INSERT INTO acct VALUES (1, 'ann', 100, 0.5), (2, 'bob', 50, 1), (3, 'cy', 7, 2.5);";

#[test]
fn create_insert_select_round_trip() {
    let db = db();
    let mut s = Session::new(&db);
    let out = s.execute(SETUP).unwrap();
    assert_eq!(
        out,
        [
            Output::Done("CREATE TABLE".into()),
            Output::Done("INSERT 3".into())
        ]
    );
    let out = s.execute("SELECT * FROM acct WHERE id = 2").unwrap();
    match &out[0] {
        Output::Rows { columns, rows } => {
            assert_eq!(columns, &["id", "owner", "bal", "rate"]);
            assert_eq!(
                rows,
                &[vec![
                    Value::Int(2),
                    Value::Str("bob".into()),
                    Value::Int(50),
                    Value::Float(1.0)
                ]]
            );
        }
        other => panic!("{other:?}"),
    }
    // Full scan with a filter and arithmetic, in insertion order; column list and alias.
    let out = s
        .execute("SELECT id, bal * 2 + id % 2 AS x FROM acct WHERE bal > 10 OR owner = 'cy'")
        .unwrap();
    assert_eq!(ints(&out), [[1, 201], [2, 100], [3, 15]]);
    assert_eq!(
        ints(
            &s.execute("SELECT id FROM acct WHERE NOT (id = 1) AND bal >= 7 LIMIT 1")
                .unwrap()
        ),
        [[2]]
    );
    assert!(rows(&s.execute("SELECT id FROM acct WHERE id = 9").unwrap()).is_empty());
    assert!(rows(&s.execute("SELECT id FROM acct LIMIT 0").unwrap()).is_empty());
    // Column names in the INSERT list may come in any order.
    s.execute("INSERT INTO acct (bal, id, rate, owner) VALUES (-5, 4, 3, 'dee')")
        .unwrap();
    assert_eq!(
        rows(
            &s.execute("SELECT rate, bal FROM acct WHERE id = 4")
                .unwrap()
        ),
        [[Value::Float(3.0), Value::Int(-5)]]
    );
}

#[test]
fn update_and_delete_by_key_and_by_scan() {
    let db = db();
    let mut s = Session::new(&db);
    s.execute(SETUP).unwrap();
    assert_eq!(
        s.execute("UPDATE acct SET bal = bal - 10, rate = 4 WHERE id = 1")
            .unwrap(),
        [Output::Done("UPDATE 1".into())]
    );
    assert_eq!(
        s.execute("UPDATE acct SET bal = bal + id WHERE bal < 60")
            .unwrap(),
        [Output::Done("UPDATE 2".into())]
    );
    assert_eq!(
        ints(&s.execute("SELECT id, bal FROM acct").unwrap()),
        [[1, 90], [2, 52], [3, 10]]
    );
    assert_eq!(
        s.execute("DELETE FROM acct WHERE bal % 2 = 0 AND id > 1")
            .unwrap(),
        [Output::Done("DELETE 2".into())]
    );
    assert_eq!(ints(&s.execute("SELECT id FROM acct").unwrap()), [[1]]);
    assert_eq!(
        s.execute("DELETE FROM acct").unwrap(),
        [Output::Done("DELETE 1".into())]
    );
    assert!(rows(&s.execute("SELECT * FROM acct").unwrap()).is_empty());
}

#[test]
fn explicit_transactions_commit_roll_back_and_isolate() {
    let db = db();
    let mut a = Session::new(&db);
    let mut b = Session::new(&db);
    a.execute(SETUP).unwrap();
    a.execute("BEGIN ISOLATION LEVEL SNAPSHOT; UPDATE acct SET bal = 0 WHERE id = 1")
        .unwrap();
    assert!(a.in_transaction());
    // Not visible to another session before COMMIT.
    assert_eq!(
        ints(&b.execute("SELECT bal FROM acct WHERE id = 1").unwrap()),
        [[100]]
    );
    a.execute("ROLLBACK").unwrap();
    assert!(!a.in_transaction());
    assert_eq!(
        ints(&b.execute("SELECT bal FROM acct WHERE id = 1").unwrap()),
        [[100]]
    );
    a.execute("START TRANSACTION; UPDATE acct SET bal = 1 WHERE id = 1; COMMIT")
        .unwrap();
    assert_eq!(
        ints(&b.execute("SELECT bal FROM acct WHERE id = 1").unwrap()),
        [[1]]
    );
    // READ ONLY transactions reject writes, and the error ends the transaction.
    b.execute("BEGIN READ ONLY").unwrap();
    assert!(matches!(
        b.execute("DELETE FROM acct WHERE id = 1"),
        Err(Error::ReadOnlyTransaction)
    ));
    assert!(b.transaction_aborted());
    assert_eq!(
        b.execute("ROLLBACK").unwrap(),
        [Output::Done("ROLLBACK".into())]
    );
    assert!(!b.in_transaction());
    // A failed statement inside a transaction aborts it: the earlier write is gone too, and
    // the block refuses statements until it ends.
    a.execute("BEGIN; UPDATE acct SET bal = 77 WHERE id = 2")
        .unwrap();
    assert!(matches!(
        a.execute("INSERT INTO acct VALUES (3, 'dup', 0, 0)"),
        Err(Error::DuplicateKey { .. })
    ));
    assert!(a.in_transaction() && a.transaction_aborted());
    assert_eq!(
        a.execute("SELECT bal FROM acct WHERE id = 2"),
        Err(Error::InFailedTransaction)
    );
    assert_eq!(
        a.execute("COMMIT").unwrap(),
        [Output::Done("ROLLBACK".into())]
    );
    assert!(!a.in_transaction());
    assert_eq!(
        ints(&a.execute("SELECT bal FROM acct WHERE id = 2").unwrap()),
        [[50]]
    );
}

#[test]
fn errors_name_the_problem_and_its_position() {
    let db = db();
    let mut s = Session::new(&db);
    s.execute(SETUP).unwrap();
    let (l, c, m) = sql_err(s.execute("SELECT id FROM acct WHERE nosuch = 1"));
    assert_eq!((l, c), (1, 27), "{m}");
    assert!(m.contains("no column `nosuch`"), "{m}");
    let (l, c, m) = sql_err(s.execute("SELECT id\nFROM acct WHERE owner > 3"));
    assert_eq!((l, c), (2, 17), "{m}");
    assert!(m.contains("cannot compare VARCHAR with INT"), "{m}");
    let (l, _, m) = sql_err(s.execute("SELECT id FROM acct WHERE\n  id = = 2"));
    assert_eq!(l, 2, "{m}");
    let (_, _, m) = sql_err(s.execute("SELECT id FROM acct WHERE bal + 1"));
    assert!(m.contains("boolean"), "{m}");
    let (_, _, m) = sql_err(s.execute("UPDATE acct SET owner = 5 WHERE id = 1"));
    assert!(m.contains("cannot assign INT to column `owner`"), "{m}");
    let (_, _, m) = sql_err(s.execute("INSERT INTO acct VALUES (9, NULL, 0, 0)"));
    assert!(m.contains("NULL"), "{m}");
    let (_, _, m) = sql_err(s.execute("INSERT INTO acct VALUES (9, 'x', 0)"));
    assert!(m.contains("3 values for 4 columns"), "{m}");
    let (_, _, m) = sql_err(s.execute("INSERT INTO acct (id, owner) VALUES (9, 'x')"));
    assert!(m.contains("no value for column `bal`"), "{m}");
    let (_, _, m) = sql_err(s.execute("SELECT id / 0 FROM acct WHERE id = 1"));
    assert!(m.contains("division by zero"), "{m}");
    let (_, _, m) = sql_err(s.execute("SELECT id FROM acct WHERE bal * 9223372036854775807 > 0"));
    assert!(m.contains("overflow"), "{m}");
    let (_, _, m) = sql_err(s.execute("CREATE TABLE t (a INT)"));
    assert!(m.contains("needs a PRIMARY KEY"), "{m}");
    let (_, _, m) = sql_err(s.execute("CREATE TABLE t (a INT PRIMARY KEY, b VARCHAR)"));
    assert!(m.contains("VARCHAR(n)"), "{m}");
    let (_, _, m) = sql_err(s.execute("SELECT id FROM acct LIMIT -1"));
    assert!(m.contains("LIMIT must be"), "{m}");
    let (_, _, m) = sql_err(s.execute("SELECT id FROM acct LIMIT 'x'"));
    assert!(m.contains("LIMIT needs an integer"), "{m}");
    let (_, _, m) = sql_err(s.execute("COMMIT"));
    assert!(m.contains("without BEGIN"), "{m}");
    let (_, _, m) = sql_err(s.execute("BEGIN ISOLATION LEVEL READ UNCOMMITTED"));
    assert!(m.contains("READ UNCOMMITTED"), "{m}");
    // Engine errors keep their types.
    assert!(matches!(
        s.execute("SELECT * FROM nope"),
        Err(Error::UnknownTable(t)) if t == "nope"
    ));
    assert!(matches!(
        s.execute("INSERT INTO acct VALUES (9, 'much too long', 0, 0)"),
        Err(Error::ValueTooLong { .. })
    ));
    assert!(matches!(
        s.execute("CREATE TABLE acct (a INT PRIMARY KEY)"),
        Err(Error::AlreadyExists(_))
    ));
    // Nothing of a failed statement remains.
    assert_eq!(
        ints(&s.execute("SELECT id FROM acct").unwrap()),
        [[1], [2], [3]]
    );
}

#[test]
fn features_not_built_yet_say_so() {
    let db = db();
    let mut s = Session::new(&db);
    s.execute(SETUP).unwrap();
    for (q, what) in [
        ("SELECT id FROM acct ORDER BY bal", "ORDER BY"),
        ("SELECT id FROM acct ORDER BY id, bal", "ORDER BY"),
        ("SELECT count(*) FROM acct GROUP BY owner", "GROUP BY"),
        ("SELECT id, count(*) FROM acct", "GROUP BY"),
        ("SELECT sum(bal) FROM acct WHERE id > 9", "NULL"),
        ("SELECT id FROM acct LIMIT 1 OFFSET 1", "OFFSET"),
        ("SELECT a.id FROM acct a, acct b", "several tables"),
    ] {
        let (_, _, m) = sql_err(s.execute(q));
        assert!(m.contains(what), "{q}: {m}");
        assert!(m.contains("not supported"), "{q}: {m}");
    }
}

#[test]
fn deeply_nested_input_is_an_error_not_a_crash() {
    let db = db();
    let mut s = Session::new(&db);
    s.execute(SETUP).unwrap();
    let q = format!(
        "SELECT id FROM acct WHERE {}id = 1{}",
        "(".repeat(5000),
        ")".repeat(5000)
    );
    let (_, _, m) = sql_err(s.execute(&q));
    assert!(m.contains("nested"), "{m}");
}

#[test]
fn order_by_the_key_and_aggregates() {
    let db = db();
    let mut s = Session::new(&db);
    s.execute(
        "CREATE TABLE t (k INT PRIMARY KEY, g INT, x DOUBLE, name TEXT);
         INSERT INTO t VALUES (5, 1, 0.5, 'e'), (1, 2, 1.5, 'a'), (9, 1, -2, 'i'), (3, 2, 4, 'c');",
    )
    .unwrap();
    assert_eq!(
        ints(&s.execute("SELECT k FROM t ORDER BY k").unwrap()),
        [[1], [3], [5], [9]]
    );
    assert_eq!(
        ints(
            &s.execute("SELECT k FROM t WHERE g = 1 ORDER BY k DESC")
                .unwrap()
        ),
        [[9], [5]]
    );
    assert_eq!(
        ints(
            &s.execute("SELECT k FROM t ORDER BY k DESC LIMIT 2")
                .unwrap()
        ),
        [[9], [5]]
    );
    let out = s
        .execute("SELECT count(*), count(g) AS n, sum(g), min(k), max(k * 2) FROM t WHERE k > 1")
        .unwrap();
    match &out[0] {
        Output::Rows { columns, rows } => {
            assert_eq!(
                columns,
                &["count(*)", "n", "sum(g)", "min(k)", "max(k * 2)"]
            );
            assert_eq!(
                rows,
                &[vec![
                    Value::Int(3),
                    Value::Int(3),
                    Value::Int(4),
                    Value::Int(3),
                    Value::Int(18)
                ]]
            );
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        rows(
            &s.execute("SELECT sum(x), min(name), max(name) FROM t")
                .unwrap()
        ),
        [[
            Value::Float(4.0),
            Value::Str("a".into()),
            Value::Str("i".into())
        ]]
    );
    assert_eq!(
        ints(&s.execute("SELECT count(*) FROM t WHERE k > 100").unwrap()),
        [[0]]
    );
    let (_, _, m) = sql_err(s.execute("SELECT sum(name) FROM t"));
    assert!(m.contains("sum of VARCHAR"), "{m}");
    let (_, _, m) = sql_err(s.execute("SELECT avg(k) FROM t"));
    assert!(m.contains("function avg is not supported"), "{m}");
    s.execute("INSERT INTO t VALUES (10, 0, 0, 'z'), (11, 0, 0, 'y')")
        .unwrap();
    let (_, _, m) = sql_err(s.execute("SELECT sum(k * 9223372036854775807) FROM t"));
    assert!(m.contains("overflow"), "{m}");
}

/// Random token soup and random mutations of valid statements: every input ends in `Ok` or a
/// typed error, never a panic (no panics reachable from the public API).
#[test]
fn random_statements_never_panic() {
    const TOKENS: &[&str] = &[
        "SELECT",
        "INSERT",
        "INTO",
        "VALUES",
        "UPDATE",
        "SET",
        "DELETE",
        "FROM",
        "WHERE",
        "ORDER",
        "BY",
        "LIMIT",
        "BEGIN",
        "COMMIT",
        "ROLLBACK",
        "CREATE",
        "TABLE",
        "PRIMARY",
        "KEY",
        "INT",
        "DOUBLE",
        "VARCHAR(3)",
        "TEXT",
        "acct",
        "id",
        "owner",
        "bal",
        "rate",
        "nope",
        "count(*)",
        "sum(bal)",
        "min(owner)",
        "max(rate)",
        "(",
        ")",
        ",",
        ";",
        "*",
        "+",
        "-",
        "/",
        "%",
        "=",
        "<>",
        "<",
        ">=",
        "AND",
        "OR",
        "NOT",
        "0",
        "1",
        "-1",
        "9223372036854775807",
        "1.5",
        "'x'",
        "'much too long'",
        "NULL",
        "TRUE",
        "DESC",
    ];
    const VALID: &[&str] = &[
        "SELECT id, bal * 2 FROM acct WHERE id = 1 AND bal > 0 ORDER BY id DESC LIMIT 2",
        "UPDATE acct SET bal = bal % 7 + id WHERE owner = 'ann' OR rate < 1",
        "INSERT INTO acct (id, owner, bal, rate) VALUES (7, 'q', 1, 2.5)",
        "DELETE FROM acct WHERE NOT (id = 2) AND bal / 1 >= 0",
        "SELECT count(*), sum(bal), min(owner), max(rate) FROM acct WHERE id > 0",
    ];
    let db = db();
    let mut s = Session::new(&db);
    s.execute(SETUP).unwrap();
    let mut seed = 0x5EED_u64;
    let mut next = |n: usize| {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((seed >> 33) as usize) % n
    };
    let (mut ok, mut sql_errors, mut engine_errors) = (0, 0, 0);
    for i in 0..8000 {
        let stmt = if i % 4 == 0 {
            (0..1 + next(12))
                .map(|_| TOKENS[next(TOKENS.len())])
                .collect::<Vec<_>>()
                .join(" ")
        } else {
            // Replace, drop or duplicate one token of a valid statement.
            let mut words: Vec<&str> = VALID[next(VALID.len())].split(' ').collect();
            let at = next(words.len());
            match next(3) {
                0 => words[at] = TOKENS[next(TOKENS.len())],
                1 => {
                    words.remove(at);
                }
                _ => words.insert(at, TOKENS[next(TOKENS.len())]),
            }
            words.join(" ")
        };
        match s.execute(&stmt) {
            Ok(_) => ok += 1,
            Err(Error::Sql { .. }) => sql_errors += 1,
            Err(_) => engine_errors += 1,
        }
        // An error inside a random BEGIN leaves the block aborted: end it, so that the
        // statements after it run.
        if s.transaction_aborted() {
            s.execute("ROLLBACK").unwrap();
        }
    }
    // The mutations reach execution, not only the parser.
    assert!(
        ok > 300 && engine_errors > 50 && sql_errors > 1000,
        "ok {ok}, SQL errors {sql_errors}, engine errors {engine_errors}"
    );
}

#[test]
fn key_ranges_return_what_a_full_scan_returns() {
    let db = db();
    let mut s = Session::new(&db);
    s.execute("CREATE TABLE r (k INT PRIMARY KEY, v INT)")
        .unwrap();
    let values: Vec<String> = (0..40).map(|k| format!("({k}, {})", k % 7)).collect();
    s.execute(&format!("INSERT INTO r VALUES {}", values.join(", ")))
        .unwrap();
    for w in [
        "k > 10 AND k <= 20",
        "k >= 35",
        "3 > k",
        "k < 30 AND 25 <= k AND v = 2",
        "k > 5 AND k > 30",
        "k < 5 OR k > 35",
        "k > 50",
        "k >= 2.5",
    ] {
        let mut got = ints(&s.execute(&format!("SELECT k FROM r WHERE {w}")).unwrap());
        got.sort();
        // The same condition evaluated row by row, outside the planner.
        let all = ints(&s.execute("SELECT k, v FROM r").unwrap());
        let want: Vec<Vec<i64>> = all
            .iter()
            .filter(|r| {
                let (k, v) = (r[0], r[1]);
                match w {
                    "k > 10 AND k <= 20" => (11..=20).contains(&k),
                    "k >= 35" => k >= 35,
                    "3 > k" => 3 > k,
                    "k < 30 AND 25 <= k AND v = 2" => (25..30).contains(&k) && v == 2,
                    "k > 5 AND k > 30" => k > 30,
                    "k < 5 OR k > 35" => !(5..=35).contains(&k),
                    "k > 50" => false,
                    "k >= 2.5" => k >= 3,
                    _ => unreachable!(),
                }
            })
            .map(|r| vec![r[0]])
            .collect();
        assert_eq!(got, want, "{w}");
    }
    assert_eq!(
        ints(
            &s.execute("SELECT k FROM r WHERE k >= 36 ORDER BY k DESC")
                .unwrap()
        ),
        [[39], [38], [37], [36]]
    );
}

/// The commit failed with a phantom abort exactly when `conflicts`.
fn assert_phantom_abort_iff(commit: Result<Vec<Output>>, conflicts: bool) {
    if conflicts {
        assert!(
            matches!(
                commit,
                Err(Error::SerializationFailure(crate::AbortReason::Phantom))
            ),
            "{commit:?}"
        );
    } else {
        assert!(commit.is_ok(), "{commit:?}");
    }
}

#[test]
fn a_key_range_read_conflicts_only_with_writes_in_its_range() {
    for (insert_key, conflicts) in [(50, false), (15, true)] {
        let db = db();
        let mut a = Session::new(&db);
        let mut b = Session::new(&db);
        a.execute(
            "CREATE TABLE r (k INT PRIMARY KEY, v INT);
             CREATE TABLE log (id INT PRIMARY KEY, n INT);
             INSERT INTO r VALUES (12, 0), (18, 0), (40, 0);",
        )
        .unwrap();
        a.execute("BEGIN ISOLATION LEVEL SERIALIZABLE").unwrap();
        assert_eq!(
            ints(
                &a.execute("SELECT count(*) FROM r WHERE k > 10 AND k < 20")
                    .unwrap()
            ),
            [[2]]
        );
        b.execute(&format!("INSERT INTO r VALUES ({insert_key}, 1)"))
            .unwrap();
        a.execute("INSERT INTO log VALUES (1, 2)").unwrap();
        // Without the conflict, a full-table scan would still have aborted: the range plan
        // was used.
        assert_phantom_abort_iff(a.execute("COMMIT"), conflicts);
    }
}

#[test]
fn parameters_stand_for_values_everywhere() {
    let db = Database::open(Config::new()).unwrap();
    let mut s = Session::new(&db);
    s.execute("CREATE TABLE kv (k INT PRIMARY KEY, v VARCHAR(8), x DOUBLE)")
        .unwrap();
    for k in 1..=5i64 {
        s.execute_with(
            "INSERT INTO kv VALUES ($1, $2, $1 * 1.5)",
            &[Value::Int(k), Value::Str(format!("v{k}"))],
        )
        .unwrap();
    }
    s.execute_with(
        "UPDATE kv SET v = $2 WHERE k = $1",
        &[Value::Int(3), "three".into()],
    )
    .unwrap();
    let out = s
        .execute_with(
            "SELECT k, v FROM kv WHERE k >= $1 AND x < $2 ORDER BY k LIMIT $3",
            &[Value::Int(2), Value::Float(6.5), Value::Int(2)],
        )
        .unwrap();
    assert_eq!(
        out,
        [Output::Rows {
            columns: vec!["k".into(), "v".into()],
            rows: vec![
                vec![Value::Int(2), Value::from("v2")],
                vec![Value::Int(3), Value::from("three")]
            ]
        }]
    );
    let out = s
        .execute_with("SELECT count(*) FROM kv WHERE v = $1", &["v5".into()])
        .unwrap();
    assert_eq!(ints(&out), [[1]]);
    let (_, _, m) = sql_err(s.execute_with("SELECT v FROM kv WHERE k = $3", &[Value::Int(1)]));
    assert!(m.contains("no value for parameter $3 (1 given)"), "{m}");
    let (_, _, m) = sql_err(s.execute_with("SELECT v FROM kv WHERE k = $1", &["x".into()]));
    assert!(m.contains("cannot compare INT with VARCHAR"), "{m}");
    let (_, _, m) = sql_err(s.execute("SELECT v FROM kv WHERE k = $1"));
    assert!(m.contains("no value for parameter $1 (0 given)"), "{m}");
    // Parameters are values, not names: an unknown column is still an unknown column.
    let (_, _, m) =
        sql_err(s.execute_with("INSERT INTO kv VALUES (9, nope, 1.0)", &[Value::Int(1)]));
    assert!(m.contains("`nope` is not allowed here"), "{m}");
}

#[test]
fn secondary_indexes_from_sql_are_used_and_protect_only_their_key() {
    for (insert_city, conflicts) in [("b", false), ("a", true)] {
        let db = db();
        let mut a = Session::new(&db);
        let mut b = Session::new(&db);
        let before = db.table("acct").err();
        assert!(before.is_some());
        a.execute(
            "CREATE TABLE acct (id INT PRIMARY KEY, city VARCHAR(8), bal INT);
             CREATE INDEX acct_city ON acct (city);
             CREATE UNIQUE INDEX ON acct USING HASH (bal);
             CREATE TABLE log (id INT PRIMARY KEY, n INT);
             INSERT INTO acct VALUES (1, 'a', 10), (2, 'b', 20), (3, 'a', 30);",
        )
        .unwrap();
        let t = db.table("acct").unwrap();
        assert_eq!(t.schema().indexes().len(), 3);
        assert!(t.schema().indexes()[2].unique);
        // Same rows through the index as through a scan (OR defeats the index plan).
        assert_eq!(
            ints(&a.execute("SELECT id FROM acct WHERE city = 'a'").unwrap()),
            ints(
                &a.execute("SELECT id FROM acct WHERE city = 'a' OR 1 = 0")
                    .unwrap()
            )
        );
        a.execute("BEGIN ISOLATION LEVEL SERIALIZABLE").unwrap();
        assert_eq!(
            ints(
                &a.execute("SELECT count(*) FROM acct WHERE city = 'a'")
                    .unwrap()
            ),
            [[2]]
        );
        b.execute(&format!("INSERT INTO acct VALUES (9, '{insert_city}', 90)"))
            .unwrap();
        a.execute("INSERT INTO log VALUES (1, 2)").unwrap();
        // Without the conflict, a full-table scan would still have aborted: the index lookup
        // was the plan.
        assert_phantom_abort_iff(a.execute("COMMIT"), conflicts);
        // The unique index rejects a duplicate; the unique lookup finds its row.
        assert!(matches!(
            b.execute("INSERT INTO acct VALUES (10, 'c', 20)"),
            Err(Error::DuplicateKey { .. })
        ));
        assert_eq!(
            ints(&b.execute("SELECT id FROM acct WHERE bal = 30").unwrap()),
            [[3]]
        );
        // Updates and deletes find rows through the index too.
        b.execute("UPDATE acct SET bal = bal + 1 WHERE city = 'a'")
            .unwrap();
        assert_eq!(
            ints(
                &b.execute("SELECT sum(bal) FROM acct WHERE city = 'a'")
                    .unwrap()
            ),
            [[if conflicts { 11 + 31 + 91 } else { 11 + 31 }]]
        );
    }
}

#[test]
fn create_index_errors_name_the_problem() {
    let db = db();
    let mut s = Session::new(&db);
    s.execute(
        "CREATE TABLE t (k INT PRIMARY KEY, v INT); CREATE TABLE e (k INT PRIMARY KEY, v INT)",
    )
    .unwrap();
    let old = db.table("e").unwrap();
    s.execute("CREATE INDEX ev ON e (v)").unwrap();
    // A handle from before the index is refused (its table has been replaced).
    let mut tx = db.begin().unwrap();
    let err = tx.insert(&old, &[1i64, 2]).unwrap_err();
    assert!(err.to_string().contains("before CREATE INDEX"), "{err}");
    tx.abort();
    s.execute("INSERT INTO t VALUES (1, 1), (2, 1), (3, 2)")
        .unwrap();
    let err = s.execute("CREATE UNIQUE INDEX tv ON t (v)").unwrap_err();
    assert_eq!(
        err,
        Error::DuplicateKey {
            table: "t".into(),
            index: "tv".into()
        }
    );
    // The failed attempt left the table usable; a plain index on the rows works.
    assert_eq!(
        ints(&s.execute("SELECT v FROM t WHERE k = 1").unwrap()),
        [[1]]
    );
    s.execute("CREATE INDEX tv ON t (v)").unwrap();
    let t = db.table("t").unwrap();
    assert_eq!(t.schema.indexes.len(), 2);
    assert_eq!(
        ints(&s.execute("SELECT k FROM t WHERE v = 1 ORDER BY k").unwrap()),
        [[1], [2]]
    );
    let err = s.execute("BEGIN; CREATE INDEX tw ON t (k, v)").unwrap_err();
    assert!(err.to_string().contains("inside a transaction"), "{err}");
    s.execute("ROLLBACK").unwrap();
    let err = s.execute("CREATE INDEX ev ON e (v)").unwrap_err();
    assert!(err.to_string().contains("already exists"), "{err}");
    s.execute("CREATE INDEX IF NOT EXISTS ev ON e (v)").unwrap();
    for (q, what) in [
        (
            "CREATE INDEX x ON e (nope)",
            "table `e` has no column `nope`",
        ),
        ("CREATE INDEX x ON nope (v)", "unknown table `nope`"),
        (
            "CREATE INDEX x ON e USING GIN (v)",
            "index type GIN is not supported",
        ),
        ("CREATE INDEX x ON e ((v + 1))", "only plain columns"),
        ("CREATE INDEX x ON e (v) WHERE v > 1", "WHERE"),
    ] {
        let (_, _, m) = sql_err(s.execute(q));
        assert!(m.contains(what), "{q}: {m}");
    }
    s.execute("CREATE TABLE p (k INT PRIMARY KEY, v INT)")
        .unwrap();
    s.execute("CREATE PROCEDURE getp(x INT) AS $$ DECLARE y INT; BEGIN SELECT v INTO y FROM p WHERE k = x; END $$")
        .unwrap();
    let err = s.execute("CREATE INDEX pv ON p (v)").unwrap_err();
    assert!(err.to_string().contains("procedure(s) getp use"), "{err}");
    // Creating tables after an index still works (ids are not reused).
    s.execute("CREATE TABLE later (k INT PRIMARY KEY)").unwrap();
    s.execute("INSERT INTO later VALUES (1)").unwrap();
}

#[test]
fn order_by_a_column_with_a_btree_index() {
    let db = db();
    let mut s = Session::new(&db);
    s.execute(
        "CREATE TABLE t (k INT PRIMARY KEY, v INT, w INT);
         CREATE INDEX t_v ON t (v);
         CREATE INDEX t_w ON t USING HASH (w);
         INSERT INTO t VALUES (1, 30, 1), (2, 10, 2), (3, 20, 3), (4, 40, 4);",
    )
    .unwrap();
    assert_eq!(
        ints(&s.execute("SELECT k, v FROM t ORDER BY v").unwrap()),
        [[2, 10], [3, 20], [1, 30], [4, 40]]
    );
    assert_eq!(
        ints(
            &s.execute("SELECT k FROM t WHERE k > 1 ORDER BY v DESC LIMIT 2")
                .unwrap()
        ),
        [[4], [3]]
    );
    let (_, _, m) = sql_err(s.execute("SELECT k FROM t ORDER BY w"));
    assert!(m.contains("one-column B-tree index"), "{m}");
    // Procedures order rows the same way.
    db.create_procedures(
        "CREATE PROCEDURE top() AS $$ DECLARE a INT; BEGIN
           SELECT k INTO a FROM t ORDER BY v DESC LIMIT 1;
           RETURN a;
         END $$",
    )
    .unwrap();
    assert_eq!(db.call("top", &[]).unwrap(), [Value::Int(4)]);
}

#[test]
fn composite_key_prefix_ranges_return_what_a_full_scan_returns() {
    let db = db();
    let mut s = Session::new(&db);
    s.execute(
        "CREATE TABLE c (a INT, b INT, k INT, v INT, PRIMARY KEY (a, b, k));
         CREATE INDEX c_vb ON c (v, b);",
    )
    .unwrap();
    let mut values = Vec::new();
    for a in 0..3 {
        for b in 0..4 {
            for k in 0..5 {
                values.push(format!("({a}, {b}, {k}, {})", (a + b + k) % 3));
            }
        }
    }
    s.execute(&format!("INSERT INTO c VALUES {}", values.join(", ")))
        .unwrap();
    let all = ints(&s.execute("SELECT a, b, k, v FROM c").unwrap());
    type Pred = fn(i64, i64, i64, i64) -> bool;
    let cases: [(&str, Pred); 8] = [
        ("a = 1", |a, _, _, _| a == 1),
        ("a = 1 AND b = 2", |a, b, _, _| a == 1 && b == 2),
        ("b = 2 AND a = 1 AND k >= 3", |a, b, k, _| {
            a == 1 && b == 2 && k >= 3
        }),
        ("a = 2 AND b = 0 AND k > 1 AND k < 4", |a, b, k, _| {
            a == 2 && b == 0 && (2..4).contains(&k)
        }),
        ("a = 0 AND b <= 1", |a, b, _, _| a == 0 && b <= 1),
        ("a > 0 AND v = 1", |a, _, _, v| a > 0 && v == 1),
        ("v = 2 AND b > 1", |_, b, _, v| v == 2 && b > 1),
        ("a = 1 AND k = 2", |a, _, k, _| a == 1 && k == 2),
    ];
    for (w, pred) in cases {
        let mut got = ints(
            &s.execute(&format!("SELECT a, b, k, v FROM c WHERE {w}"))
                .unwrap(),
        );
        got.sort();
        let want: Vec<Vec<i64>> = all
            .iter()
            .filter(|r| pred(r[0], r[1], r[2], r[3]))
            .cloned()
            .collect();
        assert!(!want.is_empty(), "{w}");
        assert_eq!(got, want, "{w}");
    }
}

#[test]
fn a_composite_prefix_read_conflicts_only_with_writes_under_its_prefix() {
    for (insert_key, conflicts) in [("(2, 0)", false), ("(1, 9)", true)] {
        let db = db();
        let mut a = Session::new(&db);
        let mut b = Session::new(&db);
        a.execute(
            "CREATE TABLE r (w INT, o INT, v INT, PRIMARY KEY (w, o));
             CREATE TABLE log (id INT PRIMARY KEY, n INT);
             INSERT INTO r VALUES (1, 1, 0), (1, 2, 0), (2, 5, 0);",
        )
        .unwrap();
        a.execute("BEGIN ISOLATION LEVEL SERIALIZABLE").unwrap();
        assert_eq!(
            ints(&a.execute("SELECT count(*) FROM r WHERE w = 1").unwrap()),
            [[2]]
        );
        b.execute(&format!(
            "INSERT INTO r VALUES {}",
            insert_key.replace(')', ", 1)")
        ))
        .unwrap();
        a.execute("INSERT INTO log VALUES (1, 2)").unwrap();
        // Without the conflict, a full-table scan would have aborted: the prefix range was used.
        assert_phantom_abort_iff(a.execute("COMMIT"), conflicts);
    }
}

#[test]
fn procedures_order_by_the_key_column_after_a_fixed_prefix() {
    let db = db();
    let mut s = Session::new(&db);
    s.execute(
        "CREATE TABLE no (w INT, d INT, o INT, PRIMARY KEY (w, d, o));
         CREATE TABLE ord (w INT, o INT, c INT, PRIMARY KEY (w, o));
         CREATE INDEX ord_c ON ord (w, c, o);
         INSERT INTO no VALUES (1, 1, 7), (1, 1, 3), (1, 1, 9), (1, 2, 1), (2, 1, 2);
         INSERT INTO ord VALUES (1, 1, 5), (1, 2, 6), (1, 3, 5), (1, 4, 5), (2, 9, 5);",
    )
    .unwrap();
    db.create_procedures(
        "CREATE PROCEDURE oldest(pw INT, pd INT) AS $$ DECLARE x INT; y INT; BEGIN
           SELECT o INTO x FROM no WHERE w = pw AND d = pd ORDER BY o LIMIT 1;
           SELECT o INTO y FROM no WHERE w = pw AND d = pd ORDER BY o DESC LIMIT 1;
           RETURN x, y;
         END $$;
         CREATE PROCEDURE last_order(pw INT, pc INT) AS $$ DECLARE x INT; BEGIN
           SELECT o INTO x FROM ord WHERE w = pw AND c = pc ORDER BY o DESC LIMIT 1;
           RETURN x;
         END $$;",
    )
    .unwrap();
    let call = |name: &str, a: i64, b: i64| db.call(name, &[a.into(), b.into()]).unwrap();
    assert_eq!(call("oldest", 1, 1), [Value::Int(3), Value::Int(9)]);
    assert_eq!(call("oldest", 1, 2), [Value::Int(1), Value::Int(1)]);
    assert_eq!(call("last_order", 1, 5), [Value::Int(4)]);
    assert_eq!(call("last_order", 2, 5), [Value::Int(9)]);
    // A column that no fixed prefix puts in order is still refused.
    let e = db
        .create_procedures(
            "CREATE PROCEDURE bad(pw INT) AS $$ DECLARE x INT; BEGIN
               SELECT o INTO x FROM no WHERE w = pw ORDER BY o LIMIT 1;
             END $$;",
        )
        .unwrap_err();
    assert!(e.to_string().contains("ORDER BY"), "{e}");
}

#[test]
fn substring_takes_at_most_its_length() {
    let db = db();
    let mut s = Session::new(&db);
    s.execute(
        "CREATE TABLE t (k INT PRIMARY KEY, v VARCHAR(8)); INSERT INTO t VALUES (1, 'abcdef')",
    )
    .unwrap();
    let out = s
        .execute(
            "SELECT substring(v FROM 1 FOR 2), substring(k || v FROM 2 FOR 3), substr(v, 5), \
             substring(v FROM 0 FOR 2), substring(v FROM 3 FOR 0) FROM t",
        )
        .unwrap();
    let want: Vec<Value> = ["ab", "abc", "ef", "a", ""]
        .into_iter()
        .map(Value::from)
        .collect();
    assert_eq!(rows(&out), [want]);
}

#[test]
fn hash_primary_keys_serve_points_and_never_ranges() {
    let db = db();
    let mut s = Session::new(&db);
    s.execute(
        "CREATE TABLE h (a INT, b INT, v INT, PRIMARY KEY (a, b) USING HASH);
         CREATE TABLE h2 (k INT, v INT, PRIMARY KEY (k) USING HASH);
         INSERT INTO h VALUES (1, 1, 10), (1, 2, 20), (2, 1, 30);
         INSERT INTO h2 VALUES (1, 1), (2, 2), (3, 3)",
    )
    .unwrap();
    for (t, kind) in [("h", IndexKind::Hash), ("h2", IndexKind::Hash)] {
        assert_eq!(db.table(t).unwrap().schema.indexes()[0].kind, kind, "{t}");
    }
    assert_eq!(
        ints(&s.execute("SELECT v FROM h WHERE a = 1 AND b = 2").unwrap()),
        [[20]]
    );
    // A key prefix or a key range on a hash key is answered by a scan, not by the index.
    let mut got = ints(&s.execute("SELECT v FROM h WHERE a = 1").unwrap());
    got.sort();
    assert_eq!(got, [[10], [20]]);
    assert_eq!(
        ints(&s.execute("SELECT count(*) FROM h2 WHERE k >= 2").unwrap()),
        [[2]]
    );
    let err = s.execute("SELECT v FROM h2 ORDER BY k").unwrap_err();
    assert!(err.to_string().contains("ORDER BY"), "{err}");
    let err = s
        .execute("CREATE TABLE g (k INT, PRIMARY KEY (k) USING GIST)")
        .unwrap_err();
    assert!(err.to_string().contains("BTREE or HASH"), "{err}");
}

/// Under partial-order timestamps (either counts) a session reads its own writes (its floor is its last
/// commit), while another session, begun without that floor, may not see them until it is
/// given it (`set_floor`).
#[test]
fn a_session_reads_its_own_writes_under_partial_order_timestamps() {
    for &counters in crate::PoCounters::ALL {
        let db = Database::open(
            Config::new()
                .protocol(crate::Protocol::Si)
                .isolation(Isolation::Snapshot)
                .timestamps(crate::TimestampPolicy::PartialOrder)
                .po_tick(Duration::ZERO)
                .po_counters(counters),
        )
        .unwrap();
        let mut a = Session::new(&db);
        let mut b = Session::new(&db);
        a.execute("CREATE TABLE t (k INT PRIMARY KEY, v INT)")
            .unwrap();
        a.execute("INSERT INTO t VALUES (1, 10)").unwrap();
        let mine = a.floor().expect("a commit moves the session floor");
        let read = "SELECT v FROM t WHERE k = 1";
        assert_eq!(ints(&a.execute(read).unwrap()), vec![vec![10]]);
        a.execute("BEGIN; UPDATE t SET v = 11 WHERE k = 1; COMMIT")
            .unwrap();
        assert!(a.floor() > Some(mine));
        // HISTORICAL READ for the other session: the update's group is still open.
        b.set_floor(Some(mine));
        assert_eq!(ints(&b.execute(read).unwrap()), vec![vec![10]]);
        assert_eq!(ints(&a.execute(read).unwrap()), vec![vec![11]]);
        b.set_floor(a.floor());
        assert_eq!(ints(&b.execute(read).unwrap()), vec![vec![11]]);
    }
}
