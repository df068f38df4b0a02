//! Runs one permutation: a thread per session, each holding its own executor (its own
//! transaction), driven step by step from the calling thread.
//!
//! The driver sends a step to its session's thread and waits for it. A step that is blocked
//! is reported `Waiting` and the driver moves on; after every later step it waits again for
//! each waiting step, and reports those that finished as `Completed` (so a step released by
//! the one just run is reported right after it). The next step of a session whose previous
//! step is still waiting waits for that one first, as does the end of the permutation.
//!
//! Blocked, as PostgreSQL's isolation tester decides it: by asking the engine. An engine
//! that counts its lock waiters ([`Connector::lock_waits`]) has a step blocked when it counts
//! more waiters than the steps already known blocked — continuously for the settle time
//! (`Timing::settle`), so a wait that a finishing step is about to release is not taken for
//! a block — and the waiting steps are still blocked once it counts them all for the settle
//! time. The step timeout is then only a bound for a wait the engine does not count (a step
//! still running after it is reported `Waiting`). An engine that counts nothing is judged
//! by the step timeout alone: a step still running after it is `Waiting`, and each waiting
//! step gets another timeout after every later step. Nothing here knows SQL: the engine is
//! behind [`Connector`] and [`Executor`], so the scheduling is tested with a fake that
//! blocks on purpose.
//!
//! A step that never finishes hangs the run (no cancellation; MVOCC never waits on a lock,
//! only briefly on a Preparing writer).

use super::spec::{Spec, Step, StepRef};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::time::{Duration, Instant};

/// One output cell, typed so that JSON keeps numbers numbers and text right- or left-aligns.
#[derive(Debug, Clone, PartialEq)]
pub enum Cell {
    Int(i64),
    Float(f64),
    Text(String),
}

/// The rows of one statement that returned rows.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ResultSet {
    pub columns: Vec<String>,
    pub rows: Vec<Vec<Cell>>,
}

/// Why a step failed.
#[derive(Debug, Clone, PartialEq)]
pub struct StepError {
    /// Stable snake_case class (`serialization_failure`, `duplicate_key`, `sql`, ...).
    pub kind: &'static str,
    /// For aborts: the engine's abort reason (`write_write_conflict`, ...).
    pub reason: Option<&'static str>,
    /// Human message, stable across runs (no ids, no timestamps).
    pub message: String,
}

/// What a step (or a setup/teardown block) produced: the result sets of the statements that
/// ran, and the error that stopped it, if any.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct StepResult {
    pub results: Vec<ResultSet>,
    pub error: Option<StepError>,
}

impl StepResult {
    pub fn failed(kind: &'static str, message: String) -> StepResult {
        StepResult {
            results: Vec::new(),
            error: Some(StepError {
                kind,
                reason: None,
                message,
            }),
        }
    }
}

/// Runs the SQL of one session. Created on, and used only by, that session's thread.
pub trait Executor {
    fn execute(&mut self, sql: &str) -> StepResult;
}

/// Opens executors on a shared database (one per session, plus one for the global blocks).
pub trait Connector: Sync {
    fn connect(&self) -> Box<dyn Executor + '_>;

    /// How many of the database's transactions are blocked on a lock now, if the engine can
    /// tell (see the module comment); `None` leaves blocking to the step timeout.
    fn lock_waits(&self) -> Option<usize> {
        None
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockKind {
    Setup,
    Teardown,
}

/// What happened to a step.
#[derive(Debug, Clone, PartialEq)]
pub enum Status {
    /// Finished within the step timeout.
    Done(StepResult),
    /// Still running after the step timeout; a `Completed` follows.
    Waiting,
    /// A step reported `Waiting` has finished.
    Completed(StepResult),
}

/// The run as it happens, in output order.
#[derive(Debug, Clone, PartialEq)]
pub enum Event<'a> {
    /// A permutation starts (`number` counts from 1 within the spec).
    Permutation { number: usize, steps: Vec<&'a str> },
    /// A setup or teardown block ran (global when `session` is `None`).
    Block {
        kind: BlockKind,
        session: Option<&'a str>,
        sql: &'a str,
        result: StepResult,
    },
    Step {
        session: &'a str,
        step: &'a Step,
        status: Status,
    },
}

/// A session thread's channels, the step it is still running, if any, and that step's
/// result once it arrived (before it is reported).
struct Worker {
    to: Option<Sender<String>>,
    from: Receiver<StepResult>,
    waiting: Option<StepRef>,
    finished: Option<StepResult>,
}

/// How often the driver looks at the engine's lock waiters while a step runs.
const POLL: Duration = Duration::from_millis(1);

impl Worker {
    /// Takes a waiting step's result if it has arrived.
    fn poll(&mut self) {
        if self.waiting.is_some() && self.finished.is_none() {
            match self.from.try_recv() {
                Ok(r) => self.finished = Some(r),
                Err(mpsc::TryRecvError::Empty) => {}
                Err(mpsc::TryRecvError::Disconnected) => self.finished = Some(thread_gone()),
            }
        }
    }

    /// Whether its waiting step is still running (as far as the driver has seen).
    fn blocked(&self) -> bool {
        self.waiting.is_some() && self.finished.is_none()
    }

    fn send(&self, sql: &str) -> bool {
        self.to
            .as_ref()
            .is_some_and(|t| t.send(sql.to_owned()).is_ok())
    }

    fn wait(&mut self) -> StepResult {
        match self.finished.take() {
            Some(r) => r,
            None => self.from.recv().unwrap_or_else(|_| thread_gone()),
        }
    }

    fn wait_for(&self, d: Duration) -> Option<StepResult> {
        match self.from.recv_timeout(d) {
            Ok(r) => Some(r),
            Err(RecvTimeoutError::Timeout) => None,
            Err(RecvTimeoutError::Disconnected) => Some(thread_gone()),
        }
    }

    /// Runs `sql` to completion (setup and teardown blocks: no timeout).
    fn run(&mut self, sql: &str) -> StepResult {
        if self.send(sql) {
            self.wait()
        } else {
            thread_gone()
        }
    }
}

fn thread_gone() -> StepResult {
    StepResult::failed("internal", "the session's thread has ended".into())
}

fn panicked(p: Box<dyn std::any::Any + Send>) -> StepResult {
    let what = p
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(no message)".into());
    StepResult::failed("internal", format!("internal error: panic: {what}"))
}

/// Runs `sql` on `ex`, turning a panic (an engine bug) into a failed step.
fn guarded(ex: &mut dyn Executor, sql: &str) -> Result<StepResult, StepResult> {
    catch_unwind(AssertUnwindSafe(|| ex.execute(sql))).map_err(panicked)
}

/// A session's thread: connects, then runs each step it receives until the driver hangs up.
/// After a panic the executor may be inconsistent, so every later step fails.
fn session_thread(conn: &dyn Connector, steps: Receiver<String>, results: Sender<StepResult>) {
    let mut ex = match catch_unwind(AssertUnwindSafe(|| conn.connect())) {
        Ok(ex) => ex,
        Err(p) => {
            let r = panicked(p);
            for _ in steps {
                if results.send(r.clone()).is_err() {
                    return;
                }
            }
            return;
        }
    };
    let mut broken: Option<StepResult> = None;
    for sql in steps {
        let r = match &broken {
            Some(r) => r.clone(),
            None => guarded(ex.as_mut(), &sql).unwrap_or_else(|r| {
                broken = Some(r.clone());
                r
            }),
        };
        if results.send(r).is_err() {
            return;
        }
    }
}

/// Timing of a run.
#[derive(Debug, Clone, Copy)]
pub struct Timing {
    /// How long a step may run before it is reported as waiting.
    pub step_timeout: Duration,
    /// How long the engine's count of lock waiters must show a step blocked before it is
    /// reported waiting, and the waiting steps still blocked before the driver goes on.
    pub settle: Duration,
}

/// Runs permutation `number` (`perm`) of `spec` on executors from `conn` (which should be a
/// fresh database), reporting every event to `sink`. Returns false if a setup block failed
/// (the steps are then skipped).
pub fn run_permutation<'s>(
    spec: &'s Spec,
    number: usize,
    perm: &[StepRef],
    conn: &dyn Connector,
    timing: Timing,
    sink: &mut dyn FnMut(Event<'s>),
) -> bool {
    sink(Event::Permutation {
        number,
        steps: perm.iter().map(|&r| spec.step(r).name.as_str()).collect(),
    });
    // The global blocks run on a connection of their own, kept for the teardown.
    let mut global = match catch_unwind(AssertUnwindSafe(|| conn.connect())) {
        Ok(g) => g,
        Err(p) => {
            sink(Event::Block {
                kind: BlockKind::Setup,
                session: None,
                sql: "",
                result: panicked(p),
            });
            return false;
        }
    };
    for sql in &spec.setup {
        let result = guarded(global.as_mut(), sql).unwrap_or_else(|r| r);
        let failed = result.error.is_some();
        sink(Event::Block {
            kind: BlockKind::Setup,
            session: None,
            sql,
            result,
        });
        if failed {
            return false;
        }
    }
    let mut ok = true;
    std::thread::scope(|scope| {
        let mut workers: Vec<Worker> = Vec::with_capacity(spec.sessions.len());
        for _ in &spec.sessions {
            let (to, steps) = mpsc::channel::<String>();
            let (results, from) = mpsc::channel::<StepResult>();
            scope.spawn(move || session_thread(conn, steps, results));
            workers.push(Worker {
                to: Some(to),
                from,
                waiting: None,
                finished: None,
            });
        }
        for (w, s) in workers.iter_mut().zip(&spec.sessions) {
            if let Some(sql) = &s.setup {
                let result = w.run(sql);
                ok &= result.error.is_none();
                sink(Event::Block {
                    kind: BlockKind::Setup,
                    session: Some(&s.name),
                    sql,
                    result,
                });
                if !ok {
                    break;
                }
            }
        }
        if ok {
            drive(spec, perm, &mut workers, conn, timing, sink);
        }
        for (w, s) in workers.iter_mut().zip(&spec.sessions) {
            if let Some(sql) = &s.teardown {
                let result = w.run(sql);
                sink(Event::Block {
                    kind: BlockKind::Teardown,
                    session: Some(&s.name),
                    sql,
                    result,
                });
            }
            // Hang up: the thread ends and drops its executor (rolling back an open
            // transaction) before the scope returns.
            w.to = None;
        }
    });
    if let Some(sql) = &spec.teardown {
        let result = guarded(global.as_mut(), sql).unwrap_or_else(|r| r);
        sink(Event::Block {
            kind: BlockKind::Teardown,
            session: None,
            sql,
            result,
        });
    }
    ok
}

/// Issues the permutation's steps in order (see the module comment for waiting).
fn drive<'s>(
    spec: &'s Spec,
    perm: &[StepRef],
    workers: &mut [Worker],
    conn: &dyn Connector,
    timing: Timing,
    sink: &mut dyn FnMut(Event<'s>),
) {
    let step_event = |r: StepRef, status: Status| Event::Step {
        session: spec.sessions[r.session].name.as_str(),
        step: spec.step(r),
        status,
    };
    let counted = conn.lock_waits().is_some();
    for &r in perm {
        let w = &mut workers[r.session];
        if let Some(prev) = w.waiting.take() {
            let res = w.wait();
            sink(step_event(prev, Status::Completed(res)));
        }
        let status = if !workers[r.session].send(&spec.step(r).sql) {
            Status::Done(thread_gone())
        } else {
            let res = if counted {
                run_counted(workers, r.session, conn, timing)
            } else {
                workers[r.session].wait_for(timing.step_timeout)
            };
            match res {
                Some(res) => Status::Done(res),
                None => {
                    workers[r.session].waiting = Some(r);
                    Status::Waiting
                }
            }
        };
        sink(step_event(r, status));
        if counted {
            settle_waiters(workers, conn, timing);
        }
        for (i, w) in workers.iter_mut().enumerate() {
            if i == r.session {
                continue;
            }
            if let Some(prev) = w.waiting {
                let res = if counted {
                    w.finished.take()
                } else {
                    w.wait_for(timing.step_timeout)
                };
                if let Some(res) = res {
                    w.waiting = None;
                    sink(step_event(prev, Status::Completed(res)));
                }
            }
        }
    }
    for w in workers.iter_mut() {
        if let Some(prev) = w.waiting.take() {
            let res = w.wait();
            sink(step_event(prev, Status::Completed(res)));
        }
    }
}

/// The engine's lock-waiter count, or 0 if it no longer gives one.
fn lock_waits(conn: &dyn Connector) -> usize {
    conn.lock_waits().unwrap_or(0)
}

/// Waits for the step just sent to `session`: its result, or `None` once the engine counts
/// it blocked for the settle time (more lock waiters than the steps already blocked) or the
/// step timeout has passed. The other sessions' waiting steps that finish meanwhile keep
/// their results for `settle_waiters` to report.
fn run_counted(
    workers: &mut [Worker],
    session: usize,
    conn: &dyn Connector,
    timing: Timing,
) -> Option<StepResult> {
    let started = Instant::now();
    let mut over_since: Option<Instant> = None;
    loop {
        match workers[session].from.recv_timeout(POLL) {
            Ok(r) => return Some(r),
            Err(RecvTimeoutError::Disconnected) => return Some(thread_gone()),
            Err(RecvTimeoutError::Timeout) => {}
        }
        workers.iter_mut().for_each(Worker::poll);
        let blocked = workers.iter().filter(|w| w.blocked()).count();
        let now = Instant::now();
        if lock_waits(conn) > blocked {
            if now.duration_since(*over_since.get_or_insert(now)) >= timing.settle {
                return None;
            }
        } else {
            over_since = None;
        }
        if now.duration_since(started) >= timing.step_timeout {
            return None;
        }
    }
}

/// Waits until every waiting step has finished (its result kept) or the engine has counted
/// as many lock waiters as steps still running, continuously for the settle time (they are
/// blocked) — or, for a wait the engine does not count, for the step timeout.
fn settle_waiters(workers: &mut [Worker], conn: &dyn Connector, timing: Timing) {
    let started = Instant::now();
    let mut held_since: Option<Instant> = None;
    loop {
        workers.iter_mut().for_each(Worker::poll);
        let blocked = workers.iter().filter(|w| w.blocked()).count();
        if blocked == 0 {
            return;
        }
        let now = Instant::now();
        if lock_waits(conn) >= blocked {
            if now.duration_since(*held_since.get_or_insert(now)) >= timing.settle {
                return;
            }
        } else {
            held_since = None;
        }
        if now.duration_since(started) >= timing.step_timeout {
            return;
        }
        std::thread::sleep(POLL);
    }
}

#[cfg(test)]
mod tests {
    use super::super::spec::parse;
    use super::*;
    use std::collections::HashSet;
    use std::sync::{Condvar, Mutex};
    use std::time::Instant;

    /// A fake engine. Statements: `wait X` blocks until some session ran `set X` (a lock
    /// wait, counted by `lock_waits` when `counts`); `sleep MS` (not a lock wait); `fail`;
    /// `panic`; anything else echoes itself as one row.
    #[derive(Default)]
    struct Fake {
        flags: Mutex<HashSet<String>>,
        cv: Condvar,
        counts: bool,
        blocked: std::sync::atomic::AtomicUsize,
    }

    struct FakeExec<'a>(&'a Fake);

    impl Connector for Fake {
        fn connect(&self) -> Box<dyn Executor + '_> {
            Box::new(FakeExec(self))
        }

        fn lock_waits(&self) -> Option<usize> {
            self.counts
                .then(|| self.blocked.load(std::sync::atomic::Ordering::SeqCst))
        }
    }

    impl Executor for FakeExec<'_> {
        fn execute(&mut self, sql: &str) -> StepResult {
            let sql = sql.trim();
            let f = self.0;
            if let Some(x) = sql.strip_prefix("wait ") {
                let mut g = f.flags.lock().unwrap();
                if !g.contains(x) {
                    f.blocked.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    while !g.contains(x) {
                        g = f.cv.wait(g).unwrap();
                    }
                    f.blocked.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
                }
            } else if let Some(x) = sql.strip_prefix("set ") {
                f.flags.lock().unwrap().insert(x.to_owned());
                f.cv.notify_all();
            } else if let Some(ms) = sql.strip_prefix("sleep ") {
                std::thread::sleep(Duration::from_millis(ms.parse().unwrap()));
            } else if sql == "fail" {
                return StepResult::failed("sql", "it failed".into());
            } else if sql == "panic" {
                panic!("fake engine bug");
            }
            StepResult {
                results: vec![ResultSet {
                    columns: vec!["echo".into()],
                    rows: vec![vec![Cell::Text(sql.into())]],
                }],
                error: None,
            }
        }
    }

    /// Runs the spec's first permutation; returns the events as short strings.
    fn run(spec_text: &str, timeout_ms: u64) -> (Vec<String>, bool) {
        run_on(spec_text, timeout_ms, false)
    }

    /// As `run`, on a fake that counts its lock waiters (`counts`) or not; settle 20 ms.
    fn run_on(spec_text: &str, timeout_ms: u64, counts: bool) -> (Vec<String>, bool) {
        let spec = parse(spec_text).unwrap();
        let fake = Fake {
            counts,
            ..Fake::default()
        };
        let mut log = Vec::new();
        let ok = run_permutation(
            &spec,
            1,
            &spec.permutations[0],
            &fake,
            Timing {
                step_timeout: Duration::from_millis(timeout_ms),
                settle: Duration::from_millis(20),
            },
            &mut |e| {
                log.push(match e {
                    Event::Permutation { steps, .. } => format!("perm {}", steps.join(" ")),
                    Event::Block {
                        kind,
                        session,
                        result,
                        ..
                    } => format!(
                        "{kind:?} {} {}",
                        session.unwrap_or("-"),
                        if result.error.is_some() {
                            "error"
                        } else {
                            "ok"
                        }
                    ),
                    Event::Step { step, status, .. } => match status {
                        Status::Done(r) => format!(
                            "{} {}",
                            step.name,
                            r.error.map_or("ok".to_string(), |e| e.message)
                        ),
                        Status::Waiting => format!("{} waiting", step.name),
                        Status::Completed(r) => format!(
                            "{} completed {}",
                            step.name,
                            r.error.map_or("ok".to_string(), |e| e.message)
                        ),
                    },
                })
            },
        );
        (log, ok)
    }

    #[test]
    fn a_blocked_step_is_reported_waiting_then_completed_after_the_step_that_releases_it() {
        let (log, ok) = run(
            "session a step a1 { wait go } step a2 { echo }
             session b step b1 { echo } step b2 { set go }
             permutation a1 b1 b2 a2",
            500,
        );
        assert!(ok);
        assert_eq!(
            log,
            [
                "perm a1 b1 b2 a2",
                "a1 waiting",
                "b1 ok",
                "b2 ok",
                "a1 completed ok",
                "a2 ok"
            ]
        );
    }

    /// With an engine that counts its lock waiters, a blocked step is reported as soon as
    /// it is counted (the step timeout of 60 s never passes), with the same events as the
    /// timeout gives; a waiter not released by a step stays waiting.
    #[test]
    fn a_counted_lock_wait_is_reported_without_waiting_out_the_step_timeout() {
        let start = Instant::now();
        let (log, ok) = run_on(
            "session a step a1 { wait go } step a2 { echo }
             session b step b1 { echo } step b2 { set go } step b3 { set stop }
             session c step c1 { wait stop } step c2 { echo }
             permutation a1 c1 b1 b2 b3 a2 c2",
            60_000,
            true,
        );
        assert!(ok);
        assert_eq!(
            log,
            [
                "perm a1 c1 b1 b2 b3 a2 c2",
                "a1 waiting",
                "c1 waiting",
                "b1 ok",
                "b2 ok",
                "a1 completed ok",
                "b3 ok",
                "c1 completed ok",
                "a2 ok",
                "c2 ok"
            ]
        );
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "{:?}",
            start.elapsed()
        );
    }

    /// A slow step that is not counted as a lock wait is not reported waiting before the
    /// step timeout, even when the engine counts lock waiters.
    #[test]
    fn a_slow_step_the_engine_does_not_count_is_done_not_waiting() {
        let (log, _) = run_on(
            "session a step a1 { sleep 300 } step a2 { echo }
             permutation a1 a2",
            60_000,
            true,
        );
        assert_eq!(log, ["perm a1 a2", "a1 ok", "a2 ok"]);
    }

    #[test]
    fn the_next_step_of_a_waiting_session_waits_for_it() {
        let start = Instant::now();
        let (log, _) = run(
            "session a step a1 { sleep 2000 } step a2 { echo }
             permutation a1 a2",
            500,
        );
        assert_eq!(
            log,
            ["perm a1 a2", "a1 waiting", "a1 completed ok", "a2 ok"]
        );
        assert!(start.elapsed() >= Duration::from_millis(2000));
    }

    #[test]
    fn a_step_still_waiting_at_the_end_is_completed_before_the_teardown() {
        let (log, _) = run(
            "teardown { echo }
             session a step a1 { sleep 2000 } teardown { echo }
             session b step b1 { fail }
             permutation a1 b1",
            500,
        );
        assert_eq!(
            log,
            [
                "perm a1 b1",
                "a1 waiting",
                "b1 it failed",
                "a1 completed ok",
                "Teardown a ok",
                "Teardown - ok"
            ]
        );
    }

    #[test]
    fn a_failed_setup_skips_the_steps() {
        let (log, ok) = run(
            "setup { echo } session a setup { fail } step a1 { echo } permutation a1",
            500,
        );
        assert!(!ok);
        assert_eq!(log, ["perm a1", "Setup - ok", "Setup a error"]);
    }

    #[test]
    fn a_panicking_step_fails_and_its_session_stays_failed() {
        let (log, ok) = run(
            "session a step a1 { panic } step a2 { echo } session b step b1 { echo }
             permutation a1 b1 a2",
            30_000,
        );
        assert!(ok);
        assert_eq!(log[0], "perm a1 b1 a2");
        assert!(log[1].starts_with("a1 internal error: panic: fake engine bug"));
        assert_eq!(log[2], "b1 ok");
        assert!(log[3].starts_with("a2 internal error: panic"));
    }
}
