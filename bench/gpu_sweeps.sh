#!/usr/bin/env bash
# One device call: chosen points of several families' search spaces timed beside their starters (bench_families
# --sweep), one family after another, within a wall-clock budget. Output: $OUT/sweeps.txt.
#   SWEEPS=bench/sweeps.json BUDGET=300 bash bench/gpu_sweeps.sh
set -u
. bench/device_env.sh || exit 1
budget=${BUDGET:-300}
# COMPILE=1: torch.compile timed beside the starter too (each family compiles for tens of seconds)
nocomp=--no-compile; [ -n "${COMPILE:-}" ] && nocomp=
python3 - "${SWEEPS:-bench/sweeps.json}" > /tmp/sweep_args.txt <<'PY'
import json, sys
for fam, points in json.load(open(sys.argv[1])).items():
    print(fam, json.dumps(points, separators=(",", ":")))
PY
while read -r fam points; do
  left=$(( budget - SECONDS )); [ "$left" -lt 15 ] && { echo "budget spent before $fam" >> "$OUT/sweeps.txt"; break; }
  timeout "$left" python3 bench/bench_families.py "$fam" $nocomp --iters 10 --warmup 3 --sweep "$points" 2>&1 \
    | grep -v -i warning | tail -n +3 >> "$OUT/sweeps.txt"
done < /tmp/sweep_args.txt
