"""LayerNorm (CRFM): shape cases, tolerances, and the FLOP and byte counts of the roofline.

fp32 only, at an honest fp32 tolerance: no bf16, fp16 or TF32 inside a kernel passes it. The `offset` cases have
a mean of 128 (see layernorm/spec.py: the one-sweep variance fails them; stable kernels pass with room).
The `wide` case spans several statistics slices of the split kernel, so their merge is checked on the CPU.
"""
from __future__ import annotations

import math

import torch

from kernelsearch.judge.family import FamilySpec
from kernelsearch.judge.problem import DTYPES, Case

CASES = [
    # small and odd sizes for correctness; the `cpu` ones are run by the interpreter on CPU machines
    Case("small", {"shape": [2, 4, 8, 8]}, "float32", cpu=True),
    Case("odd", {"shape": [3, 5, 7, 9]}, "float32", cpu=True),
    Case("offset", {"shape": [2, 3, 16, 16], "mean": 128.0}, "float32", cpu=True),
    Case("wide", {"shape": [2, 4, 128, 130]}, "float32", cpu=True),
    Case("offset-large", {"shape": [4, 64, 256, 256], "mean": 128.0}, "float32"),
    Case("timed", {"shape": [16, 64, 256, 256]}, "float32", timed=True),
]

# atol 5e-5: the mean of values near 128 rounds to fp32 with an ulp of 1.5e-5 (layernorm/spec.py)
TOLERANCES = {"float32": (5e-5, 1e-4)}


def make_inputs(case: Case, gen: torch.Generator) -> list[torch.Tensor]:
    x = torch.randn(case.params["shape"], generator=gen) + case.params.get("mean", 0.0)
    return [x.to(DTYPES[case.dtype])]


def init_inputs(case: Case) -> list:
    return [tuple(case.params["shape"][1:])]


def flops(case: Case) -> float:
    # sum, subtract, square, sum, scale, scale, shift: about 7 per element
    return 7.0 * math.prod(case.params["shape"])


def bytes_moved(case: Case) -> float:
    # the fewest bytes: read x once, write y once, read the weight and bias once
    size = DTYPES[case.dtype].itemsize
    return (2.0 * math.prod(case.params["shape"]) + 2.0 * math.prod(case.params["shape"][1:])) * size


SPEC = FamilySpec(cases=CASES, tolerances=TOLERANCES, make_inputs=make_inputs, init_inputs=init_inputs,
                  flops=flops, bytes_moved=bytes_moved)
