"""First evaluations in groups (issue 30): kernels of one problem queued beyond the free slots are judged in one
evaluation, each checked in full with its own verdict, and those that pass timed side by side in one timing stage
(judge/group.py, sandbox/groups.py); a hang in a group is that candidate's timeout alone."""
from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from kernelsearch.families.softmax import STARTER
from kernelsearch.judge.client import spawn_local
from kernelsearch.judge.group import evaluate_group
from kernelsearch.judge.problem import load_problem
from kernelsearch.judge.settings import EvalSettings
from kernelsearch.sandbox.groups import mates_to_take
from kernelsearch.sandbox.pool import EvaluatorPool, PoolSettings

SOFTMAX = {"builtin": "softmax"}
WRONG = (Path(__file__).resolve().parents[2] / "families" / "softmax" / "wrong" / "no_max_subtraction.py").read_text()
SYNTAX_ERROR = "def ModelNew(:\n"
# passes nothing: its forward never returns (asleep, so no CPU limit ends it first)
HANG = STARTER.replace("        return softmax(x)",
                       "        import time\n        time.sleep(3600)\n        return softmax(x)")
FAST = dict(trials=1, aot_compile=False)


def _first_group(tmp_path, sources: list[str], **settings):
    paths = []
    for i, src in enumerate(sources):
        path = tmp_path / f"cand{i}.py"
        path.write_text(src)
        paths.append(str(path))
    return evaluate_group(load_problem(SOFTMAX), sources, EvalSettings(**{**FAST, **settings}), mode="cpu", seed=3,
                          spawn=spawn_local, candidate_paths=paths)


def test_each_candidate_has_its_own_verdict_and_those_that_pass_share_one_timing_stage(tmp_path):
    honest, wrong, other = _first_group(tmp_path, [STARTER, WRONG, STARTER + "\n# another file\n"])
    assert wrong.status == "incorrect" and wrong.stage == "correctness", (wrong.status, wrong.reason)
    assert wrong.time_ms is None and "timing_group" not in wrong.detail
    assert (honest.status, other.status) == ("ok", "ok"), (honest.reason, other.reason)
    assert honest.detail["timing_group"] == other.detail["timing_group"] == 2   # the wrong one was not timed
    assert honest.ref_time_ms == other.ref_time_ms   # one reference reading for the group
    assert honest.detail["timing_plan"]["group"].keys() == {"candidate#1"}
    # each was checked in full, as alone: every case of the spec, not only the timed one
    assert len(other.detail["cases"]) > 1 and other.detail["stage_s"]["correctness"] > 0


def test_a_group_whose_candidates_all_fail_times_nothing(tmp_path):
    bad, wrong = _first_group(tmp_path, [SYNTAX_ERROR, WRONG])
    assert bad.status == "compile_error" and wrong.status == "incorrect", (bad.reason, wrong.reason)


@pytest.mark.slow   # waits out a 12 s deadline
def test_a_candidate_that_hangs_is_timed_out_alone_and_the_others_go_on(tmp_path):
    t0 = time.monotonic()
    hang, honest = _first_group(tmp_path, [HANG, STARTER], timeout_s=12)
    assert hang.status == "timeout" and "gave no reply within its time" in hang.reason, (hang.status, hang.reason)
    assert honest.status == "ok" and honest.detail["timing_group"] == 1, honest.reason
    assert time.monotonic() - t0 < 12 + 60   # its deadline ended it, not a group-wide one


@pytest.mark.parametrize("waiting,free,most,taken", [
    (3, 3, 3, 0),   # every waiting one gets a free slot: no group
    (0, 0, 3, 0),
    (3, 0, 3, 3),   # a backlog and no free slot: one group of four
    (9, 0, 3, 3),
    (11, 7, 3, 1),  # twelve at once on eight slots: groups of two where needed
    (5, 1, 3, 2),
    (5, 1, 0, 0),   # group_first 1
])
def test_mates_are_taken_only_beyond_the_free_slots(waiting, free, most, taken):
    assert mates_to_take(waiting, free, most) == taken


def test_the_pool_groups_first_evaluations_queued_beyond_its_slots(tmp_path):
    """Through the pool's sandboxed processes, one slot, three candidates at once: the first to get the slot takes
    the other two into its evaluation. A candidate refused by a static check before its runner started leaves the
    runner started for it unused: the next candidate still gets its own (the runners are handed over in order)."""
    pool = EvaluatorPool(PoolSettings(mode="cpu", concurrency=1, evaluation=EvalSettings(**FAST, group_first=3)))

    async def three():
        return await asyncio.gather(pool.evaluate(SYNTAX_ERROR, SOFTMAX), pool.evaluate(STARTER, SOFTMAX),
                                    pool.evaluate(STARTER + "\n# again\n", SOFTMAX))
    try:
        bad, a, b = asyncio.run(three())
    finally:
        pool.close()
    assert bad.status == "compile_error", (bad.status, bad.reason)
    assert (a.status, b.status) == ("ok", "ok"), (a.reason, b.reason)
    assert a.detail["timing_group"] == b.detail["timing_group"] == 2
    assert a.wall_s == b.wall_s == bad.wall_s and a.ref_time_ms == b.ref_time_ms   # one evaluation


@pytest.mark.slow   # three evaluations through the pool
def test_what_a_first_group_could_not_time_is_evaluated_alone(tmp_path):
    """A kernel right in every check, then wrong only in the timed batches, fails its group's timing: its honest
    mate is then evaluated alone and ok, and it is `incorrect` alone, on its own reading."""
    late_wrong = STARTER.replace(   # the checks call a shape a few times (trials=1); the timed batches, more
        "        _launch(x2, y, n_rows, n_cols)",
        "        _SEEN.append(tuple(x2.shape))\n"
        "        _launch(x2, y, n_rows if _SEEN.count(tuple(x2.shape)) < 10 else n_rows // 2, n_cols)").replace(
        "class ModelNew(", "_SEEN = []\n\n\nclass ModelNew(")
    pool = EvaluatorPool(PoolSettings(mode="cpu", concurrency=1, evaluation=EvalSettings(**FAST, group_first=2)))

    async def two():
        return await asyncio.gather(pool.evaluate(STARTER, SOFTMAX), pool.evaluate(late_wrong, SOFTMAX))
    try:
        honest, wrong = asyncio.run(two())
    finally:
        pool.close()
    assert honest.status == "ok" and "timing_group" not in honest.detail, (honest.status, honest.reason)
    assert wrong.status == "incorrect" and "timed call's output" in wrong.reason, (wrong.status, wrong.reason)
