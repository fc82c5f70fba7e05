"""One kernel on both clocks, in one process: the bench table's (`bench_families.time_ms`: one input set, the
kernel alone) and the harness's (`timing.time_interleaved`: input sets rotated, interleaved call by call with
eager). For the gap between a search's `h.roof` and the table's `roof` (cross_entropy 87 % vs 79 %, layernorm
85 % vs 82 % on the H200, 2026-12-03): if both clocks agree here, the gap is the search picking the fastest of
many noisy measurements, not the clocks. Needs a CUDA GPU.

    python3 bench/clock_compare.py cross_entropy layernorm            # each family's starter
    python3 bench/clock_compare.py softmax --params '{"variant": "coop"}' --reps 3
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_families as bf  # noqa: E402

from kernelsearch.families import load_family  # noqa: E402
from kernelsearch.judge.timing import time_interleaved  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("families", nargs="+")
    ap.add_argument("--params", default=None, help="JSON: a point of the search space instead of the starter")
    ap.add_argument("--reps", type=int, default=2, help="times each clock is read, alternating")
    ap.add_argument("--iters", type=int, default=20)
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("clock_compare: needs a CUDA GPU", file=sys.stderr)
        return 2
    workdir = Path(tempfile.mkdtemp(prefix="clock_compare_"))
    print(f"{'family':22s} {'clock':9s} {'ours ms':>9s} {'eager ms':>9s} {'roof':>6s}")
    for name in args.families:
        problem = load_family(name)
        space = problem.family.SPACE
        params = {**space.default, **(json.loads(args.params) if args.params else {})}
        case = problem.timed_case
        ref, cand, inputs = bf.build(problem, case, space.render(params), workdir, name)
        sets = [inputs] + [problem.build_inputs(case, 1234 + i, "cuda") for i in (1, 2)]
        ideal, _ = bf.ideal_ms(problem, case)
        with torch.no_grad():
            for rep in range(args.reps):
                table = (bf.time_ms(lambda: cand(*inputs), args.iters, 5),
                         bf.time_ms(lambda: ref(*inputs), args.iters, 5))
                t = time_interleaved({"ours": lambda i: cand(*i), "eager": lambda i: ref(*i)}, sets,
                                     device="cuda", iters=args.iters, max_batches=1)
                harness = (t["ours"].median, t["eager"].median)
                for clock, (ours, eager) in (("table", table), ("harness", harness)):
                    print(f"{name:22s} {clock + str(rep):9s} {ours:9.4f} {eager:9.4f} {100 * ideal / ours:5.0f}%",
                          flush=True)
        del ref, cand, inputs, sets
        torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
