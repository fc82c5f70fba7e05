"""Where a runner's `graph` step goes (issue 30: `timing_prep_graph`, 0.39 s of the H100's 1.54 s timing stage for a
softmax evaluation, 1.0 s for a KernelBench matmul's three sides). In a fresh process as a runner has one: the starter
on n slots of the family's timed case, then each piece of runner.op_graph timed on its own: the warm-up loop over the
slots, the capture (torch.cuda.graph's entry: a synchronize and empty_cache; a gc.collect only with torch's
force_cudagraph_gc, off by default), its end (instantiation), the poisoned replay of `_escaped_capture`, and a plain
replay. `--cached K`: K blocks of 64 MiB allocated and freed first, as a runner's correctness stage leaves them in its
cache, for the capture's empty_cache to hand back.

H100, 2026-12-08, a fresh process (softmax 16 slots; rmsnorm 128): the warm-up loop 4-9 ms, a full gc.collect 79-97 ms
(178k objects; 0 after gc.freeze; torch.cuda.graph does not run one by default), empty_cache 1 ms, the capture and
instantiation 4-26 ms, the poisoned replay and its check 9-66 ms: 20-100 ms a side, against `timing_prep_graph` 0.39 s
for two sides in the harness (its runners after their correctness stage): the rest not found yet.

    . bench/device_env.sh && python3 bench/graph_capture_gpu.py [--family softmax] [--n 16] [--cached 0]
"""
from __future__ import annotations

import argparse
import gc
import importlib.util
import sys
import time
from pathlib import Path

import torch

import kernelsearch.judge.runner  # noqa: F401  (what a runner has imported)
from kernelsearch.judge.problem import load_problem

ROOT = Path(__file__).resolve().parents[1]


def lap(what: str, t0: float) -> float:
    now = time.perf_counter()
    print(f"  {what:44s} {(now - t0) * 1e3:9.1f} ms", flush=True)
    return now


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--family", default="softmax")
    ap.add_argument("--n", type=int, default=16)
    ap.add_argument("--cached", type=int, default=0)
    args = ap.parse_args()
    problem = load_problem(args.family)
    case = problem.timed_case
    spec = importlib.util.spec_from_file_location("ks_cand", ROOT / "families" / args.family / "starter.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    model = mod.ModelNew(*problem.build_init_inputs(case)).cuda()
    slots = [problem.build_inputs(case, k, "cuda") for k in range(args.n)]
    with torch.no_grad():
        model(*slots[0])
    torch.cuda.synchronize()
    blocks = [torch.empty(64 << 20, dtype=torch.uint8, device="cuda") for _ in range(args.cached)]
    del blocks   # freed into this process's cache
    print(f"{args.family}, {args.n} slots; gc objects {len(gc.get_objects())}; cached "
          f"{(torch.cuda.memory_reserved() - torch.cuda.memory_allocated()) / 2**20:.0f} MiB", flush=True)
    for rep in range(2):
        print(f"capture {rep}:", flush=True)
        t = time.perf_counter()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side), torch.no_grad():
            for x in slots:
                model(*x)
        torch.cuda.current_stream().wait_stream(side)
        torch.cuda.synchronize()
        t = lap("warm-up loop over the slots", t)
        gc.collect()
        t = lap("a full gc.collect (not in the capture)", t)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g), torch.no_grad():
            outs = [model(*x) for x in slots]
        torch.cuda.synchronize()
        t = lap("torch.cuda.graph: entry, capture, instantiate", t)
        for o in outs:
            o.fill_(float("nan"))
        g.replay()
        torch.cuda.synchronize()
        ok = all(not bool(o.isnan().all()) for o in outs)
        t = lap(f"poisoned replay and its check ({ok})", t)
        g.replay()
        torch.cuda.synchronize()
        lap("a replay", t)
        gc.freeze()
        t = time.perf_counter()
        gc.collect()
        lap("gc.collect after gc.freeze", t)
        gc.unfreeze()
    sys.stdout.flush()


if __name__ == "__main__":
    main()
