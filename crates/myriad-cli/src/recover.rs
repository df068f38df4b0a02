//! `myriad recover DIR` (recover a data directory and report each phase) and `myriad log
//! inspect DIR` (read a data directory's log without opening it).

use crate::bench::command::bench_load_state;
use crate::bench::report;
use crate::fatal;
use myriad::{Config, Database, Error, PacmanMode, PacmanSlicing, RecoveryScheme};
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// `myriad recover`'s PACMAN options (`None`: not given).
pub(crate) struct Pacman {
    pub mode: Option<PacmanMode>,
    pub slicing: Option<PacmanSlicing>,
    pub batch_epochs: Option<u64>,
}

/// `myriad recover DIR`.
pub(crate) fn recover(
    dir: &std::path::Path,
    json: Option<&std::path::Path>,
    scheme: RecoveryScheme,
    threads: Option<usize>,
    verify: bool,
    pacman: Pacman,
) -> ExitCode {
    let t = Instant::now();
    // `recover` never creates a database: a missing or empty directory is an error.
    let mut config = Config::new()
        .data_dir(dir)
        .recovery(scheme)
        .create_if_missing(false);
    if let Some(n) = threads {
        config = config.recovery_threads(n);
    }
    if scheme != RecoveryScheme::Pacman
        && (pacman.mode.is_some() || pacman.slicing.is_some() || pacman.batch_epochs.is_some())
    {
        eprintln!(
            "myriad: --pacman-mode, --pacman-slicing and --pacman-batch-epochs need --recovery \
             pacman (got --recovery {scheme})"
        );
        return ExitCode::from(2);
    }
    if let Some(m) = pacman.mode {
        config = config.pacman_mode(m);
    }
    if let Some(s) = pacman.slicing {
        config = config.pacman_slicing(s);
    }
    if let Some(n) = pacman.batch_epochs {
        config = config.pacman_batch_epochs(n);
    }
    let (pacman_mode, batch_epochs) = (config.get_pacman_mode(), config.get_pacman_batch_epochs());
    let slicing = config.get_pacman_slicing();
    let what = if verify { "verifying" } else { "recovering" };
    let opened = if verify {
        Database::verify(config).map(|r| (None, r))
    } else {
        Database::open(config).and_then(|db| {
            let r = db
                .recovery_report()
                .cloned()
                .ok_or_else(|| Error::InvalidConfig("no recovery report".into()))?;
            Ok((Some(db), r))
        })
    };
    let (db, r) = match opened {
        Ok(x) => x,
        Err(e @ (Error::InvalidConfig(_) | Error::Unsupported(_))) => {
            eprintln!("myriad: {e}");
            return ExitCode::from(2);
        }
        Err(e) => return fatal(&format!("{what} {}", dir.display()), e),
    };
    let open_s = t.elapsed().as_secs_f64();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!(
        "{} {} ({}, {} thread{})",
        if verify {
            "verified (nothing written)"
        } else {
            "recovered"
        },
        dir.display(),
        r.scheme,
        r.threads,
        if r.threads == 1 { "" } else { "s" }
    );
    println!(
        "  checkpoint        {}",
        r.checkpoint_ts.map_or("none".into(), |t| format!(
            "ts {t}, {} rows",
            report::thousands(r.checkpoint_rows)
        ))
    );
    println!("  persistent epoch  {}", r.persistent_epoch);
    if r.durable_lsn > 0 {
        println!(
            "  durable LSN       {} (ERMIA log; {} skip records)",
            r.durable_lsn,
            report::thousands(r.skip_records)
        );
    }
    println!(
        "  log               {} files, {}, {} records: {} replayed ({} procedure calls, {} physical), {} past the durable point (never acknowledged)",
        r.log_files,
        report::bytes(r.log_bytes),
        report::thousands(r.log_records),
        report::thousands(r.records_replayed),
        report::thousands(r.calls_replayed),
        report::thousands(r.physical_replayed),
        report::thousands(r.records_not_durable)
    );
    for d in &r.dropped {
        println!("  dropped tail      {d}");
    }
    for n in &r.notes {
        println!("  note              {n}");
    }
    if let Some(db) = &db {
        if let Some(state) = bench_load_state(db) {
            println!("  benchmark load    {state}");
        }
    }
    println!(
        "  database          {} tables, {} rows",
        r.tables,
        report::thousands(r.rows)
    );
    if r.scheme == "physical" {
        println!("  phases (ms)       checkpoint load (rows at their tuple ids) {:.1}, log load {:.1}, replay {:.1}, index build {:.1}, checkpoint write {:.1}; total {:.1} (open {:.1})",
            ms(r.checkpoint_load), ms(r.log_load), ms(r.replay), ms(r.index_build), ms(r.checkpoint_write), ms(r.total()), open_s * 1e3);
    } else {
        println!("  phases (ms)       checkpoint load (rows and indexes) {:.1}, log load {:.1}, replay {:.1}, checkpoint write {:.1}; total {:.1} (open {:.1})",
            ms(r.checkpoint_load), ms(r.log_load), ms(r.replay), ms(r.checkpoint_write), ms(r.total()), open_s * 1e3);
    }
    // `main` turned the allocator's purging off for this command; say so, as a bench
    // report's fidelity block does, since it changes what recovery's phases cost.
    let keeps = !crate::purges_freed_memory();
    println!(
        "  memory            {}",
        if keeps {
            "freed memory kept by the allocator for reuse (no purging)"
        } else {
            "freed memory returned to the OS (purging)"
        }
    );
    if r.scheme == "pacman" {
        println!(
            "  pacman            mode {pacman_mode}, pieces by {slicing}, {batch_epochs} epochs \
             per batch"
        );
        println!("  pacman (ms)       static analysis {:.1}; summed over workers: dynamic analysis {:.1}, scheduling wait {:.1}, execution {:.1}; {} batches, {} pieces, {} piece-sets released before an earlier batch was done",
            ms(r.static_analysis), ms(r.dynamic_analysis), ms(r.schedule_wait), ms(r.execution), r.batches, report::thousands(r.pieces), report::thousands(r.sets_overlapped));
    }
    if let Some(path) = json {
        let v = serde_json::json!({
            "dir": dir.display().to_string(),
            "scheme": r.scheme,
            "threads": r.threads,
            "checkpoint_ts": r.checkpoint_ts,
            "checkpoint_rows": r.checkpoint_rows,
            "persistent_epoch": r.persistent_epoch,
            "durable_lsn": r.durable_lsn,
            "skip_records": r.skip_records,
            "log_files": r.log_files,
            "log_bytes": r.log_bytes,
            "log_records": r.log_records,
            "records_replayed": r.records_replayed,
            "calls_replayed": r.calls_replayed,
            "physical_replayed": r.physical_replayed,
            "records_not_durable": r.records_not_durable,
            "bytes_dropped": r.bytes_dropped,
            "dropped": r.dropped,
            "tables": r.tables,
            "rows": r.rows,
            "ms": {
                "checkpoint_load": ms(r.checkpoint_load),
                "log_load": ms(r.log_load),
                "replay": ms(r.replay),
                "index_build": ms(r.index_build),
                "checkpoint_write": ms(r.checkpoint_write),
                "total": ms(r.total()),
                "static_analysis": ms(r.static_analysis),
                "dynamic_analysis": ms(r.dynamic_analysis),
                "schedule_wait": ms(r.schedule_wait),
                "execution": ms(r.execution),
            },
            "batches": r.batches,
            "pieces": r.pieces,
            "sets_overlapped": r.sets_overlapped,
            "pacman_mode": (r.scheme == "pacman").then(|| pacman_mode.to_string()),
            "pacman_slicing": (r.scheme == "pacman").then(|| slicing.to_string()),
            "pacman_batch_epochs": (r.scheme == "pacman").then_some(batch_epochs),
            "allocator_keeps_freed_memory": keeps,
        });
        let text = serde_json::to_string_pretty(&v).unwrap_or_default() + "\n";
        if let Err(e) = std::fs::write(path, text) {
            return fatal(&format!("writing {}", path.display()), e);
        }
    }
    ExitCode::SUCCESS
}

/// `myriad log inspect DIR`.
pub(crate) fn log_inspect(dir: &std::path::Path) -> ExitCode {
    let info = match myriad::recovery::inspect::inspect(dir) {
        Ok(i) => i,
        Err(e) => return fatal(&format!("inspecting {}", dir.display()), e),
    };
    match (info.persistent_epoch, info.durable_lsn) {
        (None, None) => println!("persistent epoch  none (nothing acknowledged yet)"),
        (pe, dl) => {
            if let Some(e) = pe {
                println!("persistent epoch  {e}");
            }
            if let Some(l) = dl {
                println!("durable LSN       {l} (ERMIA log)");
            }
        }
    }
    match &info.checkpoint {
        Some(c) => {
            println!("checkpoint        ts {} in {}", c.ts, c.dir.display());
            for (t, rows) in &c.tables {
                println!("  {t:<20} {} rows", report::thousands(*rows));
            }
        }
        None => println!("checkpoint        none"),
    }
    println!(
        "{:<41} {:>12} {:>8} {:>10} {:>7} {:>10} {:>10} {:>27}  checksums",
        "log file", "bytes", "blocks", "records", "skips", "calls", "physical", "epochs or LSNs"
    );
    let mut damaged = false;
    for f in &info.files {
        let name = f
            .path
            .file_name()
            .map_or(String::new(), |n| n.to_string_lossy().to_string());
        let epochs = match (f.epochs, f.lsns) {
            (Some((a, b)), _) => format!("{a}..{b}"),
            (None, Some((a, b))) => format!("lsn {a}..{b}"),
            (None, None) => "-".into(),
        };
        let status = match &f.damage {
            None => "ok".to_string(),
            Some(why) => {
                damaged = true;
                format!("damaged at byte {}: {why}", f.valid_bytes)
            }
        };
        println!(
            "{name:<41} {:>12} {:>8} {:>10} {:>7} {:>10} {:>10} {epochs:>27}  {status}{}",
            report::thousands(f.bytes),
            f.blocks,
            report::thousands(f.records),
            report::thousands(f.skips),
            report::thousands(f.calls),
            report::thousands(f.physical),
            if f.needed {
                ""
            } else {
                " (older than the checkpoint; unused)"
            }
        );
    }
    if damaged {
        println!("some files end in damaged bytes: a torn tail after the persistent epoch (or durable LSN) is dropped at recovery; damage before it makes recovery refuse to open");
    }
    if !info.problems.is_empty() {
        for p in &info.problems {
            eprintln!("problem: {p}");
        }
        return fatal(
            "inspecting",
            format!(
                "{} problem(s): recovery would refuse to open {}",
                info.problems.len(),
                dir.display()
            ),
        );
    }
    ExitCode::SUCCESS
}
