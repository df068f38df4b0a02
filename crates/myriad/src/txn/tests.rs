//! Interleavings of writers that need a pause inside `Transaction::rollback`.

use crate::{AbortReason, ColumnType, Config, Database, Error, TableSchema};
use std::cell::RefCell;
use std::sync::mpsc::channel;
use std::time::Duration;

/// Points inside the transaction code where a test can run code of its own.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Pause {
    /// In `rollback`, after the Aborted state is published and before any write is undone.
    Rollback,
    /// In an insert over a deleted row, after the tombstone is locked and before the new
    /// version is installed.
    ReviveTombstone,
}

/// A hook: where it runs and what it does.
type Hook = (Pause, Box<dyn FnMut()>);

thread_local! {
    static PAUSE: RefCell<Option<Hook>> = const { RefCell::new(None) };
}

/// Runs this thread's hook for `at`, if one is set (test builds only).
pub(crate) fn pause_point(at: Pause) {
    let hook = PAUSE.with(|h| h.borrow_mut().take());
    if let Some((p, mut f)) = hook {
        if p == at {
            f();
        }
        PAUSE.with(|h| *h.borrow_mut() = Some((p, f)));
    }
}

fn set_pause(at: Pause, f: impl FnMut() + 'static) {
    PAUSE.with(|h| *h.borrow_mut() = Some((at, Box::new(f))));
}

fn clear_pause() {
    PAUSE.with(|h| *h.borrow_mut() = None);
}

const WAIT: Duration = Duration::from_secs(20);

/// `t(k INT primary key, v INT)`.
fn kv_table(db: &Database) -> crate::TableRef {
    db.create_table(
        TableSchema::new("t")
            .column("k", ColumnType::Int)
            .column("v", ColumnType::Int)
            .primary_key(&["k"]),
    )
    .unwrap()
}

/// Hekaton §2.6 lets a writer take over the write lock of a version whose End field holds an
/// aborted transaction's id. Here B read the chain head before A wrote, A aborts, and B takes
/// A's lock over and installs its version while A is still rolling back. A's rollback must not
/// put the old head back over B's version: that lost B's committed update and, once B's end
/// timestamp was stamped on the old version, left no version visible to later readers (a row
/// that exists reported as missing).
#[test]
fn rollback_keeps_the_version_of_a_writer_that_took_its_lock_over() {
    let db = Database::open(Config::new()).unwrap();
    let t = kv_table(&db);
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
            set_pause(Pause::Rollback, move || {
                a_aborted.send(()).unwrap();
                // If B could not take the lock over, it never signals; go on regardless.
                let _ = b_installed_rx.recv_timeout(WAIT);
            });
            tx.abort();
            clear_pause();
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

/// Re-inserting a deleted row locks the tombstone at the chain head and installs the new
/// version above it. If GC cuts the deleted row's whole chain in between (the tombstone is
/// visible to every snapshot), installing by a plain store would link the new version to a
/// freed tombstone. The install is a CAS: losing that race is a write-write conflict, and the
/// row can then be inserted afresh.
#[test]
fn reinsert_loses_to_gc_cutting_the_deleted_chain_instead_of_linking_freed_memory() {
    let db = std::sync::Arc::new(Database::open(Config::new()).unwrap());
    let t = kv_table(&db);
    // Hold slot 0 (and the watermark) while another thread inserts and deletes the row, so
    // its garbage is queued in another slot, which is idle when the hook collects.
    let holder = db.begin().unwrap();
    std::thread::scope(|s| {
        s.spawn(|| {
            db.run(|tx| tx.insert(&t, &(1i64, 0i64))).unwrap();
            db.run(|tx| tx.delete(&t, &1i64)).unwrap();
        })
        .join()
        .unwrap()
    });
    holder.abort();
    let mut tx = db.begin().unwrap();
    let gc_db = db.clone();
    set_pause(Pause::ReviveTombstone, move || gc_db.collect_garbage());
    let r = tx.insert(&t, &(1i64, 5i64));
    clear_pause();
    assert_eq!(
        r,
        Err(Error::SerializationFailure(AbortReason::WriteWriteConflict)),
        "GC cut the chain under the locked tombstone"
    );
    db.run(|tx| tx.insert(&t, &(1i64, 6i64))).unwrap();
    let v = db
        .run(|tx| tx.get_with(&t, &1i64, |r| r.i64(1).unwrap()))
        .unwrap();
    assert_eq!(v, Some(6));
    assert_eq!(
        db.chain_stats(4).max_chain_len,
        1,
        "one live version, nothing dangling"
    );
}
