"""Sum over the last dimension: shape cases, tolerances, and the FLOP and byte counts of the roofline.

The fp32 atol is 1e-4: a sum of n standard normals is about sqrt(n) in size, and any fp32 summation order
(tree, chunked, split across programs) differs from the exact sum by about 1e-7 * n at worst.
"""
from __future__ import annotations

import math

import torch

from kernelsearch.judge.family import FamilySpec
from kernelsearch.judge.problem import DTYPES, Case

CASES = [
    # small and odd sizes for correctness; the `cpu` ones are run by the interpreter on CPU machines
    Case("one", {"rows": 1, "cols": 1}, "float32", cpu=True),
    Case("odd", {"rows": 7, "cols": 33}, "float32", cpu=True),
    Case("batched", {"batch": 2, "rows": 3, "cols": 96}, "float32", cpu=True),
    Case("tall", {"rows": 300, "cols": 5}, "float32", cpu=True),
    Case("odd-bf16", {"rows": 5, "cols": 1000}, "bfloat16", cpu=True),
    Case("odd-fp16", {"rows": 3, "cols": 777}, "float16", cpu=True),
    Case("wide-odd", {"rows": 3, "cols": 4099}, "float32", cpu=True),
    Case("vocab-bf16", {"rows": 4096, "cols": 32000}, "bfloat16"),
    Case("few-wide", {"rows": 16, "cols": 1048576}, "float32"),
    Case("timed", {"rows": 8192, "cols": 8192}, "float32", timed=True),
]

TOLERANCES = {"float32": (1e-4, 1e-4), "float16": (1e-3, 2e-3), "bfloat16": (1e-2, 1.6e-2)}


def _shape(case: Case) -> tuple[int, ...]:
    p = case.params
    return (p["batch"], p["rows"], p["cols"]) if "batch" in p else (p["rows"], p["cols"])


def make_inputs(case: Case, gen: torch.Generator) -> list[torch.Tensor]:
    return [torch.randn(_shape(case), generator=gen).to(DTYPES[case.dtype])]


def init_inputs(case: Case) -> list:
    return []


def flops(case: Case) -> float:
    return float(math.prod(_shape(case)))


def bytes_moved(case: Case) -> float:
    # the fewest bytes: read x once, write one value per row
    n = math.prod(_shape(case))
    return (n + n / case.params["cols"]) * DTYPES[case.dtype].itemsize


SPEC = FamilySpec(cases=CASES, tolerances=TOLERANCES, make_inputs=make_inputs, init_inputs=init_inputs,
                  flops=flops, bytes_moved=bytes_moved)
