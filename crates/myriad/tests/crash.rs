//! Crash test (DESIGN.md §5): a child process runs bank transfers on two threads against a
//! data directory and prints every commit that `commit()` acknowledged; the parent kills it
//! with SIGKILL at a random moment, recovers the directory, and checks that
//! - every acknowledged transfer is present,
//! - no transfer is half-present: each account's balance equals its opening balance plus the
//!   transfers present (each transfer writes two balances and one row in one transaction),
//! - the total is unchanged,
//!
//! then lets the next child continue on the recovered directory. `MYRIAD_CRASH_KILLS` sets
//! the number of kills (default 60), `MYRIAD_CRASH_SEED` the seed.
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
        child(Path::new(&dir), generation);
        return;
    }
    // Honour `cargo test -- <filter>`: run only when the filter (if any) matches "crash".
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--list") {
        println!("crash_bank_transfers: test");
        return;
    }
    if let Some(f) = args.iter().find(|a| !a.starts_with('-')) {
        if !"crash_bank_transfers".contains(f.as_str()) {
            return;
        }
    }
    let kills: usize = std::env::var("MYRIAD_CRASH_KILLS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(60);
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

fn config(dir: &Path) -> Config {
    Config::new()
        .data_dir(dir)
        .loggers(2)
        .epoch_interval(Duration::from_millis(2))
}

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

/// Runs transfers until killed; prints `ACK id from to amount` after each acknowledged commit.
fn child(dir: &Path, generation: i64) {
    let db = Database::open(config(dir)).expect("child: open");
    let acct = db.table("acct").expect("acct");
    let xfer = db.table("xfer").expect("xfer");
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
                    let r = db.run(|tx| {
                        let a = tx.get(acct, &from)?.expect("from");
                        let b = tx.get(acct, &to)?.expect("to");
                        tx.update(acct, &from, &[(1, bal(&a) - amount)])?;
                        tx.update(acct, &to, &[(1, bal(&b) + amount)])?;
                        tx.insert(xfer, &(id, from, to, amount))
                    });
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

fn create(dir: &Path) {
    let db = Database::open(config(dir)).expect("open new");
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
}

/// Recovers `dir` and checks it against the acknowledged transfers.
fn check(dir: &Path, acked: &Acked, round: usize) -> usize {
    let db = Database::open(config(dir))
        .unwrap_or_else(|e| panic!("round {round}: recovery failed: {e}"));
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
                let f: Vec<i64> = line
                    .split_whitespace()
                    .skip(1)
                    .filter_map(|x| x.parse().ok())
                    .collect();
                if line.starts_with("ACK ") && f.len() == 4 {
                    a.lock().unwrap().insert(f[0], (f[1], f[2], f[3]));
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
        total_present = check(&dir, &acked_now, round);
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
