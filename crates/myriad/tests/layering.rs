//! The engine's layering (ARCHITECTURE.md, "Layers"): each module of `crates/myriad/src` may
//! import only modules of its own layer or of lower layers. The test reads the sources, finds
//! every `crate::<module>` path outside comments and test code, and fails on an import from a
//! lower layer up to a higher one, naming the file and line. Modules of one layer may import
//! each other only where listed in `SAME_LAYER` (none may form a circle).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Lowest first. A module is a top-level file or directory of `src/`, except that
/// `txn::table` (the transaction table every protocol and GC reads) and `txn::state` (what
/// every protocol sees of a transaction, `TxnCtx`) count as modules of their own.
const LAYERS: &[&[&str]] = &[
    &["error", "ids"],
    &["background"],
    &["value", "schema", "timestamp"],
    &["index", "version"],
    &["txn::table"],
    &["config"],
    &["storage"],
    &["log", "gc", "history"],
    &["shared"],
    &["txn::state"],
    &["cc"],
    &["txn"],
    &["query"],
    &["procedure"],
    &["engine"],
    &["sql"],
    &["recovery"],
];

/// Imports allowed between modules of one layer (importer, imported).
const SAME_LAYER: &[(&str, &str)] = &[("value", "schema"), ("schema", "value")];

/// Upward imports not yet removed (issue 31), each (importer, imported). The test fails if one
/// of these is gone (remove it from the list) or a new one appears.
const NOT_YET: &[(&str, &str)] = &[];

fn module_of(rel: &str) -> String {
    let rel = rel.trim_end_matches(".rs");
    if rel == "txn/table" || rel == "txn/state" {
        return rel.replace('/', "::");
    }
    rel.split('/').next().unwrap_or(rel).to_string()
}

fn target_of(path: &str) -> Option<String> {
    // `path` follows `crate::`.
    let mut parts = path.split("::");
    let first = parts.next()?;
    if first == "txn" {
        if let Some(sub @ ("table" | "state")) = parts.next() {
            return Some(format!("txn::{sub}"));
        }
    }
    Some(first.to_string())
}

/// The crate-root re-exports of `lib.rs` (`pub use module::{A, B};`): name → module.
fn root_names(lib: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for stmt in lib.split(';') {
        let Some(rest) = stmt.trim().strip_prefix("pub use ") else {
            continue;
        };
        let module = rest.split("::").next().unwrap_or("").trim().to_string();
        let names = rest
            .split_once('{')
            .map_or(rest.rsplit("::").next().unwrap_or(""), |(_, n)| n)
            .trim_end_matches('}');
        for n in names.split(',') {
            let n = n.trim();
            if !n.is_empty() {
                out.insert(n.to_string(), module.clone());
            }
        }
    }
    out
}

/// The modules one line imports through `crate::`: `crate::a::b`, `crate::Name` (a root
/// re-export) and `crate::{A, b::C}`.
fn targets(code: &str, roots: &BTreeMap<String, String>) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = code;
    while let Some(i) = rest.find("crate::") {
        rest = &rest[i + "crate::".len()..];
        let paths: Vec<String> = if let Some(group) = rest.strip_prefix('{') {
            let end = group.find('}').unwrap_or(group.len());
            group[..end]
                .split(',')
                .map(|p| p.trim().to_string())
                .collect()
        } else {
            vec![rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
                .collect()]
        };
        for p in paths {
            let first = p.split("::").next().unwrap_or("");
            if first.chars().next().is_some_and(|c| c.is_uppercase()) {
                if let Some(m) = roots.get(first) {
                    out.push(m.clone());
                }
            } else if let Some(t) = target_of(&p) {
                out.push(t);
            }
        }
    }
    out
}

fn rank(m: &str) -> Option<usize> {
    LAYERS.iter().position(|l| l.contains(&m))
}

/// The code of a file without comments and without its `#[cfg(test)]` items.
fn code_lines(src: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut skip_depth: Option<i64> = None;
    let mut depth = 0i64;
    let mut pending_test = false;
    for (i, line) in src.lines().enumerate() {
        let code = line.split("//").next().unwrap_or("");
        let t = code.trim();
        if t.starts_with("#[cfg(test)]") {
            pending_test = true;
            continue;
        }
        let opens = code.matches('{').count() as i64;
        let closes = code.matches('}').count() as i64;
        if pending_test && skip_depth.is_none() && !t.is_empty() {
            pending_test = false;
            if t.ends_with(';') {
                continue; // `#[cfg(test)] mod tests;` — its file is skipped by name
            }
            skip_depth = Some(depth);
        }
        depth += opens - closes;
        if let Some(d) = skip_depth {
            if depth <= d && (opens > 0 || closes > 0) {
                skip_depth = None;
            }
            continue;
        }
        out.push((i + 1, code.to_string()));
    }
    out
}

fn walk(dir: &Path, root: &Path, out: &mut Vec<(String, String)>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            walk(&p, root, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            let rel = p
                .strip_prefix(root)
                .unwrap()
                .to_string_lossy()
                .replace('\\', "/");
            if rel.ends_with("tests.rs") || rel == "lib.rs" {
                continue;
            }
            out.push((rel, std::fs::read_to_string(&p).unwrap()));
        }
    }
}

#[test]
fn no_module_imports_a_higher_layer() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    walk(&root, &root, &mut files);
    let roots = root_names(&std::fs::read_to_string(root.join("lib.rs")).unwrap());
    assert!(roots.len() > 20, "read {} crate-root names", roots.len());
    assert!(files.len() > 40, "read {} source files", files.len());
    let mut up: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
    let mut edges: BTreeSet<(String, String)> = BTreeSet::new();
    for (rel, src) in &files {
        let from = module_of(rel);
        let Some(rf) = rank(&from) else {
            panic!("{rel}: module `{from}` is in no layer of LAYERS");
        };
        // What `super::` names in this file, when that is a module of the crate.
        let parent = rel.rsplit_once('/').map(|(d, f)| (d.to_string(), f));
        let sup = match &parent {
            Some((d, f)) if *f != "mod.rs" => Some(module_of(d)),
            _ => None,
        };
        for (n, code) in code_lines(src) {
            if let Some(sup) = &sup {
                if code.contains("super::") && *sup != from {
                    let rt = rank(sup).unwrap_or(0);
                    if rt > rf {
                        up.entry((from.clone(), sup.clone()))
                            .or_default()
                            .push(format!("{rel}:{n}"));
                    }
                }
            }
            for to in targets(&code, &roots) {
                if to == from {
                    continue;
                }
                let Some(rt) = rank(&to) else { continue };
                edges.insert((from.clone(), to.clone()));
                let same_ok = rt == rf && SAME_LAYER.contains(&(from.as_str(), to.as_str()));
                if rt > rf || (rt == rf && !same_ok) {
                    up.entry((from.clone(), to.clone()))
                        .or_default()
                        .push(format!("{rel}:{n}"));
                }
            }
        }
    }
    let mut report = String::new();
    for ((a, b), at) in &up {
        if !NOT_YET.contains(&(a.as_str(), b.as_str())) {
            report.push_str(&format!("{a} -> {b}: {}\n", at.join(", ")));
        }
    }
    for (a, b) in NOT_YET {
        if !up.contains_key(&(a.to_string(), b.to_string())) {
            report.push_str(&format!("{a} -> {b} is gone: remove it from NOT_YET\n"));
        }
    }
    assert!(report.is_empty(), "imports against the layering:\n{report}");
    assert!(edges.len() > 20, "found only {} import edges", edges.len());
}
