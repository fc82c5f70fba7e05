"""The order of the sides in each timed batch (judge/clock.py side_order): on a GPU a side's speed depends on what ran
just before it (power draw), so no side may keep one place."""
from __future__ import annotations

from collections import Counter

import pytest

from kernelsearch.judge.clock import side_order


def test_two_sides_alternate():
    assert [side_order(["candidate", "eager"], b) for b in range(4)] == [
        ["candidate", "eager"], ["eager", "candidate"], ["candidate", "eager"], ["eager", "candidate"]]


@pytest.mark.parametrize("m", [3, 4, 5])
def test_every_side_takes_every_place_equally_often(m):
    names = [f"s{i}" for i in range(m)]
    orders = [side_order(names, b) for b in range(2 * m)]
    assert all(sorted(o) == names for o in orders)
    places = Counter((name, o.index(name)) for o in orders for name in names)
    assert set(places.values()) == {2}, places   # each side in each place twice over 2m batches


def test_three_sides_each_first_within_three_batches():
    """The loop may stop at 4 batches: the torch.compile side, and the eager one between them, are first early."""
    names = ["candidate", "eager", "compile"]
    assert {side_order(names, b)[0] for b in range(3)} == set(names)
    assert {side_order(names, b)[1] for b in range(4)} != {"eager"}   # reversing alone kept eager in the middle


def test_the_interleaved_clock_orders_its_calls_the_same_way():
    """judge/timing.py's call-by-call clock (the benches') shares the order: with three sides each goes first."""
    from kernelsearch.judge.timing import time_interleaved

    calls: list[str] = []
    fns = {name: (lambda inputs, name=name: calls.append(name)) for name in ("a", "b", "c")}
    time_interleaved(fns, [[0]], device="cpu", iters=6, warmup=0, max_batches=1)
    rounds = [calls[i:i + 3] for i in range(0, len(calls), 3)]
    assert len(rounds) == 6 and all(sorted(r) == ["a", "b", "c"] for r in rounds)
    assert Counter(r[1] for r in rounds) == {"a": 2, "b": 2, "c": 2}   # no side always in the middle
