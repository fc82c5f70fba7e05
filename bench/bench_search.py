"""Offline searches, one per family, then the best kernel of each timed against eager, torch.compile and Liger.

The table of issue 6: family, shape, dtype, eager, torch.compile, Liger where it has the op, ours (the best
kernel `kernelsearch run` found with the offline provider), fraction of roofline, evaluations used (the
evaluation at which the best kernel was found, out of those the run spent).

    python3 bench/bench_search.py                         # every family, 64 evaluations at most each
    python3 bench/bench_search.py rmsnorm softmax --evals 32 --wall 60 --json out.json

Each search is a real run (the runner, the evaluator pool, the store at --db), device cuda, torch.compile not
timed inside the search (the table times it once per family afterwards, in this process). The table's columns
come from bench_families.bench_case: every implementation on the same inputs in one process, L2 flushed, median
of --iters calls; `roof` is against the 2026-12-02 H200 copy/matmul figures, `h.roof` is the harness's own
fraction against the ceilings it measured on this device.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from sqlmodel import select

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_families as bf  # noqa: E402

from kernelsearch.config import parse_config  # noqa: E402
from kernelsearch.families import load_family  # noqa: E402
from kernelsearch.judge.problem import family_names  # noqa: E402
from kernelsearch.runner import start_run  # noqa: E402
from kernelsearch.store import Evaluation, Kernel, Run, open_store, session_scope  # noqa: E402


def search(family: str, args, log) -> dict:
    """Run one offline search; return the best kernel's code and where in the run it was found."""
    name = f"bench-{family}-{int(time.time())}"
    cfg = parse_config({
        "problem": family, "store": str(args.db), "device": "cpu" if args.dry_run else "cuda", "name": name,
        "llm": {"provider": "offline"},
        "search": {"rounds": args.rounds, "ideas_per_round": 4, "branches_per_idea": 2, "seeds_per_round": 2,
                   "concurrency": args.concurrency},
        "budgets": {"evaluations": args.evals, "wall_time_s": args.wall},
        "evaluation": {"timeout_s": args.timeout, "trials": 2, "fork_server": args.fork_server == "on"},
    }, source=f"bench_search {family}")
    t0 = time.monotonic()
    start_run(cfg, args.db, name, Console(file=log, width=160))
    wall = time.monotonic() - t0
    engine = open_store(args.db)
    with session_scope(engine) as s:
        run = s.exec(select(Run).where(Run.name == name)).one()
        rows = s.exec(select(Evaluation, Kernel).join(Kernel, Kernel.id == Evaluation.kernel_id)
                      .where(Kernel.run_id == run.id).order_by(Evaluation.id)).all()
        ok = [(i, e, k) for i, (e, k) in enumerate(rows, 1) if e.status == "ok" and e.time_ms]
        statuses: dict[str, int] = {}
        for e, _ in rows:
            statuses[e.status] = statuses.get(e.status, 0) + 1
        out = {"run": name, "evaluations": len(rows), "wall_s": round(wall, 1), "statuses": statuses,
               "stop": run.stop_reason}
        if ok:
            i, e, k = min(ok, key=lambda t: t[1].time_ms)
            out.update(found_at=i, code=k.code, time_ms=e.time_ms, speedup=e.speedup,
                       harness_roofline=e.roofline_fraction, kernel_id=k.id)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("families", nargs="*")
    ap.add_argument("--evals", type=int, default=64, help="evaluation budget per search (issue 6: at most 64)")
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--wall", type=float, default=120.0, help="wall-time budget per search, seconds")
    ap.add_argument("--concurrency", type=int, default=6)
    ap.add_argument("--fork-server", choices=["on", "off"], default="on")
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds one evaluation may take (a hung kernel)")
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--no-compile", action="store_true")
    ap.add_argument("--db", type=Path, default=Path("runs/bench_search.db"))
    ap.add_argument("--json", default=None)
    ap.add_argument("--dry-run", action="store_true", help="CPU interpreter searches, no GPU table (plumbing check)")
    ap.add_argument("--log", default=None, help="the runs' progress lines go here (default: discarded)")
    args = ap.parse_args(argv)
    import torch

    if not torch.cuda.is_available() and not args.dry_run:
        print("bench_search: needs a CUDA GPU", file=sys.stderr)
        return 2
    names = args.families or family_names()
    args.db.parent.mkdir(parents=True, exist_ok=True)
    liger = bf._liger_ops()
    log = open(args.log, "a") if args.log else open(os.devnull, "w")
    workdir = Path(tempfile.mkdtemp(prefix="bench_search_"))
    device = "cpu (dry run)" if args.dry_run else torch.cuda.get_device_name()
    print(f"device: {device}, torch {torch.__version__}; searches of <= {args.evals} "
          f"evaluations / {args.wall:g} s each, concurrency {args.concurrency}", flush=True)
    results = []
    for fam in names:
        try:
            found = search(fam, args, log)
        except Exception as e:  # noqa: BLE001 - one broken family must not hide the others
            print(f"{fam}: search failed: {type(e).__name__}: {str(e)[:300]}", flush=True)
            continue
        print(f"{fam}: {found['evaluations']} evaluations in {found['wall_s']} s ({found['stop']}), "
              f"{found['statuses']}; best found at evaluation {found.get('found_at')}, harness speedup "
              f"{found.get('speedup') or 0:.2f}x, harness roofline {100 * (found.get('harness_roofline') or 0):.0f}%",
              flush=True)
        if "code" not in found or args.dry_run:
            continue
        problem = load_family(fam)
        try:
            row = bf.bench_case(problem, problem.timed_case, found["code"], args, liger, workdir)
        except Exception as e:  # noqa: BLE001
            print(f"{fam}: timing the best kernel failed: {type(e).__name__}: {str(e)[:300]}", flush=True)
            continue
        row.update({k: found.get(k) for k in ("found_at", "evaluations", "harness_roofline", "run", "wall_s")})
        row["code"] = found["code"]
        results.append(row)
        print(_row_line(row), flush=True)
        if args.json:   # after every family: a call cut short keeps what it finished
            Path(args.json).write_text(json.dumps(results, indent=1, default=str))
    print("\n" + bf.HEADER + f" {'h.roof':>6s} {'evals':>9s}")
    for row in results:
        print(_row_line(row))
    return 0


def _row_line(row: dict) -> str:
    return (bf._line(row) + f" {100 * (row.get('harness_roofline') or 0):5.0f}% "
            f"{row['found_at']:>4d}/{row['evaluations']:<4d}")


if __name__ == "__main__":
    sys.exit(main())
