//! Interleavings that need a pause inside the transaction code: writers inside
//! `Transaction::rollback`, and commit dependencies on a transaction held in Preparing; and
//! the crate-internal entries of whole row images (recovery's `insert_raw`, `replay_set`,
//! `replay_update`).

use crate::version::Order;
use crate::{AbortReason, ColumnType, Config, Database, Error, TableSchema, Value, VersionStorage};
use std::cell::RefCell;
use std::sync::mpsc::channel;
use std::time::Duration;

/// Points inside the transaction code where a test can run code of its own.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Pause {
    /// In `rollback`, after the Aborted state is published and before any write is undone.
    Rollback,
    /// In an insert over a deleted row, after the tombstone is locked and before the new
    /// version is installed.
    ReviveTombstone,
    /// In an update transaction's commit, after Preparing with the end timestamp is
    /// published and before validation.
    Prepared,
    /// In a multi-version update commit, once its log record is durable (under
    /// `partial-order`: waited for) and before it hands back its end timestamp.
    Durable,
    /// In a single-version commit, before it locks anything.
    SingleVersionCommit,
    /// In a multi-version update commit, before it draws its end timestamp.
    MultiVersionCommit,
    /// In a point read by primary key or a read of an index entry's row, after the version
    /// it reads is found and before the read is recorded (MVTO: its read-ts raised) or its
    /// row copied.
    Found,
    /// In a chain walk (`Resolver::visible_in_chain`), after a version is judged invisible
    /// and before its successor is loaded.
    ChainStep,
}

/// A hook: where it runs and what it does.
type Hook = (Pause, Box<dyn FnMut()>);

thread_local! {
    static PAUSE: RefCell<Option<Hook>> = const { RefCell::new(None) };
}

/// Runs this thread's hook for `at`, if one is set (test builds only).
pub(crate) fn pause_point(at: Pause) {
    let hook = PAUSE.with(|h| h.borrow_mut().take());
    if let Some((p, mut f)) = hook {
        if p == at {
            f();
        }
        PAUSE.with(|h| *h.borrow_mut() = Some((p, f)));
    }
}

fn set_pause(at: Pause, f: impl FnMut() + 'static) {
    PAUSE.with(|h| *h.borrow_mut() = Some((at, Box::new(f))));
}

fn clear_pause() {
    PAUSE.with(|h| *h.borrow_mut() = None);
}

const WAIT: Duration = Duration::from_secs(20);

/// `t(k INT primary key, v INT)`.
pub(crate) fn kv_table(db: &Database) -> crate::TableRef {
    db.create_table(
        TableSchema::new("t")
            .column("k", ColumnType::Int)
            .column("v", ColumnType::Int)
            .primary_key(&["k"]),
    )
    .unwrap()
}

/// `t(k INT, v INT)` with an ordered primary key on `k` (range scans).
fn ordered_kv_table(db: &Database) -> crate::TableRef {
    db.create_table(
        TableSchema::new("t")
            .column("k", ColumnType::Int)
            .column("v", ColumnType::Int)
            .primary_key_with(&["k"], crate::IndexKind::Ordered),
    )
    .unwrap()
}

/// Hekaton §2.6 lets a writer take over the write lock of a version whose End field holds an
/// aborted transaction's id. Here B read the chain head before A wrote, A aborts, and B takes
/// A's lock over and installs its version while A is still rolling back. A's rollback must not
/// put the old head back over B's version: that lost B's committed update and, once B's end
/// timestamp was stamped on the old version, left no version visible to later readers (a row
/// that exists reported as missing).
#[test]
fn rollback_keeps_the_version_of_a_writer_that_took_its_lock_over() {
    let takes_over = |s: &VersionStorage| s.store().takes_over_aborted_locks();
    for storage in multi_version().filter(takes_over) {
        rollback_keeps_the_version_of_a_writer_that_took_its_lock_over_on(storage);
    }
}

/// The version storages the default (multi-version) configuration accepts.
fn multi_version() -> impl Iterator<Item = VersionStorage> {
    VersionStorage::ALL
        .iter()
        .copied()
        .filter(|&s| Config::new().version_storage(s).validate().is_ok())
}

fn rollback_keeps_the_version_of_a_writer_that_took_its_lock_over_on(storage: VersionStorage) {
    let db = Database::open(Config::new().version_storage(storage)).unwrap();
    let t = kv_table(&db);
    db.run(|tx| tx.insert(&t, &(1i64, 0i64))).unwrap();

    let (b_read, b_read_rx) = channel::<()>();
    let (a_aborted, a_aborted_rx) = channel::<()>();
    let (b_installed, b_installed_rx) = channel::<()>();
    std::thread::scope(|s| {
        let (db, t) = (&db, &t);
        let a = s.spawn(move || {
            b_read_rx.recv_timeout(WAIT).unwrap();
            let mut tx = db.begin().unwrap();
            tx.update(t, &1i64, &[(1, 100i64)]).unwrap();
            set_pause(Pause::Rollback, move || {
                a_aborted.send(()).unwrap();
                // If B could not take the lock over, it never signals; go on regardless.
                let _ = b_installed_rx.recv_timeout(WAIT);
            });
            tx.abort();
            clear_pause();
        });
        let b = s.spawn(move || {
            let mut tx = db.begin().unwrap();
            // The closure runs after B found the head and before B locks it.
            tx.update_with(t, &1i64, |row| {
                b_read.send(()).unwrap();
                a_aborted_rx.recv_timeout(WAIT).unwrap();
                row.set(1, 7i64)
            })
            .unwrap();
            b_installed.send(()).unwrap();
            tx.commit().unwrap();
        });
        a.join().unwrap();
        b.join().unwrap();
    });
    let v = db
        .run(|tx| tx.get_with(&t, &1i64, |r| r.i64(1).unwrap()))
        .unwrap();
    assert_eq!(
        v,
        Some(7),
        "{storage}: B's committed update must survive A's rollback"
    );
}

/// The chain order: under `o2n` the indirection entry points at the oldest version and `next`
/// leads to newer ones; under `n2o` the other way round. (A snapshot held open keeps GC from
/// cutting the chain.)
#[test]
fn the_chain_order_follows_the_version_storage() {
    use std::sync::atomic::Ordering;
    for storage in multi_version() {
        let db = Database::open(Config::new().version_storage(storage)).unwrap();
        let t = kv_table(&db);
        db.run(|tx| tx.insert(&t, &(1i64, 0i64))).unwrap();
        let snap = db.begin().unwrap();
        for v in 1..=3i64 {
            db.run(|tx| tx.update(&t, &1i64, &[(1, v)])).unwrap();
        }
        db.collect_garbage();
        let mut begins = Vec::new();
        let _pin = crossbeam_epoch::pin();
        let mut v = t
            .entry(crate::TupleId::new(0))
            .unwrap()
            .load(Ordering::Acquire);
        // SAFETY: pinned.
        while let Some(x) = unsafe { v.as_ref() } {
            begins.push(x.begin.load(Ordering::Acquire));
            v = x.next.load(Ordering::Acquire);
        }
        assert_eq!(begins.len(), 4, "{storage}: {begins:?}");
        let mut sorted = begins.clone();
        sorted.sort_unstable();
        if storage.store().order() == Order::OldestFirst {
            assert_eq!(begins, sorted, "{storage}: oldest first");
        } else {
            sorted.reverse();
            assert_eq!(begins, sorted, "{storage}: newest first");
        }
        snap.abort();
    }
}

/// Re-inserting a deleted row locks the tombstone at the chain head and installs the new
/// version above it. If GC cuts the deleted row's whole chain in between (the tombstone is
/// visible to every snapshot), installing by a plain store would link the new version to a
/// freed tombstone. The install is a CAS: losing that race is a write-write conflict, and the
/// row can then be inserted afresh.
///
/// Under `o2n` GC keeps a deleted row's tombstone (the reviving writer links its version from
/// the tombstone's `next`, `gc/epoch.rs`), so there the same interleaving revives the row.
#[test]
fn reinsert_loses_to_gc_cutting_the_deleted_chain_instead_of_linking_freed_memory() {
    for storage in multi_version() {
        reinsert_against_gc_on(storage);
    }
}

fn reinsert_against_gc_on(storage: VersionStorage) {
    let db = std::sync::Arc::new(Database::open(Config::new().version_storage(storage)).unwrap());
    let t = kv_table(&db);
    // Hold slot 0 (and the watermark) while another thread inserts and deletes the row, so
    // its garbage is queued in another slot, which is idle when the hook collects.
    let holder = db.begin().unwrap();
    std::thread::scope(|s| {
        s.spawn(|| {
            db.run(|tx| tx.insert(&t, &(1i64, 0i64))).unwrap();
            db.run(|tx| tx.delete(&t, &1i64)).unwrap();
        })
        .join()
        .unwrap()
    });
    holder.abort();
    let mut tx = db.begin().unwrap();
    let gc_db = db.clone();
    set_pause(Pause::ReviveTombstone, move || gc_db.collect_garbage());
    let r = tx.insert(&t, &(1i64, 5i64));
    clear_pause();
    if !storage.store().gc_cuts_deleted_chains() {
        assert_eq!(r, Ok(()), "{storage}");
        tx.commit().unwrap();
        let v = db
            .run(|tx| tx.get_with(&t, &1i64, |r| r.i64(1).unwrap()))
            .unwrap();
        assert_eq!(v, Some(5), "{storage}");
        return;
    }
    assert_eq!(
        r,
        Err(Error::SerializationFailure(AbortReason::WriteWriteConflict)),
        "GC cut the chain under the locked tombstone"
    );
    db.run(|tx| tx.insert(&t, &(1i64, 6i64))).unwrap();
    let v = db
        .run(|tx| tx.get_with(&t, &1i64, |r| r.i64(1).unwrap()))
        .unwrap();
    assert_eq!(v, Some(6));
    assert_eq!(
        db.chain_stats(4).max_chain_len,
        1,
        "one live version, nothing dangling"
    );
}

fn kv_db(config: Config, rows: i64) -> (Database, crate::TableRef) {
    let db = Database::open(config).unwrap();
    let t = kv_table(&db);
    for k in 1..=rows {
        db.run(|tx| tx.insert(&t, &(k, 0i64))).unwrap();
    }
    (db, t)
}

fn value(db: &Database, t: &crate::TableRef, k: i64) -> Option<i64> {
    db.run(|tx| tx.get_with(t, &k, |r| r.i64(1).unwrap()))
        .unwrap()
}

/// W updates row 1 and is held in Preparing; R begins after W's end timestamp, reads row 1
/// and copies it into row 2. Returns whether R's read returned while W was still held, and
/// R's commit result. W holds at most `hold` for the read.
fn reader_of_a_preparing_writer(
    db: &Database,
    t: &crate::TableRef,
    hold: Duration,
) -> (bool, crate::Result<()>) {
    let (prepared, prepared_rx) = channel::<()>();
    let (read, read_rx) = channel::<i64>();
    std::thread::scope(|s| {
        let w = s.spawn(move || {
            let mut tx = db.begin().unwrap();
            tx.update(t, &1i64, &[(1, 100i64)]).unwrap();
            let (seen, seen_rx) = channel::<bool>();
            set_pause(Pause::Prepared, move || {
                prepared.send(()).unwrap();
                seen.send(read_rx.recv_timeout(hold).is_ok()).unwrap();
            });
            tx.commit().unwrap();
            clear_pause();
            seen_rx.recv().unwrap()
        });
        let r = s.spawn(move || {
            prepared_rx.recv_timeout(WAIT).unwrap();
            let mut tx = db.begin().unwrap();
            let v = tx.get_with(t, &1i64, |r| r.i64(1).unwrap()).unwrap();
            assert_eq!(v, Some(100), "W's end timestamp is below R's read time");
            let _ = read.send(100);
            tx.update(t, &2i64, &[(1, 100i64)]).unwrap();
            tx.commit()
        });
        (w.join().unwrap(), r.join().unwrap())
    })
}

/// Hekaton §2.5: a reader that meets a Preparing writer below its read time reads its
/// version speculatively instead of waiting, and commits once the writer has committed.
#[test]
fn a_reader_of_a_preparing_writer_reads_speculatively_and_commits_after_it() {
    let (db, t) = kv_db(Config::new(), 2);
    let before = db.stats();
    let (read_while_held, r) = reader_of_a_preparing_writer(&db, &t, WAIT);
    assert!(read_while_held, "the read waited for the writer's outcome");
    assert_eq!(r, Ok(()));
    let d = db.stats();
    assert_eq!(d.commit_deps - before.commit_deps, 1);
    assert_eq!(d.preparing_waits, before.preparing_waits, "nobody waited");
    assert_eq!(value(&db, &t, 2), Some(100));
}

/// With commit dependencies off, the same reader waits for the writer's outcome.
#[test]
fn without_commit_dependencies_the_reader_waits_for_the_writer() {
    let (db, t) = kv_db(Config::new().commit_dependencies(false), 2);
    let before = db.stats();
    let (read_while_held, r) = reader_of_a_preparing_writer(&db, &t, Duration::from_millis(300));
    assert!(
        !read_while_held,
        "the read returned while the writer was held in Preparing"
    );
    assert_eq!(r, Ok(()));
    let d = db.stats();
    assert_eq!(d.commit_deps, before.commit_deps);
    assert!(d.preparing_waits > before.preparing_waits);
    assert_eq!(value(&db, &t, 2), Some(100));
}

/// W: reads row 3, sets row 1 to 100 and commits, but row 3 changes first, so W fails read
/// validation. Once Preparing (end timestamp drawn), W says so on `prepared` and waits for
/// `go` before validating.
fn failing_writer(
    db: &Database,
    t: &crate::TableRef,
    prepared: std::sync::mpsc::Sender<()>,
    go: std::sync::mpsc::Receiver<()>,
) -> crate::Result<()> {
    let mut tx = db.begin().unwrap();
    tx.get_with(t, &3i64, |_| ()).unwrap();
    tx.update(t, &1i64, &[(1, 100i64)]).unwrap();
    db.run(|x| x.update(t, &3i64, &[(1, 5i64)])).unwrap();
    set_pause(Pause::Prepared, move || {
        prepared.send(()).unwrap();
        go.recv_timeout(WAIT).unwrap();
    });
    let r = tx.commit();
    clear_pause();
    r
}

/// Hekaton §2.7, cascading aborts: W fails validation after R1 read its version
/// speculatively; R1 (held in Preparing itself) was read speculatively by R2, a read-only
/// transaction. W's abort aborts R1, whose abort aborts R2; nothing of theirs survives.
#[test]
fn an_aborting_writer_aborts_its_speculative_readers_in_cascade() {
    let (db, t) = kv_db(Config::new(), 3);
    let before = db.stats();
    let (w_prepared, w_prepared_rx) = channel::<()>();
    let (r1_read, r1_read_rx) = channel::<()>();
    let (r1_prepared, r1_prepared_rx) = channel::<()>();
    let (r2_read, r2_read_rx) = channel::<()>();
    let (r1, r2) = std::thread::scope(|s| {
        let (db, t) = (&db, &t);
        let w = s.spawn(move || failing_writer(db, t, w_prepared, r1_read_rx));
        let r1 = s.spawn(move || {
            w_prepared_rx.recv_timeout(WAIT).unwrap();
            let mut tx = db.begin().unwrap();
            let v = tx.get_with(t, &1i64, |r| r.i64(1).unwrap()).unwrap();
            assert_eq!(v, Some(100));
            tx.update(t, &2i64, &[(1, 100i64)]).unwrap();
            set_pause(Pause::Prepared, move || {
                r1_prepared.send(()).unwrap();
                r2_read_rx.recv_timeout(WAIT).unwrap();
            });
            r1_read.send(()).unwrap();
            let r = tx.commit();
            clear_pause();
            r
        });
        let r2 = s.spawn(move || {
            r1_prepared_rx.recv_timeout(WAIT).unwrap();
            let mut tx = db.begin().unwrap();
            let v = tx.get_with(t, &2i64, |r| r.i64(1).unwrap()).unwrap();
            assert_eq!(v, Some(100), "R1's version, read speculatively");
            r2_read.send(()).unwrap();
            tx.commit()
        });
        assert_eq!(
            w.join().unwrap(),
            Err(Error::SerializationFailure(AbortReason::ReadValidation))
        );
        (r1.join().unwrap(), r2.join().unwrap())
    });
    let dep = Err(Error::SerializationFailure(AbortReason::CommitDependency));
    assert_eq!(r1, dep, "R1 read W's version");
    assert_eq!(r2, dep, "R2 read R1's version");
    let d = db.stats();
    assert_eq!(d.commit_deps - before.commit_deps, 2);
    assert_eq!(
        d.aborted(AbortReason::CommitDependency) - before.aborted(AbortReason::CommitDependency),
        2
    );
    assert_eq!(value(&db, &t, 1), Some(0));
    assert_eq!(value(&db, &t, 2), Some(0));
}

/// Oldest-to-newest chains: R meets W's lock on the row's only committed version while W is
/// Preparing below R's read time, so R passes that version over speculatively (W's version
/// after it would be the one to read). W then fails validation and takes its version out of
/// the chain before R loads the successor: R's walk ends with nothing visible. The row
/// exists, so R must not be told it is missing: the read fails as the cascading abort it is
/// (before the fix it returned `Ok(None)`, which the YCSB driver reported as "no such row").
#[test]
fn a_read_past_an_aborted_speculative_writer_fails_not_misses() {
    let config = Config::new().version_storage(VersionStorage::AppendO2n);
    let (db, t) = kv_db(config, 3);
    let (w_prepared, w_prepared_rx) = channel::<()>();
    let (go, go_rx) = channel::<()>();
    let (w_done, w_done_rx) = channel::<()>();
    let (w, r) = std::thread::scope(|s| {
        let (db, t) = (&db, &t);
        let w = s.spawn(move || {
            let r = failing_writer(db, t, w_prepared, go_rx);
            w_done.send(()).unwrap();
            r
        });
        let r = s.spawn(move || {
            w_prepared_rx.recv_timeout(WAIT).unwrap();
            let mut tx = db.begin().unwrap();
            let mut first = true;
            set_pause(Pause::ChainStep, move || {
                if std::mem::take(&mut first) {
                    go.send(()).unwrap();
                    w_done_rx.recv_timeout(WAIT).unwrap();
                }
            });
            let v = tx.get_with(t, &1i64, |r| r.i64(1).unwrap());
            clear_pause();
            v
        });
        (w.join().unwrap(), r.join().unwrap())
    });
    assert_eq!(
        w,
        Err(Error::SerializationFailure(AbortReason::ReadValidation))
    );
    assert_eq!(
        r,
        Err(Error::SerializationFailure(AbortReason::CommitDependency)),
        "the row exists; R depended on W, which aborted"
    );
    assert_eq!(value(&db, &t, 1), Some(0));
}

/// The history checker on histories full of commit dependencies: every update transaction
/// sleeps in Preparing (before validation), so readers meet Preparing writers all the time,
/// and read validation fails often, so speculative readers are aborted in cascade. At
/// Serializable and Snapshot Isolation, nothing the level forbids may appear.
#[test]
fn speculative_histories_have_no_forbidden_cycles() {
    use crate::Isolation;
    const THREADS: u64 = 4;
    const TXNS: u64 = 300;
    for level in [Isolation::Serializable, Isolation::Snapshot] {
        let config = Config::new()
            .isolation(level)
            .record_history(true)
            .max_retries(100_000);
        let (db, t) = kv_db(config, 8);
        std::thread::scope(|s| {
            for th in 0..THREADS {
                let (db, t) = (&db, &t);
                s.spawn(move || {
                    set_pause(Pause::Prepared, || {
                        std::thread::sleep(Duration::from_micros(50))
                    });
                    let mut rng = 0x9E37_79B9_7F4A_7C15u64.wrapping_mul(th + 1);
                    let mut next = move || {
                        rng ^= rng << 13;
                        rng ^= rng >> 7;
                        rng ^= rng << 17;
                        rng
                    };
                    for _ in 0..TXNS {
                        let (kind, a, b) = (next() % 8, 1 + next() % 8, 1 + next() % 8);
                        let (a, b) = (a as i64, b as i64);
                        db.run(|tx| {
                            let get = |tx: &mut crate::Transaction<'_>, k: i64| {
                                tx.get_with(t, &k, |r| r.i64(1).unwrap())
                                    .map(|v| v.unwrap_or(0))
                            };
                            if kind == 0 {
                                let mut sum = 0;
                                tx.scan_table(t, |r| {
                                    sum += r.i64(1).unwrap();
                                    true
                                })?;
                                return tx.update(t, &a, &[(1, sum % 1000)]);
                            }
                            let (va, vb) = (get(tx, a)?, get(tx, b)?);
                            tx.update(t, &b, &[(1, (va + vb + 1) % 1_000_003)])
                        })
                        .unwrap();
                    }
                    clear_pause();
                });
            }
        });
        let st = db.stats();
        let h = db.take_history();
        let r = crate::history::check(&h);
        assert!(r.anomalies.is_empty(), "{level}: {}", r.anomalies[0]);
        assert!(
            st.commit_deps >= 100,
            "{level}: only {} dependencies",
            st.commit_deps
        );
        if level == Isolation::Serializable {
            assert!(
                st.aborted(AbortReason::CommitDependency) > 0,
                "no cascading abort"
            );
        }
        eprintln!(
            "{level}: {} committed, {} commit dependencies, {} waited, {} cascading aborts, {} read-validation aborts",
            h.len(),
            st.commit_deps,
            st.commit_dep_waits,
            st.aborted(AbortReason::CommitDependency),
            st.aborted(AbortReason::ReadValidation)
        );
    }
}

/// A row image recovery hands in whole is checked as `write_column` checks values: a VARCHAR
/// that is not UTF-8 is refused with `Error::InvalidText` naming the column, a length above
/// the column's maximum with `Error::ValueTooLong`, and nothing is changed (the row inserted
/// before keeps its text). Recovery's placed rows (physical log, checkpoints) likewise.
#[test]
fn whole_row_images_with_invalid_text_are_refused_and_change_nothing() {
    let db = Database::open(Config::new()).unwrap();
    let t = db
        .create_table(
            TableSchema::new("p")
                .column("k", ColumnType::Int)
                .column("name", ColumnType::Str(8))
                .primary_key(&["k"]),
        )
        .unwrap();
    let text_at = t.schema.columns[1].offset + 2;
    let image = |k: i64, name: &str| {
        let mut row = vec![0u8; t.schema.row_size()];
        t.schema
            .encode_row(&[Value::Int(k), Value::Str(name.into())][..], &mut row)
            .unwrap();
        row
    };
    let mut bad = image(1, "ab");
    bad[text_at] = 0xFF; // a byte that starts no UTF-8 sequence
    let invalid = Error::InvalidText {
        table: "p".into(),
        column: "name".into(),
    };
    let mut tx = db.begin().unwrap();
    assert_eq!(tx.insert_raw(&t, &bad), Err(invalid.clone()));
    // The physical log's and the checkpoints' way in (reads then trust stored text).
    let placed = t.placed_version(1, crate::storage::TupleId::new(5), &bad);
    assert_eq!(placed.err(), Some(invalid.clone()));
    tx.insert_raw(&t, &image(1, "ok")).unwrap();
    tx.commit().unwrap();

    let mut key = Vec::new();
    t.schema.encode_key_values(0, &1i64, &mut key).unwrap();
    let mut tx = db.begin().unwrap();
    assert_eq!(tx.replay_set(&t, &key, Some(&bad)), Err(invalid.clone()));
    assert_eq!(
        tx.replay_update(&t, &key, |row| {
            row[text_at + 1] = 0xC3; // a two-byte sequence cut short by the end of the text
            Ok(())
        }),
        Err(invalid)
    );
    let mut long = image(1, "ok");
    long[text_at - 2..text_at].copy_from_slice(&9u16.to_le_bytes());
    assert!(matches!(
        tx.replay_set(&t, &key, Some(&long)),
        Err(Error::ValueTooLong {
            max_len: 8,
            len: 9,
            ..
        })
    ));
    tx.commit().unwrap();
    let name = db
        .run(|tx| tx.get_with(&t, &1i64, |r| r.str(1).unwrap().to_string()))
        .unwrap();
    assert_eq!(name.as_deref(), Some("ok"));
}

/// Partial-order timestamps (either counts): two members of one commit group inserting the
/// same unique key.
/// A is held in Preparing at the shared timestamp while B commits; B must not wait for A
/// (A, resumed, would wait for B in turn) but abort with a unique conflict, and A commits.
#[test]
fn same_group_unique_key_is_a_conflict_not_a_wait() {
    use crate::{IndexKind, Isolation, Protocol, TimestampPolicy};
    for &counters in crate::PoCounters::ALL {
        let db = Database::open(
            Config::new()
                .protocol(Protocol::Si)
                .isolation(Isolation::Snapshot)
                .timestamps(TimestampPolicy::PartialOrder)
                .po_tick(Duration::ZERO)
                .po_counters(counters),
        )
        .unwrap();
        let t = db
            .create_table(
                TableSchema::new("u")
                    .column("k", ColumnType::Int)
                    .column("u", ColumnType::Int)
                    .primary_key(&["k"])
                    .index("by_u", &["u"], IndexKind::Hash, true),
            )
            .unwrap();
        let (a_prepared, a_prepared_rx) = channel::<()>();
        let (b_done, b_done_rx) = channel::<Result<(), Error>>();
        let (inserted, inserted_rx) = channel::<()>();
        let (go, go_rx) = channel::<()>();
        let a = std::thread::scope(|s| {
            let (db, t) = (&db, &t);
            let a = s.spawn(move || {
                let mut tx = db.begin().unwrap();
                tx.insert(t, &(1i64, 7i64)).unwrap();
                inserted.send(()).unwrap();
                go_rx.recv_timeout(WAIT).unwrap();
                set_pause(Pause::Prepared, move || {
                    a_prepared.send(()).unwrap();
                    let b = b_done_rx
                        .recv_timeout(WAIT)
                        .expect("B waited for A, a member of its own commit group");
                    assert_eq!(
                        b,
                        Err(Error::SerializationFailure(AbortReason::UniqueConflict))
                    );
                });
                let r = tx.commit_returning_ts();
                clear_pause();
                r
            });
            s.spawn(move || {
                let mut tx = db.begin().unwrap();
                tx.insert(t, &(2i64, 7i64)).unwrap();
                inserted_rx.recv_timeout(WAIT).unwrap();
                go.send(()).unwrap();
                a_prepared_rx.recv_timeout(WAIT).unwrap();
                let _ = b_done.send(tx.commit());
            });
            a.join().unwrap()
        });
        assert!(a.is_ok(), "{a:?}");
    }
}

/// `locked-counter`: a committer holding the commit lock may wait for a PreparingPending
/// writer (here A's phantom re-scan meets B's insert), so B must not publish PreparingPending
/// before it has the lock. A is held after Preparing, with the lock, while B commits; then
/// A validates. Run on detached threads with a deadline, so a wait for each other fails.
#[test]
fn locked_counter_takes_the_lock_before_preparing() {
    use crate::{Isolation, TimestampPolicy};
    use std::ops::Bound;
    use std::sync::Arc;
    let db = Arc::new(
        Database::open(
            Config::new()
                .isolation(Isolation::Serializable)
                .timestamps(TimestampPolicy::LockedCounter),
        )
        .unwrap(),
    );
    let t = ordered_kv_table(&db);
    let (go, go_rx) = channel::<()>();
    let (done, done_rx) = channel::<(char, Result<(), Error>)>();
    let (b_inserted, b_inserted_rx) = channel::<()>();
    {
        let (db, t, done) = (db.clone(), t.clone(), done.clone());
        std::thread::spawn(move || {
            let mut tx = db.begin().unwrap();
            tx.insert(&t, &(5i64, 0i64)).unwrap();
            b_inserted.send(()).unwrap();
            go_rx.recv_timeout(WAIT).unwrap();
            let _ = done.send(('b', tx.commit()));
        });
    }
    {
        let (db, t) = (db.clone(), t.clone());
        std::thread::spawn(move || {
            let mut tx = db.begin().unwrap();
            let lo = Bound::Included(&0i64);
            let hi = Bound::Excluded(&10i64);
            tx.scan(&t, lo, hi, Default::default(), |_| true).unwrap();
            tx.insert(&t, &(100i64, 0i64)).unwrap();
            b_inserted_rx.recv_timeout(WAIT).unwrap();
            set_pause(Pause::Prepared, move || {
                go.send(()).unwrap();
                // B reaches its commit and waits for the lock.
                std::thread::sleep(Duration::from_millis(100));
            });
            let r = tx.commit();
            clear_pause();
            let _ = done.send(('a', r));
        });
    }
    let mut got = Vec::new();
    for _ in 0..2 {
        match done_rx.recv_timeout(WAIT) {
            Ok(r) => got.push(r),
            Err(_) => panic!("A (holding the commit lock) and B wait for each other: {got:?}"),
        }
    }
    got.sort_by_key(|r| r.0);
    assert_eq!(got, vec![('a', Ok(())), ('b', Ok(()))]);
}

/// `partial-order` on a durable database: a checkpoint that starts while a member of a
/// commit group has its record in the current log file but is not yet readable (held after
/// its record became durable, before its group counts it complete) waits for that group, so
/// its snapshot holds the commit before the older log files are removed. Without the wait
/// the snapshot misses it, the file holding its record is deleted, and after a crash the
/// commit is gone.
#[test]
fn a_checkpoint_waits_for_a_partial_order_group_whose_record_it_may_delete() {
    use crate::config::{Isolation, LogPolicy, PoCounters, Protocol, TimestampPolicy};
    let dir = std::env::temp_dir().join(format!("myriad-po-ckpt-{}", std::process::id()));
    let copy = dir.with_extension("copy");
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&copy);
    let c = Config::new()
        .data_dir(&dir)
        .log(LogPolicy::Logical)
        .protocol(Protocol::Si)
        .isolation(Isolation::Snapshot)
        .timestamps(TimestampPolicy::PartialOrder)
        // Slot counts: the member waits for its round in its commit, where the hook holds
        // it (with shared counters the round releases it, `timestamps_partial_order`).
        .po_counters(PoCounters::Slots)
        .po_tick(Duration::ZERO);
    let db = Database::open(c.clone()).unwrap();
    let t = kv_table(&db);
    let mut tx = db.begin().unwrap();
    tx.insert(&t, &(1i64, 0i64)).unwrap();
    let loaded = tx.commit_returning_ts().unwrap();
    let si = crate::TxnOptions {
        isolation: Isolation::Snapshot,
        read_only: false,
    };
    let (held, held_rx) = channel::<()>();
    let (go, go_rx) = channel::<()>();
    std::thread::scope(|s| {
        let (db, t) = (&db, &t);
        let w = s.spawn(move || {
            let mut tx = db.begin_after(si, loaded).unwrap();
            tx.update(t, &1i64, &[(1, 100i64)]).unwrap();
            set_pause(Pause::Durable, move || {
                held.send(()).unwrap();
                go_rx.recv_timeout(WAIT).unwrap();
            });
            let r = tx.commit();
            clear_pause();
            r
        });
        held_rx.recv_timeout(WAIT).unwrap();
        let ck = s.spawn(move || db.checkpoint().map(|i| i.ts));
        std::thread::sleep(Duration::from_millis(200));
        let waited = !ck.is_finished();
        go.send(()).unwrap();
        w.join().unwrap().unwrap();
        ck.join().unwrap().unwrap();
        assert!(waited, "the checkpoint did not wait for the held group");
    });
    // A crash: the files as they are, the database still open.
    std::fs::create_dir_all(&copy).unwrap();
    for e in std::fs::read_dir(&dir).unwrap() {
        let e = e.unwrap();
        let to = copy.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            std::fs::create_dir_all(&to).unwrap();
            for f in std::fs::read_dir(e.path()).unwrap() {
                let f = f.unwrap();
                std::fs::copy(f.path(), to.join(f.file_name())).unwrap();
            }
        } else if e.file_name() != "LOCK" {
            std::fs::copy(e.path(), &to).unwrap();
        }
    }
    drop(db);
    let db = Database::open(c.data_dir(&copy)).unwrap();
    let t = db.table("t").unwrap();
    assert_eq!(value(&db, &t, 1), Some(100), "the held commit survived");
    drop(db);
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&copy);
}

/// Transaction Healing's false-invalidation check (thesis §3.4.5, `cc/healing.rs`): a call
/// reads `dst` of its client and reads and writes `bal` of its source account; between its
/// read phase and its commit another transaction runs `concurrent`. Returns the call's
/// results, the final row of client 1 and of accounts 1 to 3 (`bal, visits`), and the heals
/// and false invalidations; asserts that nothing aborted.
/// Calls procedure `name` with (1, 10) on `db`; at `at` in its first commit another thread
/// runs `concurrent` to its end before the call goes on. Returns the call's results.
fn call_beside(db: &Database, name: &str, at: Pause, concurrent: &str) -> Vec<Value> {
    let p = db.procedure(name).unwrap();
    let fired = std::rc::Rc::new(std::cell::Cell::new(false));
    let once = fired.clone();
    let out = std::thread::scope(|sc| {
        let (go, go_rx) = channel::<()>();
        let (done, done_rx) = channel::<()>();
        let other = sc.spawn(move || {
            go_rx.recv_timeout(WAIT).unwrap();
            crate::sql::Session::new(db).execute(concurrent).unwrap();
            done.send(()).unwrap();
        });
        set_pause(at, move || {
            if !once.replace(true) {
                go.send(()).unwrap();
                done_rx.recv_timeout(WAIT).unwrap();
            }
        });
        let out = p.call(db, &[1i64.into(), 10i64.into()]).unwrap();
        clear_pause();
        other.join().unwrap();
        out
    });
    assert!(fired.get());
    out
}

fn transfer_beside(check: bool, concurrent: &str) -> (Vec<Value>, String, Vec<String>, u64, u64) {
    let (out, client, accts, st) = transfer_beside_with(
        Config::new()
            .protocol(crate::Protocol::Healing)
            .column_check(check),
        concurrent,
    );
    (out, client, accts, st.heals, st.false_invalidations)
}

/// `transfer_beside` under `config` (single-version storage added), returning the stats.
fn transfer_beside_with(
    config: Config,
    concurrent: &str,
) -> (Vec<Value>, String, Vec<String>, crate::Stats) {
    let db = transfer_db(config);
    let out = call_beside(&db, "transfer", Pause::SingleVersionCommit, concurrent);
    let row = |q: &str| format!("{:?}", crate::sql::Session::new(&db).execute(q).unwrap());
    let client = row("SELECT dst, note FROM clients WHERE id = 1");
    let accts = (1..=3)
        .map(|i| row(&format!("SELECT bal, visits FROM acct WHERE id = {i}")))
        .collect();
    let st = db.stats();
    assert_eq!(st.aborted.iter().sum::<u64>(), 0, "{:?}", st.aborted);
    (out, client, accts, st)
}

/// The database of `transfer_beside`: clients 1 (paying to account 2) and accounts 1-3,
/// and procedure `transfer`.
fn transfer_db(config: Config) -> Database {
    let db = Database::open(config.version_storage(VersionStorage::SingleVersion)).unwrap();
    let mut s = crate::sql::Session::new(&db);
    s.execute(
        "CREATE TABLE clients (id INT PRIMARY KEY, dst INT, note INT); \
         CREATE TABLE acct (id INT PRIMARY KEY, bal INT, visits INT); \
         INSERT INTO clients VALUES (1, 2, 0); \
         INSERT INTO acct VALUES (1, 100, 0); INSERT INTO acct VALUES (2, 0, 0); \
         INSERT INTO acct VALUES (3, 0, 0); \
         CREATE PROCEDURE transfer(src INT, amount INT) AS $$ \
           DECLARE d INT; b INT; \
           BEGIN \
             SELECT dst INTO d FROM clients WHERE id = src; \
             SELECT bal INTO b FROM acct WHERE id = src; \
             UPDATE acct SET bal = bal - amount WHERE id = src; \
             UPDATE acct SET bal = bal + amount WHERE id = d; \
             RETURN d, b; \
           END $$;",
    )
    .unwrap();
    drop(s);
    db
}

/// A slot records the access cache only in the `RECORD_WINDOW` healable calls after its
/// last heal (and its first ones): after that many quiet calls, a heal finds nothing cached
/// (no cache hit, no UPDATE kept; the same outcome as with the cache off); the calls after
/// that heal record again, so the next heal reaches its rows through the cache and keeps
/// the unchanged UPDATE. (The cache is off by default: on here.)
#[test]
fn healing_records_the_access_cache_only_in_the_calls_after_a_heal() {
    let db = transfer_db(
        Config::new()
            .protocol(crate::Protocol::Healing)
            .heal_access_cache(true),
    );
    let p = db.procedure("transfer").unwrap();
    for _ in 0..crate::cc::healing::RECORD_WINDOW {
        p.call(&db, &[1i64.into(), 0i64.into()]).unwrap();
    }
    let moved = "UPDATE clients SET dst = 3 WHERE id = 1";
    let out = call_beside(&db, "transfer", Pause::SingleVersionCommit, moved);
    assert_eq!(out, vec![Value::Int(3), Value::Int(100)]);
    let st = db.stats();
    assert_eq!(st.heals, 1);
    assert_eq!(
        (st.heal_cache_hits, st.heal_ops_reused),
        (0, 0),
        "nothing recorded"
    );
    let back = "UPDATE clients SET dst = 2 WHERE id = 1";
    let out = call_beside(&db, "transfer", Pause::SingleVersionCommit, back);
    assert_eq!(out, vec![Value::Int(2), Value::Int(90)]);
    let st = db.stats();
    assert_eq!(st.heals, 2);
    assert_eq!((st.heal_cache_hits, st.heal_index_lookups), (2, 1));
    assert_eq!((st.heal_ops_reused, st.heal_ops_rerun), (1, 1));
}

/// A concurrent commit that changes only columns the call neither reads nor writes
/// (`note`, `visits`) is a false invalidation: no heal, and the call's write to account 1
/// is rebased on the newer record, so `visits` survives beside the new `bal`. With the check
/// off the same run heals once, with the same outcome.
#[test]
fn healing_takes_a_change_to_columns_the_call_does_not_use_as_no_invalidation() {
    let concurrent = "UPDATE clients SET note = 7 WHERE id = 1; \
                      UPDATE acct SET visits = visits + 1 WHERE id = 1";
    for check in [true, false] {
        let (out, client, accts, heals, fi) = transfer_beside(check, concurrent);
        assert_eq!(out, vec![Value::Int(2), Value::Int(100)], "check {check}");
        assert!(client.contains("Int(2), Int(7)"), "check {check}: {client}");
        assert!(
            accts[0].contains("Int(90), Int(1)"),
            "check {check}: {accts:?}"
        );
        assert!(
            accts[1].contains("Int(10), Int(0)"),
            "check {check}: {accts:?}"
        );
        if check {
            // The client row read, account 1 read, account 1 written.
            assert_eq!((heals, fi), (0, 3), "check {check}");
        } else {
            assert_eq!((heals, fi), (1, 0), "check {check}");
        }
    }
}

/// `mvocc`'s column check (`cc/mvocc.rs`): a call reads `clients.dst` and `acct.bal` and
/// writes `acct.bal`; `concurrent` commits on the `clients` row before the call draws its
/// end timestamp. Returns the call's results, the client row, and the database's
/// read-validation aborts and false invalidations.
fn mvocc_call_beside(check: bool, concurrent: &str) -> (Vec<Value>, String, u64, u64) {
    let db = Database::open(
        Config::new()
            .protocol(crate::Protocol::Mvocc)
            .column_check(check),
    )
    .unwrap();
    let mut s = crate::sql::Session::new(&db);
    s.execute(
        "CREATE TABLE clients (id INT PRIMARY KEY, dst INT, note INT); \
         CREATE TABLE acct (id INT PRIMARY KEY, bal INT); \
         INSERT INTO clients VALUES (1, 2, 0); INSERT INTO acct VALUES (1, 100); \
         CREATE PROCEDURE debit(src INT, amount INT) AS $$ \
           DECLARE d INT; b INT; \
           BEGIN \
             SELECT dst INTO d FROM clients WHERE id = src; \
             SELECT bal INTO b FROM acct WHERE id = src; \
             UPDATE acct SET bal = bal - amount WHERE id = src; \
             RETURN d, b; \
           END $$;",
    )
    .unwrap();
    let out = call_beside(&db, "debit", Pause::MultiVersionCommit, concurrent);
    let client = format!(
        "{:?}",
        crate::sql::Session::new(&db)
            .execute("SELECT dst, note FROM clients WHERE id = 1")
            .unwrap()
    );
    let st = db.stats();
    let rv = st.aborted[crate::error::AbortReason::ReadValidation.index()];
    assert_eq!(st.aborted.iter().sum::<u64>(), rv, "{:?}", st.aborted);
    (out, client, rv, st.false_invalidations)
}

/// A commit that changes only a column the call does not read (`note`) leaves the call's read
/// of the row valid under the column check: no abort, one false invalidation. With the check
/// off the same read fails validation once (Hekaton's version check) and the retry commits.
#[test]
fn mvocc_column_check_keeps_a_read_whose_row_changed_only_elsewhere() {
    for check in [true, false] {
        let (out, client, rv, fi) =
            mvocc_call_beside(check, "UPDATE clients SET note = 7 WHERE id = 1");
        assert_eq!(out, vec![Value::Int(2), Value::Int(100)], "check {check}");
        assert!(client.contains("Int(2), Int(7)"), "check {check}: {client}");
        assert_eq!(
            (rv, fi),
            if check { (0, 1) } else { (1, 0) },
            "check {check}"
        );
    }
}

/// A change to a column the call reads still fails read validation under the column check,
/// and the retry reads the new value.
#[test]
fn mvocc_column_check_fails_a_read_whose_column_changed() {
    let (out, _, rv, fi) = mvocc_call_beside(true, "UPDATE clients SET dst = 3 WHERE id = 1");
    assert_eq!(out, vec![Value::Int(3), Value::Int(100)]);
    assert_eq!((rv, fi), (1, 0));
}

/// The column check's masks belong to the procedure call whose commit set them: a SQL
/// transaction the same thread runs next (on the same slot) has none, and its read of a row
/// replaced in a column the call did not read still fails validation.
#[test]
fn mvocc_column_check_leaves_statements_outside_a_procedure_to_version_validation() {
    // (A commit that writes a read column's value back unchanged leaves the read valid.)
    let (_, _, rv, fi) = mvocc_call_beside(true, "UPDATE clients SET dst = 2 WHERE id = 1");
    assert_eq!((rv, fi), (0, 1));
    let db = Database::open(Config::new().protocol(crate::Protocol::Mvocc)).unwrap();
    let mut s = crate::sql::Session::new(&db);
    s.execute(
        "CREATE TABLE clients (id INT PRIMARY KEY, dst INT, note INT); \
         CREATE TABLE acct (id INT PRIMARY KEY, bal INT); \
         INSERT INTO clients VALUES (1, 2, 0); INSERT INTO acct VALUES (1, 100); \
         CREATE PROCEDURE peek(src INT) AS $$ \
           DECLARE d INT; \
           BEGIN \
             SELECT dst INTO d FROM clients WHERE id = src; \
             UPDATE acct SET bal = bal + 1 WHERE id = src; \
             RETURN d; \
           END $$;",
    )
    .unwrap();
    let p = db.procedure("peek").unwrap();
    p.call(&db, &[1i64.into()]).unwrap();
    s.execute("BEGIN; SELECT note FROM clients WHERE id = 1; UPDATE acct SET bal = 0 WHERE id = 1")
        .unwrap();
    std::thread::scope(|sc| {
        sc.spawn(|| {
            crate::sql::Session::new(&db)
                .execute("UPDATE clients SET note = 5 WHERE id = 1")
                .unwrap()
        })
        .join()
        .unwrap();
    });
    let err = s.execute("COMMIT").unwrap_err();
    assert!(
        matches!(
            err,
            Error::SerializationFailure(crate::error::AbortReason::ReadValidation)
        ),
        "{err:?}"
    );
    assert_eq!(db.stats().false_invalidations, 0);
}

/// A change to a column the call reads is a real invalidation: the call heals.
#[test]
fn healing_heals_a_change_to_a_column_the_call_reads() {
    let (out, _, accts, heals, _) = transfer_beside(true, "UPDATE acct SET bal = 50 WHERE id = 1");
    assert_eq!(out, vec![Value::Int(2), Value::Int(50)]);
    assert!(accts[0].contains("Int(40), Int(0)"), "{accts:?}");
    assert_eq!(heals, 1);
}

/// Thesis Fig. 3.5 under `healing`: a transfer reads the client's destination account, then
/// moves money to it. Between its read phase and its commit another transaction changes the
/// destination. Validation finds the read stale and heals the call instead of aborting it:
/// the money goes to the new destination, the call returns the healed values, and the
/// transaction commits at its first attempt with one heal.
#[test]
fn healing_moves_a_transfer_to_the_destination_a_concurrent_commit_set() {
    let (out, _, accts, heals, _) =
        transfer_beside(true, "UPDATE clients SET dst = 3 WHERE id = 1");
    assert_eq!(
        out,
        vec![Value::Int(3), Value::Int(100)],
        "the healed results"
    );
    for (i, want) in ["Int(90)", "Int(0)", "Int(10)"].iter().enumerate() {
        assert!(accts[i].contains(want), "account {}: {accts:?}", i + 1);
    }
    assert_eq!(heals, 1, "one heal");
}

/// The access cache (thesis §3.4.1, `cc::healing::AccessCache` and `Memo`): the transfer's
/// first run reads client 1 and account 1, and updates account 1 and account 2 (the client's
/// `dst`). Its heal after the destination moved to 3 reads client 1 and account 1 again,
/// both found through the cache (no index lookup), takes the update of account 1 as done
/// (same inputs, row unchanged: its buffered version kept, nothing looked up or built) and
/// runs the update of account `d` again (its input `d` changed; account 3 is looked up in
/// the index) — thesis Fig. 3.5's restoration of what depends on the client row. With the
/// cache off the heal runs every operation and looks every key up, and the outcome is the
/// same.
#[test]
fn healing_reaches_the_rows_of_unchanged_keys_through_the_access_cache() {
    let config = |on: bool| {
        Config::new()
            .protocol(crate::Protocol::Healing)
            .heal_access_cache(on)
    };
    let moved = "UPDATE clients SET dst = 3 WHERE id = 1";
    let (out, client, accts, st) = transfer_beside_with(config(true), moved);
    assert_eq!(st.heals, 1);
    // The client row, only read, is left unlocked and found stale after the accounts'
    // locks: the commit takes every lock in order, and heals there.
    assert_eq!(st.heal_relocks, 1);
    assert_eq!((st.heal_cache_hits, st.heal_index_lookups), (2, 1));
    assert_eq!((st.heal_ops_reused, st.heal_ops_rerun), (1, 1));
    let (out_off, client_off, accts_off, st_off) = transfer_beside_with(config(false), moved);
    assert_eq!(st_off.heals, 1);
    assert_eq!((st_off.heal_cache_hits, st_off.heal_index_lookups), (0, 0));
    assert_eq!((st_off.heal_ops_reused, st_off.heal_ops_rerun), (0, 0));
    assert_eq!((out, client, accts), (out_off, client_off, accts_off));
    // Outside `healing` the switch is refused by name.
    let err = Database::open(
        Config::new()
            .protocol(crate::Protocol::Occ)
            .heal_access_cache(true),
    )
    .err()
    .expect("refused");
    assert!(format!("{err}").contains("access cache"), "{err}");
}

/// The memo's other half: a concurrent commit changes account 1's balance, which the
/// transfer reads (`b`) and updates. The heal reads it again and runs its update again (the
/// row changed), and takes the update of account 2 as done (same inputs, row unchanged):
/// the result and the balances are those of a run after the concurrent commit, as with the
/// cache off. (A reuse that ignored the changed row would keep the first run's new balance
/// of account 1, 90, and lose the concurrent write; one that ignored a changed input
/// would, in the test above, pay account 2 instead of 3.)
#[test]
fn healing_runs_again_only_the_operations_a_changed_row_reaches() {
    let config = |on: bool| {
        Config::new()
            .protocol(crate::Protocol::Healing)
            .heal_access_cache(on)
            .column_check(false)
    };
    let paid = "UPDATE acct SET bal = 50 WHERE id = 1";
    let (out, client, accts, st) = transfer_beside_with(config(true), paid);
    assert_eq!(out, vec![Value::Int(2), Value::Int(50)]);
    // Account 1 is written: its lock finds it stale and heals; the client row, only read,
    // passes the lock-free check.
    assert_eq!(st.heal_relocks, 0);
    for (i, want) in ["Int(40)", "Int(10)", "Int(0)"].iter().enumerate() {
        assert!(accts[i].contains(want), "account {}: {accts:?}", i + 1);
    }
    assert_eq!(st.heals, 1);
    assert_eq!((st.heal_ops_reused, st.heal_ops_rerun), (1, 1));
    let (out_off, client_off, accts_off, st_off) = transfer_beside_with(config(false), paid);
    assert_eq!((st_off.heals, st_off.heal_ops_reused), (1, 0));
    assert_eq!((out, client, accts), (out_off, client_off, accts_off));
}

/// A database under `healing` (single-version storage) after `sql`.
fn healing_db(sql: &str) -> Database {
    let db = Database::open(
        Config::new()
            .protocol(crate::Protocol::Healing)
            .version_storage(VersionStorage::SingleVersion),
    )
    .unwrap();
    crate::sql::Session::new(&db).execute(sql).unwrap();
    db
}

/// An increment-only column (`TableCols::incr`: set only as `c = c + e`, read nowhere else)
/// changed by a concurrent commit is taken as a false invalidation: the call's write adds its
/// delta to the current value instead of healing. `deposit` adds to `bal` and reads
/// `visits`; another commit adds 5 to `bal` before the call's commit: no heal, both deposits
/// kept (100 + 5 + 10). `deposit_seen` also reads `bal` (a plain read): it heals, with the
/// same balance. With the column check off `deposit` heals too.
#[test]
fn healing_adds_an_increment_to_the_current_value_instead_of_healing() {
    let run = |name: &str, check: bool| {
        let db = Database::open(
            Config::new()
                .protocol(crate::Protocol::Healing)
                .version_storage(VersionStorage::SingleVersion)
                .column_check(check),
        )
        .unwrap();
        let mut s = crate::sql::Session::new(&db);
        s.execute(
            "CREATE TABLE acct (id INT PRIMARY KEY, bal INT, visits INT); \
             INSERT INTO acct VALUES (1, 100, 7);",
        )
        .unwrap();
        // `deposit` returns `visits`, `deposit_seen` the balance it wrote.
        for (proc, col) in [("deposit", "visits"), ("deposit_seen", "bal")] {
            s.execute(&format!(
                "CREATE PROCEDURE {proc}(src INT, amount INT) AS $$ \
                   DECLARE v INT; \
                   BEGIN \
                     UPDATE acct SET bal = bal + amount WHERE id = src; \
                     SELECT {col} INTO v FROM acct WHERE id = src; \
                     RETURN v; \
                   END $$;"
            ))
            .unwrap();
        }
        drop(s);
        let other = "UPDATE acct SET bal = bal + 5 WHERE id = 1";
        let out = call_beside(&db, name, Pause::SingleVersionCommit, other);
        let row = format!(
            "{:?}",
            crate::sql::Session::new(&db)
                .execute("SELECT bal, visits FROM acct WHERE id = 1")
                .unwrap()
        );
        assert!(row.contains("Int(115), Int(7)"), "{name} {check}: {row}");
        let st = db.stats();
        assert_eq!(st.aborted.iter().sum::<u64>(), 0, "{:?}", st.aborted);
        (out, st.heals, st.false_invalidations)
    };
    let (out, heals, fi) = run("deposit", true);
    assert_eq!(out, vec![Value::Int(7)]);
    // The row's read and its write.
    assert_eq!((heals, fi), (0, 2));
    assert_eq!(run("deposit", false).1, 1);
    let (out, heals, _) = run("deposit_seen", true);
    assert_eq!(out, vec![Value::Int(115)]);
    assert_eq!(heals, 1);
}

/// Transaction Healing's false-invalidation check on a blind column (`TableCols::blind`,
/// thesis §3.4.5 compares the columns a call reads): `deliver` reads `amt` of order 1 and
/// sets its `carrier` to 10, reading no `carrier`; another commit sets that `carrier` to 9
/// before the call's commit: no heal, the call's carrier stands (9 was overwritten, as in
/// the serial order other → call). `deliver_seen` reads `carrier` too: it heals. `deliver_two`
/// also sets `amt` of order 2 without `carrier`, so `carrier` is not blind in it: the other
/// commit sets order 2's `carrier`, the call heals and keeps that 9 (a rule taking any
/// statement's SET, not every one's, would write order 2's stale carrier back).
#[test]
fn healing_keeps_a_blind_write_over_a_concurrent_one_instead_of_healing() {
    let run = |name: &str, other: &str| {
        let db = healing_db(
            "CREATE TABLE ord (id INT PRIMARY KEY, carrier INT, amt INT); \
             INSERT INTO ord VALUES (1, 0, 30); INSERT INTO ord VALUES (2, 0, 40); \
             CREATE PROCEDURE deliver(o INT, c INT) AS $$ DECLARE v INT; BEGIN \
               SELECT amt INTO v FROM ord WHERE id = o; \
               UPDATE ord SET carrier = c WHERE id = o; RETURN v; END $$; \
             CREATE PROCEDURE deliver_seen(o INT, c INT) AS $$ DECLARE v INT; BEGIN \
               SELECT amt + carrier INTO v FROM ord WHERE id = o; \
               UPDATE ord SET carrier = c WHERE id = o; RETURN v; END $$; \
             CREATE PROCEDURE deliver_two(o INT, c INT) AS $$ DECLARE v INT; BEGIN \
               SELECT amt INTO v FROM ord WHERE id = o + 1; \
               UPDATE ord SET carrier = c WHERE id = o; \
               UPDATE ord SET amt = 41 WHERE id = o + 1; RETURN v; END $$;",
        );
        let out = call_beside(&db, name, Pause::SingleVersionCommit, other);
        let rows = format!(
            "{:?}",
            crate::sql::Session::new(&db)
                .execute("SELECT id, carrier, amt FROM ord ORDER BY id")
                .unwrap()
        );
        let st = db.stats();
        assert_eq!(st.aborted.iter().sum::<u64>(), 0, "{:?}", st.aborted);
        (out, rows, st.heals, st.false_invalidations)
    };
    let one = "UPDATE ord SET carrier = 9 WHERE id = 1";
    let (out, rows, heals, fi) = run("deliver", one);
    assert_eq!(out, vec![Value::Int(30)]);
    assert!(rows.contains("Int(1), Int(10), Int(30)"), "{rows}");
    // The row's read and its write.
    assert_eq!((heals, fi), (0, 2));
    let (out, rows, heals, _) = run("deliver_seen", one);
    assert_eq!(out, vec![Value::Int(39)]);
    assert!(rows.contains("Int(1), Int(10), Int(30)"), "{rows}");
    assert_eq!(heals, 1);
    let (out, rows, heals, _) = run("deliver_two", "UPDATE ord SET carrier = 9 WHERE id = 2");
    assert_eq!(out, vec![Value::Int(40)]);
    assert!(
        rows.contains("Int(1), Int(10), Int(30)") && rows.contains("Int(2), Int(9), Int(41)"),
        "{rows}"
    );
    assert_eq!(heals, 1);
}

/// [M] A healable call's commit locks only the rows it writes and validates every read
/// after that (`cc::healing::check_deferred`), a read of a row it writes too. `bump` reads
/// account 1's balance, and another commit sets it to 50 right after the read found its
/// record (`Pause::Found`), before the call's UPDATE of the row: the write replaces the
/// new record, so its lock succeeds, but the read is stale. The commit relocks and heals:
/// the result and the balance are the ones of the serial order other → call (with the read
/// left unvalidated because the call's write holds the row's lock, 110 stays: a lost
/// update; checked by removing both read checks of step 3).
#[test]
fn healing_heals_a_read_of_a_row_it_writes_that_changed_before_the_write() {
    let db = healing_db(
        "CREATE TABLE acct (id INT PRIMARY KEY, bal INT); INSERT INTO acct VALUES (1, 100); \
         CREATE PROCEDURE bump(src INT, amount INT) AS $$ DECLARE b INT; BEGIN \
           SELECT bal INTO b FROM acct WHERE id = src; \
           UPDATE acct SET bal = b + amount WHERE id = src; RETURN b; END $$;",
    );
    let out = call_beside(
        &db,
        "bump",
        Pause::Found,
        "UPDATE acct SET bal = 50 WHERE id = 1",
    );
    assert_eq!(out, vec![Value::Int(50)]);
    let bal = format!(
        "{:?}",
        crate::sql::Session::new(&db)
            .execute("SELECT bal FROM acct WHERE id = 1")
            .unwrap()
    );
    assert!(bal.contains("Int(60)"), "{bal}");
    let st = db.stats();
    assert_eq!((st.heals, st.heal_relocks), (1, 1));
    assert_eq!(st.aborted.iter().sum::<u64>(), 0, "{:?}", st.aborted);
}

/// [M] A healable call that writes nothing validates its reads at commit as OCC validates
/// a read-only transaction, without a lock; only when that finds a read stale does it take
/// the thesis's ordered locks and heal. Quiet: no lock taken (`record_rmw` counts lock
/// attempts), no heal. With a commit to the account it read between its read phase and its
/// commit: one relock, one heal, and the healed result sees the new balance. (Before, every
/// row a read-only call read was locked and unlocked at its commit.)
#[test]
fn healing_validates_a_read_only_call_without_locks_and_heals_it_when_stale() {
    let db = healing_db(
        "CREATE TABLE clients (id INT PRIMARY KEY, dst INT); \
             CREATE TABLE acct (id INT PRIMARY KEY, bal INT); \
             INSERT INTO clients VALUES (1, 2); INSERT INTO acct VALUES (1, 100); \
             CREATE PROCEDURE peek(src INT, amount INT) AS $$ \
               DECLARE d INT; b INT; \
               BEGIN \
                 SELECT dst INTO d FROM clients WHERE id = src; \
                 SELECT bal INTO b FROM acct WHERE id = src; \
                 RETURN d, b + amount; \
               END $$;",
    );
    let before = db.stats();
    let out = (db.procedure("peek").unwrap())
        .call(&db, &[1i64.into(), 10i64.into()])
        .unwrap();
    assert_eq!(out, vec![Value::Int(2), Value::Int(110)]);
    let st = db.stats();
    assert_eq!(st.record_rmw - before.record_rmw, 0, "no lock taken");
    assert_eq!((st.heals, st.heal_relocks), (0, 0));
    let out = call_beside(
        &db,
        "peek",
        Pause::SingleVersionCommit,
        "UPDATE acct SET bal = 50 WHERE id = 1",
    );
    assert_eq!(
        out,
        vec![Value::Int(2), Value::Int(60)],
        "the healed result"
    );
    let after = db.stats();
    assert_eq!((after.heals, after.heal_relocks), (1, 1));
    // The UPDATE's lock on account 1, then the call's ordered locks on both rows it read.
    assert_eq!(after.record_rmw - st.record_rmw, 3);
    assert_eq!(after.aborted.iter().sum::<u64>(), 0, "{:?}", after.aborted);
}

/// Spec A.4 R4 (thesis §3.4.7, the first insert scenario): healable call `name` reads key 5
/// (by a SELECT, or by an UPDATE) while another transaction is still inserting it. The read
/// takes the row as absent — no wait, no abort — and records the key it missed. The inserter
/// then commits (`commit`) or aborts before the call's commit: a committed row makes the
/// commit's re-check of the key fail and the call heal, seeing the row; an aborted one
/// leaves the call's first run standing. Returns the call's result followed by what a
/// query of row 5 gives afterwards (as text), and the database's stats.
fn call_past_an_uncommitted_insert(name: &str, commit: bool) -> (Vec<Value>, crate::Stats) {
    let db = healing_db(
        "CREATE TABLE acct (id INT PRIMARY KEY, bal INT); \
             INSERT INTO acct VALUES (1, 100); \
             CREATE PROCEDURE peek(k INT) AS $$ \
               DECLARE b INT; \
               BEGIN \
                 SELECT bal INTO b FROM acct WHERE id = k; \
                 IF NOT found THEN b := -1; END IF; \
                 UPDATE acct SET bal = bal + 1 WHERE id = 1; \
                 RETURN b; \
               END $$; \
             CREATE PROCEDURE bump(k INT) AS $$ \
               DECLARE b INT; \
               BEGIN \
                 UPDATE acct SET bal = bal + 1 WHERE id = k; \
                 IF found THEN b := 1; ELSE b := 0; END IF; \
                 UPDATE acct SET bal = bal + 1 WHERE id = 1; \
                 RETURN b; \
               END $$; \
             CREATE PROCEDURE total(k INT) AS $$ \
               DECLARE b INT; \
               BEGIN \
                 SELECT count(*) INTO b FROM acct WHERE id >= k - 1 AND id <= k + 1; \
                 UPDATE acct SET bal = bal + 1 WHERE id = 1; \
                 RETURN b; \
               END $$;",
    );
    let t = db.table("acct").unwrap();
    let p = db.procedure(name).unwrap();
    let fired = std::rc::Rc::new(std::cell::Cell::new(false));
    let once = fired.clone();
    let out = std::thread::scope(|sc| {
        let (inserted, inserted_rx) = channel::<()>();
        let (decide, decide_rx) = channel::<()>();
        let (done, done_rx) = channel::<()>();
        let (db, t) = (&db, &t);
        let inserter = sc.spawn(move || {
            let mut tx = db.begin().unwrap();
            tx.insert(t, &[Value::Int(5), Value::Int(50)]).unwrap();
            inserted.send(()).unwrap();
            decide_rx.recv_timeout(WAIT).unwrap();
            if commit {
                tx.commit().unwrap();
            } else {
                tx.abort();
            }
            done.send(()).unwrap();
        });
        inserted_rx.recv_timeout(WAIT).unwrap();
        set_pause(Pause::SingleVersionCommit, move || {
            if !once.replace(true) {
                decide.send(()).unwrap();
                done_rx.recv_timeout(WAIT).unwrap();
            }
        });
        // One attempt, not `call`'s retries: an abort is the failure this test looks for.
        let mut f = p.bound_frame(&[5i64.into()]).unwrap();
        let out = p.execute_commit(db.begin().unwrap(), &mut f);
        clear_pause();
        inserter.join().unwrap();
        out.map(|(out, _)| out)
    });
    assert!(fired.get(), "the call reached its commit");
    let mut out = out.expect("the call commits at its first attempt");
    let five = crate::sql::Session::new(&db)
        .execute("SELECT bal FROM acct WHERE id = 5")
        .unwrap();
    out.push(Value::Str(format!("{five:?}")));
    (out, db.stats())
}

#[test]
fn healing_reads_past_an_uncommitted_insert_and_heals_when_it_commits() {
    // A point read (`peek` returns the balance it read, -1 for none), an UPDATE's read of
    // its row (`bump` returns whether it found the row, which it adds 1 to), and a range
    // scan (`total` counts the rows of keys 4 to 6; the insert changes no leaf after the
    // scan read it, so only the entry the scan met without a row sends the commit's
    // re-check past the leaves to a re-scan, `ScanRecord::nodes`).
    for (name, healed, absent) in [("peek", 50, -1), ("bump", 1, 0), ("total", 1, 0)] {
        let (out, st) = call_past_an_uncommitted_insert(name, true);
        assert_eq!(
            out[0],
            Value::Int(healed),
            "{name}: the healed run saw the committed row"
        );
        let five = if name == "bump" { "51" } else { "50" };
        assert!(
            matches!(&out[1], Value::Str(r) if r.contains(&format!("Int({five})"))),
            "{name}: {out:?}"
        );
        assert_eq!(st.heal_reads_past_inserts, 1, "{name}");
        assert_eq!(st.heals, 1, "{name}");
        assert_eq!(
            st.aborted.iter().sum::<u64>(),
            0,
            "{name}: {:?}",
            st.aborted
        );
        let (out, st) = call_past_an_uncommitted_insert(name, false);
        assert_eq!(
            out[0],
            Value::Int(absent),
            "{name}: the insert aborted: no row"
        );
        assert_eq!(st.heal_reads_past_inserts, 1, "{name}");
        assert_eq!(st.heals, 0, "{name}");
        // The inserter's own abort is the only one.
        assert_eq!(
            st.aborted.iter().sum::<u64>(),
            1,
            "{name}: {:?}",
            st.aborted
        );
    }
}

/// MVTO (thesis §5.3.1): T1 finds version v0 of row 1 visible; before its read-ts lands,
/// T2 (an older timestamp) locks v0 and writes, T4 (a newer one) reads v0, raises its read-ts
/// past T1's and aborts on T2's lock, and T2 commits. T1's read must now fail: T2 serializes
/// before it, so T1 must read T2's version. It used to skip its check of v0's End field
/// because the read-ts was already past its timestamp, read v0, and later write over T2's
/// version: a lost update (a G-single the history checker found on the bank workload).
#[test]
fn mvto_read_fails_when_an_older_writer_committed_over_it_before_its_read_ts_landed() {
    let (db, t) = kv_db(Config::new().protocol(crate::Protocol::Mvto), 1);
    let (t2_begun, t2_begun_rx) = channel::<()>();
    let (t1_begun, t1_begun_rx) = channel::<()>();
    let (t4_begun, t4_begun_rx) = channel::<()>();
    let (to_t2, t2_rx) = channel::<&str>();
    let (to_t4, t4_rx) = channel::<()>();
    let (done, done_rx) = channel::<&str>();
    let done2 = done.clone();
    std::thread::scope(|s| {
        let (db, t) = (&db, &t);
        let t2 = s.spawn(move || {
            let mut tx = db.begin().unwrap();
            t2_begun.send(()).unwrap();
            assert_eq!(t2_rx.recv_timeout(WAIT).unwrap(), "write");
            tx.update(t, &1i64, &[(1, 100i64)]).unwrap();
            done.send("written").unwrap();
            assert_eq!(t2_rx.recv_timeout(WAIT).unwrap(), "commit");
            tx.commit().unwrap();
            done.send("committed").unwrap();
        });
        let t4 = s.spawn(move || {
            t1_begun_rx.recv_timeout(WAIT).unwrap();
            let mut tx = db.begin().unwrap();
            t4_begun.send(()).unwrap();
            t4_rx.recv_timeout(WAIT).unwrap();
            let r = tx.get_with(t, &1i64, |r| r.i64(1).unwrap());
            assert_eq!(
                r,
                Err(Error::SerializationFailure(AbortReason::TimestampOrder)),
                "T4 met T2's lock"
            );
            done2.send("read").unwrap();
        });
        t2_begun_rx.recv_timeout(WAIT).unwrap();
        let mut tx = db.begin().unwrap();
        t1_begun.send(()).unwrap();
        t4_begun_rx.recv_timeout(WAIT).unwrap();
        let (to_t2, to_t4) = (to_t2.clone(), to_t4.clone());
        let mut fired = false;
        set_pause(Pause::Found, move || {
            if std::mem::replace(&mut fired, true) {
                return;
            }
            to_t2.send("write").unwrap();
            assert_eq!(done_rx.recv_timeout(WAIT).unwrap(), "written");
            to_t4.send(()).unwrap();
            assert_eq!(done_rx.recv_timeout(WAIT).unwrap(), "read");
            to_t2.send("commit").unwrap();
            assert_eq!(done_rx.recv_timeout(WAIT).unwrap(), "committed");
        });
        let r = tx.get_with(t, &1i64, |r| r.i64(1).unwrap());
        clear_pause();
        assert_eq!(
            r,
            Err(Error::SerializationFailure(AbortReason::TimestampOrder)),
            "T1 must not read the version T2 (older) superseded"
        );
        t2.join().unwrap();
        t4.join().unwrap();
    });
    assert_eq!(value(&db, &t, 1), Some(100));
}

/// MVTO under `siro` storage and `dead-zone` GC: T1 (younger) finds version v0 of row 1 and,
/// before it reads the row, T2 (older) commits over v0, which then ends below T1's timestamp
/// and is dead at every read point. A GC pass cuts v0 from its chain, dropping its row (1st
/// prune), and T3's update (moving row 1 from g = 5 to 6) overwrites v0's slot. T1's read
/// must fail (T2 precedes it in timestamp order) without copying v0's row. Through a
/// secondary index it used to copy the slot (before the cut marked dropped rows: T3's row),
/// take the entry for a stale one (the key no longer matched) and go on as if row 1 had
/// never had g = 5; by primary key with history recording on, the recording copied the row
/// after the read had failed (in debug builds: the "read without a row" assertion).
#[test]
fn mvto_read_fails_without_copying_a_row_siro_dropped_under_it() {
    for (by_index, record) in [(true, false), (false, true)] {
        let db = Database::open(
            Config::new()
                .protocol(crate::Protocol::Mvto)
                .version_storage(VersionStorage::Siro)
                .gc(crate::GcPolicy::DeadZone)
                .gc_threads(1)
                .record_history(record),
        )
        .unwrap();
        let t = db
            .create_table(
                TableSchema::new("t")
                    .column("k", ColumnType::Int)
                    .column("v", ColumnType::Int)
                    .column("g", ColumnType::Int)
                    .primary_key(&["k"])
                    .index("by_g", &["g"], crate::IndexKind::Hash, false),
            )
            .unwrap();
        db.run(|tx| tx.insert(&t, &(1i64, 0i64, 5i64))).unwrap();
        let (t2_begun, t2_begun_rx) = channel::<()>();
        let (to_t2, t2_rx) = channel::<&str>();
        let (done, done_rx) = channel::<()>();
        let before = db.stats().siro_pruned_first;
        std::thread::scope(|s| {
            let (db, t) = (&db, &t);
            s.spawn(move || {
                let mut tx = db.begin().unwrap();
                t2_begun.send(()).unwrap();
                assert_eq!(t2_rx.recv_timeout(WAIT).unwrap(), "write");
                tx.update(t, &1i64, &[(1, 100i64)]).unwrap();
                tx.commit().unwrap();
                db.collect_garbage();
                db.run(|tx| tx.update(t, &1i64, &[(1, 200i64), (2, 6i64)]))
                    .unwrap();
                done.send(()).unwrap();
            });
            t2_begun_rx.recv_timeout(WAIT).unwrap();
            let mut tx = db.begin().unwrap();
            let mut fired = false;
            set_pause(Pause::Found, move || {
                if std::mem::replace(&mut fired, true) {
                    return;
                }
                to_t2.send("write").unwrap();
                done_rx.recv_timeout(WAIT).unwrap();
            });
            let r = if by_index {
                tx.get_by(t, 1, &5i64, |r| {
                    assert_eq!(r.i64(0).unwrap(), 1, "the row T1 reads is row 1");
                    true
                })
                .map(|n| n as i64)
            } else {
                tx.get_with(t, &1i64, |r| r.i64(1).unwrap())
                    .map(|v| v.unwrap_or(-1))
            };
            clear_pause();
            assert_eq!(
                r,
                Err(Error::SerializationFailure(AbortReason::TimestampOrder)),
                "T1 (by index: {by_index}) must not read the version T2 (older) superseded"
            );
        });
        assert!(
            db.stats().siro_pruned_first > before,
            "T3's update dropped v0's row (the case under test)"
        );
        assert_eq!(value(&db, &t, 1), Some(200));
    }
}

/// An insert into an ordered primary index of a table whose versions hold their rows goes to
/// the index first (`insert_keyed`, no lookup before it). A key already there must still
/// fail as a duplicate, a deleted row's key must revive the row, and the fresh tuple id each
/// of those made must go back to the slot's range: 300 duplicates later, the table has not
/// handed out 300 more ids. Under in-place storage (rows placed outside the versions) the
/// lookup comes first, with the same outcomes.
#[test]
fn inserts_of_existing_keys_into_an_ordered_primary_fail_without_using_tuple_ids() {
    for storage in [VersionStorage::AppendN2o, VersionStorage::TimeTravel] {
        let db = Database::open(Config::new().version_storage(storage)).unwrap();
        let t = ordered_kv_table(&db);
        for k in 1..=3i64 {
            db.run(|tx| tx.insert(&t, &(k, k))).unwrap();
        }
        for _ in 0..300 {
            let e = db.run(|tx| tx.insert(&t, &(2i64, 9i64))).unwrap_err();
            assert!(
                matches!(e, Error::DuplicateKey { .. }),
                "{storage:?}: {e:?}"
            );
        }
        assert_eq!(
            value(&db, &t, 2),
            Some(2),
            "{storage:?}: the row is unchanged"
        );
        db.run(|tx| tx.delete(&t, &2i64)).unwrap();
        db.run(|tx| tx.insert(&t, &(2i64, 7i64))).unwrap();
        assert_eq!(
            value(&db, &t, 2),
            Some(7),
            "{storage:?}: the deleted row revived"
        );
        db.run(|tx| tx.insert(&t, &(4i64, 4i64))).unwrap();
        assert_eq!(value(&db, &t, 4), Some(4));
        let rows = db
            .run(|tx| {
                tx.scan(
                    &t,
                    std::ops::Bound::<&i64>::Unbounded,
                    std::ops::Bound::Unbounded,
                    Default::default(),
                    |_| true,
                )
            })
            .unwrap();
        assert_eq!(rows, 4, "{storage:?}");
        if storage == VersionStorage::AppendN2o {
            assert!(
                t.tid_count() < 300,
                "{storage:?}: {} tuple ids handed out for 4 rows",
                t.tid_count()
            );
        }
    }
}

#[test]
fn scan_bounds_encode_prefixes_as_ranges_into_the_slot_buffers() {
    use std::ops::Bound::{self, Excluded, Included, Unbounded};
    let s = TableSchema::new("t")
        .column("a", ColumnType::Int)
        .column("b", ColumnType::Int)
        .primary_key(&["a", "b"])
        .build()
        .unwrap();
    let enc = |k: &[Value]| {
        let mut b = Vec::new();
        s.encode_key_prefix(0, &k, &mut b).unwrap();
        b
    };
    let owned = |b: Bound<&[u8]>| b.map(<[u8]>::to_vec);
    let bounds = |lo: Bound<&[Value]>, hi: Bound<&[Value]>| {
        // Stale bytes in the buffers must not leak into the bounds.
        let (mut l, mut h) = (vec![1u8; 20], vec![2u8; 3]);
        let (lk, hk) = super::encode_bounds(&s, 0, lo, hi, &mut l, &mut h).unwrap();
        (
            owned(super::bound_in(lk, &l)),
            owned(super::bound_in(hk, &h)),
        )
    };
    let five = [Value::Int(5)];
    let after_five = crate::index::prefix_end(&enc(&five)).unwrap();
    // A prefix: included from its first key, excluded past its last.
    assert_eq!(
        bounds(Included(&five), Included(&five)),
        (Included(enc(&five)), Excluded(after_five.clone()))
    );
    assert_eq!(
        bounds(Excluded(&five), Unbounded),
        (Included(after_five), Unbounded)
    );
    // A full primary key is a key, not a prefix.
    let full = [Value::Int(5), Value::Int(6)];
    assert_eq!(
        bounds(Excluded(&full), Excluded(&full)),
        (Excluded(enc(&full)), Excluded(enc(&full)))
    );
    assert_eq!(
        bounds(Included(&full), Included(&full)).1,
        Included(enc(&full))
    );
    // A prefix encoded as all 0xFF (i64::MAX) has no key past it: the low bound lies above
    // every key with it, the high bound is open.
    let max = [Value::Int(i64::MAX)];
    assert_eq!(enc(&max), vec![0xFF; 8]);
    assert_eq!(
        bounds(Excluded(&max), Included(&max)),
        (Excluded(vec![0xFF; 9]), Unbounded)
    );
    // A value the column cannot hold is an error, and the buffers stay usable.
    let (mut l, mut h) = (Vec::new(), Vec::new());
    let bad = [Value::from("x")];
    assert!(super::encode_bounds(&s, 0, Included(&bad[..]), Unbounded, &mut l, &mut h).is_err());
}

#[test]
fn after_its_end_a_transaction_reaches_buffers_of_its_own_not_the_slots() {
    let locals = super::SlotLocals::new(1);
    // SAFETY: nothing else uses slot 0 of `locals`.
    let mut l = unsafe { super::LocalRef::new(&locals, 0) };
    l.key_buf = vec![1];
    l.release();
    // What a failed operation puts back after its rollback ended the transaction.
    assert!(l.key_buf.is_empty());
    l.key_buf = vec![2];
    assert_eq!(l.key_buf, vec![2]);
    // SAFETY: `l` no longer reaches the slot's buffers.
    assert_eq!(unsafe { &(*locals.get(0)).key_buf }, &vec![1]);
}

/// A READ ONLY transaction under `mvocc` (Serializable) keeps no read or scan set: it writes
/// nothing, so its commit serializes it at its begin timestamp with no validation, and what
/// it kept would never be read. The same reads in a read-write transaction are kept, and so
/// are a READ ONLY one's under `silo`, whose commit validates them. Fails if `keeps_reads`
/// is always true.
#[test]
fn read_only_multi_version_transactions_keep_no_read_or_scan_set() {
    use crate::{Isolation, Protocol, TxnOptions};
    use std::ops::Bound;
    for (protocol, read_only, kept) in [
        (Protocol::Mvocc, false, true),
        (Protocol::Mvocc, true, false),
        (Protocol::Silo, true, true),
    ] {
        let mut config = Config::new().protocol(protocol);
        if protocol.single_version() {
            config = config.version_storage(VersionStorage::SingleVersion);
        }
        let db = Database::open(config).unwrap();
        let t = ordered_kv_table(&db);
        db.run(|tx| (0..5i64).try_for_each(|k| tx.insert(&t, &(k, k))))
            .unwrap();
        let opts = TxnOptions {
            isolation: Isolation::Serializable,
            read_only,
        };
        let mut tx = db.begin_with(opts).unwrap();
        let row = tx.get(&t, &1i64).unwrap().unwrap();
        let n = tx
            .scan(
                &t,
                Bound::Included(&0i64),
                Bound::Excluded(&3i64),
                Default::default(),
                |_| true,
            )
            .unwrap();
        assert_eq!(n, 3);
        let sets = (tx.st.sets.read_set.len(), tx.st.sets.scan_set.len());
        if kept {
            assert!(
                sets.0 >= 4 && sets.1 >= 1,
                "{protocol:?} read_only {read_only}: {sets:?}"
            );
        } else {
            assert_eq!(sets, (0, 0), "{protocol:?} read_only {read_only}");
        }
        // Another transaction updates the row read; the READ ONLY one under `mvocc` still
        // commits, having read the row as of its begin timestamp.
        if !kept {
            db.run(|w| w.update(&t, &1i64, &[(1, Value::Int(9))]))
                .unwrap();
            assert_eq!(row.get(1), Some(&Value::Int(1)));
        }
        tx.commit().unwrap();
    }
}

/// A prefetch of exactly the keys the last one in the same table took (a caller warming a
/// procedure call's keys, then the call's loop warming them again) does no second round of
/// lookups; any other key list, order or table does. Observed by marking the tuple id the
/// first prefetch found for key 1: only a prefetch that looks keys up again replaces it.
#[test]
fn a_prefetch_of_the_same_keys_again_looks_nothing_up() {
    let db = Database::open(Config::default()).unwrap();
    let t = kv_table(&db);
    for k in 1..=4i64 {
        db.run(|tx| tx.insert(&t, &(k, 10 * k))).unwrap();
    }
    let u = db
        .create_table(
            TableSchema::new("u")
                .column("k", ColumnType::Int)
                .column("v", ColumnType::Int)
                .primary_key(&["k"]),
        )
        .unwrap();
    db.run(|tx| tx.insert(&u, &(1i64, 0i64))).unwrap();
    const MARK: super::TupleId = super::TupleId::new(12_345);
    let marked = |tx: &super::Transaction<'_>| tx.local.prefetched.tids.first() == Some(&MARK);
    let mut tx = db.begin().unwrap();
    let again: [(&[i64], bool, &crate::TableRef); 5] = [
        (&[1, 2, 3], true, &t),
        (&[1, 2], false, &t),
        (&[1, 2, 4], false, &t),
        (&[2, 1, 3], false, &t),
        (&[1, 2, 3], false, &u),
    ];
    for (keys, repeat, table) in again {
        tx.prefetch(&t, &[1i64, 2, 3]).unwrap();
        tx.local.prefetched.tids[0] = MARK;
        tx.prefetch(table, keys).unwrap();
        assert_eq!(marked(&tx), repeat, "{keys:?} in {}", table.name());
        // Put the real id back (the mark would send key 1's reads to no row).
        tx.prefetch(&u, &[1i64]).unwrap();
    }
    // Reads after a repeated prefetch find every row, through the ids it kept.
    tx.prefetch(&t, &[1i64, 2, 3]).unwrap();
    tx.prefetch(&t, &[1i64, 2, 3]).unwrap();
    for k in 1..=3i64 {
        assert_eq!(
            tx.get_with(&t, &k, |r| r.i64(1).unwrap()).unwrap(),
            Some(10 * k)
        );
    }
    tx.commit().unwrap();
}

/// A scan whose range lies inside the last one recorded on the same index adds no scan
/// record (the outer record's re-check covers its keys), and a phantom inserted into the
/// inner range after both scans still fails the commit — under `mvocc` and `silo`. A range
/// reaching past the outer one keeps its own record.
#[test]
fn a_scan_inside_the_last_recorded_range_adds_no_record_and_its_phantoms_still_fail() {
    use crate::{Isolation, Protocol, TxnOptions};
    use std::ops::Bound;
    for protocol in [Protocol::Mvocc, Protocol::Silo] {
        let mut config = Config::new().protocol(protocol);
        if protocol.single_version() {
            config = config.version_storage(VersionStorage::SingleVersion);
        }
        let db = Database::open(config).unwrap();
        let t = ordered_kv_table(&db);
        for k in [1i64, 2, 4, 6, 8] {
            db.run(|tx| tx.insert(&t, &(k, k))).unwrap();
        }
        let scan = |tx: &mut super::Transaction<'_>, lo: i64, hi: i64| {
            tx.scan(
                &t,
                Bound::Included(&lo),
                Bound::Included(&hi),
                Default::default(),
                |_| true,
            )
            .unwrap()
        };
        let opts = TxnOptions {
            isolation: Isolation::Serializable,
            read_only: false,
        };
        let mut tx = db.begin_with(opts).unwrap();
        assert_eq!(scan(&mut tx, 1, 8), 5);
        assert_eq!(scan(&mut tx, 2, 6), 3);
        assert_eq!(
            tx.st.sets.scan_set.len(),
            1,
            "{protocol:?}: inner range kept"
        );
        assert_eq!(scan(&mut tx, 6, 9), 2);
        assert_eq!(
            tx.st.sets.scan_set.len(),
            2,
            "{protocol:?}: wider range dropped"
        );
        db.run(|w| w.insert(&t, &(3i64, 0i64))).unwrap();
        tx.update(&t, &1i64, &[(1, crate::Value::Int(10))]).unwrap();
        let e = tx.commit().unwrap_err();
        assert!(
            matches!(e, Error::SerializationFailure(AbortReason::Phantom)),
            "{protocol:?}: {e:?}"
        );
    }
}

/// `range_within` against brute force over one-byte keys: every pair of ranges with bounds
/// in 0..6 of each kind.
#[test]
fn range_within_agrees_with_brute_force() {
    use super::read::range_within;
    use std::ops::Bound;
    let keys: Vec<[u8; 1]> = (0u8..6).map(|k| [k]).collect();
    let mut bounds: Vec<Bound<&[u8]>> = vec![Bound::Unbounded];
    for k in &keys {
        bounds.push(Bound::Included(&k[..]));
        bounds.push(Bound::Excluded(&k[..]));
    }
    // Keys 0..6 plus ones between and around them (two bytes sort between k and k + 1).
    let probes: Vec<Vec<u8>> = (0u8..7)
        .flat_map(|k| [vec![k], vec![k, 0]])
        .chain([vec![]])
        .collect();
    let inside = |b: (Bound<&[u8]>, Bound<&[u8]>), p: &[u8]| {
        (match b.0 {
            Bound::Unbounded => true,
            Bound::Included(l) => p >= l,
            Bound::Excluded(l) => p > l,
        }) && (match b.1 {
            Bound::Unbounded => true,
            Bound::Included(h) => p <= h,
            Bound::Excluded(h) => p < h,
        })
    };
    for &il in &bounds {
        for &ih in &bounds {
            for &ol in &bounds {
                for &oh in &bounds {
                    let (inner, outer) = ((il, ih), (ol, oh));
                    let brute = probes.iter().all(|p| !inside(inner, p) || inside(outer, p));
                    let empty = !probes.iter().any(|p| inside(inner, p));
                    let got = range_within(inner, outer);
                    // An empty inner range is within anything; `range_within` may say no
                    // (it judges bounds, not contents), never yes wrongly.
                    if got || !empty {
                        assert_eq!(got, brute, "{inner:?} in {outer:?}");
                    }
                }
            }
        }
    }
}

/// A primary-key scan stopped by its LIMIT keeps the row it stopped at with the recent
/// lookups (TPC-C Delivery deletes the oldest new order it just scanned to), ascending and
/// descending; one that ran to its end keeps nothing; the delete by that key then removes
/// the right row.
#[test]
fn a_primary_scan_stopped_by_its_limit_keeps_the_row_for_the_next_lookup() {
    use crate::ScanOptions;
    use std::ops::Bound;
    let db = Database::open(Config::default()).unwrap();
    let t = ordered_kv_table(&db);
    for k in [3i64, 5, 7] {
        db.run(|tx| tx.insert(&t, &(k, k))).unwrap();
    }
    let key = |k: i64| {
        let mut b = Vec::new();
        t.schema.encode_key_values(0, &k, &mut b).unwrap();
        b
    };
    let mut tx = db.begin().unwrap();
    let first = |tx: &mut super::Transaction<'_>, limit, descending| {
        let opts = ScanOptions {
            limit,
            descending,
            ..Default::default()
        };
        let mut got = None;
        let lo = Bound::Included(&4i64);
        tx.scan(&t, lo, Bound::Unbounded, opts, |r| {
            got = got.or(r.i64(0).ok());
            true
        })
        .unwrap();
        got
    };
    assert_eq!(first(&mut tx, None, false), Some(5));
    assert!(
        tx.local.recent.tid_of(t.id, &key(7)).is_none(),
        "ran to its end"
    );
    assert_eq!(first(&mut tx, Some(1), false), Some(5));
    let tid5 = tx.local.recent.tid_of(t.id, &key(5));
    assert_eq!(tid5, t.indexes[0].get_unique(&key(5)));
    assert!(tid5.is_some());
    assert_eq!(first(&mut tx, Some(1), true), Some(7));
    assert_eq!(
        tx.local.recent.tid_of(t.id, &key(7)),
        t.indexes[0].get_unique(&key(7))
    );
    tx.delete(&t, &5i64).unwrap();
    tx.commit().unwrap();
    assert_eq!(value(&db, &t, 5), None);
    assert_eq!(value(&db, &t, 3), Some(3));
    assert_eq!(value(&db, &t, 7), Some(7));
}

/// A loop over a key array warms exactly the keys its iterations will use: `ks[lo..]` up to
/// `hi`, the end of the array and `PREFETCH_MAX` keys, each an element as it stands (the
/// array read in place), and a two-part key through its evaluated parts; the same keys
/// whether or not the loop's own variable starts at 1. Seen in the transaction's
/// `Prefetched` keys after the call (the calls end without an error, which would clear
/// them).
#[test]
fn a_loop_over_a_key_array_warms_the_elements_its_iterations_read() {
    use crate::procedure::Arg;
    let db = Database::open(Config::default()).unwrap();
    let t = kv_table(&db);
    for k in 1..=40i64 {
        db.run(|tx| tx.insert(&t, &(k, k))).unwrap();
    }
    let procs = db
        .create_procedures(
            "CREATE PROCEDURE one(ks BIGINT[], lo INT, hi INT) AS $$ DECLARE x INT; BEGIN
               FOR i IN lo..hi LOOP
                 IF i <= cardinality(ks) THEN SELECT v INTO x FROM t WHERE k = ks[i]; END IF;
               END LOOP;
             END $$;
             CREATE PROCEDURE two(ks BIGINT[], lo INT, hi INT) AS $$ DECLARE x INT; BEGIN
               FOR i IN lo..hi LOOP
                 IF i <= cardinality(ks) THEN SELECT v INTO x FROM t WHERE k = ks[i] + 0; END IF;
               END LOOP;
             END $$;",
        )
        .unwrap();
    let warmed = |p: &crate::procedure::Procedure, ks: &[i64], lo: i64, hi: i64| {
        let mut tx = db.begin().unwrap();
        let args: Vec<Arg> = vec![ks.to_vec().into(), lo.into(), hi.into()];
        p.execute(&mut tx, &args).unwrap();
        let pf = &tx.local.prefetched;
        let keys: Vec<i64> = (0..pf.ends.len())
            .map(|i| crate::schema::decode_int(pf.key(i).try_into().unwrap()))
            .collect();
        tx.abort();
        keys
    };
    let ks: Vec<i64> = (0..40).map(|i| 40 - i).collect();
    let max = crate::procedure::PREFETCH_MAX as usize;
    for (lo, hi) in [(1i64, 5i64), (3, 6), (2, 100), (38, 45), (1, 40)] {
        let want: Vec<i64> = (lo..=hi)
            .take(max)
            .filter_map(|i| ks.get(usize::try_from(i - 1).ok()?).copied())
            .collect();
        for p in &procs {
            assert_eq!(warmed(p, &ks, lo, hi), want, "{} over {lo}..{hi}", p.name());
        }
    }
    assert!(max < 40, "the last case must pass PREFETCH_MAX");
}

/// In-place and `siro` storage: the master `Transaction::prefetch` finds through the
/// masters' directory (`Table::master_word`) is the one each tuple's newest version names,
/// for every row (a third of them updated once), and a tuple id past the directory has no
/// word. Fails if the prefetch's master and the master a read copies from part ways.
#[test]
fn the_prefetchs_master_is_the_one_the_versions_name() {
    use crate::storage::TupleId;
    for storage in [
        VersionStorage::TimeTravel,
        VersionStorage::Delta,
        VersionStorage::Siro,
    ] {
        let gc = match storage {
            VersionStorage::Siro => crate::GcPolicy::DeadZone,
            _ => crate::GcPolicy::Txn,
        };
        let db = Database::open(Config::new().version_storage(storage).gc(gc)).unwrap();
        let t = db
            .create_table(
                TableSchema::new("t")
                    .column("k", ColumnType::Int)
                    .column("v", ColumnType::Int)
                    .primary_key(&["k"]),
            )
            .unwrap();
        let n = 2_000i64;
        db.run(|tx| (0..n).try_for_each(|k| tx.insert(&t, &(k, k * 10))))
            .unwrap();
        db.run(|tx| {
            (0..n)
                .step_by(3)
                .try_for_each(|k| tx.update(&t, &k, &[(1, -k)]))
        })
        .unwrap();
        let guard = crossbeam_epoch::pin();
        let mut rows = 0;
        for tid in t.tids() {
            let head = t
                .entry(tid)
                .unwrap()
                .load(std::sync::atomic::Ordering::Acquire);
            // SAFETY: pinned; the table's newest versions live while we are. (Tuple ids
            // reserved by the slot and not used have no chain.)
            let Some(v) = (unsafe { head.as_ref() }) else {
                continue;
            };
            rows += 1;
            let m = t
                .master_word(tid)
                .unwrap()
                .load(std::sync::atomic::Ordering::Acquire);
            assert_eq!(v.master() as *const _, m as *const _, "{storage:?} {tid:?}");
        }
        drop(guard);
        assert_eq!(rows, n, "{storage:?}");
        assert!(
            t.master_word(TupleId::new(1 << 40)).is_none(),
            "{storage:?}"
        );
        let row = db.run(|tx| tx.get(&t, &3i64)).unwrap().unwrap();
        assert_eq!(row.get(1), Some(&Value::Int(-3)), "{storage:?}");
    }
}
