"""How a family's kernels compile for the H200 (sm_90), without a GPU: registers, spills, shared memory and the
width of every global load and store, for the starter and chosen points of the search space.

    python3 bench/ptx_ops.py rotary_embedding '[{"variant": "permuted"}, {"variant": "rows"}]'

A `ld.global.b16` where a `ld.global.v4.b32` was meant is a load that did not vectorise (8x the instructions
for the same bytes): the first thing to look at when a memory-bound kernel trails torch.compile.
"""
from __future__ import annotations

import json
import os
import sys

os.environ.pop("TRITON_INTERPRET", None)

from kernelsearch.families import load_family  # noqa: E402
from kernelsearch.judge.aot import aot_report  # noqa: E402


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    problem = load_family(argv[0])
    space = problem.family.SPACE
    changes = [{}] + (json.loads(argv[1]) if len(argv) > 1 else [])
    for change in changes:
        params = {**space.default, **change}
        report = aot_report(space.render(params), problem, in_process=True)
        print(f"{json.dumps(change) if change else '(starter)'}: {report['status']}")
        if report["status"] != "ok":
            print("  " + str(report.get("error", ""))[:300])
        for k in report["kernels"]:
            ops = ", ".join(f"{op} x{n}" for op, n in k.get("memory_ops", {}).items())
            print(f"  {k['name']}: {k['num_warps']} warps, {k.get('registers')} regs, spills "
                  f"{k.get('spills_bytes')} B, smem {k.get('shared_bytes')} B; {ops}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
