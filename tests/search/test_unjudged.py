"""harness_error above the judge (search/controller.py): an evaluation whose judge failed in its own work says
nothing about the kernel. It is evaluated once more at once; if it stays, it is stored as harness_error, is not shown
to the LLM as the kernel's failure, and a resumed run evaluates it again, keeping the earlier attempts."""
from __future__ import annotations

import json

import pytest
from sqlmodel import select

from kernelsearch.judge.result import EvalResult
from kernelsearch.judge.status import Status
from kernelsearch.search.controller import Controller
from kernelsearch.store import Evaluation, Kernel, session_scope
from kernelsearch.store import queries as q
from tests.search.fakes import FakePool, config, drive, fake_result, new_run

OOM = "harness out of memory (the judge's own work, not the candidate's) while building the float64 reference"


class OomPool(FakePool):
    """The fake pool, whose judge runs out of memory on the first `ooms` evaluations of each code."""

    def __init__(self, ooms: int):
        super().__init__()
        self.ooms = ooms
        self.seen: dict[str, int] = {}

    async def evaluate(self, code, ref, may_start=None, retime=False):
        if may_start is not None and not may_start():
            return None
        self.codes.append(code)
        n = self.seen[code] = self.seen.get(code, 0) + 1
        if n <= self.ooms:
            return EvalResult.failure(Status.harness_error, OOM, stage="correctness",
                                      error_text="torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 12 GiB")
        return fake_result(code)


def _rows(engine, run_id) -> dict[int, tuple[str, Evaluation | None]]:
    """Every kernel of the run: its code and its evaluation."""
    with session_scope(engine) as s:
        return {k.id: (k.code, q.get_evaluation(s, k.id))
                for k in s.exec(select(Kernel).where(Kernel.run_id == run_id)).all()}


def test_a_harness_error_is_evaluated_once_more_and_the_attempt_is_kept(tmp_path):
    cfg = config(tmp_path, budgets={"evaluations": 3}, search={"timings": 1})   # no re-timing: each code's calls
    engine, run_id = new_run(tmp_path / "ks.db", "once", cfg)
    pool = OomPool(ooms=1)
    drive(cfg, engine, run_id, pool)
    rows = _rows(engine, run_id)
    assert len(rows) == 3
    for code, ev in rows.values():
        assert pool.seen[code] == 2                          # the unjudged try, then the verdict
        assert ev.status == fake_result(code).status.value   # the verdict, not the harness's failure
        attempts = json.loads(ev.detail_json)["harness_attempts"]
        assert [a["reason"] for a in attempts] == [OOM] and attempts[0]["stage"] == "correctness"


def test_an_unjudged_kernel_is_not_its_failure_and_resume_judges_it_again(tmp_path):
    cfg = config(tmp_path, budgets={"evaluations": 3}, search={"timings": 1})   # no re-timing: each code's calls
    engine, run_id = new_run(tmp_path / "ks.db", "oom", cfg)
    events: list = []
    pool = OomPool(ooms=10)
    ctl = drive(cfg, engine, run_id, pool, events)
    rows = _rows(engine, run_id)
    assert len(rows) == 3 and len(pool.codes) == 6        # each kernel: one try and one more, no more
    assert {ev.status for _, ev in rows.values()} == {Status.harness_error.value}
    assert sum(kind == "harness_retry" for kind, _ in events) == 3
    # not the kernel's failure, in every view the LLM gets
    tried = "\n".join(ctl._tried())
    assert "every branch failed" not in tried and "no branch judged" in tried and "not judged" in tried
    starter = min(rows)
    seen = ctl._seeds((starter,))[0].result
    assert seen.startswith("not judged") and "out of memory" in seen and "harness_error" not in seen
    with session_scope(engine) as s:
        assert q.failed_kernels(s, run_id, before_round=99, limit=10) == []
        ideas = [i for i, _ in q.ideas_with_evaluations(s, run_id)]
        assert ideas and all(q.failed_evaluations_of_idea(s, i.id) == [] for i in ideas)
        assert len(q.unjudged_kernels(s, run_id)) == 3

    # resumed with the device's memory back: the three are judged, the verdicts replace harness_error
    again = OomPool(ooms=0)
    events.clear()
    drive(cfg, engine, run_id, again, events)
    assert sorted(again.codes) == sorted(code for code, _ in rows.values())   # those three, once each, no more
    assert ("unjudged", {"n": 3, "kernels": sorted(rows)}) in events
    after = _rows(engine, run_id)
    assert set(after) == set(rows)
    for code, ev in after.values():
        assert ev.status == fake_result(code).status.value
        attempts = json.loads(ev.detail_json)["harness_attempts"]
        assert len(attempts) == 2 and {a["reason"] for a in attempts} == {OOM}   # the first run's two tries
    with session_scope(engine) as s:
        assert q.unjudged_kernels(s, run_id) == []


def test_only_an_unjudged_row_is_replaced(tmp_path):
    cfg = config(tmp_path)
    engine, run_id = new_run(tmp_path / "ks.db", "rows", cfg)
    with session_scope(engine) as s:
        k = q.add_kernel(s, run_id, code="x", code_hash="hx", language="triton")
        q.add_evaluation(s, Evaluation(kernel_id=k, status="harness_error", reason=OOM))
    with session_scope(engine) as s:
        q.add_evaluation(s, Evaluation(kernel_id=k, status="incorrect", reason="values off"))
    with session_scope(engine) as s:
        assert q.get_evaluation(s, k).status == "incorrect"
    with session_scope(engine) as s, pytest.raises(ValueError, match="already has an evaluation"):
        q.add_evaluation(s, Evaluation(kernel_id=k, status="ok"))
    with session_scope(engine) as s:
        assert q.get_evaluation(s, k).status == "incorrect"


def test_a_branch_the_judge_could_not_evaluate_is_left_out_of_its_ideas_failures(tmp_path):
    """An idea with one incorrect branch and one unjudged branch failed on one branch, not two; with only unjudged
    branches it did not fail at all."""
    cfg = config(tmp_path)
    engine, run_id = new_run(tmp_path / "ks.db", "mixed", cfg)
    with session_scope(engine) as s:
        k0 = q.add_kernel(s, run_id, code="starter", code_hash="h0", language="triton")
        idea = dict(round=1, parent_kernel_id=k0, meta_json="{}", llm_call_id=None, branches_wanted=2)
        i1 = q.add_idea(s, run_id, title="Idea A", text="a", **idea)
        i2 = q.add_idea(s, run_id, title="Idea B", text="b", **idea)
        ka = q.add_kernel(s, run_id, code="a0", code_hash="ha0", language="triton", idea_id=i1, round=1)
        kb = q.add_kernel(s, run_id, code="a1", code_hash="ha1", language="triton", idea_id=i1, round=1, branch=1)
        kc = q.add_kernel(s, run_id, code="b0", code_hash="hb0", language="triton", idea_id=i2, round=1)
        q.add_evaluation(s, Evaluation(kernel_id=k0, status="ok", speedup=1.0, time_ms=1.0, timing_kind="cpu"))
        q.add_evaluation(s, Evaluation(kernel_id=ka, status="incorrect", reason="values off at case odd"))
        q.add_evaluation(s, Evaluation(kernel_id=kb, status="harness_error", reason=OOM))
        q.add_evaluation(s, Evaluation(kernel_id=kc, status="harness_error", reason=OOM))
    ctl = Controller(cfg.search_setup(), engine, run_id, FakePool())
    a, b = ctl._tried()
    assert "every branch failed (1 evaluated)" in a and "values off" in a and "out of memory" not in a
    assert "failed" not in b.split("(its own failure")[0] and "no branch judged (1 not judged" in b
    with session_scope(engine) as s:
        assert [e.kernel_id for e in q.failed_evaluations_of_idea(s, i1)] == [ka]
