"""Every built-in family's starter is `ok` through the judge (issue 18: the honest kernels of every family stay ok),
evaluated by the real pool on the CPU interpreter: judge, candidate's runner and reference's runner in their own
processes, the sm_90 compile included."""
from __future__ import annotations

import asyncio
import importlib

import pytest

from kernelsearch.judge.problem import family_names
from kernelsearch.judge.settings import EvalSettings
from kernelsearch.sandbox.pool import EvaluatorPool, PoolSettings

FAST = ["cross_entropy", "rmsnorm"]   # a 0-dim output (the loss) and a plain row op, in `make test`


def _evaluate(names: list[str]) -> dict:
    pool = EvaluatorPool(PoolSettings(mode="cpu", concurrency=2,
                                      evaluation=EvalSettings(trials=1, timeout_s=600, timing_iters=3)))

    async def go():
        return await asyncio.gather(*(pool.evaluate(importlib.import_module(
            f"kernelsearch.families.{n}").STARTER, {"builtin": n}) for n in names))
    try:
        return dict(zip(names, asyncio.run(go())))
    finally:
        pool.close()


@pytest.fixture(scope="module")
def fast() -> dict:
    return _evaluate(FAST)


@pytest.fixture(scope="module")
def rest() -> dict:
    return _evaluate([n for n in family_names() if n not in FAST])


@pytest.mark.parametrize("name", FAST)
def test_starter_is_ok_through_the_judge(fast, name):
    _check(fast[name], name)


@pytest.mark.slow
@pytest.mark.parametrize("name", [n for n in family_names() if n not in FAST])
def test_every_other_starter_is_ok_through_the_judge(rest, name):
    _check(rest[name], name)


def _check(r, name: str) -> None:
    assert r.status == "ok", (name, r.stage, r.reason, (r.error_text or "")[-1500:])
    assert r.time_ms is not None and r.time_ms > 0 and r.ref_time_ms is not None and r.ref_time_ms > 0
    assert r.timing_kind == "cpu-interpreter"
