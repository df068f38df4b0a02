//! Transaction Healing (thesis ch. 3, `cc/healing.rs`) on multi-threaded histories: calls
//! that meet stale reads heal instead of aborting, and the history checker finds no cycle —
//! while a deliberately broken healing (`Config::unsafe_heal_skips_reads`: a stale row the
//! call only read is accepted, its dependent operations not restored) leaves cycles it finds.
//! `MYRIAD_HEAL_TXNS` sets the calls per thread (default 50,000: two runs of ~93,000
//! committed Smallbank transactions each).
use crate::common::*;
use crate::history_checker::{smallbank_calls, smallbank_db, splitmix};
use myriad::history::{check, TxnRecord};
use myriad::*;

fn heal_txns() -> usize {
    std::env::var("MYRIAD_HEAL_TXNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(50_000)
}

fn healing() -> Config {
    config_for(Protocol::Healing)
}

/// Aborts other than user aborts (RAISE, ROLLBACK).
fn non_user_aborts(s: &Stats) -> u64 {
    AbortReason::ALL
        .iter()
        .zip(&s.aborted)
        .filter(|(r, _)| **r != AbortReason::UserAbort)
        .map(|(_, n)| n)
        .sum()
}

/// Smallbank calls under `healing` heal (at least one heal over the runs), abort only where
/// the procedures RAISE, and leave a history without a cycle.
#[test]
fn smallbank_calls_heal_without_aborts_and_leave_no_cycle() {
    let per_thread = heal_txns();
    let mut heals = 0;
    for seed in 1..=2 {
        let db = smallbank_db(healing());
        smallbank_calls(&db, per_thread, seed);
        let st = db.stats();
        assert_eq!(
            non_user_aborts(&st),
            0,
            "seed {seed}: aborts by reason {:?}",
            st.aborted
        );
        heals += st.heals;
        let h = db.take_history();
        let r = check(&h);
        assert!(r.anomalies.is_empty(), "seed {seed}: {}", r.anomalies[0]);
        assert!(r.edges > 0);
        println!(
            "healing smallbank seed {seed}: {} committed transactions checked, {} heals",
            h.len(),
            st.heals
        );
    }
    assert!(
        heals > 0,
        "no call healed in two runs of {per_thread} calls per thread"
    );
}

/// `ws(me, other)`: reads `other`'s row (and only reads it) and writes its own from it —
/// two calls with crossed arguments are the write-skew shape.
const WRITE_SKEW: &str = "CREATE TABLE kv (k INT PRIMARY KEY, v INT); \
    INSERT INTO kv VALUES (0, 0); INSERT INTO kv VALUES (1, 0); \
    CREATE PROCEDURE ws(me INT, other INT) AS $$ \
      DECLARE a INT; \
      BEGIN \
        SELECT v INTO a FROM kv WHERE k = other; \
        UPDATE kv SET v = a + 1 WHERE k = me; \
      END $$;";

/// Two threads call `ws(0, 1)` and `ws(1, 0)` `per_thread` times each; the history.
fn write_skew_history(c: Config, per_thread: usize) -> (Vec<TxnRecord>, Stats) {
    let db = Database::open(c.record_history(true).max_retries(100_000)).unwrap();
    myriad::sql::Session::new(&db).execute(WRITE_SKEW).unwrap();
    let p = db.procedure("ws").unwrap();
    let start = std::sync::Barrier::new(2);
    std::thread::scope(|sc| {
        for me in 0..2i64 {
            let (p, db, start) = (&p, &db, &start);
            sc.spawn(move || {
                start.wait();
                for _ in 0..per_thread {
                    p.call(db, &[me.into(), (1 - me).into()]).unwrap();
                }
            });
        }
    });
    let st = db.stats();
    (db.take_history(), st)
}

/// The row a call only reads feeds the row it writes (a value dependency). Healing restores
/// the write when the read is stale: no cycle. The broken healing that accepts the stale read
/// instead commits write skews, and the checker reports them.
#[test]
fn a_stale_read_left_unrestored_is_a_cycle_the_checker_finds() {
    let per_thread = heal_txns() / 2;
    let (h, st) = write_skew_history(healing(), per_thread);
    assert!(h.len() >= 2 * per_thread, "every call commits");
    let r = check(&h);
    assert!(r.anomalies.is_empty(), "healing: {}", r.anomalies[0]);
    assert_eq!(non_user_aborts(&st), 0, "aborts by reason {:?}", st.aborted);
    let found = (0..3).any(|_| {
        let (h, st) = write_skew_history(healing().unsafe_heal_skips_reads(true), per_thread);
        assert!(h.len() >= 2 * per_thread, "every broken call commits");
        assert_eq!(non_user_aborts(&st), 0);
        !check(&h).anomalies.is_empty()
    });
    assert!(found, "the broken healing left no anomaly in three runs");
}

/// The broken healing is refused for any protocol but `healing`.
#[test]
fn unsafe_heal_skips_reads_is_healing_only() {
    let Err(e) = Database::open(config_for(Protocol::Occ).unsafe_heal_skips_reads(true)) else {
        panic!("occ opened with the broken healing");
    };
    assert!(matches!(e, Error::InvalidConfig(_)), "{e}");
    assert!(e.to_string().contains("healing"), "{e}");
}

/// Ad-hoc transactions under `healing` run as OCC in the same lock order: stale reads abort
/// (`read_validation`) and are retried, never heal, and the bank invariant holds.
#[test]
fn native_transactions_run_as_occ_under_healing() {
    let db = Database::open(healing().max_retries(100_000)).unwrap();
    let t = kv(&db);
    db.run(|tx| {
        for k in 0..4i64 {
            tx.insert(&t, &kv_row(&t, k, 100, k, 0))?;
        }
        Ok(())
    })
    .unwrap();
    std::thread::scope(|sc| {
        for th in 0..2u64 {
            let (db, t) = (&db, &t);
            sc.spawn(move || {
                let mut rng = th + 5;
                for _ in 0..heal_txns() {
                    let a = (splitmix(&mut rng) % 4) as i64;
                    let b = (a + 1 + (splitmix(&mut rng) % 3) as i64) % 4;
                    db.run(|tx| {
                        let va = try_val(tx, t, a)?.unwrap_or(0);
                        let vb = try_val(tx, t, b)?.unwrap_or(0);
                        tx.update(t, &a, &[(1, va - 1)])?;
                        tx.update(t, &b, &[(1, vb + 1)])
                    })
                    .unwrap();
                }
            });
        }
    });
    let total: i64 = db
        .run(|tx| {
            (0..4i64)
                .map(|k| try_val(tx, &t, k).map(|v| v.unwrap_or(0)))
                .sum()
        })
        .unwrap();
    assert_eq!(total, 400);
    assert_eq!(db.stats().heals, 0, "a native transaction healed");
}

/// A call after other writes in its transaction is not the whole transaction (a heal could
/// not restore what came before it): `execute_commit` commits it as OCC, with the earlier
/// write seen by the call.
#[test]
fn a_call_after_other_writes_commits_as_occ() {
    let db = Database::open(healing()).unwrap();
    myriad::sql::Session::new(&db).execute(WRITE_SKEW).unwrap();
    let t = db.table("kv").unwrap();
    let p = db.procedure("ws").unwrap();
    let mut tx = db.begin().unwrap();
    tx.update(&t, &0i64, &[(1, 5i64)]).unwrap();
    let mut f = p.frame();
    f.set(0, Value::Int(1));
    f.set(1, Value::Int(0));
    p.execute_commit(tx, &mut f).unwrap();
    let v = db.run(|tx| try_val(tx, &t, 1)).unwrap();
    assert_eq!(
        v,
        Some(6),
        "ws(1, 0) read the transaction's own write of row 0"
    );
    assert_eq!(db.stats().heals, 0);
}
