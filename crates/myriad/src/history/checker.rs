//! TEMPORARY placeholder types until the real checker lands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Level { ReadCommitted, RepeatableRead, SnapshotIsolation, Serializable }
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Key { pub table: u32, pub key: Vec<u8> }
#[derive(Clone, Debug)] pub struct Read { pub key: Key, pub writer: u64, pub found: bool }
#[derive(Clone, Copy, Debug, PartialEq, Eq)] pub enum WriteKind { Insert, Update, Delete }
#[derive(Clone, Debug)] pub struct Write { pub key: Key, pub kind: WriteKind }
#[derive(Clone, Debug)] pub struct Scan { pub table: u32, pub lo: std::ops::Bound<Vec<u8>>, pub hi: std::ops::Bound<Vec<u8>> }
#[derive(Clone, Debug)] pub struct TxnRecord { pub id: u64, pub level: Level, pub begin_ts: u64, pub commit_ts: u64, pub reads: Vec<Read>, pub writes: Vec<Write>, pub scans: Vec<Scan> }
#[derive(Clone, Debug)] pub struct Anomaly { pub name: &'static str }
pub struct CheckReport { pub txns: usize, pub edges: usize, pub anomalies: Vec<Anomaly> }
pub fn check(history: &[TxnRecord]) -> CheckReport { unimplemented!("placeholder {}", history.len()) }
