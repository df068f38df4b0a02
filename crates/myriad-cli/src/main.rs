//! `myriad`: the command-line tool and benchmark harness.
//!
//! `myriad bench <workload>` opens an embedded in-memory database with the chosen design
//! (`--protocol`, `--isolation`, `--gc`), loads the workload's tables, runs it, and prints a
//! human summary (and with `--json PATH` one JSON object; `bench/report.rs`). Without
//! `--isolation` it runs at the protocol's strongest level. `myriad shell` is an interactive
//! SQL session (in memory, or durable with `--data-dir`); `myriad isolation-test SPEC...` runs
//! isolation specs (`isolation/`). `myriad experiment NAME` runs a sweep of benchmarks and
//! plots it (`experiment/`). `myriad recover`, `myriad log inspect` (`recover.rs`), `myriad
//! check` (`check.rs`) and `myriad explain` (`explain.rs`) work on data directories and SQL
//! files.
//!
//! The flags are defined in `args.rs`; `main` parses them, prepares the process for a
//! benchmark (huge pages, pre-faulting) and dispatches to the subcommand's module.
//!
//! Exit codes: 0 success; 1 a fatal error during the run; 2 a usage error (unknown flag,
//! invalid value, a `--data-dir` that is a file, a load estimated not to fit in memory) or a
//! configuration this build does not support. Output into a closed pipe ends the process by
//! SIGPIPE, as for `cat` (`restore_sigpipe`).

mod args;
mod baselines;
mod bench;
mod check;
mod experiment;
mod explain;
mod isolation;
mod recover;
mod shell;
mod workload;

/// mimalloc for the benchmark binary: versions are freed by whichever worker's epoch
/// collection runs, often not the one that allocated them, and glibc's per-arena locking made
/// those cross-thread frees a visible cost. The engine library itself leaves the allocator to
/// the application.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use args::{BenchWorkload, CheckWorkload, Cli, Command, LogCommand};
use bench::footprint;
use clap::error::ErrorKind;
use clap::{CommandFactory, Parser};
use myriad::{Config, Isolation, PacmanSlicing, Protocol};
use std::fmt::Display;
use std::process::ExitCode;

/// Parses the command line and runs the subcommand; its exit code is the process's.
fn main() -> ExitCode {
    restore_sigpipe();
    let mut cli = Cli::parse();
    if let Command::Bench { workload } = &mut cli.command {
        let b = workload.bench_args_mut();
        b.isolation = Some(isolation_or_strongest(b.isolation, b.protocol));
        if b.unsafe_no_validation && matches!(b.protocol, Protocol::Occ | Protocol::Silo) {
            eprintln!(
                "myriad: --unsafe-no-validation: read validation is off ({}⁻); the run is not \
                 serializable",
                b.protocol.name().to_uppercase()
            );
        }
        set_huge_pages(b.huge_pages);
        let auto_mib = workload.auto_prefault_mib(footprint::mem_available());
        let b = workload.bench_args_mut();
        if b.prefault_mib.auto {
            b.prefault_mib.mib = auto_mib;
        }
        // Pre-faulting more than there is would fail the way an oversized load does.
        bench::command::fits_in_memory(
            footprint::Estimate {
                bytes: b.prefault_mib.mib << 20,
                from: format!("--prefault-mib {}", b.prefault_mib.mib),
            },
            b,
        );
        if b.prefault_mib.auto {
            keep_freed_memory();
        }
        prefault(b.prefault_mib.mib);
    }
    match cli.command {
        Command::Shell {
            protocol,
            isolation,
            data_dir,
        } => shell::run(
            protocol,
            isolation_or_strongest(isolation, protocol),
            data_dir.as_deref(),
        ),
        Command::Explain {
            files,
            dot,
            slices,
            pacman_slicing,
            healing,
        } => explain::explain(
            &files,
            dot,
            slices.then(|| pacman_slicing.unwrap_or(PacmanSlicing::Pacman)),
            healing,
        ),
        Command::IsolationTest(a) => isolation::run(a),
        Command::Experiment(a) => experiment::run(a),
        Command::Recover {
            dir,
            json,
            recovery,
            threads,
            verify,
            pacman_mode,
            pacman_slicing,
            pacman_batch_epochs,
        } => {
            // Recovery frees what it built per batch (PACMAN's pieces, footprints and
            // queues) and builds the next batch's at once: returned to the OS, that memory
            // came back as fresh pages the kernel zeroes (a 10 s TPC-C command log under
            // PACMAN, one thread: 51,000 minor faults and 13 % of the time in page
            // clearing; kept, 940 faults and 13 % less replay time). The process ends after
            // recovery, so nothing is held longer than the run.
            keep_freed_memory();
            recover::recover(
                &dir,
                json.as_deref(),
                recovery,
                threads,
                verify,
                recover::Pacman {
                    mode: pacman_mode,
                    slicing: pacman_slicing,
                    batch_epochs: pacman_batch_epochs,
                },
            )
        }
        Command::Check {
            workload:
                CheckWorkload::Tpcc {
                    data_dir,
                    no_inserts,
                },
        } => check::check_tpcc(&data_dir, no_inserts),
        Command::Log {
            command: LogCommand::Inspect { dir },
        } => recover::log_inspect(&dir),
        Command::Bench { workload } => match *workload {
            BenchWorkload::Ycsb(a) => bench::command::bench_ycsb(a),
            BenchWorkload::Tpcc(a) => bench::command::bench_tpcc(a),
            BenchWorkload::Smallbank(a) => bench::command::bench_smallbank(a),
            BenchWorkload::Tatp(a) => bench::command::bench_tatp(a),
            BenchWorkload::Llt(a) => bench::command::bench_llt(a),
        },
    }
}

/// Gives SIGPIPE back its default action (terminate, silently), which the Rust runtime sets to
/// "ignore" before `main`. With it ignored, writing to a closed pipe (`myriad log inspect D |
/// head -1`) returns `BrokenPipe`, and `println!` panics on that with a backtrace. Restoring
/// the default makes every writer (the reports, the shell, isolation-test, progress bars on
/// stderr) stop the way `cat` or `grep` do, without wrapping each `print!` in a check. A
/// process ended this way skips its destructors: a durable database is then left as after a
/// crash (recovery's job), and a `--json` report is written before the human one, so it is
/// complete by then.
fn restore_sigpipe() {
    #[cfg(unix)]
    // SAFETY: installs the default disposition; no handler runs, single-threaded here.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

/// Asks mimalloc to back the memory it obtains from now on with 2 MiB pages (on Linux:
/// `madvise(MADV_HUGEPAGE)`, honoured when transparent huge pages are `always` or `madvise`).
/// Called once, before any worker thread starts (`mi_option_set` is not thread-safe).
fn set_huge_pages(on: bool) {
    // SAFETY: plain option store; single-threaded at this point.
    unsafe {
        libmimalloc_sys::mi_option_set(libmimalloc_sys::mi_option_large_os_pages, on as _);
    }
}

/// mimalloc's `purge_delay` option: its position in mimalloc v3's `mi_option_t`, which the
/// Rust bindings do not name (`libmimalloc-sys` 0.1.49 builds v3).
pub(crate) const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// Whether mimalloc returns freed memory to the OS (its `purge_delay` is not negative), as
/// the fidelity block reports it.
pub(crate) fn purges_freed_memory() -> bool {
    // SAFETY: plain option load.
    unsafe { libmimalloc_sys::mi_option_get(MI_OPTION_PURGE_DELAY) >= 0 }
}

/// Turns mimalloc's purging off: memory freed to the allocator stays mapped and is handed
/// out again instead of being returned to the OS (`madvise`) and faulted in and zeroed by the
/// kernel on its next use, as Silo's and ERMIA's runners keep theirs. A bench run under
/// `--prefault-mib auto` gets it whatever it pre-faults: with purging, TPC-C `--no-inserts`
/// (which does not grow) took 3,400-7,000 minor faults in 5 s of 2 threads, without it about
/// 500, the load's (docs/benchmarks.md, "`--prefault-mib auto` is the default"). Called
/// once, before any worker thread starts (`mi_option_set` is not thread-safe).
fn keep_freed_memory() {
    // SAFETY: plain option store; single-threaded at this point.
    unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, -1) };
}

/// `--prefault-mib`: turns purging off, then allocates `mib` MiB in 1 MiB blocks, writes a
/// byte to every 4 KiB page of each and frees them all. The allocator keeps the faulted-in
/// pages in its arenas and hands them out again, to every thread. Called once, before any
/// worker thread starts.
fn prefault(mib: u64) {
    if mib == 0 {
        return;
    }
    keep_freed_memory();
    let blocks: Vec<Vec<u8>> = (0..mib)
        .map(|_| {
            let mut b = vec![0u8; 1 << 20];
            for i in (0..b.len()).step_by(4096) {
                // A volatile write, so the pages are touched even though nothing reads them.
                // SAFETY: in bounds of `b`.
                unsafe { std::ptr::write_volatile(b.as_mut_ptr().add(i), 1) };
            }
            b
        })
        .collect();
    drop(blocks);
}

/// The isolation level to run at: the one given, else the strongest `protocol` offers (so `--protocol
/// si` alone runs, at `si`). A default below serializable is said on stderr, so a weaker run is
/// never mistaken for a serializable one. A protocol this build lacks gets serializable here
/// and its "not supported" error when the database opens.
pub(crate) fn isolation_or_strongest(given: Option<Isolation>, protocol: Protocol) -> Isolation {
    if let Some(i) = given {
        return i;
    }
    let level = Config::strongest_isolation(protocol).unwrap_or(Isolation::Serializable);
    if level != Isolation::Serializable {
        eprintln!(
            "myriad: isolation level {level}, the strongest protocol {protocol} offers \
             (--isolation chooses another)"
        );
    }
    level
}

/// A `--data-dir` that exists must be a directory: otherwise opening it would fail with the
/// OS's bare "File exists" or "Not a directory".
pub(crate) fn check_data_dir(dir: &std::path::Path) -> Result<(), String> {
    match std::fs::metadata(dir) {
        Ok(m) if !m.is_dir() => Err(format!(
            "--data-dir {}: not a directory (a file is there; give a new or existing directory)",
            dir.display()
        )),
        _ => Ok(()),
    }
}

/// A usage error found after parsing: clap's format and exit code (2).
pub(crate) fn usage_error(msg: String) -> ! {
    Cli::command().error(ErrorKind::ValueValidation, msg).exit()
}

/// Reports a fatal error (`myriad: error: WHAT: E` on stderr) and returns exit code 1.
pub(crate) fn fatal(what: &str, e: impl Display) -> ExitCode {
    eprintln!("myriad: error: {what}: {e}");
    ExitCode::from(1)
}
