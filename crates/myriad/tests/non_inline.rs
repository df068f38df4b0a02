//! Non-inline attributes under append-only storage (thesis §5.4.1): VARCHAR and BYTES
//! columns live in blocks of their own, copied for every version (`copy`) or shared by
//! reference count while unchanged (`shared`). Snapshots must read exactly their versions,
//! rollback must leave the blocks of the versions it keeps intact, a block must outlive
//! every version and reader that uses it, and `shared` must allocate only what changed.
use crate::common::*;
use myriad::*;

const HOW: [NonInline; 2] = [NonInline::Copy, NonInline::Shared];

/// The storages and GC policies each test runs on: every pairing that takes non-inline
/// attributes (the append-only storages).
fn setups() -> Vec<(VersionStorage, GcPolicy)> {
    accepted_pairings(&Config::new().non_inline(NonInline::Copy))
}

/// `doc(k INT primary key, a VARCHAR(100), n INT, b BYTES(50), c VARCHAR(16))`, indexed on
/// `a` (a key in a non-inline column).
fn doc(db: &Database) -> TableRef {
    db.create_table(
        TableSchema::new("doc")
            .column("k", ColumnType::Int)
            .column("a", ColumnType::Str(100))
            .column("n", ColumnType::Int)
            .column("b", ColumnType::Bytes(50))
            .column("c", ColumnType::Str(16))
            .primary_key_with(&["k"], IndexKind::Ordered)
            .index("by_a", &["a"], IndexKind::Ordered, false),
    )
    .unwrap()
}

fn row_of(tx: &mut Transaction<'_>, t: &TableRef, k: i64) -> Option<Vec<Value>> {
    tx.get(t, &k).unwrap().map(|r| r.0)
}

fn open(how: NonInline, storage: VersionStorage, gc: GcPolicy) -> Database {
    Database::open(
        Config::new()
            .non_inline(how)
            .version_storage(storage)
            .gc(gc)
            .isolation(Isolation::Snapshot),
    )
    .unwrap()
}

/// Snapshots opened between updates of an inline column, of non-inline ones, of both in
/// two statements of one transaction (our own version changed again), a delete and a
/// re-insert each read the row as it was when they began, by key and through the index
/// on the non-inline column, before and after GC ran.
#[test]
fn snapshots_read_their_own_versions() {
    for how in HOW {
        for (storage, gc) in setups() {
            let db = open(how, storage, gc);
            let t = doc(&db);
            let mut cur = vec![
                Value::Int(1),
                Value::Str("alpha".into()),
                Value::Int(0),
                Value::Bytes(vec![1; 50]),
                Value::Str("c".into()),
            ];
            db.run(|tx| tx.insert(&t, &cur.as_slice())).unwrap();
            let mut expected = vec![Some(cur.clone())];
            let mut snaps = vec![db.begin().unwrap()];
            for step in 0..14i64 {
                match step {
                    6 => {
                        db.run(|tx| tx.delete(&t, &1i64)).unwrap();
                        expected.push(None);
                    }
                    7 => {
                        cur[1] = Value::Str("reborn".into());
                        db.run(|tx| tx.insert(&t, &cur.as_slice())).unwrap();
                        expected.push(Some(cur.clone()));
                    }
                    _ => {
                        let set: Vec<(usize, Value)> = match step % 3 {
                            0 => vec![(2, Value::Int(step))],
                            1 => vec![(1, Value::Str(format!("a{step}")))],
                            _ => vec![(3, Value::Bytes(vec![step as u8; 7 + step as usize]))],
                        };
                        let second = step % 2 == 1;
                        for (c, v) in &set {
                            cur[*c] = v.clone();
                        }
                        if second {
                            cur[4] = Value::Str(format!("c{step}"));
                            cur[1] = Value::Str(format!("again{step}"));
                        }
                        let cur2 = cur.clone();
                        db.run(|tx| {
                            tx.update(&t, &1i64, &set)?;
                            if second {
                                tx.update(
                                    &t,
                                    &1i64,
                                    &[(4, cur2[4].clone()), (1, cur2[1].clone())],
                                )?;
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
                assert_eq!(&row_of(s, &t, 1), e, "{how} {storage} {gc}: snapshot {i}");
                if let Some(e) = e {
                    let mut found = Vec::new();
                    s.get_by(&t, 1, &[e[1].clone()], |r| {
                        found.push(r.to_row().0);
                        true
                    })
                    .unwrap();
                    assert_eq!(
                        found,
                        vec![e.clone()],
                        "{how} {storage} {gc}: snapshot {i} by a"
                    );
                }
            }
            drop(snaps);
            db.collect_garbage();
            assert_eq!(
                row_of(&mut db.begin().unwrap(), &t, 1),
                Some(cur),
                "{how} {storage} {gc}"
            );
        }
    }
}

/// A rolled-back update (twice of our own version), delete and re-insert leave the rows
/// as they were for a snapshot from before and one from after, and the next writer
/// shares or copies what survived.
#[test]
fn rollback_keeps_the_surviving_versions_blocks() {
    for how in HOW {
        let db = open(how, VersionStorage::AppendN2o, GcPolicy::Txn);
        let t = doc(&db);
        let rows: Vec<Vec<Value>> = (0..3i64)
            .map(|k| {
                vec![
                    Value::Int(k),
                    Value::Str(format!("a{k}")),
                    Value::Int(k),
                    Value::Bytes(vec![k as u8; 50]),
                    Value::Str(format!("c{k}")),
                ]
            })
            .collect();
        db.run(|tx| rows.iter().try_for_each(|r| tx.insert(&t, &r.as_slice())))
            .unwrap();
        let mut before = db.begin().unwrap();
        let mut tx = db.begin().unwrap();
        tx.update(&t, &0i64, &[(1, Value::Str("x".into()))])
            .unwrap();
        tx.update(
            &t,
            &0i64,
            &[(1, Value::Str("y".into())), (2, Value::Int(9))],
        )
        .unwrap();
        tx.delete(&t, &1i64).unwrap();
        tx.insert(&t, &rows[1].as_slice()).unwrap();
        tx.update(&t, &2i64, &[(3, Value::Bytes(vec![]))]).unwrap();
        tx.delete(&t, &2i64).unwrap();
        assert_eq!(row_of(&mut tx, &t, 0).unwrap()[1], Value::Str("y".into()));
        tx.abort();
        let mut after = db.begin().unwrap();
        for s in [&mut before, &mut after] {
            for (k, r) in rows.iter().enumerate() {
                assert_eq!(row_of(s, &t, k as i64).as_ref(), Some(r), "{how}: row {k}");
            }
        }
        drop((before, after));
        db.run(|tx| tx.update(&t, &0i64, &[(2, Value::Int(5))]))
            .unwrap();
        db.collect_garbage();
        let mut want = rows[0].clone();
        want[2] = Value::Int(5);
        assert_eq!(row_of(&mut db.begin().unwrap(), &t, 0), Some(want), "{how}");
    }
}

/// Writers keep `a` = "v{n}" and `b` = n's bytes repeated in every committed row and
/// sometimes roll back; readers must always see a consistent row, the same one when they
/// read it again in their snapshot. A block freed while a version or a reader still used
/// it would show up as a mismatch (or garbage).
#[test]
fn readers_never_see_a_block_of_another_version() {
    for how in HOW {
        let db = Database::open(
            Config::new()
                .non_inline(how)
                .isolation(Isolation::Snapshot)
                .gc_interval_txns(4)
                .max_retries(1_000_000),
        )
        .unwrap();
        let t = doc(&db);
        let consistent = |n: i64| {
            vec![
                Value::Str(format!("v{n}")),
                Value::Int(n),
                Value::Bytes(vec![n as u8; (n % 50) as usize]),
            ]
        };
        db.run(|tx| {
            for k in 0..4i64 {
                let mut r = vec![Value::Int(k)];
                r.extend(consistent(0));
                r.push(Value::Str("c".into()));
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
                    let n = (next(&mut seed) % 1000) as i64;
                    let v = consistent(n);
                    let mut tx = db.begin().unwrap();
                    // Either every column (a new block each) or, half the time, `n` and `b`
                    // first and `a` in a second statement (our own version changed again).
                    let r = if i % 2 == 0 {
                        tx.update(
                            &t,
                            &k,
                            &[(1, v[0].clone()), (2, v[1].clone()), (3, v[2].clone())],
                        )
                    } else {
                        tx.update(&t, &k, &[(2, v[1].clone()), (3, v[2].clone())])
                            .and_then(|_| tx.update(&t, &k, &[(1, v[0].clone())]))
                    };
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
                    let mut seen = Vec::new();
                    for _ in 0..4 {
                        let k = (next(&mut seed) % 4) as i64;
                        let r = row_of(&mut tx, &t, k).unwrap();
                        let n = r[2].as_i64().unwrap();
                        assert_eq!(r[1..4], consistent(n)[..], "{how}: row {k}");
                        seen.push((k, r));
                        checked.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        std::thread::yield_now();
                    }
                    for (k, r) in seen {
                        assert_eq!(row_of(&mut tx, &t, k), Some(r), "{how}: row {k} read twice");
                    }
                    let _ = tx.commit();
                }
            });
        });
        assert!(checked.load(std::sync::atomic::Ordering::Relaxed) > 0);
    }
}

/// Bytes allocated per update of one of ten BYTES(100) attributes: inline copies the
/// whole row; `copy` a small version plus ten blocks; `shared` a small version plus one.
#[test]
fn shared_allocates_only_the_changed_attribute() {
    let mut per_update = Vec::new();
    for how in [NonInline::Inline, NonInline::Copy, NonInline::Shared] {
        let db = Database::open(Config::new().non_inline(how)).unwrap();
        let mut s = TableSchema::new("wide").column("k", ColumnType::Int);
        for i in 0..10 {
            s = s.column(&format!("f{i}"), ColumnType::Bytes(100));
        }
        let t = db.create_table(s.primary_key(&["k"])).unwrap();
        db.run(|tx| {
            let mut r = vec![Value::Int(1)];
            r.extend((0..10).map(|i| Value::Bytes(vec![i; 100])));
            tx.insert(&t, &r.as_slice())
        })
        .unwrap();
        let before = db.stats().version_bytes_allocated;
        for i in 0..100u8 {
            db.run(|tx| {
                tx.update(
                    &t,
                    &1i64,
                    &[(1 + (i as usize % 10), Value::Bytes(vec![i; 100]))],
                )
            })
            .unwrap();
        }
        per_update.push((db.stats().version_bytes_allocated - before) / 100);
        // Every attribute reads back.
        let r = row_of(&mut db.begin().unwrap(), &t, 1).unwrap();
        for (c, v) in r.iter().enumerate().skip(1) {
            let want = (0..100u8)
                .rev()
                .find(|i| 1 + (*i as usize % 10) == c)
                .unwrap();
            assert_eq!(v, &Value::Bytes(vec![want; 100]), "{how}: column {c}");
        }
    }
    let (inline, copy, shared) = (per_update[0], per_update[1], per_update[2]);
    // Ten 102-byte attributes: over 1,000 bytes inline; copy as much again in blocks.
    assert!(inline > 1000, "{per_update:?}");
    assert!(copy >= inline, "{per_update:?}");
    assert!(shared < 300, "{per_update:?}");
}

/// Live version memory is exact once GC has run: after updates that share blobs across
/// many versions a snapshot pins (their whole tail then cut in one batch), changes of our
/// own version, rollbacks, deletes and re-inserts, every row is back to one version and
/// `live_version_bytes` is what the freshly loaded table held, to the byte. A blob counted
/// twice, or never, when its last reference goes shows up as a difference.
#[test]
fn live_version_bytes_are_exact_after_gc() {
    for how in HOW {
        // (GC `none` reclaims nothing.)
        for (storage, gc) in setups().into_iter().filter(|s| s.1 != GcPolicy::None) {
            let db = open(how, storage, gc);
            let t = doc(&db);
            let row = |k: i64, i: i64| -> Vec<Value> {
                vec![
                    Value::Int(k),
                    Value::Str(format!("a{k}")),
                    Value::Int(i),
                    Value::Bytes(vec![k as u8; 50]),
                    Value::Str(format!("c{k}")),
                ]
            };
            db.run(|tx| (0..20).try_for_each(|k| tx.insert(&t, &row(k, 0).as_slice())))
                .unwrap();
            db.collect_garbage();
            let loaded = db.stats();
            let what = format!("{how} {storage:?} {gc:?}");
            assert_eq!(loaded.live_versions(), 20, "{what}");
            for round in 0..4i64 {
                // A snapshot holds every version of this round: runs of versions that share
                // `a` with each other but not with the row's newest version.
                let snap = db.begin().unwrap();
                for i in 0..6 {
                    for k in 0..20i64 {
                        let a = Value::Str(format!("a{k} r{round} {}", i / 3));
                        db.run(|tx| tx.update(&t, &k, &[(2, Value::Int(i)), (1, a.clone())]))
                            .unwrap();
                    }
                }
                drop(snap);
                // Our own version changed twice: the first change's blob goes at once.
                db.run(|tx| {
                    tx.update(&t, &round, &[(3, Value::Bytes(vec![1; 9]))])?;
                    tx.update(&t, &round, &[(3, Value::Bytes(vec![2; 9]))])?;
                    tx.update(&t, &round, &[(1, Value::Str(format!("a{round}")))])
                })
                .unwrap();
                // Rolled back: a new blob, a shared one, and a delete.
                let mut tx = db.begin().unwrap();
                tx.update(&t, &5i64, &[(4, Value::Str("gone".into()))])
                    .unwrap();
                tx.update(&t, &6i64, &[(2, Value::Int(-1))]).unwrap();
                tx.delete(&t, &7i64).unwrap();
                tx.abort();
                // Deleted and inserted again.
                db.run(|tx| tx.delete(&t, &(10 + round))).unwrap();
                db.run(|tx| tx.insert(&t, &row(10 + round, 0).as_slice()))
                    .unwrap();
            }
            // Every row back to its loaded values (same widths, so the same bytes).
            db.run(|tx| {
                (0..20i64).try_for_each(|k| {
                    let r = row(k, 0);
                    tx.update(
                        &t,
                        &k,
                        &[(1, r[1].clone()), (2, r[2].clone()), (3, r[3].clone())],
                    )
                })
            })
            .unwrap();
            for _ in 0..3 {
                db.collect_garbage();
            }
            assert_eq!(db.chain_stats(4).max_chain_len, 1, "{what}");
            let s = db.stats();
            assert_eq!(s.live_versions(), 20, "{what}: {s:?}");
            assert_eq!(
                s.live_version_bytes(),
                loaded.live_version_bytes(),
                "{what}: allocated {} reclaimed {} (after the load: {})",
                s.version_bytes_allocated,
                s.version_bytes_reclaimed,
                loaded.live_version_bytes()
            );
            let mut r = db.begin().unwrap();
            for k in 0..20i64 {
                assert_eq!(row_of(&mut r, &t, k), Some(row(k, 0)), "{what}: row {k}");
            }
        }
    }
}

/// Non-inline attributes are an append-only layout: other storages, physical index
/// pointers (keyed by the version's inline bytes) and single-version protocols are refused
/// at open, naming both choices.
#[test]
fn impossible_pairings_are_refused() {
    for how in HOW {
        let cases = [
            (
                Config::new().version_storage(VersionStorage::TimeTravel),
                "time-travel",
            ),
            (
                Config::new().version_storage(VersionStorage::Delta),
                "delta",
            ),
            (
                Config::new().index_pointers(IndexPointers::Physical),
                "physical",
            ),
            (
                Config::new()
                    .protocol(Protocol::Silo)
                    .version_storage(VersionStorage::SingleVersion),
                "single-version",
            ),
        ];
        for (c, other) in cases {
            match Database::open(c.non_inline(how)) {
                Err(Error::InvalidConfig(m)) => {
                    assert!(m.contains(how.name()) && m.contains(other), "{m}")
                }
                Err(e) => panic!("{how} {other}: {e}"),
                Ok(_) => panic!("{how} {other}: accepted"),
            }
        }
    }
}

/// Tables without VARCHAR or BYTES columns are unaffected: rows stay inline.
#[test]
fn integer_tables_stay_inline() {
    let mut bytes = Vec::new();
    for how in [NonInline::Inline, NonInline::Shared] {
        let db = Database::open(Config::new().non_inline(how)).unwrap();
        // Not `kv`, which gains a VARCHAR column under non-inline storage.
        let t = db
            .create_table(
                TableSchema::new("ints")
                    .column("k", ColumnType::Int)
                    .column("v", ColumnType::Int)
                    .column("w", ColumnType::Float)
                    .primary_key(&["k"]),
            )
            .unwrap();
        db.run(|tx| {
            for k in 0..10i64 {
                tx.insert(&t, &(k, k, 0.5f64))?;
            }
            Ok(())
        })
        .unwrap();
        let before = db.stats().version_bytes_allocated;
        db.run(|tx| tx.update(&t, &3i64, &[(1, 30i64)])).unwrap();
        bytes.push(db.stats().version_bytes_allocated - before);
        let mut tx = db.begin().unwrap();
        assert_eq!(
            tx.get_with(&t, &3i64, |r| r.i64(1).unwrap()).unwrap(),
            Some(30)
        );
    }
    assert_eq!(bytes[0], bytes[1]);
}
