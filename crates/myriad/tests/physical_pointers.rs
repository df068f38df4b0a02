//! Index pointers `physical` and garbage collection: every version has an entry in every
//! secondary index, removed with it. (Its own test binary: an open snapshot here pins the
//! process-wide memory epoch, which would hold back the frees `gc_safety`'s memory-space
//! test counts on.)
use crate::common::*;
use myriad::*;
use std::time::{Duration, Instant};

/// Index pointers `physical`: every version has an entry in every secondary index, and the
/// entry goes with its version, at rollback and when GC collects it, while an open snapshot
/// still finds its own versions through them.
#[test]
fn physical_index_entries_go_with_their_versions() {
    for setup in gc_setups()
        .into_iter()
        .filter(|s| !s.0.in_place() && s.2 == NonInline::Inline)
    {
        let db = open_on(setup, Config::new().index_pointers(IndexPointers::Physical));
        let t = kv(&db);
        load(&db, &t, 0..10);
        let entries = || (t.index_entries(1).unwrap(), t.index_entries(2).unwrap());
        assert_eq!(entries(), (10, 10), "{setup:?}");
        // Rolled-back updates (of a key and of a non-key column) and inserts leave nothing.
        for k in 0..10i64 {
            let mut tx = db.begin().unwrap();
            tx.update(&t, &k, &[(1, 99i64)]).unwrap();
            tx.update(&t, &k, &[(3, 7i64)]).unwrap();
            tx.insert(&t, &(100 + k, 0i64, 100 + k, 0i64)).unwrap();
            // The update's new version and the insert; the key change moved the entry of the
            // version the update made (our own, changed in place).
            assert_eq!(entries(), (12, 12), "{setup:?}");
            tx.abort();
        }
        assert_eq!(entries(), (10, 10), "{setup:?}: after rollbacks");
        // A snapshot opened now must keep finding row 3 (g = 0, v = 3) through `by_g`.
        let mut snap = db.begin().unwrap();
        assert_eq!(val(&mut snap, &t, 3), Some(3));
        for round in 0..300i64 {
            db.run(|tx| {
                for k in 0..10i64 {
                    tx.update(&t, &k, &[(1, round)])?;
                }
                Ok(())
            })
            .unwrap();
        }
        db.run(|tx| tx.update(&t, &3i64, &[(3, 2i64)])).unwrap();
        db.collect_garbage();
        let mut found = Vec::new();
        snap.get_by(&t, 2, &0i64, |r| {
            found.push((r.i64(0).unwrap(), r.i64(1).unwrap()));
            true
        })
        .unwrap();
        found.sort();
        assert_eq!(found, [(0, 0), (3, 3), (6, 6), (9, 9)], "{setup:?}");
        snap.commit().unwrap();
        // Once GC catches up: one version per row, one entry per version.
        let deadline = Instant::now() + Duration::from_secs(10);
        while db.stats().live_versions() > 10 && Instant::now() < deadline {
            db.collect_garbage();
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(db.stats().live_versions(), 10, "{setup:?}");
        assert_eq!(entries(), (10, 10), "{setup:?}: after GC");
        let mut now = db.begin().unwrap();
        let mut g2 = Vec::new();
        now.get_by(&t, 2, &2i64, |r| {
            g2.push(r.i64(0).unwrap());
            true
        })
        .unwrap();
        g2.sort();
        assert_eq!(g2, [2, 3, 5, 8], "{setup:?}");
        now.commit().unwrap();
    }
}
