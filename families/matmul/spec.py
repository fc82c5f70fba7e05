"""Matmul: shape cases, tolerances, and the FLOP and byte counts of the roofline.

The interpreter computes bf16 tl.dot wrongly, so the `cpu` cases are fp32 and fp16; bf16 is checked on the GPU.
The `aligned` cases have 16-byte aligned row strides, so TMA variants take their TMA path on them.
"""
from __future__ import annotations

import torch

from kernelsearch.judge.family import FamilySpec
from kernelsearch.judge.problem import DEFAULT_TOLERANCES, DTYPES, Case

CASES = [
    # small and odd sizes for correctness; the `cpu` ones are run by the interpreter on CPU machines
    Case("one", {"m": 1, "n": 1, "k": 1}, "float32", cpu=True),
    Case("odd", {"m": 33, "n": 65, "k": 17}, "float32", cpu=True),
    Case("skinny", {"m": 5, "n": 300, "k": 64}, "float32", cpu=True),
    Case("odd-fp16", {"m": 100, "n": 37, "k": 129}, "float16", cpu=True),
    Case("aligned-fp32", {"m": 64, "n": 48, "k": 40}, "float32", cpu=True),
    Case("aligned-fp16", {"m": 130, "n": 264, "k": 72}, "float16", cpu=True),
    Case("odd-bf16", {"m": 1000, "n": 3000, "k": 777}, "bfloat16"),
    Case("fp32", {"m": 1024, "n": 1024, "k": 1024}, "float32"),
    Case("8192", {"m": 8192, "n": 8192, "k": 8192}, "bfloat16"),
    Case("timed", {"m": 4096, "n": 4096, "k": 4096}, "bfloat16", timed=True),
]

# products of bf16/fp16 values are exact in fp32; the error is the fp32 accumulation and the final rounding
TOLERANCES = {"float32": (1e-4, 1e-4), "float16": (1e-3, 2e-3), "bfloat16": (1e-2, 1.6e-2)}

# atol per unit of K, for products of unit-variance inputs (make_inputs: randn): an fp32 sum of K such products
# rounds with an error that grows about linearly with K (a random walk of roundings, each as large as the
# partial sum, itself ~sqrt(k)), and rtol does not cover the outputs that happen to be near 0. Worst order
# measured (CPU, 1024^2 outputs, float64 reference, 6 seeds at K=1024): sequential fp32 FMA, as an fp32 `ieee`
# tl.dot computes it, 2.36e-4 at K=1024 (H200 tiled 64x64x32: 1.99e-4, failing the flat 1e-4), 8.8e-4 at 4096,
# 1.9e-3 at 8192 (~3.9 * 2^-24 * K); blocked sums (K chunks of 16/32/64) and torch.matmul 0.3e-4..5e-4. This is
# 16 * 2^-24 * K, four times the worst (9.8e-4 at K=1024), while inputs rounded to TF32 (10-bit mantissas, a
# known cheat on fp32 cases) are off by up to 0.048 at K=1024 and bf16 inputs by 0.37.
K_ATOL = 16 * 2.0 ** -24


def case_tolerance(case: Case) -> tuple[float, float]:
    """(atol, rtol) of a case: its dtype's, with atol raised to K_ATOL * K where the K-long fp32 sum needs it (the
    fp32 case, K = 1024: 9.8e-4; the 16-bit cases keep theirs, which cover K up to 10240; float64, at a model's
    shape, sums in float64 and keeps its own)."""
    atol, rtol = TOLERANCES.get(case.dtype) or DEFAULT_TOLERANCES[case.dtype]
    if case.dtype not in TOLERANCES:
        return atol, rtol
    return max(atol, K_ATOL * case.params["k"]), rtol


def make_inputs(case: Case, gen: torch.Generator) -> list[torch.Tensor]:
    p = case.params
    dtype = DTYPES[case.dtype]
    return [torch.randn(p["m"], p["k"], generator=gen).to(dtype), torch.randn(p["k"], p["n"], generator=gen).to(dtype)]


def init_inputs(case: Case) -> list:
    return []


def flops(case: Case) -> float:
    p = case.params
    return 2.0 * p["m"] * p["n"] * p["k"]


def bytes_moved(case: Case) -> float:
    # the fewest bytes: read A and B once, write C once
    p = case.params
    return (p["m"] * p["k"] + p["k"] * p["n"] + p["m"] * p["n"]) * DTYPES[case.dtype].itemsize


SPEC = FamilySpec(cases=CASES, tolerances=TOLERANCES, case_tolerance=case_tolerance, make_inputs=make_inputs,
                  init_inputs=init_inputs, flops=flops, bytes_moved=bytes_moved)
