//! What distinguishes MVTO, MV2PL, SI and SSN from MVOCC (thesis §5.3): who aborts, and why.
//! Each test runs two transactions of one thread in a chosen interleaving.
use crate::common::*;
use myriad::*;
use std::ops::Bound;

fn open_with(p: Protocol) -> (Database, TableRef) {
    let level = Config::strongest_isolation(p).unwrap();
    let db = Database::open(config_for(p).isolation(level)).unwrap();
    let t = kv(&db);
    load(&db, &t, 0..5);
    (db, t)
}

fn read_only(p: Protocol) -> TxnOptions {
    TxnOptions {
        isolation: Config::strongest_isolation(p).unwrap(),
        read_only: true,
    }
}

fn reason<T: std::fmt::Debug>(r: Result<T>) -> AbortReason {
    match r {
        Err(Error::SerializationFailure(reason)) => reason,
        other => panic!("expected a serialization failure, got {other:?}"),
    }
}

/// The isolation levels each protocol must offer, written down apart from
/// `Config::isolation_levels` so the test can disagree with it.
const LEVELS: &[(Protocol, &[Isolation])] = &[
    (
        Protocol::Mvocc,
        &[
            Isolation::ReadCommitted,
            Isolation::RepeatableRead,
            Isolation::Snapshot,
            Isolation::Serializable,
        ],
    ),
    (Protocol::Mvto, &[Isolation::Serializable]),
    (Protocol::Mv2pl, &[Isolation::Serializable]),
    (
        Protocol::Mv2plWait,
        &[
            Isolation::ReadCommitted,
            Isolation::RepeatableRead,
            Isolation::Serializable,
        ],
    ),
    (Protocol::Si, &[Isolation::Snapshot]),
    (Protocol::ErmiaSi, &[Isolation::Snapshot]),
    (Protocol::Ssn, &[Isolation::Serializable]),
    (Protocol::Ssi, &[Isolation::Serializable]),
    (Protocol::ErmiaSsi, &[Isolation::Serializable]),
    (Protocol::Silo, &[Isolation::Serializable]),
    (Protocol::Occ, &[Isolation::Serializable]),
    (Protocol::TwoPl, &[Isolation::Serializable]),
    (Protocol::Hybrid, &[Isolation::Serializable]),
    (Protocol::Healing, &[Isolation::Serializable]),
];

/// Every protocol of `Protocol::ALL` (a new one fails here until its levels are in
/// `LEVELS`) offers exactly its levels and refuses every other one, at open and at begin.
#[test]
fn each_protocol_offers_only_the_levels_it_can_honour() {
    for &p in Protocol::ALL {
        let levels = LEVELS
            .iter()
            .find(|(q, _)| *q == p)
            .map(|(_, l)| *l)
            .unwrap_or_else(|| panic!("{p}: write down the levels it must offer in LEVELS"));
        assert_eq!(Config::isolation_levels(p), levels, "{p}");
        for l in Isolation::ALL.iter().filter(|l| !levels.contains(l)) {
            let e = open_err(config_for(p).isolation(*l));
            let msg = e.to_string();
            assert!(matches!(e, Error::InvalidConfig(_)), "{p} {l}: {e}");
            assert!(msg.contains(p.name()) && msg.contains(l.name()), "{msg}");
        }
        // A transaction asking for a level its protocol lacks is refused the same way.
        let (db, _) = open_with(p);
        if let Some(other) = Isolation::ALL.iter().find(|l| !levels.contains(l)) {
            assert!(matches!(
                db.begin_with(iso(*other)),
                Err(Error::InvalidConfig(_))
            ));
        }
    }
    // MVTO orders by the begin timestamp; ERMIA's log manager by the end timestamp.
    let dir = tempdir("mvto-ermia");
    let e = open_err(
        Config::new()
            .protocol(Protocol::Mvto)
            .data_dir(&dir)
            .log(LogPolicy::Logical)
            .log_manager(LogManagerKind::Ermia),
    );
    assert!(e.to_string().contains("mvto"), "{e}");
}

/// Commit dependencies are a choice only where a protocol can take them (`mvocc`, `si`);
/// asking any other protocol for them is refused by name, never silently ignored.
/// Unset, each protocol runs as it is built; `false` is what the others do anyway.
#[test]
fn commit_dependencies_are_refused_where_a_protocol_cannot_take_them() {
    for &p in Protocol::ALL {
        let config = || config_for(p).isolation(Config::strongest_isolation(p).unwrap());
        assert_eq!(
            config().get_commit_dependencies(),
            Config::can_speculate(p),
            "{p}"
        );
        Database::open(config().commit_dependencies(false)).unwrap();
        let on = config().commit_dependencies(true);
        if Config::can_speculate(p) {
            Database::open(on).unwrap();
        } else {
            let e = open_err(on);
            assert!(matches!(e, Error::InvalidConfig(_)), "{p}: {e}");
            assert!(e.to_string().contains(&format!("`{p}`")), "{p}: {e}");
        }
    }
    assert!(!Config::can_speculate(Protocol::ErmiaSi));
}

fn open_err(c: Config) -> Error {
    match Database::open(c) {
        Ok(_) => panic!("the configuration was accepted"),
        Err(e) => e,
    }
}

/// A data directory under the system's temporary directory, removed when dropped (so a
/// test run leaves nothing behind).
struct TempDir(std::path::PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

impl AsRef<std::path::Path> for TempDir {
    fn as_ref(&self) -> &std::path::Path {
        &self.0
    }
}

impl From<&TempDir> for std::path::PathBuf {
    fn from(d: &TempDir) -> Self {
        d.0.clone()
    }
}

fn tempdir(name: &str) -> TempDir {
    let d = std::env::temp_dir().join(format!("myriad-cc-protocols-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    TempDir(d)
}

#[test]
fn mvto_a_write_after_a_later_read_aborts() {
    let (db, t) = open_with(Protocol::Mvto);
    let mut early = db.begin().unwrap();
    let mut late = db.begin().unwrap();
    assert!(early.begin_ts() < late.begin_ts());
    assert_eq!(val(&mut late, &t, 1), Some(1));
    // The later transaction's read-ts is on the version: the earlier one may not supersede it.
    assert_eq!(
        reason(early.update(&t, &1i64, &[(1, 10i64)])),
        AbortReason::TimestampOrder
    );
    late.commit().unwrap();
    // Without the read, the same write commits.
    let mut early = db.begin().unwrap();
    let mut late = db.begin().unwrap();
    early.update(&t, &2i64, &[(1, 20i64)]).unwrap();
    early.commit().unwrap();
    // And the later transaction, reading after that commit, sees it (ts order).
    assert_eq!(val(&mut late, &t, 2), Some(20));
    late.commit().unwrap();
    assert!(db.stats().aborted(AbortReason::TimestampOrder) >= 1);
}

#[test]
fn mvto_reads_never_see_or_wait_for_uncommitted_writes() {
    let (db, t) = open_with(Protocol::Mvto);
    // A later writer's uncommitted version is simply not there for an earlier reader.
    let mut early = db.begin().unwrap();
    let mut late = db.begin().unwrap();
    late.update(&t, &1i64, &[(1, 11i64)]).unwrap();
    assert_eq!(val(&mut early, &t, 1), Some(1));
    early.commit().unwrap();
    late.commit().unwrap();
    // An earlier writer's uncommitted version: a later reader aborts instead of waiting
    // (thesis §5.3.1).
    let mut early = db.begin().unwrap();
    let mut late = db.begin().unwrap();
    early.update(&t, &3i64, &[(1, 33i64)]).unwrap();
    assert_eq!(reason(late.get(&t, &3i64)), AbortReason::TimestampOrder);
    early.commit().unwrap();
    let mut after = db.begin().unwrap();
    assert_eq!(val(&mut after, &t, 3), Some(33));
}

/// A READ ONLY MVTO transaction reads a snapshot once every older transaction has finished.
/// While an older one stays open past the wait, the begin fails with `snapshot_wait` — it
/// does not quietly become a read-tracking MVTO reader (which would leave read-ts on the
/// versions and abort the older writer). Once the older one ends, the snapshot is granted.
#[test]
fn mvto_read_only_fails_instead_of_becoming_a_tracked_reader() {
    let (db, t) = open_with(Protocol::Mvto);
    let mut older = db.begin().unwrap();
    older.update(&t, &1i64, &[(1, 10i64)]).unwrap();
    let before = db.stats().aborted(AbortReason::SnapshotWait);
    assert_eq!(
        reason(db.begin_with(read_only(Protocol::Mvto)).map(|_| ())),
        AbortReason::SnapshotWait
    );
    assert_eq!(db.stats().aborted(AbortReason::SnapshotWait), before + 1);
    // Nothing of the refused reader stays behind: the older writer still commits.
    older.commit().unwrap();
    let mut ro = db.begin_with(read_only(Protocol::Mvto)).unwrap();
    assert_eq!(val(&mut ro, &t, 1), Some(10));
    ro.commit().unwrap();
    // `run` retries the refusal like any serialization failure.
    let mut older = db.begin().unwrap();
    older.update(&t, &2i64, &[(1, 20i64)]).unwrap();
    std::thread::scope(|s| {
        let r = s.spawn(|| db.run_with(read_only(Protocol::Mvto), |tx| Ok(val(tx, &t, 2))));
        std::thread::sleep(std::time::Duration::from_millis(60));
        older.commit().unwrap();
        assert_eq!(r.join().unwrap().unwrap(), Some(20));
    });
}

#[test]
fn mvto_an_insert_into_a_range_a_later_transaction_scanned_aborts() {
    let (db, t) = open_with(Protocol::Mvto);
    let count = |tx: &mut Transaction<'_>| {
        tx.scan(
            &t,
            Bound::Included(&10i64),
            Bound::Excluded(&20i64),
            ScanOptions::default(),
            |_| true,
        )
        .unwrap()
    };
    let mut early = db.begin().unwrap();
    let mut late = db.begin().unwrap();
    assert_eq!(count(&mut late), 0);
    assert_eq!(
        reason(early.insert(&t, &(15i64, 1i64, 15i64, 0i64))),
        AbortReason::TimestampOrder
    );
    late.commit().unwrap();
    // A point lookup that found nothing protects the absence too.
    let mut early = db.begin().unwrap();
    let mut late = db.begin().unwrap();
    assert_eq!(val(&mut late, &t, 16), None);
    assert_eq!(
        reason(early.insert(&t, &(16i64, 1i64, 16i64, 0i64))),
        AbortReason::TimestampOrder
    );
    late.commit().unwrap();
    // A secondary-index scan: moving a row into the scanned key aborts the older writer.
    let mut early = db.begin().unwrap();
    let mut late = db.begin().unwrap();
    assert_eq!(late.get_by(&t, 2, &(7i64,), |_| true).unwrap(), 0);
    assert_eq!(
        reason(early.update(&t, &0i64, &[(3, 7i64)])),
        AbortReason::TimestampOrder
    );
    late.commit().unwrap();
    // An insert by a transaction later than every scan commits.
    let mut tx = db.begin().unwrap();
    tx.insert(&t, &(17i64, 1i64, 17i64, 0i64)).unwrap();
    tx.commit().unwrap();
}

#[test]
fn mv2pl_read_locks_block_writers_and_write_locks_block_readers() {
    let (db, t) = open_with(Protocol::Mv2pl);
    let mut reader = db.begin().unwrap();
    let mut writer = db.begin().unwrap();
    assert_eq!(val(&mut reader, &t, 1), Some(1));
    assert_eq!(
        reason(writer.update(&t, &1i64, &[(1, 10i64)])),
        AbortReason::LockConflict
    );
    // The only reader may upgrade its own read lock.
    reader.update(&t, &1i64, &[(1, 12i64)]).unwrap();
    reader.commit().unwrap();
    // Locks are released at commit: a new writer gets it.
    let mut w = db.begin().unwrap();
    w.update(&t, &1i64, &[(1, 13i64)]).unwrap();
    // A write lock blocks a reader (no-wait: it aborts).
    let mut r = db.begin().unwrap();
    assert_eq!(reason(r.get(&t, &1i64)), AbortReason::LockConflict);
    w.commit().unwrap();
    // And released at abort.
    let mut r = db.begin().unwrap();
    assert_eq!(val(&mut r, &t, 2), Some(2));
    r.abort();
    let mut w = db.begin().unwrap();
    w.update(&t, &2i64, &[(1, 22i64)]).unwrap();
    w.commit().unwrap();
}

#[test]
fn mv2pl_a_read_of_a_version_replaced_after_the_snapshot_aborts() {
    let (db, t) = open_with(Protocol::Mv2pl);
    let mut stale = db.begin().unwrap();
    let mut w = db.begin().unwrap();
    w.update(&t, &4i64, &[(1, 44i64)]).unwrap();
    w.commit().unwrap();
    // Locking the version of its snapshot would lock a version that is no longer current.
    assert_eq!(reason(stale.get(&t, &4i64)), AbortReason::LockConflict);
}

#[test]
fn mv2pl_phantoms_are_caught_at_commit() {
    let (db, t) = open_with(Protocol::Mv2pl);
    let mut scanner = db.begin().unwrap();
    let n = scanner
        .scan(
            &t,
            Bound::Included(&10i64),
            Bound::Excluded(&20i64),
            ScanOptions::default(),
            |_| true,
        )
        .unwrap();
    assert_eq!(n, 0);
    let mut ins = db.begin().unwrap();
    ins.insert(&t, &(12i64, 1i64, 12i64, 0i64)).unwrap();
    ins.commit().unwrap();
    scanner.update(&t, &0i64, &[(1, 1i64)]).unwrap();
    assert_eq!(reason(scanner.commit()), AbortReason::Phantom);
}

#[test]
fn si_is_first_updater_wins_without_validation() {
    let (db, t) = open_with(Protocol::Si);
    // Write skew commits under SI.
    write_skew(&db, &t).unwrap();
    // A second updater of one row aborts at its write.
    let mut a = db.begin().unwrap();
    let mut b = db.begin().unwrap();
    a.update(&t, &2i64, &[(1, 5i64)]).unwrap();
    assert_eq!(
        reason(b.update(&t, &2i64, &[(1, 6i64)])),
        AbortReason::WriteWriteConflict
    );
    a.commit().unwrap();
}

fn scan_10_to_20(tx: &mut Transaction<'_>, t: &TableRef) -> Result<usize> {
    tx.scan(
        t,
        Bound::Included(&10i64),
        Bound::Excluded(&20i64),
        ScanOptions::default(),
        |_| true,
    )
}

/// SSN serializes by dependencies, not by commit order: a reader whose row was replaced by a
/// transaction that committed first may still commit (it serializes before that one), which
/// MVOCC's read validation refuses; write skew closes a cycle and fails the exclusion test.
#[test]
fn ssn_commits_out_of_commit_order_and_aborts_write_skew() {
    for p in [Protocol::Ssn, Protocol::Mvocc] {
        let (db, t) = open_with(p);
        let mut t1 = db.begin().unwrap();
        assert_eq!(val(&mut t1, &t, 0), Some(0));
        let mut t2 = db.begin().unwrap();
        t2.update(&t, &0i64, &[(1, 10i64)]).unwrap();
        t2.commit().unwrap();
        t1.update(&t, &1i64, &[(1, 11i64)]).unwrap();
        match p {
            Protocol::Ssn => t1.commit().unwrap(),
            _ => assert_eq!(reason(t1.commit()), AbortReason::ReadValidation),
        }
    }
    let (db, t) = open_with(Protocol::Ssn);
    assert_eq!(reason(write_skew(&db, &t)), AbortReason::Exclusion);
}

/// Two transactions each read rows 0 and 1 and write one of them; the first commits, the
/// second's commit is returned.
fn write_skew(db: &Database, t: &TableRef) -> Result<()> {
    let mut a = db.begin().unwrap();
    let mut b = db.begin().unwrap();
    let (a0, a1) = (val(&mut a, t, 0).unwrap(), val(&mut a, t, 1).unwrap());
    let (b0, b1) = (val(&mut b, t, 0).unwrap(), val(&mut b, t, 1).unwrap());
    a.update(t, &0i64, &[(1, a0 + a1)]).unwrap();
    b.update(t, &1i64, &[(1, b0 + b1)]).unwrap();
    a.commit().unwrap();
    b.commit()
}

/// ERMIA's SSI aborts every dangerous structure T1 → T2 → T3 whose T3 committed first, cycle
/// or not; SSN only where the exclusion window closes. Here T1 read x, T2 read y and replaced
/// x, T3 replaced y and committed first, then T2: the serial order T1, T2, T3 exists, so SSN
/// commits T1, while ERMIA-SSI aborts it (it meets x's s2 when it commits). (ERMIA-SSI's
/// safe retry, off here, would abort T2 instead: T1 is in flight when T2 commits.)
#[test]
fn ermia_ssi_aborts_a_dangerous_structure_that_ssn_lets_commit() {
    for p in [Protocol::Ssn, Protocol::ErmiaSsi, Protocol::Ssi] {
        let (db, t) = if p == Protocol::ErmiaSsi {
            let db = Database::open(config_for(p).ermia_safe_retry(false)).unwrap();
            let t = kv(&db);
            load(&db, &t, 0..5);
            (db, t)
        } else {
            open_with(p)
        };
        let mut t1 = db.begin().unwrap();
        assert_eq!(val(&mut t1, &t, 0), Some(0));
        let mut t2 = db.begin().unwrap();
        assert_eq!(val(&mut t2, &t, 1), Some(1));
        t2.update(&t, &0i64, &[(1, 10i64)]).unwrap();
        let mut t3 = db.begin().unwrap();
        t3.update(&t, &1i64, &[(1, 11i64)]).unwrap();
        t3.commit().unwrap();
        t2.commit().unwrap();
        match p {
            Protocol::Ssn => t1.commit().unwrap(),
            _ => assert_eq!(reason(t1.commit()), AbortReason::Exclusion),
        }
    }
    // Its pivot test: T2 (replacing x after a reader of x committed after T3) aborts; so
    // does SSI's (T2 has both flags).
    for p in [Protocol::ErmiaSsi, Protocol::Ssi] {
        let (db, t) = open_with(p);
        let mut t1 = db.begin().unwrap();
        assert_eq!(val(&mut t1, &t, 0), Some(0));
        let mut t2 = db.begin().unwrap();
        assert_eq!(val(&mut t2, &t, 1), Some(1));
        let mut t3 = db.begin().unwrap();
        t3.update(&t, &1i64, &[(1, 11i64)]).unwrap();
        t3.commit().unwrap();
        t1.update(&t, &2i64, &[(1, 12i64)]).unwrap();
        t1.commit().unwrap();
        t2.update(&t, &0i64, &[(1, 10i64)]).unwrap();
        assert_eq!(reason(t2.commit()), AbortReason::Exclusion, "{p}");
    }
}

/// ERMIA-SSI's safe retry (ERMIA §3.6): T2 read x, which T3 replaced and committed (T2 has
/// s1), and replaces y, which the in-flight T1 read. On, T2 aborts at pre-commit and T1
/// commits; off, T2 commits and T1 aborts when it commits (it meets y's s2). Either way one
/// of the structure's transactions aborts; safe retry picks the one whose retry is safe.
#[test]
fn ermia_ssi_safe_retry_aborts_the_pivot_instead_of_its_reader() {
    for on in [true, false] {
        let db = Database::open(config_for(Protocol::ErmiaSsi).ermia_safe_retry(on)).unwrap();
        let t = kv(&db);
        load(&db, &t, 0..5);
        let mut t1 = db.begin().unwrap();
        assert_eq!(val(&mut t1, &t, 1), Some(1));
        let mut t2 = db.begin().unwrap();
        assert_eq!(val(&mut t2, &t, 0), Some(0));
        let mut t3 = db.begin().unwrap();
        t3.update(&t, &0i64, &[(1, 10i64)]).unwrap();
        t3.commit().unwrap();
        t2.update(&t, &1i64, &[(1, 11i64)]).unwrap();
        if on {
            assert_eq!(reason(t2.commit()), AbortReason::Exclusion);
            t1.commit().unwrap();
            assert_eq!(db.stats().ssi_safe_retries, 1);
        } else {
            t2.commit().unwrap();
            assert_eq!(reason(t1.commit()), AbortReason::Exclusion);
            assert_eq!(db.stats().ssi_safe_retries, 0);
        }
    }
}

/// Safe retry asks whether the *current* transaction of a slot whose reader bit a version has
/// read it (`Slot::reads`): a bit left by a committed reader does not abort the pivot while
/// its slot runs a transaction that did not read the version. (Before the filter, T2 below
/// aborted: the slot was busy and its bit set.) A reader of y that is in flight still makes
/// T2 abort: `ermia_ssi_safe_retry_aborts_the_pivot_instead_of_its_reader`.
#[test]
fn ermia_ssi_safe_retry_ignores_a_reader_bit_left_by_a_finished_transaction() {
    let (db, t) = open_with(Protocol::ErmiaSsi);
    // A reader of y commits; its slot's bit stays on y's version.
    let mut old = db.begin().unwrap();
    assert_eq!(val(&mut old, &t, 1), Some(1));
    old.commit().unwrap();
    // The thread's next transaction takes the same slot and reads z only.
    let mut t1 = db.begin().unwrap();
    assert_eq!(val(&mut t1, &t, 2), Some(2));
    let mut t2 = db.begin().unwrap();
    assert_eq!(val(&mut t2, &t, 0), Some(0));
    let mut t3 = db.begin().unwrap();
    t3.update(&t, &0i64, &[(1, 10i64)]).unwrap();
    t3.commit().unwrap();
    t2.update(&t, &1i64, &[(1, 11i64)]).unwrap();
    t2.commit().unwrap();
    t1.commit().unwrap();
    assert_eq!(db.stats().ssi_safe_retries, 0);
    let mut r = db.begin().unwrap();
    assert_eq!(val(&mut r, &t, 1), Some(11));
}

/// ERMIA-SSI's old-version reads (ERMIA §3.6): a READ ONLY transaction leaves old versions
/// out of its read set, so the writer of such a version and the reader itself take over
/// its pre-commit checks. T2 read x, T3 replaced x and committed (T2's s1 = T3's stamp).
/// - A reader R that began after T3 committed and read y untracked makes T2, replacing y,
///   the pivot of R → T2 → T3: T2 aborts (R's bstamp ≥ s1).
/// - One that began before T3 committed cannot close a cycle through T2: T2 commits (the
///   test is not one timestamp too eager).
/// - A reader that begins after T3 but before T2 committed, and reads y once T2 did, meets
///   y's s2 (T3's stamp ≤ its begin) and aborts at the read, as T1.
#[test]
fn ermia_ssi_untracked_old_reads_move_the_checks_to_writer_and_read() {
    let open = || {
        let db = Database::open(config_for(Protocol::ErmiaSsi).ermia_old_read_age(0)).unwrap();
        let t = kv(&db);
        load(&db, &t, 0..5);
        (db, t)
    };
    let ro = read_only(Protocol::ErmiaSsi);
    // The writer's test.
    let (db, t) = open();
    let mut t2 = db.begin().unwrap();
    assert_eq!(val(&mut t2, &t, 0), Some(0));
    let mut t3 = db.begin().unwrap();
    t3.update(&t, &0i64, &[(1, 10i64)]).unwrap();
    t3.commit().unwrap();
    let mut r = db.begin_with(ro).unwrap();
    assert_eq!(val(&mut r, &t, 1), Some(1));
    assert_eq!(val(&mut r, &t, 0), Some(10));
    r.commit().unwrap();
    assert_eq!(db.stats().ssi_untracked_reads, 2);
    t2.update(&t, &1i64, &[(1, 11i64)]).unwrap();
    assert_eq!(reason(t2.commit()), AbortReason::Exclusion);
    assert_eq!(db.stats().ssi_old_read_aborts, 1);
    // A reader that began before T3 committed: no cycle, T2 commits.
    let (db, t) = open();
    let mut t2 = db.begin().unwrap();
    assert_eq!(val(&mut t2, &t, 0), Some(0));
    let mut r = db.begin_with(ro).unwrap();
    let mut t3 = db.begin().unwrap();
    t3.update(&t, &0i64, &[(1, 10i64)]).unwrap();
    t3.commit().unwrap();
    assert_eq!(val(&mut r, &t, 1), Some(1));
    assert_eq!(val(&mut r, &t, 0), Some(0));
    r.commit().unwrap();
    t2.update(&t, &1i64, &[(1, 11i64)]).unwrap();
    t2.commit().unwrap();
    assert_eq!(db.stats().ssi_old_read_aborts, 0);
    // The reader's own test at the read.
    let (db, t) = open();
    let mut t2 = db.begin().unwrap();
    assert_eq!(val(&mut t2, &t, 0), Some(0));
    let mut t3 = db.begin().unwrap();
    t3.update(&t, &0i64, &[(1, 10i64)]).unwrap();
    t3.commit().unwrap();
    let mut r = db.begin_with(ro).unwrap();
    t2.update(&t, &1i64, &[(1, 11i64)]).unwrap();
    t2.commit().unwrap();
    assert_eq!(val(&mut r, &t, 0), Some(10));
    assert_eq!(reason(r.get(&t, &1i64)), AbortReason::Exclusion);
    assert_eq!(db.stats().ssi_old_read_aborts, 1);
    // The knobs belong to ermia-ssi alone.
    for c in [
        config_for(Protocol::Ssn).ermia_old_read_age(0),
        config_for(Protocol::Ssn).ermia_safe_retry(true),
    ] {
        let e = open_err(c);
        assert!(e.to_string().contains("ermia-ssi"), "{e}");
    }
}

/// Cahill's SSI aborts a transaction with both flags whatever the commit order of its
/// neighbours (the thesis's "false positives"): here T1 read x and committed, T2 read y and
/// replaces x (inConflict: T1 committed after T2 began), and T3 replaced y but has not
/// committed (outConflict). No T3 committed first, so there is no cycle yet and neither SSN
/// nor ERMIA-SSI aborts T2; SSI does. T3 then commits under all three.
#[test]
fn ssi_aborts_a_pivot_whose_successor_has_not_committed() {
    for p in [Protocol::Ssn, Protocol::ErmiaSsi, Protocol::Ssi] {
        let (db, t) = open_with(p);
        let mut t2 = db.begin().unwrap();
        assert_eq!(val(&mut t2, &t, 1), Some(1));
        let mut t3 = db.begin().unwrap();
        t3.update(&t, &1i64, &[(1, 11i64)]).unwrap();
        let mut t1 = db.begin().unwrap();
        assert_eq!(val(&mut t1, &t, 0), Some(0));
        t1.commit().unwrap();
        t2.update(&t, &0i64, &[(1, 10i64)]).unwrap();
        match p {
            Protocol::Ssi => assert_eq!(reason(t2.commit()), AbortReason::Exclusion),
            _ => t2.commit().unwrap(),
        }
        t3.commit().unwrap();
    }
    // Only inConflict, or only outConflict: SSI commits.
    let (db, t) = open_with(Protocol::Ssi);
    let mut t2 = db.begin().unwrap();
    let mut t1 = db.begin().unwrap();
    assert_eq!(val(&mut t1, &t, 0), Some(0));
    t1.commit().unwrap();
    t2.update(&t, &0i64, &[(1, 10i64)]).unwrap();
    t2.commit().unwrap();
    let mut t2 = db.begin().unwrap();
    assert_eq!(val(&mut t2, &t, 1), Some(1));
    let mut t3 = db.begin().unwrap();
    t3.update(&t, &1i64, &[(1, 11i64)]).unwrap();
    t2.update(&t, &2i64, &[(1, 12i64)]).unwrap();
    t2.commit().unwrap();
    t3.commit().unwrap();
}

/// SSN's phantoms: a scanner whose range gained a row committed before it aborts; an
/// inserter into a range scanned by a transaction that committed first takes that
/// transaction's stamp from the index, which closes the cycle below (without the index
/// stamp both would commit: each edge alone is harmless).
#[test]
fn ssn_phantoms_by_rescan_and_by_index_stamps() {
    let (db, t) = open_with(Protocol::Ssn);
    let mut scanner = db.begin_with(read_only(Protocol::Ssn)).unwrap();
    assert_eq!(scan_10_to_20(&mut scanner, &t).unwrap(), 0);
    let mut ins = db.begin().unwrap();
    ins.insert(&t, &(12i64, 1i64, 12i64, 0i64)).unwrap();
    ins.commit().unwrap();
    assert_eq!(reason(scanner.commit()), AbortReason::Phantom);

    let (db, t) = open_with(Protocol::Ssn);
    // t2 reads row 0; t1 scans the empty range, replaces row 0 and commits (t2 -> t1);
    // t2 inserts into t1's range (t1 -> t2): a cycle.
    let mut t2 = db.begin().unwrap();
    assert_eq!(val(&mut t2, &t, 0), Some(0));
    let mut t1 = db.begin().unwrap();
    assert_eq!(scan_10_to_20(&mut t1, &t).unwrap(), 0);
    t1.update(&t, &0i64, &[(1, 5i64)]).unwrap();
    t1.commit().unwrap();
    t2.insert(&t, &(15i64, 1i64, 15i64, 0i64)).unwrap();
    assert_eq!(reason(t2.commit()), AbortReason::Exclusion);
    // The same insert without the read of row 0 is no cycle and commits.
    let mut t3 = db.begin().unwrap();
    t3.insert(&t, &(15i64, 1i64, 15i64, 0i64)).unwrap();
    t3.commit().unwrap();
}

/// A READ ONLY transaction reads a snapshot: under MVTO it draws no timestamp and leaves no
/// read-ts, under MV2PL it takes no read lock, so writers are never aborted by it.
#[test]
fn read_only_transactions_read_a_snapshot_and_block_no_writer() {
    for p in [Protocol::Mvto, Protocol::Mv2pl] {
        let (db, t) = open_with(p);
        let before = db.stats();
        let mut ro = db.begin_with(read_only(p)).unwrap();
        let mut w = db.begin().unwrap();
        assert_eq!(val(&mut ro, &t, 1), Some(1));
        // Under MVTO the writer is later than the snapshot, under MV2PL nothing is locked:
        // either way the write is allowed and the snapshot keeps its value.
        w.update(&t, &1i64, &[(1, 10i64)]).unwrap();
        w.commit().unwrap();
        assert_eq!(val(&mut ro, &t, 1), Some(1), "{p}");
        ro.commit().unwrap();
        let after = db.stats();
        // One writer: one timestamp (MVTO: drawn at its begin; MV2PL: at its commit).
        assert_eq!(after.global_rmw - before.global_rmw, 1, "{p}");
        // Without the hint the same reader is tracked, and a later writer of what it read...
        let mut r = db.begin().unwrap();
        assert_eq!(val(&mut r, &t, 1), Some(10));
        let mut w = db.begin().unwrap();
        let e = w.update(&t, &1i64, &[(1, 11i64)]);
        match p {
            // ... is fine under MVTO (it is later than the reader) ...
            Protocol::Mvto => e.unwrap(),
            // ... and blocked by the read lock under MV2PL.
            _ => assert_eq!(reason(e), AbortReason::LockConflict),
        }
    }
}

/// Hekaton §5.2.2: a long serializable read-only transaction over 10% of the table does not
/// stop updates from committing under the multi-version protocols.
#[test]
fn updates_keep_committing_while_a_long_reader_runs() {
    const ROWS: i64 = 5_000;
    let multi_version = other_protocols().filter(|p| !p.single_version());
    for p in std::iter::once(Protocol::Mvocc).chain(multi_version) {
        let level = Config::strongest_isolation(p).unwrap();
        let db = Database::open(config_for(p).isolation(level)).unwrap();
        let t = kv(&db);
        load(&db, &t, 0..ROWS);
        let done = std::sync::atomic::AtomicBool::new(false);
        let committed = std::sync::atomic::AtomicU64::new(0);
        let (reads, writes_during) = std::thread::scope(|s| {
            s.spawn(|| {
                let mut k = 0i64;
                while !done.load(std::sync::atomic::Ordering::Relaxed) {
                    k = (k * 7 + 13) % ROWS;
                    let r = db.run(|tx| {
                        let v = try_val(tx, &t, k)?.unwrap_or(0);
                        tx.update(&t, &k, &[(1, v + 1)])
                    });
                    if r.is_ok() {
                        committed.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    }
                }
            });
            let now = || committed.load(std::sync::atomic::Ordering::Relaxed);
            let mut reads = 0;
            let mut during = u64::MAX;
            for _ in 0..3 {
                // MVTO's snapshot may time out behind the writer on a loaded machine
                // (`snapshot_wait`, retryable); every other failure is one.
                let mut ro = loop {
                    match db.begin_with(read_only(p)) {
                        Err(Error::SerializationFailure(AbortReason::SnapshotWait)) => continue,
                        r => break r.unwrap(),
                    }
                };
                let before = now();
                let mut sum = 0i64;
                for k in 0..ROWS / 10 {
                    sum += val(&mut ro, &t, k).unwrap();
                    if k % 100 == 0 {
                        std::thread::sleep(std::time::Duration::from_millis(1));
                    }
                }
                // The reader stays open until the writer has committed past it (a loaded
                // machine may not schedule the writer at once); a protocol whose readers
                // block writers never gets there.
                let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
                while now() < before + 20 && std::time::Instant::now() < deadline {
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
                during = during.min(now() - before);
                assert!(sum >= (0..ROWS / 10).sum::<i64>(), "{p}");
                ro.commit().unwrap();
                reads += 1;
            }
            done.store(true, std::sync::atomic::Ordering::Relaxed);
            (reads, during)
        });
        assert_eq!(reads, 3, "{p}");
        assert!(
            writes_during > 10,
            "{p}: only {writes_during} updates committed while a reader was open"
        );
    }
}

/// SSN on a durable database, under both log managers: its READ ONLY transactions draw
/// commit stamps too (under ERMIA's log every stamp is a log range, covered by a skip
/// record), checkpoints read an MVOCC snapshot, and everything committed survives a reopen
/// with the versions' stamps allocated again.
#[test]
fn ssn_is_durable_under_both_log_managers() {
    for (p, m) in [
        (Protocol::Ssn, LogManagerKind::Epoch),
        (Protocol::Ssn, LogManagerKind::Ermia),
        (Protocol::ErmiaSsi, LogManagerKind::Ermia),
        (Protocol::Ssi, LogManagerKind::Epoch),
    ] {
        let dir = tempdir(&format!("{p}-{m}"));
        let cfg = || {
            Config::new()
                .protocol(p)
                .data_dir(&dir)
                .log(LogPolicy::Logical)
                .log_manager(m)
        };
        {
            let db = Database::open(cfg()).unwrap();
            let t = kv(&db);
            load(&db, &t, 0..5);
            for i in 0..20i64 {
                let mut ro = db.begin_with(read_only(p)).unwrap();
                assert!(val(&mut ro, &t, i % 5).is_some());
                ro.commit().unwrap();
                db.run(|tx| {
                    let v = val(tx, &t, i % 5).unwrap();
                    tx.update(&t, &(i % 5), &[(1, v + 1)])
                })
                .unwrap();
                if i == 10 {
                    db.checkpoint().unwrap();
                }
            }
        }
        let db = Database::open(cfg()).unwrap();
        let t = db.table("kv").unwrap();
        let mut tx = db.begin().unwrap();
        let sum: i64 = (0..5).map(|k| val(&mut tx, &t, k).unwrap() - k).sum();
        assert_eq!(sum, 20, "{p} {m}");
        tx.commit().unwrap();
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// Command logging is refused where the commit order is not a serial order, naming why:
/// under SSN, SSI and ERMIA-SSI a call may serialize before a transaction that committed
/// earlier (it read what that one replaced); SI and ERMIA-SI run nothing serializable.
#[test]
fn command_logging_is_refused_where_commit_order_is_not_serial() {
    for p in Protocol::ALL.iter().copied() {
        let dir = tempdir(&format!("{p}-refused"));
        let level = Config::strongest_isolation(p).unwrap();
        let r = Database::open(
            config_for(p)
                .isolation(level)
                .data_dir(&dir)
                .log(LogPolicy::Command),
        );
        match p.command_log_refusal() {
            Some(_) => {
                let e = r
                    .err()
                    .unwrap_or_else(|| panic!("{p}: command logging accepted"));
                assert!(matches!(e, Error::InvalidConfig(_)), "{p}: {e}");
                let msg = e.to_string();
                let why = if p.stamped() {
                    "not by commit order"
                } else {
                    "serializable isolation"
                };
                assert!(msg.contains(p.name()) && msg.contains(why), "{p}: {msg}");
            }
            None => {
                assert!(r.is_ok(), "{p}: {:?}", r.err());
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
    let mut refused: Vec<&str> = Protocol::ALL
        .iter()
        .filter(|p| p.command_log_refusal().is_some())
        .map(|p| p.name())
        .collect();
    refused.sort_unstable();
    assert_eq!(refused, ["ermia-si", "ermia-ssi", "si", "ssi", "ssn"]);
}

/// Command logging under the single-version protocols: T1 (a call) reads row 0 and writes
/// row 1, whose TID is far above row 0's; T2 then overwrites row 0 from a fresh slot. By
/// Silo's TID rule alone T2's TID would be the smaller (it observed only row 0), and replay
/// in TID order would run T2 first and copy its value; the TID drawn at the serialization
/// point (`cc::ordered_commit_tid`) puts T2 after T1, and recovery gives the run's state.
#[test]
fn single_version_command_logs_replay_an_anti_dependency_in_order() {
    for p in Protocol::ALL.iter().copied().filter(|p| p.single_version()) {
        anti_dependency_replays_in_order(p);
    }
}

fn anti_dependency_replays_in_order(p: Protocol) {
    let dir = tempdir(&format!("{p}-commands"));
    let level = Config::strongest_isolation(p).unwrap();
    let cfg = || {
        config_for(p)
            .isolation(level)
            .data_dir(&dir)
            .log(LogPolicy::Command)
    };
    {
        let db = Database::open(cfg()).unwrap();
        let t = kv(&db);
        load(&db, &t, 0..2);
        db.create_procedures(
            "CREATE PROCEDURE copy0to1() AS $$
             DECLARE x BIGINT;
             BEGIN
               SELECT v INTO x FROM kv WHERE k = 0;
               UPDATE kv SET v = x WHERE k = 1;
             END $$;",
        )
        .unwrap();
        for i in 0..20i64 {
            db.run(|tx| tx.update(&t, &1i64, &[(1, 100 + i)])).unwrap();
        }
        let copy = db.procedure("copy0to1").unwrap();
        // `hold` keeps this thread's usual slot, so T1 and T2 start in slots whose last TID
        // is zero.
        let hold = db.begin().unwrap();
        let mut t2 = db.begin().unwrap();
        let mut t1 = db.begin().unwrap();
        copy.execute(&mut t1, &[]).unwrap();
        t1.commit().unwrap();
        t2.update(&t, &0i64, &[(1, 10i64)]).unwrap();
        t2.commit().unwrap();
        hold.commit().unwrap();
        let mut r = db.begin().unwrap();
        assert_eq!(
            (val(&mut r, &t, 0), val(&mut r, &t, 1)),
            (Some(10), Some(0)),
            "{p}"
        );
        r.commit().unwrap();
    }
    let db = Database::open(cfg()).unwrap();
    assert_eq!(db.recovery_report().unwrap().calls_replayed, 1, "{p}");
    let t = db.table("kv").unwrap();
    let mut r = db.begin().unwrap();
    assert_eq!(
        (val(&mut r, &t, 0), val(&mut r, &t, 1)),
        (Some(10), Some(0)),
        "{p}: replay ran T2 before T1"
    );
    r.commit().unwrap();
    drop(db);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Silo is single-version: it runs on `single-version` storage only, and the multi-version
/// protocols never do; each refusal names both choices.
#[test]
fn silo_and_the_storage_it_runs_on_are_checked_as_a_pair() {
    let e = open_err(Config::new().protocol(Protocol::Silo));
    assert!(matches!(e, Error::InvalidConfig(_)), "{e}");
    let msg = e.to_string();
    assert!(msg.contains("silo") && msg.contains("n2o"), "{msg}");
    let e = open_err(Config::new().version_storage(VersionStorage::SingleVersion));
    let msg = e.to_string();
    assert!(
        msg.contains("mvocc") && msg.contains("single-version"),
        "{msg}"
    );
    // ERMIA's log manager orders by one shared counter; Silo draws none.
    let dir = tempdir("silo-ermia");
    let e = open_err(
        config_for(Protocol::Silo)
            .data_dir(&dir)
            .log(LogPolicy::Logical)
            .log_manager(LogManagerKind::Ermia),
    );
    assert!(e.to_string().contains("silo"), "{e}");
    // Single-version storage keeps no snapshot for an online checkpoint.
    let dir = tempdir("silo-checkpoint");
    let db = Database::open(
        config_for(Protocol::Silo)
            .data_dir(&dir)
            .log(LogPolicy::Logical),
    )
    .unwrap();
    assert!(matches!(db.checkpoint(), Err(Error::Unsupported(_))));
}

/// Silo buffers writes: a reader keeps reading the committed record while a writer runs,
/// sees its own buffered write, and the writer's commit fails the reader's validation.
#[test]
fn silo_buffers_writes_and_validates_reads_at_commit() {
    let (db, t) = open_with(Protocol::Silo);
    let mut w = db.begin().unwrap();
    w.update(&t, &1i64, &[(1, 10i64)]).unwrap();
    assert_eq!(val(&mut w, &t, 1), Some(10), "read your own buffered write");
    let mut r = db.begin().unwrap();
    assert_eq!(
        val(&mut r, &t, 1),
        Some(1),
        "the buffered write is invisible"
    );
    w.commit().unwrap();
    r.update(&t, &2i64, &[(1, 20i64)]).unwrap();
    assert_eq!(reason(r.commit()), AbortReason::ReadValidation);
    // A reader that starts after the commit reads the new record (no snapshot).
    let mut r = db.begin().unwrap();
    assert_eq!(val(&mut r, &t, 1), Some(10));
    assert_eq!(
        val(&mut r, &t, 2),
        Some(2),
        "the aborted write left nothing"
    );
    r.commit().unwrap();
    // Write skew: the second committer read a record the first replaced.
    assert_eq!(reason(write_skew(&db, &t)), AbortReason::ReadValidation);
    // Two writers of one record both buffer; the later committer finds it replaced.
    let mut a = db.begin().unwrap();
    let mut b = db.begin().unwrap();
    a.update(&t, &3i64, &[(1, 30i64)]).unwrap();
    b.update(&t, &3i64, &[(1, 31i64)]).unwrap();
    a.commit().unwrap();
    assert_eq!(reason(b.commit()), AbortReason::ReadValidation);
    let mut r = db.begin().unwrap();
    assert_eq!(val(&mut r, &t, 3), Some(30));
    r.commit().unwrap();
    // No shared counter: committing drew no global read-modify-write besides the tuple ids
    // of inserts.
    let before = db.stats().global_rmw;
    let mut u = db.begin().unwrap();
    u.update(&t, &4i64, &[(1, 40i64)]).unwrap();
    u.commit().unwrap();
    assert_eq!(db.stats().global_rmw, before);
}

/// Inserts are made at once and hold their key; a reader that meets one aborts, a scan that
/// misses a row committed before its validation aborts as a phantom, and deletes and
/// re-inserts of one key work within and across transactions.
#[test]
fn silo_inserts_hold_their_keys_and_scans_catch_phantoms() {
    let (db, t) = open_with(Protocol::Silo);
    let mut ins = db.begin().unwrap();
    ins.insert(&t, &(12i64, 1i64, 12i64, 0i64)).unwrap();
    let mut r = db.begin().unwrap();
    assert_eq!(reason(r.get(&t, &12i64)), AbortReason::ReadValidation);
    let mut dup = db.begin().unwrap();
    assert_eq!(
        reason(dup.insert(&t, &(12i64, 2i64, 99i64, 0i64))),
        AbortReason::WriteWriteConflict
    );
    let mut scanner = db.begin().unwrap();
    ins.commit().unwrap();
    // The scan runs after the insert committed: it sees the row.
    assert_eq!(scan_10_to_20(&mut scanner, &t).unwrap(), 1);
    scanner.commit().unwrap();
    let mut scanner = db.begin().unwrap();
    assert_eq!(scan_10_to_20(&mut scanner, &t).unwrap(), 1);
    let mut ins = db.begin().unwrap();
    ins.insert(&t, &(13i64, 1i64, 13i64, 0i64)).unwrap();
    ins.commit().unwrap();
    scanner.update(&t, &0i64, &[(1, 1i64)]).unwrap();
    assert_eq!(reason(scanner.commit()), AbortReason::Phantom);
    // A point miss is a predicate read too.
    let mut miss = db.begin().unwrap();
    assert_eq!(val(&mut miss, &t, 50), None);
    let mut ins = db.begin().unwrap();
    ins.insert(&t, &(50i64, 5i64, 50i64, 0i64)).unwrap();
    ins.commit().unwrap();
    miss.update(&t, &0i64, &[(1, 2i64)]).unwrap();
    assert_eq!(reason(miss.commit()), AbortReason::Phantom);
    // Delete, re-insert in the same transaction, delete again in another.
    let mut d = db.begin().unwrap();
    d.delete(&t, &50i64).unwrap();
    assert_eq!(val(&mut d, &t, 50), None);
    d.insert(&t, &(50i64, 7i64, 50i64, 0i64)).unwrap();
    assert_eq!(val(&mut d, &t, 50), Some(7));
    d.commit().unwrap();
    db.run(|tx| tx.delete(&t, &50i64)).unwrap();
    let mut r = db.begin().unwrap();
    assert_eq!(val(&mut r, &t, 50), None);
    r.commit().unwrap();
    db.run(|tx| tx.insert(&t, &(50i64, 8i64, 50i64, 0i64)))
        .unwrap();
    let mut r = db.begin().unwrap();
    assert_eq!(val(&mut r, &t, 50), Some(8));
    // A unique secondary key is checked against committed rows and our own writes.
    assert!(matches!(
        r.insert(&t, &(60i64, 0i64, 50i64, 0i64)),
        Err(Error::DuplicateKey { .. })
    ));
    drop(r);
    let mut u = db.begin().unwrap();
    u.insert(&t, &(61i64, 0i64, 61i64, 0i64)).unwrap();
    u.update(&t, &0i64, &[(2, 61i64)]).unwrap_err();
}

/// A single-version scan re-checked at commit by the leaves it read (Silo's node set,
/// `ScanRecord::nodes`) still catches a phantom that leaves those leaves unchanged: an entry
/// the scan met without a row to read (here a deleted row; under `healing` a call's scan
/// also reads past an uncommitted insert, `txn::tests::healing_reads_past_an_uncommitted_insert_and_heals_when_it_commits`)
/// whose row then commits changes no leaf. Without the re-scan such a scan falls back to,
/// the scanners here would commit. Under `mvocc` (whose snapshot does not see a row
/// committed after its begin) the same holds for a row inserted before the scan.
#[test]
fn scans_whose_leaves_hold_still_catch_rows_committed_behind_met_entries() {
    // A row committed after the scanner's begin and before its scan: in the leaf the scan
    // reads, invisible to it.
    let (db, t) = open_with(Protocol::Mvocc);
    let mut scanner = db.begin().unwrap();
    db.run(|tx| tx.insert(&t, &(12i64, 1i64, 12i64, 0i64)))
        .unwrap();
    assert_eq!(scan_10_to_20(&mut scanner, &t).unwrap(), 0);
    scanner.update(&t, &0i64, &[(1, 1i64)]).unwrap();
    assert_eq!(reason(scanner.commit()), AbortReason::Phantom);
    for p in [
        Protocol::Silo,
        Protocol::Occ,
        Protocol::Healing,
        Protocol::Mvocc,
    ] {
        // A deleted row in the range when it is scanned, inserted again after.
        let (db, t) = open_with(p);
        db.run(|tx| tx.delete(&t, &3i64)).unwrap();
        let mut scanner = db.begin().unwrap();
        let n = scanner
            .scan(
                &t,
                Bound::Included(&0i64),
                Bound::Excluded(&5i64),
                ScanOptions::default(),
                |_| true,
            )
            .unwrap();
        assert_eq!(n, 4, "{p:?}");
        db.run(|tx| tx.insert(&t, &(3i64, 3i64, 3i64, 0i64)))
            .unwrap();
        scanner.update(&t, &0i64, &[(1, 1i64)]).unwrap();
        assert_eq!(reason(scanner.commit()), AbortReason::Phantom, "{p:?}");
        // Nothing changed in the range: the scanner commits.
        let mut scanner = db.begin().unwrap();
        assert_eq!(scan_10_to_20(&mut scanner, &t).unwrap(), 0, "{p:?}");
        scanner.update(&t, &0i64, &[(1, 2i64)]).unwrap();
        scanner.commit().unwrap();
    }
}

/// Silo's locks are held only while committing: two committers whose write sets overlap in
/// opposite orders never deadlock, and every update lands.
#[test]
fn silo_commits_lock_in_one_order() {
    let (db, t) = open_with(Protocol::Silo);
    std::thread::scope(|s| {
        for th in 0..2i64 {
            let (db, t) = (&db, &t);
            s.spawn(move || {
                for _ in 0..2000 {
                    db.run(|tx| {
                        let keys = if th == 0 {
                            [0i64, 1, 2, 3]
                        } else {
                            [3i64, 2, 1, 0]
                        };
                        for k in keys {
                            let v = try_val(tx, t, k)?.unwrap();
                            tx.update(t, &k, &[(1, v + 1)])?;
                        }
                        Ok(())
                    })
                    .unwrap();
                }
            });
        }
    });
    let mut r = db.begin().unwrap();
    for k in 0..4 {
        assert_eq!(val(&mut r, &t, k), Some(k + 4000));
    }
}

/// Silo on a durable database: its TIDs are the log's commit order, every log kind and
/// recovery scheme restores what committed (updates, deletes, re-inserts), and a command log
/// replays its calls.
#[test]
fn silo_is_durable_under_every_log_kind() {
    durable_under_every_log_kind(Protocol::Silo);
}

/// OCC (thesis §3.5, Algorithm 1) locks the records it read at commit along with those it
/// writes, where Silo locks only the written ones; otherwise it validates, and fails, as Silo
/// does — and it is durable the same way.
#[test]
fn occ_locks_its_read_set_at_commit_and_validates_like_silo() {
    let rmw_of_commit = |p: Protocol| {
        let (db, t) = open_with(p);
        let before = db.stats().record_rmw;
        let mut tx = db.begin().unwrap();
        for k in 0..4 {
            assert_eq!(val(&mut tx, &t, k), Some(k));
        }
        tx.update(&t, &4i64, &[(1, 40i64)]).unwrap();
        tx.commit().unwrap();
        let rmw = db.stats().record_rmw - before;
        let mut r = db.begin().unwrap();
        assert_eq!(val(&mut r, &t, 4), Some(40));
        assert_eq!(val(&mut r, &t, 0), Some(0));
        // The locks on the rows only read are released: a writer of each commits.
        for k in 0..4 {
            db.run(|tx| tx.update(&t, &k, &[(1, k + 100)])).unwrap();
        }
        assert_eq!(reason(r.commit()), AbortReason::ReadValidation);
        rmw
    };
    let silo = rmw_of_commit(Protocol::Silo);
    let occ = rmw_of_commit(Protocol::Occ);
    assert_eq!(
        occ,
        silo + 4,
        "one lock per record read: occ {occ}, silo {silo}"
    );
    // A stale read fails validation at commit, as under Silo.
    let (db, t) = open_with(Protocol::Occ);
    let mut a = db.begin().unwrap();
    let mut b = db.begin().unwrap();
    assert_eq!(val(&mut a, &t, 0), Some(0));
    assert_eq!(val(&mut b, &t, 1), Some(1));
    a.update(&t, &1i64, &[(1, 11i64)]).unwrap();
    b.update(&t, &0i64, &[(1, 10i64)]).unwrap();
    a.commit().unwrap();
    assert_eq!(reason(b.commit()), AbortReason::ReadValidation);
    durable_under_every_log_kind(Protocol::Occ);
}

fn durable_under_every_log_kind(p: Protocol) {
    for (log, scheme) in [
        (LogPolicy::Logical, RecoveryScheme::Serial),
        (LogPolicy::Logical, RecoveryScheme::ParallelPartitioned),
        (LogPolicy::Physical, RecoveryScheme::Auto),
        (LogPolicy::Command, RecoveryScheme::Auto),
    ] {
        let dir = tempdir(&format!("{p}-{log}-{scheme}"));
        let cfg = || config_for(p).data_dir(&dir).log(log).recovery(scheme);
        {
            let db = Database::open(cfg()).unwrap();
            let t = kv(&db);
            load(&db, &t, 0..5);
            for i in 0..40i64 {
                db.run(|tx| {
                    let v = val(tx, &t, i % 5).unwrap();
                    tx.update(&t, &(i % 5), &[(1, v + 1)])
                })
                .unwrap();
                db.run(|tx| tx.insert(&t, &(100 + i, i, 100 + i, 0i64)))
                    .unwrap();
                if i % 2 == 0 {
                    db.run(|tx| tx.delete(&t, &(100 + i))).unwrap();
                }
            }
        }
        let db = Database::open(cfg()).unwrap();
        let t = db.table("kv").unwrap();
        let mut tx = db.begin().unwrap();
        let sum: i64 = (0..5).map(|k| val(&mut tx, &t, k).unwrap() - k).sum();
        assert_eq!(sum, 40, "{log} {scheme}");
        for i in 0..40i64 {
            let want = (i % 2 == 1).then_some(i);
            assert_eq!(val(&mut tx, &t, 100 + i), want, "{log} {scheme}: row {i}");
        }
        tx.commit().unwrap();
        // The recovered database keeps committing, and its TIDs continue above the log's.
        db.run(|tx| tx.update(&t, &0i64, &[(1, 0i64)])).unwrap();
        drop(db);
        let db = Database::open(cfg()).unwrap();
        let t = db.table("kv").unwrap();
        let mut tx = db.begin().unwrap();
        assert_eq!(val(&mut tx, &t, 0), Some(0), "{log} {scheme}");
        tx.commit().unwrap();
        drop(db);
        let _ = std::fs::remove_dir_all(&dir);
    }
    // A call is logged as the call, and recovery replays it.
    let dir = tempdir(&format!("{p}-calls"));
    let cfg = || config_for(p).data_dir(&dir).log(LogPolicy::Command);
    {
        let db = Database::open(cfg()).unwrap();
        let t = kv(&db);
        load(&db, &t, 0..2);
        db.create_procedures(
            "CREATE PROCEDURE bump1() AS $$
             BEGIN
               UPDATE kv SET v = v + 5 WHERE k = 1;
             END $$;",
        )
        .unwrap();
        let bump = db.procedure("bump1").unwrap();
        let mut tx = db.begin().unwrap();
        bump.execute(&mut tx, &[]).unwrap();
        tx.commit().unwrap();
    }
    let db = Database::open(cfg()).unwrap();
    assert_eq!(db.recovery_report().unwrap().calls_replayed, 1);
    let t = db.table("kv").unwrap();
    let mut r = db.begin().unwrap();
    assert_eq!(val(&mut r, &t, 1), Some(6));
    r.commit().unwrap();
}

/// Single-version 2PL, no-wait: a read lock stops a writer and a write lock a reader at once
/// (`lock_conflict`), an own read lock upgrades, locks go at commit and at abort, a READ ONLY
/// transaction locks too, phantoms are caught at commit, and it is durable.
#[test]
fn two_pl_locks_records_without_waiting() {
    let (db, t) = open_with(Protocol::TwoPl);
    let mut r = db.begin().unwrap();
    assert_eq!(val(&mut r, &t, 1), Some(1));
    let mut w = db.begin().unwrap();
    assert_eq!(
        reason(w.update(&t, &1i64, &[(1, 10i64)])),
        AbortReason::LockConflict
    );
    // The reader upgrades its own read lock; its write lock stops readers.
    r.update(&t, &1i64, &[(1, 11i64)]).unwrap();
    let mut other = db.begin().unwrap();
    assert_eq!(reason(other.get(&t, &1i64)), AbortReason::LockConflict);
    let mut w = db.begin().unwrap();
    w.update(&t, &2i64, &[(1, 20i64)]).unwrap();
    assert_eq!(val(&mut w, &t, 2), Some(20));
    r.commit().unwrap();
    w.abort();
    // Both commit and abort released their locks.
    let mut w = db.begin().unwrap();
    w.update(&t, &1i64, &[(1, 12i64)]).unwrap();
    w.update(&t, &2i64, &[(1, 22i64)]).unwrap();
    w.commit().unwrap();
    let mut r = db.begin().unwrap();
    assert_eq!(
        (val(&mut r, &t, 1), val(&mut r, &t, 2)),
        (Some(12), Some(22))
    );
    r.commit().unwrap();
    // A READ ONLY transaction locks too (there is no snapshot to read).
    let mut ro = db.begin_with(read_only(Protocol::TwoPl)).unwrap();
    assert_eq!(val(&mut ro, &t, 3), Some(3));
    let mut w = db.begin().unwrap();
    assert_eq!(
        reason(w.update(&t, &3i64, &[(1, 30i64)])),
        AbortReason::LockConflict
    );
    ro.commit().unwrap();
    // Row locks do not cover a range: the re-check at commit does.
    let mut scanner = db.begin().unwrap();
    assert_eq!(scan_10_to_20(&mut scanner, &t).unwrap(), 0);
    db.run(|tx| tx.insert(&t, &(15i64, 1i64, 15i64, 0i64)))
        .unwrap();
    scanner.update(&t, &0i64, &[(1, 1i64)]).unwrap();
    assert_eq!(reason(scanner.commit()), AbortReason::Phantom);
    durable_under_every_log_kind(Protocol::TwoPl);
}

/// HYBRID: a transaction runs optimistically (OCC); once it fails validation, its retry on
/// the same thread runs under 2PL (its reads lock: a writer of a row it read cannot commit),
/// and after that commits the thread is optimistic again.
#[test]
fn hybrid_retries_a_transaction_that_failed_validation_under_2pl() {
    let (db, t) = open_with(Protocol::Hybrid);
    // A writer of row 4 on another thread (an optimistic transaction there): did a lock stop
    // it?
    let writer_blocked = |db: &Database, v: i64| {
        std::thread::scope(|s| {
            s.spawn(|| {
                let mut w = db.begin().unwrap();
                let r = w.update(&t, &4i64, &[(1, v)]).and_then(|_| w.commit());
                match r {
                    Ok(()) => false,
                    Err(Error::SerializationFailure(AbortReason::LockConflict)) => true,
                    Err(e) => panic!("{e}"),
                }
            })
            .join()
            .unwrap()
        })
    };
    let mut r = db.begin().unwrap();
    assert_eq!(val(&mut r, &t, 4), Some(4));
    assert!(!writer_blocked(&db, 41), "an optimistic read locks nothing");
    r.update(&t, &0i64, &[(1, 1i64)]).unwrap();
    assert_eq!(reason(r.commit()), AbortReason::ReadValidation);
    // The retry runs under 2PL: it locks what it reads.
    let mut retry = db.begin().unwrap();
    assert_eq!(val(&mut retry, &t, 4), Some(41));
    assert!(writer_blocked(&db, 42), "the 2PL retry's read lock holds");
    retry.update(&t, &0i64, &[(1, 1i64)]).unwrap();
    retry.commit().unwrap();
    assert_eq!(db.stats().hybrid_2pl, 1);
    // Committed: optimistic again.
    let mut r = db.begin().unwrap();
    assert_eq!(val(&mut r, &t, 4), Some(41));
    assert!(!writer_blocked(&db, 43));
    assert_eq!(reason(r.commit()), AbortReason::ReadValidation);
    durable_under_every_log_kind(Protocol::Hybrid);
}

/// HYBRID's retry flag belongs to the engine (its transaction-table slot), not to the
/// thread: a validation failure in one database does not make the same thread's next
/// transaction in another database run under 2PL, and the failed database's retry still does.
#[test]
fn hybrid_retry_flag_is_per_engine_not_per_thread() {
    let (a, ta) = open_with(Protocol::Hybrid);
    let (b, tb) = open_with(Protocol::Hybrid);
    let mut r = a.begin().unwrap();
    assert_eq!(val(&mut r, &ta, 4), Some(4));
    std::thread::scope(|s| {
        s.spawn(|| a.run(|tx| tx.update(&ta, &4i64, &[(1, 41i64)])).unwrap());
    });
    r.update(&ta, &0i64, &[(1, 1i64)]).unwrap();
    assert_eq!(reason(r.commit()), AbortReason::ReadValidation);
    // The same thread's next transaction in the other database runs optimistically.
    let mut other = b.begin().unwrap();
    assert_eq!(val(&mut other, &tb, 4), Some(4));
    other.commit().unwrap();
    assert_eq!(b.stats().hybrid_2pl, 0);
    // The retry in the database that failed runs under 2PL.
    let mut retry = a.begin().unwrap();
    assert_eq!(val(&mut retry, &ta, 4), Some(41));
    retry.commit().unwrap();
    assert_eq!(a.stats().hybrid_2pl, 1);
}

/// Runs `f` on another thread, which sets up a transaction and calls `ready` before its
/// commit; meanwhile `between` runs here. Reports whether `f` was still running 100 ms later
/// (a commit waiting on a wait-for dependency is), then runs `release` and joins.
fn waits_until<'s, T: Send + 's>(
    s: &'s std::thread::Scope<'s, '_>,
    f: impl FnOnce(&dyn Fn()) -> T + Send + 's,
    between: impl FnOnce(),
    release: impl FnOnce(),
) -> (bool, T) {
    use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
    use std::sync::{Arc, Barrier};
    let done = Arc::new(AtomicBool::new(false));
    let barrier = Arc::new(Barrier::new(2));
    let (d, b) = (done.clone(), barrier.clone());
    let h = s.spawn(move || {
        let r = f(&|| {
            b.wait();
            b.wait();
        });
        d.store(true, SeqCst);
        r
    });
    barrier.wait();
    between();
    barrier.wait();
    std::thread::sleep(std::time::Duration::from_millis(100));
    let waited = !done.load(SeqCst);
    release();
    (waited, h.join().unwrap())
}

/// `mv2pl-wait` (Hekaton §4): a writer may replace a read-locked version and a reader may
/// lock a write-locked one (no-wait MV2PL aborts both), and the writer's commit waits until
/// the readers are done; two transactions that read what the other writes deadlock at
/// precommit and one of them aborts (`deadlock`); a range lock makes an insert into the
/// range wait for the scanner, and a scanner that meets the insert of a transaction already
/// at precommit aborts.
#[test]
fn mv2pl_wait_updates_eagerly_and_waits_at_precommit() {
    let (db, t) = open_with(Protocol::Mv2plWait);
    let range = |tx: &mut Transaction<'_>, lo: i64, hi: i64| {
        tx.scan(
            &t,
            Bound::Included(&lo),
            Bound::Included(&hi),
            ScanOptions::default(),
            |_| true,
        )
    };
    // The reader first: the writer's update is allowed, its commit waits for the read lock.
    let mut r = db.begin().unwrap();
    assert_eq!(val(&mut r, &t, 1), Some(1));
    std::thread::scope(|s| {
        let (waited, res) = waits_until(
            s,
            |ready| {
                let mut w = db.begin().unwrap();
                w.update(&t, &1i64, &[(1, 10i64)])?;
                ready();
                w.commit()
            },
            || {},
            || r.commit().unwrap(),
        );
        assert!(waited, "the writer's commit waits for the read lock");
        res.unwrap();
    });
    // The writer first: the reader locks the version it replaces, and the commit waits.
    let r = std::cell::RefCell::new(Some(db.begin().unwrap()));
    std::thread::scope(|s| {
        let (waited, res) = waits_until(
            s,
            |ready| {
                let mut w = db.begin().unwrap();
                w.update(&t, &2i64, &[(1, 20i64)])?;
                ready();
                w.commit()
            },
            || {
                let mut r = r.borrow_mut();
                assert_eq!(try_val(r.as_mut().unwrap(), &t, 2).unwrap(), Some(2));
            },
            || r.borrow_mut().take().unwrap().commit().unwrap(),
        );
        assert!(
            waited,
            "the writer's commit waits for the read lock taken after its write"
        );
        res.unwrap();
    });
    // Crossed reads and writes: a cycle of waits, broken by aborting one.
    let barrier = std::sync::Barrier::new(2);
    let crossed = |read: i64, write: i64| {
        let mut tx = db.begin().unwrap();
        assert_eq!(val(&mut tx, &t, read), Some(read));
        barrier.wait();
        tx.update(&t, &write, &[(1, write * 10)]).unwrap();
        barrier.wait();
        tx.commit()
    };
    let (ra, rb) = std::thread::scope(|s| {
        let ha = s.spawn(|| crossed(3, 4));
        let hb = s.spawn(|| crossed(4, 3));
        (ha.join().unwrap(), hb.join().unwrap())
    });
    assert!(ra.is_ok() != rb.is_ok(), "{ra:?} {rb:?}");
    let failed = if ra.is_err() { ra } else { rb };
    assert_eq!(reason(failed), AbortReason::Deadlock);
    assert_eq!(db.stats().aborted[AbortReason::Deadlock as usize], 1);
    // A scan's range lock: an insert into the range waits for the scanner.
    let mut sc = db.begin().unwrap();
    assert_eq!(range(&mut sc, 0, 100).unwrap(), 5);
    std::thread::scope(|s| {
        let (waited, res) = waits_until(
            s,
            |ready| {
                let mut w = db.begin().unwrap();
                w.insert(&t, &(50i64, 0i64, 50i64, 0i64))?;
                ready();
                w.commit()
            },
            || {},
            || sc.commit().unwrap(),
        );
        assert!(
            waited,
            "the insert into the scanned range waits for the scanner"
        );
        res.unwrap();
    });
    // An insert whose transaction is at precommit (waiting on a reader of row 0) can no
    // longer be made to wait: a scanner that meets it aborts.
    let mut rr = db.begin().unwrap();
    assert_eq!(val(&mut rr, &t, 0), Some(0));
    std::thread::scope(|s| {
        let (waited, res) = waits_until(
            s,
            |ready| {
                let mut w = db.begin().unwrap();
                w.insert(&t, &(60i64, 0i64, 60i64, 0i64))?;
                w.update(&t, &0i64, &[(1, 1i64)])?;
                ready();
                w.commit()
            },
            || {},
            || {
                let mut sc = db.begin().unwrap();
                assert_eq!(reason(range(&mut sc, 55, 65)), AbortReason::LockConflict);
                rr.commit().unwrap();
            },
        );
        assert!(waited);
        res.unwrap();
    });
    let mut r = db.begin().unwrap();
    assert_eq!(range(&mut r, 0, 100).unwrap(), 7);
    assert_eq!(val(&mut r, &t, 0), Some(1));
}

/// `mv2pl-wait`'s lock waits are visible (`Database::lock_waits`) while they last, and a
/// commit blocked on an idle holder gives up with `lock_conflict` after
/// `Config::lock_wait_timeout`, not the default 5 s; the setting is refused where it means
/// nothing.
#[test]
fn mv2pl_wait_counts_its_lock_waiters_and_gives_up_after_the_lock_wait_timeout() {
    use std::time::{Duration, Instant};
    let timeout = Duration::from_millis(300);
    let db = Database::open(
        config_for(Protocol::Mv2plWait)
            .isolation(Isolation::Serializable)
            .lock_wait_timeout(timeout),
    )
    .unwrap();
    let t = kv(&db);
    load(&db, &t, 0..2);
    assert_eq!(db.lock_waits(), 0);
    // An idle reader holds a read lock on row 1; the writer's commit waits for it.
    let mut r = db.begin().unwrap();
    assert_eq!(val(&mut r, &t, 1), Some(1));
    let (res, waited, seen) = std::thread::scope(|s| {
        let h = s.spawn(|| {
            let mut w = db.begin().unwrap();
            w.update(&t, &1i64, &[(1, 10i64)]).unwrap();
            let start = Instant::now();
            let res = w.commit();
            (res, start.elapsed())
        });
        // The wait is counted while it lasts.
        let mut seen = 0;
        let start = Instant::now();
        while seen == 0 && start.elapsed() < Duration::from_secs(60) && !h.is_finished() {
            seen = db.lock_waits();
            std::thread::yield_now();
        }
        let (res, waited) = h.join().unwrap();
        (res, waited, seen)
    });
    assert_eq!(seen, 1, "the blocked commit was counted as one lock wait");
    assert_eq!(reason(res), AbortReason::LockConflict);
    assert!(waited >= timeout, "gave up after {waited:?}");
    assert!(
        waited < Duration::from_secs(5),
        "waited {waited:?}: the default, not the setting"
    );
    assert_eq!(db.lock_waits(), 0, "no wait is counted once it ended");
    r.commit().unwrap();
    // Refused: a protocol that never waits for locks, and a zero timeout.
    for cfg in [
        config_for(Protocol::Mvocc).lock_wait_timeout(timeout),
        config_for(Protocol::Mv2plWait).lock_wait_timeout(Duration::ZERO),
    ] {
        assert!(
            matches!(Database::open(cfg), Err(Error::InvalidConfig(_))),
            "accepted a lock-wait timeout where it means nothing"
        );
    }
}

/// `mv2pl-wait` at Hekaton Table 3's three levels (§4.2): Read Committed takes no read
/// locks (a writer's commit does not wait for a reader) and reads the latest committed
/// version, Repeatable Read takes read locks (it waits) but no range locks (an insert into a
/// range it scanned commits at once), Serializable both.
#[test]
fn mv2pl_wait_offers_rc_rr_and_serializable_as_hekaton_table_3() {
    for level in [
        Isolation::ReadCommitted,
        Isolation::RepeatableRead,
        Isolation::Serializable,
    ] {
        let db = Database::open(config_for(Protocol::Mv2plWait).isolation(level)).unwrap();
        let t = kv(&db);
        load(&db, &t, 0..5);
        // Read Committed reads what committed after the begin; the locking levels read as of
        // their begin, and a version replaced since cannot be read-locked.
        let mut r = db.begin().unwrap();
        let mut w = db.begin().unwrap();
        w.update(&t, &4i64, &[(1, 40i64)]).unwrap();
        w.commit().unwrap();
        if level == Isolation::ReadCommitted {
            assert_eq!(val(&mut r, &t, 4), Some(40));
            r.commit().unwrap();
        } else {
            assert_eq!(
                reason(r.get(&t, &4i64)),
                AbortReason::LockConflict,
                "{level}"
            );
        }
        // A read-locked row: the writer's commit waits at RR and SER only.
        let mut r = db.begin().unwrap();
        assert_eq!(val(&mut r, &t, 1), Some(1));
        std::thread::scope(|s| {
            let (waited, res) = waits_until(
                s,
                |ready| {
                    let mut w = db.begin().unwrap();
                    w.update(&t, &1i64, &[(1, 10i64)])?;
                    ready();
                    w.commit()
                },
                || {},
                || r.commit().unwrap(),
            );
            assert_eq!(
                waited,
                level != Isolation::ReadCommitted,
                "{level}: read lock"
            );
            res.unwrap();
        });
        // A scanned range: an insert into it waits at SER only.
        let mut sc = db.begin().unwrap();
        let n = sc
            .scan(
                &t,
                Bound::Included(&0i64),
                Bound::Included(&100i64),
                ScanOptions::default(),
                |_| true,
            )
            .unwrap();
        assert_eq!(n, 5);
        std::thread::scope(|s| {
            let (waited, res) = waits_until(
                s,
                |ready| {
                    let mut w = db.begin().unwrap();
                    w.insert(&t, &(50i64, 0i64, 50i64, 0i64))?;
                    ready();
                    w.commit()
                },
                || {},
                || sc.commit().unwrap(),
            );
            assert_eq!(
                waited,
                level == Isolation::Serializable,
                "{level}: range lock"
            );
            res.unwrap();
        });
    }
}

/// Secondary entries follow key changes under every protocol and both kinds of logical index
/// pointers, though an update touches
/// only the indexes whose key it changes: a non-key update keeps the row findable, a key change
/// moves it, changing the key back (in one transaction, over its own version) finds it once,
/// and a rolled-back key change leaves no visible trace.
#[test]
fn secondary_entries_follow_key_changes_under_every_protocol() {
    const BY_U: usize = 1;
    const BY_G: usize = 2;
    let protocols = Protocol::ALL
        .iter()
        .filter(|&&p| Config::strongest_isolation(p).is_some());
    let pointers = [
        IndexPointers::LogicalTid,
        IndexPointers::LogicalPk,
        IndexPointers::Physical,
    ];
    let pairs = protocols.flat_map(|p| pointers.iter().map(move |&i| (p, i)));
    // `physical` points at versions of append-only chains: multi-version protocols only.
    let pairs = pairs.filter(|&(p, i)| i != IndexPointers::Physical || !p.single_version());
    for (&p, pointers) in pairs {
        let level = Config::strongest_isolation(p).unwrap();
        let db = Database::open(config_for(p).isolation(level).index_pointers(pointers)).unwrap();
        let t = kv(&db);
        load(&db, &t, 0..5);
        let p = format!("{p} {pointers}");
        let keys = |db: &Database, index: usize, key: i64| {
            let mut tx = db.begin().unwrap();
            let mut ks = Vec::new();
            tx.get_by(&t, index, &(key,), |r| {
                ks.push(r.i64(0).unwrap());
                true
            })
            .unwrap();
            tx.commit().unwrap();
            ks.sort();
            ks
        };
        let update = |cols: &[(usize, i64)]| {
            let mut tx = db.begin().unwrap();
            tx.update(&t, &1i64, cols).unwrap();
            tx.commit().unwrap();
        };
        assert_eq!(keys(&db, BY_G, 1), [1, 4], "{p}");
        update(&[(1, 50)]);
        assert_eq!(keys(&db, BY_G, 1), [1, 4], "{p}: after a non-key update");
        update(&[(3, 7), (1, 51)]);
        assert_eq!(keys(&db, BY_G, 1), [4], "{p}: after the key moved");
        assert_eq!(keys(&db, BY_G, 7), [1], "{p}");

        let mut tx = db.begin().unwrap();
        tx.update(&t, &1i64, &[(1, 52)]).unwrap();
        tx.update(&t, &1i64, &[(3, 1)]).unwrap();
        tx.update(&t, &1i64, &[(1, 53)]).unwrap();
        tx.commit().unwrap();
        assert_eq!(keys(&db, BY_G, 1), [1, 4], "{p}: after the key moved back");
        assert!(keys(&db, BY_G, 7).is_empty(), "{p}");

        let mut tx = db.begin().unwrap();
        tx.update(&t, &1i64, &[(3, 9), (2, 90)]).unwrap();
        tx.abort();
        assert!(
            keys(&db, BY_G, 9).is_empty(),
            "{p}: a rolled-back key change"
        );
        assert!(keys(&db, BY_U, 90).is_empty(), "{p}");
        assert_eq!(keys(&db, BY_G, 1), [1, 4], "{p}");
        assert_eq!(keys(&db, BY_U, 1), [1], "{p}");

        update(&[(2, 100)]);
        assert_eq!(keys(&db, BY_U, 100), [1], "{p}: the unique index moved");
        assert!(keys(&db, BY_U, 1).is_empty(), "{p}");
    }
}

/// Inserts take tuple ids from a range the slot reserves per table: one shared fetch-add
/// per 64 inserts, not one per insert; transactions inserting side by side never share an
/// id (a shared id would overwrite one row's version with the other's, losing a row).
#[test]
fn inserts_reserve_tuple_ids_in_ranges() {
    let db = Database::open(Config::new()).unwrap();
    let t = db
        .create_table(
            TableSchema::new("r")
                .column("k", ColumnType::Int)
                .column("v", ColumnType::Int)
                .primary_key(&["k"]),
        )
        .unwrap();
    let before = db.stats().global_rmw;
    let mut tx = db.begin().unwrap();
    for k in 0..640i64 {
        tx.insert(&t, &(k, k)).unwrap();
    }
    tx.commit().unwrap();
    let rmw = db.stats().global_rmw - before;
    // At most 11 ranges (10 if the slot started with none) and the commit's timestamp.
    assert!(
        (11..=13).contains(&rmw),
        "{rmw} shared RMWs for 640 inserts"
    );
    let (mut a, mut b) = (db.begin().unwrap(), db.begin().unwrap());
    for k in 0..150i64 {
        a.insert(&t, &(1000 + k, 1i64)).unwrap();
        b.insert(&t, &(2000 + k, 2i64)).unwrap();
    }
    a.commit().unwrap();
    b.commit().unwrap();
    let mut r = db.begin().unwrap();
    let mut seen = std::collections::HashMap::new();
    r.scan_table(&t, |row| {
        let (k, v) = (row.i64(0).unwrap(), row.i64(1).unwrap());
        assert!(seen.insert(k, v).is_none(), "key {k} twice");
        true
    })
    .unwrap();
    assert_eq!(seen.len(), 640 + 300);
    for k in 0..150i64 {
        assert_eq!(seen.get(&(1000 + k)), Some(&1));
        assert_eq!(seen.get(&(2000 + k)), Some(&2));
    }
    r.commit().unwrap();
}
