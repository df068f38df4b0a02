//! A piece's footprint by its fast paths against the general path, on the shipped TPC-C and
//! Smallbank procedures with random arguments: the INT path of all-INT keys
//! (`int_key`) hashes what `value_of`, `coerce` and `encode_key_prefix` hash, and what
//! `row_key` hashes for a row record's key; a frame filled only as `fill_of` asks (the
//! rest left over from other calls) gives the footprint of a frame filled whole.

use super::*;
use crate::procedure::slice::{analyze, Options};
use crate::query::expr::Ty;
use crate::sql::Session;
use crate::Database;
use std::sync::Arc;

const TPCC: &str = include_str!("../../../../myriad-cli/workloads/tpcc.sql");
const SMALLBANK: &str = include_str!("../../../../myriad-cli/workloads/smallbank.sql");

/// xorshift64*: the tests' inputs from a fixed seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    /// Mostly small ids (TPC-C's), sometimes 0, negative or near the ends of i64 (an
    /// overflow leaves the INT path).
    fn int(&mut self) -> i64 {
        match self.below(20) {
            0 => i64::MAX - self.below(3) as i64,
            1 => i64::MIN + self.below(3) as i64,
            2 => -(self.below(100) as i64),
            _ => self.below(12) as i64,
        }
    }
    /// A value of type `ty`.
    fn value(&mut self, ty: Ty) -> V {
        let s = |r: &mut Rng| {
            let n = r.below(6) as usize;
            (0..n).map(|_| (b'a' + r.below(3) as u8) as char).collect()
        };
        match ty {
            Ty::Int => V::Val(Value::Int(self.int())),
            Ty::Float => V::Val(Value::Float(self.int() as f64 / 4.0)),
            Ty::Str => V::Val(Value::Str(s(self))),
            Ty::Bool => V::Bool(self.below(2) == 1),
            Ty::IntArray => {
                let n = self.below(17) as usize;
                V::IntArr((0..n).map(|_| self.int()).collect())
            }
            Ty::FloatArray => {
                let n = self.below(4) as usize;
                V::Arr((0..n).map(|_| Value::Float(self.int() as f64)).collect())
            }
            Ty::StrArray => {
                let n = self.below(4) as usize;
                V::Arr((0..n).map(|_| Value::Str(s(self))).collect())
            }
        }
    }
}

/// One slice of a registered procedure, as recovery plans it (`recovery::pacman::Plan`).
struct Planned {
    proc: Arc<Procedure>,
    name: String,
    keys: Vec<KeyPlan>,
    imports: Vec<usize>,
}

/// Every slice of every writing procedure of `sql`, with its key plans.
fn plans(sql: &str) -> (Database, Vec<Planned>) {
    let db = Database::open(crate::Config::default()).expect("in-memory database");
    Session::new(&db).execute(sql).expect("the script runs");
    let procs: Vec<Arc<Procedure>> = db
        .procedure_names()
        .iter()
        .map(|n| db.procedure(n).expect("registered"))
        .collect();
    let refs: Vec<&Procedure> = procs.iter().map(|p| p.as_ref()).collect();
    let gdg = analyze(&refs, Options::default());
    let mut out = Vec::new();
    for ps in &gdg.procedures {
        let p = &procs[ps.input];
        for s in &ps.slices {
            let tables = &gdg.blocks[s.block].tables;
            let keys = key_plans(p, s, |t| {
                tables
                    .iter()
                    .find(|bt| bt.table == t && bt.written)
                    .map(|bt| bt.key_prefix)
            });
            out.push(Planned {
                proc: p.clone(),
                name: ps.procedure.clone(),
                keys,
                imports: s.import_slots.iter().map(|&(v, _)| v).collect(),
            });
        }
    }
    (db, out)
}

/// A frame of `p` with random arguments, started (`Proc::start`); `None` if the start
/// fails (an initial value that does not evaluate for these arguments).
fn started(p: &Procedure, rng: &mut Rng) -> Option<Frame> {
    let mut f = p.p.frame();
    for slot in 0..p.p.nparams {
        f.vars[slot] = rng.value(p.p.vars[slot].1);
    }
    p.p.start(&mut f).ok()?;
    Some(f)
}

/// Runs `check` on every slice of TPC-C and Smallbank with `CALLS` random frames each.
fn each_slice(mut check: impl FnMut(&Planned, &mut Rng)) {
    for sql in [TPCC, SMALLBANK] {
        let (_db, planned) = plans(sql);
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
        for s in &planned {
            for _ in 0..CALLS {
                check(s, &mut rng);
            }
        }
    }
}

const CALLS: usize = 400;

#[test]
fn piece_int_keys_hash_as_the_general_path_on_tpcc_and_smallbank() {
    let (mut int_keys, mut keyed_plans) = (0, 0);
    each_slice(|s, rng| {
        let Some(f) = started(&s.proc, rng) else {
            return;
        };
        let (mut fa, mut fb) = (s.proc.p.frame(), s.proc.p.frame());
        fa.vars.clone_from(&f.vars);
        fb.vars.clone_from(&f.vars);
        let (mut fast, mut general) = (Vec::new(), Vec::new());
        footprint(&s.keys, &mut fa, &mut Keys::default(), &mut fast);
        footprint_general(&s.keys, &mut fb, &mut Keys::default(), &mut general);
        assert_eq!(fast, general, "{}: footprints differ", s.name);
        // Same frame afterwards (the counters and assignments footprint sets).
        assert_eq!(fa.vars, fb.vars, "{}: frames differ", s.name);
        for plan in &s.keys {
            if let KeyPlan::Keys { ints: true, .. } = plan {
                keyed_plans += 1;
            }
        }
        int_keys += fast.iter().filter(|k| k.1.is_some()).count();
    });
    // The INT path was taken: TPC-C's and Smallbank's keys are INT columns.
    assert!(
        keyed_plans > 0 && int_keys > 1000,
        "{keyed_plans} {int_keys}"
    );
}

/// A row record's write to the row of a footprint's key (the key padded with zeros to the
/// whole primary key) queues on the same entry: `row_key` over `encode_key_values`.
#[test]
fn piece_int_keys_meet_row_records_on_tpcc_and_smallbank() {
    let mut met = 0;
    each_slice(|s, rng| {
        let Some(mut f) = started(&s.proc, rng) else {
            return;
        };
        for plan in &s.keys {
            let KeyPlan::Keys {
                table,
                pre,
                loops,
                key,
                ints: true,
            } = plan
            else {
                continue;
            };
            if !(pre.is_empty() && loops.is_empty()) {
                continue;
            }
            let mut ints = Vec::new();
            for (_, e) in key {
                match eval_int(e, None, &f.vars) {
                    Some(i) => ints.push(i),
                    None => break,
                }
            }
            if ints.len() != key.len() {
                continue;
            }
            let pk = &table.schema.indexes()[0].columns;
            if pk
                .iter()
                .any(|&c| table.schema.columns()[c].ty != ColumnType::Int)
            {
                continue;
            }
            let mut whole: Vec<Value> = ints.iter().map(|&i| Value::Int(i)).collect();
            whole.resize(pk.len(), Value::Int(0));
            let mut enc = Vec::new();
            table
                .schema
                .encode_key_values(0, whole.as_slice(), &mut enc)
                .expect("an INT key encodes");
            let p = if key.len() == pk.len() {
                usize::MAX
            } else {
                key.len()
            };
            let mut out = Vec::new();
            footprint(
                std::slice::from_ref(plan),
                &mut f,
                &mut Keys::default(),
                &mut out,
            );
            assert_eq!(out, vec![row_key(table, &enc, p)], "{}", s.name);
            met += 1;
        }
    });
    assert!(met > 1000, "{met}");
}

/// Fills `f` as the scheduler does for `fill` (arguments `args`, imports `imports`'s
/// values `imported`).
fn fill_frame(p: &Procedure, f: &mut Frame, fill: Fill, args: &[V], imports: &[(usize, V)]) {
    if fill.args {
        for (i, a) in args.iter().enumerate() {
            if i >= 64 || fill.params & (1 << i) != 0 {
                f.vars[i] = a.clone();
            }
        }
    }
    if fill.locals {
        p.p.start(f).expect("started once already");
    }
    if fill.imports {
        for (slot, v) in imports {
            f.vars[*slot] = v.clone();
        }
    }
}

/// A frame holding what other calls left: every slot random (of its type).
fn stale(p: &Procedure, rng: &mut Rng) -> Frame {
    let mut f = p.p.frame();
    for (slot, v) in f.vars.iter_mut().enumerate() {
        *v = rng.value(p.p.vars[slot].1);
    }
    f
}

/// The footprint of slice `s` from a frame filled as `fill` says, over a stale frame.
fn footprint_filled(
    s: &Planned,
    fill: Fill,
    args: &[V],
    imports: &[(usize, V)],
    rng: &mut Rng,
) -> Vec<FootKey> {
    let mut out = Vec::new();
    if !fill.args {
        tables_only(&s.keys, &mut out);
        return out;
    }
    let mut f = stale(&s.proc, rng);
    fill_frame(&s.proc, &mut f, fill, args, imports);
    footprint(&s.keys, &mut f, &mut Keys::default(), &mut out);
    out
}

const ALL: Fill = Fill {
    args: true,
    params: u64::MAX,
    locals: true,
    imports: true,
};

#[test]
fn piece_footprint_from_a_partly_filled_frame_is_the_whole_frames() {
    let mut partial = 0;
    each_slice(|s, rng| {
        let Some(f) = started(&s.proc, rng) else {
            return;
        };
        let args = f.vars[..s.proc.p.nparams].to_vec();
        let imports: Vec<(usize, V)> = s
            .imports
            .iter()
            .map(|&v| (v, rng.value(s.proc.p.vars[v].1)))
            .collect();
        let fill = fill_of(&s.keys, s.proc.p.nparams, &s.imports);
        let whole = footprint_filled(s, ALL, &args, &imports, rng);
        let part = footprint_filled(s, fill, &args, &imports, rng);
        assert_eq!(part, whole, "{}: {fill:?}", s.name);
        partial += usize::from(fill != ALL);
    });
    // The shortcut is taken on these workloads.
    assert!(partial > 0, "{partial}");
}

/// `fill_of` asks for the initial values where a key reads a declared variable's (and the
/// test above would see a stale frame's otherwise), not where an assignment the footprint
/// evaluates sets it first; for nothing where no key is known before the piece runs.
#[test]
fn piece_fill_asks_for_locals_only_where_a_key_reads_a_started_one() {
    let sql = "
CREATE TABLE kv (k BIGINT PRIMARY KEY, v BIGINT);
CREATE TABLE kw (k BIGINT PRIMARY KEY, v BIGINT);
CREATE PROCEDURE by_init(a BIGINT) AS $$
DECLARE x BIGINT := a + 1;
BEGIN
  UPDATE kv SET v = v + 1 WHERE k = x;
END $$;
CREATE PROCEDURE by_assign(a BIGINT) AS $$
DECLARE x BIGINT;
BEGIN
  x := a + 1;
  UPDATE kv SET v = v + 1 WHERE k = x;
END $$;
CREATE PROCEDURE by_read(a BIGINT) AS $$
DECLARE x BIGINT;
BEGIN
  SELECT v INTO x FROM kw WHERE k = a;
  UPDATE kw SET v = v + 1 WHERE k = x;
END $$;
";
    let (_db, planned) = plans(sql);
    let mut rng = Rng(7);
    for s in &planned {
        let fill = fill_of(&s.keys, s.proc.p.nparams, &s.imports);
        let args = vec![V::Val(Value::Int(5))];
        let whole = footprint_filled(s, ALL, &args, &[], &mut rng);
        let unstarted = Fill {
            locals: false,
            ..ALL
        };
        match s.name.as_str() {
            "by_init" => {
                assert!(whole.iter().all(|k| k.1.is_some()), "by_init is keyed");
                assert!(fill.locals, "by_init reads x's initial value");
                let stale = (0..20)
                    .map(|_| footprint_filled(s, unstarted, &args, &[], &mut rng))
                    .filter(|got| got != &whole)
                    .count();
                assert!(stale > 0, "a stale x gives another key");
            }
            "by_assign" => {
                assert!(whole.iter().all(|k| k.1.is_some()), "by_assign is keyed");
                assert!(
                    fill.args && !fill.locals,
                    "by_assign sets x first: {fill:?}"
                );
                let got = footprint_filled(s, fill, &args, &[], &mut rng);
                assert_eq!(got, whole);
            }
            "by_read" => {
                assert!(whole.iter().all(|k| k.1.is_none()), "by_read's key is read");
                assert!(!fill.args, "by_read needs no frame: {fill:?}");
                let got = footprint_filled(s, fill, &args, &[], &mut rng);
                assert_eq!(got, whole);
            }
            other => panic!("unexpected procedure {other}"),
        }
    }
}

/// A slice's plans are distinct: the arms of an `IF` that repeat one access (TPC-C
/// New-Order's ten stock reads, and its stock UPDATE) give one plan, although their
/// expressions sit at different source positions. Each repeat was a second enumeration of
/// the same keys per piece.
#[test]
fn piece_plans_of_a_repeated_access_are_one() {
    for sql in [TPCC, SMALLBANK] {
        let (_db, planned) = plans(sql);
        for s in &planned {
            for (i, a) in s.keys.iter().enumerate() {
                for b in &s.keys[..i] {
                    assert!(!a.same(b), "a slice of {} plans one access twice", s.name);
                }
            }
        }
    }
    let (_db, planned) = plans(TPCC);
    let stock: Vec<usize> = planned
        .iter()
        .filter(|s| s.name == "new_order")
        .map(|s| {
            s.keys
                .iter()
                .filter(
                    |k| matches!(k, KeyPlan::Keys { table, .. } if table.schema.name == "stock"),
                )
                .count()
        })
        .collect();
    assert_eq!(stock, [0, 1], "New-Order's slices: stock plans");
}

/// A piece's run decodes only the parameters its slice may read (`run_fill`): New-Order's
/// district piece the warehouse and district (not the three item arrays, which its other
/// piece reads), Payment's warehouse piece the warehouse and amount (not the customer's
/// last name, which only its customer piece reads).
#[test]
fn a_piece_run_decodes_only_the_parameters_its_slice_reads() {
    let db = Database::open(crate::Config::default()).expect("in-memory database");
    Session::new(&db).execute(TPCC).expect("the script runs");
    let procs: Vec<Arc<Procedure>> = ["new_order", "payment"]
        .iter()
        .map(|n| db.procedure(n).expect("registered"))
        .collect();
    let refs: Vec<&Procedure> = procs.iter().map(|p| p.as_ref()).collect();
    let gdg = analyze(&refs, Options::default());
    // Per procedure, per slice: (the tables its operations access, its run's parameters).
    let mut got: Vec<Vec<(Vec<String>, u64)>> = vec![Vec::new(); procs.len()];
    for ps in &gdg.procedures {
        let p = &procs[ps.input].p;
        for s in &ps.slices {
            let mut mask = vec![false; p.ops.len()];
            for &o in s.ops.iter().chain(&s.replicated) {
                mask[o] = true;
            }
            let mut tables: Vec<String> = s
                .ops
                .iter()
                .filter_map(|&o| p.ops[o].table.clone())
                .collect();
            tables.sort();
            tables.dedup();
            let fill = run_fill(p, &mask, &s.export_slots);
            assert!(fill.args && fill.locals && fill.imports);
            got[ps.input].push((tables, fill.params));
        }
    }
    let param = |p: &Procedure, name: &str| -> u64 {
        let v = p.p.vars[..p.p.nparams]
            .iter()
            .position(|(n, _)| n == name)
            .expect("a parameter");
        1 << v
    };
    let of = |i: usize, table: &str| -> u64 {
        got[i]
            .iter()
            .find(|(ts, _)| ts.iter().any(|t| t == table))
            .map(|&(_, params)| params)
            .expect("a slice on the table")
    };
    let (no, pay) = (&procs[0], &procs[1]);
    assert_eq!(of(0, "district"), param(no, "w") | param(no, "d"));
    let arrays = param(no, "item_ids") | param(no, "supply_w_ids") | param(no, "quantities");
    assert_eq!(of(0, "stock") & arrays, arrays);
    assert_eq!(of(1, "warehouse"), param(pay, "w") | param(pay, "amount"));
    let name = param(pay, "c_last_name");
    assert_eq!(of(1, "customer") & name, name);
    for (ts, params) in &got[1] {
        if !ts.iter().any(|t| t == "customer") {
            assert_eq!(params & name, 0, "{ts:?}");
        }
    }
}
