"""Level-2 chains with a logsumexp or a layer norm stage (generators/matched_chain.py; KernelBench level 2's
Gemm_LogSumExp_*, Conv3d_Max_LogSumExp_ReLU, Matmul_Sum_Max_AvgPool_LogSumExp_LogSumExp, ConvTranspose3d_LayerNorm_*):
the logsumexp is generators/reduction.py's kernel (a running maximum and a sum of exp(x - maximum) per column), the
layer norm the layernorm family's; each chain agrees with torch on the interpreter, the judge passes one and fails a
logsumexp without its max shift (exp overflows), and graphs just outside the pattern are not matched. Also the
other level-2 shapes matched with them: a second linear layer, a copy of the input made before the head, a parameter
viewed with dims of 1, a pooling of the input before the convolution, a softmax over flattened dims."""
from __future__ import annotations

import pytest
import torch

from kernelsearch.generators.match import match_problem
from kernelsearch.generators.matched_chain import match_chain
from kernelsearch.generators.reduction import reduction_space
from kernelsearch.generators.trace import trace_problem
from kernelsearch.judge.harness import evaluate
from kernelsearch.judge.problem import load_source_module
from kernelsearch.judge.settings import EvalSettings
from tests.generators.test_match import _agrees, _problem

_INIT = "    def __init__(self):\n        super().__init__()\n"
_CONV = _INIT + "        self.conv = nn.Conv2d(3, 8, 3)\n{extra}    def forward(self, x):\n{body}"
_FC = _INIT + "        self.fc = nn.Linear(12, 20)\n{extra}    def forward(self, x):\n{body}"
_NO_SHIFT = [("shift = tl.where(tl.abs(new) == float(\"inf\"), 0.0, new)", "shift = new * 0.0"),
             ("shift = tl.where(tl.abs(top) == float(\"inf\"), 0.0, top)", "shift = top * 0.0")]


def _conv(tmp_path, name, body, extra=""):
    return _problem(tmp_path, name, _CONV.format(extra=extra, body=body), "[torch.randn(batch, 3, 7, 8)]",
                    sizes="batch = 2")


def _gemm(tmp_path, name, body, extra=""):
    return _problem(tmp_path, name, _FC.format(extra=extra, body=body), "[torch.randn(batch, 12)]", sizes="batch = 9")


def _case(problem):
    return problem.cases_for("cpu")[0]


def _lse_kernel(dim: int, keepdim: bool, inner: int, params: dict | None = None):
    space = reduction_space("logsumexp", dim, keepdim, inner, "x", "x",
                            "    def __init__(self):\n        super().__init__()", "logsumexp")
    code = space.render({**space.default, **(params or {})})
    return load_source_module(code, f"ks_test_lse_{dim}_{keepdim}_{inner}_{abs(hash(str(params)))}").reduce_dim


def test_the_logsumexp_kernel_is_torch_s_at_any_length_with_infinities():
    """Rows shorter and longer than the tile, a column, a length of 1, values past exp's fp32 range, rows all -inf,
    rows holding +inf or NaN: torch.logsumexp's values (its -inf / inf / NaN where it gives them)."""
    torch.manual_seed(0)
    last = _lse_kernel(1, False, 1, {"BLOCK_R": 16})
    for n in (1, 5, 16, 37):
        x = torch.randn(6, n) * 60.0   # values up to ~200: exp(x) alone is inf in fp32
        torch.testing.assert_close(last(x), torch.logsumexp(x, 1), atol=1e-5, rtol=1e-5)
    x = torch.randn(5, 37)
    x[1] = float("-inf")
    x[2, 3] = float("inf")
    x[3, :20] = float("-inf")
    x[4, 7] = float("nan")
    torch.testing.assert_close(last(x), torch.logsumexp(x, 1), atol=1e-5, rtol=1e-5, equal_nan=True)
    mid = _lse_kernel(1, True, 6, {"BLOCK_R": 4, "BLOCK_I": 16})   # a middle dim: (2, 11, 6), tiles along R and I
    x = torch.randn(2, 11, 6) * 50.0
    x[0, :, 2] = float("-inf")
    torch.testing.assert_close(mid(x), torch.logsumexp(x, 1, keepdim=True), atol=1e-5, rtol=1e-5)


@pytest.mark.slow   # 10 s or more on a 2-core machine: CI runs it (make test-slow)
def test_gemm_logsumexp_then_elementwise_agrees_and_the_judge_fails_it_without_the_shift(tmp_path):
    """Level 2's Gemm_LogSumExp_LeakyReLU_*: the GEMM, its bias and a scale in one elementwise kernel, the logsumexp
    of the rows, then the activations; values scaled past exp's fp32 range, so a sum of exp(x) overflows."""
    problem = _gemm(tmp_path, "gemm_lse", "        y = torch.logsumexp(self.fc(x) * 200.0, dim=1, keepdim=True)\n"
                    "        return torch.nn.functional.gelu(torch.nn.functional.leaky_relu(y, 0.01))")
    m = match_problem(problem)
    assert (m.kind, m.summary) == ("gemm_chain", "linear 9x12 float32 -> 20, then elementwise add -> mul, then "
                                   "logsumexp over dim 1, then elementwise leaky_relu -> gelu (the matmul family's "
                                   "GEMM, then one generated kernel a stage)")
    code = m.space.render(m.space.default)
    assert "y2 = reduce_dim_2(y1)" in code and "y3 = pointwise_3(y2)" in code
    _agrees(problem, code, case=_case(problem), perturb=True)
    settings = EvalSettings(trials=1, timing_iters=2, aot_compile=False)
    r = evaluate(problem, code, settings, mode="cpu", seed=3)
    assert r.status.value == "ok", (r.status, r.reason)
    wrong = code
    for old, new in _NO_SHIFT:
        assert old in wrong
        wrong = wrong.replace(old, new)
    r = evaluate(problem, wrong, settings, mode="cpu", seed=3)
    assert r.status.value == "incorrect", (r.status, r.reason)


def test_conv_pool_logsumexp_over_the_channels_and_over_two_dims(tmp_path):
    """Conv3d_Max_LogSumExp_ReLU's shape (in 2-D): max pooling, logsumexp over the channels kept, relu; and a
    logsumexp over the spatial dims (flattened into one), not kept; the wrong dim (the last alone) fails."""
    problem = _conv(tmp_path, "conv_pool_lse", "        y = torch.nn.functional.max_pool2d(self.conv(x), 2)\n"
                    "        return torch.relu(torch.logsumexp(y, dim=1, keepdim=True))")
    m = match_problem(problem)
    assert m.kind == "conv_chain" and m.summary.endswith(
        "then max pooling, then logsumexp over dim 1, then elementwise relu (the generated convolution, then one "
        "generated kernel a stage)")
    code = m.space.render(m.space.default)
    _agrees(problem, code, case=_case(problem), perturb=True)
    spatial = _conv(tmp_path, "conv_lse_hw", "        return torch.logsumexp(self.conv(x) * 30.0, dim=(2, 3)) - 1.0")
    m = match_problem(spatial)
    assert "then logsumexp over dims 2-3, then elementwise sub" in m.summary
    code = m.space.render(m.space.default)
    assert "reduce_dim_2(y1.flatten(2, 3))" in code
    _agrees(spatial, code, case=_case(spatial), perturb=True)
    with pytest.raises(AssertionError):   # the last dim alone, its result's shape another
        _agrees(spatial, code.replace("reduce_dim_2(y1.flatten(2, 3))", "reduce_dim_2(y1)"), case=_case(spatial),
                perturb=True)


def test_reductions_over_a_length_of_one_then_two_logsumexps(tmp_path):
    """Matmul_Sum_Max_AvgPool_LogSumExp_LogSumExp: after the sum keeps a dim of 1, every later reduction (max, mean,
    two logsumexps) is over a length of 1."""
    problem = _gemm(tmp_path, "gemm_sum_lse_lse", "        y = torch.sum(self.fc(x), dim=1, keepdim=True)\n"
                    "        y = torch.max(y, dim=1, keepdim=True)[0]\n        y = torch.mean(y, dim=1, keepdim=True)\n"
                    "        y = torch.logsumexp(y, dim=1, keepdim=True)\n"
                    "        return torch.logsumexp(y, dim=1, keepdim=True)")
    m = match_problem(problem)
    assert m.summary.endswith("then sum over dim 1, then max over dim 1, then mean over dim 1, then logsumexp over "
                              "dim 1, then logsumexp over dim 1 (the matmul family's GEMM, then one generated kernel "
                              "a stage)")
    _agrees(problem, m.space.render(m.space.default), case=_case(problem), perturb=True)


def test_layer_norm_in_a_chain_with_and_without_affine(tmp_path):
    """ConvTranspose3d_Sum_LayerNorm_AvgPool_GELU's shape (in 2-D): an add, nn.LayerNorm over the last dim (the
    width, the module's weight and bias), pooling, gelu; F.layer_norm over the last two dims with no weight nor
    bias after a GEMM."""
    problem = _conv(tmp_path, "conv_ln_pool", "        y = self.norm(self.conv(x) + 1.0)\n"
                    "        return torch.nn.functional.gelu(torch.nn.functional.avg_pool2d(y, 2))",
                    extra="        self.norm = nn.LayerNorm(6, eps=1e-4)\n")
    m = match_problem(problem)
    assert m.kind == "conv_chain" and m.summary.endswith(
        "then elementwise add, then layer norm over the last 1 dim, then avg pooling, then elementwise gelu (the "
        "generated convolution, then one generated kernel a stage)")
    code = m.space.render(m.space.default)
    assert "y2 = layer_norm_2(y1, self.norm.weight, self.norm.bias, 0.0001, n_dims=1)" in code
    assert "* rstd[:, None] * w[None, :] + b[None, :]" in code   # the rows-in-registers variant
    _agrees(problem, code, case=_case(problem), perturb=True)
    with pytest.raises(AssertionError):   # the affine step dropped: the perturbed weight and bias matter
        _agrees(problem, code.replace("* rstd[:, None] * w[None, :] + b[None, :]", "* rstd[:, None]"),
                case=_case(problem), perturb=True)
    plain = _conv(tmp_path, "conv_ln_hw", "        return torch.nn.functional.layer_norm(torch.relu(self.conv(x)), "
                  "(5, 6)) * 2.0")
    m = match_problem(plain)
    assert "then elementwise relu, then layer norm over the last 2 dims, then elementwise mul" in m.summary
    code = m.space.render(m.space.default)
    assert "y1.new_ones(y1.shape[-2:]), y1.new_zeros(y1.shape[-2:]), 1e-05, n_dims=2)" in code
    _agrees(plain, code, case=_case(plain), perturb=True)
    with pytest.raises(AssertionError):   # over the last dim alone
        _agrees(plain, code.replace("n_dims=2)", "n_dims=1)").replace("shape[-2:]", "shape[-1:]"), case=_case(plain),
                perturb=True)
    rows = _gemm(tmp_path, "gemm_ln", "        return torch.sigmoid(self.norm(self.fc(x)))",
                 extra="        self.norm = nn.LayerNorm(20, elementwise_affine=False)\n")
    m = match_problem(rows)
    assert "then elementwise add, then layer norm over the last 1 dim, then elementwise sigmoid" in m.summary
    _agrees(rows, m.space.render(m.space.default), case=_case(rows), perturb=True)


def test_graphs_just_outside_logsumexp_and_layer_norm_are_not_matched(tmp_path):
    apart = _conv(tmp_path, "lse_apart", "        return torch.logsumexp(self.conv(x), dim=(1, 3))")
    assert match_chain(trace_problem(apart)) is None   # dims not next to each other
    computed = _gemm(tmp_path, "ln_computed_weight", "        return torch.nn.functional.layer_norm(self.fc(x), (20,), "
                     "self.w * 2.0)", extra="        self.w = nn.Parameter(torch.ones(20))\n")
    assert match_chain(trace_problem(computed)) is None   # a weight computed in forward, not a parameter
    stats = _gemm(tmp_path, "ln_twice", "        y = self.fc(x)\n"
                  "        return torch.nn.functional.layer_norm(y, (20,)) + torch.logsumexp(y, 0)")
    assert match_chain(trace_problem(stats)) is None   # two stages reading the head side by side


def test_a_second_linear_layer_and_a_copy_of_the_input_read_after_the_head(tmp_path):
    """Gemm_Sigmoid_LogSumExp's two linear layers: the second the head's GEMM on the sigmoid's output, its bias
    added by the elementwise kernel after it; Gemm_Subtract_GlobalAvgPool_LogSumExp_GELU_ResidualAdd's
    x.clone().detach() made before the head, read by the last elementwise kernel as the input itself."""
    two = _problem(tmp_path, "gemm_sigmoid_gemm_lse", _INIT + "        self.fc1 = nn.Linear(12, 20)\n"
                   "        self.fc2 = nn.Linear(20, 7)\n    def forward(self, x):\n"
                   "        return torch.logsumexp(self.fc2(torch.sigmoid(self.fc1(x))), dim=1)",
                   "[torch.randn(batch, 12)]", sizes="batch = 9")
    m = match_problem(two)
    assert (m.kind, m.summary) == ("gemm_chain", "linear 9x12 float32 -> 20, then elementwise add -> sigmoid, then "
                                   "linear -> 7, then elementwise add, then logsumexp over dim 1 (the matmul family's "
                                   "GEMM, then one generated kernel a stage)")
    code = m.space.render(m.space.default)
    assert "y2 = matmul(y1, self.fc2.weight.t())" in code and "y3 = pointwise_2(y2, self.fc2.bias)" in code
    _agrees(two, code, case=_case(two), perturb=True)
    with pytest.raises(AssertionError):   # the second layer's bias forgotten
        _agrees(two, code.replace("y4 = reduce_dim_3(y3)", "y4 = reduce_dim_3(y2)"), case=_case(two), perturb=True)
    residual = _problem(tmp_path, "gemm_lse_residual", _INIT + "        self.fc = nn.Linear(12, 12)\n"
                        "        self.sub = nn.Parameter(torch.randn(12))\n    def forward(self, x):\n"
                        "        original = x.clone().detach()\n        y = torch.mean(self.fc(x) - self.sub, dim=1, "
                        "keepdim=True)\n        y = torch.logsumexp(y, dim=1, keepdim=True)\n"
                        "        return torch.nn.functional.gelu(y) + original",
                        "[torch.randn(batch, 12)]", sizes="batch = 9")
    m = match_problem(residual)
    assert m.summary.endswith("then mean over dim 1, then logsumexp over dim 1, then elementwise gelu -> add (the "
                              "matmul family's GEMM, then one generated kernel a stage)")
    code = m.space.render(m.space.default)
    assert "y4 = pointwise_4(x, y3)" in code
    _agrees(residual, code, case=_case(residual), perturb=True)
    side = _problem(tmp_path, "two_linears_side_by_side", _INIT + "        self.fc1 = nn.Linear(12, 20)\n"
                    "        self.fc2 = nn.Linear(12, 20)\n    def forward(self, x):\n"
                    "        return torch.logsumexp(torch.relu(self.fc1(x)) + self.fc2(x), dim=1)",
                    "[torch.randn(batch, 12)]", sizes="batch = 9")
    assert match_chain(trace_problem(side)) is None   # the second layer reads the input, not the chain
    shifted = _problem(tmp_path, "gemm_of_the_input_after_a_copy", _INIT + "        self.fc = nn.Linear(12, 12)\n"
                       "    def forward(self, x):\n        return torch.logsumexp(self.fc(x), dim=1) + (x * 2.0).sum()",
                       "[torch.randn(batch, 12)]", sizes="batch = 9")
    assert match_chain(trace_problem(shifted)) is None   # an op before the head computes on the input


def test_a_parameter_viewed_with_dims_of_one_is_read_by_the_elementwise_kernel(tmp_path):
    """ConvTranspose3d_MaxPool_Softmax_Subtract_Swish_Max's `x - self.subtract.view(1, -1, 1, 1, 1)` (in 2-D): the
    parameter read through its view (dims of 1 added) as a per-channel operand; a view that reshapes is not."""
    problem = _conv(tmp_path, "conv_softmax_sub_view", "        y = torch.softmax(self.conv(x), dim=1)\n"
                    "        y = y - self.sub.view(1, -1, 1, 1)\n"
                    "        return torch.max(torch.sigmoid(y) * y, dim=1)[0]",
                    extra="        self.sub = nn.Parameter(torch.randn(8))\n")
    m = match_problem(problem)
    assert m.summary.endswith("then softmax over dim 1, then elementwise sub -> sigmoid -> mul, then max over dim 1 "
                              "(the generated convolution, then one generated kernel a stage)")
    code = m.space.render(m.space.default)
    assert "self.sub.view(1, -1, 1, 1)" in code
    _agrees(problem, code, case=_case(problem), perturb=True)
    reshaped = _conv(tmp_path, "conv_sub_reshaped", "        return torch.relu(torch.softmax(self.conv(x), dim=1) - "
                     "self.sub.view(5, 6))", extra="        self.sub = nn.Parameter(torch.randn(30))\n")
    assert match_chain(trace_problem(reshaped)) is None


def test_pooling_before_the_convolution_and_a_softmax_over_flattened_dims(tmp_path):
    """ConvTranspose3d_AvgPool_Clamp_Softmax_Multiply's shape (in 2-D): nn.AvgPool2d of the input read by the
    convolution (the pooling kernel first, its size the constructor's), then a softmax over the spatial dims flattened
    into one and viewed back; the softmax over the last dim alone fails; a pooling of a computed value before the
    convolution is not matched."""
    body = (_INIT + "        self.pool = nn.AvgPool2d(2)\n        self.conv = nn.Conv2d(3, 8, 3)\n"
            "        self.scale = nn.Parameter(torch.ones(1, 8, 1, 1))\n    def forward(self, x):\n"
            "        y = torch.clamp(self.conv(self.pool(x)), 0.0, 1.0)\n        n, c, h, w = y.shape\n"
            "        y = torch.softmax(y.view(n, c, -1), dim=2).view(n, c, h, w)\n        return y * self.scale")
    problem = _problem(tmp_path, "pool_conv_softmax_flat", body, "[torch.randn(batch, 3, 10, 12)]",
                       sizes="batch = 2")
    m = match_problem(problem)
    assert m.summary.startswith("avg pooling of x, then convolution 2-D of 2x3x5x6 float32")
    assert m.summary.endswith("then elementwise clamp, then softmax over dims 2-3 (flattened), then elementwise mul "
                              "(the generated convolution, then one generated kernel a stage)")
    code = m.space.render(m.space.default)
    assert "pre0 = pool_1(x, self._pool_1)" in code and "y0 = conv(pre0, " in code
    assert "y3 = softmax_3(y2.flatten(2)).view_as(y2)" in code
    _agrees(problem, code, case=_case(problem), perturb=True)
    with pytest.raises(AssertionError):
        _agrees(problem, code.replace("softmax_3(y2.flatten(2))", "softmax_3(y2.flatten(3))"), case=_case(problem),
                perturb=True)
    computed = _problem(tmp_path, "relu_pool_conv", body.replace("self.pool(x)", "self.pool(torch.relu(x))"),
                        "[torch.randn(batch, 3, 10, 12)]", sizes="batch = 2")
    assert match_chain(trace_problem(computed)) is None
