"""Groups of evaluations in the pool: a group's one evaluation split into its candidates' results, and first
evaluations queued beyond the free slots gathered into groups (judge/group.py)."""
from __future__ import annotations

import asyncio
import json
import math
from dataclasses import dataclass, field
from typing import Callable

from kernelsearch.judge.result import EvalResult
from kernelsearch.judge.status import Status


def split_group(joint: EvalResult | None, size: int) -> list[EvalResult | None]:
    """One result per candidate from the group's evaluation: each its judge's result (judge/group.py) with the
    evaluation's device, wall time and lease wait. None for every candidate where the evaluation did not start;
    a harness_error naming the group for every one where it ended without the group's results (the judge died or
    timed out: the pool then evaluates each alone)."""
    if joint is None:
        return [None] * size
    group = joint.detail.get("group")
    if not isinstance(group, list) or len(group) != size:
        why = f"group of {size}: {joint.status.value}: {joint.reason}; each is evaluated alone"
        return [EvalResult.failure(Status.harness_error, why, stage=joint.stage or "worker")
                for _ in range(size)]
    out = []
    for entry in group:
        r = EvalResult.from_json(json.dumps(entry))
        r.gpu_index, r.wall_s = joint.gpu_index, joint.wall_s
        r.detail["lease_wait_s"] = joint.detail.get("lease_wait_s")
        r.detail["output"] = joint.detail.get("output")
        out.append(r)
    return out


def mates_to_take(waiting: int, free: int, most: int) -> int:
    """How many of `waiting` first evaluations of the same problem join one that got a slot while `free` other slots
    are free: none while the free slots take them all; else the excess spread over the free slots and this one,
    up to `most` (a group's size less this one). So a backlog drains in groups and an idle slot is never left idle
    for a group's sake."""
    excess = waiting - free
    return 0 if excess <= 0 else min(most, math.ceil(excess / (free + 1)))


@dataclass(eq=False)
class Waiting:
    """A first evaluation waiting for a slot, which another may take into its group (`claimed`)."""
    source: str
    may_start: Callable[[], bool] | None
    future: asyncio.Future = field(default_factory=lambda: asyncio.get_running_loop().create_future())
    claimed: bool = False


class FirstGroups:
    """The pool's gathering of first evaluations into groups (EvalSettings.group_first): a first evaluation that
    gets a slot while more of its problem wait than slots are free takes some of them into its evaluation; each is
    checked with its own verdict, those that pass are timed side by side (judge/group.py). One the group did not
    time (its timing failed, the judge died) is evaluated alone. Mixed into EvaluatorPool (sandbox/pool.py)."""

    async def _first_grouped(self, source: str, problem_ref: dict,
                             may_start: Callable[[], bool] | None) -> EvalResult | None:
        key = json.dumps(problem_ref, sort_keys=True)
        queue: list[Waiting] = self._waiting.setdefault(key, [])
        me = Waiting(source, may_start)
        queue.append(me)
        slot = asyncio.ensure_future(self._slots.acquire())
        try:
            await asyncio.wait({slot, me.future}, return_when=asyncio.FIRST_COMPLETED)
        except BaseException:   # cancelled while waiting: a slot already granted goes back
            if slot.done() and not slot.cancelled():
                self._slots.release()
            else:
                slot.cancel()
            raise
        finally:
            if me in queue:
                queue.remove(me)
        if me.claimed:   # taken into another's group: its result comes from there
            if slot.done() and not slot.cancelled():
                self._slots.release()
            else:
                slot.cancel()
            return await me.future
        mates: list[Waiting] = []
        try:
            self._busy += 1
            free = max(0, self.s.concurrency - self._busy)
            most = await self._fitting(problem_ref, self.s.evaluation.group_first) - 1
            for w in list(queue)[:mates_to_take(len(queue), free, most)]:
                queue.remove(w)
                w.claimed = True
                if w.may_start is not None and not w.may_start():
                    w.future.set_result(None)   # the wall-time budget: it does not start
                else:
                    mates.append(w)
            sources = [source, *(m.source for m in mates)]
            joint = await self._in_slot(sources, problem_ref, may_start, False)
        except BaseException as err:
            for m in mates:
                if not m.future.done():
                    m.future.set_exception(err if isinstance(err, Exception) else RuntimeError("cancelled"))
            raise
        finally:
            self._busy -= 1
            self._slots.release()
        results = split_group(joint, len(sources)) if mates else [joint]
        if mates and joint is not None:   # what the group did not judge, each alone (the group's slot is free now)
            redo = [i for i, r in enumerate(results) if r is None or r.status == Status.harness_error]
            starts = [may_start, *(m.may_start for m in mates)]   # each its own (the run's events name the kernel)
            again = await asyncio.gather(*(self._admitted([sources[i]], problem_ref, starts[i], False)
                                           for i in redo), return_exceptions=True)
            for i, r in zip(redo, again):
                results[i] = r
        for m, r in zip(mates, results[1:]):
            if m.future.done():
                continue
            if isinstance(r, BaseException):
                m.future.set_exception(r)
            else:
                m.future.set_result(r)
        if isinstance(results[0], BaseException):
            raise results[0]
        return results[0]
