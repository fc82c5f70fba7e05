"""generators/matched_extra.py: the generated kernels for argmax/argmin, log-softmax, and instance / group norm,
matched from KernelBench-format problems written here; they agree with the reference on the interpreter at the
default point and at others of their spaces, a deliberately wrong kernel fails, infeasible points are refused and a
graph just outside each pattern is not matched."""
from __future__ import annotations

import pytest
import torch

from kernelsearch.generators.match import Unmatched, match_problem
from kernelsearch.judge.correctness import compare
from kernelsearch.judge.problem import load_source_module
from tests.generators.test_match import _agrees, _problem

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


def test_log_softmax_rows_in_registers_or_swept_online(tmp_path):
    short = _problem(tmp_path, "lsm_short", "    def forward(self, x):\n        return torch.log_softmax(x, dim=1)",
                     "[torch.randn(batch, 300) * 5]", sizes="batch = 10")
    m = match_problem(short)
    assert (m.kind, m.summary) == ("log_softmax", "log-softmax over dim 1 of 10x300 float32")
    assert m.space.default["variant"] == "registers" and m.space.default["ROWS"] == 4
    for p in (m.space.default, {**m.space.default, "ROWS": 1, "num_warps": 1},
              {**m.space.default, "variant": "online", "BLOCK": 256, "num_warps": 2, "cache_hints": True}):
        _agrees(short, m.space.render(p))
    assert m.space.infeasible({**m.space.default, "variant": "online", "BLOCK": 256, "num_warps": 16})

    wide = _problem(tmp_path, "lsm_wide", "    def __init__(self, dim: int = 1):\n        super().__init__()\n"
                    "        self.dim = dim\n    def forward(self, x):\n"
                    "        return torch.log_softmax(x, dim=self.dim)",
                    "[torch.rand(batch, dim) * 20]", sizes="batch = 3\ndim = 20000")
    m = match_problem(wide)
    assert m.summary == "log-softmax over dim 1 of 3x20000 float32" and m.space.default["variant"] == "online"
    assert "over 16384" in m.space.infeasible({**m.space.default, "variant": "registers"})
    for case in wide.cases_for("cpu"):   # (the interpreter's cases: 313 and 5001 wide)
        _agrees(wide, m.space.render(m.space.default), case=case)
    code = m.space.render({**m.space.default, "BLOCK": 512, "num_warps": 4})
    _agrees(wide, code, case=wide.cases_for("cpu")[-1])
    # the running sum must be rescaled when the running max moves
    with pytest.raises(AssertionError):
        _agrees(wide, code.replace("s = s * tl.exp(m - m_safe) + ", "s = s + "), case=wide.cases_for("cpu")[-1])

    # along dim 0 (moved last by the host), bfloat16
    first = _problem(tmp_path, "lsm_dim0", "    def forward(self, x):\n        return torch.log_softmax(x, dim=0)",
                     "[torch.randn(33, 4, 5, dtype=torch.bfloat16)]")
    m = match_problem(first)
    assert m.summary == "log-softmax over dim 0 of 33x4x5 bfloat16"
    _agrees(first, m.space.render(m.space.default), atol=2e-2, rtol=2e-2)


def test_log_softmax_then_a_scale_is_not_matched(tmp_path):
    scaled = _problem(tmp_path, "lsm_scaled", "    def forward(self, x):\n        return torch.log_softmax(x, 1) * 2",
                      "[torch.randn(4, 9)]")
    with pytest.raises(Unmatched):
        match_problem(scaled)


def test_an_input_unsqueezed_to_broadcast_along_rows_is_read_by_the_pointwise_kernel(tmp_path):
    """diag(A) @ B written as A.unsqueeze(1) * B (KernelBench 12): A is read at offs // M; a (C, 1, 1) parameter
    the same way along H*W; an input read both unsqueezed and as a row (N == M) is two operands."""
    diag = _problem(tmp_path, "diag_mm", "    def forward(self, A, B):\n        return A.unsqueeze(1) * B",
                    "[torch.randn(N), torch.randn(N, M)]", sizes="M = 40\nN = 40")
    m = match_problem(diag)
    assert (m.kind, m.summary) == ("pointwise", "elementwise mul on 40x40 float32")
    code = m.space.render(m.space.default)
    assert "return pointwise(B, A.unsqueeze(1))" in code and "(offs // x1_inner) % x1_n" in code
    for case in diag.cases_for("cpu"):
        _agrees(diag, code, case=case)
    _agrees(diag, m.space.render({**m.space.default, "variant": "persistent", "BLOCK": 256, "num_warps": 2}))
    with pytest.raises(AssertionError):   # read as a row (A[j] for B[i, j]): wrong unless A is constant
        _agrees(diag, code.replace("(offs // x1_inner) % x1_n", "offs % x1_n"))

    both = _problem(tmp_path, "diag_row", "    def forward(self, A, B):\n"
                    "        return A.unsqueeze(0).unsqueeze(2) * B + A", "[torch.randn(7), torch.randn(2, 7, 7)]")
    m = match_problem(both)
    code = m.space.render(m.space.default)
    assert "return pointwise(B, A, A.unsqueeze(0).unsqueeze(2))" in code
    _agrees(both, code)

    chan = _problem(tmp_path, "chan_bias", "    def __init__(self):\n        super().__init__()\n"
                    "        self.bias = nn.Parameter(torch.randn(3, 1, 1))\n"
                    "    def forward(self, x):\n        return torch.relu(x + self.bias)",
                    "[torch.randn(2, 3, 5, 6)]")
    m = match_problem(chan)
    assert m.summary == "elementwise add -> relu on 2x3x5x6 float32"
    _agrees(chan, m.space.render(m.space.default), perturb=True)

    # unsqueezed in the middle (broadcast along a middle dim) stays refused, naming it
    middle = _problem(tmp_path, "mid_unsq", "    def forward(self, A, B):\n        return A.unsqueeze(1) * B",
                      "[torch.randn(4, 6), torch.randn(4, 5, 6)]")
    with pytest.raises(Unmatched, match=r"A unsqueezed is \(4, 1, 6\), not broadcast"):
        match_problem(middle)


def test_group_norm_and_instance_norm_get_the_chunked_row_normalisation(tmp_path):
    gn = _problem(tmp_path, "gn", "    def __init__(self, c, g):\n        super().__init__()\n"
                  "        self.gn = nn.GroupNorm(num_groups=g, num_channels=c)\n"
                  "    def forward(self, x):\n        return self.gn(x)",
                  "[torch.randn(2, 4, 24, 40) + 3.0]", init="[4, 2]")
    m = match_problem(gn)
    assert (m.kind, m.summary) == ("row_norm", "group norm (2 groups) of 2x4x24x40 float32")
    assert "return row_norm(x, self.gn.weight, self.gn.bias, self.gn.num_groups)" in m.space.render(m.space.default)
    # rows of 2 x 960 values: one chunk at the default, two of 1024 (the second partial) at the other point
    for p in (m.space.default, {"CHUNK": 1024, "num_warps": 1}):
        _agrees(gn, m.space.render(p), perturb=True)
    code = m.space.render({"CHUNK": 1024, "num_warps": 4})
    with pytest.raises(AssertionError):   # the chunks' means must enter the variance (Chan's merge)
        _agrees(gn, code.replace(" + tl.sum(ns * dm * dm, axis=0)", ""), perturb=True)
    assert m.space.infeasible({"CHUNK": 16384, "num_warps": 1})
    # the group count from module-level sizes: the smaller cases build the module with other counts (KernelBench's
    # 35_GroupNorm_ has 8 groups at its own size); the kernel reads the module's, not the traced number
    sized = _problem(tmp_path, "gn_sized", "    def __init__(self, c, g):\n        super().__init__()\n"
                     "        self.gn = nn.GroupNorm(num_groups=g, num_channels=c)\n"
                     "    def forward(self, x):\n        return self.gn(x)",
                     "[torch.rand(batch, features, h, w)]", init="[features, groups]",
                     sizes="batch = 32\nfeatures = 64\ngroups = 8\nh = 256\nw = 256")
    m = match_problem(sized)
    cases = sized.cases_for("cpu")
    assert cases and all(c.params["groups"] != 8 for c in cases), [c.params for c in cases]   # traced at 8
    for case in cases:
        _agrees(sized, m.space.render(m.space.default), case=case)
    baked = m.space.render(m.space.default).replace("self.gn.num_groups)", "8)")
    failed = 0
    for case in cases:   # the traced count at every case: wrong, or a launch that fails, at each
        try:
            _agrees(sized, baked, case=case)
        except Exception:   # noqa: BLE001 - an assertion or the interpreter's error, either is the failure wanted
            failed += 1
    assert failed == len(cases)

    inorm = _problem(tmp_path, "inorm", "    def __init__(self, c):\n        super().__init__()\n"
                     "        self.inorm = nn.InstanceNorm2d(num_features=c)\n"
                     "    def forward(self, x):\n        return self.inorm(x)",
                     "[torch.rand(batch, c, h, w)]", init="[c]", sizes="batch = 3\nc = 5\nh = 30\nw = 50")
    m = match_problem(inorm)
    assert (m.kind, m.summary) == ("row_norm", "instance norm of 3x5x30x50 float32")
    for case in inorm.cases_for("cpu"):
        _agrees(inorm, m.space.render({"CHUNK": 1024, "num_warps": 4}), case=case)
    _agrees(inorm, m.space.render(m.space.default))

    # group norm followed by an activation is outside the pattern
    act = _problem(tmp_path, "gn_relu", "    def __init__(self):\n        super().__init__()\n"
                   "        self.gn = nn.GroupNorm(2, 4)\n    def forward(self, x):\n        return self.gn(x).relu()",
                   "[torch.randn(2, 4, 6, 6)]")
    with pytest.raises(Unmatched):
        match_problem(act)
