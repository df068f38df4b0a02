//! The engine's background threads (vacuum, the partial-order tick, the log's coordinator and
//! loggers) and what happens when one of them fails. A panic in one — a bug, or an
//! allocation failure — must not pass silently: a dead vacuum thread leaves version memory
//! growing without bound, a dead tick leaves partial-order commits unreadable until a
//! conflict or a floor closes their group, and a dead logger leaves every commit that waits
//! for durability waiting forever. So each body runs under `catch_unwind`; a panic is kept
//! as a message on the database (`Database::background_failures`), and the log turns it
//! into `Error::LogFailed` for every waiter (`log/epoch.rs`, `log/ermia.rs`).

use crate::error::Error;
use parking_lot::Mutex;
use std::any::Any;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

/// The failures of a database's background threads, in the order they happened (each an
/// `Error::BackgroundThread`).
pub(crate) type Failures = Arc<Mutex<Vec<Error>>>;

/// The text of a panic's payload (`panic!` gives a `&str` or a `String`).
pub(crate) fn panic_message(p: &(dyn Any + Send)) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".into())
}

/// Runs `body`; if it panics, records that thread `name` stopped, with the panic's message,
/// in `failures`, and returns. `AssertUnwindSafe`: a panicking thread's state is not used again — it
/// stops, and what it shared is either immutable, atomics, or behind `parking_lot` locks
/// (which do not poison and are released by the unwinding).
pub(crate) fn guarded(name: &str, failures: &Failures, body: impl FnOnce()) {
    if let Err(p) = catch_unwind(AssertUnwindSafe(body)) {
        failures.lock().push(Error::BackgroundThread {
            name: name.into(),
            message: format!("stopped: it panicked: {}", panic_message(&*p)),
        });
    }
}

/// Spawns the named background thread, or says which could not be started.
pub(crate) fn spawn(
    name: String,
    f: impl FnOnce() + Send + 'static,
) -> crate::error::Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new()
        .name(name.clone())
        .spawn(f)
        .map_err(|e| Error::BackgroundThread {
            name,
            message: format!("could not be started: {e}"),
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Config, Database, Error, GcPolicy, TimestampPolicy};
    use std::sync::atomic::Ordering;
    use std::time::{Duration, Instant};

    /// Polls `db.background_failures()` for up to 10 s; their messages.
    fn failures_of(db: &Database) -> Vec<String> {
        let until = Instant::now() + Duration::from_secs(10);
        loop {
            let f: Vec<String> = db
                .background_failures()
                .iter()
                .map(|e| e.to_string())
                .collect();
            if !f.is_empty() || Instant::now() > until {
                return f;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// A vacuum thread that panics is named in `background_failures` (it was silent: the
    /// panic only reached stderr, and version memory grew from then on), and the database
    /// goes on.
    #[test]
    fn a_vacuum_thread_that_panics_is_reported_and_the_database_goes_on() {
        for gc in [GcPolicy::Vacuum, GcPolicy::DeadZone] {
            let db = Database::open(Config::new().gc(gc).gc_threads(1)).unwrap();
            let t = crate::txn::tests::kv_table(&db);
            assert!(db.background_failures().is_empty());
            db.shared
                .vacuum
                .get()
                .unwrap()
                .panic_next
                .store(true, Ordering::Release);
            assert_eq!(
                failures_of(&db),
                ["the background thread `myriad-vacuum-0` stopped: it panicked: injected by a test"],
                "{gc:?}"
            );
            for k in 0..10i64 {
                db.run(|tx| tx.insert(&t, &(k, 0i64))).unwrap();
            }
            for i in 0..100i64 {
                db.run(|tx| tx.update(&t, &(i % 10), &[(1, i)])).unwrap();
            }
            let mut tx = db.begin().unwrap();
            let row = tx.get(&t, &9i64).unwrap().unwrap();
            assert_eq!(row[1], crate::Value::Int(99));
            tx.commit().unwrap();
        }
    }

    /// The partial-order tick too.
    #[test]
    fn a_tick_that_panics_is_reported() {
        let db = Database::open(
            Config::new()
                .protocol(crate::Protocol::Si)
                .isolation(crate::Isolation::Snapshot)
                .timestamps(TimestampPolicy::PartialOrder),
        )
        .unwrap();
        let t = crate::txn::tests::kv_table(&db);
        db.shared.clock.test_panic_next_tick();
        assert_eq!(
            failures_of(&db),
            ["the background thread `myriad-ts-tick` stopped: it panicked: injected by a test"]
        );
        // Commits go on; one becomes readable once a floor closes its group.
        let mut tx = db.begin().unwrap();
        tx.insert(&t, &(1i64, 1i64)).unwrap();
        let ts = tx.commit_returning_ts().unwrap();
        let si = crate::TxnOptions {
            isolation: crate::Isolation::Snapshot,
            read_only: false,
        };
        let mut tx = db.begin_after(si, ts).unwrap();
        assert!(tx.get(&t, &1i64).unwrap().is_some());
        tx.commit().unwrap();
        assert_eq!(
            failures_of(&db),
            ["the background thread `myriad-ts-tick` stopped: it panicked: injected by a test"]
        );
    }

    /// A logger that panics fails the log: a commit waiting for durability gets
    /// `Error::LogFailed` naming the panic instead of waiting for good; later commits are
    /// refused. Under both log managers.
    #[test]
    fn a_log_thread_that_panics_fails_the_waiting_commit_instead_of_hanging_it() {
        for m in [crate::LogManagerKind::Epoch, crate::LogManagerKind::Ermia] {
            let dir = std::env::temp_dir().join(format!(
                "myriad-bg-{}-{m:?}-{}",
                std::process::id(),
                Instant::now().elapsed().as_nanos()
            ));
            let _ = std::fs::remove_dir_all(&dir);
            let db = Arc::new(
                Database::open(
                    Config::new()
                        .data_dir(&dir)
                        .log_manager(m)
                        // Two loggers: the other one lives on, so without the catch the
                        // coordinator would wait for the dead one's outcome for good.
                        .loggers(if m == crate::LogManagerKind::Epoch {
                            2
                        } else {
                            1
                        })
                        .epoch_interval(Duration::from_millis(5)),
                )
                .unwrap(),
            );
            let t = crate::txn::tests::kv_table(&db);
            db.run(|tx| tx.insert(&t, &(1i64, 1i64))).unwrap();
            let control = db.shared.log.get().unwrap().control();
            control.panic_next_round.store(true, Ordering::Release);
            // A detached thread: a hang is this test's failure after 20 s (the thread is
            // left waiting), not a test that never ends.
            let (tx, rx) = std::sync::mpsc::channel();
            let (db2, t2) = (db.clone(), t.clone());
            std::thread::spawn(move || {
                let r = db2.run(|x| x.update(&t2, &1i64, &[(1, 2i64)]));
                let _ = tx.send(r);
            });
            let r = rx
                .recv_timeout(Duration::from_secs(20))
                .unwrap_or_else(|_| panic!("{m:?}: the commit still waits after 20 s"));
            match r {
                Err(Error::LogFailed(msg)) => {
                    assert!(msg.contains("panicked: injected by a test"), "{m:?}: {msg}")
                }
                r => panic!("{m:?}: {r:?}"),
            }
            assert!(matches!(
                db.run(|x| x.update(&t, &1i64, &[(1, 3i64)])),
                Err(Error::LogFailed(_))
            ));
            drop(db);
            let _ = std::fs::remove_dir_all(&dir);
        }
    }

    #[test]
    fn a_panic_is_recorded_with_its_thread_and_message() {
        let f = Failures::default();
        guarded("t", &f, || {});
        assert!(f.lock().is_empty());
        guarded("myriad-x", &f, || panic!("boom {}", 7));
        guarded("myriad-y", &f, || std::panic::panic_any(3u8));
        let got: Vec<String> = f.lock().iter().map(|e| e.to_string()).collect();
        assert_eq!(
            got,
            [
                "the background thread `myriad-x` stopped: it panicked: boom 7",
                "the background thread `myriad-y` stopped: it panicked: a panic without a message"
            ]
        );
    }
}
