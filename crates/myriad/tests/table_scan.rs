//! `Transaction::scan_table`: every visible row in insertion order, and under Serializable a
//! predicate read of the whole table (phantoms abort at commit; the history checker sees it).

use crate::common::*;
use myriad::*;

/// A hash-keyed table (no ordered index at all: only a table scan reads it whole).
fn hashed(db: &Database) -> TableRef {
    db.create_table(
        TableSchema::new("h")
            .column("k", ColumnType::Int)
            .column("v", ColumnType::Int)
            .primary_key(&["k"]),
    )
    .unwrap()
}

fn keys(tx: &mut Transaction<'_>, t: &TableRef) -> Vec<i64> {
    let mut out = Vec::new();
    tx.scan_table(t, |r| {
        out.push(r.i64(0).unwrap());
        true
    })
    .unwrap();
    out
}

#[test]
fn visits_visible_rows_in_insertion_order_and_stops_when_asked() {
    let db = open(Isolation::Serializable);
    let t = hashed(&db);
    let mut tx = db.begin().unwrap();
    for k in [5i64, 1, 9, 3] {
        tx.insert(&t, &(k, k * 10)).unwrap();
    }
    assert_eq!(
        keys(&mut tx, &t),
        [5, 1, 9, 3],
        "own inserts, insertion order"
    );
    tx.commit().unwrap();

    let mut tx = db.begin().unwrap();
    tx.delete(&t, &1i64).unwrap();
    tx.update(&t, &9i64, &[(1, 99i64)]).unwrap();
    assert_eq!(keys(&mut tx, &t), [5, 9, 3], "own delete hidden");
    let mut sum = 0;
    tx.scan_table(&t, |r| {
        sum += r.i64(1).unwrap();
        true
    })
    .unwrap();
    assert_eq!(sum, 50 + 99 + 30, "own update seen");
    let mut seen = 0;
    let n = tx
        .scan_table(&t, |_| {
            seen += 1;
            seen < 2
        })
        .unwrap();
    assert_eq!((n, seen), (2, 2), "stops at the first false");
    tx.commit().unwrap();

    // A snapshot taken before a commit keeps its view.
    let mut old = db.begin_with(iso(Isolation::Snapshot)).unwrap();
    let mut w = db.begin().unwrap();
    w.insert(&t, &(7i64, 70i64)).unwrap();
    w.delete(&t, &5i64).unwrap();
    w.commit().unwrap();
    assert_eq!(keys(&mut old, &t), [5, 9, 3]);
    old.commit().unwrap();
    let mut now = db.begin().unwrap();
    assert_eq!(keys(&mut now, &t), [9, 3, 7]);
    now.commit().unwrap();
}

#[test]
fn a_table_of_another_database_is_an_error() {
    let db = open(Isolation::Serializable);
    let other = Database::open(Config::new()).unwrap();
    let foreign = hashed(&other);
    let _t = hashed(&db);
    let mut tx = db.begin().unwrap();
    assert!(matches!(
        tx.scan_table(&foreign, |_| true),
        Err(Error::UnknownTable(name)) if name == "h"
    ));
}

/// `reader` scans the table and then writes (so it validates at commit); `writer` changes the
/// table in between and commits first. Under Serializable the reader must abort (a phantom
/// for an insert; a delete or update of a row it read may also fail read validation first);
/// under SI it commits.
fn scan_then_concurrent(level: Isolation, change: impl Fn(&mut Transaction<'_>, &TableRef)) {
    let db = open(level);
    let t = hashed(&db);
    let log = db
        .create_table(
            TableSchema::new("log")
                .column("id", ColumnType::Int)
                .primary_key(&["id"]),
        )
        .unwrap();
    let mut tx = db.begin().unwrap();
    for k in 0..4i64 {
        tx.insert(&t, &(k, k)).unwrap();
    }
    tx.commit().unwrap();

    let mut reader = db.begin().unwrap();
    let mut total = 0;
    reader
        .scan_table(&t, |r| {
            total += r.i64(1).unwrap();
            true
        })
        .unwrap();
    let mut writer = db.begin().unwrap();
    change(&mut writer, &t);
    writer.commit().unwrap();
    reader.insert(&log, &(total,)).unwrap();
    let outcome = failure(reader.commit());
    match level {
        Isolation::Serializable => assert!(
            matches!(
                outcome,
                Some(AbortReason::Phantom) | Some(AbortReason::ReadValidation)
            ),
            "{outcome:?}"
        ),
        _ => assert_eq!(outcome, None),
    }
}

#[test]
fn an_insert_into_the_scanned_table_is_a_phantom_under_serializable_only() {
    for level in [Isolation::Serializable, Isolation::Snapshot] {
        scan_then_concurrent(level, |w, t| w.insert(t, &(100i64, 100i64)).unwrap());
    }
}

#[test]
fn a_delete_or_update_of_a_scanned_row_aborts_the_scanner_under_serializable() {
    for level in [Isolation::Serializable, Isolation::Snapshot] {
        scan_then_concurrent(level, |w, t| w.delete(t, &2i64).unwrap());
        scan_then_concurrent(level, |w, t| w.update(t, &3i64, &[(1, 33i64)]).unwrap());
    }
}

/// Two transactions each count the table and insert a row: write skew through a full scan.
fn count_and_insert(level: Isolation) -> (Vec<history::TxnRecord>, bool) {
    let db = Database::open(Config::new().isolation(level).record_history(true)).unwrap();
    let t = hashed(&db);
    let mut a = db.begin().unwrap();
    let mut b = db.begin().unwrap();
    let na = a.scan_table(&t, |_| true).unwrap();
    let nb = b.scan_table(&t, |_| true).unwrap();
    assert_eq!((na, nb), (0, 0));
    a.insert(&t, &(1i64, 0i64)).unwrap();
    b.insert(&t, &(2i64, 0i64)).unwrap();
    let both = a.commit().is_ok() & b.commit().is_ok();
    (db.take_history(), both)
}

#[test]
fn write_skew_through_table_scans_is_reported_when_judged_as_serializable() {
    assert_predicate_write_skew(count_and_insert);
}
