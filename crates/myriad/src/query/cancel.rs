//! Cancelling a running statement (PostgreSQL's query cancel and `statement_timeout`).
//!
//! A [`Session`](super::Session) installs a [`Watch`] on its thread for each statement it
//! runs; the long-running loops (every row a scan visits, every row an `INSERT`/`UPDATE`/
//! `DELETE` writes, every iteration of a procedure's loop) call [`tick`], which every
//! [`TICK_EVERY`] calls looks at the cancel flag and the deadline and fails with
//! [`Error::Cancelled`]. With no watch installed (procedures called from Rust), a tick is one
//! thread-local increment.

use crate::error::{Error, Result};
use std::cell::{Cell, RefCell};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How many ticks pass between two looks at the flag and the clock.
const TICK_EVERY: u32 = 256;

/// Cancels the statement a session is running, from any thread (a signal handler's thread,
/// a watchdog), and the statements after it in the same `Session::execute` call. A cancel
/// that arrives between two `execute` calls is forgotten when the next one starts.
#[derive(Clone, Debug, Default)]
pub struct CancelHandle(Arc<AtomicBool>);

impl CancelHandle {
    /// Asks the running `execute` call to stop at its next check with `Error::Cancelled`.
    pub fn cancel(&self) {
        self.0.store(true, Ordering::Relaxed);
    }
    pub(crate) fn clear(&self) {
        self.0.store(false, Ordering::Relaxed);
    }
    fn is_set(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

/// What the running statement is watched for.
pub(crate) struct Watch {
    pub handle: CancelHandle,
    pub deadline: Option<(Instant, Duration)>,
}

impl Watch {
    fn check(&self) -> Result<()> {
        if self.handle.is_set() {
            return Err(Error::Cancelled("user request".into()));
        }
        match self.deadline {
            Some((at, limit)) if Instant::now() >= at => Err(Error::Cancelled(format!(
                "statement timeout ({} ms)",
                limit.as_millis()
            ))),
            _ => Ok(()),
        }
    }
}

thread_local! {
    static WATCH: RefCell<Option<Watch>> = const { RefCell::new(None) };
    static TICKS: Cell<u32> = const { Cell::new(0) };
}

/// Installs `w` on this thread until the guard drops (restoring the watch before it, so
/// nested sessions on one thread work).
pub(crate) fn watch(w: Watch) -> Guard {
    let before = WATCH.with_borrow_mut(|cur| cur.replace(w));
    TICKS.set(0);
    Guard { before }
}

pub(crate) struct Guard {
    before: Option<Watch>,
}

impl Drop for Guard {
    fn drop(&mut self) {
        let before = self.before.take();
        WATCH.with_borrow_mut(|cur| *cur = before);
    }
}

/// One unit of work of a long-running loop: an error if the running statement was
/// cancelled or ran past its deadline (looked at once per [`TICK_EVERY`] calls).
#[inline]
pub(crate) fn tick() -> Result<()> {
    let n = TICKS.get().wrapping_add(1);
    TICKS.set(n);
    if !n.is_multiple_of(TICK_EVERY) {
        return Ok(());
    }
    check()
}

/// Looks at the flag and the deadline now.
pub(crate) fn check() -> Result<()> {
    WATCH.with_borrow(|w| match w {
        Some(w) => w.check(),
        None => Ok(()),
    })
}
