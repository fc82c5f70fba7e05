"""LayerNorm: shape cases, tolerances, and the FLOP and byte counts of the roofline.

The `offset` cases have a mean of 128 and a standard deviation of 1: there the one-sweep formula
E[x^2] - E[x]^2 loses about four digits in fp32 (it subtracts two numbers near 16384 to get one near 1). Against
the float64 reference it is off by 8 to 21 times the fp32 tolerance, while two-pass, Welford and split kernels
stay at 0.1 to 0.4 of it (16 seeds, interpreter). The fp32 atol is 5e-5, not 1e-5: any fp32 kernel rounds the
mean of values near 128 to fp32 (ulp 1.5e-5), and x - mean carries that error into every output.
"""
from __future__ import annotations

import math

import torch

from kernelsearch.judge.family import FamilySpec
from kernelsearch.judge.problem import DTYPES, Case

EPS = 1e-5

CASES = [
    # small and odd sizes for correctness; the `cpu` ones are run by the interpreter on CPU machines
    Case("one", {"rows": 1, "cols": 1}, "float32", cpu=True),
    Case("odd", {"rows": 7, "cols": 33}, "float32", cpu=True),
    Case("batched", {"batch": 2, "rows": 3, "cols": 96}, "float32", cpu=True),
    Case("odd-bf16", {"rows": 5, "cols": 1000}, "bfloat16", cpu=True),
    Case("odd-fp16", {"rows": 3, "cols": 777}, "float16", cpu=True),
    Case("offset", {"rows": 8, "cols": 1000, "mean": 128.0}, "float32", cpu=True),
    Case("wide-odd", {"rows": 3, "cols": 4099}, "float32", cpu=True),
    Case("llama70b-fp32", {"rows": 1024, "cols": 8192}, "float32"),
    Case("offset-wide", {"rows": 64, "cols": 16384, "mean": 128.0}, "float32"),
    Case("timed", {"rows": 8192, "cols": 4096}, "bfloat16", timed=True),
]

TOLERANCES = {"float32": (5e-5, 1e-4), "float16": (1e-3, 2e-3), "bfloat16": (1e-2, 1.6e-2)}


def _shape(case: Case) -> tuple[int, ...]:
    p = case.params
    return (p["batch"], p["rows"], p["cols"]) if "batch" in p else (p["rows"], p["cols"])


def make_inputs(case: Case, gen: torch.Generator) -> list[torch.Tensor]:
    x = torch.randn(_shape(case), generator=gen) + case.params.get("mean", 0.0)
    return [x.to(DTYPES[case.dtype])]


def init_inputs(case: Case) -> list:
    return [case.params["cols"], EPS, case.dtype]


def flops(case: Case) -> float:
    # sum, subtract, square, sum, scale, scale, shift: about 7 per element
    return 7.0 * math.prod(_shape(case))


def bytes_moved(case: Case) -> float:
    # the fewest bytes: read x once, write y once, read the weight and bias once
    size = DTYPES[case.dtype].itemsize
    return 2.0 * math.prod(_shape(case)) * size + 2 * case.params["cols"] * size


SPEC = FamilySpec(cases=CASES, tolerances=TOLERANCES, make_inputs=make_inputs, init_inputs=init_inputs,
                  flops=flops, bytes_moved=bytes_moved)
