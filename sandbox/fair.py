"""Slots shared fairly by the problems of one process (the Ray backend's: `bench --jobs N` on a cluster).

FIFO slots (an asyncio.Semaphore) serve whoever asked first: a problem that queued a whole round of branches holds
every slot until that round is through, while another problem's first branch waits behind it. Here, when slots are
contended, a freed slot goes to the waiting key (a problem) that was given one least recently: round robin over the
problems waiting, each problem's own requests in the order they came. Uncontended, a slot is taken at once.
"""
from __future__ import annotations

import asyncio
import contextlib
import itertools
from typing import Hashable


class FairSlots:
    def __init__(self, n: int) -> None:
        self.free = n
        self._ticks = itertools.count()
        self._last: dict[Hashable, int] = {}   # key -> when it was last given a slot
        self._waiting: list[tuple[Hashable, asyncio.Future]] = []   # in arrival order

    @contextlib.asynccontextmanager
    async def hold(self, key: Hashable):
        if self.free > 0 and not self._waiting:
            self.free -= 1
            self._last[key] = next(self._ticks)
        else:
            fut = asyncio.get_running_loop().create_future()
            self._waiting.append((key, fut))
            try:
                await fut   # the slot was handed over by _release
            except asyncio.CancelledError:
                if fut.done() and not fut.cancelled():   # handed over as it was cancelled: it goes on
                    self._release()
                elif (key, fut) in self._waiting:
                    self._waiting.remove((key, fut))
                raise
        try:
            yield
        finally:
            self._release()

    def _release(self) -> None:
        while self._waiting:
            i = min(range(len(self._waiting)), key=lambda j: (self._last.get(self._waiting[j][0], -1), j))
            key, fut = self._waiting.pop(i)
            if fut.done():   # cancelled while it waited
                continue
            self._last[key] = next(self._ticks)
            fut.set_result(None)
            return
        self.free += 1
