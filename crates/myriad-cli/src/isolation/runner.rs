//! Runs one permutation: a thread per session, each holding its own executor (its own
//! transaction), driven step by step from the calling thread.
//!
//! The driver sends a step to its session's thread and waits up to the step timeout. A step
//! still running then is reported `Waiting` and the driver moves on; after every later step
//! it gives each waiting step another timeout to finish, and reports those that did as
//! `Completed` (so a step released by the one just run is reported right after it). The next
//! step of a session whose previous step is still waiting waits for that one first, as does
//! the end of the permutation. Nothing here knows SQL: the engine is behind [`Connector`] and
//! [`Executor`], so the scheduling is tested with a fake that blocks on purpose.
//!
//! A step that never finishes hangs the run (no cancellation; MVOCC never waits on a lock,
//! only briefly on a Preparing writer).

use super::spec::{Spec, Step, StepRef};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::time::Duration;

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

/// A session thread's channels, and the step it is still running, if any.
struct Worker {
    to: Option<Sender<String>>,
    from: Receiver<StepResult>,
    waiting: Option<StepRef>,
}

impl Worker {
    fn send(&self, sql: &str) -> bool {
        self.to
            .as_ref()
            .is_some_and(|t| t.send(sql.to_owned()).is_ok())
    }

    fn wait(&self) -> StepResult {
        self.from.recv().unwrap_or_else(|_| thread_gone())
    }

    fn wait_for(&self, d: Duration) -> Option<StepResult> {
        match self.from.recv_timeout(d) {
            Ok(r) => Some(r),
            Err(RecvTimeoutError::Timeout) => None,
            Err(RecvTimeoutError::Disconnected) => Some(thread_gone()),
        }
    }

    /// Runs `sql` to completion (setup and teardown blocks: no timeout).
    fn run(&self, sql: &str) -> StepResult {
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
            });
        }
        for (w, s) in workers.iter().zip(&spec.sessions) {
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
            drive(spec, perm, &mut workers, timing, sink);
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
    timing: Timing,
    sink: &mut dyn FnMut(Event<'s>),
) {
    let step_event = |r: StepRef, status: Status| Event::Step {
        session: spec.sessions[r.session].name.as_str(),
        step: spec.step(r),
        status,
    };
    for &r in perm {
        let w = &mut workers[r.session];
        if let Some(prev) = w.waiting.take() {
            sink(step_event(prev, Status::Completed(w.wait())));
        }
        let status = if !w.send(&spec.step(r).sql) {
            Status::Done(thread_gone())
        } else {
            match w.wait_for(timing.step_timeout) {
                Some(res) => Status::Done(res),
                None => {
                    w.waiting = Some(r);
                    Status::Waiting
                }
            }
        };
        sink(step_event(r, status));
        for (i, w) in workers.iter_mut().enumerate() {
            if i == r.session {
                continue;
            }
            if let Some(prev) = w.waiting {
                if let Some(res) = w.wait_for(timing.step_timeout) {
                    w.waiting = None;
                    sink(step_event(prev, Status::Completed(res)));
                }
            }
        }
    }
    for w in workers.iter_mut() {
        if let Some(prev) = w.waiting.take() {
            sink(step_event(prev, Status::Completed(w.wait())));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::spec::parse;
    use super::*;
    use std::collections::HashSet;
    use std::sync::{Condvar, Mutex};
    use std::time::Instant;

    /// A fake engine. Statements: `wait X` blocks until some session ran `set X`; `sleep MS`;
    /// `fail`; `panic`; anything else echoes itself as one row.
    #[derive(Default)]
    struct Fake {
        flags: Mutex<HashSet<String>>,
        cv: Condvar,
    }

    struct FakeExec<'a>(&'a Fake);

    impl Connector for Fake {
        fn connect(&self) -> Box<dyn Executor + '_> {
            Box::new(FakeExec(self))
        }
    }

    impl Executor for FakeExec<'_> {
        fn execute(&mut self, sql: &str) -> StepResult {
            let sql = sql.trim();
            let f = self.0;
            if let Some(x) = sql.strip_prefix("wait ") {
                let mut g = f.flags.lock().unwrap();
                while !g.contains(x) {
                    g = f.cv.wait(g).unwrap();
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
        let spec = parse(spec_text).unwrap();
        let fake = Fake::default();
        let mut log = Vec::new();
        let ok = run_permutation(
            &spec,
            1,
            &spec.permutations[0],
            &fake,
            Timing {
                step_timeout: Duration::from_millis(timeout_ms),
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
