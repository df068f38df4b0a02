//! vDriver's SIRO storage (`--storage siro`, `version/siro.rs`): versions leave their
//! record's two slots for hot, cold or LLT segments, or are dropped when dead (1st prune);
//! full segments are dropped at their seal when dead (2nd prune) or later by the cutter.
//! The snapshots that need a relocated version keep reading it; a rollback leaves both
//! slots' rows as they were. (The reads of every in-place storage, `siro` among them, are
//! also checked by `in_place_storage.rs`, its pruning by `gc_dead_zone.rs`, its histories
//! by `history_checker.rs`, its recovery by `durability.rs` and the crash loop.)
use crate::common::*;
use myriad::*;

fn open_siro(segment_bytes: usize, llt_multiple: u64) -> Database {
    Database::open(
        Config::new()
            .isolation(Isolation::Snapshot)
            .version_storage(VersionStorage::Siro)
            .gc(GcPolicy::DeadZone)
            .siro_segment_bytes(segment_bytes)
            .siro_llt_multiple(llt_multiple),
    )
    .unwrap()
}

fn set(db: &Database, t: &TableRef, k: i64, v: i64) {
    db.run(|tx| tx.update(t, &k, &[(1, v)])).unwrap();
}

/// A snapshot held across 4,000 updates of 8 keys (small segments of 4 KiB, an LLT bound of
/// 2 mean transaction lengths): the versions it reads are relocated into LLT segments and
/// it keeps reading them; most other superseded versions are dropped by the 1st prune, hot
/// ones that were not are dropped with their segments (at the seal or by the cutter). Once
/// the snapshot ends, the cutter frees the LLT segments too: what stays is at most the open
/// segments. (With the 1st prune's test one version too eager — treating the snapshot's
/// read point as outside its version — the snapshot's reads fail.)
#[test]
fn relocated_versions_are_classified_pruned_and_cut() {
    let db = open_siro(4096, 2);
    let t = kv(&db);
    load(&db, &t, 0..16);
    // Some commits first, so the mean transaction length is known when the snapshot ages.
    for i in 0..64 {
        set(&db, &t, i % 8, i % 8);
    }
    db.collect_garbage();
    let mut llt = db.begin().unwrap();
    for k in 0..8 {
        assert_eq!(val(&mut llt, &t, k), Some(k));
    }
    // The snapshot is now older than 2 mean transaction lengths: published zones say so
    // before its versions leave their slots.
    for k in 8..24 {
        set(&db, &t, k % 16, k);
    }
    db.collect_garbage();
    for i in 0..4_000i64 {
        set(&db, &t, i % 8, 100 + i);
        if i % 10 == 0 {
            // Publishes fresh zones (the background thread does it every millisecond).
            db.collect_garbage();
        }
        if i % 100 == 0 {
            for k in 0..8 {
                assert_eq!(val(&mut llt, &t, k), Some(k), "update {i}");
            }
        }
    }
    db.collect_garbage();
    for k in 0..8 {
        assert_eq!(val(&mut llt, &t, k), Some(k));
    }
    let st = db.stats();
    let [hot, _, llt_class] = st.siro_relocated;
    assert!(
        llt_class >= 8,
        "the snapshot's versions go to LLT segments: {st:?}"
    );
    assert!(st.siro_pruned_first >= 1_000, "{st:?}");
    assert!(hot > 0, "{st:?}");
    let dropped: u64 = st.siro_pruned_seal.iter().chain(&st.siro_cut).sum();
    assert!(dropped > 0, "{st:?}");
    // The snapshot's versions pin their segment until it ends.
    assert_eq!(st.siro_cut[2] + st.siro_pruned_seal[2], 0, "{st:?}");
    // Every relocated version is either still in a live segment or was dropped with one.
    let relocated: u64 = st.siro_relocated.iter().sum();
    assert!(dropped <= relocated, "{st:?}");
    drop(llt);
    // Enough updates to seal the open LLT segment, then the cutter finds it dead.
    for i in 0..2_000i64 {
        set(&db, &t, i % 8, 10_000 + i);
    }
    db.collect_garbage();
    let st2 = db.stats();
    assert!(
        st2.siro_segment_bytes_live() <= 3 * 4096 * 2,
        "no more than the open segments stay: {st2:?}"
    );
    let mut tx = db.begin().unwrap();
    for k in 0..8 {
        assert_eq!(val(&mut tx, &t, k), Some(10_000 + 1_992 + k));
    }
}

/// Keys `0..keys` loaded (v0 of key 0 has v = 0), a snapshot that read v0, key 0 set to 1
/// (v1), and a snapshot that read v1: v1 and v0 own the record's two slots.
fn snapshots_of_two_versions<'d>(
    db: &'d Database,
    t: &TableRef,
    keys: i64,
) -> (Transaction<'d>, Transaction<'d>) {
    load(db, t, 0..keys);
    let mut s0 = db.begin().unwrap();
    assert_eq!(val(&mut s0, t, 0), Some(0));
    set(db, t, 0, 1);
    let mut s1 = db.begin().unwrap();
    assert_eq!(val(&mut s1, t, 0), Some(1));
    (s0, s1)
}

/// Two snapshots, at v0 and v1 of a row, and a writer that relocates v0 out of its slot
/// (the older snapshot needs it) and then aborts: both snapshots and a new one read what
/// they read before, and the next writer builds on v1.
#[test]
fn an_aborted_write_after_a_relocation_leaves_every_version_readable() {
    let db = open_siro(4096, 200);
    let t = kv(&db);
    let (mut s0, mut s1) = snapshots_of_two_versions(&db, &t, 2);
    let mut w = db.begin().unwrap();
    w.update(&t, &0i64, &[(1, 2i64)]).unwrap();
    assert_eq!(val(&mut w, &t, 0), Some(2));
    w.abort();
    assert!(db.stats().siro_relocated.iter().sum::<u64>() >= 1);
    assert_eq!(val(&mut s0, &t, 0), Some(0));
    assert_eq!(val(&mut s1, &t, 0), Some(1));
    assert_eq!(val(&mut db.begin().unwrap(), &t, 0), Some(1));
    set(&db, &t, 0, 3);
    assert_eq!(val(&mut s0, &t, 0), Some(0));
    assert_eq!(val(&mut s1, &t, 0), Some(1));
    assert_eq!(val(&mut db.begin().unwrap(), &t, 0), Some(3));
    // Our own version rewritten twice stays in its slot; a delete and re-insert in one
    // transaction put the row in a slot no committed version owns.
    db.run(|tx| {
        tx.update(&t, &1i64, &[(1, 10i64)])?;
        tx.update(&t, &1i64, &[(1, 11i64)])?;
        tx.delete(&t, &0i64)?;
        tx.insert(&t, &kv_row(&t, 0, 20, 0, 0))
    })
    .unwrap();
    assert_eq!(val(&mut s0, &t, 0), Some(0));
    assert_eq!(val(&mut s1, &t, 0), Some(1));
    assert_eq!(val(&mut s1, &t, 1), Some(1));
    let mut now = db.begin().unwrap();
    assert_eq!(val(&mut now, &t, 0), Some(20));
    assert_eq!(val(&mut now, &t, 1), Some(11));
}

/// An update under `siro` changes the freed slot in place once it holds the row's lock
/// (`Transaction::update_in_slot`): one that fails there — its closure after changing a
/// column, or a unique key taken — changes nothing anyone reads, and leaves the lock free.
/// Snapshots at v0 (relocated out of its slot by the failed update) and v1 read what they
/// read; the failing transaction reads v1 and goes on; another transaction updates the row
/// while it is still open; a later update of its own builds on the newest row.
#[test]
fn a_failed_update_in_the_slot_leaves_the_row_and_its_lock() {
    let db = open_siro(4096, 200);
    let t = kv(&db);
    let (mut s0, mut s1) = snapshots_of_two_versions(&db, &t, 3);
    let mut w = db.begin().unwrap();
    let e = w
        .update_with(&t, &0i64, |row| {
            row.set(1, 99i64)?;
            row.set(2, "not an INT")
        })
        .unwrap_err();
    assert!(!matches!(e, Error::SerializationFailure(_)), "{e:?}");
    // Column 2 (`u`) is unique: key 1 holds u = 1.
    let e = w.update(&t, &0i64, &[(1, 98i64), (2, 1i64)]).unwrap_err();
    assert!(!matches!(e, Error::SerializationFailure(_)), "{e:?}");
    assert!(
        db.stats().siro_relocated.iter().sum::<u64>() >= 1,
        "s0's version left its slot for the failed update: {:?}",
        db.stats()
    );
    assert_eq!(val(&mut w, &t, 0), Some(1));
    assert_eq!(val(&mut s0, &t, 0), Some(0));
    assert_eq!(val(&mut s1, &t, 0), Some(1));
    // The lock is free: another transaction updates the row while `w` is open.
    set(&db, &t, 0, 2);
    assert_eq!(val(&mut db.begin().unwrap(), &t, 0), Some(2));
    w.commit().unwrap();
    db.run(|tx| tx.update(&t, &0i64, &[(1, 3i64), (2, 30i64)]))
        .unwrap();
    let mut now = db.begin().unwrap();
    assert_eq!(val(&mut now, &t, 0), Some(3));
    assert_eq!(
        now.get_with(&t, &0i64, |r| r.i64(2).unwrap()).unwrap(),
        Some(30)
    );
    assert_eq!(val(&mut s0, &t, 0), Some(0));
    assert_eq!(val(&mut s1, &t, 0), Some(1));
}

/// The master records of in-place and `siro` storage hold versions' rows (the newest, and
/// under `siro` the one before it): `Stats::record_bytes` counts each record once (a 16-byte
/// header, one row, two under `siro`, and the 8-byte tuple id, in whole 64-byte lines), for
/// the tuples present, and `live_version_bytes` includes them, so a comparison of storages'
/// version memory compares like with like.
/// Append storage has no records: its newest version is a version block.
#[test]
fn master_records_count_as_version_bytes() {
    for (storage, rows) in [
        (VersionStorage::Siro, 2),
        (VersionStorage::Delta, 1),
        (VersionStorage::TimeTravel, 1),
        (VersionStorage::AppendN2o, 0),
    ] {
        let c = Config::new().version_storage(storage);
        let c = match storage {
            VersionStorage::Siro => c.gc(GcPolicy::DeadZone),
            _ => c,
        };
        let db = Database::open(c).unwrap();
        let t = kv(&db);
        let before = db.stats();
        assert_eq!(before.record_bytes, 0, "{storage}: no tuple yet");
        load(&db, &t, 0..16);
        for k in 0..16 {
            set(&db, &t, k, 7);
        }
        let s = db.stats();
        let record = if rows == 0 {
            0
        } else {
            // Header, rows (8-aligned), tuple id, rounded up to cache lines.
            ((16 + rows * t.schema().row_size() as u64).next_multiple_of(8) + 8)
                .next_multiple_of(64)
        };
        assert_eq!(s.record_bytes, 16 * record, "{storage}");
        assert_eq!(
            s.live_version_bytes(),
            s.version_bytes_allocated - s.version_bytes_reclaimed + s.record_bytes,
            "{storage}"
        );
    }
}
