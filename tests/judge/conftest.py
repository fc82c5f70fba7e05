"""Fixtures of the judge's tests: a lease that records what it was asked for, and runners whose requests a test
sees (and may answer) before they are sent."""
from __future__ import annotations

import contextlib
from types import SimpleNamespace

import pytest


@pytest.fixture
def recorded():
    """`lease(kind)` for a Judge, recording every hold (`holds`, in order) and what is held now (`held`); `spawn`
    starts local runners whose requests go through `on_request(header, held)` first: its non-None return is the
    reply, and the runner never sees that request."""
    rec = SimpleNamespace(held=[], holds=[], on_request=lambda header, held: None)

    @contextlib.contextmanager
    def lease(kind, step=None):
        rec.held.append(kind)
        rec.holds.append(kind)
        try:
            yield
        finally:
            rec.held.pop()

    def spawn(role):
        from kernelsearch.judge import client

        r = client.spawn_local(role)
        ask = r.request

        def request(header, buffers=None):
            reply = rec.on_request(header, tuple(rec.held))
            return (reply, []) if reply is not None else ask(header, buffers)
        r.request = request
        return r

    rec.lease, rec.spawn = lease, spawn
    return rec
