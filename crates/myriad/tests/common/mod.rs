#![allow(dead_code)]
use myriad::*;

/// Every built protocol but MVOCC (which the tests run at every level on their own).
pub const OTHER_PROTOCOLS: [Protocol; 12] = [
    Protocol::Mvto,
    Protocol::Mv2pl,
    Protocol::Mv2plWait,
    Protocol::Si,
    Protocol::ErmiaSi,
    Protocol::Ssn,
    Protocol::Ssi,
    Protocol::ErmiaSsi,
    Protocol::Silo,
    Protocol::Occ,
    Protocol::TwoPl,
    Protocol::Hybrid,
];

/// A configuration of protocol `p` on the version storage it runs on.
pub fn config_for(p: Protocol) -> Config {
    Config::new()
        .protocol(p)
        .version_storage(p.natural_storage())
}

pub fn open(iso: Isolation) -> Database {
    Database::open(Config::new().isolation(iso)).unwrap()
}

/// `kv(k INT primary key ordered, v INT, u INT unique-indexed, g INT indexed)`. `by_u` is a
/// hash index, or ordered under index pointers `logical-pk` and `physical` (built for
/// ordered ones only).
pub fn kv(db: &Database) -> TableRef {
    let u_kind = if db.config().get_index_pointers() == IndexPointers::LogicalTid {
        IndexKind::Hash
    } else {
        IndexKind::Ordered
    };
    db.create_table(
        TableSchema::new("kv")
            .column("k", ColumnType::Int)
            .column("v", ColumnType::Int)
            .column("u", ColumnType::Int)
            .column("g", ColumnType::Int)
            .primary_key_with(&["k"], IndexKind::Ordered)
            .index("by_u", &["u"], u_kind, true)
            .index("by_g", &["g"], IndexKind::Ordered, false),
    )
    .unwrap()
}

pub fn load(db: &Database, t: &TableRef, keys: impl IntoIterator<Item = i64>) {
    let mut tx = db.begin().unwrap();
    for k in keys {
        tx.insert(t, &(k, k, k, k % 3)).unwrap();
    }
    tx.commit().unwrap();
}

pub fn val(tx: &mut Transaction<'_>, t: &TableRef, k: i64) -> Option<i64> {
    tx.get_with(t, &k, |r| r.i64(1).unwrap()).unwrap()
}

/// `val` for protocols whose reads can abort (MVTO, MV2PL).
pub fn try_val(tx: &mut Transaction<'_>, t: &TableRef, k: i64) -> Result<Option<i64>> {
    tx.get_with(t, &k, |r| r.i64(1).unwrap())
}

pub fn iso(i: Isolation) -> TxnOptions {
    TxnOptions {
        isolation: i,
        read_only: false,
    }
}

pub fn failure(r: Result<()>) -> Option<AbortReason> {
    match r {
        Err(Error::SerializationFailure(reason)) => Some(reason),
        Ok(()) => None,
        Err(e) => panic!("unexpected error {e}"),
    }
}

/// A predicate write skew, run by `run(level)` (history, whether both transactions
/// committed): under SI both commit and the history is clean; judged as Serializable the
/// checker reports exactly one G2; under Serializable the engine aborts one of them.
pub fn assert_predicate_write_skew(run: impl Fn(Isolation) -> (Vec<history::TxnRecord>, bool)) {
    use history::{check, Level};
    let (mut h, both) = run(Isolation::Snapshot);
    assert!(both, "snapshot isolation lets both commit");
    assert!(check(&h).anomalies.is_empty(), "allowed under SI");
    for r in h.iter_mut() {
        r.level = Level::Serializable;
    }
    let report = check(&h);
    assert_eq!(report.anomalies.len(), 1, "{:?}", report.anomalies);
    assert_eq!(report.anomalies[0].name, "G2", "{}", report.anomalies[0]);
    // Under Serializable the engine aborts one of them, and the history is clean.
    let (h, both) = run(Isolation::Serializable);
    assert!(!both, "the phantom check must abort one of the two");
    assert!(check(&h).anomalies.is_empty());
}

/// Every pairing of version storage and GC policy the GC tests run.
pub const GC_SETUPS: [(VersionStorage, GcPolicy); 8] = [
    (VersionStorage::AppendN2o, GcPolicy::Txn),
    (VersionStorage::AppendO2n, GcPolicy::Txn),
    (VersionStorage::AppendN2o, GcPolicy::Vacuum),
    (VersionStorage::AppendO2n, GcPolicy::Vacuum),
    (VersionStorage::AppendO2n, GcPolicy::Coop),
    (VersionStorage::TimeTravel, GcPolicy::Txn),
    (VersionStorage::Delta, GcPolicy::Txn),
    (VersionStorage::Delta, GcPolicy::Vacuum),
];

/// `c` on chain order and GC policy `setup`.
pub fn open_on((storage, gc): (VersionStorage, GcPolicy), c: Config) -> Database {
    Database::open(c.version_storage(storage).gc(gc)).unwrap()
}

/// SplitMix64: the next pseudo-random number of the stream `s` (deterministic test
/// randomness without a dependency).
pub fn next(s: &mut u64) -> u64 {
    *s = s.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *s;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}
