"""The correctness stage's shared holds (judge/harness.py `_grouped`, HOLD_BYTES): consecutive small trials share
one hold, a large case or one of unknown size holds alone, and every trial still runs under a hold."""
from __future__ import annotations

import pytest

from kernelsearch.judge import harness
from kernelsearch.judge.harness import Judge


def test_groups_are_cut_by_bytes_and_unknown_or_large_items_stand_alone(monkeypatch):
    monkeypatch.setattr(harness, "HOLD_BYTES", 100)
    sizes = {"a": 10, "b": 60, "c": 40, "d": None, "e": 5, "f": 101, "g": 1, "h": 99, "i": 0}
    groups = Judge._grouped(list(sizes), sizes.get)
    assert groups == [["a", "b"], ["c"], ["d"], ["e"], ["f"], ["g", "h", "i"]], groups
    assert [x for g in groups for x in g] == list(sizes)   # every item once, in order
    monkeypatch.setattr(harness, "HOLD_BYTES", 0)
    assert Judge._grouped(list(sizes), sizes.get) == [[k] for k in sizes]   # 0: a hold an item


@pytest.mark.parametrize("hold_mb", [64, 0])
def test_every_trial_runs_under_a_hold_and_small_ones_share_it(tmp_path, monkeypatch, hold_mb, recorded):
    from kernelsearch.families import load_problem
    from kernelsearch.families.softmax import STARTER
    from kernelsearch.judge.settings import EvalSettings

    monkeypatch.setattr(harness, "HOLD_BYTES", hold_mb * 2**20)
    calls_held: list[tuple] = []
    recorded.on_request = lambda header, held: calls_held.append(held) if header.get("op") == "call" else None
    problem = load_problem("softmax")
    path = tmp_path / "candidate.py"
    path.write_text(STARTER)
    judge = Judge(problem, STARTER, EvalSettings(trials=2), mode="cpu", seed=1, spawn=recorded.spawn,
                  lease=recorded.lease, candidate_path=str(path))
    cases = problem.cases_for("cpu")[:3]
    try:
        judge.compile()
        recorded.holds.clear()
        judge._check_cases(cases)
    finally:
        judge.close()
    holds = recorded.holds
    assert len(calls_held) == 6 and all(h == ("shared",) for h in calls_held), calls_held
    assert holds == (["shared"] if hold_mb else ["shared"] * 6), holds
    assert judge.detail["waits"]["shared:_check_cases"][0] == len(holds), judge.detail["waits"]
    assert [c["trial"] for c in judge.detail["cases"]] == [0, 1] * 3
