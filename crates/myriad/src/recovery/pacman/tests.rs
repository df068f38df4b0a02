//! PACMAN against serial replay on adversarial command logs: the same key in consecutive
//! calls, across many one-epoch batches, values flowing between blocks, in sync and in
//! pipelined mode; and the same log with the footprint queues dropped, or with pipelining's
//! edge between a block's piece-sets of consecutive batches dropped, which must then
//! disagree.

use crate::config::{
    FsyncPolicy, LogPolicy, PacmanMode, PacmanSlicing, ProcedureExec, RecoveryScheme,
};
use crate::sql::Session;
use crate::value::ToValueRef;
use crate::{Config, Database};
use std::path::{Path, PathBuf};

/// `bump` reflects a value (`v := d - v`): two bumps of one key give different results in
/// the two orders. `carry` reads `kv` and reflects into `tally` what it read: its `tally`
/// slice imports `x` from its `kv` slice, in another block. `seeded`'s slices read locals a
/// call's start gives them: `acc` its zero, `step` its initial value, which reads `base`'s.
const SQL: &str = "
CREATE TABLE kv (k BIGINT PRIMARY KEY, v BIGINT);
CREATE TABLE tally (id BIGINT PRIMARY KEY, s BIGINT);
CREATE PROCEDURE put(a BIGINT, b BIGINT) AS $$
BEGIN
  INSERT INTO kv VALUES (a, b);
  INSERT INTO tally VALUES (a, b);
END $$;
CREATE PROCEDURE bump(a BIGINT, d BIGINT) AS $$
BEGIN
  UPDATE kv SET v = d - v WHERE k = a;
END $$;
CREATE PROCEDURE carry(a BIGINT, b BIGINT) AS $$
DECLARE x BIGINT;
BEGIN
  SELECT v INTO x FROM kv WHERE k = a;
  UPDATE tally SET s = x - s WHERE id = b;
END $$;
CREATE PROCEDURE seeded(a BIGINT, d BIGINT) AS $$
DECLARE base BIGINT := d * 3; step BIGINT := base + a; acc BIGINT;
BEGIN
  acc := acc + step;
  UPDATE kv SET v = acc - v WHERE k = a;
  UPDATE tally SET s = base - s WHERE id = a % 2;
END $$;
CREATE PROCEDURE spread(ids BIGINT[], d BIGINT) AS $$
DECLARE n BIGINT;
BEGIN
  n := cardinality(ids);
  FOR i IN 1..n LOOP
    UPDATE kv SET v = d - v WHERE k = ids[i];
  END LOOP;
END $$;
";

struct Dir(PathBuf);

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A closed data directory: a checkpoint of four rows per table, then a command log
/// holding an adversarial history.
fn history(tag: &str) -> Dir {
    let d = Dir(std::env::temp_dir().join(format!("myriad-pacman-{tag}-{}", std::process::id())));
    let _ = std::fs::remove_dir_all(&d.0);
    let db = Database::open(
        Config::new()
            .data_dir(&d.0)
            .log(LogPolicy::Command)
            .fsync(FsyncPolicy::Never)
            .loggers(2)
            .epoch_interval(std::time::Duration::from_micros(200)),
    )
    .expect("open");
    Session::new(&db).execute(SQL).expect("schema");
    for k in 0..4i64 {
        db.call("put", &[k.into(), (k * 10).into()]).expect("put");
    }
    // The rows in a checkpoint: replayed out of order, the log then changes values and
    // never fails on a missing row.
    db.checkpoint().expect("checkpoint");
    // The same keys in consecutive calls, from two threads (so the two loggers' files
    // interleave in commit order), with epochs passing between them; every fourth bump ad
    // hoc (logged as its row write), on the keys the calls around it bump.
    let bump = db.procedure("bump").expect("bump");
    std::thread::scope(|s| {
        for w in 0..2i64 {
            let (db, bump) = (&db, &bump);
            s.spawn(move || {
                for n in 0..150i64 {
                    let a = (n + w) % 3;
                    let args = [a.into(), (n * 7 + w).into()];
                    if n % 4 == 3 {
                        db.run(|tx| {
                            tx.log_as_rows();
                            bump.execute(tx, &args)
                        })
                        .expect("ad-hoc bump");
                    } else {
                        bump.call(db, &args).expect("bump");
                    }
                    db.call("carry", &[a.into(), ((n + 1) % 2).into()])
                        .expect("carry");
                    if n % 3 == 0 {
                        db.call("seeded", &[a.into(), n.into()]).expect("seeded");
                    }
                    if n % 10 == 0 {
                        // Key 0 twice in one call: the piece's footprint names it twice.
                        db.call("spread", &[vec![0i64, 2, 0, 3].into(), n.into()])
                            .expect("spread");
                        std::thread::sleep(std::time::Duration::from_millis(1));
                    }
                }
            });
        }
    });
    // An ad-hoc transaction (logged as rows) between calls.
    let t = db.table("kv").expect("kv");
    db.run(|tx| tx.update(&t, &1i64, &[(1, 5i64)]))
        .expect("adhoc");
    db.call("bump", &[1i64.into(), 9i64.into()]).expect("bump");
    drop(db);
    d
}

/// Every table's rows, sorted, after recovering `dir` (nothing written to it).
fn recovered(dir: &Path, c: Config) -> crate::Result<Vec<String>> {
    recovered_with_report(dir, c).map(|(rows, _)| rows)
}

fn recovered_with_report(
    dir: &Path,
    c: Config,
) -> crate::Result<(Vec<String>, crate::RecoveryReport)> {
    let (db, rep) = super::super::verify_db(c.data_dir(dir).create_if_missing(false))?;
    let mut out = Vec::new();
    let mut names = db.table_names();
    names.sort();
    for n in names {
        let t = db.table(&n)?;
        let mut tx = db.begin()?;
        let mut rows = Vec::new();
        tx.scan_table(&t, |r| {
            let vals: Vec<String> = (0..r.len())
                .map(|i| format!("{:?}", r.get(i).map(|v| v.to_value_ref().to_value())))
                .collect();
            rows.push(format!("{n}: {}", vals.join(", ")));
            true
        })?;
        tx.commit()?;
        rows.sort();
        out.extend(rows);
    }
    Ok((out, rep))
}

fn pacman(threads: usize, epochs: u64) -> Config {
    Config::new()
        .recovery(RecoveryScheme::Pacman)
        .recovery_threads(threads)
        .pacman_batch_epochs(epochs)
}

#[test]
fn pacman_matches_serial_on_one_key_in_consecutive_calls_across_batches() {
    let d = history("adversarial");
    let serial = recovered(&d.0, Config::new().recovery(RecoveryScheme::Serial)).expect("serial");
    assert!(serial.len() >= 8, "{serial:?}");
    for mode in [PacmanMode::Static, PacmanMode::Sync, PacmanMode::Pipelined] {
        for threads in [1, 2] {
            for epochs in [1, 3, 100] {
                let (got, rep) =
                    recovered_with_report(&d.0, pacman(threads, epochs).pacman_mode(mode))
                        .expect("pacman");
                let what = format!("pacman {mode}, {threads} threads, {epochs} epochs per batch");
                assert_eq!(got, serial, "{what}");
                assert_eq!(rep.scheme, "pacman");
                assert!(rep.calls_replayed > 300, "{what}: {rep:?}");
                // 37 ad-hoc bumps per thread and the ad-hoc update: row records.
                assert!(
                    rep.records_replayed - rep.calls_replayed >= 75,
                    "{what}: {rep:?}"
                );
                // `carry` is two pieces (kv, then tally), the ad-hoc update one.
                assert!(rep.pieces > rep.records_replayed, "{what}: {rep:?}");
                if epochs == 1 {
                    assert!(rep.batches > 10, "one-epoch batches: {rep:?}");
                }
                if mode != PacmanMode::Pipelined {
                    assert_eq!(rep.sets_overlapped, 0, "{what}: {rep:?}");
                } else if epochs == 1 {
                    // The kv block of batch k+1 starts while batch k's tally block waits
                    // for it: on one worker, taking newest work first, every time.
                    assert!(rep.sets_overlapped > 0, "{what}: {rep:?}");
                }
            }
        }
    }
}

/// Thesis Fig. 4.18's baselines: transaction chopping merges `carry`'s two slices (both
/// conflict with `bump`, whose calls conflict with other `carry` calls), and `put`'s, so
/// every record is one piece, as with whole calls; recovery still equals serial replay.
#[test]
fn chopping_and_whole_pieces_recover_what_serial_recovers() {
    let d = history("chopping");
    let serial = recovered(&d.0, Config::new().recovery(RecoveryScheme::Serial)).expect("serial");
    for slicing in [PacmanSlicing::Chopping, PacmanSlicing::Whole] {
        for mode in [PacmanMode::Static, PacmanMode::Sync] {
            for threads in [1, 2] {
                let c = pacman(threads, 3).pacman_mode(mode).pacman_slicing(slicing);
                let (got, rep) = recovered_with_report(&d.0, c).expect("pacman");
                let what = format!("pieces by {slicing}, {mode}, {threads} threads");
                assert_eq!(got, serial, "{what}");
                assert!(rep.calls_replayed > 300, "{what}: {rep:?}");
                assert_eq!(rep.pieces, rep.records_replayed, "{what}: {rep:?}");
            }
        }
    }
}

#[test]
fn pacman_slices_run_compiled_unless_procedures_are_interpreted() {
    for (mode, compiled) in [
        (ProcedureExec::Compiled, true),
        (ProcedureExec::Interpreted, false),
    ] {
        let db = Database::open(Config::new().procedures(mode)).expect("open");
        Session::new(&db).execute(SQL).expect("schema");
        let defs: Vec<_> = ["put", "bump", "carry", "spread"]
            .iter()
            .map(|n| Some(db.procedure(n).expect("procedure")))
            .collect();
        let plan = super::Plan::build(&defs, crate::PacmanSlicing::Pacman);
        let slices: Vec<&super::SlicePlan> = plan
            .defs
            .iter()
            .flatten()
            .flat_map(|d| d.as_ref().expect("slices"))
            .collect();
        // put: kv and tally; bump; carry: kv and tally; spread.
        assert_eq!(slices.len(), 6);
        for sp in slices {
            assert_eq!(sp.code.is_some(), compiled, "{mode}");
        }
    }
    // The interpreted slices replay the adversarial log as serial does too.
    let d = history("interpreted");
    let serial = recovered(&d.0, Config::new().recovery(RecoveryScheme::Serial)).expect("serial");
    for threads in [1, 2] {
        let c = pacman(threads, 1).procedures(ProcedureExec::Interpreted);
        assert_eq!(
            recovered(&d.0, c).expect("pacman"),
            serial,
            "{threads} threads"
        );
    }
}

#[test]
fn pipelined_pacman_without_its_edge_between_batches_disagrees_with_serial() {
    let d = history("unpipelined");
    let serial = recovered(&d.0, Config::new().recovery(RecoveryScheme::Serial)).expect("serial");
    // One-epoch batches, the last started first: a later batch's bumps of a key run before
    // an earlier batch's.
    let mut c = pacman(1, 1).pacman_mode(PacmanMode::Pipelined);
    c.pacman_unpipelined = true;
    let got = recovered(&d.0, c).expect("unpipelined pacman");
    assert_ne!(
        got, serial,
        "dropping the edge between batches must break the replay"
    );
    let got = recovered(&d.0, pacman(1, 1).pacman_mode(PacmanMode::Pipelined)).expect("pacman");
    assert_eq!(got, serial);
}

#[test]
fn pacman_without_its_key_queues_disagrees_with_serial() {
    let d = history("unordered");
    let serial = recovered(&d.0, Config::new().recovery(RecoveryScheme::Serial)).expect("serial");
    // One big batch, its piece-sets' pieces run newest first: consecutive bumps of one key
    // run in the wrong order.
    let mut c = pacman(1, 1 << 40);
    c.pacman_unordered = true;
    let got = recovered(&d.0, c).expect("unordered pacman");
    assert_ne!(got, serial, "dropping the queues must break the replay");
    // The same batch with its queues matches.
    let got = recovered(&d.0, pacman(2, 1 << 40)).expect("pacman");
    assert_eq!(got, serial);
}

#[test]
fn pacman_refuses_a_procedure_returning_early() {
    // A RETURN before the end decides whether what follows runs, which the slices do not
    // model: its calls are refused (and replay serially).
    let d = Dir(std::env::temp_dir().join(format!("myriad-pacman-early-{}", std::process::id())));
    let _ = std::fs::remove_dir_all(&d.0);
    let db = Database::open(
        Config::new()
            .data_dir(&d.0)
            .log(LogPolicy::Command)
            .fsync(FsyncPolicy::Never),
    )
    .expect("open");
    Session::new(&db)
        .execute(
            "CREATE TABLE kv (k BIGINT PRIMARY KEY, v BIGINT);
             CREATE PROCEDURE early(a BIGINT) AS $$
             BEGIN
               INSERT INTO kv VALUES (a, a);
               IF a > 1 THEN RETURN 0; END IF;
               UPDATE kv SET v = v + 1 WHERE k = a;
             END $$;",
        )
        .expect("schema");
    for a in 0..4i64 {
        db.call("early", &[a.into()]).expect("early");
    }
    drop(db);
    let c = |s| {
        Config::new()
            .recovery(s)
            .data_dir(&d.0)
            .create_if_missing(false)
    };
    let e = super::super::verify_db(c(RecoveryScheme::Pacman))
        .err()
        .expect("refused");
    assert!(
        matches!(&e, crate::Error::Unsupported(m) if m.contains("`early`")),
        "{e}"
    );
    assert!(super::super::verify_db(c(RecoveryScheme::Serial)).is_ok());
}
