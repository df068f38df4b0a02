//! `myriad explain FILE...`: print each stored procedure's IR and def-use graph, or with
//! `--slices` PACMAN's slices and block graph over all of them, or with `--healing`
//! Transaction Healing's dependency graphs and validation order.

use myriad::procedure::slice::{registered_with, Options};
use myriad::{Config, Database, Error, PacmanSlicing};
use std::path::PathBuf;
use std::process::ExitCode;

/// `myriad explain FILE...`: runs the files' statements in order on an empty in-memory
/// database (so the tables exist) and prints every procedure they define, in order; with
/// `slices`, the slices (or the pieces of that decomposition) and blocks of all of them
/// together; with `healing`, their healing dependency graphs and the validation order over
/// all of them.
pub(crate) fn explain(
    files: &[PathBuf],
    dot: bool,
    slices: Option<PacmanSlicing>,
    healing: bool,
) -> ExitCode {
    let db = match Database::open(Config::default()) {
        Ok(db) => db,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut s = myriad::sql::Session::new(&db);
    let mut out = String::new();
    for file in files {
        let run = |s: &mut myriad::sql::Session<'_>, out: &mut String| -> myriad::Result<()> {
            let text = std::fs::read_to_string(file)
                .map_err(|e| Error::InvalidConfig(format!("cannot read the file: {e}")))?;
            for o in s.execute(&text)? {
                if let myriad::sql::Output::Done(tag) = o {
                    if let Some(name) = tag.strip_prefix("CREATE PROCEDURE ") {
                        let p = db.procedure(name)?;
                        *out += &if dot { p.explain_dot() } else { p.explain() };
                        out.push('\n');
                    }
                }
            }
            Ok(())
        };
        if let Err(e) = run(&mut s, &mut out) {
            eprintln!("error: {}: {e}", file.display());
            return ExitCode::FAILURE;
        }
    }
    if out.is_empty() {
        eprintln!("error: no CREATE PROCEDURE in the files");
        return ExitCode::FAILURE;
    }
    if let Some(slicing) = slices {
        let gdg = registered_with(
            &db,
            Options {
                slicing,
                ..Options::default()
            },
        );
        out = if dot { gdg.dot() } else { gdg.text() };
    } else if healing {
        out = if dot {
            myriad::procedure::healing::explain_healing_dot(&db)
        } else {
            myriad::procedure::healing::explain_healing(&db)
        };
    }
    print!("{out}");
    ExitCode::SUCCESS
}
