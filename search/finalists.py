"""Finalists re-timed: the kernels a round's parents and the run's best are chosen from are timed again.

One evaluation's time of a kernel can be lucky (on an H100 two evaluations of one kernel differ by 3-10 %, on the
CPU interpreter far more), and the kernel whose timing was luckiest is the one that seeds the next round and the
one the run reports (the winner's curse). So before a round's parents are chosen (from round 1 on) and before the
run finishes, the finalists (`strategies.finalists`: the `seeds_per_round + 1` kernels branching would seed from,
the best first) are evaluated again through the same evaluator pool, one re-timing each a pass, until each has
`search.timings` timings (its evaluation and the re-timings) or its timings so far agree within
`search.timings_agree` (a further one would move their median by less than that: two readings 1 % apart bound it to
1 %), and again while that changes who the finalists are; a kernel's time is then the median of its ok timings
(store/clock.py).

A re-timing is an evaluation of the same code in the pool's re-timing mode (EvalSettings.retime: the timed case
checked once, then the clock, which checks every output of every timed call; no other correctness case, range,
stability or sm_90 stage: the kernel passed them in its first evaluation), stored as another Evaluation row of the
kernel with `purpose` "retime": never its verdict, never queued work, never redone on resume (a kernel
with its re-timings is not a finalist to re-time again; one whose re-timing was not ok is no longer ranked).
Re-timings are not new kernels, so they do not count against `budgets.evaluations`; they start only while the
wall-time budget lasts.

Where the pool can (`retime_group`: the local pool, and Ray's on one actor), the finalists due a re-timing are
timed side by side: one evaluation, one timing stage, each batch's sides interleaved (judge/group.py), up to
GROUP_MAX at once; a pass's re-timings form its groups. A finalist the group could not time
is re-timed alone by the pool, so every row is its kernel's own reading. A pool without it (the tests' fakes)
gets each re-timing as an evaluation of its own.
"""
from __future__ import annotations

import asyncio
from typing import Callable

from sqlalchemy.engine import Engine

from kernelsearch.judge.settings import GROUP_MAX
from kernelsearch.search import strategies
from kernelsearch.store import queries as q
from kernelsearch.store import session_scope
from kernelsearch.store.clock import RETIME

EventSink = Callable[[str, dict], None]


class Retimer:
    """Re-times a run's finalists through the pool (`await retimer(when)`)."""

    def __init__(self, engine: Engine, run_id: int, pool, problem_ref, *, timings: int, finalists: int,
                 emit: EventSink, may_start: Callable[[], bool], stored: Callable[[], None], agree: float = 0.0):
        self.engine, self.run_id, self.pool, self.ref = engine, run_id, pool, problem_ref
        self.timings, self.n, self.agree = timings, finalists, agree
        self.emit, self.may_start, self.stored = emit, may_start, stored

    def due(self) -> list[tuple[int, int]]:
        """(kernel id, re-timings it still needs) for each finalist short of its timings whose timings so far do
        not agree within `agree`, best first."""
        if self.timings <= 1:
            return []
        with session_scope(self.engine) as s:
            tree = q.tree(s, self.run_id)
        out = []
        for kid in strategies.finalists(tree, self.n):
            left = self.timings - 1 - tree.kernels[kid].retimes
            t = tree.clock.times.get(kid)
            if left > 0 and self.agree > 0 and t is not None and t.timings >= 2 and t.spread <= self.agree:
                left = 0   # its timings agree: another would move their median by less than `agree`
            if left > 0:
                out.append((kid, left))
        return out

    async def __call__(self, when: str) -> int:
        """Re-time the finalists that need it, again while re-timing changes who the finalists are (a lucky kernel
        re-timed slower lets the next one in), so the best is never left on one timing; returns how many
        re-timings were stored. Each kernel is re-timed at most `timings - 1` times, so this ends."""
        stored = 0
        while True:
            due = self.due()
            if not due:
                return stored
            with session_scope(self.engine) as s:
                codes = {kid: q.get_kernel(s, kid).code for kid, _ in due}
            self.emit("retiming", {"when": when, "kernels": [kid for kid, _ in due], "n": sum(n for _, n in due)})
            kids = [kid for kid, _ in due]   # one re-timing each this pass, then what is due is read again
            if hasattr(self.pool, "retime_group"):   # side by side, in one stage
                groups = [kids[j:j + GROUP_MAX] for j in range(0, len(kids), GROUP_MAX)]
                done = sum(ok for oks in await asyncio.gather(*(self._group(g, codes) for g in groups)) for ok in oks)
            else:   # each its own evaluation, started in the order of the ranking
                done = sum(await asyncio.gather(*(self._retime(kid, codes[kid]) for kid in kids)))
            if not done:   # none started (the wall-time budget): the finalists stay as they are
                return stored
            stored += done

    async def _group(self, kids: list[int], codes: dict[int, str]) -> list[bool]:
        results = await self.pool.retime_group([codes[k] for k in kids], self.ref, may_start=self.may_start)
        return [self._store(k, r) for k, r in zip(kids, results)]

    async def _retime(self, kernel_id: int, code: str) -> bool:
        return self._store(kernel_id, await self.pool.evaluate(code, self.ref, may_start=self.may_start, retime=True))

    def _store(self, kernel_id: int, result) -> bool:
        if result is None:   # the wall-time budget ran out while it waited: nothing measured, nothing stored
            return False
        row = result.row(kernel_id)
        row.purpose = RETIME
        with session_scope(self.engine) as s:
            q.add_evaluation(s, row)
        self.stored()
        self.emit("retimed", {"kernel_id": kernel_id, "status": result.status.value, "time_ms": result.time_ms,
                              "reason": result.reason, "group": result.detail.get("retime_group")})
        return True
