"""Reachability (families/reach.py): every family's tuned starter is a few ideas of the offline provider away from
the family's plainest kernel (bench/strategies_gpu.py's PLAIN, bench/reach.py's PLAIN_MORE), through feasible points
only, so a search started there can find it. Figures (the table): bench/reach.py."""
from __future__ import annotations

import dataclasses

import pytest

from bench.reach import PLAINS, space_of
from kernelsearch.families.reach import shortest_path

# the fewest ideas from the plain point to the default's kernel, with branches (branching) and coded as stated
# (sequential: one kernel an idea); measured by bench/reach.py, the bound one above where it is not already small
BOUNDS = {   # family: (branched, stated)
    "softmax": (2, 2), "rmsnorm": (3, 4), "matmul": (3, 5), "flash_attention": (2, 2), "layernorm": (3, 4),
    "layernorm_crfm": (3, 4), "cross_entropy": (2, 3), "softmax_crfm": (2, 3), "reduce": (2, 2),
    "rotary_embedding": (2, 2), "flash_attention_causal": (3, 5), "fused_mlp": (5, None),
}


@pytest.mark.slow   # 10 s or more on a 2-core machine: CI runs it (make test-slow)
@pytest.mark.parametrize("family", sorted(PLAINS))
def test_the_default_is_a_few_ideas_from_the_plain_kernel(family):
    space = space_of(family)
    start = {**space.default, **PLAINS[family]}
    assert space.feasible(start), space.infeasible(start)
    branched, stated = BOUNDS[family]
    r = shortest_path(space, start, space.default, max_depth=branched)
    assert r.found, f"{family}: the default is not within {branched} ideas of the plain point"
    assert len(r.path) <= branched
    assert all(space.feasible(s.params) for s in r.path)
    assert space.body(r.path[-1].params) == space.body(space.default)
    if stated is not None:
        r = shortest_path(space, start, space.default, max_depth=stated, branched=False)
        assert r.found and len(r.path) <= stated, f"{family}: not within {stated} ideas coded as stated"
        assert all(s.branch is None for s in r.path)


def test_a_move_set_that_cannot_reach_the_default_is_caught():
    # softmax without its pipelined move: no idea leads to the pipelined kernel (the starter), within the bound
    # with branches nor within 4 ideas coded as stated
    space = space_of("softmax")
    cut = dataclasses.replace(space, moves=[m for m in space.moves if m.changes.get("variant") != "pipelined"])
    start = {**space.default, **PLAINS["softmax"]}
    assert not shortest_path(cut, start, space.default, max_depth=BOUNDS["softmax"][0]).found
    assert not shortest_path(cut, start, space.default, max_depth=4, branched=False).found


def test_a_kernel_is_reached_by_what_it_renders():
    # the pipelined softmax sizes its block to the row: BLOCK 1024 and 2048 are one kernel (the starter's)
    space = space_of("softmax")
    near = {**space.default, "BLOCK": 1024}
    assert shortest_path(space, near, space.default, max_depth=1).path == ()
