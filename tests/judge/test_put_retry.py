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
