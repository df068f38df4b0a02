//! Procedure calls as command-log records (thesis §4.4.5): a committed transaction that was
//! exactly one call of a procedure kept in the catalog is logged as the procedure's
//! definition number and its arguments, and recovery replays the call.
//!
//! A call names the *definition* (the catalog numbers every `CREATE [OR REPLACE] PROCEDURE`
//! in order), not the name: a call logged before a `CREATE OR REPLACE` must replay the body
//! it ran, not the one that replaced it.
//!
//! Arguments: `count u32`, then per parameter a tag and its value; integers as zigzag varints
//! (TPC-C's arguments are small ids, so a New-Order call is ~60 bytes against ~1 KB of rows).

use super::exec::Frame;
use super::Procedure;
use crate::error::{Error, Result};
use crate::log::format::{Get, Put};
use crate::query::expr::V;
use crate::txn::Transaction;
use crate::value::Value;

const INT: u8 = 0;
const FLOAT: u8 = 1;
const STR: u8 = 2;
const BYTES: u8 = 3;
const BOOL: u8 = 4;
const INT_ARRAY: u8 = 5;
const ARRAY: u8 = 6;

fn put_value(v: &Value, b: &mut Vec<u8>) {
    match v {
        Value::Int(i) => {
            b.u8(INT);
            b.varint(*i);
        }
        Value::Float(x) => {
            b.u8(FLOAT);
            b.u64(x.to_bits());
        }
        Value::Str(s) => {
            b.u8(STR);
            b.bytes(s.as_bytes());
        }
        Value::Bytes(x) => {
            b.u8(BYTES);
            b.bytes(x);
        }
    }
}

fn get_value(tag: u8, g: &mut Get<'_>) -> Option<Value> {
    Some(match tag {
        INT => Value::Int(g.varint()?),
        FLOAT => Value::Float(f64::from_bits(g.u64()?)),
        STR => Value::Str(g.str()?),
        BYTES => Value::Bytes(g.bytes()?.to_vec()),
        _ => return None,
    })
}

/// Reads a count and refuses one larger than the bytes left (a damaged count must not make
/// the reader allocate).
fn count(g: &mut Get<'_>) -> Option<usize> {
    let n = usize::try_from(g.varint()?).ok()?;
    (n <= g.data.len() - g.at).then_some(n)
}

impl Procedure {
    /// Appends this call (definition number and the parameters in `f`) to `b`.
    pub(super) fn encode_call(&self, def: u32, f: &Frame, b: &mut Vec<u8>) {
        b.u32(def);
        b.u32(self.p.nparams as u32);
        for v in &f.vars[..self.p.nparams] {
            match v {
                V::Val(x) => put_value(x, b),
                V::Bool(x) => {
                    b.u8(BOOL);
                    b.u8(*x as u8);
                }
                V::IntArr(xs) => {
                    b.u8(INT_ARRAY);
                    b.varint(xs.len() as i64);
                    for &x in xs {
                        b.varint(x);
                    }
                }
                V::Arr(xs) => {
                    b.u8(ARRAY);
                    b.varint(xs.len() as i64);
                    for x in xs {
                        put_value(x, b);
                    }
                }
            }
        }
    }

    /// Runs `self.p`; a call that fails rolls `tx` back (the procedure may have written
    /// before it failed, and half a call is never kept: later operations on `tx` fail with
    /// `Error::TransactionClosed`).
    pub(super) fn run(&self, tx: &mut Transaction<'_>, f: &mut Frame) -> Result<Vec<Value>> {
        let r = self.run_logged(tx, f);
        // A call whose commit heals it stays open after an error a stale read may have
        // caused (`Transaction::heal_pending`).
        if r.is_err() && !tx.heal_pending() {
            tx.rollback(crate::error::AbortReason::UserAbort);
        }
        r
    }

    /// Runs `self.p`, noting in `tx` whether the transaction is exactly this one call (for a
    /// command-logging database; otherwise it just runs).
    fn run_logged(&self, tx: &mut Transaction<'_>, f: &mut Frame) -> Result<Vec<Value>> {
        let Some(&def) = self.logged_as.get() else {
            return self.run_body(tx, f);
        };
        if !tx.logs_commands() {
            return self.run_body(tx, f);
        }
        let started = tx.command_begin(|b| self.encode_call(def, f, b));
        let r = self.run_body(tx, f);
        if started {
            tx.command_end(r.is_ok());
        }
        r
    }
}

/// Replays logged calls (recovery's serial replay): each call runs the procedure's compiled
/// form when it has one (what the call ran forward; `Procedure::run_body`), in a frame kept
/// per definition, so after the first call of a definition decoding and running allocate
/// nothing for integer arguments.
pub(crate) struct Replayer<'d> {
    definitions: &'d [Option<std::sync::Arc<Procedure>>],
    frames: Vec<Option<Frame>>,
}

impl<'d> Replayer<'d> {
    /// A replayer of calls of `definitions` (the catalog's procedure definitions by number;
    /// `None`: one that no longer compiles).
    pub(crate) fn new(definitions: &'d [Option<std::sync::Arc<Procedure>>]) -> Self {
        Replayer {
            definitions,
            frames: (0..definitions.len()).map(|_| None).collect(),
        }
    }

    /// Replays logged call `call` inside `tx`. A replayed call that fails means the log and
    /// the database disagree: `Error::Corrupt`.
    pub(crate) fn replay(&mut self, tx: &mut Transaction<'_>, call: &[u8]) -> Result<()> {
        let mut g = Get::new(call);
        let (def, p) = definition(self.definitions, &mut g)?;
        let f = self.frames[def as usize].get_or_insert_with(|| p.p.frame());
        decode_args(p, &mut g, f, u64::MAX)?;
        p.run_body(tx, f)
            .map(drop)
            .map_err(|e| replay_failed(p, &e))
    }
}

/// The error of a logged call whose replay failed: the log and the database disagree.
pub(crate) fn replay_failed(p: &Procedure, e: &Error) -> Error {
    Error::Corrupt {
        file: "command log".into(),
        offset: 0,
        message: format!(
            "replaying a logged call of `{}` failed ({e}): the log does not match the \
             checkpoint it follows",
            p.name()
        ),
    }
}

fn bad(m: String) -> Error {
    Error::Corrupt {
        file: "command log".into(),
        offset: 0,
        message: m,
    }
}

/// Reads a call's definition number and finds the procedure.
fn definition<'d>(
    definitions: &'d [Option<std::sync::Arc<Procedure>>],
    g: &mut Get<'_>,
) -> Result<(u32, &'d Procedure)> {
    let def = g
        .u32()
        .ok_or_else(|| bad("a call record cut short".into()))?;
    let p = definitions
        .get(def as usize)
        .and_then(Option::as_ref)
        .ok_or_else(|| {
            bad(format!(
                "a call of procedure definition {def}, which the catalog does not have \
                 (or which no longer compiles)"
            ))
        })?;
    Ok((def, p))
}

/// A logged call's definition number and procedure (its arguments not decoded).
pub(crate) fn call_procedure<'d>(
    definitions: &'d [Option<std::sync::Arc<Procedure>>],
    call: &[u8],
) -> Result<(u32, &'d Procedure)> {
    definition(definitions, &mut Get::new(call))
}

/// Decodes a logged call's arguments into `f`, a frame of its procedure (`call_procedure`): reuses the frame's storage, so refilling a kept frame
/// from the record allocates nothing for integer arguments (PACMAN's pieces).
pub(crate) fn decode_args_into(
    definitions: &[Option<std::sync::Arc<Procedure>>],
    call: &[u8],
    f: &mut Frame,
) -> Result<()> {
    let mut g = Get::new(call);
    let (_, p) = definition(definitions, &mut g)?;
    decode_args(p, &mut g, f, u64::MAX)
}

/// `decode_args_into` for a call whose procedure is known to be `p` (`call_procedure` of
/// the same record gave it; it skips finding the definition again), and for the parameters
/// whose bits `params` has (bit `i`: parameter `i`; parameters past 63 always): the others
/// are read past, and their slots keep what they held. A PACMAN footprint reads a few
/// parameters of its call (`piece::Fill::params`): Payment's four footprints each decoded,
/// validated and allocated the customer's last name none of them reads.
pub(crate) fn decode_some_args_of(
    p: &Procedure,
    call: &[u8],
    f: &mut Frame,
    params: u64,
) -> Result<()> {
    let mut g = Get::new(call);
    g.u32()
        .ok_or_else(|| bad("a call record cut short".into()))?;
    decode_args(p, &mut g, f, params)
}

/// Reads past one argument without keeping it (its text is not checked as UTF-8: the
/// decode that keeps it does that).
fn skip_arg(g: &mut Get<'_>) -> Option<()> {
    let skip_value = |t: u8, g: &mut Get<'_>| -> Option<()> {
        match t {
            INT => {
                g.varint()?;
            }
            FLOAT => {
                g.u64()?;
            }
            STR | BYTES => {
                g.bytes()?;
            }
            _ => return None,
        }
        Some(())
    };
    match g.u8()? {
        BOOL => {
            g.u8()?;
        }
        INT_ARRAY => {
            for _ in 0..count(g)? {
                g.varint()?;
            }
        }
        ARRAY => {
            for _ in 0..count(g)? {
                let t = g.u8()?;
                skip_value(t, g)?;
            }
        }
        t => skip_value(t, g)?,
    }
    Some(())
}

/// Decodes a call's arguments into the parameter slots of `f` (a frame of `p`), those
/// `params` names (`decode_some_args_of`), reading the record only as far as the last of
/// them. An integer array argument reuses the array the slot holds.
fn decode_args(p: &Procedure, g: &mut Get<'_>, f: &mut Frame, params: u64) -> Result<()> {
    let n = g
        .u32()
        .ok_or_else(|| bad("a call record cut short".into()))? as usize;
    if n != p.p.nparams {
        return Err(bad(format!(
            "a call of `{}` with {n} arguments; it takes {}",
            p.name(),
            p.p.nparams
        )));
    }
    let malformed = |i: usize| {
        bad(format!(
            "argument {i} of a call of `{}` is malformed",
            p.name()
        ))
    };
    for i in 0..n {
        if i < 64 && params & (1 << i) == 0 {
            if n <= 64 && params >> i == 0 {
                // Nothing asked for from here on: the rest is not read (nor checked; the
                // whole decode that keeps every argument checks it).
                break;
            }
            skip_arg(g).ok_or_else(|| malformed(i))?;
            continue;
        }
        let slot = &mut f.vars[i];
        let ok = (|| {
            let tag = g.u8()?;
            match tag {
                BOOL => *slot = V::Bool(g.u8()? != 0),
                INT_ARRAY => {
                    let k = count(g)?;
                    if !matches!(slot, V::IntArr(_)) {
                        *slot = V::IntArr(Vec::with_capacity(k));
                    }
                    let V::IntArr(xs) = slot else { return None };
                    xs.clear();
                    for _ in 0..k {
                        xs.push(g.varint()?);
                    }
                }
                ARRAY => {
                    let k = count(g)?;
                    let mut xs = Vec::with_capacity(k);
                    for _ in 0..k {
                        let t = g.u8()?;
                        xs.push(get_value(t, g)?);
                    }
                    *slot = V::Arr(xs);
                }
                INT => *slot = V::Val(Value::Int(g.varint()?)),
                t => *slot = V::Val(get_value(t, g)?),
            }
            Some(())
        })();
        ok.ok_or_else(|| malformed(i))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sql::Session;
    use crate::Database;

    /// A call decoded for some of its parameters gives those slots what the whole decode
    /// gives them and leaves the others as they were; every kind of argument is read past
    /// (a wrong skip would misplace the arguments after it); a record cut anywhere before
    /// the end of the last parameter asked for is an error, and one cut after it decodes
    /// the same (the rest is never read: a New-Order district piece stops before the
    /// item arrays).
    #[test]
    fn a_partial_decode_keeps_the_other_slots_and_reads_past_every_kind() {
        let db = Database::open(crate::Config::default()).expect("in-memory database");
        Session::new(&db)
            .execute(
                "CREATE TABLE t (k BIGINT PRIMARY KEY, v BIGINT);
                 CREATE PROCEDURE every_kind(a BIGINT, b TEXT, c BIGINT[], d DOUBLE, e BOOLEAN,
                   f TEXT[], g DOUBLE[], h BIGINT) AS $$
                 BEGIN
                   UPDATE t SET v = v + 1 WHERE k = a + h;
                 END $$;",
            )
            .expect("the script runs");
        let p = db.procedure("every_kind").expect("registered");
        let mut f = p.p.frame();
        let args = [
            V::Val(Value::Int(-300)),
            V::Val(Value::Str("naïve".into())),
            V::IntArr(vec![1, -2, 1 << 40]),
            V::Val(Value::Float(2.5)),
            V::Bool(true),
            V::Arr(vec![Value::Str("x".into()), Value::Str(String::new())]),
            V::Arr(vec![Value::Float(-1.0)]),
            V::Val(Value::Int(7)),
        ];
        for (slot, a) in args.iter().enumerate() {
            f.vars[slot] = a.clone();
        }
        let mut call = Vec::new();
        p.encode_call(3, &f, &mut call);
        let stale = V::Val(Value::Int(99));
        for params in [0u64, 1, 0b1000_0001, 0b0101_0110, 0b1111_1111, u64::MAX] {
            let mut g = p.p.frame();
            for v in &mut g.vars[..args.len()] {
                *v = stale.clone();
            }
            decode_some_args_of(&p, &call, &mut g, params).expect("decodes");
            for (i, a) in args.iter().enumerate() {
                let want = if params & (1 << i) != 0 { a } else { &stale };
                assert_eq!(&g.vars[i], want, "slot {i} under {params:#b}");
            }
            // Where each argument ends (after the definition number and the count).
            let mut ends = Vec::new();
            let mut r = Get::new(&call);
            r.u32().and_then(|_| r.u32()).expect("a header");
            let header = r.at;
            for _ in 0..args.len() {
                skip_arg(&mut r).expect("an argument");
                ends.push(r.at);
            }
            assert_eq!(r.at, call.len());
            let last = (0..args.len()).rev().find(|&i| params & (1 << i) != 0);
            let needed = last.map_or(header, |i| ends[i]);
            for cut in 4..call.len() {
                let got = decode_some_args_of(&p, &call[..cut], &mut g, params);
                assert_eq!(
                    got.is_err(),
                    cut < needed,
                    "cut at {cut} of {} under {params:#b}",
                    call.len()
                );
            }
        }
    }
}
