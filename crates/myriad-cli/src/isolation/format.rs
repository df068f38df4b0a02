//! The two output formats.
//!
//! Text, in the style of PostgreSQL's isolation tester (so its expected files read alike):
//!
//! ```text
//! Parsed test spec with 2 sessions
//!
//! starting permutation: s1r s2w s1c
//! step s1r: SELECT value FROM t WHERE id = 1;
//! value
//! -----
//!    10
//! (1 row)
//!
//! step s2w: UPDATE t SET value = 11 WHERE id = 1; <waiting ...>
//! step s1c: COMMIT;
//! step s2w: <... completed>
//! ERROR:  serialization failure: write_write_conflict
//! ```
//!
//! Step SQL is echoed with whitespace collapsed; numbers are right-aligned, text left-aligned,
//! trailing blanks trimmed; statements without rows print nothing (as in PostgreSQL). A setup
//! or teardown block that returns rows or fails is printed like a step, introduced by
//! `setup: SQL`, `teardown: SQL`, or `setup of s1: SQL` for a session's own.
//!
//! JSON: one object per line per step (see `json_event`).

use super::runner::{BlockKind, Cell, Event, ResultSet, Status, StepError, StepResult};
use super::spec::{collapse_ws, Spec};
use serde_json::{json, Map, Value as Json};
use std::fmt::Write as _;

pub fn text_header(spec: &Spec) -> String {
    let n = spec.sessions.len();
    format!(
        "Parsed test spec with {n} session{}\n",
        if n == 1 { "" } else { "s" }
    )
}

pub fn text_event(out: &mut String, e: &Event<'_>) {
    match e {
        Event::Permutation { steps, .. } => {
            let _ = writeln!(out, "\nstarting permutation: {}", steps.join(" "));
        }
        Event::Block {
            kind,
            session,
            sql,
            result,
        } => {
            if result.results.is_empty() && result.error.is_none() {
                return;
            }
            let what = match kind {
                BlockKind::Setup => "setup",
                BlockKind::Teardown => "teardown",
            };
            match session {
                Some(s) => {
                    let _ = writeln!(out, "{what} of {s}: {}", collapse_ws(sql));
                }
                None => {
                    let _ = writeln!(out, "{what}: {}", collapse_ws(sql));
                }
            }
            text_result(out, result);
        }
        Event::Step { step, status, .. } => match status {
            Status::Done(r) => {
                let _ = writeln!(out, "step {}: {}", step.name, collapse_ws(&step.sql));
                text_result(out, r);
            }
            Status::Waiting => {
                let _ = writeln!(
                    out,
                    "step {}: {} <waiting ...>",
                    step.name,
                    collapse_ws(&step.sql)
                );
            }
            Status::Completed(r) => {
                let _ = writeln!(out, "step {}: <... completed>", step.name);
                text_result(out, r);
            }
        },
    }
}

fn text_result(out: &mut String, r: &StepResult) {
    text_results(out, &r.results);
    if let Some(e) = &r.error {
        let _ = writeln!(out, "ERROR:  {}", e.message);
    }
}

fn text_results(out: &mut String, sets: &[ResultSet]) {
    for rs in sets {
        text_table(out, rs);
    }
}

fn cell_text(c: &Cell) -> String {
    match c {
        Cell::Int(i) => i.to_string(),
        Cell::Float(x) => x.to_string(),
        Cell::Text(s) => s.clone(),
    }
}

fn text_table(out: &mut String, rs: &ResultSet) {
    let cells: Vec<Vec<(String, bool)>> = rs
        .rows
        .iter()
        .map(|r| {
            r.iter()
                .map(|c| (cell_text(c), !matches!(c, Cell::Text(_))))
                .collect()
        })
        .collect();
    let mut w: Vec<usize> = rs.columns.iter().map(|h| h.chars().count()).collect();
    for r in &cells {
        for (i, (c, _)) in r.iter().enumerate() {
            if let Some(x) = w.get_mut(i) {
                *x = (*x).max(c.chars().count());
            }
        }
    }
    let header: Vec<String> = rs
        .columns
        .iter()
        .zip(&w)
        .map(|(h, &n)| format!("{h:<n$}"))
        .collect();
    let _ = writeln!(out, "{}", header.join("|").trim_end());
    let dashes: Vec<String> = w.iter().map(|&n| "-".repeat(n)).collect();
    let _ = writeln!(out, "{}", dashes.join("+"));
    for r in &cells {
        let line: Vec<String> = r
            .iter()
            .zip(&w)
            .map(|((c, right), &n)| {
                if *right {
                    format!("{c:>n$}")
                } else {
                    format!("{c:<n$}")
                }
            })
            .collect();
        let _ = writeln!(out, "{}", line.join("|").trim_end());
    }
    let n = rs.rows.len();
    let _ = writeln!(out, "({n} row{})\n", if n == 1 { "" } else { "s" });
}

fn cell_json(c: &Cell) -> Json {
    match c {
        Cell::Int(i) => json!(i),
        // Non-finite floats have no JSON number; `json!` maps them to null.
        Cell::Float(x) => json!(x),
        Cell::Text(s) => json!(s),
    }
}

fn error_json(e: &StepError) -> Json {
    let mut m = Map::new();
    m.insert("kind".into(), json!(e.kind));
    if let Some(r) = e.reason {
        m.insert("reason".into(), json!(r));
    }
    m.insert("message".into(), json!(e.message));
    Json::Object(m)
}

/// Adds `columns` (of the first result set), `rows` (of every result set, in order; values
/// in select-list order) and `error` to `m`.
fn result_json(m: &mut Map<String, Json>, r: &StepResult) {
    if let Some(first) = r.results.first() {
        m.insert("columns".into(), json!(first.columns));
    }
    let rows: Vec<Json> = r
        .results
        .iter()
        .flat_map(|rs| rs.rows.iter())
        .map(|row| Json::Array(row.iter().map(cell_json).collect()))
        .collect();
    m.insert("rows".into(), Json::Array(rows));
    if let Some(e) = &r.error {
        m.insert("error".into(), error_json(e));
    }
}

/// One JSON line for an event, or `None` (permutation starts, and setup/teardown blocks that
/// returned no rows and no error, produce no line).
///
/// Keys: `spec` (the file as given), `permutation` (1-based number within the spec),
/// `steps` (the permutation's step names), `session`, `step`, `sql` (whitespace collapsed),
/// `status` — `ok`, `error`, `waiting`, or `completed` for a step reported `waiting` earlier,
/// whose final result is then in `outcome` (`ok` or `error`) — and, for finished steps,
/// `columns`, `rows` (`[]` when none) and `error` (`{kind, reason?, message}`). Setup and
/// teardown output has `block` (`setup`/`teardown`), `step: null`, and `session: null` for
/// the global blocks.
pub fn json_event(spec_path: &str, number: usize, steps: &[&str], e: &Event<'_>) -> Option<String> {
    let mut m = Map::new();
    m.insert("spec".into(), json!(spec_path));
    m.insert("permutation".into(), json!(number));
    m.insert("steps".into(), json!(steps));
    match e {
        Event::Permutation { .. } => return None,
        Event::Block {
            kind,
            session,
            result,
            ..
        } => {
            if result.results.is_empty() && result.error.is_none() {
                return None;
            }
            m.insert(
                "block".into(),
                json!(match kind {
                    BlockKind::Setup => "setup",
                    BlockKind::Teardown => "teardown",
                }),
            );
            m.insert("session".into(), json!(session));
            m.insert("step".into(), Json::Null);
            m.insert("status".into(), json!(ok_or_error(result)));
            result_json(&mut m, result);
        }
        Event::Step {
            session,
            step,
            status,
        } => {
            m.insert("session".into(), json!(session));
            m.insert("step".into(), json!(step.name));
            m.insert("sql".into(), json!(collapse_ws(&step.sql)));
            match status {
                Status::Done(r) => {
                    m.insert("status".into(), json!(ok_or_error(r)));
                    result_json(&mut m, r);
                }
                Status::Waiting => {
                    m.insert("status".into(), json!("waiting"));
                }
                Status::Completed(r) => {
                    m.insert("status".into(), json!("completed"));
                    m.insert("outcome".into(), json!(ok_or_error(r)));
                    result_json(&mut m, r);
                }
            }
        }
    }
    Some(Json::Object(m).to_string())
}

fn ok_or_error(r: &StepResult) -> &'static str {
    if r.error.is_some() {
        "error"
    } else {
        "ok"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_align_numbers_right_and_text_left() {
        let mut out = String::new();
        text_table(
            &mut out,
            &ResultSet {
                columns: vec!["id".into(), "name".into(), "x".into()],
                rows: vec![
                    vec![Cell::Int(1), Cell::Text("alice".into()), Cell::Float(1.5)],
                    vec![Cell::Int(100), Cell::Text("b".into()), Cell::Int(2)],
                ],
            },
        );
        assert_eq!(
            out,
            "id |name |x\n---+-----+---\n  1|alice|1.5\n100|b    |  2\n(2 rows)\n\n"
        );
    }
}
