//! Stamps the binary with the git commit (`-dirty` when tracked files differ from HEAD) and
//! the cargo profile, for the fidelity block of every benchmark report.

use std::path::Path;
use std::process::Command;

fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn main() {
    let manifest = std::env::var("CARGO_MANIFEST_DIR").unwrap_or_else(|_| ".".into());
    let dir = Path::new(&manifest);
    let commit = match git(dir, &["rev-parse", "--short", "HEAD"]) {
        Some(c) if !c.is_empty() => {
            let dirty = git(dir, &["status", "--porcelain", "--untracked-files=no"])
                .is_some_and(|s| !s.is_empty());
            format!("{c}{}", if dirty { "-dirty" } else { "" })
        }
        _ => "unknown".to_string(),
    };
    println!("cargo:rustc-env=MYRIAD_GIT_COMMIT={commit}");
    let profile = std::env::var("PROFILE").unwrap_or_else(|_| "unknown".into());
    println!("cargo:rustc-env=MYRIAD_BUILD_PROFILE={profile}");

    // Rerun when HEAD moves, the index changes, or any source of the workspace changes (the
    // dirty flag). Only existing paths are named: a missing one would rerun on every build.
    let mut watch = vec![
        dir.join("src"),
        dir.join("../myriad/src"),
        dir.join("Cargo.toml"),
    ];
    if let Some(git_dir) = git(dir, &["rev-parse", "--absolute-git-dir"]) {
        let g = Path::new(&git_dir);
        watch.extend([
            g.join("HEAD"),
            g.join("index"),
            g.join("refs"),
            g.join("packed-refs"),
        ]);
    }
    for p in watch.iter().filter(|p| p.exists()) {
        println!("cargo:rerun-if-changed={}", p.display());
    }
}
