//! `partial-order` timestamps (POMVCC) and the `locked-counter` baseline: groups share a
//! commit timestamp, a snapshot may miss a commit that returned before it began (HISTORICAL
//! READ) unless the begin names that commit's timestamp as its floor, a conflict closes the
//! group, GC keeps what readers at `BTs` need, and the pairings that cannot work are
//! refused by name. (Two members of one group with one unique key: `txn/tests.rs`, which can
//! hold one in Preparing.)
mod common;
use common::*;
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
        let e = y.update(&t, &0i64, &[(1, 20)]).unwrap_err();
        assert_eq!(
            e,
            Error::SerializationFailure(AbortReason::WriteWriteConflict)
        );
        assert_eq!(
            db.stats().ts_increments_by_cause[0],
            1,
            "the conflict closed the group"
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
                            let v = val(tx, &t, 1).unwrap_or(0);
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
        assert!(matches!(
            po().isolation(Isolation::Snapshot)
                .log(LogPolicy::Logical)
                .data_dir(&dir)
                .validate(),
            Err(Error::Unsupported(m)) if m.contains("partial-order") && m.contains("logical")
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
