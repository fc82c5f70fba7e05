"""The timing stage's n input slots of a side are cut from one block of the runner's (judge/runner.py `op_inputs`
with `sets`), so the judge maps one IPC segment a side, not one a slot: each segment costs the judge a
cuIpcOpenMemHandle (about a millisecond) and, when the runner closes inside the timing lease, its close; rmsnorm's
timing stage has 128 slots a side. On the CPU the slots are bytes, not IPC: GPU only."""
from __future__ import annotations

import pytest
import torch

from kernelsearch.judge.client import spawn_local

gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="GPU only: the slots are CUDA IPC segments")


@gpu
def test_a_sides_slots_are_one_ipc_segment_and_do_not_overlap():
    r = spawn_local("reference")
    try:
        reply, _ = r.request({"op": "setup", "mode": "cuda", "threads": 1, "gpu_memory_fraction": 0.5})
        assert "error" not in reply, reply
        big = {"alloc": {"dtype": "float32", "shape": [4096, 4096]}}   # 64 MiB: each its own cudaMalloc without
        small = {"alloc": {"dtype": "bfloat16", "shape": [3, 5]}}
        reply, _ = r.request({"op": "inputs", "sets": [{"slot": k, "values": [big, small, big]} for k in range(16)]})
        assert "error" not in reply, reply
        bigs = [d["ipc"] for s in reply["sets"] for j, d in enumerate(s) if j != 1]
        assert len({d["seg"] for d in bigs}) == 1, f"{len(reply['segs'])} segments for 32 large inputs"
        offs = sorted(d["off"] for d in bigs)
        assert all(o % 512 == 0 for o in offs)
        assert all(b - a >= 64 << 20 for a, b in zip(offs, offs[1:]))   # no two inputs share bytes
        assert len(reply["segs"]) <= 2   # the large pool's block, and the small pool's for the small inputs
    finally:
        r.close()
