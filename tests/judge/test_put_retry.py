"""Handing the candidate its inputs (Conversation.put): an out-of-memory reply to the allocation the judge sized is
asked again after a wait before it is the candidate's crash (beside other evaluations the device can be full for a
moment); a reply that says it every time is still a crash, and a reference's out-of-memory is still the harness's."""
from __future__ import annotations

import pytest
import torch

from kernelsearch.families import load_problem
from kernelsearch.judge import conversation
from kernelsearch.judge.conversation import Conversation
from kernelsearch.judge.memory import JudgeMemory
from kernelsearch.judge.settings import EvalSettings
from kernelsearch.judge.status import CandidateFailure, HarnessFailure, Status

OOM = {"error": {"type": "OutOfMemoryError", "text": "CUDA out of memory. Tried to allocate 2.00 GiB", "tb": ""}}
OTHER = {"error": {"type": "RuntimeError", "text": "boom", "tb": ""}}


class FakeRunner:
    name = "candidate"
    ipc = None

    def __init__(self, replies: list[dict]):
        self.replies, self.asked = list(replies), 0

    def request(self, header, buffers=None):
        self.asked += 1
        return (self.replies.pop(0) if self.replies else {"ok": True}), []


def _talk(monkeypatch) -> tuple[Conversation, dict]:
    monkeypatch.setattr(conversation, "PUT_RETRY_S", 0.01)
    detail: dict = {}
    talk = Conversation(load_problem("softmax"), EvalSettings(), mode="cpu", spawn=None,
                        mem=JudgeMemory(detail, "cpu", None))
    return talk, detail


def test_a_passing_shortage_is_asked_again(monkeypatch):
    talk, detail = _talk(monkeypatch)
    talk.cand = FakeRunner([OOM, OOM])
    talk.put(talk.cand, 0, [torch.zeros(3)], "correctness")
    assert talk.cand.asked == 3
    assert len(detail["memory_plan"]["notes"]) == 2 and "asked again" in detail["memory_plan"]["notes"][0]


def test_a_candidate_that_says_it_every_time_crashes(monkeypatch):
    talk, _ = _talk(monkeypatch)
    talk.cand = FakeRunner([OOM] * 10)
    with pytest.raises(CandidateFailure) as got:
        talk.put(talk.cand, 0, [torch.zeros(3)], "correctness")
    assert got.value.status == Status.crash and talk.cand.asked == conversation.PUT_RETRIES + 1


def test_other_errors_and_references_are_not_asked_again(monkeypatch):
    talk, _ = _talk(monkeypatch)
    talk.cand = FakeRunner([OTHER])
    with pytest.raises(CandidateFailure):
        talk.put(talk.cand, 0, [torch.zeros(3)], "correctness")
    assert talk.cand.asked == 1
    ref = FakeRunner([OOM])
    ref.name = "reference"
    with pytest.raises(HarnessFailure):   # the reference's allocation out of memory: the harness's failure, at once
        talk.put(ref, 0, [torch.zeros(3)], "timing")
    assert ref.asked == 1


def test_several_slots_in_one_round_trip_each_holds_its_own_inputs():
    """put_many: the timing stage's n slots a side in one request; every slot gets its own set (a call on slot k
    answers for sets[k]), and a reply that describes fewer slots than were asked is the runner's crash."""
    from kernelsearch.judge import client

    problem = load_problem("softmax")
    detail: dict = {}
    talk = Conversation(problem, EvalSettings(), mode="cpu", spawn=client.spawn_local,
                        mem=JudgeMemory(detail, "cpu", None))
    r = talk.runner("reference")
    try:
        talk.ask(r, {"op": "load", "role": "reference", "problem": problem.ref}, "loading", "timing")
        case = problem.cases_for("cpu")[1]
        ref = talk.build(case, 5, "timing", [(r, "eager")])
        sets = [problem.build_inputs(case, seed, "cpu") for seed in (1, 2, 3)]
        asked = []
        ask = r.request
        r.request = lambda header, buffers=None: (asked.append(header.get("op")), ask(header, buffers))[1]
        assert talk.put_many(r, sets, "timing") == [None, None, None]
        assert asked == ["inputs"]   # one round trip for the three slots
        for k in (2, 0, 1):
            reply, bufs = talk.ask(r, {"op": "call", "slot": k}, "a call", "timing")
            got = talk.decode(r, reply["out"], bufs, "a call", "timing")
            with torch.no_grad():
                assert torch.equal(got, ref(*sets[k])), f"slot {k} does not hold set {k}"
    finally:
        r.close()

    class Short(FakeRunner):
        def request(self, header, buffers=None):
            return {"sets": [[None]], "segs": {}}, []

    gpu = Conversation(problem, EvalSettings(), mode="cuda", spawn=None, mem=JudgeMemory({}, "cpu", None))
    with pytest.raises(CandidateFailure) as got:
        gpu.put_many(Short([]), [[3], [4]], "timing")   # two slots asked, one described
    assert got.value.status == Status.crash and "2 slots asked" in got.value.reason
