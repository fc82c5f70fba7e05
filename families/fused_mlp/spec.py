"""SwiGLU MLP: shape cases, tolerances, and the FLOP and byte counts of the roofline.

The interpreter computes bf16 tl.dot wrongly, so the `cpu` cases are fp32 and fp16; bf16 is checked on the GPU.
Weights are nn.Linear's default initialisation (uniform in +-1/sqrt(fan_in)), drawn by the reference.
"""
from __future__ import annotations

import torch

from kernelsearch.judge.family import FamilySpec
from kernelsearch.judge.problem import DTYPES, Case

CASES = [
    # small and odd sizes for correctness; the `cpu` ones are run by the interpreter on CPU machines
    Case("one", {"tokens": 1, "hidden": 1, "intermediate": 1}, "float32", cpu=True),
    Case("odd", {"tokens": 7, "hidden": 33, "intermediate": 65}, "float32", cpu=True),
    Case("batched", {"batch": 2, "tokens": 5, "hidden": 64, "intermediate": 96}, "float32", cpu=True),
    Case("odd-fp16", {"tokens": 50, "hidden": 96, "intermediate": 200}, "float16", cpu=True),
    Case("aligned-fp16", {"tokens": 130, "hidden": 128, "intermediate": 264}, "float16", cpu=True),
    Case("odd-bf16", {"tokens": 1000, "hidden": 1000, "intermediate": 3000}, "bfloat16"),
    Case("llama3-8b-slice", {"tokens": 2048, "hidden": 4096, "intermediate": 14336}, "bfloat16"),
    Case("timed", {"tokens": 4096, "hidden": 4096, "intermediate": 11008}, "bfloat16", timed=True),
]

TOLERANCES = {"float32": (1e-5, 1e-4), "float16": (1e-3, 2e-3), "bfloat16": (1e-2, 1.6e-2)}


def _tokens(case: Case) -> int:
    return case.params["tokens"] * case.params.get("batch", 1)


def make_inputs(case: Case, gen: torch.Generator) -> list[torch.Tensor]:
    p = case.params
    shape = (p["batch"], p["tokens"], p["hidden"]) if "batch" in p else (p["tokens"], p["hidden"])
    return [torch.randn(shape, generator=gen).to(DTYPES[case.dtype])]


def init_inputs(case: Case) -> list:
    return [case.params["hidden"], case.params["intermediate"], case.dtype]


def flops(case: Case) -> float:
    # three GEMMs of 2 * T * H * I each (the SiLU and the product are noise)
    return 6.0 * _tokens(case) * case.params["hidden"] * case.params["intermediate"]


def bytes_moved(case: Case) -> float:
    # the fewest bytes: x, the three weights and the output once (h can stay on chip only in a one-kernel
    # design; a two-kernel one adds 2 * T * I)
    t, h, i = _tokens(case), case.params["hidden"], case.params["intermediate"]
    return (2.0 * t * h + 3.0 * h * i) * DTYPES[case.dtype].itemsize


SPEC = FamilySpec(cases=CASES, tolerances=TOLERANCES, make_inputs=make_inputs, init_inputs=init_inputs,
                  flops=flops, bytes_moved=bytes_moved)
