"""The timing plan's per-batch record (judge/clock.py `batches_ms`) keeps the candidate's reported event time only
where it is a number: the reply is the candidate's word, and what it puts there is written into the store."""
from __future__ import annotations

import json

from kernelsearch.judge import client
from kernelsearch.judge.harness import evaluate
from kernelsearch.judge.settings import EvalSettings


def test_a_candidate_that_answers_its_batches_with_a_huge_event_time_leaves_only_numbers_in_the_record():
    from kernelsearch.families import load_problem
    from kernelsearch.families.softmax import STARTER

    forged = "9" * 200_000   # a cheat's runner (its batch op rewritten) replying with a string where a time goes

    def spawn(role):
        r = client.spawn_local(role)
        ask = r.request

        def request(header, buffers=None):
            reply, bufs = ask(header, buffers)
            if role == "candidate" and header.get("op") == "batch" and header.get("events"):
                reply = {**reply, "event_ms": forged}
            return reply, bufs
        r.request = request
        return r

    r = evaluate(load_problem("softmax"), STARTER, EvalSettings(trials=1, timing_iters=3), mode="cpu", spawn=spawn)
    assert r.status.value == "ok", r.reason
    cand = r.detail["timing_plan"]["batches_ms"]["candidate"]
    assert cand["wall_ms"] and len(cand["events_ms"]) == len(cand["wall_ms"])
    assert all(e is None or isinstance(e, (int, float)) for e in cand["events_ms"]), str(cand["events_ms"])[:200]
    assert len(json.dumps(r.detail, default=str)) < 100_000
