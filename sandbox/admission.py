"""What may run on one GPU at once: the device lease (one timing at a time, alone) and the memory gate (evaluations
admitted while their estimated bytes fit). sandbox/pool.py holds one of each per GPU."""
from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess

# The timing stage's shared part (`prep`) closes the device to new shared holders at once, so the others' checks
# drain while its slots, graphs and priming batch are made, not after. A GPU pool's leases only (sandbox/pool.py);
# KS_CLOCK_EARLY_DRAIN=0 keeps the old way there too. H100, bench_harness 12 evaluations at concurrency 8, in one
# call: 21.9 a minute with it, 19.7 without (the judge primed in both), the timing stage held 1.44 s against 1.89
EARLY_DRAIN = os.environ.get("KS_CLOCK_EARLY_DRAIN", "1") != "0"
GATE_SHARE = 0.9   # of a GPU's memory, what the evaluations admitted at once may be estimated to hold


def gate_capacity(total: int, sides: int) -> tuple[int, int]:
    """(what the evaluations admitted at once on a GPU of `total` bytes may be estimated to hold, the reserve kept
    aside beyond it). The reserve is for the one timing stage a device runs at a time (the `timing` lease): it sizes
    its batches to the memory it finds free, up to BATCH_BYTES of inputs and outputs a side (judge/clock.py), more
    than any evaluation's estimate, so without a reserve the evaluations admitted beside it, still growing, ran out
    of memory (an H100 KernelBench batch, 2026-12-07: 5 of 41 evaluations, in the reference's priming batch). A
    timing stage that needs more than the reserve counts the excess in its own estimate (judge/memory.py
    `footprint_bytes`). Never more than half of the share: a small GPU still admits evaluations."""
    from kernelsearch.judge.clock import BATCH_BYTES

    share = int(GATE_SHARE * total)
    reserve = min(sides * BATCH_BYTES, share // 2)
    return share - reserve, reserve


class DeviceLease:
    """One GPU's lease: many `shared` holders (correctness checks) or one `exclusive` holder (a timing), never
    both, so nothing else runs on a device while a candidate is timed on it. A waiting timing goes first: no new
    shared holder is admitted while one waits, and shared holds are short (one shape case each).

    `timing`, held around a whole timing stage (its slots, graphs and priming batch under `shared`, then its loop
    under `exclusive`): one evaluation's timing at a time per device. A timing stage sizes its batches to the memory
    it finds free (judge/memory.timing_calls: gigabytes of fresh inputs a side); two sizing at once each counted
    the other's share as free, and the second to allocate ran out of memory (issue 30: 1 of 16 harness evaluations,
    1 of 49 KernelBench ones). It is asked for holding no other lease, so it cannot wait on a holder of one.

    `prep`: the `timing` holder's shared hold (the pool asks it for the shared lease of a judge that holds `timing`).
    Admitted beside the shared holders, it keeps new ones off the device until `timing` is released (with
    `early_drain`), so their drain, which the exclusive loop waits for, runs beside the stage's own shared part.
    On an H100 the drain was 2.4 s of a 4.1 s timing stage (the longest shared hold in progress), and one timing
    stage at a time is what caps a device's evaluations a minute."""

    def __init__(self, early_drain: bool | None = None) -> None:
        self._cond = asyncio.Condition()
        self._shared = 0
        self._exclusive = False
        self._waiting = 0
        self._draining = False
        self._timing = asyncio.Lock()
        self.early_drain = EARLY_DRAIN if early_drain is None else early_drain

    async def acquire(self, kind: str) -> None:
        if kind == "timing":
            await self._timing.acquire()
            return
        async with self._cond:
            if kind == "exclusive":
                self._waiting += 1
                try:
                    await self._cond.wait_for(lambda: not self._exclusive and self._shared == 0)
                finally:
                    self._waiting -= 1
                self._exclusive = True
            elif kind == "shared":
                await self._cond.wait_for(lambda: not self._exclusive and self._waiting == 0 and not self._draining)
                self._shared += 1
            elif kind == "prep":   # without the early drain a shared hold as any other, as before it
                await self._cond.wait_for(lambda: not self._exclusive and (self.early_drain or self._waiting == 0))
                self._shared += 1
                self._draining = self.early_drain
            else:
                raise ValueError(f"lease kind must be shared, prep, exclusive or timing, not {kind!r}")

    def release(self, kind: str) -> None:
        if kind == "timing":
            self._timing.release()
            if self._draining:
                self._draining = False
                asyncio.get_running_loop().create_task(self._notify())
            return
        if kind == "exclusive":
            self._exclusive = False
        else:
            self._shared -= 1
        asyncio.get_running_loop().create_task(self._notify())

    async def _notify(self) -> None:
        async with self._cond:
            self._cond.notify_all()


class MemoryGate:
    """One GPU's memory, admitted by estimate (judge.memory.footprint_bytes): an evaluation starts when its
    estimate fits beside those running, in arrival order (a large one is not overtaken by small ones forever); one
    larger than the whole capacity runs alone. The judge's own plan (memory.plan_case) still sizes its work to the
    memory it measures free; the gate keeps that measurement from being taken by evaluations started after it."""

    def __init__(self, capacity: int) -> None:
        self.capacity = int(capacity)
        self.used = 0
        self._queue: list[object] = []
        self._cond = asyncio.Condition()

    @contextlib.asynccontextmanager
    async def hold(self, need: int):
        need = min(int(need), self.capacity)
        ticket = object()
        async with self._cond:
            self._queue.append(ticket)
            try:
                await self._cond.wait_for(lambda: self._queue[0] is ticket and self.used + need <= self.capacity)
            finally:
                self._queue.remove(ticket)
                self._cond.notify_all()
            self.used += need
        try:
            yield
        finally:
            async with self._cond:
                self.used -= need
                self._cond.notify_all()


def gpu_memory_bytes(gpu: int) -> int | None:
    """The GPU's total memory from nvidia-smi (the pool's process does not initialise CUDA); None if unknown."""
    try:
        query = ["nvidia-smi", "-i", str(gpu), "--query-gpu=memory.total", "--format=csv,noheader,nounits"]
        out = subprocess.run(query, capture_output=True, text=True, timeout=20)
        return int(float(out.stdout.strip().splitlines()[0]) * 2**20) if out.returncode == 0 else None
    except (OSError, ValueError, IndexError, subprocess.SubprocessError):
        return None
