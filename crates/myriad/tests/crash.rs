//! Crash test: a child process runs bank transfers on two threads against a
//! data directory and prints every commit that `commit()` acknowledged; the parent kills it
//! with SIGKILL at a random moment, recovers the directory, and checks that
//! - every acknowledged transfer is present,
//! - no transfer is half-present: each account's balance equals its opening balance plus the
//!   transfers present (each transfer writes two balances and one row in one transaction),
//! - the total is unchanged,
//!
//! then lets the next child continue on the recovered directory. Children rotate through
//! command logging (the transfer is a stored procedure, logged as the call), logical logging
//! (ad-hoc transactions) and physical logging, three generations with the epoch log manager,
//! then three with ERMIA's (the epoch manager alone for the protocols `Config::validate`
//! keeps off ERMIA's: MVTO and the single-version ones); each protocol of `Protocol::ALL` runs
//! six generations in turn, at its strongest isolation level, on its natural version storage
//! (on `n2o`, the logical-log generations with dead-zone pruning and the physical-log ones on
//! `siro` storage; `storage_of`) (a protocol whose commit order is not a serial order, `Protocol::command_log_refusal`,
//! logs logically where the others log calls);
//! recovery rotates through the schemes that can read the log (serial, parallel-latched,
//! parallel-partitioned for a logical log; serial, PACMAN sync and PACMAN pipelined for
//! calls; PLR for a physical log).
//! `MYRIAD_CRASH_KILLS` sets the number of kills (default six per protocol, so every protocol
//! runs and the last generation is MVOCC's again), `MYRIAD_CRASH_SEED` the seed.
//!
//! A second test, `write_failure_stops_acknowledgements`, runs the child under a file-size
//! limit (`ulimit -f`, so the kernel fails the log write with EFBIG part-way, as a full disk
//! fails it with ENOSPC): the failing commit and every later one must get an error, never an
//! acknowledgement, and recovery must bring back every acknowledged commit, dropping the
//! partly written block. It runs once with each log manager.
//!
//! A third test, `crash_during_load_and_recovery`, kills a child that creates a database and
//! loads it in 100-row transactions (from the first open of an empty directory on), then a
//! child that does nothing but recover the directory over and over, each at a random moment:
//! every acknowledged batch must be present after the next recovery, every other batch
//! wholly present or wholly absent, and recovery must never fail. `MYRIAD_CRASH_LOAD_ROUNDS`
//! sets its rounds (default 8).
//!
//! This file is its own test harness (`harness = false`): the same binary is the child when
//! `MYRIAD_CRASH_CHILD` names a directory.

use myriad::*;
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Acknowledged transfers: id → (from, to, amount).
type Acked = HashMap<i64, (i64, i64, i64)>;

const ACCOUNTS: i64 = 40;
const OPENING: i64 = 1000;

fn main() {
    if let Ok(dir) = std::env::var("MYRIAD_CRASH_CHILD") {
        let generation: i64 = std::env::var("MYRIAD_CRASH_GEN")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        let mode = std::env::var("MYRIAD_CRASH_MODE").unwrap_or_default();
        if mode == "write-failure" {
            child_write_failure(Path::new(&dir), manager_of(generation));
        } else if mode == "load" {
            child_load(Path::new(&dir), manager_of(generation));
        } else if mode == "recover" {
            child_recover(Path::new(&dir), manager_of(generation));
        } else {
            child(Path::new(&dir), generation);
        }
        return;
    }
    // Honour `cargo test -- <filter>`: run only when the filter (if any) matches "crash".
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--list") {
        println!("crash_bank_transfers: test");
        println!("write_failure_stops_acknowledgements: test");
        println!("crash_during_load_and_recovery: test");
        return;
    }
    let filter = args.iter().find(|a| !a.starts_with('-'));
    let wanted = |name: &str| filter.is_none_or(|f| name.contains(f.as_str()));
    if wanted("write_failure_stops_acknowledgements") {
        // Generation 1 logs rows with the epoch manager, generation 4 with ERMIA's.
        write_failure(1);
        write_failure(4);
        println!("test write_failure_stops_acknowledgements ... ok");
    }
    if wanted("crash_during_load_and_recovery") {
        let rounds: usize = std::env::var("MYRIAD_CRASH_LOAD_ROUNDS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(8);
        crash_during_load_and_recovery(rounds);
        println!("test crash_during_load_and_recovery ... ok");
    }
    if !wanted("crash_bank_transfers") {
        return;
    }
    let kills: usize = std::env::var("MYRIAD_CRASH_KILLS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(GENERATIONS_PER_PROTOCOL * Protocol::ALL.len());
    let seed: u64 = std::env::var("MYRIAD_CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| d.as_nanos() as u64)
        });
    println!("crash_bank_transfers: {kills} kills, MYRIAD_CRASH_SEED={seed}");
    parent(kills, seed);
    println!("test crash_bank_transfers ... ok");
}

fn config(dir: &Path, m: LogManagerKind) -> Config {
    let c = Config::new()
        .data_dir(dir)
        .log_manager(m)
        .epoch_interval(Duration::from_millis(2));
    if m == LogManagerKind::Epoch {
        c.loggers(2)
    } else {
        c
    }
}

/// Generations per protocol: the three log kinds (`log_of`) under each log manager
/// (`manager_of`).
const GENERATIONS_PER_PROTOCOL: usize = 6;

/// The protocol of child generation `g`: six generations each of every protocol, in
/// `Protocol::ALL` order — the multi-version ones, then the single-version ones (which
/// recover what the multi-version ones logged), and back to MVOCC (recovering what the
/// single-version ones logged). The default number of kills runs each once and returns to
/// MVOCC for the last.
fn protocol_of(generation: i64) -> Protocol {
    let all = Protocol::ALL;
    all[(generation as usize / GENERATIONS_PER_PROTOCOL) % all.len()]
}

/// The isolation level child generation `g` runs at: its protocol's strongest.
fn isolation_of(generation: i64) -> Isolation {
    let p = protocol_of(generation);
    Config::strongest_isolation(p).unwrap_or_else(|| panic!("{p} offers no isolation level"))
}

/// Whether generation `g`'s protocol takes a command log: its commit order is a serial order
/// (`Protocol::command_log_refusal`; `Config::validate` refuses the others).
fn takes_commands(generation: i64) -> bool {
    protocol_of(generation).command_log_refusal().is_none()
}

/// The configuration of child generation `g` (and of the recovery after it).
fn config_of(dir: &Path, generation: i64) -> Config {
    let p = protocol_of(generation);
    let (storage, gc) = storage_of(generation);
    config(dir, manager_of(generation))
        .protocol(p)
        .isolation(isolation_of(generation))
        .version_storage(storage)
        .gc(gc)
}

/// The version storage and GC of child generation `g`: the protocol's natural storage with
/// transaction-level GC, except that a protocol on `n2o` runs its logical-log generations
/// with dead-zone pruning and its physical-log ones on vDriver's `siro` storage (also
/// dead-zone), so both are killed mid-run and recovered.
fn storage_of(generation: i64) -> (VersionStorage, GcPolicy) {
    let natural = protocol_of(generation).natural_storage();
    match generation % 3 {
        1 if natural == VersionStorage::AppendN2o => (natural, GcPolicy::DeadZone),
        2 if natural == VersionStorage::AppendN2o => (VersionStorage::Siro, GcPolicy::DeadZone),
        _ => (natural, GcPolicy::Txn),
    }
}

/// The log manager of child generation `g`: three generations (command, logical, physical)
/// with the epoch manager, three with ERMIA's where the protocol takes it (the
/// single-version ones order commits by their own TIDs, MVTO by its begin timestamps, not
/// by ERMIA's counter: `Config::validate` refuses them, and they stay on the epoch manager).
fn manager_of(generation: i64) -> LogManagerKind {
    let p = protocol_of(generation);
    let ermia_takes = || {
        Config::new()
            .protocol(p)
            .isolation(isolation_of(generation))
            .version_storage(p.natural_storage())
            .log(LogPolicy::Logical)
            .log_manager(LogManagerKind::Ermia)
            .validate()
            .is_ok()
    };
    if (generation / 3) % 2 == 0 || !ermia_takes() {
        LogManagerKind::Epoch
    } else {
        LogManagerKind::Ermia
    }
}

/// The log kind of child generation `g`: command, logical and physical in turn (logical for
/// command under a protocol that cannot have a command log).
fn log_of(generation: i64) -> LogPolicy {
    match generation % 3 {
        0 if takes_commands(generation) => LogPolicy::Command,
        0 | 1 => LogPolicy::Logical,
        _ => LogPolicy::Physical,
    }
}

/// Child generation `g` logs calls.
fn commands(generation: i64) -> bool {
    log_of(generation) == LogPolicy::Command
}

const TRANSFER: &str = "CREATE PROCEDURE transfer(xid BIGINT, a BIGINT, b BIGINT, v BIGINT) AS $$
DECLARE x BIGINT; y BIGINT;
BEGIN
  SELECT bal INTO x FROM acct WHERE id = a;
  SELECT bal INTO y FROM acct WHERE id = b;
  UPDATE acct SET bal = x - v WHERE id = a;
  UPDATE acct SET bal = y + v WHERE id = b;
  INSERT INTO xfer VALUES (xid, a, b, v);
END $$";

fn xorshift(s: &mut u64) -> u64 {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    *s
}

fn int(r: RowRef<'_>, c: usize) -> i64 {
    match r.get(c) {
        Some(ValueRef::Int(i)) => i,
        other => panic!("column {c}: {other:?}"),
    }
}

fn bal(r: &Row) -> i64 {
    match r.get(1) {
        Some(Value::Int(i)) => *i,
        other => panic!("balance: {other:?}"),
    }
}

/// The transfer of a child's `ACK id from to amount` line.
fn ack(line: &str) -> Option<(i64, (i64, i64, i64))> {
    let f: Vec<i64> = line
        .strip_prefix("ACK ")?
        .split_whitespace()
        .filter_map(|x| x.parse().ok())
        .collect();
    match f[..] {
        [id, from, to, amount] => Some((id, (from, to, amount))),
        _ => None,
    }
}

/// One transfer as row operations: both balances and the transfer's own row.
fn transfer_rows(
    tx: &mut Transaction<'_>,
    acct: &TableRef,
    xfer: &TableRef,
    (id, from, to, amount): (i64, i64, i64, i64),
) -> myriad::Result<()> {
    let a = tx.get(acct, &from)?.expect("from");
    let b = tx.get(acct, &to)?.expect("to");
    tx.update(acct, &from, &[(1, bal(&a) - amount)])?;
    tx.update(acct, &to, &[(1, bal(&b) + amount)])?;
    tx.insert(xfer, &(id, from, to, amount))
}

/// Runs transfers until killed; prints `ACK id from to amount` after each acknowledged commit.
fn child(dir: &Path, generation: i64) {
    let db =
        Database::open(config_of(dir, generation).log(log_of(generation))).expect("child: open");
    let acct = db.table("acct").expect("acct");
    let xfer = db.table("xfer").expect("xfer");
    let transfer = db.procedure("transfer").expect("transfer");
    let transfer = &transfer;
    let out = Arc::new(Mutex::new(std::io::stdout()));
    std::thread::scope(|s| {
        for th in 0..2i64 {
            let (db, acct, xfer, out) = (&db, &acct, &xfer, out.clone());
            s.spawn(move || {
                let mut rng =
                    (generation as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (th as u64 + 7);
                for seq in 0i64.. {
                    let id = generation * 1_000_000_000 + th * 100_000_000 + seq;
                    let from = (xorshift(&mut rng) % ACCOUNTS as u64) as i64;
                    let to =
                        (from + 1 + (xorshift(&mut rng) % (ACCOUNTS as u64 - 1)) as i64) % ACCOUNTS;
                    let amount = (xorshift(&mut rng) % 50) as i64 + 1;
                    let r = if commands(generation) {
                        transfer
                            .call(db, &[id.into(), from.into(), to.into(), amount.into()])
                            .map(drop)
                    } else {
                        db.run(|tx| transfer_rows(tx, acct, xfer, (id, from, to, amount)))
                    };
                    match r {
                        Ok(()) => {
                            let mut o = out.lock().unwrap_or_else(|e| e.into_inner());
                            let _ = writeln!(o, "ACK {id} {from} {to} {amount}");
                            let _ = o.flush();
                        }
                        Err(e) => panic!("child: transfer failed: {e}"),
                    }
                }
            });
        }
    });
}

/// Runs transfers on two threads until a commit fails; prints `ACK id from to amount` per
/// acknowledged commit, `ERR message` for the first failure, then tries more commits and
/// prints `AFTER ok|message` for each.
fn child_write_failure(dir: &Path, m: LogManagerKind) {
    let db = Database::open(config(dir, m)).expect("child: open");
    let acct = db.table("acct").expect("acct");
    let xfer = db.table("xfer").expect("xfer");
    let out = Mutex::new(std::io::stdout());
    let failed = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        for th in 0..2i64 {
            let (db, acct, xfer, out, failed) = (&db, &acct, &xfer, &out, &failed);
            s.spawn(move || {
                let mut seq = 0i64;
                let transfer = |seq: i64| {
                    let id = th * 100_000_000 + seq;
                    let (from, to, amount) =
                        (seq % ACCOUNTS, (seq + 1 + th) % ACCOUNTS, 1 + seq % 7);
                    db.run(|tx| transfer_rows(tx, acct, xfer, (id, from, to, amount)))
                        .map(|_| (id, from, to, amount))
                };
                while !failed.load(std::sync::atomic::Ordering::SeqCst) && seq < 10_000_000 {
                    seq += 1;
                    let r = transfer(seq);
                    let mut o = out.lock().unwrap_or_else(|e| e.into_inner());
                    match r {
                        Ok((id, from, to, amount)) => {
                            let _ = writeln!(o, "ACK {id} {from} {to} {amount}");
                        }
                        Err(e) => {
                            failed.store(true, std::sync::atomic::Ordering::SeqCst);
                            let _ = writeln!(o, "ERR {e}");
                        }
                    }
                    let _ = o.flush();
                }
                for _ in 0..5 {
                    seq += 1;
                    let r = transfer(seq);
                    let mut o = out.lock().unwrap_or_else(|e| e.into_inner());
                    let _ = match r {
                        Ok(_) => writeln!(o, "AFTER ok"),
                        Err(e) => writeln!(o, "AFTER {e}"),
                    };
                    let _ = o.flush();
                }
            });
        }
    });
}

fn write_failure(generation: i64) {
    let m = manager_of(generation);
    let dir = std::env::temp_dir().join(format!("myriad-wfail-{}-{m}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    create(&dir);
    // 512 blocks of 512 bytes: the log reaches the limit after a few thousand commits. A
    // write past it fails with EFBIG (SIGXFSZ is ignored so the write returns the error).
    let out = Command::new("sh")
        .arg("-c")
        .arg("trap '' XFSZ; ulimit -f 512 && exec \"$0\"")
        .arg(std::env::current_exe().unwrap())
        .env("MYRIAD_CRASH_CHILD", &dir)
        .env("MYRIAD_CRASH_MODE", "write-failure")
        .env("MYRIAD_CRASH_GEN", generation.to_string())
        .stderr(Stdio::inherit())
        .output()
        .unwrap();
    assert!(out.status.success(), "child: {}", out.status);
    let text = String::from_utf8_lossy(&out.stdout);
    let mut acked = Acked::new();
    let mut errors = Vec::new();
    let mut after = Vec::new();
    for line in text.lines() {
        if let Some((id, t)) = ack(line) {
            acked.insert(id, t);
        } else if let Some(e) = line.strip_prefix("ERR ") {
            errors.push(e.to_string());
        } else if let Some(e) = line.strip_prefix("AFTER ") {
            after.push(e.to_string());
        }
    }
    assert!(
        !acked.is_empty(),
        "nothing was acknowledged before the limit"
    );
    assert!(
        errors
            .iter()
            .any(|e| e.contains("too large") || e.contains("log")),
        "the failing commit did not report the write error: {errors:?}"
    );
    assert_eq!(after.len(), 10, "{text}");
    assert!(
        after.iter().all(|e| e != "ok" && e.contains("log")),
        "a commit was acknowledged after the log failed: {after:?}"
    );
    let info = myriad::recovery::inspect::inspect(&dir).unwrap();
    let torn: u64 = info.files.iter().map(|f| f.bytes - f.valid_bytes).sum();
    let n = check(&dir, &acked, 0, generation);
    println!(
        "write_failure_stops_acknowledgements ({m}): {} acknowledged, {n} present; first error: {}; \
         {torn} bytes of partly written blocks dropped",
        acked.len(),
        errors[0],
    );
    let _ = std::fs::remove_dir_all(&dir);
}

fn create(dir: &Path) {
    let db = Database::open(config(dir, LogManagerKind::Epoch)).expect("open new");
    let acct = db
        .create_table(
            TableSchema::new("acct")
                .column("id", ColumnType::Int)
                .column("bal", ColumnType::Int)
                .primary_key(&["id"]),
        )
        .unwrap();
    db.create_table(
        TableSchema::new("xfer")
            .column("id", ColumnType::Int)
            .column("src", ColumnType::Int)
            .column("dst", ColumnType::Int)
            .column("amount", ColumnType::Int)
            .primary_key_with(&["id"], IndexKind::Ordered)
            .index("by_src", &["src"], IndexKind::Hash, false),
    )
    .unwrap();
    db.run(|tx| {
        for i in 0..ACCOUNTS {
            tx.insert(&acct, &(i, OPENING))?;
        }
        Ok(())
    })
    .unwrap();
    db.create_procedures(TRANSFER).unwrap();
}

/// Recovers `dir` (whose last child was generation `generation`) and checks it against the
/// acknowledged transfers.
fn check(dir: &Path, acked: &Acked, round: usize, generation: i64) -> usize {
    // A command log rotates through serial replay, PACMAN sync and PACMAN pipelined.
    let pacman = (log_of(generation) == LogPolicy::Command)
        .then(|| {
            [None, Some(PacmanMode::Sync), Some(PacmanMode::Pipelined)]
                [(generation as usize / 3) % 3]
        })
        .flatten();
    let scheme = match log_of(generation) {
        LogPolicy::Command if pacman.is_some() => RecoveryScheme::Pacman,
        LogPolicy::Command => RecoveryScheme::Serial,
        LogPolicy::Physical => RecoveryScheme::Physical,
        _ => [
            RecoveryScheme::Serial,
            RecoveryScheme::ParallelLatched,
            RecoveryScheme::ParallelPartitioned,
        ][(generation as usize / 3) % 3],
    };
    let mut config = config_of(dir, generation).recovery(scheme);
    if let Some(m) = pacman {
        // Batches of a few epochs, so a child's log of well under a second holds several.
        config = config.pacman_mode(m).pacman_batch_epochs(5);
    }
    let db = Database::open(config).unwrap_or_else(|e| {
        panic!("round {round}: recovery ({scheme}, pacman mode {pacman:?}) failed: {e}")
    });
    let rep = db.recovery_report().unwrap();
    assert_eq!(rep.scheme, scheme.name());
    match log_of(generation) {
        LogPolicy::Command => assert_eq!(rep.calls_replayed, rep.records_replayed, "{rep:?}"),
        LogPolicy::Physical => {
            assert_eq!(rep.physical_replayed, rep.records_replayed, "{rep:?}")
        }
        _ => assert_eq!(rep.calls_replayed + rep.physical_replayed, 0, "{rep:?}"),
    }
    let acct = db.table("acct").unwrap();
    let xfer = db.table("xfer").unwrap();
    let mut tx = db.begin().unwrap();
    let mut present = HashMap::new();
    tx.scan_table(&xfer, |r| {
        present.insert(int(r, 0), (int(r, 1), int(r, 2), int(r, 3)));
        true
    })
    .unwrap();
    let mut bal = HashMap::new();
    tx.scan_table(&acct, |r| {
        bal.insert(int(r, 0), int(r, 1));
        true
    })
    .unwrap();
    tx.commit().unwrap();
    let lost: Vec<i64> = acked
        .iter()
        .filter(|(id, x)| present.get(id) != Some(x))
        .map(|(id, _)| *id)
        .collect();
    assert!(
        lost.is_empty(),
        "round {round}: {} acknowledged transfers lost, e.g. {:?}; recovery: {:?}",
        lost.len(),
        &lost[..lost.len().min(5)],
        db.recovery_report()
    );
    let mut expect: HashMap<i64, i64> = (0..ACCOUNTS).map(|i| (i, OPENING)).collect();
    for &(from, to, amount) in present.values() {
        *expect.get_mut(&from).unwrap() -= amount;
        *expect.get_mut(&to).unwrap() += amount;
    }
    assert_eq!(
        bal, expect,
        "round {round}: balances do not match the transfers present"
    );
    assert_eq!(bal.values().sum::<i64>(), ACCOUNTS * OPENING);
    let rep = db.recovery_report().unwrap();
    assert!(rep.rows as usize >= present.len());
    present.len()
}

fn parent(kills: usize, seed: u64) {
    let dir = std::env::temp_dir().join(format!("myriad-crash-{}-{seed}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    create(&dir);
    let mut rng = seed | 1;
    let acked: Arc<Mutex<Acked>> = Default::default();
    let exe = std::env::current_exe().unwrap();
    let started = Instant::now();
    let mut total_present = 0;
    for round in 0..kills {
        let mut child = Command::new(&exe)
            .env("MYRIAD_CRASH_CHILD", &dir)
            .env("MYRIAD_CRASH_GEN", (round + 1).to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let a = acked.clone();
        let (first_tx, first_rx) = std::sync::mpsc::channel::<()>();
        let reader = std::thread::spawn(move || {
            let mut first = Some(first_tx);
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if let Some((id, t)) = ack(&line) {
                    a.lock().unwrap().insert(id, t);
                    if let Some(t) = first.take() {
                        let _ = t.send(());
                    }
                }
            }
        });
        // Kill at a random moment after the child started committing.
        let _ = first_rx.recv_timeout(Duration::from_secs(30));
        std::thread::sleep(Duration::from_millis(xorshift(&mut rng) % 150));
        child.kill().unwrap();
        let status = child.wait().unwrap();
        reader.join().unwrap();
        assert!(
            status.code().is_none(),
            "round {round}: the child exited by itself ({status}) instead of being killed"
        );
        let acked_now = acked.lock().unwrap().clone();
        total_present = check(&dir, &acked_now, round, round as i64 + 1);
    }
    let n_acked = acked.lock().unwrap().len();
    assert!(n_acked > 0, "no commit was acknowledged");
    println!(
        "crash_bank_transfers: {kills} kills, {n_acked} acknowledged transfers, {total_present} \
         present after the last recovery, {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Rows per load transaction.
const BATCH: i64 = 100;

/// Creates (if needed) and loads table `load` in transactions of `BATCH` rows, continuing
/// after the rows already there; prints `ACK batch` after each acknowledged commit.
fn child_load(dir: &Path, m: LogManagerKind) {
    let db = Database::open(config(dir, m)).expect("child: open");
    let t = match db.table("load") {
        Ok(t) => t,
        Err(_) => db
            .create_table(
                TableSchema::new("load")
                    .column("id", ColumnType::Int)
                    .column("batch", ColumnType::Int)
                    .column("pad", ColumnType::Str(64))
                    .primary_key_with(&["id"], IndexKind::Ordered),
            )
            .expect("child: create"),
    };
    let mut next = 0i64;
    let mut tx = db.begin().unwrap();
    tx.scan_table(&t, |r| {
        next = next.max(int(r, 1) + 1);
        true
    })
    .unwrap();
    tx.commit().unwrap();
    let mut out = std::io::stdout();
    for batch in next.. {
        db.run(|tx| {
            for i in 0..BATCH {
                tx.insert(&t, &(batch * BATCH + i, batch, "x".repeat(64).as_str()))?;
            }
            Ok(())
        })
        .expect("child: load");
        let _ = writeln!(out, "ACK {batch}");
        let _ = out.flush();
    }
}

/// Recovers the directory over and over (each open ends with recovery's checkpoint and a new
/// log session; each close with a last durable round).
fn child_recover(dir: &Path, m: LogManagerKind) {
    let mut out = std::io::stdout();
    loop {
        drop(Database::open(config(dir, m)).expect("child: recover"));
        let _ = writeln!(out, "RECOVERED");
        let _ = out.flush();
    }
}

/// Runs a child in `mode` on `dir` until it has printed `lines` lines (or 10 s), then for a
/// random 0..`ms` ms more, and kills it; returns the lines it printed.
fn run_and_kill(
    dir: &Path,
    mode: &str,
    generation: i64,
    lines: usize,
    ms: u64,
    rng: &mut u64,
) -> Vec<String> {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .env("MYRIAD_CRASH_CHILD", dir)
        .env("MYRIAD_CRASH_MODE", mode)
        .env("MYRIAD_CRASH_GEN", generation.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let got: Arc<Mutex<Vec<String>>> = Default::default();
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    let g = got.clone();
    let reader = std::thread::spawn(move || {
        let mut tx = Some(tx);
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            let mut g = g.lock().unwrap();
            g.push(line);
            if g.len() >= lines {
                if let Some(t) = tx.take() {
                    let _ = t.send(());
                }
            }
        }
    });
    if lines > 0 {
        let _ = rx.recv_timeout(Duration::from_secs(10));
    }
    std::thread::sleep(Duration::from_millis(xorshift(rng) % ms.max(1)));
    let _ = child.kill();
    let status = child.wait().unwrap();
    reader.join().unwrap();
    assert!(
        status.code().is_none(),
        "the {mode} child exited by itself ({status}) instead of being killed"
    );
    let g = got.lock().unwrap().clone();
    g
}

fn crash_during_load_and_recovery(rounds: usize) {
    let mut rng = 0x5eed_1234_u64;
    let started = Instant::now();
    let (mut acked_total, mut recoveries) = (0, 0);
    for (m, generation) in [(LogManagerKind::Epoch, 1i64), (LogManagerKind::Ermia, 4)] {
        let dir =
            std::env::temp_dir().join(format!("myriad-crash-load-{}-{m}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let mut acked: Vec<i64> = Vec::new();
        for round in 0..rounds.div_ceil(2) {
            // The first round may die before the directory is a database at all.
            let lines = if round == 0 { 0 } else { 1 };
            for l in run_and_kill(&dir, "load", generation, lines, 200, &mut rng) {
                if let Some(b) = l.strip_prefix("ACK ").and_then(|b| b.parse().ok()) {
                    acked.push(b);
                }
            }
            if dir.exists() {
                let r = run_and_kill(&dir, "recover", generation, 0, 120, &mut rng);
                recoveries += r.len();
            }
            // Now recover for real and check.
            let db = Database::open(config(&dir, m))
                .unwrap_or_else(|e| panic!("{m} round {round}: recovery failed: {e}"));
            let Ok(t) = db.table("load") else {
                assert!(
                    acked.is_empty(),
                    "{m} round {round}: the table of acknowledged batches is gone"
                );
                continue;
            };
            let mut per_batch: HashMap<i64, i64> = HashMap::new();
            let mut tx = db.begin().unwrap();
            tx.scan_table(&t, |r| {
                *per_batch.entry(int(r, 1)).or_default() += 1;
                true
            })
            .unwrap();
            tx.commit().unwrap();
            for b in &acked {
                assert_eq!(
                    per_batch.get(b),
                    Some(&BATCH),
                    "{m} round {round}: acknowledged batch {b} lost"
                );
            }
            for (b, n) in &per_batch {
                assert_eq!(*n, BATCH, "{m} round {round}: batch {b} half present");
            }
        }
        acked_total += acked.len();
        let _ = std::fs::remove_dir_all(&dir);
    }
    println!(
        "crash_during_load_and_recovery: {rounds} rounds, {acked_total} acknowledged batches, \
         {recoveries} recoveries completed by killed children, {:.1} s",
        started.elapsed().as_secs_f64()
    );
}
