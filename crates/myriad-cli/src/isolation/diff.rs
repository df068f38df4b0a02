//! A small unified line diff (longest common subsequence, 3 lines of context), enough to show
//! how a run differs from its expected file without another dependency.

use std::fmt::Write as _;

const CONTEXT: usize = 3;
/// Largest LCS table built (cells); beyond it the diff shows the first difference only.
const MAX_CELLS: usize = 50_000_000;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Op {
    Same,
    Del,
    Add,
}

/// The edit script from `a` to `b`: (op, index into a or b).
fn script(a: &[&str], b: &[&str]) -> Option<Vec<(Op, usize)>> {
    let (n, m) = (a.len(), b.len());
    if (n + 1).checked_mul(m + 1)? > MAX_CELLS {
        return None;
    }
    // lcs[i][j] = LCS length of a[i..] and b[j..].
    let w = m + 1;
    let mut lcs = vec![0u32; (n + 1) * w];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            lcs[i * w + j] = if a[i] == b[j] {
                lcs[(i + 1) * w + j + 1] + 1
            } else {
                lcs[(i + 1) * w + j].max(lcs[i * w + j + 1])
            };
        }
    }
    let (mut i, mut j) = (0, 0);
    let mut out = Vec::with_capacity(n + m);
    while i < n || j < m {
        if i < n && j < m && a[i] == b[j] {
            out.push((Op::Same, i));
            i += 1;
            j += 1;
        } else if i < n && (j == m || lcs[(i + 1) * w + j] >= lcs[i * w + j + 1]) {
            // Deletions before additions, as diff prints them.
            out.push((Op::Del, i));
            i += 1;
        } else {
            out.push((Op::Add, j));
            j += 1;
        }
    }
    Some(out)
}

/// A unified diff of `expected` against `actual`, or `None` if they are equal.
pub fn unified(
    expected: &str,
    actual: &str,
    expected_name: &str,
    actual_name: &str,
) -> Option<String> {
    if expected == actual {
        return None;
    }
    let a: Vec<&str> = expected.lines().collect();
    let b: Vec<&str> = actual.lines().collect();
    let mut out = format!("--- {expected_name}\n+++ {actual_name}\n");
    let Some(ops) = script(&a, &b) else {
        let first = a
            .iter()
            .zip(&b)
            .position(|(x, y)| x != y)
            .unwrap_or(a.len().min(b.len()));
        let _ = writeln!(
            out,
            "(too large for a line diff) first difference at line {}:\n-{}\n+{}",
            first + 1,
            a.get(first).unwrap_or(&""),
            b.get(first).unwrap_or(&"")
        );
        return Some(out);
    };
    if ops.iter().all(|&(o, _)| o == Op::Same) {
        // Same lines; only the final newline differs.
        out.push_str("\\ the files differ only in their final newline\n");
        return Some(out);
    }
    // Group changes into hunks with CONTEXT lines around them.
    let changed: Vec<usize> = (0..ops.len()).filter(|&k| ops[k].0 != Op::Same).collect();
    let mut k = 0;
    while k < changed.len() {
        let start = changed[k].saturating_sub(CONTEXT);
        let mut end = changed[k];
        while k < changed.len() && changed[k] <= end + 2 * CONTEXT {
            end = changed[k];
            k += 1;
        }
        let end = (end + CONTEXT + 1).min(ops.len());
        // Line numbers (1-based) where the hunk starts in each file.
        let (mut la, mut lb) = (0, 0);
        for &(o, _) in &ops[..start] {
            match o {
                Op::Same => {
                    la += 1;
                    lb += 1;
                }
                Op::Del => la += 1,
                Op::Add => lb += 1,
            }
        }
        let na = ops[start..end].iter().filter(|o| o.0 != Op::Add).count();
        let nb = ops[start..end].iter().filter(|o| o.0 != Op::Del).count();
        let _ = writeln!(out, "@@ -{},{na} +{},{nb} @@", la + 1, lb + 1);
        for &(o, x) in &ops[start..end] {
            let _ = match o {
                Op::Same => writeln!(out, " {}", a[x]),
                Op::Del => writeln!(out, "-{}", a[x]),
                Op::Add => writeln!(out, "+{}", b[x]),
            };
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::unified;

    #[test]
    fn equal_texts_have_no_diff() {
        assert_eq!(unified("a\nb\n", "a\nb\n", "e", "a"), None);
    }

    #[test]
    fn a_changed_line_shows_with_context() {
        let e = "1\n2\n3\n4\n5\n6\n7\n8\n9\n";
        let a = "1\n2\n3\n4\nfive\n6\n7\n8\n9\n";
        assert_eq!(
            unified(e, a, "exp", "act").unwrap(),
            "--- exp\n+++ act\n@@ -2,7 +2,7 @@\n 2\n 3\n 4\n-5\n+five\n 6\n 7\n 8\n"
        );
    }

    #[test]
    fn distant_changes_make_separate_hunks_and_additions_count() {
        let e: String = (1..=20).map(|i| format!("{i}\n")).collect();
        let a = e
            .replacen("\n2\n", "\n2\nnew\n", 1)
            .replacen("\n18\n", "\n", 1);
        let d = unified(&e, &a, "e", "a").unwrap();
        assert_eq!(d.matches("@@ -").count(), 2, "{d}");
        assert!(d.contains("@@ -1,5 +1,6 @@\n 1\n 2\n+new\n 3\n"), "{d}");
        assert!(d.contains("-18\n"), "{d}");
    }

    #[test]
    fn a_missing_final_newline_is_a_difference() {
        assert!(unified("a\n", "a", "e", "a")
            .unwrap()
            .contains("final newline"));
    }
}
