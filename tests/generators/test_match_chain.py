"""Level-2 chains (generators/matched_chain.py): a convolution or a linear layer, elementwise ops, group / batch /
instance norm, pooling, reductions, more elementwise ops, matched as the existing generated kernels run one after the
other; each chain agrees with torch on the interpreter with the reference's weights moved off their initial values,
the judge passes it and fails a wrong one, and graphs just outside the pattern are not matched."""
from __future__ import annotations

import pytest
import torch

from kernelsearch.generators.match import Unmatched, match_problem
from kernelsearch.generators.matched_chain import match_chain
from kernelsearch.generators.trace import trace_problem
from kernelsearch.judge.harness import evaluate
from kernelsearch.judge.problem import load_source_module
from kernelsearch.judge.settings import EvalSettings
from tests.generators.test_match import FIXTURES, _agrees, _load, _problem

_CONV = "    def __init__(self):\n        super().__init__()\n        self.conv = nn.Conv2d(3, 8, 3)\n{extra}" \
        "    def forward(self, x):\n{body}"
_X = "[torch.randn(batch, 3, 7, 8)]"


def _conv_problem(tmp_path, name, extra, body):
    return _problem(tmp_path, name, _CONV.format(extra=extra, body=body), _X, sizes="batch = 2")


def _cpu_case(problem):
    return problem.cases_for("cpu")[0]


def test_conv_elementwise_group_norm_elementwise_is_four_kernels_that_agree():
    problem = _load(FIXTURES / "conv_groupnorm.py")
    m = match_problem(problem)
    assert m.kind == "conv_chain"
    assert m.summary.startswith("convolution 2-D of 4x3x10x10 float32 (kernel 3, stride 1, padding 1, bias) -> "
                                "4x8x10x10, then elementwise add -> mul -> sigmoid, then group norm, then elementwise "
                                "relu -> mul")
    code = m.space.render(m.space.default)
    # the stages in order, each reading the previous one's output; the group count the candidate's own module's
    assert "y1 = pointwise_1(y0, self.bias, self.scale)" in code
    assert "y2 = row_norm_2(y1, self.group_norm.weight, self.group_norm.bias, self.group_norm.num_groups)" in code
    assert "y3 = pointwise_3(y2)" in code and "return y3" in code
    _agrees(problem, code, case=_cpu_case(problem), perturb=True)
    # the convolution's other kernel, the same chain after it
    direct = {**m.space.default, "variant": "direct"}
    _agrees(problem, m.space.render(direct), case=_cpu_case(problem), perturb=True)


def test_gemm_batch_norm_elementwise_agrees():
    problem = _load(FIXTURES / "gemm_batchnorm.py")
    m = match_problem(problem)
    assert (m.kind, m.summary) == ("gemm_chain", "linear 48x24 float32 -> 40, then elementwise add, then batch norm, "
                                   "then elementwise gelu -> relu (the matmul family's GEMM, then one generated "
                                   "kernel a stage)")
    code = m.space.render(m.space.default)
    assert "y0 = matmul(x, self.gemm.weight.t())" in code and "y1 = pointwise_1(y0, self.gemm.bias)" in code
    _agrees(problem, code, case=_cpu_case(problem), perturb=True)
    _agrees(problem, code, case=problem.cases_for("cpu")[1], perturb=True)   # other sizes: rows, columns


def test_conv_instance_norm_and_conv_batch_norm_agree(tmp_path):
    inorm = _load(FIXTURES / "conv_instancenorm.py")
    m = match_problem(inorm)
    assert m.kind == "conv_chain" and "then instance norm, then elementwise div" in m.summary
    code = m.space.render(m.space.default)
    assert "row_norm_1(y0, None, None, y0.shape[1])" in code
    _agrees(inorm, code, case=_cpu_case(inorm), perturb=True)

    bn = _conv_problem(tmp_path, "conv_bn", "        self.bn = nn.BatchNorm2d(8)\n",
                       "        return torch.tanh(self.bn(self.conv(x) * 0.5)) - 1.0")
    m = match_problem(bn)
    assert m.kind == "conv_chain" and m.summary.endswith("then elementwise mul, then batch norm, then elementwise "
                                                         "tanh -> sub (the generated convolution, then one generated "
                                                         "kernel a stage)")
    _agrees(bn, m.space.render(m.space.default), case=_cpu_case(bn), perturb=True)


def test_a_stage_right_after_the_head_and_two_normalisations(tmp_path):
    """Batch norm straight on the convolution (no elementwise kernel between), then group norm after an activation:
    stages read the previous one's output whatever the order."""
    two = _conv_problem(tmp_path, "conv_bn_gn", "        self.bn = nn.BatchNorm2d(8)\n"
                        "        self.gn = nn.GroupNorm(2, 8, eps=1e-3)\n",
                        "        return self.gn(torch.relu(self.bn(self.conv(x))))")
    m = match_problem(two)
    assert "then batch norm, then elementwise relu, then group norm" in m.summary
    code = m.space.render(m.space.default)
    assert "y1 = batch_norm_1(y0, self.bn.weight, self.bn.bias)" in code and "0.001" in code
    _agrees(two, code, case=_cpu_case(two), perturb=True)


def test_conv_pooling_and_reductions_agree():
    pooled = _load(FIXTURES / "conv_pool_mean.py")
    m = match_problem(pooled)
    assert m.summary.endswith("-> 2x8x10x10, then elementwise sub -> hardswish, then max pooling, then elementwise "
                              "mish, then mean over dims 2-3 (the generated convolution, then one generated kernel a "
                              "stage)")
    code = m.space.render(m.space.default)
    # the pooling's arguments the candidate's constructor's (a case building the model with another pool size)
    assert "self._pool_2 = _pool_params_2(pool_kernel_size)" in code and "y2 = pool_2(y1, self._pool_2)" in code
    assert "y4 = reduce_dim_4(y3.flatten(2, 3)).unflatten(2, (1, 1))" in code
    _agrees(pooled, code, case=_cpu_case(pooled), perturb=True)

    least = _load(FIXTURES / "conv_min_tanh.py")
    m = match_problem(least)
    assert "then min over dim 1, then elementwise tanh -> tanh" in m.summary
    _agrees(least, m.space.render(m.space.default), case=_cpu_case(least), perturb=True)


def test_gemm_then_a_sum_and_a_functional_pooling(tmp_path):
    gemm = _problem(tmp_path, "gemm_sum", "    def __init__(self):\n        super().__init__()\n"
                    "        self.fc = nn.Linear(12, 20)\n    def forward(self, x):\n"
                    "        return torch.sum(torch.sigmoid(self.fc(x)), dim=1, keepdim=True) * 0.5",
                    "[torch.randn(batch, 12)]", sizes="batch = 9")
    m = match_problem(gemm)
    assert (m.kind, m.summary) == ("gemm_chain", "linear 9x12 float32 -> 20, then elementwise add -> sigmoid, then "
                                   "sum over dim 1, then elementwise mul (the matmul family's GEMM, then one generated "
                                   "kernel a stage)")
    _agrees(gemm, m.space.render(m.space.default), case=_cpu_case(gemm), perturb=True)
    avg = _conv_problem(tmp_path, "conv_avg", "", "        y = torch.nn.functional.avg_pool2d(self.conv(x), 2, "
                        "stride=1, padding=1, count_include_pad=False)\n        return torch.amax(y, dim=(1, 2, 3))")
    m = match_problem(avg)
    code = m.space.render(m.space.default)
    assert "then avg pooling, then max over dims 1-3" in m.summary and "_POOL_ARGS_1 = ((2, 2), (1, 1)" in code
    _agrees(avg, code, case=_cpu_case(avg), perturb=True)


def test_softmax_along_the_channels_and_along_rows(tmp_path):
    soft = _conv_problem(tmp_path, "conv_softmax", "",
                         "        return torch.sigmoid(torch.softmax(self.conv(x), dim=1))")
    m = match_problem(soft)
    assert "then softmax over dim 1, then elementwise sigmoid" in m.summary
    code = m.space.render(m.space.default)
    assert "y1 = softmax_1(y0.movedim(1, -1)).movedim(-1, 1)" in code
    _agrees(soft, code, case=_cpu_case(soft), perturb=True)
    with pytest.raises(AssertionError):   # the softmax along the last dim instead: wrong values
        _agrees(soft, code.replace("softmax_1(y0.movedim(1, -1)).movedim(-1, 1)", "softmax_1(y0)"),
                case=_cpu_case(soft), perturb=True)
    rows = _problem(tmp_path, "gemm_softmax", "    def __init__(self):\n        super().__init__()\n"
                    "        self.fc = nn.Linear(12, 20)\n    def forward(self, x):\n"
                    "        return torch.softmax(torch.nn.functional.gelu(self.fc(x)), dim=1)",
                    "[torch.randn(batch, 12)]", sizes="batch = 9")
    m = match_problem(rows)
    assert m.summary.startswith("linear 9x12 float32 -> 20, then elementwise add -> gelu, then softmax over dim 1")
    _agrees(rows, m.space.render(m.space.default), case=_cpu_case(rows), perturb=True)


def test_a_run_reads_an_earlier_stage_s_input_or_output(tmp_path):
    residual = _conv_problem(tmp_path, "residual", "        self.gn = nn.GroupNorm(2, 8)\n",
                             "        y = self.conv(x)\n        return torch.relu(self.gn(y) + y)")
    m = match_problem(residual)
    assert m.summary.endswith("then group norm, then elementwise add -> relu (the generated convolution, then one "
                              "generated kernel a stage)")
    code = m.space.render(m.space.default)
    assert "y2 = pointwise_2(y1, y0)" in code
    _agrees(residual, code, case=_cpu_case(residual), perturb=True)
    centred = _problem(tmp_path, "gemm_centred", "    def __init__(self):\n        super().__init__()\n"
                       "        self.fc = nn.Linear(12, 20)\n    def forward(self, x):\n        y = self.fc(x)\n"
                       "        y = torch.max(y, dim=0, keepdim=True).values\n"
                       "        return torch.nn.functional.gelu(y - y.mean(dim=1, keepdim=True))",
                       "[torch.randn(batch, 12)]", sizes="batch = 9")
    m = match_problem(centred)
    assert "then max over dim 0, then mean over dim 1, then elementwise sub -> gelu" in m.summary
    code = m.space.render(m.space.default)
    assert "y4 = pointwise_4(y2, y3)" in code   # the max's values and their mean, both earlier stages' outputs
    _agrees(centred, code, case=_cpu_case(centred), perturb=True)
    with pytest.raises(AssertionError):   # the operands swapped: the mean minus the values, at the mean's shape
        _agrees(centred, code.replace("pointwise_4(y2, y3)", "pointwise_4(y3, y2)"), case=_cpu_case(centred),
                perturb=True)


def test_one_d_pooling_of_a_gemm_s_rows_with_the_constructor_s_pool_size(tmp_path):
    """Level 2's Matmul_AvgPool_*: x.unsqueeze(1) pooled by nn.AvgPool1d, squeezed back; the pool size is the
    candidate's own constructor's (a case building the model with another size pools with that one)."""
    body = ("    def __init__(self, k):\n        super().__init__()\n        self.fc = nn.Linear(12, 40)\n"
            "        self.pool = nn.AvgPool1d(kernel_size=k)\n    def forward(self, x):\n"
            "        x = self.pool(self.fc(x).unsqueeze(1)).squeeze(1)\n"
            "        return torch.max(torch.relu(x), dim=1).values")
    problem = _problem(tmp_path, "gemm_avgpool1d", body, "[torch.randn(batch, 12)]", init="[k]",
                       sizes="batch = 9\nk = 4")
    m = match_problem(problem)
    assert "then avg pooling, then elementwise relu, then max over dim 1" in m.summary
    code = m.space.render(m.space.default)
    assert "self._pool_2 = _pool_params_2(kernel_size=k)" in code
    assert "y2 = pool_2(y1.unsqueeze(1), self._pool_2).squeeze(1)" in code
    _agrees(problem, code, case=_cpu_case(problem), perturb=True)
    mod = load_source_module(code, "ks_test_chain_pool1d")
    x = torch.randn(5, 12)
    for k in (3, 8):
        torch.manual_seed(0)
        ref = problem.module.Model(k)
        new = mod.ModelNew(k)
        new.load_state_dict(ref.state_dict(), strict=False)
        with torch.no_grad():
            torch.testing.assert_close(new(x), ref(x), atol=1e-4, rtol=1e-4)
    conv1d = _problem(tmp_path, "conv_pool1d", "    def __init__(self):\n        super().__init__()\n"
                      "        self.conv = nn.Conv1d(3, 8, 3)\n    def forward(self, x):\n"
                      "        return torch.nn.functional.max_pool1d(self.conv(x), 2, stride=1) * 2.0",
                      "[torch.randn(batch, 3, 12)]", sizes="batch = 2")
    m = match_problem(conv1d)
    assert "then max pooling, then elementwise mul" in m.summary
    _agrees(conv1d, m.space.render(m.space.default), case=_cpu_case(conv1d), perturb=True)


# wrong kernels: each edit breaks one thing the chain needs
WRONG = [
    ("the group norm's mean not subtracted", "y = (x - mean) * rstd", "y = x * rstd"),
    ("the second elementwise kernel skipped", "return y3", "return y2"),
    ("the group norm reads the convolution, not the first elementwise kernel", "row_norm_2(y1,", "row_norm_2(y0,"),
]


WRONG_POOLED = [
    ("the minimum over the channels taken as the maximum", "tl.min(acc, axis=0)", "tl.max(acc, axis=0)"),
    ("the mean's count forgotten", "tl.sum(acc, axis=0) / R", "tl.sum(acc, axis=0)"),
    ("the pooling skipped", "y3 = pointwise_3(y2)", "y3 = pointwise_3(y1)"),
]


@pytest.mark.parametrize("why,old,new", WRONG + WRONG_POOLED, ids=[w[0] for w in WRONG + WRONG_POOLED])
def test_a_wrong_chain_fails(why, old, new):
    name = "conv_groupnorm" if (why, old, new) in WRONG else \
        "conv_min_tanh" if "minimum" in why else "conv_pool_mean"
    problem = _load(FIXTURES / f"{name}.py")
    m = match_problem(problem)
    code = m.space.render(m.space.default)
    assert old in code
    with pytest.raises(AssertionError):
        _agrees(problem, code.replace(old, new), case=_cpu_case(problem), perturb=True)


@pytest.mark.slow   # 10 s or more on a 2-core machine: CI runs it (make test-slow)
def test_the_judge_passes_the_chain_and_fails_a_wrong_one():
    problem = _load(FIXTURES / "gemm_batchnorm.py")
    m = match_problem(problem)
    code = m.space.render(m.space.default)
    settings = EvalSettings(trials=1, timing_iters=2, aot_compile=False)
    r = evaluate(problem, code, settings, mode="cpu", seed=3)
    assert r.status.value == "ok", (r.status, r.reason)
    # the batch norm's biased variance read as unbiased (a small error, over the judge's tolerance)
    wrong = code.replace("var = (tl.sum(m2s, axis=0) + tl.sum(ns * dm * dm, axis=0)) / L",
                         "var = (tl.sum(m2s, axis=0) + tl.sum(ns * dm * dm, axis=0)) / (L - 1)")
    assert wrong != code
    r = evaluate(problem, wrong, settings, mode="cpu", seed=3)
    assert r.status.value == "incorrect", (r.status, r.reason)


@pytest.mark.slow   # 10 s or more on a 2-core machine: CI runs it (make test-slow)
def test_the_judge_passes_a_pooled_chain_and_fails_one_that_skips_the_pooling():
    problem = _load(FIXTURES / "conv_pool_mean.py")
    m = match_problem(problem)
    code = m.space.render(m.space.default)
    settings = EvalSettings(trials=1, timing_iters=2, aot_compile=False)
    r = evaluate(problem, code, settings, mode="cpu", seed=3)
    assert r.status.value == "ok", (r.status, r.reason)
    wrong = code.replace("y3 = pointwise_3(y2)", "y3 = pointwise_3(y1)")
    assert wrong != code
    r = evaluate(problem, wrong, settings, mode="cpu", seed=3)
    assert r.status.value == "incorrect", (r.status, r.reason)


def test_graphs_just_outside_the_pattern_are_not_matched(tmp_path):
    gn = "        self.gn = nn.GroupNorm(2, 8)\n"
    inner = _conv_problem(tmp_path, "inner", gn, "        a = torch.relu(self.conv(x))\n"
                          "        return self.gn(a * 2.0) + a")
    assert match_chain(trace_problem(inner)) is None   # an add reads a value inside the run before the norm
    with pytest.raises(Unmatched, match="native_group_norm"):
        match_problem(inner)
    lse = _conv_problem(tmp_path, "gn_logsumexp", gn,
                        "        return torch.logsumexp(self.gn(self.conv(x)), dim=(1, 3))")
    assert match_chain(trace_problem(lse)) is None   # a logsumexp of dims not next to each other
    apart = _conv_problem(tmp_path, "sum_apart", "", "        return self.conv(x).sum(dim=(1, 3))")
    assert match_chain(trace_problem(apart)) is None   # a reduction of dims not next to each other
    unbatched = _conv_problem(tmp_path, "conv_pool3d_of_4d", "",
                              "        return torch.nn.functional.max_pool3d(self.conv(x), 2)")
    assert match_chain(trace_problem(unbatched)) is None   # a 3-D pooling of a 4-D tensor pools the channels too
    dropout = _conv_problem(tmp_path, "gn_dropout", gn + "        self.drop = nn.Dropout(0.5)\n",
                            "        return self.drop(self.gn(self.conv(x)))")
    assert match_chain(trace_problem(dropout)) is None   # random in training mode, as the judge runs the reference
    # dropout that is the identity (p = 0, or a module in evaluation mode) leaves nothing in the graph: matched
    for i, ctor in enumerate(("nn.Dropout(0.0)", "nn.Dropout(0.5).eval()")):
        same = _conv_problem(tmp_path, f"gn_identity_{i}", gn + f"        self.drop = {ctor}\n",
                             "        return self.drop(self.gn(self.conv(x)))")
        assert match_chain(trace_problem(same)).summary.endswith("then group norm (the generated convolution, then "
                                                                 "one generated kernel a stage)")
    frozen = _conv_problem(tmp_path, "bn_eval", "        self.bn = nn.BatchNorm2d(8).eval()\n",
                           "        return self.bn(self.conv(x))")
    assert match_chain(trace_problem(frozen)) is None   # batch norm in evaluation mode: the running statistics
    no_head = _problem(tmp_path, "gn_only", "    def __init__(self):\n        super().__init__()\n" + gn +
                       "    def forward(self, x):\n        return torch.relu(self.gn(x))", "[torch.randn(2, 8, 4, 4)]")
    assert match_chain(trace_problem(no_head)) is None
    plain = _conv_problem(tmp_path, "conv_relu_only", "", "        return torch.relu(self.conv(x))")
    assert match_chain(trace_problem(plain)) is None   # no norm: matched_conv's epilogue, not a chain
    assert match_problem(plain).kind == "conv_epilogue"
