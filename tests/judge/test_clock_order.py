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
