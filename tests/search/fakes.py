"""An in-process evaluator pool for tests of the search's policy (strategies, budgets, resume): the controller, its
providers and a real SQLite store are real; the evaluation is a deterministic function of the code, so a search's
tree is fixed by its seed and no worker process or Triton interpreter runs (the sandbox has its own tests).

A kernel whose code contains BROKEN fails to compile (its error text's last line names shared memory); one whose
code hash falls on a multiple of FAIL_EVERY is incorrect; the others are correct with a speedup read off the hash.
"""
from __future__ import annotations

import asyncio
import hashlib
from types import SimpleNamespace

from kernelsearch.config import parse_config
from kernelsearch.judge.result import EvalResult
from kernelsearch.judge.status import Status
from kernelsearch.search.controller import Controller
from kernelsearch.store import Run, open_store, session_scope

FAIL_EVERY = 5


class Killed(BaseException):
    """Stands for SIGKILL: raised out of the pool mid-round, it leaves the store as a killed process would."""


def fake_result(code: str) -> EvalResult:
    if "BROKEN" in code:
        return EvalResult.failure(Status.compile_error, "the kernel does not compile", stage="compile",
                                  error_text="Traceback ...\ntriton.runtime.errors.OutOfResources: out of resource: "
                                             "shared memory, Required: 262144, Hardware limit: 232448")
    h = int(hashlib.sha256(code.strip().encode()).hexdigest()[:8], 16)
    if h % FAIL_EVERY == 0:
        return EvalResult.failure(Status.incorrect, "values off at case odd", stage="correctness")
    speedup = 0.5 + (h % 1000) / 400
    return EvalResult(status=Status.ok, stage="timing", time_ms=1.0 / speedup, ref_time_ms=1.0, speedup=speedup,
                      timing_kind="cpu-interpreter", device="cpu")


class FakePool:
    mode = "cpu"
    s = SimpleNamespace(mode="cpu", gpus=[])   # what runner.py reads of a pool's settings

    def __init__(self, kill_after: int | None = None):
        self.kill_after = kill_after
        self.codes: list[str] = []
        self.retimed: list[str] = []   # codes asked for in the pool's re-timing mode

    async def evaluate(self, code: str, ref: str, may_start=None, retime: bool = False):
        if may_start is not None and not may_start():
            return None
        if retime:
            self.retimed.append(code)
        await asyncio.sleep(0)
        if self.kill_after is not None and len(self.codes) >= self.kill_after:
            raise Killed()
        self.codes.append(code)
        return fake_result(code)

    def close(self) -> None:
        pass


def config(tmp, **over):
    raw = {"problem": "softmax", "store": str(tmp / "ks.db"), "device": "cpu", "llm": {"provider": "offline"},
           "search": {"rounds": 50, "ideas_per_round": 2, "branches_per_idea": 2, "seeds_per_round": 2,
                      "concurrency": 2, "seed": 3},
           "budgets": {"evaluations": 12}}
    for k, v in over.items():
        raw[k] = {**raw[k], **v} if isinstance(v, dict) and isinstance(raw.get(k), dict) else v
    return parse_config(raw, source="test", base_dir=tmp)


def new_run(db, name: str, cfg) -> tuple[object, int]:
    engine = open_store(db)
    with session_scope(engine) as s:
        run = Run(name=name, problem=cfg.problem, config_json=cfg.model_dump_json(), device="cpu-interpreter")
        s.add(run)
        s.flush()
        return engine, run.id


def drive(cfg, engine, run_id: int, pool: FakePool, events: list | None = None) -> Controller:
    ctl = Controller(cfg.search_setup(), engine, run_id, pool,
                     events=(lambda kind, data: events.append((kind, data))) if events is not None else None)
    asyncio.run(ctl.run())
    return ctl
