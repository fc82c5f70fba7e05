"""Calibrate a family's feasibility model (its space's `limits`, families/space.py) against sm_90 compiles, on a
machine without a GPU: every point given is rendered, run once per shape case with launches recorded and compiled
for the H200 (judge/aot.py), and the verdict compared with the model's.

    python3 bench/feasibility.py rmsnorm --sample 24 --seed 0 [--cases wide-fp16,timed] [--jsonl out.jsonl]
    python3 bench/feasibility.py cross_entropy --points '[{"variant": "online", "BLOCK": 32768, "num_stages": 4}]'
    python3 bench/feasibility.py softmax --at rows=131072,cols=512,dtype=bfloat16 --cases model

`family` may also be a KernelBench-format problem file: the offline matcher's space for it (generators/match.py, the
family's limits at the problem's shape), its own and derived cases, the matched starter among the points:

    python3 bench/feasibility.py tests/fixtures/problems/offline/bmm.py --cases own --points '[{"BM": 64}]'

`--at` takes the family at a model's shape (its correctness cases and the `model` case) and adds the starter a
search there seeds with (the space's `default_for`) to the points, beside the tuned default.

Compiled infeasible: the launcher raised before any launch (its own refusal), a kernel failed to compile or is out
of resources (shared memory past 227 KB, registers x threads past 64K), or a kernel spills (ptxas -v). The table
at the end counts, per (point, case): both feasible, both infeasible, refused by the model but compiled clean
(a false refusal: a kernel the search will not try) and accepted by the model but infeasible compiled (a miss:
an evaluation that will fail). Input building for the largest cases takes seconds each on a CPU.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time

os.environ.pop("TRITON_INTERPRET", None)   # compiled for sm_90, not interpreted

from kernelsearch.families import load_family, load_problem  # noqa: E402
from kernelsearch.judge.aot import aot_report_inprocess  # noqa: E402


def compiled_verdict(report: dict) -> tuple[bool, str]:
    """(feasible, what the compile said) for one aot report."""
    if report["status"] == "error":
        err = str(report.get("error", "")).splitlines()[0][:120]
        return False, f"launcher: {err}"
    if report["status"] == "compile_error":
        return False, str(report.get("error", "")).splitlines()[0][:120]
    spills = [(k["name"], k.get("spills_bytes")) for k in report["kernels"] if k.get("spills_bytes")]
    worst = max((k.get("registers") or 0 for k in report["kernels"]), default=0)
    smem = max((k.get("shared_bytes") or 0 for k in report["kernels"]), default=0)
    if spills:
        return False, f"spills {spills[0][1]} B ({spills[0][0]}), {worst} regs, smem {smem} B"
    return True, f"{worst} regs, smem {smem} B"


def sample_points(space, n: int, seed: int) -> list[dict]:
    """`n` points: each one tuning knob or variant moved off the default, at random (feasible or not)."""
    rng = random.Random(seed)
    out, seen = [], set()
    knobs = ["variant", *space.tuning]
    while len(out) < n and len(seen) < 50 * n:
        p = dict(space.default)
        for k in rng.sample(knobs, k=min(len(knobs), rng.randint(1, 3))):
            p[k] = rng.choice(space.params[k])
        key = space.body(p)
        if key in seen:
            continue
        seen.add(key)
        out.append(p)
    return out


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("family")
    ap.add_argument("--points", help="JSON list of parameter changes over the default")
    ap.add_argument("--sample", type=int, default=0, help="this many random points besides --points")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cases", help="comma-separated case names (default: every case)")
    ap.add_argument("--jsonl", help="append one JSON line per (point, case) here")
    ap.add_argument("--at", help="the family at a model's shape, 'rows=131072,cols=512,dtype=bfloat16'; adds the "
                                 "starter there (default_for) and the default to the points")
    args = ap.parse_args(argv)

    if args.family.endswith(".py"):   # a problem file: the space the offline matcher gives it
        from kernelsearch.generators.match import match_problem
        problem = load_problem(args.family)
        space = match_problem(problem).space
    else:
        problem = load_problem(f"{args.family}@{args.at}") if args.at else load_family(args.family)
        space = problem.family.SPACE
    points = [{**space.default, **c} for c in json.loads(args.points or "[]")]
    points += sample_points(space, args.sample, args.seed)
    if args.at:
        points += [dict(space.default), space.default_for(problem.timed_case, problem.cases)]
    if not points:
        points = [dict(space.default)]
    cases = [c for c in problem.cases if not args.cases or c.name in args.cases.split(",")]
    counts = {"both feasible": 0, "both infeasible": 0, "false refusal": 0, "miss": 0}
    rows = []
    for p in points:
        source = space.render(p)
        change = {k: v for k, v in p.items() if v != space.default.get(k)}
        for case in cases:
            t0 = time.monotonic()
            model = space.limits(p, case)
            ok, said = compiled_verdict(aot_report_inprocess(source, problem, case))
            kind = ("both feasible" if ok else "miss") if model is None else ("false refusal" if ok else
                                                                               "both infeasible")
            counts[kind] += 1
            row = {"point": change, "case": case.name, "model": model, "compiled_ok": ok, "compiled": said,
                   "kind": kind, "s": round(time.monotonic() - t0, 1)}
            rows.append(row)
            print(f"{json.dumps(change):60s} {case.name:14s} {kind:16s} {said}", flush=True)
            if args.jsonl:
                with open(args.jsonl, "a") as f:
                    f.write(json.dumps(row) + "\n")
    print(f"\n{args.family}: {len(points)} points x {len(cases)} cases, sm_90 compiles against the model")
    print(f"{'':18s}{'model feasible':>16s}{'model refuses':>16s}")
    print(f"{'compiled ok':18s}{counts['both feasible']:>16d}{counts['false refusal']:>16d}")
    print(f"{'compiled fails':18s}{counts['miss']:>16d}{counts['both infeasible']:>16d}")
    for r in rows:
        if r["kind"] in ("miss", "false refusal"):
            print(f"  {r['kind']}: {json.dumps(r['point'])} at {r['case']}: {r['compiled']}"
                  + (f" (model: {r['model'][:100]})" if r["model"] else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
