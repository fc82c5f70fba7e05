#!/usr/bin/env bash
# One device call for issues 18 and 19: the judge's clock against in-process CUDA events (judge_gpu), the harness's
# throughput and repeatability from a fresh machine (bench_harness), then every level-1 KernelBench problem evaluated
# once at its own size (kernelbench_load_gpu; the files carried in kb/). Each step has its own time limit.
#   bash bench/gpu_judge_call.sh      (through the device tool, with .whl and kb carried)
set -u
. bench/device_env.sh || exit 1
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,memory.used --format=csv,noheader
T0=$(date +%s)
timeout "${JUDGE_S:-110}" python3 bench/judge_gpu.py softmax rmsnorm --repeat 2 2>&1 | grep -v Warning | cut -c1-300 | tail -25
echo "[judge_gpu done at $(( $(date +%s) - T0 )) s]"
timeout "${HARNESS_S:-170}" python3 bench/bench_harness.py --per-family 8 --concurrency "${CONC:-8}" \
  --deadline "$(( ${HARNESS_S:-170} - 10 ))" 2>&1 | grep -v Warning | cut -c1-300 | tail -30
echo "[bench_harness done at $(( $(date +%s) - T0 )) s]"
if [ -d kb/level1 ] && [ "${LOAD_S:-280}" -gt 0 ]; then
  timeout "${LOAD_S:-280}" python3 bench/kernelbench_load_gpu.py kb/level1 --concurrency "${CONC:-8}" \
    --deadline "$(( ${LOAD_S:-280} - 10 ))" 2>&1 | grep -v Warning | cut -c1-240 | sed -n '/^problem /,$p'
fi
echo "[all done at $(( $(date +%s) - T0 )) s]"
