//! `myriad shell`: a statement timeout and Ctrl-C (SIGINT) cancel the running statement; the
//! process and its in-memory database live on.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Command, Stdio};
use std::time::Duration;

const SPIN: &str = "CREATE PROCEDURE spin() AS $$ DECLARE x INT := 0; BEGIN \
    FOR i IN 1..9223372036854775807 LOOP x := x + 1; END LOOP; END $$;\n";

#[test]
fn a_statement_timeout_cancels_the_statement_and_the_session_goes_on() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_myriad"))
        .arg("shell")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run the myriad binary");
    let script = format!(
        "{SPIN}\\set statement_timeout 100\n\\set\nBEGIN;\nCALL spin();\nSELECT 1;\nROLLBACK;\n\
         \\set statement_timeout 0\nCREATE TABLE t (k INT PRIMARY KEY);\nSELECT count(*) FROM t;\n"
    );
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(script.as_bytes())
        .expect("write the script");
    let o = child.wait_with_output().expect("shell output");
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{out}");
    assert!(out.contains("statement_timeout = 100\n"), "{out}");
    assert!(
        out.contains(
            "ERROR: canceling statement due to statement timeout (100 ms)\n\
             the transaction was rolled back; statements are refused until COMMIT or ROLLBACK\n\
             ERROR: current transaction is aborted, commands ignored until end of transaction block\n\
             ROLLBACK\n"
        ),
        "{out}"
    );
    assert!(
        out.ends_with(" count(*)\n----------\n 0\n(1 row)\n"),
        "{out}"
    );
}

#[test]
fn sigint_cancels_the_running_statement_instead_of_killing_the_shell() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_myriad"))
        .arg("shell")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run the myriad binary");
    let mut stdin = child.stdin.take().expect("stdin");
    stdin
        .write_all(format!("{SPIN}CALL spin();\nSELECT 'not reached';\n").as_bytes())
        .expect("write the script");
    drop(stdin);
    // The handler is installed before the first statement runs: wait for its output.
    let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
    let mut first = String::new();
    stdout.read_line(&mut first).expect("read");
    assert_eq!(first, "CREATE PROCEDURE spin\n");
    std::thread::sleep(Duration::from_millis(200));
    let kill = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .expect("run kill");
    assert!(kill.success());
    let status = child.wait().expect("wait");
    let mut rest = String::new();
    stdout.read_to_string(&mut rest).expect("read");
    // Exited by itself (status 1: a statement failed), not by the signal.
    assert_eq!(status.code(), Some(1), "{rest}");
    assert_eq!(
        rest, "ERROR: canceling statement due to user request\n",
        "the script stops after the cancelled statement"
    );
}
