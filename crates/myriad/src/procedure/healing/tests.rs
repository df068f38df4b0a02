//! Healing's static analysis on the shipped workloads (the validation-order property, the
//! Delivery case of `healing-pacman.md` A.5 V1) and on small procedures (control edges,
//! loop instances, own-write edges, the cycle fallback).

use super::*;
use crate::sql::Session;
use crate::Database;

const TPCC: &str = include_str!("../../../../myriad-cli/workloads/tpcc.sql");
const SMALLBANK: &str = include_str!("../../../../myriad-cli/workloads/smallbank.sql");
const TATP: &str = include_str!("../../../../myriad-cli/workloads/tatp.sql");

fn load(sql: &str) -> Database {
    let db = Database::open(crate::Config::default()).expect("in-memory database");
    Session::new(&db).execute(sql).expect("the script runs");
    db
}

fn order_of(db: &Database) -> ValidationOrder {
    let procs = db.registered_procedures();
    let refs: Vec<&Procedure> = procs.iter().map(|p| p.as_ref()).collect();
    validation_order(&refs)
}

fn pdg(db: &Database, name: &str) -> Pdg {
    Pdg::of(&db.procedure(name).expect("registered"))
}

/// The id of the operation of `g` whose text contains `needle` (the first one).
fn op(g: &Pdg, needle: &str) -> usize {
    g.ops
        .iter()
        .position(|o| o.text.contains(needle))
        .unwrap_or_else(|| panic!("no operation with {needle:?} in\n{}", g.text()))
}

fn rank(o: &ValidationOrder, t: &str) -> usize {
    o.rank(t)
        .unwrap_or_else(|| panic!("{t} not ranked:\n{}", o.text()))
}

#[test]
fn every_workload_order_satisfies_its_dependencies() {
    for (name, sql) in [("tpcc", TPCC), ("smallbank", SMALLBANK), ("tatp", TATP)] {
        let o = order_of(&load(sql));
        assert!(!o.satisfied.is_empty() || name == "smallbank", "{name}");
        for d in &o.satisfied {
            assert!(
                rank(&o, &d.from) < rank(&o, &d.to),
                "{name}: {d:?} violated\n{}",
                o.text()
            );
        }
        // Every writer's dependency is kept; only TPC-C has a cycle, closed by the
        // read-only Order-Status (CUSTOMER -> ORDERS, the reverse of Delivery's).
        assert!(
            o.unsatisfied.iter().all(|d| !d.writer),
            "{name}\n{}",
            o.text()
        );
        let left: Vec<(&str, &str, &str)> = o
            .unsatisfied
            .iter()
            .map(|d| (d.procedure.as_str(), d.from.as_str(), d.to.as_str()))
            .collect();
        if name == "tpcc" {
            assert_eq!(
                left,
                [("order_status", "customer", "orders")],
                "{}",
                o.text()
            );
        } else {
            assert!(left.is_empty(), "{name}\n{}", o.text());
        }
    }
}

#[test]
fn tatp_orders_subscriber_before_the_tables_keyed_by_its_id() {
    let o = order_of(&load(TATP));
    assert!(rank(&o, "subscriber") < rank(&o, "special_facility"));
    assert!(rank(&o, "subscriber") < rank(&o, "call_forwarding"));
    // get_new_destination reads call_forwarding only if the facility is active.
    assert!(o.satisfied.iter().any(|d| d.from == "special_facility"
        && d.to == "call_forwarding"
        && d.kind == DepKind::Control));
}

#[test]
fn delivery_puts_new_order_and_orders_before_customer() {
    let db = load(TPCC);
    let o = order_of(&db);
    // Creation order has customer before new_order and orders; the derived order must not.
    assert!(db.table("customer").expect("t").id < db.table("orders").expect("t").id);
    assert!(rank(&o, "new_order") < rank(&o, "orders"));
    assert!(rank(&o, "orders") < rank(&o, "customer"));
    assert!(rank(&o, "orders") < rank(&o, "order_line"));
    assert_eq!(&o.tables[..2], ["warehouse", "district"], "{}", o.text());
    let d = pdg(&db, "delivery");
    let read_orders = op(&d, "SELECT o_c_id");
    let upd_customer = op(&d, "UPDATE customer");
    assert!(
        o.satisfied.iter().any(|t| t.procedure == "delivery"
            && t.from == "orders"
            && t.to == "customer"
            && t.kind == DepKind::Key
            && t.ops == (read_orders, upd_customer)),
        "{}",
        o.text()
    );
    // The key edge carries o_c_id's variable; the UPDATE reads the row it writes.
    assert!(d.edges.iter().any(|e| e.from == read_orders
        && e.to == upd_customer
        && e.kind == DepKind::Key
        && e.via == "x_c"));
    assert!(d.ops[upd_customer].reads_row);
}

const TWO_TABLES: &str = "CREATE TABLE tx (k INT PRIMARY KEY, v INT);
    CREATE TABLE ty (k INT PRIMARY KEY, v INT);";

#[test]
fn control_edges_go_from_a_header_to_what_it_nests_directly() {
    let db = load(&format!(
        "{TWO_TABLES}
        CREATE PROCEDURE p(key INT, n INT) AS $$ DECLARE a INT; BEGIN
          SELECT v INTO a FROM tx WHERE k = key;
          IF a > 0 THEN
            FOR i IN 1..n LOOP
              UPDATE ty SET v = v + a WHERE k = i;
            END LOOP;
          ELSE
            UPDATE tx SET v = 0 WHERE k = key;
          END IF;
          RETURN a;
        END $$;"
    ));
    let g = pdg(&db, "p");
    let (sel, iff, lp) = (op(&g, "SELECT v"), op(&g, "IF a"), op(&g, "FOR i"));
    let (upd_y, upd_x, ret) = (op(&g, "UPDATE ty"), op(&g, "UPDATE tx"), op(&g, "RETURN"));
    let control: BTreeSet<(usize, usize)> = g
        .edges
        .iter()
        .filter(|e| e.kind == DepKind::Control)
        .map(|e| (e.from, e.to))
        .collect();
    assert_eq!(
        control,
        BTreeSet::from([(iff, lp), (lp, upd_y), (iff, upd_x)]),
        "{}",
        g.text()
    );
    assert_eq!(g.ops[upd_y].control_parent, Some(lp));
    assert_eq!(g.ops[ret].control_parent, None);
    assert!(g
        .edges
        .iter()
        .any(|e| e.from == sel && e.to == iff && e.kind == DepKind::Condition && e.via == "a"));
    assert!(g.ops[upd_y].reads_row && !g.ops[upd_x].reads_row);
    // The table order follows the control dependence: ty's rows are chosen under tx's value.
    let o = order_of(&db);
    assert_eq!(o.tables, ["tx", "ty"]);
    assert!(o
        .satisfied
        .iter()
        .any(|d| d.from == "tx" && d.to == "ty" && d.kind == DepKind::Control));
}

#[test]
fn operations_repeated_in_loops_have_one_instance_per_iteration() {
    let db = load(TPCC);
    let d = pdg(&db, "delivery");
    let (outer, inner) = (op(&d, "FOR d IN"), op(&d, "FOR i IN"));
    let upd = op(&d, "UPDATE order_line");
    assert_eq!(d.ops[upd].loops, [outer, inner]);
    assert_eq!(d.ops[outer].loops, Vec::<usize>::new());
    let a = d.instance(upd, &[3, 1]).expect("two loops");
    let b = d.instance(upd, &[3, 2]).expect("two loops");
    assert_ne!(a, b);
    assert_eq!(b.to_string(), format!("#{upd}[3,2]"));
    assert_eq!(
        d.instance(outer, &[]).expect("no loop").to_string(),
        format!("#{outer}")
    );
    for bad in [&[3][..], &[1, 2, 3]] {
        let e = d
            .instance(upd, bad)
            .expect_err("wrong number of iterations");
        assert!(e.to_string().contains("nested in 2 loops"), "{e}");
    }
    assert!(d.instance(d.ops.len(), &[]).is_err());
}

#[test]
fn own_write_edges_reach_later_accesses_and_the_next_iteration() {
    let db = load(TPCC);
    let p = pdg(&db, "payment");
    let (upd_w, sel_w) = (op(&p, "UPDATE warehouse"), op(&p, "SELECT w_name"));
    let own = |g: &Pdg, a: usize, b: usize| {
        g.edges
            .iter()
            .any(|e| e.from == a && e.to == b && e.kind == DepKind::OwnWrite)
    };
    assert!(own(&p, upd_w, sel_w));
    // A read before the write in straight-line code cannot see it.
    let sel_d = op(&p, "SELECT d_name");
    let upd_d = op(&p, "UPDATE district");
    assert!(own(&p, upd_d, sel_d) && !own(&p, sel_d, upd_d));
    // New-Order's STOCK update may update the same row again in a later iteration (an item
    // listed twice), and its STOCK reads come before it in the loop body.
    let n = pdg(&db, "new_order");
    let upd_s = op(&n, "UPDATE stock");
    let sel_s = op(&n, "SELECT s_quantity");
    assert!(own(&n, upd_s, upd_s) && own(&n, upd_s, sel_s));
    // No own-write edge crosses tables.
    assert!(n
        .edges
        .iter()
        .filter(|e| e.kind == DepKind::OwnWrite)
        .all(|e| n.ops[e.from].table == n.ops[e.to].table));
}

#[test]
fn a_cycle_between_writers_leaves_one_dependency_out_and_still_orders_every_table() {
    let db = load(&format!(
        "{TWO_TABLES}
        CREATE PROCEDURE p1(key INT) AS $$ DECLARE a INT; BEGIN
          SELECT v INTO a FROM tx WHERE k = key;
          UPDATE ty SET v = 1 WHERE k = a;
        END $$;
        CREATE PROCEDURE p2(key INT) AS $$ DECLARE b INT; BEGIN
          SELECT v INTO b FROM ty WHERE k = key;
          UPDATE tx SET v = 1 WHERE k = b;
        END $$;"
    ));
    let o = order_of(&db);
    assert_eq!(o.tables, ["tx", "ty"], "{}", o.text());
    assert_eq!(o.satisfied.len(), 1);
    assert_eq!(o.unsatisfied.len(), 1);
    assert_eq!(
        (o.unsatisfied[0].from.as_str(), o.unsatisfied[0].to.as_str()),
        ("ty", "tx")
    );
    assert!(o.text().contains("left out"));
}

#[test]
fn the_text_view_names_every_edge_kind_and_the_order() {
    let db = load(TPCC);
    let s = explain_healing(&db);
    for needle in [
        "procedure delivery:",
        " key x_o_id",
        " value ",
        " condition found",
        " control",
        " own-write new_order",
        "reads the row it writes",
        "validation order",
        "left out",
    ] {
        assert!(s.contains(needle), "{needle:?} missing in\n{s}");
    }
    let dot = explain_healing_dot(&db);
    assert_eq!(dot.matches("digraph").count(), db.procedure_names().len());
}

/// The columns of `t` that `masks` says `proc` reads (`true`) or writes (`false`), by name.
fn mask_cols(
    db: &Database,
    proc: &str,
    t: &str,
    pick: fn(&crate::schema::TableCols, usize) -> bool,
) -> Vec<String> {
    let p = db.procedure(proc).expect("registered");
    let table = db.table(t).expect("table");
    let m = column_masks(&p.p)
        .into_iter()
        .find(|c| c.table == table.id)
        .unwrap_or_else(|| panic!("{proc} does not touch {t}"));
    table
        .schema
        .columns()
        .iter()
        .enumerate()
        .filter(|&(i, _)| pick(&m, i))
        .map(|(_, c)| c.name.clone())
        .collect()
}

/// TPC-C's column masks (thesis §3.4.5's false invalidations): New-Order reads `w_tax` of
/// WAREHOUSE and writes nothing there, so a Payment's `w_ytd` does not invalidate it; it reads
/// and writes `d_next_o_id` of DISTRICT, while Payment writes `d_ytd`.
#[test]
fn tpcc_column_masks_name_what_each_procedure_reads_and_writes() {
    use crate::schema::TableCols;
    const R: fn(&TableCols, usize) -> bool = TableCols::reads;
    const W: fn(&TableCols, usize) -> bool = TableCols::writes;
    const I: fn(&TableCols, usize) -> bool = TableCols::increments;
    const B: fn(&TableCols, usize) -> bool = TableCols::blind;
    let db = load(TPCC);
    assert_eq!(
        mask_cols(&db, "new_order", "warehouse", R),
        ["w_id", "w_tax"]
    );
    assert!(mask_cols(&db, "new_order", "warehouse", W).is_empty());
    assert_eq!(
        mask_cols(&db, "new_order", "district", R),
        ["d_w_id", "d_id", "d_tax", "d_next_o_id"]
    );
    assert_eq!(mask_cols(&db, "new_order", "district", W), ["d_next_o_id"]);
    assert_eq!(
        mask_cols(&db, "payment", "warehouse", R),
        ["w_id", "w_name", "w_ytd"]
    );
    assert_eq!(mask_cols(&db, "payment", "warehouse", W), ["w_ytd"]);
    // Increment-only columns: Payment adds to `w_ytd` and `d_ytd` and reads neither; it reads
    // `c_balance` (so that one is not), and New-Order reads `d_next_o_id` before adding 1.
    assert_eq!(mask_cols(&db, "payment", "warehouse", I), ["w_ytd"]);
    assert_eq!(mask_cols(&db, "payment", "district", I), ["d_ytd"]);
    assert_eq!(
        mask_cols(&db, "payment", "customer", I),
        ["c_ytd_payment", "c_payment_cnt"]
    );
    assert!(mask_cols(&db, "new_order", "district", I).is_empty());
    // An INSERT's table is listed with nothing read and every column written (blind: the
    // row is the INSERT's).
    assert!(mask_cols(&db, "new_order", "orders", R).is_empty());
    let orders: Vec<String> = (db.table("orders").unwrap().schema.columns().iter())
        .map(|c| c.name.clone())
        .collect();
    assert_eq!(mask_cols(&db, "new_order", "orders", W), orders);
    assert_eq!(mask_cols(&db, "new_order", "orders", B), orders);
    // Blind columns: Delivery sets `o_carrier_id` and `ol_delivery_d` and reads neither; it
    // adds to `c_balance` (an increment, not blind). Payment reads what it sets of
    // WAREHOUSE; New-Order reads `d_next_o_id` before it sets it.
    assert_eq!(mask_cols(&db, "delivery", "orders", B), ["o_carrier_id"]);
    assert_eq!(
        mask_cols(&db, "delivery", "order_line", B),
        ["ol_delivery_d"]
    );
    assert!(mask_cols(&db, "delivery", "customer", B).is_empty());
    assert_eq!(
        mask_cols(&db, "delivery", "customer", I),
        ["c_balance", "c_delivery_cnt"]
    );
    assert!(mask_cols(&db, "payment", "warehouse", B).is_empty());
    assert!(mask_cols(&db, "new_order", "district", B).is_empty());
    // Only tables the procedure touches are listed, sorted by id.
    let p = db.procedure("payment").unwrap();
    let m = column_masks(&p.p);
    assert!(m.windows(2).all(|w| w[0].table < w[1].table));
    let stock = db.table("stock").unwrap();
    assert!(m.iter().all(|c| c.table != stock.id));
}
