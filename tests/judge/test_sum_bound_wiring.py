"""The judge applies the long-sum bound (numerics.within_sum_bound) to a failing fp32 comparison of the correctness
cases (harness `_judge_values` with `sums`): an output off by less than an honest fp32 sum of K terms makes passes
where the tolerance and eager's error alone would fail it; one further off still fails; without `sums` (the other
checks) nothing changes."""
from __future__ import annotations

from types import SimpleNamespace

import torch

from kernelsearch.judge.harness import Judge
from kernelsearch.judge.numerics import to_hi
from kernelsearch.judge.problem import Case


class _MatVec(torch.nn.Module):
    def __init__(self, w: torch.Tensor):
        super().__init__()
        self.w = torch.nn.Parameter(w)

    def forward(self, x):
        return x @ self.w


def _judge(off: float, sums: bool):
    g = torch.Generator().manual_seed(0)
    k = 1 << 16
    x, w = torch.rand(4, k, generator=g), torch.rand(k, 3, generator=g)
    ref = _MatVec(w)
    with torch.no_grad():
        want = ref(x)
        want_hi = ref.double()(*to_hi([x], torch.float64))
    ref.float()
    got = (want_hi * (1 + off)).float()
    me = SimpleNamespace(_eager_abs={}, _eager_decided=set())
    case = Case("long", {}, "float32")
    return Judge._judge_values(me, case, got, want, want_hi, 1e-4, 1e-4, 1 << 20,
                               sums=(ref, [x], torch.float64) if sums else None)


def test_an_output_within_an_fp32_sums_error_passes_only_with_the_bound():
    # K = 65536 positive terms: the bound is atol + rtol|y| + 4u(sqrt(K)|y| + S) ~ 1e-4 + 1.6e-4 |y|
    assert _judge(1.3e-4, sums=True).ok
    assert not _judge(1.3e-4, sums=False).ok
    assert not _judge(3e-4, sums=True).ok
