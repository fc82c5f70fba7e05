"""A whole model run on one GPU: the LLaMA-style example at realistic sizes through profile, extract, plan, search
and verify (issue 20), with the wall time of the whole pipeline.

    . bench/device_env.sh && python3 bench/model_gpu.py                      # hidden 4096, 4 layers, 8 x 512, bf16
    python3 bench/model_gpu.py --evals 30 --wall 240 --max-problems 3 --db /tmp/model.db

It is `kernelsearch run` on a model config (configs/model-llama.yaml's keys, offline provider, the search budget
small enough to finish within 9 minutes on one H200), in this process; the pipeline prints the profile table, the
plan, each child run and the verify step as it goes. At the end: a short table of the plan's problems (share,
possible speedup, best kernel found, predicted and measured model speedup) and the model's times (eager, with the
kernels, torch.compile), read back from the store. `--size tiny --device cpu` runs the same on a CPU (interpreter;
its timings are not GPU timings).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", default="gpu", choices=["gpu", "tiny"], help="the model's sizes (llama_style.py)")
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu", "auto"])
    ap.add_argument("--evals", type=int, default=30, help="evaluations for the whole model run, split by the plan")
    ap.add_argument("--wall", type=float, default=240.0, help="search wall time in seconds, split by the plan")
    ap.add_argument("--max-problems", type=int, default=3)
    ap.add_argument("--min-gain", type=float, default=0.005)
    ap.add_argument("--iters", type=int, default=20, help="timed forwards per variant in verify")
    ap.add_argument("--db", default=None, help="store (default: a fresh file under /tmp)")
    ap.add_argument("--name", default=None)
    args = ap.parse_args(argv)

    os.environ["KERNELSEARCH_MODEL_SIZE"] = args.size
    from rich.console import Console

    from kernelsearch.config import parse_config
    from kernelsearch.model.pipeline import start_model_run
    from kernelsearch.store import open_store, session_scope
    from kernelsearch.store.model_queries import model_run_of, run_named

    name = args.name or f"llama-{args.size}-{int(time.time())}"
    db = Path(args.db or f"/tmp/kernelsearch-model-{name}.db")
    cfg = parse_config({
        "model": str(ROOT / "configs" / "models" / "llama_style.py"),
        "device": args.device,
        "llm": {"provider": "offline"},
        "search": {"rounds": 3, "ideas_per_round": 2, "branches_per_idea": 2, "seeds_per_round": 2,
                   "concurrency": 4},
        "budgets": {"evaluations": args.evals, "wall_time_s": args.wall},
        "evaluation": {"timeout_s": 120, "trials": 1, "timing_iters": 20},
        "plan": {"min_share": 0.01, "min_gain": args.min_gain, "max_problems": args.max_problems},
        "verify": {"iters": args.iters, "compile": "on" if args.device != "cpu" else "off"},
    }, source="bench/model_gpu.py")
    t0 = time.monotonic()
    start_model_run(cfg, db, name, Console(highlight=False, width=160))
    wall = time.monotonic() - t0

    engine = open_store(db, readonly=True)
    with session_scope(engine) as s:
        mr = model_run_of(s, run_named(s, name).id)
        plan, verify = json.loads(mr.plan_json), json.loads(mr.verify_json)
    by_key = {r["key"]: r for r in verify.get("problems", [])}
    print()
    print(f"== summary: model run {name} in {db} ({args.size}, {args.device}) ==")
    print(f"{'problem':<34} {'share':>6} {'s poss':>7} {'found':>7} {'model pred':>10} {'model meas':>10}  status")
    for e in plan["entries"]:
        if not e["selected"]:
            continue
        r = by_key.get(e["key"], {})
        found = f"{r['problem_speedup']:.3g}x" if r.get("problem_speedup") else "-"
        pred = f"{r['predicted']:.3f}x" if r.get("predicted") else "-"
        meas = f"{r['measured']:.3f}x" if r.get("measured") else "-"
        print(f"{e['key'][:34]:<34} {e['share']:>6.1%} {e['speedup']:>6.2f}x {found:>7} {pred:>10} {meas:>10}  "
              f"{r.get('status', 'not swapped in')}")
    if "error" in verify:
        print(f"verify failed: {verify['error']}")
    else:
        line = f"eager {verify['eager_ms']:.3f} ms"
        if "kernels_ms" in verify:
            line += (f" | with kernels {verify['kernels_ms']:.3f} ms = {verify['speedup']:.3f}x over eager "
                     f"(predicted {verify['predicted']:.3f}x, off by "
                     f"{abs(verify['predicted'] - verify['speedup']) / verify['speedup']:.1%})")
        if "compile_ms" in verify:
            line += f" | torch.compile {verify['compile_ms']:.3f} ms"
            if "kernels_ms" in verify:
                line += f" (kernels vs compile {verify['compile_ms'] / verify['kernels_ms']:.3f}x)"
        print(line)
        stages = verify.get("pipeline_s", {})
        print("pipeline wall time: " + ", ".join(f"{k.removesuffix('_s')} {v:.0f} s" for k, v in stages.items())
              + f"; whole run {wall:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
