"""Search strategies measured (issue 22): `kernelsearch experiment` over several families, each started from the
family's plainest kernel (not its tuned starter), offline provider; best speedup against evaluations per strategy.

    . bench/device_env.sh && python3 bench/strategies_gpu.py                     # the default, sized for ~8 min
    python3 bench/strategies_gpu.py --strategies all --budgets 16,32,64 --repeats 3    # issue 22 in full (~1 h)
    python3 bench/strategies_gpu.py --dry-run --budgets 2,3 --repeats 1 --families softmax   # CPU: the plumbing only

Each family is one experiment (`strat-<family>` in --db): runs `strat-<family>-<strategy>-b<budget>-r<repeat>`, made
by kernelsearch/experiment.py's run_experiment, nested (one run per strategy and repeat at the largest budget; a
smaller budget B is read from its first B evaluations, which no strategy plans by). Repeats go family by family,
repeat by repeat, so a partial bench has every strategy at the same repeats; before each group the time it would
take is estimated (--sec-per-eval) and the bench stops starting groups when --minutes would be passed. Rerunning
with the same --db skips finished runs (the store's runs are resumable; see --db).

The weak starting point is PLAIN below: each family's simplest variant with untuned knobs, rendered by the family's
own space (so the offline provider reads its parameters back from its header) and given as the runs' `starter:`.

A kernel already measured in this store for the same family (same code hash: every strategy starts from the same
point, and the first moves coincide) is not timed again: its first measurement is copied, marked
`detail.reused`, and counts as an evaluation of the run as any other (the equal budgets are equal numbers of
kernels). This spends the GPU on kernels no strategy has seen yet, and compares strategies on the same measurement
of a kernel they both found. `--no-reuse` times every kernel.

Sizing (simulated on the CPU with a stand-in pool, so the walk, not the times, is real): the default (4 families,
branching and sequential, budgets 8 and 16 nested, 1 repeat) is at most 128 evaluations, about 115 kernels timed
once reuse is counted, ~6 min at 3 s each; the full issue-22 grid (4 families x 4 strategies x budgets 16, 32, 64 x
3 repeats, nested) is 2428 evaluations of which ~1170 are timed, ~1 h at 3 s. The end of the output says how many
seconds a timed kernel took here, to size the next call.

Printed at the end: per family the experiment's table (median and min-max of the best speedup over repeats at each
budget), then one line per strategy and budget over all families, and the issue's target: branching at 32
evaluations against sequential at 64, family by family.
"""
from __future__ import annotations

import argparse
import copy
import io
import statistics
import sys
import time
from pathlib import Path

import yaml
from rich.console import Console

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

# the plainest point of each family's space: the simplest variant, small tiles, no pipelining, no persistent grid,
# no cache hints (each checked against the space and its feasibility model before anything runs)
PLAIN = {
    "softmax": {"variant": "three_pass", "BLOCK": 1024, "ROWS": 1, "num_warps": 4, "num_stages": 1,
                "persistent": False, "exp2": False, "stats": "lane", "cache_hints": False},
    "rmsnorm": {"variant": "chunked", "BLOCK": 512, "ROWS": 1, "num_warps": 4, "num_stages": 1, "persistent": False,
                "cache_hints": False},
    "matmul": {"variant": "tiled", "BM": 64, "BN": 64, "BK": 32, "GROUP_M": 1, "num_warps": 4, "num_stages": 2,
               "flatten": False, "warp_specialize": False, "epilogue_subtile": False},
    "flash_attention": {"BLOCK_M": 64, "BLOCK_N": 32, "num_warps": 4, "num_stages": 1, "tma": False},
}
ALL = ("branching", "sequential", "best_of_n", "evolutionary")


def plain_starter(family: str, out: Path) -> Path:
    """The family's plain kernel as a starter file; refused in one line if it is not a feasible point."""
    from kernelsearch.families import load_problem

    problem = load_problem(family)
    space = problem.family.SPACE
    params = {**space.default, **PLAIN[family]}
    space.validate(params)
    code = space.render(params)
    why = space.refusal(code, problem.cases) if hasattr(space, "refusal") else None
    if why:
        raise SystemExit(f"{family}: the plain point is infeasible: {why}")
    path = out / f"{family}_plain.py"
    path.write_text(code)
    return path


def _family_config(family: str, starter: Path, args, out: Path) -> Path:
    cfg = {"problem": family, "starter": str(starter), "store": str(args.db),
           "device": "cpu" if args.dry_run else "cuda", "llm": {"provider": "offline"},
           "search": {"ideas_per_round": 4, "branches_per_idea": 2, "seeds_per_round": 2,
                      "concurrency": args.concurrency, "seed": args.seed},
           "evaluation": {"timeout_s": args.timeout, "trials": 1, "timing_iters": args.timing_iters}}
    if args.dry_run:
        cfg["evaluation"]["aot_compile"] = False
    path = out / f"strat-{family}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


class _Reuse:
    """The evaluator pool of every run, wrapped: a kernel this store has measured for the family is not measured
    again (module docstring)."""

    def __init__(self, db: Path, enabled: bool):
        self.db, self.enabled = db, enabled
        self.cache: dict[tuple[str, str], object] = {}   # (family, code hash) -> its first EvalResult
        self.reused = self.timed = 0

    def prefill(self, family: str) -> None:
        """Measurements of earlier invocations (a rerun with the same --db)."""
        if not (self.enabled and self.db.exists()):
            return
        import json

        from sqlmodel import select

        from kernelsearch.judge.result import EvalResult
        from kernelsearch.judge.status import Status
        from kernelsearch.store import Evaluation, Kernel, Run, open_store, session_scope

        engine = open_store(self.db, readonly=True)
        with session_scope(engine) as s:
            rows = s.exec(select(Kernel.code_hash, Evaluation).join(Evaluation)
                          .join(Run, Run.id == Kernel.run_id).where(Run.problem == family)).all()
        engine.dispose()
        for h, ev in rows:
            detail = json.loads(ev.detail_json or "{}")
            if detail.get("reused") or (family, h) in self.cache:
                continue
            fields = {k: getattr(ev, k) for k in ("reason", "error_text", "stage", "time_ms", "ref_time_ms",
                                                  "compile_ref_time_ms", "speedup", "speedup_compile", "gbps",
                                                  "tflops", "roofline_fraction", "bottleneck", "timing_kind",
                                                  "device", "gpu_index", "wall_s")}
            self.cache[(family, h)] = EvalResult(status=Status(ev.status), detail=detail, **fields)

    def wrap(self, pool, family: str):
        from kernelsearch.search.controller import code_hash

        outer = self

        class Pool:
            mode, s = pool.mode, pool.s

            async def evaluate(self, code, ref, may_start=None, retime=False):
                if retime:   # a finalist's re-timing (search/finalists.py) is a fresh measurement, never a copy
                    return await pool.evaluate(code, ref, may_start=may_start, retime=True)
                key = (family, code_hash(code))
                if outer.enabled and key in outer.cache:
                    if may_start is not None and not may_start():
                        return None
                    outer.reused += 1
                    res = copy.deepcopy(outer.cache[key])
                    res.detail = {**res.detail, "reused": True}
                    return res
                res = await pool.evaluate(code, ref, may_start=may_start)
                if res is not None:
                    outer.timed += 1
                    outer.cache.setdefault(key, res)
                return res

            async def retime_group(self, sources, ref, may_start=None):
                return await pool.retime_group(sources, ref, may_start=may_start)

            def close(self):
                pool.close()

        return Pool()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--families", default=",".join(PLAIN), help=f"comma-separated, of {', '.join(PLAIN)}")
    ap.add_argument("--strategies", default="branching,sequential",
                    help="comma-separated, or 'all' (" + ", ".join(ALL) + ")")
    ap.add_argument("--budgets", default="8,16", help="comma-separated evaluation budgets (issue 22: 16,32,64)")
    ap.add_argument("--repeats", type=int, default=1, help="repeats per strategy (issue 22: at least 3)")
    ap.add_argument("--separate", action="store_true", help="one run per budget instead of nested (costs the sum)")
    ap.add_argument("--minutes", type=float, default=8.0, help="start no group that the estimate says ends later")
    ap.add_argument("--sec-per-eval", type=float, default=3.0, help="the estimate: seconds an evaluation, all in")
    ap.add_argument("--concurrency", type=int, default=6)
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds one evaluation may take")
    ap.add_argument("--timing-iters", type=int, default=20, help="timed calls per side (the judge's default: 50)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-reuse", action="store_true", help="time every kernel, even one measured already")
    ap.add_argument("--db", type=Path, default=Path("runs/strategies.db"))
    ap.add_argument("--log", type=Path, default=None, help="the runs' progress lines (default: dropped)")
    ap.add_argument("--dry-run", action="store_true", help="CPU: device cpu, the Triton interpreter")
    args = ap.parse_args(argv)

    from kernelsearch import runner
    from kernelsearch.experiment import ExperimentError, parse_budgets, parse_strategies, run_experiment, table

    families = [f.strip() for f in args.families.split(",") if f.strip()]
    bad = [f for f in families if f not in PLAIN]
    if bad:
        raise SystemExit(f"--families: {bad[0]!r} has no plain point here; one of {', '.join(PLAIN)}")
    try:
        strategies = list(ALL) if args.strategies == "all" else parse_strategies(args.strategies)
        budgets = parse_budgets(args.budgets)
    except ExperimentError as err:
        raise SystemExit(str(err)) from None
    work = args.db.parent / "strategies_configs"
    work.mkdir(parents=True, exist_ok=True)
    configs = {f: _family_config(f, plain_starter(f, work), args, work) for f in families}

    reuse = _Reuse(args.db, not args.no_reuse)
    make_pool = runner.pool_for
    current = {"family": families[0]}
    runner.pool_for = lambda cfg: reuse.wrap(make_pool(cfg), current["family"])
    per_group = len(strategies) * (sum(budgets) if args.separate else max(budgets))
    print(f"{len(families)} families x {len(strategies)} strategies x {args.repeats} repeats, budgets "
          f"{', '.join(map(str, budgets))} ({'separate' if args.separate else 'nested'}): at most "
          f"{per_group * len(families) * args.repeats} evaluations, ~{per_group * args.sec_per_eval / 60:.1f} min a "
          f"family and repeat at {args.sec_per_eval:g} s each (less what is reused); store {args.db}", flush=True)
    log = open(args.log, "a") if args.log else io.StringIO()
    t0, skipped = time.monotonic(), []
    for r in range(args.repeats):
        for f in families:
            left = args.minutes * 60 - (time.monotonic() - t0)
            if per_group * args.sec_per_eval > left:
                skipped.append(f"{f} r{r}")
                continue
            current["family"] = f
            reuse.prefill(f)
            g0 = time.monotonic()
            before = (reuse.timed, reuse.reused)
            run_experiment(configs[f], strategies, budgets, r + 1, args.db, f"strat-{f}",
                           Console(file=log, width=160), nested=not args.separate)
            print(f"  {f} repeat {r}: {time.monotonic() - g0:.0f} s, {reuse.timed - before[0]} timed, "
                  f"{reuse.reused - before[1]} reused", flush=True)
    if skipped:
        print(f"not started (past --minutes {args.minutes:g} by the estimate; rerun with the same --db to go on): "
              + ", ".join(skipped))

    cells = {f: table(args.db, f"strat-{f}", strategies, budgets, args.repeats) for f in families}
    out = Console(width=200)
    for f in families:
        print(f"\n== {f} (from its plain kernel)")
        from kernelsearch.experiment import print_table

        print_table(cells[f], out)
    print("\nbest speedup over eager, median over repeats, per family; evaluations are the budget")
    head = f"{'strategy':<13}{'budget':>7}  " + "".join(f"{f:>16}" for f in families) + f"{'geomean':>10}"
    print(head)
    for s in strategies:
        for b in budgets:
            meds = [next(c for c in cells[f] if c.strategy == s and c.budget == b).median for f in families]
            got = [m for m in meds if m]
            geo = statistics.geometric_mean(got) if len(got) == len(meds) and got else None
            print(f"{s:<13}{b:>7}  " + "".join(f"{(f'{m:.3g}x' if m else '-'):>16}" for m in meds)
                  + f"{(f'{geo:.3g}x' if geo else '-'):>10}")
    if "branching" in strategies and "sequential" in strategies and 32 in budgets and 64 in budgets:
        print("\nissue 22's target: branching at 32 >= sequential at 64")
        for f in families:
            b32 = next(c for c in cells[f] if c.strategy == "branching" and c.budget == 32).median
            s64 = next(c for c in cells[f] if c.strategy == "sequential" and c.budget == 64).median
            verdict = "-" if b32 is None or s64 is None else "yes" if b32 >= s64 else "no"
            print(f"  {f:<16} branching@32 {b32 or 0:.3g}x  sequential@64 {s64 or 0:.3g}x  {verdict}")
    spent = time.monotonic() - t0
    each = f" ({spent / reuse.timed:.2f} s a timed kernel, all in)" if reuse.timed else ""
    print(f"\n{reuse.timed} kernels timed, {reuse.reused} measurements reused; {spent:.0f} s in all{each}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
