//! In-place version storage (thesis §5.4.2–5.4.3): `time-travel` keeps a full copy of each
//! superseded version, `delta` the before-images of the columns its successor changed; the
//! newest row is updated in place in the main table. Old snapshots must still read exactly
//! their versions, a rollback must give the master its old values back, and no reader may
//! ever see a row half-written.
use crate::common::*;
use myriad::*;

/// The in-place storages.
fn in_place() -> impl Iterator<Item = VersionStorage> {
    VersionStorage::ALL.iter().copied().filter(|s| s.in_place())
}

/// A configuration on `storage`, with the GC it needs (`siro`: `dead-zone`).
fn on(storage: VersionStorage) -> Config {
    let c = Config::new().version_storage(storage);
    if storage == VersionStorage::Siro {
        c.gc(GcPolicy::DeadZone)
    } else {
        c
    }
}

/// `wide(k INT primary key, c0..c{n-1} INT, s VARCHAR(16))`.
fn wide(db: &Database, n: usize) -> TableRef {
    let mut s = TableSchema::new("wide").column("k", ColumnType::Int);
    for i in 0..n {
        s = s.column(&format!("c{i}"), ColumnType::Int);
    }
    s = s
        .column("s", ColumnType::Str(16))
        .primary_key_with(&["k"], IndexKind::Ordered)
        .index("by_c0", &["c0"], IndexKind::Ordered, false);
    db.create_table(s).unwrap()
}

fn row_of(tx: &mut Transaction<'_>, t: &TableRef, k: i64) -> Option<Vec<Value>> {
    tx.get(t, &k).unwrap().map(|r| r.0)
}

/// Snapshots opened between updates that change different columns (one, several, a text
/// column, a delete, a re-insert, an update of our own version twice) each read the row as
/// it was when they began, before and after GC ran.
#[test]
fn snapshots_read_their_own_versions() {
    let pairings = accepted_pairings(&Config::new());
    for (storage, gc) in pairings.into_iter().filter(|p| p.0.in_place()) {
        let db = Database::open(
            Config::new()
                .version_storage(storage)
                .gc(gc)
                .isolation(Isolation::Snapshot),
        )
        .unwrap();
        let t = wide(&db, 6);
        let initial: Vec<Value> = std::iter::once(Value::Int(1))
            .chain((0..6).map(|i| Value::Int(i * 10)))
            .chain(std::iter::once(Value::Str("first".into())))
            .collect();
        db.run(|tx| tx.insert(&t, &initial.as_slice())).unwrap();
        let mut expected = vec![Some(initial.clone())];
        let mut snaps = vec![db.begin().unwrap()];
        let mut cur = initial.clone();
        for step in 0..12i64 {
            match step {
                5 => {
                    db.run(|tx| tx.delete(&t, &1i64)).unwrap();
                    expected.push(None);
                }
                6 => {
                    cur[3] = Value::Int(-3);
                    cur[7] = Value::Str("again".into());
                    db.run(|tx| tx.insert(&t, &cur.as_slice())).unwrap();
                    expected.push(Some(cur.clone()));
                }
                _ => {
                    // Column (step % 6) + 1, and on odd steps the text and c0 too, in
                    // two statements of one transaction (our own version changed again).
                    let c = (step % 6) as usize + 1;
                    cur[c] = Value::Int(100 + step);
                    let odd = step % 2 == 1;
                    if odd {
                        cur[7] = Value::Str(format!("s{step}"));
                        cur[1] = Value::Int(-step);
                    }
                    let (cur2, c2) = (cur.clone(), c);
                    db.run(|tx| {
                        tx.update(&t, &1i64, &[(c2, cur2[c2].clone())])?;
                        if odd {
                            tx.update(&t, &1i64, &[(7, cur2[7].clone()), (1, cur2[1].clone())])?;
                        }
                        Ok(())
                    })
                    .unwrap();
                    expected.push(Some(cur.clone()));
                }
            }
            snaps.push(db.begin().unwrap());
            if step % 4 == 3 {
                db.collect_garbage();
            }
        }
        for (i, (s, e)) in snaps.iter_mut().zip(&expected).enumerate() {
            assert_eq!(&row_of(s, &t, 1), e, "{storage} {gc}: snapshot {i}");
            // Through the secondary index too.
            if let Some(e) = e {
                let c0 = e[1].clone();
                let mut found = Vec::new();
                s.get_by(&t, 1, &[c0], |r| {
                    found.push(r.to_row().0);
                    true
                })
                .unwrap();
                assert_eq!(found, vec![e.clone()], "{storage} {gc}: snapshot {i} by c0");
            }
        }
        drop(snaps);
        db.collect_garbage();
        assert_eq!(
            row_of(&mut db.begin().unwrap(), &t, 1),
            Some(cur),
            "{storage} {gc}"
        );
    }
}

/// After a rolled-back update, delete and re-insert, a snapshot that began before them and
/// one after read the old values, and the next writer builds on them.
#[test]
fn rollback_restores_the_master() {
    for storage in in_place() {
        let db = Database::open(on(storage)).unwrap();
        let t = kv(&db);
        load(&db, &t, 0..3);
        let mut before = db.begin().unwrap();
        let mut tx = db.begin().unwrap();
        tx.update(&t, &0i64, &[(1, 50i64), (3, 9i64)]).unwrap();
        tx.update(&t, &0i64, &[(2, 70i64)]).unwrap();
        tx.delete(&t, &1i64).unwrap();
        tx.insert(&t, &(1i64, 11i64, 111i64, 1i64)).unwrap();
        tx.update(&t, &2i64, &[(1, 22i64)]).unwrap();
        tx.delete(&t, &2i64).unwrap();
        // Our own writes, read back.
        assert_eq!(val(&mut tx, &t, 0), Some(50));
        assert_eq!(val(&mut tx, &t, 1), Some(11));
        assert_eq!(val(&mut tx, &t, 2), None);
        tx.abort();
        let mut after = db.begin().unwrap();
        for s in [&mut before, &mut after] {
            for k in 0..3i64 {
                let r = s.get(&t, &k).unwrap().unwrap();
                assert_eq!(
                    r.0,
                    vec![
                        Value::Int(k),
                        Value::Int(k),
                        Value::Int(k),
                        Value::Int(k % 3)
                    ],
                    "{storage}"
                );
            }
        }
        db.run(|tx| tx.update(&t, &0i64, &[(1, 5i64)])).unwrap();
        let r = db.begin().unwrap().get(&t, &0i64).unwrap().unwrap();
        assert_eq!(
            r.0,
            vec![Value::Int(0), Value::Int(5), Value::Int(0), Value::Int(0)],
            "{storage}"
        );
    }
}

/// Writers move amounts between the columns of one row (their sum stays 0) and sometimes
/// roll back; readers, at their snapshots, must always see a sum of 0 (a torn row would
/// not), and the same row when they read it again (a reconstruction missing a
/// before-image would return a newer version).
#[test]
fn readers_never_see_a_half_written_row() {
    const COLS: usize = 64;
    for storage in in_place() {
        let db = Database::open(
            on(storage)
                .isolation(Isolation::Snapshot)
                .gc_interval_txns(8)
                .max_retries(1_000_000),
        )
        .unwrap();
        let t = wide(&db, COLS);
        db.run(|tx| {
            for k in 0..4i64 {
                let mut r = vec![Value::Int(k)];
                r.extend((0..COLS).map(|_| Value::Int(0)));
                r.push(Value::Str(String::new()));
                tx.insert(&t, &r.as_slice())?;
            }
            Ok(())
        })
        .unwrap();
        let stop = std::sync::atomic::AtomicBool::new(false);
        let checked = std::sync::atomic::AtomicU64::new(0);
        std::thread::scope(|s| {
            s.spawn(|| {
                let mut seed = 7u64;
                for i in 0..20_000u64 {
                    let k = (next(&mut seed) % 4) as i64;
                    let a = (next(&mut seed) % COLS as u64) as usize + 1;
                    let b = (next(&mut seed) % COLS as u64) as usize + 1;
                    let amount = (next(&mut seed) % 100) as i64;
                    let mut tx = db.begin().unwrap();
                    let r = tx.update_with(&t, &k, |row| {
                        let va = row.as_ref().i64(a)?;
                        row.set(a, va - amount)?;
                        let vb = row.as_ref().i64(b)?;
                        row.set(b, vb + amount)?;
                        Ok(())
                    });
                    if r.is_err() {
                        continue;
                    }
                    if i % 7 == 0 {
                        tx.abort();
                    } else {
                        let _ = tx.commit();
                    }
                }
                stop.store(true, std::sync::atomic::Ordering::Release);
            });
            s.spawn(|| {
                let mut seed = 11u64;
                while !stop.load(std::sync::atomic::Ordering::Acquire) {
                    let mut tx = db.begin().unwrap();
                    // Several reads of one snapshot, so some read superseded versions; each
                    // row read again at the end must be the same (the snapshot's version).
                    let mut seen = Vec::new();
                    for _ in 0..4 {
                        let k = (next(&mut seed) % 4) as i64;
                        let cols = tx
                            .get_with(&t, &k, |r| {
                                (1..=COLS).map(|c| r.i64(c).unwrap()).collect::<Vec<_>>()
                            })
                            .unwrap()
                            .unwrap();
                        assert_eq!(cols.iter().sum::<i64>(), 0, "{storage}: row {k}");
                        seen.push((k, cols));
                        checked.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        std::thread::yield_now();
                    }
                    for (k, cols) in seen {
                        let again = tx
                            .get_with(&t, &k, |r| {
                                (1..=COLS).map(|c| r.i64(c).unwrap()).collect::<Vec<_>>()
                            })
                            .unwrap();
                        assert_eq!(again, Some(cols), "{storage}: row {k} read twice");
                    }
                    let _ = tx.commit();
                }
            });
        });
        assert!(checked.load(std::sync::atomic::Ordering::Relaxed) > 0);
    }
}

/// What each scheme allocates per update of one column of a wide row: append-only a whole
/// version, time-travel a header plus a full copy, delta a header plus one before-image.
#[test]
fn delta_allocates_only_the_changed_columns() {
    let mut per_update = Vec::new();
    for storage in [
        VersionStorage::AppendN2o,
        VersionStorage::TimeTravel,
        VersionStorage::Delta,
    ] {
        let db = Database::open(Config::new().version_storage(storage)).unwrap();
        let t = wide(&db, 100);
        db.run(|tx| {
            let mut r = vec![Value::Int(1)];
            r.extend((0..100).map(Value::Int));
            r.push(Value::Str(String::new()));
            tx.insert(&t, &r.as_slice())
        })
        .unwrap();
        let before = db.stats().version_bytes_allocated;
        for i in 0..100i64 {
            db.run(|tx| tx.update(&t, &1i64, &[(50, i)])).unwrap();
        }
        per_update.push((db.stats().version_bytes_allocated - before) / 100);
    }
    let (append, tt, delta) = (per_update[0], per_update[1], per_update[2]);
    // A row of 101 INTs and a VARCHAR(16): over 800 bytes.
    assert!(append > 800, "{per_update:?}");
    assert!(tt >= append, "{per_update:?}");
    assert!(delta < 150, "{per_update:?}");
}

/// Pairings the in-place schemes cannot run are refused at open, naming both choices.
#[test]
fn impossible_pairings_are_refused() {
    for storage in in_place() {
        let cases = [
            on(storage).index_pointers(IndexPointers::Physical),
            on(storage).gc(GcPolicy::Coop),
            on(storage).protocol(Protocol::Silo),
        ];
        for c in cases {
            match Database::open(c) {
                Err(Error::InvalidConfig(m)) => {
                    assert!(m.contains(storage.name()), "{m}")
                }
                Err(e) => panic!("{storage}: {e}"),
                Ok(_) => panic!("{storage}: accepted"),
            }
        }
    }
}
