"""Rotary embedding: shape cases, tolerances, and the FLOP and byte counts of the roofline.

Positions start at a random offset below 4096, so every case has angles far from zero in every frequency band.
"""
from __future__ import annotations

import torch

from kernelsearch.judge.family import FamilySpec
from kernelsearch.judge.problem import DTYPES, Case

CASES = [
    # small and odd sizes for correctness; the `cpu` ones are run by the interpreter on CPU machines
    Case("tiny", {"batch": 1, "heads": 1, "seq": 1, "head_dim": 2}, "float32", cpu=True),
    Case("odd", {"batch": 2, "heads": 3, "seq": 5, "head_dim": 16}, "float32", cpu=True),
    Case("odd-half", {"batch": 1, "heads": 2, "seq": 7, "head_dim": 24}, "float32", cpu=True),
    Case("odd-bf16", {"batch": 2, "heads": 2, "seq": 9, "head_dim": 64}, "bfloat16", cpu=True),
    Case("odd-fp16", {"batch": 1, "heads": 3, "seq": 33, "head_dim": 128}, "float16", cpu=True),
    Case("llama-fp32", {"batch": 1, "heads": 32, "seq": 2048, "head_dim": 128}, "float32"),
    Case("dim96-fp16", {"batch": 2, "heads": 16, "seq": 1000, "head_dim": 96}, "float16"),
    Case("timed", {"batch": 4, "heads": 32, "seq": 4096, "head_dim": 128}, "bfloat16", timed=True),
]

TOLERANCES = {"float32": (1e-5, 1e-4), "float16": (1e-3, 2e-3), "bfloat16": (1e-2, 1.6e-2)}


def _dims(case: Case) -> tuple[int, int, int, int]:
    p = case.params
    return p["batch"], p["heads"], p["seq"], p["head_dim"]


def make_inputs(case: Case, gen: torch.Generator) -> list[torch.Tensor]:
    b, h, s, d = _dims(case)
    dtype = DTYPES[case.dtype]
    x = torch.randn(b, h, s, d, generator=gen)
    start = int(torch.randint(0, 4096, (1,), generator=gen))
    inv_freq = 1.0 / (10000 ** (torch.arange(0, d, 2, dtype=torch.float64) / d))
    freqs = torch.outer(torch.arange(start, start + s, dtype=torch.float64), inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)
    return [x.to(dtype), emb.cos().to(dtype), emb.sin().to(dtype)]


def init_inputs(case: Case) -> list:
    return []


def flops(case: Case) -> float:
    # two multiplies and an add per element
    b, h, s, d = _dims(case)
    return 3.0 * b * h * s * d


def bytes_moved(case: Case) -> float:
    # the fewest bytes: read x once, write the output once, read cos and sin once
    b, h, s, d = _dims(case)
    return (2.0 * b * h * s * d + 2.0 * s * d) * DTYPES[case.dtype].itemsize


SPEC = FamilySpec(cases=CASES, tolerances=TOLERANCES, make_inputs=make_inputs, init_inputs=init_inputs,
                  flops=flops, bytes_moved=bytes_moved)
