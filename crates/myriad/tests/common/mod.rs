#![allow(dead_code)]
use myriad::*;

pub fn open(iso: Isolation) -> Database {
    Database::open(Config::new().isolation(iso)).unwrap()
}

/// `kv(k INT primary key ordered, v INT, u INT unique-indexed, g INT indexed)`.
pub fn kv(db: &Database) -> TableRef {
    db.create_table(
        TableSchema::new("kv")
            .column("k", ColumnType::Int)
            .column("v", ColumnType::Int)
            .column("u", ColumnType::Int)
            .column("g", ColumnType::Int)
            .primary_key_with(&["k"], IndexKind::Ordered)
            .index("by_u", &["u"], IndexKind::Hash, true)
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
