//! GC never reclaims a version an open snapshot can see, and keeps live versions flat.
mod common;
use common::*;
use myriad::*;

#[test]
fn open_snapshots_keep_their_versions() {
    let db = open(Isolation::Snapshot);
    let t = kv(&db);
    load(&db, &t, 0..4);
    // Snapshots opened after 0, 100, 200, ... updates of key 0.
    let mut snaps = Vec::new();
    for round in 0..5i64 {
        let mut s = db.begin().unwrap();
        assert_eq!(
            val(&mut s, &t, 0),
            Some(if round == 0 { 0 } else { round * 100 })
        );
        snaps.push((round, s));
        for i in 1..=100i64 {
            db.run(|tx| tx.update(&t, &0i64, &[(1, round * 100 + i)]))
                .unwrap();
            db.run(|tx| tx.update(&t, &1i64, &[(1, i)])).unwrap();
        }
        db.collect_garbage();
    }
    for (round, s) in snaps.iter_mut() {
        assert_eq!(
            val(s, &t, 0),
            Some(if *round == 0 { 0 } else { *round * 100 }),
            "snapshot {round}"
        );
    }
    let live_with_snapshots = db.stats().live_versions();
    assert!(live_with_snapshots >= 5, "{live_with_snapshots}");
    drop(snaps);
    // Once the snapshots are gone, one more commit per key makes everything collectable.
    db.run(|tx| tx.update(&t, &0i64, &[(1, 0i64)])).unwrap();
    db.run(|tx| tx.update(&t, &1i64, &[(1, 0i64)])).unwrap();
    db.collect_garbage();
    let s = db.stats();
    assert!(
        s.live_versions() <= 8,
        "live versions {} after GC",
        s.live_versions()
    );
    assert!(s.versions_reclaimed >= 990, "{s:?}");
    assert!(db.chain_stats(8).max_chain_len <= 2);
}

#[test]
fn live_versions_stay_flat_under_updates() {
    let db = Database::open(Config::new().gc_interval_txns(16)).unwrap();
    let t = kv(&db);
    load(&db, &t, 0..100);
    let mut peak_late = 0;
    for i in 0..20_000i64 {
        db.run(|tx| tx.update(&t, &(i % 100), &[(1, i)])).unwrap();
        if i > 10_000 {
            peak_late = peak_late.max(db.stats().live_versions());
        }
    }
    // 100 rows; bounded garbage per worker between GC passes.
    assert!(peak_late < 100 + 200, "live versions grew to {peak_late}");
}

#[test]
fn deleted_rows_are_collected_and_reinsertable() {
    let db = open(Isolation::Serializable);
    let t = kv(&db);
    load(&db, &t, 0..10);
    for k in 0..10i64 {
        db.run(|tx| tx.delete(&t, &k)).unwrap();
    }
    db.run(|tx| tx.insert(&t, &(100i64, 0i64, 100i64, 0i64)))
        .unwrap();
    db.collect_garbage();
    let cs = db.chain_stats(4);
    assert_eq!(cs.tuples, 1, "only key 100 still has versions: {cs:?}");
    db.run(|tx| tx.insert(&t, &(3i64, 33i64, 3i64, 0i64)))
        .unwrap();
    assert_eq!(val(&mut db.begin().unwrap(), &t, 3), Some(33));
}

#[test]
fn live_versions_stay_flat_with_concurrent_writers() {
    let db = Database::open(Config::new().gc_interval_txns(16).max_retries(1_000_000)).unwrap();
    let t = kv(&db);
    load(&db, &t, 0..10);
    std::thread::scope(|s| {
        for th in 0..2i64 {
            let (db, t) = (&db, &t);
            s.spawn(move || {
                let mut seed = th as u64 * 7 + 1;
                for i in 0..20_000i64 {
                    let keys: Vec<i64> =
                        (0..8).map(|_| (splitmix(&mut seed) % 10) as i64).collect();
                    let _ = db.run(|tx| {
                        for (j, k) in keys.iter().enumerate() {
                            if j % 4 == 0 {
                                val(tx, t, *k);
                            } else {
                                match tx.update(t, k, &[(1, i)]) {
                                    Err(Error::NotFound { .. }) => {}
                                    r => r?,
                                }
                            }
                        }
                        Ok(())
                    });
                }
            });
        }
    });
    let s = db.stats();
    let cs = db.chain_stats(8);
    println!("{s:?} {cs:?} watermark {}", db.watermark());
    assert!(
        s.live_versions() < 10 + 500,
        "live versions grew to {}",
        s.live_versions()
    );
}

fn splitmix(s: &mut u64) -> u64 {
    *s = s.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *s;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}
