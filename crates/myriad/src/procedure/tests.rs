use super::*;
use crate::sql::{Output, Session};
use crate::{Config, Database, Error};
use std::sync::Arc;

fn db() -> Database {
    Database::open(Config::default()).unwrap()
}

/// Thesis Fig. 3.1: the bank-transfer procedure, each statement on the line the figure gives
/// it (the declarations share line 1 with the header).
const TRANSFER: &str = "\
CREATE PROCEDURE transfer(src_id VARCHAR(16)) AS $$ DECLARE dst_id VARCHAR(16); src_val DOUBLE; dst_val DOUBLE; tmp DOUBLE; bonus INT; BEGIN
  SELECT dst INTO dst_id FROM client WHERE name = src_id;
  SELECT val INTO src_val FROM balance WHERE name = src_id;
  SELECT val INTO dst_val FROM balance WHERE name = dst_id;
  tmp := 0.01 * src_val;
  UPDATE balance SET val = src_val - tmp WHERE name = src_id;
  UPDATE balance SET val = dst_val + tmp WHERE name = dst_id;
  SELECT val INTO bonus FROM bonus WHERE name = src_id;
  UPDATE bonus SET val = bonus + 1 WHERE name = src_id;
END $$;";

fn bank(db: &Database) {
    let mut s = Session::new(db);
    s.execute(
        "CREATE TABLE client (name VARCHAR(16) PRIMARY KEY, dst VARCHAR(16));
         CREATE TABLE balance (name VARCHAR(16) PRIMARY KEY, val DOUBLE);
         CREATE TABLE bonus (name VARCHAR(16) PRIMARY KEY, val INT);
         INSERT INTO client VALUES ('Amy', 'Dan'), ('Dan', 'Amy');
         INSERT INTO balance VALUES ('Amy', 2000), ('Dan', 1200);
         INSERT INTO bonus VALUES ('Amy', 18), ('Dan', 7);",
    )
    .unwrap();
}

fn rows(s: &mut Session<'_>, sql: &str) -> Vec<Vec<Value>> {
    match s.execute(sql).unwrap().pop() {
        Some(Output::Rows { rows, .. }) => rows,
        other => panic!("no rows: {other:?}"),
    }
}

/// (from line, to line, variable, kind) for every edge between operations.
fn edges(p: &Procedure) -> Vec<(u64, u64, String, UseKind)> {
    p.def_use()
        .into_iter()
        .filter_map(|e| match e.from {
            Source::Op(f) => Some((
                p.ops()[f].line,
                p.ops()[e.to].line,
                p.var_name(e.var).to_string(),
                e.kind,
            )),
            Source::Entry => None,
        })
        .collect()
}

#[test]
fn bank_transfer_dependencies_match_thesis_figure_3_3() {
    let db = db();
    bank(&db);
    let p = db.create_procedures(TRANSFER).unwrap().remove(0);
    let e = edges(&p);
    let has = |from: u64, to: u64, var: &str, kind: UseKind| {
        e.iter()
            .any(|x| x.0 == from && x.1 == to && x.2 == var && x.3 == kind)
    };
    // Lines 4 and 7 are key-dependent on line 2 (dstId is their access key).
    assert!(has(2, 4, "dst_id", UseKind::Key), "{e:?}");
    assert!(has(2, 7, "dst_id", UseKind::Key), "{e:?}");
    // Line 9 is value-dependent on line 8 (bonus is the value it writes).
    assert!(has(8, 9, "bonus", UseKind::Value), "{e:?}");
    // ... and not key-dependent on anything: its key is the parameter.
    assert!(!e.iter().any(|x| x.1 == 9 && x.3 == UseKind::Key), "{e:?}");
    // The rest of the figure: 6 and 7 take values from 3, 4 and 5.
    assert!(has(3, 5, "src_val", UseKind::Value));
    assert!(has(3, 6, "src_val", UseKind::Value));
    assert!(has(5, 6, "tmp", UseKind::Value));
    assert!(has(4, 7, "dst_val", UseKind::Value));
    assert!(has(5, 7, "tmp", UseKind::Value));
    // Nothing else consumes line 2's output as a value.
    assert!(!e
        .iter()
        .any(|x| x.0 == 2 && x.3 == UseKind::Value && x.2 == "dst_id"));
    // The IR records the same split per operation.
    let op7 = p.ops().iter().find(|o| o.line == 7).unwrap();
    let names = |k: UseKind| -> Vec<&str> {
        op7.uses
            .iter()
            .filter(|u| u.1 == k)
            .map(|u| p.var_name(u.0))
            .collect()
    };
    assert_eq!(names(UseKind::Key), ["dst_id"]);
    assert_eq!(names(UseKind::Value), ["dst_val", "tmp"]);
    // Text and dot outputs name the edges.
    let text = p.explain();
    assert!(
        text.contains("#0 (line 2) -> #2 (line 4)  key dst_id"),
        "{text}"
    );
    let dot = p.explain_dot();
    assert!(
        dot.contains("op6 -> op7 [label=\"bonus (value)\", style=dashed]"),
        "{dot}"
    );

    // And it runs: $20 moves from Amy to Dan, Amy's bonus goes up by one.
    assert_eq!(
        db.call("transfer", &["Amy".into()]).unwrap(),
        Vec::<Value>::new()
    );
    let mut s = Session::new(&db);
    assert_eq!(
        rows(&mut s, "SELECT name, val FROM balance ORDER BY name"),
        [
            [Value::Str("Amy".into()), Value::Float(1980.0)],
            [Value::Str("Dan".into()), Value::Float(1220.0)]
        ]
    );
    assert_eq!(
        rows(&mut s, "SELECT val FROM bonus WHERE name = 'Amy'"),
        [[Value::Int(19)]]
    );
}

#[test]
fn the_builder_produces_the_same_ir_as_sql() {
    let db = db();
    bank(&db);
    let sql = db.compile_procedures(TRANSFER).unwrap().remove(0);
    let n = Ex::name;
    let key = |v: &str| Some(n("name").eq(n(v)));
    let b = ProcedureBuilder::new("transfer_b")
        .param("src_id", VarType::Text)
        .declare("dst_id", VarType::Text)
        .declare("src_val", VarType::Float)
        .declare("dst_val", VarType::Float)
        .declare("tmp", VarType::Float)
        .declare("bonus", VarType::Int)
        .body(|b| {
            b.select_into("client", &[n("dst")], &["dst_id"], key("src_id"))
                .select_into("balance", &[n("val")], &["src_val"], key("src_id"))
                .select_into("balance", &[n("val")], &["dst_val"], key("dst_id"))
                .assign("tmp", Ex::float(0.01).mul(n("src_val")))
                .update(
                    "balance",
                    &[("val", n("src_val").sub(n("tmp")))],
                    key("src_id"),
                )
                .update(
                    "balance",
                    &[("val", n("dst_val").add(n("tmp")))],
                    key("dst_id"),
                )
                .select_into("bonus", &[n("val")], &["bonus"], key("src_id"))
                .update(
                    "bonus",
                    &[("val", n("bonus").add(Ex::int(1)))],
                    key("src_id"),
                );
        });
    let built = db.register_procedure(b).unwrap();
    // Same operations, same uses and definitions, same graph (lines differ: the builder
    // numbers statements from 1).
    assert_eq!(sql.ops().len(), built.ops().len());
    for (a, b) in sql.ops().iter().zip(built.ops()) {
        assert_eq!(a.uses, b.uses);
        assert_eq!(a.defs, b.defs);
        assert_eq!(a.text, b.text);
        assert_eq!(a.line, b.line + 1);
    }
    assert_eq!(sql.def_use(), built.def_use());
    built.call(&db, &["Dan".into()]).unwrap();
    let mut s = Session::new(&db);
    assert_eq!(
        rows(&mut s, "SELECT val FROM balance WHERE name = 'Amy'"),
        [[Value::Float(2012.0)]]
    );
}

#[test]
fn control_flow_loops_arrays_and_strings() {
    let db = db();
    let mut s = Session::new(&db);
    s.execute("CREATE TABLE kv (k INT PRIMARY KEY, v INT, tag VARCHAR(32))")
        .unwrap();
    db.create_procedures(
        "CREATE PROCEDURE fill(ks BIGINT[], prefix TEXT) AS $$
         DECLARE total INT := 0; label TEXT; n INT;
         BEGIN
           FOR i IN 1..cardinality(ks) LOOP
             IF ks[i] % 3 = 0 THEN
               label := prefix || 'fizz' || ks[i];
             ELSIF ks[i] % 5 = 0 THEN
               label := substring(prefix || 'buzz' FROM 2 FOR 4);
             ELSE
               label := prefix;
             END IF;
             INSERT INTO kv VALUES (ks[i], ks[i] * 10, label);
           END LOOP;
           FOR r IN SELECT k, v FROM kv WHERE k >= 3 ORDER BY k DESC LOOP
             total := total + r.v;
           END LOOP;
           SELECT count(*) INTO n FROM kv;
           RETURN total, n, label;
         END $$;",
    )
    .unwrap();
    let out = db
        .call("fill", &[vec![1i64, 3, 5, 7].into(), "x".into()])
        .unwrap();
    assert_eq!(
        out,
        [Value::Int(150), Value::Int(4), Value::Str("x".into())]
    );
    assert_eq!(
        rows(&mut s, "SELECT k, tag FROM kv ORDER BY k"),
        [
            [Value::Int(1), Value::Str("x".into())],
            [Value::Int(3), Value::Str("xfizz3".into())],
            [Value::Int(5), Value::Str("buzz".into())],
            [Value::Int(7), Value::Str("x".into())]
        ]
    );
    // CALL from SQL, with an array literal; the RETURN values come back as a row.
    assert_eq!(
        rows(&mut s, "CALL fill(ARRAY[9, 10], 'y')"),
        [[
            Value::Int(150 + 90 + 100),
            Value::Int(6),
            Value::Str("buzz".into())
        ]]
    );
    // An index outside the array is a runtime error that names it, and rolls back.
    let e = db.call("fill", &[vec![11i64].into(), "z".into()]);
    assert!(e.is_ok());
    db.create_procedures(
        "CREATE PROCEDURE bad(ks INT[]) AS $$ DECLARE x INT; BEGIN x := ks[2]; END $$",
    )
    .unwrap();
    let e = db.call("bad", &[vec![1i64].into()]).unwrap_err();
    assert!(
        e.to_string().contains("array index 2 out of range 1..1"),
        "{e}"
    );
}

/// The tables the loop whose text starts with `head` warms.
fn warms_of(p: &Procedure, head: &str) -> Vec<String> {
    let o = p.ops().iter().find(|o| o.text.starts_with(head)).unwrap();
    o.warms.clone()
}

/// A `FOR r IN SELECT` loop warms the point accesses of its body keyed by the row's fields
/// and by what the body does not write, 32 rows at a time (TPC-C Stock-Level's STOCK reads);
/// results are what they were without it, past 32 rows, with text fields, with a nested
/// loop of the same kind, and when the body writes the table the loop selected from.
#[test]
fn query_loops_warm_the_point_accesses_of_their_rows() {
    let db = db();
    let mut s = Session::new(&db);
    s.execute(
        "CREATE TABLE line (o INT, n INT, i INT, tag VARCHAR(8), PRIMARY KEY (o, n));
         CREATE TABLE stock (s_w INT, s_i INT, qty INT, PRIMARY KEY (s_w, s_i));
         CREATE TABLE hit (k INT PRIMARY KEY, c INT);",
    )
    .unwrap();
    for n in 1..=70i64 {
        let i = (n * 7) % 50 + 1;
        s.execute(&format!(
            "INSERT INTO line VALUES (1, {n}, {i}, 't{}');",
            n % 3
        ))
        .unwrap();
    }
    for i in 1..=50i64 {
        s.execute(&format!("INSERT INTO stock VALUES (1, {i}, {});", i % 13))
            .unwrap();
        s.execute(&format!("INSERT INTO hit VALUES ({i}, 0);"))
            .unwrap();
    }
    let p = db
        .create_procedures(
            "CREATE PROCEDURE low(w INT, o_id INT, threshold INT) AS $$
             DECLARE q INT; low INT := 0; cnt INT := 0; tags VARCHAR(200) := ''; inner INT := 0;
             BEGIN
               FOR r IN SELECT i, tag FROM line WHERE o = o_id ORDER BY n LOOP
                 SELECT qty INTO q FROM stock WHERE s_w = w AND s_i = r.i;
                 IF q < threshold THEN
                   low := low + 1;
                 END IF;
                 cnt := cnt + 1;
                 UPDATE hit SET c = c + 1 WHERE k = cnt;
                 UPDATE line SET i = 0 WHERE o = o_id AND n = cnt;
                 IF cnt <= 2 THEN
                   tags := tags || r.tag;
                   FOR x IN SELECT n FROM line WHERE o = o_id AND n <= 3 ORDER BY n LOOP
                     inner := inner + x.n;
                   END LOOP;
                 END IF;
               END LOOP;
               RETURN low, cnt, tags, inner;
             END $$;",
        )
        .unwrap()
        .remove(0);
    let warms = |head: &str| warms_of(&p, head);
    // STOCK by (w, r.i) is warmed; HIT's and LINE's keys use `cnt`, which the body writes.
    assert_eq!(warms("FOR r"), ["stock"]);
    assert!(warms("FOR x").is_empty());
    assert!(p.explain().contains("warms: stock"), "{}", p.explain());
    let low = (1..=70i64)
        .filter(|n| {
            let i = (n * 7) % 50 + 1;
            i % 13 < 5
        })
        .count() as i64;
    let out = db
        .call("low", &[1i64.into(), 1i64.into(), 5i64.into()])
        .unwrap();
    assert_eq!(
        out,
        [
            Value::Int(low),
            Value::Int(70),
            Value::from("t1t2"),
            Value::Int(12)
        ]
    );
    // The loop's rows were read before the body zeroed their items.
    assert_eq!(
        rows(&mut s, "SELECT count(*) FROM line WHERE i = 0"),
        [[Value::Int(70)]]
    );
    assert_eq!(rows(&mut s, "SELECT sum(c) FROM hit"), [[Value::Int(50)]]);
}

/// A FOR loop warms the point accesses of its body whose keys depend only on the loop
/// variable and on what the body does not write (each table and key once), not those in a
/// nested loop (which warms its own); results are what they were without it, past
/// `PREFETCH_MAX` iterations too, and a key that cannot be evaluated is left to the body,
/// which reports it.
#[test]
fn loops_warm_the_point_accesses_their_keys_allow() {
    let db = db();
    let mut s = Session::new(&db);
    s.execute(
        "CREATE TABLE item (i_id INT PRIMARY KEY, price INT);
         CREATE TABLE stock (s_w INT, s_i INT, qty INT, PRIMARY KEY (s_w, s_i));
         CREATE TABLE log (k INT PRIMARY KEY, v INT);",
    )
    .unwrap();
    for i in 1..=50i64 {
        s.execute(&format!(
            "INSERT INTO item VALUES ({i}, {}); INSERT INTO stock VALUES (1, {i}, 100);
             INSERT INTO log VALUES ({i}, {i});",
            i * 10
        ))
        .unwrap();
    }
    let p = db
        .create_procedures(
            "CREATE PROCEDURE order_items(w INT, ids BIGINT[], qs BIGINT[], n INT) AS $$
             DECLARE p INT; q INT; total INT := 0; j INT := 0; seen INT := 0;
             BEGIN
               FOR i IN 1..n LOOP
                 SELECT price INTO p FROM item WHERE i_id = ids[i];
                 SELECT qty INTO q FROM stock WHERE s_w = w AND s_i = ids[i];
                 UPDATE stock SET qty = q - qs[i] WHERE s_w = w AND s_i = ids[i];
                 j := j + 1;
                 SELECT v INTO q FROM log WHERE k = j;
                 seen := seen + q;
                 FOR r IN 1..2 LOOP
                   SELECT v INTO q FROM log WHERE k = r;
                   seen := seen + q;
                 END LOOP;
                 total := total + p * qs[i];
               END LOOP;
               RETURN total, seen;
             END $$;",
        )
        .unwrap()
        .remove(0);
    let warms = |head: &str| warms_of(&p, head);
    assert_eq!(warms("FOR i"), ["item", "stock"]);
    assert_eq!(warms("FOR r"), ["log"]);
    assert!(
        p.explain().contains("warms: item, stock"),
        "{}",
        p.explain()
    );
    // 40 items (past PREFETCH_MAX), ids 50, 49, ...; quantities 1, 2, 1, 2, ...
    let ids: Vec<i64> = (0..40).map(|i| 50 - i).collect();
    let qs: Vec<i64> = (0..40).map(|i| 1 + i % 2).collect();
    let total: i64 = ids.iter().zip(&qs).map(|(i, q)| i * 10 * q).sum();
    let seen: i64 = (1..=40).sum::<i64>() + 40 * 3;
    let out = db
        .call(
            "order_items",
            &[
                1i64.into(),
                ids.clone().into(),
                qs.clone().into(),
                40i64.into(),
            ],
        )
        .unwrap();
    assert_eq!(out, [Value::Int(total), Value::Int(seen)]);
    for (i, q) in ids.iter().zip(&qs) {
        assert_eq!(
            rows(
                &mut s,
                &format!("SELECT qty FROM stock WHERE s_w = 1 AND s_i = {i}")
            ),
            [[Value::Int(100 - q)]]
        );
    }
    // One iteration more than the arrays hold: the body names the index, nothing stays.
    let e = db
        .call(
            "order_items",
            &[
                1i64.into(),
                vec![1i64, 2].into(),
                vec![5i64, 5].into(),
                3i64.into(),
            ],
        )
        .unwrap_err();
    assert!(
        e.to_string().contains("array index 3 out of range 1..2"),
        "{e}"
    );
    assert_eq!(
        rows(&mut s, "SELECT qty FROM stock WHERE s_w = 1 AND s_i = 1"),
        [[Value::Int(100)]]
    );
}

#[test]
fn found_raise_and_rollback_undo_everything() {
    let db = db();
    let mut s = Session::new(&db);
    s.execute(
        "CREATE TABLE acct (id INT PRIMARY KEY, bal INT); INSERT INTO acct VALUES (1, 100), (2, 5)",
    )
    .unwrap();
    db.create_procedures(
        "CREATE PROCEDURE pay(src INT, dst INT, amount INT) AS $$
         DECLARE b INT;
         BEGIN
           INSERT INTO acct VALUES (1000 + src, 0);
           SELECT bal INTO b FROM acct WHERE id = src;
           IF NOT found THEN
             RAISE EXCEPTION 'no account %', src;
           END IF;
           IF b < amount THEN
             ROLLBACK;
           END IF;
           UPDATE acct SET bal = bal - amount WHERE id = src;
           UPDATE acct SET bal = bal + amount WHERE id = dst;
           IF NOT found THEN
             RAISE EXCEPTION 'no account % (to receive %)', dst, amount;
           END IF;
           RETURN b - amount;
         END $$;",
    )
    .unwrap();
    assert_eq!(
        db.call("pay", &[1i64.into(), 2i64.into(), 30i64.into()])
            .unwrap(),
        [Value::Int(70)]
    );
    let err = db
        .call("pay", &[9i64.into(), 2i64.into(), 1i64.into()])
        .unwrap_err();
    assert!(
        matches!(&err, Error::ProcedureAbort { procedure, message } if procedure == "pay" && message == "no account 9"),
        "{err}"
    );
    let err = db
        .call("pay", &[2i64.into(), 1i64.into(), 500i64.into()])
        .unwrap_err();
    assert!(matches!(&err, Error::ProcedureAbort { message, .. } if message == "ROLLBACK"));
    let err = db
        .call("pay", &[2i64.into(), 77i64.into(), 10i64.into()])
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "procedure `pay` rolled back: no account 77 (to receive 10)"
    );
    // Only the first call left anything behind.
    assert_eq!(
        rows(&mut s, "SELECT id, bal FROM acct ORDER BY id"),
        [
            [Value::Int(1), Value::Int(70)],
            [Value::Int(2), Value::Int(35)],
            [Value::Int(1001), Value::Int(0)]
        ]
    );
}

fn sql_err(r: Result<Vec<Arc<Procedure>>>) -> (u64, u64, String) {
    match r {
        Err(Error::Sql {
            line,
            column,
            message,
        }) => (line, column, message),
        Err(e) => panic!("not a SQL error: {e}"),
        Ok(_) => panic!("compiled"),
    }
}

#[test]
fn compile_errors_name_the_problem_and_where() {
    let db = db();
    bank(&db);
    let wrap = |body: &str| {
        format!("CREATE PROCEDURE p(k INT, ks INT[]) AS $$\nDECLARE v INT; s TEXT;\nBEGIN\n{body}\nEND $$")
    };
    let check = |body: &str, line: u64, col: u64, needle: &str| {
        let (l, c, m) = sql_err(db.create_procedures(&wrap(body)));
        assert!(m.contains(needle), "{body}: {m}");
        if line > 0 {
            assert_eq!(l, line, "{body}: {m}");
        }
        if col > 0 {
            assert_eq!(c, col, "{body}: {m}");
        }
    };
    check(
        "  SELECT val INTO v FROM nope WHERE name = 'x';",
        4,
        3,
        "unknown table `nope`",
    );
    check(
        "  SELECT nope INTO v FROM bonus;",
        4,
        0,
        "table `bonus` has no column `nope`",
    );
    check("  v := w + 1;", 4, 0, "unknown variable `w`");
    check(
        "  v := 'text';",
        4,
        3,
        "cannot assign VARCHAR to variable `v` of type INT",
    );
    check("  k := 1;", 4, 3, "parameter `k` cannot be assigned");
    check("  SELECT val FROM bonus;", 4, 3, "needs INTO");
    check(
        "  SELECT val, name INTO v FROM bonus;",
        4,
        3,
        "SELECT has 2 values but INTO names 1",
    );
    check(
        "  IF v THEN v := 1; END IF;",
        4,
        3,
        "IF needs a boolean condition, found INT",
    );
    check("  IF v > 1 THEN v := 1;", 0, 0, "Expected: IF");
    check(
        "  UPDATE bonus SET name = 'x' WHERE val = 1;",
        4,
        3,
        "cannot update primary-key column `bonus.name`",
    );
    check("  v := ks;", 4, 0, "cannot assign INT[] to variable `v`");
    check("  v := s[1];", 4, 0, "`s` is VARCHAR, not an array");
    check("  RAISE EXCEPTION 'x % %', v;", 4, 0, "2 `%` but 1 values");
    check(
        "  FOR i IN 1..3 LOOP v := i; END LOOP; v := i;",
        4,
        0,
        "unknown variable `i`",
    );
    // Procedures: names, arguments.
    db.create_procedures("CREATE PROCEDURE q(a INT, b DOUBLE) AS $$ BEGIN RETURN a + b; END $$")
        .unwrap();
    assert!(matches!(
        db.create_procedures("CREATE PROCEDURE q() AS $$ BEGIN END $$"),
        Err(Error::AlreadyExists(n)) if n == "q"
    ));
    db.create_procedures(
        "CREATE OR REPLACE PROCEDURE q(a INT, b DOUBLE) AS $$ BEGIN RETURN a * b; END $$",
    )
    .unwrap();
    assert_eq!(
        db.call("q", &[2i64.into(), 3i64.into()]).unwrap(),
        [Value::Float(6.0)]
    );
    let e = db.call("q", &[2i64.into()]).unwrap_err();
    assert_eq!(e.to_string(), "call of `q`: 1 arguments given, 2 expected");
    let e = db.call("q", &["x".into(), 1.5.into()]).unwrap_err();
    assert_eq!(
        e.to_string(),
        "call of `q`: parameter `a` is INT, found VARCHAR"
    );
    assert!(matches!(db.call("nope", &[]), Err(Error::UnknownProcedure(n)) if n == "nope"));
    assert_eq!(db.procedure_names(), ["q"]);
}

#[test]
fn concurrent_transfers_conserve_money() {
    let db = Database::open(Config::default().max_retries(1_000)).unwrap();
    let mut s = Session::new(&db);
    s.execute("CREATE TABLE acct (id INT PRIMARY KEY, bal INT)")
        .unwrap();
    for i in 0..8 {
        s.execute(&format!("INSERT INTO acct VALUES ({i}, 1000)"))
            .unwrap();
    }
    let p = db
        .create_procedures(
            "CREATE PROCEDURE move(a INT, b INT, amount INT) AS $$ DECLARE x INT; BEGIN
               SELECT bal INTO x FROM acct WHERE id = a;
               IF x >= amount THEN
                 UPDATE acct SET bal = x - amount WHERE id = a;
                 UPDATE acct SET bal = bal + amount WHERE id = b;
               END IF;
             END $$",
        )
        .unwrap()
        .remove(0);
    std::thread::scope(|sc| {
        for t in 0..2i64 {
            let (db, p) = (&db, &p);
            sc.spawn(move || {
                for i in 0..2_000i64 {
                    let a = (i * 7 + t) % 8;
                    let b = (i * 3 + 1 + t) % 8;
                    if a != b {
                        p.call(db, &[a.into(), b.into(), (i % 50).into()]).unwrap();
                    }
                }
            });
        }
    });
    assert_eq!(
        rows(&mut s, "SELECT sum(bal), min(bal) FROM acct")[0][0],
        Value::Int(8000)
    );
}

#[test]
fn a_caller_kept_frame_takes_arguments_in_place_and_checks_their_types() {
    let db = db();
    let mut s = Session::new(&db);
    s.execute(
        "CREATE TABLE t (k INT PRIMARY KEY, v INT); INSERT INTO t VALUES (1, 10), (2, 20), (3, 30)",
    )
    .unwrap();
    let p = db
        .create_procedures(
            "CREATE PROCEDURE total(ks INT[], bump INT) AS $$ DECLARE x INT; acc INT; BEGIN
               FOR i IN 1..cardinality(ks) LOOP
                 SELECT v INTO x FROM t WHERE k = ks[i];
                 IF found THEN acc := acc + x + bump; END IF;
               END LOOP;
               RETURN acc;
             END $$",
        )
        .unwrap()
        .remove(0);
    let mut frame = p.frame();
    let mut tx = db.begin().unwrap();
    for (ks, bump, want) in [(vec![1, 2], 0, 30), (vec![3, 9, 1], 1, 42), (vec![], 5, 0)] {
        frame.set_ints(0, ks.iter().copied());
        frame.set(1, Value::Int(bump));
        assert_eq!(
            p.execute_bound(&mut tx, &mut frame).unwrap(),
            [Value::Int(want)]
        );
        // The same through `execute_in` (arguments copied in) and `execute` (a new frame).
        let args = [Arg::from(ks.clone()), Arg::from(bump)];
        assert_eq!(
            p.execute_in(&mut tx, &args, &mut frame).unwrap(),
            [Value::Int(want)]
        );
        assert_eq!(p.execute(&mut tx, &args).unwrap(), [Value::Int(want)]);
    }
    frame.set(1, Value::from("x"));
    let e = p.execute_bound(&mut tx, &mut frame).unwrap_err();
    assert_eq!(e.to_string(), "call of `total`: parameter `bump` needs INT");
    let other = db
        .create_procedures("CREATE PROCEDURE other() AS $$ BEGIN END $$")
        .unwrap()
        .remove(0);
    let e = other.execute_bound(&mut tx, &mut frame).unwrap_err();
    assert!(
        e.to_string().contains("belongs to another procedure"),
        "{e}"
    );
    tx.commit().unwrap();
}

#[test]
fn procedures_read_through_secondary_indexes() {
    let db = db();
    let mut s = Session::new(&db);
    s.execute(
        "CREATE TABLE c (id INT PRIMARY KEY, city VARCHAR(8), n INT);
         CREATE INDEX c_city ON c (city);
         INSERT INTO c VALUES (1, 'a', 1), (2, 'b', 2), (3, 'a', 3);",
    )
    .unwrap();
    let p = db
        .create_procedures(
            "CREATE PROCEDURE total(x VARCHAR(8)) AS $$ DECLARE t INT; BEGIN
               FOR r IN SELECT n FROM c WHERE city = x LOOP t := t + r.n; END LOOP;
               RETURN t;
             END $$",
        )
        .unwrap()
        .remove(0);
    let ir::Stmt::ForRows { read, .. } = &p.p.body[0] else {
        panic!("a FOR loop over rows")
    };
    assert_eq!(read.access.index.as_ref().map(|i| i.0), Some(1));
    assert_eq!(db.call("total", &["a".into()]).unwrap(), [Value::Int(4)]);
    assert_eq!(db.call("total", &["z".into()]).unwrap(), [Value::Int(0)]);
}

/// The jump table of an `IF x = c ...` chain picks the arm the chain would: the first arm
/// with an equal literal (duplicates, literals on either side, negative values), ELSE for a
/// value in a hole or outside the literals, and an error for an out-of-range element.
#[test]
fn if_chains_over_one_int_run_as_jump_tables_with_chain_semantics() {
    let db = db();
    let p = db
        .create_procedures(
            "CREATE PROCEDURE pick(xs INT[]) AS $$ DECLARE r INT := 0; x INT; BEGIN
               FOR i IN 1..cardinality(xs) LOOP
                 IF xs[i] = 2 THEN r := r * 10 + 1;
                 ELSIF 5 = xs[i] THEN r := r * 10 + 2;
                 ELSIF xs[i] = 2 THEN r := r * 10 + 9;
                 ELSIF xs[i] = -1 THEN r := r * 10 + 3;
                 ELSE r := r * 10 + 4;
                 END IF;
               END LOOP;
               x := xs[1];
               IF x = 7 THEN r := r * 10 + 5; ELSIF x = 8 THEN r := r * 10 + 6;
               ELSIF x = 9 THEN r := r * 10 + 7; END IF;
               RETURN r;
             END $$",
        )
        .unwrap()
        .remove(0);
    let ir::Stmt::ForRange { body, .. } = &p.p.body[0] else {
        panic!("the first statement is the loop")
    };
    assert!(
        matches!(&body[0], ir::Stmt::If { switch: Some(sw), .. } if sw.lo == -1 && sw.arm.len() == 7),
        "the chain compiled to a jump table"
    );
    let call = |xs: Vec<i64>| db.call("pick", &[xs.into()]);
    assert_eq!(call(vec![2, 5, -1, 0]).unwrap(), [Value::Int(1234)]);
    assert_eq!(call(vec![3, 6, -2, i64::MAX]).unwrap(), [Value::Int(4444)]);
    assert_eq!(call(vec![7]).unwrap(), [Value::Int(45)]);
    assert_eq!(call(vec![9, 2]).unwrap(), [Value::Int(417)]);
    assert_eq!(call(vec![i64::MIN]).unwrap(), [Value::Int(4)]);
    // Not an equality chain over one variable: no table, same answers.
    let q = db
        .create_procedures(
            "CREATE PROCEDURE mixed(a INT, b INT) AS $$ BEGIN
               IF a = 1 THEN RETURN 1; ELSIF b = 2 THEN RETURN 2; ELSIF a = 3 THEN RETURN 3;
               END IF; RETURN 0; END $$",
        )
        .unwrap()
        .remove(0);
    assert!(matches!(&q.p.body[0], ir::Stmt::If { switch: None, .. }));
    assert_eq!(
        db.call("mixed", &[3i64.into(), 2i64.into()]).unwrap(),
        [Value::Int(2)]
    );
}

/// The INT point-update fast path keeps UPDATE's meaning: `found` for a missing key, and a
/// SET that reads the row (here a swap) goes the general way, where every SET sees the old row.
#[test]
fn int_point_updates_set_found_and_swaps_see_the_old_row() {
    let db = db();
    let mut s = Session::new(&db);
    s.execute("CREATE TABLE t (k INT PRIMARY KEY, a INT, b INT); INSERT INTO t VALUES (1, 10, 20)")
        .unwrap();
    let ps = db
        .create_procedures(
            "CREATE PROCEDURE put(key INT, v INT) AS $$ BEGIN
               UPDATE t SET a = v * 2, b = v + 1 WHERE k = key;
               IF found THEN RETURN 1; END IF;
               RETURN 0;
             END $$;
             CREATE PROCEDURE swap(key INT) AS $$ BEGIN
               UPDATE t SET a = b, b = a WHERE k = key;
             END $$",
        )
        .unwrap();
    assert!(matches!(
        &ps[0].p.body[0],
        ir::Stmt::Update {
            int_key: Some(_),
            ..
        }
    ));
    assert!(matches!(
        &ps[1].p.body[0],
        ir::Stmt::Update { int_key: None, .. }
    ));
    assert_eq!(
        db.call("put", &[1i64.into(), 4i64.into()]).unwrap(),
        [Value::Int(1)]
    );
    assert_eq!(
        db.call("put", &[2i64.into(), 4i64.into()]).unwrap(),
        [Value::Int(0)]
    );
    db.call("swap", &[1i64.into()]).unwrap();
    assert_eq!(
        rows(&mut s, "SELECT a, b FROM t"),
        [[Value::Int(5), Value::Int(8)]]
    );
}

/// An UPDATE by a composite key whose SETs all evaluate as INT takes the integer path (no
/// `Value` per SET): every SET still sees the old row, an INT widens into a DOUBLE column,
/// a text SET sends the statement the general way, and an overflow fails it with nothing
/// changed.
#[test]
fn int_updates_by_composite_keys_keep_update_semantics() {
    let db = db();
    let mut s = Session::new(&db);
    s.execute(
        "CREATE TABLE u (k INT, j INT, a INT, x DOUBLE, s VARCHAR(8), PRIMARY KEY (k, j));
         INSERT INTO u VALUES (1, 1, 10, 0.5, 'p');",
    )
    .unwrap();
    db.create_procedures(
        "CREATE PROCEDURE bump(key INT, big INT) AS $$ BEGIN
           UPDATE u SET a = a + big, x = a WHERE k = key AND j = 1;
         END $$;
         CREATE PROCEDURE tag(key INT) AS $$ BEGIN
           UPDATE u SET a = a + 1, s = 'q' WHERE k = key AND j = 1;
         END $$",
    )
    .unwrap();
    let row = |s: &mut Session<'_>| rows(s, "SELECT a, x, s FROM u");
    db.call("bump", &[1i64.into(), 5i64.into()]).unwrap();
    assert_eq!(
        row(&mut s),
        [[Value::Int(15), Value::Float(10.0), Value::from("p")]]
    );
    db.call("tag", &[1i64.into()]).unwrap();
    assert_eq!(
        row(&mut s),
        [[Value::Int(16), Value::Float(10.0), Value::from("q")]]
    );
    assert!(db.call("bump", &[1i64.into(), i64::MAX.into()]).is_err());
    assert_eq!(
        row(&mut s),
        [[Value::Int(16), Value::Float(10.0), Value::from("q")]]
    );
}

#[test]
fn declared_int_arrays_append_and_any() {
    let db = db();
    Session::new(&db)
        .execute(
            "CREATE TABLE line (o INT, n INT, item INT, PRIMARY KEY (o, n));
             INSERT INTO line VALUES (1, 1, 7), (1, 2, 9), (2, 1, 7), (2, 2, 4), (3, 1, 9), (3, 2, 5);",
        )
        .unwrap();
    let p = db
        .create_procedures(
            "CREATE PROCEDURE distinct_items(lo INT, hi INT) AS $$
             DECLARE seen BIGINT[]; k INT; BEGIN
               FOR r IN SELECT item FROM line WHERE o >= lo AND o <= hi LOOP
                 IF NOT r.item = ANY(seen) THEN
                   seen := seen || r.item;
                 END IF;
               END LOOP;
               k := cardinality(seen);
               RETURN k, seen[k];
             END $$;",
        )
        .unwrap()
        .remove(0);
    // The frame is reused: the array starts empty on every call.
    let mut f = p.frame();
    let mut call = |lo: i64, hi: i64| {
        let mut tx = db.begin().unwrap();
        let r = p
            .execute_in(&mut tx, &[lo.into(), hi.into()], &mut f)
            .unwrap();
        tx.commit().unwrap();
        r
    };
    assert_eq!(call(1, 3), [Value::Int(4), Value::Int(5)]);
    assert_eq!(call(1, 2), [Value::Int(3), Value::Int(4)]);
    assert_eq!(call(3, 3), [Value::Int(2), Value::Int(5)]);
    // Only INT arrays, starting empty.
    for decl in ["xs DOUBLE[]", "xs BIGINT[] := 1"] {
        let e = db
            .create_procedures(&format!(
                "CREATE PROCEDURE bad() AS $$ DECLARE {decl}; BEGIN RETURN 1; END $$;"
            ))
            .unwrap_err();
        assert!(e.to_string().contains("declared array"), "{decl}: {e}");
    }
}

/// Tables and procedures for `compiled_and_interpreted_agree`: every statement form of the
/// procedures above (point reads by INT, composite and text keys, secondary indexes, ranges
/// with ORDER BY and LIMIT, aggregates; INT, DOUBLE, text and row-reading updates, by key and
/// by scan; inserts, deletes, assignments, appends, IF chains and jump tables, both loops
/// with their prefetches, RETURN, RAISE, ROLLBACK) and the run-time errors they can end in.
const AGREE: &str = "
CREATE TABLE client (name VARCHAR(16) PRIMARY KEY, dst VARCHAR(16));
CREATE TABLE balance (name VARCHAR(16) PRIMARY KEY, val DOUBLE);
CREATE TABLE bonus (name VARCHAR(16) PRIMARY KEY, val INT);
INSERT INTO client VALUES ('Amy', 'Dan'), ('Dan', 'Amy');
INSERT INTO balance VALUES ('Amy', 2000), ('Dan', 1200);
INSERT INTO bonus VALUES ('Amy', 18), ('Dan', 7);
CREATE TABLE kv (k INT PRIMARY KEY, v INT, tag VARCHAR(32));
CREATE TABLE acct (id INT PRIMARY KEY, bal INT);
INSERT INTO acct VALUES (1, 100), (2, 5);
CREATE TABLE c (id INT PRIMARY KEY, city VARCHAR(8), n INT);
CREATE INDEX c_city ON c (city);
INSERT INTO c VALUES (1, 'a', 1), (2, 'b', 2), (3, 'a', 3);
CREATE TABLE u (k INT, j INT, a INT, x DOUBLE, s VARCHAR(8), PRIMARY KEY (k, j));
INSERT INTO u VALUES (1, 1, 10, 0.5, 'p'), (1, 2, 20, 1.5, 'q'), (2, 1, 30, 2.5, 'r');
CREATE TABLE line (o INT, n INT, item INT, PRIMARY KEY (o, n));
INSERT INTO line VALUES (1, 1, 7), (1, 2, 9), (2, 1, 7), (2, 2, 4), (3, 1, 9), (3, 2, 5);
";

const AGREE_PROCS: &str = "
CREATE PROCEDURE fill(ks BIGINT[], prefix TEXT) AS $$
DECLARE total INT := 0; label TEXT; n INT;
BEGIN
  FOR i IN 1..cardinality(ks) LOOP
    IF ks[i] % 3 = 0 THEN
      label := prefix || 'fizz' || ks[i];
    ELSIF ks[i] % 5 = 0 THEN
      label := substring(prefix || 'buzz' FROM 2 FOR 4);
    ELSE
      label := prefix;
    END IF;
    INSERT INTO kv VALUES (ks[i], ks[i] * 10, label);
  END LOOP;
  FOR r IN SELECT k, v FROM kv WHERE k >= 3 ORDER BY k DESC LOOP
    total := total + r.v;
  END LOOP;
  SELECT count(*) INTO n FROM kv;
  RETURN total, n, label;
END $$;
CREATE PROCEDURE bad(ks INT[]) AS $$ DECLARE x INT; BEGIN x := ks[2]; END $$;
CREATE PROCEDURE pay(src INT, dst INT, amount INT) AS $$
DECLARE b INT;
BEGIN
  INSERT INTO acct VALUES (1000 + src, 0);
  SELECT bal INTO b FROM acct WHERE id = src;
  IF NOT found THEN
    RAISE EXCEPTION 'no account %', src;
  END IF;
  IF b < amount THEN
    ROLLBACK;
  END IF;
  UPDATE acct SET bal = bal - amount WHERE id = src;
  UPDATE acct SET bal = bal + amount WHERE id = dst;
  IF NOT found THEN
    RAISE EXCEPTION 'no account % (to receive %)', dst, amount;
  END IF;
  RETURN b - amount;
END $$;
CREATE PROCEDURE total(x VARCHAR(8)) AS $$ DECLARE t INT; BEGIN
  FOR r IN SELECT n FROM c WHERE city = x LOOP t := t + r.n; END LOOP;
  RETURN t;
END $$;
CREATE PROCEDURE bump(key INT, big INT) AS $$ BEGIN
  UPDATE u SET a = a + big, x = a WHERE k = key AND j = 1;
END $$;
CREATE PROCEDURE tag(key INT) AS $$ BEGIN
  UPDATE u SET a = a + 1, s = 'q' WHERE k = key AND j = 1;
END $$;
CREATE PROCEDURE distinct_items(lo INT, hi INT) AS $$
DECLARE seen BIGINT[]; k INT; BEGIN
  FOR r IN SELECT item FROM line WHERE o >= lo AND o <= hi LOOP
    IF NOT r.item = ANY(seen) THEN
      seen := seen || r.item;
    END IF;
  END LOOP;
  k := cardinality(seen);
  RETURN k, seen[k];
END $$;
CREATE PROCEDURE forms(p INT, q INT, who VARCHAR(16)) AS $$
DECLARE va INT; vb INT; vf DOUBLE := 1.5; vs TEXT; vm INT; cnt INT; vlo INT; vhi INT;
BEGIN
  SELECT val INTO vf FROM balance WHERE name = who;
  SELECT a, x INTO va, vf FROM u WHERE k = p AND j = 1;
  SELECT a INTO vb FROM u WHERE k = p AND j = q AND a > 15;
  SELECT n INTO vm FROM c WHERE city = who;
  SELECT a INTO va FROM u WHERE k = p ORDER BY j DESC LIMIT 1;
  SELECT count(*), min(a), max(x) INTO cnt, vlo, vf FROM u WHERE k >= p - 3;
  SELECT sum(item) INTO vm FROM line WHERE o <= p + 3 LIMIT 2;
  IF p = 1 THEN vs := 'one';
  ELSIF p = 2 THEN vs := 'two';
  ELSIF p = 3 THEN vs := 'three';
  ELSIF 4 = p THEN vs := 'four';
  ELSE vs := 'many';
  END IF;
  UPDATE u SET a = a * q, x = x + 1 WHERE k = p AND j = 1;
  UPDATE u SET s = s || '!' WHERE k = p;
  UPDATE u SET a = a - 1 WHERE a > 1000;
  UPDATE bonus SET val = val + q WHERE name = who;
  INSERT INTO line VALUES (10 + p, q, va), (20 + p, q, vb);
  DELETE FROM line WHERE o = 1 AND n = q;
  DELETE FROM line WHERE item = 5;
  vhi := q;
  FOR i IN 1..vhi LOOP
    SELECT item INTO vm FROM line WHERE o = i AND n = 1;
    UPDATE u SET a = a + i WHERE k = 2 AND j = 1;
  END LOOP;
  vf := vf / q;
  va := va % q;
  RETURN va, vb, vf, vs, vm, cnt, vlo;
END $$;
CREATE PROCEDURE oddkeys(p INT) AS $$
DECLARE z INT; d DOUBLE := 1.0; va INT; vb INT;
BEGIN
  SELECT a INTO va FROM u WHERE k = z AND j = 1;
  SELECT a INTO vb FROM u WHERE k = d AND j = p;
  UPDATE u SET a = a + 100 WHERE k = d AND j = p;
  DELETE FROM line WHERE o = d + 2 AND n = p;
  RETURN va, vb;
END $$;
CREATE PROCEDURE badrow(w TEXT, n INT) AS $$ BEGIN
  INSERT INTO client VALUES (w, substring('abc' FROM 10 / n FOR 1));
  INSERT INTO u VALUES (n, 7, n * 2, n, w);
END $$;
CREATE PROCEDURE nums(p INT, d DOUBLE) AS $$
DECLARE z DOUBLE; a DOUBLE; b INT; c DOUBLE;
BEGIN
  a := d * p + 0.5;
  b := p / 2;
  c := d % 2.5 - p;
  z := z + 1.0;
  IF p > 100 THEN b := p * p; END IF;
  UPDATE balance SET val = val * d + p WHERE name = 'Amy';
  RETURN a, b, c, z, 7 / d;
END $$;
CREATE PROCEDURE texts(p INT, d DOUBLE, w TEXT) AS $$
DECLARE a TEXT; b TEXT; c TEXT;
BEGIN
  a := w || ':' || p || '/' || -3;
  b := p || w;
  c := w || d;
  UPDATE client SET dst = dst || w || p WHERE name = 'Amy';
  RETURN a, b, c;
END $$;
CREATE PROCEDURE compares(w TEXT, n INT) AS $$
DECLARE a INT; b INT; xs BIGINT[]; t TEXT;
BEGIN
  a := cardinality(xs);
  IF w = 'Amy' THEN a := a + 10; END IF;
  IF 'b' < w THEN a := a + 100; END IF;
  IF w <> t THEN a := a + 1000; END IF;
  IF n = ANY(xs) THEN a := a + 5; END IF;
  xs := xs || n;
  IF n = ANY(xs) AND NOT w = t THEN a := a + 7; END IF;
  b := cardinality(xs);
  FOR r IN SELECT k FROM u WHERE s > w LOOP b := b + r.k; END LOOP;
  RETURN a, b;
END $$;
CREATE PROCEDURE subs(w TEXT, a INT, n INT) AS $$
DECLARE x TEXT; y TEXT;
BEGIN
  x := substring(w || 'xyz' FROM a FOR n);
  y := '<' || substring(w FROM a) || '>';
  RETURN x, y;
END $$;
CREATE PROCEDURE aggloop() AS $$ DECLARE t INT; BEGIN
  FOR r IN SELECT count(*) FROM u LOOP t := 1; END LOOP;
  RETURN t;
END $$;
";

/// The calls of `compiled_and_interpreted_agree`: each reaches a result or an error of
/// its own (the test checks which).
fn agree_calls() -> Vec<(&'static str, Vec<Arg>)> {
    let int = |i: i64| Arg::from(i);
    vec![
        ("transfer", vec!["Amy".into()]),
        ("transfer", vec!["Dan".into()]),
        ("transfer", vec!["Nobody".into()]),
        ("fill", vec![vec![1i64, 3, 5, 7].into(), "x".into()]),
        ("fill", vec![vec![9i64, 10].into(), "y".into()]),
        ("fill", vec![vec![9i64].into(), "dup".into()]),
        ("fill", vec![vec![11i64].into(), "z".into()]),
        ("bad", vec![vec![1i64].into()]),
        ("bad", vec![vec![1i64, 2].into()]),
        ("pay", vec![int(1), int(2), int(30)]),
        ("pay", vec![int(9), int(2), int(1)]),
        ("pay", vec![int(2), int(1), int(500)]),
        ("pay", vec![int(2), int(77), int(10)]),
        ("total", vec!["a".into()]),
        ("total", vec!["z".into()]),
        ("bump", vec![int(1), int(5)]),
        ("tag", vec![int(1)]),
        ("bump", vec![int(1), int(i64::MAX)]),
        ("bump", vec![int(5), int(1)]),
        ("distinct_items", vec![int(1), int(3)]),
        ("distinct_items", vec![int(3), int(3)]),
        ("distinct_items", vec![int(7), int(8)]),
        ("forms", vec![int(1), int(2), "a".into()]),
        ("forms", vec![int(2), int(1), "Amy".into()]),
        ("forms", vec![int(3), int(3), "Dan".into()]),
        ("forms", vec![int(1), int(0), "a".into()]),
        ("forms", vec![int(4), int(2), "b".into()]),
        ("forms", vec![int(1), int(i64::MAX), "a".into()]),
        ("oddkeys", vec![int(1)]),
        ("oddkeys", vec![int(2)]),
        ("badrow", vec!["far too long for sixteen".into(), int(0)]),
        ("badrow", vec!["far too long for sixteen".into(), int(1)]),
        ("badrow", vec!["ok".into(), int(0)]),
        ("badrow", vec!["ok".into(), int(3)]),
        ("badrow", vec!["longer than 8".into(), int(4)]),
        ("nums", vec![int(3), 1.5f64.into()]),
        ("nums", vec![int(-7), (-2.25f64).into()]),
        ("nums", vec![int(1), 0.0f64.into()]),
        ("nums", vec![int(i64::MAX), 2.0f64.into()]),
        ("nums", vec![int(5), int(2)]),
        ("texts", vec![int(-12), 2.5f64.into(), "ab".into()]),
        ("texts", vec![int(7), 1.0f64.into(), "a longer text".into()]),
        ("compares", vec!["Amy".into(), int(3)]),
        ("compares", vec!["c".into(), int(0)]),
        ("compares", vec!["q".into(), int(1)]),
        ("compares", vec!["".into(), int(1)]),
        ("subs", vec!["héllo wörld".into(), int(2), int(5)]),
        ("subs", vec!["héllo wörld".into(), int(9), int(100)]),
        ("subs", vec!["abc".into(), int(0), int(2)]),
        ("subs", vec!["abc".into(), int(-3), int(2)]),
        ("subs", vec!["abc".into(), int(5), int(3)]),
        ("subs", vec!["abc".into(), int(i64::MAX), int(2)]),
        ("subs", vec!["abc".into(), int(2), int(-1)]),
        ("aggloop", vec![]),
        ("pay", vec![int(1)]),
        ("tag", vec!["one".into()]),
    ]
}

/// Every procedure above, run compiled and interpreted on two databases with the same
/// calls: the same results, the same errors, the same tables after; and every procedure
/// but the one over a loop of aggregates is compiled.
#[test]
fn compiled_and_interpreted_agree() {
    use crate::ProcedureExec;
    let run = |mode: ProcedureExec| {
        let db = Database::open(Config::default().procedures(mode)).unwrap();
        let mut s = Session::new(&db);
        s.execute(AGREE).unwrap();
        let procs = db
            .create_procedures(&format!("{TRANSFER}{AGREE_PROCS}"))
            .unwrap();
        let compiled: Vec<(String, bool)> = procs
            .iter()
            .map(|p| (p.name().to_string(), p.is_compiled()))
            .collect();
        let calls = agree_calls();
        let results: Vec<String> = calls
            .iter()
            .map(|(name, args)| format!("{name}: {:?}", db.call(name, args)))
            .collect();
        let mut names = db.table_names();
        names.sort();
        let tables: Vec<String> = names
            .iter()
            .map(|t| {
                let mut r: Vec<String> = rows(&mut s, &format!("SELECT * FROM {t}"))
                    .iter()
                    .map(|r| format!("{r:?}"))
                    .collect();
                r.sort();
                format!("{t}: {r:?}")
            })
            .collect();
        (compiled, results, tables)
    };
    let (ci, ri, ti) = run(ProcedureExec::Interpreted);
    let (cc, rc, tc) = run(ProcedureExec::Compiled);
    assert!(ci.iter().all(|(_, c)| !c), "{ci:?}");
    for (name, c) in &cc {
        assert_eq!(*c, name != "aggloop", "{name}");
    }
    for (i, c) in ri.iter().zip(&rc) {
        assert_eq!(i, c);
    }
    assert_eq!(ti, tc);
    // The calls do reach their errors and their results (the comparison is not vacuous).
    let joined = ri.join("\n");
    for want in [
        "array index 2 out of range 1..1",
        "no account 77 (to receive 10)",
        "ROLLBACK",
        "division by zero",
        "integer overflow",
        "with aggregates is not supported",
        "arguments given",
        "Ok([Int(70)])",
        // Keys by DOUBLE and unset variables (the compiled INT key's fallback) still find rows.
        "oddkeys: Ok([Int(0), Int(20)])",
        // An INSERT's value errors come before the errors of the columns that refuse one.
        "badrow: Err(Sql { line: 111, column: 54, message: \"division by zero\" })",
        "badrow: Err(ValueTooLong { table: \"client\"",
        "badrow: Err(ValueTooLong { table: \"u\"",
        // DOUBLE arithmetic (the compiled numeric path) and its errors.
        "nums: Ok([Float(16.25), Int(-3), Float(4.75), Float(1.0), Float(-3.111111111111111)])",
        "nums: Err(Sql { line: 123, column: 22, message: \"division by zero\" })",
        "nums: Err(Sql { line: 121, column: 24, message: \"integer overflow\" })",
        // `||` over text, INTs (the compiled text path) and a DOUBLE (the general one).
        "texts: Ok([Str(\"ab:-12/-3\"), Str(\"-12ab\"), Str(\"ab2.5\")])",
        // Text comparisons (variable, literal, column) and `cardinality`/`ANY` of an array
        // before and after its first element (the compiled typed paths).
        "compares: Ok([Int(1017), Int(8)])",
        "compares: Ok([Int(1107), Int(8)])",
        "compares: Ok([Int(1107), Int(5)])",
        "compares: Ok([Int(0), Int(8)])",
        // `substring` (the compiled text path) by characters, out of range, and its error.
        "subs: Ok([Str(\"éllo \"), Str(\"<éllo wörld>\")])",
        "subs: Ok([Str(\"rldxyz\"), Str(\"<rld>\")])",
        "subs: Ok([Str(\"a\"), Str(\"<abc>\")])",
        "subs: Ok([Str(\"\"), Str(\"<abc>\")])",
        "subs: Ok([Str(\"\"), Str(\"<>\")])",
        "negative substring length not allowed",
    ] {
        assert!(joined.contains(want), "{want} not in\n{joined}");
    }
}

/// A frame kept across calls (`Procedure::execute_in`: what the benchmarks and serial
/// command replay do) gives every call what a fresh frame gives, compiled and interpreted:
/// a call's start resets every local a statement or initial value reads (`Proc::reset`),
/// and only what nothing reads keeps the last call's value.
#[test]
fn a_kept_frame_gives_every_call_what_a_fresh_one_gives() {
    use crate::ProcedureExec;
    for mode in [ProcedureExec::Compiled, ProcedureExec::Interpreted] {
        let run = |keep: bool| {
            let db = Database::open(Config::default().procedures(mode)).unwrap();
            Session::new(&db).execute(AGREE).unwrap();
            db.create_procedures(&format!("{TRANSFER}{AGREE_PROCS}"))
                .unwrap();
            let mut frames = std::collections::HashMap::new();
            agree_calls()
                .iter()
                .map(|(name, args)| {
                    let p = db.procedure(name).unwrap();
                    let mut tx = db.begin().unwrap();
                    let r = if keep {
                        let f = frames.entry(*name).or_insert_with(|| p.frame());
                        p.execute_in(&mut tx, args, f)
                    } else {
                        p.execute(&mut tx, args)
                    };
                    match r {
                        Ok(out) => format!("{name}: {out:?} {:?}", tx.commit()),
                        Err(e) => {
                            tx.abort();
                            format!("{name}: {e:?}")
                        }
                    }
                })
                .collect::<Vec<String>>()
        };
        let (fresh, kept) = (run(false), run(true));
        for (f, k) in fresh.iter().zip(&kept) {
            assert_eq!(f, k, "{mode:?}");
        }
        // Locals read before they are set in a call start from zero every time.
        assert!(
            fresh
                .iter()
                .any(|r| r.starts_with("compares: [Int(1107), Int(5)]")),
            "{fresh:?}"
        );
    }
}
