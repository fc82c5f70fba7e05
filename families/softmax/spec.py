"""Softmax: shape cases, tolerances, and the FLOP and byte counts of the roofline."""
from __future__ import annotations

import torch

from kernelsearch.judge.family import FamilySpec
from kernelsearch.judge.problem import DTYPES, Case

CASES = [
    # small and odd sizes for correctness; the `cpu` ones are run by the interpreter on CPU machines
    Case("one", {"rows": 1, "cols": 1}, "float32", cpu=True),
    Case("odd", {"rows": 7, "cols": 33}, "float32", cpu=True),
    Case("odd-bf16", {"rows": 5, "cols": 1000}, "bfloat16", cpu=True),
    Case("wide-odd", {"rows": 3, "cols": 4099}, "float32", cpu=True),
    Case("mid", {"rows": 64, "cols": 1000}, "float32", cpu=True),
    # inputs past 88 overflow exp() in fp32 unless the row max is subtracted first (see wrong/)
    Case("large", {"rows": 4, "cols": 300, "scale": 50.0}, "float32", cpu=True),
    Case("vocab-fp32", {"rows": 257, "cols": 32000}, "float32"),
    Case("timed", {"rows": 4096, "cols": 32000}, "bfloat16", timed=True),
]

TOLERANCES = {"float32": (1e-6, 1e-4), "bfloat16": (1e-3, 1.6e-2)}


def make_inputs(case: Case, gen: torch.Generator) -> list[torch.Tensor]:
    x = torch.randn(case.params["rows"], case.params["cols"], generator=gen) * case.params.get("scale", 4.0)
    return [x.to(DTYPES[case.dtype])]


def init_inputs(case: Case) -> list:
    return []


def flops(case: Case) -> float:
    # max, subtract, exp, sum, divide: about 5 per element; softmax is memory-bound on every GPU
    return 5.0 * case.params["rows"] * case.params["cols"]


def bytes_moved(case: Case) -> float:
    # the fewest bytes: read the input once, write the output once
    return 2.0 * case.params["rows"] * case.params["cols"] * DTYPES[case.dtype].itemsize


SPEC = FamilySpec(cases=CASES, tolerances=TOLERANCES, make_inputs=make_inputs, init_inputs=init_inputs,
                  flops=flops, bytes_moved=bytes_moved)
