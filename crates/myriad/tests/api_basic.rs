use myriad::*;
use std::ops::Bound;

fn db() -> (Database, TableRef) {
    let db = Database::open(Config::new()).unwrap();
    let t = db
        .create_table(
            TableSchema::new("t")
                .column("id", ColumnType::Int)
                .column("v", ColumnType::Int)
                .column("s", ColumnType::Str(8))
                .primary_key_with(&["id"], IndexKind::Ordered)
                .index("by_v", &["v"], IndexKind::Ordered, false),
        )
        .unwrap();
    (db, t)
}

#[test]
fn insert_get_update_delete() {
    let (db, t) = db();
    let mut tx = db.begin().unwrap();
    for i in 0..100i64 {
        tx.insert(&t, &(i, i * 10, "x")).unwrap();
    }
    tx.commit().unwrap();
    let mut tx = db.begin().unwrap();
    assert_eq!(tx.get(&t, &5i64).unwrap().unwrap()[1], Value::Int(50));
    tx.update(&t, &5i64, &[(1, 7i64)]).unwrap();
    assert_eq!(tx.get(&t, &5i64).unwrap().unwrap()[1], Value::Int(7));
    tx.delete(&t, &6i64).unwrap();
    assert!(tx.get(&t, &6i64).unwrap().is_none());
    tx.commit().unwrap();
    let mut tx = db.begin().unwrap();
    assert_eq!(tx.get(&t, &5i64).unwrap().unwrap()[1], Value::Int(7));
    assert!(tx.get(&t, &6i64).unwrap().is_none());
    let rows = tx
        .scan_rows(
            &t,
            Bound::Included(&10i64),
            Bound::Excluded(&20i64),
            ScanOptions::default(),
        )
        .unwrap();
    assert_eq!(rows.len(), 10);
    let rows = tx
        .scan_rows(
            &t,
            Bound::Unbounded,
            Bound::Included(&20i64),
            ScanOptions {
                descending: true,
                limit: Some(3),
                index: 0,
            },
        )
        .unwrap();
    let ids: Vec<i64> = rows.iter().map(|r| r[0].as_i64().unwrap()).collect();
    assert_eq!(ids, vec![20, 19, 18]);
    let mut n = 0;
    tx.get_by(&t, 1, &7i64, |_| {
        n += 1;
        true
    })
    .unwrap();
    assert_eq!(n, 1);
    tx.commit().unwrap();
}
