//! `Transaction::prefetch` remembers the tuple ids it looked up; the operations that follow
//! must give exactly the results they give without it.
use crate::common::*;
use myriad::*;

fn hash_table(db: &Database, name: &str) -> TableRef {
    db.create_table(
        TableSchema::new(name)
            .column("k", ColumnType::Int)
            .column("v", ColumnType::Int)
            .primary_key(&["k"]),
    )
    .unwrap()
}

#[test]
fn a_prefetch_in_one_table_is_not_used_for_the_same_key_in_another() {
    let db = open(Isolation::Serializable);
    let a = hash_table(&db, "a");
    let b = hash_table(&db, "b");
    // Same keys, inserted in opposite orders: key k has different tuple ids in a and b.
    let mut tx = db.begin().unwrap();
    for k in 0..8i64 {
        tx.insert(&a, &(k, 100 + k)).unwrap();
        tx.insert(&b, &(7 - k, 200 + 7 - k)).unwrap();
    }
    tx.commit().unwrap();
    let mut tx = db.begin().unwrap();
    tx.prefetch(&a, &[0i64, 1, 2, 3, 4, 5, 6, 7]).unwrap();
    for k in 0..8i64 {
        assert_eq!(
            tx.get_with(&b, &k, |r| r.i64(1).unwrap()).unwrap(),
            Some(200 + k)
        );
        assert_eq!(
            tx.get_with(&a, &k, |r| r.i64(1).unwrap()).unwrap(),
            Some(100 + k)
        );
    }
    tx.update(&b, &3i64, &[(1, 0i64)]).unwrap();
    tx.commit().unwrap();
    let mut tx = db.begin().unwrap();
    assert_eq!(val(&mut tx, &a, 3), Some(103));
    assert_eq!(val(&mut tx, &b, 3), Some(0));
}

#[test]
fn a_key_absent_at_prefetch_is_found_once_inserted_under_read_committed() {
    let db = open(Isolation::ReadCommitted);
    let t = hash_table(&db, "t");
    let mut tx = db.begin().unwrap();
    tx.insert(&t, &(1i64, 10i64)).unwrap();
    tx.commit().unwrap();
    let mut reader = db.begin().unwrap();
    reader.prefetch(&t, &[1i64, 2]).unwrap();
    let mut w = db.begin().unwrap();
    w.insert(&t, &(2i64, 20i64)).unwrap();
    w.commit().unwrap();
    assert_eq!(val(&mut reader, &t, 2), Some(20));
    assert_eq!(val(&mut reader, &t, 1), Some(10));
    reader.commit().unwrap();
}

#[test]
fn prefetched_rows_deleted_and_reinserted_by_others_read_as_without_prefetch() {
    for iso in [Isolation::ReadCommitted, Isolation::Snapshot] {
        let db = open(iso);
        let t = hash_table(&db, "t");
        let mut tx = db.begin().unwrap();
        for k in 0..4i64 {
            tx.insert(&t, &(k, k)).unwrap();
        }
        tx.commit().unwrap();
        let mut reader = db.begin().unwrap();
        reader.prefetch(&t, &[0i64, 1, 2, 3]).unwrap();
        let mut w = db.begin().unwrap();
        w.delete(&t, &1i64).unwrap();
        w.delete(&t, &2i64).unwrap();
        w.commit().unwrap();
        let mut w = db.begin().unwrap();
        w.insert(&t, &(2i64, 22i64)).unwrap();
        w.commit().unwrap();
        let (one, two) = (val(&mut reader, &t, 1), val(&mut reader, &t, 2));
        if iso == Isolation::ReadCommitted {
            assert_eq!((one, two), (None, Some(22)));
        } else {
            assert_eq!(
                (one, two),
                (Some(1), Some(2)),
                "the snapshot predates both writes"
            );
        }
        drop(reader);
        let mut tx = db.begin().unwrap();
        assert_eq!(val(&mut tx, &t, 1), None);
        assert_eq!(val(&mut tx, &t, 2), Some(22));
        // A prefetched key updated in the same transaction reads back its new value.
        tx.prefetch(&t, &[2i64, 3]).unwrap();
        tx.update(&t, &3i64, &[(1, 33i64)]).unwrap();
        assert_eq!(val(&mut tx, &t, 3), Some(33));
        tx.commit().unwrap();
    }
}

#[test]
fn prefetch_rejects_a_key_of_the_wrong_type_like_get() {
    let db = open(Isolation::Serializable);
    let t = hash_table(&db, "t");
    let mut tx = db.begin().unwrap();
    tx.insert(&t, &(1i64, 1i64)).unwrap();
    // A key that cannot be encoded is skipped by the hint; the get reports the error.
    tx.prefetch(&t, &["x"]).unwrap();
    assert!(matches!(tx.get(&t, &"x"), Err(Error::TypeMismatch { .. })));
    assert_eq!(val(&mut tx, &t, 1), Some(1));
}
