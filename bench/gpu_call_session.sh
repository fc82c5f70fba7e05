#!/usr/bin/env bash
# One device call: the clock's GPU tests (TESTS=1), then three parts that each write under $OUT as they go (a cut-off call keeps what finished):
#  1. the harness bench under SETTINGS (default: the defaults, then a shared hold a trial, KS_CLOCK_HOLD_MB=0),
#     HARNESS_S seconds each, every result saved as JSON lines (bench/clock_replay.py reads them);
#  2. a KernelBench batch (carry kb/) for KB_S seconds: its evaluations and re-timings a minute, and out-of-memory
#     harness errors (the memory gate's timing reserve);
#  3. the strategies experiment (branching against sequential from the plain kernels) for STRAT_MIN minutes.
#   . bench/device_env.sh; bash bench/gpu_call_session.sh
set -u
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,memory.used --format=csv,noheader | tee "$OUT/smi.txt"
if [ "${TESTS:-1}" = 1 ]; then   # the GPU tests of the clock's graph path and its output check, first (seconds)
  timeout "${TESTS_S:-200}" python3 -m pytest -q -p no:cacheprovider -rs tests/judge/test_frozen_replay.py \
    tests/judge/test_agree_kernel.py tests/judge/test_legacy_stream_gpu.py tests/judge/test_slots_gpu.py 2>&1 | tee "$OUT/gpu_tests.txt" | tail -8
  timeout 120 python3 bench/check_kernel_gpu.py 2>&1 | tee "$OUT/check_kernel.txt" | tail -6
fi
if [ "${HARNESS_S:-100}" -gt 20 ]; then   # HARNESS_S=0: no harness run
  SETTINGS="${SETTINGS-;KS_CLOCK_HOLD_MB=0}" PER_FAMILY="${PER_FAMILY:-8}" HARNESS_S="${HARNESS_S:-100}" \
    bash bench/gpu_call_settings.sh
fi
if [ "${KB_S:-190}" -gt 30 ] && [ -d kb/level1 ]; then
  echo "=== KernelBench ${KB_S:-190} s"
  timeout "${KB_S:-190}" python3 bench/kernelbench_offline_gpu.py kb/level1 kb/level2 --n1 10 --n2 5 --evaluations 4 \
    --jobs 4 --concurrency 4 --deadline "$(( ${KB_S:-190} - 30 ))" --db "$OUT/kb_rate.db" > "$OUT/kb.txt" 2>&1
  python3 - "$OUT/kb_rate.db" <<'PY' | tee "$OUT/kb_counts.txt"
import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
rows = c.execute("select coalesce(purpose, 'verdict'), status, count(*), round(sum(wall_s), 1) from evaluation "
                 "group by 1, 2").fetchall()
print("kb evaluations (purpose, status, n, wall s):", rows)
span = c.execute("select (julianday(max(created_at)) - julianday(min(created_at))) * 1440 from evaluation").fetchone()
print("kb minutes from the first stored evaluation to the last:", span)
print("kb harness errors:", c.execute("select reason from evaluation where status = 'harness_error'").fetchall()[:6])
PY
fi
if [ "${STRAT_MIN:-3}" != 0 ]; then
  echo "=== strategies ${STRAT_MIN:-3} min"
  timeout "$(( ${STRAT_MIN:-3} * 60 + 60 ))" python3 bench/strategies_gpu.py --families softmax,rmsnorm \
    --strategies branching,sequential --budgets "${STRAT_BUDGETS:-8}" --repeats 3 --minutes "${STRAT_MIN:-3}" \
    --sec-per-eval 5 --db "$OUT/strategies.db" 2>&1 | tee "$OUT/strategies.txt" | tail -30
fi
true
