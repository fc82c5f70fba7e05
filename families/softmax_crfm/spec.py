"""Softmax (CRFM): shape cases, tolerances, and the FLOP and byte counts of the roofline.

fp32 only, at an honest fp32 tolerance (1e-4 relative): no bf16, fp16 or TF32 inside a kernel passes it.
Inputs are standard normal, as in KernelBench; the `large` case (scale 50) overflows exp() in fp32 for a
kernel that skips the max subtraction.
"""
from __future__ import annotations

import torch

from kernelsearch.judge.family import FamilySpec
from kernelsearch.judge.problem import DTYPES, Case

CASES = [
    # small and odd sizes for correctness; the `cpu` ones are run by the interpreter on CPU machines
    Case("one", {"rows": 1, "cols": 1}, "float32", cpu=True),
    Case("odd", {"rows": 7, "cols": 33}, "float32", cpu=True),
    Case("large", {"rows": 4, "cols": 300, "scale": 50.0}, "float32", cpu=True),
    Case("wide-odd", {"rows": 3, "cols": 70001}, "float32", cpu=True),
    Case("half", {"rows": 1024, "cols": 65536}, "float32"),
    Case("timed", {"rows": 4096, "cols": 65536}, "float32", timed=True),
]

# atol far below the smallest probabilities that matter (a 65536-wide row's are about 1e-5): the check is
# relative, 1e-4
TOLERANCES = {"float32": (1e-9, 1e-4)}


def make_inputs(case: Case, gen: torch.Generator) -> list[torch.Tensor]:
    x = torch.randn(case.params["rows"], case.params["cols"], generator=gen) * case.params.get("scale", 1.0)
    return [x.to(DTYPES[case.dtype])]


def init_inputs(case: Case) -> list:
    return []


def flops(case: Case) -> float:
    # max, subtract, exp, sum, divide: about 5 per element; memory-bound on every GPU
    return 5.0 * case.params["rows"] * case.params["cols"]


def bytes_moved(case: Case) -> float:
    # the fewest bytes: read the input once, write the output once
    return 2.0 * case.params["rows"] * case.params["cols"] * DTYPES[case.dtype].itemsize


SPEC = FamilySpec(cases=CASES, tolerances=TOLERANCES, make_inputs=make_inputs, init_inputs=init_inputs,
                  flops=flops, bytes_moved=bytes_moved)
