#!/usr/bin/env bash
# Issue 34's throughput goals, every case once per round (this host's noise allows only
# same-round ratios): TPC-C 1 warehouse under healing, occ, silo, 2pl, hybrid; Smallbank
# (100 accounts, theta 0.9) under healing, occ, silo; TPC-C 2 warehouses --remote-pct 0
# under healing and occ (the overhead goal); TPC-C 1 warehouse --no-inserts under healing
# and OCC- (occ --unsafe-no-validation). Prints "rROUND CASE PROTOCOL TXN/S" lines.
# Even rounds run each case's protocols in reverse order: the first run of a group was
# measured the slowest in some rounds, which would otherwise always fall on healing.
#
# Usage: [ROUNDS=3] scripts/healing-goals.sh [BINARY]   (default target/release/myriad)
set -euo pipefail
bin=${1:-target/release/myriad}
rounds=${ROUNDS:-3}
run() {
    "$bin" bench "$@" --threads 2 --duration 5 --warmup 1 --seed 42 --no-progress 2>&1 |
        awk '/^  throughput/ { gsub(",", "", $2); print $2 }'
}
# The words of $2.. in order, or reversed when round $1 is even.
order() {
    local r=$1
    shift
    if [ $((r % 2)) -eq 0 ]; then
        local out=()
        for ((i = $#; i >= 1; i--)); do out+=("${!i}"); done
        echo "${out[@]}"
    else
        echo "$@"
    fi
}
for r in $(seq 1 "$rounds"); do
    for p in $(order "$r" healing occ silo 2pl hybrid); do
        echo "r$r tpcc1 $p $(run tpcc --warehouses 1 --protocol "$p")"
    done
    for p in $(order "$r" healing occ silo); do
        echo "r$r smallbank $p $(run smallbank --accounts 100 --theta 0.9 --protocol "$p")"
    done
    for p in $(order "$r" healing occ); do
        echo "r$r tpcc2 $p $(run tpcc --warehouses 2 --remote-pct 0 --protocol "$p")"
    done
    for p in $(order "$r" healing occ-minus); do
        case $p in
        healing) echo "r$r no-inserts healing $(run tpcc --warehouses 1 --no-inserts --protocol healing)" ;;
        *) echo "r$r no-inserts occ-minus $(run tpcc --warehouses 1 --no-inserts --protocol occ --unsafe-no-validation)" ;;
        esac
    done
done
