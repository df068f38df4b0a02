#!/usr/bin/env bash
# Issue 39's "without LLTs" goal: YCSB update-intensive theta 0.9 at 2 threads under
# n2o + txn GC (the baseline), n2o + dead-zone and siro + dead-zone, the runs of a round back
# to back, then the median over rounds of each one's ratio to the baseline of its own round
# (this host switches between two speeds; only same-round ratios over many rounds hold still).
# Extra "BINARY:STORAGE:GC" arguments add cases (another build, say).
#
# Usage: [ROUNDS=20] [DURATION=2] scripts/vdriver-no-llt.sh [BINARY [BINARY:STORAGE:GC ...]]
set -euo pipefail
bin=${1:-target/release/myriad}
shift || true
rounds=${ROUNDS:-20}
cases=("$bin:n2o:txn" "$bin:n2o:dead-zone" "$bin:siro:dead-zone" "$@")
out=$(mktemp)
json=$(mktemp)
trap 'rm -f "$out" "$json"' EXIT
for r in $(seq 1 "$rounds"); do
    line="r$r"
    for c in "${cases[@]}"; do
        IFS=: read -r b storage gc <<<"$c"
        "$b" bench ycsb --mix update-intensive --theta 0.9 --storage "$storage" --gc "$gc" \
            --threads 2 --duration "${DURATION:-2}" --warmup 1 --seed 42 --no-progress \
            --json "$json" >/dev/null
        tps=$(python3 -c "import json,sys; print(int(json.load(open(sys.argv[1]))['throughput_tps']))" "$json")
        line="$line $c=$tps"
    done
    echo "$line" | tee -a "$out"
done
python3 - "$out" <<'PY'
import statistics, sys
rows = [[int(x.rsplit("=", 1)[1]) for x in l.split()[1:]] for l in open(sys.argv[1])]
names = [x.rsplit("=", 1)[0] for x in open(sys.argv[1]).readline().split()[1:]]
for i in range(1, len(names)):
    r = [row[i] / row[0] for row in rows]
    q = statistics.quantiles(r, n=4) if len(r) > 1 else [r[0]] * 3
    print(f"{names[i]} / {names[0]}: median {statistics.median(r):.3f} "
          f"(quartiles {q[0]:.2f}, {q[2]:.2f}; {len(r)} rounds)")
PY
