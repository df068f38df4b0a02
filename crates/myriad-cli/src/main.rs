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
static GLOBAL: Mi = Mi;

/// mimalloc called as Rust's `System` allocator calls C's `malloc`: an alignment of at most
/// 8 (every mimalloc block is 8-aligned: its size classes are whole words) by the plain
/// functions, a larger one by the aligned ones. (The `mimalloc` crate passes every
/// alignment to `mi_malloc_aligned`, whose slow path over-allocates a block whose size is
/// not a power of two into a larger size class, so the freed block went back to that class
/// and the next request of the size took the slow path again: a 96-byte time-travel image
/// cost ~140 instructions to allocate.)
struct Mi;

/// The largest alignment the plain mimalloc functions guarantee.
const MI_WORD_ALIGN: usize = 8;

// SAFETY: mimalloc's functions meet `GlobalAlloc`'s contract; plain ones only where the
// layout's alignment is one every mimalloc block has.
unsafe impl std::alloc::GlobalAlloc for Mi {
    #[inline]
    unsafe fn alloc(&self, l: std::alloc::Layout) -> *mut u8 {
        use libmimalloc_sys as mi;
        if l.align() <= MI_WORD_ALIGN {
            mi::mi_malloc(l.size()).cast()
        } else {
            mi::mi_malloc_aligned(l.size(), l.align()).cast()
        }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, l: std::alloc::Layout) -> *mut u8 {
        use libmimalloc_sys as mi;
        if l.align() <= MI_WORD_ALIGN {
            mi::mi_zalloc(l.size()).cast()
        } else {
            mi::mi_zalloc_aligned(l.size(), l.align()).cast()
        }
    }

    #[inline]
    unsafe fn dealloc(&self, p: *mut u8, _: std::alloc::Layout) {
        libmimalloc_sys::mi_free(p.cast());
    }

    #[inline]
    unsafe fn realloc(&self, p: *mut u8, l: std::alloc::Layout, size: usize) -> *mut u8 {
        use libmimalloc_sys as mi;
        if l.align() <= MI_WORD_ALIGN {
            mi::mi_realloc(p.cast(), size).cast()
        } else {
            mi::mi_realloc_aligned(p.cast(), size, l.align()).cast()
        }
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;
    use std::alloc::{GlobalAlloc, Layout};

    /// `Mi` keeps `GlobalAlloc`'s contract on both of its paths: every block is aligned as
    /// its layout asks (the plain functions' word alignment included: sizes of 1 to 200
    /// bytes, so every small size class), keeps what was written into it through a realloc
    /// that grows and one that shrinks it, and a zeroed block is zero. (Sending alignment 16
    /// to the plain functions fails here: a 24-byte class holds 8-aligned blocks.)
    #[test]
    fn the_allocator_aligns_every_block_as_asked_and_keeps_its_bytes() {
        for align in [1, 2, 4, 8, 16, 32, 64, 4096] {
            for size in (1..=200).chain([1000, 4096, 100_000]) {
                let l = Layout::from_size_align(size, align).unwrap();
                // Several blocks at once, so that they are not all the first of a page.
                let blocks: Vec<*mut u8> = (0..8)
                    .map(|i| {
                        // SAFETY: a non-zero size.
                        let p = unsafe { GLOBAL.alloc(l) };
                        assert!(!p.is_null());
                        assert_eq!(p as usize % align, 0, "size {size}, align {align}");
                        // SAFETY: `size` bytes of ours.
                        unsafe { std::ptr::write_bytes(p, i as u8 + 1, size) };
                        p
                    })
                    .collect();
                for (i, p) in blocks.into_iter().enumerate() {
                    let fill = i as u8 + 1;
                    // SAFETY: `p` came from `alloc(l)`; sizes are non-zero.
                    unsafe {
                        let q = GLOBAL.realloc(p, l, 2 * size + 8);
                        assert_eq!(q as usize % align, 0, "grown {size}, align {align}");
                        assert!((0..size).all(|k| *q.add(k) == fill));
                        let grown = Layout::from_size_align(2 * size + 8, align).unwrap();
                        let r = GLOBAL.realloc(q, grown, size.div_ceil(2));
                        assert_eq!(r as usize % align, 0, "shrunk {size}, align {align}");
                        assert!((0..size.div_ceil(2)).all(|k| *r.add(k) == fill));
                        let shrunk = Layout::from_size_align(size.div_ceil(2), align).unwrap();
                        GLOBAL.dealloc(r, shrunk);
                    }
                }
                // SAFETY: as above.
                unsafe {
                    let z = GLOBAL.alloc_zeroed(l);
                    assert_eq!(z as usize % align, 0, "zeroed {size}, align {align}");
                    assert!((0..size).all(|k| *z.add(k) == 0));
                    GLOBAL.dealloc(z, l);
                }
            }
        }
    }
}
