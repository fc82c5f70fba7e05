"""Per-case tolerances (FamilySpec.case_tolerance): matmul's fp32 atol grows with K, so an honest fp32 summation
order passes its fp32 case (K = 1024), while TF32 or bf16 precision, or a dropped K chunk, still fails there."""
from __future__ import annotations

import pytest
import torch

from kernelsearch.families import load_family
from kernelsearch.families.matmul.spec import TOLERANCES
from kernelsearch.judge.correctness import compare
from kernelsearch.judge.numerics import references


@pytest.fixture(scope="module")
def fp32_case():
    """The matmul fp32 case (1024^3) as the judge sees it: inputs, the float32 and float64 references, tolerance."""
    problem = load_family("matmul")
    case = next(c for c in problem.cases if c.name == "fp32")
    a, b = problem.build_inputs(case, seed=3, device="cpu")
    want, want_hi = references(problem.module.Model(), [a, b])
    return problem, case, a, b, want, want_hi


def _blocked(a, b, chunk):
    """An fp32 sum over K chunks, each chunk's product added to an fp32 accumulator, as a tiled kernel does."""
    acc = torch.zeros(a.shape[0], b.shape[1])
    for k in range(0, a.shape[1], chunk):
        acc += a[:, k:k + chunk] @ b[k:k + chunk]
    return acc


def _sequential(a, b):
    """One k at a time, every step rounded to fp32: the order of an fp32 `ieee` tl.dot (an FMA chain), the worst
    one measured (H200, tiled 64x64x32: max abs 1.99e-4 at K = 1024)."""
    acc = torch.zeros(a.shape[0], b.shape[1])
    for k in range(a.shape[1]):
        acc.addcmul_(a[:, k:k + 1], b[k:k + 1])
    return acc


def _tf32(x):
    """x rounded to TF32's 10-bit mantissa (to nearest even), as tensor cores read fp32 inputs."""
    i = x.contiguous().view(torch.int32)
    return ((i + 0x0FFF + ((i >> 13) & 1)) & ~0x1FFF).view(torch.float32)


def test_honest_fp32_orders_pass_at_k_1024(fp32_case):
    problem, case, a, b, want, want_hi = fp32_case
    atol, rtol = problem.tolerance(case)
    assert atol > TOLERANCES["float32"][0]     # the hook is what judges this case
    for chunk in (16, 32, 64):
        got = _blocked(a, b, chunk)
        c = compare(got, want, want_hi, atol, rtol)
        assert c.ok, f"blocked {chunk}: {c.reason}"
    seq = _sequential(a, b)
    c = compare(seq, want, want_hi, atol, rtol)
    assert c.ok, c.reason
    assert c.max_abs * 2 < atol                 # with a margin, not by luck
    # past the flat fp32 atol the family had: only rtol * |ref| covered these errors, so an output near 0 failed
    # an honest kernel (1 of 1M values on an H200)
    assert c.max_abs > TOLERANCES["float32"][0]


def test_lower_precision_and_dropped_k_fail_at_k_1024(fp32_case):
    problem, case, a, b, want, want_hi = fp32_case
    atol, rtol = problem.tolerance(case)
    tf32 = compare(_tf32(a) @ _tf32(b), want, want_hi, atol, rtol)
    assert not tf32.ok
    assert tf32.mismatches > a.shape[0] * b.shape[1] // 2     # most values, not a few near the line
    bf16 = a.bfloat16().float() @ b.bfloat16().float()
    assert not compare(bf16, want, want_hi, atol, rtol).ok
    assert not compare(a[:, :-32] @ b[:-32], want, want_hi, atol, rtol).ok


def test_other_cases_and_families_keep_their_dtype_tolerance():
    matmul = load_family("matmul")
    for case in matmul.cases:
        if case.params["k"] <= 64 or case.dtype != "float32":
            assert matmul.tolerance(case) == matmul.tolerance(case.dtype)
    assert matmul.stability_tolerance(next(c for c in matmul.cases if c.name == "fp32"))[0] == pytest.approx(
        10 * 16 * 2.0 ** -24 * 1024)
    softmax = load_family("softmax")
    assert softmax.case_tolerance is None
    assert all(softmax.tolerance(c) == softmax.tolerance(c.dtype) for c in softmax.cases)
