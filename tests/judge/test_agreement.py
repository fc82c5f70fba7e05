"""The timed outputs' device-side check (correctness.agreement) says what `compare` says, for the cases it takes."""
from __future__ import annotations

import pytest
import torch

from kernelsearch.judge.correctness import agreement, compare

ATOL, RTOL = 1e-5, 1e-4


def _both(got, want_hi, like=None):
    like = want_hi.to(got.dtype) if like is None else like
    flag = agreement(got, like, want_hi, ATOL, RTOL)
    return (None if flag is None else bool(flag)), compare(got, like, want_hi, ATOL, RTOL).ok


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_agrees_with_compare_on_values(dtype):
    h = torch.randn(37, 129, dtype=torch.float64).float()
    good = h.to(dtype)
    bad = good.clone()
    bad[5, 7] += 1.0
    nan = good.clone()
    nan[0, 0] = float("nan")
    tol = ATOL if dtype == torch.float32 else 1e-2
    for got, expect in ((good, True), (bad, False), (nan, False)):
        flag = agreement(got, good, h, tol, RTOL if dtype == torch.float32 else 1e-2)
        assert bool(flag) is expect
        assert compare(got, good, h, tol, RTOL if dtype == torch.float32 else 1e-2).ok is expect


def test_non_finite_only_where_the_reference_has_it():
    h = torch.randn(64)
    h[3], h[9] = float("inf"), float("nan")
    same = h.clone()
    assert _both(same, h) == (False, True)   # no quick yes: compare, which the caller runs then, passes it
    finite_instead = h.clone()
    finite_instead[3] = 1.0
    assert _both(finite_instead, h) == (False, False)
    wrong_sign = h.clone()
    wrong_sign[3] = float("-inf")
    assert _both(wrong_sign, h) == (False, False)


def test_structure_it_does_not_judge_goes_to_compare():
    h = torch.randn(8, 8)
    assert agreement(h[:4], h, h, ATOL, RTOL) is None                       # shape
    assert agreement(h.double(), h, h, ATOL, RTOL) is None                  # dtype
    assert agreement((h, h), h, h, ATOL, RTOL) is None                      # count
    assert agreement(h.to(torch.int32), h.to(torch.int32), h, ATOL, RTOL) is None   # not floating

    class Sub(torch.Tensor):
        pass

    assert agreement(h.as_subclass(Sub), h, h, ATOL, RTOL) is None          # a subclass is never a plain answer
    assert bool(agreement((h, h + 1), (h, h + 1), (h, h + 1), ATOL, RTOL))   # tuples, every output
    assert not bool(agreement((h, h), (h, h + 1), (h, h + 1), ATOL, RTOL))
