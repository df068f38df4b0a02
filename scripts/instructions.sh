#!/usr/bin/env bash
# Instructions per committed transaction, counted by valgrind's callgrind: a figure that does
# not move with this machine's host noise (throughput does, by 10-30 %).
#
# What is counted: callgrind runs the release `myriad bench` with collection switched on only
# inside the benchmark's `worker_loop` (`--toggle-collect`; it is `#[inline(never)]` for
# this), so the load, the bench driver and the report are left out and the total Ir is the
# instructions the worker spent generating and running transactions (retries and aborts
# included). A binary built before worker_loop was kept out of line has no such symbol:
# the script then fails rather than report nothing. That total is divided by every commit
# the worker made: the JSON report's `committed` plus `warmup_committed`. (Workers start in
# the warm-up even with `--warmup 0`, until the main thread starts the measured interval;
# valgrind runs one thread at a time, so the worker can run for a long slice before that,
# and dividing by the measured commits alone gave outliers of up to 7x.) A report without
# `warmup_committed` (an older binary) is divided by `committed` alone, with a warning.
# One worker thread, so there is no lock waiting in the figure. Run to run it moves by a
# few per cent (the mix and the data are seeded; timing decides where the run stops).
#
# A fixed amount of work: the worker stops after TXNS transactions (`--stop-after`, default
# 20000 for tpcc, 100000 for ycsb; committed or rolled back by the procedure, warm-up
# included), so two binaries run the same seeded transactions on the same data and their
# figures compare to a fraction of a per cent. DURATION (seconds, default 600) is only the
# upper bound. TXNS=0 falls back to a timed run of DURATION seconds (a binary without
# `--stop-after`); such runs grow the database by different amounts and move by a few per
# cent.
#
# Per transaction type too (a table after the total): each type's instructions over its
# commits, and the share of the worker's total it holds.
#
# Usage: scripts/instructions.sh [tpcc|ycsb] [BINARY] [-- extra bench options]
#   tpcc (default): `bench tpcc --warehouses 1 --threads 1` (full mix, Serializable).
#   ycsb: `bench ycsb --as-procedure --rows 100000 --threads 1` (the procedure path).
# BINARY defaults to target/release/myriad (built with `cargo build --release -p myriad-cli`
# if absent). Exits non-zero when valgrind is missing, the bench fails, or the report has
# no commits.
set -euo pipefail

workload=${1:-tpcc}
[ $# -gt 0 ] && shift
bin=${1:-}
[ $# -gt 0 ] && [ "${1:-}" != "--" ] && shift
[ "${1:-}" = "--" ] && shift
case "$workload" in
    ycsb) txns=${TXNS:-100000} ;;
    *) txns=${TXNS:-20000} ;;
esac
if [ "$txns" -gt 0 ]; then
    duration=${DURATION:-600}
    limit=(--stop-after "$txns")
else
    duration=${DURATION:-5}
    limit=()
fi

die() { echo "instructions.sh: $*" >&2; exit 1; }

command -v valgrind >/dev/null || die "valgrind is not installed (apt-get install valgrind)"
command -v python3 >/dev/null || die "python3 is needed to read the JSON report"
root=$(cd "$(dirname "$0")/.." && pwd)
if [ -z "$bin" ]; then
    bin="$root/target/release/myriad"
    [ -x "$bin" ] || (cd "$root" && cargo build --release -p myriad-cli) || die "release build failed"
fi
[ -x "$bin" ] || die "no executable at $bin"

case "$workload" in
    tpcc) args=(bench tpcc --warehouses 1 --threads 1) ;;
    ycsb) args=(bench ycsb --as-procedure --rows 100000 --threads 1) ;;
    *) die "unknown workload '$workload' (tpcc or ycsb)" ;;
esac

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if ! valgrind --tool=callgrind \
        --toggle-collect='*bench::worker_loop*' \
        --callgrind-out-file="$tmp/cg.out" \
        "$bin" "${args[@]}" --duration "$duration" --warmup 0 --seed 42 --no-progress \
        --json "$tmp/report.json" "${limit[@]}" "$@" >"$tmp/bench.log" 2>&1; then
    cat "$tmp/bench.log" >&2
    die "the benchmark failed under valgrind"
fi
ir=$(grep -h '^totals:' "$tmp"/cg.out* | awk '{s += $2} END {printf "%.0f\n", s}')
committed=$(python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
if "warmup_committed" not in r:
    print("warning: no warmup_committed in the report (older binary): dividing by the measured commits alone", file=sys.stderr)
print(r["committed"] + r.get("warmup_committed", 0))' "$tmp/report.json") \
    || die "no committed count in the JSON report"
[ "${ir:-0}" -gt 0 ] || die "callgrind counted no instructions inside worker_loop (inlined, or renamed?)"
[ "$committed" -gt 0 ] || die "the run committed nothing"
echo "$workload: $ir instructions / $committed committed = $((ir / committed)) instructions per committed transaction ($bin)"

# Per transaction type: the bench runs each attempt of type N inside `txn_type_N` (never
# inlined; `bench::attempt_as`), so callgrind's inclusive cost of that function is the
# instructions that type's attempts spent, retries and rollbacks included; it is divided by
# that type's commits over the whole run (`all_committed_by_type`, warm-up included). What
# no type holds is the driver's share: generating each transaction's input, the loop.
# A binary built before the split (no such functions) prints the total only.
for f in "$tmp"/cg.out*; do
    callgrind_annotate --inclusive=yes --auto=no --threshold=100 "$f" 2>/dev/null
done > "$tmp/inclusive.txt" || true
python3 - "$tmp/inclusive.txt" "$tmp/report.json" "$ir" <<'PY'
import json, re, sys
inclusive, report, total = sys.argv[1], sys.argv[2], int(sys.argv[3])
cost = {}
for line in open(inclusive):
    m = re.match(r"\s*([\d,]+) .*::attempt_as::txn_type_(\d+|more) ", line)
    if m:
        cost[m.group(2)] = cost.get(m.group(2), 0) + int(m.group(1).replace(",", ""))
types = json.load(open(report)).get("all_committed_by_type", [])
if not cost or not types:
    sys.exit(0)
print(f"  {'type':<16} {'commits':>9} {'instructions/commit':>20} {'share':>7}")
held = 0
for i, (name, n) in enumerate(types):
    ir = cost.get(str(i), 0)
    held += ir
    if n or ir:
        per = f"{ir // n:,}" if n else "-"
        print(f"  {name:<16} {n:>9} {per:>20} {100 * ir / total:>6.1f}%")
if len(types) > 8 and "more" in cost:
    held += cost["more"]
    print(f"  (types past the eighth) {cost['more']:,} instructions")
print(f"  {'driver':<16} {'':>9} {'':>20} {100 * (total - held) / total:>6.1f}%")
PY
