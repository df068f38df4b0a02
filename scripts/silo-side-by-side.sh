#!/usr/bin/env bash
# TPC-C against Silo (SOSP'13, github.com/stephentu/silo) on this machine, side by side:
# Silo's own `dbtest` and Myriad's `bench tpcc` (MVOCC, Serializable by default), in
# interleaved rounds, so that the host's drift (10-30 % between minutes here) falls on both
# alike. Prints each round's throughputs and ratio per configuration, then the median ratios.
#
# Usage: scripts/silo-side-by-side.sh SILO_DBTEST [MYRIAD_BINARY]
#   SILO_DBTEST: Silo's out-perf.masstree/benchmarks/dbtest (measured at cc11ca1, masstree
#     at 1150824e, built with `MODE=perf make dbtest`; g++ 12 needs -Werror dropped from the
#     Makefile and a declaration of the global `operator<<` for std::pair before
#     `namespace util` in util.h).
#   MYRIAD_BINARY: default target/release/myriad.
# Environment: ROUNDS (default 5), SECONDS_PER_RUN (default 10), CONFIGS (warehouses:threads
# pairs, default "2:2 1:1"), MYRIAD_FLAGS (extra `bench tpcc` options, default none: the
# documented defaults, `--prefault-mib auto` among them), SILO_MEMORY (Silo's --numa-memory,
# default 4G: its runner pre-faults the memory the run will use, as Myriad's auto does).
#
# Both run the standard mix with each worker a terminal of its own home warehouse (Silo's
# default, Myriad's with threads = warehouses; with 1 warehouse and 1 thread they agree),
# in memory with no log, counting commits per second of the measured interval, loading
# excluded. Differences that remain: Silo's New-Order has no 1 % rollback; Myriad warms up
# for 1 s before its measured interval, Silo measures from the start.
set -euo pipefail

silo=${1:?usage: scripts/silo-side-by-side.sh SILO_DBTEST [MYRIAD_BINARY]}
silo=$(cd "$(dirname "$silo")" && pwd)/$(basename "$silo")
root=$(cd "$(dirname "$0")/.." && pwd)
myriad=${2:-$root/target/release/myriad}
rounds=${ROUNDS:-5}
secs=${SECONDS_PER_RUN:-10}
configs=${CONFIGS:-2:2 1:1}
flags=${MYRIAD_FLAGS-}
mem=${SILO_MEMORY:-4G}

die() { echo "silo-side-by-side.sh: $*" >&2; exit 1; }
[ -x "$silo" ] || die "no Silo dbtest at $silo"
[ -x "$myriad" ] || die "no Myriad binary at $myriad (cargo build --release -p myriad-cli)"

# Silo writes jemalloc.stats into its working directory: run it in a scratch one.
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

silo_run() {
    local w=$1 t=$2 out
    out=$(cd "$scratch" && "$silo" --verbose --bench tpcc --num-threads "$t" --scale-factor "$w" \
        --runtime "$secs" --numa-memory "$mem" 2>&1) || die "Silo failed: $(echo "$out" | tail -5)"
    echo "$out" | awk '/^agg_throughput:/{print $2; exit}'
}

declare -A ratios
for r in $(seq 1 "$rounds"); do
    for c in $configs; do
        w=${c%%:*}
        t=${c##*:}
        s=$(silo_run "$w" "$t")
        # shellcheck disable=SC2086
        m=$("$myriad" bench tpcc $flags --warehouses "$w" --threads "$t" --duration "$secs" \
            --warmup 1 --seed 42 --no-progress | awk '/throughput/{gsub(",", "", $2); print $2; exit}')
        [ -n "$s" ] && [ -n "$m" ] || die "round $r, $c: no throughput (Silo '$s', Myriad '$m')"
        ratio=$(python3 -c "print(f'{$m / $s:.2f}')")
        ratios[$c]="${ratios[$c]:-} $ratio"
        echo "round $r, $w wh / $t threads: Silo $s txn/s, Myriad $m txn/s, ratio $ratio"
    done
done
for c in $configs; do
    # shellcheck disable=SC2086
    python3 -c "import statistics,sys; print('$c median ratio', statistics.median(map(float, sys.argv[1:])), sys.argv[1:])" ${ratios[$c]}
done
