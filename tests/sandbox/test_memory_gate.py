"""The pool's GPU memory admission (sandbox/admission.py MemoryGate, judge/memory.py footprint_bytes): evaluations
start only while their estimated bytes fit beside those running, in arrival order, and one larger than the whole
device runs alone."""
from __future__ import annotations

import asyncio

from kernelsearch.families import load_problem
from kernelsearch.judge.clock import BATCH_BYTES
from kernelsearch.judge.memory import EVAL_FIXED_BYTES, IN_COPIES, OUT_COPIES, footprint_bytes
from kernelsearch.sandbox.admission import GATE_SHARE, MemoryGate, gate_capacity
from kernelsearch.sandbox.pool import EvaluatorPool, PoolSettings


def test_gate_admits_by_bytes_in_order_and_runs_an_oversized_one_alone():
    gate = MemoryGate(100)
    log: list[tuple[str, str, int]] = []

    async def job(name: str, need: int, hold_s: float):
        async with gate.hold(need):
            log.append(("start", name, gate.used))
            assert gate.used <= gate.capacity
            await asyncio.sleep(hold_s)
        log.append(("end", name, gate.used))

    async def go():
        tasks = [asyncio.create_task(job("a", 60, 0.05))]
        await asyncio.sleep(0.01)
        tasks.append(asyncio.create_task(job("big", 70, 0.02)))    # does not fit beside a: waits
        await asyncio.sleep(0.01)
        tasks.append(asyncio.create_task(job("small", 10, 0.01)))  # would fit beside a, but big came first
        await asyncio.sleep(0.01)
        tasks.append(asyncio.create_task(job("huge", 500, 0.01)))  # over the capacity: alone
        await asyncio.gather(*tasks)

    asyncio.run(go())
    starts = [name for kind, name, _ in log if kind == "start"]
    assert starts == ["a", "big", "small", "huge"], log
    order = [(k, n) for k, n, _ in log]
    assert order.index(("start", "big")) > order.index(("end", "a"))
    huge_start = order.index(("start", "huge"))
    assert dict(((n, u) for k, n, u in log if k == "start"))["huge"] == 100   # the capacity, nothing else
    assert order.index(("end", "big")) < huge_start and order.index(("end", "small")) < huge_start
    assert gate.used == 0


def test_footprint_from_the_files_own_sizes_on_the_meta_device(tmp_path):
    prob = tmp_path / "big_relu.py"
    prob.write_text('''import torch
import torch.nn as nn

batch_size = 4096
dim = 393216


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.rand(batch_size, dim)]


def get_init_inputs():
    return []
''')
    elements = 4096 * 393216   # 6 GiB of fp32: never drawn (the meta device)
    assert footprint_bytes({"file": str(prob)}) == (IN_COPIES + OUT_COPIES) * 4 * elements + EVAL_FIXED_BYTES
    # a family, from its byte count at the timed case (softmax: 4096 x 32000 bf16 in and out, 500 MiB)
    softmax = load_problem("softmax")
    moved = softmax.bytes_moved(softmax.timed_case)
    assert moved == 2 * 4096 * 32000 * 2
    assert footprint_bytes({"builtin": "softmax"}) == OUT_COPIES * moved + EVAL_FIXED_BYTES
    assert footprint_bytes({"file": str(tmp_path / "missing.py")}) == EVAL_FIXED_BYTES
    # beside the gate's timing reserve: the 6 GiB file's timing stage (2 calls x 2 sides x 12 GiB) needs more than
    # the reserve, and its estimate counts the excess; softmax's (2 x 2 x 500 MiB) fits in it and adds nothing
    reserve = 2 * BATCH_BYTES
    need = 2 * 2 * 2 * 4 * elements
    assert footprint_bytes({"file": str(prob)}, 2, reserve) == footprint_bytes({"file": str(prob)}) + need - reserve
    assert footprint_bytes({"builtin": "softmax"}, 2, reserve) == footprint_bytes({"builtin": "softmax"})


def test_the_gate_keeps_a_timing_stage_s_batches_aside():
    """A timing stage sizes its batches to the memory it finds free (up to BATCH_BYTES a side), one stage a device
    at a time: the evaluations admitted beside it are estimated into what is left (an H100 KernelBench batch ran 5
    of 41 evaluations out of memory in the reference's priming batch before this)."""
    h100 = 80 * 2**30
    capacity, reserve = gate_capacity(h100, 2)
    assert reserve == 2 * BATCH_BYTES and capacity + reserve == int(GATE_SHARE * h100)
    # torch.compile's reference timed too: a third side (never more than half the share)
    assert gate_capacity(h100, 3)[1] == min(3 * BATCH_BYTES, int(GATE_SHARE * h100) // 2)
    small = 16 * 2**30
    assert gate_capacity(small, 2) == (int(GATE_SHARE * small) - int(GATE_SHARE * small) // 2,
                                       int(GATE_SHARE * small) // 2)   # at most half kept aside
    pool = EvaluatorPool(PoolSettings(mode="cuda", gpus=[0], gpu_memory_mb=80 * 1024))
    try:
        assert pool._gates[0].capacity == capacity and pool._reserve == reserve
    finally:
        pool.close()
