//! GC `dead-zone` (vDriver Theorem 3.5, `gc/dead_zone.rs`) on both append-only chain orders:
//! versions between live snapshots are spliced out of the middle of chains, exactly those
//! no snapshot sees; snapshots opened early keep reading theirs after the pruner ran; a
//! long-lived snapshot no longer keeps every later version (it does under `vacuum`, the
//! watermark GC on the same threads); Read Committed transactions act as a watermark.
use crate::common::*;
use myriad::*;

/// Both append-only orders, and vDriver's SIRO storage (`version/siro.rs`), whose
/// relocations prune and classify by the same zones and whose headers the pruner splices.
const ORDERS: [VersionStorage; 3] = [
    VersionStorage::AppendN2o,
    VersionStorage::AppendO2n,
    VersionStorage::Siro,
];

fn open_dz(storage: VersionStorage, gc: GcPolicy) -> Database {
    Database::open(
        Config::new()
            .isolation(Isolation::Snapshot)
            .version_storage(storage)
            .gc(gc)
            .gc_threads(1),
    )
    .unwrap()
}

fn set(db: &Database, t: &TableRef, k: i64, v: i64) {
    db.run(|tx| tx.update(t, &k, &[(1, v)])).unwrap();
}

/// Key 0 is loaded with 0 and updated to 1, ..., 10; snapshots are opened after values 3 and 7. By Theorem
/// 3.5 the versions 0–2, 4–6 and 8–9 are dead and 3, 7 and the newest (10) stay: a chain of
/// 3. Each snapshot then still reads its value; once the older one ends, 3 goes too. (A
/// test one version too eager — calling a version dead when a read time equals its Begin,
/// the paper's strict `v_s < t_b` — drops 3 and 7, and the reads fail.)
#[test]
fn the_pruner_keeps_exactly_the_versions_live_snapshots_see() {
    for storage in ORDERS {
        let db = open_dz(storage, GcPolicy::DeadZone);
        let t = kv(&db);
        load(&db, &t, 0..1);
        let mut snaps = Vec::new();
        for v in 1..=10 {
            set(&db, &t, 0, v);
            if v == 3 || v == 7 {
                let mut s = db.begin().unwrap();
                assert_eq!(val(&mut s, &t, 0), Some(v));
                snaps.push((v, s));
            }
        }
        db.collect_garbage();
        let cs = db.chain_stats(16);
        assert_eq!(cs.max_chain_len, 3, "{storage}: {cs:?}");
        // 4–6 and 8–9 lie above the oldest snapshot: only the dead-zone test cuts them
        // (0–2 are below it, the watermark's tail).
        let st = db.stats();
        assert!(st.versions_pruned_dead_zone >= 5, "{storage}: {st:?}");
        assert!(st.versions_reclaimed >= 8, "{storage}: {st:?}");
        for (v, s) in snaps.iter_mut() {
            assert_eq!(val(s, &t, 0), Some(*v), "{storage}: snapshot at {v}");
        }
        let (_, first) = snaps.remove(0);
        drop(first);
        db.collect_garbage();
        assert_eq!(db.chain_stats(16).max_chain_len, 2, "{storage}");
        for (v, s) in snaps.iter_mut() {
            assert_eq!(val(s, &t, 0), Some(*v), "{storage}: snapshot at {v}");
        }
        drop(snaps);
        set(&db, &t, 0, 11);
        db.collect_garbage();
        assert_eq!(db.chain_stats(16).max_chain_len, 1, "{storage}");
        let mut tx = db.begin().unwrap();
        assert_eq!(val(&mut tx, &t, 0), Some(11));
    }
}

/// The smallest splice: a snapshot sees version 0, versions 1 and 2 follow; version 1 is
/// the one version between the newest and the snapshot's, and it is dead (no read point in
/// its interval). The pruner cuts it: a chain of 2. (Skipping the splice when fewer than
/// three versions lie above the snapshot's, one too many, leaves a chain of 3.)
#[test]
fn one_dead_version_between_the_newest_and_a_snapshots_is_spliced() {
    for storage in ORDERS {
        let db = open_dz(storage, GcPolicy::DeadZone);
        let t = kv(&db);
        load(&db, &t, 0..1);
        let mut snap = db.begin().unwrap();
        assert_eq!(val(&mut snap, &t, 0), Some(0));
        set(&db, &t, 0, 1);
        set(&db, &t, 0, 2);
        db.collect_garbage();
        assert_eq!(db.chain_stats(4).max_chain_len, 2, "{storage}");
        assert_eq!(val(&mut snap, &t, 0), Some(0), "{storage}");
        assert_eq!(val(&mut db.begin().unwrap(), &t, 0), Some(2), "{storage}");
    }
}

/// One snapshot held open across 2,000 updates of a few keys, with the background pruner
/// running throughout: under `dead-zone` every chain stays at most 2 versions long (the
/// snapshot's and the newest) and the snapshot reads its values all along; under `vacuum`
/// (the watermark) the hot chains keep every version since the snapshot.
#[test]
fn a_long_lived_snapshot_no_longer_pins_every_later_version() {
    for storage in ORDERS {
        for gc in [GcPolicy::DeadZone, GcPolicy::Vacuum] {
            if storage == VersionStorage::Siro && gc == GcPolicy::Vacuum {
                continue; // siro runs under dead-zone only
            }
            let db = open_dz(storage, gc);
            let t = kv(&db);
            load(&db, &t, 0..4);
            let mut llt = db.begin().unwrap();
            for k in 0..4 {
                assert_eq!(val(&mut llt, &t, k), Some(k));
            }
            for i in 0..2_000i64 {
                set(&db, &t, i % 4, 100 + i);
                if i % 250 == 0 {
                    for k in 0..4 {
                        assert_eq!(val(&mut llt, &t, k), Some(k), "{storage} {gc}");
                    }
                }
            }
            db.collect_garbage();
            for k in 0..4 {
                assert_eq!(val(&mut llt, &t, k), Some(k), "{storage} {gc}");
            }
            let max = db.chain_stats(16).max_chain_len;
            if gc == GcPolicy::DeadZone {
                assert_eq!(max, 2, "{storage}: the snapshot's version and the newest");
                assert!(db.stats().versions_pruned_dead_zone >= 1_900, "{storage}");
            } else {
                assert!(max >= 500, "{storage} vacuum: {max}");
            }
        }
    }
}

/// Pruning needs no full pass: with a snapshot held, 1,000 updates of 4 keys are pruned to
/// short chains by the writers' own collects (`dead_zone::collect`) and the vacuum thread's
/// revisits of what they hand over (no `collect_garbage`), before the vacuum's first full
/// pass (`FULL_PERIOD`, 1 s after the database opened; on a host too slow to get there
/// first the timing guard skips the check and says so).
#[test]
fn pruning_needs_no_full_pass() {
    for storage in ORDERS {
        let opened = std::time::Instant::now();
        let db = open_dz(storage, GcPolicy::DeadZone);
        let t = kv(&db);
        load(&db, &t, 0..4);
        let mut llt = db.begin().unwrap();
        assert_eq!(val(&mut llt, &t, 0), Some(0));
        for i in 0..1_000i64 {
            set(&db, &t, i % 4, 100 + i);
        }
        let mut pruned = 0;
        while opened.elapsed() < std::time::Duration::from_millis(900) && pruned < 900 {
            std::thread::sleep(std::time::Duration::from_millis(5));
            pruned = db.stats().versions_pruned_dead_zone;
        }
        if opened.elapsed() >= std::time::Duration::from_millis(950) {
            eprintln!("{storage}: host too slow to check before the first full pass");
            continue;
        }
        assert!(
            pruned >= 900,
            "{storage}: {pruned} pruned before the first full pass"
        );
        assert_eq!(val(&mut llt, &t, 0), Some(0), "{storage}");
    }
}

/// The chains a long-lived snapshot pinned are cleaned by the background once it ends, while
/// commits go on elsewhere (so no idle full pass runs): 200 keys updated 3 times each under
/// the snapshot keep its versions (the workers hand them over to be parked); once it ends,
/// updates of one other key go on, and within 5 s the 200 chains are back to one version
/// each. (With parked tuples never revisited the chains keep the snapshot's version: 400
/// live versions.)
#[test]
fn chains_a_long_snapshot_pinned_are_cleaned_after_it_ends() {
    for storage in ORDERS {
        let db = open_dz(storage, GcPolicy::DeadZone);
        let t = kv(&db);
        load(&db, &t, 0..201);
        let mut llt = db.begin().unwrap();
        assert_eq!(val(&mut llt, &t, 7), Some(7));
        for round in 0..3 {
            for k in 0..200 {
                set(&db, &t, k, 1_000 * (round + 1) + k);
            }
        }
        assert_eq!(val(&mut llt, &t, 7), Some(7), "{storage}");
        assert!(
            db.stats().live_versions() >= 400,
            "{storage}: the snapshot pins 200"
        );
        drop(llt);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        let mut i = 0;
        let live = loop {
            set(&db, &t, 200, i);
            i += 1;
            let live = db.stats().live_versions();
            if live <= 201 + 16 || std::time::Instant::now() > deadline {
                break live;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        };
        assert!(
            live <= 201 + 16,
            "{storage}: {live} live versions 5 s after the snapshot ended"
        );
        for k in [0, 7, 199] {
            assert_eq!(val(&mut db.begin().unwrap(), &t, k), Some(3_000 + k));
        }
    }
}

/// A worker drops its entry for a chain that kept an older version only when a later
/// *commit* wrote the tuple (that commit queued it: its entry looks again). A snapshot pins
/// the first versions of keys 0..50; each is updated, then written by an open transaction
/// (another thread's, in another slot) while the worker's next collect revisits the update's
/// entry; that transaction rolls back, and at the end the snapshot ends. With commits going
/// on to key 50 (so no idle full pass runs), every chain of keys 0..50 comes back to one
/// version. (Counting the open writer as a later commit drops each key's only entry: the 50
/// chains keep the snapshot's version.)
#[test]
fn an_open_writer_does_not_take_over_a_pinned_chain() {
    for storage in ORDERS {
        let db = Database::open(
            Config::new()
                .isolation(Isolation::Snapshot)
                .version_storage(storage)
                .gc(GcPolicy::DeadZone)
                .gc_threads(1)
                .gc_interval_txns(1),
        )
        .unwrap();
        let t = kv(&db);
        load(&db, &t, 0..51);
        // Slots (a thread takes its last one if free, else the next free from it): the
        // snapshot 0, the updates 2 (their entries share its queue), the open writers 1.
        let mut snap = db.begin().unwrap();
        assert_eq!(val(&mut snap, &t, 0), Some(0));
        let hold = db.begin().unwrap();
        set(&db, &t, 50, 0);
        drop(hold);
        for k in 0..50 {
            set(&db, &t, k, 1_000 + k);
            let (ready, wait) = std::sync::mpsc::channel();
            let (go, went) = std::sync::mpsc::channel::<()>();
            std::thread::scope(|s| {
                let (db, t) = (&db, &t);
                s.spawn(move || {
                    let mut open = db.begin().unwrap();
                    open.update(t, &k, &[(1, 2_000 + k)]).unwrap();
                    ready.send(()).unwrap();
                    went.recv().unwrap();
                    open.abort();
                });
                wait.recv().unwrap();
                set(db, t, 50, k);
                go.send(()).unwrap();
            });
        }
        drop(snap);
        let pinned = || {
            // Chains of two or more versions (the last bucket).
            db.chain_stats(3).histogram[2]
        };
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        let mut i = 100;
        // Key 50's own chain may hold two versions between its commits.
        while pinned() > 1 && std::time::Instant::now() < deadline {
            set(&db, &t, 50, i);
            i += 1;
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        assert!(
            pinned() <= 1,
            "{storage}: {} chains still hold an older version 5 s after the snapshot ended",
            pinned()
        );
        for k in [0, 49] {
            assert_eq!(val(&mut db.begin().unwrap(), &t, k), Some(1_000 + k));
        }
    }
}

/// Two threads hammer one key (no snapshot held): once the writers stop, the background
/// pruner brings the chain back to its newest version (within 10 s; it takes milliseconds).
#[test]
fn a_hot_key_written_by_two_threads_stays_pruned() {
    for storage in ORDERS {
        let db = open_dz(storage, GcPolicy::DeadZone);
        let t = kv(&db);
        load(&db, &t, 0..1);
        std::thread::scope(|s| {
            for th in 0..2i64 {
                let (db, t) = (&db, &t);
                s.spawn(move || {
                    for i in 0..4_000 {
                        set(db, t, 0, th * 10_000 + i);
                    }
                });
            }
        });
        // With no snapshot held, the old versions are below the watermark: cut as the
        // chain's tail (counted once the pass ends), not spliced from its middle.
        let pruned = || {
            let reclaimed = db.stats().versions_reclaimed;
            (db.chain_stats(1).max_chain_len, reclaimed)
        };
        let waited = std::time::Instant::now();
        let (mut max, mut reclaimed) = pruned();
        while (max > 1 || reclaimed < 7_000)
            && waited.elapsed() < std::time::Duration::from_secs(10)
        {
            std::thread::sleep(std::time::Duration::from_millis(10));
            (max, reclaimed) = pruned();
        }
        assert_eq!(max, 1, "{storage}: the hot chain after the writers stopped");
        assert!(reclaimed >= 7_000, "{storage}: {reclaimed} reclaimed");
    }
}

/// A Read Committed transaction reads at the clock per statement, so its registration
/// stays provisional: the dead-zone pruner keeps every version from its start on (as the
/// watermark would), and its reads see each newest value.
#[test]
fn a_read_committed_transaction_protects_everything_after_its_start() {
    for storage in ORDERS {
        let db = open_dz(storage, GcPolicy::DeadZone);
        let t = kv(&db);
        load(&db, &t, 0..1);
        let mut rc = db.begin_with(iso(Isolation::ReadCommitted)).unwrap();
        assert_eq!(val(&mut rc, &t, 0), Some(0));
        for v in 1..=10 {
            set(&db, &t, 0, v);
        }
        db.collect_garbage();
        let max = db.chain_stats(16).max_chain_len;
        assert_eq!(
            max, 11,
            "{storage}: every version since the RC transaction began"
        );
        assert_eq!(val(&mut rc, &t, 0), Some(10));
        drop(rc);
        set(&db, &t, 0, 11);
        db.collect_garbage();
        assert_eq!(db.chain_stats(16).max_chain_len, 1, "{storage}");
    }
}

/// Many snapshots, opened and closed at random points of an update stream over a few keys,
/// each checked against the value it saw first, with the background pruner running
/// (seeded; a wrong splice shows as a wrong read or, with memory reuse, as garbage).
#[test]
fn random_snapshots_read_their_values_while_the_pruner_splices() {
    for storage in ORDERS {
        let db = open_dz(storage, GcPolicy::DeadZone);
        let t = kv(&db);
        load(&db, &t, 0..8);
        let mut current: Vec<i64> = (0..8).collect();
        let mut open: Vec<(Vec<i64>, Transaction<'_>)> = Vec::new();
        let mut s = 0x5EED_u64;
        for i in 0..3_000i64 {
            let k = (next(&mut s) % 8) as i64;
            set(&db, &t, k, 1_000 + i);
            current[k as usize] = 1_000 + i;
            match next(&mut s) % 40 {
                0 if open.len() < 6 => {
                    let tx = db.begin().unwrap();
                    open.push((current.clone(), tx));
                }
                1 if !open.is_empty() => {
                    let j = (next(&mut s) % open.len() as u64) as usize;
                    let (seen, mut tx) = open.swap_remove(j);
                    for k in 0..8 {
                        assert_eq!(val(&mut tx, &t, k), Some(seen[k as usize]), "{storage}");
                    }
                }
                2 => db.collect_garbage(),
                _ => {}
            }
        }
        db.collect_garbage();
        for (seen, tx) in open.iter_mut() {
            for k in 0..8 {
                assert_eq!(val(tx, &t, k), Some(seen[k as usize]), "{storage}");
            }
        }
        // Each chain holds at most one version per open snapshot plus the newest.
        let max = db.chain_stats(16).max_chain_len;
        assert!(max <= open.len() as u64 + 1, "{storage}: {max}");
    }
}

/// Two writer threads move amounts between 8 keys (the sum stays 0 + 1 + ... + 7) while a
/// reader keeps several snapshots open across thousands of commits, re-reading each one's
/// sum: every read of a snapshot gives the same consistent sum, while the background pruner
/// splices around them. A splice of a version some snapshot sees shows as a wrong sum or a
/// missing row.
#[test]
fn concurrent_writers_never_take_a_version_from_open_snapshots() {
    const KEYS: i64 = 8;
    let want: i64 = (0..KEYS).sum();
    for storage in ORDERS {
        let db = open_dz(storage, GcPolicy::DeadZone);
        let t = kv(&db);
        load(&db, &t, 0..KEYS);
        let stop = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|s| {
            for w in 0..2u64 {
                let (db, t, stop) = (&db, &t, &stop);
                s.spawn(move || {
                    let mut r = 0xD2 + w;
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        let (a, b) = ((next(&mut r) % 8) as i64, (next(&mut r) % 8) as i64);
                        let _ = db.run(|tx| {
                            let va = try_val(tx, t, a)?.expect("row a");
                            tx.update(t, &a, &[(1, va - 1)])?;
                            let vb = try_val(tx, t, b)?.expect("row b");
                            tx.update(t, &b, &[(1, vb + 1)])
                        });
                    }
                });
            }
            // Stops the writers however the reader leaves (a failed assertion included),
            // so the scope can join them.
            let _stop = StopOnDrop(&stop);
            // A snapshot that read past a Preparing writer which then aborted fails its
            // reads as the cascading abort (`Transaction::doom_if_deps_aborted`): it has no
            // sum to give and is dropped, counted; any other error, or a wrong sum, fails.
            let sum = |tx: &mut Transaction<'_>| -> Result<Option<i64>> {
                (0..KEYS).map(|k| try_val(tx, &t, k)).sum()
            };
            let cascaded = |e: &Error| {
                matches!(
                    e,
                    Error::SerializationFailure(AbortReason::CommitDependency)
                )
            };
            let mut open: Vec<Transaction<'_>> = Vec::new();
            let (mut r, mut reads, mut dropped) = (7u64, 0u64, 0u64);
            for round in 0..400 {
                if open.len() < 4 || next(&mut r).is_multiple_of(4) {
                    let mut tx = db.begin().unwrap();
                    match sum(&mut tx) {
                        Err(e) if cascaded(&e) => dropped += 1,
                        s => {
                            assert_eq!(s.unwrap(), Some(want), "{storage}");
                            open.push(tx);
                        }
                    }
                }
                if open.len() > 4 {
                    open.remove((next(&mut r) % open.len() as u64) as usize);
                }
                let before = open.len();
                open.retain_mut(|tx| match sum(tx) {
                    Err(e) if cascaded(&e) => false,
                    s => {
                        assert_eq!(s.unwrap(), Some(want), "{storage}: round {round}");
                        true
                    }
                });
                reads += open.len() as u64;
                dropped += (before - open.len()) as u64;
                std::thread::sleep(std::time::Duration::from_micros(500));
            }
            // The test checks open snapshots, so few may be lost to cascading aborts.
            assert!(
                reads > 1000 && dropped * 10 < reads,
                "{storage}: {reads} {dropped}"
            );
        });
        assert!(db.stats().versions_pruned_dead_zone > 0, "{storage}");
    }
}

struct StopOnDrop<'a>(&'a std::sync::atomic::AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}
