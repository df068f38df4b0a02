#!/usr/bin/env bash
# TPC-C against ERMIA (SIGMOD'16, github.com/sfu-dis/ermia) on this machine, side by side:
# ERMIA's own SSI executable and Myriad's `ermia-ssi`, in interleaved rounds, so that the
# host's drift (10-30 % between minutes here) falls on both alike. Prints each round's
# throughput and ratio, then the median ratio.
#
# Usage: scripts/ermia-side-by-side.sh ERMIA_SOURCE_DIR [MYRIAD_BINARY]
#   ERMIA_SOURCE_DIR: a checkout of sfu-dis/ermia (measured at 9d255ad). It is built out of
#     source into ERMIA_SOURCE_DIR/../ermia-build (target ermia_SSI, or ermia_SI with
#     ERMIA_CC=SI) unless the executable is already there. Build needs (Debian): clang cmake
#     make libnuma-dev libibverbs-dev libgoogle-glog-dev libgflags-dev, and a `python2` on
#     PATH (cmake runs ERMIA's dbcore/burt-hash.py with it).
#   MYRIAD_BINARY: default target/release/myriad.
# Environment: ROUNDS (default 5), SECONDS_PER_RUN (default 10), ERMIA_CC (SSI or SI; Myriad
# then runs ermia-ssi or ermia-si), MYRIAD_PROTOCOL (Myriad's protocol instead, e.g. mvocc;
# MYRIAD_FLAGS then defaults to none), MYRIAD_FLAGS (extra `bench tpcc` options; default
# `--ermia-old-age 1000` under SSI, the experiment ermia-tpcc's optimised series).
#
# Both run TPC-C at 2 warehouses on 2 worker threads, each worker a terminal of its own home
# warehouse, 1 % remote New-Order lines, the standard mix, in memory: ERMIA with
# `-null_log_device` (it still builds its log records; the flush goes to /dev/null) and its
# memory pre-allocated in huge pages (`-node_memory_gb 4`; the script reserves 2 MB huge
# pages as root), Myriad with `--prefault-mib auto`. Differences that remain: ERMIA's
# New-Order has no 1 % rollback and an aborted transaction is dropped, not retried; both
# count commits per second of the measured interval, loading excluded.
set -euo pipefail

src=${1:?usage: scripts/ermia-side-by-side.sh ERMIA_SOURCE_DIR [MYRIAD_BINARY]}
src=$(cd "$src" && pwd)
root=$(cd "$(dirname "$0")/.." && pwd)
myriad=${2:-$root/target/release/myriad}
rounds=${ROUNDS:-5}
secs=${SECONDS_PER_RUN:-10}
cc=${ERMIA_CC:-SSI}
case $cc in
SSI) protocol=ermia-ssi; flags=${MYRIAD_FLAGS---ermia-old-age 1000} ;;
SI) protocol=ermia-si; flags=${MYRIAD_FLAGS-} ;;
*) echo "ERMIA_CC must be SSI or SI, not $cc" >&2; exit 2 ;;
esac
if [ -n "${MYRIAD_PROTOCOL:-}" ]; then
    protocol=$MYRIAD_PROTOCOL
    flags=${MYRIAD_FLAGS-}
fi

die() { echo "ermia-side-by-side.sh: $*" >&2; exit 1; }
[ -x "$myriad" ] || die "no Myriad binary at $myriad (cargo build --release -p myriad-cli)"
build=$(dirname "$src")/ermia-build
exe=$build/ermia_$cc
if [ ! -x "$exe" ]; then
    command -v python2 >/dev/null || die "cmake needs python2 on PATH to generate ERMIA's burt-hash.cpp"
    mkdir -p "$build"
    (cd "$build" && CC=clang CXX=clang++ cmake "$src" -DCMAKE_BUILD_TYPE=Release >/dev/null &&
        make -j"$(nproc)" "ermia_$cc" >/dev/null) || die "ERMIA build failed in $build"
fi

node_gb=4
need=$((node_gb * 512 + 64))
if [ "$(cat /proc/sys/vm/nr_hugepages)" -lt "$need" ]; then
    echo "$need" >/proc/sys/vm/nr_hugepages || die "cannot reserve $need huge pages (root needed)"
fi

ermia_run() {
    local log=/dev/shm/ermia-log out
    rm -rf "$log" && mkdir -p "$log"
    out=$(cd "$build" && "$exe" -benchmark tpcc -threads 2 -scale_factor 2 -seconds "$secs" \
        -node_memory_gb "$node_gb" -null_log_device -tmpfs_dir=/dev/shm -log_data_dir "$log" \
        -log_buffer_mb=128 -log_segment_mb=16384 -parallel_loading \
        -benchmark_options "--workload-mix=45,43,0,4,4,4,0,0 --warehouse-spread=0 --new-order-remote-item-pct=1" 2>&1) ||
        die "ERMIA failed: $(echo "$out" | tail -5)"
    rm -rf "$log"
    # ERMIA's result line: "<tps> commits/s, <aborts> total_aborts/s, ...".
    echo "$out" | awk '/ commits\/s, /{print $1; exit}'
}

ratios=()
for r in $(seq 1 "$rounds"); do
    e=$(ermia_run)
    m=$("$myriad" bench tpcc --protocol "$protocol" $flags --warehouses 2 --threads 2 \
        --duration "$secs" --warmup 1 --seed 42 --no-progress | awk '/throughput/{gsub(",", "", $2); print $2}')
    [ -n "$e" ] && [ -n "$m" ] || die "round $r: no throughput (ERMIA '$e', Myriad '$m')"
    ratio=$(python3 -c "print(f'{$m / $e:.2f}')")
    ratios+=("$ratio")
    echo "round $r: ERMIA $cc $e txn/s, Myriad $protocol $m txn/s, ratio $ratio"
done
python3 -c "import statistics,sys; print('median ratio', statistics.median(map(float, sys.argv[1:])))" "${ratios[@]}"
