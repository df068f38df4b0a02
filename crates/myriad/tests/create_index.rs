//! `Database::create_index` on tables that hold rows: the built index finds exactly the rows
//! a scan finds, old snapshots keep their versions, a unique index refuses live duplicates,
//! and the build waits for (and excludes) concurrent transactions.

use myriad::*;
use std::sync::mpsc;
use std::time::Duration;

fn int(r: RowRef<'_>, col: usize) -> i64 {
    match r.get(col) {
        Some(ValueRef::Int(i)) => i,
        other => panic!("column {col} is not an INT: {other:?}"),
    }
}

fn setup(db: &Database, hash_pk: bool) -> TableRef {
    let pk = if hash_pk {
        IndexKind::Hash
    } else {
        IndexKind::Ordered
    };
    let t = db
        .create_table(
            TableSchema::new("t")
                .column("id", ColumnType::Int)
                .column("v", ColumnType::Int)
                .column("s", ColumnType::Str(8))
                .primary_key_with(&["id"], pk),
        )
        .unwrap();
    let mut tx = db.begin().unwrap();
    for i in 0..2000i64 {
        tx.insert(&t, &(i, i % 50, "x")).unwrap();
    }
    tx.commit().unwrap();
    // Chains longer than one version, deletes, and a deleted-then-reinserted key.
    for round in 0..3i64 {
        let mut tx = db.begin().unwrap();
        for i in (0..2000i64).step_by(7) {
            tx.update(&t, &i, &[(1, (i + round) % 50)]).unwrap();
        }
        tx.commit().unwrap();
    }
    let mut tx = db.begin().unwrap();
    for i in (0..2000i64).step_by(13) {
        tx.delete(&t, &i).unwrap();
    }
    tx.commit().unwrap();
    let mut tx = db.begin().unwrap();
    tx.insert(&t, &(13i64, 49i64, "back")).unwrap();
    tx.commit().unwrap();
    t
}

/// `v` of every live row, by scanning the primary key.
fn by_scan(db: &Database, t: &TableRef) -> Vec<(i64, i64)> {
    let mut tx = db.begin().unwrap();
    let mut out = Vec::new();
    tx.scan_table(t, |r| {
        out.push((int(r, 0), int(r, 1)));
        true
    })
    .unwrap();
    tx.commit().unwrap();
    out.sort();
    out
}

/// Columns 0 and 1 of the rows found through secondary index `idx` under the keys `keys`.
fn by_index(
    db: &Database,
    t: &TableRef,
    idx: usize,
    keys: std::ops::Range<i64>,
) -> Vec<(i64, i64)> {
    let mut tx = db.begin().unwrap();
    let mut out = Vec::new();
    for v in keys {
        tx.get_by(t, idx, &v, |r| {
            out.push((int(r, 0), int(r, 1)));
            true
        })
        .unwrap();
    }
    tx.commit().unwrap();
    out.sort();
    out
}

#[test]
fn index_on_populated_table_finds_every_live_row() {
    for (hash_pk, kind) in [(false, IndexKind::Ordered), (true, IndexKind::Hash)] {
        let db = Database::open(Config::new()).unwrap();
        let old = setup(&db, hash_pk);
        let expected = by_scan(&db, &old);
        assert_eq!(expected.len(), 2000 - 2000usize.div_ceil(13) + 1);
        let t = db.create_index("t", "by_v", &["v"], kind, false).unwrap();
        let idx = t.index("by_v").unwrap();
        assert_eq!(by_index(&db, &t, idx, 0..50), expected);
        assert_eq!(by_scan(&db, &t), expected);
        // The primary key was rebuilt too: point reads, and inserts of new and deleted keys.
        let mut tx = db.begin().unwrap();
        assert_eq!(tx.get(&t, &7i64).unwrap().unwrap()[1], Value::Int(9));
        assert!(tx.get(&t, &26i64).unwrap().is_none());
        assert!(matches!(
            tx.insert(&t, &(1i64, 0i64, "dup")),
            Err(Error::DuplicateKey { .. })
        ));
        tx.abort();
        let mut tx = db.begin().unwrap();
        tx.insert(&t, &(26i64, 7i64, "again")).unwrap();
        tx.insert(&t, &(5000i64, 7i64, "new")).unwrap();
        tx.commit().unwrap();
        let mut sevens = Vec::new();
        let mut tx = db.begin().unwrap();
        tx.get_by(&t, idx, &7i64, |r| {
            sevens.push(int(r, 0));
            true
        })
        .unwrap();
        tx.commit().unwrap();
        assert!(sevens.contains(&26) && sevens.contains(&5000), "{sevens:?}");
        // The old handle is stale.
        let mut tx = db.begin().unwrap();
        assert!(matches!(tx.get(&old, &1i64), Err(Error::UnknownTable(_))));
    }
}

#[test]
fn unique_index_refuses_live_duplicates_and_changes_nothing() {
    let db = Database::open(Config::new()).unwrap();
    let t = setup(&db, false);
    let before = by_scan(&db, &t);
    let err = db
        .create_index("t", "u_v", &["v"], IndexKind::Ordered, true)
        .unwrap_err();
    assert_eq!(
        err,
        Error::DuplicateKey {
            table: "t".into(),
            index: "u_v".into()
        }
    );
    // Same handle, same rows, still writable.
    assert!(t.index("u_v").is_err());
    assert_eq!(by_scan(&db, &t), before);
    let mut tx = db.begin().unwrap();
    tx.update(&t, &1i64, &[(1, 9i64)]).unwrap();
    tx.commit().unwrap();

    // Duplicates only among deleted rows and superseded versions do not count.
    let db = Database::open(Config::new()).unwrap();
    let t = db
        .create_table(
            TableSchema::new("u")
                .column("id", ColumnType::Int)
                .column("v", ColumnType::Int)
                .primary_key(&["id"]),
        )
        .unwrap();
    let mut tx = db.begin().unwrap();
    for i in 0..10i64 {
        tx.insert(&t, &(i, 0i64)).unwrap();
    }
    tx.commit().unwrap();
    let mut tx = db.begin().unwrap();
    for i in 0..9i64 {
        tx.update(&t, &i, &[(1, i + 100)]).unwrap();
    }
    tx.delete(&t, &9i64).unwrap();
    tx.commit().unwrap();
    let t = db
        .create_index("u", "u_v", &["v"], IndexKind::Hash, true)
        .unwrap();
    let mut tx = db.begin().unwrap();
    assert!(matches!(
        tx.insert(&t, &(20i64, 104i64)),
        Err(Error::DuplicateKey { .. })
    ));
    tx.abort();
    let mut tx = db.begin().unwrap();
    tx.insert(&t, &(20i64, 0i64)).unwrap();
    tx.commit().unwrap();
}

#[test]
fn build_waits_for_running_transactions_and_refuses_new_ones() {
    let db = Database::open(Config::new().ddl_wait(Duration::from_secs(60))).unwrap();
    let t = setup(&db, false);
    let (ready_tx, ready) = mpsc::channel();
    let (release_tx, release) = mpsc::channel::<()>();
    std::thread::scope(|s| {
        // A writer that is mid-transaction when the build starts.
        let (db, t) = (&db, &t);
        let holder = s.spawn(move || {
            let mut tx = db.begin().unwrap();
            tx.update(t, &2i64, &[(1, 4242i64)]).unwrap();
            ready_tx.send(()).unwrap();
            release.recv().unwrap();
            tx.commit()
        });
        ready.recv().unwrap();
        let build =
            s.spawn(move || db.create_index("t", "by_v", &["v"], IndexKind::Ordered, false));
        // Until the writer finishes, the build cannot: a new transaction on the table is
        // refused with Busy (once the build has marked it), never half-built.
        let mut saw_busy = false;
        for _ in 0..10_000 {
            let mut tx = db.begin().unwrap();
            match tx.get(t, &3i64) {
                Err(Error::Busy(m)) => {
                    assert!(m.contains("CREATE INDEX"), "{m}");
                    saw_busy = true;
                    break;
                }
                Ok(Some(_)) => tx.abort(),
                other => panic!("unexpected {other:?}"),
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        assert!(saw_busy, "the build never marked the table");
        release_tx.send(()).unwrap();
        holder.join().unwrap().unwrap();
        let t2 = build.join().unwrap().unwrap();
        // The writer's commit is in the rebuilt table and its index.
        let mut tx = db.begin().unwrap();
        let mut hits = Vec::new();
        tx.get_by(&t2, t2.index("by_v").unwrap(), &4242i64, |r| {
            hits.push(int(r, 0));
            true
        })
        .unwrap();
        assert_eq!(hits, [2]);
    });
}

#[test]
fn build_gives_up_on_a_transaction_left_open() {
    let db = Database::open(Config::new().ddl_wait(Duration::from_millis(100))).unwrap();
    let t = setup(&db, false);
    let mut open = db.begin().unwrap();
    assert_eq!(open.get(&t, &7i64).unwrap().unwrap()[1], Value::Int(9));
    let err = db
        .create_index("t", "by_v", &["v"], IndexKind::Ordered, false)
        .unwrap_err();
    assert!(
        matches!(&err, Error::Busy(m) if m.contains("open transaction")),
        "{err}"
    );
    // Nothing changed: the open transaction and the same handle go on.
    open.update(&t, &1i64, &[(1, 8i64)]).unwrap();
    open.commit().unwrap();
    assert!(t.index("by_v").is_err());
    assert!(by_scan(&db, &t).contains(&(1, 8)));
}

#[test]
fn transfers_running_across_index_builds_keep_the_total() {
    const ACCOUNTS: i64 = 200;
    let db = Database::open(Config::new().ddl_wait(Duration::from_secs(60))).unwrap();
    let t = db
        .create_table(
            TableSchema::new("acct")
                .column("id", ColumnType::Int)
                .column("bal", ColumnType::Int)
                .column("branch", ColumnType::Int)
                .primary_key(&["id"]),
        )
        .unwrap();
    db.run(|tx| {
        for i in 0..ACCOUNTS {
            tx.insert(&t, &(i, 100i64, i % 10))?;
        }
        Ok(())
    })
    .unwrap();
    let stop = std::sync::atomic::AtomicBool::new(false);
    let committed = std::sync::atomic::AtomicU64::new(0);
    let refused = std::sync::atomic::AtomicU64::new(0);
    std::thread::scope(|s| {
        for w in 0..2u64 {
            let (db, stop, committed, refused) = (&db, &stop, &committed, &refused);
            s.spawn(move || {
                let mut x = w + 1;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    x = x
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    let (a, b) = ((x >> 20) as i64 % ACCOUNTS, (x >> 40) as i64 % ACCOUNTS);
                    // Look the table up per attempt: a build replaces it.
                    let t = db.table("acct").unwrap();
                    let r = db.run(|tx| {
                        let ba = tx.get(&t, &a)?.unwrap()[1].as_i64().unwrap();
                        let bb = tx.get(&t, &b)?.unwrap()[1].as_i64().unwrap();
                        if a != b {
                            tx.update(&t, &a, &[(1, ba - 1)])?;
                            tx.update(&t, &b, &[(1, bb + 1)])?;
                        }
                        Ok(())
                    });
                    match r {
                        Ok(()) => {
                            committed.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        }
                        Err(Error::Busy(_)) | Err(Error::UnknownTable(_)) => {
                            refused.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        }
                        Err(e) => panic!("transfer failed: {e}"),
                    }
                }
            });
        }
        for (i, col) in ["branch", "bal", "id"].into_iter().enumerate() {
            std::thread::sleep(Duration::from_millis(30));
            let kind = if i % 2 == 0 {
                IndexKind::Hash
            } else {
                IndexKind::Ordered
            };
            db.create_index("acct", &format!("by_{col}"), &[col], kind, false)
                .unwrap();
        }
        std::thread::sleep(Duration::from_millis(30));
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
    });
    assert!(committed.load(std::sync::atomic::Ordering::Relaxed) > 0);
    let t = db.table("acct").unwrap();
    assert_eq!(t.schema().indexes().len(), 4);
    let rows = by_index(&db, &t, t.index("by_branch").unwrap(), 0..10);
    assert_eq!(rows.len() as i64, ACCOUNTS);
    assert_eq!(rows.iter().map(|r| r.1).sum::<i64>(), 100 * ACCOUNTS);
}
