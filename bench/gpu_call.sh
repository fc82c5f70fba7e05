#!/usr/bin/env bash
# One device call for issues 4 and 6: the harness bench (throughput, repeatability, do_bench), then offline
# searches of the families named in $FAMILIES with the best kernel of each timed against eager/compile/Liger.
#   FAMILIES="rmsnorm softmax" HARNESS=1 bash bench/gpu_call.sh
set -u
. bench/device_env.sh || exit 1
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,memory.used --format=csv,noheader
FORK=on
if [ "${HARNESS:-1}" = 1 ]; then
  timeout "${HARNESS_S:-180}" python3 bench/bench_harness.py --per-family "${PER_FAMILY:-8}" --concurrency 6 \
    --deadline "$(( ${HARNESS_S:-180} - 10 ))" 2>&1 | tee "$OUT/harness.txt" | cut -c1-330
  # the fork server has never run on a GPU before this: if nothing came back ok with it, search without it
  grep -q "statuses {.*'ok'" "$OUT/harness.txt" || { FORK=off; echo "no ok evaluation with the fork server: off"; }
fi
if [ -n "${FAMILIES:-}" ]; then
  timeout "${SEARCH_S:-400}" python3 bench/bench_search.py $FAMILIES --evals "${EVALS:-64}" --wall "${WALL:-45}" \
    --fork-server "$FORK" --json "$OUT/search.json" --log "$OUT/search.log" --db "$OUT/search.db" 2>&1 | cut -c1-400
fi
ls ~/.cache/kernelsearch/ 2>/dev/null && cp ~/.cache/kernelsearch/ceilings.json "$OUT/" 2>/dev/null
true
