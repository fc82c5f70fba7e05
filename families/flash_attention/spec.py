"""Attention (full): shape cases, tolerances, and the FLOP and byte counts of the roofline.

The interpreter computes bf16 tl.dot wrongly, so the `cpu` cases are fp32 and fp16; bf16 is checked on the GPU.
Sequence lengths that are not multiples of the key block (37, 130) check the padding mask; head dims 40 and 80
check a head dimension padded to a power of two. flash_attention_causal uses the same shapes, causal.
"""
from __future__ import annotations

import torch

from kernelsearch.judge.family import FamilySpec
from kernelsearch.judge.problem import DTYPES, Case

_SHAPES = [
    # (name, batch, heads, seq, head_dim, dtype, where): where is "cpu" (interpreter too), "gpu" or "timed"
    ("tiny", 1, 1, 1, 16, "float32", "cpu"),
    ("odd", 1, 2, 37, 32, "float32", "cpu"),
    ("dim40", 1, 1, 20, 40, "float32", "cpu"),
    ("blocks-fp16", 1, 2, 130, 64, "float16", "cpu"),
    ("odd-bf16", 2, 8, 1000, 64, "bfloat16", "gpu"),
    ("dim80-fp16", 1, 16, 2048, 80, "float16", "gpu"),
    ("fp32", 1, 4, 512, 128, "float32", "gpu"),
    ("timed", 4, 32, 4096, 128, "bfloat16", "timed"),
]


def cases(causal: bool) -> list[Case]:
    return [Case(name, {"batch": b, "heads": h, "seq": s, "head_dim": d, "causal": causal}, dtype,
                 timed=where == "timed", cpu=where == "cpu")
            for name, b, h, s, d, dtype, where in _SHAPES]


CASES = cases(causal=False)

# fp16: P is rounded to fp16 before P @ V, as every flash kernel does (relative 5e-4 per weight)
TOLERANCES = {"float32": (1e-5, 1e-4), "float16": (1e-3, 2e-3), "bfloat16": (1e-2, 1.6e-2)}


def make_inputs(case: Case, gen: torch.Generator) -> list[torch.Tensor]:
    p = case.params
    shape = (p["batch"], p["heads"], p["seq"], p["head_dim"])
    return [torch.randn(shape, generator=gen).to(DTYPES[case.dtype]) for _ in range(3)]


def init_inputs(case: Case) -> list:
    return [case.params["causal"]]


def flops(case: Case) -> float:
    # q k^T and p v: 2 * 2 * S^2 * D per (batch, head); a causal mask skips half
    p = case.params
    full = 4.0 * p["batch"] * p["heads"] * p["seq"] ** 2 * p["head_dim"]
    return full / 2 if p["causal"] else full


def bytes_moved(case: Case) -> float:
    # the fewest bytes: read q, k, v once, write o once
    p = case.params
    return 4.0 * p["batch"] * p["heads"] * p["seq"] * p["head_dim"] * DTYPES[case.dtype].itemsize


SPEC = FamilySpec(cases=CASES, tolerances=TOLERANCES, make_inputs=make_inputs, init_inputs=init_inputs,
                  flops=flops, bytes_moved=bytes_moved)
