#!/usr/bin/env bash
# One device call: the harness on the H200 (eval of the starter, twice), then a short offline search.
set -u
. bench/device_env.sh || exit 1
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv
python3 -c "import kernelsearch.families.softmax as s; open('/tmp/starter.py','w').write(s.STARTER)"
for i in 1 2; do python3 -m kernelsearch eval softmax /tmp/starter.py --json --device cuda | tail -1 | tee $OUT/eval$i.json | cut -c1-600; done
timeout 420 python3 -m kernelsearch run configs/gpu-softmax.yaml --name gpu1 2>&1 | tail -40
python3 -m kernelsearch tree gpu1 --db runs/gpu.db 2>&1 | tail -60
cp runs/gpu.db $OUT/ 2>/dev/null
