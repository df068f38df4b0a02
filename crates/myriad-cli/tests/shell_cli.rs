//! `myriad shell` driven through stdin, as a script would run it.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

fn shell(args: &[&str], input: &str) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_myriad"))
        .arg("shell")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run the myriad binary");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(input.as_bytes())
        .expect("write the script");
    child.wait_with_output().expect("shell output")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

const SETUP: &str = "CREATE TABLE kv (k INT PRIMARY KEY, v VARCHAR(10), x DOUBLE);
INSERT INTO kv VALUES (1, 'one', 1.5),
  (2, 'two', 2);
";

#[test]
fn a_script_runs_statements_across_lines_and_prints_tables() {
    let o = shell(
        &[],
        &format!("{SETUP}SELECT k, v\n  FROM kv\n  WHERE x > 1.6;\n"),
    );
    assert!(o.status.success(), "{o:?}");
    assert_eq!(
        stdout(&o),
        "CREATE TABLE\nINSERT 2\n k | v\n---+-----\n 2 | two\n(1 row)\n"
    );
}

#[test]
fn errors_keep_the_session_alive_roll_back_and_set_the_exit_status() {
    let script = format!(
        "{SETUP}BEGIN;\nUPDATE kv SET x = 0 WHERE k = 1;\nSELECT nope FROM kv;\nSELECT x FROM kv WHERE k = 1;\nCOMMIT;\nSELECT x FROM kv WHERE k = 1;\n"
    );
    let o = shell(&[], &script);
    assert_eq!(
        o.status.code(),
        Some(1),
        "a failed statement makes the exit status 1"
    );
    let out = stdout(&o);
    assert!(
        out.contains("ERROR: SQL at line 1, column 8: table `kv` has no column `nope`\nthe transaction was rolled back; statements are refused until COMMIT or ROLLBACK\n"),
        "{out}"
    );
    // As in PostgreSQL, the aborted block refuses statements, and its COMMIT rolls back.
    assert!(
        out.contains("ERROR: current transaction is aborted, commands ignored until end of transaction block\nROLLBACK\n"),
        "{out}"
    );
    // The update was rolled back with the transaction, and the session went on.
    assert!(out.ends_with(" x\n-----\n 1.5\n(1 row)\n"), "{out}");
}

#[test]
fn meta_commands_describe_time_include_and_quit() {
    let file = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("shell_cli-{}.sql", std::process::id()));
    std::fs::write(&file, "INSERT INTO kv VALUES (3, 'three', 3);\n").unwrap();
    let script = format!(
        "{SETUP}\\d\n\\d kv\n\\i {}\nSELECT k FROM kv WHERE k = 3;\n\\timing\nSELECT k FROM kv WHERE k = 1;\n\\q\nSELECT 'not reached';\n",
        file.display()
    );
    let o = shell(&[], &script);
    assert!(o.status.success(), "{o:?}");
    let out = stdout(&o);
    assert!(out.contains("\nkv\nTable \"kv\"\n"), "{out}");
    assert!(out.contains(" v      | VARCHAR(10)\n"), "{out}");
    assert!(
        out.contains("primary key \"primary\" Ordered (k)\n"),
        "{out}"
    );
    assert!(out.contains("INSERT 1\n k\n---\n 3\n(1 row)\n"), "{out}");
    assert!(
        out.contains("Timing is on.\n k\n---\n 1\n(1 row)\nTime: "),
        "{out}"
    );
    assert!(!out.contains("not reached"), "{out}");
    let o = shell(&[], "\\d nope\n\\i /nonexistent/file.sql\n\\bogus\n");
    assert_eq!(o.status.code(), Some(1));
    let out = stdout(&o);
    assert!(out.contains("ERROR: unknown table `nope`"), "{out}");
    assert!(
        out.contains("ERROR: cannot read /nonexistent/file.sql"),
        "{out}"
    );
    assert!(out.contains("ERROR: unknown command \\bogus"), "{out}");
}

#[test]
fn the_isolation_flag_is_validated_and_unterminated_input_still_runs() {
    let o = shell(&["--isolation", "bogus"], "");
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--isolation"));
    // A last statement without ';' at the end of the input is run, not dropped.
    let o = shell(
        &["--isolation", "si"],
        &format!("{SETUP}SELECT count FROM kv"),
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(stdout(&o).contains("no column `count`"), "{}", stdout(&o));
}

#[test]
fn a_file_that_includes_itself_is_an_error_not_a_stack_overflow() {
    let file = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("shell_cli-{}-self.sql", std::process::id()));
    std::fs::write(
        &file,
        format!(
            "UPDATE kv SET x = x + 1 WHERE k = 1;\n\\i {}\nUPDATE kv SET v = 'after' WHERE k = 2;\n",
            file.display()
        ),
    )
    .unwrap();
    let script = format!(
        "{SETUP}\\i {}\nSELECT v FROM kv WHERE k = 2;\n",
        file.display()
    );
    let o = shell(&[], &script);
    let _ = std::fs::remove_file(&file);
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    let out = stdout(&o);
    assert!(
        out.contains("nested \\i files (does a file include itself?)"),
        "{out}"
    );
    // Each level ran its first line, up to the bound.
    assert_eq!(out.matches("UPDATE 1\n").count(), 32, "{out}");
    // The enclosing files stop at the error: the line after each `\i` never runs, and the
    // session goes on after the include chain.
    assert!(out.ends_with(" v\n-----\n two\n(1 row)\n"), "{out}");
}

#[test]
fn a_data_dir_keeps_the_database_across_shell_runs() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("shell_cli-{}-data", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let d = dir.to_str().unwrap();
    let o = shell(&["--data-dir", d], SETUP);
    assert!(o.status.success(), "{o:?}");
    let o = shell(&["--data-dir", d], "SELECT k, v FROM kv WHERE k = 2;\n");
    assert!(o.status.success(), "{o:?}");
    assert_eq!(stdout(&o), " k | v\n---+-----\n 2 | two\n(1 row)\n");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_protocol_alone_picks_its_strongest_isolation() {
    // `si` offers only snapshot isolation: the default of serializable used to fail to open.
    let o = shell(
        &["--protocol", "si"],
        &format!("{SETUP}SELECT v FROM kv WHERE k = 1;\n"),
    );
    assert!(o.status.success(), "{o:?}");
    assert!(
        stdout(&o).ends_with(" v\n-----\n one\n(1 row)\n"),
        "{}",
        stdout(&o)
    );
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("isolation level si"),
        "{o:?}"
    );
}

#[test]
fn a_float_column_is_double_wherever_the_user_sees_it() {
    // `ColumnType::Float` / `Value::Float` in Rust; the user sees one name, DOUBLE.
    let o = shell(
        &[],
        "CREATE TABLE f (k INT PRIMARY KEY, x FLOAT, y REAL);\n\\d f\nINSERT INTO f VALUES (1, 'a', 1);\nSELECT k FROM f WHERE x = 'a';\n",
    );
    let out = stdout(&o);
    assert!(
        out.contains(" x      | DOUBLE\n y      | DOUBLE\n"),
        "{out}"
    );
    assert!(
        out.contains("expected DOUBLE, found VARCHAR")
            && out.contains("cannot compare DOUBLE with VARCHAR"),
        "{out}"
    );
    assert!(!out.to_lowercase().contains("float"), "{out}");
}
