"""Polling instead of blocking around the clock's timed steps (KS_CLOCK_SPIN_US): judge/wire.py poll_readable, the
runner's poll after a timed step's reply, the judge's poll for a timed step's reply (RunnerClient.request spin_s)."""
from __future__ import annotations

import socket
import threading
import time

from kernelsearch.judge import runner, wire
from kernelsearch.judge.client import RunnerClient


def test_poll_readable_returns_at_once_when_data_is_there_and_false_at_its_deadline():
    a, b = socket.socketpair()
    try:
        t0 = time.perf_counter()
        assert wire.poll_readable(a, t0 + 0.05) is False
        assert time.perf_counter() - t0 >= 0.05   # it polled until the deadline, not less
        b.sendall(b"x")
        t0 = time.perf_counter()
        assert wire.poll_readable(a, t0 + 5.0) is True
        assert time.perf_counter() - t0 < 1.0
        assert a.recv(1) == b"x"   # polling read nothing
    finally:
        a.close()
        b.close()


def test_a_spinning_runner_answers_every_request_and_polls_only_after_timed_steps(monkeypatch):
    monkeypatch.setattr(runner, "SPIN_S", 0.2)
    polls: list[float] = []
    real = wire.poll_readable

    def counted(sock, until):
        polls.append(until - time.perf_counter())
        return real(sock, until)

    monkeypatch.setattr(wire, "poll_readable", counted)
    judge_end, runner_end = socket.socketpair()
    r = runner.Runner(runner_end)
    client = RunnerClient(judge_end, 0, "candidate")
    replies = []

    def judge():
        replies.append(client.request({"op": "ping"}, spin_s=0.2)[0])   # the judge's own poll for its reply
        replies.append(client.request({"op": "ping"})[0])               # the runner polls for this one
        time.sleep(0.3)                                                  # past the runner's poll: it blocks
        replies.append(client.request({"op": "release"})[0])            # not a timed step: no poll after it
        replies.append(client.request({"op": "exit"})[0])

    t = threading.Thread(target=judge)
    t.start()
    r.serve()
    t.join(10)
    assert [x.get("ok", "cached" in x) for x in replies] == [True, True, True, True], replies
    # the judge's poll for its first reply, then the runner's after each ping (2); none after the release
    assert len(polls) == 3, polls
    assert all(0 < p <= 0.2 for p in polls), polls
