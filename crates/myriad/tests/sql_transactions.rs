//! SQL transactions as in PostgreSQL (issue 32, part 2), statement cancellation and timeouts,
//! and the SQL front end's refusals: every clause is run or refused, never ignored.

use myriad::procedure::Arg;
use myriad::sql::{Output, Session};
use myriad::{Config, Database, Error, Value};
use std::time::{Duration, Instant};

fn db() -> Database {
    let db = Database::open(Config::new()).unwrap();
    Session::new(&db)
        .execute("CREATE TABLE t (k INT PRIMARY KEY, v INT); INSERT INTO t VALUES (1, 10), (2, 20)")
        .unwrap();
    db
}

fn table(s: &mut Session<'_>) -> Vec<Vec<Value>> {
    match s.execute("SELECT * FROM t ORDER BY k").unwrap().pop() {
        Some(Output::Rows { rows, .. }) => rows,
        other => panic!("no rows: {other:?}"),
    }
}

fn int_rows(pairs: &[(i64, i64)]) -> Vec<Vec<Value>> {
    pairs
        .iter()
        .map(|&(k, v)| vec![Value::Int(k), Value::Int(v)])
        .collect()
}

fn sql_message(r: Result<Vec<Output>, Error>) -> String {
    match r {
        Err(Error::Sql { message, .. }) => message,
        other => panic!("expected a SQL error, got {other:?}"),
    }
}

#[test]
fn an_error_in_a_block_aborts_it_and_commit_rolls_back() {
    let db = db();
    let mut s = Session::new(&db);
    let results = s.execute_each(
        "BEGIN; INSERT INTO t VALUES (3, 30); INSERT INTO t VALUES (3, 31); \
         INSERT INTO t VALUES (4, 40); UPDATE t SET v = 99 WHERE k = 1; COMMIT",
    );
    assert_eq!(results.len(), 6);
    assert_eq!(results[0], Ok(Output::Done("BEGIN".into())));
    assert_eq!(results[1], Ok(Output::Done("INSERT 1".into())));
    assert!(matches!(results[2], Err(Error::DuplicateKey { .. })));
    assert_eq!(results[3], Err(Error::InFailedTransaction));
    assert_eq!(results[4], Err(Error::InFailedTransaction));
    // COMMIT of an aborted block reports the rollback.
    assert_eq!(results[5], Ok(Output::Done("ROLLBACK".into())));
    assert!(!s.in_transaction());
    // Neither row 3, row 4 nor the update.
    assert_eq!(table(&mut s), int_rows(&[(1, 10), (2, 20)]));
}

#[test]
fn the_aborted_state_outlives_execute_calls_and_parse_errors_abort_too() {
    let db = db();
    let mut s = Session::new(&db);
    s.execute("BEGIN; UPDATE t SET v = 11 WHERE k = 1").unwrap();
    // `execute` stops at the first error; the block stays aborted across calls.
    assert!(s.execute("SELEC 1").is_err());
    assert!(s.in_transaction() && s.transaction_aborted());
    assert_eq!(
        s.execute("INSERT INTO t VALUES (5, 50)"),
        Err(Error::InFailedTransaction)
    );
    assert_eq!(s.execute("BEGIN"), Err(Error::InFailedTransaction));
    assert_eq!(
        s.execute("ROLLBACK").unwrap(),
        [Output::Done("ROLLBACK".into())]
    );
    assert!(!s.in_transaction() && !s.transaction_aborted());
    assert_eq!(table(&mut s), int_rows(&[(1, 10), (2, 20)]));
    // Outside a block, a failed statement changes nothing and leaves no state behind.
    assert!(s.execute("INSERT INTO t VALUES (6, 60), (1, 0)").is_err());
    assert!(!s.in_transaction());
    assert_eq!(table(&mut s), int_rows(&[(1, 10), (2, 20)]));
}

#[test]
fn a_failed_procedure_call_rolls_its_transaction_back() {
    let db = db();
    let mut s = Session::new(&db);
    s.execute(
        "CREATE PROCEDURE two(a INT, b INT) AS $$ BEGIN \
           INSERT INTO t VALUES (a, 0); INSERT INTO t VALUES (b, 0); END $$",
    )
    .unwrap();
    // The Rust API: the first insert of the failed call is not kept, and the transaction
    // is closed.
    let p = db.procedure("two").unwrap();
    let mut tx = db.begin().unwrap();
    let r = p.execute(
        &mut tx,
        &[Arg::Value(Value::Int(7)), Arg::Value(Value::Int(1))],
    );
    assert!(matches!(r, Err(Error::DuplicateKey { .. })), "{r:?}");
    assert_eq!(tx.commit(), Err(Error::TransactionClosed));
    // SQL: the CALL aborts the block like any failed statement.
    let results = s.execute_each("BEGIN; CALL two(8, 2); SELECT k FROM t; COMMIT");
    assert!(matches!(results[1], Err(Error::DuplicateKey { .. })));
    assert_eq!(results[2], Err(Error::InFailedTransaction));
    assert_eq!(results[3], Ok(Output::Done("ROLLBACK".into())));
    assert_eq!(table(&mut s), int_rows(&[(1, 10), (2, 20)]));
}

#[test]
fn integer_literals_are_ints_or_errors_never_doubles() {
    let db = db();
    let mut s = Session::new(&db);
    s.execute("INSERT INTO t VALUES (-9223372036854775808, 9223372036854775807)")
        .unwrap();
    assert_eq!(
        table(&mut s)[0],
        [Value::Int(i64::MIN), Value::Int(i64::MAX)]
    );
    for bad in [
        "INSERT INTO t VALUES (9223372036854775808, 0)",
        "INSERT INTO t VALUES (-9223372036854775809, 0)",
        "SELECT k FROM t WHERE k = 99999999999999999999",
    ] {
        let m = sql_message(s.execute(bad));
        assert!(m.contains("integer out of range"), "{bad}: {m}");
    }
    // A decimal point still makes a DOUBLE (and a DOUBLE column takes it).
    s.execute("CREATE TABLE f (k INT PRIMARY KEY, x DOUBLE); INSERT INTO f VALUES (1, -2.5)")
        .unwrap();
    let m = sql_message(s.execute("CREATE TABLE z (k INT PRIMARY KEY, s VARCHAR(0))"));
    assert!(m.contains("VARCHAR(0)"), "{m}");
    assert!(db.table("z").is_err());
}

#[test]
fn in_lists_select_like_or_chains_of_any_length() {
    let db = db();
    let mut s = Session::new(&db);
    s.execute("INSERT INTO t VALUES (3, 30), (4, 40)").unwrap();
    let ks = |s: &mut Session<'_>, q: &str| -> Vec<i64> {
        match s.execute(q).unwrap().pop() {
            Some(Output::Rows { rows, .. }) => rows
                .into_iter()
                .map(|r| match r[0] {
                    Value::Int(i) => i,
                    ref v => panic!("{v:?}"),
                })
                .collect(),
            other => panic!("{other:?}"),
        }
    };
    assert_eq!(
        ks(&mut s, "SELECT k FROM t WHERE k IN (4, 1, 9) ORDER BY k"),
        [1, 4]
    );
    assert_eq!(
        ks(&mut s, "SELECT k FROM t WHERE k NOT IN (1, 4) ORDER BY k"),
        [2, 3]
    );
    assert_eq!(
        ks(
            &mut s,
            "SELECT k FROM t WHERE v IN (k * 10) AND k IN (2, 3) ORDER BY k"
        ),
        [2, 3]
    );
    s.execute("UPDATE t SET v = 0 WHERE k IN (2, 3)").unwrap();
    assert_eq!(ks(&mut s, "SELECT k FROM t WHERE v = 0 ORDER BY k"), [2, 3]);
    // 10,000 values: one list, not a 10,000-deep OR chain.
    let list: Vec<String> = (100..10_100).map(|i| i.to_string()).collect();
    let q = format!(
        "SELECT k FROM t WHERE k IN (4, {}) ORDER BY k",
        list.join(", ")
    );
    assert_eq!(ks(&mut s, &q), [4]);
    let m = sql_message(s.execute("SELECT k FROM t WHERE k IN ('a')"));
    assert!(m.contains("cannot compare"), "{m}");
}

#[test]
fn on_conflict_do_nothing_skips_duplicates_and_other_clauses_are_refused() {
    let db = db();
    let mut s = Session::new(&db);
    assert_eq!(
        s.execute("INSERT INTO t VALUES (1, 0), (3, 30) ON CONFLICT (k) DO NOTHING")
            .unwrap(),
        [Output::Done("INSERT 1".into())]
    );
    assert_eq!(
        s.execute("INSERT INTO t VALUES (2, 0), (4, 40) ON CONFLICT DO NOTHING")
            .unwrap(),
        [Output::Done("INSERT 1".into())]
    );
    assert_eq!(
        table(&mut s),
        int_rows(&[(1, 10), (2, 20), (3, 30), (4, 40)])
    );
    // A conflict on an index other than the target is still an error.
    s.execute("CREATE UNIQUE INDEX t_v ON t (v)").unwrap();
    assert!(matches!(
        s.execute("INSERT INTO t VALUES (5, 10) ON CONFLICT (k) DO NOTHING"),
        Err(Error::DuplicateKey { .. })
    ));
    assert_eq!(
        s.execute("INSERT INTO t VALUES (5, 10) ON CONFLICT (v) DO NOTHING")
            .unwrap(),
        [Output::Done("INSERT 0".into())]
    );
    for (bad, says) in [
        (
            "INSERT INTO t VALUES (9, 9) ON CONFLICT (v) DO UPDATE SET v = 1",
            "primary key as its target",
        ),
        (
            "INSERT INTO t VALUES (9, 9) RETURNING nope",
            "no column `nope`",
        ),
        (
            "UPDATE t SET v = 1 WHERE k = 1 RETURNING sum(v)",
            "function not supported",
        ),
        ("SELECT x.k FROM t AS x", "plain table"),
        ("SELECT * FROM t FOR UPDATE", "locking"),
        ("SELECT * FROM t WHERE k = 1 OFFSET 1", "OFFSET"),
        (
            "CREATE TEMPORARY TABLE w (k INT PRIMARY KEY)",
            "only CREATE TABLE",
        ),
        (
            "CREATE TABLE w (k INT PRIMARY KEY) WITH (fillfactor = 70)",
            "only CREATE TABLE",
        ),
        (
            "INSERT INTO t VALUES (9, 9) ON CONFLICT (v, k) DO NOTHING",
            "unique index",
        ),
    ] {
        let m = sql_message(s.execute(bad));
        assert!(m.contains(says), "{bad}: {m}");
    }
    // IF NOT EXISTS is honoured, not ignored.
    s.execute("CREATE TABLE IF NOT EXISTS t (k INT PRIMARY KEY)")
        .unwrap();
    assert!(s.execute("CREATE TABLE t (k INT PRIMARY KEY)").is_err());
    assert!(db.table("w").is_err());
    // Nothing of the refused statements happened.
    assert_eq!(
        table(&mut s),
        int_rows(&[(1, 10), (2, 20), (3, 30), (4, 40)])
    );
}

#[test]
fn deep_or_long_chains_are_refused_without_a_crash() {
    let db = db();
    let mut s = Session::new(&db);
    let ors: Vec<String> = (0..10_000).map(|i| format!("k = {i}")).collect();
    let m = sql_message(s.execute(&format!("SELECT k FROM t WHERE {}", ors.join(" OR "))));
    assert!(m.contains("nested too deeply"), "{m}");
    let m = sql_message(s.execute(&format!("SELECT {} FROM t", vec!["1"; 20_000].join(" + "))));
    assert!(m.contains("nested too deeply"), "{m}");
    let m = sql_message(s.execute(&format!(
        "SELECT {}1{} FROM t",
        "(".repeat(5_000),
        ")".repeat(5_000)
    )));
    assert!(m.contains("nested too deeply"), "{m}");
    let m = sql_message(s.execute(&format!("SELECT {}1 FROM t", "- ".repeat(5_000))));
    assert!(m.contains("nested too deeply"), "{m}");
    let ifs = format!(
        "CREATE PROCEDURE deep() AS $$ BEGIN {} RETURN; {} END $$",
        "IF 1 = 1 THEN ".repeat(1_000),
        "END IF; ".repeat(1_000)
    );
    let m = sql_message(s.execute(&ifs));
    assert!(m.contains("nested more than"), "{m}");
    // Chains within the bound still run (a 150-term OR, 300 `+`).
    let ors: Vec<String> = (0..150).map(|i| format!("k = {i}")).collect();
    let r = s
        .execute(&format!(
            "SELECT k FROM t WHERE {} ORDER BY k",
            ors.join(" OR ")
        ))
        .unwrap();
    assert_eq!(r.len(), 1);
    let r = s
        .execute(&format!(
            "SELECT {} FROM t WHERE k = 1",
            vec!["1"; 300].join(" + ")
        ))
        .unwrap();
    assert_eq!(
        r,
        [Output::Rows {
            columns: vec![vec!["1"; 300].join(" + ")],
            rows: vec![vec![Value::Int(300)]],
        }]
    );
}

const SPIN: &str = "CREATE PROCEDURE spin() AS $$ DECLARE x INT := 0; BEGIN \
                    FOR i IN 1..9223372036854775807 LOOP x := x + 1; END LOOP; END $$";

#[test]
fn a_statement_timeout_cancels_a_long_statement_and_aborts_its_block() {
    let db = db();
    let mut s = Session::new(&db);
    s.execute(SPIN).unwrap();
    s.set_statement_timeout(Some(Duration::from_millis(100)));
    let start = Instant::now();
    let r = s.execute("CALL spin()");
    assert!(
        matches!(&r, Err(Error::Cancelled(m)) if m.contains("statement timeout")),
        "{r:?}"
    );
    assert!(start.elapsed() < Duration::from_secs(30));
    // Inside a block the cancelled statement aborts it like any failed one.
    let results = s.execute_each("BEGIN; INSERT INTO t VALUES (3, 30); CALL spin(); COMMIT");
    assert!(matches!(results[2], Err(Error::Cancelled(_))));
    assert_eq!(results[3], Ok(Output::Done("ROLLBACK".into())));
    s.set_statement_timeout(None);
    assert_eq!(table(&mut s), int_rows(&[(1, 10), (2, 20)]));
}

#[test]
fn a_cancel_from_another_thread_stops_the_running_statement() {
    let db = db();
    let mut s = Session::new(&db);
    s.execute(SPIN).unwrap();
    let cancel = s.cancel_handle();
    // A cancel while nothing runs is forgotten when the next statement starts.
    cancel.cancel();
    assert_eq!(table(&mut s).len(), 2);
    let canceller = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(100));
        cancel.cancel();
    });
    let r = s.execute("CALL spin()");
    canceller.join().unwrap();
    assert!(
        matches!(&r, Err(Error::Cancelled(m)) if m.contains("user request")),
        "{r:?}"
    );
    // The session goes on.
    assert_eq!(table(&mut s).len(), 2);
}

#[test]
fn returning_gives_the_rows_an_insert_update_or_delete_wrote() {
    let db = db();
    let mut s = Session::new(&db);
    s.execute("CREATE TABLE f (k INT PRIMARY KEY, x DOUBLE)")
        .unwrap();
    let rows = |out: Vec<Output>| match out.into_iter().last() {
        Some(Output::Rows { columns, rows }) => (columns, rows),
        other => panic!("no rows: {other:?}"),
    };
    // The row as stored: the INT became a DOUBLE; skipped conflicts return nothing.
    let (columns, got) = rows(
        s.execute("INSERT INTO f VALUES (1, 2), (2, 3) RETURNING k, x * 2 AS twice")
            .unwrap(),
    );
    assert_eq!(columns, ["k", "twice"]);
    assert_eq!(
        got,
        [
            [Value::Int(1), Value::Float(4.0)],
            [Value::Int(2), Value::Float(6.0)]
        ]
    );
    let (_, got) = rows(
        s.execute("INSERT INTO t VALUES (1, 0), (3, 30) ON CONFLICT DO NOTHING RETURNING *")
            .unwrap(),
    );
    assert_eq!(got, int_rows(&[(3, 30)]));
    // UPDATE returns the new values, DELETE the rows as they were.
    let (_, got) = rows(
        s.execute("UPDATE t SET v = v + 1 WHERE k <= 2 RETURNING k, v")
            .unwrap(),
    );
    assert_eq!(got, int_rows(&[(1, 11), (2, 21)]));
    let (_, got) = rows(s.execute("DELETE FROM t WHERE k >= 2 RETURNING *").unwrap());
    assert_eq!(got, int_rows(&[(2, 21), (3, 30)]));
    assert_eq!(table(&mut s), int_rows(&[(1, 11)]));
    // Without RETURNING, the tags as before.
    assert_eq!(
        s.execute("DELETE FROM t WHERE k = 1").unwrap(),
        [Output::Done("DELETE 1".into())]
    );
}

#[test]
fn on_conflict_do_update_updates_the_existing_row_with_excluded_values() {
    let db = db();
    let mut s = Session::new(&db);
    assert_eq!(
        s.execute(
            "INSERT INTO t VALUES (1, 5), (9, 90) \
             ON CONFLICT (k) DO UPDATE SET v = t.v + excluded.v"
        )
        .unwrap(),
        [Output::Done("INSERT 2".into())]
    );
    assert_eq!(table(&mut s), int_rows(&[(1, 15), (2, 20), (9, 90)]));
    // The WHERE sees the existing row: a row it rejects is neither updated nor counted.
    let out = s
        .execute(
            "INSERT INTO t VALUES (1, 0), (2, 0) ON CONFLICT (k) DO UPDATE SET v = excluded.v \
             WHERE v > 15 RETURNING k, v",
        )
        .unwrap();
    assert_eq!(
        out,
        [Output::Rows {
            columns: vec!["k".into(), "v".into()],
            rows: int_rows(&[(2, 0)]),
        }]
    );
    // A key repeated in the VALUES would be updated twice: refused, nothing kept.
    let m = sql_message(
        s.execute("INSERT INTO t VALUES (3, 1), (3, 2) ON CONFLICT (k) DO UPDATE SET v = 7"),
    );
    assert!(m.contains("second time"), "{m}");
    assert_eq!(table(&mut s), int_rows(&[(1, 15), (2, 0), (9, 90)]));
    let m =
        sql_message(s.execute("INSERT INTO t VALUES (1, 1) ON CONFLICT (k) DO UPDATE SET v = 'x'"));
    assert!(m.contains("cannot assign VARCHAR"), "{m}");
}
