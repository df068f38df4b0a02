//! `partial-order` timestamps (POMVCC) and the `locked-counter` baseline: groups share a
//! commit timestamp, a snapshot may miss a commit that returned before it began (HISTORICAL
//! READ) unless the begin names that commit's timestamp as its floor, a conflict closes the
//! group, GC keeps what readers at `BTs` need, and the pairings that cannot work are
//! refused by name. (Two members of one group with one unique key: `txn/tests.rs`, which can
//! hold one in Preparing.)
use crate::common::*;
use myriad::*;
use std::time::Duration;

/// A partial-order database (with `counters`) whose open commit timestamp moves only on a conflict or a
/// floor (no tick), so the tests decide when a group closes.
fn po_db(counters: PoCounters) -> (Database, TableRef) {
    let db = Database::open(
        Config::new()
            .po_counters(counters)
            .protocol(Protocol::Si)
            .isolation(Isolation::Snapshot)
            .timestamps(TimestampPolicy::PartialOrder)
            .po_tick(Duration::ZERO),
    )
    .unwrap();
    let t = kv(&db);
    (db, t)
}

fn si() -> TxnOptions {
    TxnOptions {
        isolation: Isolation::Snapshot,
        read_only: false,
    }
}

/// Loads keys `0..n` and returns the commit timestamp of the load.
fn load_ts(db: &Database, t: &TableRef, n: i64) -> Timestamp {
    let mut tx = db.begin().unwrap();
    for k in 0..n {
        tx.insert(t, &kv_row(t, k, k, k, k % 3)).unwrap();
    }
    tx.commit_returning_ts().unwrap()
}

fn set(db: &Database, t: &TableRef, floor: Timestamp, k: i64, v: i64) -> Timestamp {
    let mut tx = db.begin_after(si(), floor).unwrap();
    tx.update(t, &k, &[(1, v)]).unwrap();
    tx.commit_returning_ts().unwrap()
}

/// HISTORICAL READ: two non-conflicting updaters share one commit timestamp; a transaction
/// that begins after both returned, without a floor, still reads the old values; with the
/// shared timestamp as its floor it reads both new ones.
#[test]
fn historical_read_without_a_floor_and_its_avoidance_with_one() {
    for &counters in PoCounters::ALL {
        let (db, t) = po_db(counters);
        let loaded = load_ts(&db, &t, 4);
        let a = set(&db, &t, loaded, 0, 100);
        let b = set(&db, &t, loaded, 1, 101);
        assert_eq!(a, b, "non-conflicting updaters share the commit timestamp");
        assert!(a > loaded);

        let mut stale = db.begin().unwrap();
        assert_eq!(
            val(&mut stale, &t, 0),
            Some(0),
            "HISTORICAL READ: the old value"
        );
        assert_eq!(val(&mut stale, &t, 1), Some(1));
        stale.commit().unwrap();

        let mut fresh = db.begin_after(si(), a).unwrap();
        assert_eq!(
            val(&mut fresh, &t, 0),
            Some(100),
            "the floor's commit is in the snapshot"
        );
        assert_eq!(val(&mut fresh, &t, 1), Some(101));
        fresh.commit().unwrap();

        let s = db.stats();
        assert_eq!(s.end_ts_draws, 3, "the load and two updaters");
        // The load's group closed at the first floor, the updaters' at the last: two
        // increments for three commits.
        assert_eq!(s.ts_increments, 2);
        assert_eq!(s.ts_increments_by_cause, [0, 2, 0]);
        assert_eq!(
            s.ts_visibility_lag, 1,
            "only the (empty) open timestamp is unreadable"
        );
        // The load's commit was sampled and became readable at the first floor.
        assert!(s.ts_lag_samples >= 1, "{counters}: no lag sample");
        assert!(s.ts_lag_us(&Stats::default(), 0.99).is_some());
    }
}

/// A write-write conflict with a commit of the open group closes it (the retry can then see
/// the winner), and `run` retries to success: concurrent increments lose no update.
#[test]
fn a_conflict_closes_the_group_and_run_loses_no_update() {
    for &counters in PoCounters::ALL {
        let (db, t) = po_db(counters);
        let loaded = load_ts(&db, &t, 2);
        let mut x = db.begin_after(si(), loaded).unwrap();
        let mut y = db.begin_after(si(), loaded).unwrap();
        x.update(&t, &0i64, &[(1, 10)]).unwrap();
        let c = x.commit_returning_ts().unwrap();
        let before = db.stats().global_rmw;
        let e = y.update(&t, &0i64, &[(1, 20)]).unwrap_err();
        assert_eq!(
            e,
            Error::SerializationFailure(AbortReason::WriteWriteConflict)
        );
        let s = db.stats();
        assert_eq!(
            s.ts_increments_by_cause[0], 1,
            "the conflict closed the group"
        );
        // The close's shared read-modify-writes count: the `advance` lock's two (shared
        // counters) or one CAS of CTs (slot counts), then the move of BTs over the complete
        // group (and the lag sampler's claim, if it samples it).
        let rmw = s.global_rmw - before;
        let expect = if counters == PoCounters::Slots {
            2..=3
        } else {
            3..=5
        };
        assert!(
            expect.contains(&rmw),
            "{counters}: a conflict close counted {rmw} shared RMWs"
        );
        // Closed and complete: a plain begin sees the winner now.
        let mut r = db.begin().unwrap();
        assert_eq!(val(&mut r, &t, 0), Some(10));
        r.commit().unwrap();

        std::thread::scope(|s| {
            for _ in 0..2 {
                s.spawn(|| {
                    for _ in 0..300 {
                        db.run(|tx| {
                            let v = try_val(tx, &t, 1)?.unwrap_or(0);
                            tx.update(&t, &1i64, &[(1, v + 1)])
                        })
                        .unwrap();
                    }
                });
            }
        });
        let mut r = db.begin_after(si(), db_newest(&db, &t)).unwrap();
        assert_eq!(val(&mut r, &t, 1), Some(1 + 600), "an increment was lost");
        assert!(c > loaded);
    }
}

/// Slot counts: update commits that share the open timestamp take no shared
/// read-modify-write on a global word (the shared counters take two each), and a begin with
/// the last one's timestamp as its floor sees them.
#[test]
fn slot_counts_commit_without_a_shared_rmw() {
    for &counters in PoCounters::ALL {
        let (db, t) = po_db(counters);
        let loaded = load_ts(&db, &t, 200);
        db.begin_after(si(), loaded).unwrap().commit().unwrap();
        let before = db.stats();
        let mut last = loaded;
        for k in 0..200 {
            let mut tx = db.begin().unwrap();
            tx.update(&t, &k, &[(1, -k)]).unwrap();
            last = tx.commit_returning_ts().unwrap();
        }
        let s = db.stats();
        let rmw = s.global_rmw - before.global_rmw;
        if counters == PoCounters::Slots {
            assert!(rmw <= 2, "slots: {rmw} over 200 commits");
        } else {
            assert!(rmw >= 400, "{counters}: {rmw}");
        }
        assert_eq!(s.ts_increments, before.ts_increments, "one group");
        let mut r = db.begin_after(si(), last).unwrap();
        assert_eq!(val(&mut r, &t, 199), Some(-199));
        r.commit().unwrap();
    }
}

/// A floor wait that closes the open group takes shared read-modify-writes (the close, the
/// floor's increment count, the move of `BTs`) outside any transaction: they are counted in
/// the slot of the thread's next begin, not before it, and once.
#[test]
fn a_floor_wait_counts_its_shared_rmws_at_the_next_begin() {
    for &counters in PoCounters::ALL {
        let (db, t) = po_db(counters);
        let loaded = load_ts(&db, &t, 1);
        let c = set(&db, &t, loaded, 0, 5);
        let before = db.stats();
        db.wait_for_floor(c).unwrap();
        let waited = db.stats();
        assert_eq!(
            waited.ts_increments_by_cause[1],
            before.ts_increments_by_cause[1] + 1
        );
        assert_eq!(
            waited.global_rmw, before.global_rmw,
            "{counters}: counted at the begin"
        );
        let mut r = db.begin().unwrap();
        let begun = db.stats().global_rmw - before.global_rmw;
        assert!(
            begun >= 3,
            "{counters}: a floor's close counted {begun} shared RMWs"
        );
        assert_eq!(val(&mut r, &t, 0), Some(5));
        r.commit().unwrap();
        let r = db.begin().unwrap();
        assert_eq!(
            db.stats().global_rmw - before.global_rmw,
            begun,
            "counted once"
        );
        r.commit().unwrap();
    }
}

/// The commit timestamp of a no-op write, i.e. a floor covering everything committed so far.
fn db_newest(db: &Database, t: &TableRef) -> Timestamp {
    db.run(|tx| {
        tx.insert(t, &kv_row(t, 999, 0, 999, 0))?;
        tx.delete(t, &999i64)?;
        Ok(())
    })
    .unwrap();
    let mut tx = db.begin().unwrap();
    tx.insert(t, &kv_row(t, 998, 0, 998, 0)).unwrap();
    tx.commit_returning_ts().unwrap()
}

/// GC's watermark is `BTs`, not the open commit timestamp: a version superseded by a commit
/// of a group that is not readable yet stays for the readers that begin at `BTs`.
#[test]
fn gc_keeps_the_versions_readers_at_bts_need() {
    for &counters in PoCounters::ALL {
        let (db, t) = po_db(counters);
        let loaded = load_ts(&db, &t, 2);
        // Make the load readable, then update key 0 in a group that stays open.
        let r = db.begin_after(si(), loaded).unwrap();
        r.commit().unwrap();
        let mut w = db.begin().unwrap();
        w.update(&t, &0i64, &[(1, 50)]).unwrap();
        let c = w.commit_returning_ts().unwrap();
        assert!(
            db.watermark() < c.get(),
            "the watermark passed an open group"
        );
        db.collect_garbage();
        let mut r = db.begin().unwrap();
        assert_eq!(
            val(&mut r, &t, 0),
            Some(0),
            "the version readers at BTs need is gone"
        );
        r.commit().unwrap();
        let mut r = db.begin_after(si(), c).unwrap();
        assert_eq!(val(&mut r, &t, 0), Some(50));
        r.commit().unwrap();
    }
}

/// `begin_after` with a floor no commit returned is refused; the counters take any
/// returned floor at once.
#[test]
fn begin_after_refuses_a_floor_ahead_of_every_commit() {
    for ts in [
        TimestampPolicy::PartialOrder,
        TimestampPolicy::GlobalCounter,
        TimestampPolicy::LockedCounter,
    ] {
        let db = Database::open(
            Config::new()
                .protocol(Protocol::Si)
                .isolation(Isolation::Snapshot)
                .timestamps(ts),
        )
        .unwrap();
        let t = kv(&db);
        let c = load_ts(&db, &t, 1);
        let mut r = db.begin_after(si(), c).unwrap();
        assert_eq!(val(&mut r, &t, 0), Some(0), "{ts}");
        r.commit().unwrap();
        let far = Timestamp::new(c.get() + 1_000);
        assert!(
            matches!(db.begin_after(si(), far), Err(Error::FloorAhead { .. })),
            "{ts}"
        );
    }
}

/// The locked counter: every update commit gets its own timestamp, in commit order.
#[test]
fn locked_counter_hands_out_distinct_rising_timestamps() {
    let db = Database::open(Config::new().timestamps(TimestampPolicy::LockedCounter)).unwrap();
    let t = kv(&db);
    let mut last = load_ts(&db, &t, 2);
    for i in 0..5 {
        let mut tx = db.begin().unwrap();
        tx.update(&t, &0i64, &[(1, i)]).unwrap();
        let c = tx.commit_returning_ts().unwrap();
        assert_eq!(c.get(), last.get() + 1);
        last = c;
    }
    let s = db.stats();
    assert_eq!(s.ts_increments, s.end_ts_draws);
    assert_eq!(s.ts_increments, 6);
}

/// The pairings partial-order timestamps cannot serve are refused with an error naming the
/// pair; those it can are accepted.
#[test]
fn partial_order_refuses_the_pairings_it_cannot_serve() {
    let dir = std::env::temp_dir().join(format!("myriad-po-refuse-{}", std::process::id()));
    for &counters in PoCounters::ALL {
        let po = || {
            Config::new()
                .timestamps(TimestampPolicy::PartialOrder)
                .po_counters(counters)
        };
        for p in [
            Protocol::Mvto,
            Protocol::Ssn,
            Protocol::Ssi,
            Protocol::ErmiaSi,
            Protocol::ErmiaSsi,
            Protocol::Mv2pl,
            Protocol::Mv2plWait,
            Protocol::Silo,
            Protocol::Occ,
            Protocol::TwoPl,
            Protocol::Hybrid,
        ] {
            let c = po()
                .protocol(p)
                .version_storage(p.natural_storage())
                .isolation(Config::strongest_isolation(p).unwrap());
            match c.validate() {
                Err(Error::InvalidConfig(m)) => {
                    assert!(
                        m.contains("partial-order") && m.contains(p.name()),
                        "{p}: {m}"
                    )
                }
                other => panic!("{p}: {other:?}"),
            }
        }
        for level in [Isolation::Serializable, Isolation::RepeatableRead] {
            match po().isolation(level).validate() {
                Err(Error::InvalidConfig(m)) => assert!(m.contains(level.name()), "{m}"),
                other => panic!("{level}: {other:?}"),
            }
        }
        // The per-transaction level is checked too.
        let db = Database::open(po().isolation(Isolation::Snapshot)).unwrap();
        assert!(matches!(
            db.begin_with(TxnOptions {
                isolation: Isolation::Serializable,
                read_only: false
            }),
            Err(Error::InvalidConfig(_))
        ));
        for level in [Isolation::Snapshot, Isolation::ReadCommitted] {
            po().isolation(level).validate().unwrap();
            po().protocol(Protocol::Si)
                .isolation(Isolation::Snapshot)
                .validate()
                .unwrap();
        }
        for log in [LogPolicy::Logical, LogPolicy::Physical] {
            po().isolation(Isolation::Snapshot)
                .log(log)
                .data_dir(&dir)
                .validate()
                .unwrap();
        }
        assert!(matches!(
            po().isolation(Isolation::Snapshot)
                .log(LogPolicy::Command)
                .data_dir(&dir)
                .validate(),
            Err(Error::InvalidConfig(m)) if m.contains("partial-order") && m.contains("command")
        ));
    }
    assert!(matches!(
        Config::new()
            .timestamps(TimestampPolicy::LockedCounter)
            .log(LogPolicy::Logical)
            .data_dir(&dir)
            .log_manager(LogManagerKind::Ermia)
            .validate(),
        Err(Error::InvalidConfig(m)) if m.contains("locked-counter") && m.contains("ermia")
    ));
}

/// A temporary directory, removed on drop.
struct TempDir(std::path::PathBuf);

impl TempDir {
    fn new(tag: &str) -> Self {
        let p = std::env::temp_dir().join(format!("myriad-po-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        TempDir(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A durable partial-order configuration: two loggers, `log`, and an epoch interval long
/// enough (the longest allowed) that only a committer waiting for durability starts a
/// group-commit round.
fn durable_po(dir: &std::path::Path, counters: PoCounters, log: LogPolicy) -> Config {
    Config::new()
        .data_dir(dir)
        .log(log)
        .loggers(2)
        .epoch_interval(Duration::from_secs(10))
        .po_counters(counters)
        .protocol(Protocol::Si)
        .isolation(Isolation::Snapshot)
        .timestamps(TimestampPolicy::PartialOrder)
}

/// Every `kv` row as (k, v), by k, read after `floor` (a plain begin may not see the newest
/// commits under `partial-order`).
fn kv_rows(db: &Database, floor: Option<Timestamp>) -> Vec<(i64, i64)> {
    let t = db.table("kv").unwrap();
    let mut tx = match floor {
        Some(f) => db.begin_after(si(), f).unwrap(),
        None => db.begin().unwrap(),
    };
    let mut out = Vec::new();
    tx.scan_table(&t, |r| {
        out.push((r.i64(0).unwrap(), r.i64(1).unwrap()));
        true
    })
    .unwrap();
    tx.commit().unwrap();
    out.sort();
    out
}

/// POMVCC §V on a durable database: a commit is readable only once its log record is
/// durable. With shared counters the worker does not wait: `commit_deferred` returns before
/// the record is durable (a 10 s epoch interval), a reader that begins after the group closed
/// reads the old value whenever the ticket is not durable yet (and that is seen at least
/// once; a round a waiter asked for may still run unasked by us); once it is durable, a
/// reader with the commit's timestamp as its floor reads the new one. With slot counts the
/// commit waits for its round, so its ticket is durable when it returns. A reader's ticket
/// waits for nothing. Under the global counter, with the same long epoch interval, the commit
/// is readable while its ticket is not durable (the contrast).
#[test]
fn a_partial_order_commit_is_readable_only_once_durable() {
    for &counters in PoCounters::ALL {
        let d = TempDir::new("readable");
        let db = Database::open(durable_po(&d.0, counters, LogPolicy::Logical)).unwrap();
        let t = kv(&db);
        load(&db, &t, 0..4);
        let mut hidden = 0;
        for k in 0..4 {
            // Let any round a waiter asked for before run first.
            std::thread::sleep(Duration::from_millis(100));
            let mut tx = db.begin_with(si()).unwrap();
            tx.update(&t, &k, &[(1, 100 + k)]).unwrap();
            let ticket = tx.commit_deferred().unwrap();
            assert!(ticket.epoch() > 0, "an update commit has a log epoch");
            if counters == PoCounters::Shared {
                // The tick (100 µs) closes the group; only durability holds it back.
                std::thread::sleep(Duration::from_millis(20));
                let mut r = db.begin_with(si()).unwrap();
                let seen = val(&mut r, &t, k);
                r.commit().unwrap();
                let durable = db.is_durable(ticket);
                assert!(
                    durable || seen == Some(k),
                    "commit {k} readable before it is durable"
                );
                if !durable {
                    hidden += 1;
                }
                db.wait_durable(ticket).unwrap();
            } else {
                assert!(
                    db.is_durable(ticket),
                    "slots: commit {k} returned before it was durable"
                );
                hidden += 1;
            }
            let mut r = db.begin_after(si(), ticket.commit_ts()).unwrap();
            assert_eq!(val(&mut r, &t, k), Some(100 + k));
            let rt = r.commit_deferred().unwrap();
            assert_eq!(
                rt.epoch(),
                0,
                "a reader under partial-order waits for no epoch"
            );
        }
        assert!(
            hidden > 0,
            "{counters:?}: no commit was seen hidden while not durable (a round ran each time)"
        );
        // A floor on a commit still waiting for its round asks for the round (a 10 s
        // interval would otherwise hold the begin that long).
        let mut tx = db.begin_with(si()).unwrap();
        tx.update(&t, &0i64, &[(1, -1i64)]).unwrap();
        let ticket = tx.commit_deferred().unwrap();
        let started = std::time::Instant::now();
        let mut r = db.begin_after(si(), ticket.commit_ts()).unwrap();
        assert_eq!(val(&mut r, &t, 0), Some(-1));
        r.commit().unwrap();
        assert!(started.elapsed() < Duration::from_secs(5), "{counters:?}");
    }
    let d = TempDir::new("readable-gc");
    let c = durable_po(&d.0, PoCounters::Shared, LogPolicy::Logical)
        .timestamps(TimestampPolicy::GlobalCounter);
    let db = Database::open(c).unwrap();
    let t = kv(&db);
    load(&db, &t, 0..1);
    let mut tx = db.begin_with(si()).unwrap();
    tx.update(&t, &0i64, &[(1, 7i64)]).unwrap();
    let ticket = tx.commit_deferred().unwrap();
    assert!(
        !db.is_durable(ticket),
        "global counter: a deferred commit is durable at once (the contrast above proves nothing)"
    );
    let mut r = db.begin_with(si()).unwrap();
    assert_eq!(val(&mut r, &t, 0), Some(7), "readable before durable");
    r.commit().unwrap();
    db.wait_durable(ticket).unwrap();
}

/// `take_retry_floor` names the commit a write-write conflict met, once, for a retry loop
/// that no longer holds the failed transaction (the bench runner); `wait_for_floor` then lets
/// a plain begin see it. In memory (no tick) and durable with shared counters, where the
/// winner is not readable until its log round is durable (10 s epoch interval): the wait
/// asks for the round.
#[test]
fn a_retry_floor_names_the_winner_and_waiting_for_it_makes_it_readable() {
    let conflict = |db: &Database, t: &TableRef, floor: Timestamp| {
        let mut x = db.begin_after(si(), floor).unwrap();
        let mut y = db.begin_after(si(), floor).unwrap();
        x.update(t, &0i64, &[(1, 7i64)]).unwrap();
        let ticket = x.commit_deferred().unwrap();
        assert_eq!(db.take_retry_floor(), None, "no conflict yet");
        assert_eq!(
            y.update(t, &0i64, &[(1, 8i64)]).unwrap_err(),
            Error::SerializationFailure(AbortReason::WriteWriteConflict)
        );
        drop(y);
        assert_eq!(db.take_retry_floor(), Some(ticket.commit_ts()));
        assert_eq!(db.take_retry_floor(), None, "taken");
        ticket
    };
    for &counters in PoCounters::ALL {
        let (db, t) = po_db(counters);
        let loaded = load_ts(&db, &t, 1);
        let ticket = conflict(&db, &t, loaded);
        db.wait_for_floor(ticket.commit_ts()).unwrap();
        let mut r = db.begin().unwrap();
        assert_eq!(val(&mut r, &t, 0), Some(7));
        r.commit().unwrap();
        // Another database's floor is not this one's.
        let (other, _) = po_db(counters);
        conflict(&db, &t, ticket.commit_ts());
        assert_eq!(other.take_retry_floor(), None);
    }
    let d = TempDir::new("retry-floor");
    let db = Database::open(durable_po(&d.0, PoCounters::Shared, LogPolicy::Logical)).unwrap();
    let t = kv(&db);
    let loaded = load_ts(&db, &t, 1);
    let ticket = conflict(&db, &t, loaded);
    let started = std::time::Instant::now();
    db.wait_for_floor(ticket.commit_ts()).unwrap();
    assert!(db.is_durable(ticket), "readable only once durable");
    let mut r = db.begin().unwrap();
    assert_eq!(val(&mut r, &t, 0), Some(7));
    r.commit().unwrap();
    assert!(started.elapsed() < Duration::from_secs(5));
}

/// A crash of a partial-order database, simulated by copying its files while it runs:
/// two threads update shared and private keys (conflicts close groups, the tick closes the
/// rest; many commits share a timestamp) and insert rows, while the main thread takes
/// checkpoints. Every recovery scheme the log kind allows, from the copy, gives the rows
/// every returned commit wrote; the recovered clock continues above them (a commit after
/// recovery survives a reopen). With both counter kinds, under logical and physical logs.
#[test]
fn partial_order_commits_recover_after_a_crash() {
    let per_thread: i64 = std::env::var("MYRIAD_PO_CRASH_TXNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300);
    for &counters in PoCounters::ALL {
        for log in [LogPolicy::Logical, LogPolicy::Physical] {
            let d = TempDir::new(&format!("crash-{counters:?}-{log}"));
            let c = durable_po(&d.0, counters, log)
                .epoch_interval(Duration::from_millis(5))
                .po_tick(Duration::from_millis(1));
            let db = Database::open(c.clone()).unwrap();
            let t = kv(&db);
            load(&db, &t, 0..8);
            let mut stamps = Vec::new();
            std::thread::scope(|s| {
                let mut hs = Vec::new();
                for th in 0..2i64 {
                    let (db, t) = (&db, &t);
                    hs.push(s.spawn(move || {
                        let mut seen = Vec::new();
                        for i in 0..per_thread {
                            // A private key, a shared one every third time, and every
                            // tenth time a new row; retried after a conflict.
                            let body = |tx: &mut Transaction<'_>| -> Result<()> {
                                let own = 2 + th;
                                let v = try_val(tx, t, own)?.unwrap_or(0);
                                tx.update(t, &own, &[(1, v + 1)])?;
                                if i % 3 == 0 {
                                    let v = try_val(tx, t, 0)?.unwrap_or(0);
                                    tx.update(t, &0i64, &[(1, v + 1)])?;
                                }
                                if i % 10 == 0 {
                                    let k = 1000 + th * 100_000 + i;
                                    tx.insert(t, &kv_row(t, k, i, k, 0))?;
                                }
                                Ok(())
                            };
                            let ts = loop {
                                let mut tx = db.begin_with(si()).unwrap();
                                match body(&mut tx) {
                                    Ok(()) => {}
                                    Err(e) if e.is_retryable() => continue,
                                    Err(e) => panic!("{e}"),
                                }
                                match tx.commit_returning_ts() {
                                    Ok(ts) => break ts,
                                    Err(e) if e.is_retryable() => continue,
                                    Err(e) => panic!("{e}"),
                                }
                            };
                            seen.push(ts);
                        }
                        seen
                    }));
                }
                let mut checkpoints = 0;
                while !hs.iter().all(|h| h.is_finished()) {
                    db.checkpoint().unwrap();
                    checkpoints += 1;
                    std::thread::sleep(Duration::from_millis(20));
                }
                assert!(checkpoints > 0);
                for h in hs {
                    stamps.extend(h.join().unwrap());
                }
            });
            let n = stamps.len();
            stamps.sort();
            stamps.dedup();
            assert!(
                stamps.len() < n,
                "{counters:?} {log}: no two commits shared a timestamp"
            );
            let expect = kv_rows(&db, stamps.last().copied());
            assert_eq!(
                expect.iter().find(|r| r.0 == 2).map(|r| r.1),
                Some(2 + per_thread),
                "thread 0's private counter"
            );
            // Every commit returned is durable: the files hold all of them now.
            let copy = TempDir::new(&format!("crash-{counters:?}-{log}-copy"));
            copy_dir(&d.0, &copy.0);
            drop(db);
            let schemes: &[RecoveryScheme] = match log {
                LogPolicy::Logical => &[
                    RecoveryScheme::Serial,
                    RecoveryScheme::ParallelLatched,
                    RecoveryScheme::ParallelPartitioned,
                ],
                _ => &[RecoveryScheme::Physical],
            };
            for &scheme in schemes {
                let again = TempDir::new(&format!("crash-{counters:?}-{log}-{scheme}"));
                copy_dir(&copy.0, &again.0);
                let db = Database::open(c.clone().data_dir(&again.0).recovery(scheme))
                    .unwrap_or_else(|e| panic!("{counters:?} {log} {scheme}: {e}"));
                let got = kv_rows(&db, None);
                assert_eq!(got, expect, "{counters:?} {log} {scheme}");
                let t = db.table("kv").unwrap();
                let mut tx = db.begin_with(si()).unwrap();
                tx.update(&t, &1i64, &[(1, -5i64)]).unwrap();
                let ts = tx.commit_returning_ts().unwrap();
                let after = kv_rows(&db, Some(ts));
                assert!(after.contains(&(1, -5)));
                drop(db);
                let db = Database::open(c.clone().data_dir(&again.0)).unwrap();
                let reopened = kv_rows(&db, None);
                assert_eq!(reopened, after, "{counters:?} {log} {scheme}: reopened");
            }
        }
    }
}

/// Copies a database directory's files (not its `LOCK`), checkpoint directories included.
fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &to.join(e.file_name()));
        } else if e.file_name() != "LOCK" {
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
}
