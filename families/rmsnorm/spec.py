"""RMSNorm: shape cases, tolerances, and the FLOP and byte counts of the roofline."""
from __future__ import annotations

import math

import torch

from kernelsearch.judge.family import FamilySpec
from kernelsearch.judge.problem import DTYPES, Case

EPS = 1e-6

CASES = [
    # small and odd sizes for correctness; the `cpu` ones are run by the interpreter on CPU machines
    Case("one", {"rows": 1, "cols": 1}, "float32", cpu=True),
    Case("odd", {"rows": 7, "cols": 33}, "float32", cpu=True),
    Case("batched", {"batch": 2, "rows": 3, "cols": 96}, "float32", cpu=True),
    Case("odd-bf16", {"rows": 5, "cols": 1000}, "bfloat16", cpu=True),
    Case("odd-fp16", {"rows": 3, "cols": 777}, "float16", cpu=True),
    Case("wide-odd", {"rows": 3, "cols": 4099}, "float32", cpu=True),
    Case("llama70b-fp32", {"rows": 1024, "cols": 8192}, "float32"),
    Case("wide-fp16", {"rows": 333, "cols": 16384}, "float16"),
    Case("timed", {"rows": 8192, "cols": 4096}, "bfloat16", timed=True),
]

TOLERANCES = {"float32": (1e-5, 1e-4), "float16": (1e-3, 2e-3), "bfloat16": (1e-2, 1.6e-2)}


def _shape(case: Case) -> tuple[int, ...]:
    p = case.params
    return (p["batch"], p["rows"], p["cols"]) if "batch" in p else (p["rows"], p["cols"])


def make_inputs(case: Case, gen: torch.Generator) -> list[torch.Tensor]:
    return [torch.randn(_shape(case), generator=gen).to(DTYPES[case.dtype])]


def init_inputs(case: Case) -> list:
    return [case.params["cols"], EPS, case.dtype]


def flops(case: Case) -> float:
    # square, sum, scale by rstd, scale by weight: about 4 per element
    return 4.0 * math.prod(_shape(case))


def bytes_moved(case: Case) -> float:
    # the fewest bytes: read x once, write y once, read the weight once
    size = DTYPES[case.dtype].itemsize
    return 2.0 * math.prod(_shape(case)) * size + case.params["cols"] * size


SPEC = FamilySpec(cases=CASES, tolerances=TOLERANCES, make_inputs=make_inputs, init_inputs=init_inputs,
                  flops=flops, bytes_moved=bytes_moved)
