"""The generated pooling family (generators/pooling.py): max and average pooling over 1-3 dims matched from the
traced reference, its kernels agreeing with torch on the interpreter (padding, dilation, ceil_mode,
count_include_pad, divisor_override), the pooling arguments read from the candidate's own constructor, a wrong
kernel failing, infeasible points refused and graphs outside the pattern left alone."""
from __future__ import annotations

import pytest
import torch

from kernelsearch.generators.match import Unmatched, match_problem
from kernelsearch.generators.pooling import match_pooling
from kernelsearch.generators.trace import trace_problem
from kernelsearch.judge.problem import load_source_module
from tests.generators.test_match import _agrees, _n, _problem

_INIT = ("    def __init__(self, {sig}):\n        super(Model, self).__init__()\n"
         "        self.pool = nn.{cls}({call})\n    def forward(self, x):\n        return self.pool(x)")


def _module(tmp_path, name, cls, sig, call, init, shape, sizes):
    return _problem(tmp_path, name, _INIT.format(sig=sig, cls=cls, call=call), f"[torch.randn({shape})]",
                    init=init, sizes=sizes)


def _points(space):
    d = space.default
    return [d, {**d, "TILE_W": 16, "BLOCK": 256, "num_warps": 2}, {**d, "UNROLL": "row", "BLOCK": 128,
                                                                      "num_warps": 1}]


CASES = [   # name, class, constructor signature and call, init inputs, input shape, summary
    ("max1d", "MaxPool1d", "k, s, p, d", "kernel_size=k, stride=s, padding=p, dilation=d, ceil_mode=True",
     "[4, 2, 1, 2]", "batch, 5, length",
     "max pooling 1-D of 3x5x37 float32 (kernel 4, stride 2, padding 1, dilation 2, ceil_mode) -> 3x5x17"),
    ("max2d", "MaxPool2d", "k", "k, stride=(2, 1), padding=(1, 0), dilation=(1, 2), ceil_mode=True",
     "[(3, 2)]", "batch, 2, length, 13",
     "max pooling 2-D of 3x2x37x13 float32 (kernel 3x2, stride 2x1, padding 1x0, dilation 1x2, ceil_mode) "
     "-> 3x2x19x11"),
    ("max3d", "MaxPool3d", "k", "k, 2, 1, 2", "[3]", "2, 3, 9, 10, length",
     "max pooling 3-D of 2x3x9x10x37 float32 (kernel 3, stride 2, padding 1, dilation 2) -> 2x3x4x4x18"),
    ("avg1d", "AvgPool1d", "k", "k, 2, 2, ceil_mode=True, count_include_pad=False", "[5]", "batch, 5, length",
     "avg pooling 1-D of 3x5x37 float32 (kernel 5, stride 2, padding 2, ceil_mode, count_include_pad=False) "
     "-> 3x5x19"),
    ("avg2d", "AvgPool2d", "k, s=None", "k, s, 1, ceil_mode=True", "[3, 2]", "batch, 4, 12, length",
     "avg pooling 2-D of 3x4x12x37 float32 (kernel 3, stride 2, padding 1, ceil_mode) -> 3x4x7x19"),
    ("avg2d_div", "AvgPool2d", "k", "k, padding=1, divisor_override=7", "[3]", "batch, 4, 12, length",
     "avg pooling 2-D of 3x4x12x37 float32 (kernel 3, stride 3, padding 1, divisor 7) -> 3x4x4x13"),
    ("avg3d", "AvgPool3d", "k", "k, 2, 1, count_include_pad=False", "[3]", "2, 3, 7, 10, length",
     "avg pooling 3-D of 2x3x7x10x37 float32 (kernel 3, stride 2, padding 1, count_include_pad=False) "
     "-> 2x3x4x5x19"),
]


@pytest.mark.parametrize("name,cls,sig,call,init,shape,summary", CASES, ids=[c[0] for c in CASES])
def test_pooling_is_matched_and_its_kernels_agree(tmp_path, name, cls, sig, call, init, shape, summary):
    problem = _module(tmp_path, name, cls, sig, call, init, shape, "batch = 3\nlength = 37")
    m = match_problem(problem)
    assert (m.kind, m.summary) == ("pooling", summary)
    case = next(c for c in problem.cases if c.timed)   # the traced shape (37 long: odd, past a tile's row)
    for p in _points(m.space):
        assert m.space.feasible(p), (p, m.space.infeasible(p))
        _agrees(problem, m.space.render(p), case=case, atol=1e-5, rtol=1e-5)


def test_the_arguments_are_the_candidates_constructor_s_and_a_functional_call_is_baked(tmp_path):
    # KernelBench's 2-D average pooling builds its model with kernel 3, 5 and 11 across its cases: the candidate
    # pools with what its constructor is given, not with the traced 5
    problem = _module(tmp_path, "avg_k", "AvgPool2d", "kernel_size", "kernel_size=kernel_size", "[5]",
                      "batch, 3, 20, 23", "batch = 2")
    m = match_problem(problem)
    code = m.space.render(m.space.default)
    assert "self._pool = _pool_params(kernel_size=kernel_size)" in code
    mod = load_source_module(code, f"ks_test_pool_{next(_n)}")
    x = torch.randn(2, 3, 20, 23)
    for k in (2, 3, 7):
        got = mod.ModelNew(k)(x)
        torch.testing.assert_close(got, torch.nn.functional.avg_pool2d(x, k), atol=1e-5, rtol=1e-5)

    fn = _problem(tmp_path, "max_fn", "    def forward(self, x):\n        return torch.nn.functional.max_pool2d("
                  "x, 3, 2, 1)", "[torch.randn(batch, 3, 15, 16)]", sizes="batch = 2")
    m = match_problem(fn)
    code = m.space.render(m.space.default)
    assert "self._pool = ((3, 3), (2, 2), (1, 1), (1, 1), False, True, None)" in code
    _agrees(fn, code, case=next(c for c in fn.cases if c.timed))


def test_a_wrong_kernel_fails_and_infeasible_points_are_refused(tmp_path):
    problem = _module(tmp_path, "max2", "MaxPool2d", "k", "k, 2, 1", "[3]", "batch, 3, 15, 16", "batch = 2")
    m = match_problem(problem)
    case = next(c for c in problem.cases if c.timed)
    code = m.space.render(m.space.default)
    wrong = code.replace("w0 = ow * SW - PW", "w0 = ow * SW")   # the left padding forgotten
    assert wrong != code
    with pytest.raises(AssertionError):
        _agrees(problem, wrong, case=case)
    space = m.space
    assert "16 outputs a thread" in space.infeasible({**space.default, "BLOCK": 2048, "num_warps": 4})
    assert "idle" in space.infeasible({**space.default, "BLOCK": 128, "num_warps": 8})
    assert space.infeasible({**space.default, "TILE_W": 64})   # a 64-wide row at an 8-wide last dim
    assert not space.infeasible({**space.default, "TILE_W": 8})
    assert all(space.feasible(new) for _, new in space.applicable(space.default))

    # an 11x11 window (KernelBench's 2-D average pooling): the starter holds 2 outputs a thread, 8 would spill
    big = _module(tmp_path, "avg11", "AvgPool2d", "k", "k", "[11]", "batch, 2, 23, 24", "batch = 2")
    s = match_problem(big).space
    assert s.default["BLOCK"] == 256 and s.default["num_warps"] == 4
    assert "968 loads a thread" in s.infeasible({**s.default, "BLOCK": 1024})


def test_graphs_outside_the_pattern_are_not_pooling(tmp_path):
    idx = _problem(tmp_path, "max_idx", "    def __init__(self):\n        super().__init__()\n"
                   "        self.pool = nn.MaxPool2d(2, return_indices=True)\n"
                   "    def forward(self, x):\n        return self.pool(x)[1]",
                   "[torch.randn(batch, 3, 16, 16)]", sizes="batch = 2")
    with pytest.raises(Unmatched, match=r"returns the indices of max pooling \(max_pool2d_with_indices\); the "
                                        r"offline pooling family computes the values only"):
        match_problem(idx)
    relu = _problem(tmp_path, "pool_relu", "    def forward(self, x):\n        return torch.relu("
                    "torch.nn.functional.avg_pool2d(x, 2))", "[torch.randn(batch, 3, 16, 16)]", sizes="batch = 2")
    assert match_pooling(trace_problem(relu)) is None
    ints = _problem(tmp_path, "two_pools", "    def forward(self, x):\n        return torch.nn.functional.avg_pool2d("
                    "torch.nn.functional.max_pool2d(x, 2), 2)", "[torch.randn(batch, 3, 16, 16)]",
                    sizes="batch = 2")
    assert match_pooling(trace_problem(ints)) is None
