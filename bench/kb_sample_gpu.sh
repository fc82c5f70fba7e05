#!/usr/bin/env bash
# Issue 33 on one GPU: `kernelsearch bench` with the offline provider over a fixed, untuned sample of KernelBench,
# every fifth level-1 file (1, 6, ..., 96: 20 problems, six convolutions among them) and every tenth level-2 file
# (1, 11, ..., 91: 10 problems), KernelBench's files carried under kb/level1 and kb/level2 (never committed).
# fast_p is over every problem of each sample, refused ones included. Each call runs until STOP_S (default 540 s)
# and stops the batch; the same call again resumes where it stopped (finished problems are not searched again), so
# call it until both tables print. The store, the tables and the batch reports come back under $OUT.
#   LEVELS="1 2" JOBS=4 STOP_S=540 bash bench/kb_sample_gpu.sh
set -u
. bench/device_env.sh || exit 1
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
DB=runs/kb33.db
START=$(date +%s)
for L in ${LEVELS:-1 2}; do
  if [ "$L" = 1 ]; then NUMS=$(seq -s, 1 5 96); else NUMS=$(seq -s, 1 10 91); fi
  LEFT=$(( ${STOP_S:-540} - ($(date +%s) - START) ))
  if [ "$LEFT" -le 30 ]; then echo "level $L: no time left; call again to go on"; continue; fi
  timeout -s INT "$LEFT" python3 -m kernelsearch bench "kb/level$L" --problems "$NUMS" \
    --config configs/kernelbench-offline.yaml --db "$DB" --name "kb33-l$L" --jobs "${JOBS:-4}" 2>&1 \
    | grep -v "^\s*$" | tail -60
  python3 -m kernelsearch report "kb33-l$L" --db "$DB" -o "$OUT/kb33-l$L.html" 2>&1 | tail -2
done
python3 -m kernelsearch runs --db "$DB" 2>&1 | grep "^batch "
cp "$DB" "$OUT/" 2>/dev/null
