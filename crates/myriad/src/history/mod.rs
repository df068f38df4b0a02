//! Correctness tooling: a history recorder, off by default, and an offline
//! checker (`checker.rs`) that builds the dependency graph of committed transactions and
//! reports the cycles their isolation level forbids.
//!
//! Identity: an update transaction is identified by its end timestamp, which is also the begin
//! timestamp of every version it wrote, so "which version did T read" is recorded as the begin
//! timestamp of that version. Read-only transactions get ids with the top bit set. When
//! recording is off the cost is one `Option` test per operation.

pub mod checker;

pub use checker::{check, CheckReport, Key, Level, Read, Scan, TxnRecord, Write, WriteKind};

use crate::config::Isolation;
use crate::schema::TableSchema;
use crate::timestamp::Timestamp;
use crate::txn::table::{TxnId, TxnState, TxnTable};
use crate::version::{is_txn, Version};
use parking_lot::Mutex;
use std::ops::Bound;
use std::sync::atomic::Ordering;

/// The committed transactions recorded so far.
#[derive(Default)]
pub(crate) struct HistoryLog {
    records: Mutex<Vec<TxnRecord>>,
}

impl HistoryLog {
    pub fn push(&self, r: TxnRecord) {
        self.records.lock().push(r);
    }
    pub fn take(&self) -> Vec<TxnRecord> {
        std::mem::take(&mut *self.records.lock())
    }
}

/// What one transaction read and wrote, built while it runs.
#[derive(Default)]
pub(crate) struct Recording {
    reads: Vec<Read>,
    writes: Vec<Write>,
    scans: Vec<Scan>,
}

fn level(i: Isolation) -> Level {
    match i {
        Isolation::ReadCommitted => Level::ReadCommitted,
        Isolation::RepeatableRead => Level::RepeatableRead,
        Isolation::Snapshot => Level::SnapshotIsolation,
        _ => Level::Serializable,
    }
}

/// The committed begin timestamp of a version (resolving a not yet post-processed writer).
fn writer_of(v: &Version, txns: &TxnTable) -> u64 {
    loop {
        let b = v.begin.load(Ordering::Acquire);
        if !is_txn(b) {
            return b;
        }
        match txns.state_of(TxnId::from_word(b)) {
            TxnState::Committed(ts) | TxnState::Preparing(ts) => return ts.get(),
            _ => std::hint::spin_loop(),
        }
    }
}

fn owned(b: Bound<&[u8]>) -> Bound<Vec<u8>> {
    match b {
        Bound::Included(k) => Bound::Included(k.to_vec()),
        Bound::Excluded(k) => Bound::Excluded(k.to_vec()),
        Bound::Unbounded => Bound::Unbounded,
    }
}

impl Recording {
    pub fn note_read(
        &mut self,
        schema: &TableSchema,
        table: u32,
        v: &Version,
        row: &[u8],
        txns: &TxnTable,
    ) {
        let mut key = Vec::new();
        schema.encode_key_from_row(0, row, &mut key);
        self.reads.push(Read {
            key: Key { table, key },
            writer: writer_of(v, txns),
            found: !v.is_tombstone(),
        });
    }
    pub fn note_absent(&mut self, table: u32, key: &[u8]) {
        let k = Key {
            table,
            key: key.to_vec(),
        };
        // A miss after reading a tombstone is already recorded by note_read.
        if !self.reads.iter().rev().take(1).any(|r| r.key == k) {
            self.reads.push(Read {
                key: k,
                writer: 0,
                found: false,
            });
        }
    }
    pub fn note_scan(&mut self, table: u32, index: usize, lo: Bound<&[u8]>, hi: Bound<&[u8]>) {
        self.scans.push(Scan {
            table,
            index: index as u32,
            lo: owned(lo),
            hi: owned(hi),
        });
    }
    pub fn note_write(&mut self, schema: &TableSchema, table: u32, row: &[u8], kind: WriteKind) {
        let mut key = Vec::new();
        schema.encode_key_from_row(0, row, &mut key);
        let key = Key { table, key };
        // The row's secondary-index keys, for the checker's secondary-index scans.
        let index_keys = if kind == WriteKind::Delete {
            Vec::new()
        } else {
            (1..schema.indexes.len())
                .map(|i| {
                    let mut k = Vec::new();
                    schema.encode_key_from_row(i, row, &mut k);
                    (i as u32, k)
                })
                .collect()
        };
        if let Some(w) = self.writes.iter_mut().find(|w| w.key == key) {
            w.index_keys = index_keys;
            // Several writes to one row in a transaction install one version.
            w.kind = match (w.kind, kind) {
                (WriteKind::Insert, WriteKind::Delete) | (_, WriteKind::Delete) => {
                    WriteKind::Delete
                }
                (WriteKind::Delete, _) => WriteKind::Update,
                (k, _) => k,
            };
        } else {
            self.writes.push(Write {
                key,
                kind,
                index_keys,
            });
        }
    }
    pub fn into_record(
        self,
        id: u64,
        begin_ts: Timestamp,
        commit_ts: Timestamp,
        iso: Isolation,
    ) -> TxnRecord {
        TxnRecord {
            id,
            level: level(iso),
            begin_ts: begin_ts.get(),
            commit_ts: commit_ts.get(),
            reads: self.reads,
            writes: self.writes,
            scans: self.scans,
        }
    }
}
