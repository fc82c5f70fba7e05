"""Long batches stop sooner (issue 30, judge/clock.py LONG_LOOP_S): once every side has been in every place of the
order twice and the batches took the loop's budget, the timing loop stops whatever the spread; before that, and with
batches that never add up to the budget, it runs as before (to the target spread or its last batch).

On the CPU the loop's batches are CPU_BATCHES; here (4, 8), the spread rule made unreachable and the candidate's side
steps counted settled, so only the long-batch rule can stop the loop early."""
from __future__ import annotations

import pytest

from kernelsearch.families.softmax import STARTER
from kernelsearch.judge import charges, clock
from kernelsearch.judge.client import spawn_local
from kernelsearch.judge.group import evaluate_group
from kernelsearch.judge.harness import evaluate
from kernelsearch.judge.problem import load_problem
from kernelsearch.judge.settings import EvalSettings

SOFTMAX = {"builtin": "softmax"}


@pytest.fixture
def loop(monkeypatch):
    monkeypatch.setattr(clock, "CPU_BATCHES", (4, 8))
    monkeypatch.setattr(clock, "TARGET_SPREAD", -1.0)   # no spread is under it: the spread rule never stops the loop
    monkeypatch.setattr(charges, "side_settled", lambda *a: True)

    def budget(seconds: float) -> None:
        monkeypatch.setattr(clock, "LONG_LOOP_S", seconds)
    return budget


def _batches(result) -> int:
    assert result.status.value == "ok", result.reason
    return result.detail["timings"]["candidate"]["batches"]


def test_two_sides_stop_after_four_batches_once_the_budget_is_spent(loop):
    problem = load_problem(SOFTMAX)
    loop(0.0)   # every batch counts as long: the first point where each side went first twice
    assert _batches(evaluate(problem, STARTER, EvalSettings(trials=1, timing_iters=2), mode="cpu")) == 4
    loop(1e9)   # never long: every batch, as without the rule
    assert _batches(evaluate(problem, STARTER, EvalSettings(trials=1, timing_iters=2), mode="cpu")) == 8


def test_three_sides_wait_for_the_balanced_order(loop, tmp_path):
    """A re-timing group of two candidates and eager: three sides, so six batches before each side was in each of
    the three places twice (timing.side_order), not the four of two sides."""
    loop(0.0)
    sources = [STARTER + f"\n# copy {i}\n" for i in range(2)]
    paths = [tmp_path / f"cand{i}.py" for i in range(2)]
    for path, src in zip(paths, sources):
        path.write_text(src)
    a, b = evaluate_group(load_problem(SOFTMAX), sources, EvalSettings(trials=1, retime=True, timing_iters=2),
                          mode="cpu", seed=5, spawn=spawn_local, candidate_paths=[str(p) for p in paths])
    assert _batches(a) == 6 and _batches(b) == 6
