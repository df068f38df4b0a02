//! MVOCC behaviour: visibility of uncommitted writes, first-writer-wins, validation per
//! isolation level, phantoms (requested ranges), unique secondary indexes.
use crate::common::*;
use myriad::*;
use std::ops::Bound;

const LEVELS: [Isolation; 4] = [
    Isolation::ReadCommitted,
    Isolation::RepeatableRead,
    Isolation::Snapshot,
    Isolation::Serializable,
];

#[test]
fn uncommitted_delete_is_invisible_to_others_and_visible_to_its_writer() {
    for level in LEVELS {
        let db = open(level);
        let t = kv(&db);
        load(&db, &t, 0..3);
        let mut deleter = db.begin().unwrap();
        deleter.delete(&t, &1i64).unwrap();
        // The deleter no longer sees the row (Table 2: End = own id → invisible to itself).
        assert_eq!(val(&mut deleter, &t, 1), None, "{level}");
        // Everyone else still sees it while the delete is uncommitted.
        let mut reader = db.begin().unwrap();
        assert_eq!(val(&mut reader, &t, 1), Some(1), "{level}");
        // Insert-then-delete in one transaction: gone for the writer, never seen by others.
        deleter.insert(&t, &(10i64, 10i64, 10i64, 1i64)).unwrap();
        deleter.delete(&t, &10i64).unwrap();
        assert_eq!(val(&mut deleter, &t, 10), None);
        assert_eq!(val(&mut reader, &t, 10), None);
        deleter.commit().unwrap();
        // The open snapshot keeps seeing the row (except RC, which reads the latest commit).
        let expect = if level == Isolation::ReadCommitted {
            None
        } else {
            Some(1)
        };
        assert_eq!(val(&mut reader, &t, 1), expect, "{level}");
        reader.commit().unwrap();
        let mut after = db.begin().unwrap();
        assert_eq!(val(&mut after, &t, 1), None);
        assert_eq!(val(&mut after, &t, 10), None);
    }
}

#[test]
fn uncommitted_insert_and_update_are_invisible_to_others() {
    let db = open(Isolation::Serializable);
    let t = kv(&db);
    load(&db, &t, 0..2);
    let mut w = db.begin().unwrap();
    w.insert(&t, &(5i64, 5i64, 5i64, 2i64)).unwrap();
    w.update(&t, &0i64, &[(1, 100i64)]).unwrap();
    assert_eq!(val(&mut w, &t, 0), Some(100));
    let mut r = db.begin().unwrap();
    assert_eq!(val(&mut r, &t, 5), None);
    assert_eq!(val(&mut r, &t, 0), Some(0));
    w.abort();
    assert_eq!(val(&mut r, &t, 0), Some(0));
    let mut r2 = db.begin().unwrap();
    assert_eq!(val(&mut r2, &t, 5), None);
    assert_eq!(val(&mut r2, &t, 0), Some(0));
}

#[test]
fn first_writer_wins() {
    for level in LEVELS {
        let db = open(level);
        let t = kv(&db);
        load(&db, &t, 0..2);
        let mut a = db.begin().unwrap();
        let mut b = db.begin().unwrap();
        a.update(&t, &0i64, &[(1, 1i64)]).unwrap();
        let e = b.update(&t, &0i64, &[(1, 2i64)]).unwrap_err();
        assert_eq!(
            e,
            Error::SerializationFailure(AbortReason::WriteWriteConflict),
            "{level}"
        );
        // The loser is closed.
        assert_eq!(b.get(&t, &1i64).unwrap_err(), Error::TransactionClosed);
        a.commit().unwrap();
        assert_eq!(db.stats().aborted(AbortReason::WriteWriteConflict), 1);
    }
}

#[test]
fn snapshot_writer_cannot_overwrite_a_newer_commit() {
    for level in [
        Isolation::RepeatableRead,
        Isolation::Snapshot,
        Isolation::Serializable,
    ] {
        let db = open(level);
        let t = kv(&db);
        load(&db, &t, 0..2);
        let mut a = db.begin().unwrap();
        assert_eq!(val(&mut a, &t, 1), Some(1));
        db.run(|tx| tx.update(&t, &0i64, &[(1, 7i64)])).unwrap();
        let e = a.update(&t, &0i64, &[(1, 8i64)]).unwrap_err();
        assert_eq!(
            e,
            Error::SerializationFailure(AbortReason::WriteWriteConflict),
            "{level}"
        );
    }
    // Read Committed updates the latest committed version instead.
    let db = open(Isolation::ReadCommitted);
    let t = kv(&db);
    load(&db, &t, 0..2);
    let mut a = db.begin().unwrap();
    db.run(|tx| tx.update(&t, &0i64, &[(1, 7i64)])).unwrap();
    a.update_with(&t, &0i64, |r| {
        let v = r.as_ref().i64(1)?;
        r.set(1, v + 1)
    })
    .unwrap();
    a.commit().unwrap();
    assert_eq!(val(&mut db.begin().unwrap(), &t, 0), Some(8));
}

#[test]
fn read_committed_sees_latest_commit_per_statement_snapshot_does_not() {
    for (level, expect) in [
        (Isolation::ReadCommitted, 9),
        (Isolation::Snapshot, 0),
        (Isolation::Serializable, 0),
    ] {
        let db = open(level);
        let t = kv(&db);
        load(&db, &t, 0..1);
        let mut r = db.begin().unwrap();
        assert_eq!(val(&mut r, &t, 0), Some(0));
        db.run(|tx| tx.update(&t, &0i64, &[(1, 9i64)])).unwrap();
        assert_eq!(val(&mut r, &t, 0), Some(expect), "{level}");
        r.commit().unwrap();
    }
}

/// Write skew: each reads x and y, writes the other. Serializable and RR must abort one.
fn write_skew(level: Isolation) -> (Result<()>, Result<()>) {
    let db = open(level);
    let t = kv(&db);
    load(&db, &t, 0..2);
    let mut a = db.begin().unwrap();
    let mut b = db.begin().unwrap();
    let sa = val(&mut a, &t, 0).unwrap() + val(&mut a, &t, 1).unwrap();
    let sb = val(&mut b, &t, 0).unwrap() + val(&mut b, &t, 1).unwrap();
    a.update(&t, &0i64, &[(1, sa - 100)]).unwrap();
    b.update(&t, &1i64, &[(1, sb - 100)]).unwrap();
    (a.commit(), b.commit())
}

#[test]
fn write_skew_per_level() {
    for level in [Isolation::Snapshot, Isolation::ReadCommitted] {
        let (a, b) = write_skew(level);
        assert!(a.is_ok() && b.is_ok(), "{level} permits write skew");
    }
    for level in [Isolation::RepeatableRead, Isolation::Serializable] {
        let (a, b) = write_skew(level);
        assert!(a.is_ok(), "{level}");
        assert_eq!(failure(b), Some(AbortReason::ReadValidation), "{level}");
    }
}

/// T1 scans a range and writes elsewhere; T2 inserts into the range and commits first.
fn phantom(
    level: Isolation,
    lo: i64,
    hi: i64,
    insert: i64,
    limit: Option<usize>,
) -> Option<AbortReason> {
    let db = open(level);
    let t = kv(&db);
    load(&db, &t, (0..20).filter(|k| k % 2 == 0));
    let mut a = db.begin().unwrap();
    a.scan(
        &t,
        Bound::Included(&lo),
        Bound::Excluded(&hi),
        ScanOptions {
            limit,
            ..Default::default()
        },
        |_| true,
    )
    .unwrap();
    db.run(|tx| tx.insert(&t, &(insert, 0i64, 1000 + insert, 0i64)))
        .unwrap();
    a.update(&t, &18i64, &[(1, 1i64)]).unwrap();
    failure(a.commit())
}

#[test]
fn phantoms() {
    assert_eq!(
        phantom(Isolation::Serializable, 0, 10, 5, None),
        Some(AbortReason::Phantom)
    );
    // The requested range counts, even where the scan returned nothing.
    assert_eq!(
        phantom(Isolation::Serializable, 100, 200, 150, None),
        Some(AbortReason::Phantom)
    );
    // Outside the range: no conflict.
    assert_eq!(phantom(Isolation::Serializable, 0, 10, 11, None), None);
    // With a limit, the observed range ends at the last row returned (0, 2, 4).
    assert_eq!(
        phantom(Isolation::Serializable, 0, 20, 3, Some(3)),
        Some(AbortReason::Phantom)
    );
    assert_eq!(phantom(Isolation::Serializable, 0, 20, 7, Some(3)), None);
    // Repeatable Read and SI permit phantoms.
    assert_eq!(phantom(Isolation::RepeatableRead, 0, 10, 5, None), None);
    assert_eq!(phantom(Isolation::Snapshot, 0, 10, 5, None), None);
}

/// A secondary-index scan stopped by its limit protects every entry of its stop key: a row
/// that moves under that key ahead of the row returned (entries are ordered by key, then
/// tuple id) is a phantom, even though it sorts before the stop point.
#[test]
fn limited_secondary_scan_protects_its_stop_key() {
    // Every serializable protocol but mv2pl-wait, whose range lock would make B wait for A
    // on this one thread.
    let serializable = std::iter::once(Protocol::Mvocc)
        .chain(other_protocols())
        .filter(|&p| p != Protocol::Mv2plWait)
        .filter(|&p| Config::strongest_isolation(p) == Some(Isolation::Serializable));
    for protocol in serializable {
        let db = Database::open(config_for(protocol).isolation(Isolation::Serializable)).unwrap();
        let t = kv(&db);
        load(&db, &t, 0..6); // g = k % 3: rows 1 and 4 have g = 1
        let mut a = db.begin().unwrap();
        let mut seen = Vec::new();
        a.scan(
            &t,
            Bound::Included(&1i64),
            Bound::Unbounded,
            ScanOptions {
                index: 2,
                limit: Some(1),
                ..Default::default()
            },
            |r| {
                seen.push(r.i64(0).unwrap());
                true
            },
        )
        .unwrap();
        assert_eq!(seen, vec![1], "{protocol}");
        // B reads row 5, which A then writes (B before A), and moves row 0 (tuple id 0,
        // ahead of row 1's entry) to g = 1, which A's scan did not see (A before B): a cycle.
        let mut b = db.begin().unwrap();
        let moved = b
            .get(&t, &5i64)
            .and_then(|_| b.update(&t, &0i64, &[(3, 1i64)]))
            .and_then(|_| b.commit());
        let wrote = a.update(&t, &5i64, &[(1, 1i64)]);
        let committed = wrote.and_then(|_| a.commit());
        assert!(
            moved.is_err() || committed.is_err(),
            "{protocol}: a row moved under the scan's stop key ahead of the row it returned, \
             and both committed"
        );
    }
}

#[test]
fn point_miss_and_secondary_lookup_are_protected() {
    let db = open(Isolation::Serializable);
    let t = kv(&db);
    load(&db, &t, 0..4);
    // Point lookup of an absent key, then someone inserts it.
    let mut a = db.begin().unwrap();
    assert_eq!(val(&mut a, &t, 100), None);
    db.run(|tx| tx.insert(&t, &(100i64, 0i64, 100i64, 0i64)))
        .unwrap();
    a.update(&t, &0i64, &[(1, 5i64)]).unwrap();
    assert_eq!(failure(a.commit()), Some(AbortReason::Phantom));
    // Secondary lookup g = 2, then someone moves a row into g = 2.
    let g = t.index("by_g").unwrap();
    let mut a = db.begin().unwrap();
    let n = a.get_by(&t, g, &2i64, |_| true).unwrap();
    assert_eq!(n, 1); // k = 2
    db.run(|tx| tx.update(&t, &1i64, &[(3, 2i64)])).unwrap();
    a.update(&t, &0i64, &[(1, 6i64)]).unwrap();
    assert_eq!(failure(a.commit()), Some(AbortReason::Phantom));
    // Stale entries are filtered: k = 1 left g = 1.
    let mut r = db.begin().unwrap();
    assert_eq!(r.get_by(&t, g, &1i64, |_| true).unwrap(), 0);
    assert_eq!(r.get_by(&t, g, &2i64, |_| true).unwrap(), 2);
}

#[test]
fn read_only_snapshots_never_abort() {
    let db = open(Isolation::Serializable);
    let t = kv(&db);
    load(&db, &t, 0..3);
    let mut r = db
        .begin_with(TxnOptions {
            isolation: Isolation::Serializable,
            read_only: true,
        })
        .unwrap();
    assert_eq!(val(&mut r, &t, 0), Some(0));
    db.run(|tx| tx.update(&t, &0i64, &[(1, 3i64)])).unwrap();
    assert_eq!(val(&mut r, &t, 0), Some(0));
    assert_eq!(
        r.insert(&t, &(9i64, 0i64, 9i64, 0i64)).unwrap_err(),
        Error::ReadOnlyTransaction
    );
    r.commit().unwrap();
}

#[test]
fn duplicate_keys() {
    let db = open(Isolation::Serializable);
    let t = kv(&db);
    load(&db, &t, 0..3);
    let mut tx = db.begin().unwrap();
    let e = tx.insert(&t, &(1i64, 0i64, 99i64, 0i64)).unwrap_err();
    assert_eq!(
        e,
        Error::DuplicateKey {
            table: "kv".into(),
            index: "primary".into()
        }
    );
    // Unique secondary index.
    let e = tx.insert(&t, &(50i64, 0i64, 2i64, 0i64)).unwrap_err();
    assert_eq!(
        e,
        Error::DuplicateKey {
            table: "kv".into(),
            index: "by_u".into()
        }
    );
    let e = tx.update(&t, &0i64, &[(2, 1i64)]).unwrap_err();
    assert_eq!(
        e,
        Error::DuplicateKey {
            table: "kv".into(),
            index: "by_u".into()
        }
    );
    // The transaction is still usable after a rejected statement.
    tx.insert(&t, &(50i64, 0i64, 50i64, 0i64)).unwrap();
    tx.commit().unwrap();
    // A deleted key can be inserted again, and a freed unique value reused.
    db.run(|tx| tx.delete(&t, &1i64)).unwrap();
    db.run(|tx| tx.insert(&t, &(1i64, 11i64, 1i64, 0i64)))
        .unwrap();
    db.run(|tx| tx.update(&t, &2i64, &[(2, 200i64)])).unwrap();
    db.run(|tx| tx.insert(&t, &(60i64, 0i64, 2i64, 0i64)))
        .unwrap();
    assert_eq!(val(&mut db.begin().unwrap(), &t, 1), Some(11));
}

#[test]
fn concurrent_unique_claims_abort_the_later_committer() {
    for level in LEVELS {
        let db = open(level);
        let t = kv(&db);
        load(&db, &t, 0..2);
        let mut a = db.begin().unwrap();
        let mut b = db.begin().unwrap();
        a.insert(&t, &(10i64, 0i64, 77i64, 0i64)).unwrap();
        b.insert(&t, &(11i64, 0i64, 77i64, 0i64)).unwrap();
        a.commit().unwrap();
        assert_eq!(
            failure(b.commit()),
            Some(AbortReason::UniqueConflict),
            "{level}"
        );
    }
}

#[test]
fn concurrent_inserts_of_one_key() {
    let db = open(Isolation::Snapshot);
    let t = kv(&db);
    let mut a = db.begin().unwrap();
    let mut b = db.begin().unwrap();
    a.insert(&t, &(1i64, 1i64, 1i64, 0i64)).unwrap();
    let e = b.insert(&t, &(1i64, 2i64, 2i64, 0i64)).unwrap_err();
    assert_eq!(
        e,
        Error::SerializationFailure(AbortReason::WriteWriteConflict)
    );
    a.commit().unwrap();
}
