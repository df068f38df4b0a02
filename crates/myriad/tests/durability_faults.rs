//! The fault matrix (issue 32): every file of a durable directory — each log file of each
//! logger, ERMIA segments, the durable-point files and their mirrors, the checkpoint's
//! `CURRENT`, `MANIFEST`, table and tuple-id files, the catalog, `IDENTITY` — × (delete,
//! truncate to half, cut at its last block boundary, flip a byte, replace with the same file
//! of another database), for both log managers and every log kind. The directory was closed
//! cleanly, so every commit in it was acknowledged: each case must either recover exactly all
//! of them or be refused with a typed error, leaving the directory byte for byte as it was.
//! `Database::verify` must agree with `Database::open` on every case.

use myriad::*;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let p =
            std::env::temp_dir().join(format!("myriad-faults-{tag}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

const BANK: &str = "
CREATE TABLE acct (id BIGINT PRIMARY KEY, bal BIGINT, name VARCHAR(16));
CREATE PROCEDURE open_acct(i BIGINT, b BIGINT, n TEXT) AS $$
BEGIN
  INSERT INTO acct VALUES (i, b, n);
END $$;
CREATE PROCEDURE pay(a BIGINT, v BIGINT) AS $$
BEGIN
  UPDATE acct SET bal = bal + v WHERE id = a;
END $$;
";

fn cfg(dir: &Path, m: LogManagerKind, log: LogPolicy) -> Config {
    let c = Config::new()
        .data_dir(dir)
        .log_manager(m)
        .log(log)
        // Small files: every stream has several.
        .log_file_bytes(4096);
    if m == LogManagerKind::Epoch {
        c.loggers(2)
    } else {
        c
    }
}

/// Every row as (id, bal, name), by id.
fn dump(db: &Database) -> Vec<(i64, i64, String)> {
    let mut out = Vec::new();
    let rows = sql::Session::new(db)
        .execute("SELECT id, bal, name FROM acct")
        .unwrap();
    for o in rows {
        if let sql::Output::Rows { rows, .. } = o {
            for r in rows {
                match &r[..] {
                    [Value::Int(a), Value::Int(b), Value::Str(n)] => out.push((*a, *b, n.clone())),
                    other => panic!("unexpected row {other:?}"),
                }
            }
        }
    }
    out.sort();
    out
}

/// A cleanly closed database: 5 rounds of commits (calls and ad-hoc writes) with a
/// checkpoint after the first; `salt` makes another database's data differ.
fn build(dir: &Path, m: LogManagerKind, log: LogPolicy, salt: i64) -> Vec<(i64, i64, String)> {
    let db = Database::open(cfg(dir, m, log)).unwrap();
    sql::Session::new(&db).execute(BANK).unwrap();
    for round in 0..5i64 {
        for i in 0..20i64 {
            let id = round * 20 + i;
            db.call(
                "open_acct",
                &[
                    id.into(),
                    (100 + salt).into(),
                    format!("n{id}").as_str().into(),
                ],
            )
            .unwrap();
            db.call("pay", &[(id / 2).into(), (salt + 1).into()])
                .unwrap();
        }
        let t = db.table("acct").unwrap();
        db.run(|tx| tx.update(&t, &(round * 20), &[(2, format!("r{round}").as_str())]))
            .unwrap();
        if round == 0 {
            db.checkpoint().unwrap();
        }
    }
    let d = dump(&db);
    drop(db);
    d
}

/// Every regular file under `dir` (relative), except `LOCK`, with its bytes.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    fn walk(root: &Path, d: &Path, out: &mut BTreeMap<PathBuf, Vec<u8>>) {
        for e in std::fs::read_dir(d).unwrap() {
            let e = e.unwrap();
            let p = e.path();
            if e.file_type().unwrap().is_dir() {
                walk(root, &p, out);
            } else if e.file_name() != "LOCK" {
                out.insert(
                    p.strip_prefix(root).unwrap().to_path_buf(),
                    std::fs::read(&p).unwrap(),
                );
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

fn restore(dir: &Path, files: &BTreeMap<PathBuf, Vec<u8>>) {
    for (rel, data) in files {
        let p = dir.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, data).unwrap();
    }
}

/// Where the last checksummed block of a file starts (blocks are `magic u32 | len u32 | crc
/// u32 | payload`), if it has more than one.
fn last_block_start(data: &[u8]) -> Option<usize> {
    let (mut at, mut last) = (0usize, None);
    while at + 12 <= data.len() {
        let len = u32::from_le_bytes(data[at + 4..at + 8].try_into().unwrap()) as usize;
        if at + 12 + len > data.len() {
            return None;
        }
        if at > 0 {
            last = Some(at);
        }
        at += 12 + len;
    }
    (at == data.len()).then_some(last).flatten()
}

/// The file of `other` that plays the part `rel` plays in its own directory: the same
/// relative path, or the same kind of file (its checkpoint's, its logger's newest).
fn counterpart(rel: &Path, other: &BTreeMap<PathBuf, Vec<u8>>) -> Option<Vec<u8>> {
    if let Some(d) = other.get(rel) {
        return Some(d.clone());
    }
    let name = rel.file_name()?.to_string_lossy().to_string();
    let stem = |n: &str| -> String {
        match n.split('-').collect::<Vec<_>>()[..] {
            ["log", l, _] => format!("log-{l}"),
            ["seg", _, _] => "seg".into(),
            _ => n.to_string(),
        }
    };
    other
        .iter()
        .filter(|(p, _)| {
            let n = p.file_name().unwrap().to_string_lossy().to_string();
            stem(&n) == stem(&name)
                && (rel.parent() == p.parent()
                    || rel.components().count() == p.components().count())
        })
        .map(|(_, d)| d.clone())
        .next_back()
}

#[test]
fn every_fault_of_every_file_is_refused_or_loses_nothing() {
    let mut total = (0, 0);
    for m in [LogManagerKind::Epoch, LogManagerKind::Ermia] {
        for log in [LogPolicy::Logical, LogPolicy::Physical, LogPolicy::Command] {
            let what = format!("{m} / {log}");
            let a = TempDir::new("a");
            let expect = build(a.path(), m, log, 0);
            let b = TempDir::new("b");
            build(b.path(), m, log, 7);
            let files = snapshot(a.path());
            let other = snapshot(b.path());
            let logs = files
                .keys()
                .filter(|p| {
                    let n = p.to_string_lossy();
                    n.starts_with("log-") || n.starts_with("seg-")
                })
                .count();
            assert!(
                logs >= 2,
                "{what}: too few log files to test gaps: {files:?}",
                files = files.keys()
            );
            let (mut refused, mut recovered) = (0, 0);
            for rel in files.keys() {
                let data = &files[rel];
                let mut faults: Vec<(String, Option<Vec<u8>>)> = vec![("delete".into(), None)];
                if !data.is_empty() {
                    faults.push((
                        "truncate to half".into(),
                        Some(data[..data.len() / 2].to_vec()),
                    ));
                    let mut f = data.clone();
                    let i = data.len() / 2;
                    f[i] ^= 0x20;
                    faults.push((format!("flip byte {i}"), Some(f)));
                }
                if let Some(at) = last_block_start(data) {
                    faults.push((
                        format!("cut at block boundary {at}"),
                        Some(data[..at].to_vec()),
                    ));
                }
                if let Some(o) = counterpart(rel, &other) {
                    faults.push(("replace with another database's".into(), Some(o)));
                }
                for (fault, content) in faults {
                    let case = format!("{what}: {fault} {}", rel.display());
                    let c = TempDir::new("case");
                    restore(c.path(), &files);
                    let victim = c.path().join(rel);
                    match &content {
                        None => std::fs::remove_file(&victim).unwrap(),
                        Some(d) => std::fs::write(&victim, d).unwrap(),
                    }
                    let before = snapshot(c.path());
                    let verified = Database::verify(cfg(c.path(), m, log));
                    assert_eq!(
                        snapshot(c.path()),
                        before,
                        "{case}: verify wrote to the directory"
                    );
                    match Database::open(cfg(c.path(), m, log)) {
                        Ok(db) => {
                            assert_eq!(dump(&db), expect, "{case}: acknowledged commits lost");
                            assert!(
                                verified.is_ok(),
                                "{case}: verify refused what open recovers: {verified:?}"
                            );
                            recovered += 1;
                        }
                        Err(e) => {
                            assert!(
                                matches!(
                                    e,
                                    Error::Corrupt { .. }
                                        | Error::Io { .. }
                                        | Error::NotADataDirectory { .. }
                                        | Error::UnsupportedFormat { .. }
                                ),
                                "{case}: untyped refusal {e:?}"
                            );
                            assert_eq!(
                                snapshot(c.path()),
                                before,
                                "{case}: a refused open changed the directory ({e})"
                            );
                            assert!(
                                verified.is_err(),
                                "{case}: verify passed what open refuses ({e})"
                            );
                            refused += 1;
                        }
                    }
                }
            }
            println!(
                "{what}: {} files, {refused} faults refused, {recovered} recovered everything",
                files.len()
            );
            assert!(refused > 0 && recovered > 0, "{what}");
            total.0 += refused;
            total.1 += recovered;
        }
    }
    println!(
        "fault matrix: {} refused, {} recovered everything",
        total.0, total.1
    );
}

/// A database directory is identified: a non-empty directory that is not one, a file, an
/// empty directory when creating is not allowed, and another format version are refused by
/// name, and nothing is written into them.
#[test]
fn only_database_directories_are_opened() {
    let d = TempDir::new("notdb");
    std::fs::write(d.path().join("notes.txt"), b"mine").unwrap();
    let before = snapshot(d.path());
    for c in [
        Config::new().data_dir(d.path()),
        Config::new().data_dir(d.path()).create_if_missing(false),
    ] {
        match Database::open(c) {
            Err(Error::NotADataDirectory { message, .. }) => {
                assert!(message.contains("not empty"), "{message}")
            }
            other => panic!("opened a foreign directory: {:?}", other.err()),
        }
    }
    assert_eq!(snapshot(d.path()), before);
    assert!(!d.path().join("LOCK").exists());
    // A regular file.
    let f = d.path().join("notes.txt");
    assert!(matches!(
        Database::open(Config::new().data_dir(&f)),
        Err(Error::NotADataDirectory { message, .. }) if message.contains("file")
    ));
    // An empty directory, where creating is not allowed; and verify never creates.
    let e = TempDir::new("empty");
    assert!(matches!(
        Database::open(Config::new().data_dir(e.path()).create_if_missing(false)),
        Err(Error::NotADataDirectory { .. })
    ));
    assert!(matches!(
        Database::verify(Config::new().data_dir(e.path())),
        Err(Error::NotADataDirectory { .. })
    ));
    assert_eq!(std::fs::read_dir(e.path()).unwrap().count(), 0);
    // Creating is the default; the identity is there before anything else.
    drop(Database::open(Config::new().data_dir(e.path())).unwrap());
    assert!(e.path().join("IDENTITY").exists());
    // Another format version.
    let mut id = std::fs::read(e.path().join("IDENTITY")).unwrap();
    // The version is the payload's first word (after the 12-byte block header); fix the crc.
    id[12] = id[12].wrapping_add(1);
    let payload = id[12..].to_vec();
    let crc = crc32c_of(&(payload.len() as u32).to_le_bytes(), &payload);
    id[8..12].copy_from_slice(&crc.to_le_bytes());
    std::fs::write(e.path().join("IDENTITY"), &id).unwrap();
    match Database::open(Config::new().data_dir(e.path())) {
        Err(Error::UnsupportedFormat {
            found, supported, ..
        }) => assert_eq!(found, supported + 1),
        other => panic!("opened another format: {:?}", other.err()),
    }
}

/// crc32c (Castagnoli) of `a ++ b`, bit by bit (the test has no crc crate).
fn crc32c_of(a: &[u8], b: &[u8]) -> u32 {
    let mut c = !0u32;
    for &x in a.iter().chain(b) {
        c ^= u32::from(x);
        for _ in 0..8 {
            c = if c & 1 != 0 {
                (c >> 1) ^ 0x82F6_3B78
            } else {
                c >> 1
            };
        }
    }
    !c
}

/// A recovery that fails while writing its closing checkpoint changes nothing: the new
/// session's files are opened first, the old log is deleted only after the checkpoint is
/// current, and a half-written checkpoint is removed. (The failure is made by a regular file
/// where the checkpoint's temporary directory goes — permissions would not stop root.)
#[test]
fn a_recovery_that_fails_to_write_changes_nothing() {
    for m in [LogManagerKind::Epoch, LogManagerKind::Ermia] {
        let a = TempDir::new("ckfail");
        let expect = build(a.path(), m, LogPolicy::Logical, 0);
        let files = snapshot(a.path());
        // Where this directory's closing checkpoint goes (recovery is deterministic).
        let probe = TempDir::new("ckfail-probe");
        restore(probe.path(), &files);
        drop(Database::open(cfg(probe.path(), m, LogPolicy::Logical)).unwrap());
        let name = std::fs::read_dir(probe.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
            .find(|n| n.starts_with("checkpoint-") && !files.keys().any(|k| k.starts_with(n)))
            .expect("the probe wrote a new checkpoint");
        let c = TempDir::new("ckfail-case");
        restore(c.path(), &files);
        std::fs::write(c.path().join(format!("{name}.tmp")), b"in the way").unwrap();
        let before = snapshot(c.path());
        match Database::open(cfg(c.path(), m, LogPolicy::Logical)) {
            Err(Error::Io { .. }) => {}
            other => panic!("{m}: expected an I/O error, got {:?}", other.err()),
        }
        assert_eq!(
            snapshot(c.path()),
            before,
            "{m}: the failed recovery changed the directory"
        );
        std::fs::remove_file(c.path().join(format!("{name}.tmp"))).unwrap();
        let db = Database::open(cfg(c.path(), m, LogPolicy::Logical)).unwrap();
        assert_eq!(dump(&db), expect, "{m}");
    }
}

/// A run killed after it wrote a checkpoint but before it published it (or before it removed
/// the files that checkpoint replaces) leaves a checkpoint at the timestamp the next recovery
/// checkpoints at again. Found by the crash test of recovery: the next open failed with
/// "Directory not empty". Unpublished, it is replaced; published (named by `CURRENT`), it stays
/// until a new one under another name is current. Every reopen recovers every commit.
#[test]
fn a_checkpoint_left_at_the_same_timestamp_does_not_stop_recovery() {
    for m in [LogManagerKind::Epoch, LogManagerKind::Ermia] {
        let a = TempDir::new("ckleft");
        let expect = build(a.path(), m, LogPolicy::Logical, 0);
        let files = snapshot(a.path());
        let probe = TempDir::new("ckleft-probe");
        restore(probe.path(), &files);
        drop(Database::open(cfg(probe.path(), m, LogPolicy::Logical)).unwrap());
        let probed = snapshot(probe.path());
        let name = probed
            .keys()
            .filter_map(|k| k.iter().next())
            .map(|n| n.to_string_lossy().to_string())
            .find(|n| n.starts_with("checkpoint-") && !files.keys().any(|k| k.starts_with(n)))
            .expect("the probe wrote a new checkpoint");
        // Unpublished: the directory as before, plus the probe's finished checkpoint.
        let c = TempDir::new("ckleft-case");
        restore(c.path(), &files);
        for (rel, data) in probed.iter().filter(|(k, _)| k.starts_with(&name)) {
            let p = c.path().join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, data).unwrap();
        }
        let mut names = Vec::new();
        for round in 0..4 {
            let db = Database::open(cfg(c.path(), m, LogPolicy::Logical))
                .unwrap_or_else(|e| panic!("{m} round {round}: {e}"));
            assert_eq!(dump(&db), expect, "{m} round {round}");
            drop(db);
            let current = std::fs::read(c.path().join("CURRENT")).unwrap();
            names.push(String::from_utf8_lossy(&current[12 + 16..]).to_string());
        }
        // The first reopen replaced the unpublished one under its own name; when later
        // reopens checkpoint at the same timestamp, each takes a new name.
        assert_eq!(names[0], name, "{m}");
        for w in names.windows(2) {
            if w[1].starts_with(&name) {
                assert_ne!(w[0], w[1], "{m}: {names:?}");
            }
        }
        let left: Vec<String> = std::fs::read_dir(c.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
            .filter(|n| n.starts_with("checkpoint-"))
            .collect();
        assert_eq!(
            left,
            [names[3].clone()],
            "{m}: only the current checkpoint stays"
        );
        // Online checkpoints with no commit between them share a timestamp: the current one
        // stays until the next, under a new name, is current.
        let db = Database::open(cfg(c.path(), m, LogPolicy::Logical)).unwrap();
        let first = db.checkpoint().unwrap();
        let second = db.checkpoint().unwrap();
        assert_eq!(first.ts, second.ts, "{m}");
        assert_ne!(first.dir, second.dir, "{m}");
        assert!(!first.dir.exists() && second.dir.exists(), "{m}");
        drop(db);
        let db = Database::open(cfg(c.path(), m, LogPolicy::Logical)).unwrap();
        assert_eq!(
            dump(&db),
            expect,
            "{m} after two checkpoints at one timestamp"
        );
    }
}
