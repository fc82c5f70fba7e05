"""Cross-entropy: shape cases, tolerances, and the FLOP and byte counts of the roofline.

`ignore` is the fraction of targets set to ignore_index (-100), exactly (at least one), at random positions;
the first target is never ignored, so the mean is defined. `scale` multiplies the standard-normal logits: the
`large-logits` case (scale 50) overflows exp() in fp32 for a kernel that skips the max subtraction.
"""
from __future__ import annotations

import torch

from kernelsearch.judge.family import FamilySpec
from kernelsearch.judge.problem import DTYPES, Case

IGNORE_INDEX = -100

CASES = [
    # small and odd sizes for correctness; the `cpu` ones are run by the interpreter on CPU machines
    Case("one", {"rows": 1, "vocab": 1}, "float32", cpu=True),
    Case("odd", {"rows": 7, "vocab": 33, "ignore": 0.3}, "float32", cpu=True),
    Case("no-ignore", {"rows": 5, "vocab": 1000}, "float32", cpu=True),
    Case("odd-bf16", {"rows": 16, "vocab": 1000, "ignore": 0.25}, "bfloat16", cpu=True),
    Case("odd-fp16", {"rows": 9, "vocab": 777, "ignore": 0.2}, "float16", cpu=True),
    Case("large-logits", {"rows": 6, "vocab": 300, "ignore": 0.2, "scale": 50.0}, "float32", cpu=True),
    Case("wide-odd", {"rows": 4, "vocab": 4099, "ignore": 0.25}, "float32", cpu=True),
    Case("vocab-fp32", {"rows": 1024, "vocab": 32000, "ignore": 0.1}, "float32"),
    Case("llama3-vocab", {"rows": 2048, "vocab": 128256, "ignore": 0.1}, "bfloat16"),
    Case("timed", {"rows": 8192, "vocab": 32000, "ignore": 0.1}, "bfloat16", timed=True),
]

TOLERANCES = {"float32": (1e-5, 1e-4), "float16": (1e-3, 2e-3), "bfloat16": (1e-2, 1.6e-2)}


def make_inputs(case: Case, gen: torch.Generator) -> list[torch.Tensor]:
    rows, vocab = case.params["rows"], case.params["vocab"]
    logits = torch.randn(rows, vocab, generator=gen) * case.params.get("scale", 2.0)
    targets = torch.randint(0, vocab, (rows,), generator=gen)
    # exactly round(ignore * rows) targets ignored (at least one when asked), never the first
    n_ignored = min(max(round(case.params.get("ignore", 0.0) * rows), 1 if "ignore" in case.params else 0),
                    rows - 1)
    targets[1 + torch.randperm(rows - 1, generator=gen)[:n_ignored]] = IGNORE_INDEX
    return [logits.to(DTYPES[case.dtype]), targets]


def init_inputs(case: Case) -> list:
    return [IGNORE_INDEX]


def flops(case: Case) -> float:
    # max, subtract, exp, sum per logit
    return 4.0 * case.params["rows"] * case.params["vocab"]


def bytes_moved(case: Case) -> float:
    # the fewest bytes: read the logits once and the int64 targets once (the scalar out is nothing)
    return case.params["rows"] * case.params["vocab"] * DTYPES[case.dtype].itemsize + 8.0 * case.params["rows"]


SPEC = FamilySpec(cases=CASES, tolerances=TOLERANCES, make_inputs=make_inputs, init_inputs=init_inputs,
                  flops=flops, bytes_moved=bytes_moved)
