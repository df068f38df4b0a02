//! Interleavings of writers that need a pause inside `Transaction::rollback`.

use crate::{ColumnType, Config, Database, TableSchema};
use std::cell::RefCell;
use std::sync::mpsc::channel;
use std::time::Duration;

thread_local! {
    /// Runs inside `rollback` on this thread after the Aborted state is published and before
    /// any write is undone.
    pub(crate) static ROLLBACK_PAUSE: RefCell<Option<Box<dyn FnMut()>>> = const { RefCell::new(None) };
}

const WAIT: Duration = Duration::from_secs(20);

/// Hekaton §2.6 lets a writer take over the write lock of a version whose End field holds an
/// aborted transaction's id. Here B read the chain head before A wrote, A aborts, and B takes
/// A's lock over and installs its version while A is still rolling back. A's rollback must not
/// put the old head back over B's version: that lost B's committed update and, once B's end
/// timestamp was stamped on the old version, left no version visible to later readers (a row
/// that exists reported as missing).
#[test]
fn rollback_keeps_the_version_of_a_writer_that_took_its_lock_over() {
    let db = Database::open(Config::new()).unwrap();
    let t = db
        .create_table(
            TableSchema::new("t")
                .column("k", ColumnType::Int)
                .column("v", ColumnType::Int)
                .primary_key(&["k"]),
        )
        .unwrap();
    db.run(|tx| tx.insert(&t, &(1i64, 0i64))).unwrap();

    let (b_read, b_read_rx) = channel::<()>();
    let (a_aborted, a_aborted_rx) = channel::<()>();
    let (b_installed, b_installed_rx) = channel::<()>();
    std::thread::scope(|s| {
        let (db, t) = (&db, &t);
        let a = s.spawn(move || {
            b_read_rx.recv_timeout(WAIT).unwrap();
            let mut tx = db.begin().unwrap();
            tx.update(t, &1i64, &[(1, 100i64)]).unwrap();
            ROLLBACK_PAUSE.with(|h| {
                *h.borrow_mut() = Some(Box::new(move || {
                    a_aborted.send(()).unwrap();
                    // If B could not take the lock over, it never signals; go on regardless.
                    let _ = b_installed_rx.recv_timeout(WAIT);
                }))
            });
            tx.abort();
            ROLLBACK_PAUSE.with(|h| *h.borrow_mut() = None);
        });
        let b = s.spawn(move || {
            let mut tx = db.begin().unwrap();
            // The closure runs after B found the head and before B locks it.
            tx.update_with(t, &1i64, |row| {
                b_read.send(()).unwrap();
                a_aborted_rx.recv_timeout(WAIT).unwrap();
                row.set(1, 7i64)
            })
            .unwrap();
            b_installed.send(()).unwrap();
            tx.commit().unwrap();
        });
        a.join().unwrap();
        b.join().unwrap();
    });
    let v = db
        .run(|tx| tx.get_with(&t, &1i64, |r| r.i64(1).unwrap()))
        .unwrap();
    assert_eq!(v, Some(7), "B's committed update must survive A's rollback");
}
