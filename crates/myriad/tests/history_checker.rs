//! The history checker on real multi-threaded histories: none of the anomalies a level forbids
//! may appear; and the checker must be able to fail (write skew under SI, relabelled as
//! Serializable, is reported with its transactions and keys).
use crate::common::*;
use myriad::history::{check, Level, TxnRecord};
use myriad::*;
use std::ops::Bound;

pub(crate) fn splitmix(s: &mut u64) -> u64 {
    *s = s.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *s;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

fn recording_db(level: Isolation) -> (Database, TableRef) {
    recording_db_with(config_for(Protocol::Mvocc), level)
}

/// A recording database of configuration `c` (its protocol and storage) at `level`.
fn recording_db_with(c: Config, level: Isolation) -> (Database, TableRef) {
    let db = Database::open(c.isolation(level).record_history(true).max_retries(100_000)).unwrap();
    let t = kv(&db);
    (db, t)
}

/// Random read-modify-write transactions over a few hot keys, with range scans and inserts.
fn rmw_history(level: Isolation, threads: usize, txns: usize, seed: u64) -> Vec<TxnRecord> {
    rmw_history_with(config_for(Protocol::Mvocc), level, threads, txns, seed)
}

fn rmw_history_with(
    c: Config,
    level: Isolation,
    threads: usize,
    txns: usize,
    seed: u64,
) -> Vec<TxnRecord> {
    let (db, t) = recording_db_with(c, level);
    load(&db, &t, 0..8);
    std::thread::scope(|s| {
        for th in 0..threads {
            let (db, t) = (&db, &t);
            s.spawn(move || {
                let mut rng = seed ^ ((th as u64 + 1) * 0x1234_5678);
                for i in 0..txns {
                    let kind = splitmix(&mut rng) % 10;
                    let a = (splitmix(&mut rng) % 8) as i64;
                    let b = (splitmix(&mut rng) % 8) as i64;
                    let fresh = 1000 + (th * txns + i) as i64;
                    db.run(|tx| match kind {
                        0 => {
                            let mut sum = 0;
                            tx.scan(
                                t,
                                Bound::Included(&0i64),
                                Bound::Excluded(&2000i64),
                                ScanOptions::default(),
                                |r| {
                                    sum += v_of(&r);
                                    true
                                },
                            )?;
                            tx.update(t, &a, &[(1, sum % 1000)])
                        }
                        1 => tx.insert(t, &kv_row(t, fresh, 0, fresh, 0)),
                        _ => {
                            let va = try_val(tx, t, a)?.unwrap_or(0);
                            let vb = try_val(tx, t, b)?.unwrap_or(0);
                            if i % 4 == 0 {
                                std::thread::yield_now();
                            }
                            tx.update(t, &b, &[(1, (va + vb + 1) % 1_000_003)])
                        }
                    })
                    .unwrap();
                }
            });
        }
    });
    db.take_history()
}

#[test]
fn serializable_histories_have_no_cycles() {
    for seed in 1..=3 {
        let h = rmw_history(Isolation::Serializable, 4, 400, seed);
        assert!(h.len() > 1600);
        let r = check(&h);
        assert!(r.anomalies.is_empty(), "seed {seed}: {}", r.anomalies[0]);
        assert!(r.edges > 0);
    }
}

#[test]
fn snapshot_histories_have_no_forbidden_cycles() {
    for seed in 1..=3 {
        let h = rmw_history(Isolation::Snapshot, 4, 400, seed);
        let r = check(&h);
        assert!(r.anomalies.is_empty(), "seed {seed}: {}", r.anomalies[0]);
    }
}

#[test]
fn repeatable_read_histories_have_no_item_cycles() {
    let h = rmw_history(Isolation::RepeatableRead, 4, 400, 7);
    let r = check(&h);
    assert!(r.anomalies.is_empty(), "{}", r.anomalies[0]);
}

#[test]
fn bank_histories_are_serializable() {
    let h = bank_history(config_for(Protocol::Mvocc), Isolation::Serializable, 500);
    let r = check(&h);
    assert!(r.anomalies.is_empty(), "{}", r.anomalies[0]);
}

fn bank_history(c: Config, level: Isolation, per_thread: usize) -> Vec<TxnRecord> {
    let (db, t) = recording_db_with(c, level);
    load(&db, &t, 0..6);
    std::thread::scope(|s| {
        for th in 0..3u64 {
            let (db, t) = (&db, &t);
            s.spawn(move || {
                let mut rng = th + 99;
                for _ in 0..per_thread {
                    let a = (splitmix(&mut rng) % 6) as i64;
                    let b = (a + 1 + (splitmix(&mut rng) % 5) as i64) % 6;
                    db.run(|tx| {
                        let va = try_val(tx, t, a)?.unwrap_or(0);
                        let vb = try_val(tx, t, b)?.unwrap_or(0);
                        std::thread::yield_now();
                        tx.update(t, &a, &[(1, va - 1)])?;
                        tx.update(t, &b, &[(1, vb + 1)])
                    })
                    .unwrap();
                }
            });
        }
    });
    db.take_history()
}

/// The protocols other than MVOCC at every level they offer: random read-modify-writes with
/// scans and inserts, and bank transfers, leave no cycle their level forbids.
/// `MYRIAD_HISTORY_TXNS` sets the transactions per thread of the read-modify-write workload
/// (default 500, with 4 threads and 2 seeds: 4,000 committed transactions per combination;
/// the full suite in docs/testing.md runs 12,500 × 4 threads × 2 seeds = 100,000).
#[test]
fn every_protocol_leaves_no_forbidden_cycle() {
    let per_thread: usize = std::env::var("MYRIAD_HISTORY_TXNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(500);
    for p in other_protocols() {
        for &level in Config::isolation_levels(p) {
            let mut total = 0;
            for seed in 1..=2 {
                let h = rmw_history_with(config_for(p), level, 4, per_thread, seed);
                assert_eq!(
                    h.len(),
                    4 * per_thread + 1,
                    "{p} {level}: every txn commits"
                );
                let r = check(&h);
                assert!(
                    r.anomalies.is_empty(),
                    "{p} {level} seed {seed}: {}",
                    r.anomalies[0]
                );
                assert!(r.edges > 0);
                total += h.len();
            }
            let h = bank_history(config_for(p), level, per_thread / 2);
            let r = check(&h);
            assert!(
                r.anomalies.is_empty(),
                "{p} {level} bank: {}",
                r.anomalies[0]
            );
            total += h.len();
            println!("{p} {level}: {total} committed transactions checked");
        }
    }
}

/// ERMIA-SSI with its two optimisations on (safe retry; READ ONLY audits that read every
/// committed version untracked, age 0): updaters that read two rows and write one (so
/// rw-only pivots form, the read-only anomaly's shape) beside READ ONLY audits of every row
/// leave no cycle, and the untracked reads happened. (With the writer's bstamp test and the
/// reader's s2 test disabled, this finds cycles.)
#[test]
fn ermia_ssi_optimisations_leave_no_cycle() {
    let per_thread = history_txns() / 2;
    let c = config_for(Protocol::ErmiaSsi)
        .ermia_safe_retry(true)
        .ermia_old_read_age(0);
    let (db, t) = recording_db_with(c, Isolation::Serializable);
    load(&db, &t, 0..6);
    let ro = TxnOptions {
        isolation: Isolation::Serializable,
        read_only: true,
    };
    std::thread::scope(|s| {
        for th in 0..3u64 {
            let (db, t) = (&db, &t);
            s.spawn(move || {
                let mut rng = th + 7;
                for i in 0..per_thread {
                    if th == 0 && i % 2 == 0 {
                        db.run_with(ro, |tx| {
                            for k in 0..6 {
                                try_val(tx, t, k)?;
                                std::thread::yield_now();
                            }
                            Ok(())
                        })
                        .unwrap();
                        continue;
                    }
                    let a = (splitmix(&mut rng) % 6) as i64;
                    let b = (a + 1 + (splitmix(&mut rng) % 5) as i64) % 6;
                    db.run(|tx| {
                        let va = try_val(tx, t, a)?.unwrap_or(0);
                        let vb = try_val(tx, t, b)?.unwrap_or(0);
                        std::thread::yield_now();
                        tx.update(t, &a, &[(1, (va + vb + 1) % 1_000_003)])
                    })
                    .unwrap();
                }
            });
        }
    });
    let st = db.stats();
    assert!(st.ssi_untracked_reads > 0, "no read went untracked");
    let h = db.take_history();
    let r = check(&h);
    assert!(r.anomalies.is_empty(), "{}", r.anomalies[0]);
    assert!(r.edges > 0);
}

/// OCC⁻ and SILO⁻ (`Config::unsafe_no_validation`, thesis §3.5) are not serializable, and
/// the checker says so: bank transfers (two read-modify-writes over 6 accounts, 3 threads)
/// lose updates without validation, which is a cycle; the same runs validated have none.
/// (Up to three runs for the race to show.) Smallbank's procedures, the chapter's own
/// workload: two threads calling them at random leave no cycle validated; without
/// validation, two calls of each writing procedure on one account, interleaved by hand in
/// two sessions (both read before either commits), lose an update, and the checker finds the
/// cycle every time. (The overlap is built, not waited for: on a loaded host two threads
/// running the procedures, which have no yield inside, may never overlap.)
#[test]
fn unsafe_no_validation_leaves_cycles_the_checker_finds() {
    for p in [Protocol::Occ, Protocol::Silo] {
        let r = check(&smallbank_history(config_for(p), 1));
        assert!(r.anomalies.is_empty(), "{p} smallbank: {}", r.anomalies[0]);
        for call in [
            "amalgamate(7, 8)",
            "deposit_checking(7, 100)",
            "send_payment(7, 8, 5)",
            "transact_savings(7, 100)",
            "write_check(7, 50)",
        ] {
            let validated = interleaved_smallbank(config_for(p), call);
            assert!(
                validated.is_err(),
                "{p} {call}: both interleaved calls committed validated"
            );
            let h = interleaved_smallbank(config_for(p).unsafe_no_validation(true), call)
                .unwrap_or_else(|e| panic!("{p} {call} unvalidated: {e}"));
            assert!(
                !check(&h).anomalies.is_empty(),
                "{p} {call} without validation: lost update not reported"
            );
        }
    }
    for p in [Protocol::Occ, Protocol::Silo] {
        let h = bank_history(config_for(p), Isolation::Serializable, 300);
        let r = check(&h);
        assert!(r.anomalies.is_empty(), "{p}: {}", r.anomalies[0]);
        let found = (0..3).any(|_| {
            let c = config_for(p).unsafe_no_validation(true);
            let h = bank_history(c, Isolation::Serializable, 300);
            assert_eq!(
                h.len(),
                3 * 300 + 1,
                "{p}: every transfer commits unvalidated"
            );
            !check(&h).anomalies.is_empty()
        });
        assert!(found, "{p} without validation: no anomaly in three runs");
    }
}

/// Smallbank on 100 accounts; `call` runs in two sessions on one thread, interleaved: both
/// `BEGIN` and `CALL` before either `COMMIT`s. The history if both commit, or the error the
/// second `COMMIT` returned.
fn interleaved_smallbank(c: Config, call: &str) -> Result<Vec<TxnRecord>> {
    let db = smallbank_db(c);
    let mut s1 = myriad::sql::Session::new(&db);
    let mut s2 = myriad::sql::Session::new(&db);
    s1.execute("BEGIN")?;
    s2.execute("BEGIN")?;
    s1.execute(&format!("CALL {call}"))?;
    s2.execute(&format!("CALL {call}"))?;
    s1.execute("COMMIT")?;
    s2.execute("COMMIT")?;
    drop((s1, s2));
    Ok(db.take_history())
}

pub(crate) fn smallbank_db(c: Config) -> Database {
    let db = Database::open(c.record_history(true).max_retries(100_000)).unwrap();
    let mut s = myriad::sql::Session::new(&db);
    s.execute(include_str!("../../myriad-cli/workloads/smallbank.sql"))
        .unwrap();
    let mut load = String::from("BEGIN;");
    for i in 0..100 {
        load += &format!(
            "INSERT INTO accounts VALUES ({i}, 'c{i}'); INSERT INTO savings VALUES ({i}, 10000); \
             INSERT INTO checking VALUES ({i}, 10000);"
        );
    }
    s.execute(&(load + "COMMIT;")).unwrap();
    drop(s);
    db
}

/// Smallbank (`crates/myriad-cli/workloads/smallbank.sql`) on 100 accounts, 2 threads × 1,500
/// calls, the accounts skewed towards the low ids; user aborts (RAISE) are part of the mix.
fn smallbank_history(c: Config, seed: u64) -> Vec<TxnRecord> {
    let db = smallbank_db(c);
    smallbank_calls(&db, 1500, seed);
    db.take_history()
}

/// Smallbank on `smallbank_db`'s 100 accounts skewed towards the low ids, 2 threads ×
/// `per_thread` calls; user aborts (RAISE) are part of the mix.
pub(crate) fn smallbank_calls(db: &Database, per_thread: usize, seed: u64) {
    let start = std::sync::Barrier::new(2);
    std::thread::scope(|sc| {
        for th in 0..2u64 {
            let start = &start;
            sc.spawn(move || {
                start.wait();
                let mut rng = seed * 1000 + th;
                for _ in 0..per_thread {
                    let mut account = || {
                        let (x, y) = (splitmix(&mut rng) % 100, splitmix(&mut rng) % 100);
                        (x * y / 100) as i64
                    };
                    let (a, b) = (account(), account());
                    let b = if a == b { (a + 1) % 100 } else { b };
                    let (name, args): (&str, Vec<myriad::procedure::Arg>) =
                        match splitmix(&mut rng) % 6 {
                            0 => ("amalgamate", vec![a.into(), b.into()]),
                            1 => ("balance", vec![a.into()]),
                            2 => ("deposit_checking", vec![a.into(), 100i64.into()]),
                            3 => ("send_payment", vec![a.into(), b.into(), 5i64.into()]),
                            4 => ("transact_savings", vec![a.into(), 100i64.into()]),
                            _ => ("write_check", vec![a.into(), 50i64.into()]),
                        };
                    match db.call(name, &args) {
                        Ok(_) | Err(Error::ProcedureAbort { .. }) => {}
                        Err(e) => panic!("{name}: {e}"),
                    }
                }
            });
        }
    });
}

/// The read-modify-write and bank workloads on configuration `c()` at `level` leave no
/// cycle the level forbids (`what` names the run in a failure).
fn assert_no_forbidden_cycle(
    c: impl Fn() -> Config,
    level: Isolation,
    per_thread: usize,
    what: &str,
) {
    let h = rmw_history_with(c(), level, 4, per_thread, 7);
    assert_eq!(h.len(), 4 * per_thread + 1, "{what}: every txn commits");
    let r = check(&h);
    assert!(r.anomalies.is_empty(), "{what}: {}", r.anomalies[0]);
    assert!(r.edges > 0, "{what}");
    let h = bank_history(c(), level, per_thread / 2);
    let r = check(&h);
    assert!(r.anomalies.is_empty(), "{what} bank: {}", r.anomalies[0]);
}

fn history_txns() -> usize {
    std::env::var("MYRIAD_HISTORY_TXNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(500)
}

/// Oldest-to-newest chains (`o2n`, thesis §5.4.1) under every multi-version protocol at every
/// level it offers: the same workloads as above leave no cycle the level forbids. The hot
/// keys make chains long, so readers walk past many superseded versions and GC cuts chains
/// from the front while writers append at the back.
#[test]
fn o2n_chains_leave_no_forbidden_cycle() {
    let multi = std::iter::once(Protocol::Mvocc)
        .chain(other_protocols())
        .filter(|p| !p.single_version());
    for p in multi {
        for &level in Config::isolation_levels(p) {
            let o2n = || config_for(p).version_storage(VersionStorage::AppendO2n);
            assert_no_forbidden_cycle(o2n, level, history_txns(), &format!("{p} {level} o2n"));
        }
    }
}

/// Every accepted storage × GC pairing but o2n + txn (above), from `VersionStorage::ALL` ×
/// `GcPolicy::ALL`, under every multi-version protocol at its strongest level: background
/// vacuuming (`vacuum`, two threads, on both chain orders), cooperative cleaning (`coop`:
/// readers cutting O2N chains), dead-zone pruning (`dead-zone`: n2o with `physical`
/// pointers, o2n with shared non-inline blobs) and no GC, the in-place storages (`time-travel`, `delta`),
/// n2o + txn (the suite's default) with `physical` pointers, and non-inline attributes
/// (`copy`, `shared`: `kv` gains a VARCHAR column every read checks); with primary-key index
/// pointers on the no-GC run and versions from shared memory spaces on two GC runs (one
/// space for every thread; two): no forbidden cycle. (Spaces reuse a freed block at once for
/// whoever allocates next, so a version freed too early would show up as a wrong read.)
#[test]
fn every_storage_and_gc_pairing_leaves_no_forbidden_cycle() {
    let designs = [
        (
            VersionStorage::AppendN2o,
            GcPolicy::Vacuum,
            IndexPointers::LogicalTid,
            1,
            NonInline::Inline,
        ),
        (
            VersionStorage::AppendO2n,
            GcPolicy::Vacuum,
            IndexPointers::LogicalTid,
            0,
            NonInline::Inline,
        ),
        (
            VersionStorage::AppendO2n,
            GcPolicy::Coop,
            IndexPointers::LogicalTid,
            2,
            NonInline::Inline,
        ),
        (
            VersionStorage::AppendN2o,
            GcPolicy::None,
            IndexPointers::LogicalPk,
            0,
            NonInline::Inline,
        ),
        (
            VersionStorage::AppendN2o,
            GcPolicy::Txn,
            IndexPointers::Physical,
            0,
            NonInline::Inline,
        ),
        (
            VersionStorage::AppendO2n,
            GcPolicy::Coop,
            IndexPointers::Physical,
            0,
            NonInline::Inline,
        ),
        (
            VersionStorage::TimeTravel,
            GcPolicy::Txn,
            IndexPointers::LogicalTid,
            1,
            NonInline::Inline,
        ),
        (
            VersionStorage::Delta,
            GcPolicy::Txn,
            IndexPointers::LogicalPk,
            0,
            NonInline::Inline,
        ),
        (
            VersionStorage::Delta,
            GcPolicy::Vacuum,
            IndexPointers::LogicalTid,
            0,
            NonInline::Inline,
        ),
        (
            VersionStorage::AppendN2o,
            GcPolicy::Txn,
            IndexPointers::LogicalTid,
            1,
            NonInline::Copy,
        ),
        (
            VersionStorage::AppendO2n,
            GcPolicy::Coop,
            IndexPointers::LogicalPk,
            0,
            NonInline::Shared,
        ),
        (
            VersionStorage::AppendN2o,
            GcPolicy::Vacuum,
            IndexPointers::LogicalTid,
            0,
            NonInline::Shared,
        ),
        (
            VersionStorage::AppendN2o,
            GcPolicy::DeadZone,
            IndexPointers::Physical,
            1,
            NonInline::Inline,
        ),
        (
            VersionStorage::AppendO2n,
            GcPolicy::DeadZone,
            IndexPointers::LogicalTid,
            0,
            NonInline::Shared,
        ),
    ];
    // Every other accepted pairing (from `VersionStorage::ALL` × `GcPolicy::ALL`, so a new
    // storage or policy runs here by default) on the default pointers, heap and attributes.
    let covered = |s, g| designs.iter().any(|d| (d.0, d.1) == (s, g));
    let defaults = (IndexPointers::LogicalTid, 0, NonInline::Inline);
    let rest = accepted_pairings(&Config::new())
        .into_iter()
        .filter(|&(s, g)| !covered(s, g) && (s, g) != (VersionStorage::AppendO2n, GcPolicy::Txn))
        .map(|(s, g)| (s, g, defaults.0, defaults.1, defaults.2));
    let designs: Vec<_> = designs.into_iter().chain(rest).collect();
    let multi = std::iter::once(Protocol::Mvocc)
        .chain(other_protocols())
        .filter(|p| !p.single_version());
    for p in multi {
        for &(storage, gc, pointers, spaces, non_inline) in &designs {
            let c = || {
                config_for(p)
                    .version_storage(storage)
                    .gc(gc)
                    .gc_threads(2)
                    .gc_interval_txns(4)
                    .index_pointers(pointers)
                    .memory_spaces(spaces)
                    .non_inline(non_inline)
            };
            let level = Config::strongest_isolation(p).unwrap();
            let what = format!("{p} {storage} {gc} {pointers} spaces {spaces} {non_inline:?}");
            assert_no_forbidden_cycle(c, level, history_txns() / 2, &what);
        }
    }
}

/// Rows move between the groups of the ordered secondary index `by_g` while readers collect
/// every group by point lookups or range scans on it. Under every kind of index pointers
/// (`logical-tid`; `logical-pk`, where each entry leads through the primary index;
/// `physical`, one entry per version, judged alone), also on the in-place storages, and every
/// protocol at its strongest level, each reader finds every row in exactly one group, and the
/// recorded history has no cycle the level forbids.
#[test]
fn secondary_index_moves_keep_every_row_in_one_group() {
    const ROWS: i64 = 12;
    let per_thread = (history_txns() / 2).max(50);
    // Index pointers on the protocol's natural storage, and two on the in-place storages.
    let designs = [
        (None, IndexPointers::LogicalTid),
        (None, IndexPointers::LogicalPk),
        (None, IndexPointers::Physical),
        (Some(VersionStorage::Delta), IndexPointers::LogicalTid),
        (Some(VersionStorage::TimeTravel), IndexPointers::LogicalPk),
    ];
    for (storage, pointers) in designs {
        for p in std::iter::once(Protocol::Mvocc).chain(other_protocols()) {
            if std::env::var("MYRIAD_HISTORY_ONLY").is_ok_and(|o| o != p.to_string()) {
                continue;
            }
            // `physical` points at versions of append-only chains; in-place storage is
            // multi-version.
            if (pointers == IndexPointers::Physical || storage.is_some()) && p.single_version() {
                continue;
            }
            let level = Config::strongest_isolation(p).unwrap();
            let mut c = config_for(p).index_pointers(pointers);
            if let Some(s) = storage {
                c = c.version_storage(s);
            }
            let what = format!("{p} {level} {pointers} {}", c.get_storage());
            let (db, t) = recording_db_with(c, level);
            load(&db, &t, 0..ROWS);
            std::thread::scope(|s| {
                for th in 0..4u64 {
                    let (db, t, what) = (&db, &t, &what);
                    s.spawn(move || {
                        let mut rng = 0x5eed ^ ((th + 1) * 0x9e37_79b9);
                        for i in 0..per_thread {
                            let k = (splitmix(&mut rng) % ROWS as u64) as i64;
                            let g = (splitmix(&mut rng) % 3) as i64;
                            if th < 2 {
                                db.run(|tx| tx.update(t, &k, &[(3, g)])).unwrap();
                                continue;
                            }
                            let point = i % 2 == 0;
                            let mut seen = db
                                .run(|tx| {
                                    let mut seen = Vec::new();
                                    for g in 0..3i64 {
                                        let mut add = |r: RowRef<'_>| {
                                            seen.push(r.i64(0).unwrap());
                                            true
                                        };
                                        if point {
                                            tx.get_by(t, 2, &g, &mut add)?;
                                        } else {
                                            let opts = ScanOptions {
                                                index: 2,
                                                ..ScanOptions::default()
                                            };
                                            let (lo, hi) =
                                                (Bound::Included(&g), Bound::Included(&g));
                                            tx.scan(t, lo, hi, opts, &mut add)?;
                                        }
                                    }
                                    Ok(seen)
                                })
                                .unwrap();
                            seen.sort_unstable();
                            assert_eq!(seen, (0..ROWS).collect::<Vec<_>>(), "{what}");
                        }
                    });
                }
            });
            let h = db.take_history();
            let r = check(&h);
            assert!(r.anomalies.is_empty(), "{what}: {}", r.anomalies[0]);
            assert!(r.edges > 0, "{what}");
        }
    }
}

/// The predicate write skew through a secondary index: MVTO (scan-ts), MV2PL (re-scan at
/// commit) SSN and ERMIA-SSI (the index's stamps, the re-scan) abort one of the two; SI and ERMIA-SI let both commit (and the
/// checker then finds the G2).
#[test]
fn every_protocol_handles_the_secondary_index_write_skew() {
    for p in other_protocols() {
        let level = Config::strongest_isolation(p).unwrap();
        for point_lookup in [false, true] {
            let (db, t) = recording_db_with(config_for(p), level);
            load(&db, &t, 0..2);
            let group = |tx: &mut Transaction<'_>, g: i64| -> Result<usize> {
                if point_lookup {
                    tx.get_by(&t, 2, &g, |_| true)
                } else {
                    let opts = ScanOptions {
                        index: 2,
                        ..ScanOptions::default()
                    };
                    tx.scan(&t, Bound::Included(&g), Bound::Included(&g), opts, |_| true)
                }
            };
            let mut a = db.begin().unwrap();
            let mut b = db.begin().unwrap();
            assert_eq!(group(&mut a, 7).unwrap(), 0);
            assert_eq!(group(&mut b, 9).unwrap(), 0);
            let ok_a = a
                .insert(&t, &(10i64, 0i64, 10i64, 9i64))
                .and_then(|_| a.commit())
                .is_ok();
            let ok_b = b
                .insert(&t, &(11i64, 0i64, 11i64, 7i64))
                .and_then(|_| b.commit())
                .is_ok();
            let mut h = db.take_history();
            if matches!(p, Protocol::Si | Protocol::ErmiaSi) {
                assert!(ok_a && ok_b, "SI lets both commit");
                for r in h.iter_mut() {
                    r.level = Level::Serializable;
                }
                assert_eq!(check(&h).anomalies.len(), 1);
            } else {
                assert!(!(ok_a && ok_b), "{p}: one of the two must abort");
                assert!(check(&h).anomalies.is_empty());
            }
        }
    }
}

#[test]
fn write_skew_under_si_is_reported_when_judged_as_serializable() {
    let (db, t) = recording_db(Isolation::Snapshot);
    load(&db, &t, 0..2);
    let mut a = db.begin().unwrap();
    let mut b = db.begin().unwrap();
    let sa = val(&mut a, &t, 0).unwrap() + val(&mut a, &t, 1).unwrap();
    let sb = val(&mut b, &t, 0).unwrap() + val(&mut b, &t, 1).unwrap();
    a.update(&t, &0i64, &[(1, sa - 100)]).unwrap();
    b.update(&t, &1i64, &[(1, sb - 100)]).unwrap();
    a.commit().unwrap();
    b.commit().unwrap();
    let mut h = db.take_history();
    // As SI it is allowed.
    assert!(check(&h).anomalies.is_empty());
    // The same history judged as Serializable has an rw-rw cycle.
    for r in h.iter_mut() {
        r.level = Level::Serializable;
    }
    let report = check(&h);
    assert_eq!(report.anomalies.len(), 1, "{:?}", report.anomalies);
    let text = report.anomalies[0].to_string();
    let ids: Vec<u64> = h
        .iter()
        .filter(|r| !r.writes.is_empty())
        .map(|r| r.id)
        .skip(1)
        .collect();
    for id in ids {
        assert!(text.contains(&id.to_string()), "{text} names txn {id}");
    }
}

#[test]
fn snapshot_workload_judged_as_serializable_shows_anomalies() {
    // The same random workload that is clean under SI contains write skews and read-only
    // anomalies that Serializable forbids: over several seeds the checker must find some.
    let mut found = 0;
    for seed in 1..=5 {
        let mut h = rmw_history(Isolation::Snapshot, 4, 400, seed);
        for r in h.iter_mut() {
            r.level = Level::Serializable;
        }
        let r = check(&h);
        found += r.anomalies.len();
        println!(
            "seed {seed}: {} txns, {} edges, {} anomalies",
            r.txns,
            r.edges,
            r.anomalies.len()
        );
    }
    assert!(found > 0, "no serialization anomaly in any SI history");
}

/// Each transaction looks for rows of one group through the secondary index `by_g`, finds
/// none, and inserts a row into the other's group: a predicate write skew that only the
/// recorded secondary-index scans and index keys can reveal.
fn secondary_index_write_skew(level: Isolation, point_lookup: bool) -> (Vec<TxnRecord>, bool) {
    let (db, t) = recording_db(level);
    load(&db, &t, 0..2);
    let group = |tx: &mut Transaction<'_>, g: i64| -> usize {
        if point_lookup {
            tx.get_by(&t, 2, &g, |_| true).unwrap()
        } else {
            let opts = ScanOptions {
                index: 2,
                ..ScanOptions::default()
            };
            tx.scan(&t, Bound::Included(&g), Bound::Included(&g), opts, |_| true)
                .unwrap()
        }
    };
    let mut a = db.begin().unwrap();
    let mut b = db.begin().unwrap();
    assert_eq!(group(&mut a, 7), 0);
    assert_eq!(group(&mut b, 9), 0);
    a.insert(&t, &(10i64, 0i64, 10i64, 9i64)).unwrap();
    b.insert(&t, &(11i64, 0i64, 11i64, 7i64)).unwrap();
    let both = a.commit().is_ok() & b.commit().is_ok();
    (db.take_history(), both)
}

#[test]
fn secondary_index_write_skew_is_reported_when_judged_as_serializable() {
    for point_lookup in [false, true] {
        assert_predicate_write_skew(|level| secondary_index_write_skew(level, point_lookup));
    }
}

/// Partial-order timestamps (commit timestamps shared by groups, snapshots that may be
/// stale; with shared and with slot counts) and the locked counter, for every protocol and level they pair with: no
/// forbidden cycle. Under partial-order some updaters must share a commit timestamp, or
/// the run did not exercise groups; under the locked counter none may.
#[test]
fn partial_order_and_locked_counter_histories_have_no_forbidden_cycles() {
    let sources = [
        (TimestampPolicy::PartialOrder, PoCounters::Shared),
        (TimestampPolicy::PartialOrder, PoCounters::Slots),
        (TimestampPolicy::LockedCounter, PoCounters::Shared),
    ];
    for (ts, counters) in sources {
        for p in [Protocol::Mvocc, Protocol::Si] {
            for &level in Config::isolation_levels(p) {
                let c = config_for(p).timestamps(ts).po_counters(counters);
                if c.clone().isolation(level).validate().is_err() {
                    continue;
                }
                let what = format!("{ts} ({counters} counters) {p} {level}");
                let h = rmw_history_with(c, level, 3, 300, 11);
                let r = check(&h);
                assert!(r.anomalies.is_empty(), "{what}: {}", r.anomalies[0]);
                assert_eq!(r.ignored_txns, 0, "{what}");
                let mut updaters: Vec<u64> = h
                    .iter()
                    .filter(|t| !t.writes.is_empty())
                    .map(|t| t.commit_ts)
                    .collect();
                let n = updaters.len();
                updaters.sort_unstable();
                updaters.dedup();
                if ts == TimestampPolicy::PartialOrder {
                    assert!(
                        updaters.len() < n,
                        "{what}: no two updaters shared a timestamp"
                    );
                } else {
                    assert_eq!(updaters.len(), n, "{what}: a shared timestamp");
                }
            }
        }
    }
}
