"""Where the judge's own time goes in one evaluation (issue 30: the long shared holds that cap throughput).

The judge runs in this process, as the pool's worker runs it (the memory fraction set first, which creates the CUDA
context), with its runners as plain subprocesses and no lease; each evaluation is profiled with cProfile and its
`stage_s` printed. The first evaluation of the process pays what a fresh worker pays; a second one of the same problem
shows what is per process and what is per evaluation.

    python3 bench/profile_judge_gpu.py [--problems softmax,rmsnorm,softmax] [--top 30]
"""
from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--problems", default="softmax,rmsnorm,softmax")
    ap.add_argument("--top", type=int, default=30)
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    args = ap.parse_args()
    import torch

    from kernelsearch.judge.harness import evaluate
    from kernelsearch.judge.problem import load_problem
    from kernelsearch.judge.settings import EvalSettings

    torch.set_num_threads(1)
    if args.device == "cuda":
        t0 = time.perf_counter()
        torch.cuda.set_per_process_memory_fraction(0.95, 0)
        print(f"CUDA context (set_per_process_memory_fraction): {time.perf_counter() - t0:.2f} s", flush=True)
    out_dir = os.environ.get("OUT")
    for i, name in enumerate(args.problems.split(",")):
        problem = load_problem(name)
        source = (ROOT / "families" / name / "starter.py").read_text()
        prof = cProfile.Profile()
        t0 = time.perf_counter()
        prof.enable()
        result = evaluate(problem, source, EvalSettings(timeout_s=150), mode=args.device)
        prof.disable()
        wall = time.perf_counter() - t0
        st = (result.detail or {}).get("stage_s") or {}
        print(f"\n=== [{i}] {name}: {result.status.value} {result.time_ms} ms, wall {wall:.2f} s", flush=True)
        print("stage_s: " + " ".join(f"{k}={v:.2f}" for k, v in st.items()), flush=True)
        for sort, only in (("cumulative", ""), ("tottime", ""),
                           ("cumulative", "harness|conversation|memory|correctness|numerics|wire|client|clock")):
            buf = io.StringIO()
            ps = pstats.Stats(prof, stream=buf).strip_dirs().sort_stats(sort)
            ps.print_stats(*([only] if only else []), args.top)
            text = buf.getvalue()
            body = text[text.find("ncalls"):] if "ncalls" in text else text
            print(f"--- by {sort} {only}\n" + "\n".join(ln[:200] for ln in body.splitlines() if ln.strip()), flush=True)
        if out_dir:
            prof.dump_stats(os.path.join(out_dir, f"judge_{i}_{name}.prof"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
