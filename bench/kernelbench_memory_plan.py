"""The judge's memory plan (judge/memory.py) for KernelBench problems at their own sizes, on the CPU: nothing is
drawn (inputs, weights and outputs on the meta device), so a whole level is planned in seconds. What it prints per
problem: input, weight and output bytes, the reference the plan chooses, the comparison's chunk, whether the
stability checks would fit, the calls per timed batch, and the variance check's input bytes (drawn in the parent on
the CPU by `run`'s check_problem), against a device of --gib GiB (an H200: 139).

    python3 bench/kernelbench_memory_plan.py kb/level1 kb/level2 --gib 139

The device's free memory is modelled, not measured: during correctness the judge's inputs and weights, and the
candidate's runner's inputs, outputs and weights, are in use; during timing the three processes' weights. A GPU run
(bench/kernelbench_offline_gpu.py) is what shows the plan holds.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

GIB = 2**30


def _bytes(values) -> int:
    return sum(t.numel() * t.element_size() for t in values if isinstance(t, torch.Tensor))


def plan_file(path: Path, total: int) -> dict:
    from kernelsearch.judge.clock import BATCH_BYTES, MIN_CALLS
    from kernelsearch.judge.correctness import flatten
    from kernelsearch.judge.memory import plan_case, refuse_line, timing_calls
    from kernelsearch.judge.problem import load_file, probe_inputs

    row: dict = {"problem": path.stem}
    try:
        problem = load_file(path)
    except Exception as err:   # noqa: BLE001 - a line per problem
        return {**row, "error": f"load: {type(err).__name__}: {str(err)[:120]}"}
    case = problem.timed_case
    row["own_only"] = [c.name for c in problem.cases] == ["own-only"]
    inputs = probe_inputs(problem.module, path.stem)
    if not all(not isinstance(v, torch.Tensor) or v.is_meta for v in inputs):
        row["note"] = "get_inputs() does not run on the meta device: drawn for real"
    try:
        torch.manual_seed(0)
        with torch.device("meta"):
            model = problem.module.Model(*problem.build_init_inputs(case))
        weights = list(model.parameters()) + list(model.buffers())
        with torch.no_grad():
            outs = [t for t in flatten(model(*[v.to("meta") if isinstance(v, torch.Tensor) else v
                                                for v in inputs])) if isinstance(t, torch.Tensor)]
        row["out_estimated"] = False
    except Exception:   # noqa: BLE001 - as the judge does: the inputs stand in for the outputs
        weights, outs = [], [t for t in inputs if isinstance(t, torch.Tensor)]
        row["out_estimated"] = True
    i_b, o_b, w_b = _bytes(inputs), _bytes(outs), _bytes(weights)
    free = total - (2 * i_b + o_b + 2 * w_b) - GIB   # judge: inputs, weights; candidate: inputs, output, weights
    plan = plan_case(case.describe(), inputs, outs, weights, max(free, 0), "model")
    n, note = timing_calls(i_b, o_b, 2, total - 3 * w_b - GIB, 50, BATCH_BYTES, MIN_CALLS)
    cpu_case = problem.cpu_timed_case()
    try:
        from kernelsearch.judge.problem import _sized_module

        module = problem.module if cpu_case.timed else _sized_module(problem, cpu_case.params)
        with torch.device("meta"):
            variance_b = _bytes(module.get_inputs())
    except Exception:   # noqa: BLE001
        variance_b = None
    row.update(in_gb=i_b / 1e9, out_gb=o_b / 1e9, w_gb=w_b / 1e9, reference=plan.reference, chunk=plan.chunk,
               stability=plan.stability, calls=n, timing_note=note,
               refused=refuse_line(case.describe(), i_b, o_b, max(free, 0)),
               variance_gb=None if variance_b is None else variance_b / 1e9)
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("paths", nargs="+", type=Path)
    ap.add_argument("--gib", type=float, default=139.0, help="the device's memory (H200: 139, H100: 79)")
    args = ap.parse_args()
    total = int(args.gib * GIB)
    rows = []
    for folder in args.paths:
        files = sorted(folder.glob("*.py"), key=lambda p: (int(p.name.split("_")[0]) if p.name[0].isdigit() else 0))
        for f in files:
            r = plan_file(f, total)
            rows.append(r)
            if "error" in r:
                print(f"{r['problem'][:44]:44s} {r['error']}")
                continue
            print(f"{r['problem'][:44]:44s} in {r['in_gb']:7.2f} GB out {r['out_gb']:7.2f} w {r['w_gb']:6.2f}"
                  f"{'~' if r['out_estimated'] else ' '} {r['reference']:8s} chunk {r['chunk']:>9,d} "
                  f"stab {'y' if r['stability'] else 'n'} calls {r['calls']:>2d}"
                  f"{' own-only' if r['own_only'] else ''}"
                  f"{' variance %.2f GB' % r['variance_gb'] if (r['variance_gb'] or 0) > 0.1 else ''}"
                  f"{' REFUSED: ' + r['refused'] if r['refused'] else ''}")
    ok = [r for r in rows if "error" not in r]
    print(f"\n{len(rows)} problems, {len(rows) - len(ok)} not loaded; device {args.gib:g} GiB")
    for ref in ("float64", "float32", "native"):
        print(f"  {ref} reference: {sum(r['reference'] == ref for r in ok)}")
    print(f"  refused (outputs cannot be held twice): {sum(bool(r['refused']) for r in ok)}")
    print(f"  one call a timed batch: {sum(r['calls'] == 1 for r in ok)}")
    print(f"  outputs estimated (no meta run): {sum(r['out_estimated'] for r in ok)}")
    print(f"  own-only (no smaller case): {sum(r['own_only'] for r in ok)}")
    big = [r for r in ok if (r['variance_gb'] or 0) > 1]
    print(f"  variance check drawing over 1 GB in the parent: {len(big)} "
          f"{', '.join(r['problem'] for r in big[:10])}")


if __name__ == "__main__":
    sys.exit(main())
