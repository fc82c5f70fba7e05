#!/usr/bin/env bash
# One device call for issue 30 (the clock): rmsnorm's starter evaluated N times alone (the spread and each
# evaluation's plan), then the harness bench (throughput, the repeat pair, do_bench), then, time left, the CUDA GPU
# tests. Each step writes under $OUT as it goes, so a cut-off call keeps what finished.
#   . bench/device_env.sh; bash bench/gpu_call_clock.sh
set -u
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,clocks.mem,power.draw,temperature.gpu,memory.used --format=csv,noheader | tee "$OUT/smi.txt"
timeout "${SPREAD_S:-150}" python3 bench/clock_spread_gpu.py --n "${SPREAD_N:-4}" --problem rmsnorm \
  --candidate families/rmsnorm/starter.py ${SPREAD_SETTINGS:+--settings "$SPREAD_SETTINGS"} 2>&1 | cut -c1-600
timeout "${HARNESS_S:-260}" python3 bench/bench_harness.py --per-family "${PER_FAMILY:-8}" --concurrency 8 \
  --deadline "$(( ${HARNESS_S:-260} - 20 ))" 2>&1 | tee "$OUT/harness.txt" | cut -c1-400 | tail -80
if [ "${TESTS:-1}" = 1 ]; then
  timeout "${TESTS_S:-120}" python3 -m pytest -q -x -p no:cacheprovider tests/families/test_cuda_families.py \
    tests/judge/test_legacy_stream_gpu.py tests/judge/test_cuda_build.py 2>&1 | tee "$OUT/cuda_tests.txt" | tail -15
fi
nvidia-smi --query-gpu=clocks.sm,power.draw,temperature.gpu --format=csv,noheader
true
