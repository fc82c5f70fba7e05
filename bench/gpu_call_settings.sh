#!/usr/bin/env bash
# One device call that runs the harness bench under several settings, one after another on the same warm device
# (issue 30: the judge's priming and the early drain, each against the old way). SETTINGS is a list of env
# assignments separated by ';' (an empty entry: the defaults; KS_BENCH_CONCURRENCY=16 in one: that many evaluations at
# once, 8 otherwise); each run's full output is kept under $OUT.
#   . bench/device_env.sh; SETTINGS=";KS_CLOCK_HOLD_MB=0" bash bench/gpu_call_settings.sh
set -u
SETS=()   # split on ';', keeping empty entries (read -a drops a trailing one: "A;" ran A only)
rest="${SETTINGS:-;KS_CLOCK_HOLD_MB=0};"
while [[ $rest == *";"* ]]; do SETS+=("${rest%%;*}"); rest="${rest#*;}"; done
i=0
for s in "${SETS[@]}"; do
  echo "=== [$i] settings: ${s:-defaults}"
  # where the host's CPU goes while the evaluations run (in_warm grew from 2.3 s alone to 13 s at concurrency 8 on
  # 16 cores: compiles, or processes spinning in a CUDA synchronize?): the busiest processes every 5 s
  (while sleep 5; do date +%T; top -b -c -n 1 -o %CPU -w 200 | sed -n '1,3p;7,22p'; done) > "$OUT/top_$i.txt" 2>&1 &
  sampler=$!
  env KS_BENCH_CONCURRENCY=8 ${s:-KS_DEFAULTS=1} timeout "${HARNESS_S:-170}" python3 bench/bench_harness.py --per-family "${PER_FAMILY:-8}" \
    --deadline "$(( ${HARNESS_S:-170} - 10 ))" --save "$OUT/harness_$i.jsonl" > "$OUT/harness_$i.txt" 2>&1
  kill "$sampler" 2>/dev/null
  python3 bench/top_summary.py "$OUT/top_$i.txt" 2>&1 | tail -12
  grep -E "evaluations in|once warm|mean s per evaluation|warm-up:|lease waits by step|pool.s part|judge.s start|built once|GPU held|one timing stage|repeat spread|cudagraph|WATCHDOG| clock: " "$OUT/harness_$i.txt" \
    | cut -c1-900
  i=$((i + 1))
done
true
