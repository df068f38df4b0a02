//! `myriad shell`: an interactive SQL session on an in-memory database, or with `--data-dir` a
//! durable one (opened, and so recovered, like `myriad recover` does; closed with a checkpoint).
//!
//! Statements end with `;` and may span lines. On a terminal the line editor (`rustyline`)
//! gives editing and history, kept across runs in `$HOME/.myriad_history` (not kept when HOME
//! is unset; a history that cannot be read or written is skipped silently); otherwise
//! statements are read from stdin, and the exit status is 1 if any statement failed (so
//! scripts notice). An error keeps the session alive; as in PostgreSQL, an error inside
//! `BEGIN ... COMMIT` rolls that transaction back and leaves the block aborted (prompt
//! `myriad!>`): statements are refused until `COMMIT` or `ROLLBACK`. Ctrl-C while a statement
//! runs cancels it (the process and its database live on); on a terminal, at the prompt it
//! clears the line; a script read from stdin stops after the cancelled statement, with exit
//! status 1. `\set statement_timeout MS` cancels statements that run longer. Meta-commands (at
//! the start of a statement): `\d`, `\d TABLE`, `\timing`, `\set`, `\i FILE` (nested at most
//! `MAX_INCLUDE_DEPTH` deep, so a file that includes itself is an error, not a stack
//! overflow), `\q`, `\?`.

use myriad::sql::{Output, Session};
use myriad::{Config, Database, Isolation, Protocol, Value};
use std::io::{BufRead, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

const HELP: &str = "\\d            list tables
\\d TABLE      describe a table
\\timing       toggle printing each statement's time
\\set statement_timeout MS   cancel statements running longer (0: no limit)
\\i FILE       run the statements in FILE
\\q            quit
\\?            this help
Statements end with `;`.";

/// How deep `\i` may nest: far beyond any real script, far below a stack overflow.
const MAX_INCLUDE_DEPTH: usize = 32;

/// The history file's name in `$HOME`.
const HISTORY_FILE: &str = ".myriad_history";

struct Shell<'db> {
    db: &'db Database,
    session: Session<'db>,
    timing: bool,
    failed: bool,
    /// Lines of the statement being typed.
    pending: String,
    /// How deeply `\i` files are nested at the line being run (0: stdin or the terminal).
    includes: usize,
    /// A `\i` nested too deeply: the enclosing `\i` files stop too.
    include_failed: bool,
}

/// Runs the shell on a database of `protocol` (with `--data-dir`, durable in `data_dir`);
/// `isolation` is the default level of `BEGIN` and single statements.
pub fn run(protocol: Protocol, isolation: Isolation, data_dir: Option<&Path>) -> ExitCode {
    let mut config = Config::new()
        .protocol(protocol)
        .version_storage(protocol.natural_storage())
        .isolation(isolation);
    if let Some(dir) = data_dir {
        if let Err(m) = crate::check_data_dir(dir) {
            eprintln!("myriad: error: {m}");
            return ExitCode::from(2);
        }
        config = config
            .data_dir(dir)
            .log_manager(protocol.natural_log_manager());
    }
    let db = match Database::open(config) {
        Ok(db) => db,
        Err(e @ (myriad::Error::Unsupported(_) | myriad::Error::InvalidConfig(_))) => {
            eprintln!("myriad: {e}");
            return ExitCode::from(2);
        }
        Err(e) => {
            eprintln!("myriad: error: {e}");
            return ExitCode::from(1);
        }
    };
    let mut sh = Shell {
        db: &db,
        session: Session::new(&db),
        timing: false,
        failed: false,
        pending: String::new(),
        includes: 0,
        include_failed: false,
    };
    // Ctrl-C (SIGINT) cancels the running statement instead of killing the process and its
    // in-memory database. On a terminal the line editor reads it at the prompt as a key and
    // clears the line; a script read from stdin stops after the cancelled statement (psql).
    let cancel = sh.session.cancel_handle();
    let interrupted = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&interrupted);
    if let Err(e) = ctrlc::set_handler(move || {
        flag.store(true, Ordering::Relaxed);
        cancel.cancel();
    }) {
        eprintln!("myriad: warning: Ctrl-C will end the shell: {e}");
    }
    if std::io::stdin().is_terminal() {
        let history = history_path(std::env::var_os("HOME").map(PathBuf::from));
        sh.interactive(data_dir, history.as_deref());
        ExitCode::SUCCESS
    } else {
        let stdin = std::io::stdin();
        for line in stdin.lock().lines() {
            match line {
                Ok(l) => {
                    if !sh.line(&l) {
                        break;
                    }
                }
                Err(e) => {
                    eprintln!("myriad: error: reading stdin: {e}");
                    return ExitCode::from(1);
                }
            }
            if interrupted.load(Ordering::Relaxed) {
                eprintln!("myriad: interrupted; the rest of the script is not run");
                return ExitCode::from(1);
            }
        }
        sh.finish_pending();
        if sh.failed {
            ExitCode::from(1)
        } else {
            ExitCode::SUCCESS
        }
    }
}

impl Shell<'_> {
    fn interactive(&mut self, data_dir: Option<&Path>, history: Option<&Path>) {
        let mut ed = match rustyline::DefaultEditor::new() {
            Ok(ed) => ed,
            Err(e) => {
                eprintln!("myriad: error: line editor: {e}");
                return;
            }
        };
        if let Some(h) = history {
            // A missing or unreadable history is an empty one.
            let _ = ed.load_history(h);
        }
        let what = match data_dir {
            Some(d) => format!("the durable database in {}", d.display()),
            None => "an in-memory database".into(),
        };
        println!(
            "myriad shell: {what} ({} at {}). \\? for help, \\q to quit.",
            self.db.config().get_protocol(),
            self.db.config().get_isolation()
        );
        loop {
            let prompt = match (self.pending.is_empty(), self.session.in_transaction()) {
                (true, false) => "myriad> ",
                (true, true) if self.session.transaction_aborted() => "myriad!> ",
                (true, true) => "myriad*> ",
                (false, _) => "     -> ",
            };
            match ed.readline(prompt) {
                Ok(l) => {
                    let _ = ed.add_history_entry(l.as_str());
                    if let Some(h) = history {
                        // Saved after every line, so a killed shell keeps it too; a history
                        // that cannot be written is not the session's problem.
                        let _ = ed.save_history(h);
                    }
                    if !self.line(&l) {
                        return;
                    }
                }
                Err(rustyline::error::ReadlineError::Interrupted) => self.pending.clear(),
                Err(_) => return, // end of input (Ctrl-D)
            }
        }
    }

    /// Handles one input line; false to quit.
    fn line(&mut self, l: &str) -> bool {
        let t = l.trim();
        if self.pending.is_empty() && t.starts_with('\\') {
            return self.meta(t);
        }
        if t.is_empty() && self.pending.is_empty() {
            return true;
        }
        self.pending.push_str(l);
        self.pending.push('\n');
        if statement_complete(&self.pending) {
            let text = std::mem::take(&mut self.pending);
            self.run_sql(&text);
        }
        true
    }

    fn finish_pending(&mut self) {
        if !self.pending.trim().is_empty() {
            let text = std::mem::take(&mut self.pending);
            self.run_sql(&text);
        }
    }

    fn run_sql(&mut self, text: &str) {
        let was_aborted = self.session.transaction_aborted();
        let start = Instant::now();
        // Every statement runs and reports, as psql does; inside an aborted block the
        // session refuses them.
        let results = self.session.execute_each(text);
        let elapsed = start.elapsed();
        for r in results {
            match r {
                Ok(o) => print_output(&o),
                Err(e) => {
                    self.failed = true;
                    println!("ERROR: {e}");
                }
            }
        }
        if !was_aborted && self.session.transaction_aborted() {
            println!(
                "the transaction was rolled back; statements are refused until COMMIT or ROLLBACK"
            );
        }
        if self.timing {
            println!("Time: {:.3} ms", elapsed.as_secs_f64() * 1e3);
        }
        let _ = std::io::stdout().flush();
    }

    fn meta(&mut self, cmd: &str) -> bool {
        let mut parts = cmd.splitn(2, char::is_whitespace);
        let name = parts.next().unwrap_or("");
        let arg = parts.next().map(str::trim).unwrap_or("");
        match name {
            "\\q" => return false,
            "\\?" => println!("{HELP}"),
            "\\timing" => {
                self.timing = !self.timing;
                println!("Timing is {}.", if self.timing { "on" } else { "off" });
            }
            "\\set" => self.set(arg),
            "\\d" if arg.is_empty() => {
                let mut names = self.db.table_names();
                names.sort();
                if names.is_empty() {
                    println!("No tables.");
                }
                for n in names {
                    println!("{n}");
                }
            }
            "\\d" => match self.db.table(arg) {
                Ok(t) => {
                    let s = t.schema();
                    println!("Table \"{}\"", s.name());
                    let cols: Vec<Vec<String>> = s
                        .columns()
                        .iter()
                        .map(|c| vec![c.name.clone(), c.ty.to_string()])
                        .collect();
                    print_table(&["column".into(), "type".into()], &cols);
                    for (i, ix) in s.indexes().iter().enumerate() {
                        let cols: Vec<&str> = ix
                            .columns
                            .iter()
                            .map(|&c| s.columns()[c].name.as_str())
                            .collect();
                        println!(
                            "{} \"{}\" {:?}{} ({})",
                            if i == 0 { "primary key" } else { "index" },
                            ix.name,
                            ix.kind,
                            if ix.unique && i > 0 { " unique" } else { "" },
                            cols.join(", ")
                        );
                    }
                }
                Err(e) => {
                    self.failed = true;
                    println!("ERROR: {e}");
                }
            },
            "\\i" if !arg.is_empty() && self.includes >= MAX_INCLUDE_DEPTH => {
                self.failed = true;
                self.include_failed = true;
                println!(
                    "ERROR: \\i {arg}: more than {MAX_INCLUDE_DEPTH} nested \\i files (does a file \
                     include itself?); the enclosing \\i files stop here"
                );
            }
            "\\i" if !arg.is_empty() => match std::fs::read_to_string(arg) {
                Ok(text) => {
                    self.includes += 1;
                    let mut quit = false;
                    for l in text.lines() {
                        if !self.line(l) {
                            quit = true;
                            break;
                        }
                        if self.include_failed {
                            break;
                        }
                    }
                    self.includes -= 1;
                    if quit {
                        return false;
                    }
                    if self.include_failed {
                        // The statement that file had begun is not run half-read.
                        self.pending.clear();
                        if self.includes == 0 {
                            self.include_failed = false;
                        }
                    } else {
                        self.finish_pending();
                    }
                }
                Err(e) => {
                    self.failed = true;
                    println!("ERROR: cannot read {arg}: {e}");
                }
            },
            _ => {
                self.failed = true;
                println!("ERROR: unknown command {cmd} (\\? for help)");
            }
        }
        true
    }
}

impl Shell<'_> {
    /// `\set [statement_timeout MS]`.
    fn set(&mut self, arg: &str) {
        let mut words = arg.split_whitespace();
        match (words.next(), words.next(), words.next()) {
            (None, ..) => match self.session.statement_timeout() {
                Some(d) => println!("statement_timeout = {}", d.as_millis()),
                None => println!("statement_timeout = 0"),
            },
            (Some("statement_timeout"), Some(ms), None) => match ms.parse::<u64>() {
                Ok(ms) => self
                    .session
                    .set_statement_timeout(Some(std::time::Duration::from_millis(ms))),
                Err(_) => {
                    self.failed = true;
                    println!(
                        "ERROR: statement_timeout needs milliseconds (0: no limit), not `{ms}`"
                    );
                }
            },
            _ => {
                self.failed = true;
                println!("ERROR: usage: \\set statement_timeout MS");
            }
        }
    }
}

/// `$HOME/.myriad_history`, or none without a HOME (then history lives for the session only).
fn history_path(home: Option<PathBuf>) -> Option<PathBuf> {
    home.filter(|h| !h.as_os_str().is_empty())
        .map(|h| h.join(HISTORY_FILE))
}

/// Does `text` end with a `;` outside a string literal (and outside a `--` comment)?
fn statement_complete(text: &str) -> bool {
    let mut in_str = false;
    let mut last = None;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if in_str {
            if c == '\'' {
                in_str = false;
            }
            continue;
        }
        match c {
            '\'' => {
                in_str = true;
                last = Some(c);
            }
            '-' if chars.peek() == Some(&'-') => {
                // Comment to the end of the line.
                for c in chars.by_ref() {
                    if c == '\n' {
                        break;
                    }
                }
            }
            c if c.is_whitespace() => {}
            c => last = Some(c),
        }
    }
    !in_str && last == Some(';')
}

fn print_output(o: &Output) {
    match o {
        Output::Done(tag) => println!("{tag}"),
        Output::Rows { columns, rows } => {
            let cells: Vec<Vec<String>> =
                rows.iter().map(|r| r.iter().map(cell).collect()).collect();
            print_table(columns, &cells);
            println!(
                "({} row{})",
                rows.len(),
                if rows.len() == 1 { "" } else { "s" }
            );
        }
    }
}

fn cell(v: &Value) -> String {
    match v {
        Value::Str(s) => s.clone(),
        v => v.to_string(),
    }
}

/// A psql-style aligned table.
fn print_table(header: &[String], rows: &[Vec<String>]) {
    let mut w: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for r in rows {
        for (i, c) in r.iter().enumerate() {
            w[i] = w[i].max(c.chars().count());
        }
    }
    let line = |cells: &[String]| {
        let s: Vec<String> = cells
            .iter()
            .enumerate()
            .map(|(i, c)| format!(" {:<width$} ", c, width = w[i]))
            .collect();
        println!("{}", s.join("|").trim_end());
    };
    line(header);
    println!(
        "{}",
        w.iter()
            .map(|n| "-".repeat(n + 2))
            .collect::<Vec<_>>()
            .join("+")
    );
    for r in rows {
        line(r);
    }
}

#[cfg(test)]
mod tests {
    use super::{history_path, statement_complete};
    use std::path::PathBuf;

    #[test]
    fn history_lives_in_home_and_nowhere_without_one() {
        assert_eq!(
            history_path(Some(PathBuf::from("/home/u"))),
            Some(PathBuf::from("/home/u/.myriad_history"))
        );
        assert_eq!(history_path(Some(PathBuf::new())), None);
        assert_eq!(history_path(None), None);
    }

    #[test]
    fn history_round_trips_through_its_file() {
        use rustyline::history::History as _;
        let dir = std::env::temp_dir().join(format!("myriad-history-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = history_path(Some(dir.clone())).unwrap();
        let mut ed = rustyline::DefaultEditor::new().unwrap();
        ed.add_history_entry("SELECT 1;").unwrap();
        ed.save_history(&path).unwrap();
        let mut again = rustyline::DefaultEditor::new().unwrap();
        again.load_history(&path).unwrap();
        assert_eq!(again.history().len(), 1);
        assert_eq!(
            again
                .history()
                .get(0, rustyline::history::SearchDirection::Forward)
                .unwrap()
                .unwrap()
                .entry,
            "SELECT 1;"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn statements_end_at_a_semicolon_outside_strings_and_comments() {
        assert!(statement_complete("SELECT 1;"));
        assert!(statement_complete("SELECT 1;  \n"));
        assert!(!statement_complete("SELECT 1"));
        assert!(!statement_complete("SELECT ';"));
        assert!(statement_complete("SELECT ';';"));
        assert!(statement_complete("SELECT 'it''s';"));
        assert!(!statement_complete("SELECT 1 -- done;\n"));
        assert!(statement_complete("SELECT 1; -- done\n"));
    }
}
