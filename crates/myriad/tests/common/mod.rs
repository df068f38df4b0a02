#![allow(dead_code)]
use myriad::*;

/// Every protocol but MVOCC (which the tests run at every level on their own), from
/// `Protocol::ALL`, so a new protocol is tested by default.
pub fn other_protocols() -> impl Iterator<Item = Protocol> {
    Protocol::ALL
        .iter()
        .copied()
        .filter(|&p| p != Protocol::Mvocc)
}

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
/// ordered ones only). Under non-inline storage (`copy`, `shared`) the table has a fifth
/// column, `note VARCHAR(16)`, which the tests' writes never change: every version of a row
/// points at (or copies) the blob holding its key's `note` (see `kv_row`, `v_of`).
pub fn kv(db: &Database) -> TableRef {
    let u_kind = if db.config().get_index_pointers() == IndexPointers::LogicalTid {
        IndexKind::Hash
    } else {
        IndexKind::Ordered
    };
    let mut schema = TableSchema::new("kv")
        .column("k", ColumnType::Int)
        .column("v", ColumnType::Int)
        .column("u", ColumnType::Int)
        .column("g", ColumnType::Int);
    if db.config().get_non_inline() != NonInline::Inline {
        schema = schema.column("note", ColumnType::Str(16));
    }
    db.create_table(
        schema
            .primary_key_with(&["k"], IndexKind::Ordered)
            .index("by_u", &["u"], u_kind, true)
            .index("by_g", &["g"], IndexKind::Ordered, false),
    )
    .unwrap()
}

/// The `note` of key `k`: distinct per key, so a version whose blob was freed too early
/// and reused reads as another key's note.
pub fn note(k: i64) -> String {
    format!("note of {k}")
}

/// A row of `kv`: `(k, v, u, g)`, and `note(k)` if the table has the column.
pub fn kv_row(t: &TableRef, k: i64, v: i64, u: i64, g: i64) -> Vec<Value> {
    let mut row: Vec<Value> = [k, v, u, g].map(Value::Int).into();
    if t.schema().columns().len() == 5 {
        row.push(Value::Str(note(k)));
    }
    row
}

/// Column `v` of a `kv` row, after checking its `note` (if it has one) is its key's.
pub fn v_of(r: &RowRef<'_>) -> i64 {
    if r.len() == 5 {
        let k = r.i64(0).unwrap();
        assert_eq!(r.str(4).unwrap(), note(k), "the note of key {k}");
    }
    r.i64(1).unwrap()
}

pub fn load(db: &Database, t: &TableRef, keys: impl IntoIterator<Item = i64>) {
    let mut tx = db.begin().unwrap();
    for k in keys {
        tx.insert(t, &kv_row(t, k, k, k, k % 3)).unwrap();
    }
    tx.commit().unwrap();
}

/// `val` for a test without concurrent writers: with them, a read that speculated past a
/// Preparing writer fails as the cascading abort when that writer aborts (`try_val`).
pub fn val(tx: &mut Transaction<'_>, t: &TableRef, k: i64) -> Option<i64> {
    tx.get_with(t, &k, |r| v_of(&r)).unwrap()
}

/// `val` for reads that can abort: MVTO, MV2PL, and any read beside concurrent writers.
pub fn try_val(tx: &mut Transaction<'_>, t: &TableRef, k: i64) -> Result<Option<i64>> {
    tx.get_with(t, &k, |r| v_of(&r))
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

/// Every (version storage, GC policy) pairing `Config::validate` accepts on top of `c`, in
/// `VersionStorage::ALL` × `GcPolicy::ALL` order: a new storage or policy is in every test
/// that runs these.
pub fn accepted_pairings(c: &Config) -> Vec<(VersionStorage, GcPolicy)> {
    VersionStorage::ALL
        .iter()
        .flat_map(|&s| GcPolicy::ALL.iter().map(move |&g| (s, g)))
        .filter(|&(s, g)| c.clone().version_storage(s).gc(g).validate().is_ok())
        .collect()
}

/// What the GC tests run on: every pairing of version storage and a collecting GC policy
/// that the default (multi-version) configuration accepts, with inline attributes; then
/// non-inline attribute storage on three of the append-only ones (`kv` then has a VARCHAR
/// column).
pub fn gc_setups() -> Vec<(VersionStorage, GcPolicy, NonInline)> {
    let collecting = accepted_pairings(&Config::new())
        .into_iter()
        .filter(|&(_, g)| g != GcPolicy::None)
        .map(|(s, g)| (s, g, NonInline::Inline));
    collecting
        .chain([
            (VersionStorage::AppendN2o, GcPolicy::Txn, NonInline::Copy),
            (
                VersionStorage::AppendN2o,
                GcPolicy::Vacuum,
                NonInline::Shared,
            ),
            (VersionStorage::AppendO2n, GcPolicy::Coop, NonInline::Shared),
        ])
        .collect()
}

/// `c` on the version storage, GC policy and attribute storage of `setup`.
pub fn open_on(
    (storage, gc, non_inline): (VersionStorage, GcPolicy, NonInline),
    c: Config,
) -> Database {
    Database::open(c.version_storage(storage).gc(gc).non_inline(non_inline)).unwrap()
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
