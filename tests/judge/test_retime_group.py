"""Finalists re-timed side by side (issue 30): several kernels in one evaluation, one timing stage, each batch's
sides interleaved against the same reference batches (judge/group.py); a group that cannot time all of them times
none, and the pool then re-times each alone, so no kernel is charged with another's failure (sandbox/pool.py)."""
from __future__ import annotations

import asyncio

import pytest

from kernelsearch.families.softmax import STARTER
from kernelsearch.judge.client import spawn_local
from kernelsearch.judge.group import evaluate_group
from kernelsearch.judge.problem import load_problem
from kernelsearch.judge.settings import EvalSettings
from kernelsearch.sandbox.pool import EvaluatorPool, PoolSettings

SOFTMAX = {"builtin": "softmax"}
# right on its first call (the re-timing's check of the timed case), then half its rows never written
LATE_WRONG = STARTER.replace("        _launch(x2, y, n_rows, n_cols)",
                             "        _CALLS.append(1)\n"
                             "        _launch(x2, y, n_rows if len(_CALLS) <= 1 else n_rows // 2, n_cols)").replace(
    "class ModelNew(", "_CALLS = []\n\n\nclass ModelNew(")


def _group(tmp_path, sources: list[str], seed: int = 7):
    paths = []
    for i, src in enumerate(sources):
        path = tmp_path / f"cand{i}.py"
        path.write_text(src)
        paths.append(str(path))
    return evaluate_group(load_problem(SOFTMAX), sources, EvalSettings(trials=1, retime=True), mode="cpu",
                          seed=seed, spawn=spawn_local, candidate_paths=paths)


def test_two_kernels_are_timed_in_one_stage_interleaved_against_one_reference(tmp_path):
    second = STARTER + "\n# the same kernel, another file\n"
    a, b = _group(tmp_path, [STARTER, second])
    assert (a.status, b.status) == ("ok", "ok"), (a.reason, b.reason)
    assert a.ref_time_ms == b.ref_time_ms and a.time_ms > 0 and b.time_ms > 0   # one reference figure for both
    assert a.detail["retime_group"] == b.detail["retime_group"] == 2
    assert a.detail["timings"]["candidate"]["median_ms"] == a.time_ms
    assert b.detail["timings"]["candidate"]["median_ms"] == b.time_ms
    plan = a.detail["timing_plan"]
    assert set(plan["group"]) == {"candidate#1"} and "side_steps_ms" in plan["group"]["candidate#1"]
    # every batch ran every side, in turn; the next batch in the reverse order
    pings = plan["pings_ms"]
    assert len(pings) >= 2 and list(pings[0]) == ["candidate", "candidate#1", "eager"]
    assert list(pings[1]) == ["eager", "candidate#1", "candidate"]


def test_a_kernel_wrong_only_in_the_timed_batches_fails_the_whole_group(tmp_path):
    results = _group(tmp_path, [STARTER, LATE_WRONG])
    assert [r.status for r in results] == ["harness_error"] * 2
    assert all("re-timing group of 2: the group's timing failed" in r.reason and "re-timed alone" in r.reason
               for r in results), results[0].reason
    assert "timed call's output" in results[0].reason


def test_a_group_needs_a_file_per_source(tmp_path):
    with pytest.raises(ValueError, match="each with its file"):
        evaluate_group(load_problem(SOFTMAX), [STARTER, STARTER], EvalSettings(trials=1, retime=True), mode="cpu",
                       spawn=spawn_local, candidate_paths=[str(tmp_path / "a.py")])


@pytest.mark.slow   # 10 s or more on a 2-core machine: CI runs it (make test-slow)
def test_the_pool_re_times_alone_what_its_group_could_not_time(tmp_path):
    """Through the pool's sandboxed processes: a group of an honest kernel and one wrong only in timed batches fails
    as a group; each is then re-timed alone, the honest one ok, the wrong one `incorrect` on its own reading."""
    pool = EvaluatorPool(PoolSettings(mode="cpu", concurrency=2, evaluation=EvalSettings(trials=1)))
    try:
        honest, wrong = asyncio.run(pool.retime_group([STARTER, LATE_WRONG], SOFTMAX))
        both = asyncio.run(pool.retime_group([STARTER, STARTER + "\n# again\n"], SOFTMAX))
    finally:
        pool.close()
    assert honest.status == "ok" and "retime_group" not in honest.detail, honest.reason   # timed alone
    assert wrong.status == "incorrect" and "timed call's output" in wrong.reason, (wrong.status, wrong.reason)
    assert [r.status for r in both] == ["ok", "ok"] and [r.detail["retime_group"] for r in both] == [2, 2]
    assert both[0].ref_time_ms == both[1].ref_time_ms and both[0].wall_s == both[1].wall_s   # one evaluation
    assert all(r.detail["lease_wait_s"] is not None and r.detail["output"] is not None for r in both)


def test_a_group_too_large_for_the_memory_gate_is_split_into_groups_that_fit():
    """A GPU pool's gate holds 100 bytes and a group of k is estimated at 30 x (k + 1) (a side a candidate, and the
    reference's): three finalists are re-timed as a group of two and one alone, none as a group of three."""
    from kernelsearch.sandbox.admission import MemoryGate

    pool = EvaluatorPool(PoolSettings(mode="cpu", concurrency=2, evaluation=EvalSettings(trials=1)))
    pool._gates[0] = MemoryGate(100)
    groups, alone = [], []

    async def footprint(ref, candidates=1):
        return 30 * (candidates + 1)

    async def admitted(sources, ref, may_start, retime):
        groups.append(list(sources))
        return None   # as if the wall-time budget stopped it: nothing measured

    async def evaluate(source, ref, may_start=None, retime=False):
        alone.append((source, retime))
        return None

    pool._footprint, pool._admitted, pool.evaluate = footprint, admitted, evaluate
    results = asyncio.run(pool.retime_group(["a", "b", "c"], SOFTMAX))
    assert results == [None, None, None]
    assert groups == [["a", "b"]] and alone == [("c", True)]


# a group mate that looks into the other candidates' directories: their sources, to copy or rewrite
PEEK = STARTER.replace("class ModelNew(", '''import glob as _glob
import os as _os

_mine = _os.path.dirname(_os.path.abspath(__file__))
for _other in _glob.glob(_os.path.join(_os.path.dirname(_mine), "runner*", "candidate.py")):
    if _os.path.dirname(_other) == _mine:
        continue
    try:
        open(_other).read()
    except OSError:
        continue
    raise RuntimeError("read a group mate's source: " + _other)


class ModelNew(''', 1)


def test_a_group_mate_cannot_read_the_others_directories(tmp_path):
    """Where the pool gives candidates users of their own (root, Python open to others), each runner's directory is
    its own: the peeking kernel finds its mate's file and cannot open it, so the group times both. (Had it read it,
    it would have raised, the group failed, and the two been re-timed alone.)"""
    pool = EvaluatorPool(PoolSettings(mode="cpu", concurrency=2, evaluation=EvalSettings(trials=1)))
    if not pool.isolates_candidates:
        pytest.skip("candidates keep the pool's user here (not root, or Python closed to others): nothing to check")
    try:
        results = asyncio.run(pool.retime_group([PEEK, STARTER], SOFTMAX))
    finally:
        pool.close()
    assert [r.status for r in results] == ["ok", "ok"], [r.reason for r in results]
    assert [r.detail.get("retime_group") for r in results] == [2, 2]
