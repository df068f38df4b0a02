//! Every error case of the public API returns a typed error and leaves nothing behind.
use crate::common::*;
use myriad::*;
use std::ops::Bound;

#[test]
fn schema_and_catalog_errors() {
    let db = open(Isolation::Serializable);
    let t = kv(&db);
    assert!(matches!(
        db.create_table(
            TableSchema::new("kv")
                .column("k", ColumnType::Int)
                .primary_key(&["k"])
        ),
        Err(Error::AlreadyExists(_))
    ));
    assert_eq!(
        db.table("nope").unwrap_err(),
        Error::UnknownTable("nope".into())
    );
    assert_eq!(
        t.column("zz").unwrap_err(),
        Error::UnknownColumn {
            table: "kv".into(),
            column: "zz".into()
        }
    );
    assert_eq!(
        t.index("zz").unwrap_err(),
        Error::UnknownIndex {
            table: "kv".into(),
            index: "zz".into()
        }
    );
    assert_eq!(db.table_names(), vec!["kv".to_string()]);
}

#[test]
fn value_errors_leave_nothing_behind() {
    let db = open(Isolation::Serializable);
    let t = db
        .create_table(
            TableSchema::new("s")
                .column("k", ColumnType::Int)
                .column("name", ColumnType::Str(3))
                .column("x", ColumnType::Float)
                .primary_key(&["k"]),
        )
        .unwrap();
    let mut tx = db.begin().unwrap();
    assert!(matches!(
        tx.insert(&t, &(1i64, "abcd", 1.0f64)),
        Err(Error::ValueTooLong {
            max_len: 3,
            len: 4,
            ..
        })
    ));
    assert!(matches!(
        tx.insert(&t, &(1i64, 5i64, 1.0f64)),
        Err(Error::TypeMismatch { .. })
    ));
    assert!(matches!(
        tx.insert(&t, &(1i64, "a")),
        Err(Error::RowArity {
            expected: 3,
            found: 2,
            ..
        })
    ));
    assert!(matches!(tx.get(&t, &"x"), Err(Error::TypeMismatch { .. })));
    assert!(matches!(
        tx.get(&t, &(1i64, 2i64)),
        Err(Error::KeyArity {
            expected: 1,
            found: 2,
            ..
        })
    ));
    tx.insert(&t, &(1i64, "abc", 2.5f64)).unwrap();
    // A failing update closure changes nothing.
    let e = tx
        .update_with(&t, &1i64, |r| {
            r.set(2, 9.0f64)?;
            r.set(1, "toolong")
        })
        .unwrap_err();
    assert!(matches!(e, Error::ValueTooLong { .. }));
    assert_eq!(tx.get(&t, &1i64).unwrap().unwrap()[2], Value::Float(2.5));
    assert!(matches!(
        tx.update(&t, &1i64, &[(0, 5i64)]),
        Err(Error::PrimaryKeyUpdate { .. })
    ));
    assert!(matches!(
        tx.update(&t, &2i64, &[(2, 5.0f64)]),
        Err(Error::NotFound { .. })
    ));
    assert!(matches!(tx.delete(&t, &2i64), Err(Error::NotFound { .. })));
    // A range scan on a hash primary key is not supported.
    assert!(matches!(
        tx.scan(
            &t,
            Bound::Unbounded,
            Bound::<&i64>::Unbounded,
            ScanOptions::default(),
            |_| true
        ),
        Err(Error::Unsupported(_))
    ));
    tx.commit().unwrap();
    let mut tx = db.begin().unwrap();
    let row = tx.get(&t, &1i64).unwrap().unwrap();
    assert_eq!(
        row,
        Row(vec![Value::Int(1), Value::from("abc"), Value::Float(2.5)])
    );
}

#[test]
fn handles_from_another_database_are_rejected() {
    let a = open(Isolation::Serializable);
    let b = open(Isolation::Serializable);
    let ta = kv(&a);
    let _tb = kv(&b);
    let mut tx = b.begin().unwrap();
    assert_eq!(
        tx.get(&ta, &1i64).unwrap_err(),
        Error::UnknownTable("kv".into())
    );
}

#[test]
fn config_errors() {
    assert!(matches!(
        Database::open(Config::new().timestamps(TimestampPolicy::SiloEpoch)),
        Err(Error::Unsupported(_))
    ));
    assert!(matches!(
        Database::open(
            Config::new()
                .version_storage(VersionStorage::Delta)
                .index_pointers(IndexPointers::Physical)
        ),
        Err(Error::InvalidConfig(_))
    ));
    assert!(matches!(
        Database::open(Config::new().version_storage(VersionStorage::SingleVersion)),
        Err(Error::InvalidConfig(_))
    ));
    assert!(matches!(
        Database::open(Config::new().gc(GcPolicy::Coop)),
        Err(Error::InvalidConfig(m)) if m.contains("coop") && m.contains("n2o")
    ));
    // dead-zone splices append-only chains only.
    for storage in [VersionStorage::TimeTravel, VersionStorage::Delta] {
        assert!(matches!(
            Database::open(Config::new().version_storage(storage).gc(GcPolicy::DeadZone)),
            Err(Error::InvalidConfig(m)) if m.contains("dead-zone") && m.contains(storage.name())
        ));
    }
    // siro needs dead-zone's zones and cutter; its knobs apply to it alone and are bounded.
    assert!(matches!(
        Database::open(Config::new().version_storage(VersionStorage::Siro)),
        Err(Error::InvalidConfig(m)) if m.contains("siro") && m.contains("dead-zone") && m.contains("txn")
    ));
    assert!(matches!(
        Database::open(Config::new().siro_segment_bytes(1 << 20)),
        Err(Error::InvalidConfig(m)) if m.contains("siro") && m.contains("n2o")
    ));
    let siro = || {
        Config::new()
            .version_storage(VersionStorage::Siro)
            .gc(GcPolicy::DeadZone)
    };
    for (c, what) in [
        (siro().siro_segment_bytes(100), "segment bytes"),
        (siro().siro_segment_bytes(128 << 20), "segment bytes"),
        (siro().siro_llt_multiple(0), "LLT multiple"),
        (siro().siro_cold_multiple(0), "cold multiple"),
    ] {
        assert!(matches!(
            Database::open(c),
            Err(Error::InvalidConfig(m)) if m.contains(what)
        ));
    }
    assert!(Database::open(siro().siro_segment_bytes(4096).siro_llt_multiple(40_000)).is_ok());
    assert!(matches!(
        Database::open(
            Config::new()
                .protocol(Protocol::Silo)
                .version_storage(VersionStorage::SingleVersion)
                .gc(GcPolicy::DeadZone)
        ),
        Err(Error::InvalidConfig(m)) if m.contains("dead-zone") && m.contains("single-version")
    ));
    for n in [0, 65] {
        assert!(matches!(
            Database::open(Config::new().gc(GcPolicy::Vacuum).gc_threads(n)),
            Err(Error::InvalidConfig(m)) if m.contains("gc threads") && m.contains(&n.to_string())
        ));
    }
    // OCC⁻/SILO⁻ exist for occ and silo only.
    for p in [
        Protocol::Mvocc,
        Protocol::TwoPl,
        Protocol::Hybrid,
        Protocol::Ssn,
    ] {
        assert!(
            matches!(
                Database::open(
                    Config::new()
                        .protocol(p)
                        .version_storage(p.natural_storage())
                        .unsafe_no_validation(true)
                ),
                Err(Error::InvalidConfig(m)) if m.contains("unsafe-no-validation") && m.contains(p.name())
            ),
            "{p}"
        );
    }
    for p in [Protocol::Occ, Protocol::Silo] {
        let c = Config::new()
            .protocol(p)
            .version_storage(p.natural_storage())
            .unsafe_no_validation(true);
        assert!(Database::open(c).is_ok(), "{p}");
    }
    assert!(matches!(
        Database::open(Config::new().memory_spaces(65)),
        Err(Error::InvalidConfig(m)) if m.contains("memory spaces") && m.contains("65")
    ));
    // physical: versions of append-only chains only.
    assert!(matches!(
        Database::open(
            Config::new()
                .protocol(Protocol::Silo)
                .version_storage(VersionStorage::SingleVersion)
                .index_pointers(IndexPointers::Physical)
        ),
        Err(Error::InvalidConfig(m)) if m.contains("physical") && m.contains("single-version")
    ));
    // logical-pk and physical: ordered secondary indexes only, checked when a table or an
    // index is made.
    for pointers in [IndexPointers::Physical, IndexPointers::LogicalPk] {
        let db = Database::open(Config::new().index_pointers(pointers)).unwrap();
        let hashed = TableSchema::new("h")
            .column("k", ColumnType::Int)
            .column("u", ColumnType::Int)
            .primary_key(&["k"])
            .index("by_u", &["u"], IndexKind::Hash, false);
        assert!(matches!(
            db.create_table(hashed),
            Err(Error::Unsupported(m)) if m.contains("by_u") && m.contains(pointers.name())
        ));
    }
    let db = Database::open(Config::new().index_pointers(IndexPointers::LogicalPk)).unwrap();
    assert!(db.table("h").is_err(), "nothing half-created");
    let t = TableSchema::new("o")
        .column("k", ColumnType::Int)
        .column("u", ColumnType::Int)
        .primary_key(&["k"])
        .index("by_u", &["u"], IndexKind::Ordered, false);
    db.create_table(t).unwrap();
    assert!(matches!(
        db.create_index("o", "u_hash", &["u"], IndexKind::Hash, false),
        Err(Error::Unsupported(m)) if m.contains("u_hash")
    ));
    db.create_index("o", "u_tree", &["u"], IndexKind::Ordered, false)
        .unwrap();
    assert!(matches!(
        Database::open(Config::new().max_concurrent_txns(0)),
        Err(Error::InvalidConfig(_))
    ));
    assert!(matches!(
        Database::open(Config::new().log(LogPolicy::Command)),
        Err(Error::InvalidConfig(m)) if m.contains("data directory")
    ));
    assert!(matches!(
        Database::open(Config::new().log(LogPolicy::Physical)),
        Err(Error::InvalidConfig(m)) if m.contains("physical") && m.contains("data directory")
    ));
    assert!(
        matches!("bogus".parse::<Protocol>(), Err(Error::InvalidConfig(m)) if m.contains("mvocc"))
    );
    assert_eq!(
        "rr".parse::<Isolation>().unwrap(),
        Isolation::RepeatableRead
    );
}

#[test]
fn transaction_table_limit() {
    let db = Database::open(Config::new().max_concurrent_txns(2)).unwrap();
    let _a = db.begin().unwrap();
    let _b = db.begin().unwrap();
    assert!(matches!(
        db.begin(),
        Err(Error::TooManyTransactions { max: 2 })
    ));
}

#[test]
fn run_retries_and_reports_exhaustion() {
    let db = Database::open(Config::new().max_retries(3)).unwrap();
    let t = kv(&db);
    load(&db, &t, 0..1);
    let mut attempts = 0;
    let v = db
        .run(|tx| {
            attempts += 1;
            if attempts < 3 {
                return Err(Error::SerializationFailure(AbortReason::ReadValidation));
            }
            Ok(val(tx, &t, 0))
        })
        .unwrap();
    assert_eq!((v, attempts), (Some(0), 3));
    let e = db
        .run(|_| -> Result<()> { Err(Error::SerializationFailure(AbortReason::Phantom)) })
        .unwrap_err();
    assert_eq!(
        e,
        Error::RetriesExhausted {
            attempts: 3,
            last: AbortReason::Phantom
        }
    );
    // Non-retryable errors come straight back, and the writes are rolled back.
    let e = db
        .run(|tx| {
            tx.update(&t, &0i64, &[(1, 5i64)])?;
            tx.update(&t, &99i64, &[(1, 5i64)])
        })
        .unwrap_err();
    assert!(matches!(e, Error::NotFound { .. }));
    assert_eq!(val(&mut db.begin().unwrap(), &t, 0), Some(0));
}
