"""The judge against an adversarial candidate (issue 18): one fixture per attack class in tests/fixtures/cheats/judge/,
each a real attempt that fools a harness sharing the candidate's process, evaluated through the real pool on the
CPU interpreter. Each must come back rejected or incorrect (a forged verdict may also end as a crash: the attack
breaks the candidate's own process); a timing attack may pass only at the honest starter's speed; the honest
fixture with helpers named like torch ops must be ok; and a candidate may neither write its own verdict into the
run's store nor read the files of the candidates evaluated beside it.

Figures of each fixture against the shared-process harness (before the judge) are in the fixtures' folder,
tests/fixtures/cheats/judge/README.md.
"""
from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import os
import secrets
import shutil
import sqlite3
import tempfile
import time
from pathlib import Path

import pytest

from kernelsearch.families.softmax import STARTER
from kernelsearch.sandbox.pool import EvaluatorPool, PoolSettings

JUDGE = Path(__file__).resolve().parents[1] / "fixtures" / "cheats" / "judge"

# the attack takes the answer from the reference, or makes the comparison agree: the verdict must not be ok
CORRECTNESS = {"frames_reference", "gc_reference", "code_swap", "torch_function_mode", "reference_does_work",
               "nn_module", "functional_attr", "getattr_built", "eval_exec", "dunder_import", "aten_ops",
               "alias_import"}
# the attack writes or raises a verdict of its own: rejected, incorrect, or the crash of the process it broke
FORGED = {"forged_result", "forged_exception"}
# the work is honest, the clock or the reference's time is attacked: not ok, or no faster than the honest starter
TIMING = {"frames_clock", "rebind_clock", "slow_reference", "replay", "seed", "proc_mem_seed"}
def _pool_isolates() -> bool:
    from kernelsearch.sandbox.pool import EvaluatorPool, PoolSettings

    return EvaluatorPool(PoolSettings(mode="cpu")).isolates_candidates


# honest while it is checked, nothing once it is timed: every timed output is checked, so it is incorrect at timing
KNOWS_TIMED = {"count_calls", "batch_first_only", "first_spoiled"}
# a helper process in a session of its own, which freezing the runner's group would miss: rejected (process check)
ESCAPED = {"escaped_process"}
PROCESS = {"store_forgery"}   # judged by what it did to the store and what it read, in tests of their own
HONEST = {"honest_names"}
TIMING_SLACK = 1.25

# fixtures whose attack still works: strict, so a fix makes them XPASS (fail) and the mark is removed. Against the
# shared-process harness (before 6f4ca54) every fixture's attack worked; the judge and the static scan close all but
# the process-level one: a candidate's process may open whatever its user may (no filesystem isolation yet).
# where the pool cannot give a candidate's runner a user of its own (not root, or this Python is not readable by
# other users, e.g. a pyenv under /root), the process-level attack still works: strict xfail there, asserted here
PASSES_TODAY = set() if _pool_isolates() else {"store_forgery"}
XFAIL = pytest.mark.xfail(reason="the candidate's process can open the run's store and its neighbours' files (same "
                          "user: this pool cannot give runners a user of their own); issue 18", strict=True)
# the store is found through the ancestors' open files and working directories (/proc/PID/fd, cwd), which a runner
# that keeps a root pool's user can no longer read: it drops every capability (judge/isolation.py), and the
# kernel lets a process read those of another only if it holds every capability the other holds. A non-root pool's
# runner still reads its ancestors' (same user, dumpable)
STORE_FOUND_TODAY = PASSES_TODAY if os.geteuid() != 0 else set()


def _pool() -> EvaluatorPool:
    """CPU interpreter, small cases, one trial, few timed calls; written for the pool's settings of either shape
    (the evaluation's own settings in an EvalSettings since the judge, flat before)."""
    if "evaluation" in {f.name for f in dataclasses.fields(PoolSettings)}:
        from kernelsearch.judge.settings import EvalSettings

        return EvaluatorPool(PoolSettings(mode="cpu", concurrency=2, evaluation=EvalSettings(
            trials=1, timeout_s=120, timing_iters=5, aot_compile=False)))
    return EvaluatorPool(PoolSettings(mode="cpu", concurrency=2, trials=1, timeout_s=120, timing_iters=5, aot=False))


def _get(result, key: str):
    value = result.get(key) if isinstance(result, dict) else getattr(result, key, None)
    return getattr(value, "value", value)


def _evaluate(sources: list[str]) -> list:
    pool = _pool()

    async def go():
        return await asyncio.gather(*(pool.evaluate(s, {"builtin": "softmax"}) for s in sources))

    try:
        return asyncio.run(go())
    finally:
        pool.close()


@pytest.fixture(scope="module")
def planted(tmp_path_factory) -> dict:
    """A kernelsearch store holding store_forgery's code as a queued kernel, kept open by this process (as the
    controller keeps its store open), and a neighbour's directory beside the pool's, holding a marked candidate."""
    from sqlmodel import Session

    from kernelsearch.store.database import open_store
    from kernelsearch.store.models import Kernel, Run

    path = tmp_path_factory.mktemp("store") / "run.db"
    code = (JUDGE / "store_forgery.py").read_text()
    engine = open_store(path)
    with Session(engine) as s:
        run = Run(name="judge-cheats", problem="softmax", config_json="{}")
        s.add(run)
        s.flush()
        kernel = Kernel(run_id=run.id, code=code, code_hash=hashlib.sha256(code.encode()).hexdigest()[:16])
        s.add(kernel)
        s.commit()
        kernel_id = kernel.id
    held = sqlite3.connect(path)
    held.execute("SELECT count(*) FROM kernel").fetchone()
    neighbour = Path(tempfile.mkdtemp(prefix="ks-worker-"))   # where the pool makes its candidates' directories
    marker = f"NEIGHBOUR-{secrets.token_hex(8)}"
    (neighbour / "candidate.py").write_text(f"# {marker}\nclass ModelNew:\n    pass\n")
    yield {"path": path, "kernel_id": kernel_id, "marker": marker, "held": held}
    held.close()
    engine.dispose()
    shutil.rmtree(neighbour, ignore_errors=True)


@pytest.fixture(scope="module")
def results(planted) -> dict:
    """Every judge fixture and the honest starter (twice, for the timing baseline) through the real pool."""
    names = sorted(p.stem for p in JUDGE.glob("*.py"))
    sources = [(JUDGE / f"{n}.py").read_text() for n in names] + [STARTER, STARTER]
    t0 = time.monotonic()
    out = _evaluate(sources)
    print(f"judge fixtures: {len(sources)} evaluations in {time.monotonic() - t0:.1f} s")
    found = dict(zip(names, out[:len(names)]))
    found["__honest__"] = out[len(names):]
    return found


def _param(names: set[str]) -> list:
    return [pytest.param(n, marks=XFAIL) if n in PASSES_TODAY else n for n in sorted(names)]


def test_every_fixture_is_covered():
    every = CORRECTNESS | FORGED | TIMING | KNOWS_TIMED | ESCAPED | PROCESS | HONEST
    assert {p.stem for p in JUDGE.glob("*.py")} == every


def test_honest_starter_and_names_are_ok(results):
    for r in results["__honest__"] + [results["honest_names"]]:
        assert _get(r, "status") == "ok", _get(r, "reason")
        assert (_get(r, "speedup") or 0) > 0


@pytest.mark.parametrize("name", _param(CORRECTNESS))
def test_correctness_attack_is_caught(results, name):
    r = results[name]
    assert _get(r, "status") in ("rejected", "incorrect"), (name, _get(r, "status"), _get(r, "reason"))


@pytest.mark.parametrize("name", _param(KNOWS_TIMED))
def test_work_skipped_once_timed_is_caught_at_timing(results, name):
    r = results[name]
    assert (_get(r, "status"), _get(r, "stage")) == ("incorrect", "timing"), (name, _get(r, "reason"))
    assert "a timed call's output" in (_get(r, "reason") or "")


@pytest.mark.parametrize("name", _param(ESCAPED))
def test_a_process_outside_the_runners_group_is_rejected(results, name):
    r = results[name]
    assert _get(r, "status") == "rejected", (name, _get(r, "status"), _get(r, "reason"))
    assert (_get(r, "reason") or "").startswith("process check:")


@pytest.mark.parametrize("name", _param(FORGED))
def test_forged_verdict_is_not_taken(results, name):
    r = results[name]
    assert _get(r, "status") in ("rejected", "incorrect", "crash"), (name, _get(r, "status"), _get(r, "reason"))
    assert _get(r, "speedup") is None


@pytest.mark.parametrize("name", _param(TIMING))
def test_timing_attack_gains_nothing(results, name):
    """Not ok, or timed no faster than the honest starter (its own time at least the starters' / 1.25) with a
    reference no slower than theirs (at most 3x: on the CPU interpreter the eager reference takes tens of
    microseconds and its reading wanders 2x between evaluations; a working attack gains 6-50x, see the folder's
    README). The two sides are checked apart because their ratio, the speedup, carries the reference's noise: a
    speedup test failed 1 run in about 20. A failing reading is measured once more, beside two starters."""
    def gains(r, honest) -> str | None:
        if _get(r, "status") != "ok":
            return None
        fastest = min(_get(h, "time_ms") for h in honest)
        slowest_ref = max(_get(h, "ref_time_ms") for h in honest)
        if _get(r, "time_ms") < fastest / TIMING_SLACK:
            return f"timed at {_get(r, 'time_ms'):.4g} ms, the honest starter at {fastest:.4g}"
        if _get(r, "ref_time_ms") > 3 * slowest_ref:
            return f"its reference timed at {_get(r, 'ref_time_ms'):.4g} ms, the starters' at most {slowest_ref:.4g}"
        return None

    if gains(results[name], results["__honest__"]) is None:
        return
    again = _evaluate([(JUDGE / f"{name}.py").read_text(), STARTER, STARTER])
    why = gains(again[0], again[1:])
    assert why is None, (name, why)


@pytest.mark.parametrize("name", [pytest.param(n, marks=XFAIL) if n in STORE_FOUND_TODAY else n
                                  for n in ["store_forgery"]])
def test_candidate_cannot_write_its_verdict_into_the_store(results, planted, name):
    assert _get(results[name], "status") is not None   # it was evaluated
    con = sqlite3.connect(planted["path"])
    try:
        rows = con.execute("SELECT status, speedup FROM evaluation WHERE kernel_id = ?",
                           (planted["kernel_id"],)).fetchall()
    finally:
        con.close()
    assert rows == [], f"the candidate wrote its own evaluation row: {rows}"


@pytest.mark.parametrize("name", _param({"store_forgery"}))
def test_candidate_cannot_read_its_neighbours(results, planted, name):
    detail = _get(results[name], "detail") or {}
    output = str(detail.get("output", ""))
    assert planted["marker"] not in output, "the candidate read a neighbour's candidate.py"
