//! What both log managers share with their committers: the durable point, the failure latch,
//! the round handshake (a committer that waits kicks the background thread, which runs a round
//! and wakes it), rotation requests, shutdown and the counters of `LogStats`.

use super::LogStats;
use crate::error::{Error, Result};
use crossbeam_utils::CachePadded;
use parking_lot::{Condvar, Mutex};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

#[derive(Default)]
struct Ctl {
    kick: bool,
    stop: bool,
    rotate: bool,
    rounds: u64,
    /// The file sequence numbers the last rotation started (per logger; one for ERMIA).
    rotated_to: Vec<u64>,
}

/// What a durable-point record says besides the point itself (`PersistentEpoch`): the first
/// file each stream still needs, the current checkpoint and the catalog's durable length.
/// `version` counts changes: the background thread publishes a record after each one.
#[derive(Clone, Debug, Default)]
pub(crate) struct PointExtra {
    pub first: Vec<u64>,
    pub checkpoint: Option<u64>,
    pub catalog_bytes: u64,
    pub version: u64,
}

pub(crate) struct Control {
    /// The durable point: an epoch, or an LSN.
    durable: CachePadded<AtomicU64>,
    extra: Mutex<PointExtra>,
    ctl: Mutex<Ctl>,
    wake: Condvar,
    done: Condvar,
    failed: OnceLock<String>,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
    /// Called with each durable point once it is published (and with `u64::MAX` on a
    /// failure): `partial-order`'s deferred releases (`timestamp/partial_order.rs`).
    on_durable: OnceLock<Box<dyn Fn(u64) + Send + Sync>>,
    pub bytes_written: AtomicU64,
    pub blocks_written: AtomicU64,
    pub fsyncs: AtomicU64,
    /// Tests: the next round of a logger panics (`guarded`).
    #[cfg(test)]
    pub(crate) panic_next_round: std::sync::atomic::AtomicBool,
}

impl Control {
    pub(crate) fn new(durable: u64, extra: PointExtra) -> Control {
        Control {
            durable: CachePadded::new(AtomicU64::new(durable)),
            extra: Mutex::new(extra),
            ctl: Mutex::new(Ctl::default()),
            wake: Condvar::new(),
            done: Condvar::new(),
            failed: OnceLock::new(),
            thread: Mutex::new(None),
            on_durable: OnceLock::new(),
            bytes_written: AtomicU64::new(0),
            blocks_written: AtomicU64::new(0),
            fsyncs: AtomicU64::new(0),
            #[cfg(test)]
            panic_next_round: Default::default(),
        }
    }

    /// Runs `body`, a log thread's work; a panic in it fails the log (`fail`), so that every
    /// commit waiting for durability gets `Error::LogFailed` instead of waiting for a round
    /// that will never run (`background.rs`). Returns `body`'s result, or `None` after a
    /// panic.
    pub(crate) fn guarded<R>(&self, name: &str, body: impl FnOnce() -> R) -> Option<R> {
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(body)) {
            Ok(r) => Some(r),
            Err(p) => {
                self.fail(&crate::error::Error::LogFailed(format!(
                    "the log thread `{name}` panicked: {}",
                    crate::background::panic_message(&*p)
                )));
                None
            }
        }
    }

    /// Tests: panics if a test asked this round to (`panic_next_round`).
    #[inline]
    pub(crate) fn test_panic_point(&self) {
        #[cfg(test)]
        if self
            .panic_next_round
            .swap(false, std::sync::atomic::Ordering::AcqRel)
        {
            panic!("injected by a test");
        }
    }

    /// Sets what runs after each durable point is published (once, before any commit).
    pub(crate) fn set_on_durable(&self, f: Box<dyn Fn(u64) + Send + Sync>) {
        let _ = self.on_durable.set(f);
    }

    /// The background thread that runs the rounds (joined by `shutdown`).
    pub(crate) fn set_thread(&self, h: std::thread::JoinHandle<()>) {
        *self.thread.lock() = Some(h);
    }

    #[inline]
    pub(crate) fn durable(&self) -> u64 {
        self.durable.load(Ordering::SeqCst)
    }

    pub(crate) fn check_failed(&self) -> Result<()> {
        match self.failed.get() {
            Some(m) => Err(Error::LogFailed(m.clone())),
            None => Ok(()),
        }
    }

    /// What the next durable-point record says besides the point.
    pub(crate) fn extra(&self) -> PointExtra {
        self.extra.lock().clone()
    }

    /// A checkpoint (as of `ts`, needing the files from `first` on) became current: the next
    /// durable-point record says so (a round is started for it).
    pub(crate) fn set_checkpoint(&self, ts: u64, first: Vec<u64>) {
        {
            let mut x = self.extra.lock();
            x.checkpoint = Some(ts);
            for (f, n) in x
                .first
                .iter_mut()
                .zip(first.iter().chain(std::iter::repeat(&0)))
            {
                *f = (*f).max(*n);
            }
            x.version += 1;
        }
        self.kick();
    }

    /// The catalog grew to `bytes` (durably): the next durable-point record says so.
    pub(crate) fn set_catalog_bytes(&self, bytes: u64) {
        {
            let mut x = self.extra.lock();
            x.catalog_bytes = bytes;
            x.version += 1;
        }
        self.kick();
    }

    /// Asks for a round now.
    pub(crate) fn kick(&self) {
        let mut c = self.ctl.lock();
        c.kick = true;
        self.wake.notify_one();
    }

    /// Waits until the durable point reaches `point` (starting a round at once).
    pub(crate) fn wait_durable(&self, point: u64) -> Result<()> {
        if self.durable() >= point {
            return Ok(());
        }
        let mut c = self.ctl.lock();
        loop {
            if self.durable() >= point {
                return Ok(());
            }
            self.check_failed()?;
            if c.stop {
                return Err(Error::LogFailed("the database is closing".into()));
            }
            c.kick = true;
            self.wake.notify_one();
            self.done.wait(&mut c);
        }
    }

    /// Asks the next round to start new log files; returns their sequence numbers.
    pub(crate) fn rotate(&self) -> Result<Vec<u64>> {
        let mut c = self.ctl.lock();
        let target = c.rounds + 1;
        c.rotate = true;
        self.wake.notify_one();
        loop {
            self.check_failed()?;
            if c.rounds >= target && !c.rotate {
                return Ok(c.rotated_to.clone());
            }
            self.done.wait(&mut c);
        }
    }

    pub(crate) fn stats(&self) -> LogStats {
        LogStats {
            bytes_written: self.bytes_written.load(Ordering::Relaxed),
            blocks_written: self.blocks_written.load(Ordering::Relaxed),
            fsyncs: self.fsyncs.load(Ordering::Relaxed),
            rounds: self.ctl.lock().rounds,
            durable_epoch: self.durable(),
        }
    }

    /// Runs a last round (so every commit made so far becomes durable) and stops the thread.
    pub(crate) fn shutdown(&self) {
        {
            let mut c = self.ctl.lock();
            c.stop = true;
            self.wake.notify_one();
        }
        if let Some(h) = self.thread.lock().take() {
            let _ = h.join();
        }
        // Wake anyone still waiting (they see `stop` or the final durable point).
        let _c = self.ctl.lock();
        self.done.notify_all();
    }

    /// Latches the first failure: no durable point is published after it.
    pub(crate) fn fail(&self, e: &Error) {
        let _ = self.failed.set(e.to_string());
        // Nothing becomes durable any more: what waited for it is released as it is (the
        // commits stay in memory, later ones are refused), or readers would stop for good.
        if let Some(f) = self.on_durable.get() {
            f(u64::MAX);
        }
        let _c = self.ctl.lock();
        self.done.notify_all();
    }

    /// The background thread: waits up to `interval` for a reason to run a round; returns
    /// (stop after this round, rotate in this round).
    pub(crate) fn next_round(&self, interval: Duration) -> (bool, bool) {
        let mut c = self.ctl.lock();
        if !c.kick && !c.stop && !c.rotate {
            self.wake.wait_for(&mut c, interval);
        }
        c.kick = false;
        (c.stop, c.rotate)
    }

    /// The background thread: a round made everything up to `durable` durable (and, if it
    /// rotated, started the files `rotated_to`); wakes the waiters.
    pub(crate) fn end_round(&self, durable: u64, rotated_to: Option<Vec<u64>>) {
        // The durable point never goes back: a commit acknowledged stays acknowledged.
        debug_assert!(durable >= self.durable.load(Ordering::Acquire));
        self.durable.store(durable, Ordering::SeqCst);
        // After the store: a member deferring its release after this reads the new point
        // and releases itself (`PartialOrder::defer_release`).
        if let Some(f) = self.on_durable.get() {
            f(durable);
        }
        let mut c = self.ctl.lock();
        c.rounds += 1;
        if let Some(r) = rotated_to {
            c.rotate = false;
            c.rotated_to = r;
        }
        self.done.notify_all();
    }
}
