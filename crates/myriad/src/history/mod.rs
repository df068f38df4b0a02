//! Correctness tooling: a history recorder, off by default, and an offline
//! checker (`checker.rs`) that builds the dependency graph of committed transactions and
//! reports the cycles their isolation level forbids.
//!
//! Identity: every transaction is identified by its transaction id (`TxnId`'s word, top bit
//! set), never by its commit timestamp, which partial-order timestamps share between the
//! members of a commit group. While a transaction runs, "which version did T read" is
//! recorded as the version's begin word: its writer's *stamp* (the end timestamp, or a
//! single-version protocol's TID). Each record is pushed with its stamp, and `HistoryLog::take`
//! rewrites every read's stamp to the id of the transaction that wrote that key with that
//! stamp: (key, stamp) is unique, because two writers of one key never share a commit
//! timestamp (first-committer-wins aborts one; the checker reports it as `shared-commit-ts`
//! if an engine bug lets both commit). A stamp no record wrote is left as it is (the
//! checker's `G1a`). When recording is off the cost is one `Option` test per operation.

pub mod checker;

pub use checker::{check, CheckReport, Key, Level, Read, Scan, TxnRecord, Write, WriteKind};

use crate::config::Isolation;
use crate::schema::TableSchema;
use crate::timestamp::Timestamp;
use crate::txn::table::{TxnId, TxnState, TxnTable};
use crate::version::{is_txn, Version};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::ops::Bound;
use std::sync::atomic::Ordering;

/// The committed transactions recorded so far, each with the stamp its versions carry.
#[derive(Default)]
pub(crate) struct HistoryLog {
    records: Mutex<Vec<(u64, TxnRecord)>>,
}

impl HistoryLog {
    /// Records a committed transaction whose versions carry `stamp` in their Begin word.
    pub fn push(&self, stamp: u64, r: TxnRecord) {
        self.records.lock().push((stamp, r));
    }

    /// Takes the records, with every read's writer stamp resolved to the writer's id (see the
    /// module docs).
    pub fn take(&self) -> Vec<TxnRecord> {
        let recs = std::mem::take(&mut *self.records.lock());
        let mut writer: HashMap<(Key, u64), u64> = HashMap::new();
        for (stamp, r) in &recs {
            for w in &r.writes {
                writer.insert((w.key.clone(), *stamp), r.id);
            }
        }
        recs.into_iter()
            .map(|(_, mut r)| {
                for read in &mut r.reads {
                    if read.writer == 0 {
                        continue;
                    }
                    if let Some(&id) = writer.get(&(read.key.clone(), read.writer)) {
                        read.writer = id;
                    }
                }
                r
            })
            .collect()
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
    /// `healing`'s false invalidation (`cc/healing.rs`): the reads of row `row` (table
    /// `table`) recorded from record `from` are reads of record `to`, which holds the same
    /// values in every column the transaction reads.
    pub(crate) fn repoint_read(
        &mut self,
        schema: &TableSchema,
        table: u32,
        row: &[u8],
        from: &Version,
        to: &Version,
        txns: &TxnTable,
    ) {
        let mut key = Vec::new();
        schema.encode_key_from_row(0, row, &mut key);
        let (from, to) = (writer_of(from, txns), writer_of(to, txns));
        for r in &mut self.reads {
            if r.writer == from && r.key.table == table && r.key.key == key {
                r.writer = to;
            }
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(id: u64, commit_ts: u64, reads: &[(&str, u64)], writes: &[&str]) -> TxnRecord {
        TxnRecord {
            id,
            level: Level::SnapshotIsolation,
            begin_ts: 1,
            commit_ts,
            reads: reads
                .iter()
                .map(|&(k, writer)| Read {
                    key: Key::new(1, k),
                    writer,
                    found: true,
                })
                .collect(),
            writes: writes
                .iter()
                .map(|&k| Write {
                    key: Key::new(1, k),
                    ..Write::default()
                })
                .collect(),
            scans: Vec::new(),
        }
    }

    /// Two updaters sharing end timestamp 5 keep their own ids, and a read of each one's
    /// version resolves to that one (by key and stamp); the initial state and a stamp no
    /// record wrote stay as they are.
    #[test]
    fn take_resolves_reads_by_key_and_stamp() {
        let log = HistoryLog::default();
        log.push(5, rec(101, 5, &[], &["x"]));
        log.push(5, rec(102, 5, &[], &["y"]));
        log.push(
            0,
            rec(103, 5, &[("x", 5), ("y", 5), ("z", 0), ("w", 7)], &[]),
        );
        let h = log.take();
        assert_eq!(h.iter().map(|r| r.id).collect::<Vec<_>>(), [101, 102, 103]);
        let writers: Vec<u64> = h[2].reads.iter().map(|r| r.writer).collect();
        assert_eq!(writers, [101, 102, 0, 7]);
        assert!(log.take().is_empty());
        let r = check(&h);
        assert_eq!(r.named("G1a").count(), 1, "{r}");
        assert_eq!(r.txns, 3);
    }
}
