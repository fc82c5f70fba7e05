#!/usr/bin/env bash
# One device call for issue 30's spread: each starter (softmax, rmsnorm) evaluated REPEATS times alone under each of
# VARIANTS (env assignments separated by ';', an empty entry: the defaults), every result saved for
# bench/clock_replay.py; then, TESTS=1, the GPU tests of the clock's graph path. Each part writes under $OUT as it goes.
#   . bench/device_env.sh; VARIANTS=";KS_CLOCK_BATCHES=6:12" bash bench/gpu_call_spread.sh
set -u
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,memory.used --format=csv,noheader | tee "$OUT/smi.txt"
if [ "${TESTS:-1}" = 1 ]; then
  timeout "${TESTS_S:-150}" python3 -m pytest -q -x -p no:cacheprovider tests/judge/test_legacy_stream_gpu.py \
    2>&1 | tee "$OUT/gpu_tests.txt" | tail -6
fi
SETS=()
rest="${VARIANTS-;KS_CLOCK_BATCHES=6:12};"
while [[ $rest == *";"* ]]; do SETS+=("${rest%%;*}"); rest="${rest#*;}"; done
i=0
for s in "${SETS[@]}"; do
  echo "=== [$i] ${s:-defaults}" | tee -a "$OUT/spread.txt"
  env ${s:-KS_DEFAULTS=1} timeout "${VARIANT_S:-130}" python3 bench/bench_harness.py --per-family 1 --concurrency 2 \
    --repeats "${REPEATS:-5}" --deadline "$(( ${VARIANT_S:-130} - 5 ))" --save "$OUT/spread_$i.jsonl" \
    > "$OUT/spread_$i.txt" 2>&1
  grep -E "repeat spread|do_bench median|evaluation [0-9]+ clock|FAIL|WATCHDOG" "$OUT/spread_$i.txt" | cut -c1-330 \
    | tee -a "$OUT/spread.txt"
  python3 bench/clock_replay.py "$OUT/spread_$i.jsonl" 2>&1 | tee -a "$OUT/spread.txt" | grep -E "^\w|reported|events|side batch|pings batch" | head -20
  i=$((i + 1))
done
true
