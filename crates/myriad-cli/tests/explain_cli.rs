//! `myriad explain`: the bank-transfer procedure of thesis Fig. 3.1 (examples/procedures).

use std::process::Command;

fn explain(args: &[&str]) -> (bool, String, String) {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/procedures/");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_myriad"));
    cmd.arg("explain");
    for a in args {
        if a.ends_with(".sql") {
            cmd.arg(format!("{root}{a}"));
        } else {
            cmd.arg(a);
        }
    }
    let out = cmd.output().unwrap();
    (
        out.status.success(),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

#[test]
fn bank_transfer_shows_the_key_and_value_dependencies_of_figure_3_3() {
    let (ok, out, err) = explain(&["bank.sql", "transfer.sql"]);
    assert!(ok, "{err}");
    // Lines 4 and 7 are key-dependent on line 2; line 9 is value-dependent on line 8.
    for edge in [
        "#0 (line 2) -> #2 (line 4)  key dst_id",
        "#0 (line 2) -> #5 (line 7)  key dst_id",
        "#6 (line 8) -> #7 (line 9)  value bonus",
    ] {
        assert!(out.contains(edge), "missing `{edge}` in:\n{out}");
    }
    // Line 9 has no key dependency on any operation.
    assert!(!out.lines().any(|l| l.contains("(line 9)  key")), "{out}");
    // The IR lists each operation's key and value uses.
    assert!(
        out.contains("UPDATE balance SET val = dst_val + tmp WHERE name = dst_id [write balance]"),
        "{out}"
    );
    assert!(out.contains("key: dst_id; value: dst_val, tmp"), "{out}");

    let (ok, dot, err) = explain(&["--dot", "bank.sql", "transfer.sql"]);
    assert!(ok, "{err}");
    assert!(dot.starts_with("digraph \"transfer\" {"), "{dot}");
    assert!(
        dot.contains("op0 -> op2 [label=\"dst_id (key)\", style=solid];"),
        "{dot}"
    );
    assert!(
        dot.contains("op6 -> op7 [label=\"bonus (value)\", style=dashed];"),
        "{dot}"
    );
    assert!(dot.trim_end().ends_with('}'));
}

#[test]
fn errors_name_the_file_and_the_problem() {
    // Without the tables the procedure does not compile: the error says which table.
    let (ok, _, err) = explain(&["transfer.sql"]);
    assert!(!ok);
    assert!(
        err.contains("transfer.sql") && err.contains("unknown table `client`"),
        "{err}"
    );
    let (ok, _, err) = explain(&["bank.sql"]);
    assert!(!ok);
    assert!(err.contains("no CREATE PROCEDURE"), "{err}");
    let (ok, _, err) = explain(&["missing.sql"]);
    assert!(!ok);
    assert!(
        err.contains("missing.sql") && err.contains("cannot read"),
        "{err}"
    );
}

/// The benchmark procedures `myriad bench smallbank|tatp` run explain on their own.
#[test]
fn the_smallbank_and_tatp_workload_files_explain() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/workloads/");
    for (file, procs) in [("smallbank.sql", 6), ("tatp.sql", 7)] {
        let out = Command::new(env!("CARGO_BIN_EXE_myriad"))
            .arg("explain")
            .arg(format!("{dir}{file}"))
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{file}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let n = text.lines().filter(|l| l.starts_with("PROCEDURE ")).count();
        assert_eq!(n, procs, "{file}:\n{text}");
    }
}

/// `--slices` prints PACMAN's analysis of all the files' procedures together: Smallbank's
/// savings block comes before its checking block, and `--dot` gives one cluster per block.
#[test]
fn slices_print_the_blocks_of_all_procedures() {
    let file = concat!(env!("CARGO_MANIFEST_DIR"), "/workloads/smallbank.sql");
    let run = |extra: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_myriad"))
            .arg("explain")
            .arg("--slices")
            .args(extra)
            .arg(file)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let text = run(&[]);
    assert!(text.contains("5 procedures that write, 2 blocks"), "{text}");
    let sav = text.find("owns savings").expect("a block owns savings");
    let chk = text.find("owns checking").expect("a block owns checking");
    assert!(sav < chk, "{text}");
    assert!(text.contains("B0 -> B1"), "{text}");
    let dot = run(&["--dot"]);
    assert!(dot.starts_with("digraph"), "{dot}");
    assert_eq!(dot.matches("subgraph cluster_b").count(), 2, "{dot}");
    // Transaction chopping (thesis Fig. 4.18): every Smallbank procedure conflicts with the
    // others through savings or checking, so each is one piece and all share one block.
    let chopped = run(&["--pacman-slicing", "chopping"]);
    assert!(
        chopped.contains("5 procedures that write, 1 blocks"),
        "{chopped}"
    );
    assert!(chopped.contains("pieces: chopping"), "{chopped}");
    assert!(!chopped.contains("/1 in B"), "one slice each: {chopped}");
}

/// `--healing` prints Transaction Healing's analysis: Fig. 3.3's key and value edges, the
/// own-write edge between the two BALANCE updates (the same row when a client pays itself),
/// and CLIENT validated before BALANCE (line 4 looks BALANCE up by what line 2 read from
/// CLIENT); `--dot` gives the graph; `--slices` with it is a usage error.
#[test]
fn healing_prints_the_dependency_graph_and_the_validation_order() {
    let (ok, out, err) = explain(&["--healing", "bank.sql", "transfer.sql"]);
    assert!(ok, "{err}");
    for line in [
        "#0 -> #2  key dst_id",
        "#0 -> #5  key dst_id",
        "#6 -> #7  value bonus",
        "#4 -> #5  own-write balance",
        "client -> balance  key (transfer #0 -> #2)",
    ] {
        assert!(out.contains(line), "missing `{line}` in:\n{out}");
    }
    let order = out.find("validation order").expect("the order is printed");
    let (client, balance) = (out.rfind("0 client"), out.rfind("1 balance"));
    assert!(client > Some(order) && balance > client, "{out}");
    let (ok, dot, err) = explain(&["--healing", "--dot", "bank.sql", "transfer.sql"]);
    assert!(ok, "{err}");
    assert!(dot.starts_with("digraph \"transfer\" {"), "{dot}");
    assert!(
        dot.contains("op4 -> op5 [label=\"own-write balance\", color=blue];"),
        "{dot}"
    );
    let (ok, _, err) = explain(&["--healing", "--slices", "bank.sql", "transfer.sql"]);
    assert!(!ok && err.contains("--slices"), "{err}");
}
