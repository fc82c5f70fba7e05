"""bench/strategies_gpu.py's softmax runs simulated on the CPU: the real controller, offline provider and store, from
the plain kernel (PLAIN), with an evaluator that returns a speed model instead of a measurement. The model is a
rough reading of softmax/NOTES.md's H200 figures (pipelined row 32 warps fastest, exp2 4 % off, single, coop and
online behind, three_pass slowest); it is not measured, so only the walk is real: does a strategy reach the tuned
starter's kernel, and how often does a seed have every move that would write a new kernel closed by the lineage
rule (an idea title and text tried on an ancestor)?

    python3 bench/strategies_sim.py --seeds 6 --budget 64
    python3 bench/strategies_sim.py --bare-text     # ideas' texts without the seed's variant (as before 1555c3f)
"""
from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from strategies_gpu import PLAIN  # noqa: E402

EAGER_MS = 0.311   # the timed case's eager time by NOTES.md (0.146 ms at 2.13x)


def model_ms(p: dict) -> float:
    v, w = p["variant"], p["num_warps"]
    e = 0.96 if p["exp2"] else 1.0
    if v == "pipelined":
        t = {32: 0.151, 16: 0.203}.get(w, 0.26) * (1.1 if p["programs_per_sm"] > 1 else 1.0)
    elif v == "single":
        t = {32: 0.179, 16: 0.184}.get(w, 0.19) * (0.98 if p["persistent"] else 1.0)
    elif v == "coop":
        t = 0.18 + 0.005 * (p["SPLIT"] != 4)
    elif v == "online":
        t = (0.206 * (1 + 0.1 * (p["num_stages"] - 1)) * (0.97 if p["stats"] == "chunk" else 1)
             * (0.97 if p["cache_hints"] else 1) * (1 + 0.03 * abs(p["BLOCK"].bit_length() - 12))
             * (1 + 0.03 * abs(w.bit_length() - 4)) * (0.97 if p["persistent"] else 1))
    else:
        t = 0.30 * (1 + 0.03 * abs(p["BLOCK"].bit_length() - 12)) * (1 + 0.1 * (p["num_stages"] - 1))
    return t * e


class ModelPool:
    mode = "cpu"
    s = SimpleNamespace(mode="cpu", gpus=[])

    def __init__(self, space):
        self.space = space

    async def evaluate(self, code, ref, may_start=None):
        from kernelsearch.judge.result import EvalResult
        from kernelsearch.judge.status import Status

        if may_start is not None and not may_start():
            return None
        await asyncio.sleep(0)
        t = model_ms(self.space.params_of(code))
        return EvalResult(status=Status.ok, stage="timing", time_ms=t, ref_time_ms=EAGER_MS, speedup=EAGER_MS / t,
                          timing_kind="cpu-model", device="cpu")

    def close(self):
        pass


class Closed:
    """Counts, at every idea call, the seeds' moves that would write a new kernel: open, or closed by the text of
    an idea the seed's lineage tried."""

    def __init__(self):
        from kernelsearch.agent import offline

        self.n = {"calls": 0, "seeds": 0, "open": 0, "closed": 0, "none_open": 0, "none_new": 0}
        ctx = getattr(offline, "_in_context", lambda d, p: d)
        orig = offline.OfflineProvider._ideas

        def spy(provider, h):
            space, cases = provider._space(h["problem"])
            seen = {space.body(space.params_of(c)) for c in h.get("seen_codes", [])}
            self.n["calls"] += 1
            for seed in h["seeds"]:
                params = space.params_of(seed["code"])
                tried = {offline._idea_key(t, d) for t, d in seed.get("tried", [])}
                o = c = 0
                for move, new in space.applicable(params, cases):
                    if space.body(new) not in seen:
                        closed = offline._idea_key(move.title, ctx(move.description, params)) in tried
                        c, o = c + closed, o + (not closed)
                self.n["seeds"] += 1
                self.n["open"] += o
                self.n["closed"] += c
                self.n["none_open"] += o == 0
                self.n["none_new"] += o == 0 and c == 0
            return orig(provider, h)

        offline.OfflineProvider._ideas = spy


def run(strategy: str, seed: int, budget: int, tmp: Path) -> tuple[float, str]:
    from kernelsearch.config import parse_config
    from kernelsearch.families.softmax.space import SPACE
    from kernelsearch.search.controller import Controller
    from kernelsearch.store import Run, open_store, session_scope
    from kernelsearch.store import queries as q

    starter = tmp / "plain.py"
    starter.write_text(SPACE.render({**SPACE.default, **PLAIN["softmax"]}))
    cfg = parse_config({"problem": "softmax", "starter": str(starter), "store": str(tmp / "sim.db"), "device": "cpu",
                        "llm": {"provider": "offline"},
                        "search": {"strategy": strategy, "ideas_per_round": 4, "branches_per_idea": 2,
                                   "seeds_per_round": 2, "concurrency": 6, "seed": seed, "rounds": 100000},
                        "budgets": {"evaluations": budget}}, source="sim", base_dir=tmp)
    engine = open_store(tmp / "sim.db")
    with session_scope(engine) as s:
        r = Run(name="sim", problem="softmax", config_json=cfg.model_dump_json(), device="cpu")
        s.add(r)
        s.flush()
        rid = r.id
    ctl = Controller(cfg.search_setup(), engine, rid, ModelPool(SPACE))
    asyncio.run(ctl.run())
    with session_scope(engine) as s:
        t = q.tree(s, rid)
    engine.dispose()
    return max(k.speedup for k in t.kernels.values() if k.speedup), ctl.stop_reason


def main(argv: list[str] | None = None) -> int:
    from kernelsearch.families.softmax.space import SPACE

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--strategies", default="branching,sequential")
    ap.add_argument("--seeds", type=int, default=6)
    ap.add_argument("--budget", type=int, default=64)
    ap.add_argument("--bare-text", action="store_true",
                    help="the offline ideas' texts without the seed's variant (agent/offline.py _in_context)")
    args = ap.parse_args(argv)
    if args.bare_text:
        from kernelsearch.agent import offline

        offline._in_context = lambda description, params: description
    goal = EAGER_MS / model_ms(SPACE.default)
    print(f"model: the tuned starter {goal:.3f}x, the plain kernel "
          f"{EAGER_MS / model_ms({**SPACE.default, **PLAIN['softmax']}):.3f}x")
    closed = Closed()
    for strategy in args.strategies.split(","):
        for k in closed.n:
            closed.n[k] = 0
        best = []
        for seed in range(args.seeds):
            with tempfile.TemporaryDirectory() as d:
                best.append(run(strategy, seed, args.budget, Path(d))[0])
        reached = sum(b >= goal - 1e-9 for b in best)
        print(f"{strategy}: best {', '.join(f'{b:.3f}x' for b in best)}; the starter's kernel reached in {reached} "
              f"of {len(best)}; {closed.n}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
