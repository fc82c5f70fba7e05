"""sandbox/fair.py: contended slots go round robin over the problems waiting, not first come first served."""
from __future__ import annotations

import asyncio

import pytest

from kernelsearch.sandbox.fair import FairSlots


async def _starts(slots: FairSlots, asks: list[str]) -> list[str]:
    """Each ask holds a slot for a moment; the keys in the order their slots were given."""
    order: list[str] = []
    all_asked = asyncio.Event()

    async def one(key: str) -> None:
        async with slots.hold(key):
            order.append(key)
            await all_asked.wait()   # no slot is freed before every ask is in, however slow the machine
            await asyncio.sleep(0)

    tasks = []
    for key in asks:   # asked in this order
        tasks.append(asyncio.ensure_future(one(key)))
        await asyncio.sleep(0)
    all_asked.set()
    await asyncio.gather(*tasks)
    return order


def test_a_problem_that_asked_first_for_many_does_not_hold_every_slot():
    asks = ["A"] * 4 + ["B"] * 2 + ["C"]
    assert asyncio.run(_starts(FairSlots(1), asks)) == ["A", "B", "C", "A", "B", "A", "A"]
    # two slots: A's first two at once (uncontended), then the others take turns
    assert asyncio.run(_starts(FairSlots(2), asks)) == ["A", "A", "B", "C", "A", "B", "A"]
    # an asyncio.Semaphore, for comparison, serves them as they came
    assert asyncio.run(_starts(_Fifo(1), asks)) == asks


class _Fifo(FairSlots):
    def __init__(self, n):
        self._sem = asyncio.Semaphore(n)

    def hold(self, key):
        return self._sem


def test_a_cancelled_wait_passes_its_slot_on():
    async def go():
        slots = FairSlots(1)
        got = []
        async with slots.hold("A"):
            waiter = asyncio.ensure_future(_take(slots, "B", got))
            other = asyncio.ensure_future(_take(slots, "C", got))
            await asyncio.sleep(0)
            waiter.cancel()
        await other
        with pytest.raises(asyncio.CancelledError):
            await waiter
        assert got == ["C"] and slots.free == 1 and not slots._waiting

    asyncio.run(go())


async def _take(slots, key, got):
    async with slots.hold(key):
        got.append(key)
