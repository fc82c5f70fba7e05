"""Reachability in a family's search space: how many ideas the offline provider needs to get from one point to
another (a plain kernel to the tuned starter), walking the graph its ideas and branches can walk.

One step is one idea on a seed at `p` (agent/offline.py, families/space.py SearchSpace.applicable/branches): a
`Move` that applies at `p` and lands on a feasible point of another kernel than `p`'s, coded either as stated
(branch 0) or with one tuning knob the move does not set changed to another value (a later branch), where that
variant is feasible and renders a different kernel from the idea as stated. A point is reached when its kernel (the
rendered body) is the target's: two parameter sets that differ only in knobs their variant ignores are the same kernel.

What the walk leaves out (so a path found here is the fewest ideas the space allows, not what a run will do): which
branches the coder's random draw picks, the lineage rule that an idea tried on an ancestor is not proposed again
(a path that repeats a move says so: `repeats`), and the run's other kernels.
"""
from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kernelsearch.families.space import SearchSpace


@dataclass(frozen=True)
class Step:
    move: str                       # the idea's title
    branch: tuple[str, Any] | None  # the tuning knob a later branch changed, and its value; None: the idea as stated
    params: dict[str, Any]          # where the step lands


@dataclass(frozen=True)
class Reach:
    found: bool
    path: tuple[Step, ...]   # the steps, first to last (empty when the start is the target's kernel already)
    explored: int            # points the walk visited
    depth: int               # how deep it looked (the path's length where found)

    @property
    def repeats(self) -> list[str]:
        """Moves the path uses more than once (a run's lineage rule would not propose them a second time)."""
        titles = [s.move for s in self.path]
        return sorted({t for t in titles if titles.count(t) > 1})


class _Walk:
    """The space's kernels and verdicts, kept as hashes and flags (the space's own caches keep whole bodies)."""

    def __init__(self, space: SearchSpace, cases: Sequence | None, branched: bool = True):
        self.space, self.branched = space, branched
        self.cases = list(space.cases if cases is None else cases)
        self.keys = list(space.params)
        self._body: dict[tuple, bytes] = {}
        self._ok: dict[tuple, bool] = {}

    def key(self, p: dict[str, Any]) -> tuple:
        return tuple(p[k] for k in self.keys)

    def body(self, p: dict[str, Any], key: tuple | None = None) -> bytes:
        key = self.key(p) if key is None else key
        if key not in self._body:
            self._body[key] = hashlib.blake2b(self.space.template(p).encode(), digest_size=16).digest()
        return self._body[key]

    def feasible(self, p: dict[str, Any], key: tuple | None = None) -> bool:
        key = self.key(p) if key is None else key
        if key not in self._ok:
            self._ok[key] = all(self.space.limits(p, c) is None for c in self.cases)
        return self._ok[key]

    def steps(self, p: dict[str, Any]):
        """(move title, branch change or None, landing point) for every kernel one idea on `p` may write."""
        sp = self.space
        here = self.body(p)
        for move in sp.moves:
            if not move.when(p):
                continue
            new = {**p, **move.changes}
            if new == p or not self.feasible(new):
                continue
            stated = self.body(new)
            if stated == here:   # a knob the seed's variant ignores: the provider does not propose it
                continue
            yield move.title, None, new
            if not self.branched:
                continue
            for k in sp.tuning:
                if k in move.changes:
                    continue
                for v in sp.params[k]:
                    if v == new[k]:
                        continue
                    cand = {**new, k: v}
                    ck = self.key(cand)
                    if not self.feasible(cand, ck):
                        continue
                    if self.body(cand, ck) != stated:
                        yield move.title, (k, v), cand


def shortest_path(space: SearchSpace, start: dict[str, Any], target: dict[str, Any], max_depth: int = 6,
                  cases: Sequence | None = None, max_points: int = 400_000, branched: bool = True) -> Reach:
    """The fewest ideas from `start` to the kernel `target` renders, breadth first over the idea graph (module
    docstring), looking at most `max_depth` ideas deep and at most `max_points` points; `cases`: the problem's
    (the space's own by default), where a point must be feasible at every one. `branched=False`: ideas coded as
    stated only (one branch an idea, as the `sequential` strategy codes them)."""
    w = _Walk(space, cases, branched)
    goal = w.body(target)
    start = {**space.default, **start}
    k0 = w.key(start)
    back: dict[tuple, tuple[tuple, Step] | None] = {k0: None}

    def path_to(k: tuple) -> tuple[Step, ...]:
        out = []
        while back[k] is not None:
            k, step = back[k]
            out.append(step)
        return tuple(reversed(out))

    if w.body(start, k0) == goal:
        return Reach(True, (), 1, 0)
    frontier = [start]
    for depth in range(1, max_depth + 1):
        nxt = []
        for p in frontier:
            pk = w.key(p)
            for title, branch, q in w.steps(p):
                qk = w.key(q)
                if qk in back:
                    continue
                back[qk] = (pk, Step(title, branch, q))
                if w.body(q, qk) == goal:
                    return Reach(True, path_to(qk), len(back), depth)
                nxt.append(q)
                if len(back) >= max_points:
                    return Reach(False, (), len(back), depth)
        if not nxt:
            return Reach(False, (), len(back), depth)
        frontier = nxt
    return Reach(False, (), len(back), max_depth)
